//! Signals (LANGUAGE.md section 7) in both phases, the pending directive a
//! post-phase match arms, and each `behavior`, on a frozen clock moved by
//! hand.

use super::harness::{Harness, Understood, chain, directive_from, position, steps};
use flowc::runtime::events::{Event, StopReason};
use serde_json::json;

const SIGNALS: &str = r#"
schema { x: string  reason: string  count: int }
signal wants_human {
  when "the user asks for a human"
  behavior once
  then goto handoff with { reason: "asked" }
}
signal angry {
  when "the user is angry"
  phase post
  behavior once
  then goto handoff with { reason: "angry" }
}
signal late_post {
  when "the user gave x grudgingly"
  if x is set
  phase post
  then { set reason = "grudging" }
}
signal ping {
  when "the user says ping"
  then { set reason = "ping" }
}
signal nudge {
  when "the user dawdles"
  behavior cooldown 10m
  then { set reason = "nudge" }
}
flow booking "Book" {
  when "the user wants to book"
  step ask_x { prompt "X?" collect x }
  step ask_count { prompt "How many?" collect count }
}
flow handoff "Handoff" {
  step connect { say "Connecting you to a person." }
}
"#;

fn asked_signals(harness: &Harness) -> Vec<String> {
    harness.last_understand().signals.iter().map(|question| question.id.clone()).collect()
}

#[test]
fn a_pre_phase_signal_position_overrides_routing() {
    let mut harness = Harness::new(SIGNALS);
    let result = harness.say_with(
        "I want to book, but let me talk to a human",
        Understood::new().flow("booking").signal("wants_human", true),
    );
    assert_eq!(steps(&result), ["connect"]);
    assert_eq!(result.reply, "Connecting you to a person.");
    assert_eq!(harness.data("reason"), Some(json!("asked")));
    assert_eq!(chain(&result), [("signal:wants_human".to_string(), true)]);
    assert_eq!(
        directive_from(&result, "signal:wants_human"),
        json!({ "goto": { "flow": "handoff", "data": { "reason": "asked" } } })
    );
    assert!(
        !result.events.iter().any(|event| matches!(event, Event::Routed { .. })),
        "routing was overridden: {:#?}",
        result.events
    );
    assert_eq!(harness.calls_last_turn(), (1, 0));
}

#[test]
fn a_once_signal_fires_once_per_session_and_is_not_asked_again() {
    let mut harness = Harness::new(SIGNALS);
    assert!(harness.session.signals.is_empty());
    harness.say_with("human please", Understood::new().signal("wants_human", true));
    let record = harness.session.signals.get("wants_human").cloned().unwrap_or_default();
    assert_eq!(record.fired, 1);
    assert_eq!(record.last_fired_at.as_deref(), Some("2026-01-05T10:00:00Z"));
    harness.say_with("book", Understood::new().flow("booking"));
    assert!(!asked_signals(&harness).contains(&"wants_human".to_string()), "{:?}", asked_signals(&harness));
    assert!(asked_signals(&harness).contains(&"ping".to_string()));
}

#[test]
fn an_always_signal_fires_on_every_matching_turn() {
    let mut harness = Harness::new(SIGNALS);
    harness.say_with("book", Understood::new().flow("booking"));
    for _ in 0..2 {
        harness.session.data.remove("reason");
        harness.say_with("ping", Understood::new().signal("ping", true));
        assert_eq!(harness.data("reason"), Some(json!("ping")));
        assert!(asked_signals(&harness).contains(&"ping".to_string()));
    }
    assert_eq!(harness.session.signals.get("ping").map(|record| record.fired), Some(2));
}

#[test]
fn a_cooldown_signal_is_not_asked_until_the_cooldown_has_passed() {
    let mut harness = Harness::new(SIGNALS);
    harness.say_with("book", Understood::new().flow("booking"));
    harness.say_with("uh", Understood::new().signal("nudge", true));
    assert_eq!(harness.session.signals.get("nudge").map(|record| record.fired), Some(1));

    harness.set_now("2026-01-05T10:05:00Z");
    harness.say("uh");
    assert!(!asked_signals(&harness).contains(&"nudge".to_string()), "5 minutes later it is cooling down");

    harness.set_now("2026-01-05T10:10:00Z");
    harness.say_with("uh", Understood::new().signal("nudge", true));
    assert!(asked_signals(&harness).contains(&"nudge".to_string()), "10 minutes later it is open again");
    let record = harness.session.signals.get("nudge").cloned().unwrap_or_default();
    assert_eq!(record.fired, 2);
    assert_eq!(record.last_fired_at.as_deref(), Some("2026-01-05T10:10:00Z"));
}

