//! The coverage of a test run as `flowc test` reports it: per program,
//! what its cases reached ([`crate::flowtest::coverage`] merges it), as a
//! table of steps, branch entries and transitions per flow (`--coverage`)
//! and as a JSON file `flowc graph --coverage FILE` draws
//! (`--coverage-out FILE`).

use super::case::CaseResult;
use super::{Loaded, TestArgs};
use crate::cli::{Outcome, print_stdout};
use crate::flowtest::coverage::{CoverageFile, ProgramCoverage, by_program};
use crate::graph::coverage::FlowCoverage;
use crate::graph::coverage::per_flow;
use std::fmt::Write as _;
use std::path::Path;

pub fn report(args: &TestArgs, loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult]) -> Outcome {
    let programs = by_program(loaded, jobs, results);
    let mut outcome = Outcome::Success;
    if args.coverage {
        let mut text = String::new();
        for (file_index, covered) in &programs {
            let Some(file) = loaded.get(*file_index) else { continue };
            let reachability = crate::check::reachability::analyze(&file.program);
            let graph = crate::graph::build(&file.program, &reachability, None);
            text.push_str(&table(&file.file.program, &per_flow(&file.program, &graph, covered)));
        }
        // The table goes where the case lines go; JSON output keeps stdout
        // one document.
        if args.format == super::Format::Json {
            crate::cli::report::print_stderr(&text);
        } else {
            outcome = print_stdout(&text);
        }
    }
    if let Some(path) = &args.coverage_out {
        let file = CoverageFile {
            version: 1,
            programs: programs
                .iter()
                .filter_map(|(index, covered)| {
                    let program = loaded.get(*index)?.file.program.clone();
                    Some(ProgramCoverage { program, covered: covered.clone() })
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default();
        if let Err(error) = std::fs::write(path, format!("{text}\n")) {
            eprintln!("error: cannot write `{}`: {error}", path.display());
            outcome = outcome.worst(Outcome::Error);
        }
    }
    outcome
}

fn fraction((reached, total): (usize, usize)) -> String {
    match (reached * 100).checked_div(total) {
        Some(percent) => format!("{reached}/{total} {percent:>3}%"),
        None => "-".to_string(),
    }
}

/// The table of one program.
pub fn table(program: &Path, rows: &[FlowCoverage]) -> String {
    let mut out = format!("\ncoverage of {}\n", crate::cli::load::display_path(program));
    let width = rows.iter().map(|row| row.flow.len()).max().unwrap_or(4).max(4);
    let header = format!("  {:<width$}  {:<12}  {:<14}  {}", "flow", "steps", "branch entries", "transitions");
    let _ = writeln!(out, "{header}");
    for row in rows {
        let line = format!(
            "  {:<width$}  {:<12}  {:<14}  {}",
            row.flow,
            fraction(row.steps),
            fraction(row.branches),
            fraction(row.transitions)
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for row in rows.iter().filter(|row| !row.missed.is_empty()) {
        let _ = writeln!(out, "  not reached in {}: {}", row.flow, row.missed.join(", "));
    }
    out
}
