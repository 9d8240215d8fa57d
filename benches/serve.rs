//! `flowc serve` under load: booking conversations over HTTP/1.1 keep-alive
//! connections to an in-process server on 127.0.0.1, offline provider, at
//! 1, 10 and 100 concurrent sessions, and 100 sessions offered a fixed
//! rate. Each closed-loop client creates a session, sends
//! the two booking messages, and starts again; every turn's latency (the
//! request as the client sees it: HTTP, the turn, the store's commit) is
//! recorded. The clients are tasks on one thread of their own, each with
//! its connection (non-blocking sockets, one `epoll`): a hundred client
//! threads blocking on their sockets took a third of the machine's CPU,
//! mostly the kernel switching between them, which the server then did
//! not get. Prints turns/s, p50 and p99 per level, and the server's
//! resident memory per open session.
//!
//! Two kinds of load, which answer different questions:
//!
//! - **Closed loop** (the 1, 10 and 100 levels): each client sends a turn,
//!   waits for its answer, sends the next. This gives the saturation
//!   throughput, but not latency at a rate: with N clients always waiting,
//!   Little's law makes the mean latency exactly N / throughput. Were
//!   every request a turn, 100 clients at 5,000 turns/s would wait 20 ms
//!   on average, and a p99 under 10 ms would need more than 10,000
//!   turns/s; here a session is created every two turns, so 5,000 turns/s
//!   are 7,500 requests/s and a 13 ms mean, and a p99 under 10 ms needs
//!   more than 10,000 requests/s (6,700 turns/s). The 100-client p99 is
//!   what it is; below that rate it cannot be under 10 ms, however fast
//!   each turn.
//! - **Open loop** (wrk2-style, constant rate): 100 sessions opened first,
//!   then turns offered at a fixed total rate (5,000/s, `OFFERED`), each
//!   session 50/s on its own schedule (staggered evenly). A turn is sent at
//!   its scheduled time, or when the session's previous turn returns if
//!   that is later, and its latency runs from the scheduled time, so a
//!   server that stalls is charged for every turn it held up (coordinated
//!   omission corrected). Prints the offered and achieved rates, p50, p99,
//!   p99.9 and max from the scheduled times, and the errors. This is how
//!   "X turns/s with p99 under Y" is stated: latency at a rate the server
//!   is offered, which it must keep up with (achieved ≈ offered). The
//!   sessions book again and again (the booking message, then "yes"), so
//!   no session is created while it runs; the client thread's timer has a
//!   resolution of 1 ms, which a turn sent late is charged for.
//!
//! `--seconds N` makes each level run N seconds (4 unless said).
//! `-- --rate R [--sessions S] [--repeat N]` runs only the open loop
//! (after a short warm-up), at R turns/s over S sessions (100 unless
//! said), N times on one server (once unless said; each run opens its
//! own sessions, the store and the server's cache carrying over, as a
//! server's would), then the least, the median (the upper one for an
//! even N) and the greatest p99 of the N: one run's p99 on a shared
//! 2-core machine moves by a few milliseconds from run to run;
//! `-- --count N --sessions S` only a closed loop of N conversations per
//! client; `--workers N` gives the server N async workers (2, `flowc
//! serve`'s default, unless said).
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
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/http.rs"]
mod http;
mod support;
use http::{BOOK, Connection};

/// The allocator the `flowc` binary ships with: measured with the system
/// allocator instead, an eighth of the server's time went to glibc's
/// malloc and free (`perf record` on this bench), which `flowc serve` never
/// pays.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The open-loop level's offered rate: the target's 5,000 turns/s.
const OFFERED: f64 = 5000.0;

fn fail(message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(2);
}

fn session_id(body: &str) -> String {
    http::session_id(body).unwrap_or_else(|message| fail(message))
}

/// How long a client goes on: for a time, or for a number of conversations.
#[derive(Clone, Copy)]
enum Until {
    Elapsed(Duration),
    Conversations(usize),
}

/// CPU time (user and system) of the calling thread, or of the whole
/// process.
fn cpu(clock: libc::clockid_t) -> Duration {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid, writable timespec for the call.
    if unsafe { libc::clock_gettime(clock, &raw mut time) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(time.tv_sec).unwrap_or(0), u32::try_from(time.tv_nsec).unwrap_or(0))
}

