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
///
/// Each flow is built as soon as its text has been read, and its part of
/// the tree dropped, so the tree never holds more than one flow body.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let mut taken = Vec::new();
    // Kept apart until the whole document has been read: a YAML error
    // further down discards them along with the flows.
    let mut flow_diagnostics = Vec::new();
    let mut build_flow = |tree: &tree::Tree<'_>, key, value| {
        taken.push(build::flow_body(tree, key, value, &mut flow_diagnostics));
        u32::try_from(taken.len() - 1).unwrap_or(u32::MAX)
    };
    let program = match tree::read(&file.text, &mut diagnostics, Some(&mut build_flow)) {
        Some(tree) => {
            diagnostics.append(&mut flow_diagnostics);
            build::build(&tree, taken, &mut diagnostics)
        }
        None => Program::default(),
    };
    (program, diagnostics)
}

#[cfg(test)]
mod tests;
