//! What lowering finds wrong, as values, and the one place that puts them
//! into words.
//!
//! Lowering records a [`LowerError`] holding the facts of each problem
//! (names, spans, the types involved, the nearest declared name for a
//! did-you-mean); [`LowerError::into_diagnostic`] turns it into the
//! [`Diagnostic`] a user sees: its code, message, labels and help. Tests
//! assert on the values; the wording is tested once, through the
//! snapshots of `tests/check`.

use crate::diag::suggestion;
use crate::diag::{Code, Diagnostic, did_you_mean};
use crate::duration::{DurationError, MAX_DURATION_DAYS};
use crate::expr::Type;
use crate::expr::typeck::TypeError;
use crate::source::Span;

/// Words that cannot name a field, flow, step or anything else.
pub const RESERVED_WORDS: &[&str] =
    &["and", "or", "not", "in", "is", "set", "true", "false", "null", "context", "env", "steps", "end"];

/// The names a declared type may have.
pub(super) const TYPE_NAMES: &[&str] =
    &["string", "int", "float", "bool", "date", "datetime", "enum", "list", "object"];

/// The builtin tools flowc provides.
pub(super) const BUILTINS: &[&str] = &["now", "uuid", "echo"];

/// Which declarations share an id space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdKind {
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

/// What is wrong with a declared type (`invalid_schema`, labelled "here").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchemaProblem {
    ListWithoutItems,
    ObjectWithoutFields,
    EnumWithoutValues,
    EmptyEnumValue,
    BoundOnNonNumeric,
    PatternOnNonString,
    ValuesOnNonEnum,
    ItemsOnNonList,
    FieldsOnNonObject,
}

/// What is wrong with a signal's settings (`invalid_value`, labelled "here").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SignalProblem {
    UnknownPhase(String),
    UnknownBehavior(String),
    CooldownWithoutDuration,
    CooldownWithoutBehavior,
}

/// What a step's `on_error` is, where its flow does not allow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnErrorKind {
    Directive,
    Continue,
    Retry,
}

/// The position keys of a directive, of which it may have one.
pub(crate) type PositionKey = &'static str;

/// One problem lowering found, with the facts its diagnostic is written
/// from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LowerError {
    /// A problem in an expression or template, found and worded by the
    /// type checker (`crate::expr::typeck`).
    Expression(TypeError),
    Id(IdError),
    Schema(SchemaError),
    Value(ValueError),
    Name(NameError),
    Directive(DirectiveError),
    Tool(ToolError),
    Action(ActionError),
    Step(StepError),
}

/// An id declared twice, or not an id.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum IdError {
    DuplicateId { kind: IdKind, name: String, span: Span, first: Span },
    DuplicateStep { flow: String, name: String, span: Span, first: Span },
    MalformedId { kind: IdKind, name: String, span: Span },
    ReservedWord { kind: IdKind, name: String, span: Span },
    DuplicateDefault { flow: String, span: Span, first_flow: String, first: Span },
}

/// A declared type that is unknown or whose constraints do not fit it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SchemaError {
    UnknownType { name: String, span: Span },
    InvalidSchema { problem: SchemaProblem, span: Span },
    RepeatedEnumValue { value: String, span: Span, first: Span },
    MinAboveMax { min: Span, max: Span },
    InvalidPattern { detail: String, span: Span },
}

/// A setting whose value is out of its range.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ValueError {
    InvalidDuration { text: String, problem: DurationError, span: Span },
    NotPositive { setting: &'static str, value: i64, span: Span },
    InvalidSignalSetting { problem: SignalProblem, span: Span },
}

