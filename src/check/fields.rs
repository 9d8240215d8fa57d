//! Flow-level `requires` that no step asks for (`uncollected_required`, a
//! warning). A flow's `requires` are only pre-extracted from what the user
//! happens to say (LANGUAGE.md section 4); if no step of the flow collects
//! the field, nothing ever asks for it. Workflows are exempt: their
//! `requires` are the inputs a run is started with (section 8).
//!
//! The IR keeps the resolved field ids of `requires` but not where each
//! name was written, so the names' spans come from the AST.

use crate::diag::{Code, Diagnostic};
use crate::ir::{FieldId, Flow, Program};
use crate::source::Span;
use crate::syntax::ast;
use std::collections::{HashMap, HashSet};

pub(crate) fn check(ast: &ast::Program, program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    // IR flows keep the span of their declaration's name; a duplicate
    // declaration (already an error) has no IR flow and is skipped.
    let flows: HashMap<Span, &Flow> = program.flows.iter().map(|flow| (flow.span, flow)).collect();
    let fields: HashMap<&str, FieldId> = program
        .fields
        .iter()
        .enumerate()
        .map(|(index, field)| (field.name.as_str(), FieldId::from_index(index)))
        .collect();
    for flow_decl in &ast.flows {
        let Some(flow) = flows.get(&flow_decl.name.span) else {
            continue;
        };
        if flow.workflow || flow.incomplete {
            continue;
        }
        let collected: HashSet<FieldId> = flow.steps.iter().flat_map(|step| step.collect.iter().copied()).collect();
        for name in &flow_decl.requires {
            let Some(field) = fields.get(name.value.as_str()) else {
                continue;
            };
            if collected.contains(field) {
                continue;
            }
            diagnostics.push(
                Diagnostic::new(
                    Code::UncollectedRequired,
                    format!("the flow `{}` requires `{}`, but no step collects it", flow.name, name.value),
                )
                .at(name.span, "only pre-extracted: nothing asks for it")
                .with_help(format!(
                    "collect `{}` in a step of `{}`, or list it under `optional`",
                    name.value, flow.name
                )),
            );
        }
    }
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
