//! Compares what a turn or a run did with what the case expects, and
//! checks the whole-case rules (`never`, `never_before`). Each difference
//! is a [`Failure`] holding the expected and actual values, the events of
//! the failing turn, and what `--update` would write instead.

use super::file::{Case, Expect, ExpectKind, ReplyMatch, Turn, is_subset};
use super::stubs::Call;
use crate::runtime::events::{Event, TurnResult};
use crate::runtime::workflow::WorkflowRun;
use crate::source::Span;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// One expectation that did not hold.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    /// `turn 2 (`yes`)`, `resume 1`, `the case`.
    pub location: String,
    /// The expectation's key (`reply`, `never_before`, …).
    pub expectation: String,
    /// Where it is written in the test file.
    #[serde(skip)]
    pub span: Option<Span>,
    pub expected: String,
    pub actual: String,
    /// The events of the turn (or run) that failed.
    pub events: Vec<Value>,
    /// The span of the expected value and what happened instead, for
    /// `--update`; `None` when no value can stand for what happened.
    #[serde(skip)]
    pub update: Option<(Span, Value)>,
}

impl Failure {
    /// A case that could not run (a recording that cannot be read, data
    /// the program refuses).
    pub fn setup(message: String) -> Failure {
        Failure {
            location: "the case".to_string(),
            expectation: "setup".to_string(),
            span: None,
            expected: "the case to run".to_string(),
            actual: message,
            events: Vec::new(),
            update: None,
        }
    }

    pub fn at(location: &str, expectation: &str, span: Span, expected: impl Into<String>, actual: String) -> Failure {
        Failure {
            location: location.to_string(),
            expectation: expectation.to_string(),
            span: Some(span),
            expected: expected.into(),
            actual,
            events: Vec::new(),
            update: None,
        }
    }
}

/// What a turn did: its result and the tool calls it made.
pub struct TurnFacts<'a> {
    pub result: &'a TurnResult,
    pub calls: &'a [Call],
}

pub fn calls_json(calls: &[Call]) -> Value {
    Value::Array(calls.iter().map(|call| json!({"tool": call.tool, "args": call.args})).collect())
}

fn show(value: &Value) -> String {
    value.to_string()
}

