//! A seeded mutation fuzz of the three front-end commands (issue 13, "keep
//! it fixed"): the examples in `flows/` and the fixtures, mutated, go
//! through what `flowc check --format json`, `flowc compile` and `flowc
//! graph` run — compiling, positioning and rendering every diagnostic shown,
//! the IR and AST as JSON, Mermaid and DOT — each on a thread with the
//! binary's main-thread stack and under a time limit, so a panic, a stack
//! overflow or a hang fails the test with the input that caused it.
//!
//! Every input that ever crashed lives in `tests/fuzz_corpus/` and is
//! replayed on every run. A failure writes its input below cargo's scratch
//! directory: fix the bug, then move the file into the corpus.
//!
//! `FLOWC_FUZZ_ITERATIONS` and `FLOWC_FUZZ_SEED` set the run's size and
//! seed, `FLOWC_FUZZ_SECONDS` stops it after that long; `scripts/fuzz.sh`
//! runs a long one before a release.

use super::props::{Mutation, TOKENS, apply, read_corpus};
use flowc::diag::render::{Style, render_human, to_json};
use flowc::diag::{DEFAULT_MAX_SHOWN, shown};
use flowc::graph::{Format, draw as render};
use flowc::pipeline::compile_keeping_ast;
use flowc::source::{SourceFile, write_json};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A few hundred inputs: under a minute in a debug build on two cores.
const DEFAULT_ITERATIONS: usize = 500;
const DEFAULT_SEED: u64 = 0x00f1_0c13;
/// Far above what any input here takes, even in a debug build on a loaded
/// machine; an input past it is reported as a hang.
const HANG_AFTER: Duration = Duration::from_secs(30);
/// The binary runs the front end on its main thread's stack.
const MAIN_THREAD_STACK: usize = 8 * 1024 * 1024;
/// Larger files make each iteration slow without reaching new code.
const LARGEST_INPUT: usize = 32 * 1024;

/// Pieces aimed at what the reliability probe broke, added to the property
/// tests' tokens.
const PROBE_TOKENS: &[&str] = &[
    " wait 100000000d",
    " timeout 99999999999999999999s",
    "\"\"\"\"\"\"\"\"\"\"\"\"",
    "{{x}}{{x}}{{x}}{{x}}",
    "((((((((((((((((((((((((((((((((",
    "))))))))))))))))))))))))))))))))",
    " step s { prompt \"a\" collect a  next s }",
    " cooldown: 100000000d",
    "\u{200b}",
    "\r\n",
    "\t",
];

/// splitmix64: a seeded generator, so a run can be replayed from its seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % (bound.max(1) as u64)).unwrap_or(0)
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|value| value.trim().parse().ok())
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The programs to mutate: the examples and the fixtures, small ones only.
fn seeds() -> Vec<(String, String)> {
    let mut seeds: Vec<(String, String)> = std::fs::read_dir(root().join("flows"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| matches!(path.extension().and_then(|ext| ext.to_str()), Some("flow" | "yaml")))
        .filter(|path| !flowc::source::is_test_file(path))
        .filter_map(|path| Some((path.to_string_lossy().into_owned(), std::fs::read_to_string(&path).ok()?)))
        .collect();
    seeds.extend(read_corpus());
    seeds.retain(|(name, text)| {
        text.len() <= LARGEST_INPUT && (name.ends_with(".flow") || name.ends_with(".yaml") || name.ends_with(".yml"))
    });
    seeds.sort();
    seeds
}

/// What the three commands run on one program, minus the printing.
fn run_front_end_commands(name: &str, text: String) {
    let file = SourceFile::new(name, text);
    let compilation = compile_keeping_ast(&file);
    // `check` (both formats) and the diagnostics `compile` and `graph` print.
    let (kept, _) = shown(&compilation.diagnostics, DEFAULT_MAX_SHOWN);
    for diagnostic in kept {
        let json = to_json(&file, diagnostic);
        assert!(json.line >= 1 && json.column >= 1, "{json:?}");
        std::hint::black_box(render_human(&file, diagnostic, Style::PLAIN));
    }
    // `compile --emit json`, `--emit ast`, with and without spans.
    for with_spans in [false, true] {
        assert!(write_json(&compilation.ir, with_spans, true, std::io::sink()).is_ok());
        assert!(write_json(&compilation.ast, with_spans, false, std::io::sink()).is_ok());
    }
    // `graph`, whole and for each flow.
    for format in [Format::Mermaid, Format::Dot] {
        std::hint::black_box(render(&compilation.ir, None, format));
    }
    for index in 0..compilation.ir.flows.len().min(4) {
        std::hint::black_box(render(&compilation.ir, Some(flowc::ir::FlowId::from_index(index)), Format::Dot));
    }
}

/// What went wrong with one input.
enum Failure {
    Panic,
    Hang,
    /// The thread to run it on did not start: the input was not tried,
    /// which must not count as a pass.
    NotRun(String),
}

/// Runs the commands on a thread of their own, under [`HANG_AFTER`].
fn exercise(name: &str, text: &str) -> Result<(), Failure> {
    let (sender, receiver) = mpsc::channel();
    let (name, text) = (name.to_string(), text.to_string());
    let spawned = std::thread::Builder::new().stack_size(MAIN_THREAD_STACK).spawn(move || {
        let outcome = std::panic::catch_unwind(|| run_front_end_commands(&name, text));
        let _ = sender.send(outcome.is_ok());
    });
    if let Err(error) = spawned {
        return Err(Failure::NotRun(error.to_string()));
    }
    match receiver.recv_timeout(HANG_AFTER) {
        Ok(true) => Ok(()),
        // A stack overflow aborts the whole process, which fails the test
        // as surely; a panic arrives here.
        Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => Err(Failure::Panic),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Failure::Hang),
    }
}

