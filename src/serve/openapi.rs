//! `GET /openapi.json`: the API as an OpenAPI 3.1 document, made from the
//! router's own route table ([`super::routes`]) and the description of each
//! route below. A route without a description is an error the tests catch
//! (and the document names it rather than leaving it out).

use super::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::Method;
use serde_json::{Value, json};
use std::sync::Arc;

/// What a route answers when it succeeds.
#[derive(Clone, Copy)]
pub enum Answer {
    /// JSON of the named schema in `components`.
    Json(&'static str),
    /// Plain text (the Prometheus exposition).
    Text,
    /// No body.
    Empty,
}

/// What the document says of one route. The error answers every route of
/// a kind shares are added by [`shared_errors`]; `errors` holds the ones
/// only this route gives, each status with every code it answers with.
pub struct Doc {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    /// The request body's schema name in `components`, if it takes one.
    pub request: Option<&'static str>,
    /// The successful answers: status and body.
    pub answers: &'static [(u16, Answer)],
    /// The route's own error answers: status and the codes of its
    /// `{"error": {"code", "message"}}` bodies.
    pub errors: &'static [(u16, &'static [&'static str])],
    /// Answers `text/event-stream` too (with `Accept`), or only.
    pub streams: bool,
}

/// The error answers a route shares with every route of its kind, by the
/// layer that gives them: the caps of connections and requests and the
/// body's deadline and limit (`mod.rs`, `listen.rs`), the token
/// (`auth.rs`), the blocking pool and the store (`error.rs`). Every route,
/// health and metrics included, answers 503 `overloaded` at the cap of
/// connections: a connection past it is refused before its request is read.
pub fn shared_errors(doc: &Doc) -> Vec<(u16, &'static [&'static str])> {
    let mut errors: Vec<(u16, &'static [&'static str])> = Vec::new();
    if doc.request.is_some() {
        errors.extend([(400, &["invalid_body"][..]), (408, &["body_timeout"]), (413, &["body_too_large"])]);
    }
    if doc.path.starts_with("/v1/") {
        errors.extend([(401, &["unauthorized"][..]), (500, &["internal"])]);
    }
    if doc.path.starts_with("/v1/sessions") || doc.path.starts_with("/v1/runs") {
        errors.extend([(500, &["store_corrupt"][..]), (503, &["store_unavailable"])]);
    }
    errors.push((503, &["overloaded"]));
    errors
}

/// Every error answer of a route: its status, and its codes in order.
pub fn errors_of(doc: &Doc) -> std::collections::BTreeMap<u16, Vec<&'static str>> {
    let mut by_status = std::collections::BTreeMap::<u16, Vec<&'static str>>::new();
    for (status, codes) in shared_errors(doc).into_iter().chain(doc.errors.iter().copied()) {
        let known = by_status.entry(status).or_default();
        for code in codes {
            if !known.contains(code) {
                known.push(code);
            }
        }
    }
    by_status
}

const CONFLICTS_OF_A_RUN: &[&str] =
    &["run_ended", "not_due", "run_busy", "incompatible_program", "version_conflict", "run_cancelled"];

