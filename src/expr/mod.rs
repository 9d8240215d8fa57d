//! The expression language after resolution: every name is a field, a
//! context key, a local (loop variable or tool param), an environment
//! variable or an earlier workflow step's output, and every node carries
//! its static [`Type`]. [`typeck`] builds it from the AST; the runtime
//! evaluates it ([`eval`]), with what each operator does to values in
//! [`ops`], which the checker's folding shares.
//! No I/O: evaluation reads names, the clock and environment variables
//! through the [`eval::Bindings`] its caller supplies.

pub mod eval;
pub mod ops;
pub mod typeck;

use crate::ids::{ContextId, FieldId, StepId};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, UnaryOp};
use serde::Serialize;
use std::sync::Arc;

/// The static type of an expression.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Type {
    Null,
    Bool,
    Int,
    Float,
    String,
    Date,
    DateTime,
    Enum(Arc<[String]>),
    List(Arc<Type>),
    Object(Arc<[(String, Type)]>),
    /// The type of an expression that already has an error: compatible with
    /// everything, so one mistake is reported once.
    Unknown,
}

impl Type {
    pub fn is_numeric(&self) -> bool {
        matches!(self, Type::Int | Type::Float)
    }

    pub fn is_unknown(&self) -> bool {
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
    #[serde(flatten)]
    pub kind: ExprKind,
    #[serde(rename = "type")]
    pub ty: Type,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExprKind {
    Literal {
        value: Literal,
    },
    List {
        items: Vec<Expr>,
    },
    Field {
        field: FieldId,
    },
    Context {
        key: ContextId,
    },
    /// A loop variable or tool param: `slot` indexes the frame the runtime
    /// keeps for the enclosing `for_each` nest or tool call.
    Local {
        slot: u32,
        name: String,
    },
    /// `env.NAME`, allowed only in http headers.
    Env {
        name: String,
    },
    /// `steps.NAME.output`: what an earlier step of the running workflow
    /// recorded as its output (null while that step has not completed).
    StepOutput {
        step: StepId,
        name: String,
    },
    Member {
        object: Box<Expr>,
        member: String,
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
    IsSet {
        operand: Box<Expr>,
        negated: bool,
    },
    Call {
        function: Function,
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
    Null,
    Bool(bool),
    Number(serde_json::Number),
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
    Len,
    Lower,
    Upper,
    Contains,
    Join,
    Today,
    Now,
}

impl Function {
    pub const ALL: &'static [Function] = &[
        Function::Len,
        Function::Lower,
        Function::Upper,
        Function::Contains,
        Function::Join,
        Function::Today,
        Function::Now,
    ];

    pub fn name(self) -> &'static str {
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

    pub fn arity(self) -> usize {
        match self {
            Function::Len | Function::Lower | Function::Upper => 1,
            // `join` has no default separator: a list of toppings reads
            // best as "ham, olives", a list of lines as one per line; the
            // author says which.
            Function::Contains | Function::Join => 2,
            Function::Today | Function::Now => 0,
        }
    }

    pub fn from_name(name: &str) -> Option<Function> {
        Function::ALL.iter().copied().find(|function| function.name() == name)
    }
}

/// A template after resolution.
#[derive(Clone, Debug, Serialize)]
pub struct Template {
    pub parts: Vec<TemplatePart>,
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplatePart {
    Text(String),
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
