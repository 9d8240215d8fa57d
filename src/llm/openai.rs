//! The OpenAI-compatible provider: chat completions on OpenAI, Azure-style
//! gateways, OpenRouter, Ollama, vLLM, llama.cpp's and llama-cpp-python's
//! servers.
//!
//! **Understand** is one structured call. How the answer is constrained is
//! the [`StructuredOutput`] mode: strict `json_schema`, llama-cpp-python's
//! `{type: json_object, schema}`, a forced function call, or the shape in
//! the prompt. Servers differ, so a refusal of the mode (HTTP 400, 422 or
//! 500 whose message names the response format, the schema or tools) moves
//! to the next mode, which the provider keeps for the rest of its life. An
//! answer that fails validation gets one repair call, with the error, then
//! the call fails with [`ProviderError::InvalidOutput`].
//!
//! **Understand, streamed** ([`Provider::understand_streamed`]) is the same
//! request with `stream: true`: the answer's text arrives as `delta.content`
//! (or, in the `tool` mode, as the forced call's argument pieces) and is
//! read by `llm::streamed` as it comes. A refusal of the streamed request
//! is retried whole; when the whole call succeeds in the same mode, the
//! server cannot stream structured output and the provider reads its
//! answers whole from then on.
//!
//! **Reply** streams (SSE), one round at a time: tools are offered with
//! `tool_choice: auto` unless the request's tool budget is spent; a round
//! that calls them returns the calls, and the next round sends them back
//! as the assistant's `tool_calls` message followed by one `tool` message
//! per result. Where a server cannot do `auto` ([`ToolChoiceMode::Forced`],
//! chosen in the config or after a refusal), each round is a forced call
//! of a `next_action` function instead, whose result goes back as a note.

use crate::llm::config::{ProviderConfig, Secret, StructuredOutput, ToolChoiceMode};
use crate::llm::http::{CallError, HttpClient, SseEvent};
use crate::llm::prompt::{self, AnswerFormat};
use crate::llm::rounds::{RoundText, result_text};
use crate::llm::schema::{self, strict_schema, understanding_schema};
use crate::llm::streamed::{AnswerReader, Extraction, Understood, understood, validate_prefix};
use crate::llm::{
    ModelReply, Provider, ProviderError, ReplyRequest, Response, ToolCall, ToolCalls, ToolRound, ToolSpec,
    UnderstandRequest, Understanding, Usage,
};
use crate::message::{Message, Role};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The function name of the understand answer in `tool` mode.
const UNDERSTAND_FUNCTION: &str = "understanding";
/// The function a forced-choice round calls.
const ACTION_FUNCTION: &str = "next_action";
/// How much of an invalid answer the repair call repeats: an answer that
/// ran on to `max_tokens` would otherwise push the repair past the
/// model's context.
const MAX_REPAIR_ECHO: usize = 2000;

pub struct OpenAi {
    http: HttpClient,
    base_url: String,
    model: String,
    api_key: Option<Secret>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    mode: StructuredOutput,
    tool_choice: ToolChoiceMode,
    /// `stream_options: {include_usage: true}`, dropped for good if the
    /// server refuses it.
    stream_usage: bool,
    /// The understand call streams (`stream: true` beside the structured
    /// output mode), until a server refuses that in a mode it otherwise
    /// accepts; its answers are then read whole.
    stream_understand: bool,
    /// `cache_prompt: true` (llama.cpp's server: keep the prompt's KV
    /// cache for the next request), sent to every server but OpenAI's own
    /// API and dropped for good if the server refuses it.
    cache_prompt: bool,
}

impl OpenAi {
    pub fn new(config: &ProviderConfig) -> Result<OpenAi, ProviderError> {
        let secrets = config.api_key.iter().map(|key| key.expose().to_string()).collect();
        Ok(OpenAi {
            http: HttpClient::new(config.http.clone(), config.cancel.clone(), secrets)?,
            base_url: config.base_url.trim_end_matches('/').to_string(),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            temperature: config.temperature,
            max_tokens: config.max_tokens,
            mode: config.structured_output,
            tool_choice: config.tool_choice,
            stream_usage: true,
            stream_understand: true,
            cache_prompt: sends_cache_prompt(&config.base_url),
        })
    }

