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

/// What the document says of one route.
pub struct Doc {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    /// The request body's schema name in `components`, if it takes one.
    pub request: Option<&'static str>,
    /// Status and the response schema name (`None`: no JSON body).
    pub responses: &'static [(u16, Option<&'static str>)],
    /// Answers `text/event-stream` too (with `Accept`), or only.
    pub streams: bool,
}

const ERRORS: [(u16, Option<&str>); 1] = [(400, Some("Error"))];

/// What any route but health and metrics may answer when the server is at
/// its cap of connections or requests (`serve::caps`).
const OVERLOAD: [(u16, Option<&str>); 1] = [(503, Some("Error"))];

/// The description of every route.
pub fn docs() -> Vec<Doc> {
    let doc = |method: Method,
               path: &'static str,
               summary: &'static str,
               request: Option<&'static str>,
               responses: &'static [(u16, Option<&'static str>)],
               streams: bool| Doc { method, path, summary, request, responses, streams };
    vec![
        doc(Method::GET, "/healthz", "Liveness: 200 while the server answers", None, &[(200, Some("Health"))], false),
        doc(
            Method::GET,
            "/metrics",
            "Prometheus text: turns, model calls, tokens, latencies, store errors, open sessions",
            None,
            &[(200, None)],
            false,
        ),
        doc(Method::GET, "/openapi.json", "This document", None, &[(200, None)], false),
        doc(
            Method::GET,
            "/v1/programs",
            "The programs this server runs, by name",
            None,
            &[(200, Some("Programs")), (401, Some("Error"))],
            false,
        ),
        doc(
            Method::GET,
            "/v1/programs/{name}/graph",
            "A program's graph as `flowc graph` draws it (its current version): flows, steps as nodes, transitions as edges",
            None,
            &[(200, Some("Graph")), (401, Some("Error")), (404, Some("Error"))],
            false,
        ),
        doc(
            Method::GET,
            "/v1/programs/{name}/coverage",
            "What the program's test files (*.test.yaml beside it) reach when their cases run now: `flowc test --coverage` per flow, and the graph's nodes and edges (indices into the graph's `edges`) reached",
            None,
            &[(200, Some("Coverage")), (401, Some("Error")), (404, Some("Error"))],
            false,
        ),
        doc(
            Method::POST,
            "/v1/sessions",
            "Start a conversation with a program",
            Some("NewSession"),
            &[
                (201, Some("Created")),
                (400, Some("Error")),
                (404, Some("Error")),
                (413, Some("Error")),
                (429, Some("Error")),
            ],
            false,
        ),
        doc(
            Method::GET,
            "/v1/sessions",
            "This tenant's sessions, a page at a time (query: program, limit, after)",
            None,
            &[(200, Some("SessionPage")), (400, Some("Error"))],
            false,
        ),
        doc(
            Method::GET,
            "/v1/sessions/{id}",
            "Where a session stands, its data and its transcript",
            None,
            &[(200, Some("Session")), (404, Some("Error"))],
            false,
        ),
        doc(
            Method::DELETE,
            "/v1/sessions/{id}",
            "Delete a session and its transcript",
            None,
            &[(204, None), (404, Some("Error"))],
            false,
        ),
        doc(
            Method::POST,
            "/v1/sessions/{id}/messages",
            "One turn: the turn object of `flowc run --json`; with Accept: text/event-stream, text, event and turn events",
            Some("Message"),
            &[
                (200, Some("Turn")),
                (400, Some("Error")),
                (404, Some("Error")),
                (409, Some("Error")),
                (413, Some("Error")),
                (502, Some("Error")),
            ],
            true,
        ),
        doc(
            Method::POST,
            "/v1/runs",
            "Start a workflow run: 201 with the run where it stopped, or 202 at once with wait: false",
            Some("NewRun"),
            &[(201, Some("Run")), (202, Some("Run")), (400, Some("Error")), (404, Some("Error")), (429, Some("Error"))],
            false,
        ),
        doc(
            Method::GET,
            "/v1/runs/{id}",
            "A workflow run: the run object of `flowc run --json`",
            None,
            &[(200, Some("Run")), (404, Some("Error"))],
            false,
        ),
        doc(
            Method::GET,
            "/v1/runs/{id}/events",
            "A run's events as server-sent events: step events with progress, then finished, waiting or paused with the run",
            None,
            &[(200, None), (404, Some("Error"))],
            true,
        ),
        doc(
            Method::POST,
            "/v1/runs/{id}/resume",
            "Go on with a waiting or paused run (now: true resumes a wait early)",
            Some("Resume"),
            &[(200, Some("Run")), (404, Some("Error")), (409, Some("Error"))],
            false,
        ),
        doc(
            Method::POST,
            "/v1/runs/{id}/cancel",
            "Cancel a waiting, paused or running run: it is aborted and never resumed",
            None,
            &[(200, Some("Run")), (404, Some("Error")), (409, Some("Error"))],
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
        "Health": { "type": "object", "properties": { "status": { "const": "ok" } } },
        "Programs": { "type": "object", "properties": { "programs": { "type": "array", "items": {
            "type": "object", "properties": { "name": { "type": "string" }, "file": { "type": "string" }, "hash": { "type": "string" },
                "flows": { "type": "array" }, "reload_error": { "type": ["string", "null"] },
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
        let watched = matches!(*path, "/healthz" | "/metrics");
        let extra = doc.responses.iter().chain(if doc.request.is_some() { &ERRORS[..] } else { &[] });
        for (status, schema) in extra.chain(if watched { &[] } else { &OVERLOAD[..] }) {
            let mut response = json!({ "description": reason(*status) });
            if *status == 503 {
                response["headers"] = json!({ "Retry-After": { "description": "seconds to wait before trying again",
                    "schema": { "type": "integer" } } });
            }
            let mut content = serde_json::Map::new();
            if let Some(schema) = schema {
                content.insert(
                    "application/json".into(),
                    json!({ "schema": { "$ref": format!("#/components/schemas/{schema}") } }),
                );
            }
            if doc.streams && *status == 200 {
                content.insert("text/event-stream".into(), json!({ "schema": { "type": "string" } }));
            }
            if !content.is_empty() {
                response["content"] = Value::Object(content);
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
            "description": "Conversations and workflow runs of flowc programs over HTTP. Errors are {\"error\": {\"code\", \"message\"}}." },
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
        409 => "The session or run changed meanwhile, or cannot go on",
        413 => "The body is over the server's limit",
        429 => "The tenant is at its cap of sessions (too_many_sessions) or of runs not yet ended (too_many_runs)",
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
