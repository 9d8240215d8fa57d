//! What the type checker finds wrong in an expression, as values, and the
//! one place that puts them into words.
//!
//! The checker records a [`TypeError`] holding the facts of each problem
//! (the span, the types expected and found, the names involved, the
//! nearest declared name for a did-you-mean); [`TypeError::into_diagnostic`]
//! turns it into the [`Diagnostic`] a user sees: its code, message, label
//! and help. Tests assert on the values; the wording is tested through the
//! snapshots of `tests/check`.

use crate::diag::suggestion;
use crate::diag::{Code, Diagnostic};
use crate::expr::{Function, Type};
use crate::source::Span;
use crate::syntax::ast::BinaryOp;

/// What an operand had to be, where it is something else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The operand of `not`.
    NotNeedsBool,
    /// Either side of `and` or `or`.
    LogicNeedsBool(BinaryOp),
    /// The operand of a unary `-`.
    NegationNeedsNumber,
    /// The left of `in`/`not in` a string.
    InStringNeedsString(BinaryOp),
    /// The first argument of `contains`.
    ContainsNeedsStringOrList,
    /// The first argument of `join`.
    JoinNeedsList,
}

/// Why a value cannot be stored in a place of some type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unassignable {
    /// The value's type does not fit the place's.
    Type,
    /// A string literal that is not one of the place's enum values.
    NotAnEnumValue(String),
    /// A string literal that is not an ISO date.
    NotAnIsoDate(String),
    /// A string literal that is not an ISO datetime.
    NotAnIsoDatetime(String),
    /// A number constant outside the field's declared `min`/`max`.
    OutOfRange { literal: String, min: Option<String>, max: Option<String> },
    /// A string constant the field's declared `pattern` does not match.
    NotMatchingPattern { literal: String, pattern: String },
}

/// One problem the type checker found, with the facts its diagnostic is
/// written from. `span` is where the diagnostic points.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeError {
    /// An `if`, `skip_if` or `where` that is not a bool.
    NotACondition {
        found: Type,
        span: Span,
    },
    /// A value written to a place of type `target` (`what` names the place).
    NotAssignable {
        what: String,
        target: Type,
        found: Type,
        problem: Unassignable,
        span: Span,
    },
    /// A float literal that is infinite or not a number.
    NonFiniteNumber {
        span: Span,
    },
    /// A list whose items do not share a type.
    MixedList {
        element: Type,
        found: Type,
        span: Span,
    },
    Name(NameError),
    StepOutput(StepOutputError),
    Operator(OperatorError),
    Call(CallError),
}

/// A name that reads nothing: a field, local, context key, environment
/// variable or member that is not there, or cannot be read here.
#[derive(Clone, Debug, PartialEq)]
pub enum NameError {
    /// `context` alone.
    ContextWithoutKey {
        span: Span,
    },
    UnknownContextKey {
        key: String,
        span: Span,
        close: Option<String>,
    },
    /// `env` alone.
    EnvWithoutVariable {
        span: Span,
    },
    /// `env.NAME` outside an http tool's headers.
    EnvNotAllowed {
        variable: String,
        span: Span,
    },
    /// A name that is no field, context key or local; `fields_visible` is
    /// false in a tool template, which sees only the tool's params.
    UnknownName {
        name: String,
        span: Span,
        close: Option<String>,
        fields_visible: bool,
    },
    /// `.member` of an object (`object`) that has no such field.
    UnknownMember {
        member: String,
        object: Type,
        span: Span,
        close: Option<String>,
    },
    /// `.member` of a value that is not an object.
    MemberOfNonObject {
        member: String,
        found: Type,
        span: Span,
    },
}

/// A `steps.NAME.output` that cannot be read where it is.
#[derive(Clone, Debug, PartialEq)]
pub enum StepOutputError {
    /// `steps` or `steps.NAME` without `.output`.
    StepsWithoutOutput { span: Span },
    /// `steps.NAME.MEMBER` where `MEMBER` is not `output`.
    NotAStepOutput { step: String, member: String, span: Span },
    /// `steps.NAME.output` outside a workflow step.
    StepOutputOutsideWorkflow { step: String, span: Span },
    /// `steps.NAME.output` naming no step of the workflow.
    UnknownStep { step: String, span: Span, close: Option<String> },
    /// The output of this step (`own`) or a later one.
    StepOutputNotYetRecorded { step: String, own: bool, span: Span },
    /// The output of a step whose type is not known at compile time.
    UntypedStepOutput { step: String, span: Span },
}

