//! The stores through the library and the binary: the PostgreSQL store keeps
//! the SQLite store's semantics (compare-and-swap, transcript, migrations
//! from every older schema), two `flowc worker`s sharing one PostgreSQL
//! resume each of 1,000 due runs exactly once, a worker killed mid-step
//! leaves its run to the next worker once its lease is over, and a run a
//! limit paused is left by workers and taken by `flowc resume`.
//!
//! The PostgreSQL tests need a server: `scripts/test.sh` starts a throwaway
//! one and sets `FLOWC_TEST_POSTGRES`; without it they say so and skip.

use crate::support::{flowc_env, stderr, stdout, temp_dir, unique};
use flowc::message::{Message, Role};
use flowc::runtime::session::Session;
use flowc::store::postgres::{MIGRATIONS, PostgresStore, migrate};
use flowc::store::{RunStore, SessionStore, StoreError};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// A fresh database on the test server, or `None` (with the reason said)
/// when there is no server.
pub(crate) fn fresh_database(test: &str) -> Option<String> {
    let Ok(url) = std::env::var("FLOWC_TEST_POSTGRES") else {
        // scripts/test.sh starts the server: there a missing one fails.
        assert!(
            std::env::var("FLOWC_TEST_STRICT").ok().as_deref() != Some("1"),
            "FLOWC_TEST_POSTGRES is not set under scripts/test.sh"
        );
        eprintln!("skipped {test}: FLOWC_TEST_POSTGRES is not set (scripts/test.sh starts a PostgreSQL and sets it)");
        return None;
    };
    let name = format!("flowc_{test}_{}_{}", std::process::id(), unique());
    let mut client = match postgres::Client::connect(&url, postgres::NoTls) {
        Ok(client) => client,
        Err(error) => panic!("FLOWC_TEST_POSTGRES={url} does not connect: {error}"),
    };
    if let Err(error) = client.batch_execute(&format!("CREATE DATABASE {name}")) {
        panic!("cannot create a test database: {error}");
    }
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}

/// A run as schema version 2 stored it: its step records and events
/// inside its state.
const OLD_RUN: &str = r#"{"run":"old-run","flow":0,"status":"waiting","next_step":1,"stopped_at":0,
    "resume_at":"2026-01-06T10:00:00Z","data":{"n":1},"context":{},
    "steps":[{"id":"a","status":"waiting","started_at":"t0","duration_ms":0,"output":null,"error":null},
             {"id":"b","status":"pending","started_at":null,"duration_ms":null,"output":null,"error":null}],
    "warnings":["an old warning"],"flow_name":"f",
    "events":[{"event":"step_started","step":"a","at":"t1"},{"event":"step_completed","step":"a","at":"t2"}]}"#;

fn session(id: &str, version: u64) -> Session {
    let mut session = Session::new(id, "hash");
    session.version = version;
    session
}

#[test]
fn postgres_keeps_the_sqlite_semantics_of_a_turn() {
    let Some(url) = fresh_database("semantics") else {
        return;
    };
    let store = match PostgresStore::connect(&url) {
        Ok(store) => store,
        Err(error) => panic!("{error}"),
    };
    let said =
        [Message { role: Role::User, text: "hi".into() }, Message { role: Role::Assistant, text: "hello".into() }];
    assert!(store.save(&session("s", 1), 0, &said).is_ok());
    assert!(matches!(store.save(&session("s", 1), 0, &[]), Err(StoreError::Conflict { .. })), "a second first turn");
    let mut winner = session("s", 2);
    winner.data.insert("hotel".into(), "Ritz".into());
    assert!(store.save(&winner, 1, &said[..1]).is_ok());
    let stale = store.save(&session("s", 2), 1, &[]);
    assert!(matches!(stale, Err(StoreError::Conflict { stored: 2, expected: 1, .. })), "{stale:?}");
    assert_eq!(store.load("s").ok().flatten(), Some(winner));
    assert_eq!(store.transcript("s").map(|messages| messages.len()).ok(), Some(3));
    assert_eq!(store.list().map(|sessions| sessions.len()).ok(), Some(1));
    assert_eq!(store.delete("s").ok(), Some(true));
    assert_eq!(store.load("s").ok().flatten(), None);
    let gone = store.save(&session("s", 3), 2, &[]);
    assert!(matches!(gone, Err(StoreError::Conflict { stored: 0, expected: 2, .. })), "a deleted session: {gone:?}");
    assert_eq!(store.load("s").ok().flatten(), None, "a save on a deleted session writes nothing");
}

