//! Stage 5 of a turn: the reply, one model call with its tool loop, then
//! the batch's `finalize` hooks and the post-model bus.

use super::{Stage, Turn, TurnError};
use crate::ir::{Program, ToolId};
use crate::llm::{ReplyRequest, ToolLoop, ToolSpec, reply_with_tools};
use crate::runtime::directive::{Emission, Source, merge};
use crate::runtime::events::{Event, Purpose, StopReason};
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::runtime::validate::validate;
use serde_json::Value;
use std::time::Instant;

impl Turn<'_> {
    pub(super) fn respond(&mut self) -> Result<(), TurnError> {
        let program = self.program();
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
        let needs_model = !self.halt
            && verbatim.is_none()
            && self.stop != Some(StopReason::Aborted)
            && (!self.instructions.is_empty() || (self.session.flow.is_none() && self.says.is_empty()));
        let mut model_text = None;
        if needs_model && !self.over_token_budget() {
            let request = self.respond_request(&program, &pre.append_prompt, &pre.inject_tools);
            let mut tool_loop = TurnToolLoop {
                program: &program,
                tools: &self.runtime.tools,
                tool_env: &self.runtime.tool_env,
                exposed: request.tools.iter().map(|tool| tool.name.clone()).collect(),
                rounds: 0,
                max_rounds: program.agent.limits.max_tool_rounds,
                limit_hit: false,
                events: Vec::new(),
                emissions: Vec::new(),
            };
            let mut stream = self.runtime.stream.as_mut();
            // The `say` texts lead the reply: shown at once, with the line
            // break that joins them to the model's text sent only once that
            // text starts.
            let said = self.says.join("\n");
            if let Some(sink) = stream.as_mut()
                && !said.is_empty()
            {
                sink(&said);
            }
            let mut separated = said.is_empty();
            let mut on_text = |chunk: &str| {
                if let Some(sink) = stream.as_mut() {
                    if !separated && !chunk.is_empty() {
                        separated = true;
                        sink("\n");
                    }
                    sink(chunk);
                }
            };
            let response = reply_with_tools(self.runtime.provider.as_mut(), &request, &mut tool_loop, &mut on_text)?;
            self.tool_rounds = tool_loop.rounds;
            self.tool_limit_hit = tool_loop.limit_hit;
            let tool_events = std::mem::take(&mut tool_loop.events);
            let tool_emissions = std::mem::take(&mut tool_loop.emissions);
            drop(tool_loop);
            for event in tool_events {
                self.emit(event);
            }
            self.post_bus.extend(tool_emissions);
            self.count_call(Purpose::Respond, response.usage);
            model_text = Some(response.text);
        }
        if self.halt && self.stop == Some(StopReason::NeedsInput) {
            self.stop = Some(StopReason::Halt);
        }
        // Every step of the batch finalizes, in order. The reply is written:
        // a failing `finalize` is traced and dropped, not a failed turn.
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
        // The post-model bus: writes and a position for the next turn;
        // augmentation can no longer act.
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
            if emission.source.0 != "pending" {
                self.record(emission, !lost);
            }
        }
        self.apply_writes(&post.set, &post.set_context, "post-model bus");
        if let Some((position, _)) = post.position {
            self.park(position)?;
        }

        let mut parts: Vec<String> = self.says.clone();
        match (post.reply.map(|(reply, _)| reply).or(verbatim), model_text) {
            (Some(reply), _) => parts.push(reply),
            (None, Some(text)) if !text.trim().is_empty() => parts.push(text),
            _ => {}
        }
        self.reply = parts.join("\n");
        if self.tool_limit_hit {
            self.stop = Some(StopReason::ToolRoundLimit);
        }
        if self.over_token_budget() {
            self.stop = Some(StopReason::TokenLimit);
        }
        self.stage = Stage::PostSignals;
        Ok(())
    }

    pub(super) fn respond_request(
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
        }
    }
}

/// The tool loop of one reply: runs the tools the step exposes, counts
/// rounds, and keeps result directives for the post-model bus.
pub(super) struct TurnToolLoop<'a> {
    program: &'a Program,
    tools: &'a ToolRegistry,
    tool_env: &'a ToolEnv,
    exposed: Vec<String>,
    rounds: u32,
    max_rounds: u32,
    limit_hit: bool,
    events: Vec<Event>,
    emissions: Vec<Emission>,
}

impl ToolLoop for TurnToolLoop<'_> {
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        if self.rounds >= self.max_rounds {
            self.limit_hit = true;
            return Err(format!("the limit of {} tool rounds is reached", self.max_rounds));
        }
        self.rounds += 1;
        if !self.exposed.iter().any(|exposed| exposed == name) {
            return Err(format!("the tool `{name}` is not available in this step"));
        }
        let Some(tool) = self.program.tools.iter().find(|tool| tool.name == name) else {
            return Err(format!("there is no tool `{name}`"));
        };
        let Value::Object(raw) = arguments else {
            return Err("tool arguments must be a JSON object".to_string());
        };
        let mut args = serde_json::Map::new();
        for param in &tool.params {
            let value = raw.get(&param.name).cloned().unwrap_or(Value::Null);
            match validate(&value, &param.ty) {
                Ok(valid) => {
                    args.insert(param.name.clone(), valid);
                }
                Err(reason) => return Err(format!("argument `{}`: {reason}", param.name)),
            }
        }
        let started = Instant::now();
        let result = self.tools.call(tool, &args, self.tool_env);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(result) => {
                self.events.push(Event::ToolCalled { tool: name.to_string(), ok: true, duration_ms, error: None });
                if let Some(directive) = result.get("directive") {
                    let (emission, warnings) =
                        crate::runtime::actions::emission_from_json(self.program, directive, Source::new("tool", name));
                    for message in warnings {
                        self.events.push(Event::Warning { message });
                    }
                    self.emissions.push(emission);
                }
                Ok(result)
            }
            Err(error) => {
                self.events.push(Event::ToolCalled {
                    tool: name.to_string(),
                    ok: false,
                    duration_ms,
                    error: Some(error.to_string()),
                });
                Err(error.to_string())
            }
        }
    }

    fn may_call(&self) -> bool {
        self.rounds < self.max_rounds
    }
}
