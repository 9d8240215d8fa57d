//! Diagnostics on the terminal: the human rendering on stderr (colour only
//! for a terminal without `NO_COLOR` or `TERM=dumb`) and the summary line.

use crate::diag::render::{Style, render_human};
use crate::diag::{DEFAULT_MAX_SHOWN, Diagnostic, left_out_note, shown};
use crate::source::SourceFile;
use std::io::{IsTerminal, Write};

/// The style for stderr, decided once per run.
pub fn stderr_style() -> Style {
    let color = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
        && std::env::var("TERM").map_or(true, |term| term != "dumb");
    let width = std::env::var("COLUMNS").ok().and_then(|columns| columns.parse().ok()).unwrap_or(100);
    Style { color, width }
}

pub fn print_diagnostics(file: &SourceFile, diagnostics: &[Diagnostic], style: Style) {
    print_diagnostics_up_to(file, diagnostics, style, DEFAULT_MAX_SHOWN);
}

/// [`print_diagnostics`], showing at most `limit` (0: all) and a note for
/// the rest.
pub fn print_diagnostics_up_to(file: &SourceFile, diagnostics: &[Diagnostic], style: Style, limit: usize) {
    let (kept, left_out) = shown(diagnostics, limit);
    for diagnostic in kept {
        print_stderr(&format!("{}\n", render_human(file, diagnostic, style)));
    }
    if left_out > 0 {
        print_stderr(&format!("{}\n\n", left_out_note(&file.name, left_out, limit)));
    }
}

/// Writes to stderr. A closed stderr (`flowc check … 2>&1 | head`) must not
/// crash the run or change its exit code: the results are what matters.
pub fn print_stderr(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// Counts of a run, for the summary line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub programs: usize,
    pub errors: usize,
    pub warnings: usize,
}

impl Tally {
    pub fn add(&mut self, diagnostics: &[Diagnostic]) {
        self.programs += 1;
        for diagnostic in diagnostics {
            if diagnostic.is_error() {
                self.errors += 1;
            } else {
                self.warnings += 1;
            }
        }
    }

    /// `checked 12 programs: 2 errors, 1 warning`.
    pub fn summary(&self) -> String {
        let plural = |count: usize, word: &str| {
            if count == 1 { format!("{count} {word}") } else { format!("{count} {word}s") }
        };
        format!(
            "checked {}: {}, {}",
            plural(self.programs, "program"),
            plural(self.errors, "error"),
            plural(self.warnings, "warning")
        )
    }
}
