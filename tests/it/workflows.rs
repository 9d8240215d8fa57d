//! Stored workflow runs end to end: `flowc run` stores a run and prints its
//! id, `flowc resume` and `flowc worker` go on with it once it is due, a
//! run whose program changed fails with the reason recorded, and stored
//! conversations go on with an edited program when what they rely on is
//! still there.

use crate::support::{flowc_env, root, stderr, stdout, temp_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TODAY: &str = "2026-01-05T10:00:00Z";
const TOMORROW: &str = "2026-01-06T10:00:01Z";

/// `flowc ARGS` in `dir` against the store `store`, at `now`.
pub(crate) fn flowc_at(dir: &Path, store: &str, now: &str, args: &[&str]) -> std::process::Output {
    flowc_env(dir, args, &[("FLOWC_STORE", store), ("FLOWC_NOW", now)], Duration::from_secs(60))
}

pub(crate) fn store_in(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("flowc.db").display())
}

/// The id in `run ID: …`.
pub(crate) fn run_id(output: &std::process::Output) -> String {
    let text = stdout(output);
    text.strip_prefix("run ").and_then(|rest| rest.split(':').next()).unwrap_or_default().to_string()
}

pub(crate) fn json(output: &std::process::Output) -> Value {
    serde_json::from_str(stdout(output).trim()).unwrap_or_default()
}

