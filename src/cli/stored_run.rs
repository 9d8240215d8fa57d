//! What the command line adds to [`crate::stored_run`] (which `run`,
//! `resume`, `worker` and `serve` share): the run's program read again from
//! its file and checked, progress lines on a terminal, and the line (or
//! JSON) that reports a run.

use super::Outcome;
use crate::ir::Program;
use crate::runtime::clock::{self, Clock};
use crate::runtime::model_step::Model;
use crate::runtime::session::program_hash;
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::runtime::workflow::{RunLimits, RunStatus, StepProgress, StepStatus, WorkflowRun};
use crate::source::SourceFile;
use crate::store::versions::{self, NewVersion};
use crate::store::{Claim, Store, StoreError, StoreLocation, StoredRun};
use crate::stored_run::{Execution, Hooks, Resume};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// This process's name on the claims it takes.
pub fn holder_name() -> String {
    crate::stored_run::holder_name("")
}

/// Prints each step as it ends on stderr, when asked to.
fn progress_printer(show: bool) -> impl FnMut(&StepProgress) {
    move |progress: &StepProgress| {
        if show {
            let status = match progress.status {
                StepStatus::Failed => "failed",
                _ => "completed",
            };
            let percent = progress.index * 100 / progress.total.max(1);
            eprintln!("step {} of {} {status} ({percent}%): {}", progress.index, progress.total, progress.id);
        }
    }
}

/// Runs `stored` from where it stands to where it stops, as
/// [`Execution::execute`] does, with the program's own tools.
pub fn execute(
    store: &dyn Store,
    stored: &mut StoredRun,
    program: &Program,
    tool_env: &ToolEnv,
    claim: &Claim,
    (limits, model): (RunLimits, Option<&Model>),
    show_progress: bool,
) -> Result<(), StoreError> {
    let tools = ToolRegistry::default();
    let execution = Execution { store, program, tools: &tools, tool_env, limits, model };
    let hooks = Hooks { on_progress: &mut progress_printer(show_progress), on_saved: &mut |_: &WorkflowRun| {} };
    execution.execute(stored, claim, hooks)
}

/// The program a stored run goes on with: its file as it is now, when it
/// still compiles to the version the run started on; else that version as
/// the store recorded it ([`record_program`]), compiled again; else why the
/// run cannot go on.
fn check_program(store: &dyn Store, stored: &StoredRun) -> Result<(Program, PathBuf), String> {
    let why = match program_from_file(stored) {
        Ok(found) => return Ok(found),
        Err(why) => why,
    };
    match program_from_store(store, stored) {
        Ok(Some(found)) => {
            eprintln!(
                "note: run {}: its program {} changed while it waited; it goes on with the version it started on \
                 ({}), as the store recorded it",
                stored.run.run, stored.program, stored.program_hash
            );
            Ok(found)
        }
        Ok(None) => Err(why),
        Err(also) => Err(format!("{why}; {also}")),
    }
}

/// The run's program read again from its file, if it is the version the
/// run started on.
fn program_from_file(stored: &StoredRun) -> Result<(Program, PathBuf), String> {
    let path = PathBuf::from(&stored.program);
    let loaded = super::load::load_file(&path).map_err(|error| {
        format!("its program {} cannot be read any more ({error}); start a new run with `flowc run`", stored.program)
    })?;
    if loaded.encoding_error.is_some() {
        return Err(format!("its program {} is no longer UTF-8 text", stored.program));
    }
    let compilation = crate::pipeline::compile(&loaded.file);
    if compilation.has_errors() {
        return Err(format!(
            "its program {} has errors now (`flowc check {}` shows them); fix them, or start a new run",
            stored.program, stored.program
        ));
    }
    if program_hash(&compilation.ir) != stored.program_hash {
        return Err(format!(
            "its program {} changed while the run waited (program hash {} then, {} now); \
             a run goes on only with the program it started with: start a new run with `flowc run`",
            stored.program,
            stored.program_hash,
            program_hash(&compilation.ir)
        ));
    }
    Ok((compilation.ir, folder_of(&path)))
}

/// The version the run started on, from the store: `None` when the store
/// has no record of it (a run started before versions were recorded);
/// `Err` when it has one that cannot serve.
fn program_from_store(store: &dyn Store, stored: &StoredRun) -> Result<Option<(Program, PathBuf)>, String> {
    let path = Path::new(&stored.program);
    let mut recorded = None;
    for name in versions::program_names(path) {
        match store.load_version(&name, &stored.program_hash) {
            Ok(Some(version)) => {
                recorded = Some(version);
                break;
            }
            Ok(None) => {}
            Err(error) => return Err(format!("the store's copy of its version cannot be read ({error})")),
        }
    }
    let Some(version) = recorded else {
        return Ok(None);
    };
    let compilation = crate::pipeline::compile(&SourceFile::new(stored.program.clone(), version.source));
    if compilation.has_errors() || program_hash(&compilation.ir) != stored.program_hash {
        return Err("the store's copy of its version does not compile to it with this flowc".to_string());
    }
    // Its tools' paths start at its folder: the file's, on this machine,
    // else the folder it was recorded in.
    let folder =
        if path.parent().is_some_and(Path::is_dir) { folder_of(path) } else { folder_of(Path::new(&version.path)) };
    Ok(Some((compilation.ir, folder)))
}

