//! Stage 4 of a turn: resolving the conversation's position one transition
//! at a time: entering flows and steps, asking, executing, and answering a
//! failed step by its `on_error`.

use super::MAX_TRANSITIONS;
use super::{Cursor, Stage, Turn, TurnError};
use crate::ir::successor;
use crate::ir::{Flow, FlowId, Program, Recovery, Step, StepId};
use crate::runtime::actions::{ActionError, ActionSource};
use crate::runtime::directive::{Move, Source};
use crate::runtime::events::{Event, StopReason};
use crate::runtime::session::Offered;
use serde_json::Value;

impl Turn<'_> {
    pub(super) fn resolve_one(&mut self) -> Result<(), TurnError> {
        self.transitions += 1;
        if self.transitions > MAX_TRANSITIONS {
            self.warn("the turn did not settle: it moved between steps too many times without asking");
            self.stop = Some(StopReason::AutoStepLimit);
            self.stage = Stage::Reply;
            return Ok(());
        }
        let program = self.program();
        match self.cursor {
            Cursor::Idle => {
                self.session.flow = None;
                self.session.step = None;
                self.stop_with(StopReason::NeedsInput);
            }
            Cursor::EnterFlow(flow_id, step_id) => self.enter_flow(&program, flow_id, step_id)?,
            Cursor::Enter(flow_id, step_id) => self.enter_step(&program, flow_id, step_id)?,
            Cursor::Evaluate { flow, step, fresh } => self.evaluate(&program, flow, step, fresh)?,
            Cursor::Execute(flow, step) => self.execute(&program, flow, step)?,
            Cursor::Leave(flow, step) => self.leave(&program, flow, step)?,
            Cursor::FlowDone(flow_id, next_override) => self.complete_flow(&program, flow_id, next_override)?,
            Cursor::Abort => self.abort_flow(),
        }
        Ok(())
    }

    /// Enters a flow at `step_id`: its `on_enter` runs first.
    fn enter_flow(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return Ok(());
        };
        self.emit(Event::FlowEntered { flow: flow.name.clone() });
        self.session.flow = Some(flow_id);
        self.session.step = None;
        let path = format!("{}.on_enter", flow.name);
        match self.run_hook(&flow.on_enter, &path) {
            Ok(()) => {}
            // The flow's `on_enter` is part of entering the step the
            // flow is entered at, so that step's `on_error` answers
            // it (by default: an apology, and the flow aborted).
            Err(TurnError::Action(failure)) => {
                let Some(step) = flow.step(step_id) else {
                    return Err(failure.into());
                };
                self.step_failed(flow, step, flow_id, step_id, failure)?;
                return Ok(());
            }
            Err(error) => return Err(error),
        }
        if !self.apply_pre_positions() {
            self.cursor = self.land(flow_id, successor::arrival(step_id));
        }
        Ok(())
    }

    /// Enters a step: its `on_enter` runs, then it is evaluated.
    fn enter_step(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?))) else {
            // A flow with no steps completes at once.
            self.cursor = Cursor::FlowDone(flow_id, None);
            return Ok(());
        };
        self.session.flow = Some(flow_id);
        self.session.step = Some(step_id);
        self.session.asks = 0;
        // What an earlier visit offered is not what this one will.
        self.session.offered = None;
        self.emit(Event::StepEntered { flow: self.flow_name(flow_id), step: step.name.clone() });
        if !self.run_step_hook(flow, step, (flow_id, step_id), &step.on_enter, "on_enter")? {
            return Ok(());
        }
        if !self.apply_pre_positions() {
            self.cursor = Cursor::Evaluate { flow: flow_id, step: step_id, fresh: true };
        }
        Ok(())
    }

    /// A flow completed: its `on_complete` runs, then `complete.next` (or
    /// the directive's `next`) starts, or the turn stops.
    fn complete_flow(
        &mut self,
        program: &Program,
        flow_id: FlowId,
        next_override: Option<FlowId>,
    ) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            self.cursor = Cursor::Idle;
            return Ok(());
        };
        let path = format!("{}.on_complete", flow.name);
        // `on_complete` is a post-model hook, like `finalize`: the
        // flow's steps have acted (a booking is made), so a failure
        // here must not hide that from the user by failing the turn.
        // Its writes and directives are dropped together and traced.
        match self.run_post_hook(&flow.on_complete, &path) {
            Ok(()) => {}
            Err(TurnError::Action(failure)) => self.emit(Event::HookFailed { hook: path, error: failure.to_string() }),
            Err(error) => return Err(error),
        }
        self.emit(Event::FlowCompleted { flow: flow.name.clone() });
        self.session.flow = None;
        self.session.step = None;
        self.session.asks = 0;
        match successor::after_completion(flow, next_override) {
            Some(next) => {
                self.emit(Event::Routed { flow: self.flow_name(next), reason: "complete.next" });
                self.start_run(next);
                self.cursor = Cursor::EnterFlow(next, StepId(0));
            }
            None => self.stop_with(StopReason::FlowComplete),
        }
        Ok(())
    }

    fn abort_flow(&mut self) {
        if let Some(flow) = self.session.flow {
            self.emit(Event::FlowLeft { flow: self.flow_name(flow), reason: "aborted".to_string() });
        }
        self.session.flow = None;
        self.session.step = None;
        self.session.asks = 0;
        self.stop_with(StopReason::Aborted);
    }

    pub(super) fn needs_input(&self, step: &Step) -> bool {
        step.collect.iter().chain(&step.requires).any(|field| {
            self.runtime
                .program
                .field(*field)
                .is_none_or(|declared| self.session.data.get(&declared.name).is_none_or(Value::is_null))
        })
    }

    pub(super) fn mark_executed(&mut self, name: &str) {
        if !self.executed.iter().any(|executed| executed == name) {
            self.executed.push(name.to_string());
        }
    }

    pub(super) fn evaluate(
        &mut self,
        program: &Program,
        flow_id: FlowId,
        step_id: StepId,
        fresh: bool,
    ) -> Result<(), TurnError> {
        let Some((flow, step)) = self.locate(program, flow_id, step_id) else {
            return Ok(());
        };
        let reopened = !fresh && self.reopen_confirmation(program, flow, step, (flow_id, step_id));
        if fresh {
            self.clear_confirmations(program, flow, step);
        }
        if !self.needs_input(step) {
            self.cursor = Cursor::Execute(flow_id, step_id);
            return Ok(());
        }
        // A reopened confirmation already holds the user's change of course
        // ("No, 3 guests"): asking it again with the new value is the
        // answer, not an AI entry that would ask for the value once more.
        if !fresh
            && !reopened
            && let Some(index) = self.interrupting_branch(flow, step)
        {
            self.mark_executed(&step.name);
            self.take_branch(flow_id, step_id, index);
            return Ok(());
        }
        if step.auto {
            // An auto step whose `requires` are unset cannot run and cannot
            // ask: the flow cannot go on.
            self.warn(format!("the auto step `{}` requires fields that are not set; the flow stops here", step.name));
            self.mark_executed(&step.name);
            self.stop_with(StopReason::NeedsInput);
            return Ok(());
        }
        if !fresh && self.session.asks >= step.max_asks {
            self.emit(Event::Warning {
                message: format!("`{}` asked {} times without an answer", step.name, self.session.asks),
            });
            match &step.on_no_answer {
                Some(directive) => {
                    let source = Source::OnNoAnswer(format!("{}.{}", flow.name, step.name));
                    let position = self.apply_step_directive(directive, source);
                    self.session.asks = 0;
                    self.cursor = match position {
                        Some(position) => self.position_cursor(position),
                        None => Cursor::Evaluate { flow: flow_id, step: step_id, fresh: true },
                    };
                }
                None => {
                    self.says.push(format!(
                        "Sorry, I could not get an answer to that, so I stopped \"{}\".",
                        flow.title.clone().unwrap_or_else(|| flow.name.clone())
                    ));
                    self.cursor = Cursor::Abort;
                }
            }
            return Ok(());
        }
        if !fresh
            && !reopened
            && let Some(doubt) = self.consent_doubt.take()
        {
            self.says.push(format!("Just to be sure: {}.", doubt.clause()));
        }
        self.session.asks += 1;
        let ask = self.session.asks;
        self.emit(Event::StepAsked { flow: flow.name.clone(), step: step.name.clone(), ask });
        self.mark_executed(&step.name);
        self.asking = Some((flow_id, step_id));
        if !self.run_step_hook(flow, step, (flow_id, step_id), &step.prepare, "prepare")? {
            return Ok(());
        }
        self.batch.push((flow_id, step_id));
        if self.apply_pre_positions() {
            return Ok(());
        }
        self.session.offered = self.offer(program, step, (flow_id, step_id));
        if let Some(prompt) = &step.prompt {
            let text = self.render(prompt);
            self.instructions.push(text);
        }
        self.stop_with(StopReason::NeedsInput);
        Ok(())
    }

    /// The values a confirming step shows as it asks (after its `prepare`,
    /// as its prompt renders them); `None` for a step that confirms nothing.
    pub(super) fn offer(&self, program: &Program, step: &Step, (flow, step_id): (FlowId, StepId)) -> Option<Offered> {
        let fields = step.confirms(program);
        if fields.is_empty() {
            return None;
        }
        let values = fields
            .iter()
            .filter_map(|field| program.field(*field))
            .map(|declared| {
                let value = self.session.data.get(&declared.name).cloned().unwrap_or(Value::Null);
                (declared.name.clone(), value)
            })
            .collect();
        Some(Offered { flow, step: step_id, values })
    }

    /// A consent binds to what was confirmed: when a value the step asked
    /// about changed before the step is left ("No, 3 guests", "actually the
    /// Overlook"), the bools it collects are cleared, so the step asks again
    /// with the new value instead of acting on, or cancelling over, an
    /// answer to another question. Returns whether it reopened.
    pub(super) fn reopen_confirmation(
        &mut self,
        program: &Program,
        flow: &Flow,
        step: &Step,
        at: (FlowId, StepId),
    ) -> bool {
        let Some(offered) = self.session.offered.take() else {
            return false;
        };
        if (offered.flow, offered.step) != at {
            return false;
        }
        let changed: Vec<String> = offered
            .values
            .iter()
            .filter(|(name, shown)| self.session.data.get(*name).unwrap_or(&Value::Null) != *shown)
            .map(|(name, _)| name.clone())
            .collect();
        if changed.is_empty() {
            return false;
        }
        let mut cleared = Vec::new();
        for field in &step.collect {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            if matches!(declared.ty.kind, crate::ir::TypeKind::Bool)
                && self.session.data.remove(&declared.name).is_some()
            {
                cleared.push(declared.name.clone());
            }
        }
        // A new offer, not an unanswered one: it does not use up `max_asks`.
        self.session.asks = 0;
        self.emit(Event::ConfirmationReopened { flow: flow.name.clone(), step: step.name.clone(), changed, cleared });
        true
    }

    /// A confirmation answers only the step that asked it, on the visit
    /// that asked it: a step that collects one, entered anew, starts
    /// without it, whoever set it (another step collecting the same
    /// field, an earlier visit, a "yes" to another question this turn).
    fn clear_confirmations(&mut self, program: &Program, flow: &Flow, step: &Step) {
        let mut cleared = Vec::new();
        for field in &step.collect {
            let Some(declared) = program.field(*field) else {
                continue;
            };
            if matches!(declared.ty.kind, crate::ir::TypeKind::Bool)
                && self.session.data.remove(&declared.name).is_some_and(|value| !value.is_null())
            {
                cleared.push(declared.name.clone());
            }
        }
        if !cleared.is_empty() {
            self.emit(Event::ConfirmationCleared { flow: flow.name.clone(), step: step.name.clone(), fields: cleared });
        }
    }

    pub(super) fn execute(&mut self, program: &Program, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
        let Some((flow, step)) = self.locate(program, flow_id, step_id) else {
            return Ok(());
        };
        if step.auto {
            if self.auto_steps >= program.agent.limits.max_auto_steps {
                self.session.flow = Some(flow_id);
                self.session.step = Some(step_id);
                self.stop_with(StopReason::AutoStepLimit);
                return Ok(());
            }
            self.auto_steps += 1;
        }
        // The step the message answers had its model call (and hooks) when
        // it asked; a conversation step entered this turn joins the batch.
        let answered = self.original.flow == Some(flow_id) && self.original.step == Some(step_id);
        let joins_batch = !step.auto && !answered;
        self.session.flow = Some(flow_id);
        self.session.step = Some(step_id);
        self.mark_executed(&step.name);
        self.steps_executed += 1;
        let path = format!("{}.{}", flow.name, step.name);
        let source = ActionSource { kind: Source::Action, path: &path, numbered: true };
        match self.run_actions(&step.actions, &source, false) {
            Ok(()) => {}
            Err(TurnError::Action(failure)) => return self.step_failed(flow, step, flow_id, step_id, failure),
            Err(error) => return Err(error),
        }
        if joins_batch {
            if !self.run_step_hook(flow, step, (flow_id, step_id), &step.prepare, "prepare")? {
                return Ok(());
            }
            self.batch.push((flow_id, step_id));
        }
        if step.collect.is_empty()
            && let Some(prompt) = &step.prompt
        {
            let text = self.render(prompt);
            self.instructions.push(text);
        }
        if let Some(say) = &step.say {
            let text = self.render(say);
            self.says.push(text);
        }
        self.emit(Event::StepExecuted { flow: flow.name.clone(), step: step.name.clone() });
        self.consecutive_errors = 0;
        if self.apply_pre_positions() {
            return Ok(());
        }
        if let Some(wait_ms) = step.wait_ms {
            let resume = crate::runtime::clock::resume_time(self.runtime.tool_env.clock.now(), wait_ms)
                .ok_or_else(|| TurnError::Wait(crate::runtime::clock::wait_out_of_range(wait_ms)))?;
            self.resume_at = Some(resume.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            self.cursor = Cursor::Leave(flow_id, step_id);
            self.leave(program, flow_id, step_id)?;
            // Park at the successor without entering it: the wait resumes there.
            if let Cursor::Enter(next_flow, next_step) = self.cursor {
                self.session.flow = Some(next_flow);
                self.session.step = Some(next_step);
            }
            self.stop_with(StopReason::Waiting);
            return Ok(());
        }
        self.cursor = Cursor::Leave(flow_id, step_id);
        Ok(())
    }

    /// A step's actions failed (a tool call, an invalid write) in its `do`,
    /// `on_enter` or `prepare`; nothing they wrote is kept. A conversation
    /// answers instead of failing the turn: by the step's `on_error`
    /// directive (its `reply` is said; with no position the conversation
    /// stays at the step and the next message runs it again), or by default
    /// with an apology and the flow aborted, so that nothing more acts on
    /// the failed attempt. `on_error: stop` fails the turn instead, leaving
    /// the session as it was.
    pub(super) fn step_failed(
        &mut self,
        flow: &Flow,
        step: &Step,
        flow_id: FlowId,
        step_id: StepId,
        failure: ActionError,
    ) -> Result<(), TurnError> {
        let directive = match &step.recovery {
            Some(Recovery::Stop) => return Err(failure.into()),
            Some(Recovery::Directive(directive)) => Some(directive),
            None => None,
        };
        self.emit(Event::StepFailed { flow: flow.name.clone(), step: step.name.clone(), error: failure.to_string() });
        self.consecutive_errors += 1;
        self.session.flow = Some(flow_id);
        self.session.step = Some(step_id);
        self.session.asks = 0;
        let Some(directive) = directive else {
            let title = flow.title.clone().unwrap_or_else(|| flow.name.clone());
            self.says.push(format!("Sorry, something went wrong, so I stopped \"{title}\". Nothing more was done."));
            self.cursor = Cursor::Abort;
            return Ok(());
        };
        let source = Source::OnError(format!("{}.{}", flow.name, step.name));
        match self.apply_step_directive(directive, source) {
            Some(position) => self.cursor = self.position_cursor(position),
            None => self.stop_with(StopReason::NeedsInput),
        }
        Ok(())
    }

    /// Runs a step's `on_enter` or `prepare` hook. Its failure is the
    /// step's: `on_error` answers it. Returns whether the hook ran; when it
    /// did not, the failure has already moved the turn on.
    pub(super) fn run_step_hook(
        &mut self,
        flow: &Flow,
        step: &Step,
        (flow_id, step_id): (FlowId, StepId),
        actions: &[crate::ir::Action],
        hook: &str,
    ) -> Result<bool, TurnError> {
        let path = format!("{}.{}.{hook}", flow.name, step.name);
        match self.run_hook(actions, &path) {
            Ok(()) => Ok(true),
            Err(TurnError::Action(failure)) => {
                self.step_failed(flow, step, flow_id, step_id, failure)?;
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    /// Applies a step's own directive (`on_no_answer`, `on_error`) at once:
    /// records it, writes its data, says its `reply`; returns its position
    /// for the caller to move by.
    pub(super) fn apply_step_directive(&mut self, directive: &crate::ir::Directive, source: Source) -> Option<Move> {
        let emission = self.directive_emission(directive, source);
        self.record(&emission, true);
        let source_name = emission.source.to_string();
        self.apply_writes(&emission.set, &emission.set_context, &source_name);
        if let Some(reply) = emission.reply.clone() {
            self.says.push(reply);
        }
        emission.position
    }
}
