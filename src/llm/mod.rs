//! The model, behind one trait with the two kinds of request the runtime
//! makes (DESIGN.md "Understanding and the model"):
//!
//! - [`Provider::understand`]: one structured call per turn that routes the
//!   message among candidate flows, extracts field values, and answers
//!   yes/no for every open AI condition and signal, together;
//! - [`Provider::reply`]: one round of the reply for the turn's batch of
//!   steps: the reply, or the tool calls the model asks for first
//!   (`rounds.rs`; [`reply_with_tools`] runs the rounds through a
//!   [`ToolLoop`]).
//!
//! Requests are built from the IR by the runtime; providers never see the
//! program. Everything a provider returns is untrusted: the runtime
//! validates it against the schema before anything is written.

#![warn(missing_docs)]

pub(crate) mod anthropic;
mod build;
pub mod config;
pub(crate) mod context;
pub mod http;
pub mod model_step;
pub mod offline;
pub(crate) mod openai;
pub(crate) mod partial;
pub(crate) mod prompt;
pub(crate) mod redact;
pub(crate) mod replay;
pub(crate) mod rounds;
pub(crate) mod schema;
mod streamed;
#[cfg(test)]
mod testserver;

pub use build::build_provider;
pub use config::{ProviderConfig, ProviderFlags};
pub use http::CancelFlag;
pub use model_step::{AskAnswer, AskRepair, AskRequest};
pub use rounds::{ModelReply, NoTools, ReplyText, ToolCall, ToolCalls, ToolLoop, ToolRound, reply_with_tools};
pub use streamed::{ReplyStream, Understood};

use crate::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// What the understand call must decide for one user message.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UnderstandRequest {
    /// The user's message, as typed.
    pub message: String,
    /// Recent conversation, oldest first (the current message excluded).
    pub history: Vec<Message>,
    /// The flow the conversation is in, if any.
    pub active_flow: Option<String>,
    /// Flows the message may be routed to (their code guard passed), in
    /// declaration order. Empty when routing is not asked.
    pub flows: Vec<FlowChoice>,
    /// Fields to extract from the message, in schema order.
    pub fields: Vec<FieldSpec>,
    /// AI conditions (branch and step `when`s) to answer yes or no.
    pub conditions: Vec<Question>,
    /// Signals to answer yes or no.
    pub signals: Vec<Question>,
    /// Today's date (ISO), for relative dates such as "tomorrow".
    pub today: String,
    /// The reply the call may also write (the fused call): the steps the
    /// turn may stop at and ask, for the model to name one and write its
    /// message. `None` when the runtime cannot tell where the turn stops;
    /// left out of the recorded request then, so recordings made before
    /// the fused call keep their fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ReplyAsk>,
    /// When the turn's `turn_timeout` runs out: the call is cut off then.
    /// Not part of what is recorded.
    #[serde(skip)]
    pub deadline: Option<Instant>,
    /// What the prompt's cached prefix holds besides the task, the same on
    /// every turn of a session (`prompt.rs`); left empty, the prefix holds
    /// what this request offers. Not part of what is recorded: it follows
    /// from the program.
    #[serde(skip)]
    pub prefix: PromptPrefix,
}

/// The parts of the understand prompt that the turns of a session share,
/// so that servers that cache a repeated prefix reuse them.
#[derive(Clone, Debug, Default)]
pub struct PromptPrefix {
    /// Every flow a message may ever be routed to, in declaration order;
    /// the request's `flows` are those offered this turn.
    pub catalogue: Vec<FlowChoice>,
    /// Set when the session asks for fused replies: who writes them.
    pub writer: Option<ReplyWriter>,
}

/// Who writes a fused reply: the assistant's identity and the agent's own
/// rules (a flow's rules stay with the steps that follow them).
#[derive(Clone, Debug, Default)]
pub struct ReplyWriter {
    /// The program's `identity`, rendered.
    pub identity: Option<String>,
    /// The agent's rules, rendered.
    pub rules: Vec<String>,
}

/// What the understand call needs to write the reply as well: who writes
/// it, what is known, and the steps the turn may stop at, in the order
/// the turn reaches them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplyAsk {
    /// Who the assistant is (the program's `identity`).
    pub identity: Option<String>,
    /// The program's rules, and the rules of the flow the steps are in.
    pub rules: Vec<String>,
    /// The data known before this message (and what code read from it).
    pub data: serde_json::Map<String, serde_json::Value>,
    /// The flow entered when the message routes to none (no flow is
    /// active): the program's `if`-only or default flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_flow: Option<String>,
    /// The steps the turn may stop at, in order: the turn stops at the
    /// first whose `missing` fields the message does not all give.
    pub steps: Vec<StepAsk>,
}

