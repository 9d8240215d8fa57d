//! The Anthropic provider: the Messages API.
//!
//! **Understand** is one forced tool call (`tool_choice: {type: tool}`)
//! whose `input_schema` is the answer's schema; an invalid answer is sent
//! back once as an error `tool_result` with the validation message, then
//! the call fails with [`ProviderError::InvalidOutput`]. Streamed
//! ([`Provider::understand_streamed`]), the call's `input_json_delta`
//! pieces are read as they arrive; an answer invalid once whole is
//! repaired the same way, its input sent back as the model wrote it. A
//! server (or proxy) that refuses to stream it is asked whole, then and
//! for the rest of the session, as on the OpenAI-compatible path.
//!
//! **Reply** streams server-sent events (`content_block_delta` text and
//! `input_json_delta` tool input), one round at a time: a round whose
//! `tool_use` blocks the caller should run returns them, and the next
//! round sends that assistant turn back followed by one `tool_result`
//! block per result. Tools are offered unless the request's tool budget
//! is spent.
//!
//! The stable prefix of each system prompt carries `cache_control`, so
//! Anthropic caches it (when it is long enough: 1,024 tokens on most
//! models); cache reads are reported as cached tokens.

use crate::llm::config::{ProviderConfig, Secret};
use crate::llm::http::{CallError, EventStream, HttpClient, SseEvent};
use crate::llm::prompt::{self, AnswerFormat, Prompt};
use crate::llm::rounds::{RoundText, result_text};
use crate::llm::schema::{self, understanding_schema};
use crate::llm::streamed::{AnswerReader, AnswerSource, Extraction, Understood, understood, validate_prefix};
use crate::llm::{
    ModelReply, Provider, ProviderError, ReplyRequest, Response, ToolCall, ToolCalls, ToolRound, ToolSpec,
    UnderstandRequest, Understanding, Usage,
};
use crate::message::Role;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub const API_VERSION: &str = "2023-06-01";
const UNDERSTAND_TOOL: &str = "record_understanding";
const DEFAULT_MAX_TOKENS: u32 = 1024;

pub struct Anthropic {
    http: HttpClient,
    base_url: String,
    model: String,
    api_key: Option<Secret>,
    temperature: Option<f64>,
    max_tokens: u32,
    /// Whether the understand call is streamed; off once the server
    /// refused a streamed one.
    stream_understand: bool,
}

impl Anthropic {
    pub fn new(config: &ProviderConfig) -> Result<Anthropic, ProviderError> {
        let secrets = config.api_key.iter().map(|key| key.expose().to_string()).collect();
        Ok(Anthropic {
            http: HttpClient::new(config.http.clone(), config.cancel.clone(), secrets)?,
            base_url: config.base_url.trim_end_matches('/').to_string(),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            temperature: config.temperature,
            max_tokens: config.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            stream_understand: true,
        })
    }

    fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("x-api-key", key.expose().to_string()));
        }
        headers
    }

    fn body(&self, system: Value, messages: &[Value]) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("max_tokens".into(), json!(self.max_tokens));
        body.insert("system".into(), system);
        body.insert("messages".into(), Value::Array(messages.to_vec()));
        if let Some(temperature) = self.temperature {
            body.insert("temperature".into(), json!(temperature.min(1.0)));
        }
        body
    }

    fn understand_body(&self, prompt: &Prompt, answer_schema: &Value, messages: &[Value]) -> Map<String, Value> {
        let mut body = self.body(system_blocks(prompt, false), messages);
        body.insert(
            "tools".into(),
            json!([{
                "name": UNDERSTAND_TOOL,
                "description": "Record what the user's latest message says.",
                "input_schema": answer_schema,
            }]),
        );
        body.insert("tool_choice".into(), json!({"type": "tool", "name": UNDERSTAND_TOOL}));
        body
    }

    fn understand_call(
        &self,
        prompt: &Prompt,
        answer_schema: &Value,
        messages: &[Value],
    ) -> Result<(Value, Usage), ProviderError> {
        let body = Value::Object(self.understand_body(prompt, answer_schema, messages));
        let answer = self
            .http
            .post_json(&self.url(), &self.headers(), &body, &|_, _| false)
            .map_err(CallError::into_provider_error)?;
        let usage = call_usage(&answer, &body);
        Ok((answer, usage))
    }

    /// Validates an understand answer (a Messages response), with one
    /// repair when it is invalid: the error goes back as the forced call's
    /// `tool_result`. Returns what `read` made of it and the calls' usage.
    fn settle<T>(
        &self,
        prompt: &Prompt,
        answer_schema: &Value,
        mut messages: Vec<Value>,
        first: Value,
        mut usage: Usage,
        read: &dyn Fn(&Value) -> Result<T, String>,
    ) -> Result<(T, Usage), ProviderError> {
        let mut answer = first;
        let mut repaired = false;
        loop {
            let error = match read(&answer) {
                Ok(value) => return Ok((value, usage)),
                Err(error) if repaired => {
                    return Err(ProviderError::InvalidOutput(format!("{error} (after one repair attempt)")));
                }
                Err(error) => error,
            };
            repaired = true;
            let content = echoed_content(&answer);
            let tool_use_id = tool_use(&answer).and_then(|block| block.get("id")).and_then(Value::as_str);
            let reply = match tool_use_id.filter(|id| !id.is_empty()) {
                Some(id) => json!([{
                    "type": "tool_result",
                    "tool_use_id": id,
                    "content": prompt::repair(&error),
                    "is_error": true,
                }]),
                None => json!(prompt::repair(&error)),
            };
            messages.push(json!({"role": "assistant", "content": content}));
            messages.push(json!({"role": "user", "content": reply}));
            let (next, next_usage) = self.understand_call(prompt, answer_schema, &messages)?;
            answer = next;
            usage.add(next_usage);
        }
    }

    fn stream_round(
        &self,
        system: &Value,
        messages: &[Value],
        tools: &[ToolSpec],
        offer_tools: bool,
        sink: &mut RoundText<'_>,
    ) -> Result<Round, ProviderError> {
        let mut body = self.body(system.clone(), messages);
        body.insert("stream".into(), Value::Bool(true));
        // Once tool_use blocks are in the conversation the tools must stay
        // declared; `none` then stops further calls.
        let used_tools = messages.iter().any(has_tool_use);
        if offer_tools || used_tools {
            body.insert("tools".into(), Value::Array(tools.iter().map(tool_definition).collect()));
            let choice = if offer_tools { "auto" } else { "none" };
            body.insert("tool_choice".into(), json!({ "type": choice }));
        }
        let mut round = Round::default();
        let body = Value::Object(body);
        let done = self
            .http
            .post_stream(&self.url(), &self.headers(), &body, &|_, _| false, &mut |event| {
                read_event(&event, &mut round, sink)
            })
            .map_err(CallError::into_provider_error)?;
        if !done {
            return Err(ProviderError::Network("the answer stream ended before `message_stop`".into()));
        }
        round.usage = usage::streamed_usage(round.usage, round.reported, sent_bytes(&body), round.received);
        round.usage.calls = 1;
        Ok(round)
    }
}

