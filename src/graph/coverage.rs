//! Coverage: which steps, branch entries and transitions runs reached, read
//! from their events, and how that lies on the graph (`Overlay`) for the
//! emitters to colour. `flowc test` collects it; `flowc graph --coverage`
//! draws it. No I/O.

use super::{Graph, NodeId};
use crate::ir::successor::{self, Landing};
use crate::ir::{FlowId, Program, StepId};
use crate::runtime::events::Event;
use crate::runtime::workflow::WorkflowRun;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A place a run can be, by name (names survive a program's edits that
/// ids do not, and they read well in the coverage file).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// A user message, before any flow.
    Message,
    /// `flowc run` starting a workflow.
    Run,
    /// Entering the named flow.
    Entry(String),
    /// The step (flow, step) reached.
    Step(String, String),
    /// The named flow completing.
    Complete(String),
    /// The named flow aborting.
    Abort(String),
}

/// What some runs reached, by flow and step name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Covered {
    /// Steps reached, as (flow, step).
    pub steps: BTreeSet<(String, String)>,
    /// Flow, step and entry, counted from 1 as [`Event::BranchTaken`] does.
    pub branches: BTreeSet<(String, String, usize)>,
    /// Transitions taken between points, as (from, to).
    pub transitions: BTreeSet<(Point, Point)>,
    /// Where the conversation stands between turns.
    #[serde(skip)]
    at: Option<Point>,
}

impl Covered {
    /// Adds what another set of runs reached.
    pub fn merge(&mut self, other: &Covered) {
        self.steps.extend(other.steps.iter().cloned());
        self.branches.extend(other.branches.iter().cloned());
        self.transitions.extend(other.transitions.iter().cloned());
    }

    fn move_to(&mut self, point: Point) {
        if let Some(from) = self.at.take()
            && from != point
        {
            self.transitions.insert((from, point.clone()));
        }
        self.at = Some(point);
    }

    /// Adds a conversation turn's events.
    pub fn add_events(&mut self, events: &[Event]) {
        for event in events {
            match event {
                Event::TurnStarted { .. } => {
                    // A turn that starts outside every flow starts at the
                    // message, which routing takes into a flow.
                    if matches!(self.at, None | Some(Point::Complete(_) | Point::Abort(_))) {
                        self.at = Some(Point::Message);
                    }
                }
                Event::FlowEntered { flow } => self.move_to(Point::Entry(flow.clone())),
                Event::StepEntered { flow, step } | Event::StepExecuted { flow, step } => {
                    self.steps.insert((flow.clone(), step.clone()));
                    self.move_to(Point::Step(flow.clone(), step.clone()));
                }
                Event::BranchTaken { flow, step, entry, .. } => {
                    self.branches.insert((flow.clone(), step.clone(), *entry));
                }
                Event::FlowCompleted { flow } => self.move_to(Point::Complete(flow.clone())),
                Event::FlowLeft { flow, reason } if reason == "aborted" => self.move_to(Point::Abort(flow.clone())),
                _ => {}
            }
        }
    }

    /// Adds a workflow run as it stands: the steps it started, in order,
    /// and the branch entries that lead from one to the next.
    pub fn add_run(&mut self, program: &Program, run: &WorkflowRun) {
        let flow_name = run.flow_name.clone();
        let flow = program.flow(run.flow);
        let mut at = Point::Run;
        let mut started: Vec<&str> = Vec::new();
        for event in &run.events {
            if event.event == "step_started"
                && let Some(step) = &event.step
            {
                started.push(step);
            }
        }
        let mut points = vec![Point::Entry(flow_name.clone())];
        points.extend(started.iter().map(|step| Point::Step(flow_name.clone(), (*step).to_string())));
        match run.status {
            crate::runtime::workflow::RunStatus::Completed => points.push(Point::Complete(flow_name.clone())),
            crate::runtime::workflow::RunStatus::Aborted => points.push(Point::Abort(flow_name.clone())),
            _ => {}
        }
        for point in points {
            if at != point {
                self.transitions.insert((at.clone(), point.clone()));
            }
            if let Point::Step(_, step) = &point {
                self.steps.insert((flow_name.clone(), step.clone()));
            }
            at = point;
        }
        let Some(flow) = flow else { return };
        for pair in started.windows(2) {
            let [from, to] = pair else { continue };
            let Some(step) = flow.step_by_name(from).and_then(|id| flow.step(id)) else { continue };
            let (Some(from_id), Some(target)) = (flow.step_by_name(from), flow.step_by_name(to)) else { continue };
            // The first entry whose landing is the step the run went to
            // next (a step named, or a directive's `goto_step` to it).
            let entry = step
                .branches
                .iter()
                .position(|branch| successor::branch_landing(run.flow, from_id, &branch.then) == Landing::Step(target));
            if let Some(entry) = entry {
                self.branches.insert((flow_name.clone(), (*from).to_string(), entry + 1));
            }
        }
    }
}