/// The description of every route.
pub fn docs() -> Vec<Doc> {
    let doc = |method: Method,
               path: &'static str,
               summary: &'static str,
               request: Option<&'static str>,
               answers: &'static [(u16, Answer)],
               errors: &'static [(u16, &'static [&'static str])],
               streams: bool| Doc { method, path, summary, request, answers, errors, streams };
    vec![
        doc(
            Method::GET,
            "/healthz",
            "Liveness: 200 while the server answers",
            None,
            &[(200, Answer::Json("Health"))],
            &[],
            false,
        ),
        doc(
            Method::GET,
            "/metrics",
            "Prometheus text: turns, model calls and their latency, tokens, latencies, store errors, open sessions",
            None,
            &[(200, Answer::Text)],
            &[],
            false,
        ),
        doc(Method::GET, "/openapi.json", "This document", None, &[(200, Answer::Json("OpenApi"))], &[], false),
        doc(
            Method::GET,
            "/v1/programs",
            "The programs this server runs, by name",
            None,
            &[(200, Answer::Json("Programs"))],
            &[],
            false,
        ),
        doc(
            Method::GET,
            "/v1/programs/{name}/graph",
            "A program's graph as `flowc graph` draws it (its current version): flows, steps as nodes, transitions as edges",
            None,
            &[(200, Answer::Json("Graph"))],
            &[(404, &["program_not_found"])],
            false,
        ),
        doc(
            Method::GET,
            "/v1/programs/{name}/coverage",
            "What the program's test files (*.test.yaml beside it) reach when their cases run now: `flowc test --coverage` per flow, and the graph's nodes and edges (indices into the graph's `edges`) reached",
            None,
            &[(200, Answer::Json("Coverage"))],
            &[(404, &["program_not_found"])],
            false,
        ),
        doc(
            Method::POST,
            "/v1/sessions",
            "Start a conversation with a program",
            Some("NewSession"),
            &[(201, Answer::Json("Created"))],
            &[(404, &["program_not_found"]), (429, &["too_many_sessions"])],
            false,
        ),
        doc(
            Method::GET,
            "/v1/sessions",
            "This tenant's sessions, a page at a time (query: program, limit, after)",
            None,
            &[(200, Answer::Json("SessionPage"))],
            &[(400, &["invalid_body"]), (404, &["program_not_found"])],
            false,
        ),
        doc(
            Method::GET,
            "/v1/sessions/{id}",
            "Where a session stands, its data and its transcript",
            None,
            &[(200, Answer::Json("Session"))],
            &[(404, &["session_not_found", "not_found"])],
            false,
        ),
        doc(
            Method::DELETE,
            "/v1/sessions/{id}",
            "Delete a session and its transcript",
            None,
            &[(204, Answer::Empty)],
            &[(404, &["session_not_found", "not_found"])],
            false,
        ),
        doc(
            Method::POST,
            "/v1/sessions/{id}/messages",
            "One turn: the turn object of `flowc run --json`; with Accept: text/event-stream, text, event and turn events, or an error event ({\"error\": {\"code\", \"message\"}}, a code of the route's error answers) when the turn fails",
            Some("Message"),
            &[(200, Answer::Json("Turn"))],
            &[
                (404, &["session_not_found", "program_not_found", "not_found"]),
                (409, &["version_conflict", "incompatible_program"]),
                (500, &["turn_failed"]),
                (502, &["model_unavailable", "model_failed", "tool_failed"]),
            ],
            true,
        ),
        doc(
            Method::POST,
            "/v1/runs",
            "Start a workflow run: 201 with the run where it stopped, or 202 at once with wait: false",
            Some("NewRun"),
            &[(201, Answer::Json("Run")), (202, Answer::Json("Run"))],
            &[
                (404, &["program_not_found"]),
                (409, &["version_conflict"]),
                (429, &["too_many_runs"]),
                (502, &["model_unavailable"]),
            ],
            false,
        ),
        doc(
            Method::GET,
            "/v1/runs/{id}",
            "A workflow run: the run object of `flowc run --json`",
            None,
            &[(200, Answer::Json("Run"))],
            &[(404, &["run_not_found", "not_found"])],
            false,
        ),
        doc(
            Method::GET,
            "/v1/runs/{id}/events",
            "A run's events as server-sent events: step events with progress, then finished, waiting or paused with the run",
            None,
            &[(200, Answer::Empty)],
            &[(404, &["run_not_found", "not_found"])],
            true,
        ),
        doc(
            Method::POST,
            "/v1/runs/{id}/resume",
            "Go on with a waiting or paused run (now: true resumes a wait early)",
            Some("Resume"),
            &[(200, Answer::Json("Run"))],
            &[(404, &["run_not_found", "not_found"]), (409, CONFLICTS_OF_A_RUN), (502, &["model_unavailable"])],
            false,
        ),
        doc(
            Method::POST,
            "/v1/runs/{id}/cancel",
            "Cancel a waiting, paused or running run: it is aborted and never resumed",
            None,
            &[(200, Answer::Json("Run"))],
            &[(404, &["run_not_found", "not_found"]), (409, &["run_ended"])],
            false,
        ),
    ]
}

fn schemas() -> Value {
    let object = json!({ "type": "object" });
    json!({
        "Error": {
            "type": "object", "required": ["error"],
            "properties": { "error": { "type": "object", "required": ["code", "message"],
                "properties": { "code": { "type": "string" }, "message": { "type": "string" } } } }
        },
        "OpenApi": { "type": "object", "required": ["openapi", "info", "paths", "components"],
            "properties": { "openapi": { "const": "3.1.0" }, "info": object, "paths": object, "components": object } },
        "Health": { "type": "object", "properties": { "status": { "const": "ok" } } },
        "Programs": { "type": "object", "properties": { "programs": { "type": "array", "items": {
            "type": "object", "properties": { "name": { "type": "string" }, "file": { "type": "string" }, "hash": { "type": "string" },
                "flows": { "type": "array" }, "reload_error": { "type": ["string", "null"] },
                "not_adopted": { "type": "array", "description": "Which sessions of the version before it the current version cannot take, from the two versions (steps and flows gone, fields and context keys no longer declared): they keep their version", "items": { "type": "string" } },
                "older_versions": { "type": "array", "description": "Older versions still serving sessions the current version cannot take (at most 8, most recently used first), as this server saw them", "items": {
                    "type": "object", "required": ["hash", "reason", "turns", "from_store"],
                    "properties": { "hash": { "type": "string" }, "reason": { "type": "string", "description": "Why the current version does not adopt their sessions" },
                        "turns": { "type": "integer", "description": "Turns this server ran on it since the current version came" },
                        "from_store": { "type": "boolean", "description": "Compiled from the store's copy of its text" } } } } } } } } },
        "Graph": {
            "type": "object", "required": ["program", "flows", "clusters", "nodes", "edges"],
            "properties": { "program": { "type": "string" }, "agent": { "type": ["string", "null"] },
                "conversation": { "type": "boolean" }, "flows": { "type": "array", "items": object },
                "clusters": { "type": "array", "items": object },
                "nodes": { "type": "array", "items": { "type": "object", "required": ["id", "kind"],
                    "properties": { "id": { "type": "string" }, "kind": { "type": "string" }, "flow": { "type": ["string", "null"] },
                        "step": { "type": ["string", "null"] }, "lines": { "type": "array", "items": { "type": "string" } },
                        "unreachable": { "type": "boolean" } } } },
                "edges": { "type": "array", "items": { "type": "object", "required": ["from", "to", "kind"],
                    "properties": { "from": { "type": "string" }, "to": { "type": "string" }, "kind": { "type": "string" },
                        "label": { "type": ["string", "null"] }, "unreachable": { "type": "boolean" },
                        "cross_flow": { "type": "boolean" } } } } }
        },
        "Coverage": {
            "type": "object", "required": ["program", "files", "cases", "failed", "flows", "nodes", "edges"],
            "properties": { "program": { "type": "string" }, "files": { "type": "array", "items": { "type": "string" } },
                "broken": { "type": "array", "items": { "type": "object", "properties": {
                    "file": { "type": "string" }, "reason": { "type": "string" } } } },
                "cases": { "type": "integer" }, "failed": { "type": "integer" },
                "flows": { "type": "array", "items": { "type": "object", "required": ["flow", "steps", "branches", "transitions", "missed"] } },
                "nodes": { "type": "array", "items": { "type": "string" } },
                "edges": { "type": "array", "items": { "type": "integer" } } }
        },
        "NewSession": {
            "type": "object", "required": ["program"], "additionalProperties": false,
            "properties": { "program": { "type": "string" }, "context": object, "data": object }
        },
        "Created": { "type": "object", "required": ["id"], "properties": { "id": { "type": "string" } } },
        "Message": {
            "type": "object", "required": ["text"], "additionalProperties": false,
            "properties": { "text": { "type": "string" },
                "version": { "type": "integer", "minimum": 0, "description": "refuse the turn (409) unless the session is at this version" } }
        },
        "Turn": {
            "type": "object",
            "required": ["turn", "user", "reply", "flow", "step", "executed_steps", "stopped_reason", "data", "directives", "llm_calls", "tokens"],
            "properties": {
                "turn": { "type": "integer" }, "user": { "type": "string" }, "reply": { "type": "string" },
                "flow": { "type": ["string", "null"] }, "step": { "type": ["string", "null"] },
                "executed_steps": { "type": "array", "items": { "type": "string" } },
                "stopped_reason": { "type": "string" }, "data": object, "directives": { "type": "array" },
                "llm_calls": { "type": "integer" }, "tokens": object
            }
        },
        "Session": {
            "type": "object",
            "properties": { "id": { "type": "string" }, "program": { "type": "string" }, "version": { "type": "integer" },
                "turns": { "type": "integer" }, "flow": { "type": ["string", "null"] }, "step": { "type": ["string", "null"] },
                "data": object, "context": object, "tokens": object,
                "history": { "type": "array", "items": { "type": "object", "properties": { "role": { "type": "string" }, "text": { "type": "string" } } } } }
        },
        "SessionPage": {
            "type": "object",
            "properties": { "sessions": { "type": "array", "items": object }, "next": { "type": ["string", "null"] } }
        },
        "NewRun": {
            "type": "object", "required": ["program"], "additionalProperties": false,
            "properties": { "program": { "type": "string" }, "flow": { "type": "string" }, "data": object, "context": object,
                "wait": { "type": "boolean", "default": true } }
        },
        "Resume": { "type": "object", "additionalProperties": false, "properties": { "now": { "type": "boolean" } } },
        "Run": {
            "type": "object",
            "required": ["run", "status", "flow", "step", "stopped_reason", "data", "steps", "events"],
            "properties": { "run": { "type": "string" }, "status": { "type": "string" }, "flow": { "type": "string" },
                "step": { "type": ["string", "null"] }, "stopped_reason": { "type": "string" }, "resume_at": { "type": ["string", "null"] },
                "data": object, "steps": { "type": "array" }, "events": { "type": "array" }, "error": { "type": ["string", "null"] } }
        }
    })
}

/// The document for `routes` (the router's table): every route with its
/// description, and every one without named in `x-undocumented`.
pub fn build(routes: &[(Method, &'static str)]) -> Value {
    let docs = docs();
    let mut paths = serde_json::Map::new();
    let mut undocumented = Vec::new();
    for (method, path) in routes {
        let Some(doc) = docs.iter().find(|doc| doc.method == *method && doc.path == *path) else {
            undocumented.push(format!("{method} {path}"));
            continue;
        };
        let mut responses = serde_json::Map::new();
        for (status, answer) in doc.answers {
            let mut response = json!({ "description": reason(*status) });
            let mut content = serde_json::Map::new();
            match answer {
                Answer::Json(schema) => {
                    content.insert(
                        "application/json".into(),
                        json!({ "schema": { "$ref": format!("#/components/schemas/{schema}") } }),
                    );
                }
                Answer::Text => {
                    content.insert("text/plain".into(), json!({ "schema": { "type": "string" } }));
                }
                Answer::Empty => {}
            }
            if doc.streams && *status == 200 {
                content.insert("text/event-stream".into(), json!({ "schema": { "type": "string" } }));
            }
            if !content.is_empty() {
                response["content"] = Value::Object(content);
            }
            responses.insert(status.to_string(), response);
        }
        for (status, codes) in errors_of(doc) {
            let mut response = json!({
                "description": format!("{} (codes: {})", reason(status), codes.join(", ")),
                "content": { "application/json": { "schema": { "allOf": [
                    { "$ref": "#/components/schemas/Error" },
                    { "properties": { "error": { "properties": { "code": { "enum": codes } } } } }
                ] } } }
            });
            if status == 503 {
                response["headers"] = json!({ "Retry-After": { "description": "seconds to wait before trying again (overloaded)",
                    "schema": { "type": "integer" } } });
            }
            responses.insert(status.to_string(), response);
        }
        let mut operation = json!({ "summary": doc.summary, "responses": responses });
        let parameters: Vec<Value> = ["id", "name"]
            .iter()
            .filter(|name| path.contains(&format!("{{{name}}}")))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        if let Some(request) = doc.request {
            operation["requestBody"] = json!({
                "required": *path != "/v1/runs/{id}/resume",
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{request}") } } }
            });
        }
        if path.starts_with("/v1/") {
            operation["security"] = json!([{ "bearer": [] }]);
        }
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method.as_str().to_ascii_lowercase()] = operation;
    }
    let mut document = json!({
        "openapi": "3.1.0",
        "info": { "title": "flowc serve", "version": env!("CARGO_PKG_VERSION"),
            "description": "Conversations and workflow runs of flowc programs over HTTP. Errors are {\"error\": {\"code\", \"message\"}}; each error answer lists its codes. Any path not here is a 404 `route_not_found`, and a method a path does not take a 405 `method_not_allowed`." },
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer",
                "description": "A token of [serve.tokens] (each token a tenant); none when the server has no token" } }
        }
    });
    if !undocumented.is_empty() {
        document["x-undocumented"] = json!(undocumented);
    }
    document
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted: the run goes on in the background",
        204 => "Deleted",
        400 => "Invalid body or query: the message names the field",
        401 => "No token, or one the server does not know",
        404 => "No such session, run or program (or another tenant's)",
        408 => "The request body did not arrive within the server's deadline",
        409 => "The session or run changed meanwhile, or cannot go on",
        413 => "The body is over the server's limit",
        429 => "The tenant is at its cap of sessions (too_many_sessions) or of runs not yet ended (too_many_runs)",
        500 => "The server failed at the request (the message says what), or the store is damaged",
        502 => "The model or a tool failed",
        503 => {
            "The server is at its cap of connections or requests (overloaded, with Retry-After), or the store is unavailable"
        }
        _ => "See the error's code",
    }
}

