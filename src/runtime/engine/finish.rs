//! The last stage of a turn: a turn a limit stopped before any reply
//! answers with the limit message, the history, usage and version are
//! updated and the result is built; the caller's session is then replaced
//! by the working copy.

use super::StageOutcome;
use super::bus::end_phase;
use super::services::Services;
use super::state::{AFTER_PHASES, TurnState};
use crate::message::{Message, Role};
use crate::runtime::events::{EmptyReplyAction, Event, StopReason, Tokens, TurnResult};
use crate::runtime::session::ordered_data;

/// What a turn a limit stops before any reply answers, unless the program
/// says otherwise (`agent.limits.message`).
const LIMIT_MESSAGE: &str = "Sorry, I had to stop before I could answer that. Please try again.";

pub(super) fn finish(st: &mut TurnState, sv: &Services) -> StageOutcome {
    // A turn a limit stopped before the reply ends its pre-model phase here.
    end_phase(st, AFTER_PHASES);
    let stop = st.stop.unwrap_or(StopReason::NeedsInput);
    // A limit may stop the turn before anything was said: the user is
    // told so rather than answered with silence.
    let silent = st.answer.reply.trim().is_empty() && st.answer.says.iter().all(|said| said.trim().is_empty());
    if silent && stopped_by_a_limit(stop) {
        let text = match &sv.program.agent.limits.message {
            Some(message) => st.render(sv, message),
            None => LIMIT_MESSAGE.to_string(),
        };
        st.emit(Event::EmptyReply { action: EmptyReplyAction::LimitMessage, text: Some(text.clone()) });
        st.answer.reply = text;
    }
    st.emit(Event::TurnFinished { stopped_reason: stop });
    st.session.history.push(Message { role: Role::User, text: st.message.clone() });
    if !st.answer.reply.is_empty() || !st.answer.says.is_empty() {
        let text = if st.answer.reply.is_empty() { st.answer.says.join("\n") } else { st.answer.reply.clone() };
        st.answer.reply = text.clone();
        st.session.history.push(Message { role: Role::Assistant, text });
    }
    st.session.usage.add(st.counters.usage);
    if sv.limits.max_session_time.is_some() {
        let spent = u64::try_from(st.session_time().as_millis()).unwrap_or(u64::MAX);
        st.session.turn_time_ms = Some(spent);
    }
    st.session.version += 1;
    let program = sv.program;
    let flow = st.session.flow.and_then(|flow| program.flow(flow));

    StageOutcome::Finished(Box::new(TurnResult {
        turn: st.session.turns,
        user: st.message.clone(),
        reply: st.answer.reply.clone(),
        flow: flow.map(|flow| flow.name.clone()),
        step: flow.and_then(|flow| st.session.step.and_then(|step| flow.step(step))).map(|step| step.name.clone()),
        executed_steps: st.answer.executed.clone(),
        stopped_reason: stop,
        data: ordered_data(program, &st.session.data),
        directives: std::mem::take(&mut st.trace.records),
        llm_calls: st.counters.usage.calls,
        tokens: Tokens::from(st.counters.usage),
        resume_at: st.answer.resume_at.clone(),
        events: std::mem::take(&mut st.trace.events),
    }))
}

/// Whether the turn stopped at a limit, the program's or the operator's.
fn stopped_by_a_limit(stop: StopReason) -> bool {
    matches!(
        stop,
        StopReason::AutoStepLimit
            | StopReason::ToolRoundLimit
            | StopReason::TokenLimit
            | StopReason::TimeLimit
            | StopReason::StepLimit
            | StopReason::SessionTokenLimit
            | StopReason::SessionTimeLimit
            | StopReason::ErrorLimit
    )
}
