//! The compile pipeline for one source file: front end, lowering and the
//! static checks, with every diagnostic gathered and sorted. `flowc compile`,
//! `check`, `graph` and `run` all start here, so they agree on what a valid
//! program is.

use crate::diag::{Diagnostic, sort_diagnostics};
use crate::ir::{self, Program};
use crate::source::SourceFile;
use crate::syntax::{self, ast};

/// Everything known about one program after compiling it.
pub struct Compilation {
    pub ast: ast::Program,
    pub ir: Program,
    /// Sorted by position; errors and warnings together.
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses and lowers a program, then runs the static checks on it.
pub fn compile(file: &SourceFile) -> Compilation {
    let (ast, mut diagnostics) = syntax::parse(file);
    let (ir, lowering_diagnostics) = ir::lower::lower(&ast);
    diagnostics.extend(lowering_diagnostics);
    diagnostics.extend(crate::check::check(&ast, &ir));
    sort_diagnostics(&mut diagnostics);
    Compilation { ast, ir, diagnostics }
}