/// The steps a run's `step_started` events name, in order: a step run
/// twice appears twice.
pub(crate) fn started_steps(run: &Value) -> Vec<&str> {
    run["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|event| event["event"] == "step_started")
        .filter_map(|event| event["step"].as_str())
        .collect()
}

fn statuses(run: &Value) -> Vec<(String, String)> {
    run["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|step| {
            (
                step["id"].as_str().unwrap_or_default().to_string(),
                step["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn onboarding_waits_a_day_then_resume_finishes_it_without_running_a_step_twice() {
    let dir = temp_dir("wf-onboarding");
    let store = store_in(&dir);
    let program = root().join("flows/onboarding.flow").to_string_lossy().into_owned();
    let data = r#"{"company": "Initech", "contacts": [{"name": "Ann", "email": "ann@initech.test"}]}"#;
    let started = flowc_at(&dir, &store, TODAY, &["run", &program, "--data", data]);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let id = run_id(&started);
    assert!(!id.is_empty(), "{}", stdout(&started));
    assert!(stderr(&started).contains(&format!("flowc resume {id}")), "{}", stderr(&started));

    let early = flowc_at(&dir, &store, TODAY, &["resume", &id]);
    assert_eq!(early.status.code(), Some(2));
    assert!(stderr(&early).contains("waits until 2026-01-06T10:00:00Z"), "{}", stderr(&early));

    let resumed = flowc_at(&dir, &store, TOMORROW, &["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!(run["status"], "completed");
    let expected: Vec<(String, String)> = [
        ("start", "completed"),
        ("create_account", "completed"),
        ("welcome_contacts", "completed"),
        ("wait_a_day", "completed"),
        ("check", "completed"),
        ("nudge", "skipped"),
        ("done", "completed"),
    ]
    .iter()
    .map(|(step, status)| (step.to_string(), status.to_string()))
    .collect();
    assert_eq!(statuses(&run), expected);
    assert_eq!(
        started_steps(&run),
        ["start", "create_account", "welcome_contacts", "wait_a_day", "check", "done"],
        "no completed step ran again"
    );
    assert_eq!(run["duration_ms"], 86_400_000 + 1_000, "the run's total duration spans the wait");

    let shown = flowc_at(&dir, &store, TOMORROW, &["runs", "show", &id, "--json"]);
    assert_eq!(json(&shown), run, "the store holds what resume printed");
    let again = flowc_at(&dir, &store, TOMORROW, &["resume", &id]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("has ended (completed)"), "{}", stderr(&again));
    let _ = std::fs::remove_dir_all(&dir);
}

pub(crate) const PAUSING: &str = include_str!("../fixtures/workflows/pausing.flow");

const OUTPUTS: &str = include_str!("../fixtures/workflows/outputs.flow");

#[test]
fn later_steps_read_earlier_steps_outputs_in_one_go_and_across_a_resumed_wait() {
    let dir = temp_dir("wf-outputs");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("outputs.flow"), OUTPUTS).is_ok());

    let run_with = |data: &str| {
        let started = flowc_at(&dir, &store, TODAY, &["run", "outputs.flow", "--data", data]);
        assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
        run_id(&started)
    };
    let show = |id: &str| json(&flowc_at(&dir, &store, TODAY, &["runs", "show", id, "--json"]));

    let small = show(&run_with(r#"{"total": 1, "at": "2025-12-31T00:00:00Z"}"#));
    assert_eq!(small["status"], "completed");
    assert_eq!(small["steps"][0]["output"], serde_json::json!({"total": 3}));
    assert_eq!(small["steps"][1]["output"], serde_json::json!({"now": "2026-01-05T10:00:00Z"}));
    assert_eq!(small["data"]["total"], 300, "the stamp step's branch read its own output and the count step's");
    assert_eq!(small["steps"][3]["status"], "skipped");
    assert_eq!(small["data"].get("at"), None, "the skipped report step's output read as null cleared `at`");

    let direct = show(&run_with(r#"{"total": 5}"#));
    assert_eq!(direct["status"], "completed");
    assert_eq!(direct["steps"][2]["status"], "skipped", "skip_if read the count step's output (7 < 10)");
    assert_eq!(direct["data"]["total"], 70);
    assert_eq!(direct["data"]["at"], "2026-01-05T10:00:00Z");
    assert_eq!(direct["steps"][4]["status"], "skipped");

    let id = run_with(r#"{"total": 9}"#);
    let resumed = flowc_at(&dir, &store, TOMORROW, &["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["steps"][2]["status"], "completed", "the wait ran: 11 is not below 10");
    assert_eq!(run["data"]["total"], 110, "the stored output of the step before the wait was read after it");
    assert_eq!(
        run["data"]["at"], "2026-01-05T10:00:00Z",
        "the clock's result is the one recorded before the wait, not a new one"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_worker_resumes_every_due_run_once_and_leaves_the_rest() {
    let dir = temp_dir("wf-worker");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("pausing.flow"), PAUSING).is_ok());
    let ids: Vec<String> = (0..3).map(|_| run_id(&flowc_at(&dir, &store, TODAY, &["run", "pausing.flow"]))).collect();
    assert_eq!(ids.iter().collect::<std::collections::BTreeSet<_>>().len(), 3, "{ids:?}");

    let idle = flowc_at(&dir, &store, TODAY, &["worker", "--once"]);
    assert_eq!(idle.status.code(), Some(0), "{}", stderr(&idle));
    assert_eq!(stdout(&idle), "", "nothing is due yet");

    let later = "2026-01-05T11:00:00Z";
    let worked = flowc_at(&dir, &store, later, &["worker", "--once"]);
    assert_eq!(worked.status.code(), Some(0), "{}", stderr(&worked));
    let mut resumed: Vec<String> = stdout(&worked).lines().map(str::to_string).collect();
    resumed.sort();
    let mut expected: Vec<String> = ids.iter().map(|id| format!("resumed {id}: completed")).collect();
    expected.sort();
    assert_eq!(resumed, expected);
    assert_eq!(stdout(&flowc_at(&dir, &store, later, &["worker", "--once"])), "", "each run resumed once");

    let listed = stdout(&flowc_at(&dir, &store, later, &["runs", "list"]));
    assert_eq!(listed.lines().filter(|line| line.contains("\tpausing\tcompleted\t")).count(), 3, "{listed}");
    let run = json(&flowc_at(&dir, &store, later, &["runs", "show", &ids[0], "--json"]));
    assert_eq!(run["data"]["n"], 2);
    assert_eq!(run["steps"][1]["status"], "completed", "the waiting step is completed after the resume");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory named after `name` holding `pausing.flow` and a store in
/// which `flowc run` started it twice: the directory, the store, the
/// program's file and the two runs' ids, both waiting.
fn two_waiting_runs(name: &str) -> (PathBuf, String, PathBuf, [String; 2]) {
    let dir = temp_dir(name);
    let store = store_in(&dir);
    let file = dir.join("pausing.flow");
    assert!(std::fs::write(&file, PAUSING).is_ok());
    let runs = [(), ()].map(|()| run_id(&flowc_at(&dir, &store, TODAY, &["run", "pausing.flow"])));
    (dir, store, file, runs)
}

/// A run started by `flowc run` records its program's version in the
/// store: after its file is edited or deleted, `flowc resume` (and a
/// worker, through the same lookup) goes on with the version it started on.
#[test]
fn a_run_whose_program_changed_or_went_away_goes_on_with_the_version_it_started_on() {
    let (dir, store, file, [changed, deleted]) = two_waiting_runs("wf-changed");
    assert!(std::fs::write(&file, PAUSING.replace("set n = 2", "set n = 3")).is_ok());

    let output = flowc_at(&dir, &store, TODAY, &["resume", &changed, "--now"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("goes on with the version it started on"), "{}", stderr(&output));
    let run = json(&flowc_at(&dir, &store, TODAY, &["runs", "show", &changed, "--json"]));
    assert_eq!((run["status"].as_str(), run["data"]["n"].as_i64()), (Some("completed"), Some(2)), "{run}");

    assert!(std::fs::remove_file(&file).is_ok());
    // A worker, once the run is due.
    let output = flowc_at(&dir, &store, "2026-01-05T11:00:00Z", &["worker", "--once"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(stdout(&output).trim(), format!("resumed {deleted}: completed"));
    let run = json(&flowc_at(&dir, &store, TODAY, &["runs", "show", &deleted, "--json"]));
    assert_eq!(run["data"]["n"], 2, "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run whose version the store has no record of (started before
/// versions were recorded) fails as before once its file changed or went
/// away, the reason recorded on the run.
#[test]
fn a_run_whose_version_the_store_never_recorded_fails_with_the_reason_recorded() {
    let (dir, store, file, [changed, deleted]) = two_waiting_runs("wf-unrecorded");
    let database = rusqlite::Connection::open(dir.join("flowc.db")).expect("the store opens");
    assert_eq!(database.execute("DELETE FROM program_versions", []).expect("versions are kept"), 1);
    drop(database);
    assert!(std::fs::write(&file, PAUSING.replace("set n = 2", "set n = 3")).is_ok());

    let output = flowc_at(&dir, &store, TODAY, &["resume", &changed, "--now"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("changed while the run waited"), "{}", stdout(&output));
    let run = json(&flowc_at(&dir, &store, TODAY, &["runs", "show", &changed, "--json"]));
    assert_eq!(run["status"], "failed");
    assert!(run["error"].as_str().unwrap_or_default().contains("start a new run with `flowc run`"), "{run}");
    assert_eq!(run["steps"][0]["status"], "completed", "what ran before the wait stays recorded");

    assert!(std::fs::remove_file(&file).is_ok());
    let output = flowc_at(&dir, &store, TODAY, &["resume", &deleted, "--now"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("cannot be read any more"), "{}", stdout(&output));
    let _ = std::fs::remove_dir_all(&dir);
}

pub(crate) const BOOKING: &str = r#"
schema {
  hotel: string "The hotel" examples "Ritz", "Overlook"
  guests: int "How many guests"
}
flow booking "Book a hotel" {
  when "the user wants to book a hotel"
  step ask_hotel {
    prompt "Which hotel?"
    collect hotel
  }
  step ask_guests {
    prompt "How many guests?"
    collect guests
  }
  step done {
    say "Booked."
  }
}
"#;

#[test]
fn a_stored_conversation_survives_a_reworded_prompt_and_names_what_an_incompatible_edit_broke() {
    let dir = temp_dir("wf-sessions");
    let store = store_in(&dir);
    let file = dir.join("booking.flow");
    assert!(std::fs::write(&file, BOOKING).is_ok());
    let turn = |message: &str| {
        let script = dir.join("script.txt");
        assert!(std::fs::write(&script, format!("{message}\n")).is_ok());
        flowc_at(&dir, &store, TODAY, &["run", "booking.flow", "--session", "alice", "--script", "script.txt"])
    };
    let first = turn("I want to book the Ritz");
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout(&first), "How many guests?\n");

    assert!(std::fs::write(&file, BOOKING.replace("How many guests?", "For how many people?")).is_ok());
    let reworded = turn("hello");
    assert_eq!(reworded.status.code(), Some(0), "{}", stderr(&reworded));
    assert_eq!(stdout(&reworded), "For how many people?\n", "the session kept its step");

    assert!(std::fs::write(&file, BOOKING.replace("hotel: string", "hotel: int")).is_ok());
    let retyped = turn("2");
    assert_eq!(retyped.status.code(), Some(2));
    assert!(
        stderr(&retyped).contains("session `alice` cannot go on with this program: its field `hotel` no longer types"),
        "{}",
        stderr(&retyped)
    );
    assert!(stderr(&retyped).contains("flowc sessions delete alice"), "{}", stderr(&retyped));

    let shown = json(&flowc_at(&dir, &store, TODAY, &["sessions", "show", "alice", "--json"]));
    assert_eq!(shown["step"], "ask_guests");
    assert_eq!(shown["turns"], 2);
    assert_eq!(shown["transcript"].as_array().map(Vec::len), Some(4), "{shown}");
    let listed = stdout(&flowc_at(&dir, &store, TODAY, &["sessions", "list"]));
    assert!(listed.starts_with("alice\tbooking.ask_guests\t2 turns\t"), "{listed}");
    let deleted = flowc_at(&dir, &store, TODAY, &["sessions", "delete", "alice"]);
    assert_eq!(stdout(&deleted), "deleted session alice\n");
    let missing = flowc_at(&dir, &store, TODAY, &["sessions", "show", "alice"]);
    assert_eq!(missing.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn racing_turns_on_one_session_lose_nothing_and_the_losers_are_told() {
    let dir = temp_dir("wf-race");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("booking.flow"), BOOKING).is_ok());
    assert!(std::fs::write(dir.join("script.txt"), "I want to book the Ritz\n").is_ok());
    let rounds = 20;
    let racers = 4;
    let mut won = 0;
    let mut conflicts = 0;
    for round in 0..rounds {
        let session = format!("race{round}");
        let handles: Vec<_> = (0..racers)
            .map(|_| {
                let dir = dir.clone();
                let store = store.clone();
                let session = session.clone();
                std::thread::spawn(move || {
                    flowc_at(
                        &dir,
                        &store,
                        TODAY,
                        &["run", "booking.flow", "--session", &session, "--script", "script.txt"],
                    )
                })
            })
            .collect();
        let mut round_won = 0;
        for handle in handles {
            let Ok(output) = handle.join() else {
                panic!("a racer thread panicked");
            };
            match output.status.code() {
                Some(0) => round_won += 1,
                Some(1) if stderr(&output).contains("was changed by someone else") => conflicts += 1,
                other => panic!("unexpected end {other:?}: {}", stderr(&output)),
            }
        }
        let shown = json(&flowc_at(&dir, &store, TODAY, &["sessions", "show", &session, "--json"]));
        let turns = shown["turns"].as_u64().unwrap_or_default();
        let transcript = shown["transcript"].as_array().map_or(0, Vec::len);
        assert_eq!(turns, round_won, "every winner's turn is stored, no loser's: {shown}");
        won += round_won;
        assert_eq!(usize::try_from(turns).unwrap_or_default() * 2, transcript, "every stored turn is whole: {shown}");
    }
    assert_eq!(won + conflicts, u64::try_from(rounds * racers).unwrap_or_default());
    eprintln!("races: {rounds} rounds of {racers} processes, {won} turns committed, {conflicts} conflicts reported");
    let _ = std::fs::remove_dir_all(&dir);
}

const LOOPS: &str = include_str!("../fixtures/workflows/loops.flow");

#[test]
fn a_loop_builds_a_list_and_a_counter_that_later_steps_and_a_resumed_run_see() {
    let dir = temp_dir("wf-loops");
    let store = store_in(&dir);
    assert!(std::fs::write(dir.join("loops.flow"), LOOPS).is_ok());
    let orders = r#"{"orders": [{"id": "a", "total": 150}, {"id": "b", "total": 5}, {"id": "c", "total": 100}, {"id": "a", "total": 150}]}"#;
    let started = flowc_at(&dir, &store, TODAY, &["run", "loops.flow", "--data", orders]);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let id = run_id(&started);
    let waiting = json(&flowc_at(&dir, &store, TODAY, &["runs", "show", &id, "--json"]));
    assert_eq!(waiting["status"], "waiting");
    let collected = serde_json::json!({"big": ["a", "c"], "count": 2, "many": true});
    assert_eq!(waiting["steps"][0]["output"], collected, "the loop's writes, the repeated order skipped");
    assert_eq!(waiting["data"]["many"], true, "the step read the counter after the loop");

    let resumed = flowc_at(&dir, &store, TOMORROW, &["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run = json(&resumed);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["data"]["big"], serde_json::json!(["a", "c", "end"]), "the list survived the wait");
    assert_eq!(run["data"]["count"], 2);
    assert_eq!(started_steps(&run), ["collect", "pause", "close"], "the loop did not run again");

    let too_many = r#"{"orders": [{"id": "a", "total": 100}, {"id": "b", "total": 100}, {"id": "c", "total": 100}, {"id": "d", "total": 100}]}"#;
    let refused = flowc_at(&dir, &store, TODAY, &["run", "loops.flow", "--data", too_many, "--json"]);
    let run = json(&refused);
    assert_eq!(run["status"], "failed", "{}", stdout(&refused));
    assert_eq!(run["steps"][0]["error"], "cannot write `count`: `4` is above the maximum 3");
    assert_eq!(run["data"].get("big"), None, "the failed step's appends were not committed");
    let _ = std::fs::remove_dir_all(&dir);
}
