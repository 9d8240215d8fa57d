//! A compiled program's picture in one format, as `flowc graph` prints it:
//! what can never run worked out once ([`crate::check::reachability`]),
//! the graph built from the IR, and the format's emitter.

use super::coverage::{Covered, Overlay};
use crate::check::reachability;
use crate::ir::{FlowId, Program};

/// The text formats a graph is drawn in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A Mermaid flowchart (renders in Markdown on common code hosts).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

/// The picture of `program` (of the flow `only`, when given: edges to other
/// flows end at a stub node) in `format`.
pub fn draw(program: &Program, only: Option<FlowId>, format: Format) -> String {
    let reachability = reachability::analyze(program);
    let graph = super::build(program, &reachability, only);
    match format {
        Format::Mermaid => super::mermaid::render(&graph),
        Format::Dot => super::dot::render(&graph),
    }
}

/// [`draw`] with what tests reached (`covered`) laid on it.
pub fn draw_covered(program: &Program, only: Option<FlowId>, format: Format, covered: &Covered) -> String {
    let reachability = reachability::analyze(program);
    let graph = super::build(program, &reachability, only);
    let overlay = Overlay::new(program, &graph, covered);
    match format {
        Format::Mermaid => super::mermaid::render_with_coverage(&graph, &overlay),
        Format::Dot => super::dot::render_with_coverage(&graph, &overlay),
    }
}
