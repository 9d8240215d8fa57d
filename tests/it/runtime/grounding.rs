//! Grounded understanding through the library API: the model proposes,
//! code checks each proposal against the user's message before anything
//! is written; confirmations come only from the step that asks for them;
//! code reads patterns, ISO dates and verbatim enum values first;
//! post-phase signals asked after the reply see it.

use super::harness::{Harness, Understood, steps};
use flowc::runtime::events::{Event, Purpose, TurnResult};
use serde_json::{Value, json};

const BOOKING: &str = r#"
schema { hotel: string  date: date  guests: int  confirmed: bool  email: string pattern "^[^@ ]+@[^@ ]+$" }
flow booking "Book" {
  when "the user wants to book a hotel room"
  requires hotel, date, guests
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step ask_date { prompt "For which date?" collect date }
  step ask_guests { prompt "How many guests?" collect guests }
  step confirm {
    prompt "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"
    collect confirmed
    branch {
      if confirmed == true -> book
      when "the user wants to change the date" -> { set date = null, confirmed = null  goto_step ask_date }
      else -> cancelled
    }
  }
  step book { say "Booked {{hotel}}." next end }
  step cancelled { say "Nothing was booked." }
}
"#;

/// (kind, name, proposed value) of each `ungrounded` event of a turn.
fn ungrounded(result: &TurnResult) -> Vec<(&'static str, String, Value)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::Ungrounded { kind, name, value, .. } => Some((*kind, name.clone(), value.clone())),
            _ => None,
        })
        .collect()
}

fn asked_fields(harness: &Harness) -> Vec<String> {
    harness.last_understand().fields.iter().map(|field| field.name.clone()).collect()
}

/// The weak model's second turn against the real local server: it invents
/// a hotel, today's date, 3 guests and a yes, none of them said.
#[test]
fn invented_values_are_not_written_and_nothing_is_booked_before_yes() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("Hi, I'd like to book a hotel room", Understood::new().flow("booking"));
    let invented = Understood::new()
        .cited("hotel", json!("overlook"), "overlook")
        .cited("date", json!("2026-01-05"), "The Grand Hotel")
        .uncited("guests", json!(3));
    let second = harness.say_with("The Grand Hotel, please", invented);
    assert_eq!(
        ungrounded(&second),
        [
            ("field", "date".to_string(), json!("2026-01-05")),
            ("field", "guests".to_string(), json!(3)),
            ("field", "hotel".to_string(), json!("overlook")),
        ]
    );
    assert_eq!(harness.data("hotel"), None);
    assert_eq!(second.step.as_deref(), Some("ask_hotel"), "the step asks again");
    assert!(!asked_fields(&harness).contains(&"confirmed".to_string()), "consent is not asked ahead");

    harness.say_with("The Grand Hotel, please", Understood::new().cited("hotel", json!("Grand Hotel"), "Grand Hotel"));
    harness.say("2026-12-04");
    let guests = harness.say_with("2 guests", Understood::new().cited("guests", json!(2), "2"));
    assert_eq!(guests.step.as_deref(), Some("confirm"));
    let yes = harness.say_with("yes", Understood::new().field("confirmed", json!(true)));
    assert_eq!(steps(&yes), ["confirm", "book"]);
}

#[test]
fn a_yes_without_evidence_in_the_message_counts_as_no() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("Book the Grand Hotel", Understood::new().flow("booking").field("hotel", json!("Grand Hotel")));
    harness.say("2026-12-04");
    harness.say_with("two", Understood::new().field("guests", json!(2)));
    let changed = harness.say_with(
        "no",
        Understood::new().field("confirmed", json!(false)).cited_condition("booking.confirm#2", "a different date"),
    );
    assert_eq!(ungrounded(&changed), [("condition", "booking.confirm#2".to_string(), json!(true))]);
    assert_eq!(steps(&changed), ["confirm", "cancelled"], "the change of date was not said");
}