/// An operator whose operands do not fit it or each other.
#[derive(Clone, Debug, PartialEq)]
pub enum OperatorError {
    /// An operand or argument of the wrong type.
    OperandMismatch { operand: Operand, found: Type, span: Span },
    /// A string literal compared with an enum that has no such value.
    NotAnEnumValue { value: String, values: Vec<String>, span: Span, close: Option<String> },
    /// A string literal compared with a date (or datetime) that is not one.
    NotADate { value: String, date_time: bool, span: Span },
    /// `==`, `!=`, an order or a membership between types that do not meet.
    Incomparable { op: BinaryOp, left: Type, right: Type, span: Span },
    /// An order (`<`, `<=`, `>`, `>=`) on a type that has none.
    Unordered { op: BinaryOp, found: Type, span: Span },
    /// `in`/`not in` whose right side is neither a list nor a string.
    MembershipWithoutList { op: BinaryOp, found: Type, span: Span },
    /// Arithmetic between `left` and `right`; `span` is the culprit's,
    /// whose type is `culprit`.
    Arithmetic { op: BinaryOp, left: Type, right: Type, culprit: Type, span: Span },
}

/// A call of a function that does not exist, or with the wrong arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    UnknownFunction {
        name: String,
        span: Span,
        close: Option<String>,
    },
    WrongArity {
        function: Function,
        found: usize,
        span: Span,
    },
    /// An argument `function` cannot take.
    ArgumentMismatch {
        function: Function,
        found: Type,
        span: Span,
    },
}

impl TypeError {
    /// Where the diagnostic points; an expression that failed takes this
    /// span.
    pub fn span(&self) -> Span {
        match self {
            TypeError::NotACondition { span, .. }
            | TypeError::NotAssignable { span, .. }
            | TypeError::NonFiniteNumber { span, .. }
            | TypeError::MixedList { span, .. } => *span,
            TypeError::Name(error) => error.span(),
            TypeError::StepOutput(error) => error.span(),
            TypeError::Operator(error) => error.span(),
            TypeError::Call(error) => error.span(),
        }
    }

    /// The diagnostic a user sees: every type checker wording is written
    /// here and nowhere else.
    pub fn into_diagnostic(self) -> Diagnostic {
        let span = self.span();
        match self {
            TypeError::NotACondition { found, .. } => {
                mismatch(format!("a condition must be a bool, found {}", found.describe()), span, &found)
                    .with_help("compare it with a value, e.g. `x == 1` or `x is set`")
            }
            TypeError::NotAssignable { what, target, found, problem, .. } => {
                let target_type = target.describe();
                let help = match &problem {
                    Unassignable::OutOfRange { .. } => {
                        "write a value within the range, or widen the range in the schema".to_string()
                    }
                    Unassignable::NotMatchingPattern { .. } => {
                        "write a value the pattern matches, or change the pattern in the schema".to_string()
                    }
                    _ => format!("give a value of type {target_type}"),
                };
                mismatch(format!("{what} expects {target_type}, {}", problem.words(&found)), span, &found)
                    .with_help(help)
            }
            TypeError::NonFiniteNumber { .. } => {
                Diagnostic::new(Code::Syntax, "this number is not finite").at(span, "here")
            }
            TypeError::MixedList { element, found, .. } => {
                mismatch(format!("a list mixes {} and {}", element.describe(), found.describe()), span, &found)
                    .with_help("every item of a list has the same type")
            }
            TypeError::Name(error) => error.into_diagnostic(),
            TypeError::StepOutput(error) => error.into_diagnostic(),
            TypeError::Operator(error) => error.into_diagnostic(),
            TypeError::Call(error) => error.into_diagnostic(),
        }
    }
}

impl From<NameError> for TypeError {
    fn from(error: NameError) -> Self {
        TypeError::Name(error)
    }
}

impl From<StepOutputError> for TypeError {
    fn from(error: StepOutputError) -> Self {
        TypeError::StepOutput(error)
    }
}

impl From<OperatorError> for TypeError {
    fn from(error: OperatorError) -> Self {
        TypeError::Operator(error)
    }
}

impl From<CallError> for TypeError {
    fn from(error: CallError) -> Self {
        TypeError::Call(error)
    }
}

impl NameError {
    fn span(&self) -> Span {
        match self {
            NameError::ContextWithoutKey { span, .. }
            | NameError::UnknownContextKey { span, .. }
            | NameError::EnvWithoutVariable { span, .. }
            | NameError::EnvNotAllowed { span, .. }
            | NameError::UnknownName { span, .. }
            | NameError::UnknownMember { span, .. }
            | NameError::MemberOfNonObject { span, .. } => *span,
        }
    }

