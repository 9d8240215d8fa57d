//! A conversation held turn by turn: each message is answered by the runtime
//! and the session saved after the turn, with one line of output per
//! turn (the reply, or a JSON object under `--json`) for scripts and pipes.

use super::RunError;
use crate::cli::{Outcome, print_stdout};
use crate::runtime::engine::{Runtime, TurnError};
use crate::runtime::events::TurnResult;
use crate::runtime::session::Session;
use crate::store::Store;
use std::io::BufRead;
use std::path::Path;

pub(super) fn read_script(path: Option<&Path>) -> Result<Vec<String>, RunError> {
    let text = match path {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| RunError::Usage(format!("cannot read `{}`: {error}", path.display())))?,
        None => {
            let mut text = String::new();
            for line in std::io::stdin().lock().lines() {
                let line = line.map_err(|error| RunError::Usage(format!("cannot read stdin: {error}")))?;
                text.push_str(&line);
                text.push('\n');
            }
            text
        }
    };
    Ok(text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_string).collect())
}

pub(super) struct Conversation<'a> {
    pub(super) runtime: &'a mut Runtime,
    pub(super) session: &'a mut Session,
    pub(super) store: Option<&'a dyn Store>,
    pub(super) cancel: crate::llm::CancelFlag,
    pub(super) json: bool,
    pub(super) color: bool,
    pub(super) last: Option<TurnResult>,
    /// What the provider negotiated with its server, to say when it changes.
    pub(super) modes: Option<String>,
}

impl Conversation<'_> {
    /// One turn: respond, then save the session (compare-and-swap on its
    /// version). A failed turn or save leaves the stored session as it was.
    pub(super) fn turn(&mut self, message: &str) -> Result<TurnResult, String> {
        self.cancel.reset();
        let mut working = self.session.clone();
        let result = self.runtime.respond(&mut working, message);
        self.note_modes();
        let result = result.map_err(|error: TurnError| error.to_string())?;
        if let Some(store) = self.store {
            working.record_position(&self.runtime.program);
            crate::store::commit_turn(store, self.session, &mut working).map_err(|error| error.to_string())?;
        }
        *self.session = working;
        Ok(result)
    }

    /// Says on stderr when the provider changed how it talks to the server
    /// (a server refused `json_schema` or `tool_choice: auto`), which
    /// `flowc.toml` can then set from the start.
    fn note_modes(&mut self) {
        let modes = self.runtime.provider_modes();
        if modes != self.modes {
            if let Some(now) = &modes {
                eprintln!(
                    "note: the server refused a setting; {} now uses {now} (put it in flowc.toml to skip the probing)",
                    self.runtime.provider_name()
                );
            }
            self.modes = modes;
        }
    }

    pub(super) fn script(&mut self, lines: &[String]) -> Result<Outcome, RunError> {
        for line in lines {
            let result = self.turn(line).map_err(RunError::Failed)?;
            if self.json {
                let mut text = result.to_json_line().to_string();
                text.push('\n');
                if print_stdout(&text) != Outcome::Success {
                    return Ok(Outcome::Error);
                }
            } else {
                if print_stdout(&format!("{}\n", result.reply)) != Outcome::Success {
                    return Ok(Outcome::Error);
                }
                eprintln!("{}", result.trace_line());
            }
            self.last = Some(result);
        }
        Ok(Outcome::Success)
    }
}
