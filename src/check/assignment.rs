//! Definite assignment (`maybe_unset`, a warning): a template, expression
//! or tool argument that reads a field which is not set on every path from
//! the flow's entry (LANGUAGE.md section 11). A field counts as set where,
//! on every path, a step collected it, an action set it (`set`, a `call`'s
//! `save`, an emitted directive's `set`) or a step on the path lists it in
//! `requires`; flow-level `requires` count only for workflows, whose inputs
//! they are. A flow that only `goto`s enter starts with the fields all of
//! them write (`goto: { flow: F, data: {...} }`). A condition that proves
//! a field set counts too: `x is set and x > 1`, a step whose `if` is
//! `x is set` (when that `if` was tested), a branch entry's `if` on the
//! edge it guards. Testing a field (`x is set`, `x == null`) is not a read.
//!
//! Within a step, what runs first is read first: `skip_if` and `if` (when
//! the step is reached in list order: a step entered by name is not
//! tested); then `on_enter`, `prepare`, the prompt, `on_no_answer` and
//! `finalize`, before the step's own `collect` is counted; then `do`, `say`
//! and the branches. A branch entry with a `when` may be taken while the
//! step still waits for its fields (docs/runtime.md): on its edge and in
//! its directive the step's `collect` and `do` do not count. (Its own `if`
//! is a filter, read as after the step ran: on such an interrupt a field
//! not collected yet is null and the `if` is just false.)
//! Each step is summarised once ([`summarize`]) into the fields it sets and
//! its reads that nothing earlier in the step covers, so the dataflow over
//! the flow's graph only moves bitsets. Fields are processed 64 at a time
//! (one machine word per step), which keeps memory linear in the flow's
//! size whatever the number of fields.

use super::conditions::{facts, fold};
use super::flowgraph::{FlowGraph, To, Via};
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
        let reached = analysis.reached_nodes.get(index).map(Vec::as_slice).unwrap_or_default();
        let entered_with = analysis.entered_with.get(index).map(Vec::as_slice).unwrap_or_default();
        check_flow(program, flow, entered_with, graph, reached, diagnostics);
    }
}

/// Where a read happens: in a step (its body), or in a step's conditions,
/// tested on its listed arrival.
struct ReadSite<'a> {
    node: usize,
    step: usize,
    reads: &'a [(FieldId, Span)],
}

fn check_flow(
    program: &Program,
    flow: &Flow,
    entered_with: &[FieldId],
    graph: &FlowGraph,
    reached: &[bool],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let summary = summarize(flow, graph, entered_with);
    let field_name = |field: FieldId| program.field(field).map_or("?", |field| field.name.as_str());
    for (field, span) in &summary.entry_reads {
        let name = field_name(*field);
        diagnostics.push(
            Diagnostic::new(MAYBE_UNSET, format!("`{name}` may be unset when the flow `{}` starts", flow.name))
                .at(*span, format!("`{name}` is read here, before any step runs"))
                .with_help(format!(
                    "`on_enter` runs as the flow is entered; read `{name}` in a step that collects it or lists it in `requires`, or test it with `{name} is set`"
                )),
        );
    }
    let mut sites = Vec::new();
    for (step, step_summary) in summary.steps.iter().enumerate() {
        sites.push(ReadSite { node: step, step, reads: &step_summary.reads });
        let condition_node = match graph.listed(step) {
            To::Node(node) => node,
            _ => step,
        };
        sites.push(ReadSite { node: condition_node, step, reads: &step_summary.condition_reads });
    }
    sites.retain(|site| reached.get(site.node).copied().unwrap_or(false) && !site.reads.is_empty());
    let mut tracked: Vec<FieldId> = sites
        .iter()
        .flat_map(|site| site.reads.iter().map(|(field, _)| *field))
        .chain(summary.complete_reads.iter().map(|(field, _)| *field))
        .collect();
    tracked.sort_unstable();
    tracked.dedup();
    if tracked.is_empty() {
        return;
    }
    let dataflow = Dataflow::new(graph, &summary, tracked);
    let mut budget = PathBudget::new(dataflow.nodes());
    let complete = dataflow.complete();
    dataflow.for_each_chunk(|chunk| {
        let mut paths: HashMap<FieldId, Option<Vec<u32>>> = HashMap::new();
        let mut explain = |field: FieldId, node: usize| -> Option<String> {
            let parents = paths.entry(field).or_insert_with(|| chunk.unset_paths(field, &mut budget));
            let path = parents.as_ref().and_then(|parents| path_to(parents, node))?;
            Some(describe_path(flow, graph, &path))
        };
        for site in &sites {
            for (field, span) in site.reads {
                if chunk.set_on_arrival(site.node, *field) != Some(false) {
                    continue;
                }
                let step_name = flow.steps.get(site.step).map_or("?", |step| step.name.as_str());
                let path = explain(*field, site.node);
                diagnostics.push(unset_in_step(field_name(*field), step_name, *span, path.as_deref()));
            }
        }
        for (field, span) in &summary.complete_reads {
            if chunk.set_on_arrival(complete, *field) != Some(false) {
                continue;
            }
            let path = explain(*field, complete);
            diagnostics.push(unset_on_complete(flow, field_name(*field), *span, path.as_deref()));
        }
    });
}

