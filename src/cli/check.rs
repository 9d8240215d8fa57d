//! `flowc check PATH...`: every problem of every program in one run, as
//! rustc-style reports or (`--format json`) one JSON array on stdout, and
//! on stderr what each program's tools are given from the environment;
//! with `--costs`, what each turn can cost in model calls and prompt tokens
//! (`check::costs`), as a table or in the JSON.

use super::load::{expand_paths, load_file};
use super::report::{Tally, print_diagnostics_up_to, print_stderr, stderr_style};
use super::{Outcome, print_stdout};
use crate::check::costs::{BYTES_PER_TOKEN, Calls, Start, TurnCost, costs};
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
    /// Also show, for each place a turn can start, the model calls it can
    /// make (best and worst case) and its estimated prompt tokens; with
    /// `--format json` the output is then one object,
    /// `{"diagnostics": [...], "costs": [...]}`
    #[arg(long)]
    pub costs: bool,
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
    let mut costs_json = Vec::new();
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
        let mut notes = Vec::new();
        let mut turns = None;
        let mut model_steps = Vec::new();
        let diagnostics = match loaded.encoding_error {
            Some(encoding_error) => vec![encoding_error],
            None => {
                let mut compilation = compile(&loaded.file);
                let diagnostics = std::mem::take(&mut compilation.diagnostics);
                notes = env_notes(&loaded.file.name, &compilation.ir);
                if args.costs {
                    turns = Some(costs(&compilation.ir));
                    model_steps = crate::check::model_steps::workflow_model_calls(&compilation.ir);
                }
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
        for note in &notes {
            print_stderr(&format!("{note}\n"));
        }
        if let Some(turns) = turns {
            match args.format {
                Format::Human => {
                    outcome = outcome.worst(print_stdout(&costs_table(&loaded.file.name, &turns)));
                    outcome = outcome.worst(print_stdout(&model_steps_table(&model_steps)));
                }
                Format::Json => costs_json
                    .push(serde_json::json!({ "file": loaded.file.name, "turns": turns, "model_steps": model_steps })),
            }
        }
    }
    if args.format == Format::Json {
        let value = if args.costs {
            serde_json::json!({ "diagnostics": json, "costs": costs_json })
        } else {
            serde_json::to_value(&json).unwrap_or_default()
        };
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "[]".to_string());
        text.push('\n');
        outcome = outcome.worst(print_stdout(&text));
    }
    print_stderr(&format!("{}\n", tally.summary()));
    if tally.errors > 0 || (args.deny_warnings && tally.warnings > 0) {
        outcome = outcome.worst(Outcome::Failure);
    }
    outcome
}

/// What each exec tool of `program` is given from flowc's environment
/// besides `PATH` and the locale (its `env`), one note per tool that names
/// any: an operator sees which secrets a program's tools receive. On
/// stderr in both formats, as the other per-program notes, so that the
/// JSON on stdout stays an array of diagnostics.
fn env_notes(file_name: &str, program: &crate::ir::Program) -> Vec<String> {
    program
        .tools
        .iter()
        .filter_map(|tool| match &tool.implementation {
            Some(crate::ir::ToolImpl::Exec { env, .. }) if !env.is_empty() => Some(format!(
                "note: {file_name}: tool `{}` is given {} from flowc's environment (its `env`)",
                tool.name,
                env.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
            )),
            _ => None,
        })
        .collect()
}

/// The lines `--costs` adds for workflow steps with model steps
/// (`ask_model`): their calls, best-worst, and per item of a loop.
fn model_steps_table(rows: &[crate::check::model_steps::StepModelCalls]) -> String {
    rows.iter()
        .map(|row| {
            let per_item = if row.worst_per_item > 0 {
                format!(", up to {} more per item of its loop", row.worst_per_item)
            } else {
                String::new()
            };
            format!("workflow step {}.{}: {}-{} model calls{per_item}\n", row.flow, row.step, row.best, row.worst)
        })
        .collect()
}

/// The human table of `--costs`: one line per place a turn can start.
fn costs_table(file_name: &str, turns: &[TurnCost]) -> String {
    let range = |calls: Calls| {
        if calls.best == calls.worst { calls.best.to_string() } else { format!("{}-{}", calls.best, calls.worst) }
    };
    let rows: Vec<[String; 9]> = turns
        .iter()
        .map(|turn| {
            let place = match &turn.start {
                Start::Step(step) => format!("{}.{step}", turn.flow),
                Start::Entry => format!("{} (entered)", turn.flow),
                Start::Run => format!("{} (workflow run)", turn.flow),
            };
            [
                place,
                range(turn.understand),
                range(turn.reply),
                range(turn.post_signals),
                if turn.in_loops { format!("{} per item", range(turn.model_steps)) } else { range(turn.model_steps) },
                range(turn.calls),
                turn.understand_tokens.to_string(),
                turn.reply_tokens.to_string(),
                turn.worst_tokens.to_string(),
            ]
        })
        .collect();
    let header =
        ["turn at", "understand", "reply", "post", "ask_model", "calls", "~tok/understand", "~tok/reply", "~tok worst"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut text = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            // Names left, figures right.
            if index == 0 {
                text.push_str(&format!("{cell:<width$}"));
            } else {
                text.push_str(&format!("  {cell:>width$}"));
            }
        }
        text.trim_end().to_string() + "\n"
    };
    let mut text = format!(
        "{file_name}: model calls per turn (best-worst) and prompt tokens (~{BYTES_PER_TOKEN} bytes a token, \
         without the message, history and data)\n"
    );
    text.push_str(&line(&header.map(String::from)));
    if rows.is_empty() {
        text.push_str("(no flows)\n");
    }
    for row in &rows {
        text.push_str(&line(row));
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_tool_with_an_env_gets_a_note() {
        let file = crate::source::SourceFile::new(
            "t.flow",
            "tool a() { exec \"true\"\n env API_TOKEN, REGION }\ntool b() { exec \"true\" }\n\
             flow f { step s { say \"hi\" } }",
        );
        let program = crate::pipeline::compile(&file).ir;
        assert_eq!(
            super::env_notes("t.flow", &program),
            ["note: t.flow: tool `a` is given `API_TOKEN`, `REGION` from flowc's environment (its `env`)"]
        );
    }
}
