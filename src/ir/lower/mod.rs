//! Lowering: the AST of either front end into the resolved, typed IR.
//!
//! Every name is resolved to an index and every expression is typed. What
//! cannot be resolved is reported (`duplicate_id`, `invalid_id`,
//! `unknown_target`, `cross_flow_step`, `unknown_field`, `unknown_tool`,
//! `invalid_tool`, `wrong_arguments`, `type_mismatch`, `invalid_directive`,
//! `invalid_step`, `invalid_duration`, `invalid_schema`, …) and left out of
//! the IR — an edge to nowhere is dropped rather than represented — and
//! lowering carries on, so one run reports every problem.
//!
//! A problem is recorded as a `LowerError` holding its facts (names,
//! spans, types, the nearest declared name); `error.rs` alone puts them
//! into words. This file holds the driver ([`lower`]) and the name lookups
//! every part shares; each kind of declaration is lowered in the file
//! named after it.

mod actions;
mod agent;
mod ask_again;
mod directives;
mod error;
mod flows;
mod ids;
mod schema;
mod signals;
mod steps;
mod tools;

use super::*;
use crate::diag::Diagnostic;
use crate::diag::nearest;
use crate::duration::parse_duration_ms;
use crate::expr::typeck::{Checker, Scope, StepOutputs, Symbols, TypeError, Unassignable, assignability};
use crate::expr::{Expr, ExprKind, Template, Type};
use crate::source::{Span, Spanned};
use crate::syntax::ast;
pub use error::RESERVED_WORDS;
use error::misspelt_directive;
pub(crate) use error::{
    ActionError, DirectiveError, IdError, IdKind, LowerError, NameError, OnErrorKind, PositionKey, SchemaError,
    SchemaProblem, SignalProblem, StepError, ToolError, ValueError,
};
use std::collections::HashMap;

/// Lowers a parsed program. The IR is always produced; it is only safe to
/// run when no returned diagnostic is an error.
///
/// The AST is consumed: each flow's syntax tree is dropped as soon as the
/// flow is lowered, so the AST and the IR of a large program are never both
/// whole in memory. Flows are most of both.
pub fn lower(program: ast::Program) -> (Program, Vec<Diagnostic>) {
    let (ir, errors) = lower_to_errors(program);
    (ir, errors.into_iter().map(LowerError::into_diagnostic).collect())
}

/// [`lower`], with the problems found as the values lowering recorded, in
/// the order it found them.
pub(crate) fn lower_to_errors(program: ast::Program) -> (Program, Vec<LowerError>) {
    let mut lowerer = Lowerer::default();
    let ir = lowerer.program(program);
    (ir, lowerer.errors)
}

#[derive(Default)]
struct Lowerer {
    errors: Vec<LowerError>,
    symbols: Symbols,
    tools: HashMap<String, ToolId>,
    tool_signatures: Vec<ToolSignature>,
    flows: HashMap<String, FlowId>,
    /// Per flow, its step names.
    steps: Vec<HashMap<String, StepId>>,
    /// Every step name, with the flows that have a step of that name.
    step_owners: HashMap<String, Vec<FlowId>>,
    flow_names: Vec<String>,
    /// Per flow, whether lowering dropped part of it (see [`Flow::incomplete`]).
    incomplete: Vec<bool>,
    /// Per field (by [`FieldId`]), its type: a lookup per write must not
    /// scan the whole schema.
    field_types: Vec<Type>,
    /// Per field, its declared type with its range and pattern: a constant
    /// write is checked against them.
    field_specs: Vec<ValueType>,
    /// While a workflow's steps are lowered: the outputs earlier steps
    /// record, for `steps.NAME.output`.
    step_outputs: Option<StepOutputs>,
    /// Whether an `ask_again` was lowered: its writes are spelled out once
    /// the whole program is ([`ask_again`]).
    asks_again: bool,
}

struct ToolSignature {
    name: String,
    params: Vec<(String, Type)>,
    returns: Option<Vec<(String, Type)>>,
}

