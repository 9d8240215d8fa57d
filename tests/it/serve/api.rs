//! Conversations over the API: the turn object is `flowc run --json`'s,
//! sessions are shown, listed and deleted, a stale version is 409, errors
//! have their codes, tenants see only their own sessions, a streamed turn
//! sends text, events and the turn, and the OpenAPI document matches the
//! router.

use super::{Client, TOKEN_ACME, TOKEN_GLOBEX, code, options, read_events, start, tenants};
use crate::support::{flowc_in, root, stdout};
use flowc::serve::auth::Auth;
use serde_json::{Value, json};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

#[test]
fn a_booking_conversation_answers_the_turn_objects_of_flowc_run_json() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    assert!(id.starts_with("open_booking_"), "{id}");
    let (status, first) = client.say(&id, BOOK);
    assert_eq!(status, 200, "{first}");
    let (status, second) = client.say(&id, "yes");
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["stopped_reason"], "flow_complete", "{second}");

    let cli = flowc_in(root(), &["run", "flows/booking.flow", "--json"], Some(&format!("{BOOK}\nyes\n")));
    let lines: Vec<Value> = stdout(&cli).lines().map(|line| serde_json::from_str(line).expect("a JSON turn")).collect();
    assert_eq!(lines, vec![first, second], "the API's turns are the CLI's");

    let (status, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        (shown["program"].as_str(), shown["turns"].as_u64(), shown["version"].as_u64()),
        (Some("booking"), Some(2), Some(3))
    );
    assert_eq!(shown["data"]["hotel"], "Grand Hotel", "{shown}");
    let history = shown["history"].as_array().map(Vec::len);
    assert_eq!(history, Some(4), "two messages and two replies: {shown}");
    assert_eq!(shown["history"][0], json!({ "role": "user", "text": BOOK }));
}

#[test]
fn sessions_are_listed_by_program_a_page_at_a_time_and_deleted() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let mut ids: Vec<String> = (0..5).map(|_| client.new_session()).collect();
    ids.sort();
    let (status, page) = client.get("/v1/sessions?program=booking&limit=2");
    assert_eq!(status, 200, "{page}");
    let listed = |page: &Value| -> Vec<String> {
        page["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|session| session["id"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(listed(&page), ids[..2].to_vec());
    let mut all = listed(&page);
    let mut next = page["next"].as_str().map(str::to_string);
    while let Some(after) = next {
        let (_, page) = client.get(&format!("/v1/sessions?program=booking&limit=2&after={after}"));
        all.extend(listed(&page));
        next = page["next"].as_str().map(str::to_string);
    }
    assert_eq!(all, ids, "every session once, in id order");
    assert_eq!(client.get("/v1/sessions?program=nope").0, 404);
    assert_eq!(code(&client.get("/v1/sessions?limit=0").1), "invalid_body");

    let (status, _) = client.send(reqwest::Method::DELETE, &format!("/v1/sessions/{}", ids[0]), None);
    assert_eq!(status, 204);
    let (status, gone) = client.get(&format!("/v1/sessions/{}", ids[0]));
    assert_eq!((status, code(&gone)), (404, "session_not_found"));
    assert_eq!(client.send(reqwest::Method::DELETE, &format!("/v1/sessions/{}", ids[0]), None).0, 404);
}

#[test]
fn a_turn_on_a_stale_version_is_a_409_and_changes_nothing() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    assert_eq!(client.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": BOOK, "version": 1 })).0, 200);
    let (status, stale) = client.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "yes", "version": 1 }));
    assert_eq!((status, code(&stale)), (409, "version_conflict"), "{stale}");
    let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(shown["turns"], 1, "the refused turn left nothing: {shown}");
    assert_eq!(client.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "yes", "version": 2 })).0, 200);
}

/// A request, its status and error code, and a word its message must say.
type Case = (reqwest::Method, &'static str, Option<&'static str>, u16, &'static str, &'static str);

