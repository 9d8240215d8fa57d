//! Where a step goes next: the one rule that the checker proves, the graph
//! draws and both runners (conversation turns and workflow runs) follow, so
//! the picture, the proof and the run cannot disagree.
//!
//! Leaving a step tries its branch entries in order, then its `next`, then
//! the next step in the list ([`leave`]). A branch names a step or carries
//! a directive; a directive without a position goes on in list order
//! ([`branch_landing`]). A position jumps ([`landing`]). Reaching steps *in
//! list order* ([`Landing::Listed`]: a flow's entry, after a step with no
//! `next`, after a branch directive without a position) passes over each
//! step whose `skip_if` holds or whose `if`/`when` does not
//! ([`can_be_passed_over`], [`first_listed`]); a step named by `next`, a
//! branch, `reset` or a `goto_step` within the flow is entered as named.
//!
//! What decides a condition differs by user: the checker folds constants
//! and follows every edge it cannot rule out, the graph draws each, the
//! runners evaluate. So the rule takes the decisions as closures and
//! returns where they lead, and each user maps a [`Landing`] to its own
//! notion of a place (a graph node, a cursor, a workflow step).

use super::walk::{StepPart, step_directives};
use super::{ActionKind, Flow, FlowId, Next, Position, Program, Step, StepId, Then};
use std::collections::BTreeSet;

/// A position field, without what it carries (`with` data, an abort
/// reason): what decides where the conversation goes. Compiled positions
/// and the runtime's evaluated moves both reduce to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jump {
    /// `goto`: a new run of a flow (possibly the current one).
    Goto(FlowId),
    /// `goto_step`: a step, of this flow or another.
    GotoStep(FlowId, StepId),
    /// `complete`, then the flow named, else the flow's `complete.next`.
    Complete(Option<FlowId>),
    /// `reset`: a new run of the current flow, at its first step.
    Reset,
    /// `abort`: the flow ends without completing.
    Abort,
}

impl Jump {
    /// Which position wins when directives merge: `abort > complete >
    /// goto/goto_step > reset`.
    pub fn precedence(self) -> u8 {
        match self {
            Jump::Abort => 3,
            Jump::Complete(_) => 2,
            Jump::Goto(_) | Jump::GotoStep(..) => 1,
            Jump::Reset => 0,
        }
    }
}

impl From<&Position> for Jump {
    fn from(position: &Position) -> Jump {
        match position {
            Position::Goto { flow, .. } => Jump::Goto(*flow),
            Position::GotoStep { flow, step } => Jump::GotoStep(*flow, *step),
            Position::Complete { next } => Jump::Complete(*next),
            Position::Abort { .. } => Jump::Abort,
            Position::Reset => Jump::Reset,
        }
    }
}

/// Where a move lands, seen from inside the flow the conversation is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// A step of this flow, entered as named (no passing over). A step id
    /// past the end means the flow has no such step: it completes.
    Step(StepId),
    /// This flow's steps from this index on, in list order: the first one
    /// not passed over, else the flow completes ([`first_listed`]).
    Listed(usize),
    /// The flow completes, then enters the flow named, else its
    /// `complete.next`, if any.
    Complete(Option<FlowId>),
    /// A flow entered from outside (or this one afresh, by `goto`): its
    /// `on_enter` runs, then the step; at its first step the arrival is in
    /// list order, like any flow's entry.
    Enter(FlowId, StepId),
    /// The flow ends without completing.
    Abort,
}

/// Where a jump lands from inside `current`.
pub fn landing(current: FlowId, jump: Jump) -> Landing {
    match jump {
        Jump::Goto(flow) => Landing::Enter(flow, StepId(0)),
        Jump::GotoStep(flow, step) if flow == current => Landing::Step(step),
        Jump::GotoStep(flow, step) => Landing::Enter(flow, step),
        Jump::Complete(next) => Landing::Complete(next),
        Jump::Reset => Landing::Step(StepId(0)),
        Jump::Abort => Landing::Abort,
    }
}

/// Where a jump lands when the conversation is in no flow (a directive
/// armed by the last turn, a position after the flow ended): a move into a
/// flow enters it, `complete` naming a flow enters that one (a new run),
/// `abort` aborts; `reset` and a bare `complete` go nowhere (`None`).
pub fn landing_outside(jump: Jump) -> Option<Landing> {
    match jump {
        Jump::Goto(flow) | Jump::Complete(Some(flow)) => Some(Landing::Enter(flow, StepId(0))),
        Jump::GotoStep(flow, step) => Some(Landing::Enter(flow, step)),
        Jump::Abort => Some(Landing::Abort),
        Jump::Complete(None) | Jump::Reset => None,
    }
}

