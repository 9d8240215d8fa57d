//! The run follows the picture (issue 20): where a run enters a flow and
//! which AI conditions a turn asks are decided by the successor rule, the
//! one the checker proves and `flowc graph` draws.

use super::harness::{Harness, Understood, steps, tool_env_at};
use flowc::runtime::tools::ToolRegistry;
use flowc::runtime::workflow::{StepProgress, StepStatus, WorkflowRun, WorkflowRunner};
use serde_json::json;

/// A workflow whose first step is passed over when `total` is large.
const SKIP_FIRST: &str = r#"
schema { total: int "A total"  note: string "What ran" }
flow w "W" {
  requires total
  auto step first {
    skip_if total > 3
    set note = "first ran"
  }
  auto step second {
    set total = total + 1
  }
}
"#;

fn run_workflow(source: &str, inputs: serde_json::Value) -> WorkflowRun {
    let program = super::harness::program(source);
    let Some(flow) = program.flow_by_name("w") else { panic!("no workflow `w`") };
    let env = tool_env_at(super::harness::NOW);
    let tools = ToolRegistry::default();
    let sleep = |_: std::time::Duration| {};
    let mut on_progress = |_: &StepProgress| {};
    let mut checkpoint = |_: &WorkflowRun| Ok(());
    let mut runner = WorkflowRunner {
        program: &program,
        tools: &tools,
        tool_env: &env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
        model: None,
    };
    let Some(inputs) = inputs.as_object() else { panic!("inputs must be an object") };
    let mut run = match runner.start(flow, inputs, Default::default()) {
        Ok(run) => run,
        Err(error) => panic!("{error}"),
    };
    if let Err(error) = runner.run(&mut run) {
        panic!("{error}");
    }
    run
}

#[test]
fn a_workflow_passes_over_its_first_step_when_its_skip_if_holds() {
    let run = run_workflow(SKIP_FIRST, json!({"total": 5}));
    assert_eq!(run.steps[0].status, StepStatus::Skipped, "the graph draws the skip edge; the run takes it");
    assert_eq!(run.data.get("note"), None, "the first step did not run");
    assert_eq!(run.steps[1].status, StepStatus::Completed);
    assert_eq!(run.data.get("total"), Some(&json!(6)));

    let small = run_workflow(SKIP_FIRST, json!({"total": 1}));
    assert_eq!(small.steps[0].status, StepStatus::Completed);
    assert_eq!(small.data.get("note"), Some(&json!("first ran")));
}

#[test]
fn a_workflow_whose_every_step_is_passed_over_completes_at_once() {
    let source = SKIP_FIRST.replace("set total = total + 1", "skip_if total > 3\n    set total = total + 1");
    let run = run_workflow(&source, json!({"total": 9}));
    assert_eq!(run.status, flowc::runtime::workflow_run::RunStatus::Completed);
    assert!(run.steps.iter().all(|step| step.status == StepStatus::Skipped));
    assert_eq!(run.data.get("total"), Some(&json!(9)));
}

/// The issue's program: `ask` jumps back to `hub`, whose `when` entry the
/// turn must ask although `hub` comes first in the list.
const HUB: &str = r#"
schema { n: int "A number"  liked: string "What they liked" }
flow f "F" {
  when "the user wants to order food"
  step hub {
    say "Welcome."
    branch {
      when "the user mentions pizza" -> pizza
      else -> ask
    }
  }
  step ask {
    prompt "A number?"
    collect n
    branch {
      else -> { set liked = "numbers", n = null  goto_step hub }
    }
  }
  step pizza {
    say "Pizza it is."
    next end
  }
}
"#;

#[test]
fn a_step_reached_by_a_jump_backwards_has_its_when_asked() {
    let mut harness = Harness::new(HUB);
    let first = harness.say_with("start f", Understood::new().flow("f"));
    assert_eq!(steps(&first), ["hub", "ask"]);
    harness.understand_next(Understood::new().field("n", json!(7)).condition("f.hub#1", true));
    let second = harness.say("7, and I love pizza");
    let asked: Vec<String> = harness.last_understand().conditions.iter().map(|question| question.id.clone()).collect();
    assert_eq!(asked, ["f.hub#1"], "hub comes before ask in the list, yet the turn can reach it");
    assert_eq!(steps(&second), ["ask", "hub", "pizza"]);
    assert_eq!(second.reply, "Welcome.\nPizza it is.");
}

#[test]
fn the_offline_model_takes_the_pizza_branch_after_the_jump_back() {
    let program = super::harness::program(HUB);
    let mut runtime = flowc::runtime::engine::Runtime::new(
        program,
        Box::new(flowc::llm::offline::Offline::new()),
        flowc::runtime::engine::RuntimeOptions {
            tool_env: tool_env_at(super::harness::NOW),
            tools: Default::default(),
            limits: Default::default(),
        },
    );
    let mut session = runtime.new_session("offline");
    let first = match runtime.run_turn(&mut session, "I want to order food") {
        Ok(result) => result,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(steps(&first), ["hub", "ask"]);
    let second = match runtime.run_turn(&mut session, "7, and I love pizza") {
        Ok(result) => result,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(steps(&second), ["ask", "hub", "pizza"]);
    assert_eq!(session.data.get("liked"), Some(&json!("numbers")), "`ask` took its branch back to `hub`");
}
