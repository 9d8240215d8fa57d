//! The turn pipeline of LANGUAGE.md section 9: one user message in, one
//! reply out, in a fixed order — pending directive; understanding (routing,
//! pre-extraction, pre-phase signals, open AI conditions) in one model call;
//! pre-signal directives; resolving the next position step by step (the
//! auto chain and the batch of steps whose needs are met); the reply
//! (hooks, one model call with its tool loop, the post-model bus); post-phase
//! signals; then the result.
//!
//! A turn works on a copy of the session and replaces the caller's only when
//! it finishes, so a failed turn leaves the session exactly as it was.
//! [`Turn::step`] advances one stage (or one step of the batch) at a time for
//! embedders; [`Runtime::run_turn`] runs a turn to its end.
//!
//! One file per stage, in pipeline order: `start.rs` (the pending
//! directive), `understand.rs`, `signals.rs` (both phases), `resolve.rs`
//! (entering, evaluating, executing steps), `route.rs` (where a step goes
//! next, by [`crate::ir::successor`]), `bus.rs` (the directive bus),
//! `reply.rs` (the model's reply, one round per step, and its tool calls),
//! `finish.rs`; `runtime.rs` holds the [`Runtime`] that starts turns.
//!
//! Choices where the language leaves room, documented in the README:
//! - Positions emitted to the pre-model bus (by `on_enter`, `prepare`,
//!   `do`, or a tool result) are merged and applied when the step or hook
//!   that emitted them finishes; their writes are merged and validated as
//!   one unit at the same moment; their `reply` and augmentation wait for
//!   the model call.
//! - A position from the post-model bus (finalize, on_complete, the tool
//!   loop) moves the session for the next turn: the reply is already
//!   written, so no step runs after it in this turn.
//! - Extracted values are written only for the fields the turn asked about
//!   and the flow it settles in; one invalid value rejects the whole
//!   extraction (nothing partial is written) and the step asks again.
//! - Post-phase signals are about the same message as the pre-phase ones:
//!   a `phase: both` signal that matched before the reply does not fire
//!   again after it, and a turn that applied a pending directive (and so
//!   skipped understanding) still asks the post-phase signals that are open.
//! - A new run of a flow (routed to, `goto`, `complete.next`, `reset`)
//!   starts without the fields of [`Flow::fresh`](crate::ir::Flow::fresh), except those extracted
//!   from this turn's message; a `goto_step` is a jump, not a new run.
//! - The batch is the conversation steps entered and run this turn plus the
//!   step that asks: each runs `prepare` when it runs and `finalize` after
//!   the reply, in order; a failing `finalize` is traced, not a failed turn.
//! - A conversation step whose `do`, `on_enter` or `prepare` fails is
//!   answered by its `on_error` (default: an apology and the flow aborted);
//!   a failing flow `on_enter` by the `on_error` of the step it enters; a
//!   failing flow `on_complete` is traced and dropped, like `finalize`.
//! - A step that collects a `bool` binds it to the values it asked about
//!   ([`Step::confirms`], kept as [`Session::offered`]): when one changed
//!   before the step is left, the `bool` is cleared and the step asks again.
//! - `turn_timeout` stops a turn only where the session can resume: before
//!   a step is evaluated or executed, never between running a step and
//!   leaving it (the next turn would run it again). The understand call,
//!   before any step acts, is cut off when the time is spent and the turn
//!   stops with `time_limit`; later calls are not cut off.

mod bus;
mod finish;
mod reply;
mod resolve;
mod route;
mod runtime;
mod signals;
mod start;
mod understand;

pub use runtime::{ContinuationLimits, Observer, Runtime, RuntimeOptions, StreamSink, TurnError};

use super::actions::Scope;
use super::directive::Emission;
use super::events::{DirectiveRecord, Event, Purpose, StopReason, TurnResult};
use super::session::Session;
use crate::expr::eval::{eval, is_true, render};
use crate::expr::{Expr, Template};
use crate::ir::{FieldId, FlowId, Program, Step, StepId};
use crate::llm::{FieldSpec, ToolCall, Understanding, Usage};
use crate::message::Message;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// How many messages of history go into model requests.
const HISTORY_WINDOW: usize = 12;

/// A turn that cannot settle (position changes that never ask, such as a
/// ring of satisfied steps) stops after this many transitions.
const MAX_TRANSITIONS: u32 = 10_000;

