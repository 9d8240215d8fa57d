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
//! embedders; [`Runtime::respond`] runs a turn to its end.
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

use super::actions::{ActionError, ActionOutput, ActionRunner, ActionSource, Scope, evaluate_directive};
use super::clock::{Clock, IdSource};
use super::directive::{Emission, Move, Source, describe, merge};
use super::events::{DirectiveRecord, Event, Purpose, StopReason, Tokens, TurnResult};
use super::grounding;
use super::session::{Data, Offered, Session, program_hash};
use super::tools::{ToolEnv, ToolError, ToolRegistry};
use super::validate::validate;
use crate::expr::eval::{eval, is_true, render};
use crate::expr::{Expr, ExprKind, Template};
use crate::ir::{Behavior, FieldId, Flow, FlowId, Next, Phase, Program, Recovery, Step, StepId, Then, ToolId};
use crate::llm::offline::reading::CertainReader;
use crate::llm::{
    FieldSpec, FlowChoice, Message, Provider, ProviderError, Question, ReplyRequest, Role, ToolLoop, ToolSpec,
    UnderstandRequest, Understanding, Usage, reply_with_tools,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// How many messages of history go into model requests.
const HISTORY_WINDOW: usize = 12;

/// A turn that cannot settle (position changes that never ask, such as a
/// ring of satisfied steps) stops after this many transitions.
const MAX_TRANSITIONS: u32 = 10_000;

/// Why a turn failed. The session is left exactly as it was.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("model call failed ({class}): {0}", class = .0.class())]
    Provider(#[from] ProviderError),
    #[error("tool call failed: {0}")]
    Tool(#[from] ToolError),
    #[error("{0}")]
    Action(#[from] ActionError),
    #[error("{0}")]
    Wait(String),
    #[error("the session belongs to another version of the program (hash {found}, expected {expected})")]
    ProgramMismatch { found: String, expected: String },
}

/// Receives every event of a turn as it happens.
pub type Observer = Box<dyn FnMut(&Event) + Send>;

/// Receives the reply of a turn as it is written (see [`Runtime::set_stream`]).
pub type StreamSink = Box<dyn FnMut(&str) + Send>;

/// What a runtime needs besides the program and the model.
#[derive(Clone)]
pub struct RuntimeOptions {
    pub tool_env: ToolEnv,
    pub tools: ToolRegistry,
}

/// A program ready to hold conversations.
pub struct Runtime {
    pub program: Arc<Program>,
    provider: Box<dyn Provider>,
    tools: ToolRegistry,
    tool_env: ToolEnv,
    program_hash: String,
    observer: Option<Observer>,
    stream: Option<StreamSink>,
    /// Reads what the offline rules read beyond doubt before the model is
    /// asked (its compiled patterns live as long as the runtime).
    reader: CertainReader,
}

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
    FlowDone(FlowId, Option<FlowId>, bool),
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

impl Runtime {
    pub fn new(program: Arc<Program>, provider: Box<dyn Provider>, options: RuntimeOptions) -> Runtime {
        let program_hash = program_hash(&program);
        Runtime {
            program,
            provider,
            tools: options.tools,
            tool_env: options.tool_env,
            program_hash,
            observer: None,
            stream: None,
            reader: CertainReader::new(),
        }
    }

    /// Receives the reply of each turn that calls the model while it is
    /// written, for a terminal to show it as it streams: the turn's `say`
    /// texts first (when the model is about to be called), then a line
    /// break and the model's text, piece by piece. Unless a post-model
    /// `reply` directive replaces the model's text, what the sink received
    /// is [`TurnResult::reply`]; a turn without a model call sends nothing.
    /// A turn that fails may have sent part of a reply.
    pub fn set_stream(&mut self, sink: StreamSink) {
        self.stream = Some(sink);
    }

    /// Receives every event as it happens (the REPL's live trace).
    pub fn set_observer(&mut self, observer: Observer) {
        self.observer = Some(observer);
    }

    pub fn provider_name(&self) -> String {
        self.provider.name()
    }

    /// What the provider negotiated with its server so far ([`Provider::modes`]).
    pub fn provider_modes(&self) -> Option<String> {
        self.provider.modes()
    }

    pub fn program_hash(&self) -> &str {
        &self.program_hash
    }

    pub fn clock(&self) -> &dyn Clock {
        self.tool_env.clock.as_ref()
    }

    pub fn ids(&self) -> &dyn IdSource {
        self.tool_env.ids.as_ref()
    }

    /// A fresh session for this program.
    pub fn new_session(&self, id: impl Into<String>) -> Session {
        Session::new(id, self.program_hash.clone())
    }

    /// Runs one whole turn.
    pub fn respond(&mut self, session: &mut Session, message: &str) -> Result<TurnResult, TurnError> {
        let mut turn = self.begin(session, message)?;
        loop {
            if let Progress::Finished(result) = turn.step()? {
                return Ok(*result);
            }
        }
    }

    /// Starts a turn to drive stage by stage with [`Turn::step`].
    pub fn begin<'a>(&'a mut self, session: &'a mut Session, message: &str) -> Result<Turn<'a>, TurnError> {
        if session.program_hash != self.program_hash {
            return Err(TurnError::ProgramMismatch {
                found: session.program_hash.clone(),
                expected: self.program_hash.clone(),
            });
        }
        let working = session.clone();
        Ok(Turn {
            runtime: self,
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
        })
    }
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

    /// Asks the model to understand; an answer that is still invalid after
    /// the provider's repair proposes nothing code could check, so the turn
    /// goes on as if the model had understood nothing: the step asks again
    /// instead of the turn failing. A weak model that rambles past its
    /// token limit then costs the user a question, not the conversation.
    /// Every other failure (network, authentication, cancellation) still
    /// fails the turn and leaves the session as it was.
    fn understand_or_nothing(&mut self, request: &UnderstandRequest) -> Result<Understanding, TurnError> {
        match self.runtime.provider.understand(request) {
            Ok(understanding) => Ok(understanding),
            Err(ProviderError::InvalidOutput(reason)) => {
                self.warn(format!("the model's answer was unusable and was set aside: {reason}"));
                Ok(Understanding { usage: Usage { calls: 1, ..Usage::default() }, ..Understanding::default() })
            }
            Err(error) => Err(error.into()),
        }
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

    // ------------------------------------------------------------ 1. start

    fn start(&mut self) -> Result<(), TurnError> {
        self.session.turns += 1;
        let turn = self.session.turns;
        let message = self.message.clone();
        self.emit(Event::TurnStarted { turn, message });
        if let Some(pending) = self.session.pending.take() {
            self.emit(Event::PendingApplied { source: pending.source.to_string() });
            let mut pending = pending;
            pending.source = Source("pending".to_string());
            self.record(&pending, true);
            self.apply_writes(&pending.set, &pending.set_context, &pending.source.to_string());
            self.halt |= pending.halt;
            if let Some(reply) = pending.reply.clone() {
                self.post_bus.push(Emission { reply: Some(reply), ..Emission::new(pending.source.clone()) });
            }
            self.cursor = match pending.position.clone() {
                Some(position) => self.position_cursor(position),
                None => self.current_cursor(),
            };
            self.stage = Stage::Resolve;
        } else {
            self.stage = Stage::Understand;
        }
        Ok(())
    }

    /// Where the conversation stands without routing.
    fn current_cursor(&self) -> Cursor {
        match (self.session.flow, self.session.step) {
            (Some(flow), Some(step)) => Cursor::Evaluate { flow, step, fresh: false },
            (Some(flow), None) => Cursor::Enter(flow, StepId(0)),
            _ => Cursor::Idle,
        }
    }

    // ------------------------------------------------------------ 2–3. understand

    fn understand(&mut self) -> Result<(), TurnError> {
        let program = self.program();
        let active = self.session.flow;
        let candidates: Vec<FlowId> = (0..program.flows.len())
            .map(FlowId::from_index)
            .filter(|flow| {
                program.flow(*flow).is_some_and(|declared| !declared.workflow && self.guard_passes(&declared.guard))
            })
            .collect();
        let routable: Vec<FlowId> = candidates
            .iter()
            .copied()
            .filter(|flow| program.flow(*flow).is_some_and(|declared| !declared.when.is_empty()))
            .collect();

        // Fields: the current step's, the active flow's, and when no flow is
        // active (or another may take over), the candidates'.
        let mut fields: BTreeSet<FieldId> = BTreeSet::new();
        let current_step = self.current_step(&program);
        if let Some(step) = current_step {
            fields.extend(step.collect.iter().chain(&step.requires).copied());
        }
        let extraction_flows: Vec<FlowId> = match active {
            Some(flow) => std::iter::once(flow).chain(routable.iter().copied()).collect(),
            None => candidates.clone(),
        };
        for flow in &extraction_flows {
            if let Some(declared) = program.flow(*flow) {
                fields.extend(declared.requires.iter().chain(&declared.optional).copied());
                if active.is_none()
                    && let Some(entry) = declared.steps.first()
                {
                    fields.extend(entry.collect.iter().copied());
                }
            }
        }
        let signals: Vec<usize> = self.open_signals(&program, &[Phase::Pre, Phase::Both]);
        // Post-phase signals ask about the same message: asking them here
        // saves a model call; the answer is used after the reply (their
        // guard is checked again then, and one that opens only later is
        // asked in a call of its own).
        let early_post: Vec<usize> = self
            .open_signals(&program, &[Phase::Post])
            .into_iter()
            .filter(|signal| !signals.contains(signal))
            .collect();
        // Early post-phase answers need their `extract` fields asked too:
        // no later call asks them again.
        for signal in signals.iter().chain(&early_post) {
            if let Some(declared) = program.signals.get(*signal) {
                fields.extend(declared.extract.iter().copied());
            }
        }
        // Consent is never carried over: a confirmation (a `bool` some step
        // collects) is read only from the message answering the step that
        // asks for it, never ahead through `requires`, entry steps or
        // signal `extract`.
        let confirmations = confirmation_fields(&program);
        fields.retain(|field| {
            !confirmations.contains(field) || current_step.is_some_and(|step| step.collect.contains(field))
        });
        let asked_alone: Option<FieldId> = current_step.and_then(|step| match step.collect.as_slice() {
            [only] => Some(*only),
            _ => None,
        });

        let condition_flows: Vec<FlowId> = match active {
            Some(flow) => vec![flow],
            None => candidates.clone(),
        };
        let conditions = self.open_conditions(&program, &condition_flows, &fields);

        let mut request = UnderstandRequest {
            message: self.message.clone(),
            history: self.history_window(),
            active_flow: active.map(|flow| self.flow_name(flow)),
            flows: routable
                .iter()
                .filter(|flow| Some(**flow) != active)
                .filter_map(|flow| program.flow(*flow).map(|declared| flow_choice(&program, declared)))
                .collect(),
            fields: fields
                .iter()
                .filter_map(|field| program.field(*field).map(|declared| (field, declared)))
                .map(|(field, declared)| field_spec(declared, asked_alone == Some(*field)))
                .collect(),
            conditions,
            signals: signals
                .iter()
                .chain(&early_post)
                .filter_map(|signal| program.signals.get(*signal))
                .map(|signal| Question { id: signal.name.clone(), when: signal.when.clone() })
                .collect(),
            today: self.runtime.tool_env.clock.now().date_naive().to_string(),
        };
        self.asked_fields = fields;
        // Code reads first: what the rules read beyond doubt is taken as
        // read, and the model is asked only for the rest.
        let read_by_code = self.runtime.reader.read(&request);
        request.fields.retain(|field| !read_by_code.contains_key(&field.name));
        if !request.is_empty() {
            let mut understanding = self.understand_or_nothing(&request)?;
            self.count_call(Purpose::Understand, understanding.usage);
            self.ground(&mut understanding);
            self.understanding = understanding;
            if self.over_token_budget() {
                self.stop = Some(StopReason::TokenLimit);
                self.stage = Stage::Finish;
                return Ok(());
            }
        }
        for (name, proposal) in read_by_code {
            let evidence = proposal.evidence.clone().unwrap_or_default();
            self.emit(Event::ReadByCode { field: name.clone(), value: proposal.value.clone(), evidence });
            self.understanding.fields.insert(name, proposal);
        }

        // Routing decision (LANGUAGE.md section 3).
        let understood_flow = self
            .understanding
            .flow
            .clone()
            .and_then(|name| program.flow_by_name(&name))
            .filter(|flow| routable.contains(flow));
        if let Some(name) = self.understanding.flow.clone()
            && understood_flow.is_none()
        {
            self.warn(format!("the model routed to `{name}`, which is not a candidate; ignored"));
        }
        let answered_current = current_step.is_some_and(|step| {
            step.collect.iter().any(|field| {
                program.field(*field).is_some_and(|declared| self.understanding.fields.contains_key(&declared.name))
            })
        });
        let mut route: Option<(FlowId, &'static str)> = match (active, understood_flow) {
            (Some(active), Some(flow)) if flow != active && !answered_current => Some((flow, "when")),
            (Some(_), _) => None,
            (None, Some(flow)) => Some((flow, "when")),
            (None, None) => candidates
                .iter()
                .copied()
                .find(|flow| {
                    program.flow(*flow).is_some_and(|declared| declared.when.is_empty() && !declared.guard.is_empty())
                })
                .map(|flow| (flow, "if"))
                .or_else(|| {
                    program.default_flow.filter(|flow| candidates.contains(flow)).map(|flow| (flow, "default"))
                }),
        };

        // Pre-phase signals (step 3): they run before routing takes effect.
        let mut signal_emissions = Vec::new();
        for signal_index in signals {
            let Some(signal) = program.signals.get(signal_index) else {
                continue;
            };
            if !self.understanding.signals.get(&signal.name).is_some_and(|answer| answer.yes) {
                continue;
            }
            self.emit(Event::SignalMatched { signal: signal.name.clone(), phase: "pre" });
            self.fire_signal(&signal.name);
            if let Some(directive) = &signal.then {
                let mut warnings = Vec::new();
                let emission =
                    evaluate_directive(directive, Source::new("signal", &signal.name), &self.scope(&[]), &mut warnings);
                for warning in warnings {
                    self.warn(warning);
                }
                signal_emissions.push(emission);
            }
        }

        // Extracted values: one unit, for the fields of the flow the turn
        // settles in, the current step and matched signals.
        let settled_flow = route.map(|(flow, _)| flow).or(active);
        let mut relevant: BTreeSet<FieldId> = BTreeSet::new();
        if let Some(step) = current_step {
            relevant.extend(step.collect.iter().chain(&step.requires).copied());
        }
        if let Some(flow) = settled_flow.and_then(|flow| program.flow(flow)) {
            relevant.extend(flow.requires.iter().chain(&flow.optional).copied());
            if active.is_none()
                && let Some(entry) = flow.steps.first()
            {
                relevant.extend(entry.collect.iter().copied());
            }
        }
        for signal in &program.signals {
            if self.understanding.signals.get(&signal.name).is_some_and(|answer| answer.yes) {
                relevant.extend(signal.extract.iter().copied());
            }
        }
        self.write_extraction(&program, &relevant);

        let merged = merge(&signal_emissions);
        for warning in &merged.warnings {
            self.warn(warning.clone());
        }
        for (index, emission) in signal_emissions.iter().enumerate() {
            let applied =
                merged.position.as_ref().is_none_or(|(_, winner)| *winner == index) || emission.position.is_none();
            self.record(emission, applied);
        }
        self.apply_writes(&merged.set, &merged.set_context, "signals");
        self.halt |= merged.halt;
        if merged.reply.is_some() || !merged.append_prompt.is_empty() || !merged.inject_tools.is_empty() {
            // Augmentation is layered on top of the turn: it joins the
            // pre-model bus (already recorded above).
            // A reply the merge dropped (an abort won) must not come back
            // when the whole bus is merged again before the model call.
            let keep_replies = merged.reply.is_some();
            self.pre_bus.extend(signal_emissions.iter().map(|emission| Emission {
                position: None,
                reply: emission.reply.clone().filter(|_| keep_replies),
                set: Vec::new(),
                set_context: Vec::new(),
                ..emission.clone()
            }));
            self.pre_applied = self.pre_bus.len();
        }
        if let Some((position, _)) = merged.position {
            route = None;
            self.cursor = self.position_cursor(position);
        } else if let Some((flow, reason)) = route {
            if active.is_some() {
                self.emit(Event::FlowLeft {
                    flow: self.flow_name(active.unwrap_or(flow)),
                    reason: format!("routed to `{}`", self.flow_name(flow)),
                });
            }
            self.emit(Event::Routed { flow: self.flow_name(flow), reason });
            self.start_run(flow);
            self.cursor = Cursor::EnterFlow(flow, StepId(0));
        } else {
            self.cursor = self.current_cursor();
        }
        let _ = route;
        self.stage = Stage::Resolve;
        Ok(())
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

    /// Signals of these phases whose guard holds and whose behavior allows
    /// another firing.
    fn open_signals(&self, program: &Program, phases: &[Phase]) -> Vec<usize> {
        let now = self.runtime.tool_env.clock.now();
        program
            .signals
            .iter()
            .enumerate()
            .filter(|(_, signal)| phases.contains(&signal.phase) && !signal.when.is_empty())
            .filter(|(_, signal)| self.guard_passes(&signal.guard))
            .filter(|(_, signal)| {
                let record = self.session.signals.get(&signal.name);
                match signal.behavior {
                    Behavior::Always => true,
                    Behavior::Once => record.is_none_or(|record| record.fired == 0),
                    Behavior::Cooldown { cooldown_ms } => record
                        .and_then(|record| record.last_fired_at.as_deref())
                        .and_then(|last| chrono::DateTime::parse_from_rfc3339(last).ok())
                        .is_none_or(|last| {
                            let elapsed = now.signed_duration_since(last.with_timezone(&chrono::Utc));
                            elapsed.num_milliseconds() >= i64::try_from(cooldown_ms).unwrap_or(i64::MAX)
                        }),
                }
            })
            .map(|(index, _)| index)
            .collect()
    }

    fn fire_signal(&mut self, name: &str) {
        let now = self.runtime.tool_env.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let record = self.session.signals.entry(name.to_string()).or_default();
        record.fired += 1;
        record.last_fired_at = Some(now);
    }

    /// The AI conditions this turn may reach that code has not ruled out:
    /// branch entry and step `when`s of the given flows. An entry whose code
    /// guard is already false, and reads no field this turn may extract,
    /// cannot match: its `when` is not asked.
    fn open_conditions(&self, program: &Program, flows: &[FlowId], extracting: &BTreeSet<FieldId>) -> Vec<Question> {
        let mut questions = Vec::new();
        for flow_id in flows {
            let Some(flow) = program.flow(*flow_id) else {
                continue;
            };
            let start =
                if Some(*flow_id) == self.session.flow { self.session.step.map_or(0, StepId::index) } else { 0 };
            for step in flow.steps.iter().skip(start) {
                for (index, entry) in step.branches.iter().enumerate() {
                    if entry.when.is_empty() {
                        continue;
                    }
                    let ruled_out = !entry.guard.is_empty()
                        && !reads_any(&entry.guard, extracting)
                        && !self.guard_passes(&entry.guard);
                    if ruled_out {
                        continue;
                    }
                    let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
                    push_questions(&mut questions, &base, &entry.when);
                }
                if !step.when.is_empty() {
                    let base = format!("{}.{}", flow.name, step.name);
                    push_questions(&mut questions, &base, &step.when);
                }
            }
        }
        questions
    }

    /// Writes the extracted values of `relevant` fields, all or none.
    fn write_extraction(&mut self, program: &Program, relevant: &BTreeSet<FieldId>) {
        let mut staged: Vec<(String, Value)> = Vec::new();
        let mut rejected = false;
        let extracted = std::mem::take(&mut self.understanding.fields);
        for (name, proposal) in &extracted {
            let value = &proposal.value;
            if value.is_null() {
                continue;
            }
            let Some(field_id) = program.field_by_name(name) else {
                self.warn(format!("the model extracted `{name}`, which is not a field; ignored"));
                continue;
            };
            if !self.asked_fields.contains(&field_id) || !relevant.contains(&field_id) {
                continue;
            }
            let Some(field) = program.field(field_id) else {
                continue;
            };
            match validate(value, &field.ty) {
                Ok(valid) => staged.push((name.clone(), valid)),
                Err(reason) => {
                    rejected = true;
                    self.emit(Event::ExtractionRejected { field: name.clone(), value: value.clone(), reason });
                }
            }
        }
        self.understanding.fields = extracted;
        if rejected {
            self.warn("the extracted values were not written: one of them is invalid");
            return;
        }
        for (name, value) in staged {
            self.emit(Event::Extracted { field: name.clone(), value: value.clone() });
            self.extracted_this_turn.insert(name.clone());
            self.session.data.insert(name, value);
        }
    }

    /// Checks the model's proposals against the user's message
    /// (`grounding`): what the message does not back is dropped and traced.
    fn ground(&mut self, understanding: &mut Understanding) {
        let program = self.program();
        let today = self.runtime.tool_env.clock.now().date_naive();
        for event in grounding::ground(&program, understanding, &self.message, Some(today)) {
            self.emit(event);
        }
    }

    fn count_call(&mut self, purpose: Purpose, usage: Usage) {
        let usage = Usage { calls: usage.calls.max(1), ..usage };
        self.usage.add(usage);
        let provider = self.runtime.provider.name();
        self.emit(Event::ModelCalled { purpose, provider, usage });
    }

    // ------------------------------------------------------------ 4. resolve

    fn resolve_one(&mut self) -> Result<(), TurnError> {
        self.transitions += 1;
        if self.transitions > MAX_TRANSITIONS {
            self.warn("the turn did not settle: it moved between steps too many times without asking");
            self.stop = Some(StopReason::AutoStepLimit);
            self.stage = Stage::Respond;
            return Ok(());
        }
        let program = self.program();
        match self.cursor {
            Cursor::Idle => {
                self.session.flow = None;
                self.session.step = None;
                self.stop_with(StopReason::NeedsInput);
            }
            Cursor::EnterFlow(flow_id, step_id) => {
                let Some(flow) = program.flow(flow_id) else {
                    self.cursor = Cursor::Idle;
                    return Ok(());
                };
                self.emit(Event::FlowEntered { flow: flow.name.clone() });
                self.session.flow = Some(flow_id);
                self.session.step = None;
                let path = format!("{}.on_enter", flow.name);
                match self.run_hook(&flow.on_enter, &path) {
                    Ok(()) => {}
                    // The flow's `on_enter` is part of entering the step the
                    // flow is entered at, so that step's `on_error` answers
                    // it (by default: an apology, and the flow aborted).
                    Err(TurnError::Action(failure)) => {
                        let Some(step) = flow.step(step_id) else {
                            return Err(failure.into());
                        };
                        self.step_failed(flow, step, flow_id, step_id, failure)?;
                        return Ok(());
                    }
                    Err(error) => return Err(error),
                }
                if !self.apply_pre_positions() {
                    self.cursor =
                        if step_id == StepId(0) { self.entry_cursor(flow_id) } else { Cursor::Enter(flow_id, step_id) };
                }
            }
            Cursor::Enter(flow_id, step_id) => {
                let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?)))
                else {
                    // A flow with no steps completes at once.
                    self.cursor = Cursor::FlowDone(flow_id, None, false);
                    return Ok(());
                };
                self.session.flow = Some(flow_id);
                self.session.step = Some(step_id);
                self.session.asks = 0;
                // What an earlier visit offered is not what this one will.
                self.session.offered = None;
                self.emit(Event::StepEntered { flow: self.flow_name(flow_id), step: step.name.clone() });
                if !self.run_step_hook(flow, step, (flow_id, step_id), &step.on_enter, "on_enter")? {
                    return Ok(());
                }
                if !self.apply_pre_positions() {
                    self.cursor = Cursor::Evaluate { flow: flow_id, step: step_id, fresh: true };
                }
            }
            Cursor::Evaluate { flow, step, fresh } => self.evaluate(&program, flow, step, fresh)?,
            Cursor::Execute(flow, step) => self.execute(&program, flow, step)?,
            Cursor::Leave(flow, step) => self.leave(&program, flow, step)?,
            Cursor::FlowDone(flow_id, next_override, by_directive) => {
                let Some(flow) = program.flow(flow_id) else {
                    self.cursor = Cursor::Idle;
                    return Ok(());
                };
                let _ = by_directive;
                let path = format!("{}.on_complete", flow.name);
                // `on_complete` is a post-model hook, like `finalize`: the
                // flow's steps have acted (a booking is made), so a failure
                // here must not hide that from the user by failing the turn.
                // Its writes and directives are dropped together and traced.
                match self.run_post_hook(&flow.on_complete, &path) {
                    Ok(()) => {}
                    Err(TurnError::Action(failure)) => {
                        self.emit(Event::HookFailed { hook: path, error: failure.to_string() })
                    }
                    Err(error) => return Err(error),
                }
                self.emit(Event::FlowCompleted { flow: flow.name.clone() });
                self.session.flow = None;
                self.session.step = None;
                self.session.asks = 0;
                match next_override.or(flow.complete_next) {
                    Some(next) => {
                        self.emit(Event::Routed { flow: self.flow_name(next), reason: "complete.next" });
                        self.start_run(next);
                        self.cursor = Cursor::EnterFlow(next, StepId(0));
                    }
                    None => self.stop_with(StopReason::FlowComplete),
                }
            }
            Cursor::Abort => {
                if let Some(flow) = self.session.flow {
                    self.emit(Event::FlowLeft { flow: self.flow_name(flow), reason: "aborted".to_string() });
                }
                self.session.flow = None;
                self.session.step = None;
                self.session.asks = 0;
                self.stop_with(StopReason::Aborted);
            }
        }
        Ok(())
    }

    fn stop_with(&mut self, reason: StopReason) {
        self.stop.get_or_insert(reason);
        self.stage = Stage::Respond;
    }

    fn needs_input(&self, step: &Step) -> bool {
        step.collect.iter().chain(&step.requires).any(|field| {
            self.runtime
                .program
                .field(*field)
                .is_none_or(|declared| self.session.data.get(&declared.name).is_none_or(Value::is_null))
        })
    }

    fn mark_executed(&mut self, name: &str) {
        if !self.executed.iter().any(|executed| executed == name) {
            self.executed.push(name.to_string());
        }
    }

    fn evaluate(&mut self, program: &Program, flow_id: FlowId, step_id: StepId, fresh: bool) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return Ok(());
        };
        let Some(step) = flow.step(step_id) else {
            self.cursor = Cursor::FlowDone(flow_id, None, false);
            return Ok(());
        };
        let reopened = !fresh && self.reopen_confirmation(program, flow, step, (flow_id, step_id));
        if !self.needs_input(step) {
            self.cursor = Cursor::Execute(flow_id, step_id);
            return Ok(());
        }
        // A reopened confirmation already holds the user's change of course
        // ("No, 3 guests"): asking it again with the new value is the
        // answer, not an AI entry that would ask for the value once more.
        if !fresh
            && !reopened
            && let Some(index) = self.interrupting_branch(flow, step)
        {
            self.mark_executed(&step.name);
            self.take_branch(flow_id, step_id, index);
            return Ok(());
        }
        if step.auto {
            // An auto step whose `requires` are unset cannot run and cannot
            // ask: the flow cannot go on.
            self.warn(format!("the auto step `{}` requires fields that are not set; the flow stops here", step.name));
            self.mark_executed(&step.name);
            self.stop_with(StopReason::NeedsInput);
            return Ok(());
        }
        if !fresh && self.session.asks >= step.max_asks {
            self.emit(Event::Warning {
                message: format!("`{}` asked {} times without an answer", step.name, self.session.asks),
            });
            match &step.on_no_answer {
                Some(directive) => {
                    let source = Source::new("on_no_answer", format!("{}.{}", flow.name, step.name));
                    let position = self.apply_step_directive(directive, source);
                    self.session.asks = 0;
                    self.cursor = match position {
                        Some(position) => self.position_cursor(position),
                        None => Cursor::Evaluate { flow: flow_id, step: step_id, fresh: true },
                    };
                }
                None => {
                    self.says.push(format!(
                        "Sorry, I could not get an answer to that, so I stopped \"{}\".",
                        flow.title.clone().unwrap_or_else(|| flow.name.clone())
                    ));
                    self.cursor = Cursor::Abort;
                }
            }
            return Ok(());
        }
        self.session.asks += 1;
        let ask = self.session.asks;
        self.emit(Event::StepAsked { flow: flow.name.clone(), step: step.name.clone(), ask });
        self.mark_executed(&step.name);
        self.asking = Some((flow_id, step_id));
        if !self.run_step_hook(flow, step, (flow_id, step_id), &step.prepare, "prepare")? {
            return Ok(());
        }
        self.batch.push((flow_id, step_id));
        if self.apply_pre_positions() {
            return Ok(());
        }
        self.session.offered = self.offer(program, step, (flow_id, step_id));
        if let Some(prompt) = &step.prompt {
            let text = self.render(prompt);
            self.instructions.push(text);
        }
        self.stop_with(StopReason::NeedsInput);
        Ok(())
    }

    /// The values a confirming step shows as it asks (after its `prepare`,
    /// as its prompt renders them); `None` for a step that confirms nothing.
    fn offer(&self, program: &Program, step: &Step, (flow, step_id): (FlowId, StepId)) -> Option<Offered> {
        let fields = step.confirms(program);
        if fields.is_empty() {
            return None;
        }
        let values = fields
            .iter()
            .filter_map(|field| program.field(*field))
            .map(|declared| {
                let value = self.session.data.get(&declared.name).cloned().unwrap_or(Value::Null);
                (declared.name.clone(), value)
            })
            .collect();
        Some(Offered { flow, step: step_id, values })
    }

    /// A consent binds to what was confirmed: when a value the step asked
    /// about changed before the step is left ("No, 3 guests", "actually the
    /// Overlook"), the bools it collects are cleared, so the step asks again
    /// with the new value instead of acting on, or cancelling over, an
    /// answer to another question. Returns whether it reopened.
    fn reopen_confirmation(&mut self, program: &Program, flow: &Flow, step: &Step, at: (FlowId, StepId)) -> bool {
        let Some(offered) = self.session.offered.take() else {
            return false;
        };
        if (offered.flow, offered.step) != at {
            return false;
        }
        let changed: Vec<String> = offered
            .values
            .iter()
            .filter(|(name, shown)| self.session.data.get(*name).unwrap_or(&Value::Null) != *shown)
            .map(|(name, _)| name.clone())
            .collect();
        if changed.is_empty() {
            return false;
        }
        let mut cleared = Vec::new();
        for field in &step.collect {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            if matches!(declared.ty.kind, crate::ir::TypeKind::Bool)
                && self.session.data.remove(&declared.name).is_some()
            {
                cleared.push(declared.name.clone());
            }
        }
        // A new offer, not an unanswered one: it does not use up `max_asks`.
        self.session.asks = 0;
        self.emit(Event::ConfirmationReopened { flow: flow.name.clone(), step: step.name.clone(), changed, cleared });
        true
    }

    fn execute(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return Ok(());
        };
        let Some(step) = flow.step(step_id) else {
            self.cursor = Cursor::FlowDone(flow_id, None, false);
            return Ok(());
        };
        if step.auto {
            if self.auto_steps >= program.agent.limits.max_auto_steps {
                self.session.flow = Some(flow_id);
                self.session.step = Some(step_id);
                self.stop_with(StopReason::AutoStepLimit);
                return Ok(());
            }
            self.auto_steps += 1;
        }
        // The step the message answers had its model call (and hooks) when
        // it asked; a conversation step entered this turn joins the batch.
        let answered = self.original.flow == Some(flow_id) && self.original.step == Some(step_id);
        let joins_batch = !step.auto && !answered;
        self.session.flow = Some(flow_id);
        self.session.step = Some(step_id);
        self.mark_executed(&step.name);
        let path = format!("{}.{}", flow.name, step.name);
        let source = ActionSource { kind: "action", path: &path, numbered: true };
        match self.run_actions(&step.actions, &source, false) {
            Ok(()) => {}
            Err(TurnError::Action(failure)) => return self.step_failed(flow, step, flow_id, step_id, failure),
            Err(error) => return Err(error),
        }
        if joins_batch {
            if !self.run_step_hook(flow, step, (flow_id, step_id), &step.prepare, "prepare")? {
                return Ok(());
            }
            self.batch.push((flow_id, step_id));
        }
        if step.collect.is_empty()
            && let Some(prompt) = &step.prompt
        {
            let text = self.render(prompt);
            self.instructions.push(text);
        }
        if let Some(say) = &step.say {
            let text = self.render(say);
            self.says.push(text);
        }
        self.emit(Event::StepExecuted { flow: flow.name.clone(), step: step.name.clone() });
        if self.apply_pre_positions() {
            return Ok(());
        }
        if let Some(wait_ms) = step.wait_ms {
            let resume = super::clock::resume_time(self.runtime.tool_env.clock.now(), wait_ms)
                .ok_or_else(|| TurnError::Wait(super::clock::wait_out_of_range(wait_ms)))?;
            self.resume_at = Some(resume.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            self.cursor = Cursor::Leave(flow_id, step_id);
            self.leave(program, flow_id, step_id)?;
            // Park at the successor without entering it: the wait resumes there.
            if let Cursor::Enter(next_flow, next_step) = self.cursor {
                self.session.flow = Some(next_flow);
                self.session.step = Some(next_step);
            }
            self.stop_with(StopReason::Waiting);
            return Ok(());
        }
        self.cursor = Cursor::Leave(flow_id, step_id);
        Ok(())
    }

    /// A step's actions failed (a tool call, an invalid write) in its `do`,
    /// `on_enter` or `prepare`; nothing they wrote is kept. A conversation
    /// answers instead of failing the turn: by the step's `on_error`
    /// directive (its `reply` is said; with no position the conversation
    /// stays at the step and the next message runs it again), or by default
    /// with an apology and the flow aborted, so that nothing more acts on
    /// the failed attempt. `on_error: stop` fails the turn instead, leaving
    /// the session as it was.
    fn step_failed(
        &mut self,
        flow: &Flow,
        step: &Step,
        flow_id: FlowId,
        step_id: StepId,
        failure: ActionError,
    ) -> Result<(), TurnError> {
        let directive = match &step.recovery {
            Some(Recovery::Stop) => return Err(failure.into()),
            Some(Recovery::Directive(directive)) => Some(directive),
            None => None,
        };
        self.emit(Event::StepFailed { flow: flow.name.clone(), step: step.name.clone(), error: failure.to_string() });
        self.session.flow = Some(flow_id);
        self.session.step = Some(step_id);
        self.session.asks = 0;
        let Some(directive) = directive else {
            let title = flow.title.clone().unwrap_or_else(|| flow.name.clone());
            self.says.push(format!("Sorry, something went wrong, so I stopped \"{title}\". Nothing more was done."));
            self.cursor = Cursor::Abort;
            return Ok(());
        };
        let source = Source::new("on_error", format!("{}.{}", flow.name, step.name));
        match self.apply_step_directive(directive, source) {
            Some(position) => self.cursor = self.position_cursor(position),
            None => self.stop_with(StopReason::NeedsInput),
        }
        Ok(())
    }

    /// Runs a step's `on_enter` or `prepare` hook. Its failure is the
    /// step's: `on_error` answers it. Returns whether the hook ran; when it
    /// did not, the failure has already moved the turn on.
    fn run_step_hook(
        &mut self,
        flow: &Flow,
        step: &Step,
        (flow_id, step_id): (FlowId, StepId),
        actions: &[crate::ir::Action],
        hook: &str,
    ) -> Result<bool, TurnError> {
        let path = format!("{}.{}.{hook}", flow.name, step.name);
        match self.run_hook(actions, &path) {
            Ok(()) => Ok(true),
            Err(TurnError::Action(failure)) => {
                self.step_failed(flow, step, flow_id, step_id, failure)?;
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    /// Applies a step's own directive (`on_no_answer`, `on_error`) at once:
    /// records it, writes its data, says its `reply`; returns its position
    /// for the caller to move by.
    fn apply_step_directive(&mut self, directive: &crate::ir::Directive, source: Source) -> Option<Move> {
        let mut warnings = Vec::new();
        let emission = evaluate_directive(directive, source, &self.scope(&[]), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        self.record(&emission, true);
        let source_name = emission.source.to_string();
        self.apply_writes(&emission.set, &emission.set_context, &source_name);
        if let Some(reply) = emission.reply.clone() {
            self.says.push(reply);
        }
        emission.position
    }

    fn leave(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return Ok(());
        };
        let Some(step) = flow.step(step_id) else {
            self.cursor = Cursor::FlowDone(flow_id, None, false);
            return Ok(());
        };
        for index in 0..step.branches.len() {
            if self.branch_matches(flow, step, index) {
                self.take_branch(flow_id, step_id, index);
                return Ok(());
            }
        }
        self.cursor = match step.next {
            Some(Next::Step(target)) => Cursor::Enter(flow_id, target),
            Some(Next::End) => Cursor::FlowDone(flow_id, None, false),
            None => self.linear_successor(flow_id, step_id),
        };
        Ok(())
    }

    /// Whether branch entry `index` matches: its `if`s hold, then its `when`s.
    fn branch_matches(&mut self, flow: &Flow, step: &Step, index: usize) -> bool {
        let Some(entry) = step.branches.get(index) else {
            return false;
        };
        if !self.holds(&entry.guard) {
            return false;
        }
        let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
        self.whens_hold(&base, &entry.when)
    }

    /// Follows branch entry `index` of a step: to a step of the flow, or by
    /// its directive (a directive without a position applies its writes and
    /// reply, then resolution goes on with the linear successor).
    fn take_branch(&mut self, flow_id: FlowId, step_id: StepId, index: usize) {
        let program = self.program();
        let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?))) else {
            return;
        };
        let Some(entry) = step.branches.get(index) else {
            return;
        };
        let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
        self.emit(Event::BranchTaken {
            flow: flow.name.clone(),
            step: step.name.clone(),
            entry: index + 1,
            label: entry.label.clone(),
        });
        match &entry.then {
            Then::Step(target) => self.cursor = Cursor::Enter(flow_id, *target),
            Then::Directive(directive) => {
                let mut warnings = Vec::new();
                let emission =
                    evaluate_directive(directive, Source::new("branch", &base), &self.scope(&[]), &mut warnings);
                for warning in warnings {
                    self.warn(warning);
                }
                self.record(&emission, true);
                let source_name = emission.source.to_string();
                self.apply_writes(&emission.set, &emission.set_context, &source_name);
                // A branch evaluated before the model call is pre-model:
                // its reply and augmentation act in this turn.
                if emission.reply.is_some() || emission.has_augmentation() {
                    self.pre_bus.push(Emission {
                        position: None,
                        set: Vec::new(),
                        set_context: Vec::new(),
                        ..emission.clone()
                    });
                    self.pre_applied = self.pre_bus.len();
                }
                self.cursor = match emission.position {
                    Some(position) => self.position_cursor(position),
                    None => self.linear_successor(flow_id, step_id),
                };
            }
        }
    }

    /// An entry with a `when` lets the user change course instead of
    /// answering: it may match while the step the message answers still
    /// needs input. Code-only entries and the fallback wait for the step's
    /// fields (they decide on the answer).
    fn interrupting_branch(&mut self, flow: &Flow, step: &Step) -> Option<usize> {
        (0..step.branches.len()).find(|index| {
            let has_when = step.branches.get(*index).is_some_and(|entry| !entry.when.is_empty());
            has_when && self.branch_matches(flow, step, *index)
        })
    }

    /// A flow's entry: its first step, skipped like any step reached in
    /// list order when its `skip_if` holds or its `if`/`when` does not.
    fn entry_cursor(&mut self, flow_id: FlowId) -> Cursor {
        let program = self.program();
        let Some(flow) = program.flow(flow_id) else {
            return Cursor::Idle;
        };
        match flow.steps.first() {
            Some(first) => match self.skip_reason(flow, first) {
                Some(reason) => {
                    self.emit(Event::StepSkipped { flow: flow.name.clone(), step: first.name.clone(), reason });
                    self.linear_successor(flow_id, StepId(0))
                }
                None => Cursor::Enter(flow_id, StepId(0)),
            },
            None => Cursor::FlowDone(flow_id, None, false),
        }
    }

    /// The next step in list order whose `skip_if` does not hold and whose
    /// `if`/`when` do, else the flow's completion.
    fn linear_successor(&mut self, flow_id: FlowId, step_id: StepId) -> Cursor {
        let program = self.program();
        let Some(flow) = program.flow(flow_id) else {
            return Cursor::Idle;
        };
        for (index, candidate) in flow.steps.iter().enumerate().skip(step_id.index() + 1) {
            let reason = self.skip_reason(flow, candidate);
            match reason {
                Some(reason) => {
                    self.emit(Event::StepSkipped { flow: flow.name.clone(), step: candidate.name.clone(), reason })
                }
                None => return Cursor::Enter(flow_id, StepId::from_index(index)),
            }
        }
        Cursor::FlowDone(flow_id, None, false)
    }

    fn skip_reason(&mut self, flow: &Flow, step: &Step) -> Option<String> {
        if let Some(skip_if) = &step.skip_if
            && is_true(&self.eval(skip_if))
        {
            return Some("skip_if holds".to_string());
        }
        if !self.holds(&step.guard) {
            return Some("its `if` does not hold".to_string());
        }
        let base = format!("{}.{}", flow.name, step.name);
        if !step.when.is_empty() && !self.whens_hold(&base, &step.when) {
            return Some("its `when` does not hold".to_string());
        }
        None
    }

    /// Whether every `when` of a list holds, by the understanding's answers.
    fn whens_hold(&mut self, base: &str, whens: &[String]) -> bool {
        for index in 0..whens.len() {
            let id = question_id(base, whens.len(), index);
            match self.understanding.conditions.get(&id).map(|answer| answer.yes) {
                Some(true) => {}
                Some(false) => return false,
                None => {
                    self.warn(format!("the condition `{id}` was not asked this turn; it counts as not holding"));
                    return false;
                }
            }
        }
        true
    }

    fn position_cursor(&mut self, position: Move) -> Cursor {
        let current = self.session.flow;
        match position {
            Move::Goto { flow, data } => {
                let writes = data;
                // The run starts before its `with` data is written.
                self.start_run(flow);
                self.apply_writes(&writes, &[], "goto");
                if let Some(current) = current {
                    self.emit(Event::FlowLeft {
                        flow: self.flow_name(current),
                        reason: format!("goto `{}`", self.flow_name(flow)),
                    });
                }
                Cursor::EnterFlow(flow, StepId(0))
            }
            Move::GotoStep { flow, step } => {
                if current == Some(flow) {
                    Cursor::Enter(flow, step)
                } else {
                    Cursor::EnterFlow(flow, step)
                }
            }
            Move::Complete { next } => match current {
                Some(flow) => Cursor::FlowDone(flow, next, true),
                None => next.map_or(Cursor::Idle, |next| {
                    self.start_run(next);
                    Cursor::EnterFlow(next, StepId(0))
                }),
            },
            Move::Abort { reason } => {
                if let Some(reason) = reason {
                    self.says.push(reason);
                }
                Cursor::Abort
            }
            Move::Reset => match current {
                Some(flow) => {
                    self.start_run(flow);
                    Cursor::Enter(flow, StepId(0))
                }
                None => Cursor::Idle,
            },
        }
    }

    /// A new run of a flow starts: the fields of its [`Flow::fresh`] are
    /// cleared, so nothing collected in an earlier run (a consent above
    /// all) acts in this one. Values the understanding step read from this
    /// turn's message stay: the message that routes here may already
    /// answer the flow's questions.
    fn start_run(&mut self, flow_id: FlowId) {
        let program = self.program();
        let Some(flow) = program.flow(flow_id) else {
            return;
        };
        let mut cleared = Vec::new();
        for field in &flow.fresh {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            if self.extracted_this_turn.contains(&declared.name) {
                continue;
            }
            if self.session.data.remove(&declared.name).is_some() {
                cleared.push(declared.name.clone());
            }
        }
        if !cleared.is_empty() {
            self.emit(Event::FieldsCleared { flow: flow.name.clone(), fields: cleared });
        }
    }

    // ------------------------------------------------------------ actions and buses

    fn action_runner_output(
        &mut self,
        actions: &[crate::ir::Action],
        source: &ActionSource<'_>,
    ) -> Result<ActionOutput, TurnError> {
        let mut data = self.session.data.clone();
        let mut out = ActionOutput::default();
        let result = {
            let runner = ActionRunner {
                program: &self.runtime.program,
                tools: &self.runtime.tools,
                tool_env: &self.runtime.tool_env,
                steps: &[],
            };
            runner.run(actions, source, &mut data, &self.session.context, &mut Vec::new(), &mut out)
        };
        for (tool, duration_ms, error) in out.tool_calls.drain(..) {
            let ok = error.is_none();
            self.events.push(Event::ToolCalled { tool, ok, duration_ms, error });
        }
        for warning in std::mem::take(&mut out.warnings) {
            self.warn(warning);
        }
        result?;
        self.session.data = data;
        Ok(out)
    }

    /// Runs a step's `do` (or a pre-model hook): writes commit together,
    /// says join the reply, emissions join the pre-model bus.
    fn run_actions(
        &mut self,
        actions: &[crate::ir::Action],
        source: &ActionSource<'_>,
        post: bool,
    ) -> Result<(), TurnError> {
        if actions.is_empty() {
            return Ok(());
        }
        let out = self.action_runner_output(actions, source)?;
        self.says.extend(out.says);
        for emission in out.emissions {
            let directive = describe(&emission, &self.runtime.program);
            self.emit(Event::DirectiveEmitted { source: emission.source.to_string(), directive });
            if post {
                self.post_bus.push(emission);
            } else {
                self.pre_bus.push(emission);
            }
        }
        Ok(())
    }

    fn run_hook(&mut self, actions: &[crate::ir::Action], path: &str) -> Result<(), TurnError> {
        let source = ActionSource { kind: "hook", path, numbered: false };
        self.run_actions(actions, &source, false)
    }

    fn run_post_hook(&mut self, actions: &[crate::ir::Action], path: &str) -> Result<(), TurnError> {
        let source = ActionSource { kind: "hook", path, numbered: false };
        self.run_actions(actions, &source, true)
    }

    /// Merges the pre-model emissions not yet applied: their writes as one
    /// unit, and a winning position, which moves the cursor. Returns whether
    /// the cursor moved.
    fn apply_pre_positions(&mut self) -> bool {
        let fresh: Vec<Emission> = self.pre_bus.get(self.pre_applied..).unwrap_or_default().to_vec();
        self.pre_applied = self.pre_bus.len();
        if fresh.is_empty() {
            return false;
        }
        // The merge's only warning (a reply dropped for an abort) is given
        // once, when the whole pre-model bus is merged before the reply.
        let merged = merge(&fresh);
        for (index, emission) in fresh.iter().enumerate() {
            let lost =
                emission.position.is_some() && merged.position.as_ref().is_some_and(|(_, winner)| *winner != index);
            self.record(emission, !lost);
        }
        self.apply_writes(&merged.set, &merged.set_context, "pre-model bus");
        match merged.position {
            Some((position, _)) => {
                self.cursor = self.position_cursor(position);
                true
            }
            None => false,
        }
    }

    /// Validates writes as one unit and applies them, or none of them.
    fn apply_writes(&mut self, set: &[(String, Value)], set_context: &[(String, Value)], source: &str) {
        let program = self.program();
        let mut staged: Vec<(bool, String, Value)> = Vec::new();
        for (is_context, writes) in [(false, set), (true, set_context)] {
            for (name, value) in writes {
                let declared = if is_context {
                    program.context.iter().find(|key| key.name == *name)
                } else {
                    program.fields.iter().find(|field| field.name == *name)
                };
                let Some(declared) = declared else {
                    self.warn(format!("{source}: `{name}` is not declared; the writes were not applied"));
                    return;
                };
                match validate(value, &declared.ty) {
                    Ok(valid) => staged.push((is_context, name.clone(), valid)),
                    Err(reason) => {
                        self.warn(format!("{source}: `{name}` {reason}; the writes were not applied"));
                        return;
                    }
                }
            }
        }
        for (is_context, name, value) in staged {
            let target = if is_context { &mut self.session.context } else { &mut self.session.data };
            if value.is_null() {
                target.remove(&name);
            } else {
                target.insert(name, value);
            }
        }
    }

    fn record(&mut self, emission: &Emission, applied: bool) {
        let directive = describe(emission, &self.runtime.program);
        if applied {
            self.emit(Event::DirectiveApplied { source: emission.source.to_string() });
        }
        self.records.push(DirectiveRecord { source: emission.source.to_string(), directive, applied });
    }

    // ------------------------------------------------------------ 5. respond

    fn respond(&mut self) -> Result<(), TurnError> {
        let program = self.program();
        let pre = merge(&self.pre_bus);
        for warning in &pre.warnings {
            self.warn(warning.clone());
        }
        self.halt |= pre.halt;
        let mut verbatim = pre.reply.as_ref().map(|(reply, _)| reply.clone());
        // An abort that is not on the bus (a signal's, or `max_asks` with no
        // `on_no_answer`) beats a reply all the same.
        if self.stop == Some(StopReason::Aborted)
            && let Some((_, index)) = &pre.reply
        {
            let source = self.pre_bus.get(*index).map(|emission| emission.source.to_string()).unwrap_or_default();
            self.warn(format!("the reply from {source} was dropped: the flow was aborted"));
            verbatim = None;
        }
        let needs_model = !self.halt
            && verbatim.is_none()
            && self.stop != Some(StopReason::Aborted)
            && (!self.instructions.is_empty() || (self.session.flow.is_none() && self.says.is_empty()));
        let mut model_text = None;
        if needs_model && !self.over_token_budget() {
            let request = self.respond_request(&program, &pre.append_prompt, &pre.inject_tools);
            let mut tool_loop = TurnToolLoop {
                program: &program,
                tools: &self.runtime.tools,
                tool_env: &self.runtime.tool_env,
                exposed: request.tools.iter().map(|tool| tool.name.clone()).collect(),
                rounds: 0,
                max_rounds: program.agent.limits.max_tool_rounds,
                limit_hit: false,
                events: Vec::new(),
                emissions: Vec::new(),
            };
            let mut stream = self.runtime.stream.as_mut();
            // The `say` texts lead the reply: shown at once, with the line
            // break that joins them to the model's text sent only once that
            // text starts.
            let said = self.says.join("\n");
            if let Some(sink) = stream.as_mut()
                && !said.is_empty()
            {
                sink(&said);
            }
            let mut separated = said.is_empty();
            let mut on_text = |chunk: &str| {
                if let Some(sink) = stream.as_mut() {
                    if !separated && !chunk.is_empty() {
                        separated = true;
                        sink("\n");
                    }
                    sink(chunk);
                }
            };
            let response = reply_with_tools(self.runtime.provider.as_mut(), &request, &mut tool_loop, &mut on_text)?;
            self.tool_rounds = tool_loop.rounds;
            self.tool_limit_hit = tool_loop.limit_hit;
            let tool_events = std::mem::take(&mut tool_loop.events);
            let tool_emissions = std::mem::take(&mut tool_loop.emissions);
            drop(tool_loop);
            for event in tool_events {
                self.emit(event);
            }
            self.post_bus.extend(tool_emissions);
            self.count_call(Purpose::Respond, response.usage);
            model_text = Some(response.text);
        }
        if self.halt && self.stop == Some(StopReason::NeedsInput) {
            self.stop = Some(StopReason::Halt);
        }
        // Every step of the batch finalizes, in order. The reply is written:
        // a failing `finalize` is traced and dropped, not a failed turn.
        for (flow, step) in std::mem::take(&mut self.batch) {
            let Some(step) = program.flow(flow).and_then(|found| found.step(step)) else {
                continue;
            };
            let path = format!("{}.{}.finalize", self.flow_name(flow), step.name);
            match self.run_post_hook(&step.finalize, &path) {
                Ok(()) => {}
                Err(TurnError::Action(failure)) => {
                    self.emit(Event::HookFailed { hook: path, error: failure.to_string() })
                }
                Err(error) => return Err(error),
            }
        }
        // The post-model bus: writes and a position for the next turn;
        // augmentation can no longer act.
        let post = merge(&self.post_bus);
        for warning in &post.warnings {
            self.warn(warning.clone());
        }
        let post_emissions = std::mem::take(&mut self.post_bus);
        for (index, emission) in post_emissions.iter().enumerate() {
            if emission.has_augmentation() {
                self.warn(format!(
                    "{}: halt, append_prompt and inject_tools act only before the model; dropped",
                    emission.source
                ));
            }
            let lost =
                emission.position.is_some() && post.position.as_ref().is_some_and(|(_, winner)| *winner != index);
            if emission.source.0 != "pending" {
                self.record(emission, !lost);
            }
        }
        self.apply_writes(&post.set, &post.set_context, "post-model bus");
        if let Some((position, _)) = post.position {
            self.park(position)?;
        }

        let mut parts: Vec<String> = self.says.clone();
        match (post.reply.map(|(reply, _)| reply).or(verbatim), model_text) {
            (Some(reply), _) => parts.push(reply),
            (None, Some(text)) if !text.trim().is_empty() => parts.push(text),
            _ => {}
        }
        self.reply = parts.join("\n");
        if self.tool_limit_hit {
            self.stop = Some(StopReason::ToolRoundLimit);
        }
        if self.over_token_budget() {
            self.stop = Some(StopReason::TokenLimit);
        }
        self.stage = Stage::PostSignals;
        Ok(())
    }

    fn respond_request(&mut self, program: &Program, appended: &[String], injected: &[ToolId]) -> ReplyRequest {
        let identity = program.agent.identity.as_ref().map(|identity| self.render(identity));
        let rules: Vec<String> = program.agent.rules.iter().map(|rule| self.render(rule)).collect();
        let flow_rules: Vec<String> = self
            .session
            .flow
            .and_then(|flow| program.flow(flow))
            .map(|flow| flow.rules.iter().map(|rule| self.render(rule)).collect())
            .unwrap_or_default();
        let mut tools: Vec<ToolId> = self
            .asking
            .and_then(|(flow, step)| program.flow(flow).and_then(|found| found.step(step)))
            .map(|step| step.tools.clone())
            .unwrap_or_default();
        for tool in injected {
            if !tools.contains(tool) {
                tools.push(*tool);
            }
        }
        ReplyRequest {
            identity,
            rules,
            flow_rules,
            instructions: self.instructions.clone(),
            appended: appended.to_vec(),
            said: self.says.clone(),
            history: self.history_window(),
            message: self.message.clone(),
            data: self.session.data.clone().into_iter().collect(),
            tools: tools
                .iter()
                .filter_map(|tool| program.tool(*tool))
                .map(|tool| ToolSpec {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: crate::ir::object_schema(&tool.params),
                })
                .collect(),
            tools_spent: false,
        }
    }

    /// Applies a post-model position: the session waits at the target for
    /// the next turn (entering a flow still runs its `on_enter`).
    fn park(&mut self, position: Move) -> Result<(), TurnError> {
        let program = self.program();
        match position {
            Move::Goto { flow, data } => {
                self.start_run(flow);
                self.apply_writes(&data, &[], "goto");
                self.enter_parked(&program, flow, StepId(0))?;
            }
            Move::GotoStep { flow, step } => {
                if self.session.flow == Some(flow) {
                    self.session.step = Some(step);
                    self.session.asks = 0;
                } else {
                    self.enter_parked(&program, flow, step)?;
                }
            }
            Move::Complete { next } => {
                if let Some(flow) = self.session.flow.and_then(|flow| program.flow(flow)) {
                    self.emit(Event::FlowCompleted { flow: flow.name.clone() });
                }
                self.session.flow = None;
                self.session.step = None;
                if let Some(next) = next {
                    self.start_run(next);
                    self.enter_parked(&program, next, StepId(0))?;
                }
            }
            Move::Abort { reason } => {
                if let Some(reason) = reason {
                    self.says.push(reason);
                }
                self.session.flow = None;
                self.session.step = None;
                self.stop = Some(StopReason::Aborted);
            }
            Move::Reset => {
                if let Some(flow) = self.session.flow {
                    self.start_run(flow);
                    self.session.step = Some(StepId(0));
                    self.session.asks = 0;
                }
            }
        }
        Ok(())
    }

    fn enter_parked(&mut self, program: &Program, flow_id: FlowId, step: StepId) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            return Ok(());
        };
        self.emit(Event::FlowEntered { flow: flow.name.clone() });
        self.session.flow = Some(flow_id);
        self.session.step = Some(step);
        self.session.asks = 0;
        let path = format!("{}.on_enter", flow.name);
        self.run_post_hook(&flow.on_enter, &path)?;
        Ok(())
    }

    // ------------------------------------------------------------ 6. post signals

    fn post_signals(&mut self) -> Result<(), TurnError> {
        self.stage = Stage::Finish;
        if matches!(self.stop, Some(StopReason::TokenLimit | StopReason::TimeLimit)) {
            return Ok(());
        }
        let program = self.program();
        let signals = self.open_signals(&program, &[Phase::Post, Phase::Both]);
        if signals.is_empty() {
            return Ok(());
        }
        let early_answers = self.understanding.signals.clone();
        let unanswered: Vec<usize> = signals
            .iter()
            .copied()
            .filter(|signal| {
                program.signals.get(*signal).is_some_and(|declared| !early_answers.contains_key(&declared.name))
            })
            .collect();
        let mut fields: BTreeSet<FieldId> = BTreeSet::new();
        for signal in &unanswered {
            if let Some(declared) = program.signals.get(*signal) {
                fields.extend(declared.extract.iter().copied());
            }
        }
        // The signals asked here opened during the turn: they see the reply
        // they are about (a yes still cites the user's words).
        let mut history = self.history_window();
        history.push(Message { role: Role::User, text: self.message.clone() });
        let reply = if self.reply.is_empty() { self.says.join("\n") } else { self.reply.clone() };
        if !reply.is_empty() {
            history.push(Message { role: Role::Assistant, text: reply });
        }
        let confirmations = confirmation_fields(&program);
        fields.retain(|field| !confirmations.contains(field));
        let request = UnderstandRequest {
            message: self.message.clone(),
            history,
            active_flow: self.session.flow.map(|flow| self.flow_name(flow)),
            flows: Vec::new(),
            fields: fields
                .iter()
                .filter_map(|field| program.field(*field))
                .map(|declared| field_spec(declared, false))
                .collect(),
            conditions: Vec::new(),
            signals: unanswered
                .iter()
                .filter_map(|signal| program.signals.get(*signal))
                .map(|signal| Question { id: signal.name.clone(), when: signal.when.clone() })
                .collect(),
            today: self.runtime.tool_env.clock.now().date_naive().to_string(),
        };
        let answer = if request.signals.is_empty() {
            Understanding::default()
        } else {
            let mut answer = self.understand_or_nothing(&request)?;
            self.count_call(Purpose::PostSignals, answer.usage);
            self.ground(&mut answer);
            answer
        };
        let mut armed = Vec::new();
        let mut extracting: BTreeSet<FieldId> = BTreeSet::new();
        for signal in signals.iter().filter_map(|signal| program.signals.get(*signal)) {
            let matched = answer.signals.get(&signal.name).or_else(|| early_answers.get(&signal.name));
            if !matched.is_some_and(|answer| answer.yes) {
                continue;
            }
            // The pre half of a `both` signal answered yes about this same
            // message and has fired already: firing again would arm the
            // same directive for the next turn.
            if signal.phase == Phase::Both && early_answers.get(&signal.name).is_some_and(|answer| answer.yes) {
                continue;
            }
            if answer.signals.contains_key(&signal.name) {
                extracting.extend(signal.extract.iter().copied());
            }
            self.emit(Event::SignalMatched { signal: signal.name.clone(), phase: "post" });
            self.fire_signal(&signal.name);
            if let Some(directive) = &signal.then {
                let mut warnings = Vec::new();
                let emission =
                    evaluate_directive(directive, Source::new("signal", &signal.name), &self.scope(&[]), &mut warnings);
                for warning in warnings {
                    self.warn(warning);
                }
                armed.push(emission);
            }
        }
        // Only the fields of the signals that matched are written.
        self.asked_fields = fields;
        self.understanding.fields = answer.fields;
        self.write_extraction(&program, &extracting);
        if armed.is_empty() {
            return Ok(());
        }
        let merged = merge(&armed);
        let mut pending = Emission::new(Source(
            armed.iter().map(|emission| emission.source.to_string()).collect::<Vec<_>>().join("+"),
        ));
        pending.position = merged.position.map(|(position, _)| position);
        pending.reply = merged.reply.map(|(reply, _)| reply);
        pending.set = merged.set;
        pending.set_context = merged.set_context;
        for emission in &armed {
            if emission.has_augmentation() {
                self.warn(format!(
                    "{}: halt, append_prompt and inject_tools of a post-phase signal are dropped",
                    emission.source
                ));
            }
            self.records.push(DirectiveRecord {
                source: emission.source.to_string(),
                directive: describe(emission, &program),
                applied: false,
            });
        }
        self.session.pending = Some(pending);
        Ok(())
    }

    // ------------------------------------------------------------ 7. finish

    fn finish(&mut self) -> TurnResult {
        let stop = self.stop.unwrap_or(StopReason::NeedsInput);
        self.emit(Event::TurnFinished { stopped_reason: stop });
        self.session.history.push(Message { role: Role::User, text: self.message.clone() });
        if !self.reply.is_empty() || !self.says.is_empty() {
            let text = if self.reply.is_empty() { self.says.join("\n") } else { self.reply.clone() };
            self.reply = text.clone();
            self.session.history.push(Message { role: Role::Assistant, text });
        }
        self.session.usage.add(self.usage);
        self.session.version += 1;
        let program = self.program();
        let flow = self.session.flow.and_then(|flow| program.flow(flow));
        let result = TurnResult {
            turn: self.session.turns,
            user: self.message.clone(),
            reply: self.reply.clone(),
            flow: flow.map(|flow| flow.name.clone()),
            step: flow
                .and_then(|flow| self.session.step.and_then(|step| flow.step(step)))
                .map(|step| step.name.clone()),
            executed_steps: self.executed.clone(),
            stopped_reason: stop,
            data: ordered_data(&program, &self.session.data),
            directives: std::mem::take(&mut self.records),
            llm_calls: self.usage.calls,
            tokens: Tokens::from(self.usage),
            resume_at: self.resume_at.clone(),
            events: std::mem::take(&mut self.events),
        };
        *self.original = std::mem::take(&mut self.session);
        result
    }
}

