//! The understand call streamed: the extraction handed over while the
//! reply is still arriving, in every structured-output mode, the reply
//! dropped mid-way (the connection closes), and the whole answer used
//! where a server will not stream it.

use super::*;
use crate::llm::FusedReply;
use crate::llm::streamed::fused_request;
use crate::llm::testserver::Gate;

const REPLY: &str = "Shall I book the Ritz Paris on 3 June for two? \"Oui\" — très bien 😀";

/// The answer of a fused call: the extraction, the step, then the reply.
fn fused_answer() -> String {
    let mut answer: Value = serde_json::from_str(&good_answer()).unwrap();
    answer["step"] = json!("booking.confirm");
    answer["reply"] = json!(REPLY);
    answer.to_string()
}

/// The reply of [`fused_answer`] as the understanding holds it: while it
/// streams, its text is empty.
fn fused_reply(text: &str) -> Option<FusedReply> {
    Some(FusedReply { step: "booking.confirm".into(), text: text.into() })
}

/// `text` in pieces of `size` characters, as a server sends tokens.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|piece| piece.iter().collect()).collect()
}

/// The chunks of a streamed answer whose text arrives as `delta.content`.
fn content_chunks(answer: &str) -> Vec<Value> {
    let mut chunks = vec![delta(json!({"role": "assistant", "content": ""}), None)];
    chunks.extend(pieces(answer, 7).into_iter().map(|piece| delta(json!({"content": piece}), None)));
    chunks.push(delta(json!({}), Some("stop")));
    chunks.push(usage_chunk());
    chunks
}

/// What the extraction of [`fused_answer`] validates to.
fn extraction() -> Understanding {
    schema::validate(&serde_json::from_str(&good_answer()).unwrap(), &booking_request()).unwrap()
}

fn late_usage() -> Usage {
    Usage { calls: 0, prompt: 120, completion: 30, cached: 64, estimated: false }
}

#[test]
fn the_extraction_comes_first_then_the_reply_in_pieces() {
    let server = TestServer::start(vec![Reply::sse(&content_chunks(&fused_answer()))]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    assert_eq!(
        understood.understanding,
        Understanding { reply: fused_reply(""), usage: Usage { calls: 1, ..Usage::default() }, ..extraction() }
    );
    let mut reply = understood.reply.unwrap();
    let mut shown = Vec::new();
    assert_eq!(reply.read_all(&mut |piece| shown.push(piece.to_string())).unwrap(), REPLY);
    assert!(shown.len() > 5, "the reply arrives in pieces: {shown:?}");
    assert_eq!(reply.late_usage(), late_usage(), "the usage chunk after the answer is read too");

    let body = server.request(0).json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["response_format"]["type"], "json_schema");
}

#[test]
fn the_tool_mode_streams_the_call_arguments() {
    let mut chunks = vec![delta(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "understanding", "arguments": ""}}]}),
        None,
    )];
    for piece in pieces(&fused_answer(), 5) {
        chunks.push(delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}), None));
    }
    chunks.push(delta(json!({}), Some("tool_calls")));
    let server = TestServer::start(vec![Reply::sse(&chunks)]);
    let understood = with_mode(&server, StructuredOutput::Tool).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.fields, extraction().fields);
    assert_eq!(understood.reply.unwrap().read_all(&mut |_| {}).unwrap(), REPLY);
    assert_eq!(server.request(0).json()["tool_choice"]["function"]["name"], "understanding");
}

#[test]
fn a_prompt_mode_answer_in_a_code_fence_streams_too() {
    let fenced = format!("Here you are:\n```json\n{}\n```", fused_answer());
    let server = TestServer::start(vec![Reply::sse(&content_chunks(&fenced))]);
    let understood = with_mode(&server, StructuredOutput::Prompt).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understood.reply.unwrap().read_all(&mut |_| {}).unwrap(), REPLY);
}

#[test]
fn the_extraction_is_handed_over_mid_reply_and_dropping_the_reply_closes_the_connection() {
    let answer = fused_answer();
    let chunks = content_chunks(&answer);
    // Hold the stream a few pieces into the reply: everything below
    // happens while the server has the rest of the answer still unsent.
    let reply_starts = answer.find("\"reply\"").unwrap();
    let held = 1 + (reply_starts + 30) / 7;
    let gate = Gate::default();
    let server = TestServer::start(vec![Reply::sse(&chunks).held_at(held, &gate).paced(Duration::from_millis(2))]);
    // The provider lives on, as in a session: the connection must close
    // when the reply is dropped, not when the provider is.
    let mut provider = provider(&server);
    let understood = provider.understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.fields, extraction().fields);
    let mut reply = understood.reply.unwrap();
    let first = reply.next_piece().unwrap().unwrap();
    assert!(REPLY.starts_with(&first), "{first}");
    drop(reply);
    gate.open();
    let streamed = server.streams_ended(1)[0];
    drop(provider);
    assert!(
        streamed.sent < streamed.scripted - 2,
        "the server could not send the rest once the reply was dropped: {streamed:?}"
    );
}

#[test]
fn an_answer_without_reply_is_the_extraction_alone() {
    let server = TestServer::start(vec![Reply::sse(&content_chunks(&good_answer()))]);
    let understood = provider(&server).understand_streamed(&booking_request()).unwrap();
    assert!(understood.reply.is_none());
    let usage = Usage { calls: 1, prompt: 120, completion: 30, cached: 64, estimated: false };
    assert_eq!(understood.understanding, Understanding { usage, ..extraction() });
}

