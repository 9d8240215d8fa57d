//! The `run_budget` warnings: a workflow run whose model steps can, at
//! worst, make more calls than `agent.limits.max_run_llm_calls` or send
//! prompts estimated over `max_run_tokens`, on the cost model of
//! `flowc check --costs` (`costs.rs`).
//!
//! A run is taken once through: each model step it can reach counted once
//! (its call, its repair and, with `tools`, its tool rounds), as on a path
//! that visits each step once. A path round a loop (a `goto` back, a
//! `for_each` over many items) has no bound the program states, so it is
//! not what is warned about: the check warns where one pass through can
//! already exceed the budget, and says so when a model step sits in a
//! `for_each` (it runs once per item, and the budget stops the run there).

use super::{ModelSteps, model_steps};
use crate::diag::{Code, Diagnostic, Label};
use crate::ir::successor;
use crate::ir::{FlowId, Program};
use crate::source::Span;

pub(super) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    let limits = &program.agent.limits;
    if limits.max_run_llm_calls.is_none() && limits.max_run_tokens.is_none() {
        return;
    }
    for (index, flow) in program.flows.iter().enumerate().filter(|(_, flow)| flow.workflow) {
        let reached = successor::reachable(program, &[(FlowId::from_index(index), successor::ENTRY)]);
        let found = model_steps(program, &reached);
        let each_calls: Vec<(Span, u64)> =
            found.each.iter().map(|(span, calls, _)| (*span, u64::from(*calls))).collect();
        let each_tokens: Vec<(Span, u64)> = found.each.iter().map(|(span, _, tokens)| (*span, *tokens)).collect();
        if let Some(budget) = limits.max_run_llm_calls
            && let Some(diagnostic) = over(&flow.name, flow.span, &found, &each_calls, budget, &CALLS)
        {
            diagnostics.push(diagnostic);
        }
        if let Some(budget) = limits.max_run_tokens
            && let Some(diagnostic) = over(&flow.name, flow.span, &found, &each_tokens, budget, &TOKENS)
        {
            diagnostics.push(diagnostic);
        }
    }
}

/// The words of one budget's warning.
struct Budget {
    key: &'static str,
    /// What is counted, after a number: "model calls".
    unit: &'static str,
    /// How a model step counts.
    each: &'static str,
}

const CALLS: Budget = Budget {
    key: "max_run_llm_calls",
    unit: "model calls",
    each: "each model step: its call, its repair and its tool rounds",
};

const TOKENS: Budget = Budget {
    key: "max_run_tokens",
    unit: "prompt tokens",
    each: "each model step's prompt, sent again by its repair; the answers come on top",
};

/// The warning when the model steps' worst case in step order goes over
/// `budget`: at the model step where it does, the run's workflow named.
fn over(
    flow: &str,
    flow_span: Span,
    found: &ModelSteps,
    each: &[(Span, u64)],
    budget: u64,
    words: &Budget,
) -> Option<Diagnostic> {
    let total: u64 = each.iter().map(|(_, count)| count).sum();
    if total <= budget {
        return None;
    }
    let mut spent = 0u64;
    let (span, reached) = each.iter().find_map(|(span, count)| {
        spent += count;
        (spent > budget).then_some((*span, spent))
    })?;
    let Budget { key, unit, each: counted } = words;
    let about = if *key == TOKENS.key { "about " } else { "up to " };
    let mut diagnostic = Diagnostic::new(
        Code::RunBudget,
        format!("a run of `{flow}` can spend {about}{total} {unit}, over `{key}` ({budget})"),
    );
    diagnostic.labels.push(Label { span, text: format!("{about}{reached} {unit} by this model step at worst") });
    let looped = if found.in_loops { "; a model step in a `for_each` runs once per item, counted once" } else { "" };
    diagnostic.labels.push(Label {
        span: flow_span,
        text: format!("{} model steps on one pass through ({counted}){looped}", found.count),
    });
    diagnostic.help = Some(format!(
        "raise `{key}` in `agent.limits`, or ask the model less in one run; `flowc check --costs` shows the run's estimate"
    ));
    Some(diagnostic)
}
