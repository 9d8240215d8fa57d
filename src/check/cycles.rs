//! Cycles that never wait for input (`auto_cycle`, an error).
//!
//! Within a turn the runtime keeps walking: auto steps run and leave, and
//! every step whose needs are met joins the batch (LANGUAGE.md section 9).
//! A step waits only while a field of its `collect` or `requires` is unset
//! (a non-auto step with such fields: an input step) or at a `wait` (which
//! pauses a workflow). A cycle through none of those can loop forever; the
//! auto-step cap stops a long chain at run time, but only a loop with no
//! input step is wrong as written (section 11). A step reached in list
//! order that can be passed over (`skip_if`, `when`, `if`) does not wait
//! when it is passed over, so its listed arrival's bypass counts even for
//! an input step (see [`super::flowgraph`]).
//!
//! The graph spans the whole program — `goto`, `goto_step` and
//! `complete.next` make cycles across flows — and its strongly connected
//! components are found with an iterative Tarjan, linear in its size. Each
//! cyclic component is reported once, at its first step in source order,
//! with one cycle through that step spelled out.
//!
//! A cycle whose only waits are input steps waits on the first lap only:
//! each step asks until its fields are set, and once every field is set
//! nothing in the cycle asks again (issue 13: a ring of two steps that
//! collect the same field answered every later turn with an empty reply at
//! the auto-step cap). Such a cycle is an `auto_cycle` too, unless a step
//! in it can write (and so clear) a field one of its steps waits on, or it
//! can start a new run of one of its flows, which clears their `fresh`
//! fields.

use super::flowgraph::{To, Via, directive_target};
use super::reachability::Analysis;
use super::walk::{all_actions, emitted, step_directives};
use crate::diag::{Code, Diagnostic};
use crate::ir::successor::{self, Jump, Landing, NewRun};
use crate::ir::{Action, ActionKind, Directive, FieldId, Flow, FlowId, Program, Step, StepId};
use crate::source::Span;
use std::collections::{HashSet, VecDeque};

const NONE: u32 = u32::MAX;

/// A cycle that can loop without waiting: the facts of one `auto_cycle`
/// error.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AutoCycle {
    pub kind: Kind,
    /// One lap, from the cycle's first step in source order.
    pub lap: Vec<CycleStop>,
    /// Whether the cycle is one step's edge to itself.
    pub self_loop: bool,
    /// The cycle's first step in source order.
    pub start: Span,
    /// The next steps of the lap (up to five), shown as part of the cycle.
    pub others: Vec<Span>,
}

/// One stop of a lap: a step that runs, or one passed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CycleStop {
    pub flow: String,
    pub step: String,
    pub passed_over: bool,
}

pub(crate) fn check(program: &Program, analysis: &Analysis, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program, analysis).into_iter().map(AutoCycle::into_diagnostic));
}

pub(crate) fn find(program: &Program, analysis: &Analysis) -> Vec<AutoCycle> {
    let mut found = Vec::new();
    let graph = ProgramGraph::build(program, analysis, waits, true);
    let mut in_auto_cycle = vec![false; graph.nodes.len()];
    for component in graph.cyclic_components() {
        for node in &component {
            if let Some(flag) = in_auto_cycle.get_mut(*node as usize) {
                *flag = true;
            }
        }
        found.extend(report(program, &graph, &component, Kind::NeverWaits));
    }
    check_rings(program, analysis, &in_auto_cycle, &mut found);
    found
}

