//! Data that lives as long as its flow (issue 12): a new run of a flow
//! starts without what earlier runs collected, except `keep` and what this
//! turn's message said; `fresh` clears set fields too. Then conversation
//! `on_error` (a failing tool gets an answer, not a failed turn) and the
//! hooks of every batched step.

use super::harness::{Double, Harness, Understood, steps, warnings};
use flowc::runtime::events::{Event, StopReason};
use flowc::runtime::tools::ToolRegistry;
use serde_json::json;

const BOOKING: &str = r#"
schema { hotel: string  confirmed: bool  booking_id: string  note: string }
tool book(hotel: string) -> { booking_id: string } { builtin echo }
flow booking "Booking" {
  when "the user wants to book"
  KEEP
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step confirm {
    prompt "Book {{hotel}}?"
    requires hotel
    collect confirmed
    branch {
      if confirmed == true -> book
      else -> cancelled
    }
  }
  auto step book {
    call book(hotel) -> booking_id
    set note = "booked"
    say "Booked {{hotel}}."
    next end
  }
  step cancelled { say "Nothing booked." }
}
"#;

fn booking(keep: &str) -> Harness {
    Harness::new(&BOOKING.replace("KEEP", keep))
}

/// Books the Grand Hotel: routed with the hotel, then a yes.
fn book_once(harness: &mut Harness) {
    harness.say_with("book the Grand", Understood::new().flow("booking").field("hotel", json!("Grand")));
    let booked = harness.say_with("yes", Understood::new().field("confirmed", json!(true)));
    assert_eq!(booked.reply, "Booked Grand.");
}

fn cleared(result: &flowc::runtime::events::TurnResult) -> Vec<String> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::FieldsCleared { fields, .. } => Some(fields.join(",")),
            _ => None,
        })
        .collect()
}

#[test]
fn a_second_run_asks_for_its_own_consent() {
    let mut harness = booking("");
    book_once(&mut harness);
    let second = harness.say_with("now the Ritz", Understood::new().flow("booking").field("hotel", json!("Ritz")));
    assert_eq!(second.reply, "reply: Book Ritz?", "asks again instead of booking");
    assert_eq!(second.stopped_reason, StopReason::NeedsInput);
    assert_eq!(harness.data("confirmed"), None);
    assert_eq!(harness.data("hotel"), Some(json!("Ritz")), "said in this message: kept");
    // Set by the flow, not collected: kept unless listed in `fresh`.
    assert_eq!(harness.data("note"), Some(json!("booked")));
    assert_eq!(cleared(&second), ["confirmed"]);
}

#[test]
fn a_new_run_forgets_collected_values_the_message_does_not_repeat() {
    let mut harness = booking("");
    book_once(&mut harness);
    let second = harness.say_with("book again", Understood::new().flow("booking"));
    assert_eq!(second.reply, "reply: Which hotel?");
    assert_eq!(cleared(&second), ["hotel,confirmed"]);
}

#[test]
fn keep_carries_a_collected_field_and_fresh_clears_a_set_one() {
    let mut harness = booking("keep hotel\n  fresh note");
    book_once(&mut harness);
    let second = harness.say_with("book again", Understood::new().flow("booking"));
    assert_eq!(second.reply, "reply: Book Grand?");
    assert_eq!(harness.data("hotel"), Some(json!("Grand")));
    assert_eq!(harness.data("note"), None);
    assert_eq!(cleared(&second), ["confirmed,note"]);
}

#[test]
fn reset_and_goto_start_a_new_run() {
    let mut harness = Harness::new(
        r#"
schema { a: string  b: string }
signal restart {
  when "the user wants to start over"
  then reset
}
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
  step ask_b { prompt "B?" collect b }
}
flow g "G" {
  when "the user wants g"
  step go { say "going" }
  auto step jump { emit goto f with { a: "from g" } }
}
"#,
    );
    harness.say_with("f", Understood::new().flow("f").field("a", json!("x")));
    let reset = harness.say_with("start over", Understood::new().signal("restart", true));
    assert_eq!(reset.reply, "reply: A?");
    assert_eq!(harness.data("a"), None);
    harness.say_with("y", Understood::new().field("a", json!("y")));
    let jumped = harness.say_with("g", Understood::new().flow("g"));
    // The run starts before the `goto`'s data is written.
    assert_eq!(harness.data("a"), Some(json!("from g")));
    assert_eq!(jumped.reply, "going\nreply: B?");
}

