//! Clients that misbehave get bounded answers and the server goes on: a
//! request head sent byte by byte (slowloris) or a body that never ends
//! run into their deadlines, a flood of session creations is served, a
//! client that drops an event stream leaves no stream or turn behind
//! (`/metrics` counts them), memory stays flat over thousands of
//! create/turn/delete cycles, and a server killed with `kill -9` in the
//! middle of a turn loses no committed turn: the client sends the turn
//! again to another server on the same store (SQLite, and PostgreSQL with
//! two processes on one database: one scenario, two stores) and the
//! conversation goes on.
//!
//! (A worker killed mid-step, finished by another worker with only the
//! interrupted step run again, is tested in `store.rs`.)

use super::processes::Server;
use super::{Client, code, options, start};
use crate::support::{temp_dir, unique};
use flowc::serve::auth::Auth;
use flowc::serve::listen::Deadlines;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A socket read that a broken server would leave hanging fails the test
/// after this instead of stalling the suite; nothing is timed by it.
const HANG: Duration = Duration::from_secs(60);

/// Short deadlines, so that the clients below run into them soon.
fn impatient() -> flowc::serve::ServeOptions {
    let mut options = options(Auth::default());
    options.deadlines = Deadlines { header: Duration::from_millis(300), body: Duration::from_millis(300) };
    options
}

/// The value of an unlabelled metric in `GET /metrics`.
fn metric(client: &Client, name: &str) -> f64 {
    let (status, text) = client.get("/metrics");
    assert_eq!(status, 200);
    let text = text.as_str().expect("the metrics are text");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
}

/// Reads what the server sends until it closes the connection.
fn read_to_close(stream: &mut TcpStream) -> String {
    stream.set_read_timeout(Some(HANG)).expect("a read timeout");
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(error) => panic!("the server neither answered nor closed the connection: {error}"),
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn a_request_head_sent_byte_by_byte_is_cut_off_and_others_are_served() {
    let server = start(&impatient());
    let client = Client::new(server.addr, None);
    // Fifty clients that never finish their head: they hold a connection
    // each, the way slowloris holds them.
    let mut idle: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).expect("connects");
            stream.write_all(b"POST /v1/sessions HTTP/1.1\r\nhost: test\r\n").expect("a part of the head");
            stream
        })
        .collect();
    // One that sends a header byte by byte and never ends it.
    let trickler = {
        let addr = server.addr;
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).expect("connects");
            stream.write_all(b"GET /healthz HTTP/1.1\r\nx-pad: ").expect("the start of the head");
            let mut sent = 0usize;
            let started = std::time::Instant::now();
            loop {
                if stream.write_all(b"a").is_err() {
                    return sent;
                }
                sent += 1;
                assert!(started.elapsed() < HANG, "the server never cut the trickling client off");
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    // Meanwhile everyone else is served.
    let id = client.new_session();
    let (status, turn) = client.say(&id, "Book the Grand Hotel for 2 guests on 2026-12-04");
    assert_eq!(status, 200, "{turn}");

    for stream in &mut idle {
        let answer = read_to_close(stream);
        assert!(!answer.starts_with("HTTP/1.1 2"), "an unfinished head was answered: {answer}");
    }
    let sent = trickler.join().expect("the trickling client");
    assert!(sent > 0, "the trickling client sent something before it was cut off");
    assert_eq!(client.get("/healthz").0, 200);
}

