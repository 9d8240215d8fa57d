//! `flowc graph FILE`: the picture of a program as Mermaid (default) or DOT,
//! on stdout or in a file. A program with errors still draws what lowering
//! could resolve; its diagnostics go to stderr and the exit code is 1.

use super::load::compile_file;
use super::{Outcome, print_stdout};
use crate::graph::{Format, draw as render, draw_covered as render_covered};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// The program (.flow, .yaml or .yml)
    pub file: PathBuf,
    /// Draw only this flow (edges to other flows end at a stub node)
    #[arg(long, value_name = "ID")]
    pub flow: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Mermaid)]
    pub format: Format,
    /// Write the graph to this file instead of stdout
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Colour what tests reached, from `flowc test --coverage-out FILE`
    #[arg(long, value_name = "FILE")]
    pub coverage: Option<PathBuf>,
}

/// The `--format` values: the library's formats, named for the command line.
impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[Format::Mermaid, Format::Dot]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(match self {
            Format::Mermaid => clap::builder::PossibleValue::new("mermaid")
                .help("A Mermaid flowchart (renders in Markdown on common code hosts)"),
            Format::Dot => clap::builder::PossibleValue::new("dot").help("Graphviz DOT (`dot -Tsvg`)"),
        })
    }
}

pub fn run(args: &GraphArgs) -> Outcome {
    let compilation = match compile_file(&args.file) {
        Ok(compilation) => compilation,
        Err(outcome) => return outcome,
    };
    let only = match &args.flow {
        None => None,
        Some(name) => match compilation.ir.flow_by_name(name) {
            Some(flow) => Some(flow),
            None => {
                let names: Vec<&str> = compilation.ir.flows.iter().map(|flow| flow.name.as_str()).collect();
                eprintln!("error: `{name}` names no flow of `{}`", crate::cli::load::display_path(&args.file));
                if !names.is_empty() {
                    eprintln!("  the flows are: {}", names.join(", "));
                }
                return Outcome::Error;
            }
        },
    };
    let text = match &args.coverage {
        None => render(&compilation.ir, only, args.format),
        Some(path) => match super::test::coverage_for(path, &args.file) {
            Ok(covered) => render_covered(&compilation.ir, only, args.format, &covered),
            Err(message) => {
                eprintln!("error: {message}");
                return Outcome::Error;
            }
        },
    };
    let written = match &args.output {
        None => print_stdout(&text),
        Some(path) => match std::fs::write(path, &text) {
            Ok(()) => Outcome::Success,
            Err(error) => {
                eprintln!("error: cannot write `{}`: {error}", path.display());
                Outcome::Error
            }
        },
    };
    if compilation.has_errors() { written.worst(Outcome::Failure) } else { written }
}
