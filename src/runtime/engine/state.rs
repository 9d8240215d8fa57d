//! What a turn carries from stage to stage and changes: where it is (the
//! stage and the cursor), its working copy of the session, what it read
//! from the message, the directive buses, the writes of the phase it is
//! in, the reply being put together, its counters against the limits, and
//! its trace. The stages are
//! functions over this state and the [`Services`] they use.

use super::services::Services;
use super::tool_loop::Replying;
use super::{Cursor, HISTORY_WINDOW, Observer, Stage};
use crate::expr::eval::{eval, is_true, render};
use crate::expr::{Expr, Template};
use crate::ir::{FieldId, FlowId, Program, Step, StepId};
use crate::llm::{FusedReply, Proposal, ReplyAsk, ReplyStream, Understanding, Usage};
use crate::message::Message;
use crate::read::consent::Doubt;
use crate::runtime::actions::Scope;
use crate::runtime::directive::Emission;
use crate::runtime::events::{DirectiveRecord, Event, Purpose, StopReason};
use crate::runtime::session::Session;
use crate::runtime::writes::PhaseWrites;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The phase from the turn's start to the reply: the pending directive or
/// the pre-phase signals, routing, and every step entered before the reply.
pub(super) const PRE_MODEL: &str = "pre-model";
/// The phase from the reply to the end of the turn: `finalize`, the
/// post-model bus and where its position parks the session.
pub(super) const POST_MODEL: &str = "post-model";
/// What follows the post-model phase: the post-phase signals only arm a
/// directive for the next turn, so nothing writes in it.
pub(super) const AFTER_PHASES: &str = "after the reply";

pub(super) struct TurnState<'a> {
    /// The working copy: it replaces the caller's session only when the
    /// turn finishes, so a failed turn leaves that one as it was.
    pub(super) session: Session,
    pub(super) message: String,
    pub(super) stage: Stage,
    pub(super) cursor: Cursor,
    pub(super) started: Instant,
    /// Where the session stood when the turn began: the step this message
    /// answers, which had its model call when it asked.
    pub(super) answering: (Option<FlowId>, Option<StepId>),
    pub(super) reading: Reading,
    pub(super) bus: Bus,
    pub(super) answer: Answer,
    pub(super) counters: Counters,
    pub(super) stop: Option<StopReason>,
    /// The writes of the phase the turn is in (docs/runtime.md, "Writes:
    /// one unit per phase"), committed or undone as one.
    pub(super) writes: PhaseWrites,
    pub(super) trace: Trace<'a>,
}

/// What the turn read from the message and what it asked about.
#[derive(Default)]
pub(super) struct Reading {
    pub(super) understanding: Understanding,
    pub(super) asked_fields: BTreeSet<FieldId>,
    /// The signals the understand call asked about: answered there, even
    /// when the answer was set aside (then as no, as if not understood).
    pub(super) asked_signals: BTreeSet<String>,
    /// Why this turn's message was no clear answer to the confirmation the
    /// step asked, when it was not: the step says so as it asks again.
    pub(super) consent_doubt: Option<Doubt>,
    /// Fields the understanding step wrote from this turn's message: a new
    /// run of a flow entered in the same turn keeps them.
    pub(super) extracted: BTreeSet<String>,
    /// The reply the understand call wrote too, when the turn asked for
    /// one: the reply stage uses it or asks for its own.
    pub(super) fused: Option<Fused>,
}

/// A fused reply the turn asked for (`fused.rs` decides whether it is
/// used): what the request offered, what the model wrote, and what it saw.
pub(super) struct Fused {
    pub(super) ask: ReplyAsk,
    pub(super) reply: Option<FusedReply>,
    /// Each field's value as the model saw it: the known data, overlaid by
    /// every value it proposed (before grounding).
    pub(super) view: serde_json::Map<String, Value>,
    /// What the model proposed, before grounding: a value the data does
    /// not hold once the turn resolves must not be in the reply.
    pub(super) proposed: std::collections::BTreeMap<String, Proposal>,
    /// The reply's text, still arriving when the understand call streamed:
    /// read to the user when the reply is used, dropped (which cancels the
    /// call) when it is not.
    pub(super) pending: Option<ReplyStream>,
    /// Why the answer's reply was dropped unread (a step not offered, a
    /// member of the wrong type), when it was.
    pub(super) dropped: Option<String>,
}

impl Fused {
    pub(super) fn new(
        ask: ReplyAsk,
        reply: Option<FusedReply>,
        proposed: &std::collections::BTreeMap<String, Proposal>,
    ) -> Fused {
        let mut view = ask.data.clone();
        for (name, proposal) in proposed {
            view.insert(name.clone(), proposal.value.clone());
        }
        Fused { ask, reply, view, proposed: proposed.clone(), pending: None, dropped: None }
    }

    /// The same, its reply's text still arriving on `stream`.
    pub(super) fn streaming(mut self, stream: Option<ReplyStream>) -> Fused {
        self.pending = stream;
        self
    }