/// Where a directive emitted while at `step` leads: its position, or, for
/// one without (it writes and replies), on to the next step in the list.
pub fn after_directive(current: FlowId, step: StepId, jump: Option<Jump>) -> Landing {
    match jump {
        Some(jump) => landing(current, jump),
        None => Landing::Listed(step.index().saturating_add(1)),
    }
}

/// Where branch entry `then` leads from `step`, once the entry matched.
pub fn branch_landing(current: FlowId, step: StepId, then: &Then) -> Landing {
    match then {
        Then::Step(target) => Landing::Step(*target),
        Then::Directive(directive) => after_directive(current, step, directive.position.as_ref().map(Jump::from)),
    }
}

/// Where a step is left to when no branch entry matched: its `next`, else
/// the next step in the list.
pub fn fallthrough(step_id: StepId, step: &Step) -> Landing {
    match step.next {
        Some(Next::Step(target)) => Landing::Step(target),
        Some(Next::End) => Landing::Complete(None),
        None => Landing::Listed(step_id.index().saturating_add(1)),
    }
}

/// Where a flow starts: its steps in list order.
pub const ENTRY: Landing = Landing::Listed(0);

/// Where entering a flow at `step` arrives, once its `on_enter` ran: at
/// its first step, in list order like any flow's entry (a first step whose
/// `skip_if` holds is passed over); at a later step, the step as named.
pub fn arrival(step: StepId) -> Landing {
    if step == StepId(0) { ENTRY } else { Landing::Step(step) }
}

/// How a step is left, for a runner: by the first branch entry that
/// matches (the caller then follows [`branch_landing`], which may evaluate
/// a directive), else by the [`fallthrough`].
pub enum Leaving {
    /// The branch entry at this index matched.
    Branch(usize),
    /// No entry matched: the step is left for this landing.
    Fallthrough(Landing),
}

/// Decides how a step is left: its branch entries in order, asking
/// `matches` about each and stopping at the first that matches, then its
/// `next`, then the next step in the list.
pub fn leave(step_id: StepId, step: &Step, mut matches: impl FnMut(usize) -> bool) -> Leaving {
    match (0..step.branches.len()).find(|index| matches(*index)) {
        Some(index) => Leaving::Branch(index),
        None => Leaving::Fallthrough(fallthrough(step_id, step)),
    }
}

/// Whether reaching a step in list order may pass over it: it has a
/// `skip_if`, an `if` or a `when`.
pub fn can_be_passed_over(step: &Step) -> bool {
    step.skip_if.is_some() || !step.guard.is_empty() || !step.when.is_empty()
}

/// The first step from index `from` on that is not passed over, asking
/// `passed_over` about each step that [`can_be_passed_over`], in order;
/// `None` when every remaining step is passed over (the flow completes).
pub fn first_listed(flow: &Flow, from: usize, mut passed_over: impl FnMut(StepId, &Step) -> bool) -> Option<StepId> {
    flow.steps.iter().enumerate().skip(from).find_map(|(index, step)| {
        let id = StepId::from_index(index);
        (!(can_be_passed_over(step) && passed_over(id, step))).then_some(id)
    })
}

/// How a step is left by one of its [`exits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Branch entry `n` matched (to its step, by its directive, or, for a
    /// directive without a position, on to the next step in the list).
    Branch(usize),
    /// No branch entry matched: `next`, else the next step in the list.
    Fallthrough,
    /// A directive emitted by the step's actions or hooks.
    Directive,
    /// The directive of `on_no_answer` or `on_error`: taken only when the
    /// step gives up asking or fails.
    Recovery,
}

/// Whether an auto step always leaves by a position its own `do` emits:
/// one of its actions (not one inside a `for_each`, which may run no
/// times) emits a directive with a position. Merged, some position wins,
/// and the step is left by it before its branches or its fall-through are
/// tried.
pub fn always_moves(step: &Step) -> bool {
    step.auto
        && step
            .actions
            .iter()
            .any(|action| matches!(&action.kind, ActionKind::Emit(directive) if directive.position.is_some()))
}