#[test]
fn a_body_that_never_ends_is_a_408_and_the_server_goes_on() {
    let server = start(&impatient());
    let client = Client::new(server.addr, None);
    let mut stream = TcpStream::connect(server.addr).expect("connects");
    stream
        .write_all(b"POST /v1/sessions HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"program\":")
        .expect("the head and a part of the body");
    let answer = read_to_close(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let error: serde_json::Value = serde_json::from_str(body).expect("a JSON error");
    assert_eq!(code(&error), "body_timeout", "{error}");

    // A chunked body that never ends is cut off the same way.
    let mut stream = TcpStream::connect(server.addr).expect("connects");
    stream
        .write_all(b"POST /v1/sessions HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"pro\r\n")
        .expect("the head and a chunk");
    let answer = read_to_close(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    client.new_session();
}

#[test]
fn a_chunked_body_over_the_limit_is_a_413() {
    let mut options = options(Auth::default());
    options.body_limit = 1024;
    let server = start(&options);
    let mut stream = TcpStream::connect(server.addr).expect("connects");
    let chunk = "a".repeat(2048);
    let request = format!(
        "POST /v1/sessions HTTP/1.1\r\nhost: test\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    stream.write_all(request.as_bytes()).expect("the request");
    let answer = read_to_close(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_too_large"), "{answer}");
}

/// With no cap on a tenant's sessions (`max_sessions_per_tenant` unset,
/// the default; the cap's 429 is in `caps.rs`), each session is a row in
/// the store and at most a place in the server's bounded cache, so a
/// flood costs the store's disk, bounded by how fast the store writes.
/// The server answers every creation and everyone else meanwhile.
#[test]
fn a_flood_of_session_creations_is_served_and_others_still_are() {
    const THREADS: usize = 8;
    const EACH: usize = 150;
    let server = start(&options(Auth::default()));
    let addr = server.addr;
    let flood: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(move || {
                let client = Client::new(addr, None);
                (0..EACH).filter(|_| client.post("/v1/sessions", &json!({ "program": "booking" })).0 == 201).count()
            })
        })
        .collect();
    let client = Client::new(addr, None);
    let id = client.new_session();
    let (status, turn) = client.say(&id, "Book the Grand Hotel for 2 guests on 2026-12-04");
    assert_eq!(status, 200, "{turn}");
    let created: usize = flood.into_iter().map(|thread| thread.join().expect("a flooding client")).sum();
    assert_eq!(created, THREADS * EACH);
    assert_eq!(metric(&client, "flowc_sessions_open") as usize, THREADS * EACH + 1);
    assert_eq!(metric(&client, "flowc_sessions_created_total") as usize, THREADS * EACH + 1);
}

/// Waits until `/metrics` shows nothing open: no stream, no turn.
fn wait_until_nothing_is_open(client: &Client) {
    for _ in 0..20_000 {
        if metric(client, "flowc_event_streams_open") == 0.0 && metric(client, "flowc_turns_in_flight") == 0.0 {
            return;
        }
        std::thread::yield_now();
    }
    panic!(
        "left open: {} event streams, {} turns",
        metric(client, "flowc_event_streams_open"),
        metric(client, "flowc_turns_in_flight")
    );
}

#[test]
fn clients_that_drop_event_streams_midway_leave_nothing_open() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let mut sessions = Vec::new();
    for _ in 0..20 {
        let id = client.new_session();
        let response = client
            .request(reqwest::Method::POST, &format!("/v1/sessions/{id}/messages"))
            .header("accept", "text/event-stream")
            .header("content-type", "application/json")
            .body(json!({ "text": "Book the Grand Hotel for 2 guests on 2026-12-04" }).to_string())
            .send()
            .expect("the server answers");
        let mut lines = BufReader::new(response).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(first.starts_with("event:") || first.starts_with(':'), "{first}");
        drop(lines);
        sessions.push(id);
    }
    // A run's event stream dropped after its first event.
    let (status, run) = client.post(
        "/v1/runs",
        &json!({ "program": "onboarding", "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] } }),
    );
    assert_eq!(status, 201, "{run}");
    let response = client
        .request(reqwest::Method::GET, &format!("/v1/runs/{}/events", run["run"].as_str().expect("an id")))
        .send()
        .expect("the server answers");
    let mut lines = BufReader::new(response).lines();
    assert!(lines.next().and_then(Result::ok).unwrap_or_default().starts_with("event:"));
    drop(lines);

    wait_until_nothing_is_open(&client);
    for id in &sessions {
        let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
        assert_eq!(shown["turns"], 1, "every dropped turn was committed: {shown}");
    }
}

/// The resident memory of a process, in kB, from /proc.
#[cfg(target_os = "linux")]
fn resident_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// `FLOWC_TEST_SERVE_CYCLES` cycles (default 300: the debug binary on a
/// shared machine takes a long while per cycle; docs/serve.md gives the
/// figures) of create, turn, turn, delete against
/// the `flowc serve` binary, its resident memory read before (after a
/// warm-up) and after: it must not grow with the number of sessions.
#[cfg(target_os = "linux")]
#[test]
fn memory_stays_flat_over_thousands_of_session_cycles() {
    let cycles: usize = std::env::var("FLOWC_TEST_SERVE_CYCLES").ok().and_then(|text| text.parse().ok()).unwrap_or(300);
    let dir = temp_dir(&format!("serve-memory-{}", unique()));
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let server = Server::start(crate::support::root(), &["flows/booking.flow", "--store", &store], &[]);
    let client = Client::new(server.addr, None);
    let cycle = || {
        let id = client.new_session();
        let (status, turn) = client.say(&id, "Book the Grand Hotel for 2 guests on 2026-12-04");
        assert_eq!(status, 200, "{turn}");
        let (status, turn) = client.say(&id, "yes");
        assert_eq!(status, 200, "{turn}");
        assert_eq!(client.send(reqwest::Method::DELETE, &format!("/v1/sessions/{id}"), None).0, 204);
    };
    // The warm-up fills the runtime pool, the allocator's arenas and the
    // store's caches: what is left to grow after it would be a leak.
    for _ in 0..100 {
        cycle();
    }
    let before = resident_kb(server.child.id());
    for _ in 0..cycles {
        cycle();
    }
    let after = resident_kb(server.child.id());
    eprintln!(
        "flowc serve resident memory: {before} kB after the warm-up, {after} kB after {cycles} more cycles ({:+} kB)",
        after as i64 - before as i64
    );
    // Generous: allocator noise is a few MB; a leak of even 1 KB per cycle
    // is 10 MB over 10,000 cycles, and a kept session far more.
    assert!(after < before + 32 * 1024, "grew from {before} kB to {after} kB over {cycles} cycles");
    assert_eq!(metric(&client, "flowc_sessions_open"), 0.0);
}

/// A conversation whose second turn runs a tool that holds until the test
/// lets it go (`started` when it runs, then it waits for `release`).
const CHAT: &str = r#"agent Chat {
  identity "A conversation whose second turn runs a tool the test holds."
}

schema {
  name: string "The user's name"
  released: bool "Whether the test let the tool finish"
}

tool hold() -> { released: bool } {
  description "Waits until the file `release` exists."
  exec "python3" "hold.py"
  timeout 60s
}

flow chat "Chat" {
  default
  step ask { prompt "Name?" collect name }
  auto step work { call hold() -> released }
  step bye { say "Done, {{name}}." }
}
"#;

/// Two servers on one store (`store`, a `--store` value), the first killed
/// with `kill -9` while the second turn of a conversation runs its tool
/// there. What the client saw committed stays; the turn cut off is either
/// all there or not at all (here not at all: the tool never returned, so
/// nothing of the turn reached the store); the client sends it again to
/// the second server, naming the version it saw, and the conversation
/// goes on there.
#[cfg(unix)]
fn killed_mid_turn(dir: &std::path::Path, store: &str) {
    std::fs::write(dir.join("chat.flow"), CHAT).expect("program");
    std::fs::write(dir.join("hold.py"), super::HOLD_PY).expect("tool");
    let args = ["chat.flow", "--store", store];
    let mut doomed = Server::start(dir, &args, &[]);
    let survivor = Server::start(dir, &args, &[]);
    let first = Client::new(doomed.addr, None);
    let other = Client::new(survivor.addr, None);

    let (status, created) = first.post("/v1/sessions", &json!({ "program": "chat" }));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("an id").to_string();
    let (status, turn) = first.say(&id, "hello");
    assert_eq!((status, turn["step"].as_str()), (200, Some("ask")), "{turn}");
    let (_, seen) = first.get(&format!("/v1/sessions/{id}"));
    let committed = seen["version"].as_u64().expect("a version");

    // The second turn reaches the tool on the first server, which dies there.
    let in_flight = {
        let (base, id) = (first.base.clone(), id.clone());
        std::thread::spawn(move || {
            let http = reqwest::blocking::Client::new();
            http.post(format!("{base}/v1/sessions/{id}/messages")).json(&json!({ "text": "Bob" })).send().is_ok()
        })
    };
    while !dir.join("started").exists() {
        assert!(doomed.child.try_wait().ok().flatten().is_none(), "the server died early: {}", doomed.said());
        std::thread::yield_now();
    }
    doomed.child.kill().expect("kill -9");
    let (_, said) = doomed.exit();
    assert!(!in_flight.join().expect("the client thread"), "the killed server answered: {said}");

    // The turn the client saw committed is there, whole; of the one cut
    // off nothing is: not its message, not its data, not a new version.
    let (_, shown) = other.get(&format!("/v1/sessions/{id}"));
    assert_eq!(
        (shown["turns"].as_u64(), shown["step"].as_str(), shown["version"].as_u64()),
        (Some(1), Some("ask"), Some(committed)),
        "{shown}"
    );
    assert_eq!(history(&shown), ["hello", "Name?"], "{shown}");
    assert!(shown["data"].get("name").is_none_or(serde_json::Value::is_null), "{shown}");
    // The client sends the lost turn again, to the other server, with the
    // version it saw: had the cut-off turn been committed after all, this
    // would be a 409, never the turn twice.
    std::fs::write(dir.join("release"), "").expect("release");
    let (status, turn) =
        other.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "Bob", "version": committed }));
    assert_eq!((status, turn["reply"].as_str()), (200, Some("Done, Bob.")), "{turn}");
    let (_, shown) = other.get(&format!("/v1/sessions/{id}"));
    assert_eq!((shown["turns"].as_u64(), shown["version"].as_u64()), (Some(2), Some(committed + 1)), "{shown}");
    assert_eq!(shown["data"]["released"], true, "{shown}");
    assert_eq!(history(&shown), ["hello", "Name?", "Bob", "Done, Bob."], "{shown}");
    // The same send again, with the same version, is refused: a client
    // retrying once too often does not get the turn twice.
    let (status, stale) =
        other.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "Bob", "version": committed }));
    assert_eq!((status, code(&stale)), (409, "version_conflict"), "the retried turn applies once: {stale}");
}

