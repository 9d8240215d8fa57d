//! `flowc worker`: polls the store and resumes every due workflow run, for
//! as long as it runs (`--once`: what is due now, then exit). Any number of
//! workers may share one store: a run is claimed before it is resumed, and
//! a claim is never given twice; a worker that dies leaves its runs to the
//! others once its lease is over. The limits of `[limits.run]` and the flags
//! bound each resume: a run one stops is `running` and unclaimed, so the
//! next poll (of any worker) takes it again.

use super::Outcome;
use super::limits::RunLimitFlags;
use super::open_with_clock;
use super::stored_run::{claim_at, holder_name, resume_claimed};
use crate::runtime::workflow::RunStatus;

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Resume what is due now, then exit
    #[arg(long)]
    pub once: bool,
    /// Seconds between polls of the store when nothing is due
    #[arg(long, default_value_t = 5)]
    pub interval: u64,
    /// The store: sqlite:PATH or postgres://… (default: .flowc/flowc.db here, or FLOWC_STORE, or [store] in flowc.toml)
    #[arg(long)]
    pub store: Option<String>,
    #[command(flatten)]
    pub limits: RunLimitFlags,
}

/// How many runs one claim takes: small, so that several workers share the
/// due runs between them.
const BATCH: usize = 8;

pub fn run(args: &WorkerArgs) -> Outcome {
    let (store, _, (clock, ids)) = match open_with_clock(args.store.as_deref()) {
        Ok(opened) => opened,
        Err(outcome) => return outcome,
    };
    let limits = match args.limits.resolve() {
        Ok(limits) => limits,
        Err(message) => {
            eprintln!("error: {message}");
            return Outcome::Error;
        }
    };
    let holder = holder_name();
    let mut outcome = Outcome::Success;
    loop {
        let claim = claim_at(&holder, clock.as_ref());
        let batch = match store.claim_due(&claim, BATCH) {
            Ok(batch) => batch,
            Err(error) => {
                eprintln!("error: {error}");
                return Outcome::Error;
            }
        };
        let idle = batch.is_empty();
        for mut stored in batch {
            let id = stored.run.run.clone();
            match resume_claimed(store.as_ref(), &mut stored, &claim, clock.clone(), ids.clone(), limits, false) {
                Ok(_) => {
                    let status = serde_json::to_value(stored.run.status)
                        .ok()
                        .and_then(|status| status.as_str().map(str::to_string))
                        .unwrap_or_default();
                    let detail = match stored.run.status {
                        RunStatus::Failed => stored.run.failure_summary().map(|summary| format!(": {summary}")),
                        RunStatus::Waiting => stored.run.resume_at.as_ref().map(|at| format!(" until {at}")),
                        RunStatus::Paused => stored.run.limit_summary().map(|summary| format!(": {summary}")),
                        _ => None,
                    };
                    let line = format!("resumed {id}: {status}{}\n", detail.unwrap_or_default());
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
        if idle {
            if args.once {
                return outcome;
            }
            std::thread::sleep(std::time::Duration::from_secs(args.interval.max(1)));
        }
    }
}
