//! The definite-assignment dataflow of one flow: a forward "must" analysis
//! (a field is set on arrival only if it is set along every path) over the
//! live edges of the flow's graph, from the step summaries of
//! [`super::summary`]. Fields are processed 64 at a time (one machine word
//! per node), which keeps memory linear in the flow's size whatever the
//! number of fields. Both the `maybe_unset` rule and reachability (which
//! folds code-only branch conditions on fields known set) ask it.

use super::flowgraph::{FlowGraph, To, Via};
use super::summary::{FlowSummary, StepSummary, summarize};
use crate::ir::{FieldId, Flow, StepId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// How an edge's state is made from its source node's.
#[derive(Clone, Copy)]
enum Carry {
    /// The source's state as it is (a listed arrival passing over its step,
    /// or into it: `Arrive` adds the conditions' facts).
    Skipped,
    Arrive,
    /// The step ran: its arrival state and what it set.
    Ran,
    /// The step ran and branch entry `n` matched (or, for an interrupting
    /// entry, the step was left before its fields were in).
    Branch(usize),
}

/// The definite-assignment dataflow of one flow, over the live edges of its
/// graph. Nodes are the graph's (steps, listed arrivals) and, one past
/// them, the flow's completion.
pub(crate) struct Dataflow<'a> {
    graph: &'a FlowGraph,
    summary: &'a FlowSummary,
    tracked: Vec<FieldId>,
    entry: Option<usize>,
    /// Nodes in reverse post-order from the entry (only those it reaches).
    order: Vec<u32>,
    /// Position of each node in `order`, or `NONE` when not reached.
    rank: Vec<u32>,
    predecessors: Vec<Vec<(u32, Carry)>>,
    successors: Vec<Vec<(u32, Carry)>>,
}