/// A name that resolves to nothing; `close` is the nearest declared name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NameError {
    UnknownField {
        name: String,
        span: Span,
        close: Option<String>,
    },
    UnknownContextKey {
        name: String,
        span: Span,
        close: Option<String>,
    },
    UnknownTool {
        name: String,
        span: Span,
        close: Option<String>,
    },
    /// A flow named by `goto`, `complete next` or `goto_step FLOW.S`;
    /// `names_a_step` when the name is a step of the current flow.
    UnknownFlow {
        name: String,
        span: Span,
        close: Option<String>,
        names_a_step: bool,
    },
    /// A signal's bare target, which can only be a flow. `misspelt_directive`
    /// is the directive keyword it is close to; `names_a_step` when some
    /// flow has a step of that name.
    UnknownSignalTarget {
        name: String,
        span: Span,
        close: Option<String>,
        misspelt_directive: Option<&'static str>,
        names_a_step: bool,
    },
    /// A branch's `then` (`flows_allowed`) or a `next` naming nothing: no
    /// step of the flow (nor flow, for a `then`). `names_a_flow` when a
    /// `next` names a flow.
    UnknownStepTarget {
        name: String,
        span: Span,
        flows_allowed: bool,
        close: Option<String>,
        misspelt_directive: Option<&'static str>,
        names_a_flow: bool,
    },
    /// A `then`/`next` naming a step of another flow (`owner`).
    CrossFlowStep {
        name: String,
        span: Span,
        owner: String,
    },
    /// `goto_step FLOW.STEP` where the flow has no such step.
    UnknownStepOfFlow {
        flow: String,
        step: String,
        span: Span,
        close: Option<String>,
    },
}

/// A directive (or a step's branches) that cannot move the conversation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DirectiveError {
    GotoWithoutFlow {
        span: Span,
    },
    GotoStepWithoutStep {
        key: PositionKey,
        span: Span,
    },
    GotoStepWithoutFlow {
        key: PositionKey,
        step: String,
        span: Span,
    },
    /// `ask_again` names a step that collects nothing: nothing to ask.
    AskAgainCollectsNothing {
        step: String,
        span: Span,
    },
    TwoPositions {
        first: PositionKey,
        first_span: Span,
        second: PositionKey,
        second_span: Span,
    },
    ReplyWithAbort {
        reply: Span,
        abort: Span,
    },
    EmptyDirective {
        span: Span,
    },
    EmptyBranches {
        span: Span,
    },
}

/// A tool that has not exactly one implementation flowc can run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToolError {
    NoImplementation {
        tool: String,
        span: Span,
    },
    TwoImplementations {
        tool: String,
        first: Span,
        second: Span,
    },
    UnknownHttpMethod {
        method: String,
        span: Span,
    },
    ExecWithoutProgram {
        span: Span,
    },
    /// A name in an exec tool's `env` that cannot name an environment
    /// variable.
    EnvName {
        name: String,
        span: Span,
    },
    UnknownBuiltin {
        name: String,
        span: Span,
    },
    /// An http tool's url whose scheme is not http or https (`scheme`),
    /// or that has none (`None`).
    UrlScheme {
        scheme: Option<String>,
        span: Span,
    },
}

/// An action whose arguments, saved result or items do not fit.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ActionError {
    /// An argument naming no param of the tool; `params` are the tool's.
    UnknownParam {
        tool: String,
        param: String,
        span: Span,
        params: Vec<String>,
    },
    ParamPassedTwice {
        param: String,
        span: Span,
    },
    MissingArguments {
        tool: String,
        missing: Vec<String>,
        span: Span,
    },
    SaveWithoutReturns {
        tool: String,
        span: Span,
    },
    /// `save: FIELD` where the tool's result (`saved`: its single return's
    /// name, or `None` for the whole result object) does not fit the field.
    SaveMismatch {
        field: String,
        field_type: Type,
        tool: String,
        saved: Option<String>,
        saved_type: Type,
        span: Span,
    },
    ForEachOverNonList {
        found: Type,
        span: Span,
    },
    AppendToNonList {
        field: String,
        found: Type,
        span: Span,
    },
}

