//! The durable layer's cost: a booking turn committed to a store (the
//! runtime with an instant provider, then `commit_turn`: one transaction
//! with the compare-and-swap and the transcript append), with 1 and 8
//! concurrent writers; the bytes an idle session keeps; resumes per second
//! of 10,000 due workflow runs with 1 and 2 workers; the time per step of
//! one 10,100-step workflow run around its step 100 and its step 10,000
//! (each step saved as a worker saves it); and how long a store takes to
//! open and load after a `flowc` process was killed mid-turn.
//!
//! SQLite always; PostgreSQL too when `FLOWC_BENCH_POSTGRES` (or
//! `FLOWC_TEST_POSTGRES`) holds a server URL whose database may be written.
//! Run with `cargo bench --bench store` (release profile; `--quick` for a
//! short run).

use flowc::runtime::clock::{FixedClock, SeededIds};
use flowc::runtime::session::Session;
use flowc::runtime::tools::{ToolEnv, ToolRegistry};
use flowc::runtime::workflow::WorkflowRunner;
use flowc::store::{Store, StoreLocation, StoredRun, commit_turn};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;
use support::{BOOKING_TURNS, booking_answers, compiled, machine, runtime};

fn open(location: &StoreLocation) -> Box<dyn Store> {
    match flowc::store::open(location) {
        Ok(store) => store,
        Err(error) => {
            eprintln!("cannot open {location}: {error}");
            std::process::exit(2);
        }
    }
}

fn percentile(samples: &mut [Duration], percent: f64) -> f64 {
    samples.sort();
    let last = samples.len().saturating_sub(1);
    let rank = ((percent / 100.0) * last as f64).round() as usize;
    samples.get(rank.min(last)).map_or(0.0, |sample| sample.as_secs_f64() * 1e6)
}

fn booking_program() -> Arc<flowc::ir::Program> {
    match std::fs::read_to_string("flows/booking.flow") {
        Ok(text) => compiled("booking.flow", &text),
        Err(error) => {
            eprintln!("run from the repository root: {error}");
            std::process::exit(2);
        }
    }
}

/// `conversations` booking conversations by one writer, each turn
/// committed; the per-turn times (respond + commit).
fn writer(
    location: &StoreLocation,
    name: &str,
    conversations: usize,
    start: &std::sync::Barrier,
) -> (Vec<Duration>, Instant, Instant) {
    let program = booking_program();
    let mut runtime = runtime(&program, booking_answers());
    let store = open(location);
    let mut samples = Vec::with_capacity(conversations * BOOKING_TURNS.len());
    // Compiling and connecting are not a turn's cost: every writer starts
    // its turns at the same moment.
    start.wait();
    let began = Instant::now();
    for conversation in 0..conversations {
        let mut session: Session = runtime.new_session(format!("{name}-{conversation}"));
        for message in BOOKING_TURNS {
            let started = Instant::now();
            let before = session.clone();
            if let Err(error) = runtime.run_turn(&mut session, message) {
                eprintln!("a booking turn failed: {error}");
                std::process::exit(1);
            }
            if let Err(error) = commit_turn(store.as_ref(), &program, &before, &mut session) {
                eprintln!("a commit failed: {error}");
                std::process::exit(1);
            }
            samples.push(started.elapsed());
        }
        black_box(&session);
    }
    (samples, began, Instant::now())
}

