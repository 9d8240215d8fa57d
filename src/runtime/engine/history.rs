//! What a model request carries of the conversation: the session's
//! summary, then at most `agent.history.keep_last` messages after it. With
//! `summarize`, when the provider would leave the oldest of them out to fit
//! the model's context window (`llm::context`), they are first summarised
//! by one model call (a reply call with the summary instruction, so it is
//! recorded and replayed as one), folded into the earlier summary, kept in
//! the session and sent in their place.

use super::services::Services;
use super::state::TurnState;
use crate::llm::context::summary::summary_request;
use crate::llm::{ModelReply, ReplyRequest, UnderstandRequest};
use crate::message::Message;
use crate::runtime::events::{Event, Purpose};
use crate::runtime::session::HistorySummary;

/// Gives the understand request its history, summarising first when the
/// window would cut it.
pub(super) fn fit_understand(st: &mut TurnState, sv: &mut Services, request: &mut UnderstandRequest) {
    request.history = carried(st, sv);
    if sv.program.agent.history.summarize {
        let left_out = sv.provider.understand_left_out(request);
        summarize(st, sv, &mut request.history, left_out);
    }
}

/// Gives the reply request its history, as [`fit_understand`].
pub(super) fn fit_reply(st: &mut TurnState, sv: &mut Services, request: &mut ReplyRequest) {
    request.history = carried(st, sv);
    if sv.program.agent.history.summarize {
        let left_out = sv.provider.reply_left_out(request);
        summarize(st, sv, &mut request.history, left_out);
    }
}

fn carried(st: &TurnState, sv: &Services) -> Vec<Message> {
    let keep_last = usize::try_from(sv.program.agent.history.keep_last).unwrap_or(usize::MAX);
    st.session.model_history(keep_last)
}

/// Folds the first `left_out` messages of `history` (after the summary that
/// leads it, if any) into the session's summary with one model call, and
/// gives `history` the new summary in their place. A call that fails or
/// answers nothing is traced, and the provider trims as it would without
/// `summarize`.
fn summarize(st: &mut TurnState, sv: &mut Services, history: &mut Vec<Message>, left_out: usize) {
    let led = usize::from(st.session.summary.is_some());
    let messages = history.len().saturating_sub(led);
    let folded = left_out.saturating_sub(led).min(messages);
    if folded == 0 {
        return;
    }
    let Some(dropped) = history.get(led..led + folded) else {
        return;
    };
    let previous = st.session.summary.as_ref().map(|summary| summary.text.clone());
    let request = summary_request(previous.as_deref(), dropped);
    let text = match sv.provider.reply(&request, &[], &mut |_| {}) {
        Ok(ModelReply::Done(response)) => {
            st.count_call(sv, Purpose::Summarize, response.usage);
            response.text.trim().to_string()
        }
        // No tools are offered: a call for one answers nothing.
        Ok(ModelReply::ToolCalls(calls)) => {
            st.count_call(sv, Purpose::Summarize, calls.usage);
            String::new()
        }
        Err(error) => {
            st.warn(format!("the history could not be summarised ({error}); its oldest messages are left out"));
            return;
        }
    };
    if text.is_empty() {
        st.warn("the history summary came back empty; its oldest messages are left out");
        return;
    }
    // `history` ends with the session's last messages: the first one
    // after the summary is this far from the end.
    let first = st.session.history.len().saturating_sub(messages);
    let through = first + folded;
    st.session.summary = Some(HistorySummary { text, through });
    st.emit(Event::HistorySummarized { messages: folded, through });
    *history = carried(st, sv);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
