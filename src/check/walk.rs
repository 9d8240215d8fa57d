//! Walking the IR's nested parts without recursion: the step walkers of
//! [`crate::ir::walk`], and every directive of a program with the place it
//! sits in. Several passes need "every directive" or "every action of this
//! hook"; they share these walkers so none of them misses a place.

pub(crate) use crate::ir::walk::{StepPart, all_actions, calls_a_tool, emitted, step_directives};
use crate::ir::{Directive, FlowId, Program, SignalId, StepId};

/// Where a directive sits in the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Site {
    Signal(SignalId),
    FlowOnEnter(FlowId),
    FlowOnComplete(FlowId),
    Step(FlowId, StepId, StepPart),
}

impl Site {
    /// The flow the directive is emitted from, if any.
    pub(crate) fn flow(self) -> Option<FlowId> {
        match self {
            Site::Signal(_) => None,
            Site::FlowOnEnter(flow) | Site::FlowOnComplete(flow) | Site::Step(flow, _, _) => Some(flow),
        }
    }
}

/// Calls `visit` on every directive of the program.
pub(crate) fn directives<'a>(program: &'a Program, mut visit: impl FnMut(Site, &'a Directive)) {
    for (index, signal) in program.signals.iter().enumerate() {
        if let Some(directive) = &signal.then {
            visit(Site::Signal(SignalId::from_index(index)), directive);
        }
    }
    for (flow_index, flow) in program.flows.iter().enumerate() {
        let flow_id = FlowId::from_index(flow_index);
        for directive in emitted(&flow.on_enter) {
            visit(Site::FlowOnEnter(flow_id), directive);
        }
        for directive in emitted(&flow.on_complete) {
            visit(Site::FlowOnComplete(flow_id), directive);
        }
        for (step_index, step) in flow.steps.iter().enumerate() {
            let step_id = StepId::from_index(step_index);
            for (part, directive) in step_directives(step) {
                visit(Site::Step(flow_id, step_id, part), directive);
            }
        }
    }
}
