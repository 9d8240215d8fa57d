//! Reachability of steps and branch entries (`unreachable_step`,
//! `unreachable_branch`, both errors; `covered_branch`, a warning, for an
//! entry after earlier ones that cover every value of a field).
//!
//! A branch entry is unreachable when it is never evaluated or can never
//! match: it follows an entry with no condition; its conditions include all
//! of an earlier entry's (whenever it would hold, the earlier one matched
//! first); one of its `if`s is always false; or earlier code-only entries
//! already cover every value of a bool or enum field that is definitely set
//! when the branches are evaluated (LANGUAGE.md section 11: an unset field
//! matches neither `== true` nor `== false`, so coverage needs it set).
//!
//! A step is unreachable when no path leads to it from its flow's entry or
//! from any `goto_step` in the program, following the flow graph
//! (`super::flowgraph`: steps reached in list order may be passed over,
//! steps named by a target are entered) without the dead entries; a step
//! reached only in list order whose own `if` is always false (or `skip_if`
//! always true) never runs and is reported too.
//! Flows that lowering could not build whole ([`crate::ir::Flow::incomplete`])
//! get no step report: the missing edge would be the cause, already reported.

use super::conditions::{Values, conjuncts, coverage, domain, fold_bool, key, when_key};
use super::dataflow::definitely_set_at_branches;
use super::flowgraph::{self, FlowGraph, To};
use super::summary::entered_with;
use crate::diag::{Code, Diagnostic};
use crate::ir::successor;
use crate::ir::{Branch, FieldId, Flow, FlowId, Program, StepId};
use crate::source::Span;
use std::collections::{BTreeSet, HashMap};

/// What can never run: shared by the checker (which reports it) and the
/// graph (which draws it dashed), so both always agree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reachability {
    /// Steps no path reaches.
    pub unreachable_steps: BTreeSet<(FlowId, StepId)>,
    /// (flow, step, index of the entry in the step's branches)
    pub unreachable_branches: BTreeSet<(FlowId, StepId, usize)>,
}

/// What in `program` can never run.
pub fn analyze(program: &Program) -> Reachability {
    let analysis = analysis(program);
    Reachability {
        unreachable_steps: analysis.unreachable_steps.iter().map(|step| (step.flow, step.step)).collect(),
        unreachable_branches: analysis
            .dead_branches
            .iter()
            .map(|branch| (branch.flow, branch.step, branch.entry))
            .collect(),
    }
}

/// Why a branch entry can never match.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DeadReason {
    /// Entry `n`, before it, has no condition.
    AfterUnconditional(usize),
    /// Entry `n`, before it, has a subset of its conditions.
    Repeats(usize),
    /// This `if` is always false.
    AlwaysFalse(Span),
    /// The earlier code-only entries cover every value of the field, which
    /// is set when the branches are evaluated.
    Covered { field: FieldId, entries: Vec<usize> },
}

#[derive(Clone, Debug)]
pub(crate) struct DeadBranch {
    pub flow: FlowId,
    pub step: StepId,
    pub entry: usize,
    pub reason: DeadReason,
}

#[derive(Clone, Debug)]
pub(crate) struct UnreachableStep {
    pub flow: FlowId,
    pub step: StepId,
    /// The condition that keeps it from ever running, if that is the cause.
    pub never_runs: Option<Span>,
    /// Whether some step leads to it, but only unreachable ones do.
    pub only_from_unreachable: bool,
}

/// Everything the reachability analysis found, with the flow graphs it
/// used (dead entries and fallthroughs switched off) for the passes that
/// follow paths after it.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub graphs: Vec<FlowGraph>,
    /// Per flow, per step: reached from the entry or a `goto_step`.
    pub reachable: Vec<Vec<bool>>,
    /// Per flow, per node of its graph (steps, then listed arrivals).
    pub reached_nodes: Vec<Vec<bool>>,
    /// Per flow, the fields set whenever it is entered (see
    /// [`super::summary::entered_with`]).
    pub entered_with: Vec<Vec<FieldId>>,
    pub dead_branches: Vec<DeadBranch>,
    pub unreachable_steps: Vec<UnreachableStep>,
}

