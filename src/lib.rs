//! flowc: a compiler, checker and interpreter for LLM-driven conversations
//! and workflows written as code.
//!
//! The pipeline, as the modules show it: [`syntax`] reads `.flow` and YAML
//! into one AST, [`ir`] lowers it into a resolved, typed IR (with [`expr`]
//! typing every expression), [`check`] proves it sound, [`graph`] draws it,
//! and the [`runtime`] executes it, asking a model through [`llm`] and
//! keeping sessions in a [`store`]. [`pipeline`] runs the compile stages in
//! order; [`diag`] holds the diagnostics every stage reports; [`source`]
//! the text and spans they point into; [`ids`] the typed indices the IR and
//! its expressions share; [`duration`] the one duration grammar;
//! [`schedule`] a workflow schedule's cron expression and next tick.
//!
//! Where I/O happens (each module's own docs say the same):
//!
//! | module | I/O |
//! | ------ | --- |
//! | [`syntax`], [`ir`], [`expr`], [`check`], [`graph`], [`pipeline`], [`diag`], [`source`], [`ids`], [`duration`], [`schedule`] | none: they work on text and values handed to them (a [`source::SourceFile`] is built by its caller from text the caller read; JSON and diagnostics are written to a writer the caller passes) |
//! | [`runtime`] | runs tools: `exec` tools start processes, `http` tools make network requests and read the environment variables their headers name (`env.NAME`); the clock reads the system time and the `FLOWC_NOW`/`FLOWC_SEED` environment variables |
//! | [`llm`] | network requests to model providers; reads `flowc.toml` and API-key environment variables; `--record` writes and `replay:` reads a recording file |
//! | [`store`] | SQLite files and PostgreSQL connections (sessions, transcripts, workflow runs); finding the store reads `FLOWC_STORE` and `[store]` in `flowc.toml`; a SQLite store imports once the JSON session files of `.flowc/sessions/` beside it (and warns on stderr about one it cannot read); the memory store none |
//! | [`flowtest`] | reads `*.test.yaml` files and the programs they name; running a case runs what its program runs (tools the file does not stub, a model it asks for) |
//! | `cli` (crate-private; [`run_cli`] runs it) | reads programs and data files, writes to the terminal, decides exit codes, and wires the above together |
//!
//! `testgen` (program generators for the stress tests and benchmarks) is
//! compiled only with the `testing` feature, which the crate's own tests and
//! benches turn on; the shipped library and binary leave it out.

pub mod check;
pub(crate) mod cli;
pub mod config;
pub mod diag;
#[cfg(test)]
mod differential;
pub mod duration;
pub mod expr;
pub mod flowtest;
pub mod graph;
pub mod ids;
pub mod ir;
pub mod llm;
pub mod message;
pub mod pipeline;
pub mod read;
pub mod runtime;
pub mod schedule;
pub mod serve;
pub mod source;
pub mod store;
pub mod stored_run;
pub mod syntax;
#[cfg(any(test, feature = "testing"))]
pub mod testgen;

/// Runs the `flowc` command line with this process's arguments and
/// environment, and answers the exit code (0 success, 1 a failed check,
/// turn or run, 2 usage or I/O; the README's command table says which
/// command exits how). The `flowc` binary is this call; the command line's
/// own modules are not part of the library's API.
pub fn run_cli() -> std::process::ExitCode {
    cli::main()
}
