//! The grace period of a graceful stop reaches an http tool's request in
//! flight: `flowc run` of a workflow, its grace read from `[run] grace` in
//! `flowc.toml`, is stopped by SIGTERM while a 127.0.0.1 server holds the
//! request unanswered; the step is recorded as interrupted and the process
//! exits long before the tool's own timeout.
//!
//! The test waits for events only: the request reaching the server, the
//! process exiting (bounded so that a bug fails instead of hanging).

use crate::store::{TODAY, flowc_at};
use crate::support::{stderr, stdout, temp_dir};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A server on 127.0.0.1 that reads one request's head, says so on the
/// channel, and never answers (the connection stays open while the test
/// runs).
fn silent_server() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|error| panic!("{error}"));
    let port = listener.local_addr().map(|address| address.port()).unwrap_or_default();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = sender.send(line.trim().to_string());
            held.push(stream);
        }
    });
    (port, receiver)
}

#[cfg(unix)]
#[test]
fn the_end_of_the_grace_period_interrupts_an_http_request_in_flight() {
    let dir = temp_dir("grace-http");
    let (port, received) = silent_server();
    let program = format!(
        "schema {{ ok: bool \"ok\" }}\n\
         tool post() -> {{ ok: bool }} {{\n  http POST \"http://127.0.0.1:{port}/hold\"\n  timeout 600s\n}}\n\
         flow wf \"Post\" {{\n  auto step post {{ call post() -> ok }}\n  auto step after {{ set ok = true }}\n}}\n"
    );
    assert!(std::fs::write(dir.join("wf.flow"), program).is_ok());
    assert!(std::fs::write(dir.join("flowc.toml"), "[run]\ngrace = 0\n").is_ok());
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(["run", "wf.flow", "--json"])
        .current_dir(&dir)
        .env("FLOWC_STORE", &store)
        .env("FLOWC_NOW", TODAY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("flowc run did not start: {error}"));

    let request = received.recv_timeout(Duration::from_secs(120));
    assert_eq!(request.as_deref(), Ok("POST /hold HTTP/1.1"), "the request never reached the server");
    let pid = i32::try_from(child.id()).unwrap_or(0);
    // SAFETY: kill(2) with plain integers; the child is ours and unreaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);

    // Bounded far below the tool's 600 s timeout: only the grace period
    // can end the step this soon.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("flowc run did not stop at the end of its grace period");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = child.wait_with_output().unwrap_or_else(|error| panic!("{error}"));
    let said = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(status.code(), Some(0), "a graceful stop exits 0: {said}");
    assert!(said.contains("stopping after the step in flight (at most 0 s)"), "the grace came from flowc.toml: {said}");

    let listed = flowc_at(&dir, &store, TODAY, &["runs", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(stdout(&listed).trim()).unwrap_or_default();
    let id = runs[0]["run"].as_str().unwrap_or_default().to_string();
    let shown = flowc_at(&dir, &store, TODAY, &["runs", "show", &id, "--json"]);
    let run: serde_json::Value = serde_json::from_str(stdout(&shown).trim()).unwrap_or_default();
    assert_eq!(run["status"], "running", "left for the next worker: {}", stdout(&shown));
    assert_eq!(run["steps"][0]["status"], "interrupted", "{}", stdout(&shown));
    assert!(
        run["steps"][0]["error"].as_str().unwrap_or_default().contains("grace period ended before the server answered"),
        "{}",
        stdout(&shown)
    );
    assert_eq!(run["steps"][1]["status"], "pending", "no later step ran: {}", stderr(&shown));
    let events: Vec<&str> =
        run["events"].as_array().into_iter().flatten().filter_map(|event| event["event"].as_str()).collect();
    assert_eq!(events, ["step_started", "step_interrupted"]);
}
