//! The reports of a test run: one line per case and the differences of a
//! failing one (human, on stdout), one JSON document (`--format json`),
//! and JUnit XML (`--junit FILE`) for CI systems.

use super::case::CaseResult;
use super::expect::Failure;
use super::{Format, Loaded, TestArgs};
use crate::cli::{Outcome, print_stdout};
use serde_json::{Value, json};
use std::fmt::Write as _;

pub fn write(
    args: &TestArgs,
    loaded: &[Loaded],
    jobs: &[(usize, usize)],
    results: &[CaseResult],
    broken: usize,
) -> Outcome {
    let mut outcome = match args.format {
        Format::Human => print_stdout(&human(loaded, jobs, results)),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&to_json(loaded, jobs, results, broken)).unwrap_or_default();
            text.push('\n');
            print_stdout(&text)
        }
    };
    if let Some(path) = &args.junit
        && let Err(error) = std::fs::write(path, junit(loaded, jobs, results))
    {
        eprintln!("error: cannot write `{}`: {error}", path.display());
        outcome = outcome.worst(Outcome::Error);
    }
    outcome
}

/// `path:line:col` of a failure in its test file.
fn place(loaded: &Loaded, failure: &Failure) -> String {
    let source = &loaded.file.source;
    match failure.span {
        Some(span) => {
            let at = source.line_col(span.start);
            format!("{}:{}:{}", source.name, at.line, at.column)
        }
        None => source.name.clone(),
    }
}

pub fn human(loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult]) -> String {
    let mut out = String::new();
    for (&(file_index, _), result) in jobs.iter().zip(results) {
        let Some(file) = loaded.get(file_index) else { continue };
        let status = if result.failures.is_empty() { "ok  " } else { "FAIL" };
        let _ = writeln!(out, "{status} {} › {}", file.file.source.name, result.name);
        for failure in &result.failures {
            let _ = writeln!(out, "     {}, {}: {}", failure.location, place(file, failure), failure.expectation);
            let _ = writeln!(out, "       expected: {}", failure.expected);
            let _ = writeln!(out, "       actual:   {}", failure.actual);
        }
        // The events once per case: every failure of a case is of one turn.
        if let Some(failure) = result.failures.iter().find(|failure| !failure.events.is_empty()) {
            let _ = writeln!(out, "     events of {}:", failure.location);
            for event in &failure.events {
                let _ = writeln!(out, "       {event}");
            }
        }
    }
    out
}

fn to_json(loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult], broken: usize) -> Value {
    let cases: Vec<Value> = jobs
        .iter()
        .zip(results)
        .filter_map(|(&(file_index, _), result)| {
            let file = loaded.get(file_index)?;
            let failures: Vec<Value> = result
                .failures
                .iter()
                .map(|failure| {
                    let mut value = serde_json::to_value(failure).unwrap_or_default();
                    if let Value::Object(object) = &mut value {
                        object.insert("at".to_string(), json!(place(file, failure)));
                    }
                    value
                })
                .collect();
            Some(json!({
                "file": file.file.source.name,
                "case": result.name,
                "passed": result.failures.is_empty(),
                "failures": failures,
                "transcript": result.transcript,
            }))
        })
        .collect();
    let failed = results.iter().filter(|result| !result.failures.is_empty()).count();
    json!({
        "passed": results.len() - failed,
        "failed": failed,
        "files_with_errors": broken,
        "cases": cases,
    })
}

fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to write other control characters.
            '\n' | '\t' | '\r' => out.push(character),
            control if control.is_control() => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

/// One `<testsuite>` per test file, one `<testcase>` per case.
pub fn junit(loaded: &[Loaded], jobs: &[(usize, usize)], results: &[CaseResult]) -> String {
    let failed = results.iter().filter(|result| !result.failures.is_empty()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"flowc test\" tests=\"{}\" failures=\"{failed}\">", results.len());
    for (file_index, file) in loaded.iter().enumerate() {
        let cases: Vec<&CaseResult> =
            jobs.iter().zip(results).filter(|((index, _), _)| *index == file_index).map(|(_, result)| result).collect();
        if cases.is_empty() {
            continue;
        }
        let failures = cases.iter().filter(|result| !result.failures.is_empty()).count();
        let name = xml(&file.file.source.name);
        let _ = writeln!(out, "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\">", cases.len());
        for result in cases {
            let _ = write!(out, "    <testcase classname=\"{name}\" name=\"{}\"", xml(&result.name));
            let Some(first) = result.failures.first() else {
                out.push_str("/>\n");
                continue;
            };
            out.push_str(">\n");
            let message = format!("{} {}: expected {}", first.location, first.expectation, first.expected);
            let mut details = String::new();
            for failure in &result.failures {
                let _ = writeln!(details, "{}, {}: {}", failure.location, place(file, failure), failure.expectation);
                let _ = writeln!(details, "  expected: {}\n  actual:   {}", failure.expected, failure.actual);
            }
            let _ = writeln!(out, "      <failure message=\"{}\">{}</failure>", xml(&message), xml(&details));
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::xml;

    #[test]
    fn xml_text_cannot_break_out_of_its_element() {
        assert_eq!(xml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
        assert_eq!(xml("bell\u{7}line\nnext"), "bell line\nnext");
    }
}
