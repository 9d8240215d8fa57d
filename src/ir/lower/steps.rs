//! Steps: their fields, hooks and limits, and where each leaves to
//! (`branches`, `next`), resolved to a step of the flow or a flow.

use super::*;
use crate::diag::nearest;

impl Lowerer {
    pub(super) fn step(&mut self, step: &ast::StepDecl, scope: FlowScope) -> Step {
        let name = step.id.as_ref().map(|id| id.value.clone()).unwrap_or_default();
        let span = step.id.as_ref().map_or(step.span, |id| id.span);
        let auto = step.auto.as_ref().is_some_and(|auto| auto.value);
        let collect = self.fields(&step.collect);
        let requires = self.fields(&step.requires);
        // A step whose `collect` or `requires` lost a name may look like it
        // never waits for input; cycle and reachability checks must not
        // draw conclusions from that.
        if collect.len() != step.collect.len() || requires.len() != step.requires.len() {
            self.mark_incomplete(scope.flow);
        }
        if auto && let Some(first) = step.collect.first() {
            self.report(StepError::AutoStepCollects {
                step: name.clone(),
                field: first.value.clone(),
                span: first.span,
            });
        }
        let wait_ms = step.wait.as_ref().and_then(|text| {
            let ms = self.duration(text);
            if !auto {
                self.report(StepError::WaitOnInputStep { step: name.clone(), span: text.span });
            }
            ms
        });
        let max_asks = match &step.max_asks {
            Some(value) => match u32::try_from(value.value) {
                Ok(asks) if asks >= 1 => asks,
                _ => {
                    self.report(StepError::MaxAsksBelowOne { value: value.value, span: value.span });
                    DEFAULT_MAX_ASKS
                }
            },
            None => DEFAULT_MAX_ASKS,
        };
        let actions = self.actions(&step.actions, scope, &mut Vec::new());
        // Its branches are chosen once the step has run and recorded its
        // output, so they (and no other part of it) may read that output.
        let lowering = self.step_outputs.as_ref().map(|outputs| outputs.current);
        let own_type = self.output_type(&actions);
        if let (Some(outputs), Some(current)) = (self.step_outputs.as_mut(), lowering) {
            if let Some(slot) = outputs.steps.get_mut(current) {
                slot.1 = own_type;
            }
            outputs.current = current + 1;
        }
        let branches = match &step.branches {
            Some(entries) if entries.value.is_empty() => {
                self.report(DirectiveError::EmptyBranches { span: entries.span });
                Vec::new()
            }
            Some(entries) => entries.value.iter().filter_map(|entry| self.branch(entry, scope)).collect(),
            None => Vec::new(),
        };
        if let (Some(outputs), Some(current)) = (self.step_outputs.as_mut(), lowering) {
            outputs.current = current;
        }
        let next = step.next.as_ref().and_then(|target| self.next(target, scope));
        // Which kind a step may have is checked with its flow, once the flow
        // is known to be a workflow or a conversation.
        let recovery = match &step.on_error {
            Some(ast::OnError::Directive(directive)) => {
                Some(Recovery::Directive(Box::new(self.directive(directive, Some(scope), &[]))))
            }
            Some(ast::OnError::Stop(_)) => Some(Recovery::Stop),
            _ => None,
        };
        let on_error = match &step.on_error {
            None | Some(ast::OnError::Stop(_) | ast::OnError::Directive(_)) => OnError::Stop,
            Some(ast::OnError::Continue(_)) => OnError::Continue,
            Some(ast::OnError::Retry { times, backoff, .. }) => OnError::Retry {
                times: self.positive(times, "retry").unwrap_or(1),
                backoff_ms: backoff.as_ref().and_then(|text| self.duration(text)).unwrap_or(0),
            },
        };
        Step {
            name,
            auto,
            prompt: step.prompt.as_ref().map(|prompt| self.template(prompt, &[])),
            say: step.say.as_ref().map(|say| self.template(say, &[])),
            collect,
            requires,
            skip_if: step.skip_if.as_ref().map(|expr| self.condition(expr, &[])),
            when: step.when.iter().map(|text| text.value.clone()).collect(),
            guard: step.guard.iter().map(|expr| self.condition(expr, &[])).collect(),
            branches,
            next,
            actions,
            on_enter: self.actions(&step.on_enter, scope, &mut Vec::new()),
            prepare: self.actions(&step.prepare, scope, &mut Vec::new()),
            finalize: self.actions(&step.finalize, scope, &mut Vec::new()),
            tools: step.tools.iter().filter_map(|tool| self.tool_ref(tool)).collect(),
            max_asks,
            on_no_answer: step
                .on_no_answer
                .as_ref()
                .map(|directive| Box::new(self.directive(directive, Some(scope), &[]))),
            on_error,
            recovery,
            wait_ms,
            span,
        }
    }

