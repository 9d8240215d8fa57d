//! `flowc run` end to end: scripted conversations over every example with
//! `--json` (snapshotted, and every line checked against the keys DESIGN.md
//! fixes), the onboarding workflow run, and the exit codes.

use crate::snapshot;
use crate::support::{flowc, flowc_in, root, stderr, stdout, temp_dir};
use serde_json::{Value, json};
use std::process::Output;

/// The keys of one `--json` turn, in DESIGN.md's order.
const TURN_KEYS: [&str; 11] = [
    "turn",
    "user",
    "reply",
    "flow",
    "step",
    "executed_steps",
    "stopped_reason",
    "data",
    "directives",
    "llm_calls",
    "tokens",
];
const DIRECTIVE_KEYS: [&str; 3] = ["source", "directive", "applied"];
const TOKEN_KEYS: [&str; 3] = ["prompt", "completion", "cached"];
/// The keys of a workflow run's `--json` object, and of each step record.
const RUN_KEYS: [&str; 13] = [
    "run",
    "status",
    "flow",
    "step",
    "stopped_reason",
    "resume_at",
    "data",
    "steps",
    "duration_ms",
    "events",
    "error",
    "llm_calls",
    "tokens",
];
const STEP_KEYS: [&str; 6] = ["id", "status", "started_at", "duration_ms", "output", "error"];

fn keys(value: &Value) -> Vec<&str> {
    match value.as_object() {
        Some(object) => object.keys().map(String::as_str).collect(),
        None => panic!("not an object: {value}"),
    }
}

fn assert_turn_shape(turn: &Value) {
    assert_eq!(keys(turn), TURN_KEYS, "{turn}");
    assert_eq!(keys(&turn["tokens"]), TOKEN_KEYS);
    for record in turn["directives"].as_array().into_iter().flatten() {
        assert_eq!(keys(record), DIRECTIVE_KEYS, "{record}");
        let source = record["source"].as_str().unwrap_or_default();
        let known = ["pending", "signal:", "branch:", "hook:", "action:", "tool:", "on_no_answer:", "on_error:"];
        assert!(known.iter().any(|prefix| source.starts_with(prefix)), "source `{source}`");
        assert!(record["applied"].is_boolean());
    }
    assert!(turn["data"].is_object());
    assert!(turn["executed_steps"].is_array());
    assert!(turn["llm_calls"].is_u64());
}

/// Runs a conversation from a script with `--json`; every line must be one
/// turn of the documented shape.
fn conversation(file: &str, messages: &[&str], extra: &[&str]) -> (Output, Vec<Value>) {
    // Tests run in parallel: each conversation gets its own directory.
    static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = temp_dir(&format!("run-{}", COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let script = dir.join("script.txt");
    let mut text = messages.join("\n");
    text.push('\n');
    if let Err(error) = std::fs::write(&script, text) {
        panic!("cannot write the script: {error}");
    }
    let script = script.to_string_lossy().into_owned();
    let mut args = vec!["run", file, "--script", &script, "--json"];
    args.extend_from_slice(extra);
    let output = flowc(&args);
    let _ = std::fs::remove_dir_all(&dir);
    let turns: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(value) => value,
            Err(error) => panic!("not JSON ({error}): {line}"),
        })
        .collect();
    for turn in &turns {
        assert_turn_shape(turn);
    }
    (output, turns)
}

/// A conversation that must end normally with one line per message; the
/// snapshot holds every turn, pretty-printed, and anything on stderr.
fn snapshot_conversation(name: &str, file: &str, messages: &[&str], extra: &[&str]) -> Vec<Value> {
    let (output, turns) = conversation(file, messages, extra);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(turns.len(), messages.len());
    let mut command = vec!["$ flowc run", file, "--script", "SCRIPT", "--json"];
    command.extend_from_slice(extra);
    let mut text = command.join(" ");
    text.push('\n');
    for turn in &turns {
        text.push_str(&serde_json::to_string_pretty(turn).unwrap_or_default());
        text.push('\n');
    }
    let errors = stderr(&output);
    if !errors.is_empty() {
        text.push_str("--- stderr\n");
        text.push_str(&errors);
    }
    snapshot!(format!("run__{name}"), text);
    turns
}

fn replies(turns: &[Value]) -> Vec<&str> {
    turns.iter().map(|turn| turn["reply"].as_str().unwrap_or_default()).collect()
}

