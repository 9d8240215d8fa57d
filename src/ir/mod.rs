//! The resolved, typed IR: what the checker proves, the graph draws and the
//! runtime executes. Flows, steps, fields, context keys, tools and signals
//! are referred to by typed indices, never by strings, so a target that does
//! not exist cannot be represented. Expressions carry their types.
//!
//! `lower` builds it from the AST. Spans are kept on every node that a
//! diagnostic may point at; `flowc compile` leaves them out unless asked.
//! Nothing here does I/O.

pub(crate) mod fold;
pub(crate) mod lower;
pub mod successor;
pub(crate) mod walk;

use crate::expr::{Expr, Template, Type};
use crate::source::Span;
use serde::Serialize;

pub use crate::ids::{ContextId, FieldId, FlowId, SignalId, StepId, ToolId};

#[derive(Clone, Debug, Serialize)]
pub struct Program {
    pub agent: Agent,
    pub fields: Vec<Field>,
    pub context: Vec<Field>,
    pub tools: Vec<Tool>,
    pub signals: Vec<Signal>,
    pub flows: Vec<Flow>,
    pub default_flow: Option<FlowId>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Agent {
    pub name: Option<String>,
    pub identity: Option<Template>,
    pub rules: Vec<Template>,
    pub limits: Limits,
}

/// Continuation limits of one conversation turn (LANGUAGE.md `agent.limits`).
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    pub max_auto_steps: u32,
    pub max_tool_rounds: u32,
    pub max_turn_tokens: Option<u64>,
    pub turn_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_auto_steps: 10, max_tool_rounds: 5, max_turn_tokens: None, turn_timeout_ms: 60_000 }
    }
}

