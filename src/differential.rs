//! The run never leaves the picture (issue 20): generated programs are run
//! offline on random message scripts, and every transition the runtime
//! takes (read from its events) must be an edge that `flowc graph` draws
//! and that the checker's flow graph has; no step the run enters may be
//! reported `unreachable_step`, and a program the checker passes (so no
//! `auto_cycle`) must never spin until the turn's step limit stops it.
//!
//! The programs move in every way a run can: branches, list order with
//! passing over, `goto` between flows (a new run), signals whose position
//! moves the conversation before the reply (pre-phase) or from the next
//! turn (post-phase), and workflows whose polling loops `wait`.
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
    "I want a detour",
    "I want to change the plan",
    "I'm finished with this",
    "I want to begin again later",
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
    /// A signal's position moved the conversation from the flow it was in
    /// (if any) to a step: before the reply (pre-phase), or, applied after
    /// it (post-phase), to the step the next turn starts from.
    Signal { signal: usize, from: Option<FlowId>, to: (FlowId, StepId), skipped: Vec<(FlowId, StepId)> },
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
    /// A move this reader does not compare (an abort, several signals'
    /// positions merged): the next step entered starts afresh.
    lost: bool,
    /// The flow the conversation is in, as the events tell.
    flow: Option<FlowId>,
    /// A signal whose position moves the conversation next, with the flow
    /// it fired in.
    signal: Option<(usize, Option<FlowId>)>,
}