/// The texts of a shown session's history, in order.
fn history(shown: &serde_json::Value) -> Vec<&str> {
    shown["history"].as_array().expect("a history").iter().filter_map(|message| message["text"].as_str()).collect()
}

#[cfg(unix)]
#[test]
fn a_server_killed_mid_turn_loses_no_committed_turn_and_another_goes_on() {
    let dir = temp_dir(&format!("serve-kill-{}", unique()));
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    killed_mid_turn(&dir, &store);
}

/// The same on PostgreSQL: two server processes on one database.
#[cfg(unix)]
#[test]
fn a_server_killed_mid_turn_on_postgres_loses_no_committed_turn_and_another_goes_on() {
    let Some(url) = super::processes::fresh_database("serve_kill") else {
        return;
    };
    let dir = temp_dir(&format!("serve-kill-pg-{}", unique()));
    killed_mid_turn(&dir, &url);
}

/// One client's sessions on the doomed server: each created, then its
/// first turn sent; `answered` once the client had the turn's answer.
#[cfg(unix)]
#[derive(Default)]
struct Sent {
    sessions: Vec<(String, bool)>,
}

/// Two servers on one store; a client opens session after session on the
/// first, each with its first turn, and the first server is killed with
/// `kill -9` once the client has had `after` answers and sends the next
/// turn, wherever that turn then is (being read, running, committing,
/// being answered).
/// Every turn the client had answered is in the store, whole; the one cut
/// off is in it whole or not at all, never in part; the client, reading
/// the session on the second server, sends it again there (with the
/// version it read) if it is not, and the conversation goes on.
#[cfg(unix)]
fn killed_at_any_moment(dir: &std::path::Path, store: &str, after: usize) {
    use std::sync::{Arc, Mutex};
    std::fs::write(dir.join("chat.flow"), CHAT).expect("program");
    std::fs::write(dir.join("hold.py"), super::HOLD_PY).expect("tool");
    // The second turns below run the tool at once.
    std::fs::write(dir.join("release"), "").expect("release");
    let args = ["chat.flow", "--store", store];
    let mut doomed = Server::start(dir, &args, &[]);
    let survivor = Server::start(dir, &args, &[]);
    let other = Client::new(survivor.addr, None);

    let sent = Arc::new(Mutex::new(Sent::default()));
    let client = {
        let (sent, first) = (Arc::clone(&sent), Client::new(doomed.addr, None));
        std::thread::spawn(move || {
            let http = reqwest::blocking::Client::new();
            loop {
                let created = http
                    .post(format!("{}/v1/sessions", first.base))
                    .json(&json!({ "program": "chat" }))
                    .send()
                    .and_then(reqwest::blocking::Response::json::<serde_json::Value>);
                let Some(id) = created.ok().and_then(|created| created["id"].as_str().map(str::to_string)) else {
                    return;
                };
                sent.lock().expect("the list").sessions.push((id.clone(), false));
                let answered = http
                    .post(format!("{}/v1/sessions/{id}/messages", first.base))
                    .json(&json!({ "text": "hello" }))
                    .send()
                    .is_ok_and(|response| response.status() == 200);
                if !answered {
                    return;
                }
                if let Some(last) = sent.lock().expect("the list").sessions.last_mut() {
                    last.1 = true;
                }
            }
        })
    };
    // Once the client has its `after` answers and has created the next
    // session, its turn is on its way: the kill lands in it somewhere.
    while sent.lock().expect("the list").sessions.len() <= after {
        assert!(doomed.child.try_wait().ok().flatten().is_none(), "the server died early: {}", doomed.said());
        std::thread::yield_now();
    }
    doomed.child.kill().expect("kill -9");
    doomed.exit();
    client.join().expect("the client thread");

    let sessions = std::mem::take(&mut sent.lock().expect("the list").sessions);
    assert!(sessions.iter().filter(|(_, answered)| *answered).count() >= after);
    let mut whole = None;
    for (id, answered) in &sessions {
        let (status, shown) = other.get(&format!("/v1/sessions/{id}"));
        assert_eq!(status, 200, "{shown}");
        let turns = shown["turns"].as_u64().expect("a turn count");
        if *answered || turns == 1 {
            // Answered, or committed before the answer was lost: whole.
            assert_eq!((turns, shown["step"].as_str()), (1, Some("ask")), "{shown}");
            assert_eq!(history(&shown), ["hello", "Name?"], "{shown}");
            let version = shown["version"].as_u64().expect("a version");
            assert_eq!(*whole.get_or_insert(version), version, "every first turn leaves one version: {shown}");
        } else {
            // Cut off before its commit: nothing of it.
            assert_eq!(turns, 0, "{shown}");
            assert!(history(&shown).is_empty(), "{shown}");
        }
    }
    // The last session's turn was the one in flight (or none was, if the
    // kill landed while a session was being created): the client reads
    // where it stands on the other server and goes on from there.
    let (id, answered) = sessions.last().expect("a session");
    let (_, shown) = other.get(&format!("/v1/sessions/{id}"));
    let version = shown["version"].as_u64().expect("a version");
    let landed = match (answered, shown["turns"].as_u64()) {
        (true, _) => "between requests or in a creation",
        (false, Some(0)) => "before the turn's commit (absent)",
        _ => "after the turn's commit, before its answer (whole)",
    };
    eprintln!("{store}: killed after {after} answers, {landed}");
    if shown["turns"] == 0 {
        let (status, turn) =
            other.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "hello", "version": version }));
        assert_eq!((status, turn["step"].as_str()), (200, Some("ask")), "{turn}");
    } else {
        let (status, stale) =
            other.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "hello", "version": version - 1 }));
        assert_eq!((status, code(&stale)), (409, "version_conflict"), "{stale}");
    }
    let (status, turn) = other.say(id, "Bob");
    assert_eq!((status, turn["reply"].as_str()), (200, Some("Done, Bob.")), "{turn}");
    let (_, shown) = other.get(&format!("/v1/sessions/{id}"));
    assert_eq!(history(&shown), ["hello", "Name?", "Bob", "Done, Bob."], "{shown}");
}

/// Kills after 1, 5 and 20 answers: the kill lands wherever the next
/// turn then is, a different moment each time.
const KILL_AFTER: [usize; 3] = [1, 5, 20];

#[cfg(unix)]
#[test]
fn a_server_killed_at_any_moment_leaves_each_turn_whole_or_absent_on_sqlite() {
    for after in KILL_AFTER {
        let dir = temp_dir(&format!("serve-kill-any-{}", unique()));
        let store = format!("sqlite:{}", dir.join("flowc.db").display());
        killed_at_any_moment(&dir, &store, after);
    }
}

#[cfg(unix)]
#[test]
fn a_server_killed_at_any_moment_leaves_each_turn_whole_or_absent_on_postgres() {
    for after in KILL_AFTER {
        let Some(url) = super::processes::fresh_database("serve_kill_any") else {
            return;
        };
        let dir = temp_dir(&format!("serve-kill-any-pg-{}", unique()));
        killed_at_any_moment(&dir, &url, after);
    }
}
