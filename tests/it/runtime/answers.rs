//! Never an empty answer (issue 24): a reply that is empty or only
//! whitespace is asked for once more, then replaced by what the step asked
//! the reply to do; a turn a limit stops before any reply answers with the
//! limit message.

use super::harness::{Harness, Reply, Understood};
use flowc::runtime::events::{EmptyReplyAction, Event, StopReason, TurnResult};

const ASK: &str = r#"
schema { hotel: string }
flow booking {
  when "the user wants to book a hotel room"
  step ask_hotel { prompt "Which hotel would you like?" collect hotel }
}
"#;

fn empty_replies(result: &TurnResult) -> Vec<(EmptyReplyAction, Option<String>)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::EmptyReply { action, text } => Some((*action, text.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn an_empty_reply_is_asked_for_once_more() {
    let mut harness = Harness::new(ASK);
    harness.reply_next(Reply::text(""));
    harness.reply_next(Reply::text("Which hotel, then?"));
    let result = harness.say_with("book a room", Understood::new().flow("booking"));
    assert_eq!(result.reply, "Which hotel, then?");
    assert_eq!(harness.calls_last_turn(), (1, 2));
    assert_eq!(result.llm_calls, 3, "both reply calls count");
    assert_eq!(empty_replies(&result), [(EmptyReplyAction::AskedAgain, None)]);
}

#[test]
fn a_reply_empty_twice_is_replaced_by_the_steps_prompt() {
    let mut harness = Harness::new(ASK);
    harness.reply_next(Reply::text(""));
    harness.reply_next(Reply::text("   \n "));
    let result = harness.say_with("book a room", Understood::new().flow("booking"));
    assert_eq!(result.reply, "Which hotel would you like?");
    assert_eq!(harness.calls_last_turn(), (1, 2), "asked once more, not again and again");
    assert_eq!(
        empty_replies(&result),
        [
            (EmptyReplyAction::AskedAgain, None),
            (EmptyReplyAction::Replaced, Some("Which hotel would you like?".to_string()))
        ]
    );
    assert_eq!(
        harness.session.history.last().map(|message| message.text.as_str()),
        Some("Which hotel would you like?")
    );
}

#[test]
fn an_empty_fused_reply_is_not_used_and_the_reply_call_answers() {
    let mut harness = Harness::new(ASK);
    let result = harness.say_with("book a room", Understood::new().flow("booking").fused("booking.ask_hotel", "  "));
    assert_eq!(result.reply, "reply: Which hotel would you like?");
    assert_eq!(harness.calls_last_turn(), (1, 1));
}

const LIMITED: &str = r#"
agent A {
  limits { max_turn_tokens 50  message "That took too much; please ask again." }
}
schema { hotel: string }
flow booking {
  when "the user wants to book a hotel room"
  step ask_hotel { prompt "Which hotel?" collect hotel }
}
"#;

#[test]
fn a_turn_a_limit_stops_before_any_reply_answers_with_the_programs_message() {
    let mut harness = Harness::new(LIMITED);
    let result = harness.say_with("book a room", Understood::new().flow("booking").tokens(500));
    assert_eq!(result.stopped_reason, StopReason::TokenLimit);
    assert_eq!(result.reply, "That took too much; please ask again.");
    assert_eq!(
        empty_replies(&result),
        [(EmptyReplyAction::LimitMessage, Some("That took too much; please ask again.".to_string()))]
    );
}

#[test]
fn without_a_message_of_its_own_the_limit_answers_with_the_default() {
    let mut harness = Harness::new(&LIMITED.replace(r#"  message "That took too much; please ask again.""#, ""));
    let result = harness.say_with("book a room", Understood::new().flow("booking").tokens(500));
    assert_eq!(result.stopped_reason, StopReason::TokenLimit);
    assert_eq!(result.reply, "Sorry, I had to stop before I could answer that. Please try again.");
}
