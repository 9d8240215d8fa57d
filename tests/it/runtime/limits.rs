//! The continuation limits of `agent.limits`: each ends the turn cleanly
//! with its stop reason and leaves a consistent session — never a crash.

use super::harness::{Double, Harness, Reply, Understood, position, steps};
use flowc::ir::Program;
use flowc::llm::Usage;
use flowc::runtime::engine::ContinuationLimits;
use flowc::runtime::events::{Event, StopReason};
use flowc::runtime::tools::ToolRegistry;
use flowc::runtime::workflow::{RunLimits, RunStatus, StepProgress, StepStatus, WorkflowRun, WorkflowRunner};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn tool_calls(result: &flowc::runtime::events::TurnResult) -> usize {
    result.events.iter().filter(|event| matches!(event, Event::ToolCalled { .. })).count()
}

#[test]
fn max_auto_steps_parks_the_session_at_the_step_reached_and_the_next_turn_continues() {
    let mut harness = Harness::new(
        r#"
agent A { limits { max_auto_steps 2 } }
schema { a: string  n: int }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
  auto step s1 { set n = 1 }
  auto step s2 { set n = 2 }
  auto step s3 { set n = 3 }
  auto step s4 { set n = 4 }
  auto step s5 { set n = 5  say "chain done" }
}
"#,
    );
    harness.say_with("f", Understood::new().flow("f"));
    let first = harness.say_with("a", Understood::new().field("a", json!("a")));
    assert_eq!(first.stopped_reason, StopReason::AutoStepLimit);
    assert_eq!(steps(&first), ["ask_a", "s1", "s2"]);
    assert_eq!(position(&first), (Some("f"), Some("s3")), "parked at the step reached, not run");
    assert_eq!(harness.data("n"), Some(json!(2)));
    assert_eq!(harness.calls_last_turn(), (1, 0), "auto steps need no reply call");

    let second = harness.say("go on");
    assert_eq!(second.stopped_reason, StopReason::AutoStepLimit);
    assert_eq!(steps(&second), ["s3", "s4"]);
    assert_eq!(position(&second), (Some("f"), Some("s5")));
    assert_eq!(harness.calls_last_turn(), (0, 0), "nothing to understand in an auto chain");

    let third = harness.say("go on");
    assert_eq!(third.stopped_reason, StopReason::FlowComplete);
    assert_eq!(steps(&third), ["s5"]);
    assert_eq!(third.reply, "chain done");
    assert_eq!(harness.data("n"), Some(json!(5)));
    assert_eq!(third.llm_calls, 0);
}

const TOOLS: &str = r#"
agent A { limits { max_tool_rounds 2 } }
schema { a: string }
tool lookup(q: string) { builtin echo }
tool search(q: string) { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a tools lookup }
}
"#;

#[test]
fn max_tool_rounds_stops_a_model_that_keeps_calling_tools() {
    let mut harness = Harness::new(TOOLS);
    harness.reply_next(Reply {
        text: "I looked it up.".to_string(),
        tool_calls: vec![("lookup".to_string(), json!({ "q": "rooms" }))],
        call_forever: true,
        ..Reply::default()
    });
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.stopped_reason, StopReason::ToolRoundLimit);
    assert_eq!(tool_calls(&result), 2, "two rounds ran, the third was refused");
    let results = harness.script().tool_results.clone();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0], Ok(json!({ "q": "rooms" })));
    assert!(results[2].as_ref().is_err_and(|error| error.contains("limit of 2 tool rounds")), "{results:?}");
    // The reply written so far is kept and the session is consistent.
    assert_eq!(result.reply, "I looked it up.");
    assert_eq!(position(&result), (Some("f"), Some("ask_a")));
    assert_eq!(harness.session.turns, 1);
}

/// A model that calls tools round after round while the program allows
/// more rounds than the runtime's safety net (`MAX_ROUNDS`, 32): the
/// reply is cut there, and having written nothing, it gets the stand-in
/// any empty reply gets (the step's prompt), never silence.
#[test]
fn an_empty_reply_cut_at_the_last_round_gets_the_stand_in() {
    let mut harness = Harness::new(&TOOLS.replace("max_tool_rounds 2", "max_tool_rounds 50"));
    harness.reply_next(Reply {
        text: String::new(),
        tool_calls: vec![("lookup".to_string(), json!({ "q": "rooms" }))],
        call_forever: true,
        ..Reply::default()
    });
    let result = harness.say_with("f", Understood::new().flow("f"));
    // `MAX_ROUNDS` of `src/llm/rounds.rs`.
    assert_eq!(tool_calls(&result), 32, "cut by the safety net, not by the program");
    assert_eq!(result.reply, "A?");
    let empty: Vec<&Event> = result.events.iter().filter(|event| matches!(event, Event::EmptyReply { .. })).collect();
    assert_eq!(
        empty,
        [&Event::EmptyReply { action: flowc::runtime::events::EmptyReplyAction::Replaced, text: Some("A?".into()) }],
        "no asking again past the last round"
    );
    assert_eq!(harness.calls_last_turn(), (1, 1), "one reply, however many rounds");
    assert_eq!(position(&result), (Some("f"), Some("ask_a")));
}

