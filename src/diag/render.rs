//! Rendering of [`Diagnostic`]s: rustc-style reports through miette for
//! people, and the JSON objects of DESIGN.md for tools. Both read the same
//! data, so the two outputs can never disagree.
//!
//! miette is shown an `Excerpt` of the file, not the file: only the lines
//! around the labels, with long lines clipped around the labels. miette
//! formats underline widths as `u16` and panics past column 65,535, and a
//! whole minified line is unreadable anyway; the excerpt also keeps the cost
//! of a report proportional to what it shows, not to the file's size. Line
//! and column numbers are still the file's own.

use super::{Diagnostic, Severity};
use crate::source::SourceFile;
use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents, SourceCode, SourceSpan,
    SpanContents,
};
use serde::Serialize;

/// Lines longer than this many bytes are shown clipped around the labels.
const LONG_LINE: usize = 240;
/// Bytes kept on either side of a label's start and end on a clipped line.
const MARGIN: usize = 40;
/// Lines between two labels' contexts shown rather than split into two
/// snippets.
const MERGE_GAP: usize = 3;
/// Marks text left out of a clipped line.
const ELLIPSIS: &str = "…";

/// How human output is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// Whether to use ANSI colors.
    pub color: bool,
    /// The terminal's width in columns.
    pub width: usize,
}

impl Style {
    /// Plain and fixed-width: what tests and pipes get.
    pub const PLAIN: Style = Style { color: false, width: 100 };
}

/// miette's view of one of our diagnostics.
struct Report<'a> {
    diagnostic: &'a Diagnostic,
    excerpt: Excerpt<'a>,
    code: String,
}

impl std::fmt::Debug for Report<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.diagnostic.message)
    }
}

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.diagnostic.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        Some(Box::new(&self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
        self.diagnostic.help.as_ref().map(|help| Box::new(help) as Box<dyn std::fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        if self.diagnostic.labels.is_empty() { None } else { Some(&self.excerpt) }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let labels =
            self.diagnostic.labels.iter().zip(&self.excerpt.labels).enumerate().map(|(index, (label, span))| {
                let span = SourceSpan::from(span.clone());
                let text = (!label.text.is_empty()).then(|| label.text.clone());
                if index == 0 {
                    LabeledSpan::new_primary_with_span(text, span)
                } else {
                    LabeledSpan::new_with_span(text, span)
                }
            });
        Some(Box::new(labels))
    }
}

/// The rustc-style rendering of one diagnostic.
pub fn render_human(file: &SourceFile, diagnostic: &Diagnostic, style: Style) -> String {
    let theme = if style.color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(style.width).with_links(false);
    let report = Report {
        diagnostic,
        excerpt: Excerpt::new(file, diagnostic),
        code: format!("flowc::{}", diagnostic.code.as_str()),
    };
    let mut out = String::new();
    if handler.render_report(&mut out, &report).is_err() {
        // miette only fails on a formatter error; fall back to one line.
        out = format!("{}: {}\n", diagnostic.severity.as_str(), diagnostic.message);
    }
    out
}

/// A run of the file's bytes copied into an excerpt.
#[derive(Debug)]
struct Piece {
    excerpt: usize,
    original: usize,
    len: usize,
}

/// Consecutive lines of the file in an excerpt: `start..end` of the
/// excerpt's text, whose first line is the file's line `first_line`
/// (0-based).
#[derive(Debug)]
struct Chunk {
    start: usize,
    end: usize,
    first_line: usize,
}

/// The part of a file one diagnostic shows: the lines of its labels with
/// one line of context (miette's default) on either side, each long line
/// clipped to windows around the label ends on it. Label spans are
/// translated into the excerpt; line and column numbers read back through
/// [`SourceCode`] are the file's.
struct Excerpt<'a> {
    file: &'a SourceFile,
    text: String,
    /// Sorted by both offsets: the excerpt keeps the file's order.
    pieces: Vec<Piece>,
    /// Sorted, disjoint and never adjacent in the file, so a context miette
    /// reads never spans two of them.
    chunks: Vec<Chunk>,
    /// The diagnostic's label spans, in excerpt offsets.
    labels: Vec<std::ops::Range<usize>>,
}

