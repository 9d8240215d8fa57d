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

/// A program whose step condition nests `levels` deep: brackets around a
/// field, compared with 0 (the comparison is a level too), in `.flow` or
/// YAML. The step sets the field from the same nested expression, so a run
/// evaluates it.
pub fn nested_condition(levels: usize, yaml: bool) -> (String, &'static str) {
    let brackets = levels.saturating_sub(1);
    let nested = format!("{}count{}", "(".repeat(brackets), ")".repeat(brackets));
    if yaml {
        let text = format!(
            "schema:\n  count: int\nflows:\n  f:\n    default: true\n    steps:\n      - id: ask\n        prompt: A number?\n        collect: [count]\n      - id: s\n        auto: true\n        if: '{nested} > 0'\n        do:\n          - set: {{ count: '{nested} + 1' }}\n        next: end\n"
        );
        (text, "nested.yaml")
    } else {
        let text = format!(
            "schema {{ count: int }}\nflow f {{ default\n  step ask {{ prompt \"A number?\" collect count }}\n  auto step s {{ if {nested} > 0  set count = {nested} + 1  next end }} }}\n"
        );
        (text, "nested.flow")
    }
}

#[test]
fn expressions_nest_64_levels_and_no_more_in_both_syntaxes() {
    // docs/language.md promises 64 levels; the code refused 33 (issue 13).
    for yaml in [false, true] {
        let (at_limit, name) = nested_condition(64, yaml);
        let compilation = compile(&SourceFile::new(name, at_limit));
        let found: Vec<&str> = compilation.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
        assert_eq!(found, Vec::<&str>::new(), "{name} at 64 levels");
        let (past_limit, name) = nested_condition(65, yaml);
        let compilation = compile(&SourceFile::new(name, past_limit));
        let messages: Vec<&str> =
            compilation.diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect();
        assert!(messages.contains(&"nesting is too deep"), "{name} at 65 levels: {messages:?}");
    }
}

#[test]
fn operator_chains_count_each_operator_as_a_level() {
    let chain = |operators: usize| {
        format!(
            "schema {{ count: int }}\nflow f {{ default\n  step ask {{ collect count }}\n  auto step s {{ if count{} > 0  next end }} }}\n",
            " + 1".repeat(operators - 1)
        )
    };
    assert_eq!(codes(&chain(64)), Vec::<&str>::new());
    assert_eq!(codes(&chain(65)), ["syntax"]);
}
