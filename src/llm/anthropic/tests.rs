//! Wire tests of the Anthropic provider against a scripted server on
//! 127.0.0.1 speaking the Messages API: tool_use answers, SSE events,
//! error bodies.
//!
//! A full booking conversation through this wire format needs the runtime's
//! turn pipeline, which lands on another branch; it belongs in `tests/`
//! once `flowc run` exists.

use super::*;
use crate::llm::config::ProviderKind;
use crate::llm::schema::tests::booking_request;
use crate::llm::testserver::{Reply, TestServer, Tools, fast_http};
use crate::llm::{NoTools, ToolCall, ToolCalls, ToolRound, reply_with_tools};
use crate::message::Message;
use std::time::Duration;

mod estimated;
mod streamed;

const KEY: &str = "sk-ant-test-0123456789";

fn config(url: &str) -> ProviderConfig {
    ProviderConfig {
        provider: ProviderKind::Anthropic,
        model: "claude-test".into(),
        base_url: url.to_string(),
        api_key: Some(Secret::new(KEY)),
        http: fast_http(),
        ..ProviderConfig::default()
    }
}

fn provider(server: &TestServer) -> Anthropic {
    Anthropic::new(&config(&server.url)).unwrap()
}

fn usage_block() -> Value {
    json!({"input_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 900, "output_tokens": 20})
}

/// A Messages answer that calls the understand tool with `input`.
fn tool_answer(input: Value, stop_reason: &str) -> Reply {
    Reply::json(
        200,
        &json!({
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "tool_use", "id": "toolu_01", "name": "record_understanding", "input": input},
            ],
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": usage_block(),
        }),
    )
}

fn good_input() -> Value {
    json!({
        "flow": "booking",
        "fields": {
            "hotel": {"evidence": "Ritz Paris", "value": "Ritz Paris"},
            "date": {"evidence": "the 3rd of June", "value": "2026-06-03"},
            "guests": {"evidence": "for two", "value": 2},
        },
        "conditions": {"booking.confirm#2": {"evidence": null, "yes": false}},
        "signals": {"wants_human": {"evidence": null, "yes": false}},
    })
}

fn booking_tool() -> ToolSpec {
    ToolSpec {
        name: "book_hotel".into(),
        description: Some("Reserve a room.".into()),
        parameters: json!({"type": "object", "properties": {"hotel": {"type": "string"}}, "required": ["hotel"]}),
    }
}

fn respond_request(tools: Vec<ToolSpec>) -> ReplyRequest {
    ReplyRequest {
        identity: Some("You are the concierge.".into()),
        rules: vec!["Be brief.".into()],
        instructions: vec!["Book the room, then confirm.".into()],
        history: vec![Message { role: Role::Assistant, text: "Which hotel?".into() }],
        message: "The Ritz, please".into(),
        tools,
        ..ReplyRequest::default()
    }
}

fn message_start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_02", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
            "stop_reason": null, "usage": {"input_tokens": 40, "cache_read_input_tokens": 600, "cache_creation_input_tokens": 10, "output_tokens": 1},
        }}),
    )
}

fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn text_events(pieces: &[&str]) -> Reply {
    let mut events = vec![
        message_start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for piece in pieces {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    events.extend(message_end("end_turn", 12));
    Reply::events(&events)
}

/// Text, then a tool_use block whose input arrives in pieces.
fn tool_use_events() -> Reply {
    let mut events = vec![
        message_start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me book that."}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_02", "name": "book_hotel", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"hotel\": "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"Ritz\"}"}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
    ];
    events.extend(message_end("tool_use", 30));
    Reply::events(&events)
}

#[test]
fn understand_is_a_forced_tool_call() {
    let server = TestServer::start(vec![tool_answer(good_input(), "tool_use")]);
    let request = booking_request();
    let understanding = provider(&server).understand(&request).unwrap();
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(
        understanding.fields.get("date"),
        Some(&crate::llm::Proposal::new(json!("2026-06-03"), "the 3rd of June"))
    );
    assert_eq!(understanding.usage, Usage { calls: 1, prompt: 950, completion: 20, cached: 900, estimated: false });

    let sent = server.request(0);
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    let body = sent.json();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "record_understanding"}));
    assert_eq!(body["tools"][0]["name"], "record_understanding");
    assert_eq!(body["tools"][0]["input_schema"], understanding_schema(&request));
    assert_eq!(body["system"].as_array().unwrap().len(), 1);
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert!(body["system"][0]["text"].as_str().unwrap().contains("Flows:\n- booking (Book a hotel room)"));
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(body["messages"][0]["content"].as_str().unwrap().starts_with("Today is 2026-01-05."));
    assert!(body.get("stream").is_none());
}

