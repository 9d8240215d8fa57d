//! Stage 4 of a turn: resolving the conversation's position one transition
//! at a time: entering flows and steps, asking, executing, and answering a
//! failed step by its `on_error`.

use super::bus::{apply_writes, directive_emission, record, run_actions, run_hook, run_post_hook};
use super::position::{apply_pre_positions, land, position_cursor, start_run};
use super::route::{interrupting_branch, leave, locate, take_branch};
use super::services::Services;
use super::state::{TurnState, flow_name};
use super::{Cursor, MAX_TRANSITIONS, Stage, StageDone, StageOutcome, TurnError};
use crate::ir::successor;
use crate::ir::{Flow, FlowId, Program, Recovery, Step, StepId};
use crate::runtime::actions::{ActionError, ActionSource};
use crate::runtime::directive::{Move, Source};
use crate::runtime::events::{Event, StopReason};
use crate::runtime::session::Offered;
use serde_json::Value;

pub(super) fn resolve_one(st: &mut TurnState, sv: &mut Services) -> Result<StageOutcome, TurnError> {
    st.counters.transitions += 1;
    if st.counters.transitions > MAX_TRANSITIONS {
        st.warn("the turn did not settle: it moved between steps too many times without asking");
        st.stop = Some(StopReason::AutoStepLimit);
        st.stage = Stage::Reply;
        return Ok(StageOutcome::Done(StageDone::Resolved));
    }
    match st.cursor {
        Cursor::Idle => {
            st.session.flow = None;
            st.session.step = None;
            st.stop_with(StopReason::NeedsInput);
        }
        Cursor::EnterFlow(flow_id, step_id) => enter_flow(st, sv, flow_id, step_id)?,
        Cursor::Enter(flow_id, step_id) => enter_step(st, sv, flow_id, step_id)?,
        Cursor::Evaluate { flow, step, fresh } => evaluate(st, sv, flow, step, fresh)?,
        Cursor::Execute(flow, step) => execute(st, sv, flow, step)?,
        Cursor::Leave(flow, step) => leave(st, sv, flow, step)?,
        Cursor::FlowDone(flow_id, next_override) => complete_flow(st, sv, flow_id, next_override)?,
        Cursor::Abort => abort_flow(st, sv),
    }
    Ok(StageOutcome::Done(StageDone::Resolved))
}

/// Enters a flow at `step_id`: its `on_enter` runs first.
fn enter_flow(st: &mut TurnState, sv: &mut Services, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
    let program = sv.program;
    let Some(flow) = program.flow(flow_id) else {
        st.cursor = Cursor::Idle;
        return Ok(());
    };
    st.emit(Event::FlowEntered { flow: flow.name.clone() });
    st.session.flow = Some(flow_id);
    st.session.step = None;
    let path = format!("{}.on_enter", flow.name);
    match run_hook(st, sv, &flow.on_enter, &path) {
        Ok(()) => {}
        // The flow's `on_enter` is part of entering the step the
        // flow is entered at, so that step's `on_error` answers
        // it (by default: an apology, and the flow aborted).
        Err(TurnError::Action(failure)) => {
            let Some(step) = flow.step(step_id) else {
                return Err(failure.into());
            };
            step_failed(st, sv, flow, step, flow_id, step_id, failure)?;
            return Ok(());
        }
        Err(error) => return Err(error),
    }
    if !apply_pre_positions(st, sv) {
        st.cursor = land(st, sv, flow_id, successor::arrival(step_id));
    }
    Ok(())
}

/// Enters a step: its `on_enter` runs, then it is evaluated.
fn enter_step(st: &mut TurnState, sv: &mut Services, flow_id: FlowId, step_id: StepId) -> Result<(), TurnError> {
    let program = sv.program;
    let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?))) else {
        // A flow with no steps completes at once.
        st.cursor = Cursor::FlowDone(flow_id, None);
        return Ok(());
    };
    st.session.flow = Some(flow_id);
    st.session.step = Some(step_id);
    st.session.asks = 0;
    // What an earlier visit offered is not what this one will.
    st.session.offered = None;
    st.emit(Event::StepEntered { flow: flow_name(sv, flow_id), step: step.name.clone() });
    if !run_step_hook(st, sv, flow, step, (flow_id, step_id), &step.on_enter, "on_enter")? {
        return Ok(());
    }
    if !apply_pre_positions(st, sv) {
        st.cursor = Cursor::Evaluate { flow: flow_id, step: step_id, fresh: true };
    }
    Ok(())
}

