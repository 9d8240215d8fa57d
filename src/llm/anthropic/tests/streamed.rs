//! The understand call streamed over the Messages API: the forced
//! `tool_use` block's `input_json_delta` pieces read as they arrive, the
//! extraction handed over before the reply is written, and the reply
//! dropped mid-way.

use super::*;
use crate::llm::FusedReply;
use crate::llm::streamed::fused_request;
use crate::llm::testserver::Gate;

const REPLY: &str = "Shall I book the Ritz Paris on 3 June for two? Très bien 😀";

fn fused_input() -> String {
    let mut input = good_input();
    input["step"] = json!("booking.confirm");
    input["reply"] = json!(REPLY);
    input.to_string()
}

fn fused_reply(text: &str) -> Option<FusedReply> {
    Some(FusedReply { step: "booking.confirm".into(), text: text.into() })
}

/// A streamed answer whose forced call's input is `input`, in pieces of
/// `size` characters.
fn input_events(input: &str, size: usize) -> Vec<(&'static str, Value)> {
    let mut events = vec![
        message_start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_07", "name": "record_understanding", "input": {}}}),
        ),
    ];
    let chars: Vec<char> = input.chars().collect();
    for piece in chars.chunks(size) {
        let piece: String = piece.iter().collect();
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}),
        ));
    }
    events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    events.extend(message_end("tool_use", 25));
    events
}

fn extraction() -> Understanding {
    schema::validate(&good_input(), &booking_request()).unwrap()
}

#[test]
fn the_forced_call_input_streams_extraction_first_then_the_reply() {
    let server = TestServer::start(vec![Reply::events(&input_events(&fused_input(), 6))]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    // The prompt's tokens are known from `message_start`, before the reply.
    let early = Usage { calls: 1, prompt: 650, completion: 1, cached: 600, estimated: false };
    assert_eq!(understood.understanding, Understanding { reply: fused_reply(""), usage: early, ..extraction() });
    let mut reply = understood.reply.unwrap();
    let mut shown = Vec::new();
    assert_eq!(reply.read_all(&mut |piece| shown.push(piece.to_string())).unwrap(), REPLY);
    assert!(shown.len() > 5, "{shown:?}");
    assert_eq!(reply.late_usage(), Usage { calls: 0, prompt: 0, completion: 24, cached: 0, estimated: false });

    let body = server.request(0).json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "record_understanding"}));
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
}

#[test]
fn dropping_the_reply_mid_way_closes_the_connection() {
    let input = fused_input();
    let events = input_events(&input, 6);
    let held = 2 + (input.find("\"reply\"").unwrap() + 30) / 6;
    let gate = Gate::default();
    let server = TestServer::start(vec![Reply::events(&events).held_at(held, &gate).paced(Duration::from_millis(2))]);
    // The provider lives on, as in a session: the connection must close
    // when the reply is dropped, not when the provider is.
    let mut provider = provider(&server);
    let understood = provider.understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.fields, extraction().fields);
    let mut reply = understood.reply.unwrap();
    assert!(REPLY.starts_with(&reply.next_piece().unwrap().unwrap()));
    drop(reply);
    gate.open();
    let streamed = server.streams_ended(1)[0];
    drop(provider);
    assert!(streamed.sent < streamed.scripted - 2, "{streamed:?}");
}

#[test]
fn an_invalid_streamed_extraction_is_repaired_with_the_call_id() {
    let mut bad: Value = serde_json::from_str(&fused_input()).unwrap();
    bad["fields"]["guests"]["value"] = json!("two");
    let repaired: Value = serde_json::from_str(&fused_input()).unwrap();
    let server =
        TestServer::start(vec![Reply::events(&input_events(&bad.to_string(), 9)), tool_answer(repaired, "tool_use")]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.fields, extraction().fields);
    assert_eq!(understood.understanding.usage.calls, 2);
    assert_eq!(understood.understanding.reply, fused_reply(REPLY));
    assert!(understood.reply.is_none());
    let repair = server.request(1).json();
    assert_eq!(repair["messages"][1]["content"][0]["input"]["fields"]["guests"]["value"], "two");
    assert_eq!(repair["messages"][2]["content"][0]["tool_use_id"], "toolu_07");
    assert_eq!(repair.get("stream"), None);
}

