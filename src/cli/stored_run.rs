//! The stored execution every workflow command shares (`run`, `resume`,
//! `worker`): a run is saved when it starts, when each step starts and
//! ends, and when it stops, each save a compare-and-swap under the claim of
//! the process running it that writes what changed (the run's head, the
//! step's record, the new events); and the line (or JSON) that reports a
//! run.

use super::Outcome;
use crate::ir::Program;
use crate::runtime::clock::{self, Clock};
use crate::runtime::session::program_hash;
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::runtime::workflow::{RunLimits, RunStatus, StepProgress, StepStatus, WorkflowRun, WorkflowRunner};
use crate::store::{Claim, Store, StoreError, StoreLocation, StoredRun};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How long a claim holds a run without a checkpoint renewing it: a process
/// that dies mid-step leaves its run to others after this.
pub const LEASE_SECONDS: i64 = 300;

/// This process's name on the claims it takes: unique among processes,
/// whatever the id seed.
pub fn holder_name() -> String {
    let random = getrandom::u64().unwrap_or(0);
    format!("pid{}-{random:016x}", std::process::id())
}

pub fn claim_at(holder: &str, clock: &dyn Clock) -> Claim {
    let now = clock.now().timestamp();
    Claim { holder: holder.to_string(), now, until: now.saturating_add(LEASE_SECONDS) }
}

/// When a waiting run may go on, in seconds since the epoch.
fn due_at(run: &WorkflowRun) -> Option<i64> {
    if run.status != RunStatus::Waiting {
        return None;
    }
    let resume_at = run.resume_at.as_deref()?;
    chrono::DateTime::parse_from_rfc3339(resume_at).ok().map(|at| at.timestamp())
}

/// Runs `stored` from where it stands to where it stops (or to where one of
/// the operator's `limits` stops this call, leaving it `paused`), saving
/// it at every step under `claim`, then releases it. `Err` when the store
/// refused a save: the run stopped there and the store holds what was done.
pub fn execute(
    store: &dyn Store,
    stored: &mut StoredRun,
    program: &Program,
    tool_env: &ToolEnv,
    claim: &Claim,
    limits: RunLimits,
    show_progress: bool,
) -> Result<(), StoreError> {
    let tools = ToolRegistry::default();
    let mut on_progress = |progress: &StepProgress| {
        if show_progress {
            let status = match progress.status {
                StepStatus::Failed => "failed",
                _ => "completed",
            };
            let percent = progress.index * 100 / progress.total.max(1);
            eprintln!("step {} of {} {status} ({percent}%): {}", progress.index, progress.total, progress.id);
        }
    };
    let sleep = |duration: std::time::Duration| std::thread::sleep(duration);
    let mut saved: Result<(), StoreError> = Ok(());
    let mut run = stored.run.clone();
    {
        let mut checkpoint = |run: &WorkflowRun| -> Result<(), String> {
            let renewed = claim_at(&claim.holder, tool_env.clock.as_ref());
            crate::store::checkpoint_run(store, stored, run, &renewed).map_err(|error| {
                let message = error.to_string();
                saved = Err(error);
                message
            })
        };
        let mut runner = WorkflowRunner {
            program,
            tools: &tools,
            tool_env,
            sleep: &sleep,
            on_progress: &mut on_progress,
            checkpoint: &mut checkpoint,
        };
        if runner.run_within(&mut run, limits).is_err() {
            // A refused save is most often a `flowc runs cancel`: say so.
            if let Err(StoreError::RunConflict { id, .. }) = &saved
                && let Ok(Some(now)) = store.load_run(id)
                && now.run.status == RunStatus::Cancelled
            {
                stored.run = now.run;
                return Err(StoreError::RunCancelled { id: id.clone() });
            }
            return saved;
        }
    }
    finish(store, stored, run)
}

/// Saves `run` as where `stored` stopped, releasing its claim.
pub fn finish(store: &dyn Store, stored: &mut StoredRun, run: WorkflowRun) -> Result<(), StoreError> {
    let due = due_at(&run);
    crate::store::commit_run(store, stored, run, due, None)
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

/// Resumes a run this process has claimed, under `limits`. A run whose
/// program changed or went away fails, with the reason recorded on the run.
pub fn resume_claimed(
    store: &dyn Store,
    stored: &mut StoredRun,
    claim: &Claim,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn clock::IdSource>,
    limits: RunLimits,
    show_progress: bool,
) -> Result<Option<Program>, StoreError> {
    match check_program(stored) {
        Ok((program, base_dir)) => {
            let tool_env = ToolEnv { base_dir, clock, ids };
            execute(store, stored, &program, &tool_env, claim, limits, show_progress)?;
            Ok(Some(program))
        }
        Err(reason) => {
            let mut run = stored.run.clone();
            run.status = RunStatus::Failed;
            run.error = Some(reason);
            run.next_step = None;
            finish(store, stored, run)?;
            Ok(None)
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
