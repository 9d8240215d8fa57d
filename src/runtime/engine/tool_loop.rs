//! The model's tool loop within one reply: the reply being written between
//! the rounds of its tool calls, what the loop may still do (the tools the
//! step exposes, `max_tool_rounds`, failures in a row), and the one
//! tool-call path it runs calls through.

use crate::ir::Program;
use crate::llm::{ReplyRequest, ReplyText, ToolCalls, ToolLoop, ToolRound};
use crate::runtime::actions::call_tool;
use crate::runtime::directive::Emission;
use crate::runtime::events::Event;
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use serde_json::Value;

/// A reply the model is writing, kept between the steps of its rounds.
pub(super) struct Replying {
    pub(super) request: ReplyRequest,
    /// The rounds so far that asked for tool calls, with their results.
    pub(super) rounds: Vec<ToolRound>,
    /// The calls of the last round, waiting to run at the next step.
    pub(super) asked: Option<ToolCalls>,
    pub(super) text: ReplyText,
    /// A `reply` from the pre-model bus; `None` when the model writes it.
    pub(super) verbatim: Option<String>,
    pub(super) budget: ToolBudget,
    /// Whether the line break between the `say` texts and the model's text
    /// was streamed (or is not needed).
    pub(super) separated: bool,
    /// The model already answered this reply with nothing once, and was
    /// asked again.
    pub(super) asked_again: bool,
    /// Some of the model's text was streamed: a reply set aside after it
    /// began is followed by a line break.
    pub(super) shown: bool,
}

/// What the model's tool loop may still do in this reply: the tools the
/// step exposes, the rounds used against `max_tool_rounds`, and failures in
/// a row against `max_consecutive_errors`.
pub(super) struct ToolBudget {
    pub(super) exposed: Vec<String>,
    pub(super) rounds: u32,
    pub(super) max_rounds: u32,
    pub(super) limit_hit: bool,
    /// Failures in a row, carried in from the turn and back out to it.
    pub(super) consecutive_errors: u32,
    pub(super) max_errors: Option<u32>,
    pub(super) error_limit_hit: bool,
}

impl ToolBudget {
    pub(super) fn out_of_errors(&self) -> bool {
        self.max_errors.is_some_and(|limit| self.consecutive_errors >= limit)
    }

    pub(super) fn may_call(&self) -> bool {
        self.rounds < self.max_rounds && !self.out_of_errors()
    }
}

/// The tool loop of one round: runs the tools the step exposes within the
/// budget, and keeps result directives for the post-model bus.
pub(super) struct TurnToolLoop<'a> {
    pub(super) program: &'a Program,
    pub(super) tools: &'a ToolRegistry,
    pub(super) tool_env: &'a ToolEnv,
    pub(super) budget: &'a mut ToolBudget,
    pub(super) events: Vec<Event>,
    pub(super) emissions: Vec<Emission>,
}

impl TurnToolLoop<'_> {
    /// One call the model asked for, in a round the limits allow.
    fn attempt(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        self.budget.rounds += 1;
        if !self.budget.exposed.iter().any(|exposed| exposed == name) {
            return Err(format!("the tool `{name}` is not available in this step"));
        }
        let Some(tool) = self.program.tools.iter().find(|tool| tool.name == name) else {
            return Err(format!("there is no tool `{name}`"));
        };
        let Value::Object(raw) = arguments else {
            return Err("tool arguments must be a JSON object".to_string());
        };
        let arguments = tool.params.iter().map(|param| (param, raw.get(&param.name).cloned().unwrap_or(Value::Null)));
        let made = call_tool(self.program, self.tools, self.tool_env, tool, arguments)
            .map_err(|invalid| format!("argument `{}`: {}", invalid.param, invalid.reason))?;
        self.events.push(made.event);
        let result = made.result.map_err(|error| error.to_string())?;
        self.events.extend(made.warnings.into_iter().map(|message| Event::Warning { message }));
        self.emissions.extend(made.emission);
        Ok(result)
    }
}

impl ToolLoop for TurnToolLoop<'_> {
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        if self.budget.rounds >= self.budget.max_rounds {
            self.budget.limit_hit = true;
            return Err(format!("the limit of {} tool rounds is reached", self.budget.max_rounds));
        }
        if self.budget.out_of_errors() {
            self.budget.error_limit_hit = true;
            return Err(format!("the limit of {} failures in a row is reached", self.budget.consecutive_errors));
        }
        let outcome = self.attempt(name, arguments);
        self.budget.consecutive_errors =
            if outcome.is_ok() { 0 } else { self.budget.consecutive_errors.saturating_add(1) };
        outcome
    }

    fn may_call(&self) -> bool {
        self.budget.may_call()
    }
}