fn field<'a>(turn: &'a Value, key: &str) -> &'a Value {
    &turn[key]
}

// ------------------------------------------------------------ booking

#[test]
fn booking_one_question_at_a_time() {
    let turns = snapshot_conversation(
        "booking_one_question_at_a_time",
        "flows/booking.flow",
        &["Hi, I'd like to book a hotel room", "The Grand Hotel, please", "2026-12-04", "2 guests", "yes"],
        &[],
    );
    assert_eq!(
        replies(&turns),
        [
            "Which hotel would you like to book?",
            "For which date?",
            "How many guests?",
            "Shall I book Grand Hotel on 2026-12-04 for 2 guests?",
            "Booked! Your confirmation number is GH-28745CD2.",
        ]
    );
    let last = &turns[4];
    assert_eq!(field(last, "executed_steps"), &json!(["confirm", "book"]));
    assert_eq!(field(last, "stopped_reason"), "flow_complete");
    assert_eq!(field(last, "flow"), &Value::Null);
    // The booking id comes from the exec tool in flows/tools/book_hotel.py.
    assert_eq!(field(last, "data")["booking_id"], "GH-28745CD2");
    // The say needs no reply call: only the understand call is made.
    assert_eq!(field(last, "llm_calls"), 1);
    let calls: Vec<u64> = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap_or(99)).collect();
    // Each question is written in the understand call (the fused reply).
    assert_eq!(calls, [1, 1, 1, 1, 1]);
}

#[test]
fn booking_in_one_message_asks_to_confirm_in_the_first_reply() {
    let turns = snapshot_conversation(
        "booking_in_one_message",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "yes"],
        &[],
    );
    assert_eq!(turns[0]["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert_eq!(turns[0]["executed_steps"], json!(["ask_hotel", "ask_date", "confirm"]));
    assert_eq!(turns[0]["data"], json!({ "hotel": "Grand Hotel", "date": "2026-12-04", "guests": 2 }));
    assert_eq!(turns[1]["data"]["booking_id"], "GH-28745CD2");
}

#[test]
fn booking_changing_the_date_at_confirmation_asks_for_the_date_again() {
    let turns = snapshot_conversation(
        "booking_change_the_date",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "actually, can we change the date?", "2026-12-06", "yes"],
        &[],
    );
    assert_eq!(turns[1]["reply"], "For which date?");
    assert_eq!(turns[1]["step"], "ask_date");
    assert_eq!(turns[1]["directives"][0]["source"], "branch:booking.confirm#2");
    assert!(turns[1]["data"].get("date").is_none(), "the branch unset the date");
    assert_eq!(turns[2]["reply"], "Shall I book Grand Hotel on 2026-12-06 for 2 guests?");
    assert_eq!(turns[3]["reply"], "Booked! Your confirmation number is GH-BBCFEF72.");
}

#[test]
fn booking_declined_is_cancelled() {
    let turns = snapshot_conversation(
        "booking_declined",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "no"],
        &[],
    );
    assert_eq!(turns[1]["reply"], "No problem, nothing was booked.");
    assert_eq!(turns[1]["executed_steps"], json!(["confirm", "cancelled"]));
    assert_eq!(turns[1]["data"]["confirmed"], false);
    assert!(turns[1]["data"].get("booking_id").is_none());
}

/// Issue 12: `confirmed: true` survived the finished booking, so the second
/// booking of the session was made at once, without a "yes".
#[test]
fn booking_a_second_booking_in_a_session_asks_again() {
    let turns = snapshot_conversation(
        "booking_a_second_booking",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "yes", "Now book the Overlook for 3 guests on 2027-01-10"],
        &[],
    );
    assert_eq!(turns[1]["reply"], "Booked! Your confirmation number is GH-28745CD2.");
    let second = &turns[2];
    assert_eq!(second["reply"], "Shall I book Overlook on 2027-01-10 for 3 guests?");
    assert_eq!(second["executed_steps"], json!(["ask_hotel", "ask_date", "confirm"]));
    assert_eq!(second["stopped_reason"], "needs_input");
    assert!(second["data"].get("confirmed").is_none(), "the first booking's consent is gone");
    assert_eq!(second["data"]["booking_id"], "GH-28745CD2", "nothing was booked again");
}

