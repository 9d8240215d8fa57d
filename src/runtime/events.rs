//! What happened in a turn, as data: the event stream that the REPL trace,
//! `--json` and tests all read, and the [`TurnResult`] a turn answers with.

#![warn(missing_docs)]

use crate::llm::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One thing that happened in a turn, in the order it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A turn began.
    TurnStarted {
        /// The turn's number, from 1.
        turn: u32,
        /// The user's message.
        message: String,
    },
    /// A directive armed by the last turn was applied.
    PendingApplied {
        /// Who emitted the directive (`signal:name`, `branch:flow.step#n`…).
        source: String,
    },
    /// The oldest messages of the history were summarised (one model
    /// call, `purpose: summarize`) so the request fits the model's window;
    /// the summary is sent in their place from now on.
    HistorySummarized {
        /// How many messages were folded into the summary this time.
        messages: usize,
        /// How many of the first messages of the session's history, as
        /// the turn found it, it now stands for (a stored session keeps
        /// only the messages after them: the count then starts again).
        through: usize,
    },
    /// The model was called.
    ModelCalled {
        /// What the call was for.
        purpose: Purpose,
        /// The provider's name.
        provider: String,
        /// Tokens the call spent.
        usage: Usage,
    },
    /// The message was routed to a flow.
    Routed {
        /// The flow's name.
        flow: String,
        /// Why.
        reason: &'static str,
    },
    /// A field value read from the message was written.
    Extracted {
        /// The field's name.
        field: String,
        /// The value.
        value: Value,
    },
    /// A field value read from the message was refused (it does not fit the field).
    ExtractionRejected {
        /// The field's name.
        field: String,
        /// The value.
        value: Value,
        /// Why.
        reason: String,
    },
    /// The writes of one phase of the turn (its signals, hooks, steps'
    /// `set`s and `emit`s, tools' directives) did not all validate: none
    /// is kept.
    DataValidation {
        /// The phase: `pre-model` or `post-model`.
        source: String,
        /// Each write refused, with why and its emitter.
        fields: Vec<crate::runtime::writes::InvalidWrite>,
        /// The fields (`context.KEY` for a context key) the phase had
        /// written with valid values, put back as they were.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        undone: Vec<String>,
    },
    /// A proposal of the model that the message does not back: a field
    /// value (not written) or a yes to a condition or signal (counted as
    /// no). `kind` is `field`, `condition` or `signal`.
    Ungrounded {
        /// `field`, `condition` or `signal`.
        kind: &'static str,
        /// The field, condition or signal.
        name: String,
        /// The value.
        value: Value,
        /// The words of the message cited for it.
        evidence: Option<String>,
        /// Why.
        reason: String,
    },
    /// A value code read from the message before asking the model (a
    /// pattern match, an ISO date, an enum value named verbatim).
    ReadByCode {
        /// The field's name.
        field: String,
        /// The value.
        value: Value,
        /// The words of the message cited for it.
        evidence: String,
    },
    /// A signal matched.
    SignalMatched {
        /// The signal's name.
        signal: String,
        /// `pre` or `post`: before or after the model.
        phase: &'static str,
    },
    /// A flow was entered.
    FlowEntered {
        /// The flow's name.
        flow: String,
    },
    /// A flow completed.
    FlowCompleted {
        /// The flow's name.
        flow: String,
    },
    /// A flow was left before it completed.
    FlowLeft {
        /// The flow's name.
        flow: String,
        /// Why.
        reason: String,
    },
    /// A new run of `flow` started without the values of an earlier one.
    FieldsCleared {
        /// The flow's name.
        flow: String,
        /// The fields cleared.
        fields: Vec<String>,
    },
    /// A step was entered.
    StepEntered {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
    },
    /// A step asked the user.
    StepAsked {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
        /// How many times the step has asked, this one included.
        ask: u32,
    },
    /// A value the step's confirmation was about changed before the step
    /// was left (`changed`); the confirmation (`cleared`) is asked again.
    ConfirmationReopened {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
        /// The values that changed.
        changed: Vec<String>,
        /// The confirmation fields cleared.
        cleared: Vec<String>,
    },
    /// An answer to a confirmation that is not an unqualified yes or a
    /// plain no ("yes, but …", "is that right?", "I don't know"): set
    /// aside (`proposed`, when a model or code proposed one), and the step
    /// asks again, saying why.
    ConsentUnclear {
        /// The field's name.
        field: String,
        /// The answer proposed, if any.
        proposed: Option<Value>,
        /// Why.
        reason: String,
    },
    /// A step that collects a confirmation was entered anew: an answer it
    /// did not ask for (another step's, or an earlier visit's) is not
    /// carried into it, so it asks its own question.
    ConfirmationCleared {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
        /// The fields cleared.
        fields: Vec<String>,
    },
    /// A step was passed over.
    StepSkipped {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
        /// Why.
        reason: String,
    },
    /// An auto step ran its actions.
    StepExecuted {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
    },
    /// A branch entry was taken.
    BranchTaken {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
        /// The entry taken, counted from 1.
        entry: usize,
        /// The entry's label, if it has one.
        label: Option<String>,
    },
    /// A tool was called.
    ToolCalled {
        /// The tool's name.
        tool: String,
        /// Whether the call succeeded.
        ok: bool,
        /// How long the call took.
        duration_ms: u64,
        /// What went wrong.
        error: Option<String>,
    },
    /// A step's actions failed; its `on_error` (or the default) answered.
    StepFailed {
        /// The flow's name.
        flow: String,
        /// The step's name.
        step: String,
        /// What went wrong.
        error: String,
    },
    /// Model steps' answers in a step's actions or a hook (`source`) did
    /// not fit their fields: `repaired` were asked again, `rejected` still
    /// did not fit after that (the actions failed).
    ModelAnswers {
        /// The actions' path (`flow.step`, `flow.step.on_enter`…).
        source: String,
        /// Answers asked again.
        repaired: u32,
        /// Answers refused after their repair.
        rejected: u32,
    },
    /// A `finalize` hook failed after the reply was written: its writes and
    /// directives were dropped, and the turn went on.
    HookFailed {
        /// The hook (`flow.finalize`…).
        hook: String,
        /// What went wrong.
        error: String,
    },
    /// A directive was emitted.
    DirectiveEmitted {
        /// Who emitted the directive (`signal:name`, `branch:flow.step#n`…).
        source: String,
        /// The directive, as JSON.
        directive: Value,
    },
    /// A directive took effect.
    DirectiveApplied {
        /// Who emitted the directive (`signal:name`, `branch:flow.step#n`…).
        source: String,
    },
    /// The understand call also wrote the reply (the fused call): whether
    /// the turn used it, or why it asked for the reply in a call of its
    /// own. Emitted on every turn that asked for a fused reply.
    FusedReply {
        /// The step the model named (`flow.step`), if it named one.
        step: Option<String>,
        /// Whether the reply was used.
        used: bool,
        /// Why it was not.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The model's reply was empty or only whitespace: it was asked for
    /// once more (`asked_again`), and when that one was empty too, the
    /// reply was replaced (`replaced`) by `text`, what the turn's steps
    /// asked the reply to do; or a limit stopped the turn before any reply
    /// (`limit_message`), and `text` answers it.
    EmptyReply {
        /// What was done about it.
        action: EmptyReplyAction,
        /// The reply put in its place.
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// A reply the model wrote states a value-like token (an id or code,
    /// a number, a date, a time, an email, an amount) that appears nowhere
    /// the model was given: a fused reply is set aside (`set_aside`: the
    /// reply call answers); an ordinary reply is asked for once more
    /// (`asked_again`), and when that one states one too, replaced
    /// (`replaced`) by `text`, what the turn's steps asked the reply to do.
    UnfoundedClaim {
        /// The token, as the reply wrote it.
        claim: String,
        /// What was done about it.
        action: ClaimAction,
        /// The reply put in its place.
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// A reply the model wrote (the respond call's) leaves out a value its
    /// step's prompt shows: `field`, whose value code holds is `value`. The
    /// user would answer a question about other data than code holds, so
    /// the reply is replaced, without another call, by `text`: what the
    /// turn's steps asked the reply to do, as code renders it.
    ReplyOmits {
        /// The field the reply leaves out.
        field: String,
        /// Its value, as code holds it.
        value: String,
        /// The reply put in its place.
        text: String,
    },
    /// Something went wrong that did not stop the turn.
    Warning {
        /// The user's message.
        message: String,
    },
    /// The turn ended.
    TurnFinished {
        /// Why the turn ended.
        stopped_reason: StopReason,
    },
}

/// What was done about an empty reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmptyReplyAction {
    /// The reply was asked for once more.
    AskedAgain,
    /// The reply was replaced by the steps' prompts.
    Replaced,
    /// A limit stopped the turn before any reply: it answers with the
    /// limit message (`agent.limits.message`, or the default).
    LimitMessage,
}

/// What was done about a reply that states what nobody said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimAction {
    /// The fused reply was not used: the reply call answers.
    SetAside,
    /// The reply was asked for once more.
    AskedAgain,
    /// The reply was replaced by the steps' prompts.
    Replaced,
}