/// Every way a step can be left, and where each leads: the directives of
/// its actions, hooks and recoveries that carry a position, each branch
/// entry, and its fall-through (neither of which a step that
/// [`always_moves`] takes). An `abort` is an exit too ([`Landing::Abort`]).
pub fn exits(current: FlowId, step_id: StepId, step: &Step) -> Vec<(Exit, Landing)> {
    let mut out = Vec::new();
    let moves = always_moves(step);
    for (part, directive) in step_directives(step) {
        let jump = directive.position.as_ref().map(Jump::from);
        match part {
            StepPart::Branch(_) if moves => {}
            StepPart::Branch(entry) => out.push((Exit::Branch(entry), after_directive(current, step_id, jump))),
            StepPart::PreAction | StepPart::Finalize => {
                out.extend(jump.map(|jump| (Exit::Directive, landing(current, jump))));
            }
            StepPart::OnNoAnswer | StepPart::OnError => {
                out.extend(jump.map(|jump| (Exit::Recovery, landing(current, jump))));
            }
        }
    }
    if moves {
        return out;
    }
    for (entry, branch) in step.branches.iter().enumerate() {
        if matches!(branch.then, Then::Step(_)) {
            out.push((Exit::Branch(entry), branch_landing(current, step_id, &branch.then)));
        }
    }
    out.push((Exit::Fallthrough, fallthrough(step_id, step)));
    out
}

/// The flow a completion enters: the one the `complete` named, else the
/// completing flow's `complete.next`.
pub fn after_completion(flow: &Flow, named: Option<FlowId>) -> Option<FlowId> {
    named.or(flow.complete_next)
}

/// What run a jump starts, where it starts one: its fields of
/// [`Flow::fresh`](super::Flow::fresh) are cleared, so what an earlier run
/// collected (a consent above all) does not act in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewRun {
    /// A new run of this flow.
    Of(FlowId),
    /// A bare `complete`: a new run of what the completing flow's
    /// completion enters ([`after_completion`]), if anything.
    AfterCompletion,
}

/// Whether a jump from `current` (`None`: outside every flow) starts a new
/// run, and of what: `goto` of its flow, `reset` of the current one,
/// `complete` of the flow it names, else of what completion enters. A
/// `goto_step`, even into another flow, goes on with that flow's run;
/// `abort` starts nothing.
pub fn new_run(current: Option<FlowId>, jump: Jump) -> Option<NewRun> {
    match jump {
        Jump::Goto(flow) | Jump::Complete(Some(flow)) => Some(NewRun::Of(flow)),
        Jump::Reset => current.map(NewRun::Of),
        Jump::Complete(None) => current.map(|_| NewRun::AfterCompletion),
        Jump::GotoStep(..) | Jump::Abort => None,
    }
}

/// The flow a directive's jump enters from `current` (or from outside
/// every flow): a `goto` or a `goto_step` into another flow, a `complete`
/// naming one; `None` for a move within the flow, a bare `complete` (its
/// flow's `complete.next` is [`after_completion`]'s), `reset` or `abort`.
pub fn flow_entered(current: Option<FlowId>, jump: Jump) -> Option<FlowId> {
    let landed = match current {
        Some(current) => landing(current, jump),
        None => landing_outside(jump)?,
    };
    match landed {
        Landing::Enter(flow, _) => Some(flow),
        Landing::Complete(named) => named,
        Landing::Step(_) | Landing::Listed(_) | Landing::Abort => None,
    }
}

/// The step a directive's jump enters *as named* (no passing over), with
/// its flow: a `goto_step` within the flow, or into another flow at a
/// step other than its first (whose arrival is in list order); `reset`
/// is the flow's entry, not a step named.
pub fn step_named(current: Option<FlowId>, jump: Jump) -> Option<(FlowId, StepId)> {
    if jump == Jump::Reset {
        return None;
    }
    match current {
        Some(current) => match landing(current, jump) {
            Landing::Step(step) => Some((current, step)),
            Landing::Enter(flow, step) => matches!(arrival(step), Landing::Step(_)).then_some((flow, step)),
            _ => None,
        },
        None => match landing_outside(jump)? {
            Landing::Enter(flow, step) => matches!(arrival(step), Landing::Step(_)).then_some((flow, step)),
            _ => None,
        },
    }
}