/// A step the turn may stop at and ask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepAsk {
    /// `flow.step`, which the answer's `step` repeats.
    pub id: String,
    /// The flow the step is in.
    pub flow: String,
    /// The fields the step needs that are unset before this message.
    pub missing: Vec<String>,
    /// The step's prompt: what the reply must do. `{{field}}` stands for
    /// the field's value, from this message or else the known data.
    pub prompt: String,
}

/// The reply the fused call wrote, for the step it named. The runtime
/// uses it only when the turn stops at that step with every value the
/// step's prompt reads as the model saw it; otherwise it asks for the
/// reply in a call of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FusedReply {
    /// The step named (`flow.step`).
    pub step: String,
    /// The message to the user.
    pub text: String,
}

impl UnderstandRequest {
    /// Whether there is anything to ask: no call is made otherwise.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.fields.is_empty() && self.conditions.is_empty() && self.signals.is_empty()
    }
}

/// A flow the message may be routed to, described for the model.
#[derive(Clone, Debug, Serialize)]
pub struct FlowChoice {
    /// The flow's name, which the answer's `flow` repeats.
    pub name: String,
    /// The flow's title, if it declares one.
    pub title: Option<String>,
    /// Any of these descriptions selects the flow.
    pub when: Vec<String>,
    /// Sample phrasings of the flow's fields, which also hint at the flow.
    pub examples: Vec<String>,
}

/// A field to extract, described for the model (and the offline rules).
#[derive(Clone, Debug, Serialize)]
pub struct FieldSpec {
    /// The field's name, which the answer's `fields` is keyed by.
    pub name: String,
    /// `string`, `int`, `float`, `bool`, `date`, `datetime`, `enum`, `list`, `object`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The JSON schema of a valid value (used for constrained output).
    pub schema: serde_json::Value,
    /// The field's description, if it declares one.
    pub description: Option<String>,
    /// The allowed values of an enum field.
    pub values: Vec<String>,
    /// Sample values, as the program gives them.
    pub examples: Vec<String>,
    /// The pattern a string value must match.
    pub pattern: Option<String>,
    /// The least number allowed.
    pub min: Option<f64>,
    /// The greatest number allowed.
    pub max: Option<f64>,
    /// The current step asks for this field alone: the whole answer may be
    /// its value.
    pub asked: bool,
}

#[cfg(test)]
impl FieldSpec {
    /// A field spec with nothing but a name and a type, for tests.
    pub(crate) fn bare(name: &str, kind: &str) -> FieldSpec {
        FieldSpec {
            name: name.to_string(),
            kind: kind.to_string(),
            schema: serde_json::json!({}),
            description: None,
            values: vec![],
            examples: vec![],
            pattern: None,
            min: None,
            max: None,
            asked: false,
        }
    }
}

/// A yes/no question: an AI condition or a signal.
#[derive(Clone, Debug, Serialize)]
pub struct Question {
    /// Stable id the answer is keyed by (`booking.confirm#2`, `wants_human`).
    pub id: String,
    /// Any of these descriptions makes the answer yes (for a branch entry
    /// whose `when` is a list, the runtime asks one question per item).
    pub when: Vec<String>,
}

/// The answer to an [`UnderstandRequest`]. Keys that were not asked are
/// ignored by the runtime; every value and every yes is a proposal that
/// the runtime checks against the message (`runtime::grounding`) and then
/// against the schema before anything is written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Understanding {
    /// The flow the message starts or continues, if routing was asked.
    pub flow: Option<String>,
    #[serde(default)]
    /// Values read from the message, by field name.
    pub fields: BTreeMap<String, Proposal>,
    #[serde(default)]
    /// Answers to the AI conditions, by question id.
    pub conditions: BTreeMap<String, Answer>,
    #[serde(default)]
    /// Answers to the signals, by question id.
    pub signals: BTreeMap<String, Answer>,
    /// The reply written in the same call, when the request asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<FusedReply>,
    /// Why the answer's reply was read as none: it named a step that was
    /// not offered, or a member had the wrong type. Such a reply is
    /// dropped, not repaired: the fused part never costs a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_dropped: Option<String>,
    #[serde(default)]
    /// Tokens the call spent.
    pub usage: Usage,
}

/// A field value and the words of the user's message it was read from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "ProposalWire")]
pub struct Proposal {
    /// The value, as JSON.
    pub value: serde_json::Value,
    /// `None` when the model cited nothing: such a value is never written.
    pub evidence: Option<String>,
}

impl Proposal {
    /// A value with the words it was read from.
    pub fn new(value: serde_json::Value, evidence: impl Into<String>) -> Proposal {
        Proposal { value, evidence: Some(evidence.into()) }
    }
}

/// Recordings made before values carried evidence hold the bare value:
/// they still load, as proposals without evidence.
#[derive(Deserialize)]
#[serde(untagged)]
enum ProposalWire {
    Cited { value: serde_json::Value, evidence: Option<String> },
    Bare(serde_json::Value),
}

