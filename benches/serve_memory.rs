//! What an open session costs `flowc serve` in memory, counted rather than
//! guessed from the resident size. The resident size of a fresh server
//! moved by allocator reuse and page faults (runs of benches/serve.rs
//! printed 1.21, 3.72 and 0.00 KiB per session); here a counting global
//! allocator around mimalloc (the allocator the binary ships with) keeps
//! the live bytes (allocated − freed) and their peak, so the figure is the
//! Rust heap the server holds (the client's thread is left out of the
//! count). SQLite allocates through libc's malloc, not Rust's allocator:
//! its own figure is `sqlite3_memory_used`, printed beside.
//!
//! One in-process server on SQLite (offline provider, the booking tool in
//! process, as in benches/serve.rs) answers one keep-alive client that
//! opens sessions, each with the two booking turns, and reads the live heap
//! at 1,000, 4,096 (the capacity of the server's kept sessions,
//! src/serve/cache.rs) and 10,000 sessions: below 4,096 a session's share
//! is what the cache holds of it, above that the cache stops growing and
//! the slope is what an evicted session costs. Then every session is
//! DELETEd, the same load is run again on the same server and deleted
//! again: a leak shows as the second round's live heap above the first's.
//!
//! Then the fault phase: a server with short deadlines and a small body
//! limit takes, one kind after another, malformed JSON, bodies over the
//! limit, unknown routes, slowloris clients, a flood of session creations
//! (then DELETEd), turns streamed as server-sent events and dropped after
//! the first event, and clients that connect and close at once; a second
//! server, its tenant at its cap of sessions, a flood past the cap (429).
//! Each kind is warmed up, then run for two equal halves of its rounds
//! with the live heap read before, between and after (once the server has
//! no connection, turn or stream of the fault left open): a leak is a
//! growth per round that does not flatten, so while the last half still
//! grew another is run (four at most) and the last one decides. After each kind the
//! server must still answer `/healthz` and a normal turn, and the bench
//! exits 2 if a kind leaves the heap growing.
//!
//! Run with `cargo bench --bench serve_memory` (`-- --quick` for 2,000
//! sessions and half the fault rounds, `-- --repeat 3` for three fresh
//! servers in a row, `-- --faults-only` or `-- --no-faults` for one phase).
//! With `FLOWC_BENCH_POSTGRES` set to a server URL whose database may be
//! written, the fault phase runs again on PostgreSQL.

use flowc::serve::auth::Auth;
use flowc::serve::programs::ProgramSettings;
use flowc::serve::{Running, ServeOptions};
use flowc::store::StoreLocation;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

#[path = "support/http.rs"]
mod http;
mod support;
use http::{BOOK, Connection};

/// mimalloc, counting: `LIVE` is the bytes handed out and not yet given
/// back, `PEAK` the most of them at once since the last [`reset_peak`].
/// Relaxed atomics: the counts are read when the server is idle between
/// requests, after the request's own synchronisation.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// Set on the client's thread while it drives the server: its requests,
    /// answers and the ids it keeps are not the server's memory. The two
    /// share nothing but a socket, so nothing allocated uncounted is freed
    /// counted, or the other way round.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    // During a thread's teardown the flag is gone: count, as by default.
    UNCOUNTED.try_with(|flag| !flag.get()).unwrap_or(true)
}

