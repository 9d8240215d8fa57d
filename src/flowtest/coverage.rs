//! What the cases of test files reached, per program: merged from each
//! case's [`Covered`], written to and read from the coverage file
//! (`flowc test --coverage-out`, `flowc graph --coverage`), and computed
//! for one program from the test files beside it (the playground's
//! coverage overlay).

use super::Loaded;
use super::case::{CaseResult, ModelChoice, run_case};
use crate::graph::coverage::Covered;
use crate::ir::Program;
use crate::source::SourceFile;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The coverage file: what the cases of one program reached.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CoverageFile {
    /// The file's format, 1.
    pub version: u32,
    /// Per program tested.
    pub programs: Vec<ProgramCoverage>,
}

/// What the cases of one program reached.
#[derive(Debug, Serialize, Deserialize)]
pub struct ProgramCoverage {
    /// The program's path, as the test file named it.
    pub program: PathBuf,
    /// What its cases reached.
    pub covered: Covered,
}

/// Merges the cases' coverage per program, in the order programs first
/// appear: the index of the first test file of each, and what they reached.
pub fn by_program(loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult]) -> Vec<(usize, Covered)> {
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

/// What the test files beside one program reached when their cases ran.
#[derive(Debug, Default)]
pub struct ProgramTests {
    /// The test files that name the program and were run, as paths.
    pub files: Vec<PathBuf>,
    /// Test files that name the program but could not run, with why.
    pub broken: Vec<(PathBuf, String)>,
    /// How many cases ran, and how many of them failed.
    pub cases: usize,
    /// How many of those cases failed.
    pub failed: usize,
    /// What they reached, merged.
    pub covered: Covered,
}

/// Runs every case of the test files in `program_path`'s folder that name
/// it (`program:` resolving to the same file), against `program` as
/// compiled by the caller, on each case's own model (offline unless the
/// file says otherwise), one case after the other.
pub fn of_program(program_path: &Path, program: &Arc<Program>) -> ProgramTests {
    let mut tests = ProgramTests::default();
    let wanted = std::fs::canonicalize(program_path).unwrap_or_else(|_| program_path.to_path_buf());
    let folder = wanted.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return tests;
    };
    let mut paths: Vec<PathBuf> =
        entries.flatten().map(|entry| entry.path()).filter(|path| crate::source::is_test_file(path)).collect();
    paths.sort();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let source = SourceFile::new(path.display().to_string(), text);
        let Ok((named, _)) = super::read::program_path(&source, &path) else { continue };
        if std::fs::canonicalize(&named).unwrap_or(named) != wanted {
            continue;
        }
        let (file, diagnostics) = super::read::read(source, &path, Some(program));
        let first_error = diagnostics.iter().find(|diagnostic| diagnostic.is_error());
        let file = match (file, first_error) {
            (Some(file), None) => file,
            (_, error) => {
                let why = error.map_or_else(|| "it cannot be read".to_string(), |error| error.message.clone());
                tests.broken.push((path, why));
                continue;
            }
        };
        for case in &file.cases {
            let result = run_case(&file, program, case, &ModelChoice::default());
            tests.cases += 1;
            if !result.failures.is_empty() {
                tests.failed += 1;
            }
            tests.covered.merge(&result.covered);
        }
        tests.files.push(path);
    }
    tests
}
