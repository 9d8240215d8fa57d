//! `kept_consent` (a warning): a flow that calls a tool can be entered again
//! with a `bool` it collects (its consent, such as `confirmed`) still set
//! from an earlier run, and act without asking: a second booking made on
//! the first booking's "yes". By default a flow's collected fields are
//! cleared when a new run starts, so two things cause this:
//!
//! - the flow lists the consent in `keep`;
//! - another flow (or a signal) jumps into it with `goto_step`, which is a
//!   jump into the middle of a run, not a new run, unless the jump clears
//!   the consent itself (`set confirmed = null`).
//!
//! `kept_uncollected` (a warning): `keep` names a field no step of the flow
//! collects. Only collected fields are cleared when a run starts, so such a
//! `keep` does nothing; it is most often a misspelt or stale name, and the
//! field the author meant to keep is cleared without a word.

use super::walk;
use crate::diag::{Code, Diagnostic, did_you_mean};
use crate::ir::successor::{self, Jump};
use crate::ir::{FieldId, Flow, Program, TypeKind};
use crate::source::Span;

/// What this pass finds, with the facts its warning is written from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ConsentWarning {
    /// `flow` keeps the consent `field` from one run to the next.
    Kept { flow: String, field: String, span: Span },
    /// A `goto_step` (at `span`) enters `flow` mid-run, where the consent
    /// `field` may still be set.
    JumpedInto { flow: String, field: String, span: Span },
    /// `flow` keeps `field`, which none of its steps collects; `collected`
    /// are the fields they do.
    KeptUncollected { flow: String, field: String, span: Span, collected: Vec<String> },
}

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(ConsentWarning::into_diagnostic));
}

pub(crate) fn find(program: &Program) -> Vec<ConsentWarning> {
    let mut found = Vec::new();
    kept(program, &mut found);
    kept_uncollected(program, &mut found);
    jumped_into(program, &mut found);
    found
}

impl ConsentWarning {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            ConsentWarning::Kept { flow, field, span } => Diagnostic::new(
                Code::KeptConsent,
                format!("`{field}` is kept from one run of `{flow}` to the next, and the flow calls a tool"),
            )
            .at(span, "a consent given in an earlier run would count again")
            .with_help(format!("remove `{field}` from `keep`, so that each run of the flow asks for it again")),
            ConsentWarning::JumpedInto { flow, field, span } => Diagnostic::new(
                Code::KeptConsent,
                format!("`goto_step` enters `{flow}` mid-run, where `{field}` from an earlier run may still be set"),
            )
            .at(span, "a jump into a flow is not a new run: nothing is cleared")
            .with_help(format!(
                "start a new run with `goto {flow}`, or clear the consent in the same directive: `set {field} = null`"
            )),
            ConsentWarning::KeptUncollected { flow, field, span, collected } => {
                let help = match did_you_mean(&field, collected.iter().map(String::as_str)) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("`keep` carries fields a step of `{flow}` collects; remove `{field}` from it"),
                };
                Diagnostic::new(
                    Code::KeptUncollected,
                    format!("`{field}` is kept, but no step of `{flow}` collects it"),
                )
                .at(span, "this `keep` has no effect")
                .with_help(help)
            }
        }
    }
}

fn kept_uncollected(program: &Program, found: &mut Vec<ConsentWarning>) {
    for flow in &program.flows {
        let collected: Vec<FieldId> = flow.steps.iter().flat_map(|step| step.collect.iter().copied()).collect();
        for (field_id, span) in flow.keep.iter().zip(&flow.keep_spans) {
            if collected.contains(field_id) {
                continue;
            }
            let Some(field) = program.field(*field_id) else {
                continue;
            };
            found.push(ConsentWarning::KeptUncollected {
                flow: flow.name.clone(),
                field: field.name.clone(),
                span: *span,
                collected: collected
                    .iter()
                    .filter_map(|id| program.field(*id))
                    .map(|field| field.name.clone())
                    .collect(),
            });
        }
    }
}

/// The bools a flow's steps collect, when the flow calls a tool.
fn consents(program: &Program, flow: &Flow) -> Vec<FieldId> {
    if !calls_a_tool(flow) {
        return Vec::new();
    }
    let mut fields: Vec<FieldId> = flow
        .steps
        .iter()
        .flat_map(|step| step.collect.iter().copied())
        .filter(|field| program.field(*field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool)))
        .collect();
    fields.sort_unstable();
    fields.dedup();
    fields
}

