//! Flows: their routing, fields and hooks, their steps lowered in order
//! (a workflow's steps may read the outputs of those before them), and the
//! `on_error` each kind of flow allows.

use super::*;

impl Lowerer {
    pub(super) fn flow(&mut self, flow: &ast::FlowDecl, step_decls: &[&ast::StepDecl], flow_id: FlowId) -> Flow {
        let scope = FlowScope { flow: flow_id };
        let guard = flow.guard.iter().map(|expr| self.condition(expr, &[])).collect();
        let (requires, requires_spans) =
            flow.requires.iter().filter_map(|name| self.field(name).map(|field| (field, name.span))).unzip();
        let optional = self.fields(&flow.optional);
        let (keep, keep_spans): (Vec<FieldId>, Vec<Span>) =
            flow.keep.iter().filter_map(|name| self.field(name).map(|field| (field, name.span))).unzip();
        let declared_fresh = self.fields(&flow.fresh);
        let rules = flow.rules.iter().map(|rule| self.template(rule, &[])).collect();
        let on_enter = self.actions(&flow.on_enter, scope, &mut Vec::new());
        let on_complete = self.actions(&flow.on_complete, scope, &mut Vec::new());
        let complete_next = flow.complete_next.as_ref().and_then(|name| self.flow_ref(name, Some(scope)));
        if flow.steps.is_empty() {
            self.report(StepError::FlowWithoutSteps { flow: flow.name.value.clone(), span: flow.name.span });
        }
        for step in flow.steps.iter().filter(|step| step.id.is_none()) {
            // The step's first character: the whole step would cover the rest.
            let span = Span::new(step.span.start, step.span.start.saturating_add(1).min(step.span.end));
            self.report(StepError::StepWithoutId { span });
        }
        let steps = self.steps_of(step_decls, scope);
        let workflow = !steps.is_empty() && steps.iter().all(|step| step.auto);
        let fresh = crate::ir::run_fields(&steps, &keep, &declared_fresh);
        self.on_error_kinds(step_decls, workflow);
        Flow {
            name: flow.name.value.clone(),
            title: flow.title.as_ref().map(|title| title.value.clone()),
            when: flow.when.iter().map(|text| text.value.clone()).collect(),
            guard,
            default: flow.default.as_ref().is_some_and(|default| default.value),
            workflow,
            requires,
            requires_spans,
            optional,
            fresh,
            keep,
            keep_spans,
            rules,
            on_enter,
            on_complete,
            complete_next,
            steps,
            span: flow.name.span,
            incomplete: false,
            schedule: flow.schedule.as_ref().map(|schedule| Schedule {
                cron: schedule.cron.value.clone(),
                timezone: schedule
                    .timezone
                    .as_ref()
                    .map_or_else(|| crate::schedule::DEFAULT_ZONE.to_string(), |zone| zone.value.clone()),
                cron_span: schedule.cron.span,
                timezone_span: schedule.timezone.as_ref().map_or(schedule.cron.span, |zone| zone.span),
            }),
        }
    }

    /// Lowers a flow's steps; in a workflow (every step auto), each step's
    /// expressions may read the outputs of the steps before it, and its
    /// branches its own ([`Lowerer::step`] records each step's type).
    pub(super) fn steps_of(&mut self, step_decls: &[&ast::StepDecl], scope: FlowScope) -> Vec<Step> {
        let workflow =
            !step_decls.is_empty() && step_decls.iter().all(|step| step.auto.as_ref().is_some_and(|auto| auto.value));
        if !workflow {
            return step_decls.iter().map(|step| self.step(step, scope)).collect();
        }
        let names = step_decls.iter().map(|step| step.id.as_ref().map(|id| id.value.clone()).unwrap_or_default());
        self.step_outputs = Some(StepOutputs { steps: names.map(|name| (name, None)).collect(), current: 0 });
        let mut steps = Vec::with_capacity(step_decls.len());
        for (index, decl) in step_decls.iter().enumerate() {
            if let Some(outputs) = self.step_outputs.as_mut() {
                outputs.current = index;
            }
            steps.push(self.step(decl, scope));
        }
        self.step_outputs = None;
        steps
    }

    /// The static type of what a step with these actions records as its
    /// output (see [`crate::ir::output_shape`]).
    pub(super) fn output_type(&self, actions: &[Action]) -> Option<Type> {
        match crate::ir::output_shape(actions) {
            OutputShape::Fields(fields) => {
                let names = fields.iter().filter_map(|field| {
                    let name = self.symbols.fields.iter().find(|(_, (id, _))| id == field).map(|(name, _)| name)?;
                    Some((name.clone(), self.symbols_type(*field)))
                });
                Some(Type::Object(names.collect()))
            }
            OutputShape::Call(tool) => self
                .tool_signatures
                .get(tool.index())
                .and_then(|signature| signature.returns.clone())
                .map(|returns| Type::Object(returns.into())),
            OutputShape::Untyped => None,
        }
    }

    /// A workflow step's `on_error` is a policy (`stop`, `continue`,
    /// `retry`); a conversation step's is a directive or `stop`: the others
    /// mean nothing in a conversation, and a directive nothing in a run
    /// without a user.
    pub(super) fn on_error_kinds(&mut self, step_decls: &[&ast::StepDecl], workflow: bool) {
        for step in step_decls {
            let (span, kind) = match &step.on_error {
                Some(ast::OnError::Directive(directive)) if workflow => (directive.span, OnErrorKind::Directive),
                Some(ast::OnError::Continue(span)) if !workflow => (*span, OnErrorKind::Continue),
                Some(ast::OnError::Retry { span, .. }) if !workflow => (*span, OnErrorKind::Retry),
                _ => continue,
            };
            let step = step.id.as_ref().map(|id| id.value.clone()).unwrap_or_default();
            self.report(StepError::OnErrorNotAllowed { step, workflow, kind, span });
        }
    }
}
