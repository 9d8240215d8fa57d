//! The library's top-level modules (`syntax`, `ir`, `check`, `runtime`, …)
//! depend on each other without cycles, so each can be read, tested and
//! changed knowing only the modules below it. The test reads `src/**/*.rs`,
//! collects every `crate::<module>` a module's code names, and fails on a
//! cycle, naming the files whose references close it.
//!
//! Test code (`#[cfg(test)]` items and the files they declare) is left out:
//! a unit test may build its input with the whole pipeline (the checker's
//! tests compile programs with `crate::pipeline`) without the checker
//! depending on the pipeline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Dependencies that close a cycle today and could not be removed yet,
/// each as (from, to): `from` names `to` although `to` (indirectly) names
/// `from`. The next session that may change the file named beside an entry
/// removes it. An entry whose dependency no longer exists fails the test,
/// so this list only shrinks.
const ALLOWED: &[(&str, &str)] = &[];

/// One module naming another, and the files where it does.
pub(super) type Edges = BTreeMap<(String, String), BTreeSet<String>>;

#[test]
fn top_level_modules_do_not_depend_on_each_other_in_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    assert!(modules.len() > 5, "found only {modules:?} in src/lib.rs");
    let edges = references(&src, &modules);
    assert!(
        edges.contains_key(&("check".to_string(), "ir".to_string())),
        "the scan must see `check` use `ir`: {:?}",
        edges.keys().collect::<Vec<_>>()
    );

    for (from, to) in ALLOWED {
        assert!(
            edges.contains_key(&(from.to_string(), to.to_string())),
            "`{from}` no longer names `{to}`: remove the entry from ALLOWED"
        );
    }
    let kept: Edges = edges
        .iter()
        .filter(|((from, to), _)| !ALLOWED.contains(&(from.as_str(), to.as_str())))
        .map(|(edge, files)| (edge.clone(), files.clone()))
        .collect();
    if let Some(cycle) = find_cycle(&kept) {
        let mut message = String::from("top-level modules depend on each other in a cycle:\n");
        for pair in cycle.windows(2) {
            let (from, to) = (&pair[0], &pair[1]);
            let files = kept.get(&(from.clone(), to.clone())).map(|files| files.iter().cloned().collect::<Vec<_>>());
            message.push_str(&format!("  {from} -> {to}   ({})\n", files.unwrap_or_default().join(", ")));
        }
        panic!("{message}");
    }
}

/// Dependencies that must never exist, even without a cycle today, each as
/// (from, to, why). The command line wires everything together, so the
/// server and the shared run execution never reach back into it.
const FORBIDDEN: &[(&str, &str, &str)] = &[
    ("serve", "cli", "the command line starts the server; what both need belongs in the library"),
    ("stored_run", "cli", "stored-run execution is shared by the command line and the server"),
    ("stored_run", "serve", "stored-run execution is shared by the command line and the server"),
    ("runtime", "store", "the store keeps the runtime's types; `stored_run` joins the two"),
];

#[test]
fn forbidden_dependencies_do_not_exist() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    for (from, to, _) in FORBIDDEN {
        assert!(modules.contains(*from) && modules.contains(*to), "`{from}` or `{to}` is no module of src/lib.rs");
    }
    let edges = references(&src, &modules);
    for (from, to, why) in FORBIDDEN {
        if let Some(files) = edges.get(&(from.to_string(), to.to_string())) {
            panic!("`{from}` names `crate::{to}` ({}): {why}", files.iter().cloned().collect::<Vec<_>>().join(", "));
        }
    }
}

/// The `mod` declarations of `src/lib.rs`.
pub(super) fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let declared = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            Some(declared.trim_end_matches(';').trim().to_string())
        })
        .collect()
}

/// Every `(from, to)` where code in module `from` names `crate::to`.
pub(super) fn references(src: &Path, modules: &BTreeSet<String>) -> Edges {
    let sources = library_code(src);
    let mut edges = Edges::new();
    for (file, code) in sources {
        let relative = file.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        let Some(from) = owning_module(&relative, modules) else {
            continue;
        };
        for to in named_modules(&code) {
            if to != from && modules.contains(&to) {
                edges.entry((from.clone(), to)).or_default().insert(format!("src/{relative}"));
            }
        }
    }
    edges
}

