//! The tokens of an Anthropic call: the `usage` block as the server
//! reports it, or, from a Messages-compatible server that reports none,
//! flowc's estimate ([`Usage::estimate`], the one estimator the OpenAI path
//! uses too) from the bytes the request put in the prompt and the bytes
//! of the answer, marked `estimated`.

use crate::llm::Usage;
use serde_json::Value;

/// One call's tokens from an Anthropic `usage` block. `input_tokens`
/// excludes the cache, so the prompt is the sum of the three.
pub(super) fn read_usage(usage: Option<&Value>) -> Usage {
    let number = |key: &str| usage.and_then(|usage| usage.get(key)).and_then(Value::as_u64).unwrap_or(0);
    let cached = number("cache_read_input_tokens");
    Usage {
        calls: 1,
        prompt: number("input_tokens") + cached + number("cache_creation_input_tokens"),
        completion: number("output_tokens"),
        cached,
        estimated: false,
    }
}

/// Whether a `usage` block counts anything: an absent block, `null`, or
/// one without token counts is no report (an estimate stands in).
pub(super) fn reported(usage: Option<&Value>) -> bool {
    usage.and_then(Value::as_object).is_some_and(|usage| {
        ["input_tokens", "output_tokens"].iter().any(|key| usage.get(*key).is_some_and(Value::is_u64))
    })
}

/// A whole answer's usage as reported, or estimated from the request sent
/// and the content received when the server reports none.
pub(super) fn call_usage(answer: &Value, sent: &Value) -> Usage {
    let usage = answer.get("usage");
    if reported(usage) {
        return read_usage(usage);
    }
    Usage::estimate(sent_bytes(sent), content_bytes(answer.get("content")))
}

/// A streamed call's usage once it has ended: as reported, or, when the
/// stream carried no usage block, the estimate from `sent` and `received`
/// bytes (keeping an output count a `message_delta` did report).
pub(super) fn streamed_usage(usage: Usage, reported: bool, sent: usize, received: usize) -> Usage {
    if reported {
        return usage;
    }
    let mut estimate = Usage::estimate(sent, received);
    if usage.completion > 0 {
        estimate.completion = usage.completion;
    }
    estimate
}

/// The bytes of a Messages request that reach the model's prompt: the
/// system prompt, the messages' text, tool uses and results, and the tools
/// offered (their schemas are put in the prompt).
pub(super) fn sent_bytes(body: &Value) -> usize {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| messages.iter().map(|message| content_bytes(message.get("content"))).sum());
    let tools = body.get("tools").map_or(0, |tools| tools.to_string().len());
    content_bytes(body.get("system")) + messages + tools
}

/// The bytes of a content: a string, or blocks of text, tool uses (name and
/// input) and tool results (their own content).
pub(super) fn content_bytes(content: Option<&Value>) -> usize {
    match content {
        Some(Value::String(text)) => text.len(),
        Some(Value::Array(blocks)) => blocks.iter().map(block_bytes).sum(),
        Some(Value::Null) | None => 0,
        Some(other) => other.to_string().len(),
    }
}

fn block_bytes(block: &Value) -> usize {
    let text = |key: &str| block.get(key).and_then(Value::as_str).map_or(0, str::len);
    let input = block.get("input").map_or(0, |input| input.to_string().len());
    text("text") + text("name") + input + content_bytes(block.get("content"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_with_usage_is_read_as_reported() {
        let answer =
            json!({"content": [{"type": "text", "text": "Hi"}], "usage": {"input_tokens": 7, "output_tokens": 2}});
        let usage = call_usage(&answer, &json!({}));
        assert_eq!(usage, Usage { calls: 1, prompt: 7, completion: 2, cached: 0, estimated: false });
    }

    #[test]
    fn an_answer_without_usage_is_estimated_from_what_was_sent_and_received() {
        let sent = json!({
            "system": [{"type": "text", "text": "You are the concierge.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "The Ritz, please"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "find", "input": {"q": "Ritz"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
            ],
        });
        // 22 + 16 + ("find" 4 + `{"q":"Ritz"}` 12) + "found" 5 = 59 bytes.
        assert_eq!(sent_bytes(&sent), 59);
        let answer = json!({"content": [{"type": "text", "text": "For which date?"}], "usage": null});
        let usage = call_usage(&answer, &sent);
        assert_eq!(usage, Usage { calls: 1, prompt: 15, completion: 4, cached: 0, estimated: true });
        // A block with no counts in it is no report either.
        let empty = json!({"content": [], "usage": {}});
        assert!(call_usage(&empty, &sent).estimated);
    }
}