/// Issue 12: "No, make it December 12 instead" at the confirmation threw the
/// new date away, asked for a date, then cancelled on the stale `no`.
#[test]
fn booking_no_with_a_new_date_confirms_the_new_date() {
    let turns = snapshot_conversation(
        "booking_no_with_a_new_date",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "No, make it December 12 instead", "yes"],
        &[],
    );
    let changed = &turns[1];
    assert_eq!(changed["reply"], "Shall I book Grand Hotel on 2026-12-12 for 2 guests?");
    assert_eq!(changed["stopped_reason"], "needs_input");
    assert_eq!(changed["step"], "confirm");
    assert_eq!(changed["data"]["date"], "2026-12-12");
    assert!(changed["data"].get("confirmed").is_none(), "the `no` was about the old date");
    // No branch decided it: the confirmation was reopened by the new date.
    assert_eq!(changed["directives"], json!([]));
    assert_eq!(turns[2]["executed_steps"], json!(["confirm", "book"]));
    assert_eq!(turns[2]["data"]["date"], "2026-12-12");
}

/// "No, 3 guests" cancelled the booking: only a changed date re-confirmed.
/// A consent binds to every value the confirmation asked about.
#[test]
fn booking_no_with_new_guests_confirms_the_new_count() {
    let turns = snapshot_conversation(
        "booking_no_with_new_guests",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "No, 3 guests", "yes"],
        &[],
    );
    assert_eq!(turns[1]["reply"], "Shall I book Grand Hotel on 2026-12-04 for 3 guests?");
    assert_eq!(turns[1]["step"], "confirm");
    assert!(turns[1]["data"].get("confirmed").is_none(), "the `no` was about 2 guests");
    assert_eq!(turns[2]["executed_steps"], json!(["confirm", "book"]));
    assert_eq!(turns[2]["data"]["guests"], 3);
}

#[test]
fn booking_another_hotel_at_confirmation_confirms_that_hotel() {
    let turns = snapshot_conversation(
        "booking_another_hotel",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "actually the Overlook", "yes"],
        &[],
    );
    assert_eq!(turns[1]["reply"], "Shall I book Overlook on 2026-12-04 for 2 guests?");
    assert!(turns[1]["data"].get("booking_id").is_none());
    assert_eq!(turns[2]["executed_steps"], json!(["confirm", "book"]));
    assert_eq!(turns[2]["data"]["hotel"], "Overlook");
}

#[test]
fn booking_yaml_holds_the_same_conversation() {
    let scripts: [&[&str]; 5] = [
        &["Hi, I'd like to book a hotel room", "The Grand Hotel, please", "2026-12-04", "2 guests", "yes"],
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "yes", "Now book the Overlook for 3 guests on 2027-01-10"],
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "No, make it December 12 instead", "yes"],
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "No, 3 guests", "yes"],
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "actually the Overlook", "yes"],
    ];
    for messages in scripts {
        let (_, from_flow) = conversation("flows/booking.flow", messages, &[]);
        let (_, from_yaml) = conversation("flows/booking.yaml", messages, &[]);
        assert_eq!(from_flow, from_yaml);
    }
}

// ------------------------------------------------ issue 12 on record/replay

