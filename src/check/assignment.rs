//! Definite assignment (`maybe_unset`, a warning): a template, expression
//! or tool argument that reads a field which is not set on every path from
//! the flow's entry (LANGUAGE.md section 11). A field counts as set where,
//! on every path, a step collected it, an action set it (`set`, a `call`'s
//! `save`, an emitted directive's `set`) or a step on the path lists it in
//! `requires`; flow-level `requires` count only for workflows, whose inputs
//! they are. A flow that only `goto`s enter starts with the fields all of
//! them write (`goto: { flow: F, data: {...} }`). A condition that proves a field set counts too: `x is set and
//! x > 1`, a step whose `if` is `x is set`, a branch entry's `if` on the
//! edge it guards. Testing a field (`x is set`, `x == null`) is not a read.
//!
//! Within a step, what runs first is read first: `skip_if` and `if`; then
//! `on_enter`, `prepare`, the prompt, `on_no_answer` and `finalize`, before
//! the step's own `collect` is counted; then `do`, `say` and the branches.
//! Each step is summarised once ([`summarize`]) into the fields it sets and
//! its reads that nothing earlier in the step covers, so the dataflow over
//! the flow's graph only moves bitsets. Fields are processed 64 at a time
//! (one machine word per step), which keeps memory linear in the flow's
//! size whatever the number of fields.

use super::conditions::{facts, fold};
use super::flowgraph::{FlowGraph, Target, Via};
use super::reachability::Analysis;
use super::walk;
use crate::diag::{Code, Diagnostic};
use crate::expr::{Expr, ExprKind, Template, TemplatePart};
use crate::ir::{Action, ActionKind, Directive, FieldId, Flow, FlowId, Position, Program, StepId};
use crate::source::Span;
use crate::syntax::ast::BinaryOp;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// Reports `maybe_unset` for every flow whose structure is whole.
pub(crate) fn check(program: &Program, analysis: &Analysis, diagnostics: &mut Vec<Diagnostic>) {
    for (index, flow) in program.flows.iter().enumerate() {
        if flow.incomplete || flow.steps.is_empty() {
            continue;
        }
        let Some(graph) = analysis.graphs.get(index) else {
            continue;
        };
        let reachable = analysis.reachable.get(index).map(Vec::as_slice).unwrap_or_default();
        let entered_with = analysis.entered_with.get(index).map(Vec::as_slice).unwrap_or_default();
        check_flow(program, flow, entered_with, graph, reachable, diagnostics);
    }
}

fn check_flow(
    program: &Program,
    flow: &Flow,
    entered_with: &[FieldId],
    graph: &FlowGraph,
    reachable: &[bool],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let summary = summarize(flow, entered_with);
    let field_name = |field: FieldId| program.field(field).map_or("?", |field| field.name.as_str());
    for (field, span) in &summary.entry_reads {
        let name = field_name(*field);
        diagnostics.push(
            Diagnostic::new(
                Code::MaybeUnset,
                format!("`{name}` may be unset when the flow `{}` starts", flow.name),
            )
            .at(*span, format!("`{name}` is read here, before any step runs"))
            .with_help(format!(
                "`on_enter` runs as the flow is entered; read `{name}` in a step that collects it or lists it in `requires`, or test it with `{name} is set`"
            )),
        );
    }
    let mut tracked: Vec<FieldId> = summary
        .steps
        .iter()
        .enumerate()
        .filter(|(index, _)| reachable.get(*index).copied().unwrap_or(false))
        .flat_map(|(_, step)| step.reads.iter().map(|(field, _)| *field))
        .chain(summary.complete_reads.iter().map(|(field, _)| *field))
        .collect();
    tracked.sort_unstable();
    tracked.dedup();
    if tracked.is_empty() {
        return;
    }
    let dataflow = Dataflow::new(graph, &summary, tracked);
    let mut budget = PathBudget::new(graph.len());
    dataflow.for_each_chunk(|chunk| {
        let mut paths: HashMap<FieldId, Option<Vec<u32>>> = HashMap::new();
        for (step_index, step) in summary.steps.iter().enumerate() {
            if !reachable.get(step_index).copied().unwrap_or(false) {
                continue;
            }
            for (field, span) in &step.reads {
                if chunk.set_on_arrival(step_index, *field) != Some(false) {
                    continue;
                }
                let parents = paths.entry(*field).or_insert_with(|| chunk.unset_paths(*field, &mut budget));
                let path = parents.as_ref().and_then(|parents| path_to(parents, step_index));
                let step_name = flow.steps.get(step_index).map_or("?", |step| step.name.as_str());
                diagnostics.push(unset_in_step(flow, field_name(*field), step_name, *span, path.as_deref()));
            }
        }
        let complete = graph.len();
        for (field, span) in &summary.complete_reads {
            if chunk.set_on_arrival(complete, *field) != Some(false) {
                continue;
            }
            let parents = paths.entry(*field).or_insert_with(|| chunk.unset_paths(*field, &mut budget));
            let path = parents.as_ref().and_then(|parents| path_to(parents, complete));
            diagnostics.push(unset_on_complete(flow, field_name(*field), *span, path.as_deref()));
        }
    });
}