impl From<ProposalWire> for Proposal {
    fn from(wire: ProposalWire) -> Proposal {
        match wire {
            ProposalWire::Cited { value, evidence } => Proposal { value, evidence },
            ProposalWire::Bare(value) => Proposal { value, evidence: None },
        }
    }
}

/// A yes/no answer to a condition or signal. A yes cites the words of the
/// message that show it; a yes without them counts as no.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "AnswerWire")]
pub struct Answer {
    /// Whether the answer is yes.
    pub yes: bool,
    /// The words of the message that show the yes.
    pub evidence: Option<String>,
}

impl Answer {
    /// A yes, citing the words that show it.
    pub fn yes(evidence: impl Into<String>) -> Answer {
        Answer { yes: true, evidence: Some(evidence.into()) }
    }

    /// A no.
    pub fn no() -> Answer {
        Answer { yes: false, evidence: None }
    }
}

/// Older recordings hold a bare boolean.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnswerWire {
    Cited { yes: bool, evidence: Option<String> },
    Bare(bool),
}

impl From<AnswerWire> for Answer {
    fn from(wire: AnswerWire) -> Answer {
        match wire {
            AnswerWire::Cited { yes, evidence } => Answer { yes, evidence },
            AnswerWire::Bare(yes) => Answer { yes, evidence: None },
        }
    }
}

/// What the reply call must write.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplyRequest {
    /// Who the assistant is (the program's `identity`).
    pub identity: Option<String>,
    /// The program's rules, for every reply.
    pub rules: Vec<String>,
    /// Rules of the active flow.
    pub flow_rules: Vec<String>,
    /// The rendered prompts of the batch's steps, in order: what the reply
    /// must do (ask for the date, confirm the booking…).
    pub instructions: Vec<String>,
    /// Extra instructions for this turn (`append_prompt`).
    pub appended: Vec<String>,
    /// Text already said verbatim this turn (`say`), which the reply follows.
    pub said: Vec<String>,
    /// Recent conversation, oldest first (the current message excluded).
    pub history: Vec<Message>,
    /// The user's message, as typed.
    pub message: String,
    /// The collected data, for the model's context.
    pub data: serde_json::Map<String, serde_json::Value>,
    /// Tools the model may call in this reply.
    pub tools: Vec<ToolSpec>,
    /// The turn's tool budget is spent: this round must answer without
    /// calling tools. Not part of what is recorded: a replayed request
    /// matches whatever the budget.
    #[serde(skip)]
    pub tools_spent: bool,
    /// When the turn's `turn_timeout` runs out (see [`UnderstandRequest::deadline`]).
    #[serde(skip)]
    pub deadline: Option<Instant>,
}

/// A tool the model may call, described for it.
#[derive(Clone, Debug, Serialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the tool does, if the program says.
    pub description: Option<String>,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// The reply of one call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The reply's text.
    pub text: String,
    #[serde(default)]
    /// Tokens the call spent.
    pub usage: Usage,
}

/// Tokens of one or more model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Model calls made (each HTTP request that produced an answer, repair
    /// retries and tool rounds included).
    #[serde(default)]
    pub calls: u32,
    #[serde(default)]
    /// Prompt tokens.
    pub prompt: u64,
    #[serde(default)]
    /// Completion tokens.
    pub completion: u64,
    #[serde(default)]
    /// Prompt tokens the provider served from its cache.
    pub cached: u64,
    /// Some of the counts are flowc's estimate (by [`tokens`]), not the
    /// provider's: a server that reported no usage for a call. Left out of
    /// the JSON when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// Bytes of prompt text per token: the usual rule of thumb of four
/// characters a token for English and JSON on current tokenizers (a
/// character is a byte in ASCII text). An estimate, not a count.
pub const BYTES_PER_TOKEN: usize = 4;

/// The estimated tokens of `bytes` bytes of text: the one estimator of
/// `flowc check --costs` and of calls whose server reports no usage.
pub fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

impl Usage {
    /// Adds another call's counts to these.
    pub fn add(&mut self, other: Usage) {
        self.calls += other.calls;
        self.prompt += other.prompt;
        self.completion += other.completion;
        self.cached += other.cached;
        self.estimated |= other.estimated;
    }

    /// One call's tokens estimated from the bytes sent and received, for a
    /// server that reported none.
    pub fn estimate(prompt_bytes: usize, completion_bytes: usize) -> Usage {
        Usage {
            calls: 1,
            prompt: tokens(prompt_bytes),
            completion: tokens(completion_bytes),
            cached: 0,
            estimated: true,
        }
    }

    /// Prompt and completion tokens together.
    pub fn total_tokens(&self) -> u64 {
        self.prompt + self.completion
    }
}

