//! Prompt caching: what two turns' requests share, `cache_prompt` for
//! llama.cpp's server (dropped where refused), and the cached tokens each
//! server reports.

use super::*;

/// The length of the longest common prefix of two texts, in bytes.
fn common_prefix(first: &str, second: &str) -> usize {
    first.bytes().zip(second.bytes()).take_while(|(a, b)| a == b).count()
}

/// The request body as the server's chat template reads it: the messages,
/// in order.
fn prompt_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| format!("{}: {}\n", message["role"], message["content"].as_str().unwrap_or("")))
        .collect()
}

/// A later turn of the same session: another message, more history,
/// another field asked, no condition, another day.
fn later_turn() -> UnderstandRequest {
    let mut request = booking_request();
    request.message = "2 guests".into();
    request.history.push(Message { role: Role::User, text: "Ritz Paris".into() });
    request.history.push(Message { role: Role::Assistant, text: "For how many guests?".into() });
    request.fields.retain(|field| field.name == "guests");
    request.conditions.clear();
    request.today = "2026-01-06".into();
    request
}

#[test]
fn two_turns_understand_requests_share_every_stable_part_first() {
    for mode in [StructuredOutput::JsonSchema, StructuredOutput::JsonObject, StructuredOutput::Prompt] {
        let later_answer = json!({
            "flow": null,
            "fields": {"guests": {"evidence": "2 guests", "value": 2}},
            "signals": {"wants_human": {"evidence": null, "yes": false}},
        });
        let server =
            TestServer::start(vec![completion(&good_answer(), "stop"), completion(&later_answer.to_string(), "stop")]);
        let mut provider = with_mode(&server, mode);
        provider.understand(&booking_request()).unwrap();
        provider.understand(&later_turn()).unwrap();
        let (first, second) = (prompt_text(&server.request(0).json()), prompt_text(&server.request(1).json()));
        let shared = common_prefix(&first, &second);
        let stable = &first[..shared];
        for part in [
            "You read the latest user message",
            "Flows:\n- booking (Book a hotel room)",
            "- support: the user has a problem",
        ] {
            assert!(stable.contains(part), "{mode:?}: the shared prefix holds {part:?}: {stable}");
        }
        // The whole system message is shared; what varies starts in the
        // user message after it.
        let system_end = first.find("\n\"user\": ").unwrap();
        assert!(shared >= system_end, "{mode:?}: {shared} bytes shared of a {system_end}-byte system message");
        for part in ["Today is", "Conversation so far", "Fields:", "Latest user message"] {
            assert!(first.find(part).unwrap() > system_end, "{mode:?}: {part:?} comes after the stable part");
        }
        assert!(first[shared..].contains("Ritz Paris, the 3rd of June"), "{mode:?}: the message varies");
    }
}

#[test]
fn two_turns_reply_requests_share_identity_and_rules_first() {
    let request = |instruction: &str, message: &str, history: Vec<Message>| ReplyRequest {
        identity: Some("You are the concierge of the Grand Hotel group.".into()),
        rules: vec!["Never promise a room before the booking tool confirms it.".into()],
        instructions: vec![instruction.into()],
        history,
        message: message.into(),
        ..ReplyRequest::default()
    };
    let server = TestServer::start(vec![text_stream(&["Which date?"]), text_stream(&["How many guests?"])]);
    let mut provider = provider(&server);
    let first = request("Ask for the date.", "The Ritz", vec![]);
    let history = vec![Message { role: Role::User, text: "The Ritz".into() }];
    let second = request("Ask for the number of guests.", "2026-12-04", history);
    for turn in [&first, &second] {
        reply_with_tools(&mut provider, turn, &mut NoTools, &mut |_| {}).unwrap();
    }
    let (first, second) = (prompt_text(&server.request(0).json()), prompt_text(&server.request(1).json()));
    let stable = &first[..common_prefix(&first, &second)];
    assert!(stable.contains("You are the concierge") && stable.contains("Never promise a room"), "{stable}");
    assert!(stable.contains("Write your next message to the user"), "{stable}");
    assert!(!stable.contains("Ask for the date"), "the instructions come after: {stable}");
}

#[test]
fn cache_prompt_is_sent_to_servers_but_openai_and_dropped_where_refused() {
    assert!(sends_cache_prompt("http://127.0.0.1:8080/v1"));
    assert!(!sends_cache_prompt("https://api.openai.com/v1"));
    let refusal = Reply::json(400, &error_body("Unrecognized request argument supplied: cache_prompt"));
    let server = TestServer::start(vec![
        refusal,
        completion(&good_answer(), "stop"),
        text_stream(&["Hello"]),
        completion(&good_answer(), "stop"),
    ]);
    let mut provider = provider(&server);
    let understanding = provider.understand(&booking_request()).unwrap();
    assert_eq!(understanding.usage.calls, 1, "the refusal made no call");
    reply_with_tools(&mut provider, &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap();
    provider.understand(&booking_request()).unwrap();
    let sent: Vec<Option<Value>> =
        server.requests().iter().map(|request| request.json().get("cache_prompt").cloned()).collect();
    assert_eq!(sent, vec![Some(json!(true)), None, None, None]);
    assert_eq!(provider.structured_output(), StructuredOutput::JsonSchema, "the mode was not the problem");
}

#[test]
fn openai_api_is_not_sent_cache_prompt() {
    let server = TestServer::start(vec![completion(&good_answer(), "stop")]);
    // The provider decides from the configured URL; the test server stands
    // in for the host it names.
    let mut provider = provider(&server);
    provider.cache_prompt = sends_cache_prompt("https://api.openai.com/v1");
    provider.understand(&booking_request()).unwrap();
    assert_eq!(server.request(0).json().get("cache_prompt"), None);
}

#[test]
fn llama_cpp_cache_counts_stand_in_for_cached_tokens() {
    let answer = |usage: Value| {
        Reply::json(
            200,
            &json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": good_answer()}, "finish_reason": "stop"}],
                "usage": usage,
                "timings": {"cache_n": 310, "prompt_n": 42, "prompt_ms": 80.5},
            }),
        )
    };
    let server = TestServer::start(vec![
        answer(json!({"prompt_tokens": 352, "completion_tokens": 40, "total_tokens": 392})),
        answer(usage_block()),
        Reply::sse(&[
            delta(json!({"content": "Hi"}), None),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 300, "completion_tokens": 2}, "timings": {"cache_n": 280}}),
        ]),
    ]);
    let mut provider = provider(&server);
    assert_eq!(provider.understand(&booking_request()).unwrap().usage.cached, 310);
    assert_eq!(provider.understand(&booking_request()).unwrap().usage.cached, 64, "OpenAI's own figure wins");
    let reply = reply_with_tools(&mut provider, &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap();
    assert_eq!(reply.usage, Usage { calls: 1, prompt: 300, completion: 2, cached: 280, estimated: false });
}
