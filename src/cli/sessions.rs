//! `flowc sessions list|show ID|delete ID`: the conversations in the store.

use super::Outcome;
use super::open_existing_store;

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: SessionsCommand,
    /// The store: sqlite:PATH or postgres://… (default: FLOWC_STORE, else the project's: the nearest flowc.toml or .flowc/ upwards)
    #[arg(long, global = true)]
    pub store: Option<String>,
    /// Print JSON instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// One line per stored session
    List,
    /// A session's position, data and whole transcript
    Show { id: String },
    /// Forget a session and its transcript
    Delete { id: String },
}

pub fn run(args: &SessionsArgs) -> Outcome {
    let (store, location) = match open_existing_store(args.store.as_deref()) {
        Ok(opened) => opened,
        Err(outcome) => return outcome,
    };
    let result = match &args.command {
        SessionsCommand::List => list(store.as_ref(), args.json),
        SessionsCommand::Show { id } => match store.load(id) {
            Ok(Some(session)) => store.transcript(id).map(|transcript| {
                let value = serde_json::json!({
                    "id": session.id,
                    "flow": session.flow_name,
                    "step": session.step_name,
                    "turns": session.turns,
                    "version": session.version,
                    "data": session.data,
                    "context": session.context,
                    "transcript": transcript,
                });
                if args.json {
                    format!("{value}\n")
                } else {
                    serde_json::to_string_pretty(&value).map(|text| text + "\n").unwrap_or_default()
                }
            }),
            Ok(None) => {
                eprintln!("error: there is no session `{id}` in {location}");
                return Outcome::Error;
            }
            Err(error) => Err(error),
        },
        SessionsCommand::Delete { id } => match store.delete(id) {
            Ok(true) => Ok(format!("deleted session {id}\n")),
            Ok(false) => {
                eprintln!("error: there is no session `{id}` in {location}");
                return Outcome::Error;
            }
            Err(error) => Err(error),
        },
    };
    match result {
        Ok(text) => super::print_stdout(&text),
        Err(error) => {
            eprintln!("error: {error}");
            Outcome::Error
        }
    }
}

fn list(store: &dyn crate::store::Store, json: bool) -> Result<String, crate::store::StoreError> {
    let (sessions, unreadable) = store.list_readable()?;
    for error in &unreadable {
        eprintln!("warning: left out of the list: {error}");
    }
    if json {
        return Ok(serde_json::to_string(&sessions).map(|text| text + "\n").unwrap_or_default());
    }
    let mut text = String::new();
    for session in sessions {
        let position = match (&session.flow, &session.step) {
            (Some(flow), Some(step)) => format!("{flow}.{step}"),
            (Some(flow), None) => flow.clone(),
            _ => "-".to_string(),
        };
        text.push_str(&format!(
            "{}\t{position}\t{} turn{}\t{}\n",
            session.id,
            session.turns,
            if session.turns == 1 { "" } else { "s" },
            session.updated_at
        ));
    }
    Ok(text)
}
