//! The graph as a Mermaid flowchart.
//!
//! Mermaid's grammar has many keywords (`end`, `graph`, `subgraph`,
//! `class`, `style`, `default` …) and shape brackets that bare text would
//! collide with, so the output never uses user text as syntax: node ids are
//! the generated [`NodeId`](super::NodeId)s, and every label is a quoted
//! string in which the characters Mermaid gives a meaning are written as
//! its entity codes (`#quot;`, `#35;` …). `escape` holds the list.

use super::{Edge, EdgeKind, Graph, Node, NodeKind};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Renders a graph as Mermaid flowchart text.
pub fn render(graph: &Graph) -> String {
    let mut out = String::from("flowchart TD\n");
    for cluster in &graph.clusters {
        let _ = writeln!(out, "  subgraph {} [\"{}\"]", cluster.id, escape(&cluster.title));
        for node in graph.nodes_in(cluster.flow) {
            let _ = writeln!(out, "    {}", node_text(node));
        }
        out.push_str("  end\n");
    }
    for node in graph.free_nodes() {
        let _ = writeln!(out, "  {}", node_text(node));
    }
    for edge in &graph.edges {
        let _ = writeln!(out, "  {}", edge_text(edge));
    }
    write_classes(graph, &mut out);
    out
}

fn node_text(node: &Node) -> String {
    let label = node.lines.iter().map(|line| escape(line)).collect::<Vec<_>>().join("<br>");
    let (open, close) = shape(node.kind);
    format!("{}{open}\"{label}\"{close}", node.id.as_str())
}

/// The brackets of each kind's shape.
fn shape(kind: NodeKind) -> (&'static str, &'static str) {
    match kind {
        NodeKind::Message | NodeKind::Run => ("([", "])"),
        NodeKind::Entry => ("((", "))"),
        NodeKind::Ask => ("[", "]"),
        NodeKind::Say => ("(", ")"),
        NodeKind::Auto => ("[[", "]]"),
        NodeKind::Wait => ("{{", "}}"),
        NodeKind::Model => ("[\\", "\\]"),
        NodeKind::Complete => ("(((", ")))"),
        NodeKind::Abort => ("[/", "\\]"),
        NodeKind::Signal => (">", "]"),
        NodeKind::FlowStub => ("[/", "/]"),
    }
}

fn edge_text(edge: &Edge) -> String {
    // Dotted for edges that are never taken (grey: a defect) and for the
    // way out of a failure (red, by `linkStyle`), so a dotted line is never
    // the ordinary path; thick for edges that leave the flow.
    let arrow = if edge.unreachable || edge.kind == EdgeKind::OnError {
        "-.->"
    } else if edge.cross_flow || edge.kind == EdgeKind::Signal {
        "==>"
    } else {
        "-->"
    };
    match &edge.label {
        Some(label) => format!("{} {arrow}|\"{}\"| {}", edge.from.as_str(), escape(label), edge.to.as_str()),
        None => format!("{} {arrow} {}", edge.from.as_str(), edge.to.as_str()),
    }
}

/// Style per node kind. No value ends in `;`: Mermaid rewrites `…#fff;`
/// in `classDef` lines, so colours are followed by a comma or nothing.
fn class_style(class: &str) -> &'static str {
    match class {
        "message" | "run" => "fill:#eef,stroke:#446",
        "entry" => "fill:#333,stroke:#333,color:#fff",
        "ask" => "fill:#fff,stroke:#333",
        "say" => "fill:#f5f5ff,stroke:#558",
        "auto" => "fill:#f3f3f3,stroke:#555",
        "wait" => "fill:#fff8e0,stroke:#a80",
        "model" => "fill:#f0e8ff,stroke:#639",
        "complete" => "fill:#e6f6e6,stroke:#393",
        "abort" => "fill:#fde8e8,stroke:#b33",
        "signal" => "fill:#fff3d6,stroke:#c80",
        "stub" => "fill:#fafafa,stroke:#888",
        "unreachable" => "stroke-dasharray:5 5,stroke:#999,color:#999",
        _ => "",
    }
}

