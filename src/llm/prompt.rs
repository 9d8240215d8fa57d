//! The prompts of the two calls, built only from the request.
//!
//! Each prompt has a stable part and a dynamic part. The stable part (the
//! task, the agent's identity and rules, the flow catalogue, the answer
//! format) is the same on every turn of a session, and comes first: OpenAI
//! and local servers cache a repeated prefix automatically, and the
//! Anthropic provider marks it with `cache_control`. What changes each turn
//! (fields, questions, instructions, data, history, the message) comes last.
//!
//! Prompts are compact on purpose: a small local model reads a 1,500-token
//! prompt in 7 to 20 seconds, and every token is paid for on a hosted one.

use crate::llm::{FieldSpec, Question, ReplyAsk, ReplyRequest, UnderstandRequest};
use crate::message::{Message, Role};
use std::fmt::Write as _;

/// A prompt in two parts: `stable` is the cacheable prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub stable: String,
    pub dynamic: String,
}

/// How the understand answer is constrained, which decides what the prompt
/// must say about its format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerFormat {
    /// The server enforces the schema: the prompt need not show it.
    Enforced,
    /// The answer goes through a forced tool call named `tool`.
    Tool(&'static str),
    /// Nothing enforces the schema: the prompt shows the expected shape.
    Described,
}

/// The understand prompt: `stable` for the system message, `dynamic` for
/// the user message. With the request's [`PromptPrefix`](crate::llm::PromptPrefix) set, the stable
/// part lists the whole flow catalogue and the fused reply's task, so it
/// is byte-identical on every turn of a session (routing turns, turns
/// inside a flow, turns that ask for no reply); the turn says which flows
/// it offers and which steps it may stop at in the dynamic part.
pub fn understand(request: &UnderstandRequest, format: AnswerFormat) -> Prompt {
    let prefix = &request.prefix;
    let whole_catalogue = !prefix.catalogue.is_empty();
    let mut stable = String::from(
        "You read the latest user message of a conversation and report what it says. \
         Report only what the user said; never guess.\n\
         - flow: the flow the message asks for, from the list below, or null when none fits.\n\
         - fields: for each field the latest message gives, its evidence (the user's words, copied \
         exactly) and its value (dates as YYYY-MM-DD); else null.\n\
         - conditions, signals: yes true, with the user's words that show it as evidence, only when \
         the description clearly holds for the message; else yes false and evidence null.\n\
         Evidence is checked against the latest user message: anything it does not show is ignored.\n",
    );
    let catalogue = if whole_catalogue { &prefix.catalogue } else { &request.flows };
    if !catalogue.is_empty() {
        stable.push_str("Flows:\n");
        for flow in catalogue {
            let _ = write!(stable, "- {}", flow.name);
            if let Some(title) = &flow.title {
                let _ = write!(stable, " ({title})");
            }
            if !flow.when.is_empty() {
                let _ = write!(stable, ": {}", flow.when.join("; or "));
            }
            if !flow.examples.is_empty() {
                let _ = write!(stable, ". Examples: {}", quoted_list(&flow.examples));
            }
            stable.push('\n');
        }
    }
    if let Some(writer) = &prefix.writer {
        stable.push_str(
            "When the answer has `step` and `reply`, write them last, after everything else: name the step the \
             conversation stops at and write the assistant's next message to the user:\n",
        );
        write_reply_task(&mut stable, writer.identity.as_deref(), &writer.rules);
    }
    match format {
        AnswerFormat::Enforced => stable.push_str("Answer with the JSON object only.\n"),
        AnswerFormat::Tool(name) => {
            let _ = writeln!(stable, "Answer by calling the `{name}` tool.");
        }
        AnswerFormat::Described => {
            stable.push_str("Answer with one JSON object only, no other text, in the shape given below.\n");
        }
    }

    let mut dynamic = format!("Today is {}.", request.today);
    if let Some(flow) = &request.active_flow {
        let _ = write!(dynamic, " Current flow: {flow}.");
    }
    dynamic.push('\n');
    if whole_catalogue && !request.flows.is_empty() {
        let names: Vec<&str> = request.flows.iter().map(|flow| flow.name.as_str()).collect();
        let _ = writeln!(dynamic, "Flows offered: {}.", names.join(", "));
    }
    if !request.history.is_empty() {
        dynamic.push_str("Conversation so far:\n");
        for message in &request.history {
            let _ = writeln!(dynamic, "{}: {}", role_name(message.role), one_line(&message.text));
        }
    }
    if !request.fields.is_empty() {
        dynamic.push_str("Fields:\n");
        for field in &request.fields {
            let _ = write!(dynamic, "- {}", describe_field(field));
            // The value the fused reply's known data holds: a field the
            // message may change is reported only when it does (a weak
            // model that repeats it changes nothing).
            let known =
                request.reply.as_ref().and_then(|ask| ask.data.get(&field.name)).filter(|value| !value.is_null());
            if let Some(value) = known {
                let _ = write!(dynamic, ". Now {value}: report it only if the latest message changes it");
            }
            dynamic.push('\n');
        }
    }
    write_questions(&mut dynamic, "Conditions (true or false)", &request.conditions);
    write_questions(&mut dynamic, "Signals (true or false)", &request.signals);
    if let Some(ask) = &request.reply {
        match &prefix.writer {
            // The task, the identity and the agent's rules are in the
            // prefix: only the rules of the steps' flows are the turn's.
            Some(writer) => {
                let rules: Vec<String> =
                    ask.rules.iter().filter(|rule| !writer.rules.contains(rule)).cloned().collect();
                if !rules.is_empty() {
                    dynamic.push_str("Rules of these steps:\n");
                    write_list(&mut dynamic, &rules);
                }
            }
            // Without a prefix the task goes with the request, in the
            // per-turn part: a turn that asks no reply does not carry it.
            None => {
                dynamic.push_str(
                    "Then, after everything else, name the step the conversation stops at and write the \
                     assistant's next message to the user:\n",
                );
                write_reply_task(&mut dynamic, ask.identity.as_deref(), &ask.rules);
            }
        }
        write_reply_steps(&mut dynamic, ask);
    }
    if format == AnswerFormat::Described {
        let _ = writeln!(dynamic, "Answer shape: {}", crate::llm::schema::answer_sketch(request));
    }
    let _ = write!(dynamic, "Latest user message: {}", quoted(&request.message));
    Prompt { stable, dynamic }
}

