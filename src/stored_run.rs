//! Stored workflow execution, the one every process shares (`flowc run`,
//! `flowc resume`, `flowc worker`, `flowc serve`): a run is saved when it
//! starts, when each step starts and ends, and when it stops, each save a
//! compare-and-swap under the claim of the process running it that writes
//! what changed (the run's head, the step's record, the new events).
//!
//! It sits above both [`crate::runtime`] (which executes a run and knows
//! nothing of stores) and [`crate::store`] (which keeps runs and names the
//! runtime's types), so neither names the other's caller; the command line
//! and the server call it and never each other.

#![warn(missing_docs)]

use crate::ir::Program;
use crate::runtime::clock::{self, Clock};
use crate::runtime::model_step::Model;
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::runtime::workflow::{RunLimits, RunStatus, StepProgress, WorkflowRun, WorkflowRunner};
use crate::store::{Claim, Store, StoreError, StoredRun};
use std::path::PathBuf;
use std::sync::Arc;

/// How long a claim holds a run without a checkpoint renewing it: a process
/// that dies mid-step leaves its run to others after this.
pub const LEASE_SECONDS: i64 = 300;

/// This process's name on the claims it takes, `prefix` then the process
/// id and a random part: unique among processes, whatever the id seed.
pub fn holder_name(prefix: &str) -> String {
    let random = getrandom::u64().unwrap_or(0);
    format!("{prefix}pid{}-{random:016x}", std::process::id())
}

/// A claim by `holder` from now until the lease runs out.
pub fn claim_at(holder: &str, clock: &dyn Clock) -> Claim {
    let now = clock.now().timestamp();
    Claim { holder: holder.to_string(), now, until: now.saturating_add(LEASE_SECONDS) }
}

/// When a waiting run may go on, in seconds since the epoch.
pub fn due_at(run: &WorkflowRun) -> Option<i64> {
    if run.status != RunStatus::Waiting {
        return None;
    }
    let resume_at = run.resume_at.as_deref()?;
    chrono::DateTime::parse_from_rfc3339(resume_at).ok().map(|at| at.timestamp())
}

/// What an execution tells its caller as it goes.
pub struct Hooks<'a> {
    /// Each step as it ends ("step N of M").
    pub on_progress: &'a mut dyn FnMut(&StepProgress),
    /// The run each time the store has accepted a save of it (a step
    /// started or ended, the run stopped): what followers of the run's
    /// events are told about.
    pub on_saved: &'a mut dyn FnMut(&WorkflowRun),
}

/// How to run: the program the run started on, with its tools.
pub(crate) struct Execution<'a> {
    pub store: &'a dyn Store,
    pub program: &'a Program,
    pub tools: &'a ToolRegistry,
    pub tool_env: &'a ToolEnv,
    pub limits: RunLimits,
    /// The model the run's model steps ask.
    pub model: Option<&'a Model>,
}

