//! The offline provider: a built-in, deterministic "model" that needs no
//! network and no API key, so `flowc run flows/booking.flow` holds a real
//! conversation anywhere. It is rules, not understanding; docs/offline.md
//! is the same text for users.
//!
//! # Understanding ([`Provider::understand`])
//!
//! Everything works on whole words: the message is cut into words, numbers
//! and symbols ([`text`]). Routing and yes/no questions compare *terms*:
//! lowercased content words (stop words such as `the`, `I'd`, `want`,
//! `user` dropped), with light suffix stripping (`booking` = `booked` =
//! `book`) and a small synonym table (`change` = `modify` = `different` =
//! `instead`; `human` = `person` = `agent` = `someone`; `urgent` = `down` =
//! `outage`; `angry` = `upset` = `furious`; `book` = `reserve`; `bill` =
//! `invoice` = `charge`; `date` = `day`).
//!
//! - **Routing** ([`routing`]): among the candidate flows that have a
//!   `when`, the one whose `when`s, `title` and field `examples` share the
//!   most message terms, each term weighted by its rarity among the flows;
//!   one shared term is enough, ties go to the first declared flow, and
//!   with none shared the answer is no flow.
//! - **Fields** ([`extract`]), by type: `string` by its `pattern` (first
//!   match, [`patterns`]) or an `example` found in the message (longest
//!   first, declared spelling); `date` as ISO `YYYY-MM-DD`, `today`,
//!   `tomorrow`, `the day after tomorrow`, weekday names (the next such day
//!   after today), `4 December [2026]`, `December 4th[, 2026]` (no year: the
//!   next such day) ([`dates`]); `datetime` as ISO, or a date plus a clock
//!   time (`tomorrow at 7pm`); `enum` by its values, whole words, any case;
//!   `bool` by yes/no words, for the asked field (or the only bool field
//!   when nothing is asked); `int`/`float` by digits and number words, unit
//!   words deciding between fields ([`numbers`]). Date and time spans are
//!   never read as numbers; no token fills two fields.
//! - **The whole answer**: a `string` field the current step asks for
//!   alone, with no `pattern` and nothing found above, takes the message
//!   trimmed of politeness (`please`, `thanks`, `um`, `it's`, surrounding
//!   punctuation) — unless the message is a question, only yes/no words,
//!   gave another field a value, answered a question or signal yes, or was
//!   routed to a flow other than the active one.
//! - **Conditions and signals**: yes when a term of the message is a term
//!   of one of the question's `when`s, else no. Every question asked gets
//!   an answer.
//!
//! # Replies ([`Provider::respond`])
//!
//! The reply is the batch's rendered step prompts (`instructions`), then
//! the turn's `appended` instructions, joined with spaces: the offline
//! "model" says what the step tells it to say. Text already `said` is not
//! repeated. With no instruction at all the reply is "How can I help?", or
//! nothing when something was already said this turn. The offline model
//! never calls tools: the tool loop is left untouched.
//!
//! # Cost
//!
//! Every call counts as one model call (`Usage::calls = 1`) so tests can
//! assert call counts with any provider. Tokens are estimated as words:
//! `prompt` counts the whitespace-separated words of every text of the
//! request (message, history, descriptions, instructions…); `completion`
//! counts one per value answered by understand, and the reply's words for
//! respond. Nothing is ever `cached`.
//!
//! # Limits
//!
//! No coreference ("the first one", "same as before"), no use of history,
//! no negation scope beyond the yes/no lists ("I don't want to change the
//! date" still answers yes to "the user wants to change the date"), one
//! matching term is enough (so a stray word can trigger a question), only
//! the synonyms in the table, numeric dates other than ISO (`12/04`) are
//! not read, and `list`/`object` fields are never extracted.
//!
//! The provider is deterministic: no randomness and no clock (relative
//! dates resolve against the request's `today`).

mod dates;
mod extract;
mod numbers;
mod patterns;
mod routing;
mod text;

use super::{Provider, ProviderError, RespondRequest, Response, ToolLoop, UnderstandRequest, Understanding, Usage};
use chrono::NaiveDate;
use patterns::Patterns;
use std::collections::BTreeMap;

/// The offline provider. It keeps only a cache of compiled field patterns.
#[derive(Default)]
pub struct Offline {
    patterns: Patterns,
}

