//! Signals: firing one, applying the pre-phase ones before routing acts,
//! and the post-phase signals asked after the reply, armed for the next
//! turn.

use super::ask::{ground, understand_or_nothing, write_extraction};
use super::bus::{apply_merged, directive_emission, record};
use super::plan::{StaticAsk, open_signals};
use super::services::Services;
use super::state::TurnState;
use super::{Stage, StageDone, StageOutcome, TurnError};
use crate::ir::{FieldId, Phase, Program, Signal};
use crate::llm::{UnderstandRequest, Understanding};
use crate::message::{Message, Role};
use crate::runtime::directive::{Emission, Move, Source, describe, merge};
use crate::runtime::events::{DirectiveRecord, Event, Purpose, StopReason};
use std::collections::BTreeSet;

/// A signal matched, before the reply (`pre`) or after it (`post`): it
/// is traced, its firing counts for its `behavior`, and its `then` is
/// evaluated now, with the data as it is at this moment.
fn fire_signal(st: &mut TurnState, sv: &Services, signal: &Signal, phase: &'static str) -> Option<Emission> {
    st.emit(Event::SignalMatched { signal: signal.name.clone(), phase });
    let now = sv.tool_env.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let record = st.session.signals.entry(signal.name.clone()).or_default();
    record.fired += 1;
    record.last_fired_at = Some(now);
    let directive = signal.then.as_ref()?;
    Some(directive_emission(st, sv, directive, Source::Signal(signal.name.clone())))
}

/// Fires the pre-phase signals of `signals` the understanding answered
/// yes; their directives are merged by the caller before routing acts.
pub(super) fn fire_pre_signals(st: &mut TurnState, sv: &Services, signals: &[usize]) -> Vec<Emission> {
    let program = sv.program;
    let mut emissions = Vec::new();
    for signal in signals.iter().filter_map(|signal| program.signals.get(*signal)) {
        if !st.reading.understanding.signals.get(&signal.name).is_some_and(|answer| answer.yes) {
            continue;
        }
        emissions.extend(fire_signal(st, sv, signal, "pre"));
    }
    emissions
}

/// Applies the directives of the pre-phase signals that fired, merged:
/// their writes now, their reply and augmentation on the pre-model bus.
/// Returns the winning position, which overrides routing.
pub(super) fn apply_pre_signal_directives(
    st: &mut TurnState,
    sv: &Services,
    signal_emissions: &[Emission],
) -> Option<Move> {
    let merged = merge(signal_emissions);
    for warning in &merged.warnings {
        st.warn(warning.clone());
    }
    let mut records = Vec::new();
    for (index, emission) in signal_emissions.iter().enumerate() {
        let applied =
            merged.position.as_ref().is_none_or(|(_, winner)| *winner == index) || emission.position.is_none();
        let recorded = record(st, sv, emission, applied);
        records.push(emission.position.is_none().then_some(recorded));
    }
    apply_merged(st, sv, signal_emissions, &merged.set, &merged.set_context);
    st.bus.halt |= merged.halt;
    if merged.reply.is_some() || !merged.append_prompt.is_empty() || !merged.inject_tools.is_empty() {
        // Augmentation is layered on top of the turn: it joins the
        // pre-model bus (already recorded above).
        // A reply the merge dropped (an abort won) must not come back
        // when the whole bus is merged again before the model call.
        let keep_replies = merged.reply.is_some();
        for (emission, record) in signal_emissions.iter().zip(records) {
            let augmentation = Emission {
                position: None,
                reply: emission.reply.clone().filter(|_| keep_replies),
                set: Vec::new(),
                set_context: Vec::new(),
                ..emission.clone()
            };
            st.bus.push_pre(augmentation, record);
        }
        st.bus.pre_applied = st.bus.pre.len();
    }
    merged.position.map(|(position, _)| position)
}

