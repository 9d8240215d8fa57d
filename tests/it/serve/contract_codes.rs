//! Every error code the server's sources can answer, each produced through
//! a real condition (a tool that exits non-zero, a model server answering
//! 500, a provider that cannot be built, a store made read-only or damaged,
//! a program edited incompatibly, a run held by its step, ids the store
//! cannot hold, two servers sharing a seed of ids), and held to the
//! contract: the status is documented for the route and method in `GET
//! /openapi.json`, and the body validates against the documented schema,
//! whose enum lists the route's codes. A last test reads the codes out of
//! `src/serve` and fails on any that is neither driven here (or in
//! `contract.rs`) nor listed as unreachable with its reason.

use super::contract::{Answer, assert_documented, send};
use super::schema::problems;
use super::{HOLD, HOLD_PY, code, options, start};
use crate::fake::{FakeServer, Reply};
use crate::support::{root, temp_dir, unique};
use flowc::serve::ServeOptions;
use flowc::serve::auth::Auth;
use flowc::store::StoreLocation;
use reqwest::Method;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// Each code the contract tests drive, with the test that does (here or in
/// `contract.rs`): its body must assert the code.
const DRIVEN: &[(&str, &str)] = &[
    ("invalid_body", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("unauthorized", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("body_too_large", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("body_timeout", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("program_not_found", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("session_not_found", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("run_not_found", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("version_conflict", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("too_many_sessions", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("too_many_runs", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("not_due", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("run_ended", "every_answer_of_every_route_is_documented_with_its_status_and_schema"),
    ("overloaded", "at_the_cap_of_requests_every_route_answers_a_documented_503"),
    ("overloaded", "at_the_cap_of_connections_every_route_health_and_metrics_included_answers_a_documented_503"),
    ("route_not_found", "an_unknown_route_and_an_unknown_method_answer_the_codes_the_document_names"),
    ("method_not_allowed", "an_unknown_route_and_an_unknown_method_answer_the_codes_the_document_names"),
    ("not_found", "an_id_the_store_cannot_hold_is_a_documented_404_on_every_route_of_an_id"),
    ("tool_failed", "a_tool_that_fails_in_a_step_that_stops_on_error_is_a_documented_502_tool_failed"),
    ("turn_failed", "a_write_past_its_fields_range_in_a_step_that_stops_on_error_is_a_documented_500_turn_failed"),
    ("model_failed", "a_model_server_answering_500_is_a_documented_502_model_failed"),
    ("model_unavailable", "a_provider_that_cannot_be_built_is_a_502_for_a_turn_and_for_a_run_that_asks_the_model"),
    ("internal", "two_servers_sharing_a_seed_of_ids_run_out_of_new_ids_with_a_documented_500"),
    ("run_busy", "a_run_resumed_while_its_step_runs_is_a_documented_409_run_busy"),
    ("incompatible_program", "a_session_and_a_run_whose_version_is_nowhere_are_a_documented_409"),
    ("store_unavailable", "a_read_only_store_is_a_documented_503_on_every_route_that_writes"),
    ("store_corrupt", "damaged_rows_are_a_documented_500_on_the_routes_that_read_them"),
];

/// Each code the sources hold that no request can produce, and why.
const UNREACHABLE: &[(&str, &str)] = &[(
    "run_cancelled",
    "`StoreError::RunCancelled` comes only from `stored_run::Execution::execute`, and `runs.rs`'s `execute` \
         takes it as the run's answer (the run as cancelled, 200/201); a cancelled run resumed is `run_ended` \
         (its status has ended) and one cancelled between resume's read and its claim is `run_busy` (the claim \
         takes no cancelled run); see a_run_resumed_while_its_step_runs_is_a_documented_409_run_busy",
)];

fn document(base: &str) -> Value {
    serde_json::from_str(&send(base, &Method::GET, "/openapi.json", None, None).body).expect("the document")
}

/// Asserts `answer` is the error `status` `code`, documented for `method`
/// on `template` with a body that holds to the documented schema.
fn documented_error(document: &Value, method: &Method, template: &str, answer: &Answer, status: u16, code: &str) {
    let what = format!("{method} {template}");
    assert_eq!(answer.status, status, "{what}: {}", answer.body);
    let error: Value = serde_json::from_str(&answer.body).expect("a JSON error");
    assert_eq!(super::code(&error), code, "{what}: {error}");
    assert_documented(document, method, template, answer);
}

/// Sends each of `cases` (method, route, path, body) and asserts each
/// answer is the error `status` `code`, documented for its route.
fn each_documented_error(
    base: &str,
    document: &Value,
    cases: &[(Method, &str, String, Option<Value>)],
    status: u16,
    code: &str,
) {
    for (method, template, path, body) in cases {
        let body = body.as_ref().map(Value::to_string);
        let answer = send(base, method, path, body.as_deref(), None);
        documented_error(document, method, template, &answer, status, code);
    }
}

fn post(base: &str, path: &str, body: &Value) -> Answer {
    send(base, &Method::POST, path, Some(&body.to_string()), None)
}

fn onboarding() -> Value {
    json!({ "program": "onboarding", "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] } })
}

fn created(answer: &Answer, field: &str) -> String {
    let value: Value = serde_json::from_str(&answer.body).expect("JSON");
    value[field].as_str().unwrap_or_else(|| panic!("no `{field}` in {value}")).to_string()
}

/// The examples `names` and their tools, copied into `dir`: their files.
fn examples_in(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir.join("tools")).expect("a tools folder");
    for entry in std::fs::read_dir(root().join("flows/tools")).expect("the examples' tools") {
        let path = entry.expect("a tool").path();
        std::fs::copy(&path, dir.join("tools").join(path.file_name().expect("a name"))).expect("a tool copied");
    }
    names
        .iter()
        .map(|name| {
            let file = dir.join(name);
            std::fs::copy(root().join("flows").join(name), &file).expect("a copy");
            file
        })
        .collect()
}

/// Options of a server on `dir`'s own SQLite store.
fn options_in(dir: &Path, files: Vec<PathBuf>) -> ServeOptions {
    let mut options = options(Auth::default());
    options.files = files;
    options.store = StoreLocation::Sqlite(dir.join("flowc.db"));
    options
}

#[test]
fn an_unknown_route_and_an_unknown_method_answer_the_codes_the_document_names() {
    let server = start(&options(Auth::default()));
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let error_schema = json!({ "$ref": "#/components/schemas/Error" });
    let description = document["info"]["description"].as_str().expect("a description");
    let unknown = [
        (Method::GET, "/v1/nope", 404, "route_not_found"),
        (Method::POST, "/nope", 404, "route_not_found"),
        (Method::PUT, "/v1/sessions", 405, "method_not_allowed"),
        (Method::PATCH, "/v1/runs/open_onboarding_x", 405, "method_not_allowed"),
    ];
    for (method, path, status, expected) in unknown {
        let answer = send(&base, &method, path, None, None);
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.body);
        let error: Value = serde_json::from_str(&answer.body).expect("a JSON error");
        assert_eq!(code(&error), expected, "{error}");
        assert_eq!(problems(&document, &error_schema, &error), Vec::<String>::new(), "{error}");
        // No route to document it under: the document says it once.
        assert!(description.contains(expected), "the document does not name `{expected}`: {description}");
    }
}

#[test]
fn an_id_the_store_cannot_hold_is_a_documented_404_on_every_route_of_an_id() {
    let server = start(&options(Auth::default()));
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    // Owned by the open tenant and naming a served program, so only the
    // store refuses it: a `.` is not in an id.
    let session = "/v1/sessions/open_booking_not.an.id";
    let run = "/v1/runs/open_onboarding_not.an.id";
    let cases = [
        (Method::GET, "/v1/sessions/{id}", session.to_string(), None),
        (Method::DELETE, "/v1/sessions/{id}", session.to_string(), None),
        (Method::POST, "/v1/sessions/{id}/messages", format!("{session}/messages"), Some(json!({ "text": "hi" }))),
        (Method::GET, "/v1/runs/{id}", run.to_string(), None),
        (Method::GET, "/v1/runs/{id}/events", format!("{run}/events"), None),
        (Method::POST, "/v1/runs/{id}/resume", format!("{run}/resume"), Some(json!({ "now": true }))),
        (Method::POST, "/v1/runs/{id}/cancel", format!("{run}/cancel"), None),
    ];
    each_documented_error(&base, &document, &cases, 404, "not_found");
    // Nor is an id that is not UTF-8 once percent-decoded (axum's own
    // extractor answered it 400 in plain text).
    let undecodable = cases.map(|(method, template, path, body)| {
        let path = path.replace("open_booking_not.an.id", "%FF").replace("open_onboarding_not.an.id", "%C3%28");
        (method, template, path, body)
    });
    each_documented_error(&base, &document, &undecodable, 404, "not_found");
    for template in ["/v1/programs/{name}/graph", "/v1/programs/{name}/coverage"] {
        let answer = send(&base, &Method::GET, &template.replace("{name}", "%FF"), None, None);
        documented_error(&document, &Method::GET, template, &answer, 404, "program_not_found");
    }
}

/// A server on `source` alone (saved as `name`.flow in a directory of its
/// own), its address, its document, and a new session of it.
fn serving(name: &str, source: &str) -> (flowc::serve::Running, String, Value, String) {
    let dir = temp_dir(&format!("serve-codes-{name}-{}", unique()));
    let file = dir.join(format!("{name}.flow"));
    std::fs::write(&file, source).expect("program");
    let server = start(&options_in(&dir, vec![file]));
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let id = created(&post(&base, "/v1/sessions", &json!({ "program": name })), "id");
    (server, base, document, id)
}

/// A conversation whose default flow calls, at once, a tool that exits 1,
/// in a step that stops on error.
const FAILING: &str = r#"agent Failing {
  identity "A conversation whose tool always fails."
}

schema {
  id: string "What the tool would return"
}

tool broken() -> { id: string } {
  description "Exits 1."
  exec "false"
}

flow chat "Chat" {
  default
  auto step call_it {
    call broken() -> id
    on_error stop
  }
  step done { say "Done {{id}}." }
}
"#;

#[test]
fn a_tool_that_fails_in_a_step_that_stops_on_error_is_a_documented_502_tool_failed() {
    let (_server, base, document, id) = serving("failing", FAILING);
    let template = "/v1/sessions/{id}/messages";
    let answer = post(&base, &format!("/v1/sessions/{id}/messages"), &json!({ "text": "hello" }));
    documented_error(&document, &Method::POST, template, &answer, 502, "tool_failed");
    assert!(answer.body.contains("`broken` failed"), "the message names the tool: {}", answer.body);
    let shown = send(&base, &Method::GET, &format!("/v1/sessions/{id}"), None, None);
    let shown: Value = serde_json::from_str(&shown.body).expect("the session");
    assert_eq!(shown["turns"], 0, "the failed turn left nothing: {shown}");

    // Asked for as server-sent events, the same failure is the stream's
    // last event, `error`, holding to the 500's documented schema.
    let streamed = reqwest::blocking::Client::new()
        .post(format!("{base}/v1/sessions/{id}/messages"))
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(json!({ "text": "hello" }).to_string())
        .send()
        .expect("the server answers");
    assert_eq!(streamed.status().as_u16(), 200);
    let events = super::read_events(streamed);
    let (kind, data) = events.last().expect("events");
    assert_eq!(kind, "error", "{events:?}");
    let error: Value = serde_json::from_str(data).expect("a JSON error");
    assert_eq!(code(&error), "tool_failed", "{error}");
    let schema = &document["paths"][template]["post"]["responses"]["502"]["content"]["application/json"]["schema"];
    assert_eq!(problems(&document, schema, &error), Vec::<String>::new(), "{error}");
}

/// A program whose auto step writes past its field's range and stops on
/// that error.
const OVERFLOWING: &str = r#"
schema {
  n: int "How many" 1..5
}

flow chat "Chat" {
  default
  step ask {
    prompt "How many?"
    collect n
  }
  auto step grow {
    set n = n + 10
    on_error stop
  }
  step done { say "Done {{n}}." }
}
"#;

#[test]
fn a_write_past_its_fields_range_in_a_step_that_stops_on_error_is_a_documented_500_turn_failed() {
    let (_server, base, document, id) = serving("overflowing", OVERFLOWING);
    let path = format!("/v1/sessions/{id}/messages");
    let asked = post(&base, &path, &json!({ "text": "hello" }));
    assert_eq!(asked.status, 200, "{}", asked.body);
    let answer = post(&base, &path, &json!({ "text": "3" }));
    documented_error(&document, &Method::POST, "/v1/sessions/{id}/messages", &answer, 500, "turn_failed");
    assert!(answer.body.contains("cannot write `n`"), "the message names the field: {}", answer.body);
    let shown: Value =
        serde_json::from_str(&send(&base, &Method::GET, &format!("/v1/sessions/{id}"), None, None).body).expect("json");
    assert_eq!(shown["turns"], 1, "the failed turn left nothing: {shown}");
}

#[test]
fn a_model_server_answering_500_is_a_documented_502_model_failed() {
    let model = FakeServer::start(Arc::new(|_, _| {
        Reply::json(500, &json!({ "error": { "message": "the model is down", "type": "server_error" } }))
    }));
    let mut options = options(Auth::default());
    options.settings.provider_flags.provider = Some("openai".into());
    options.settings.provider_flags.base_url = Some(format!("{}/v1", model.url));
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let id = created(&post(&base, "/v1/sessions", &json!({ "program": "booking" })), "id");
    let answer = post(&base, &format!("/v1/sessions/{id}/messages"), &json!({ "text": BOOK }));
    documented_error(&document, &Method::POST, "/v1/sessions/{id}/messages", &answer, 502, "model_failed");
    assert!(!model.requests().is_empty(), "the model server was asked");
}

#[test]
fn a_provider_that_cannot_be_built_is_a_502_for_a_turn_and_for_a_run_that_asks_the_model() {
    // A recording to replay that is not there: the provider is built
    // (and fails) at a turn's or run's first need of it.
    let dir = temp_dir(&format!("serve-codes-replay-{}", unique()));
    let flows = ["booking", "onboarding", "outreach"].map(|name| root().join(format!("flows/{name}.flow")));
    let mut options = options_in(&dir, flows.to_vec());
    options.settings.provider_flags.provider = Some(format!("replay:{}", dir.join("missing.jsonl").display()));
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let id = created(&post(&base, "/v1/sessions", &json!({ "program": "booking" })), "id");
    let answer = post(&base, &format!("/v1/sessions/{id}/messages"), &json!({ "text": BOOK }));
    documented_error(&document, &Method::POST, "/v1/sessions/{id}/messages", &answer, 502, "model_unavailable");
    // A run none of whose steps asks the model runs without one.
    let answer = post(
        &base,
        "/v1/runs",
        &json!({
            "program": "onboarding",
            "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] }
        }),
    );
    assert_eq!(answer.status, 201, "{}", answer.body);
    // One that asks it is refused before it is stored or claimed.
    let contacts = json!([{ "name": "Ann", "email": "ann@example.com" }]);
    let answer = post(&base, "/v1/runs", &json!({ "program": "outreach", "data": { "contacts": contacts } }));
    documented_error(&document, &Method::POST, "/v1/runs", &answer, 502, "model_unavailable");
    assert!(answer.body.contains("no model for the model steps"), "{}", answer.body);
    drop(server);
    let store = flowc::store::open(&StoreLocation::Sqlite(dir.join("flowc.db"))).expect("the store");
    let programs: Vec<String> = store.list_runs().expect("runs").into_iter().map(|run| run.program).collect();
    assert_eq!(programs.len(), 1, "only onboarding's run is stored: {programs:?}");
    assert!(programs.iter().all(|program| program.ends_with("onboarding.flow")), "{programs:?}");
}

#[test]
fn two_servers_sharing_a_seed_of_ids_run_out_of_new_ids_with_a_documented_500() {
    let dir = temp_dir(&format!("serve-codes-seed-{}", unique()));
    let seeded = || {
        let mut options = options_in(&dir, vec![root().join("flows/booking.flow")]);
        let (clock, ids) =
            flowc::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), Some("shared")).expect("clock");
        options.settings.clock = clock;
        options.settings.ids = ids;
        options
    };
    let first = start(&seeded());
    let first_base = format!("http://{}", first.addr);
    // A server tries 100 ids of its sequence before it gives up: the first
    // server takes them all.
    for _ in 0..100 {
        let answer = post(&first_base, "/v1/sessions", &json!({ "program": "booking" }));
        assert_eq!(answer.status, 201, "{}", answer.body);
    }
    let second = start(&seeded());
    let base = format!("http://{}", second.addr);
    let answer = post(&base, "/v1/sessions", &json!({ "program": "booking" }));
    documented_error(&document(&base), &Method::POST, "/v1/sessions", &answer, 500, "internal");
    assert!(answer.body.contains("every new session id tried was taken"), "{}", answer.body);
}

#[test]
fn a_run_resumed_while_its_step_runs_is_a_documented_409_run_busy() {
    let dir = temp_dir(&format!("serve-codes-busy-{}", unique()));
    std::fs::write(dir.join("hold.flow"), HOLD).expect("program");
    std::fs::write(dir.join("hold.py"), HOLD_PY).expect("tool");
    let server = start(&options_in(&dir, vec![dir.join("hold.flow")]));
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let holder = {
        let base = base.clone();
        std::thread::spawn(move || post(&base, "/v1/runs", &json!({ "program": "hold" })))
    };
    while !dir.join("started").exists() {
        // A run that fails before its step starts never writes the file:
        // its answer is the failure, not a hang.
        if holder.is_finished() {
            panic!("the run ended before its step started: {:?}", holder.join().map(|answer| answer.body));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // No route lists runs: the one run is read from the store.
    let run: String = rusqlite::Connection::open(dir.join("flowc.db"))
        .and_then(|db| db.query_row("SELECT id FROM runs", [], |row| row.get(0)))
        .expect("the one run");
    let answer = post(&base, &format!("/v1/runs/{run}/resume"), &json!({ "now": true }));
    documented_error(&document, &Method::POST, "/v1/runs/{id}/resume", &answer, 409, "run_busy");

    // Cancelled while its step runs: the step's save is refused, and the
    // request that started it answers the run as cancelled, not an error
    // (which is why `run_cancelled` is never answered).
    let cancelled = post(&base, &format!("/v1/runs/{run}/cancel"), &json!({}));
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    std::fs::write(dir.join("release"), "").expect("release");
    let held = holder.join().expect("the held request");
    assert_eq!(held.status, 201, "{}", held.body);
    assert_documented(&document, &Method::POST, "/v1/runs", &held);
    let held: Value = serde_json::from_str(&held.body).expect("the run");
    assert_eq!(held["status"], "cancelled", "{held}");
    let again = post(&base, &format!("/v1/runs/{run}/resume"), &json!({ "now": true }));
    documented_error(&document, &Method::POST, "/v1/runs/{id}/resume", &again, 409, "run_ended");
}

#[test]
fn a_session_and_a_run_whose_version_is_nowhere_are_a_documented_409() {
    let dir = temp_dir(&format!("serve-codes-versions-{}", unique()));
    let files = examples_in(&dir, &["booking.flow", "onboarding.flow"]);
    let (session, run) = {
        let first = start(&options_in(&dir, files.clone()));
        let base = format!("http://{}", first.addr);
        let session = created(&post(&base, "/v1/sessions", &json!({ "program": "booking" })), "id");
        let turn = post(&base, &format!("/v1/sessions/{session}/messages"), &json!({ "text": BOOK }));
        let turn: Value = serde_json::from_str(&turn.body).expect("a turn");
        assert_eq!(turn["step"], "confirm", "{turn}");
        let run = post(&base, "/v1/runs", &onboarding());
        let run: Value = serde_json::from_str(&run.body).expect("a run");
        assert_eq!(run["status"], "waiting", "{run}");
        (session, run["run"].as_str().expect("a run id").to_string())
    };
    // Edits the session cannot follow (its step is gone) and the run
    // cannot either (a run goes on only with its own version); and the
    // versions they started on, gone from the store too.
    for (file, from, to) in [(&files[0], "step confirm {", "step check {"), (&files[1], "wait 1d", "wait 2d")] {
        let text = std::fs::read_to_string(file).expect("the program");
        assert!(text.contains(from), "{}", file.display());
        std::fs::write(file, text.replace(from, to)).expect("an edit");
    }
    let db = rusqlite::Connection::open(dir.join("flowc.db")).expect("the store");
    let removed = db.execute("DELETE FROM program_versions", []).expect("the versions removed");
    assert_eq!(removed, 2, "one version of each program was recorded");
    drop(db);

    let second = start(&options_in(&dir, files));
    let base = format!("http://{}", second.addr);
    let document = document(&base);
    let answer = post(&base, &format!("/v1/sessions/{session}/messages"), &json!({ "text": "yes" }));
    documented_error(&document, &Method::POST, "/v1/sessions/{id}/messages", &answer, 409, "incompatible_program");
    let answer = post(&base, &format!("/v1/runs/{run}/resume"), &json!({ "now": true }));
    documented_error(&document, &Method::POST, "/v1/runs/{id}/resume", &answer, 409, "incompatible_program");
}

#[test]
fn a_read_only_store_is_a_documented_503_on_every_route_that_writes() {
    let dir = temp_dir(&format!("serve-codes-readonly-{}", unique()));
    let options = options_in(&dir, vec![root().join("flows/booking.flow"), root().join("flows/onboarding.flow")]);
    let (session, waiting, other) = {
        let server = start(&options);
        let base = format!("http://{}", server.addr);
        let session = created(&post(&base, "/v1/sessions", &json!({ "program": "booking" })), "id");
        (
            session,
            created(&post(&base, "/v1/runs", &onboarding()), "run"),
            created(&post(&base, "/v1/runs", &onboarding()), "run"),
        )
    };
    let file = dir.join("flowc.db");
    let mut permissions = std::fs::metadata(&file).expect("the store's file").permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&file, permissions).expect("made read-only");

    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let refused = [
        (Method::POST, "/v1/sessions", "/v1/sessions".to_string(), Some(json!({ "program": "booking" }))),
        (
            Method::POST,
            "/v1/sessions/{id}/messages",
            format!("/v1/sessions/{session}/messages"),
            Some(json!({ "text": BOOK })),
        ),
        (Method::DELETE, "/v1/sessions/{id}", format!("/v1/sessions/{session}"), None),
        (Method::POST, "/v1/runs", "/v1/runs".to_string(), Some(onboarding())),
        (Method::POST, "/v1/runs/{id}/resume", format!("/v1/runs/{waiting}/resume"), Some(json!({ "now": true }))),
        (Method::POST, "/v1/runs/{id}/cancel", format!("/v1/runs/{other}/cancel"), None),
    ];
    each_documented_error(&base, &document, &refused, 503, "store_unavailable");
}

#[test]
fn damaged_rows_are_a_documented_500_on_the_routes_that_read_them() {
    let dir = temp_dir(&format!("serve-codes-damaged-{}", unique()));
    let options = options_in(&dir, vec![root().join("flows/booking.flow"), root().join("flows/onboarding.flow")]);
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    let session = created(&post(&base, "/v1/sessions", &json!({ "program": "booking" })), "id");
    let run = created(&post(&base, "/v1/runs", &onboarding()), "run");
    let db = rusqlite::Connection::open(dir.join("flowc.db")).expect("the store");
    let damaged = db
        .execute("UPDATE runs SET state = '{\"run\": 7}' WHERE id = ?1", [&run])
        .and_then(|runs| Ok(runs + db.execute("UPDATE sessions SET version = 9 WHERE id = ?1", [&session])?));
    assert_eq!(damaged.ok(), Some(2), "one run and one session damaged");
    drop(db);
    // The server's cache holds the session as it made it: a second server
    // on the store reads the damaged row.
    let second = start(&options);
    let base = format!("http://{}", second.addr);
    let cases = [
        (
            Method::POST,
            "/v1/sessions/{id}/messages",
            format!("/v1/sessions/{session}/messages"),
            Some(json!({ "text": "hi" })),
        ),
        (Method::POST, "/v1/runs/{id}/resume", format!("/v1/runs/{run}/resume"), Some(json!({ "now": true }))),
        (Method::POST, "/v1/runs/{id}/cancel", format!("/v1/runs/{run}/cancel"), None),
    ];
    each_documented_error(&base, &document, &cases, 500, "store_corrupt");
}

#[test]
fn at_the_cap_of_connections_every_route_health_and_metrics_included_answers_a_documented_503() {
    let mut options = options(Auth::default());
    options.caps.connections = Some(1);
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let document = document(&base);
    // The document's own connection is closed by now or soon: one kept
    // connection, answered once so that it is surely the one held.
    let kept = loop {
        let mut stream = std::net::TcpStream::connect(server.addr).expect("connects");
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).expect("a read timeout");
        stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n").expect("sent");
        let mut reader = std::io::BufReader::new(stream.try_clone().expect("a clone"));
        let mut status = String::new();
        reader.read_line(&mut status).expect("the answer");
        if status.starts_with("HTTP/1.1 200") {
            break stream;
        }
        assert!(status.starts_with("HTTP/1.1 503"), "{status}");
        std::thread::yield_now();
    };
    let operations: Vec<(Method, String)> = document["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, methods)| {
            methods.as_object().expect("methods").keys().map(move |method| {
                (Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("a method"), path.clone())
            })
        })
        .collect();
    assert!(operations.iter().any(|(_, path)| path == "/healthz"), "{operations:?}");
    for (method, template) in operations {
        let path = template.replace("{id}", "open_booking_x").replace("{name}", "booking");
        let answer = send(&base, &method, &path, Some("{}"), None);
        documented_error(&document, &method, &template, &answer, 503, "overloaded");
    }
    drop(kept);
}

/// Every code the sources of `serve` can answer: each `ApiError::new`'s,
/// each `with_code`'s and each `code: "…"` of an `ApiError` written whole.
fn codes_in_the_sources() -> std::collections::BTreeSet<String> {
    let new = regex::Regex::new(r#"ApiError::new\(\s*[^,()]+,\s*"(\w+)""#).expect("a pattern");
    let renamed = regex::Regex::new(r#"with_code\("(\w+)"\)"#).expect("a pattern");
    let literal = regex::Regex::new(r#"\bcode:\s*"(\w+)""#).expect("a pattern");
    let mut folders = vec![root().join("src/serve")];
    let mut codes = std::collections::BTreeSet::new();
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a folder of the sources") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                // Unit tests name codes they construct, not ones answered.
                let text = text.split("#[cfg(test)]").next().unwrap_or_default();
                for pattern in [&new, &renamed, &literal] {
                    codes.extend(pattern.captures_iter(text).map(|capture| capture[1].to_string()));
                }
            }
        }
    }
    codes
}

/// The text of the test function `name` in `source`, if it has one.
fn test_body<'a>(source: &'a str, name: &str) -> Option<&'a str> {
    let start = source.find(&format!("\nfn {name}() {{"))?;
    let rest = &source[start..];
    Some(&rest[..rest.find("\n}\n").unwrap_or(rest.len())])
}

#[test]
fn every_code_the_server_can_answer_is_driven_by_a_contract_test_or_said_unreachable() {
    let codes = codes_in_the_sources();
    assert!(codes.len() > 20, "the sources were read: {codes:?}");
    let sources = [include_str!("contract.rs"), include_str!("contract_codes.rs")];
    for (code, test) in DRIVEN {
        let body = sources.iter().find_map(|source| test_body(source, test));
        let body = body.unwrap_or_else(|| panic!("`{code}` is said driven by `{test}`, which is no contract test"));
        assert!(body.contains(&format!("\"{code}\"")), "`{test}` does not assert `{code}`");
    }
    for code in &codes {
        let driven = DRIVEN.iter().any(|(known, _)| known == code);
        let unreachable = UNREACHABLE.iter().any(|(known, _)| known == code);
        assert!(
            driven || unreachable,
            "`{code}` can be answered but no contract test drives it and it is not listed unreachable with its reason"
        );
        assert!(!(driven && unreachable), "`{code}` is both driven and listed unreachable");
    }
    for (code, _) in DRIVEN.iter().chain(UNREACHABLE) {
        assert!(codes.contains(*code), "`{code}` is listed but no longer in the sources");
    }
}