/// Where a directive or target is resolved: inside a flow (bare step names
/// resolve there) or outside any (signals).
#[derive(Clone, Copy)]
struct FlowScope {
    flow: FlowId,
}

impl Lowerer {
    fn program(&mut self, program: ast::Program) -> Program {
        let fields = self.declarations(&program.schema, IdKind::Field);
        self.field_types = fields.iter().map(|field| field.ty.to_type()).collect();
        self.field_specs = fields.iter().map(|field| field.ty.clone()).collect();
        for (index, field) in fields.iter().enumerate() {
            self.symbols.fields.insert(field.name.clone(), (FieldId::from_index(index), field.ty.to_type()));
        }
        let context = self.declarations(&program.context, IdKind::ContextKey);
        for (index, key) in context.iter().enumerate() {
            self.symbols.context.insert(key.name.clone(), (ContextId::from_index(index), key.ty.to_type()));
        }

        let tool_decls = self.unique(&program.tools, |tool| &tool.name, IdKind::Tool);
        for (index, tool) in tool_decls.iter().enumerate() {
            self.tools.insert(tool.name.value.clone(), ToolId::from_index(index));
        }
        let mut tools_declared = Vec::with_capacity(tool_decls.len());
        for tool in &tool_decls {
            let params = self.declarations(&tool.params, IdKind::Param);
            let returns = tool.returns.as_ref().map(|returns| self.declarations(&returns.value, IdKind::Field));
            self.tool_signatures.push(ToolSignature {
                name: tool.name.value.clone(),
                params: params.iter().map(|param| (param.name.clone(), param.ty.to_type())).collect(),
                returns: returns
                    .as_ref()
                    .map(|fields| fields.iter().map(|field| (field.name.clone(), field.ty.to_type())).collect()),
            });
            tools_declared.push((params, returns));
        }
        let tools = tool_decls
            .iter()
            .zip(tools_declared)
            .map(|(tool, (params, returns))| self.tool(tool, params, returns))
            .collect();

        // Every flow and step name is known before any flow is lowered: a
        // target may name a flow declared later.
        let kept_flows = self.unique_indices(&program.flows, |flow| &flow.name, IdKind::Flow);
        let mut kept_steps: Vec<Option<Vec<usize>>> = vec![None; program.flows.len()];
        for (index, &decl_index) in kept_flows.iter().enumerate() {
            let Some(flow) = program.flows.get(decl_index) else {
                continue;
            };
            let flow_id = FlowId::from_index(index);
            self.flows.insert(flow.name.value.clone(), flow_id);
            self.flow_names.push(flow.name.value.clone());
            let mut steps = HashMap::new();
            let step_indices = self.step_indices(flow);
            for step in step_indices.iter().filter_map(|&step_index| flow.steps.get(step_index)) {
                if let Some(id) = &step.id {
                    let step_id = StepId::from_index(steps.len());
                    steps.insert(id.value.clone(), step_id);
                    self.step_owners.entry(id.value.clone()).or_default().push(flow_id);
                }
            }
            self.steps.push(steps);
            self.incomplete.push(step_indices.len() != flow.steps.len());
            if let Some(slot) = kept_steps.get_mut(decl_index) {
                *slot = Some(step_indices);
            }
        }
        let mut default_flow: Option<(FlowId, Span)> = None;
        let mut flows = Vec::with_capacity(kept_flows.len());
        // Declarations left out by `unique_indices` have no slot and are
        // dropped unlowered; each kept flow's AST is dropped once lowered.
        for (flow_decl, step_indices) in program.flows.into_iter().zip(kept_steps) {
            let Some(step_indices) = step_indices else {
                continue;
            };
            let flow_id = FlowId::from_index(flows.len());
            let step_decls: Vec<&ast::StepDecl> =
                step_indices.iter().filter_map(|&step_index| flow_decl.steps.get(step_index)).collect();
            let flow = self.flow(&flow_decl, &step_decls, flow_id);
            if let Some(default) = flow_decl.default.as_ref().filter(|default| default.value) {
                match default_flow {
                    Some((first, first_span)) => self.report(IdError::DuplicateDefault {
                        flow: flow_decl.name.value.clone(),
                        span: default.span,
                        first_flow: self.flow_names.get(first.index()).cloned().unwrap_or_default(),
                        first: first_span,
                    }),
                    None => default_flow = Some((flow_id, default.span)),
                }
            }
            flows.push(flow);
        }

        let signal_decls = self.unique(&program.signals, |signal| &signal.name, IdKind::Signal);
        let signals = signal_decls.iter().map(|signal| self.signal(signal)).collect();
        let agent = self.agent(program.agent.as_ref());
        // A `goto_step` lowered after a flow (in a later flow or a signal)
        // can still mark it, so the flags are copied once everything is lowered.
        for (flow, incomplete) in flows.iter_mut().zip(&self.incomplete) {
            flow.incomplete = *incomplete;
        }
        let mut program =
            Program { agent, fields, context, tools, signals, flows, default_flow: default_flow.map(|(flow, _)| flow) };
        if self.asks_again {
            self.spell_out_ask_again(&mut program);
        }
        program
    }

