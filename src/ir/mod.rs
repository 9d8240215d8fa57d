//! The resolved, typed IR: what the checker proves, the graph draws and the
//! runtime executes. Flows, steps, fields, context keys, tools and signals
//! are referred to by typed indices, never by strings, so a target that does
//! not exist cannot be represented. Expressions carry their types.
//!
//! `lower` builds it from the AST. Spans are kept on every node that a
//! diagnostic may point at; `flowc compile` leaves them out unless asked.
//! Nothing here does I/O.

#![warn(missing_docs)]

pub(crate) mod fold;
pub(crate) mod lower;
pub(crate) mod successor;
pub(crate) mod walk;

use crate::expr::{Expr, Template, Type};
use crate::source::Span;
use serde::Serialize;

pub use crate::ids::{ContextId, FieldId, FlowId, SignalId, StepId, ToolId};

/// A whole compiled program: what `flowc compile` prints as JSON and what
/// the runtime runs. The ids in it ([`FieldId`], [`FlowId`], ...) are
/// indices into its lists.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    /// The `agent` block: name, identity, rules and turn limits.
    pub agent: Agent,
    /// The `schema` fields, indexed by [`FieldId`].
    pub fields: Vec<Field>,
    /// The `context` keys, indexed by [`ContextId`].
    pub context: Vec<Field>,
    /// The declared tools, indexed by [`ToolId`].
    pub tools: Vec<Tool>,
    /// The declared signals, indexed by [`SignalId`].
    pub signals: Vec<Signal>,
    /// The flows, in source order, indexed by [`FlowId`].
    pub flows: Vec<Flow>,
    /// The flow marked `default`, which a conversation runs when no other
    /// flow is routed to; `None` when there is none.
    pub default_flow: Option<FlowId>,
}

#[derive(Clone, Debug, Serialize)]
/// The `agent` block: who the model speaks as, and the limits of a turn.
pub struct Agent {
    /// The agent's name, if given.
    pub name: Option<String>,
    /// The identity instruction put first in every model prompt.
    pub identity: Option<Template>,
    /// Rules added to every model prompt, in order.
    pub rules: Vec<Template>,
    /// How far one conversation turn may go.
    pub limits: Limits,
    /// What each model request carries of the conversation; left out of
    /// the JSON when it is the default.
    #[serde(skip_serializing_if = "History::is_default")]
    pub history: History,
}

/// What each model request carries of the conversation (`agent.history`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct History {
    /// The most messages of the history a request carries (default 12),
    /// after the summary, if any.
    pub keep_last: u32,
    /// The oldest messages a request must leave out to fit the model's
    /// context window are summarised by one model call, and the summary is
    /// sent in their place (kept in the session).
    pub summarize: bool,
}

/// The messages a request carries without `keep_last`.
pub const DEFAULT_KEEP_LAST: u32 = 12;

impl Default for History {
    fn default() -> History {
        History { keep_last: DEFAULT_KEEP_LAST, summarize: false }
    }
}

impl History {
    /// Whether the program left `history` as it is by default.
    pub fn is_default(&self) -> bool {
        *self == History::default()
    }
}

/// Continuation limits of one conversation turn (LANGUAGE.md `agent.limits`).
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    /// The most `auto` steps one turn runs before it stops (default 10).
    pub max_auto_steps: u32,
    /// The most model/tool round trips in one reply (default 5).
    pub max_tool_rounds: u32,
    /// The most model tokens one turn may spend; `None`: no limit.
    pub max_turn_tokens: Option<u64>,
    /// The most model calls a workflow run's model steps may make, across
    /// resumes; `None`: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_llm_calls: Option<u64>,
    /// The most model tokens (prompt and completion) a workflow run's
    /// model steps may spend, across resumes; `None`: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_tokens: Option<u64>,
    /// How long one turn may take, in milliseconds (default 60 000).
    pub turn_timeout_ms: u64,
    /// What a turn a limit stops before any reply answers; `None`: the
    /// runtime's default message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Template>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_auto_steps: 10,
            max_tool_rounds: 5,
            max_turn_tokens: None,
            max_run_llm_calls: None,
            max_run_tokens: None,
            turn_timeout_ms: 60_000,
            message: None,
        }
    }
}

