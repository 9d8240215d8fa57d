//! Tools: the trait they plug into, and the three kinds of LANGUAGE.md
//! section 6 (builtin, exec, http).
//!
//! [`ToolRegistry::call`] runs a tool (a registered override by name, else
//! the program's own implementation) and then checks the result: a JSON
//! object holding every field `returns` declares, each valid for its type
//! (and normalized by `validate`). Extra keys are kept, and a `directive`
//! key is left untouched for the runtime to put on the bus. The check
//! applies to overrides too, so a test double cannot return what the real
//! tool could not.

#![warn(missing_docs)]

mod builtin;
mod exec;
mod http;

pub use exec::{kill_running as kill_running_tools, with_identity};

use crate::ir::{Tool, ToolImpl};
use crate::runtime::validate::validate;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// What a tool call may use besides its arguments.
#[derive(Clone)]
pub struct ToolEnv {
    /// The program's directory: exec tools run there.
    pub base_dir: PathBuf,
    /// The time tools read.
    pub clock: Arc<dyn crate::runtime::clock::Clock>,
    /// Where new ids come from.
    pub ids: Arc<dyn crate::runtime::clock::IdSource>,
}

/// Why a tool call failed; the message keeps what the user needs (stderr,
/// HTTP status and body excerpt).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("`{tool}` timed out after {ms} ms")]
    /// The tool did not answer in time.
    Timeout {
        /// The tool's name.
        tool: String,
        /// The timeout it ran out of.
        ms: u64,
    },
    #[error("`{tool}` failed: {message}")]
    /// The tool failed.
    Failed {
        /// The tool's name.
        tool: String,
        /// What went wrong (stderr, or the HTTP status and body excerpt).
        message: String,
    },
    #[error("`{tool}` returned an invalid result: {message}")]
    /// The tool's result does not fit its declared shape.
    InvalidResult {
        /// The tool's name.
        tool: String,
        /// Why the result is not what the tool declares.
        message: String,
    },
}

impl ToolError {
    fn failed(tool: &Tool, message: impl Into<String>) -> ToolError {
        ToolError::Failed { tool: tool.name.clone(), message: message.into() }
    }

    fn invalid(tool: &Tool, message: impl Into<String>) -> ToolError {
        ToolError::InvalidResult { tool: tool.name.clone(), message: message.into() }
    }

    fn timeout(tool: &Tool, ms: u64) -> ToolError {
        ToolError::Timeout { tool: tool.name.clone(), ms }
    }
}

/// A tool implementation. The runtime validates arguments before and
/// results after the call.
pub trait ToolHandler: Send + Sync {
    /// Runs the tool with the checked arguments.
    fn call(&self, tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError>;
}

/// The tools a run uses: the program's own (by kind) unless a handler is
/// registered for the tool's name (an embedding program, or a test double).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    overrides: std::collections::HashMap<String, Arc<dyn ToolHandler>>,
}

impl ToolRegistry {
    /// Answers calls to the tool `name` with `handler` instead of the tool's own kind.
    pub fn register(&mut self, name: impl Into<String>, handler: Arc<dyn ToolHandler>) {
        self.overrides.insert(name.into(), handler);
    }

    /// Whether calls to the tool `name` go to a registered handler.
    pub fn handles(&self, name: &str) -> bool {
        self.overrides.contains_key(name)
    }