/// The names grounding set aside in a turn.
fn ungrounded(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Ungrounded { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// Every expectation of a turn that did not hold.
pub fn check_turn(location: &str, turn: &Turn, facts: &TurnFacts<'_>) -> Vec<Failure> {
    failures(location, &turn.expects, &facts.result.events, |expect| compare_turn(expect, facts))
}

/// What an expectation found instead: the expected text, the actual value,
/// and the value `--update` writes (when it differs from `actual`).
type Difference = (String, Value, Option<Value>);

/// A [`Failure`] per expectation `compare` finds a difference for, each
/// with `events`, the turn's or the run's, which are written out once.
fn failures<E: Serialize>(
    location: &str,
    expects: &[Expect],
    events: &[E],
    mut compare: impl FnMut(&Expect) -> Option<Difference>,
) -> Vec<Failure> {
    let mut shown: Option<Vec<Value>> = None;
    let mut failures = Vec::new();
    for expect in expects {
        if let Some((expected, actual, update)) = compare(expect) {
            let events = shown
                .get_or_insert_with(|| {
                    events.iter().map(|event| serde_json::to_value(event).unwrap_or_default()).collect()
                })
                .clone();
            failures.push(Failure {
                location: location.to_string(),
                expectation: expect.kind.key().to_string(),
                span: Some(expect.key),
                expected,
                actual: show(&actual),
                events,
                update: update.map(|value| (expect.value, value)),
            });
        }
    }
    failures
}

/// `None` when the expectation holds; else the expected text, the actual
/// value, and the value `--update` writes (when it differs from `actual`).
fn compare_turn(expect: &Expect, facts: &TurnFacts<'_>) -> Option<Difference> {
    let result = facts.result;
    let plain =
        |expected: Value, actual: Value| (expected != actual).then(|| (show(&expected), actual.clone(), Some(actual)));
    match &expect.kind {
        ExpectKind::Flow(expected) => plain(json!(expected), json!(result.flow)),
        ExpectKind::Step(expected) => plain(json!(expected), json!(result.step)),
        ExpectKind::ExecutedSteps(expected) => plain(json!(expected), json!(result.executed_steps)),
        ExpectKind::StoppedReason(expected) => plain(json!(expected), json!(result.stopped_reason.as_str())),
        ExpectKind::Data(expected) => data_difference(expected, &result.data),
        ExpectKind::Reply(matcher) => {
            let actual = json!(result.reply);
            let holds = match matcher {
                ReplyMatch::Exact(text) => result.reply == *text,
                ReplyMatch::Contains(text) => result.reply.contains(text.as_str()),
                ReplyMatch::Matches(regex) => regex.is_match(&result.reply),
            };
            let expected = match matcher {
                ReplyMatch::Exact(text) => show(&json!(text)),
                ReplyMatch::Contains(text) => format!("a reply containing {}", show(&json!(text))),
                ReplyMatch::Matches(regex) => format!("a reply matching /{}/", regex.as_str()),
            };
            (!holds).then(|| (expected, actual.clone(), Some(actual)))
        }
        ExpectKind::Directives(expected) => {
            let actual: Vec<Value> = result
                .directives
                .iter()
                .map(
                    |record| json!({"source": record.source, "applied": record.applied, "directive": record.directive}),
                )
                .collect();
            let holds = expected.len() == result.directives.len()
                && expected.iter().zip(&result.directives).all(|(expected, record)| {
                    expected.source == record.source
                        && expected.applied.is_none_or(|applied| applied == record.applied)
                        && expected.directive.as_ref().is_none_or(|directive| is_subset(directive, &record.directive))
                });
            let shown: Vec<Value> = expected
                .iter()
                .map(|expected| json!({"source": expected.source, "applied": expected.applied, "directive": expected.directive}))
                .collect();
            let update: Vec<Value> = result
                .directives
                .iter()
                .map(|record| json!({"source": record.source, "applied": record.applied}))
                .collect();
            (!holds).then(|| (show(&Value::Array(shown)), Value::Array(actual), Some(Value::Array(update))))
        }
        ExpectKind::Tools(expected) => {
            let holds = expected.len() == facts.calls.len()
                && expected.iter().zip(facts.calls).all(|(expected, call)| {
                    expected.tool == call.tool
                        && expected.args.as_ref().is_none_or(|args| {
                            is_subset(&Value::Object(args.clone()), &Value::Object(call.args.clone()))
                        })
                });
            let shown: Vec<Value> = expected
                .iter()
                .map(|expected| match &expected.args {
                    Some(args) => json!({"tool": expected.tool, "args": args}),
                    None => json!(expected.tool),
                })
                .collect();
            let actual = calls_json(facts.calls);
            (!holds).then(|| (show(&Value::Array(shown)), actual.clone(), Some(actual)))
        }
        ExpectKind::LlmCalls(most) => (result.llm_calls > *most).then(|| {
            (
                format!("at most {most} model call{}", if *most == 1 { "" } else { "s" }),
                json!(result.llm_calls),
                Some(json!(result.llm_calls)),
            )
        }),
        ExpectKind::Ungrounded(expected) => plain(json!(expected), json!(ungrounded(&result.events))),
        // Run expectations are not read in turns.
        ExpectKind::Status(_) | ExpectKind::Steps(_) => None,
    }
}

/// The named fields whose values differ; `actual` and the update hold the
/// same names with what the data held (`null` when unset).
fn data_difference(expected: &Map<String, Value>, data: &Map<String, Value>) -> Option<Difference> {
    let actual: Map<String, Value> =
        expected.keys().map(|name| (name.clone(), data.get(name).cloned().unwrap_or(Value::Null))).collect();
    let actual = Value::Object(actual);
    let expected = Value::Object(expected.clone());
    (!is_subset(&expected, &actual)).then(|| (show(&expected), actual.clone(), Some(actual)))
}

/// The expectations of a workflow run once it stopped.
pub fn check_run(location: &str, expects: &[Expect], run: &WorkflowRun) -> Vec<Failure> {
    failures(location, expects, &run.events, |expect| compare_run(expect, run))
}

/// `None` when the expectation holds of the stopped run; else its
/// [`Difference`].
fn compare_run(expect: &Expect, run: &WorkflowRun) -> Option<Difference> {
    match &expect.kind {
        ExpectKind::Status(expected) => {
            let actual = serde_json::to_value(run.status).unwrap_or_default();
            (json!(expected) != actual).then(|| (show(&json!(expected)), actual.clone(), Some(actual)))
        }
        ExpectKind::Data(expected) => data_difference(expected, &run.data.clone().into_iter().collect()),
        ExpectKind::Steps(expected) => {
            let mut shown = Map::new();
            let mut actual = Map::new();
            let mut holds = true;
            for step in expected {
                let record = run.steps.iter().find(|record| record.id == step.step);
                let status = record.map(|record| serde_json::to_value(record.status).unwrap_or_default());
                let output = record.map(|record| record.output.clone()).unwrap_or_default();
                let status_holds =
                    step.status.as_ref().is_none_or(|expected| status.as_ref() == Some(&json!(expected)));
                let output_holds = step.output.as_ref().is_none_or(|expected| is_subset(expected, &output));
                holds &= status_holds && output_holds;
                let mut want = Map::new();
                let mut found = Map::new();
                if let Some(expected) = &step.status {
                    want.insert("status".to_string(), json!(expected));
                    found.insert("status".to_string(), status.clone().unwrap_or_default());
                }
                if let Some(expected) = &step.output {
                    want.insert("output".to_string(), expected.clone());
                    found.insert("output".to_string(), output.clone());
                }
                shown.insert(step.step.clone(), Value::Object(want));
                actual.insert(step.step.clone(), Value::Object(found));
            }
            let actual = Value::Object(actual);
            (!holds).then(|| (show(&Value::Object(shown)), actual.clone(), Some(actual)))
        }
        _ => None,
    }
}

/// `never` and `never_before` over the whole case: each turn's message with
/// the tool calls it made.
pub fn check_rules(case: &Case, turns: &[(&str, Vec<Call>)]) -> Vec<Failure> {
    let mut failures = Vec::new();
    for tool in &case.never {
        for (index, (message, calls)) in turns.iter().enumerate() {
            if let Some(call) = calls.iter().find(|call| call.tool == tool.value) {
                failures.push(Failure::at(
                    &turn_name(index, message),
                    "never",
                    tool.span,
                    format!("`{}` never to run", tool.value),
                    format!("it ran with {}", Value::Object(call.args.clone())),
                ));
                break;
            }
        }
    }
    for rule in &case.never_before {
        let consent =
            turns.iter().position(|(message, _)| message.trim() == rule.reply_to.trim()).unwrap_or(turns.len());
        let early = turns.iter().enumerate().take(consent).find_map(|(index, (message, calls))| {
            calls.iter().find(|call| call.tool == rule.tool.value).map(|call| (index, *message, call))
        });
        if let Some((index, message, call)) = early {
            let when = if consent < turns.len() {
                format!("before the reply {}", json!(rule.reply_to))
            } else {
                format!("without the reply {} (no turn said it)", json!(rule.reply_to))
            };
            failures.push(Failure::at(
                &turn_name(index, message),
                "never_before",
                rule.span,
                format!("`{}` not to run {when}", rule.tool.value),
                format!("it ran with {}", Value::Object(call.args.clone())),
            ));
        }
    }
    failures
}

fn turn_name(index: usize, message: &str) -> String {
    if message.is_empty() { "the run".to_string() } else { format!("turn {} (`{message}`)", index + 1) }
}
