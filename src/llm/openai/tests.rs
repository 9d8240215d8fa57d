//! Wire tests of the OpenAI-compatible provider against a scripted server
//! on 127.0.0.1: what flowc sends, and what it does with each answer.
//!
//! A full booking conversation through this wire format needs the runtime's
//! turn pipeline, which lands on another branch; it belongs in `tests/`
//! once `flowc run` exists. These tests cover every call it would make.

use super::*;
use crate::llm::config::ProviderKind;
use crate::llm::schema::tests::booking_request;
use crate::llm::testserver::{Reply, TestServer, Tools, closed_port_url, fast_http};
use crate::llm::{NoTools, ToolCall, ToolCalls, ToolLoop, ToolRound, ToolSpec, reply_with_tools};
use std::time::{Duration, Instant};

mod caching;
mod deadlines;
mod estimated;
mod streamed;

const KEY: &str = "sk-test-key-0123456789";

fn config(url: &str) -> ProviderConfig {
    ProviderConfig {
        provider: ProviderKind::OpenAi,
        model: "gpt-test".into(),
        base_url: format!("{url}/v1"),
        api_key: Some(Secret::new(KEY)),
        http: fast_http(),
        ..ProviderConfig::default()
    }
}

fn provider(server: &TestServer) -> OpenAi {
    OpenAi::new(&config(&server.url)).unwrap()
}

fn with_mode(server: &TestServer, mode: StructuredOutput) -> OpenAi {
    OpenAi::new(&ProviderConfig { structured_output: mode, ..config(&server.url) }).unwrap()
}

fn usage_block() -> Value {
    json!({"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "prompt_tokens_details": {"cached_tokens": 64}})
}

/// A chat completion whose message is `content`.
fn completion(content: &str, finish_reason: &str) -> Reply {
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_767_600_000,
            "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
            "usage": usage_block(),
        }),
    )
}

/// A chat completion that calls `name` with `arguments` (a JSON string).
fn tool_completion(name: &str, arguments: &str) -> Reply {
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-2",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": name, "arguments": arguments}}],
                },
                "finish_reason": "tool_calls",
            }],
            "usage": usage_block(),
        }),
    )
}

fn good_answer() -> String {
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
    .to_string()
}

fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}})
}

/// A streamed chunk holding `delta`.
fn delta(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-3",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-3", "object": "chat.completion.chunk", "choices": [], "usage": usage_block()})
}

fn text_stream(pieces: &[&str]) -> Reply {
    let mut chunks = vec![delta(json!({"role": "assistant", "content": ""}), None)];
    chunks.extend(pieces.iter().map(|piece| delta(json!({"content": piece}), None)));
    chunks.push(delta(json!({}), Some("stop")));
    chunks.push(usage_chunk());
    Reply::sse(&chunks)
}

fn booking_tool() -> ToolSpec {
    ToolSpec {
        name: "book_hotel".into(),
        description: Some("Reserve a room and return its booking id.".into()),
        parameters: json!({"type": "object", "properties": {"hotel": {"type": "string"}}, "required": ["hotel"]}),
    }
}

fn respond_request(tools: Vec<ToolSpec>) -> ReplyRequest {
    ReplyRequest {
        identity: Some("You are the concierge.".into()),
        instructions: vec!["Book the room, then confirm.".into()],
        history: vec![Message { role: Role::Assistant, text: "Which hotel?".into() }],
        message: "The Ritz, please".into(),
        tools,
        ..ReplyRequest::default()
    }
}

fn collect(
    provider: &mut OpenAi,
    request: &ReplyRequest,
    tools: &mut dyn ToolLoop,
) -> (Result<Response, ProviderError>, Vec<String>) {
    let mut pieces = Vec::new();
    let result = reply_with_tools(provider, request, tools, &mut |piece| pieces.push(piece.to_string()));
    (result, pieces)
}

#[test]
fn understand_sends_a_strict_json_schema() {
    let server = TestServer::start(vec![completion(&good_answer(), "stop")]);
    let request = booking_request();
    let understanding = provider(&server).understand(&request).unwrap();

    let sent = server.request(0);
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = sent.json();
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][0]["content"].as_str().unwrap().starts_with("You read the latest user message"));
    assert_eq!(body["messages"][1]["role"], "user");
    assert!(
        body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .ends_with("Latest user message: \"Ritz Paris, the 3rd of June, for two\"")
    );
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "understanding");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    let sent_schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(sent_schema, &strict_schema(&understanding_schema(&request)));
    assert_eq!(sent_schema["properties"]["flow"]["anyOf"][0]["enum"], json!(["booking", "support"]));
    assert_eq!(sent_schema["properties"]["conditions"]["required"], json!(["booking.confirm#2"]));
    assert!(body.get("temperature").is_none() && body.get("tools").is_none());

    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understanding.fields.get("guests").map(|proposal| &proposal.value), Some(&json!(2)));
    assert_eq!(understanding.conditions.get("booking.confirm#2").map(|answer| answer.yes), Some(false));
    assert_eq!(understanding.usage, Usage { calls: 1, prompt: 120, completion: 30, cached: 64, estimated: false });
}