/// The tool loop of one reply: runs the tools the step exposes, counts
/// rounds, and keeps result directives for the post-model bus.
struct TurnToolLoop<'a> {
    program: &'a Program,
    tools: &'a ToolRegistry,
    tool_env: &'a ToolEnv,
    exposed: Vec<String>,
    rounds: u32,
    max_rounds: u32,
    limit_hit: bool,
    events: Vec<Event>,
    emissions: Vec<Emission>,
}

impl ToolLoop for TurnToolLoop<'_> {
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        if self.rounds >= self.max_rounds {
            self.limit_hit = true;
            return Err(format!("the limit of {} tool rounds is reached", self.max_rounds));
        }
        self.rounds += 1;
        if !self.exposed.iter().any(|exposed| exposed == name) {
            return Err(format!("the tool `{name}` is not available in this step"));
        }
        let Some(tool) = self.program.tools.iter().find(|tool| tool.name == name) else {
            return Err(format!("there is no tool `{name}`"));
        };
        let Value::Object(raw) = arguments else {
            return Err("tool arguments must be a JSON object".to_string());
        };
        let mut args = serde_json::Map::new();
        for param in &tool.params {
            let value = raw.get(&param.name).cloned().unwrap_or(Value::Null);
            match validate(&value, &param.ty) {
                Ok(valid) => {
                    args.insert(param.name.clone(), valid);
                }
                Err(reason) => return Err(format!("argument `{}`: {reason}", param.name)),
            }
        }
        let started = Instant::now();
        let result = self.tools.call(tool, &args, self.tool_env);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(result) => {
                self.events.push(Event::ToolCalled { tool: name.to_string(), ok: true, duration_ms, error: None });
                if let Some(directive) = result.get("directive") {
                    let (emission, warnings) =
                        super::actions::emission_from_json(self.program, directive, Source::new("tool", name));
                    for message in warnings {
                        self.events.push(Event::Warning { message });
                    }
                    self.emissions.push(emission);
                }
                Ok(result)
            }
            Err(error) => {
                self.events.push(Event::ToolCalled {
                    tool: name.to_string(),
                    ok: false,
                    duration_ms,
                    error: Some(error.to_string()),
                });
                Err(error.to_string())
            }
        }
    }

    fn may_call(&self) -> bool {
        self.rounds < self.max_rounds
    }
}