    /// The same, its reply dropped unread for `reason`.
    pub(super) fn dropped(mut self, reason: Option<String>) -> Fused {
        self.dropped = reason;
        self
    }

    /// The reply's text still to arrive, if it streams.
    pub(super) fn take_stream(&mut self) -> Option<ReplyStream> {
        self.pending.take()
    }
}

/// The directive buses: emissions waiting to be merged before and after
/// the model.
#[derive(Default)]
pub(super) struct Bus {
    pub(super) pre: Vec<Emission>,
    /// For each emission of `pre` without a position, the index of its
    /// record in [`Trace::records`] once recorded: when the whole bus
    /// merges before the reply and a later `reply` overrides its own, it
    /// is marked not applied.
    pub(super) pre_records: Vec<Option<usize>>,
    /// How many emissions of `pre` were merged and applied already.
    pub(super) pre_applied: usize,
    pub(super) post: Vec<Emission>,
    pub(super) halt: bool,
}

/// The reply being put together and the steps it covers.
#[derive(Default)]
pub(super) struct Answer {
    pub(super) says: Vec<String>,
    pub(super) instructions: Vec<String>,
    pub(super) asking: Option<(FlowId, StepId)>,
    /// The steps this turn's reply covers, in the order they ran: conversation
    /// steps entered this turn and executed, and the step that asks. Each
    /// ran its `prepare`; each runs its `finalize` after the reply.
    pub(super) batch: Vec<(FlowId, StepId)>,
    pub(super) executed: Vec<String>,
    /// The reply while the model writes it over several steps.
    pub(super) replying: Option<Replying>,
    pub(super) resume_at: Option<String>,
    pub(super) reply: String,
}

impl Bus {
    /// An emission joins the pre-model bus, with its record if it has one.
    pub(super) fn push_pre(&mut self, emission: Emission, record: Option<usize>) {
        self.pre.push(emission);
        self.pre_records.push(record);
    }
}

/// What the turn spent, against the program's and the operator's limits.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) auto_steps: u32,
    pub(super) transitions: u32,
    pub(super) usage: Usage,
    pub(super) tool_limit_hit: bool,
    /// Steps executed this turn, for [`ContinuationLimits::max_steps_per_turn`](super::ContinuationLimits::max_steps_per_turn).
    pub(super) steps_executed: u32,
    /// Failed steps and tool calls since the last that succeeded, for
    /// [`ContinuationLimits::max_consecutive_errors`](super::ContinuationLimits::max_consecutive_errors).
    pub(super) consecutive_errors: u32,
    /// The model's tool loop stopped at `max_consecutive_errors`.
    pub(super) error_limit_hit: bool,
}

/// The turn's trace: its events, mirrored to the observer as they happen,
/// and the record of every directive.
pub(super) struct Trace<'a> {
    pub(super) events: Vec<Event>,
    pub(super) records: Vec<DirectiveRecord>,
    pub(super) observer: Option<&'a mut dyn Observer>,
}

