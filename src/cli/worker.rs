//! `flowc worker`: resumes every due workflow run, for as long as it runs
//! (`--once`: what is due now, then exit, saying how many it resumed and
//! when the next is due). Any number of workers may share one store: a run
//! is claimed before it is resumed, one at a time, so a worker holds only
//! the run it is executing and one that dies strands nothing else; its run
//! goes to the others once its lease is over. Between runs a worker sleeps
//! until the next run is due; on PostgreSQL it is woken at once by
//! `LISTEN/NOTIFY` when a run is released or cancelled, and `--interval`
//! is only the fallback poll. The limits of `[limits.run]` and the flags
//! bound each resume.
//!
//! Given programs (`flowc worker flows/`), it registers the schedules
//! their workflows declare, and starts each due tick's run exactly once
//! across every worker sharing the store ([`super::scheduled`]); a
//! started run is executed as a resumed one is.
//!
//! SIGTERM or SIGINT stops it gracefully: no new claim, the step in flight
//! finishes within `--grace` (else its tool is killed and the step recorded
//! as interrupted), the run is saved and released, and it exits 0. A
//! second signal stops at once.

use super::Outcome;
use super::limits::RunLimitFlags;
use super::open_with_clock;
use super::stored_run::{holder_name, resume_claimed};
use crate::runtime::clock::Clock;
use crate::runtime::shutdown;
use crate::runtime::workflow::RunStatus;
use crate::store::Store;
use crate::stored_run::claim_at;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Programs (files or folders) whose workflow schedules to register; the schedules registered before stay
    pub programs: Vec<std::path::PathBuf>,
    /// Resume what is due now, then exit
    #[arg(long)]
    pub once: bool,
    /// Seconds between polls of the store when nothing is due (on PostgreSQL a fallback: workers are notified)
    #[arg(long, default_value_t = 5)]
    pub interval: u64,
    /// Seconds the step in flight may take to finish after SIGTERM or SIGINT before its tool is killed (default 30, or [worker] grace in flowc.toml)
    #[arg(long, value_name = "SECONDS")]
    pub grace: Option<u64>,
    /// The store: sqlite:PATH or postgres://… (default: FLOWC_STORE, else the project's: the nearest flowc.toml or .flowc/ upwards)
    #[arg(long)]
    pub store: Option<String>,
    #[command(flatten)]
    pub limits: RunLimitFlags,
}

/// The longest a worker waits without looking at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

