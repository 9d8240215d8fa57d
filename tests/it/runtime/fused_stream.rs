//! The fused reply streamed (issue 24): the understand call hands over its
//! extraction first and the reply after it, a word at a time. A usable
//! reply is shown as it arrives, one the turn cannot use is dropped (the
//! call cancelled) before the reply call, one that may hold a placeholder
//! is read whole, filled and shown once, and one set aside after part of
//! it was shown is followed by the reply call's. And whether streamed or
//! not, the reply is never used where the turn's step offers tools or a
//! directive or a `say` shapes the reply.

use super::harness::{Harness, Reply, Understood};
use flowc::llm::Usage;
use flowc::runtime::events::{ClaimAction, Event, StopReason, TurnResult};
use serde_json::json;
use std::sync::{Arc, Mutex};

const BOOKING: &str = r#"
agent A { identity "You are a concierge." }
schema {
  hotel: string examples "Grand Hotel", "Ritz Paris"
  date: date
  guests: int 1..10
  confirmed: bool
}
flow booking "Book a hotel room" {
  when "the user wants to book a hotel room"
  requires hotel, date, guests
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step ask_date { prompt "For which date?" collect date }
  step ask_guests { prompt "How many guests?" collect guests skip_if guests is set }
  step confirm {
    prompt "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"
    collect confirmed
  }
}
"#;

/// The tokens each streamed reply reports after its extraction.
const LATE: Usage = Usage { calls: 0, prompt: 0, completion: 11, cached: 0, estimated: true };

/// A harness whose model streams its fused replies, and the pieces the
/// turn's stream sink receives.
fn streaming(source: &str) -> (Harness, Arc<Mutex<Vec<String>>>) {
    let mut harness = Harness::new(source);
    {
        let mut script = harness.script();
        script.stream_fused = true;
        script.fused_tokens = LATE;
    }
    let shown = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&shown);
    harness.runtime.set_stream(Box::new(move |piece: &str| {
        if let Ok(mut pieces) = sink.lock() {
            pieces.push(piece.to_string());
        }
    }));
    (harness, shown)
}

/// What the sink received since the last call, emptied.
fn shown(pieces: &Mutex<Vec<String>>) -> Vec<String> {
    pieces.lock().map(|mut pieces| std::mem::take(&mut *pieces)).unwrap_or_default()
}

/// What became of the turn's fused reply: (used, reason).
fn fused(result: &TurnResult) -> Vec<(bool, Option<String>)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::FusedReply { used, reason, .. } => Some((*used, reason.clone())),
            _ => None,
        })
        .collect()
}

/// (pieces of the streamed reply read, replies dropped before their end).
fn read_and_cancelled(harness: &Harness) -> (Vec<String>, usize) {
    let script = harness.script();
    (script.fused_read.clone(), script.fused_cancelled)
}

#[test]
fn a_usable_reply_is_shown_as_it_arrives_without_a_reply_call() {
    let (mut harness, sink) = streaming(BOOKING);
    let result = harness.say_with(
        "I'd like to book a room",
        Understood::new().flow("booking").fused("booking.ask_hotel", "Which hotel would you like?"),
    );
    assert_eq!(result.reply, "Which hotel would you like?");
    let pieces = shown(&sink);
    assert_eq!(pieces, ["Which ", "hotel ", "would ", "you ", "like?"]);
    assert_eq!(fused(&result), [(true, None)]);
    assert_eq!(harness.calls_last_turn(), (1, 0), "the understand call only");
    assert_eq!(read_and_cancelled(&harness), (pieces, 0), "read to its end");
    assert_eq!(result.tokens.completion, LATE.completion, "the tokens reported after the extraction count");
}

#[test]
fn an_unusable_reply_is_dropped_unread_and_the_reply_call_made() {
    let (mut harness, sink) = streaming(BOOKING);
    harness.reply_next(Reply {
        usage: Usage { calls: 1, prompt: 40, completion: 5, ..Usage::default() },
        ..Reply::text("Which hotel, please?")
    });
    // The model names the date step; the turn stops at the hotel step.
    let result = harness.say_with(
        "I'd like to book a room",
        Understood::new().flow("booking").fused("booking.ask_date", "For which date at the Ritz?"),
    );
    assert_eq!(result.reply, "Which hotel, please?");
    assert_eq!(
        fused(&result),
        [(false, Some("the turn stopped at `booking.ask_hotel`, not at `booking.ask_date` the model named".into()))]
    );
    assert_eq!(read_and_cancelled(&harness), (Vec::new(), 1), "dropped before a piece was read: cancelled");
    assert_eq!(harness.calls_last_turn(), (1, 1), "the reply call");
    assert_eq!(shown(&sink).concat(), "Which hotel, please?", "nothing of the dropped reply was shown");
    // What the dropped call spent after its extraction counts, beside the
    // reply call's tokens.
    assert_eq!(result.tokens.completion, LATE.completion + 5);
    assert_eq!(result.llm_calls, 2);
}