/// What a model call was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// The understand call: routing, values, conditions and signals.
    Understand,
    /// The reply.
    Respond,
    /// The signals asked after the reply.
    PostSignals,
    /// The summary of the history the model's window left out.
    Summarize,
    /// A model step (`ask_model`) in a conversation step's actions or hooks.
    ModelStep,
}

/// Why a turn ended (LANGUAGE.md section 9, step 7), or why a workflow run
/// stopped before its next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A step asked the user something, or nothing was left to do.
    NeedsInput,
    /// The flow completed and no flow follows it.
    FlowComplete,
    /// A directive halted the turn before the model was asked.
    Halt,
    /// The flow was aborted.
    Aborted,
    /// Too many auto steps in one turn (`agent.limits.max_auto_steps`).
    AutoStepLimit,
    /// Too many tool rounds (`agent.limits.max_tool_rounds`).
    ToolRoundLimit,
    /// The turn spent too many tokens (`agent.limits.max_turn_tokens`).
    TokenLimit,
    /// The turn ran too long (`agent.limits.turn_timeout`).
    TimeLimit,
    /// A step waits; the run resumes at `resume_at`.
    Waiting,
    /// The turn failed.
    Error,
    /// The runtime's `max_steps_per_turn` was reached.
    StepLimit,
    /// The runtime's `max_session_tokens` was reached.
    SessionTokenLimit,
    /// The runtime's `max_session_time` was reached.
    SessionTimeLimit,
    /// The runtime's `max_consecutive_errors` was reached.
    ErrorLimit,
    /// A workflow run's model steps spent `agent.limits.max_run_llm_calls`
    /// or `max_run_tokens`: a model step was not asked and its step failed.
    RunModelLimit,
}