impl Offline {
    pub fn new() -> Self {
        Self::default()
    }
}

/// The reply when no step gives an instruction and nothing was said.
pub const FALLBACK_REPLY: &str = "How can I help?";

impl Provider for Offline {
    fn name(&self) -> String {
        "offline".to_string()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        Ok(understand(request, &mut self.patterns))
    }

    /// Never calls a tool: `tools` is left untouched.
    fn respond(
        &mut self,
        request: &RespondRequest,
        _tools: &mut dyn ToolLoop,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Response, ProviderError> {
        let text = reply(request);
        on_text(&text);
        let usage =
            Usage { calls: 1, prompt: respond_prompt_words(request), completion: text::word_count(&text), cached: 0 };
        Ok(Response { text, usage })
    }
}

fn understand(request: &UnderstandRequest, patterns: &mut Patterns) -> Understanding {
    let tokens = text::tokenize(&request.message);
    let message_terms = text::terms_of(&tokens);
    let today = request.today.trim().get(..10).and_then(|day| NaiveDate::parse_from_str(day, "%Y-%m-%d").ok());

    let flow = routing::route(&request.flows, &message_terms);
    let mut fields = extract::extract(&request.message, &tokens, &request.fields, today, patterns);
    let answer_all = |questions: &[super::Question]| -> BTreeMap<String, bool> {
        questions.iter().map(|question| (question.id.clone(), routing::answer(question, &message_terms))).collect()
    };
    let conditions = answer_all(&request.conditions);
    let signals = answer_all(&request.signals);

    let said_something_else = !fields.is_empty()
        || conditions.values().chain(signals.values()).any(|yes| *yes)
        || flow.as_ref().is_some_and(|flow| request.active_flow.as_ref() != Some(flow));
    let whole_answer_field =
        request.fields.iter().find(|field| field.asked && field.kind == "string" && field.pattern.is_none());
    if let (Some(field), false) = (whole_answer_field, said_something_else) {
        if let Some(answer) = extract::whole_answer(&request.message, &tokens) {
            fields.insert(field.name.clone(), serde_json::Value::String(answer));
        }
    }

    let answered = u64::from(flow.is_some()) + (fields.len() + conditions.len() + signals.len()) as u64;
    let usage = Usage { calls: 1, prompt: understand_prompt_words(request), completion: answered, cached: 0 };
    Understanding { flow, fields, conditions, signals, usage }
}

fn reply(request: &RespondRequest) -> String {
    let parts: Vec<&str> = request
        .instructions
        .iter()
        .chain(&request.appended)
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .collect();
    if !parts.is_empty() {
        return parts.join(" ");
    }
    if request.said.iter().any(|text| !text.trim().is_empty()) { String::new() } else { FALLBACK_REPLY.to_string() }
}

fn understand_prompt_words(request: &UnderstandRequest) -> u64 {
    let words = |texts: &mut dyn Iterator<Item = &String>| texts.map(|text| text::word_count(text)).sum::<u64>();
    let flows = request.flows.iter().map(|flow| {
        1 + words(&mut flow.title.iter()) + words(&mut flow.when.iter()) + words(&mut flow.examples.iter())
    });
    let fields = request.fields.iter().map(|field| {
        2 + words(&mut field.description.iter())
            + words(&mut field.values.iter())
            + words(&mut field.examples.iter())
            + words(&mut field.pattern.iter())
    });
    let questions = request.conditions.iter().chain(&request.signals).map(|question| words(&mut question.when.iter()));
    text::word_count(&request.message)
        + words(&mut request.history.iter().map(|message| &message.text))
        + flows.sum::<u64>()
        + fields.sum::<u64>()
        + questions.sum::<u64>()
}

fn respond_prompt_words(request: &RespondRequest) -> u64 {
    let texts = request
        .identity
        .iter()
        .chain(&request.rules)
        .chain(&request.flow_rules)
        .chain(&request.instructions)
        .chain(&request.appended)
        .chain(&request.said)
        .chain(request.history.iter().map(|message| &message.text))
        .chain(std::iter::once(&request.message));
    texts.map(|text| text::word_count(text)).sum()
}

#[cfg(test)]
mod tests;
