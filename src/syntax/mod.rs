//! The front ends: `.flow` (pest) and YAML (saphyr events) into one
//! [`ast::Program`], with every name, value and expression carrying its span.
//! Neither stops at the first problem: each returns the program it could
//! read together with every diagnostic it found.

#![warn(missing_docs)]

pub mod ast;
pub(crate) mod compact;
pub(crate) mod error;
pub(crate) mod expr;
pub(crate) mod flow;
pub(crate) mod grammar;
pub(crate) mod yaml;

use crate::diag::Diagnostic;
use crate::source::{SourceFile, SourceKind};

/// Reads one program with the front end its file name selects.
pub fn parse(file: &SourceFile) -> (ast::Program, Vec<Diagnostic>) {
    if is_blank(file) {
        return (ast::Program::default(), vec![error::SyntaxError::EmptyProgram.into()]);
    }
    match file.kind() {
        SourceKind::Flow => flow::parse(file),
        SourceKind::Yaml => yaml::parse(file),
    }
}

/// Below this size a program is parsed on one thread.
pub(crate) const PARALLEL_THRESHOLD: usize = 128 * 1024;

/// Stack for parser threads: pest and the AST builders recurse per bracket
/// level.
const PARSER_STACK: usize = 16 * 1024 * 1024;

fn parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(8)
}

/// Whether a file has nothing but white space and `#` comments (both
/// syntaxes use `#` for comments).
fn is_blank(file: &SourceFile) -> bool {
    file.text
        .lines()
        .map(str::trim)
        .all(|line| line.is_empty() || line.starts_with('#') || line == "---" || line == "...")
}
