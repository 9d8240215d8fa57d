//! HTTP plumbing shared by the OpenAI-compatible and Anthropic providers.
//!
//! The runtime is synchronous; each provider owns one `HttpClient`, which
//! owns a current-thread tokio runtime and `block_on`s reqwest on it. Every
//! blocking call races the work against the [`CancelFlag`] (set on Ctrl-C),
//! so a cancelled call drops its future, which closes the connection and
//! stops a stream cleanly.
//!
//! Faults are handled here once: connect and total timeouts (reqwest's,
//! per attempt), retries with exponential backoff and full jitter on 429,
//! 5xx and connection failures (honouring `Retry-After` and
//! `retry-after-ms`), no retry on other 4xx, and the classification of every
//! failure into a [`ProviderError`] whose message never holds an API key.
//!
//! Two invariants follow from owning a runtime: a provider must not be
//! called from inside another tokio runtime (`block_on` would panic), and
//! the providers run [`ToolLoop`] calls between requests, never inside
//! `block_on`, so a tool may itself block (reqwest's blocking client, a
//! child process).
//!
//! A caller may name the refusals it can recover from (a server that rejects
//! one structured-output mode, `stream_options` or `tool_choice: auto`):
//! those come back as `CallError::Rejected` at once, without retries.

use crate::llm::ProviderError;
#[cfg(doc)]
use crate::llm::ToolLoop;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set to stop the call in flight (Ctrl-C). The CLI clears it with
/// [`CancelFlag::reset`] before each turn; while it is set every call fails
/// with [`ProviderError::Cancelled`].
#[derive(Clone, Debug, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag no one has set yet.
    pub fn new() -> CancelFlag {
        CancelFlag::default()
    }

    /// Sets the flag: calls in flight stop and answer [`ProviderError::Cancelled`].
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Clears the flag, for the next turn.
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Resolves once the flag is set. Polling keeps this free of any
    /// signal-handling dependency; 20 ms is far below what a person notices.
    async fn cancelled(&self) {
        while !self.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Timeouts and retry policy of one provider.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpSettings {
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// Whole request, streamed body included, per attempt.
    pub timeout: Duration,
    /// Retries after the first attempt (so `max_retries + 1` requests at most).
    pub max_retries: u32,
    /// First backoff; doubled on each retry, with full jitter.
    pub retry_base: Duration,
    /// The longest wait between two attempts. A `Retry-After` above it is
    /// not waited for: the call fails at once with the server's figure.
    pub retry_max_wait: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            max_retries: 2,
            retry_base: Duration::from_millis(500),
            retry_max_wait: Duration::from_secs(30),
        }
    }
}

/// How a call failed, for callers that recover from some refusals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallError {
    /// The server refused the request in a way the caller said it can
    /// recover from (the caller's `rejects` predicate matched).
    Rejected {
        status: u16,
        message: String,
    },
    Failed(ProviderError),
}

impl From<ProviderError> for CallError {
    fn from(error: ProviderError) -> Self {
        CallError::Failed(error)
    }
}

