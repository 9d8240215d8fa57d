//! HTTP tools: one request with a blocking reqwest client (rustls, so no
//! system OpenSSL), whose url, headers and body are templates over the
//! tool's params (the local in slot `i` is param `i`); `env.NAME` reads the
//! process environment (the type checker allows it in headers only).
//!
//! Choices the language leaves open:
//!
//! - Values interpolated into the url are percent-encoded as a URL
//!   component (RFC 3986 unreserved characters kept), so a model-extracted
//!   `a+b@x.com` or `../admin` cannot change the url's shape; the url's
//!   literal text is sent as written. A value that would make a whole path
//!   segment `.` or `..` is refused: URLs treat those segments (and their
//!   percent-encoded spellings `%2E`, `%2E%2E`) as moves up the path, so no
//!   encoding can send them as data.
//! - A body string that is exactly one `{{ expr }}` keeps the value's JSON
//!   type (`guests: "{{guests}}"` sends the number 2, not `"2"`); a string
//!   with other text renders to a string.
//! - Without `body`, POST, PUT and PATCH send the arguments as a JSON
//!   object; GET and DELETE send no body (their arguments go in the url).
//! - A 2xx response with an empty body is `{}`; any other body must be a
//!   JSON object. Non-2xx is a tool error with the status and the start of
//!   the body. Redirects are followed (up to 10) and proxies come from the
//!   usual environment variables, as reqwest does by default; but a tool
//!   that declares headers follows a redirect only within its origin
//!   (scheme, host and port), since those headers may carry secrets from
//!   `env` that another origin must not see. A redirect elsewhere is a tool
//!   error naming the target.
//! - When the operator stops flowc ([`crate::runtime::shutdown`]), a
//!   request in flight may finish within the grace period; after it, the
//!   step stops waiting and is interrupted (the request itself is
//!   abandoned: the server may still act on it, at least once).

use super::{ToolEnv, ToolError, excerpt};
use crate::expr::eval::{self, Bindings};
use crate::expr::{ExprKind, Template, TemplatePart};
use crate::ir::{Body, ContextId, FieldId, HttpMethod, Tool};
use crate::runtime::shutdown;
use reqwest::blocking::Client;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use std::io::Read;
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

/// A larger response is an error, not an allocation.
const MAX_RESPONSE: u64 = 16 * 1024 * 1024;

/// An http implementation, borrowed from the IR.
pub(super) struct Request<'a> {
    pub method: HttpMethod,
    pub url: &'a Template,
    pub headers: &'a [(String, Template)],
    pub body: Option<&'a Body>,
    pub timeout_ms: u64,
}

