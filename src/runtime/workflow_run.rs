//! A workflow run's state: its status, each step's record and the events
//! of the run, serializable so a store keeps it and a later `flowc resume`
//! goes on from it, and its JSON shape for reports. The runner that
//! advances a run is [`super::workflow`]; actions read the step records
//! (`steps.NAME.output`) without depending on the runner.
//!
//! A store keeps a run in three parts so that a save costs the same at
//! step 10,000 as at step 1: the head ([`WorkflowRun::head_json`]: status,
//! position, data), one row per step record (only the records that
//! changed since the last save, [`WorkflowRun::touched`]) and one row per
//! event and per warning (only the new ones).

#![warn(missing_docs)]

use super::events::StopReason;
use super::session::Data;
use crate::ir::{FlowId, Program, StepId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// Where a workflow run stands.
pub enum RunStatus {
    /// Executing steps now.
    Running,
    /// Every step done.
    Completed,
    /// A step failed and the run stopped.
    Failed,
    /// A step waits (for a time or an event); the run resumes later.
    Waiting,
    /// A directive aborted the run.
    Aborted,
    /// Stopped before its next step by a limit of the call that ran it
    /// ([`super::workflow::RunLimits`]): it goes on when it is resumed by
    /// name (`flowc resume`, or another `run_within`), never by a worker's
    /// poll, which would make the limit a mere slice.
    Paused,
    /// Cancelled by an operator (`flowc runs cancel`) while it waited or
    /// ran: it has ended, and nothing resumes it.
    Cancelled,
}

impl RunStatus {
    /// The status as stored and printed: `running`, `cancelled`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Waiting => "waiting",
            RunStatus::Aborted => "aborted",
            RunStatus::Paused => "paused",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the run is over: nothing may resume it.
    pub fn has_ended(self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed | RunStatus::Aborted | RunStatus::Cancelled)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// Where one step of a run stands.
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Executing now.
    Running,
    /// Done, with its output.
    Completed,
    /// Failed, with its error.
    Failed,
    /// Passed over by its `skip_if`.
    Skipped,
    /// Waiting, as the run is.
    Waiting,
    /// The operator stopped flowc while the step ran and its grace period
    /// ended first: its tool was killed, and the step runs again when the
    /// run goes on (its side effect may have happened: at least once).
    Interrupted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// One step's record in a run.
pub struct StepRecord {
    /// The step's name.
    pub id: String,
    /// Where it stands.
    pub status: StepStatus,
    /// When it last started (RFC 3339).
    pub started_at: Option<String>,
    /// How long its last execution took.
    pub duration_ms: Option<u64>,
    /// What it produced (`null` until it completes).
    pub output: Value,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// A workflow run: everything needed to report it or to resume it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowRun {
    /// The run's id.
    pub run: String,
    /// The workflow the run executes.
    pub flow: FlowId,
    /// Where the run stands.
    pub status: RunStatus,
    /// The step to run next (while running or waiting).
    pub next_step: Option<StepId>,
    /// The failed or waiting step.
    pub stopped_at: Option<StepId>,
    /// When a waiting run is due (RFC 3339), if it waits for a time.
    pub resume_at: Option<String>,
    /// The workflow's fields, as the steps set them.
    pub data: Data,
    /// Context values, by key.
    pub context: Data,
    /// One per step of the flow, in its order. Absent from the head a
    /// store keeps: it stores the records as rows.
    #[serde(default)]
    pub steps: Vec<StepRecord>,
    /// Appended to, never rewritten. Absent from the head a store keeps:
    /// it stores them as rows, as the events.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The flow's name, so a store can list runs and a resume can find the
    /// flow in the program again.
    #[serde(default)]
    pub flow_name: String,
    /// When the first step started (RFC 3339).
    #[serde(default)]
    pub started_at: Option<String>,
    /// From the first step's start to where the run last stopped, waits
    /// included.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    #[serde(default)]
    /// What the run did, in order, across resumes.
    pub events: Vec<RunEvent>,
    /// Why the run failed when no step did (its program changed or went
    /// away while it waited).
    #[serde(default)]
    pub error: Option<String>,
    /// The limit ([`super::workflow::RunLimits`]) that stopped the run
    /// before its next step, while it is `paused`; or, on a `failed` run,
    /// the run's model limit ([`StopReason::RunModelLimit`]) that failed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<StopReason>,
    /// How many step executions ended (completed or failed): with the
    /// step's name, the `FLOWC_STEP_ID` its tools get, the same when a
    /// step interrupted or cut short by a crash runs again.
    #[serde(default)]
    pub steps_ended: u64,
    /// What the run's model steps spent, across resumes.
    #[serde(default)]
    pub model: ModelSpend,
    /// Which step records changed since the run was last saved, so that a
    /// save writes those only. Bookkeeping, not part of the run's value.
    #[serde(skip)]
    pub touched: Touched,
}

/// The model calls of a run's model steps (`ask_model`), repairs included,
/// their tokens, and how their answers fared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSpend {
    /// Calls made.
    #[serde(default)]
    pub calls: u64,
    /// Prompt tokens.
    #[serde(default)]
    pub prompt: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cached: u64,
    /// Answers that did not fit their field and were asked again.
    #[serde(default)]
    pub repaired: u64,
    /// Answers that still did not fit after the repair.
    #[serde(default)]
    pub rejected: u64,
}

impl ModelSpend {
    /// Adds what one execution's model steps spent.
    pub fn add(&mut self, tally: super::model_step::Tally) {
        self.calls += u64::from(tally.usage.calls);
        self.prompt += tally.usage.prompt;
        self.completion += tally.usage.completion;
        self.cached += tally.usage.cached;
        self.repaired += u64::from(tally.repaired);
        self.rejected += u64::from(tally.rejected);
    }
}

/// The step records a save must write: all of them (a new run), or those
/// that changed since the last save.
#[derive(Clone, Debug, Default)]
pub struct Touched {
    /// Every record must be written (a new run).
    pub all: bool,
    /// The indices of the records that changed.
    pub steps: std::collections::BTreeSet<usize>,
}

impl Touched {
    /// Forgets the changes: the run was saved.
    pub fn clear(&mut self) {
        self.all = false;
        self.steps.clear();
    }
}

/// Two runs are equal whatever their saves have written so far.
impl PartialEq for Touched {
    fn eq(&self, _: &Touched) -> bool {
        true
    }
}

/// [`WorkflowRun`] without its step records, events and warnings: what a store
/// rewrites on each save, the same size at every step. Its fields are
/// WorkflowRun's, by the same names, so that it reads back as a run whose
/// steps and events are empty.
#[derive(Serialize)]
struct RunHead<'a> {
    run: &'a str,
    flow: FlowId,
    status: RunStatus,
    next_step: Option<StepId>,
    stopped_at: Option<StepId>,
    resume_at: &'a Option<String>,
    data: &'a Data,
    context: &'a Data,
    flow_name: &'a str,
    started_at: &'a Option<String>,
    duration_ms: Option<u64>,
    error: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limited: Option<StopReason>,
    steps_ended: u64,
    model: ModelSpend,
}