/// A flow or step that cannot run as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StepError {
    FlowWithoutSteps { flow: String, span: Span },
    StepWithoutId { span: Span },
    OnErrorNotAllowed { step: String, workflow: bool, kind: OnErrorKind, span: Span },
    AutoStepCollects { step: String, field: String, span: Span },
    WaitOnInputStep { step: String, span: Span },
    MaxAsksBelowOne { value: i64, span: Span },
}

/// "did you mean `x`?" when there is a close name, else `otherwise`.
/// The did-you-mean for a target that is a misspelt directive with no
/// argument (`-> compelte`), which the front end read as a name.
fn directive_help(keyword: &str) -> String {
    format!("did you mean the directive `{keyword}`? (`{keyword}` in .flow, `{{ {keyword}: true }}` in YAML)")
}

/// The directive keywords without an argument a bare name may be a
/// misspelling of.
pub(super) fn misspelt_directive(name: &str) -> Option<&'static str> {
    did_you_mean(name, ["complete", "abort", "reset"])
}

fn backticked(names: &[String]) -> String {
    names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
}

impl SchemaProblem {
    fn words(self) -> (&'static str, &'static str) {
        match self {
            SchemaProblem::ListWithoutItems => {
                ("a list needs `items`", "say what the list holds: `list(string)` in .flow, `items: string` in YAML")
            }
            SchemaProblem::ObjectWithoutFields => (
                "an object needs `fields`",
                "declare its fields: `object { name: string }` in .flow, `fields: { name: string }` in YAML",
            ),
            SchemaProblem::EnumWithoutValues => (
                "an enum needs at least one value",
                "list its values: `enum(free, pro)` in .flow, `values: [free, pro]` in YAML",
            ),
            SchemaProblem::EmptyEnumValue => ("an enum value cannot be empty", "remove the empty value"),
            SchemaProblem::BoundOnNonNumeric => {
                ("`min`/`max` apply to numbers and lists", "remove it, or use `pattern` for strings")
            }
            SchemaProblem::PatternOnNonString => ("`pattern` applies to strings", "remove it"),
            SchemaProblem::ValuesOnNonEnum => ("`values` apply to enums", "use `type: enum` or remove `values`"),
            SchemaProblem::ItemsOnNonList => ("`items` apply to lists", "use `type: list` or remove `items`"),
            SchemaProblem::FieldsOnNonObject => ("`fields` apply to objects", "use `type: object` or remove `fields`"),
        }
    }
}

impl SignalProblem {
    fn words(&self) -> (String, &'static str) {
        match self {
            SignalProblem::UnknownPhase(other) => {
                (format!("unknown phase `{other}`"), "a signal's phase is pre, post or both")
            }
            SignalProblem::UnknownBehavior(other) => {
                (format!("unknown behavior `{other}`"), "a signal's behavior is always, once or cooldown")
            }
            SignalProblem::CooldownWithoutDuration => {
                ("`cooldown` needs a duration".to_string(), "add `cooldown: 10m`")
            }
            SignalProblem::CooldownWithoutBehavior => (
                "`cooldown` applies only with `behavior: cooldown`".to_string(),
                "add `behavior: cooldown` or remove `cooldown`",
            ),
        }
    }
}

impl LowerError {
    /// The diagnostic a user sees: lowering's problems are put into words
    /// here and nowhere else.
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            LowerError::Expression(error) => error.into_diagnostic(),
            LowerError::Id(error) => error.into_diagnostic(),
            LowerError::Schema(error) => error.into_diagnostic(),
            LowerError::Value(error) => error.into_diagnostic(),
            LowerError::Name(error) => error.into_diagnostic(),
            LowerError::Directive(error) => error.into_diagnostic(),
            LowerError::Tool(error) => error.into_diagnostic(),
            LowerError::Action(error) => error.into_diagnostic(),
            LowerError::Step(error) => error.into_diagnostic(),
        }
    }
}

