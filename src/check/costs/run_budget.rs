//! The `run_budget` warnings: a workflow run whose model steps can, at
//! worst, make more calls than `agent.limits.max_run_llm_calls` or send
//! prompts estimated over `max_run_tokens`, on the cost model of
//! `flowc check --costs` (`costs.rs`; each workflow step's own line comes
//! from `check/model_steps.rs`, counted alike).
//!
//! A run is taken once through the steps it can reach, each step's model
//! steps (in its actions: a workflow's hooks never run) counted with their
//! call, their repair and, with `tools`, their tool rounds, on every
//! attempt an `on_error retry` allows: those paths are bounded by the
//! program. A `for_each` runs its model steps once per item and a `goto`
//! back runs a step again, which nothing in the program bounds: a
//! `for_each` counts one item and a step is counted once, so the warning
//! is for a budget one pass through can already exceed, and its label
//! says when a model step sits in a `for_each`.

use super::{MAX_REPLY_ROUNDS, UNDERSTAND_WORST, ask_tokens};
use crate::diag::{Code, Diagnostic, Label};
use crate::ir::walk::all_actions;
use crate::ir::{ActionKind, Flow, FlowId, OnError, Program, successor};
use crate::source::Span;

pub(super) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    let limits = &program.agent.limits;
    if limits.max_run_llm_calls.is_none() && limits.max_run_tokens.is_none() {
        return;
    }
    for (index, flow) in program.flows.iter().enumerate().filter(|(_, flow)| flow.workflow) {
        let run = Run::of(program, FlowId::from_index(index), flow);
        if let Some(budget) = limits.max_run_llm_calls
            && let Some(diagnostic) = run.over(flow, budget, &CALLS)
        {
            diagnostics.push(diagnostic);
        }
        if let Some(budget) = limits.max_run_tokens
            && let Some(diagnostic) = run.over(flow, budget, &TOKENS)
        {
            diagnostics.push(diagnostic);
        }
    }
}

/// The model steps of one pass through a workflow's run.
struct Run {
    /// Each model step in step order: where it is written, its calls and
    /// its prompts' tokens at worst, every attempt included.
    each: Vec<ModelStep>,
    /// A model step sits in a `for_each`.
    in_loops: bool,
    /// A step with model steps may be retried.
    retried: bool,
}

struct ModelStep {
    span: Span,
    calls: u64,
    tokens: u64,
}

impl Run {
    fn of(program: &Program, flow_id: FlowId, flow: &Flow) -> Run {
        let mut run = Run { each: Vec::new(), in_loops: false, retried: false };
        let reached = successor::reachable(program, &[(flow_id, successor::ENTRY)]);
        for step in reached.iter().filter(|(flow, _)| *flow == flow_id).filter_map(|(_, step)| flow.step(*step)) {
            let attempts = match step.on_error {
                OnError::Retry { times, .. } => u64::from(times).saturating_add(1),
                _ => 1,
            };
            let looped: Vec<&crate::ir::Action> = all_actions(&step.actions)
                .into_iter()
                .filter_map(|action| match &action.kind {
                    ActionKind::ForEach(each) => Some(each),
                    _ => None,
                })
                .flat_map(|each| all_actions(&each.actions))
                .collect();
            for action in all_actions(&step.actions) {
                let ActionKind::AskModel(ask) = &action.kind else {
                    continue;
                };
                let rounds =
                    if ask.tools.is_empty() { 0 } else { program.agent.limits.max_tool_rounds.min(MAX_REPLY_ROUNDS) };
                let calls = u64::from(UNDERSTAND_WORST.saturating_add(rounds));
                let tokens = ask_tokens(program, ask).saturating_mul(u64::from(UNDERSTAND_WORST));
                run.each.push(ModelStep {
                    span: action.span,
                    calls: calls.saturating_mul(attempts),
                    tokens: tokens.saturating_mul(attempts),
                });
                run.in_loops |= looped.iter().any(|inner| std::ptr::eq(*inner, action));
                run.retried |= attempts > 1;
            }
        }
        run
    }

    /// The warning when the worst case in step order goes over `budget`:
    /// at the model step where it does, the run's workflow named.
    fn over(&self, flow: &Flow, budget: u64, words: &Budget) -> Option<Diagnostic> {
        let count = |step: &ModelStep| if words.key == TOKENS.key { step.tokens } else { step.calls };
        let total: u64 = self.each.iter().map(count).fold(0, u64::saturating_add);
        if total <= budget {
            return None;
        }
        let mut spent = 0u64;
        let (span, reached) = self.each.iter().find_map(|step| {
            spent = spent.saturating_add(count(step));
            (spent > budget).then_some((step.span, spent))
        })?;
        let Budget { key, unit, about, counted } = words;
        let mut diagnostic = Diagnostic::new(
            Code::RunBudget,
            format!("a run of `{}` can spend {about}{total} {unit}, over `{key}` ({budget})", flow.name),
        );
        diagnostic.labels.push(Label { span, text: format!("{about}{reached} {unit} by this model step at worst") });
        let mut notes = vec![format!("{} model steps on one pass through ({counted})", self.each.len())];
        if self.retried {
            notes.push("on every attempt `on_error retry` allows".to_string());
        }
        if self.in_loops {
            notes.push("a model step in a `for_each` counted for one item: it runs once per item".to_string());
        }
        diagnostic.labels.push(Label { span: flow.span, text: notes.join("; ") });
        diagnostic.help = Some(format!(
            "raise `{key}` in `agent.limits`, or ask the model less in one run; `flowc check --costs` shows each \
             step's model calls"
        ));
        Some(diagnostic)
    }
}

/// The words of one budget's warning.
struct Budget {
    key: &'static str,
    /// What is counted, after a number.
    unit: &'static str,
    /// Before the number: an exact bound, or an estimate.
    about: &'static str,
    /// How a model step counts.
    counted: &'static str,
}

const CALLS: Budget = Budget {
    key: "max_run_llm_calls",
    unit: "model calls",
    about: "up to ",
    counted: "each its call, its repair and its tool rounds",
};

const TOKENS: Budget = Budget {
    key: "max_run_tokens",
    unit: "prompt tokens",
    about: "about ",
    counted: "each its prompt, sent again by its repair; the answers come on top",
};