/// One keep-alive connection of the async clients: the same bytes as
/// [`Connection`] (benches/support/http.rs), on a non-blocking socket.
struct AsyncConnection {
    stream: tokio::net::TcpStream,
    buffer: Vec<u8>,
}

impl AsyncConnection {
    async fn open(addr: SocketAddr) -> AsyncConnection {
        let stream =
            tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|error| fail(format!("cannot connect: {error}")));
        let _ = stream.set_nodelay(true);
        AsyncConnection { stream, buffer: Vec::with_capacity(4096) }
    }

    async fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        self.try_post(path, body).await.unwrap_or_else(|message| fail(message))
    }

    async fn try_post(&mut self, path: &str, body: &str) -> Result<(u16, String), String> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut written = 0;
        while written < request.len() {
            self.stream.writable().await.map_err(|error| format!("cannot send: {error}"))?;
            match self.stream.try_write(request.as_bytes().get(written..).unwrap_or_default()) {
                Ok(count) => written += count,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(format!("cannot send: {error}")),
            }
        }
        self.buffer.clear();
        loop {
            if let Some(answer) = response(&self.buffer) {
                return Ok(answer);
            }
            self.stream.readable().await.map_err(|error| format!("cannot read a response: {error}"))?;
            let mut chunk = [0u8; 8192];
            match self.stream.try_read(&mut chunk) {
                Ok(0) => return Err("the server closed the connection".to_string()),
                Ok(count) => self.buffer.extend_from_slice(chunk.get(..count).unwrap_or_default()),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(format!("cannot read a response: {error}")),
            }
        }
    }
}

/// The status and body of the whole response at the start of `bytes`, or
/// `None` while part of it is still to come.
fn response(bytes: &[u8]) -> Option<(u16, String)> {
    let head_end = bytes.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = std::str::from_utf8(bytes.get(..head_end)?).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    let length: usize = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    let body = bytes.get(head_end + 4..head_end + 4 + length)?;
    Some((status, String::from_utf8_lossy(body).into_owned()))
}