pub(super) fn call(
    tool: &Tool,
    request: &Request<'_>,
    args: &Map<String, Value>,
    env: &ToolEnv,
) -> Result<Value, ToolError> {
    let bindings = ToolBindings { tool, args, env };
    // Anomalies while rendering (a division by zero) already render as
    // empty text; a tool call has no trace to put the warning in.
    let mut warnings = Vec::new();
    let url = render_url(request.url, &bindings, &mut warnings).map_err(|message| ToolError::failed(tool, message))?;
    // Messages end up on terminals and in stored traces: never with the
    // url's password.
    let shown = redact_url(&url);
    let password = password_of(&url);
    let scrub = |text: String| match &password {
        Some(password) if !password.is_empty() => text.replace(password.as_str(), "***"),
        _ => text,
    };
    let parsed = reqwest::Url::parse(&url).map_err(|error| {
        ToolError::failed(tool, format!("the url `{}` is not valid: {error}", excerpt(&shown, 200)))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ToolError::failed(tool, format!("the url `{}` is not http or https", excerpt(&shown, 200))));
    }
    let headers = headers(tool, request.headers, &bindings, &mut warnings)?;
    let body = match request.body {
        Some(body) => Some(render_body(body, &bindings, &mut warnings)),
        None if matches!(request.method, HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch) => {
            Some(Value::Object(args.clone()))
        }
        None => None,
    };

    let client = client(!request.headers.is_empty()).map_err(|message| ToolError::failed(tool, message))?;
    let method = match request.method {
        HttpMethod::Get => reqwest::Method::GET,
        HttpMethod::Post => reqwest::Method::POST,
        HttpMethod::Put => reqwest::Method::PUT,
        HttpMethod::Patch => reqwest::Method::PATCH,
        HttpMethod::Delete => reqwest::Method::DELETE,
    };
    let mut builder =
        client.request(method, parsed).timeout(Duration::from_millis(request.timeout_ms)).headers(headers);
    if let Some(body) = &body {
        builder = builder.body(serde_json::to_vec(body).unwrap_or_default());
    }
    let exchanged = match exchange(builder) {
        Some(exchanged) => exchanged,
        None => {
            shutdown::note_interrupted();
            return Err(ToolError::failed(
                tool,
                "interrupted: flowc was stopped and the grace period ended before the server answered",
            ));
        }
    };
    let (status, bytes) = exchanged.map_err(|failure| match failure {
        Failure::Send(error) if error.is_timeout() => ToolError::timeout(tool, request.timeout_ms),
        Failure::Send(error) if error.is_redirect() => {
            ToolError::failed(tool, scrub(format!("`{}` redirected: {}", excerpt(&shown, 200), cause(&error))))
        }
        Failure::Send(error) => {
            ToolError::failed(tool, scrub(format!("cannot reach `{}`: {}", excerpt(&shown, 200), cause(&error))))
        }
        Failure::Read(error) if is_timeout(&error) => ToolError::timeout(tool, request.timeout_ms),
        Failure::Read(error) => ToolError::failed(tool, format!("reading the response failed: {}", cause(&error))),
        Failure::Lost => ToolError::failed(tool, "the request's thread ended without an answer"),
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        let body_excerpt = match text.trim() {
            "" => String::new(),
            body => format!(": {}", excerpt(body, 300)),
        };
        return Err(ToolError::failed(tool, format!("HTTP {status}{body_excerpt}")));
    }
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_RESPONSE {
        return Err(ToolError::invalid(
            tool,
            format!("the response is larger than {} MiB", MAX_RESPONSE / (1024 * 1024)),
        ));
    }
    parse_response(tool, text.trim())
}

/// Why a request got no response to read.
enum Failure {
    Send(reqwest::Error),
    Read(std::io::Error),
    Lost,
}

/// The longest the caller waits without looking whether flowc is stopping.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// Sends the request and reads its response (status and at most
/// [`MAX_RESPONSE`] + 1 bytes) on a thread of its own, so that the step
/// waits for it only until the end of a stop's grace period: then `None`
/// (the request is abandoned; its own timeout ends it).
fn exchange(builder: reqwest::blocking::RequestBuilder) -> Option<Result<(reqwest::StatusCode, Vec<u8>), Failure>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let result = builder.send().map_err(Failure::Send).and_then(|response| {
            let status = response.status();
            let mut bytes = Vec::new();
            response.take(MAX_RESPONSE + 1).read_to_end(&mut bytes).map(|_| (status, bytes)).map_err(Failure::Read)
        });
        // The caller may have stopped waiting: nobody to tell then.
        let _ = sender.send(result);
    });
    loop {
        let pause = match shutdown::deadline() {
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => return receiver.try_recv().ok(),
            },
            None => STOP_CHECK,
        };
        match receiver.recv_timeout(pause) {
            Ok(result) => return Some(result),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Some(Err(Failure::Lost)),
        }
    }
}

fn parse_response(tool: &Tool, text: &str) -> Result<Value, ToolError> {
    if text.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(ToolError::invalid(
            tool,
            format!("the response, {}, is not a JSON object", super::describe_json(&other)),
        )),
        Err(error) => Err(ToolError::invalid(
            tool,
            format!("the response is not JSON ({error}); it starts with `{}`", excerpt(text, 80)),
        )),
    }
}

/// Redirects followed before a request fails, as reqwest's default.
const MAX_REDIRECTS: usize = 10;

