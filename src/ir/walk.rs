//! Walking a step's nested parts without recursion: actions (a `for_each`
//! holds more actions) and the directives a step can emit, each with the
//! part it sits in. The successor rule needs every place a step can move
//! the conversation from, and the checker's passes need every directive;
//! they share these walkers so none of them misses a place.

use super::{Action, ActionKind, Directive, Step, Then};

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

/// Whether any action of `program` asks the model (`ask_model`): a flow's
/// `on_enter` and `on_complete`, a step's `do`, `on_enter`, `prepare` and
/// `finalize`, nested `for_each` bodies included.
pub(crate) fn asks_model(program: &super::Program) -> bool {
    let flows = program.flows.iter().flat_map(|flow| {
        let steps = flow.steps.iter().flat_map(|step| [&step.actions, &step.on_enter, &step.prepare, &step.finalize]);
        [&flow.on_enter, &flow.on_complete].into_iter().chain(steps)
    });
    flows.flat_map(|actions| all_actions(actions)).any(|action| matches!(action.kind, ActionKind::AskModel(_)))
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
    if let Some(super::Recovery::Directive(directive)) = &step.recovery {
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