/// Every file of `src/` with its code, test code left out, and without the
/// files only test modules declare.
pub(super) fn library_code(src: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    collect_rust_files(src, &mut files);
    files.sort();
    let mut test_files = BTreeSet::new();
    let mut sources = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let (code, test_modules) = without_test_code(&text);
        for name in test_modules {
            test_files.insert(declared_file(file, &name, ".rs"));
            test_files.insert(declared_file(file, &name, "/mod.rs"));
        }
        sources.push((file.clone(), code));
    }
    sources.retain(|(file, _)| !test_files.contains(file));
    sources
}

fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rust_files(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src/` belongs to (none for the crate
/// root and the binary).
fn owning_module(relative: &str, modules: &BTreeSet<String>) -> Option<String> {
    let first = relative.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    modules.contains(name).then(|| name.to_string())
}

/// Where `mod name;` declared in `file` lives.
fn declared_file(file: &Path, name: &str, suffix: &str) -> PathBuf {
    let dir = file.parent().expect("a file in a directory");
    let stem = file.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default();
    let base = if matches!(stem, "mod" | "lib" | "main") { dir.to_path_buf() } else { dir.join(stem) };
    PathBuf::from(format!("{}{suffix}", base.join(name).display()))
}

/// The file's code without comments and without `#[cfg(test)]` items, and
/// the names of the test modules it declares in other files. Relies on
/// rustfmt's layout: an item's closing brace is alone on a line at the
/// item's indentation.
fn without_test_code(text: &str) -> (String, Vec<String>) {
    let mut code = String::new();
    let mut test_modules = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if !trimmed.starts_with("#[cfg(test)]") {
            let without_comment = trimmed.split("//").next().unwrap_or_default();
            code.push_str(without_comment);
            code.push('\n');
            continue;
        }
        let indent = &line[..line.len() - trimmed.len()];
        // The item the attribute applies to: past further attributes.
        let item = lines.by_ref().map(str::trim).find(|line| !line.starts_with("#[")).unwrap_or_default();
        if item.ends_with(';') {
            let declared = item.strip_prefix("pub(crate) ").unwrap_or(item);
            if let Some(name) = declared.strip_prefix("mod ") {
                test_modules.push(name.trim_end_matches(';').trim().to_string());
            }
            continue;
        }
        let closing = format!("{indent}}}");
        for line in lines.by_ref() {
            if line == closing {
                break;
            }
        }
    }
    (code, test_modules)
}

/// The top-level names after `crate::`, including each of a group
/// (`crate::{a, b::c}`).
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (index, _) in code.match_indices("crate::") {
        let rest = &code[index + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => names.extend(group_heads(group)),
            None => {
                names.insert(identifier(rest));
            }
        }
    }
    names.retain(|name| !name.is_empty());
    names
}

/// The first name of each member of a `{...}` group, up to its closing brace.
fn group_heads(group: &str) -> Vec<String> {
    group_members(group).iter().map(|member| identifier(member)).collect()
}

/// The identifier `text` starts with.
fn identifier(text: &str) -> String {
    text.chars().take_while(|character| character.is_alphanumeric() || *character == '_').collect()
}