/// One flow's coverage as counts: reached and total.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowCoverage {
    /// The flow's name.
    pub flow: String,
    /// Steps reached, of all its steps.
    pub steps: (usize, usize),
    /// Branch entries taken, of all its entries.
    pub branches: (usize, usize),
    /// Transitions taken, of all its edges.
    pub transitions: (usize, usize),
    /// The names of the steps and branch entries not reached.
    pub missed: Vec<String>,
}

/// Counts per flow. Transitions are the graph's edges that start in the
/// flow (or enter it from a message or a run).
pub fn per_flow(program: &Program, graph: &Graph, covered: &Covered) -> Vec<FlowCoverage> {
    let overlay = Overlay::new(program, graph, covered);
    let mut table = Vec::new();
    for (index, flow) in program.flows.iter().enumerate() {
        let flow_id = FlowId::from_index(index);
        let mut row = FlowCoverage { flow: flow.name.clone(), ..FlowCoverage::default() };
        for step in &flow.steps {
            row.steps.1 += 1;
            if covered.steps.contains(&(flow.name.clone(), step.name.clone())) {
                row.steps.0 += 1;
            } else {
                row.missed.push(step.name.clone());
            }
            for (entry, branch) in step.branches.iter().enumerate() {
                row.branches.1 += 1;
                // Entries count from 1, as the runtime's events name them.
                if covered.branches.contains(&(flow.name.clone(), step.name.clone(), entry + 1)) {
                    row.branches.0 += 1;
                } else {
                    let label = branch.label.clone().unwrap_or_else(|| format!("entry {}", entry + 1));
                    row.missed.push(format!("{}[{label}]", step.name));
                }
            }
        }
        let owner = |id: &NodeId| graph.nodes.iter().find(|node| node.id == *id).and_then(|node| node.flow);
        for (edge, reached) in graph.edges.iter().zip(&overlay.edges) {
            let from = owner(&edge.from);
            let belongs = from == Some(flow_id) || (from.is_none() && owner(&edge.to) == Some(flow_id));
            if belongs {
                row.transitions.1 += 1;
                row.transitions.0 += usize::from(*reached);
            }
        }
        table.push(row);
    }
    table
}

/// Coverage laid on a graph: the nodes reached and, per edge (in the
/// graph's order), whether it was taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Overlay {
    pub nodes: BTreeSet<NodeId>,
    pub edges: Vec<bool>,
}

impl Overlay {
    pub fn new(program: &Program, graph: &Graph, covered: &Covered) -> Overlay {
        let node = |point: &Point| -> Option<NodeId> {
            let flow = |name: &str| program.flow_by_name(name);
            Some(match point {
                Point::Message => NodeId::message(),
                Point::Run => NodeId::run(),
                Point::Entry(name) => NodeId::entry(flow(name)?),
                Point::Complete(name) => NodeId::complete(flow(name)?),
                Point::Abort(name) => NodeId::abort(flow(name)?),
                Point::Step(name, step) => {
                    let flow_id = flow(name)?;
                    let step_id: StepId = program.flow(flow_id)?.step_by_name(step)?;
                    NodeId::step(flow_id, step_id)
                }
            })
        };
        let pairs: BTreeSet<(NodeId, NodeId)> =
            covered.transitions.iter().filter_map(|(from, to)| Some((node(from)?, node(to)?))).collect();
        let mut nodes: BTreeSet<NodeId> = pairs.iter().flat_map(|(from, to)| [from.clone(), to.clone()]).collect();
        for (flow, step) in &covered.steps {
            if let Some(id) = node(&Point::Step(flow.clone(), step.clone())) {
                nodes.insert(id);
            }
        }
        let edges = graph.edges.iter().map(|edge| pairs.contains(&(edge.from.clone(), edge.to.clone()))).collect();
        Overlay { nodes, edges }
    }

