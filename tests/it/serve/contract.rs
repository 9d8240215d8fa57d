//! The API's contract: every answer the server gives is one `GET
//! /openapi.json` documents. A table of requests drives every route through
//! its successes and its errors (the route, the body, the token, the
//! status and error code expected); each answer's status must be
//! documented for its route and method, and its body must hold to the
//! response's schema (error codes included: each error answer's schema
//! lists its codes). The answers every route shares are driven on every
//! route: 401 without a token, 413 over the body limit, 408 for a body
//! that never comes, 503 at the server's cap of requests.

use super::schema::problems;
use super::{HOLD, HOLD_PY, TOKEN_ACME, TOKEN_GLOBEX, code, options, start};
use crate::support::{temp_dir, unique};
use flowc::serve::auth::Auth;
use reqwest::Method;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::Duration;

const TOKEN_INITECH: &str = "initech-token-0123456789";
const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// One request and what it must be answered with.
struct Case {
    method: Method,
    template: &'static str,
    path: String,
    body: Option<String>,
    token: Option<&'static str>,
    status: u16,
    /// The error code expected, for an error.
    code: Option<&'static str>,
}

fn case(
    method: Method,
    template: &'static str,
    path: &str,
    body: Option<Value>,
    token: Option<&'static str>,
    status: u16,
    code: Option<&'static str>,
) -> Case {
    Case { method, template, path: path.to_string(), body: body.map(|body| body.to_string()), token, status, code }
}

/// An answer as the wire gave it.
pub struct Answer {
    pub status: u16,
    pub media: String,
    pub body: String,
}

pub fn send(base: &str, method: &Method, path: &str, body: Option<&str>, token: Option<&str>) -> Answer {
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
    let mut request = http.request(method.clone(), format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    let response = request.send().expect("the server answers");
    let status = response.status().as_u16();
    let media = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(';').next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    Answer { status, media, body: response.text().expect("a body") }
}

/// The document's operation for `method` on `template`.
fn operation<'a>(document: &'a Value, method: &Method, template: &str) -> &'a Value {
    let operation = &document["paths"][template][method.as_str().to_ascii_lowercase()];
    assert!(operation.is_object(), "{method} {template} is not in the document");
    operation
}

/// Asserts `answer` is documented for `method` on `template`: its status,
/// its media type, and its JSON body against the response's schema.
pub fn assert_documented(document: &Value, method: &Method, template: &str, answer: &Answer) {
    let what = format!("{method} {template} answered {} {}", answer.status, answer.body);
    let response = &operation(document, method, template)["responses"][answer.status.to_string()];
    assert!(response.is_object(), "{what}: the status is not documented for the route");
    if answer.body.is_empty() {
        assert!(response.get("content").is_none(), "{what}: documented with a body, answered none");
        return;
    }
    let content = &response["content"][&answer.media];
    assert!(content.is_object(), "{what}: {} is not a documented media type of the answer", answer.media);
    if answer.media == "application/json" {
        let value: Value = serde_json::from_str(&answer.body).expect("a JSON answer");
        let found = problems(document, &content["schema"], &value);
        assert!(found.is_empty(), "{what}: the body breaks its schema: {found:?}");
    }
}

/// Every documented operation, as (method, path template).
fn operations(document: &Value) -> Vec<(Method, String)> {
    let mut all = Vec::new();
    for (path, methods) in document["paths"].as_object().expect("paths") {
        for method in methods.as_object().expect("methods").keys() {
            all.push((Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("a method"), path.clone()));
        }
    }
    all
}

fn concrete(template: &str) -> String {
    template.replace("{id}", "acme_booking_00000000-0000-4000-8000-000000000000").replace("{name}", "booking")
}

