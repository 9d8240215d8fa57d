//! The operator's limits end to end: a `[limits]` table in `flowc.toml`
//! and the flags of `flowc run`, `resume` and `worker` stop conversation
//! turns and workflow runs with their stop reasons, a flag wins over the
//! file, and a table or flag flowc cannot read stops the command before
//! anything runs.

use crate::support::{flowc_env, root, stderr, stdout, temp_dir};
use crate::workflows::{flowc_at, json, run_id, started_steps, store_in};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const TODAY: &str = "2026-01-05T10:00:00Z";
const BOOKING_MESSAGES: &str = "Book the Grand Hotel for 2 guests on 2026-12-04\nyes\n";
const ONBOARDING_DATA: &str = r#"{"company": "Initech", "contacts": [{"name": "Ann", "email": "ann@initech.test"}]}"#;

fn program(name: &str) -> String {
    root().join("flows").join(name).to_string_lossy().into_owned()
}

/// A working directory holding `flowc.toml` (flows/ has none beside the
/// examples, so the one here is the one read) and the booking messages.
fn dir_with_config(name: &str, config: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    let written = std::fs::write(dir.join("flowc.toml"), config)
        .and_then(|()| std::fs::write(dir.join("booking.chat"), BOOKING_MESSAGES));
    assert!(written.is_ok(), "{written:?}");
    dir
}

fn flowc(dir: &Path, args: &[&str]) -> std::process::Output {
    flowc_env(dir, args, &[], Duration::from_secs(60))
}

/// The `--json` lines of a conversation.
fn turns(output: &std::process::Output) -> Vec<Value> {
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap_or_default()).collect()
}

fn statuses(run: &Value) -> Vec<&str> {
    run["steps"].as_array().into_iter().flatten().filter_map(|step| step["status"].as_str()).collect()
}

