//! What an OpenAI-compatible answer says: its text, whole or as a stream
//! of chunks (the content, or the forced call's arguments), and its token
//! usage as the server reports it or, when it reports none, as estimated
//! from the bytes sent and received.

use crate::llm::config::StructuredOutput;
use crate::llm::http::EventStream;
use crate::llm::schema;
use crate::llm::streamed::AnswerSource;
use crate::llm::{ProviderError, UnderstandRequest, Understanding, Usage};
use serde_json::Value;

/// An understand answer before validation.
pub(super) struct RawAnswer {
    pub(super) text: String,
    /// `finish_reason: length`: the answer hit `max_tokens`.
    pub(super) truncated: bool,
    pub(super) usage: Usage,
}

impl RawAnswer {
    pub(super) fn validate(&self, request: &UnderstandRequest) -> Result<Understanding, String> {
        let result = schema::extract_json(&self.text).and_then(|value| schema::validate(&value, request));
        result.map_err(|error| self.explain(error))
    }

    fn explain(&self, error: String) -> String {
        if self.truncated { format!("{error}; the answer was cut off by the max_tokens limit") } else { error }
    }
}

/// The text of a streamed understand answer: `delta.content`, or the
/// arguments of the forced call in the `tool` mode.
pub(super) struct ChunkSource {
    events: EventStream,
    usage: Usage,
    finished: bool,
    truncated: bool,
    /// Whether the server sent a `usage` block.
    reported: bool,
    /// Whether the stream has ended (`[DONE]`, or its end after the finish).
    ended: bool,
    /// The bytes of the request that count as prompt ([`sent_bytes`]).
    sent: usize,
    /// The bytes of answer text received so far.
    received: usize,
}

impl ChunkSource {
    pub(super) fn new(events: EventStream, sent: usize) -> ChunkSource {
        ChunkSource {
            events,
            usage: Usage { calls: 1, ..Usage::default() },
            finished: false,
            truncated: false,
            reported: false,
            ended: false,
            sent,
            received: 0,
        }
    }
}

impl AnswerSource for ChunkSource {
    fn next_piece(&mut self) -> Result<Option<String>, ProviderError> {
        loop {
            let Some(event) = self.events.next_event()? else {
                if self.finished {
                    self.ended = true;
                    return Ok(None);
                }
                return Err(ProviderError::Network("the answer stream ended before it was complete".into()));
            };
            let data = event.data.trim();
            if data == "[DONE]" {
                self.ended = true;
                return Ok(None);
            }
            let chunk: Value = serde_json::from_str(data)
                .map_err(|error| ProviderError::InvalidOutput(format!("a stream chunk is not JSON ({error})")))?;
            if let Some(error) = chunk.get("error") {
                return Err(stream_error(error));
            }
            if let Some(usage) = answer_usage(&chunk) {
                self.usage = usage;
                self.reported = true;
            }
            let Some(choice) = chunk.get("choices").and_then(|choices| choices.get(0)) else {
                continue;
            };
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finished = true;
                self.truncated = reason == "length";
            }
            // A server that does not stream this request answers with the
            // whole message, which is then the one piece.
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            let mut piece = String::new();
            if let Some(text) = delta.and_then(|delta| delta.get("content")).and_then(Value::as_str) {
                piece.push_str(text);
            }
            let calls = delta.and_then(|delta| delta.get("tool_calls")).and_then(Value::as_array);
            for call in calls.into_iter().flatten() {
                match call.pointer("/function/arguments") {
                    Some(Value::String(part)) => piece.push_str(part),
                    Some(Value::Object(whole)) => piece.push_str(&Value::Object(whole.clone()).to_string()),
                    _ => {}
                }
            }
            if !piece.is_empty() {
                self.received += piece.len();
                return Ok(Some(piece));
            }
        }
    }

    fn usage(&self) -> Usage {
        // The estimate waits for the end: a usage block may still come
        // after the finish, and a part estimate would be counted twice.
        if self.ended && !self.reported {
            return Usage::estimate(self.sent, self.received);
        }
        self.usage
    }

    fn dropped_usage(&self) -> Usage {
        if self.reported { self.usage } else { Usage::estimate(self.sent, self.received) }
    }

    fn truncated(&self) -> bool {
        self.truncated
    }
}