impl From<IdError> for LowerError {
    fn from(error: IdError) -> LowerError {
        LowerError::Id(error)
    }
}

impl IdError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            IdError::DuplicateId { kind, name, span, first } => {
                Diagnostic::new(Code::DuplicateId, format!("the {} `{name}` is declared twice", kind.noun()))
                    .at(span, "declared again here")
                    .with_label(first, "first declared here")
                    .with_help(format!("rename one of them: {} ids are unique", kind.noun()))
            }
            IdError::DuplicateStep { flow, name, span, first } => {
                Diagnostic::new(Code::DuplicateId, format!("the step `{name}` is declared twice in flow `{flow}`"))
                    .at(span, "declared again here")
                    .with_label(first, "first declared here")
                    .with_help("rename one of them: step ids are unique within their flow")
            }
            IdError::MalformedId { kind, name, span } => {
                let suggestion: String = name
                    .chars()
                    .map(|character| if character.is_ascii_alphanumeric() { character } else { '_' })
                    .collect();
                Diagnostic::new(Code::InvalidId, format!("`{name}` is not a valid {} id", kind.noun()))
                    .at(span, "ids are letters, digits and `_`, not starting with a digit")
                    .with_help(format!("try `{suggestion}` (a hyphen would read as subtraction)"))
            }
            IdError::ReservedWord { kind, name, span } => {
                Diagnostic::new(Code::InvalidId, format!("`{name}` is a reserved word"))
                    .at(span, format!("cannot name a {}", kind.noun()))
                    .with_help(format!("reserved words are: {}", RESERVED_WORDS.join(", ")))
            }
            IdError::DuplicateDefault { flow, span, first_flow, first } => {
                Diagnostic::new(Code::DuplicateDefault, "more than one flow is marked `default`")
                    .at(span, format!("`{flow}` is also a default"))
                    .with_label(first, format!("`{first_flow}` is the default already"))
                    .with_help("keep `default` on one flow: routing falls back to it when nothing matches")
            }
        }
    }
}

impl From<SchemaError> for LowerError {
    fn from(error: SchemaError) -> LowerError {
        LowerError::Schema(error)
    }
}

impl SchemaError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            SchemaError::UnknownType { name, span } => {
                let help = suggestion(did_you_mean(&name, TYPE_NAMES.iter().copied()), || {
                    format!("the types are {}", TYPE_NAMES.join(", "))
                });
                Diagnostic::new(Code::UnknownType, format!("unknown type `{name}`"))
                    .at(span, "not a type")
                    .with_help(help)
            }
            SchemaError::InvalidSchema { problem, span } => {
                let (message, help) = problem.words();
                Diagnostic::new(Code::InvalidSchema, message).at(span, "here").with_help(help)
            }
            SchemaError::RepeatedEnumValue { value, span, first } => {
                Diagnostic::new(Code::InvalidSchema, format!("the enum value `{value}` is listed twice"))
                    .at(span, "listed again here")
                    .with_label(first, "first listed here")
                    .with_help("remove the repeated value")
            }
            SchemaError::MinAboveMax { min, max } => {
                Diagnostic::new(Code::InvalidSchema, "`min` is greater than `max`")
                    .at(min, "the lower bound")
                    .with_label(max, "the upper bound")
                    .with_help("swap the bounds")
            }
            SchemaError::InvalidPattern { detail, span } => {
                Diagnostic::new(Code::InvalidSchema, format!("`pattern` is not a valid regex: {detail}"))
                    .at(span, "this regex")
                    .with_help("patterns use Rust regex syntax (like RE2: no look-around or backreferences)")
            }
        }
    }
}

impl From<ValueError> for LowerError {
    fn from(error: ValueError) -> LowerError {
        LowerError::Value(error)
    }
}