impl<'a> Excerpt<'a> {
    fn new(file: &'a SourceFile, diagnostic: &Diagnostic) -> Excerpt<'a> {
        let text = file.text.as_str();
        let spans: Vec<(usize, usize)> = diagnostic
            .labels
            .iter()
            .map(|label| {
                let start = floor_char_boundary(text, label.span.start as usize);
                let end = floor_char_boundary(text, label.span.end as usize).max(start);
                (start, end)
            })
            .collect();
        // Whole lines around each label, merged when they touch or only a
        // few lines lie between them (shown then, as miette would).
        let mut ranges: Vec<(usize, usize)> = spans
            .iter()
            .map(|&(start, end)| {
                let (first, _) = line_bounds(file, start);
                let (_, last) = line_bounds(file, end);
                let before = if first == 0 { 0 } else { line_bounds(file, first - 1).0 };
                let after = if last >= text.len() { last } else { line_bounds(file, last + 1).1 };
                (before, after)
            })
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        // Asked at a line's start, `line_col` counts no characters.
        let line_of = |offset: usize| {
            let line_start = line_bounds(file, offset).0;
            file.line_col(u32::try_from(line_start).unwrap_or(u32::MAX)).line
        };
        for (start, end) in ranges {
            match merged.last_mut() {
                Some(last) if start <= last.1 + 1 || line_of(start) <= line_of(last.1) + 1 + MERGE_GAP => {
                    last.1 = last.1.max(end);
                }
                _ => merged.push((start, end)),
            }
        }
        let points: Vec<usize> = spans.iter().flat_map(|&(start, end)| [start, end]).collect();
        let mut excerpt =
            Excerpt { file, text: String::new(), pieces: Vec::new(), chunks: Vec::new(), labels: Vec::new() };
        for (start, end) in merged {
            let chunk_start = excerpt.text.len();
            let mut line_start = start;
            loop {
                let (_, line_end) = line_bounds(file, line_start);
                excerpt.push_line(line_start, line_end, &points);
                if line_end >= end || line_end >= text.len() {
                    break;
                }
                line_start = line_end + 1;
            }
            let first_line = file.line_col(u32::try_from(start).unwrap_or(u32::MAX)).line.saturating_sub(1);
            excerpt.chunks.push(Chunk { start: chunk_start, end: excerpt.text.len(), first_line });
        }
        excerpt.labels = spans
            .iter()
            .map(|&(start, end)| {
                let start = excerpt.to_excerpt(start, true);
                start..excerpt.to_excerpt(end, false).max(start)
            })
            .collect();
        excerpt
    }

    /// Copies the line `start..end` (`end` is its `\n` or the end of the
    /// file) and its line break; a long line only around the given points.
    fn push_line(&mut self, start: usize, end: usize, points: &[usize]) {
        let text = self.file.text.as_str();
        let has_break = end < text.len();
        if end - start <= LONG_LINE {
            self.push_piece(start, end + usize::from(has_break));
            return;
        }
        let mut windows: Vec<(usize, usize)> = points
            .iter()
            .filter(|&&point| (start..=end).contains(&point))
            .map(|&point| {
                let from = floor_char_boundary(text, point.saturating_sub(MARGIN).max(start));
                let to = ceil_char_boundary(text, (point + MARGIN).min(end));
                (from, to)
            })
            .collect();
        if windows.is_empty() {
            windows.push((start, ceil_char_boundary(text, start + 2 * MARGIN)));
        }
        windows.sort_unstable();
        let mut cursor = start;
        for (from, to) in windows {
            let from = from.max(cursor);
            if to <= from {
                continue;
            }
            if from > cursor {
                self.text.push_str(ELLIPSIS);
            }
            self.push_piece(from, to);
            cursor = to;
        }
        if cursor < end {
            self.text.push_str(ELLIPSIS);
        }
        if has_break {
            self.push_piece(end, end + 1);
        }
    }

    fn push_piece(&mut self, start: usize, end: usize) {
        let Some(slice) = self.file.text.get(start..end) else {
            return;
        };
        match self.pieces.last_mut() {
            Some(last) if last.original + last.len == start && last.excerpt + last.len == self.text.len() => {
                last.len += slice.len();
            }
            _ => self.pieces.push(Piece { excerpt: self.text.len(), original: start, len: slice.len() }),
        }
        self.text.push_str(slice);
    }

    /// Where a file offset is in the excerpt. An offset that was clipped
    /// away moves to the next kept byte (`forward`) or the previous one.
    fn to_excerpt(&self, original: usize, forward: bool) -> usize {
        let index = self.pieces.partition_point(|piece| piece.original + piece.len < original);
        match self.pieces.get(index) {
            Some(piece) if piece.original <= original => piece.excerpt + (original - piece.original),
            Some(piece) if forward => piece.excerpt,
            _ => index
                .checked_sub(1)
                .and_then(|previous| self.pieces.get(previous))
                .map_or(0, |piece| piece.excerpt + piece.len),
        }
    }

    /// Where an excerpt offset is in the file, unless it is an ellipsis.
    fn to_original(&self, excerpt: usize) -> Option<usize> {
        let index = self.pieces.partition_point(|piece| piece.excerpt + piece.len < excerpt);
        self.pieces
            .get(index)
            .filter(|piece| piece.excerpt <= excerpt)
            .map(|piece| piece.original + (excerpt - piece.excerpt))
    }
}

impl SourceCode for Excerpt<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let start = span.offset();
        let end = start + span.len();
        let index = self.chunks.partition_point(|chunk| chunk.end < start);
        let chunk = self.chunks.get(index).filter(|chunk| chunk.start <= start && end <= chunk.end);
        let Some(chunk) = chunk else {
            return Err(MietteError::OutOfBounds);
        };
        let text = self.text.get(chunk.start..chunk.end).ok_or(MietteError::OutOfBounds)?;
        let local = SourceSpan::from((start - chunk.start)..(end - chunk.start));
        let contents = text.read_span(&local, context_lines_before, context_lines_after)?;
        let data_start = chunk.start + contents.span().offset();
        // Context reads start at a line's start; only a label's own read
        // needs its column counted.
        let at_line_start = data_start == chunk.start || self.text.as_bytes().get(data_start - 1) == Some(&b'\n');
        let column = if at_line_start {
            0
        } else {
            self.to_original(data_start)
                .map_or(0, |original| self.file.line_col(u32::try_from(original).unwrap_or(u32::MAX)).column - 1)
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.file.name.clone(),
            contents.data(),
            SourceSpan::from(data_start..data_start + contents.data().len()),
            chunk.first_line + contents.line(),
            column,
            // Counted from the file's start, as miette's own sources count
            // it: miette decides from it which snippets to join.
            chunk.first_line + contents.line_count(),
        )))
    }
}