/// Why a model call failed, classified so the user is told what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("authentication failed: {0} (check the API key)")]
    /// The provider refused the API key.
    Auth(String),
    #[error("rate limited: {0} (wait, or lower the request rate)")]
    /// Too many requests: the provider asks to wait.
    RateLimited(String),
    #[error("the provider is overloaded: {0} (try again shortly)")]
    /// The provider is overloaded.
    Overloaded(String),
    #[error("the request was refused: {0}")]
    /// The provider refused the request itself.
    InvalidRequest(String),
    #[error(
        "the request does not fit the model's context window: {0} (set `context_window` in flowc.toml, \
         shorten the program's prompts, or use a model with a larger window)"
    )]
    /// The request is larger than the model's context window.
    ContextOverflow(String),
    #[error("the model did not answer in time: {0}")]
    /// No answer before the deadline.
    Timeout(String),
    #[error("network error: {0} (check the base URL and your connection)")]
    /// The provider could not be reached.
    Network(String),
    #[error("the model's answer is invalid: {0}")]
    /// The model's answer does not fit the schema, even after a repair.
    InvalidOutput(String),
    #[error("cancelled")]
    /// The call was cancelled (Ctrl-C, or a client gone).
    Cancelled,
    #[error("replay has no recorded answer for this request: {0}")]
    /// Replay found no recorded answer for the request.
    NotRecorded(String),
}

impl ProviderError {
    /// The stable class name shown in traces and JSON.
    pub fn class(&self) -> &'static str {
        match self {
            ProviderError::Auth(_) => "auth",
            ProviderError::RateLimited(_) => "rate_limited",
            ProviderError::Overloaded(_) => "overloaded",
            ProviderError::InvalidRequest(_) => "invalid_request",
            ProviderError::ContextOverflow(_) => "context_overflow",
            ProviderError::Timeout(_) => "timeout",
            ProviderError::Network(_) => "network",
            ProviderError::InvalidOutput(_) => "invalid_output",
            ProviderError::Cancelled => "cancelled",
            ProviderError::NotRecorded(_) => "not_recorded",
        }
    }

    /// A refusal of the request itself: too long for the context window,
    /// or otherwise invalid.
    pub fn refused(message: String) -> ProviderError {
        if context::is_overflow(&message) {
            ProviderError::ContextOverflow(message)
        } else {
            ProviderError::InvalidRequest(message)
        }
    }
}

/// A model: the offline rules, an OpenAI-compatible endpoint, Anthropic, or
/// a replay of recorded answers.
pub trait Provider: Send {
    /// The provider's name for traces (`offline`, `openai:gpt-4o-mini`).
    fn name(&self) -> String;

    /// How the provider talks to its server, where that is negotiated
    /// during a session (OpenAI-compatible servers: the structured-output
    /// mode and the tool choice, after any fallback), in `flowc.toml`
    /// syntax; `None` for providers with nothing to negotiate.
    fn modes(&self) -> Option<String> {
        None
    }

    /// Whether the understand call may ask this model for the reply too
    /// (the fused call): on unless the operator turns it off
    /// (`fused_reply = false` in `flowc.toml`). Wrappers pass it on.
    fn fused_reply(&self) -> bool {
        true
    }

    /// The structured call: routes the message, reads field values and
    /// answers the conditions and signals, all at once.
    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError>;

    /// The understand call, streamed: returns as soon as the members of
    /// the answer before its `reply` are written and valid, with the reply
    /// still arriving ([`Understood::reply`]; drop it to cancel the
    /// request). Providers that do not stream answer whole, which is what
    /// this default does.
    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        Ok(Understood { understanding: self.understand(request)?, reply: None })
    }

    /// One round of the reply: the reply, or the tool calls the model asks
    /// for first. `rounds` are the earlier rounds of this reply with their
    /// results, oldest first (empty for the first round); tools are offered
    /// unless the request says `tools_spent`. `on_text` receives this
    /// round's text as it streams (all at once for providers that do not
    /// stream).
    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError>;

    /// A model step's one structured call for a value (`model_step.rs`);
    /// the runtime validates the answer. A provider without it says so.
    fn ask(&mut self, _request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        Err(ProviderError::InvalidRequest(format!("`{}` cannot answer model steps", self.name())))
    }

    /// How many of the oldest history messages this provider would leave
    /// out of `request` to fit the model's context window (0: none, or no
    /// window is known). The runtime summarises them first when the
    /// program asks (`agent.history.summarize`). Wrappers pass it on.
    fn understand_left_out(&self, _request: &UnderstandRequest) -> usize {
        0
    }

    /// [`Provider::understand_left_out`] for a reply's first round.
    fn reply_left_out(&self, _request: &ReplyRequest) -> usize {
        0
    }
}
