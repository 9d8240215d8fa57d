//! A Messages-compatible server that reports no usage: each call's tokens
//! are estimated from the request sent and the answer received, as on the
//! OpenAI path, and marked estimated.

use super::*;
use crate::llm::streamed::fused_request;
use crate::llm::tokens;

/// Drops every `usage` block from a scripted stream's events.
fn without_usage(events: Vec<(&'static str, Value)>) -> Reply {
    let events: Vec<(&'static str, Value)> = events
        .into_iter()
        .map(|(name, mut data)| {
            if let Some(data) = data.as_object_mut() {
                data.remove("usage");
            }
            if let Some(message) = data.get_mut("message").and_then(Value::as_object_mut) {
                message.remove("usage");
            }
            (name, data)
        })
        .collect();
    Reply::events(&events)
}

fn text_events_without_usage(pieces: &[&str]) -> Reply {
    let mut events = vec![
        message_start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for piece in pieces {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.extend(message_end("end_turn", 0));
    without_usage(events)
}

fn expected(request: &Value, received: &str) -> Usage {
    Usage::estimate(sent_bytes(request), received.len())
}

#[test]
fn a_whole_understand_answer_without_usage_is_estimated() {
    let answer = json!({
        "content": [{"type": "tool_use", "id": "toolu_01", "name": "record_understanding", "input": good_input()}],
        "stop_reason": "tool_use",
    });
    let server = TestServer::start(vec![Reply::json(200, &answer)]);
    let understanding = provider(&server).understand(&booking_request()).unwrap();
    let body = server.request(0).json();
    let usage = understanding.usage;
    assert_eq!(usage, expected(&body, &format!("record_understanding{}", good_input())));
    assert!(usage.estimated);
    // The system prompt alone is far over a hundred tokens' worth of bytes.
    assert!(usage.prompt > 100, "{usage:?}");
    assert_eq!(usage.prompt, tokens(sent_bytes(&body)));
}

#[test]
fn a_streamed_reply_without_usage_is_estimated() {
    let server = TestServer::start(vec![text_events_without_usage(&["For which ", "date", "?"])]);
    let response =
        reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap();
    let body = server.request(0).json();
    assert_eq!(response.usage, expected(&body, "For which date?"));
    assert!(response.usage.estimated);
    assert_eq!(response.usage.completion, 4, "15 bytes at four a token");
}

#[test]
fn a_fused_understand_stream_without_usage_is_estimated_once_it_ends() {
    let mut input = good_input();
    input["step"] = json!("booking.confirm");
    input["reply"] = json!("Shall I book the Ritz Paris on 3 June for two?");
    let input = input.to_string();
    let mut events = vec![
        message_start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_07", "name": "record_understanding", "input": {}}}),
        ),
    ];
    let chars: Vec<char> = input.chars().collect();
    for piece in chars.chunks(9) {
        let piece: String = piece.iter().collect();
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}),
        ));
    }
    events.extend(message_end("tool_use", 0));
    let server = TestServer::start(vec![without_usage(events)]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    // Handed over mid-stream: nothing is estimated before the end.
    assert_eq!(understood.understanding.usage, Usage { calls: 1, ..Usage::default() });
    let mut reply = understood.reply.unwrap();
    reply.read_all(&mut |_| {}).unwrap();
    let whole = expected(&server.request(0).json(), &input);
    assert_eq!(reply.late_usage(), Usage { calls: 0, ..whole });
    assert!(reply.late_usage().estimated);
}

#[test]
fn a_reported_stream_is_not_estimated() {
    let server = TestServer::start(vec![text_events(&["Hello"])]);
    let response =
        reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap();
    assert_eq!(response.usage, Usage { calls: 1, prompt: 650, completion: 12, cached: 600, estimated: false });
}
