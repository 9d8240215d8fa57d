//! Directive fields that cannot act where they are emitted (`dropped_field`,
//! a warning). `halt`, `append_prompt` and `inject_tools` shape the coming
//! model call, so they act only on the pre-model bus (LANGUAGE.md section
//! 5). Emitted from `finalize`, `on_complete` or a post-phase signal they
//! join the post-model bus and are dropped; a `phase: both` signal's are
//! dropped in its post half (section 11). A tool's result can carry a
//! directive too, but what a tool returns is only known at run time.
//!
//! This pass reads the AST (through [`super::check_ast`], before lowering
//! consumes it): the IR keeps no span for a `halt: true` or an
//! `inject_tools` list, and the warning points at the key itself.

use crate::diag::{Code, Diagnostic};
use crate::source::Span;
use crate::syntax::ast;

/// A pre-model field emitted where it is dropped: the facts of one
/// `dropped_field` warning.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DroppedField {
    /// `halt`, `append_prompt` or `inject_tools`.
    pub key: &'static str,
    pub span: Span,
    pub place: Place,
}

/// Where a directive joins the post-model bus.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Place {
    Finalize,
    OnComplete,
    /// A signal of `phase: post`, by name.
    PostSignal(String),
    /// A signal of `phase: both`, by name.
    BothSignal(String),
}

pub(crate) fn check(program: &ast::Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(DroppedField::into_diagnostic));
}

pub(crate) fn find(program: &ast::Program) -> Vec<DroppedField> {
    let mut found = Vec::new();
    for flow in &program.flows {
        for directive in emitted(&flow.on_complete) {
            report(directive, &Place::OnComplete, &mut found);
        }
        for step in &flow.steps {
            for directive in emitted(&step.finalize) {
                report(directive, &Place::Finalize, &mut found);
            }
        }
    }
    for signal in &program.signals {
        let place = match signal.phase.as_ref().map(|phase| phase.value.as_str()) {
            Some("post") => Place::PostSignal(signal.name.value.clone()),
            Some("both") => Place::BothSignal(signal.name.value.clone()),
            _ => continue,
        };
        if let Some(ast::Then::Directive(directive)) = &signal.then {
            report(directive, &place, &mut found);
        }
    }
    found
}

/// The directives `emit`ted by actions, `for_each` bodies included.
fn emitted(actions: &[ast::Action]) -> Vec<&ast::Directive> {
    let mut out = Vec::new();
    let mut stack = vec![actions.iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(action) => match &action.kind {
                ast::ActionKind::Emit(directive) => out.push(&**directive),
                ast::ActionKind::ForEach(for_each) => stack.push(for_each.actions.iter()),
                _ => {}
            },
            None => {
                stack.pop();
            }
        }
    }
    out
}

fn report(directive: &ast::Directive, place: &Place, found: &mut Vec<DroppedField>) {
    let mut dropped: Vec<(&'static str, Span)> = Vec::new();
    if let Some(halt) = directive.halt.as_ref().filter(|halt| halt.value) {
        dropped.push(("halt", halt.span));
    }
    if let (Some(first), Some(last)) = (directive.append_prompt.first(), directive.append_prompt.last()) {
        dropped.push(("append_prompt", first.span.to(last.span)));
    }
    if let (Some(first), Some(last)) = (directive.inject_tools.first(), directive.inject_tools.last()) {
        dropped.push(("inject_tools", first.span.to(last.span)));
    }
    for (key, span) in dropped {
        found.push(DroppedField { key, span, place: place.clone() });
    }
}

impl DroppedField {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        let DroppedField { key, span, place } = self;
        let (message, label, help) = match place {
            Place::Finalize => (
                format!("`{key}` in `finalize` is dropped"),
                "`finalize` runs after the model call".to_string(),
                format!("emit `{key}` from `prepare` or `on_enter`, which run before the model call"),
            ),
            Place::OnComplete => (
                format!("`{key}` in `on_complete` is dropped"),
                "`on_complete` runs on the post-model bus".to_string(),
                format!("emit `{key}` from a step's `do`, `on_enter` or `prepare`"),
            ),
            Place::PostSignal(name) => (
                format!("`{key}` in the post-phase signal `{name}` is dropped"),
                "a post-phase signal matches after the reply".to_string(),
                "make it a `pre` phase signal: only those shape the model call".to_string(),
            ),
            Place::BothSignal(name) => (
                format!("`{key}` in the signal `{name}` is dropped in its post phase"),
                "acts only when the signal matches before the model call".to_string(),
                format!("give the signal the `pre` phase, or move `{key}` to a pre-phase signal"),
            ),
        };
        Diagnostic::new(Code::DroppedField, message).at(span, label).with_help(help)
    }
}

#[cfg(test)]
mod tests {
    use super::{DroppedField, Place, find};
    use crate::check::check_findings as check;
    use crate::source::SourceFile;

    #[test]
    fn the_warning_holds_the_key_and_where_it_was_emitted() {
        let source = r#"signal late { when "x"  phase post  then { halt } }
            flow f { when "w"  step s { say "s"  finalize { emit { inject_tools t } } } }"#;
        let file = SourceFile::new("test.flow", source);
        let (ast, _) = crate::syntax::parse(&file);
        let at = |needle: &str| crate::diag::span_of(source, needle, 0);
        let injected = at("inject_tools t");
        let tool = crate::source::Span::new(injected.end - 1, injected.end);
        assert_eq!(
            find(&ast),
            [
                DroppedField { key: "inject_tools", span: tool, place: Place::Finalize },
                DroppedField { key: "halt", span: at("halt"), place: Place::PostSignal("late".to_string()) },
            ]
        );
    }

    #[test]
    fn pre_model_fields_after_the_model_are_dropped() {
        check(
            r#"tool t() { builtin now }
            signal late { when "x"  phase post  then { halt } }
            signal both { when "y"  phase both  then { append_prompt "p" } }
            signal early { when "z"  then { halt  inject_tools t } }
            flow f { when "w"
                on_complete { for x in [1] { emit { inject_tools t } } }
                step s { say "s"
                         prepare { emit { halt } }
                         finalize { emit { append_prompt "a", "b" } } } }"#,
            &[
                ("dropped_field", "halt"),
                ("dropped_field", r#""p""#),
                ("dropped_field", "t"),
                ("dropped_field", r#""a", "b""#),
            ],
        );
    }
}
