//! Walking the IR's nested parts without recursion: actions (a `for_each`
//! holds more actions) and the directives a program can emit, each with the
//! place it sits in. Several passes need "every directive" or "every action
//! of this hook"; they share these walkers so none of them misses a place.

use crate::ir::{Action, ActionKind, Directive, FlowId, Program, SignalId, Step, StepId, Then};

/// Every action of `actions` and of the `for_each` bodies inside them, in
/// source order (pre-order), with an explicit stack so nesting depth never
/// touches the call stack.
pub(crate) fn all_actions(actions: &[Action]) -> Vec<&Action> {
    let mut out = Vec::with_capacity(actions.len());
    let mut stack: Vec<std::slice::Iter<'_, Action>> = vec![actions.iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(action) => {
                out.push(action);
                if let ActionKind::ForEach(for_each) = &action.kind {
                    stack.push(for_each.actions.iter());
                }
            }
            None => {
                stack.pop();
            }
        }
    }
    out
}

/// Whether `actions` call a tool, nested `for_each` bodies included.
pub(crate) fn calls_a_tool(actions: &[Action]) -> bool {
    all_actions(actions).into_iter().any(|action| matches!(action.kind, ActionKind::Call(_)))
}

/// Where a step's directive comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepPart {
    /// `do`, `on_enter` or `prepare` actions: the pre-model bus.
    PreAction,
    /// `finalize` actions: the post-model bus.
    Finalize,
    /// The `then` of branch entry `n`.
    Branch(usize),
    OnNoAnswer,
    /// A conversation step's `on_error`.
    OnError,
}

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

/// The directives of one step, with their part.
pub(crate) fn step_directives(step: &Step) -> Vec<(StepPart, &Directive)> {
    let mut out = Vec::new();
    for hook in [&step.actions, &step.on_enter, &step.prepare] {
        out.extend(emitted(hook).into_iter().map(|directive| (StepPart::PreAction, directive)));
    }
    out.extend(emitted(&step.finalize).into_iter().map(|directive| (StepPart::Finalize, directive)));
    for (index, branch) in step.branches.iter().enumerate() {
        if let Then::Directive(directive) = &branch.then {
            out.push((StepPart::Branch(index), directive));
        }
    }
    if let Some(directive) = &step.on_no_answer {
        out.push((StepPart::OnNoAnswer, directive));
    }
    if let Some(crate::ir::Recovery::Directive(directive)) = &step.recovery {
        out.push((StepPart::OnError, directive));
    }
    out
}

/// The directives `emit`ted by a list of actions, nested ones included.
pub(crate) fn emitted(actions: &[Action]) -> Vec<&Directive> {
    all_actions(actions)
        .into_iter()
        .filter_map(|action| match &action.kind {
            ActionKind::Emit(directive) => Some(&**directive),
            _ => None,
        })
        .collect()
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