impl CallError {
    /// The error to report when the caller does not recover.
    pub fn into_provider_error(self) -> ProviderError {
        match self {
            CallError::Rejected { status, message } => ProviderError::refused(format!("HTTP {status}: {message}")),
            CallError::Failed(error) => error,
        }
    }
}

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` name; empty when the stream sends none (OpenAI).
    pub event: String,
    pub data: String,
}

/// A blocking HTTP client for one provider.
pub(crate) struct HttpClient {
    /// Shared with the [`EventStream`]s it opens, which read on after the
    /// call that opened them returns.
    runtime: Arc<tokio::runtime::Runtime>,
    client: reqwest::Client,
    settings: HttpSettings,
    cancel: CancelFlag,
    /// Values that must never appear in an error message (the API key).
    secrets: Vec<String>,
    /// When the current turn's time runs out: no request, retry or wait
    /// goes past it.
    deadline: Option<Instant>,
}

impl HttpClient {
    pub fn new(settings: HttpSettings, cancel: CancelFlag, secrets: Vec<String>) -> Result<HttpClient, ProviderError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| ProviderError::Network(format!("cannot start the HTTP runtime: {error}")))?;
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.timeout)
            .user_agent(concat!("flowc/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ProviderError::Network(format!("cannot build the HTTP client: {error}")))?;
        let secrets = secrets.into_iter().filter(|secret| secret.len() >= 4).collect();
        Ok(HttpClient { runtime: Arc::new(runtime), client, settings, cancel, secrets, deadline: None })
    }

    /// Bounds the calls that follow by the turn's deadline (`None`: by the
    /// configured timeout only).
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// What one attempt may take: the configured timeout, or what is left
    /// of the turn when that is less. `None` once the turn's time is spent.
    fn attempt_timeout(&self) -> Option<Duration> {
        let Some(deadline) = self.deadline else {
            return Some(self.settings.timeout);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        (!left.is_zero()).then(|| left.min(self.settings.timeout))
    }

    /// Removes API keys from a text bound for an error, a trace or a file.
    pub fn redact(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }

    /// POSTs a JSON body and returns the JSON answer.
    pub fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        rejects: &dyn Fn(u16, &str) -> bool,
    ) -> Result<Value, CallError> {
        let work = async {
            let response = self.send(url, headers, body, rejects).await?;
            let bytes = response.bytes().await.map_err(|error| CallError::Failed(self.transport_error(&error)))?;
            serde_json::from_slice::<Value>(&bytes).map_err(|error| {
                CallError::Failed(ProviderError::InvalidOutput(format!(
                    "the server's answer is not JSON ({error}): {}",
                    self.redact(&excerpt(&String::from_utf8_lossy(&bytes)))
                )))
            })
        };
        self.block_on(work)
    }

    /// POSTs a JSON body and feeds each server-sent event of the answer to
    /// `on_event` as it arrives. `on_event` returns `Ok(true)` when the
    /// stream is complete (`[DONE]`, `message_stop`), which stops reading;
    /// the result says whether that happened before the body ended (the
    /// caller decides whether an unterminated stream is complete enough).
    pub fn post_stream(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        rejects: &dyn Fn(u16, &str) -> bool,
        on_event: &mut dyn FnMut(SseEvent) -> Result<bool, ProviderError>,
    ) -> Result<bool, CallError> {
        let work = async {
            let mut response = self.send(url, headers, body, rejects).await?;
            let mut parser = SseParser::default();
            loop {
                let chunk = response.chunk().await.map_err(|error| CallError::Failed(self.transport_error(&error)))?;
                let Some(chunk) = chunk else {
                    return Ok(false);
                };
                for event in parser.push(&chunk) {
                    if on_event(event)? {
                        return Ok(true);
                    }
                }
            }
        };
        self.block_on(work)
    }

    /// POSTs a JSON body and returns its server-sent events as a stream
    /// the caller reads at its own pace, after this call returns (see
    /// [`EventStream`]). Refusals and retries are as for [`Self::post_stream`].
    pub fn open_stream(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        rejects: &dyn Fn(u16, &str) -> bool,
    ) -> Result<EventStream, CallError> {
        let response = self.block_on(self.send(url, headers, body, rejects))?;
        let content_type = response.headers().get(reqwest::header::CONTENT_TYPE);
        let whole =
            !content_type.and_then(|value| value.to_str().ok()).is_some_and(|value| value.contains("event-stream"));
        Ok(EventStream {
            runtime: self.runtime.clone(),
            whole,
            response: Some(response),
            parser: SseParser::default(),
            ready: std::collections::VecDeque::new(),
            body: Vec::new(),
            cancel: self.cancel.clone(),
            secrets: self.secrets.clone(),
            deadline: self.deadline,
        })
    }

    /// Runs `work` to completion unless the cancel flag is set first.
    fn block_on<T>(&self, work: impl Future<Output = Result<T, CallError>>) -> Result<T, CallError> {
        if self.cancel.is_cancelled() {
            return Err(CallError::Failed(ProviderError::Cancelled));
        }
        let cancel = self.cancel.clone();
        self.runtime.block_on(async move {
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(CallError::Failed(ProviderError::Cancelled)),
                result = work => result,
            }
        })
    }

    /// Sends the request until it gets a success status, retrying what is
    /// worth retrying.
    async fn send(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        rejects: &dyn Fn(u16, &str) -> bool,
    ) -> Result<reqwest::Response, CallError> {
        let mut attempt: u32 = 0;
        loop {
            let Some(timeout) = self.attempt_timeout() else {
                return Err(CallError::Failed(turn_time_spent()));
            };
            let mut request = self.client.post(url).timeout(timeout).json(body);
            for (name, value) in headers {
                request = request.header(*name, value.as_str());
            }
            let (error, retry_after) = match request.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = retry_after(response.headers());
                    let text = response.text().await.unwrap_or_default();
                    let message = self.redact(&error_message(&text));
                    if rejects(status, &message) {
                        return Err(CallError::Rejected { status, message });
                    }
                    (classify_status(status, &message, retry_after), retry_after)
                }
                Err(error) => (self.transport_error(&error), None),
            };
            let retryable = matches!(
                error,
                ProviderError::RateLimited(_) | ProviderError::Overloaded(_) | ProviderError::Network(_)
            );
            if !retryable || attempt >= self.settings.max_retries {
                return Err(CallError::Failed(error));
            }
            let Some(wait) = retry_delay(&self.settings, attempt, retry_after, jitter()) else {
                return Err(CallError::Failed(error));
            };
            if self.deadline.is_some_and(|deadline| Instant::now() + wait >= deadline) {
                return Err(CallError::Failed(error));
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    fn transport_error(&self, error: &reqwest::Error) -> ProviderError {
        transport_error(error, &self.secrets, self.deadline)
    }
}

fn transport_error(error: &reqwest::Error, secrets: &[String], deadline: Option<Instant>) -> ProviderError {
    // reqwest's messages name the URL, never the headers, but a key may
    // sit in a base URL's query string: redact anyway.
    let message = redact(&error_chain(error), secrets);
    if !error.is_timeout() {
        return ProviderError::Network(message);
    }
    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
        return turn_time_spent();
    }
    ProviderError::Timeout(format!("{message} (raise the timeout in flowc.toml)"))
}

/// The server-sent events of one answer, read one at a time by a caller
/// that decides between reads whether it wants the rest: the understand
/// call hands its caller the extraction, then the reply as it streams.
///
/// The stream owns its response and shares its client's runtime, so it
/// outlives the call that opened it. Every read races the cancel flag;
/// the request's timeout (per attempt, body included) still bounds it.
/// Dropping the stream closes the connection, which stops the server's
/// generation: that is how a caller cancels an answer it will not use.
pub(crate) struct EventStream {
    runtime: Arc<tokio::runtime::Runtime>,
    /// The server answered with a plain body, not events (it does not
    /// stream this request): the body comes as one event, once whole.
    whole: bool,
    /// `None` once the body has ended.
    response: Option<reqwest::Response>,
    parser: SseParser,
    ready: std::collections::VecDeque<SseEvent>,
    /// A plain body, as it arrives.
    body: Vec<u8>,
    cancel: CancelFlag,
    secrets: Vec<String>,
    deadline: Option<Instant>,
}

impl EventStream {
    /// The next event; `None` when the body has ended.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            let Some(response) = self.response.as_mut() else {
                return Ok(None);
            };
            if self.cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            let cancel = self.cancel.clone();
            let chunk = self.runtime.block_on(async move {
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => None,
                    chunk = response.chunk() => Some(chunk),
                }
            });
            match chunk {
                None => return Err(ProviderError::Cancelled),
                Some(Err(error)) => return Err(transport_error(&error, &self.secrets, self.deadline)),
                Some(Ok(None)) => {
                    self.response = None;
                    if self.whole {
                        let data = String::from_utf8_lossy(&std::mem::take(&mut self.body)).into_owned();
                        return Ok(Some(SseEvent { event: String::new(), data }));
                    }
                }
                Some(Ok(Some(bytes))) if self.whole => self.body.extend_from_slice(&bytes),
                Some(Ok(Some(bytes))) => self.ready.extend(self.parser.push(&bytes)),
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // The connection is driven by a task on the client's runtime, which
        // runs only inside `block_on`: dropping the body alone would leave
        // the socket open, and the server generating, until the next call.
        // A few turns of the runtime let that task see the body gone and
        // close the connection now.
        if self.response.take().is_some() {
            self.runtime.block_on(async {
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
            });
        }
    }
}

/// A call cut off because the turn's `turn_timeout` ran out.
fn turn_time_spent() -> ProviderError {
    ProviderError::Timeout("the turn's time ran out during the call (`turn_timeout` in the agent's limits)".into())
}

/// The wait before retry number `attempt + 1`: the server's `Retry-After`
/// when it gave one (or the backoff, whichever is longer), else
/// `retry_base * 2^attempt` scaled by `jitter` in [0, 1) ("full jitter", so
/// clients that failed together do not retry together). `None` when the
/// server asks for longer than `retry_max_wait`.
pub(crate) fn retry_delay(
    settings: &HttpSettings,
    attempt: u32,
    retry_after: Option<Duration>,
    jitter: f64,
) -> Option<Duration> {
    let exponent = attempt.min(16);
    let backoff = settings.retry_base.saturating_mul(1u32 << exponent).min(settings.retry_max_wait);
    let jittered = backoff.mul_f64(jitter.clamp(0.0, 1.0));
    match retry_after {
        Some(wait) if wait > settings.retry_max_wait => None,
        Some(wait) => Some(wait.max(jittered)),
        None => Some(jittered),
    }
}

/// A number in [0, 1) that differs between calls and processes, from the
/// standard library's randomly seeded hasher (no `rand` dependency).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x9e37_79b9_7f4a_7c15);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `retry-after-ms` (OpenAI) or `Retry-After` in seconds. The HTTP-date
/// form is not honoured: no API in scope sends it.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok()) {
        return (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let seconds = header("retry-after")?.parse::<f64>().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// The class of a failed status, with the server's message.
pub(crate) fn classify_status(status: u16, message: &str, retry_after: Option<Duration>) -> ProviderError {
    let detail = if message.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {message}") };
    // Some servers answer 500 to a prompt that is too long: retrying the
    // same request cannot help, trimming can. An authentication failure or
    // a rate limit that mentions the context is still what its status says.
    if matches!(status, 400 | 413 | 422 | 500..=599) && crate::llm::context::is_overflow(message) {
        return ProviderError::ContextOverflow(detail);
    }
    match status {
        401 | 403 => ProviderError::Auth(detail),
        429 => match retry_after {
            Some(wait) => ProviderError::RateLimited(format!("{detail} (retry after {:.1} s)", wait.as_secs_f64())),
            None => ProviderError::RateLimited(detail),
        },
        408 => ProviderError::Timeout(format!("{detail} (raise the timeout in flowc.toml)")),
        404 => ProviderError::InvalidRequest(format!("{detail} (check the model name and the base URL)")),
        500..=599 => ProviderError::Overloaded(detail),
        _ => ProviderError::InvalidRequest(detail),
    }
}

/// The human part of an error body: OpenAI's and Anthropic's
/// `error.message`, FastAPI's `detail`, or the start of the raw text.
pub(crate) fn error_message(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return excerpt(body.trim());
    };
    let error = value.get("error").unwrap_or(&value);
    let message = match error {
        Value::String(text) => Some(text.clone()),
        Value::Object(map) => map.get("message").or_else(|| map.get("detail")).map(|message| match message {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }),
        _ => None,
    };
    excerpt(&message.unwrap_or_else(|| body.trim().to_string()))
}

/// At most 300 characters of `text`, on one line.
pub(crate) fn excerpt(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = one_line.chars();
    let head: String = chars.by_ref().take(300).collect();
    if chars.next().is_some() { format!("{head}…") } else { head }
}

fn error_chain(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub use super::redact::redact;

/// Splits a byte stream into server-sent events. Bytes are buffered until
/// an event is complete, so a UTF-8 character or a line split across two
/// chunks is never broken.
#[derive(Default)]
pub(crate) struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, separator)) = find_event_end(&self.buffer) {
            let block: Vec<u8> = self.buffer.drain(..end + separator).collect();
            let text = String::from_utf8_lossy(block.get(..end).unwrap_or_default());
            if let Some(event) = parse_event(&text) {
                events.push(event);
            }
        }
        events
    }
}

/// The end of the first complete event and the length of the blank line
/// that ends it (`\n\n`, `\r\n\r\n`, or mixed).
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    buffer.iter().enumerate().filter(|(_, byte)| **byte == b'\n').find_map(|(index, _)| {
        let rest = buffer.get(index + 1..)?;
        if rest.starts_with(b"\n") {
            Some((index, 2))
        } else if rest.starts_with(b"\r\n") {
            Some((index, 3))
        } else {
            None
        }
    })
}

fn parse_event(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent::default();
    let mut data_lines: Vec<&str> = Vec::new();
    for line in block.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event.event = value.to_string(),
            "data" => data_lines.push(value),
            _ => {}
        }
    }
    if data_lines.is_empty() {
        return None;
    }
    event.data = data_lines.join("\n");
    Some(event)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings() -> HttpSettings {
        HttpSettings {
            retry_base: Duration::from_millis(100),
            retry_max_wait: Duration::from_secs(2),
            ..HttpSettings::default()
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let settings = settings();
        assert_eq!(retry_delay(&settings, 0, None, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(retry_delay(&settings, 2, None, 0.5), Some(Duration::from_millis(200)));
        assert_eq!(retry_delay(&settings, 10, None, 0.5), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(&settings, 0, None, 0.0), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_wins_over_a_shorter_backoff() {
        let settings = settings();
        assert_eq!(retry_delay(&settings, 0, Some(Duration::from_secs(1)), 0.5), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(&settings, 0, Some(Duration::from_secs(5)), 0.5), None);
    }

    #[test]
    fn retry_after_headers_are_read() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)), "the finer header wins");
        let mut dated = HeaderMap::new();
        dated.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&dated), None);
        dated.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&dated), None);
    }

    #[test]
    fn jitter_is_in_range() {
        for _ in 0..100 {
            let value = jitter();
            assert!((0.0..1.0).contains(&value));
        }
    }

    #[test]
    fn statuses_are_classified() {
        assert_eq!(classify_status(401, "bad key", None).class(), "auth");
        assert_eq!(classify_status(403, "", None).class(), "auth");
        assert_eq!(classify_status(429, "slow down", None).class(), "rate_limited");
        assert_eq!(classify_status(529, "Overloaded", None).class(), "overloaded");
        assert_eq!(classify_status(503, "", None).class(), "overloaded");
        assert_eq!(classify_status(400, "bad", None).class(), "invalid_request");
        assert_eq!(classify_status(422, "bad", None).class(), "invalid_request");
        assert_eq!(classify_status(408, "", None).class(), "timeout");
    }

    #[test]
    fn error_messages_are_read_from_known_bodies() {
        let openai = r#"{"error":{"message":"Invalid schema","type":"invalid_request_error","param":null}}"#;
        assert_eq!(error_message(openai), "Invalid schema");
        let anthropic = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        let fastapi = r#"{"detail":[{"loc":["body","x"],"msg":"bad"}]}"#;
        assert_eq!(error_message(fastapi), r#"[{"loc":["body","x"],"msg":"bad"}]"#);
        assert_eq!(error_message("Internal Server Error\n"), "Internal Server Error");
        assert_eq!(error_message(&"x".repeat(400)).chars().count(), 301);
    }

    #[test]
    fn keys_are_redacted() {
        let secrets = vec!["my-secret-key-123".to_string()];
        let text = "Incorrect API key provided: sk-abc123*****wxyz; also my-secret-key-123 and Bearer abcdef123456";
        let clean = redact(text, &secrets);
        assert!(!clean.contains("sk-abc"));
        assert!(!clean.contains("my-secret"));
        assert!(!clean.contains("abcdef123456"));
        assert_eq!(clean.matches("[redacted]").count(), 3);
    }

    #[test]
    fn sse_events_survive_any_chunking() {
        let stream = "event: message_start\ndata: {\"a\":1}\n\n: comment\n\ndata: {\"b\":\"é\"}\r\n\r\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n";
        let whole = SseParser::default().push(stream.as_bytes());
        assert_eq!(whole.len(), 4);
        assert_eq!(whole[0], SseEvent { event: "message_start".into(), data: "{\"a\":1}".into() });
        assert_eq!(whole[1].data, "{\"b\":\"é\"}");
        assert_eq!(whole[2].data, "line1\nline2");
        assert_eq!(whole[3].data, "[DONE]");
        let mut parser = SseParser::default();
        let mut bytewise = Vec::new();
        for byte in stream.as_bytes() {
            bytewise.extend(parser.push(std::slice::from_ref(byte)));
        }
        assert_eq!(bytewise, whole);
    }

    #[test]
    fn cancel_flag_round_trips() {
        let flag = CancelFlag::new();
        let shared = flag.clone();
        shared.cancel();
        assert!(flag.is_cancelled());
        flag.reset();
        assert!(!shared.is_cancelled());
    }
}
