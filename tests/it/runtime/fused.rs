//! The fused call (issue 24): the understand call also writes the reply to
//! the step the turn is likely to stop at, and the turn uses it only when
//! code agrees with everything the model wrote it on.

use super::harness::{Harness, Reply, Understood};
use flowc::runtime::events::{Event, TurnResult};
use serde_json::json;

const BOOKING: &str = r#"
agent A { identity "You are a concierge." rule "Be brief." }
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
    requires hotel, date, guests
    prompt "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"
    collect confirmed
    branch {
      if confirmed == true -> done
      else -> cancelled
    }
  }
  step done { say "Booked." next end }
  step cancelled { say "Cancelled." }
}
"#;

/// What became of the turn's fused reply: (step named, used, reason).
fn fused(result: &TurnResult) -> Vec<(Option<String>, bool, Option<String>)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::FusedReply { step, used, reason } => Some((step.clone(), *used, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_reply_written_in_the_understand_call_answers_the_turn_without_a_reply_call() {
    let mut harness = Harness::new(BOOKING);
    let result = harness.say_with(
        "I'd like to book a room",
        Understood::new().flow("booking").fused("booking.ask_hotel", "Which hotel would you like?"),
    );
    assert_eq!(result.reply, "Which hotel would you like?");
    assert_eq!(harness.calls_last_turn(), (1, 0), "the understand call only");
    assert_eq!(result.llm_calls, 1);
    assert_eq!(fused(&result), [(Some("booking.ask_hotel".to_string()), true, None)]);
    // What the call was asked: the one step the turn can plausibly stop
    // at (the message names no hotel: no word of its own, beside those of
    // the flow's description), what it still misses, and who writes.
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(steps_offered(&ask), [("booking.ask_hotel", vec!["hotel"])]);
    assert_eq!(ask.identity.as_deref(), Some("You are a concierge."));
    assert_eq!(ask.rules, ["Be brief."]);
}

fn steps_offered(ask: &flowc::llm::ReplyAsk) -> Vec<(&str, Vec<&str>)> {
    ask.steps.iter().map(|step| (step.id.as_str(), step.missing.iter().map(String::as_str).collect())).collect()
}

#[test]
fn the_steps_offered_are_those_the_message_holds_a_sign_for_and_the_first_it_does_not() {
    // A hotel of its own words, a date, a number: the turn may stop at
    // any step up to confirm, whose confirmation no message gives ahead.
    let mut harness = Harness::new(BOOKING);
    harness.say_with("the Ritz on June 3rd for two", Understood::new().flow("booking"));
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(
        steps_offered(&ask),
        [
            ("booking.ask_hotel", vec!["hotel"]),
            ("booking.ask_date", vec!["date"]),
            ("booking.ask_guests", vec!["guests"]),
            ("booking.confirm", vec!["confirmed", "hotel", "date", "guests"]),
        ]
    );
    assert_eq!(ask.steps[3].prompt, "Shall I book {{hotel}} on {{date}} for {{guests}} guests?");
    // A hotel and no date: the date step is the last the turn can reach.
    let mut harness = Harness::new(BOOKING);
    harness.say_with("the Ritz, please", Understood::new().flow("booking"));
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(steps_offered(&ask), [("booking.ask_hotel", vec!["hotel"]), ("booking.ask_date", vec!["date"])]);
}

#[test]
fn a_value_code_read_is_written_into_the_prompt_the_model_copies() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with(
        "book the Grand Hotel for 2 guests",
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("guests", json!(2)),
    );
    // Code reads the ISO date: confirm is the one step left, its prompt
    // with the date written in and placeholders for the fields the model
    // is still asked (the message may change them).
    let result = harness.say_with(
        "2026-12-04",
        Understood::new().fused("booking.confirm", "Shall I book {{hotel}} on 2026-12-04 for {{guests}} guests?"),
    );
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(steps_offered(&ask), [("booking.confirm", vec!["confirmed"])]);
    assert_eq!(ask.steps[0].prompt, "Shall I book {{hotel}} on 2026-12-04 for {{guests}} guests?");
    assert_eq!(result.reply, "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert_eq!(harness.calls_last_turn(), (1, 0));
}

#[test]
fn a_reply_for_another_step_than_the_turn_stops_at_is_set_aside_for_the_reply_call() {
    let mut harness = Harness::new(BOOKING);
    // The model named the date step, as if it had read a hotel it did not
    // propose: the turn stops at the hotel step.
    let result = harness.say_with(
        "I'd like to book a room",
        Understood::new().flow("booking").fused("booking.ask_date", "For which date at the Ritz?"),
    );
    assert_eq!(result.reply, "reply: Which hotel?");
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(
        fused(&result),
        [(
            Some("booking.ask_date".to_string()),
            false,
            Some("the turn stopped at `booking.ask_hotel`, not at `booking.ask_date` the model named".to_string())
        )]
    );
}

#[test]
fn a_reply_never_mentions_a_value_grounding_rejected() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with(
        "book the Grand Hotel for 2 guests",
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("guests", json!(2)),
    );
    assert_eq!(harness.data("guests"), Some(json!(2)));
    // The model reads 5 guests as 50: grounding drops it, the date (read
    // by code) is written, and the turn stops at confirm, the step the
    // model named, with the 2 guests code accepted. Its reply, written
    // with 50, is not used.
    let result = harness.say_with(
        "on 2026-12-04, for 5 guests",
        Understood::new()
            .cited("guests", json!(50), "5 guests")
            .fused("booking.confirm", "Shall I book Grand Hotel on 2026-12-04 for 50 guests?"),
    );
    assert_eq!(harness.data("guests"), Some(json!(2)));
    assert_eq!(harness.session.step.map(|step| step.index()), Some(3), "at confirm");
    assert_eq!(result.reply, "reply: Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert!(!result.reply.contains("50"));
    assert_eq!(harness.calls_last_turn(), (1, 1), "the ordinary reply call");
    let events = fused(&result);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0.as_deref(), Some("booking.confirm"));
    assert!(!events[0].1);
    // The step's prompt reads the guests the model saw as 50.
    assert_eq!(
        events[0].2.as_deref(),
        Some("the step's prompt reads `guests`, whose value is not the one the model saw")
    );
}

/// The real local model's way at confirm (SmolLM2-135M, "2 guests"): it
/// proposes a hotel nobody said, grounding rejects it, and its reply is
/// the step's prompt copied with its placeholders. Code fills them with
/// the accepted values, which is what the reply call would say: the reply
/// is used. Had it written the rejected hotel, or left a changed field in
/// its own words, it would not be.
#[test]
fn a_reply_that_leaves_a_changed_field_to_its_placeholder_is_filled_and_used() {
    let placeholders = "Shall I book {{hotel}} on {{date}} for {{ guests }} guests?";
    let at_confirm = |reply: &str| {
        let mut harness = Harness::new(BOOKING);
        harness.say_with(
            "book the Grand Hotel on 2026-12-04",
            Understood::new().flow("booking").field("hotel", json!("Grand Hotel")),
        );
        let result = harness.say_with(
            "2 guests",
            Understood::new()
                .field("guests", json!(2))
                .cited("hotel", json!("Paris"), "2 guests")
                .fused("booking.confirm", reply),
        );
        assert_eq!(harness.data("hotel"), Some(json!("Grand Hotel")), "grounding kept the hotel");
        (harness, result)
    };
    let (harness, result) = at_confirm(placeholders);
    assert_eq!(result.reply, "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert_eq!(harness.calls_last_turn(), (1, 0), "the understand call only");
    assert_eq!(fused(&result), [(Some("booking.confirm".to_string()), true, None)]);

    // The hotel in its own words, not as the placeholder: set aside.
    let (harness, result) = at_confirm("Shall I book Grand Hotel on {{date}} for {{guests}} guests?");
    assert_eq!(harness.calls_last_turn(), (1, 1), "the ordinary reply call");
    assert_eq!(
        fused(&result)[0].2.as_deref(),
        Some("the step's prompt reads `hotel`, whose value is not the one the model saw")
    );
    // The placeholder, and the rejected hotel beside it: set aside.
    let (harness, result) = at_confirm("Paris it is! Shall I book {{hotel}} on {{date}} for {{guests}} guests?");
    assert_eq!(harness.calls_last_turn(), (1, 1), "the ordinary reply call");
    assert!(!result.reply.contains("Paris"));
    let reason = fused(&result)[0].2.clone().unwrap_or_default();
    assert!(reason.contains("which code did not accept for `hotel`"), "{reason}");
}

/// The real local model's way (SmolLM2-135M): at the hotel step it reads
/// the hotel and invents a date, citing the schema's "YYYY-MM-DD". Code
/// rejects the date and the turn asks for it: a reply that asks for the
/// date without naming the invented one is what the step asks, and is
/// used; one that names it, in any rendering, is not.
fn at_the_hotel_step() -> Harness {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("I'd like to book a room", Understood::new().flow("booking"));
    harness
}

fn with_an_invented_date(reply: &str) -> Understood {
    Understood::new()
        .cited("hotel", json!("Grand Hotel"), "Grand Hotel")
        .cited("date", json!("2026-06-03"), "YYYY-MM-DD")
        .fused("booking.ask_date", reply)
}

#[test]
fn a_reply_beside_a_rejected_value_it_does_not_mention_is_used() {
    let mut harness = at_the_hotel_step();
    let result = harness.say_with("The Grand Hotel, please", with_an_invented_date("Lovely choice. For which date?"));
    assert_eq!(harness.data("hotel"), Some(json!("Grand Hotel")));
    assert_eq!(harness.data("date"), None, "the invented date is not written");
    assert_eq!(result.reply, "Lovely choice. For which date?");
    assert_eq!(harness.calls_last_turn(), (1, 0), "no reply call");
    assert_eq!(fused(&result), [(Some("booking.ask_date".to_string()), true, None)]);
}

#[test]
fn a_reply_that_mentions_a_rejected_value_in_any_rendering_is_set_aside() {
    for (reply, found) in [
        ("2026-06-03 is a fantastic choice! For which date?", "the date 2026-06-03"),
        ("June 3rd, lovely. Is that the date?", "the date 2026-06-03"),
        ("The 3rd of June? For which date?", "the date 2026-06-03"),
        ("Noted 03/06/2026. For which date?", "the date 2026-06-03 as \"03/06/2026\""),
        ("For which date (YYYY-MM-DD)?", "its evidence \"YYYY-MM-DD\""),
    ] {
        let mut harness = at_the_hotel_step();
        let result = harness.say_with("The Grand Hotel, please", with_an_invented_date(reply));
        assert_eq!(result.reply, "reply: For which date?", "{reply}");
        assert_eq!(harness.calls_last_turn(), (1, 1), "{reply}");
        let reason = format!("the reply mentions {found}, which code did not accept for `date`");
        assert_eq!(fused(&result), [(Some("booking.ask_date".to_string()), false, Some(reason))], "{reply}");
    }
}

#[test]
fn an_invented_count_is_found_in_digits_or_words_and_an_invented_name_by_its_words() {
    let cases = [
        (Understood::new().cited("guests", json!(3), "integer|null"), "For which date, for 3 guests?", "the number 3"),
        (Understood::new().cited("guests", json!(3), "integer|null"), "Three of you? For which date?", "the number 3"),
        (
            Understood::new().cited("guests", json!(3), "integer|null"),
            "For which date? (integer|null)",
            "its evidence \"integer|null\"",
        ),
        (
            Understood::new().cited("hotel", json!("Ritz Paris"), "the Ritz"),
            "The Ritz! For which date?",
            "\"ritz\" of \"Ritz Paris\"",
        ),
        (Understood::new().cited("hotel", json!("); } }, {"), "2026"), "); } }, { For which date?", "\"); } }, {\""),
    ];
    for (understood, reply, found) in cases {
        let mut harness = at_the_hotel_step();
        harness
            .say_with("The Grand Hotel, please", Understood::new().cited("hotel", json!("Grand Hotel"), "Grand Hotel"));
        // At the date step, the message gives the date; the model invents
        // something else beside it and names the guests step.
        let mut understood = understood.cited("date", json!("2026-12-04"), "2026-12-04");
        understood.0.reply = Some(flowc::llm::FusedReply { step: "booking.ask_guests".into(), text: reply.into() });
        let result = harness.say_with("2026-12-04", understood);
        assert_eq!(harness.data("date"), Some(json!("2026-12-04")), "{reply}");
        assert_eq!(result.reply, "reply: How many guests?", "{reply}");
        let (_, used, reason) = fused(&result).pop().expect("a fused reply");
        assert!(!used, "{reply}");
        let field = if found.contains("ritz") || found.contains('}') { "hotel" } else { "guests" };
        assert_eq!(reason, Some(format!("the reply mentions {found}, which code did not accept for `{field}`")));
    }
}

#[test]
fn a_reply_beside_a_rejected_yes_or_no_is_never_used() {
    // A program whose first step collects a yes/no and the next asks on:
    // the model's "yes" is not backed by the message (it cites words the
    // message does not hold), and no text can be checked for it ("great,
    // noted" may stand for it).
    let mut harness = Harness::new(
        r#"
schema {
  newsletter: bool "Whether the user wants the newsletter"
  email: string "Email address"
}
flow signup {
  when "the user wants to sign up"
  step ask_newsletter { prompt "Would you like our newsletter?" collect newsletter }
  step ask_email { prompt "Your email?" collect email }
}
"#,
    );
    harness.say_with("sign me up", Understood::new().flow("signup"));
    let result = harness.say_with(
        "my email is ann@example.com",
        Understood::new()
            .cited("newsletter", json!(true), "yes please")
            .fused("signup.ask_newsletter", "Great, noted!"),
    );
    assert_eq!(harness.data("newsletter"), None);
    let (_, used, reason) = fused(&result).pop().expect("a fused reply");
    assert!(!used);
    assert_eq!(
        reason.as_deref(),
        Some("code did not accept the model's `newsletter`, which no reply text can be checked for")
    );
}

#[test]
fn values_code_read_before_the_call_are_known_to_the_model_and_its_reply_is_used() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("book the Grand Hotel", Understood::new().flow("booking").field("hotel", json!("Grand Hotel")));
    harness.say("2026-12-04");
    let result = harness.say_with(
        "3 guests",
        Understood::new().fused("booking.confirm", "Shall I book Grand Hotel on 2026-12-04 for 3 guests?"),
    );
    // "3 guests" is read by code (the one number, at the step that asks
    // for it alone): the model saw it as known data.
    assert_eq!(harness.data("guests"), Some(json!(3)));
    assert_eq!(result.reply, "Shall I book Grand Hotel on 2026-12-04 for 3 guests?");
    assert_eq!(harness.calls_last_turn(), (1, 0));
    let ask = harness.last_understand().reply.expect("a fused reply is asked for");
    assert_eq!(ask.data.get("guests"), Some(&json!(3)), "what code read is known to the model");
}

#[test]
fn no_reply_is_asked_for_when_where_the_turn_stops_depends_on_more_than_fields() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with(
        "book the Grand Hotel for 2 guests on 2026-12-04",
        Understood::new().flow("booking").field("hotel", json!("Grand Hotel")).field("guests", json!(2)),
    );
    // At confirm, a yes leads through a branch: nothing after it is offered,
    // and confirm alone is not worth the prompt.
    harness.reply_next(Reply::text("Booked!"));
    harness.say("yes");
    let request = harness.last_understand();
    assert!(request.reply.is_none(), "{:?}", request.reply);
}

