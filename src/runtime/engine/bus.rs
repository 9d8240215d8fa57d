//! The directive bus: running actions and hooks, validating and applying
//! writes, and recording every directive. The layer every stage below
//! the turn's positions builds on; it moves no cursor.

use super::TurnError;
use super::services::Services;
use super::state::TurnState;
use crate::runtime::actions::{ActionOutput, ActionRunner, ActionSource, evaluate_directive};
use crate::runtime::directive::{Emission, Source, describe};
use crate::runtime::events::{DirectiveRecord, Event, Purpose};
use crate::runtime::model_step::{Budget, Lent};
use crate::runtime::writes::PhaseWrites;
use serde_json::Value;

/// Evaluates a directive against the turn's data now; its warnings join
/// the trace.
pub(super) fn directive_emission(
    st: &mut TurnState,
    sv: &Services,
    directive: &crate::ir::Directive,
    source: Source,
) -> Emission {
    let mut warnings = Vec::new();
    let emission = evaluate_directive(directive, source, &st.scope(sv), &mut warnings);
    for warning in warnings {
        st.warn(warning);
    }
    emission
}

pub(super) fn action_runner_output(
    st: &mut TurnState,
    sv: &mut Services,
    actions: &[crate::ir::Action],
    source: &ActionSource<'_>,
) -> Result<ActionOutput, TurnError> {
    let mut data = st.session.data.clone();
    let mut out = ActionOutput::default();
    // The model steps among the actions ask the turn's provider, within
    // what is left of the turn's token budget and time.
    let budget = Budget {
        calls: None,
        tokens: sv
            .program
            .agent
            .limits
            .max_turn_tokens
            .map(|limit| (limit.saturating_sub(st.counters.usage.total_tokens()), "agent.limits.max_turn_tokens")),
    };
    let deadline = st.deadline(sv);
    let model = Lent::new(&mut *sv.provider, budget, deadline);
    let result = {
        let runner = ActionRunner {
            program: sv.program,
            tools: sv.tools,
            tool_env: sv.tool_env,
            steps: &[],
            model: Some(&model),
        };
        runner.run(actions, source, &mut data, &st.session.context, &mut Vec::new(), &mut out)
    };
    let (calls, _) = model.spent();
    for usage in calls {
        st.count_call(sv, Purpose::ModelStep, usage);
    }
    for event in std::mem::take(&mut out.tool_calls) {
        st.emit(event);
    }
    for warning in std::mem::take(&mut out.warnings) {
        st.warn(warning);
    }
    result?;
    // The emitter's own `set`s join its phase: taken now, so that what
    // runs next reads them, and undone with the phase when a write of it
    // (what this emitter emits included) is bad.
    st.writes.adopt(&mut st.session.data, data);
    Ok(out)
}

/// Runs a step's `do` (or a hook): its `set`s join the phase (undone with
/// it when a write of the phase is bad); says join the reply,
/// emissions join the pre-model bus (the post-model one with `post`).
pub(super) fn run_actions(
    st: &mut TurnState,
    sv: &mut Services,
    actions: &[crate::ir::Action],
    source: &ActionSource<'_>,
    post: bool,
) -> Result<(), TurnError> {
    if actions.is_empty() {
        return Ok(());
    }
    let out = action_runner_output(st, sv, actions, source)?;
    st.answer.says.extend(out.says);
    for emission in out.emissions {
        let directive = describe(&emission, sv.program);
        st.emit(Event::DirectiveEmitted { source: emission.source.to_string(), directive });
        if post {
            st.bus.post.push(emission);
        } else {
            st.bus.push_pre(emission, None);
        }
    }
    Ok(())
}

pub(super) fn run_hook(
    st: &mut TurnState,
    sv: &mut Services,
    actions: &[crate::ir::Action],
    path: &str,
) -> Result<(), TurnError> {
    let source = ActionSource { kind: Source::Hook, path, numbered: false };
    run_actions(st, sv, actions, &source, false)
}

pub(super) fn run_post_hook(
    st: &mut TurnState,
    sv: &mut Services,
    actions: &[crate::ir::Action],
    path: &str,
) -> Result<(), TurnError> {
    let source = ActionSource { kind: Source::Hook, path, numbered: false };
    run_actions(st, sv, actions, &source, true)
}

/// Applies one emitter's writes to the turn's open phase
/// ([`crate::runtime::writes::PhaseWrites`]): the one place every
/// directive write of a turn (pending, signals, branches, `goto`, the pre-
/// and post-model buses) goes through. A bad write undoes the whole phase;
/// the phase's end names every bad write ([`end_phase`]).
pub(super) fn apply_writes(
    st: &mut TurnState,
    sv: &Services,
    set: &[(String, Value)],
    set_context: &[(String, Value)],
    source: &str,
) {
    let session = &mut st.session;
    st.writes.apply(sv.program, (set, set_context), &|_| source.to_string(), &mut session.data, &mut session.context);
}

/// Applies the merged writes of several emissions, as [`apply_writes`]; a
/// bad write is named with the emission whose write won the field.
pub(super) fn apply_merged(
    st: &mut TurnState,
    sv: &Services,
    emissions: &[Emission],
    set: &[(String, Value)],
    set_context: &[(String, Value)],
) {
    let emitter = |shown: &str| {
        let (context, name) = match shown.strip_prefix("context.") {
            Some(key) => (true, key),
            None => (false, shown),
        };
        emissions
            .iter()
            .rev()
            .find(|emission| {
                let writes = if context { &emission.set_context } else { &emission.set };
                writes.iter().any(|(written, _)| written == name)
            })
            .map(|emission| emission.source.to_string())
            .unwrap_or_default()
    };
    let session = &mut st.session;
    st.writes.apply(sv.program, (set, set_context), &emitter, &mut session.data, &mut session.context);
}

/// The turn's open phase ends and `next` begins: when a write of the
/// phase was bad (and the phase undone), one `data_validation` event
/// names each bad write with its emitter, and the valid writes undone.
pub(super) fn end_phase(st: &mut TurnState, next: &'static str) {
    let ended = std::mem::replace(&mut st.writes, PhaseWrites::open(next));
    let source = ended.name().to_string();
    if let Some(refused) = ended.close() {
        st.emit(Event::DataValidation { source, fields: refused.invalid, undone: refused.undone });
    }
}

/// Records a directive in the trace; returns the index of its record.
pub(super) fn record(st: &mut TurnState, sv: &Services, emission: &Emission, applied: bool) -> usize {
    let directive = describe(emission, sv.program);
    if applied {
        st.emit(Event::DirectiveApplied { source: emission.source.to_string() });
    }
    st.trace.records.push(DirectiveRecord { source: emission.source.to_string(), directive, applied });
    st.trace.records.len() - 1
}
