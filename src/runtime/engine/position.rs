//! Where a position moves the turn: a landing of the successor rule
//! ([`crate::ir::successor`]) turned into a cursor (in list order, each
//! step that may be passed over is asked about), a directive's position
//! before the reply and after it, and the new run of a flow it starts.

use super::bus::{apply_merged, apply_writes, record, run_post_hook};
use super::conditions::skip_reason;
use super::services::Services;
use super::state::{TurnState, flow_name};
use super::{Cursor, TurnError};
use crate::ir::successor::{self, Jump, Landing};
use crate::ir::{FlowId, StepId};
use crate::runtime::directive::{Emission, Move, merge};
use crate::runtime::events::{Event, StopReason};

/// The cursor a landing of the successor rule ([`successor`]) puts the
/// turn at. In list order, each step that can be passed over is asked
/// about ([`skip_reason`]); those passed over are traced.
pub(super) fn land(st: &mut TurnState, sv: &Services, flow_id: FlowId, landing: Landing) -> Cursor {
    match landing {
        Landing::Step(step) => Cursor::Enter(flow_id, step),
        Landing::Listed(from) => {
            let program = sv.program;
            let Some(flow) = program.flow(flow_id) else {
                return Cursor::Idle;
            };
            let found =
                successor::first_listed(flow, from, |_, candidate| match skip_reason(st, sv, flow, candidate) {
                    Some(reason) => {
                        st.emit(Event::StepSkipped { flow: flow.name.clone(), step: candidate.name.clone(), reason });
                        true
                    }
                    None => false,
                });
            match found {
                Some(step) => Cursor::Enter(flow_id, step),
                None => Cursor::FlowDone(flow_id, None),
            }
        }
        Landing::Complete(next) => Cursor::FlowDone(flow_id, next),
        Landing::Enter(flow, step) => Cursor::EnterFlow(flow, step),
        Landing::Abort => Cursor::Abort,
    }
}

/// When a directive's position acts: before the reply, steps still run
/// after it (the turn's cursor moves); after it, the session waits where
/// it lands for the next turn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    BeforeReply,
    AfterReply,
}

/// Where a position lands: in the flow the session is in, or, with no
/// flow to leave (a pending directive, a signal between flows, a position
/// after the flow ended), from outside every flow; `None` when it goes
/// nowhere from there (`reset`, a bare `complete`).
enum Placed {
    In(FlowId, Landing),
    Outside(Landing),
}

/// Does what a position does besides landing, the same before and after
/// the reply: `goto` and `reset` start a new run of the flow they land in
/// (and `goto` writes its `with` data once the run has started), an
/// `abort` says its reason; then asks the successor rule where it lands.
fn place(st: &mut TurnState, sv: &Services, position: Move, when: When) -> Option<Placed> {
    let current = st.session.flow;
    let jump = position.jump();
    match position {
        Move::Goto { flow, data } => {
            start_run(st, sv, flow);
            apply_writes(st, sv, &data, &[], "goto");
            // After the reply the flow is not left for another within the
            // turn: the next turn enters it.
            if let Some(current) = current
                && when == When::BeforeReply
            {
                st.emit(Event::FlowLeft {
                    flow: flow_name(sv, current),
                    reason: format!("goto `{}`", flow_name(sv, flow)),
                });
            }
        }
        Move::Abort { reason: Some(reason) } => st.answer.says.push(reason),
        _ => {}
    }
    let Some(current) = current else {
        let landing = successor::landing_outside(jump)?;
        if let Jump::Complete(Some(next)) = jump {
            start_run(st, sv, next);
        }
        return Some(Placed::Outside(landing));
    };
    if jump == Jump::Reset {
        start_run(st, sv, current);
    }
    Some(Placed::In(current, successor::landing(current, jump)))
}

/// The cursor a directive's position moves the turn to, before the reply.
pub(super) fn position_cursor(st: &mut TurnState, sv: &Services, position: Move) -> Cursor {
    match place(st, sv, position, When::BeforeReply) {
        Some(Placed::In(current, landing)) => land(st, sv, current, landing),
        // Only a move into a flow goes anywhere from outside every flow.
        Some(Placed::Outside(Landing::Enter(flow, step))) => Cursor::EnterFlow(flow, step),
        Some(Placed::Outside(Landing::Abort)) => Cursor::Abort,
        Some(Placed::Outside(_)) | None => Cursor::Idle,
    }
}

