//! Consent end to end (issue 19): a side effect runs only on an unqualified
//! yes to the question that gates it. The consent cases (shared/consent's
//! and our own) through `scripts/consent-eval.py`, the one classifier the
//! real-model script uses too, and programs where one yes could answer two
//! questions.

#![allow(clippy::unwrap_used)]

use crate::support::{flowc_env, root, stderr, stdout, temp_dir};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);

fn evaluate(case_files: &[&str]) -> Value {
    let script = root().join("scripts/consent-eval.py");
    let mut command = std::process::Command::new("python3");
    command.arg(&script).arg("--flowc").arg(env!("CARGO_BIN_EXE_flowc")).arg("--json").arg("--cases");
    for file in case_files {
        command.arg(root().join("tests/fixtures/consent").join(file));
    }
    let output = command.output().expect("python3 runs the consent evaluation");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.code() == Some(0) || output.status.code() == Some(1),
        "consent-eval failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

fn failures(summary: &Value, class: &str) -> Vec<String> {
    summary["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|case| case["class"] == class && case["pass"] != true)
        .map(|case| format!("{} -> {} {}", case["message"], case["outcome"], case["data"]))
        .collect()
}

fn booked(summary: &Value, class: &str) -> (u64, u64) {
    let row = &summary["counts"][class];
    let total: u64 = row.as_object().unwrap().values().map(|count| count.as_u64().unwrap()).sum();
    (row["booked"].as_u64().unwrap(), total)
}

#[test]
fn no_message_but_a_yes_books_and_every_class_is_answered() {
    let summary = evaluate(&["shared.tsv", "more.tsv"]);
    assert_eq!(summary["unconsented_bookings"], 0, "{summary:#}");
    for class in ["no", "change", "unclear"] {
        assert_eq!(failures(&summary, class), Vec::<String>::new(), "{class}");
    }
    let shared = evaluate(&["shared.tsv"]);
    let (yes_booked, yes_total) = booked(&shared, "yes");
    assert!(yes_booked * 10 >= yes_total * 9, "shared yeses booked: {yes_booked} of {yes_total}");
    assert_eq!(failures(&summary, "yes"), Vec::<String>::new(), "every yes of ours books");
}

fn converse(program: &Path, lines: &[&str]) -> Vec<Value> {
    let dir = temp_dir(&format!("consent-{}", crate::support::unique()));
    let script = dir.join("script.txt");
    std::fs::write(&script, lines.join("\n") + "\n").unwrap();
    let program = program.to_string_lossy().into_owned();
    let script = script.to_string_lossy().into_owned();
    let output = flowc_env(
        root(),
        &["run", &program, "--script", &script, "--json"],
        &[("FLOWC_NOW", "2026-01-05T10:00:00Z")],
        WAIT,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn ran(turn: &Value, step: &str) -> bool {
    turn["executed_steps"].as_array().unwrap().iter().any(|ran| ran == step)
}

#[test]
fn a_yes_to_the_cart_does_not_answer_the_charge() {
    let shop = root().join("tests/fixtures/consent/shop.flow");
    let turns = converse(&shop, &["I want to buy mugs", "2", "yes", "yes"]);
    assert_eq!(turns[2]["reply"], "Charge your card for 2 mugs?");
    assert_eq!(turns[2]["step"], "confirm_charge");
    assert!(!ran(&turns[2], "charge"), "{}", turns[2]);
    assert!(ran(&turns[3], "charge"));
    assert_eq!(turns[3]["reply"], "Charged for 2 mugs.");
}

#[test]
fn a_no_that_restarts_the_flow_does_not_answer_the_next_order() {
    let pizza = root().join("tests/fixtures/consent/pizza.flow");
    let address = "12 Baker Street, London";
    let turns = converse(&pizza, &["I want to order pizza", "large", "3", address, "no", "small", "2", address]);
    assert_eq!(turns[3]["reply"], "Order 3 large pizzas to 12 Baker Street, London?");
    assert!(turns[3]["data"].get("toppings").is_none(), "the address is not toppings: {}", turns[3]["data"]);
    assert_eq!(turns[4]["step"], "ask_size", "the no restarted the order");
    assert_eq!(turns[7]["step"], "confirm", "the new order is asked to confirm: {}", turns[7]);
    assert_eq!(turns[7]["reply"], "Order 2 small pizzas to 12 Baker Street, London?");
    assert!(turns[7]["data"].get("confirmed").is_none());
}

#[test]
fn a_qualified_yes_asks_again_saying_why() {
    let booking = root().join("flows/booking.flow");
    let turns = converse(&booking, &["Book the Grand Hotel for 2 guests on 2026-12-04", "yes please, but wait", "yes"]);
    assert_eq!(
        turns[1]["reply"],
        "Just to be sure: you did not sound sure.\nShall I book Grand Hotel on 2026-12-04 for 2 guests?"
    );
    assert!(!ran(&turns[1], "book"));
    assert!(ran(&turns[2], "book"));
}

#[test]
fn words_a_pattern_read_are_not_also_the_whole_answer() {
    let transfer = root().join("tests/fixtures/consent/transfer.flow");
    let turns = converse(&transfer, &["I want to send money", "then do 3000 for now", "Ann Smith"]);
    assert_eq!(turns[1]["data"]["amount"], "3000");
    assert!(turns[1]["data"].get("recipient").is_none(), "{}", turns[1]["data"]);
    assert_eq!(turns[1]["reply"], "Who should receive the money?");
    assert_eq!(turns[2]["reply"], "Send 3000 euros to Ann Smith?");
}

/// The gate every model passes through: a confirmation is set to yes only
/// when code reads the message as an unqualified yes (a code read from the
/// closed set, or a model's yes that `grounding::ground_consent` keeps).
/// So no message of a class other than `yes` can book, whatever a model
/// proposes for it: checked here without any model.
#[test]
fn no_case_but_a_yes_can_pass_the_consent_gate_whatever_the_model_says() {
    use flowc::read::consent::{self, Consent};
    for file in ["shared.tsv", "more.tsv"] {
        let text = std::fs::read_to_string(root().join("tests/fixtures/consent").join(file)).unwrap();
        for line in text.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty()) {
            let mut parts = line.split('\t');
            let (class, message) = (parts.next().unwrap(), parts.next().unwrap());
            let read = consent::read(message);
            if class == "yes" {
                assert_eq!(read, Consent::Yes, "{file}: {message:?}");
            } else {
                assert_ne!(read, Consent::Yes, "{file}: {class} {message:?} would let a model's yes through");
                assert_ne!(consent::certain(message), Some(true), "{file}: {message:?}");
            }
        }
    }
}