/// Cycles that wait only for input that the first lap collects for good
/// (see the module doc). Cycles already reported are left alone: the two
/// graphs share their node numbering.
fn check_rings(program: &Program, analysis: &Analysis, in_auto_cycle: &[bool], found: &mut Vec<AutoCycle>) {
    // Only the ordinary ways on: `on_no_answer` fires only when a step asks
    // (it waits), and `on_error` only when a step fails.
    let graph = ProgramGraph::build(program, analysis, |step| step.wait_ms.is_some(), false);
    for component in graph.cyclic_components() {
        if component.iter().any(|node| in_auto_cycle.get(*node as usize).copied().unwrap_or(false)) {
            continue;
        }
        let steps: Vec<(FlowId, &Step, bool)> = component
            .iter()
            .filter_map(|node| graph.nodes.get(*node as usize))
            .filter(|(_, _, listed)| !listed)
            .filter_map(|(flow, step, _)| {
                let declared = program.flow(*flow)?;
                let step_def = declared.steps.get(step.index())?;
                Some((*flow, step_def, falls_to_completion(declared, *step, step_def)))
            })
            .collect();
        let waited_on: HashSet<FieldId> = steps
            .iter()
            .filter(|(_, step, _)| waits(step))
            .flat_map(|(_, step, _)| step.collect.iter().chain(&step.requires).copied())
            .collect();
        if waited_on.is_empty() {
            continue;
        }
        let mut written = HashSet::new();
        for (_, step, _) in &steps {
            step_writes(step, &mut written);
        }
        // A new run of a flow (`goto`, `complete`, `reset`) clears the
        // fields its steps collect, and entering a flow runs its hooks: a
        // cycle that may pass through either may ask again.
        let flows: HashSet<FlowId> = steps.iter().map(|(flow, _, _)| *flow).collect();
        let starts_runs =
            steps.iter().any(|(flow, step, completes)| starts_a_run(program, *flow, step, *completes, &flows));
        for flow in flows.iter().filter_map(|flow| program.flow(*flow)) {
            if starts_runs {
                written.extend(flow.fresh.iter().copied());
            }
            if starts_runs || flows.len() > 1 {
                actions_writes(&flow.on_enter, &mut written);
                actions_writes(&flow.on_complete, &mut written);
            }
        }
        if waited_on.is_disjoint(&written) {
            found.extend(report(program, &graph, &component, Kind::WaitsOnFirstLapOnly));
        }
    }
}

/// Whether leaving a step without a branch can complete its flow, by the
/// successor rule: `next end`, or list order past the last step, every
/// step after it passed over.
fn falls_to_completion(flow: &Flow, step_id: StepId, step: &Step) -> bool {
    match successor::fallthrough(step_id, step) {
        Landing::Complete(_) => true,
        Landing::Listed(from) => successor::first_listed(flow, from, |_, _| true).is_none(),
        Landing::Step(_) | Landing::Enter(..) | Landing::Abort => false,
    }
}

/// Whether a step can start a new run of a flow of the cycle (`flows`):
/// a `goto` or `complete next` into one, a `reset`, or a completion of
/// its own flow (`complete`, or falling through to the flow's end) that
/// `complete next` or `on_complete` leads back into one.
fn starts_a_run(
    program: &Program,
    flow_id: FlowId,
    step: &Step,
    falls_to_completion: bool,
    flows: &HashSet<FlowId>,
) -> bool {
    let Some(flow) = program.flow(flow_id) else {
        return false;
    };
    let completion_restarts = successor::after_completion(flow, None).is_some_and(|next| flows.contains(&next))
        || emitted(&flow.on_complete).into_iter().any(|directive| restarts(flow_id, directive, flows, false));
    (falls_to_completion && completion_restarts)
        || step_directives(step).iter().any(|(_, directive)| restarts(flow_id, directive, flows, completion_restarts))
}

/// Whether a directive emitted in `current` starts a new run of one of
/// `flows` ([`successor::new_run`]); a bare `complete` does when the
/// flow's completion leads back.
fn restarts(current: FlowId, directive: &Directive, flows: &HashSet<FlowId>, completion_restarts: bool) -> bool {
    let Some(jump) = directive.position.as_ref().map(Jump::from) else {
        return false;
    };
    match successor::new_run(Some(current), jump) {
        Some(NewRun::Of(flow)) => flows.contains(&flow),
        Some(NewRun::AfterCompletion) => completion_restarts,
        None => false,
    }
}