    fn into_diagnostic(self) -> Diagnostic {
        let span = self.span();
        match self {
            NameError::ContextWithoutKey { .. } => Diagnostic::new(Code::UnknownField, "`context` needs a key")
                .at(span, "context of what?")
                .with_help("write `context.KEY` with a key declared under `context`"),
            NameError::UnknownContextKey { key, close, .. } => {
                let help = match close {
                    Some(close) => format!("did you mean `context.{close}`?"),
                    None => "declare it under `context`".to_string(),
                };
                Diagnostic::new(Code::UnknownField, format!("unknown context key `{key}`"))
                    .at(span, "not declared under `context`")
                    .with_help(help)
            }
            NameError::EnvWithoutVariable { .. } => Diagnostic::new(Code::UnknownField, "`env` needs a variable name")
                .at(span, "env of what?")
                .with_help("write `env.NAME`"),
            NameError::EnvNotAllowed { variable, .. } => {
                Diagnostic::new(Code::UnknownField, format!("`env.{variable}` is only available in http headers"))
                    .at(span, "environment variables cannot be read here")
                    .with_help("pass secrets in an http tool's `headers`; keep them out of prompts and data")
            }
            NameError::UnknownName { name, close, fields_visible, .. } => {
                let help = suggestion(close.as_deref(), || {
                    if fields_visible {
                        "declare it in `schema`, or use `context.KEY` for context".to_string()
                    } else {
                        "a tool template sees only the tool's params (and `env.NAME` in headers)".to_string()
                    }
                });
                Diagnostic::new(Code::UnknownField, format!("unknown field `{name}`"))
                    .at(span, "no field, context key or variable has this name")
                    .with_help(help)
            }
            NameError::UnknownMember { member, object, close, .. } => {
                let help = suggestion(close.as_deref(), || format!("the object has {}", describe_members(&object)));
                Diagnostic::new(Code::UnknownField, format!("unknown field `{member}`"))
                    .at(span, format!("not a field of {}", object.describe()))
                    .with_help(help)
            }
            NameError::MemberOfNonObject { member, found, .. } => {
                Diagnostic::new(Code::TypeMismatch, format!("`.{member}` on a value of type {}", found.describe()))
                    .at(span, "only objects have fields")
                    .with_help("fields can be read from object values only")
            }
        }
    }
}

impl StepOutputError {
    fn span(&self) -> Span {
        match self {
            StepOutputError::StepsWithoutOutput { span, .. }
            | StepOutputError::NotAStepOutput { span, .. }
            | StepOutputError::StepOutputOutsideWorkflow { span, .. }
            | StepOutputError::UnknownStep { span, .. }
            | StepOutputError::StepOutputNotYetRecorded { span, .. }
            | StepOutputError::UntypedStepOutput { span, .. } => *span,
        }
    }

    fn into_diagnostic(self) -> Diagnostic {
        let span = self.span();
        match self {
            StepOutputError::StepsWithoutOutput { .. } => {
                Diagnostic::new(Code::UnknownField, "`steps` needs a step and `output`")
                    .at(span, "steps of what?")
                    .with_help(STEP_OUTPUT_HELP)
            }
            StepOutputError::NotAStepOutput { step, member, .. } => {
                Diagnostic::new(Code::UnknownField, format!("a step has no `{member}`"))
                    .at(span, "a step records only its `output`")
                    .with_help(format!("write `steps.{step}.output`"))
            }
            StepOutputError::StepOutputOutsideWorkflow { step, .. } => {
                Diagnostic::new(Code::UnknownField, format!("`steps.{step}.output` is read outside a workflow step"))
                    .at(span, "only a workflow records step outputs")
                    .with_help("read a step's output in a later step of a workflow (a flow whose steps are all auto); a conversation keeps what it needs in fields")
            }
            StepOutputError::UnknownStep { step, close, .. } => {
                Diagnostic::new(Code::UnknownField, format!("this workflow has no step `{step}`"))
                    .at(span, "no step of this flow has this id")
                    .with_help(
                        close.map_or_else(|| STEP_OUTPUT_HELP.to_string(), |close| format!("did you mean `steps.{close}.output`?")),
                    )
            }
            StepOutputError::StepOutputNotYetRecorded { step, own, .. } => {
                let what = if own { "this step's own" } else { "a later step's" };
                Diagnostic::new(Code::UnknownField, format!("`steps.{step}.output` is {what} output"))
                    .at(span, "not recorded yet when this runs")
                    .with_help("read the output of a step declared before this one (a step's branches may read its own): steps run in order")
            }
            StepOutputError::UntypedStepOutput { step, .. } => {
                Diagnostic::new(Code::TypeMismatch, format!("the output of the step `{step}` has no type"))
                    .at(span, "its type is not known at compile time")
                    .with_help("read outputs of steps that set fields, or that call one tool with `returns`; or save the result in a field and read the field")
            }
        }
    }
}

