//! The window's arithmetic, each server's wording of a refusal, and the
//! wrapper against a model that refuses long requests (in memory, and over
//! HTTP with the OpenAI-compatible provider).

use super::*;
use crate::llm::config::{ProviderConfig, ProviderKind, Secret};
use crate::llm::openai::OpenAi;
use crate::llm::schema::tests::booking_request;
use crate::llm::testserver::{Reply, TestServer, fast_http};
use crate::llm::{Response, Usage};
use crate::message::{Message, Role};
use serde_json::json;
use std::sync::{Arc, Mutex};

/// The history of a conversation whose replies ramble: `count` messages of
/// about 400 bytes each, oldest first.
fn rambling_history(count: usize) -> Vec<Message> {
    (0..count)
        .map(|index| Message {
            role: if index % 2 == 0 { Role::User } else { Role::Assistant },
            text: format!("message {index}: {}", "and then there is more to say about it ".repeat(10)),
        })
        .collect()
}

fn long_request(history: usize) -> UnderstandRequest {
    UnderstandRequest { history: rambling_history(history), ..booking_request() }
}

/// A window with room for the request without history and about three
/// of its messages.
fn room_for_three() -> usize {
    understand_bytes(&long_request(0)) + 1500
}

/// A model with a window of `window` bytes of prompt, one token per byte:
/// longer requests are refused with llama-cpp-python's words (or `refusal`).
struct SmallModel {
    window: usize,
    refusal: Option<String>,
    /// The history length of every request it received.
    seen: Arc<Mutex<Vec<usize>>>,
}

impl SmallModel {
    fn check(&self, bytes: usize, history: usize) -> Result<Usage, ProviderError> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(history);
        }
        if bytes > self.window {
            let message = self
                .refusal
                .clone()
                .unwrap_or_else(|| format!("Requested tokens ({bytes}) exceed context window of {}", self.window));
            return Err(ProviderError::refused(format!("HTTP 400: {message}")));
        }
        Ok(Usage { calls: 1, prompt: bytes as u64, completion: 10, cached: 0, estimated: false })
    }
}

impl Provider for SmallModel {
    fn name(&self) -> String {
        "small".into()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let usage = self.check(understand_bytes(request), request.history.len())?;
        Ok(Understanding { usage, ..Understanding::default() })
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let usage = self.check(reply_bytes(request, rounds), request.history.len())?;
        on_text("Fine.");
        Ok(ModelReply::Done(Response { text: "Fine.".into(), usage }))
    }
}

fn small_model(window: usize, refusal: Option<&str>, configured: Option<u32>) -> (Windowed, Arc<Mutex<Vec<usize>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = SmallModel { window, refusal: refusal.map(str::to_string), seen: seen.clone() };
    (Windowed::new(Box::new(model), ContextWindow::new(configured, Some(0))), seen)
}

fn seen(seen: &Arc<Mutex<Vec<usize>>>) -> Vec<usize> {
    seen.lock().unwrap().clone()
}

#[test]
fn each_servers_refusal_is_recognised_with_its_figures() {
    let cases: &[(&str, Option<u32>, Option<u64>)] = &[
        ("Requested tokens (2105) exceed context window of 2048", Some(2048), Some(2105)),
        (
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9010 tokens \
             (8900 in the messages, 110 in the functions). Please reduce the length of the messages or functions.",
            Some(8192),
            Some(9010),
        ),
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens \
             (4000 in the messages, 1000 in the completion).",
            Some(4096),
            Some(4000),
        ),
        (
            "input length and `max_tokens` exceed context limit: 150000 + 60000 > 200000, decrease input length \
             or `max_tokens` and try again",
            Some(200000),
            Some(150000),
        ),
        ("Requested tokens (131,072) exceed context window of 128,000", Some(128000), Some(131072)),
        (
            "'max_tokens' is too large: 4096. This model's maximum context length is 2048 tokens and your request \
             has 100 input tokens (4096 > 2048 - 100)",
            Some(2048),
            Some(100),
        ),
        ("prompt is too long: 212003 tokens > 200000 maximum", Some(200000), Some(212003)),
        (
            "request (3000 tokens) exceeds the available context size (2048 tokens), try increasing it",
            Some(2048),
            Some(3000),
        ),
        ("the request exceeds the available context size, try increasing it", None, None),
    ];
    for (message, window, requested) in cases {
        assert!(is_overflow(message), "{message}");
        assert_eq!(overflow_figures(message), (*window, *requested), "{message}");
    }
    for other in ["schema is not allowed here", "'tool_choice' must be 'none'", "Invalid API key", ""] {
        assert!(!is_overflow(other), "{other}");
    }
}

#[test]
fn a_figure_too_small_to_be_a_window_is_not_learned() {
    let mut window = ContextWindow::new(None, None);
    // Not a window at all: a stray comparison in a message.
    assert!(!window.learn("the prompt is long: context length is 12 more than allowed", 100));
    assert_eq!(window.window(), None);
    assert!(window.learn("Requested tokens (3000) exceed context window of 2048", 9000));
    assert_eq!(window.window(), Some(2048));
    assert!(!window.learn("Requested tokens (3000) exceed context window of 2048", 9000), "nothing new");
}