/// A flow completed: its `on_complete` runs, then `complete.next` (or
/// the directive's `next`) starts, or the turn stops.
fn complete_flow(
    st: &mut TurnState,
    sv: &mut Services,
    flow_id: FlowId,
    next_override: Option<FlowId>,
) -> Result<(), TurnError> {
    let program = sv.program;
    let Some(flow) = program.flow(flow_id) else {
        st.cursor = Cursor::Idle;
        return Ok(());
    };
    let path = format!("{}.on_complete", flow.name);
    // `on_complete` is a post-model hook, like `finalize`: the
    // flow's steps have acted (a booking is made), so a failure
    // here must not hide that from the user by failing the turn.
    // Its writes and directives are dropped together and traced.
    match run_post_hook(st, sv, &flow.on_complete, &path) {
        Ok(()) => {}
        Err(TurnError::Action(failure)) => st.emit(Event::HookFailed { hook: path, error: failure.to_string() }),
        Err(error) => return Err(error),
    }
    st.emit(Event::FlowCompleted { flow: flow.name.clone() });
    st.session.flow = None;
    st.session.step = None;
    st.session.asks = 0;
    match successor::after_completion(flow, next_override) {
        Some(next) => {
            st.emit(Event::Routed { flow: flow_name(sv, next), reason: "complete.next" });
            start_run(st, sv, next);
            st.cursor = Cursor::EnterFlow(next, StepId(0));
        }
        None => st.stop_with(StopReason::FlowComplete),
    }
    Ok(())
}

fn abort_flow(st: &mut TurnState, sv: &Services) {
    if let Some(flow) = st.session.flow {
        st.emit(Event::FlowLeft { flow: flow_name(sv, flow), reason: "aborted".to_string() });
    }
    st.session.flow = None;
    st.session.step = None;
    st.session.asks = 0;
    st.stop_with(StopReason::Aborted);
}

pub(super) fn evaluate(
    st: &mut TurnState,
    sv: &mut Services,
    flow_id: FlowId,
    step_id: StepId,
    fresh: bool,
) -> Result<(), TurnError> {
    let program = sv.program;
    let Some((flow, step)) = locate(st, program, flow_id, step_id) else {
        return Ok(());
    };
    let reopened = !fresh && reopen_confirmation(st, program, flow, step, (flow_id, step_id));
    if fresh {
        clear_confirmations(st, program, flow, step);
    }
    if !st.needs_input(sv, step) {
        st.cursor = Cursor::Execute(flow_id, step_id);
        return Ok(());
    }
    // A reopened confirmation already holds the user's change of course
    // ("No, 3 guests"): asking it again with the new value is the
    // answer, not an AI entry that would ask for the value once more.
    if !fresh
        && !reopened
        && let Some(index) = interrupting_branch(st, sv, flow, step)
    {
        st.mark_executed(&step.name);
        take_branch(st, sv, flow_id, step_id, index);
        return Ok(());
    }
    if step.auto {
        // An auto step whose `requires` are unset cannot run and cannot
        // ask: the flow cannot go on.
        st.warn(format!("the auto step `{}` requires fields that are not set; the flow stops here", step.name));
        st.mark_executed(&step.name);
        st.stop_with(StopReason::NeedsInput);
        return Ok(());
    }
    if !fresh && st.session.asks >= step.max_asks {
        st.emit(Event::Warning {
            message: format!("`{}` asked {} times without an answer", step.name, st.session.asks),
        });
        match &step.on_no_answer {
            Some(directive) => {
                let source = Source::OnNoAnswer(format!("{}.{}", flow.name, step.name));
                let position = apply_step_directive(st, sv, directive, source);
                st.session.asks = 0;
                st.cursor = match position {
                    Some(position) => position_cursor(st, sv, position),
                    None => Cursor::Evaluate { flow: flow_id, step: step_id, fresh: true },
                };
            }
            None => {
                st.answer.says.push(format!(
                    "Sorry, I could not get an answer to that, so I stopped \"{}\".",
                    flow.title.clone().unwrap_or_else(|| flow.name.clone())
                ));
                st.cursor = Cursor::Abort;
            }
        }
        return Ok(());
    }
    if !fresh
        && !reopened
        && let Some(doubt) = st.reading.consent_doubt.take()
    {
        st.answer.says.push(format!("Just to be sure: {}.", doubt.clause()));
    }
    st.session.asks += 1;
    let ask = st.session.asks;
    st.emit(Event::StepAsked { flow: flow.name.clone(), step: step.name.clone(), ask });
    st.mark_executed(&step.name);
    st.answer.asking = Some((flow_id, step_id));
    if !run_step_hook(st, sv, flow, step, (flow_id, step_id), &step.prepare, "prepare")? {
        return Ok(());
    }
    st.answer.batch.push((flow_id, step_id));
    if apply_pre_positions(st, sv) {
        return Ok(());
    }
    st.session.offered = offer(st, program, step, (flow_id, step_id));
    if let Some(prompt) = &step.prompt {
        let text = st.render(sv, prompt);
        st.answer.instructions.push(text);
    }
    st.stop_with(StopReason::NeedsInput);
    Ok(())
}