#[test]
fn postgres_migrates_a_database_at_every_older_schema_version() {
    for version in 0..MIGRATIONS.len() {
        let Some(url) = fresh_database("migrate") else {
            return;
        };
        let mut client = match postgres::Client::connect(&url, postgres::NoTls) {
            Ok(client) => client,
            Err(error) => panic!("{error}"),
        };
        assert_eq!(migrate(&mut client, MIGRATIONS.get(..version).unwrap_or_default()), Ok(()));
        if version >= 1 {
            let state = serde_json::to_string(&session("old", 3)).unwrap_or_default();
            let inserted = client.execute(
                "INSERT INTO sessions (id, version, flow, step, turns, transcript_len, updated_at, state)
                 VALUES ('old', 3, NULL, NULL, 0, 0, 'then', $1)",
                &[&state],
            );
            assert!(inserted.is_ok(), "{inserted:?}");
        }
        if version == 2 {
            let inserted = client.execute(
                "INSERT INTO runs (id, program, program_hash, flow, status, due_at, version, created_at,
                     updated_at, state) VALUES ('old-run', 'p.flow', 'h', 'f', 'waiting', 5, 2, 'then', 'then', $1)",
                &[&OLD_RUN],
            );
            assert!(inserted.is_ok(), "{inserted:?}");
        }
        drop(client);
        let store = match PostgresStore::connect(&url) {
            Ok(store) => store,
            Err(error) => panic!("from version {version}: {error}"),
        };
        if version >= 1 {
            assert_eq!(store.load("old").ok().flatten(), Some(session("old", 3)), "from version {version}");
        }
        let runs = usize::from(version == 2);
        assert_eq!(store.list_runs().map(|runs| runs.len()).ok(), Some(runs), "from version {version}");
        if version == 2 {
            let expected: flowc::runtime::workflow::WorkflowRun =
                serde_json::from_str(OLD_RUN).unwrap_or_else(|e| panic!("{e}"));
            let loaded = store.load_run("old-run").ok().flatten().map(|stored| stored.run);
            assert_eq!(loaded, Some(expected), "the records, events and warnings moved into rows");
        }
    }
}

use crate::workflows::{PAUSING, started_steps};

pub(crate) const TODAY: &str = "2026-01-05T10:00:00Z";
const LATER: &str = "2026-01-05T11:00:00Z";

pub(crate) fn flowc_at(dir: &Path, store: &str, now: &str, args: &[&str]) -> std::process::Output {
    flowc_env(dir, args, &[("FLOWC_STORE", store), ("FLOWC_NOW", now)], Duration::from_secs(300))
}