impl Reader {
    fn read(&mut self, program: &Program, events: &[Event], out: &mut Vec<Taken>) {
        for event in events {
            match event {
                Event::TurnStarted { .. } => self.skipped.clear(),
                Event::Routed { .. } => {
                    // Routing after a post-phase signal parked the
                    // conversation: the signal's move is not the one taken.
                    if self.signal.take().is_some() {
                        self.lost = true;
                    }
                    self.routed = true;
                    self.skipped.clear();
                }
                Event::FlowEntered { flow } => {
                    self.entered = true;
                    if self.signal.is_none() {
                        self.flow = program.flow_by_name(flow);
                    }
                }
                Event::StepSkipped { flow, step, .. } => self.skipped.extend(locate(program, flow, step)),
                Event::FlowCompleted { flow } => {
                    if self.signal.is_none()
                        && let Some(from) = self.at.filter(|(at, _)| program.flow_by_name(flow) == Some(*at))
                    {
                        out.push(Taken::Completed { from });
                    }
                    if self.signal.is_none() {
                        self.flow = None;
                    }
                }
                // A `goto` leaves the flow for a new run of one: the step
                // entered next is compared as entered from another flow.
                Event::FlowLeft { reason, .. } if reason.starts_with("goto") => {}
                Event::FlowLeft { .. } => {
                    self.lost = true;
                    self.flow = None;
                }
                Event::SignalMatched { signal, .. } => {
                    let index = program.signals.iter().position(|declared| declared.name == *signal);
                    let moves = index
                        .and_then(|index| program.signals.get(index))
                        .is_some_and(|declared| declared.then.as_ref().is_some_and(|then| then.position.is_some()));
                    if !moves {
                        // A signal that only writes or replies: the
                        // conversation goes on as it would have.
                        continue;
                    }
                    if self.signal.is_some() {
                        // Several positions merged: which won is the
                        // merge's, not compared here.
                        self.lost = true;
                    }
                    self.signal = index.map(|index| (index, self.flow));
                }
                Event::StepEntered { flow, step } => {
                    let Some(to) = locate(program, flow, step) else {
                        continue;
                    };
                    let skipped = std::mem::take(&mut self.skipped);
                    if let Some((signal, from)) = self.signal.take() {
                        if !self.lost {
                            out.push(Taken::Signal { signal, from, to, skipped });
                        }
                    } else if self.routed {
                        out.push(Taken::Routed { to, skipped });
                    } else if let Some(from) = self.at.filter(|_| !self.lost) {
                        out.push(Taken::Step { from, to, skipped, entered: self.entered });
                    }
                    self.at = Some(to);
                    self.flow = Some(to.0);
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
        Taken::Signal { signal, from, to, .. } => {
            use crate::ir::successor::{self, Jump, Landing};
            let Some(jump) = program
                .signals
                .get(*signal)
                .and_then(|declared| declared.then.as_ref()?.position.as_ref())
                .map(Jump::from)
            else {
                return false;
            };
            let landing = match from {
                Some(current) => Some(successor::landing(*current, jump)),
                None => successor::landing_outside(jump),
            };
            match landing {
                Some(Landing::Step(step)) => *from == Some(to.0) && step == to.1,
                Some(Landing::Enter(flow, step)) => arrives(flow, step, *to),
                Some(Landing::Complete(named)) => from
                    .and_then(|current| program.flow(current))
                    .and_then(|flow| successor::after_completion(flow, named))
                    .is_some_and(|next| arrives(next, StepId(0), *to)),
                Some(Landing::Listed(_) | Landing::Abort) | None => false,
            }
        }
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
/// was to the step it entered, through nothing but flow entries and
/// completions. Steps passed over are not on the path: the picture draws
/// an edge past them, from where the search in list order starts, to
/// each step it may stop at (so a jump drawn straight to a step that the
/// run passed over is caught).
fn picture_has(picture: &Graph, taken: &Taken) -> bool {
    let entry = |flow: FlowId| {
        picture
            .nodes
            .iter()
            .find(|node| node.kind == NodeKind::Entry && node.flow == Some(flow))
            .map(|node| node.id.clone())
    };
    let (start, target, to_completion) = match taken {
        Taken::Routed { to, .. } => (entry(to.0), Some(*to), false),
        Taken::Step { from, to, .. } => (Some(NodeId::step(from.0, from.1)), Some(*to), false),
        Taken::Completed { from } => (Some(NodeId::step(from.0, from.1)), None, true),
        Taken::Signal { signal, to, .. } => (Some(NodeId::signal(*signal)), Some(*to), false),
    };
    let Some(start) = start else {
        return false;
    };
    let target = target.map(|(flow, step)| NodeId::step(flow, step));
    let kind = |id: &NodeId| picture.nodes.iter().find(|node| node.id == *id).map(|node| node.kind);
    let mut seen = BTreeSet::from([start.clone()]);
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for edge in picture.edges.iter().filter(|edge| edge.from == node) {
            if Some(&edge.to) == target.as_ref() || (to_completion && kind(&edge.to) == Some(NodeKind::Complete)) {
                return true;
            }
            let through = matches!(kind(&edge.to), Some(NodeKind::Entry | NodeKind::Complete));
            if through && seen.insert(edge.to.clone()) {
                queue.push_back(edge.to.clone());
            }
        }
    }
    false
}

/// How many transitions were compared: all, those a signal's position
/// made, those that entered another flow on the way (a `goto`, a
/// completion), and the waits a workflow was resumed from.
#[derive(Clone, Copy, Debug, Default)]
struct Compared {
    transitions: usize,
    signals: usize,
    entered: usize,
    /// Workflow runs resumed after a `wait`.
    waits: usize,
}

/// What a program and a script were found to disagree on, if anything,
/// and how many transitions were compared.
fn disagreements(source: &str, script: &[&str]) -> Result<(Vec<String>, Compared), String> {
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
    let mut compared = Compared::default();
    for message in script {
        let result = runtime.run_turn(&mut session, message).map_err(|error| format!("{message:?}: {error}"))?;
        if result.stopped_reason == StopReason::AutoStepLimit {
            found.push(format!("{message:?}: the run spun until the step limit, and no auto_cycle was reported"));
        }
        let mut taken = Vec::new();
        reader.read(&program, &result.events, &mut taken);
        compared.transitions += taken.len();
        compared.signals += taken.iter().filter(|taken| matches!(taken, Taken::Signal { .. })).count();
        compared.entered += taken.iter().filter(|taken| matches!(taken, Taken::Step { entered: true, .. })).count();
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
    if let Taken::Step { to, .. } | Taken::Routed { to, .. } | Taken::Signal { to, .. } = transition
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
/// ending or adding to `total` by the numbers in `shape`, some waiting
/// and going back to the step before while `total` is small (a polling
/// loop: each lap adds at least 1, so every run ends).
fn workflow_program(shape: &[(u8, u8, u8)]) -> String {
    let mut out = String::from("schema { total: int \"A running total\" }\nflow w \"W\" {\n  requires total\n");
    let count = shape.len();
    for (index, (skip, branch, add)) in shape.iter().enumerate() {
        out.push_str(&format!("  auto step s{index} {{\n"));
        if skip % 3 == 0 {
            out.push_str(&format!("    skip_if total > {}\n", skip % 20));
        }
        let polls = add % 4 == 3 && index > 0;
        if polls {
            out.push_str(&format!("    set total = total + {}\n", 1 + add % 5));
            out.push_str("    wait 1s\n");
        } else {
            out.push_str(&format!("    set total = total + {}\n", add % 5));
        }
        let ahead = index + 2 + usize::from(*branch) % 3;
        if polls {
            out.push_str(&format!("    branch {{\n      if total < 12 -> s{}\n    }}\n", index - 1));
        } else if branch % 2 == 0 && ahead < count {
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
fn workflow_disagreements(source: &str, total: i64) -> Result<(Vec<String>, Compared), String> {
    use crate::runtime::workflow::{RunStatus, StepProgress, StepStatus, WorkflowRun, WorkflowRunner};
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
    // A step may be passed over on one lap and run on the next: what was
    // ever passed over is read at every checkpoint.
    let mut skipped: BTreeSet<(FlowId, StepId)> = BTreeSet::new();
    let mut checkpoint = |run: &WorkflowRun| {
        let passed = run.steps.iter().enumerate().filter(|(_, record)| record.status == StepStatus::Skipped);
        skipped.extend(passed.map(|(index, _)| (flow, StepId::from_index(index))));
        Ok(())
    };
    let mut runner = WorkflowRunner {
        program: &program,
        tools: &tools,
        tool_env: &tool_env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
        model: None,
    };
    let mut inputs = serde_json::Map::new();
    inputs.insert("total".to_string(), serde_json::json!(total));
    let mut run = runner.start(flow, &inputs, Default::default()).map_err(|error| error.to_string())?;
    // A run that waits is resumed at once (the clock is not what is
    // compared), as `flowc resume` would once its time came.
    let mut waits = 0usize;
    runner.run(&mut run)?;
    while run.status == RunStatus::Waiting && waits < 64 {
        waits += 1;
        runner.run(&mut run)?;
    }
    if run.status == RunStatus::Waiting {
        return Err(format!("the run still waits after {waits} resumptions"));
    }
    let skipped: Vec<(FlowId, StepId)> = skipped
        .into_iter()
        .chain(
            run.steps
                .iter()
                .enumerate()
                .filter(|(_, record)| record.status == StepStatus::Skipped)
                .map(|(index, _)| (flow, StepId::from_index(index))),
        )
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
    Ok((found, Compared { transitions: taken.len(), waits, ..Compared::default() }))
}

/// A generated program ([`crate::testgen::moving_program`]) whose "start
/// over" entry asks `s0` again (it clears a field `s0` collects) instead
/// of going back to a step whose fields are all set, which `auto_cycle`
/// rightly refuses.
/// Its `name` and `result` get examples, so that the offline model can read
/// them from a message that answers several fields at once.
fn conversation_program(flows: usize, steps: usize) -> String {
    crate::testgen::moving_program(flows, steps)
        .replace("name: string \"The user's name\"", "name: string \"The user's name\" examples \"Ann\", \"Bob\"")
        .replace("result: string", "result: string examples \"fine\", \"done\"")
        .replace("start over\" -> s0", "start over\" -> { set agree = null  goto_step s0 }")
}

fn script_strategy() -> impl Strategy<Value = (usize, usize, Vec<usize>)> {
    (1usize..=3, 6usize..=11, proptest::collection::vec(0..WORDS.len(), 4..16))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

#[test]
fn generated_conversations_never_leave_the_picture() {
    let cases = u32::try_from(env_number("FLOWC_PICTURE_CASES", 64)).unwrap_or(64);
    let seed = env_number("FLOWC_PICTURE_SEED", 20);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let compared = std::cell::Cell::new(Compared::default());
    let outcome = runner.run(&script_strategy(), |(flows, steps, words)| {
        let source = conversation_program(flows, steps);
        let script: Vec<&str> = words.iter().filter_map(|word| WORDS.get(*word).copied()).collect();
        let (found, count) = disagreements(&source, &script).map_err(TestCaseError::fail)?;
        let sum = compared.get();
        compared.set(Compared {
            transitions: sum.transitions + count.transitions,
            signals: sum.signals + count.signals,
            entered: sum.entered + count.entered,
            waits: 0,
        });
        prop_assert!(found.is_empty(), "{flows} flows of {steps} steps, script {script:?}:\n{}", found.join("\n"));
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    // Not a vacuous pass: the scripts do move the conversations.
    let compared = compared.get();
    eprintln!(
        "{} conversation transitions compared ({} by a signal's position, {} into another flow)",
        compared.transitions, compared.signals, compared.entered
    );
    assert!(compared.transitions >= usize::try_from(cases).unwrap_or(0), "only {compared:?} compared");
    assert!(compared.signals > 0 && compared.entered > 0, "no signal or flow-to-flow move compared: {compared:?}");
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
    let compared = std::cell::Cell::new(Compared::default());
    let outcome = runner.run(&strategy, |(shape, total)| {
        let source = workflow_program(&shape);
        // A shape whose steps the checker refuses (a step after an early
        // `next end` is never reached) is not a program to run.
        prop_assume!(!crate::pipeline::compile(&SourceFile::new("w.flow", &source)).has_errors());
        let (found, count) = workflow_disagreements(&source, total).map_err(TestCaseError::fail)?;
        let sum = compared.get();
        compared.set(Compared {
            transitions: sum.transitions + count.transitions,
            waits: sum.waits + count.waits,
            ..sum
        });
        prop_assert!(found.is_empty(), "total {total}, program:\n{source}\n{}", found.join("\n"));
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let compared = compared.get();
    eprintln!("{} workflow transitions compared ({} waits resumed)", compared.transitions, compared.waits);
    assert!(compared.transitions >= 2 * usize::try_from(cases).unwrap_or(0), "only {compared:?} compared");
    assert!(compared.waits > 0, "no run waited: {compared:?}");
}

/// The disagreements found so far, each a program and a script.
#[test]
fn fixtures_stay_inside_the_picture() {
    let fixtures: &[(&str, &str)] = &[
        (include_str!("../tests/fixtures/picture/hub.flow"), include_str!("../tests/fixtures/picture/hub.chat")),
        (
            include_str!("../tests/fixtures/picture/signal_detour.flow"),
            include_str!("../tests/fixtures/picture/signal_detour.chat"),
        ),
    ];
    for (source, chat) in fixtures {
        let script: Vec<&str> = chat.lines().filter(|line| !line.trim().is_empty()).collect();
        match disagreements(source, &script) {
            Ok((found, compared)) => {
                assert!(found.is_empty() && compared.transitions > 0, "{compared:?} compared: {}", found.join("\n"))
            }
            Err(error) => panic!("{error}"),
        }
    }
    // The detour's signal move is compared, not lost.
    let detour = include_str!("../tests/fixtures/picture/signal_detour.flow");
    match disagreements(detour, &["I want to order food", "I want a detour"]) {
        Ok((_, compared)) => assert_eq!(compared.signals, 1, "{compared:?}"),
        Err(error) => panic!("{error}"),
    }
    let workflow = include_str!("../tests/fixtures/picture/skip_first.flow");
    match workflow_disagreements(workflow, 5) {
        Ok((found, compared)) => {
            assert!(found.is_empty() && compared.transitions > 0, "{compared:?} compared: {}", found.join("\n"))
        }
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
