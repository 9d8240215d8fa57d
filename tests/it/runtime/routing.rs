//! Routing (LANGUAGE.md section 3) and pre-extraction: which flow a message
//! enters, when an active flow is displaced, and which fields the
//! understand call is asked to extract.

use super::harness::{Harness, Understood, entered_flows, position, steps};
use flowc::runtime::events::{Event, StopReason};
use serde_json::json;

const FLOWS: &str = r#"
schema {
  x: string
  y: string
  n: int
}
context { tier: enum(basic, gold) }

flow alpha "Alpha" {
  when "the user talks about alpha"
  step ask_x { prompt "Give x" collect x }
  step ask_n { prompt "Give n" collect n }
}
flow beta "Beta" {
  when "the user talks about beta"
  step ask_y { prompt "Give y" collect y }
}
flow gold_only "Gold" {
  if context.tier == "gold"
  step hello { say "Hello, gold member." }
}
flow fallback "Fallback" {
  default
  step help { say "I can help with alpha or beta." }
}
"#;

fn routed(result: &flowc::runtime::events::TurnResult) -> Vec<(String, &'static str)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::Routed { flow, reason } => Some((flow.clone(), *reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_when_match_displaces_the_active_flow_only_when_the_message_answers_nothing_it_asks() {
    let mut harness = Harness::new(FLOWS);
    let first = harness.say_with("alpha", Understood::new().flow("alpha"));
    assert_eq!(position(&first), (Some("alpha"), Some("ask_x")));

    // The model also saw beta's `when`, but the message answers `x`: the
    // conversation stays in alpha and moves on.
    let answered = harness.say_with("beta-ish value", Understood::new().flow("beta").field("x", json!("value")));
    assert_eq!(position(&answered), (Some("alpha"), Some("ask_n")));
    assert_eq!(harness.data("x"), Some(json!("value")));
    assert!(routed(&answered).is_empty(), "{:?}", routed(&answered));

    // Answering nothing alpha asks, the beta match takes over.
    let displaced = harness.say_with("let's do beta", Understood::new().flow("beta"));
    assert_eq!(position(&displaced), (Some("beta"), Some("ask_y")));
    assert_eq!(routed(&displaced), vec![("beta".to_string(), "when")]);
    assert!(
        displaced.events.iter().any(|event| matches!(event, Event::FlowLeft { flow, .. } if flow == "alpha")),
        "{:#?}",
        displaced.events
    );
}

#[test]
fn the_active_flow_is_offered_to_the_model_only_as_context_not_as_a_choice() {
    let mut harness = Harness::new(FLOWS);
    harness.say_with("alpha", Understood::new().flow("alpha"));
    harness.say("hmm");
    let request = harness.last_understand();
    assert_eq!(request.active_flow.as_deref(), Some("alpha"));
    let offered: Vec<&str> = request.flows.iter().map(|flow| flow.name.as_str()).collect();
    assert_eq!(offered, ["beta"], "only when-flows other than the active one are choices");
}

#[test]
fn an_if_only_flow_is_entered_when_its_guard_holds_and_no_when_flow_matches() {
    let mut harness = Harness::new(FLOWS);
    harness.session.context.insert("tier".into(), json!("gold"));
    let result = harness.say("hi");
    assert_eq!(routed(&result), vec![("gold_only".to_string(), "if")]);
    assert_eq!(result.reply, "Hello, gold member.");
    assert_eq!(steps(&result), ["hello"]);
    assert_eq!(result.stopped_reason, StopReason::FlowComplete);
    assert_eq!(position(&result), (None, None));
}

#[test]
fn a_when_match_beats_an_if_only_flow() {
    let mut harness = Harness::new(FLOWS);
    harness.session.context.insert("tier".into(), json!("gold"));
    let result = harness.say_with("alpha", Understood::new().flow("alpha"));
    assert_eq!(routed(&result), vec![("alpha".to_string(), "when")]);
    assert_eq!(position(&result), (Some("alpha"), Some("ask_x")));
}

