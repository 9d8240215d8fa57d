//! Leaving a step, by the successor rule the checker and the graph also
//! follow ([`crate::ir::successor`]): its branch entries in order (one
//! with a `when` may interrupt a step that still asks), then its `next` or
//! list order.

use super::bus::{apply_writes, record};
use super::conditions::branch_matches;
use super::position::{land, position_cursor};
use super::services::Services;
use super::state::TurnState;
use super::{Cursor, TurnError};
use crate::ir::successor::{self, Leaving};
use crate::ir::{Flow, FlowId, Program, Step, StepId, Then};
use crate::runtime::actions::evaluate_directive;
use crate::runtime::directive::{Emission, Source};
use crate::runtime::events::Event;

pub(super) fn leave(st: &mut TurnState, sv: &Services, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
    let program = sv.program;
    let Some((flow, step)) = locate(st, program, flow_id, step_id) else {
        return Ok(());
    };
    match successor::leave(step_id, step, |index| branch_matches(st, sv, flow, step, index)) {
        Leaving::Branch(index) => take_branch(st, sv, flow_id, step_id, index),
        Leaving::Fallthrough(landing) => st.cursor = land(st, sv, flow_id, landing),
    }
    Ok(())
}

/// The flow and step a cursor names. When either is gone (a program
/// changed under a session), the cursor moves on, to idle or to the
/// flow's completion, and there is nothing to do at the step.
pub(super) fn locate<'p>(
    st: &mut TurnState,
    program: &'p Program,
    flow_id: FlowId,
    step_id: StepId,
) -> Option<(&'p Flow, &'p Step)> {
    let Some(flow) = program.flow(flow_id) else {
        st.cursor = Cursor::Idle;
        return None;
    };
    let Some(step) = flow.step(step_id) else {
        st.cursor = Cursor::FlowDone(flow_id, None);
        return None;
    };
    Some((flow, step))
}

/// Follows branch entry `index` of a step: to a step of the flow, or by
/// its directive (a directive without a position applies its writes and
/// reply, then resolution goes on with the linear successor).
pub(super) fn take_branch(st: &mut TurnState, sv: &Services, flow_id: FlowId, step_id: StepId, index: usize) {
    let program = sv.program;
    let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?))) else {
        return;
    };
    let Some(entry) = step.branches.get(index) else {
        return;
    };
    let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
    st.emit(Event::BranchTaken {
        flow: flow.name.clone(),
        step: step.name.clone(),
        entry: index + 1,
        label: entry.label.clone(),
    });
    let Then::Directive(directive) = &entry.then else {
        st.cursor = land(st, sv, flow_id, successor::branch_landing(flow_id, step_id, &entry.then));
        return;
    };
    let mut warnings = Vec::new();
    let emission = evaluate_directive(directive, Source::Branch(base.clone()), &st.scope(sv), &mut warnings);
    for warning in warnings {
        st.warn(warning);
    }
    let recorded = record(st, sv, &emission, true);
    let source_name = emission.source.to_string();
    apply_writes(st, sv, &emission.set, &emission.set_context, &source_name);
    // A branch evaluated before the model call is pre-model:
    // its reply and augmentation act in this turn.
    if emission.reply.is_some() || emission.has_augmentation() {
        let record = emission.position.is_none().then_some(recorded);
        st.bus.push_pre(
            Emission { position: None, set: Vec::new(), set_context: Vec::new(), ..emission.clone() },
            record,
        );
        st.bus.pre_applied = st.bus.pre.len();
    }
    st.cursor = match emission.position {
        Some(position) => position_cursor(st, sv, position),
        None => land(st, sv, flow_id, successor::after_directive(flow_id, step_id, None)),
    };
}

/// An entry with a `when` lets the user change course instead of
/// answering: it may match while the step the message answers still
/// needs input. Code-only entries and the fallback wait for the step's
/// fields (they decide on the answer).
pub(super) fn interrupting_branch(st: &mut TurnState, sv: &Services, flow: &Flow, step: &Step) -> Option<usize> {
    (0..step.branches.len()).find(|index| {
        let has_when = step.branches.get(*index).is_some_and(|entry| !entry.when.is_empty());
        has_when && branch_matches(st, sv, flow, step, *index)
    })
}
