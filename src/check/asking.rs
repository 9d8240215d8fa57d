//! What a conversation asks, and what one answer can answer (warnings).
//!
//! - `shared_confirmation`: one turn can go from a step that collects a
//!   confirmation (a `bool`) to another step that collects the same field.
//!   The runtime binds a confirmation to the step that asked it, so the
//!   second step asks its own question; but one field for two consents
//!   ("Put 2 mugs in your cart?", "Charge your card?") makes traces and
//!   data unable to tell them apart, and is most often a copied step.
//! - `unasked_required`: a conversation step `requires` a field that no
//!   step of its flow collects and that the flow does not require either:
//!   only a message that happens to mention it can fill it, and until one
//!   does the step asks its own question with the value missing ("Shall I
//!   order a large pizza … to ?").
//! - `free_text_list`: a flow pre-extracts (`requires`/`optional`) a list
//!   of free-text strings. Any answer with commas reads as such a list:
//!   "12 Baker Street, London", the answer to the address, would also be
//!   two toppings.

use super::flowgraph::To;
use super::reachability::Analysis;
use crate::diag::{Code, Diagnostic};
use crate::ir::successor;
use crate::ir::{FieldId, FlowId, Program, TypeKind};
use crate::source::Span;
use std::collections::{BTreeSet, VecDeque};

/// What this pass finds, with the facts its warnings are written from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AskingWarning {
    /// A turn can go from the step `from` (at `span`) to the step `to` (at
    /// `to_span`), both collecting the confirmation `field`.
    SharedConfirmation { field: String, from: String, to: String, span: Span, to_span: Span },
    /// The step `step` of `flow` requires `field`, which no step collects.
    UnaskedRequired { flow: String, step: String, field: String, span: Span },
    /// `flow` pre-extracts `field`, a list of free-text strings.
    FreeTextList { flow: String, field: String, span: Span },
}

pub(crate) fn check(program: &Program, analysis: &Analysis, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program, analysis).into_iter().map(AskingWarning::into_diagnostic));
}

pub(crate) fn find(program: &Program, analysis: &Analysis) -> Vec<AskingWarning> {
    let mut found = Vec::new();
    shared_confirmations(program, analysis, &mut found);
    unasked_required(program, &mut found);
    free_text_lists(program, &mut found);
    found
}

fn is_bool(program: &Program, field: FieldId) -> bool {
    program.field(field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool))
}

fn field_name(program: &Program, field: FieldId) -> String {
    program.field(field).map(|declared| declared.name.clone()).unwrap_or_default()
}

/// From each conversation step that collects a confirmation, walks what one
/// turn can run next without stopping to ask (auto steps, steps that
/// collect nothing, passing over, completion and jumps into other flows)
/// and reports the first step that collects the same confirmation.
fn shared_confirmations(program: &Program, analysis: &Analysis, found: &mut Vec<AskingWarning>) {
    for (flow_index, flow) in program.flows.iter().enumerate() {
        for (step_index, step) in flow.steps.iter().enumerate() {
            if step.auto {
                continue;
            }
            for field in step.collect.iter().copied().filter(|field| is_bool(program, *field)) {
                let Some((to_flow, to_step)) = next_asking(program, analysis, (flow_index, step_index), field) else {
                    continue;
                };
                let Some(other) = program.flows.get(to_flow).and_then(|flow| flow.steps.get(to_step)) else {
                    continue;
                };
                found.push(AskingWarning::SharedConfirmation {
                    field: field_name(program, field),
                    from: step.name.clone(),
                    to: other.name.clone(),
                    span: step.span,
                    to_span: other.span,
                });
            }
        }
    }
}

/// The first step (flow index, step index) collecting `field` that a turn
/// can reach from `start` without another step asking first.
fn next_asking(
    program: &Program,
    analysis: &Analysis,
    start: (usize, usize),
    field: FieldId,
) -> Option<(usize, usize)> {
    let mut seen: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut queue: VecDeque<(usize, usize)> = VecDeque::from([start]);
    let mut first = true;
    while let Some((flow_index, node)) = queue.pop_front() {
        let graph = analysis.graphs.get(flow_index)?;
        let flow = program.flows.get(flow_index)?;
        if !first {
            let (step_index, arrival) = graph.step_of(node);
            if !arrival && let Some(step) = flow.steps.get(step_index) {
                if step.collect.contains(&field) && (flow_index, step_index) != start {
                    return Some((flow_index, step_index));
                }
                if !step.auto && !step.collect.is_empty() {
                    continue;
                }
            }
        }
        first = false;
        for edge in graph.live_edges(node) {
            let next = match edge.to {
                To::Node(next) => Some((flow_index, next)),
                To::Enter(flow, step) => entered(analysis, flow, step.index()),
                To::Complete { next } => {
                    successor::after_completion(flow, next).and_then(|next| entered(analysis, next, 0))
                }
            };
            if let Some(next) = next
                && seen.insert(next)
            {
                queue.push_back(next);
            }
        }
    }
    None
}

