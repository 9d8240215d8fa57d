//! Workflow schedules in the stores and through `flowc worker`: workers
//! racing on one due tick start one run (threads on the library, then
//! processes on the binary, on SQLite and on PostgreSQL); ticks missed
//! while no worker ran start one run, not a backlog; `flowc runs list`
//! shows each schedule's next start; registering a program again keeps an
//! unchanged schedule's tick and moves a changed one's.
//!
//! The PostgreSQL tests need the server `scripts/test.sh` starts
//! (`FLOWC_TEST_POSTGRES`); without it they say so and skip.

use crate::store::{flowc_at, fresh_database};
use crate::support::{stderr, stdout, temp_dir};
use flowc::runtime::clock::{FixedClock, SeededIds};
use flowc::runtime::tools::ToolEnv;
use flowc::store::schedules::{Advance, ScheduleRow};
use flowc::store::{Claim, Store, StoreLocation, StoredRun};
use std::sync::{Arc, Barrier};

const DIGEST: &str = "schema { sent: int }\nflow digest \"Weekly digest\" {\n  schedule \"0 9 * * MON\" in \"Europe/Paris\"\n  auto step send { set sent = 1 }\n}\n";

fn open(url: &str) -> Box<dyn Store> {
    let location = StoreLocation::parse(url).unwrap_or_else(|error| panic!("{error}"));
    flowc::store::open(&location).unwrap_or_else(|error| panic!("{error}"))
}

/// A new run of the digest, stored by nobody yet, under `id`.
fn new_run(id: &str) -> StoredRun {
    let file = flowc::source::SourceFile::new("digest.flow", DIGEST);
    let program = flowc::pipeline::compile(&file).ir;
    let clock = FixedClock::parse("2026-11-30T08:00:00Z").unwrap_or_else(|error| panic!("{error}"));
    let tool_env = ToolEnv { base_dir: ".".into(), clock: Arc::new(clock), ids: Arc::new(SeededIds::new(1)) };
    let flow = flowc::ir::FlowId::from_index(0);
    let mut run =
        flowc::runtime::workflow::start(&program, &tool_env, flow, &serde_json::Map::new(), Default::default())
            .unwrap_or_else(|error| panic!("{error}"));
    run.run = id.to_string();
    StoredRun { run, program: "/p/digest.flow".into(), program_hash: "h".into(), version: 1, due_at: None }
}

fn row(next_at: i64) -> ScheduleRow {
    ScheduleRow {
        program: "/p/digest.flow".into(),
        flow: "digest".into(),
        cron: "0 9 * * MON".into(),
        timezone: "Europe/Paris".into(),
        next_at,
        last_run: None,
    }
}

/// Eight workers, each with its own connection, race on each of 20 ticks:
/// every tick moves on once and starts exactly one run.
fn workers_racing_on_a_tick_start_one_run(url: &str) {
    const WORKERS: usize = 8;
    const TICKS: i64 = 20;
    let first = 1_796_025_600; // 2026-11-30T08:00:00Z
    let setup = open(url);
    assert_eq!(setup.sync_schedules("/p/digest.flow", &[row(first)]).map(|rows| rows.len()).ok(), Some(1));
    let barrier = Arc::new(Barrier::new(WORKERS));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let barrier = Arc::clone(&barrier);
            let url = url.to_string();
            std::thread::spawn(move || {
                let store = open(&url);
                let mut won = Vec::new();
                for tick in 0..TICKS {
                    let due = row(first + tick * 60);
                    let stored = new_run(&format!("tick{tick}-worker{worker}"));
                    let claim = Claim { holder: format!("worker{worker}"), now: due.next_at, until: due.next_at + 300 };
                    barrier.wait();
                    match store.advance_schedule(&due, due.next_at + 60, Some((&stored, &claim))) {
                        Ok(Advance::Done) => won.push(tick),
                        Ok(Advance::Taken) => {}
                        other => panic!("worker {worker}, tick {tick}: {other:?}"),
                    }
                    barrier.wait();
                }
                won
            })
        })
        .collect();
    let mut won: Vec<i64> = workers.into_iter().flat_map(|worker| worker.join().unwrap_or_default()).collect();
    won.sort_unstable();
    assert_eq!(won, (0..TICKS).collect::<Vec<_>>(), "each tick won exactly once");
    let runs = setup.list_runs().unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(runs.len(), usize::try_from(TICKS).unwrap_or(0), "one run per tick: {runs:?}");
    let stored = setup.list_schedules().unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].next_at, first + TICKS * 60);
    assert!(stored[0].last_run.as_deref().is_some_and(|id| id.starts_with(&format!("tick{}-", TICKS - 1))));
}

#[test]
fn workers_racing_on_a_tick_start_one_run_on_sqlite() {
    let dir = temp_dir("schedule-race");
    workers_racing_on_a_tick_start_one_run(&format!("sqlite:{}", dir.join("flowc.db").display()));
}

#[test]
fn workers_racing_on_a_tick_start_one_run_on_postgres() {
    let Some(url) = fresh_database("schedule_race") else {
        return;
    };
    workers_racing_on_a_tick_start_one_run(&url);
}

#[test]
fn a_run_id_already_stored_refuses_the_tick_and_changes_nothing() {
    let dir = temp_dir("schedule-id-taken");
    let store = open(&format!("sqlite:{}", dir.join("flowc.db").display()));
    let due = row(100);
    assert!(store.sync_schedules("/p/digest.flow", std::slice::from_ref(&due)).is_ok());
    let stored = new_run("same");
    assert!(store.save_run(&stored, 0, None).is_ok());
    let claim = Claim { holder: "w".into(), now: 100, until: 400 };
    assert_eq!(store.advance_schedule(&due, 200, Some((&stored, &claim))).ok(), Some(Advance::IdTaken));
    assert_eq!(store.list_schedules().ok().map(|rows| rows[0].next_at), Some(100), "the tick did not move");
}