impl<'a> Dataflow<'a> {
    pub(crate) fn new(graph: &'a FlowGraph, summary: &'a FlowSummary, tracked: Vec<FieldId>) -> Dataflow<'a> {
        let nodes = graph.nodes() + 1;
        let complete = graph.nodes();
        let mut predecessors: Vec<Vec<(u32, Carry)>> = vec![Vec::new(); nodes];
        let mut successors: Vec<Vec<(u32, Carry)>> = vec![Vec::new(); nodes];
        for source in 0..graph.nodes() {
            for edge in graph.live_edges(source) {
                let target = match edge.to {
                    To::Node(target) => target,
                    To::Complete { .. } => complete,
                    // Entering a flow (again, by `goto`) starts a new path
                    // from its entry; other flows are other paths.
                    To::Enter(..) => continue,
                };
                let carry = match edge.via {
                    Via::Skip => Carry::Skipped,
                    Via::Arrive => Carry::Arrive,
                    Via::Branch(entry) => Carry::Branch(entry),
                    Via::Fallthrough | Via::Directive | Via::Recovery => Carry::Ran,
                };
                let (Ok(source_u32), Ok(target_u32)) = (u32::try_from(source), u32::try_from(target)) else {
                    continue;
                };
                if let Some(list) = predecessors.get_mut(target) {
                    list.push((source_u32, carry));
                }
                if let Some(list) = successors.get_mut(source) {
                    list.push((target_u32, carry));
                }
            }
        }
        let entry = graph.entry();
        let order = entry.map(|entry| reverse_post_order(&successors, entry)).unwrap_or_default();
        let mut rank = vec![NONE; nodes];
        for (position, node) in order.iter().enumerate() {
            if let Some(slot) = rank.get_mut(*node as usize) {
                *slot = u32::try_from(position).unwrap_or(NONE);
            }
        }
        Dataflow { graph, summary, tracked, entry, order, rank, predecessors, successors }
    }

    pub(crate) fn nodes(&self) -> usize {
        self.rank.len()
    }

    pub(crate) fn complete(&self) -> usize {
        self.graph.nodes()
    }

    /// Solves the dataflow 64 tracked fields at a time, calling `visit`
    /// with each solution.
    pub(crate) fn for_each_chunk(&self, mut visit: impl FnMut(&Chunk<'_>)) {
        for fields in self.tracked.chunks(64) {
            let bits: HashMap<FieldId, u32> =
                fields.iter().enumerate().map(|(bit, field)| (*field, u32::try_from(bit).unwrap_or(0))).collect();
            let mask_of = |list: &[FieldId]| -> u64 {
                list.iter().filter_map(|field| bits.get(field)).fold(0u64, |mask, bit| mask | (1u64 << bit))
            };
            let per_step = |pick: fn(&StepSummary) -> &Vec<FieldId>| -> Vec<u64> {
                self.summary.steps.iter().map(|step| mask_of(pick(step))).collect()
            };
            let per_entry = |pick: fn(&StepSummary) -> &Vec<Vec<FieldId>>| -> Vec<Vec<u64>> {
                self.summary.steps.iter().map(|step| pick(step).iter().map(|list| mask_of(list)).collect()).collect()
            };
            let masks = Masks {
                arrive: per_step(|step| &step.arrive_gens),
                gens: per_step(|step| &step.gens),
                early: per_step(|step| &step.early_gens),
                kills: per_step(|step| &step.kills),
                branch_gens: per_entry(|step| &step.branch_gens),
                branch_kills: per_entry(|step| &step.branch_kills),
                interrupting: self.summary.steps.iter().map(|step| step.interrupting.clone()).collect(),
            };
            let init = mask_of(&self.summary.entry_gens);
            let states = self.solve(init, &masks);
            visit(&Chunk { dataflow: self, bits, states, masks });
        }
    }

    fn carried(&self, states: &[u64], masks: &Masks, source: u32, carry: Carry) -> u64 {
        let source = source as usize;
        let arrival = states.get(source).copied().unwrap_or(u64::MAX);
        let (step, _) = self.graph.step_of(source);
        match carry {
            Carry::Skipped => arrival,
            Carry::Arrive => arrival | masks.arrive.get(step).copied().unwrap_or(0),
            Carry::Ran => masks.ran(step, arrival),
            Carry::Branch(entry) => {
                let interrupting =
                    masks.interrupting.get(step).and_then(|entries| entries.get(entry)).copied().unwrap_or(false);
                let left = if interrupting {
                    arrival | masks.early.get(step).copied().unwrap_or(0)
                } else {
                    masks.ran(step, arrival)
                };
                let entry_mask =
                    |lists: &[Vec<u64>]| lists.get(step).and_then(|entries| entries.get(entry)).copied().unwrap_or(0);
                (left & !entry_mask(&masks.branch_kills)) | entry_mask(&masks.branch_gens)
            }
        }
    }

    /// The greatest fixpoint: every reached node starts at "all set" and
    /// only loses bits, so each node changes at most 64 times and the
    /// worklist (kept in reverse post-order) does linear work per bit.
    fn solve(&self, init: u64, masks: &Masks) -> Vec<u64> {
        let nodes = self.rank.len();
        let mut states = vec![u64::MAX; nodes];
        let Some(entry) = self.entry else {
            return states;
        };
        if let Some(slot) = states.get_mut(entry) {
            *slot = init;
        }
        let mut queued = vec![false; nodes];
        let mut worklist: BinaryHeap<Reverse<u32>> = BinaryHeap::with_capacity(self.order.len());
        for (position, node) in self.order.iter().enumerate() {
            if *node as usize != entry {
                worklist.push(Reverse(u32::try_from(position).unwrap_or(NONE)));
                if let Some(flag) = queued.get_mut(*node as usize) {
                    *flag = true;
                }
            }
        }
        while let Some(Reverse(position)) = worklist.pop() {
            let Some(node) = self.order.get(position as usize).map(|node| *node as usize) else {
                continue;
            };
            if let Some(flag) = queued.get_mut(node) {
                *flag = false;
            }
            let mut state = u64::MAX;
            for (source, carry) in self.predecessors.get(node).into_iter().flatten() {
                if self.rank.get(*source as usize).is_none_or(|rank| *rank == NONE) {
                    continue;
                }
                state &= self.carried(&states, masks, *source, *carry);
            }
            let Some(slot) = states.get_mut(node) else {
                continue;
            };
            if *slot == state {
                continue;
            }
            *slot = state;
            for (successor, _) in self.successors.get(node).into_iter().flatten() {
                let successor = *successor as usize;
                // The entry's state is fixed: every path into it again
                // carries at least what it started with.
                if successor == entry || queued.get(successor).copied().unwrap_or(true) {
                    continue;
                }
                if let Some(rank) = self.rank.get(successor).filter(|rank| **rank != NONE) {
                    worklist.push(Reverse(*rank));
                    if let Some(flag) = queued.get_mut(successor) {
                        *flag = true;
                    }
                }
            }
        }
        states
    }
}

