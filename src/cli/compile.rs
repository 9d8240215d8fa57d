//! `flowc compile FILE`: the IR (or AST) of one program as JSON on stdout,
//! or its diagnostics on stderr and exit 1 when it has errors.

use super::load::compile_file_with;
use super::{Outcome, write_stdout};
use crate::source::write_json;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The program (.flow, .yaml or .yml)
    pub file: PathBuf,
    /// What to print
    #[arg(long, value_enum, default_value_t = Emit::Json)]
    pub emit: Emit,
    /// Include source spans (byte offsets) in the output
    #[arg(long)]
    pub spans: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// The resolved, typed IR
    Json,
    /// The syntax tree as parsed, before resolution
    Ast,
}

pub fn run(args: &CompileArgs) -> Outcome {
    let compile = match args.emit {
        Emit::Json => crate::pipeline::compile,
        Emit::Ast => crate::pipeline::compile_keeping_ast,
    };
    let compilation = match compile_file_with(&args.file, compile) {
        Ok(compilation) => compilation,
        Err(outcome) => return outcome,
    };
    if compilation.has_errors() {
        return Outcome::Failure;
    }
    write_stdout(|out| {
        match args.emit {
            Emit::Json => write_json(&compilation.ir, args.spans, true, &mut *out)?,
            Emit::Ast => write_json(&compilation.ast, args.spans, true, &mut *out)?,
        }
        out.write_all(b"\n")
    })
}
