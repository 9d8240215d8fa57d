//! What `flowc worker` does with schedules: registers those of the
//! programs it is given (`flowc worker flows/`), and starts the run of each
//! due tick exactly once, whatever the number of workers: the run is
//! stored in the transaction that moves the tick on, a compare-and-swap
//! on the tick ([`crate::store::schedules`]).
//!
//! A tick missed while no worker ran starts one run, not a backlog: the
//! next tick is the first after now. A tick is read against the program
//! as it is then: one that no longer compiles skips the tick (said on
//! stderr), one whose schedules changed has them registered again, and
//! one whose file is gone has them dropped.

use super::load::{display_path, expand_paths, load_file};
use crate::ir::{FlowId, Program};
use crate::runtime::clock::{Clock, ClockAndIds};
use crate::runtime::session::program_hash;
use crate::runtime::tools::ToolEnv;
use crate::runtime::workflow::RunEvent;
use crate::schedule::Schedule;
use crate::store::schedules::{Advance, ScheduleRow};
use crate::store::{Claim, Store, StoreError, StoredRun};
use crate::stored_run::claim_at;
use std::path::{Path, PathBuf};

/// How many times a tick's run takes a new id when a seeded id
/// (`FLOWC_SEED`) repeats one the store has.
const ID_ATTEMPTS: usize = 100;

