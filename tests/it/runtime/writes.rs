//! Writes checked as one unit per phase: the writes the emitters of one
//! phase merge (signals, hooks' `emit`s, actions' `emit`s, tools'
//! directives) are committed all or nothing, and a unit with bad writes
//! records one `data_validation` event naming each of them; workflows
//! fail the step, naming them. A turn's phases are pre-model (the signals,
//! routing and every step before the reply) and post-model (`finalize`,
//! `on_complete`'s and the model's tools' directives); `phases.rs` tests
//! what crosses emitters within one.

use super::harness::{Double, Harness, Understood};
use flowc::runtime::events::{Event, TurnResult};
use flowc::runtime::tools::ToolRegistry;
use flowc::runtime::writes::InvalidWrite;
use serde_json::json;

const PROGRAM: &str = r#"
schema { a: string  x: int  y: int 1..10  note: string }
tool lookup(a: string) -> { note: string } { builtin echo }
signal fine {
  when "the user is fine"
  then { set note = "fine" }
}
signal loud {
  when "the user is loud"
  then { set y = len(note) + 50 }
}
flow f "F" {
  when "the user wants f"
  step ask_a {
    prompt "A?"
    collect a
    branch {
      if a == "hook" -> by_hook
      if a == "tool" -> by_tool
      else -> done
    }
  }
  step by_hook {
    say "hooked"
    set note = "hooked"
    emit set y = len(a) * 50
    prepare { emit set x = 1 }
    next end
  }
  step by_tool {
    say "tooled"
    call lookup(a) -> note
    prepare { emit set x = 2 }
    next end
  }
  step done { say "done" }
}
flow g "G" {
  when "the user wants g"
  on_complete { emit set y = len(note) + 50 }
  step only {
    prompt "Say hi."
    finalize { emit set x = 3 }
  }
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

fn names(fields: &[InvalidWrite]) -> Vec<&str> {
    fields.iter().map(|write| write.field.as_str()).collect()
}

fn harness(tool_result: serde_json::Value) -> Harness {
    let mut tools = ToolRegistry::default();
    tools.register("lookup", Double::returning(tool_result));
    Harness::with_tools(PROGRAM, tools)
}

#[test]
fn signals_firing_together_are_one_unit() {
    let mut harness = harness(json!({}));
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with(
        "I'm fine, just loud: none",
        Understood::new().field("a", json!("none")).signal("fine", true).signal("loud", true),
    );
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "pre-model");
    assert_eq!(names(&refused[0].1), ["y"]);
    assert_eq!(refused[0].1[0].source, "signal:loud", "the bad write names its emitter");
    assert_eq!(refused[0].1[0].reason, "`50` is above the maximum 10");
    assert_eq!(harness.data("note"), None, "the valid signal's write went with the invalid one");
}

#[test]
fn a_hook_emit_and_an_action_emit_of_one_phase_are_one_unit() {
    let mut harness = harness(json!({}));
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("hook", Understood::new().field("a", json!("hook")));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0].0.as_str(), names(&refused[0].1)), ("pre-model", vec!["y"]));
    assert_eq!(harness.data("x"), None, "the hook's valid x = 1 is not committed either");
    assert_eq!(harness.data("note"), None, "nor the step's own `set`, in the same unit");
    assert_eq!(harness.data("y"), None);
}

#[test]
fn a_hook_emit_and_a_tool_directive_are_one_unit_naming_every_bad_write() {
    let mut harness = harness(json!({ "note": "n", "directive": { "set": { "y": 400, "z": 1 } } }));
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("tool", Understood::new().field("a", json!("tool")));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(names(&refused[0].1), ["y", "z"], "each bad write is named");
    assert_eq!(refused[0].1[1].reason, "is not declared");
    assert_eq!(harness.data("x"), None, "the hook's valid x = 2 is not committed");
    assert_eq!(harness.data("note"), None, "nor what the call saved");
}

#[test]
fn a_valid_unit_commits_whole() {
    let mut harness = harness(json!({ "note": "n", "directive": { "set": { "y": 4 } } }));
    harness.say_with("f", Understood::new().flow("f"));
    let result = harness.say_with("tool", Understood::new().field("a", json!("tool")));
    assert!(refused(&result).is_empty(), "{:?}", refused(&result));
    assert_eq!((harness.data("x"), harness.data("y")), (Some(json!(2)), Some(json!(4))));
    assert_eq!(harness.data("note"), Some(json!("n")), "the call's own save is committed with them");
}

#[test]
fn the_post_model_phase_is_one_unit() {
    let mut harness = harness(json!({}));
    let result = harness.say_with("g", Understood::new().flow("g"));
    let refused = refused(&result);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0].0.as_str(), names(&refused[0].1)), ("post-model", vec!["y"]));
    assert_eq!(harness.data("x"), None, "the finalize's x = 3 went with the on_complete's bad y");
}

const WORKFLOW: &str = r#"
schema { x: int  y: int 1..10 }
tool lookup() -> { x: int } { builtin echo }
flow w {
  auto step a {
    set x = 1
    emit set y = 5
    call lookup()
  }
}
"#;

#[test]
fn a_workflow_step_fails_naming_each_bad_write_and_keeps_none() {
    let program = super::harness::program(WORKFLOW);
    let mut tools = ToolRegistry::default();
    tools.register("lookup", Double::returning(json!({ "x": 7, "directive": { "set": { "y": 50, "nope": 1 } } })));
    let tool_env = super::harness::tool_env_at("2026-01-05T10:00:00Z");
    let sleep = |_: std::time::Duration| {};
    let runner = flowc::runtime::workflow::WorkflowRunner {
        program: &program,
        tools: &tools,
        model: None,
        tool_env: &tool_env,
        sleep: &sleep,
        on_progress: &mut |_: &flowc::runtime::workflow::StepProgress| {},
        checkpoint: &mut |_: &flowc::runtime::workflow::WorkflowRun| Ok(()),
    };
    let flow = flowc::ir::FlowId::from_index(0);
    let mut run = match runner.start(flow, &serde_json::Map::new(), Default::default()) {
        Ok(run) => run,
        Err(error) => panic!("{error}"),
    };
    let mut runner = runner;
    let _ = runner.run_within(&mut run, Default::default());
    assert_eq!(run.status, flowc::runtime::workflow::RunStatus::Failed);
    let error = run.steps[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("`y`: `50` is above the maximum 10") && error.contains("`nope`: is not declared"),
        "{error}"
    );
    assert!(run.data.is_empty(), "nothing the step did is kept: {:?}", run.data);
}