#[test]
fn nothing_to_ask_makes_no_call() {
    let server = TestServer::start(vec![]);
    let request = UnderstandRequest { message: "hello".into(), ..UnderstandRequest::default() };
    let understanding = provider(&server).understand(&request).unwrap();
    assert_eq!(understanding, Understanding::default());
    assert!(server.requests().is_empty());
}

#[test]
fn temperature_and_max_tokens_are_sent_when_set() {
    let server = TestServer::start(vec![completion(&good_answer(), "stop")]);
    let config = ProviderConfig { temperature: Some(0.0), max_tokens: Some(300), ..config(&server.url) };
    OpenAi::new(&config).unwrap().understand(&booking_request()).unwrap();
    let body = server.request(0).json();
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["max_tokens"], 300);
}

#[test]
fn rejected_mode_falls_back_and_is_remembered() {
    // llama-cpp-python as shipped answers the standard form with a 500.
    let server = TestServer::start(vec![
        Reply::json(500, &error_body("Unsupported response_format type: json_schema")),
        completion(&good_answer(), "stop"),
        completion(&good_answer(), "stop"),
    ]);
    let mut provider = provider(&server);
    let request = booking_request();
    let understanding = provider.understand(&request).unwrap();
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understanding.usage.calls, 1, "a refused request produced no answer");
    assert_eq!(provider.structured_output(), StructuredOutput::JsonObject);
    provider.understand(&request).unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the refusal is not retried");
    assert_eq!(requests[0].json()["response_format"]["type"], "json_schema");
    for later in &requests[1..] {
        let body = later.json();
        assert_eq!(body["response_format"], json!({"type": "json_object", "schema": understanding_schema(&request)}));
        assert!(body["messages"][1]["content"].as_str().unwrap().contains("Answer shape: {\"flow\""));
    }
}

#[test]
fn fallback_runs_down_to_the_prompt() {
    let fenced = format!("Here you go:\n```json\n{}\n```", good_answer());
    let server = TestServer::start(vec![
        Reply::json(400, &error_body("'response_format.type' must be 'text' or 'json_schema'")),
        Reply::json(422, &json!({"detail": [{"loc": ["body", "tool_choice"], "msg": "tools are not supported"}]})),
        completion(&fenced, "stop"),
    ]);
    let mut provider = with_mode(&server, StructuredOutput::JsonObject);
    let understanding = provider.understand(&booking_request()).unwrap();
    assert_eq!(understanding.fields.get("hotel").map(|proposal| &proposal.value), Some(&json!("Ritz Paris")));
    assert_eq!(provider.structured_output(), StructuredOutput::Prompt);
    let requests = server.requests();
    assert_eq!(requests[1].json()["tool_choice"], json!({"type": "function", "function": {"name": "understanding"}}));
    let last = requests[2].json();
    assert!(last.get("response_format").is_none() && last.get("tools").is_none());
    assert!(last["messages"][0]["content"].as_str().unwrap().contains("Answer with one JSON object only"));
}

#[test]
fn a_refusal_of_the_last_mode_is_an_invalid_request() {
    let server = TestServer::start(vec![Reply::json(400, &error_body("schema is not allowed here"))]);
    let error = with_mode(&server, StructuredOutput::Prompt).understand(&booking_request()).unwrap_err();
    assert_eq!(error.class(), "invalid_request");
    assert_eq!(error.to_string(), "the request was refused: HTTP 400: schema is not allowed here");
}

#[test]
fn tool_mode_reads_the_function_arguments() {
    let server = TestServer::start(vec![tool_completion("understanding", &good_answer())]);
    let mut provider = with_mode(&server, StructuredOutput::Tool);
    let request = booking_request();
    let understanding = provider.understand(&request).unwrap();
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    let body = server.request(0).json();
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "understanding");
    assert_eq!(body["tools"][0]["function"]["parameters"], understanding_schema(&request));
    assert_eq!(body["tool_choice"], json!({"type": "function", "function": {"name": "understanding"}}));
    assert!(
        body["messages"][0]["content"].as_str().unwrap().ends_with("Answer by calling the `understanding` tool.\n")
    );
}