/// Every field a step's actions, hooks and directives can write.
fn step_writes(step: &Step, written: &mut HashSet<FieldId>) {
    for hook in [&step.actions, &step.on_enter, &step.prepare, &step.finalize] {
        actions_writes(hook, written);
    }
    for (_, directive) in step_directives(step) {
        directive_writes(directive, written);
    }
}

fn actions_writes(actions: &[Action], written: &mut HashSet<FieldId>) {
    for action in all_actions(actions) {
        match &action.kind {
            ActionKind::Set(write) | ActionKind::Append(write) => {
                written.insert(write.field);
            }
            ActionKind::Call(call) => written.extend(call.save),
            ActionKind::AskModel(ask) => {
                written.insert(ask.field);
            }
            ActionKind::Emit(directive) => directive_writes(directive, written),
            ActionKind::Say { .. } | ActionKind::ForEach(_) => {}
        }
    }
}

fn directive_writes(directive: &Directive, written: &mut HashSet<FieldId>) {
    written.extend(directive.set.iter().map(|write| write.field));
    if let Some(position) = &directive.position {
        written.extend(position.data().iter().map(|write| write.field));
    }
}

/// Which of the two faults a reported cycle has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No step of the cycle waits.
    NeverWaits,
    /// Its steps wait for input, but only until the first lap has set it.
    WaitsOnFirstLapOnly,
}

/// Whether a step can stop the walk: it waits for input or for time.
fn waits(step: &Step) -> bool {
    let asks_for_input = !step.collect.is_empty() || !step.requires.is_empty();
    step.wait_ms.is_some() || (!step.auto && asks_for_input)
}

/// Every reached node of every whole flow's graph (steps, then listed
/// arrivals, flow after flow), with the edges that do not wait.
struct ProgramGraph {
    /// Per node, its flow, its step and whether it is the step's listed
    /// arrival.
    nodes: Vec<(FlowId, StepId, bool)>,
    successors: Vec<Vec<u32>>,
}

impl ProgramGraph {
    /// The graph where the steps `stops` names end the walk, with or
    /// without the `on_no_answer` and `on_error` edges.
    fn build(
        program: &Program,
        analysis: &Analysis,
        stops: impl Fn(&Step) -> bool,
        with_recovery: bool,
    ) -> ProgramGraph {
        let mut offsets = Vec::with_capacity(program.flows.len());
        let mut nodes = Vec::new();
        for (flow_index, graph) in analysis.graphs.iter().enumerate() {
            offsets.push(u32::try_from(nodes.len()).unwrap_or(NONE));
            for node in 0..graph.nodes() {
                let (step, listed) = graph.step_of(node);
                nodes.push((FlowId::from_index(flow_index), StepId::from_index(step), listed));
            }
        }
        let whole = |flow: FlowId| program.flow(flow).is_some_and(|flow| !flow.incomplete);
        let global = |flow: FlowId, node: usize| -> Option<u32> {
            if !whole(flow) || node >= analysis.graphs.get(flow.index())?.nodes() {
                return None;
            }
            offsets.get(flow.index())?.checked_add(u32::try_from(node).ok()?)
        };
        // Entering a flow at its first step arrives in list order.
        let enter = |flow: FlowId, step: StepId| -> Option<u32> {
            let graph = analysis.graphs.get(flow.index())?;
            match graph.to(successor::arrival(step))? {
                To::Node(node) => global(flow, node),
                To::Complete { .. } | To::Enter(..) => None,
            }
        };
        // Where completing each flow leads: `complete next`, and the
        // positions its `on_complete` actions emit.
        let on_completion: Vec<Vec<u32>> = program
            .flows
            .iter()
            .enumerate()
            .map(|(flow_index, flow)| {
                let flow_id = FlowId::from_index(flow_index);
                let mut targets: Vec<u32> = successor::after_completion(flow, None)
                    .and_then(|next| enter(next, StepId(0)))
                    .into_iter()
                    .collect();
                for directive in emitted(&flow.on_complete) {
                    let target = match directive_target(flow_id, directive) {
                        Some(To::Node(node)) => global(flow_id, node),
                        Some(To::Enter(flow, step)) => enter(flow, step),
                        Some(To::Complete { next }) => next.and_then(|next| enter(next, StepId(0))),
                        None => None,
                    };
                    targets.extend(target);
                }
                targets
            })
            .collect();
        let mut successors = vec![Vec::new(); nodes.len()];
        for (flow_index, flow) in program.flows.iter().enumerate() {
            if flow.incomplete {
                continue;
            }
            let flow_id = FlowId::from_index(flow_index);
            let (Some(graph), Some(reached)) =
                (analysis.graphs.get(flow_index), analysis.reached_nodes.get(flow_index))
            else {
                continue;
            };
            for node in 0..graph.nodes() {
                if !reached.get(node).copied().unwrap_or(false) {
                    continue;
                }
                let (step_index, listed) = graph.step_of(node);
                // A step that waits stops the walk: nothing leaves it
                // without input (its listed arrival may still pass it over).
                if !listed && flow.steps.get(step_index).is_some_and(&stops) {
                    continue;
                }
                let Some(source) = global(flow_id, node) else {
                    continue;
                };
                let mut targets = Vec::new();
                for edge in graph.live_edges(node) {
                    if !with_recovery && edge.via == Via::Recovery {
                        continue;
                    }
                    match edge.to {
                        To::Node(target) => targets.extend(global(flow_id, target)),
                        To::Enter(flow, step) => targets.extend(enter(flow, step)),
                        To::Complete { next: Some(next) } => targets.extend(enter(next, StepId(0))),
                        To::Complete { next: None } => {
                            targets.extend(on_completion.get(flow_index).into_iter().flatten().copied());
                        }
                    }
                }
                targets.sort_unstable();
                targets.dedup();
                if let Some(slot) = successors.get_mut(source as usize) {
                    *slot = targets;
                }
            }
        }
        ProgramGraph { nodes, successors }
    }