    /// The structured-output mode in use (after any fallback).
    #[cfg(test)]
    pub fn structured_output(&self) -> StructuredOutput {
        self.mode
    }

    /// The tool-choice mode in use (after any fallback).
    #[cfg(test)]
    pub fn tool_choice(&self) -> ToolChoiceMode {
        self.tool_choice
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("accept", "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("authorization", format!("Bearer {}", key.expose())));
        }
        headers
    }

    /// The fields every request carries.
    fn body(&self, messages: &[Value]) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("messages".into(), Value::Array(messages.to_vec()));
        if let Some(temperature) = self.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = self.max_tokens {
            body.insert("max_tokens".into(), json!(max_tokens));
        }
        if self.cache_prompt {
            body.insert("cache_prompt".into(), Value::Bool(true));
        }
        body
    }

    /// Whether a refusal named `cache_prompt`, which is then dropped for
    /// good: the caller asks again without it.
    fn drops_cache_prompt(&mut self, error: &CallError) -> bool {
        let refused = matches!(error, CallError::Rejected { message, .. } if mentions(message, CACHE_PROMPT));
        if refused && self.cache_prompt {
            self.cache_prompt = false;
            return true;
        }
        false
    }

    /// The refusals every request can recover from: of `cache_prompt`.
    fn common_refusal(&self, status: u16, message: &str) -> bool {
        self.cache_prompt && is_refusal(status, message, &[CACHE_PROMPT])
    }

    /// One understand call in the current mode, falling back on refusals.
    fn understand_call(
        &mut self,
        request: &UnderstandRequest,
        answer_schema: &Value,
        repair: Option<&Repair>,
    ) -> Result<RawAnswer, ProviderError> {
        loop {
            let mode = self.mode;
            let body = self.understand_body(mode, request, answer_schema, repair);
            let rejects = |status: u16, message: &str| {
                self.common_refusal(status, message)
                    || (mode != StructuredOutput::Prompt && is_refusal(status, message, MODE_WORDS))
            };
            match self.http.post_json(&self.url(), &self.headers(), &body, &rejects) {
                Ok(answer) => return Ok(read_answer(mode, &answer, &body)),
                Err(error) if self.drops_cache_prompt(&error) => {}
                Err(CallError::Rejected { status, message }) => match mode.next() {
                    Some(next) => self.mode = next,
                    None => {
                        return Err(CallError::Rejected { status, message }.into_provider_error());
                    }
                },
                Err(CallError::Failed(error)) => return Err(error),
            }
        }
    }

    fn understand_body(
        &self,
        mode: StructuredOutput,
        request: &UnderstandRequest,
        answer_schema: &Value,
        repair: Option<&Repair>,
    ) -> Value {
        let format = match mode {
            StructuredOutput::JsonSchema => AnswerFormat::Enforced,
            StructuredOutput::Tool => AnswerFormat::Tool(UNDERSTAND_FUNCTION),
            // OpenAI's own json_object ignores the schema: show the shape.
            StructuredOutput::JsonObject | StructuredOutput::Prompt => AnswerFormat::Described,
        };
        let prompt = prompt::understand(request, format);
        let mut messages = vec![chat("system", &prompt.stable), chat("user", &prompt.dynamic)];
        // The repair goes back as plain messages whatever the mode: servers
        // with partial tool support render them all.
        if let Some(repair) = repair {
            messages.push(chat("assistant", &clip(&repair.answer, MAX_REPAIR_ECHO)));
            messages.push(chat("user", &prompt::repair(&repair.error)));
        }
        let mut body = self.body(&messages);
        if self.max_tokens.is_none() {
            body.insert("max_tokens".into(), json!(schema::answer_token_budget(request)));
        }
        insert_structured(
            &mut body,
            mode,
            (UNDERSTAND_FUNCTION, "Record what the user's latest message says."),
            answer_schema,
        );
        Value::Object(body)
    }

    /// Validates an understand answer, with one repair call when it is
    /// invalid; returns what `read` made of it and the calls' usage.
    fn settle<T>(
        &mut self,
        request: &UnderstandRequest,
        answer_schema: &Value,
        first: RawAnswer,
        read: &dyn Fn(&RawAnswer) -> Result<T, String>,
    ) -> Result<(T, Usage), ProviderError> {
        let mut usage = first.usage;
        let mut answer = first;
        let mut repaired = false;
        loop {
            match read(&answer) {
                Ok(value) => return Ok((value, usage)),
                Err(error) if !repaired => {
                    repaired = true;
                    let repair = Repair { answer: std::mem::take(&mut answer.text), error };
                    answer = self.understand_call(request, answer_schema, Some(&repair))?;
                    usage.add(answer.usage);
                }
                Err(error) => {
                    return Err(ProviderError::InvalidOutput(format!("{error} (after one repair attempt)")));
                }
            }
        }
    }

    /// The understand call read whole, its reply (if any) in the
    /// understanding.
    fn understood_whole(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        self.http.set_deadline(request.deadline);
        let answer_schema = schema::without_patterns(&understanding_schema(request));
        let first = self.understand_call(request, &answer_schema, None)?;
        self.understood_from(request, &answer_schema, first)
    }

    fn understood_from(
        &mut self,
        request: &UnderstandRequest,
        answer_schema: &Value,
        first: RawAnswer,
    ) -> Result<Understood, ProviderError> {
        let (mut understanding, usage) =
            self.settle(request, answer_schema, first, &|answer| answer.validate(request))?;
        understanding.usage = usage;
        Ok(Understood { understanding, reply: None })
    }

    /// One streamed round of a reply: text goes to `sink` as it arrives,
    /// tool calls are collected. Refusals of `stream_options` or of
    /// `tool_choice: auto` are handled by the caller.
    fn stream_round(
        &self,
        messages: &[Value],
        tools: Option<&[ToolSpec]>,
        sink: &mut RoundText<'_>,
    ) -> Result<Round, CallError> {
        let mut body = self.body(messages);
        body.insert("stream".into(), Value::Bool(true));
        if self.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if let Some(tools) = tools {
            body.insert("tools".into(), Value::Array(tools.iter().map(function_tool).collect()));
            body.insert("tool_choice".into(), Value::String("auto".into()));
        }
        let body = Value::Object(body);
        let stream_usage = self.stream_usage;
        let offers_tools = tools.is_some();
        let rejects = |status: u16, message: &str| {
            self.common_refusal(status, message)
                || (stream_usage && is_refusal(status, message, &["stream_options"]))
                || (offers_tools && is_refusal(status, message, TOOL_WORDS))
        };
        let mut round = Round::default();
        let done = self.http.post_stream(&self.url(), &self.headers(), &body, &rejects, &mut |event| {
            read_chunk(&event, &mut round, sink)
        })?;
        if !done && !round.finished {
            return Err(CallError::Failed(ProviderError::Network(
                "the answer stream ended before it was complete".into(),
            )));
        }
        if !round.reported {
            round.usage = Usage::estimate(sent_bytes(&body), round.received);
        }
        round.usage.calls = 1;
        for (index, call) in round.calls.iter_mut() {
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
        }
        Ok(round)
    }

    /// A forced-choice round: the model picks a tool and its arguments, or
    /// `reply`.
    fn decide(
        &mut self,
        messages: &[Value],
        tools: &[ToolSpec],
    ) -> Result<(Option<(String, Value)>, Usage), ProviderError> {
        let (answer, body) = loop {
            let mut body = self.body(messages);
            let function = json!({
                "name": ACTION_FUNCTION,
                "description": "Choose what to do next: call one of the tools with its arguments, or reply to the user.",
                "parameters": action_schema(tools),
            });
            body.insert("tools".into(), json!([{"type": "function", "function": function}]));
            body.insert("tool_choice".into(), forced(ACTION_FUNCTION));
            let rejects = |status: u16, message: &str| self.common_refusal(status, message);
            let body = Value::Object(body);
            match self.http.post_json(&self.url(), &self.headers(), &body, &rejects) {
                Ok(answer) => break (answer, body),
                Err(error) if self.drops_cache_prompt(&error) => {}
                Err(error) => return Err(error.into_provider_error()),
            }
        };
        let raw = read_answer(StructuredOutput::Tool, &answer, &body);
        let usage = raw.usage;
        // An unreadable decision is read as "reply": the reply round that
        // follows still answers the user.
        let Ok(action) = schema::extract_json(&raw.text) else {
            return Ok((None, usage));
        };
        let name = action.get("action").and_then(Value::as_str).unwrap_or("reply");
        if name == "reply" || !tools.iter().any(|tool| tool.name == name) {
            return Ok((None, usage));
        }
        let arguments = action.get("arguments").cloned().unwrap_or_else(|| json!({}));
        Ok((Some((name.to_string(), arguments)), usage))
    }
}

