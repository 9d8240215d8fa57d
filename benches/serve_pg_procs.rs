//! Two `flowc serve` processes on one PostgreSQL database, under the booking
//! load: at 1, 10 and 100 concurrent sessions each client holds booking
//! conversations ("Book the Grand Hotel for 2 guests on 2026-12-04", then
//! "yes"), every request going to the other server than the one before, so
//! that no turn finds the session where the previous one left it. A 409
//! (two servers raced on a session) is sent again and counted. Prints
//! turns/s, p50 and p99 of a turn as the client sees it (retries included),
//! the retries and errors, and the machine's load average beside them.
//!
//! PostgreSQL: `FLOWC_BENCH_POSTGRES` names a server whose database may be
//! written; without it the bench starts a throwaway cluster as
//! `scripts/test.sh` does (Debian's server binaries, a temporary directory,
//! a free port on 127.0.0.1, stopped and removed at the end). Commits are
//! durable (the server's defaults: `fsync` and `synchronous_commit` on).
//! The servers are the release `flowc` binary cargo builds for the bench,
//! on the offline provider, serving a copy of flows/booking.flow whose
//! booking tool is the builtin `uuid` (in process, as the other benches'
//! double) instead of a Python script spawned per booking.
//!
//! `cargo bench --bench serve_pg_procs` (`--quick` for a short run;
//! `FLOWC_BENCH_POOL=N` for each server's pool, default the store's 10;
//! `FLOWC_BENCH_FLOWC=PATH` serves with another `flowc` binary, such as
//! a copy built from an older commit, to compare two on one machine).
//!
//! `FLOWC_BENCH_COUNT=1` counts the statements the servers send: the
//! throwaway cluster logs every statement (`log_statement = all`), and each
//! level prints how many it executed per turn, by kind (a session's load,
//! a turn's save, a creation, anything else). Logging slows the server,
//! so the turns/s of a counting run are not the figures to quote.

#[path = "support/http.rs"]
mod http;

use http::{BOOK, Connection};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The cluster to stop if the bench fails midway: `exit` runs no
/// destructor, and a cluster left running would hold its port and files.
static STARTED: std::sync::Mutex<Option<(PathBuf, PathBuf)>> = std::sync::Mutex::new(None);

/// The servers to stop if the bench fails midway, for the same reason.
static SERVERS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

fn terminate(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: a signal to a child this bench started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

fn fail(message: String) -> ! {
    eprintln!("{message}");
    let servers = SERVERS.lock().map(|mut servers| std::mem::take(&mut *servers)).unwrap_or_default();
    for pid in servers {
        terminate(pid);
    }
    let started = STARTED.lock().ok().and_then(|mut started| started.take());
    if let Some((bin, dir)) = started {
        stop_cluster(&bin, &dir);
    }
    std::process::exit(2);
}

fn stop_cluster(bin: &Path, dir: &Path) {
    let data = dir.join("data").display().to_string();
    let _ = as_owner(&bin.join("pg_ctl"), &["-D", &data, "-m", "immediate", "stop"]).output();
    let _ = std::fs::remove_dir_all(dir);
}

/// A throwaway PostgreSQL cluster, stopped and removed when dropped.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    url: String,
}

/// The server's log, whose statement lines a counting run reads.
fn log_path(dir: &Path) -> PathBuf {
    dir.join("log")
}

/// Runs a cluster command as the cluster's owner: initdb refuses root, so
/// as root the cluster belongs to the `postgres` user Debian's package makes.
fn as_owner(program: &Path, args: &[&str]) -> Command {
    // SAFETY: geteuid only reads the process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    };
    command.args(args);
    command
}

