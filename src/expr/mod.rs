//! The expression language after resolution: every name is a field, a
//! context key, a local (loop variable or tool param), an environment
//! variable or an earlier workflow step's output, and every node carries
//! its static [`Type`]. The crate-internal `typeck` builds it from the
//! AST; the runtime evaluates it (`eval`), with what each operator does to
//! values in `ops`, which the checker's folding shares. An embedder sees
//! only the typed tree, as it appears in the IR and its JSON.
//! No I/O: evaluation reads names, the clock and environment variables
//! through the `eval::Bindings` its caller supplies.

#![warn(missing_docs)]

pub(crate) mod eval;
pub(crate) mod ops;
pub(crate) mod typeck;

use crate::ids::{ContextId, FieldId, StepId};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, UnaryOp};
use serde::Serialize;
use std::sync::Arc;

/// The static type of an expression.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Type {
    /// Only `null`: the type of the `null` literal.
    Null,
    /// `true` or `false`.
    Bool,
    /// A whole number (a JSON integer).
    Int,
    /// A number that may have a fraction; an int is accepted where a float
    /// is expected.
    Float,
    /// Text.
    String,
    /// A calendar date, held as an ISO `YYYY-MM-DD` string.
    Date,
    /// A date and time, held as an ISO 8601 string.
    DateTime,
    /// A string that must be one of these values, in declaration order.
    Enum(Arc<[String]>),
    /// A list whose items all have this type.
    List(Arc<Type>),
    /// An object with these named fields, in declaration order.
    Object(Arc<[(String, Type)]>),
    /// The type of an expression that already has an error: compatible with
    /// everything, so one mistake is reported once.
    Unknown,
}

impl Type {
    /// Whether arithmetic applies: int or float.
    pub(crate) fn is_numeric(&self) -> bool {
        matches!(self, Type::Int | Type::Float)
    }

    /// Whether this is the type of an expression already reported as wrong.
    pub(crate) fn is_unknown(&self) -> bool {
        matches!(self, Type::Unknown)
    }

    /// How the type is written in diagnostics.
    pub fn describe(&self) -> String {
        match self {
            Type::Null => "null".into(),
            Type::Bool => "bool".into(),
            Type::Int => "int".into(),
            Type::Float => "float".into(),
            Type::String => "string".into(),
            Type::Date => "date".into(),
            Type::DateTime => "datetime".into(),
            Type::Enum(values) => format!("enum({})", values.join(", ")),
            Type::List(items) => format!("list({})", items.describe()),
            Type::Object(fields) => format!(
                "object {{ {} }}",
                fields.iter().map(|(name, ty)| format!("{name}: {}", ty.describe())).collect::<Vec<_>>().join(", ")
            ),
            Type::Unknown => "unknown".into(),
        }
    }
}

/// A resolved, typed expression.
#[derive(Clone, Debug, Serialize)]
pub struct Expr {
    /// What the expression computes; in JSON its fields sit beside `type`.
    #[serde(flatten)]
    pub kind: ExprKind,
    /// The type the checker gave it: what every evaluation yields (or null).
    #[serde(rename = "type")]
    pub ty: Type,
    /// Where it is written in the source, for diagnostics.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// The node kinds of a resolved expression; in JSON, `kind` names the
/// variant.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExprKind {
    /// A constant written in the source, or one the checker folded.
    Literal {
        /// The constant.
        value: Literal,
    },
    /// A list literal `[a, b]`, evaluated item by item.
    List {
        /// The items, in order.
        items: Vec<Expr>,
    },
    /// A field of the conversation's data, read by name.
    Field {
        /// The field, as the program declares it.
        field: FieldId,
    },
    /// A `context.KEY`: a value the embedder supplies with the conversation.
    Context {
        /// The declared context key.
        key: ContextId,
    },
    /// A loop variable or tool param: `slot` indexes the frame the runtime
    /// keeps for the enclosing `for_each` nest or tool call.
    Local {
        /// Index into the runtime's frame of locals.
        slot: u32,
        /// The name as written, for messages.
        name: String,
    },
    /// `env.NAME`, allowed only in http headers.
    Env {
        /// The environment variable's name.
        name: String,
    },
    /// `steps.NAME.output`: what an earlier step of the running workflow
    /// recorded as its output (null while that step has not completed).
    StepOutput {
        /// The step whose output is read.
        step: StepId,
        /// The step's name as written, for messages.
        name: String,
    },
    /// `object.member`: one field of an object value (null when absent).
    Member {
        /// The object read from.
        object: Box<Expr>,
        /// The field's name.
        member: String,
    },
    /// A prefix operator: `not x` or `-x`.
    Unary {
        /// Which operator.
        op: UnaryOp,
        /// What it applies to.
        operand: Box<Expr>,
    },
    /// An infix operator: comparison, arithmetic, `and`/`or`, `in`.
    Binary {
        /// Which operator.
        op: BinaryOp,
        /// The left-hand side.
        left: Box<Expr>,
        /// The right-hand side.
        right: Box<Expr>,
    },
    /// `x is set` or `x is not set`: whether a value is present (not null).
    IsSet {
        /// The value tested.
        operand: Box<Expr>,
        /// True for `is not set`.
        negated: bool,
    },
    /// A call of a built-in function.
    Call {
        /// Which function.
        function: Function,
        /// The arguments, as many as the function's arity.
        args: Vec<Expr>,
    },
    /// An expression whose error was reported; it is never evaluated
    /// because a program with errors does not run.
    Error,
}

