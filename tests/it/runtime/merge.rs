//! The merge rules of LANGUAGE.md section 5, observed through whole turns:
//! precedence and last-wins of positions, shallow and atomic writes, halt
//! as an OR, `inject_tools` and `append_prompt` reaching the reply request,
//! pre-model fields dropped after the model, and abort beating reply.

use super::harness::{Harness, Understood, chain, position, steps, warnings};
use flowc::runtime::events::StopReason;
use serde_json::json;

const POSITIONS: &str = r#"
schema { a: string  x: int  y: int 1..10 }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    branch {
      if a == "precedence" -> precedence
      if a == "tier" -> tier
      if a == "shallow" -> shallow
      if a == "invalid" -> invalid
      else -> done
    }
  }
  auto step precedence {
    emit reset
    emit goto other
    emit complete
    emit goto_step other.second
  }
  auto step tier {
    emit goto other
    emit goto_step other.second
  }
  auto step shallow {
    emit set x = 1
    emit { set x = 2  set y = 3 }
    next end
  }
  auto step invalid {
    emit set x = 2
    emit set y = len(a) * 50
    next end
  }
  step done { say "done" }
}
flow other "Other" {
  step first { say "first of other" }
  step second { say "second of other" }
}
"#;

fn answered(a: &str) -> (Harness, flowc::runtime::events::TurnResult) {
    let mut harness = Harness::new(POSITIONS);
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with(a, Understood::new().field("a", json!(a)));
    (harness, result)
}

#[test]
fn positions_merge_by_precedence_abort_complete_goto_reset() {
    let (_, result) = answered("precedence");
    // complete outranks the gotos and reset, wherever it stands in the list.
    assert_eq!(
        chain(&result),
        [
            ("action:f.precedence#1".to_string(), false),
            ("action:f.precedence#2".to_string(), false),
            ("action:f.precedence#3".to_string(), true),
            ("action:f.precedence#4".to_string(), false),
        ]
    );
    assert_eq!(steps(&result), ["ask_a", "precedence"]);
    assert_eq!(result.stopped_reason, StopReason::FlowComplete);
    assert_eq!(position(&result), (None, None));
}

#[test]
fn the_last_position_wins_inside_a_tier() {
    let (_, result) = answered("tier");
    assert_eq!(chain(&result), [("action:f.tier#1".to_string(), false), ("action:f.tier#2".to_string(), true)]);
    // goto_step other.second, not goto other (which would run `first`).
    assert_eq!(steps(&result), ["ask_a", "tier", "second"]);
    assert_eq!(result.reply, "second of other");
}

#[test]
fn writes_shallow_merge_in_emission_order() {
    let (harness, result) = answered("shallow");
    assert_eq!(harness.data("x"), Some(json!(2)));
    assert_eq!(harness.data("y"), Some(json!(3)));
    assert_eq!(chain(&result).len(), 2);
    assert!(chain(&result).iter().all(|(_, applied)| *applied));
}

#[test]
fn merged_writes_are_validated_as_one_unit() {
    let (harness, result) = answered("invalid");
    assert_eq!(
        harness.data("x"),
        None,
        "x = 2 is valid but y = 350 (the length of `invalid`, times 50) is not: nothing is written"
    );
    assert_eq!(harness.data("y"), None);
    let refused: Vec<_> = result
        .events
        .iter()
        .filter_map(|event| match event {
            flowc::runtime::events::Event::DataValidation { fields, .. } => Some(fields.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "one data_validation event: {refused:?}");
    assert_eq!(refused[0].iter().map(|write| write.field.as_str()).collect::<Vec<_>>(), ["y"]);
}

const AUGMENTED: &str = r#"
schema { a: string  b: string }
tool lookup(q: string) { builtin echo }
tool search(q: string) { builtin echo }
tool ticket(q: string) { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    tools lookup
    on_enter { emit append_prompt "First." }
    prepare {
      emit { append_prompt "Second.", "Third."  inject_tools search, ticket }
      emit inject_tools search, lookup
    }
  }
  step ask_b { prompt "B?" collect b }
}
"#;

#[test]
fn append_prompt_concatenates_and_reaches_the_reply_request() {
    let mut harness = Harness::new(AUGMENTED);
    harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(harness.last_respond().appended, ["First.", "Second.", "Third."]);
    assert_eq!(harness.last_respond().instructions, ["A?"]);
}

#[test]
fn inject_tools_dedupes_by_name_the_later_winning_and_reaches_the_reply_request() {
    let mut harness = Harness::new(AUGMENTED);
    let result = harness.say_with("f", Understood::new().flow("f"));
    let tools: Vec<String> = harness.last_respond().tools.iter().map(|tool| tool.name.clone()).collect();
    // The step's own `lookup`, then the merged injections [ticket, search,
    // lookup] minus what is already there: no name twice.
    assert_eq!(tools, ["lookup", "ticket", "search"]);
    assert_eq!(
        chain(&result),
        [
            ("hook:f.ask_a.on_enter".to_string(), true),
            ("hook:f.ask_a.prepare".to_string(), true),
            ("hook:f.ask_a.prepare".to_string(), true),
        ]
    );
}

#[test]
fn halt_is_a_logical_or_and_skips_the_reply_call() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    prepare {
      emit halt
      emit append_prompt "not halting, but halt is an OR"
    }
  }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(harness.calls_last_turn(), (1, 0), "halt: no respond call");
    assert_eq!(result.llm_calls, 1);
    assert_eq!(result.stopped_reason, StopReason::Halt);
    assert_eq!(result.reply, "");
    assert_eq!(position(&result), (Some("f"), Some("ask_a")));
}