/// Reverse post-order of the nodes reachable from `start`, iteratively.
fn reverse_post_order(successors: &[Vec<(u32, Carry)>], start: usize) -> Vec<u32> {
    let Ok(start_u32) = u32::try_from(start) else {
        return Vec::new();
    };
    let mut visited = vec![false; successors.len()];
    let mut post_order = Vec::with_capacity(successors.len());
    let mut stack: Vec<(u32, usize)> = vec![(start_u32, 0)];
    if let Some(flag) = visited.get_mut(start) {
        *flag = true;
    }
    while let Some((node, next_child)) = stack.last_mut() {
        let children = successors.get(*node as usize).map(Vec::as_slice).unwrap_or_default();
        match children.get(*next_child) {
            Some((child, _)) => {
                *next_child += 1;
                let child = *child;
                if let Some(flag) = visited.get_mut(child as usize)
                    && !*flag
                {
                    *flag = true;
                    stack.push((child, 0));
                }
            }
            None => {
                post_order.push(*node);
                stack.pop();
            }
        }
    }
    post_order.reverse();
    post_order
}

/// What each step does to the bits of one chunk.
struct Masks {
    arrive: Vec<u64>,
    gens: Vec<u64>,
    early: Vec<u64>,
    kills: Vec<u64>,
    branch_gens: Vec<Vec<u64>>,
    branch_kills: Vec<Vec<u64>>,
    interrupting: Vec<Vec<bool>>,
}

impl Masks {
    /// The state after `step` ran, from the state it was entered with.
    fn ran(&self, step: usize, arrival: u64) -> u64 {
        let kills = self.kills.get(step).copied().unwrap_or(0);
        let gens = self.gens.get(step).copied().unwrap_or(0);
        (arrival & !kills) | gens
    }
}

/// The solution for up to 64 tracked fields.
pub(crate) struct Chunk<'a> {
    dataflow: &'a Dataflow<'a>,
    bits: HashMap<FieldId, u32>,
    states: Vec<u64>,
    masks: Masks,
}

