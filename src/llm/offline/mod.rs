//! The offline provider: a built-in, deterministic "model" that needs no
//! network and no API key, so `flowc run flows/booking.flow` holds a real
//! conversation anywhere. It is rules, not understanding. docs/offline.md
//! says the same for users, with examples.
//!
//! # Understanding ([`Provider::understand`])
//!
//! Everything works on whole words: the message is cut into words, digit
//! runs and symbols (`text.rs`). Routing and yes/no questions compare
//! *terms*: lowercased content words (stop words such as `the`, `I'd`,
//! `want`, `user`, `problem` dropped), with light suffix stripping
//! (`booking` = `booked` = `book`) and a small synonym table (`change` =
//! `modify` = `different` = `instead`; `human` = `person` = `agent` =
//! `someone`; `urgent` = `down` = `outage`; `angry` = `upset` = `furious` =
//! `frustrated`; `book` = `reserve`; `bill` = `invoice` = `charge`; `date` =
//! `day`; `hello` = `hi` = `hey` = `greet`: greetings are terms, so a
//! greeting signal fires on one). A term after `not`, `never`, `cannot` or a `…n't` word, up to the
//! end of its clause (punctuation or `but`), is negated and only matches a
//! negated term; a clause-initial `no` is an answer, not a negation.
//!
//! - **Routing** (`routing.rs`): among the candidate flows that have a
//!   `when`, the one whose `when`s, `title` and field `examples` share the
//!   most message terms, each term weighted by its rarity among the flows
//!   (`1/n` for a term in `n` flows); one shared term is enough, ties go to
//!   the first declared flow, and with none shared the answer is no flow.
//!   Flows without a `when` are never chosen: their `if`, `default` or a
//!   directive enters them, which is the runtime's business.
//! - **Fields** (`extract.rs`), by type, each span read once: `string` by
//!   its `pattern` (first match, `patterns.rs`) or one of its `examples`
//!   found in the message (longest first, returned as declared); `date` as
//!   ISO `YYYY-MM-DD`, `today`, `tomorrow`, `the day after tomorrow`,
//!   weekday names (the next such day after today), `4 December [2026]`,
//!   `December 4th[, 2026]` (no year: the next such day) (`dates.rs`);
//!   `datetime` as ISO, or a date plus a clock time (`tomorrow at 7pm`);
//!   `enum` by its values, whole words, any case; `bool` by yes/no words,
//!   for the asked field (or the only bool field when nothing is asked);
//!   `int`/`float` by digits and number words, unit words deciding between
//!   fields (`numbers.rs`); `list` by the enum values it names, or an
//!   enumeration ("ham, olives and mushrooms") for the list asked about.
//!   Date and time spans are never read as numbers. Each value comes with
//!   its evidence: the words of the message it was read from.
//! - **The whole answer**: a `string` field the current step asks for
//!   alone, with no `pattern` and nothing found above, takes the message
//!   trimmed of politeness (`please`, `thanks`, `um`, `it's`, surrounding
//!   punctuation) — unless the message is a question, is only yes/no words,
//!   gave another field a value, answered a question or signal yes, or was
//!   routed to a flow other than the active one.
//! - **Conditions and signals**: yes when a term of the message is a term
//!   of one of the question's `when`s, else no, a yes citing the word it
//!   rests on. Every question asked gets an answer.
//!
//! The readers themselves (words, dates, numbers, patterns, yes/no) are
//! `crate::read`'s, shared with grounding and the runtime; this module
//! keeps what is the provider's: extraction, routing and its cache.
//!
//! # Replies ([`Provider::reply`])
//!
//! The reply is the batch's rendered step prompts (`instructions`), then
//! the turn's `appended` instructions, joined with spaces: the offline
//! "model" says what the step tells it to say. Text already `said` is not
//! repeated (the runtime prints it). With no instruction at all the reply
//! is "How can I help?", or nothing when something was already said this
//! turn. The offline model never calls tools: every round is the answer.
//!
//! # Cost
//!
//! Every call counts as one model call (`Usage::calls = 1`) so tests can
//! assert call counts with any provider. Tokens are estimated as words:
//! `prompt` counts the whitespace-separated words of every text of the
//! request (message, history, descriptions, instructions…); `completion`
//! counts one per value answered by understand, and the reply's words for
//! a reply. Nothing is ever `cached`. A call takes a few microseconds
//! (`cargo bench --bench offline`): the program's texts are analysed once
//! per provider and kept (`cache.rs`).
//!
//! # Limits
//!
//! No coreference ("the first one", "same as before") and no use of the
//! history; negation only as described above (no double negation, no
//! "hardly"); one matching term is enough, so a stray word can trigger a
//! question or a route; only the synonyms in the table; mixed answers such
//! as "ok, but change the date" read both a yes and the change; numeric
//! dates other than ISO (`12/04`) are not read; `object` fields are never
//! extracted.
//!
//! The provider is deterministic: no randomness and no clock (relative
//! dates resolve against the request's `today`).

