//! The command line: one module per subcommand, each turning its clap
//! arguments into work on the library. It reads the program and data files,
//! owns the terminal and decides exit codes. It is not the only module that
//! does I/O: the runtime's tools start processes and make requests, the
//! model providers ([`crate::llm`]) use the network and read `flowc.toml`,
//! and the stores ([`crate::store`]) keep sessions and runs in SQLite or PostgreSQL.

pub mod check;
pub mod compile;
pub mod graph;
pub mod input;
pub mod limits;
pub mod load;
pub mod model;
pub mod report;
pub mod resume;
pub mod run;
pub mod runs;
pub mod scheduled;
pub mod serve;
pub mod sessions;
pub mod shutdown;
pub mod stored_run;
pub mod test;
pub mod worker;

use crate::runtime::clock;
use crate::store::{Store, StoreLocation};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "flowc",
    version,
    about = "Compile, check, draw and run LLM-driven conversations and workflows written as code"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check programs for errors and warnings
    Check(check::CheckArgs),
    /// Print the compiled IR (or AST) of a program as JSON
    Compile(compile::CompileArgs),
    /// Draw a program's flows as a Mermaid or Graphviz graph
    Graph(graph::GraphArgs),
    /// Hold a conversation with a program, or run a workflow
    Run(Box<run::RunArgs>),
    /// Continue a waiting workflow run
    Resume(resume::ResumeArgs),
    /// Resume due workflow runs, and start scheduled ones, as they come due
    Worker(worker::WorkerArgs),
    /// List or show stored workflow runs
    Runs(runs::RunsArgs),
    /// List, show or delete stored conversations
    Sessions(sessions::SessionsArgs),
    /// Serve programs' conversations and workflow runs over HTTP
    Serve(Box<serve::ServeArgs>),
    /// Run the conversation and workflow tests of *.test.yaml files
    Test(Box<test::TestArgs>),
}

/// How a command ended, as the process exit code documents it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 0: nothing wrong.
    Success,
    /// 1: the program has errors (or warnings under `--deny-warnings`), or a run failed.
    Failure,
    /// 2: usage or I/O error.
    Error,
}

impl Outcome {
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Success => ExitCode::SUCCESS,
            Outcome::Failure => ExitCode::from(1),
            Outcome::Error => ExitCode::from(2),
        }
    }

    /// The more severe of two outcomes (2 wins over 1 over 0).
    pub fn worst(self, other: Outcome) -> Outcome {
        let rank = |outcome: Outcome| match outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::Error => 2,
        };
        if rank(other) > rank(self) { other } else { self }
    }
}

pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => Outcome::Error.exit_code(),
            };
        }
    };
    let outcome = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Compile(args) => compile::run(&args),
        Command::Graph(args) => graph::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Resume(args) => resume::run(&args),
        Command::Worker(args) => worker::run(&args),
        Command::Runs(args) => runs::run(&args),
        Command::Sessions(args) => sessions::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Test(args) => test::run(&args),
    };
    outcome.exit_code()
}

/// A crash is flowc's bug, never the user's: say so, and ask for a report.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location =
            info.location().map(|location| format!(" at {}:{}", location.file(), location.line())).unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".to_string());
        eprintln!(
            "error: flowc crashed{location}: {message}\n\
             This is a bug in flowc, not in your program. Please report it with the input that caused it."
        );
    }));
}

/// Writes a result to stdout. A closed pipe (`flowc compile x | head`) is
/// not an error: the reader has what it wanted.
pub fn print_stdout(text: &str) -> Outcome {
    write_stdout(|out| out.write_all(text.as_bytes()))
}

/// Writes a result to stdout as it is produced, through a buffer, with
/// [`print_stdout`]'s handling of a closed pipe.
pub fn write_stdout(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Outcome {
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    match write(&mut stdout).and_then(|()| stdout.flush()) {
        Ok(()) => Outcome::Success,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Outcome::Success,
        Err(error) => {
            eprintln!("error: cannot write the output: {error}");
            Outcome::Error
        }
    }
}

/// Opens the store a command uses, or says why it cannot on stderr.
pub fn open_store(flag: Option<&str>, program: Option<&Path>) -> Result<(Box<dyn Store>, StoreLocation), Outcome> {
    let location = StoreLocation::resolve(flag, program).map_err(|error| {
        eprintln!("error: {error}");
        Outcome::Error
    })?;
    let store = crate::store::open(&location).map_err(|error| {
        eprintln!("error: {error}");
        Outcome::Error
    })?;
    Ok((store, location))
}

/// Opens the store a reading command uses (`runs`, `sessions`, `resume`),
/// or says on stderr that there is none: it never creates an empty one.
pub fn open_existing_store(flag: Option<&str>) -> Result<(Box<dyn Store>, StoreLocation), Outcome> {
    let location = StoreLocation::resolve_existing(flag).map_err(|error| {
        eprintln!("error: {error}");
        Outcome::Error
    })?;
    let store = crate::store::open(&location).map_err(|error| {
        eprintln!("error: {error}");
        Outcome::Error
    })?;
    Ok((store, location))
}

/// The store and the clock (`FLOWC_NOW`, `FLOWC_SEED`) of a command that
/// works on stored runs.
pub fn open_with_clock(flag: Option<&str>) -> Result<(Box<dyn Store>, StoreLocation, clock::ClockAndIds), Outcome> {
    let (store, location) = open_store(flag, None)?;
    let clock = clock::from_env().map_err(|error| {
        eprintln!("error: {error}");
        Outcome::Error
    })?;
    Ok((store, location, clock))
}