/// A declared value: a schema field, context key, tool param, tool return
/// field or object member.
#[derive(Clone, Debug, Serialize)]
pub struct Field {
    /// The name the source declares it under.
    pub name: String,
    /// Its declared type and constraints (`type` in the JSON).
    #[serde(rename = "type")]
    pub ty: ValueType,
    /// Where it is declared; left out of the JSON unless spans are asked for.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// A declared type with its constraints, as the schema states it.
#[derive(Clone, Debug, Serialize)]
pub struct ValueType {
    /// The base type (flattened into the JSON object as `type`).
    #[serde(flatten)]
    pub kind: TypeKind,
    /// A description for the model, passed on in the JSON schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The least value of a number, or the fewest items of a list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// The greatest value of a number, or the most items of a list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// A regular expression a string value must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Example values shown to the model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
/// The base type of a declared value, as the language spells it.
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TypeKind {
    /// `string`: text.
    String,
    /// `int`: a whole number.
    Int,
    /// `float`: a number.
    Float,
    /// `bool`: true or false.
    Bool,
    /// `date`: a calendar date, written `YYYY-MM-DD`.
    Date,
    /// `datetime`: an ISO 8601 instant, such as `2026-01-05T10:00:00Z`.
    #[serde(rename = "datetime")]
    DateTime,
    /// `enum`: one string of a fixed set.
    Enum {
        /// The allowed strings, in declaration order.
        values: Vec<String>,
    },
    /// `list`: a list of values of one type.
    List {
        /// The type of each item.
        items: Box<ValueType>,
    },
    /// `object`: a JSON object with exactly these members.
    Object {
        /// The members, in declaration order.
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

/// A declared tool: something the program or the model can call.
#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    /// The name the program and the model call it by.
    pub name: String,
    /// What it does, told to the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its parameters, in declaration order; a call gives one argument each.
    pub params: Vec<Field>,
    /// `None` when the tool declares no `returns` (its result cannot be saved).
    pub returns: Option<Vec<Field>>,
    /// `None` when the declaration had no valid implementation (reported).
    pub implementation: Option<ToolImpl>,
    /// Where it is declared; left out of the JSON unless spans are asked for.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
/// How a tool is carried out: exactly one of `http`, `exec` or `builtin`.
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolImpl {
    /// An HTTP request whose JSON response is the result.
    Http {
        /// The request method.
        method: HttpMethod,
        /// The URL, a template over the params and `env`.
        url: Template,
        /// Request headers, each value a template.
        headers: Vec<(String, Template)>,
        /// `None`: a `POST`, `PUT` or `PATCH` sends the arguments as a JSON
        /// object; a `GET` or `DELETE` sends no body.
        body: Option<Body>,
        /// How long the request may take, in milliseconds.
        timeout_ms: u64,
    },
    /// A program run with the JSON arguments on stdin, which prints the
    /// JSON result on stdout.
    Exec {
        /// The program and its arguments.
        command: Vec<String>,
        /// How long the program may run, in milliseconds.
        timeout_ms: u64,
        /// The variables of flowc's environment the tool is given besides
        /// `PATH` and the locale; the model keys and the store never are.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
    /// A tool flowc provides itself.
    Builtin {
        /// Which one.
        builtin: Builtin,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
/// The method of an HTTP tool's request.
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
/// A tool built into flowc.
pub enum Builtin {
    /// Returns the current time.
    Now,
    /// Returns a fresh unique id (a UUID).
    Uuid,
    /// Returns its arguments.
    Echo,
}

/// A JSON request body whose strings are templates over the tool's params.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    /// JSON `null`.
    Null,
    /// A JSON boolean.
    Bool(bool),
    /// A JSON number.
    Number(serde_json::Number),
    /// A JSON string, rendered from a template.
    String(Template),
    /// A JSON array.
    List(Vec<Body>),
    /// A JSON object, members in source order.
    Object(Vec<(String, Body)>),
}

/// Default timeout of a tool call without `timeout`.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;

/// A declared signal: a condition checked on every user message, whose
/// directive applies when it matches (LANGUAGE.md section 7).
#[derive(Clone, Debug, Serialize)]
pub struct Signal {
    /// The name it is declared under.
    pub name: String,
    /// AI conditions the model is asked about; any may match.
    pub when: Vec<String>,
    /// Code guards, checked before the model is asked; all must hold.
    pub guard: Vec<Expr>,
    /// When in the turn it is checked.
    pub phase: Phase,
    /// How often it may fire.
    pub behavior: Behavior,
    /// Schema fields extracted from the message when it matches.
    pub extract: Vec<FieldId>,
    /// The directive that applies when it matches.
    pub then: Option<Directive>,
    /// Where it is declared; left out of the JSON unless spans are asked for.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
/// When in a turn a signal is checked.
pub enum Phase {
    /// Before the model answers (the default).
    Pre,
    /// After the model answered.
    Post,
    /// Both before and after.
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
/// How often a signal may fire in one conversation.
pub enum Behavior {
    /// Every time it matches (the default).
    Always,
    /// The first time it matches only.
    Once,
    /// Again only once this long has passed since it last fired.
    Cooldown {
        /// The pause, in milliseconds.
        cooldown_ms: u64,
    },
}

/// A flow: a list of steps a conversation (or, when all are `auto`, a
/// workflow run) goes through (LANGUAGE.md section 3).
#[derive(Clone, Debug, Serialize)]
pub struct Flow {
    /// The name it is declared under; `goto` targets it.
    pub name: String,
    /// A human-readable title, if given.
    pub title: Option<String>,
    /// AI routing conditions; any may match.
    pub when: Vec<String>,
    /// Code guards; all must hold.
    pub guard: Vec<Expr>,
    /// Marked `default`: run when no other flow is routed to.
    pub default: bool,
    /// All steps are `auto`: a workflow, run without a user.
    pub workflow: bool,
    /// Fields pre-extracted from each user message while the flow is a
    /// candidate; a workflow's inputs, without which its run refuses to start.
    pub requires: Vec<FieldId>,
    /// Where each of `requires` is named, for diagnostics.
    #[serde(skip)]
    pub requires_spans: Vec<Span>,
    /// Fields pre-extracted from each user message while the flow is a
    /// candidate, but not needed to start it.
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
    /// Rules added to the model prompt while the flow is current.
    pub rules: Vec<Template>,
    /// Actions run when a new run of the flow starts.
    pub on_enter: Vec<Action>,
    /// Actions run when the flow completes.
    pub on_complete: Vec<Action>,
    /// The flow entered after this one completes (`complete.next`), unless
    /// the completing directive names another.
    pub complete_next: Option<FlowId>,
    /// The steps, in list order, indexed by [`StepId`]; the first is the entry.
    pub steps: Vec<Step>,
    /// Where it is declared; left out of the JSON unless spans are asked for.
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
    /// When a worker starts a run of this workflow on its own (the
    /// checker proves it reads, and that the flow is a workflow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
}

/// A workflow's `schedule`, as written: [`crate::schedule::Schedule`]
/// reads it.
#[derive(Clone, Debug, Serialize)]
pub struct Schedule {
    /// The five-field cron expression.
    pub cron: String,
    /// The IANA time zone it is read in (`UTC` when none is written).
    pub timezone: String,
    /// Where the expression is written.
    #[serde(skip)]
    pub cron_span: Span,
    /// Where the zone is written; the expression's place when none is.
    #[serde(skip)]
    pub timezone_span: Span,
}

/// A step of a flow (LANGUAGE.md section 4).
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// Its `id`, unique in its flow.
    pub name: String,
    /// An `auto` step runs without a model call or user message.
    pub auto: bool,
    /// The instruction to the model while the step is current.
    pub prompt: Option<Template>,
    /// A verbatim message said when the step runs; no model is asked.
    pub say: Option<Template>,
    /// The fields the step asks the user for; it stays current until all are set.
    pub collect: Vec<FieldId>,
    /// Fields that must be set before the step runs.
    pub requires: Vec<FieldId>,
    /// The step is passed over when this holds.
    pub skip_if: Option<Expr>,
    /// AI conditions for entering the step as a successor; all must hold.
    pub when: Vec<String>,
    /// Code conditions for the same; all must hold.
    pub guard: Vec<Expr>,
    /// Branch entries, tried in order when the step is left; the first
    /// that matches wins.
    pub branches: Vec<Branch>,
    /// Where to go when no branch entry matched; `None`: the next step in
    /// the list, or completion after the last.
    pub next: Option<Next>,
    /// The step's `do` actions, run when it executes.
    pub actions: Vec<Action>,
    /// Actions run once when the step is entered.
    pub on_enter: Vec<Action>,
    /// Actions run before every model call made for the step.
    pub prepare: Vec<Action>,
    /// Actions run after each model call made for the step.
    pub finalize: Vec<Action>,
    /// The tools the model may call while the step is current.
    pub tools: Vec<ToolId>,
    /// How many times the step asks before `on_no_answer` applies.
    pub max_asks: u32,
    /// What happens after `max_asks` asks went unanswered; `None`: the
    /// flow is aborted.
    pub on_no_answer: Option<Box<Directive>>,
    /// A workflow step's failure policy.
    pub on_error: OnError,
    /// A conversation step's `on_error`: what a turn does when the step's
    /// actions fail (a tool call, an invalid write). `None` takes the
    /// default: an apology, and the flow is aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// A workflow step's `wait`: the run pauses this many milliseconds
    /// (stored, resumed later) before the step runs.
    pub wait_ms: Option<u64>,
    /// Where it is declared; left out of the JSON unless spans are asked for.
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
/// A step's `next`.
#[serde(rename_all = "snake_case")]
pub enum Next {
    /// Go to this step of the same flow.
    Step(StepId),
    /// `next: end`: complete the flow.
    End,
}

/// One entry of a step's `branches`.
#[derive(Clone, Debug, Serialize)]
pub struct Branch {
    /// Code conditions (`if`), evaluated first; all must hold.
    pub guard: Vec<Expr>,
    /// AI conditions, asked only when the code ones hold; all must hold.
    pub when: Vec<String>,
    /// Where the entry leads when it matches.
    pub then: Then,
    /// A name for the entry, shown in traces and graphs.
    pub label: Option<String>,
    /// Where it is written; left out of the JSON unless spans are asked for.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
/// Where a branch entry leads.
pub enum Then {
    /// A step of the same flow.
    Step(StepId),
    /// A directive, applied when the entry matches (a flow named as a
    /// target is a `goto`).
    // Boxed, like the AST's: most branch entries name a step.
    Directive(Box<Directive>),
}

/// A resolved directive: at most one position field, writes, augmentation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Directive {
    /// Where the conversation goes, if anywhere.
    pub position: Option<Position>,
    /// Written `ask_again S`: its `set` starts with the nulls that clear
    /// what `S` collects (and the confirmations that showed it), and its
    /// position is `goto_step S` (docs/language.md, "Asking a step again").
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ask_again: bool,
    /// A verbatim assistant message; the model is not asked for one.
    pub reply: Option<Template>,
    /// Field writes, validated together: none is made unless all are valid.
    pub set: Vec<Write>,
    /// Context writes.
    pub set_context: Vec<ContextWrite>,
    /// Extra instructions for the model this turn (before the model only).
    pub append_prompt: Vec<Template>,
    /// Extra tools the model may call this turn (before the model only).
    pub inject_tools: Vec<ToolId>,
    /// Skip the model this turn (before the model only).
    pub halt: bool,
    /// Where it is written; left out of the JSON unless spans are asked for.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
/// The position part of a directive: where the conversation goes.
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// `goto`: start a new run of a flow at its entry.
    Goto {
        /// The flow entered.
        flow: FlowId,
        /// Writes made once the new run has started.
        data: Vec<Write>,
    },
    /// `goto_step`: jump to a step.
    GotoStep {
        /// The step's flow (the current one unless another is named).
        flow: FlowId,
        /// The step.
        step: StepId,
    },
    /// `complete`: complete the current flow.
    Complete {
        /// The flow entered next, overriding the flow's `complete.next`.
        next: Option<FlowId>,
    },
    /// `abort`: end the current flow without completing it.
    Abort {
        /// Said to the user, if given.
        reason: Option<Template>,
    },
    /// `reset`: restart the current flow from its entry.
    Reset,
}

impl Position {
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

/// A write of a schema field.
#[derive(Clone, Debug, Serialize)]
pub struct Write {
    /// The field written.
    pub field: FieldId,
    /// The value, checked against the field's type.
    pub value: Expr,
}

/// A write of a context key.
#[derive(Clone, Debug, Serialize)]
pub struct ContextWrite {
    /// The key written.
    pub key: ContextId,
    /// The value, checked against the key's type.
    pub value: Expr,
}

/// One action of a `do`, hook or `on_complete` list.
#[derive(Clone, Debug, Serialize)]
pub struct Action {
    /// What it does (flattened into the JSON object, tagged `action`).
    #[serde(flatten)]
    pub kind: ActionKind,
    /// Where it is written; left out of the JSON unless spans are asked for.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
/// The kinds of action.
pub enum ActionKind {
    /// `set FIELD = VALUE`.
    Set(Write),
    /// `append ITEM to LIST`: the write's value is the item added to the
    /// end of the list field (an unset list counts as empty).
    Append(Write),
    /// A tool call.
    Call(Call),
    /// A directive, joining the bus of the phase the action runs in.
    // Boxed: both are several times the size of the common `set`.
    #[serde(serialize_with = "serialize_emitted")]
    Emit(Box<Directive>),
    /// A verbatim message to the user.
    Say {
        /// The message.
        text: Template,
    },
    /// `for_each`: actions repeated per item of a list.
    ForEach(Box<ForEach>),
    /// A model step: one structured call for a value of a field's type.
    AskModel(Box<AskModel>),
}

/// `ask_model F: "…"`: the model is asked, in one structured call, for a
/// value of the field's type, which is validated (and repaired once)
/// before it is written.
#[derive(Clone, Debug, Serialize)]
pub struct AskModel {
    /// The field written; the answer must be a value of its type.
    pub field: FieldId,
    /// What the model is asked, rendered against the data when it runs.
    pub instruction: Template,
    /// Sample answers shown to the model.
    pub examples: Vec<String>,
    /// Tools the model may call before it answers.
    pub tools: Vec<ToolId>,
}

/// An emitted directive is written under its own key, `directive`: merged
/// into the action's object, its `span` would collide with the action's.
fn serialize_emitted<S: serde::Serializer>(directive: &Directive, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut emitted = serializer.serialize_struct("Emit", 1)?;
    emitted.serialize_field("directive", directive)?;
    emitted.end()
}

/// A call of a declared tool.
#[derive(Clone, Debug, Serialize)]
pub struct Call {
    /// The tool called.
    pub tool: ToolId,
    /// One argument per param of the tool, in the tool's param order.
    pub args: Vec<Expr>,
    /// The field the result is saved to, if any.
    pub save: Option<FieldId>,
}

/// A `for_each` loop.
#[derive(Clone, Debug, Serialize)]
pub struct ForEach {
    /// The list iterated over.
    pub items: Expr,
    /// The name each item is bound to in the body.
    pub binding: String,
    /// The local slot the binding occupies.
    pub slot: u32,
    /// Items for which this does not hold are passed over.
    pub filter: Option<Expr>,
    /// The body, run once per item.
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
/// A workflow step's failure policy.
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum OnError {
    /// The run fails; later steps are marked skipped (the default).
    Stop,
    /// The step is marked failed and the run goes on.
    Continue,
    /// The step is run again before the failure counts.
    Retry {
        /// How many more times.
        times: u32,
        /// The pause before each retry, in milliseconds.
        backoff_ms: u64,
    },
}

impl Program {
    /// The flow with this id, `None` for an id of another program.
    pub fn flow(&self, id: FlowId) -> Option<&Flow> {
        self.flows.get(id.index())
    }

    /// The schema field with this id.
    pub fn field(&self, id: FieldId) -> Option<&Field> {
        self.fields.get(id.index())
    }

    /// The tool with this id.
    pub fn tool(&self, id: ToolId) -> Option<&Tool> {
        self.tools.get(id.index())
    }

    /// The id of the flow declared under this name.
    pub fn flow_by_name(&self, name: &str) -> Option<FlowId> {
        self.flows.iter().position(|flow| flow.name == name).map(FlowId::from_index)
    }

    /// The id of the schema field declared under this name.
    pub fn field_by_name(&self, name: &str) -> Option<FieldId> {
        self.fields.iter().position(|field| field.name == name).map(FieldId::from_index)
    }
}

/// The fields a new run of a flow with these steps starts without: every
/// field a step collects, except `keep`, and the `fresh` fields besides.
pub(crate) fn run_fields(steps: &[Step], keep: &[FieldId], fresh: &[FieldId]) -> Vec<FieldId> {
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
pub(crate) enum OutputShape {
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
pub(crate) fn output_shape(actions: &[Action]) -> OutputShape {
    fn walk(actions: &[Action], in_loop: bool, written: &mut Vec<FieldId>, calls: &mut Vec<(ToolId, bool)>) {
        for action in actions {
            match &action.kind {
                ActionKind::Set(write) | ActionKind::Append(write) => written.push(write.field),
                ActionKind::Call(call) => {
                    written.extend(call.save);
                    calls.push((call.tool, in_loop));
                }
                ActionKind::Emit(directive) => written.extend(directive.set.iter().map(|write| write.field)),
                ActionKind::AskModel(ask) => written.push(ask.field),
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
    /// The step with this id.
    pub fn step(&self, id: StepId) -> Option<&Step> {
        self.steps.get(id.index())
    }

    /// The id of the step named so in this flow.
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
pub(crate) fn object_schema(fields: &[Field]) -> serde_json::Value {
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
mod tests;