    fn successors(&self, node: u32) -> &[u32] {
        self.successors.get(node as usize).map(Vec::as_slice).unwrap_or_default()
    }

    /// Where a node stands in the source: its flow, its step, the step
    /// before its listed arrival.
    fn source_order(&self, node: u32) -> (FlowId, StepId, bool) {
        self.nodes
            .get(node as usize)
            .map_or((FlowId(u32::MAX), StepId(u32::MAX), true), |(flow, step, listed)| (*flow, *step, *listed))
    }

    /// The strongly connected components that contain a cycle, each sorted
    /// in source order (so its first node is its first step).
    fn cyclic_components(&self) -> Vec<Vec<u32>> {
        let count = self.nodes.len();
        let mut index_of = vec![NONE; count];
        let mut lowlink = vec![NONE; count];
        let mut on_stack = vec![false; count];
        let mut stack: Vec<u32> = Vec::new();
        let mut calls: Vec<(u32, usize)> = Vec::new();
        let mut next_index: u32 = 0;
        let mut components = Vec::new();
        for start in 0..count {
            let Ok(start) = u32::try_from(start) else {
                break;
            };
            if index_of.get(start as usize).is_none_or(|index| *index != NONE) {
                continue;
            }
            visit(start, &mut next_index, &mut index_of, &mut lowlink, &mut on_stack, &mut stack);
            calls.push((start, 0));
            while let Some((node, position)) = calls.last_mut() {
                let node = *node;
                if let Some(&child) = self.successors(node).get(*position) {
                    *position += 1;
                    let child_index = index_of.get(child as usize).copied().unwrap_or(NONE);
                    if child_index == NONE {
                        visit(child, &mut next_index, &mut index_of, &mut lowlink, &mut on_stack, &mut stack);
                        calls.push((child, 0));
                    } else if on_stack.get(child as usize).copied().unwrap_or(false) {
                        lower(&mut lowlink, node, child_index);
                    }
                    continue;
                }
                calls.pop();
                let node_low = lowlink.get(node as usize).copied().unwrap_or(NONE);
                if let Some((parent, _)) = calls.last() {
                    lower(&mut lowlink, *parent, node_low);
                }
                if node_low != index_of.get(node as usize).copied().unwrap_or(NONE) {
                    continue;
                }
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    if let Some(flag) = on_stack.get_mut(member as usize) {
                        *flag = false;
                    }
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                let cyclic = component.len() > 1 || self.successors(node).contains(&node);
                if cyclic {
                    component.sort_unstable_by_key(|member| self.source_order(*member));
                    components.push(component);
                }
            }
        }
        components.sort_by_key(|component| component.first().map(|node| self.source_order(*node)));
        components
    }