#[test]
fn the_model_may_call_only_the_tools_of_the_step() {
    let mut harness = Harness::new(TOOLS);
    harness.reply_next(Reply {
        text: "ok".to_string(),
        tool_calls: vec![("search".to_string(), json!({ "q": "rooms" }))],
        ..Reply::default()
    });
    let result = harness.say_with("f", Understood::new().flow("f"));
    let results = harness.script().tool_results.clone();
    assert!(results[0].as_ref().is_err_and(|error| error.contains("not available")), "{results:?}");
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
}

#[test]
fn max_turn_tokens_stops_after_the_understand_call_that_exceeds_it() {
    let mut harness = Harness::new(
        r#"
agent A { limits { max_turn_tokens 500 } }
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f").tokens(1000));
    assert_eq!(result.stopped_reason, StopReason::TokenLimit);
    assert_eq!(harness.calls_last_turn(), (1, 0), "no reply call once the budget is spent");
    assert_eq!(result.tokens.prompt, 1000);
    assert_eq!(result.llm_calls, 1);
    assert_eq!(position(&result), (None, None));
    // The turn is recorded: a consistent session the next turn starts from.
    assert_eq!(harness.session.turns, 1);
    assert_eq!(harness.session.usage.prompt, 1000);
    let next = harness.say_with("f", Understood::new().flow("f").tokens(10));
    assert_eq!(next.stopped_reason, StopReason::NeedsInput);
    assert_eq!(position(&next), (Some("f"), Some("ask_a")));
}

#[test]
fn max_turn_tokens_counts_the_reply_call_too() {
    let mut harness = Harness::new(
        r#"
agent A { limits { max_turn_tokens 500 } }
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
}
"#,
    );
    harness.reply_next(Reply {
        text: "A long answer".to_string(),
        usage: Usage { calls: 1, prompt: 300, completion: 300, cached: 0, estimated: false },
        ..Reply::default()
    });
    let result = harness.say_with("f", Understood::new().flow("f").tokens(100));
    assert_eq!(result.stopped_reason, StopReason::TokenLimit);
    assert_eq!(result.reply, "A long answer");
    assert_eq!(result.tokens.prompt, 400);
    assert_eq!(result.tokens.completion, 300);
    assert_eq!(position(&result), (Some("f"), Some("ask_a")));
}

#[test]
fn turn_timeout_stops_a_turn_whose_model_is_too_slow() {
    let mut harness = Harness::new(
        r#"
agent A { limits { turn_timeout 1s } }
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
}
"#,
    );
    // Past the limit by a margin no scheduler delay before the call can
    // reach: the turn is stopped after the call, never before it.
    harness.script().understand_sleep = Some(Duration::from_millis(1050));
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.stopped_reason, StopReason::TimeLimit);
    assert_eq!(harness.calls_last_turn(), (1, 0));
    assert_eq!(harness.session.turns, 1);
    // The user's message is kept, and the turn is not answered with
    // silence: the limit message answers it.
    let texts: Vec<&str> = harness.session.history.iter().map(|message| message.text.as_str()).collect();
    assert_eq!(texts, ["f", "Sorry, I had to stop before I could answer that. Please try again."]);
    assert_eq!(result.reply, texts[1]);
}

