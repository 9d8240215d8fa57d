//! The picture of a program: a graph model built from the IR, which the
//! Mermaid ([`mermaid`]) and Graphviz ([`dot`]) emitters only print.
//!
//! Every edge is one the runtime can take (LANGUAGE.md sections 3, 4, 9 and
//! 11), and every edge it can take is drawn: routing into a flow, the linear
//! successor with `skip_if`/`when`/`if` bypasses, `next`, each branch entry,
//! the fall-through when no entry matched, directives (`goto`, `goto_step`,
//! `complete`, `abort`, `reset`) from branches, `on_no_answer`, a
//! conversation step's `on_error` and `emit` actions, a flow's
//! `complete.next`, and signals that move the conversation. Deciding the edges here, once, keeps the two formats from
//! disagreeing. Unreachable steps and branch entries come from
//! [`check::reachability`](crate::check::reachability), the analysis the
//! checker reports from, so the picture shows exactly the defects the
//! diagnostics name.
//!
//! Node ids are generated (`f0_s3`), never taken from the program, so no
//! user text has to be a valid identifier in either format; user text only
//! appears in labels, which the emitters escape.
//!
//! Not drawn: directives inside tool results (their target is data the
//! tool returns at run time), a workflow step's `on_error` and a
//! conversation step's `on_error: stop` (a failed run or turn ends there; it
//! is not a position in the flow), and the default `on_error` of a step
//! whose actions call no tool (only an invalid write could fail it, and an
//! abort edge on every step that sets a field would hide the ones that
//! matter).
//!
//! No I/O: the emitters return text, which the CLI writes.

#![warn(missing_docs)]

mod label;

pub mod coverage;
pub mod dot;
mod draw;
pub mod mermaid;

pub use draw::{Format, draw, draw_covered};

use crate::check::reachability::Reachability;
use crate::check::walk::calls_a_tool;
use crate::ir::successor::{self, Jump, Landing};
use crate::ir::{Action, ActionKind, Directive, Flow, FlowId, Program, Recovery, Step, StepId, Then};
use label::{all_of, duration_text, effects_text, expr_text, move_text, quoted};
use std::collections::BTreeMap;

/// A generated node id: ASCII letters, digits and `_` only, so it is a
/// valid identifier in Mermaid and DOT whatever the program calls things.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(String);

impl NodeId {
    /// The id as text, as the emitters write it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn entry(flow: FlowId) -> NodeId {
        NodeId(format!("f{}_in", flow.0))
    }

    pub(crate) fn step(flow: FlowId, step: StepId) -> NodeId {
        NodeId(format!("f{}_s{}", flow.0, step.0))
    }

    fn complete(flow: FlowId) -> NodeId {
        NodeId(format!("f{}_done", flow.0))
    }

    fn abort(flow: FlowId) -> NodeId {
        NodeId(format!("f{}_abort", flow.0))
    }

    fn stub(flow: FlowId) -> NodeId {
        NodeId(format!("x{}", flow.0))
    }

    pub(crate) fn signal(index: usize) -> NodeId {
        NodeId(format!("sig{index}"))
    }

    fn message() -> NodeId {
        NodeId("msg_in".to_string())
    }

    fn run() -> NodeId {
        NodeId("run_in".to_string())
    }
}

/// What a node stands for; the emitters pick its shape from this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeKind {
    /// A user message arriving: where routing starts.
    Message,
    /// `flowc run`: where a workflow starts.
    Run,
    /// A flow's entry marker: routing, `goto` and `complete.next` arrive
    /// here (the flow's `on_enter` runs), then the first step that is not passed
    /// over.
    Entry,
    /// A step that asks: it collects fields, or prompts the model.
    Ask,
    /// A step that answers with a verbatim `say`.
    Say,
    /// An `auto` step: no model call.
    Auto,
    /// An `auto` step with a `wait`.
    Wait,
    /// An `auto` step that asks the model for values (`ask_model`).
    Model,
    /// The flow completed.
    Complete,
    /// The flow was aborted.
    Abort,
    /// A signal that moves the conversation.
    Signal,
    /// Another flow, when only one flow is drawn.
    FlowStub,
}