/// The understand call asked the post-phase signal and its answer was set
/// aside: the signal is not asked again in a call of its own (the weak
/// local model, asked again, said `frustrated` to an email address).
#[test]
fn a_signal_whose_answer_was_set_aside_is_not_asked_again_after_the_reply() {
    let mut harness = Harness::new(SIGNALS);
    harness.say_with("book", Understood::new().flow("booking"));
    harness.script().invalid_answers = 1;
    harness.remember_counts();
    let turn = harness.say("this is useless");
    assert!(asked_signals(&harness).contains(&"angry".to_string()), "asked in the understand call");
    assert_eq!(harness.calls_last_turn(), (1, 1), "the set-aside call and the reply, no post-phase call");
    assert!(harness.session.pending.is_none(), "nothing armed");
    assert_eq!(position(&turn), (Some("booking"), Some("ask_x")));
}

#[test]
fn a_post_phase_signal_arms_a_pending_directive_applied_first_next_turn_without_understanding() {
    let mut harness = Harness::new(SIGNALS);
    harness.say_with("book", Understood::new().flow("booking"));
    let angry = harness.say_with("this is useless", Understood::new().signal("angry", true));
    // The turn itself goes on as if nothing matched: the step asks again.
    assert_eq!(position(&angry), (Some("booking"), Some("ask_x")));
    assert_eq!(angry.reply, "reply: X?");
    assert_eq!(chain(&angry), [("signal:angry".to_string(), false)], "armed, not applied yet");
    assert!(harness.session.pending.is_some());
    // The post signal was asked in the understand call: no extra call.
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert!(asked_signals(&harness).contains(&"angry".to_string()));

    let next = harness.say("hello?");
    assert_eq!(harness.calls_last_turn(), (0, 0), "pending turn: no understanding, and the say needs no reply");
    assert_eq!(next.llm_calls, 0);
    assert_eq!(chain(&next), [("pending".to_string(), true)]);
    assert!(
        next.events.iter().any(|event| matches!(event, Event::PendingApplied { source } if source == "signal:angry"))
    );
    assert_eq!(steps(&next), ["connect"]);
    assert_eq!(harness.data("reason"), Some(json!("angry")));
    assert_eq!(next.stopped_reason, StopReason::FlowComplete);
    assert!(harness.session.pending.is_none());
}

#[test]
fn a_post_phase_signal_whose_guard_opens_during_the_turn_is_asked_in_one_more_call() {
    let mut harness = Harness::new(SIGNALS);
    harness.say_with("book", Understood::new().flow("booking"));
    assert!(!asked_signals(&harness).contains(&"late_post".to_string()), "x is not set yet");
    harness.understand_next(Understood::new().field("x", json!("fine, X1")));
    harness.understand_next(Understood::new().signal("late_post", true));
    let result = harness.say("fine, X1");
    assert_eq!(harness.calls_last_turn(), (2, 1), "understand, reply, then the post-signal call");
    assert_eq!(result.llm_calls, 3);
    let questions: Vec<String> = harness.last_understand().signals.iter().map(|question| question.id.clone()).collect();
    assert_eq!(questions, ["late_post"]);
    assert!(result.events.iter().any(|event| matches!(
        event,
        Event::ModelCalled { purpose: flowc::runtime::events::Purpose::PostSignals, .. }
    )));
    assert_eq!(chain(&result), [("signal:late_post".to_string(), false)]);
    let next = harness.say("3");
    // The pending directive skips understanding (step 2), but step 6 still
    // asks the post-phase signals that are open: one call, for them alone.
    assert_eq!(harness.calls_last_turn(), (1, 1));
    let post_call = harness.last_understand();
    assert!(post_call.fields.is_empty());
    let asked: Vec<&str> = post_call.signals.iter().map(|question| question.id.as_str()).collect();
    assert_eq!(asked, ["angry", "late_post"]);
    assert!(next.events.iter().any(|event| matches!(
        event,
        Event::ModelCalled { purpose: flowc::runtime::events::Purpose::PostSignals, .. }
    )));
    assert_eq!(harness.data("reason"), Some(json!("grudging")));
    assert_eq!(chain(&next), [("pending".to_string(), true)]);
    // Nothing was extracted from this message: the step asks again.
    assert_eq!(harness.data("count"), None);
    assert_eq!(position(&next), (Some("booking"), Some("ask_count")));
}

