//! The coverage of a test run: per program, what its cases reached, as a
//! table of steps, branch entries and transitions per flow (`--coverage`)
//! and as a JSON file `flowc graph --coverage FILE` draws
//! (`--coverage-out FILE`).

use super::case::CaseResult;
use super::{Loaded, TestArgs};
use crate::cli::{Outcome, print_stdout};
use crate::graph::coverage::{Covered, FlowCoverage, per_flow};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The coverage file: what the cases of one program reached.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CoverageFile {
    pub version: u32,
    pub programs: Vec<ProgramCoverage>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ProgramCoverage {
    /// The program's path, as the test file named it.
    pub program: PathBuf,
    pub covered: Covered,
}

/// Merges the cases' coverage per program, in the order programs first appear.
fn by_program(loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult]) -> Vec<(usize, Covered)> {
    let mut programs: Vec<(usize, PathBuf, Covered)> = Vec::new();
    for (&(file_index, _), result) in jobs.iter().zip(results) {
        let Some(file) = loaded.get(file_index) else { continue };
        let key = std::fs::canonicalize(&file.file.program).unwrap_or_else(|_| file.file.program.clone());
        match programs.iter_mut().find(|(_, path, _)| *path == key) {
            Some((_, _, covered)) => covered.merge(&result.covered),
            None => programs.push((file_index, key, result.covered.clone())),
        }
    }
    programs.into_iter().map(|(index, _, covered)| (index, covered)).collect()
}

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

/// Reads a coverage file and finds the part of the program at `program`
/// (the only part, when the file holds one).
pub fn load_for(path: &Path, program: &Path) -> Result<Covered, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
    let file: CoverageFile = serde_json::from_str(&text).map_err(|error| {
        format!("`{}` is not a coverage file of `flowc test --coverage-out`: {error}", path.display())
    })?;
    let wanted = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let found = file
        .programs
        .iter()
        .find(|entry| std::fs::canonicalize(&entry.program).unwrap_or_else(|_| entry.program.clone()) == wanted);
    match (found, file.programs.as_slice()) {
        (Some(entry), _) => Ok(entry.covered.clone()),
        (None, [only]) => Ok(only.covered.clone()),
        _ => Err(format!("`{}` holds no coverage of `{}`", path.display(), program.display())),
    }
}