impl Provider for Anthropic {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    fn ask(&mut self, request: &crate::llm::AskRequest) -> Result<crate::llm::AskAnswer, ProviderError> {
        self.ask_value(request)
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        if request.is_empty() {
            return Ok(Understanding::default());
        }
        self.http.set_deadline(request.deadline);
        let answer_schema = understanding_schema(request);
        let prompt = prompt::understand(request, AnswerFormat::Tool(UNDERSTAND_TOOL));
        let messages = vec![json!({"role": "user", "content": prompt.dynamic})];
        let (answer, usage) = self.understand_call(&prompt, &answer_schema, &messages)?;
        let read = |answer: &Value| tool_input(answer).and_then(|input| schema::validate(input, request));
        let (mut understanding, usage) = self.settle(&prompt, &answer_schema, messages, answer, usage, &read)?;
        understanding.usage = usage;
        Ok(understanding)
    }

    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        if request.is_empty() {
            return Ok(Understood::default());
        }
        if !self.stream_understand {
            return self.understand(request).map(|understanding| Understood { understanding, reply: None });
        }
        self.http.set_deadline(request.deadline);
        let answer_schema = understanding_schema(request);
        let prompt = prompt::understand(request, AnswerFormat::Tool(UNDERSTAND_TOOL));
        let messages = vec![json!({"role": "user", "content": prompt.dynamic})];
        let mut body = self.understand_body(&prompt, &answer_schema, &messages);
        body.insert("stream".into(), Value::Bool(true));
        let body = Value::Object(body);
        let events = match self.http.open_stream(&self.url(), &self.headers(), &body, &refuses_streaming) {
            Ok(events) => events,
            // The answer comes whole from then on: the reply with it, once
            // the call is done.
            Err(CallError::Rejected { .. }) => {
                self.stream_understand = false;
                return self.understand(request).map(|understanding| Understood { understanding, reply: None });
            }
            Err(CallError::Failed(error)) => return Err(error),
        };
        let source = ToolInputSource::new(events, sent_bytes(&body));
        let call_id = source.call_id.clone();
        let mut answer = AnswerReader::new(Box::new(source));
        if let Extraction::Prefix(prefix) = answer.extraction()? {
            match validate_prefix(prefix, request, answer.has_reply()) {
                Ok(understanding) => return understood(answer, understanding, request),
                // Read to the end, for the repair below.
                Err(_) => answer.drain()?,
            }
        }
        // The answer as a whole message, so it is repaired like one.
        let input = serde_json::from_str::<Value>(answer.text()).unwrap_or_else(|_| json!(answer.text()));
        let id = call_id.lock().map(|id| id.clone()).unwrap_or_default();
        let stop_reason = if answer.truncated() { "max_tokens" } else { "tool_use" };
        let whole = json!({
            "content": [{"type": "tool_use", "id": id, "name": UNDERSTAND_TOOL, "input": input}],
            "stop_reason": stop_reason,
        });
        let read = |answer: &Value| tool_input(answer).and_then(|input| schema::validate(input, request));
        let (mut understanding, usage) =
            self.settle(&prompt, &answer_schema, messages, whole, answer.usage(), &read)?;
        understanding.usage = usage;
        Ok(Understood { understanding, reply: None })
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        self.http.set_deadline(request.deadline);
        let prompt = prompt::reply_prompt(request);
        let system = system_blocks(&prompt, true);
        let mut messages = conversation(request);
        for round in rounds {
            messages.push(json!({"role": "assistant", "content": assistant_content(round)}));
            let results: Vec<Value> = round
                .answered()
                .map(|(call, result)| {
                    let mut block =
                        json!({"type": "tool_result", "tool_use_id": call.id, "content": result_text(result)});
                    if let (true, Some(map)) = (call.arguments.is_err(), block.as_object_mut()) {
                        map.insert("is_error".into(), Value::Bool(true));
                    }
                    block
                })
                .collect();
            messages.push(json!({"role": "user", "content": results}));
        }
        let offer_tools = !request.tools.is_empty() && !request.tools_spent;
        let mut text = RoundText::new(on_text);
        let round = self.stream_round(&system, &messages, &request.tools, offer_tools, &mut text)?;
        let calls: Vec<ToolCall> = round
            .blocks
            .values()
            .filter(|block| block.kind == "tool_use")
            .map(|block| ToolCall { id: block.id.clone(), name: block.name.clone(), arguments: block.input() })
            .collect();
        if calls.is_empty() || !offer_tools {
            return Ok(ModelReply::Done(Response { text: text.text, usage: round.usage }));
        }
        let echo = round.content();
        Ok(ModelReply::ToolCalls(ToolCalls { calls, text: text.text, usage: round.usage, echo }))
    }
}