#[test]
fn a_both_phase_signal_fires_once_for_one_message() {
    let mut harness = Harness::new(
        r#"
schema { x: string  reason: string }
signal help {
  when "the user needs help"
  phase both
  then goto handoff with { reason: "help" }
}
flow booking "Book" {
  when "the user wants to book"
  step ask_x { prompt "X?" collect x }
}
flow handoff "Handoff" {
  step connect { say "Connecting you to a person." }
}
"#,
    );
    harness.say_with("book", Understood::new().flow("booking"));
    let matched = harness.say_with("help", Understood::new().signal("help", true));
    assert_eq!(steps(&matched), ["connect"], "the pre half moves the conversation now");
    assert_eq!(chain(&matched), [("signal:help".to_string(), true)]);
    // The post half has the same message and the same answer: it must not
    // fire a second time and drag the next turn to the handoff again.
    assert!(harness.session.pending.is_none(), "{:?}", harness.session.pending);
    assert_eq!(harness.session.signals.get("help").map(|record| record.fired), Some(1));
    let next = harness.say_with("book", Understood::new().flow("booking"));
    assert_eq!(position(&next), (Some("booking"), Some("ask_x")));
}

const EXTRACTING: &str = r#"
schema { x: string  reason: string  mood: string }
signal complaint {
  when "the user complains"
  phase post
  extract reason
  then { set mood = "complaining" }
}
signal late {
  when "the user mentions a deadline"
  if x is set
  phase post
  extract reason
  then { set mood = "hurried" }
}
flow booking "Book" {
  when "the user wants to book"
  step ask_x { prompt "X?" collect x }
  step ask_more { prompt "More?" collect mood }
}
"#;

#[test]
fn a_post_phase_signal_answered_in_the_understand_call_extracts_its_fields() {
    let mut harness = Harness::new(EXTRACTING);
    harness.say_with("book", Understood::new().flow("booking"));
    let asked: Vec<String> = harness.last_understand().fields.iter().map(|field| field.name.clone()).collect();
    assert!(asked.contains(&"reason".to_string()), "the signal's extract is asked with it: {asked:?}");
    harness.say_with(
        "this is far too slow",
        Understood::new().signal("complaint", true).field("reason", json!("too slow")),
    );
    assert_eq!(harness.data("reason"), Some(json!("too slow")));
    assert!(harness.session.pending.is_some());
}

#[test]
fn a_post_phase_signal_that_does_not_match_extracts_nothing() {
    let mut harness = Harness::new(EXTRACTING);
    harness.say_with("book", Understood::new().flow("booking"));
    // x is answered, which opens `late`: it is asked in a call of its own,
    // and answers no.
    harness.understand_next(Understood::new().field("x", json!("X1")));
    harness.understand_next(Understood::new().signal("late", false).field("reason", json!("made up")));
    harness.say("X1");
    assert_eq!(harness.calls_last_turn(), (2, 1));
    assert_eq!(harness.data("x"), Some(json!("X1")));
    assert_eq!(harness.data("reason"), None, "`extract` applies only when the signal matches");
    assert!(harness.session.pending.is_none());
}

/// Issue 20: a pre-phase signal whose `when` is a greeting fires on the
/// offline model when the user says just that; greetings were stop words,
/// so no term of "hello" could match it. A confirmation still needs an
/// unqualified yes: a greeting is not one.
#[test]
fn a_greeting_fires_a_greeting_signal_offline_and_is_no_yes() {
    const GREETING: &str = r#"
schema { hotel: string examples "Grand Hotel"  confirmed: bool  greeted: bool }
signal hello {
  when "the user says hello"
  then { set greeted = true }
}
flow booking "Book a hotel room" {
  when "the user wants to book a hotel room"
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step confirm { prompt "Shall I book {{hotel}}?" collect confirmed }
}
"#;
    let program = super::harness::program(GREETING);
    let mut runtime = flowc::runtime::engine::Runtime::new(
        program,
        Box::new(flowc::llm::offline::Offline::new()),
        flowc::runtime::engine::RuntimeOptions {
            tool_env: super::harness::tool_env_at(super::harness::NOW),
            tools: Default::default(),
            limits: Default::default(),
        },
    );
    let mut greeting = runtime.new_session("greeting");
    let mut booking = runtime.new_session("booking");
    let mut say = |session: &mut flowc::runtime::session::Session, message: &str| {
        runtime.run_turn(session, message).unwrap_or_else(|error| panic!("{message}: {error}"))
    };
    let hello = say(&mut greeting, "hello");
    assert_eq!(greeting.data.get("greeted"), Some(&json!(true)), "the greeting signal fired: {:?}", hello.events);

    say(&mut booking, "I want to book the Grand Hotel");
    let hello = say(&mut booking, "hello");
    assert_eq!(position(&hello), (Some("booking"), Some("confirm")), "a greeting does not confirm");
    assert_eq!(booking.data.get("confirmed"), None);
    assert_eq!(booking.data.get("greeted"), Some(&json!(true)));
    let yes = say(&mut booking, "yes");
    assert_eq!(booking.data.get("confirmed"), Some(&json!(true)), "{}", yes.reply);
}