fn write_classes(graph: &Graph, out: &mut String) {
    // One `class` line per class, classes sorted by name and ids in node
    // order, so the output is stable; `unreachable` comes last so its
    // style wins over the kind's.
    let mut by_class: BTreeMap<(u8, &str), Vec<&str>> = BTreeMap::new();
    for node in &graph.nodes {
        by_class.entry((0, node.kind.class())).or_default().push(node.id.as_str());
        if node.unreachable {
            by_class.entry((1, "unreachable")).or_default().push(node.id.as_str());
        }
    }
    for ((_, class), ids) in &by_class {
        let _ = writeln!(out, "  classDef {class} {}", class_style(class));
        let _ = writeln!(out, "  class {} {class}", ids.join(","));
    }
    let dotted: Vec<String> = graph
        .edges
        .iter()
        .enumerate()
        .filter(|(_, edge)| edge.unreachable)
        .map(|(index, _)| index.to_string())
        .collect();
    if !dotted.is_empty() {
        let _ = writeln!(out, "  linkStyle {} stroke:#999,color:#999", dotted.join(","));
    }
    let failures: Vec<String> = graph
        .edges
        .iter()
        .enumerate()
        .filter(|(_, edge)| edge.kind == EdgeKind::OnError && !edge.unreachable)
        .map(|(index, _)| index.to_string())
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "  linkStyle {} stroke:#c33,color:#c33", failures.join(","));
    }
}

