//! What happened in a turn, as data: the event stream that the REPL trace,
//! `--json` and tests all read, and the [`TurnResult`] a turn answers with.

use crate::llm::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    TurnStarted {
        turn: u32,
        message: String,
    },
    PendingApplied {
        source: String,
    },
    ModelCalled {
        purpose: Purpose,
        provider: String,
        usage: Usage,
    },
    Routed {
        flow: String,
        reason: &'static str,
    },
    Extracted {
        field: String,
        value: Value,
    },
    ExtractionRejected {
        field: String,
        value: Value,
        reason: String,
    },
    /// A proposal of the model that the message does not back: a field
    /// value (not written) or a yes to a condition or signal (counted as
    /// no). `kind` is `field`, `condition` or `signal`.
    Ungrounded {
        kind: &'static str,
        name: String,
        value: Value,
        evidence: Option<String>,
        reason: String,
    },
    /// A value code read from the message before asking the model (a
    /// pattern match, an ISO date, an enum value named verbatim).
    ReadByCode {
        field: String,
        value: Value,
        evidence: String,
    },
    SignalMatched {
        signal: String,
        phase: &'static str,
    },
    FlowEntered {
        flow: String,
    },
    FlowCompleted {
        flow: String,
    },
    FlowLeft {
        flow: String,
        reason: String,
    },
    /// A new run of `flow` started without the values of an earlier one.
    FieldsCleared {
        flow: String,
        fields: Vec<String>,
    },
    StepEntered {
        flow: String,
        step: String,
    },
    StepAsked {
        flow: String,
        step: String,
        ask: u32,
    },
    /// A value the step's confirmation was about changed before the step
    /// was left (`changed`); the confirmation (`cleared`) is asked again.
    ConfirmationReopened {
        flow: String,
        step: String,
        changed: Vec<String>,
        cleared: Vec<String>,
    },
    /// An answer to a confirmation that is not an unqualified yes or a
    /// plain no ("yes, but …", "is that right?", "I don't know"): set
    /// aside (`proposed`, when a model or code proposed one), and the step
    /// asks again, saying why.
    ConsentUnclear {
        field: String,
        proposed: Option<Value>,
        reason: String,
    },
    /// A step that collects a confirmation was entered anew: an answer it
    /// did not ask for (another step's, or an earlier visit's) is not
    /// carried into it, so it asks its own question.
    ConfirmationCleared {
        flow: String,
        step: String,
        fields: Vec<String>,
    },
    StepSkipped {
        flow: String,
        step: String,
        reason: String,
    },
    StepExecuted {
        flow: String,
        step: String,
    },
    BranchTaken {
        flow: String,
        step: String,
        entry: usize,
        label: Option<String>,
    },
    ToolCalled {
        tool: String,
        ok: bool,
        duration_ms: u64,
        error: Option<String>,
    },
    /// A step's actions failed; its `on_error` (or the default) answered.
    StepFailed {
        flow: String,
        step: String,
        error: String,
    },
    /// A `finalize` hook failed after the reply was written: its writes and
    /// directives were dropped, and the turn went on.
    HookFailed {
        hook: String,
        error: String,
    },
    DirectiveEmitted {
        source: String,
        directive: Value,
    },
    DirectiveApplied {
        source: String,
    },
    Warning {
        message: String,
    },
    TurnFinished {
        stopped_reason: StopReason,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Understand,
    Respond,
    PostSignals,
}

/// Why a turn ended (LANGUAGE.md section 9, step 7), or why a workflow run
/// stopped before its next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    NeedsInput,
    FlowComplete,
    Halt,
    Aborted,
    AutoStepLimit,
    ToolRoundLimit,
    TokenLimit,
    TimeLimit,
    Waiting,
    Error,
    StepLimit,
    SessionTokenLimit,
    SessionTimeLimit,
    ErrorLimit,
}

impl StopReason {
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
        }
    }
}

/// One directive of the turn's chain: who emitted it, what it said, and
/// whether it took effect (a position that lost the merge did not).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DirectiveRecord {
    pub source: String,
    pub directive: Value,
    pub applied: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
}

impl From<Usage> for Tokens {
    fn from(usage: Usage) -> Tokens {
        Tokens { prompt: usage.prompt, completion: usage.completion, cached: usage.cached }
    }
}

/// What a turn answers with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnResult {
    pub turn: u32,
    pub user: String,
    pub reply: String,
    pub flow: Option<String>,
    pub step: Option<String>,
    pub executed_steps: Vec<String>,
    pub stopped_reason: StopReason,
    pub data: serde_json::Map<String, Value>,
    pub directives: Vec<DirectiveRecord>,
    pub llm_calls: u32,
    pub tokens: Tokens,
    /// ISO time a `waiting` turn resumes at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
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