fn turns(location: &StoreLocation, label: &str, writers: usize, conversations: usize) {
    let prefix = format!("bench{}", std::process::id());
    let barrier = Arc::new(std::sync::Barrier::new(writers));
    let handles: Vec<_> = (0..writers)
        .map(|index| {
            let location = location.clone();
            let name = format!("{prefix}-{writers}w{index}");
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || writer(&location, &name, conversations, &barrier))
        })
        .collect();
    let mut samples: Vec<Duration> = Vec::new();
    let mut first_start: Option<Instant> = None;
    let mut last_end: Option<Instant> = None;
    for handle in handles {
        match handle.join() {
            Ok((mut part, began, ended)) => {
                samples.append(&mut part);
                first_start = Some(first_start.map_or(began, |first| first.min(began)));
                last_end = Some(last_end.map_or(ended, |last| last.max(ended)));
            }
            Err(_) => std::process::exit(1),
        }
    }
    let elapsed = match (first_start, last_end) {
        (Some(first), Some(last)) => last.duration_since(first),
        _ => Duration::from_secs(1),
    };
    let per_second = samples.len() as f64 / elapsed.as_secs_f64();
    let p50 = percentile(&mut samples, 50.0);
    let p99 = percentile(&mut samples, 99.0);
    println!(
        "{label:<10} booking turn, {writers} writer{}: {:>7} turns  p50 {p50:>8.1} µs  p99 {p99:>8.1} µs  {per_second:>8.0} turns/s",
        if writers == 1 { " " } else { "s" },
        samples.len()
    );
}

/// One session for `turns` turns: the cost of a turn near the start and
/// near the end of a long conversation (it must not grow).
fn long_conversation(location: &StoreLocation, label: &str, turns: usize) {
    let program = booking_program();
    let mut runtime = runtime(&program, booking_answers());
    let store = open(location);
    let mut session: Session = runtime.new_session(format!("long{}", std::process::id()));
    let mut samples = Vec::with_capacity(turns);
    for index in 0..turns {
        let message = BOOKING_TURNS.get(index % BOOKING_TURNS.len()).copied().unwrap_or_default();
        let started = Instant::now();
        let before = session.clone();
        if runtime.run_turn(&mut session, message).is_err() {
            std::process::exit(1);
        }
        if commit_turn(store.as_ref(), &program, &before, &mut session).is_err() {
            std::process::exit(1);
        }
        samples.push(started.elapsed());
    }
    let window = (turns / 10).max(1);
    let mut first: Vec<Duration> = samples.iter().take(window).copied().collect();
    let mut last: Vec<Duration> = samples.iter().rev().take(window).copied().collect();
    println!(
        "{label:<10} one session, {turns} turns: p50 {:.1} µs over the first {window}, {:.1} µs over the last {window}",
        percentile(&mut first, 50.0),
        percentile(&mut last, 50.0)
    );
}

fn sqlite_bytes_per_session(path: &Path, sessions: usize) {
    let store = flowc::store::sqlite::SqliteStore::open(path);
    drop(store);
    // Fold the WAL into the file so its size is the data's.
    if let Ok(connection) = rusqlite::Connection::open(path) {
        let _ = connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        let _ = connection.execute_batch("VACUUM");
    }
    let bytes = std::fs::metadata(path).map_or(0, |metadata| metadata.len());
    println!(
        "sqlite     bytes per idle session (booking done, 5 turns, transcript included): {:.0} ({} sessions, {bytes} bytes)",
        bytes as f64 / sessions as f64,
        sessions
    );
}

fn postgres_bytes_per_session(url: &str) {
    // The store's own connect: the URL may ask for TLS (`sslmode`, `sslrootcert`).
    let Ok(mut client) = flowc::store::postgres_tls::connect(url) else {
        return;
    };
    let row = client.query_one(
        "SELECT pg_total_relation_size('sessions') + pg_total_relation_size('transcript'), count(*) FROM sessions",
        &[],
    );
    if let Ok(row) = row {
        let bytes: i64 = row.get(0);
        let sessions: i64 = row.get(1);
        println!(
            "postgres   bytes per idle session (tables and indexes): {:.0} ({sessions} sessions)",
            bytes as f64 / sessions.max(1) as f64
        );
    }
}

const PAUSING: &str = include_str!("../tests/fixtures/workflows/pausing.flow");

