//! `flowc run FILE`: a conversation (a REPL on a terminal; one message per
//! line from `--script` or piped stdin otherwise, with `--json` for tools)
//! or, when the selected flow is all-`auto`, a workflow run.
//!
//! The program is checked first: any error stops the run with the same
//! output as `flowc check`. Every reply, trace line and JSON object is read
//! from the runtime's [`TurnResult`](crate::runtime::events::TurnResult)
//! and its events — the REPL, `--json` and the tests see the same data.
//!
//! This file reads the options and picks the kind of run; `conversation`
//! holds a conversation turn by turn, `repl` is its terminal front,
//! `interrupt` handles Ctrl-C, and `workflow` starts a workflow run.

mod conversation;
mod interrupt;
mod repl;
pub mod trace;
mod workflow;

use super::Outcome;
use super::limits::LimitFlags;
use super::load::compile_file;
use crate::config::Config;
use crate::ir::{FlowId, Program};
use crate::runtime::clock;
use crate::runtime::session::{Data, Session};
use crate::runtime::tools::ToolEnv;
use crate::runtime::validate::validate;
use conversation::converse;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use workflow::run_workflow;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The program (.flow, .yaml or .yml)
    pub file: PathBuf,
    /// The flow to run (workflows; conversations route by themselves)
    #[arg(long)]
    pub flow: Option<String>,
    /// Initial data fields, as a JSON object
    #[arg(long)]
    pub data: Option<String>,
    /// Context values, as a JSON object
    #[arg(long)]
    pub context: Option<String>,
    /// Read user messages from FILE, one per line, instead of a terminal
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Print one JSON object per turn (or one for a workflow run) on stdout
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub model: crate::cli::model::ModelFlags,
    /// Store every model request and answer of the run in FILE (keys redacted)
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Keep the conversation in the store under ID and go on with it
    #[arg(long)]
    pub session: Option<String>,
    /// The store for --session and workflow runs: sqlite:PATH or postgres://… (default: FLOWC_STORE, else the project's: the nearest flowc.toml or .flowc/ upwards from the program, then from here; else .flowc/ here)
    #[arg(long)]
    pub store: Option<String>,
    /// The longest message (a line of --script or stdin, a REPL line) and --data/--context text accepted, in bytes (default 262144, or [input] max_message_bytes in flowc.toml)
    #[arg(long, value_name = "BYTES")]
    pub max_message_bytes: Option<usize>,
    #[command(flatten)]
    pub limits: LimitFlags,
    /// Workflows: seconds the step in flight may take to finish after SIGTERM or SIGINT before its tool is killed (default 30, or [run] grace in flowc.toml)
    #[arg(long, value_name = "SECONDS")]
    pub grace: Option<u64>,
    /// Print each turn's events as JSON lines on stderr; `--trace prompts` adds the model's requests and raw answers (keys redacted)
    #[arg(long, value_enum, value_name = "WHAT", num_args = 0..=1, default_missing_value = "events")]
    pub trace: Option<trace::TraceLevel>,
}

pub fn run(args: &RunArgs) -> Outcome {
    match run_inner(args) {
        Ok(outcome) => outcome,
        Err(RunError::Usage(message)) => {
            eprintln!("error: {message}");
            Outcome::Error
        }
        Err(RunError::Failed(message)) => {
            eprintln!("error: {message}");
            Outcome::Failure
        }
    }
}

enum RunError {
    /// Exit 2.
    Usage(String),
    /// Exit 1.
    Failed(String),
}