#[test]
fn pre_model_fields_from_finalize_are_dropped_with_a_warning() {
    let mut harness = Harness::new(
        r#"
schema { a: string  seen: bool }
tool lookup(q: string) { builtin echo }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    finalize {
      emit { halt  append_prompt "too late"  inject_tools lookup  set seen = true }
    }
  }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(harness.calls_last_turn(), (1, 1), "the halt came after the model: it was asked anyway");
    assert_eq!(result.stopped_reason, StopReason::NeedsInput);
    assert!(harness.last_respond().appended.is_empty());
    assert!(
        warnings(&result)
            .iter()
            .any(|warning| warning.contains("hook:f.ask_a.finalize") && warning.contains("dropped")),
        "{:?}",
        warnings(&result)
    );
    // Its writes still apply: only the pre-model fields are dropped.
    assert_eq!(harness.data("seen"), Some(json!(true)));
    assert_eq!(chain(&result), [("hook:f.ask_a.finalize".to_string(), true)]);
}

#[test]
fn abort_beats_a_reply_from_another_source_with_a_warning() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    on_enter { emit reply "Here is a reply." }
    prepare { emit abort "Stopped." }
  }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.stopped_reason, StopReason::Aborted);
    assert_eq!(result.reply, "Stopped.");
    assert_eq!(harness.calls_last_turn(), (1, 0));
    assert!(
        warnings(&result).iter().any(|warning| warning.contains("hook:f.ask_a.on_enter")
            && warning.contains("dropped")
            && warning.contains("hook:f.ask_a.prepare")),
        "{:?}",
        warnings(&result)
    );
    assert_eq!(position(&result), (None, None));
}

#[test]
fn the_last_reply_wins_and_needs_no_model_call() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    on_enter { emit reply "first" }
    prepare { emit reply "second" }
  }
}
"#,
    );
    let result = harness.say_with("f", Understood::new().flow("f"));
    assert_eq!(result.reply, "second");
    assert_eq!(harness.calls_last_turn(), (1, 0));
}

#[test]
fn an_abort_from_one_signal_beats_the_reply_of_another() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
signal stop_it {
  when "the user says stop"
  then abort "Stopped by a signal."
}
signal chatty {
  when "the user says stop"
  then { reply "A chatty reply."  append_prompt "Be chatty." }
}
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a }
}
"#,
    );
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("stop", Understood::new().signal("stop_it", true).signal("chatty", true));
    assert_eq!(result.stopped_reason, StopReason::Aborted);
    assert_eq!(result.reply, "Stopped by a signal.");
    let dropped: Vec<String> = warnings(&result).into_iter().filter(|warning| warning.contains("dropped")).collect();
    assert_eq!(dropped.len(), 1, "one warning, not one per merge: {dropped:?}");
    assert!(dropped[0].contains("signal:chatty") && dropped[0].contains("signal:stop_it"), "{dropped:?}");
    assert_eq!(harness.calls_last_turn(), (1, 0));
}

#[test]
fn the_abort_after_max_asks_beats_a_reply_from_a_signal() {
    let mut harness = Harness::new(
        r#"
schema { a: string }
signal helpful {
  when "the user is confused"
  then reply "Let me help."
}
flow f "F" {
  when "the user wants f"
  step ask_a { prompt "A?" collect a max_asks 1 }
}
"#,
    );
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("I'm confused", Understood::new().signal("helpful", true));
    assert_eq!(result.stopped_reason, StopReason::Aborted);
    assert!(result.reply.starts_with("Sorry, I could not get an answer"), "{}", result.reply);
    assert!(!result.reply.contains("Let me help."), "{}", result.reply);
    assert!(
        warnings(&result).iter().any(|warning| warning.contains("signal:helpful") && warning.contains("dropped")),
        "{:?}",
        warnings(&result)
    );
}