/// One client: booking conversations until `until`; its turn latencies.
async fn client(addr: SocketAddr, until: Until) -> Vec<Duration> {
    let mut connection = AsyncConnection::open(addr).await;
    let mut latencies = Vec::new();
    let deadline = match until {
        Until::Elapsed(run_for) => Some(Instant::now() + run_for),
        Until::Conversations(_) => None,
    };
    let mut left = match until {
        Until::Elapsed(_) => usize::MAX,
        Until::Conversations(count) => count,
    };
    let book = http::message(BOOK);
    let yes = http::message("yes");
    while left > 0 && deadline.is_none_or(|deadline| Instant::now() < deadline) {
        left -= 1;
        let (status, created) = connection.post("/v1/sessions", r#"{"program": "booking"}"#).await;
        if status != 201 {
            fail(format!("creating a session answered {status}: {created}"));
        }
        let path = format!("/v1/sessions/{}/messages", session_id(&created));
        for message in [&book, &yes] {
            let started = Instant::now();
            let (status, turn) = connection.post(&path, message).await;
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
    // `flowc serve`'s default, unless `--workers N` says otherwise.
    let workers = number_after("--workers").unwrap_or(2);
    flowc::serve::start(&options, workers, false)
        .unwrap_or_else(|message| fail(format!("the server does not start: {message} (run from the repository root)")))
}

/// The runtime the bench's clients run on: one thread of their own.
fn clients_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| fail(format!("cannot start the clients' runtime: {error}")))
}

/// `sessions` clients spread over the servers at `addrs`, one after the
/// other, all on one thread of their own.
fn level(name: &str, addrs: &[SocketAddr], sessions: usize, until: Until) {
    let committed = store_commits(addrs);
    let addrs: Vec<SocketAddr> = addrs.to_vec();
    let clients = std::thread::spawn(move || {
        let runtime = clients_runtime();
        runtime.block_on(async move {
            let began = Instant::now();
            let cpu_began = cpu(libc::CLOCK_PROCESS_CPUTIME_ID);
            let thread_began = cpu(libc::CLOCK_THREAD_CPUTIME_ID);
            let tasks: Vec<_> = (0..sessions)
                .zip(addrs.iter().copied().cycle())
                .map(|(_, addr)| tokio::spawn(client(addr, until)))
                .collect();
            let mut latencies = Vec::new();
            for task in tasks {
                latencies.extend(task.await.unwrap_or_default());
            }
            let clients_cpu = cpu(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(thread_began);
            let cpu_spent = cpu(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(cpu_began);
            (latencies, began.elapsed().as_secs_f64(), cpu_spent, clients_cpu, addrs)
        })
    });
    let (mut latencies, elapsed, cpu_spent, clients_cpu, addrs) =
        clients.join().unwrap_or_else(|_| fail("the clients' thread panicked".to_string()));
    let batches = per_commit(committed, store_commits(&addrs));
    latencies.sort();
    let turns = latencies.len().max(1) as f64;
    println!(
        "{name:<10} {sessions:>3} sessions: {:>7.0} turns/s, p50 {:.2} ms, p99 {:.2} ms ({} turns); \
         CPU per turn {:.0} µs, of which clients {:.0} µs; load {}{batches}",
        latencies.len() as f64 / elapsed,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.len(),
        cpu_spent.as_secs_f64() * 1e6 / turns,
        clients_cpu.as_secs_f64() * 1e6 / turns,
        load_average(),
    );
}

/// What one session of the open-loop level saw: each turn's latency from
/// the time it was scheduled and from the time it was sent, how late the
/// clients' timer sent it (after it was due and the previous turn was
/// answered), the answers other than 200 (and a broken
/// connection, which ends the session), and the turns that booked.
#[derive(Default)]
struct Paced {
    latencies: Vec<Duration>,
    from_sent: Vec<Duration>,
    late: Vec<Duration>,
    errors: usize,
    booked: usize,
}

/// One session of the open-loop level: its `n`-th turn is due at `first +
/// n × period` (until `end`) and is sent then, or when the turn before it
/// returns if that is later; its latency runs from when it was due, so a
/// server that stalls is charged for every turn it held up (coordinated
/// omission corrected, as wrk2 does). The session books again and again:
/// the booking message, then "yes".
async fn paced(mut connection: AsyncConnection, path: String, first: Instant, period: Duration, end: Instant) -> Paced {
    let book = http::message(BOOK);
    let yes = http::message("yes");
    let mut seen = Paced::default();
    let mut answered = first;
    for (turn, due) in (0u32..).map(|turn| (turn, first + period * turn)).take_while(|(_, due)| *due < end) {
        tokio::time::sleep_until(due.into()).await;
        let message = if turn % 2 == 0 { &book } else { &yes };
        let sent = Instant::now();
        // The timer's own lateness: from when the turn could be sent (due,
        // or the previous answer if the server was still on it).
        seen.late.push(sent.saturating_duration_since(due.max(answered)));
        let answer = connection.try_post(&path, message).await;
        answered = Instant::now();
        match answer {
            Ok((200, answer)) => {
                seen.latencies.push(due.elapsed());
                seen.from_sent.push(sent.elapsed());
                seen.booked += usize::from(answer.contains("Booked!"));
            }
            Ok(_) => {
                seen.latencies.push(due.elapsed());
                seen.errors += 1;
            }
            Err(_) => {
                seen.errors += 1;
                break;
            }
        }
    }
    seen
}

/// The open-loop level: `sessions` sessions, opened first, then offered
/// `rate` turns/s in all for `run_for`, each session `rate / sessions`
/// turns/s on a schedule of its own (the sessions' schedules evenly
/// staggered). Prints the offered and achieved rates, the latency
/// percentiles from the scheduled times, and the errors, and gives the
/// p99 in milliseconds. Beside them: the p99 from the time each turn was
/// sent, and how late the clients' timer sent turns, which the latency
/// from the scheduled time includes (the server is charged for it).
fn open_level(name: &str, addr: SocketAddr, sessions: usize, rate: f64, run_for: Duration) -> f64 {
    let committed = store_commits(&[addr]);
    let clients = std::thread::spawn(move || {
        let runtime = clients_runtime();
        runtime.block_on(async move {
            let opening: Vec<_> = (0..sessions)
                .map(|_| {
                    tokio::spawn(async move {
                        let mut connection = AsyncConnection::open(addr).await;
                        let (status, created) = connection.post("/v1/sessions", r#"{"program": "booking"}"#).await;
                        if status != 201 {
                            fail(format!("creating a session answered {status}: {created}"));
                        }
                        let path = format!("/v1/sessions/{}/messages", session_id(&created));
                        (connection, path)
                    })
                })
                .collect();
            let mut opened = Vec::new();
            for task in opening {
                opened.push(task.await.unwrap_or_else(|_| fail("opening a session panicked".to_string())));
            }
            let period = Duration::from_secs_f64(sessions as f64 / rate);
            let start = Instant::now() + Duration::from_millis(20);
            let end = start + run_for;
            let cpu_began = cpu(libc::CLOCK_PROCESS_CPUTIME_ID);
            let thread_began = cpu(libc::CLOCK_THREAD_CPUTIME_ID);
            let tasks: Vec<_> = opened
                .into_iter()
                .enumerate()
                .map(|(index, (connection, path))| {
                    let first = start + period.mul_f64(index as f64 / sessions as f64);
                    tokio::spawn(paced(connection, path, first, period, end))
                })
                .collect();
            let mut seen = Paced::default();
            for task in tasks {
                let one = task.await.unwrap_or_default();
                seen.latencies.extend(one.latencies);
                seen.from_sent.extend(one.from_sent);
                seen.late.extend(one.late);
                seen.errors += one.errors;
                seen.booked += one.booked;
            }
            let clients_cpu = cpu(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(thread_began);
            let cpu_spent = cpu(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(cpu_began);
            (seen, start.elapsed().as_secs_f64(), cpu_spent, clients_cpu)
        })
    });
    let (mut seen, elapsed, cpu_spent, clients_cpu) =
        clients.join().unwrap_or_else(|_| fail("the clients' thread panicked".to_string()));
    let batches = per_commit(committed, store_commits(&[addr]));
    seen.latencies.sort();
    seen.from_sent.sort();
    seen.late.sort();
    let turns = seen.latencies.len().max(1) as f64;
    let max = seen.latencies.last().map_or(0.0, |latest| latest.as_secs_f64() * 1e3);
    let p99 = percentile(&seen.latencies, 99.0);
    println!(
        "{name:<10} {sessions:>3} sessions, open loop: offered {rate:.0} turns/s, achieved {:.0} turns/s; \
         from the scheduled time p50 {:.2} ms, p99 {p99:.2} ms, p99.9 {:.2} ms, max {max:.2} ms ({} turns, {} booked, \
         {} errors); from the send p99 {:.2} ms; sent late by the clients' timer p50 {:.2} ms, p99 {:.2} ms; \
         CPU per turn {:.0} µs, of which clients {:.0} µs; load {}{batches}",
        seen.latencies.len() as f64 / elapsed,
        percentile(&seen.latencies, 50.0),
        percentile(&seen.latencies, 99.9),
        seen.latencies.len(),
        seen.booked,
        seen.errors,
        percentile(&seen.from_sent, 99.0),
        percentile(&seen.late, 50.0),
        percentile(&seen.late, 99.0),
        cpu_spent.as_secs_f64() * 1e6 / turns,
        clients_cpu.as_secs_f64() * 1e6 / turns,
        load_average(),
    );
    p99
}

/// The session saves the servers at `addrs` committed so far, and the
/// transactions that held them (their `/metrics`); `None` where the store
/// does not commit saves together (PostgreSQL).
fn store_commits(addrs: &[SocketAddr]) -> Option<(u64, u64)> {
    let mut total = (0, 0);
    for addr in addrs {
        let mut connection = Connection::open(*addr).ok()?;
        let (_, text) = connection.request("GET", "/metrics", "").ok()?;
        let value = |name: &str| -> Option<u64> {
            text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        };
        total.0 += value("flowc_store_commits_total")?;
        total.1 += value("flowc_store_saves_committed_total")?;
    }
    Some(total)
}

/// Saves per transaction between two readings of [`store_commits`], as
/// the end of a level's line.
fn per_commit(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> String {
    match (before, after) {
        (Some((commits, saves)), Some((commits_after, saves_after))) if commits_after > commits => {
            format!("; {:.1} saves per commit", (saves_after - saves) as f64 / (commits_after - commits) as f64)
        }
        _ => String::new(),
    }
}

/// The machine's load average over the last minute, as `/proc/loadavg`
/// says: the figures beside it mean little when it is high.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// Memory per open session: the resident size of a fresh server grown by
/// opening (and holding one turn in) `count` sessions, over `count`. The
/// server keeps the sessions it saved, up to 4,096 (`serve/cache.rs`):
/// that is what an open session costs it, and beyond that it stays flat.
fn memory_per_session(addr: SocketAddr, count: usize) {
    let Some(before) = resident_kib() else {
        return;
    };
    let mut connection = Connection::open(addr).unwrap_or_else(|message| fail(message));
    for _ in 0..count {
        let (_, created) = connection
            .request("POST", "/v1/sessions", r#"{"program": "booking"}"#)
            .unwrap_or_else(|message| fail(message));
        let path = format!("/v1/sessions/{}/messages", session_id(&created));
        connection.request("POST", &path, &http::message(BOOK)).unwrap_or_else(|message| fail(message));
    }
    let after = resident_kib().unwrap_or(before);
    println!(
        "memory: {:.2} KiB resident per open session ({count} sessions on a fresh server, {before} → {after} KiB)",
        after.saturating_sub(before) as f64 / count as f64
    );
}

/// How long each level runs: `--seconds N` if given, else 4 s (1 s with
/// `--quick`). A longer run shows what a short one cannot: the kernel's
/// writeback of the store's files, which starts after seconds.
fn run_time(quick: bool) -> Duration {
    match number_after("--seconds") {
        Some(seconds) => Duration::from_secs(seconds as u64),
        None => Duration::from_millis(if quick { 1000 } else { 4000 }),
    }
}

/// The value after `flag` on the command line, as a number.
fn number_after(flag: &str) -> Option<usize> {
    support::number_after(flag).unwrap_or_else(|message| fail(message))
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let run_for = Until::Elapsed(run_time(quick));
    let warm = Until::Elapsed(Duration::from_millis(200));
    let dir = std::env::temp_dir().join(format!("flowc-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = std::fs::create_dir_all(&dir) {
        fail(format!("cannot create {}: {error}", dir.display()));
    }
    if let Some(rate) = number_after("--rate") {
        let sessions = number_after("--sessions").unwrap_or(100);
        let running = server(StoreLocation::Sqlite(dir.join("flowc.db")));
        level("sqlite", &[running.addr], 10, warm);
        let repeat = number_after("--repeat").unwrap_or(1).max(1);
        let mut p99s: Vec<f64> =
            (0..repeat).map(|_| open_level("sqlite", running.addr, sessions, rate as f64, run_time(quick))).collect();
        if repeat > 1 {
            p99s.sort_by(f64::total_cmp);
            let at = |index: usize| p99s.get(index).copied().unwrap_or(0.0);
            println!(
                "sqlite     p99 over {repeat} runs of {rate} turns/s: least {:.2} ms, median {:.2} ms, greatest {:.2} ms",
                at(0),
                at(repeat / 2),
                at(repeat - 1)
            );
        }
        if let Err(message) = running.stop() {
            fail(message);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    if let Some(count) = number_after("--count") {
        let sessions = number_after("--sessions").unwrap_or(10);
        let running = server(StoreLocation::Sqlite(dir.join("flowc.db")));
        level("sqlite", &[running.addr], sessions, Until::Conversations(count));
        if let Err(message) = running.stop() {
            fail(message);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let mut stores = vec![("sqlite", StoreLocation::Sqlite(dir.join("flowc.db")))];
    if let Ok(url) = std::env::var("FLOWC_BENCH_POSTGRES") {
        stores.push(("postgres", StoreLocation::Postgres(url)));
    }
    for (name, store) in stores {
        // The memory phase's own server, on a database of its own.
        let fresh = match &store {
            StoreLocation::Sqlite(_) => StoreLocation::Sqlite(dir.join("memory.db")),
            other => other.clone(),
        };
        let running = server(store.clone());
        // Warm the runtime pool and the store's caches.
        level(name, &[running.addr], 10, warm);
        println!("-- {name}");
        for sessions in [1, 10, 100] {
            level(name, &[running.addr], sessions, run_for);
        }
        if let StoreLocation::Sqlite(_) = store {
            let _ = open_level(name, running.addr, 100, OFFERED, run_time(quick));
        }
        if let StoreLocation::Postgres(_) = store {
            // Two servers on one database, each with its own pool, as two
            // `flowc serve` processes would be (here in one process).
            let second = server(store);
            level(name, &[running.addr, second.addr], 10, warm);
            for sessions in [10, 100] {
                level("postgres×2", &[running.addr, second.addr], sessions, run_for);
            }
            if let Err(message) = second.stop() {
                fail(message);
            }
        }
        if let Err(message) = running.stop() {
            fail(message);
        }
        let running = server(fresh);
        memory_per_session(running.addr, if quick { 1000 } else { 4000 });
        if let Err(message) = running.stop() {
            fail(message);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
