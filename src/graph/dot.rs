//! The graph as Graphviz DOT, with the same nodes, edges and labels as the
//! Mermaid output: one `cluster_` subgraph per flow, shapes by node kind,
//! dashed lines and the `unreachable` class for what never runs (the class
//! shows up in Graphviz's SVG output).
//!
//! Ids are the generated [`NodeId`](super::NodeId)s; every label is a
//! double-quoted DOT string with `"` and `\` escaped (a bare backslash
//! would start one of Graphviz's label escapes such as `\N`).

use super::{Edge, EdgeKind, Graph, Node, NodeKind};
use std::fmt::Write as _;

/// Renders a graph as a DOT `digraph`.
pub fn render(graph: &Graph) -> String {
    render_with(graph, None)
}

/// [`render`] with coverage laid on it (`flowc graph --coverage`): nodes
/// and edges the tests reached green, the rest red and dashed.
pub(crate) fn render_with_coverage(graph: &Graph, overlay: &super::coverage::Overlay) -> String {
    render_with(graph, Some(overlay))
}

fn render_with(graph: &Graph, overlay: Option<&super::coverage::Overlay>) -> String {
    let mut out = String::from("digraph flowc {\n");
    out.push_str("  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=12];\n");
    out.push_str("  node [fontname=\"Helvetica\", fontsize=11, style=filled, fillcolor=\"#ffffff\"];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=10];\n");
    for cluster in &graph.clusters {
        let _ = writeln!(out, "  subgraph cluster_{} {{", cluster.id);
        let _ = writeln!(out, "    label=\"{}\";", escape(&cluster.title));
        out.push_str("    style=rounded;\n    color=\"#999999\";\n");
        for node in graph.nodes_in(cluster.flow) {
            let _ = writeln!(out, "    {}", node_text(node));
        }
        out.push_str("  }\n");
    }
    for node in graph.free_nodes() {
        let _ = writeln!(out, "  {}", node_text(node));
    }
    for (index, edge) in graph.edges.iter().enumerate() {
        let mut text = edge_text(edge);
        if let Some(overlay) = overlay {
            text = with_coverage(text, overlay.edges.get(index).copied().unwrap_or(false));
        }
        let _ = writeln!(out, "  {text}");
    }
    if let Some(overlay) = overlay {
        // A node named again takes the new attributes and stays in its cluster.
        for node in graph.nodes.iter().filter(|node| super::coverage::Overlay::counts(node.kind)) {
            let (fill, color, style) = if overlay.nodes.contains(&node.id) {
                ("#d9f2d9", "#2a7a2a", "filled")
            } else {
                ("#fbe3e3", "#bb3333", "filled,dashed")
            };
            let _ =
                writeln!(out, "  {} [fillcolor=\"{fill}\", color=\"{color}\", style=\"{style}\"];", node.id.as_str());
        }
    }
    out.push_str("}\n");
    out
}

/// Shape, extra style and fill of each kind.
fn appearance(kind: NodeKind) -> (&'static str, &'static str, &'static str) {
    match kind {
        NodeKind::Message | NodeKind::Run => ("oval", "", "#eeeeff"),
        NodeKind::Entry => ("circle", "", "#333333"),
        NodeKind::Ask => ("box", "", "#ffffff"),
        NodeKind::Say => ("box", "rounded", "#f5f5ff"),
        NodeKind::Auto => ("component", "", "#f3f3f3"),
        NodeKind::Wait => ("hexagon", "", "#fff8e0"),
        NodeKind::Model => ("parallelogram", "", "#f0e8ff"),
        NodeKind::Complete => ("oval", "", "#e6f6e6"),
        NodeKind::Abort => ("octagon", "", "#fde8e8"),
        NodeKind::Signal => ("cds", "", "#fff3d6"),
        NodeKind::FlowStub => ("folder", "", "#fafafa"),
    }
}

fn node_text(node: &Node) -> String {
    let label = node.lines.iter().map(|line| escape(line)).collect::<Vec<_>>().join("\\n");
    let (shape, extra_style, fill) = appearance(node.kind);
    let mut styles = vec!["filled"];
    if !extra_style.is_empty() {
        styles.push(extra_style);
    }
    let mut class = node.kind.class().to_string();
    let mut attributes = format!("label=\"{label}\", shape={shape}, fillcolor=\"{fill}\"");
    if node.kind == NodeKind::Complete {
        // A double outline marks the end, as a final state is drawn.
        attributes.push_str(", peripheries=2");
    }
    if node.kind == NodeKind::Entry {
        attributes.push_str(", fontcolor=\"#ffffff\", width=0.6, fixedsize=true");
    }
    if node.unreachable {
        styles.push("dashed");
        class.push_str(" unreachable");
        attributes.push_str(", color=\"#999999\", fontcolor=\"#999999\"");
    }
    let _ = write!(attributes, ", style=\"{}\", class=\"{class}\"", styles.join(","));
    format!("{} [{attributes}];", node.id.as_str())
}

