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
use crate::ir::successor;
use crate::ir::{FlowId, Program};
use crate::source::Span;
use std::collections::HashMap;

/// What this pass finds, with the facts its warning is written from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RoutingWarning {
    UnroutedFlow {
        flow: String,
        span: Span,
    },
    /// The step `step` of `flow` has the id of the flow declared at `shadowed`.
    ShadowedStep {
        step: String,
        flow: String,
        span: Span,
        shadowed: Span,
    },
}

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(RoutingWarning::into_diagnostic));
}

pub(crate) fn find(program: &Program) -> Vec<RoutingWarning> {
    let mut found = Vec::new();
    unrouted_flows(program, &mut found);
    shadowed_steps(program, &mut found);
    found
}

impl RoutingWarning {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            RoutingWarning::UnroutedFlow { flow, span } => Diagnostic::new(
                Code::UnroutedFlow,
                format!("the flow `{flow}` is never entered"),
            )
            .at(span, "no `when`, no `if`, not the default, and nothing jumps here")
            .with_help(
                "give it a `when` (or an `if`) so routing can pick it, or enter it from another flow with a `goto`",
            ),
            RoutingWarning::ShadowedStep { step, flow, span, shadowed } => {
                Diagnostic::new(Code::ShadowedStep, format!("the step `{step}` has the same id as a flow"))
                    .at(span, format!("in `{flow}`, a bare `{step}` names this step"))
                    .with_label(shadowed, format!("the flow `{step}` is declared here"))
                    .with_help(format!("rename the step; to enter the flow `{step}` from here, emit a `goto`"))
            }
        }
    }
}

fn unrouted_flows(program: &Program, found: &mut Vec<RoutingWarning>) {
    let mut targeted = vec![false; program.flows.len()];
    let mut mark = |from: Option<FlowId>, to: FlowId| {
        if from != Some(to)
            && let Some(flag) = targeted.get_mut(to.index())
        {
            *flag = true;
        }
    };
    walk::directives(program, |site, directive| {
        let target =
            directive.position.as_ref().and_then(|position| successor::flow_entered(site.flow(), position.into()));
        if let Some(target) = target {
            mark(site.flow(), target);
        }
    });
    for (index, flow) in program.flows.iter().enumerate() {
        if let Some(next) = successor::after_completion(flow, None) {
            mark(Some(FlowId::from_index(index)), next);
        }
    }
    for (flow, targeted) in program.flows.iter().zip(targeted) {
        let routed = !flow.when.is_empty() || !flow.guard.is_empty() || flow.default;
        if routed || targeted || flow.workflow {
            continue;
        }
        found.push(RoutingWarning::UnroutedFlow { flow: flow.name.clone(), span: flow.span });
    }
}

fn shadowed_steps(program: &Program, found: &mut Vec<RoutingWarning>) {
    let flows: HashMap<&str, &crate::ir::Flow> = program.flows.iter().map(|flow| (flow.name.as_str(), flow)).collect();
    for flow in &program.flows {
        for step in &flow.steps {
            let Some(shadowed) = flows.get(step.name.as_str()) else {
                continue;
            };
            found.push(RoutingWarning::ShadowedStep {
                step: step.name.clone(),
                flow: flow.name.clone(),
                span: step.span,
                shadowed: shadowed.span,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RoutingWarning, find};
    use crate::check::check_findings as check;
    use crate::check::tests::{at, compiled};

    #[test]
    fn the_warnings_hold_the_flow_and_step_names() {
        let (file, program) = compiled(
            r#"flow a { when "a"  step b { say "b" } }
            flow b { step s { say "s" } }"#,
        );
        assert_eq!(
            find(&program),
            [
                RoutingWarning::UnroutedFlow { flow: "b".to_string(), span: at(&file, "b", 2) },
                RoutingWarning::ShadowedStep {
                    step: "b".to_string(),
                    flow: "a".to_string(),
                    span: at(&file, "b", 0),
                    shadowed: at(&file, "b", 2),
                },
            ]
        );
    }

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
