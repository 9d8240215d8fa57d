//! Resolving the next position (LANGUAGE.md section 9 step 4 and the
//! decisions of section 11): the batch, re-asking and `max_asks`, atomic
//! validation, branch order, `then` targets, `next`, skipping, and moves
//! between flows.

use super::harness::{Harness, Understood, chain, directive_from, entered_flows, position, skipped, steps, warnings};
use flowc::runtime::events::{Event, StopReason};
use serde_json::json;

/// The booking in steps (also the program of `shown_values.rs`).
pub(super) const BOOKING: &str = r#"
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

#[test]
fn one_message_answering_every_question_runs_the_batch_with_one_reply() {
    let mut harness = Harness::new(BOOKING);
    let result = harness.say_with(
        "book the Grand Hotel for 2 guests on 2026-12-04",
        Understood::new()
            .flow("booking")
            .field("hotel", json!("Grand Hotel"))
            .field("date", json!("2026-12-04"))
            .field("guests", json!(2)),
    );
    assert_eq!(steps(&result), ["ask_hotel", "ask_date", "confirm"]);
    assert_eq!(skipped(&result), ["ask_guests"], "skipped steps appear only in the trace");
    assert_eq!(position(&result), (Some("booking"), Some("confirm")));
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
    // One understand call and ONE reply for the whole batch, asked to confirm.
    assert_eq!(harness.calls_last_turn(), (1, 1));
    assert_eq!(result.llm_calls, 2);
    assert_eq!(harness.last_respond().instructions, ["Shall I book Grand Hotel on 2026-12-04 for 2 guests?"]);
    assert_eq!(result.reply, "reply: Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
}

#[test]
fn the_batch_example_runs_the_same_way_on_the_offline_provider() {
    let program = super::harness::program(BOOKING);
    let mut runtime = flowc::runtime::engine::Runtime::new(
        program,
        Box::new(flowc::llm::offline::Offline::new()),
        flowc::runtime::engine::RuntimeOptions {
            tool_env: super::harness::tool_env_at(super::harness::NOW),
            tools: Default::default(),
            limits: Default::default(),
        },
    );
    let mut session = runtime.new_session("offline");
    let result = match runtime.run_turn(&mut session, "Book the Grand Hotel for 2 guests on 2026-12-04") {
        Ok(result) => result,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(steps(&result), ["ask_hotel", "ask_date", "confirm"]);
    assert_eq!(result.reply, "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    // The understand call wrote the reply too: no reply call.
    assert_eq!(result.llm_calls, 1);
    let yes = match runtime.run_turn(&mut session, "yes") {
        Ok(result) => result,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(steps(&yes), ["confirm", "done"]);
    assert_eq!(yes.reply, "Booked.");
    // The say needs no reply call: only the understand call is made.
    assert_eq!(yes.llm_calls, 1);
}

#[test]
fn a_step_asked_again_is_listed_once() {
    let mut harness = Harness::new(BOOKING);
    harness.say_with("book a room", Understood::new().flow("booking"));
    let again = harness.say("hmm");
    assert_eq!(steps(&again), ["ask_hotel"]);
    assert!(
        again.events.iter().any(|event| matches!(event, Event::StepAsked { step, ask: 2, .. } if step == "ask_hotel"))
    );
    assert_eq!(harness.session.asks, 2);
}

const ASKING: &str = r#"
schema { code: string  reason: string }
flow ask "Ask" {
  when "the user wants to ask"
  step ask_code {
    prompt "Your code?"
    collect code
    max_asks 2
    on_no_answer { set reason = "no code"  goto_step given_up }
  }
  step done { say "Thanks." next end }
  step given_up { say "Let's stop here." }
}
flow strict "Strict" {
  when "the user wants strictness"
  step ask_code { prompt "Your code?" collect code max_asks 2 }
  step done { say "Thanks." }
}
"#;

#[test]
fn max_asks_2_applies_on_no_answer_at_the_second_unanswered_reply() {
    let mut harness = Harness::new(ASKING);
    let first = harness.say_with("ask", Understood::new().flow("ask"));
    assert_eq!(position(&first), (Some("ask"), Some("ask_code")));
    assert_eq!(harness.session.asks, 1);

    let second = harness.say("I don't know");
    assert_eq!(position(&second), (Some("ask"), Some("ask_code")), "first unanswered reply: ask again");
    assert_eq!(harness.session.asks, 2);
    assert_eq!(second.reply, "reply: Your code?");

    let third = harness.say("still no idea");
    assert_eq!(steps(&third), ["given_up"]);
    assert_eq!(third.reply, "Let's stop here.");
    assert_eq!(harness.data("reason"), Some(json!("no code")));
    assert_eq!(chain(&third), [("on_no_answer:ask.ask_code".to_string(), true)]);
    assert_eq!(third.stopped_reason, StopReason::FlowComplete);
    // Only the understand call: the say makes no reply call.
    assert_eq!(harness.calls_last_turn(), (1, 0));
}

#[test]
fn without_on_no_answer_the_flow_aborts_after_max_asks() {
    let mut harness = Harness::new(ASKING);
    harness.say_with("strict", Understood::new().flow("strict"));
    harness.say("no");
    let result = harness.say("no again");
    assert_eq!(result.stopped_reason, StopReason::Aborted);
    assert_eq!(position(&result), (None, None));
    assert!(result.reply.contains("I could not get an answer"), "{}", result.reply);
    assert!(result.reply.contains("Strict"), "{}", result.reply);
    assert_eq!(harness.calls_last_turn(), (1, 0), "an aborted turn asks the model for no reply");
}

#[test]
fn an_answer_resets_the_ask_count() {
    let mut harness = Harness::new(ASKING);
    harness.say_with("ask", Understood::new().flow("ask"));
    harness.say("hmm");
    let answered = harness.say_with("ABC", Understood::new().field("code", json!("ABC")));
    assert_eq!(steps(&answered), ["ask_code", "done"]);
    assert_eq!(answered.reply, "Thanks.");
    assert_eq!(harness.session.asks, 0);
}

#[test]
fn one_invalid_extracted_value_writes_nothing_and_the_step_asks_again() {
    let mut harness = Harness::new(
        r#"
schema { hotel: string  guests: int 1..10 }
flow booking "Book" {
  when "the user wants to book"
  step ask_both { prompt "Hotel and guests?" collect hotel, guests }
  step done { say "Done." }
}
"#,
    );
    harness.say_with("book", Understood::new().flow("booking"));
    let result =
        harness.say_with("the Ritz for 42", Understood::new().field("hotel", json!("Ritz")).field("guests", json!(42)));
    assert_eq!(harness.data("hotel"), None, "the valid value is not written alone");
    assert_eq!(harness.data("guests"), None);
    assert!(result.data.is_empty());
    let rejected: Vec<(&str, &serde_json::Value)> = result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::ExtractionRejected { field, value, .. } => Some((field.as_str(), value)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected, [("guests", &json!(42))]);
    assert_eq!(position(&result), (Some("booking"), Some("ask_both")));
    assert!(
        result.events.iter().any(|event| matches!(event, Event::StepAsked { step, ask: 2, .. } if step == "ask_both"))
    );
    let json_line = result.to_json_line();
    assert_eq!(json_line["data"], json!({}));
}

const BRANCHES: &str = r#"
schema { n: int  picked: string }
context { tier: enum(basic, gold) }
flow pick "Pick" {
  when "the user wants to pick"
  step ask_n {
    prompt "A number?"
    collect n
    branch {
      if n > 1 -> big "first"
      if n > 0 -> small "second"
      if context.tier == "gold" when "the user sounds happy" -> happy "guarded when"
      else -> other
    }
  }
  step big { say "big" next end }
  step small { say "small" next end }
  step happy { say "happy" next end }
  step other { say "other" }
}
"#;

#[test]
fn branch_entries_are_tried_in_order_and_the_first_match_wins() {
    let mut harness = Harness::new(BRANCHES);
    harness.say_with("pick", Understood::new().flow("pick"));
    // n = 5 satisfies both the first and the second entry.
    let result = harness.say_with("5", Understood::new().field("n", json!(5)));
    assert_eq!(steps(&result), ["ask_n", "big"]);
    let taken: Vec<(usize, Option<String>)> = result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::BranchTaken { entry, label, .. } => Some((*entry, label.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(taken, [(1, Some("first".to_string()))]);
}

#[test]
fn a_when_is_not_consulted_when_the_if_of_its_entry_fails() {
    let mut harness = Harness::new(BRANCHES);
    harness.session.context.insert("tier".into(), json!("basic"));
    harness.say_with("pick", Understood::new().flow("pick"));
    // The model would say yes, but the guard is false and reads nothing
    // this turn extracts: the question is not even asked.
    let result =
        harness.say_with("0, and I'm happy", Understood::new().field("n", json!(0)).condition("pick.ask_n#3", true));
    let asked: Vec<String> = harness.last_understand().conditions.iter().map(|question| question.id.clone()).collect();
    assert!(asked.is_empty(), "{asked:?}");
    assert_eq!(steps(&result), ["ask_n", "other"]);

    // With the guard true the same answer takes the entry.
    let mut gold = Harness::new(BRANCHES);
    gold.session.context.insert("tier".into(), json!("gold"));
    gold.say_with("pick", Understood::new().flow("pick"));
    let result = gold.say_with("0, happy", Understood::new().field("n", json!(0)).condition("pick.ask_n#3", true));
    let asked: Vec<String> = gold.last_understand().conditions.iter().map(|question| question.id.clone()).collect();
    assert_eq!(asked, ["pick.ask_n#3"]);
    assert_eq!(steps(&result), ["ask_n", "happy"]);
}

#[test]
fn a_when_whose_if_reads_an_extracted_field_is_asked_but_ignored_when_the_if_fails() {
    let mut harness = Harness::new(
        r#"
schema { n: int }
flow pick "Pick" {
  when "the user wants to pick"
  step ask_n {
    prompt "A number?"
    collect n
    branch {
      if n > 100 when "the user sounds happy" -> happy
      else -> other
    }
  }
  step happy { say "happy" next end }
  step other { say "other" }
}
"#,
    );
    harness.say_with("pick", Understood::new().flow("pick"));
    let result = harness.say_with("3, happy", Understood::new().field("n", json!(3)).condition("pick.ask_n#1", true));
    // The guard reads `n`, which this turn may extract: the question had to be asked…
    let asked: Vec<String> = harness.last_understand().conditions.iter().map(|question| question.id.clone()).collect();
    assert_eq!(asked, ["pick.ask_n#1"]);
    // …but the `if` fails once n = 3 is known, so the yes is never consulted.
    assert_eq!(steps(&result), ["ask_n", "other"]);
}

const TARGETS: &str = r#"
schema { a: string  b: int  note: string }
flow main "Main" {
  when "the user wants main"
  on_enter { set note = "main entered" }
  step ask_a {
    prompt "A?"
    collect a
    branch {
      if a == "flow" -> other
      if a == "data" -> goto other with { b: 7 }
      if a == "step" -> goto_step other.second
      if a == "writes" -> { set b = 3 }
      if a == "end" -> finish
      if a == "tail" -> tail
    }
  }
  step middle { prompt "Middle?" collect b }
  step finish { say "finished" next end }
  step tail { say "tail" }
}
flow other "Other" {
  on_enter { set note = "other entered" }
  step first { prompt "First of other" collect b }
  step second { say "second of other" }
}
"#;

fn at_ask_a() -> Harness {
    let mut harness = Harness::new(TARGETS);
    harness.say_with("main", Understood::new().flow("main"));
    harness
}

#[test]
fn a_then_naming_a_flow_is_a_goto() {
    let mut harness = at_ask_a();
    let result = harness.say_with("flow", Understood::new().field("a", json!("flow")));
    assert_eq!(entered_flows(&result), ["other"]);
    assert_eq!(position(&result), (Some("other"), Some("first")));
    assert_eq!(directive_from(&result, "branch:main.ask_a#1"), json!({ "goto": "other" }));
    assert_eq!(harness.data("note"), Some(json!("other entered")), "entering runs on_enter");
    assert_eq!(steps(&result), ["ask_a", "first"]);
}

#[test]
fn goto_with_data_writes_the_data_then_enters_the_flow() {
    let mut harness = at_ask_a();
    let result = harness.say_with("data", Understood::new().field("a", json!("data")));
    assert_eq!(harness.data("b"), Some(json!(7)));
    // `first` collects b, which is now set: it runs in the batch and the
    // flow goes on to `second`.
    assert_eq!(steps(&result), ["ask_a", "first", "second"]);
    assert_eq!(result.reply, "second of other");
    assert_eq!(
        directive_from(&result, "branch:main.ask_a#2"),
        json!({ "goto": { "flow": "other", "data": { "b": 7 } } })
    );
}

#[test]
fn goto_step_across_flows_enters_the_flow_at_that_step() {
    let mut harness = at_ask_a();
    let result = harness.say_with("step", Understood::new().field("a", json!("step")));
    assert_eq!(entered_flows(&result), ["other"]);
    assert_eq!(steps(&result), ["ask_a", "second"], "the entry step is not run");
    assert_eq!(harness.data("note"), Some(json!("other entered")));
    assert_eq!(
        directive_from(&result, "branch:main.ask_a#3"),
        json!({ "goto_step": { "flow": "other", "step": "second" } })
    );
}

#[test]
fn a_directive_without_position_applies_its_writes_then_the_linear_successor() {
    let mut harness = at_ask_a();
    let result = harness.say_with("writes", Understood::new().field("a", json!("writes")));
    assert_eq!(harness.data("b"), Some(json!(3)));
    // The successor is `middle` (next in the list), whose b is now set, so
    // it runs too and `finish` ends the flow.
    assert_eq!(steps(&result), ["ask_a", "middle", "finish"]);
    assert_eq!(result.stopped_reason, StopReason::FlowComplete);
    assert_eq!(chain(&result), [("branch:main.ask_a#4".to_string(), true)]);
}

#[test]
fn next_end_completes_the_flow_without_the_steps_after_it() {
    let mut harness = at_ask_a();
    let result = harness.say_with("end", Understood::new().field("a", json!("end")));
    assert_eq!(steps(&result), ["ask_a", "finish"]);
    assert!(!steps(&result).contains(&"tail"), "next end stops before the following step");
    assert_eq!(result.stopped_reason, StopReason::FlowComplete);
    assert_eq!(position(&result), (None, None));
    assert!(result.events.iter().any(|event| matches!(event, Event::FlowCompleted { flow } if flow == "main")));
}

#[test]
fn with_no_matching_branch_the_linear_successor_follows() {
    let mut harness = at_ask_a();
    let result = harness.say_with("plain", Understood::new().field("a", json!("plain")));
    assert_eq!(steps(&result), ["ask_a", "middle"]);
    assert_eq!(position(&result), (Some("main"), Some("middle")));
}

#[test]
fn skip_if_and_a_false_step_if_skip_the_step() {
    let mut harness = Harness::new(
        r#"
schema { a: string  flag: bool }
flow f "F" {
  when "the user wants f"
  step one { prompt "One?" collect a }
  step skipped_by_skip_if { skip_if a == "x" say "skip_if did not hold" }
  step skipped_by_if { if flag == true say "if held" }
  step last { say "last" }
}
"#,
    );
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("x", Understood::new().field("a", json!("x")));
    assert_eq!(steps(&result), ["one", "last"]);
    assert_eq!(skipped(&result), ["skipped_by_skip_if", "skipped_by_if"]);
    assert_eq!(result.reply, "last");
}

#[test]
fn complete_next_enters_the_next_flow_in_the_same_turn_with_one_reply() {
    let mut harness = Harness::new(
        r#"
schema { a: string  happy: bool  note: string }
flow first "First" {
  when "the user wants first"
  complete next survey
  step ask_a { prompt "A?" collect a }
  step thanks { say "Thanks for a." }
}
flow survey "Survey" {
  on_enter { set note = "survey entered" }
  step ask_happy { prompt "Are you happy?" collect happy }
}
"#,
    );
    harness.say_with("first", Understood::new().flow("first"));
    let result = harness.say_with("value", Understood::new().field("a", json!("value")));
    assert_eq!(steps(&result), ["ask_a", "thanks", "ask_happy"]);
    assert_eq!(position(&result), (Some("survey"), Some("ask_happy")));
    assert_eq!(harness.data("note"), Some(json!("survey entered")));
    assert_eq!(harness.calls_last_turn(), (1, 1), "one reply covers both flows");
    assert_eq!(harness.last_respond().said, ["Thanks for a."]);
    assert_eq!(result.reply, "Thanks for a.\nreply: Are you happy?");
    assert!(
        result
            .events
            .iter()
            .any(|event| matches!(event, Event::Routed { flow, reason: "complete.next" } if flow == "survey"))
    );
}

#[test]
fn an_entry_step_whose_skip_if_holds_is_skipped_on_entry() {
    let mut harness = Harness::new(
        r#"
schema { email: string  topic: string }
flow help "Help" {
  when "the user needs help"
  # The email was known before the flow started: a new run keeps it.
  keep email
  step ask_email { prompt "Email?" collect email skip_if email is set }
  step ask_topic { prompt "Topic?" collect topic }
}
"#,
    );
    harness.session.data.insert("email".into(), json!("a@b.c"));
    let result = harness.say_with("help", Understood::new().flow("help"));
    assert_eq!(skipped(&result), ["ask_email"]);
    assert_eq!(steps(&result), ["ask_topic"]);
    assert!(warnings(&result).is_empty(), "{:?}", warnings(&result));
}