/// One client per process and redirect policy: building one loads the TLS
/// roots, and its connection pool is worth keeping between calls. With
/// `same_origin`, redirects to another origin are refused (reqwest itself
/// drops only `Authorization` and cookies on such a redirect, not custom
/// headers such as `X-Api-Key`).
fn client(same_origin: bool) -> Result<&'static Client, String> {
    static ANY_ORIGIN: OnceLock<Result<Client, String>> = OnceLock::new();
    static SAME_ORIGIN: OnceLock<Result<Client, String>> = OnceLock::new();
    let (cell, policy): (_, fn() -> reqwest::redirect::Policy) = if same_origin {
        (&SAME_ORIGIN, || reqwest::redirect::Policy::custom(same_origin_redirect))
    } else {
        (&ANY_ORIGIN, || reqwest::redirect::Policy::limited(MAX_REDIRECTS))
    };
    cell.get_or_init(|| {
        Client::builder()
            .user_agent(concat!("flowc/", env!("CARGO_PKG_VERSION")))
            .redirect(policy())
            .build()
            .map_err(|error| format!("cannot start the HTTP client: {}", cause(&error)))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Follows a redirect only to the origin of the first request.
fn same_origin_redirect(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
    }
    let first_origin = attempt.previous().first().map(reqwest::Url::origin);
    if first_origin.is_some_and(|origin| origin == attempt.url().origin()) {
        return attempt.follow();
    }
    let target = excerpt(&redact_url(attempt.url().as_str()), 200);
    attempt.error(format!(
        "flowc does not follow a redirect to another origin (`{target}`) from a tool that sends its own \
         headers, which may hold secrets; call that url directly"
    ))
}

fn headers(
    tool: &Tool,
    declared: &[(String, Template)],
    bindings: &ToolBindings<'_>,
    warnings: &mut Vec<String>,
) -> Result<HeaderMap, ToolError> {
    let mut map = HeaderMap::new();
    map.insert(ACCEPT, HeaderValue::from_static("application/json"));
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, template) in declared {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ToolError::failed(tool, format!("`{}` is not a valid header name", excerpt(name, 60))))?;
        let rendered = eval::render(template, bindings, warnings);
        // The value may hold a secret from `env`: never echo it.
        let mut value = HeaderValue::from_str(&rendered).map_err(|_| {
            ToolError::failed(
                tool,
                format!("the value of header `{name}` is not valid (a line break or control character?)"),
            )
        })?;
        if name.eq_ignore_ascii_case("authorization") {
            value.set_sensitive(true);
        }
        map.insert(header_name, value);
    }
    Ok(map)
}

/// The url with its values encoded, or why a value cannot be sent.
fn render_url(template: &Template, bindings: &ToolBindings<'_>, warnings: &mut Vec<String>) -> Result<String, String> {
    let mut url = String::new();
    // Where each value went, to tell a dot segment made by a value from
    // one the program wrote.
    let mut values = Vec::new();
    for part in &template.parts {
        match part {
            TemplatePart::Text(text) => url.push_str(text),
            TemplatePart::Expr(expr) => {
                let text = eval::to_text(&eval::eval(expr, bindings, warnings));
                let start = url.len();
                url.push_str(&percent_encode(&text));
                values.push(start..url.len());
            }
        }
    }
    if let Some(segment) = dot_segment_from_value(&url, &values) {
        return Err(format!(
            "a value would make the url path segment `{segment}`, which moves up the path instead of naming \
             something; flowc does not send it"
        ));
    }
    Ok(url)
}

/// A path segment of `url` that is `.` or `..` (as URLs read them, in any
/// spelling) and holds text of a value.
fn dot_segment_from_value<'u>(url: &'u str, values: &[std::ops::Range<usize>]) -> Option<&'u str> {
    let path_start = match url.find("://") {
        Some(scheme_end) => {
            let authority = scheme_end + 3;
            authority + url.get(authority..)?.find('/')?
        }
        None => 0,
    };
    let path_end = url.get(path_start..)?.find(['?', '#']).map_or(url.len(), |at| path_start + at);
    let mut segment_start = path_start;
    for segment in url.get(path_start..path_end)?.split('/') {
        let range = segment_start..segment_start + segment.len();
        segment_start = range.end + 1;
        let lower = segment.to_ascii_lowercase();
        let is_dot = matches!(lower.as_str(), "." | ".." | "%2e" | "%2e%2e" | ".%2e" | "%2e.");
        if is_dot && values.iter().any(|value| value.start < range.end && range.start < value.end) {
            return Some(segment);
        }
    }
    None
}

/// RFC 3986 component encoding: everything but unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

