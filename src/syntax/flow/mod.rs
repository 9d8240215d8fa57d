//! The `.flow` front end: pest pairs of grammar/flow.pest into the AST.
//!
//! The walk must yield exactly the AST the YAML front end yields for the same
//! program, because both syntaxes are promised to compile to the same IR. So
//! every `.flow` form maps onto the YAML shape: a `say` in a step body is the
//! step's `say` while a `say` inside a block is an action; actions written
//! directly in a step body join its `do` actions in source order; a clause
//! given twice where YAML has one key is reported as `duplicate_key`, as a
//! YAML mapping with that key twice would be.
//!
//! pest stops at the first syntax error, so a program that does not parse
//! yields an empty AST and that one diagnostic.
//!
//! This file drives the parse (a large program in pieces, on several
//! threads); `walker` walks a parse into the AST with its leaves, and
//! `declarations` and `flows` the constructs; `lexical` knows where
//! tokens end; `errors` turns pest's failure into the diagnostic, with
//! `expected` naming in words what the parser expected.

mod declarations;
mod errors;
mod expected;
mod flows;
mod lexical;
mod walker;

use super::ast::{Agent, Program};
use super::error::{ExpressionError, FlowError};
use super::expr::{self, SpanMap};
use super::grammar::{FlowParser, Rule};
use crate::diag::Diagnostic;
use crate::source::SourceFile;
use errors::{next_char_end, parse_failure};
use lexical::skip_trivia;
use pest::Parser;
use walker::Walker;

/// Parses a `.flow` program.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let text = file.text.as_str();
    let map = SpanMap::Exact { base: 0 };
    // Refused before pest runs: the generated parser recurses once per
    // bracket level, and so does the walk below.
    if let Some(offset) = expr::too_deep(text) {
        let span = map.span(offset, next_char_end(text, offset));
        let error = ExpressionError::TooManyBrackets { span, limit: expr::MAX_BRACKET_DEPTH };
        return (Program::default(), vec![error.into()]);
    }
    // Large programs are cut at top-level item boundaries and the pieces
    // parsed on all cores; a piece that fails sends the whole file through
    // the sequential path, so diagnostics never depend on the cut.
    let pieces = split_at_items(text, super::parallelism());
    if pieces.len() > 1 {
        let parsed: Option<Vec<(Program, Vec<Diagnostic>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = pieces
                .iter()
                .map(|range| {
                    let range = range.clone();
                    std::thread::Builder::new()
                        .stack_size(super::PARSER_STACK)
                        .spawn_scoped(scope, move || parse_items(text, range))
                })
                .collect();
            handles.into_iter().map(|handle| handle.ok().and_then(|handle| handle.join().ok()).flatten()).collect()
        });
        if let Some(parsed) = parsed {
            return merge_pieces(parsed);
        }
    }
    match parse_items(text, 0..text.len()) {
        Some(parsed) => parsed,
        None => {
            // Parse the whole program again for the diagnostic: the same
            // failure, with the context pest needs to name what it expected.
            let mut diagnostics = Vec::new();
            if let Err(error) = FlowParser::parse(Rule::program, text) {
                diagnostics.push(parse_failure(&error, text, map));
            }
            (Program::default(), diagnostics)
        }
    }
}

/// Parses the top-level items in `range` one at a time: pest keeps every
/// token of what it parses, so parsing item by item bounds that memory.
/// `None` when an item does not parse.
fn parse_items(text: &str, range: std::ops::Range<usize>) -> Option<(Program, Vec<Diagnostic>)> {
    let mut program = Program::default();
    let mut diagnostics = Vec::new();
    let end = range.end.min(text.len());
    let mut offset = skip_trivia(text, range.start).min(end);
    while let Some(rest) = text.get(offset..end).filter(|rest| !rest.is_empty()) {
        let item_only = FlowParser::parse(Rule::item_only, rest).ok().and_then(|mut pairs| pairs.next())?;
        let consumed = item_only.as_span().end();
        let base = u32::try_from(offset).unwrap_or(u32::MAX);
        let mut walker = Walker { text: rest, map: SpanMap::Exact { base }, diagnostics };
        if let Some(item) = item_only.into_inner().next() {
            walker.item(&mut program, item);
        }
        diagnostics = walker.diagnostics;
        if consumed == 0 {
            break;
        }
        offset = skip_trivia(text, offset + consumed).min(end);
    }
    Some((program, diagnostics))
}

/// Joins the programs of consecutive pieces, in order.
fn merge_pieces(pieces: Vec<(Program, Vec<Diagnostic>)>) -> (Program, Vec<Diagnostic>) {
    let mut program = Program::default();
    let mut diagnostics = Vec::new();
    for (piece, piece_diagnostics) in pieces {
        diagnostics.extend(piece_diagnostics);
        if let Some(agent) = piece.agent {
            match &program.agent {
                Some(first) => diagnostics.push(duplicate_agent(first, &agent)),
                None => program.agent = Some(agent),
            }
        }
        program.schema.extend(piece.schema);
        program.context.extend(piece.context);
        program.tools.extend(piece.tools);
        program.signals.extend(piece.signals);
        program.flows.extend(piece.flows);
    }
    (program, diagnostics)
}

fn duplicate_agent(first: &Agent, second: &Agent) -> Diagnostic {
    FlowError::DuplicateAgent {
        second: second.name.as_ref().map_or(second.span, |name| name.span),
        first: first.name.as_ref().map_or(first.span, |name| name.span),
    }
    .into()
}

/// Cuts a program into about `pieces` ranges that end where a top-level
/// item ends (a `}` back at depth 0, outside strings and comments). Small
/// programs stay whole.
fn split_at_items(text: &str, pieces: usize) -> Vec<std::ops::Range<usize>> {
    if pieces <= 1 || text.len() < super::PARALLEL_THRESHOLD {
        return std::iter::once(0..text.len()).collect();
    }
    let target = text.len() / pieces;
    let mut cuts = vec![0];
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let bytes = text.as_bytes();
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match quote {
            Some(open) => {
                if byte == b'\\' {
                    index += 1;
                } else if byte == open {
                    quote = None;
                }
            }
            None => match byte {
                b'"' | b'\'' => quote = Some(byte),
                b'#' => {
                    while bytes.get(index).is_some_and(|&skipped| skipped != b'\n') {
                        index += 1;
                    }
                }
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    let last = cuts.last().copied().unwrap_or(0);
                    if depth == 0 && index + 1 - last >= target && cuts.len() < pieces {
                        cuts.push(index + 1);
                    }
                }
                _ => {}
            },
        }
        index += 1;
    }
    cuts.push(text.len());
    cuts.windows(2)
        .filter_map(|pair| match pair {
            [start, end] if start < end => Some(*start..*end),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
