//! What a model request carries of the conversation: the session's
//! summary, then at most `agent.history.keep_last` messages after it. With
//! `summarize`, when the provider would leave the oldest of them out to fit
//! the model's context window (`llm::context`), they are first summarised
//! by one model call (a reply call with the summary instruction, so it is
//! recorded and replayed as one), folded into the earlier summary, kept in
//! the session and sent in their place. A summary folds more than the
//! request must leave out: half of what would still fit goes too, so the
//! turns after it fit without another summary call until the window fills
//! again. Every request that carries history (understand, reply, the
//! post-phase signals') carries the summary.

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
    fit_understand_with(st, sv, request, Vec::new());
}

/// Gives the post-phase signals' request its history, as
/// [`fit_understand`], followed by this turn's `exchange` (the message and
/// the reply, which the session's history does not hold yet).
pub(super) fn fit_post_signals(
    st: &mut TurnState,
    sv: &mut Services,
    request: &mut UnderstandRequest,
    exchange: Vec<Message>,
) {
    fit_understand_with(st, sv, request, exchange);
}

fn fit_understand_with(st: &mut TurnState, sv: &mut Services, request: &mut UnderstandRequest, tail: Vec<Message>) {
    let kept = tail.len();
    request.history = carried(st, sv);
    request.history.extend(tail);
    if sv.program.agent.history.summarize {
        let left_out = sv.provider.understand_left_out(request);
        summarize(st, sv, &mut request.history, left_out, kept);
    }
}

/// Gives the reply request its history, as [`fit_understand`].
pub(super) fn fit_reply(st: &mut TurnState, sv: &mut Services, request: &mut ReplyRequest) {
    request.history = carried(st, sv);
    if sv.program.agent.history.summarize {
        let left_out = sv.provider.reply_left_out(request);
        summarize(st, sv, &mut request.history, left_out, 0);
    }
}

fn carried(st: &TurnState, sv: &Services) -> Vec<Message> {
    let keep_last = usize::try_from(sv.program.agent.history.keep_last).unwrap_or(usize::MAX);
    st.session.model_history(keep_last)
}

/// How many of `messages` (the session's messages a request carries) a
/// summary folds when the window leaves out `needed` of them: those, and
/// half of the rest. Folding only what one request must leave out would
/// make the next turn's request (two messages longer) need a summary
/// again: once the window is full, a summary call before most calls.
/// Folding half of what fits leaves room for about a quarter as many
/// turns as the window holds messages before the next one, while the
/// newest messages (the question the user answers) are still sent word
/// for word, which a summary of everything would not do.
pub(super) fn to_fold(messages: usize, needed: usize) -> usize {
    let needed = needed.min(messages);
    if needed == 0 {
        return 0;
    }
    needed + (messages - needed) / 2
}

/// Folds the first `left_out` messages of `history` (after the summary that
/// leads it, if any), and half of the rest ([`to_fold`]), into the
/// session's summary with one model call, and gives `history` the new
/// summary in their place. The last `tail` messages of `history` are this
/// turn's, not yet in the session: they are not folded and stay at the
/// end. A call that fails or answers nothing is traced, and the provider
/// trims as it would without `summarize`.
fn summarize(st: &mut TurnState, sv: &mut Services, history: &mut Vec<Message>, left_out: usize, tail: usize) {
    let led = usize::from(st.session.summary.is_some());
    let messages = history.len().saturating_sub(led + tail);
    let folded = to_fold(messages, left_out.saturating_sub(led));
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
    let this_turn = history.split_off(history.len().saturating_sub(tail));
    *history = carried(st, sv);
    history.extend(this_turn);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