fn unset_in_step(flow: &Flow, name: &str, step_name: &str, span: Span, path: Option<&[u32]>) -> Diagnostic {
    let message = match path {
        Some([_]) => {
            format!("`{name}` may be unset when the step `{step_name}` reads it: the flow starts at `{step_name}`")
        }
        Some(path) => format!(
            "`{name}` may be unset when the step `{step_name}` reads it: nothing sets it on the path {}",
            describe_path(flow, path)
        ),
        None => format!("`{name}` may be unset when the step `{step_name}` reads it"),
    };
    Diagnostic::new(Code::MaybeUnset, message).at(span, format!("`{name}` is read here")).with_help(format!(
        "collect `{name}` in an earlier step, list it in this step's `requires`, or test it with `{name} is set`"
    ))
}

fn unset_on_complete(flow: &Flow, name: &str, span: Span, path: Option<&[u32]>) -> Diagnostic {
    let message = match path {
        Some(path) => format!(
            "`{name}` may be unset when the flow `{}` completes: nothing sets it on the path {}",
            flow.name,
            describe_path(flow, path)
        ),
        None => format!("`{name}` may be unset when the flow `{}` completes", flow.name),
    };
    Diagnostic::new(Code::MaybeUnset, message)
        .at(span, format!("`{name}` is read here, in `on_complete`"))
        .with_help(format!("collect or set `{name}` on every path to completion, or test it with `{name} is set`"))
}

/// `` `a` → `b` → `c` ``, long paths shortened in the middle. The
/// completion node (one past the last step) is spelled "completion".
fn describe_path(flow: &Flow, path: &[u32]) -> String {
    const KEEP: usize = 4;
    let name = |node: &u32| match flow.steps.get(*node as usize) {
        Some(step) => format!("`{}`", step.name),
        None => "completion".to_string(),
    };
    if path.len() <= 2 * KEEP {
        return path.iter().map(name).collect::<Vec<_>>().join(" → ");
    }
    let head: Vec<String> = path.iter().take(KEEP).map(name).collect();
    let tail: Vec<String> = path.iter().skip(path.len() - KEEP).map(name).collect();
    format!("{} → … → {}", head.join(" → "), tail.join(" → "))
}

