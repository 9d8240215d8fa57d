//! Stage 1 of a turn: a directive armed by the last turn's post-phase
//! signals is applied before anything else, and understanding is skipped.

use super::bus::{apply_writes, record};
use super::position::position_cursor;
use super::services::Services;
use super::state::TurnState;
use super::{Stage, StageDone, StageOutcome, TurnError};
use crate::runtime::directive::{Emission, Source};
use crate::runtime::events::Event;

pub(super) fn start(st: &mut TurnState, sv: &Services) -> Result<StageOutcome, TurnError> {
    st.session.turns += 1;
    let turn = st.session.turns;
    let message = st.message.clone();
    st.emit(Event::TurnStarted { turn, message });
    // A session whose budget is spent still counts the turn it refuses,
    // and keeps a pending directive for when it may go on.
    if let Some(reason) = st.limit_reached(sv) {
        st.stop = Some(reason);
        st.stage = Stage::Finish;
        return Ok(StageOutcome::Done(StageDone::Started));
    }
    if let Some(pending) = st.session.pending.take() {
        st.emit(Event::PendingApplied { source: pending.source.to_string() });
        let mut pending = pending;
        pending.source = Source::Pending;
        record(st, sv, &pending, true);
        apply_writes(st, sv, &pending.set, &pending.set_context, &pending.source.to_string());
        st.bus.halt |= pending.halt;
        if let Some(reply) = pending.reply.clone() {
            st.bus.post.push(Emission { reply: Some(reply), ..Emission::new(pending.source.clone()) });
        }
        st.cursor = match pending.position.clone() {
            Some(position) => position_cursor(st, sv, position),
            None => st.current_cursor(),
        };
        st.stage = Stage::Resolve;
    } else {
        st.stage = Stage::Understand;
    }
    Ok(StageOutcome::Done(StageDone::Started))
}
