//! Large and pathological programs (issue 4, "Bad input"): a realistic
//! program of many flows checks clean, and the shapes that break naive
//! checkers — a 10,000-step chain and cycle, a 1,000-entry branch table,
//! deep expressions — are checked on a test thread's ordinary stack,
//! well within a generous time guard, with exactly the expected findings.

use flowc::pipeline::compile;
use flowc::source::SourceFile;
use flowc::testgen;
use std::time::{Duration, Instant};

/// Generous: a debug build on a loaded 2-core machine. A quadratic pass
/// would take minutes on these inputs.
const GUARD: Duration = Duration::from_secs(60);

/// Compiles `text` under the guard and returns the codes found, sorted.
fn codes(text: &str) -> Vec<&'static str> {
    let start = Instant::now();
    let compilation = compile(&SourceFile::new("stress.flow", text));
    let elapsed = start.elapsed();
    assert!(elapsed < GUARD, "took {elapsed:?}");
    let mut codes: Vec<&str> = compilation.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
    codes.sort_unstable();
    codes
}

#[test]
fn a_large_generated_program_checks_clean() {
    assert_eq!(codes(&testgen::large_program(60, 23)), Vec::<&str>::new());
}

#[test]
fn a_ten_thousand_step_chain_checks_clean() {
    assert_eq!(codes(&testgen::step_chain(10_000, false)), Vec::<&str>::new());
}

#[test]
fn a_ten_thousand_step_cycle_is_one_auto_cycle() {
    assert_eq!(codes(&testgen::step_chain(10_000, true)), vec!["auto_cycle"]);
}

#[test]
fn a_thousand_entry_branch_table_reports_each_repeat() {
    // Every tenth entry repeats the one before it.
    assert_eq!(codes(&testgen::branch_table(1_000)), vec!["unreachable_branch"; 100]);
}

#[test]
fn deep_expressions_are_checked_or_refused_without_overflow() {
    assert_eq!(codes(&testgen::deep_expressions(30, 50)), Vec::<&str>::new());
    let refused = codes(&testgen::deep_expressions(2_000, 5));
    assert!(!refused.is_empty() && refused.iter().all(|code| *code == "syntax"), "{refused:?}");
}