#[test]
fn truncated_json_gets_one_repair() {
    let server = TestServer::start(vec![completion("{\"flow\": \"book", "length"), completion(&good_answer(), "stop")]);
    let understanding = provider(&server).understand(&booking_request()).unwrap();
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understanding.usage, Usage { calls: 2, prompt: 240, completion: 60, cached: 128, estimated: false });

    let repair = server.request(1).json();
    let messages = repair["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2], json!({"role": "assistant", "content": "{\"flow\": \"book"}));
    let text = messages[3]["content"].as_str().unwrap();
    assert!(text.starts_with("That answer is invalid: the answer is not valid JSON (EOF while parsing"), "{text}");
    assert!(text.contains("the answer was cut off by the max_tokens limit"), "{text}");
}

#[test]
fn a_runaway_answer_is_clipped_in_the_repair_and_patterns_are_not_sent() {
    // What llama.cpp's grammar for `[^@ ]+` lets a small model write: the
    // string never closes.
    let runaway = format!("{{\"fields\": {{\"email\": \"x\\\",{}", "Theuser's:-order_id:123,".repeat(300));
    let server = TestServer::start(vec![completion(&runaway, "length"), completion(&good_answer(), "stop")]);
    let mut request = booking_request();
    request.fields.push(crate::llm::schema::tests::field(
        "email",
        "string",
        json!({"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"}),
    ));
    provider(&server).understand(&request).unwrap();
    let first = server.request(0).json();
    let email = &first["response_format"]["json_schema"]["schema"]["properties"]["fields"]["properties"]["email"];
    assert_eq!(email["anyOf"][0]["properties"]["value"], json!({"type": "string"}), "no pattern reaches the server");
    let echoed = server.request(1).json()["messages"][2]["content"].as_str().unwrap().to_string();
    assert_eq!(echoed.chars().count(), 2001);
    assert!(echoed.ends_with('…'));
}

#[test]
fn a_second_invalid_answer_fails_cleanly() {
    let wrong = json!({"flow": "billing", "fields": {"guests": "two"}}).to_string();
    let server = TestServer::start(vec![completion(&wrong, "stop"), completion(&wrong, "stop")]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.class(), "invalid_output");
    assert_eq!(
        error.to_string(),
        "the model's answer is invalid: unknown flow `billing` (choose one of `booking`, `support` or null); \
         field `guests` must be an integer or null, not a string (after one repair attempt)"
    );
    assert_eq!(server.requests().len(), 2);
    let repair = server.request(1).json();
    assert!(repair["messages"][3]["content"].as_str().unwrap().contains("unknown flow `billing`"));
}

#[test]
fn respond_streams_the_reply() {
    let server = TestServer::start(vec![text_stream(&["For which ", "date", "?"]).paced(Duration::from_millis(5))]);
    let mut provider = provider(&server);
    let (result, pieces) = collect(&mut provider, &respond_request(vec![]), &mut NoTools);
    let response = result.unwrap();
    assert_eq!(pieces, vec!["For which ", "date", "?"]);
    assert_eq!(response.text, "For which date?");
    assert_eq!(response.usage, Usage { calls: 1, prompt: 120, completion: 30, cached: 64, estimated: false });

    let body = server.request(0).json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert!(body.get("tools").is_none());
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are the concierge.\n"), "the stable part comes first");
    assert!(system.ends_with("Instructions:\n- Book the room, then confirm.\n"), "the dynamic part comes last");
    assert_eq!(messages[1], json!({"role": "assistant", "content": "Which hotel?"}));
    assert_eq!(messages[2], json!({"role": "user", "content": "The Ritz, please"}));
}

/// Round one of a tool loop: `book_hotel` called, its arguments split
/// across chunks as OpenAI streams them.
fn tool_call_stream() -> Reply {
    Reply::sse(&[
        delta(json!({"role": "assistant", "content": null}), None),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "book_hotel", "arguments": ""}}]}),
            None,
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"hotel\":"}}]}), None),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": " \"Ritz\"}"}}]}), None),
        delta(json!({}), Some("tool_calls")),
        usage_chunk(),
    ])
}

#[test]
fn respond_runs_the_tool_loop() {
    let server = TestServer::start(vec![tool_call_stream(), text_stream(&["Booked: ", "B-1."])]);
    let mut provider = provider(&server);
    let mut tools = Tools::allowing(5);
    let (result, pieces) = collect(&mut provider, &respond_request(vec![booking_tool()]), &mut tools);
    let response = result.unwrap();
    assert_eq!(tools.calls, vec![("book_hotel".to_string(), json!({"hotel": "Ritz"}))]);
    assert_eq!(pieces, vec!["Booked: ", "B-1."]);
    assert_eq!(response.text, "Booked: B-1.");
    assert_eq!(response.usage.calls, 2);
    assert_eq!(response.usage.prompt, 240);

    let first = server.request(0).json();
    assert_eq!(first["tool_choice"], "auto");
    assert_eq!(
        first["tools"],
        json!([{"type": "function", "function": {
            "name": "book_hotel",
            "description": "Reserve a room and return its booking id.",
            "parameters": {"type": "object", "properties": {"hotel": {"type": "string"}}, "required": ["hotel"]},
        }}])
    );
    let second = server.request(1).json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "book_hotel", "arguments": "{\"hotel\": \"Ritz\"}"}}
        ]})
    );
    assert_eq!(messages[4], json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"booking_id\":\"B-1\"}"}));
}

