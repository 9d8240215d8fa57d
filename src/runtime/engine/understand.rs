//! Stages 2–3 of a turn: one model call understands the message (routing,
//! extraction, pre-phase signals, open AI conditions), code reads what it
//! can first, the proposals are grounded, and the turn is routed.

use super::ask::{ground, understand_or_nothing, write_extraction};
use super::plan::{open_conditions, open_signals};
use super::position::{position_cursor, start_run};
use super::services::Services;
use super::signals::{apply_pre_signal_directives, fire_pre_signals};
use super::state::{TurnState, flow_name};
use super::{Cursor, Stage, TurnError, confirmation_fields, field_spec};
use crate::ir::{FieldId, Flow, FlowId, Phase, Program, StepId};
use crate::llm::{FlowChoice, ProviderError, Question, UnderstandRequest};
use crate::runtime::events::{Event, Purpose, StopReason};
use crate::runtime::grounding;
use std::collections::BTreeSet;

pub(super) fn understand(st: &mut TurnState, sv: &mut Services) -> Result<(), TurnError> {
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
    let (mut request, signals) = understand_request(st, sv, program, &candidates, &routable);
    // Code reads first: what the rules read beyond doubt is taken as
    // read, and the model is asked only for the rest.
    let read_by_code = sv.reader.read(&request);
    request.fields.retain(|field| !read_by_code.contains_key(&field.name));
    if !request.is_empty() {
        st.reading.asked_signals = request.signals.iter().map(|question| question.id.clone()).collect();
        let mut understanding = match understand_or_nothing(st, sv, &request) {
            Ok(understanding) => understanding,
            // The turn's time ran out during the call. Nothing has acted
            // yet this turn, so it stops as the limit stops it, with
            // nothing understood, rather than failing.
            Err(TurnError::Provider(ProviderError::Timeout(reason))) => match st.limit_reached(sv) {
                Some(limit) => {
                    st.warn(format!("the understand call was cut off: {reason}"));
                    st.stop = Some(limit);
                    st.stage = Stage::Finish;
                    return Ok(());
                }
                None => return Err(ProviderError::Timeout(reason).into()),
            },
            Err(error) => return Err(error),
        };
        st.count_call(sv, Purpose::Understand, understanding.usage);
        ground(st, sv, &mut understanding);
        st.reading.understanding = understanding;
        if st.over_token_budget(sv) {
            st.stop = Some(StopReason::TokenLimit);
            st.stage = Stage::Finish;
            return Ok(());
        }
    }
    let certain: BTreeSet<String> = read_by_code.keys().cloned().collect();
    let asked = st.current_step(program).and_then(|step| match step.collect.as_slice() {
        [only] => program.field(*only).map(|declared| declared.name.clone()),
        _ => None,
    });
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
    let signal_emissions = fire_pre_signals(st, sv, program, &signals);
    let relevant = relevant_fields(st, program, route.map(|(flow, _)| flow).or(active));
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
    Ok(())
}

