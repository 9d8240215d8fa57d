//! The compile pipeline for one source file: front end, lowering and the
//! static checks, with every diagnostic gathered and sorted. `flowc compile`,
//! `check`, `graph` and `run` all start here, so they agree on what a valid
//! program is.

use crate::diag::{Code, Diagnostic, sort_diagnostics};
use crate::ir::{self, Program};
use crate::source::{SourceFile, Span};
use crate::syntax::{self, ast};
use std::collections::HashSet;

/// Everything known about one program after compiling it.
pub struct Compilation {
    /// The syntax tree, when asked for with [`compile_keeping_ast`]:
    /// lowering consumes it otherwise.
    pub ast: Option<ast::Program>,
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
    let (ast, diagnostics) = syntax::parse(file);
    from_ast(ast, diagnostics)
}

/// [`compile`], keeping a copy of the syntax tree (`flowc compile --emit
/// ast`): the copy costs the memory that consuming the AST saves.
pub fn compile_keeping_ast(file: &SourceFile) -> Compilation {
    let (ast, diagnostics) = syntax::parse(file);
    let kept = ast.clone();
    Compilation { ast: Some(kept), ..from_ast(ast, diagnostics) }
}

fn from_ast(ast: ast::Program, mut diagnostics: Vec<Diagnostic>) -> Compilation {
    let damaged = damaged_flows(&ast, &diagnostics);
    diagnostics.extend(crate::check::check_ast(&ast));
    let (mut ir, lowering_diagnostics) = ir::lower::lower(ast);
    for flow in &mut ir.flows {
        flow.incomplete |= damaged.contains(&flow.span);
    }
    diagnostics.extend(lowering_diagnostics);
    diagnostics.extend(crate::check::check(&ir));
    sort_diagnostics(&mut diagnostics);
    Compilation { ast: None, ir, diagnostics }
}

/// The flows inside which the front end could not read something (a syntax
/// error, an unknown key), by the span of their name, which their IR flows
/// keep: the part it skipped may have held the edge or the `collect` that
/// the flow-sensitive checks would otherwise miss, so they are marked
/// [`ir::Flow::incomplete`].
fn damaged_flows(ast: &ast::Program, front_end: &[Diagnostic]) -> HashSet<Span> {
    let mut damaged: Vec<u32> = front_end
        .iter()
        .filter(|diagnostic| matches!(diagnostic.code, Code::Syntax | Code::UnknownKey))
        .filter_map(Diagnostic::primary_span)
        .map(|span| span.start)
        .collect();
    if damaged.is_empty() {
        return HashSet::new();
    }
    damaged.sort_unstable();
    ast.flows
        .iter()
        .filter(|flow_decl| {
            let first_at_or_after = damaged.partition_point(|offset| *offset < flow_decl.span.start);
            damaged.get(first_at_or_after).is_some_and(|offset| *offset < flow_decl.span.end)
        })
        .map(|flow_decl| flow_decl.name.span)
        .collect()
}