/// llama.cpp's switch for keeping the prompt's KV cache between requests.
const CACHE_PROMPT: &str = "cache_prompt";

/// Whether a server may be sent `cache_prompt`: every server but OpenAI's
/// own API, which refuses parameters it does not know (others that do are
/// answered by dropping it after their first refusal).
fn sends_cache_prompt(base_url: &str) -> bool {
    !base_url.to_ascii_lowercase().contains("api.openai.com")
}

/// Words in a refusal that say the structured-output mode is the problem.
const MODE_WORDS: &[&str] = &["response_format", "json_schema", "json_object", "schema", "tool", "function", "grammar"];
/// Words in a refusal that say `tool_choice: auto` (or tools) is the problem.
const TOOL_WORDS: &[&str] = &["tool_choice", "tool", "function"];

/// A refusal the provider can recover from by changing the request: the
/// statuses servers use for "I do not support that", with a message that
/// names the feature.
///
/// A request too long for the context window is not one: OpenAI's message
/// for it names the functions, and trimming, not a mode change, answers it.
fn is_refusal(status: u16, message: &str, words: &[&str]) -> bool {
    let lower = message.to_lowercase();
    matches!(status, 400 | 422 | 500 | 501)
        && words.iter().any(|word| lower.contains(word))
        && !crate::llm::context::is_overflow(message)
}