#[test]
fn a_reply_for_no_step_is_dropped_at_once() {
    let mut answer: Value = serde_json::from_str(&fused_answer()).unwrap();
    answer["step"] = Value::Null;
    // Two steps offered: a reply that names neither is for no step.
    let mut request = fused_request();
    if let Some(ask) = request.reply.as_mut() {
        let mut other = ask.steps[0].clone();
        other.id = "booking.ask_date".into();
        ask.steps.insert(0, other);
    }
    let server = TestServer::start(vec![Reply::sse(&content_chunks(&answer.to_string()))]);
    let understood = provider(&server).understand_streamed(&request).unwrap();
    assert!(understood.reply.is_none() && understood.understanding.reply.is_none());
    assert_eq!(understood.understanding.fields, extraction().fields);
    // One step offered: the reply is that step's, streamed.
    let server = TestServer::start(vec![Reply::sse(&content_chunks(&answer.to_string()))]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.reply.map(|reply| reply.step).as_deref(), Some("booking.confirm"));
    assert!(understood.reply.is_some());
}

#[test]
fn a_server_that_will_not_stream_structured_output_is_read_whole_from_then_on() {
    let refusal = Reply::json(400, &error_body("'stream' is not supported with 'response_format'"));
    let server =
        TestServer::start(vec![refusal, completion(&fused_answer(), "stop"), completion(&fused_answer(), "stop")]);
    let mut provider = provider(&server);
    for _ in 0..2 {
        let understood = provider.understand_streamed(&fused_request()).unwrap();
        let usage = Usage { calls: 1, prompt: 120, completion: 30, cached: 64, estimated: false };
        assert_eq!(understood.understanding, Understanding { reply: fused_reply(REPLY), usage, ..extraction() });
        assert!(understood.reply.is_none(), "the reply came whole, in the understanding");
    }
    assert_eq!(provider.structured_output(), StructuredOutput::JsonSchema, "the mode was not the problem");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].json().get("stream"), None);
    assert_eq!(requests[2].json().get("stream"), None, "streaming is not tried again");
}

#[test]
fn a_refused_mode_still_falls_back_and_streaming_goes_on_in_the_next_one() {
    let refusal = Reply::json(500, &error_body("response_format json_schema is not supported"));
    let server = TestServer::start(vec![
        refusal,
        Reply::sse(&content_chunks(&fused_answer())),
        Reply::sse(&content_chunks(&fused_answer())),
    ]);
    let mut provider = provider(&server);
    for _ in 0..2 {
        let understood = provider.understand_streamed(&fused_request()).unwrap();
        assert_eq!(understood.reply.unwrap().read_all(&mut |_| {}).unwrap(), REPLY);
    }
    assert_eq!(provider.structured_output(), StructuredOutput::JsonObject);
    let sent: Vec<(Value, Value)> = server
        .requests()
        .iter()
        .map(|request| (request.json()["stream"].clone(), request.json()["response_format"]["type"].clone()))
        .collect();
    let streamed = |mode: &str| (json!(true), json!(mode));
    assert_eq!(sent, vec![streamed("json_schema"), streamed("json_object"), streamed("json_object")]);
}

#[test]
fn an_invalid_streamed_extraction_gets_one_repair() {
    let mut bad: Value = serde_json::from_str(&fused_answer()).unwrap();
    bad["flow"] = json!("nowhere");
    let server =
        TestServer::start(vec![Reply::sse(&content_chunks(&bad.to_string())), completion(&fused_answer(), "stop")]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    assert_eq!(understood.understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understood.understanding.usage.calls, 2);
    assert_eq!(understood.understanding.reply, fused_reply(REPLY));
    assert!(understood.reply.is_none());
    let repair = server.request(1).json();
    let messages = repair["messages"].as_array().unwrap();
    assert!(messages.last().unwrap()["content"].as_str().unwrap().contains("nowhere"));
}

#[test]
fn a_stream_cut_inside_the_reply_is_a_network_error() {
    let answer = fused_answer();
    let cut = answer.find("Paris on").unwrap();
    let mut chunks = vec![delta(json!({"content": &answer[..cut]}), None)];
    chunks.push(delta(json!({"content": "Paris"}), None));
    let server = TestServer::start(vec![Reply::sse(&chunks).cut_short()]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    let mut reply = understood.reply.unwrap();
    let mut shown = String::new();
    let error = reply.read_all(&mut |piece| shown.push_str(piece)).unwrap_err();
    assert_eq!(error.class(), "network");
    assert!(shown.starts_with("Shall I book the Ritz"), "{shown}");
}

#[test]
fn a_server_that_answers_a_streamed_request_whole_is_read_whole() {
    let server = TestServer::start(vec![completion(&fused_answer(), "stop")]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    let usage = Usage { calls: 1, prompt: 120, completion: 30, cached: 64, estimated: false };
    assert_eq!(understood.understanding, Understanding { reply: fused_reply(""), usage, ..extraction() });
    let mut reply = understood.reply.unwrap();
    assert_eq!(reply.next_piece().unwrap().as_deref(), Some(REPLY), "the whole reply, in one piece");
    assert_eq!(reply.next_piece().unwrap(), None);
}
