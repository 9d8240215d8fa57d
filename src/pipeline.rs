//! The compile pipeline for one source file: front end, lowering and the
//! static checks, with every diagnostic gathered and sorted. `flowc compile`,
//! `check`, `graph` and `run` all start here, so they agree on what a valid
//! program is. It does no I/O: the caller reads the file.
#![warn(missing_docs)]

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
    /// The lowered program; with errors, what lowering could resolve.
    pub ir: Program,
    /// Sorted by position; errors and warnings together.
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    /// Whether any diagnostic is an error (warnings alone compile).
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

/// The lowering stage alone: a syntax tree into the IR and the problems
/// lowering found, without the static checks. For an embedder that holds an
/// AST, and the front-end benchmark that times each stage.
pub fn lower(ast: ast::Program) -> (Program, Vec<Diagnostic>) {
    ir::lower::lower(ast)
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

#[cfg(test)]
mod tests {
    use super::compile;
    use crate::source::SourceFile;

    fn codes(name: &str, text: &str) -> Vec<&'static str> {
        compile(&SourceFile::new(name, text)).diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect()
    }

    #[test]
    fn a_flow_the_front_end_could_not_read_whole_gets_no_flow_sensitive_findings() {
        // The misspelt `nxt` is what made `c` reachable: without the flow
        // marked incomplete, `c` would be reported unreachable as well.
        let damaged = "flows:\n  f:\n    when: w\n    steps:\n      - id: a\n        say: a\n        nxt: c\n      - id: b\n        say: b\n        next: end\n      - id: c\n        say: c\n";
        assert_eq!(codes("t.yaml", damaged), ["unknown_key"]);
        let intact = damaged.replace("        nxt: c\n", "");
        assert_eq!(codes("t.yaml", &intact), ["unreachable_step"]);
    }

    #[test]
    fn keeping_the_ast_changes_no_finding() {
        let text = r#"schema { a: string  b: string }
            flow f { when "w"  requires b
                step s { collect a }
                step t { finalize { emit { halt } }  say "t {{a}}" } }
            flow g { when "v"
                step u { collect a  next nowhere } }"#;
        let file = SourceFile::new("t.flow", text);
        let kept = super::compile_keeping_ast(&file);
        assert!(kept.ast.as_ref().is_some_and(|ast| ast.flows.len() == 2));
        let consumed = compile(&file);
        assert_eq!(kept.diagnostics, consumed.diagnostics);
        let codes: Vec<&str> = consumed.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
        assert_eq!(codes, ["uncollected_required", "dropped_field", "unknown_target"]);
    }
}
