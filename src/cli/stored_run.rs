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

/// Why a stored run cannot go on with its program as it is now.
fn check_program(stored: &StoredRun) -> Result<(Program, PathBuf), String> {
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
    let dir = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok((compilation.ir, dir))
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
    resume.resume(stored, claim, check_program(stored), hooks)
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
