//! Where a step goes next: leaving a step by its branches, `next` or list
//! order, skipping steps, and turning a directive's position into a cursor.

use super::understand::question_id;
use super::{Cursor, Turn, TurnError};
use crate::expr::eval::is_true;
use crate::ir::{Flow, FlowId, Next, Program, Step, StepId, Then};
use crate::runtime::actions::evaluate_directive;
use crate::runtime::directive::{Emission, Move, Source};
use crate::runtime::events::Event;

impl Turn<'_> {
    pub(super) fn leave(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return Ok(());
        };
        let Some(step) = flow.step(step_id) else {
            self.cursor = Cursor::FlowDone(flow_id, None, false);
            return Ok(());
        };
        for index in 0..step.branches.len() {
            if self.branch_matches(flow, step, index) {
                self.take_branch(flow_id, step_id, index);
                return Ok(());
            }
        }
        self.cursor = match step.next {
            Some(Next::Step(target)) => Cursor::Enter(flow_id, target),
            Some(Next::End) => Cursor::FlowDone(flow_id, None, false),
            None => self.linear_successor(flow_id, step_id),
        };
        Ok(())
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
        match &entry.then {
            Then::Step(target) => self.cursor = Cursor::Enter(flow_id, *target),
            Then::Directive(directive) => {
                let mut warnings = Vec::new();
                let emission =
                    evaluate_directive(directive, Source::new("branch", &base), &self.scope(&[]), &mut warnings);
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
                    None => self.linear_successor(flow_id, step_id),
                };
            }
        }
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

    /// A flow's entry: its first step, skipped like any step reached in
    /// list order when its `skip_if` holds or its `if`/`when` does not.
    pub(super) fn entry_cursor(&mut self, flow_id: FlowId) -> Cursor {
        let program = self.program();
        let Some(flow) = program.flow(flow_id) else {
            return Cursor::Idle;
        };
        match flow.steps.first() {
            Some(first) => match self.skip_reason(flow, first) {
                Some(reason) => {
                    self.emit(Event::StepSkipped { flow: flow.name.clone(), step: first.name.clone(), reason });
                    self.linear_successor(flow_id, StepId(0))
                }
                None => Cursor::Enter(flow_id, StepId(0)),
            },
            None => Cursor::FlowDone(flow_id, None, false),
        }
    }

    /// The next step in list order whose `skip_if` does not hold and whose
    /// `if`/`when` do, else the flow's completion.
    pub(super) fn linear_successor(&mut self, flow_id: FlowId, step_id: StepId) -> Cursor {
        let program = self.program();
        let Some(flow) = program.flow(flow_id) else {
            return Cursor::Idle;
        };
        for (index, candidate) in flow.steps.iter().enumerate().skip(step_id.index() + 1) {
            let reason = self.skip_reason(flow, candidate);
            match reason {
                Some(reason) => {
                    self.emit(Event::StepSkipped { flow: flow.name.clone(), step: candidate.name.clone(), reason })
                }
                None => return Cursor::Enter(flow_id, StepId::from_index(index)),
            }
        }
        Cursor::FlowDone(flow_id, None, false)
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

    pub(super) fn position_cursor(&mut self, position: Move) -> Cursor {
        let current = self.session.flow;
        match position {
            Move::Goto { flow, data } => {
                let writes = data;
                // The run starts before its `with` data is written.
                self.start_run(flow);
                self.apply_writes(&writes, &[], "goto");
                if let Some(current) = current {
                    self.emit(Event::FlowLeft {
                        flow: self.flow_name(current),
                        reason: format!("goto `{}`", self.flow_name(flow)),
                    });
                }
                Cursor::EnterFlow(flow, StepId(0))
            }
            Move::GotoStep { flow, step } => {
                if current == Some(flow) {
                    Cursor::Enter(flow, step)
                } else {
                    Cursor::EnterFlow(flow, step)
                }
            }
            Move::Complete { next } => match current {
                Some(flow) => Cursor::FlowDone(flow, next, true),
                None => next.map_or(Cursor::Idle, |next| {
                    self.start_run(next);
                    Cursor::EnterFlow(next, StepId(0))
                }),
            },
            Move::Abort { reason } => {
                if let Some(reason) = reason {
                    self.says.push(reason);
                }
                Cursor::Abort
            }
            Move::Reset => match current {
                Some(flow) => {
                    self.start_run(flow);
                    Cursor::Enter(flow, StepId(0))
                }
                None => Cursor::Idle,
            },
        }
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
            if self.extracted_this_turn.contains(&declared.name) {
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
