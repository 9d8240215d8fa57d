//! The SQLite store's program versions ([`crate::store::versions`]): the
//! table its migration 6 creates, a version inserted unless present, and
//! one read by its key.

use super::{SqliteStore, sql_error};
use crate::store::StoreError;
use crate::store::rows::now_text;
use crate::store::versions::{NewVersion, StoredVersion, VersionStore};
use rusqlite::{OptionalExtension, params};

/// Migration 6: the program versions servers have compiled. A table with
/// rowids, not `WITHOUT ROWID`: its rows hold whole program texts.
pub(super) const MIGRATION: &str = "CREATE TABLE program_versions (
        program TEXT NOT NULL,
        hash TEXT NOT NULL,
        path TEXT NOT NULL,
        source TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        PRIMARY KEY (program, hash)
    );";

impl VersionStore for SqliteStore {
    fn record_version(&self, version: &NewVersion<'_>) -> Result<(), StoreError> {
        self.writable()?;
        let connection = self.connection(version.program)?;
        connection
            .prepare_cached(
                "INSERT INTO program_versions (program, hash, path, source, first_seen) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (program, hash) DO NOTHING",
            )
            .and_then(|mut statement| {
                statement.execute(params![version.program, version.hash, version.path, version.source, now_text()])
            })
            .map_err(sql_error(version.program))?;
        Ok(())
    }

    fn load_version(&self, program: &str, hash: &str) -> Result<Option<StoredVersion>, StoreError> {
        let connection = self.connection(program)?;
        connection
            .prepare_cached("SELECT path, source, first_seen FROM program_versions WHERE program = ?1 AND hash = ?2")
            .and_then(|mut statement| {
                statement
                    .query_row([program, hash], |row| {
                        Ok(StoredVersion {
                            program: program.to_string(),
                            hash: hash.to_string(),
                            path: row.get(0)?,
                            source: row.get(1)?,
                            first_seen: row.get(2)?,
                        })
                    })
                    .optional()
            })
            .map_err(sql_error(program))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_recorded_once_and_read_by_program_and_hash() {
        let dir = std::env::temp_dir().join(format!("flowc-versions-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteStore::open(&dir.join("flowc.db")).unwrap();
        crate::store::versions::check_store(&store);
        drop(store);
        // Another process's open finds them.
        let again = SqliteStore::open(&dir.join("flowc.db")).unwrap();
        assert!(again.load_version("booking", "00aa").unwrap().is_some());
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