#[test]
fn turn_timeout_in_an_auto_chain_never_leaves_an_executed_step_to_run_again() {
    let double = Double::slow(json!({ "id": "B-1" }), Duration::from_millis(1100));
    let mut tools = ToolRegistry::default();
    tools.register("book", double.clone());
    let mut harness = Harness::with_tools(
        r#"
agent A { limits { turn_timeout 1s } }
schema { a: string  id: string  n: int }
tool book(a: string) -> { id: string } { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
  auto step do_book { call book(a) -> id }
  auto step after { set n = 1  say "Booked {{id}}." }
}
"#,
        tools,
    );
    harness.say_with("f", Understood::new().flow("f"));
    let slow = harness.say_with("a", Understood::new().field("a", json!("a")));
    assert_eq!(slow.stopped_reason, StopReason::TimeLimit);
    assert_eq!(steps(&slow), ["ask_a", "do_book"]);
    assert_eq!(harness.data("id"), Some(json!("B-1")));
    // Parked at the step to run next, not at the step that already ran.
    assert_eq!(position(&slow), (Some("f"), Some("after")));

    let next = harness.say("and?");
    assert_eq!(double.calls().len(), 1, "the booking tool is not called twice");
    assert_eq!(steps(&next), ["after"]);
    assert_eq!(next.reply, "Booked B-1.");
}

// ------------------------------------------------------------ library limits (`ContinuationLimits`)

const CHAIN: &str = r#"
schema { a: string  n: int }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
  auto step s1 { set n = 1 }
  auto step s2 { set n = 2 }
  auto step s3 { set n = 3  say "chain done" }
}
"#;

#[test]
fn max_steps_per_turn_parks_before_the_step_over_the_limit_and_the_next_turn_continues() {
    let mut harness = Harness::new(CHAIN);
    harness.set_limits(ContinuationLimits { max_steps_per_turn: Some(2), ..ContinuationLimits::default() });
    harness.say_with("f", Understood::new().flow("f"));
    let first = harness.say_with("a", Understood::new().field("a", json!("a")));
    assert_eq!(first.stopped_reason, StopReason::StepLimit);
    assert_eq!(first.stopped_reason.as_str(), "step_limit");
    assert_eq!(steps(&first), ["ask_a", "s1"], "the answered step and one auto step: two");
    assert_eq!(position(&first), (Some("f"), Some("s2")), "parked at the step not run");
    assert_eq!(harness.data("n"), Some(json!(1)));

    let second = harness.say("go on");
    assert_eq!(second.stopped_reason, StopReason::FlowComplete);
    assert_eq!(steps(&second), ["s2", "s3"]);
    assert_eq!(second.reply, "chain done");
}

const ASK: &str = r#"
schema { a: string  b: string }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
  step ask_b { prompt "B?" collect b }
}
"#;

#[test]
fn max_session_tokens_stops_the_turn_that_spends_past_it_and_every_turn_after() {
    let mut harness = Harness::new(ASK);
    harness.set_limits(ContinuationLimits { max_session_tokens: Some(150), ..ContinuationLimits::default() });
    let first = harness.say_with("f", Understood::new().flow("f").tokens(100));
    assert_eq!(first.stopped_reason, StopReason::NeedsInput, "100 of 150 tokens spent");

    let second = harness.say_with("a", Understood::new().field("a", json!("a")).tokens(100));
    assert_eq!(second.stopped_reason, StopReason::SessionTokenLimit);
    assert_eq!(second.stopped_reason.as_str(), "session_token_limit");
    assert_eq!(harness.calls_last_turn(), (1, 0), "no reply call once the session's budget is spent");
    assert_eq!(harness.session.usage.prompt, 200);
    assert_eq!(position(&second), (Some("f"), Some("ask_a")), "stopped before the answer was acted on");

    let third = harness.say("b");
    assert_eq!(third.stopped_reason, StopReason::SessionTokenLimit);
    assert_eq!(third.llm_calls, 0, "a spent session asks the model nothing");
    assert_eq!((second.turn, third.turn), (2, 3), "a turn refused at its start is still a turn");
    assert!(
        matches!(third.events.first(), Some(flowc::runtime::events::Event::TurnStarted { turn: 3, .. })),
        "{:?}",
        third.events
    );
}

#[test]
fn max_session_time_stops_a_session_that_spent_its_time_before_the_model_is_asked() {
    let mut harness = Harness::new(ASK);
    let hour = Duration::from_secs(3600);
    harness.set_limits(ContinuationLimits { max_session_time: Some(hour), ..ContinuationLimits::default() });
    let first = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(first.stopped_reason, StopReason::NeedsInput);
    let spent = harness.session.turn_time_ms;
    assert!(spent.is_some_and(|spent| spent < 3_600_000), "the session keeps its time: {spent:?}");

    // As if earlier turns had used up the hour.
    harness.session.turn_time_ms = Some(3_600_001);
    let over = harness.say("a");
    assert_eq!(over.stopped_reason, StopReason::SessionTimeLimit);
    assert_eq!(over.stopped_reason.as_str(), "session_time_limit");
    assert_eq!(over.llm_calls, 0);
    assert_eq!(over.turn, 2);
    assert_eq!(position(&over), (Some("f"), Some("ask_a")));
}