pub(crate) fn analysis(program: &Program) -> Analysis {
    let jump_targets = goto_step_targets(program);
    let mut analysis = Analysis { entered_with: entered_with(program), ..Analysis::default() };
    for (index, flow) in program.flows.iter().enumerate() {
        let flow_id = FlowId::from_index(index);
        let mut graph = flowgraph::build(flow_id, flow);
        let mut dead = Vec::new();
        let mut exhaustive = Vec::new();
        for (step_index, step) in flow.steps.iter().enumerate() {
            let step_id = StepId::from_index(step_index);
            let (entries, always_matches) = syntactic_dead_entries(&step.branches);
            for (entry, reason) in entries {
                dead.push(DeadBranch { flow: flow_id, step: step_id, entry, reason });
            }
            if always_matches {
                exhaustive.push(step_id);
            }
        }
        apply_dead(&mut graph, &dead, &exhaustive);
        let entry_fields = analysis.entered_with.get(index).map(Vec::as_slice).unwrap_or_default();
        let (covered, exhaustive) = covered_entries(program, flow_id, flow, entry_fields, &graph);
        apply_dead(&mut graph, &covered, &exhaustive);
        dead.extend(covered);

        let roots = jump_targets.get(index).map(Vec::as_slice).unwrap_or_default();
        let reached_nodes = reach(&graph, roots);
        let reachable: Vec<bool> = reached_nodes.iter().take(graph.steps()).copied().collect();
        if !flow.incomplete {
            let led_from_unreached = led_from_unreached(&graph, &reached_nodes);
            for (step_index, reached) in reachable.iter().enumerate() {
                if *reached {
                    continue;
                }
                // Reached in list order, but its own condition always
                // passes it over.
                let arrived = graph.skippable.get(step_index).copied().unwrap_or(false)
                    && reached_nodes.get(graph.steps() + step_index).copied().unwrap_or(false);
                let never_runs = graph.never_runs.get(step_index).copied().flatten().filter(|_| arrived);
                analysis.unreachable_steps.push(UnreachableStep {
                    flow: flow_id,
                    step: StepId::from_index(step_index),
                    never_runs,
                    only_from_unreachable: never_runs.is_none()
                        && led_from_unreached.get(step_index).copied().unwrap_or(false),
                });
            }
        }
        // Entries of a step nothing reaches are part of that step's report.
        dead.retain(|branch| flow.incomplete || reachable.get(branch.step.index()).copied().unwrap_or(false));
        dead.sort_by_key(|branch| (branch.step, branch.entry));
        analysis.dead_branches.extend(dead);
        analysis.graphs.push(graph);
        analysis.reachable.push(reachable);
        analysis.reached_nodes.push(reached_nodes);
    }
    analysis
}

/// Per flow, the steps some `goto_step` anywhere in the program enters as
/// named. (A jump from elsewhere to a flow's first step enters the flow,
/// which arrives at it in list order: that is the flow's entry, a root
/// anyway.)
fn goto_step_targets(program: &Program) -> Vec<Vec<StepId>> {
    let mut targets = vec![Vec::new(); program.flows.len()];
    super::walk::directives(program, |site, directive| {
        let named =
            directive.position.as_ref().and_then(|position| successor::step_named(site.flow(), position.into()));
        if let Some((flow, step)) = named
            && let Some(list) = targets.get_mut(flow.index())
        {
            list.push(step);
        }
    });
    targets
}

/// Switches off dead entries, and the fallthrough of steps whose table
/// always matches.
fn apply_dead(graph: &mut FlowGraph, dead: &[DeadBranch], exhaustive: &[StepId]) {
    for branch in dead {
        if let Some(flag) =
            graph.dead_branches.get_mut(branch.step.index()).and_then(|entries| entries.get_mut(branch.entry))
        {
            *flag = true;
        }
    }
    for step in exhaustive {
        if let Some(flag) = graph.fallthrough_dead.get_mut(step.index()) {
            *flag = true;
        }
    }
}

