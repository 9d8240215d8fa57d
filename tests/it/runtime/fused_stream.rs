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

/// A flow whose first step carries `hooks`; the second offers a tool.
fn with_hooks(hooks: &str) -> String {
    format!(
        r#"
schema {{ a: string  b: string }}
tool lookup(q: string) {{ builtin echo }}
flow f "F" {{
  when "the user wants f"
  step ask_a {{ prompt "A?" collect a {hooks} }}
  step ask_b {{ prompt "B?" collect b tools lookup }}
}}
"#
    )
}

/// The turn enters `f` and stops at `ask_a` with the model's fused reply
/// for it: (the result, the calls made, replies dropped unread).
fn at_ask_a(hooks: &str) -> (TurnResult, (usize, usize), usize) {
    let (mut harness, _) = streaming(&with_hooks(hooks));
    let result = harness.say_with("I want f", Understood::new().flow("f").fused("f.ask_a", "What is A?"));
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(ask.steps.iter().map(|step| step.id.as_str()).collect::<Vec<_>>(), ["f.ask_a"], "{hooks}");
    let calls = harness.calls_last_turn();
    let cancelled = read_and_cancelled(&harness).1;
    (result, calls, cancelled)
}

#[test]
fn a_directive_that_replaces_the_reply_leaves_the_fused_one_unused() {
    let replaced = Some("a directive replaced the reply".to_string());
    // `halt`: no reply at all, and no reply call.
    let (result, calls, cancelled) = at_ask_a("prepare { emit halt }");
    assert_eq!((fused(&result), calls, cancelled), (vec![(false, replaced.clone())], (1, 0), 1));
    assert_eq!((result.reply.as_str(), result.stopped_reason), ("", StopReason::Halt));
    // A `reply` directive: its text is the reply, with no reply call.
    let (result, calls, cancelled) = at_ask_a(r#"on_enter { emit reply "Here is a reply." }"#);
    assert_eq!((fused(&result), calls, cancelled), (vec![(false, replaced)], (1, 0), 1));
    assert_eq!(result.reply, "Here is a reply.");
}

#[test]
fn a_directive_that_augments_the_reply_or_a_say_beside_the_ask_makes_the_reply_call() {
    let augmented = Some("the step offers tools or the reply was augmented".to_string());
    for hooks in [r#"prepare { emit append_prompt "Be brief." }"#, "prepare { emit inject_tools lookup }"] {
        let (result, calls, cancelled) = at_ask_a(hooks);
        assert_eq!((fused(&result), calls, cancelled), (vec![(false, augmented.clone())], (1, 1), 1), "{hooks}");
        assert_eq!(result.reply, "reply: A?", "{hooks}");
    }
    let (result, calls, cancelled) = at_ask_a(r#"on_enter { say "Welcome." }"#);
    let more = Some("the reply has more to say than the step's prompt".to_string());
    assert_eq!((fused(&result), calls, cancelled), (vec![(false, more)], (1, 1), 1));
    assert_eq!(result.reply, "Welcome.\nreply: A?");
}

/// A step with tools is never offered (the plan's walk stops before it),
/// and a real provider drops a reply for a step not offered (`schema.rs`).
/// Should a reply for it reach the turn all the same, the turn does not
/// use it: the reply call offers the tools.
#[test]
fn a_reply_for_a_step_that_offers_tools_is_not_used() {
    let (mut harness, _) = streaming(&with_hooks(""));
    let result = harness.say_with(
        "I want f, a is 42",
        Understood::new().flow("f").field("a", json!("42")).fused("f.ask_b", "What is B?"),
    );
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(ask.steps.iter().map(|step| step.id.as_str()).collect::<Vec<_>>(), ["f.ask_a"]);
    assert_eq!(result.step.as_deref(), Some("ask_b"));
    assert_eq!(fused(&result), [(false, Some("the step offers tools or the reply was augmented".into()))]);
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(read_and_cancelled(&harness).1, 1);
    let tools: Vec<String> = harness.last_respond().tools.iter().map(|tool| tool.name.clone()).collect();
    assert_eq!(tools, ["lookup"]);
}

/// The answer's `step` named no step offered (a real provider's schema
/// check dropped the reply, `schema.rs`): traced with the reason, and the
/// reply call writes the reply; nothing was repaired.
#[test]
fn a_reply_the_answer_dropped_is_traced_with_its_reason() {
    let mut harness = Harness::new(BOOKING);
    let mut understood = Understood::new().flow("booking");
    understood.0.reply_dropped = Some("unknown step `booking.pay` (choose one of `booking.ask_hotel` or null)".into());
    let result = harness.say_with("I'd like to book a room", understood);
    assert_eq!(
        fused(&result),
        [(
            false,
            Some(
                "the answer's reply was dropped: unknown step `booking.pay` (choose one of `booking.ask_hotel` or null)"
                    .into()
            )
        )]
    );
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(result.llm_calls, 2, "the understand call and the reply call, no repair");
}

#[test]
fn a_reply_held_whole_beside_a_rejected_value_it_does_not_mention_is_shown_once() {
    let (mut harness, sink) = streaming(BOOKING);
    harness.say_with("I'd like to book a room", Understood::new().flow("booking"));
    shown(&sink);
    // The model reads the hotel and invents a date citing the schema:
    // code rejects the date, so the reply is read whole before it shows.
    let result = harness.say_with(
        "The Grand Hotel, please",
        Understood::new()
            .cited("hotel", json!("Grand Hotel"), "Grand Hotel")
            .cited("date", json!("2026-06-03"), "YYYY-MM-DD")
            .fused("booking.ask_date", "Lovely choice. For which date?"),
    );
    assert_eq!(harness.data("date"), None);
    assert_eq!(result.reply, "Lovely choice. For which date?");
    assert_eq!(shown(&sink), ["Lovely choice. For which date?"], "held whole, shown once");
    assert_eq!(fused(&result), [(true, None)]);
    assert_eq!(harness.calls_last_turn(), (1, 0));
    assert_eq!(
        read_and_cancelled(&harness),
        (vec!["Lovely ".into(), "choice. ".into(), "For ".into(), "which ".into(), "date?".into()], 0)
    );
}