#[test]
fn values_given_in_the_routing_message_survive_the_new_run() {
    let mut harness = booking("");
    book_once(&mut harness);
    let second = harness.say_with(
        "book the Ritz, yes",
        // A model that proposes a consent while routing: the consent is
        // not the entry step's question, so it is not written.
        Understood::new().flow("booking").field("hotel", json!("Ritz")).field("confirmed", json!(true)),
    );
    assert_eq!(second.reply, "reply: Book Ritz?");
    assert!(warnings(&second).is_empty(), "{:?}", warnings(&second));
}

// ------------------------------------------------------------ on_error

const FAILING: &str = r#"
schema { hotel: string  confirmed: bool  booking_id: string }
tool book(hotel: string) -> { booking_id: string } { builtin echo }
flow booking "Book a room" {
  when "the user wants to book"
  step ask_hotel { prompt "Which hotel?" collect hotel }
  auto step book {
    call book(hotel) -> booking_id
    say "Booked."
    ON_ERROR
  }
  step done { say "Anything else?" }
}
"#;

fn failing(on_error: &str) -> (Harness, std::sync::Arc<Double>) {
    Harness::with_failing_tool(&FAILING.replace("ON_ERROR", on_error), "book", "the booking system is down")
}

fn step_failures(result: &flowc::runtime::events::TurnResult) -> Vec<String> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::StepFailed { step, error, .. } => Some(format!("{step}: {error}")),
            _ => None,
        })
        .collect()
}

#[test]
fn a_failing_tool_gets_an_apology_and_ends_the_flow_by_default() {
    let (mut harness, double) = failing("");
    harness.say_with("book", Understood::new().flow("booking"));
    let failed = harness.say_with("the Grand", Understood::new().field("hotel", json!("Grand")));
    assert_eq!(failed.reply, "Sorry, something went wrong, so I stopped \"Book a room\". Nothing more was done.");
    assert_eq!(failed.stopped_reason, StopReason::Aborted);
    assert_eq!((failed.flow.as_deref(), failed.step.as_deref()), (None, None));
    assert_eq!(step_failures(&failed).len(), 1);
    assert!(step_failures(&failed)[0].contains("the booking system is down"), "{:?}", step_failures(&failed));
    assert!(failed.events.iter().any(|event| matches!(event, Event::ToolCalled { ok: false, .. })));
    assert_eq!(harness.data("booking_id"), None);
    assert_eq!(double.calls().len(), 1);
}

