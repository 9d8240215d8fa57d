//! A server that reports no usage (llama-cpp-python streams none even when
//! asked): each call's tokens are estimated from the request sent and the
//! answer received, and marked estimated.

use super::*;
use crate::llm::streamed::fused_request;

/// [`text_stream`] without the usage chunk, as llama-cpp-python sends it.
fn stream_without_usage(pieces: &[&str]) -> Reply {
    let mut chunks = vec![delta(json!({"role": "assistant", "content": ""}), None)];
    chunks.extend(pieces.iter().map(|piece| delta(json!({"content": piece}), None)));
    chunks.push(delta(json!({}), Some("stop")));
    Reply::sse(&chunks)
}

/// What the estimate of a call must be: the request's messages (and
/// tools) at four bytes a token, and the answer's text likewise.
fn expected(request: &Value, received: &str) -> Usage {
    Usage::estimate(sent_bytes(request), received.len())
}

#[test]
fn a_streamed_reply_without_usage_is_estimated() {
    let server = TestServer::start(vec![stream_without_usage(&["For which ", "date", "?"])]);
    let mut provider = provider(&server);
    let (result, _) = collect(&mut provider, &respond_request(vec![]), &mut NoTools);
    let response = result.unwrap();
    let body = server.request(0).json();
    assert_eq!(response.usage, expected(&body, "For which date?"));
    assert!(response.usage.estimated);
    // The system message alone is well over a hundred bytes.
    assert!(response.usage.prompt > 25, "{:?}", response.usage);
    assert_eq!(response.usage.completion, 4, "15 bytes at four a token");
}

#[test]
fn a_fused_understand_stream_without_usage_is_estimated_once_it_ends() {
    let mut answer: Value = serde_json::from_str(&good_answer()).unwrap();
    answer["step"] = json!("booking.confirm");
    answer["reply"] = json!("Shall I book the Ritz Paris on 3 June for two?");
    let answer = answer.to_string();
    let pieces: Vec<&str> = answer.as_bytes().chunks(9).map(|piece| std::str::from_utf8(piece).unwrap()).collect();
    let server = TestServer::start(vec![stream_without_usage(&pieces)]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    // Handed over mid-stream: nothing is estimated before the end, so
    // that a usage block after the finish is not counted twice.
    assert_eq!(understood.understanding.usage, Usage { calls: 1, ..Usage::default() });
    let mut reply = understood.reply.unwrap();
    reply.read_all(&mut |_| {}).unwrap();
    let whole = expected(&server.request(0).json(), &answer);
    assert_eq!(reply.late_usage(), Usage { calls: 0, ..whole });
    assert!(reply.late_usage().estimated);
}

#[test]
fn a_whole_answer_without_usage_is_estimated() {
    let answer = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": good_answer()}, "finish_reason": "stop"}],
    });
    let server = TestServer::start(vec![Reply::json(200, &answer)]);
    let understanding = provider(&server).understand(&booking_request()).unwrap();
    assert_eq!(understanding.usage, expected(&server.request(0).json(), &good_answer()));
}

#[test]
fn reported_usage_is_not_estimated_and_the_flag_is_left_out_of_the_json() {
    let server = TestServer::start(vec![text_stream(&["Hello"])]);
    let mut provider = provider(&server);
    let (result, _) = collect(&mut provider, &respond_request(vec![]), &mut NoTools);
    let usage = result.unwrap().usage;
    assert_eq!(usage, Usage { calls: 1, prompt: 120, completion: 30, cached: 64, estimated: false });
    assert!(serde_json::to_value(usage).unwrap().get("estimated").is_none());
    let estimated = Usage::estimate(8, 4);
    assert_eq!(serde_json::to_value(estimated).unwrap()["estimated"], true);
    let mut sum = usage;
    sum.add(estimated);
    assert!(sum.estimated, "a sum with any estimated part is estimated");
}

#[test]
fn a_fused_reply_dropped_before_its_end_counts_the_estimate_so_far() {
    let mut answer: Value = serde_json::from_str(&good_answer()).unwrap();
    answer["step"] = json!("booking.confirm");
    answer["reply"] = json!("Shall I book the Ritz Paris on 3 June for two?");
    let answer = answer.to_string();
    let pieces: Vec<&str> = answer.as_bytes().chunks(9).map(|piece| std::str::from_utf8(piece).unwrap()).collect();
    let server = TestServer::start(vec![stream_without_usage(&pieces)]);
    let understood = provider(&server).understand_streamed(&fused_request()).unwrap();
    let reply = understood.reply.unwrap();
    let dropped = reply.dropped_usage();
    let sent = expected(&server.request(0).json(), "");
    assert_eq!(dropped.calls, 0, "the call was counted with the extraction");
    assert_eq!(dropped.prompt, sent.prompt, "the whole prompt was processed");
    assert!(dropped.completion > 0 && dropped.estimated, "{dropped:?}");
}
