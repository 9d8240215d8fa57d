//! Flow-level `requires` that no step asks for (`uncollected_required`, a
//! warning). A flow's `requires` are only pre-extracted from what the user
//! happens to say (LANGUAGE.md section 4); if no step of the flow collects
//! the field, nothing ever asks for it. Workflows are exempt: their
//! `requires` are the inputs a run is started with (section 8).
//!
//! The IR keeps where each of a flow's `requires` is named
//! ([`Flow::requires_spans`]), and the warning points there.

use crate::diag::{Code, Diagnostic};
use crate::ir::{FieldId, Program};
use crate::source::Span;
use std::collections::HashSet;

/// A flow's `requires` that no step of it collects: the facts of one
/// `uncollected_required` warning.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UncollectedRequired {
    pub flow: String,
    pub field: String,
    /// Where the flow's `requires` names the field.
    pub span: Span,
}

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(UncollectedRequired::into_diagnostic));
}

pub(crate) fn find(program: &Program) -> Vec<UncollectedRequired> {
    let mut found = Vec::new();
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
            found.push(UncollectedRequired { flow: flow.name.clone(), field: name.to_string(), span: *span });
        }
    }
    found
}

impl UncollectedRequired {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        let UncollectedRequired { flow, field, span } = self;
        Diagnostic::new(
            Code::UncollectedRequired,
            format!("the flow `{flow}` requires `{field}`, but no step collects it"),
        )
        .at(span, "only pre-extracted: nothing asks for it")
        .with_help(format!("collect `{field}` in a step of `{flow}`, or list it under `optional`"))
    }
}

#[cfg(test)]
mod tests {
    use super::{UncollectedRequired, find};
    use crate::check::check_findings as check;
    use crate::check::tests::{at, compiled};

    #[test]
    fn the_warning_holds_the_flow_the_field_and_where_it_is_required() {
        let (file, program) = compiled(
            r#"schema { a: string  b: string }
            flow f { when "w"  requires a, b
                step s { collect a } }"#,
        );
        assert_eq!(
            find(&program),
            [UncollectedRequired { flow: "f".to_string(), field: "b".to_string(), span: at(&file, "b", 1) }]
        );
    }

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