/// The routes of the router, as (method, path).
pub fn route_keys() -> Vec<(Method, &'static str)> {
    super::routes().into_iter().map(|route| (route.method, route.path)).collect()
}

pub async fn document(State(_state): State<Arc<AppState>>) -> Json<Value> {
    Json(build(&route_keys()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_of_the_router_is_documented_and_every_description_is_a_route() {
        let routes = route_keys();
        let document = build(&routes);
        assert_eq!(document.get("x-undocumented"), None, "routes without a description");
        for doc in docs() {
            assert!(
                routes.iter().any(|(method, path)| *method == doc.method && *path == doc.path),
                "{} {} is described but the router has no such route",
                doc.method,
                doc.path
            );
        }
        let operations: usize = document["paths"]
            .as_object()
            .map_or(0, |paths| paths.values().map(|path| path.as_object().map_or(0, serde_json::Map::len)).sum());
        assert_eq!(operations, routes.len());
    }

    /// Every error the server's code can answer, as (status, code): read
    /// from the sources of `serve`, so a new code or status shows up here
    /// before a client meets it undocumented. A `with_code` keeps the
    /// status of the error it renames, which the source does not say
    /// beside it: those are answered as `None`.
    fn errors_in_the_code() -> Vec<(Option<u16>, String)> {
        let sources = [
            include_str!("auth.rs"),
            include_str!("caps.rs"),
            include_str!("error.rs"),
            include_str!("listen.rs"),
            include_str!("mod.rs"),
            include_str!("page.rs"),
            include_str!("programs.rs"),
            include_str!("runs.rs"),
            include_str!("sessions.rs"),
            include_str!("turn.rs"),
        ];
        let new = regex::Regex::new(r#"ApiError::new\(\s*StatusCode::(\w+),\s*"(\w+)""#).expect("a pattern");
        let renamed = regex::Regex::new(r#"with_code\("(\w+)"\)"#).expect("a pattern");
        let mut found = Vec::new();
        for source in sources {
            for capture in new.captures_iter(source) {
                let status: u16 = match &capture[1] {
                    "BAD_REQUEST" => 400,
                    "UNAUTHORIZED" => 401,
                    "NOT_FOUND" => 404,
                    "METHOD_NOT_ALLOWED" => 405,
                    "REQUEST_TIMEOUT" => 408,
                    "CONFLICT" => 409,
                    "PAYLOAD_TOO_LARGE" => 413,
                    "TOO_MANY_REQUESTS" => 429,
                    "INTERNAL_SERVER_ERROR" => 500,
                    "BAD_GATEWAY" => 502,
                    "SERVICE_UNAVAILABLE" => 503,
                    other => panic!("a status this test does not know: {other}"),
                };
                found.push((Some(status), capture[2].to_string()));
            }
            found.extend(renamed.captures_iter(source).map(|capture| (None, capture[1].to_string())));
        }
        found
    }

    #[test]
    fn every_error_the_code_answers_is_documented_under_its_status() {
        let docs = docs();
        let documented: Vec<(u16, &str)> = docs
            .iter()
            .flat_map(|doc| {
                errors_of(doc).into_iter().flat_map(|(status, codes)| codes.into_iter().map(move |code| (status, code)))
            })
            .collect();
        let found = errors_in_the_code();
        assert!(found.len() > 20, "the sources were read: {found:?}");
        let description = build(&route_keys())["info"]["description"].to_string();
        for (status, code) in found {
            let known = match status {
                // The fallbacks answer for no route: the document says so once.
                Some(404 | 405) if matches!(code.as_str(), "route_not_found" | "method_not_allowed") => {
                    description.contains(&code)
                }
                Some(status) => documented.contains(&(status, code.as_str())),
                None => documented.iter().any(|(_, known)| *known == code),
            };
            assert!(known, "{status:?} `{code}` is answered by the code but documented on no route");
        }
    }

    #[test]
    fn every_schema_referenced_is_defined() {
        let document = build(&route_keys());
        let text = document.to_string();
        let schemas = &document["components"]["schemas"];
        for reference in text.split("#/components/schemas/").skip(1) {
            let name: String = reference.chars().take_while(|character| character.is_ascii_alphanumeric()).collect();
            assert!(schemas.get(&name).is_some(), "{name} is referenced but not defined");
        }
    }
}
