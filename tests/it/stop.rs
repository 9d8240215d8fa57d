//! Stopping and cancelling through the binary: SIGTERM to a worker mid-step
//! lets the step finish (its side effect happens once), saves the run and
//! releases the other runs; a grace period that ends first kills the tool
//! and records the step as interrupted, to run again (with the same step id)
//! when the run goes on; a second signal stops at once. `flowc runs cancel`
//! ends a waiting run for good on SQLite and PostgreSQL, and a PostgreSQL
//! worker is woken by a run becoming due, not by its poll.
//!
//! Every wait here is for an event (a file the tool writes, a line the
//! worker prints), bounded only so that a bug fails instead of hanging.

use crate::store::{TODAY, flowc_at, fresh_database};
use crate::support::{stderr, stdout, temp_dir, unique};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A workflow that waits a day, then calls a tool with a side effect.
const FLOW: &str = r#"
schema { tag: string "t", ok: bool "ok" }
tool post(tag: string) -> { ok: bool } {
  exec "python3" "post.py"
  timeout 60s
}
flow wf "Wait, then post" {
  requires tag
  auto step pause { wait 1d }
  auto step post { call post(tag) -> ok }
}
"#;

/// The tool: logs its start (with the ids flowc gives it) and writes a
/// `started-TAG` file, then finishes only once a `release` file exists,
/// logging its end. The log is the side effect the tests count.
const TOOL: &str = r#"
import json, os, sys, time, pathlib
args = json.load(sys.stdin)
tag = args["tag"]
log = open("side.log", "a")
log.write(f"start {tag} {os.environ.get('FLOWC_RUN_ID')} {os.environ.get('FLOWC_STEP_ID')}\n")
log.flush()
pathlib.Path(f"pid-{tag}").write_text(str(os.getpid()))
pathlib.Path(f"started-{tag}").touch()
limit = time.time() + 120
while not os.path.exists("release") and time.time() < limit:
    time.sleep(0.01)
log.write(f"end {tag}\n")
log.flush()
print(json.dumps({"ok": True}))
"#;

const DAY_LATER: &str = "2026-01-06T11:00:00Z";

fn setup(store: &str, tags: &[&str]) -> (PathBuf, Vec<String>) {
    let dir = temp_dir(&format!("stop-{}", unique()));
    assert!(std::fs::write(dir.join("wf.flow"), FLOW).is_ok());
    assert!(std::fs::write(dir.join("post.py"), TOOL).is_ok());
    let ids = tags
        .iter()
        .map(|tag| {
            let data = format!("{{\"tag\": \"{tag}\"}}");
            let output = flowc_at(&dir, store, TODAY, &["run", "wf.flow", "--data", &data, "--json"]);
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
            let run: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap_or_default();
            assert_eq!(run["status"], "waiting");
            run["run"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    (dir, ids)
}

fn worker(dir: &Path, store: &str, args: &[&str]) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
    command
        .arg("worker")
        .args(args)
        .current_dir(dir)
        .env("FLOWC_STORE", store)
        .env("FLOWC_NOW", DAY_LATER)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match command.spawn() {
        Ok(child) => child,
        Err(error) => panic!("flowc worker did not start: {error}"),
    }
}

/// Waits until a worker's connection `LISTEN`s on the store's database,
/// which it opens only after its first look for due runs found none;
/// panics (the test fails) after a minute.
fn wait_until_listening(url: &str) {
    let mut client = flowc::store::postgres_tls::connect(url).unwrap_or_else(|error| panic!("{error}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listening = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'",
                &[],
            )
            .map(|row| row.get::<_, i64>(0))
            .unwrap_or_default();
        if listening > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the worker never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for a file to appear; panics (the test fails) after a minute.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The first tool that started, by its `started-TAG` file.
fn started_tag(dir: &Path, tags: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(tag) = tags.iter().find(|tag| dir.join(format!("started-{tag}")).exists()) {
            return (*tag).to_string();
        }
        assert!(Instant::now() < deadline, "no tool started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(child: &Child, signal: libc::c_int) {
    let pid = i32::try_from(child.id()).unwrap_or(0);
    // SAFETY: kill(2) with plain integers; the child is ours and unreaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// Waits for the child to exit (bounded) and gives its exit code, stdout
/// and stderr.
fn finish(mut child: Child) -> (Option<i32>, String, String) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the worker did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut out);
    }
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
    }
    (status.code(), out, err)
}

fn side_log(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("side.log")).unwrap_or_default().lines().map(str::to_string).collect()
}

fn shown(dir: &Path, store: &str, id: &str) -> serde_json::Value {
    let output = flowc_at(dir, store, DAY_LATER, &["runs", "show", id, "--json"]);
    serde_json::from_str(stdout(&output).trim()).unwrap_or_default()
}

fn sqlite_store(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("flowc.db").display())
}

