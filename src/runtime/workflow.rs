//! Workflow runs: a flow whose steps are all `auto`, run to its end with no
//! user (LANGUAGE.md section 8). Each step leaves a record (status, start,
//! duration, output, error); a failure leaves earlier steps completed and
//! later ones skipped; `on_error` may continue or retry; a `wait` step ends
//! the run as `waiting` with its resume time. The whole run state is
//! serializable so a store can keep it and a later `flowc resume` can go on
//! from the next step without re-running a completed one: the runner hands
//! the run to a checkpoint when each step starts and when it ends, and the
//! caller stores it there.

pub use super::workflow_run::{RunEvent, RunStatus, StepRecord, StepStatus, WorkflowRun};

use super::actions::{ActionOutput, ActionRunner, ActionSource, Scope, evaluate_directive};
use super::directive::{Move, Source, merge};
use super::events::StopReason;
use super::session::Data;
use super::tools::{ToolEnv, ToolRegistry};
use super::validate::validate;
use crate::expr::eval::{eval, is_true};
use crate::ir::successor::{self, Landing, Leaving};
use crate::ir::{Flow, FlowId, OnError, OutputShape, Program, Step, StepId, Then, output_shape};
use serde_json::Value;

/// A workflow cannot take more step executions than this in one run (a
/// `next`/branch loop without a `wait` is a compile error; this is the
/// last line of defence).
const MAX_EXECUTIONS: usize = 100_000;

/// Why a run could not start: a usage error (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The flow has a step that is not `auto` (a step of a conversation),
    /// so it cannot run as a workflow.
    #[error("`{flow}` is not a workflow: its step `{step}` is not auto")]
    NotAWorkflow {
        /// The flow's name.
        flow: String,
        /// Its first step that is not `auto`.
        step: String,
    },
    /// Inputs the workflow requires were not given.
    #[error("the workflow `{flow}` needs its inputs: {missing} (give them with --data)")]
    MissingInputs {
        /// The flow's name.
        flow: String,
        /// The missing inputs' names, comma-separated.
        missing: String,
    },
    /// An input whose value does not fit its declared type.
    #[error("invalid input `{field}`: {reason}")]
    InvalidInput {
        /// The input's name.
        field: String,
        /// Why the value does not fit.
        reason: String,
    },
    /// An input the program's schema does not declare.
    #[error("unknown input `{field}`: the schema declares no such field")]
    UnknownInput {
        /// The name given.
        field: String,
    },
}

/// Limits a program embedding flowc sets on one call of
/// [`WorkflowRunner::run_within`]. A run that reaches one stops before its
/// next step, `paused`, its `stopped_reason` naming the limit; the
/// next call (or `flowc resume`) goes on from that step. `None` is no limit,
/// the default. Workflows make no model calls, so token and tool-round
/// limits do not apply to them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Steps one call may run ([`StopReason::StepLimit`]).
    pub max_steps: Option<u32>,
    /// Wall time of one call ([`StopReason::TimeLimit`]).
    pub max_time: Option<std::time::Duration>,
    /// Steps that failed in a row and went on by `on_error: continue`
    /// ([`StopReason::ErrorLimit`]).
    pub max_consecutive_errors: Option<u32>,
}

impl RunLimits {
    fn reached(&self, steps: u32, elapsed: std::time::Duration, failures_in_a_row: u32) -> Option<StopReason> {
        if self.max_steps.is_some_and(|limit| steps >= limit) {
            return Some(StopReason::StepLimit);
        }
        if self.max_time.is_some_and(|limit| elapsed > limit) {
            return Some(StopReason::TimeLimit);
        }
        if self.max_consecutive_errors.is_some_and(|limit| failures_in_a_row >= limit) {
            return Some(StopReason::ErrorLimit);
        }
        None
    }
}

/// Progress of a run, for a terminal.
#[derive(Clone, Debug)]
pub struct StepProgress {
    /// The step's position in the flow, from 1.
    pub index: usize,
    /// How many steps the flow has.
    pub total: usize,
    /// The step's name.
    pub id: String,
    /// What the step just did: started, completed, failed, ...
    pub status: StepStatus,
}