impl Execution<'_> {
    /// Runs `stored` from where it stands to where it stops (or to where
    /// one of the operator's limits stops this call, leaving it `paused`),
    /// saving it at every step under `claim` (renewed at each save), then
    /// releases it. `Err` when the store refused a save: the run stopped
    /// there and the store holds what was done; `RunCancelled` (with
    /// `stored` as the store now holds it) when the refusal was a cancel.
    pub fn execute(&self, stored: &mut StoredRun, claim: &Claim, hooks: Hooks<'_>) -> Result<(), StoreError> {
        let Hooks { on_progress, on_saved } = hooks;
        let sleep = |duration: std::time::Duration| std::thread::sleep(duration);
        let mut saved: Result<(), StoreError> = Ok(());
        let mut run = stored.run.clone();
        let stopped = {
            let mut checkpoint = |run: &WorkflowRun| -> Result<(), String> {
                let renewed = claim_at(&claim.holder, self.tool_env.clock.as_ref());
                match crate::store::checkpoint_run(self.store, stored, run, &renewed) {
                    Ok(()) => {
                        on_saved(run);
                        Ok(())
                    }
                    Err(error) => {
                        let message = error.to_string();
                        saved = Err(error);
                        Err(message)
                    }
                }
            };
            let mut runner = WorkflowRunner {
                program: self.program,
                tools: self.tools,
                tool_env: self.tool_env,
                sleep: &sleep,
                on_progress,
                checkpoint: &mut checkpoint,
                model: self.model,
            };
            runner.run_within(&mut run, self.limits).is_err()
        };
        if stopped {
            // A refused save is most often a cancel (`flowc runs cancel`,
            // `POST /v1/runs/{id}/cancel`): say so.
            if let Err(StoreError::RunConflict { id, .. }) = &saved
                && let Ok(Some(now)) = self.store.load_run(id)
                && now.run.status == RunStatus::Cancelled
            {
                let id = id.clone();
                *stored = now;
                on_saved(&stored.run);
                return Err(StoreError::RunCancelled { id });
            }
            return saved;
        }
        finish(self.store, stored, run)?;
        on_saved(&stored.run);
        Ok(())
    }
}

/// Saves `run` as where `stored` stopped, releasing its claim.
pub fn finish(store: &dyn Store, stored: &mut StoredRun, run: WorkflowRun) -> Result<(), StoreError> {
    let due = due_at(&run);
    crate::store::commit_run(store, stored, run, due, None)
}

/// Records that `stored` cannot go on, for `reason` (its program changed
/// or went away), and releases it: `failed`, never taken again.
pub fn fail(store: &dyn Store, stored: &mut StoredRun, reason: String) -> Result<(), StoreError> {
    let mut run = stored.run.clone();
    run.status = RunStatus::Failed;
    run.error = Some(reason);
    run.next_step = None;
    finish(store, stored, run)
}

/// Where a claimed run goes on: its program, as compiled now and checked
/// to be the one it started with, and the folder its tools run in; or why
/// it cannot go on.
pub type Checked = Result<(Program, PathBuf), String>;

/// What resuming a claimed run needs besides the run.
pub struct Resume<'a> {
    /// Where the run is kept.
    pub store: &'a dyn Store,
    /// In-process tool handlers, by tool name.
    pub tools: &'a ToolRegistry,
    /// The time the run reads.
    pub clock: Arc<dyn Clock>,
    /// Where new ids come from.
    pub ids: Arc<dyn clock::IdSource>,
    /// The operator's limits on the run.
    pub limits: RunLimits,
    /// The model the run's model steps ask.
    pub model: Option<&'a Model>,
}

