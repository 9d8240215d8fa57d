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

/// One program as written: the agent, the data it collects, its tools, signals and flows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Program {
    /// The `agent` block; `None` when the program has none.
    pub agent: Option<Agent>,
    /// The fields conversations collect.
    pub schema: Vec<FieldDecl>,
    /// The context keys the embedder supplies to each conversation.
    pub context: Vec<FieldDecl>,
    /// The tools flows may call.
    pub tools: Vec<ToolDecl>,
    /// The signals the model may raise in any flow.
    pub signals: Vec<SignalDecl>,
    /// The flows, in the order written.
    pub flows: Vec<FlowDecl>,
}

/// The `agent` block: who the assistant is and the limits it runs under.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Agent {
    /// The agent's display name.
    pub name: Option<Text>,
    /// The core of the system prompt.
    pub identity: Option<Template>,
    /// Rules the model is given in every flow.
    pub rules: Vec<Template>,
    /// The per-turn limits; absent keys are `None`.
    pub limits: Limits,
    /// What the model is shown of the conversation (`history`); left out
    /// of the JSON when not written.
    #[serde(skip_serializing_if = "History::is_unset")]
    pub history: History,
    /// Where the block was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// The `limits` of an agent, as written; lowering checks ranges and fills defaults.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Limits {
    /// Most `auto` steps walked in one turn.
    pub max_auto_steps: Option<Spanned<i64>>,
    /// Most model/tool round trips in one reply.
    pub max_tool_rounds: Option<Spanned<i64>>,
    /// Most tokens one turn may spend on the model.
    pub max_turn_tokens: Option<Spanned<i64>>,
    /// Most model calls a workflow run's model steps may make.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_llm_calls: Option<Spanned<i64>>,
    /// Most tokens a workflow run's model steps may spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_tokens: Option<Spanned<i64>>,
    /// A duration as written (`60s`); lowering parses it.
    pub turn_timeout: Option<Text>,
    /// What a turn a limit stops before any reply answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Template>,
}

/// The `history` of an agent, as written: how much of the conversation
/// each model request carries, and whether what the window leaves out is
/// summarised.
#[derive(Clone, Debug, Default, Serialize)]
pub struct History {
    /// `keep_last`: the most messages a request carries.
    pub keep_last: Option<Spanned<i64>>,
    /// `summarize`: what the model's window leaves out is summarised.
    pub summarize: bool,
}

impl History {
    /// Whether nothing of it was written.
    pub fn is_unset(&self) -> bool {
        self.keep_last.is_none() && !self.summarize
    }
}

