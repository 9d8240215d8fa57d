//! The step graph of a flow: every way the conversation can move from one
//! step to the next, by the successor rule the runtime follows
//! ([`crate::ir::successor`]): leaving a step tries its branch entries in
//! order, then its `next`, then the next step in the list; directives
//! (`reset`, `goto_step`, `goto`, `complete`) jump.
//!
//! Passing over a step (its `skip_if` holds, or its `when`/`if` does not)
//! happens only when the step is reached *in list order*: at the flow's
//! entry, after a step with no `next`, after a branch directive without a
//! position. A step named by `next`, a branch, `reset` or `goto_step` is
//! entered as named. So a step that can be passed over has two nodes: the
//! step itself (it runs) and its *listed arrival*, which leads either into
//! the step (its conditions held) or on to the next listed arrival. Nodes
//! `0..n` are the steps, `n..2n` the listed arrivals (used only for steps
//! that can be passed over).
//!
//! Reachability, definite assignment and cycle detection all walk this one
//! graph, so they agree on what a path is. Edges carry how they are taken
//! ([`Via`]) so that a branch entry found unreachable, or a fallthrough no
//! step can take, is switched off in one place ([`FlowGraph::live`]).

use super::conditions::fold_bool;
use crate::ir::successor::{self, Exit, Jump, Landing, landing};
use crate::ir::{Directive, Flow, FlowId, Step, StepId};
use crate::source::Span;

/// Where an edge leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum To {
    /// A node of this flow's graph (a step, or a listed arrival).
    Node(usize),
    /// The flow completes (then enters `next`, or the flow's `complete.next`).
    Complete { next: Option<FlowId> },
    /// Another flow (or this one afresh, by `goto`), at a step; at its
    /// first step, the arrival is in list order.
    Enter(FlowId, StepId),
}

/// How an edge is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// Branch entry `n` matched (to its step, by its directive, or, for a
    /// directive without a position, on to the next step in the list).
    Branch(usize),
    /// No branch entry matched: `next`, else the next step in the list.
    Fallthrough,
    /// A directive emitted by an action or a hook.
    Directive,
    /// The directive of `on_no_answer` or `on_error`: taken only when the
    /// step gives up asking or fails.
    Recovery,
    /// From a listed arrival into its step: the step's conditions held.
    Arrive,
    /// From a listed arrival past its step: the step was passed over.
    Skip,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub to: To,
    pub via: Via,
}

/// One flow's graph, with what is known to be dead switched off.
#[derive(Clone, Debug, Default)]
pub(crate) struct FlowGraph {
    steps: usize,
    /// Per step, whether it can be passed over (has a listed arrival node).
    pub skippable: Vec<bool>,
    /// Per node (steps, then listed arrivals), its outgoing edges.
    pub edges: Vec<Vec<Edge>>,
    /// Per step, the condition that keeps it from running when reached in
    /// list order (an `if` that is always false, a `skip_if` always true).
    pub never_runs: Vec<Option<Span>>,
    /// Per step and branch entry, whether the entry can never match.
    pub dead_branches: Vec<Vec<bool>>,
    /// Per step, whether some branch entry always matches, so neither its
    /// `next` nor the next step in the list is ever taken from it.
    pub fallthrough_dead: Vec<bool>,
}

impl FlowGraph {
    /// The number of steps (nodes `0..steps` are the steps).
    pub(crate) fn steps(&self) -> usize {
        self.steps
    }

    /// The number of nodes: steps and listed arrivals.
    pub(crate) fn nodes(&self) -> usize {
        self.edges.len()
    }

    /// Where arriving in list order at step `index` leads: its listed
    /// arrival node when it can be passed over, else the step; past the
    /// last step, completion.
    pub(crate) fn listed(&self, index: usize) -> To {
        if index >= self.steps {
            return To::Complete { next: None };
        }
        if self.skippable.get(index).copied().unwrap_or(false) { To::Node(self.steps + index) } else { To::Node(index) }
    }

    /// The node the flow starts at, if it has steps.
    pub(crate) fn entry(&self) -> Option<usize> {
        match self.listed(0) {
            To::Node(node) => Some(node),
            _ => None,
        }
    }