fn onboarding() -> Value {
    json!({ "program": "onboarding", "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] } })
}

fn created(answer: &Answer, field: &str) -> String {
    let value: Value = serde_json::from_str(&answer.body).expect("JSON");
    value[field].as_str().unwrap_or_else(|| panic!("no `{field}` in {value}")).to_string()
}

#[test]
fn every_answer_of_every_route_is_documented_with_its_status_and_schema() {
    let mut options = options(
        Auth::new(vec![
            ("acme".into(), TOKEN_ACME.into()),
            ("globex".into(), TOKEN_GLOBEX.into()),
            ("initech".into(), TOKEN_INITECH.into()),
        ])
        .expect("tokens"),
    );
    options.caps.sessions_per_tenant = Some(4);
    options.caps.runs_per_tenant = Some(4);
    options.deadlines.body = Duration::from_secs(1);
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document: Value =
        serde_json::from_str(&send(&base, &Method::GET, "/openapi.json", None, None).body).expect("doc");
    let acme = Some(TOKEN_ACME);
    let globex = Some(TOKEN_GLOBEX);
    let post = |path: &str, body: Value| send(&base, &Method::POST, path, Some(&body.to_string()), acme);

    // What the table's requests act on.
    let session = created(&post("/v1/sessions", json!({ "program": "booking" })), "id");
    let doomed = created(&post("/v1/sessions", json!({ "program": "booking" })), "id");
    let resumed = created(&post("/v1/runs", onboarding()), "run");
    let cancelled = created(&post("/v1/runs", onboarding()), "run");
    let initech =
        |path: &str, body: Value| send(&base, &Method::POST, path, Some(&body.to_string()), Some(TOKEN_INITECH));
    for _ in 0..4 {
        assert_eq!(initech("/v1/sessions", json!({ "program": "booking" })).status, 201);
        assert_eq!(initech("/v1/runs", onboarding()).status, 201);
    }

    let messages = format!("/v1/sessions/{session}/messages");
    let say = |text: &str| Some(json!({ "text": text }));
    let (g, p, d) = (Method::GET, Method::POST, Method::DELETE);
    let mut cases = vec![
        case(g.clone(), "/healthz", "/healthz", None, None, 200, None),
        case(g.clone(), "/metrics", "/metrics", None, None, 200, None),
        case(g.clone(), "/openapi.json", "/openapi.json", None, None, 200, None),
        case(g.clone(), "/v1/programs", "/v1/programs", None, acme, 200, None),
        case(g.clone(), "/v1/programs/{name}/graph", "/v1/programs/booking/graph", None, acme, 200, None),
        case(
            g.clone(),
            "/v1/programs/{name}/graph",
            "/v1/programs/nope/graph",
            None,
            acme,
            404,
            Some("program_not_found"),
        ),
        case(g.clone(), "/v1/programs/{name}/coverage", "/v1/programs/booking/coverage", None, acme, 200, None),
        case(
            g.clone(),
            "/v1/programs/{name}/coverage",
            "/v1/programs/nope/coverage",
            None,
            acme,
            404,
            Some("program_not_found"),
        ),
        case(p.clone(), "/v1/sessions", "/v1/sessions", Some(json!({ "program": "booking" })), acme, 201, None),
        case(
            p.clone(),
            "/v1/sessions",
            "/v1/sessions",
            Some(json!({ "program": "nope" })),
            acme,
            404,
            Some("program_not_found"),
        ),
        case(p.clone(), "/v1/sessions", "/v1/sessions", Some(json!({ "program": 7 })), acme, 400, Some("invalid_body")),
        case(
            p.clone(),
            "/v1/sessions",
            "/v1/sessions",
            Some(json!({ "program": "booking" })),
            Some(TOKEN_INITECH),
            429,
            Some("too_many_sessions"),
        ),
        case(g.clone(), "/v1/sessions", "/v1/sessions?program=booking&limit=2", None, acme, 200, None),
        case(g.clone(), "/v1/sessions", "/v1/sessions?program=nope", None, acme, 404, Some("program_not_found")),
        case(g.clone(), "/v1/sessions", "/v1/sessions?limit=0", None, acme, 400, Some("invalid_body")),
        case(g.clone(), "/v1/sessions/{id}", &format!("/v1/sessions/{session}"), None, acme, 200, None),
        case(
            g.clone(),
            "/v1/sessions/{id}",
            &format!("/v1/sessions/{session}"),
            None,
            globex,
            404,
            Some("session_not_found"),
        ),
        case(p.clone(), "/v1/sessions/{id}/messages", &messages, say(BOOK), acme, 200, None),
        case(
            p.clone(),
            "/v1/sessions/{id}/messages",
            &messages,
            Some(json!({ "text": "yes", "version": 1 })),
            acme,
            409,
            Some("version_conflict"),
        ),
        case(
            p.clone(),
            "/v1/sessions/{id}/messages",
            &messages,
            Some(json!({ "txt": "yes" })),
            acme,
            400,
            Some("invalid_body"),
        ),
        case(p.clone(), "/v1/sessions/{id}/messages", &messages, say("yes"), globex, 404, Some("session_not_found")),
        case(
            d.clone(),
            "/v1/sessions/{id}",
            &format!("/v1/sessions/{doomed}"),
            None,
            globex,
            404,
            Some("session_not_found"),
        ),
        case(d.clone(), "/v1/sessions/{id}", &format!("/v1/sessions/{doomed}"), None, acme, 204, None),
        case(
            d.clone(),
            "/v1/sessions/{id}",
            &format!("/v1/sessions/{doomed}"),
            None,
            acme,
            404,
            Some("session_not_found"),
        ),
        case(p.clone(), "/v1/runs", "/v1/runs", Some(onboarding()), acme, 201, None),
        case(
            p.clone(),
            "/v1/runs",
            "/v1/runs",
            Some(json!({ "program": "onboarding", "wait": false, "data": onboarding()["data"] })),
            acme,
            202,
            None,
        ),
        case(
            p.clone(),
            "/v1/runs",
            "/v1/runs",
            Some(json!({ "program": "nope" })),
            acme,
            404,
            Some("program_not_found"),
        ),
        case(
            p.clone(),
            "/v1/runs",
            "/v1/runs",
            Some(json!({ "program": "onboarding", "flow": "nope" })),
            acme,
            400,
            Some("invalid_body"),
        ),
        case(p.clone(), "/v1/runs", "/v1/runs", Some(onboarding()), Some(TOKEN_INITECH), 429, Some("too_many_runs")),
        case(g.clone(), "/v1/runs/{id}", &format!("/v1/runs/{resumed}"), None, acme, 200, None),
        case(g.clone(), "/v1/runs/{id}", &format!("/v1/runs/{resumed}"), None, globex, 404, Some("run_not_found")),
        case(g.clone(), "/v1/runs/{id}/events", &format!("/v1/runs/{resumed}/events"), None, acme, 200, None),
        case(
            g.clone(),
            "/v1/runs/{id}/events",
            &format!("/v1/runs/{resumed}/events"),
            None,
            globex,
            404,
            Some("run_not_found"),
        ),
        case(
            p.clone(),
            "/v1/runs/{id}/resume",
            &format!("/v1/runs/{resumed}/resume"),
            Some(json!({})),
            acme,
            409,
            Some("not_due"),
        ),
        case(
            p.clone(),
            "/v1/runs/{id}/resume",
            &format!("/v1/runs/{resumed}/resume"),
            Some(json!({ "later": true })),
            acme,
            400,
            Some("invalid_body"),
        ),
        case(
            p.clone(),
            "/v1/runs/{id}/resume",
            &format!("/v1/runs/{resumed}/resume"),
            Some(json!({ "now": true })),
            globex,
            404,
            Some("run_not_found"),
        ),
        case(
            p.clone(),
            "/v1/runs/{id}/resume",
            &format!("/v1/runs/{resumed}/resume"),
            Some(json!({ "now": true })),
            acme,
            200,
            None,
        ),
        case(
            p.clone(),
            "/v1/runs/{id}/resume",
            &format!("/v1/runs/{resumed}/resume"),
            Some(json!({ "now": true })),
            acme,
            409,
            Some("run_ended"),
        ),
        case(
            p.clone(),
            "/v1/runs/{id}/cancel",
            &format!("/v1/runs/{cancelled}/cancel"),
            None,
            globex,
            404,
            Some("run_not_found"),
        ),
        case(p.clone(), "/v1/runs/{id}/cancel", &format!("/v1/runs/{cancelled}/cancel"), None, acme, 200, None),
        case(
            p.clone(),
            "/v1/runs/{id}/cancel",
            &format!("/v1/runs/{cancelled}/cancel"),
            None,
            acme,
            409,
            Some("run_ended"),
        ),
    ];

    // The answers every route shares, on every route.
    let too_large = json!({ "text": "x".repeat(options.body_limit) }).to_string();
    for (method, template) in operations(&document) {
        let path = concrete(&template);
        if template.starts_with("/v1/") {
            cases.push(Case {
                method: method.clone(),
                template: leak(&template),
                path: path.clone(),
                body: None,
                token: None,
                status: 401,
                code: Some("unauthorized"),
            });
        }
        if operation(&document, &method, &template).get("requestBody").is_some() {
            cases.push(Case {
                method,
                template: leak(&template),
                path,
                body: Some(too_large.clone()),
                token: acme,
                status: 413,
                code: Some("body_too_large"),
            });
        }
    }

    let mut succeeded = std::collections::BTreeSet::new();
    for case in &cases {
        let answer = send(&base, &case.method, &case.path, case.body.as_deref(), case.token);
        let what = format!("{} {} ({:?})", case.method, case.path, case.token);
        assert_eq!(answer.status, case.status, "{what}: {}", answer.body);
        if let Some(expected) = case.code {
            let value: Value = serde_json::from_str(&answer.body).expect("a JSON error");
            assert_eq!(code(&value), expected, "{what}: {value}");
        }
        assert_documented(&document, &case.method, case.template, &answer);
        if (200..300).contains(&answer.status) {
            succeeded.insert((case.method.to_string(), case.template.to_string()));
        }
    }
    for (method, template) in operations(&document) {
        assert!(succeeded.contains(&(method.to_string(), template.clone())), "{method} {template}: no success driven");
    }

    // A turn asked for as server-sent events is the 200's other media type.
    let streamed = reqwest::blocking::Client::new()
        .post(format!("{base}{messages}"))
        .bearer_auth(TOKEN_ACME)
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(json!({ "text": "yes" }).to_string())
        .send()
        .expect("the server answers");
    let media = streamed.headers().get("content-type").and_then(|value| value.to_str().ok()).map(str::to_string);
    let answer = Answer {
        status: streamed.status().as_u16(),
        media: media.unwrap_or_default(),
        body: streamed.text().expect("events"),
    };
    assert!(answer.status == 200 && answer.body.contains("event: turn"), "{}", answer.body);
    assert_documented(&document, &Method::POST, "/v1/sessions/{id}/messages", &answer);

    // A body that never comes, on every route that takes one.
    for (method, template) in operations(&document) {
        if operation(&document, &method, &template).get("requestBody").is_none() {
            continue;
        }
        let path = concrete(&template);
        let answer = never_ending_body(server.addr, &method, &path, TOKEN_ACME);
        assert_eq!(answer.status, 408, "{method} {template}: {}", answer.body);
        let value: Value = serde_json::from_str(&answer.body).expect("a JSON error");
        assert_eq!(code(&value), "body_timeout", "{value}");
        assert_documented(&document, &method, &template, &answer);
    }
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}

/// Sends a request head announcing a body, and part of it, then waits for
/// the server's answer (it must come: the body's deadline runs out).
fn never_ending_body(addr: std::net::SocketAddr, method: &Method, path: &str, token: &str) -> Answer {
    let mut stream = std::net::TcpStream::connect(addr).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("a read timeout");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"te"
    );
    stream.write_all(head.as_bytes()).expect("the head and a part of the body");
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(error) => panic!("the server neither answered nor closed the connection: {error}"),
    }
    parse_answer(&String::from_utf8_lossy(&raw))
}

