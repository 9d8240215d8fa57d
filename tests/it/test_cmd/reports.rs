//! The reports of `flowc test` besides the human one, `--filter`,
//! `--update`, coverage drawn by `flowc graph --coverage`, workflow resumes
//! and replaying a recording.

use super::{flowc_at, last_line, test_file};
use crate::support::{root, stderr, stdout};

const TWO_CASES: &str = "tools:\n  book_hotel: { returns: { booking_id: GH-1 } }\ncases:\n  \
    - name: passes\n    turns:\n      - user: Book the Grand Hotel for 2 guests on 2026-12-04\n        step: confirm\n  \
    - name: fails <&>\n    turns:\n      - user: Book the Grand Hotel for 2 guests on 2026-12-04\n        step: ask_date\n";

#[test]
fn json_and_junit_reports_hold_every_case() {
    let dir = test_file("test-json", "booking.flow", TWO_CASES);
    let output = flowc_at(&dir, &["test", "--format", "json", "--junit", "report.xml"]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["passed"], 1);
    assert_eq!(report["failed"], 1);
    assert_eq!(report["cases"][1]["case"], "fails <&>");
    assert_eq!(report["cases"][1]["failures"][0]["expectation"], "step");
    assert_eq!(report["cases"][1]["failures"][0]["actual"], "\"confirm\"");
    assert_eq!(report["cases"][1]["failures"][0]["at"], "case.test.yaml:12:9");
    assert_eq!(report["cases"][0]["transcript"][0]["step"], "confirm");
    assert_eq!(last_line(&stderr(&output)), "1 passed, 1 failed", "the summary goes to stderr under --format json");
    let xml = std::fs::read_to_string(dir.join("report.xml")).expect("JUnit written");
    assert!(xml.contains("<testsuites name=\"flowc test\" tests=\"2\" failures=\"1\">"), "{xml}");
    assert!(xml.contains("<testcase classname=\"case.test.yaml\" name=\"passes\"/>"), "{xml}");
    assert!(xml.contains("<testcase classname=\"case.test.yaml\" name=\"fails &lt;&amp;&gt;\">"), "{xml}");
    assert!(xml.contains("<failure message=\"turn 1"), "{xml}");
}

#[test]
fn filter_runs_the_matching_cases_only() {
    let dir = test_file("test-filter", "booking.flow", TWO_CASES);
    let output = flowc_at(&dir, &["test", "--filter", "passes"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert_eq!(stdout(&output), "ok   case.test.yaml › passes\n1 passed, 0 failed\n");
}

#[test]
fn update_rewrites_failing_expectations_after_showing_the_diff() {
    let dir = test_file("test-update", "booking.flow", TWO_CASES);
    let output = flowc_at(&dir, &["test", "--update"]);
    assert_eq!(output.status.code(), Some(1), "the run that updates still reports its failure");
    let err = stderr(&output);
    assert!(err.contains("-        step: ask_date\n+        step: \"confirm\"\n"), "{err}");
    assert!(err.contains("updated case.test.yaml"), "{err}");
    let again = flowc_at(&dir, &["test"]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert_eq!(last_line(&stdout(&again)), "2 passed, 0 failed");
}

#[test]
fn coverage_is_drawn_on_the_graph_in_both_formats() {
    let dir = crate::support::temp_dir("test-coverage");
    let coverage = dir.join("coverage.json");
    let coverage = coverage.to_string_lossy();
    let output = flowc_at(root(), &["test", "flows/booking.test.yaml", "--coverage-out", &coverage]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let mermaid = stdout(&flowc_at(root(), &["graph", "flows/booking.flow", "--coverage", &coverage]));
    let plain = stdout(&flowc_at(root(), &["graph", "flows/booking.flow"]));
    assert!(mermaid.starts_with(&plain), "the overlay only adds lines after the drawing");
    let added = &mermaid[plain.len()..];
    assert!(added.contains("  classDef covered "), "{added}");
    // Every step of booking is covered: f0_s0 … f0_s5.
    let covered =
        added.lines().find(|line| line.starts_with("  class ") && line.ends_with(" covered")).expect("a covered class");
    for step in 0..6 {
        assert!(covered.contains(&format!("f0_s{step}")), "{covered}");
    }
    assert!(added.contains("linkStyle"), "{added}");
    let dot = stdout(&flowc_at(root(), &["graph", "flows/booking.flow", "--format", "dot", "--coverage", &coverage]));
    assert!(dot.contains("color=\"#2a7a2a\", penwidth=2]"), "taken edges are green: {dot}");
    assert!(dot.contains("f0_s5 [fillcolor=\"#d9f2d9\""), "{dot}");
    let wrong = flowc_at(root(), &["graph", "flows/booking.flow", "--coverage", "flows/booking.flow"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(stderr(&wrong).contains("is not a coverage file"), "{}", stderr(&wrong));
}

#[test]
fn a_workflow_resumes_only_once_the_test_moved_the_clock_past_its_wait() {
    let dir = test_file(
        "test-workflow",
        "onboarding.flow",
        "tools:\n  create_account: { returns: { account_id: A } }\n  send_welcome: { returns: { message_id: M } }\n  \
         check_activation: { returns: { activated: true } }\ncases:\n  - name: too early\n    \
         data: { company: Initech, contacts: [] }\n    workflow: onboarding\n    run: { status: waiting }\n    \
         resumes:\n      - after: 23h\n        status: completed\n",
    );
    let output = flowc_at(&dir, &["test"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains("expected: the run to be due (it resumes at 2026-01-06T10:00:00+00:00)\n       actual:   the clock is at 2026-01-06T09:00:00+00:00"),
        "{out}"
    );
}

#[test]
fn a_recorded_conversation_replays_as_a_case() {
    // `flowc test --record DIR` writes one recording per case; a case
    // naming it with `provider: replay:FILE` answers from it.
    let dir = test_file(
        "test-replay",
        "booking.flow",
        "tools:\n  book_hotel: { returns: { booking_id: GH-1 } }\ncases:\n  - name: books\n    turns:\n      \
         - user: Book the Grand Hotel for 2 guests on 2026-12-04\n        step: confirm\n      - user: \"yes\"\n        \
         data: { booking_id: GH-1 }\n",
    );
    let recorded = flowc_at(&dir, &["test", "--record", "recordings"]);
    assert_eq!(recorded.status.code(), Some(0), "{}{}", stdout(&recorded), stderr(&recorded));
    let recording = dir.join("recordings/case-books.json");
    let text = std::fs::read_to_string(&recording).expect("a recording per case");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON")["calls"].as_array().map(Vec::len),
        Some(2),
        "the fused understand call, which wrote the first reply, is one recorded call"
    );
    let file = dir.join("case.test.yaml");
    let test = std::fs::read_to_string(&file).expect("test file");
    let replaying = test.replacen("cases:", "provider: replay:recordings/case-books.json\ncases:", 1);
    std::fs::write(&file, &replaying).expect("written");
    let replayed = flowc_at(&dir, &["test"]);
    assert_eq!(replayed.status.code(), Some(0), "{}{}", stdout(&replayed), stderr(&replayed));
    // A message the recording never saw fails loudly, not with a guess.
    std::fs::write(&file, replaying.replace("user: \"yes\"", "user: \"yes please\"")).expect("written");
    let unseen = flowc_at(&dir, &["test"]);
    assert_eq!(unseen.status.code(), Some(1));
    assert!(stdout(&unseen).contains("it failed: model call failed"), "{}", stdout(&unseen));
}