/// Where a turn goes next (one transition per [`Turn::step`] during
/// resolution).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cursor {
    EnterFlow(FlowId, StepId),
    Enter(FlowId, StepId),
    /// A step the message may answer: asks again or executes.
    Evaluate {
        flow: FlowId,
        step: StepId,
        fresh: bool,
    },
    Execute(FlowId, StepId),
    Leave(FlowId, StepId),
    /// The flow completes; then the flow a `complete` named, else the
    /// flow's `complete.next`.
    FlowDone(FlowId, Option<FlowId>),
    Abort,
    Idle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Understand,
    Resolve,
    Reply,
    /// The model asked for tool calls: the next step runs them and asks
    /// the model again.
    ToolCalls,
    PostSignals,
    Finish,
}

/// The pipeline stage a [`Turn::step`] call completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageDone {
    Started,
    Understood,
    /// One step of resolution (enter, ask, execute, leave…).
    Resolved,
    Replied,
    PostSignals,
}

/// What one [`Turn::step`] did.
pub enum Progress {
    /// A stage, or one transition of resolution, completed; the turn goes on
    /// at the next call.
    Continue(StageDone),
    /// The model asked for these tool calls while writing the reply; they
    /// have not run. The next [`Turn::step`] runs them (the calls a step does
    /// not expose, or past the limits, are refused with an error the model
    /// reads) and asks the model again.
    ToolCalls(Vec<ToolCall>),
    /// The turn ended: why, and what it answers with. The caller's session
    /// now holds the turn's changes.
    Finished { reason: StopReason, result: Box<TurnResult> },
}

/// One turn in progress.
pub struct Turn<'a> {
    runtime: &'a mut Runtime,
    original: &'a mut Session,
    session: Session,
    message: String,
    stage: Stage,
    cursor: Cursor,
    started: Instant,
    understanding: Understanding,
    asked_fields: BTreeSet<FieldId>,
    /// The signals the understand call asked about: answered there, even
    /// when the answer was set aside (then as no, as if not understood).
    asked_signals: BTreeSet<String>,
    /// Why this turn's message was no clear answer to the confirmation the
    /// step asked, when it was not: the step says so as it asks again.
    consent_doubt: Option<crate::read::consent::Doubt>,
    /// Fields the understanding step wrote from this turn's message: a new
    /// run of a flow entered in the same turn keeps them.
    extracted_this_turn: BTreeSet<String>,
    events: Vec<Event>,
    records: Vec<DirectiveRecord>,
    pre_bus: Vec<Emission>,
    pre_applied: usize,
    post_bus: Vec<Emission>,
    says: Vec<String>,
    instructions: Vec<String>,
    asking: Option<(FlowId, StepId)>,
    /// The steps this turn's reply covers, in the order they ran: conversation
    /// steps entered this turn and executed, and the step that asks. Each
    /// ran its `prepare`; each runs its `finalize` after the reply.
    batch: Vec<(FlowId, StepId)>,
    executed: Vec<String>,
    auto_steps: u32,
    transitions: u32,
    usage: Usage,
    stop: Option<StopReason>,
    halt: bool,
    tool_rounds: u32,
    tool_limit_hit: bool,
    /// Steps executed this turn, for [`ContinuationLimits::max_steps_per_turn`](ContinuationLimits::max_steps_per_turn).
    steps_executed: u32,
    /// Failed steps and tool calls since the last that succeeded, for
    /// [`ContinuationLimits::max_consecutive_errors`](ContinuationLimits::max_consecutive_errors).
    consecutive_errors: u32,
    /// The model's tool loop stopped at `max_consecutive_errors`.
    error_limit_hit: bool,
    /// The reply while the model writes it over several steps.
    replying: Option<reply::Replying>,
    resume_at: Option<String>,
    reply: String,
}