fn run_inner(args: &RunArgs) -> Result<Outcome, RunError> {
    let compilation = match compile_file(&args.file) {
        Ok(compilation) => compilation,
        Err(outcome) => return Ok(outcome),
    };
    if compilation.has_errors() {
        let errors = compilation.diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count();
        eprintln!("the program has {errors} error{}: nothing was run", if errors == 1 { "" } else { "s" });
        return Ok(Outcome::Failure);
    }
    let program = Arc::new(compilation.ir);
    let base_dir = program_dir(&args.file);
    let (clock, ids) = clock::from_env().map_err(|error| RunError::Usage(error.to_string()))?;
    let tool_env = ToolEnv { base_dir, clock, ids };
    // `flowc.toml` is read once, here, and its tables handed to each reader.
    let config = Config::load(Some(&args.file)).map_err(|error| RunError::Usage(error.to_string()))?;
    let max_message = super::input::max_message_bytes(args.max_message_bytes, &config).map_err(RunError::Usage)?;
    for (flag, text) in [("--data", &args.data), ("--context", &args.context)] {
        super::input::check(flag, text.as_deref().unwrap_or_default(), max_message).map_err(RunError::Usage)?;
    }
    let data = parse_object(args.data.as_deref(), "--data")?;
    let context = parse_object(args.context.as_deref(), "--context")?;
    let context = validate_context(&program, &context)?;

    let selected = select_flow(&program, args.flow.as_deref())?;
    let limits = args.limits.resolve(&config).map_err(RunError::Usage)?;
    if let Some(flow) = selected
        && program.flow(flow).is_some_and(|flow| flow.workflow)
    {
        note_unused_limits(&args.limits.conversation_only(), "conversations", "a workflow run");
        if args.trace.is_some() {
            eprintln!(
                "note: --trace shows a conversation's turns; a workflow run's events are in `flowc runs show ID --json`"
            );
        }
        return run_workflow(args, &program, flow, &data, context, &tool_env, (limits.run, &config));
    }
    if selected.is_none() {
        require_conversation(&program)?;
    }
    if args.flow.is_some() {
        eprintln!("note: --flow selects a workflow; a conversation is routed by its messages");
    }
    note_unused_limits(&args.limits.workflow_only(), "workflow runs", "a conversation");
    converse(args, &program, tool_env, &data, context, (&config, limits.conversation, max_message))
}

/// Says which limit flags do not apply to this kind of run, as `--flow`
/// does on a conversation: a wrapper may pass the same flags to every run.
fn note_unused_limits(flags: &[&str], applies_to: &str, this_run: &str) {
    if let [first, rest @ ..] = flags {
        let (names, verb) = if rest.is_empty() { (first.to_string(), "limits") } else { (flags.join(", "), "limit") };
        eprintln!("note: {names} {verb} only {applies_to}; this is {this_run}");
    }
}

fn program_dir(file: &Path) -> PathBuf {
    let absolute = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    absolute.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn parse_object(text: Option<&str>, flag: &str) -> Result<serde_json::Map<String, serde_json::Value>, RunError> {
    let Some(text) = text else {
        return Ok(serde_json::Map::new());
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(_) => Err(RunError::Usage(format!("{flag} must be a JSON object, like '{{\"guests\": 2}}'"))),
        Err(error) => Err(RunError::Usage(format!("{flag} is not valid JSON: {error}"))),
    }
}

fn validate_context(program: &Program, context: &serde_json::Map<String, serde_json::Value>) -> Result<Data, RunError> {
    let mut validated = Data::new();
    for (name, value) in context {
        let Some(key) = program.context.iter().find(|key| key.name == *name) else {
            return Err(RunError::Usage(format!("unknown context key `{name}`: the program declares no such key")));
        };
        let value = validate(value, &key.ty)
            .map_err(|reason| RunError::Usage(format!("invalid context `{name}`: {reason}")))?;
        validated.insert(name.clone(), value);
    }
    Ok(validated)
}

/// Applies `--data` and `--context` to a session.
fn initialize(
    program: &Program,
    session: &mut Session,
    data: &serde_json::Map<String, serde_json::Value>,
    context: Data,
) -> Result<(), RunError> {
    for (name, value) in data {
        let Some(field) = program.fields.iter().find(|field| field.name == *name) else {
            return Err(RunError::Usage(format!("unknown field `{name}` in --data")));
        };
        let value = validate(value, &field.ty)
            .map_err(|reason| RunError::Usage(format!("invalid `{name}` in --data: {reason}")))?;
        session.data.insert(name.clone(), value);
    }
    session.context.extend(context);
    Ok(())
}

/// The flow `--flow` names, else the default one, else the only one.
fn select_flow(program: &Program, name: Option<&str>) -> Result<Option<FlowId>, RunError> {
    if let Some(name) = name {
        return program
            .flow_by_name(name)
            .map(Some)
            .ok_or_else(|| RunError::Usage(format!("the program has no flow `{name}`")));
    }
    if let Some(default) = program.default_flow {
        return Ok(Some(default));
    }
    Ok(match program.flows.as_slice() {
        [_] => Some(FlowId(0)),
        _ => None,
    })
}

/// With no flow selected the run is a conversation; a program made only of
/// workflows has none to hold, so the user must say which workflow to run.
fn require_conversation(program: &Program) -> Result<(), RunError> {
    if program.flows.is_empty() || program.flows.iter().any(|flow| !flow.workflow) {
        return Ok(());
    }
    let names: Vec<String> = program.flows.iter().map(|flow| format!("`{}`", flow.name)).collect();
    Err(RunError::Usage(format!(
        "the program has several workflows ({}) and no default: choose one with --flow",
        names.join(", ")
    )))
}