/// An entry's conditions in canonical form.
enum Conditions {
    /// Sorted keys of its conjuncts (`if`s) and questions (`when`s); empty
    /// for an entry that always matches.
    Known(Vec<String>),
    /// One of its `if`s is always false.
    AlwaysFalse(Span),
    /// A condition has an error: it is compared with nothing.
    Unknown,
}

fn conditions_of(branch: &Branch) -> Conditions {
    let mut keys = Vec::new();
    let mut known = true;
    for guard in &branch.guard {
        for conjunct in conjuncts(guard) {
            match fold_bool(conjunct) {
                Some(true) => {}
                Some(false) => return Conditions::AlwaysFalse(conjunct.span),
                None => match key(conjunct) {
                    Some(text) => keys.push(format!("if {text}")),
                    None => known = false,
                },
            }
        }
    }
    keys.extend(branch.when.iter().map(|text| format!("when {}", when_key(text))));
    if !known {
        return Conditions::Unknown;
    }
    keys.sort();
    keys.dedup();
    Conditions::Known(keys)
}

/// Entries found dead from their conditions alone, and whether an entry
/// without a condition makes the table always match (nothing falls
/// through). Linear in the number of entries: repeats are found by hashing
/// the whole condition set and each single condition (an earlier
/// one-condition entry covers every later entry that includes it).
fn syntactic_dead_entries(branches: &[Branch]) -> (Vec<(usize, DeadReason)>, bool) {
    let mut dead = Vec::new();
    let mut unconditional: Option<usize> = None;
    let mut whole: HashMap<Vec<String>, usize> = HashMap::new();
    let mut single: HashMap<String, usize> = HashMap::new();
    for (index, branch) in branches.iter().enumerate() {
        if let Some(first) = unconditional {
            dead.push((index, DeadReason::AfterUnconditional(first)));
            continue;
        }
        let keys = match conditions_of(branch) {
            Conditions::AlwaysFalse(span) => {
                dead.push((index, DeadReason::AlwaysFalse(span)));
                continue;
            }
            Conditions::Unknown => continue,
            Conditions::Known(keys) => keys,
        };
        if keys.is_empty() {
            unconditional = Some(index);
            continue;
        }
        let earlier =
            whole.get(&keys).copied().into_iter().chain(keys.iter().filter_map(|key| single.get(key).copied())).min();
        if let Some(earlier) = earlier {
            dead.push((index, DeadReason::Repeats(earlier)));
            continue;
        }
        if let [only] = keys.as_slice() {
            single.entry(only.clone()).or_insert(index);
        }
        whole.entry(keys).or_insert(index);
    }
    (dead, unconditional.is_some())
}

/// A point where earlier code-only entries cover a field's every value.
struct Candidate {
    step: StepId,
    /// The last entry needed for the coverage.
    entry: usize,
    field: FieldId,
    entries: Vec<usize>,
}