    /// Whether a node stands for something a run can reach and so is
    /// coloured: steps, entries and ends, not messages or stubs.
    pub fn counts(kind: super::NodeKind) -> bool {
        !matches!(kind, super::NodeKind::FlowStub | super::NodeKind::Signal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    fn booking() -> Program {
        crate::pipeline::compile(&SourceFile::new("booking.flow", include_str!("../../flows/booking.flow"))).ir
    }

    fn step(event: fn(String, String) -> Event, step: &str) -> Event {
        event("booking".to_string(), step.to_string())
    }

    #[test]
    fn events_give_steps_branch_entries_and_the_edges_taken() {
        let program = booking();
        let entered = |flow, step| Event::StepEntered { flow, step };
        let mut covered = Covered::default();
        covered.add_events(&[
            Event::TurnStarted { turn: 1, message: String::new() },
            Event::FlowEntered { flow: "booking".to_string() },
            step(entered, "ask_hotel"),
            step(entered, "confirm"),
            Event::BranchTaken { flow: "booking".to_string(), step: "confirm".to_string(), entry: 1, label: None },
            step(entered, "book"),
            Event::FlowCompleted { flow: "booking".to_string() },
        ]);
        assert!(covered.branches.contains(&("booking".to_string(), "confirm".to_string(), 1)));
        assert!(covered.transitions.contains(&(Point::Message, Point::Entry("booking".to_string()))));
        let reachability = crate::check::reachability::analyze(&program);
        let graph = crate::graph::build(&program, &reachability, None);
        let rows = per_flow(&program, &graph, &covered);
        assert_eq!(rows[0].steps, (3, 6));
        assert_eq!(rows[0].branches, (1, 3));
        let overlay = Overlay::new(&program, &graph, &covered);
        let taken: Vec<(&str, &str)> = graph
            .edges
            .iter()
            .zip(&overlay.edges)
            .filter(|(_, taken)| **taken)
            .map(|(edge, _)| (edge.from.as_str(), edge.to.as_str()))
            .collect();
        assert!(taken.contains(&("msg_in", "f0_in")), "{taken:?}");
        assert!(taken.contains(&("f0_s3", "f0_s4")), "confirm → book: {taken:?}");
        assert!(!taken.contains(&("f0_s3", "f0_s5")), "confirm → cancelled was not taken: {taken:?}");
        assert!(overlay.nodes.contains(&NodeId::step(FlowId(0), StepId(4))));
        assert!(!overlay.nodes.contains(&NodeId::step(FlowId(0), StepId(5))));
    }

    /// A branch entry whose directive jumps with `goto_step` lands on the
    /// step it names, as one naming the step does: a run that went that
    /// way covered the entry.
    #[test]
    fn a_workflow_entry_that_jumps_by_directive_is_covered() {
        use crate::runtime::clock::{Clock, FixedClock, SeededIds};
        use crate::runtime::tools::ToolEnv;
        use crate::runtime::workflow::{StepProgress, WorkflowRunner};
        use std::sync::Arc;
        let source = r#"
schema { total: int "A running total" }
flow w "W" {
  requires total
  auto step a {
    set total = total + 1
    branch {
      if total > 3 -> { set total = 0  goto_step c }
    }
  }
  auto step b {
    set total = total + 1
  }
  auto step c {
    set total = total + 2
  }
}
"#;
        let compilation = crate::pipeline::compile(&SourceFile::new("w.flow", source));
        assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
        let program = compilation.ir;
        let clock: Arc<dyn Clock> = Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").expect("a fixed time"));
        let tool_env = ToolEnv { base_dir: std::path::PathBuf::from("."), clock, ids: Arc::new(SeededIds::new(7)) };
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
            model: None,
        };
        let mut inputs = serde_json::Map::new();
        inputs.insert("total".to_string(), serde_json::json!(5));
        let flow = program.flow_by_name("w").expect("flow w");
        let mut run = runner.start(flow, &inputs, Default::default()).expect("the run starts");
        runner.run(&mut run).expect("the run ends");
        let mut covered = Covered::default();
        covered.add_run(&program, &run);
        assert!(covered.steps.contains(&("w".to_string(), "c".to_string())), "{covered:?}");
        assert!(!covered.steps.contains(&("w".to_string(), "b".to_string())), "{covered:?}");
        assert!(covered.branches.contains(&("w".to_string(), "a".to_string(), 1)), "{covered:?}");
    }

    #[test]
    fn coverage_round_trips_through_json() {
        let mut covered = Covered::default();
        covered.steps.insert(("booking".to_string(), "confirm".to_string()));
        covered.transitions.insert((Point::Run, Point::Entry("onboarding".to_string())));
        let text = serde_json::to_string(&covered).unwrap_or_default();
        assert_eq!(serde_json::from_str::<Covered>(&text).ok(), Some(covered));
    }
}