impl ValueError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            ValueError::InvalidDuration { text, problem: DurationError::Malformed, span } => {
                Diagnostic::new(Code::InvalidDuration, format!("`{text}` is not a duration"))
                    .at(span, "expected a whole number and a unit")
                    .with_help("write e.g. `500ms`, `30s`, `10m`, `2h` or `1d`")
            }
            ValueError::InvalidDuration { text, problem: DurationError::TooLong, span } => {
                Diagnostic::new(Code::InvalidDuration, format!("`{text}` is longer than flowc allows"))
                    .at(span, format!("longer than `{MAX_DURATION_DAYS}d`"))
                    .with_help(format!("a duration is at most `{MAX_DURATION_DAYS}d` (about ten years)"))
            }
            ValueError::NotPositive { setting, value, span } => {
                Diagnostic::new(Code::InvalidValue, format!("`{setting}` must be a whole number of at least 1"))
                    .at(span, format!("found {value}"))
                    .with_help(format!("set `{setting}` to 1 or more"))
            }
            ValueError::InvalidSignalSetting { problem, span } => {
                let (message, help) = problem.words();
                Diagnostic::new(Code::InvalidValue, message).at(span, "here").with_help(help)
            }
        }
    }
}

impl From<NameError> for LowerError {
    fn from(error: NameError) -> LowerError {
        LowerError::Name(error)
    }
}

impl NameError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
        NameError::UnknownField { name, span, close } => {
            Diagnostic::new(Code::UnknownField, format!("unknown field `{name}`"))
                .at(span, "not declared in `schema`")
                .with_help(suggestion(close.as_deref(), || "declare it in `schema`".to_string()))
        }
        NameError::UnknownContextKey { name, span, close } => {
            Diagnostic::new(Code::UnknownField, format!("unknown context key `{name}`"))
                .at(span, "not declared under `context`")
                .with_help(suggestion(close.as_deref(), || "declare it under `context`".to_string()))
        }
        NameError::UnknownTool { name, span, close } => {
            Diagnostic::new(Code::UnknownTool, format!("unknown tool `{name}`"))
                .at(span, "no tool has this name")
                .with_help(suggestion(close.as_deref(), || "declare it under `tools`".to_string()))
        }
        NameError::UnknownFlow { name, span, close, names_a_step } => {
            let help = suggestion(close.as_deref(), || {
                if names_a_step {
                    format!("`{name}` is a step; jump to it with `goto_step`")
                } else {
                    "declare the flow under `flows`".to_string()
                }
            });
            Diagnostic::new(Code::UnknownTarget, format!("`{name}` names no flow"))
                .at(span, "no flow has this id")
                .with_help(help)
        }
        NameError::UnknownSignalTarget { name, span, close, misspelt_directive, names_a_step } => {
            let help = suggestion(close.as_deref(), || match misspelt_directive {
                Some(keyword) => directive_help(keyword),
                None if names_a_step => "a signal's target is a flow; for a step use `goto_step` with its flow (`goto_step F.S` in .flow, `goto_step: { flow: F, step: S }` in YAML)".to_string(),
                None => "a signal's target names a flow".to_string(),
            });
            Diagnostic::new(Code::UnknownTarget, format!("`{name}` names no flow"))
                .at(span, "no flow has this id")
                .with_help(help)
        }
        NameError::UnknownStepTarget { name, span, flows_allowed, close, misspelt_directive, names_a_flow } => {
            let what = if flows_allowed { "step or flow" } else { "step" };
            let help = suggestion(close.as_deref(), || match misspelt_directive {
                Some(keyword) => directive_help(keyword),
                None if !flows_allowed && names_a_flow => format!(
                    "`next` names a step or `end`; to enter the flow `{name}`, branch to it or emit a `goto`"
                ),
                None if flows_allowed => "name a step of this flow, a flow, or write a directive".to_string(),
                None => "name a step of this flow, or `end`".to_string(),
            });
            Diagnostic::new(Code::UnknownTarget, format!("`{name}` names no {what}"))
                .at(span, format!("no {what} has this id"))
                .with_help(help)
        }
        NameError::CrossFlowStep { name, span, owner } => {
            Diagnostic::new(Code::CrossFlowStep, format!("`{name}` is a step of another flow (`{owner}`)"))
                .at(span, "a bare name only names a step of this flow")
                .with_help(format!(
                    "jump there with `goto_step`: `{{ goto_step {owner}.{name} }}` in .flow, `{{ goto_step: {{ flow: {owner}, step: {name} }} }}` in YAML"
                ))
        }
        NameError::UnknownStepOfFlow { flow, step, span, close } => {
            Diagnostic::new(Code::UnknownTarget, format!("the flow `{flow}` has no step `{step}`"))
                .at(span, "no step has this id")
                .with_help(suggestion(close.as_deref(), || format!("name a step of the flow `{flow}`")))
        }
        }
    }
}

