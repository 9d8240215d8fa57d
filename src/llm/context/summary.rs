//! The history summary's request and message: what the summary call asks
//! (a reply call with one fixed instruction, so every provider, recorder
//! and replay handles it as a reply), and how the summary is shown to the
//! model in place of the messages it replaced.

use crate::llm::ReplyRequest;
use crate::message::{Message, Role};

/// The summary call's one instruction; the offline provider recognises a
/// summary request by it.
pub const SUMMARY_INSTRUCTION: &str = "Summarise the conversation above for your own later use, in at most five \
     short sentences: what the user asked for, every value they gave (names, dates, numbers) and what is still \
     open. Start from the earlier summary, if there is one. Write only the summary.";

/// What the summary call's user message says.
const SUMMARY_ASK: &str = "Summarise the conversation so far.";

/// How the summary leads the history a request carries.
pub const SUMMARY_LEAD: &str = "(Summary of the earlier conversation) ";

/// The summary call: `previous` (the summary so far, if any) and the
/// messages to fold into it, oldest first.
pub fn summary_request(previous: Option<&str>, dropped: &[Message]) -> ReplyRequest {
    let mut history: Vec<Message> = previous.map(summary_message).into_iter().collect();
    history.extend(dropped.iter().cloned());
    ReplyRequest {
        instructions: vec![SUMMARY_INSTRUCTION.to_string()],
        history,
        message: SUMMARY_ASK.to_string(),
        ..ReplyRequest::default()
    }
}

/// Whether `request` is a summary call's.
pub fn is_summary_request(request: &ReplyRequest) -> bool {
    request.instructions.len() == 1 && request.instructions.first().is_some_and(|text| text == SUMMARY_INSTRUCTION)
}

/// The summary as the first message of a request's history.
pub fn summary_message(text: &str) -> Message {
    Message { role: Role::Assistant, text: format!("{SUMMARY_LEAD}{text}") }
}

/// The summary text of a history message made by [`summary_message`].
pub fn summary_text(message: &Message) -> Option<&str> {
    message.text.strip_prefix(SUMMARY_LEAD).filter(|_| message.role == Role::Assistant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_request_folds_the_previous_summary_and_the_dropped_messages() {
        let dropped = vec![Message { role: Role::User, text: "The Grand Hotel".into() }];
        let request = summary_request(Some("The user books a room."), &dropped);
        assert!(is_summary_request(&request));
        assert_eq!(request.history.len(), 2);
        assert_eq!(request.history.first().and_then(summary_text), Some("The user books a room."));
        assert_eq!(request.history.get(1), dropped.first());
        assert!(!is_summary_request(&ReplyRequest::default()));
    }
}
