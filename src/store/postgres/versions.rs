//! The PostgreSQL store's program versions ([`crate::store::versions`]):
//! the table its migration 6 creates, a version inserted unless present
//! (`ON CONFLICT DO NOTHING`: servers recording one version at once both
//! succeed, and the first record stays), and one read by its key.

use super::{PostgresStore, sql_error};
use crate::store::StoreError;
use crate::store::rows::now_text;
use crate::store::versions::{NewVersion, StoredVersion, VersionStore};

/// Migration 6, as in the SQLite store: the program versions servers have
/// compiled.
pub(super) const MIGRATION: &str = "CREATE TABLE program_versions (
        program TEXT NOT NULL,
        hash TEXT NOT NULL,
        path TEXT NOT NULL,
        source TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        PRIMARY KEY (program, hash)
    );";

const RECORD: &str = "INSERT INTO program_versions (program, hash, path, source, first_seen)
    VALUES ($1, $2, $3, $4, $5) ON CONFLICT (program, hash) DO NOTHING";

const LOAD: &str = "SELECT path, source, first_seen FROM program_versions WHERE program = $1 AND hash = $2";

impl VersionStore for PostgresStore {
    fn record_version(&self, version: &NewVersion<'_>) -> Result<(), StoreError> {
        let id = version.program;
        let now = now_text();
        self.using(|lent| {
            let statement = lent.statement(RECORD).map_err(sql_error(id))?;
            lent.client
                .execute(&statement, &[&version.program, &version.hash, &version.path, &version.source, &now])
                .map_err(sql_error(id))?;
            Ok(())
        })
    }

    fn load_version(&self, program: &str, hash: &str) -> Result<Option<StoredVersion>, StoreError> {
        self.using(|lent| {
            let statement = lent.statement(LOAD).map_err(sql_error(program))?;
            let row = lent.client.query_opt(&statement, &[&program, &hash]).map_err(sql_error(program))?;
            Ok(row.map(|row| StoredVersion {
                program: program.to_string(),
                hash: hash.to_string(),
                path: row.get(0),
                source: row.get(1),
                first_seen: row.get(2),
            }))
        })
    }
}