impl<'a> TurnState<'a> {
    pub(super) fn new(session: Session, message: &str, observer: Option<&'a mut dyn Observer>) -> TurnState<'a> {
        TurnState {
            answering: (session.flow, session.step),
            session,
            message: message.to_string(),
            stage: Stage::Start,
            cursor: Cursor::Idle,
            started: Instant::now(),
            reading: Reading::default(),
            bus: Bus::default(),
            answer: Answer::default(),
            counters: Counters::default(),
            stop: None,
            writes: PhaseWrites::open(PRE_MODEL),
            trace: Trace { events: Vec::new(), records: Vec::new(), observer },
        }
    }

    pub(super) fn emit(&mut self, event: Event) {
        if let Some(observer) = self.trace.observer.as_mut() {
            observer.event(&event);
        }
        self.trace.events.push(event);
    }

    pub(super) fn warn(&mut self, message: impl Into<String>) {
        self.emit(Event::Warning { message: message.into() });
    }

    pub(super) fn stop_with(&mut self, reason: StopReason) {
        self.stop.get_or_insert(reason);
        self.stage = Stage::Reply;
    }

    pub(super) fn mark_executed(&mut self, name: &str) {
        if !self.answer.executed.iter().any(|executed| executed == name) {
            self.answer.executed.push(name.to_string());
        }
    }

    /// Where the conversation stands without routing.
    pub(super) fn current_cursor(&self) -> Cursor {
        match (self.session.flow, self.session.step) {
            (Some(flow), Some(step)) => Cursor::Evaluate { flow, step, fresh: false },
            (Some(flow), None) => Cursor::Enter(flow, StepId(0)),
            _ => Cursor::Idle,
        }
    }

    /// Whether the turn may stop here and leave a session the next turn
    /// resumes correctly. During resolution that is only before a step is
    /// evaluated or executed (the session then points at it): stopping
    /// after a step ran but before it was left would run it again next
    /// turn, tool calls included.
    pub(super) fn at_a_resumable_point(&self) -> bool {
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
    pub(super) fn limit_reached(&self, sv: &Services) -> Option<StopReason> {
        let limits = sv.limits;
        if self.out_of_time(sv) {
            return Some(StopReason::TimeLimit);
        }
        if limits.max_session_time.is_some_and(|limit| self.session_time() > limit) {
            return Some(StopReason::SessionTimeLimit);
        }
        let session_tokens = self.session.usage.total_tokens().saturating_add(self.counters.usage.total_tokens());
        if limits.max_session_tokens.is_some_and(|limit| session_tokens > limit) {
            return Some(StopReason::SessionTokenLimit);
        }
        if limits.max_consecutive_errors.is_some_and(|limit| self.counters.consecutive_errors >= limit) {
            return Some(StopReason::ErrorLimit);
        }
        let about_to_execute = self.stage == Stage::Resolve && matches!(self.cursor, Cursor::Execute(..));
        if about_to_execute && limits.max_steps_per_turn.is_some_and(|limit| self.counters.steps_executed >= limit) {
            return Some(StopReason::StepLimit);
        }
        None
    }

    /// The time the session has spent running turns, this one included.
    pub(super) fn session_time(&self) -> Duration {
        let before = Duration::from_millis(self.session.turn_time_ms.unwrap_or(0));
        before.saturating_add(self.started.elapsed())
    }

    /// When the turn's time runs out: its `turn_timeout`, or sooner where
    /// the operator's `max_session_time` leaves the session less. `None`
    /// when neither can be reached (a timeout past what `Instant` holds).
    pub(super) fn deadline(&self, sv: &Services) -> Option<Instant> {
        let turn = turn_timeout(sv);
        let session_left = sv.limits.max_session_time.map(|limit| {
            let spent_before = Duration::from_millis(self.session.turn_time_ms.unwrap_or(0));
            limit.saturating_sub(spent_before)
        });
        self.started.checked_add(session_left.map_or(turn, |left| left.min(turn)))
    }

    fn out_of_time(&self, sv: &Services) -> bool {
        self.started.elapsed() > turn_timeout(sv)
    }

    pub(super) fn over_token_budget(&self, sv: &Services) -> bool {
        sv.program.agent.limits.max_turn_tokens.is_some_and(|limit| self.counters.usage.total_tokens() > limit)
    }

    pub(super) fn scope<'s>(&'s self, sv: &'s Services) -> Scope<'s> {
        Scope {
            program: sv.program,
            data: &self.session.data,
            context: &self.session.context,
            locals: &[],
            clock: sv.tool_env.clock.as_ref(),
            steps: &[],
        }
    }

    pub(super) fn eval(&mut self, sv: &Services, expr: &Expr) -> Value {
        let mut warnings = Vec::new();
        let value = eval(expr, &self.scope(sv), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        value
    }

    pub(super) fn holds(&mut self, sv: &Services, conditions: &[Expr]) -> bool {
        conditions.iter().all(|condition| {
            let value = self.eval(sv, condition);
            is_true(&value)
        })
    }

    pub(super) fn render(&mut self, sv: &Services, template: &Template) -> String {
        let mut warnings = Vec::new();
        let text = render(template, &self.scope(sv), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        text
    }

    /// Whether a guard holds, without tracing its warnings (asked while
    /// planning what to ask, before anything acts).
    pub(super) fn guard_passes(&self, sv: &Services, guard: &[Expr]) -> bool {
        let mut warnings = Vec::new();
        let scope = self.scope(sv);
        guard.iter().all(|condition| is_true(&eval(condition, &scope, &mut warnings)))
    }

    pub(super) fn current_step<'p>(&self, program: &'p Program) -> Option<&'p Step> {
        let flow = program.flow(self.session.flow?)?;
        flow.step(self.session.step?)
    }

    pub(super) fn history_window(&self) -> Vec<Message> {
        let history = &self.session.history;
        history.get(history.len().saturating_sub(HISTORY_WINDOW)..).unwrap_or_default().to_vec()
    }

    pub(super) fn count_call(&mut self, sv: &Services, purpose: Purpose, usage: Usage) {
        let usage = Usage { calls: usage.calls.max(1), ..usage };
        self.counters.usage.add(usage);
        let provider = sv.provider.name();
        self.emit(Event::ModelCalled { purpose, provider, usage });
    }

    /// Whether a step still needs input: a field it collects or requires
    /// is unset.
    pub(super) fn needs_input(&self, sv: &Services, step: &Step) -> bool {
        step.collect.iter().chain(&step.requires).any(|field| {
            sv.program
                .field(*field)
                .is_none_or(|declared| self.session.data.get(&declared.name).is_none_or(Value::is_null))
        })
    }
}

fn turn_timeout(sv: &Services) -> Duration {
    Duration::from_millis(sv.program.agent.limits.turn_timeout_ms)
}

/// The name of a flow, empty for one the program does not have.
pub(super) fn flow_name(sv: &Services, flow: FlowId) -> String {
    sv.program.flow(flow).map_or_else(String::new, |flow| flow.name.clone())
}
