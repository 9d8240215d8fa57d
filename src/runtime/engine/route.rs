//! Where a step goes next, by the successor rule the checker and the graph
//! also follow ([`crate::ir::successor`]): leaving a step by its branches,
//! `next` or list order, passing over steps, and turning a directive's
//! position into a cursor. This file decides the conditions (branch
//! entries, `skip_if`, `if`, `when`) and traces what it decided.

use super::understand::question_id;
use super::{Cursor, Turn, TurnError};
use crate::expr::eval::is_true;
use crate::ir::successor::{self, Jump, Landing, Leaving};
use crate::ir::{Flow, FlowId, Program, Step, StepId, Then};
use crate::runtime::actions::evaluate_directive;
use crate::runtime::directive::{Emission, Move, Source};
use crate::runtime::events::Event;

impl Turn<'_> {
    pub(super) fn leave(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some((flow, step)) = self.locate(program, flow_id, step_id) else {
            return Ok(());
        };
        match successor::leave(step_id, step, |index| self.branch_matches(flow, step, index)) {
            Leaving::Branch(index) => self.take_branch(flow_id, step_id, index),
            Leaving::Fallthrough(landing) => self.cursor = self.land(flow_id, landing),
        }
        Ok(())
    }

    /// The flow and step a cursor names. When either is gone (a program
    /// changed under a session), the cursor moves on, to idle or to the
    /// flow's completion, and there is nothing to do at the step.
    pub(super) fn locate<'p>(
        &mut self,
        program: &'p Program,
        flow_id: FlowId,
        step_id: StepId,
    ) -> Option<(&'p Flow, &'p Step)> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return None;
        };
        let Some(step) = flow.step(step_id) else {
            self.cursor = Cursor::FlowDone(flow_id, None);
            return None;
        };
        Some((flow, step))
    }

    /// Whether branch entry `index` matches: its `if`s hold, then its `when`s.
    pub(super) fn branch_matches(&mut self, flow: &Flow, step: &Step, index: usize) -> bool {
        let Some(entry) = step.branches.get(index) else {
            return false;
        };
        if !self.holds(&entry.guard) {
            return false;
        }
        let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
        self.whens_hold(&base, &entry.when)
    }

    /// Follows branch entry `index` of a step: to a step of the flow, or by
    /// its directive (a directive without a position applies its writes and
    /// reply, then resolution goes on with the linear successor).
    pub(super) fn take_branch(&mut self, flow_id: FlowId, step_id: StepId, index: usize) {
        let program = self.program();
        let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?))) else {
            return;
        };
        let Some(entry) = step.branches.get(index) else {
            return;
        };
        let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
        self.emit(Event::BranchTaken {
            flow: flow.name.clone(),
            step: step.name.clone(),
            entry: index + 1,
            label: entry.label.clone(),
        });
        let Then::Directive(directive) = &entry.then else {
            self.cursor = self.land(flow_id, successor::branch_landing(flow_id, step_id, &entry.then));
            return;
        };
        let mut warnings = Vec::new();
        let emission = evaluate_directive(directive, Source::Branch(base.clone()), &self.scope(&[]), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        self.record(&emission, true);
        let source_name = emission.source.to_string();
        self.apply_writes(&emission.set, &emission.set_context, &source_name);
        // A branch evaluated before the model call is pre-model:
        // its reply and augmentation act in this turn.
        if emission.reply.is_some() || emission.has_augmentation() {
            self.pre_bus.push(Emission {
                position: None,
                set: Vec::new(),
                set_context: Vec::new(),
                ..emission.clone()
            });
            self.pre_applied = self.pre_bus.len();
        }
        self.cursor = match emission.position {
            Some(position) => self.position_cursor(position),
            None => self.land(flow_id, successor::after_directive(flow_id, step_id, None)),
        };
    }

    /// An entry with a `when` lets the user change course instead of
    /// answering: it may match while the step the message answers still
    /// needs input. Code-only entries and the fallback wait for the step's
    /// fields (they decide on the answer).
    pub(super) fn interrupting_branch(&mut self, flow: &Flow, step: &Step) -> Option<usize> {
        (0..step.branches.len()).find(|index| {
            let has_when = step.branches.get(*index).is_some_and(|entry| !entry.when.is_empty());
            has_when && self.branch_matches(flow, step, *index)
        })
    }

    /// The cursor a landing of the successor rule ([`successor`]) puts the
    /// turn at. In list order, each step that can be passed over is asked
    /// about ([`Turn::skip_reason`]); those passed over are traced.
    pub(super) fn land(&mut self, flow_id: FlowId, landing: Landing) -> Cursor {
        match landing {
            Landing::Step(step) => Cursor::Enter(flow_id, step),
            Landing::Listed(from) => {
                let program = self.program();
                let Some(flow) = program.flow(flow_id) else {
                    return Cursor::Idle;
                };
                let found =
                    successor::first_listed(flow, from, |_, candidate| match self.skip_reason(flow, candidate) {
                        Some(reason) => {
                            self.emit(Event::StepSkipped {
                                flow: flow.name.clone(),
                                step: candidate.name.clone(),
                                reason,
                            });
                            true
                        }
                        None => false,
                    });
                match found {
                    Some(step) => Cursor::Enter(flow_id, step),
                    None => Cursor::FlowDone(flow_id, None),
                }
            }
            Landing::Complete(next) => Cursor::FlowDone(flow_id, next),
            Landing::Enter(flow, step) => Cursor::EnterFlow(flow, step),
            Landing::Abort => Cursor::Abort,
        }
    }

    pub(super) fn skip_reason(&mut self, flow: &Flow, step: &Step) -> Option<String> {
        if let Some(skip_if) = &step.skip_if
            && is_true(&self.eval(skip_if))
        {
            return Some("skip_if holds".to_string());
        }
        if !self.holds(&step.guard) {
            return Some("its `if` does not hold".to_string());
        }
        let base = format!("{}.{}", flow.name, step.name);
        if !step.when.is_empty() && !self.whens_hold(&base, &step.when) {
            return Some("its `when` does not hold".to_string());
        }
        None
    }

    /// Whether every `when` of a list holds, by the understanding's answers.
    pub(super) fn whens_hold(&mut self, base: &str, whens: &[String]) -> bool {
        for index in 0..whens.len() {
            let id = question_id(base, whens.len(), index);
            match self.understanding.conditions.get(&id).map(|answer| answer.yes) {
                Some(true) => {}
                Some(false) => return false,
                None => {
                    self.warn(format!("the condition `{id}` was not asked this turn; it counts as not holding"));
                    return false;
                }
            }
        }
        true
    }

    /// The cursor a directive's position moves the turn to. `goto` and
    /// `reset` start a new run of the flow they land in; `goto` writes its
    /// `with` data once the run has started.
    pub(super) fn position_cursor(&mut self, position: Move) -> Cursor {
        let current = self.session.flow;
        let jump = position.jump();
        match position {
            Move::Goto { flow, data } => {
                self.start_run(flow);
                self.apply_writes(&data, &[], "goto");
                if let Some(current) = current {
                    self.emit(Event::FlowLeft {
                        flow: self.flow_name(current),
                        reason: format!("goto `{}`", self.flow_name(flow)),
                    });
                }
            }
            Move::Abort { reason: Some(reason) } => self.says.push(reason),
            _ => {}
        }
        let Some(current) = current else {
            // No flow to leave (a pending directive, a signal between
            // flows): only a move into a flow goes anywhere.
            if let Jump::Complete(Some(next)) = jump {
                self.start_run(next);
            }
            return match successor::landing_outside(jump) {
                Some(Landing::Enter(flow, step)) => Cursor::EnterFlow(flow, step),
                Some(Landing::Abort) => Cursor::Abort,
                _ => Cursor::Idle,
            };
        };
        if jump == Jump::Reset {
            self.start_run(current);
        }
        self.land(current, successor::landing(current, jump))
    }

    /// A new run of a flow starts: the fields of its [`Flow::fresh`] are
    /// cleared, so nothing collected in an earlier run (a consent above
    /// all) acts in this one. Values the understanding step read from this
    /// turn's message stay: the message that routes here may already
    /// answer the flow's questions.
    pub(super) fn start_run(&mut self, flow_id: FlowId) {
        let program = self.program();
        let Some(flow) = program.flow(flow_id) else {
            return;
        };
        let mut cleared = Vec::new();
        for field in &flow.fresh {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            // Values the user gave this turn carry into the new run, but a
            // confirmation never does: it answered another question.
            let confirmation = matches!(declared.ty.kind, crate::ir::TypeKind::Bool);
            if self.extracted_this_turn.contains(&declared.name) && !confirmation {
                continue;
            }
            if self.session.data.remove(&declared.name).is_some() {
                cleared.push(declared.name.clone());
            }
        }
        if !cleared.is_empty() {
            self.emit(Event::FieldsCleared { flow: flow.name.clone(), fields: cleared });
        }
    }
}
