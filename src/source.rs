//! Source files and byte spans: the coordinates every diagnostic, AST node and
//! IR node is expressed in. A [`SourceFile`] is built from text its caller
//! read; nothing here reads files.
#![warn(missing_docs)]

use serde::Serialize;
use std::cell::Cell;

/// A half-open byte range `[start, end)` into one source file.
///
/// `u32` keeps AST and IR nodes small; a program over 4 GiB is refused before
/// parsing (see [`SourceFile::new`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Span {
    /// The first byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The bytes `start..end`.
    pub const fn new(start: u32, end: u32) -> Span {
        Span { start, end }
    }

    /// A byte range as a span (offsets past `u32` clamp).
    pub fn from_range(range: std::ops::Range<usize>) -> Span {
        Span::new(clamp_u32(range.start), clamp_u32(range.end))
    }

    /// How many bytes it covers.
    pub fn len(self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    /// Whether it covers no byte.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }

    /// The span as a byte range, to slice the text with.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

fn clamp_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

thread_local! {
    /// Set while [`write_json`] writes without spans.
    static SPANS_OMITTED: Cell<bool> = const { Cell::new(false) };
}

/// The `skip_serializing_if` of every `span` field of the AST and the IR:
/// spans are left out of `flowc compile` unless asked for. A flag read
/// while serializing, rather than removing the keys from a JSON tree
/// afterwards, lets the output stream: a JSON tree of a large program's IR
/// is many times the size of the IR itself.
pub fn spans_omitted(_: &Span) -> bool {
    SPANS_OMITTED.get()
}

/// Writes `value` (the AST, the IR or a part of either) as JSON, with or
/// without its `span` fields.
pub fn write_json<T: Serialize + ?Sized>(
    value: &T,
    with_spans: bool,
    pretty: bool,
    out: impl std::io::Write,
) -> serde_json::Result<()> {
    /// Restores the flag even when serializing fails or unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SPANS_OMITTED.set(self.0);
        }
    }
    let _restore = Restore(SPANS_OMITTED.replace(!with_spans));
    if pretty { serde_json::to_writer_pretty(out, value) } else { serde_json::to_writer(out, value) }
}

/// A value with the span it was read from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spanned<T> {
    /// What was read.
    pub value: T,
    /// Where it was read from.
    #[serde(skip_serializing_if = "crate::source::spans_omitted")]
    pub span: Span,
}

impl<T> Spanned<T> {
    /// `value`, read from `span`.
    pub fn new(value: T, span: Span) -> Spanned<T> {
        Spanned { value, span }
    }
}

/// The largest program flowc accepts, so that every offset fits a [`Span`].
pub const MAX_SOURCE_LEN: usize = u32::MAX as usize - 1;

/// One program's text with its display name and a line index for
/// turning byte offsets into 1-based line and column numbers.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The name diagnostics show (a path, usually); its extension decides
    /// the front end ([`SourceFile::kind`]).
    pub name: String,
    /// The program's text.
    pub text: String,
    line_starts: Vec<u32>,
    /// How many UTF-8 continuation bytes come before each block of
    /// [`COLUMN_BLOCK`] bytes: with it a column costs at most one block's
    /// scan, not the whole line's, so reporting many diagnostics on one
    /// long line stays linear.
    continuations_before_block: Vec<u32>,
}

/// The block size of [`SourceFile`]'s column index.
const COLUMN_BLOCK: usize = 4096;

/// Whether a byte continues a multi-byte UTF-8 character (it does not start
/// one): a column counts characters, so it is the byte count less these.
fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// A 1-based line and column (the column counts characters, as rustc does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineCol {
    /// The line, from 1.
    pub line: usize,
    /// The column in characters, from 1.
    pub column: usize,
}

