//! The last stage of a turn: the history, usage and version are updated
//! and the result is built; the caller's session is then replaced by the
//! working copy.

use super::StageOutcome;
use super::services::Services;
use super::state::TurnState;
use crate::message::{Message, Role};
use crate::runtime::events::{Event, StopReason, Tokens, TurnResult};
use crate::runtime::session::ordered_data;

pub(super) fn finish(st: &mut TurnState, sv: &Services) -> StageOutcome {
    let stop = st.stop.unwrap_or(StopReason::NeedsInput);
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
