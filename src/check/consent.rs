//! `kept_consent` (a warning): a flow that calls a tool carries a `bool` it
//! collects (its consent, such as `confirmed`) from one run to the next
//! with `keep`. A second run would then find the consent already given and
//! act without asking: a second booking made on the first booking's "yes".
//! By default a flow's collected fields are cleared when a new run starts,
//! so only `keep` can cause this.

use super::walk;
use crate::diag::{Code, Diagnostic};
use crate::ir::{ActionKind, Flow, Program, TypeKind};

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    for flow in &program.flows {
        if !calls_a_tool(flow) {
            continue;
        }
        for (field_id, span) in flow.keep.iter().zip(&flow.keep_spans) {
            let Some(field) = program.field(*field_id) else {
                continue;
            };
            let is_bool = matches!(field.ty.kind, TypeKind::Bool);
            let collected = flow.steps.iter().any(|step| step.collect.contains(field_id));
            if !is_bool || !collected {
                continue;
            }
            diagnostics.push(
                Diagnostic::new(
                    Code::KeptConsent,
                    format!(
                        "`{}` is kept from one run of `{}` to the next, and the flow calls a tool",
                        field.name, flow.name
                    ),
                )
                .at(*span, "a consent given in an earlier run would count again")
                .with_help(format!(
                    "remove `{}` from `keep`, so that each run of the flow asks for it again",
                    field.name
                )),
            );
        }
    }
}

/// Whether any step of the flow, or its hooks, calls a tool (in its
/// actions or by offering tools to the model).
fn calls_a_tool(flow: &Flow) -> bool {
    let calls = |actions: &[crate::ir::Action]| {
        walk::all_actions(actions).iter().any(|action| matches!(action.kind, ActionKind::Call(_)))
    };
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
    use crate::check::check_findings;

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
    fn keeping_a_non_bool_field_is_fine() {
        check_findings(&program("keep hotel"), &[]);
    }

    #[test]
    fn the_default_clears_the_consent() {
        check_findings(&program(""), &[]);
    }

    #[test]
    fn a_flow_without_tools_may_keep_its_bools() {
        let without_tool =
            program("keep confirmed").replace("call book(hotel) -> booking_id", "set booking_id = hotel");
        check_findings(&without_tool, &[]);
    }
}
