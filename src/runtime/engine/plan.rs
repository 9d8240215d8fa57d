//! What a turn asks the model about: the signals that are open and the
//! AI conditions of the steps the turn can reach.

use super::conditions::{push_questions, reads_any};
use super::services::Services;
use super::state::TurnState;
use crate::ir::successor::{self, Landing};
use crate::ir::{Behavior, FieldId, FlowId, Phase, Program, StepId};
use crate::llm::Question;
use std::collections::BTreeSet;

/// Signals of these phases whose guard holds and whose behavior allows
/// another firing.
pub(super) fn open_signals(st: &TurnState, sv: &Services, program: &Program, phases: &[Phase]) -> Vec<usize> {
    let now = sv.tool_env.clock.now();
    program
        .signals
        .iter()
        .enumerate()
        .filter(|(_, signal)| phases.contains(&signal.phase) && !signal.when.is_empty())
        .filter(|(_, signal)| st.guard_passes(sv, &signal.guard))
        .filter(|(_, signal)| {
            let record = st.session.signals.get(&signal.name);
            match signal.behavior {
                Behavior::Always => true,
                Behavior::Once => record.is_none_or(|record| record.fired == 0),
                Behavior::Cooldown { cooldown_ms } => record
                    .and_then(|record| record.last_fired_at.as_deref())
                    .and_then(|last| chrono::DateTime::parse_from_rfc3339(last).ok())
                    .is_none_or(|last| {
                        let elapsed = now.signed_duration_since(last.with_timezone(&chrono::Utc));
                        elapsed.num_milliseconds() >= i64::try_from(cooldown_ms).unwrap_or(i64::MAX)
                    }),
            }
        })
        .map(|(index, _)| index)
        .collect()
}

/// The AI conditions this turn may reach that code has not ruled out:
/// branch entry and step `when`s of the steps the successor rule says
/// the turn can reach ([`successor::reachable`]) from where the
/// conversation is in the active flow, or from the given flows'
/// entries, in flow then list order. An entry whose code guard is
/// already false, and reads no field this turn may extract, cannot
/// match: its `when` is not asked.
pub(super) fn open_conditions(
    st: &TurnState,
    sv: &Services,
    program: &Program,
    flows: &[FlowId],
    extracting: &BTreeSet<FieldId>,
) -> Vec<Question> {
    let from: Vec<(FlowId, Landing)> = flows
        .iter()
        .map(|flow| match st.session.step {
            Some(step) if Some(*flow) == st.session.flow => (*flow, Landing::Step(step)),
            _ => (*flow, Landing::Enter(*flow, StepId(0))),
        })
        .collect();
    let reached = successor::reachable(program, &from);
    // The flows asked about first, then any other the turn may enter.
    let mut order: Vec<FlowId> = flows.to_vec();
    for (flow, _) in &reached {
        if !order.contains(flow) {
            order.push(*flow);
        }
    }
    let mut questions = Vec::new();
    for flow_id in order {
        let Some(flow) = program.flow(flow_id) else {
            continue;
        };
        for (index, step) in flow.steps.iter().enumerate() {
            if !reached.contains(&(flow_id, StepId::from_index(index))) {
                continue;
            }
            for (index, entry) in step.branches.iter().enumerate() {
                if entry.when.is_empty() {
                    continue;
                }
                let ruled_out = !entry.guard.is_empty()
                    && !reads_any(&entry.guard, extracting)
                    && !st.guard_passes(sv, &entry.guard);
                if ruled_out {
                    continue;
                }
                let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
                push_questions(&mut questions, &base, &entry.when);
            }
            if !step.when.is_empty() {
                let base = format!("{}.{}", flow.name, step.name);
                push_questions(&mut questions, &base, &step.when);
            }
        }
    }
    questions
}
