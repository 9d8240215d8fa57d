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

pub mod anthropic;
mod build;
pub mod config;
pub mod context;
pub mod http;
pub mod offline;
pub mod openai;
pub mod prompt;
pub mod redact;
pub mod replay;
pub mod rounds;
pub mod schema;
#[cfg(test)]
mod testserver;

pub use build::build_provider;
pub use config::{ProviderConfig, ProviderFlags};
pub use http::CancelFlag;
pub use rounds::{ModelReply, NoTools, ReplyText, ToolCall, ToolCalls, ToolLoop, ToolRound, reply_with_tools};

use crate::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// What the understand call must decide for one user message.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UnderstandRequest {
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
    /// When the turn's `turn_timeout` runs out: the call is cut off then.
    /// Not part of what is recorded.
    #[serde(skip)]
    pub deadline: Option<Instant>,
}

impl UnderstandRequest {
    /// Whether there is anything to ask: no call is made otherwise.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.fields.is_empty() && self.conditions.is_empty() && self.signals.is_empty()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct FlowChoice {
    pub name: String,
    pub title: Option<String>,
    /// Any of these descriptions selects the flow.
    pub when: Vec<String>,
    /// Sample phrasings of the flow's fields, which also hint at the flow.
    pub examples: Vec<String>,
}

/// A field to extract, described for the model (and the offline rules).
#[derive(Clone, Debug, Serialize)]
pub struct FieldSpec {
    pub name: String,
    /// `string`, `int`, `float`, `bool`, `date`, `datetime`, `enum`, `list`, `object`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The JSON schema of a valid value (used for constrained output).
    pub schema: serde_json::Value,
    pub description: Option<String>,
    pub values: Vec<String>,
    pub examples: Vec<String>,
    pub pattern: Option<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// The current step asks for this field alone: the whole answer may be
    /// its value.
    pub asked: bool,
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
    pub flow: Option<String>,
    #[serde(default)]
    pub fields: BTreeMap<String, Proposal>,
    #[serde(default)]
    pub conditions: BTreeMap<String, Answer>,
    #[serde(default)]
    pub signals: BTreeMap<String, Answer>,
    #[serde(default)]
    pub usage: Usage,
}

/// A field value and the words of the user's message it was read from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "ProposalWire")]
pub struct Proposal {
    pub value: serde_json::Value,
    /// `None` when the model cited nothing: such a value is never written.
    pub evidence: Option<String>,
}

impl Proposal {
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
    pub yes: bool,
    pub evidence: Option<String>,
}

impl Answer {
    pub fn yes(evidence: impl Into<String>) -> Answer {
        Answer { yes: true, evidence: Some(evidence.into()) }
    }

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
    pub identity: Option<String>,
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
    pub history: Vec<Message>,
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

#[derive(Clone, Debug, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub text: String,
    #[serde(default)]
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
    pub prompt: u64,
    #[serde(default)]
    pub completion: u64,
    #[serde(default)]
    pub cached: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.calls += other.calls;
        self.prompt += other.prompt;
        self.completion += other.completion;
        self.cached += other.cached;
    }

    pub fn total_tokens(&self) -> u64 {
        self.prompt + self.completion
    }
}

/// Why a model call failed, classified so the user is told what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("authentication failed: {0} (check the API key)")]
    Auth(String),
    #[error("rate limited: {0} (wait, or lower the request rate)")]
    RateLimited(String),
    #[error("the provider is overloaded: {0} (try again shortly)")]
    Overloaded(String),
    #[error("the request was refused: {0}")]
    InvalidRequest(String),
    #[error(
        "the request does not fit the model's context window: {0} (set `context_window` in flowc.toml, \
         shorten the program's prompts, or use a model with a larger window)"
    )]
    ContextOverflow(String),
    #[error("the model did not answer in time: {0}")]
    Timeout(String),
    #[error("network error: {0} (check the base URL and your connection)")]
    Network(String),
    #[error("the model's answer is invalid: {0}")]
    InvalidOutput(String),
    #[error("cancelled")]
    Cancelled,
    #[error("replay has no recorded answer for this request: {0}")]
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

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError>;

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
}