#[test]
fn without_a_session_time_limit_the_session_keeps_no_time() {
    let mut harness = Harness::new(ASK);
    harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(harness.session.turn_time_ms, None);
}

#[test]
fn max_consecutive_errors_stops_a_chain_of_failing_steps() {
    let (mut harness, double) = Harness::with_failing_tool(
        r#"
schema { hotel: string  booking_id: string }
tool book(hotel: string) -> { booking_id: string } { builtin echo }
flow booking "Book a room" {
  when "the user wants to book"
  step ask_hotel { prompt "Which hotel?" collect hotel }
  auto step book {
    call book(hotel) -> booking_id
    on_error { goto_step second_try }
  }
  auto step second_try {
    call book(hotel) -> booking_id
    on_error { goto_step third_try }
  }
  auto step third_try {
    call book(hotel) -> booking_id
  }
}
"#,
        "book",
        "the booking system is down",
    );
    harness.set_limits(ContinuationLimits { max_consecutive_errors: Some(2), ..ContinuationLimits::default() });
    harness.say_with("book", Understood::new().flow("booking"));
    let result = harness.say_with("the Grand", Understood::new().field("hotel", json!("Grand")));
    assert_eq!(result.stopped_reason, StopReason::ErrorLimit);
    assert_eq!(result.stopped_reason.as_str(), "error_limit");
    assert_eq!(double.calls().len(), 2, "two failures in a row, then no third attempt");
    assert_eq!(position(&result), (Some("booking"), Some("third_try")), "parked before the step not run");
}

#[test]
fn max_consecutive_errors_stops_a_model_that_keeps_calling_a_failing_tool() {
    let (mut harness, double) = Harness::with_failing_tool(
        &TOOLS.replace("max_tool_rounds 2", "max_tool_rounds 10"),
        "lookup",
        "the lookup service is down",
    );
    harness.set_limits(ContinuationLimits { max_consecutive_errors: Some(2), ..ContinuationLimits::default() });
    harness.reply_next(Reply {
        text: "I tried.".to_string(),
        tool_calls: vec![("lookup".to_string(), json!({ "q": "rooms" }))],
        call_forever: true,
        past_errors: true,
        ..Reply::default()
    });
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.stopped_reason, StopReason::ErrorLimit);
    assert_eq!(double.calls().len(), 2);
    let results = harness.script().tool_results.clone();
    assert_eq!(results.len(), 2, "no third call once two failed in a row: {results:?}");
    assert_eq!(result.reply, "I tried.");
}

#[test]
fn every_stop_reason_has_a_distinct_name_and_an_explanation() {
    let reasons = [
        StopReason::NeedsInput,
        StopReason::FlowComplete,
        StopReason::Halt,
        StopReason::Aborted,
        StopReason::AutoStepLimit,
        StopReason::ToolRoundLimit,
        StopReason::TokenLimit,
        StopReason::TimeLimit,
        StopReason::Waiting,
        StopReason::Error,
        StopReason::StepLimit,
        StopReason::SessionTokenLimit,
        StopReason::SessionTimeLimit,
        StopReason::ErrorLimit,
    ];
    let names: std::collections::BTreeSet<&str> = reasons.iter().map(|reason| reason.as_str()).collect();
    assert_eq!(names.len(), reasons.len());
    for reason in reasons {
        assert_eq!(serde_json::to_value(reason).ok(), Some(json!(reason.as_str())), "JSON says what as_str says");
        assert!(!reason.explanation().is_empty());
    }
}

// ------------------------------------------------------------ workflow runs (`RunLimits`)

/// Hands `act` a runner for `program` whose checkpoints and progress go
/// nowhere, on the harness's clock.
fn with_runner<T>(program: &Program, tools: &ToolRegistry, act: impl FnOnce(&mut WorkflowRunner) -> T) -> T {
    let env = super::harness::tool_env_at(super::harness::NOW);
    let sleep = |_: Duration| {};
    let mut on_progress = |_: &StepProgress| {};
    let mut checkpoint = |_: &WorkflowRun| Ok(());
    let mut runner = WorkflowRunner {
        program,
        tools,
        tool_env: &env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
        model: None,
    };
    act(&mut runner)
}