impl Provider for OpenAi {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn modes(&self) -> Option<String> {
        let choice = match self.tool_choice {
            ToolChoiceMode::Auto => "auto",
            ToolChoiceMode::Forced => "forced",
        };
        Some(format!("structured_output = \"{}\", tool_choice = \"{choice}\"", self.mode.as_str()))
    }

    fn ask(&mut self, request: &crate::llm::AskRequest) -> Result<crate::llm::AskAnswer, ProviderError> {
        self.ask_value(request)
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        if request.is_empty() {
            return Ok(Understanding::default());
        }
        self.http.set_deadline(request.deadline);
        let answer_schema = schema::without_patterns(&understanding_schema(request));
        let first = self.understand_call(request, &answer_schema, None)?;
        let (mut understanding, usage) =
            self.settle(request, &answer_schema, first, &|answer| answer.validate(request))?;
        understanding.usage = usage;
        Ok(understanding)
    }

    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        if request.is_empty() {
            return Ok(Understood::default());
        }
        if !self.stream_understand {
            return self.understood_whole(request);
        }
        self.http.set_deadline(request.deadline);
        let answer_schema = schema::without_patterns(&understanding_schema(request));
        let mut answer = loop {
            let mode = self.mode;
            let mut body = self.understand_body(mode, request, &answer_schema, None);
            if let Some(body) = body.as_object_mut() {
                body.insert("stream".into(), Value::Bool(true));
                if self.stream_usage {
                    body.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
            let rejects = |status: u16, message: &str| {
                self.common_refusal(status, message)
                    || is_refusal(status, message, &["stream"])
                    || (mode != StructuredOutput::Prompt && is_refusal(status, message, MODE_WORDS))
            };
            match self.http.open_stream(&self.url(), &self.headers(), &body, &rejects) {
                Ok(events) => break AnswerReader::new(Box::new(ChunkSource::new(events, sent_bytes(&body)))),
                Err(error) if self.drops_cache_prompt(&error) => {}
                Err(CallError::Rejected { message, .. })
                    if self.stream_usage && mentions(&message, "stream_options") =>
                {
                    self.stream_usage = false;
                }
                // A refusal that names the mode alone is of the mode: the
                // next one is tried, streamed.
                Err(CallError::Rejected { status, message }) if !mentions(&message, "stream") => match mode.next() {
                    Some(next) => self.mode = next,
                    None => return Err(CallError::Rejected { status, message }.into_provider_error()),
                },
                // The mode or the streaming was refused: the whole call
                // tells which, by the mode it settles on.
                Err(CallError::Rejected { .. }) => {
                    let understood = self.understood_whole(request)?;
                    if self.mode == mode {
                        self.stream_understand = false;
                    }
                    return Ok(understood);
                }
                Err(CallError::Failed(error)) => return Err(error),
            }
        };
        if let Extraction::Prefix(prefix) = answer.extraction()? {
            match validate_prefix(prefix, request, answer.has_reply()) {
                Ok(understanding) => return understood(answer, understanding, request),
                // Read to the end, for the repair below.
                Err(_) => answer.drain()?,
            }
        }
        let first = RawAnswer { text: answer.text().to_string(), truncated: answer.truncated(), usage: answer.usage() };
        self.understood_from(request, &answer_schema, first)
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        self.http.set_deadline(request.deadline);
        let (messages, called) = reply_messages(request, rounds);
        let mut text = RoundText::new(on_text);
        let mut usage = Usage::default();
        let offer_tools = !request.tools.is_empty() && !request.tools_spent;
        loop {
            if offer_tools && self.tool_choice == ToolChoiceMode::Forced {
                let (action, decision_usage) = self.decide(&messages, &request.tools)?;
                usage.add(decision_usage);
                if let Some((name, arguments)) = action
                    && !called.iter().any(|(made, with)| *made == name && *with == arguments)
                {
                    let echo = json!({ ACTION_FUNCTION: {"name": name, "arguments": arguments} });
                    let call =
                        ToolCall { id: format!("{ACTION_FUNCTION}_{}", rounds.len()), name, arguments: Ok(arguments) };
                    return Ok(ModelReply::ToolCalls(ToolCalls {
                        calls: vec![call],
                        text: String::new(),
                        usage,
                        echo,
                    }));
                }
            }
            let offered = (offer_tools && self.tool_choice == ToolChoiceMode::Auto).then_some(request.tools.as_slice());
            let round = match self.stream_round(&messages, offered, &mut text) {
                Ok(round) => round,
                Err(error) if self.drops_cache_prompt(&error) => continue,
                Err(CallError::Rejected { message, .. })
                    if self.stream_usage && mentions(&message, "stream_options") =>
                {
                    self.stream_usage = false;
                    continue;
                }
                Err(CallError::Rejected { .. }) if offered.is_some() => {
                    self.tool_choice = ToolChoiceMode::Forced;
                    continue;
                }
                Err(error) => return Err(error.into_provider_error()),
            };
            usage.add(round.usage);
            if round.calls.is_empty() || offered.is_none() {
                return Ok(ModelReply::Done(Response { text: text.text, usage }));
            }
            let calls = round
                .calls
                .values()
                .map(|call| ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: parse_arguments(&call.arguments),
                })
                .collect();
            let echo = assistant_tool_calls(&round);
            return Ok(ModelReply::ToolCalls(ToolCalls { calls, text: text.text, usage, echo }));
        }
    }
}