/// A declared value: a schema field, context key, tool param, tool return
/// field or object member.
#[derive(Clone, Debug, Serialize)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ValueType,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A declared type with its constraints, as the schema states it.
#[derive(Clone, Debug, Serialize)]
pub struct ValueType {
    #[serde(flatten)]
    pub kind: TypeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TypeKind {
    String,
    Int,
    Float,
    Bool,
    Date,
    #[serde(rename = "datetime")]
    DateTime,
    Enum {
        values: Vec<String>,
    },
    List {
        items: Box<ValueType>,
    },
    Object {
        fields: Vec<Field>,
    },
    /// A type whose declaration had an error.
    Unknown,
}

impl ValueType {
    /// The static type expressions see.
    pub fn to_type(&self) -> Type {
        match &self.kind {
            TypeKind::String => Type::String,
            TypeKind::Int => Type::Int,
            TypeKind::Float => Type::Float,
            TypeKind::Bool => Type::Bool,
            TypeKind::Date => Type::Date,
            TypeKind::DateTime => Type::DateTime,
            TypeKind::Enum { values } => Type::Enum(values.clone().into()),
            TypeKind::List { items } => Type::List(items.to_type().into()),
            TypeKind::Object { fields } => Type::Object(
                fields.iter().map(|field| (field.name.clone(), field.ty.to_type())).collect::<Vec<_>>().into(),
            ),
            TypeKind::Unknown => Type::Unknown,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub params: Vec<Field>,
    /// `None` when the tool declares no `returns` (its result cannot be saved).
    pub returns: Option<Vec<Field>>,
    /// `None` when the declaration had no valid implementation (reported).
    pub implementation: Option<ToolImpl>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolImpl {
    Http {
        method: HttpMethod,
        url: Template,
        headers: Vec<(String, Template)>,
        /// `None`: the arguments are sent as a JSON object.
        body: Option<Body>,
        timeout_ms: u64,
    },
    Exec {
        command: Vec<String>,
        timeout_ms: u64,
        /// The variables of flowc's environment the tool is given besides
        /// `PATH` and the locale; the model keys and the store never are.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
    Builtin {
        builtin: Builtin,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Builtin {
    Now,
    Uuid,
    Echo,
}

/// A JSON request body whose strings are templates over the tool's params.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Template),
    List(Vec<Body>),
    Object(Vec<(String, Body)>),
}

/// Default timeout of a tool call without `timeout`.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;

#[derive(Clone, Debug, Serialize)]
pub struct Signal {
    pub name: String,
    pub when: Vec<String>,
    pub guard: Vec<Expr>,
    pub phase: Phase,
    pub behavior: Behavior,
    pub extract: Vec<FieldId>,
    pub then: Option<Directive>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pre,
    Post,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Behavior {
    Always,
    Once,
    Cooldown { cooldown_ms: u64 },
}

#[derive(Clone, Debug, Serialize)]
pub struct Flow {
    pub name: String,
    pub title: Option<String>,
    /// AI routing conditions; any may match.
    pub when: Vec<String>,
    /// Code guards; all must hold.
    pub guard: Vec<Expr>,
    pub default: bool,
    /// All steps are `auto`: a workflow, run without a user.
    pub workflow: bool,
    pub requires: Vec<FieldId>,
    /// Where each of `requires` is named, for diagnostics.
    #[serde(skip)]
    pub requires_spans: Vec<Span>,
    pub optional: Vec<FieldId>,
    /// The fields cleared when a new run of the flow starts (it is routed
    /// to, entered by `goto` or `complete.next`, or `reset`): those its
    /// steps collect, minus `keep`, plus `fresh`. Sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fresh: Vec<FieldId>,
    /// Collected fields the program carries from one run to the next.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<FieldId>,
    /// Where each of `keep` is named, for diagnostics.
    #[serde(skip)]
    pub keep_spans: Vec<Span>,
    pub rules: Vec<Template>,
    pub on_enter: Vec<Action>,
    pub on_complete: Vec<Action>,
    pub complete_next: Option<FlowId>,
    pub steps: Vec<Step>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
    /// Part of this flow's structure could not be read or resolved (a
    /// syntax error inside it, a target that names nothing, a step without
    /// an id, a `collect` of an unknown field), so an edge or a step is
    /// missing from the IR. Errors were reported; the flow-sensitive checks
    /// (unreachable steps, definite assignment, auto cycles) stay silent on
    /// it rather than report the consequences of the missing part.
    #[serde(skip)]
    pub incomplete: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub name: String,
    pub auto: bool,
    pub prompt: Option<Template>,
    pub say: Option<Template>,
    pub collect: Vec<FieldId>,
    pub requires: Vec<FieldId>,
    pub skip_if: Option<Expr>,
    /// AI conditions for entering the step as a successor; all must hold.
    pub when: Vec<String>,
    /// Code conditions for the same; all must hold.
    pub guard: Vec<Expr>,
    pub branches: Vec<Branch>,
    pub next: Option<Next>,
    pub actions: Vec<Action>,
    pub on_enter: Vec<Action>,
    pub prepare: Vec<Action>,
    pub finalize: Vec<Action>,
    pub tools: Vec<ToolId>,
    pub max_asks: u32,
    pub on_no_answer: Option<Box<Directive>>,
    /// A workflow step's failure policy.
    pub on_error: OnError,
    /// A conversation step's `on_error`: what a turn does when the step's
    /// actions fail (a tool call, an invalid write). `None` takes the
    /// default: an apology, and the flow is aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    pub wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

impl Step {
    /// A step with this name and nothing else: no prompt, no fields, no
    /// edges, the default `max_asks`, `on_error: stop`. Tests and tools that
    /// build IR by hand start from it.
    pub fn named(name: impl Into<String>) -> Step {
        Step {
            name: name.into(),
            auto: false,
            prompt: None,
            say: None,
            collect: Vec::new(),
            requires: Vec::new(),
            skip_if: None,
            when: Vec::new(),
            guard: Vec::new(),
            branches: Vec::new(),
            next: None,
            actions: Vec::new(),
            on_enter: Vec::new(),
            prepare: Vec::new(),
            finalize: Vec::new(),
            tools: Vec::new(),
            max_asks: DEFAULT_MAX_ASKS,
            on_no_answer: None,
            on_error: OnError::Stop,
            recovery: None,
            wait_ms: None,
            span: Span::default(),
        }
    }

    /// What a confirmation this step collects is a confirmation *of*: for a
    /// step that collects a `bool`, the fields it `requires` and those its
    /// prompt reads, other than the ones it collects. A consent holds only
    /// for the values the user was shown; when one of them changes before
    /// the step is left, the runtime clears the step's bools and asks
    /// again. Empty for a step that collects no `bool`. Sorted.
    pub fn confirms(&self, program: &Program) -> Vec<FieldId> {
        let collects_bool = self
            .collect
            .iter()
            .any(|field| program.field(*field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool)));
        if !collects_bool {
            return Vec::new();
        }
        let mut fields = self.requires.clone();
        for part in self.prompt.iter().flat_map(|prompt| &prompt.parts) {
            if let crate::expr::TemplatePart::Expr(expr) = part {
                expr.walk(&mut |node| {
                    if let crate::expr::ExprKind::Field { field } = node.kind {
                        fields.push(field);
                    }
                });
            }
        }
        fields.retain(|field| !self.collect.contains(field));
        fields.sort_unstable();
        fields.dedup();
        fields
    }
}

/// Default number of asks before `on_no_answer` applies.
pub const DEFAULT_MAX_ASKS: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    Step(StepId),
    /// `next: end`: complete the flow.
    End,
}

#[derive(Clone, Debug, Serialize)]
pub struct Branch {
    pub guard: Vec<Expr>,
    pub when: Vec<String>,
    pub then: Then,
    pub label: Option<String>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    /// A step of the same flow.
    Step(StepId),
    // Boxed, like the AST's: most branch entries name a step.
    Directive(Box<Directive>),
}

/// A resolved directive: at most one position field, writes, augmentation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Directive {
    pub position: Option<Position>,
    /// Written `ask_again S`: its `set` starts with the nulls that clear
    /// what `S` collects (and the confirmations that showed it), and its
    /// position is `goto_step S` (docs/language.md, "Asking a step again").
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ask_again: bool,
    pub reply: Option<Template>,
    pub set: Vec<Write>,
    pub set_context: Vec<ContextWrite>,
    pub append_prompt: Vec<Template>,
    pub inject_tools: Vec<ToolId>,
    pub halt: bool,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    Goto { flow: FlowId, data: Vec<Write> },
    GotoStep { flow: FlowId, step: StepId },
    Complete { next: Option<FlowId> },
    Abort { reason: Option<Template> },
    Reset,
}

impl Position {
    /// Merge precedence: `abort > complete > goto/goto_step > reset`.
    pub fn precedence(&self) -> u8 {
        successor::Jump::from(self).precedence()
    }

    /// The writes a position carries: a `goto`'s `with` data, written once
    /// the new run has started; none for the others.
    pub fn data(&self) -> &[Write] {
        match self {
            Position::Goto { data, .. } => data,
            _ => &[],
        }
    }

    /// The reason an `abort` carries, said to the user.
    pub fn reason(&self) -> Option<&Template> {
        match self {
            Position::Abort { reason } => reason.as_ref(),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Write {
    pub field: FieldId,
    pub value: Expr,
}

#[derive(Clone, Debug, Serialize)]
pub struct ContextWrite {
    pub key: ContextId,
    pub value: Expr,
}

#[derive(Clone, Debug, Serialize)]
pub struct Action {
    #[serde(flatten)]
    pub kind: ActionKind,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ActionKind {
    Set(Write),
    /// `append ITEM to LIST`: the write's value is the item added to the
    /// end of the list field (an unset list counts as empty).
    Append(Write),
    Call(Call),
    // Boxed: both are several times the size of the common `set`.
    #[serde(serialize_with = "serialize_emitted")]
    Emit(Box<Directive>),
    Say {
        text: Template,
    },
    ForEach(Box<ForEach>),
}

/// An emitted directive is written under its own key, `directive`: merged
/// into the action's object, its `span` would collide with the action's.
fn serialize_emitted<S: serde::Serializer>(directive: &Directive, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut emitted = serializer.serialize_struct("Emit", 1)?;
    emitted.serialize_field("directive", directive)?;
    emitted.end()
}

#[derive(Clone, Debug, Serialize)]
pub struct Call {
    pub tool: ToolId,
    /// One argument per param of the tool, in the tool's param order.
    pub args: Vec<Expr>,
    pub save: Option<FieldId>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ForEach {
    pub items: Expr,
    pub binding: String,
    /// The local slot the binding occupies.
    pub slot: u32,
    pub filter: Option<Expr>,
    pub actions: Vec<Action>,
}

/// A conversation step's answer to a failure of its actions.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// `on_error: stop`: the turn fails with the error, and the session
    /// stays as it was before the turn (for embedders that handle errors).
    Stop,
    /// Its `reply` is the turn's answer, its position where the
    /// conversation goes; with no position it stays at the failed step.
    Directive(Box<Directive>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum OnError {
    Stop,
    Continue,
    Retry { times: u32, backoff_ms: u64 },
}

impl Program {
    pub fn flow(&self, id: FlowId) -> Option<&Flow> {
        self.flows.get(id.index())
    }

    pub fn field(&self, id: FieldId) -> Option<&Field> {
        self.fields.get(id.index())
    }

    pub fn tool(&self, id: ToolId) -> Option<&Tool> {
        self.tools.get(id.index())
    }

    pub fn flow_by_name(&self, name: &str) -> Option<FlowId> {
        self.flows.iter().position(|flow| flow.name == name).map(FlowId::from_index)
    }

    pub fn field_by_name(&self, name: &str) -> Option<FieldId> {
        self.fields.iter().position(|field| field.name == name).map(FieldId::from_index)
    }
}

/// The fields a new run of a flow with these steps starts without: every
/// field a step collects, except `keep`, and the `fresh` fields besides.
pub fn run_fields(steps: &[Step], keep: &[FieldId], fresh: &[FieldId]) -> Vec<FieldId> {
    let collected = steps.iter().flat_map(|step| step.collect.iter().copied());
    let mut fields: Vec<FieldId> =
        collected.filter(|field| !keep.contains(field)).chain(fresh.iter().copied()).collect();
    fields.sort_unstable();
    fields.dedup();
    fields
}

/// What a workflow step records as its `output`, decided by its actions
/// alone so that the type checker and the runner agree on it.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputShape {
    /// The step writes these fields (`set`, a call's `save`, an emitted
    /// directive's `set`): its output is an object of those it changed.
    Fields(Vec<FieldId>),
    /// The step writes no field and calls exactly one tool, outside any
    /// loop: its output is that call's result.
    Call(ToolId),
    /// Anything else: the results of its calls, if any, with no static type.
    Untyped,
}

/// The [`OutputShape`] of a step with these actions.
pub fn output_shape(actions: &[Action]) -> OutputShape {
    fn walk(actions: &[Action], in_loop: bool, written: &mut Vec<FieldId>, calls: &mut Vec<(ToolId, bool)>) {
        for action in actions {
            match &action.kind {
                ActionKind::Set(write) | ActionKind::Append(write) => written.push(write.field),
                ActionKind::Call(call) => {
                    written.extend(call.save);
                    calls.push((call.tool, in_loop));
                }
                ActionKind::Emit(directive) => written.extend(directive.set.iter().map(|write| write.field)),
                ActionKind::Say { .. } => {}
                ActionKind::ForEach(for_each) => walk(&for_each.actions, true, written, calls),
            }
        }
    }
    let (mut written, mut calls) = (Vec::new(), Vec::new());
    walk(actions, false, &mut written, &mut calls);
    if !written.is_empty() {
        let mut seen = std::collections::HashSet::with_capacity(written.len());
        written.retain(|field| seen.insert(*field));
        return OutputShape::Fields(written);
    }
    match calls.as_slice() {
        [(tool, false)] => OutputShape::Call(*tool),
        _ => OutputShape::Untyped,
    }
}

impl Flow {
    pub fn step(&self, id: StepId) -> Option<&Step> {
        self.steps.get(id.index())
    }

    pub fn step_by_name(&self, name: &str) -> Option<StepId> {
        self.steps.iter().position(|step| step.name == name).map(StepId::from_index)
    }
}

impl ValueType {
    /// The JSON schema of a valid value, for constrained model output and
    /// tool parameter declarations.
    pub fn json_schema(&self) -> serde_json::Value {
        use serde_json::json;
        let mut schema = match &self.kind {
            TypeKind::String => json!({ "type": "string" }),
            TypeKind::Int => json!({ "type": "integer" }),
            TypeKind::Float => json!({ "type": "number" }),
            TypeKind::Bool => json!({ "type": "boolean" }),
            TypeKind::Date => json!({ "type": "string", "format": "date" }),
            TypeKind::DateTime => json!({ "type": "string", "format": "date-time" }),
            TypeKind::Enum { values } => json!({ "type": "string", "enum": values }),
            TypeKind::List { items } => json!({ "type": "array", "items": items.json_schema() }),
            TypeKind::Object { fields } => object_schema(fields),
            TypeKind::Unknown => json!({}),
        };
        if let serde_json::Value::Object(map) = &mut schema {
            if let Some(description) = &self.description {
                map.insert("description".into(), description.clone().into());
            }
            if let Some(pattern) = &self.pattern {
                map.insert("pattern".into(), pattern.clone().into());
            }
            let (min_key, max_key) = match self.kind {
                TypeKind::List { .. } => ("minItems", "maxItems"),
                _ => ("minimum", "maximum"),
            };
            for (key, bound) in [(min_key, self.min), (max_key, self.max)] {
                if let Some(number) = bound.and_then(serde_json::Number::from_f64) {
                    map.insert(key.into(), serde_json::Value::Number(number));
                }
            }
        }
        schema
    }

    /// The type's name as the language writes it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            TypeKind::String => "string",
            TypeKind::Int => "int",
            TypeKind::Float => "float",
            TypeKind::Bool => "bool",
            TypeKind::Date => "date",
            TypeKind::DateTime => "datetime",
            TypeKind::Enum { .. } => "enum",
            TypeKind::List { .. } => "list",
            TypeKind::Object { .. } => "object",
            TypeKind::Unknown => "unknown",
        }
    }
}

/// The JSON schema of an object with these fields (all required, no others).
pub fn object_schema(fields: &[Field]) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> =
        fields.iter().map(|field| (field.name.clone(), field.ty.json_schema())).collect();
    let required: Vec<&str> = fields.iter().map(|field| field.name.as_str()).collect();
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::compile;
    use crate::source::SourceFile;

    const WORKFLOW: &str = r#"schema { total: int  note: string }
        tool clock() -> { now: datetime } { builtin now }
        tool echo(note: string) -> { note: string } { builtin echo }
        flow f { default
            auto step count { set total = 1 }
            auto step stamp { call clock() }
            auto step twice { call clock()  call clock() }
            auto step looped { for t in [1, 2] { call clock() } }
            auto step saved { call echo(note: "a") -> note }
            auto step use { set total = steps.count.output.total * 10
                            set note = steps.saved.output.note } }"#;

    fn shapes(text: &str) -> (Vec<OutputShape>, Vec<&'static str>) {
        let compiled = compile(&SourceFile::new("t.flow", text));
        let codes = compiled.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
        let flow = compiled.ir.flows.first();
        (
            flow.map(|flow| flow.steps.iter().map(|step| output_shape(&step.actions)).collect()).unwrap_or_default(),
            codes,
        )
    }

    #[test]
    fn a_steps_output_shape_follows_its_actions() {
        let (shapes, codes) = shapes(WORKFLOW);
        assert_eq!(codes, Vec::<&str>::new());
        assert_eq!(
            shapes,
            [
                OutputShape::Fields(vec![FieldId(0)]),
                OutputShape::Call(ToolId(0)),
                OutputShape::Untyped,
                OutputShape::Untyped,
                OutputShape::Fields(vec![FieldId(1)]),
                OutputShape::Fields(vec![FieldId(0), FieldId(1)]),
            ]
        );
    }

    #[test]
    fn a_later_step_reads_an_earlier_output_at_its_type() {
        let compiled = compile(&SourceFile::new("t.flow", WORKFLOW));
        let last = compiled.ir.flows.first().and_then(|flow| flow.steps.last());
        let Some(ActionKind::Set(write)) = last.and_then(|step| step.actions.first()).map(|action| &action.kind) else {
            panic!("the last step sets a field first");
        };
        assert_eq!(write.value.ty, Type::Int);
        let crate::expr::ExprKind::Binary { left, .. } = &write.value.kind else {
            panic!("a product: {:?}", write.value.kind);
        };
        let crate::expr::ExprKind::Member { object, member } = &left.kind else {
            panic!("a member: {:?}", left.kind);
        };
        assert_eq!(member, "total");
        assert!(
            matches!(&object.kind, crate::expr::ExprKind::StepOutput { step, name } if *step == StepId(0) && name == "count")
        );
        assert_eq!(object.ty, Type::Object(vec![("total".to_string(), Type::Int)].into()));
    }

    #[test]
    fn a_steps_branches_read_its_own_output_and_its_skip_if_cannot() {
        let text = r#"schema { total: int }
            tool clock() -> { now: datetime } { builtin now }
            flow f { default
                auto step stamp { call clock()
                                  branch { if steps.stamp.output.now is set -> done } }
                auto step done { set total = 1 } }"#;
        assert_eq!(shapes(text).1, Vec::<&str>::new());
        let own_skip = text.replace("auto step stamp {", "auto step stamp { skip_if steps.stamp.output is set ");
        assert_eq!(shapes(&own_skip).1, ["unknown_field"]);
    }

    #[test]
    fn a_conversation_cannot_read_step_outputs() {
        let text = r#"schema { note: string }
            flow f { default
                step ask { prompt "Note?"  collect note }
                step show { say "{{steps.ask.output}}" } }"#;
        assert_eq!(shapes(text).1, ["unknown_field"]);
    }
}