#[test]
fn an_invalid_answer_is_sent_back_as_a_tool_error() {
    let server = TestServer::start(vec![
        tool_answer(json!({"flow": "billing"}), "tool_use"),
        tool_answer(good_input(), "tool_use"),
    ]);
    let understanding = provider(&server).understand(&booking_request()).unwrap();
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understanding.usage.calls, 2);
    let repair = server.request(1).json();
    let messages = repair["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["id"], "toolu_01");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_01");
    assert_eq!(messages[2]["content"][0]["is_error"], true);
    let text = messages[2]["content"][0]["content"].as_str().unwrap();
    assert!(text.starts_with("That answer is invalid: unknown flow `billing`"), "{text}");
}

#[test]
fn a_truncated_answer_twice_fails_cleanly() {
    let cut = || tool_answer(json!({}), "max_tokens");
    let server = TestServer::start(vec![cut(), cut()]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the model's answer is invalid: the answer was cut off by the max_tokens limit (after one repair attempt)"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn an_answer_without_the_tool_is_repaired() {
    let prose = Reply::json(
        200,
        &json!({"content": [{"type": "text", "text": "The user wants a booking."}], "stop_reason": "end_turn", "usage": usage_block()}),
    );
    let server = TestServer::start(vec![prose, tool_answer(good_input(), "tool_use")]);
    assert!(provider(&server).understand(&booking_request()).is_ok());
    let repair = server.request(1).json();
    assert_eq!(repair["messages"][1]["content"][0]["text"], "The user wants a booking.");
    assert!(repair["messages"][2]["content"].as_str().unwrap().contains("must call the `record_understanding` tool"));
}

#[test]
fn respond_streams_text_events() {
    let server = TestServer::start(vec![text_events(&["For which ", "date?"]).paced(Duration::from_millis(3))]);
    let mut pieces = Vec::new();
    let response = reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |piece| {
        pieces.push(piece.to_string())
    })
    .unwrap();
    assert_eq!(pieces, vec!["For which ", "date?"]);
    assert_eq!(response.text, "For which date?");
    assert_eq!(response.usage, Usage { calls: 1, prompt: 650, completion: 12, cached: 600, estimated: false });

    let body = server.request(0).json();
    assert_eq!(body["stream"], true);
    assert!(body.get("tools").is_none());
    let system = body["system"].as_array().unwrap();
    assert_eq!(system.len(), 2);
    assert!(system[0]["text"].as_str().unwrap().starts_with("You are the concierge.\nRules:\n- Be brief.\n"));
    assert_eq!(system[0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(system[1], json!({"type": "text", "text": "Instructions:\n- Book the room, then confirm.\n"}));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "(The conversation starts.)"},
            {"role": "assistant", "content": "Which hotel?"},
            {"role": "user", "content": "The Ritz, please"},
        ])
    );
}

#[test]
fn respond_feeds_tool_use_back() {
    let server = TestServer::start(vec![tool_use_events(), text_events(&["Booked: B-1."])]);
    let mut tools = Tools::allowing(5);
    let mut pieces = Vec::new();
    let response =
        reply_with_tools(&mut provider(&server), &respond_request(vec![booking_tool()]), &mut tools, &mut |piece| {
            pieces.push(piece.to_string())
        })
        .unwrap();
    assert_eq!(tools.calls, vec![("book_hotel".to_string(), json!({"hotel": "Ritz"}))]);
    assert_eq!(response.text, "Let me book that.\n\nBooked: B-1.");
    assert_eq!(pieces.concat(), response.text);
    assert_eq!(response.usage, Usage { calls: 2, prompt: 1300, completion: 42, cached: 1200, estimated: false });

    let first = server.request(0).json();
    assert_eq!(
        first["tools"],
        json!([{"name": "book_hotel", "description": "Reserve a room.", "input_schema": booking_tool().parameters}])
    );
    assert_eq!(first["tool_choice"], json!({"type": "auto"}));
    let second = server.request(1).json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me book that."},
            {"type": "tool_use", "id": "toolu_02", "name": "book_hotel", "input": {"hotel": "Ritz"}},
        ]})
    );
    assert_eq!(
        messages[4],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "{\"booking_id\":\"B-1\"}"},
        ]})
    );
}

