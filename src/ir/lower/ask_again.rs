//! `ask_again S`: a `goto_step S` that first clears what `S` collects, and
//! the confirmations that showed one of those values, so `S` asks afresh
//! and the new value is confirmed again. Spelled out once the whole
//! program is lowered (a step may be named before it is lowered) as the
//! writes and position every other part of flowc already knows: the
//! runtime, the checker and the graph need nothing new; the directive
//! keeps a mark so the IR and the picture still name it.

use super::*;
use crate::expr::{ExprKind, Literal};

/// What asking step `step` of `flow` again clears: the fields it collects,
/// then the `bool`s collected by the flow's steps whose confirmation
/// ([`Step::confirms`]) showed one of them, each once, in step order.
pub(crate) fn cleared(program: &Program, flow: FlowId, step: StepId) -> Vec<FieldId> {
    let Some(declared) = program.flow(flow) else {
        return Vec::new();
    };
    let Some(asked) = declared.step(step) else {
        return Vec::new();
    };
    let mut fields = asked.collect.clone();
    for confirming in &declared.steps {
        let shown = confirming.confirms(program);
        if !shown.iter().any(|field| asked.collect.contains(field)) {
            continue;
        }
        let bools =
            confirming.collect.iter().copied().filter(|field| {
                program.field(*field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool))
            });
        for field in bools {
            if !fields.contains(&field) {
                fields.push(field);
            }
        }
    }
    fields
}

impl Lowerer {
    /// Gives every `ask_again` directive its clearing writes, before its
    /// own `set` (which may give a cleared field a value of its own).
    pub(super) fn spell_out_ask_again(&mut self, program: &mut Program) {
        let mut plans: Vec<(FlowId, StepId, Vec<FieldId>)> = Vec::new();
        let mut empty: Vec<(String, Span)> = Vec::new();
        let mut targets = Vec::new();
        directives_mut(program, &mut |directive| {
            if let (true, Some(Position::GotoStep { flow, step })) = (directive.ask_again, &directive.position) {
                targets.push((*flow, *step));
            }
        });
        for (flow, step) in targets {
            if !plans.iter().any(|(known_flow, known_step, _)| (*known_flow, *known_step) == (flow, step)) {
                plans.push((flow, step, cleared(program, flow, step)));
            }
        }
        let step_name = |flow: FlowId, step: StepId| {
            program
                .flow(flow)
                .and_then(|declared| declared.step(step))
                .map(|step| step.name.clone())
                .unwrap_or_default()
        };
        let names: Vec<String> = plans.iter().map(|(flow, step, _)| step_name(*flow, *step)).collect();
        directives_mut(program, &mut |directive| {
            let (true, Some(Position::GotoStep { flow, step })) = (directive.ask_again, &directive.position) else {
                return;
            };
            let Some(index) =
                plans.iter().position(|(known_flow, known_step, _)| (known_flow, known_step) == (flow, step))
            else {
                return;
            };
            let Some((_, _, fields)) = plans.get(index) else {
                return;
            };
            if fields.is_empty() {
                empty.push((names.get(index).cloned().unwrap_or_default(), directive.span));
                return;
            }
            let own: Vec<FieldId> = directive.set.iter().map(|write| write.field).collect();
            let span = directive.span;
            let clears = fields.iter().filter(|field| !own.contains(field)).map(|field| Write {
                field: *field,
                value: Expr { kind: ExprKind::Literal { value: Literal::Null }, ty: Type::Null, span },
            });
            let mut set: Vec<Write> = clears.collect();
            set.append(&mut directive.set);
            directive.set = set;
        });
        for (step, span) in empty {
            self.report(DirectiveError::AskAgainCollectsNothing { step, span });
        }
    }
}