/// Entries after a code-only table that covers every value of a bool or
/// enum field, where that field is definitely set, and the steps whose
/// table therefore always matches (nothing falls through). Definite
/// assignment is asked only about such candidates, and only when there are
/// some.
fn covered_entries(
    program: &Program,
    flow_id: FlowId,
    flow: &Flow,
    entered_with: &[FieldId],
    graph: &FlowGraph,
) -> (Vec<DeadBranch>, Vec<StepId>) {
    let mut candidates = Vec::new();
    for (step_index, step) in flow.steps.iter().enumerate() {
        let dead_entries = graph.dead_branches.get(step_index);
        let mut covered: HashMap<FieldId, (Values, Vec<usize>)> = HashMap::new();
        let mut complete: BTreeSet<FieldId> = BTreeSet::new();
        for (entry, branch) in step.branches.iter().enumerate() {
            let dead = dead_entries.and_then(|entries| entries.get(entry)).copied().unwrap_or(false);
            if dead || !branch.when.is_empty() {
                continue;
            }
            let Some((field, values)) = entry_coverage(program, branch) else {
                continue;
            };
            if complete.contains(&field) {
                continue;
            }
            let (so_far, entries) = covered.entry(field).or_default();
            so_far.extend(values);
            entries.push(entry);
            if domain(program, field).is_some_and(|all| all.is_subset(so_far)) {
                complete.insert(field);
                candidates.push(Candidate {
                    step: StepId::from_index(step_index),
                    entry,
                    field,
                    entries: entries.clone(),
                });
            }
        }
    }
    if candidates.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let queries: Vec<(StepId, FieldId)> =
        candidates.iter().map(|candidate| (candidate.step, candidate.field)).collect();
    let answers = definitely_set_at_branches(flow, entered_with, graph, &queries);
    // Per step, the earliest confirmed coverage decides.
    let mut earliest: HashMap<StepId, &Candidate> = HashMap::new();
    for (candidate, set) in candidates.iter().zip(answers) {
        if !set {
            continue;
        }
        let slot = earliest.entry(candidate.step).or_insert(candidate);
        if candidate.entry < slot.entry {
            *slot = candidate;
        }
    }
    let mut dead = Vec::new();
    let mut exhaustive = Vec::new();
    for (step, candidate) in earliest {
        let Some(step_decl) = flow.step(step) else {
            continue;
        };
        let already = graph.dead_branches.get(step.index());
        for entry in candidate.entry + 1..step_decl.branches.len() {
            if already.and_then(|entries| entries.get(entry)).copied().unwrap_or(false) {
                continue;
            }
            dead.push(DeadBranch {
                flow: flow_id,
                step,
                entry,
                reason: DeadReason::Covered { field: candidate.field, entries: candidate.entries.clone() },
            });
        }
        exhaustive.push(step);
    }
    (dead, exhaustive)
}

/// The values of one field for which a code-only entry matches.
fn entry_coverage(program: &Program, branch: &Branch) -> Option<(FieldId, Values)> {
    let mut result: Option<(FieldId, Values)> = None;
    for guard in &branch.guard {
        for conjunct in conjuncts(guard) {
            if fold_bool(conjunct) == Some(true) {
                continue;
            }
            let (field, values) = coverage(program, conjunct)?;
            result = match result {
                None => Some((field, values)),
                Some((earlier, _)) if earlier != field => return None,
                Some((_, earlier_values)) => Some((field, earlier_values.intersection(&values).cloned().collect())),
            };
        }
    }
    result
}

/// Steps reached from the entry and the given roots, breadth first.
/// Nodes reached from the entry and from steps entered by name (`roots`),
/// breadth first.
fn reach(graph: &FlowGraph, roots: &[StepId]) -> Vec<bool> {
    let mut reached = vec![false; graph.nodes()];
    let mut queue: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let starts = graph.entry().into_iter().chain(roots.iter().map(|root| root.index()));
    for start in starts {
        if let Some(flag) = reached.get_mut(start)
            && !*flag
        {
            *flag = true;
            queue.push_back(start);
        }
    }
    while let Some(node) = queue.pop_front() {
        for edge in graph.live_edges(node) {
            if let To::Node(target) = edge.to
                && let Some(flag) = reached.get_mut(target)
                && !*flag
            {
                *flag = true;
                queue.push_back(target);
            }
        }
    }
    reached
}

/// Per step, whether an edge from a node that is not reached leads to it
/// (directly, or to its listed arrival).
fn led_from_unreached(graph: &FlowGraph, reached: &[bool]) -> Vec<bool> {
    let mut led = vec![false; graph.steps()];
    for (source, edges) in graph.edges.iter().enumerate() {
        if reached.get(source).copied().unwrap_or(true) {
            continue;
        }
        let (source_step, _) = graph.step_of(source);
        for edge in edges {
            let To::Node(target) = edge.to else {
                continue;
            };
            let (target_step, _) = graph.step_of(target);
            if target_step != source_step
                && let Some(flag) = led.get_mut(target_step)
            {
                *flag = true;
            }
        }
    }
    led
}