    /// A shortest cycle through the component's first node, found breadth
    /// first inside the component.
    fn cycle_through(&self, component: &[u32]) -> Vec<u32> {
        let Some(&first) = component.first() else {
            return Vec::new();
        };
        let members: std::collections::HashSet<u32> = component.iter().copied().collect();
        let inside = |node: u32| members.contains(&node);
        let mut parent: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        let mut queue = VecDeque::from([first]);
        while let Some(node) = queue.pop_front() {
            for &child in self.successors(node) {
                if child == first {
                    let mut path = vec![node];
                    let mut current = node;
                    while current != first {
                        let Some(&previous) = parent.get(&current) else {
                            break;
                        };
                        path.push(previous);
                        current = previous;
                    }
                    path.reverse();
                    return path;
                }
                if inside(child) && !parent.contains_key(&child) {
                    parent.insert(child, node);
                    queue.push_back(child);
                }
            }
        }
        vec![first]
    }
}

fn visit(
    node: u32,
    next_index: &mut u32,
    index_of: &mut [u32],
    lowlink: &mut [u32],
    on_stack: &mut [bool],
    stack: &mut Vec<u32>,
) {
    if let Some(slot) = index_of.get_mut(node as usize) {
        *slot = *next_index;
    }
    if let Some(slot) = lowlink.get_mut(node as usize) {
        *slot = *next_index;
    }
    if let Some(flag) = on_stack.get_mut(node as usize) {
        *flag = true;
    }
    *next_index = next_index.saturating_add(1);
    stack.push(node);
}

fn lower(lowlink: &mut [u32], node: u32, value: u32) {
    if let Some(slot) = lowlink.get_mut(node as usize) {
        *slot = (*slot).min(value);
    }
}

fn report(program: &Program, graph: &ProgramGraph, component: &[u32], kind: Kind) -> Option<AutoCycle> {
    let cycle = graph.cycle_through(component);
    let (first_flow, first_step_id, _) = graph.nodes.get(*cycle.first()? as usize).copied()?;
    let step_of = |flow: FlowId, step: StepId| -> Option<(&crate::ir::Flow, &Step)> {
        let flow = program.flow(flow)?;
        Some((flow, flow.step(step)?))
    };
    let stop = |flow: FlowId, step: StepId, passed_over: bool| -> CycleStop {
        let (flow, step) = step_of(flow, step).map_or(("?", "?"), |(flow, step)| (&flow.name, &step.name));
        CycleStop { flow: flow.to_string(), step: step.to_string(), passed_over }
    };
    // A listed arrival that leads into its step is that step; one that
    // passes over it is a stop of its own.
    let mut lap: Vec<CycleStop> = Vec::new();
    let mut steps_in_cycle: Vec<(FlowId, StepId)> = Vec::new();
    for (position, node) in cycle.iter().enumerate() {
        let Some((flow, step, listed)) = graph.nodes.get(*node as usize).copied() else {
            continue;
        };
        let following = cycle.get(position + 1).or(cycle.first()).and_then(|next| graph.nodes.get(*next as usize));
        if !listed {
            lap.push(stop(flow, step, false));
            steps_in_cycle.push((flow, step));
        } else if following.is_none_or(|(next_flow, next_step, next_listed)| {
            (*next_flow, *next_step, *next_listed) != (flow, step, false)
        }) {
            lap.push(stop(flow, step, true));
        }
    }
    let (_, first_step) = step_of(first_flow, first_step_id)?;
    let others = steps_in_cycle
        .iter()
        .skip(1)
        .take(5)
        .filter_map(|(flow, step)| step_of(*flow, *step))
        .map(|(_, step)| step.span)
        .collect();
    Some(AutoCycle {
        kind,
        self_loop: steps_in_cycle.len() == 1 && cycle.len() == 1,
        lap,
        start: first_step.span,
        others,
    })
}