/// The steps entering a flow may arrive at ([`arrival`] at its first step,
/// in list order): each step that may be passed over, up to and with the
/// first that cannot be.
pub(crate) fn entry_steps(flow: &Flow) -> Vec<StepId> {
    let Landing::Listed(from) = arrival(StepId(0)) else {
        return vec![StepId(0)];
    };
    let mut steps = Vec::new();
    let first = first_listed(flow, from, |step, _| {
        steps.push(step);
        true
    });
    steps.extend(first);
    steps
}

/// The steps a turn may stop at and ask where which one depends only on
/// which fields get filled: from the step the message answers (or the
/// flow's entry), each step that asks (a prompt, something to collect or
/// require, not auto, no tools) is handed to `visit` with how many were
/// handed before, while the step leaves by falling through (no branches,
/// actions, `say` or `wait`) and no step on the way is passed over by an AI
/// `when`. `passed_over` says whether a step with a `skip_if` is passed
/// over; `visit` returns false to end the walk there. Nothing is visited
/// when the step answered has a branch entry with a `when`, which may take
/// the turn elsewhere. Each step is visited at most once: a ring of
/// satisfied steps ends the walk, as it would end the turn.
pub(crate) fn asking_chain(
    flow: &Flow,
    answering: Option<StepId>,
    mut passed_over: impl FnMut(&Step) -> bool,
    mut visit: impl FnMut(usize, StepId, &Step) -> bool,
) {
    let interruptible = answering
        .and_then(|step| flow.step(step))
        .is_some_and(|step| step.branches.iter().any(|entry| !entry.when.is_empty()));
    if interruptible {
        return;
    }
    let mut landing = match answering {
        Some(step) => Landing::Step(step),
        None => ENTRY,
    };
    for visited in 0..=flow.steps.len() {
        let step_id = match landing {
            Landing::Step(step) => step,
            Landing::Listed(from) => {
                let mut unpredictable = false;
                let found = first_listed(flow, from, |_, step| {
                    unpredictable |= !step.when.is_empty();
                    passed_over(step)
                });
                match found {
                    Some(step) if !unpredictable => step,
                    _ => return,
                }
            }
            _ => return,
        };
        let Some(step) = flow.step(step_id) else {
            return;
        };
        let asks = step.prompt.is_some() && !step.auto && step.tools.is_empty();
        if !asks || (step.collect.is_empty() && step.requires.is_empty()) || !visit(visited, step_id, step) {
            return;
        }
        let leaves_by_fields =
            step.branches.is_empty() && step.actions.is_empty() && step.say.is_none() && step.wait_ms.is_none();
        if !leaves_by_fields {
            return;
        }
        landing = fallthrough(step_id, step);
    }
}

