//! `flowc resume ID`: continues a waiting workflow run (or one a limit
//! stopped) from the store, claimed first so that no other process runs it
//! at the same time, under the limits of `[limits.run]` and the flags.

use super::Outcome;
use super::limits::RunLimitFlags;
use super::stored_run::{holder_name, report, resume_claimed};
use crate::runtime::workflow::RunStatus;
use crate::stored_run::claim_at;

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run id `flowc run` printed
    pub id: String,
    /// Resume now even if the wait is not over
    #[arg(long)]
    pub now: bool,
    /// Print the run as one JSON object
    #[arg(long)]
    pub json: bool,
    /// The store: sqlite:PATH or postgres://… (default: FLOWC_STORE, else the project's: the nearest flowc.toml or .flowc/ upwards)
    #[arg(long)]
    pub store: Option<String>,
    #[command(flatten)]
    pub limits: RunLimitFlags,
}

pub fn run(args: &ResumeArgs) -> Outcome {
    let resolved = crate::config::Config::load(None).map_err(|error| error.to_string()).and_then(|config| {
        let limits = args.limits.resolve(&config)?;
        Ok((limits, super::stored_run::configured_model(&config)))
    });
    let (limits, model) = match resolved {
        Ok(resolved) => resolved,
        Err(message) => {
            eprintln!("error: {message}");
            return Outcome::Error;
        }
    };
    let (store, location) = match super::open_existing_store(args.store.as_deref()) {
        Ok(opened) => opened,
        Err(outcome) => return outcome,
    };
    let (clock, ids) = match crate::runtime::clock::from_env() {
        Ok(clock) => clock,
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    let stored = match store.load_run(&args.id) {
        Ok(Some(stored)) => stored,
        Ok(None) => {
            eprintln!("error: there is no run `{}` in {location}", args.id);
            return Outcome::Error;
        }
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    let status = stored.run.status;
    if status.has_ended() {
        eprintln!("error: run `{}` has ended ({}): there is nothing to resume", args.id, status.as_str());
        return Outcome::Error;
    }
    let claim = claim_at(&holder_name(), clock.as_ref());
    let not_due = stored.due_at.is_some_and(|due| due > claim.now);
    if status == RunStatus::Waiting && !args.now && not_due {
        eprintln!(
            "error: run `{}` waits until {}; `flowc resume {} --now` resumes it early",
            args.id,
            stored.run.resume_at.clone().unwrap_or_default(),
            args.id
        );
        return Outcome::Error;
    }
    let mut stored = match store.claim_run(&args.id, &claim, args.now) {
        Ok(Some(stored)) => stored,
        Ok(None) => {
            eprintln!("error: run `{}` is being run by another process; try again later", args.id);
            return Outcome::Failure;
        }
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr()) && !args.json;
    match resume_claimed(store.as_ref(), &mut stored, &claim, clock, ids, (limits, model.as_ref()), show_progress) {
        Ok(program) => report(&stored.run, program.as_ref(), args.json, &location),
        Err(error) => {
            eprintln!("error: {error}");
            Outcome::Failure
        }
    }
}
