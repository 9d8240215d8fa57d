//! Lowering: the AST of either front end into the resolved, typed IR.
//!
//! Every name is resolved to an index and every expression is typed. What
//! cannot be resolved is reported (`duplicate_id`, `invalid_id`,
//! `unknown_target`, `cross_flow_step`, `unknown_field`, `unknown_tool`,
//! `invalid_tool`, `wrong_arguments`, `type_mismatch`, `invalid_directive`,
//! `invalid_step`, `invalid_duration`, `invalid_schema`, …) and left out of
//! the IR — an edge to nowhere is dropped rather than represented — and
//! lowering carries on, so one run reports every problem.

use super::*;
use crate::diag::{Code, Diagnostic, did_you_mean};
use crate::duration::{DurationError, MAX_DURATION_DAYS, parse_duration_ms};
use crate::expr::typeck::{Checker, Scope, StepOutputs, Symbols, assignability};
use crate::expr::{Expr, ExprKind, Template, Type};
use crate::source::{Span, Spanned};
use crate::syntax::ast;
use std::collections::HashMap;

/// Words that cannot name a field, flow, step or anything else.
pub const RESERVED_WORDS: &[&str] =
    &["and", "or", "not", "in", "is", "set", "true", "false", "null", "context", "env", "steps", "end"];

/// Lowers a parsed program. The IR is always produced; it is only safe to
/// run when no returned diagnostic is an error.
///
/// The AST is consumed: each flow's syntax tree is dropped as soon as the
/// flow is lowered, so the AST and the IR of a large program are never both
/// whole in memory. Flows are most of both.
pub fn lower(program: ast::Program) -> (Program, Vec<Diagnostic>) {
    let mut lowerer = Lowerer::default();
    let ir = lowerer.program(program);
    (ir, lowerer.diagnostics)
}

#[derive(Default)]
struct Lowerer {
    diagnostics: Vec<Diagnostic>,
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
    /// While a workflow's steps are lowered: the outputs earlier steps
    /// record, for `steps.NAME.output`.
    step_outputs: Option<StepOutputs>,
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

/// Which declarations share an id space, for messages.
#[derive(Clone, Copy)]
enum IdKind {
    Field,
    ContextKey,
    Tool,
    Param,
    Signal,
    Flow,
    Step,
    Variable,
}

impl IdKind {
    fn noun(self) -> &'static str {
        match self {
            IdKind::Field => "field",
            IdKind::ContextKey => "context key",
            IdKind::Tool => "tool",
            IdKind::Param => "param",
            IdKind::Signal => "signal",
            IdKind::Flow => "flow",
            IdKind::Step => "step",
            IdKind::Variable => "variable",
        }
    }
}

impl Lowerer {
    fn program(&mut self, program: ast::Program) -> Program {
        let fields = self.declarations(&program.schema, IdKind::Field);
        self.field_types = fields.iter().map(|field| field.ty.to_type()).collect();
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
                    Some((first, first_span)) => self.diagnostics.push(
                        Diagnostic::new(Code::DuplicateDefault, "more than one flow is marked `default`")
                            .at(default.span, format!("`{}` is also a default", flow_decl.name.value))
                            .with_label(
                                first_span,
                                format!("`{}` is the default already", self.flow_names[first.index()]),
                            )
                            .with_help("keep `default` on one flow: routing falls back to it when nothing matches"),
                    ),
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
        Program { agent, fields, context, tools, signals, flows, default_flow: default_flow.map(|(flow, _)| flow) }
    }

    // ------------------------------------------------------------ ids