/// The steps a turn may reach, by any way the successor rule allows, from
/// the given landings (each seen from inside its flow): following every
/// exit of every step reached (branches, `next`, list order, positions),
/// each step that may be passed over and what follows it, completions
/// into the next flow, and flows entered with their `on_enter`
/// directives. The understand stage asks the AI conditions of these steps
/// and of no others: a condition of a step the turn reaches but was not
/// asked would count as false.
pub fn reachable(program: &Program, from: &[(FlowId, Landing)]) -> BTreeSet<(FlowId, StepId)> {
    let mut reached: BTreeSet<(FlowId, StepId)> = BTreeSet::new();
    let mut entered: BTreeSet<FlowId> = BTreeSet::new();
    let mut completed: BTreeSet<(FlowId, Option<FlowId>)> = BTreeSet::new();
    let mut work: Vec<(FlowId, Landing)> = from.to_vec();
    while let Some((flow_id, place)) = work.pop() {
        let Some(flow) = program.flow(flow_id) else {
            continue;
        };
        let mut visit = |step_id: StepId, work: &mut Vec<(FlowId, Landing)>| {
            if let Some(step) = flow.step(step_id)
                && reached.insert((flow_id, step_id))
            {
                work.extend(exits(flow_id, step_id, step).into_iter().map(|(_, landing)| (flow_id, landing)));
            }
        };
        match place {
            Landing::Step(step) => visit(step, &mut work),
            Landing::Listed(from) => {
                let mut all_passed_over = true;
                for (index, step) in flow.steps.iter().enumerate().skip(from) {
                    visit(StepId::from_index(index), &mut work);
                    if !can_be_passed_over(step) {
                        all_passed_over = false;
                        break;
                    }
                }
                if all_passed_over {
                    work.push((flow_id, Landing::Complete(None)));
                }
            }
            Landing::Complete(named) => {
                if completed.insert((flow_id, named))
                    && let Some(next) = after_completion(flow, named)
                {
                    work.push((flow_id, Landing::Enter(next, StepId(0))));
                }
            }
            Landing::Enter(next, step) => {
                if entered.insert(next)
                    && let Some(declared) = program.flow(next)
                {
                    let hooks = super::walk::emitted(&declared.on_enter);
                    for jump in hooks.iter().filter_map(|directive| directive.position.as_ref().map(Jump::from)) {
                        work.push((next, landing(next, jump)));
                    }
                }
                work.push((next, arrival(step)));
            }
            Landing::Abort => {}
        }
    }
    reached
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Program;
    use crate::source::SourceFile;

    fn program(source: &str) -> Program {
        let compilation = crate::pipeline::compile(&SourceFile::new("test.flow", source));
        assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
        compilation.ir
    }

    const FLOW: &str = r#"
agent A {
  identity "A test."
}

schema {
  n: int "A number"
  ok: bool "Whether it is fine"
}

flow main "Main" {
  step first {
    prompt "A number?"
    collect n
    branch {
      if n > 3 -> third
      if n == 2 -> { set ok = true }
      else -> { goto other }
    }
  }
  step second {
    if ok == true
    say "two"
  }
  step third {
    say "three"
    next end
  }
}

flow other "Other" {
  when "the user wants the other thing"
  step only {
    say "other"
  }
}
"#;

    fn main_flow(program: &Program) -> (FlowId, &Flow) {
        (FlowId(0), program.flow(FlowId(0)).expect("flow main"))
    }

    #[test]
    fn leaving_tries_branches_in_order_then_falls_through() {
        let program = program(FLOW);
        let (_, flow) = main_flow(&program);
        let first = flow.step(StepId(0)).expect("step first");
        let mut asked = Vec::new();
        let leaving = leave(StepId(0), first, |index| {
            asked.push(index);
            index == 1
        });
        assert!(matches!(leaving, Leaving::Branch(1)));
        assert_eq!(asked, vec![0, 1], "stops at the first entry that matches");
        let leaving = leave(StepId(0), first, |_| false);
        assert!(matches!(leaving, Leaving::Fallthrough(Landing::Listed(1))));
        let third = flow.step(StepId(2)).expect("step third");
        assert!(matches!(leave(StepId(2), third, |_| true), Leaving::Fallthrough(Landing::Complete(None))));
    }

    #[test]
    fn branches_land_on_steps_in_list_order_or_on_their_position() {
        let program = program(FLOW);
        let (main, flow) = main_flow(&program);
        let first = flow.step(StepId(0)).expect("step first");
        let landings: Vec<Landing> =
            first.branches.iter().map(|entry| branch_landing(main, StepId(0), &entry.then)).collect();
        assert_eq!(landings, vec![Landing::Step(StepId(2)), Landing::Listed(1), Landing::Enter(FlowId(1), StepId(0))]);
    }

    #[test]
    fn jumps_land_as_named_within_the_flow_and_enter_other_flows() {
        let here = FlowId(0);
        assert_eq!(landing(here, Jump::GotoStep(here, StepId(2))), Landing::Step(StepId(2)));
        assert_eq!(landing(here, Jump::GotoStep(FlowId(1), StepId(2))), Landing::Enter(FlowId(1), StepId(2)));
        assert_eq!(landing(here, Jump::Goto(here)), Landing::Enter(here, StepId(0)));
        assert_eq!(landing(here, Jump::Reset), Landing::Step(StepId(0)));
        assert_eq!(landing(here, Jump::Complete(Some(FlowId(1)))), Landing::Complete(Some(FlowId(1))));
        assert_eq!(landing(here, Jump::Abort), Landing::Abort);
        assert_eq!(landing_outside(Jump::Complete(Some(here))), Some(Landing::Enter(here, StepId(0))));
        assert_eq!(landing_outside(Jump::GotoStep(here, StepId(2))), Some(Landing::Enter(here, StepId(2))));
        assert_eq!(landing_outside(Jump::Reset), None);
        assert_eq!(landing_outside(Jump::Complete(None)), None);
    }

    #[test]
    fn a_jump_names_a_step_or_enters_a_flow() {
        let (here, there) = (FlowId(0), FlowId(1));
        assert_eq!(step_named(Some(here), Jump::GotoStep(here, StepId(0))), Some((here, StepId(0))));
        assert_eq!(step_named(Some(here), Jump::GotoStep(there, StepId(0))), None, "a flow's first step: its entry");
        assert_eq!(step_named(Some(here), Jump::GotoStep(there, StepId(2))), Some((there, StepId(2))));
        assert_eq!(step_named(None, Jump::GotoStep(there, StepId(2))), Some((there, StepId(2))));
        assert_eq!(step_named(Some(here), Jump::Reset), None);
        assert_eq!(step_named(Some(here), Jump::Goto(there)), None);
        assert_eq!(flow_entered(Some(here), Jump::GotoStep(there, StepId(2))), Some(there));
        assert_eq!(flow_entered(Some(here), Jump::GotoStep(here, StepId(2))), None);
        assert_eq!(flow_entered(Some(here), Jump::Goto(here)), Some(here), "a new run of the flow");
        assert_eq!(flow_entered(Some(here), Jump::Complete(Some(there))), Some(there));
        assert_eq!(flow_entered(Some(here), Jump::Complete(None)), None);
        assert_eq!(flow_entered(None, Jump::Goto(there)), Some(there));
        assert_eq!(flow_entered(None, Jump::Abort), None);
    }

    #[test]
    fn goto_reset_and_complete_start_runs_and_goto_step_does_not() {
        let (here, there) = (FlowId(0), FlowId(1));
        assert_eq!(new_run(Some(here), Jump::Goto(there)), Some(NewRun::Of(there)));
        assert_eq!(new_run(Some(here), Jump::Reset), Some(NewRun::Of(here)));
        assert_eq!(new_run(None, Jump::Reset), None, "no flow to reset");
        assert_eq!(new_run(Some(here), Jump::Complete(Some(there))), Some(NewRun::Of(there)));
        assert_eq!(new_run(Some(here), Jump::Complete(None)), Some(NewRun::AfterCompletion));
        assert_eq!(new_run(Some(here), Jump::GotoStep(there, StepId(1))), None, "the target flow's run goes on");
        assert_eq!(new_run(Some(here), Jump::Abort), None);
    }

    #[test]
    fn list_order_passes_over_only_steps_that_can_be_passed_over() {
        let program = program(FLOW);
        let (_, flow) = main_flow(&program);
        let mut asked = Vec::new();
        let found = first_listed(flow, 1, |id, _| {
            asked.push(id);
            true
        });
        assert_eq!(found, Some(StepId(2)), "`third` has no condition: it is not asked about");
        assert_eq!(asked, vec![StepId(1)]);
        assert_eq!(first_listed(flow, 3, |_, _| true), None, "past the last step the flow completes");
    }

    const HUB: &str = r#"
agent A {
  identity "A test."
}

schema {
  n: int "A number"
}

flow main "Main" {
  step hub {
    say "hi"
    branch {
      when "the user mentions pizza" -> pizza
      else -> ask
    }
  }
  step ask {
    prompt "A number?"
    collect n
    branch {
      else -> { set n = null  goto_step hub }
    }
  }
  step pizza {
    say "pizza"
    next end
  }
  complete next other
}

flow other "Other" {
  when "the user wants the other thing"
  step only {
    skip_if n > 3
    say "other"
  }
  step last {
    say "last"
  }
}
"#;

    #[test]
    fn reachable_follows_jumps_backwards_completion_and_passing_over() {
        let program = program(HUB);
        let (main, other) = (FlowId(0), FlowId(1));
        let from_ask = reachable(&program, &[(main, Landing::Step(StepId(1)))]);
        let expected: BTreeSet<(FlowId, StepId)> =
            [(main, StepId(0)), (main, StepId(1)), (main, StepId(2)), (other, StepId(0)), (other, StepId(1))]
                .into_iter()
                .collect();
        assert_eq!(from_ask, expected, "`hub` by the jump back; `other` after completion, its `only` passed over");
        let from_pizza = reachable(&program, &[(main, Landing::Step(StepId(2)))]);
        assert!(!from_pizza.contains(&(main, StepId(0))), "nothing leads back from `pizza`");
        assert!(!from_pizza.contains(&(main, StepId(1))));
        let entering = reachable(&program, &[(other, Landing::Enter(other, StepId(0)))]);
        assert_eq!(entering, [(other, StepId(0)), (other, StepId(1))].into_iter().collect());
    }
}
