//! The program's picture as JSON for the playground: the graph model of
//! [`crate::graph`] (the same nodes and edges `flowc graph` prints), with
//! each node's flow and step named so the page can find the step a turn
//! stands at, each kind spelled as the emitters' class names, and what the
//! page shows of the program beside it (agent, flows, a run's inputs).

use crate::check::reachability;
use crate::graph::{self, EdgeKind, NodeId};
use crate::ir::{FlowId, Program, StepId};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The graph of every flow of `program`, served under `name`.
pub fn graph_json(name: &str, program: &Program) -> Value {
    let reachability = reachability::analyze(program);
    let picture = graph::build(program, &reachability, None);
    // Node ids are generated from indices; the page speaks in the names a
    // turn reports (`flow`, `step`, `executed_steps`, events), so each step
    // node carries its name.
    let mut steps: HashMap<NodeId, &str> = HashMap::new();
    for (flow_index, flow) in program.flows.iter().enumerate() {
        for (step_index, step) in flow.steps.iter().enumerate() {
            steps.insert(NodeId::step(FlowId::from_index(flow_index), StepId::from_index(step_index)), &step.name);
        }
    }
    let flow_name =
        |flow: Option<FlowId>| flow.and_then(|id| program.flows.get(id.index())).map(|flow| flow.name.as_str());
    let clusters: Vec<Value> = picture
        .clusters
        .iter()
        .map(|cluster| {
            let flow = program.flows.get(cluster.flow.index());
            json!({
                "id": cluster.id,
                "flow": flow.map(|flow| flow.name.as_str()),
                "title": cluster.title,
                "workflow": flow.is_some_and(|flow| flow.workflow),
            })
        })
        .collect();
    let nodes: Vec<Value> = picture
        .nodes
        .iter()
        .map(|node| {
            json!({
                "id": node.id.as_str(),
                "kind": node.kind.class(),
                "flow": flow_name(node.flow),
                "step": steps.get(&node.id).copied(),
                "lines": node.lines,
                "unreachable": node.unreachable,
            })
        })
        .collect();
    let edges: Vec<Value> = picture
        .edges
        .iter()
        .map(|edge| {
            json!({
                "from": edge.from.as_str(),
                "to": edge.to.as_str(),
                "kind": edge_kind(edge.kind),
                "label": edge.label,
                "unreachable": edge.unreachable,
                "cross_flow": edge.cross_flow,
            })
        })
        .collect();
    let mut value = summary_json(name, program);
    value["clusters"] = json!(clusters);
    value["nodes"] = json!(nodes);
    value["edges"] = json!(edges);
    value
}

/// The names the page styles edges by (one CSS class each).
fn edge_kind(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::Activation => "activation",
        EdgeKind::Run => "run",
        EdgeKind::Linear => "linear",
        EdgeKind::Skip => "skip",
        EdgeKind::Next => "next",
        EdgeKind::Branch => "branch",
        EdgeKind::NoMatch => "no_match",
        EdgeKind::NoAnswer => "no_answer",
        EdgeKind::OnError => "on_error",
        EdgeKind::Emit => "emit",
        EdgeKind::CompleteNext => "complete_next",
        EdgeKind::Signal => "signal",
    }
}

/// What the page shows of a program beside its picture: its agent, its
/// flows, which of them are workflows (started as runs, not chatted with)
/// and what a run of each needs.
fn summary_json(name: &str, program: &Program) -> Value {
    let default = program.default_flow.map(|id| id.index());
    let flows: Vec<Value> = program
        .flows
        .iter()
        .enumerate()
        .map(|(index, flow)| {
            let requires: Vec<&str> = flow
                .requires
                .iter()
                .filter_map(|field| program.fields.get(field.index()))
                .map(|field| field.name.as_str())
                .collect();
            json!({
                "name": flow.name,
                "title": flow.title,
                "workflow": flow.workflow,
                "default": default == Some(index),
                "requires": requires,
            })
        })
        .collect();
    json!({
        "program": name,
        "agent": program.agent.name,
        "conversation": program.flows.iter().any(|flow| !flow.workflow),
        "flows": flows,
    })
}