fn line_bounds(file: &SourceFile, offset: usize) -> (usize, usize) {
    file.line_bounds(u32::try_from(offset).unwrap_or(u32::MAX))
}

fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

fn ceil_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset += 1;
    }
    offset
}

/// One diagnostic in the JSON shape of DESIGN.md ("Interfaces other tools
/// rely on"). Field order is the documented one.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JsonDiagnostic {
    /// The file's name as given.
    pub file: String,
    /// The first line, from 1.
    pub line: usize,
    /// The first column, from 1, in characters.
    pub column: usize,
    /// The last line.
    pub end_line: usize,
    /// The column after the last character.
    pub end_column: usize,
    /// `error` or `warning`.
    pub severity: &'static str,
    /// The code's stable name.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
    /// What to do, if anything.
    pub help: Option<String>,
}

/// The JSON shape of one diagnostic in `file`.
pub fn to_json(file: &SourceFile, diagnostic: &Diagnostic) -> JsonDiagnostic {
    let span = diagnostic.primary_span().unwrap_or_default();
    let start = file.line_col(span.start);
    let end = file.line_col(span.end);
    JsonDiagnostic {
        file: file.name.clone(),
        line: start.line,
        column: start.column,
        end_line: end.line,
        end_column: end.column,
        severity: diagnostic.severity.as_str(),
        code: diagnostic.code.as_str(),
        message: diagnostic.message.clone(),
        help: diagnostic.help.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Code;
    use crate::source::Span;

    #[test]
    fn human_rendering_names_code_label_and_help() {
        let file = SourceFile::new("a.flow", "flow booking {\n  step ask { next nowhere }\n}\n");
        let diagnostic = Diagnostic::new(Code::UnknownTarget, "`nowhere` names no step or flow")
            .at(Span::new(32, 39), "no step or flow has this id")
            .with_help("did you mean `ask`?");
        let out = render_human(&file, &diagnostic, Style::PLAIN);
        assert!(out.contains("flowc::unknown_target"), "{out}");
        assert!(out.contains("no step or flow has this id"), "{out}");
        assert!(out.contains("did you mean `ask`?"), "{out}");
        assert!(out.contains("a.flow:2:18"), "{out}");
    }

    #[test]
    fn a_long_line_is_clipped_around_the_label_with_the_true_column() {
        let text = format!("flow a \"{}\" {{ x }}\nnext line\n", "é".repeat(70_000));
        let at = text.find("x }").unwrap_or_default();
        let file = SourceFile::new("long.flow", text.as_str());
        let diagnostic = Diagnostic::new(Code::Syntax, "unexpected `x`")
            .at(Span::from_range(at..at + 1), "unexpected here")
            .with_label(Span::new(0, 4), "in this flow");
        let out = render_human(&file, &diagnostic, Style::PLAIN);
        let column = file.line_col(u32::try_from(at).unwrap_or_default()).column;
        assert!(out.contains(&format!("[long.flow:1:{column}]")), "{out}");
        assert!(out.contains("éé\" { x }"), "{out}");
        assert!(out.contains("flow a \"éé"), "both ends of the line are shown: {out}");
        assert!(out.contains("…"), "{out}");
        assert!(out.contains("2 │ next line"), "line numbers are the file's: {out}");
        assert!(out.lines().all(|line| line.chars().count() < 300), "{out}");
    }

    #[test]
    fn labels_far_apart_keep_their_own_line_numbers() {
        let lines: Vec<String> = (1..=40).map(|number| format!("line {number}")).collect();
        let text = lines.join("\n");
        let file = SourceFile::new("far.flow", text.as_str());
        let second = text.find("line 5\n").unwrap_or_default();
        let last = text.find("line 40").unwrap_or_default();
        let diagnostic = Diagnostic::new(Code::Syntax, "two places")
            .at(Span::from_range(last..last + 4), "here")
            .with_label(Span::from_range(second..second + 4), "and here");
        let out = render_human(&file, &diagnostic, Style::PLAIN);
        assert!(out.contains("[far.flow:40:1]"), "{out}");
        assert!(out.contains("5 │ line 5"), "{out}");
        assert!(out.contains("40 │ line 40"), "{out}");
        assert!(!out.contains("line 20"), "only the labels' lines and their neighbours: {out}");
    }

    #[test]
    fn json_positions_are_one_based() {
        let file = SourceFile::new("a.flow", "x\nabc\n");
        let diagnostic = Diagnostic::new(Code::Syntax, "bad").at(Span::new(3, 5), "here");
        let json = to_json(&file, &diagnostic);
        assert_eq!((json.line, json.column, json.end_line, json.end_column), (2, 2, 2, 4));
    }
}