/// What this pass finds, by name and span, with the facts its error is
/// written from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ReachabilityError {
    UnreachableStep {
        flow: String,
        step: String,
        span: Span,
        cause: StepCause,
    },
    /// The branch entry at `span` of the step `step`.
    UnreachableBranch {
        step: String,
        span: Span,
        cause: EntryCause,
    },
}

/// Why a step never runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StepCause {
    /// Reached in list order only, and this condition always passes it over.
    AlwaysPassedOver { condition: Span },
    /// Only unreachable steps lead to it.
    OnlyFromUnreachable,
    /// No path from the flow's entry (or a `goto_step`) leads to it.
    NoPath,
}

/// Why a branch entry never matches; entries are numbered from 1, as
/// they read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum EntryCause {
    /// The entry at `unconditional`, before it, always matches.
    AfterUnconditional { unconditional: Span },
    /// Entry `number` (at `span`), before it, has a subset of its conditions.
    Repeats { number: usize, span: Span },
    /// Its `if` at `condition` is always false.
    AlwaysFalse { condition: Span },
    /// The earlier entries (number, span) cover every value of `field`.
    Covered { field: String, entries: Vec<(usize, Span)> },
}

/// Reports `unreachable_step`, `unreachable_branch` and `covered_branch`.
pub(crate) fn check(program: &Program, analysis: &Analysis, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program, analysis).into_iter().map(ReachabilityError::into_diagnostic));
}

pub(crate) fn find(program: &Program, analysis: &Analysis) -> Vec<ReachabilityError> {
    let mut found = Vec::new();
    for unreachable in &analysis.unreachable_steps {
        let Some(flow) = program.flow(unreachable.flow) else {
            continue;
        };
        let Some(step) = flow.step(unreachable.step) else {
            continue;
        };
        let cause = match unreachable.never_runs {
            Some(condition) => StepCause::AlwaysPassedOver { condition },
            None if unreachable.only_from_unreachable => StepCause::OnlyFromUnreachable,
            None => StepCause::NoPath,
        };
        found.push(ReachabilityError::UnreachableStep {
            flow: flow.name.clone(),
            step: step.name.clone(),
            span: step.span,
            cause,
        });
    }
    found.extend(analysis.dead_branches.iter().filter_map(|dead| dead_branch(program, dead)));
    found
}

fn dead_branch(program: &Program, dead: &DeadBranch) -> Option<ReachabilityError> {
    let step = program.flow(dead.flow)?.step(dead.step)?;
    let branch = step.branches.get(dead.entry)?;
    let entry_span = |entry: usize| step.branches.get(entry).map(|branch| branch.span);
    let cause = match &dead.reason {
        DeadReason::AfterUnconditional(first) => EntryCause::AfterUnconditional { unconditional: entry_span(*first)? },
        DeadReason::Repeats(earlier) => EntryCause::Repeats { number: earlier + 1, span: entry_span(*earlier)? },
        DeadReason::AlwaysFalse(condition) => EntryCause::AlwaysFalse { condition: *condition },
        DeadReason::Covered { field, entries } => EntryCause::Covered {
            field: program.field(*field).map_or("?", |field| field.name.as_str()).to_string(),
            entries: entries.iter().map(|entry| Some((entry + 1, entry_span(*entry)?))).collect::<Option<_>>()?,
        },
    };
    Some(ReachabilityError::UnreachableBranch { step: step.name.clone(), span: branch.span, cause })
}