/// What the understand call asks: routing among the routable flows, the
/// fields this message may answer, the open AI conditions and the open
/// signals (pre-phase, and post-phase ones asked early). Returns the
/// request and the pre-phase signals it asks about.
fn understand_request(
    st: &mut TurnState,
    sv: &Services,
    program: &Program,
    candidates: &[FlowId],
    routable: &[FlowId],
) -> (UnderstandRequest, Vec<usize>) {
    let active = st.session.flow;
    // Fields: the current step's, the active flow's, and when no flow is
    // active (or another may take over), the candidates'.
    let mut fields: BTreeSet<FieldId> = BTreeSet::new();
    let current_step = st.current_step(program);
    if let Some(step) = current_step {
        fields.extend(step.collect.iter().chain(&step.requires).copied());
    }
    let extraction_flows: Vec<FlowId> = match active {
        Some(flow) => std::iter::once(flow).chain(routable.iter().copied()).collect(),
        None => candidates.to_vec(),
    };
    for flow in &extraction_flows {
        if let Some(declared) = program.flow(*flow) {
            fields.extend(declared.requires.iter().chain(&declared.optional).copied());
            if active.is_none()
                && let Some(entry) = declared.steps.first()
            {
                fields.extend(entry.collect.iter().copied());
            }
        }
    }
    let signals: Vec<usize> = open_signals(st, sv, program, &[Phase::Pre, Phase::Both]);
    // Post-phase signals ask about the same message: asking them here
    // saves a model call; the answer is used after the reply (their
    // guard is checked again then, and one that opens only later is
    // asked in a call of its own).
    let early_post: Vec<usize> =
        open_signals(st, sv, program, &[Phase::Post]).into_iter().filter(|signal| !signals.contains(signal)).collect();
    // Early post-phase answers need their `extract` fields asked too:
    // no later call asks them again.
    for signal in signals.iter().chain(&early_post) {
        if let Some(declared) = program.signals.get(*signal) {
            fields.extend(declared.extract.iter().copied());
        }
    }
    // Consent is never carried over: a confirmation (a `bool` some step
    // collects) is read only from the message answering the step that
    // asks for it, never ahead through `requires`, entry steps or
    // signal `extract`.
    let confirmations = confirmation_fields(program);
    fields.retain(|field| {
        !confirmations.contains(field) || current_step.is_some_and(|step| step.collect.contains(field))
    });
    let asked_alone: Option<FieldId> = current_step.and_then(|step| match step.collect.as_slice() {
        [only] => Some(*only),
        _ => None,
    });

    let condition_flows: Vec<FlowId> = match active {
        Some(flow) => vec![flow],
        None => candidates.to_vec(),
    };
    let conditions = open_conditions(st, sv, program, &condition_flows, &fields);

    let request = UnderstandRequest {
        message: st.message.clone(),
        history: st.history_window(),
        active_flow: active.map(|flow| flow_name(sv, flow)),
        flows: routable
            .iter()
            .filter(|flow| Some(**flow) != active)
            .filter_map(|flow| program.flow(*flow).map(|declared| flow_choice(program, declared)))
            .collect(),
        fields: fields
            .iter()
            .filter_map(|field| program.field(*field).map(|declared| (field, declared)))
            .map(|(field, declared)| field_spec(declared, asked_alone == Some(*field)))
            .collect(),
        conditions,
        signals: signals
            .iter()
            .chain(&early_post)
            .filter_map(|signal| program.signals.get(*signal))
            .map(|signal| Question { id: signal.name.clone(), when: signal.when.clone() })
            .collect(),
        today: sv.tool_env.clock.now().date_naive().to_string(),
        // Only this call is cut off at the turn's end: it comes before
        // any step acts. A later call cut off would fail a turn whose
        // steps already ran, and the next message would run them again.
        deadline: st.deadline(sv),
    };
    st.reading.asked_fields = fields;
    (request, signals)
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

/// The fields whose extracted values are written, as one unit: the
/// current step's, those of the flow the turn settles in, and the
/// `extract` fields of matched signals.
fn relevant_fields(st: &TurnState, program: &Program, settled_flow: Option<FlowId>) -> BTreeSet<FieldId> {
    let mut relevant: BTreeSet<FieldId> = BTreeSet::new();
    if let Some(step) = st.current_step(program) {
        relevant.extend(step.collect.iter().chain(&step.requires).copied());
    }
    if let Some(flow) = settled_flow.and_then(|flow| program.flow(flow)) {
        relevant.extend(flow.requires.iter().chain(&flow.optional).copied());
        if st.session.flow.is_none()
            && let Some(entry) = flow.steps.first()
        {
            relevant.extend(entry.collect.iter().copied());
        }
    }
    for signal in &program.signals {
        if st.reading.understanding.signals.get(&signal.name).is_some_and(|answer| answer.yes) {
            relevant.extend(signal.extract.iter().copied());
        }
    }
    relevant
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

pub(super) fn flow_choice(program: &Program, flow: &Flow) -> FlowChoice {
    let mut examples = Vec::new();
    for field in flow.requires.iter().chain(&flow.optional) {
        if let Some(declared) = program.field(*field) {
            examples.extend(declared.ty.examples.iter().cloned());
        }
    }
    FlowChoice { name: flow.name.clone(), title: flow.title.clone(), when: flow.when.clone(), examples }
}
