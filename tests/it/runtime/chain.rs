//! The directive chain of a turn (every source, and whether it applied),
//! tool doubles, failed turns, and the step-at-a-time API.

use super::harness::{Double, Harness, Understood, chain, directive_from, steps};
use flowc::runtime::engine::{Progress, StageDone};
use flowc::runtime::events::{Event, Purpose};
use flowc::runtime::tools::ToolRegistry;
use serde_json::json;
use std::sync::{Arc, Mutex};

const SOURCES: &str = r#"
schema { a: string  id: string  note: string }
tool book(a: string) -> { id: string } { builtin echo }
signal hi {
  when "the user says hi"
  then { set note = "hi" }
}
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    prepare { emit append_prompt "Be brief." }
    branch {
      if a == "book" -> { set note = "booking" }
    }
  }
  auto step do_book {
    call book(a) -> id
    emit set note = "booked"
    on_error stop
  }
  step done { say "done {{id}}" }
}
"#;

fn with_book(result: serde_json::Value) -> (Harness, Arc<Double>) {
    let double = Double::returning(result);
    let mut tools = ToolRegistry::default();
    tools.register("book", double.clone());
    (Harness::with_tools(SOURCES, tools), double)
}

#[test]
fn the_directive_chain_names_every_source_in_order() {
    let (mut harness, double) = with_book(json!({ "id": "B-1", "directive": { "set": { "note": "from the tool" } } }));
    let first = harness.say_with("hi, f please", Understood::new().flow("f").signal("hi", true));
    assert_eq!(chain(&first), [("signal:hi".to_string(), true), ("hook:f.ask_a.prepare".to_string(), true)]);
    assert_eq!(directive_from(&first, "hook:f.ask_a.prepare"), json!({ "append_prompt": ["Be brief."] }));

    let second = harness.say_with("book", Understood::new().field("a", json!("book")));
    assert_eq!(
        chain(&second),
        [
            ("branch:f.ask_a#1".to_string(), true),
            ("tool:book".to_string(), true),
            ("action:f.do_book#2".to_string(), true),
        ]
    );
    assert_eq!(directive_from(&second, "tool:book"), json!({ "set": { "note": "from the tool" } }));
    // The branch wrote first, then the tool and the action merged, the
    // action last.
    assert_eq!(harness.data("note"), Some(json!("booked")));
    assert_eq!(harness.data("id"), Some(json!("B-1")));
    assert_eq!(steps(&second), ["ask_a", "do_book", "done"]);
    assert_eq!(second.reply, "done B-1");
    assert_eq!(double.calls(), [json!({ "a": "book" }).as_object().cloned().unwrap_or_default()]);
    let line = second.to_json_line();
    assert_eq!(
        line["directives"][1],
        json!({ "source": "tool:book", "directive": { "set": { "note": "from the tool" } }, "applied": true })
    );
}

#[test]
fn a_failed_turn_leaves_the_session_exactly_as_it_was() {
    let (mut harness, double) = Harness::with_failing_tool(SOURCES, "book", "the booking system is down");
    harness.say_with("f", Understood::new().flow("f"));
    let before = harness.session.clone();
    harness.understand_next(Understood::new().field("a", json!("book")));
    let error = match harness.runtime.run_turn(&mut harness.session, "book") {
        Ok(result) => panic!("the turn should fail: {result:#?}"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("the booking system is down"), "{error}");
    assert_eq!(harness.session, before, "no write, no move, no history, same version");
    assert_eq!(double.calls().len(), 1);
}

#[test]
fn a_turn_can_be_driven_one_stage_at_a_time_with_the_same_result() {
    let program = r#"
schema { a: string  b: string }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
  auto step note { set b = "noted" }
  step ask_b { prompt "B?" collect b skip_if b is set }
  step bye { prompt "Say goodbye." }
}
"#;
    let mut whole = Harness::new(program);
    let mut staged = Harness::new(program);
    for harness in [&mut whole, &mut staged] {
        harness.say_with("f", Understood::new().flow("f"));
        harness.understand_next(Understood::new().field("a", json!("x")));
    }
    let expected = whole.say("x");

    let observed: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = Arc::clone(&observed);
    staged.runtime.set_observer(Box::new(move |event: &Event| {
        sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(event.clone());
    }));
    let mut stages = Vec::new();
    let result = {
        let mut turn = match staged.runtime.begin(&mut staged.session, "x") {
            Ok(turn) => turn,
            Err(error) => panic!("{error}"),
        };
        loop {
            match turn.step() {
                Ok(Progress::Continue(stage)) => stages.push(stage),
                Ok(Progress::ToolCalls(calls)) => panic!("no tool calls were scripted: {calls:?}"),
                Ok(Progress::Finished { result, .. }) => break *result,
                Err(error) => panic!("{error}"),
            }
        }
    };
    assert_eq!(result, expected);
    assert_eq!(staged.session, whole.session);
    assert_eq!(stages.first(), Some(&StageDone::Started));
    assert_eq!(stages.get(1), Some(&StageDone::Understood));
    assert_eq!(&stages[stages.len() - 2..], [StageDone::Replied, StageDone::PostSignals]);
    let resolved = stages.iter().filter(|stage| **stage == StageDone::Resolved).count();
    assert!(resolved >= 4, "one resolution step per transition: {stages:?}");
    let observed = observed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert_eq!(observed, result.events, "the observer sees the event stream as it happens");
    assert!(matches!(observed.first(), Some(Event::TurnStarted { turn: 2, .. })));
    assert!(matches!(observed.last(), Some(Event::TurnFinished { .. })));
}