/// `count` runs of PAUSING waiting in `location`, due at once.
fn waiting_runs(location: &StoreLocation, program_file: &Path, count: usize, prefix: &str) {
    let program = compiled("pausing.flow", PAUSING);
    let clock = FixedClock::parse("2026-01-05T10:00:00Z").unwrap_or(FixedClock(chrono::DateTime::UNIX_EPOCH));
    let tool_env = ToolEnv {
        base_dir: program_file.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        clock: Arc::new(clock),
        ids: Arc::new(SeededIds::new(7)),
    };
    let Ok(mut run) = flowc::runtime::workflow::start(
        &program,
        &tool_env,
        flowc::ir::FlowId(0),
        &serde_json::Map::new(),
        Default::default(),
    ) else {
        std::process::exit(1);
    };
    let tools = ToolRegistry::default();
    let sleep = |_: Duration| {};
    let mut on_progress = |_: &flowc::runtime::workflow::StepProgress| {};
    let mut checkpoint = |_: &flowc::runtime::workflow::WorkflowRun| Ok(());
    let mut runner = WorkflowRunner {
        program: &program,
        tools: &tools,
        tool_env: &tool_env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
        model: None,
    };
    if runner.run(&mut run).is_err() {
        std::process::exit(1);
    }
    let store = open(location);
    let template = StoredRun {
        run,
        program: program_file.to_string_lossy().into_owned(),
        program_hash: flowc::runtime::session::program_hash(&program),
        version: 1,
        due_at: Some(0),
    };
    for index in 0..count {
        let mut stored = template.clone();
        stored.run.run = format!("{prefix}-{index:06}");
        if let Err(error) = store.save_run(&stored, 0, None) {
            eprintln!("cannot store a run: {error}");
            std::process::exit(1);
        }
    }
}

/// The program of a stored run, read and compiled again as a worker does
/// before resuming it, and refused if it changed.
fn checked(stored: &StoredRun) -> flowc::stored_run::Checked {
    let path = PathBuf::from(&stored.program);
    let text = std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let compilation = flowc::pipeline::compile(&flowc::source::SourceFile::new(stored.program.clone(), text));
    if compilation.has_errors() || flowc::runtime::session::program_hash(&compilation.ir) != stored.program_hash {
        return Err(format!("{} changed", stored.program));
    }
    let dir = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok((compilation.ir, dir))
}

fn resumes(location: &StoreLocation, label: &str, workers: usize, count: usize, dir: &Path) {
    let program_file = dir.join("pausing.flow");
    if std::fs::write(&program_file, PAUSING).is_err() {
        std::process::exit(2);
    }
    let prefix = format!("r{}w{workers}", std::process::id());
    waiting_runs(location, &program_file, count, &prefix);
    let started = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|worker| {
            let location = location.clone();
            std::thread::spawn(move || {
                let store = open(&location);
                let clock: Arc<dyn flowc::runtime::clock::Clock> = Arc::new(
                    FixedClock::parse("2026-01-05T12:00:00Z").unwrap_or(FixedClock(chrono::DateTime::UNIX_EPOCH)),
                );
                let ids: Arc<dyn flowc::runtime::clock::IdSource> = Arc::new(SeededIds::new(7));
                let holder = format!("bench-worker-{worker}");
                let tools = ToolRegistry::default();
                let mut resumed = 0usize;
                loop {
                    let claim = flowc::stored_run::claim_at(&holder, clock.as_ref());
                    let batch = store.claim_due(&claim, 8).unwrap_or_default();
                    if batch.is_empty() {
                        return resumed;
                    }
                    for mut stored in batch {
                        let resume = flowc::stored_run::Resume {
                            store: store.as_ref(),
                            tools: &tools,
                            clock: Arc::clone(&clock),
                            ids: Arc::clone(&ids),
                            limits: flowc::runtime::workflow::RunLimits::default(),
                            model: None,
                        };
                        let hooks = flowc::stored_run::Hooks { on_progress: &mut |_| {}, on_saved: &mut |_| {} };
                        let program = checked(&stored);
                        let done = resume.resume(&mut stored, &claim, program, hooks);
                        if done.is_ok() {
                            resumed += 1;
                        }
                    }
                }
            })
        })
        .collect();
    let resumed: usize = handles.into_iter().map(|handle| handle.join().unwrap_or(0)).sum();
    let elapsed = started.elapsed();
    println!(
        "{label:<10} resumes of {count} due runs, {workers} worker{}: {:>8.0} runs/s ({resumed} resumed in {:.2} s)",
        if workers == 1 { " " } else { "s" },
        resumed as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
}