/// A time as `runs list` and the worker print it.
pub fn shown_time(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map_or_else(|| at.to_string(), |time| time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// Registers the schedules of the programs below `paths` (each program's
/// replace those it declared before), saying each on stderr. `Err` says
/// which program could not be read or compiled.
pub fn register(store: &dyn Store, paths: &[PathBuf], now: i64) -> Result<usize, String> {
    let files = expand_paths(paths).map_err(|error| error.to_string())?;
    let mut count = 0;
    for file in files {
        let program = compiled(&file).map_err(|failure| failure.message())?;
        let key = key(&file);
        let stored = store.sync_schedules(&key, &rows(&program, &key, now)).map_err(|error| error.to_string())?;
        for row in &stored {
            eprintln!(
                "schedule {} of {}: `{}` in {}, next start {}",
                row.flow,
                display_path(&file),
                row.cron,
                row.timezone,
                shown_time(row.next_at)
            );
        }
        count += stored.len();
    }
    Ok(count)
}

/// The program's file as runs and schedules name it: absolute.
fn key(file: &Path) -> String {
    std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf()).to_string_lossy().into_owned()
}

/// Why a program cannot be read for its schedules.
enum Failure {
    /// Its file is gone or unreadable.
    Gone(String),
    /// It reads but has errors.
    Broken(String),
}

impl Failure {
    fn message(self) -> String {
        match self {
            Failure::Gone(message) | Failure::Broken(message) => message,
        }
    }
}

fn compiled(file: &Path) -> Result<Program, Failure> {
    let shown = display_path(file);
    let loaded = load_file(file).map_err(|error| Failure::Gone(error.to_string()))?;
    let compilation = crate::pipeline::compile(&loaded.file);
    if loaded.encoding_error.is_some() || compilation.has_errors() {
        return Err(Failure::Broken(format!("{shown} has errors (`flowc check {shown}` shows them)")));
    }
    Ok(compilation.ir)
}

/// The schedules `program` declares, each with its first tick after `now`.
fn rows(program: &Program, key: &str, now: i64) -> Vec<ScheduleRow> {
    program
        .flows
        .iter()
        .filter(|flow| flow.workflow)
        .filter_map(|flow| {
            let declared = flow.schedule.as_ref()?;
            let schedule = Schedule::parse(&declared.cron, Some(&declared.timezone)).ok()?;
            Some(ScheduleRow {
                program: key.to_string(),
                flow: flow.name.clone(),
                cron: declared.cron.clone(),
                timezone: declared.timezone.clone(),
                next_at: schedule.next_after(now).unwrap_or(i64::MAX),
                last_run: None,
            })
        })
        .collect()
}

/// Starts the run of the first due tick this worker wins, stored and
/// claimed for `holder`; `None` when no tick is due (or every due one went
/// to another worker or was skipped).
pub fn start_due(
    store: &dyn Store,
    (clock, ids): &ClockAndIds,
    holder: &str,
) -> Result<Option<(StoredRun, Claim)>, StoreError> {
    let now = clock.now().timestamp();
    for due in store.due_schedules(now, 16)? {
        if let Some(started) = start_tick(store, &due, (clock, ids), holder)? {
            return Ok(Some(started));
        }
    }
    Ok(None)
}

/// The tick of `due`, read against its program as it is now.
fn start_tick(
    store: &dyn Store,
    due: &ScheduleRow,
    (clock, ids): (&std::sync::Arc<dyn Clock>, &std::sync::Arc<dyn crate::runtime::clock::IdSource>),
    holder: &str,
) -> Result<Option<(StoredRun, Claim)>, StoreError> {
    let now = clock.now().timestamp();
    let file = PathBuf::from(&due.program);
    let program = match compiled(&file) {
        Ok(program) => program,
        Err(Failure::Gone(reason)) => {
            eprintln!("warning: the schedules of {} are dropped: {reason}", due.program);
            store.sync_schedules(&due.program, &[])?;
            return Ok(None);
        }
        Err(Failure::Broken(reason)) => {
            let next = Schedule::parse(&due.cron, Some(&due.timezone)).ok().and_then(|s| s.next_after(now));
            let next = next.unwrap_or(i64::MAX);
            if store.advance_schedule(due, next, None)? == Advance::Done {
                eprintln!(
                    "error: the {} tick of {} was skipped: {reason}; the next is at {}",
                    shown_time(due.next_at),
                    due.flow,
                    shown_time(next)
                );
            }
            return Ok(None);
        }
    };
    let declared = rows(&program, &due.program, now);
    let Some(current) = declared.iter().find(|row| row.flow == due.flow && row.cron == due.cron) else {
        return resync(store, due, &declared);
    };
    if current.timezone != due.timezone {
        return resync(store, due, &declared);
    }
    let Some(flow) = program.flows.iter().position(|flow| flow.name == due.flow).map(FlowId::from_index) else {
        return resync(store, due, &declared);
    };
    let base_dir = file.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let tool_env = ToolEnv { base_dir, clock: clock.clone(), ids: ids.clone() };
    let mut run =
        match crate::runtime::workflow::start(&program, &tool_env, flow, &serde_json::Map::new(), Default::default()) {
            Ok(run) => run,
            Err(error) => {
                if store.advance_schedule(due, current.next_at, None)? == Advance::Done {
                    eprintln!("error: the {} tick of {} was skipped: {error}", shown_time(due.next_at), due.flow);
                }
                return Ok(None);
            }
        };
    run.events.push(RunEvent { event: "run_scheduled".to_string(), step: None, at: shown_time(due.next_at) });
    let stored =
        StoredRun { run, program: due.program.clone(), program_hash: program_hash(&program), version: 1, due_at: None };
    // A worker resumes the run with this version after an edit of the file.
    super::stored_run::record_program(store, &file, &program);
    // The next tick is the first after now: ticks missed while no worker
    // ran start this one run, not one each.
    let next = Schedule::parse(&due.cron, Some(&due.timezone))
        .ok()
        .and_then(|schedule| schedule.next_after(now.max(due.next_at)))
        .unwrap_or(i64::MAX);
    let claim = claim_at(holder, clock.as_ref());
    let mut stored = stored;
    for _ in 0..ID_ATTEMPTS {
        match store.advance_schedule(due, next, Some((&stored, &claim)))? {
            Advance::Done => {
                stored.run.touched.clear();
                return Ok(Some((stored, claim)));
            }
            Advance::Taken => return Ok(None),
            Advance::IdTaken => stored.run.run = ids.next_id(),
        }
    }
    Err(StoreError::Io { id: stored.run.run, message: "no free run id for the scheduled run".to_string() })
}

/// The program's schedules changed since they were registered: they are
/// registered again, and the stale tick starts nothing.
fn resync(
    store: &dyn Store,
    due: &ScheduleRow,
    declared: &[ScheduleRow],
) -> Result<Option<(StoredRun, Claim)>, StoreError> {
    eprintln!("note: the schedules of {} changed since they were registered: registered again", due.program);
    store.sync_schedules(&due.program, declared)?;
    Ok(None)
}
