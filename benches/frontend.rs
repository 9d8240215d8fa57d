//! Front-end throughput: parse + lower of generated programs (1,000 flows of
//! 20 steps with branches, and 10× that) in both syntaxes, the scaling from
//! 1× to 10× the input, the peak memory (of the 1,000-flow program), and
//! `flowc compile` of a ~100-line program including process start.
//!
//! Each size is measured in child processes of this bench, three ways:
//!
//! - *fresh*: one parse per new process, started after the machine has been
//!   idle for [`IDLE`], which is what a `flowc` command run now and then
//!   pays. Every page of the AST and IR is new to the process; on a VM
//!   whose balloon hands freed memory back to the host (this development
//!   machine's does, after about two seconds), the host must back each page
//!   again, at both sizes alike.
//! - *back to back*: one parse per new process, the processes started one
//!   after the other. On such a VM the small input's processes reuse pages
//!   the previous one has just freed while the large input's, which run
//!   longer than the balloon's delay, mostly cannot, so the ratio measures
//!   the VM's memory as much as the front end; it is printed for comparison.
//! - *warm*: the parse repeated in one process whose allocator keeps what it
//!   freed, which is what a long-running server pays, and which isolates
//!   the front end's own work. (With default settings mimalloc hands large
//!   freed regions back to the OS, so only a small input would stay warm.)
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
    let (ir, lowering) = flowc::pipeline::lower(ast);
    diagnostics.extend(lowering);
    assert!(diagnostics.is_empty(), "generated programs are valid: {:?}", diagnostics.first());
    ir.flows.len()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn mb_per_second(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

/// The program one measurement parses: `syntax` is `flow` or `yaml`.
fn program(syntax: &str, flows: usize) -> SourceFile {
    match syntax {
        "yaml" => SourceFile::new("bench.yaml", flowc::testgen::large_program_yaml(flows, 20)),
        _ => SourceFile::new("bench.flow", flowc::testgen::large_program(flows, 20)),
    }
}

/// The process's CPU time so far in the kernel, from `/proc/self/stat`
/// (Linux; zero elsewhere).
fn kernel_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses: stime is the
    // 13th, in clock ticks of 1/100 s on Linux.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after_name.split_whitespace().nth(12).and_then(|field| field.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Writes the programs the children parse, once per bench run, so that a
/// child reads its program from a file and starts parsing at once, as a
/// `flowc` command does. (A child that generated a 10,000-flow program
/// itself would spend a second on it first, and on a VM that hands freed
/// memory back, that second decides what its memory costs.)
fn program_file(directory: &std::path::Path, syntax: &str, flows: usize) -> std::path::PathBuf {
    let path = directory.join(format!("bench-{flows}.{syntax}"));
    if !path.exists() {
        std::fs::write(&path, &program(syntax, flows).text).expect("the bench writes its programs");
    }
    path
}

/// Child mode (`--child PATH RUNS IDLE_MS`): reads the program, waits
/// `IDLE_MS`, then parses it `RUNS` times and prints, one line per run, the
/// wall time and the kernel time it took in nanoseconds.
fn child(arguments: &[String]) {
    let [path, runs, idle_ms] = arguments else {
        panic!("usage: --child PATH RUNS IDLE_MS");
    };
    let file = SourceFile::new(path.as_str(), std::fs::read_to_string(path).expect("the program"));
    std::thread::sleep(Duration::from_millis(idle_ms.parse().expect("milliseconds")));
    for _ in 0..runs.parse::<usize>().expect("a number of runs") {
        let kernel_before = kernel_time();
        let started = Instant::now();
        std::hint::black_box(parse_and_lower(&file));
        let elapsed = started.elapsed();
        println!("{} {}", elapsed.as_nanos(), (kernel_time() - kernel_before).as_nanos());
    }
}

/// How the children of one measurement run: see the module doc.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Fresh,
    BackToBack,
    Warm,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Fresh => "fresh",
            Mode::BackToBack => "back to back",
            Mode::Warm => "warm",
        }
    }
}

