//! The step graph of a flow: every way the conversation can move from one
//! step to the next, as LANGUAGE.md sections 4, 9 and 11 define it. Leaving
//! a step tries its branch entries in order, then its `next`, then the next
//! step in the list; a step whose `skip_if` holds, or whose `when`/`if` does
//! not, is passed over to the next step in the list; directives (`reset`,
//! `goto_step`, `goto`, `complete`) jump.
//!
//! Reachability, definite assignment and cycle detection all walk this one
//! graph, so they agree on what a path is. Edges carry how they are taken
//! ([`Via`]) so that a branch entry found unreachable, or a fallthrough no
//! step can take, is switched off in one place ([`FlowGraph::live`]).

use super::conditions::fold_bool;
use super::walk::{StepPart, step_directives};
use crate::ir::{Directive, Flow, FlowId, Next, Position, Step, StepId, Then};
use crate::source::Span;

/// Where an edge leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A step of the same flow.
    Step(StepId),
    /// The flow completes (then enters `next`, or the flow's `complete.next`).
    Complete { next: Option<FlowId> },
    /// Another flow (or this one afresh, by `goto`), at a step.
    Enter(FlowId, StepId),
}

/// How an edge is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// Branch entry `n` matched (to its step, by its directive, or, for a
    /// directive without a position, on to the step's linear successor).
    Branch(usize),
    /// No branch entry matched: `next`, else the next step in the list.
    Fallthrough,
    /// The step was passed over (`skip_if`, `when`, `if`): it did not run.
    Skip,
    /// A directive emitted by an action, a hook or `on_no_answer`.
    Directive,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub target: Target,
    pub via: Via,
}

/// One flow's graph, with what is known to be dead switched off.
#[derive(Clone, Debug, Default)]
pub(crate) struct FlowGraph {
    /// Per step, its outgoing edges.
    pub edges: Vec<Vec<Edge>>,
    /// Per step, the condition that keeps it from ever running (an `if`
    /// that is always false, a `skip_if` that is always true).
    pub never_runs: Vec<Option<Span>>,
    /// Per step and branch entry, whether the entry can never match.
    pub dead_branches: Vec<Vec<bool>>,
    /// Per step, whether some branch entry always matches, so neither its
    /// `next` nor the next step in the list is ever taken from it.
    pub fallthrough_dead: Vec<bool>,
}

impl FlowGraph {
    pub(crate) fn len(&self) -> usize {
        self.edges.len()
    }

    /// Whether an edge out of `step` can be taken.
    pub(crate) fn live(&self, step: usize, edge: &Edge) -> bool {
        if edge.via == Via::Skip {
            return true;
        }
        if self.never_runs.get(step).is_some_and(Option::is_some) {
            return false;
        }
        match edge.via {
            Via::Branch(index) => {
                !self.dead_branches.get(step).and_then(|entries| entries.get(index)).copied().unwrap_or(false)
            }
            Via::Fallthrough => !self.fallthrough_dead.get(step).copied().unwrap_or(false),
            Via::Skip | Via::Directive => true,
        }
    }

    /// The live edges out of `step`.
    pub(crate) fn live_edges(&self, step: usize) -> impl Iterator<Item = &Edge> {
        self.edges.get(step).into_iter().flatten().filter(move |edge| self.live(step, edge))
    }
}

/// Builds the graph of one flow, with nothing switched off yet except the
/// steps whose own condition folds to a constant.
pub(crate) fn build(flow_id: FlowId, flow: &Flow) -> FlowGraph {
    let count = flow.steps.len();
    let mut graph = FlowGraph {
        edges: Vec::with_capacity(count),
        never_runs: Vec::with_capacity(count),
        dead_branches: flow.steps.iter().map(|step| vec![false; step.branches.len()]).collect(),
        fallthrough_dead: vec![false; count],
    };
    for (index, step) in flow.steps.iter().enumerate() {
        let (skippable, never_runs) = passing_over(step);
        let mut edges = Vec::new();
        if skippable {
            edges.push(Edge { target: following(flow, index), via: Via::Skip });
        }
        let linear = linear_successor(flow, index, step);
        for (part, directive) in step_directives(step) {
            let via = match part {
                StepPart::Branch(entry) => Via::Branch(entry),
                StepPart::PreAction | StepPart::Finalize | StepPart::OnNoAnswer => Via::Directive,
            };
            match directive_target(flow_id, directive) {
                Some(target) => edges.push(Edge { target, via }),
                // A branch's directive without a position writes and
                // replies, then resolution goes on as if nothing matched.
                None if matches!(via, Via::Branch(_)) && directive.position.is_none() => {
                    edges.push(Edge { target: linear, via });
                }
                None => {}
            }
        }
        for (entry, branch) in step.branches.iter().enumerate() {
            if let Then::Step(target) = branch.then {
                edges.push(Edge { target: Target::Step(target), via: Via::Branch(entry) });
            }
        }
        edges.push(Edge { target: linear, via: Via::Fallthrough });
        graph.edges.push(edges);
        graph.never_runs.push(never_runs);
    }
    graph
}

/// Whether a step can be passed over, and the condition that always passes
/// it over, if one does.
fn passing_over(step: &Step) -> (bool, Option<Span>) {
    let mut skippable = !step.when.is_empty();
    let mut never_runs = None;
    if let Some(skip_if) = &step.skip_if {
        match fold_bool(skip_if) {
            Some(false) => {}
            Some(true) => {
                skippable = true;
                never_runs = Some(skip_if.span);
            }
            None => skippable = true,
        }
    }
    for guard in &step.guard {
        match fold_bool(guard) {
            Some(true) => {}
            Some(false) => {
                skippable = true;
                never_runs = never_runs.or(Some(guard.span));
            }
            None => skippable = true,
        }
    }
    (skippable, never_runs)
}

/// The step after `index` in the list, or completion after the last.
fn following(flow: &Flow, index: usize) -> Target {
    if index + 1 < flow.steps.len() {
        Target::Step(StepId::from_index(index + 1))
    } else {
        Target::Complete { next: None }
    }
}

/// Where a step goes when no branch entry moves it: its `next`, else the
/// next step in the list.
fn linear_successor(flow: &Flow, index: usize, step: &Step) -> Target {
    match step.next {
        Some(Next::Step(target)) => Target::Step(target),
        Some(Next::End) => Target::Complete { next: None },
        None => following(flow, index),
    }
}

/// Where a directive's position field sends the conversation, if it moves
/// it somewhere the graph follows (`abort` ends the flow: no edge).
pub(crate) fn directive_target(flow_id: FlowId, directive: &Directive) -> Option<Target> {
    match directive.position.as_ref()? {
        Position::Goto { flow, .. } => Some(Target::Enter(*flow, StepId(0))),
        Position::GotoStep { flow, step } if *flow == flow_id => Some(Target::Step(*step)),
        Position::GotoStep { flow, step } => Some(Target::Enter(*flow, *step)),
        Position::Complete { next } => Some(Target::Complete { next: *next }),
        Position::Reset => Some(Target::Step(StepId(0))),
        Position::Abort { .. } => None,
    }
}
