//! Stages 2–3 of a turn: one model call understands the message (routing,
//! extraction, pre-phase signals, open AI conditions), code reads what it
//! can first, the proposals are grounded, and the turn is routed.

use super::ask::{ground, understand_with_reply, write_extraction};
use super::fused;
use super::plan::{TurnPlan, session_prefix};
use super::position::{position_cursor, start_run};
use super::services::Services;
use super::signals::{apply_pre_signal_directives, fire_pre_signals};
use super::state::{Fused, TurnState, flow_name};
use super::{Cursor, Stage, StageDone, StageOutcome, TurnError};
use crate::ir::{FlowId, Program, StepId};
use crate::llm::{ProviderError, UnderstandRequest};
use crate::runtime::events::{Event, Purpose, StopReason};
use crate::runtime::grounding;
use std::collections::BTreeSet;

/// Understands the message by the turn's plan and routes the turn: the
/// cursor is where resolution starts.
pub(super) fn understand(st: &mut TurnState, sv: &mut Services) -> Result<StageOutcome, TurnError> {
    let program = sv.program;
    let active = st.session.flow;
    let candidates: Vec<FlowId> = (0..program.flows.len())
        .map(FlowId::from_index)
        .filter(|flow| {
            program.flow(*flow).is_some_and(|declared| !declared.workflow && st.guard_passes(sv, &declared.guard))
        })
        .collect();
    let routable: Vec<FlowId> = candidates
        .iter()
        .copied()
        .filter(|flow| program.flow(*flow).is_some_and(|declared| !declared.when.is_empty()))
        .collect();
    let plan = TurnPlan::build(st, sv, &candidates, &routable);
    let mut request = understand_request(st, sv, &plan, &routable);
    st.reading.asked_fields = plan.ask.fields.clone();
    // Code reads first: what the rules read beyond doubt is taken as
    // read, and the model is asked only for the rest.
    let read_by_code = sv.reader.read(&request);
    request.fields.retain(|field| !read_by_code.contains_key(&field.name));
    let ask = request.reply.take();
    request.reply = ask.and_then(|ask| fused::with_code_reads(ask, &read_by_code, &request));
    // The fused reply rides only on a call the turn makes anyway.
    if !request.is_empty() {
        super::history::fit_understand(st, sv, &mut request);
        st.reading.asked_signals = request.signals.iter().map(|question| question.id.clone()).collect();
        let (mut understanding, streaming) = match understand_with_reply(st, sv, &mut request) {
            Ok(answer) => answer,
            // The turn's time ran out during the call. Nothing has acted
            // yet this turn, so it stops as the limit stops it, with
            // nothing understood, rather than failing.
            Err(TurnError::Provider(ProviderError::Timeout(reason))) => match st.limit_reached(sv) {
                Some(limit) => {
                    st.warn(format!("the understand call was cut off: {reason}"));
                    st.stop = Some(limit);
                    st.stage = Stage::Finish;
                    return Ok(StageOutcome::Done(StageDone::Understood));
                }
                None => return Err(ProviderError::Timeout(reason).into()),
            },
            Err(error) => return Err(error),
        };
        st.count_call(sv, Purpose::Understand, understanding.usage);
        // Grounding and resolving go on while the fused reply streams.
        st.reading.fused = request.reply.take().map(|ask| {
            Fused::new(ask, understanding.reply.take(), &understanding.fields)
                .streaming(streaming)
                .dropped(understanding.reply_dropped.take())
        });
        ground(st, sv, &mut understanding);
        st.reading.understanding = understanding;
        if st.over_token_budget(sv) {
            st.stop = Some(StopReason::TokenLimit);
            st.stage = Stage::Finish;
            return Ok(StageOutcome::Done(StageDone::Understood));
        }
    }
    let certain: BTreeSet<String> = read_by_code.keys().cloned().collect();
    let asked = plan.ask.asked_alone.and_then(|field| program.field(field)).map(|declared| declared.name.clone());
    for (name, proposal) in read_by_code {
        let evidence = proposal.evidence.clone().unwrap_or_default();
        st.emit(Event::ReadByCode { field: name.clone(), value: proposal.value.clone(), evidence });
        st.reading.understanding.fields.insert(name, proposal);
    }
    for event in
        grounding::one_field_per_span(&mut st.reading.understanding.fields, &certain, asked.as_deref(), &st.message)
    {
        st.emit(event);
    }
    ground_consent(st, program);
    let route = choose_route(st, program, &candidates, &routable);

    // Pre-phase signals (step 3): they run before routing takes effect.
    let signal_emissions = fire_pre_signals(st, sv, &plan.pre_signals);
    let relevant = plan.relevant(program, route.map(|(flow, _)| flow).or(active), &st.reading.understanding);
    write_extraction(st, program, &relevant);
    let signal_position = apply_pre_signal_directives(st, sv, &signal_emissions);

    if let Some(position) = signal_position {
        st.cursor = position_cursor(st, sv, position);
    } else if let Some((flow, reason)) = route {
        if active.is_some() {
            st.emit(Event::FlowLeft {
                flow: flow_name(sv, active.unwrap_or(flow)),
                reason: format!("routed to `{}`", flow_name(sv, flow)),
            });
        }
        st.emit(Event::Routed { flow: flow_name(sv, flow), reason });
        start_run(st, sv, flow);
        st.cursor = Cursor::EnterFlow(flow, StepId(0));
    } else {
        st.cursor = st.current_cursor();
    }
    st.stage = Stage::Resolve;
    Ok(StageOutcome::Done(StageDone::Understood))
}