/// A whole HTTP/1.1 answer read off a socket (a body of known length).
fn parse_answer(raw: &str) -> Answer {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|status| status.parse().ok()).unwrap_or(0);
    let media = head
        .lines()
        .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-type:").map(|value| value.trim().to_string()))
        .map(|value| value.split(';').next().unwrap_or_default().to_string())
        .unwrap_or_default();
    Answer { status, media, body: body.to_string() }
}

/// At its cap of requests, the server answers every route but health and
/// metrics with a documented 503 `overloaded`.
#[test]
fn at_the_cap_of_requests_every_route_answers_a_documented_503() {
    let dir = temp_dir(&format!("serve-contract-{}", unique()));
    std::fs::write(dir.join("hold.flow"), HOLD).expect("program");
    std::fs::write(dir.join("hold.py"), HOLD_PY).expect("tool");
    let mut options = options(Auth::default());
    options.files.push(dir.join("hold.flow"));
    options.caps.requests = Some(1);
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document: Value =
        serde_json::from_str(&send(&base, &Method::GET, "/openapi.json", None, None).body).expect("doc");
    let holder = {
        let base = base.clone();
        std::thread::spawn(move || send(&base, &Method::POST, "/v1/runs", Some(r#"{"program": "hold"}"#), None))
    };
    while !dir.join("started").exists() {
        std::thread::yield_now();
    }
    for (method, template) in operations(&document) {
        let answer = send(&base, &method, &concrete(&template).replace("acme_", "open_"), Some("{}"), None);
        let expected = if matches!(template.as_str(), "/healthz" | "/metrics") { 200 } else { 503 };
        assert_eq!(answer.status, expected, "{method} {template}: {}", answer.body);
        if expected == 503 {
            let value: Value = serde_json::from_str(&answer.body).expect("a JSON error");
            assert_eq!(code(&value), "overloaded", "{value}");
        }
        assert_documented(&document, &method, &template, &answer);
    }
    std::fs::write(dir.join("release"), "").expect("release");
    let held = holder.join().expect("the held request");
    assert_eq!(held.status, 201, "{}", held.body);
    assert_documented(&document, &Method::POST, "/v1/runs", &held);
}
