//! How flows are entered, and names that read two ways (both warnings).
//!
//! - `unrouted_flow`: a conversation flow with no `when`, no `if`, not the
//!   `default`, that no other flow or signal ever sends the conversation to
//!   (`goto`, `goto_step`, `complete.next`, a branch naming it): routing
//!   never picks it and nothing jumps to it (LANGUAGE.md section 3). A
//!   flow's jumps to itself do not count: they need it entered first.
//!   Workflows are exempt: `flowc run` starts them by name.
//! - `shadowed_step`: a step id equal to a flow id. In that flow a bare
//!   `then: name` means the step (section 4), which may not be what the
//!   author meant.

use super::walk;
use crate::diag::{Code, Diagnostic};
use crate::ir::{FlowId, Position, Program};
use std::collections::HashMap;

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    unrouted_flows(program, diagnostics);
    shadowed_steps(program, diagnostics);
}

fn unrouted_flows(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    let mut targeted = vec![false; program.flows.len()];
    let mut mark = |from: Option<FlowId>, to: FlowId| {
        if from != Some(to)
            && let Some(flag) = targeted.get_mut(to.index())
        {
            *flag = true;
        }
    };
    walk::directives(program, |site, directive| {
        let target = match &directive.position {
            Some(Position::Goto { flow, .. } | Position::GotoStep { flow, .. }) => Some(*flow),
            Some(Position::Complete { next }) => *next,
            _ => None,
        };
        if let Some(target) = target {
            mark(site.flow(), target);
        }
    });
    for (index, flow) in program.flows.iter().enumerate() {
        if let Some(next) = flow.complete_next {
            mark(Some(FlowId::from_index(index)), next);
        }
    }
    for (flow, targeted) in program.flows.iter().zip(targeted) {
        let routed = !flow.when.is_empty() || !flow.guard.is_empty() || flow.default;
        if routed || targeted || flow.workflow {
            continue;
        }
        diagnostics.push(
            Diagnostic::new(Code::UnroutedFlow, format!("the flow `{}` is never entered", flow.name))
                .at(flow.span, "no `when`, no `if`, not the default, and nothing jumps here")
                .with_help(
                    "give it a `when` (or an `if`) so routing can pick it, or enter it from another flow with a `goto`",
                ),
        );
    }
}

fn shadowed_steps(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    let flows: HashMap<&str, &crate::ir::Flow> = program.flows.iter().map(|flow| (flow.name.as_str(), flow)).collect();
    for flow in &program.flows {
        for step in &flow.steps {
            let Some(shadowed) = flows.get(step.name.as_str()) else {
                continue;
            };
            diagnostics.push(
                Diagnostic::new(Code::ShadowedStep, format!("the step `{}` has the same id as a flow", step.name))
                    .at(step.span, format!("in `{}`, a bare `{}` names this step", flow.name, step.name))
                    .with_label(shadowed.span, format!("the flow `{}` is declared here", shadowed.name))
                    .with_help(format!("rename the step; to enter the flow `{}` from here, emit a `goto`", step.name)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::check::check_findings as check;

    #[test]
    fn a_flow_nothing_can_enter_is_unrouted() {
        check(
            r#"flow a { when "a"  step s { say "a" } }
            schema { n: int }
            flow lonely { step s { collect n  emit goto lonely } }"#,
            &[("unrouted_flow", "lonely")],
        );
    }

    #[test]
    fn a_flow_entered_by_another_or_by_routing_is_routed() {
        check(
            r#"schema { n: int }
            signal help { when "help"  then helper }
            flow a { when "a"  complete next after  step s { say "a" } }
            flow guarded { if n > 1  step s { say "g" } }
            flow fallback { default  step s { say "f" } }
            flow helper { step s { say "h" } }
            flow after { step s { say "x" } }
            flow job { auto step s { set n = 1 } }"#,
            &[],
        );
    }

    #[test]
    fn a_step_named_like_a_flow_is_shadowed() {
        check(
            r#"flow a { when "a"  step b { say "b" } }
            flow b { when "b"  step s { say "s" } }"#,
            &[("shadowed_step", "b")],
        );
    }
}