impl From<DirectiveError> for LowerError {
    fn from(error: DirectiveError) -> LowerError {
        LowerError::Directive(error)
    }
}

impl DirectiveError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            DirectiveError::GotoWithoutFlow { span } => Diagnostic::new(Code::InvalidDirective, "`goto` names no flow")
                .at(span, "empty goto")
                .with_help("write `goto: FLOW` or `goto: { flow: FLOW, data: {...} }`"),
            DirectiveError::GotoStepWithoutStep { key, span } => {
                Diagnostic::new(Code::InvalidDirective, format!("`{key}` names no step"))
                    .at(span, format!("empty {key}"))
                    .with_help(format!("write `{key}: STEP` or `{key}: {{ flow: FLOW, step: STEP }}`"))
            }
            DirectiveError::AskAgainCollectsNothing { step, span } => Diagnostic::new(
                Code::InvalidDirective,
                format!("`ask_again {step}`: `{step}` collects nothing, so there is nothing to ask again"),
            )
            .at(span, "asks again a step that collects nothing")
            .with_help(format!("to go back to the step as it is, write `goto_step {step}`")),
            DirectiveError::GotoStepWithoutFlow { key, step, span } => {
                Diagnostic::new(Code::InvalidDirective, format!("`{key}` outside a flow must name its flow"))
                    .at(span, "which flow's step?")
                    .with_help(format!(
                        "name the flow: `{key} FLOW.{step}` in .flow, `{key}: {{ flow: FLOW, step: {step} }}` in YAML"
                    ))
            }
            DirectiveError::TwoPositions { first, first_span, second, second_span } => Diagnostic::new(
                Code::InvalidDirective,
                format!("a directive has both `{first}` and `{second}`"),
            )
            .at(second_span, "a second position field")
            .with_label(first_span, "the first position field")
            .with_help(
                "a directive moves the conversation one way: keep one of goto, goto_step, complete, abort, reset",
            ),
            DirectiveError::ReplyWithAbort { reply, abort } => {
                Diagnostic::new(Code::ReplyWithAbort, "`reply` together with `abort` in one directive")
                    .at(reply, "this reply would be dropped")
                    .with_label(abort, "abort wins over reply")
                    .with_help("give the reason to `abort` instead, or emit the reply from another step")
            }
            DirectiveError::EmptyDirective { span } => Diagnostic::new(Code::InvalidDirective, "an empty directive")
                .at(span, "does nothing")
                .with_help("give it a key: goto, goto_step, complete, abort, reset, reply, set, …"),
            DirectiveError::EmptyBranches { span } => Diagnostic::new(Code::InvalidDirective, "`branches` is empty")
                .at(span, "no entries")
                .with_help("add entries with `then`, or remove `branches`"),
        }
    }
}

impl From<ToolError> for LowerError {
    fn from(error: ToolError) -> LowerError {
        LowerError::Tool(error)
    }
}

