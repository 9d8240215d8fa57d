//! `flowc check` as its users meet it: every diagnostic code on a minimal
//! broken program (`tests/fixtures/check/<code>/<case>.flow|.yaml`, each
//! declaring what it expects), valid programs that must check clean
//! (`tests/fixtures/ok/`, and the examples in `flows/`), snapshots of the
//! human rendering, the documentation of every code, and (in the modules)
//! the command-line interface, bad-input properties and the absence of
//! cycles between the library's top-level modules.
//!
//! A fixture declares its expectations in comments, one or more per line:
//!
//! ```text
//! # expect: unknown_target 7
//! # expect: maybe_unset 12, unreachable_step 15
//! ```
//!
//! (a code and the 1-based line its primary span starts on). The set of
//! (code, line) a fixture produces must equal the set it declares.

#[path = "check/cli.rs"]
mod cli;
#[path = "check/fuzz.rs"]
mod fuzz;
#[path = "check/layers.rs"]
mod layers;
#[path = "check/modules.rs"]
mod modules;
#[path = "check/props.rs"]
mod props;
#[path = "check/stress.rs"]
mod stress;
#[path = "check/successor_only.rs"]
mod successor_only;

use flowc::diag::Code;
use flowc::diag::render::{Style, render_human};
use flowc::pipeline::compile;
use flowc::source::SourceFile;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures")
}

/// Every program file below `dir`, sorted.
fn program_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if matches!(path.extension().and_then(|ext| ext.to_str()), Some("flow" | "yaml" | "yml"))
                && !flowc::source::is_test_file(&path)
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A program as the checker sees it, named by its path from the repository
/// root (stable across machines).
fn load(path: &Path) -> SourceFile {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let name = path.strip_prefix(root()).unwrap_or(path).to_string_lossy().replace('\\', "/");
    SourceFile::new(name, text)
}

/// The (code, line) pairs a fixture declares.
fn expected(file: &SourceFile) -> BTreeSet<(String, usize)> {
    let mut pairs = BTreeSet::new();
    for (index, line) in file.text.lines().enumerate() {
        let Some((_, declared)) = line.split_once("# expect:") else {
            continue;
        };
        for item in declared.split(',') {
            let mut words = item.split_whitespace();
            let (Some(code), Some(at), None) = (words.next(), words.next(), words.next()) else {
                panic!("{}:{}: write `# expect: CODE LINE`", file.name, index + 1);
            };
            let at: usize =
                at.parse().unwrap_or_else(|_| panic!("{}:{}: `{at}` is not a line number", file.name, index + 1));
            pairs.insert((code.to_string(), at));
        }
    }
    pairs
}

/// The (code, line) pairs the checker reports.
fn actual(file: &SourceFile) -> BTreeSet<(String, usize)> {
    compile(file)
        .diagnostics
        .iter()
        .map(|diagnostic| {
            let start = diagnostic.primary_span().unwrap_or_default().start;
            (diagnostic.code.as_str().to_string(), file.line_col(start).line)
        })
        .collect()
}

fn show(pairs: &BTreeSet<(String, usize)>) -> String {
    pairs.iter().map(|(code, line)| format!("{code} {line}")).collect::<Vec<_>>().join(", ")
}

#[test]
fn broken_fixtures_report_exactly_what_they_declare() {
    let files = program_files(&fixtures().join("check"));
    assert!(!files.is_empty(), "no fixtures found");
    let mut failures = Vec::new();
    for path in &files {
        let file = load(path);
        let expected = expected(&file);
        let actual = actual(&file);
        let code_dir = path.parent().and_then(Path::file_name).and_then(|name| name.to_str()).unwrap_or_default();
        if !expected.iter().any(|(code, _)| code == code_dir) {
            failures.push(format!("{}: declares no `{code_dir}`", file.name));
        }
        if expected != actual {
            failures.push(format!("{}:\n  expected: {}\n  actual:   {}", file.name, show(&expected), show(&actual)));
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn valid_programs_and_examples_check_clean() {
    let mut files = program_files(&fixtures().join("ok"));
    assert!(!files.is_empty(), "no ok fixtures found");
    files.extend(program_files(&root().join("flows")));
    let mut failures = Vec::new();
    for path in &files {
        let file = load(path);
        for diagnostic in compile(&file).diagnostics {
            failures.push(render_human(&file, &diagnostic, Style::PLAIN));
        }
    }
    assert!(failures.is_empty(), "valid programs with diagnostics:\n{}", failures.join("\n"));
}

#[test]
fn every_code_has_a_fixture() {
    let files = program_files(&fixtures().join("check"));
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|code| code.as_str())
        .filter(|code| {
            !files.iter().any(|path| path.parent().and_then(Path::file_name).is_some_and(|dir| dir == *code))
        })
        .collect();
    assert!(missing.is_empty(), "codes without a fixture: {missing:?}");
}

/// docs/diagnostics.md documents every code under a `### `code`` heading,
/// and the first example under each heading reports that code and nothing
/// else.
#[test]
fn every_code_is_documented_with_a_failing_example() {
    let docs = std::fs::read_to_string(root().join("docs/diagnostics.md")).unwrap_or_default();
    let mut failures = Vec::new();
    for code in Code::ALL {
        let heading = format!("### `{}`", code.as_str());
        let Some((_, section)) = docs.split_once(&heading) else {
            failures.push(format!("`{code}` is not documented"));
            continue;
        };
        let section = section.split("\n### ").next().unwrap_or_default();
        let example = ["flow", "yaml"].iter().find_map(|syntax| {
            let (_, rest) = section.split_once(&format!("```{syntax}\n"))?;
            let (body, _) = rest.split_once("```")?;
            Some((*syntax, body))
        });
        let Some((syntax, body)) = example else {
            failures.push(format!("`{code}` has no example"));
            continue;
        };
        let file = SourceFile::new(format!("docs/{code}.{syntax}"), body);
        let found: Vec<&str> = compile(&file).diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
        if found.is_empty() || found.iter().any(|other| *other != code.as_str()) {
            failures.push(format!("the example of `{code}` reports {found:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The human rendering of one representative fixture per code (its
/// `basic` case), with the source it was checked from.
#[test]
fn human_rendering() {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::glob!("fixtures/check/*/basic.*", |path| {
            let file = load(path);
            let mut rendered = String::new();
            for diagnostic in compile(&file).diagnostics {
                rendered.push_str(&render_human(&file, &diagnostic, Style::PLAIN));
                rendered.push('\n');
            }
            insta::assert_snapshot!(format!("{}\n---\n{rendered}", file.text.trim_end()));
        });
    });
}
