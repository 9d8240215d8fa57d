//! The PostgreSQL store's counts of a tenant's sessions and runs, and its
//! creations under a per-tenant cap. Under READ COMMITTED a statement that
//! counts and inserts at once is not enough: two creations starting
//! together would each count from a snapshot without the other. So a
//! capped creation is one transaction that first takes a per-tenant
//! advisory lock (`pg_advisory_xact_lock`, released at commit), then
//! counts and inserts in one statement, whose snapshot, taken after the
//! lock, sees every creation committed by whoever held it before. Every
//! process sharing the database takes the same lock, so creations racing
//! at a cap never pass it.

use super::{Connection, sql_error};
use crate::runtime::session::Session;
use crate::store::rows::{self, now_text};
use crate::store::{Cap, Claim, Created, StoreError, StoredRun};

/// How many sessions have an id starting with `$1`. `starts_with`, not a
/// range on the key: under the database's collation a prefix need not
/// sort as one range.
const COUNT_SESSIONS: &str = "SELECT COUNT(*) FROM sessions WHERE starts_with(id, $1)";

/// How many runs not yet ended (`$2`, the statuses) have an id starting
/// with `$1`.
const COUNT_ACTIVE_RUNS: &str = "SELECT COUNT(*) FROM runs WHERE starts_with(id, $1) AND status = ANY($2::TEXT[])";

/// The lock of one tenant's creations of one kind: the two-key form of
/// the advisory locks (never the one-key form's migration lock), the kind
/// and the prefix's hash. Two prefixes of one hash only wait for each
/// other; neither passes its cap.
const LOCK: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

/// The first key of the session creations' lock and of the runs'.
const SESSIONS_LOCK: i32 = 0x666c_0001;
const RUNS_LOCK: i32 = 0x666c_0002;

/// A session's row inserted if fewer than `$8` sessions start with `$9`
/// and its id is free; answers how many there were, whether it was
/// inserted, and the version of a session already under its id.
/// Parameters: id, version, flow, step, turns, updated at, state, then the
/// cap's most and prefix.
const CREATE_SESSION: &str = "WITH kept AS (SELECT COUNT(*) AS n FROM sessions WHERE starts_with(id, $9)),
    head AS (
        INSERT INTO sessions (id, version, flow, step, turns, transcript_len, updated_at, state)
        SELECT $1::TEXT, $2::BIGINT, $3::TEXT, $4::TEXT, $5::BIGINT, 0, $6::TEXT, $7::TEXT
        FROM kept WHERE kept.n < $8::BIGINT
        ON CONFLICT (id) DO NOTHING
        RETURNING 1)
    SELECT kept.n, EXISTS (SELECT 1 FROM head), (SELECT version FROM sessions WHERE id = $1) FROM kept";

pub(super) fn count_sessions(connection: &mut Connection, prefix: &str) -> Result<u64, StoreError> {
    let statement = connection.statement(COUNT_SESSIONS).map_err(sql_error("*"))?;
    let count: i64 = connection.client.query_one(&statement, &[&prefix]).map_err(sql_error("*"))?.get(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

pub(super) fn count_active_runs(connection: &mut Connection, prefix: &str) -> Result<u64, StoreError> {
    let active: Vec<&str> = crate::store::ACTIVE_STATUSES.to_vec();
    let statement = connection.statement(COUNT_ACTIVE_RUNS).map_err(sql_error("*"))?;
    let count: i64 = connection.client.query_one(&statement, &[&prefix, &active]).map_err(sql_error("*"))?.get(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

/// [`crate::store::SessionStore::create_session`] on a connection of the pool:
/// four round trips (begin, lock, count and insert, commit).
pub(super) fn create_session(
    connection: &mut Connection,
    session: &Session,
    cap: &Cap<'_>,
) -> Result<Created, StoreError> {
    let id = session.id.as_str();
    let rows::Write { version, state, .. } = rows::write(id, session.version, 0, session)?;
    let max = rows::to_i64(id, cap.max)?;
    let turns = i64::from(session.turns);
    let lock = connection.statement(LOCK).map_err(sql_error(id))?;
    let create = connection.statement(CREATE_SESSION).map_err(sql_error(id))?;
    // Rolled back when dropped uncommitted: a refusal writes nothing.
    let mut transaction = connection.client.transaction().map_err(sql_error(id))?;
    transaction.execute(&lock, &[&SESSIONS_LOCK, &cap.prefix]).map_err(sql_error(id))?;
    let row = transaction
        .query_one(
            &create,
            &[&id, &version, &session.flow_name, &session.step_name, &turns, &now_text(), &state, &max, &cap.prefix],
        )
        .map_err(sql_error(id))?;
    let (kept, inserted, stored): (i64, bool, Option<i64>) = (row.get(0), row.get(1), row.get(2));
    if !inserted && kept >= max {
        return Ok(Created::Full { kept: u64::try_from(kept).unwrap_or(0) });
    }
    if !inserted {
        // The id is taken; by a first save that committed after this
        // statement's snapshot if the snapshot shows no session there.
        let stored = stored.map_or(1, |stored| u64::try_from(stored).unwrap_or(0));
        return Err(StoreError::Conflict { id: id.to_string(), stored, expected: 0 });
    }
    transaction.commit().map_err(sql_error(id))?;
    Ok(Created::Stored)
}

/// [`crate::store::RunStore::create_run`] on a connection of the pool: the run's
/// first save, after the lock and the count, in its transaction.
pub(super) fn create_run(
    connection: &mut Connection,
    stored: &StoredRun,
    claim: Option<&Claim>,
    cap: &Cap<'_>,
) -> Result<Created, StoreError> {
    let id = stored.run.run.as_str();
    let active: Vec<&str> = crate::store::ACTIVE_STATUSES.to_vec();
    let lock = connection.statement(LOCK).map_err(sql_error(id))?;
    let count = connection.statement(COUNT_ACTIVE_RUNS).map_err(sql_error(id))?;
    let mut transaction = connection.client.transaction().map_err(sql_error(id))?;
    transaction.execute(&lock, &[&RUNS_LOCK, &cap.prefix]).map_err(sql_error(id))?;
    let kept: i64 = transaction.query_one(&count, &[&cap.prefix, &active]).map_err(sql_error(id))?.get(0);
    let kept = u64::try_from(kept).unwrap_or(0);
    if kept >= cap.max {
        return Ok(Created::Full { kept });
    }
    super::save_run_in(&mut transaction, &stored.run, stored.meta(), 0, claim)?;
    transaction.commit().map_err(sql_error(id))?;
    Ok(Created::Stored)
}
