//! `flowc check` as an interface (DESIGN.md, "Interfaces other tools rely
//! on"): the real binary, its exit codes, its JSON shape on stdout, the
//! human rendering and summary on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory for one test, below cargo's scratch space.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("check-cli").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
    dir
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|error| panic!("{}: {error}", parent.display()));
    }
    std::fs::write(&path, text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `flowc` in `dir` (so paths in its output are the relative ones given).
fn flowc(dir: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("COLUMNS")
        .output()
        .unwrap_or_else(|error| panic!("cannot run flowc: {error}"));
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

const CLEAN: &str = r#"schema {
  hotel: string
}
flow booking {
  when "the user wants to book"
  step ask {
    prompt "Which hotel?"
    collect hotel
  }
  step done { say "Booked {{hotel}}." }
}
"#;

/// One error (`unknown_target`, line 9) and nothing else.
const ONE_ERROR: &str = r#"schema {
  hotel: string
}
flow booking {
  when "the user wants to book"
  step ask {
    prompt "Which hotel?"
    collect hotel
    next confrim
  }
  step confirm { say "Booked {{hotel}}." }
}
"#;

/// One warning (`unrouted_flow`, line 5) and nothing else.
const ONE_WARNING: &str = r#"flow booking {
  when "the user wants to book"
  step done { say "Booked." }
}
flow survey {
  step rate { say "How did we do?" }
}
"#;