impl Cluster {
    fn start(count: bool) -> Cluster {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| {
                versions.filter_map(Result::ok).map(|entry| entry.path().join("bin")).filter(|bin| bin.is_dir()).max()
            })
            .unwrap_or_else(|| {
                fail("no PostgreSQL server in /usr/lib/postgresql: run scripts/install-test-deps.sh".to_string())
            });
        let dir = std::env::temp_dir().join(format!("flowc-bench-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(error) = std::fs::create_dir_all(&dir) {
            fail(format!("cannot create {}: {error}", dir.display()));
        }
        // SAFETY: geteuid only reads the process's credentials.
        if unsafe { libc::geteuid() } == 0 {
            let _ = Command::new("chown").args(["-R", "postgres"]).arg(&dir).status();
        }
        let data = dir.join("data");
        let data_text = data.display().to_string();
        let run = |command: &mut Command, what: &str| {
            let output = command.output().unwrap_or_else(|error| fail(format!("cannot run {what}: {error}")));
            if !output.status.success() {
                fail(format!("{what} failed: {}", String::from_utf8_lossy(&output.stderr)));
            }
        };
        run(
            &mut as_owner(&bin.join("initdb"), &["-D", &data_text, "-U", "flowc", "--auth=trust", "-E", "UTF8"]),
            "initdb",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .unwrap_or_else(|error| fail(format!("no free port: {error}")));
        let mut options =
            format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200", dir.display());
        if count {
            // Each statement on one line of its own kind; its parameters
            // (a session's whole state) are left out of the log.
            options.push_str(" -c log_statement=all -c log_parameter_max_length=0");
        }
        let log = log_path(&dir).display().to_string();
        let cluster = Cluster { bin, dir, url: format!("postgres://flowc@127.0.0.1:{port}/postgres") };
        if let Ok(mut started) = STARTED.lock() {
            *started = Some((cluster.bin.clone(), cluster.dir.clone()));
        }
        run(
            &mut as_owner(&cluster.bin.join("pg_ctl"), &["-D", &data_text, "-l", &log, "-w", "-o", &options, "start"]),
            "pg_ctl start",
        );
        cluster
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(mut started) = STARTED.lock() {
            *started = None;
        }
        stop_cluster(&self.bin, &self.dir);
    }
}

/// A `flowc serve` process, stopped (SIGTERM, then waited for) when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(program: &Path, store: &str) -> Server {
        let binary = std::env::var_os("FLOWC_BENCH_FLOWC").unwrap_or_else(|| env!("CARGO_BIN_EXE_flowc").into());
        let mut child = Command::new(binary)
            .arg("serve")
            .arg(program)
            .args(["--addr", "127.0.0.1:0", "--store", store])
            .env_remove("FLOWC_PROVIDER")
            .env_remove("FLOWC_SEED")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| fail(format!("flowc serve does not start: {error}")));
        let Some(stderr) = child.stderr.take() else {
            fail("flowc serve has no stderr".to_string());
        };
        let mut lines = BufReader::new(stderr).lines();
        let mut said = String::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                fail(format!("flowc serve exited before listening: {said}"));
            };
            said.push_str(&line);
            said.push('\n');
            if let Some(rest) = line.strip_prefix("flowc serve: listening on http://") {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                break addr.parse().unwrap_or_else(|_| fail(format!("no address in {line}")));
            }
        };
        // The rest of its stderr goes on being read, so it never blocks on it.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("flowc serve {addr}: {line}");
            }
        });
        if let Ok(mut servers) = SERVERS.lock() {
            servers.push(child.id());
        }
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id();
        if let Ok(mut servers) = SERVERS.lock() {
            servers.retain(|started| *started != pid);
        }
        terminate(pid);
        let _ = self.child.wait();
    }
}

/// What one client saw.
#[derive(Default)]
struct Seen {
    latencies: Vec<Duration>,
    errors: Vec<String>,
}

/// Sends `body` until it is answered with something other than 409,
/// counting the 409s.
fn until_not_conflict(connection: &mut Connection, path: &str, body: &str, retries: &AtomicU64) -> (u16, String) {
    loop {
        let (status, answer) = connection.request("POST", path, body).unwrap_or_else(|message| fail(message));
        if status != 409 {
            return (status, answer);
        }
        retries.fetch_add(1, Ordering::Relaxed);
    }
}

