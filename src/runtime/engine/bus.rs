//! The directive bus: running actions and hooks, validating and applying
//! writes, and recording every directive. The layer every stage below
//! the turn's positions builds on; it moves no cursor.

use super::TurnError;
use super::services::Services;
use super::state::TurnState;
use crate::runtime::actions::{ActionOutput, ActionRunner, ActionSource, evaluate_directive};
use crate::runtime::directive::{Emission, Source, describe};
use crate::runtime::events::{DirectiveRecord, Event};
use crate::runtime::validate::validate;
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
    sv: &Services,
    actions: &[crate::ir::Action],
    source: &ActionSource<'_>,
) -> Result<ActionOutput, TurnError> {
    let mut data = st.session.data.clone();
    let mut out = ActionOutput::default();
    let result = {
        let runner =
            ActionRunner { program: sv.program, tools: sv.tools, tool_env: sv.tool_env, steps: &[], model: None };
        runner.run(actions, source, &mut data, &st.session.context, &mut Vec::new(), &mut out)
    };
    for event in std::mem::take(&mut out.tool_calls) {
        st.emit(event);
    }
    for warning in std::mem::take(&mut out.warnings) {
        st.warn(warning);
    }
    result?;
    st.session.data = data;
    Ok(out)
}

/// Runs a step's `do` (or a pre-model hook): writes commit together,
/// says join the reply, emissions join the pre-model bus.
pub(super) fn run_actions(
    st: &mut TurnState,
    sv: &Services,
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
    sv: &Services,
    actions: &[crate::ir::Action],
    path: &str,
) -> Result<(), TurnError> {
    let source = ActionSource { kind: Source::Hook, path, numbered: false };
    run_actions(st, sv, actions, &source, false)
}

pub(super) fn run_post_hook(
    st: &mut TurnState,
    sv: &Services,
    actions: &[crate::ir::Action],
    path: &str,
) -> Result<(), TurnError> {
    let source = ActionSource { kind: Source::Hook, path, numbered: false };
    run_actions(st, sv, actions, &source, true)
}

/// Validates writes as one unit and applies them, or none of them.
pub(super) fn apply_writes(
    st: &mut TurnState,
    sv: &Services,
    set: &[(String, Value)],
    set_context: &[(String, Value)],
    source: &str,
) {
    let program = sv.program;
    let mut staged: Vec<(bool, String, Value)> = Vec::new();
    for (is_context, writes) in [(false, set), (true, set_context)] {
        for (name, value) in writes {
            let declared = if is_context {
                program.context.iter().find(|key| key.name == *name)
            } else {
                program.fields.iter().find(|field| field.name == *name)
            };
            let Some(declared) = declared else {
                st.warn(format!("{source}: `{name}` is not declared; the writes were not applied"));
                return;
            };
            match validate(value, &declared.ty) {
                Ok(valid) => staged.push((is_context, name.clone(), valid)),
                Err(reason) => {
                    st.warn(format!("{source}: `{name}` {reason}; the writes were not applied"));
                    return;
                }
            }
        }
    }
    for (is_context, name, value) in staged {
        let target = if is_context { &mut st.session.context } else { &mut st.session.data };
        if value.is_null() {
            target.remove(&name);
        } else {
            target.insert(name, value);
        }
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