#[test]
fn tools_are_withdrawn_when_the_loop_says_no() {
    let server = TestServer::start(vec![tool_call_stream(), text_stream(&["Done."])]);
    let mut provider = provider(&server);
    let mut tools = Tools::allowing(1);
    let (result, _) = collect(&mut provider, &respond_request(vec![booking_tool()]), &mut tools);
    assert_eq!(result.unwrap().text, "Done.");
    let second = server.request(1).json();
    assert!(second.get("tools").is_none() && second.get("tool_choice").is_none());
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn bad_tool_arguments_go_back_to_the_model() {
    let broken = Reply::sse(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_9", "function": {"name": "book_hotel", "arguments": "{\"hotel"}}]}),
            None,
        ),
        delta(json!({}), Some("tool_calls")),
    ]);
    let server = TestServer::start(vec![broken, text_stream(&["Sorry."])]);
    let mut provider = provider(&server);
    let mut tools = Tools::allowing(5);
    let (result, _) = collect(&mut provider, &respond_request(vec![booking_tool()]), &mut tools);
    assert_eq!(result.unwrap().text, "Sorry.");
    assert!(tools.calls.is_empty(), "the tool never sees invalid arguments");
    let second = server.request(1).json();
    let content = second["messages"][4]["content"].as_str().unwrap();
    assert!(content.starts_with("{\"error\":\"the arguments are not valid JSON"), "{content}");
}

#[test]
fn auto_refused_switches_to_forced_choice() {
    let server = TestServer::start(vec![
        Reply::json(500, &error_body("tool_choice 'auto' is not supported by this chat format")),
        tool_completion("next_action", "{\"action\": \"book_hotel\", \"arguments\": {\"hotel\": \"Ritz\"}}"),
        tool_completion("next_action", "{\"action\": \"reply\"}"),
        text_stream(&["Booked."]),
    ]);
    let mut provider = provider(&server);
    let mut tools = Tools::allowing(5);
    let (result, _) = collect(&mut provider, &respond_request(vec![booking_tool()]), &mut tools);
    let response = result.unwrap();
    assert_eq!(response.text, "Booked.");
    assert_eq!(response.usage.calls, 3, "two decisions and the reply");
    assert_eq!(provider.tool_choice(), ToolChoiceMode::Forced);
    assert_eq!(tools.calls, vec![("book_hotel".to_string(), json!({"hotel": "Ritz"}))]);

    let decision = server.request(1).json();
    assert!(decision.get("stream").is_none());
    assert_eq!(decision["tool_choice"], json!({"type": "function", "function": {"name": "next_action"}}));
    let choices = &decision["tools"][0]["function"]["parameters"]["anyOf"];
    assert_eq!(choices[0]["properties"]["action"], json!({"const": "reply"}));
    assert_eq!(choices[1]["properties"]["action"], json!({"const": "book_hotel"}));
    assert_eq!(choices[1]["properties"]["arguments"], booking_tool().parameters);
    let second_decision = server.request(2).json();
    let fed_back = second_decision["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    assert_eq!(
        fed_back,
        "(Note from the system, not the user: the tool `book_hotel` was called with {\"hotel\":\"Ritz\"} \
         and returned {\"booking_id\":\"B-1\"}. Use this in your reply.)"
    );
    let reply = server.request(3).json();
    assert_eq!(reply["stream"], true);
    assert!(reply.get("tools").is_none());
}

#[test]
fn a_repeated_forced_call_is_read_as_reply() {
    let call = "{\"action\": \"book_hotel\", \"arguments\": {\"hotel\": \"Ritz\"}}";
    let server = TestServer::start(vec![
        tool_completion("next_action", call),
        tool_completion("next_action", call),
        text_stream(&["Booked."]),
    ]);
    let config = ProviderConfig { tool_choice: ToolChoiceMode::Forced, ..config(&server.url) };
    let mut provider = OpenAi::new(&config).unwrap();
    let mut tools = Tools::allowing(5);
    let (result, _) = collect(&mut provider, &respond_request(vec![booking_tool()]), &mut tools);
    let response = result.unwrap();
    assert_eq!(response.text, "Booked.");
    assert_eq!(response.usage.calls, 3, "two decisions and the reply");
    assert_eq!(tools.calls.len(), 1, "the tool runs once");
    assert!(server.request(2).json().get("tools").is_none());
}