/// The fused call's task: the reply after the rest, by the assistant the
/// program describes.
fn write_reply_task(text: &mut String, identity: Option<&str>, rules: &[String]) {
    text.push_str(
        "- step: of the steps listed below for the flow the conversation is in after the latest message, \
         the first whose missing fields that message does not all give (that step asks for them); null \
         when there is none.\n\
         - reply: that step's question, copied as written or lightly rephrased, in the user's language, and \
         nothing more; keep each {{name}} exactly as written: code puts in the value of field name. null when \
         step is null.\n",
    );
    if let Some(identity) = identity {
        let _ = writeln!(text, "The assistant: {}", one_line(identity));
    }
    if !rules.is_empty() {
        text.push_str("The assistant's rules:\n");
        write_list(text, rules);
    }
}

/// The steps the turn may stop at, and what is known, in the dynamic part.
fn write_reply_steps(text: &mut String, ask: &ReplyAsk) {
    if !ask.data.is_empty() {
        let data = serde_json::Value::Object(ask.data.clone());
        let _ = writeln!(text, "Known data: {data}");
    }
    text.push_str("Steps, in order:\n");
    for step in &ask.steps {
        let _ =
            writeln!(text, "- {} (missing: {}), question: {}", step.id, step.missing.join(", "), quoted(&step.prompt));
    }
    // A small model copies a concrete ending better than it follows a
    // description of one.
    if let Some(first) = ask.steps.first() {
        let _ = writeln!(
            text,
            "When the latest message gives none of the missing fields, the answer ends: \"step\": {}, \"reply\": {}}}",
            quoted(&first.id),
            quoted(&first.prompt)
        );
    }
}

/// What follows an invalid understand answer: the error, and the request
/// to answer again.
pub fn repair(error: &str) -> String {
    format!("That answer is invalid: {error}. Answer again, correctly, with the whole answer.")
}