/// One run of a workflow of `steps` steps, each step saved as `flowc
/// worker` saves it (a checkpoint when it starts and one when it ends):
/// the median time per step over the 100 around step 100 and over the
/// last 100. A save that rewrote the whole run would make the second grow
/// with the run's length.
fn long_run(location: &StoreLocation, label: &str, steps: usize, dir: &Path) {
    let mut text = String::from("schema { x: int \"x\" }\nflow long \"Long\" {\n");
    for index in 0..steps {
        text.push_str(&format!("  auto step s{index} {{ set x = {index} }}\n"));
    }
    text.push_str("}\n");
    let program = compiled("long.flow", &text);
    let clock = FixedClock::parse("2026-01-05T10:00:00Z").unwrap_or(FixedClock(chrono::DateTime::UNIX_EPOCH));
    let tool_env = ToolEnv { base_dir: dir.to_path_buf(), clock: Arc::new(clock), ids: Arc::new(SeededIds::new(7)) };
    let Ok(mut run) = flowc::runtime::workflow::start(
        &program,
        &tool_env,
        flowc::ir::FlowId(0),
        &serde_json::Map::new(),
        Default::default(),
    ) else {
        std::process::exit(1);
    };
    run.run = format!("long-{}-{label}", std::process::id());
    let store = open(location);
    let claim = flowc::stored_run::claim_at("bench-long", tool_env.clock.as_ref());
    let mut stored = StoredRun {
        run,
        program: dir.join("long.flow").to_string_lossy().into_owned(),
        program_hash: flowc::runtime::session::program_hash(&program),
        version: 1,
        due_at: None,
    };
    if let Err(error) = store.save_run(&stored, 0, Some(&claim)) {
        eprintln!("cannot store the run: {error}");
        std::process::exit(1);
    }
    stored.run.touched.clear();
    let mut run = stored.run.clone();
    let mut ended: Vec<Instant> = Vec::with_capacity(steps);
    let mut on_progress = |_: &flowc::runtime::workflow::StepProgress| ended.push(Instant::now());
    let mut checkpoint = |run: &flowc::runtime::workflow::WorkflowRun| {
        flowc::store::checkpoint_run(store.as_ref(), &mut stored, run, &claim).map_err(|error| error.to_string())
    };
    let tools = ToolRegistry::default();
    let sleep = |_: Duration| {};
    let mut runner = WorkflowRunner {
        program: &program,
        tools: &tools,
        tool_env: &tool_env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
        model: None,
    };
    let started = Instant::now();
    if let Err(error) = runner.run(&mut run) {
        eprintln!("the long run stopped: {error}");
        std::process::exit(1);
    }
    let total = started.elapsed();
    let mut per_step: Vec<Duration> = ended.windows(2).map(|pair| pair[1] - pair[0]).collect();
    let last = per_step.len();
    let mut early = per_step.get(50..150).unwrap_or_default().to_vec();
    let late = per_step.get_mut(last.saturating_sub(100)..).unwrap_or_default();
    let early_us = percentile(&mut early, 50.0);
    let late_us = percentile(late, 50.0);
    println!(
        "{label:<10} one run of {steps} steps: {early_us:>6.0} µs/step at step 100, {late_us:>6.0} µs/step at step {} \
         (ratio {:.2}; {:.1} s in all)",
        steps - 100,
        late_us / early_us.max(1.0),
        total.as_secs_f64()
    );
}