mod cache;
mod extract;
mod model_step;
mod numbers;
mod routing;
mod summary;

use super::{
    Answer, FusedReply, ModelReply, Proposal, Provider, ProviderError, ReplyRequest, Response, ToolRound,
    UnderstandRequest, Understanding, Usage,
};
use crate::read::text;
use cache::Cache;
use chrono::NaiveDate;
use std::collections::BTreeMap;

/// The offline provider. Its only state is a cache of the program's texts,
/// analysed once (`cache.rs`): answers never depend on earlier calls.
#[derive(Default)]
pub struct Offline {
    cache: Cache,
}

impl Offline {
    /// The offline provider, with its built-in readers.
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

    fn ask(&mut self, request: &super::AskRequest) -> Result<super::AskAnswer, ProviderError> {
        Ok(model_step::ask(request))
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        Ok(understand(request, &mut self.cache))
    }

    /// Never calls a tool: the first round answers.
    fn reply(
        &mut self,
        request: &ReplyRequest,
        _rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let text = summary::answer(request).unwrap_or_else(|| reply(request));
        on_text(&text);
        let usage = Usage {
            calls: 1,
            prompt: reply_prompt_words(request),
            completion: text::word_count(&text),
            cached: 0,
            estimated: false,
        };
        Ok(ModelReply::Done(Response { text, usage }))
    }
}

fn understand(request: &UnderstandRequest, cache: &mut Cache) -> Understanding {
    let tokens = text::tokenize(&request.message);
    let located = text::located_terms(&tokens);
    let message_terms: Vec<String> = located.iter().map(|found| found.term.clone()).collect();
    let today = request.today.trim().get(..10).and_then(|day| NaiveDate::parse_from_str(day, "%Y-%m-%d").ok());

    let flow = routing::route(&request.flows, &message_terms, cache);
    let mut fields = extract::extract(&request.message, &tokens, &request.fields, today, cache);
    let mut answer_all = |questions: &[super::Question]| -> BTreeMap<String, Answer> {
        questions
            .iter()
            .map(|question| {
                let answer = match routing::answer(question, &located, cache) {
                    Some(found) => Answer::yes(text::span_text(&request.message, &tokens, found.first, found.last)),
                    None => Answer::no(),
                };
                (question.id.clone(), answer)
            })
            .collect()
    };
    let conditions = answer_all(&request.conditions);
    let signals = answer_all(&request.signals);

    // A list of free-text items ("12 Baker Street, London" read as two
    // toppings) is no better reading than the whole answer to the field
    // asked: both are proposed, and the runtime gives the words to the
    // field asked (`grounding::one_field_per_span`).
    let free_list = |name: &String| {
        request
            .fields
            .iter()
            .any(|field| &field.name == name && field.kind == "list" && field.schema.pointer("/items/enum").is_none())
    };
    let said_something_else = fields.keys().any(|name| !free_list(name))
        || conditions.values().chain(signals.values()).any(|answer| answer.yes)
        || flow.as_ref().is_some_and(|flow| request.active_flow.as_ref() != Some(flow));
    let whole_answer_field =
        request.fields.iter().find(|field| field.asked && field.kind == "string" && field.pattern.is_none());
    if let (Some(field), false) = (whole_answer_field, said_something_else) {
        if let Some(answer) = extract::whole_answer(&request.message, &tokens) {
            fields.insert(field.name.clone(), Proposal::new(serde_json::Value::String(answer.clone()), answer));
        }
    }

    let reply = fused_reply(request, flow.as_ref(), &fields);
    let answered = u64::from(flow.is_some()) + (fields.len() + conditions.len() + signals.len()) as u64;
    let written = reply.as_ref().map_or(0, |reply| text::word_count(&reply.text));
    let usage = Usage {
        calls: 1,
        prompt: understand_prompt_words(request),
        completion: answered + written,
        cached: 0,
        estimated: false,
    };
    Understanding { flow, fields, conditions, signals, reply, reply_dropped: None, usage }
}

