//! `flowc run FILE`: a conversation (a REPL on a terminal; one message per
//! line from `--script` or piped stdin otherwise, with `--json` for tools)
//! or, when the selected flow is all-`auto`, a workflow run.
//!
//! The program is checked first: any error stops the run with the same
//! output as `flowc check`. Every reply, trace line and JSON object is read
//! from the runtime's [`TurnResult`] and its events — the REPL, `--json` and
//! the tests see the same data.

use super::load::compile_file;
use super::report::stderr_style;
use super::{Outcome, print_stdout};
use crate::ir::{FlowId, Program};
use crate::runtime::clock;
use crate::runtime::engine::{Runtime, RuntimeOptions, TurnError};
use crate::runtime::events::TurnResult;
use crate::runtime::session::{Data, Session, adopt};
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::runtime::validate::validate;
use crate::store::{Store, StoreError, StoredRun};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// The model: offline (default), openai, anthropic or replay:FILE
    #[arg(long)]
    pub provider: Option<String>,
    /// The model name (overrides flowc.toml and FLOWC_MODEL)
    #[arg(long)]
    pub model: Option<String>,
    /// The endpoint root: an OpenAI-compatible server's /v1, or Anthropic's host (overrides OPENAI_BASE_URL and flowc.toml)
    #[arg(long)]
    pub base_url: Option<String>,
    /// Store every model request and answer of the run in FILE (keys redacted)
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Keep the conversation in the store under ID and go on with it
    #[arg(long)]
    pub session: Option<String>,
    /// The store for --session and workflow runs: sqlite:PATH or postgres://… (default: .flowc/flowc.db beside the program, or FLOWC_STORE, or [store] in flowc.toml)
    #[arg(long)]
    pub store: Option<String>,
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
    let style = stderr_style();
    if compilation.has_errors() {
        let errors = compilation.diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count();
        eprintln!("the program has {errors} error{}: nothing was run", if errors == 1 { "" } else { "s" });
        return Ok(Outcome::Failure);
    }
    let program = Arc::new(compilation.ir);
    let base_dir = program_dir(&args.file);
    let (clock, ids) = clock::from_env().map_err(|error| RunError::Usage(error.to_string()))?;
    let tool_env = ToolEnv { base_dir, clock, ids };
    let data = parse_object(args.data.as_deref(), "--data")?;
    let context = parse_object(args.context.as_deref(), "--context")?;
    let context = validate_context(&program, &context)?;

    let selected = select_flow(&program, args.flow.as_deref())?;
    if let Some(flow) = selected
        && program.flow(flow).is_some_and(|flow| flow.workflow)
    {
        return run_workflow(args, &program, flow, &data, context, &tool_env);
    }
    if selected.is_none() {
        require_conversation(&program)?;
    }
    if args.flow.is_some() {
        eprintln!("note: --flow selects a workflow; a conversation is routed by its messages");
    }
    let flags = crate::llm::ProviderFlags {
        provider: args.provider.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        record: args.record.clone(),
        ..crate::llm::ProviderFlags::default()
    };
    let config =
        crate::llm::config::load(Some(&args.file), &flags).map_err(|error| RunError::Usage(error.to_string()))?;
    let provider = crate::llm::build_provider(&config).map_err(|error| RunError::Usage(error.to_string()))?;
    let options = RuntimeOptions { tool_env, tools: ToolRegistry::default() };
    let mut runtime = Runtime::new(Arc::clone(&program), provider, options);
    let store = match &args.session {
        Some(_) => match super::resume::open_store(args.store.as_deref(), Some(&args.file)) {
            Ok((store, _)) => Some(store),
            Err(outcome) => return Ok(outcome),
        },
        None => None,
    };
    let mut session = match (&args.session, &store) {
        (Some(id), Some(store)) => match store.load(id).map_err(|error| RunError::Usage(error.to_string()))? {
            Some(mut session) => {
                let hash = runtime.program_hash().to_string();
                adopt(&program, &hash, &mut session).map_err(|error| RunError::Usage(error.to_string()))?;
                session
            }
            None => runtime.new_session(id.clone()),
        },
        _ => runtime.new_session(runtime.ids().next_id()),
    };
    initialize(&program, &mut session, &data, context)?;

    let interactive = args.script.is_none() && std::io::stdin().is_terminal() && !args.json;
    if interactive {
        install_interrupt(&config.cancel);
    }
    let mut conversation = Conversation {
        runtime: &mut runtime,
        session: &mut session,
        store: store.as_deref(),
        cancel: config.cancel.clone(),
        json: args.json,
        color: style.color,
        last: None,
        modes: None,
    };
    conversation.modes = conversation.runtime.provider_modes();
    if interactive {
        conversation.repl()
    } else {
        let lines = read_script(args.script.as_deref())?;
        conversation.script(&lines)
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

/// In the REPL, Ctrl-C while a turn runs cancels its model call (the turn
/// fails cleanly and the session is unchanged); a second Ctrl-C before the
/// turn ends quits. At the prompt, rustyline reads Ctrl-C as a key.
fn install_interrupt(cancel: &crate::llm::CancelFlag) {
    let cancel = cancel.clone();
    let _ = ctrlc_handler(move || {
        if cancel.is_cancelled() {
            std::process::exit(130);
        }
        cancel.cancel();
    });
}

#[cfg(unix)]
fn ctrlc_handler(on_interrupt: impl Fn() + Send + 'static) -> std::io::Result<()> {
    // A thread waits for SIGINT through a self-pipe so that the handler
    // itself only writes one byte (async-signal-safe).
    use std::io::Read;
    use std::os::fd::FromRawFd;
    static WRITE_END: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
    extern "C" fn handle(_: libc::c_int) {
        let fd = WRITE_END.load(std::sync::atomic::Ordering::Relaxed);
        if fd >= 0 {
            let byte = 1u8;
            // SAFETY: write(2) is async-signal-safe; the buffer is a valid byte.
            unsafe {
                libc::write(fd, (&raw const byte).cast(), 1);
            }
        }
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    WRITE_END.store(fds[1], std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `handle` has the signature signal(2) expects.
    unsafe {
        libc::signal(libc::SIGINT, handle as *const () as libc::sighandler_t);
    }
    // SAFETY: fds[0] is the pipe's read end, owned by this File from now on.
    let mut read_end = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while read_end.read_exact(&mut byte).is_ok() {
            on_interrupt();
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn ctrlc_handler(_on_interrupt: impl Fn() + Send + 'static) -> std::io::Result<()> {
    Ok(())
}

fn read_script(path: Option<&Path>) -> Result<Vec<String>, RunError> {
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

struct Conversation<'a> {
    runtime: &'a mut Runtime,
    session: &'a mut Session,
    store: Option<&'a dyn Store>,
    cancel: crate::llm::CancelFlag,
    json: bool,
    color: bool,
    last: Option<TurnResult>,
    /// What the provider negotiated with its server, to say when it changes.
    modes: Option<String>,
}

impl Conversation<'_> {
    /// One turn: respond, then save the session (compare-and-swap on its
    /// version). A failed turn or save leaves the stored session as it was.
    fn turn(&mut self, message: &str) -> Result<TurnResult, String> {
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

    fn script(&mut self, lines: &[String]) -> Result<Outcome, RunError> {
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

    fn repl(&mut self) -> Result<Outcome, RunError> {
        let mut editor = rustyline::DefaultEditor::new().map_err(|error| RunError::Usage(error.to_string()))?;
        let program = Arc::clone(&self.runtime.program);
        let name = program.agent.name.clone().unwrap_or_else(|| "flowc".to_string());
        eprintln!(
            "{name} — talking to the {} model. /help for commands, Ctrl-D to quit.",
            self.runtime.provider_name()
        );
        // Replies are printed as the model writes them; what was printed is
        // kept so that the end of the turn prints only what is missing.
        let streamed = Arc::new(std::sync::Mutex::new(String::new()));
        let sink = Arc::clone(&streamed);
        self.runtime.set_stream(Box::new(move |chunk: &str| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(chunk.as_bytes());
            let _ = out.flush();
            if let Ok(mut text) = sink.lock() {
                text.push_str(chunk);
            }
        }));
        let take_streamed = || streamed.lock().map(|mut text| std::mem::take(&mut *text)).unwrap_or_default();
        loop {
            match editor.readline("you> ") {
                Ok(line) => {
                    let line = line.trim().to_string();
                    if line.is_empty() {
                        continue;
                    }
                    let _ = editor.add_history_entry(line.as_str());
                    if line.starts_with('/') {
                        if self.command(&line) {
                            return Ok(Outcome::Success);
                        }
                        continue;
                    }
                    take_streamed();
                    let outcome = self.turn(&line);
                    let shown = take_streamed();
                    match outcome {
                        Ok(result) => {
                            print!("{}", after_stream(&shown, &result.reply));
                            let _ = std::io::stdout().flush();
                            let trace = result.trace_line();
                            if self.color {
                                eprintln!("\x1b[2m{trace}\x1b[0m");
                            } else {
                                eprintln!("{trace}");
                            }
                            self.last = Some(result);
                        }
                        Err(error) => {
                            if !shown.is_empty() {
                                println!();
                            }
                            eprintln!("error: {error} (the session is unchanged)");
                        }
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(rustyline::error::ReadlineError::Eof) => return Ok(Outcome::Success),
                Err(error) => return Err(RunError::Usage(format!("cannot read the terminal: {error}"))),
            }
        }
    }

    /// A slash command; returns whether to quit.
    fn command(&mut self, line: &str) -> bool {
        let mut parts = line.splitn(2, ' ');
        let command = parts.next().unwrap_or_default();
        let argument = parts.next().map(str::trim).unwrap_or_default();
        // An export names its position, so an edited program can load it.
        self.session.record_position(&self.runtime.program);
        match command {
            "/quit" | "/exit" => return true,
            "/help" => eprintln!(
                "/data          the collected data\n\
                 /trace         the last turn's directives and events\n\
                 /graph         where the conversation stands, as Mermaid\n\
                 /reset         start a new conversation\n\
                 /save FILE     save the session as JSON\n\
                 /load FILE     load a session saved with /save\n\
                 /quit          leave (or Ctrl-D)"
            ),
            "/data" => {
                let data = crate::runtime::engine::ordered_data(&self.runtime.program, &self.session.data);
                println!("{}", serde_json::to_string_pretty(&data).unwrap_or_default());
            }
            "/trace" => match &self.last {
                Some(result) => {
                    let trace = serde_json::json!({ "directives": result.directives, "events": result.events });
                    println!("{}", serde_json::to_string_pretty(&trace).unwrap_or_default());
                }
                None => eprintln!("no turn yet"),
            },
            "/graph" => {
                let program = &self.runtime.program;
                let reachability = crate::check::reachability::analyze(program);
                let mut text =
                    crate::graph::mermaid::render(&crate::graph::build(program, &reachability, self.session.flow));
                if let (Some(flow), Some(step)) = (self.session.flow, self.session.step) {
                    crate::graph::mermaid::mark_current(&mut text, flow, step);
                }
                print!("{text}");
            }
            "/reset" => {
                let id = self.session.id.clone();
                let version = self.session.version;
                let context = self.session.context.clone();
                *self.session = self.runtime.new_session(id);
                self.session.version = version;
                self.session.context = context;
                self.last = None;
                eprintln!("started over");
            }
            "/save" if !argument.is_empty() => match serde_json::to_string_pretty(&*self.session) {
                Ok(text) => match std::fs::write(argument, text) {
                    Ok(()) => eprintln!("saved to {argument}"),
                    Err(error) => eprintln!("error: cannot write {argument}: {error}"),
                },
                Err(error) => eprintln!("error: {error}"),
            },
            "/load" if !argument.is_empty() => match std::fs::read_to_string(argument)
                .map_err(|error| error.to_string())
                .and_then(|text| serde_json::from_str::<Session>(&text).map_err(|error| error.to_string()))
            {
                Ok(mut loaded) => {
                    let hash = self.runtime.program_hash().to_string();
                    match adopt(&self.runtime.program, &hash, &mut loaded) {
                        Ok(()) => {
                            // The file is an export: the conversation goes
                            // on under this session's id and version.
                            loaded.id = self.session.id.clone();
                            loaded.version = self.session.version;
                            *self.session = loaded;
                            eprintln!("loaded {argument}");
                        }
                        Err(error) => eprintln!("error: cannot load {argument}: {error}"),
                    }
                }
                Err(error) => eprintln!("error: cannot load {argument}: {error}"),
            },
            "/save" | "/load" => eprintln!("usage: {command} FILE"),
            other => eprintln!("unknown command {other}; /help lists them"),
        }
        false
    }
}

/// What the REPL prints when a turn ends, after `streamed` was shown as
/// the reply was written: the rest of the reply (normally just the line
/// break), or, when the reply turned out different (a post-model `reply`
/// directive replaced the model's text), the reply on a line of its own.
fn after_stream(streamed: &str, reply: &str) -> String {
    if streamed.is_empty() {
        return format!("{reply}\n");
    }
    match reply.strip_prefix(streamed) {
        Some(rest) => format!("{rest}\n"),
        None => format!("\n{reply}\n"),
    }
}

fn run_workflow(
    args: &RunArgs,
    program: &Program,
    flow: FlowId,
    data: &serde_json::Map<String, serde_json::Value>,
    context: Data,
    tool_env: &ToolEnv,
) -> Result<Outcome, RunError> {
    let (store, location) = match super::resume::open_store(args.store.as_deref(), Some(&args.file)) {
        Ok(opened) => opened,
        Err(outcome) => return Ok(outcome),
    };
    let run = crate::runtime::workflow::start(program, tool_env, flow, data, context)
        .map_err(|error| RunError::Usage(error.to_string()))?;
    let file = std::fs::canonicalize(&args.file).unwrap_or_else(|_| args.file.clone());
    let holder = super::resume::holder_name();
    let claim = super::resume::claim_at(&holder, tool_env.clock.as_ref());
    let mut stored = StoredRun {
        run,
        program: file.to_string_lossy().into_owned(),
        program_hash: crate::runtime::session::program_hash(program),
        version: 1,
        due_at: None,
    };
    // The run is stored before its first step. Seeded ids (FLOWC_SEED)
    // repeat across processes: an id the store already has takes the next.
    let mut attempts = 0;
    loop {
        match store.save_run(&stored, 0, Some(&claim)) {
            Ok(()) => break,
            Err(StoreError::RunConflict { .. }) if attempts < 100 => {
                attempts += 1;
                stored.run.run = tool_env.ids.next_id();
            }
            Err(error) => return Err(RunError::Usage(error.to_string())),
        }
    }
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    super::resume::execute(store.as_ref(), &mut stored, program, tool_env, &claim, show_progress)
        .map_err(|error| RunError::Failed(error.to_string()))?;
    for warning in &stored.run.warnings {
        eprintln!("warning: {warning}");
    }
    let _ = std::io::stdout().flush();
    Ok(super::resume::report(&stored.run, Some(program), args.json, &location))
}

#[cfg(test)]
mod tests {
    use super::after_stream;

    #[test]
    fn a_streamed_reply_is_not_printed_twice() {
        assert_eq!(after_stream("", "Booked!"), "Booked!\n", "nothing streamed: the whole reply");
        assert_eq!(after_stream("For which date?", "For which date?"), "\n");
        assert_eq!(after_stream("Welcome!", "Welcome!\nFor which date?"), "\nFor which date?\n");
        assert_eq!(after_stream("Let me check", "Sorry, no rooms."), "\nSorry, no rooms.\n");
    }
}