/// Kills a `flowc run --session` mid-conversation, then times opening the
/// store and loading the session (SQLite replays its WAL on open).
fn recovery(dir: &Path) {
    use std::io::Write;
    let path = dir.join("kill.db");
    let store = format!("sqlite:{}", path.display());
    let script: String =
        (0..2000).map(|index| if index % 5 == 0 { "Hi, I'd like to book a hotel room\n" } else { "2\n" }).collect();
    let mut times = Vec::new();
    for _ in 0..20 {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_flowc"))
            .args(["run", "flows/booking.flow", "--session", "k", "--store", &store, "--json"])
            .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("cannot start flowc");
            return;
        };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(script.as_bytes());
        }
        std::thread::sleep(Duration::from_millis(150));
        let _ = child.kill();
        let _ = child.wait();
        let started = Instant::now();
        let store = open(&StoreLocation::Sqlite(path.clone()));
        let loaded = flowc::store::SessionStore::load(store.as_ref(), "k");
        times.push(started.elapsed());
        if !matches!(loaded, Ok(Some(_))) {
            eprintln!("the session did not load after kill -9: {loaded:?}");
            std::process::exit(1);
        }
    }
    println!(
        "sqlite     recovery after kill -9 mid-turn (open + load, 20 kills): p50 {:.0} µs, max {:.0} µs",
        percentile(&mut times, 50.0),
        percentile(&mut times, 100.0)
    );
}

fn main() {
    let quick = std::env::args().any(|argument| argument == "--quick");
    let (conversations, runs) = if quick { (200, 1000) } else { (2000, 10_000) };
    let long_steps = if quick { 2_100 } else { 10_100 };
    // `cargo bench --bench store -- long`: the long run alone.
    if std::env::args().any(|argument| argument == "long") {
        let dir = std::env::temp_dir().join(format!("flowc-bench-long-{}", std::process::id()));
        if std::fs::create_dir_all(&dir).is_err() {
            std::process::exit(2);
        }
        long_run(&StoreLocation::Sqlite(dir.join("flowc.db")), "sqlite", long_steps, &dir);
        if let Ok(url) = std::env::var("FLOWC_BENCH_POSTGRES").or_else(|_| std::env::var("FLOWC_TEST_POSTGRES")) {
            long_run(&StoreLocation::Postgres(url), "postgres", long_steps, &dir);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    println!("flowc store costs, {}", machine());
    let dir = std::env::temp_dir().join(format!("flowc-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        std::process::exit(2);
    }
    let sqlite_path = dir.join("flowc.db");
    let sqlite = StoreLocation::Sqlite(sqlite_path.clone());
    turns(&sqlite, "sqlite", 1, conversations);
    turns(&sqlite, "sqlite", 8, conversations / 8);
    sqlite_bytes_per_session(&sqlite_path, conversations + conversations / 8 * 8);
    long_conversation(&sqlite, "sqlite", if quick { 2000 } else { 10_000 });
    resumes(&sqlite, "sqlite", 1, runs, &dir);
    resumes(&sqlite, "sqlite", 2, runs, &dir);
    long_run(&sqlite, "sqlite", long_steps, &dir);
    recovery(&dir);

    let postgres = std::env::var("FLOWC_BENCH_POSTGRES").or_else(|_| std::env::var("FLOWC_TEST_POSTGRES")).ok();
    match postgres {
        Some(url) => {
            let location = StoreLocation::Postgres(url.clone());
            turns(&location, "postgres", 1, conversations / 2);
            turns(&location, "postgres", 8, conversations / 8);
            postgres_bytes_per_session(&url);
            resumes(&location, "postgres", 1, runs, &dir);
            resumes(&location, "postgres", 2, runs, &dir);
            long_run(&location, "postgres", long_steps, &dir);
        }
        None => println!("postgres   skipped: set FLOWC_BENCH_POSTGRES to a server URL"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
