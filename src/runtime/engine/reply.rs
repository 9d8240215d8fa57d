//! Stage 5 of a turn: the reply, one model round per [`Turn::step`] (a
//! round that asks for tool calls hands them to the caller first; the next
//! step runs them and asks again), then the batch's `finalize` hooks and the
//! post-model bus.

use super::{Stage, Turn, TurnError};
use crate::ir::{Program, ToolId};
use crate::llm::rounds::MAX_ROUNDS;
use crate::llm::{ModelReply, ReplyRequest, ReplyText, ToolCall, ToolCalls, ToolLoop, ToolRound, ToolSpec};
use crate::runtime::actions::call_tool;
use crate::runtime::directive::{Emission, Merged, Source, merge};
use crate::runtime::events::{Event, Purpose, StopReason};
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use serde_json::Value;

/// A reply the model is writing, kept between the steps of its rounds.
pub(super) struct Replying {
    request: ReplyRequest,
    /// The rounds so far that asked for tool calls, with their results.
    rounds: Vec<ToolRound>,
    /// The calls of the last round, waiting to run at the next step.
    asked: Option<ToolCalls>,
    text: ReplyText,
    /// A `reply` from the pre-model bus; `None` when the model writes it.
    verbatim: Option<String>,
    budget: ToolBudget,
    /// Whether the line break between the `say` texts and the model's text
    /// was streamed (or is not needed).
    separated: bool,
}