pub fn run(args: &WorkerArgs) -> Outcome {
    // A worker names no program: its flowc.toml is the working folder's.
    let config = match crate::config::Config::load(None) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    match super::shutdown::grace(args.grace, "worker", &config) {
        Ok(grace) => super::shutdown::install(grace),
        Err(message) => {
            eprintln!("error: {message}");
            return Outcome::Error;
        }
    }
    let (store, _, (clock, ids)) = match open_with_clock(args.store.as_deref()) {
        Ok(opened) => opened,
        Err(outcome) => return outcome,
    };
    let model = super::stored_run::configured_model(&config);
    if !args.programs.is_empty()
        && let Err(message) = super::scheduled::register(store.as_ref(), &args.programs, clock.now().timestamp())
    {
        eprintln!("error: {message}");
        return Outcome::Error;
    }
    let limits = match args.limits.resolve(&config) {
        Ok(limits) => limits,
        Err(message) => {
            eprintln!("error: {message}");
            return Outcome::Error;
        }
    };
    if !args.once {
        // Listening before the first claim: news between that claim and
        // the first wait is not lost.
        if let Err(error) = store.wait_for_news(Duration::ZERO) {
            eprintln!("warning: {error}; polling every {} s instead", args.interval);
        }
    }
    let holder = holder_name();
    let mut outcome = Outcome::Success;
    let mut resumed = 0usize;
    let mut started_runs = 0usize;
    while !shutdown::requested() {
        // A due tick first: its run is stored claimed by this worker.
        let started = match super::scheduled::start_due(store.as_ref(), &(clock.clone(), ids.clone()), &holder) {
            Ok(started) => started,
            Err(error) => {
                eprintln!("error: {error}");
                return Outcome::Error;
            }
        };
        let is_start = started.is_some();
        let (taken, claim) = match started {
            Some((stored, claim)) => (vec![stored], claim),
            None => {
                let claim = claim_at(&holder, clock.as_ref());
                // One run at a time: a claim is the work this worker starts now.
                match store.claim_due(&claim, 1) {
                    Ok(taken) => (taken, claim),
                    Err(error) => {
                        eprintln!("error: {error}");
                        return Outcome::Error;
                    }
                }
            }
        };
        let Some(mut stored) = taken.into_iter().next() else {
            if args.once {
                return summary(store.as_ref(), clock.as_ref(), (resumed, started_runs)).worst(outcome);
            }
            wait(store.as_ref(), clock.as_ref(), args.interval);
            continue;
        };
        let id = stored.run.run.clone();
        if is_start {
            started_runs += 1;
        } else {
            resumed += 1;
        }
        match resume_claimed(
            store.as_ref(),
            &mut stored,
            &claim,
            clock.clone(),
            ids.clone(),
            (limits, model.as_ref()),
            false,
        ) {
            Ok(_) => {
                let detail = match stored.run.status {
                    RunStatus::Failed => stored.run.failure_summary().map(|summary| format!(": {summary}")),
                    RunStatus::Waiting => stored.run.resume_at.as_ref().map(|at| format!(" until {at}")),
                    RunStatus::Paused => stored.run.limit_summary().map(|summary| format!(": {summary}")),
                    RunStatus::Running => Some(" (stopped by a signal; the next worker goes on)".to_string()),
                    _ => None,
                };
                let verb = if is_start { "started" } else { "resumed" };
                let what = if is_start { format!(" ({} on schedule)", stored.run.flow_name) } else { String::new() };
                let line = format!("{verb} {id}{what}: {}{}\n", stored.run.status.as_str(), detail.unwrap_or_default());
                if super::print_stdout(&line) != Outcome::Success {
                    return Outcome::Error;
                }
            }
            Err(error) => {
                eprintln!("error: run {id}: {error}");
                outcome = Outcome::Failure;
            }
        }
    }
    eprintln!("flowc: worker stopped after resuming {resumed} run(s); its claims are released");
    outcome
}

/// Sleeps until the next run is due, news arrives, `interval` passes or a
/// stop is asked for, whichever is first.
fn wait(store: &dyn Store, clock: &dyn Clock, interval: u64) {
    let mut remaining = Duration::from_secs(interval.max(1));
    let next_tick = store.next_tick().ok().flatten();
    let next_due = store.next_due().ok().flatten();
    if let Some(due) = next_due.into_iter().chain(next_tick).min() {
        let until_due = u64::try_from(due.saturating_sub(clock.now().timestamp())).unwrap_or(0);
        // At least a second: a due run another worker holds must not make
        // this one spin.
        remaining = remaining.min(Duration::from_secs(until_due.max(1)));
    }
    while !remaining.is_zero() && !shutdown::requested() {
        let slice = remaining.min(STOP_CHECK);
        match store.wait_for_news(slice) {
            Ok(true) => return,
            Ok(false) => {}
            Err(error) => {
                eprintln!("warning: {error}");
                std::thread::sleep(slice);
            }
        }
        remaining = remaining.saturating_sub(slice);
    }
}

/// What `--once` says on stderr when nothing more is due.
fn summary(store: &dyn Store, clock: &dyn Clock, (resumed, started): (usize, usize)) -> Outcome {
    let next = match store.next_due() {
        Ok(next) => next,
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    let next = match next.and_then(|due| chrono::DateTime::from_timestamp(due, 0)) {
        Some(due) if due.timestamp() <= clock.now().timestamp() => {
            format!("; the next run was due at {} but is held by another worker", due.to_rfc3339())
        }
        Some(due) => format!("; the next run is due at {}", due.to_rfc3339()),
        None => "; no run is waiting".to_string(),
    };
    let tick = match store.next_tick() {
        Ok(Some(tick)) => format!("; the next scheduled start is at {}", super::scheduled::shown_time(tick)),
        Ok(None) => String::new(),
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    let plural = if resumed == 1 { "" } else { "s" };
    let started = match started {
        0 => String::new(),
        1 => " and started 1 on schedule".to_string(),
        many => format!(" and started {many} on schedule"),
    };
    eprintln!("resumed {resumed} run{plural}{started}{next}{tick}");
    Outcome::Success
}