#[test]
fn if_only_and_default_flows_never_displace_an_active_flow() {
    let mut harness = Harness::new(FLOWS);
    harness.say_with("alpha", Understood::new().flow("alpha"));
    harness.session.context.insert("tier".into(), json!("gold"));
    let result = harness.say("no idea");
    assert!(routed(&result).is_empty());
    assert_eq!(position(&result), (Some("alpha"), Some("ask_x")));
    assert!(
        result.events.iter().any(|event| matches!(event, Event::StepAsked { step, ask: 2, .. } if step == "ask_x")),
        "the step asks again: {:#?}",
        result.events
    );
}

#[test]
fn with_no_match_the_default_flow_is_entered() {
    let mut harness = Harness::new(FLOWS);
    let result = harness.say("what's the weather?");
    assert_eq!(routed(&result), vec![("fallback".to_string(), "default")]);
    assert_eq!(entered_flows(&result), ["fallback"]);
    assert_eq!(result.reply, "I can help with alpha or beta.");
    // The understand call routes; the say needs no model.
    assert_eq!(harness.calls_last_turn(), (1, 0));
    assert_eq!(result.llm_calls, 1);
}

#[test]
fn with_no_match_and_no_default_the_agent_replies_with_no_flow() {
    let mut harness = Harness::new(
        r#"
agent Bot { identity "You are Bot." rule "Be brief." }
schema { x: string }
flow alpha "Alpha" {
  when "the user talks about alpha"
  step ask_x { prompt "Give x" collect x }
}
"#,
    );
    let result = harness.say("what's the weather?");
    assert_eq!(position(&result), (None, None));
    assert!(result.executed_steps.is_empty());
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(result.llm_calls, 2);
    let request = harness.last_respond();
    assert_eq!(request.identity.as_deref(), Some("You are Bot."));
    assert_eq!(request.rules, ["Be brief."]);
    assert!(request.instructions.is_empty(), "no step gives an instruction");
    assert_eq!(result.reply, "reply: ");
    assert_eq!(result.to_json_line()["flow"], json!(null));
}

#[test]
fn flow_requires_are_pre_extracted_from_the_first_message() {
    let mut harness = Harness::new(
        r#"
schema {
  hotel: string
  date: date
  guests: int 1..10
  note: string
}
flow booking "Book" {
  when "the user wants to book"
  requires hotel, date, guests
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step ask_date { prompt "Which date?" collect date }
  step ask_guests { prompt "How many?" collect guests }
}
"#,
    );
    let result = harness.say_with(
        "book the Ritz for 2",
        Understood::new()
            .flow("booking")
            .field("hotel", json!("Ritz"))
            .field("guests", json!(2))
            // Not asked: the runtime ignores it.
            .field("note", json!("sneaky")),
    );
    let request = harness.last_understand();
    let asked: Vec<&str> = request.fields.iter().map(|field| field.name.as_str()).collect();
    assert_eq!(asked, ["hotel", "date", "guests"], "the candidate flow's requires, in schema order");
    assert_eq!(harness.data("hotel"), Some(json!("Ritz")));
    assert_eq!(harness.data("guests"), Some(json!(2)));
    assert_eq!(harness.data("note"), None);
    // ask_hotel is answered, ask_date asks; ask_guests waits its turn.
    assert_eq!(steps(&result), ["ask_hotel", "ask_date"]);
    assert_eq!(position(&result), (Some("booking"), Some("ask_date")));

    let next = harness.say_with("2026-12-04", Understood::new().field("date", json!("2026-12-04")));
    // guests was pre-extracted, so ask_guests runs in the batch and the flow completes.
    assert_eq!(steps(&next), ["ask_date", "ask_guests"]);
    assert_eq!(next.stopped_reason, StopReason::FlowComplete);
}
