//! Interpreter overhead per turn, with a provider that answers instantly
//! (canned answers, not the offline rules) and the booking tool replaced by
//! an in-process double, so what is timed is the runtime alone: the turn
//! pipeline, merging, validation, events and the session copy a turn works
//! on. No persistence.
//!
//! Two scenarios:
//! - the 5-turn booking conversation of `flows/booking.flow` (ask hotel,
//!   date, guests, confirm with branches, the auto `book` step);
//! - one turn that runs a generated chain of 200 auto steps
//!   (`limits.max_auto_steps` raised to 1000).
//!
//! Plain std timing: many iterations after a warm-up, p50/p99 per turn,
//! turns per second, and the peak heap a scenario holds, measured by a
//! counting global allocator. Run with
//! `cargo bench --bench runtime` (release profile).

use flowc::llm::Understanding;
use flowc::runtime::engine::Runtime;
use flowc::runtime::events::StopReason;
use flowc::runtime::session::Session;
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod support;
use support::{BOOKING_TURNS, booking_answers, compiled, machine, runtime, understood};

// ------------------------------------------------------------ allocator

/// Counts live heap bytes and remembers the highest count since the last
/// reset, so a scenario's peak memory can be read.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded to the system allocator with the caller's layout.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the pointer came from `alloc` with this layout.
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's pointer, layout and size.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            if new_size >= layout.size() {
                let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Starts a peak measurement; returns the live bytes it is relative to.
fn reset_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

fn peak_since(baseline: usize) -> usize {
    PEAK.load(Ordering::Relaxed).saturating_sub(baseline)
}

// ------------------------------------------------------------ statistics

struct Stats {
    name: &'static str,
    samples: Vec<Duration>,
    total: Duration,
    peak_bytes: usize,
}

impl Stats {
    fn percentile(&self, percent: f64) -> f64 {
        let mut sorted: Vec<Duration> = self.samples.clone();
        sorted.sort();
        let last = sorted.len().saturating_sub(1);
        let rank = ((percent / 100.0) * last as f64).round() as usize;
        sorted.get(rank.min(last)).map_or(0.0, |sample| sample.as_secs_f64() * 1e6)
    }

    fn report(&self, target_us: f64) {
        let p50 = self.percentile(50.0);
        let p99 = self.percentile(99.0);
        let per_second = self.samples.len() as f64 / self.total.as_secs_f64();
        let verdict = if p50 < target_us { "within" } else { "OVER" };
        println!(
            "{:<28} {:>8} turns  p50 {:>9.2} µs  p99 {:>9.2} µs  {:>10.0} turns/s  peak {:>8.1} KiB  ({verdict} the {target_us} µs target)",
            self.name,
            self.samples.len(),
            p50,
            p99,
            per_second,
            self.peak_bytes as f64 / 1024.0,
        );
    }
}

// ------------------------------------------------------------ scenarios

fn booking(conversations: usize, warmup: usize) -> Stats {
    let text = match std::fs::read_to_string("flows/booking.flow") {
        Ok(text) => text,
        Err(error) => {
            eprintln!("run from the repository root: {error}");
            std::process::exit(2);
        }
    };
    let program = compiled("booking.flow", &text);
    let mut runtime = runtime(&program, booking_answers());

    let conversation = |runtime: &mut Runtime, samples: Option<&mut Vec<Duration>>| {
        let mut session = runtime.new_session("bench");
        let mut times = [Duration::ZERO; 5];
        for (index, message) in BOOKING_TURNS.iter().enumerate() {
            let started = Instant::now();
            let result = runtime.run_turn(&mut session, message);
            times[index] = started.elapsed();
            match result {
                Ok(result) => {
                    black_box(&result);
                }
                Err(error) => {
                    eprintln!("booking turn {index} failed: {error}");
                    std::process::exit(1);
                }
            }
        }
        if session.data.get("booking_id") != Some(&json!("GH-BENCH01")) {
            eprintln!("the booking conversation did not book: {:?}", session.data);
            std::process::exit(1);
        }
        if let Some(samples) = samples {
            samples.extend(times);
        }
    };
    for _ in 0..warmup {
        conversation(&mut runtime, None);
    }
    // The samples are the benchmark's own memory: allocated before the
    // peak measurement starts.
    let mut samples = Vec::with_capacity(conversations * 5);
    let baseline = reset_peak();
    for _ in 0..conversations {
        conversation(&mut runtime, Some(&mut samples));
    }
    Stats {
        name: "booking (5-turn conversation)",
        total: samples.iter().sum(),
        samples,
        peak_bytes: peak_since(baseline),
    }
}

fn chain_program(steps: usize) -> String {
    let mut text = String::from(
        "agent Chain { limits { max_auto_steps 1000 } }\n\
         schema { go: bool  n: int }\n\
         flow chain \"Chain\" {\n  when \"the user wants the chain\"\n  step ask { prompt \"Go?\" collect go }\n",
    );
    for index in 1..=steps {
        text.push_str(&format!("  auto step s{index} {{ set n = {index} }}\n"));
    }
    text.push_str("  step done { say \"Ran {{n}} steps.\" }\n}\n");
    text
}

fn chain(turns: usize, warmup: usize) -> Stats {
    const STEPS: usize = 200;
    let program = compiled("chain.flow", &chain_program(STEPS));
    let answers: HashMap<String, Understanding> = [
        ("chain".to_string(), understood(Some("chain"), &[])),
        ("go ahead".to_string(), understood(None, &[("go", json!(true), "go ahead")])),
    ]
    .into_iter()
    .collect();
    let mut runtime = runtime(&program, answers);
    // The first turn enters the flow and asks; the timed turn answers and
    // runs the whole chain. Each timed turn starts from a copy of the
    // parked session (copied outside the timing).
    let mut parked: Session = runtime.new_session("chain");
    if let Err(error) = runtime.run_turn(&mut parked, "chain") {
        eprintln!("the chain did not start: {error}");
        std::process::exit(1);
    }
    let run = |runtime: &mut Runtime, samples: Option<&mut Vec<Duration>>| {
        let mut session = parked.clone();
        let started = Instant::now();
        let result = runtime.run_turn(&mut session, "go ahead");
        let elapsed = started.elapsed();
        match result {
            Ok(result)
                if result.stopped_reason == StopReason::FlowComplete && result.executed_steps.len() == STEPS + 2 =>
            {
                black_box(&result);
            }
            Ok(result) => {
                eprintln!(
                    "the chain stopped early: {:?}, {} steps",
                    result.stopped_reason,
                    result.executed_steps.len()
                );
                std::process::exit(1);
            }
            Err(error) => {
                eprintln!("the chain turn failed: {error}");
                std::process::exit(1);
            }
        }
        if let Some(samples) = samples {
            samples.push(elapsed);
        }
    };
    for _ in 0..warmup {
        run(&mut runtime, None);
    }
    let mut samples = Vec::with_capacity(turns);
    let baseline = reset_peak();
    for _ in 0..turns {
        run(&mut runtime, Some(&mut samples));
    }
    Stats {
        name: "auto chain (200 steps, 1 turn)",
        total: samples.iter().sum(),
        samples,
        peak_bytes: peak_since(baseline),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let quick = std::env::args().any(|argument| argument == "--quick");
    let (conversations, chain_turns) = if quick { (200, 50) } else { (4000, 1000) };
    println!("flowc runtime overhead per turn (canned provider, in-process tool), {}", machine());
    let booking = booking(conversations, conversations / 10);
    booking.report(20.0);
    let chain = chain(chain_turns, chain_turns / 10);
    chain.report(1000.0);
}
