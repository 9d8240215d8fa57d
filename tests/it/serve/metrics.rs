//! `GET /metrics` pinned: tokens add up to the turns' own counts, every
//! model call of a turn lands in the model-call latency histogram, open
//! sessions are the store's count, and a store that refuses to write is
//! counted in `flowc_store_errors_total` (and answered as documented).

use super::contract::{assert_documented, send};
use super::{Client, code, options, start};
use flowc::serve::auth::Auth;
use reqwest::Method;
use serde_json::{Value, json};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// Every sample of the exposition, by its name with its labels.
fn samples(client: &Client) -> std::collections::BTreeMap<String, f64> {
    let text = client.request(Method::GET, "/metrics").send().expect("metrics").text().expect("text");
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("a sample: {line}"));
            (name.to_string(), value.parse().unwrap_or_else(|_| panic!("a number: {line}")))
        })
        .collect()
}

fn sample(samples: &std::collections::BTreeMap<String, f64>, name: &str) -> f64 {
    *samples.get(name).unwrap_or_else(|| panic!("no {name} in {samples:?}"))
}

#[test]
fn tokens_model_call_latencies_and_open_sessions_add_up_to_the_turns() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let before = samples(&client);
    assert_eq!(sample(&before, "flowc_model_call_duration_seconds_count"), 0.0);
    assert_eq!(sample(&before, "flowc_sessions_open"), 0.0);

    let mut turns = Vec::new();
    let ids: Vec<String> = (0..3).map(|_| client.new_session()).collect();
    for id in &ids[..2] {
        for text in [BOOK, "yes"] {
            let (status, turn) = client.say(id, text);
            assert_eq!(status, 200, "{turn}");
            turns.push(turn);
        }
    }
    assert_eq!(client.send(Method::DELETE, &format!("/v1/sessions/{}", ids[2]), None).0, 204);

    let after = samples(&client);
    let sum = |field: &str| -> f64 { turns.iter().map(|turn| turn["tokens"][field].as_f64().unwrap_or(0.0)).sum() };
    let calls: f64 = turns.iter().map(|turn| turn["llm_calls"].as_f64().unwrap_or(0.0)).sum();
    assert!(calls >= 4.0 && sum("prompt") > 0.0, "{turns:?}");
    assert_eq!(sample(&after, "flowc_model_calls_total"), calls);
    assert_eq!(sample(&after, "flowc_tokens_total{kind=\"prompt\"}"), sum("prompt"));
    assert_eq!(sample(&after, "flowc_tokens_total{kind=\"completion\"}"), sum("completion"));
    assert_eq!(sample(&after, "flowc_tokens_total{kind=\"cached\"}"), sum("cached"));
    // One observation per model call the turns counted.
    assert_eq!(sample(&after, "flowc_model_call_duration_seconds_count"), calls);
    assert_eq!(sample(&after, "flowc_model_call_duration_seconds_bucket{le=\"+Inf\"}"), calls);
    assert!(sample(&after, "flowc_model_call_duration_seconds_sum") > 0.0);
    let buckets: Vec<f64> = after
        .iter()
        .filter(|(name, _)| name.starts_with("flowc_model_call_duration_seconds_bucket"))
        .map(|(_, value)| *value)
        .collect();
    assert!(buckets.iter().all(|count| *count <= calls), "cumulative, bounded by the count: {buckets:?}");
    assert_eq!(sample(&after, "flowc_sessions_open"), 2.0, "three created, one deleted");
    assert_eq!(sample(&after, "flowc_store_errors_total"), 0.0);
}

#[test]
fn a_store_that_refuses_writes_is_counted_in_store_errors_and_answered_as_documented() {
    let options = options(Auth::default());
    let flowc::store::StoreLocation::Sqlite(file) = &options.store else { panic!("a SQLite store") };
    let id = {
        let server = start(&options);
        let client = Client::new(server.addr, None);
        let id = client.new_session();
        assert_eq!(client.say(&id, BOOK).0, 200);
        id
    };
    let mut permissions = std::fs::metadata(file).expect("the store's file").permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(file, permissions).expect("made read-only");

    let server = start(&options);
    let client = Client::new(server.addr, None);
    let base = format!("http://{}", server.addr);
    let document: Value =
        serde_json::from_str(&send(&base, &Method::GET, "/openapi.json", None, None).body).expect("doc");
    let (status, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!((status, shown["turns"].as_u64()), (200, Some(1)), "a read-only store still reads: {shown}");
    let refused = [
        (Method::POST, "/v1/sessions", "/v1/sessions".to_string(), json!({ "program": "booking" })),
        (Method::POST, "/v1/sessions/{id}/messages", format!("/v1/sessions/{id}/messages"), json!({ "text": "yes" })),
        (
            Method::POST,
            "/v1/runs",
            "/v1/runs".to_string(),
            json!({ "program": "onboarding", "data": {
            "company": "Initech", "contacts": [] } }),
        ),
    ];
    for (method, template, path, body) in &refused {
        let answer = send(&base, method, path, Some(&body.to_string()), None);
        assert_eq!(answer.status, 503, "{method} {path}: {}", answer.body);
        let error: Value = serde_json::from_str(&answer.body).expect("a JSON error");
        assert_eq!(code(&error), "store_unavailable", "{error}");
        assert_documented(&document, method, template, &answer);
    }
    let text = client.request(Method::GET, "/metrics").send().expect("metrics").text().expect("text");
    let errors = text
        .lines()
        .find_map(|line| line.strip_prefix("flowc_store_errors_total ")?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no flowc_store_errors_total in\n{text}"));
    assert_eq!(errors, refused.len() as u64, "each refused write once: {text}");
    assert!(text.contains("flowc_sessions_open 1\n"), "{text}");
    let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(shown["turns"], 1, "the refused turn left nothing: {shown}");
}