/// The node a flow is entered at: its first step arrives in list order.
fn entered(analysis: &Analysis, flow: FlowId, step: usize) -> Option<(usize, usize)> {
    let graph = analysis.graphs.get(flow.index())?;
    match graph.listed(step) {
        To::Node(node) if step == 0 => Some((flow.index(), node)),
        _ => Some((flow.index(), step)),
    }
}

fn unasked_required(program: &Program, found: &mut Vec<AskingWarning>) {
    for flow in program.flows.iter().filter(|flow| !flow.workflow && !flow.incomplete) {
        let collected: BTreeSet<FieldId> = flow.steps.iter().flat_map(|step| step.collect.iter().copied()).collect();
        for step in flow.steps.iter().filter(|step| !step.auto) {
            for field in &step.requires {
                if collected.contains(field) || flow.requires.contains(field) {
                    continue;
                }
                found.push(AskingWarning::UnaskedRequired {
                    flow: flow.name.clone(),
                    step: step.name.clone(),
                    field: field_name(program, *field),
                    span: step.span,
                });
            }
        }
    }
}

fn free_text_lists(program: &Program, found: &mut Vec<AskingWarning>) {
    for flow in program.flows.iter().filter(|flow| !flow.workflow && !flow.incomplete) {
        for field in flow.requires.iter().chain(&flow.optional) {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            let TypeKind::List { items } = &declared.ty.kind else {
                continue;
            };
            let free_text = matches!(items.kind, TypeKind::String) && items.examples.is_empty();
            if free_text {
                found.push(AskingWarning::FreeTextList {
                    flow: flow.name.clone(),
                    field: declared.name.clone(),
                    span: declared.span,
                });
            }
        }
    }
}

impl AskingWarning {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            AskingWarning::SharedConfirmation { field, from, to, span, to_span } => Diagnostic::new(
                Code::SharedConfirmation,
                format!("one turn can go from `{from}` to `{to}`, and both ask to confirm `{field}`"),
            )
            .at(span, format!("`{from}` asks to confirm `{field}` here"))
            .with_label(to_span, format!("`{to}` asks to confirm `{field}` again"))
            .with_help(format!(
                "give `{to}` a confirmation field of its own, so each consent is recorded apart (a yes to `{from}` never answers `{to}` either way)"
            )),
            AskingWarning::UnaskedRequired { flow, step, field, span } => Diagnostic::new(
                Code::UnaskedRequired,
                format!("the step `{step}` requires `{field}`, but no step of `{flow}` collects it"),
            )
            .at(span, format!("this step asks its own question while `{field}` is unset"))
            .with_help(format!("collect `{field}` in an earlier step of `{flow}`, or list it in the flow's `requires`")),
            AskingWarning::FreeTextList { flow, field, span } => Diagnostic::new(
                Code::FreeTextList,
                format!("`{field}`, a list of free text, is read from every message of `{flow}`"),
            )
            .at(span, "any answer with commas or \"and\" reads as such a list")
            .with_help(format!(
                "collect `{field}` in a step that asks for it and drop it from the flow's `requires`/`optional`, or make its items an enum or give them examples"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::check::check_findings as check;

    #[test]
    fn a_yes_that_could_run_on_into_another_confirmation_of_its_field() {
        check(
            r#"schema { n: int  confirmed: bool }
            flow cart { when "mugs"
                step ask { collect n }
                step confirm_cart { collect confirmed
                    branch { if confirmed == true -> { goto pay }  else -> dropped } }
                step dropped { say "no" } }
            flow pay { requires n
                step confirm_charge { collect confirmed
                    branch { if confirmed == true -> charged  else -> kept } }
                step charged { say "charged" }
                step kept { say "kept" } }"#,
            &[("shared_confirmation", "confirm_cart"), ("uncollected_required", "n")],
        );
    }

    #[test]
    fn a_step_that_asks_in_between_ends_the_turn() {
        check(
            r#"schema { size: string  confirmed: bool }
            flow order { when "pizza"
                step ask_size { collect size }
                step confirm { collect confirmed
                    branch { if confirmed == true -> done  else -> { reset } } }
                step done { say "ordered" } }"#,
            &[],
        );
    }

    #[test]
    fn a_required_field_nothing_asks_for_and_a_free_text_list() {
        check(
            r#"schema { size: string  address: string  toppings: list(string) }
            flow order { when "pizza"  optional address, toppings
                step ask_size { collect size }
                step confirm { requires size, address  prompt "Order a {{size}} pizza to {{address}}?" } }"#,
            &[("free_text_list", "toppings"), ("unasked_required", "confirm")],
        );
    }
}
