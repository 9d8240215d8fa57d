//! What a model request carries of the conversation: the session's
//! summary, then at most `agent.history.keep_last` messages after it. With
//! `summarize`, the messages a request would leave out (older than the
//! last `keep_last`, or the oldest of them when the provider would drop
//! them to fit the model's context window, `llm::context`) are first
//! summarised by one model call (a reply call with the summary
//! instruction, so it is recorded and replayed as one), folded into the
//! earlier summary, kept in the session and sent in their place: nothing
//! is cut. A summary folds more than the request must leave out: half of
//! what would still be sent goes too, so the turns after it need no
//! summary call until `keep_last` or the window is outgrown again. Every
//! request that carries history (understand, reply, the post-phase
//! signals') carries the summary.
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
        // Each provider counts what its window leaves out; what
        // `keep_last` cuts is counted by `summarize`.
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
    st.session.model_history(keep_last(sv))
}

fn keep_last(sv: &Services) -> usize {
    usize::try_from(sv.program.agent.history.keep_last).unwrap_or(usize::MAX)
}

/// How many of `messages` (the session's messages after the summary) a
/// summary folds when a request leaves out `needed` of them (past
/// `keep_last`, or past the window): those, and
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

/// How many of the session's messages after its summary a request leaves
/// out because `keep_last` cuts them: with `summarize`, these are folded
/// into the summary too rather than lost.
fn cut_by_keep_last(st: &TurnState, sv: &Services) -> usize {
    st.session.unsummarised().len().saturating_sub(keep_last(sv))
}

/// Folds into the session's summary, with one model call, the messages
/// that `keep_last` cuts and the first `left_out` of `history` (after the
/// summary that leads it, if any) that the window leaves out, and half of
/// the rest ([`to_fold`]), and gives `history` the new summary in their
/// place. One call folds at most `keep_last` messages, so the summary
/// request stays bounded; what a session holds beyond that is folded by
/// the next turns' calls (what it keeps between turns:
/// [`crate::runtime::session::Session::keep_history`]). The last `tail`
/// messages of `history` are this turn's, not yet in the session: they are
/// not folded and stay at the end. A call
/// that fails or answers nothing is traced, and the request is trimmed as
/// it would be without `summarize`.
fn summarize(st: &mut TurnState, sv: &mut Services, history: &mut Vec<Message>, left_out: usize, tail: usize) {
    let led = usize::from(st.session.summary.is_some());
    let cut = cut_by_keep_last(st, sv);
    let folded = to_fold(st.session.unsummarised().len(), cut + left_out.saturating_sub(led)).min(keep_last(sv).max(1));
    if folded == 0 {
        return;
    }
    let Some(dropped) = st.session.unsummarised().get(..folded) else {
        return;
    };
    let through = st.session.history.len().saturating_sub(st.session.unsummarised().len()) + folded;
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
    st.session.summary = Some(HistorySummary { text, through });
    st.emit(Event::HistorySummarized { messages: folded, through });
    let this_turn = history.split_off(history.len().saturating_sub(tail));
    *history = carried(st, sv);
    history.extend(this_turn);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
