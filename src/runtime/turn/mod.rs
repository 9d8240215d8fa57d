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
//! embedders; [`Runtime::respond`](super::engine::Runtime::respond) runs a turn to its end.
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
//!   starts without the fields of [`Flow::fresh`], except those extracted
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
//!   leaving it (the next turn would run it again).

mod bus;
mod finish;
mod reply;
mod resolve;
mod route;
mod signals;
mod start;
mod understand;

use super::actions::Scope;
use super::directive::Emission;
use super::engine::{Runtime, TurnError};
use super::events::{DirectiveRecord, Event, Purpose, StopReason, TurnResult};
use super::session::Session;
use crate::expr::eval::{eval, is_true, render};
use crate::expr::{Expr, Template};
use crate::ir::{FieldId, FlowId, Program, Step, StepId};
use crate::llm::{FieldSpec, Message, Understanding, Usage};
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
    Respond,
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
    Responded,
    PostSignals,
}

pub enum Progress {
    Continue(StageDone),
    Finished(Box<TurnResult>),
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
            resume_at: None,
            reply: String::new(),
        }
    }
}

impl Turn<'_> {
    /// Advances the turn by one stage, or by one step during resolution.
    pub fn step(&mut self) -> Result<Progress, TurnError> {
        if self.stage != Stage::Finish && self.stop.is_none() && self.at_a_resumable_point() && self.out_of_time() {
            self.stop = Some(StopReason::TimeLimit);
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
            Stage::Respond => {
                self.respond()?;
                Ok(Progress::Continue(StageDone::Responded))
            }
            Stage::PostSignals => {
                self.post_signals()?;
                Ok(Progress::Continue(StageDone::PostSignals))
            }
            Stage::Finish => Ok(Progress::Finished(Box::new(self.finish()))),
        }
    }

    fn program(&self) -> Arc<Program> {
        Arc::clone(&self.runtime.program)
    }

    fn emit(&mut self, event: Event) {
        if let Some(observer) = self.runtime.observer.as_mut() {
            observer(&event);
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
        self.stage != Stage::Resolve
            || matches!(self.cursor, Cursor::Evaluate { .. } | Cursor::Execute(..) | Cursor::Idle)
    }

    fn out_of_time(&self) -> bool {
        let limit = self.runtime.program.agent.limits.turn_timeout_ms;
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX) > limit
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
        self.stage = Stage::Respond;
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
