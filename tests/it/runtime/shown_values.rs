//! A reply keeps the values its step's prompt shows: at a step that asks
//! the user about data ("Shall I book {{hotel}} on {{date}} for {{guests}}
//! guests?"), a reply that leaves one out could have the user answer a
//! question about other data than code holds (the weak real model wrote
//! "Shall I book Grand Hotel on 5 guests?" while the data held 2). Such a
//! reply is replaced by the step's prompt as code renders it, at no call;
//! a fused reply that leaves one out is set aside for the reply call.

use super::harness::{Harness, Reply, Understood};
use super::steps::BOOKING;
use flowc::runtime::events::{Event, TurnResult};
use serde_json::json;

const CONFIRM: &str = "Shall I book Grand Hotel on 2026-12-04 for 2 guests?";

fn omitted(result: &TurnResult) -> Vec<(String, String, String)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::ReplyOmits { field, value, text } => Some((field.clone(), value.clone(), text.clone())),
            _ => None,
        })
        .collect()
}

/// The booking at its confirm step.
fn at_confirm() -> Harness {
    let mut harness = Harness::new(BOOKING);
    harness.say_with(
        "book the Grand Hotel for 2 guests",
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("guests", json!(2)),
    );
    // Code reads the ISO date itself.
    harness.reply_next(Reply::text(CONFIRM));
    let result = harness.say_with("2026-12-04", Understood::new());
    let asked: Vec<&str> = result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::StepAsked { step, .. } => Some(step.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["confirm"], "{:?}", result.data);
    harness
}

#[test]
fn a_reply_that_leaves_out_a_value_the_prompt_shows_is_replaced_at_no_call() {
    let mut harness = at_confirm();
    // Every token of it is backed (the data holds 2), but the date is
    // gone: the user would confirm a booking without seeing its date.
    harness.reply_next(Reply::text("Shall I book Grand Hotel for 2 guests?"));
    // ("hmm" is no answer: code prefixes that it asks again.)
    let result = harness.say_with("hmm", Understood::new());
    assert!(result.reply.ends_with(&format!("\n{CONFIRM}")), "{}", result.reply);
    assert_eq!(omitted(&result), [("date".to_string(), "2026-12-04".to_string(), CONFIRM.to_string())]);
    assert_eq!(harness.calls_last_turn(), (1, 1), "not asked again: the stand-in says what code holds");
}

#[test]
fn a_reply_that_says_every_shown_value_in_its_own_words_stands() {
    let mut harness = at_confirm();
    let own = "Just to check: the Grand Hotel, December 4th, two guests. Shall I book it?";
    harness.reply_next(Reply::text(own));
    let result = harness.say_with("hmm", Understood::new());
    assert!(result.reply.ends_with(&format!("\n{own}")), "{}", result.reply);
    assert!(omitted(&result).is_empty());
}

#[test]
fn a_fused_reply_that_leaves_a_shown_value_out_is_set_aside_for_the_reply_call() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with(
        "book the Grand Hotel for 2 guests",
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("guests", json!(2)),
    );
    // The date read, the turn stops at confirm, whose reply the model
    // wrote in the understand call without a value of the prompt's.
    harness.reply_next(Reply::text(CONFIRM));
    let result = harness.say_with("2026-12-04", Understood::new().fused("booking.confirm", "Booked! Enjoy your stay."));
    assert_eq!(result.reply, CONFIRM);
    assert_eq!(harness.calls_last_turn(), (1, 1), "the reply call answered");
    let reasons: Vec<String> = result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::FusedReply { used: false, reason, .. } => reason.clone(),
            _ => None,
        })
        .collect();
    assert!(reasons.iter().any(|reason| reason.contains("leaves out `hotel`")), "{reasons:?}");
}