fn describe_field(field: &FieldSpec) -> String {
    let mut text = format!("{} ({})", field.name, kind_words(field));
    if let Some(description) = &field.description {
        let _ = write!(text, ": {description}");
    }
    if !field.examples.is_empty() {
        let _ = write!(text, ". Examples: {}", quoted_list(&field.examples));
    }
    if field.asked {
        text.push_str(". Just asked: the whole message may be its value");
    }
    text
}

fn kind_words(field: &FieldSpec) -> String {
    let mut words = match field.kind.as_str() {
        "enum" if !field.values.is_empty() => format!("one of: {}", field.values.join(", ")),
        "date" => "date YYYY-MM-DD".to_string(),
        "datetime" => "date and time".to_string(),
        "int" => "integer".to_string(),
        "float" => "number".to_string(),
        "bool" => "yes/no".to_string(),
        "string" => "text".to_string(),
        other => other.to_string(),
    };
    match (field.min, field.max) {
        (Some(min), Some(max)) => {
            let _ = write!(words, ", {min} to {max}");
        }
        (Some(min), None) => {
            let _ = write!(words, ", at least {min}");
        }
        (None, Some(max)) => {
            let _ = write!(words, ", at most {max}");
        }
        (None, None) => {}
    }
    if let Some(pattern) = &field.pattern {
        let _ = write!(words, ", matching {pattern}");
    }
    words
}

fn write_questions(text: &mut String, heading: &str, questions: &[Question]) {
    if questions.is_empty() {
        return;
    }
    let _ = writeln!(text, "{heading}:");
    for question in questions {
        let _ = writeln!(text, "- {}: {}", question.id, question.when.join("; or "));
    }
}

/// The reply prompt: `stable` then `dynamic` form the system prompt; the
/// history and the message follow as chat messages ([`conversation`]).
pub fn reply_prompt(request: &ReplyRequest) -> Prompt {
    let mut stable = request.identity.clone().unwrap_or_else(|| "You are a helpful assistant.".to_string());
    stable.push('\n');
    if !request.rules.is_empty() {
        stable.push_str("Rules:\n");
        write_list(&mut stable, &request.rules);
    }
    stable.push_str(
        "Write your next message to the user: short, natural, in the user's language, \
         doing what the instructions below ask and nothing more.\n",
    );

    let mut dynamic = String::new();
    if !request.flow_rules.is_empty() {
        dynamic.push_str("Rules of this task:\n");
        write_list(&mut dynamic, &request.flow_rules);
    }
    if !request.data.is_empty() {
        let data = serde_json::Value::Object(request.data.clone());
        let _ = writeln!(dynamic, "Known data: {data}");
    }
    if !request.said.is_empty() {
        dynamic.push_str("Already said to the user this turn (continue from it, do not repeat it):\n");
        write_list(&mut dynamic, &request.said);
    }
    if request.instructions.is_empty() && request.appended.is_empty() {
        dynamic.push_str("Instructions: answer the user's message.\n");
    } else {
        dynamic.push_str("Instructions:\n");
        write_list(&mut dynamic, &request.instructions);
        write_list(&mut dynamic, &request.appended);
    }
    Prompt { stable, dynamic }
}

/// The chat turns of a reply call: the history, then the message. An
/// empty message (a turn started by the agent) becomes a neutral cue, as
/// both APIs want the conversation to end with the user.
pub fn conversation(request: &ReplyRequest) -> Vec<Message> {
    let mut messages = request.history.clone();
    let text = if request.message.trim().is_empty() { "(continue)".to_string() } else { request.message.clone() };
    messages.push(Message { role: Role::User, text });
    messages
}

