//! What a case runs against instead of the world: its tool stubs (through
//! the runtime's [`ToolHandler`] trait, so no real system is called), a
//! log of every tool call with its arguments, and a clock the test moves.

use super::file::{Answer, Stub};
use crate::ir::{Program, Tool, ToolImpl};
use crate::runtime::clock::Clock;
use crate::runtime::tools::{ToolEnv, ToolError, ToolHandler, ToolRegistry, call_implementation};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

/// One tool call a case made.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub tool: String,
    pub args: Map<String, Value>,
}

/// Every call of a case, in order; a turn reads the ones it added.
#[derive(Clone, Default)]
pub struct CallLog(Arc<Mutex<Vec<Call>>>);

impl CallLog {
    fn push(&self, call: Call) {
        if let Ok(mut calls) = self.0.lock() {
            calls.push(call);
        }
    }

    /// How many calls were logged so far.
    pub fn len(&self) -> usize {
        self.0.lock().map(|calls| calls.len()).unwrap_or(0)
    }

    /// Whether no call was logged yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The calls from `start` on.
    pub fn since(&self, start: usize) -> Vec<Call> {
        self.0.lock().map(|calls| calls.get(start..).map(<[Call]>::to_vec).unwrap_or_default()).unwrap_or_default()
    }
}

/// A stubbed tool: its answers in order, the last repeated.
struct Stubbed {
    answers: Vec<Answer>,
    next: Mutex<usize>,
    log: CallLog,
}

impl ToolHandler for Stubbed {
    fn call(&self, tool: &Tool, args: &Map<String, Value>, _env: &ToolEnv) -> Result<Value, ToolError> {
        self.log.push(Call { tool: tool.name.clone(), args: args.clone() });
        let index = self
            .next
            .lock()
            .map(|mut next| {
                let index = *next;
                *next += 1;
                index
            })
            .unwrap_or(0);
        match self.answers.get(index).or_else(|| self.answers.last()) {
            Some(Answer::Returns(value)) => Ok(value.clone()),
            Some(Answer::Error(message)) => {
                Err(ToolError::Failed { tool: tool.name.clone(), message: message.clone() })
            }
            None => Err(ToolError::Failed { tool: tool.name.clone(), message: "the stub gives no answer".to_string() }),
        }
    }
}

/// A tool the case did not stub: a builtin runs (it touches nothing but the
/// clock and ids, both the test's); any other tool fails, so that a test
/// never reaches a real system by omission.
struct Unstubbed {
    log: CallLog,
}

impl ToolHandler for Unstubbed {
    fn call(&self, tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError> {
        self.log.push(Call { tool: tool.name.clone(), args: args.clone() });
        match &tool.implementation {
            Some(ToolImpl::Builtin { .. }) => call_implementation(tool, args, env),
            _ => Err(ToolError::Failed {
                tool: tool.name.clone(),
                message: format!(
                    "not stubbed in this test: add `tools: {{{}: {{returns: {{...}}}}}}` to the case or the file",
                    tool.name
                ),
            }),
        }
    }
}

/// The registry of a case: every tool of the program answered by a stub
/// (the case's own, else the file's) or by [`Unstubbed`].
pub fn registry(program: &Program, file_stubs: &[Stub], case_stubs: &[Stub], log: &CallLog) -> ToolRegistry {
    let mut registry = ToolRegistry::default();
    for tool in &program.tools {
        let stub = case_stubs.iter().chain(file_stubs).find(|stub| stub.tool.value == tool.name);
        let handler: Arc<dyn ToolHandler> = match stub {
            Some(stub) => Arc::new(Stubbed { answers: stub.answers.clone(), next: Mutex::new(0), log: log.clone() }),
            None => Arc::new(Unstubbed { log: log.clone() }),
        };
        registry.register(tool.name.clone(), handler);
    }
    registry
}

/// A clock that stands still until the test moves it.
#[derive(Debug)]
pub struct TestClock(Mutex<DateTime<Utc>>);

impl TestClock {
    pub fn new(now: DateTime<Utc>) -> TestClock {
        TestClock(Mutex::new(now))
    }

    pub fn advance(&self, ms: u64) {
        if let Ok(mut now) = self.0.lock()
            && let Some(later) = crate::runtime::clock::resume_time(*now, ms)
        {
            *now = later;
        }
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        self.0.lock().map(|now| *now).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Span, Spanned};
    use serde_json::json;

    fn env() -> ToolEnv {
        let clock: Arc<dyn Clock> = Arc::new(TestClock::new(DateTime::<Utc>::default()));
        ToolEnv { base_dir: ".".into(), clock, ids: Arc::new(crate::runtime::clock::SeededIds::new(1)) }
    }

    fn tool(name: &str, implementation: Option<ToolImpl>) -> Tool {
        Tool {
            name: name.to_string(),
            description: None,
            params: Vec::new(),
            returns: None,
            implementation,
            span: Span::default(),
        }
    }

    #[test]
    fn a_stub_answers_in_order_then_repeats_its_last_answer() {
        let log = CallLog::default();
        let stub = Stubbed {
            answers: vec![Answer::Error("down".to_string()), Answer::Returns(json!({"id": "A"}))],
            next: Mutex::new(0),
            log: log.clone(),
        };
        let book = tool("book", None);
        let args = Map::new();
        assert!(matches!(stub.call(&book, &args, &env()), Err(ToolError::Failed { message, .. }) if message == "down"));
        assert_eq!(stub.call(&book, &args, &env()), Ok(json!({"id": "A"})));
        assert_eq!(stub.call(&book, &args, &env()), Ok(json!({"id": "A"})));
        assert_eq!(log.len(), 3);
        assert_eq!(log.since(2), vec![Call { tool: "book".to_string(), args: Map::new() }]);
    }

    #[test]
    fn an_unstubbed_exec_tool_fails_and_a_builtin_runs() {
        let log = CallLog::default();
        let unstubbed = Unstubbed { log: log.clone() };
        let exec =
            tool("book", Some(ToolImpl::Exec { command: vec!["true".to_string()], timeout_ms: 10, env: Vec::new() }));
        let failed = unstubbed.call(&exec, &Map::new(), &env());
        assert!(matches!(failed, Err(ToolError::Failed { message, .. }) if message.contains("not stubbed")));
        let now = tool("now", Some(ToolImpl::Builtin { builtin: crate::ir::Builtin::Now }));
        assert!(unstubbed.call(&now, &Map::new(), &env()).is_ok());
        assert_eq!(log.len(), 2);
    }

    #[test]
    fn the_case_stub_wins_over_the_file_stub() {
        let source = crate::source::SourceFile::new("booking.flow", include_str!("../../flows/booking.flow"));
        let program = crate::pipeline::compile(&source).ir;
        let stub = |answer: &str| Stub {
            tool: Spanned::new("book_hotel".to_string(), Span::default()),
            answers: vec![Answer::Returns(json!({"booking_id": answer}))],
        };
        let log = CallLog::default();
        let registry = registry(&program, &[stub("file")], &[stub("case")], &log);
        let book = program.tools.iter().find(|tool| tool.name == "book_hotel").cloned();
        let book = book.unwrap_or_else(|| tool("missing", None));
        let result = registry.call(&book, &Map::new(), &env());
        assert_eq!(result, Ok(json!({"booking_id": "case"})));
    }

    #[test]
    fn the_test_clock_moves_only_when_told() {
        let clock = TestClock::new(DateTime::<Utc>::default());
        let before = clock.now();
        assert_eq!(clock.now(), before);
        clock.advance(86_400_000);
        assert_eq!((clock.now() - before).num_hours(), 24);
    }
}
