//! `flowc check PATH...`: every problem of every program in one run, as
//! rustc-style reports or (`--format json`) one JSON array on stdout.

use super::load::{expand_paths, load_file};
use super::report::{Tally, print_diagnostics_up_to, print_stderr, stderr_style};
use super::{Outcome, print_stdout};
use crate::diag::render::to_json;
use crate::diag::{DEFAULT_MAX_SHOWN, left_out_note, shown};
use crate::pipeline::compile;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Program files, or directories to search for .flow, .yaml and .yml files
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Fail (exit 1) on warnings too
    #[arg(long)]
    pub deny_warnings: bool,
    /// Show at most this many diagnostics per program (0: all); the summary
    /// line still counts every one
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SHOWN)]
    pub max_diagnostics: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

pub fn run(args: &CheckArgs) -> Outcome {
    let style = stderr_style();
    let mut outcome = Outcome::Success;
    let mut tally = Tally::default();
    let mut json = Vec::new();
    // A path that cannot be read is reported and the run goes on: every
    // other program is still checked, and exit 2 says something was missed.
    let mut files = Vec::new();
    for path in &args.paths {
        match expand_paths(std::slice::from_ref(path)) {
            Ok(found) => files.extend(found),
            Err(error) => {
                print_stderr(&format!("error: {error}\n"));
                outcome = outcome.worst(Outcome::Error);
            }
        }
    }
    for path in &files {
        let loaded = match load_file(path) {
            Ok(loaded) => loaded,
            Err(error) => {
                print_stderr(&format!("error: {error}\n"));
                outcome = outcome.worst(Outcome::Error);
                continue;
            }
        };
        let diagnostics = match loaded.encoding_error {
            Some(encoding_error) => vec![encoding_error],
            None => {
                let mut compilation = compile(&loaded.file);
                let diagnostics = std::mem::take(&mut compilation.diagnostics);
                // The AST and IR of a large program take a noticeable time
                // to free; the process is about to exit, so leave that to
                // the operating system.
                std::mem::forget(compilation);
                diagnostics
            }
        };
        tally.add(&diagnostics);
        match args.format {
            Format::Human => print_diagnostics_up_to(&loaded.file, &diagnostics, style, args.max_diagnostics),
            Format::Json => {
                let (kept, left_out) = shown(&diagnostics, args.max_diagnostics);
                json.extend(kept.iter().map(|diagnostic| to_json(&loaded.file, diagnostic)));
                if left_out > 0 {
                    print_stderr(&format!("{}\n", left_out_note(&loaded.file.name, left_out, args.max_diagnostics)));
                }
            }
        }
    }
    if args.format == Format::Json {
        let mut text = serde_json::to_string_pretty(&json).unwrap_or_else(|_| "[]".to_string());
        text.push('\n');
        outcome = outcome.worst(print_stdout(&text));
    }
    print_stderr(&format!("{}\n", tally.summary()));
    if tally.errors > 0 || (args.deny_warnings && tally.warnings > 0) {
        outcome = outcome.worst(Outcome::Failure);
    }
    outcome
}