/// A cycle in the graph, as the modules along it with the first repeated
/// at the end, if there is one.
fn find_cycle(edges: &Edges) -> Option<Vec<String>> {
    let mut successors: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        successors.entry(from.as_str()).or_default().push(to.as_str());
    }
    // Depth-first, keeping the current path: an edge back into the path is
    // a cycle.
    let mut finished: BTreeSet<&str> = BTreeSet::new();
    for start in successors.keys() {
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        while let Some((node, next)) = path.last_mut() {
            let node = *node;
            let children = successors.get(node).map(Vec::as_slice).unwrap_or_default();
            let Some(child) = children.get(*next).copied() else {
                finished.insert(node);
                path.pop();
                continue;
            };
            *next += 1;
            if let Some(position) = path.iter().position(|(on_path, _)| *on_path == child) {
                let mut cycle: Vec<String> = path[position..].iter().map(|(name, _)| name.to_string()).collect();
                cycle.push(child.to_string());
                return Some(cycle);
            }
            if !finished.contains(child) {
                path.push((child, 0));
            }
        }
    }
    None
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_only_a_cycle() {
    let graph = |pairs: &[(&str, &str)]| -> Edges {
        pairs.iter().map(|(from, to)| ((from.to_string(), to.to_string()), BTreeSet::new())).collect()
    };
    assert_eq!(find_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    let cycle = find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
    assert_eq!(cycle, Some(vec!["a".to_string(), "b".to_string(), "c".to_string(), "a".to_string()]));
    let code = without_test_code(
        "use crate::ir::Program;\n// crate::cli in a comment\nuse crate::{expr::Expr, source::Span};\n\
         #[cfg(test)]\nmod tests {\n    use crate::pipeline;\n}\n#[cfg(test)]\nmod fixtures;\n",
    );
    assert_eq!(code.1, vec!["fixtures".to_string()]);
    let named: Vec<String> = named_modules(&code.0).into_iter().collect();
    assert_eq!(named, vec!["expr".to_string(), "ir".to_string(), "source".to_string()]);
}

/// Dependencies between sibling modules that close a cycle today, as
/// (parent, from, to), listed like [`ALLOWED`]: an entry whose dependency
/// no longer exists fails the test, so the list only shrinks.
const ALLOWED_SIBLINGS: &[(&str, &str, &str)] = &[];

/// A module's path below the crate (`["runtime", "turn", "route"]`).
type ModulePath = Vec<String>;

/// Sibling dependencies per parent module: (parent, from, to) and the
/// files where `from` names `to`.
type SiblingEdges = BTreeMap<(String, String, String), BTreeSet<String>>;

#[test]
fn modules_at_every_level_do_not_depend_on_each_other_in_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = sibling_references(&src);
    assert!(
        edges.keys().any(|(parent, from, to)| parent == "check" && from == "assignment" && to == "reachability"),
        "the scan must see `check::assignment` use `check::reachability` (through `super::`)"
    );
    // The turn's stages are functions calling each other through imports
    // (issue 20): the scan must see them, or a cycle between stages would
    // pass unseen.
    assert!(
        edges.keys().any(|(parent, from, to)| parent == "runtime::engine" && from == "resolve" && to == "route"),
        "the scan must see the turn's stages call each other (`runtime::engine::resolve` uses `route`)"
    );
    for (parent, from, to) in ALLOWED_SIBLINGS {
        assert!(
            edges.contains_key(&(parent.to_string(), from.to_string(), to.to_string())),
            "`{parent}::{from}` no longer names `{parent}::{to}`: remove the entry from ALLOWED_SIBLINGS"
        );
    }
    let parents: BTreeSet<&String> = edges.keys().map(|(parent, _, _)| parent).collect();
    let mut cycles = Vec::new();
    for parent in parents {
        let among: Edges = edges
            .iter()
            .filter(|((of, from, to), _)| {
                of == parent && !ALLOWED_SIBLINGS.contains(&(of.as_str(), from.as_str(), to.as_str()))
            })
            .map(|((_, from, to), files)| ((from.clone(), to.clone()), files.clone()))
            .collect();
        if let Some(cycle) = find_cycle(&among) {
            let shown = if parent.is_empty() { "the crate" } else { parent.as_str() };
            let mut message = format!("the modules of {shown} depend on each other in a cycle:\n");
            for pair in cycle.windows(2) {
                let files = among.get(&(pair[0].clone(), pair[1].clone())).cloned().unwrap_or_default();
                let files: Vec<String> = files.into_iter().collect();
                message.push_str(&format!("  {} -> {}   ({})\n", pair[0], pair[1], files.join(", ")));
            }
            cycles.push(message);
        }
    }
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

/// Every module's dependencies on its siblings: a file of module `from`
/// (or of a module below it) naming sibling `to` by `crate::`, `super::`
/// or `self::` paths, group members included.
fn sibling_references(src: &Path) -> SiblingEdges {
    let sources = library_code(src);
    let modules: BTreeSet<ModulePath> = sources.iter().filter_map(|(file, _)| module_path(src, file)).collect();
    let mut edges = SiblingEdges::new();
    for (file, code) in &sources {
        let Some(from) = module_path(src, file) else {
            continue;
        };
        let relative = file.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        for to in referenced_paths(code, &from) {
            let common = from.iter().zip(&to).take_while(|(left, right)| left == right).count();
            let (Some(from_child), Some(to_child)) = (from.get(common), to.get(common)) else {
                continue;
            };
            let mut sibling = from[..common].to_vec();
            sibling.push(to_child.clone());
            if !modules.contains(&sibling) {
                continue;
            }
            let parent = from[..common].join("::");
            edges.entry((parent, from_child.clone(), to_child.clone())).or_default().insert(format!("src/{relative}"));
        }
    }
    edges
}

/// The module a file under `src/` is (`runtime/engine/mod.rs` is
/// `runtime::engine`); `None` for the binary's `main.rs`.
fn module_path(src: &Path, file: &Path) -> Option<ModulePath> {
    let relative = file.strip_prefix(src).ok()?.to_string_lossy().replace('\\', "/");
    if relative == "main.rs" {
        return None;
    }
    let mut segments: Vec<String> = relative.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
        segments.pop();
    }
    Some(segments)
}

