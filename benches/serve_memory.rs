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
//! Run with `cargo bench --bench serve_memory` (`-- --quick` for 2,000
//! sessions, `-- --repeat 3` for three fresh servers in a row).

use flowc::serve::auth::Auth;
use flowc::serve::programs::ProgramSettings;
use flowc::serve::{Running, ServeOptions};
use flowc::store::StoreLocation;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::net::SocketAddr;
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
    let mut tools = flowc::runtime::tools::ToolRegistry::default();
    tools.register("book_hotel", Arc::new(support::BookDouble));
    let (clock, ids) = flowc::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), None)
        .unwrap_or_else(|error| fail(error.to_string()));
    let options = ServeOptions {
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
    let repeat = number_after("--repeat").unwrap_or(1).max(1);
    let steps: &[usize] = if quick { &[1000, 2000] } else { &[1000, CACHE_CAPACITY, 10_000] };
    let dir = std::env::temp_dir().join(format!("flowc-bench-serve-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = std::fs::create_dir_all(&dir) {
        fail(format!("cannot create {}: {error}", dir.display()));
    }
    println!("machine: {}", support::machine());
    let total = steps.last().copied().unwrap_or(0);
    for repetition in 1..=repeat {
        let summary = measure(&dir, repetition, steps);
        report(&summary, total);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
