//! The `flowc serve` binary: an open server refuses a public address,
//! SIGTERM lets an open request finish before the process exits, and two
//! servers on one PostgreSQL hold one conversation between them while a
//! worker resumes the run one of them started.

use super::{Client, HOLD, HOLD_PY, code, follow_held_run};
use crate::support::{root, temp_dir, unique};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A `flowc serve` process, killed if the test ends first.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
        command.arg("serve").args(args).arg("--addr").arg("127.0.0.1:0").current_dir(dir);
        command.env("FLOWC_NOW", "2026-01-05T10:00:00Z").env("NO_COLOR", "1").env_remove("FLOWC_SEED");
        for variable in ["FLOWC_PROVIDER", "FLOWC_MODEL", "FLOWC_STORE", "FLOWC_SERVE_TOKENS"] {
            command.env_remove(variable);
        }
        command.envs(env.iter().copied()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("flowc serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let mut said = String::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("flowc serve exited before listening: {said}");
            };
            said.push_str(&line);
            said.push('\n');
            if let Some(rest) = line.strip_prefix("flowc serve: listening on http://") {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                break addr.parse().expect("the address printed");
            }
        };
        let collected = Arc::new(Mutex::new(said));
        let sink = Arc::clone(&collected);
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(mut text) = sink.lock() {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        });
        Server { child, addr, stderr: collected, reader: Some(reader) }
    }

    /// Waits for the process to exit and for its last words.
    pub fn exit(&mut self) -> (Option<i32>, String) {
        let status = self.child.wait().expect("the server exits");
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status.code(), self.said())
    }

    pub fn said(&self) -> String {
        self.stderr.lock().map(|text| text.clone()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_open_server_refuses_a_public_address_unless_told() {
    let output = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(["serve", "flows/booking.flow", "--addr", "0.0.0.0:0"])
        .current_dir(root())
        .env_remove("FLOWC_SERVE_TOKENS")
        .output()
        .expect("flowc runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--insecure-open") && said.contains("no token is configured"), "{said}");
}

#[cfg(unix)]
#[test]
fn sigterm_lets_an_open_request_finish_before_the_server_exits() {
    let dir = temp_dir(&format!("serve-sigterm-{}", unique()));
    std::fs::write(dir.join("hold.flow"), HOLD).expect("program");
    std::fs::write(dir.join("hold.py"), HOLD_PY).expect("tool");
    let mut server =
        Server::start(&dir, &["hold.flow", "--store", &format!("sqlite:{}", dir.join("flowc.db").display())], &[]);
    let client = Client::new(server.addr, None);
    let request = std::thread::spawn(move || client.post("/v1/runs", &json!({ "program": "hold" })));
    // The request is open once its step started.
    while !dir.join("started").exists() {
        assert!(server.child.try_wait().ok().flatten().is_none(), "the server died: {}", server.said());
        std::thread::yield_now();
    }
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    std::fs::write(dir.join("release"), "").expect("release");
    let (status, run) = request.join().expect("the request thread");
    assert_eq!(
        (status, run["status"].as_str(), &run["data"]["released"]),
        (201, Some("completed"), &json!(true)),
        "{run}"
    );
    let (code, said) = server.exit();
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("flowc serve: stopped"), "{said}");
}

/// A fresh database on the test server, or `None` (said) without one.
pub fn fresh_database(test: &str) -> Option<String> {
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
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("FLOWC_TEST_POSTGRES connects");
    client.batch_execute(&format!("CREATE DATABASE {name}")).expect("a test database");
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}

#[test]
fn two_servers_on_one_postgres_hold_one_conversation_and_a_worker_resumes_their_run() {
    let Some(url) = fresh_database("serve_two") else {
        return;
    };
    let args = ["flows/booking.flow", "flows/onboarding.flow", "--store", url.as_str()];
    let first = Server::start(root(), &args, &[]);
    let second = Server::start(root(), &args, &[]);
    let one = Client::new(first.addr, None);
    let other = Client::new(second.addr, None);

    let id = one.new_session();
    let (status, turn) = other.say(&id, "Book the Grand Hotel for 2 guests on 2026-12-04");
    assert_eq!((status, turn["step"].as_str()), (200, Some("confirm")), "{turn}");
    let (status, stale) = one.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "yes", "version": 1 }));
    assert_eq!((status, code(&stale)), (409, "version_conflict"), "the first server sees the second's turn: {stale}");
    let (status, turn) = one.say(&id, "yes");
    assert_eq!((status, turn["stopped_reason"].as_str()), (200, Some("flow_complete")), "{turn}");
    let (_, shown) = other.get(&format!("/v1/sessions/{id}"));
    assert_eq!((shown["turns"].as_u64(), shown["history"].as_array().map(Vec::len)), (Some(2), Some(4)), "{shown}");

    let (status, run) = one.post(
        "/v1/runs",
        &json!({ "program": "onboarding", "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] } }),
    );
    assert_eq!((status, run["status"].as_str()), (201, Some("waiting")), "{run}");
    let run_id = run["run"].as_str().expect("a run id").to_string();
    let worker = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(["worker", "--once", "--store", url.as_str()])
        .current_dir(root())
        .env("FLOWC_NOW", "2026-01-07T10:00:00Z")
        .output()
        .expect("the worker runs");
    assert!(worker.status.success(), "{}", String::from_utf8_lossy(&worker.stderr));
    let (_, resumed) = other.get(&format!("/v1/runs/{run_id}"));
    assert_eq!(resumed["status"], "completed", "{resumed}");
}

/// A run one server executes, followed from another on the same
/// PostgreSQL with a poll interval longer than the test: the store's
/// NOTIFY on each save is what brings its steps, as they happen.
#[test]
fn a_run_on_one_server_is_followed_live_from_another_on_postgres() {
    let Some(url) = fresh_database("serve_news") else {
        return;
    };
    let dir = temp_dir(&format!("serve-news-{}", unique()));
    std::fs::write(dir.join("hold.flow"), HOLD).expect("program");
    std::fs::write(dir.join("hold.py"), HOLD_PY).expect("tool");
    let args = ["hold.flow", "--store", url.as_str(), "--events-poll", "1h"];
    let runner = Server::start(&dir, &args, &[]);
    let follower = Server::start(&dir, &args, &[]);
    let (status, run) = Client::new(runner.addr, None).post("/v1/runs", &json!({ "program": "hold", "wait": false }));
    assert_eq!(status, 202, "{run}");
    let id = run["run"].as_str().expect("a run id").to_string();
    while !dir.join("started").exists() {
        std::thread::yield_now();
    }
    let events = follow_held_run(&Client::new(follower.addr, None), &id, &dir);
    let last = events.last().map(|(kind, run)| (kind.as_str(), run["status"].as_str()));
    assert_eq!(last, Some(("finished", Some("completed"))), "{events:?}");
    assert!(events.iter().any(|(_, event)| event["event"] == "step_completed"), "{events:?}");
}

/// A server on PostgreSQL stops cleanly on SIGTERM: its store's client,
/// which blocks when dropped, is dropped off the async runtime.
#[cfg(unix)]
#[test]
fn a_server_on_postgres_stops_cleanly_on_sigterm() {
    let Some(url) = fresh_database("serve_sigterm") else {
        return;
    };
    let mut server = Server::start(root(), &["flows/booking.flow", "--store", url.as_str()], &[]);
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    assert_eq!(client.say(&id, "Book the Grand Hotel for 2 guests on 2026-12-04").0, 200);
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    let (code, said) = server.exit();
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("flowc serve: stopped") && !said.contains("panicked"), "{said}");
}