#[test]
fn an_unreadable_streamed_input_goes_back_as_an_empty_object() {
    let server = TestServer::start(vec![
        Reply::events(&input_events("{\"flow\": booking}", 4)),
        tool_answer(good_input(), "tool_use"),
    ]);
    let understood = provider(&server).understand_streamed(&booking_request()).unwrap();
    assert!(understood.reply.is_none());
    assert_eq!(understood.understanding.flow.as_deref(), Some("booking"));
    let repair = server.request(1).json();
    assert_eq!(repair["messages"][1]["content"][0]["input"], json!({}));
    assert!(repair["messages"][2]["content"][0]["content"].as_str().unwrap().contains("invalid"));
}

#[test]
fn a_server_that_answers_a_streamed_request_whole_is_read_whole() {
    let input: Value = serde_json::from_str(&fused_input()).unwrap();
    let server = TestServer::start(vec![tool_answer(input, "tool_use")]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.reply, fused_reply(""));
    assert_eq!(understood.reply.unwrap().read_all(&mut |_| {}).unwrap(), REPLY);
}

fn error_body(message: &str) -> Value {
    json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
}

#[test]
fn a_server_that_will_not_stream_the_understand_call_is_asked_whole_from_then_on() {
    let input: Value = serde_json::from_str(&fused_input()).unwrap();
    let refusal = Reply::json(400, &error_body("stream: streaming is not supported for this model"));
    let server =
        TestServer::start(vec![refusal, tool_answer(input.clone(), "tool_use"), tool_answer(input, "tool_use")]);
    let mut provider = provider(&server);
    for _ in 0..2 {
        let understood = provider.understand_streamed(&fused_request()).unwrap();
        assert_eq!(understood.understanding.fields, extraction().fields);
        assert_eq!(understood.understanding.reply, fused_reply(REPLY), "the reply came whole, in the understanding");
        assert_eq!(understood.understanding.usage.calls, 1, "the refused request is no call");
        assert!(understood.reply.is_none());
    }
    let streamed: Vec<Value> = server.requests().iter().map(|request| request.json()["stream"].clone()).collect();
    assert_eq!(streamed, [json!(true), Value::Null, Value::Null], "streaming is not tried again");
}

#[test]
fn a_refusal_that_is_not_of_the_stream_fails_the_call() {
    let server = TestServer::start(vec![Reply::json(400, &error_body("max_tokens: must be at least 1"))]);
    let error = provider(&server).understand_streamed(&fused_request()).unwrap_err();
    assert!(error.to_string().contains("max_tokens"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

/// The fused part never costs a call: a step that was not offered drops
/// the reply (the reply call writes it), whole or streamed, and the
/// extraction stands without a repair.
#[test]
fn a_reply_for_a_step_not_offered_is_dropped_without_a_repair() {
    let mut input: Value = serde_json::from_str(&fused_input()).unwrap();
    input["step"] = json!("booking.pay");
    let problem = "unknown step `booking.pay` (choose one of `booking.confirm` or null)";
    let server = TestServer::start(vec![tool_answer(input.clone(), "tool_use")]);
    let understanding = provider(&server).understand(&fused_request()).unwrap();
    assert_eq!(understanding.fields, extraction().fields);
    assert_eq!((understanding.reply, understanding.reply_dropped.as_deref()), (None, Some(problem)));
    assert_eq!(understanding.usage.calls, 1);
    assert_eq!(server.requests().len(), 1, "no repair");

    let server = TestServer::start(vec![Reply::events(&input_events(&input.to_string(), 7))]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.fields, extraction().fields);
    assert_eq!(understood.understanding.reply_dropped.as_deref(), Some(problem));
    assert!(understood.reply.is_none(), "a reply for no step offered is not streamed");
    assert_eq!(understood.understanding.usage.calls, 1);
    assert_eq!(server.requests().len(), 1, "no repair");
}
