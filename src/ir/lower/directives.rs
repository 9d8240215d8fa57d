//! Directives: the one position each may move to (`goto`, `goto_step`,
//! `ask_again`, `complete`, `abort`, `reset`) and what else it carries.

use super::*;
use crate::diag::nearest;

impl Lowerer {
    pub(super) fn directive(
        &mut self,
        directive: &ast::Directive,
        scope: Option<FlowScope>,
        locals: &[(String, Type)],
    ) -> Directive {
        let mut positions: Vec<(PositionKey, Span, Option<Position>)> = Vec::new();
        if let Some(goto) = &directive.goto {
            let position = self.goto(goto, scope, locals);
            positions.push(("goto", goto.span, position));
        }
        if let Some(goto_step) = &directive.goto_step {
            let position = self.goto_step(goto_step, scope, "goto_step");
            positions.push(("goto_step", goto_step.span, position));
        }
        if let Some(ask_again) = &directive.ask_again {
            // A `goto_step` with the same names and errors; what it
            // clears is added once the whole program is lowered.
            let position = self.goto_step(ask_again, scope, "ask_again");
            self.asks_again = true;
            positions.push(("ask_again", ask_again.span, position));
        }
        if let Some(complete) = &directive.complete {
            let next = complete.next.as_ref().and_then(|name| self.flow_ref(name, scope));
            let unresolved = complete.next.is_some() && next.is_none();
            positions.push(("complete", complete.span, (!unresolved).then_some(Position::Complete { next })));
        }
        if let Some(abort) = &directive.abort {
            let reason = abort.reason.as_ref().map(|reason| self.template(reason, locals));
            positions.push(("abort", abort.span, Some(Position::Abort { reason })));
        }
        if let Some(reset) = directive.reset.as_ref().filter(|reset| reset.value) {
            positions.push(("reset", reset.span, Some(Position::Reset)));
        }
        if let [(first_key, first_span, _), (second_key, second_span, _), ..] = positions.as_slice() {
            let (first_key, second_key) = (*first_key, *second_key);
            // Only the first position is kept: the others' edges are lost.
            if let Some(scope) = scope {
                self.mark_incomplete(scope.flow);
            }
            self.report(DirectiveError::TwoPositions {
                first: first_key,
                first_span: *first_span,
                second: second_key,
                second_span: *second_span,
            });
        }
        if let (Some(reply), Some(abort)) = (&directive.reply, &directive.abort) {
            self.report(DirectiveError::ReplyWithAbort { reply: reply.span, abort: abort.span });
        }
        let empty = directive.goto.is_none()
            && directive.goto_step.is_none()
            && directive.ask_again.is_none()
            && directive.complete.is_none()
            && directive.abort.is_none()
            && directive.reset.is_none()
            && directive.reply.is_none()
            && directive.set.is_empty()
            && directive.set_context.is_empty()
            && directive.append_prompt.is_empty()
            && directive.inject_tools.is_empty()
            && directive.halt.is_none();
        if empty {
            self.report(DirectiveError::EmptyDirective { span: directive.span });
        }
        let set_context =
            directive.set_context.iter().filter_map(|assignment| self.context_write(assignment, locals)).collect();
        let ask_again = positions.first().is_some_and(|(key, _, position)| *key == "ask_again" && position.is_some());
        Directive {
            ask_again,
            position: positions.into_iter().next().and_then(|(_, _, position)| position),
            reply: directive.reply.as_ref().map(|reply| self.template(reply, locals)),
            set: self.writes(&directive.set, locals),
            set_context,
            append_prompt: directive.append_prompt.iter().map(|text| self.template(text, locals)).collect(),
            inject_tools: directive.inject_tools.iter().filter_map(|tool| self.tool_ref(tool)).collect(),
            halt: directive.halt.as_ref().is_some_and(|halt| halt.value),
            span: directive.span,
        }
    }

    pub(super) fn goto(
        &mut self,
        goto: &ast::Goto,
        scope: Option<FlowScope>,
        locals: &[(String, Type)],
    ) -> Option<Position> {
        let data = self.writes(&goto.data, locals);
        let Some(name) = &goto.flow else {
            self.report(DirectiveError::GotoWithoutFlow { span: goto.span });
            return None;
        };
        let flow = self.flow_ref(name, scope)?;
        Some(Position::Goto { flow, data })
    }

    /// `goto_step` (or `ask_again`, `key`) to a step of the current flow or
    /// of the flow named.
    pub(super) fn goto_step(
        &mut self,
        goto_step: &ast::GotoStep,
        scope: Option<FlowScope>,
        key: PositionKey,
    ) -> Option<Position> {
        let Some(step_name) = &goto_step.step else {
            self.report(DirectiveError::GotoStepWithoutStep { key, span: goto_step.span });
            return None;
        };
        let flow = match (&goto_step.flow, scope) {
            (Some(flow_name), _) => self.flow_ref(flow_name, scope)?,
            (None, Some(scope)) => scope.flow,
            (None, None) => {
                self.report(DirectiveError::GotoStepWithoutFlow {
                    key,
                    step: step_name.value.clone(),
                    span: step_name.span,
                });
                return None;
            }
        };
        match self.step_in(flow, &step_name.value) {
            Some(step) => Some(Position::GotoStep { flow, step }),
            None => {
                self.mark_incomplete(flow);
                let flow_name = self.flow_names.get(flow.index()).cloned().unwrap_or_default();
                let candidates: Vec<&str> = self
                    .steps
                    .get(flow.index())
                    .map(|steps| steps.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                self.report(NameError::UnknownStepOfFlow {
                    flow: flow_name,
                    step: step_name.value.clone(),
                    span: step_name.span,
                    close: nearest(&step_name.value, candidates),
                });
                None
            }
        }
    }

    pub(super) fn context_write(
        &mut self,
        assignment: &ast::Assignment,
        locals: &[(String, Type)],
    ) -> Option<ContextWrite> {
        let Some((key, ty)) = self.symbols.context.get(&assignment.name.value).cloned() else {
            self.report(NameError::UnknownContextKey {
                name: assignment.name.value.clone(),
                span: assignment.name.span,
                close: nearest(&assignment.name.value, self.symbols.context.keys().map(String::as_str)),
            });
            return None;
        };
        let what = format!("the context key `{}`", assignment.name.value);
        let value = self.value_for(&assignment.value, &ty, &what, locals);
        Some(ContextWrite { key, value })
    }
}
