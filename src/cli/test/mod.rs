//! `flowc test [PATH...]`: conversation and workflow tests for flow
//! authors. Finds `*.test.yaml` files, reads each against its compiled
//! program (a wrong file is diagnostics, as `flowc check` gives), runs their
//! cases in parallel on the offline model or a recording, with stubbed tools
//! and a clock the test moves, and reports like a test runner: one line per
//! case, the differences of a failing one, and `N passed, N failed` last.
//!
//! Reading and running a test file is the library's ([`crate::flowtest`]:
//! the file as data, reading it, stubs, running a case, comparing, and
//! merging coverage); here `report` writes the human, JSON and JUnit
//! reports, `coverage` the coverage table and file, and `update` rewrites
//! expectations from what happened.

mod coverage;
mod report;
mod update;

use crate::flowtest::{case, expect, file, read};

pub use crate::flowtest::coverage::load_for as coverage_for;

use super::Outcome;
use super::report::{print_stderr, stderr_style};
use crate::diag::render::render_human;
use crate::ir::Program;
use crate::source::SourceFile;
use case::{CaseResult, ModelChoice, run_case};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test files (*.test.yaml), or directories to search for them (default: .)
    pub paths: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Also write a JUnit XML report to FILE
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Run only the cases whose name (or file) contains TEXT
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Rewrite the expectations of failing cases from what happened (the diff is shown first)
    #[arg(long)]
    pub update: bool,
    /// Print which steps, branch entries and transitions the cases reached, per flow
    #[arg(long)]
    pub coverage: bool,
    /// Write the coverage as JSON to FILE, for `flowc graph --coverage FILE`
    #[arg(long, value_name = "FILE")]
    pub coverage_out: Option<PathBuf>,
    /// How many cases run at once (default: the number of cores)
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Talk to this model instead of each case's own
    #[command(flatten)]
    pub model: crate::cli::model::ModelFlags,
    /// Record each case's model calls in DIR/<file>-<case>.json, to replay with `provider: replay:FILE`
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

pub use super::load::is_test_file;

pub use crate::flowtest::Loaded;

pub fn run(args: &TestArgs) -> Outcome {
    let paths = if args.paths.is_empty() { vec![PathBuf::from(".")] } else { args.paths.clone() };
    let found = match find_test_files(&paths) {
        Ok(found) => found,
        Err(message) => {
            eprintln!("error: {message}");
            return Outcome::Error;
        }
    };
    let mut loaded = Vec::new();
    let mut broken = 0usize;
    for path in &found {
        match load(path) {
            Some(file) => loaded.push(file),
            None => broken += 1,
        }
    }
    if let Some(directory) = &args.record
        && let Err(error) = std::fs::create_dir_all(directory)
    {
        eprintln!("error: cannot create `{}`: {error}", directory.display());
        return Outcome::Error;
    }
    let choice = ModelChoice {
        provider: args.model.provider.clone(),
        model: args.model.model.clone(),
        base_url: args.model.base_url.clone(),
        record: args.record.clone(),
    };
    let jobs = selected(&loaded, args.filter.as_deref());
    let results = run_all(&loaded, &jobs, &choice, args.jobs);
    let mut outcome = report::write(args, &loaded, &jobs, &results, broken);
    if args.coverage || args.coverage_out.is_some() {
        outcome = outcome.worst(coverage::report(args, &loaded, &jobs, &results));
    }
    if args.update {
        outcome = outcome.worst(update::rewrite(&loaded, &jobs, &results));
    }
    let failed = results.iter().filter(|result| !result.failures.is_empty()).count();
    let passed = results.len() - failed;
    let summary = format!("{passed} passed, {failed} failed\n");
    if args.format == Format::Json {
        print_stderr(&summary);
    } else {
        outcome = outcome.worst(super::print_stdout(&summary));
    }
    if failed > 0 || broken > 0 { outcome.worst(Outcome::Failure) } else { outcome }
}

/// Every test file the paths name: files as given (they must be test
/// files), directories searched, sorted, hidden folders and `target` left out.
fn find_test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let before = files.len();
            walk(path, &mut files).map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
            if files.len() == before {
                return Err(format!("`{}` holds no test file (*.test.yaml)", super::load::display_path(path)));
            }
        } else if is_test_file(path) {
            if !path.is_file() {
                return Err(format!("cannot read `{}`: no such file", path.display()));
            }
            files.push(path.clone());
        } else {
            return Err(format!("`{}` is not a test file: test files are named *.test.yaml", path.display()));
        }
    }
    Ok(files)
}