/// The messages of a reply round: the system prompt, the conversation, then
/// each earlier round with its results. Also the calls made in forced mode:
/// a small model asked to choose again tends to repeat the call it just
/// made, which would spend every round on it, so the same call twice is
/// read as "reply".
fn reply_messages(request: &ReplyRequest, rounds: &[ToolRound]) -> (Vec<Value>, Vec<(String, Value)>) {
    let prompt = prompt::reply_prompt(request);
    let mut messages = vec![chat("system", &format!("{}{}", prompt.stable, prompt.dynamic))];
    messages.extend(prompt::conversation(request).iter().map(chat_message));
    let called = push_rounds(&mut messages, rounds, "your reply");
    (messages, called)
}

/// Appends each earlier tool round with its results to `messages`: as tool
/// messages, or, for a forced-choice round, as one plain note per result,
/// asking the model to use it in `use_in`. Returns the calls made in
/// forced rounds: a small model asked to choose again tends to repeat the
/// call it just made, so the caller reads the same call twice as "answer".
pub(super) fn push_rounds(messages: &mut Vec<Value>, rounds: &[ToolRound], use_in: &str) -> Vec<(String, Value)> {
    let mut called: Vec<(String, Value)> = Vec::new();
    for round in rounds {
        match forced_action(&round.asked.echo) {
            Some((name, arguments)) => {
                for (_, result) in round.answered() {
                    // One plain note, not a made-up assistant turn: servers
                    // without tool support render it, and small models copy
                    // an assistant turn's wording into the reply.
                    let note = format!(
                        "(Note from the system, not the user: the tool `{name}` was called with {arguments} \
                         and returned {}. Use this in {use_in}.)",
                        result_text(result)
                    );
                    messages.push(chat("user", &note));
                }
                called.push((name, arguments));
            }
            None => {
                messages.push(assistant_turn(round));
                for (call, result) in round.answered() {
                    messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": result_text(result)}));
                }
            }
        }
    }
    called
}