impl AutoCycle {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        let AutoCycle { kind, lap, self_loop, start, others } = self;
        let single_flow = lap.first().is_none_or(|first| lap.iter().all(|stop| stop.flow == first.flow));
        let name = |stop: &CycleStop| {
            if single_flow { format!("`{}`", stop.step) } else { format!("`{}.{}`", stop.flow, stop.step) }
        };
        let mut spelled: Vec<String> =
            lap.iter().map(|stop| if stop.passed_over { format!("past {}", name(stop)) } else { name(stop) }).collect();
        if let Some(first) = spelled.first().cloned() {
            spelled.push(first);
        }
        const SHOWN: usize = 12;
        let path = if spelled.len() > SHOWN {
            let tail = spelled.last().cloned().unwrap_or_default();
            let head: Vec<String> = spelled.into_iter().take(SHOWN - 1).collect();
            format!("{} → … → {tail}", head.join(" → "))
        } else {
            spelled.join(" → ")
        };
        let looping = match lap.first() {
            Some(only) if self_loop => format!("the step {} loops to itself", name(only)),
            _ => format!("the steps {path} loop"),
        };
        let (message, help) = match kind {
            Kind::NeverWaits => (
                format!("{looping} without waiting for input"),
                "give the cycle a step that waits: one that collects input (not `auto`), or an auto step with `wait`; or a way out",
            ),
            Kind::WaitsOnFirstLapOnly => (
                format!("{looping} without waiting for input once the fields they ask for are set"),
                "after one lap every field the cycle asks for is set and no step asks again: give it a way out (a `branch` or `next` to another step, `complete`), clear a field it collects (`set FIELD = null`), or add an auto step with `wait`",
            ),
        };
        let mut diagnostic = Diagnostic::new(Code::AutoCycle, message).at(start, "the cycle starts here");
        for span in others {
            diagnostic = diagnostic.with_label(span, "part of the cycle");
        }
        diagnostic.with_help(help)
    }
}

#[cfg(test)]
mod tests {
    use super::{AutoCycle, CycleStop, Kind, find};
    use crate::check::check_findings as check;
    use crate::check::tests::{at, compiled};

    fn stop(flow: &str, step: &str, passed_over: bool) -> CycleStop {
        CycleStop { flow: flow.to_string(), step: step.to_string(), passed_over }
    }

