//! Grounded understanding end to end, through the real binary: the
//! conversations of issue 12 on the offline provider, and a weak model's
//! inventions recorded from a fake OpenAI-compatible server and replayed.
//! A model that proposes what the user did not say makes flowc ask again,
//! never act.

#![allow(clippy::unwrap_used)]

use crate::fake::{self, Facts, FakeServer};
use crate::support::{flowc_env, root, stderr, stdout, temp_dir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The script the real local model booked six times with.
const SEVEN_TURNS: [&str; 7] = [
    "Hi, I'd like to book a hotel room",
    "The Grand Hotel, please",
    "2026-12-04",
    "2 guests",
    "yes",
    "thanks",
    "what was the date again?",
];

fn write_script(dir: &Path, lines: &[&str]) -> PathBuf {
    let path = dir.join("script.txt");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn run(program: &str, script: &Path, args: &[&str]) -> std::process::Output {
    let program = root().join(program).to_string_lossy().into_owned();
    let script = script.to_string_lossy().into_owned();
    let mut all = vec!["run", program.as_str(), "--script", script.as_str(), "--json"];
    all.extend(args);
    flowc_env(root(), &all, &[("FLOWC_NOW", "2026-01-05T10:00:00Z"), ("OPENAI_API_KEY", "test-key")], WAIT)
}

fn turns(output: &std::process::Output) -> Vec<Value> {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The turns (1-based) whose executed steps include `step`.
fn turns_running(turns: &[Value], step: &str) -> Vec<u64> {
    turns
        .iter()
        .filter(|turn| turn["executed_steps"].as_array().unwrap().iter().any(|ran| ran == step))
        .map(|turn| turn["turn"].as_u64().unwrap())
        .collect()
}

#[test]
fn offline_the_seven_turn_script_books_once_on_yes() {
    let dir = temp_dir("grounding-seven");
    let script = write_script(&dir, &SEVEN_TURNS);
    for program in ["flows/booking.flow", "flows/booking.yaml"] {
        let turns = turns(&run(program, &script, &[]));
        assert_eq!(turns_running(&turns, "book"), [5], "{program}");
        assert_eq!(turns[3]["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    }
}

#[test]
fn offline_consent_in_the_first_message_is_not_taken_ahead() {
    let dir = temp_dir("grounding-consent");
    let script = write_script(&dir, &["Book the Grand Hotel for 2 guests on 2026-12-04, yes go ahead", "yes"]);
    let turns = turns(&run("flows/booking.flow", &script, &[]));
    assert_eq!(turns[0]["step"], "confirm");
    assert_eq!(turns[0]["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert!(turns[0]["data"].get("confirmed").is_none(), "{}", turns[0]["data"]);
    assert_eq!(turns_running(&turns, "book"), [2]);
}

#[test]
fn offline_an_email_at_the_email_step_is_read_by_code() {
    let dir = temp_dir("grounding-email");
    let script = write_script(&dir, &["Hello, I need help", "my email is ann@example.com"]);
    let turns = turns(&run("flows/support.yaml", &script, &[]));
    assert_eq!(turns[1]["data"]["email"], "ann@example.com");
    assert_eq!(turns[1]["step"], "ask_issue");
}

#[test]
fn offline_lists_are_read_from_enumerations() {
    let dir = temp_dir("grounding-lists");
    let program = dir.join("pizza.flow");
    std::fs::write(
        &program,
        "schema { toppings: list(string) }\n\
         flow order \"Order a pizza\" {\n  when \"the user wants a pizza\"\n  \
         step ask { prompt \"Which toppings?\" collect toppings }\n  \
         step done { say \"A pizza with {{toppings}}.\" }\n}\n",
    )
    .unwrap();
    let script = write_script(&dir, &["I want a pizza", "ham, olives and mushrooms please"]);
    let turns = turns(&run(&program.to_string_lossy(), &script, &[]));
    assert_eq!(turns[1]["data"]["toppings"], json!(["ham", "olives", "mushrooms"]));
}

/// What the weak local model answered on the seven-turn script, as cited
/// proposals: besides the hotel, turn 2 invents today's date and 3 guests,
/// citing words that do not say them or none; turn 3 reads 3 guests into
/// a date; turn 4 cites a word the message does not have.
fn weak_model() -> Facts {
    let cited = |evidence: Value, value: Value| json!({"evidence": evidence, "value": value});
    Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
        (
            "The Grand Hotel, please",
            json!({"fields": {
                "hotel": cited(json!("The Grand Hotel"), json!("Grand Hotel")),
                "date": cited(json!("please"), json!("2026-01-05")),
                "guests": cited(Value::Null, json!(3)),
            }}),
        ),
        ("2026-12-04", json!({"fields": {"guests": cited(json!("2026-12-04"), json!(3))}})),
        ("2 guests", json!({"fields": {"guests": 2, "hotel": cited(json!("Overlook"), json!("Overlook"))}})),
        ("yes", json!({"fields": {"confirmed": true}})),
    ])
}

#[test]
fn replayed_a_weak_model_asks_again_and_books_only_on_yes() {
    let dir = temp_dir("grounding-weak");
    let script = write_script(&dir, &SEVEN_TURNS);
    let recording = dir.join("weak.rec.json");
    let recorded = {
        let server = FakeServer::start(fake::openai(weak_model()));
        let base_url = format!("{}/v1", server.url);
        let record = recording.to_string_lossy().into_owned();
        run("flows/booking.flow", &script, &["--provider", "openai", "--base-url", &base_url, "--record", &record])
    };
    let live = turns(&recorded);
    let steps: Vec<&str> = live.iter().map(|turn| turn["step"].as_str().unwrap_or("-")).collect();
    assert_eq!(steps, ["ask_hotel", "ask_date", "ask_guests", "confirm", "-", "-", "-"]);
    assert_eq!(live[2]["data"], json!({"hotel": "Grand Hotel", "date": "2026-12-04"}), "no invented value written");
    assert_eq!(live[3]["data"]["hotel"], "Grand Hotel");
    assert_eq!(turns_running(&live, "book"), [5]);

    // Only the turn answering the confirm step asked the model for consent.
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let asking_consent: Vec<&str> = file["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|call| call["kind"] == "understand")
        .filter(|call| call["request"]["fields"].as_array().unwrap().iter().any(|field| field["name"] == "confirmed"))
        .map(|call| call["request"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(asking_consent, ["yes"]);

    let replay = format!("replay:{}", recording.to_string_lossy());
    let replayed = run("flows/booking.flow", &script, &["--provider", &replay]);
    assert_eq!(stdout(&replayed), stdout(&recorded), "the replay gives the same turns");
}
