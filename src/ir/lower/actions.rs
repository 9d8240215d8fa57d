//! Actions: `set`, `append` (to a list field, the item typed against its
//! items), `call` (arguments checked against the tool's params,
//! `save` against its returns), `emit`, `say`, `for_each` and `ask_model`
//! (the field written, the instruction's data and the tools resolved).

use super::*;

impl Lowerer {
    pub(super) fn actions(
        &mut self,
        actions: &[ast::Action],
        scope: FlowScope,
        locals: &mut Vec<(String, Type)>,
    ) -> Vec<Action> {
        let mut lowered = Vec::with_capacity(actions.len());
        for action in actions {
            match &action.kind {
                ast::ActionKind::Set(assignments) => {
                    for write in self.writes(assignments, locals) {
                        lowered.push(Action { kind: ActionKind::Set(write), span: action.span });
                    }
                }
                ast::ActionKind::Append(assignments) => {
                    for write in self.appends(assignments, locals) {
                        lowered.push(Action { kind: ActionKind::Append(write), span: action.span });
                    }
                }
                ast::ActionKind::Call(call) => {
                    if let Some(call) = self.call(call, locals) {
                        lowered.push(Action { kind: ActionKind::Call(call), span: action.span });
                    }
                }
                ast::ActionKind::Emit(directive) => lowered.push(Action {
                    kind: ActionKind::Emit(Box::new(self.directive(directive, Some(scope), locals))),
                    span: action.span,
                }),
                ast::ActionKind::Say(template) => lowered.push(Action {
                    kind: ActionKind::Say { text: self.template(template, locals) },
                    span: action.span,
                }),
                ast::ActionKind::ForEach(for_each) => {
                    let for_each = self.for_each(for_each, scope, locals);
                    lowered.push(Action { kind: ActionKind::ForEach(Box::new(for_each)), span: action.span });
                }
                ast::ActionKind::AskModel(ask) => {
                    if let Some(ask) = self.ask_model(ask, locals) {
                        lowered.push(Action { kind: ActionKind::AskModel(Box::new(ask)), span: action.span });
                    }
                }
            }
        }
        lowered
    }

    pub(super) fn for_each(
        &mut self,
        for_each: &ast::ForEach,
        scope: FlowScope,
        locals: &mut Vec<(String, Type)>,
    ) -> ForEach {
        let items = self.expr(&for_each.items, locals);
        let item_type = match &items.ty {
            Type::List(item) => (**item).clone(),
            Type::Unknown | Type::Null => Type::Unknown,
            other => {
                self.report(ActionError::ForEachOverNonList { found: other.clone(), span: items.span });
                Type::Unknown
            }
        };
        self.check_id(&for_each.binding, IdKind::Variable);
        let slot = u32::try_from(locals.len()).unwrap_or(u32::MAX);
        locals.push((for_each.binding.value.clone(), item_type));
        let filter = for_each.filter.as_ref().map(|filter| self.condition(filter, locals));
        let actions = self.actions(&for_each.actions, scope, locals);
        locals.pop();
        ForEach { items, binding: for_each.binding.value.clone(), slot, filter, actions }
    }

    /// `ask_model F: "…"`: F must be a field, the instruction a template over
    /// known data, each tool a declared one. Every problem is reported
    /// before the action is dropped.
    fn ask_model(&mut self, ask: &ast::AskModel, locals: &[(String, Type)]) -> Option<AskModel> {
        let field = self.field(&ask.into);
        let instruction = self.template(&ask.instruction, locals);
        let tools: Vec<Option<ToolId>> = ask.tools.iter().map(|tool| self.tool_ref(tool)).collect();
        Some(AskModel {
            field: field?,
            instruction,
            examples: ask.examples.iter().map(|example| example.value.clone()).collect(),
            tools: tools.into_iter().collect::<Option<Vec<_>>>()?,
        })
    }