/// One round of a reply, with the streamed pieces.
fn round(
    provider: &mut OpenAi,
    request: &ReplyRequest,
    rounds: &[ToolRound],
) -> (Result<ModelReply, ProviderError>, Vec<String>) {
    let mut pieces = Vec::new();
    let result = provider.reply(request, rounds, &mut |piece| pieces.push(piece.to_string()));
    (result, pieces)
}

#[test]
fn a_round_returns_the_calls_before_they_run_and_the_next_sends_their_results() {
    let server = TestServer::start(vec![tool_call_stream(), text_stream(&["Sold out, sorry."])]);
    let mut provider = provider(&server);
    let request = respond_request(vec![booking_tool()]);
    let (first, pieces) = round(&mut provider, &request, &[]);
    let Ok(ModelReply::ToolCalls(asked)) = first else { panic!("tool calls expected: {first:?}") };
    assert_eq!(
        asked.calls,
        vec![ToolCall { id: "call_1".into(), name: "book_hotel".into(), arguments: Ok(json!({"hotel": "Ritz"})) }]
    );
    assert_eq!((asked.text.as_str(), asked.usage.calls), ("", 1));
    assert!(pieces.is_empty());
    assert_eq!(server.requests().len(), 1, "nothing more is asked before the caller answers");

    let rounds = [ToolRound { asked, results: vec![Err("the hotel is full".into())] }];
    let (second, pieces) = round(&mut provider, &request, &rounds);
    let Ok(ModelReply::Done(response)) = second else { panic!("an answer expected: {second:?}") };
    assert_eq!(response.text, "Sold out, sorry.");
    assert_eq!(pieces, ["Sold out, sorry."]);
    assert_eq!(response.usage.calls, 1, "a round's usage is its own");
    let messages = server.request(1).json()["messages"].as_array().cloned().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "book_hotel", "arguments": "{\"hotel\": \"Ritz\"}"}}
        ]}),
        "the arguments go back as the model wrote them"
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"error\":\"the hotel is full\"}"})
    );
}

#[test]
fn a_round_the_caller_wrote_is_sent_as_tool_calls_and_a_spent_budget_offers_no_tools() {
    let server = TestServer::start(vec![text_stream(&["Booked."])]);
    let mut provider = provider(&server);
    let mut request = respond_request(vec![booking_tool()]);
    request.tools_spent = true;
    let call = ToolCall { id: "mine".into(), name: "book_hotel".into(), arguments: Ok(json!({"hotel": "Ritz"})) };
    let rounds = [ToolRound {
        asked: ToolCalls { calls: vec![call], ..ToolCalls::default() },
        results: vec![Ok(json!({"booking_id": "B-1"}))],
    }];
    let (answer, _) = round(&mut provider, &request, &rounds);
    assert!(matches!(answer, Ok(ModelReply::Done(_))), "{answer:?}");
    let body = server.request(0).json();
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "{body}");
    let messages = body["messages"].as_array().cloned().unwrap();
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "mine", "type": "function", "function": {"name": "book_hotel", "arguments": "{\"hotel\":\"Ritz\"}"}}
        ]})
    );
    assert_eq!(messages[4], json!({"role": "tool", "tool_call_id": "mine", "content": "{\"booking_id\":\"B-1\"}"}));
}

#[test]
fn a_forced_round_returns_its_call_and_the_next_sends_the_result_as_a_note() {
    let call = "{\"action\": \"book_hotel\", \"arguments\": {\"hotel\": \"Ritz\"}}";
    let server = TestServer::start(vec![
        tool_completion("next_action", call),
        tool_completion("next_action", "{\"action\": \"reply\"}"),
        text_stream(&["Booked."]),
    ]);
    let config = ProviderConfig { tool_choice: ToolChoiceMode::Forced, ..config(&server.url) };
    let mut provider = OpenAi::new(&config).unwrap();
    let request = respond_request(vec![booking_tool()]);
    let (first, _) = round(&mut provider, &request, &[]);
    let Ok(ModelReply::ToolCalls(asked)) = first else { panic!("tool calls expected: {first:?}") };
    assert_eq!(asked.calls.len(), 1);
    assert_eq!(
        (asked.calls[0].name.as_str(), &asked.calls[0].arguments),
        ("book_hotel", &Ok(json!({"hotel": "Ritz"})))
    );

    let rounds = [ToolRound { asked, results: vec![Ok(json!({"booking_id": "B-1"}))] }];
    let (second, _) = round(&mut provider, &request, &rounds);
    let Ok(ModelReply::Done(response)) = second else { panic!("an answer expected: {second:?}") };
    assert_eq!(response.text, "Booked.");
    assert_eq!(response.usage.calls, 2, "the decision and the reply");
    for index in [1, 2] {
        let messages = server.request(index).json()["messages"].as_array().cloned().unwrap();
        assert_eq!(
            messages.last().and_then(|message| message["content"].as_str()),
            Some(
                "(Note from the system, not the user: the tool `book_hotel` was called with {\"hotel\":\"Ritz\"} \
                 and returned {\"booking_id\":\"B-1\"}. Use this in your reply.)"
            )
        );
    }
}

