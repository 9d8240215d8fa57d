//! The provider's bounds in time, against the scripted server: its
//! timeout, the turn's deadline and cancelling. Each test waits for the
//! event it needs (the request received, the first piece streamed), never
//! for a moment a loaded machine could stretch.

use super::*;

/// An answer that comes long after anything in a test waits: only a
/// timeout or a deadline ends a call that asks for it.
fn never_answered() -> Reply {
    completion(&good_answer(), "stop").after(Duration::from_secs(3600))
}

/// Runs `call` with a bound (a timeout or a turn's deadline) of `first`,
/// doubled until the request reached the server before the bound ran out
/// (a loaded machine may take longer than `first` to send it): the test
/// waits for that event rather than trusting a clock. Gives the server
/// and the error of the call that was received.
fn with_the_request_received(
    first: Duration,
    reply: impl Fn() -> Reply,
    call: impl Fn(&TestServer, Duration) -> ProviderError,
) -> (TestServer, ProviderError) {
    let mut bound = first;
    loop {
        let server = TestServer::start(vec![reply()]);
        let error = call(&server, bound);
        if !server.requests().is_empty() {
            return (server, error);
        }
        assert_eq!(error.class(), "timeout", "a request not sent within {bound:?} is a timeout: {error}");
        assert!(bound < Duration::from_secs(20), "the request never reached the server: {error}");
        bound *= 2;
    }
}

#[test]
fn slow_answers_time_out() {
    let (server, error) = with_the_request_received(Duration::from_millis(150), never_answered, |server, timeout| {
        let mut config = config(&server.url);
        config.http.timeout = timeout;
        OpenAi::new(&config).unwrap().understand(&booking_request()).unwrap_err()
    });
    assert_eq!(error.class(), "timeout");
    assert!(error.to_string().contains("(raise the timeout in flowc.toml)"), "{error}");
    assert_eq!(server.requests().len(), 1, "a timed-out call is not repeated");
}

#[test]
fn the_turns_deadline_cuts_a_slow_call_short_of_the_configured_timeout() {
    let (server, error) = with_the_request_received(Duration::from_millis(150), never_answered, |server, left| {
        let request = UnderstandRequest { deadline: Some(Instant::now() + left), ..booking_request() };
        provider(server).understand(&request).unwrap_err()
    });
    assert_eq!(error.class(), "timeout");
    assert_eq!(
        error.to_string(),
        "the model did not answer in time: the turn's time ran out during the call (`turn_timeout` in the agent's limits)"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn no_retry_waits_past_the_turns_deadline() {
    // The server asks for 20 s, under `retry_max_wait` (30 s) and past
    // every deadline tried (at most about 10 s).
    let rate_limited = || Reply::json(429, &error_body("Rate limit reached")).header("retry-after", "20");
    let (server, error) = with_the_request_received(Duration::from_millis(300), rate_limited, |server, left| {
        let request = UnderstandRequest { deadline: Some(Instant::now() + left), ..booking_request() };
        provider(server).understand(&request).unwrap_err()
    });
    assert_eq!(error.class(), "rate_limited", "the server's own reason, not a wait cut short");
    assert_eq!(server.requests().len(), 1, "the wait would end past the deadline");
}

#[test]
fn a_call_made_after_the_turns_deadline_is_not_sent() {
    let server = TestServer::start(vec![text_stream(&["Too late."])]);
    let request = ReplyRequest { deadline: Some(Instant::now()), ..ReplyRequest::default() };
    let error = provider(&server).reply(&request, &[], &mut |_| {}).unwrap_err();
    assert!(error.to_string().contains("`turn_timeout`"), "{error}");
    assert!(server.requests().is_empty());
}

#[test]
fn cancelling_stops_a_stream() {
    let pieces: Vec<String> = (0..40).map(|index| format!("w{index} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let server = TestServer::start(vec![text_stream(&refs).paced(Duration::from_millis(25))]);
    let config = config(&server.url);
    let cancel = config.cancel.clone();
    let mut provider = OpenAi::new(&config).unwrap();
    // Cancelled as the first piece arrives: the event, not a guess at when
    // the stream will have started.
    let mut received = Vec::new();
    let result = reply_with_tools(&mut provider, &respond_request(vec![]), &mut NoTools, &mut |piece| {
        received.push(piece.to_string());
        cancel.cancel();
    });
    assert_eq!(result.unwrap_err(), ProviderError::Cancelled);
    assert!(!received.is_empty() && received.len() < 40, "{} pieces arrived", received.len());

    // While the flag is set nothing is sent; once reset, calls work again.
    let error = provider.understand(&booking_request()).unwrap_err();
    assert_eq!(error, ProviderError::Cancelled);
    assert_eq!(server.requests().len(), 1);
}