impl Turn<'_> {
    /// Starts the reply: the pre-model bus settles, and the model is asked
    /// its first round when the reply needs it. Returns the tool calls the
    /// model asked for, which run at the next step.
    pub(super) fn reply(&mut self) -> Result<Option<Vec<ToolCall>>, TurnError> {
        let program = self.program();
        let (pre, verbatim) = self.settle_pre_bus();
        let needs_model = !self.halt
            && verbatim.is_none()
            && self.stop != Some(StopReason::Aborted)
            && (!self.instructions.is_empty() || (self.session.flow.is_none() && self.says.is_empty()));
        if !needs_model || self.over_token_budget() {
            self.complete_reply(&program, verbatim, None)?;
            return Ok(None);
        }
        let request = self.reply_request(&program, &pre.append_prompt, &pre.inject_tools);
        // The `say` texts lead the reply: shown at once, with the line
        // break that joins them to the model's text sent only once that
        // text starts.
        let said = self.says.join("\n");
        if let Some(sink) = self.runtime.stream.as_mut()
            && !said.is_empty()
        {
            sink(&said);
        }
        let budget = ToolBudget {
            exposed: request.tools.iter().map(|tool| tool.name.clone()).collect(),
            rounds: 0,
            max_rounds: program.agent.limits.max_tool_rounds,
            limit_hit: false,
            consecutive_errors: self.consecutive_errors,
            max_errors: self.runtime.limits.max_consecutive_errors,
            error_limit_hit: false,
        };
        self.replying = Some(Replying {
            request,
            rounds: Vec::new(),
            asked: None,
            text: ReplyText::default(),
            verbatim,
            budget,
            separated: said.is_empty(),
        });
        self.model_round(&program)
    }

    /// Runs the tool calls the model asked for in its last round, through
    /// the one tool-call path, and asks the model again.
    pub(super) fn answer_tool_calls(&mut self) -> Result<Option<Vec<ToolCall>>, TurnError> {
        let program = self.program();
        let Some(replying) = self.replying.as_mut() else {
            self.stage = Stage::PostSignals;
            return Ok(None);
        };
        let asked = replying.asked.take().unwrap_or_default();
        let mut tool_loop = TurnToolLoop {
            program: &program,
            tools: &self.runtime.tools,
            tool_env: &self.runtime.tool_env,
            budget: &mut replying.budget,
            events: Vec::new(),
            emissions: Vec::new(),
        };
        // A call whose arguments could not be read is answered with that
        // error, without running.
        let results = asked
            .calls
            .iter()
            .map(|call| call.arguments.clone().and_then(|arguments| tool_loop.call_tool(&call.name, arguments)))
            .collect();
        let events = std::mem::take(&mut tool_loop.events);
        let emissions = std::mem::take(&mut tool_loop.emissions);
        replying.rounds.push(ToolRound { asked, results });
        for event in events {
            self.emit(event);
        }
        self.post_bus.extend(emissions);
        self.model_round(&program)
    }

    /// One round of the model's reply: the reply is done (and completed
    /// here), or the model asks for tool calls, which are returned.
    fn model_round(&mut self, program: &Program) -> Result<Option<Vec<ToolCall>>, TurnError> {
        let Some(replying) = self.replying.as_mut() else {
            return Ok(None);
        };
        let answer = if replying.rounds.len() < MAX_ROUNDS {
            replying.request.tools_spent = !replying.budget.may_call();
            let runtime = &mut *self.runtime;
            let mut stream = runtime.stream.as_mut();
            let separated = &mut replying.separated;
            let mut on_text = |chunk: &str| {
                if let Some(sink) = stream.as_mut() {
                    if !*separated && !chunk.is_empty() {
                        *separated = true;
                        sink("\n");
                    }
                    sink(chunk);
                }
            };
            let provider = runtime.provider.as_mut();
            let (request, rounds) = (&replying.request, &replying.rounds);
            Some(replying.text.round(&mut on_text, |on_text| provider.reply(request, rounds, on_text))?)
        } else {
            // A safety net against a provider that never stops asking:
            // the reply is what was written so far.
            None
        };
        match answer {
            Some(ModelReply::ToolCalls(asked)) => {
                replying.text.add(&asked.text, asked.usage);
                let calls = asked.calls.clone();
                replying.asked = Some(asked);
                self.stage = Stage::ToolCalls;
                Ok(Some(calls))
            }
            Some(ModelReply::Done(response)) => {
                replying.text.add(&response.text, response.usage);
                self.finish_model_reply(program)?;
                Ok(None)
            }
            None => {
                self.finish_model_reply(program)?;
                Ok(None)
            }
        }
    }

    /// The model has written the reply: its usage is counted and the reply
    /// completed.
    fn finish_model_reply(&mut self, program: &Program) -> Result<(), TurnError> {
        let Some(replying) = self.replying.take() else {
            return Ok(());
        };
        let Replying { text, verbatim, budget, .. } = replying;
        self.tool_rounds = budget.rounds;
        self.tool_limit_hit = budget.limit_hit;
        self.consecutive_errors = budget.consecutive_errors;
        // A loop the limit cut short (tools were no longer offered, or a
        // call was refused) stopped for the errors.
        self.error_limit_hit = budget.error_limit_hit || budget.out_of_errors();
        let response = text.finish();
        self.count_call(Purpose::Respond, response.usage);
        self.complete_reply(program, verbatim, Some(response.text))
    }

    /// Merges the whole pre-model bus before the model is asked: its halt,
    /// and its verbatim `reply` unless the flow was aborted. Returns the
    /// merge (for its augmentation) and the verbatim reply.
    fn settle_pre_bus(&mut self) -> (Merged, Option<String>) {
        let pre = merge(&self.pre_bus);
        for warning in &pre.warnings {
            self.warn(warning.clone());
        }
        self.halt |= pre.halt;
        let mut verbatim = pre.reply.as_ref().map(|(reply, _)| reply.clone());
        // An abort that is not on the bus (a signal's, or `max_asks` with no
        // `on_no_answer`) beats a reply all the same.
        if self.stop == Some(StopReason::Aborted)
            && let Some((_, index)) = &pre.reply
        {
            let source = self.pre_bus.get(*index).map(|emission| emission.source.to_string()).unwrap_or_default();
            self.warn(format!("the reply from {source} was dropped: the flow was aborted"));
            verbatim = None;
        }
        (pre, verbatim)
    }

    /// After the model (or without it): the batch finalizes, the post-model
    /// bus is applied, and the reply is put together.
    fn complete_reply(
        &mut self,
        program: &Program,
        verbatim: Option<String>,
        model_text: Option<String>,
    ) -> Result<(), TurnError> {
        if self.halt && self.stop == Some(StopReason::NeedsInput) {
            self.stop = Some(StopReason::Halt);
        }
        self.finalize_batch(program)?;
        let post_reply = self.apply_post_bus()?;
        let mut parts: Vec<String> = self.says.clone();
        match (post_reply.or(verbatim), model_text) {
            (Some(reply), _) => parts.push(reply),
            (None, Some(text)) if !text.trim().is_empty() => parts.push(text),
            _ => {}
        }
        self.reply = parts.join("\n");
        if self.error_limit_hit {
            self.stop = Some(StopReason::ErrorLimit);
        }
        if self.tool_limit_hit {
            self.stop = Some(StopReason::ToolRoundLimit);
        }
        if self.over_token_budget() {
            self.stop = Some(StopReason::TokenLimit);
        }
        self.stage = Stage::PostSignals;
        Ok(())
    }

    /// Every step of the batch finalizes, in order. The reply is written:
    /// a failing `finalize` is traced and dropped, not a failed turn.
    fn finalize_batch(&mut self, program: &Program) -> Result<(), TurnError> {
        for (flow, step) in std::mem::take(&mut self.batch) {
            let Some(step) = program.flow(flow).and_then(|found| found.step(step)) else {
                continue;
            };
            let path = format!("{}.{}.finalize", self.flow_name(flow), step.name);
            match self.run_post_hook(&step.finalize, &path) {
                Ok(()) => {}
                Err(TurnError::Action(failure)) => {
                    self.emit(Event::HookFailed { hook: path, error: failure.to_string() })
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The post-model bus: writes and a position for the next turn;
    /// augmentation can no longer act. Returns its `reply`, which replaces
    /// the model's.
    fn apply_post_bus(&mut self) -> Result<Option<String>, TurnError> {
        let post = merge(&self.post_bus);
        for warning in &post.warnings {
            self.warn(warning.clone());
        }
        let post_emissions = std::mem::take(&mut self.post_bus);
        for (index, emission) in post_emissions.iter().enumerate() {
            if emission.has_augmentation() {
                self.warn(format!(
                    "{}: halt, append_prompt and inject_tools act only before the model; dropped",
                    emission.source
                ));
            }
            let lost =
                emission.position.is_some() && post.position.as_ref().is_some_and(|(_, winner)| *winner != index);
            if emission.source != Source::Pending {
                self.record(emission, !lost);
            }
        }
        self.apply_writes(&post.set, &post.set_context, "post-model bus");
        if let Some((position, _)) = post.position {
            self.park(position)?;
        }
        Ok(post.reply.map(|(reply, _)| reply))
    }

    pub(super) fn reply_request(
        &mut self,
        program: &Program,
        appended: &[String],
        injected: &[ToolId],
    ) -> ReplyRequest {
        let identity = program.agent.identity.as_ref().map(|identity| self.render(identity));
        let rules: Vec<String> = program.agent.rules.iter().map(|rule| self.render(rule)).collect();
        let flow_rules: Vec<String> = self
            .session
            .flow
            .and_then(|flow| program.flow(flow))
            .map(|flow| flow.rules.iter().map(|rule| self.render(rule)).collect())
            .unwrap_or_default();
        let mut tools: Vec<ToolId> = self
            .asking
            .and_then(|(flow, step)| program.flow(flow).and_then(|found| found.step(step)))
            .map(|step| step.tools.clone())
            .unwrap_or_default();
        for tool in injected {
            if !tools.contains(tool) {
                tools.push(*tool);
            }
        }
        ReplyRequest {
            identity,
            rules,
            flow_rules,
            instructions: self.instructions.clone(),
            appended: appended.to_vec(),
            said: self.says.clone(),
            history: self.history_window(),
            message: self.message.clone(),
            data: self.session.data.clone().into_iter().collect(),
            tools: tools
                .iter()
                .filter_map(|tool| program.tool(*tool))
                .map(|tool| ToolSpec {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: crate::ir::object_schema(&tool.params),
                })
                .collect(),
            tools_spent: false,
            // After the steps acted: see `understand_request`.
            deadline: None,
        }
    }
}

/// What the model's tool loop may still do in this reply: the tools the
/// step exposes, the rounds used against `max_tool_rounds`, and failures in
/// a row against `max_consecutive_errors`.
pub(super) struct ToolBudget {
    exposed: Vec<String>,
    rounds: u32,
    max_rounds: u32,
    limit_hit: bool,
    /// Failures in a row, carried in from the turn and back out to it.
    consecutive_errors: u32,
    max_errors: Option<u32>,
    error_limit_hit: bool,
}

impl ToolBudget {
    fn out_of_errors(&self) -> bool {
        self.max_errors.is_some_and(|limit| self.consecutive_errors >= limit)
    }

    fn may_call(&self) -> bool {
        self.rounds < self.max_rounds && !self.out_of_errors()
    }
}

/// The tool loop of one round: runs the tools the step exposes within the
/// budget, and keeps result directives for the post-model bus.
struct TurnToolLoop<'a> {
    program: &'a Program,
    tools: &'a ToolRegistry,
    tool_env: &'a ToolEnv,
    budget: &'a mut ToolBudget,
    events: Vec<Event>,
    emissions: Vec<Emission>,
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
