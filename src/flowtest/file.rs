//! What a test file says, as data: the program it tests, its cases, each
//! case's stubs, turns and expectations, each with the span it was read
//! from (for diagnostics, failure reports and `--update`).

use crate::source::{SourceFile, Span, Spanned};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// One `*.test.yaml` file, read and checked against its program.
#[derive(Clone, Debug)]
pub struct TestFile {
    pub source: SourceFile,
    pub path: PathBuf,
    /// The program, resolved against the test file's directory.
    pub program: PathBuf,
    /// The model the cases talk to unless a case names its own.
    pub provider: ProviderChoice,
    /// The frozen time every case starts at.
    pub now: Option<Spanned<String>>,
    /// Stubs every case gets; a case's own stubs replace these by tool.
    pub tools: Vec<Stub>,
    pub cases: Vec<Case>,
}

/// The model of a case: the offline rules, or a recording made with
/// `flowc run --record` or `flowc test --record` (a path relative to the
/// test file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProviderChoice {
    #[default]
    Offline,
    Replay(PathBuf),
}

#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub context: Map<String, Value>,
    pub data: Map<String, Value>,
    pub tools: Vec<Stub>,
    pub provider: Option<ProviderChoice>,
    pub body: CaseBody,
    /// `never: {tool: X}`: tools that must not run in any turn.
    pub never: Vec<Spanned<String>>,
    pub never_before: Vec<NeverBefore>,
}

#[derive(Clone, Debug)]
pub enum CaseBody {
    Conversation(Vec<Turn>),
    Workflow(WorkflowCase),
}

/// `never_before: {tool: X, reply_to: "yes"}`: `tool` must not run before
/// the turn whose message is `reply_to` (and never, when no turn says it).
#[derive(Clone, Debug)]
pub struct NeverBefore {
    pub tool: Spanned<String>,
    pub reply_to: String,
    pub span: Span,
}

/// A tool stub: the answers of its calls in order; past the last, the
/// last answer is given again.
#[derive(Clone, Debug)]
pub struct Stub {
    pub tool: Spanned<String>,
    pub answers: Vec<Answer>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Returns(Value),
    Error(String),
}

#[derive(Clone, Debug)]
pub struct Turn {
    pub user: String,
    pub span: Span,
    pub expects: Vec<Expect>,
}

/// One expectation and where it is written: `key` for messages, `value`
/// for `--update` to replace.
#[derive(Clone, Debug)]
pub struct Expect {
    pub kind: ExpectKind,
    pub key: Span,
    pub value: Span,
}

#[derive(Clone, Debug)]
pub enum ExpectKind {
    /// `flow`/`step`: `null` for none.
    Flow(Option<String>),
    Step(Option<String>),
    ExecutedSteps(Vec<String>),
    StoppedReason(String),
    /// A subset of the data: each named field holds this value (`null`: unset).
    Data(Map<String, Value>),
    Reply(ReplyMatch),
    Directives(Vec<DirectiveExpect>),
    Tools(Vec<ToolExpect>),
    /// At most this many model calls.
    LlmCalls(u32),
    /// The names whose values grounding set aside, in order.
    Ungrounded(Vec<String>),
    /// A workflow run's status.
    Status(String),
    /// A workflow run's step records, by step.
    Steps(Vec<StepExpect>),
}

impl ExpectKind {
    /// The key it is written under.
    pub fn key(&self) -> &'static str {
        match self {
            ExpectKind::Flow(_) => "flow",
            ExpectKind::Step(_) => "step",
            ExpectKind::ExecutedSteps(_) => "executed_steps",
            ExpectKind::StoppedReason(_) => "stopped_reason",
            ExpectKind::Data(_) => "data",
            ExpectKind::Reply(_) => "reply",
            ExpectKind::Directives(_) => "directives",
            ExpectKind::Tools(_) => "tools",
            ExpectKind::LlmCalls(_) => "llm_calls",
            ExpectKind::Ungrounded(_) => "ungrounded",
            ExpectKind::Status(_) => "status",
            ExpectKind::Steps(_) => "steps",
        }
    }
}

#[derive(Clone, Debug)]
pub enum ReplyMatch {
    Exact(String),
    Contains(String),
    Matches(regex::Regex),
}

/// A directive that fired: the source it came from, and optionally
/// whether it took effect and a subset of what it said.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectiveExpect {
    pub source: String,
    pub applied: Option<bool>,
    pub directive: Option<Value>,
}

/// A tool that ran, with a subset of its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolExpect {
    pub tool: String,
    pub args: Option<Map<String, Value>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepExpect {
    pub step: String,
    pub status: Option<String>,
    /// A subset of the step's output.
    pub output: Option<Value>,
}

/// A case that runs a workflow: its expectations once it stops, then each
/// resume with the clock moved forward.
#[derive(Clone, Debug)]
pub struct WorkflowCase {
    pub flow: Spanned<String>,
    pub expects: Vec<Expect>,
    pub resumes: Vec<Resume>,
}

#[derive(Clone, Debug)]
pub struct Resume {
    /// How far the test moves the clock before resuming.
    pub after_ms: u64,
    pub span: Span,
    pub expects: Vec<Expect>,
}

/// Whether `actual` holds everything `expected` says: objects by key
/// (extra keys allowed), everything else equal. Numbers compare by value,
/// so `2` matches `2.0`.
pub fn is_subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => expected.iter().all(|(key, value)| match actual.get(key) {
            Some(found) => is_subset(value, found),
            None => value.is_null(),
        }),
        (Value::Array(expected), Value::Array(actual)) => {
            expected.len() == actual.len() && expected.iter().zip(actual).all(|(left, right)| is_subset(left, right))
        }
        (Value::Number(left), Value::Number(right)) => left.as_f64() == right.as_f64(),
        _ => expected == actual,
    }
}

#[cfg(test)]
mod tests {
    use super::is_subset;
    use serde_json::json;

    #[test]
    fn subsets_allow_extra_keys_and_missing_means_null() {
        assert!(is_subset(&json!({"a": 1}), &json!({"a": 1.0, "b": 2})));
        assert!(is_subset(&json!({"a": null}), &json!({"b": 2})));
        assert!(!is_subset(&json!({"a": 1}), &json!({"b": 2})));
        assert!(!is_subset(&json!([1]), &json!([1, 2])));
        assert!(is_subset(&json!({"x": {"y": "z"}}), &json!({"x": {"y": "z", "w": 1}})));
        assert!(!is_subset(&json!("a"), &json!("b")));
    }
}
