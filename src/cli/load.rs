//! Reading programs from disk: files, directories walked for `.flow`,
//! `.yaml` and `.yml`, and the errors that are the user's environment's
//! rather than the program's (unreadable, missing, no programs, not a
//! program file: exit 2).
//!
//! A walk follows no link to a directory: a link back into the tree (`ln -s
//! . loop`) would visit files again or forever, and one out of the tree
//! checks what the user did not name. Linked files are read once each.

use crate::diag::{Code, Diagnostic};
use crate::source::{MAX_SOURCE_LEN, SourceFile, SourceKind, Span};
use std::path::{Path, PathBuf};

/// A usage or I/O failure: reported on stderr, exit 2.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read `{path}`: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("`{path}` holds no program (no .flow, .yaml or .yml file)")]
    NoPrograms { path: String },
    #[error("`{path}` is larger than the 4 GiB flowc reads")]
    TooLarge { path: String },
    #[error("`{path}` is not a program file: flowc reads .flow, .yaml and .yml files")]
    NotAProgram { path: String },
}

/// A program as read: its text, and a `syntax` diagnostic when the bytes
/// were not UTF-8 (the text is then a lossy copy, for display only).
pub struct Loaded {
    pub file: SourceFile,
    pub encoding_error: Option<Diagnostic>,
}

pub fn display_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    text.strip_prefix("./").unwrap_or(&text).to_string()
}

pub use crate::source::is_test_file;

/// Reads one program file; its extension must be one flowc reads, so a
/// README or a script named by mistake is not parsed as `.flow`.
pub fn load_file(path: &Path) -> Result<Loaded, LoadError> {
    let name = display_path(path);
    if !SourceKind::is_program_path(path) {
        return Err(LoadError::NotAProgram { path: name });
    }
    let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: name.clone(), source })?;
    if bytes.len() > MAX_SOURCE_LEN {
        return Err(LoadError::TooLarge { path: name });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Loaded { file: SourceFile::new(name, text), encoding_error: None }),
        Err(error) => {
            let offset = error.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(error.as_bytes()).into_owned();
            let file = SourceFile::new(name, text);
            let at = u32::try_from(offset).unwrap_or(u32::MAX);
            let diagnostic = Diagnostic::new(Code::Syntax, "the file is not valid UTF-8")
                .at(Span::new(at, at.saturating_add(1)), format!("invalid byte at offset {offset}"))
                .with_help("save the file as UTF-8");
            Ok(Loaded { file, encoding_error: Some(diagnostic) })
        }
    }
}

/// Expands files and directories into the program files they name, in a
/// stable (sorted) order. A directory contributes every program below it,
/// each file once; a file named explicitly is kept as named (its extension
/// is checked when it is read). A walk leaves out test files
/// (`*.test.yaml`, read by `flowc test`): they are not programs.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|source| LoadError::Io { path: display_path(path), source })?;
        if metadata.is_dir() {
            let before = files.len();
            walk(path, &mut files, &mut seen)?;
            if files.len() == before {
                return Err(LoadError::NoPrograms { path: display_path(path) });
            }
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Adds the programs below `directory`. `seen` holds the canonical paths
/// already added, so a file reached through a link is read once.
fn walk(
    directory: &Path,
    files: &mut Vec<PathBuf>,
    seen: &mut std::collections::HashSet<PathBuf>,
) -> Result<(), LoadError> {
    let io_error = |source| LoadError::Io { path: display_path(directory), source };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(directory)
        .map_err(io_error)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<Result<_, _>>()
        .map_err(io_error)?;
    entries.sort();
    for entry in entries {
        let hidden = entry
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with('.') || name == "node_modules" || name == "target");
        if hidden {
            continue;
        }
        let is_link = std::fs::symlink_metadata(&entry).is_ok_and(|metadata| metadata.file_type().is_symlink());
        if entry.is_dir() {
            if !is_link {
                walk(&entry, files, seen)?;
            }
        } else if SourceKind::is_program_path(&entry) && !is_test_file(&entry) {
            let canonical = std::fs::canonicalize(&entry).unwrap_or_else(|_| entry.clone());
            if seen.insert(canonical) {
                files.push(entry);
            }
        }
    }
    Ok(())
}

/// Reads and compiles one program, printing its diagnostics on stderr (the
/// start of `compile`, `graph` and `run`). `Err` is the outcome to exit
/// with when there is nothing to compile: 2 for an I/O error, 1 for a file
/// that is not UTF-8.
pub fn compile_file(path: &Path) -> Result<crate::pipeline::Compilation, super::Outcome> {
    compile_file_with(path, crate::pipeline::compile)
}

/// [`compile_file`] through the given pipeline entry.
pub fn compile_file_with(
    path: &Path,
    compile: impl FnOnce(&crate::source::SourceFile) -> crate::pipeline::Compilation,
) -> Result<crate::pipeline::Compilation, super::Outcome> {
    let loaded = load_file(path).map_err(|error| {
        eprintln!("error: {error}");
        super::Outcome::Error
    })?;
    let style = super::report::stderr_style();
    if let Some(encoding_error) = loaded.encoding_error {
        super::report::print_diagnostics(&loaded.file, &[encoding_error], style);
        return Err(super::Outcome::Failure);
    }
    let compilation = compile(&loaded.file);
    super::report::print_diagnostics(&loaded.file, &compilation.diagnostics, style);
    Ok(compilation)
}