/// Runs child processes and returns every (wall, kernel) time they printed. `Warm` keeps
/// mimalloc from returning freed memory to the OS between runs, so that
/// the runs after the first reuse memory the process already has, whatever
/// the size of the input.
fn in_children(path: &std::path::Path, processes: usize, runs: usize, mode: Mode) -> Vec<(Duration, Duration)> {
    let exe = std::env::current_exe().expect("the bench's own path");
    let idle_ms = if mode == Mode::Fresh { IDLE.as_millis() } else { 0 };
    let warm = mode == Mode::Warm;
    let mut times = Vec::new();
    for _ in 0..processes {
        let mut command = std::process::Command::new(&exe);
        command.arg("--child").arg(path).args([runs.to_string(), idle_ms.to_string()]);
        if warm {
            command.env("MIMALLOC_PURGE_DELAY", "-1");
        }
        let output = command.output().expect("the bench runs itself");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        let nanoseconds = |field: Option<&str>| Duration::from_nanos(field.and_then(|f| f.parse().ok()).expect("ns"));
        let mut own: Vec<(Duration, Duration)> = printed
            .lines()
            .map(|line| {
                let mut fields = line.split_whitespace();
                (nanoseconds(fields.next()), nanoseconds(fields.next()))
            })
            .collect();
        if warm {
            // The first run is the one that faults the memory in.
            own.remove(0);
        }
        times.extend(own);
    }
    times
}

/// How long a `--touch` child, or a child measuring fresh, waits before it
/// takes memory: long enough for a VM's balloon driver to have handed back
/// to the host what earlier processes freed (free page reporting waits
/// about 2 s), so that the memory is as fresh as it is for a command run
/// now and then.
const IDLE: Duration = Duration::from_secs(3);

/// Child mode (`--touch BYTES`): after [`IDLE`], takes `BYTES`
/// of fresh memory, writes one byte per page, and prints the wall and
/// kernel time that took, as [`child`] does. It is the memory cost alone,
/// with no parsing: what any program pays for pages it uses for the first
/// time.
fn touch(bytes: &str) {
    let bytes: usize = bytes.parse().expect("a number of bytes");
    std::thread::sleep(IDLE);
    let kernel_before = kernel_time();
    let started = Instant::now();
    let mut memory = vec![0u8; bytes];
    for page in memory.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(&memory);
    let elapsed = started.elapsed();
    println!("{} {}", elapsed.as_nanos(), (kernel_time() - kernel_before).as_nanos());
}