pub(super) fn post_signals(st: &mut TurnState, sv: &mut Services) -> Result<StageOutcome, TurnError> {
    st.stage = Stage::Finish;
    if matches!(st.stop, Some(StopReason::TokenLimit | StopReason::TimeLimit)) {
        return Ok(StageOutcome::Done(StageDone::PostSignals));
    }
    let program = sv.program;
    let signals = open_signals(st, sv, &[Phase::Post, Phase::Both]);
    if signals.is_empty() {
        return Ok(StageOutcome::Done(StageDone::PostSignals));
    }
    let early_answers = st.reading.understanding.signals.clone();
    // A signal the understand call asked is not asked again, even when
    // that answer was set aside: a model that could not answer the
    // message once is not asked about it in one more call.
    let unanswered: Vec<usize> = signals
        .iter()
        .copied()
        .filter(|signal| {
            program.signals.get(*signal).is_some_and(|declared| !st.reading.asked_signals.contains(&declared.name))
        })
        .collect();
    let ask = StaticAsk::after_reply(program, &unanswered);
    // The signals asked here opened during the turn: they see the reply
    // they are about (a yes still cites the user's words).
    let mut exchange = vec![Message { role: Role::User, text: st.message.clone() }];
    let reply = if st.answer.reply.is_empty() { st.answer.says.join("\n") } else { st.answer.reply.clone() };
    if !reply.is_empty() {
        exchange.push(Message { role: Role::Assistant, text: reply });
    }
    let mut request = UnderstandRequest {
        message: st.message.clone(),
        // Given below, with the summary as the other calls carry it.
        history: Vec::new(),
        today: sv.tool_env.clock.now().date_naive().to_string(),
        reply: None,
        // After the steps acted: see `understand_request`.
        deadline: None,
        prefix: super::plan::session_prefix(st, sv),
        ..ask.request(program, st.session.flow, &[], &unanswered)
    };
    let answer = if request.signals.is_empty() {
        Understanding::default()
    } else {
        super::history::fit_post_signals(st, sv, &mut request, exchange);
        let mut answer = understand_or_nothing(st, sv, &mut request)?;
        st.count_call(sv, Purpose::PostSignals, answer.usage);
        ground(st, sv, &mut answer);
        answer
    };
    let mut armed = Vec::new();
    let mut extracting: BTreeSet<FieldId> = BTreeSet::new();
    for signal in signals.iter().filter_map(|signal| program.signals.get(*signal)) {
        let matched = answer.signals.get(&signal.name).or_else(|| early_answers.get(&signal.name));
        if !matched.is_some_and(|answer| answer.yes) {
            continue;
        }
        // The pre half of a `both` signal answered yes about this same
        // message and has fired already: firing again would arm the
        // same directive for the next turn.
        if signal.phase == Phase::Both && early_answers.get(&signal.name).is_some_and(|answer| answer.yes) {
            continue;
        }
        if answer.signals.contains_key(&signal.name) {
            extracting.extend(signal.extract.iter().copied());
        }
        armed.extend(fire_signal(st, sv, signal, "post"));
    }
    // Only the fields of the signals that matched are written.
    st.reading.asked_fields = ask.fields;
    st.reading.understanding.fields = answer.fields;
    write_extraction(st, program, &extracting);
    if !armed.is_empty() {
        arm_pending(st, program, &armed);
    }
    Ok(StageOutcome::Done(StageDone::PostSignals))
}

/// Merges the directives of the post-phase signals that fired into the
/// one the next turn applies first; they are recorded as not applied
/// (yet), and their augmentation, which could only act before a model
/// call, is dropped.
fn arm_pending(st: &mut TurnState, program: &Program, armed: &[Emission]) {
    let merged = merge(armed);
    let mut pending = Emission::new(Source::Armed(armed.iter().map(|emission| emission.source.clone()).collect()));
    pending.position = merged.position.map(|(position, _)| position);
    pending.reply = merged.reply.map(|(reply, _)| reply);
    pending.set = merged.set;
    pending.set_context = merged.set_context;
    for emission in armed {
        if emission.has_augmentation() {
            st.warn(format!(
                "{}: halt, append_prompt and inject_tools of a post-phase signal are dropped",
                emission.source
            ));
        }
        st.trace.records.push(DirectiveRecord {
            source: emission.source.to_string(),
            directive: describe(emission, program),
            applied: false,
        });
    }
    st.session.pending = Some(pending);
}