    #[test]
    fn the_error_holds_one_lap_of_the_cycle_across_flows() {
        let (file, program) = compiled(
            r#"flow f { when "f"  complete next g
                auto step a { next end } }
            flow g { when "g"
                auto step b { emit goto_step f.a } }"#,
        );
        let analysis = crate::check::reachability::analysis(&program);
        let step = |declared: &str| {
            let span = at(&file, declared, 0);
            crate::source::Span::new(span.end - 1, span.end)
        };
        assert_eq!(
            find(&program, &analysis),
            [AutoCycle {
                kind: Kind::NeverWaits,
                lap: vec![stop("f", "a", false), stop("g", "b", false)],
                self_loop: false,
                start: step("step a"),
                others: vec![step("step b")],
            }]
        );
    }

    #[test]
    fn auto_steps_that_loop_are_a_cycle_at_the_first_step() {
        check(
            r#"flow f {
                auto step a { next c }
                auto step b { next a }
                auto step c { next b } }"#,
            &[("auto_cycle", "a")],
        );
    }

    #[test]
    fn a_wait_breaks_the_cycle() {
        check(
            r#"flow f {
                auto step a { wait 1m  next b }
                auto step b { next a } }"#,
            &[],
        );
    }

    #[test]
    fn a_step_that_collects_breaks_the_cycle() {
        check(
            r#"schema { x: string }
            flow f { when "w"
                step a { collect x  next b }
                auto step b { set x = null  next a } }"#,
            &[],
        );
    }

    #[test]
    fn a_completion_by_passing_over_the_last_steps_starts_a_new_run() {
        // `work` is not the last step, but `tail` is passed over once
        // `done` is set: the flow completes, `complete next` starts a new
        // run, which clears `x`, so `ask` asks again.
        check(
            r#"schema { x: int "X"  done: bool }
            flow a { when "the user wants a"
                step ask { prompt "X?" collect x }
                auto step work { set done = true }
                step tail { skip_if done == true  say "tail"  branch { else -> { abort } } }
                complete next a }"#,
            &[],
        );
    }

    #[test]
    fn a_ring_of_input_steps_whose_fields_stay_set_is_a_cycle() {
        check(
            r#"schema { a: string "Anything" }
            flow f { default
                step s1 { prompt "A?" collect a  next s2 }
                step s2 { prompt "A again?" collect a  next s1 } }"#,
            &[("auto_cycle", "s1")],
        );
        check(
            r#"schema { answer: string }
            flow f { default
                step ask { collect answer  branch { if answer == "yes" -> { complete }  else -> ask } } }"#,
            &[("auto_cycle", "ask")],
        );
    }

    #[test]
    fn a_ring_that_clears_what_it_collects_asks_again() {
        check(
            r#"schema { answer: string }
            flow f { default
                step ask { collect answer
                    branch { if answer == "yes" -> { complete }  else -> { set answer = null  goto_step ask } } } }"#,
            &[],
        );
        check(
            r#"schema { a: string  b: string }
            flow f { default
                step s1 { collect a  next s2 }
                step s2 { collect b  do { set a = null }  next s1 } }"#,
            &[],
        );
    }

    #[test]
    fn a_ring_through_a_new_run_of_the_flow_asks_again() {
        // `goto` and `reset` start a new run, which clears what the flow's
        // steps collect; `keep` carries a field over, and then it loops.
        check(
            r#"schema { n: int }
            flow f { default
                step s { collect n  emit goto f } }"#,
            &[],
        );
        check(
            r#"schema { n: int }
            flow f { default  keep n
                step s { collect n  emit reset } }"#,
            &[("auto_cycle", "s")],
        );
    }

    #[test]
    fn a_ring_only_through_on_error_is_not_reported() {
        // Taken only when the tool fails: the ordinary way on completes.
        check(
            r#"schema { ok: bool  id: string }
            tool book() -> { id: string } { builtin uuid }
            flow f { default
                step confirm { collect ok }
                auto step book { call book() -> id  on_error { reply "down"  goto_step confirm } } }"#,
            &[],
        );
    }

    #[test]
    fn passing_over_the_input_step_does_not_break_the_cycle() {
        check(
            r#"schema { x: string }
            flow f { when "w"
                auto step a { set x = "y" }
                step b { skip_if x is set  collect x }
                auto step c { next a } }"#,
            &[("auto_cycle", "a")],
        );
    }

    #[test]
    fn cycles_through_other_flows_count() {
        check(
            r#"flow f { when "f"  complete next g
                auto step a { next end } }
            flow g { when "g"
                auto step b { emit goto_step f.a } }"#,
            &[("auto_cycle", "a")],
        );
    }

    #[test]
    fn completing_into_the_same_flow_again_is_a_cycle() {
        check(
            r#"flow f { when "w"
                on_complete { emit goto f }
                step a { say "again" } }"#,
            &[("auto_cycle", "a")],
        );
    }

    #[test]
    fn a_cycle_behind_a_dead_branch_is_not_reported() {
        check(
            r#"flow f { when "w"
                step a { branch { else -> { complete }
                                  when "x" -> b } }
                auto step b { next c }
                auto step c { next b } }"#,
            &[("unreachable_branch", r#"when "x" -> b"#), ("unreachable_step", "b"), ("unreachable_step", "c")],
        );
    }
}
