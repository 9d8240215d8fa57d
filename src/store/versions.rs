//! The versions of programs a server has compiled, kept in the store by
//! program name and program hash (the hash a session records), each with
//! what compiling it again exactly takes: its file's path (the extension
//! picks the syntax, the folder is where its tools' paths start) and its
//! text. Any process sharing the store can then run a session on the
//! version it started on, after an edit that version's sessions cannot
//! follow, though it never compiled that version itself.
//!
//! A version is recorded when a server compiles it (at start and on a
//! reload), never per turn: one statement that inserts it unless the store
//! has it, so the first record of a version stays.

use super::StoreError;
use std::path::Path;

/// The name a program's file is kept under: its stem, made safe for ids
/// (as `flowc serve` names the program).
pub fn program_name(path: &Path) -> String {
    let stem = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
    safe_name(&stem)
}

/// The names a program's file may be kept under, most likely first: its
/// [`program_name`], then that name with the file's extension (how
/// `flowc serve` names the second of two files with one stem,
/// `booking-yaml`).
pub fn program_names(path: &Path) -> [String; 2] {
    let name = program_name(path);
    let extension = path.extension().map(|ext| ext.to_string_lossy().into_owned()).unwrap_or_default();
    let with_extension = safe_name(&format!("{name}-{extension}"));
    [name, with_extension]
}

/// `name` with every character an id may not hold made `-`, at most 64
/// characters; `program` for an empty one.
pub fn safe_name(name: &str) -> String {
    let clean: String =
        name.chars()
            .take(64)
            .map(|character| {
                if character.is_ascii_alphanumeric() || character == '_' || character == '-' { character } else { '-' }
            })
            .collect();
    if clean.is_empty() { "program".to_string() } else { clean }
}

/// A program version as a server records it.
#[derive(Clone, Copy, Debug)]
pub struct NewVersion<'a> {
    /// The program's name (its file stem, as `flowc serve` names it).
    pub program: &'a str,
    /// The hash of its IR ([`crate::runtime::session::program_hash`]).
    pub hash: &'a str,
    /// Its file, absolute.
    pub path: &'a str,
    /// The file's text.
    pub source: &'a str,
}

/// A program version as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredVersion {
    /// The program's name.
    pub program: String,
    /// The hash of its IR.
    pub hash: String,
    /// Its file when it was recorded, absolute.
    pub path: String,
    /// The file's text then.
    pub source: String,
    /// When a server first recorded it (RFC 3339, UTC).
    pub first_seen: String,
}

/// Where program versions are kept, beside the sessions that run on them.
pub trait VersionStore {
    /// Stores `version` unless the store has this program's version of
    /// this hash already, in one statement: the first record stays.
    fn record_version(&self, version: &NewVersion<'_>) -> Result<(), StoreError>;

    /// The version of `program` whose hash is `hash`, if one was recorded.
    fn load_version(&self, program: &str, hash: &str) -> Result<Option<StoredVersion>, StoreError>;
}

/// What every store's version table must do, for each store's tests (the
/// PostgreSQL store's run in `tests/it`, against a server).
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used)]
pub fn check_store(store: &dyn VersionStore) {
    let first = NewVersion { program: "booking", hash: "00aa", path: "/srv/flows/booking.flow", source: "flow a {}" };
    assert_eq!(store.load_version("booking", "00aa").unwrap(), None);
    store.record_version(&first).unwrap();
    let stored = store.load_version("booking", "00aa").unwrap().expect("recorded");
    assert_eq!(
        (stored.program.as_str(), stored.hash.as_str(), stored.path.as_str(), stored.source.as_str()),
        ("booking", "00aa", "/srv/flows/booking.flow", "flow a {}")
    );
    assert!(chrono::DateTime::parse_from_rfc3339(&stored.first_seen).is_ok(), "{}", stored.first_seen);
    // Recording it again (another server, a restart) keeps the first.
    store.record_version(&NewVersion { path: "/elsewhere/booking.flow", source: "flow a { }", ..first }).unwrap();
    assert_eq!(store.load_version("booking", "00aa").unwrap(), Some(stored.clone()));
    // The same hash under another name is another program's version.
    assert_eq!(store.load_version("other", "00aa").unwrap(), None);
    store.record_version(&NewVersion { program: "other", source: "flow b {}", ..first }).unwrap();
    let other = store.load_version("other", "00aa").unwrap().expect("recorded");
    assert_eq!(other.source, "flow b {}");
    assert_eq!(store.load_version("booking", "00aa").unwrap(), Some(stored));
    // Text of any size and character survives.
    let text = "schema { note: string \"é ✓ 'quoted' \\\"\" }\n".repeat(2_000);
    store.record_version(&NewVersion { hash: "00bb", source: &text, ..first }).unwrap();
    assert_eq!(store.load_version("booking", "00bb").unwrap().map(|version| version.source), Some(text));
}

#[cfg(test)]
mod tests {
    use super::{program_name, program_names, safe_name};
    use std::path::Path;

    #[test]
    fn names_are_stems_made_safe_for_ids() {
        assert_eq!(program_name(Path::new("flows/booking.flow")), "booking");
        assert_eq!(program_name(Path::new("a b.c.yaml")), "a-b-c");
        assert_eq!(safe_name(""), "program");
        assert_eq!(program_names(Path::new("/srv/booking.yaml")), ["booking".to_string(), "booking-yaml".to_string()]);
    }
}