#[test]
fn a_round_returns_the_tool_use_before_it_runs_and_the_next_sends_its_result() {
    let server = TestServer::start(vec![tool_use_events(), text_events(&["Sold out."])]);
    let mut provider = provider(&server);
    let request = respond_request(vec![booking_tool()]);
    let mut pieces = Vec::new();
    let first = provider.reply(&request, &[], &mut |piece| pieces.push(piece.to_string()));
    let Ok(ModelReply::ToolCalls(asked)) = first else { panic!("tool calls expected: {first:?}") };
    assert_eq!(
        asked.calls,
        vec![ToolCall { id: "toolu_02".into(), name: "book_hotel".into(), arguments: Ok(json!({"hotel": "Ritz"})) }]
    );
    assert_eq!(asked.text, "Let me book that.");
    assert_eq!(pieces, ["Let me book that."]);
    assert_eq!(asked.usage.calls, 1);
    assert_eq!(server.requests().len(), 1, "nothing more is asked before the caller answers");

    let rounds = [ToolRound { asked, results: vec![Err("the hotel is full".into())] }];
    let second = provider.reply(&request, &rounds, &mut |_| {});
    let Ok(ModelReply::Done(response)) = second else { panic!("an answer expected: {second:?}") };
    assert_eq!(response.text, "Sold out.");
    let body = server.request(1).json();
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    let messages = body["messages"].as_array().cloned().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me book that."},
            {"type": "tool_use", "id": "toolu_02", "name": "book_hotel", "input": {"hotel": "Ritz"}},
        ]})
    );
    assert_eq!(
        messages[4],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "{\"error\":\"the hotel is full\"}"},
        ]}),
        "a tool's error is its result, not an `is_error` block: only unreadable input is"
    );
}

#[test]
fn a_round_the_caller_wrote_goes_back_as_blocks_and_a_spent_budget_says_none() {
    let server = TestServer::start(vec![text_events(&["Booked."])]);
    let mut request = respond_request(vec![booking_tool()]);
    request.tools_spent = true;
    let calls = vec![
        ToolCall { id: "a".into(), name: "book_hotel".into(), arguments: Ok(json!({"hotel": "Ritz"})) },
        ToolCall { id: "b".into(), name: "book_hotel".into(), arguments: Err("not JSON".into()) },
    ];
    let rounds = [ToolRound {
        asked: ToolCalls { calls, text: "One moment.".into(), ..ToolCalls::default() },
        results: vec![Ok(json!({"booking_id": "B-1"})), Err("not JSON".into())],
    }];
    let answer = provider(&server).reply(&request, &rounds, &mut |_| {});
    assert!(matches!(answer, Ok(ModelReply::Done(_))), "{answer:?}");
    let body = server.request(0).json();
    assert_eq!(body["tool_choice"], json!({"type": "none"}), "tools stay declared once used");
    let messages = body["messages"].as_array().cloned().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "One moment."},
            {"type": "tool_use", "id": "a", "name": "book_hotel", "input": {"hotel": "Ritz"}},
            {"type": "tool_use", "id": "b", "name": "book_hotel", "input": {}},
        ]})
    );
    assert_eq!(
        messages[4],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "{\"booking_id\":\"B-1\"}"},
            {"type": "tool_result", "tool_use_id": "b", "content": "{\"error\":\"not JSON\"}", "is_error": true},
        ]})
    );
}

#[test]
fn tools_stay_declared_but_unusable_after_the_limit() {
    let server = TestServer::start(vec![tool_use_events(), text_events(&["Done."])]);
    let mut tools = Tools::allowing(1);
    let response =
        reply_with_tools(&mut provider(&server), &respond_request(vec![booking_tool()]), &mut tools, &mut |_| {})
            .unwrap();
    assert!(response.text.ends_with("Done."));
    let second = server.request(1).json();
    assert_eq!(second["tool_choice"], json!({"type": "none"}));
    assert_eq!(second["tools"][0]["name"], "book_hotel");
}

#[test]
fn error_events_are_classified() {
    let server = TestServer::start(vec![Reply::events(&[
        message_start(),
        ("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ])]);
    let error =
        reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap_err();
    assert_eq!(error.to_string(), "the provider is overloaded: Overloaded (try again shortly)");
}

#[test]
fn a_stream_without_message_stop_is_a_network_error() {
    let server = TestServer::start(vec![
        Reply::events(&[
            message_start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hal"}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ])
        .cut_short(),
    ]);
    let error =
        reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap_err();
    assert_eq!(error.class(), "network");
}

#[test]
fn overloaded_is_retried_and_auth_is_not() {
    let overloaded =
        || Reply::json(529, &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    let server = TestServer::start(vec![overloaded(), tool_answer(good_input(), "tool_use")]);
    assert!(provider(&server).understand(&booking_request()).is_ok());
    assert_eq!(server.requests().len(), 2);

    let server = TestServer::start(vec![Reply::json(
        401,
        &json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.to_string(), "authentication failed: HTTP 401: invalid x-api-key (check the API key)");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn name_and_settings() {
    let server = TestServer::start(vec![tool_answer(good_input(), "tool_use")]);
    let config = ProviderConfig { temperature: Some(1.5), max_tokens: Some(200), ..config(&server.url) };
    let mut provider = Anthropic::new(&config).unwrap();
    assert_eq!(provider.name(), "anthropic:claude-test");
    provider.understand(&booking_request()).unwrap();
    let body = server.request(0).json();
    assert_eq!(body["max_tokens"], 200);
    assert_eq!(body["temperature"], 1.0, "Anthropic's range ends at 1");
}