/// The values a confirming step shows as it asks (after its `prepare`,
/// as its prompt renders them); `None` for a step that confirms nothing.
pub(super) fn offer(
    st: &TurnState,
    program: &Program,
    step: &Step,
    (flow, step_id): (FlowId, StepId),
) -> Option<Offered> {
    let fields = step.confirms(program);
    if fields.is_empty() {
        return None;
    }
    let values = fields
        .iter()
        .filter_map(|field| program.field(*field))
        .map(|declared| {
            let value = st.session.data.get(&declared.name).cloned().unwrap_or(Value::Null);
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
    st: &mut TurnState,
    program: &Program,
    flow: &Flow,
    step: &Step,
    at: (FlowId, StepId),
) -> bool {
    let Some(offered) = st.session.offered.take() else {
        return false;
    };
    if (offered.flow, offered.step) != at {
        return false;
    }
    let changed: Vec<String> = offered
        .values
        .iter()
        .filter(|(name, shown)| st.session.data.get(*name).unwrap_or(&Value::Null) != *shown)
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
        if matches!(declared.ty.kind, crate::ir::TypeKind::Bool) && st.session.data.remove(&declared.name).is_some() {
            cleared.push(declared.name.clone());
        }
    }
    // A new offer, not an unanswered one: it does not use up `max_asks`.
    st.session.asks = 0;
    st.emit(Event::ConfirmationReopened { flow: flow.name.clone(), step: step.name.clone(), changed, cleared });
    true
}

/// A confirmation answers only the step that asked it, on the visit
/// that asked it: a step that collects one, entered anew, starts
/// without it, whoever set it (another step collecting the same
/// field, an earlier visit, a "yes" to another question this turn).
fn clear_confirmations(st: &mut TurnState, program: &Program, flow: &Flow, step: &Step) {
    let mut cleared = Vec::new();
    for field in &step.collect {
        let Some(declared) = program.field(*field) else {
            continue;
        };
        if matches!(declared.ty.kind, crate::ir::TypeKind::Bool)
            && st.session.data.remove(&declared.name).is_some_and(|value| !value.is_null())
        {
            cleared.push(declared.name.clone());
        }
    }
    if !cleared.is_empty() {
        st.emit(Event::ConfirmationCleared { flow: flow.name.clone(), step: step.name.clone(), fields: cleared });
    }
}

pub(super) fn execute(
    st: &mut TurnState,
    sv: &mut Services,
    flow_id: FlowId,
    step_id: StepId,
) -> Result<(), TurnError> {
    let program = sv.program;
    let Some((flow, step)) = locate(st, program, flow_id, step_id) else {
        return Ok(());
    };
    if step.auto {
        if st.counters.auto_steps >= program.agent.limits.max_auto_steps {
            st.session.flow = Some(flow_id);
            st.session.step = Some(step_id);
            st.stop_with(StopReason::AutoStepLimit);
            return Ok(());
        }
        st.counters.auto_steps += 1;
    }
    // The step the message answers had its model call (and hooks) when
    // it asked; a conversation step entered this turn joins the batch.
    let answered = st.answering == (Some(flow_id), Some(step_id));
    let joins_batch = !step.auto && !answered;
    st.session.flow = Some(flow_id);
    st.session.step = Some(step_id);
    st.mark_executed(&step.name);
    st.counters.steps_executed += 1;
    let path = format!("{}.{}", flow.name, step.name);
    let source = ActionSource { kind: Source::Action, path: &path, numbered: true };
    match run_actions(st, sv, &step.actions, &source, false) {
        Ok(()) => {}
        Err(TurnError::Action(failure)) => return step_failed(st, sv, flow, step, flow_id, step_id, failure),
        Err(error) => return Err(error),
    }
    if joins_batch {
        if !run_step_hook(st, sv, flow, step, (flow_id, step_id), &step.prepare, "prepare")? {
            return Ok(());
        }
        st.answer.batch.push((flow_id, step_id));
    }
    if step.collect.is_empty()
        && let Some(prompt) = &step.prompt
    {
        let text = st.render(sv, prompt);
        st.answer.instructions.push(text);
    }
    if let Some(say) = &step.say {
        let text = st.render(sv, say);
        st.answer.says.push(text);
    }
    st.emit(Event::StepExecuted { flow: flow.name.clone(), step: step.name.clone() });
    st.counters.consecutive_errors = 0;
    if apply_pre_positions(st, sv) {
        return Ok(());
    }
    if let Some(wait_ms) = step.wait_ms {
        let resume = crate::runtime::clock::resume_time(sv.tool_env.clock.now(), wait_ms)
            .ok_or_else(|| TurnError::Wait(crate::runtime::clock::wait_out_of_range(wait_ms)))?;
        st.answer.resume_at = Some(resume.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        st.cursor = Cursor::Leave(flow_id, step_id);
        leave(st, sv, flow_id, step_id)?;
        // Park at the successor without entering it: the wait resumes there.
        if let Cursor::Enter(next_flow, next_step) = st.cursor {
            st.session.flow = Some(next_flow);
            st.session.step = Some(next_step);
        }
        st.stop_with(StopReason::Waiting);
        return Ok(());
    }
    st.cursor = Cursor::Leave(flow_id, step_id);
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
    st: &mut TurnState,
    sv: &Services,
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
    st.emit(Event::StepFailed { flow: flow.name.clone(), step: step.name.clone(), error: failure.to_string() });
    st.counters.consecutive_errors += 1;
    st.session.flow = Some(flow_id);
    st.session.step = Some(step_id);
    st.session.asks = 0;
    let Some(directive) = directive else {
        let title = flow.title.clone().unwrap_or_else(|| flow.name.clone());
        st.answer.says.push(format!("Sorry, something went wrong, so I stopped \"{title}\". Nothing more was done."));
        st.cursor = Cursor::Abort;
        return Ok(());
    };
    let source = Source::OnError(format!("{}.{}", flow.name, step.name));
    match apply_step_directive(st, sv, directive, source) {
        Some(position) => st.cursor = position_cursor(st, sv, position),
        None => st.stop_with(StopReason::NeedsInput),
    }
    Ok(())
}

/// Runs a step's `on_enter` or `prepare` hook. Its failure is the
/// step's: `on_error` answers it. Returns whether the hook ran; when it
/// did not, the failure has already moved the turn on.
pub(super) fn run_step_hook(
    st: &mut TurnState,
    sv: &mut Services,
    flow: &Flow,
    step: &Step,
    (flow_id, step_id): (FlowId, StepId),
    actions: &[crate::ir::Action],
    hook: &str,
) -> Result<bool, TurnError> {
    let path = format!("{}.{}.{hook}", flow.name, step.name);
    match run_hook(st, sv, actions, &path) {
        Ok(()) => Ok(true),
        Err(TurnError::Action(failure)) => {
            step_failed(st, sv, flow, step, flow_id, step_id, failure)?;
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

/// Applies a step's own directive (`on_no_answer`, `on_error`) at once:
/// records it, writes its data, says its `reply`; returns its position
/// for the caller to move by.
pub(super) fn apply_step_directive(
    st: &mut TurnState,
    sv: &Services,
    directive: &crate::ir::Directive,
    source: Source,
) -> Option<Move> {
    let emission = directive_emission(st, sv, directive, source);
    record(st, sv, &emission, true);
    let source_name = emission.source.to_string();
    apply_writes(st, sv, &emission.set, &emission.set_context, &source_name);
    if let Some(reply) = emission.reply.clone() {
        st.answer.says.push(reply);
    }
    emission.position
}