#[test]
fn refused_stream_options_are_dropped() {
    let server = TestServer::start(vec![
        Reply::json(
            422,
            &json!({"detail": [{"loc": ["body", "stream_options"], "msg": "extra fields not permitted"}]}),
        ),
        text_stream(&["Hi."]),
        text_stream(&["Again."]),
    ]);
    let mut provider = provider(&server);
    assert_eq!(collect(&mut provider, &respond_request(vec![]), &mut NoTools).0.unwrap().text, "Hi.");
    assert_eq!(collect(&mut provider, &respond_request(vec![]), &mut NoTools).0.unwrap().text, "Again.");
    assert!(server.request(1).json().get("stream_options").is_none());
    assert!(server.request(2).json().get("stream_options").is_none());
}

#[test]
fn text_of_several_rounds_is_separated() {
    let first = Reply::sse(&[
        delta(json!({"content": "Let me check."}), None),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "book_hotel", "arguments": "{}"}}]}),
            None,
        ),
        delta(json!({}), Some("tool_calls")),
    ]);
    let server = TestServer::start(vec![first, text_stream(&["Booked."])]);
    let mut provider = provider(&server);
    let (result, pieces) = collect(&mut provider, &respond_request(vec![booking_tool()]), &mut Tools::allowing(5));
    assert_eq!(result.unwrap().text, "Let me check.\n\nBooked.");
    assert_eq!(pieces.concat(), "Let me check.\n\nBooked.");
}