#[test]
fn registering_again_keeps_an_unchanged_tick_moves_a_changed_one_and_drops_a_removed_one() {
    let dir = temp_dir("schedule-sync");
    let store = open(&format!("sqlite:{}", dir.join("flowc.db").display()));
    let mut other = row(500);
    other.flow = "other".into();
    assert!(store.sync_schedules("/p/digest.flow", &[row(100), other]).is_ok());
    let again = store.sync_schedules("/p/digest.flow", &[row(999)]).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(again.iter().map(|row| (row.flow.as_str(), row.next_at)).collect::<Vec<_>>(), [("digest", 100)]);
    let mut changed = row(777);
    changed.cron = "0 10 * * MON".into();
    let moved = store.sync_schedules("/p/digest.flow", &[changed]).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(moved.iter().map(|row| row.next_at).collect::<Vec<_>>(), [777]);
    assert_eq!(store.next_tick().ok().flatten(), Some(777));
    assert!(store.sync_schedules("/p/digest.flow", &[]).is_ok_and(|rows| rows.is_empty()));
    assert_eq!(store.next_tick().ok().flatten(), None);
}

/// Registered on a Friday; four workers at once, the Monday after next at
/// 9:00 Paris: two ticks were missed, one run starts, and the next start
/// is a week on; `runs list` says so, for a person and as JSON.
fn four_workers_start_one_run_and_runs_list_shows_the_next_start(name: &str, store: &str) {
    let dir = temp_dir(name);
    assert!(std::fs::write(dir.join("digest.flow"), DIGEST).is_ok());
    let registered = flowc_at(&dir, store, "2026-11-20T12:00:00Z", &["worker", "--once", "digest.flow"]);
    assert_eq!(registered.status.code(), Some(0), "{}", stderr(&registered));
    assert!(stderr(&registered).contains("next start 2026-11-23T08:00:00Z"), "{}", stderr(&registered));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (dir, store) = (dir.clone(), store.to_string());
            std::thread::spawn(move || flowc_at(&dir, &store, "2026-11-30T08:30:00Z", &["worker", "--once"]))
        })
        .collect();
    let outputs: Vec<_> = workers.into_iter().filter_map(|worker| worker.join().ok()).collect();
    assert_eq!(outputs.len(), 4);
    let started: Vec<String> = outputs
        .iter()
        .flat_map(|output| stdout(output).lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|line| line.starts_with("started "))
        .collect();
    assert_eq!(started.len(), 1, "one run for the missed ticks: {started:?}");
    assert!(started[0].ends_with("(digest on schedule): completed"), "{started:?}");
    for output in &outputs {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    }

    let listed = flowc_at(&dir, store, "2026-11-30T08:30:00Z", &["runs", "list"]);
    let text = stdout(&listed);
    assert_eq!(text.lines().filter(|line| line.contains("\tdigest\tcompleted\t")).count(), 1, "{text}");
    assert!(
        text.lines().any(|line| line
            .starts_with("schedule\tdigest\tnext start 2026-12-07T08:00:00Z (`0 9 * * MON` in Europe/Paris)\t")),
        "{text}"
    );
    let json = flowc_at(&dir, store, "2026-11-30T08:30:00Z", &["runs", "list", "--json"]);
    let entries: serde_json::Value = serde_json::from_str(stdout(&json).trim()).unwrap_or_default();
    let schedule = entries.as_array().and_then(|entries| entries.iter().find(|entry| entry.get("schedule").is_some()));
    let schedule = schedule.unwrap_or_else(|| panic!("no schedule in {}", stdout(&json)));
    assert_eq!(schedule["next_start"], "2026-12-07T08:00:00Z");
    assert_eq!(schedule["schedule"]["timezone"], "Europe/Paris");
    let run = entries.as_array().and_then(|entries| entries.iter().find(|entry| entry.get("run").is_some()));
    assert_eq!(schedule["last_run"], run.map(|run| run["run"].clone()).unwrap_or_default());
}

#[test]
fn four_workers_start_one_run_and_runs_list_shows_the_next_start_on_sqlite() {
    let dir = temp_dir("schedule-workers-store");
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    four_workers_start_one_run_and_runs_list_shows_the_next_start("schedule-workers", &store);
}

#[test]
fn four_workers_start_one_run_and_runs_list_shows_the_next_start_on_postgres() {
    let Some(url) = fresh_database("schedule_workers") else {
        return;
    };
    four_workers_start_one_run_and_runs_list_shows_the_next_start("schedule-workers-pg", &url);
}

#[test]
fn a_schedule_is_the_same_in_both_syntaxes_and_reaches_the_ir() {
    let from_flow = crate::support::flowc(&["compile", "tests/fixtures/ok/scheduled.flow"]);
    let from_yaml = crate::support::flowc(&["compile", "tests/fixtures/ok/scheduled.yaml"]);
    assert_eq!(from_flow.status.code(), Some(0), "{}", stderr(&from_flow));
    assert_eq!(stdout(&from_flow), stdout(&from_yaml));
    let ir: serde_json::Value = serde_json::from_str(&stdout(&from_flow)).unwrap_or_default();
    assert_eq!(ir["flows"][0]["schedule"], serde_json::json!({ "cron": "0 9 * * MON", "timezone": "Europe/Paris" }));
    assert_eq!(ir["flows"][1]["schedule"], serde_json::json!({ "cron": "30 2 * * *", "timezone": "UTC" }));
}