/// Calls `visit` on every directive of the program, nested `for_each`
/// bodies included, with an explicit stack.
fn directives_mut(program: &mut Program, visit: &mut dyn FnMut(&mut Directive)) {
    let mut lists: Vec<&mut Vec<Action>> = Vec::new();
    for signal in &mut program.signals {
        if let Some(directive) = &mut signal.then {
            visit(directive);
        }
    }
    for flow in &mut program.flows {
        lists.push(&mut flow.on_enter);
        lists.push(&mut flow.on_complete);
        for step in &mut flow.steps {
            for branch in &mut step.branches {
                if let Then::Directive(directive) = &mut branch.then {
                    visit(directive);
                }
            }
            if let Some(directive) = &mut step.on_no_answer {
                visit(directive);
            }
            if let Some(Recovery::Directive(directive)) = &mut step.recovery {
                visit(directive);
            }
            lists.push(&mut step.on_enter);
            lists.push(&mut step.prepare);
            lists.push(&mut step.actions);
            lists.push(&mut step.finalize);
        }
    }
    while let Some(actions) = lists.pop() {
        for action in actions.iter_mut() {
            match &mut action.kind {
                ActionKind::Emit(directive) => visit(directive),
                ActionKind::ForEach(for_each) => lists.push(&mut for_each.actions),
                ActionKind::Set(_)
                | ActionKind::Append(_)
                | ActionKind::Call(_)
                | ActionKind::Say { .. }
                | ActionKind::AskModel(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{FlowId, Program, StepId, Then};
    use crate::source::SourceFile;

    fn program(name: &str, source: &str) -> Program {
        let compilation = crate::pipeline::compile(&SourceFile::new(name, source));
        assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
        compilation.ir
    }

    fn booking(change_date: &str, change_hotel: &str) -> String {
        format!(
            r#"
schema {{
  hotel: string "Hotel"
  date: date "Date"
  confirmed: bool "Confirmed"
  note: string "A note"
}}
flow booking "Book" {{
  when "the user wants to book"
  step ask_hotel {{
    prompt "Which hotel?"
    collect hotel
  }}
  step ask_date {{
    prompt "Which date?"
    collect date
  }}
  step confirm {{
    prompt "Book {{{{hotel}}}} on {{{{date}}}}?"
    collect confirmed
    branch {{
      if confirmed == true -> done
      when "the user wants another date" -> {change_date}
      when "the user wants another hotel" -> {change_hotel}
    }}
  }}
  step done {{
    say "Done."
  }}
}}
"#
        )
    }

    /// Where a value was written differs between the forms; what it is
    /// must not.
    fn without_spans(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(object) => {
                object.remove("span");
                object.values_mut().for_each(without_spans);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(without_spans),
            _ => {}
        }
    }

    /// The IR of a branch entry's directive, as `flowc compile` prints it
    /// (without spans).
    fn entry(program: &Program, index: usize) -> serde_json::Value {
        let then = program
            .flow(FlowId(0))
            .and_then(|flow| flow.step(StepId(2)))
            .and_then(|step| step.branches.get(index))
            .map(|branch| &branch.then);
        match then {
            Some(Then::Directive(directive)) => {
                let mut value = serde_json::to_value(directive).unwrap_or_default();
                without_spans(&mut value);
                value
            }
            other => panic!("not a directive: {other:?}"),
        }
    }

    #[test]
    fn asking_again_clears_what_the_step_collects_and_the_confirmation_that_showed_it() {
        let short = program("short.flow", &booking("ask_again ask_date", r#"{ ask_again ask_hotel  set note = "x" }"#));
        let long = program(
            "long.flow",
            &booking(
                "{ set date = null, confirmed = null  goto_step ask_date }",
                r#"{ set hotel = null, confirmed = null, note = "x"  goto_step ask_hotel }"#,
            ),
        );
        for index in [1, 2] {
            let mut written = entry(&short, index);
            assert_eq!(written.get("ask_again"), Some(&serde_json::Value::Bool(true)), "{written}");
            if let Some(object) = written.as_object_mut() {
                object.remove("ask_again");
            }
            assert_eq!(written, entry(&long, index), "entry {index}: the short form is the long one, marked");
        }
    }

    #[test]
    fn a_set_of_its_own_gives_a_cleared_field_its_value() {
        let short = program("short.flow", &booking(r#"{ ask_again ask_date  set confirmed = false }"#, "done"));
        let long = program("long.flow", &booking("{ set date = null, confirmed = false  goto_step ask_date }", "done"));
        let mut written = entry(&short, 1);
        if let Some(object) = written.as_object_mut() {
            object.remove("ask_again");
        }
        assert_eq!(written, entry(&long, 1));
    }

    #[test]
    fn both_syntaxes_write_it_alike() {
        let flow = program("short.flow", &booking("ask_again ask_date", "ask_again booking.ask_hotel"));
        let yaml = program(
            "short.yaml",
            r#"
schema:
  hotel: { type: string, description: Hotel }
  date: { type: date, description: Date }
  confirmed: { type: bool, description: Confirmed }
  note: { type: string, description: A note }
flows:
  booking:
    title: Book
    when: the user wants to book
    steps:
      - id: ask_hotel
        prompt: Which hotel?
        collect: [hotel]
      - id: ask_date
        prompt: Which date?
        collect: [date]
      - id: confirm
        prompt: "Book {{hotel}} on {{date}}?"
        collect: [confirmed]
        branches:
          - if: confirmed == true
            then: done
          - when: the user wants another date
            then: { ask_again: ask_date }
          - when: the user wants another hotel
            then: { ask_again: { flow: booking, step: ask_hotel } }
      - id: done
        say: Done.
"#,
        );
        for index in [1, 2] {
            assert_eq!(entry(&flow, index), entry(&yaml, index), "entry {index}");
        }
    }
}