/// Text for inside a quoted Mermaid string. Quotes end the string; `#…;`
/// is an entity; `<`, `>` and `&` are HTML; a backtick starts a Markdown
/// string; `|` closes an edge label; `:` and `;` would let Mermaid's
/// `style`/`classDef` rewriting reach into a label; `$$` starts KaTeX and
/// a backslash escapes in Markdown. Each becomes a numeric entity (and two
/// dollars in a row are kept apart). A line break becomes `<br>`, other
/// control characters a space.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut previous = None;
    for character in text.chars() {
        // Entities are decoded before Mermaid looks for `$$…$$` (KaTeX), so
        // an entity alone does not keep two dollars from starting math: a
        // zero-width space between them does, and shows nothing.
        if character == '$' && previous == Some('$') {
            out.push('\u{200B}');
        }
        previous = Some(character);
        match character {
            '"' => out.push_str("#quot;"),
            '#' | '&' | '<' | '>' | '|' | ';' | ':' | '`' | '\\' | '$' => {
                let _ = write!(out, "#{};", u32::from(character));
            }
            '\n' => out.push_str("<br>"),
            control if control.is_control() => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

/// [`render`] with coverage laid on it (`flowc graph --coverage`): nodes
/// and edges the tests reached green, the rest red and dashed. The lines
/// come after the drawing's own, so their styles win.
pub(crate) fn render_with_coverage(graph: &Graph, overlay: &super::coverage::Overlay) -> String {
    let mut out = render(graph);
    let (mut reached, mut missed) = (Vec::new(), Vec::new());
    for node in graph.nodes.iter().filter(|node| super::coverage::Overlay::counts(node.kind)) {
        let list = if overlay.nodes.contains(&node.id) { &mut reached } else { &mut missed };
        list.push(node.id.as_str());
    }
    out.push_str("  classDef covered fill:#d9f2d9,stroke:#2a7a2a,stroke-width:2px\n");
    out.push_str("  classDef uncovered fill:#fbe3e3,stroke:#b33,stroke-dasharray:4 3\n");
    for (class, ids) in [("covered", &reached), ("uncovered", &missed)] {
        if !ids.is_empty() {
            let _ = writeln!(out, "  class {} {class}", ids.join(","));
        }
    }
    let indices = |taken: bool| -> Vec<String> {
        overlay
            .edges
            .iter()
            .enumerate()
            .filter(|(_, edge)| **edge == taken)
            .map(|(index, _)| index.to_string())
            .collect()
    };
    let taken = indices(true);
    if !taken.is_empty() {
        let _ = writeln!(out, "  linkStyle {} stroke:#2a7a2a,stroke-width:2px", taken.join(","));
    }
    let not_taken = indices(false);
    if !not_taken.is_empty() {
        let _ = writeln!(out, "  linkStyle {} stroke:#c33,stroke-dasharray:3 3", not_taken.join(","));
    }
    out
}

/// Marks a step as where a conversation stands (the REPL's `/graph`).
pub(crate) fn mark_current(out: &mut String, flow: crate::ir::FlowId, step: crate::ir::StepId) {
    let _ = writeln!(out, "  classDef current stroke:#d97706,stroke-width:4px");
    let _ = writeln!(out, "  class {} current", super::NodeId::step(flow, step).as_str());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_cannot_break_out_of_a_label() {
        assert_eq!(escape("a \"b\" #1"), "a #quot;b#quot; #35;1");
        assert_eq!(escape("x|y;z:w"), "x#124;y#59;z#58;w");
        assert_eq!(escape("<b>&`"), "#60;b#62;#38;#96;");
        assert_eq!(escape("one\ntwo\tthree"), "one<br>two three");
        assert_eq!(escape("end é 🚀 [x]"), "end é 🚀 [x]");
        assert_eq!(escape("$$k$$"), "#36;\u{200B}#36;k#36;\u{200B}#36;");
    }

    /// The escaped text without its `<br>`s and entities; `None` when a
    /// `#` does not start a well-formed entity (`#quot;` or `#` digits `;`).
    fn literal_characters(escaped: &str) -> Option<String> {
        let mut literal = String::new();
        let mut rest = escaped.replace("<br>", "");
        while let Some(hash) = rest.find('#') {
            literal.push_str(rest.get(..hash)?);
            let after = rest.get(hash + 1..)?;
            let (entity, tail) = after.split_once(';')?;
            let well_formed = entity == "quot" || (!entity.is_empty() && entity.chars().all(|c| c.is_ascii_digit()));
            if !well_formed {
                return None;
            }
            rest = tail.to_string();
        }
        literal.push_str(&rest);
        Some(literal)
    }

    proptest::proptest! {
        /// Whatever the text, the escaped form holds no character that
        /// could end the quoted string or the line, or mean something to
        /// Mermaid, and every `#` starts an entity.
        #[test]
        fn escaped_text_stays_inside_its_quotes(text in "\\PC*|[\"#&<>|;:`$\\\\\n\r\t a-z]*") {
            let escaped = escape(&text);
            let literal = literal_characters(&escaped);
            proptest::prop_assert!(literal.is_some(), "stray # in {escaped:?}");
            let literal = literal.unwrap_or_default();
            for forbidden in ['"', '\n', '\r', '|', ';', ':', '`', '<', '>', '&', '\\', '$'] {
                proptest::prop_assert!(!literal.contains(forbidden), "{forbidden:?} in {escaped:?}");
            }
        }
    }

    fn two_step_graph(unreachable: bool) -> Graph {
        use super::super::{Cluster, Node, NodeId};
        use crate::ir::FlowId;
        let node = |id: &str, kind, unreachable| Node {
            id: NodeId(id.to_string()),
            kind,
            flow: Some(FlowId(0)),
            lines: vec![id.to_string()],
            unreachable,
        };
        Graph {
            clusters: vec![Cluster { flow: FlowId(0), id: "f0".to_string(), title: "end".to_string() }],
            nodes: vec![node("f0_s0", NodeKind::Ask, false), node("f0_s1", NodeKind::Say, unreachable)],
            edges: vec![Edge {
                from: NodeId("f0_s0".to_string()),
                to: NodeId("f0_s1".to_string()),
                kind: EdgeKind::Branch,
                label: Some("x | y".to_string()),
                unreachable,
                cross_flow: false,
            }],
        }
    }

    #[test]
    fn unreachable_nodes_and_edges_are_dashed_with_a_class() {
        let text = render(&two_step_graph(true));
        assert!(text.contains("  f0_s0 -.->|\"x #124; y\"| f0_s1\n"), "{text}");
        assert!(text.contains("  class f0_s1 unreachable\n"), "{text}");
        assert!(text.contains("  linkStyle 0 stroke:#999,color:#999\n"), "{text}");
        let live = render(&two_step_graph(false));
        assert!(live.contains("  f0_s0 -->|\"x #124; y\"| f0_s1\n"), "{live}");
        assert!(!live.contains("unreachable") && !live.contains("linkStyle"), "{live}");
    }
}