impl NodeKind {
    /// The class name both emitters give nodes of this kind.
    pub fn class(self) -> &'static str {
        match self {
            NodeKind::Message => "message",
            NodeKind::Run => "run",
            NodeKind::Entry => "entry",
            NodeKind::Ask => "ask",
            NodeKind::Say => "say",
            NodeKind::Auto => "auto",
            NodeKind::Wait => "wait",
            NodeKind::Model => "model",
            NodeKind::Complete => "complete",
            NodeKind::Abort => "abort",
            NodeKind::Signal => "signal",
            NodeKind::FlowStub => "stub",
        }
    }

    /// Order inside a flow's box: entry, steps, then terminals.
    fn rank(self) -> u8 {
        match self {
            NodeKind::Entry => 0,
            NodeKind::Complete => 2,
            NodeKind::Abort => 3,
            _ => 1,
        }
    }
}

/// Why an edge exists; the emitters style edges by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// Routing enters a flow (its `when`/`if`/`default`).
    Activation,
    /// `flowc run` starts a workflow.
    Run,
    /// The next step in list order, or the flow's end after the last one.
    Linear,
    /// Past a step whose `skip_if` holds or whose `when`/`if` does not.
    Skip,
    /// `next`.
    Next,
    /// A branch entry.
    Branch,
    /// No branch entry matched: `next` or the linear successor.
    NoMatch,
    /// `on_no_answer`, or the abort after the last unanswered ask.
    NoAnswer,
    /// A conversation step's `on_error`, or the abort its default makes
    /// when the step's actions fail.
    OnError,
    /// An `emit` action in a hook or `do`.
    Emit,
    /// A flow's `complete.next`.
    CompleteNext,
    /// A signal's directive.
    Signal,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One box, diamond or marker of the picture.
pub struct Node {
    /// Its generated id.
    pub id: NodeId,
    /// What it stands for.
    pub kind: NodeKind,
    /// The flow whose box holds the node; `None` outside every flow.
    pub flow: Option<FlowId>,
    /// Label lines, plain text (the emitters escape them).
    pub lines: Vec<String>,
    /// Never reached, per the reachability analysis.
    pub unreachable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One arrow of the picture.
pub struct Edge {
    /// The node it leaves.
    pub from: NodeId,
    /// The node it enters.
    pub to: NodeId,
    /// Why the run would take it.
    pub kind: EdgeKind,
    /// Plain text, `None` for an unlabelled edge.
    pub label: Option<String>,
    /// Never taken: an unreachable branch entry, or an edge leaving an
    /// unreachable step.
    pub unreachable: bool,
    /// The edge leaves one flow for another (or a stub of one).
    pub cross_flow: bool,
}

/// One box per flow drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// The flow the box draws.
    pub flow: FlowId,
    /// `f0`: the generated id of the box.
    pub id: String,
    /// The box's title: the flow's name (and title, if it has one).
    pub title: String,
}

/// The whole picture, in a deterministic order: clusters in declaration
/// order, nodes by cluster then kind then creation, edges in the order the
/// runtime's resolution considers them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Graph {
    /// One box per flow drawn, in declaration order.
    pub clusters: Vec<Cluster>,
    /// Every node, by cluster then kind then creation.
    pub nodes: Vec<Node>,
    /// Every edge, in the order the runtime's resolution considers them.
    pub edges: Vec<Edge>,
}

impl Graph {
    /// The nodes inside a flow's box, in drawing order.
    pub fn nodes_in(&self, flow: FlowId) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |node| node.flow == Some(flow))
    }

    /// The nodes outside every box.
    pub fn free_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|node| node.flow.is_none())
    }
}

/// Builds the picture of a program, or of one flow (`only`): then edges to
/// and from other flows end at a stub node standing for the other flow.
pub fn build(program: &Program, reachability: &Reachability, only: Option<FlowId>) -> Graph {
    let mut builder = Builder { program, reachability, nodes: Vec::new(), index: BTreeMap::new(), edges: Vec::new() };
    builder.program_edges();
    let graph = builder.finish();
    match only {
        Some(flow) => restrict(graph, program, flow),
        None => graph,
    }
}

struct Builder<'a> {
    program: &'a Program,
    reachability: &'a Reachability,
    nodes: Vec<Node>,
    /// Node id to its position in `nodes`, to create terminals once.
    index: BTreeMap<NodeId, usize>,
    edges: Vec<Edge>,
}

/// An edge still to be placed: where it goes and what it says.
struct Target {
    to: NodeId,
    label: Vec<String>,
    kind: EdgeKind,
}