/// One client: booking conversations until `run_for` has passed, each
/// request to the other server than the one before.
fn client(addrs: [SocketAddr; 2], first: usize, start: &Barrier, run_for: Duration, retries: &AtomicU64) -> Seen {
    let mut connections = addrs.map(|addr| Connection::open(addr).unwrap_or_else(|message| fail(message)));
    let mut next = first;
    let mut seen = Seen::default();
    start.wait();
    let until = Instant::now() + run_for;
    let book = http::message(BOOK);
    let yes = http::message("yes");
    while Instant::now() < until && seen.errors.len() < 10 {
        let (status, created) = connections[next % 2]
            .request("POST", "/v1/sessions", r#"{"program": "booking"}"#)
            .unwrap_or_else(|message| fail(message));
        next += 1;
        let Some(id) = http::session_id(&created).ok().filter(|_| status == 201) else {
            seen.errors.push(format!("creating a session answered {status}: {created}"));
            continue;
        };
        let path = format!("/v1/sessions/{id}/messages");
        for (message, expected) in [(&book, "Shall I book"), (&yes, "Booked!")] {
            let started = Instant::now();
            let (status, turn) = until_not_conflict(&mut connections[next % 2], &path, message, retries);
            next += 1;
            seen.latencies.push(started.elapsed());
            let reply = serde_json::from_str::<serde_json::Value>(&turn)
                .ok()
                .and_then(|value| value["reply"].as_str().map(str::to_string))
                .unwrap_or_default();
            if status != 200 || !reply.starts_with(expected) {
                seen.errors.push(format!("a turn answered {status}: {turn}"));
                break;
            }
        }
    }
    seen
}

fn percentile(samples: &[Duration], percent: f64) -> f64 {
    let last = samples.len().saturating_sub(1);
    let rank = ((percent / 100.0) * last as f64).round() as usize;
    samples.get(rank.min(last)).map_or(0.0, |sample| sample.as_secs_f64() * 1e3)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "?".to_string(), |text| text.trim().to_string())
}

/// The statements a stretch of the server's log shows, by kind.
#[derive(Default)]
struct Statements {
    loads: u64,
    saves: u64,
    creations: u64,
    other: u64,
}

impl Statements {
    /// The statements logged in `log` from byte `from` on.
    fn logged(log: &Path, from: u64) -> Statements {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = Vec::new();
        let read = std::fs::File::open(log)
            .and_then(|mut file| file.seek(SeekFrom::Start(from)).and_then(|_| file.read_to_end(&mut text)));
        if let Err(error) = read {
            fail(format!("cannot read the server's log {}: {error}", log.display()));
        }
        let mut counted = Statements::default();
        let mut current: Option<String> = None;
        for line in String::from_utf8_lossy(&text).lines() {
            // A statement's text goes on over the lines that do not start
            // with the log's own prefix (a timestamp).
            if line.starts_with(char::is_whitespace) {
                if let Some(statement) = current.as_mut() {
                    statement.push(' ');
                    statement.push_str(line.trim());
                }
                continue;
            }
            if let Some(statement) = current.take() {
                counted.add(&statement);
            }
            current = ["LOG:  execute ", "LOG:  statement: "]
                .iter()
                .find_map(|marker| line.split_once(marker).map(|(_, rest)| rest.to_string()));
        }
        if let Some(statement) = current {
            counted.add(&statement);
        }
        counted
    }

    fn add(&mut self, statement: &str) {
        if statement.contains("UPDATE sessions") {
            self.saves += 1;
        } else if statement.contains("INSERT INTO sessions") {
            self.creations += 1;
        } else if statement.contains("SELECT version, state FROM sessions") {
            self.loads += 1;
        } else {
            self.other += 1;
        }
    }

    fn per_turn(&self, turns: usize) -> String {
        let each = |count: u64| count as f64 / turns.max(1) as f64;
        format!(
            "{:.2} statements a turn: loads {:.2}, saves {:.2}, creations {:.2}, other {:.2}",
            each(self.loads + self.saves + self.creations + self.other),
            each(self.loads),
            each(self.saves),
            each(self.creations),
            each(self.other)
        )
    }
}

fn log_length(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |metadata| metadata.len())
}