impl ReachabilityError {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            ReachabilityError::UnreachableStep { flow, step, span, cause } => match cause {
                StepCause::AlwaysPassedOver { condition } => {
                    Diagnostic::new(Code::UnreachableStep, format!("the step `{step}` never runs"))
                        .at(span, "this step is always passed over")
                        .with_label(condition, "this condition always passes it over")
                        .with_help("fix the condition, or remove the step")
                }
                StepCause::OnlyFromUnreachable => {
                    Diagnostic::new(Code::UnreachableStep, format!("the step `{step}` is never reached"))
                        .at(span, "only unreachable steps lead here")
                        .with_help("make a step before it reachable, or remove these steps")
                }
                StepCause::NoPath => {
                    Diagnostic::new(Code::UnreachableStep, format!("the step `{step}` is never reached"))
                        .at(span, format!("no path from the entry of `{flow}` leads here"))
                        .with_help("lead to it with `next`, a branch or `goto_step`, or remove it")
                }
            },
            ReachabilityError::UnreachableBranch { step, span, cause } => branch_diagnostic(&step, span, cause),
        }
    }
}

fn branch_diagnostic(step: &str, span: Span, cause: EntryCause) -> Diagnostic {
    match cause {
        EntryCause::AfterUnconditional { unconditional } => {
            Diagnostic::new(Code::UnreachableBranch, format!("this branch entry of `{step}` is never evaluated"))
                .at(span, "never evaluated")
                .with_label(unconditional, "this entry has no condition: it always matches")
                .with_help("put the entry without a condition last: it is the fallback")
        }
        EntryCause::Repeats { number, span: earlier } => Diagnostic::new(
            Code::UnreachableBranch,
            format!("this branch entry of `{step}` never matches: entry {number} matches first whenever it would"),
        )
        .at(span, "never matches")
        .with_label(earlier, "this earlier entry has the same conditions")
        .with_help("remove the repeated entry, or make its conditions differ"),
        EntryCause::AlwaysFalse { condition } => Diagnostic::new(
            Code::UnreachableBranch,
            format!("this branch entry of `{step}` never matches: its `if` is always false"),
        )
        .at(span, "never matches")
        .with_label(condition, "always false")
        .with_help("fix the condition, or remove the entry"),
        EntryCause::Covered { field, entries } => {
            let numbers: Vec<String> = entries.iter().map(|(number, _)| number.to_string()).collect();
            let listed = match numbers.as_slice() {
                [only] => format!("entry {only} covers"),
                [init @ .., last] => format!("entries {} and {last} cover", init.join(", ")),
                [] => "earlier entries cover".to_string(),
            };
            // A warning, as rustc's unreachable pattern is: a defensive
            // fallback after entries that cover every value is harmless,
            // and a faithful port of another tool's flow has one.
            let mut diagnostic = Diagnostic::new(
                Code::CoveredBranch,
                format!("this branch entry of `{step}` is never evaluated: {listed} every value of `{field}`"),
            )
            .at(span, "never evaluated");
            for (_, covering) in entries {
                diagnostic = diagnostic.with_label(covering, format!("covers values of `{field}`"));
            }
            diagnostic.with_help(format!(
                "`{field}` is always set here, so an earlier entry always matches: remove this entry, \
                 or keep it as a fallback that never runs"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{EntryCause, ReachabilityError, StepCause};
    use crate::check::check_findings as check;

    #[test]
    fn a_step_reached_only_by_an_on_error_goto_is_reachable() {
        check(
            r#"schema { id: string }
            tool book() -> { id: string } { builtin echo }
            flow f { when "w"
                auto step book { call book() -> id
                                 on_error goto_step by_phone
                                 next end }
                step by_phone { say "Please call us." } }"#,
            &[],
        );
    }

    #[test]
    fn entries_after_an_unconditional_one_are_never_evaluated() {
        check(
            r#"flow f { when "w"
                step a { branch { else -> b
                                  when "x" -> b } }
                step b { say "b" } }"#,
            &[("unreachable_branch", r#"when "x" -> b"#)],
        );
    }

    #[test]
    fn a_repeated_condition_never_matches_however_spelled() {
        check(
            r#"schema { n: int }
            flow f { when "w"
                step a { collect n
                         branch { if n >= 2 and n < 5 -> b
                                  if 5 > n and 2 <= n -> b
                                  else -> b } }
                step b { say "b" } }"#,
            &[("unreachable_branch", "if 5 > n and 2 <= n -> b")],
        );
    }

    #[test]
    fn an_entry_including_an_earlier_single_condition_never_matches() {
        check(
            r#"schema { n: int }
            flow f { when "w"
                step a { collect n
                         branch { when "yes" -> b
                                  if n > 1 when "yes" -> b
                                  else -> b } }
                step b { say "b" } }"#,
            &[("unreachable_branch", r#"if n > 1 when "yes" -> b"#)],
        );
    }

    #[test]
    fn an_if_that_folds_to_false_never_matches() {
        check(
            r#"flow f { when "w"
                step a { branch { if "a" in ["b", "c"] -> b
                                  else -> b } }
                step b { say "b" } }"#,
            &[("unreachable_branch", r#"if "a" in ["b", "c"] -> b"#)],
        );
    }

    #[test]
    fn covering_a_collected_bool_makes_the_rest_a_covered_branch_warning() {
        check(
            r#"schema { ok: bool }
            flow f { when "w"
                step a { collect ok
                         branch { if ok -> b
                                  if not ok -> c
                                  when "x" -> c } }
                step b { say "b"  next end }
                step c { say "c" } }"#,
            &[("covered_branch", r#"when "x" -> c"#)],
        );
        let findings = crate::check::findings(
            r#"schema { ok: bool }
            flow f { when "w"
                step a { collect ok
                         branch { if ok -> b
                                  if not ok -> c
                                  else -> c } }
                step b { say "b"  next end }
                step c { say "c" } }"#,
        );
        assert_eq!(findings, [("covered_branch", "else -> c".to_string())], "a defensive else: a warning");
        assert_eq!(crate::diag::Code::CoveredBranch.default_severity(), crate::diag::Severity::Warning);
    }

    #[test]
    fn covering_a_field_that_may_be_unset_leaves_the_fallback() {
        check(
            r#"schema { ok: bool }
            flow f { when "w"
                step a { when "maybe"  collect ok }
                step r { branch { if ok is set and ok == true -> b
                                  if ok is set and ok == false -> c
                                  else -> c } }
                step b { say "b"  next end }
                step c { say "c" } }"#,
            &[],
        );
    }

    #[test]
    fn the_fallthrough_of_a_covering_table_is_dead() {
        // `after` follows `a` in the list but `a` always branches away.
        check(
            r#"schema { plan: enum(free, pro) }
            flow f { when "w"
                step a { collect plan
                         branch { if plan == "free" -> b
                                  if plan != "free" -> b } }
                step after { say "never" }
                step b { say "b" } }"#,
            &[("unreachable_step", "after")],
        );
    }

    #[test]
    fn an_auto_step_whose_do_emits_a_position_never_falls_through() {
        check(
            r#"schema { x: string "X" }
            flow f { when "w"
                step a { prompt "X?" collect x }
                auto step go { emit goto g }
                step after { say "never" } }
            flow g { when "v"  step s { say "g" } }"#,
            &[("unreachable_step", "after")],
        );
        // Called and come back: `use` is reached only from `fill`, which
        // sets `y`, not by falling through `go` (no false maybe_unset).
        check(
            r#"schema { x: string "X"  y: string "Y" }
            flow f { when "w"
                step a { prompt "X?" collect x }
                auto step go { emit goto_step fill }
                step use { say "{{y}}"  next end }
                auto step fill { set y = "filled"  emit goto_step use } }"#,
            &[],
        );
    }

    #[test]
    fn a_step_after_next_end_is_unreachable() {
        check(
            r#"flow f { when "w"
                step a { say "a"  next end }
                step b { say "b" } }"#,
            &[("unreachable_step", "b")],
        );
    }

    #[test]
    fn passing_over_a_step_reaches_the_one_after_it() {
        check(
            r#"schema { n: int }
            flow f { when "w"
                step a { collect n }
                step b { skip_if n > 1  say "b"  next end }
                step c { say "c" } }"#,
            &[],
        );
    }

    #[test]
    fn a_step_named_by_next_is_entered_not_passed_over() {
        check(
            r#"schema { n: int }
            flow f { when "w"
                step a { collect n  next b }
                step b { skip_if n > 1  say "b"  next end }
                step c { say "c" } }"#,
            &[("unreachable_step", "c")],
        );
    }

    #[test]
    fn a_branch_directive_without_a_position_goes_on_in_list_order() {
        // Not to `next`: the runtime continues with the next step in the list.
        check(
            r#"flow f { when "w"
                step a { branch { when "x" -> { reply "ok" } }  next c }
                step b { say "b"  next end }
                step c { say "c" } }"#,
            &[],
        );
    }

    #[test]
    fn a_goto_step_anywhere_makes_its_target_reachable() {
        check(
            r#"signal s { when "help"  then { goto_step f.c } }
            flow f { when "w"
                step a { say "a"  next end }
                step c { say "c" } }"#,
            &[],
        );
    }

    #[test]
    fn a_reset_leads_back_to_the_entry_only() {
        check(
            r#"schema { x: string }
            flow f { when "w"
                step a { collect x  next b }
                step b { say "b"  emit reset  next end }
                step c { say "c" } }"#,
            &[("unreachable_step", "c")],
        );
    }

    #[test]
    fn a_step_whose_if_is_always_false_never_runs() {
        check(
            r#"flow f { when "w"
                step a { say "a" }
                step b { if 1 == 2  say "b" }
                step c { say "c" } }"#,
            &[("unreachable_step", "b")],
        );
    }

    #[test]
    fn steps_behind_an_unresolved_target_are_not_reported() {
        check(
            r#"flow f { when "w"
                step a { say "a"  next bb }
                step c { say "c"  next end }
                step b { say "b" } }"#,
            &[("unknown_target", "bb")],
        );
    }

    #[test]
    fn the_errors_hold_names_spans_and_why() {
        let (file, program) = crate::check::tests::compiled(
            r#"flow f { when "w"
            step a { branch { else -> c
                              when "x" -> b } }
            step b { say "b" }
            step c { say "c" } }"#,
        );
        let analysis = super::analysis(&program);
        let at = |needle: &str| crate::check::tests::at(&file, needle, 0);
        let step_b = at("step b");
        assert_eq!(
            super::find(&program, &analysis),
            [
                ReachabilityError::UnreachableStep {
                    flow: "f".to_string(),
                    step: "b".to_string(),
                    span: crate::source::Span::new(step_b.end - 1, step_b.end),
                    cause: StepCause::NoPath,
                },
                ReachabilityError::UnreachableBranch {
                    step: "a".to_string(),
                    span: at(r#"when "x" -> b"#),
                    cause: EntryCause::AfterUnconditional { unconditional: at("else -> c") },
                },
            ]
        );
    }

    #[test]
    fn analyze_returns_what_the_checker_reports() {
        let source = r#"flow f { when "w"
            step a { branch { else -> c
                              when "x" -> b } }
            step b { say "b" }
            step c { say "c" } }"#;
        let file = crate::source::SourceFile::new("test.flow", source);
        let compilation = crate::pipeline::compile(&file);
        let reachability = super::analyze(&compilation.ir);
        let step = |index: usize| (crate::ir::FlowId(0), crate::ir::StepId::from_index(index));
        assert_eq!(reachability.unreachable_steps, [step(1)].into_iter().collect());
        assert_eq!(
            reachability.unreachable_branches,
            [(crate::ir::FlowId(0), crate::ir::StepId(0), 1)].into_iter().collect()
        );
    }
}