/// The paths that `code`, in module `at`, names from `crate::`, `super::`
/// (repeated) or `self::`, resolved to paths below the crate; each member
/// of a `{...}` group is one path.
fn referenced_paths(code: &str, at: &[String]) -> BTreeSet<ModulePath> {
    let mut paths = BTreeSet::new();
    let bytes = code.as_bytes();
    for (index, _) in code.match_indices("::") {
        // Find the start of the path this `::` belongs to: only paths
        // starting with `crate`, `super` or `self` are resolved.
        let before = &code[..index];
        let head_start = before
            .rfind(|character: char| !(character.is_alphanumeric() || character == '_'))
            .map_or(0, |position| position + 1);
        let head = &before[head_start..];
        let preceded_by_path = head_start >= 2 && &bytes[head_start - 2..head_start] == b"::";
        if preceded_by_path || !matches!(head, "crate" | "super" | "self") {
            continue;
        }
        let mut base: ModulePath = match head {
            "crate" => Vec::new(),
            "self" => at.to_vec(),
            _ => at[..at.len().saturating_sub(1)].to_vec(),
        };
        let mut rest = &code[index + 2..];
        while let Some(after) = rest.strip_prefix("super::") {
            base.pop();
            rest = after;
        }
        match rest.strip_prefix('{') {
            Some(group) => {
                for member in group_members(group) {
                    let mut path = base.clone();
                    path.extend(segments(&member));
                    paths.insert(path);
                }
            }
            None => {
                let mut path = base;
                path.extend(segments(rest));
                paths.insert(path);
            }
        }
    }
    paths
}

/// The members of a `{...}` group, up to its closing brace.
fn group_members(group: &str) -> Vec<String> {
    let mut members = vec![String::new()];
    let mut depth = 0usize;
    for character in group.chars() {
        match character {
            '}' if depth == 0 => break,
            ',' if depth == 0 => members.push(String::new()),
            _ => {
                match character {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                members.last_mut().expect("one member at least").push(character);
            }
        }
    }
    members.into_iter().map(|member| member.trim().to_string()).collect()
}

/// The `::`-separated names a path starts with (`a::b::{c}` gives a, b).
fn segments(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text.trim_start();
    loop {
        let name = identifier(rest);
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        names.push(name);
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => break,
        }
    }
    names
}

#[test]
fn paths_resolve_from_the_module_that_names_them() {
    let at: Vec<String> = ["runtime", "turn", "understand"].iter().map(|name| name.to_string()).collect();
    let paths = referenced_paths(
        "use super::route::leave;\nuse super::super::actions::{Scope, run};\nuse crate::{ir::successor::{self, Jump}, expr};\n\
         let x = self::helper();\n",
        &at,
    );
    let shown: Vec<String> = paths.iter().map(|path| path.join("::")).collect();
    assert_eq!(
        shown,
        vec![
            "expr",
            "ir::successor",
            "runtime::actions",
            "runtime::turn::route::leave",
            "runtime::turn::understand::helper",
        ]
    );
}
