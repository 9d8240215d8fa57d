//! The offline provider's history summary: deterministic, from the
//! messages alone. The earlier summary comes first, then what the user
//! said in the messages folded in (each quoted, clipped) and the last
//! thing the assistant asked, in a fixed form, so the call counts and the
//! summary a session keeps are testable without a model.

use crate::llm::ReplyRequest;
use crate::llm::context::summary::{is_summary_request, summary_text};
use crate::message::Role;

/// The most characters of one message a summary quotes.
const QUOTED_CHARS: usize = 80;
/// The most characters a summary keeps: the newest part, past that.
const SUMMARY_CHARS: usize = 800;

/// The summary, when `request` is a summary call's.
pub(super) fn answer(request: &ReplyRequest) -> Option<String> {
    if !is_summary_request(request) {
        return None;
    }
    let mut messages = request.history.as_slice();
    let previous = messages.first().and_then(summary_text);
    if previous.is_some() {
        messages = messages.get(1..).unwrap_or_default();
    }
    let said: Vec<String> = messages
        .iter()
        .filter(|message| message.role == Role::User)
        .map(|message| format!("\"{}\"", clipped(&message.text, QUOTED_CHARS)))
        .collect();
    let asked = messages.iter().rev().find(|message| message.role == Role::Assistant);
    let mut summary = previous.map(str::to_string).unwrap_or_default();
    if !said.is_empty() {
        let lead = if summary.is_empty() { "The user said" } else { " Then the user said" };
        summary.push_str(&format!("{lead}: {}.", said.join("; ")));
    }
    if let Some(asked) = asked {
        summary.push_str(&format!(" Last asked: \"{}\".", clipped(&asked.text, QUOTED_CHARS)));
    }
    Some(newest(summary.trim(), SUMMARY_CHARS))
}

/// `text` on one line, cut to `limit` characters with an ellipsis.
fn clipped(text: &str, limit: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= limit {
        return line;
    }
    let cut: String = line.chars().take(limit).collect();
    format!("{}…", cut.trim_end())
}

/// The last `limit` characters of `text`, after an ellipsis when cut.
fn newest(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    if count <= limit {
        return text.to_string();
    }
    let kept: String = text.chars().skip(count - limit).collect();
    format!("…{}", kept.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::context::summary::summary_request;
    use crate::message::Message;

    fn message(role: Role, text: &str) -> Message {
        Message { role, text: text.to_string() }
    }

    #[test]
    fn the_summary_quotes_the_user_and_the_last_question_after_the_earlier_summary() {
        let dropped = [
            message(Role::User, "Hi, I'd like to book a hotel room"),
            message(Role::Assistant, "Which hotel would you like to book?"),
            message(Role::User, "The Grand Hotel, please"),
            message(Role::Assistant, "For which date?"),
        ];
        let first = answer(&summary_request(None, &dropped)).unwrap_or_default();
        assert_eq!(
            first,
            "The user said: \"Hi, I'd like to book a hotel room\"; \"The Grand Hotel, please\". \
             Last asked: \"For which date?\"."
        );
        let later = answer(&summary_request(Some(&first), &[message(Role::User, "2026-12-04")])).unwrap_or_default();
        assert_eq!(later, format!("{first} Then the user said: \"2026-12-04\"."));
        assert_eq!(answer(&ReplyRequest::default()), None, "not a summary call");
    }

    #[test]
    fn a_long_summary_keeps_its_newest_part() {
        let long = "word ".repeat(400);
        let summary = answer(&summary_request(Some(&long), &[message(Role::User, "the end")])).unwrap_or_default();
        assert_eq!(summary.chars().count(), SUMMARY_CHARS + 1);
        assert!(summary.starts_with('…') && summary.ends_with("\"the end\"."), "{summary}");
    }
}