    fn duration(&mut self, text: &ast::Text) -> Option<u64> {
        match parse_duration_ms(&text.value) {
            Ok(ms) => Some(ms),
            Err(problem) => {
                self.report(ValueError::InvalidDuration { text: text.value.clone(), problem, span: text.span });
                None
            }
        }
    }

    /// A setting that counts something, at least once.
    fn positive(&mut self, value: &Spanned<i64>, setting: &'static str) -> Option<u32> {
        match u32::try_from(value.value) {
            Ok(number) if number >= 1 => Some(number),
            _ => {
                self.report(ValueError::NotPositive { setting, value: value.value, span: value.span });
                None
            }
        }
    }

    /// Runs the type checker with the program's fields, these locals and
    /// the outputs of earlier workflow steps in scope.
    fn typed<T>(&mut self, locals: &[(String, Type)], check: impl FnOnce(&mut Checker<'_>) -> T) -> T {
        let scope = Scope {
            symbols: &self.symbols,
            fields_visible: true,
            locals,
            env_allowed: false,
            steps: self.step_outputs.as_ref(),
        };
        typed_in(scope, &mut self.errors, check)
    }

    fn template(&mut self, template: &ast::Template, locals: &[(String, Type)]) -> Template {
        self.typed(locals, |checker| checker.template(template))
    }

    fn condition(&mut self, expr: &ast::Expr, locals: &[(String, Type)]) -> Expr {
        self.typed(locals, |checker| checker.condition(expr))
    }

    fn expr(&mut self, expr: &ast::Expr, locals: &[(String, Type)]) -> Expr {
        self.typed(locals, |checker| checker.expr(expr))
    }

    fn value_for(&mut self, expr: &ast::Expr, target: &Type, what: &str, locals: &[(String, Type)]) -> Expr {
        self.typed(locals, |checker| checker.value_for(expr, target, what))
    }

    fn field(&mut self, name: &ast::Name) -> Option<FieldId> {
        if let Some((id, _)) = self.symbols.fields.get(&name.value) {
            return Some(*id);
        }
        let close = nearest(&name.value, self.symbols.fields.keys().map(String::as_str));
        self.report(NameError::UnknownField { name: name.value.clone(), span: name.span, close });
        None
    }

    fn fields(&mut self, names: &[ast::Name]) -> Vec<FieldId> {
        names.iter().filter_map(|name| self.field(name)).collect()
    }

    fn tool_ref(&mut self, name: &ast::Name) -> Option<ToolId> {
        if let Some(id) = self.tools.get(&name.value) {
            return Some(*id);
        }
        let close = nearest(&name.value, self.tools.keys().map(String::as_str));
        self.report(NameError::UnknownTool { name: name.value.clone(), span: name.span, close });
        None
    }

    fn writes(&mut self, assignments: &[ast::Assignment], locals: &[(String, Type)]) -> Vec<Write> {
        let mut writes = Vec::with_capacity(assignments.len());
        for assignment in assignments {
            let Some(field) = self.field(&assignment.name) else {
                self.expr(&assignment.value, locals);
                continue;
            };
            let target = self.symbols_type(field);
            let what = format!("the field `{}`", assignment.name.value);
            let value = self.value_for(&assignment.value, &target, &what, locals);
            if let Some(problem) = self.field_specs.get(field.index()).and_then(|spec| constant_breaks(&value, spec)) {
                self.report(LowerError::Expression(TypeError::NotAssignable {
                    what,
                    target,
                    found: value.ty.clone(),
                    problem,
                    span: value.span,
                }));
            }
            writes.push(Write { field, value });
        }
        writes
    }

    fn symbols_type(&self, field: FieldId) -> Type {
        self.field_types.get(field.index()).cloned().unwrap_or(Type::Unknown)
    }

    fn flow_ref(&mut self, name: &ast::Name, scope: Option<FlowScope>) -> Option<FlowId> {
        if let Some(flow) = self.flows.get(&name.value) {
            return Some(*flow);
        }
        let names_a_step = scope.is_some_and(|scope| self.step_in(scope.flow, &name.value).is_some());
        let close = nearest(&name.value, self.flow_names.iter().map(String::as_str));
        self.report(NameError::UnknownFlow { name: name.value.clone(), span: name.span, close, names_a_step });
        None
    }

    fn report(&mut self, error: impl Into<LowerError>) {
        self.errors.push(error.into());
    }

    /// Records that an edge or a step of `flow` was dropped.
    fn mark_incomplete(&mut self, flow: FlowId) {
        if let Some(flag) = self.incomplete.get_mut(flow.index()) {
            *flag = true;
        }
    }

    fn step_in(&self, flow: FlowId, name: &str) -> Option<StepId> {
        self.steps.get(flow.index()).and_then(|steps| steps.get(name)).copied()
    }
}

/// Runs the type checker in `scope`, keeping what it finds, in the order
/// found, among lowering's own errors ([`LowerError::Expression`]).
fn typed_in<T>(scope: Scope<'_>, errors: &mut Vec<LowerError>, check: impl FnOnce(&mut Checker<'_>) -> T) -> T {
    let mut type_errors = Vec::new();
    let typed = check(&mut Checker { scope, errors: &mut type_errors });
    errors.extend(type_errors.into_iter().map(LowerError::Expression));
    typed
}