impl ToolError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            ToolError::NoImplementation { tool, span } => {
                Diagnostic::new(Code::InvalidTool, format!("the tool `{tool}` has no implementation"))
                    .at(span, "needs one of `http`, `exec` or `builtin`")
                    .with_help(
                        "give it one of `http`, `exec` (a program and its arguments) or `builtin` (now, uuid or echo)",
                    )
            }
            ToolError::TwoImplementations { tool, first, second } => {
                Diagnostic::new(Code::InvalidTool, format!("the tool `{tool}` has more than one implementation"))
                    .at(second, "a second implementation")
                    .with_label(first, "the first")
                    .with_help("a tool has exactly one of `http`, `exec` or `builtin`")
            }
            ToolError::UnknownHttpMethod { method, span } => {
                Diagnostic::new(Code::InvalidTool, format!("unknown HTTP method `{method}`"))
                    .at(span, "not an HTTP method flowc sends")
                    .with_help("use GET, POST, PUT, PATCH or DELETE")
            }
            ToolError::UrlScheme { scheme: Some(scheme), span } => {
                Diagnostic::new(Code::InvalidUrl, format!("an http tool's url cannot use `{scheme}:`"))
                    .at(span, "not http or https")
                    .with_help(
                        "an http tool calls http:// or https:// urls only; to read a file or run a program, \
                         use an `exec` tool",
                    )
            }
            ToolError::UrlScheme { scheme: None, span } => {
                Diagnostic::new(Code::InvalidUrl, "an http tool's url needs `http://` or `https://`")
                    .at(span, "no scheme")
                    .with_help("write the whole url, like `https://api.example.com/customers`")
            }
            ToolError::ExecWithoutProgram { span } => {
                Diagnostic::new(Code::InvalidTool, "`exec` needs a program to run")
                    .at(span, "no program given")
                    .with_help("write `exec: [./tools/script.sh]`: the program, then its arguments")
            }
            ToolError::EnvName { name, span } => {
                let shown: String = name.chars().take(64).collect::<String>().escape_debug().collect();
                Diagnostic::new(Code::InvalidTool, format!("`{shown}` is not an environment variable name"))
                    .at(span, "not a variable name")
                    .with_help(
                        "`env` names the variables of flowc's environment the tool is given: letters, digits \
                         and `_`, not starting with a digit, like `GITHUB_TOKEN`",
                    )
            }
            ToolError::UnknownBuiltin { name, span } => {
                let help = suggestion(did_you_mean(&name, BUILTINS.iter().copied()), || {
                    "the builtins are now, uuid and echo".to_string()
                });
                Diagnostic::new(Code::InvalidTool, format!("unknown builtin `{name}`"))
                    .at(span, "not a builtin tool")
                    .with_help(help)
            }
        }
    }
}

impl From<ActionError> for LowerError {
    fn from(error: ActionError) -> LowerError {
        LowerError::Action(error)
    }
}

