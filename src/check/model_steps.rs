//! `invalid_step` for a model step (`ask_model`) where none can run: model
//! steps run in a workflow's step actions (a `for_each` in them included)
//! and in a conversation flow's step actions and hooks, where the turn
//! lends them its model; a workflow's hooks never run (a run executes its
//! steps' actions only), so a model step there would be silently dead.
//! Found here, before anything runs, rather than as a failed step. A model
//! step's `tools` are fine wherever it runs (`runtime::model_step` runs
//! their loop).

use super::walk::all_actions;
use crate::diag::{Code, Diagnostic};
use crate::ir::{Action, ActionKind, OnError, Program};
use crate::source::Span;
use serde::Serialize;

/// The model calls of one workflow step's model steps, for `flowc check
/// --costs`: each `ask_model` is one call, and one more when its answer
/// is repaired; one with `tools` may first take `agent.limits.
/// max_tool_rounds` tool rounds (a call each); a `retry` runs the step
/// again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepModelCalls {
    /// The workflow.
    pub flow: String,
    /// The step.
    pub step: String,
    /// The fewest calls: its model steps outside loops, each answered at once.
    pub best: u32,
    /// The most, besides those in loops: each repaired, on every attempt.
    pub worst: u32,
    /// The most per item of its loops (a model step in a `for_each`), on
    /// every attempt; 0 when no model step is in a loop.
    pub worst_per_item: u32,
}

/// The model calls of every workflow step that has model steps, in flow
/// and step order.
pub fn workflow_model_calls(program: &Program) -> Vec<StepModelCalls> {
    let mut rows = Vec::new();
    for flow in program.flows.iter().filter(|flow| flow.steps.iter().all(|step| step.auto)) {
        for step in &flow.steps {
            let (mut once, mut per_item) = (0u32, 0u32);
            let (mut worst_once, mut worst_item) = (0u32, 0u32);
            let mut lists: Vec<(&[Action], bool)> = vec![(&step.actions, false)];
            while let Some((actions, in_loop)) = lists.pop() {
                for action in actions {
                    let worst = |ask: &crate::ir::AskModel| {
                        let rounds = if ask.tools.is_empty() { 0 } else { tool_rounds(program) };
                        rounds.saturating_add(2)
                    };
                    match &action.kind {
                        ActionKind::AskModel(ask) if in_loop => {
                            per_item += 1;
                            worst_item = worst_item.saturating_add(worst(ask));
                        }
                        ActionKind::AskModel(ask) => {
                            once += 1;
                            worst_once = worst_once.saturating_add(worst(ask));
                        }
                        ActionKind::ForEach(for_each) => lists.push((&for_each.actions, true)),
                        _ => {}
                    }
                }
            }
            if once + per_item == 0 {
                continue;
            }
            let attempts = match step.on_error {
                OnError::Retry { times, .. } => times.saturating_add(1),
                _ => 1,
            };
            rows.push(StepModelCalls {
                flow: flow.name.clone(),
                step: step.name.clone(),
                best: once,
                worst: worst_once.saturating_mul(attempts),
                worst_per_item: worst_item.saturating_mul(attempts),
            });
        }
    }
    rows
}

/// The tool rounds a model step with `tools` may take at most: the reply's
/// limit, under the provider loop's safety net.
fn tool_rounds(program: &Program) -> u32 {
    let net = u32::try_from(crate::llm::rounds::MAX_ROUNDS).unwrap_or(u32::MAX);
    program.agent.limits.max_tool_rounds.min(net)
}

/// One misplaced model step: where it is and why it cannot run there.
struct Misplaced {
    span: Span,
    field: String,
    place: String,
    help: &'static str,
}

const WHERE: &str = "model steps run in a workflow step's actions, and in a conversation step's actions and hooks";

/// Adds an `invalid_step` per `ask_model` that cannot run where it is.
pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(|misplaced| {
        Diagnostic::new(Code::InvalidStep, format!("`ask_model {}` cannot run {}", misplaced.field, misplaced.place))
            .at(misplaced.span, "a model step")
            .with_help(misplaced.help)
    }));
}

fn find(program: &Program) -> Vec<Misplaced> {
    let mut found = Vec::new();
    let mut note = |actions: &[Action], place: &str| {
        for action in all_actions(actions) {
            if let ActionKind::AskModel(ask) = &action.kind {
                let field = program.field(ask.field).map_or_else(String::new, |field| field.name.clone());
                found.push(Misplaced { span: action.span, field, place: place.to_string(), help: WHERE });
            }
        }
    };
    for flow in program.flows.iter().filter(|flow| flow.steps.iter().all(|step| step.auto)) {
        let hook =
            format!("in a hook of the workflow `{}`: a workflow run runs its steps' actions, not hooks", flow.name);
        note(&flow.on_enter, &hook);
        note(&flow.on_complete, &hook);
        for step in &flow.steps {
            note(&step.on_enter, &hook);
            note(&step.prepare, &hook);
            note(&step.finalize, &hook);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check_findings;

    #[test]
    fn a_workflow_steps_model_calls_count_repairs_retries_and_loop_items() {
        let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/flows/outreach.flow")).unwrap();
        let program = crate::pipeline::compile(&crate::source::SourceFile::new("outreach.flow", source)).ir;
        let rows: Vec<(String, u32, u32, u32)> = workflow_model_calls(&program)
            .into_iter()
            .map(|row| (row.step, row.best, row.worst, row.worst_per_item))
            .collect();
        // The drafts are in a loop retried twice: 2 calls an item, 3 attempts.
        let expected = [("choose_tone", 1, 2, 0), ("draft_and_send", 0, 0, 6), ("summarise", 1, 2, 0)];
        let expected: Vec<(String, u32, u32, u32)> =
            expected.iter().map(|(step, best, worst, item)| (step.to_string(), *best, *worst, *item)).collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn model_steps_run_in_step_actions_and_conversation_hooks_not_workflow_hooks() {
        check_findings(
            "schema { name: string\n greeting: string }\n\
             flow w \"W\" {\n  requires name\n  auto step s {\n    for n in [name] { ask_model greeting: \"Greet {{n}}\" }\n  }\n}\n",
            &[],
        );
        check_findings(
            "schema { name: string\n greeting: string }\n\
             flow chat {\n  when \"the user says hello\"\n  step ask { collect name }\n  \
             auto step greet {\n    ask_model greeting: \"Greet {{name}}\"\n    on_enter { ask_model greeting: \"Hi\" }\n  }\n}\n",
            &[],
        );
        check_findings(
            "schema { name: string\n greeting: string }\n\
             flow w \"W\" {\n  auto step s {\n    set name = \"Ann\"\n    on_enter { ask_model greeting: \"Hi\" }\n  }\n}\n",
            &[("invalid_step", "ask_model greeting: \"Hi\"")],
        );
        check_findings(
            "schema { name: string\n greeting: string }\ntool clock() -> { now: datetime } { builtin now }\n\
             flow w \"W\" {\n  requires name\n  auto step s { ask_model greeting: \"Hi\" tools [clock] }\n}\n",
            &[],
        );
    }
}
