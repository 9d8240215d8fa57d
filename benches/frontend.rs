//! Front-end throughput: parse + lower of generated programs (1,000 flows of
//! 20 steps with branches, and 10× that) in both syntaxes, the scaling from
//! 1× to 10× the input, the peak memory (of the 1,000-flow program), and
//! `flowc compile` of a ~100-line program including process start.
//!
//! Run: `cargo bench --bench frontend`. Figures are wall-clock medians on
//! the machine that runs it; the ratios are what to compare across machines.

use flowc::source::SourceFile;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live and peak heap bytes, over the allocator the binary uses.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Counting is on only while memory is measured: shared counters updated on
/// every allocation would serialize the parser's threads in timed runs.
static COUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

// SAFETY: forwards to the system allocator; only adds counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let pointer = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !pointer.is_null() && COUNTING.load(Ordering::Relaxed) {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { mimalloc::MiMalloc.dealloc(pointer, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn parse_and_lower(file: &SourceFile) -> usize {
    let (ast, mut diagnostics) = flowc::syntax::parse(file);
    let (ir, lowering) = flowc::ir::lower::lower(&ast);
    diagnostics.extend(lowering);
    assert!(diagnostics.is_empty(), "generated programs are valid: {:?}", diagnostics.first());
    ir.flows.len()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn time(file: &SourceFile, runs: usize) -> Duration {
    parse_and_lower(file);
    median(
        (0..runs)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(parse_and_lower(file));
                started.elapsed()
            })
            .collect(),
    )
}

fn mb_per_second(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

fn main() {
    println!("front end: parse + lower (median of runs)");
    for (syntax, generate) in [
        (".flow", flowc::testgen::large_program as fn(usize, usize) -> String),
        ("YAML", flowc::testgen::large_program_yaml),
    ] {
        let name = if syntax == "YAML" { "bench.yaml" } else { "bench.flow" };
        // The sizes: 1,000 flows of 20 steps, and 10× that.
        let small = SourceFile::new(name, generate(1_000, 20));
        let large = SourceFile::new(name, generate(10_000, 20));
        let small_time = time(&small, 7);
        let large_time = time(&large, 3);
        LIVE.store(0, Ordering::Relaxed);
        PEAK.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        parse_and_lower(&small);
        COUNTING.store(false, Ordering::Relaxed);
        // Frees of blocks allocated before counting began can drive the
        // live count below zero (wrapping); the peak is still what was added.
        let peak = PEAK.load(Ordering::Relaxed);
        println!(
            "  {syntax:5}  1,000 flows: {:6.2} MB in {:7.2} ms = {:6.1} MB/s | 10,000 flows: {:6.2} MB in {:7.2} ms = {:6.1} MB/s | 10x input: {:.2}x time | peak heap {:.1} MB ({:.1}x the source)",
            small.text.len() as f64 / 1e6,
            small_time.as_secs_f64() * 1e3,
            mb_per_second(small.text.len(), small_time),
            large.text.len() as f64 / 1e6,
            large_time.as_secs_f64() * 1e3,
            mb_per_second(large.text.len(), large_time),
            large_time.as_secs_f64() / small_time.as_secs_f64(),
            peak as f64 / 1e6,
            peak as f64 / small.text.len() as f64,
        );
    }

    let binary = env!("CARGO_BIN_EXE_flowc");
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/flows/booking.flow");
    let lines = std::fs::read_to_string(program).map(|text| text.lines().count()).unwrap_or(0);
    let samples: Vec<Duration> = (0..30)
        .map(|_| {
            let started = Instant::now();
            let status = std::process::Command::new(binary)
                .args(["compile", program])
                .stdout(std::process::Stdio::null())
                .status();
            assert!(status.is_ok_and(|status| status.success()), "flowc compile succeeds");
            started.elapsed()
        })
        .collect();
    println!(
        "flowc compile flows/booking.flow ({lines} lines), process start included: median {:.2} ms",
        median(samples).as_secs_f64() * 1e3
    );
}