fn edge_text(edge: &Edge) -> String {
    let mut attributes = Vec::new();
    if let Some(label) = &edge.label {
        attributes.push(format!("label=\"{}\"", escape(label)));
    }
    if edge.unreachable {
        attributes.push("style=dashed".to_string());
        attributes.push("color=\"#999999\"".to_string());
        attributes.push("fontcolor=\"#999999\"".to_string());
        attributes.push("class=\"unreachable\"".to_string());
    } else if edge.kind == EdgeKind::OnError {
        attributes.push("style=dashed".to_string());
        attributes.push("color=\"#cc3333\"".to_string());
        attributes.push("fontcolor=\"#cc3333\"".to_string());
        attributes.push("class=\"on_error\"".to_string());
    } else if edge.cross_flow || edge.kind == EdgeKind::Signal {
        attributes.push("penwidth=2".to_string());
    }
    if attributes.is_empty() {
        format!("{} -> {};", edge.from.as_str(), edge.to.as_str())
    } else {
        format!("{} -> {} [{}];", edge.from.as_str(), edge.to.as_str(), attributes.join(", "))
    }
}

/// An edge statement coloured by whether the tests took it.
fn with_coverage(text: String, taken: bool) -> String {
    let attributes = if taken { "color=\"#2a7a2a\", penwidth=2" } else { "color=\"#cc3333\", style=dashed" };
    match text.strip_suffix("];") {
        Some(open) => format!("{open}, {attributes}];"),
        None => format!("{} [{attributes}];", text.trim_end_matches(';')),
    }
}

/// Text for inside a double-quoted DOT string: `"` and `\` escaped, line
/// breaks as `\n`, other control characters as spaces. Everything else,
/// unicode included, is valid as is (DOT files are UTF-8).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            control if control.is_control() => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_backslashes_are_escaped() {
        assert_eq!(escape("say \"hi\" \\N"), "say \\\"hi\\\" \\\\N");
        assert_eq!(escape("a\nb\r"), "a\\nb ");
        assert_eq!(escape("<end> {x} é"), "<end> {x} é");
    }

    proptest::proptest! {
        /// Whatever the text, every `"` in the escaped form is escaped and
        /// no line break is left, so the DOT string cannot end early.
        #[test]
        fn escaped_text_stays_inside_its_quotes(text in "\\PC*|[\"\\\\\n\r a-z]*") {
            let escaped = escape(&text);
            proptest::prop_assert!(!escaped.contains('\n') && !escaped.contains('\r'));
            let mut characters = escaped.chars();
            while let Some(character) = characters.next() {
                match character {
                    '\\' => {
                        let next = characters.next();
                        proptest::prop_assert!(matches!(next, Some('"' | '\\' | 'n')), "{escaped:?}");
                    }
                    '"' => proptest::prop_assert!(false, "bare quote in {escaped:?}"),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn unreachable_nodes_and_edges_are_dashed_with_a_class() {
        use super::super::{Node, NodeId};
        let graph = Graph {
            clusters: Vec::new(),
            nodes: vec![Node {
                id: NodeId("f0_s1".to_string()),
                kind: NodeKind::Say,
                flow: None,
                lines: vec!["said".to_string(), "say".to_string()],
                unreachable: true,
            }],
            edges: vec![Edge {
                from: NodeId("f0_s0".to_string()),
                to: NodeId("f0_s1".to_string()),
                kind: EdgeKind::Linear,
                label: None,
                unreachable: true,
                cross_flow: false,
            }],
        };
        let text = render(&graph);
        assert!(text.contains("label=\"said\\nsay\""), "{text}");
        assert!(text.contains("style=\"filled,rounded,dashed\", class=\"say unreachable\""), "{text}");
        assert!(
            text.contains(
                "f0_s0 -> f0_s1 [style=dashed, color=\"#999999\", fontcolor=\"#999999\", class=\"unreachable\"];"
            ),
            "{text}"
        );
    }
}
