//! A reply may not state what nobody said (issue 24): a value-like token
//! (an id, a number, a date, an email, an amount) that appears nowhere the
//! model was given. The fused reply is set aside; the ordinary reply is
//! asked for once more, then replaced by the step's prompt; a streamed
//! reply is never shown past the token.

use super::harness::{Double, Harness, Reply, Understood};
use flowc::runtime::events::{ClaimAction, Event, TurnResult};
use flowc::runtime::tools::ToolRegistry;
use serde_json::json;
use std::sync::{Arc, Mutex};

const SUPPORT: &str = r#"
agent Helpdesk { identity "You are the support assistant of Acme Cloud." }
schema {
  email: string "The email address on the customer's account"
  order_id: string "Order number" examples "ORD-1234"
}
flow billing "Billing and refunds" {
  when "the user has a billing question or wants a refund"
  step ask_email { prompt "What is the email address on your account?" collect email }
  step ask_order { prompt "What is the order number (like ORD-1234)?" collect order_id }
}
"#;

const PROMPT: &str = "What is the email address on your account?";
const INVENTED: &str = "Sorry about that! Ticket BILLING-1234 is open. What is the email address on your account?";

fn claims(result: &TurnResult) -> Vec<(String, ClaimAction, Option<String>)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::UnfoundedClaim { claim, action, text } => Some((claim.clone(), *action, text.clone())),
            _ => None,
        })
        .collect()
}

/// Everything the turn streamed, kept for the test to read.
fn streamed(harness: &mut Harness) -> Arc<Mutex<String>> {
    let shown = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&shown);
    harness.runtime.set_stream(Box::new(move |chunk: &str| {
        if let Ok(mut text) = sink.lock() {
            text.push_str(chunk);
        }
    }));
    shown
}

#[test]
fn a_reply_that_invents_a_ticket_number_is_asked_again_then_replaced_and_never_shown() {
    let mut harness = Harness::new(SUPPORT);
    let shown = streamed(&mut harness);
    harness.reply_next(Reply::text(INVENTED));
    harness.reply_next(Reply::text(INVENTED));
    let result = harness.say_with("I was charged twice", Understood::new().flow("billing"));
    assert_eq!(result.reply, PROMPT);
    assert_eq!(harness.calls_last_turn(), (1, 2), "asked once more, not again and again");
    let claim = || "BILLING-1234".to_string();
    assert_eq!(
        claims(&result),
        [(claim(), ClaimAction::AskedAgain, None), (claim(), ClaimAction::Replaced, Some(PROMPT.to_string()))]
    );
    // The reply came in one piece: nothing of it was shown, nor of the
    // second try, held whole; only the stand-in.
    assert_eq!(shown.lock().map(|text| text.clone()).unwrap_or_default(), PROMPT);
    assert_eq!(harness.session.history.last().map(|message| message.text.as_str()), Some(PROMPT));
}

#[test]
fn a_second_try_that_states_nothing_new_answers() {
    let mut harness = Harness::new(SUPPORT);
    let shown = streamed(&mut harness);
    harness.reply_next(Reply::text(INVENTED));
    harness.reply_next(Reply::text("Sorry about that! What is your account's email?"));
    let result = harness.say_with("I was charged twice", Understood::new().flow("billing"));
    assert_eq!(result.reply, "Sorry about that! What is your account's email?");
    assert_eq!(claims(&result), [("BILLING-1234".to_string(), ClaimAction::AskedAgain, None)]);
    let text = shown.lock().map(|text| text.clone()).unwrap_or_default();
    assert_eq!(text, "Sorry about that! What is your account's email?");
}

#[test]
fn a_fused_reply_that_invents_a_ticket_number_is_set_aside() {
    let mut harness = Harness::new(SUPPORT);
    let understood = Understood::new().flow("billing").fused("billing.ask_email", INVENTED);
    let result = harness.say_with("I was charged twice", understood);
    assert_eq!(result.reply, format!("reply: {PROMPT}"), "the reply call answers");
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(claims(&result), [("BILLING-1234".to_string(), ClaimAction::SetAside, None)]);
    let reason = result.events.iter().find_map(|event| match event {
        Event::FusedReply { used: false, reason, .. } => reason.clone(),
        _ => None,
    });
    assert_eq!(reason.as_deref(), Some("the reply states \"BILLING-1234\", which appears nowhere the model was given"));
    // The order number the prompt shows as an example is no invention.
    let mut harness = Harness::new(SUPPORT);
    harness.say_with("I was charged twice", Understood::new().flow("billing"));
    let example = "Thanks! And the order number, like ORD-1234?";
    let understood = Understood::new().field("email", json!("ann@example.com")).fused("billing.ask_order", example);
    let result = harness.say_with("ann@example.com", understood);
    assert_eq!((result.reply.as_str(), claims(&result)), (example, vec![]));
}

#[test]
fn a_booking_id_from_a_tool_result_and_a_date_in_another_format_are_no_inventions() {
    let double = Double::returning(json!({ "booking_id": "GH-28745CD2" }));
    let mut tools = ToolRegistry::default();
    tools.register("book_hotel", double.clone());
    let program = r#"
schema { hotel: string  date: date  ok: bool }
tool book_hotel(hotel: string) { builtin echo }
flow booking "Book" {
  when "the user wants to book a hotel room"
  step ask { prompt "Which hotel, and when?" collect hotel, date }
  step confirm { prompt "Shall I book {{hotel}} on {{date}}?" collect ok tools book_hotel }
}
"#;
    let mut harness = Harness::with_tools(program, tools);
    let understood =
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("date", json!("2026-12-04"));
    harness.say_with("Book the Grand Hotel on 2026-12-04", understood);
    harness.reply_next(Reply {
        text: "Booked the Grand Hotel for 4 December! Your confirmation number is GH-28745CD2.".to_string(),
        tool_calls: vec![("book_hotel".to_string(), json!({ "hotel": "Grand Hotel" }))],
        ..Reply::default()
    });
    let result = harness.say("just do what you must");
    assert_eq!(claims(&result), [], "{:#?}", result.events);
    assert!(result.reply.contains("GH-28745CD2"), "{}", result.reply);
    assert_eq!(double.calls().len(), 1, "the id came from the tool's result");
}