/// Runs a script offline with `--record`, then again from the recording
/// with `replay:`: the two must print the same turns. Returns the replayed
/// turns, for the caller to check the behaviour on them.
fn recorded_and_replayed(name: &str, file: &str, messages: &[&str]) -> Vec<Value> {
    let dir = temp_dir(&format!("replay-{name}"));
    let recording = dir.join("recording.json").to_string_lossy().into_owned();
    let (recorded, recorded_turns) = conversation(file, messages, &["--record", &recording]);
    assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
    let file_text = std::fs::read_to_string(&recording).unwrap_or_default();
    let stored: Value = serde_json::from_str(&file_text).unwrap_or_default();
    assert_eq!(stored["provider"], "offline", "{name}: recorded from the offline provider");
    assert!(stored["calls"].as_array().is_some_and(|calls| !calls.is_empty()), "{name}: calls were recorded");
    let replay = format!("replay:{recording}");
    let (replayed, replayed_turns) = conversation(file, messages, &["--provider", &replay]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(replayed.status.code(), Some(0), "{name}: {}", stderr(&replayed));
    assert_eq!(replayed_turns, recorded_turns, "{name}: the replay answers turn for turn as recorded");
    assert_eq!(replayed_turns.len(), messages.len());
    replayed_turns
}

/// Issue 12, items 3 and 4 on record/replay: a second booking asks again,
/// and a refusal that changes a value (date, guests, hotel) re-confirms it.
#[test]
fn issue_12_booking_transcripts_replay_as_recorded() {
    let second = recorded_and_replayed(
        "second-booking",
        "flows/booking.flow",
        &["Book the Grand Hotel for 2 guests on 2026-12-04", "yes", "Now book the Overlook for 3 guests on 2027-01-10"],
    );
    assert_eq!(second[2]["reply"], "Shall I book Overlook on 2027-01-10 for 3 guests?");
    assert!(second[2]["data"].get("confirmed").is_none());
    for (name, change, reply) in [
        ("new-date", "No, make it December 12 instead", "Shall I book Grand Hotel on 2026-12-12 for 2 guests?"),
        ("new-guests", "No, 3 guests", "Shall I book Grand Hotel on 2026-12-04 for 3 guests?"),
        ("new-hotel", "actually the Overlook", "Shall I book Overlook on 2026-12-04 for 2 guests?"),
    ] {
        let turns = recorded_and_replayed(
            name,
            "flows/booking.flow",
            &["Book the Grand Hotel for 2 guests on 2026-12-04", change, "yes"],
        );
        assert_eq!(turns[1]["reply"], reply, "{name}");
        assert_eq!(turns[2]["executed_steps"], json!(["confirm", "book"]), "{name}");
    }
}

/// Issue 12, items 5 and 6 on record/replay: a failing tool answered by an
/// `on_error` reply (and the step stays), by the default apology and abort,
/// and the hooks of every step of a batch, in order.
#[test]
fn issue_12_on_error_and_batched_hooks_replay_as_recorded() {
    let turns = recorded_and_replayed(
        "failing-tool",
        "tests/fixtures/replay/failing_tool.flow",
        &[
            "I want to reserve a room at the Grand Hotel",
            "again please",
            "I want to order a room at the Overlook",
            "I want a survey",
        ],
    );
    let down = "The booking system is down; please try again later.";
    assert_eq!(replies(&turns[..2]), [down, down]);
    assert_eq!(turns[1]["step"], "book", "on_error reply stays at the step");
    assert_eq!(turns[2]["reply"], "Sorry, something went wrong, so I stopped \"Order a room\". Nothing more was done.");
    assert_eq!(turns[2]["stopped_reason"], "aborted");
    assert_eq!(turns[3]["data"]["notes"], "intro prepared, ask_color prepared, intro finalized, ask_color finalized");
}

// ------------------------------------------------------------ support

#[test]
fn support_code_only_billing_branch_jumps_to_billing_with_data_then_the_survey() {
    let turns = snapshot_conversation(
        "support_billing",
        "flows/support.yaml",
        &["Hi, I need help", "ann@example.com", "billing", "ORD-1234", "I was charged twice", "yes"],
        &[],
    );
    // The code-only entry `issue == "billing"` jumps to another flow, carrying data.
    assert_eq!(turns[2]["directives"][0]["source"], "branch:triage.ask_issue#1");
    assert_eq!(
        turns[2]["directives"][0]["directive"],
        json!({ "goto": { "flow": "billing", "data": { "severity": "low" } } })
    );
    assert_eq!(turns[2]["flow"], "billing");
    assert_eq!(turns[2]["data"]["severity"], "low");
    // The email is known: billing's ask_email is skipped.
    assert_eq!(turns[2]["executed_steps"], json!(["ask_issue", "ask_order"]));
    // complete.next enters the survey in the same turn, one reply for both.
    assert_eq!(turns[4]["executed_steps"], json!(["ask_reason", "file_refund", "ask_satisfied"]));
    assert_eq!(turns[4]["flow"], "survey");
    assert_eq!(turns[4]["reply"], "Refund request TCK-FD3579 is filed for ORD-1234.\nDid that solve your problem?");
    assert_eq!(turns[5]["reply"], "Glad to hear it. Have a great day!");
}

#[test]
fn support_mixed_branch_needs_the_code_and_the_ai_condition() {
    let turns = snapshot_conversation(
        "support_urgent",
        "flows/support.yaml",
        &["Hi", "ann@example.com", "it's technical: the service is down"],
        &[],
    );
    assert_eq!(turns[2]["executed_steps"], json!(["ask_issue", "urgent", "ask_satisfied"]));
    assert_eq!(turns[2]["data"]["severity"], "high");
    assert_eq!(turns[2]["data"]["ticket_id"], "URG-D45A93");
    assert_eq!(turns[2]["flow"], "survey");
}

#[test]
fn support_ai_only_branch_hands_an_upset_user_over() {
    let turns = snapshot_conversation(
        "support_upset",
        "flows/support.yaml",
        &["Hi", "bob@example.com", "I am so angry and upset"],
        &[],
    );
    assert_eq!(turns[2]["executed_steps"], json!(["ask_issue", "connect"]));
    assert_eq!(turns[2]["reply"], "I'm connecting you with a colleague now. Please stay in this chat.");
    assert_eq!(turns[2]["directives"][0]["source"], "branch:triage.ask_issue#3");
    assert_eq!(turns[2]["directives"][0]["directive"], json!({ "goto": "handoff" }));
    // The offline synonyms fold `upset` and `frustrated` together, so the
    // post-phase `frustrated` signal also matches and arms a handoff for
    // the next turn (its directive is recorded, not applied).
    assert_eq!(turns[2]["directives"][1]["source"], "signal:frustrated");
    assert_eq!(turns[2]["directives"][1]["applied"], false);
}

#[test]
fn support_fallback_branch_asks_for_details_and_files_a_ticket() {
    let turns = snapshot_conversation(
        "support_fallback",
        "flows/support.yaml",
        &["Hi", "bob@example.com", "it's my account", "I cannot log in", "no"],
        &[],
    );
    assert_eq!(turns[2]["step"], "ask_details");
    assert_eq!(turns[3]["data"]["ticket_id"], "TCK-62900F");
    assert_eq!(turns[4]["reply"], "Sorry about that. A colleague will follow up by email.");
}

#[test]
fn support_routes_a_first_message_straight_to_billing_with_its_order_number() {
    let turns = snapshot_conversation(
        "support_route_to_billing",
        "flows/support.yaml",
        &["I want a refund for ORD-1234", "ann@example.com", "damaged"],
        &[],
    );
    assert_eq!(turns[0]["flow"], "billing");
    assert_eq!(turns[0]["data"]["order_id"], "ORD-1234", "pre-extracted from the first message");
    assert_eq!(turns[1]["executed_steps"], json!(["ask_email", "ask_order", "ask_reason"]));
}

#[test]
fn support_gold_tier_signal_hands_over_at_once() {
    let turns = snapshot_conversation(
        "support_gold_signal",
        "flows/support.yaml",
        &["Hi", "I want to talk to a real person"],
        &["--context", r#"{"tier":"gold"}"#],
    );
    assert_eq!(turns[1]["directives"][0]["source"], "signal:wants_human");
    assert_eq!(turns[1]["directives"][0]["applied"], true);
    assert_eq!(turns[1]["data"]["handoff_reason"], "asked for a person");
    assert_eq!(turns[1]["executed_steps"], json!(["connect"]));
}

#[test]
fn support_without_gold_tier_the_signal_is_not_asked() {
    let (output, turns) = conversation("flows/support.yaml", &["Hi", "I want to talk to a real person"], &[]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(turns[1]["directives"], json!([]));
    assert_eq!(turns[1]["step"], "ask_email");
}

#[test]
fn support_post_phase_frustrated_signal_hands_over_on_the_next_turn() {
    let turns = snapshot_conversation(
        "support_frustrated",
        "flows/support.yaml",
        &["Hi", "it still does not work, I am frustrated", "hello?"],
        &[],
    );
    assert_eq!(turns[1]["step"], "ask_email", "the turn itself goes on");
    assert_eq!(turns[1]["directives"][0]["source"], "signal:frustrated");
    assert_eq!(turns[1]["directives"][0]["applied"], false);
    assert_eq!(turns[2]["directives"][0]["source"], "pending");
    assert_eq!(turns[2]["directives"][0]["applied"], true);
    assert_eq!(turns[2]["data"]["handoff_reason"], "frustrated");
    assert_eq!(turns[2]["llm_calls"], 0, "a pending turn skips understanding; the say needs no reply");
}

// ------------------------------------------------------------ workflows

fn run_object(output: &Output) -> Value {
    let text = stdout(output);
    let value: Value = match serde_json::from_str(text.trim()) {
        Ok(value) => value,
        Err(error) => panic!("not one JSON object ({error}): {text}"),
    };
    assert_eq!(keys(&value), RUN_KEYS);
    for step in value["steps"].as_array().into_iter().flatten() {
        assert_eq!(keys(step), STEP_KEYS, "{step}");
    }
    value
}

#[test]
fn onboarding_runs_to_the_wait_and_continues_past_a_failing_contact() {
    let data = r#"{"company": "Initech", "contacts": [{"name": "Ann", "email": "ann@initech.test"}, {"name": "Bob", "email": "not-an-email"}]}"#;
    let output = flowc(&["run", "flows/onboarding.flow", "--data", data, "--json"]);
    assert_eq!(output.status.code(), Some(0), "waiting is a normal end: {}", stderr(&output));
    let run = run_object(&output);
    assert_eq!(run["status"], "waiting");
    assert_eq!(run["step"], "wait_a_day");
    assert_eq!(run["resume_at"], "2026-01-06T10:00:00Z");
    let statuses: Vec<(&str, &str)> = run["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|step| (step["id"].as_str().unwrap_or_default(), step["status"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("start", "completed"),
            ("create_account", "completed"),
            ("welcome_contacts", "failed"),
            ("wait_a_day", "waiting"),
            ("check", "pending"),
            ("nudge", "pending"),
            ("done", "pending"),
        ]
    );
    assert!(
        run["steps"][2]["error"].as_str().unwrap_or_default().contains("cannot send to 'not-an-email'"),
        "{}",
        run["steps"][2]
    );
    assert_eq!(run["data"]["account_id"], "ACC-834D492E");
    assert!(stderr(&output).contains("failed and the run continued"), "{}", stderr(&output));
    let mut text = serde_json::to_string_pretty(&run).unwrap_or_default();
    text.push_str("\n--- stderr\n");
    text.push_str(&stderr(&output));
    snapshot!("run__onboarding_workflow", text);
}

#[test]
fn onboarding_without_json_prints_a_summary_line() {
    let data = r#"{"company": "Initech", "contacts": [{"name": "Ann", "email": "ann@initech.test"}]}"#;
    let output = flowc(&["run", "flows/onboarding.flow", "--data", data]);
    assert_eq!(output.status.code(), Some(0));
    let line = stdout(&output);
    assert!(line.starts_with("run "), "{line}");
    assert!(line.trim_end().ends_with("waiting: resumes at 2026-01-06T10:00:00Z"), "{line}");
}

// ------------------------------------------------------------ exit codes

#[test]
fn a_program_with_errors_is_not_run_and_exits_1() {
    let dir = temp_dir("run-broken");
    let file = dir.join("broken.flow");
    let written = std::fs::write(&file, "flow f {\n  when \"hi\"\n  step a { next nowhere }\n}\n");
    assert!(written.is_ok());
    let output = flowc_in(&dir, &["run", "broken.flow"], Some("hello\n"));
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(stderr(&output).contains("flowc::unknown_target"), "{}", stderr(&output));
    assert!(stderr(&output).contains("nothing was run"), "{}", stderr(&output));
}

const FAILING_TOOL: &str = r#"
schema { a: string  id: string }
tool broken(a: string) -> { id: string } { exec "false" }
flow f "F" {
  when "the user wants a widget"
  step ask_a { prompt "Which colour?" collect a }
  # `stop`: the turn fails rather than answer (the default answers).
  auto step call_it { call broken(a) -> id  on_error stop }
}
flow w "Workflow" {
  requires a
  auto step call_it { call broken(a) -> id }
  auto step after { set id = "never" }
}
"#;

#[test]
fn a_failed_turn_exits_1_and_says_why() {
    let dir = temp_dir("run-failed-turn");
    let written = std::fs::write(dir.join("failing.flow"), FAILING_TOOL);
    assert!(written.is_ok());
    let output = flowc_in(&dir, &["run", "failing.flow", "--json"], Some("I want a widget\nred\nnever reached\n"));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 1, "the first turn answered, the second failed: {lines:?}");
    assert!(stderr(&output).contains("`broken` failed"), "{}", stderr(&output));
}

#[test]
fn a_failed_workflow_run_exits_1_and_marks_later_steps_skipped() {
    let dir = temp_dir("run-failed-workflow");
    let written = std::fs::write(dir.join("failing.flow"), FAILING_TOOL);
    assert!(written.is_ok());
    let output = flowc_in(&dir, &["run", "failing.flow", "--flow", "w", "--data", r#"{"a": "x"}"#, "--json"], None);
    assert_eq!(output.status.code(), Some(1));
    let run = run_object(&output);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["step"], "call_it");
    assert_eq!(run["steps"][0]["status"], "failed");
    assert_eq!(run["steps"][1]["status"], "skipped");
    assert_eq!(run["steps"][1]["error"], "previous step failed");
}

#[test]
fn missing_workflow_inputs_are_a_usage_error() {
    let output = flowc(&["run", "flows/onboarding.flow", "--data", r#"{"company": "Initech"}"#]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert!(stderr(&output).contains("needs its inputs: `contacts`"), "{}", stderr(&output));
}

#[test]
fn bad_data_json_is_a_usage_error() {
    let output = flowc(&["run", "flows/onboarding.flow", "--data", r#"{"company": "#]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--data is not valid JSON"), "{}", stderr(&output));
    let output = flowc(&["run", "flows/onboarding.flow", "--data", "[1, 2]"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--data must be a JSON object"), "{}", stderr(&output));
}

#[test]
fn script_mode_without_json_prints_replies_and_the_trace_on_stderr() {
    let output =
        flowc_in(root(), &["run", "flows/booking.flow"], Some("Book the Grand Hotel for 2 guests on 2026-12-04\nno\n"));
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "Shall I book Grand Hotel on 2026-12-04 for 2 guests?\nNo problem, nothing was booked.\n"
    );
    assert_eq!(
        stderr(&output),
        "[booking/confirm · ran ask_hotel, ask_date, confirm · needs_input · 1 model call]\n\
         [no flow · ran confirm, cancelled · flow_complete · 1 model call]\n"
    );
}

/// What a confirmation asked about is part of the stored session: "No, 3
/// guests" in a later process still asks again for 3 guests.
#[test]
fn a_stored_session_remembers_what_its_confirmation_offered() {
    let dir = temp_dir("run-offered");
    let booking = root().join("flows/booking.flow").to_string_lossy().into_owned();
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let args = ["run", &booking, "--session", "b1", "--json", "--store", &store];
    let first = flowc_in(&dir, &args, Some("Book the Grand Hotel for 2 guests on 2026-12-04\n"));
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let second = flowc_in(&dir, &args, Some("No, 3 guests\n"));
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let turn: Value = serde_json::from_str(stdout(&second).trim()).unwrap_or_default();
    assert_eq!(turn["reply"], "Shall I book Grand Hotel on 2026-12-04 for 3 guests?");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_session_resumes_across_runs_and_a_failed_turn_leaves_the_stored_one_as_it_was() {
    let dir = temp_dir("run-sessions");
    let booking = root().join("flows/booking.flow").to_string_lossy().into_owned();
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let first = flowc_in(
        &dir,
        &["run", &booking, "--session", "b1", "--json", "--store", &store],
        Some("Book the Grand Hotel for 2 guests on 2026-12-04\n"),
    );
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let second = flowc_in(&dir, &["run", &booking, "--session", "b1", "--json", "--store", &store], Some("yes\n"));
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let turn: Value = serde_json::from_str(stdout(&second).trim()).unwrap_or_default();
    assert_eq!(turn["turn"], 2, "the second run goes on with the stored session");
    assert_eq!(turn["reply"], "Booked! Your confirmation number is GH-28745CD2.");

    let written = std::fs::write(dir.join("failing.flow"), FAILING_TOOL);
    assert!(written.is_ok());
    let show = |id: &str| stdout(&flowc_in(&dir, &["sessions", "show", id, "--json", "--store", &store], None));
    let started =
        flowc_in(&dir, &["run", "failing.flow", "--session", "w1", "--store", &store], Some("I want a widget\n"));
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let before = show("w1");
    let stored: Value = serde_json::from_str(before.trim()).unwrap_or_default();
    assert_eq!(stored["turns"], 1, "{before}");
    let failed = flowc_in(&dir, &["run", "failing.flow", "--session", "w1", "--store", &store], Some("red\n"));
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(show("w1"), before, "the failed turn saved nothing");
    let _ = std::fs::remove_dir_all(&dir);
}