    /// The step a node belongs to, and whether the node is its listed
    /// arrival.
    pub(crate) fn step_of(&self, node: usize) -> (usize, bool) {
        if node < self.steps { (node, false) } else { (node - self.steps, true) }
    }

    /// Whether an edge out of `node` can be taken.
    pub(crate) fn live(&self, node: usize, edge: &Edge) -> bool {
        match edge.via {
            Via::Branch(index) => {
                !self.dead_branches.get(node).and_then(|entries| entries.get(index)).copied().unwrap_or(false)
            }
            Via::Fallthrough => !self.fallthrough_dead.get(node).copied().unwrap_or(false),
            Via::Directive | Via::Recovery | Via::Arrive | Via::Skip => true,
        }
    }

    /// The live edges out of `node`.
    pub(crate) fn live_edges(&self, node: usize) -> impl Iterator<Item = &Edge> {
        self.edges.get(node).into_iter().flatten().filter(move |edge| self.live(node, edge))
    }

    /// Where a landing of the successor rule is in this graph; `None` for
    /// an abort, which ends the flow.
    pub(crate) fn to(&self, landing: Landing) -> Option<To> {
        match landing {
            Landing::Listed(index) => Some(self.listed(index)),
            other => FlowGraph::jump_target(other),
        }
    }

    /// [`FlowGraph::to`] for the landings of a jump, which never arrive in
    /// list order.
    fn jump_target(landing: Landing) -> Option<To> {
        match landing {
            Landing::Step(step) => Some(To::Node(step.index())),
            Landing::Complete(next) => Some(To::Complete { next }),
            Landing::Enter(flow, step) => Some(To::Enter(flow, step)),
            Landing::Abort => None,
            // Only a directive without a position goes on in list order,
            // and only from a branch entry.
            Landing::Listed(_) => None,
        }
    }
}

/// Builds the graph of one flow, with nothing switched off yet except the
/// arrivals of steps whose own condition folds to "pass over".
pub(crate) fn build(flow_id: FlowId, flow: &Flow) -> FlowGraph {
    let count = flow.steps.len();
    let passing: Vec<(bool, Option<Span>)> = flow.steps.iter().map(passing_over).collect();
    let mut graph = FlowGraph {
        steps: count,
        skippable: passing.iter().map(|(skippable, _)| *skippable).collect(),
        edges: Vec::with_capacity(2 * count),
        never_runs: passing.iter().map(|(_, never)| *never).collect(),
        dead_branches: flow.steps.iter().map(|step| vec![false; step.branches.len()]).collect(),
        fallthrough_dead: vec![false; count],
    };
    for (index, step) in flow.steps.iter().enumerate() {
        let edges = step_edges(&graph, flow_id, index, step);
        graph.edges.push(edges);
    }
    for index in 0..count {
        let mut edges = Vec::new();
        if graph.skippable.get(index).copied().unwrap_or(false) {
            if graph.never_runs.get(index).is_none_or(Option::is_none) {
                edges.push(Edge { to: To::Node(index), via: Via::Arrive });
            }
            edges.push(Edge { to: graph.listed(index + 1), via: Via::Skip });
        }
        graph.edges.push(edges);
    }
    graph
}

fn step_edges(graph: &FlowGraph, flow_id: FlowId, index: usize, step: &Step) -> Vec<Edge> {
    successor::exits(flow_id, StepId::from_index(index), step)
        .into_iter()
        .filter_map(|(exit, landing)| {
            let via = match exit {
                Exit::Branch(entry) => Via::Branch(entry),
                Exit::Fallthrough => Via::Fallthrough,
                Exit::Directive => Via::Directive,
                Exit::Recovery => Via::Recovery,
            };
            graph.to(landing).map(|to| Edge { to, via })
        })
        .collect()
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

/// Where a directive's position field sends the conversation, if it moves
/// it somewhere the graph follows (`abort` ends the flow: no edge).
pub(crate) fn directive_target(flow_id: FlowId, directive: &Directive) -> Option<To> {
    let jump = Jump::from(directive.position.as_ref()?);
    FlowGraph::jump_target(landing(flow_id, jump))
}