fn run_with_limits(source: &str, tools: &ToolRegistry, limits: RunLimits) -> (WorkflowRun, Arc<Program>) {
    let program = super::harness::program(source);
    let Some(flow) = program.flow_by_name("w") else { panic!("no workflow `w`") };
    let run = with_runner(&program, tools, |runner| {
        let mut run = match runner.start(flow, &serde_json::Map::new(), Default::default()) {
            Ok(run) => run,
            Err(error) => panic!("{error}"),
        };
        if let Err(error) = runner.run_within(&mut run, limits) {
            panic!("{error}");
        }
        run
    });
    (run, program)
}

fn step_statuses(run: &WorkflowRun) -> Vec<StepStatus> {
    run.steps.iter().map(|record| record.status).collect()
}

/// Three auto steps, each setting `n`: a workflow to stop between steps.
pub(crate) const STEPS: &str = r#"
schema { n: int }
flow w "W" {
  auto step a { set n = 1 }
  auto step b { set n = 2 }
  auto step c { set n = 3 }
}
"#;

#[test]
fn a_run_stops_before_the_step_past_max_steps_and_goes_on_when_run_again() {
    let tools = ToolRegistry::default();
    let limits = RunLimits { max_steps: Some(2), ..RunLimits::default() };
    let (mut run, program) = run_with_limits(STEPS, &tools, limits);
    assert_eq!(run.status, RunStatus::Paused);
    assert_eq!(run.limited, Some(StopReason::StepLimit));
    assert_eq!(step_statuses(&run), [StepStatus::Completed, StepStatus::Completed, StepStatus::Pending]);
    assert_eq!(run.data.get("n"), Some(&json!(2)));
    assert_eq!(run.to_json(&program)["stopped_reason"], json!("step_limit"));
    assert_eq!(run.limit_summary().as_deref(), Some("stopped by step_limit: it ran `max_steps` steps in one call"));

    assert!(with_runner(&program, &tools, |runner| runner.run(&mut run)).is_ok());
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.limited, None);
    assert_eq!(run.limit_summary(), None);
    assert_eq!(run.data.get("n"), Some(&json!(3)));
}

#[test]
fn a_run_stops_when_its_steps_fail_max_consecutive_errors_times_in_a_row() {
    let mut tools = ToolRegistry::default();
    tools.register("notify", Double::failing("the mail server is down"));
    let source = r#"
schema { n: int }
tool notify(n: int) { builtin echo }
flow w "W" {
  auto step a { call notify(n: 1)  on_error continue }
  auto step b { call notify(n: 2)  on_error continue }
  auto step c { call notify(n: 3)  on_error continue }
  auto step d { set n = 4 }
}
"#;
    let limits = RunLimits { max_consecutive_errors: Some(2), ..RunLimits::default() };
    let (run, program) = run_with_limits(source, &tools, limits);
    assert_eq!(run.limited, Some(StopReason::ErrorLimit));
    assert_eq!(step_statuses(&run)[..3], [StepStatus::Failed, StepStatus::Failed, StepStatus::Pending]);
    assert_eq!(run.to_json(&program)["stopped_reason"], json!("error_limit"));
    assert_eq!(
        run.limit_summary().as_deref(),
        Some("stopped by error_limit: `max_consecutive_errors` of its steps failed in a row")
    );
}

#[test]
fn a_run_stops_before_the_step_past_max_time() {
    let mut tools = ToolRegistry::default();
    tools.register("slow", Double::slow(json!({}), Duration::from_millis(30)));
    let source = r#"
schema { n: int }
tool slow(n: int) { builtin echo }
flow w "W" {
  auto step a { call slow(n: 1) }
  auto step b { set n = 2 }
}
"#;
    let limits = RunLimits { max_time: Some(Duration::from_millis(10)), ..RunLimits::default() };
    let (run, program) = run_with_limits(source, &tools, limits);
    assert_eq!(run.limited, Some(StopReason::TimeLimit));
    assert_eq!(step_statuses(&run), [StepStatus::Completed, StepStatus::Pending]);
    assert_eq!(run.to_json(&program)["stopped_reason"], json!("time_limit"));
    assert_eq!(
        run.limit_summary().as_deref(),
        Some("stopped by time_limit: one call ran it for longer than `max_time`")
    );
}

#[test]
fn without_run_limits_a_run_keeps_no_limit() {
    let (run, _) = run_with_limits(STEPS, &ToolRegistry::default(), RunLimits::default());
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.limited, None);
    let saved = serde_json::to_value(&run).unwrap_or_default();
    assert!(saved.get("limited").is_none(), "a run without limits saves as before: {saved}");
}