impl OperatorError {
    fn span(&self) -> Span {
        match self {
            OperatorError::OperandMismatch { span, .. }
            | OperatorError::NotAnEnumValue { span, .. }
            | OperatorError::NotADate { span, .. }
            | OperatorError::Incomparable { span, .. }
            | OperatorError::Unordered { span, .. }
            | OperatorError::MembershipWithoutList { span, .. }
            | OperatorError::Arithmetic { span, .. } => *span,
        }
    }

    fn into_diagnostic(self) -> Diagnostic {
        let span = self.span();
        match self {
            OperatorError::OperandMismatch { operand, found, .. } => {
                mismatch(format!("{}, found {}", operand.words(), found.describe()), span, &found)
                    .with_help("check the operand's type in the schema")
            }
            OperatorError::NotAnEnumValue { value, values, close, .. } => {
                let help = suggestion(close.as_deref(), || format!("the values are {}", values.join(", ")));
                Diagnostic::new(Code::TypeMismatch, format!("`{value}` is not a value of enum({})", values.join(", ")))
                    .at(span, "not one of the enum's values")
                    .with_help(help)
            }
            OperatorError::NotADate { value, date_time, .. } => {
                let (kind, example) =
                    if date_time { ("datetime", "2026-12-04T09:30:00Z") } else { ("date", "2026-12-04") };
                Diagnostic::new(Code::TypeMismatch, format!("`{value}` is not a {kind}"))
                    .at(span, format!("compared with a {kind}"))
                    .with_help(format!("write it in ISO 8601, e.g. \"{example}\""))
            }
            OperatorError::Incomparable { op, left, right, .. } => mismatch(
                format!("`{}` between {} and {}", op.as_str(), left.describe(), right.describe()),
                span,
                &right,
            )
            .with_help(format!("both sides must have the same type; the left is {}", left.describe())),
            OperatorError::Unordered { op, found, .. } => Diagnostic::new(
                Code::TypeMismatch,
                format!("`{}` on a value of type {}", op.as_str(), found.describe()),
            )
            .at(span, format!("{} values have no order", found.describe()))
            .with_help("order compares numbers, dates, datetimes and strings"),
            OperatorError::MembershipWithoutList { op, found, .. } => mismatch(
                format!("`{}` needs a list on its right, found {}", op.as_str(), found.describe()),
                span,
                &found,
            )
            .with_help("write a list, e.g. `plan in [\"pro\", \"enterprise\"]`"),
            OperatorError::Arithmetic { op, left, right, culprit, .. } => mismatch(
                format!("`{}` between {} and {}", op.as_str(), left.describe(), right.describe()),
                span,
                &culprit,
            )
            .with_help(
                if op == BinaryOp::Add && (matches!(left, Type::List(_)) || matches!(right, Type::List(_))) {
                    "`+` joins two lists whose items have one type, e.g. `welcomed + [contact.email]`"
                } else if op == BinaryOp::Add {
                    "`+` adds numbers or joins strings"
                } else {
                    "arithmetic works on numbers"
                },
            ),
        }
    }
}

impl CallError {
    fn span(&self) -> Span {
        match self {
            CallError::UnknownFunction { span, .. }
            | CallError::WrongArity { span, .. }
            | CallError::ArgumentMismatch { span, .. } => *span,
        }
    }

    fn into_diagnostic(self) -> Diagnostic {
        let span = self.span();
        match self {
            CallError::UnknownFunction { name, close, .. } => {
                let help = suggestion(close.as_deref(), || {
                    "the functions are len, lower, upper, contains, join, today and now".to_string()
                });
                Diagnostic::new(Code::UnknownFunction, format!("unknown function `{name}`"))
                    .at(span, "no function has this name")
                    .with_help(help)
            }
            CallError::WrongArity { function, found, .. } => {
                let plural = if function.arity() == 1 { "" } else { "s" };
                Diagnostic::new(
                    Code::WrongArity,
                    format!("`{}` takes {} argument{plural}, found {found}", function.name(), function.arity()),
                )
                .at(span, format!("called with {found}"))
                .with_help(signature(function))
            }
            CallError::ArgumentMismatch { function, found, .. } => {
                mismatch(format!("`{}` cannot take {}", function.name(), found.describe()), span, &found)
                    .with_help(signature(function))
            }
        }
    }
}