/// Runs a workflow's steps one after the other, each step's actions and
/// tool calls, with retries and waits, reporting progress and checkpointing
/// the run so that a store can resume it. Build one per run (or resume) and
/// call [`WorkflowRunner::run`] or [`WorkflowRunner::run_within`].
pub struct WorkflowRunner<'a> {
    /// The program the workflow is in.
    pub program: &'a Program,
    /// The tools its steps may call.
    pub tools: &'a ToolRegistry,
    /// What the tools run with: the program's folder, the clock, the id
    /// source.
    pub tool_env: &'a ToolEnv,
    /// Sleeps between retries (tests pass one that returns at once).
    pub sleep: &'a dyn Fn(std::time::Duration),
    /// Called as each step starts and ends, for a terminal's progress line.
    pub on_progress: &'a mut dyn FnMut(&StepProgress),
    /// Called with the run when a step starts and when it ends; an error
    /// (the run could not be stored) stops the run where it is, so that no
    /// step runs unrecorded.
    pub checkpoint: &'a mut dyn FnMut(&WorkflowRun) -> Result<(), String>,
    /// The model the run's model steps (`ask_model`) ask; without one they
    /// fail, as a step whose tool is missing does.
    pub model: Option<&'a super::model_step::Model>,
}

/// Validates the inputs and creates the run, with a fresh id from
/// `tool_env`'s id source; nothing runs yet.
pub fn start(
    program: &Program,
    tool_env: &ToolEnv,
    flow_id: FlowId,
    inputs: &serde_json::Map<String, Value>,
    context: Data,
) -> Result<WorkflowRun, StartError> {
    let flow_name = program.flow(flow_id).map_or_else(String::new, |flow| flow.name.clone());
    let flow = program.flow(flow_id);
    if let Some(step) = flow.and_then(|flow| flow.steps.iter().find(|step| !step.auto)) {
        return Err(StartError::NotAWorkflow { flow: flow_name, step: step.name.clone() });
    }
    let mut data = Data::new();
    for (name, value) in inputs {
        let Some(field) = program.fields.iter().find(|field| field.name == *name) else {
            return Err(StartError::UnknownInput { field: name.clone() });
        };
        let value =
            validate(value, &field.ty).map_err(|reason| StartError::InvalidInput { field: name.clone(), reason })?;
        if !value.is_null() {
            data.insert(name.clone(), value);
        }
    }
    let missing: Vec<String> = flow
        .map(|flow| {
            flow.requires
                .iter()
                .filter_map(|field| program.field(*field))
                .filter(|field| !data.contains_key(&field.name))
                .map(|field| format!("`{}`", field.name))
                .collect()
        })
        .unwrap_or_default();
    if !missing.is_empty() {
        return Err(StartError::MissingInputs { flow: flow_name, missing: missing.join(", ") });
    }
    let steps = flow
        .map(|flow| {
            flow.steps
                .iter()
                .map(|step| StepRecord {
                    id: step.name.clone(),
                    status: StepStatus::Pending,
                    started_at: None,
                    duration_ms: None,
                    output: Value::Null,
                    error: None,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut run = WorkflowRun {
        run: tool_env.ids.next_id(),
        flow: flow_id,
        status: RunStatus::Running,
        next_step: None,
        stopped_at: None,
        resume_at: None,
        data,
        context,
        steps,
        warnings: Vec::new(),
        flow_name,
        started_at: None,
        duration_ms: None,
        events: Vec::new(),
        error: None,
        limited: None,
        steps_ended: 0,
        model: Default::default(),
        touched: super::workflow_run::Touched { all: true, steps: Default::default() },
    };
    // A run enters its flow where any flow is entered: its steps in list
    // order, passing over those whose `skip_if` holds on the inputs.
    if let Some(flow) = flow
        && let Landing::Listed(from) = successor::arrival(StepId(0))
    {
        run.next_step = first_listed(program, tool_env, flow, &mut run, from);
    }
    Ok(run)
}

/// The first step from index `from` on that the run does not pass over
/// ([`successor::first_listed`]): a step is passed over when its `skip_if`
/// holds, its `if` does not, or it has a `when` (which a workflow cannot
/// ask); each one passed over is recorded `skipped`.
fn first_listed(
    program: &Program,
    tool_env: &ToolEnv,
    flow: &Flow,
    run: &mut WorkflowRun,
    from: usize,
) -> Option<StepId> {
    successor::first_listed(flow, from, |id, candidate| {
        let passed_over = candidate
            .skip_if
            .as_ref()
            .is_some_and(|skip_if| holds(program, tool_env, run, std::slice::from_ref(skip_if)))
            || !holds(program, tool_env, run, &candidate.guard)
            || !candidate.when.is_empty();
        if passed_over && let Some(record) = run.step_mut(id.index()) {
            record.status = StepStatus::Skipped;
        }
        passed_over
    })
}

/// What expressions in the run see: its data, context and step records.
fn scope<'r>(program: &'r Program, tool_env: &'r ToolEnv, run: &'r WorkflowRun) -> Scope<'r> {
    Scope {
        program,
        data: &run.data,
        context: &run.context,
        locals: &[],
        clock: tool_env.clock.as_ref(),
        steps: &run.steps,
    }
}

/// Whether every condition holds in the run; evaluation warnings join the
/// run's.
fn holds(program: &Program, tool_env: &ToolEnv, run: &mut WorkflowRun, conditions: &[crate::expr::Expr]) -> bool {
    let scope = scope(program, tool_env, run);
    let mut warnings = Vec::new();
    let holds = conditions.iter().all(|condition| is_true(&eval(condition, &scope, &mut warnings)));
    run.warnings.extend(warnings);
    holds
}

impl WorkflowRunner<'_> {
    /// [`start`] with this runner's program and tool environment.
    pub fn start(
        &self,
        flow_id: FlowId,
        inputs: &serde_json::Map<String, Value>,
        context: Data,
    ) -> Result<WorkflowRun, StartError> {
        start(self.program, self.tool_env, flow_id, inputs, context)
    }

    fn timestamp(&self) -> String {
        self.tool_env.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    fn event(&self, run: &mut WorkflowRun, event: &str, step: Option<&str>) {
        let at = self.timestamp();
        run.events.push(RunEvent { event: event.to_string(), step: step.map(str::to_string), at });
    }

    /// Runs from the run's next step until it completes, fails, waits or
    /// aborts. A waiting run goes on past its wait: the waiting step is
    /// then `completed`. `Err` when a checkpoint failed: the run stopped
    /// there, and what the store holds is the truth.
    pub fn run(&mut self, run: &mut WorkflowRun) -> Result<(), String> {
        self.run_within(run, RunLimits::default())
    }

    /// [`WorkflowRunner::run`], stopping before the next step once one of
    /// `limits` is reached.
    pub fn run_within(&mut self, run: &mut WorkflowRun, limits: RunLimits) -> Result<(), String> {
        run.limited = None;
        if run.status == RunStatus::Waiting {
            if let Some(record) = run.stopped_at.and_then(|step| run.step_mut(step.index()))
                && record.status == StepStatus::Waiting
            {
                record.status = StepStatus::Completed;
            }
            run.stopped_at = None;
            self.event(run, "run_resumed", None);
        }
        if run.started_at.is_none() {
            run.started_at = Some(self.timestamp());
        }
        self.run_steps(run, limits)?;
        let started = run.started_at.as_deref().and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok());
        if let Some(started) = started {
            let elapsed = self.tool_env.clock.now().signed_duration_since(started);
            run.duration_ms = Some(u64::try_from(elapsed.num_milliseconds()).unwrap_or(0));
        }
        Ok(())
    }

    fn run_steps(&mut self, run: &mut WorkflowRun, limits: RunLimits) -> Result<(), String> {
        let program = self.program;
        let Some(flow) = program.flow(run.flow) else {
            run.status = RunStatus::Failed;
            run.warnings.push(format!("the program has no flow `{}`", run.flow_name));
            return Ok(());
        };
        run.status = RunStatus::Running;
        run.resume_at = None;
        let total = flow.steps.len();
        let mut executions = 0usize;
        let started_running = std::time::Instant::now();
        let mut failures_in_a_row = 0u32;
        while let Some(step_id) = run.next_step {
            if super::shutdown::requested() {
                // Stopped by the operator before this step: the run stays
                // `running`, and whoever takes it next starts here.
                return Ok(());
            }
            let steps_run = u32::try_from(executions).unwrap_or(u32::MAX);
            if let Some(reason) = limits.reached(steps_run, started_running.elapsed(), failures_in_a_row) {
                run.status = RunStatus::Paused;
                run.limited = Some(reason);
                return Ok(());
            }
            executions += 1;
            if executions > MAX_EXECUTIONS {
                run.warnings.push("the workflow ran too many steps without finishing".to_string());
                self.fail(run, step_id, "the workflow did not finish (a loop without a wait?)".to_string());
                return Ok(());
            }
            let Some(step) = flow.step(step_id) else {
                break;
            };
            let started = self.tool_env.clock.now();
            if let Some(record) = run.step_mut(step_id.index()) {
                record.status = StepStatus::Running;
                record.started_at = Some(started.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                record.error = None;
            }
            run.next_step = Some(step_id);
            self.event(run, "step_started", Some(&step.name));
            self.checkpoint(run)?;
            super::shutdown::take_interrupted();
            let outcome = self.execute_with_policy(run, flow.name.as_str(), step);
            let duration = self.tool_env.clock.now().signed_duration_since(started);
            let duration_ms = u64::try_from(duration.num_milliseconds()).unwrap_or(0);
            if outcome.is_err() && super::shutdown::take_interrupted() {
                self.interrupted(run, step_id, step, outcome.err().unwrap_or_default(), duration_ms);
                return Ok(());
            }
            run.steps_ended = run.steps_ended.saturating_add(1);
            let after = match outcome {
                Ok(outcome) => {
                    failures_in_a_row = 0;
                    self.completed(run, flow.name.as_str(), (step_id, step, total), outcome, duration_ms)?
                }
                Err(error) => {
                    if let Some(record) = run.step_mut(step_id.index()) {
                        record.duration_ms = Some(duration_ms);
                    }
                    if step.on_error == OnError::Continue {
                        failures_in_a_row = failures_in_a_row.saturating_add(1);
                    }
                    self.failed(run, flow.name.as_str(), (step_id, step, total), error)?
                }
            };
            if after == After::Stop {
                return Ok(());
            }
        }
        run.status = RunStatus::Completed;
        run.next_step = None;
        for index in 0..run.steps.len() {
            if run.steps.get(index).is_some_and(|record| record.status == StepStatus::Pending)
                && let Some(record) = run.step_mut(index)
            {
                record.status = StepStatus::Skipped;
            }
        }
        Ok(())
    }

    /// Hands the run to the checkpoint; once it is saved, no step record
    /// has changed since.
    fn checkpoint(&mut self, run: &mut WorkflowRun) -> Result<(), String> {
        (self.checkpoint)(run)?;
        run.touched.clear();
        Ok(())
    }

    /// Records a step whose tool the end of a stop's grace period killed:
    /// the run stays `running` at this step, which runs again when the run
    /// goes on.
    fn interrupted(&self, run: &mut WorkflowRun, step_id: StepId, step: &Step, error: String, duration_ms: u64) {
        if let Some(record) = run.step_mut(step_id.index()) {
            record.status = StepStatus::Interrupted;
            record.duration_ms = Some(duration_ms);
            record.error = Some(error);
        }
        self.event(run, "step_interrupted", Some(&step.name));
        run.status = RunStatus::Running;
        run.next_step = Some(step_id);
    }

    /// Records a step that completed and moves the run on: to where its
    /// directives or the successor rule lead, or into a wait.
    fn completed(
        &mut self,
        run: &mut WorkflowRun,
        flow_name: &str,
        (step_id, step, total): (StepId, &Step, usize),
        StepOutcome { output, position }: StepOutcome,
        duration_ms: u64,
    ) -> Result<After, String> {
        if let Some(record) = run.step_mut(step_id.index()) {
            record.status = StepStatus::Completed;
            record.duration_ms = Some(duration_ms);
            record.output = output;
        }
        self.report(run, (step_id, step, total), StepStatus::Completed, "step_completed");
        let successor = match position {
            Some(position) => match self.apply_position(run, position) {
                Some(next) => next,
                None => return Ok(After::Stop),
            },
            None => self.successor(run, flow_name, step_id),
        };
        if let Some(wait_ms) = step.wait_ms {
            let Some(resume) = super::clock::resume_time(self.tool_env.clock.now(), wait_ms) else {
                self.fail(run, step_id, super::clock::wait_out_of_range(wait_ms));
                return Ok(After::Stop);
            };
            if let Some(record) = run.step_mut(step_id.index()) {
                record.status = StepStatus::Waiting;
            }
            run.status = RunStatus::Waiting;
            run.stopped_at = Some(step_id);
            run.resume_at = Some(resume.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            run.next_step = successor;
            return Ok(After::Stop);
        }
        run.next_step = successor;
        self.checkpoint(run)?;
        Ok(After::Next)
    }

    /// Records a step that failed: under `on_error: continue` the run goes
    /// on to the step's successor, else it fails here.
    fn failed(
        &mut self,
        run: &mut WorkflowRun,
        flow_name: &str,
        (step_id, step, total): (StepId, &Step, usize),
        error: String,
    ) -> Result<After, String> {
        if step.on_error != OnError::Continue {
            self.report(run, (step_id, step, total), StepStatus::Failed, "step_failed");
            self.fail(run, step_id, error);
            return Ok(After::Stop);
        }
        if let Some(record) = run.step_mut(step_id.index()) {
            record.status = StepStatus::Failed;
            record.error = Some(error.clone());
        }
        run.warnings.push(format!("step `{}` failed and the run continued: {error}", step.name));
        self.report(run, (step_id, step, total), StepStatus::Failed, "step_failed");
        run.next_step = self.successor(run, flow_name, step_id);
        self.checkpoint(run)?;
        Ok(After::Next)
    }

    /// The run's event for a step that ended, and the terminal's progress.
    fn report(
        &mut self,
        run: &mut WorkflowRun,
        (step_id, step, total): (StepId, &Step, usize),
        status: StepStatus,
        event: &str,
    ) {
        self.event(run, event, Some(&step.name));
        (self.on_progress)(&StepProgress { index: step_id.index() + 1, total, id: step.name.clone(), status });
    }

    fn fail(&self, run: &mut WorkflowRun, step_id: StepId, error: String) {
        run.status = RunStatus::Failed;
        run.stopped_at = Some(step_id);
        run.next_step = None;
        if let Some(record) = run.step_mut(step_id.index()) {
            record.status = StepStatus::Failed;
            record.error = Some(error);
        }
        for index in step_id.index() + 1..run.steps.len() {
            if run.steps.get(index).is_some_and(|record| record.status == StepStatus::Pending)
                && let Some(record) = run.step_mut(index)
            {
                record.status = StepStatus::Skipped;
                record.error = Some("previous step failed".to_string());
            }
        }
    }

    /// Runs a step's actions under its `on_error` retry policy; the data is
    /// written only when an attempt succeeds.
    fn execute_with_policy(&self, run: &mut WorkflowRun, flow_name: &str, step: &Step) -> Result<StepOutcome, String> {
        let attempts = match step.on_error {
            OnError::Retry { times, .. } => times.saturating_add(1),
            _ => 1,
        };
        let mut last_error = String::new();
        for attempt in 0..attempts {
            if attempt > 0 && super::shutdown::requested() {
                // No new attempt once stopping: the step runs again when
                // the run goes on.
                super::shutdown::note_interrupted();
                break;
            }
            if attempt > 0
                && let OnError::Retry { backoff_ms, .. } = step.on_error
            {
                // Exponential: backoff, 2×backoff, 4×backoff…
                let factor = 1u64 << (attempt - 1).min(16);
                (self.sleep)(std::time::Duration::from_millis(backoff_ms.saturating_mul(factor)));
            }
            match self.execute(run, flow_name, step) {
                Ok(outcome) => return Ok(outcome),
                Err(error) => last_error = error,
            }
        }
        if attempts > 1 {
            last_error = format!("{last_error} (after {attempts} attempts)");
        }
        Err(last_error)
    }

    fn execute(&self, run: &mut WorkflowRun, flow_name: &str, step: &Step) -> Result<StepOutcome, String> {
        let runner = ActionRunner {
            program: self.program,
            tools: self.tools,
            tool_env: self.tool_env,
            steps: &run.steps,
            model: self.model.map(|model| model as &dyn super::model_step::Asks),
        };
        let path = format!("{flow_name}.{}", step.name);
        let mut data = run.data.clone();
        let mut out = ActionOutput::default();
        let source = ActionSource { kind: Source::Action, path: &path, numbered: true };
        let step_key = format!("{}.{}", step.name, run.steps_ended.saturating_add(1));
        let ran = super::tools::with_identity(&run.run, &step_key, || {
            runner.run(&step.actions, &source, &mut data, &run.context, &mut Vec::new(), &mut out)
        });
        // What the model steps spent counts whether or not the step
        // completed: the calls were made.
        if let Some(model) = self.model {
            let tally = model.take_tally();
            run.model.add(tally);
            for (count, event) in [(tally.repaired, "model_answer_repaired"), (tally.rejected, "model_answer_rejected")]
            {
                for _ in 0..count {
                    self.event(run, event, Some(&step.name));
                }
            }
        }
        ran.map_err(|error| error.to_string())?;
        run.warnings.append(&mut out.warnings);
        // The step's `emit`s and its tools' directives are one unit: one
        // bad write fails the step, naming every bad write, and nothing
        // the step did is kept.
        let merged = merge(&out.emissions);
        let staged = super::writes::check(self.program, &merged.set, &[])
            .map_err(|invalid| format!("its writes were not applied: {}", super::writes::describe(&invalid)))?;
        staged.commit(&mut data, &mut Data::new());
        let written: serde_json::Map<String, Value> = data
            .iter()
            .filter(|(name, value)| run.data.get(*name) != Some(*value))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        // The shape comes from the step's actions, not from what happened to
        // change, so that it matches the type later steps read it with.
        let output = if matches!(output_shape(&step.actions), OutputShape::Fields(_)) {
            Value::Object(written)
        } else {
            match out.results.len() {
                0 => Value::Null,
                1 => out.results.pop().unwrap_or(Value::Null),
                _ => Value::Array(out.results),
            }
        };
        run.data = data;
        Ok(StepOutcome { output, position: merged.position.map(|(position, _)| position) })
    }

    /// The next step, by the successor rule ([`crate::ir::successor`]): a
    /// `when` cannot be asked without a user or model, so a branch entry
    /// with one does not match, and a step with one is passed over in list
    /// order.
    fn successor(&self, run: &mut WorkflowRun, flow_name: &str, step_id: StepId) -> Option<StepId> {
        let flow = self.program.flow(run.flow)?;
        let step = flow.step(step_id)?;
        let leaving = successor::leave(step_id, step, |index| {
            let Some(entry) = step.branches.get(index) else {
                return false;
            };
            if !self.holds(run, &entry.guard) {
                return false;
            }
            if !entry.when.is_empty() {
                run.warnings.push(format!(
                    "branch {flow_name}.{}#{} has a `when`, which a workflow cannot ask; it does not match",
                    step.name,
                    index + 1
                ));
                return false;
            }
            true
        });
        let landing = match leaving {
            Leaving::Fallthrough(landing) => landing,
            Leaving::Branch(index) => {
                let entry = step.branches.get(index)?;
                let Then::Directive(directive) = &entry.then else {
                    return self.land(run, successor::branch_landing(run.flow, step_id, &entry.then)).flatten();
                };
                let scope = self.scope(run);
                let mut warnings = Vec::new();
                let emission = evaluate_directive(
                    directive,
                    Source::Branch(format!("{flow_name}.{}#{}", step.name, index + 1)),
                    &scope,
                    &mut warnings,
                );
                run.warnings.extend(warnings);
                match super::writes::check(self.program, &emission.set, &[]) {
                    Ok(staged) => staged.commit(&mut run.data, &mut Data::new()),
                    Err(invalid) => run.warnings.push(format!(
                        "{}: its writes were not applied: {}",
                        emission.source,
                        super::writes::describe(&invalid)
                    )),
                }
                match emission.position {
                    Some(position) => return self.apply_position(run, position).flatten(),
                    None => successor::after_directive(run.flow, step_id, None),
                }
            }
        };
        self.land(run, landing).flatten()
    }

    /// A position from a step's directives; `None` when the run ended.
    fn apply_position(&self, run: &mut WorkflowRun, position: Move) -> Option<Option<StepId>> {
        if let Move::Abort { reason } = position {
            if let Some(reason) = reason {
                run.warnings.push(format!("aborted: {reason}"));
            }
            return self.land(run, Landing::Abort);
        }
        self.land(run, successor::landing(run.flow, position.jump()))
    }

    /// Where the run goes from a landing of the successor rule: to a step
    /// (`Some(Some(step))`), to its completion (`Some(None)`), or nowhere
    /// because it ended (`None`, aborted).
    fn land(&self, run: &mut WorkflowRun, landing: Landing) -> Option<Option<StepId>> {
        match landing {
            Landing::Step(step) => Some(Some(step)),
            Landing::Listed(from) => {
                let flow = self.program.flow(run.flow)?;
                Some(first_listed(self.program, self.tool_env, flow, run, from))
            }
            Landing::Complete(_) => Some(None),
            Landing::Abort => {
                run.status = RunStatus::Aborted;
                run.next_step = None;
                None
            }
            Landing::Enter(..) => {
                run.warnings.push("a workflow cannot move to another flow; the directive was ignored".to_string());
                Some(None)
            }
        }
    }

    fn scope<'r>(&'r self, run: &'r WorkflowRun) -> Scope<'r> {
        scope(self.program, self.tool_env, run)
    }

    fn holds(&self, run: &mut WorkflowRun, conditions: &[crate::expr::Expr]) -> bool {
        holds(self.program, self.tool_env, run, conditions)
    }
}

/// Whether a run goes on after a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    Next,
    Stop,
}

struct StepOutcome {
    output: Value,
    position: Option<Move>,
}
