//! `flowc run --trace` and slash commands in a piped script.

use crate::support::{flowc_in, root, stderr, stdout};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04\n";

#[test]
fn trace_prints_each_event_as_a_json_line_on_stderr() {
    let output = flowc_in(root(), &["run", "flows/booking.flow", "--trace"], Some(BOOK));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events: Vec<serde_json::Value> =
        stderr(&output).lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let names: Vec<&str> = events.iter().filter_map(|event| event["event"].as_str()).collect();
    assert_eq!(names.first(), Some(&"turn_started"), "{names:?}");
    assert_eq!(names.last(), Some(&"turn_finished"), "{names:?}");
    assert!(names.contains(&"step_entered") && !names.contains(&"model_request"), "{names:?}");
    assert_eq!(stdout(&output), "Shall I book Grand Hotel on 2026-12-04 for 2 guests?\n");
}

#[test]
fn trace_prompts_adds_the_requests_and_answers_with_keys_redacted() {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flowc"));
    let script = crate::support::temp_dir("trace-prompts").join("script.txt");
    std::fs::write(&script, "my key is sk-test-secret-0123456789\n").expect("written");
    let output = command
        .args(["run", "flows/booking.flow", "--trace", "prompts", "--script"])
        .arg(&script)
        .current_dir(root())
        .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
        .env("OPENAI_API_KEY", "sk-test-secret-0123456789")
        .output()
        .expect("flowc runs");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("{\"event\":\"model_request\",\"call\":\"understand\""), "{err}");
    assert!(err.contains("{\"event\":\"model_answer\",\"call\":\"reply\""), "{err}");
    assert!(!err.contains("sk-test-secret-0123456789"), "the key is redacted: {err}");
}

#[test]
fn slash_commands_work_in_a_piped_script() {
    let script = format!("{BOOK}/data\n/trace\n/graph\n//not a command\n/quit\nnever sent\n");
    let output = flowc_in(root(), &["run", "flows/booking.flow", "--json"], Some(&script));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> =
        stdout(&output).lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(lines[1]["command"], "/data");
    assert_eq!(lines[1]["result"], serde_json::json!({"hotel": "Grand Hotel", "date": "2026-12-04", "guests": 2}));
    assert_eq!(lines[2]["command"], "/trace");
    assert_eq!(lines[2]["result"]["events"][0]["event"], "turn_started");
    assert_eq!(lines[4]["user"], "/not a command", "`//` sends a message starting with `/`");
    assert!(lines[3]["result"].as_str().is_some_and(|graph| graph.contains("class f0_s3 current")), "{lines:?}");
    let plain = flowc_in(root(), &["run", "flows/booking.flow"], Some(&format!("{BOOK}/data\n")));
    assert!(
        stdout(&plain).ends_with("{\n  \"hotel\": \"Grand Hotel\",\n  \"date\": \"2026-12-04\",\n  \"guests\": 2\n}\n"),
        "{}",
        stdout(&plain)
    );
}