/// "did you mean `x`?" when there is a close name, else `otherwise`.
const STEP_OUTPUT_HELP: &str = "write `steps.STEP.output` with an earlier step of this workflow";

/// A `type_mismatch` labelled with the type `found` at `span`.
fn mismatch(message: String, span: Span, found: &Type) -> Diagnostic {
    Diagnostic::new(Code::TypeMismatch, message).at(span, format!("this is {}", found.describe()))
}

impl Operand {
    fn words(self) -> String {
        match self {
            Operand::NotNeedsBool => "`not` needs a bool".to_string(),
            // The operator is written bare here ("and needs a bool"), as it
            // always has been.
            Operand::LogicNeedsBool(op) => format!("{} needs a bool", op.as_str()),
            Operand::NegationNeedsNumber => "`-` needs a number".to_string(),
            Operand::InStringNeedsString(op) => format!("`{}` a string needs a string", op.as_str()),
            Operand::ContainsNeedsStringOrList => "`contains` needs a string or a list".to_string(),
            Operand::JoinNeedsList => "`join` needs a list".to_string(),
        }
    }
}

impl Unassignable {
    fn words(&self, found: &Type) -> String {
        match self {
            Unassignable::Type => format!("found {}", found.describe()),
            Unassignable::NotAnEnumValue(literal) => format!("found `{literal}`, which is not one of its values"),
            Unassignable::NotAnIsoDate(literal) => format!("found `{literal}`, which is not an ISO date"),
            Unassignable::NotAnIsoDatetime(literal) => format!("found `{literal}`, which is not an ISO datetime"),
            Unassignable::OutOfRange { literal, min, max } => {
                let range = format!("{}..{}", min.as_deref().unwrap_or(""), max.as_deref().unwrap_or(""));
                format!("found `{literal}`, which is outside its range {range}")
            }
            Unassignable::NotMatchingPattern { literal, pattern } => {
                format!("found `{literal}`, which does not match its pattern `{pattern}`")
            }
        }
    }
}

fn signature(function: Function) -> &'static str {
    match function {
        Function::Len => "len(list or string) -> int",
        Function::Lower => "lower(string) -> string",
        Function::Upper => "upper(string) -> string",
        Function::Contains => "contains(string, part) -> bool, or contains(list, item) -> bool",
        Function::Join => "join(list, separator) -> string",
        Function::Today => "today() -> date",
        Function::Now => "now() -> datetime",
    }
}

/// The fields of an object type, for a help line.
fn describe_members(object: &Type) -> String {
    let fields: &[(String, Type)] = match object {
        Type::Object(fields) => fields,
        _ => &[],
    };
    let names: Vec<String> = fields.iter().map(|(name, _)| format!("`{name}`")).collect();
    if names.is_empty() { "no fields".to_string() } else { format!("fields {}", names.join(", ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diagnostic_is_written_from_the_value_alone() {
        let error = TypeError::from(CallError::UnknownFunction {
            name: "lenn".to_string(),
            span: Span::new(3, 7),
            close: Some("len".to_string()),
        });
        let diagnostic = error.into_diagnostic();
        assert_eq!(diagnostic.code, Code::UnknownFunction);
        assert_eq!(diagnostic.message, "unknown function `lenn`");
        assert_eq!(diagnostic.primary_span(), Some(Span::new(3, 7)));
        assert_eq!(diagnostic.help.as_deref(), Some("did you mean `len`?"));
    }

    #[test]
    fn a_mismatch_is_labelled_with_the_type_found() {
        let error = TypeError::from(CallError::ArgumentMismatch {
            function: Function::Join,
            found: Type::Int,
            span: Span::new(5, 6),
        });
        let diagnostic = error.into_diagnostic();
        assert_eq!(diagnostic.message, "`join` cannot take int");
        let labels: Vec<(Span, &str)> =
            diagnostic.labels.iter().map(|label| (label.span, label.text.as_str())).collect();
        assert_eq!(labels, vec![(Span::new(5, 6), "this is int")]);
        assert_eq!(diagnostic.help.as_deref(), Some("join(list, separator) -> string"));
    }
}
