//! The run never leaves the picture (issue 20): generated programs are run
//! offline on random message scripts, and every transition the runtime
//! takes (read from its events) must be an edge that `flowc graph` draws
//! and that the checker's flow graph has; no step the run enters may be
//! reported `unreachable_step`, and a program the checker passes (so no
//! `auto_cycle`) must never spin until the turn's step limit stops it.
//!
//! Fixed seeds in CI; `FLOWC_PICTURE_CASES` and `FLOWC_PICTURE_SEED` run
//! more cases or other ones (`scripts/picture-long.sh`). Every disagreement
//! found becomes a fixture under `tests/fixtures/picture/`, checked here on
//! every run.

use crate::check::flowgraph::{FlowGraph, To};
use crate::check::reachability::{self, Reachability};
use crate::graph::{self, Graph, NodeId, NodeKind};
use crate::ids::{FlowId, StepId};
use crate::ir::Program;
use crate::runtime::clock::{Clock, FixedClock, SeededIds};
use crate::runtime::engine::{Runtime, RuntimeOptions};
use crate::runtime::events::{Event, StopReason};
use crate::runtime::tools::ToolEnv;
use crate::source::SourceFile;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

/// What the user may say to a generated program (`testgen::large_program`):
/// routing to each topic, every field's values, yes and no, the AI entry
/// that jumps back, the signal, and words that answer nothing.
const WORDS: &[&str] = &[
    "let's talk about topic 0",
    "I want to talk about topic 1",
    "topic 2 please",
    "My name is Ann",
    "I'm Bob, 7 of them, the pro plan, and yes I agree",
    "Ann here: 3, free, and no",
    "Bob, 12, enterprise, yes",
    "7",
    "600",
    "pro",
    "free",
    "enterprise",
    "yes",
    "no",
    "I want to start over",
    "a note: call me later",
    "the result is fine",
    "I want a human",
    "hello",
    "hmm",
];

/// A transition the run took, in the terms both graphs share.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Taken {
    /// From a step to a step, passing over `skipped`; `entered` when a
    /// flow was entered on the way (by a jump or a completion).
    Step { from: (FlowId, StepId), to: (FlowId, StepId), skipped: Vec<(FlowId, StepId)>, entered: bool },
    /// Routing entered a flow at a step.
    Routed { to: (FlowId, StepId), skipped: Vec<(FlowId, StepId)> },
    /// A step's flow completed.
    Completed { from: (FlowId, StepId) },
}

fn locate(program: &Program, flow: &str, step: &str) -> Option<(FlowId, StepId)> {
    let flow_id = program.flow_by_name(flow)?;
    let index = program.flow(flow_id)?.steps.iter().position(|declared| declared.name == step)?;
    Some((flow_id, StepId::from_index(index)))
}

/// Reads the transitions out of one conversation's events, turn after
/// turn; `at` is where the conversation waits between turns.
#[derive(Default)]
struct Reader {
    at: Option<(FlowId, StepId)>,
    routed: bool,
    entered: bool,
    skipped: Vec<(FlowId, StepId)>,
    /// A move this reader does not compare (a signal's, an abort): the
    /// next step entered starts afresh.
    lost: bool,
}

impl Reader {
    fn read(&mut self, program: &Program, events: &[Event], out: &mut Vec<Taken>) {
        for event in events {
            match event {
                Event::Routed { .. } => {
                    self.routed = true;
                    self.skipped.clear();
                }
                Event::FlowEntered { .. } => self.entered = true,
                Event::StepSkipped { flow, step, .. } => self.skipped.extend(locate(program, flow, step)),
                Event::FlowCompleted { flow } => {
                    if let Some(from) = self.at.filter(|(at, _)| program.flow_by_name(flow) == Some(*at)) {
                        out.push(Taken::Completed { from });
                    }
                }
                Event::FlowLeft { .. } | Event::SignalMatched { .. } => self.lost = true,
                Event::StepEntered { flow, step } => {
                    let Some(to) = locate(program, flow, step) else {
                        continue;
                    };
                    let skipped = std::mem::take(&mut self.skipped);
                    if self.routed {
                        out.push(Taken::Routed { to, skipped });
                    } else if let Some(from) = self.at.filter(|_| !self.lost) {
                        out.push(Taken::Step { from, to, skipped, entered: self.entered });
                    }
                    self.at = Some(to);
                    (self.routed, self.entered, self.lost) = (false, false, false);
                }
                _ => {}
            }
        }
    }
}

