//! Asking the model to understand a message, and taking what it read:
//! a call whose answer was unusable reads as nothing understood, the
//! proposals are grounded in the message, and the extracted values are
//! written all or none.

use super::TurnError;
use super::services::Services;
use super::state::TurnState;
use crate::ir::{FieldId, Program};
use crate::llm::{ProviderError, ReplyStream, UnderstandRequest, Understanding, Usage};
use crate::runtime::events::Event;
use crate::runtime::grounding;
use crate::runtime::validate::validate;
use serde_json::Value;
use std::collections::BTreeSet;

/// Asks the model to understand; an answer that is still invalid after
/// the provider's repair proposes nothing code could check, so the turn
/// goes on as if the model had understood nothing: the step asks again
/// instead of the turn failing. A weak model that rambles past its
/// token limit then costs the user a question, not the conversation.
/// Every other failure (network, authentication, cancellation) still
/// fails the turn and leaves the session as it was.
///
/// A request that asks for the fused reply too and does not fit the
/// model's context window is asked again without it: the reply is then
/// asked for in a call of its own, as without the fused call.
pub(super) fn understand_or_nothing(
    st: &mut TurnState,
    sv: &mut Services,
    request: &mut UnderstandRequest,
) -> Result<Understanding, TurnError> {
    understand_with_reply(st, sv, request).map(|(understanding, _)| understanding)
}

/// [`understand_or_nothing`], streamed when the request asks for the
/// fused reply: the call returns once the extraction is written, with the
/// reply still arriving (dropping it cancels the rest of the call).
pub(super) fn understand_with_reply(
    st: &mut TurnState,
    sv: &mut Services,
    request: &mut UnderstandRequest,
) -> Result<(Understanding, Option<ReplyStream>), TurnError> {
    let ask = |sv: &mut Services, request: &UnderstandRequest| match request.reply {
        Some(_) => {
            sv.provider.understand_streamed(request).map(|understood| (understood.understanding, understood.reply))
        }
        None => sv.provider.understand(request).map(|understanding| (understanding, None)),
    };
    let answer = match ask(sv, request) {
        Err(ProviderError::ContextOverflow(reason)) if request.reply.is_some() => {
            st.warn(format!("the understand call asked without the reply, which did not fit: {reason}"));
            request.reply = None;
            request.prefix.writer = None;
            ask(sv, request)
        }
        answer => answer,
    };
    match answer {
        Ok(answer) => Ok(answer),
        Err(ProviderError::InvalidOutput(reason)) => {
            st.warn(format!("the model's answer was unusable and was set aside: {reason}"));
            Ok((Understanding { usage: Usage { calls: 1, ..Usage::default() }, ..Understanding::default() }, None))
        }
        Err(error) => Err(error.into()),
    }
}

/// Checks the model's proposals against the user's message
/// (`grounding`): what the message does not back is dropped and traced.
pub(super) fn ground(st: &mut TurnState, sv: &Services, understanding: &mut Understanding) {
    let program = sv.program;
    let today = sv.tool_env.clock.now().date_naive();
    for event in grounding::ground(program, understanding, &st.message, Some(today)) {
        st.emit(event);
    }
}

/// Writes the extracted values of `relevant` fields, all or none.
pub(super) fn write_extraction(st: &mut TurnState, program: &Program, relevant: &BTreeSet<FieldId>) {
    let mut staged: Vec<(String, Value)> = Vec::new();
    let mut rejected = false;
    let extracted = std::mem::take(&mut st.reading.understanding.fields);
    for (name, proposal) in &extracted {
        let value = &proposal.value;
        if value.is_null() {
            continue;
        }
        let Some(field_id) = program.field_by_name(name) else {
            st.warn(format!("the model extracted `{name}`, which is not a field; ignored"));
            continue;
        };
        if !st.reading.asked_fields.contains(&field_id) || !relevant.contains(&field_id) {
            continue;
        }
        let Some(field) = program.field(field_id) else {
            continue;
        };
        match validate(value, &field.ty) {
            Ok(valid) => staged.push((name.clone(), valid)),
            Err(reason) => {
                rejected = true;
                st.emit(Event::ExtractionRejected { field: name.clone(), value: value.clone(), reason });
            }
        }
    }
    st.reading.understanding.fields = extracted;
    if rejected {
        st.warn("the extracted values were not written: one of them is invalid");
        return;
    }
    for (name, value) in staged {
        st.emit(Event::Extracted { field: name.clone(), value: value.clone() });
        st.reading.extracted.insert(name.clone());
        st.session.data.insert(name, value);
    }
}