/// A step started or ended: what a run did, in order, across resumes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEvent {
    /// `step_started`, `step_completed`, `step_failed`,
    /// `step_interrupted`, `run_resumed`, `run_cancelled`, and `run_scheduled`
    /// (at its tick) first in a run a schedule started.
    pub event: String,
    /// The step it is about; `None` for events of the run itself.
    pub step: Option<String>,
    /// RFC 3339.
    pub at: String,
}

impl WorkflowRun {
    /// The record of step `index`, marked as changed for the next save.
    pub fn step_mut(&mut self, index: usize) -> Option<&mut StepRecord> {
        let record = self.steps.get_mut(index)?;
        self.touched.steps.insert(index);
        Some(record)
    }

    /// The run without its step records and events, as JSON: see
    /// `RunHead`.
    pub fn head_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&RunHead {
            run: &self.run,
            flow: self.flow,
            status: self.status,
            next_step: self.next_step,
            stopped_at: self.stopped_at,
            resume_at: &self.resume_at,
            data: &self.data,
            context: &self.context,
            flow_name: &self.flow_name,
            started_at: &self.started_at,
            duration_ms: self.duration_ms,
            error: &self.error,
            limited: self.limited,
            steps_ended: self.steps_ended,
            model: self.model,
        })
    }

    /// The run in the JSON shape of DESIGN.md.
    pub fn to_json(&self, program: &Program) -> Value {
        self.json_with(Value::Object(super::session::ordered_data(program, &self.data)))
    }

    /// [`WorkflowRun::to_json`] when the run's program is gone or changed:
    /// the same object, with the data in name order.
    pub fn to_json_without_program(&self) -> Value {
        self.json_with(serde_json::to_value(&self.data).unwrap_or_default())
    }

    fn json_with(&self, data: Value) -> Value {
        // Names come from the run itself, so a run reads the same after its
        // program changed.
        let stopped_step =
            self.stopped_at.and_then(|step| self.steps.get(step.index())).map(|record| record.id.clone());
        let stopped_reason = match self.status {
            RunStatus::Completed => "flow_complete",
            // A run a limit failed names it; any other failure is an error.
            RunStatus::Failed => self.limited.map_or("error", StopReason::as_str),
            RunStatus::Waiting => "waiting",
            RunStatus::Aborted => "aborted",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Running => "needs_input",
            RunStatus::Paused => self.limited.map_or("needs_input", StopReason::as_str),
        };
        serde_json::json!({
            "run": self.run,
            "status": self.status,
            "flow": self.flow_name,
            "step": stopped_step,
            "stopped_reason": stopped_reason,
            "resume_at": self.resume_at,
            "data": data,
            "steps": self.steps,
            "duration_ms": self.duration_ms,
            "events": self.events,
            "error": self.error,
            "llm_calls": self.model.calls,
            "tokens": { "prompt": self.model.prompt, "completion": self.model.completion, "cached": self.model.cached },
        })
    }

    /// "stopped by step_limit: …" while one of the limits of the call that
    /// ran it last holds the run.
    pub fn limit_summary(&self) -> Option<String> {
        let reason = self.limited.filter(|_| self.status == RunStatus::Paused)?;
        let what = match reason {
            StopReason::StepLimit => "it ran `max_steps` steps in one call",
            StopReason::TimeLimit => "one call ran it for longer than `max_time`",
            StopReason::ErrorLimit => "`max_consecutive_errors` of its steps failed in a row",
            other => other.explanation(),
        };
        Some(format!("stopped by {}: {what}", reason.as_str()))
    }

    /// "failed at step 3 (send_email): `<error>`".
    pub fn failure_summary(&self) -> Option<String> {
        if self.status == RunStatus::Failed
            && let Some(error) = &self.error
        {
            return Some(format!("failed: {error}"));
        }
        let step = self.stopped_at?;
        let record = self.steps.get(step.index())?;
        let error = record.error.as_deref()?;
        (self.status == RunStatus::Failed)
            .then(|| format!("failed at step {} ({}): {error}", step.index() + 1, record.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_with_the_step_and_event_rows_is_the_run_again() {
        let mut run = WorkflowRun {
            run: "r".to_string(),
            flow: FlowId(0),
            status: RunStatus::Paused,
            next_step: Some(StepId(1)),
            stopped_at: None,
            resume_at: Some("2026-01-01T00:00:00Z".to_string()),
            data: [("n".to_string(), Value::from(3))].into_iter().collect(),
            context: Data::new(),
            steps: vec![StepRecord {
                id: "a".to_string(),
                status: StepStatus::Completed,
                started_at: None,
                duration_ms: Some(4),
                output: Value::Null,
                error: None,
            }],
            warnings: vec!["w".to_string()],
            flow_name: "f".to_string(),
            started_at: None,
            duration_ms: Some(9),
            events: vec![RunEvent {
                event: "step_started".to_string(),
                step: Some("a".to_string()),
                at: "t".to_string(),
            }],
            error: None,
            limited: Some(StopReason::StepLimit),
            steps_ended: 1,
            model: ModelSpend { calls: 3, prompt: 40, completion: 9, cached: 0, repaired: 1, rejected: 0 },
            touched: Touched::default(),
        };
        let head = run.head_json().unwrap();
        assert!(!head.contains("step_started") && !head.contains("\"steps\"") && !head.contains("\"w\""), "{head}");
        let mut read: WorkflowRun = serde_json::from_str(&head).unwrap();
        read.steps = run.steps.clone();
        read.events = run.events.clone();
        read.warnings = run.warnings.clone();
        assert_eq!(read, run);
        run.step_mut(0);
        assert_eq!(run.touched.steps.iter().copied().collect::<Vec<_>>(), [0]);
    }
}
