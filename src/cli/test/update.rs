//! `--update`: rewrites the expectations of failing cases from what
//! happened, for snapshot-style tests. Each expected value is replaced in
//! place (its span in the file) by what the case saw, written as YAML flow
//! text, so comments and layout around it stay; the diff is shown first.

use super::Loaded;
use super::case::CaseResult;
use crate::cli::Outcome;
use crate::source::Span;
use serde_json::Value;

/// A value as YAML flow text: JSON is valid YAML, and its strings are
/// double-quoted YAML strings with the same escapes.
fn yaml_text(value: &Value) -> String {
    value.to_string()
}

/// The text with each span replaced, last first so earlier spans stay valid.
pub fn apply(text: &str, mut edits: Vec<(Span, String)>) -> String {
    edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
    let mut out = text.to_string();
    let mut last_start = usize::MAX;
    for (span, replacement) in edits {
        let range = span.range();
        // Overlapping spans (one value twice) keep the first edit only.
        if range.end > last_start
            || range.end > out.len()
            || !out.is_char_boundary(range.start)
            || !out.is_char_boundary(range.end)
        {
            continue;
        }
        out.replace_range(range.clone(), &replacement);
        last_start = range.start;
    }
    out
}

/// A line diff of two versions of a file: each changed line, `-` then `+`.
pub fn diff(name: &str, before: &str, after: &str) -> String {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(left, right)| left == right).count();
    let suffix = old.iter().rev().zip(new.iter().rev()).take_while(|(left, right)| left == right).count();
    let suffix = suffix.min(old.len() - prefix).min(new.len() - prefix);
    let mut out = format!("--- {name}\n+++ {name} (updated)\n@@ line {} @@\n", prefix + 1);
    for line in old.get(prefix..old.len() - suffix).unwrap_or_default() {
        out.push_str(&format!("-{line}\n"));
    }
    for line in new.get(prefix..new.len() - suffix).unwrap_or_default() {
        out.push_str(&format!("+{line}\n"));
    }
    out
}

pub fn rewrite(loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult]) -> Outcome {
    let mut outcome = Outcome::Success;
    for (file_index, file) in loaded.iter().enumerate() {
        let edits: Vec<(Span, String)> = jobs
            .iter()
            .zip(results)
            .filter(|((index, _), _)| *index == file_index)
            .flat_map(|(_, result)| result.failures.iter())
            .filter_map(|failure| failure.update.as_ref().map(|(span, value)| (*span, yaml_text(value))))
            .collect();
        if edits.is_empty() {
            continue;
        }
        let before = &file.file.source.text;
        let after = apply(before, edits);
        if after == *before {
            continue;
        }
        crate::cli::report::print_stderr(&diff(&file.file.source.name, before, &after));
        match std::fs::write(&file.file.path, &after) {
            Ok(()) => eprintln!("updated {}", file.file.source.name),
            Err(error) => {
                eprintln!("error: cannot write `{}`: {error}", file.file.path.display());
                outcome = Outcome::Error;
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_replaced_in_place_last_first() {
        let text = "reply: Hi\nstep: ask\n";
        let edits = vec![(Span::new(7, 9), "\"Hello\"".to_string()), (Span::new(16, 19), "\"confirm\"".to_string())];
        assert_eq!(apply(text, edits), "reply: \"Hello\"\nstep: \"confirm\"\n");
    }

    #[test]
    fn the_diff_shows_the_changed_lines() {
        let shown = diff("t.yaml", "a\nb\nc\n", "a\nB\nc\n");
        assert!(shown.ends_with("@@ line 2 @@\n-b\n+B\n"), "{shown}");
    }
}