fn folder_of(path: &Path) -> PathBuf {
    path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Records `program`, compiled from `file`, in the store, so that a worker
/// or `flowc resume` can go on with a run of it after the file is edited
/// ([`check_program`]). The file is read again and recorded only if it
/// still compiles to `program` (an edit in between is not recorded as it).
/// A failure is said and the run goes on: only a resume after an edit
/// would then refuse it.
pub fn record_program(store: &dyn Store, file: &Path, program: &Program) {
    let Ok(source) = std::fs::read_to_string(file) else {
        return;
    };
    let hash = program_hash(program);
    let shown = file.to_string_lossy();
    let compilation = crate::pipeline::compile(&SourceFile::new(shown.to_string(), source.clone()));
    if compilation.has_errors() || program_hash(&compilation.ir) != hash {
        return;
    }
    let name = versions::program_name(file);
    let new = NewVersion { program: &name, hash: &hash, path: &shown, source: &source };
    if let Err(error) = store.record_version(&new) {
        eprintln!(
            "warning: the version of {shown} was not recorded in the store ({error}): after an edit, its runs \
             cannot be resumed"
        );
    }
}

/// Resumes a run this process has claimed, under `limits`, with its
/// program read again from its file. A run whose program changed or went
/// away fails, with the reason recorded on the run.
pub fn resume_claimed(
    store: &dyn Store,
    stored: &mut StoredRun,
    claim: &Claim,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn clock::IdSource>,
    (limits, model): (RunLimits, Option<&Model>),
    show_progress: bool,
) -> Result<Option<Program>, StoreError> {
    let tools = ToolRegistry::default();
    let resume = Resume { store, tools: &tools, clock, ids, limits, model };
    let hooks = Hooks { on_progress: &mut progress_printer(show_progress), on_saved: &mut |_: &WorkflowRun| {} };
    resume.resume(stored, claim, check_program(store, stored), hooks)
}

/// The model a resumed run's model steps ask: the provider `flowc.toml`
/// (or `FLOWC_PROVIDER`) names, offline by default. `None`, with the
/// reason on stderr, when it cannot be built: model steps then fail.
pub fn configured_model(config: &crate::config::Config) -> Option<Model> {
    let built = crate::llm::config::load(config, &crate::llm::ProviderFlags::default())
        .map_err(|error| error.to_string())
        .and_then(|provider| crate::llm::build_provider(&provider).map_err(|error| error.to_string()));
    match built {
        Ok(provider) => Some(Model::new(provider)),
        Err(error) => {
            eprintln!("warning: no model for model steps: {error}");
            None
        }
    }
}

/// The line `flowc run` and `flowc resume` print for a run, or its JSON.
pub fn report(run: &WorkflowRun, program: Option<&Program>, json: bool, location: &StoreLocation) -> Outcome {
    if json {
        let value = match program {
            Some(program) => run.to_json(program),
            None => serde_json::to_value(run).unwrap_or_default(),
        };
        let mut text = value.to_string();
        text.push('\n');
        let printed = super::print_stdout(&text);
        if printed != Outcome::Success {
            return printed;
        }
    } else {
        let summary = match run.status {
            RunStatus::Completed => "completed".to_string(),
            RunStatus::Waiting => {
                format!("waiting: resumes at {}", run.resume_at.clone().unwrap_or_default())
            }
            RunStatus::Aborted => "aborted".to_string(),
            RunStatus::Cancelled => "cancelled".to_string(),
            RunStatus::Failed => run.failure_summary().unwrap_or_else(|| "failed".to_string()),
            RunStatus::Running => "stopped".to_string(),
            RunStatus::Paused => run.limit_summary().unwrap_or_else(|| "paused".to_string()),
        };
        if super::print_stdout(&format!("run {}: {summary}\n", run.run)) != Outcome::Success {
            return Outcome::Error;
        }
        if run.status == RunStatus::Paused {
            eprintln!(
                "note: the run is stored in {location}, paused: `flowc resume {}` goes on with it (workers leave it)",
                run.run
            );
        } else if matches!(run.status, RunStatus::Waiting | RunStatus::Running) {
            eprintln!(
                "note: the run is stored in {location}; `flowc resume {}` or `flowc worker` goes on with it",
                run.run
            );
        }
    }
    match run.status {
        RunStatus::Failed => Outcome::Failure,
        _ => Outcome::Success,
    }
}