#[test]
fn a_session_of_another_program_is_refused() {
    let mut harness = Harness::new(SOURCES);
    harness.session.program_hash = "0000000000000000".to_string();
    let before = harness.session.clone();
    match harness.runtime.run_turn(&mut harness.session, "hi") {
        Ok(_) => panic!("a session of another program must be refused"),
        Err(error) => assert!(error.to_string().contains("another version of the program"), "{error}"),
    }
    assert_eq!(harness.session, before);
}

#[test]
fn a_directive_from_a_tool_the_model_called_moves_the_session_for_the_next_turn() {
    let double = Double::returning(
        json!({ "found": true, "directive": { "goto": "other", "set": { "note": "from the tool" } } }),
    );
    let mut tools = ToolRegistry::default();
    tools.register("lookup", double.clone());
    let mut harness = Harness::with_tools(
        r#"
schema { a: string  note: string }
tool lookup(q: string) { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a tools lookup }
}
flow other "Other" {
  step first { prompt "First of other" collect a }
}
"#,
        tools,
    );
    harness.reply_next(super::harness::Reply {
        text: "Let me look.".to_string(),
        tool_calls: vec![("lookup".to_string(), json!({ "q": "rooms" }))],
        ..super::harness::Reply::default()
    });
    let result = harness.say_with("f", Understood::new().flow("f"));
    // The tool loop joins the post-model bus: the reply is written, so the
    // move takes effect for the next turn and no step of `other` runs now.
    assert_eq!(result.reply, "Let me look.");
    assert_eq!(chain(&result), [("tool:lookup".to_string(), true)]);
    assert_eq!(steps(&result), ["ask_a"]);
    assert_eq!((result.flow.as_deref(), result.step.as_deref()), (Some("other"), Some("first")));
    assert_eq!(harness.data("note"), Some(json!("from the tool")));
    assert_eq!(double.calls().len(), 1);
    assert_eq!(harness.calls_last_turn(), (1, 1));
}

#[test]
fn a_stepped_turn_hands_over_the_models_tool_calls_before_they_run() {
    let double = Double::returning(json!({ "rooms": 3 }));
    let mut tools = ToolRegistry::default();
    tools.register("lookup", double.clone());
    let program = r#"
schema { a: string }
tool lookup(q: string) { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a tools lookup }
}
"#;
    let mut harness = Harness::with_tools(program, tools);
    harness.say_with("f", Understood::new().flow("f"));
    harness.reply_next(super::harness::Reply {
        text: "There are 3 rooms.".to_string(),
        tool_calls: vec![
            ("lookup".to_string(), json!({ "q": "rooms" })),
            ("lookup".to_string(), json!({ "q": "beds" })),
        ],
        ..super::harness::Reply::default()
    });
    let mut turn = match harness.runtime.begin(&mut harness.session, "how many rooms?") {
        Ok(turn) => turn,
        Err(error) => panic!("{error}"),
    };
    let mut asked = Vec::new();
    let result = loop {
        match turn.step() {
            Ok(Progress::Continue(_)) => {}
            Ok(Progress::ToolCalls(calls)) => {
                // Handed over before they run: the tool has not been called
                // for this round yet.
                assert_eq!(double.calls().len(), asked.len(), "{calls:?}");
                asked.extend(calls.into_iter().map(|call| (call.name, call.arguments.ok())));
            }
            Ok(Progress::Finished { reason, result }) => {
                assert_eq!(reason, result.stopped_reason);
                break *result;
            }
            Err(error) => panic!("{error}"),
        }
    };
    assert_eq!(
        asked,
        [("lookup".to_string(), Some(json!({ "q": "rooms" }))), ("lookup".to_string(), Some(json!({ "q": "beds" })))]
    );
    assert_eq!(double.calls().len(), 2, "each round ran at the step after it was handed over");
    assert_eq!(result.reply, "There are 3 rooms.");
    let tool_calls = result.events.iter().filter(|event| matches!(event, Event::ToolCalled { ok: true, .. })).count();
    assert_eq!(tool_calls, 2);
    // One reply, counted once, after the tools it called.
    let last_tool = result.events.iter().rposition(|event| matches!(event, Event::ToolCalled { .. }));
    let reply_call =
        result.events.iter().position(|event| matches!(event, Event::ModelCalled { purpose: Purpose::Respond, .. }));
    assert!(last_tool < reply_call && reply_call.is_some(), "{:?}", result.events);
}