/// Keeps a failing input where the developer can find it.
fn save_failure(name: &str, text: &str, label: &str) -> PathBuf {
    let extension = Path::new(name).extension().and_then(|ext| ext.to_str()).unwrap_or("flow");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{label}.{extension}"));
    let _ = std::fs::write(&path, text);
    path
}

fn mutate(random: &mut Random, text: &mut String) {
    let tokens = TOKENS.len() + PROBE_TOKENS.len();
    for _ in 0..1 + random.below(6) {
        let at = random.below(text.len() + 1);
        let mutation = match random.below(5) {
            0 => Mutation::Cut { at, len: 1 + random.below(40) },
            1 => Mutation::RepeatLine { line: random.below(1_000) },
            2 => Mutation::SwapLines { first: random.below(1_000), second: random.below(1_000) },
            _ => {
                let token = random.below(tokens);
                match PROBE_TOKENS.get(token.wrapping_sub(TOKENS.len())) {
                    Some(probe) if token >= TOKENS.len() => {
                        let at = (0..=at).rev().find(|at| text.is_char_boundary(*at)).unwrap_or(0);
                        text.insert_str(at, probe);
                        continue;
                    }
                    _ => Mutation::Insert { at, token },
                }
            }
        };
        apply(text, &mutation);
    }
}

#[test]
fn the_fuzz_corpus_replays_without_a_panic_or_hang() {
    let mut failures = Vec::new();
    let mut replayed = 0;
    for entry in std::fs::read_dir(root().join("tests/fuzz_corpus")).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().and_then(|ext| ext.to_str()) == Some("md") {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("corpus.flow");
        replayed += 1;
        match exercise(name, &text) {
            Ok(()) => {}
            Err(Failure::NotRun(error)) => failures.push(format!("{} (not run: {error})", path.display())),
            Err(_) => failures.push(path.display().to_string()),
        }
    }
    assert!(replayed > 0, "the corpus is empty");
    assert!(failures.is_empty(), "corpus inputs that fail again: {failures:#?}");
}

#[test]
fn mutated_programs_never_panic_or_hang_in_the_front_end_commands() {
    let iterations = env_number("FLOWC_FUZZ_ITERATIONS").map_or(DEFAULT_ITERATIONS, |value| value as usize);
    let seed = env_number("FLOWC_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let stop_at = env_number("FLOWC_FUZZ_SECONDS").map(|seconds| Instant::now() + Duration::from_secs(seconds));
    let seeds = seeds();
    assert!(seeds.len() > 10, "too few programs to mutate: {}", seeds.len());
    let mut random = Random(seed);
    let (mut panics, mut hangs, mut not_run) = (Vec::new(), Vec::new(), Vec::new());
    let mut fuzzed = 0;
    for iteration in 0..iterations {
        if stop_at.is_some_and(|stop_at| Instant::now() >= stop_at) {
            break;
        }
        if iteration > 0 && iteration % 10_000 == 0 {
            println!("… {iteration} inputs, {} panics, {} hangs", panics.len(), hangs.len());
        }
        let (name, original) = &seeds[random.below(seeds.len())];
        let mut text = original.clone();
        mutate(&mut random, &mut text);
        fuzzed += 1;
        match exercise(name, &text) {
            Ok(()) => {}
            Err(Failure::Panic) => panics.push(save_failure(name, &text, &format!("panic-{seed}-{iteration}"))),
            Err(Failure::Hang) => {
                hangs.push(save_failure(name, &text, &format!("hang-{seed}-{iteration}")));
                // The hung thread keeps a core busy: stop here.
                break;
            }
            Err(Failure::NotRun(error)) => {
                not_run.push(format!(
                    "{}: {error}",
                    save_failure(name, &text, &format!("not-run-{seed}-{iteration}")).display()
                ));
            }
        }
    }
    println!(
        "fuzzed {fuzzed} inputs (seed {seed}): {} panics, {} hangs, {} not run",
        panics.len(),
        hangs.len(),
        not_run.len()
    );
    assert!(
        panics.is_empty() && hangs.is_empty() && not_run.is_empty(),
        "panics: {panics:#?}\nhangs: {hangs:#?}\nnot run (no thread to run them on): {not_run:#?}\n\
         fix each, then move its input into tests/fuzz_corpus/"
    );
}
