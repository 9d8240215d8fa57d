//! Cycles that never wait for input (`auto_cycle`, an error).
//!
//! Within a turn the runtime keeps walking: auto steps run and leave, and
//! every step whose needs are met joins the batch (LANGUAGE.md section 9).
//! A step waits only while a field of its `collect` or `requires` is unset
//! (a non-auto step with such fields: an input step) or at a `wait` (which
//! pauses a workflow). A cycle through none of those can loop forever; the
//! auto-step cap stops a long chain at run time, but only a loop with no
//! input step is wrong as written (section 11). A step that can be passed
//! over (`skip_if`, `when`, `if`) does not wait when it is passed over, so
//! its bypass edge counts even for an input step.
//!
//! The graph spans the whole program — `goto`, `goto_step` and
//! `complete.next` make cycles across flows — and its strongly connected
//! components are found with an iterative Tarjan, linear in its size. Each
//! cyclic component is reported once, at its first step in source order,
//! with one cycle through that step spelled out.

use super::flowgraph::{Target, Via, directive_target};
use super::reachability::Analysis;
use super::walk::emitted;
use crate::diag::{Code, Diagnostic};
use crate::ir::{FlowId, Program, Step, StepId};
use std::collections::VecDeque;

const NONE: u32 = u32::MAX;

pub(crate) fn check(program: &Program, analysis: &Analysis, diagnostics: &mut Vec<Diagnostic>) {
    let graph = ProgramGraph::build(program, analysis);
    for component in graph.cyclic_components() {
        if let Some(diagnostic) = report(program, &graph, &component) {
            diagnostics.push(diagnostic);
        }
    }
}

/// Whether a step can stop the walk: it waits for input or for time.
fn waits(step: &Step) -> bool {
    let asks_for_input = !step.collect.is_empty() || !step.requires.is_empty();
    step.wait_ms.is_some() || (!step.auto && asks_for_input)
}

/// Every reachable step of every whole flow, numbered in source order
/// (flows in order, then steps), with the edges that do not wait.
struct ProgramGraph {
    /// Per node, its flow and step.
    nodes: Vec<(FlowId, StepId)>,
    successors: Vec<Vec<u32>>,
}

impl ProgramGraph {
    fn build(program: &Program, analysis: &Analysis) -> ProgramGraph {
        let mut offsets = Vec::with_capacity(program.flows.len());
        let mut nodes = Vec::new();
        for (flow_index, flow) in program.flows.iter().enumerate() {
            offsets.push(u32::try_from(nodes.len()).unwrap_or(NONE));
            for step_index in 0..flow.steps.len() {
                nodes.push((FlowId::from_index(flow_index), StepId::from_index(step_index)));
            }
        }
        let node_of = |flow: FlowId, step: StepId| -> Option<u32> {
            let flow_decl = program.flow(flow)?;
            if flow_decl.incomplete || step.index() >= flow_decl.steps.len() {
                return None;
            }
            let offset = *offsets.get(flow.index())?;
            offset.checked_add(step.0)
        };
        // Where completing each flow leads: `complete next`, and the
        // positions its `on_complete` actions emit.
        let on_completion: Vec<Vec<u32>> = program
            .flows
            .iter()
            .enumerate()
            .map(|(flow_index, flow)| {
                let flow_id = FlowId::from_index(flow_index);
                let mut targets: Vec<u32> =
                    flow.complete_next.and_then(|next| node_of(next, StepId(0))).into_iter().collect();
                for directive in emitted(&flow.on_complete) {
                    let target = match directive_target(flow_id, directive) {
                        Some(Target::Step(step)) => node_of(flow_id, step),
                        Some(Target::Enter(flow, step)) => node_of(flow, step),
                        Some(Target::Complete { next }) => next.and_then(|next| node_of(next, StepId(0))),
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
            let (Some(graph), Some(reachable)) = (analysis.graphs.get(flow_index), analysis.reachable.get(flow_index))
            else {
                continue;
            };
            for (step_index, step) in flow.steps.iter().enumerate() {
                if !reachable.get(step_index).copied().unwrap_or(false) {
                    continue;
                }
                let Some(source) = node_of(flow_id, StepId::from_index(step_index)) else {
                    continue;
                };
                let step_waits = waits(step);
                let mut targets = Vec::new();
                for edge in graph.live_edges(step_index) {
                    if step_waits && edge.via != Via::Skip {
                        continue;
                    }
                    let target = match edge.target {
                        Target::Step(target) => node_of(flow_id, target),
                        Target::Enter(flow, step) => node_of(flow, step),
                        Target::Complete { next: Some(next) } => node_of(next, StepId(0)),
                        Target::Complete { next: None } => {
                            targets.extend(on_completion.get(flow_index).into_iter().flatten().copied());
                            None
                        }
                    };
                    targets.extend(target);
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

    /// The strongly connected components that contain a cycle, each sorted
    /// (so its first node is its first step in source order).
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
                    component.sort_unstable();
                    components.push(component);
                }
            }
        }
        components.sort();
        components
    }

    /// A shortest cycle through the component's first node, found breadth
    /// first inside the component.
    fn cycle_through(&self, component: &[u32]) -> Vec<u32> {
        let Some(&first) = component.first() else {
            return Vec::new();
        };
        let inside = |node: u32| component.binary_search(&node).is_ok();
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

fn report(program: &Program, graph: &ProgramGraph, component: &[u32]) -> Option<Diagnostic> {
    let cycle = graph.cycle_through(component);
    let first = *cycle.first()?;
    let single_flow = cycle
        .iter()
        .filter_map(|node| graph.nodes.get(*node as usize))
        .all(|(flow, _)| Some(*flow) == graph.nodes.get(first as usize).map(|(flow, _)| *flow));
    let step_of = |node: u32| -> Option<(&crate::ir::Flow, &Step)> {
        let (flow_id, step_id) = graph.nodes.get(node as usize)?;
        let flow = program.flow(*flow_id)?;
        Some((flow, flow.step(*step_id)?))
    };
    let name = |node: u32| -> String {
        match step_of(node) {
            Some((_, step)) if single_flow => format!("`{}`", step.name),
            Some((flow, step)) => format!("`{}.{}`", flow.name, step.name),
            None => "?".to_string(),
        }
    };
    let (_, first_step) = step_of(first)?;
    let mut spelled: Vec<String> = cycle.iter().map(|node| name(*node)).collect();
    spelled.push(name(first));
    const SHOWN: usize = 12;
    let path = if spelled.len() > SHOWN {
        let tail = spelled.last().cloned().unwrap_or_default();
        let head: Vec<String> = spelled.into_iter().take(SHOWN - 1).collect();
        format!("{} → … → {tail}", head.join(" → "))
    } else {
        spelled.join(" → ")
    };
    let message = if cycle.len() == 1 {
        format!("the step {} loops to itself without waiting for input", name(first))
    } else {
        format!("the steps {path} loop without waiting for input")
    };
    let mut diagnostic = Diagnostic::new(Code::AutoCycle, message).at(first_step.span, "the cycle starts here");
    for node in cycle.iter().skip(1).take(5) {
        if let Some((_, step)) = step_of(*node) {
            diagnostic = diagnostic.with_label(step.span, "part of the cycle");
        }
    }
    Some(diagnostic.with_help(
        "give the cycle a step that waits: one that collects input (not `auto`), or an auto step with `wait`; or a way out",
    ))
}

#[cfg(test)]
mod tests {
    use crate::check::check_findings as check;

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
