//! `invalid_step` for a model step (`ask_model`) where none can run: model
//! steps run in a workflow's step actions (a `for_each` in them included),
//! where the run holds the model; a conversation flow's steps and hooks,
//! and any flow's hooks, run inside a turn, which does not give actions the
//! model. Found here, before anything runs, rather than as a failed step.
//! Also `invalid_step`: a model step's `tools`, which no provider offers
//! the model inside a model step yet: refused rather than ignored.

use super::walk::all_actions;
use crate::diag::{Code, Diagnostic};
use crate::ir::{Action, ActionKind, Program};
use crate::source::Span;

/// One misplaced model step: where it is and why it cannot run there.
struct Misplaced {
    span: Span,
    field: String,
    place: String,
}

/// Adds an `invalid_step` per `ask_model` that cannot run where it is.
pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(|misplaced| {
        Diagnostic::new(Code::InvalidStep, format!("`ask_model {}` cannot run {}", misplaced.field, misplaced.place))
            .at(misplaced.span, "a model step")
            .with_help("model steps run in a workflow's steps (a flow whose steps are all `auto`), in their actions")
    }));
}

fn find(program: &Program) -> Vec<Misplaced> {
    let mut found = Vec::new();
    for flow in &program.flows {
        for step in &flow.steps {
            for action in all_actions(&step.actions) {
                if let ActionKind::AskModel(ask) = &action.kind
                    && !ask.tools.is_empty()
                {
                    let field = program.field(ask.field).map_or_else(String::new, |field| field.name.clone());
                    let place =
                        "with `tools` yet: no provider lets the model call tools inside a model step".to_string();
                    found.push(Misplaced { span: action.span, field, place });
                }
            }
        }
    }
    let mut note = |actions: &[Action], place: &str| {
        for action in all_actions(actions) {
            if let ActionKind::AskModel(ask) = &action.kind {
                let field = program.field(ask.field).map_or_else(String::new, |field| field.name.clone());
                found.push(Misplaced { span: action.span, field, place: place.to_string() });
            }
        }
    };
    for flow in &program.flows {
        let workflow = flow.steps.iter().all(|step| step.auto);
        let hook = format!("in a hook of the flow `{}`", flow.name);
        note(&flow.on_enter, &hook);
        note(&flow.on_complete, &hook);
        for step in &flow.steps {
            let hook = format!("in a hook of the step `{}`", step.name);
            note(&step.on_enter, &hook);
            note(&step.prepare, &hook);
            note(&step.finalize, &hook);
            if !workflow {
                note(&step.actions, &format!("in `{}`, a conversation flow", flow.name));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use crate::check::check_findings;

    #[test]
    fn model_steps_run_only_in_a_workflows_step_actions() {
        check_findings(
            "schema { name: string\n greeting: string }\n\
             flow w \"W\" {\n  requires name\n  auto step s {\n    for n in [name] { ask_model greeting: \"Greet {{n}}\" }\n  }\n}\n",
            &[],
        );
        check_findings(
            "schema { name: string\n greeting: string }\n\
             flow chat {\n  when \"the user says hello\"\n  step ask { collect name }\n  \
             auto step greet { ask_model greeting: \"Greet {{name}}\" }\n}\n",
            &[("invalid_step", "ask_model greeting: \"Greet {{name}}\"")],
        );
        check_findings(
            "schema { name: string\n greeting: string }\n\
             flow w \"W\" {\n  auto step s {\n    set name = \"Ann\"\n    on_enter { ask_model greeting: \"Hi\" }\n  }\n}\n",
            &[("invalid_step", "ask_model greeting: \"Hi\"")],
        );
        check_findings(
            "schema { name: string\n greeting: string }\ntool clock() -> { now: datetime } { builtin now }\n\
             flow w \"W\" {\n  requires name\n  auto step s { ask_model greeting: \"Hi\" tools [clock] }\n}\n",
            &[("invalid_step", "ask_model greeting: \"Hi\" tools [clock]")],
        );
    }
}