#[test]
fn errors_are_json_with_stable_codes_and_name_the_field() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let cases: Vec<Case> = vec![
        (reqwest::Method::POST, "/v1/sessions", Some(r#"{"program": "nope"}"#), 404, "program_not_found", "`nope`"),
        (reqwest::Method::POST, "/v1/sessions", Some(r#"{"data": {}}"#), 400, "invalid_body", "`program`"),
        (reqwest::Method::POST, "/v1/sessions", Some(r#"{"program": 7}"#), 400, "invalid_body", "`program`"),
        (
            reqwest::Method::POST,
            "/v1/sessions",
            Some(r#"{"program": "booking", "data": {"guests": "two"}}"#),
            400,
            "invalid_body",
            "`data.guests`",
        ),
        (
            reqwest::Method::POST,
            "/v1/sessions",
            Some(r#"{"program": "booking", "colour": 1}"#),
            400,
            "invalid_body",
            "`colour`",
        ),
        (reqwest::Method::POST, "/v1/sessions", Some(r#"{"program": "onboarding"}"#), 400, "invalid_body", "/v1/runs"),
        (
            reqwest::Method::POST,
            "/v1/sessions/open_booking_x/messages",
            Some(r#"{"text": "hi"}"#),
            404,
            "session_not_found",
            "open_booking_x",
        ),
        (
            reqwest::Method::POST,
            "/v1/sessions/open_booking_x/messages",
            Some(r#"{"txt": "hi"}"#),
            400,
            "invalid_body",
            "`txt`",
        ),
        (reqwest::Method::GET, "/v1/sessions/someone-elses", None, 404, "session_not_found", "someone-elses"),
        (reqwest::Method::GET, "/v1/runs/open_onboarding_x", None, 404, "run_not_found", "open_onboarding_x"),
        (reqwest::Method::GET, "/v2/anything", None, 404, "route_not_found", "/v2/anything"),
        (reqwest::Method::PUT, "/v1/sessions", None, 405, "method_not_allowed", "PUT"),
    ];
    for (method, path, body, status, expected_code, mentions) in cases {
        let (got, error) = client.send(method.clone(), path, body);
        assert_eq!((got, code(&error)), (status, expected_code), "{method} {path} {body:?}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(mentions), "{method} {path}: `{message}` should mention {mentions}");
    }
}

#[test]
fn a_tenant_sees_only_its_own_sessions() {
    let server = start(&options(tenants()));
    let acme = Client::new(server.addr, Some(TOKEN_ACME));
    let globex = Client::new(server.addr, Some(TOKEN_GLOBEX));
    let id = acme.new_session();
    assert!(id.starts_with("acme_booking_"), "{id}");
    assert_eq!(acme.get(&format!("/v1/sessions/{id}")).0, 200);
    for (status, body) in [
        globex.get(&format!("/v1/sessions/{id}")),
        globex.say(&id, BOOK),
        globex.send(reqwest::Method::DELETE, &format!("/v1/sessions/{id}"), None),
    ] {
        assert_eq!((status, code(&body)), (404, "session_not_found"), "{body}");
    }
    let (_, listed) = globex.get("/v1/sessions");
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    let (_, listed) = acme.get("/v1/sessions");
    assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(1), "{listed}");

    let anonymous = Client::new(server.addr, None);
    let (status, refused) = anonymous.get(&format!("/v1/sessions/{id}"));
    assert_eq!((status, code(&refused)), (401, "unauthorized"));
    let wrong = Client::new(server.addr, Some("not-a-token-of-this-server"));
    assert_eq!(wrong.get("/v1/sessions").0, 401);
    assert_eq!(anonymous.get("/healthz").0, 200, "health needs no token");
}

#[test]
fn a_streamed_turn_sends_the_text_then_the_events_then_the_turn() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    let response = client
        .request(reqwest::Method::POST, &format!("/v1/sessions/{id}/messages"))
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(json!({ "text": BOOK }).to_string())
        .send()
        .expect("the server answers");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers().get("content-type").and_then(|value| value.to_str().ok()), Some("text/event-stream"));
    let events = read_events(response);
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    let first_event = kinds.iter().position(|kind| *kind == "event").expect("events");
    assert!(kinds[..first_event].iter().all(|kind| *kind == "text") && first_event > 0, "{kinds:?}");
    assert!(kinds[first_event..kinds.len() - 1].iter().all(|kind| *kind == "event"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"turn"));
    let text: String = events
        .iter()
        .filter(|(kind, _)| kind == "text")
        .map(|(_, data)| {
            serde_json::from_str::<Value>(data).expect("json")["text"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    let turn: Value = serde_json::from_str(&events.last().expect("a turn").1).expect("the turn object");
    assert!(text.ends_with(turn["reply"].as_str().unwrap_or("(none)")), "streamed `{text}` vs reply {turn}");
    let first: Value = serde_json::from_str(&events[first_event].1).expect("an event");
    assert_eq!(first["event"], "turn_started");
    let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(shown["turns"], 1, "the streamed turn was committed");
}

#[test]
fn the_openapi_document_describes_every_route_and_each_answers() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let (status, document) = client.get("/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document.get("x-undocumented"), None);
    let paths = document["paths"].as_object().expect("paths");
    let mut operations = 0;
    for (path, methods) in paths {
        for method in methods.as_object().expect("methods").keys() {
            operations += 1;
            let concrete =
                path.replace("{id}", "open_booking_00000000-0000-4000-8000-000000000000").replace("{name}", "booking");
            let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("a method");
            let (_, answer) = client.send(method.clone(), &concrete, Some("{}"));
            assert!(
                !matches!(code(&answer), "route_not_found" | "method_not_allowed"),
                "{method} {path} is documented but not routed: {answer}"
            );
        }
    }
    assert_eq!(operations, flowc::serve::operations().len());
    assert!(paths.contains_key("/v1/programs/{name}/graph"), "the playground's graph route is the API's too");
}

#[test]
fn metrics_count_turns_tokens_and_latency() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    client.say(&id, BOOK);
    let text = client.request(reqwest::Method::GET, "/metrics").send().expect("metrics").text().expect("text");
    for line in [
        "flowc_turns_total 1\n",
        "flowc_sessions_open 1\n",
        "flowc_turn_duration_seconds_count 1\n",
        "flowc_sessions_created_total 1\n",
    ] {
        assert!(text.contains(line), "no `{}` in\n{text}", line.trim());
    }
    let calls =
        text.lines().find_map(|line| line.strip_prefix("flowc_model_calls_total ")).and_then(|n| n.parse::<u64>().ok());
    assert!(calls.is_some_and(|calls| calls >= 1), "{text}");
}

#[test]
fn an_edited_program_is_served_at_once_and_a_broken_edit_is_refused_with_the_reason() {
    let dir = crate::support::temp_dir(&format!("serve-reload-{}", crate::support::unique()));
    let file = dir.join("booking.flow");
    let original = std::fs::read_to_string(root().join("flows/booking.flow")).expect("the example");
    std::fs::write(&file, &original).expect("a copy");
    // Its tools run from its folder.
    std::fs::create_dir_all(dir.join("tools")).expect("a tools folder");
    for entry in std::fs::read_dir(root().join("flows/tools")).expect("the example's tools") {
        let path = entry.expect("a tool").path();
        std::fs::copy(&path, dir.join("tools").join(path.file_name().expect("a name"))).expect("a tool copied");
    }
    let mut options = options(Auth::default());
    options.files = vec![file.clone()];
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    assert_eq!(client.say(&id, BOOK).0, 200);

    let reworded = original.replace("Booked! Your confirmation number is", "Done! Your booking number is");
    assert_ne!(reworded, original);
    std::fs::write(&file, &reworded).expect("an edit");
    let (status, turn) = client.say(&id, "yes");
    assert_eq!(status, 200, "{turn}");
    assert!(turn["reply"].as_str().is_some_and(|reply| reply.starts_with("Done! Your booking number is")), "{turn}");

    std::fs::write(&file, format!("{reworded}\nflow broken {{ step s {{ goto_step nowhere }} }}\n"))
        .expect("a bad edit");
    let (_, programs) = client.get("/v1/programs");
    let reason = programs["programs"][0]["reload_error"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("error") && reason.contains("flowc check"), "{programs}");
    let other = client.new_session();
    let (status, turn) = client.say(&other, BOOK);
    assert_eq!(
        (status, turn["step"].as_str()),
        (200, Some("confirm")),
        "the version before the bad edit serves: {turn}"
    );
}

#[test]
fn a_programs_test_coverage_is_what_flowc_test_reports_laid_on_its_graph() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let (status, coverage) = client.get("/v1/programs/booking/coverage");
    assert_eq!(status, 200, "{coverage}");
    assert_eq!(coverage["files"], json!(["booking.test.yaml"]), "only the file naming booking.flow: {coverage}");
    assert_eq!(coverage["failed"], 0, "{coverage}");
    assert!(coverage["cases"].as_u64().is_some_and(|cases| cases >= 2), "{coverage}");
    let flow = &coverage["flows"][0];
    assert_eq!(flow["flow"], "booking", "{coverage}");
    assert_eq!(flow["steps"]["reached"], flow["steps"]["total"], "every step is reached: {coverage}");
    assert_eq!(flow["missed"], json!([]), "{coverage}");

    // Node ids and edge indices are the graph route's.
    let (_, graph) = client.get("/v1/programs/booking/graph");
    let ids: Vec<&str> =
        graph["nodes"].as_array().expect("nodes").iter().filter_map(|node| node["id"].as_str()).collect();
    let steps: Vec<&str> = graph["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|node| node["step"].is_string())
        .filter_map(|node| node["id"].as_str())
        .collect();
    let reached: Vec<&str> = coverage["nodes"].as_array().expect("nodes").iter().filter_map(Value::as_str).collect();
    assert!(reached.iter().all(|id| ids.contains(id)), "{reached:?} not all in {ids:?}");
    assert!(steps.iter().all(|id| reached.contains(id)), "every step node reached: {steps:?}, {reached:?}");
    let edges = graph["edges"].as_array().expect("edges").len() as u64;
    let taken = coverage["edges"].as_array().expect("edges");
    assert!(!taken.is_empty() && taken.iter().all(|index| index.as_u64().is_some_and(|index| index < edges)));

    // What `flowc test --coverage` prints for the same file.
    let printed = stdout(&flowc_in(root(), &["test", "flows/booking.test.yaml", "--coverage"], None));
    let total = flow["steps"]["total"].as_u64().unwrap_or(0);
    assert!(printed.contains(&format!("{total}/{total} 100%")), "{printed}");

    let (status, missing) = client.get("/v1/programs/nothing/coverage");
    assert_eq!((status, code(&missing)), (404, "program_not_found"), "{missing}");
}