/// `count` waiting runs of PAUSING in `store`: one made by `flowc run`, the
/// rest copies of it under new ids (a thousand processes would take long).
fn waiting_runs(dir: &Path, store: &str, count: usize) -> Vec<String> {
    assert!(std::fs::write(dir.join("pausing.flow"), PAUSING).is_ok());
    let output = flowc_at(dir, store, TODAY, &["run", "pausing.flow"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let first =
        stdout(&output).strip_prefix("run ").and_then(|rest| rest.split(':').next()).unwrap_or_default().to_string();
    let location = match flowc::store::StoreLocation::parse(store) {
        Ok(location) => location,
        Err(error) => panic!("{error}"),
    };
    let opened = match flowc::store::open(&location) {
        Ok(opened) => opened,
        Err(error) => panic!("{error}"),
    };
    let Ok(Some(template)) = opened.load_run(&first) else {
        panic!("the run `{first}` is not stored");
    };
    let mut ids = vec![first];
    for index in 1..count {
        let mut copy = template.clone();
        copy.run.run = format!("copy-{index:05}");
        copy.version = 1;
        let saved = opened.save_run(&copy, 0, None);
        assert!(saved.is_ok(), "{saved:?}");
        ids.push(copy.run.run);
    }
    ids
}

#[test]
fn two_workers_on_one_postgres_resume_each_of_1000_due_runs_exactly_once() {
    let Some(url) = fresh_database("workers") else {
        return;
    };
    let dir = temp_dir("store-workers");
    let ids = waiting_runs(&dir, &url, 1000);
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let dir = dir.clone();
            let url = url.clone();
            std::thread::spawn(move || flowc_at(&dir, &url, LATER, &["worker", "--once"]))
        })
        .collect();
    let mut resumed = Vec::new();
    for worker in workers {
        let Ok(output) = worker.join() else {
            panic!("a worker thread panicked");
        };
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let lines: Vec<String> = stdout(&output).lines().map(str::to_string).collect();
        eprintln!("a worker resumed {} runs", lines.len());
        // One worker taking every run would pass a check of the total only.
        assert!(!lines.is_empty(), "each worker claimed runs");
        resumed.extend(lines);
    }
    assert_eq!(resumed.len(), 1000, "each run resumed once, none twice");
    let resumed_ids: BTreeSet<String> = resumed
        .iter()
        .filter_map(|line| line.strip_prefix("resumed ").and_then(|rest| rest.strip_suffix(": completed")))
        .map(str::to_string)
        .collect();
    assert_eq!(resumed_ids, ids.into_iter().collect::<BTreeSet<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}

const SLOW: &str = r#"
schema {
  n: int "A counter"
  done: bool "Whether the slow step ended"
}
tool slow() -> { done: bool } {
  exec "python3" "slow.py"
  timeout 60s
}
flow slow_flow "Pause, then a slow step" {
  auto step one {
    set n = 1
  }
  auto step pause {
    wait 1h
  }
  auto step crawl {
    call slow() -> done
  }
}
"#;

/// A worker killed while a step runs leaves the run `running` under its
/// claim; once the lease is over the next worker takes it and finishes it,
/// without running the steps completed before again.
fn a_killed_worker_leaves_its_run_to_the_next(store: &str) {
    let dir = temp_dir(&format!("store-killed-{}", unique()));
    assert!(std::fs::write(dir.join("slow.flow"), SLOW).is_ok());
    let marker = dir.join("started");
    let script = format!(
        "import sys, time, pathlib\nsys.stdin.read()\np = pathlib.Path({:?})\nfirst = not p.exists()\np.touch()\n\
         time.sleep(30 if first else 0)\nprint('{{\"done\": true}}')\n",
        marker.display().to_string()
    );
    assert!(std::fs::write(dir.join("slow.py"), script).is_ok());
    let output = flowc_at(&dir, store, TODAY, &["run", "slow.flow"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id =
        stdout(&output).strip_prefix("run ").and_then(|rest| rest.split(':').next()).unwrap_or_default().to_string();

    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_flowc"));
    worker
        .args(["worker", "--once"])
        .current_dir(&dir)
        .env("FLOWC_STORE", store)
        .env("FLOWC_NOW", LATER)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let Ok(mut child) = worker.spawn() else {
        panic!("flowc worker did not start");
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(marker.exists(), "the slow step started");
    let _ = child.kill();
    let _ = child.wait();

    let shown = |now: &str| {
        let output = flowc_at(&dir, store, now, &["runs", "show", &id, "--json"]);
        serde_json::from_str::<serde_json::Value>(stdout(&output).trim()).unwrap_or_default()
    };
    assert_eq!(shown(LATER)["status"], "running", "the killed worker's run is left mid-step");
    let within_lease = flowc_at(&dir, store, LATER, &["worker", "--once"]);
    assert_eq!(stdout(&within_lease), "", "nobody takes a run under a live lease");
    let after_lease = "2026-01-05T11:05:01Z";
    let output = flowc_at(&dir, store, after_lease, &["worker", "--once"]);
    assert_eq!(stdout(&output), format!("resumed {id}: completed\n"), "{}", stderr(&output));
    let run = shown(after_lease);
    assert_eq!(started_steps(&run), ["one", "pause", "crawl", "crawl"], "only the step the kill interrupted ran again");
    assert_eq!(run["data"]["done"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_worker_killed_mid_step_leaves_the_run_resumable_on_sqlite() {
    let dir = temp_dir("store-killed-sqlite");
    a_killed_worker_leaves_its_run_to_the_next(&format!("sqlite:{}", dir.join("flowc.db").display()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_worker_killed_mid_step_leaves_the_run_resumable_on_postgres() {
    if let Some(url) = fresh_database("killed") {
        a_killed_worker_leaves_its_run_to_the_next(&url);
    }
}

/// A limit pauses a run: workers polling the store leave it, and
/// `flowc resume` takes it and goes on from the step it stopped before.
fn a_paused_run_waits_for_resume_by_name(store: &str) {
    // Its own folder: the SQLite and PostgreSQL variants run at once, and
    // one removing a shared folder took the other's working directory.
    let dir = temp_dir(&format!("store-paused-{}", unique()));
    assert!(std::fs::write(dir.join("three.flow"), crate::runtime::limits::STEPS).is_ok());
    let started = flowc_at(&dir, store, TODAY, &["run", "three.flow", "--max-steps", "1", "--json"]);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let run: serde_json::Value = serde_json::from_str(stdout(&started).trim()).unwrap_or_default();
    assert_eq!((run["status"].as_str(), run["stopped_reason"].as_str()), (Some("paused"), Some("step_limit")));
    let id = run["run"].as_str().unwrap_or_default().to_string();

    let worker = flowc_at(&dir, store, LATER, &["worker", "--once"]);
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert_eq!(stdout(&worker), "", "a worker leaves the paused run");

    let resumed = flowc_at(&dir, store, LATER, &["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let run: serde_json::Value = serde_json::from_str(stdout(&resumed).trim()).unwrap_or_default();
    assert_eq!(run["status"], "completed");
    assert_eq!(run["data"]["n"], 3);
    assert_eq!(started_steps(&run), ["a", "b", "c"], "no step ran twice");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_paused_run_waits_for_resume_by_name_on_sqlite() {
    let dir = temp_dir("store-paused-sqlite");
    a_paused_run_waits_for_resume_by_name(&format!("sqlite:{}", dir.join("flowc.db").display()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_paused_run_waits_for_resume_by_name_on_postgres() {
    if let Some(url) = fresh_database("paused") {
        a_paused_run_waits_for_resume_by_name(&url);
    }
}

/// The probe's 1,000-step reproducer, by the shape of what is stored
/// rather than by the clock (the time per step is in `benches/store.rs`):
/// the run's own row stays the size of its head whatever its length, and
/// every step record and event is a row of its own.
#[test]
fn a_long_run_is_stored_as_a_small_head_and_a_row_per_step_and_event() {
    let dir = temp_dir("store-long-run");
    let mut program = String::from("schema { x: int \"x\" }\nflow long \"Long\" {\n");
    for index in 0..1000 {
        program.push_str(&format!("  auto step s{index} {{ set x = {index} }}\n"));
    }
    program.push_str("}\n");
    assert!(std::fs::write(dir.join("long.flow"), program).is_ok());
    let db = dir.join("flowc.db");
    let store = format!("sqlite:{}", db.display());
    let output = flowc_at(&dir, &store, TODAY, &["run", "long.flow", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap_or_default();
    assert_eq!(run["status"], "completed");
    assert_eq!(run["steps"].as_array().map(Vec::len), Some(1000));
    let Ok(connection) = rusqlite::Connection::open(&db) else {
        panic!("cannot open {}", db.display());
    };
    let count = |query: &str| connection.query_row(query, [], |row| row.get::<_, i64>(0)).unwrap_or(-1);
    assert!(count("SELECT length(state) FROM runs") < 1_000, "the head holds no step record or event");
    assert_eq!(count("SELECT COUNT(*) FROM run_steps"), 1000);
    assert_eq!(count("SELECT COUNT(*) FROM run_events"), 2000);
    let shown = flowc_at(&dir, &store, TODAY, &["runs", "show", run["run"].as_str().unwrap_or_default(), "--json"]);
    let loaded: serde_json::Value = serde_json::from_str(stdout(&shown).trim()).unwrap_or_default();
    assert_eq!(loaded, run, "loading reads the rows back into the same run");
    let _ = std::fs::remove_dir_all(&dir);
}