/// The call a forced-choice round made, from its echo.
fn forced_action(echo: &Value) -> Option<(String, Value)> {
    let action = echo.get(ACTION_FUNCTION)?;
    let name = action.get("name").and_then(Value::as_str)?;
    Some((name.to_string(), action.get("arguments").cloned().unwrap_or_else(|| json!({}))))
}

/// The assistant message of an earlier round: as the model sent it, or,
/// for a round the caller wrote itself, built from its calls.
fn assistant_turn(round: &ToolRound) -> Value {
    if round.asked.echo.is_object() {
        return round.asked.echo.clone();
    }
    let calls: Vec<Value> = round
        .asked
        .calls
        .iter()
        .map(|call| {
            let arguments = call.arguments.as_ref().map(Value::to_string).unwrap_or_else(|_| "{}".to_string());
            json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}})
        })
        .collect();
    json!({"role": "assistant", "content": Value::Null, "tool_calls": calls})
}

/// A rejected answer and why, for the repair call.
struct Repair {
    answer: String,
    error: String,
}

/// What one streamed round produced.
#[derive(Default)]
struct Round {
    /// Tool calls by their stream `index`.
    calls: BTreeMap<u64, PartialCall>,
    finished: bool,
    usage: Usage,
    /// Whether the server sent a `usage` block.
    reported: bool,
    /// The bytes of text and tool calls received, for an estimate.
    received: usize,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Handles one SSE chunk of a chat completion stream; `Ok(true)` at `[DONE]`.
fn read_chunk(event: &SseEvent, round: &mut Round, sink: &mut RoundText<'_>) -> Result<bool, ProviderError> {
    let data = event.data.trim();
    if data == "[DONE]" {
        return Ok(true);
    }
    let chunk: Value = serde_json::from_str(data)
        .map_err(|error| ProviderError::InvalidOutput(format!("a stream chunk is not JSON ({error})")))?;
    if let Some(error) = chunk.get("error") {
        return Err(stream_error(error));
    }
    if let Some(usage) = answer_usage(&chunk) {
        round.usage = usage;
        round.reported = true;
    }
    let Some(choice) = chunk.get("choices").and_then(|choices| choices.get(0)) else {
        return Ok(false);
    };
    if let Some(delta) = choice.get("delta") {
        round.received += message_bytes(delta);
    }
    if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str) {
        sink.push(text);
    }
    if let Some(deltas) = choice.pointer("/delta/tool_calls").and_then(Value::as_array) {
        for (position, delta) in deltas.iter().enumerate() {
            let index = delta.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let call = round.calls.entry(index).or_default();
            if let Some(id) = delta.get("id").and_then(Value::as_str) {
                call.id = id.to_string();
            }
            if let Some(name) = delta.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            match delta.pointer("/function/arguments") {
                Some(Value::String(part)) => call.arguments.push_str(part),
                Some(Value::Object(whole)) => call.arguments = Value::Object(whole.clone()).to_string(),
                _ => {}
            }
        }
    }
    if choice.get("finish_reason").is_some_and(|reason| !reason.is_null()) {
        round.finished = true;
    }
    Ok(false)
}