const MAYBE_UNSET: Code = Code::MaybeUnset;

fn unset_in_step(name: &str, step_name: &str, span: Span, path: Option<&str>) -> Diagnostic {
    let message = match path {
        Some(path) if !path.contains('→') => {
            format!("`{name}` may be unset when the step `{step_name}` reads it: the flow starts at `{step_name}`")
        }
        Some(path) => {
            format!("`{name}` may be unset when the step `{step_name}` reads it: nothing sets it on the path {path}")
        }
        None => format!("`{name}` may be unset when the step `{step_name}` reads it"),
    };
    Diagnostic::new(MAYBE_UNSET, message).at(span, format!("`{name}` is read here")).with_help(format!(
        "collect `{name}` in an earlier step, list it in this step's `requires`, or test it with `{name} is set`"
    ))
}

fn unset_on_complete(flow: &Flow, name: &str, span: Span, path: Option<&str>) -> Diagnostic {
    let message = match path {
        Some(path) => {
            format!("`{name}` may be unset when the flow `{}` completes: nothing sets it on the path {path}", flow.name)
        }
        None => format!("`{name}` may be unset when the flow `{}` completes", flow.name),
    };
    Diagnostic::new(MAYBE_UNSET, message)
        .at(span, format!("`{name}` is read here, in `on_complete`"))
        .with_help(format!("collect or set `{name}` on every path to completion, or test it with `{name} is set`"))
}

/// `` `a` → `b` → `c` ``, long paths shortened in the middle. A listed
/// arrival that leads into its step is the step; one that passes over it
/// reads "past `s`"; one past the last node is "completion".
fn describe_path(flow: &Flow, graph: &FlowGraph, path: &[u32]) -> String {
    const KEEP: usize = 4;
    let mut names = Vec::with_capacity(path.len());
    for (position, node) in path.iter().enumerate() {
        let node = *node as usize;
        if node >= graph.nodes() {
            names.push("completion".to_string());
            continue;
        }
        let (step, listed) = graph.step_of(node);
        let name = flow.steps.get(step).map_or("?", |step| step.name.as_str());
        if !listed {
            names.push(format!("`{name}`"));
        } else if path.get(position + 1).map(|next| *next as usize) != Some(step) {
            names.push(format!("past `{name}`"));
        }
    }
    if names.len() <= 2 * KEEP {
        return names.join(" → ");
    }
    let head = names.get(..KEEP).unwrap_or_default().join(" → ");
    let tail = names.get(names.len() - KEEP..).unwrap_or_default().join(" → ");
    format!("{head} → … → {tail}")
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
    /// Reads in `skip_if` and `if`, tested when the step is reached in list
    /// order.
    pub condition_reads: Vec<(FieldId, Span)>,
    /// What its conditions prove set when they let the step run.
    pub arrive_gens: Vec<FieldId>,
    /// Set once the step has run: its `requires`, `collect` and the writes
    /// of its hooks and actions.
    pub gens: Vec<FieldId>,
    /// Set while the step still waits for its fields: its `requires` and
    /// the writes of `on_enter`, `prepare` and `finalize`.
    pub early_gens: Vec<FieldId>,
    /// Fields the step may write null to (`set x = null`) and does not set
    /// again after: unset once it has run, whatever they were before.
    pub kills: Vec<FieldId>,
    /// Per branch entry, what its edge adds: the facts of its `if`, the
    /// writes of its directive.
    pub branch_gens: Vec<Vec<FieldId>>,
    /// Per branch entry, the fields its directive writes null to.
    pub branch_kills: Vec<Vec<FieldId>>,
    /// Per branch entry, whether it may be taken before the step's fields
    /// are in (it has a `when`, and the step collects or requires).
    pub interrupting: Vec<bool>,
    /// Reads in the step's body and branches that nothing earlier in the
    /// step covers, the first per field.
    pub reads: Vec<(FieldId, Span)>,
}