/// Runs `--touch` in fresh processes; the median (wall, kernel) time.
fn touch_in_children(bytes: usize, processes: usize) -> (Duration, Duration) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let runs: Vec<(Duration, Duration)> = (0..processes)
        .map(|_| {
            let output = std::process::Command::new(&exe)
                .args(["--touch", &bytes.to_string()])
                .output()
                .expect("the bench runs itself");
            let printed = String::from_utf8_lossy(&output.stdout).into_owned();
            let mut fields =
                printed.split_whitespace().map(|field| Duration::from_nanos(field.parse().expect("nanoseconds")));
            (fields.next().unwrap_or_default(), fields.next().unwrap_or_default())
        })
        .collect();
    (median(runs.iter().map(|run| run.0).collect()), median(runs.iter().map(|run| run.1).collect()))
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = arguments.iter().position(|argument| argument == "--child") {
        return child(&arguments[at + 1..]);
    }
    if let Some(bytes) =
        arguments.iter().position(|argument| argument == "--touch").and_then(|at| arguments.get(at + 1))
    {
        return touch(bytes);
    }
    println!("front end: parse + lower, median of runs, programs of 1,000 flows x 20 steps and 10x that");
    println!(
        "  fresh: one run per new process, after {} s idle, as `flowc compile` and `flowc check` run now and then",
        IDLE.as_secs()
    );
    println!(
        "  back to back: one run per new process, started one after the other (not comparable across sizes on a VM that hands freed memory back)"
    );
    println!("  warm: repeated in one process that keeps the memory it freed, as a long-running server would");
    let directory = std::env::temp_dir().join(format!("flowc-bench-frontend-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a temporary directory");
    let mut largest_peak = 0;
    for (label, syntax) in [(".flow", "flow"), ("YAML", "yaml")] {
        let small = program(syntax, 1_000);
        let small_path = program_file(&directory, syntax, 1_000);
        let large_path = program_file(&directory, syntax, 10_000);
        let large_bytes = std::fs::metadata(&large_path).map_or(0, |metadata| metadata.len() as usize);
        for (mode, small_processes, small_runs, large_processes, large_runs) in
            [(Mode::Fresh, 7, 1, 5, 1), (Mode::BackToBack, 7, 1, 3, 1), (Mode::Warm, 1, 12, 1, 5)]
        {
            let small_runs = in_children(&small_path, small_processes, small_runs, mode);
            let large_runs = in_children(&large_path, large_processes, large_runs, mode);
            let small_time = median(small_runs.iter().map(|run| run.0).collect());
            let large_time = median(large_runs.iter().map(|run| run.0).collect());
            let small_kernel = median(small_runs.iter().map(|run| run.1).collect());
            let large_kernel = median(large_runs.iter().map(|run| run.1).collect());
            println!(
                "  {label:5} {:12}  1,000 flows: {:5.2} MB in {:7.2} ms = {:5.1} MB/s | 10,000 flows: {:5.2} MB in {:7.2} ms = {:5.1} MB/s | 10x input: {:.2}x time | kernel time {:.0} ms, {:.0} ms",
                mode.label(),
                small.text.len() as f64 / 1e6,
                small_time.as_secs_f64() * 1e3,
                mb_per_second(small.text.len(), small_time),
                large_bytes as f64 / 1e6,
                large_time.as_secs_f64() * 1e3,
                mb_per_second(large_bytes, large_time),
                large_time.as_secs_f64() / small_time.as_secs_f64(),
                small_kernel.as_secs_f64() * 1e3,
                large_kernel.as_secs_f64() * 1e3,
            );
        }
        LIVE.store(0, Ordering::Relaxed);
        PEAK.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        parse_and_lower(&small);
        COUNTING.store(false, Ordering::Relaxed);
        // Frees of blocks allocated before counting began can drive the
        // live count below zero (wrapping); the peak is still what was added.
        let peak = PEAK.load(Ordering::Relaxed);
        println!(
            "  {label:5} peak heap for 1,000 flows: {:.1} MB ({:.1}x the source)",
            peak as f64 / 1e6,
            peak as f64 / small.text.len() as f64,
        );
        largest_peak = largest_peak.max(peak);
    }
    let _ = std::fs::remove_dir_all(&directory);
    // What fresh runs pay for memory alone on this machine: the 1,000 flows'
    // peak heap, and ten times it, first touched by a fresh process.
    let (small_touch, small_touch_kernel) = touch_in_children(largest_peak, 3);
    let (large_touch, large_touch_kernel) = touch_in_children(largest_peak * 10, 3);
    println!(
        "memory alone, no parsing: a fresh process that first waits {} s takes and touches {:.0} MB in {:.0} ms (kernel {:.0} ms), {:.0} MB in {:.0} ms (kernel {:.0} ms)",
        IDLE.as_secs(),
        largest_peak as f64 / 1e6,
        small_touch.as_secs_f64() * 1e3,
        small_touch_kernel.as_secs_f64() * 1e3,
        largest_peak as f64 * 10.0 / 1e6,
        large_touch.as_secs_f64() * 1e3,
        large_touch_kernel.as_secs_f64() * 1e3,
    );

    // The issue asks for a program of about 100 lines: the two examples
    // nearest that size, one in each syntax.
    let binary = env!("CARGO_BIN_EXE_flowc");
    for example in ["flows/booking.flow", "flows/support.yaml"] {
        let program = format!("{}/{example}", env!("CARGO_MANIFEST_DIR"));
        let lines = std::fs::read_to_string(&program).map(|text| text.lines().count()).unwrap_or(0);
        let samples: Vec<Duration> = (0..30)
            .map(|_| {
                let started = Instant::now();
                let status = std::process::Command::new(binary)
                    .args(["compile", &program])
                    .stdout(std::process::Stdio::null())
                    .status();
                assert!(status.is_ok_and(|status| status.success()), "flowc compile succeeds");
                started.elapsed()
            })
            .collect();
        println!(
            "flowc compile {example} ({lines} lines), process start included: median {:.2} ms",
            median(samples).as_secs_f64() * 1e3
        );
    }
}