/// What the test files beside `program` (at `path`) reach when their
/// cases run, laid on the graph [`graph_json`] draws: the node ids and the
/// indices into its `edges` that were reached, and `flowc test
/// --coverage`'s counts per flow.
pub fn coverage_json(name: &str, path: &std::path::Path, program: &std::sync::Arc<Program>) -> Value {
    let tests = crate::flowtest::coverage::of_program(path, program);
    let reachability = reachability::analyze(program);
    let picture = graph::build(program, &reachability, None);
    let overlay = crate::graph::coverage::Overlay::new(program, &picture, &tests.covered);
    let file_name = |path: &std::path::Path| {
        path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
    };
    let count = |(reached, total): (usize, usize)| json!({ "reached": reached, "total": total });
    let flows: Vec<Value> = crate::graph::coverage::per_flow(program, &picture, &tests.covered)
        .into_iter()
        .map(|row| {
            json!({
                "flow": row.flow,
                "steps": count(row.steps),
                "branches": count(row.branches),
                "transitions": count(row.transitions),
                "missed": row.missed,
            })
        })
        .collect();
    json!({
        "program": name,
        "files": tests.files.iter().map(|path| file_name(path)).collect::<Vec<_>>(),
        "broken": tests.broken.iter().map(|(path, why)| json!({ "file": file_name(path), "reason": why })).collect::<Vec<_>>(),
        "cases": tests.cases,
        "failed": tests.failed,
        "flows": flows,
        "nodes": overlay.nodes.iter().map(NodeId::as_str).collect::<Vec<_>>(),
        "edges": overlay.edges.iter().enumerate().filter(|(_, taken)| **taken).map(|(index, _)| index).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    fn booking() -> Program {
        let text = include_str!("../../../flows/booking.flow");
        let compilation = crate::pipeline::compile(&SourceFile::new("booking.flow".to_string(), text.to_string()));
        assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
        compilation.ir
    }

    #[test]
    fn every_step_node_is_named_and_every_edge_joins_two_nodes() {
        let value = graph_json("booking", &booking());
        let nodes = value["nodes"].as_array().unwrap();
        let named: Vec<&str> = nodes.iter().filter_map(|node| node["step"].as_str()).collect();
        assert_eq!(named, ["ask_hotel", "ask_date", "ask_guests", "confirm", "book", "cancelled"]);
        let ids: Vec<&str> = nodes.iter().map(|node| node["id"].as_str().unwrap()).collect();
        for edge in value["edges"].as_array().unwrap() {
            assert!(ids.contains(&edge["from"].as_str().unwrap()), "{edge}");
            assert!(ids.contains(&edge["to"].as_str().unwrap()), "{edge}");
        }
        let confirm = nodes.iter().find(|node| node["step"] == "confirm").unwrap();
        assert_eq!(confirm["flow"], "booking");
        assert_eq!(confirm["kind"], "ask");
        assert_eq!(value["clusters"][0]["flow"], "booking");
    }

    #[test]
    fn the_branches_of_confirm_are_edges_with_their_conditions() {
        let value = graph_json("booking", &booking());
        let id_of = |step: &str| {
            value["nodes"].as_array().unwrap().iter().find(|node| node["step"] == step).unwrap()["id"].clone()
        };
        let (confirm, book) = (id_of("confirm"), id_of("book"));
        let edge = value["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|edge| edge["from"] == confirm && edge["to"] == book)
            .unwrap();
        assert_eq!(edge["kind"], "branch");
        assert_eq!(edge["label"], "confirmed == true");
    }

    #[test]
    fn the_program_beside_its_picture_names_flows_and_workflows() {
        let value = graph_json("booking", &booking());
        assert_eq!(value["agent"], "Concierge");
        assert_eq!(value["conversation"], true);
        assert_eq!(value["flows"][0]["name"], "booking");
        assert_eq!(value["flows"][0]["workflow"], false);
        assert_eq!(value["flows"][0]["requires"], json!(["hotel", "date", "guests"]));
    }
}
