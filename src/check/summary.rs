//! What each step does to definite assignment, summarised once per step so
//! the dataflow ([`super::dataflow`]) only moves bitsets. A field counts as
//! set where, on every path, a step collected it, an action set it (`set`,
//! a `call`'s `save`, an emitted directive's `set`) or a step on the path
//! lists it in `requires`; flow-level `requires` count only for workflows,
//! whose inputs they are. A flow that only `goto`s enter starts with the
//! fields all of them write (`goto: { flow: F, data: {...} }`). A condition
//! that proves a field set counts too: `x is set and x > 1`, a step whose
//! `if` is `x is set` (when that `if` was tested), a branch entry's `if` on
//! the edge it guards. Testing a field (`x is set`, `x == null`) is not a
//! read.
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

use super::conditions::{facts, fold};
use super::flowgraph::FlowGraph;
use super::walk;
use crate::expr::{Expr, ExprKind, Template, TemplatePart};
use crate::ir::successor::{self, NewRun};
use crate::ir::{Action, ActionKind, Directive, FieldId, Flow, FlowId, Program};
use crate::source::Span;
use crate::syntax::ast::BinaryOp;
use std::collections::{HashMap, HashSet};

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
        if let Some(next) = successor::after_completion(flow, None) {
            enter(next, Vec::new());
        }
    }
    // A flow entered by a new run of it (`goto`, `complete` naming it) is
    // entered with what the jump writes once the run started: a `goto`'s
    // data. A `goto_step` into another flow arrives at a step, not at the
    // entry this summary starts from, and `reset` enters no flow.
    walk::directives(program, |site, directive| {
        let Some(position) = &directive.position else {
            return;
        };
        let jump = position.into();
        let entered = successor::flow_entered(site.flow(), jump);
        if let Some(flow) = entered.filter(|flow| successor::new_run(site.flow(), jump) == Some(NewRun::Of(*flow))) {
            let data = position.data();
            let written = data.iter().filter(|write| !is_null(&write.value)).map(|write| write.field).collect();
            enter(flow, written);
        }
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
            | ExprKind::StepOutput { .. }
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
        if let Some(position) = &directive.position {
            for write in position.data() {
                self.expr(&write.value);
            }
            if let Some(reason) = position.reason() {
                self.template(reason);
            }
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
                // Appending to an unset list makes a list of one: the field
                // is set after it whatever the item is.
                ActionKind::Append(write) => {
                    self.expr(&write.value);
                    self.set(write.field);
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
                // A model step writes its field or fails the step: the
                // field is set after it.
                ActionKind::AskModel(ask) => {
                    self.template(&ask.instruction);
                    self.set(ask.field);
                }
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