/// The fused reply, when the request asks for one: the first step offered
/// in the flow the conversation goes on in whose missing fields the
/// message does not all give, and its prompt with the values filled in —
/// the text the reply call writes for that step. None when the message
/// routes away from the active flow, or no step is left to ask.
fn fused_reply(
    request: &UnderstandRequest,
    routed: Option<&String>,
    fields: &BTreeMap<String, Proposal>,
) -> Option<FusedReply> {
    let ask = request.reply.as_ref()?;
    let flow = match (&request.active_flow, routed) {
        (Some(active), Some(routed)) if active != routed => return None,
        (Some(active), _) => active,
        (None, Some(routed)) => routed,
        (None, None) => ask.fallback_flow.as_ref()?,
    };
    let step = ask
        .steps
        .iter()
        .filter(|step| &step.flow == flow)
        .find(|step| step.missing.iter().any(|name| !fields.contains_key(name)))?;
    let value = |name: &str| fields.get(name).map(|proposal| &proposal.value).or_else(|| ask.data.get(name));
    let text = fill(&step.prompt, value);
    Some(FusedReply { step: step.id.clone(), text: text.trim().to_string() })
}

/// A prompt's `{{field}}` placeholders replaced by the values, written as
/// the runtime renders them (a string as is, nothing for no value).
fn fill<'v>(prompt: &str, value: impl Fn(&str) -> Option<&'v serde_json::Value>) -> String {
    let mut out = String::new();
    let mut rest = prompt;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest.get(start + 2..).and_then(|after| after.find("}}")) else {
            break;
        };
        out.push_str(rest.get(..start).unwrap_or_default());
        let name = rest.get(start + 2..start + 2 + end).unwrap_or_default().trim();
        match value(name) {
            Some(serde_json::Value::String(text)) => out.push_str(text),
            Some(serde_json::Value::Null) | None => {}
            Some(other) => out.push_str(&other.to_string()),
        }
        rest = rest.get(start + 2 + end + 2..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

fn reply(request: &ReplyRequest) -> String {
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
    // The fused reply's part: who writes, the rules, the data and each
    // step offered.
    let reply = request.reply.as_ref().map_or(0, |ask| {
        let steps = ask.steps.iter().map(|step| 1 + step.missing.len() as u64 + text::word_count(&step.prompt));
        words(&mut ask.identity.iter().chain(&ask.rules)) + ask.data.len() as u64 + steps.sum::<u64>()
    });
    text::word_count(&request.message)
        + words(&mut request.history.iter().map(|message| &message.text))
        + flows.sum::<u64>()
        + fields.sum::<u64>()
        + questions.sum::<u64>()
        + reply
}

fn reply_prompt_words(request: &ReplyRequest) -> u64 {
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
