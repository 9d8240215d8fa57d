//! `flowc test`: the shipped examples' tests, failure reports, diagnostics
//! of wrong test files, the JSON and JUnit reports, `--update`, coverage on
//! the graph, replay of a recording; and `flowc run --trace` and slash
//! commands in piped scripts.

mod recorded;
mod reports;
mod run_trace;

use crate::support::{flowc_in, root, stderr, stdout, temp_dir};
use std::path::Path;
use std::process::Output;

/// Runs `flowc` in `dir`.
fn flowc_at(dir: &Path, args: &[&str]) -> Output {
    flowc_in(dir, args, None)
}

/// A test file in a fresh directory, naming a program of flows/ by its
/// absolute path.
fn test_file(name: &str, program: &str, body: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    let program = root().join("flows").join(program);
    let text = format!("program: {}\n{body}", program.display());
    std::fs::write(dir.join("case.test.yaml"), text).expect("test file written");
    dir
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

#[test]
fn the_shipped_examples_pass() {
    let output = flowc_at(root(), &["test", "flows/"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    assert!(last_line(&out).ends_with(" passed, 0 failed"), "{out}");
    for file in ["booking.test.yaml", "booking-yaml.test.yaml", "support.test.yaml", "onboarding.test.yaml"] {
        assert!(out.contains(&format!("ok   flows/{file} › ")), "{file} ran: {out}");
    }
}

#[test]
fn the_shipped_examples_cover_every_step_and_branch_entry() {
    let output = flowc_at(root(), &["test", "flows/", "--coverage"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    let rows: Vec<&str> = out.lines().filter(|line| line.starts_with("  ") && line.contains('/')).collect();
    assert!(rows.len() >= 7, "a row per flow of every example: {out}");
    for row in rows {
        let cells: Vec<&str> = row.split_whitespace().collect();
        // flow, steps, percent, branch entries, percent (or `-`), …
        assert_eq!(cells.get(2), Some(&"100%"), "every step reached: {row}");
        assert!(matches!(cells.get(3), Some(&"-")) || cells.get(4) == Some(&"100%"), "every entry reached: {row}");
    }
    assert!(!out.contains("not reached"), "{out}");
}

#[test]
fn a_failing_case_shows_the_turn_the_expectation_both_values_and_the_events() {
    let dir = test_file(
        "test-fail",
        "booking.flow",
        "tools:\n  book_hotel: { returns: { booking_id: GH-1 } }\ncases:\n  - name: asks to confirm\n    turns:\n      \
         - user: Book the Grand Hotel for 2 guests on 2026-12-04\n        step: ask_guests\n        \
         reply: { contains: How many }\n",
    );
    let output = flowc_at(&dir, &["test"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.starts_with("FAIL case.test.yaml › asks to confirm\n"), "{out}");
    assert!(
        out.contains(
            "turn 1 (`Book the Grand Hotel for 2 guests on 2026-12-04`), case.test.yaml:8:9: step\n       \
             expected: \"ask_guests\"\n       actual:   \"confirm\"\n"
        ),
        "{out}"
    );
    assert!(out.contains("expected: a reply containing \"How many\""), "{out}");
    assert!(out.contains("       {\"event\":\"step_entered\",\"flow\":\"booking\",\"step\":\"confirm\"}\n"), "{out}");
    assert_eq!(last_line(&out), "0 passed, 1 failed");
}

#[test]
fn tools_are_stubbed_and_the_consent_rule_catches_an_early_call() {
    // A stub that fails, then answers; `never_before` holds the booking to the "yes".
    let dir = test_file(
        "test-consent",
        "booking.flow",
        "cases:\n  - name: books only after yes\n    tools:\n      book_hotel: [{ error: down }, { returns: { booking_id: GH-9 } }]\n    \
         turns:\n      - user: Book the Grand Hotel for 2 guests on 2026-12-04\n      - user: \"yes\"\n        \
         stopped_reason: aborted\n      - user: Book the Grand Hotel for 2 guests on 2026-12-04\n      - user: sure, go ahead\n        \
         data: { booking_id: GH-9 }\n    never_before: { tool: book_hotel, reply_to: \"ok\" }\n  \
         - name: unstubbed tools fail instead of running\n    turns:\n      - user: Book the Grand Hotel for 2 guests on 2026-12-04\n      \
         - user: \"yes\"\n        reply: { contains: went wrong }\n        stopped_reason: aborted\n",
    );
    let output = flowc_at(&dir, &["test"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("FAIL case.test.yaml › books only after yes"), "{out}");
    assert!(
        out.contains(
            "never_before\n       expected: `book_hotel` not to run without the reply \"ok\" (no turn said it)"
        ),
        "{out}"
    );
    assert!(out.contains("ok   case.test.yaml › unstubbed tools fail instead of running"), "{out}");
    assert_eq!(last_line(&out), "1 passed, 1 failed");
}

#[test]
fn a_wrong_test_file_is_diagnostics_with_codes_not_failed_cases() {
    let dir = test_file(
        "test-diagnostics",
        "booking.flow",
        "cases:\n  - name: typos\n    tools:\n      book_hotle: { returns: {} }\n    turns:\n      - user: hi\n        \
         step: confrm\n        flow: bookin\n        data: { gusts: 2 }\n        stoped_reason: needs_input\n        \
         reply: { matches: \"(\" }\n",
    );
    let output = flowc_at(&dir, &["test"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    for (code, place) in [
        ("unknown_tool", "case.test.yaml:5:7"),
        ("unknown_target", "case.test.yaml:8:15"),
        ("unknown_target", "case.test.yaml:9:15"),
        ("unknown_field", "case.test.yaml:10:17"),
        ("unknown_key", "case.test.yaml:11:9"),
        ("invalid_value", "case.test.yaml:12:27"),
    ] {
        assert!(err.contains(&format!("flowc::{code}")), "{code}: {err}");
        assert!(err.contains(place), "{place}: {err}");
    }
    assert!(err.contains("did you mean `confirm`?"), "{err}");
    assert!(err.contains("error: `case.test.yaml` has errors: its cases did not run"), "{err}");
    assert_eq!(last_line(&stdout(&output)), "0 passed, 0 failed");
}

#[test]
fn a_program_that_does_not_compile_is_its_own_diagnostics() {
    let dir = temp_dir("test-broken-program");
    std::fs::write(dir.join("broken.flow"), "flow f {\n  step a {\n    collect nothing_here\n  }\n}\n")
        .expect("written");
    std::fs::write(
        dir.join("broken.test.yaml"),
        "program: broken.flow\ncases:\n  - name: x\n    turns:\n      - user: hi\n",
    )
    .expect("written");
    let output = flowc_at(&dir, &["test", "broken.test.yaml"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("flowc::unknown_field"), "{err}");
    assert!(err.contains("broken.flow:3:"), "{err}");
    assert!(err.contains("the program `broken.flow` does not compile"), "{err}");
}

#[test]
fn a_path_that_is_not_a_test_file_is_a_usage_error() {
    let output = flowc_at(root(), &["test", "flows/booking.flow"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("is not a test file"), "{}", stderr(&output));
}

#[test]
fn flowc_check_of_a_directory_leaves_test_files_out() {
    let output = flowc_at(root(), &["check", "flows/"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("checked 7 programs"), "{}", stderr(&output));
}
