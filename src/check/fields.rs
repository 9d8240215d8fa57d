//! Flow-level `requires` that no step asks for (`uncollected_required`, a
//! warning). A flow's `requires` are only pre-extracted from what the user
//! happens to say (LANGUAGE.md section 4); if no step of the flow collects
//! the field, nothing ever asks for it. Workflows are exempt: their
//! `requires` are the inputs a run is started with (section 8).
//!
//! The IR keeps where each of a flow's `requires` is named
//! ([`Flow::requires_spans`]), and the warning points there.

use crate::diag::{Code, Diagnostic};
use crate::ir::{FieldId, Flow, Program};
use std::collections::HashSet;

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    for flow in &program.flows {
        if flow.workflow || flow.incomplete {
            continue;
        }
        let collected: HashSet<FieldId> = flow.steps.iter().flat_map(|step| step.collect.iter().copied()).collect();
        for (field, span) in flow.requires.iter().zip(&flow.requires_spans) {
            if collected.contains(field) {
                continue;
            }
            let Some(name) = program.field(*field).map(|field| field.name.as_str()) else {
                continue;
            };
            diagnostics.push(uncollected(flow, name, *span));
        }
    }
}

fn uncollected(flow: &Flow, name: &str, span: crate::source::Span) -> Diagnostic {
    Diagnostic::new(
        Code::UncollectedRequired,
        format!("the flow `{}` requires `{name}`, but no step collects it", flow.name),
    )
    .at(span, "only pre-extracted: nothing asks for it")
    .with_help(format!("collect `{name}` in a step of `{}`, or list it under `optional`", flow.name))
}

#[cfg(test)]
mod tests {
    use crate::check::check_findings as check;

    #[test]
    fn a_required_field_no_step_collects_is_reported() {
        check(
            r#"schema { a: string  b: string }
            flow f { when "w"  requires a, b  optional b
                step s { collect a } }
            flow job { requires b
                auto step s { set a = b } }"#,
            &[("uncollected_required", "b")],
        );
    }
}