/// A schema field, a context key, a tool param, a tool return field or an
/// object member.
#[derive(Clone, Debug, Serialize)]
pub struct FieldDecl {
    /// The field's name.
    pub name: Name,
    /// The field's type and its options.
    pub ty: TypeExpr,
    /// Where the declaration was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A type with its options (`int, min: 1`, `enum, values: [...]`).
#[derive(Clone, Debug, Serialize)]
pub struct TypeExpr {
    /// The type's name as written: `string`, `int`, `float`, `bool`, `date`,
    /// `datetime`, `enum`, `list`, `object` (anything else is `unknown_type`).
    pub name: Name,
    /// What the value means, shown to the model.
    pub description: Option<Text>,
    /// The lower bound of a number, or of a list's length.
    pub min: Option<Spanned<Number>>,
    /// The upper bound of a number, or of a list's length.
    pub max: Option<Spanned<Number>>,
    /// A regular expression a string must match.
    pub pattern: Option<Text>,
    /// Enum values; `None` when the key is absent, so `values: []` can be told apart.
    pub values: Option<Spanned<Vec<Text>>>,
    /// Sample user phrasings: few-shot hints for the model, and what the
    /// offline provider looks for.
    pub examples: Vec<Text>,
    /// The element type of a `list`; `None` when absent.
    pub items: Option<Box<TypeExpr>>,
    /// Object members; `None` when absent.
    pub fields: Option<Spanned<Vec<FieldDecl>>>,
    /// Where the type was written.
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

/// A number literal, kept as an integer when written as one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Number {
    /// Written without a fraction or exponent.
    Int(i64),
    /// Written with a fraction or exponent.
    Float(f64),
}

impl Number {
    /// The value as a float, for comparing bounds of either kind.
    pub fn as_f64(self) -> f64 {
        match self {
            #[allow(clippy::cast_precision_loss)]
            Number::Int(value) => value as f64,
            Number::Float(value) => value,
        }
    }
}

/// A `tool` declaration: what it takes, what it returns and how it runs.
#[derive(Clone, Debug, Serialize)]
pub struct ToolDecl {
    /// The name flows call it by.
    pub name: Name,
    /// What the tool does, shown to the model.
    pub description: Option<Text>,
    /// The arguments it takes.
    pub params: Vec<FieldDecl>,
    /// `None` when the tool declares no `returns`.
    pub returns: Option<Spanned<Vec<FieldDecl>>>,
    /// Every implementation given; exactly one is valid (`invalid_tool` otherwise).
    pub implementations: Vec<ToolImpl>,
    /// Where the declaration was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// How a tool runs.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolImpl {
    /// An HTTP request.
    Http(HttpSpec),
    /// A local program.
    Exec(ExecSpec),
    /// One of flowc's own tools, by name.
    Builtin {
        /// The built-in tool's name.
        name: Name,
        /// Where the implementation was written.
        #[serde(skip_serializing_if = "crate::source::spans_omitted")]
        span: Span,
    },
}

impl ToolImpl {
    /// Where the implementation was written.
    pub fn span(&self) -> Span {
        match self {
            ToolImpl::Http(spec) => spec.span,
            ToolImpl::Exec(spec) => spec.span,
            ToolImpl::Builtin { span, .. } => *span,
        }
    }
}

/// A tool that sends an HTTP request.
#[derive(Clone, Debug, Serialize)]
pub struct HttpSpec {
    /// The HTTP method as written (`GET`, `POST`, ...).
    pub method: Text,
    /// The URL; params may be interpolated.
    pub url: Template,
    /// Request headers, in the order written.
    pub headers: Vec<(Name, Template)>,
    /// `None`: the params are sent as a JSON object.
    pub body: Option<BodyValue>,
    /// A duration as written (`10s`); lowering parses it.
    pub timeout: Option<Text>,
    /// Where the spec was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A JSON body whose strings are templates.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum BodyValue {
    /// `null`.
    Null(Span),
    /// `true` or `false`.
    Bool(Spanned<bool>),
    /// A number.
    Number(Spanned<Number>),
    /// A string, which may interpolate params.
    String(Template),
    /// An array.
    List(Spanned<Vec<BodyValue>>),
    /// An object, members in the order written.
    Object(Spanned<Vec<(Name, BodyValue)>>),
}

/// A tool that runs a local program.
#[derive(Clone, Debug, Serialize)]
pub struct ExecSpec {
    /// The program and its arguments; no shell is involved.
    pub command: Vec<Text>,
    /// A duration as written (`10s`); lowering parses it.
    pub timeout: Option<Text>,
    /// The environment variables the tool is given besides `PATH` and the
    /// locale (`env NAME, …`; `env: [NAME, …]` in YAML).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<Name>,
    /// Where the spec was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A `signal`: something the model may report in any flow, and what follows.
#[derive(Clone, Debug, Serialize)]
pub struct SignalDecl {
    /// The signal's name.
    pub name: Name,
    /// Any of these descriptions triggers the signal.
    pub when: Vec<Text>,
    /// All of these must hold before the model is asked.
    pub guard: Vec<Expr>,
    /// `pre`, `post` or `both`: whether the signal is checked before or after the reply.
    pub phase: Option<Text>,
    /// `always`, `once` or `cooldown`: how often the signal may fire.
    pub behavior: Option<Text>,
    /// The duration of a `cooldown` behavior, as written (`10m`).
    pub cooldown: Option<Text>,
    /// Fields the model fills when it raises the signal.
    pub extract: Vec<Name>,
    /// Where the conversation goes; `None` when absent.
    pub then: Option<Then>,
    /// Where the declaration was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A `flow`: a task the conversation can be routed to, and its steps.
#[derive(Clone, Debug, Serialize)]
pub struct FlowDecl {
    /// The flow's name.
    pub name: Name,
    /// A human-readable title.
    pub title: Option<Text>,
    /// Any of these descriptions routes to the flow.
    pub when: Vec<Text>,
    /// Code guards; all must hold.
    pub guard: Vec<Expr>,
    /// Whether routing falls back to this flow when no flow matches.
    pub default: Option<Spanned<bool>>,
    /// Fields that must be collected before the flow completes.
    pub requires: Vec<Name>,
    /// Fields the flow may collect but need not.
    pub optional: Vec<Name>,
    /// Collected fields carried from one run of the flow to the next.
    pub keep: Vec<Name>,
    /// Fields the flow sets (not collects) that are also cleared for each run.
    pub fresh: Vec<Name>,
    /// Rules the model is given while in this flow.
    pub rules: Vec<Template>,
    /// Actions run when the flow is entered.
    pub on_enter: Vec<Action>,
    /// Actions run when the flow completes.
    pub on_complete: Vec<Action>,
    /// `complete: { next: F }`.
    pub complete_next: Option<Name>,
    /// The steps, in the order written.
    pub steps: Vec<StepDecl>,
    /// When a worker starts a run of this workflow on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleDecl>,
    /// Where the declaration was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `schedule "0 9 * * MON" in "Europe/Paris"` (YAML `schedule: { cron:
/// …, timezone: … }`): a workflow's cron schedule, read in its time zone.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleDecl {
    /// The five-field cron expression, as written.
    pub cron: Text,
    /// The IANA time zone the expression is read in; UTC when absent.
    pub timezone: Option<Text>,
    /// Where the declaration was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A step of a flow: what it says or asks, what it collects, and where it goes next.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepDecl {
    /// `None` when the step has no id (an `invalid_step` error).
    pub id: Option<Name>,
    /// Instructions to the model for this step.
    pub prompt: Option<Template>,
    /// Text sent to the user as is.
    pub say: Option<Template>,
    /// Fields this step asks for.
    pub collect: Vec<Name>,
    /// Fields that must be set before the step runs.
    pub requires: Vec<Name>,
    /// When true, the step is passed over.
    pub skip_if: Option<Expr>,
    /// All must hold for the step to be a successor candidate.
    pub when: Vec<Text>,
    /// Code guards; all must hold for the step to be a successor candidate.
    pub guard: Vec<Expr>,
    /// Whether the step is a pure compute step, with no model call.
    pub auto: Option<Spanned<bool>>,
    /// `None` when absent; `Some` of an empty list is `invalid_directive`.
    pub branches: Option<Spanned<Vec<Branch>>>,
    /// A step id or `end`.
    pub next: Option<Name>,
    /// The `do` actions, run when the step executes, in source order.
    pub actions: Vec<Action>,
    /// Actions run once when the step is entered.
    pub on_enter: Vec<Action>,
    /// Actions run before every model call for the step.
    pub prepare: Vec<Action>,
    /// Actions run after the step's reply.
    pub finalize: Vec<Action>,
    /// Tools the model may call while replying for this step.
    pub tools: Vec<Name>,
    /// Asks before giving up, the first included.
    pub max_asks: Option<Spanned<i64>>,
    /// What happens after `max_asks` unanswered asks.
    pub on_no_answer: Option<Box<Directive>>,
    /// What happens when the step's actions fail: a directive in a conversation, a policy in a workflow.
    pub on_error: Option<OnError>,
    /// A duration as written (`2d`).
    pub wait: Option<Text>,
    /// Where the step was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// One entry of a step's `branches`: a condition and where it leads.
#[derive(Clone, Debug, Serialize)]
pub struct Branch {
    /// All must hold; evaluated before `when`.
    pub guard: Vec<Expr>,
    /// All must hold.
    pub when: Vec<Text>,
    /// `None` when the entry has no `then` (a syntax error already reported).
    pub then: Option<Then>,
    /// A name for the branch, shown on its graph edge.
    pub label: Option<Text>,
    /// Where the entry was written.
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
    /// A directive object.
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
    /// Go to another flow.
    pub goto: Option<Goto>,
    /// Go to a step, of this flow or another.
    pub goto_step: Option<GotoStep>,
    /// `ask_again`: a `goto_step` that first clears what the step collects
    /// (and the confirmations that showed it); lowering spells it out.
    pub ask_again: Option<GotoStep>,
    /// Complete the current flow, then maybe enter another.
    pub complete: Option<Complete>,
    /// Leave the current flow with no completion.
    pub abort: Option<Abort>,
    /// Restart the current flow from its entry.
    pub reset: Option<Spanned<bool>>,
    /// The verbatim reply: the model is not asked.
    pub reply: Option<Template>,
    /// Fields assigned.
    pub set: Vec<Assignment>,
    /// Context keys assigned.
    pub set_context: Vec<Assignment>,
    /// Extra instructions for this turn (pre-model only).
    pub append_prompt: Vec<Template>,
    /// Extra tools for this turn (pre-model only).
    pub inject_tools: Vec<Name>,
    /// Skip the model this turn (pre-model only).
    pub halt: Option<Spanned<bool>>,
    /// Where the directive was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `goto`: switch to another flow, optionally handing it data.
#[derive(Clone, Debug, Serialize)]
pub struct Goto {
    /// `None` for `goto: {}` (an `invalid_directive`).
    pub flow: Option<Name>,
    /// Fields set in the target flow.
    pub data: Vec<Assignment>,
    /// Where the directive key was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `goto_step`: jump to a step.
#[derive(Clone, Debug, Serialize)]
pub struct GotoStep {
    /// `None`: a step of the current flow.
    pub flow: Option<Name>,
    /// `None` for an empty `goto_step: {}` (an `invalid_directive`).
    pub step: Option<Name>,
    /// Where the directive key was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `complete: true` or `complete: { next: F }`. `complete: false` is no
/// completion and is not represented.
#[derive(Clone, Debug, Serialize)]
pub struct Complete {
    /// The flow to go to afterwards; `None`: routing decides.
    pub next: Option<Name>,
    /// Where the directive key was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `abort: true` or `abort: "reason"`.
#[derive(Clone, Debug, Serialize)]
pub struct Abort {
    /// Why, shown to the user; `None` for `abort: true`.
    pub reason: Option<Template>,
    /// Where the directive key was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `field: expr`, in `set`, `set_context`, `goto.data` and call `args`.
#[derive(Clone, Debug, Serialize)]
pub struct Assignment {
    /// The field, key or argument assigned.
    pub name: Name,
    /// The value assigned.
    pub value: Expr,
}

/// One action of a `do`, `on_enter`, `prepare`, `finalize` or `on_complete` list.
#[derive(Clone, Debug, Serialize)]
pub struct Action {
    /// What the action does.
    pub kind: ActionKind,
    /// Where the action was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// What an action does.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ActionKind {
    /// Assign fields.
    Set(Vec<Assignment>),
    /// `append ITEM to LIST` (YAML `append: { LIST: ITEM }`): each
    /// assignment's name is a list field, its value the item added.
    Append(Vec<Assignment>),
    /// Call a tool.
    Call(Call),
    /// Apply a directive.
    Emit(Box<Directive>),
    /// Send text to the user.
    Say(Template),
    /// Run actions for each item of a list.
    ForEach(Box<ForEach>),
    /// Ask the model for a typed value (`ask_model F: "…"`, YAML
    /// `ask_model: { into: F, instruction: … }`).
    AskModel(Box<AskModel>),
}

/// A model step: one structured call whose answer is written to a field.
#[derive(Clone, Debug, Serialize)]
pub struct AskModel {
    /// The field the answer is written to; its type is the answer's.
    pub into: Name,
    /// What the model is asked, a template over the data.
    pub instruction: Template,
    /// Sample answers shown to the model.
    pub examples: Vec<Text>,
    /// Tools the model may call before it answers.
    pub tools: Vec<Name>,
    /// Where the action was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A tool call.
#[derive(Clone, Debug, Serialize)]
pub struct Call {
    /// The tool called.
    pub tool: Name,
    /// Its arguments.
    pub args: Vec<Assignment>,
    /// The field the result is stored in; `None`: the result is dropped.
    pub save: Option<Name>,
    /// Where the call was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// `for each`: actions run once per item of a list.
#[derive(Clone, Debug, Serialize)]
pub struct ForEach {
    /// The list iterated.
    pub items: Expr,
    /// The name each item is bound to.
    pub binding: Name,
    /// Items for which this is false are skipped.
    pub filter: Option<Expr>,
    /// The actions run per item.
    pub actions: Vec<Action>,
    /// Where the loop was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// What a step does when its actions fail.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum OnError {
    /// Fail with the error: the turn (the session stays as it was) or the workflow run.
    Stop(Span),
    /// Workflows: go on to the next step.
    Continue(Span),
    /// A conversation step's answer to a failure: reply and stay, go to a
    /// step, or abort.
    Directive(Box<Directive>),
    /// Workflows: run the step again, up to `times` more times.
    Retry {
        /// How many more times to try.
        times: Spanned<i64>,
        /// The wait between tries, as written (`2s`).
        backoff: Option<Text>,
        /// Where `retry` was written.
        #[serde(skip_serializing_if = "crate::source::spans_omitted")]
        span: Span,
    },
}

/// `{{ expr }}` interpolations within text.
#[derive(Clone, Debug, Serialize)]
pub struct Template {
    /// The literal text and interpolated expressions, in order.
    pub parts: Vec<TemplatePart>,
    /// Where the text was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A piece of a template.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum TemplatePart {
    /// Literal text.
    Text(String),
    /// An interpolated `{{ expr }}`.
    Expr(Expr),
}

impl Template {
    /// A template with no interpolation.
    pub fn literal(text: impl Into<String>, span: Span) -> Template {
        Template { parts: vec![TemplatePart::Text(text.into())], span }
    }
}

/// An expression with the span it was read from.
#[derive(Clone, Debug, Serialize)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// Where it was written.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// The forms an expression takes.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExprKind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool {
        /// The value.
        value: bool,
    },
    /// An integer literal.
    Int {
        /// The value.
        value: i64,
    },
    /// A float literal.
    Float {
        /// The value.
        value: f64,
    },
    /// A string literal.
    String {
        /// The value, escapes resolved.
        value: String,
    },
    /// A list literal `[a, b]`.
    List {
        /// The elements, in order.
        items: Vec<Expr>,
    },
    /// `guests`, `context.tier`, `item.email`, `env.TOKEN`: the first
    /// segment is resolved by lowering (field, `context`, loop variable,
    /// tool param, `env`).
    Path {
        /// The dot-separated segments.
        segments: Vec<Name>,
    },
    /// `not x`, `-x`.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// What it applies to.
        operand: Box<Expr>,
    },
    /// `a op b`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `x is set` / `x is not set`.
    IsSet {
        /// The value tested.
        operand: Box<Expr>,
        /// `true` for `is not set`.
        negated: bool,
    },
    /// A built-in function call, `len(x)`.
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
    /// The function's name.
    pub function: Name,
    /// The arguments, in order.
    pub args: Vec<Expr>,
}

/// A prefix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    /// `not`: boolean negation.
    Not,
    /// `-`: arithmetic negation.
    Neg,
}

/// An infix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    /// `or`.
    Or,
    /// `and`.
    And,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `in`: membership in a list, or substring of a string.
    In,
    /// `not in`.
    NotIn,
    /// `+`: addition, or joining two lists.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`: remainder.
    Rem,
}

impl BinaryOp {
    /// The operator as written in source, for messages.
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
    /// The placeholder for an expression that could not be parsed.
    pub fn error(span: Span) -> Expr {
        Expr { kind: ExprKind::Error, span }
    }
}
