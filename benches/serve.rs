//! `flowc serve` under load: booking conversations over HTTP/1.1 keep-alive
//! connections to an in-process server on 127.0.0.1, offline provider, at
//! 1, 10 and 100 concurrent sessions. Each client creates a session, sends
//! the two booking messages, and starts again; every turn's latency (the
//! request as the client sees it: HTTP, the turn, the store's commit) is
//! recorded. Prints turns/s, p50 and p99 per level, and the server's
//! resident memory per open session.
//!
//! The booking tool is an in-process double (as in the runtime and store
//! benches). SQLite always; PostgreSQL too when `FLOWC_BENCH_POSTGRES` holds a
//! server URL whose database may be written (durable commits unless the
//! URL says otherwise). Run with `cargo bench --bench serve` (`--quick` for
//! a short run).

use flowc::serve::auth::Auth;
use flowc::serve::programs::ProgramSettings;
use flowc::serve::{Running, ServeOptions};
use flowc::store::StoreLocation;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

mod support;

/// The allocator the `flowc` binary ships with: measured with the system
/// allocator instead, an eighth of the server's time went to glibc's
/// malloc and free (`perf record` on this bench), which `flowc serve` never
/// pays.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

fn fail(message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(2);
}

/// One keep-alive connection speaking just enough HTTP/1.1 for the bench:
/// a hand-written client costs the machine far less than the server it
/// measures.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).unwrap_or_else(|error| fail(format!("cannot connect: {error}")));
        let _ = stream.set_nodelay(true);
        let writer = stream.try_clone().unwrap_or_else(|error| fail(format!("cannot clone the socket: {error}")));
        Connection { reader: BufReader::new(stream), writer }
    }

    fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if let Err(error) = self.writer.write_all(request.as_bytes()) {
            fail(format!("cannot send: {error}"));
        }
        let mut status = 0;
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => fail("the server closed the connection".to_string()),
                Ok(_) => {}
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some(rest) = trimmed.strip_prefix("HTTP/1.1 ") {
                status = rest.get(..3).and_then(|code| code.parse().ok()).unwrap_or(0);
            } else if let Some((name, value)) = trimmed.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if let Err(error) = self.reader.read_exact(&mut body) {
            fail(format!("cannot read a response: {error}"));
        }
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

fn session_id(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    value["id"].as_str().map_or_else(|| fail(format!("no session id in {body}")), str::to_string)
}

/// One client: booking conversations until `until`; its turn latencies.
fn client(addr: SocketAddr, start: &Barrier, run_for: Duration) -> Vec<Duration> {
    let mut connection = Connection::open(addr);
    let mut latencies = Vec::new();
    start.wait();
    let until = Instant::now() + run_for;
    let book = serde_json::json!({ "text": BOOK }).to_string();
    let yes = serde_json::json!({ "text": "yes" }).to_string();
    while Instant::now() < until {
        let (status, created) = connection.post("/v1/sessions", r#"{"program": "booking"}"#);
        if status != 201 {
            fail(format!("creating a session answered {status}: {created}"));
        }
        let path = format!("/v1/sessions/{}/messages", session_id(&created));
        for message in [&book, &yes] {
            let started = Instant::now();
            let (status, turn) = connection.post(&path, message);
            latencies.push(started.elapsed());
            if status != 200 {
                fail(format!("a turn answered {status}: {turn}"));
            }
        }
    }
    latencies
}

fn percentile(samples: &[Duration], percent: f64) -> f64 {
    let last = samples.len().saturating_sub(1);
    let rank = ((percent / 100.0) * last as f64).round() as usize;
    samples.get(rank.min(last)).map_or(0.0, |sample| sample.as_secs_f64() * 1e3)
}

fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn server(store: StoreLocation) -> Running {
    // The booking tool answers in process, as in the runtime and store
    // benches: the figures are the server's, not a Python start-up's.
    let mut tools = flowc::runtime::tools::ToolRegistry::default();
    tools.register("book_hotel", Arc::new(support::BookDouble));
    let (clock, ids) = flowc::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), None)
        .unwrap_or_else(|error| fail(error.to_string()));
    let options = ServeOptions {
        files: vec![PathBuf::from("flows/booking.flow")],
        addr: "127.0.0.1:0".parse().unwrap_or_else(|_| fail("address".to_string())),
        store,
        auth: Auth::default(),
        insecure_open: false,
        body_limit: flowc::serve::DEFAULT_BODY_LIMIT,
        settings: ProgramSettings { provider_flags: Default::default(), limits: Default::default(), clock, ids, tools },
        run_poll: Duration::from_millis(100),
        deadlines: Default::default(),
        caps: Default::default(),
    };
    flowc::serve::start(&options, 2, false)
        .unwrap_or_else(|message| fail(format!("the server does not start: {message} (run from the repository root)")))
}