fn assistant_tool_calls(round: &Round) -> Value {
    let calls: Vec<Value> = round
        .calls
        .values()
        .map(|call| {
            json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
        })
        .collect();
    json!({"role": "assistant", "content": Value::Null, "tool_calls": calls})
}

fn parse_arguments(arguments: &str) -> Result<Value, String> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|error| format!("the arguments are not valid JSON ({error})"))
}

/// The `next_action` parameters: one alternative per tool (its name and
/// arguments) and one for replying.
fn action_schema(tools: &[ToolSpec]) -> Value {
    let mut choices = vec![json!({
        "type": "object",
        "properties": {"action": {"const": "reply"}},
        "required": ["action"],
        "additionalProperties": false,
    })];
    for tool in tools {
        choices.push(json!({
            "type": "object",
            "properties": {"action": {"const": tool.name}, "arguments": tool.parameters},
            "required": ["action", "arguments"],
            "additionalProperties": false,
        }));
    }
    json!({ "anyOf": choices })
}

fn function_tool(tool: &ToolSpec) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), Value::String(tool.name.clone()));
    if let Some(description) = &tool.description {
        function.insert("description".into(), Value::String(description.clone()));
    }
    function.insert("parameters".into(), tool.parameters.clone());
    json!({"type": "function", "function": function})
}

fn forced(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name}})
}

fn chat(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

fn chat_message(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    chat(role, &message.text)
}

/// The first `limit` characters of `text`, with `…` when it was longer.
fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn mentions(message: &str, word: &str) -> bool {
    message.to_lowercase().contains(word)
}

mod answer;
mod model_step;

use answer::{ChunkSource, RawAnswer, answer_usage, call_usage, message_bytes, read_answer, sent_bytes, stream_error};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

/// Asks for an answer of `schema` in structured-output `mode`: a response
/// format, or a forced call of the function named (with its description);
/// in `Prompt` mode the prompt alone says the shape.
fn insert_structured(
    body: &mut Map<String, Value>,
    mode: StructuredOutput,
    (function, description): (&str, &str),
    schema: &Value,
) {
    match mode {
        StructuredOutput::JsonSchema => {
            body.insert(
                "response_format".into(),
                json!({
                    "type": "json_schema",
                    "json_schema": {"name": function, "strict": true, "schema": strict_schema(schema)},
                }),
            );
        }
        StructuredOutput::JsonObject => {
            body.insert("response_format".into(), json!({"type": "json_object", "schema": schema}));
        }
        StructuredOutput::Tool => {
            let function_json = json!({"name": function, "description": description, "parameters": schema});
            body.insert("tools".into(), json!([{"type": "function", "function": function_json}]));
            body.insert("tool_choice".into(), forced(function));
        }
        StructuredOutput::Prompt => {}
    }
}
