//! Model steps end to end: flows/outreach runs offline and reports its
//! model calls and tokens as a turn does, the two syntaxes agree, a
//! recorded run replays with no model, and a run resumed after a wait
//! asks the model only for the steps that had not completed. In a
//! conversation, model steps in a flow's hook and an auto step count in
//! the turn, are answered by the step's `on_error` when they fail, stop at
//! the turn's token limit, and are recorded and replayed with the turn.

use crate::support::{flowc, flowc_env, root, stderr, stdout, temp_dir};
use crate::workflows::{flowc_at, json, run_id, started_steps, store_in};
use serde_json::Value;
use std::time::Duration;

const TODAY: &str = "2026-01-05T10:00:00Z";
const TOMORROW: &str = "2026-01-06T10:00:01Z";
const CONTACTS: &str =
    r#"{"contacts": [{"name": "Ann", "email": "ann@example.com"}, {"name": "Bo", "email": "bo@example.com"}]}"#;

#[test]
fn outreach_is_the_same_program_in_both_syntaxes() {
    let from_flow = flowc(&["compile", "flows/outreach.flow"]);
    let from_yaml = flowc(&["compile", "flows/outreach.yaml"]);
    assert_eq!(from_flow.status.code(), Some(0), "{}", stderr(&from_flow));
    assert!(stdout(&from_flow).contains("\"action\": \"ask_model\""), "{}", stdout(&from_flow));
    assert_eq!(stdout(&from_flow), stdout(&from_yaml));
}

