//! Rendering of [`Diagnostic`]s: rustc-style reports through miette for
//! people, and the JSON objects of DESIGN.md for tools. Both read the same
//! data, so the two outputs can never disagree.

use super::{Diagnostic, Severity};
use crate::source::SourceFile;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};
use serde::Serialize;

/// How human output is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

impl Style {
    /// Plain and fixed-width: what tests and pipes get.
    pub const PLAIN: Style = Style { color: false, width: 100 };
}

/// miette's view of one of our diagnostics.
struct Report<'a> {
    diagnostic: &'a Diagnostic,
    source: NamedSource<String>,
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
        if self.diagnostic.labels.is_empty() { None } else { Some(&self.source) }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let text_len = self.source.inner().len();
        let labels = self.diagnostic.labels.iter().enumerate().map(move |(index, label)| {
            let start = (label.span.start as usize).min(text_len);
            let end = (label.span.end as usize).clamp(start, text_len);
            let span = SourceSpan::from(start..end);
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
        source: NamedSource::new(file.name.clone(), file.text.clone()),
        code: format!("flowc::{}", diagnostic.code.as_str()),
    };
    let mut out = String::new();
    if handler.render_report(&mut out, &report).is_err() {
        // miette only fails on a formatter error; fall back to one line.
        out = format!("{}: {}\n", diagnostic.severity.as_str(), diagnostic.message);
    }
    out
}

/// One diagnostic in the JSON shape of DESIGN.md ("Interfaces other tools
/// rely on"). Field order is the documented one.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JsonDiagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub severity: &'static str,
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
}

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
    fn json_positions_are_one_based() {
        let file = SourceFile::new("a.flow", "x\nabc\n");
        let diagnostic = Diagnostic::new(Code::Syntax, "bad").at(Span::new(3, 5), "here");
        let json = to_json(&file, &diagnostic);
        assert_eq!((json.line, json.column, json.end_line, json.end_column), (2, 2, 2, 4));
    }
}