pub(super) fn read_answer(mode: StructuredOutput, answer: &Value, sent: &Value) -> RawAnswer {
    let choice = answer.get("choices").and_then(|choices| choices.get(0));
    let message = choice.and_then(|choice| choice.get("message"));
    let content = message.and_then(|message| message.get("content")).and_then(Value::as_str);
    let arguments = message
        .and_then(|message| message.get("tool_calls"))
        .and_then(|calls| calls.get(0))
        .and_then(|call| call.pointer("/function/arguments"))
        .map(|arguments| match arguments {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
    let refusal = message.and_then(|message| message.get("refusal")).and_then(Value::as_str);
    let text = match (mode, arguments, content, refusal) {
        (StructuredOutput::Tool, Some(arguments), _, _) => arguments,
        (_, _, Some(content), _) if !content.trim().is_empty() => content.to_string(),
        (_, Some(arguments), _, _) => arguments,
        (_, _, _, Some(refusal)) => format!("(refused: {refusal})"),
        _ => String::new(),
    };
    let truncated = choice.and_then(|choice| choice.get("finish_reason")).and_then(Value::as_str) == Some("length");
    RawAnswer { text, truncated, usage: call_usage(answer, sent) }
}

/// A whole answer's usage as reported, or estimated from the request sent
/// and the message received when the server reports none.
pub(super) fn call_usage(answer: &Value, sent: &Value) -> Usage {
    answer_usage(answer).unwrap_or_else(|| {
        let received = answer.pointer("/choices/0/message").map_or(0, message_bytes);
        Usage::estimate(sent_bytes(sent), received)
    })
}

/// The bytes of a request that reach the model's prompt: its messages'
/// text and tool calls, and the tools offered (their schemas are put in
/// the prompt by the chat template).
pub(super) fn sent_bytes(body: &Value) -> usize {
    let messages =
        body.get("messages").and_then(Value::as_array).map_or(0, |messages| messages.iter().map(message_bytes).sum());
    let tools = body.get("tools").map_or(0, |tools| tools.to_string().len());
    messages + tools
}

/// The bytes of a chat message's text and tool calls.
pub(super) fn message_bytes(message: &Value) -> usize {
    let text = |value: Option<&Value>| match value {
        Some(Value::String(text)) => text.len(),
        Some(Value::Null) | None => 0,
        Some(other) => other.to_string().len(),
    };
    let calls = message.get("tool_calls").and_then(Value::as_array).map_or(0, |calls| {
        calls.iter().map(|call| text(call.pointer("/function/name")) + text(call.pointer("/function/arguments"))).sum()
    });
    text(message.get("content")) + calls
}

/// One call's tokens from an OpenAI `usage` block (`calls` is 1).
fn read_usage(usage: Option<&Value>) -> Usage {
    let number = |pointer: &str| usage.and_then(|usage| usage.pointer(pointer)).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        calls: 1,
        prompt: number("/prompt_tokens"),
        completion: number("/completion_tokens"),
        cached: number("/prompt_tokens_details/cached_tokens"),
        estimated: false,
    }
}

/// The usage of an answer or of a stream's last chunk. llama.cpp's server
/// counts the prompt tokens it took from its cache in `timings.cache_n`,
/// which stands in for OpenAI's `cached_tokens` when that is absent.
pub(super) fn answer_usage(answer: &Value) -> Option<Usage> {
    let mut usage = answer.get("usage").filter(|usage| usage.is_object()).map(|usage| read_usage(Some(usage)));
    let reused = answer.pointer("/timings/cache_n").and_then(Value::as_u64);
    if let (Some(usage), Some(reused)) = (usage.as_mut(), reused)
        && usage.cached == 0
    {
        usage.cached = reused;
    }
    usage
}

/// An error sent inside a stream (`data: {"error": {...}}`).
pub(super) fn stream_error(error: &Value) -> ProviderError {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("the server reported an error").to_string();
    let kind = error.get("type").or_else(|| error.get("code")).and_then(Value::as_str).unwrap_or("");
    match kind {
        "server_error" | "overloaded_error" | "api_error" => ProviderError::Overloaded(message),
        "rate_limit_exceeded" | "rate_limit_error" => ProviderError::RateLimited(message),
        _ => ProviderError::refused(message),
    }
}