fn render_body(body: &Body, bindings: &ToolBindings<'_>, warnings: &mut Vec<String>) -> Value {
    match body {
        Body::Null => Value::Null,
        Body::Bool(flag) => Value::Bool(*flag),
        Body::Number(number) => Value::Number(number.clone()),
        Body::String(template) => match template.parts.as_slice() {
            [TemplatePart::Expr(expr)] if !matches!(expr.kind, ExprKind::Error) => eval::eval(expr, bindings, warnings),
            _ => Value::String(eval::render(template, bindings, warnings)),
        },
        Body::List(items) => Value::Array(items.iter().map(|item| render_body(item, bindings, warnings)).collect()),
        Body::Object(members) => Value::Object(
            members.iter().map(|(name, member)| (name.clone(), render_body(member, bindings, warnings))).collect(),
        ),
    }
}

/// The innermost explanation of an error ("Connection refused"), which is
/// what a person needs; reqwest's outer message only repeats the url.
/// `url` with the password of its credentials (`user:password@`) shown as
/// `***`.
pub(crate) fn redact_url(url: &str) -> String {
    match credentials(url) {
        Some((start, end)) if url.get(start..end).is_some_and(|user| user.contains(':')) => {
            let user_end = url.get(start..end).and_then(|user| user.find(':')).map_or(end, |at| start + at);
            format!("{}:***{}", url.get(..user_end).unwrap_or_default(), url.get(end..).unwrap_or_default())
        }
        _ => url.to_string(),
    }
}

/// The password of `url`'s credentials, as written in it.
fn password_of(url: &str) -> Option<String> {
    let (start, end) = credentials(url)?;
    let user = url.get(start..end)?;
    user.split_once(':').map(|(_, password)| password.to_string())
}

/// Where the credentials of `url` are (between `://` and the `@` before
/// the path), as byte offsets.
fn credentials(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let rest = url.get(start..)?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest.get(..authority_end)?.rfind('@')?;
    Some((start, start + at))
}

fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

fn is_timeout(error: &std::io::Error) -> bool {
    if error.kind() == std::io::ErrorKind::TimedOut {
        return true;
    }
    let mut source = error.get_ref().map(|inner| inner as &(dyn std::error::Error + 'static));
    while let Some(current) = source {
        if current.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_timeout) {
            return true;
        }
        source = current.source();
    }
    false
}

/// What a tool's templates see: its params by slot, and the environment.
struct ToolBindings<'a> {
    tool: &'a Tool,
    args: &'a Map<String, Value>,
    env: &'a ToolEnv,
}

