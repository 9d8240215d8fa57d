//! `flowc runs list|show ID|cancel ID`: the workflow runs in the store.

use super::Outcome;
use super::open_existing_store;
use crate::store::Cancel;

#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub command: RunsCommand,
    /// The store: sqlite:PATH or postgres://… (default: FLOWC_STORE, else the project's: the nearest flowc.toml or .flowc/ upwards)
    #[arg(long, global = true)]
    pub store: Option<String>,
    /// Print JSON (`show`: the run object `flowc run --json` prints)
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum RunsCommand {
    /// One line per stored run, then one per schedule with its next start
    List,
    /// A run with its step records (`--json`: the run object `flowc run --json` prints)
    Show { id: String },
    /// Cancel a waiting, paused or running run: it is recorded as
    /// `cancelled`, and no worker or resume takes it again
    Cancel { id: String },
}

pub fn run(args: &RunsArgs) -> Outcome {
    let (store, location) = match open_existing_store(args.store.as_deref()) {
        Ok(opened) => opened,
        Err(outcome) => return outcome,
    };
    match &args.command {
        RunsCommand::List => list(store.as_ref(), args.json),
        RunsCommand::Show { id } => match store.load_run(id) {
            Ok(Some(stored)) => {
                // The run object names flows and steps: read them from its
                // program when it still compiles, else from the records.
                let program = crate::cli::load::load_file(std::path::Path::new(&stored.program))
                    .ok()
                    .map(|loaded| crate::pipeline::compile(&loaded.file))
                    .filter(|compilation| !compilation.has_errors())
                    .map(|compilation| compilation.ir)
                    .filter(|program| crate::runtime::session::program_hash(program) == stored.program_hash);
                let value = match &program {
                    Some(program) => stored.run.to_json(program),
                    None => stored.run.to_json_without_program(),
                };
                let text = if args.json { format!("{value}\n") } else { human(&stored, &value) };
                super::print_stdout(&text)
            }
            Ok(None) => {
                eprintln!("error: there is no run `{id}` in {location}");
                Outcome::Error
            }
            Err(error) => {
                eprintln!("error: {error}");
                Outcome::Error
            }
        },
        RunsCommand::Cancel { id } => cancel(store.as_ref(), id, &location, args.json),
    }
}

/// `runs list`: one line (or JSON object) per run, then one per schedule
/// with its next start.
fn list(store: &dyn crate::store::Store, json: bool) -> Outcome {
    let listed = store.list_runs_readable().and_then(|(runs, unreadable)| {
        for error in &unreadable {
            eprintln!("warning: left out of the list: {error}");
        }
        Ok((runs, store.list_schedules()?))
    });
    let (runs, schedules) = match listed {
        Ok(listed) => listed,
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    let next_start = |at: i64| (at != i64::MAX).then(|| super::scheduled::shown_time(at));
    if json {
        // Schedules follow the runs in the one array, told apart by their
        // `schedule` key (a run has `run`).
        let mut entries: Vec<serde_json::Value> = runs.iter().map(|run| serde_json::json!(run)).collect();
        entries.extend(schedules.iter().map(|row| {
            serde_json::json!({
                "schedule": { "cron": row.cron, "timezone": row.timezone },
                "flow": row.flow,
                "next_start": next_start(row.next_at),
                "last_run": row.last_run,
                "program": row.program,
            })
        }));
        return super::print_stdout(&format!("{}\n", serde_json::Value::Array(entries)));
    }
    let mut text = String::new();
    for run in runs {
        let resume = run.resume_at.map(|at| format!(" until {at}")).unwrap_or_default();
        text.push_str(&format!("{}\t{}\t{}{resume}\t{}\n", run.run, run.flow, run.status, run.program));
    }
    for row in schedules {
        let next = next_start(row.next_at).map_or_else(|| "never again".to_string(), |at| format!("next start {at}"));
        text.push_str(&format!(
            "schedule\t{}\t{next} (`{}` in {})\t{}\n",
            row.flow, row.cron, row.timezone, row.program
        ));
    }
    super::print_stdout(&text)
}

/// `runs show` for a person: the run's state, then one line per step.
fn human(stored: &crate::store::StoredRun, value: &serde_json::Value) -> String {
    let run = &stored.run;
    let mut text = format!("run {}: {}", run.run, run.status.as_str());
    if let Some(at) = &run.resume_at {
        text.push_str(&format!(" until {at}"));
    }
    if let Some(summary) = run.failure_summary().or_else(|| run.limit_summary()) {
        text.push_str(&format!(" ({summary})"));
    }
    text.push_str(&format!("\nflow: {}\nprogram: {}\n", run.flow_name, stored.program));
    if let Some(duration) = run.duration_ms {
        text.push_str(&format!("duration: {duration} ms\n"));
    }
    text.push_str("steps:\n");
    for (index, step) in run.steps.iter().enumerate() {
        let status = value["steps"][index]["status"].as_str().unwrap_or_default();
        let took = step.duration_ms.map(|ms| format!(" in {ms} ms")).unwrap_or_default();
        let error = step.error.as_ref().map(|error| format!(": {error}")).unwrap_or_default();
        text.push_str(&format!("  {:>3}. {} {status}{took}{error}\n", index + 1, step.id));
    }
    let data = serde_json::to_string(&value["data"]).unwrap_or_default();
    text.push_str(&format!(
        "data: {data}\nevents: {} (`flowc runs show {} --json` lists them)\n",
        run.events.len(),
        run.run
    ));
    text
}

fn cancel(store: &dyn crate::store::Store, id: &str, location: &crate::store::StoreLocation, json: bool) -> Outcome {
    let at = match crate::runtime::clock::from_env() {
        Ok((clock, _)) => clock.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        Err(error) => {
            eprintln!("error: {error}");
            return Outcome::Error;
        }
    };
    match store.cancel_run(id, &at) {
        Ok(Cancel::Cancelled(stored)) if json => {
            super::print_stdout(&format!("{}\n", stored.run.to_json_without_program()))
        }
        Ok(Cancel::Cancelled(_)) => super::print_stdout(&format!("run {id}: cancelled\n")),
        Ok(Cancel::Ended(status)) => {
            eprintln!("error: run `{id}` has already ended ({}): there is nothing to cancel", status.as_str());
            Outcome::Failure
        }
        Ok(Cancel::Missing) => {
            eprintln!("error: there is no run `{id}` in {location}");
            Outcome::Error
        }
        Err(error) => {
            eprintln!("error: {error}");
            Outcome::Error
        }
    }
}