#[test]
fn a_rate_limit_or_a_rejected_key_is_not_an_overflow_whatever_it_says() {
    let classify = |status| crate::llm::http::classify_status(status, "too long for the context window", None).class();
    assert_eq!(classify(429), "rate_limited");
    assert_eq!(classify(401), "auth");
    assert_eq!(classify(413), "context_overflow");
    assert_eq!(classify(400), "context_overflow");
}

#[test]
fn a_completion_budget_that_fills_the_window_fails_at_once_with_what_to_change() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let refusal = "'max_tokens' is too large: 4096. This model's maximum context length is 2048 tokens and your \
                   request has 100 input tokens";
    let model = SmallModel { window: 0, refusal: Some(refusal.to_string()), seen: seen.clone() };
    let mut provider = Windowed::new(Box::new(model), ContextWindow::new(None, Some(4096)));
    let error = provider.understand(&long_request(12)).unwrap_err();
    assert_eq!(error.class(), "context_overflow");
    assert!(error.to_string().contains("`max_tokens = 4096` leaves no room in the 2048-token window"), "{error}");
    assert_eq!(seen.lock().unwrap().len(), 1, "no request is spent trimming what cannot help");
}

#[test]
fn a_refusal_for_length_is_its_own_class_and_is_not_retried_as_overload() {
    let overflow =
        crate::llm::http::classify_status(500, "Requested tokens (3000) exceed context window of 2048", None);
    assert_eq!(overflow.class(), "context_overflow");
    assert!(overflow.to_string().contains("context_window"), "{overflow}");
    assert_eq!(ProviderError::refused("bad schema".into()).class(), "invalid_request");
}

#[test]
fn an_unknown_window_sends_the_whole_history() {
    let window = ContextWindow::new(None, None);
    assert_eq!(window.oldest_to_leave_out(12, 0, None, |_| usize::MAX / 2), 0);
    assert_eq!(window.oldest_to_leave_out(12, 3, None, |_| usize::MAX / 2), 3);
    assert_eq!(window.oldest_to_leave_out(2, 3, None, |_| 0), 2);
}

#[test]
fn the_fewest_oldest_messages_are_left_out_and_room_is_kept_for_the_answer() {
    // 2,048 tokens less a quarter for the answer leaves 1,536 for the prompt.
    let mut window = ContextWindow::new(Some(2048), None);
    window.observe(1000, 1000);
    // Each history message is 500 bytes over a 500-byte prompt.
    let size = |left_out: usize| 500 + (6 - left_out) * 500;
    // 1,500 bytes, 1,650 estimated tokens with the margin: 1,000 is too much;
    // 1,000 bytes (1,100) fits.
    assert_eq!(window.oldest_to_leave_out(6, 0, None, size), 5);
    // A completion budget of its own replaces the quarter.
    let mut window = ContextWindow::new(Some(2048), Some(48));
    window.observe(1000, 1000);
    assert_eq!(window.oldest_to_leave_out(6, 0, None, size), 4);
    // A call's own cap stands in for the unset completion budget.
    let mut window = ContextWindow::new(Some(2048), None);
    window.observe(1000, 1000);
    assert_eq!(window.oldest_to_leave_out(6, 0, Some(48), size), 4);
    // Nothing fits: everything is left out, and the call says so.
    let window = ContextWindow::new(Some(300), None);
    assert_eq!(window.oldest_to_leave_out(6, 0, None, size), 6);
}

#[test]
fn calibration_keeps_the_highest_ratio_the_server_showed() {
    let mut window = ContextWindow::new(None, None);
    assert_eq!(window.estimate(1000), 385);
    assert_eq!(window.estimate(0), 0);
    window.observe(1000, 250);
    assert_eq!(window.estimate(1000), 275);
    window.observe(1000, 200);
    assert_eq!(window.estimate(1000), 275);
    window.observe(0, 10);
    window.observe(10, 0);
    assert_eq!(window.estimate(1000), 275);
}

#[test]
fn a_refusal_teaches_the_window_and_the_request_goes_again_trimmed() {
    let (mut provider, received) = small_model(room_for_three(), None, None);
    let request = long_request(12);
    let understanding = provider.understand(&request).unwrap();
    assert_eq!(understanding.usage.calls, 1);
    let first = seen(&received);
    assert_eq!(first.len(), 2, "one refusal, then one trimmed request: {first:?}");
    assert_eq!(first[0], 12);
    assert!(first[1] < 12 && first[1] > 0, "the newest messages stay: {first:?}");
    assert_eq!(provider.modes(), Some(format!("context_window = {}", room_for_three())));
    // The next request is trimmed before it is sent: no second refusal.
    provider.understand(&long_request(12)).unwrap();
    assert_eq!(seen(&received).len(), 3);
}