/// Follows parent links from `node` back to the entry.
fn path_to(parents: &[u32], node: usize) -> Option<Vec<u32>> {
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
struct PathBudget {
    remaining: usize,
}

impl PathBudget {
    fn new(nodes: usize) -> PathBudget {
        PathBudget { remaining: nodes.saturating_add(64).saturating_mul(32) }
    }
}

// ---------------------------------------------------------------- summaries

/// What one step does to definite assignment.
#[derive(Debug, Default)]
pub(crate) struct StepSummary {
    /// Fields set once the step has run (its `requires`, `collect`, the
    /// facts of its own conditions, its actions' writes).
    pub gens: Vec<FieldId>,
    /// Fields the step may write null to (`set x = null`) and does not set
    /// again after: unset once it has run, whatever they were before.
    pub kills: Vec<FieldId>,
    /// Per branch entry, what its edge adds: the facts of its `if`, the
    /// writes of its directive.
    pub branch_gens: Vec<Vec<FieldId>>,
    /// Per branch entry, the fields its directive writes null to.
    pub branch_kills: Vec<Vec<FieldId>>,
    /// Reads that nothing earlier in the step covers, the first per field.
    pub reads: Vec<(FieldId, Span)>,
}

/// What a flow does to definite assignment.
#[derive(Debug, Default)]
pub(crate) struct FlowSummary {
    /// Set when the first step is reached: the flow's `on_enter` writes,
    /// and a workflow's inputs.
    pub entry_gens: Vec<FieldId>,
    /// Reads in the flow's `on_enter` that nothing covers.
    pub entry_reads: Vec<(FieldId, Span)>,
    /// Reads in `on_complete` that nothing in it covers.
    pub complete_reads: Vec<(FieldId, Span)>,
    pub steps: Vec<StepSummary>,
}

/// Per flow, the fields set whenever it is entered: those every `goto`
/// into it writes (its `data`), when nothing else enters it. Routing
/// (`when`, `if`, `default`), `complete next` and a `goto` without data
/// all enter it with nothing set; `goto_step` does not enter at the entry.
pub(crate) fn entered_with(program: &Program) -> Vec<Vec<FieldId>> {
    // `None`: no entry seen yet; `Some(fields)`: set on every entry so far.
    let mut sets: Vec<Option<Vec<FieldId>>> = program
        .flows
        .iter()
        .map(|flow| {
            let routed = !flow.when.is_empty() || !flow.guard.is_empty() || flow.default;
            routed.then(Vec::new)
        })
        .collect();
    let mut enter = |flow: FlowId, data: Vec<FieldId>| {
        if let Some(slot) = sets.get_mut(flow.index()) {
            *slot = Some(match slot.take() {
                None => data,
                Some(earlier) => earlier.into_iter().filter(|field| data.contains(field)).collect(),
            });
        }
    };
    for flow in &program.flows {
        if let Some(next) = flow.complete_next {
            enter(next, Vec::new());
        }
    }
    walk::directives(program, |_, directive| match &directive.position {
        Some(Position::Goto { flow, data }) => {
            let written = data.iter().filter(|write| !is_null(&write.value)).map(|write| write.field).collect();
            enter(*flow, written);
        }
        Some(Position::Complete { next: Some(next) }) => enter(*next, Vec::new()),
        _ => {}
    });
    sets.into_iter().map(Option::unwrap_or_default).collect()
}

pub(crate) fn summarize(flow: &Flow, entered_with: &[FieldId]) -> FlowSummary {
    let mut entry = Walker::default();
    for field in entered_with {
        entry.set(*field);
    }
    if flow.workflow {
        for field in &flow.requires {
            entry.set(*field);
        }
    }
    entry.actions(&flow.on_enter);
    let mut complete = Walker::default();
    complete.actions(&flow.on_complete);
    FlowSummary {
        entry_gens: entry.known_fields(),
        entry_reads: entry.reads,
        complete_reads: complete.reads,
        steps: flow.steps.iter().map(summarize_step).collect(),
    }
}

fn summarize_step(step: &crate::ir::Step) -> StepSummary {
    let mut walker = Walker::default();
    if let Some(skip_if) = &step.skip_if {
        walker.expr(skip_if);
    }
    for guard in &step.guard {
        walker.expr(guard);
    }
    for field in &step.requires {
        walker.set(*field);
    }
    let mut proven = Vec::new();
    for guard in &step.guard {
        facts(guard, true, &mut proven);
    }
    if let Some(skip_if) = &step.skip_if {
        facts(skip_if, false, &mut proven);
    }
    for field in proven {
        walker.set(field);
    }
    walker.actions(&step.on_enter);
    walker.actions(&step.prepare);
    if let Some(prompt) = &step.prompt {
        walker.template(prompt);
    }
    if let Some(directive) = &step.on_no_answer {
        let mark = walker.mark();
        walker.directive(directive);
        walker.restore(mark);
    }
    walker.actions(&step.finalize);
    for field in &step.collect {
        walker.set(*field);
    }
    walker.actions(&step.actions);
    if let Some(say) = &step.say {
        walker.template(say);
    }
    let gens = walker.known_fields();
    let kills = walker.killed_fields();
    let mut branch_gens = Vec::with_capacity(step.branches.len());
    let mut branch_kills = Vec::with_capacity(step.branches.len());
    for branch in &step.branches {
        for guard in &branch.guard {
            walker.expr(guard);
        }
        let mut edge = Vec::new();
        let mut edge_kills = Vec::new();
        for guard in &branch.guard {
            facts(guard, true, &mut edge);
        }
        if let crate::ir::Then::Directive(directive) = &branch.then {
            let mark = walker.mark();
            for field in &edge {
                walker.set(*field);
            }
            walker.directive(directive);
            walker.restore(mark);
            for write in &directive.set {
                if is_null(&write.value) {
                    edge_kills.push(write.field);
                } else {
                    edge.push(write.field);
                }
            }
        }
        branch_gens.push(edge);
        branch_kills.push(edge_kills);
    }
    StepSummary { gens, kills, branch_gens, branch_kills, reads: walker.reads }
}

/// Walks a step's expressions in evaluation order, tracking which fields
/// the step itself has set so far. `known` is a multiset with an undo log,
/// so scopes (a `for_each` body, a narrowing `and`) are cheap to leave.
#[derive(Default)]
struct Walker {
    known: HashMap<FieldId, u32>,
    log: Vec<FieldId>,
    /// Fields written null somewhere (even inside a `for_each`: it may run).
    killed: HashSet<FieldId>,
    reported: HashSet<FieldId>,
    reads: Vec<(FieldId, Span)>,
}

/// Past this depth an expression's reads are not followed (the front ends
/// refuse expressions this deep).
const MAX_DEPTH: usize = 256;

impl Walker {
    fn set(&mut self, field: FieldId) {
        *self.known.entry(field).or_insert(0) += 1;
        self.log.push(field);
    }

    /// A write of null: the field is unset after it, and stays so when a
    /// scope around the write is left (the write may have happened).
    fn kill(&mut self, field: FieldId) {
        self.known.remove(&field);
        self.killed.insert(field);
    }

    /// A write: of null, a kill; of anything else, a set.
    fn write(&mut self, field: FieldId, value: &Expr) {
        if is_null(value) {
            self.kill(field);
        } else {
            self.set(field);
        }
    }

    fn killed_fields(&self) -> Vec<FieldId> {
        let mut fields: Vec<FieldId> =
            self.killed.iter().copied().filter(|field| !self.known.contains_key(field)).collect();
        fields.sort_unstable();
        fields
    }

    fn mark(&self) -> usize {
        self.log.len()
    }

    fn restore(&mut self, mark: usize) {
        while self.log.len() > mark {
            let Some(field) = self.log.pop() else {
                break;
            };
            if let Some(count) = self.known.get_mut(&field) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.known.remove(&field);
                }
            }
        }
    }

    fn known_fields(&self) -> Vec<FieldId> {
        let mut fields: Vec<FieldId> = self.known.keys().copied().collect();
        fields.sort_unstable();
        fields
    }

    fn read(&mut self, field: FieldId, span: Span) {
        if !self.known.contains_key(&field) && self.reported.insert(field) {
            self.reads.push((field, span));
        }
    }

    fn template(&mut self, template: &Template) {
        for part in &template.parts {
            if let TemplatePart::Expr(expr) = part {
                self.expr(expr);
            }
        }
    }

    fn expr(&mut self, expr: &Expr) {
        self.expr_at(expr, 0);
    }

    fn expr_at(&mut self, expr: &Expr, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let depth = depth + 1;
        match &expr.kind {
            ExprKind::Field { field } => self.read(*field, expr.span),
            // Testing whether a field is set is what makes reading it safe.
            ExprKind::IsSet { .. } => {}
            ExprKind::Binary { op, left, right } => match op {
                BinaryOp::And | BinaryOp::Or => {
                    self.expr_at(left, depth);
                    // The right operand runs only when the left one did
                    // not decide: after `x is set and`, x is set.
                    let mark = self.mark();
                    let mut proven = Vec::new();
                    facts(left, *op == BinaryOp::And, &mut proven);
                    for field in proven {
                        self.set(field);
                    }
                    self.expr_at(right, depth);
                    self.restore(mark);
                }
                BinaryOp::Eq | BinaryOp::Ne if is_null(left) || is_null(right) => {
                    // `x == null` tests x; only a compound side is a read.
                    for side in [left, right] {
                        if !matches!(side.kind, ExprKind::Field { .. }) {
                            self.expr_at(side, depth);
                        }
                    }
                }
                _ => {
                    self.expr_at(left, depth);
                    self.expr_at(right, depth);
                }
            },
            ExprKind::List { items } | ExprKind::Call { args: items, .. } => {
                for item in items {
                    self.expr_at(item, depth);
                }
            }
            ExprKind::Member { object: operand, .. } | ExprKind::Unary { operand, .. } => self.expr_at(operand, depth),
            ExprKind::Literal { .. }
            | ExprKind::Context { .. }
            | ExprKind::Local { .. }
            | ExprKind::Env { .. }
            | ExprKind::Error => {}
        }
    }

    fn directive(&mut self, directive: &Directive) {
        if let Some(reply) = &directive.reply {
            self.template(reply);
        }
        for write in &directive.set {
            self.expr(&write.value);
        }
        for write in &directive.set_context {
            self.expr(&write.value);
        }
        for text in &directive.append_prompt {
            self.template(text);
        }
        match &directive.position {
            Some(Position::Goto { data, .. }) => {
                for write in data {
                    self.expr(&write.value);
                }
            }
            Some(Position::Abort { reason: Some(reason) }) => self.template(reason),
            _ => {}
        }
    }

    /// Runs a list of actions in order; writes inside a `for_each` body are
    /// visible in the body only (the list may be empty).
    fn actions(&mut self, actions: &[Action]) {
        enum Frame<'a> {
            Actions(std::slice::Iter<'a, Action>),
            Leave(usize),
        }
        let mut stack = vec![Frame::Actions(actions.iter())];
        while let Some(frame) = stack.last_mut() {
            let action = match frame {
                Frame::Actions(iter) => match iter.next() {
                    Some(action) => action,
                    None => {
                        stack.pop();
                        continue;
                    }
                },
                Frame::Leave(mark) => {
                    let mark = *mark;
                    stack.pop();
                    self.restore(mark);
                    continue;
                }
            };
            match &action.kind {
                ActionKind::Set(write) => {
                    self.expr(&write.value);
                    self.write(write.field, &write.value);
                }
                ActionKind::Call(call) => {
                    for arg in &call.args {
                        self.expr(arg);
                    }
                    if let Some(field) = call.save {
                        self.set(field);
                    }
                }
                ActionKind::Emit(directive) => {
                    self.directive(directive);
                    for write in &directive.set {
                        self.write(write.field, &write.value);
                    }
                }
                ActionKind::Say { text } => self.template(text),
                ActionKind::ForEach(for_each) => {
                    self.expr(&for_each.items);
                    let mark = self.mark();
                    if let Some(filter) = &for_each.filter {
                        self.expr(filter);
                        let mut proven = Vec::new();
                        facts(filter, true, &mut proven);
                        for field in proven {
                            self.set(field);
                        }
                    }
                    stack.push(Frame::Leave(mark));
                    stack.push(Frame::Actions(for_each.actions.iter()));
                }
            }
        }
    }
}