impl StopReason {
    /// The reason's stable name (`needs_input`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::NeedsInput => "needs_input",
            StopReason::FlowComplete => "flow_complete",
            StopReason::Halt => "halt",
            StopReason::Aborted => "aborted",
            StopReason::AutoStepLimit => "auto_step_limit",
            StopReason::ToolRoundLimit => "tool_round_limit",
            StopReason::TokenLimit => "token_limit",
            StopReason::TimeLimit => "time_limit",
            StopReason::Waiting => "waiting",
            StopReason::Error => "error",
            StopReason::StepLimit => "step_limit",
            StopReason::SessionTokenLimit => "session_token_limit",
            StopReason::SessionTimeLimit => "session_time_limit",
            StopReason::ErrorLimit => "error_limit",
            StopReason::RunModelLimit => "run_model_limit",
        }
    }

    /// What the reason means, for people reading a trace or the docs.
    pub fn explanation(self) -> &'static str {
        match self {
            StopReason::NeedsInput => "a step asked the user something, or nothing was left to do",
            StopReason::FlowComplete => "the flow completed and no flow follows it",
            StopReason::Halt => "a directive halted the turn before the model was asked",
            StopReason::Aborted => "the flow was aborted",
            StopReason::AutoStepLimit => {
                "the turn ran `agent.limits.max_auto_steps` auto steps, or moved between steps 10,000 times without asking"
            }
            StopReason::ToolRoundLimit => "the model asked for more tool rounds than `agent.limits.max_tool_rounds`",
            StopReason::TokenLimit => "the turn spent more tokens than `agent.limits.max_turn_tokens`",
            StopReason::TimeLimit => "the turn ran longer than `agent.limits.turn_timeout`",
            StopReason::Waiting => "a step waits; the run resumes at `resume_at`",
            StopReason::Error => "the turn failed",
            StopReason::StepLimit => "the turn executed as many steps as the runtime's `max_steps_per_turn`",
            StopReason::SessionTokenLimit => {
                "the session spent more tokens over its turns than the runtime's `max_session_tokens`"
            }
            StopReason::SessionTimeLimit => {
                "the session spent longer running turns than the runtime's `max_session_time`"
            }
            StopReason::ErrorLimit => {
                "steps or tool calls failed as many times in a row as the runtime's `max_consecutive_errors`"
            }
            StopReason::RunModelLimit => {
                "the run's model steps made `agent.limits.max_run_llm_calls` calls or spent `max_run_tokens` tokens"
            }
        }
    }
}

