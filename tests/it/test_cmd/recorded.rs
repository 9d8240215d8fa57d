//! A case recorded against a model server (`flowc test --provider openai
//! --record DIR`, here the fake OpenAI-compatible server on 127.0.0.1
//! playing a weak model) replays as a case with `provider: replay:FILE`,
//! with no server, and pins the grounding behaviour it showed.

use super::{flowc_at, last_line, test_file};
use crate::fake::{self, Facts, FakeServer};
use crate::support::{stderr, stdout};
use serde_json::json;

/// A model that invents a date and a guest count for "The Grand Hotel,
/// please", citing words that do not say them.
fn weak_model() -> Facts {
    let cited = |evidence: serde_json::Value, value: serde_json::Value| json!({"evidence": evidence, "value": value});
    Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
        (
            "The Grand Hotel, please",
            json!({"fields": {
                "hotel": cited(json!("The Grand Hotel"), json!("Grand Hotel")),
                "date": cited(json!("please"), json!("2026-01-05")),
                "guests": cited(serde_json::Value::Null, json!(3)),
            }}),
        ),
    ])
}

const CASE: &str = "tools:\n  book_hotel: { returns: { booking_id: GH-1 } }\ncases:\n  - name: invented values are set aside\n    \
    turns:\n      - user: Hi, I'd like to book a hotel room\n        step: ask_hotel\n      \
    - user: The Grand Hotel, please\n        step: ask_date\n        data: { hotel: Grand Hotel, date: null, guests: null }\n        \
    ungrounded: [date, guests]\n    never: { tool: book_hotel }\n";

#[test]
fn a_case_recorded_against_a_model_server_replays_without_it() {
    let dir = test_file("test-recorded", "booking.flow", CASE);
    {
        let server = FakeServer::start(fake::openai(weak_model()));
        let base_url = format!("{}/v1", server.url);
        let recorded = flowc_at(
            &dir,
            &["test", "--provider", "openai", "--base-url", &base_url, "--model", "weak", "--record", "recordings"],
        );
        assert_eq!(recorded.status.code(), Some(0), "{}{}", stdout(&recorded), stderr(&recorded));
        assert!(!server.requests().is_empty(), "the cases talked to the server");
    }
    let file = dir.join("case.test.yaml");
    let text = std::fs::read_to_string(&file).expect("test file");
    let replaying =
        text.replacen("cases:", "provider: replay:recordings/case-invented-values-are-set-aside.json\ncases:", 1);
    std::fs::write(&file, replaying).expect("written");
    // The server is gone: every answer comes from the recording.
    let replayed = flowc_at(&dir, &["test"]);
    assert_eq!(replayed.status.code(), Some(0), "{}{}", stdout(&replayed), stderr(&replayed));
    assert_eq!(last_line(&stdout(&replayed)), "1 passed, 0 failed");
}

#[test]
fn a_turn_recorded_against_the_real_local_model_replays() {
    // tests/fixtures/test_cmd/booking-smollm2.test.yaml says how it was recorded.
    let output = flowc_at(crate::support::root(), &["test", "tests/fixtures/test_cmd/"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(last_line(&stdout(&output)), "1 passed, 0 failed");
}