#[test]
fn outreach_runs_offline_and_reports_its_model_calls_and_tokens() {
    let dir = temp_dir("ms-outreach");
    let store = store_in(&dir);
    let program = root().join("flows/outreach.flow").to_string_lossy().into_owned();
    let output = flowc_at(&dir, &store, TODAY, &["run", &program, "--data", CONTACTS, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = json(&output);
    assert_eq!(run["status"], "completed", "{run}");
    // One call for the tone, one per contact, one for the summary.
    assert_eq!(run["llm_calls"], 4);
    assert!(run["tokens"]["prompt"].as_u64().is_some_and(|tokens| tokens > 0), "{run}");
    assert!(run["tokens"]["completion"].as_u64().is_some_and(|tokens| tokens > 0), "{run}");
    assert_eq!(run["data"]["tone"], "warm");
    assert_eq!(run["steps"][0]["output"], serde_json::json!({"tone": "warm"}));
    assert_eq!(
        run["data"]["sent"],
        serde_json::json!([
            "Write a short warm welcome for Ann, in one sentence.",
            "Write a short warm welcome for Bo, in one sentence."
        ])
    );
    let summary = run["data"]["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("Summarise in one sentence the welcomes sent:") && summary.contains("Bo"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recorded_outreach_replays_with_no_model() {
    let dir = temp_dir("ms-replay");
    let store = store_in(&dir);
    let program = root().join("flows/outreach.flow").to_string_lossy().into_owned();
    let recording = dir.join("outreach.json").to_string_lossy().into_owned();
    let recorded =
        flowc_at(&dir, &store, TODAY, &["run", &program, "--data", CONTACTS, "--json", "--record", &recording]);
    assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
    let file = std::fs::read_to_string(&recording).unwrap_or_default();
    assert_eq!(file.matches("\"kind\": \"ask\"").count() + file.matches("\"kind\":\"ask\"").count(), 4, "{file}");
    let provider = format!("replay:{recording}");
    let replayed =
        flowc_at(&dir, &store, TODAY, &["run", &program, "--data", CONTACTS, "--json", "--provider", &provider]);
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    let (recorded, replayed) = (json(&recorded), json(&replayed));
    assert_eq!(replayed["data"], recorded["data"]);
    assert_eq!(replayed["llm_calls"], 4);
    assert_eq!(replayed["tokens"], recorded["tokens"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_resumed_after_a_wait_asks_only_for_the_steps_that_had_not_run() {
    let dir = temp_dir("ms-resume");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("model_wait.flow"), include_str!("../fixtures/workflows/model_wait.flow")).is_ok());
    let started = flowc_at(&dir, &store, TODAY, &["run", "model_wait.flow", "--data", r#"{"name": "Ann"}"#]);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let id = run_id(&started);
    let waiting = json(&flowc_at(&dir, &store, TODAY, &["runs", "show", &id, "--json"]));
    assert_eq!(waiting["status"], "waiting");
    assert_eq!(waiting["llm_calls"], 1);
    // The store's step row holds the answer: what a resume reads.
    assert_eq!(waiting["steps"][0]["output"], serde_json::json!({"greeting": "Greet Ann warmly."}));

    let resumed = flowc_at(&dir, &store, TOMORROW, &["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!(run["status"], "completed");
    assert_eq!(started_steps(&run), ["greet", "pause", "rate"], "no completed step ran again");
    // One call before the wait, one after it: none for the completed step.
    assert_eq!(run["llm_calls"], 2);
    assert_eq!(run["data"]["greeting"], "Greet Ann warmly.");
    // "9" is read from the instruction and clamped to the field's range.
    assert_eq!(run["data"]["rating"], 5);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recording_that_cannot_be_read_is_a_usage_error_before_any_step_runs() {
    let dir = temp_dir("ms-noprovider");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("model_wait.flow"), include_str!("../fixtures/workflows/model_wait.flow")).is_ok());
    let missing = dir.join("missing.json").to_string_lossy().into_owned();
    let provider = format!("replay:{missing}");
    let output = flowc_env(
        &dir,
        &["run", "model_wait.flow", "--data", r#"{"name": "Ann"}"#, "--provider", &provider],
        &[("FLOWC_STORE", &store), ("FLOWC_NOW", TODAY)],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(2), "a recording that cannot be read is a usage error: {}", stderr(&output));
    assert!(stderr(&output).contains("missing.json"), "{}", stderr(&output));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A code no offline answer can match: the answer is refused, repaired,
/// refused again, and the step's `on_error` decides.
const REJECTED: &str = r#"schema {
  name: string
  code: string pattern "^[A-Z]{3}-[0-9]{4}$" "A ticket code"
  note: string
}

flow tickets "Tickets" {
  requires name
  auto step code {
    ask_model code: "Make up a ticket code for {{name}}"
    on_error continue
  }
  auto step note {
    set note = "done"
  }
}
"#;

#[test]
fn an_answer_still_invalid_after_its_repair_fails_the_step_and_on_error_decides() {
    let dir = temp_dir("ms-rejected");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("tickets.flow"), REJECTED).is_ok());
    let output = flowc_at(&dir, &store, TODAY, &["run", "tickets.flow", "--data", r#"{"name": "Ann"}"#, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = json(&output);
    assert_eq!(run["status"], "completed", "on_error continue went on: {run}");
    assert_eq!(run["steps"][0]["status"], "failed");
    let error = run["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("does not fit it, after one repair") && error.contains("pattern"), "{error}");
    assert_eq!(run["data"]["note"], "done");
    assert!(run["data"].get("code").is_none(), "nothing was written: {run}");
    // The answer and its repair: two calls, both counted.
    assert_eq!(run["llm_calls"], 2);
    let events: Vec<&str> =
        run["events"].as_array().into_iter().flatten().filter_map(|e| e["event"].as_str()).collect();
    assert!(events.contains(&"model_answer_repaired") && events.contains(&"model_answer_rejected"), "{events:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A conversation with model steps in a flow's `on_enter` and in an auto
/// step; the flow is the default, so a message code reads (an email)
/// needs no understand call and the turn's tokens are the model steps'.
const CHAT: &str = r#"agent Desk {
  identity "A help desk."
  limits {
    max_turn_tokens LIMIT
  }
}

schema {
  email: string pattern "^[^@ ]+@[^@ ]+$" "The user's email"
  priority: enum(normal, urgent) "How soon the request needs an answer"
  note: string "A note for the team"
  code: string pattern "^[A-Z]{3}-[0-9]{4}$" "A ticket code"
}

flow chat "Chat" {
  default
  on_enter { ask_model priority: "Is the request normal or urgent?" }
  step ask {
    prompt "Your email?"
    collect email
  }
  auto step judge {
    ask_model note: "Write a note about {{email}}"
    STEP
    on_error abort "The model could not be asked."
    say "Noted: {{note}}"
  }
}
"#;

/// Runs `program` as a conversation on `messages` offline (more `args`
/// after them): the turns (stdout) and the trace's events (stderr).
fn converse(dir: &std::path::Path, program: &str, messages: &str, args: &[&str]) -> (Vec<Value>, Vec<Value>) {
    assert!(std::fs::write(dir.join("chat.flow"), program).is_ok());
    let mut all = vec!["run", "chat.flow", "--json", "--trace"];
    all.extend_from_slice(args);
    let output = crate::support::flowc_in(dir, &all, Some(messages));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines =
        |text: String| -> Vec<Value> { text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect() };
    (lines(stdout(&output)), lines(stderr(&output)))
}

fn model_step_calls(events: &[Value]) -> usize {
    events.iter().filter(|event| event["event"] == "model_called" && event["purpose"] == "model_step").count()
}

#[test]
fn a_conversations_model_steps_run_in_its_hooks_and_auto_steps_and_count_in_the_turn() {
    let dir = temp_dir("ms-chat");
    let program = CHAT.replace("LIMIT", "100000").replace("STEP", "");
    let (turns, events) = converse(&dir, &program, "ann@example.com\n", &[]);
    let [turn] = turns.as_slice() else { panic!("one turn: {turns:?}") };
    assert_eq!(turn["executed_steps"], serde_json::json!(["ask", "judge"]), "{turn}");
    assert_eq!(turn["data"]["priority"], "normal", "the flow's on_enter asked: {turn}");
    assert_eq!(turn["data"]["note"], "Write a note about ann@example.com", "{turn}");
    assert_eq!(turn["reply"], "Noted: Write a note about ann@example.com");
    // The email is read by code: the only calls are the two model steps.
    assert_eq!(model_step_calls(&events), 2, "{events:?}");
    assert_eq!(turn["llm_calls"], 2, "{turn}");
    let spent: u64 = events
        .iter()
        .filter(|event| event["event"] == "model_called")
        .filter_map(|event| Some(event["usage"]["prompt"].as_u64()? + event["usage"]["completion"].as_u64()?))
        .sum();
    let tokens = &turn["tokens"];
    assert_eq!(tokens["prompt"].as_u64().unwrap_or(0) + tokens["completion"].as_u64().unwrap_or(0), spent);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_model_step_in_a_conversation_step_is_answered_by_its_on_error() {
    let dir = temp_dir("ms-chat-fail");
    let program = CHAT.replace("LIMIT", "100000").replace("STEP", "ask_model code: \"Make up a ticket code\"");
    let (turns, events) = converse(&dir, &program, "ann@example.com\n", &[]);
    let [turn] = turns.as_slice() else { panic!("one turn: {turns:?}") };
    assert_eq!(turn["stopped_reason"], "aborted", "{turn}");
    assert_eq!(turn["reply"], "The model could not be asked.");
    assert!(turn["data"].get("note").is_none(), "nothing the failed step wrote is kept: {turn}");
    let failed = events.iter().find(|event| event["event"] == "step_failed").cloned().unwrap_or_default();
    assert!(failed["error"].as_str().is_some_and(|error| error.contains("after one repair")), "{failed}");
    // on_enter, the note, and the code with its repair.
    assert_eq!(model_step_calls(&events), 4, "{events:?}");
    let answers = events.iter().find(|event| event["event"] == "model_answers").cloned().unwrap_or_default();
    assert_eq!(
        answers,
        serde_json::json!({"event": "model_answers", "source": "chat.judge", "repaired": 1, "rejected": 1})
    );
    assert_eq!(turn["llm_calls"], 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_step_is_not_asked_past_the_turns_token_limit() {
    let dir = temp_dir("ms-chat-limit");
    // The flow's on_enter spends 14 tokens offline: the note is not asked.
    let program = CHAT.replace("LIMIT", "12").replace("STEP", "");
    let (turns, events) = converse(&dir, &program, "ann@example.com\n", &[]);
    let [turn] = turns.as_slice() else { panic!("one turn: {turns:?}") };
    assert_eq!(model_step_calls(&events), 1, "{events:?}");
    let failed = events.iter().find(|event| event["event"] == "step_failed").cloned().unwrap_or_default();
    assert_eq!(
        failed["error"], "the model step for `note` was not asked: `agent.limits.max_turn_tokens` is spent",
        "{events:?}"
    );
    assert_eq!(turn["reply"], "The model could not be asked.");
    assert_eq!(turn["stopped_reason"], "token_limit", "{turn}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recorded_conversation_replays_its_model_steps() {
    let dir = temp_dir("ms-chat-replay");
    let program = CHAT.replace("LIMIT", "100000").replace("STEP", "");
    let recording = dir.join("chat.rec.json").to_string_lossy().into_owned();
    let (recorded, _) = converse(&dir, &program, "ann@example.com\n", &["--record", &recording]);
    let file = std::fs::read_to_string(&recording).unwrap_or_default();
    assert_eq!(file.matches("\"kind\": \"ask\"").count() + file.matches("\"kind\":\"ask\"").count(), 2, "{file}");
    let provider = format!("replay:{recording}");
    let (replayed, events) = converse(&dir, &program, "ann@example.com\n", &["--provider", &provider]);
    assert_eq!(replayed[0]["data"], recorded[0]["data"]);
    assert_eq!(replayed[0]["tokens"], recorded[0]["tokens"]);
    assert_eq!(model_step_calls(&events), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three model steps, then a step without one; `agent.limits` bounds the
/// run's model calls (LIMIT), and POLICY is the third step's `on_error`.
const LETTERS: &str = r#"agent Writer {
  limits {
    LIMIT
  }
}

schema {
  name: string
  greeting: string
  farewell: string
  sign_off: string
  done: bool
}

flow letters "Letters" {
  requires name
  auto step greet { ask_model greeting: "Greet {{name}}" }
  auto step part { ask_model farewell: "Say goodbye to {{name}}" }
  auto step sign {
    ask_model sign_off: "Sign off to {{name}}"
    POLICY
  }
  auto step finish { set done = true }
}
"#;

fn letters(dir: &std::path::Path, limit: &str, policy: &str) -> Value {
    let store = store_in(dir);
    assert!(
        std::fs::write(dir.join("letters.flow"), LETTERS.replace("LIMIT", limit).replace("POLICY", policy)).is_ok()
    );
    let output = flowc_at(dir, &store, TODAY, &["run", "letters.flow", "--data", r#"{"name": "Ann"}"#, "--json"]);
    json(&output)
}

fn events(run: &Value) -> Vec<(&str, &str)> {
    run["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|event| Some((event["event"].as_str()?, event["step"].as_str().unwrap_or_default())))
        .collect()
}

#[test]
fn a_run_past_its_model_call_limit_fails_the_step_without_retrying_it() {
    let dir = temp_dir("ms-run-limit");
    let run = letters(&dir, "max_run_llm_calls 2", "on_error retry 3 backoff 1h");
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["stopped_reason"], "run_model_limit", "{run}");
    assert_eq!(run["step"], "sign");
    assert_eq!(run["llm_calls"], 2, "the third model step was not asked: {run}");
    assert_eq!(
        run["steps"][2]["error"],
        "the model step for `sign_off` was not asked: `agent.limits.max_run_llm_calls` is spent",
        "{run}"
    );
    assert_eq!(run["steps"][3]["status"], "skipped");
    // No retry (an hour's backoff would hold the test): the limit holds for
    // every attempt.
    assert_eq!(started_steps(&run), ["greet", "part", "sign"]);
    assert!(events(&run).contains(&("model_limit_reached", "sign")), "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_past_its_token_limit_fails_at_its_next_model_step() {
    let dir = temp_dir("ms-run-tokens");
    // The first model step spends a few tokens offline, past 1: the next
    // is not asked, and `part` (no `on_error`: stop) fails the run.
    let run = letters(&dir, "max_run_tokens 1", "on_error continue");
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!((&run["step"], &run["stopped_reason"]), (&Value::from("part"), &Value::from("run_model_limit")));
    assert_eq!(run["llm_calls"], 1, "{run}");
    assert_eq!(
        run["steps"][1]["error"], "the model step for `farewell` was not asked: `agent.limits.max_run_tokens` is spent",
        "{run}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn under_on_error_continue_only_the_steps_that_ask_the_model_fail() {
    let dir = temp_dir("ms-run-continue");
    let run = letters(&dir, "max_run_llm_calls 2", "on_error continue");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["steps"][2]["status"], "failed");
    assert_eq!(run["data"]["done"], true, "the step without a model step ran: {run}");
    assert!(run["data"].get("sign_off").is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_resumed_run_counts_the_calls_made_before_its_wait() {
    let dir = temp_dir("ms-run-resume");
    let store = store_in(&dir);
    let program = include_str!("../fixtures/workflows/model_wait.flow");
    let limited = format!("agent Rater {{\n  limits {{ max_run_llm_calls 1 }}\n}}\n{program}");
    assert!(std::fs::write(dir.join("model_wait.flow"), limited).is_ok());
    let started = flowc_at(&dir, &store, TODAY, &["run", "model_wait.flow", "--data", r#"{"name": "Ann"}"#]);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let id = run_id(&started);
    let resumed = json(&flowc_at(&dir, &store, TOMORROW, &["resume", &id, "--json"]));
    assert_eq!(resumed["status"], "failed", "{resumed}");
    assert_eq!(resumed["stopped_reason"], "run_model_limit");
    assert_eq!(resumed["llm_calls"], 1, "{resumed}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_run_limits_read_the_same_in_both_syntaxes_and_must_be_positive() {
    let dir = temp_dir("ms-run-syntax");
    let flow = "agent A {\n  limits { max_run_llm_calls 3  max_run_tokens 500 }\n}\nschema { x: string }\n\
                flow w \"W\" {\n  auto step s { ask_model x: \"An x\" }\n}\n";
    let yaml = "agent:\n  name: A\n  limits: { max_run_llm_calls: 3, max_run_tokens: 500 }\nschema:\n  x: string\n\
                flows:\n  w:\n    title: W\n    steps:\n      - id: s\n        auto: true\n        \
                do: [{ ask_model: { into: x, instruction: \"An x\" } }]\n";
    assert!(std::fs::write(dir.join("w.flow"), flow).is_ok());
    assert!(std::fs::write(dir.join("w.yaml"), yaml).is_ok());
    let (from_flow, from_yaml) = (
        crate::support::flowc_in(&dir, &["compile", "w.flow"], None),
        crate::support::flowc_in(&dir, &["compile", "w.yaml"], None),
    );
    assert_eq!(from_flow.status.code(), Some(0), "{}", stderr(&from_flow));
    assert!(
        stdout(&from_flow).contains("\"max_run_llm_calls\": 3")
            && stdout(&from_flow).contains("\"max_run_tokens\": 500")
    );
    assert_eq!(stdout(&from_flow), stdout(&from_yaml));
    assert!(std::fs::write(dir.join("zero.flow"), flow.replace("max_run_tokens 500", "max_run_tokens 0")).is_ok());
    let zero = crate::support::flowc_in(&dir, &["check", "zero.flow"], None);
    assert_eq!(zero.status.code(), Some(1), "{}", stderr(&zero));
    assert!(stderr(&zero).contains("`max_run_tokens` must be a whole number of at least 1"), "{}", stderr(&zero));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_step_is_not_asked_past_the_operators_session_token_limit() {
    let dir = temp_dir("ms-chat-session");
    let program = CHAT.replace("LIMIT", "100000").replace("STEP", "");
    // The flow's on_enter spends 14 tokens offline: at 14 the turn goes on
    // (it stops once the limit is passed), and the note is not asked.
    let (turns, events) = converse(&dir, &program, "ann@example.com\n", &["--max-session-tokens", "14"]);
    assert_eq!(model_step_calls(&events), 1, "{events:?}");
    let failed = events.iter().find(|event| event["event"] == "step_failed").cloned().unwrap_or_default();
    assert_eq!(failed["error"], "the model step for `note` was not asked: `max_session_tokens` is spent");
    assert_eq!(turns[0]["reply"], "The model could not be asked.", "{turns:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A workflow whose model step may call two tools: `stamp`, a script that
/// logs each call (so a test sees how often it ran) and answers a stamp,
/// and `lookup`, whose `email` the offline model fills from the contact.
const TOOLED: &str = r#"schema {
  contact: object { name: string, email: string } "Who to write to"
  note: string "A note for the contact"
}

tool stamp() -> { stamp: string } {
  description "A stamp for the note."
  exec "python3" "stamp.py"
}
tool lookup(email: string) -> { email: string } {
  description "Look a contact up by email."
  builtin echo
}

flow notes "Write a note" {
  requires contact
  auto step draft {
    ask_model note: "Write a note for {{contact}}." tools [stamp, lookup]
  }
}
"#;

/// [`TOOLED`] in YAML.
const TOOLED_YAML: &str = r#"schema:
  contact:
    type: object
    fields: { name: string, email: string }
    description: Who to write to
  note: { type: string, description: A note for the contact }
tools:
  stamp:
    description: A stamp for the note.
    returns: { stamp: string }
    exec: { command: [python3, stamp.py] }
  lookup:
    description: Look a contact up by email.
    params: { email: string }
    returns: { email: string }
    builtin: echo
flows:
  notes:
    title: Write a note
    requires: [contact]
    steps:
      - id: draft
        auto: true
        do:
          - ask_model: { into: note, instruction: "Write a note for {{contact}}.", tools: [stamp, lookup] }
"#;

const STAMP: &str = "import json, os, sys\n\
    json.load(sys.stdin)\n\
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'calls.log'), 'a') as log:\n    \
    log.write('stamp\\n')\n\
    print(json.dumps({'stamp': 'ST-7'}))\n";

const CONTACT: &str = r#"{"contact": {"name": "Ann", "email": "ann@example.com"}}"#;

fn tooled_dir(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    assert!(std::fs::write(dir.join("notes.flow"), TOOLED).is_ok());
    assert!(std::fs::write(dir.join("notes.yaml"), TOOLED_YAML).is_ok());
    assert!(std::fs::write(dir.join("stamp.py"), STAMP).is_ok());
    dir
}

fn stamps(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default().lines().count()
}

#[test]
fn a_model_steps_tools_run_once_offline_and_their_results_reach_the_answer() {
    let dir = tooled_dir("ms-tools");
    let store = store_in(&dir);
    let checked = flowc_at(&dir, &store, TODAY, &["check", "notes.flow"]);
    assert_eq!(checked.status.code(), Some(0), "tools in a model step check clean: {}", stderr(&checked));
    let (from_flow, from_yaml) = (
        flowc_at(&dir, &store, TODAY, &["compile", "notes.flow"]),
        flowc_at(&dir, &store, TODAY, &["compile", "notes.yaml"]),
    );
    assert!(stdout(&from_flow).contains("\"tools\""), "{}", stdout(&from_flow));
    assert_eq!(stdout(&from_flow), stdout(&from_yaml), "both syntaxes give the same program");
    let output = flowc_at(&dir, &store, TODAY, &["run", "notes.flow", "--data", CONTACT, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = json(&output);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(stamps(&dir), 1, "the tool ran once");
    // The offline model called both tools in one round, then answered
    // with their results: the tool round and the answer are two calls.
    let note = run["data"]["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("Write a note for ") && note.ends_with("\nST-7\nann@example.com"), "{note}");
    assert_eq!(run["llm_calls"], 2, "{run}");
    let costs = flowc_at(&dir, &store, TODAY, &["check", "notes.flow", "--costs"]);
    assert!(stdout(&costs).contains("workflow step notes.draft: 1-7 model calls"), "{}", stdout(&costs));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_step_with_tools_replays_its_rounds_with_no_model() {
    let dir = tooled_dir("ms-tools-replay");
    let store = store_in(&dir);
    let recording = dir.join("notes.json").to_string_lossy().into_owned();
    let args = ["run", "notes.flow", "--data", CONTACT, "--json"];
    let recorded = flowc_at(&dir, &store, TODAY, &[&args[..], &["--record", &recording]].concat());
    assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&recording).unwrap_or_default()).unwrap_or_default();
    let calls = file["calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), 1, "one entry for the step, its rounds included: {file}");
    let tools: Vec<&str> =
        calls[0]["tool_calls"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(tools, ["stamp", "lookup"], "{file}");
    // The replay asks for the recorded calls again (the tools run again, as
    // a replayed reply's do) and answers the recorded value.
    let provider = format!("replay:{recording}");
    let replayed = flowc_at(&dir, &store, TODAY, &[&args[..], &["--provider", &provider]].concat());
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    let (recorded, replayed) = (json(&recorded), json(&replayed));
    assert_eq!(replayed["data"], recorded["data"]);
    assert_eq!(replayed["tokens"], recorded["tokens"]);
    assert_eq!(replayed["llm_calls"], recorded["llm_calls"]);
    assert_eq!(stamps(&dir), 2, "recorded once, replayed once");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_conversations_model_step_with_tools_traces_its_tool_calls_in_the_turn() {
    let dir = temp_dir("ms-chat-tools");
    let program = CHAT
        .replace("LIMIT", "100000")
        .replace("STEP", "")
        .replace("flow chat \"Chat\"", "tool clock() -> { now: datetime } { builtin now }\n\nflow chat \"Chat\"")
        .replace(
            "ask_model note: \"Write a note about {{email}}\"",
            "ask_model note: \"Write a note about {{email}}\" tools [clock]",
        );
    let (turns, events) = converse(&dir, &program, "ann@example.com\n", &[]);
    let [turn] = turns.as_slice() else { panic!("one turn: {turns:?}") };
    let note = turn["data"]["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("Write a note about ann@example.com\n20"), "the time reached the note: {turn}");
    let called: Vec<&Value> = events.iter().filter(|event| event["event"] == "tool_called").collect();
    assert_eq!(called.len(), 1, "{events:?}");
    assert_eq!(called[0]["tool"], "clock");
    // The on_enter's step, then the note's tool round and its answer.
    assert_eq!(model_step_calls(&events), 3, "{events:?}");
    assert_eq!(turn["llm_calls"], 3, "{turn}");
    let _ = std::fs::remove_dir_all(&dir);
}