    pub(super) fn branch(&mut self, entry: &ast::Branch, scope: FlowScope) -> Option<Branch> {
        let guard = entry.guard.iter().map(|expr| self.condition(expr, &[])).collect();
        let Some(then) = entry.then.as_ref() else {
            self.mark_incomplete(scope.flow);
            return None;
        };
        let then = match then {
            ast::Then::Target(name) => self.then_target(name, scope)?,
            ast::Then::Directive(directive) => Then::Directive(Box::new(self.directive(directive, Some(scope), &[]))),
        };
        Some(Branch {
            guard,
            when: entry.when.iter().map(|text| text.value.clone()).collect(),
            then,
            label: entry.label.as_ref().map(|label| label.value.clone()),
            span: entry.span,
        })
    }

    /// `then: name`: a step of this flow, else a flow (as `goto`).
    pub(super) fn then_target(&mut self, name: &ast::Name, scope: FlowScope) -> Option<Then> {
        if let Some(step) = self.step_in(scope.flow, &name.value) {
            return Some(Then::Step(step));
        }
        if let Some(flow) = self.flows.get(&name.value) {
            return Some(Then::Directive(Box::new(goto_directive(*flow, name.span))));
        }
        if name.value == "end" {
            return Some(Then::Directive(Box::new(complete_directive(name.span))));
        }
        self.report_step_target(name, scope, true);
        None
    }

    pub(super) fn next(&mut self, name: &ast::Name, scope: FlowScope) -> Option<Next> {
        if name.value == "end" {
            return Some(Next::End);
        }
        if let Some(step) = self.step_in(scope.flow, &name.value) {
            return Some(Next::Step(step));
        }
        self.report_step_target(name, scope, false);
        None
    }

    /// An unresolved `then`/`next`: a step of another flow is
    /// `cross_flow_step`, anything else `unknown_target` with a suggestion.
    pub(super) fn report_step_target(&mut self, name: &ast::Name, scope: FlowScope, flows_allowed: bool) {
        self.mark_incomplete(scope.flow);
        if let Some(owner) = self.step_owners.get(&name.value).and_then(|owners| owners.first()) {
            let owner = self.flow_names.get(owner.index()).cloned().unwrap_or_default();
            self.report(NameError::CrossFlowStep { name: name.value.clone(), span: name.span, owner });
            return;
        }
        let steps: Vec<&str> = self
            .steps
            .get(scope.flow.index())
            .map(|steps| steps.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut candidates = steps;
        if flows_allowed {
            candidates.extend(self.flow_names.iter().map(String::as_str));
        }
        self.report(NameError::UnknownStepTarget {
            name: name.value.clone(),
            span: name.span,
            flows_allowed,
            close: nearest(&name.value, candidates),
            misspelt_directive: if flows_allowed { misspelt_directive(&name.value) } else { None },
            names_a_flow: self.flows.contains_key(&name.value),
        });
    }
}