    /// Calls a tool and checks its result against `returns`: an object
    /// holding every declared field with a valid value (extra keys are
    /// kept; a `directive` key is left for the runtime).
    pub fn call(&self, tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError> {
        let result = match self.overrides.get(&tool.name) {
            Some(handler) => handler.call(tool, args, env)?,
            None => call_implementation(tool, args, env)?,
        };
        check_result(tool, result)
    }
}

/// Runs the program's own implementation of a tool, without checking the
/// result: what [`ToolRegistry::call`] does when no override is registered,
/// and what an override may delegate to (a double that records real calls).
pub fn call_implementation(tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError> {
    match &tool.implementation {
        Some(ToolImpl::Builtin { builtin }) => Ok(builtin::call(tool, *builtin, args, env)),
        Some(ToolImpl::Exec { command, timeout_ms, env: names }) => {
            exec::call(tool, (command, names), *timeout_ms, args, env)
        }
        Some(ToolImpl::Http { method, url, headers, body, timeout_ms }) => http::call(
            tool,
            &http::Request { method: *method, url, headers, body: body.as_ref(), timeout_ms: *timeout_ms },
            args,
            env,
        ),
        // A program with an invalid tool does not compile; this guards an
        // IR built by hand.
        None => Err(ToolError::failed(tool, "the tool has no implementation")),
    }
}

/// The result must be an object with every declared return field, valid.
fn check_result(tool: &Tool, result: Value) -> Result<Value, ToolError> {
    let Value::Object(mut members) = result else {
        return Err(ToolError::invalid(tool, format!("{} is not a JSON object", describe_json(&result))));
    };
    for field in tool.returns.iter().flatten() {
        let Some(value) = members.get_mut(&field.name) else {
            let present: Vec<&str> = members.keys().map(String::as_str).collect();
            let found =
                if present.is_empty() { "it is empty".to_string() } else { format!("it has {}", present.join(", ")) };
            return Err(ToolError::invalid(tool, format!("the declared field `{}` is missing ({found})", field.name)));
        };
        *value = validate(value, &field.ty)
            .map_err(|reason| ToolError::invalid(tool, format!("`{}`: {reason}", field.name)))?;
    }
    Ok(Value::Object(members))
}

/// "a list", "the string `abc`": what a result that is not an object is.
fn describe_json(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(flag) => format!("the bool `{flag}`"),
        Value::Number(number) => format!("the number `{number}`"),
        Value::String(text) => format!("the string `{}`", excerpt(text, 60)),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

/// At most `limit` characters of `text`, on one line, marked when cut.
fn excerpt(text: &str, limit: usize) -> String {
    let single_line: String = text.trim().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match single_line.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", single_line.get(..cut).unwrap_or_default()),
        None => single_line,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::{Builtin, Field, TypeKind, ValueType};
    use crate::runtime::clock::{FixedClock, SeededIds};
    use crate::source::Span;
    use serde_json::json;
    use std::sync::Mutex;

    pub(crate) fn value_type(kind: TypeKind) -> ValueType {
        ValueType { kind, description: None, min: None, max: None, pattern: None, examples: Vec::new() }
    }

    pub(crate) fn fields(declared: &[(&str, TypeKind)]) -> Vec<Field> {
        declared
            .iter()
            .map(|(name, kind)| Field { name: name.to_string(), ty: value_type(kind.clone()), span: Span::default() })
            .collect()
    }

    pub(crate) fn tool(
        name: &str,
        params: &[(&str, TypeKind)],
        returns: Option<&[(&str, TypeKind)]>,
        implementation: Option<ToolImpl>,
    ) -> Tool {
        Tool {
            name: name.to_string(),
            description: None,
            params: fields(params),
            returns: returns.map(fields),
            implementation,
            span: Span::default(),
        }
    }

    pub(crate) fn env(base_dir: PathBuf) -> ToolEnv {
        let clock = FixedClock::parse("2026-01-05T10:00:00Z").map_or_else(
            |_| Arc::new(crate::runtime::clock::SystemClock) as Arc<dyn crate::runtime::clock::Clock>,
            |clock| Arc::new(clock) as Arc<dyn crate::runtime::clock::Clock>,
        );
        ToolEnv { base_dir, clock, ids: Arc::new(SeededIds::new(1)) }
    }

    pub(crate) fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(members) => members,
            _ => Map::new(),
        }
    }

    /// A test double: answers with a fixed value and records every call.
    struct Recorder {
        answer: Value,
        calls: Mutex<Vec<(String, Map<String, Value>)>>,
    }

    impl ToolHandler for Recorder {
        fn call(&self, tool: &Tool, args: &Map<String, Value>, _env: &ToolEnv) -> Result<Value, ToolError> {
            if let Ok(mut calls) = self.calls.lock() {
                calls.push((tool.name.clone(), args.clone()));
            }
            Ok(self.answer.clone())
        }
    }

    fn booking_tool() -> Tool {
        tool(
            "book_hotel",
            &[("hotel", TypeKind::String), ("guests", TypeKind::Int)],
            Some(&[("booking_id", TypeKind::String)]),
            Some(ToolImpl::Exec {
                command: vec!["./does-not-exist.sh".to_string()],
                timeout_ms: 1_000,
                env: Vec::new(),
            }),
        )
    }

    #[test]
    fn an_override_replaces_the_implementation_and_records_calls() {
        let recorder = Arc::new(Recorder {
            answer: json!({"booking_id": "GH-1", "directive": {"goto": "survey"}}),
            calls: Mutex::new(Vec::new()),
        });
        let mut registry = ToolRegistry::default();
        registry.register("book_hotel", recorder.clone());
        let call_args = args(json!({"hotel": "Grand Hotel", "guests": 2}));
        let result = registry.call(&booking_tool(), &call_args, &env(PathBuf::from(".")));
        assert_eq!(result, Ok(json!({"booking_id": "GH-1", "directive": {"goto": "survey"}})));
        let calls = recorder.calls.lock().map(|calls| calls.clone()).unwrap_or_default();
        assert_eq!(calls, vec![("book_hotel".to_string(), call_args)]);
    }

    #[test]
    fn overrides_are_by_name_only() {
        let mut registry = ToolRegistry::default();
        registry.register("other_tool", Arc::new(Recorder { answer: json!({}), calls: Mutex::new(Vec::new()) }));
        // Not overridden: the exec implementation runs and its program is missing.
        let result = registry.call(&booking_tool(), &Map::new(), &env(PathBuf::from(".")));
        assert!(
            matches!(&result, Err(ToolError::Failed { message, .. }) if message.contains("cannot run")),
            "{result:?}"
        );
    }

    fn check(answer: Value) -> Result<Value, ToolError> {
        let mut registry = ToolRegistry::default();
        registry.register("book_hotel", Arc::new(Recorder { answer, calls: Mutex::new(Vec::new()) }));
        registry.call(&booking_tool(), &Map::new(), &env(PathBuf::from(".")))
    }

    #[test]
    fn results_are_checked_against_returns() {
        let invalid = |message: &str| {
            Err(ToolError::InvalidResult { tool: "book_hotel".to_string(), message: message.to_string() })
        };
        assert_eq!(check(json!({"booking_id": "A", "extra": 1})), Ok(json!({"booking_id": "A", "extra": 1})));
        assert_eq!(check(json!({"booking_id": null})), Ok(json!({"booking_id": null})));
        assert_eq!(check(json!({"id": "A"})), invalid("the declared field `booking_id` is missing (it has id)"));
        assert_eq!(check(json!({})), invalid("the declared field `booking_id` is missing (it is empty)"));
        assert_eq!(check(json!({"booking_id": 7})), invalid("`booking_id`: `7` is a number, not a string"));
        assert_eq!(check(json!(["A"])), invalid("a list is not a JSON object"));
        assert_eq!(check(json!("A")), invalid("the string `A` is not a JSON object"));
    }

    #[test]
    fn returned_values_are_normalized() {
        let tool = tool(
            "plan",
            &[],
            Some(&[
                ("tier", TypeKind::Enum { values: vec!["free".to_string(), "pro".to_string()] }),
                ("count", TypeKind::Int),
            ]),
            Some(ToolImpl::Builtin { builtin: Builtin::Echo }),
        );
        let result =
            ToolRegistry::default().call(&tool, &args(json!({"tier": "PRO", "count": 2.0})), &env(PathBuf::from(".")));
        assert_eq!(result, Ok(json!({"tier": "pro", "count": 2})));
    }

    #[test]
    fn a_tool_without_implementation_fails() {
        let broken = tool("broken", &[], None, None);
        let result = ToolRegistry::default().call(&broken, &Map::new(), &env(PathBuf::from(".")));
        assert_eq!(
            result,
            Err(ToolError::Failed {
                tool: "broken".to_string(),
                message: "the tool has no implementation".to_string()
            })
        );
    }
}