impl Resume<'_> {
    /// Resumes a run this process has claimed with the program `checked`
    /// found for it; a run whose program cannot go on fails, with the
    /// reason recorded on the run. Answers the program it ran with.
    pub fn resume(
        &self,
        stored: &mut StoredRun,
        claim: &Claim,
        checked: Checked,
        hooks: Hooks<'_>,
    ) -> Result<Option<Program>, StoreError> {
        match checked {
            Ok((program, base_dir)) => {
                let tool_env = ToolEnv { base_dir, clock: Arc::clone(&self.clock), ids: Arc::clone(&self.ids) };
                let execution = Execution {
                    store: self.store,
                    program: &program,
                    tools: self.tools,
                    tool_env: &tool_env,
                    limits: self.limits,
                    model: self.model,
                };
                execution.execute(stored, claim, hooks)?;
                Ok(Some(program))
            }
            Err(reason) => {
                fail(self.store, stored, reason)?;
                (hooks.on_saved)(&stored.run);
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::clock::{FixedClock, SeededIds};
    use crate::store::RunStore;
    use crate::store::sqlite::SqliteStore;

    fn temp_store(name: &str) -> SqliteStore {
        let dir = std::env::temp_dir().join(format!("flowc-stored-run-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        SqliteStore::open(&dir.join("flowc.db")).expect("a store in a fresh folder")
    }

    const PROGRAM: &str = "schema { x: string }\nflow w \"W\" {\n  auto step one { set x = \"a\" }\n  auto step two { set x = \"b\" }\n}\n";

    fn compiled() -> Program {
        let file = crate::source::SourceFile::new("w.flow", PROGRAM.to_string());
        let compilation = crate::pipeline::compile(&file);
        assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
        compilation.ir
    }

    /// A new run of the program's default flow, stored under a claim of
    /// this test, as `flowc run` stores one before its first step.
    fn started(program: &Program, tool_env: &ToolEnv, store: &SqliteStore) -> (StoredRun, Claim) {
        let flow = program.default_flow.unwrap_or(crate::ir::FlowId(0));
        let run = crate::runtime::workflow::start(program, tool_env, flow, &serde_json::Map::new(), Default::default())
            .expect("the run starts");
        let claim = claim_at("test", tool_env.clock.as_ref());
        let stored =
            StoredRun { run, program: "w.flow".to_string(), program_hash: "h".to_string(), version: 1, due_at: None };
        store.save_run(&stored, 0, Some(&claim)).expect("stored");
        (stored, claim)
    }

    fn env() -> ToolEnv {
        ToolEnv {
            base_dir: PathBuf::from("."),
            clock: Arc::new(FixedClock::parse("2026-11-26T12:00:00Z").expect("a time")),
            ids: Arc::new(SeededIds::new(7)),
        }
    }

    #[test]
    fn a_run_is_saved_at_every_step_and_released_at_the_end() {
        let program = compiled();
        let tool_env = env();
        let store = temp_store("saved");
        let (mut stored, claim) = started(&program, &tool_env, &store);
        let tools = ToolRegistry::default();
        let execution = Execution {
            store: &store,
            program: &program,
            tools: &tools,
            tool_env: &tool_env,
            limits: RunLimits::default(),
            model: None,
        };
        let mut progress = Vec::new();
        let mut saves = Vec::new();
        let hooks = Hooks {
            on_progress: &mut |step: &StepProgress| progress.push(step.id.clone()),
            on_saved: &mut |run: &WorkflowRun| saves.push((run.status, run.events.len())),
        };
        execution.execute(&mut stored, &claim, hooks).expect("executed");
        assert_eq!(stored.run.status, RunStatus::Completed);
        assert_eq!(progress, ["one", "two"]);
        // Each step saved as it started and ended, then the run as it stopped.
        assert_eq!(saves.len(), 5, "{saves:?}");
        assert_eq!(saves.last().map(|save| save.0), Some(RunStatus::Completed));
        let kept = store.load_run(&stored.run.run).expect("read").expect("kept");
        assert_eq!(kept.run.status, RunStatus::Completed);
        assert_eq!(kept.version, stored.version);
    }

    #[test]
    fn a_run_that_cannot_go_on_fails_with_its_reason() {
        let program = compiled();
        let tool_env = env();
        let store = temp_store("failed");
        let (mut stored, claim) = started(&program, &tool_env, &store);
        let tools = ToolRegistry::default();
        let resume = Resume {
            store: &store,
            tools: &tools,
            clock: Arc::clone(&tool_env.clock),
            ids: Arc::clone(&tool_env.ids),
            limits: RunLimits::default(),
            model: None,
        };
        let mut saved = 0;
        let hooks = Hooks { on_progress: &mut |_: &StepProgress| {}, on_saved: &mut |_: &WorkflowRun| saved += 1 };
        let ran = resume.resume(&mut stored, &claim, Err("its program changed".to_string()), hooks).expect("saved");
        assert!(ran.is_none());
        assert_eq!(saved, 1);
        let kept = store.load_run(&stored.run.run).expect("read").expect("kept");
        assert_eq!(kept.run.status, RunStatus::Failed);
        assert_eq!(kept.run.error.as_deref(), Some("its program changed"));
    }
}