/// One directive of the turn's chain: who emitted it, what it said, and
/// whether it took effect (a position that lost the merge did not).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DirectiveRecord {
    /// Who emitted it (`signal:name`, `branch:flow.step#n`…).
    pub source: String,
    /// What it said, as JSON.
    pub directive: Value,
    /// Whether it took effect.
    pub applied: bool,
}

/// Tokens a turn spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached: u64,
    /// Some of the counts are estimates ([`Usage::estimated`]); left out
    /// when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl From<Usage> for Tokens {
    fn from(usage: Usage) -> Tokens {
        Tokens { prompt: usage.prompt, completion: usage.completion, cached: usage.cached, estimated: usage.estimated }
    }
}

/// What a turn answers with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnResult {
    /// The turn's number, from 1.
    pub turn: u32,
    /// The user's message.
    pub user: String,
    /// The reply.
    pub reply: String,
    /// The flow the conversation is in after the turn, if any.
    pub flow: Option<String>,
    /// The step that waits for the answer, if any.
    pub step: Option<String>,
    /// The names of the steps executed this turn, each once, in order.
    pub executed_steps: Vec<String>,
    /// Why the turn ended.
    pub stopped_reason: StopReason,
    /// The collected fields after the turn.
    pub data: serde_json::Map<String, Value>,
    /// Every directive of the turn, in order.
    pub directives: Vec<DirectiveRecord>,
    /// Model calls made.
    pub llm_calls: u32,
    /// Tokens spent.
    pub tokens: Tokens,
    /// ISO time a `waiting` turn resumes at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
    /// Every event of the turn, in order.
    pub events: Vec<Event>,
}

impl TurnResult {
    /// The `--json` line: exactly the keys DESIGN.md documents, in order.
    pub fn to_json_line(&self) -> Value {
        serde_json::json!({
            "turn": self.turn,
            "user": self.user,
            "reply": self.reply,
            "flow": self.flow,
            "step": self.step,
            "executed_steps": self.executed_steps,
            "stopped_reason": self.stopped_reason,
            "data": self.data,
            "directives": self.directives,
            "llm_calls": self.llm_calls,
            "tokens": self.tokens,
        })
    }

    /// The dim one-line trace the REPL prints under each reply.
    pub fn trace_line(&self) -> String {
        let position = match (&self.flow, &self.step) {
            (Some(flow), Some(step)) => format!("{flow}/{step}"),
            (Some(flow), None) => flow.clone(),
            _ => "no flow".to_string(),
        };
        let executed = if self.executed_steps.is_empty() { "-".to_string() } else { self.executed_steps.join(", ") };
        format!(
            "[{position} · ran {executed} · {} · {} model call{}]",
            self.stopped_reason.as_str(),
            self.llm_calls,
            if self.llm_calls == 1 { "" } else { "s" }
        )
    }
}