#[test]
fn on_error_reply_answers_and_stays_at_the_step() {
    let (mut harness, double) = failing(r#"on_error reply "The booking system is down; say anything to try again.""#);
    harness.say_with("book", Understood::new().flow("booking"));
    let failed = harness.say_with("the Grand", Understood::new().field("hotel", json!("Grand")));
    assert_eq!(failed.reply, "The booking system is down; say anything to try again.");
    assert_eq!((failed.flow.as_deref(), failed.step.as_deref()), (Some("booking"), Some("book")));
    assert_eq!(failed.directives.first().map(|record| record.source.as_str()), Some("on_error:booking.book"));
    let again = harness.say("again");
    assert_eq!(double.calls().len(), 2, "staying means the next message runs the step again");
    assert_eq!(again.reply, "The booking system is down; say anything to try again.");
}

#[test]
fn on_error_goto_step_moves_on_and_abort_ends_with_its_reason() {
    let (mut harness, _) =
        failing(r#"on_error { reply "Let's pick another hotel."  goto_step ask_hotel set hotel = null }"#);
    harness.say_with("book", Understood::new().flow("booking"));
    let moved = harness.say_with("the Grand", Understood::new().field("hotel", json!("Grand")));
    assert_eq!(steps(&moved), ["ask_hotel", "book"], "a step asked again is listed once");
    assert_eq!(moved.reply, "Let's pick another hotel.\nreply: Which hotel?");
    assert_eq!(harness.data("hotel"), None);

    let (mut harness, _) = failing(r#"on_error abort "Sorry, no bookings today.""#);
    harness.say_with("book", Understood::new().flow("booking"));
    let aborted = harness.say_with("the Grand", Understood::new().field("hotel", json!("Grand")));
    assert_eq!(aborted.reply, "Sorry, no bookings today.");
    assert_eq!(aborted.stopped_reason, StopReason::Aborted);
}

#[test]
fn a_failing_prepare_hook_is_the_step_failing() {
    let (mut harness, double) = Harness::with_failing_tool(
        r#"
schema { email: string  name: string }
tool lookup(email: string) -> { name: string } { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_email { prompt "Email?" collect email }
  step greet {
    prompt "Greet {{name}}. Anything else?"
    collect name
    prepare { call lookup(email) -> name }
    on_error reply "I could not look you up just now."
  }
}
"#,
        "lookup",
        "the lookup service is down",
    );
    harness.say_with("f", Understood::new().flow("f"));
    let failed = harness.say_with("a@b.c", Understood::new().field("email", json!("a@b.c")));
    assert_eq!(failed.reply, "I could not look you up just now.");
    assert_eq!(failed.step.as_deref(), Some("greet"));
    assert_eq!(step_failures(&failed).len(), 1);
    assert_eq!(harness.calls_last_turn().1, 0, "the reply is the on_error one: no model call");
    assert_eq!(double.calls().len(), 1);
}

// ------------------------------------------------------------ batched hooks

#[test]
fn every_step_of_a_batch_runs_prepare_and_finalize_in_order() {
    let mut harness = Harness::new(
        r#"
schema { a: string  b: string  log: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    prepare { set log = log + "prepare a;" }
    finalize { set log = log + "finalize a;" }
  }
  step tell {
    prompt "Tell them about {{a}}."
    prepare { set log = log + "prepare tell;" }
    finalize { set log = log + "finalize tell;" }
  }
  step ask_b {
    prompt "B?"
    collect b
    prepare { set log = log + "prepare b;" }
    finalize { set log = log + "finalize b;" }
  }
}
"#,
    );
    harness.session.data.insert("log".into(), json!(""));
    harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(harness.data("log"), Some(json!("prepare a;finalize a;")));
    let batch = harness.say_with("x", Understood::new().field("a", json!("x")));
    assert_eq!(steps(&batch), ["ask_a", "tell", "ask_b"]);
    // The answered step had its hooks when it asked; the two steps the
    // reply covers run theirs, in order.
    assert_eq!(
        harness.data("log"),
        Some(json!("prepare a;finalize a;prepare tell;prepare b;finalize tell;finalize b;"))
    );
}

#[test]
fn a_failing_finalize_is_traced_and_the_turn_goes_on() {
    let (mut harness, double) = Harness::with_failing_tool(
        r#"
schema { a: string  id: string  note: string }
tool audit(a: string) -> { id: string } { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    finalize {
      set note = "finalized"
      call audit(a) -> id
    }
  }
}
"#,
        "audit",
        "audit log unavailable",
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.reply, "reply: A?");
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
    let failures: Vec<&str> = result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::HookFailed { hook, error } if error.contains("audit log unavailable") => Some(hook.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(failures, ["f.ask_a.finalize"]);
    assert_eq!(harness.data("note"), None, "the failed hook's writes are dropped together");
    assert_eq!(double.calls().len(), 1);
}

const FLOW_HOOKS: &str = r#"
schema { a: string  id: string  note: string }
tool audit(a: string) -> { id: string } { builtin echo }
flow f "F" {
  when "the user wants f"
  HOOK
  step ask_a {
    prompt "A?"
    collect a
    ON_ERROR
  }
  auto step done { say "Done with {{a}}." }
}
"#;

fn flow_hooks(hook: &str, on_error: &str) -> Harness {
    let mut tools = ToolRegistry::default();
    tools.register("audit", Double::failing("audit log unavailable"));
    Harness::with_tools(&FLOW_HOOKS.replace("HOOK", hook).replace("ON_ERROR", on_error), tools)
}

/// A flow's failing `on_enter` used to fail the whole turn: it is answered
/// by the `on_error` of the step the flow is entered at, by default with
/// an apology and the flow aborted.
#[test]
fn a_failing_flow_on_enter_is_answered_by_the_entry_step() {
    let hook = r#"on_enter { set note = "entered"  call audit(a: "x") -> id }"#;
    let mut harness = flow_hooks(hook, "");
    let failed = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(failed.reply, "Sorry, something went wrong, so I stopped \"F\". Nothing more was done.");
    assert_eq!(failed.stopped_reason, StopReason::Aborted);
    assert_eq!(step_failures(&failed).len(), 1, "{:?}", failed.events);
    assert_eq!(harness.data("note"), None, "the failed hook wrote nothing");

    let mut harness = flow_hooks(hook, r#"on_error reply "The audit log is down.""#);
    let answered = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(answered.reply, "The audit log is down.");
    assert_eq!((answered.flow.as_deref(), answered.step.as_deref()), (Some("f"), Some("ask_a")));
}

/// A flow's failing `on_complete` is a post-model hook failing, as a
/// `finalize` does: traced and dropped; the flow's steps have acted and the
/// user hears so.
#[test]
fn a_failing_flow_on_complete_is_traced_and_the_flow_completes() {
    let mut harness = flow_hooks(r#"on_complete { set note = "completed"  call audit(a) -> id }"#, "");
    harness.say_with("f", Understood::new().flow("f"));
    let done = harness.say_with("x", Understood::new().field("a", json!("x")));
    assert_eq!(done.reply, "Done with x.");
    assert_eq!(done.stopped_reason, StopReason::FlowComplete);
    assert!(
        done.events.iter().any(|event| matches!(event, Event::HookFailed { hook, .. } if hook == "f.on_complete")),
        "{:?}",
        done.events
    );
    assert_eq!(harness.data("note"), None, "the failed hook's writes are dropped together");
}

// ------------------------------------------------ a consent binds to its values

fn reopened(result: &flowc::runtime::events::TurnResult) -> Vec<(Vec<String>, Vec<String>)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::ConfirmationReopened { changed, cleared, .. } => Some((changed.clone(), cleared.clone())),
            _ => None,
        })
        .collect()
}

/// "No, the Ritz": the `no` was about the Grand, so it neither cancels nor
/// books; the step asks again about the Ritz, and the next `yes` books it.
#[test]
fn a_no_that_changes_a_confirmed_value_asks_again_with_the_new_value() {
    let mut harness = booking("");
    harness.say_with("book the Grand", Understood::new().flow("booking").field("hotel", json!("Grand")));
    let changed = harness
        .say_with("no, the Ritz", Understood::new().field("hotel", json!("Ritz")).field("confirmed", json!(false)));
    assert_eq!(changed.reply, "reply: Book Ritz?");
    assert_eq!(changed.stopped_reason, StopReason::NeedsInput);
    assert_eq!(harness.data("confirmed"), None);
    assert_eq!(reopened(&changed), [(vec!["hotel".to_string()], vec!["confirmed".to_string()])]);
    let booked = harness.say_with("yes", Understood::new().field("confirmed", json!(true)));
    assert_eq!(booked.reply, "Booked Ritz.");
}

/// A `yes` given together with a new value confirms nothing yet: the user
/// has not seen the booking with that value.
#[test]
fn a_yes_that_changes_a_confirmed_value_asks_again() {
    let mut harness = booking("");
    harness.say_with("book the Grand", Understood::new().flow("booking").field("hotel", json!("Grand")));
    let changed = harness
        .say_with("yes, the Ritz", Understood::new().field("hotel", json!("Ritz")).field("confirmed", json!(true)));
    assert_eq!(changed.reply, "reply: Book Ritz?");
    assert_eq!(harness.data("booking_id"), None, "nothing booked on a yes to another hotel");
}

/// An answer that repeats the value it was asked about is an answer.
#[test]
fn an_answer_that_leaves_the_values_as_shown_is_taken() {
    let mut harness = booking("");
    harness.say_with("book the Grand", Understood::new().flow("booking").field("hotel", json!("Grand")));
    let booked = harness
        .say_with("yes, the Grand", Understood::new().field("hotel", json!("Grand")).field("confirmed", json!(true)));
    assert_eq!(booked.reply, "Booked Grand.");
    assert!(reopened(&booked).is_empty());
}

/// A new offer is not an unanswered ask: changing one's mind as often as
/// `max_asks` does not abort the flow.
#[test]
fn reopening_does_not_use_up_max_asks() {
    let mut harness = booking("");
    harness.say_with("book the Grand", Understood::new().flow("booking").field("hotel", json!("Grand")));
    for hotel in ["Ritz", "Savoy", "Plaza", "Adlon"] {
        let changed = harness.say_with(hotel, Understood::new().field("hotel", json!(hotel)));
        assert_eq!(changed.reply, format!("reply: Book {hotel}?"));
    }
}