/// Applies a post-model position where the successor rule lands it: the
/// session waits there for the next turn (entering a flow still runs its
/// `on_enter`). No step runs after the reply, so nothing is passed over.
/// A completion enters the flow the `complete` named, else the completed
/// flow's `complete.next`, as a completion before the reply does.
pub(super) fn park(st: &mut TurnState, sv: &mut Services, position: Move) -> Result<(), TurnError> {
    let program = sv.program;
    let (current, landing) = match place(st, sv, position, When::AfterReply) {
        Some(Placed::In(current, landing)) => (Some(current), landing),
        Some(Placed::Outside(landing)) => (None, landing),
        None => return Ok(()),
    };
    match landing {
        Landing::Step(step) => {
            st.session.step = Some(step);
            st.session.asks = 0;
        }
        // Entering a flow still runs its `on_enter`; the session waits
        // at the step named, as it is.
        Landing::Enter(flow, step) => enter_parked(st, sv, flow, step)?,
        Landing::Complete(named) => {
            let completed = current.and_then(|flow| program.flow(flow));
            if let Some(flow) = completed {
                st.emit(Event::FlowCompleted { flow: flow.name.clone() });
            }
            st.session.flow = None;
            st.session.step = None;
            let next = match completed {
                Some(flow) => successor::after_completion(flow, named),
                None => named,
            };
            if let Some(next) = next {
                start_run(st, sv, next);
                enter_parked(st, sv, next, StepId(0))?;
            }
        }
        Landing::Abort => {
            st.session.flow = None;
            st.session.step = None;
            st.stop = Some(StopReason::Aborted);
        }
        // A position never lands in list order.
        Landing::Listed(_) => {}
    }
    Ok(())
}

/// Enters a flow after the reply: its `on_enter` runs (on the post-model
/// bus), and the session waits at `step` for the next turn.
pub(super) fn enter_parked(
    st: &mut TurnState,
    sv: &mut Services,
    flow_id: FlowId,
    step: StepId,
) -> Result<(), TurnError> {
    let program = sv.program;
    let Some(flow) = program.flow(flow_id) else {
        return Ok(());
    };
    st.emit(Event::FlowEntered { flow: flow.name.clone() });
    st.session.flow = Some(flow_id);
    st.session.step = Some(step);
    st.session.asks = 0;
    let path = format!("{}.on_enter", flow.name);
    // The post-model bus was applied before this position parked the
    // session: what the `on_enter` emits is applied here, in the same
    // post-model phase, or it would be lost.
    let before = st.bus.post.len();
    run_post_hook(st, sv, &flow.on_enter, &path)?;
    let emitted: Vec<Emission> = st.bus.post.drain(before..).collect();
    if emitted.is_empty() {
        return Ok(());
    }
    let merged = merge(&emitted);
    for emission in &emitted {
        // The session waits where it was parked and the reply is written:
        // only the writes can still act.
        let acts = emission.position.is_none() && emission.reply.is_none() && !emission.has_augmentation();
        if !acts {
            st.warn(format!(
                "{}: a flow entered after the reply applies only the writes of its on_enter; the rest is dropped",
                emission.source
            ));
        }
        record(st, sv, emission, acts);
    }
    apply_merged(st, sv, &emitted, &merged.set, &merged.set_context);
    Ok(())
}

/// A new run of a flow starts: the fields of its [`Flow::fresh`](crate::ir::Flow::fresh) are
/// cleared, so nothing collected in an earlier run (a consent above
/// all) acts in this one. Values the understanding step read from this
/// turn's message stay: the message that routes here may already
/// answer the flow's questions.
pub(super) fn start_run(st: &mut TurnState, sv: &Services, flow_id: FlowId) {
    let program = sv.program;
    let Some(flow) = program.flow(flow_id) else {
        return;
    };
    let mut cleared = Vec::new();
    for field in &flow.fresh {
        let Some(declared) = program.field(*field) else {
            continue;
        };
        // Values the user gave this turn carry into the new run, but a
        // confirmation never does: it answered another question.
        let confirmation = matches!(declared.ty.kind, crate::ir::TypeKind::Bool);
        if st.reading.extracted.contains(&declared.name) && !confirmation {
            continue;
        }
        if st.session.data.remove(&declared.name).is_some() {
            cleared.push(declared.name.clone());
        }
    }
    if !cleared.is_empty() {
        st.emit(Event::FieldsCleared { flow: flow.name.clone(), fields: cleared });
    }
}

/// Merges the pre-model emissions not yet applied: their writes as one
/// unit, and a winning position, which moves the cursor. Returns whether
/// the cursor moved.
pub(super) fn apply_pre_positions(st: &mut TurnState, sv: &Services) -> bool {
    let first = st.bus.pre_applied;
    let fresh: Vec<Emission> = st.bus.pre.get(first..).unwrap_or_default().to_vec();
    st.bus.pre_applied = st.bus.pre.len();
    if fresh.is_empty() {
        return false;
    }
    // The merge's only warning (a reply dropped for an abort) is given
    // once, when the whole pre-model bus is merged before the reply.
    let merged = merge(&fresh);
    for (index, emission) in fresh.iter().enumerate() {
        let lost = emission.position.is_some() && merged.position.as_ref().is_some_and(|(_, winner)| *winner != index);
        let recorded = record(st, sv, emission, !lost);
        if emission.position.is_none()
            && let Some(slot) = st.bus.pre_records.get_mut(first + index)
        {
            *slot = Some(recorded);
        }
    }
    apply_merged(st, sv, &fresh, &merged.set, &merged.set_context);
    match merged.position {
        Some((position, _)) => {
            st.cursor = position_cursor(st, sv, position);
            true
        }
        None => false,
    }
}
