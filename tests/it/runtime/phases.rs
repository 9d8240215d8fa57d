//! A turn's phases (docs/runtime.md, "Writes: one unit per phase"): the
//! pre-model phase is the pending directive or the pre-phase signals,
//! routing, and every step entered before the reply, hooks and `do`s
//! included; its writes are seen at once by what runs after them, and a
//! bad one anywhere undoes all of them, with one `data_validation` event
//! naming each bad write and its emitter. The turn goes on.

use super::harness::{Harness, Understood};
use flowc::runtime::events::{Event, StopReason, TurnResult};
use flowc::runtime::writes::InvalidWrite;
use serde_json::json;

const PROGRAM: &str = r#"
schema {
  tier: enum(basic, gold)
  a: string
  n: int 1..10
  note: string
  seen: string
  path: string
}
signal vip {
  when "the user is a vip"
  then { set tier = "gold" }
}
signal counted {
  when "the user counts"
  then { set n = len(note) + 40 }
}
flow f "F" {
  when "the user wants f"
  step gold_only {
    skip_if tier is not set
    say "Gold welcome."
    set path = "gold"
  }
  step ask_a {
    prompt "A?"
    collect a
    on_enter { emit set seen = tier }
    branch {
      if a == "bad do" -> bad_do
      if a == "bad hook" -> bad_hook
      if a == "late" -> late
      else -> done
    }
  }
  step bad_do {
    on_enter { emit set note = "entered" }
    emit set n = len(a) * 10
    next done
  }
  step bad_hook {
    on_enter { emit set n = len(a) * 10 }
    say "hooked"
    next done
  }
  step late {
    emit set n = len(a) * 10
    next after_late
  }
  step after_late {
    set note = "after"
    emit set seen = "after"
    next done
  }
  step done { say "done" }
}
"#;

/// The `data_validation` events of a turn: (source, fields).
fn refused(result: &TurnResult) -> Vec<(String, Vec<InvalidWrite>)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::DataValidation { source, fields, .. } => Some((source.clone(), fields.clone())),
            _ => None,
        })
        .collect()
}

/// The fields each `data_validation` event says were put back.
fn undone(result: &TurnResult) -> Vec<Vec<String>> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::DataValidation { undone, .. } => Some(undone.clone()),
            _ => None,
        })
        .collect()
}

/// Each bad write as (field, emitter).
fn named(fields: &[InvalidWrite]) -> Vec<(&str, &str)> {
    fields.iter().map(|write| (write.field.as_str(), write.source.as_str())).collect()
}

#[test]
fn routing_and_the_first_step_read_the_signal_write_and_a_valid_phase_commits_it() {
    let mut harness = Harness::new(PROGRAM);
    let result = harness.say_with("I'm a vip and want f", Understood::new().flow("f").signal("vip", true));
    assert!(refused(&result).is_empty(), "{:?}", refused(&result));
    // `gold_only` is passed over without the signal's write: it ran.
    assert!(result.executed_steps.contains(&"gold_only".to_string()), "{:?}", result.executed_steps);
    assert_eq!(harness.data("path"), Some(json!("gold")));
    assert_eq!(harness.data("seen"), Some(json!("gold")), "the step's on_enter read the signal's write");
    assert_eq!(harness.data("tier"), Some(json!("gold")));
}

#[test]
fn a_valid_signal_write_and_a_bad_hook_write_are_both_undone_with_one_event() {
    let mut harness = Harness::new(PROGRAM);
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("vip: bad hook", Understood::new().field("a", json!("bad hook")).signal("vip", true));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "one event for the phase: {refused:?}");
    assert_eq!(refused[0].0, "pre-model");
    assert_eq!(named(&refused[0].1), [("n", "hook:f.bad_hook.on_enter")]);
    assert_eq!(refused[0].1[0].reason, "`80` is above the maximum 10");
    assert_eq!(harness.data("tier"), None, "the signal's valid write went with the hook's bad one");
    assert_eq!(undone(&result), [["tier"]], "the event names what was put back");
    // The turn went on: the message's answer is kept (it is no write of
    // the phase), the chain went to `done`, and the reply was made.
    assert_eq!(harness.data("a"), Some(json!("bad hook")));
    assert!(result.reply.contains("hooked"), "{}", result.reply);
    assert!(result.executed_steps.contains(&"done".to_string()), "{:?}", result.executed_steps);
    assert!(result.reply.contains("done"), "{}", result.reply);
}

#[test]
fn a_step_on_enter_valid_and_its_do_invalid_are_both_undone() {
    let mut harness = Harness::new(PROGRAM);
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("bad do", Understood::new().field("a", json!("bad do")));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(named(&refused[0].1), [("n", "action:f.bad_do#1")]);
    assert_eq!(harness.data("note"), None, "the on_enter's note = \"entered\" is undone");
    assert_eq!(undone(&result), [["note"]]);
    assert_eq!(harness.data("n"), None);
}

#[test]
fn a_bad_signal_write_undoes_the_steps_writes_that_follow_and_names_every_bad_write() {
    let mut harness = Harness::new(PROGRAM);
    harness.say_with("f", Understood::new().flow("f"));
    // The signal's bad write fails the phase first; `late`'s bad write is
    // still named, and `after_late`'s valid `set` and `emit` are not kept.
    let result =
        harness.say_with("late, counting", Understood::new().field("a", json!("late")).signal("counted", true));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(named(&refused[0].1), [("n", "signal:counted"), ("n", "action:f.late#1")]);
    assert_eq!(harness.data("note"), None, "after_late's own set came after the phase failed");
    assert_eq!(harness.data("seen"), None, "after_late's valid emit is not applied");
    assert!(result.executed_steps.contains(&"after_late".to_string()), "the turn goes on: {:?}", result.executed_steps);
}

#[test]
fn a_field_the_message_answers_is_not_undone_with_the_phase() {
    let mut harness = Harness::new(PROGRAM);
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("late", Understood::new().field("a", json!("late")));
    assert_eq!(refused(&result).len(), 1);
    assert_eq!(harness.data("a"), Some(json!("late")));
    // The session moved on as the steps did: positions are not writes.
    assert_eq!(result.stopped_reason, StopReason::FlowComplete);
}

/// A post-model position enters a flow: its `on_enter` runs after the
/// post-model bus was applied, and its writes join the post-model phase.
const PARKED: &str = r#"
schema { a: string  n: int 1..10  seen: string  note: string }
flow h "H" {
  when "the user wants h"
  step only {
    prompt "Hi."
    finalize {
      set seen = "finalized"
      emit goto g
    }
  }
}
flow g "G" {
  when "the user wants g"
  on_enter { emit set note = "entered g" }
  step ask { prompt "A?" collect a }
}
"#;

#[test]
fn a_flow_entered_after_the_reply_writes_in_the_post_model_phase() {
    let mut harness = Harness::new(PARKED);
    let result = harness.say_with("h", Understood::new().flow("h"));
    assert!(refused(&result).is_empty(), "{:?}", refused(&result));
    assert_eq!(harness.data("seen"), Some(json!("finalized")));
    assert_eq!(harness.data("note"), Some(json!("entered g")), "the parked flow's on_enter writes");

    let bad = PARKED.replace(r#"emit set note = "entered g""#, "emit set n = len(seen) * 10");
    let mut harness = Harness::new(&bad);
    let result = harness.say_with("h", Understood::new().flow("h"));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "post-model");
    assert_eq!(named(&refused[0].1), [("n", "hook:g.on_enter")]);
    assert_eq!(harness.data("seen"), None, "the finalize's set is undone with the phase");
    assert!(harness.session.flow.is_some(), "the session still waits in g");
}