impl<'a> Turn<'a> {
    /// A turn on a working copy of `session`, at its first stage.
    pub(super) fn new(runtime: &'a mut Runtime, session: &'a mut Session, message: &str) -> Turn<'a> {
        let working = session.clone();
        Turn {
            runtime,
            original: session,
            session: working,
            message: message.to_string(),
            stage: Stage::Start,
            cursor: Cursor::Idle,
            started: Instant::now(),
            understanding: Understanding::default(),
            asked_fields: BTreeSet::new(),
            asked_signals: BTreeSet::new(),
            consent_doubt: None,
            extracted_this_turn: BTreeSet::new(),
            events: Vec::new(),
            records: Vec::new(),
            pre_bus: Vec::new(),
            pre_applied: 0,
            post_bus: Vec::new(),
            says: Vec::new(),
            instructions: Vec::new(),
            asking: None,
            batch: Vec::new(),
            executed: Vec::new(),
            auto_steps: 0,
            transitions: 0,
            usage: Usage::default(),
            stop: None,
            halt: false,
            tool_rounds: 0,
            tool_limit_hit: false,
            steps_executed: 0,
            consecutive_errors: 0,
            error_limit_hit: false,
            replying: None,
            resume_at: None,
            reply: String::new(),
        }
    }
}

impl Turn<'_> {
    /// Advances the turn by one stage, or by one step during resolution.
    pub fn step(&mut self) -> Result<Progress, TurnError> {
        // The start stage checks the limits itself, once the turn is counted.
        if !matches!(self.stage, Stage::Start | Stage::Finish)
            && self.stop.is_none()
            && self.at_a_resumable_point()
            && let Some(reason) = self.limit_reached()
        {
            self.stop = Some(reason);
            self.stage = Stage::Finish;
        }
        match self.stage {
            Stage::Start => {
                self.start()?;
                Ok(Progress::Continue(StageDone::Started))
            }
            Stage::Understand => {
                self.understand()?;
                Ok(Progress::Continue(StageDone::Understood))
            }
            Stage::Resolve => {
                self.resolve_one()?;
                Ok(Progress::Continue(StageDone::Resolved))
            }
            Stage::Reply => {
                let calls = self.reply()?;
                Ok(Self::replied(calls))
            }
            Stage::ToolCalls => {
                let calls = self.answer_tool_calls()?;
                Ok(Self::replied(calls))
            }
            Stage::PostSignals => {
                self.post_signals()?;
                Ok(Progress::Continue(StageDone::PostSignals))
            }
            Stage::Finish => {
                let result = self.finish();
                Ok(Progress::Finished { reason: result.stopped_reason, result: Box::new(result) })
            }
        }
    }

    fn replied(calls: Option<Vec<ToolCall>>) -> Progress {
        match calls {
            Some(calls) => Progress::ToolCalls(calls),
            None => Progress::Continue(StageDone::Replied),
        }
    }

    fn program(&self) -> Arc<Program> {
        Arc::clone(&self.runtime.program)
    }

    fn emit(&mut self, event: Event) {
        if let Some(observer) = self.runtime.observer.as_mut() {
            observer.event(&event);
        }
        self.events.push(event);
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.emit(Event::Warning { message: message.into() });
    }

    /// Whether the turn may stop here and leave a session the next turn
    /// resumes correctly. During resolution that is only before a step is
    /// evaluated or executed (the session then points at it): stopping
    /// after a step ran but before it was left would run it again next
    /// turn, tool calls included.
    fn at_a_resumable_point(&self) -> bool {
        match self.stage {
            Stage::Resolve => matches!(self.cursor, Cursor::Evaluate { .. } | Cursor::Execute(..) | Cursor::Idle),
            // Between the rounds of a reply the model's tools may have
            // acted: the reply completes (its finalize hooks and post-model
            // bus) before the turn may stop.
            Stage::ToolCalls => false,
            _ => true,
        }
    }

    /// The continuation limit this turn has reached, if any: checked
    /// between stages and before each step is evaluated or executed.
    fn limit_reached(&self) -> Option<StopReason> {
        let limits = self.runtime.limits;
        if self.out_of_time() {
            return Some(StopReason::TimeLimit);
        }
        if limits.max_session_time.is_some_and(|limit| self.session_time() > limit) {
            return Some(StopReason::SessionTimeLimit);
        }
        let session_tokens = self.session.usage.total_tokens().saturating_add(self.usage.total_tokens());
        if limits.max_session_tokens.is_some_and(|limit| session_tokens > limit) {
            return Some(StopReason::SessionTokenLimit);
        }
        if limits.max_consecutive_errors.is_some_and(|limit| self.consecutive_errors >= limit) {
            return Some(StopReason::ErrorLimit);
        }
        let about_to_execute = self.stage == Stage::Resolve && matches!(self.cursor, Cursor::Execute(..));
        if about_to_execute && limits.max_steps_per_turn.is_some_and(|limit| self.steps_executed >= limit) {
            return Some(StopReason::StepLimit);
        }
        None
    }

    /// The time the session has spent running turns, this one included.
    fn session_time(&self) -> std::time::Duration {
        let before = std::time::Duration::from_millis(self.session.turn_time_ms.unwrap_or(0));
        before.saturating_add(self.started.elapsed())
    }

    /// When the turn's time runs out: its `turn_timeout`, or sooner where
    /// the operator's `max_session_time` leaves the session less. `None`
    /// when neither can be reached (a timeout past what `Instant` holds).
    fn deadline(&self) -> Option<Instant> {
        let turn = self.turn_timeout();
        let session_left = self.runtime.limits.max_session_time.map(|limit| {
            let spent_before = std::time::Duration::from_millis(self.session.turn_time_ms.unwrap_or(0));
            limit.saturating_sub(spent_before)
        });
        self.started.checked_add(session_left.map_or(turn, |left| left.min(turn)))
    }

    fn out_of_time(&self) -> bool {
        self.started.elapsed() > self.turn_timeout()
    }

    fn turn_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.runtime.program.agent.limits.turn_timeout_ms)
    }

    fn over_token_budget(&self) -> bool {
        self.runtime.program.agent.limits.max_turn_tokens.is_some_and(|limit| self.usage.total_tokens() > limit)
    }

    fn flow_name(&self, flow: FlowId) -> String {
        self.runtime.program.flow(flow).map_or_else(String::new, |flow| flow.name.clone())
    }

    fn scope<'s>(&'s self, locals: &'s [Value]) -> Scope<'s> {
        Scope {
            program: &self.runtime.program,
            data: &self.session.data,
            context: &self.session.context,
            locals,
            clock: self.runtime.tool_env.clock.as_ref(),
            steps: &[],
        }
    }

    fn eval(&mut self, expr: &Expr) -> Value {
        let mut warnings = Vec::new();
        let value = eval(expr, &self.scope(&[]), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        value
    }

    fn holds(&mut self, conditions: &[Expr]) -> bool {
        conditions.iter().all(|condition| {
            let value = self.eval(condition);
            is_true(&value)
        })
    }

    fn render(&mut self, template: &Template) -> String {
        let mut warnings = Vec::new();
        let text = render(template, &self.scope(&[]), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        text
    }

    fn current_step<'p>(&self, program: &'p Program) -> Option<&'p Step> {
        let flow = program.flow(self.session.flow?)?;
        flow.step(self.session.step?)
    }

    fn guard_passes(&self, guard: &[Expr]) -> bool {
        let mut warnings = Vec::new();
        let scope = self.scope(&[]);
        guard.iter().all(|condition| is_true(&eval(condition, &scope, &mut warnings)))
    }

    fn history_window(&self) -> Vec<Message> {
        let history = &self.session.history;
        history.get(history.len().saturating_sub(HISTORY_WINDOW)..).unwrap_or_default().to_vec()
    }

    fn count_call(&mut self, purpose: Purpose, usage: Usage) {
        let usage = Usage { calls: usage.calls.max(1), ..usage };
        self.usage.add(usage);
        let provider = self.runtime.provider.name();
        self.emit(Event::ModelCalled { purpose, provider, usage });
    }

    fn stop_with(&mut self, reason: StopReason) {
        self.stop.get_or_insert(reason);
        self.stage = Stage::Reply;
    }
}

pub(crate) fn field_spec(field: &crate::ir::Field, asked: bool) -> FieldSpec {
    let values = match &field.ty.kind {
        crate::ir::TypeKind::Enum { values } => values.clone(),
        _ => Vec::new(),
    };
    FieldSpec {
        name: field.name.clone(),
        kind: field.ty.kind_name().to_string(),
        schema: field.ty.json_schema(),
        description: field.ty.description.clone(),
        values,
        examples: field.ty.examples.clone(),
        pattern: field.ty.pattern.clone(),
        min: field.ty.min,
        max: field.ty.max,
        asked,
    }
}

/// The confirmations of a program: `bool` fields that some step collects.
/// They are read only from the message that answers a step collecting them.
fn confirmation_fields(program: &Program) -> BTreeSet<FieldId> {
    program
        .flows
        .iter()
        .flat_map(|flow| &flow.steps)
        .flat_map(|step| step.collect.iter().copied())
        .filter(|field| {
            program.field(*field).is_some_and(|declared| matches!(declared.ty.kind, crate::ir::TypeKind::Bool))
        })
        .collect()
}