/// What the understand call asks, by the turn's plan: routing among the
/// routable flows, the fields this message may answer, the open AI
/// conditions and the open signals (pre-phase, and post-phase ones asked
/// early).
fn understand_request(st: &TurnState, sv: &Services, plan: &TurnPlan, routable: &[FlowId]) -> UnderstandRequest {
    let program = sv.program;
    let active = st.session.flow;
    let signals: Vec<usize> = plan.pre_signals.iter().chain(&plan.early_post).copied().collect();
    UnderstandRequest {
        message: st.message.clone(),
        history: st.history_window(),
        conditions: plan.conditions.clone(),
        today: sv.tool_env.clock.now().date_naive().to_string(),
        // The operator may turn the fused reply off (`fused_reply = false`).
        reply: if sv.provider.fused_reply() { fused::reply_ask(st, sv, plan) } else { None },
        prefix: session_prefix(st, sv),
        // Only this call is cut off at the turn's end: it comes before
        // any step acts. A later call cut off would fail a turn whose
        // steps already ran, and the next message would run them again.
        deadline: st.deadline(sv),
        ..plan.ask.request(program, active, routable, &signals)
    }
}

/// The routing decision: the flow the turn moves to and why (`when`,
/// `if` or `default`), or `None` to stay where the conversation is.
fn choose_route(
    st: &mut TurnState,
    program: &Program,
    candidates: &[FlowId],
    routable: &[FlowId],
) -> Option<(FlowId, &'static str)> {
    let active = st.session.flow;
    let current_step = st.current_step(program);
    let understood_flow = st
        .reading
        .understanding
        .flow
        .clone()
        .and_then(|name| program.flow_by_name(&name))
        .filter(|flow| routable.contains(flow));
    if let Some(name) = st.reading.understanding.flow.clone()
        && understood_flow.is_none()
    {
        st.warn(format!("the model routed to `{name}`, which is not a candidate; ignored"));
    }
    let answered_current = current_step.is_some_and(|step| {
        step.collect.iter().any(|field| {
            program.field(*field).is_some_and(|declared| st.reading.understanding.fields.contains_key(&declared.name))
        })
    });
    match (active, understood_flow) {
        (Some(active), Some(flow)) if flow != active && !answered_current => Some((flow, "when")),
        (Some(_), _) => None,
        (None, Some(flow)) => Some((flow, "when")),
        (None, None) => candidates
            .iter()
            .copied()
            .find(|flow| {
                program.flow(*flow).is_some_and(|declared| declared.when.is_empty() && !declared.guard.is_empty())
            })
            .map(|flow| (flow, "if"))
            .or_else(|| program.default_flow.filter(|flow| candidates.contains(flow)).map(|flow| (flow, "default"))),
    }
}

/// Holds the answers to the confirmations the asking step collects to
/// the consent rule (`grounding::ground_consent`).
fn ground_consent(st: &mut TurnState, program: &Program) {
    let confirmations: Vec<String> = st
        .current_step(program)
        .map(|step| {
            step.collect
                .iter()
                .filter_map(|field| program.field(*field))
                .filter(|declared| matches!(declared.ty.kind, crate::ir::TypeKind::Bool))
                .map(|declared| declared.name.clone())
                .collect()
        })
        .unwrap_or_default();
    // What the question showed: its values and the names of their
    // fields, which a yes may repeat without adding to it.
    let shown: Vec<String> = st
        .session
        .offered
        .iter()
        .flat_map(|offered| &offered.values)
        .flat_map(|(name, value)| {
            let value = match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            [name.replace('_', " "), value]
        })
        .collect();
    let (events, doubt) =
        grounding::ground_consent(&confirmations, &mut st.reading.understanding.fields, &st.message, &shown);
    for event in events {
        st.emit(event);
    }
    st.reading.consent_doubt = doubt;
}