/// The data in schema order, for results people read.
pub fn ordered_data(program: &Program, data: &Data) -> serde_json::Map<String, Value> {
    program
        .fields
        .iter()
        .filter_map(|field| data.get(&field.name).map(|value| (field.name.clone(), value.clone())))
        .collect()
}

fn flow_choice(program: &Program, flow: &Flow) -> FlowChoice {
    let mut examples = Vec::new();
    for field in flow.requires.iter().chain(&flow.optional) {
        if let Some(declared) = program.field(*field) {
            examples.extend(declared.ty.examples.iter().cloned());
        }
    }
    FlowChoice { name: flow.name.clone(), title: flow.title.clone(), when: flow.when.clone(), examples }
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

fn question_id(base: &str, count: usize, index: usize) -> String {
    if count == 1 { base.to_string() } else { format!("{base}.{}", index + 1) }
}

fn push_questions(questions: &mut Vec<Question>, base: &str, whens: &[String]) {
    for (index, when) in whens.iter().enumerate() {
        questions.push(Question { id: question_id(base, whens.len(), index), when: vec![when.clone()] });
    }
}

/// Whether any of the expressions reads one of the fields.
fn reads_any(exprs: &[Expr], fields: &BTreeSet<FieldId>) -> bool {
    let mut found = false;
    for expr in exprs {
        expr.walk(&mut |node| {
            if let ExprKind::Field { field } = node.kind
                && fields.contains(&field)
            {
                found = true;
            }
        });
    }
    found
}
