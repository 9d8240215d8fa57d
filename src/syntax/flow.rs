//! The `.flow` front end: pest pairs of grammar/flow.pest into the AST.

use super::ast::Program;
use crate::diag::Diagnostic;
use crate::source::SourceFile;

/// Parses a `.flow` program.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let _ = file;
    todo!("the .flow front end")
}
