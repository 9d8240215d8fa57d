//! The SQLite store's counts of a tenant's sessions and runs, and its
//! creations under a per-tenant cap: the count and the insert in one
//! `BEGIN IMMEDIATE` transaction. SQLite lets one writer in at a time,
//! from any process on the machine, so no creation comes between a count
//! and its insert, and creations racing at a cap never pass it.

use super::{save_run_in, sql_error};
use crate::runtime::session::Session;
use crate::store::rows::{self, now_text};
use crate::store::{Cap, Claim, Created, StoreError, StoredRun};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// How many sessions have an id starting with `prefix`, on `connection`
/// (in the caller's transaction, if it is in one).
pub(super) fn count_sessions(connection: &Connection, prefix: &str) -> Result<u64, StoreError> {
    // SQLite compares text bytewise, so a prefix is one range of the
    // key: from the prefix to the prefix with its last character
    // incremented, read from the index alone.
    let end = prefix_end(prefix);
    let count: i64 = connection
        .prepare_cached("SELECT COUNT(*) FROM sessions WHERE id >= ?1 AND id < ?2 AND substr(id, 1, length(?1)) = ?1")
        .and_then(|mut statement| statement.query_row([prefix, end.as_str()], |row| row.get(0)))
        .map_err(sql_error("*"))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// How many runs not yet ended have an id starting with `prefix`, on
/// `connection` (in the caller's transaction, if it is in one).
pub(super) fn count_active_runs(connection: &Connection, prefix: &str) -> Result<u64, StoreError> {
    let [first, second, third] = crate::store::ACTIVE_STATUSES;
    let end = prefix_end(prefix);
    let count: i64 = connection
        .prepare_cached(
            "SELECT COUNT(*) FROM runs WHERE id >= ?1 AND id < ?5 AND substr(id, 1, length(?1)) = ?1
             AND status IN (?2, ?3, ?4)",
        )
        .and_then(|mut statement| statement.query_row([prefix, first, second, third, end.as_str()], |row| row.get(0)))
        .map_err(sql_error("*"))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The first text after every text that starts with `prefix`.
fn prefix_end(prefix: &str) -> String {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = char::from_u32(u32::from(last) + 1) {
            chars.push(next);
            return chars.into_iter().collect();
        }
    }
    char::MAX.to_string()
}

/// [`crate::store::SessionStore::create_session`] on the store's connection.
pub(super) fn create_session(
    connection: &mut Connection,
    session: &Session,
    cap: &Cap<'_>,
) -> Result<Created, StoreError> {
    let id = session.id.as_str();
    let rows::Write { version, state, .. } = rows::write(id, session.version, 0, session)?;
    // A refusal rolls the transaction back (its drop).
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error(id))?;
    let kept = count_sessions(&transaction, cap.prefix)?;
    if kept >= cap.max {
        return Ok(Created::Full { kept });
    }
    let stored: Option<i64> = transaction
        .prepare_cached("SELECT version FROM sessions WHERE id = ?1")
        .and_then(|mut statement| statement.query_row([id], |row| row.get(0)).optional())
        .map_err(sql_error(id))?;
    if let Some(stored) = stored {
        return Err(StoreError::Conflict {
            id: id.to_string(),
            stored: u64::try_from(stored).unwrap_or(0),
            expected: 0,
        });
    }
    transaction
        .prepare_cached(
            "INSERT INTO sessions (id, version, flow, step, turns, transcript_len, updated_at, state)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7)",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                id,
                version,
                session.flow_name,
                session.step_name,
                session.turns,
                now_text(),
                state
            ])
        })
        .map_err(sql_error(id))?;
    transaction.commit().map_err(sql_error(id))?;
    Ok(Created::Stored)
}

/// [`crate::store::RunStore::create_run`] on the store's connection.
pub(super) fn create_run(
    connection: &mut Connection,
    stored: &StoredRun,
    claim: Option<&Claim>,
    cap: &Cap<'_>,
) -> Result<Created, StoreError> {
    let id = stored.run.run.as_str();
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error(id))?;
    let active = count_active_runs(&transaction, cap.prefix)?;
    if active >= cap.max {
        return Ok(Created::Full { kept: active });
    }
    save_run_in(&transaction, &stored.run, stored.meta(), 0, claim)?;
    transaction.commit().map_err(sql_error(id))?;
    Ok(Created::Stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_before_the_next_text_that_does_not_start_with_it() {
        assert_eq!(prefix_end("acme_"), "acme`");
        assert_eq!(prefix_end(""), char::MAX.to_string());
    }
}