#[test]
fn sigterm_mid_step_lets_the_step_finish_once_and_leaves_the_other_runs() {
    let base = temp_dir(&format!("stop-graceful-{}", unique()));
    let store = sqlite_store(&base);
    let tags = ["a", "b"];
    let (dir, ids) = setup(&store, &tags);
    let child = worker(&dir, &store, &["--interval", "1"]);
    let tag = started_tag(&dir, &tags);
    signal(&child, libc::SIGTERM);
    // The step in flight finishes after the signal, within the grace period.
    assert!(std::fs::write(dir.join("release"), "").is_ok());
    let (code, out, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 1, "one run resumed, the other left: {out}");
    assert!(out.ends_with(": completed\n"), "{out}");
    let log = side_log(&dir);
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log[0].starts_with(&format!("start {tag} ")) && log[1] == format!("end {tag}"), "{log:?}");

    // A later worker takes the other run at once (nothing is left claimed)
    // and never runs the finished step again.
    let later = flowc_at(&dir, &store, DAY_LATER, &["worker", "--once"]);
    assert_eq!(later.status.code(), Some(0), "{}", stderr(&later));
    assert_eq!(stdout(&later).lines().count(), 1, "{}", stdout(&later));
    assert!(stderr(&later).contains("resumed 1 run; no run is waiting"), "{}", stderr(&later));
    let log = side_log(&dir);
    assert_eq!(log.iter().filter(|line| line.starts_with("start ")).count(), 2, "each side effect once: {log:?}");
    for (id, tag) in ids.iter().zip(tags) {
        assert_eq!(shown(&dir, &store, id)["status"], "completed", "{tag}");
        assert_eq!(log.iter().filter(|line| line.starts_with(&format!("start {tag} {id} post."))).count(), 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_grace_period_that_ends_first_kills_the_tool_and_the_step_runs_again_with_its_id() {
    let base = temp_dir(&format!("stop-interrupted-{}", unique()));
    let store = sqlite_store(&base);
    let (dir, ids) = setup(&store, &["c"]);
    let child = worker(&dir, &store, &["--grace", "0"]);
    wait_for(&dir.join("started-c"));
    signal(&child, libc::SIGTERM);
    let (code, out, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(": running (stopped by a signal"), "{out}");
    let pid = std::fs::read_to_string(dir.join("pid-c")).unwrap_or_default();
    let alive = Path::new(&format!("/proc/{}", pid.trim())).exists();
    assert!(!alive, "the tool's process was killed");
    let run = shown(&dir, &store, &ids[0]);
    assert_eq!(run["status"], "running");
    assert_eq!(run["steps"][1]["status"], "interrupted", "{run}");
    assert!(run["events"].as_array().is_some_and(|events| events.iter().any(|e| e["event"] == "step_interrupted")));

    assert!(std::fs::write(dir.join("release"), "").is_ok());
    let later = flowc_at(&dir, &store, DAY_LATER, &["worker", "--once"]);
    assert_eq!(stdout(&later), format!("resumed {}: completed\n", ids[0]), "{}", stderr(&later));
    let starts: Vec<String> = side_log(&dir).into_iter().filter(|line| line.starts_with("start ")).collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[0], starts[1], "the step ran again under the same run and step ids");
    assert_eq!(starts[0], format!("start c {} post.2", ids[0]));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_second_signal_stops_at_once_and_kills_the_tool() {
    let base = temp_dir(&format!("stop-twice-{}", unique()));
    let store = sqlite_store(&base);
    let (dir, _) = setup(&store, &["d"]);
    let mut child = worker(&dir, &store, &["--grace", "600"]);
    wait_for(&dir.join("started-d"));
    signal(&child, libc::SIGTERM);
    // The second signal only after the first was handled: its message is
    // the event waited for.
    if let Some(pipe) = child.stderr.take() {
        let mut lines = BufReader::new(pipe).lines();
        let said = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(said.contains("stopping after the step in flight"), "{said}");
        std::thread::spawn(move || lines.for_each(drop));
    }
    signal(&child, libc::SIGINT);
    let (code, _, _) = finish(child);
    assert_eq!(code, Some(130));
    let pid = std::fs::read_to_string(dir.join("pid-d")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Path::new(&format!("/proc/{}", pid.trim())).exists() {
        // A killed process lingers until its parent (init, now) reaps it.
        let state = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        if state.contains(") Z ") {
            break;
        }
        assert!(Instant::now() < deadline, "the tool was not killed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&base);
}

fn a_cancelled_run_is_never_resumed(store: &str) {
    let (dir, ids) = setup(store, &["e", "f"]);
    assert!(std::fs::write(dir.join("release"), "").is_ok());
    let cancel = flowc_at(&dir, store, TODAY, &["runs", "cancel", &ids[0]]);
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));
    assert_eq!(stdout(&cancel), format!("run {}: cancelled\n", ids[0]));
    let again = flowc_at(&dir, store, TODAY, &["runs", "cancel", &ids[0]]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("has already ended (cancelled)"), "{}", stderr(&again));
    let missing = flowc_at(&dir, store, TODAY, &["runs", "cancel", "no-such-run"]);
    assert_eq!(missing.status.code(), Some(2));

    let later = flowc_at(&dir, store, DAY_LATER, &["worker", "--once"]);
    assert_eq!(stdout(&later), format!("resumed {}: completed\n", ids[1]), "{}", stderr(&later));
    let resume = flowc_at(&dir, store, DAY_LATER, &["resume", &ids[0], "--now"]);
    assert_eq!(resume.status.code(), Some(2));
    assert!(stderr(&resume).contains("has ended (cancelled)"), "{}", stderr(&resume));
    let run = shown(&dir, store, &ids[0]);
    assert_eq!((run["status"].as_str(), run["stopped_reason"].as_str()), (Some("cancelled"), Some("cancelled")));
    assert!(run["events"].as_array().is_some_and(|events| events.iter().any(|e| e["event"] == "run_cancelled")));
    assert_eq!(side_log(&dir).len(), 2, "only the other run's tool ran");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cancelled_run_is_never_resumed_on_sqlite() {
    let base = temp_dir(&format!("stop-cancel-{}", unique()));
    a_cancelled_run_is_never_resumed(&sqlite_store(&base));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_cancelled_run_is_never_resumed_on_postgres() {
    if let Some(url) = fresh_database("cancel") {
        a_cancelled_run_is_never_resumed(&url);
    }
}

/// A worker polling once an hour still resumes a run the moment it is
/// stored due: PostgreSQL told it.
#[test]
fn a_postgres_worker_is_woken_by_a_run_becoming_due() {
    let Some(url) = fresh_database("notify") else {
        return;
    };
    let dir = temp_dir(&format!("stop-notify-{}", unique()));
    assert!(std::fs::write(dir.join("wf.flow"), FLOW).is_ok());
    assert!(std::fs::write(dir.join("post.py"), TOOL).is_ok());
    assert!(std::fs::write(dir.join("release"), "").is_ok());
    let mut child = worker(&dir, &url, &["--interval", "3600"]);
    let Some(pipe) = child.stdout.take() else {
        panic!("no stdout");
    };
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // The worker has found nothing and sleeps when the run is stored: its
    // first look is over once it listens. Before that, it could take the
    // run this test stores while `flowc run` still executes it (the worker's
    // clock is a day later, so `flowc run`'s claim looks expired to it).
    wait_until_listening(&url);
    let output = flowc_at(&dir, &url, TODAY, &["run", "wf.flow", "--data", "{\"tag\": \"g\"}", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap_or_default();
    let id = run["run"].as_str().unwrap_or_default();
    let line = received.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    assert_eq!(line, format!("resumed {id}: completed"));
    signal(&child, libc::SIGTERM);
    let (code, _, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The probe's stranding case: a PostgreSQL worker killed while it runs one
/// of six due runs held only that one, so the next worker takes the other
/// five at once instead of after the lease.
#[test]
fn a_killed_postgres_worker_strands_only_the_run_it_was_executing() {
    let Some(url) = fresh_database("strand") else {
        return;
    };
    let tags = ["s1", "s2", "s3", "s4", "s5", "s6"];
    let (dir, _) = setup(&url, &tags);
    let mut child = worker(&dir, &url, &[]);
    let tag = started_tag(&dir, &tags);
    let _ = child.kill();
    let _ = child.wait();
    assert!(std::fs::write(dir.join("release"), "").is_ok());
    let next = flowc_at(&dir, &url, DAY_LATER, &["worker", "--once"]);
    assert_eq!(next.status.code(), Some(0), "{}", stderr(&next));
    assert_eq!(stdout(&next).lines().count(), 5, "{}", stdout(&next));
    let ran: Vec<String> = side_log(&dir).into_iter().filter(|line| line.starts_with("start ")).collect();
    assert_eq!(ran.len(), 6, "{ran:?}");
    assert_eq!(ran.iter().filter(|line| line.starts_with(&format!("start {tag} "))).count(), 1, "{ran:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run cancelled while a worker executes it stops at its next save: the
/// worker says it was cancelled, and the run stays cancelled.
#[test]
fn a_run_cancelled_while_it_runs_stops_at_its_next_save() {
    let base = temp_dir(&format!("stop-cancel-running-{}", unique()));
    let store = sqlite_store(&base);
    let (dir, ids) = setup(&store, &["h"]);
    let child = worker(&dir, &store, &["--once"]);
    wait_for(&dir.join("started-h"));
    let cancel = flowc_at(&dir, &store, DAY_LATER, &["runs", "cancel", &ids[0]]);
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));
    assert!(std::fs::write(dir.join("release"), "").is_ok());
    let (code, out, err) = finish(child);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains(&format!("run `{}` was cancelled while it ran", ids[0])), "{err}");
    let run = shown(&dir, &store, &ids[0]);
    assert_eq!(run["status"], "cancelled");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&base);
}