#[test]
fn clean_program_exits_zero_with_a_summary() {
    let dir = scratch("clean");
    write(&dir, "booking.flow", CLEAN);
    let run = flowc(&dir, &["check", "booking.flow"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, "checked 1 program: 0 errors, 0 warnings\n");
}

#[test]
fn an_error_exits_one_with_a_rustc_style_report_on_stderr() {
    let dir = scratch("error-human");
    write(&dir, "booking.flow", ONE_ERROR);
    let run = flowc(&dir, &["check", "booking.flow"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    for expected in [
        "flowc::unknown_target",
        "`confrim` names no step",
        "booking.flow:9:10",
        "did you mean `confirm`?",
        "checked 1 program: 1 error, 0 warnings",
    ] {
        assert!(run.stderr.contains(expected), "missing {expected:?} in:\n{}", run.stderr);
    }
    assert!(!run.stderr.contains('\u{1b}'), "colour escapes without a terminal:\n{}", run.stderr);
}

#[test]
fn json_is_one_array_of_the_documented_objects_on_stdout() {
    let dir = scratch("json");
    write(&dir, "booking.flow", ONE_ERROR);
    write(&dir, "survey.flow", ONE_WARNING);
    let run = flowc(&dir, &["check", "--format", "json", "booking.flow", "survey.flow"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr, "checked 2 programs: 1 error, 1 warning\n");
    let value: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {}", run.stdout));
    let items = value.as_array().unwrap_or_else(|| panic!("not an array: {value}"));
    assert_eq!(items.len(), 2);
    let keys: Vec<&str> =
        items[0].as_object().map(|object| object.keys().map(String::as_str).collect()).unwrap_or_default();
    assert_eq!(keys, ["file", "line", "column", "end_line", "end_column", "severity", "code", "message", "help"]);
    assert_eq!(
        items[0],
        serde_json::json!({
            "file": "booking.flow",
            "line": 9,
            "column": 10,
            "end_line": 9,
            "end_column": 17,
            "severity": "error",
            "code": "unknown_target",
            "message": "`confrim` names no step",
            "help": "did you mean `confirm`?",
        })
    );
    assert_eq!(items[1]["file"], "survey.flow");
    assert_eq!(items[1]["severity"], "warning");
    assert_eq!(items[1]["code"], "unrouted_flow");
    assert_eq!((&items[1]["line"], &items[1]["column"]), (&serde_json::json!(5), &serde_json::json!(6)));
}

#[test]
fn json_of_a_clean_run_is_an_empty_array() {
    let dir = scratch("json-clean");
    write(&dir, "booking.flow", CLEAN);
    let run = flowc(&dir, &["check", "--format", "json", "booking.flow"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout.trim(), "[]");
}

/// `--costs`: the booking example's turns as a table on stdout, and in
/// the JSON object beside the diagnostics. The figures are the cost
/// model's (`src/check/costs.rs`, whose unit tests check them); here, the
/// shape and the calls of the turn that answers the confirmation.
#[test]
fn costs_are_a_table_or_an_object_beside_the_diagnostics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("flows");
    let table = flowc(&dir, &["check", "--costs", "booking.flow"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines.first().is_some_and(|line| line.starts_with("booking.flow: model calls per turn")), "{lines:?}");
    let header = lines.get(1).copied().unwrap_or_default();
    assert!(header.starts_with("turn at") && header.contains("understand") && header.contains("reply"), "{header}");
    assert!(lines.iter().any(|line| line.starts_with("booking.confirm ")), "{lines:?}");

    let json = flowc(&dir, &["check", "--costs", "--format", "json", "booking.flow"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let value: serde_json::Value =
        serde_json::from_str(&json.stdout).unwrap_or_else(|error| panic!("{error}: {}", json.stdout));
    assert_eq!(value["diagnostics"], serde_json::json!([]));
    assert_eq!(value["costs"][0]["file"], "booking.flow");
    let turns = value["costs"][0]["turns"].as_array().cloned().unwrap_or_default();
    assert_eq!(turns.len(), 5, "the entry and the four steps that ask: {turns:?}");
    let confirm = turns.iter().find(|turn| turn["start"] == serde_json::json!({"step": "confirm"}));
    let confirm = confirm.unwrap_or_else(|| panic!("no confirm turn: {turns:?}"));
    // A yes needs the understand call (the change-of-date condition is
    // asked) and no reply: the booking's `say` answers.
    assert_eq!(confirm["calls"]["best"], 1);
    assert_eq!(confirm["reply"], serde_json::json!({"best": 0, "worst": 1}));
    assert!(confirm["understand_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
}

#[test]
fn warnings_pass_unless_denied() {
    let dir = scratch("warnings");
    write(&dir, "survey.flow", ONE_WARNING);
    let run = flowc(&dir, &["check", "survey.flow"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("flowc::unrouted_flow"), "{}", run.stderr);
    assert!(run.stderr.ends_with("checked 1 program: 0 errors, 1 warning\n"), "{}", run.stderr);
    let denied = flowc(&dir, &["check", "--deny-warnings", "survey.flow"]);
    assert_eq!(denied.code, 1);
}

#[test]
fn directories_are_searched_recursively_for_programs() {
    let dir = scratch("recursive");
    write(&dir, "programs/a.flow", CLEAN);
    write(
        &dir,
        "programs/nested/b.yaml",
        "flows:\n  chat:\n    default: true\n    steps:\n      - id: talk\n        prompt: Hello\n",
    );
    write(
        &dir,
        "programs/nested/deeper/c.yml",
        "flows:\n  chat:\n    default: true\n    steps:\n      - id: talk\n        prompt: Hi\n",
    );
    write(&dir, "programs/notes.txt", "not a program");
    write(&dir, "programs/.hidden/d.flow", "this is not read");
    let run = flowc(&dir, &["check", "programs"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "checked 3 programs: 0 errors, 0 warnings\n");
}

#[test]
fn an_empty_file_is_a_syntax_error() {
    let dir = scratch("empty");
    write(&dir, "empty.flow", "# nothing here\n\n");
    let run = flowc(&dir, &["check", "--format", "json", "empty.flow"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("\"code\": \"syntax\""), "{}", run.stdout);
}

#[test]
fn a_file_that_is_not_utf8_is_a_syntax_error() {
    let dir = scratch("not-utf8");
    write(&dir, "latin1.flow", b"flow caf\xe9 { }\n");
    let run = flowc(&dir, &["check", "--format", "json", "latin1.flow"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("not valid UTF-8"), "{}", run.stdout);
}

#[test]
fn a_missing_path_exits_two_after_checking_the_others() {
    let dir = scratch("missing");
    write(&dir, "booking.flow", ONE_ERROR);
    let run = flowc(&dir, &["check", "nowhere.flow", "booking.flow"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("cannot read `nowhere.flow`"), "{}", run.stderr);
    // The readable file is still checked, and its error still reported.
    assert!(run.stderr.contains("flowc::unknown_target"), "{}", run.stderr);
    assert!(run.stderr.contains("checked 1 program: 1 error, 0 warnings"), "{}", run.stderr);
}

#[test]
fn a_directory_without_programs_exits_two() {
    let dir = scratch("no-programs");
    write(&dir, "docs/readme.txt", "no programs here");
    let run = flowc(&dir, &["check", "docs"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("holds no program"), "{}", run.stderr);
}

#[test]
fn usage_errors_exit_two() {
    let dir = scratch("usage");
    assert_eq!(flowc(&dir, &["check"]).code, 2);
    assert_eq!(flowc(&dir, &["check", "--format", "xml", "a.flow"]).code, 2);
}

/// A reproducer of the reliability probe (issue 13), by file name.
fn reliability_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reliability").join(name)
}

#[test]
fn a_cascade_of_diagnostics_is_shown_up_to_the_limit_and_counted_whole() {
    // Issue 13: 25 KB of `{{x}}` on one line wrote 252 MB to stderr, one
    // rendering of the whole line per unknown field.
    let path = reliability_fixture("diag_amplification_25KB.flow");
    let dir = scratch("cascade_is_capped");
    let run = flowc(&dir, &["check", &path.to_string_lossy()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let rendered = run.stderr.matches("flowc::unknown_field").count();
    assert_eq!(rendered, 100, "only the first 100 are rendered");
    assert!(run.stderr.contains("more diagnostics in"), "{}", &run.stderr[run.stderr.len().saturating_sub(500)..]);
    assert!(run.stderr.len() < 4_000_000, "{} bytes on stderr", run.stderr.len());
    let summary = run.stderr.lines().last().unwrap_or_default();
    let counted: usize = summary
        .split_once(": ")
        .and_then(|(_, counts)| counts.split_whitespace().next())
        .and_then(|errors| errors.parse().ok())
        .unwrap_or(0);
    assert!(counted > 1_000, "the summary counts every error: {summary}");

    let all = flowc(&dir, &["check", "--max-diagnostics", "0", "--format", "json", &path.to_string_lossy()]);
    let json: serde_json::Value = serde_json::from_str(&all.stdout).unwrap_or_default();
    assert_eq!(json.as_array().map(Vec::len), Some(counted), "`--max-diagnostics 0` shows them all");
}

#[test]
fn a_line_of_quotes_is_one_diagnostic() {
    // Issue 13: 256 KB of `"` (a field's description given again and again)
    // was 131,071 diagnostics and 36 MB of JSON, 1.6 s (24 s at 1 MB).
    let path = reliability_fixture("quotes_256KB.flow");
    let dir = scratch("quotes_json");
    let run = flowc(&dir, &["check", "--format", "json", &path.to_string_lossy()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
    assert_eq!(json.as_array().map(Vec::len), Some(1), "{}", run.stdout);
    assert_eq!(json[0]["message"], "`description` is given twice in this type");
}

#[test]
fn an_expression_64_levels_deep_runs_in_both_syntaxes() {
    // The evaluator and the type checker recurse per level: the deepest
    // expression the front ends accept must run on the binary's own stack.
    let dir = scratch("nested_64_runs");
    for yaml in [false, true] {
        let (text, name) = super::stress::nested_condition(64, yaml);
        write(&dir, name, text);
        let output = Command::new(env!("CARGO_BIN_EXE_flowc"))
            .args(["run", name, "--json"])
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(b"5\n")?;
                }
                child.wait_with_output()
            })
            .unwrap_or_else(|error| panic!("cannot run flowc: {error}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains(r#""count":6"#), "{name}: {stdout}");
    }
}

#[test]
fn newcomer_mistakes_get_a_did_you_mean_or_the_right_place() {
    // Issue 13: a misspelt keyword and a misspelt directive as a target got
    // no suggestion; an unclosed `{` was reported at the next step.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check");
    let dir = scratch("newcomer");
    for (fixture, line, help) in [
        ("syntax/misspelt_keyword.flow", 5, "did you mean `collect`?"),
        ("unknown_target/misspelt_directive.flow", 6, "did you mean the directive `complete`?"),
        ("syntax/unclosed_brace.flow", 6, "add the missing `}`"),
    ] {
        let path = fixtures.join(fixture);
        let run = flowc(&dir, &["check", "--format", "json", &path.to_string_lossy()]);
        let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
        let first = &json[0];
        assert_eq!(first["line"], line, "{fixture}: {}", run.stdout);
        assert!(first["help"].as_str().is_some_and(|text| text.starts_with(help)), "{fixture}: {}", run.stdout);
    }
}