impl ActionError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
        ActionError::UnknownParam { tool, param, span, params } => {
            let help = suggestion(did_you_mean(&param, params.iter().map(String::as_str)), || {
                if params.is_empty() {
                    format!("`{tool}` takes no params")
                } else {
                    format!("`{tool}` takes {}", backticked(&params))
                }
            });
            Diagnostic::new(Code::WrongArguments, format!("`{tool}` has no param `{param}`"))
                .at(span, "not a param of the tool")
                .with_help(help)
        }
        ActionError::ParamPassedTwice { param, span } => {
            Diagnostic::new(Code::WrongArguments, format!("the param `{param}` is passed twice"))
                .at(span, "passed again here")
                .with_help("pass each param once")
        }
        ActionError::MissingArguments { tool, missing, span } => {
            let list = backticked(&missing);
            Diagnostic::new(Code::WrongArguments, format!("the call to `{tool}` is missing {list}"))
                .at(span, "missing arguments")
                .with_help(format!("pass every param: {list}"))
        }
        ActionError::SaveWithoutReturns { tool, span } => {
            Diagnostic::new(Code::TypeMismatch, format!("`save` from `{tool}`, which declares no `returns`"))
                .at(span, "nothing typed to save")
                .with_help(format!(
                    "declare what `{tool}` returns: `-> {{ id: string }}` after its params in .flow, `returns: {{ id: string }}` in YAML"
                ))
        }
        ActionError::SaveMismatch { field, field_type, tool, saved, saved_type, span } => {
            let described = match saved {
                Some(single) => format!("`{single}`"),
                None => "its result object".to_string(),
            };
            Diagnostic::new(
                Code::TypeMismatch,
                format!(
                    "`{field}` is {}, but `{tool}` saves {described} of type {}",
                    field_type.describe(),
                    saved_type.describe()
                ),
            )
            .at(span, "saved here")
            .with_help("change the field's type or the tool's `returns`")
        }
        ActionError::ForEachOverNonList { found, span } => {
            Diagnostic::new(Code::TypeMismatch, format!("`for_each` needs a list, found {}", found.describe()))
                .at(span, format!("this is {}", found.describe()))
                .with_help("iterate over a field of type list")
        }
        ActionError::AppendToNonList { field, found, span } => Diagnostic::new(
            Code::TypeMismatch,
            format!("`append` needs a list field, but `{field}` is {}", found.describe()),
        )
        .at(span, format!("`{field}` is {}", found.describe()))
        .with_help(format!("declare `{field}` as a list, or write it with `set`")),
        }
    }
}

impl From<StepError> for LowerError {
    fn from(error: StepError) -> LowerError {
        LowerError::Step(error)
    }
}

impl StepError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
        StepError::FlowWithoutSteps { flow, span } => {
            Diagnostic::new(Code::MissingEntry, format!("the flow `{flow}` has no steps"))
                .at(span, "a flow starts at its first step")
                .with_help("add at least one step")
        }
        StepError::StepWithoutId { span } => Diagnostic::new(Code::InvalidStep, "a step needs an `id`")
            .at(span, "this step has no id")
            .with_help("add `id: some_name`: targets and traces refer to steps by id"),
        StepError::OnErrorNotAllowed { step, workflow, kind, span } => {
            let what = match kind {
                OnErrorKind::Directive => "a directive",
                OnErrorKind::Continue => "`continue`",
                OnErrorKind::Retry => "`retry`",
            };
            if workflow {
                Diagnostic::new(Code::InvalidStep, format!("`on_error` of the workflow step `{step}` is {what}"))
                    .at(span, "workflow steps take a policy")
                    .with_help("a workflow step takes `stop`, `continue` or `retry N backoff DURATION`")
            } else {
                Diagnostic::new(
                    Code::InvalidStep,
                    format!("`on_error` of the conversation step `{step}` is {what}"),
                )
                .at(span, "only workflow steps continue or retry")
                .with_help(
                    "a conversation step takes a directive: `reply \"…\"` (and stay), `goto_step STEP` or `abort \"…\"`",
                )
            }
        }
        StepError::AutoStepCollects { step, field, span } => {
            Diagnostic::new(Code::InvalidStep, format!("the auto step `{step}` collects `{field}`"))
                .at(span, "an auto step never waits for the user")
                .with_help("remove `auto` to ask the user, or set the field with an action")
        }
        StepError::WaitOnInputStep { step, span } => {
            Diagnostic::new(Code::InvalidStep, format!("`wait` on the step `{step}`, which is not auto"))
                .at(span, "only auto steps wait")
                .with_help("make the step auto (`auto step` in .flow, `auto: true` in YAML): a wait pauses a workflow after the step's actions")
        }
        StepError::MaxAsksBelowOne { value, span } => {
            Diagnostic::new(Code::InvalidStep, "`max_asks` must be at least 1")
                .at(span, format!("found {value}"))
                .with_help("`max_asks` counts every ask, the first included")
        }
        }
    }
}