/// A literal scalar (a list literal is an [`ExprKind::List`]). It writes
/// the same JSON as a `serde_json::Value` at a third of the size: a
/// `Value` would make it most of every expression node.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Literal {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A finite number, int or float.
    Number(serde_json::Number),
    /// A string.
    String(String),
}

impl Literal {
    /// The value the literal evaluates to.
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            Literal::Null => serde_json::Value::Null,
            Literal::Bool(value) => serde_json::Value::Bool(*value),
            Literal::Number(number) => serde_json::Value::Number(number.clone()),
            Literal::String(text) => serde_json::Value::String(text.clone()),
        }
    }
}

impl From<bool> for Literal {
    fn from(value: bool) -> Literal {
        Literal::Bool(value)
    }
}

impl From<i64> for Literal {
    fn from(value: i64) -> Literal {
        Literal::Number(value.into())
    }
}

/// A non-finite float (which no literal can spell) is null, as in JSON.
impl From<f64> for Literal {
    fn from(value: f64) -> Literal {
        serde_json::Number::from_f64(value).map_or(Literal::Null, Literal::Number)
    }
}

impl From<&str> for Literal {
    fn from(value: &str) -> Literal {
        Literal::String(value.to_string())
    }
}

impl From<String> for Literal {
    fn from(value: String) -> Literal {
        Literal::String(value)
    }
}

/// The built-in functions of the expression language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Function {
    /// `len(x)`: the number of characters of a string or items of a list.
    Len,
    /// `lower(s)`: the string in lower case.
    Lower,
    /// `upper(s)`: the string in upper case.
    Upper,
    /// `contains(s, x)`: whether a string holds a substring, or a list an item.
    Contains,
    /// `join(list, separator)`: the items as text, separated.
    Join,
    /// `today()`: the current date, from the runtime's clock.
    Today,
    /// `now()`: the current date and time, from the runtime's clock.
    Now,
}

impl Function {
    /// Every function, for lookup by name and for did-you-mean suggestions.
    pub(crate) const ALL: &'static [Function] = &[
        Function::Len,
        Function::Lower,
        Function::Upper,
        Function::Contains,
        Function::Join,
        Function::Today,
        Function::Now,
    ];

    /// The name a program calls it by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Function::Len => "len",
            Function::Lower => "lower",
            Function::Upper => "upper",
            Function::Contains => "contains",
            Function::Join => "join",
            Function::Today => "today",
            Function::Now => "now",
        }
    }

    /// How many arguments a call must pass.
    pub(crate) fn arity(self) -> usize {
        match self {
            Function::Len | Function::Lower | Function::Upper => 1,
            // `join` has no default separator: a list of toppings reads
            // best as "ham, olives", a list of lines as one per line; the
            // author says which.
            Function::Contains | Function::Join => 2,
            Function::Today | Function::Now => 0,
        }
    }

    /// The function a program names, if it is a built-in.
    pub(crate) fn from_name(name: &str) -> Option<Function> {
        Function::ALL.iter().copied().find(|function| function.name() == name)
    }
}

/// A template after resolution.
#[derive(Clone, Debug, Serialize)]
pub struct Template {
    /// The text and interpolations, in order; rendering concatenates them.
    pub parts: Vec<TemplatePart>,
    /// Where the template is written in the source, for diagnostics.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

/// One piece of a [`Template`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplatePart {
    /// Literal text, copied as is.
    Text(String),
    /// An interpolation `{expr}`, rendered as its value's text.
    Expr(Expr),
}

impl Template {
    /// The template's text when it has no interpolation.
    pub fn as_literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [TemplatePart::Text(text)] => Some(text),
            _ => None,
        }
    }
}

impl Expr {
    /// Every sub-expression, this one first (pre-order).
    pub fn walk(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        match &self.kind {
            ExprKind::List { items } | ExprKind::Call { args: items, .. } => {
                for item in items {
                    item.walk(visit);
                }
            }
            ExprKind::Member { object: operand, .. }
            | ExprKind::Unary { operand, .. }
            | ExprKind::IsSet { operand, .. } => operand.walk(visit),
            ExprKind::Binary { left, right, .. } => {
                left.walk(visit);
                right.walk(visit);
            }
            ExprKind::Literal { .. }
            | ExprKind::Field { .. }
            | ExprKind::Context { .. }
            | ExprKind::Local { .. }
            | ExprKind::Env { .. }
            | ExprKind::StepOutput { .. }
            | ExprKind::Error => {}
        }
    }
}
