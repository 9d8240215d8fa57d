//! Definite assignment (`maybe_unset`, a warning): a template, expression
//! or tool argument that reads a field which is not set on every path from
//! the flow's entry (LANGUAGE.md section 11). This file is the rule: which
//! reads it checks and how it words a finding. What each step sets and
//! reads is in [`super::summary`]; the analysis over the flow's graph that
//! says whether a field is set on every path is [`super::dataflow`].

use super::dataflow::{Dataflow, PathBudget, path_to};
use super::flowgraph::{FlowGraph, To};
use super::reachability::Analysis;
use super::summary::summarize;
use crate::diag::{Code, Diagnostic};
use crate::ir::{FieldId, Flow, Program};
use crate::source::Span;
use std::collections::HashMap;

/// A read of a field that may be unset: the facts of one `maybe_unset`
/// warning. `path`, when one was found within budget, is a way from the
/// flow's entry to the read on which nothing sets the field.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MaybeUnset {
    /// Read by the flow's `on_enter`, before any step runs.
    AtEntry { flow: String, field: String, span: Span },
    /// Read by the step `step`.
    InStep { field: String, step: String, span: Span, path: Option<Vec<PathStop>> },
    /// Read by the flow's `on_complete`.
    OnComplete { flow: String, field: String, span: Span, path: Option<Vec<PathStop>> },
}

/// One stop of a path through a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PathStop {
    /// The step runs.
    Step(String),
    /// The step is passed over (its arrival in list order skips it).
    Past(String),
    /// The flow completes.
    Completion,
}

/// Reports `maybe_unset` for every flow whose structure is whole.
pub(crate) fn check(program: &Program, analysis: &Analysis, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program, analysis).into_iter().map(MaybeUnset::into_diagnostic));
}

pub(crate) fn find(program: &Program, analysis: &Analysis) -> Vec<MaybeUnset> {
    let mut found = Vec::new();
    for (index, flow) in program.flows.iter().enumerate() {
        if flow.incomplete || flow.steps.is_empty() {
            continue;
        }
        let Some(graph) = analysis.graphs.get(index) else {
            continue;
        };
        let reached = analysis.reached_nodes.get(index).map(Vec::as_slice).unwrap_or_default();
        let entered_with = analysis.entered_with.get(index).map(Vec::as_slice).unwrap_or_default();
        check_flow(program, flow, entered_with, graph, reached, &mut found);
    }
    found
}

/// Where a read happens: in a step (its body), or in a step's conditions,
/// tested on its listed arrival.
struct ReadSite<'a> {
    node: usize,
    step: usize,
    reads: &'a [(FieldId, Span)],
}

fn check_flow(
    program: &Program,
    flow: &Flow,
    entered_with: &[FieldId],
    graph: &FlowGraph,
    reached: &[bool],
    found: &mut Vec<MaybeUnset>,
) {
    let summary = summarize(flow, graph, entered_with);
    let field_name = |field: FieldId| program.field(field).map_or("?", |field| field.name.as_str()).to_string();
    for (field, span) in &summary.entry_reads {
        found.push(MaybeUnset::AtEntry { flow: flow.name.clone(), field: field_name(*field), span: *span });
    }
    let mut sites = Vec::new();
    for (step, step_summary) in summary.steps.iter().enumerate() {
        sites.push(ReadSite { node: step, step, reads: &step_summary.reads });
        let condition_node = match graph.listed(step) {
            To::Node(node) => node,
            _ => step,
        };
        sites.push(ReadSite { node: condition_node, step, reads: &step_summary.condition_reads });
    }
    sites.retain(|site| reached.get(site.node).copied().unwrap_or(false) && !site.reads.is_empty());
    let mut tracked: Vec<FieldId> = sites
        .iter()
        .flat_map(|site| site.reads.iter().map(|(field, _)| *field))
        .chain(summary.complete_reads.iter().map(|(field, _)| *field))
        .collect();
    tracked.sort_unstable();
    tracked.dedup();
    if tracked.is_empty() {
        return;
    }
    let dataflow = Dataflow::new(graph, &summary, tracked);
    let mut budget = PathBudget::new(dataflow.nodes());
    let complete = dataflow.complete();
    dataflow.for_each_chunk(|chunk| {
        let mut paths: HashMap<FieldId, Option<Vec<u32>>> = HashMap::new();
        let mut explain = |field: FieldId, node: usize| -> Option<Vec<PathStop>> {
            let parents = paths.entry(field).or_insert_with(|| chunk.unset_paths(field, &mut budget));
            let path = parents.as_ref().and_then(|parents| path_to(parents, node))?;
            Some(path_stops(flow, graph, &path))
        };
        for site in &sites {
            for (field, span) in site.reads {
                if chunk.set_on_arrival(site.node, *field) != Some(false) {
                    continue;
                }
                let step = flow.steps.get(site.step).map_or("?", |step| step.name.as_str()).to_string();
                let path = explain(*field, site.node);
                found.push(MaybeUnset::InStep { field: field_name(*field), step, span: *span, path });
            }
        }
        for (field, span) in &summary.complete_reads {
            if chunk.set_on_arrival(complete, *field) != Some(false) {
                continue;
            }
            let path = explain(*field, complete);
            found.push(MaybeUnset::OnComplete {
                flow: flow.name.clone(),
                field: field_name(*field),
                span: *span,
                path,
            });
        }
    });
}

