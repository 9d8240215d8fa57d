//! The static checks: passes over the IR (and the AST where a check needs
//! the source's shape: [`check_ast`], run before lowering consumes it),
//! each family in its own module, each owning its diagnostics. Lowering
//! already reported what could not be resolved (unknown targets, types,
//! tools, ids, directives); these passes prove the rest. Each family's
//! `find` returns values holding the facts of what it found (names, spans,
//! paths), which its unit tests assert on; the same file turns each into
//! its diagnostic, so a family's codes and their wording live together:
//!
//! | module            | codes                                         |
//! | ----------------- | --------------------------------------------- |
//! | [`reachability`]  | `unreachable_step`, `unreachable_branch`, `covered_branch` |
//! | `assignment`    | `maybe_unset`                                 |
//! | `cycles`        | `auto_cycle`                                  |
//! | `routing`       | `unrouted_flow`, `shadowed_step`              |
//! | `directives`    | `dropped_field`                               |
//! | `fields`        | `uncollected_required`                        |
//! | `consent`       | `kept_consent`, `kept_uncollected`            |
//! | `schedules`     | `invalid_schedule`                            |
//! | [`costs`]       | `turn_token_budget`                           |
//!
//! `flowgraph` is the step graph they share, `conditions` what can be
//! told about a condition statically, `walk` the traversal of nested
//! actions and directives, `summary` what each step sets and reads, and
//! `dataflow` which fields are set on every path (asked by both
//! `assignment` and [`reachability`]). Every pass is linear (or n log n) in the size of
//! the program and uses no recursion whose depth grows with it, except over
//! expressions, whose depth the front ends bound. No pass does I/O.
#![warn(missing_docs)]

mod asking;
mod assignment;
mod conditions;
mod consent;
pub mod costs;
mod cycles;
mod dataflow;
mod directives;
mod fields;
pub(crate) mod flowgraph;
pub mod model_steps;
pub mod reachability;
mod routing;
mod schedules;
mod summary;
pub(crate) mod walk;

use crate::diag::Diagnostic;
use crate::ir::Program;
use crate::syntax::ast;

/// Runs the passes that read the source's shape, which lowering does not
/// keep; they run before lowering consumes the AST. Returns what they found
/// (unsorted).
pub fn check_ast(ast: &ast::Program) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    directives::check(ast, &mut diagnostics);
    diagnostics
}

/// Runs every pass over the IR and returns what they found (unsorted).
pub fn check(program: &Program) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    let analysis = reachability::analysis(program);
    reachability::check(program, &analysis, &mut diagnostics);
    assignment::check(program, &analysis, &mut diagnostics);
    cycles::check(program, &analysis, &mut diagnostics);
    routing::check(program, &mut diagnostics);
    fields::check(program, &mut diagnostics);
    consent::check(program, &mut diagnostics);
    asking::check(program, &analysis, &mut diagnostics);
    model_steps::check(program, &mut diagnostics);
    schedules::check(program, &mut diagnostics);
    costs::check(program, &mut diagnostics);
    diagnostics
}

/// The one helper every pass's tests go through: compiles `.flow` source
/// and returns each diagnostic as its code and the text its primary span
/// covers, in source order.
#[cfg(test)]
pub(crate) fn findings(source: &str) -> Vec<(&'static str, String)> {
    let file = crate::source::SourceFile::new("test.flow", source);
    crate::pipeline::compile(&file)
        .diagnostics
        .iter()
        .map(|diagnostic| {
            let span = diagnostic.primary_span().unwrap_or_default();
            (diagnostic.code.as_str(), file.slice(span).to_string())
        })
        .collect()
}

/// Asserts that `source` reports exactly `expected`: (code, spanned text).
#[cfg(test)]
pub(crate) fn check_findings(source: &str, expected: &[(&str, &str)]) {
    let found = findings(source);
    let found: Vec<(&str, &str)> = found.iter().map(|(code, text)| (*code, text.as_str())).collect();
    assert_eq!(found, expected, "in:\n{source}");
}

/// What the passes' tests build their programs with.
#[cfg(test)]
pub(crate) mod tests {
    use crate::ir::Program;
    use crate::source::{SourceFile, Span};

    /// The IR of `.flow` source, compiled through the whole pipeline, and
    /// the file to read spans in.
    pub(crate) fn compiled(source: &str) -> (SourceFile, Program) {
        let file = SourceFile::new("test.flow", source);
        let program = crate::pipeline::compile(&file).ir;
        (file, program)
    }

    /// The span of the `occurrence`th (from 0) `needle` in `file`.
    pub(crate) fn at(file: &SourceFile, needle: &str, occurrence: usize) -> Span {
        crate::diag::span_of(&file.text, needle, occurrence)
    }
}