#[test]
fn the_reply_is_trimmed_the_same_way_and_the_message_always_goes() {
    let request = ReplyRequest {
        history: rambling_history(12),
        message: "what was the date again?".into(),
        instructions: vec!["Answer the user's question.".into()],
        ..ReplyRequest::default()
    };
    let short = ReplyRequest { history: vec![], ..request.clone() };
    let (mut provider, received) = small_model(reply_bytes(&short, &[]) + 1500, None, None);
    let mut streamed = String::new();
    let reply = provider.reply(&request, &[], &mut |text| streamed.push_str(text)).unwrap();
    assert!(matches!(reply, ModelReply::Done(_)));
    assert_eq!(streamed, "Fine.");
    let history = seen(&received);
    assert_eq!(history.first(), Some(&12));
    assert!(history.last().is_some_and(|kept| *kept < 12), "{history:?}");
}

#[test]
fn a_refusal_without_figures_halves_the_history_until_it_fits() {
    let (mut provider, received) =
        small_model(room_for_three(), Some("the request exceeds the available context size, try increasing it"), None);
    provider.understand(&long_request(12)).unwrap();
    let history = seen(&received);
    assert_eq!(history, [12, 6, 3]);
    assert!(history.windows(2).all(|pair| pair[1] < pair[0]), "{history:?}");
    assert_eq!(provider.modes(), None, "nothing was learned to put in flowc.toml");
}

#[test]
fn a_configured_window_trims_before_the_first_call() {
    let window = room_for_three();
    let (mut provider, received) = small_model(window, None, Some(window as u32));
    // Calibrate first, as a short conversation would: one token per byte.
    provider.understand(&long_request(0)).unwrap();
    provider.understand(&long_request(12)).unwrap();
    let history = seen(&received);
    assert_eq!(history.len(), 2, "{history:?}");
    assert!(history[1] > 0 && history[1] < 12, "{history:?}");
    assert_eq!(provider.modes(), None, "the configured window is what flowc.toml already says");
}

#[test]
fn a_prompt_too_long_without_any_history_fails_with_what_to_do() {
    let (mut provider, received) = small_model(300, None, None);
    let error = provider.understand(&long_request(4)).unwrap_err();
    assert_eq!(error.class(), "context_overflow");
    let text = error.to_string();
    assert!(text.contains("with no history left") && text.contains("of the 300-token window"), "{text}");
    assert!(text.contains("Requested tokens ("), "the server's own words are kept: {text}");
    assert!(text.contains("context_window"), "{text}");
    assert_eq!(seen(&received).last(), Some(&0));
}

#[test]
fn other_errors_pass_through_untouched() {
    struct Down;
    impl Provider for Down {
        fn name(&self) -> String {
            "down".into()
        }
        fn understand(&mut self, _: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Err(ProviderError::Network("connection refused".into()))
        }
        fn reply(
            &mut self,
            _: &ReplyRequest,
            _: &[ToolRound],
            _: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            Err(ProviderError::Timeout("60 s".into()))
        }
    }
    let mut provider = Windowed::new(Box::new(Down), ContextWindow::new(Some(2048), None));
    assert_eq!(provider.understand(&long_request(2)).unwrap_err().class(), "network");
    assert_eq!(provider.reply(&ReplyRequest::default(), &[], &mut |_| {}).unwrap_err().class(), "timeout");
}

/// The wire: an OpenAI-compatible server that refuses the first request
/// for length, as llama-cpp-python does; the same call succeeds trimmed,
/// and the mode is not changed by a refusal that names the functions.
#[test]
fn over_http_a_refusal_for_length_trims_instead_of_changing_the_mode() {
    let refusal = json!({"error": {
        "message": "This model's maximum context length is 2048 tokens. However, your messages resulted in 2600 \
                    tokens (2500 in the messages, 100 in the functions).",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
    let answer = json!({
        "flow": "booking",
        "fields": {"hotel": {"evidence": "Ritz Paris", "value": "Ritz Paris"}},
        "conditions": {"booking.confirm#2": {"evidence": null, "yes": false}},
        "signals": {"wants_human": {"evidence": null, "yes": false}},
    });
    let completion = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920},
    });
    let server = TestServer::start(vec![Reply::json(400, &refusal), Reply::json(200, &completion)]);
    let config = ProviderConfig {
        provider: ProviderKind::OpenAi,
        model: "small".into(),
        base_url: format!("{}/v1", server.url),
        api_key: Some(Secret::new("sk-test-key-0123456789")),
        http: fast_http(),
        ..ProviderConfig::default()
    };
    let openai = OpenAi::new(&config).unwrap();
    let mut provider = Windowed::new(Box::new(openai), ContextWindow::new(None, None));
    let understanding = provider.understand(&long_request(12)).unwrap();
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let lines = |index: usize| {
        let body = requests[index].json();
        let prompt = body["messages"][1]["content"].as_str().unwrap_or_default().to_string();
        prompt.lines().filter(|line| line.contains("and then there is more")).count()
    };
    assert_eq!(lines(0), 12);
    assert!(lines(1) < 12, "the second request is trimmed");
    assert!(requests[1].body.contains("Latest user message"), "the message always goes");
    assert_eq!(requests[0].json()["response_format"], requests[1].json()["response_format"]);
    assert_eq!(
        provider.modes().as_deref(),
        Some("structured_output = \"json_schema\", tool_choice = \"auto\", context_window = 2048")
    );
}
