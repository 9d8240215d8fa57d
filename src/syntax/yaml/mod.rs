//! The YAML front end.

use super::ast::Program;
use crate::diag::Diagnostic;
use crate::source::SourceFile;

/// Parses a YAML program.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let _ = file;
    todo!("the YAML front end")
}