/// The candidate a misspelt `name` most likely meant, for a did-you-mean.
fn goto_directive(flow: FlowId, span: Span) -> Directive {
    Directive { position: Some(Position::Goto { flow, data: Vec::new() }), span, ..Directive::default() }
}

fn complete_directive(span: Span) -> Directive {
    Directive { position: Some(Position::Complete { next: None }), span, ..Directive::default() }
}

/// How a constant written to a field breaks the field's declared range or
/// pattern (which the runtime would refuse on every run), if it does. The
/// value is folded first, so `-5` (a negation, not a literal) and `5 * 3`
/// are checked as `50` is. The pattern is searched, not anchored, as the
/// runtime's validation does.
fn constant_breaks(value: &Expr, spec: &ValueType) -> Option<Unassignable> {
    match super::fold::fold(value)? {
        serde_json::Value::Number(number) if matches!(spec.kind, TypeKind::Int | TypeKind::Float) => {
            let measure = number.as_f64()?;
            let below = spec.min.is_some_and(|min| measure < min);
            let above = spec.max.is_some_and(|max| measure > max);
            (below || above).then(|| Unassignable::OutOfRange {
                literal: number.to_string(),
                min: spec.min.map(bound),
                max: spec.max.map(bound),
            })
        }
        serde_json::Value::String(text) if matches!(spec.kind, TypeKind::String) => {
            let pattern = spec.pattern.as_ref()?;
            let regex = regex::Regex::new(pattern).ok()?;
            (!regex.is_match(&text))
                .then(|| Unassignable::NotMatchingPattern { literal: text, pattern: pattern.clone() })
        }
        _ => None,
    }
}

/// A bound as the schema writes it: `10`, not `10.0`.
fn bound(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{value:.0}") } else { value.to_string() }
}

#[cfg(test)]
mod tests;