#[test]
fn auth_failures_are_not_retried_and_hide_the_key() {
    let server = TestServer::start(vec![Reply::json(
        401,
        &json!({"error": {"message": format!("Incorrect API key provided: {KEY}."), "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.class(), "auth");
    assert_eq!(
        error.to_string(),
        "authentication failed: HTTP 401: Incorrect API key provided: [redacted]. (check the API key)"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn other_client_errors_are_not_retried() {
    let server = TestServer::start(vec![Reply::json(400, &error_body("max_tokens is too large: 999999"))]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.to_string(), "the request was refused: HTTP 400: max_tokens is too large: 999999");
    let server = TestServer::start(vec![Reply::json(404, &error_body("The model `gpt-nope` does not exist"))]);
    let error =
        reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the request was refused: HTTP 404: The model `gpt-nope` does not exist (check the model name and the base URL)"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn rate_limits_honour_retry_after() {
    let server = TestServer::start(vec![
        Reply::json(429, &error_body("Rate limit reached")).header("retry-after", "1"),
        completion(&good_answer(), "stop"),
    ]);
    let understanding = provider(&server).understand(&booking_request()).unwrap();
    assert_eq!(understanding.usage.calls, 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
}

#[test]
fn a_retry_after_beyond_the_limit_fails_at_once() {
    let server =
        TestServer::start(vec![Reply::json(429, &error_body("Rate limit reached")).header("retry-after", "120")]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "rate limited: HTTP 429: Rate limit reached (retry after 120.0 s) (wait, or lower the request rate)"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn server_errors_are_retried_then_reported() {
    let overloaded = || Reply::text(503, "upstream overloaded");
    let server = TestServer::start(vec![overloaded(), overloaded(), overloaded()]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.to_string(), "the provider is overloaded: HTTP 503: upstream overloaded (try again shortly)");
    assert_eq!(server.requests().len(), 3, "one attempt and two retries");

    let server = TestServer::start(vec![overloaded(), completion(&good_answer(), "stop")]);
    assert!(provider(&server).understand(&booking_request()).is_ok());
}

#[test]
fn unreachable_servers_are_network_errors() {
    let mut provider = OpenAi::new(&config(&closed_port_url())).unwrap();
    let error = provider.understand(&booking_request()).unwrap_err();
    assert_eq!(error.class(), "network");
    assert!(error.to_string().ends_with("(check the base URL and your connection)"));
}

#[test]
fn an_understand_answer_is_capped_unless_max_tokens_is_configured() {
    let server = TestServer::start(vec![completion(&good_answer(), "stop"), completion(&good_answer(), "stop")]);
    provider(&server).understand(&booking_request()).unwrap();
    let mut capped = OpenAi::new(&ProviderConfig { max_tokens: Some(300), ..config(&server.url) }).unwrap();
    capped.understand(&booking_request()).unwrap();
    let requests = server.requests();
    // 256 for the shape, 3 fields at 64 + 12 (a quote of the 36-byte
    // message), 3 questions (a condition, a signal, the route) at 48 + 12.
    assert_eq!(requests[0].json()["max_tokens"], 664);
    assert_eq!(requests[1].json()["max_tokens"], 300);
}

#[test]
fn a_stream_cut_short_is_a_network_error() {
    // The server dies after one chunk: no finish_reason, no [DONE].
    let server = TestServer::start(vec![Reply::sse(&[delta(json!({"content": "Half"}), None)]).cut_short()]);
    let mut provider = provider(&server);
    let (result, pieces) = collect(&mut provider, &respond_request(vec![]), &mut NoTools);
    assert_eq!(pieces, vec!["Half"]);
    assert_eq!(result.unwrap_err().class(), "network");
}

#[test]
fn a_body_cut_short_is_a_network_error() {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n";
    let server = TestServer::start(vec![Reply::Raw(format!("{head}{{\"choices\": [{{\"message\""))]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.class(), "network");
}

#[test]
fn errors_inside_a_stream_are_classified() {
    let server = TestServer::start(vec![Reply::sse(&[
        delta(json!({"content": "Hel"}), None),
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}),
    ])]);
    let error =
        reply_with_tools(&mut provider(&server), &respond_request(vec![]), &mut NoTools, &mut |_| {}).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the provider is overloaded: The server had an error while processing your request. (try again shortly)"
    );
}

#[test]
fn a_body_that_is_not_json_is_invalid_output() {
    let server = TestServer::start(vec![Reply::text(200, "<html>gateway</html>")]);
    let error = provider(&server).understand(&booking_request()).unwrap_err();
    assert_eq!(error.class(), "invalid_output");
    assert!(error.to_string().contains("<html>gateway</html>"));
}

#[test]
fn no_key_sends_no_authorization() {
    let server = TestServer::start(vec![completion(&good_answer(), "stop")]);
    let config = ProviderConfig { api_key: None, ..config(&server.url) };
    let mut provider = OpenAi::new(&config).unwrap();
    assert_eq!(provider.name(), "openai:gpt-test");
    provider.understand(&booking_request()).unwrap();
    assert_eq!(server.request(0).header("authorization"), None);
}

/// Opt-in, against a real OpenAI-compatible server: run by
/// `scripts/real-model-test.sh`, which sets `FLOWC_REAL_MODEL_URL`.
/// Prints the figures it measures; asserts only what any server and model
/// must give: answers that pass validation (after the fallback and at most
/// one repair), and clean failures.
#[test]
#[ignore = "needs a real server: FLOWC_REAL_MODEL=1 bash scripts/real-model-test.sh"]
fn real_server() {
    let Ok(url) = std::env::var("FLOWC_REAL_MODEL_URL") else {
        // Asked for by name (`--ignored`) without a server: a failure that
        // says why, never a pass that tested nothing.
        panic!(
            "real_server needs a real server: FLOWC_REAL_MODEL_URL is not set \
             (run it with FLOWC_REAL_MODEL=1 bash scripts/real-model-test.sh)"
        );
    };
    let model = std::env::var("FLOWC_MODEL").unwrap_or_else(|_| "smollm2".into());
    let base = ProviderConfig {
        provider: ProviderKind::OpenAi,
        model,
        base_url: url,
        api_key: None,
        temperature: Some(0.0),
        http: crate::llm::http::HttpSettings {
            timeout: Duration::from_secs(300),
            ..crate::llm::http::HttpSettings::default()
        },
        // The small model may write an evidence string on until its
        // context is full; a cut answer is repaired once or fails cleanly.
        max_tokens: Some(300),
        ..ProviderConfig::default()
    };
    let mut provider = OpenAi::new(&base).unwrap();

    let started = Instant::now();
    let understanding = provider.understand(&booking_request()).unwrap();
    println!(
        "understand: {:?} in {:?}; mode now {}; flow {:?}, fields {:?}, conditions {:?}, signals {:?}",
        understanding.usage,
        started.elapsed(),
        provider.structured_output().as_str(),
        understanding.flow,
        understanding.fields,
        understanding.conditions,
        understanding.signals
    );
    let mut asked_date = booking_request();
    asked_date.message = "2026-06-03".into();
    asked_date.flows.clear();
    asked_date.fields.retain(|field| field.name == "date");
    if let Some(field) = asked_date.fields.first_mut() {
        field.asked = true;
    }
    let started = Instant::now();
    match provider.understand(&asked_date) {
        Ok(understanding) => println!(
            "understand (one field): {:?} in {:?}, fields {:?}",
            understanding.usage,
            started.elapsed(),
            understanding.fields
        ),
        // A string written on past `max_tokens`, still cut after the
        // repair: a clean failure is an acceptable answer.
        Err(error @ ProviderError::InvalidOutput(_)) => {
            println!("understand (one field): failed cleanly in {:?}: {error}", started.elapsed());
        }
        Err(error) => panic!("understand (one field): {error}"),
    }

    let started = Instant::now();
    let mut pieces = 0;
    let response =
        reply_with_tools(&mut provider, &respond_request(vec![]), &mut NoTools, &mut |_| pieces += 1).unwrap();
    println!("respond: {:?} in {:?}, {pieces} pieces: {:?}", response.usage, started.elapsed(), response.text);

    let mut tools = Tools::allowing(1);
    let started = Instant::now();
    let response =
        reply_with_tools(&mut provider, &respond_request(vec![booking_tool()]), &mut tools, &mut |_| {}).unwrap();
    println!(
        "respond with a tool: {:?} in {:?}; tool choice now {:?}; calls {:?}; text {:?}",
        response.usage,
        started.elapsed(),
        provider.tool_choice(),
        tools.calls,
        response.text
    );

    // A server that ignores `auto` is not detectable from its answer: the
    // forced mode is chosen in the config.
    let mut forced = OpenAi::new(&ProviderConfig { tool_choice: ToolChoiceMode::Forced, ..base.clone() }).unwrap();
    let mut tools = Tools::allowing(1);
    let started = Instant::now();
    let response =
        reply_with_tools(&mut forced, &respond_request(vec![booking_tool()]), &mut tools, &mut |_| {}).unwrap();
    println!(
        "respond with a tool, forced choice: {:?} in {:?}; calls {:?}; text {:?}",
        response.usage,
        started.elapsed(),
        tools.calls,
        response.text
    );

    let mut tiny = OpenAi::new(&ProviderConfig { max_tokens: Some(8), ..base }).unwrap();
    match tiny.understand(&booking_request()) {
        Ok(understanding) => println!("max_tokens 8: repaired, {:?}", understanding.usage),
        Err(error) => {
            println!("max_tokens 8: failed cleanly: {error}");
            assert_eq!(error.class(), "invalid_output");
        }
    }
}

#[test]
fn a_recorded_run_replays_without_the_server() {
    let path = std::env::temp_dir().join(format!("flowc-openai-record-{}.json", std::process::id()));
    let server = TestServer::start(vec![
        completion(&good_answer(), "stop"),
        tool_call_stream(),
        text_stream(&["Booked: ", "B-1."]),
    ]);
    let config = ProviderConfig { record: Some(path.clone()), ..config(&server.url) };
    let mut recorder = crate::llm::build_provider(&config).unwrap();
    assert_eq!(recorder.name(), "openai:gpt-test");
    let understood = recorder.understand(&booking_request()).unwrap();
    let mut tools = Tools::allowing(5);
    let replied =
        reply_with_tools(recorder.as_mut(), &respond_request(vec![booking_tool()]), &mut tools, &mut |_| {}).unwrap();
    drop(server);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(KEY));
    let replay_config =
        ProviderConfig { provider: ProviderKind::Replay(path.clone()), api_key: None, ..ProviderConfig::default() };
    let mut replay = crate::llm::build_provider(&replay_config).unwrap();
    assert_eq!(replay.understand(&booking_request()).unwrap(), understood);
    let mut tools = Tools::allowing(5);
    let mut streamed = String::new();
    let again = reply_with_tools(replay.as_mut(), &respond_request(vec![booking_tool()]), &mut tools, &mut |piece| {
        streamed.push_str(piece)
    })
    .unwrap();
    assert_eq!(again, replied);
    assert_eq!(streamed, "Booked: B-1.");
    assert_eq!(tools.calls, vec![("book_hotel".to_string(), json!({"hotel": "Ritz"}))]);

    let mut other = respond_request(vec![]);
    other.message = "Something else".into();
    let error = reply_with_tools(replay.as_mut(), &other, &mut NoTools, &mut |_| {}).unwrap_err();
    assert_eq!(error.class(), "not_recorded");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_default_configuration_builds_the_offline_provider() {
    let provider = crate::llm::build_provider(&ProviderConfig::default()).ok().unwrap();
    assert_eq!(provider.name(), "offline");
}
