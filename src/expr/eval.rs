//! Evaluation of typed expressions and rendering of templates, against
//! whatever holds the values ([`Bindings`]): a session's data, a workflow
//! run, a tool call's arguments.

use super::{Expr, Template};
use crate::ir::{ContextId, FieldId};
use serde_json::Value;

/// Where evaluation reads names from. Unset fields are `Value::Null`.
pub trait Bindings {
    fn field(&self, field: FieldId) -> Value;
    fn context(&self, key: ContextId) -> Value;
    /// A loop variable or tool param by slot.
    fn local(&self, slot: u32) -> Value;
    /// An environment variable (http headers only; the type checker
    /// guarantees no other place reads one).
    fn env(&self, name: &str) -> Option<String>;
    /// The injectable clock (`FLOWC_NOW` freezes it).
    fn now(&self) -> chrono::DateTime<chrono::Utc>;
}

/// Evaluates an expression. Runtime anomalies the language defines as null
/// (division by zero) add a line to `warnings` for the trace.
pub fn eval(expr: &Expr, bindings: &dyn Bindings, warnings: &mut Vec<String>) -> Value {
    let _ = (expr, bindings, warnings);
    todo!("expression evaluation")
}

/// Renders a template; null renders as the empty string.
pub fn render(template: &Template, bindings: &dyn Bindings, warnings: &mut Vec<String>) -> String {
    let _ = (template, bindings, warnings);
    todo!("template rendering")
}

/// Whether a condition's value counts as true: only `true` does (null,
/// the value of an unset field, is false).
pub fn is_true(value: &Value) -> bool {
    matches!(value, Value::Bool(true))
}
