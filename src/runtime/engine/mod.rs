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
//! The turn's state (`state.rs`: cursor, working session, buses, counters,
//! trace) is apart from the services it uses (`services.rs`: program,
//! model, tools, clock, limits); each stage is a function over the two
//! returning its `StageOutcome`, in its own file, and a stage calls another only through an import, so
//! the stages' dependencies are visible and have no cycle (the module test
//! in `tests/check/modules.rs` checks it). In pipeline order: `start.rs`
//! (the pending directive), `understand.rs`, `signals.rs` (both phases),
//! `resolve.rs` (entering, evaluating, executing steps), `reply.rs` (the
//! model's reply, one round per step, with `tool_loop.rs`), `finish.rs`.
//! Below them: `plan.rs` (what the turn asks the model), `fused.rs` (the
//! reply the understand call writes too, and whether the turn may use
//! it), `ask.rs` (asking
//! it and taking what it read), `route.rs` (leaving a step),
//! `position.rs` (where a position or a landing puts the turn, by
//! `ir::successor`), `conditions.rs`, and `bus.rs` (actions,
//! writes, directive records). `runtime.rs` holds the [`Runtime`] that
//! starts turns.
//!
//! Choices where the language leaves room, documented in the README:
//! - Positions emitted to the pre-model bus (by `on_enter`, `prepare`,
//!   `do`, or a tool result) are merged and applied when the step or hook
//!   that emitted them finishes; their writes are merged and validated
//!   at the same moment, and join the turn's pre-model phase, which is
//!   committed or undone as one (`writes::PhaseWrites`, docs/runtime.md);
//!   their `reply` and augmentation wait for the model call.
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
//!   ([`Step::confirms`](crate::ir::Step::confirms), kept as [`Session::offered`]): when one changed
//!   before the step is left, the `bool` is cleared and the step asks again.
//! - `turn_timeout` stops a turn only where the session can resume: before
//!   a step is evaluated or executed, never between running a step and
//!   leaving it (the next turn would run it again). The understand call,
//!   before any step acts, is cut off when the time is spent and the turn
//!   stops with `time_limit`; later calls are not cut off.

#![warn(missing_docs)]

mod ask;
mod bus;
mod claims;
mod conditions;
mod finish;
mod fused;
mod history;
mod plan;
mod position;
mod reply;
mod resolve;
mod route;
mod runtime;
mod services;
mod signals;
mod start;
mod state;
mod tool_loop;
mod understand;

pub use runtime::{ContinuationLimits, Observer, Runtime, RuntimeOptions, StreamSink, TurnError};

use super::events::{StopReason, TurnResult};
use super::session::Session;
pub(crate) use super::spec::field_spec;
use crate::ir::{FlowId, StepId};
use crate::llm::ToolCall;
pub(crate) use plan::StaticAsk;
pub(crate) use plan::prompt_prefix;
use services::Services;
use state::TurnState;

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
    /// The turn began: the message is in the history.
    Started,
    /// The model (or the offline rules) read the message.
    Understood,
    /// One step of resolution (enter, ask, execute, leave…).
    Resolved,
    /// The reply is written.
    Replied,
    /// The signals asked after the reply have run.
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
    Finished {
        /// Why the turn stopped.
        reason: StopReason,
        /// The reply, the events and the usage of the turn.
        result: Box<TurnResult>,
    },
}

/// One turn in progress: its state and the services it borrows from the
/// [`Runtime`].
pub struct Turn<'a> {
    original: &'a mut Session,
    state: TurnState<'a>,
    services: Services<'a>,
}

impl<'a> Turn<'a> {
    /// A turn on a working copy of `session`, at its first stage.
    pub(super) fn new(runtime: &'a mut Runtime, session: &'a mut Session, message: &str) -> Turn<'a> {
        let (services, observer) = Services::borrow(runtime);
        let state = TurnState::new(session.clone(), message, observer);
        Turn { original: session, state, services }
    }
}

impl Turn<'_> {
    /// Advances the turn by one stage, or by one step during resolution.
    pub fn step(&mut self) -> Result<Progress, TurnError> {
        let (state, services) = (&mut self.state, &mut self.services);
        // The start stage checks the limits itself, once the turn is counted.
        if !matches!(state.stage, Stage::Start | Stage::Finish)
            && state.stop.is_none()
            && state.at_a_resumable_point()
            && let Some(reason) = state.limit_reached(services)
        {
            state.stop = Some(reason);
            state.stage = Stage::Finish;
        }
        let outcome = match state.stage {
            Stage::Start => start::start(state, services)?,
            Stage::Understand => understand::understand(state, services)?,
            Stage::Resolve => resolve::resolve_one(state, services)?,
            Stage::Reply => reply::reply(state, services)?,
            Stage::ToolCalls => reply::answer_tool_calls(state, services)?,
            Stage::PostSignals => signals::post_signals(state, services)?,
            Stage::Finish => finish::finish(state, services),
        };
        Ok(match outcome {
            StageOutcome::Done(done) => Progress::Continue(done),
            StageOutcome::ToolCalls(calls) => Progress::ToolCalls(calls),
            StageOutcome::Finished(result) => {
                *self.original = std::mem::take(&mut state.session);
                Progress::Finished { reason: result.stopped_reason, result }
            }
        })
    }
}

/// What a stage function did. Where the turn goes on is recorded in its
/// state ([`TurnState::stage`](state::TurnState)): the next [`Turn::step`]
/// resumes there.
enum StageOutcome {
    /// The stage, or one transition of resolution, completed.
    Done(StageDone),
    /// The model asked for tool calls while writing the reply.
    ToolCalls(Vec<ToolCall>),
    /// The turn ended; the caller's session is to be replaced.
    Finished(Box<TurnResult>),
}

impl StageOutcome {
    /// A round of the reply: done, or tool calls the model asked for.
    fn replied(calls: Option<Vec<ToolCall>>) -> StageOutcome {
        match calls {
            Some(calls) => StageOutcome::ToolCalls(calls),
            None => StageOutcome::Done(StageDone::Replied),
        }
    }
}

#[cfg(test)]
mod tests {
    /// A turn may be driven from another thread than the one that began
    /// it (a server's worker), as when it held the runtime itself.
    #[test]
    fn a_turn_can_move_between_threads() {
        fn movable<T: Send>() {}
        movable::<super::Turn<'static>>();
    }
}