impl MaybeUnset {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            MaybeUnset::AtEntry { flow, field, span } => {
                Diagnostic::new(Code::MaybeUnset, format!("`{field}` may be unset when the flow `{flow}` starts"))
                    .at(span, format!("`{field}` is read here, before any step runs"))
                    .with_help(format!(
                        "`on_enter` runs as the flow is entered; read `{field}` in a step that collects it or lists it in `requires`, or test it with `{field} is set`"
                    ))
            }
            MaybeUnset::InStep { field, step, span, path } => {
                let message = match path {
                    Some(path) if path.len() <= 1 => {
                        format!("`{field}` may be unset when the step `{step}` reads it: the flow starts at `{step}`")
                    }
                    Some(path) => format!(
                        "`{field}` may be unset when the step `{step}` reads it: nothing sets it on the path {}",
                        spell_path(&path)
                    ),
                    None => format!("`{field}` may be unset when the step `{step}` reads it"),
                };
                Diagnostic::new(Code::MaybeUnset, message).at(span, format!("`{field}` is read here")).with_help(
                    format!(
                        "collect `{field}` in an earlier step, list it in this step's `requires`, or test it with `{field} is set`"
                    ),
                )
            }
            MaybeUnset::OnComplete { flow, field, span, path } => {
                let message = match path {
                    Some(path) => format!(
                        "`{field}` may be unset when the flow `{flow}` completes: nothing sets it on the path {}",
                        spell_path(&path)
                    ),
                    None => format!("`{field}` may be unset when the flow `{flow}` completes"),
                };
                Diagnostic::new(Code::MaybeUnset, message)
                    .at(span, format!("`{field}` is read here, in `on_complete`"))
                    .with_help(format!(
                        "collect or set `{field}` on every path to completion, or test it with `{field} is set`"
                    ))
            }
        }
    }
}

/// The stops of a path of graph nodes. A listed arrival that leads into
/// its step is the step; one that passes over it is [`PathStop::Past`];
/// one past the last node is completion.
fn path_stops(flow: &Flow, graph: &FlowGraph, path: &[u32]) -> Vec<PathStop> {
    let mut stops = Vec::with_capacity(path.len());
    for (position, node) in path.iter().enumerate() {
        let node = *node as usize;
        if node >= graph.nodes() {
            stops.push(PathStop::Completion);
            continue;
        }
        let (step, listed) = graph.step_of(node);
        let name = flow.steps.get(step).map_or("?", |step| step.name.as_str()).to_string();
        if !listed {
            stops.push(PathStop::Step(name));
        } else if path.get(position + 1).map(|next| *next as usize) != Some(step) {
            stops.push(PathStop::Past(name));
        }
    }
    stops
}

/// `` `a` → past `b` → completion ``, long paths shortened in the middle.
fn spell_path(stops: &[PathStop]) -> String {
    const KEEP: usize = 4;
    let names: Vec<String> = stops
        .iter()
        .map(|stop| match stop {
            PathStop::Step(name) => format!("`{name}`"),
            PathStop::Past(name) => format!("past `{name}`"),
            PathStop::Completion => "completion".to_string(),
        })
        .collect();
    if names.len() <= 2 * KEEP {
        return names.join(" → ");
    }
    let head = names.get(..KEEP).unwrap_or_default().join(" → ");
    let tail = names.get(names.len() - KEEP..).unwrap_or_default().join(" → ");
    format!("{head} → … → {tail}")
}

#[cfg(test)]
mod tests {
    use super::{MaybeUnset, PathStop, find};
    use crate::check::tests::{at, compiled};
    use crate::check::{check_findings as check, findings};
    use crate::source::Span;

    const SCHEMA: &str = "schema { a: string  b: string  n: int  ok: bool  xs: list(string) }\n";

    fn with_schema(flows: &str) -> String {
        format!("{SCHEMA}{flows}")
    }