impl Bindings for ToolBindings<'_> {
    fn field(&self, _field: FieldId) -> Value {
        // Tool templates see only their params (the type checker hides fields).
        Value::Null
    }

    fn context(&self, _key: ContextId) -> Value {
        Value::Null
    }

    fn local(&self, slot: u32) -> Value {
        usize::try_from(slot)
            .ok()
            .and_then(|index| self.tool.params.get(index))
            .and_then(|param| self.args.get(&param.name))
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.env.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{args, env, tool};
    use super::super::{ToolError, ToolRegistry};
    use super::percent_encode;
    use crate::expr::typeck::{Checker, Scope, Symbols};
    use crate::expr::{Template, Type};
    use crate::ir::{Body, HttpMethod, ToolImpl, TypeKind};
    use crate::syntax::expr::{SpanMap, parse_template};
    use serde_json::{Value, json};
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::thread;
    use std::time::{Duration, Instant};

    /// What the test server saw of one request.
    #[derive(Debug, Default)]
    struct Received {
        request_line: String,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Received {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
        }
    }

    /// A one-request HTTP server on 127.0.0.1: answers with `status` and
    /// `body` after `delay`, and reports what it received.
    fn serve(status: &'static str, body: &'static str, delay: Duration) -> (String, mpsc::Receiver<Received>) {
        let listener = TcpListener::bind("127.0.0.1:0");
        let Ok(listener) = listener else {
            panic!("cannot bind 127.0.0.1");
        };
        let address = listener.local_addr().map(|address| address.to_string()).unwrap_or_default();
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(&stream);
            let mut received = Received::default();
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            received.request_line = line.trim_end().to_string();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.trim_end().split_once(':') {
                    received.headers.push((name.trim().to_string(), value.trim().to_string()));
                }
            }
            let length = received.header("content-length").and_then(|value| value.parse::<usize>().ok()).unwrap_or(0);
            let mut request_body = vec![0u8; length];
            let _ = reader.read_exact(&mut request_body);
            received.body = String::from_utf8_lossy(&request_body).to_string();
            let _ = sender.send(received);
            thread::sleep(delay);
            let mut writer = &stream;
            let _ = write!(
                writer,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = writer.flush();
        });
        (format!("http://{address}"), receiver)
    }

    /// A template over the params `id: string, guests: int`.
    fn template(text: &str, env_allowed: bool) -> Template {
        let symbols = Symbols::default();
        let mut diagnostics = Vec::new();
        let ast = parse_template(text, SpanMap::Exact { base: 0 }, &mut diagnostics);
        let locals = [("id".to_string(), Type::String), ("guests".to_string(), Type::Int)];
        let mut type_errors = Vec::new();
        let typed = Checker {
            scope: Scope { symbols: &symbols, fields_visible: false, locals: &locals, env_allowed, steps: None },
            errors: &mut type_errors,
        }
        .template(&ast);
        assert!(diagnostics.is_empty() && type_errors.is_empty(), "{text}");
        typed
    }

    fn http_tool(
        method: HttpMethod,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Body>,
        timeout_ms: u64,
    ) -> crate::ir::Tool {
        tool(
            "remote",
            &[("id", TypeKind::String), ("guests", TypeKind::Int)],
            Some(&[("booking_id", TypeKind::String)]),
            Some(ToolImpl::Http {
                method,
                url: template(url, false),
                headers: headers.iter().map(|(name, value)| (name.to_string(), template(value, true))).collect(),
                body,
                timeout_ms,
            }),
        )
    }

    fn call(tool: &crate::ir::Tool) -> Result<Value, ToolError> {
        ToolRegistry::default().call(tool, &args(json!({"id": "a b/c", "guests": 2})), &env(PathBuf::from(".")))
    }

    fn received(receiver: &mpsc::Receiver<Received>) -> Received {
        receiver.recv_timeout(Duration::from_secs(5)).unwrap_or_default()
    }

    #[test]
    fn templated_url_headers_and_body_reach_the_server() {
        // PATH is always set; reading it keeps the test from mutating the
        // environment other threads read.
        let path = std::env::var("PATH").unwrap_or_default();
        let (base, receiver) = serve("201 Created", r#"{"booking_id": "GH-7", "note": "kept"}"#, Duration::ZERO);
        let body = Body::Object(vec![
            ("guests".to_string(), Body::String(template("{{guests}}", false))),
            ("label".to_string(), Body::String(template("{{guests}} guests for {{id}}", false))),
            ("fixed".to_string(), Body::List(vec![Body::Bool(true), Body::Null, Body::Number(3.into())])),
        ]);
        let tool = http_tool(
            HttpMethod::Post,
            &format!("{base}/bookings/{{{{id}}}}?n={{{{guests}}}}"),
            &[
                ("Authorization", "Bearer {{ env.PATH }}"),
                ("X-Missing", "[{{ env.FLOWC_SURELY_UNSET_VARIABLE }}]"),
                ("X-Guests", "{{guests}}"),
            ],
            Some(body),
            5_000,
        );
        assert_eq!(call(&tool), Ok(json!({"booking_id": "GH-7", "note": "kept"})));
        let seen = received(&receiver);
        assert_eq!(seen.request_line, "POST /bookings/a%20b%2Fc?n=2 HTTP/1.1");
        assert_eq!(seen.header("authorization"), Some(format!("Bearer {path}").as_str()));
        assert_eq!(seen.header("x-missing"), Some("[]"));
        assert_eq!(seen.header("x-guests"), Some("2"));
        assert_eq!(seen.header("content-type"), Some("application/json"));
        let sent: Value = serde_json::from_str(&seen.body).unwrap_or_default();
        assert_eq!(sent, json!({"guests": 2, "label": "2 guests for a b/c", "fixed": [true, null, 3]}));
    }

    #[test]
    fn the_default_body_is_the_arguments() {
        let (base, receiver) = serve("200 OK", r#"{"booking_id": "GH-1"}"#, Duration::ZERO);
        let tool = http_tool(HttpMethod::Put, &format!("{base}/x"), &[], None, 5_000);
        assert!(call(&tool).is_ok());
        let seen = received(&receiver);
        let sent: Value = serde_json::from_str(&seen.body).unwrap_or_default();
        assert_eq!(sent, json!({"id": "a b/c", "guests": 2}));
    }

    #[test]
    fn get_sends_no_body() {
        let (base, receiver) = serve("200 OK", r#"{"booking_id": "GH-1"}"#, Duration::ZERO);
        let tool = http_tool(HttpMethod::Get, &format!("{base}/x/{{{{id}}}}"), &[], None, 5_000);
        assert!(call(&tool).is_ok());
        let seen = received(&receiver);
        assert_eq!(seen.request_line, "GET /x/a%20b%2Fc HTTP/1.1");
        assert_eq!(seen.body, "");
    }

    #[test]
    fn a_server_error_is_a_tool_error_with_status_and_body() {
        let (base, _receiver) = serve("500 Internal Server Error", r#"{"error": "database down"}"#, Duration::ZERO);
        let tool = http_tool(HttpMethod::Post, &format!("{base}/x"), &[], None, 5_000);
        assert_eq!(
            call(&tool),
            Err(ToolError::Failed {
                tool: "remote".to_string(),
                message: r#"HTTP 500 Internal Server Error: {"error": "database down"}"#.to_string()
            })
        );
    }

    #[test]
    fn invalid_json_is_an_invalid_result() {
        let (base, _receiver) = serve("200 OK", "<html>oops</html>", Duration::ZERO);
        let tool = http_tool(HttpMethod::Post, &format!("{base}/x"), &[], None, 5_000);
        let result = call(&tool);
        let Err(ToolError::InvalidResult { message, .. }) = &result else {
            panic!("{result:?}");
        };
        assert!(message.starts_with("the response is not JSON ("), "{message}");
        assert!(message.ends_with("it starts with `<html>oops</html>`"), "{message}");
    }

    #[test]
    fn a_response_missing_a_declared_field_is_an_invalid_result() {
        let (base, _receiver) = serve("200 OK", r#"{"id": 1}"#, Duration::ZERO);
        let tool = http_tool(HttpMethod::Post, &format!("{base}/x"), &[], None, 5_000);
        assert_eq!(
            call(&tool),
            Err(ToolError::InvalidResult {
                tool: "remote".to_string(),
                message: "the declared field `booking_id` is missing (it has id)".to_string()
            })
        );
    }

    #[test]
    fn a_slow_server_times_out() {
        let (base, _receiver) = serve("200 OK", r#"{"booking_id": "late"}"#, Duration::from_secs(3));
        let tool = http_tool(HttpMethod::Post, &format!("{base}/x"), &[], None, 200);
        let started = Instant::now();
        assert_eq!(call(&tool), Err(ToolError::Timeout { tool: "remote".to_string(), ms: 200 }));
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn an_unreachable_server_is_a_tool_error() {
        // Bind then drop: the port is (almost certainly) closed now.
        let address = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.to_string())
            .unwrap_or_default();
        let tool = http_tool(HttpMethod::Post, &format!("http://{address}/x"), &[], None, 2_000);
        let result = call(&tool);
        let Err(ToolError::Failed { message, .. }) = &result else {
            panic!("{result:?}");
        };
        assert!(message.starts_with(&format!("cannot reach `http://{address}/x`: ")), "{message}");
    }

    #[test]
    fn a_password_in_the_url_never_appears_in_a_message() {
        let address = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.to_string())
            .unwrap_or_default();
        let url = format!("http://user:SECRETpw@{address}/api/x");
        let tool = http_tool(HttpMethod::Get, &url, &[], None, 2_000);
        let result = call(&tool);
        let Err(ToolError::Failed { message, .. }) = &result else {
            panic!("{result:?}");
        };
        assert!(!message.contains("SECRETpw"), "{message}");
        assert!(message.starts_with(&format!("cannot reach `http://user:***@{address}/api/x`: ")), "{message}");
        assert_eq!(super::redact_url("https://a:b@h/p?q=c@d"), "https://a:***@h/p?q=c@d");
        assert_eq!(super::redact_url("https://a@h/p"), "https://a@h/p");
        assert_eq!(super::redact_url("https://h/p@x"), "https://h/p@x");
    }

    #[test]
    fn url_values_are_percent_encoded() {
        assert_eq!(percent_encode("a+b@x.com"), "a%2Bb%40x.com");
        assert_eq!(percent_encode("../admin?x=1"), "..%2Fadmin%3Fx%3D1");
        assert_eq!(percent_encode("été-~_."), "%C3%A9t%C3%A9-~_.");
    }
}