fn walk(directory: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(directory)?.map(|entry| entry.map(|entry| entry.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for entry in entries {
        let name = entry.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let is_link = std::fs::symlink_metadata(&entry).is_ok_and(|metadata| metadata.file_type().is_symlink());
        if entry.is_dir() {
            if !is_link {
                walk(&entry, files)?;
            }
        } else if is_test_file(&entry) {
            files.push(entry);
        }
    }
    Ok(())
}

/// Reads a test file and compiles its program, printing what is wrong
/// with either on stderr; `None` when its cases cannot run.
fn load(path: &Path) -> Option<Loaded> {
    let style = stderr_style();
    let name = super::load::display_path(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("error: cannot read `{name}`: {error}");
            return None;
        }
    };
    let source = SourceFile::new(name, text);
    let show = |file: &SourceFile, diagnostics: &[crate::diag::Diagnostic]| {
        for diagnostic in diagnostics {
            print_stderr(&format!("{}\n", render_human(file, diagnostic, style)));
        }
    };
    let program_path = match read::program_path(&source, path) {
        Ok((program_path, _)) => program_path,
        Err(diagnostic) => {
            show(&source, &[diagnostic]);
            return None;
        }
    };
    let program = compile_program(&source, &program_path, &show);
    let (file, mut diagnostics) = read::read(source.clone(), path, program.as_deref());
    crate::diag::sort_diagnostics(&mut diagnostics);
    let errors = diagnostics.iter().any(crate::diag::Diagnostic::is_error);
    show(&source, &diagnostics);
    if let Some(file) = &file {
        for case in file.cases.iter().filter(|case| expects_nothing(case)) {
            eprintln!(
                "note: {} › {}: the case expects nothing; it only checks that its turns run",
                source.name, case.name
            );
        }
    }
    match (file, program) {
        (Some(file), Some(program)) if !errors => Some(Loaded { file, program }),
        _ => {
            eprintln!("error: `{}` has errors: its cases did not run", source.name);
            None
        }
    }
}

/// A case with no expectation and no rule: it passes whatever its flow
/// says, which an author should know.
fn expects_nothing(case: &file::Case) -> bool {
    let expects = match &case.body {
        file::CaseBody::Conversation(turns) => turns.iter().any(|turn| !turn.expects.is_empty()),
        file::CaseBody::Workflow(workflow) => {
            !workflow.expects.is_empty() || workflow.resumes.iter().any(|resume| !resume.expects.is_empty())
        }
    };
    !expects && case.never.is_empty() && case.never_before.is_empty()
}

/// The program a test file names, or `None` (with its diagnostics shown)
/// when it cannot be read or does not compile.
fn compile_program(
    source: &SourceFile,
    program_path: &Path,
    show: &dyn Fn(&SourceFile, &[crate::diag::Diagnostic]),
) -> Option<Arc<Program>> {
    let loaded = match super::load::load_file(program_path) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {}: the program: {error}", source.name);
            return None;
        }
    };
    if let Some(encoding_error) = loaded.encoding_error {
        show(&loaded.file, &[encoding_error]);
        return None;
    }
    let compilation = crate::pipeline::compile(&loaded.file);
    if compilation.has_errors() {
        show(&loaded.file, &compilation.diagnostics);
        eprintln!("error: {}: the program `{}` does not compile", source.name, loaded.file.name);
        return None;
    }
    Some(Arc::new(compilation.ir))
}

/// The cases to run, as (file, case) indices, in file order.
fn selected(loaded: &[Loaded], filter: Option<&str>) -> Vec<(usize, usize)> {
    let mut jobs = Vec::new();
    for (file_index, loaded) in loaded.iter().enumerate() {
        for (case_index, case) in loaded.file.cases.iter().enumerate() {
            let chosen = filter.is_none_or(|text| case.name.contains(text) || loaded.file.source.name.contains(text));
            if chosen {
                jobs.push((file_index, case_index));
            }
        }
    }
    jobs
}

/// Runs the cases on `threads` threads (default: the cores); results in
/// the order of `jobs`, whatever order they finished in.
fn run_all(
    loaded: &[Loaded],
    jobs: &[(usize, usize)],
    choice: &ModelChoice,
    threads: Option<usize>,
) -> Vec<CaseResult> {
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
        .clamp(1, jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((file_index, case_index)) = jobs.get(index).copied() else { break };
                    let Some(loaded) = loaded.get(file_index) else { break };
                    let Some(case) = loaded.file.cases.get(case_index) else { break };
                    let result = run_case(&loaded.file, &loaded.program, case, choice);
                    if let Ok(mut results) = results.lock()
                        && let Some(slot) = results.get_mut(index)
                    {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_default().into_iter().flatten().collect()
}