impl Chunk<'_> {
    fn reached(&self, node: usize) -> bool {
        self.dataflow.rank.get(node).is_some_and(|rank| *rank != NONE)
    }

    /// Whether `field` is set on every path to `node` (as it arrives, before
    /// a step runs). `None` when the field is not in this chunk or the
    /// node is not reached from the entry.
    pub(crate) fn set_on_arrival(&self, node: usize, field: FieldId) -> Option<bool> {
        let bit = *self.bits.get(&field)?;
        if !self.reached(node) {
            return None;
        }
        let state = self.states.get(node)?;
        Some(state & (1u64 << bit) != 0)
    }

    /// Whether `field` is set on every path once `step` has run, when its
    /// code-only branch entries are evaluated.
    pub(crate) fn set_at_branches(&self, step: usize, field: FieldId) -> Option<bool> {
        let bit = *self.bits.get(&field)?;
        if !self.reached(step) {
            return None;
        }
        let state = self.masks.ran(step, *self.states.get(step)?);
        Some(state & (1u64 << bit) != 0)
    }

    /// Parent links of a breadth-first search from the entry through the
    /// nodes where `field` is unset: the shortest path on which nothing sets
    /// it, to every such node. `None` when the budget is spent.
    pub(crate) fn unset_paths(&self, field: FieldId, budget: &mut PathBudget) -> Option<Vec<u32>> {
        let bit = 1u64 << *self.bits.get(&field)?;
        let nodes = self.states.len();
        if budget.remaining < nodes {
            return None;
        }
        budget.remaining -= nodes;
        let mut parents = vec![NONE; nodes];
        let entry = self.dataflow.entry?;
        if self.states.get(entry).is_none_or(|state| state & bit != 0) {
            return Some(parents);
        }
        if let Some(root) = parents.get_mut(entry) {
            *root = ROOT;
        }
        let mut queue = std::collections::VecDeque::from([u32::try_from(entry).ok()?]);
        while let Some(node) = queue.pop_front() {
            for (target, carry) in self.dataflow.successors.get(node as usize).into_iter().flatten() {
                let target_index = *target as usize;
                if parents.get(target_index).is_none_or(|parent| *parent != NONE) {
                    continue;
                }
                // The edge must carry the field unset.
                if self.dataflow.carried(&self.states, &self.masks, node, *carry) & bit != 0 {
                    continue;
                }
                if let Some(parent) = parents.get_mut(target_index) {
                    *parent = node;
                }
                queue.push_back(*target);
            }
        }
        Some(parents)
    }
}

/// For each `(step, field)` query: whether the field is set on every path
/// from the flow's entry when the step's code-only branch entries are
/// evaluated. Steps the entry does not reach answer `true` (no path says
/// otherwise).
pub(crate) fn definitely_set_at_branches(
    flow: &Flow,
    entered_with: &[FieldId],
    graph: &FlowGraph,
    queries: &[(StepId, FieldId)],
) -> Vec<bool> {
    let summary = summarize(flow, graph, entered_with);
    let mut tracked: Vec<FieldId> = queries.iter().map(|(_, field)| *field).collect();
    tracked.sort_unstable();
    tracked.dedup();
    let mut answers = vec![true; queries.len()];
    let dataflow = Dataflow::new(graph, &summary, tracked);
    dataflow.for_each_chunk(|chunk| {
        for ((step, field), answer) in queries.iter().zip(answers.iter_mut()) {
            if let Some(set) = chunk.set_at_branches(step.index(), *field) {
                *answer = set;
            }
        }
    });
    answers
}

/// Follows parent links from `node` back to the entry.
pub(crate) fn path_to(parents: &[u32], node: usize) -> Option<Vec<u32>> {
    let mut path = vec![u32::try_from(node).ok()?];
    let mut current = node;
    // A parent chain is a BFS tree: it reaches the entry in fewer steps
    // than there are nodes.
    for _ in 0..parents.len() {
        let parent = *parents.get(current)?;
        if parent == ROOT {
            path.reverse();
            return Some(path);
        }
        if parent == NONE {
            return None;
        }
        path.push(parent);
        current = parent as usize;
    }
    None
}

const NONE: u32 = u32::MAX;
const ROOT: u32 = u32::MAX - 1;

/// Caps the work spent finding paths for messages, so a flow with
/// thousands of unset fields stays linear; past it, messages name no path.
pub(crate) struct PathBudget {
    remaining: usize,
}

impl PathBudget {
    pub(crate) fn new(nodes: usize) -> PathBudget {
        PathBudget { remaining: nodes.saturating_add(64).saturating_mul(32) }
    }
}
