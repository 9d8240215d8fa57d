//! The server's own failures, answered as documented and counted: a model
//! that cannot answer is a 502 and a failed turn
//! (`flowc_turns_failed_total`), and a damaged row of the store a 500
//! `store_corrupt` and a store error (`flowc_store_errors_total`).

use super::contract::{assert_documented, send};
use super::{Client, code, options, start};
use crate::support::{temp_dir, unique};
use flowc::serve::auth::Auth;
use reqwest::Method;
use serde_json::{Value, json};

fn metric(client: &Client, name: &str) -> u64 {
    let text = client.request(Method::GET, "/metrics").send().expect("metrics").text().expect("text");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

fn document(base: &str) -> Value {
    serde_json::from_str(&send(base, &Method::GET, "/openapi.json", None, None).body).expect("the document")
}

#[test]
fn a_model_that_cannot_answer_is_a_documented_502_and_a_failed_turn() {
    // A replay of a recording that holds no answer: every model call fails.
    let dir = temp_dir(&format!("serve-replay-{}", unique()));
    let recording = dir.join("empty.jsonl");
    std::fs::write(&recording, "").expect("an empty recording");
    let mut options = options(Auth::default());
    options.settings.provider_flags.provider = Some(format!("replay:{}", recording.display()));
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    let path = format!("/v1/sessions/{id}/messages");
    let answer = send(&base, &Method::POST, &path, Some(&json!({ "text": "Book the Grand Hotel" }).to_string()), None);
    assert_eq!(answer.status, 502, "{}", answer.body);
    let error: Value = serde_json::from_str(&answer.body).expect("a JSON error");
    assert!(matches!(code(&error), "model_failed" | "model_unavailable"), "{error}");
    assert_documented(&document(&base), &Method::POST, "/v1/sessions/{id}/messages", &answer);
    assert_eq!(metric(&client, "flowc_turns_failed_total"), 1);
    assert_eq!(metric(&client, "flowc_turns_total"), 0);
    let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(shown["turns"], 0, "the failed turn left the session as it was: {shown}");
}

#[test]
fn a_damaged_row_is_a_documented_500_and_a_store_error() {
    let options = options(Auth::default());
    let flowc::store::StoreLocation::Sqlite(file) = &options.store else { panic!("a SQLite store") };
    let server = start(&options);
    let base = format!("http://{}", server.addr);
    let client = Client::new(server.addr, None);
    let session = client.new_session();
    let (status, run) =
        client.post("/v1/runs", &json!({ "program": "onboarding", "data": { "company": "Initech", "contacts": [] } }));
    assert_eq!(status, 201, "{run}");
    let run = run["run"].as_str().expect("a run id").to_string();

    let connection = rusqlite::Connection::open(file).expect("the store's database");
    let changed = connection
        .execute("UPDATE runs SET state = '{\"run\": 7}' WHERE id = ?1", [&run])
        .and_then(|runs| Ok(runs + connection.execute("UPDATE sessions SET version = 9 WHERE id = ?1", [&session])?));
    assert_eq!(changed.ok(), Some(2), "one run and one session damaged");

    let document = document(&base);
    let damaged = [
        ("/v1/sessions/{id}", format!("/v1/sessions/{session}")),
        ("/v1/runs/{id}", format!("/v1/runs/{run}")),
        ("/v1/runs/{id}/events", format!("/v1/runs/{run}/events")),
    ];
    for (template, path) in &damaged {
        let answer = send(&base, &Method::GET, path, None, None);
        assert_eq!(answer.status, 500, "{path}: {}", answer.body);
        let error: Value = serde_json::from_str(&answer.body).expect("a JSON error");
        assert_eq!(code(&error), "store_corrupt", "{error}");
        assert_documented(&document, &Method::GET, template, &answer);
    }
    assert_eq!(metric(&client, "flowc_store_errors_total"), damaged.len() as u64);
}