#[test]
fn a_reply_that_may_hold_a_placeholder_is_read_whole_filled_and_shown_once() {
    let (mut harness, sink) = streaming(BOOKING);
    harness.say_with(
        "book the Grand Hotel for 2 guests",
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("guests", json!(2)),
    );
    shown(&sink);
    assert_eq!((harness.data("hotel"), harness.data("guests")), (Some(json!("Grand Hotel")), Some(json!(2))));
    // The prompt offered for confirm holds `{{hotel}}` and `{{guests}}`
    // (the model is still asked for them): the reply is held whole.
    let result = harness.say_with(
        "2026-12-04",
        Understood::new().fused("booking.confirm", "Shall I book {{hotel}} on 2026-12-04 for {{guests}} guests?"),
    );
    assert_eq!(result.reply, "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert_eq!(shown(&sink), ["Shall I book Grand Hotel on 2026-12-04 for 2 guests?"], "shown once, filled");
    assert_eq!(fused(&result), [(true, None)]);
    assert_eq!(harness.calls_last_turn(), (1, 0));
    assert_eq!(read_and_cancelled(&harness).1, 0);
}

#[test]
fn a_reply_held_whole_then_found_unusable_shows_nothing_before_the_reply_call() {
    let (mut harness, sink) = streaming(BOOKING);
    harness.say_with("book the Grand Hotel", Understood::new().flow("booking").field("hotel", json!("Grand Hotel")));
    shown(&sink);
    // The model proposes a date the message does not hold: grounding
    // rejects it, and the reply, held whole, names it.
    let result = harness.say_with(
        "soon please",
        Understood::new()
            .cited("date", json!("2026-06-03"), "YYYY-MM-DD")
            .fused("booking.ask_date", "June 3rd, lovely. Is that the date?"),
    );
    assert_eq!(harness.data("date"), None);
    assert_eq!(result.reply, "reply: For which date?");
    assert_eq!(shown(&sink).concat(), "reply: For which date?", "nothing of the held reply");
    assert_eq!(
        fused(&result),
        [(false, Some("the reply mentions the date 2026-06-03, which code did not accept for `date`".into()))]
    );
    assert_eq!(harness.calls_last_turn(), (1, 1));
}

#[test]
fn a_reply_set_aside_after_part_of_it_was_shown_is_followed_by_the_reply_call() {
    let (mut harness, sink) = streaming(BOOKING);
    harness.reply_next(Reply::text("Which hotel would you like?"));
    // A ticket number nothing backs: shown up to it, never past it.
    let result = harness.say_with(
        "I'd like to book a room",
        Understood::new().flow("booking").fused("booking.ask_hotel", "Sure, ticket BK-4411 is open. Which hotel?"),
    );
    let pieces = shown(&sink);
    // What was shown stays; the reply call's text starts on a line of its own.
    assert_eq!(pieces.concat(), "Sure, ticket \nWhich hotel would you like?");
    assert_eq!(pieces[..2], ["Sure, ", "ticket "], "shown as it came, up to the claim");
    assert_eq!(result.reply, "Which hotel would you like?");
    let claims: Vec<(String, ClaimAction)> = result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::UnfoundedClaim { claim, action, .. } => Some((claim.clone(), *action)),
            _ => None,
        })
        .collect();
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(claims[0].0, "BK-4411");
    let (used, reason) = fused(&result).pop().expect("a fused reply");
    assert!(!used);
    assert!(reason.is_some_and(|reason| reason.contains("BK-4411")));
    assert_eq!(harness.calls_last_turn(), (1, 1), "the reply call follows");
    assert_eq!(read_and_cancelled(&harness).1, 0, "read to its end to be judged");
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
}
