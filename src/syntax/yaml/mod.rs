//! The YAML front end: `tree` reads the text into a span-carrying node
//! tree, `values` reads its leaves into AST values, and `build`
//! assembles the program from them.

mod build;
pub(crate) mod tree;
mod values;

use super::ast::{FlowDecl, Program};
use crate::diag::Diagnostic;
use crate::source::SourceFile;
use std::sync::mpsc;

/// Parses a YAML program. A document that cannot be read as YAML gives an
/// empty program and the one diagnostic saying why: past a YAML error the
/// structure is unknown, and guessing at it would only add false errors.
///
/// Each flow is built as soon as its text has been read, and its part of
/// the tree dropped, so the tree never holds more than one flow body. In a
/// large file the flows are built on a second thread while the first reads
/// on; the program and diagnostics are the same either way.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    if file.text.len() >= super::PARALLEL_THRESHOLD && super::parallelism() > 1 {
        parse_pipelined(&file.text)
    } else {
        parse_in_order(&file.text)
    }
}

/// Reads and builds on one thread.
fn parse_in_order(text: &str) -> (Program, Vec<Diagnostic>) {
    let mut taken = Vec::new();
    // Kept apart until the whole document has been read: a YAML error
    // further down discards them along with the flows.
    let mut flow_diagnostics = Vec::new();
    let mut build_flow = |body: tree::FlowBody<'_, '_>| {
        taken.push(build::flow_body(&*body.tree, body.key, body.value, &mut flow_diagnostics));
        u32::try_from(taken.len() - 1).unwrap_or(u32::MAX)
    };
    let mut diagnostics = Vec::new();
    let tree = tree::read(text, &mut diagnostics, Some(&mut build_flow));
    finish(tree, taken, flow_diagnostics, diagnostics)
}

/// How many read flows may wait for the builder: enough to ride out a
/// slow flow, few enough to keep the memory of one flow's tree per slot.
const PIPELINE_DEPTH: usize = 64;

/// A flow read on the reading thread, to be built on the building one.
struct Work<'input> {
    taken: u32,
    tree: tree::Tree<'input>,
    key: tree::NodeId,
}

/// Reads on this thread and builds flows on another. The trees of built
/// flows go back to the reader to be filled again, so that memory is
/// reused instead of taken fresh from the OS for every flow.
fn parse_pipelined<'input>(text: &'input str) -> (Program, Vec<Diagnostic>) {
    std::thread::scope(|scope| {
        let (to_builder, for_builder) = mpsc::sync_channel::<Work<'input>>(PIPELINE_DEPTH);
        let (to_reader, recycled) = mpsc::channel::<tree::Tree<'input>>();
        let builder = std::thread::Builder::new().stack_size(super::PARSER_STACK).spawn_scoped(scope, move || {
            let mut built = Vec::new();
            let mut diagnostics = Vec::new();
            for work in for_builder {
                let flow = build::flow_body(&work.tree, work.key, work.tree.root(), &mut diagnostics);
                built.push((work.taken, flow));
                // The reader may be done and gone; the tree is then dropped.
                let _ = to_reader.send(work.tree);
            }
            (built, diagnostics)
        });
        let Ok(builder) = builder else {
            // No thread to be had: the same work, in order.
            return parse_in_order(text);
        };
        let mut taken: Vec<Option<FlowDecl>> = Vec::new();
        let mut flow_diagnostics = Vec::new();
        let mut diagnostics = Vec::new();
        let tree = {
            let mut build_flow = |mut body: tree::FlowBody<'_, 'input>| {
                let index = u32::try_from(taken.len()).unwrap_or(u32::MAX);
                let into = recycled.try_recv().unwrap_or_else(|_| tree::Tree::empty());
                let flow = match body.detach(into) {
                    Ok((tree, key)) => match to_builder.send(Work { taken: index, tree, key }) {
                        Ok(()) => None,
                        // The builder is gone (it panicked: the join below
                        // reports it); the body, moved out, is built here.
                        Err(unsent) => {
                            let Work { tree, key, .. } = unsent.0;
                            build::flow_body(&tree, key, tree.root(), &mut flow_diagnostics)
                        }
                    },
                    // A body with an alias needs the whole tree.
                    Err(_) => build::flow_body(&*body.tree, body.key, body.value, &mut flow_diagnostics),
                };
                taken.push(flow);
                index
            };
            tree::read(text, &mut diagnostics, Some(&mut build_flow))
        };
        drop(to_builder);
        let (built, built_diagnostics) = match builder.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        for (index, flow) in built {
            if let Some(slot) = taken.get_mut(index as usize) {
                *slot = flow;
            }
        }
        flow_diagnostics.extend(built_diagnostics);
        finish(tree, taken, flow_diagnostics, diagnostics)
    })
}

/// The program once reading has ended: built from the tree and the flows
/// taken from it, or nothing when the YAML could not be read.
fn finish(
    tree: Option<tree::Tree<'_>>,
    taken: Vec<Option<FlowDecl>>,
    mut flow_diagnostics: Vec<Diagnostic>,
    mut diagnostics: Vec<Diagnostic>,
) -> (Program, Vec<Diagnostic>) {
    let program = match tree {
        Some(tree) => {
            diagnostics.append(&mut flow_diagnostics);
            build::build(&tree, taken, &mut diagnostics)
        }
        None => Program::default(),
    };
    (program, diagnostics)
}

#[cfg(test)]
mod tests;
