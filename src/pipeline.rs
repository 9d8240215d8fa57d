//! The compile pipeline for one source file: front end, lowering and the
//! static checks, with every diagnostic gathered and sorted. `flowc compile`,
//! `check`, `graph` and `run` all start here, so they agree on what a valid
//! program is.

use crate::diag::{Code, Diagnostic, sort_diagnostics};
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
    let (mut ir, lowering_diagnostics) = ir::lower::lower(&ast);
    mark_damaged_flows(&ast, &mut ir, &diagnostics);
    diagnostics.extend(lowering_diagnostics);
    diagnostics.extend(crate::check::check(&ast, &ir));
    sort_diagnostics(&mut diagnostics);
    Compilation { ast, ir, diagnostics }
}

/// Marks [`ir::Flow::incomplete`] the flows inside which the front end
/// could not read something (a syntax error, an unknown key): the part it
/// skipped may have held the edge or the `collect` that the flow-sensitive
/// checks would otherwise miss.
fn mark_damaged_flows(ast: &ast::Program, ir: &mut Program, front_end: &[Diagnostic]) {
    let mut damaged: Vec<u32> = front_end
        .iter()
        .filter(|diagnostic| matches!(diagnostic.code, Code::Syntax | Code::UnknownKey))
        .filter_map(Diagnostic::primary_span)
        .map(|span| span.start)
        .collect();
    if damaged.is_empty() {
        return;
    }
    damaged.sort_unstable();
    // IR flows keep the span of their declaration's name.
    let by_name_span: std::collections::HashMap<crate::source::Span, usize> =
        ir.flows.iter().enumerate().map(|(index, flow)| (flow.span, index)).collect();
    for flow_decl in &ast.flows {
        let first_at_or_after = damaged.partition_point(|offset| *offset < flow_decl.span.start);
        let inside = damaged.get(first_at_or_after).is_some_and(|offset| *offset < flow_decl.span.end);
        if let Some(flow) =
            by_name_span.get(&flow_decl.name.span).filter(|_| inside).and_then(|index| ir.flows.get_mut(*index))
        {
            flow.incomplete = true;
        }
    }
}