    /// `a` is collected on the way through `s2` only, and `s3` reads it.
    const COLLECTED_ON_ONE_PATH: &str = r#"flow f { when "w"
        step s1 { collect ok
                  branch { if ok == true -> s3
                           else -> s2 } }
        step s2 { collect a }
        step s3 { say "{{a}}" } }"#;

    #[test]
    fn a_field_collected_on_one_path_only_may_be_unset() {
        let source = with_schema(COLLECTED_ON_ONE_PATH);
        let found = findings(&source);
        assert_eq!(found.len(), 1, "{found:?}");
        let file = crate::source::SourceFile::new("test.flow", source.as_str());
        let diagnostics = crate::pipeline::compile(&file).diagnostics;
        let message = diagnostics.first().map(|diagnostic| diagnostic.message.as_str()).unwrap_or_default();
        assert_eq!(message, "`a` may be unset when the step `s3` reads it: nothing sets it on the path `s1` → `s3`");
    }

    #[test]
    fn the_warning_holds_the_path_on_which_nothing_sets_the_field() {
        let (file, program) = compiled(&with_schema(COLLECTED_ON_ONE_PATH));
        let analysis = crate::check::reachability::analysis(&program);
        let read = at(&file, "{{a}}", 0);
        assert_eq!(
            find(&program, &analysis),
            [MaybeUnset::InStep {
                field: "a".to_string(),
                step: "s3".to_string(),
                span: Span::new(read.start + 2, read.end - 2),
                path: Some(vec![PathStop::Step("s1".to_string()), PathStop::Step("s3".to_string())]),
            }]
        );
    }

    #[test]
    fn collect_requires_set_and_save_all_count() {
        check(
            &with_schema(
                r#"tool t() -> { b: string } { builtin echo }
                flow f { when "w"
                step s1 { collect a }
                auto step s2 { set n = 1  call t() -> b }
                step s3 { requires ok  say "{{a}} {{b}} {{n}} {{ok}}" } }"#,
            ),
            // `requires` counts as set; that nothing asks for `ok` is the
            // `asking` pass's finding.
            &[("unasked_required", "s3")],
        );
    }

    #[test]
    fn flow_requires_count_only_for_workflows() {
        check(
            &with_schema(
                r#"flow conversation { when "w"  requires a
                    step s { prompt "{{a}}?"  collect a } }
                flow job { requires a
                    auto step s { set b = a } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_test_that_the_field_is_set_guards_the_read() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { if n is set  say "{{n}}" }
                step s2 { skip_if a == null  say "{{a}}" }
                step s3 { branch { if n is set and n > 1 -> s4
                                   if ok is set and ok -> { reply "{{ok}}"  complete }
                                   else -> { complete } } }
                step s4 { say "{{n}}" } }"#,
            ),
            &[],
        );
    }

    #[test]
    fn writing_null_unsets_a_field() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a }
                auto step s2 { set a = null }
                step s3 { say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_set_inside_for_each_does_not_count_after_the_loop() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect xs }
                auto step s2 { for x in xs { set a = x  say "{{a}}" } say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_flow_on_enter_read_is_before_any_step() {
        check(
            &with_schema(
                r#"flow f { when "w"
                on_enter { say "Hello {{a}}" }
                step s { collect a } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_flow_entered_only_by_goto_starts_with_its_data() {
        check(
            &with_schema(
                r#"flow f { when "w"
                    step s { collect a  branch { if a == "x" -> { goto g with { a: a, b: "y" } }
                                                 else -> { goto g with { a: a } } } } }
                flow g { step t { say "{{a}}" }
                         step u { say "{{b}}" } }
                flow h { when "h"
                    step s { collect a  emit goto k with { a: a } } }
                flow k { when "k"  step t { say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "b"), ("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_when_entry_may_leave_before_the_step_collects() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a
                          branch { when "the user wants help" -> s3
                                   else -> s2 } }
                step s2 { say "{{a}}"  next end }
                step s3 { say "{{a}}" } }"#,
            ),
            &[("maybe_unset", "a")],
        );
    }

    #[test]
    fn a_step_entered_by_name_proves_nothing_by_its_if() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect ok  next s2 }
                step s2 { if n is set  say "{{n}}" } }"#,
            ),
            &[("maybe_unset", "n")],
        );
    }

    #[test]
    fn a_loop_keeps_what_every_way_round_sets() {
        check(
            &with_schema(
                r#"flow f { when "w"
                step s1 { collect a }
                step s2 { collect ok  say "{{a}}"
                          branch { if ok == true -> { set a = null  goto_step s1 }
                                   else -> s3 } }
                step s3 { say "{{a}} {{ok}}" } }"#,
            ),
            &[],
        );
    }
}