/// Whether a server refused a request for streaming it (a proxy in front
/// of the Messages API, a compatible server that streams no tool input):
/// an error that names the stream, not the prompt's size.
fn refuses_streaming(status: u16, message: &str) -> bool {
    matches!(status, 400 | 422 | 500 | 501)
        && message.to_lowercase().contains("stream")
        && !crate::llm::context::is_overflow(message)
}

/// The assistant turn of an earlier round: its content blocks as the model
/// sent them, or, for a round the caller wrote itself, its text and calls.
fn assistant_content(round: &ToolRound) -> Value {
    if round.asked.echo.is_array() {
        return round.asked.echo.clone();
    }
    let mut blocks = Vec::new();
    if !round.asked.text.is_empty() {
        blocks.push(json!({"type": "text", "text": round.asked.text}));
    }
    for call in &round.asked.calls {
        let input = call.arguments.clone().unwrap_or_else(|_| json!({}));
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    Value::Array(blocks)
}

/// The system prompt as blocks: the stable prefix marked for caching, then
/// the dynamic part (when there is one).
fn system_blocks(prompt: &Prompt, with_dynamic: bool) -> Value {
    let mut blocks = vec![json!({"type": "text", "text": prompt.stable, "cache_control": {"type": "ephemeral"}})];
    if with_dynamic && !prompt.dynamic.is_empty() {
        blocks.push(json!({"type": "text", "text": prompt.dynamic}));
    }
    Value::Array(blocks)
}

/// The chat turns: the API wants the first one from the user, so a
/// conversation the agent opened starts with a neutral cue.
fn conversation(request: &ReplyRequest) -> Vec<Value> {
    let turns = prompt::conversation(request);
    let mut messages = Vec::with_capacity(turns.len() + 1);
    if turns.first().is_some_and(|turn| turn.role == Role::Assistant) {
        messages.push(json!({"role": "user", "content": "(The conversation starts.)"}));
    }
    for turn in turns {
        let role = if turn.role == Role::User { "user" } else { "assistant" };
        messages.push(json!({"role": role, "content": turn.text}));
    }
    messages
}

fn tool_definition(tool: &ToolSpec) -> Value {
    let mut definition = Map::new();
    definition.insert("name".into(), Value::String(tool.name.clone()));
    if let Some(description) = &tool.description {
        definition.insert("description".into(), Value::String(description.clone()));
    }
    definition.insert("input_schema".into(), tool.parameters.clone());
    Value::Object(definition)
}

fn has_tool_use(message: &Value) -> bool {
    message
        .get("content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| blocks.iter().any(|block| block.get("type").and_then(Value::as_str) == Some("tool_use")))
}

fn tool_use(answer: &Value) -> Option<&Value> {
    answer.get("content").and_then(Value::as_array).and_then(|blocks| {
        blocks.iter().find(|block| {
            block.get("type").and_then(Value::as_str) == Some("tool_use")
                && block.get("name").and_then(Value::as_str) == Some(UNDERSTAND_TOOL)
        })
    })
}

/// The input of the answer's forced call.
fn tool_input(answer: &Value) -> Result<&Value, String> {
    let truncated = answer.get("stop_reason").and_then(Value::as_str) == Some("max_tokens");
    if truncated {
        return Err("the answer was cut off by the max_tokens limit".into());
    }
    tool_use(answer)
        .and_then(|block| block.get("input"))
        .ok_or_else(|| format!("the answer must call the `{UNDERSTAND_TOOL}` tool"))
}

/// An answer's content blocks, to send back before a repair: a streamed
/// input that was not a JSON object goes back as an empty one (the API
/// takes no other), the error saying what was wrong with it.
fn echoed_content(answer: &Value) -> Value {
    let mut content = answer.get("content").cloned().unwrap_or_else(|| json!([]));
    for block in content.as_array_mut().into_iter().flatten() {
        if let Some(input) = block.get_mut("input").filter(|input| !input.is_object()) {
            *input = json!({});
        }
    }
    content
}

/// The text of a streamed understand answer: the `input_json_delta`
/// pieces of the forced `tool_use` block.
struct ToolInputSource {
    events: EventStream,
    usage: Usage,
    truncated: bool,
    stopped: bool,
    /// The `tool_use` block's id, which a repair's `tool_result` names.
    call_id: Arc<Mutex<String>>,
    /// Whether the server sent a `usage` block with counts in it.
    reported: bool,
    /// The bytes of the request that count as prompt ([`sent_bytes`]).
    sent: usize,
    /// The bytes of answer text received so far.
    received: usize,
}

impl ToolInputSource {
    fn new(events: EventStream, sent: usize) -> ToolInputSource {
        ToolInputSource {
            events,
            usage: Usage { calls: 1, ..Usage::default() },
            truncated: false,
            stopped: false,
            call_id: Arc::default(),
            reported: false,
            sent,
            received: 0,
        }
    }

    /// Takes a `usage` block when it counts anything.
    fn take_usage(&mut self, usage: Option<&Value>) {
        if reported(usage) {
            self.usage = read_usage(usage);
            self.reported = true;
        }
    }
}

impl AnswerSource for ToolInputSource {
    fn next_piece(&mut self) -> Result<Option<String>, ProviderError> {
        loop {
            if self.stopped {
                return Ok(None);
            }
            let Some(event) = self.events.next_event()? else {
                return Err(ProviderError::Network("the answer stream ended before `message_stop`".into()));
            };
            let data: Value = serde_json::from_str(event.data.trim())
                .map_err(|error| ProviderError::InvalidOutput(format!("a stream event is not JSON ({error})")))?;
            let kind = if event.event.is_empty() {
                data.get("type").and_then(Value::as_str).unwrap_or("")
            } else {
                &event.event
            };
            match kind {
                "message_start" => self.take_usage(data.pointer("/message/usage")),
                "content_block_start" => {
                    let block = data.get("content_block");
                    let is_call = block.and_then(|block| block.get("type")).and_then(Value::as_str) == Some("tool_use");
                    if let (true, Some(id), Ok(mut call_id)) =
                        (is_call, block.and_then(|block| block.get("id")).and_then(Value::as_str), self.call_id.lock())
                    {
                        *call_id = id.to_string();
                    }
                }
                "content_block_delta" => {
                    let part = data.pointer("/delta/partial_json").and_then(Value::as_str).unwrap_or("");
                    if !part.is_empty() {
                        self.received += part.len();
                        return Ok(Some(part.to_string()));
                    }
                }
                "message_delta" => {
                    if let Some(output) = data.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                        self.usage.completion = output;
                    }
                    self.truncated = data.pointer("/delta/stop_reason").and_then(Value::as_str) == Some("max_tokens");
                }
                "message_stop" => self.stopped = true,
                // A server that does not stream this request answers with
                // the whole message: its call's input is the one piece.
                "message" => {
                    self.take_usage(data.get("usage"));
                    self.truncated = data.get("stop_reason").and_then(Value::as_str) == Some("max_tokens");
                    self.stopped = true;
                    let block = tool_use(&data);
                    if let (Some(id), Ok(mut call_id)) =
                        (block.and_then(|block| block.get("id")).and_then(Value::as_str), self.call_id.lock())
                    {
                        *call_id = id.to_string();
                    }
                    if let Some(input) = block.and_then(|block| block.get("input")) {
                        let input = input.to_string();
                        self.received += input.len();
                        return Ok(Some(input));
                    }
                }
                "error" => return Err(stream_error(data.get("error"))),
                _ => {}
            }
        }
    }

    fn usage(&self) -> Usage {
        // The estimate waits for the end, as on the OpenAI path: a part
        // estimate taken with the extraction would be counted twice.
        if self.stopped {
            usage::streamed_usage(self.usage, self.reported, self.sent, self.received)
        } else {
            self.usage
        }
    }

    fn dropped_usage(&self) -> Usage {
        usage::streamed_usage(self.usage, self.reported, self.sent, self.received)
    }

    fn truncated(&self) -> bool {
        self.truncated
    }
}

/// What one streamed round produced.
#[derive(Default)]
struct Round {
    /// Content blocks by their stream `index`.
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    /// Whether the server sent a `usage` block with counts in it.
    reported: bool,
    /// The bytes of text and tool input received, for an estimate.
    received: usize,
}

impl Round {
    /// The assistant turn to feed back: its text and tool_use blocks.
    fn content(&self) -> Value {
        let blocks: Vec<Value> = self
            .blocks
            .values()
            .filter_map(|block| match block.kind.as_str() {
                "text" if !block.text.is_empty() => Some(json!({"type": "text", "text": block.text})),
                "tool_use" => Some(json!({
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": block.input().unwrap_or_else(|_| json!({})),
                })),
                _ => None,
            })
            .collect();
        Value::Array(blocks)
    }
}

#[derive(Default)]
struct Block {
    kind: String,
    id: String,
    name: String,
    text: String,
    /// The tool input as streamed (`input_json_delta` pieces).
    json: String,
}

impl Block {
    fn input(&self) -> Result<Value, String> {
        if self.json.trim().is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_str(&self.json).map_err(|error| format!("the tool input is not valid JSON ({error})"))
    }
}

/// Handles one event of a Messages stream; `Ok(true)` at `message_stop`.
fn read_event(event: &SseEvent, round: &mut Round, sink: &mut RoundText<'_>) -> Result<bool, ProviderError> {
    let data: Value = serde_json::from_str(event.data.trim())
        .map_err(|error| ProviderError::InvalidOutput(format!("a stream event is not JSON ({error})")))?;
    let kind =
        if event.event.is_empty() { data.get("type").and_then(Value::as_str).unwrap_or("") } else { &event.event };
    let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
    match kind {
        "message_start" => {
            let usage = data.pointer("/message/usage");
            if reported(usage) {
                round.usage = read_usage(usage);
                round.reported = true;
            }
        }
        "content_block_start" => {
            let block = data.get("content_block");
            let text =
                |key: &str| block.and_then(|block| block.get(key)).and_then(Value::as_str).unwrap_or("").to_string();
            let started = Block { kind: text("type"), id: text("id"), name: text("name"), ..Block::default() };
            let initial = text("text");
            round.blocks.insert(index, started);
            if !initial.is_empty() {
                push_text(round, index, &initial, sink);
            }
        }
        "content_block_delta" => match data.pointer("/delta/type").and_then(Value::as_str) {
            Some("text_delta") => {
                let text = data.pointer("/delta/text").and_then(Value::as_str).unwrap_or("");
                push_text(round, index, text, sink);
            }
            Some("input_json_delta") => {
                let part = data.pointer("/delta/partial_json").and_then(Value::as_str).unwrap_or("");
                round.received += part.len();
                round.blocks.entry(index).or_default().json.push_str(part);
            }
            _ => {}
        },
        "message_delta" => {
            if let Some(output) = data.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                round.usage.completion = output;
            }
        }
        "message_stop" => return Ok(true),
        "error" => return Err(stream_error(data.get("error"))),
        _ => {}
    }
    Ok(false)
}

fn push_text(round: &mut Round, index: u64, text: &str, sink: &mut RoundText<'_>) {
    let block = round.blocks.entry(index).or_default();
    if block.kind.is_empty() {
        block.kind = "text".into();
    }
    block.text.push_str(text);
    round.received += text.len();
    sink.push(text);
}

/// An `error` event, classified like an HTTP error of the same type.
fn stream_error(error: Option<&Value>) -> ProviderError {
    let text = |key: &str| error.and_then(|error| error.get(key)).and_then(Value::as_str).unwrap_or("");
    let message = if text("message").is_empty() {
        "the stream reported an error".to_string()
    } else {
        text("message").to_string()
    };
    match text("type") {
        "overloaded_error" | "api_error" => ProviderError::Overloaded(message),
        "rate_limit_error" => ProviderError::RateLimited(message),
        "authentication_error" | "permission_error" => ProviderError::Auth(message),
        _ => ProviderError::refused(message),
    }
}

mod model_step;
mod usage;

use usage::{call_usage, read_usage, reported, sent_bytes};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