    /// `append ITEM to LIST`: LIST must be a list field and ITEM a value of
    /// its item type.
    fn appends(&mut self, assignments: &[ast::Assignment], locals: &[(String, Type)]) -> Vec<Write> {
        let mut writes = Vec::with_capacity(assignments.len());
        for assignment in assignments {
            let Some(field) = self.field(&assignment.name) else {
                self.expr(&assignment.value, locals);
                continue;
            };
            let item_type = match self.symbols_type(field) {
                Type::List(item) => (*item).clone(),
                Type::Unknown => Type::Unknown,
                other => {
                    self.report(ActionError::AppendToNonList {
                        field: assignment.name.value.clone(),
                        found: other,
                        span: assignment.name.span,
                    });
                    self.expr(&assignment.value, locals);
                    continue;
                }
            };
            let what = format!("an item of the list `{}`", assignment.name.value);
            let value = self.value_for(&assignment.value, &item_type, &what, locals);
            writes.push(Write { field, value });
        }
        writes
    }

    pub(super) fn call(&mut self, call: &ast::Call, locals: &[(String, Type)]) -> Option<Call> {
        let tool = self.tool_ref(&call.tool);
        let Some(tool) = tool else {
            for arg in &call.args {
                self.expr(&arg.value, locals);
            }
            return None;
        };
        let (tool_name, params, returns) = match self.tool_signatures.get(tool.index()) {
            Some(signature) => (signature.name.clone(), signature.params.clone(), signature.returns.clone()),
            None => return None,
        };
        let mut args: Vec<Option<Expr>> = vec![None; params.len()];
        for arg in &call.args {
            let Some(index) = params.iter().position(|(name, _)| *name == arg.name.value) else {
                self.report(ActionError::UnknownParam {
                    tool: tool_name.clone(),
                    param: arg.name.value.clone(),
                    span: arg.name.span,
                    params: params.iter().map(|(name, _)| name.clone()).collect(),
                });
                self.expr(&arg.value, locals);
                continue;
            };
            let what = format!("the param `{}` of `{tool_name}`", arg.name.value);
            let param_type = params.get(index).map_or(Type::Unknown, |(_, ty)| ty.clone());
            let value = self.value_for(&arg.value, &param_type, &what, locals);
            if let Some(slot) = args.get_mut(index) {
                if slot.is_some() {
                    self.report(ActionError::ParamPassedTwice { param: arg.name.value.clone(), span: arg.name.span });
                }
                *slot = Some(value);
            }
        }
        let missing: Vec<String> =
            params.iter().zip(&args).filter(|(_, arg)| arg.is_none()).map(|((name, _), _)| name.clone()).collect();
        if !missing.is_empty() {
            self.report(ActionError::MissingArguments { tool: tool_name.clone(), missing, span: call.tool.span });
        }
        let save = call.save.as_ref().and_then(|name| self.save(name, &tool_name, returns.as_deref()));
        let args = args
            .into_iter()
            .map(|arg| arg.unwrap_or(Expr { kind: ExprKind::Error, ty: Type::Unknown, span: call.tool.span }))
            .collect();
        Some(Call { tool, args, save })
    }

    /// `save: F`: a single declared return goes to F; several need F to be
    /// an object with those fields.
    pub(super) fn save(
        &mut self,
        name: &ast::Name,
        tool_name: &str,
        returns: Option<&[(String, Type)]>,
    ) -> Option<FieldId> {
        let field = self.field(name)?;
        let field_type = self.symbols_type(field);
        let Some(returns) = returns else {
            self.report(ActionError::SaveWithoutReturns { tool: tool_name.to_string(), span: name.span });
            return Some(field);
        };
        let (saved_type, saved) = match returns {
            [(single_name, single_type)] => (single_type.clone(), Some(single_name.clone())),
            _ => (Type::Object(returns.to_vec().into()), None),
        };
        let probe = Expr { kind: ExprKind::Error, ty: saved_type.clone(), span: name.span };
        if assignability(&probe, &field_type).is_some() {
            self.report(ActionError::SaveMismatch {
                field: name.value.clone(),
                field_type,
                tool: tool_name.to_string(),
                saved,
                saved_type,
                span: name.span,
            });
        }
        Some(field)
    }
}