/// What a flow does to definite assignment.
#[derive(Debug, Default)]
pub(crate) struct FlowSummary {
    /// Set when the first step is reached: the data every entry writes,
    /// the flow's `on_enter` writes, and a workflow's inputs.
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

/// Summarises a flow. Branch entries the graph knows dead are left out:
/// their reads are never made.
pub(crate) fn summarize(flow: &Flow, graph: &FlowGraph, entered_with: &[FieldId]) -> FlowSummary {
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
        steps: flow
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| {
                summarize_step(step, graph.dead_branches.get(index).map(Vec::as_slice).unwrap_or_default())
            })
            .collect(),
    }
}

fn summarize_step(step: &crate::ir::Step, dead_entries: &[bool]) -> StepSummary {
    let mut conditions = Walker::default();
    if let Some(skip_if) = &step.skip_if {
        conditions.expr(skip_if);
    }
    for guard in &step.guard {
        conditions.expr(guard);
    }
    let mut arrive_gens = Vec::new();
    for guard in &step.guard {
        facts(guard, true, &mut arrive_gens);
    }
    if let Some(skip_if) = &step.skip_if {
        facts(skip_if, false, &mut arrive_gens);
    }
    arrive_gens.sort_unstable();
    arrive_gens.dedup();

    let mut walker = Walker::default();
    for field in &step.requires {
        walker.set(*field);
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
    let waits = !step.auto && (!step.collect.is_empty() || !step.requires.is_empty());
    // The state a `when` entry may interrupt the step in.
    let mut early = walker.clone();
    let early_gens = early.known_fields();
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
    let mut interrupting = Vec::with_capacity(step.branches.len());
    for (index, branch) in step.branches.iter().enumerate() {
        let interrupts = waits && !branch.when.is_empty();
        if dead_entries.get(index).copied().unwrap_or(false) {
            branch_gens.push(Vec::new());
            branch_kills.push(Vec::new());
            interrupting.push(interrupts);
            continue;
        }
        // An entry's `if` is a filter: on an interrupt, a field the step
        // has not collected yet is null and the `if` is simply false, so it
        // is read as after the step ran. What the entry then does (its
        // directive, its edge) sees the interrupted state.
        for guard in &branch.guard {
            walker.expr(guard);
        }
        let reader = if interrupts { &mut early } else { &mut walker };
        let mut edge = Vec::new();
        let mut edge_kills = Vec::new();
        for guard in &branch.guard {
            facts(guard, true, &mut edge);
        }
        if let crate::ir::Then::Directive(directive) = &branch.then {
            let mark = reader.mark();
            for field in &edge {
                reader.set(*field);
            }
            reader.directive(directive);
            reader.restore(mark);
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
        interrupting.push(interrupts);
    }
    let mut reads = walker.reads;
    let mut seen: HashSet<FieldId> = reads.iter().map(|(field, _)| *field).collect();
    reads.extend(early.reads.into_iter().filter(|(field, _)| seen.insert(*field)));
    StepSummary {
        condition_reads: conditions.reads,
        arrive_gens,
        gens,
        early_gens,
        kills,
        branch_gens,
        branch_kills,
        interrupting,
        reads,
    }
}

/// Walks a step's expressions in evaluation order, tracking which fields
/// the step itself has set so far. `known` is a multiset with an undo log,
/// so scopes (a `for_each` body, a narrowing `and`) are cheap to leave.
#[derive(Clone, Default)]
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

    fn nodes(&self) -> usize {
        self.rank.len()
    }

    fn complete(&self) -> usize {
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
    fn unset_paths(&self, field: FieldId, budget: &mut PathBudget) -> Option<Vec<u32>> {
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
    fn a_when_entry_may_leave_before_the_step_collects() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a
                          branch { when "the user wants help" -> s3
                                   else -> s2 } }
                step s2 { say "{{a}}"  next end }
                step s3 { say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_step_entered_by_name_proves_nothing_by_its_if() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect ok  next s2 }
                step s2 { if n is set  say "{{n}}" } }"#,
            ),
            &[("maybe_unset", "n")],
        );
    }

    #[test]
    fn a_loop_keeps_what_every_way_round_sets() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a }
                step s2 { collect ok  say "{{a}}"
                          branch { if ok == true -> { set a = null  goto_step s1 }
                                   else -> s3 } }
                step s3 { say "{{a}} {{ok}}" } }"#,
            ),
            &[],
        );
    }
}