    /// Keeps the first declaration of each name, reporting later ones as
    /// `duplicate_id` and bad names as `invalid_id`.
    fn unique<'a, T>(&mut self, decls: &'a [T], name_of: impl Fn(&T) -> &ast::Name, kind: IdKind) -> Vec<&'a T> {
        self.unique_indices(decls, name_of, kind).into_iter().filter_map(|index| decls.get(index)).collect()
    }

    /// [`Self::unique`], as the indices of the declarations kept.
    fn unique_indices<T>(&mut self, decls: &[T], name_of: impl Fn(&T) -> &ast::Name, kind: IdKind) -> Vec<usize> {
        let mut seen: HashMap<&str, Span> = HashMap::with_capacity(decls.len());
        let mut kept = Vec::with_capacity(decls.len());
        for (index, decl) in decls.iter().enumerate() {
            let name = name_of(decl);
            self.check_id(name, kind);
            if let Some(first) = seen.get(name.value.as_str()) {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::DuplicateId,
                        format!("the {} `{}` is declared twice", kind.noun(), name.value),
                    )
                    .at(name.span, "declared again here")
                    .with_label(*first, "first declared here")
                    .with_help(format!("rename one of them: {} ids are unique", kind.noun())),
                );
                continue;
            }
            seen.insert(&name.value, name.span);
            kept.push(index);
        }
        kept
    }

    fn check_id(&mut self, name: &ast::Name, kind: IdKind) {
        let text = name.value.as_str();
        let well_formed = text.chars().next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && text.chars().all(|character| character.is_ascii_alphanumeric() || character == '_');
        if !well_formed {
            let suggestion: String =
                text.chars().map(|character| if character.is_ascii_alphanumeric() { character } else { '_' }).collect();
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidId, format!("`{text}` is not a valid {} id", kind.noun()))
                    .at(name.span, "ids are letters, digits and `_`, not starting with a digit")
                    .with_help(format!("try `{suggestion}` (a hyphen would read as subtraction)")),
            );
        } else if RESERVED_WORDS.contains(&text) {
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidId, format!("`{text}` is a reserved word"))
                    .at(name.span, format!("cannot name a {}", kind.noun()))
                    .with_help(format!("reserved words are: {}", RESERVED_WORDS.join(", "))),
            );
        }
    }

    /// Steps that get an id, by index: the first of each name, reporting the
    /// rest.
    fn step_indices(&mut self, flow: &ast::FlowDecl) -> Vec<usize> {
        let mut seen: HashMap<&str, Span> = HashMap::with_capacity(flow.steps.len());
        let mut kept = Vec::with_capacity(flow.steps.len());
        for (index, step) in flow.steps.iter().enumerate() {
            let Some(id) = &step.id else {
                continue;
            };
            self.check_id(id, IdKind::Step);
            if let Some(first) = seen.get(id.value.as_str()) {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::DuplicateId,
                        format!("the step `{}` is declared twice in flow `{}`", id.value, flow.name.value),
                    )
                    .at(id.span, "declared again here")
                    .with_label(*first, "first declared here")
                    .with_help("rename one of them: step ids are unique within their flow"),
                );
                continue;
            }
            seen.insert(&id.value, id.span);
            kept.push(index);
        }
        kept
    }

    // ------------------------------------------------------------ types

    fn declarations(&mut self, decls: &[ast::FieldDecl], kind: IdKind) -> Vec<Field> {
        self.unique(decls, |decl| &decl.name, kind)
            .into_iter()
            .map(|decl| Field { name: decl.name.value.clone(), ty: self.value_type(&decl.ty), span: decl.name.span })
            .collect()
    }

    fn value_type(&mut self, decl: &ast::TypeExpr) -> ValueType {
        const TYPE_NAMES: &[&str] = &["string", "int", "float", "bool", "date", "datetime", "enum", "list", "object"];
        let name = decl.name.value.as_str();
        let kind = match name {
            "string" => TypeKind::String,
            "int" => TypeKind::Int,
            "float" => TypeKind::Float,
            "bool" => TypeKind::Bool,
            "date" => TypeKind::Date,
            "datetime" => TypeKind::DateTime,
            "enum" => self.enum_values(decl),
            "list" => match &decl.items {
                Some(items) => TypeKind::List { items: Box::new(self.value_type(items)) },
                None => {
                    self.schema_error(
                        decl.name.span,
                        "a list needs `items`",
                        "say what the list holds: `list(string)` in .flow, `items: string` in YAML",
                    );
                    TypeKind::Unknown
                }
            },
            "object" => {
                match &decl.fields {
                    Some(fields) => TypeKind::Object { fields: self.declarations(&fields.value, IdKind::Field) },
                    None => {
                        self.schema_error(decl.name.span, "an object needs `fields`", "declare its fields: `object { name: string }` in .flow, `fields: { name: string }` in YAML");
                        TypeKind::Unknown
                    }
                }
            }
            _ => {
                let help = match did_you_mean(name, TYPE_NAMES.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("the types are {}", TYPE_NAMES.join(", ")),
                };
                self.diagnostics.push(
                    Diagnostic::new(Code::UnknownType, format!("unknown type `{name}`"))
                        .at(decl.name.span, "not a type")
                        .with_help(help),
                );
                TypeKind::Unknown
            }
        };
        self.check_options(decl, &kind);
        ValueType {
            kind,
            description: decl.description.as_ref().map(|text| text.value.clone()),
            min: decl.min.as_ref().map(|number| number.value.as_f64()),
            max: decl.max.as_ref().map(|number| number.value.as_f64()),
            pattern: decl.pattern.as_ref().map(|text| text.value.clone()),
            examples: decl.examples.iter().map(|text| text.value.clone()).collect(),
        }
    }

    fn enum_values(&mut self, decl: &ast::TypeExpr) -> TypeKind {
        let Some(values) = decl.values.as_ref().filter(|values| !values.value.is_empty()) else {
            let span = decl.values.as_ref().map_or(decl.name.span, |values| values.span);
            self.schema_error(
                span,
                "an enum needs at least one value",
                "list its values: `enum(free, pro)` in .flow, `values: [free, pro]` in YAML",
            );
            return TypeKind::Unknown;
        };
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for value in &values.value {
            if let Some(first) = seen.insert(&value.value, value.span) {
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidSchema, format!("the enum value `{}` is listed twice", value.value))
                        .at(value.span, "listed again here")
                        .with_label(first, "first listed here")
                        .with_help("remove the repeated value"),
                );
            } else if value.value.is_empty() {
                self.schema_error(value.span, "an enum value cannot be empty", "remove the empty value");
            }
        }
        TypeKind::Enum { values: values.value.iter().map(|value| value.value.clone()).collect() }
    }

    fn check_options(&mut self, decl: &ast::TypeExpr, kind: &TypeKind) {
        let numeric_or_list =
            matches!(kind, TypeKind::Int | TypeKind::Float | TypeKind::List { .. } | TypeKind::Unknown);
        for bound in [&decl.min, &decl.max].into_iter().flatten() {
            if !numeric_or_list {
                self.schema_error(
                    bound.span,
                    "`min`/`max` apply to numbers and lists",
                    "remove it, or use `pattern` for strings",
                );
            }
        }
        if let (Some(min), Some(max)) = (&decl.min, &decl.max)
            && min.value.as_f64() > max.value.as_f64()
        {
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidSchema, "`min` is greater than `max`")
                    .at(min.span, "the lower bound")
                    .with_label(max.span, "the upper bound")
                    .with_help("swap the bounds"),
            );
        }
        if let Some(pattern) = &decl.pattern {
            if !matches!(kind, TypeKind::String | TypeKind::Unknown) {
                self.schema_error(pattern.span, "`pattern` applies to strings", "remove it");
            } else if let Err(error) = regex::Regex::new(&pattern.value) {
                let detail = error.to_string().lines().last().unwrap_or("invalid").trim().to_string();
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidSchema, format!("`pattern` is not a valid regex: {detail}"))
                        .at(pattern.span, "this regex")
                        .with_help("patterns use Rust regex syntax (like RE2: no look-around or backreferences)"),
                );
            }
        }
        if let Some(values) = &decl.values
            && !matches!(kind, TypeKind::Enum { .. } | TypeKind::Unknown)
        {
            self.schema_error(values.span, "`values` apply to enums", "use `type: enum` or remove `values`");
        }
        if let Some(items) = &decl.items
            && !matches!(kind, TypeKind::List { .. } | TypeKind::Unknown)
        {
            self.schema_error(items.span, "`items` apply to lists", "use `type: list` or remove `items`");
        }
        if let Some(fields) = &decl.fields
            && !matches!(kind, TypeKind::Object { .. } | TypeKind::Unknown)
        {
            self.schema_error(fields.span, "`fields` apply to objects", "use `type: object` or remove `fields`");
        }
    }

    fn schema_error(&mut self, span: Span, message: &str, help: &str) {
        self.diagnostics.push(Diagnostic::new(Code::InvalidSchema, message).at(span, "here").with_help(help));
    }

    // ------------------------------------------------------------ values

    fn duration(&mut self, text: &ast::Text) -> Option<u64> {
        let diagnostic = match parse_duration_ms(&text.value) {
            Ok(ms) => return Some(ms),
            Err(DurationError::Malformed) => {
                Diagnostic::new(Code::InvalidDuration, format!("`{}` is not a duration", text.value))
                    .at(text.span, "expected a whole number and a unit")
                    .with_help("write e.g. `500ms`, `30s`, `10m`, `2h` or `1d`")
            }
            Err(DurationError::TooLong) => {
                Diagnostic::new(Code::InvalidDuration, format!("`{}` is longer than flowc allows", text.value))
                    .at(text.span, format!("longer than `{MAX_DURATION_DAYS}d`"))
                    .with_help(format!("a duration is at most `{MAX_DURATION_DAYS}d` (about ten years)"))
            }
        };
        self.diagnostics.push(diagnostic);
        None
    }

    fn positive(&mut self, value: &Spanned<i64>, what: &str) -> Option<u32> {
        match u32::try_from(value.value) {
            Ok(number) if number >= 1 => Some(number),
            _ => {
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidValue, format!("`{what}` must be a whole number of at least 1"))
                        .at(value.span, format!("found {}", value.value))
                        .with_help(format!("set `{what}` to 1 or more")),
                );
                None
            }
        }
    }

    fn checker<'a>(&'a self, locals: &'a [(String, Type)], diagnostics: &'a mut Vec<Diagnostic>) -> Checker<'a> {
        Checker {
            scope: Scope {
                symbols: &self.symbols,
                fields_visible: true,
                locals,
                env_allowed: false,
                steps: self.step_outputs.as_ref(),
            },
            diagnostics,
        }
    }

    fn template(&mut self, template: &ast::Template, locals: &[(String, Type)]) -> Template {
        let mut diagnostics = std::mem::take(&mut self.diagnostics);
        let typed = self.checker(locals, &mut diagnostics).template(template);
        self.diagnostics = diagnostics;
        typed
    }

    fn condition(&mut self, expr: &ast::Expr, locals: &[(String, Type)]) -> Expr {
        let mut diagnostics = std::mem::take(&mut self.diagnostics);
        let typed = self.checker(locals, &mut diagnostics).condition(expr);
        self.diagnostics = diagnostics;
        typed
    }

    fn expr(&mut self, expr: &ast::Expr, locals: &[(String, Type)]) -> Expr {
        let mut diagnostics = std::mem::take(&mut self.diagnostics);
        let typed = self.checker(locals, &mut diagnostics).expr(expr);
        self.diagnostics = diagnostics;
        typed
    }

    fn value_for(&mut self, expr: &ast::Expr, target: &Type, what: &str, locals: &[(String, Type)]) -> Expr {
        let mut diagnostics = std::mem::take(&mut self.diagnostics);
        let typed = self.checker(locals, &mut diagnostics).value_for(expr, target, what);
        self.diagnostics = diagnostics;
        typed
    }

    fn field(&mut self, name: &ast::Name) -> Option<FieldId> {
        if let Some((id, _)) = self.symbols.fields.get(&name.value) {
            return Some(*id);
        }
        let help = match did_you_mean(&name.value, self.symbols.fields.keys().map(String::as_str)) {
            Some(close) => format!("did you mean `{close}`?"),
            None => "declare it in `schema`".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::new(Code::UnknownField, format!("unknown field `{}`", name.value))
                .at(name.span, "not declared in `schema`")
                .with_help(help),
        );
        None
    }

    fn fields(&mut self, names: &[ast::Name]) -> Vec<FieldId> {
        names.iter().filter_map(|name| self.field(name)).collect()
    }

    fn tool_ref(&mut self, name: &ast::Name) -> Option<ToolId> {
        if let Some(id) = self.tools.get(&name.value) {
            return Some(*id);
        }
        let help = match did_you_mean(&name.value, self.tools.keys().map(String::as_str)) {
            Some(close) => format!("did you mean `{close}`?"),
            None => "declare it under `tools`".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::new(Code::UnknownTool, format!("unknown tool `{}`", name.value))
                .at(name.span, "no tool has this name")
                .with_help(help),
        );
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
            writes.push(Write { field, value });
        }
        writes
    }

    fn symbols_type(&self, field: FieldId) -> Type {
        self.field_types.get(field.index()).cloned().unwrap_or(Type::Unknown)
    }

    // ------------------------------------------------------------ agent

    fn agent(&mut self, agent: Option<&ast::Agent>) -> Agent {
        let Some(agent) = agent else {
            return Agent { name: None, identity: None, rules: Vec::new(), limits: Limits::default() };
        };
        let mut limits = Limits::default();
        if let Some(value) = &agent.limits.max_auto_steps
            && let Some(number) = self.positive(value, "max_auto_steps")
        {
            limits.max_auto_steps = number;
        }
        if let Some(value) = &agent.limits.max_tool_rounds
            && let Some(number) = self.positive(value, "max_tool_rounds")
        {
            limits.max_tool_rounds = number;
        }
        if let Some(value) = &agent.limits.max_turn_tokens {
            limits.max_turn_tokens = self.positive(value, "max_turn_tokens").map(u64::from);
        }
        if let Some(text) = &agent.limits.turn_timeout
            && let Some(ms) = self.duration(text)
        {
            limits.turn_timeout_ms = ms;
        }
        Agent {
            name: agent.name.as_ref().map(|name| name.value.clone()),
            identity: agent.identity.as_ref().map(|identity| self.template(identity, &[])),
            rules: agent.rules.iter().map(|rule| self.template(rule, &[])).collect(),
            limits,
        }
    }

    // ------------------------------------------------------------ tools

    fn tool(&mut self, tool: &ast::ToolDecl, params: Vec<Field>, returns: Option<Vec<Field>>) -> Tool {
        let param_locals: Vec<(String, Type)> =
            params.iter().map(|param| (param.name.clone(), param.ty.to_type())).collect();
        let implementation = match tool.implementations.as_slice() {
            [] => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::InvalidTool,
                        format!("the tool `{}` has no implementation", tool.name.value),
                    )
                    .at(tool.name.span, "needs one of `http`, `exec` or `builtin`")
                    .with_help("give it one of `http`, `exec` (a program and its arguments) or `builtin` (now, uuid or echo)"),
                );
                None
            }
            [only] => self.tool_impl(only, &param_locals),
            [first, second, ..] => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::InvalidTool,
                        format!("the tool `{}` has more than one implementation", tool.name.value),
                    )
                    .at(second.span(), "a second implementation")
                    .with_label(first.span(), "the first")
                    .with_help("a tool has exactly one of `http`, `exec` or `builtin`"),
                );
                self.tool_impl(first, &param_locals)
            }
        };
        Tool {
            name: tool.name.value.clone(),
            description: tool.description.as_ref().map(|text| text.value.clone()),
            params,
            returns,
            implementation,
            span: tool.name.span,
        }
    }

    fn tool_impl(&mut self, implementation: &ast::ToolImpl, params: &[(String, Type)]) -> Option<ToolImpl> {
        match implementation {
            ast::ToolImpl::Http(http) => {
                let method = match http.method.value.to_ascii_uppercase().as_str() {
                    "GET" => HttpMethod::Get,
                    "POST" => HttpMethod::Post,
                    "PUT" => HttpMethod::Put,
                    "PATCH" => HttpMethod::Patch,
                    "DELETE" => HttpMethod::Delete,
                    _ => {
                        self.diagnostics.push(
                            Diagnostic::new(Code::InvalidTool, format!("unknown HTTP method `{}`", http.method.value))
                                .at(http.method.span, "not an HTTP method flowc sends")
                                .with_help("use GET, POST, PUT, PATCH or DELETE"),
                        );
                        return None;
                    }
                };
                let url = self.tool_template(&http.url, params, false);
                let headers = http
                    .headers
                    .iter()
                    .map(|(name, value)| (name.value.clone(), self.tool_template(value, params, true)))
                    .collect();
                let body = http.body.as_ref().map(|body| self.body(body, params));
                let timeout_ms =
                    http.timeout.as_ref().and_then(|text| self.duration(text)).unwrap_or(DEFAULT_TOOL_TIMEOUT_MS);
                Some(ToolImpl::Http { method, url, headers, body, timeout_ms })
            }
            ast::ToolImpl::Exec(exec) => {
                if exec.command.is_empty() || exec.command.iter().all(|part| part.value.trim().is_empty()) {
                    self.diagnostics.push(
                        Diagnostic::new(Code::InvalidTool, "`exec` needs a program to run")
                            .at(exec.span, "no program given")
                            .with_help("write `exec: [./tools/script.sh]`: the program, then its arguments"),
                    );
                    return None;
                }
                let timeout_ms =
                    exec.timeout.as_ref().and_then(|text| self.duration(text)).unwrap_or(DEFAULT_TOOL_TIMEOUT_MS);
                Some(ToolImpl::Exec {
                    command: exec.command.iter().map(|part| part.value.clone()).collect(),
                    timeout_ms,
                })
            }
            ast::ToolImpl::Builtin { name, .. } => {
                let builtin = match name.value.as_str() {
                    "now" => Builtin::Now,
                    "uuid" => Builtin::Uuid,
                    "echo" => Builtin::Echo,
                    other => {
                        let help = match did_you_mean(other, ["now", "uuid", "echo"]) {
                            Some(close) => format!("did you mean `{close}`?"),
                            None => "the builtins are now, uuid and echo".to_string(),
                        };
                        self.diagnostics.push(
                            Diagnostic::new(Code::InvalidTool, format!("unknown builtin `{other}`"))
                                .at(name.span, "not a builtin tool")
                                .with_help(help),
                        );
                        return None;
                    }
                };
                Some(ToolImpl::Builtin { builtin })
            }
        }
    }

    fn tool_template(&mut self, template: &ast::Template, params: &[(String, Type)], env_allowed: bool) -> Template {
        let mut diagnostics = std::mem::take(&mut self.diagnostics);
        let typed = Checker {
            scope: Scope { symbols: &self.symbols, fields_visible: false, locals: params, env_allowed, steps: None },
            diagnostics: &mut diagnostics,
        }
        .template(template);
        self.diagnostics = diagnostics;
        typed
    }

    fn body(&mut self, body: &ast::BodyValue, params: &[(String, Type)]) -> Body {
        match body {
            ast::BodyValue::Null(_) => Body::Null,
            ast::BodyValue::Bool(value) => Body::Bool(value.value),
            ast::BodyValue::Number(number) => Body::Number(match number.value {
                ast::Number::Int(value) => value.into(),
                ast::Number::Float(value) => serde_json::Number::from_f64(value).unwrap_or_else(|| 0.into()),
            }),
            ast::BodyValue::String(template) => Body::String(self.tool_template(template, params, false)),
            ast::BodyValue::List(items) => Body::List(items.value.iter().map(|item| self.body(item, params)).collect()),
            ast::BodyValue::Object(members) => Body::Object(
                members.value.iter().map(|(name, value)| (name.value.clone(), self.body(value, params))).collect(),
            ),
        }
    }

    // ------------------------------------------------------------ signals

    fn signal(&mut self, signal: &ast::SignalDecl) -> Signal {
        let guard = signal.guard.iter().map(|expr| self.condition(expr, &[])).collect();
        let phase = match signal.phase.as_ref().map(|phase| (phase.value.as_str(), phase.span)) {
            None | Some(("pre", _)) => Phase::Pre,
            Some(("post", _)) => Phase::Post,
            Some(("both", _)) => Phase::Both,
            Some((other, span)) => {
                self.invalid_value(span, &format!("unknown phase `{other}`"), "a signal's phase is pre, post or both");
                Phase::Pre
            }
        };
        let behavior = match signal.behavior.as_ref().map(|behavior| (behavior.value.as_str(), behavior.span)) {
            None | Some(("always", _)) => Behavior::Always,
            Some(("once", _)) => Behavior::Once,
            Some(("cooldown", span)) => match &signal.cooldown {
                Some(text) => Behavior::Cooldown { cooldown_ms: self.duration(text).unwrap_or(0) },
                None => {
                    self.invalid_value(span, "`cooldown` needs a duration", "add `cooldown: 10m`");
                    Behavior::Always
                }
            },
            Some((other, span)) => {
                self.invalid_value(
                    span,
                    &format!("unknown behavior `{other}`"),
                    "a signal's behavior is always, once or cooldown",
                );
                Behavior::Always
            }
        };
        if let Some(cooldown) = &signal.cooldown
            && !matches!(behavior, Behavior::Cooldown { .. })
        {
            self.invalid_value(
                cooldown.span,
                "`cooldown` applies only with `behavior: cooldown`",
                "add `behavior: cooldown` or remove `cooldown`",
            );
        }
        let extract = self.fields(&signal.extract);
        let then = signal.then.as_ref().and_then(|then| match then {
            ast::Then::Target(name) => self.signal_target(name),
            ast::Then::Directive(directive) => Some(self.directive(directive, None, &[])),
        });
        Signal {
            name: signal.name.value.clone(),
            when: signal.when.iter().map(|text| text.value.clone()).collect(),
            guard,
            phase,
            behavior,
            extract,
            then,
            span: signal.name.span,
        }
    }

    fn invalid_value(&mut self, span: Span, message: &str, help: &str) {
        self.diagnostics.push(Diagnostic::new(Code::InvalidValue, message).at(span, "here").with_help(help));
    }

    /// A signal's bare target: a flow (there is no current flow to find a
    /// step in when the signal is declared).
    fn signal_target(&mut self, name: &ast::Name) -> Option<Directive> {
        if let Some(flow) = self.flows.get(&name.value) {
            return Some(goto_directive(*flow, name.span));
        }
        if name.value == "end" {
            return Some(complete_directive(name.span));
        }
        let directive = misspelt_directive(&name.value);
        let help = match did_you_mean(&name.value, self.flow_names.iter().map(String::as_str)) {
            Some(close) => format!("did you mean `{close}`?"),
            None if directive.is_some() => directive.unwrap_or_default(),
            None if self.step_owners.contains_key(&name.value) => {
                "a signal's target is a flow; for a step use `goto_step` with its flow (`goto_step F.S` in .flow, `goto_step: { flow: F, step: S }` in YAML)".to_string()
            }
            None => "a signal's target names a flow".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::new(Code::UnknownTarget, format!("`{}` names no flow", name.value))
                .at(name.span, "no flow has this id")
                .with_help(help),
        );
        None
    }

    // ------------------------------------------------------------ flows

    fn flow(&mut self, flow: &ast::FlowDecl, step_decls: &[&ast::StepDecl], flow_id: FlowId) -> Flow {
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
            self.diagnostics.push(
                Diagnostic::new(Code::MissingEntry, format!("the flow `{}` has no steps", flow.name.value))
                    .at(flow.name.span, "a flow starts at its first step")
                    .with_help("add at least one step"),
            );
        }
        for step in flow.steps.iter().filter(|step| step.id.is_none()) {
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidStep, "a step needs an `id`")
                    .at(
                        Span::new(step.span.start, step.span.start.saturating_add(1).min(step.span.end)),
                        "this step has no id",
                    )
                    .with_help("add `id: some_name`: targets and traces refer to steps by id"),
            );
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
        }
    }

    /// Lowers a flow's steps; in a workflow (every step auto), each step's
    /// expressions may read the outputs of the steps before it, and its
    /// branches its own ([`Lowerer::step`] records each step's type).
    fn steps_of(&mut self, step_decls: &[&ast::StepDecl], scope: FlowScope) -> Vec<Step> {
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
    fn output_type(&self, actions: &[Action]) -> Option<Type> {
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
    fn on_error_kinds(&mut self, step_decls: &[&ast::StepDecl], workflow: bool) {
        for step in step_decls {
            let (span, what) = match &step.on_error {
                Some(ast::OnError::Directive(directive)) if workflow => (directive.span, "a directive"),
                Some(ast::OnError::Continue(span)) if !workflow => (*span, "`continue`"),
                Some(ast::OnError::Retry { span, .. }) if !workflow => (*span, "`retry`"),
                _ => continue,
            };
            let name = step.id.as_ref().map(|id| id.value.as_str()).unwrap_or_default();
            let diagnostic = if workflow {
                Diagnostic::new(Code::InvalidStep, format!("`on_error` of the workflow step `{name}` is {what}"))
                    .at(span, "workflow steps take a policy")
                    .with_help("a workflow step takes `stop`, `continue` or `retry N backoff DURATION`")
            } else {
                Diagnostic::new(Code::InvalidStep, format!("`on_error` of the conversation step `{name}` is {what}"))
                    .at(span, "only workflow steps continue or retry")
                    .with_help("a conversation step takes a directive: `reply \"…\"` (and stay), `goto_step STEP` or `abort \"…\"`")
            };
            self.diagnostics.push(diagnostic);
        }
    }

    fn flow_ref(&mut self, name: &ast::Name, scope: Option<FlowScope>) -> Option<FlowId> {
        if let Some(flow) = self.flows.get(&name.value) {
            return Some(*flow);
        }
        let names_a_step = scope.is_some_and(|scope| self.step_in(scope.flow, &name.value).is_some());
        let help = match did_you_mean(&name.value, self.flow_names.iter().map(String::as_str)) {
            Some(close) => format!("did you mean `{close}`?"),
            None if names_a_step => format!("`{}` is a step; jump to it with `goto_step`", name.value),
            None => "declare the flow under `flows`".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::new(Code::UnknownTarget, format!("`{}` names no flow", name.value))
                .at(name.span, "no flow has this id")
                .with_help(help),
        );
        None
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

    fn step(&mut self, step: &ast::StepDecl, scope: FlowScope) -> Step {
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
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidStep, format!("the auto step `{name}` collects `{}`", first.value))
                    .at(first.span, "an auto step never waits for the user")
                    .with_help("remove `auto` to ask the user, or set the field with an action"),
            );
        }
        let wait_ms = step.wait.as_ref().and_then(|text| {
            let ms = self.duration(text);
            if !auto {
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidStep, format!("`wait` on the step `{name}`, which is not auto"))
                        .at(text.span, "only auto steps wait")
                        .with_help("make the step auto (`auto step` in .flow, `auto: true` in YAML): a wait pauses a workflow after the step's actions"),
                );
            }
            ms
        });
        let max_asks = match &step.max_asks {
            Some(value) => match u32::try_from(value.value) {
                Ok(asks) if asks >= 1 => asks,
                _ => {
                    self.diagnostics.push(
                        Diagnostic::new(Code::InvalidStep, "`max_asks` must be at least 1")
                            .at(value.span, format!("found {}", value.value))
                            .with_help("`max_asks` counts every ask, the first included"),
                    );
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
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidDirective, "`branches` is empty")
                        .at(entries.span, "no entries")
                        .with_help("add entries with `then`, or remove `branches`"),
                );
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

    fn branch(&mut self, entry: &ast::Branch, scope: FlowScope) -> Option<Branch> {
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
    fn then_target(&mut self, name: &ast::Name, scope: FlowScope) -> Option<Then> {
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

    fn next(&mut self, name: &ast::Name, scope: FlowScope) -> Option<Next> {
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
    fn report_step_target(&mut self, name: &ast::Name, scope: FlowScope, flows_allowed: bool) {
        self.mark_incomplete(scope.flow);
        if let Some(owner) = self.step_owners.get(&name.value).and_then(|owners| owners.first()) {
            let flow_name = self.flow_names.get(owner.index()).cloned().unwrap_or_default();
            self.diagnostics.push(
                Diagnostic::new(
                    Code::CrossFlowStep,
                    format!("`{}` is a step of another flow (`{flow_name}`)", name.value),
                )
                .at(name.span, "a bare name only names a step of this flow")
                .with_help(format!(
                    "jump there with `goto_step`: `{{ goto_step {flow_name}.{step} }}` in .flow, `{{ goto_step: {{ flow: {flow_name}, step: {step} }} }}` in YAML",
                    step = name.value
                )),
            );
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
        let what = if flows_allowed { "step or flow" } else { "step" };
        let directive = if flows_allowed { misspelt_directive(&name.value) } else { None };
        let help = match did_you_mean(&name.value, candidates) {
            Some(close) => format!("did you mean `{close}`?"),
            None if directive.is_some() => directive.unwrap_or_default(),
            None if !flows_allowed && self.flows.contains_key(&name.value) => {
                format!(
                    "`next` names a step or `end`; to enter the flow `{}`, branch to it or emit a `goto`",
                    name.value
                )
            }
            None if flows_allowed => "name a step of this flow, a flow, or write a directive".to_string(),
            None => "name a step of this flow, or `end`".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::new(Code::UnknownTarget, format!("`{}` names no {what}", name.value))
                .at(name.span, format!("no {what} has this id"))
                .with_help(help),
        );
    }

    // ------------------------------------------------------------ directives

    fn directive(
        &mut self,
        directive: &ast::Directive,
        scope: Option<FlowScope>,
        locals: &[(String, Type)],
    ) -> Directive {
        let mut positions: Vec<(&str, Span, Option<Position>)> = Vec::new();
        if let Some(goto) = &directive.goto {
            let position = self.goto(goto, scope, locals);
            positions.push(("goto", goto.span, position));
        }
        if let Some(goto_step) = &directive.goto_step {
            let position = self.goto_step(goto_step, scope);
            positions.push(("goto_step", goto_step.span, position));
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
            // Only the first position is kept: the others' edges are lost.
            if let Some(scope) = scope {
                self.mark_incomplete(scope.flow);
            }
            self.diagnostics.push(
                Diagnostic::new(
                    Code::InvalidDirective,
                    format!("a directive has both `{first_key}` and `{second_key}`"),
                )
                .at(*second_span, "a second position field")
                .with_label(*first_span, "the first position field")
                .with_help(
                    "a directive moves the conversation one way: keep one of goto, goto_step, complete, abort, reset",
                ),
            );
        }
        if let (Some(reply), Some(abort)) = (&directive.reply, &directive.abort) {
            self.diagnostics.push(
                Diagnostic::new(Code::ReplyWithAbort, "`reply` together with `abort` in one directive")
                    .at(reply.span, "this reply would be dropped")
                    .with_label(abort.span, "abort wins over reply")
                    .with_help("give the reason to `abort` instead, or emit the reply from another step"),
            );
        }
        let empty = directive.goto.is_none()
            && directive.goto_step.is_none()
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
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidDirective, "an empty directive")
                    .at(directive.span, "does nothing")
                    .with_help("give it a key: goto, goto_step, complete, abort, reset, reply, set, …"),
            );
        }
        let set_context =
            directive.set_context.iter().filter_map(|assignment| self.context_write(assignment, locals)).collect();
        Directive {
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

    fn goto(&mut self, goto: &ast::Goto, scope: Option<FlowScope>, locals: &[(String, Type)]) -> Option<Position> {
        let data = self.writes(&goto.data, locals);
        let Some(name) = &goto.flow else {
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidDirective, "`goto` names no flow")
                    .at(goto.span, "empty goto")
                    .with_help("write `goto: FLOW` or `goto: { flow: FLOW, data: {...} }`"),
            );
            return None;
        };
        let flow = self.flow_ref(name, scope)?;
        Some(Position::Goto { flow, data })
    }

    fn goto_step(&mut self, goto_step: &ast::GotoStep, scope: Option<FlowScope>) -> Option<Position> {
        let Some(step_name) = &goto_step.step else {
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidDirective, "`goto_step` names no step")
                    .at(goto_step.span, "empty goto_step")
                    .with_help("write `goto_step: STEP` or `goto_step: { flow: FLOW, step: STEP }`"),
            );
            return None;
        };
        let flow = match (&goto_step.flow, scope) {
            (Some(flow_name), _) => self.flow_ref(flow_name, scope)?,
            (None, Some(scope)) => scope.flow,
            (None, None) => {
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidDirective, "`goto_step` outside a flow must name its flow")
                        .at(step_name.span, "which flow's step?")
                        .with_help(format!(
                            "name the flow: `goto_step FLOW.{0}` in .flow, `goto_step: {{ flow: FLOW, step: {0} }}` in YAML",
                            step_name.value
                        )),
                );
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
                let help = match did_you_mean(&step_name.value, candidates) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("name a step of the flow `{flow_name}`"),
                };
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::UnknownTarget,
                        format!("the flow `{flow_name}` has no step `{}`", step_name.value),
                    )
                    .at(step_name.span, "no step has this id")
                    .with_help(help),
                );
                None
            }
        }
    }

    fn context_write(&mut self, assignment: &ast::Assignment, locals: &[(String, Type)]) -> Option<ContextWrite> {
        let Some((key, ty)) = self.symbols.context.get(&assignment.name.value).cloned() else {
            let help = match did_you_mean(&assignment.name.value, self.symbols.context.keys().map(String::as_str)) {
                Some(close) => format!("did you mean `{close}`?"),
                None => "declare it under `context`".to_string(),
            };
            self.diagnostics.push(
                Diagnostic::new(Code::UnknownField, format!("unknown context key `{}`", assignment.name.value))
                    .at(assignment.name.span, "not declared under `context`")
                    .with_help(help),
            );
            return None;
        };
        let what = format!("the context key `{}`", assignment.name.value);
        let value = self.value_for(&assignment.value, &ty, &what, locals);
        Some(ContextWrite { key, value })
    }

    // ------------------------------------------------------------ actions

    fn actions(&mut self, actions: &[ast::Action], scope: FlowScope, locals: &mut Vec<(String, Type)>) -> Vec<Action> {
        let mut lowered = Vec::with_capacity(actions.len());
        for action in actions {
            match &action.kind {
                ast::ActionKind::Set(assignments) => {
                    for write in self.writes(assignments, locals) {
                        lowered.push(Action { kind: ActionKind::Set(write), span: action.span });
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
            }
        }
        lowered
    }

    fn for_each(&mut self, for_each: &ast::ForEach, scope: FlowScope, locals: &mut Vec<(String, Type)>) -> ForEach {
        let items = self.expr(&for_each.items, locals);
        let item_type = match &items.ty {
            Type::List(item) => (**item).clone(),
            Type::Unknown | Type::Null => Type::Unknown,
            other => {
                self.diagnostics.push(
                    Diagnostic::new(Code::TypeMismatch, format!("`for_each` needs a list, found {}", other.describe()))
                        .at(items.span, format!("this is {}", other.describe()))
                        .with_help("iterate over a field of type list"),
                );
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

    fn call(&mut self, call: &ast::Call, locals: &[(String, Type)]) -> Option<Call> {
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
                let help = match did_you_mean(&arg.name.value, params.iter().map(|(name, _)| name.as_str())) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None if params.is_empty() => format!("`{tool_name}` takes no params"),
                    None => format!(
                        "`{tool_name}` takes {}",
                        params.iter().map(|(name, _)| format!("`{name}`")).collect::<Vec<_>>().join(", ")
                    ),
                };
                self.diagnostics.push(
                    Diagnostic::new(Code::WrongArguments, format!("`{tool_name}` has no param `{}`", arg.name.value))
                        .at(arg.name.span, "not a param of the tool")
                        .with_help(help),
                );
                self.expr(&arg.value, locals);
                continue;
            };
            let what = format!("the param `{}` of `{tool_name}`", arg.name.value);
            let param_type = params.get(index).map_or(Type::Unknown, |(_, ty)| ty.clone());
            let value = self.value_for(&arg.value, &param_type, &what, locals);
            if let Some(slot) = args.get_mut(index) {
                if slot.is_some() {
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::WrongArguments,
                            format!("the param `{}` is passed twice", arg.name.value),
                        )
                        .at(arg.name.span, "passed again here")
                        .with_help("pass each param once"),
                    );
                }
                *slot = Some(value);
            }
        }
        let missing: Vec<&str> =
            params.iter().zip(&args).filter(|(_, arg)| arg.is_none()).map(|((name, _), _)| name.as_str()).collect();
        if !missing.is_empty() {
            let list = missing.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
            self.diagnostics.push(
                Diagnostic::new(Code::WrongArguments, format!("the call to `{tool_name}` is missing {list}"))
                    .at(call.tool.span, "missing arguments")
                    .with_help(format!("pass every param: {list}")),
            );
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
    fn save(&mut self, name: &ast::Name, tool_name: &str, returns: Option<&[(String, Type)]>) -> Option<FieldId> {
        let field = self.field(name)?;
        let field_type = self.symbols_type(field);
        let Some(returns) = returns else {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    format!("`save` from `{tool_name}`, which declares no `returns`"),
                )
                .at(name.span, "nothing typed to save")
                .with_help(format!(
                    "declare what `{tool_name}` returns: `-> {{ id: string }}` after its params in .flow, `returns: {{ id: string }}` in YAML"
                )),
            );
            return Some(field);
        };
        let (saved_type, described) = match returns {
            [(single_name, single_type)] => (single_type.clone(), format!("`{single_name}`")),
            _ => (Type::Object(returns.to_vec().into()), "its result object".to_string()),
        };
        let probe = Expr { kind: ExprKind::Error, ty: saved_type.clone(), span: name.span };
        if assignability(&probe, &field_type).is_some() {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    format!(
                        "`{}` is {}, but `{tool_name}` saves {described} of type {}",
                        name.value,
                        field_type.describe(),
                        saved_type.describe()
                    ),
                )
                .at(name.span, "saved here")
                .with_help("change the field's type or the tool's `returns`"),
            );
        }
        Some(field)
    }
}

/// The did-you-mean for a target that is a misspelt directive with no
/// argument (`-> compelte`), which the front end read as a name.
fn misspelt_directive(name: &str) -> Option<String> {
    let keyword = did_you_mean(name, ["complete", "abort", "reset"])?;
    Some(format!("did you mean the directive `{keyword}`? (`{keyword}` in .flow, `{{ {keyword}: true }}` in YAML)"))
}

fn goto_directive(flow: FlowId, span: Span) -> Directive {
    Directive { position: Some(Position::Goto { flow, data: Vec::new() }), span, ..Directive::default() }
}

fn complete_directive(span: Span) -> Directive {
    Directive { position: Some(Position::Complete { next: None }), span, ..Directive::default() }
}
