//! Regressions of the turn's stages found in issue 20: a post-model
//! `complete` enters the flow's `complete.next` like any completion.

use super::harness::{Harness, Understood, position};
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