/// The hooks whose `emit` actions may move the conversation, with the name
/// shown on their edges.
fn step_hooks(step: &Step) -> [(&'static str, &[Action]); 4] {
    [
        ("on_enter", step.on_enter.as_slice()),
        ("prepare", step.prepare.as_slice()),
        ("do", step.actions.as_slice()),
        ("finalize", step.finalize.as_slice()),
    ]
}

impl<'a> Builder<'a> {
    fn program_edges(&mut self) {
        for (flow_index, flow) in self.program.flows.iter().enumerate() {
            self.flow_edges(FlowId::from_index(flow_index), flow);
        }
        for (signal_index, signal) in self.program.signals.iter().enumerate() {
            self.signal_edges(signal_index, signal);
        }
        // After signals: a signal's `complete` is one more way to reach a
        // flow's completion, which these edges leave from.
        for (flow_index, flow) in self.program.flows.iter().enumerate() {
            self.completion_edges(FlowId::from_index(flow_index), flow);
        }
    }

    fn flow_edges(&mut self, flow_id: FlowId, flow: &Flow) {
        let entry = self.entry(flow_id);
        if let Some(label) = activation_text(self.program, flow) {
            let message = self.free_node(NodeId::message(), NodeKind::Message, vec!["user message".to_string()]);
            self.edge(message, entry.clone(), EdgeKind::Activation, vec![label], false);
        }
        if flow.workflow {
            let run = self.free_node(NodeId::run(), NodeKind::Run, vec!["flowc run".to_string()]);
            let inputs = self.field_names(&flow.requires);
            let label = if inputs.is_empty() { "run".to_string() } else { format!("run with {inputs}") };
            self.edge(run, entry.clone(), EdgeKind::Run, vec![label], false);
        }
        // Entering a flow looks for its first step as the resolution looks
        // for the next one, passing over a step whose `skip_if` holds or
        // whose `when`/`if` does not; a flow without steps completes at once.
        for target in self.landing_targets(flow_id, flow, successor::ENTRY, EdgeKind::Linear) {
            self.place(&entry, target, Vec::new(), false);
        }
        self.emit_edges(flow_id, &entry, "on_enter", &flow.on_enter, false);
        for (step_index, step) in flow.steps.iter().enumerate() {
            self.step_edges(flow_id, flow, StepId::from_index(step_index), step);
        }
    }

    fn step_edges(&mut self, flow_id: FlowId, flow: &Flow, step_id: StepId, step: &Step) {
        let unreachable = self.reachability.unreachable_steps.contains(&(flow_id, step_id));
        let node = self.step_node(flow_id, step_id, step, unreachable);

        // An auto step whose `do` emits a position always leaves by it: its
        // branches are never tried and it never falls through.
        let moves = successor::always_moves(step);
        for (branch_index, branch) in step.branches.iter().enumerate().filter(|_| !moves) {
            let branch_unreachable =
                unreachable || self.reachability.unreachable_branches.contains(&(flow_id, step_id, branch_index));
            let condition = branch.label.clone().unwrap_or_else(|| self.branch_condition(branch));
            // A directive's edges carry what it writes; the landing of
            // either kind is the successor rule's.
            let targets = match &branch.then {
                Then::Directive(directive) => {
                    self.directive_targets(flow_id, flow, step_id, directive, EdgeKind::Branch)
                }
                then => {
                    let landing = successor::branch_landing(flow_id, step_id, then);
                    self.landing_targets(flow_id, flow, landing, EdgeKind::Branch)
                }
            };
            for target in targets {
                self.place(&node, target, vec![condition.clone()], branch_unreachable);
            }
        }

        // Any unconditional entry stops the search (entries after it are
        // dead, which the checker reports), so only without one can the
        // resolution go on to `next` or the linear successor.
        let falls_through =
            !moves && !step.branches.iter().any(|branch| branch.guard.is_empty() && branch.when.is_empty());
        if falls_through {
            let prefix = if step.branches.is_empty() { Vec::new() } else { vec!["no branch matched".to_string()] };
            for mut target in self.leave(flow_id, flow, step_id, step) {
                if !step.branches.is_empty() {
                    target.kind = EdgeKind::NoMatch;
                }
                self.place(&node, target, prefix.clone(), unreachable);
            }
        }

        if needs_input(step) {
            let asks = format!("no answer ×{}", step.max_asks);
            let targets = match &step.on_no_answer {
                // Without a position the directive applies its writes and
                // the step is asked afresh, its count of asks reset.
                Some(directive) if directive.position.is_none() => {
                    let mut label: Vec<String> =
                        Some(effects_text(directive)).filter(|text| !text.is_empty()).into_iter().collect();
                    label.push("ask again".to_string());
                    vec![Target { to: node.clone(), label, kind: EdgeKind::NoAnswer }]
                }
                Some(directive) => self.directive_targets(flow_id, flow, step_id, directive, EdgeKind::NoAnswer),
                // LANGUAGE.md section 4: with no `on_no_answer`, the flow aborts.
                None => {
                    vec![Target { to: self.abort(flow_id), label: vec!["abort".to_string()], kind: EdgeKind::NoAnswer }]
                }
            };
            for target in targets {
                self.place(&node, target, vec![asks.clone()], unreachable);
            }
        }

        if !flow.workflow {
            // The flow's `on_enter` fails as part of entering its first step.
            let flow_hook = if step_id == StepId(0) { flow.on_enter.as_slice() } else { &[] };
            for target in self.error_targets(flow_id, step, flow_hook, &node) {
                self.place(&node, target, vec!["on_error".to_string()], unreachable);
            }
        }

        for (hook, actions) in step_hooks(step) {
            self.emit_edges(flow_id, &node, hook, actions, unreachable);
        }
    }

    /// Where a conversation step's failure takes the conversation
    /// (docs/language.md, "When a step's actions fail"): its `on_error`
    /// directive; one without a position stays at the step, which the next
    /// message runs again; with none, the default aborts the flow, drawn
    /// only for a step that calls a tool before the reply (or, for the
    /// first step, whose flow's `on_enter` does).
    fn error_targets(&mut self, flow_id: FlowId, step: &Step, flow_hook: &[Action], node: &NodeId) -> Vec<Target> {
        match &step.recovery {
            Some(Recovery::Stop) => Vec::new(),
            Some(Recovery::Directive(directive)) => match &directive.position {
                Some(_) => self.position_target(flow_id, directive, EdgeKind::OnError).into_iter().collect(),
                None => {
                    let mut label: Vec<String> =
                        Some(effects_text(directive)).filter(|text| !text.is_empty()).into_iter().collect();
                    label.push("stay".to_string());
                    vec![Target { to: node.clone(), label, kind: EdgeKind::OnError }]
                }
            },
            None if calls_before_reply(step) || calls_a_tool(flow_hook) => {
                vec![Target { to: self.abort(flow_id), label: vec!["abort".to_string()], kind: EdgeKind::OnError }]
            }
            None => Vec::new(),
        }
    }

    /// How a step is left when it does not branch: its `next`, else the
    /// linear successor.
    fn leave(&mut self, flow_id: FlowId, flow: &Flow, step_id: StepId, step: &Step) -> Vec<Target> {
        let mut targets = self.landing_targets(flow_id, flow, successor::fallthrough(step_id, step), EdgeKind::Linear);
        let named = match successor::fallthrough(step_id, step) {
            Landing::Step(_) => "next",
            Landing::Complete(_) => "next end",
            _ => return targets,
        };
        for target in &mut targets {
            target.label.insert(0, named.to_string());
            target.kind = EdgeKind::Next;
        }
        targets
    }

    /// Where a landing of the successor rule is drawn. In list order, the
    /// search for a step can stop at each step that can be passed over
    /// (its `skip_if`, `when` or `if` decides at run time, drawn on the
    /// edge) and at the first that cannot, else at the flow's completion;
    /// the edges past a step are labelled with the steps they skip.
    fn landing_targets(&mut self, flow_id: FlowId, flow: &Flow, landing: Landing, kind: EdgeKind) -> Vec<Target> {
        let Landing::Listed(first) = landing else {
            return self
                .place_of(flow_id, landing)
                .map(|to| Target { to, label: Vec::new(), kind })
                .into_iter()
                .collect();
        };
        let mut conditional = Vec::new();
        let last = successor::first_listed(flow, first, |step_id, _| {
            conditional.push(step_id);
            true
        });
        let mut targets = Vec::new();
        let mut skipped: Vec<&str> = Vec::new();
        let skip_label = |skipped: &[&str]| {
            if skipped.is_empty() { Vec::new() } else { vec![format!("skip {}", skipped.join(", "))] }
        };
        let kind_after = |skipped: &[&str]| if skipped.is_empty() { kind } else { EdgeKind::Skip };
        for step_id in conditional {
            let Some(step) = flow.step(step_id) else {
                continue;
            };
            let mut label = skip_label(&skipped);
            label.extend(self.entry_condition(step));
            targets.push(Target { to: NodeId::step(flow_id, step_id), label, kind: kind_after(&skipped) });
            skipped.push(display_name(&step.name));
        }
        let to = match last {
            Some(step_id) => NodeId::step(flow_id, step_id),
            None => self.complete(flow_id),
        };
        targets.push(Target { to, label: skip_label(&skipped), kind: kind_after(&skipped) });
        targets
    }

    /// The node a landing that is not in list order arrives at. `None`
    /// only for a flow or step the IR does not hold, which lowering never
    /// produces.
    fn place_of(&mut self, flow_id: FlowId, landing: Landing) -> Option<NodeId> {
        Some(match landing {
            // `reset` and `goto_step` enter the step as it is: no `on_enter`
            // of the flow, no passing over; a step past the end completes.
            Landing::Step(step) if self.program.flow(flow_id).is_some_and(|flow| flow.step(step).is_some()) => {
                NodeId::step(flow_id, step)
            }
            Landing::Step(_) | Landing::Complete(None) => self.complete(flow_id),
            Landing::Complete(Some(next)) => self.known_flow(next).map(NodeId::entry)?,
            // Entering a flow runs its `on_enter`, then arrives at the step:
            // at the first, in list order (the flow's start node).
            Landing::Enter(flow, step) => match successor::arrival(step) {
                Landing::Step(step) => {
                    let exists = self.program.flow(flow).and_then(|target| target.step(step)).is_some();
                    exists.then(|| NodeId::step(flow, step))?
                }
                _ => self.known_flow(flow).map(NodeId::entry)?,
            },
            Landing::Abort => self.abort(flow_id),
            Landing::Listed(_) => return None,
        })
    }

    /// Where a directive takes the conversation. One without a position
    /// field applies its writes and the resolution goes on with the linear
    /// successor (LANGUAGE.md section 11, "Branch `then`").
    fn directive_targets(
        &mut self,
        flow_id: FlowId,
        flow: &Flow,
        step_id: StepId,
        directive: &Directive,
        kind: EdgeKind,
    ) -> Vec<Target> {
        match &directive.position {
            Some(_) => self.position_target(flow_id, directive, kind).into_iter().collect(),
            None => {
                let effects = effects_text(directive);
                let landing = successor::after_directive(flow_id, step_id, None);
                let mut targets = self.landing_targets(flow_id, flow, landing, kind);
                for target in &mut targets {
                    if !effects.is_empty() {
                        target.label.insert(0, effects.clone());
                    }
                    target.kind = kind;
                }
                targets
            }
        }
    }

    /// The node a position field moves to from inside `flow_id`. `None`
    /// only for an id the IR does not hold, which lowering never produces.
    fn position_target(&mut self, flow_id: FlowId, directive: &Directive, kind: EdgeKind) -> Option<Target> {
        let position = directive.position.as_ref()?;
        let to = self.place_of(flow_id, successor::landing(flow_id, Jump::from(position)))?;
        Some(Target { to, label: vec![move_text(self.program, Some(flow_id), directive)?], kind })
    }

    fn known_flow(&self, flow: FlowId) -> Option<FlowId> {
        self.program.flow(flow).map(|_| flow)
    }

    /// `emit` actions that move the conversation, `for_each` bodies
    /// included (an emission there may happen once per item).
    fn emit_edges(&mut self, flow_id: FlowId, from: &NodeId, hook: &str, actions: &[Action], unreachable: bool) {
        for action in actions {
            match &action.kind {
                ActionKind::Emit(directive) => {
                    if let Some(target) = self.position_target(flow_id, directive, EdgeKind::Emit) {
                        self.place(from, target, vec![format!("{hook} emit")], unreachable);
                    }
                }
                ActionKind::ForEach(for_each) => {
                    self.emit_edges(flow_id, from, hook, &for_each.actions, unreachable);
                }
                ActionKind::Set(_)
                | ActionKind::Append(_)
                | ActionKind::Call(_)
                | ActionKind::Say { .. }
                | ActionKind::AskModel(_) => {}
            }
        }
    }

    /// A signal fires in any conversation flow, and between flows, so
    /// where its position lands is asked of the successor rule from each
    /// of those places, as the runtime does: a `goto_step` into a flow's
    /// first step lands on the step itself from inside that flow, and
    /// from anywhere else enters the flow (its `on_enter`, then the
    /// arrival in list order, passing over what may be passed over).
    /// `complete`, `abort` and `reset` are drawn into every conversation
    /// flow. Each place is drawn once.
    fn signal_edges(&mut self, signal_index: usize, signal: &crate::ir::Signal) {
        let Some((then, position)) = signal.then.as_ref().and_then(|then| Some((then, then.position.as_ref()?))) else {
            return;
        };
        let jump = Jump::from(position);
        let conversation_flows: Vec<FlowId> = self
            .program
            .flows
            .iter()
            .enumerate()
            .filter(|(_, flow)| !flow.workflow)
            .map(|(index, _)| FlowId::from_index(index))
            .collect();
        // A move that lands the same from outside every flow names its
        // target in full; one relative to the current flow is labelled
        // from inside it.
        let absolute = matches!(successor::landing_outside(jump), Some(Landing::Enter(..)));
        let mut targets: Vec<Target> = Vec::new();
        let mut add = |builder: &mut Self, current: FlowId, landing: Landing| {
            let Some(to) = builder.place_of(current, landing) else {
                return;
            };
            if targets.iter().any(|target| target.to == to) {
                return;
            }
            let label = move_text(builder.program, (!absolute).then_some(current), then).unwrap_or_default();
            targets.push(Target { to, label: vec![label], kind: EdgeKind::Signal });
        };
        for current in conversation_flows {
            add(self, current, successor::landing(current, jump));
        }
        if let Some(landing @ Landing::Enter(flow, _)) = successor::landing_outside(jump) {
            add(self, flow, landing);
        }
        if targets.is_empty() {
            return;
        }
        let node = self.free_node(NodeId::signal(signal_index), NodeKind::Signal, signal_lines(self.program, signal));
        for target in targets {
            self.place(&node, target, Vec::new(), false);
        }
    }

    /// What happens after a flow completes: its `on_complete` emissions and
    /// its `complete.next`. Drawn only when something completes the flow.
    fn completion_edges(&mut self, flow_id: FlowId, flow: &Flow) {
        let complete = NodeId::complete(flow_id);
        if !self.index.contains_key(&complete) {
            return;
        }
        self.emit_edges(flow_id, &complete, "on_complete", &flow.on_complete, false);
        if let Some(next) = successor::after_completion(flow, None).and_then(|next| self.known_flow(next)) {
            let target = Target {
                to: NodeId::entry(next),
                label: vec!["complete.next".to_string()],
                kind: EdgeKind::CompleteNext,
            };
            self.place(&complete, target, Vec::new(), false);
        }
    }

    // ----------------------------------------------------------- conditions

    /// A branch entry's condition: its `if`s, then its quoted `when`s (all
    /// must hold); "else" for the unconditional entry.
    fn branch_condition(&self, branch: &crate::ir::Branch) -> String {
        let mut parts = Vec::new();
        if !branch.guard.is_empty() {
            parts.push(all_of(self.program, &branch.guard));
        }
        parts.extend(branch.when.iter().map(|when| quoted(when)));
        if parts.is_empty() { "else".to_string() } else { parts.join(" and ") }
    }

    /// What must hold for the linear resolution to stop at a step: its
    /// `if`s and `when`s hold and its `skip_if` does not. `None` for an
    /// unconditional step.
    fn entry_condition(&self, step: &Step) -> Option<String> {
        let mut parts = Vec::new();
        if !step.guard.is_empty() {
            parts.push(format!("if {}", all_of(self.program, &step.guard)));
        }
        parts.extend(step.when.iter().map(|when| format!("when {}", quoted(when))));
        if let Some(skip_if) = &step.skip_if {
            parts.push(format!("unless {}", expr_text(self.program, skip_if)));
        }
        (!parts.is_empty()).then(|| parts.join(" and "))
    }

    fn field_names(&self, fields: &[crate::ir::FieldId]) -> String {
        fields
            .iter()
            .map(|field| self.program.field(*field).map_or("?", |field| field.name.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    // ---------------------------------------------------------------- nodes

    fn entry(&mut self, flow_id: FlowId) -> NodeId {
        let id = NodeId::entry(flow_id);
        self.node(id, NodeKind::Entry, Some(flow_id), vec!["start".to_string()], false)
    }

    fn complete(&mut self, flow_id: FlowId) -> NodeId {
        let id = NodeId::complete(flow_id);
        self.node(id, NodeKind::Complete, Some(flow_id), vec!["flow complete".to_string()], false)
    }

    fn abort(&mut self, flow_id: FlowId) -> NodeId {
        let id = NodeId::abort(flow_id);
        self.node(id, NodeKind::Abort, Some(flow_id), vec!["abort".to_string()], false)
    }

    fn free_node(&mut self, id: NodeId, kind: NodeKind, lines: Vec<String>) -> NodeId {
        self.node(id, kind, None, lines, false)
    }

    fn step_node(&mut self, flow_id: FlowId, step_id: StepId, step: &Step, unreachable: bool) -> NodeId {
        let kind = step_kind(step);
        let mut lines = vec![display_name(&step.name).to_string()];
        let detail = match kind {
            NodeKind::Wait => format!("wait {}", step.wait_ms.map(duration_text).unwrap_or_default()),
            NodeKind::Auto => "auto".to_string(),
            NodeKind::Model => format!("asks the model: {}", self.field_names(&model_fields(&step.actions))),
            NodeKind::Say => "say".to_string(),
            _ if !step.collect.is_empty() => {
                format!("collects {}", self.field_names(&step.collect))
            }
            _ => "prompt".to_string(),
        };
        lines.push(detail);
        self.node(NodeId::step(flow_id, step_id), kind, Some(flow_id), lines, unreachable)
    }

    /// Adds a node once; later calls with the same id return it unchanged.
    fn node(
        &mut self,
        id: NodeId,
        kind: NodeKind,
        flow: Option<FlowId>,
        lines: Vec<String>,
        unreachable: bool,
    ) -> NodeId {
        if !self.index.contains_key(&id) {
            self.index.insert(id.clone(), self.nodes.len());
            self.nodes.push(Node { id: id.clone(), kind, flow, lines, unreachable });
        }
        id
    }

    // ---------------------------------------------------------------- edges

    fn place(&mut self, from: &NodeId, target: Target, mut prefix: Vec<String>, unreachable: bool) {
        prefix.extend(target.label);
        self.edge(from.clone(), target.to, target.kind, prefix, unreachable);
    }

    fn edge(&mut self, from: NodeId, to: NodeId, kind: EdgeKind, label: Vec<String>, unreachable: bool) {
        let label = label.join(" → ");
        self.edges.push(Edge {
            from,
            to,
            kind,
            label: (!label.is_empty()).then_some(label),
            unreachable,
            cross_flow: false,
        });
    }

    fn finish(mut self) -> Graph {
        // Every node exists now (an edge may name a step before its flow was
        // walked), so the flows at both ends of each edge are known.
        let node_flow: BTreeMap<NodeId, Option<FlowId>> =
            self.nodes.iter().map(|node| (node.id.clone(), node.flow)).collect();
        for edge in &mut self.edges {
            let from = node_flow.get(&edge.from).copied().flatten();
            let to = node_flow.get(&edge.to).copied().flatten();
            edge.cross_flow = matches!((from, to), (Some(from), Some(to)) if from != to);
        }
        let order = |node: &Node| (node.flow.map_or(usize::MAX, FlowId::index), node.kind.rank());
        self.nodes.sort_by_key(order);
        let clusters = self
            .program
            .flows
            .iter()
            .enumerate()
            .map(|(index, flow)| cluster(FlowId::from_index(index), flow))
            .collect();
        Graph { clusters, nodes: self.nodes, edges: self.edges }
    }
}

fn cluster(flow_id: FlowId, flow: &Flow) -> Cluster {
    let title = match &flow.title {
        Some(title) => format!("{}: {title}", display_name(&flow.name)),
        None => display_name(&flow.name).to_string(),
    };
    Cluster { flow: flow_id, id: format!("f{}", flow_id.0), title }
}

/// A flow's activation, as the label on the way into its entry: its code
/// guard and its AI conditions (any `when` may match), or `default`.
/// `None` for a flow only a directive or `complete.next` enters.
fn activation_text(program: &Program, flow: &Flow) -> Option<String> {
    let mut parts = Vec::new();
    if !flow.guard.is_empty() {
        parts.push(format!("if {}", all_of(program, &flow.guard)));
    }
    if !flow.when.is_empty() {
        let whens: Vec<String> = flow.when.iter().map(|when| quoted(when)).collect();
        parts.push(format!("when {}", whens.join(" or ")));
    }
    let condition = (!parts.is_empty()).then(|| parts.join(" and "));
    match (condition, flow.default) {
        (Some(condition), true) => Some(format!("{condition}, or default")),
        (Some(condition), false) => Some(condition),
        (None, true) => Some("default".to_string()),
        (None, false) => None,
    }
}

fn signal_lines(program: &Program, signal: &crate::ir::Signal) -> Vec<String> {
    let mut lines = vec![format!("signal {}", display_name(&signal.name))];
    if !signal.guard.is_empty() {
        lines.push(format!("if {}", all_of(program, &signal.guard)));
    }
    if !signal.when.is_empty() {
        let whens: Vec<String> = signal.when.iter().map(|when| quoted(when)).collect();
        lines.push(format!("when {}", whens.join(" or ")));
    }
    match signal.phase {
        crate::ir::Phase::Pre => {}
        crate::ir::Phase::Post => lines.push("post: next turn".to_string()),
        crate::ir::Phase::Both => lines.push("pre and post".to_string()),
    }
    lines
}

fn step_kind(step: &Step) -> NodeKind {
    if step.auto {
        return if step.wait_ms.is_some() {
            NodeKind::Wait
        } else if model_fields(&step.actions).is_empty() {
            NodeKind::Auto
        } else {
            NodeKind::Model
        };
    }
    let says_only = step.say.is_some() && step.collect.is_empty() && step.prompt.is_none();
    if says_only { NodeKind::Say } else { NodeKind::Ask }
}

/// The fields a step's `ask_model` actions write, `for_each` bodies
/// included, each once, in order.
fn model_fields(actions: &[Action]) -> Vec<crate::ir::FieldId> {
    let mut fields = Vec::new();
    let mut lists = vec![actions];
    while let Some(actions) = lists.pop() {
        for action in actions {
            match &action.kind {
                ActionKind::AskModel(ask) if !fields.contains(&ask.field) => fields.push(ask.field),
                ActionKind::ForEach(for_each) => lists.push(&for_each.actions),
                _ => {}
            }
        }
    }
    fields
}

/// A step *needs input* while a `requires` or `collect` field is unset
/// (LANGUAGE.md section 4); only such a step asks again and can run out of
/// asks. Auto steps never wait for the user.
/// Whether a step's `do`, `on_enter` or `prepare` calls a tool, nested
/// `for_each` bodies included: the failures its `on_error` answers.
fn calls_before_reply(step: &Step) -> bool {
    [&step.actions, &step.on_enter, &step.prepare].into_iter().any(|actions| calls_a_tool(actions))
}

fn needs_input(step: &Step) -> bool {
    !step.auto && (!step.collect.is_empty() || !step.requires.is_empty())
}

/// A step without an id (already an error) still needs visible text.
fn display_name(name: &str) -> &str {
    if name.is_empty() { "(no id)" } else { name }
}

/// Keeps one flow's box; every edge with one end in it stays, its other end
/// moved to a stub node when it lies in another flow. Free nodes (routing,
/// signals) stay when an edge still touches them.
fn restrict(graph: Graph, program: &Program, flow_id: FlowId) -> Graph {
    let node_flow: BTreeMap<NodeId, Option<FlowId>> =
        graph.nodes.iter().map(|node| (node.id.clone(), node.flow)).collect();
    let flow_of = |id: &NodeId| node_flow.get(id).copied().flatten();
    let mut stubs: BTreeMap<FlowId, NodeId> = BTreeMap::new();
    let mut stub_for = |id: NodeId| match flow_of(&id) {
        Some(other) if other != flow_id => stubs.entry(other).or_insert_with(|| NodeId::stub(other)).clone(),
        _ => id,
    };
    let mut edges = Vec::new();
    for edge in graph.edges {
        let touches = flow_of(&edge.from) == Some(flow_id) || flow_of(&edge.to) == Some(flow_id);
        if !touches {
            continue;
        }
        edges.push(Edge { from: stub_for(edge.from), to: stub_for(edge.to), ..edge });
    }
    let mut kept: std::collections::BTreeSet<&NodeId> = std::collections::BTreeSet::new();
    for edge in &edges {
        kept.insert(&edge.from);
        kept.insert(&edge.to);
    }
    let mut nodes: Vec<Node> = graph
        .nodes
        .iter()
        .filter(|node| node.flow == Some(flow_id) || (node.flow.is_none() && kept.contains(&node.id)))
        .cloned()
        .collect();
    for (other, id) in &stubs {
        let name = program.flow(*other).map_or("?", |flow| display_name(&flow.name));
        nodes.push(Node {
            id: id.clone(),
            kind: NodeKind::FlowStub,
            flow: None,
            lines: vec![format!("flow {name}")],
            unreachable: false,
        });
    }
    Graph { clusters: graph.clusters.into_iter().filter(|cluster| cluster.flow == flow_id).collect(), nodes, edges }
}

#[cfg(test)]
mod tests;
