//! A conversation held turn by turn: each message is answered by the runtime
//! and the session saved after the turn, with one line of output per
//! turn (the reply, or a JSON object under `--json`) for scripts and pipes.

use super::interrupt::install_interrupt;
use super::{RunArgs, RunError, initialize};
use crate::cli::report::stderr_style;
use crate::cli::{Outcome, print_stdout};
use crate::config::Config;
use crate::ir::Program;
use crate::runtime::engine::{ContinuationLimits, RuntimeOptions};
use crate::runtime::engine::{Runtime, TurnError};
use crate::runtime::events::TurnResult;
use crate::runtime::session::Session;
use crate::runtime::session::{Data, adopt};
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::store::Store;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

/// Holds the conversation `args` ask for: in the REPL on a terminal, else
/// one turn per line of `--script` or stdin.
pub(super) fn converse(
    args: &RunArgs,
    program: &Arc<Program>,
    tool_env: ToolEnv,
    data: &serde_json::Map<String, serde_json::Value>,
    context: Data,
    (config, limits, max_message): (&Config, ContinuationLimits, usize),
) -> Result<Outcome, RunError> {
    let (mut runtime, cancel) = start_runtime(args, program, tool_env, config, limits)?;
    let store = match &args.session {
        Some(_) => match crate::cli::open_store(args.store.as_deref(), Some(&args.file)) {
            Ok((store, _)) => Some(store),
            Err(outcome) => return Ok(outcome),
        },
        None => None,
    };
    let mut session = open_session(&runtime, args.session.as_deref(), store.as_deref())?;
    initialize(program, &mut session, data, context)?;

    let interactive = args.script.is_none() && std::io::stdin().is_terminal() && !args.json;
    if interactive {
        install_interrupt(&cancel);
    }
    let mut conversation = Conversation {
        runtime: &mut runtime,
        session: &mut session,
        store: store.as_deref(),
        cancel,
        json: args.json,
        color: stderr_style().color,
        last: None,
        modes: None,
        max_message,
    };
    conversation.modes = conversation.runtime.provider_modes();
    if interactive {
        conversation.repl()
    } else {
        let lines = read_script(args.script.as_deref(), max_message)?;
        conversation.script(&lines)
    }
}

/// The runtime of the conversation, on the model the flags and
/// `flowc.toml` choose and under the operator's `limits`, and the flag that
/// cancels its model calls.
fn start_runtime(
    args: &RunArgs,
    program: &Arc<Program>,
    tool_env: ToolEnv,
    config: &Config,
    limits: ContinuationLimits,
) -> Result<(Runtime, crate::llm::CancelFlag), RunError> {
    let flags = crate::llm::ProviderFlags { record: args.record.clone(), ..args.model.provider_flags() };
    let config = crate::llm::config::load(config, &flags).map_err(|error| RunError::Usage(error.to_string()))?;
    let provider = crate::llm::build_provider(&config).map_err(|error| RunError::Usage(error.to_string()))?;
    let provider: Box<dyn crate::llm::Provider> = match args.trace {
        Some(super::trace::TraceLevel::Prompts) => {
            Box::new(super::trace::Traced::new(provider, crate::llm::redact::Redactor::from_config(&config)))
        }
        _ => provider,
    };
    let options = RuntimeOptions { tool_env, tools: ToolRegistry::default(), limits };
    let mut runtime = Runtime::new(Arc::clone(program), provider, options);
    if args.trace.is_some() {
        super::trace::observe(&mut runtime, crate::llm::redact::Redactor::from_config(&config));
    }
    Ok((runtime, config.cancel))
}

/// The session `--session` names, loaded from the store and adopted by this
/// program, or a new one (under that id, or a fresh one).
fn open_session(runtime: &Runtime, id: Option<&str>, store: Option<&dyn Store>) -> Result<Session, RunError> {
    let (Some(id), Some(store)) = (id, store) else {
        return Ok(runtime.new_session(runtime.ids().next_id()));
    };
    match store.load(id).map_err(|error| RunError::Usage(error.to_string()))? {
        Some(mut session) => {
            let hash = runtime.program_hash().to_string();
            adopt(&runtime.program, &hash, &mut session).map_err(|error| RunError::Usage(error.to_string()))?;
            Ok(session)
        }
        None => Ok(runtime.new_session(id.to_string())),
    }
}

/// Every line first, so that one over the bound stops the script before
/// its first turn.
fn read_script(path: Option<&Path>, max_message: usize) -> Result<Vec<String>, RunError> {
    match path {
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|error| RunError::Usage(format!("cannot read `{}`: {error}", path.display())))?;
            let source = format!("`{}`", path.display());
            crate::cli::input::read_lines(std::io::BufReader::new(file), max_message, &source)
        }
        None => crate::cli::input::read_lines(std::io::stdin().lock(), max_message, "stdin"),
    }
    .map_err(RunError::Usage)
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
    /// The longest message a turn takes, in bytes.
    pub(super) max_message: usize,
}

impl Conversation<'_> {
    /// One turn: respond, then save the session (compare-and-swap on its
    /// version). A failed turn or save leaves the stored session as it was.
    pub(super) fn turn(&mut self, message: &str) -> Result<TurnResult, String> {
        crate::cli::input::check("the message", message, self.max_message)?;
        self.cancel.reset();
        let mut working = self.session.clone();
        let result = self.runtime.run_turn(&mut working, message);
        self.note_modes();
        let result = result.map_err(|error: TurnError| error.to_string())?;
        if let Some(store) = self.store {
            crate::store::commit_turn(store, &self.runtime.program, self.session, &mut working)
                .map_err(|error| error.to_string())?;
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
            // `/data`, `/trace`, … work as in the REPL; `//text` sends `/text`.
            let line = match line.strip_prefix('/') {
                Some(rest) if rest.starts_with('/') => rest,
                Some(_) => {
                    if self.script_command(line) {
                        break;
                    }
                    continue;
                }
                None => line.as_str(),
            };
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

    /// A slash command read from a script; returns whether to stop. Under
    /// `--json` the answers of `/data`, `/trace` and `/graph` are one JSON line each
    /// (`{"command": "/data", "result": …}`), so the output stays one
    /// object per line.
    fn script_command(&mut self, line: &str) -> bool {
        let command = line.split_whitespace().next().unwrap_or_default();
        let result = match command {
            "/data" => Some(serde_json::Value::Object(crate::runtime::session::ordered_data(
                &self.runtime.program,
                &self.session.data,
            ))),
            "/graph" => Some(serde_json::Value::String(self.graph())),
            "/trace" => Some(match &self.last {
                Some(result) => serde_json::json!({ "directives": result.directives, "events": result.events }),
                None => serde_json::Value::Null,
            }),
            _ => None,
        };
        match result {
            Some(result) if self.json => {
                let line = serde_json::json!({ "command": command, "result": result });
                print_stdout(&format!("{line}\n")) != Outcome::Success
            }
            _ => self.command(line),
        }
    }
}
