//! Which top-level modules may use what, beyond having no cycle
//! (`modules.rs`): the rules docs/architecture.md states, each kept here.
//!
//! - The store keeps sessions and runs; it does not know the model: it
//!   names no `crate::llm` (a session's messages are `crate::message`'s,
//!   `flowc.toml` is `crate::config`'s).
//! - Providers never see the program: `llm` names neither the IR nor the
//!   runtime or the store; the runtime builds their requests.
//! - The neutral modules that several layers share (`read`, `message`,
//!   `config`, `duration`, `ids`, `source`) name none of the layers that
//!   use them.
//! - The pure core does no I/O: its code (tests aside) names no file
//!   system, network, process, environment, terminal, async runtime or
//!   database API.

use super::modules::{Edges, library_code, references, top_level_modules};
use std::collections::BTreeSet;
use std::path::Path;

fn edges() -> (BTreeSet<String>, Edges) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    let edges = references(&src, &modules);
    (modules, edges)
}

/// The modules `from` names that it must not, with the files naming them.
fn forbidden(edges: &Edges, from: &str, not: &[&str]) -> Vec<String> {
    edges
        .iter()
        .filter(|((source, target), _)| source == from && not.contains(&target.as_str()))
        .map(|((_, target), files)| {
            format!("{from} -> {target} ({})", files.iter().cloned().collect::<Vec<_>>().join(", "))
        })
        .collect()
}

#[test]
fn the_store_does_not_import_the_model() {
    let (modules, edges) = edges();
    assert!(modules.contains("store") && modules.contains("llm"), "{modules:?}");
    assert!(
        edges.contains_key(&("store".to_string(), "runtime".to_string())),
        "the scan must see the store use the runtime's sessions"
    );
    let found = forbidden(&edges, "store", &["llm"]);
    assert!(found.is_empty(), "the store names the model's module:\n{}", found.join("\n"));
}

#[test]
fn providers_never_see_the_program() {
    let (_, edges) = edges();
    assert!(edges.contains_key(&("llm".to_string(), "read".to_string())), "the scan must see the offline rules");
    let found = forbidden(&edges, "llm", &["ir", "runtime", "store", "check", "syntax"]);
    assert!(found.is_empty(), "the model's module names the program or the runtime:\n{}", found.join("\n"));
}

#[test]
fn shared_modules_name_none_of_the_layers_that_use_them() {
    let (_, edges) = edges();
    let layers = ["llm", "runtime", "store", "cli", "serve", "check", "graph", "ir", "syntax", "pipeline"];
    let mut found = Vec::new();
    for shared in ["read", "message", "config", "duration", "ids", "source"] {
        found.extend(forbidden(&edges, shared, &layers));
    }
    assert!(found.is_empty(), "shared modules name a layer:\n{}", found.join("\n"));
}

/// What the pure core must not name: the APIs through which a program
/// reaches files, the network, processes, the environment, the terminal,
/// an async runtime or a database.
const IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::io::stdin",
    "std::io::stdout",
    "std::io::stderr",
    "println!",
    "eprintln!",
    "print!",
    "eprint!",
    "tokio",
    "reqwest",
    "rusqlite",
    "postgres",
    "axum",
    "rustyline",
];

/// The modules that work on text and values handed to them.
const PURE: &[&str] =
    &["syntax", "ir", "check", "expr", "graph", "pipeline", "diag", "source", "ids", "duration", "read", "message"];

#[test]
fn the_pure_core_does_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    for module in PURE {
        assert!(modules.contains(*module), "`{module}` is no longer a top-level module: update PURE");
    }
    let mut found = Vec::new();
    let mut scanned = 0;
    for (file, code) in library_code(&src) {
        let relative = file.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
        let first = relative.split('/').next().unwrap_or_default();
        if !PURE.contains(&first.strip_suffix(".rs").unwrap_or(first)) {
            continue;
        }
        scanned += 1;
        // `std::{fs, …}` names `std::fs` too.
        let code = code.replace("std::{", "std::{ ");
        for (number, line) in code.lines().enumerate() {
            let grouped_std = line.contains("std::{")
                && ["fs", "net", "process", "env"]
                    .iter()
                    .any(|name| line.contains(&format!(" {name},")) || line.contains(&format!(" {name}}}")));
            if let Some(api) = IO.iter().find(|api| line.contains(**api)).copied().or(grouped_std.then_some("std::{…}"))
            {
                found.push(format!("src/{relative}:{} names {api}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(scanned > 50, "scanned only {scanned} files of the pure core");
    assert!(found.is_empty(), "the pure core does I/O:\n{}", found.join("\n"));
}

/// Where the front ends, the lowering and the type checker put findings
/// into words: their `error.rs`, alone. Elsewhere they build values that
/// hold the facts (`SyntaxError`, `LowerError`, `TypeError`).
const WORDED_IN_ERROR_RS: &[&str] = &["syntax/", "ir/lower/", "expr/typeck/"];

/// Building a diagnostic's words.
const WORDING: &[&str] = &["Diagnostic::new(", "Diagnostic {", "with_help(", "with_label("];

#[test]
fn only_error_rs_puts_findings_into_words() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut error_files = 0;
    for (file, code) in library_code(&src) {
        let relative = file.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
        if !WORDED_IN_ERROR_RS.iter().any(|dir| relative.starts_with(dir)) {
            continue;
        }
        if relative.ends_with("/error.rs") {
            error_files += usize::from(WORDING.iter().any(|wording| code.contains(wording)));
            continue;
        }
        for (number, line) in code.lines().enumerate() {
            // A function returning a diagnostic built elsewhere names the type only.
            let built = line.replace("-> Diagnostic {", "");
            if let Some(wording) = WORDING.iter().find(|wording| built.contains(**wording)) {
                found.push(format!("src/{relative}:{} builds words ({wording}): {}", number + 1, line.trim()));
            }
        }
    }
    assert_eq!(error_files, WORDED_IN_ERROR_RS.len(), "the scan must see each error.rs put findings into words");
    assert!(found.is_empty(), "findings put into words outside error.rs:\n{}", found.join("\n"));
}