/// Where a landing in a flow graph can go on to without running a step:
/// through listed arrivals (each passed over or arrived at).
fn settles(graph: &FlowGraph, start: To) -> Vec<To> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([start]);
    while let Some(to) = queue.pop_front() {
        match to {
            To::Node(node) if node >= graph.steps() => {
                if seen.insert(node) {
                    queue.extend(graph.live_edges(node).map(|edge| edge.to));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Where leaving `step` can land in its flow graph, arrivals followed.
fn step_exits(graph: &FlowGraph, step: StepId) -> Vec<To> {
    graph.live_edges(step.index()).flat_map(|edge| settles(graph, edge.to)).collect()
}

/// Whether the checker's graphs have the transition.
fn checker_has(program: &Program, graphs: &[FlowGraph], taken: &Taken) -> bool {
    let arrives = |flow: FlowId, at: StepId, to: (FlowId, StepId)| {
        flow == to.0
            && graphs.get(flow.index()).is_some_and(|graph| {
                let landing = graph.to(crate::ir::successor::arrival(at));
                landing.is_some_and(|landing| settles(graph, landing).contains(&To::Node(to.1.index())))
            })
    };
    match taken {
        Taken::Routed { to, .. } => arrives(to.0, StepId(0), *to),
        Taken::Completed { from } => graphs
            .get(from.0.index())
            .is_some_and(|graph| step_exits(graph, from.1).iter().any(|to| matches!(to, To::Complete { .. }))),
        Taken::Step { from, to, entered, .. } => {
            let Some(graph) = graphs.get(from.0.index()) else {
                return false;
            };
            step_exits(graph, from.1).into_iter().any(|exit| match exit {
                To::Node(node) => !entered && from.0 == to.0 && node == to.1.index(),
                To::Enter(flow, step) => *entered && arrives(flow, step, *to),
                To::Complete { next } => {
                    *entered
                        && program
                            .flow(from.0)
                            .and_then(|flow| crate::ir::successor::after_completion(flow, next))
                            .is_some_and(|next| arrives(next, StepId(0), *to))
                }
            })
        }
    }
}

/// Whether the picture draws the transition: a path from where the run
/// was to the step it entered, through nothing but flow entries,
/// completions and the steps the run passed over.
fn picture_has(picture: &Graph, taken: &Taken) -> bool {
    let entry = |flow: FlowId| {
        picture
            .nodes
            .iter()
            .find(|node| node.kind == NodeKind::Entry && node.flow == Some(flow))
            .map(|node| node.id.clone())
    };
    let (start, target, skipped, to_completion) = match taken {
        Taken::Routed { to, skipped } => (entry(to.0), Some(*to), skipped.clone(), false),
        Taken::Step { from, to, skipped, .. } => {
            (Some(NodeId::step(from.0, from.1)), Some(*to), skipped.clone(), false)
        }
        Taken::Completed { from } => (Some(NodeId::step(from.0, from.1)), None, Vec::new(), true),
    };
    let Some(start) = start else {
        return false;
    };
    let passable: BTreeSet<NodeId> = skipped.iter().map(|(flow, step)| NodeId::step(*flow, *step)).collect();
    let target = target.map(|(flow, step)| NodeId::step(flow, step));
    let kind = |id: &NodeId| picture.nodes.iter().find(|node| node.id == *id).map(|node| node.kind);
    let mut seen = BTreeSet::from([start.clone()]);
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for edge in picture.edges.iter().filter(|edge| edge.from == node) {
            if Some(&edge.to) == target.as_ref() || (to_completion && kind(&edge.to) == Some(NodeKind::Complete)) {
                return true;
            }
            let through =
                passable.contains(&edge.to) || matches!(kind(&edge.to), Some(NodeKind::Entry | NodeKind::Complete));
            if through && seen.insert(edge.to.clone()) {
                queue.push_back(edge.to.clone());
            }
        }
    }
    false
}

/// What a program and a script were found to disagree on, if anything,
/// and how many transitions were compared.
fn disagreements(source: &str, script: &[&str]) -> Result<(Vec<String>, usize), String> {
    let compilation = crate::pipeline::compile(&SourceFile::new("generated.flow", source));
    if compilation.has_errors() {
        return Err(format!("the program does not compile: {:?}", compilation.diagnostics));
    }
    let program = Arc::new(compilation.ir);
    let analysis = reachability::analysis(&program);
    let reach: Reachability = reachability::analyze(&program);
    let picture = graph::build(&program, &reach, None);
    let clock: Arc<dyn Clock> = Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").map_err(|error| error.to_string())?);
    let tool_env = ToolEnv { base_dir: std::path::PathBuf::from("."), clock, ids: Arc::new(SeededIds::new(7)) };
    let mut runtime = Runtime::new(
        Arc::clone(&program),
        Box::new(crate::llm::offline::Offline::new()),
        RuntimeOptions { tool_env, tools: Default::default(), limits: Default::default() },
    );
    let mut session = runtime.new_session("picture");
    let mut reader = Reader::default();
    let mut found = Vec::new();
    let mut compared = 0;
    for message in script {
        let result = runtime.run_turn(&mut session, message).map_err(|error| format!("{message:?}: {error}"))?;
        if result.stopped_reason == StopReason::AutoStepLimit {
            found.push(format!("{message:?}: the run spun until the step limit, and no auto_cycle was reported"));
        }
        let mut taken = Vec::new();
        reader.read(&program, &result.events, &mut taken);
        compared += taken.len();
        for transition in taken {
            let before = found.len();
            compare(&program, (&analysis.graphs, &reach, &picture), &transition, &mut found);
            for finding in found.iter_mut().skip(before) {
                *finding = format!("{message:?}: {finding}");
            }
        }
    }
    Ok((found, compared))
}

/// Compares one transition with both graphs and the checker's findings.
fn compare(
    program: &Program,
    (graphs, reach, picture): (&[FlowGraph], &Reachability, &Graph),
    transition: &Taken,
    found: &mut Vec<String>,
) {
    if let Taken::Step { to, .. } | Taken::Routed { to, .. } = transition
        && reach.unreachable_steps.contains(to)
    {
        found.push(format!("entered {to:?}, which the checker reports unreachable_step"));
    }
    if !checker_has(program, graphs, transition) {
        found.push(format!("{transition:?} is not in the checker's flow graph"));
    }
    if !picture_has(picture, transition) {
        found.push(format!("{transition:?} is not drawn by `flowc graph`"));
    }
}

/// A workflow of `steps` auto steps, each passed over, branching forward,
/// ending or adding to `total` by the numbers in `shape` (no step goes
/// back, so every run ends).
fn workflow_program(shape: &[(u8, u8, u8)]) -> String {
    let mut out = String::from("schema { total: int \"A running total\" }\nflow w \"W\" {\n  requires total\n");
    let count = shape.len();
    for (index, (skip, branch, add)) in shape.iter().enumerate() {
        out.push_str(&format!("  auto step s{index} {{\n"));
        if skip % 3 == 0 {
            out.push_str(&format!("    skip_if total > {}\n", skip % 20));
        }
        out.push_str(&format!("    set total = total + {}\n", add % 5));
        let ahead = index + 2 + usize::from(*branch) % 3;
        if branch % 2 == 0 && ahead < count {
            out.push_str(&format!("    branch {{\n      if total > {} -> s{ahead}\n    }}\n", branch % 15));
        } else if branch % 7 == 1 {
            out.push_str("    next end\n");
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

/// Runs a workflow from `total` and compares each step it moved between,
/// from the run's start to its end, with both graphs.
fn workflow_disagreements(source: &str, total: i64) -> Result<(Vec<String>, usize), String> {
    use crate::runtime::workflow::{StepProgress, StepStatus, WorkflowRun, WorkflowRunner};
    let compilation = crate::pipeline::compile(&SourceFile::new("generated.flow", source));
    if compilation.has_errors() {
        return Err(format!("the program does not compile: {:?}", compilation.diagnostics));
    }
    let program = compilation.ir;
    let analysis = reachability::analysis(&program);
    let reach = reachability::analyze(&program);
    let picture = graph::build(&program, &reach, None);
    let clock: Arc<dyn Clock> = Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").map_err(|error| error.to_string())?);
    let tool_env = ToolEnv { base_dir: std::path::PathBuf::from("."), clock, ids: Arc::new(SeededIds::new(7)) };
    let flow = program.flow_by_name("w").ok_or("no workflow `w`")?;
    let tools = Default::default();
    let sleep = |_: std::time::Duration| {};
    let mut on_progress = |_: &StepProgress| {};
    let mut checkpoint = |_: &WorkflowRun| Ok(());
    let mut runner = WorkflowRunner {
        program: &program,
        tools: &tools,
        tool_env: &tool_env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
    };
    let mut inputs = serde_json::Map::new();
    inputs.insert("total".to_string(), serde_json::json!(total));
    let mut run = runner.start(flow, &inputs, Default::default()).map_err(|error| error.to_string())?;
    runner.run(&mut run)?;
    let skipped: Vec<(FlowId, StepId)> = run
        .steps
        .iter()
        .enumerate()
        .filter(|(_, record)| record.status == StepStatus::Skipped)
        .map(|(index, _)| (flow, StepId::from_index(index)))
        .collect();
    let started: Vec<(FlowId, StepId)> = run
        .events
        .iter()
        .filter(|event| event.event == "step_started")
        .filter_map(|event| locate(&program, "w", event.step.as_deref()?))
        .collect();
    let mut taken = Vec::new();
    if let Some(first) = started.first() {
        taken.push(Taken::Routed { to: *first, skipped: skipped.clone() });
    }
    for pair in started.windows(2) {
        if let [from, to] = pair {
            taken.push(Taken::Step { from: *from, to: *to, skipped: skipped.clone(), entered: false });
        }
    }
    if let Some(last) = started.last() {
        taken.push(Taken::Completed { from: *last });
    }
    let mut found = Vec::new();
    for transition in &taken {
        compare(&program, (&analysis.graphs, &reach, &picture), transition, &mut found);
    }
    Ok((found, taken.len()))
}

/// A generated program ([`crate::testgen::large_program`]) whose "start
/// over" entry asks `s0` again (it clears a field `s0` collects) instead
/// of going back to a step whose fields are all set, which `auto_cycle`
/// rightly refuses.
/// Its `name` and `result` get examples, so that the offline model can read
/// them from a message that answers several fields at once.
fn conversation_program(flows: usize, steps: usize) -> String {
    crate::testgen::large_program(flows, steps)
        .replace("name: string \"The user's name\"", "name: string \"The user's name\" examples \"Ann\", \"Bob\"")
        .replace("result: string", "result: string examples \"fine\", \"done\"")
        .replace("start over\" -> s0", "start over\" -> { set agree = null  goto_step s0 }")
}

fn script_strategy() -> impl Strategy<Value = (usize, usize, Vec<usize>)> {
    (1usize..=3, 6usize..=11, proptest::collection::vec(0..WORDS.len(), 1..10))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

#[test]
fn generated_conversations_never_leave_the_picture() {
    let cases = u32::try_from(env_number("FLOWC_PICTURE_CASES", 24)).unwrap_or(24);
    let seed = env_number("FLOWC_PICTURE_SEED", 20);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let compared = std::cell::Cell::new(0usize);
    let outcome = runner.run(&script_strategy(), |(flows, steps, words)| {
        let source = conversation_program(flows, steps);
        let script: Vec<&str> = words.iter().filter_map(|word| WORDS.get(*word).copied()).collect();
        let (found, count) = disagreements(&source, &script).map_err(TestCaseError::fail)?;
        compared.set(compared.get() + count);
        prop_assert!(found.is_empty(), "{flows} flows of {steps} steps, script {script:?}:\n{}", found.join("\n"));
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    // Not a vacuous pass: the scripts do move the conversations.
    eprintln!("{} conversation transitions compared", compared.get());
    assert!(compared.get() >= usize::try_from(cases).unwrap_or(0), "only {} transitions compared", compared.get());
}

#[test]
fn generated_workflows_never_leave_the_picture() {
    let cases = u32::try_from(env_number("FLOWC_PICTURE_CASES", 24)).unwrap_or(24);
    let seed = env_number("FLOWC_PICTURE_SEED", 20);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    seed_bytes[8] = 1;
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let strategy = (proptest::collection::vec(any::<(u8, u8, u8)>(), 2..9), 0i64..25);
    let compared = std::cell::Cell::new(0usize);
    let outcome = runner.run(&strategy, |(shape, total)| {
        let source = workflow_program(&shape);
        // A shape whose steps the checker refuses (a step after an early
        // `next end` is never reached) is not a program to run.
        prop_assume!(!crate::pipeline::compile(&SourceFile::new("w.flow", &source)).has_errors());
        let (found, count) = workflow_disagreements(&source, total).map_err(TestCaseError::fail)?;
        compared.set(compared.get() + count);
        prop_assert!(found.is_empty(), "total {total}, program:\n{source}\n{}", found.join("\n"));
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    eprintln!("{} workflow transitions compared", compared.get());
    assert!(compared.get() >= 2 * usize::try_from(cases).unwrap_or(0), "only {} transitions compared", compared.get());
}

/// The disagreements found so far, each a program and a script.
#[test]
fn fixtures_stay_inside_the_picture() {
    let fixtures: &[(&str, &str)] =
        &[(include_str!("../tests/fixtures/picture/hub.flow"), include_str!("../tests/fixtures/picture/hub.chat"))];
    for (source, chat) in fixtures {
        let script: Vec<&str> = chat.lines().filter(|line| !line.trim().is_empty()).collect();
        match disagreements(source, &script) {
            Ok((found, compared)) => {
                assert!(found.is_empty() && compared > 0, "{compared} compared: {}", found.join("\n"))
            }
            Err(error) => panic!("{error}"),
        }
    }
    let workflow = include_str!("../tests/fixtures/picture/skip_first.flow");
    match workflow_disagreements(workflow, 5) {
        Ok((found, compared)) => assert!(found.is_empty() && compared > 0, "{compared} compared: {}", found.join("\n")),
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn the_reader_turns_events_into_transitions_and_a_wrong_one_is_caught() {
    let source = include_str!("../tests/fixtures/picture/hub.flow");
    let compilation = crate::pipeline::compile(&SourceFile::new("hub.flow", source));
    let program = compilation.ir;
    let analysis = reachability::analysis(&program);
    let reach = reachability::analyze(&program);
    let picture = graph::build(&program, &reach, None);
    let (Some(hub), Some(ask), Some(pizza)) =
        (locate(&program, "f", "hub"), locate(&program, "f", "ask"), locate(&program, "f", "pizza"))
    else {
        panic!("the fixture's steps");
    };
    let back = Taken::Step { from: ask, to: hub, skipped: Vec::new(), entered: false };
    assert!(checker_has(&program, &analysis.graphs, &back) && picture_has(&picture, &back));
    // `pizza` never leads back to `ask`: neither graph has that edge, and
    // the comparison says so.
    let wrong = Taken::Step { from: pizza, to: ask, skipped: Vec::new(), entered: false };
    assert!(!checker_has(&program, &analysis.graphs, &wrong));
    assert!(!picture_has(&picture, &wrong));
}
