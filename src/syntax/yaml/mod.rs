//! The YAML front end: [`tree`] reads the text into a span-carrying node
//! tree, [`values`] reads its leaves into AST values, and [`build`]
//! assembles the program from them.

mod build;
mod tree;
mod values;

use super::ast::Program;
use crate::diag::Diagnostic;
use crate::source::SourceFile;

/// Parses a YAML program. A document that cannot be read as YAML gives an
/// empty program and the one diagnostic saying why: past a YAML error the
/// structure is unknown, and guessing at it would only add false errors.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let program = match tree::read(&file.text, &mut diagnostics) {
        Some(tree) => build::build(&tree, &mut diagnostics),
        None => Program::default(),
    };
    (program, diagnostics)
}

#[cfg(test)]
mod tests;