/// One level of load; with `log`, the statements it cost are counted.
fn level(addrs: [SocketAddr; 2], sessions: usize, run_for: Duration, report: bool, log: Option<&Path>) {
    let logged_from = log.map(log_length);
    let start = Arc::new(Barrier::new(sessions + 1));
    let retries = Arc::new(AtomicU64::new(0));
    let before = loadavg();
    let clients: Vec<_> = (0..sessions)
        .map(|index| {
            let start = Arc::clone(&start);
            let retries = Arc::clone(&retries);
            std::thread::spawn(move || client(addrs, index, &start, run_for, &retries))
        })
        .collect();
    start.wait();
    let began = Instant::now();
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    for client in clients {
        let seen = client.join().unwrap_or_default();
        latencies.extend(seen.latencies);
        errors.extend(seen.errors);
    }
    let elapsed = began.elapsed().as_secs_f64();
    latencies.sort();
    if !report {
        return;
    }
    println!(
        "pg 2 procs {sessions:>3} sessions: {:>7.0} turns/s, p50 {:.2} ms, p99 {:.2} ms ({} turns, {} retries on 409, {} errors; loadavg {before} → {})",
        latencies.len() as f64 / elapsed,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.len(),
        retries.load(Ordering::Relaxed),
        errors.len(),
        loadavg()
    );
    if let (Some(log), Some(from)) = (log, logged_from) {
        println!("  {}", Statements::logged(log, from).per_turn(latencies.len()));
    }
    if let Some(first) = errors.first() {
        println!("  first error: {first}");
    }
}

/// flows/booking.flow with its booking tool answered in process.
fn program(dir: &Path) -> PathBuf {
    let source = std::fs::read_to_string("flows/booking.flow").unwrap_or_else(|error| {
        fail(format!("cannot read flows/booking.flow (run from the repository root): {error}"))
    });
    // A builtin takes no timeout: the exec line and its timeout go together.
    let exec = "exec \"python3\" \"tools/book_hotel.py\"\n  timeout 10s";
    if !source.contains(exec) {
        fail(format!("flows/booking.flow no longer books with `{exec}`: update the bench"));
    }
    let path = dir.join("booking.flow");
    if let Err(error) = std::fs::write(&path, source.replace(exec, "builtin uuid")) {
        fail(format!("cannot write {}: {error}", path.display()));
    }
    path
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let run_for = Duration::from_millis(if quick { 1500 } else { 5000 });
    let dir = std::env::temp_dir().join(format!("flowc-bench-procs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = std::fs::create_dir_all(&dir) {
        fail(format!("cannot create {}: {error}", dir.display()));
    }
    let program = program(&dir);
    let count = std::env::var("FLOWC_BENCH_COUNT").is_ok_and(|value| value == "1");
    let (cluster, url) = match std::env::var("FLOWC_BENCH_POSTGRES") {
        Ok(_) if count => {
            fail("FLOWC_BENCH_COUNT counts on the cluster the bench starts: unset FLOWC_BENCH_POSTGRES".to_string())
        }
        Ok(url) => (None, url),
        Err(_) => {
            let cluster = Cluster::start(count);
            let url = cluster.url.clone();
            (Some(cluster), url)
        }
    };
    let store = match std::env::var("FLOWC_BENCH_POOL") {
        Ok(size) => format!("{url}{}pool_size={size}", if url.contains('?') { '&' } else { '?' }),
        Err(_) => url,
    };
    let servers = [Server::start(&program, &store), Server::start(&program, &store)];
    let addrs = [servers[0].addr, servers[1].addr];
    println!("-- two flowc serve processes on one PostgreSQL (durable commits), store {store}");
    println!("   (the machine is shared: the load average says how busy it was)");
    // Warm both servers' pools (connections are opened as turns need
    // them) and blocking threads up to the largest level.
    let log = cluster.as_ref().filter(|_| count).map(|cluster| log_path(&cluster.dir));
    if log.is_some() {
        println!("   (counting statements: every statement is logged, so turns/s are lower than without)");
    }
    level(addrs, 100, Duration::from_millis(1000), false, None);
    for sessions in [1, 10, 100] {
        level(addrs, sessions, run_for, true, log.as_deref());
    }
    drop(servers);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