fn is_null(expr: &Expr) -> bool {
    matches!(fold(expr), Some(serde_json::Value::Null))
}

// ---------------------------------------------------------------- dataflow

/// How an edge's state is made from its source step's.
#[derive(Clone, Copy)]
enum Carry {
    /// The step was passed over: its arrival state.
    Skipped,
    /// The step ran: its arrival state and what it set.
    Ran,
    /// The step ran and branch entry `n` matched.
    Branch(usize),
}

/// The definite-assignment dataflow of one flow, over the live edges of its
/// graph. Nodes are the steps and, one past them, the flow's completion.
pub(crate) struct Dataflow<'a> {
    summary: &'a FlowSummary,
    tracked: Vec<FieldId>,
    /// Nodes in reverse post-order from the entry (only those it reaches).
    order: Vec<u32>,
    /// Position of each node in `order`, or `NONE` when not reached.
    rank: Vec<u32>,
    predecessors: Vec<Vec<(u32, Carry)>>,
    successors: Vec<Vec<(u32, Carry)>>,
}

impl<'a> Dataflow<'a> {
    pub(crate) fn new(graph: &'a FlowGraph, summary: &'a FlowSummary, tracked: Vec<FieldId>) -> Dataflow<'a> {
        let nodes = graph.len() + 1;
        let complete = graph.len();
        let mut predecessors: Vec<Vec<(u32, Carry)>> = vec![Vec::new(); nodes];
        let mut successors: Vec<Vec<(u32, Carry)>> = vec![Vec::new(); nodes];
        for step in 0..graph.len() {
            for edge in graph.live_edges(step) {
                let target = match edge.target {
                    Target::Step(target) => target.index(),
                    Target::Complete { .. } => complete,
                    // Entering a flow again (`goto` itself) starts a new
                    // path from its entry; other flows are other paths.
                    Target::Enter(..) => continue,
                };
                if target >= nodes {
                    continue;
                }
                let carry = match edge.via {
                    Via::Skip => Carry::Skipped,
                    Via::Branch(entry) => Carry::Branch(entry),
                    Via::Fallthrough | Via::Directive => Carry::Ran,
                };
                let (Ok(source), Ok(target_u32)) = (u32::try_from(step), u32::try_from(target)) else {
                    continue;
                };
                if let Some(list) = predecessors.get_mut(target) {
                    list.push((source, carry));
                }
                if let Some(list) = successors.get_mut(step) {
                    list.push((target_u32, carry));
                }
            }
        }
        let order = reverse_post_order(&successors);
        let mut rank = vec![NONE; nodes];
        for (position, node) in order.iter().enumerate() {
            if let Some(slot) = rank.get_mut(*node as usize) {
                *slot = u32::try_from(position).unwrap_or(NONE);
            }
        }
        Dataflow { summary, tracked, order, rank, predecessors, successors }
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
            let init = mask_of(&self.summary.entry_gens);
            let masks = Masks {
                gens: self.summary.steps.iter().map(|step| mask_of(&step.gens)).collect(),
                kills: self.summary.steps.iter().map(|step| mask_of(&step.kills)).collect(),
                branch_gens: self
                    .summary
                    .steps
                    .iter()
                    .map(|step| step.branch_gens.iter().map(|list| mask_of(list)).collect())
                    .collect(),
                branch_kills: self
                    .summary
                    .steps
                    .iter()
                    .map(|step| step.branch_kills.iter().map(|list| mask_of(list)).collect())
                    .collect(),
            };
            let states = self.solve(init, &masks);
            visit(&Chunk { dataflow: self, bits, states, masks });
        }
    }

    fn carried(states: &[u64], masks: &Masks, source: u32, carry: Carry) -> u64 {
        let source = source as usize;
        let arrival = states.get(source).copied().unwrap_or(u64::MAX);
        let ran = masks.ran(source, arrival);
        match carry {
            Carry::Skipped => arrival,
            Carry::Ran => ran,
            Carry::Branch(entry) => {
                let entry_mask =
                    |lists: &[Vec<u64>]| lists.get(source).and_then(|entries| entries.get(entry)).copied().unwrap_or(0);
                (ran & !entry_mask(&masks.branch_kills)) | entry_mask(&masks.branch_gens)
            }
        }
    }

    /// The greatest fixpoint: every reached node starts at "all set" and
    /// only loses bits, so each node changes at most 64 times and the
    /// worklist (kept in reverse post-order) does linear work per bit.
    fn solve(&self, init: u64, masks: &Masks) -> Vec<u64> {
        let nodes = self.rank.len();
        let mut states = vec![u64::MAX; nodes];
        if let Some(entry) = states.first_mut() {
            *entry = init;
        }
        let mut queued = vec![false; nodes];
        let mut worklist: BinaryHeap<Reverse<u32>> = BinaryHeap::with_capacity(self.order.len());
        for (position, node) in self.order.iter().enumerate() {
            if *node != 0 {
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
                state &= Self::carried(&states, masks, *source, *carry);
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
                if successor == 0 || queued.get(successor).copied().unwrap_or(true) {
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

/// Reverse post-order of the nodes reachable from node 0, iteratively.
fn reverse_post_order(successors: &[Vec<(u32, Carry)>]) -> Vec<u32> {
    if successors.is_empty() {
        return Vec::new();
    }
    let mut visited = vec![false; successors.len()];
    let mut post_order = Vec::with_capacity(successors.len());
    let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
    if let Some(flag) = visited.first_mut() {
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
    gens: Vec<u64>,
    kills: Vec<u64>,
    branch_gens: Vec<Vec<u64>>,
    branch_kills: Vec<Vec<u64>>,
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
    /// the step runs). `None` when the field is not in this chunk or the
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
    /// branches are evaluated.
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
    fn unset_paths(&self, field: FieldId, budget: &mut PathBudget) -> Option<Vec<u32>> {
        let bit = 1u64 << *self.bits.get(&field)?;
        let nodes = self.states.len();
        if budget.remaining < nodes {
            return None;
        }
        budget.remaining -= nodes;
        let mut parents = vec![NONE; nodes];
        if self.states.first().is_none_or(|state| state & bit != 0) {
            return Some(parents);
        }
        if let Some(root) = parents.first_mut() {
            *root = ROOT;
        }
        let mut queue = std::collections::VecDeque::from([0u32]);
        while let Some(node) = queue.pop_front() {
            for (target, carry) in self.dataflow.successors.get(node as usize).into_iter().flatten() {
                let target_index = *target as usize;
                if parents.get(target_index).is_none_or(|parent| *parent != NONE) {
                    continue;
                }
                // The edge must carry the field unset.
                let carries_unset = Dataflow::carried(&self.states, &self.masks, node, *carry) & bit == 0;
                if carries_unset {
                    if let Some(parent) = parents.get_mut(target_index) {
                        *parent = node;
                    }
                    queue.push_back(*target);
                }
            }
        }
        Some(parents)
    }
}

/// For each `(step, field)` query: whether the field is set on every path
/// from the flow's entry when the step's branches are evaluated. Steps the
/// entry does not reach answer `true` (no path says otherwise).
pub(crate) fn definitely_set_at_branches(
    flow: &Flow,
    entered_with: &[FieldId],
    graph: &FlowGraph,
    queries: &[(StepId, FieldId)],
) -> Vec<bool> {
    let summary = summarize(flow, entered_with);
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

#[cfg(test)]
mod tests {
    use crate::check::{check_findings as check, findings};

    const SCHEMA: &str = "schema { a: string  b: string  n: int  ok: bool  xs: list(string) }\n";

    fn with_schema(flows: &str) -> String {
        format!("{SCHEMA}{flows}")
    }

    #[test]
    fn a_field_collected_on_one_path_only_may_be_unset() {
        let source = with_schema(
            r#"flow f { when "w"
                step s1 { collect ok
                          branch { if ok == true -> s3
                                   else -> s2 } }
                step s2 { collect a }
                step s3 { say "{{a}}" } }"#,
        );
        let found = findings(&source);
        assert_eq!(found.len(), 1, "{found:?}");
        let file = crate::source::SourceFile::new("test.flow", source.as_str());
        let diagnostics = crate::pipeline::compile(&file).diagnostics;
        let message = diagnostics.first().map(|diagnostic| diagnostic.message.as_str()).unwrap_or_default();
        assert_eq!(message, "`a` may be unset when the step `s3` reads it: nothing sets it on the path `s1` → `s3`");
    }

    #[test]
    fn collect_requires_set_and_save_all_count() {
        check(
            &with_schema(
                r#"tool t() -> { b: string } { builtin echo }
                flow f { when "w"
                step s1 { collect a }
                auto step s2 { set n = 1  call t() -> b }
                step s3 { requires ok  say "{{a}} {{b}} {{n}} {{ok}}" } }"#,
            ),
            &[],
        );
    }

    #[test]
    fn flow_requires_count_only_for_workflows() {
        check(
            &with_schema(
                r#"flow conversation { when "w"  requires a
                    step s { prompt "{{a}}?"  collect a } }
                flow job { requires a
                    auto step s { set b = a } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_test_that_the_field_is_set_guards_the_read() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { if n is set  say "{{n}}" }
                step s2 { skip_if a == null  say "{{a}}" }
                step s3 { branch { if n is set and n > 1 -> s4
                                   if ok is set and ok -> { reply "{{ok}}"  complete }
                                   else -> { complete } } }
                step s4 { say "{{n}}" } }"#,
            ),
            &[],
        );
    }

    #[test]
    fn writing_null_unsets_a_field() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a }
                auto step s2 { set a = null }
                step s3 { say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_set_inside_for_each_does_not_count_after_the_loop() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect xs }
                auto step s2 { for x in xs { set a = x  say "{{a}}" } say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_flow_on_enter_read_is_before_any_step() {
        check(
            &with_schema(
                r#"flow f { when "w"
                on_enter { say "Hello {{a}}" }
                step s { collect a } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_flow_entered_only_by_goto_starts_with_its_data() {
        check(
            &with_schema(
                r#"flow f { when "w"
                    step s { collect a  branch { if a == "x" -> { goto g with { a: a, b: "y" } }
                                                 else -> { goto g with { a: a } } } } }
                flow g { step t { say "{{a}}" }
                         step u { say "{{b}}" } }
                flow h { when "h"
                    step s { collect a  emit goto k with { a: a } } }
                flow k { when "k"  step t { say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "b"), ("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_loop_keeps_what_every_way_round_sets() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a }
                step s2 { collect ok  say "{{a}}"
                          branch { if ok == true -> s1
                                   else -> s3 } }
                step s3 { say "{{a}} {{ok}}" } }"#,
            ),
            &[],
        );
    }
}