fn grow(bytes: usize) {
    if !counted() {
        return;
    }
    let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrink(bytes: usize) {
    if !counted() {
        return;
    }
    LIVE.fetch_sub(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
}

// SAFETY: every call is passed on to mimalloc unchanged; the counters do
// not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !pointer.is_null() {
            grow(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !pointer.is_null() {
            grow(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.dealloc(pointer, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { mimalloc::MiMalloc.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            grow(new_size);
            shrink(layout.size());
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> i64 {
    PEAK.load(Ordering::Relaxed)
}

/// The bytes SQLite holds (all its connections: page caches, statements,
/// schema), from its own counter, which the bundled build keeps on.
fn sqlite_bytes() -> i64 {
    // SAFETY: a read of SQLite's global statistics; no argument, no state.
    unsafe { rusqlite::ffi::sqlite3_memory_used() }
}

fn fail(message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(2);
}

fn session_id(body: &str) -> String {
    http::session_id(body).unwrap_or_else(|message| fail(message))
}

fn server(database: &Path) -> Running {
    server_with(database, |_| {})
}

/// A server on `database` with `adjust` applied to its options (the fault
/// phase's short deadlines, small body limit and cap).
fn server_with(database: &Path, adjust: impl FnOnce(&mut ServeOptions)) -> Running {
    let mut tools = flowc::runtime::tools::ToolRegistry::default();
    tools.register("book_hotel", Arc::new(support::BookDouble));
    let (clock, ids) = flowc::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), None)
        .unwrap_or_else(|error| fail(error.to_string()));
    let mut options = ServeOptions {
        files: vec![PathBuf::from("flows/booking.flow")],
        addr: "127.0.0.1:0".parse().unwrap_or_else(|_| fail("address".to_string())),
        store: StoreLocation::Sqlite(database.to_path_buf()),
        auth: Auth::default(),
        insecure_open: false,
        body_limit: flowc::serve::DEFAULT_BODY_LIMIT,
        settings: ProgramSettings { provider_flags: Default::default(), limits: Default::default(), clock, ids, tools },
        run_poll: Duration::from_millis(100),
        deadlines: Default::default(),
        caps: Default::default(),
    };
    adjust(&mut options);
    flowc::serve::start(&options, 2, false)
        .unwrap_or_else(|message| fail(format!("the server does not start: {message} (run from the repository root)")))
}

/// The one client: a keep-alive connection, and the ids it opened.
struct Client {
    connection: Connection,
    open: Vec<String>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        Client { connection: Connection::open(addr).unwrap_or_else(|message| fail(message)), open: Vec::new() }
    }

    fn expect(&mut self, method: &str, path: &str, body: &str, status: u16) -> String {
        let (answered, text) = self.connection.request(method, path, body).unwrap_or_else(|message| fail(message));
        if answered != status {
            fail(format!("{method} {path} answered {answered}, not {status}: {text}"));
        }
        text
    }

    /// Opens sessions until `total` are open, each with the two booking
    /// turns (the second books and ends the conversation).
    fn open_until(&mut self, total: usize) {
        let book = http::message(BOOK);
        let yes = http::message("yes");
        while self.open.len() < total {
            let created = self.expect("POST", "/v1/sessions", r#"{"program": "booking"}"#, 201);
            let id = session_id(&created);
            let path = format!("/v1/sessions/{id}/messages");
            self.expect("POST", &path, &book, 200);
            self.expect("POST", &path, &yes, 200);
            self.open.push(id);
        }
    }

    fn delete_all(&mut self) {
        for id in std::mem::take(&mut self.open) {
            let (status, text) = self
                .connection
                .request("DELETE", &format!("/v1/sessions/{id}"), "")
                .unwrap_or_else(|message| fail(message));
            if !(200..300).contains(&status) {
                fail(format!("DELETE {id} answered {status}: {text}"));
            }
        }
    }

    /// The heap once the server is idle: a last round trip after the
    /// measured requests, so their answers (and the work before them) are
    /// done.
    fn settled(&mut self) -> Reading {
        self.expect("GET", "/healthz", "", 200);
        Reading { heap: live(), peak: peak(), sqlite: sqlite_bytes() }
    }
}

#[derive(Clone, Copy)]
struct Reading {
    heap: i64,
    peak: i64,
    sqlite: i64,
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn row(what: &str, open: usize, reading: Reading, baseline: Reading) {
    println!(
        "{what:<34} {open:>6} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        mib(reading.heap),
        mib(reading.heap - baseline.heap),
        mib(reading.peak),
        mib(reading.sqlite),
    );
}

/// Bytes per session between two readings, Rust heap and SQLite.
fn slope(from: (usize, Reading), to: (usize, Reading)) -> (f64, f64) {
    let sessions = to.0.abs_diff(from.0).max(1) as f64;
    ((to.1.heap - from.1.heap) as f64 / sessions, (to.1.sqlite - from.1.sqlite) as f64 / sessions)
}

/// One fresh server: the table, and the figures the summary repeats.
fn measure(dir: &Path, repetition: usize, steps: &[usize]) -> Summary {
    let database = dir.join(format!("memory-{repetition}.db"));
    let running = server(&database);
    UNCOUNTED.with(|flag| flag.set(true));
    let mut client = Client::new(running.addr);
    // Warm up: the program's first turns, the store's statements and the
    // runtime's lazily built parts, then gone again, so that the baseline
    // holds what a server holds before its first session.
    client.open_until(20);
    client.delete_all();
    reset_peak();
    let baseline = client.settled();
    println!("-- fresh server {repetition}, SQLite, sessions with two booking turns each");
    println!("{:<34} {:>6} {:>9} {:>9} {:>9} {:>9}", "after", "open", "heap MiB", "Δ MiB", "peak MiB", "SQLite MiB");
    row("baseline (warmed, nothing open)", 0, baseline, baseline);
    let mut first = Vec::new();
    for &step in steps {
        client.open_until(step);
        let reading = client.settled();
        row("opening, round 1", step, reading, baseline);
        first.push((step, reading));
    }
    let total = steps.last().copied().unwrap_or(0);
    client.delete_all();
    let deleted_first = client.settled();
    row("all DELETEd, round 1", 0, deleted_first, baseline);
    client.open_until(total);
    let second = client.settled();
    row("same load again, round 2", total, second, baseline);
    client.delete_all();
    let deleted_second = client.settled();
    row("all DELETEd, round 2", 0, deleted_second, baseline);
    drop(client);
    UNCOUNTED.with(|flag| flag.set(false));
    if let Err(message) = running.stop() {
        fail(message);
    }
    let _ = std::fs::remove_file(&database);
    let cached = first.iter().rev().find(|(open, _)| *open <= CACHE_CAPACITY).copied().unwrap_or((0, baseline));
    let last = first.last().copied().unwrap_or((0, baseline));
    let full = first.last().map_or(baseline, |(_, reading)| *reading);
    Summary {
        cached: slope((0, baseline), cached),
        evicted: if last.0 > cached.0 { Some(slope(cached, last)) } else { None },
        // Only the kept sessions have anything to free in the heap.
        freed_per_session: (full.heap - deleted_first.heap) as f64 / total.clamp(1, CACHE_CAPACITY) as f64,
        open_drift: second.heap - full.heap,
        deleted_drift: deleted_second.heap - deleted_first.heap,
        left_after_delete: deleted_first.heap - baseline.heap,
        peak: deleted_second.peak - baseline.heap,
        sqlite_most: deleted_second.sqlite.max(full.sqlite),
    }
}

/// The capacity of the server's kept sessions (`serve::cache`).
const CACHE_CAPACITY: usize = 4096;

struct Summary {
    /// Rust heap and SQLite bytes per session while the cache still grows.
    cached: (f64, f64),
    /// The same past the cache's capacity.
    evicted: Option<(f64, f64)>,
    freed_per_session: f64,
    open_drift: i64,
    deleted_drift: i64,
    left_after_delete: i64,
    peak: i64,
    sqlite_most: i64,
}

fn report(summary: &Summary, total: usize) {
    println!(
        "per open session, up to {CACHE_CAPACITY} (kept in the cache): {:.0} B heap, {:.0} B SQLite",
        summary.cached.0, summary.cached.1
    );
    if let Some((heap, sqlite)) = summary.evicted {
        // `+ 0.0` turns a -0 into 0 for the print.
        println!(
            "per open session past {CACHE_CAPACITY} (evicted, in the store only): {:.0} B heap, {:.0} B SQLite",
            heap.round() + 0.0,
            sqlite.round() + 0.0
        );
    }
    println!(
        "SQLite's own memory stops at {:.2} MiB (its page caches are bounded): not a cost per session",
        mib(summary.sqlite_most)
    );
    println!(
        "DELETE frees {:.0} B heap per kept session; {:.2} MiB above the baseline once all are deleted",
        summary.freed_per_session,
        mib(summary.left_after_delete)
    );
    println!(
        "leak check, round 2 − round 1 ({total} open): {:+.1} KiB; after deleting all: {:+.1} KiB; peak over both rounds {:.2} MiB above the baseline",
        summary.open_drift as f64 / 1024.0,
        summary.deleted_drift as f64 / 1024.0,
        mib(summary.peak)
    );
}

/// The value after `flag` on the command line, as a number.
fn number_after(flag: &str) -> Option<usize> {
    support::number_after(flag).unwrap_or_else(|message| fail(message))
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let faults_only = std::env::args().any(|arg| arg == "--faults-only");
    let no_faults = std::env::args().any(|arg| arg == "--no-faults");
    let repeat = number_after("--repeat").unwrap_or(1).max(1);
    let steps: &[usize] = if quick { &[1000, 2000] } else { &[1000, CACHE_CAPACITY, 10_000] };
    let dir = std::env::temp_dir().join(format!("flowc-bench-serve-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = std::fs::create_dir_all(&dir) {
        fail(format!("cannot create {}: {error}", dir.display()));
    }
    println!("machine: {}", support::machine());
    let total = steps.last().copied().unwrap_or(0);
    if !faults_only {
        for repetition in 1..=repeat {
            let summary = measure(&dir, repetition, steps);
            report(&summary, total);
        }
    }
    let mut flat = true;
    if !no_faults {
        let postgres = std::env::var("FLOWC_BENCH_POSTGRES").ok();
        for store in std::iter::once(None).chain(postgres.as_deref().map(Some)) {
            for repetition in 1..=repeat {
                flat &= measure_faults(&dir, store, repetition, quick);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !flat {
        fail("a fault left the heap growing round after round: a leak".to_string());
    }
}

// ---------------------------------------------------------------------
// The fault phase: what misbehaving clients leave in the server's heap.
// ---------------------------------------------------------------------

/// The fault server's deadlines: short, so a slowloris round ends soon,
/// and far above what a request on loopback takes.
const FAULT_DEADLINE: Duration = Duration::from_millis(250);

/// The fault server's body limit: small, so an over-the-limit body is a
/// few KiB (hyper reads it whole, and the answer is not lost to a reset).
const FAULT_BODY_LIMIT: usize = 1024;

/// The tenant cap of the second fault server, filled before its rounds.
const FAULT_CAP: usize = 100;

/// A read that a broken server would leave hanging ends the bench after
/// this instead of stalling it; nothing is timed by it.
const HANG: Duration = Duration::from_secs(30);

/// Sends `request` on a connection of its own, reads the answer (its head
/// and as much body as it announces) and closes the connection, as a
/// client does once it has its answer. (Waiting for the server to close
/// it instead waits out its header deadline after a 413: the body it did
/// not read keeps the connection open that long.)
fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|error| fail(format!("cannot connect: {error}")));
    let _ = stream.set_read_timeout(Some(HANG));
    if let Err(error) = stream.write_all(request) {
        fail(format!("cannot send: {error}"));
    }
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, value)| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return text.into_owned();
            }
        }
        match stream.read(&mut buffer) {
            Ok(0) => fail(format!("the server closed the connection before it answered: {text}")),
            Ok(read) => answer.extend_from_slice(buffer.get(..read).unwrap_or_default()),
            Err(error) => fail(format!("the server did not answer: {error}")),
        }
    }
}

fn expect_status(answer: &str, status: u16, what: &str) {
    if !answer.starts_with(&format!("HTTP/1.1 {status}")) {
        fail(format!("{what} was not answered {status}: {answer}"));
    }
}

/// The value of an unlabelled metric in a `/metrics` text.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// One kind of fault: a round of it against the server, and how many
/// requests (or connections) a round is.
struct Fault {
    name: &'static str,
    per_round: usize,
    rounds: usize,
    round: fn(&mut FaultClient),
}

/// The client of the fault phase: a keep-alive connection for the
/// well-behaved requests and `/metrics`, and fresh sockets for the faults.
struct FaultClient {
    client: Client,
    addr: SocketAddr,
}

impl FaultClient {
    /// Waits until the server has nothing left of the faults in flight:
    /// only this client's connection open, no turn running, no event
    /// stream open. A connection the client closed ends on the server a
    /// moment later; the heap is read only after that. A request on a
    /// connection of its own first: the server takes connections in
    /// order, so once it is answered every connection opened before it
    /// has been taken (and counted).
    fn quiet(&mut self) {
        let answer = exchange(self.addr, b"GET /healthz HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n");
        expect_status(&answer, 200, "a health check on a connection of its own");
        for _ in 0..200_000 {
            let text = self.expect("GET", "/metrics", "", 200);
            let open = |name| metric(&text, name).unwrap_or(u64::MAX);
            if open("flowc_connections_open") == 1
                && open("flowc_turns_in_flight") == 0
                && open("flowc_event_streams_open") == 0
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        fail("the server never settled: connections, turns or event streams stay open".to_string())
    }

    fn reading(&mut self) -> Reading {
        self.quiet();
        self.expect("GET", "/healthz", "", 200);
        Reading { heap: live(), peak: peak(), sqlite: sqlite_bytes() }
    }

    /// A request on the kept-alive connection, opened again if the server
    /// closed it: the fault server's short header deadline closes it when
    /// it has been idle that long (while the faults used other sockets),
    /// and a request sent to a closed connection was never read.
    fn send(&mut self, method: &str, path: &str, body: &str) -> (u16, String) {
        match self.client.connection.request(method, path, body) {
            Ok(answer) => answer,
            Err(_) => {
                self.client = Client::new(self.addr);
                self.client.connection.request(method, path, body).unwrap_or_else(|message| fail(message))
            }
        }
    }

    fn expect(&mut self, method: &str, path: &str, body: &str, status: u16) -> String {
        let answer = self.send(method, path, body);
        if answer.0 != status {
            fail(format!("{method} {path} answered {}, not {status}: {}", answer.0, answer.1));
        }
        answer.1
    }

    /// A normal conversation after the fault: a session, a booking turn,
    /// and the session gone again.
    fn normal_turn(&mut self) {
        self.expect("GET", "/healthz", "", 200);
        let created = self.expect("POST", "/v1/sessions", r#"{"program": "booking"}"#, 201);
        let id = session_id(&created);
        self.expect("POST", &format!("/v1/sessions/{id}/messages"), &http::message(BOOK), 200);
        self.expect("DELETE", &format!("/v1/sessions/{id}"), "", 204);
    }
}

fn malformed_json(client: &mut FaultClient) {
    for body in ["{", "[1, 2]", "", "{\"program\": \"booking\",}", "\u{0}", "{\"program\": 7}"] {
        client.expect("POST", "/v1/sessions", body, 400);
    }
}

fn over_the_limit(client: &mut FaultClient) {
    // Announced: answered before the body is sent.
    let announced = "POST /v1/sessions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n\
                     content-length: 1048576\r\n\r\n{\"program\": \"";
    expect_status(&exchange(client.addr, announced.as_bytes()), 413, "a body announced over the limit");
    // Chunked: cut off once it passes the limit.
    let chunk = "a".repeat(FAULT_BODY_LIMIT * 2);
    let chunked = format!(
        "POST /v1/sessions HTTP/1.1\r\nhost: bench\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    expect_status(&exchange(client.addr, chunked.as_bytes()), 413, "a chunked body over the limit");
}

fn unknown_routes(client: &mut FaultClient) {
    for path in ["/nowhere", "/v1", "/v1/sessions/a/b/c", "/favicon.ico"] {
        client.expect("GET", path, "", 404);
    }
}

/// Slowloris: each connection sends the start of a head, then one byte of
/// a header every few milliseconds, until the server cuts it off at its
/// header deadline.
fn slowloris(client: &mut FaultClient) {
    let mut open: Vec<TcpStream> = (0..SLOWLORIS_CONNECTIONS)
        .map(|_| {
            let mut stream =
                TcpStream::connect(client.addr).unwrap_or_else(|error| fail(format!("cannot connect: {error}")));
            if stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: bench\r\nx-pad: ").is_err() {
                fail("a slow client was cut off before its deadline".to_string());
            }
            if let Err(error) = stream.set_nonblocking(true) {
                fail(format!("cannot make a socket non-blocking: {error}"));
            }
            stream
        })
        .collect();
    let started = std::time::Instant::now();
    let mut answered = String::new();
    while !open.is_empty() {
        open.retain_mut(|stream| {
            let mut buffer = [0u8; 512];
            match stream.read(&mut buffer) {
                // Closed by the server: what it should do.
                Ok(0) => false,
                Ok(read) => {
                    answered.push_str(&String::from_utf8_lossy(buffer.get(..read).unwrap_or_default()));
                    false
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => stream.write_all(b"a").is_ok(),
                Err(_) => false,
            }
        });
        if answered.starts_with("HTTP/1.1 2") {
            fail(format!("an unfinished head was answered: {answered}"));
        }
        if started.elapsed() > HANG {
            fail(format!("{} slow clients were never cut off", open.len()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Connections a slowloris round holds at once.
const SLOWLORIS_CONNECTIONS: usize = 16;

/// Session creations a flood round sends.
const FLOOD: usize = 50;

fn flood_past_the_cap(client: &mut FaultClient) {
    for _ in 0..FLOOD {
        client.expect("POST", "/v1/sessions", r#"{"program": "booking"}"#, 429);
    }
}

fn flood_then_delete(client: &mut FaultClient) {
    let ids: Vec<String> = (0..FLOOD)
        .map(|_| session_id(&client.expect("POST", "/v1/sessions", r#"{"program": "booking"}"#, 201)))
        .collect();
    for id in ids {
        client.expect("DELETE", &format!("/v1/sessions/{id}"), "", 204);
    }
}

/// Streamed turns a dropped-stream round starts.
const DROPPED_STREAMS: usize = 4;

/// Each turn streamed with `Accept: text/event-stream` on a connection of
/// its own, dropped after its first event; once the server has finished
/// them (their turns commit whether or not anyone reads), the sessions
/// are deleted.
fn dropped_streams(client: &mut FaultClient) {
    let body = http::message(BOOK);
    let mut ids = Vec::new();
    for _ in 0..DROPPED_STREAMS {
        let id = session_id(&client.expect("POST", "/v1/sessions", r#"{"program": "booking"}"#, 201));
        let request = format!(
            "POST /v1/sessions/{id}/messages HTTP/1.1\r\nhost: bench\r\naccept: text/event-stream\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream =
            TcpStream::connect(client.addr).unwrap_or_else(|error| fail(format!("cannot connect: {error}")));
        let _ = stream.set_read_timeout(Some(HANG));
        if let Err(error) = stream.write_all(request.as_bytes()) {
            fail(format!("cannot send: {error}"));
        }
        // The head, then the first event (a blank line ends it).
        let mut seen = Vec::new();
        let mut buffer = [0u8; 1024];
        loop {
            if let Some((head, rest)) = String::from_utf8_lossy(&seen).split_once("\r\n\r\n") {
                if !head.starts_with("HTTP/1.1 200") {
                    fail(format!("a streamed turn was answered {head}"));
                }
                if rest.contains("\n\n") {
                    break;
                }
            }
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => {
                    fail(format!("the stream ended before its first event: {}", String::from_utf8_lossy(&seen)))
                }
                Ok(read) => seen.extend_from_slice(buffer.get(..read).unwrap_or_default()),
            }
        }
        drop(stream);
        ids.push(id);
    }
    client.quiet();
    for id in ids {
        let shown = client.expect("GET", &format!("/v1/sessions/{id}"), "", 200);
        let turns = serde_json::from_str::<serde_json::Value>(&shown).unwrap_or_default()["turns"].as_u64();
        if turns != Some(1) {
            fail(format!("a dropped streamed turn was not committed: {shown}"));
        }
        client.expect("DELETE", &format!("/v1/sessions/{id}"), "", 204);
    }
}

/// Connections a connect-and-close round opens.
const HANG_UPS: usize = 50;

fn connect_and_close(client: &mut FaultClient) {
    for _ in 0..HANG_UPS {
        drop(TcpStream::connect(client.addr).unwrap_or_else(|error| fail(format!("cannot connect: {error}"))));
    }
}

/// What one fault kind did to the heap.
struct FaultFigures {
    /// Bytes per round over each half of the rounds: two, and up to
    /// [`MOST_HALVES`] while the last one still grew.
    halves: Vec<f64>,
    /// The most the heap held above its reading before the rounds.
    peak: i64,
    sqlite: i64,
    /// The time the kind took, warm-up included.
    seconds: f64,
}

/// A growth per round below this is noise (the last request's answer, a
/// connection's buffers), not a leak.
const FLAT: f64 = 16.0;

/// A table that grows once (a map doubling, a thread of the blocking pool
/// started) shows as growth in one half only; a leak grows in every half.
/// So a half that grew is followed by another, up to this many in all,
/// and the verdict is the last half's.
const MOST_HALVES: usize = 4;

/// Warms the server up with a few rounds of `fault`, then reads the heap
/// before and after each half of its rounds.
fn measure_fault(client: &mut FaultClient, fault: &Fault) -> FaultFigures {
    let started = std::time::Instant::now();
    for _ in 0..fault.rounds.div_ceil(4) {
        (fault.round)(client);
    }
    let before = client.reading();
    reset_peak();
    let rounds = fault.rounds.max(1) as f64;
    let mut halves = Vec::new();
    let mut last = before;
    while halves.len() < 2 || (halves.len() < MOST_HALVES && halves.last().is_some_and(|growth| *growth >= FLAT)) {
        for _ in 0..fault.rounds {
            (fault.round)(client);
        }
        let reading = client.reading();
        halves.push((reading.heap - last.heap) as f64 / rounds);
        last = reading;
    }
    FaultFigures {
        halves,
        peak: last.peak - before.heap,
        sqlite: last.sqlite - before.sqlite,
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn fault_row(fault: &Fault, figures: &FaultFigures) -> bool {
    let flat = figures.halves.last().is_some_and(|growth| *growth < FLAT);
    // `+ 0.0` turns a -0 into 0 for the print.
    let halves: Vec<String> = figures.halves.iter().map(|growth| format!("{:.1}", growth + 0.0)).collect();
    println!(
        "{:<38} {:>6} {:>5} {:>24} {:>9.1} {:>9.1} {:>6.1} {}",
        fault.name,
        fault.rounds,
        fault.per_round,
        halves.join(" / "),
        figures.peak as f64 / 1024.0,
        figures.sqlite as f64 / 1024.0,
        figures.seconds,
        if flat { "flat; healthz + a turn ok" } else { "GROWS: a leak" },
    );
    flat
}

/// The fault phase: one server with short deadlines and a small body
/// limit takes each fault in turn, and a second one, its tenant at its
/// cap of sessions, takes the flood past the cap. On SQLite each server
/// has a database file of its own; on PostgreSQL (`postgres`, a URL) both
/// share the database, and whatever a phase creates it deletes. Returns
/// whether every fault left the heap flat.
fn measure_faults(dir: &Path, postgres: Option<&str>, repetition: usize, quick: bool) -> bool {
    let scale = if quick { 1 } else { 2 };
    let faults = [
        Fault { name: "malformed JSON (400)", per_round: 6, rounds: 200 * scale, round: malformed_json },
        Fault { name: "bodies over the limit (413)", per_round: 2, rounds: 100 * scale, round: over_the_limit },
        Fault { name: "unknown routes (404)", per_round: 4, rounds: 200 * scale, round: unknown_routes },
        Fault {
            name: "slowloris, cut at the header deadline",
            per_round: SLOWLORIS_CONNECTIONS,
            rounds: 4 * scale,
            round: slowloris,
        },
        Fault {
            name: "session flood, no cap, then DELETE",
            per_round: FLOOD * 2,
            rounds: 10 * scale,
            round: flood_then_delete,
        },
        Fault {
            name: "SSE turn dropped after 1st event",
            per_round: DROPPED_STREAMS,
            rounds: 25 * scale,
            round: dropped_streams,
        },
        Fault { name: "connect and close at once", per_round: HANG_UPS, rounds: 10 * scale, round: connect_and_close },
    ];
    let capped = Fault {
        name: "session flood past the cap (429)",
        per_round: FLOOD,
        rounds: 20 * scale,
        round: flood_past_the_cap,
    };
    let deadlines = flowc::serve::listen::Deadlines { header: FAULT_DEADLINE, body: FAULT_DEADLINE };
    println!(
        "-- faults on {}, server {repetition}: deadlines {} ms, body limit {FAULT_BODY_LIMIT} B; live heap growth per round over each half (`rounds` each)",
        if postgres.is_some() { "PostgreSQL" } else { "SQLite" },
        FAULT_DEADLINE.as_millis()
    );
    println!(
        "{:<38} {:>6} {:>5} {:>24} {:>9} {:>9} {:>6}",
        "fault", "rounds", "each", "B/round, half by half", "peak KiB", "SQLite KiB", "s"
    );
    let mut flat = true;
    let database = dir.join(format!("faults-{repetition}.db"));
    let running = server_with(&database, |options| {
        options.deadlines = deadlines;
        options.body_limit = FAULT_BODY_LIMIT;
        if let Some(url) = postgres {
            options.store = StoreLocation::Postgres(url.to_string());
        }
    });
    UNCOUNTED.with(|flag| flag.set(true));
    let mut client = FaultClient { client: Client::new(running.addr), addr: running.addr };
    client.normal_turn();
    for fault in &faults {
        let figures = measure_fault(&mut client, fault);
        client.normal_turn();
        flat &= fault_row(fault, &figures);
    }
    drop(client);
    UNCOUNTED.with(|flag| flag.set(false));
    if let Err(message) = running.stop() {
        fail(message);
    }

    let database = dir.join(format!("faults-capped-{repetition}.db"));
    let running = server_with(&database, |options| {
        options.deadlines = deadlines;
        options.caps.sessions_per_tenant = u64::try_from(FAULT_CAP).ok();
        if let Some(url) = postgres {
            options.store = StoreLocation::Postgres(url.to_string());
        }
    });
    UNCOUNTED.with(|flag| flag.set(true));
    let mut client = FaultClient { client: Client::new(running.addr), addr: running.addr };
    // Filled until refused: a shared database may hold sessions already.
    let mut kept = Vec::new();
    loop {
        match client.send("POST", "/v1/sessions", r#"{"program": "booking"}"#) {
            (201, created) if kept.len() < FAULT_CAP => kept.push(session_id(&created)),
            (429, _) => break,
            (status, text) => fail(format!("filling the tenant to its cap: {status} {text}")),
        }
    }
    let figures = measure_fault(&mut client, &capped);
    // At the cap, the normal turn's new session is refused: one deleted
    // makes room for it.
    let Some(id) = kept.pop() else {
        fail(format!("the database already holds {FAULT_CAP} sessions or more: the fault phase needs a fresh one"))
    };
    client.expect("DELETE", &format!("/v1/sessions/{id}"), "", 204);
    client.normal_turn();
    flat &= fault_row(&capped, &figures);
    for id in kept {
        client.expect("DELETE", &format!("/v1/sessions/{id}"), "", 204);
    }
    drop(client);
    UNCOUNTED.with(|flag| flag.set(false));
    if let Err(message) = running.stop() {
        fail(message);
    }
    flat
}