fn write_list(text: &mut String, items: &[String]) {
    for item in items {
        let _ = writeln!(text, "- {}", one_line(item));
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

fn quoted_list(items: &[String]) -> String {
    items.iter().map(|item| quoted(item)).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::schema::tests::booking_request;

    #[test]
    fn understand_prompt_is_compact_and_stable_first() {
        let mut request = booking_request();
        if let Some(field) = request.fields.first_mut() {
            field.description = Some("Name of the hotel".into());
            field.examples = vec!["Grand Hotel".into(), "Overlook".into()];
            field.asked = true;
        }
        if let Some(field) = request.fields.get_mut(2) {
            field.min = Some(1.0);
            field.max = Some(10.0);
        }
        let prompt = understand(&request, AnswerFormat::Enforced);
        assert_eq!(
            prompt.stable,
            "You read the latest user message of a conversation and report what it says. Report only what the user said; never guess.
- flow: the flow the message asks for, from the list below, or null when none fits.
- fields: for each field the latest message gives, its evidence (the user's words, copied exactly) and its value (dates as YYYY-MM-DD); else null.
- conditions, signals: yes true, with the user's words that show it as evidence, only when the description clearly holds for the message; else yes false and evidence null.
Evidence is checked against the latest user message: anything it does not show is ignored.
Flows:
- booking (Book a hotel room): the user wants to book a hotel room. Examples: \"Grand Hotel\"
- support: the user has a problem
Answer with the JSON object only.
"
        );
        assert_eq!(
            prompt.dynamic,
            "Today is 2026-01-05. Current flow: booking.
Conversation so far:
assistant: Which hotel?
Fields:
- hotel (text): Name of the hotel. Examples: \"Grand Hotel\", \"Overlook\". Just asked: the whole message may be its value
- date (date YYYY-MM-DD)
- guests (integer, 1 to 10)
Conditions (true or false):
- booking.confirm#2: the user wants to change the date
Signals (true or false):
- wants_human: the user asks for a human agent
Latest user message: \"Ritz Paris, the 3rd of June, for two\""
        );
    }

    #[test]
    fn the_stable_part_does_not_depend_on_the_turn() {
        let first = booking_request();
        let mut second = booking_request();
        second.message = "tomorrow".into();
        second.fields.truncate(1);
        second.conditions.clear();
        second.today = "2026-01-06".into();
        let format = AnswerFormat::Described;
        assert_eq!(understand(&first, format).stable, understand(&second, format).stable);
        assert_ne!(understand(&first, format).dynamic, understand(&second, format).dynamic);
    }

    #[test]
    fn the_fused_reply_is_asked_in_the_per_turn_part_after_the_questions() {
        let fused = crate::llm::schema::tests::fused_request();
        let plain = understand(&booking_request(), AnswerFormat::Enforced);
        let prompt = understand(&fused, AnswerFormat::Enforced);
        assert_eq!(prompt.stable, plain.stable, "the cacheable prefix does not depend on the reply asked");
        // A field the known data holds is reported only when the message
        // changes it.
        let now = ". Now \"Ritz Paris\": report it only if the latest message changes it\n";
        assert!(prompt.dynamic.contains(&format!("- hotel (text){now}")), "{}", prompt.dynamic);
        let dynamic = prompt.dynamic.replacen(now, "\n", 1);
        let asked = dynamic.strip_prefix(plain.dynamic.split("Latest user message").next().unwrap()).unwrap();
        assert_eq!(
            asked,
            "Then, after everything else, name the step the conversation stops at and write the assistant's next message to the user:
- step: of the steps listed below for the flow the conversation is in after the latest message, the first whose missing fields that message does not all give (that step asks for them); null when there is none.
- reply: that step's question, copied as written or lightly rephrased, in the user's language, and nothing more; keep each {{name}} exactly as written: code puts in the value of field name. null when step is null.
The assistant: You are a concierge.
Known data: {\"hotel\":\"Ritz Paris\"}
Steps, in order:
- booking.ask_date (missing: date), question: \"For which date?\"
- booking.confirm (missing: confirmed), question: \"Book {{hotel}} on {{date}}?\"
When the latest message gives none of the missing fields, the answer ends: \"step\": \"booking.ask_date\", \"reply\": \"For which date?\"}
Latest user message: \"Ritz Paris, the 3rd of June, for two\""
        );
    }

    #[test]
    fn with_the_sessions_prefix_the_stable_part_is_the_same_on_every_kind_of_turn() {
        let catalogue = booking_request().flows;
        let prefix = crate::llm::PromptPrefix {
            catalogue: catalogue.clone(),
            writer: Some(crate::llm::ReplyWriter {
                identity: Some("You are a concierge.".into()),
                rules: vec!["Be brief.".into()],
            }),
        };
        // A routing turn (every flow offered, no reply), a turn inside a
        // flow asking for the reply (no flow offered), a confirmation.
        let routing = UnderstandRequest { prefix: prefix.clone(), active_flow: None, ..booking_request() };
        let mut fused = crate::llm::schema::tests::fused_request();
        fused.flows.clear();
        fused.prefix = prefix.clone();
        if let Some(ask) = fused.reply.as_mut() {
            ask.rules = vec!["Be brief.".into(), "Dates in full.".into()];
        }
        let confirm = UnderstandRequest { prefix, flows: Vec::new(), message: "yes".into(), ..booking_request() };
        for format in [AnswerFormat::Enforced, AnswerFormat::Described, AnswerFormat::Tool("t")] {
            let stable = understand(&routing, format).stable;
            assert_eq!(understand(&fused, format).stable, stable, "{format:?}");
            assert_eq!(understand(&confirm, format).stable, stable, "{format:?}");
            assert!(stable.contains("- support: the user has a problem"));
            assert!(stable.contains("The assistant: You are a concierge.\nThe assistant's rules:\n- Be brief.\n"));
        }
        let offered = understand(&routing, AnswerFormat::Enforced).dynamic;
        assert!(offered.starts_with("Today is 2026-01-05.\nFlows offered: booking, support.\n"), "{offered}");
        let dynamic = understand(&fused, AnswerFormat::Enforced).dynamic;
        assert!(!dynamic.contains("Flows offered"));
        // Only the rules the prefix does not hold, then the steps.
        assert!(
            dynamic.contains(
                "Rules of these steps:\n- Dates in full.\nKnown data: {\"hotel\":\"Ritz Paris\"}\nSteps, in order:\n"
            ),
            "{dynamic}"
        );
        assert!(!dynamic.contains("The assistant:"));
    }

    #[test]
    fn described_format_shows_the_answer_shape() {
        let prompt = understand(&booking_request(), AnswerFormat::Described);
        assert!(prompt.dynamic.contains("Answer shape: {\"flow\": \"booking\" | \"support\" | null"));
        let tool = understand(&booking_request(), AnswerFormat::Tool("record_understanding"));
        assert!(tool.stable.ends_with("Answer by calling the `record_understanding` tool.\n"));
        assert!(!tool.dynamic.contains("Answer shape"));
    }

    #[test]
    fn reply_prompt_puts_identity_and_rules_first() {
        let mut data = serde_json::Map::new();
        data.insert("hotel".into(), "Ritz Paris".into());
        let request = ReplyRequest {
            identity: Some("You are the concierge of the Grand Hotel group.".into()),
            rules: vec!["Never promise a room before the booking tool confirms it.".into()],
            flow_rules: vec!["Keep answers short.".into()],
            instructions: vec!["For which date?".into()],
            appended: vec!["Mention the spa.".into()],
            said: vec!["Welcome back!".into()],
            history: vec![],
            message: "Ritz Paris".into(),
            data,
            tools: vec![],
            tools_spent: false,
            deadline: None,
        };
        let prompt = reply_prompt(&request);
        assert_eq!(
            prompt.stable,
            "You are the concierge of the Grand Hotel group.
Rules:
- Never promise a room before the booking tool confirms it.
Write your next message to the user: short, natural, in the user's language, doing what the instructions below ask and nothing more.
"
        );
        assert_eq!(
            prompt.dynamic,
            "Rules of this task:
- Keep answers short.
Known data: {\"hotel\":\"Ritz Paris\"}
Already said to the user this turn (continue from it, do not repeat it):
- Welcome back!
Instructions:
- For which date?
- Mention the spa.
"
        );
        assert_eq!(conversation(&request), vec![Message { role: Role::User, text: "Ritz Paris".into() }]);
    }

    #[test]
    fn empty_reply_request_still_reads_well() {
        let prompt = reply_prompt(&ReplyRequest::default());
        assert!(prompt.stable.starts_with("You are a helpful assistant.\nWrite your next message"));
        assert_eq!(prompt.dynamic, "Instructions: answer the user's message.\n");
        assert_eq!(conversation(&ReplyRequest::default()).first().map(|m| m.text.as_str()), Some("(continue)"));
    }
}