fn jumped_into(program: &Program, found: &mut Vec<ConsentWarning>) {
    walk::directives(program, |site, directive| {
        let Some(jump) = directive.position.as_ref().map(Jump::from) else {
            return;
        };
        // Entering another flow without starting a new run of it (a
        // `goto_step`) keeps the consents its earlier run collected.
        let Some(target) = successor::flow_entered(site.flow(), jump) else {
            return;
        };
        if successor::new_run(site.flow(), jump).is_some() {
            return;
        }
        let Some(flow) = program.flow(target) else {
            return;
        };
        let cleared = |field: &FieldId| directive.set.iter().any(|write| write.field == *field);
        for field in consents(program, flow).iter().filter(|field| !cleared(field)) {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            found.push(ConsentWarning::JumpedInto {
                flow: flow.name.clone(),
                field: declared.name.clone(),
                span: directive.span,
            });
        }
    });
}

fn kept(program: &Program, found: &mut Vec<ConsentWarning>) {
    for flow in &program.flows {
        let consents = consents(program, flow);
        for (field_id, span) in flow.keep.iter().zip(&flow.keep_spans) {
            let Some(field) = program.field(*field_id) else {
                continue;
            };
            if !consents.contains(field_id) {
                continue;
            }
            found.push(ConsentWarning::Kept { flow: flow.name.clone(), field: field.name.clone(), span: *span });
        }
    }
}

/// Whether any step of the flow, or its hooks, calls a tool (in its
/// actions or by offering tools to the model).
fn calls_a_tool(flow: &Flow) -> bool {
    let calls = walk::calls_a_tool;
    calls(&flow.on_enter)
        || calls(&flow.on_complete)
        || flow.steps.iter().any(|step| {
            !step.tools.is_empty()
                || calls(&step.actions)
                || calls(&step.on_enter)
                || calls(&step.prepare)
                || calls(&step.finalize)
        })
}

#[cfg(test)]
mod tests {
    use super::{ConsentWarning, find};
    use crate::check::check_findings;
    use crate::check::tests::{at, compiled};

    const PROGRAM: &str = r#"
schema {
  hotel: string
  confirmed: bool
  booking_id: string
}
tool book(hotel: string) -> { booking_id: string } { builtin echo }
flow booking {
  when "the user wants to book"
  KEEP
  step ask_hotel {
    prompt "Which hotel?"
    collect hotel
  }
  step confirm {
    prompt "Book {{hotel}}?"
    collect confirmed
    branch {
      if confirmed == true -> book
      else -> end_it
    }
  }
  auto step book {
    call book(hotel) -> booking_id
    next end
  }
  step end_it {
    say "Nothing booked."
  }
}
"#;

    fn program(keep: &str) -> String {
        PROGRAM.replace("KEEP", keep)
    }

    #[test]
    fn kept_consent_in_a_flow_that_calls_a_tool() {
        check_findings(&program("keep hotel, confirmed"), &[("kept_consent", "confirmed")]);
    }

    #[test]
    fn keeping_a_field_no_step_collects() {
        check_findings(&program("keep booking_id"), &[("kept_uncollected", "booking_id")]);
    }

    #[test]
    fn the_warnings_hold_the_flow_the_field_and_what_the_flow_collects() {
        let (file, program) = compiled(&program("keep confirmed, booking_id"));
        assert_eq!(
            find(&program),
            [
                ConsentWarning::Kept {
                    flow: "booking".to_string(),
                    field: "confirmed".to_string(),
                    span: at(&file, "confirmed", 1),
                },
                ConsentWarning::KeptUncollected {
                    flow: "booking".to_string(),
                    field: "booking_id".to_string(),
                    span: at(&file, "booking_id", 2),
                    collected: vec!["hotel".to_string(), "confirmed".to_string()],
                },
            ]
        );
    }

    #[test]
    fn keeping_a_non_bool_field_is_fine() {
        check_findings(&program("keep hotel"), &[]);
    }

    #[test]
    fn the_default_clears_the_consent() {
        check_findings(&program(""), &[]);
    }

    #[test]
    fn jumping_into_a_flow_that_collects_a_consent() {
        let jumping = format!(
            "{}\nflow other {{\n  when \"the user wants other\"\n  step go {{ say \"x\" }}\n  auto step jump {{ JUMP }}\n}}\n",
            program("")
        );
        check_findings(
            &jumping.replace("JUMP", "emit goto_step booking.confirm"),
            &[("kept_consent", "goto_step booking.confirm")],
        );
        check_findings(&jumping.replace("JUMP", "emit { goto_step booking.confirm set confirmed = null }"), &[]);
        check_findings(&jumping.replace("JUMP", "emit goto booking"), &[]);
    }

    #[test]
    fn a_flow_without_tools_may_keep_its_bools() {
        let without_tool =
            program("keep confirmed").replace("call book(hotel) -> booking_id", "set booking_id = hotel");
        check_findings(&without_tool, &[]);
    }
}