/// `sessions` clients spread over the servers at `addrs`, one after the other.
fn level(name: &str, addrs: &[SocketAddr], sessions: usize, run_for: Duration) {
    let start = Arc::new(Barrier::new(sessions + 1));
    let clients: Vec<_> = (0..sessions)
        .zip(addrs.iter().copied().cycle())
        .map(|(_, addr)| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || client(addr, &start, run_for))
        })
        .collect();
    start.wait();
    let began = Instant::now();
    let mut latencies: Vec<Duration> =
        clients.into_iter().flat_map(|client| client.join().unwrap_or_default()).collect();
    let elapsed = began.elapsed().as_secs_f64();
    latencies.sort();
    println!(
        "{name:<10} {sessions:>3} sessions: {:>7.0} turns/s, p50 {:.2} ms, p99 {:.2} ms ({} turns)",
        latencies.len() as f64 / elapsed,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.len()
    );
}

/// Memory per open session: the server's resident size grown by opening
/// (and holding one turn in) `count` sessions, over `count`.
fn memory_per_session(addr: SocketAddr, count: usize) {
    let Some(before) = resident_kib() else {
        return;
    };
    let mut connection = Connection::open(addr);
    for _ in 0..count {
        let (_, created) = connection.post("/v1/sessions", r#"{"program": "booking"}"#);
        let path = format!("/v1/sessions/{}/messages", session_id(&created));
        connection.post(&path, &serde_json::json!({ "text": BOOK }).to_string());
    }
    let after = resident_kib().unwrap_or(before);
    println!(
        "memory: {:.2} KiB resident per open session ({count} sessions, {before} → {after} KiB; sessions live in the store, not the server)",
        after.saturating_sub(before) as f64 / count as f64
    );
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let run_for = Duration::from_millis(if quick { 1000 } else { 4000 });
    let dir = std::env::temp_dir().join(format!("flowc-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = std::fs::create_dir_all(&dir) {
        fail(format!("cannot create {}: {error}", dir.display()));
    }
    let mut stores = vec![("sqlite", StoreLocation::Sqlite(dir.join("flowc.db")))];
    if let Ok(url) = std::env::var("FLOWC_BENCH_POSTGRES") {
        stores.push(("postgres", StoreLocation::Postgres(url)));
    }
    for (name, store) in stores {
        let running = server(store.clone());
        // Warm the runtime pool and the store's caches.
        level(name, &[running.addr], 10, Duration::from_millis(200));
        println!("-- {name}");
        for sessions in [1, 10, 100] {
            level(name, &[running.addr], sessions, run_for);
        }
        if let StoreLocation::Postgres(_) = store {
            // Two servers on one database, each with its own pool, as two
            // `flowc serve` processes would be (here in one process).
            let second = server(store);
            level(name, &[running.addr, second.addr], 10, Duration::from_millis(200));
            for sessions in [10, 100] {
                level("postgres×2", &[running.addr, second.addr], sessions, run_for);
            }
            if let Err(message) = second.stop() {
                fail(message);
            }
        }
        memory_per_session(running.addr, if quick { 1000 } else { 5000 });
        if let Err(message) = running.stop() {
            fail(message);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