#[test]
fn a_limits_table_stops_a_conversation_turn_with_its_reason_and_the_next_turn_goes_on() {
    let dir = dir_with_config("limits-conversation", "[limits]\nmax_steps_per_turn = 1\n");
    let output = flowc(&dir, &["run", &program("booking.flow"), "--script", "booking.chat", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns.len(), 2, "{}", stdout(&output));
    // Unlimited, the first turn runs ask_hotel, ask_date and confirm.
    assert_eq!(turns[0]["stopped_reason"], "step_limit");
    assert_eq!(turns[0]["executed_steps"], serde_json::json!(["ask_hotel"]));
    assert_eq!(turns[0]["step"], "ask_date", "parked at the step it did not run");
    assert_eq!(turns[1]["executed_steps"][0], "ask_date", "the next turn goes on from there");
}

#[test]
fn a_flag_overrides_its_key_in_the_limits_table() {
    let dir = dir_with_config("limits-flag-wins", "[limits]\nmax_steps_per_turn = 1\n");
    let args = ["run", &program("booking.flow"), "--script", "booking.chat", "--json", "--max-steps-per-turn", "3"];
    let output = flowc(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns[0]["stopped_reason"], "needs_input", "three steps are allowed: {}", stdout(&output));
    assert_eq!(turns[0]["executed_steps"], serde_json::json!(["ask_hotel", "ask_date", "confirm"]));
    assert_eq!(turns[1]["stopped_reason"], "flow_complete");
}

#[test]
fn a_session_token_flag_reaches_a_stored_conversation() {
    let dir = dir_with_config("limits-session", "");
    let store = store_in(&dir);
    let booking = program("booking.flow");
    let first_message = dir.join("first.chat");
    let written = std::fs::write(&first_message, "I'd like to book a hotel room\n");
    assert!(written.is_ok());
    let first_message = first_message.to_string_lossy().into_owned();
    let session = ["run", &booking, "--session", "alice", "--store", &store, "--json", "--script"];

    let first = flowc(&dir, &[&session[..], &[&first_message]].concat());
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let spent = &turns(&first)[0]["tokens"];
    let spent = spent["prompt"].as_u64().unwrap_or(0) + spent["completion"].as_u64().unwrap_or(0);
    assert!(spent > 1, "the first turn spent tokens: {}", stdout(&first));

    // The session has already spent more than the limit: the next turn
    // stops before it asks the model anything.
    let limit = (spent - 1).to_string();
    let second = flowc(&dir, &[&session[..], &["booking.chat", "--max-session-tokens", &limit]].concat());
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let second = turns(&second);
    assert_eq!(second[0]["stopped_reason"], "session_token_limit");
    assert_eq!(second[0]["llm_calls"], 0);
    assert_eq!(second[0]["step"], "ask_hotel", "the stored session, where the first run left it");
}

#[cfg(unix)]
#[test]
fn the_repl_shows_the_limit_that_stopped_a_turn_and_why() {
    let dir = dir_with_config("limits-repl", "[limits]\nmax_steps_per_turn = 1\n");
    let mut repl = crate::repl::Repl::start(&dir);
    // The turn stops before its reply: the trace line and the note are all
    // it prints.
    let printed = repl.say(BOOKING_MESSAGES.lines().next().unwrap_or_default(), "or its flag)");
    assert!(printed.contains("[booking/ask_date · ran ask_hotel · step_limit · 1 model call]"), "{printed}");
    assert!(
        printed.contains(
            "note: step_limit: the turn executed as many steps as the runtime's `max_steps_per_turn` \
             ([limits] in flowc.toml, or its flag)"
        ),
        "{printed}"
    );
    repl.say("yes", "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    repl.quit_with_ctrl_d();
}

#[test]
fn a_run_table_pauses_a_workflow_and_resume_goes_on_under_the_table_or_its_flags() {
    let dir = dir_with_config("limits-workflow", "[limits.run]\nmax_steps = 1\n");
    let store = store_in(&dir);
    let started = flowc_at(&dir, &store, TODAY, &["run", &program("onboarding.flow"), "--data", ONBOARDING_DATA]);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let id = run_id(&started);
    assert_eq!(stdout(&started), format!("run {id}: stopped by step_limit: it ran `max_steps` steps in one call\n"));
    assert!(stderr(&started).contains(&format!("paused: `flowc resume {id}`")), "{}", stderr(&started));

    let stored = json(&flowc_at(&dir, &store, TODAY, &["runs", "show", &id, "--json"]));
    assert_eq!(stored["status"], "paused");
    assert_eq!(stored["stopped_reason"], "step_limit");
    assert_eq!(statuses(&stored), ["completed", "pending", "pending", "pending", "pending", "pending", "pending"]);

    // `flowc resume` reads the same table: one more step.
    let resumed = flowc_at(&dir, &store, TODAY, &["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!((run["status"].as_str(), run["stopped_reason"].as_str()), (Some("paused"), Some("step_limit")));
    assert_eq!(started_steps(&run), ["start", "create_account"]);

    // Its flag overrides the table: the run goes on to its wait.
    let resumed = flowc_at(&dir, &store, TODAY, &["resume", &id, "--json", "--max-steps", "10"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!((run["status"].as_str(), run["stopped_reason"].as_str()), (Some("waiting"), Some("waiting")));
    assert_eq!(started_steps(&run), ["start", "create_account", "welcome_contacts", "wait_a_day"], "none twice");
}

#[test]
fn a_worker_leaves_a_paused_run_to_resume_and_pauses_the_runs_its_own_limits_stop() {
    let dir = dir_with_config("limits-worker", "");
    let store = store_in(&dir);
    let run_args = ["run", &program("onboarding.flow"), "--data", ONBOARDING_DATA, "--max-steps", "1"];
    let started = flowc_at(&dir, &store, TODAY, &run_args);
    let id = run_id(&started);
    assert!(stdout(&started).contains("stopped by step_limit"), "{}", stdout(&started));

    // A limit stops a run: a worker's poll does not undo that.
    let worker = flowc_at(&dir, &store, TODAY, &["worker", "--once"]);
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert_eq!(stdout(&worker), "", "the paused run is left alone");
    let resumed = flowc_at(&dir, &store, TODAY, &["resume", &id, "--json"]);
    assert_eq!(json(&resumed)["status"], "waiting", "{}", stderr(&resumed));

    // Once due, a worker with a limit of its own takes it, pauses it at the
    // limit, and does not take it again.
    let next_day = "2026-01-06T11:00:00Z";
    let worker = flowc_at(&dir, &store, next_day, &["worker", "--once", "--max-steps", "1"]);
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert_eq!(
        stdout(&worker),
        format!("resumed {id}: paused: stopped by step_limit: it ran `max_steps` steps in one call\n")
    );
    let stored = json(&flowc_at(&dir, &store, next_day, &["runs", "show", &id, "--json"]));
    assert_eq!((stored["status"].as_str(), stored["stopped_reason"].as_str()), (Some("paused"), Some("step_limit")));
}

const FAILING_STEPS: &str = r#"
schema { a: string  id: string }
tool broken(a: string) -> { id: string } { exec "false" }
flow w "Workflow" {
  requires a
  auto step one { call broken(a) -> id  on_error continue }
  auto step two { call broken(a) -> id  on_error continue }
  auto step three { call broken(a) -> id  on_error continue }
  auto step last { set id = "done" }
}
"#;

#[test]
fn max_consecutive_errors_stops_a_workflow_whose_steps_keep_failing() {
    let dir = dir_with_config("limits-errors", "[limits]\nmax_consecutive_errors = 1\n");
    let written = std::fs::write(dir.join("failing.flow"), FAILING_STEPS);
    assert!(written.is_ok());
    let store = store_in(&dir);
    // The flag sets the limit of the kind of run this is: a workflow's, not
    // the conversations' 1 of the file.
    let args = ["run", "failing.flow", "--data", r#"{"a": "x"}"#, "--json", "--max-consecutive-errors", "2"];
    let started = flowc_at(&dir, &store, TODAY, &args);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let run = json(&started);
    assert_eq!((run["status"].as_str(), run["stopped_reason"].as_str()), (Some("paused"), Some("error_limit")));
    assert_eq!(statuses(&run), ["failed", "failed", "pending", "pending"]);

    let resumed = flowc_at(&dir, &store, TODAY, &["resume", run["run"].as_str().unwrap_or_default(), "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!(run["status"], "completed");
    assert_eq!(statuses(&run), ["failed", "failed", "failed", "completed"]);
}

#[test]
fn a_limits_table_flowc_cannot_read_stops_every_command_before_anything_runs() {
    let dir = dir_with_config("limits-bad-table", "[limits.run]\nmax_steps = 0\n");
    let store = store_in(&dir);
    let config = dir.join("flowc.toml").display().to_string();
    let expected = format!(
        "error: cannot read the [limits] table of {config}: `max_steps` in [limits.run] must be a whole number \
         from 1 to 4294967295, not 0\n"
    );
    let commands: [&[&str]; 4] = [
        &["run", &program("booking.flow"), "--script", "booking.chat"],
        &["run", &program("onboarding.flow"), "--data", ONBOARDING_DATA],
        &["resume", "some-run", "--now"],
        &["worker", "--once"],
    ];
    for args in commands {
        let output = flowc_at(&dir, &store, TODAY, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "", "{args:?}: nothing ran");
        assert_eq!(stderr(&output), expected, "{args:?}");
    }
    let runs = flowc_at(&dir, &store, TODAY, &["runs", "list"]);
    assert!(!stdout(&runs).contains("onboarding"), "no run was stored: {}", stdout(&runs));
}

#[test]
fn each_kind_of_mistake_in_the_table_names_the_key_and_what_it_accepts() {
    let cases = [
        ("[limits]\nmax_turns = 3\n", "unknown key `max_turns` in [limits] (known: max_steps_per_turn, "),
        (
            "[limits]\nmax_session_tokens = -5\n",
            "`max_session_tokens` in [limits] must be a whole number of at least 1, not -5",
        ),
        ("[limits]\nmax_session_time = 600\n", "`max_session_time` in [limits] must be a duration such as \"30s\""),
        ("limits = \"none\"\n", "`limits` must be a table, written [limits]"),
        ("[limits.run]\nmax_time = \"soon\"\n", "`max_time` in [limits.run] must be a duration such as \"30s\""),
    ];
    for (config, expected) in cases {
        let dir = dir_with_config("limits-mistakes", config);
        let output = flowc(&dir, &["run", &program("booking.flow"), "--script", "booking.chat"]);
        assert_eq!(output.status.code(), Some(2), "{config}");
        let printed = stderr(&output);
        assert_eq!(printed.lines().count(), 1, "one line: {printed}");
        assert!(printed.contains("flowc.toml: "), "names the file: {printed}");
        assert!(printed.contains(expected), "{config}: {printed}");
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn a_flowc_toml_that_is_not_toml_is_worded_as_the_model_settings_word_it() {
    let dir = dir_with_config("limits-not-toml", "[limits\nmax_steps_per_turn = 1\n");
    let config = dir.join("flowc.toml").display().to_string();
    for args in [
        &["run", &program("booking.flow"), "--script", "booking.chat"][..],
        &["run", &program("onboarding.flow"), "--data", ONBOARDING_DATA],
    ] {
        let output = flowc(&dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let printed = stderr(&output);
        assert!(printed.starts_with(&format!("error: {config}: invalid table header")), "{printed}");
        assert!(!printed.contains("[limits] table"), "the mistake is the file's, not the table's: {printed}");
    }
}

#[test]
fn a_limit_flag_flowc_cannot_read_is_a_usage_error() {
    let dir = dir_with_config("limits-bad-flag", "");
    for (flag, value, accepted) in [
        ("--max-steps-per-turn", "0", "a whole number from 1 to 4294967295"),
        ("--max-session-time", "10", "a duration such as \"30s\""),
        ("--max-steps", "-1", "a whole number from 1 to 4294967295"),
    ] {
        let output = flowc(&dir, &["run", &program("booking.flow"), "--script", "booking.chat", flag, value]);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        assert!(stderr(&output).contains(&format!("invalid value '{value}' for '{flag} ")), "{}", stderr(&output));
        assert!(stderr(&output).contains(accepted), "{}", stderr(&output));
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn a_limit_flag_of_the_other_kind_of_run_is_noted_and_changes_nothing() {
    let dir = dir_with_config("limits-other-kind", "");
    let args = ["run", &program("booking.flow"), "--script", "booking.chat", "--json", "--max-steps", "1"];
    let output = flowc(&dir, &args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("note: --max-steps limits only workflow runs; this is a conversation"),
        "{}",
        stderr(&output)
    );
    assert_eq!(turns(&output)[0]["stopped_reason"], "needs_input");

    let store = store_in(&dir);
    let args = ["run", &program("onboarding.flow"), "--data", ONBOARDING_DATA, "--max-steps-per-turn", "1"];
    let output = flowc_at(&dir, &store, TODAY, &[&args[..], &["--max-session-time", "1m"]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "note: --max-steps-per-turn, --max-session-time limit only conversations; this is a workflow run"
        ),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).contains(": waiting: resumes at"), "{}", stdout(&output));
}

#[test]
fn run_resume_and_worker_help_list_their_limit_flags() {
    let dir = temp_dir("limits-help");
    let help = |command: &str| stdout(&flowc(&dir, &[command, "--help"]));
    let run = help("run");
    for flag in [
        "--max-steps-per-turn <N>",
        "--max-session-tokens <N>",
        "--max-session-time <DURATION>",
        "--max-consecutive-errors <N>",
        "--max-steps <N>",
        "--max-time <DURATION>",
    ] {
        assert!(run.contains(flag), "flowc run --help lists {flag}: {run}");
    }
    for command in ["resume", "worker"] {
        let text = help(command);
        for flag in ["--max-steps <N>", "--max-time <DURATION>", "--max-consecutive-errors <N>"] {
            assert!(text.contains(flag), "flowc {command} --help lists {flag}: {text}");
        }
        assert!(!text.contains("--max-steps-per-turn"), "{command} runs no conversation: {text}");
    }
}