#[test]
fn a_value_the_step_sets_as_it_asks_is_not_one_the_model_saw() {
    let mut harness = Harness::new(
        r#"
schema {
  hotel: string examples "Grand Hotel"
  price: int
  confirmed: bool
}
flow booking {
  when "the user wants to book a hotel room"
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step confirm {
    prepare { set price = 120 }
    prompt "Book {{hotel}} for {{price}} euros?"
    collect confirmed
  }
}
"#,
    );
    let result = harness.say_with(
        "book the Grand Hotel",
        Understood::new()
            .flow("booking")
            .field("hotel", json!("Grand Hotel"))
            .fused("booking.confirm", "Book Grand Hotel for 99 euros?"),
    );
    assert_eq!(result.reply, "reply: Book Grand Hotel for 120 euros?");
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(
        fused(&result)[0].2.as_deref(),
        Some("the step's prompt reads `price`, whose value is not the one the model saw")
    );
}

/// SmolLM2 at the date step: "Booking confirmed on {{date}} for {{guests}}
/// guests." for the guests step. A placeholder is written as the accepted
/// value when there is one; one with no value sets the reply aside, so the
/// user never sees a placeholder.
#[test]
fn placeholders_the_model_copied_are_filled_from_the_accepted_data_or_set_the_reply_aside() {
    let mut harness = at_the_hotel_step();
    harness.say_with("The Grand Hotel, please", Understood::new().cited("hotel", json!("Grand Hotel"), "Grand Hotel"));
    let result = harness.say_with(
        "2026-12-04",
        Understood::new()
            .cited("date", json!("2026-12-04"), "2026-12-04")
            .fused("booking.ask_guests", "Booking confirmed on {{date}} for {{guests}} guests."),
    );
    assert_eq!(result.reply, "reply: How many guests?");
    assert_eq!(
        fused(&result)[0].2.as_deref(),
        Some("the reply holds the placeholder `{{guests}}`, which has no value")
    );
    let result = harness.say_with(
        "2 guests",
        Understood::new().fused("booking.confirm", "Shall I book {{ hotel }} on {{date}} for {{guests}} guests?"),
    );
    assert_eq!(result.reply, "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert_eq!(harness.calls_last_turn(), (1, 0));
}

/// `fused_reply = false` in flowc.toml: the understand call asks for no
/// reply and every question is a reply call of its own, as before the
/// fused call; the answers are the same.
#[test]
fn the_operator_turns_the_fused_reply_off_in_flowc_toml() {
    use crate::support::{flowc_in, root, stderr, stdout, temp_dir};
    let program = root().join("flows/booking.flow");
    let program = program.to_string_lossy();
    let calls = |fused: bool| {
        let dir = temp_dir(&format!("fused-switch-{fused}"));
        std::fs::write(dir.join("flowc.toml"), format!("fused_reply = {fused}\n")).expect("flowc.toml");
        let script = "Hi, I'd like to book a hotel room\nThe Grand Hotel, please\n2026-12-04\n2 guests\nyes\n";
        std::fs::write(dir.join("script.txt"), script).expect("script");
        let output = flowc_in(&dir, &["run", &program, "--script", "script.txt", "--json"], None);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let _ = std::fs::remove_dir_all(&dir);
        let turns: Vec<serde_json::Value> =
            stdout(&output).lines().map(|line| serde_json::from_str(line).expect("a JSON turn")).collect();
        let replies: Vec<String> = turns.iter().map(|turn| turn["reply"].as_str().unwrap_or_default().into()).collect();
        let calls: Vec<u64> = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap_or(99)).collect();
        (calls, replies)
    };
    let (on, on_replies) = calls(true);
    let (off, off_replies) = calls(false);
    assert_eq!(on, [1, 1, 1, 1, 1]);
    assert_eq!(off, [2, 2, 2, 2, 1]);
    assert_eq!(on_replies, off_replies);
}
