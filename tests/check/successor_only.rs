//! Only `src/ir/successor.rs` decides where a step goes next (issue 20):
//! code elsewhere that matches on a step's `next` (`Next::`), a branch
//! target (`Then::Step`), a position's jump (`Position::Goto`,
//! `GotoStep`, `Complete`, `Reset`) or a flow's `complete_next` works
//! out "where next" by itself, and can disagree with what the checker
//! proves, the graph draws and the runners do. The test reads the
//! library's code (test code left out) and fails on such a match.
//!
//! Left out: the IR's definition (`src/ir/mod.rs`), what builds it
//! (`src/ir/lower/`) and the front ends before it (`src/syntax/`).

use std::path::{Path, PathBuf};

/// What reads a step's successor by itself.
const PATTERNS: &[&str] = &[
    "Next::",
    "Then::Step",
    "Position::Goto",
    "Position::GotoStep",
    "Position::Complete",
    "Position::Reset",
    "complete_next",
];

/// Files that still match, each with why: each names a position, `next`
/// or an edge kind in words and decides nothing. An entry whose file no
/// longer matches fails the test, so this list only shrinks.
const ALLOWED: &[(&str, &str)] = &[
    (
        "src/graph/label.rs",
        "writes a position (`goto_step flow.step`, `complete, next f`) as an edge's label text, deciding nothing",
    ),
    (
        "src/serve/page/graph.rs",
        "names the graph model's edge kinds in its JSON (`\"complete_next\"`), deciding nothing",
    ),
];

#[test]
fn only_the_successor_rule_decides_where_a_step_goes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect(&root.join("src"), &mut files);
    let mut offenders: Vec<(String, String)> = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(root).unwrap_or(file).to_string_lossy().replace('\\', "/");
        let left_out = relative == "src/ir/successor.rs"
            || relative == "src/ir/mod.rs"
            || relative.starts_with("src/ir/lower/")
            || relative.starts_with("src/syntax/")
            || relative.ends_with("/tests.rs")
            || relative.contains("/tests/");
        if left_out {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for pattern in PATTERNS {
            if code.contains(pattern) {
                offenders.push((relative.clone(), (*pattern).to_string()));
            }
        }
    }
    assert!(
        offenders.iter().any(|(file, _)| file == "src/graph/label.rs"),
        "the scan must see the graph labels' matches: {offenders:?}"
    );
    for (file, _) in ALLOWED {
        assert!(
            offenders.iter().any(|(offender, _)| offender == file),
            "`{file}` no longer works out where a step goes: remove it from ALLOWED"
        );
    }
    let unexpected: Vec<String> = offenders
        .iter()
        .filter(|(file, _)| !ALLOWED.iter().any(|(allowed, _)| allowed == file))
        .map(|(file, pattern)| format!("{file}: `{pattern}`"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "code outside src/ir/successor.rs works out where a step goes; ask `ir::successor` instead:\n{}",
        unexpected.join("\n")
    );
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            out.push(path);
        }
    }
}