impl SourceFile {
    /// A program's text under a display name, indexed for line and column
    /// lookups.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let mut line_starts = vec![0u32];
        line_starts
            .extend(text.bytes().enumerate().filter(|(_, byte)| *byte == b'\n').map(|(index, _)| clamp_u32(index + 1)));
        let mut continuations_before_block = Vec::with_capacity(text.len() / COLUMN_BLOCK + 1);
        let mut continuations = 0u32;
        for block in text.as_bytes().chunks(COLUMN_BLOCK) {
            continuations_before_block.push(continuations);
            let in_block = block.iter().filter(|byte| is_continuation(**byte)).count();
            continuations = continuations.saturating_add(clamp_u32(in_block));
        }
        SourceFile { name: name.into(), text, line_starts, continuations_before_block }
    }

    /// The UTF-8 continuation bytes in `text[..offset]`.
    fn continuations_before(&self, offset: usize) -> usize {
        let block = offset / COLUMN_BLOCK;
        let before_block = self.continuations_before_block.get(block).copied().unwrap_or(0) as usize;
        let after_block = self.continuations_before_block.get(block + 1).map(|&count| count as usize);
        if after_block == Some(before_block) {
            // An ASCII block (the common case): nothing to count.
            return before_block;
        }
        let in_block = self
            .text
            .as_bytes()
            .get(block * COLUMN_BLOCK..offset)
            .map_or(0, |bytes| bytes.iter().filter(|byte| is_continuation(**byte)).count());
        before_block + in_block
    }

    /// Which front end reads it, by its name's extension.
    pub fn kind(&self) -> SourceKind {
        SourceKind::from_path(&self.name)
    }

    /// The 0-based line holding a byte offset (past the end: the last).
    fn line_index(&self, offset: u32) -> usize {
        let offset = offset.min(clamp_u32(self.text.len()));
        match self.line_starts.binary_search(&offset) {
            Ok(index) => index,
            Err(index) => index.saturating_sub(1),
        }
    }

    /// The line holding a byte offset: where it starts, and where its `\n`
    /// (or the end of the text) is. Found without reading the line, so a
    /// long line costs no more than a short one.
    pub fn line_bounds(&self, offset: u32) -> (usize, usize) {
        let index = self.line_index(offset);
        let start = self.line_starts.get(index).map_or(0, |&start| start as usize);
        let end = self.line_starts.get(index + 1).map_or(self.text.len(), |&next| (next as usize).saturating_sub(1));
        (start, end)
    }

    /// Line and column of a byte offset; offsets past the end clamp to it.
    pub fn line_col(&self, offset: u32) -> LineCol {
        let offset = offset.min(clamp_u32(self.text.len()));
        let line_index = self.line_index(offset);
        let line_start = self.line_starts.get(line_index).copied().unwrap_or(0) as usize;
        let mut end = offset as usize;
        while end > line_start && !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let column = (end - line_start) - (self.continuations_before(end) - self.continuations_before(line_start));
        LineCol { line: line_index + 1, column: column + 1 }
    }

    /// The source text of a span, or "" when the span does not fall on
    /// character boundaries.
    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }
}

/// Whether a path is a `flowc test` file by its name (`*.test.yaml`): a
/// walk for programs leaves these out, though their extension is YAML's.
pub fn is_test_file(path: &std::path::Path) -> bool {
    path.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.ends_with(".test.yaml"))
}

/// Which front end reads a file, decided by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// flowc's own syntax (`.flow`).
    Flow,
    /// YAML (`.yaml`, `.yml`).
    Yaml,
}

impl SourceKind {
    /// The front end for a file name: YAML for `.yaml`/`.yml`, else `.flow`.
    pub fn from_path(path: &str) -> SourceKind {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".yaml") || lower.ends_with(".yml") { SourceKind::Yaml } else { SourceKind::Flow }
    }

    /// Whether a path names a program flowc reads (any case, as
    /// [`SourceKind::from_path`] reads it).
    pub fn is_program_path(path: &std::path::Path) -> bool {
        let extension = path.extension().and_then(|ext| ext.to_str()).map(str::to_ascii_lowercase);
        matches!(extension.as_deref(), Some("flow" | "yaml" | "yml"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_is_one_based_and_counts_characters() {
        let file = SourceFile::new("a.flow", "ab\nçd\n");
        assert_eq!(file.line_col(0), LineCol { line: 1, column: 1 });
        assert_eq!(file.line_col(3), LineCol { line: 2, column: 1 });
        // `ç` is two bytes: the `d` after it is the second character.
        assert_eq!(file.line_col(5), LineCol { line: 2, column: 2 });
        assert_eq!(file.line_col(99), LineCol { line: 3, column: 1 });
    }

    #[test]
    fn line_col_counts_characters_across_column_index_blocks() {
        let line = "é".repeat(COLUMN_BLOCK) + "x";
        let text = format!("ab\n{line}\n");
        let file = SourceFile::new("a.flow", text.as_str());
        let x_offset = u32::try_from(text.find('x').unwrap_or(0)).unwrap_or(0);
        assert_eq!(file.line_col(x_offset), LineCol { line: 2, column: COLUMN_BLOCK + 1 });
        // Inside a character: the column of the character it belongs to.
        assert_eq!(file.line_col(x_offset - 1), LineCol { line: 2, column: COLUMN_BLOCK });
    }

    #[test]
    fn line_bounds_end_at_the_line_break() {
        let file = SourceFile::new("a.flow", "ab\nçd\n");
        assert_eq!(file.line_bounds(0), (0, 2));
        assert_eq!(file.line_bounds(2), (0, 2));
        assert_eq!(file.line_bounds(4), (3, 6));
        assert_eq!(file.line_bounds(7), (7, 7));
        assert_eq!(file.line_bounds(99), (7, 7));
    }

    #[test]
    fn span_to_covers_both() {
        assert_eq!(Span::new(4, 6).to(Span::new(1, 2)), Span::new(1, 6));
    }
}
