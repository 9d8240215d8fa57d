//! Regressions of the turn's stages found in issue 20: a post-model
//! `complete` enters the flow's `complete.next` like any completion, a
//! `reply` a later one overrode is not applied, and the AI conditions a
//! pre-phase signal's position makes reachable are asked.

use super::harness::{Harness, Understood, chain, position, steps};
use flowc::runtime::events::{Event, StopReason};
use serde_json::json;

#[test]
fn a_post_model_complete_enters_the_flows_complete_next() {
    let mut harness = Harness::new(
        r#"
schema { a: string  b: string  entered: bool }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    finalize { emit complete }
  }
  complete next g
}
flow g "G" {
  on_enter { set entered = true }
  step ask_b { prompt "B?" collect b }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
    assert!(
        result.events.iter().any(|event| matches!(event, Event::FlowCompleted { flow } if flow == "f")),
        "{:?}",
        result.events
    );
    // The session waits at `g`'s first step, its `on_enter` run, as it
    // does for a `complete` that names `g`.
    assert_eq!(position(&result), (Some("g"), Some("ask_b")));
    assert_eq!(harness.data("entered"), Some(json!(true)));
}

#[test]
fn a_post_model_complete_naming_a_flow_enters_that_flow() {
    let mut harness = Harness::new(
        r#"
schema { a: string  b: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    finalize { emit complete next h }
  }
  complete next g
}
flow g "G" { step ask_b { prompt "B?" collect b } }
flow h "H" { step ask_h { prompt "H?" collect b } }
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(position(&result), (Some("h"), Some("ask_h")));
}

#[test]
fn a_pre_model_reply_a_later_one_overrode_is_not_applied() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    on_enter { emit reply "First." }
    prepare { emit reply "Second." }
  }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.reply, "Second.");
    assert_eq!(
        chain(&result),
        [("hook:f.ask_a.on_enter".to_string(), false), ("hook:f.ask_a.prepare".to_string(), true)]
    );
}

#[test]
fn a_post_model_reply_a_later_one_overrode_is_not_applied() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    finalize {
      emit reply "First."
      emit reply "Second."
    }
  }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.reply, "Second.");
    assert_eq!(
        chain(&result),
        [("hook:f.ask_a.finalize".to_string(), false), ("hook:f.ask_a.finalize".to_string(), true)]
    );
}

const RESTART: &str = r#"
schema { n: int  topic: string }
signal restart {
  when "the user wants to start over"
  then goto_step main.hub
}
flow main "Main" {
  when "the user wants main"
  step hub {
    say "hub"
    branch {
      when "the user mentions pizza" -> pizza
      else -> ask
    }
  }
  step ask { prompt "A number?" collect n }
  step pizza { say "pizza!" next end }
}
flow other "Other" {
  when "the user wants other"
  step ask_topic { prompt "Topic?" collect topic }
}
"#;

#[test]
fn the_conditions_a_pre_phase_signal_lands_on_are_asked() {
    let mut harness = Harness::new(RESTART);
    harness.say_with("other", Understood::new().flow("other"));
    let result = harness.say_with(
        "let's start over, I want pizza",
        Understood::new().signal("restart", true).condition("main.hub#1", true),
    );
    let asked: Vec<String> = harness.last_understand().conditions.iter().map(|question| question.id.clone()).collect();
    assert!(asked.contains(&"main.hub#1".to_string()), "{asked:?}");
    assert_eq!(steps(&result), ["hub", "pizza"]);
}

#[test]
fn entering_a_flow_asks_the_fields_of_every_step_its_entry_may_arrive_at() {
    let mut harness = Harness::new(
        r#"
schema { name: string  n: int }
flow f "F" {
  when "the user wants f"
  step greet {
    skip_if name is set
    prompt "Name?"
    collect name
  }
  step ask_n { prompt "How many?" collect n }
}
"#,
    );
    let result = harness.say_with("I want f for 3", Understood::new().flow("f").field("n", json!(3)));
    let asked: Vec<String> = harness.last_understand().fields.iter().map(|field| field.name.clone()).collect();
    // `greet` may be passed over on entry: `ask_n` is where the entry
    // then arrives, and the message may already answer it.
    assert_eq!(asked, ["name", "n"]);
    assert_eq!(harness.data("n"), Some(json!(3)));
    assert_eq!(position(&result), (Some("f"), Some("greet")));
}
