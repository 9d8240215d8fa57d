//! The static checks: passes over the IR (and the AST where a check needs
//! the source's shape), each family in its own module, each owning its
//! diagnostics. Lowering already reported what could not be resolved; these
//! passes prove the rest (reachability, definite assignment, auto cycles…).

pub mod reachability;

use crate::diag::Diagnostic;
use crate::ir::Program;
use crate::syntax::ast;

/// Runs every pass and returns what they found (unsorted).
pub fn check(ast: &ast::Program, program: &Program) -> Vec<Diagnostic> {
    let _ = (ast, program);
    Vec::new()
}
