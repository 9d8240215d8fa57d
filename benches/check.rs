//! `flowc check` on generated programs: throughput (MB/s of parse, lower
//! and every check), scaling from 1× to 10× the input, the pathological
//! shapes of issue 4, peak memory, and the wall time of the real binary on
//! ~10 MB and on a 100-line program (process start included).
//!
//! Run with `cargo bench --bench check`. Plain `std::time::Instant`, best
//! of a few runs; no statistics beyond that.

use flowc::pipeline::compile;
use flowc::source::SourceFile;
use flowc::testgen;
use std::time::{Duration, Instant};

fn main() {
    let one = testgen::large_program(1_000, 20);
    let ten = testgen::large_program(10_000, 20);
    println!("generated: 1x = {:.1} MB, 10x = {:.1} MB", mb(&one), mb(&ten));

    let (t1, diagnostics) = best_of(3, &one);
    report("1,000 flows x 20 steps", &one, t1, diagnostics);
    let peak_one = peak_rss_mb();
    let (t10, diagnostics) = best_of(2, &ten);
    report("10,000 flows x 20 steps", &ten, t10, diagnostics);
    let peak_ten = peak_rss_mb();
    println!(
        "scaling: 10x input took {:.2}x the time (linear is 10x; the goal is at most 11x)",
        t10.as_secs_f64() / t1.as_secs_f64()
    );
    println!("peak RSS of this process: {peak_one} MB after the 1x runs, {peak_ten} MB after the 10x runs");

    println!();
    for (name, text) in [
        ("chain of 10,000 auto steps", testgen::step_chain(10_000, false)),
        ("cycle of 10,000 auto steps", testgen::step_chain(10_000, true)),
        ("branch table of 1,000 entries", testgen::branch_table(1_000)),
        ("branch table of 10,000 entries", testgen::branch_table(10_000)),
        ("200 expressions 30 deep", testgen::deep_expressions(30, 200)),
        ("expressions past the depth limit", testgen::deep_expressions(500, 20)),
    ] {
        let (time, diagnostics) = best_of(3, &text);
        report(name, &text, time, diagnostics);
    }

    println!();
    diagnostic_cascades();

    println!();
    binary_runs();
}

/// Issue 13: one long line that yields a diagnostic every five bytes (a
/// `{{x}}` naming no field, again and again). Compiling and positioning
/// every diagnostic (line and column, as `--format json` does) must scale
/// linearly: columns used to be counted from the line's start for each
/// one, which made a 1 MB line of such a cascade take 24 s.
fn diagnostic_cascades() {
    let one_line =
        |bytes: usize| format!("flow f {{ default\n  step s {{ say \"{}\" }} }}\n", "{{x}}".repeat(bytes / 5));
    let mut times = Vec::new();
    for bytes in [100_000, 1_000_000] {
        let file = SourceFile::new("cascade.flow", one_line(bytes));
        let mut best = Duration::MAX;
        let mut diagnostics = 0;
        for _ in 0..3 {
            let start = Instant::now();
            let compilation = compile(&file);
            let positioned: usize = compilation
                .diagnostics
                .iter()
                .map(|diagnostic| flowc::diag::render::to_json(&file, diagnostic).column)
                .fold(0, usize::wrapping_add);
            std::hint::black_box(positioned);
            best = best.min(start.elapsed());
            diagnostics = compilation.diagnostics.len();
        }
        report(&format!("a {} KB line of unknown fields", bytes / 1000), &file.text, best, diagnostics);
        times.push(best);
    }
    if let [small, large] = times.as_slice() {
        println!(
            "scaling: 10x the line took {:.2}x the time (linear is 10x; before issue 13 each column was counted from the line's start: quadratic)",
            large.as_secs_f64() / small.as_secs_f64()
        );
    }
}

fn mb(text: &str) -> f64 {
    text.len() as f64 / 1_000_000.0
}

/// The fastest of `runs` compilations, and the number of diagnostics.
fn best_of(runs: usize, text: &str) -> (Duration, usize) {
    let file = SourceFile::new("bench.flow", text);
    let mut best = Duration::MAX;
    let mut diagnostics = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let compilation = compile(&file);
        best = best.min(start.elapsed());
        diagnostics = compilation.diagnostics.len();
    }
    (best, diagnostics)
}

fn report(name: &str, text: &str, time: Duration, diagnostics: usize) {
    println!(
        "{name:<34} {:>7.2} MB {:>9.1} ms {:>7.1} MB/s  {diagnostics} diagnostics",
        mb(text),
        time.as_secs_f64() * 1000.0,
        mb(text) / time.as_secs_f64()
    );
}

/// The high-water mark of this process's resident memory (Linux only).
fn peak_rss_mb() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or_else(|| "?".to_string(), |kb| format!("{:.0}", kb as f64 / 1024.0))
}

/// The real binary, process start included: ~10 MB of source, and a
/// program of about 100 lines.
fn binary_runs() {
    let dir = std::env::temp_dir().join(format!("flowc-bench-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        println!("(no temporary directory: binary runs skipped)");
        return;
    }
    let big = testgen::large_program(3_000, 20);
    let big_yaml = testgen::large_program_yaml(2_500, 20);
    let small = testgen::large_program(1, 20);
    for (name, text) in [("big.flow", &big), ("big.yaml", &big_yaml), ("small.flow", &small)] {
        let path = dir.join(name);
        if std::fs::write(&path, text).is_err() {
            continue;
        }
        let mut best = Duration::MAX;
        let mut status = None;
        for _ in 0..5 {
            let start = Instant::now();
            let output = std::process::Command::new(env!("CARGO_BIN_EXE_flowc")).arg("check").arg(&path).output();
            best = best.min(start.elapsed());
            status = output.ok().map(|output| output.status);
        }
        println!(
            "flowc check {name:<10} {:>6.2} MB, {:>4} lines: {:>7.1} ms (best of 5, exit {})",
            mb(text),
            text.lines().count(),
            best.as_secs_f64() * 1000.0,
            status.and_then(|status| status.code()).map_or("?".to_string(), |code| code.to_string())
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
