//! The abstract syntax tree both front ends produce. It mirrors the
//! program as written — names are still strings, nothing is resolved — and
//! every name, value, expression and target carries the span it was read
//! from, so later passes can point at the exact characters in either syntax.
//!
//! A construct that could not be read is left out (its syntax diagnostic
//! already says why) or, for expressions, kept as [`ExprKind::Error`], so one
//! mistake does not hide the rest of the program from the checker.

use crate::source::{Span, Spanned};
use serde::Serialize;

/// An identifier as written: a flow, step, field, tool, signal, param or
/// context key. Validity (characters, reserved words) is checked by lowering.
pub type Name = Spanned<String>;

/// A literal string that is not a template (a `when` description, a title).
pub type Text = Spanned<String>;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Program {
    pub agent: Option<Agent>,
    pub schema: Vec<FieldDecl>,
    pub context: Vec<FieldDecl>,
    pub tools: Vec<ToolDecl>,
    pub signals: Vec<SignalDecl>,
    pub flows: Vec<FlowDecl>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Agent {
    pub name: Option<Text>,
    pub identity: Option<Template>,
    pub rules: Vec<Template>,
    pub limits: Limits,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Limits {
    pub max_auto_steps: Option<Spanned<i64>>,
    pub max_tool_rounds: Option<Spanned<i64>>,
    pub max_turn_tokens: Option<Spanned<i64>>,
    /// A duration as written (`60s`); lowering parses it.
    pub turn_timeout: Option<Text>,
}

/// A schema field, a context key, a tool param, a tool return field or an
/// object member.
#[derive(Clone, Debug, Serialize)]
pub struct FieldDecl {
    pub name: Name,
    pub ty: TypeExpr,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct TypeExpr {
    /// The type's name as written: `string`, `int`, `float`, `bool`, `date`,
    /// `datetime`, `enum`, `list`, `object` (anything else is `unknown_type`).
    pub name: Name,
    pub description: Option<Text>,
    pub min: Option<Spanned<Number>>,
    pub max: Option<Spanned<Number>>,
    pub pattern: Option<Text>,
    /// Enum values; `None` when the key is absent, so `values: []` can be told apart.
    pub values: Option<Spanned<Vec<Text>>>,
    pub examples: Vec<Text>,
    pub items: Option<Box<TypeExpr>>,
    /// Object members; `None` when absent.
    pub fields: Option<Spanned<Vec<FieldDecl>>>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

impl TypeExpr {
    /// A type written as its name alone (`bool`), with no options.
    pub fn bare(name: Name, span: Span) -> Self {
        TypeExpr {
            name,
            description: None,
            min: None,
            max: None,
            pattern: None,
            values: None,
            examples: Vec::new(),
            items: None,
            fields: None,
            span,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            #[allow(clippy::cast_precision_loss)]
            Number::Int(value) => value as f64,
            Number::Float(value) => value,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ToolDecl {
    pub name: Name,
    pub description: Option<Text>,
    pub params: Vec<FieldDecl>,
    /// `None` when the tool declares no `returns`.
    pub returns: Option<Spanned<Vec<FieldDecl>>>,
    /// Every implementation given; exactly one is valid (`invalid_tool` otherwise).
    pub implementations: Vec<ToolImpl>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolImpl {
    Http(HttpSpec),
    Exec(ExecSpec),
    Builtin {
        name: Name,
        #[serde(skip_serializing_if = "crate::source::spans_omitted")]
        span: Span,
    },
}

impl ToolImpl {
    pub fn span(&self) -> Span {
        match self {
            ToolImpl::Http(spec) => spec.span,
            ToolImpl::Exec(spec) => spec.span,
            ToolImpl::Builtin { span, .. } => *span,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct HttpSpec {
    pub method: Text,
    pub url: Template,
    pub headers: Vec<(Name, Template)>,
    /// `None`: the params are sent as a JSON object.
    pub body: Option<BodyValue>,
    pub timeout: Option<Text>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A JSON body whose strings are templates.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum BodyValue {
    Null(Span),
    Bool(Spanned<bool>),
    Number(Spanned<Number>),
    String(Template),
    List(Spanned<Vec<BodyValue>>),
    Object(Spanned<Vec<(Name, BodyValue)>>),
}

#[derive(Clone, Debug, Serialize)]
pub struct ExecSpec {
    /// The program and its arguments; no shell is involved.
    pub command: Vec<Text>,
    pub timeout: Option<Text>,
    /// The environment variables the tool is given besides `PATH` and the
    /// locale (`env NAME, …`; `env: [NAME, …]` in YAML).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<Name>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct SignalDecl {
    pub name: Name,
    /// Any of these descriptions triggers the signal.
    pub when: Vec<Text>,
    /// All of these must hold before the model is asked.
    pub guard: Vec<Expr>,
    pub phase: Option<Text>,
    pub behavior: Option<Text>,
    pub cooldown: Option<Text>,
    pub extract: Vec<Name>,
    pub then: Option<Then>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlowDecl {
    pub name: Name,
    pub title: Option<Text>,
    /// Any of these descriptions routes to the flow.
    pub when: Vec<Text>,
    /// Code guards; all must hold.
    pub guard: Vec<Expr>,
    pub default: Option<Spanned<bool>>,
    pub requires: Vec<Name>,
    pub optional: Vec<Name>,
    /// Collected fields carried from one run of the flow to the next.
    pub keep: Vec<Name>,
    /// Fields the flow sets (not collects) that are also cleared for each run.
    pub fresh: Vec<Name>,
    pub rules: Vec<Template>,
    pub on_enter: Vec<Action>,
    pub on_complete: Vec<Action>,
    /// `complete: { next: F }`.
    pub complete_next: Option<Name>,
    pub steps: Vec<StepDecl>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StepDecl {
    /// `None` when the step has no id (an `invalid_step` error).
    pub id: Option<Name>,
    pub prompt: Option<Template>,
    pub say: Option<Template>,
    pub collect: Vec<Name>,
    pub requires: Vec<Name>,
    pub skip_if: Option<Expr>,
    /// All must hold for the step to be a successor candidate.
    pub when: Vec<Text>,
    pub guard: Vec<Expr>,
    pub auto: Option<Spanned<bool>>,
    /// `None` when absent; `Some` of an empty list is `invalid_directive`.
    pub branches: Option<Spanned<Vec<Branch>>>,
    /// A step id or `end`.
    pub next: Option<Name>,
    pub actions: Vec<Action>,
    pub on_enter: Vec<Action>,
    pub prepare: Vec<Action>,
    pub finalize: Vec<Action>,
    pub tools: Vec<Name>,
    pub max_asks: Option<Spanned<i64>>,
    pub on_no_answer: Option<Box<Directive>>,
    pub on_error: Option<OnError>,
    /// A duration as written (`2d`).
    pub wait: Option<Text>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct Branch {
    /// All must hold; evaluated before `when`.
    pub guard: Vec<Expr>,
    /// All must hold.
    pub when: Vec<Text>,
    /// `None` when the entry has no `then` (a syntax error already reported).
    pub then: Option<Then>,
    pub label: Option<Text>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// Where a branch, signal or `on_no_answer` sends the conversation.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Then {
    /// A bare name: a step of the current flow, else a flow.
    Target(Name),
    // Boxed: a directive is ten times the size of a name, and most branch
    // entries are a name.
    Directive(Box<Directive>),
}

/// The keys of a directive, in the order LANGUAGE.md lists them: the YAML
/// keys, and the `.flow` clause keywords.
pub const DIRECTIVE_KEYS: &[&str] = &[
    "goto",
    "goto_step",
    "ask_again",
    "complete",
    "abort",
    "reset",
    "reply",
    "set",
    "set_context",
    "append_prompt",
    "inject_tools",
    "halt",
];

/// A directive object. Every key is kept as written, so lowering can report
/// two position fields or `reply` with `abort`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Directive {
    pub goto: Option<Goto>,
    pub goto_step: Option<GotoStep>,
    /// `ask_again`: a `goto_step` that first clears what the step collects
    /// (and the confirmations that showed it); lowering spells it out.
    pub ask_again: Option<GotoStep>,
    pub complete: Option<Complete>,
    pub abort: Option<Abort>,
    pub reset: Option<Spanned<bool>>,
    pub reply: Option<Template>,
    pub set: Vec<Assignment>,
    pub set_context: Vec<Assignment>,
    pub append_prompt: Vec<Template>,
    pub inject_tools: Vec<Name>,
    pub halt: Option<Spanned<bool>>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct Goto {
    /// `None` for `goto: {}` (an `invalid_directive`).
    pub flow: Option<Name>,
    pub data: Vec<Assignment>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct GotoStep {
    /// `None`: a step of the current flow.
    pub flow: Option<Name>,
    /// `None` for an empty `goto_step: {}` (an `invalid_directive`).
    pub step: Option<Name>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `complete: true` or `complete: { next: F }`. `complete: false` is no
/// completion and is not represented.
#[derive(Clone, Debug, Serialize)]
pub struct Complete {
    pub next: Option<Name>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `abort: true` or `abort: "reason"`.
#[derive(Clone, Debug, Serialize)]
pub struct Abort {
    pub reason: Option<Template>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `field: expr`, in `set`, `set_context`, `goto.data` and call `args`.
#[derive(Clone, Debug, Serialize)]
pub struct Assignment {
    pub name: Name,
    pub value: Expr,
}

#[derive(Clone, Debug, Serialize)]
pub struct Action {
    pub kind: ActionKind,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ActionKind {
    Set(Vec<Assignment>),
    /// `append ITEM to LIST` (YAML `append: { LIST: ITEM }`): each
    /// assignment's name is a list field, its value the item added.
    Append(Vec<Assignment>),
    Call(Call),
    Emit(Box<Directive>),
    Say(Template),
    ForEach(Box<ForEach>),
}

#[derive(Clone, Debug, Serialize)]
pub struct Call {
    pub tool: Name,
    pub args: Vec<Assignment>,
    pub save: Option<Name>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct ForEach {
    pub items: Expr,
    pub binding: Name,
    pub filter: Option<Expr>,
    pub actions: Vec<Action>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum OnError {
    Stop(Span),
    Continue(Span),
    /// A conversation step's answer to a failure: reply and stay, go to a
    /// step, or abort.
    Directive(Box<Directive>),
    Retry {
        times: Spanned<i64>,
        backoff: Option<Text>,
        #[serde(skip_serializing_if = "crate::source::spans_omitted")]
        span: Span,
    },
}

/// `{{ expr }}` interpolations within text.
#[derive(Clone, Debug, Serialize)]
pub struct Template {
    pub parts: Vec<TemplatePart>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum TemplatePart {
    Text(String),
    Expr(Expr),
}

impl Template {
    /// A template with no interpolation.
    pub fn literal(text: impl Into<String>, span: Span) -> Template {
        Template { parts: vec![TemplatePart::Text(text.into())], span }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Expr {
    pub kind: ExprKind,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExprKind {
    Null,
    Bool {
        value: bool,
    },
    Int {
        value: i64,
    },
    Float {
        value: f64,
    },
    String {
        value: String,
    },
    List {
        items: Vec<Expr>,
    },
    /// `guests`, `context.tier`, `item.email`, `env.TOKEN`: the first
    /// segment is resolved by lowering (field, `context`, loop variable,
    /// tool param, `env`).
    Path {
        segments: Vec<Name>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `x is set` / `x is not set`.
    IsSet {
        operand: Box<Expr>,
        negated: bool,
    },
    // Boxed: the largest variant by far, and the rarest; unboxed it would
    // make every expression node half as large again.
    Call(Box<FunctionCall>),
    /// An expression that could not be parsed; its diagnostic was already
    /// reported and later passes must not report it again.
    Error,
}

/// `len(x)`, `today()`: a built-in function applied to its arguments.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionCall {
    pub function: Name,
    pub args: Vec<Expr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "or",
            BinaryOp::And => "and",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::NotIn => "not in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }
}

impl Expr {
    pub fn error(span: Span) -> Expr {
        Expr { kind: ExprKind::Error, span }
    }
}