#[test]
fn a_confirmation_is_only_read_at_its_step() {
    let mut harness = Harness::new(BOOKING);
    let everything = Understood::new()
        .flow("booking")
        .field("hotel", json!("Grand Hotel"))
        .cited("guests", json!(2), "2 guests")
        .field("confirmed", json!(true));
    let first = harness.say_with("Book the Grand Hotel for 2 guests on 2026-12-04, yes go ahead", everything);
    assert!(!asked_fields(&harness).contains(&"confirmed".to_string()));
    assert_eq!(harness.data("confirmed"), None, "a proposal for a field not asked is never written");
    assert_eq!(first.step.as_deref(), Some("confirm"));
    assert!(!steps(&first).contains(&"book"));
    assert_eq!(first.reply, "reply: Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    // At its own step the plain "yes" is read by code: the answer to the
    // question asked, not consent read ahead.
    let yes = harness.say_with("yes", Understood::new());
    let read_at_its_step = yes.events.iter().any(|event| {
        matches!(event, Event::ReadByCode { field, value, .. } if field == "confirmed" && *value == json!(true))
    });
    assert!(read_at_its_step, "{:?}", yes.events);
    assert_eq!(steps(&yes), ["confirm", "book"]);
}

#[test]
fn code_reads_first_and_the_model_is_asked_only_for_the_rest() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("I want to book a hotel room", Understood::new().flow("booking"));
    harness.say_with("Grand Hotel", Understood::new().field("hotel", json!("Grand Hotel")));
    // The model would say another date: it is not asked for one.
    let date = harness.say_with("2026-12-04", Understood::new().cited("date", json!("2026-12-05"), "2026-12-04"));
    assert!(!asked_fields(&harness).contains(&"date".to_string()));
    assert_eq!(harness.data("date"), Some(json!("2026-12-04")));
    assert!(date.events.iter().any(|event| matches!(
        event,
        Event::ReadByCode { field, value, evidence } if field == "date" && *value == json!("2026-12-04") && evidence == "2026-12-04"
    )));
}

#[test]
fn nothing_left_to_ask_makes_no_understand_call() {
    let mut harness = Harness::new(
        r#"
schema { email: string pattern "^[^@ ]+@[^@ ]+$"  ok: bool }
flow triage "Triage" {
  default
  step ask_email { prompt "Your email?" collect email }
  step done { prompt "Thanks, {{email}}." collect ok }
}
"#,
    );
    harness.say("hello");
    let email = harness.say("my email is ann@example.com");
    assert_eq!(harness.calls_last_turn(), (0, 1), "the email was read by code: no understand call");
    assert_eq!(harness.data("email"), Some(json!("ann@example.com")));
    assert_eq!(email.step.as_deref(), Some("done"));
}

#[test]
fn a_post_phase_signal_asked_after_the_reply_sees_it_and_needs_evidence() {
    let source = r#"
schema { x: string  reason: string }
signal late {
  when "the user gave x grudgingly"
  if x is set
  phase post
  then { set reason = "grudging" }
}
flow f "F" {
  when "the user wants f"
  step ask_x { prompt "X?" collect x }
  step ask_more { prompt "More?" collect reason }
}
"#;
    let mut harness = Harness::new(source);
    harness.say_with("f", Understood::new().flow("f"));
    harness.understand_next(Understood::new().field("x", json!("fine, X1")));
    harness.understand_next(Understood::new().signal_cited("late", "I never said this"));
    let result = harness.say("fine, X1");
    let post_call = harness.last_understand();
    let last = post_call.history.last().map(|message| message.text.clone());
    assert_eq!(last.as_deref(), Some("reply: More?"), "the post call sees the reply");
    assert!(
        result.events.iter().any(|event| matches!(event, Event::ModelCalled { purpose: Purpose::PostSignals, .. }))
    );
    assert_eq!(ungrounded(&result), [("signal", "late".to_string(), json!(true))]);
    assert!(harness.session.pending.is_none(), "an ungrounded yes arms nothing");
}

/// A weak model that rambles past its token limit gives an answer that
/// stays invalid after the repair: the turn goes on as if it had
/// understood nothing, so the step asks again and nothing is written,
/// instead of the turn failing.
#[test]
fn an_unusable_answer_makes_the_step_ask_again() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("Hi, I'd like to book a hotel room", Understood::new().flow("booking"));
    harness.script().invalid_answers = 1;
    harness.remember_counts();
    let turn = harness.say("The Grand Hotel, please");
    assert_eq!(turn.step.as_deref(), Some("ask_hotel"));
    assert_eq!(turn.data.get("hotel"), None);
    assert_eq!(harness.calls_last_turn(), (1, 1), "one understand call (set aside) and the reply asking again");
    let set_aside = turn.events.iter().any(|event| {
        matches!(event, Event::Warning { message } if message.contains("unusable") && message.contains("not valid JSON"))
    });
    assert!(set_aside, "{:?}", turn.events);
    let next = harness.say_with("The Grand Hotel", Understood::new().field("hotel", json!("Grand Hotel")));
    assert_eq!(next.data.get("hotel"), Some(&json!("Grand Hotel")));
}
