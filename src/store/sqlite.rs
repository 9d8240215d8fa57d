//! The SQLite store: one database file (bundled SQLite, no system library)
//! in WAL mode, shared safely by any number of `flowc` processes on one
//! machine. SQLite's own locking replaces lock files, so a process killed at
//! any moment leaves nothing behind: its transaction either committed or
//! never happened.
//!
//! Every write is one `BEGIN IMMEDIATE` transaction holding the
//! compare-and-swap, so two writers never both win. `synchronous = NORMAL`
//! keeps a committed turn through a killed process (the WAL is in the OS's
//! hands before the commit returns); a power cut may lose the last turns
//! but never tears one.
//!
//! The schema is versioned with `PRAGMA user_version`; [`MIGRATIONS`] takes
//! a database of any older version to the current one.

mod caps;
mod versions;

use super::rows::{self, now_text};
use super::sqlite_checkpoint::{self, Checkpointer};
use super::sqlite_commit::{Committer, Held, SessionWrite};
use super::sqlite_guard::{self, OpenLock, Refusal};
use super::{
    Cancel, Cap, Claim, Created, RunMeta, RunStore, RunSummary, SaveFuture, SessionStore, SessionSummary, StoreError,
    StoredRun, Swap, check_id,
};
use crate::message::Message;
use crate::runtime::session::Session;
use crate::runtime::workflow::WorkflowRun;
use futures_util::FutureExt;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema, one migration per version: `MIGRATIONS[n]` takes a database
/// at version `n` to `n + 1`. Shipped migrations never change; a new schema
/// is a new entry.
pub const MIGRATIONS: &[&str] = &[
    // 1: conversations. The row holds the session (position, data, bounded
    // history) as JSON; the transcript grows in its own table.
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        flow TEXT,
        step TEXT,
        turns INTEGER NOT NULL,
        transcript_len INTEGER NOT NULL,
        updated_at TEXT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE TABLE transcript (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;",
    // 2: workflow runs, with the claim a worker holds while it runs one.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        program TEXT NOT NULL,
        program_hash TEXT NOT NULL,
        flow TEXT NOT NULL,
        status TEXT NOT NULL,
        due_at INTEGER,
        version INTEGER NOT NULL,
        claimed_by TEXT,
        claimed_until INTEGER,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE INDEX runs_due ON runs (status, due_at);",
    // 3: a run's step records and events as rows of their own, so that a
    // step's save writes what changed instead of the whole run; the
    // records and events of existing runs move out of their state.
    "CREATE TABLE run_steps (
        run_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    ALTER TABLE runs ADD COLUMN events_len INTEGER NOT NULL DEFAULT 0;
    INSERT INTO run_steps (run_id, idx, record)
        SELECT runs.id, CAST(step.key AS INTEGER), step.value
        FROM runs, json_each(runs.state, '$.steps') AS step WHERE json_valid(runs.state);
    INSERT INTO run_events (run_id, seq, event)
        SELECT runs.id, CAST(event.key AS INTEGER), event.value
        FROM runs, json_each(runs.state, '$.events') AS event WHERE json_valid(runs.state);
    UPDATE runs SET events_len = (SELECT COUNT(*) FROM run_events WHERE run_id = runs.id),
        state = json_remove(state, '$.steps', '$.events') WHERE json_valid(state);",
    // 4: a run's warnings as rows appended, as its events, instead of a
    // list in its head rewritten at every save.
    "CREATE TABLE run_warnings (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        warning TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    INSERT INTO run_warnings (run_id, seq, warning)
        SELECT runs.id, CAST(warning.key AS INTEGER), warning.value
        FROM runs, json_each(runs.state, '$.warnings') AS warning
        WHERE json_valid(runs.state) AND json_type(runs.state, '$.warnings') = 'array';
    UPDATE runs SET state = json_remove(state, '$.warnings') WHERE json_valid(state);",
    // 5: workflow schedules, one row per (program, flow), with the next
    // tick a worker starts a run at (see `super::schedules`).
    "CREATE TABLE schedules (
        program TEXT NOT NULL,
        flow TEXT NOT NULL,
        cron TEXT NOT NULL,
        timezone TEXT NOT NULL,
        next_at INTEGER NOT NULL,
        last_run TEXT,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (program, flow)
    ) WITHOUT ROWID;
    CREATE INDEX schedules_next ON schedules (next_at);",
    versions::MIGRATION,
];

/// The store on one machine: sessions and workflow runs in one SQLite
/// database file (WAL), shared safely by the processes that open it.
pub struct SqliteStore {
    /// The one connection, and the session saves waiting to share its
    /// next transaction ([`sqlite_commit`]).
    pub(super) committer: Committer,
    path: PathBuf,
    /// Why this store refuses to write, if it does: read-only, or found
    /// damaged as it opened ([`sqlite_guard`]).
    refusal: Option<Refusal>,
    /// Held while the store is open; declared after the connection so that
    /// it is released last.
    _lock: Option<OpenLock>,
}

pub(super) fn sql_error(id: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |error| StoreError::Io { id: id.to_string(), message: error.to_string() }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it;
    /// one this process cannot write is opened read-only instead, and one
    /// left by an unclean shutdown is checked first with SQLite's
    /// `quick_check`, and refused for writing if damaged.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let location = format!("sqlite:{}", path.display());
        let open_error = |message: String| StoreError::Open { location: location.clone(), message };
        if let Some(why) = sqlite_guard::read_only(path) {
            return SqliteStore::open_read_only(path, why).map_err(open_error);
        }
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|error| open_error(error.to_string()))?;
        }
        let mut opening = sqlite_guard::open_lock(path).map_err(open_error)?;
        let mut connection = Connection::open(path).map_err(|error| open_error(error.to_string()))?;
        connection.busy_handler(Some(wait_for_writer)).map_err(|error| open_error(error.to_string()))?;
        // Room for every statement the sessions and runs use, transaction
        // control included (rusqlite keeps 16): none is parsed twice.
        connection.set_prepared_statement_cache_capacity(64);
        let refusal = if opening.check {
            let damage = sqlite_guard::quick_check(&connection);
            opening.lock.record(damage.as_deref());
            damage.map(Refusal::Damaged)
        } else {
            None
        };
        if let Some(refusal) = &refusal {
            // Migrating would write into the damage: the store is read as it is.
            eprintln!("warning: the store {location}: {}", refusal.reason(path));
        } else {
            set_wal(&connection).map_err(|error| open_error(error.to_string()))?;
            connection.pragma_update(None, "synchronous", "NORMAL").map_err(|error| open_error(error.to_string()))?;
            sqlite_checkpoint::bound(&connection).map_err(|error| open_error(error.to_string()))?;
            migrate(&mut connection, MIGRATIONS).map_err(open_error)?;
        }
        opening.lock.share().map_err(open_error)?;
        // A damaged store is not written, so nothing is to be checkpointed.
        let checkpointer = if refusal.is_none() { Checkpointer::start(path) } else { None };
        let store = SqliteStore {
            committer: Committer::new(connection, checkpointer),
            path: path.to_path_buf(),
            refusal,
            _lock: Some(opening.lock),
        };
        if store.refusal.is_none() {
            store.import_json_sessions();
        }
        Ok(store)
    }

    /// A database this process cannot write, opened to be listed and
    /// shown: nothing is migrated or switched (both write), so its schema
    /// must already be this flowc's.
    fn open_read_only(path: &Path, why: String) -> Result<SqliteStore, String> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let open = |uri: String| -> rusqlite::Result<(Connection, i64)> {
            let connection = Connection::open_with_flags(uri, flags)?;
            connection.busy_handler(Some(wait_for_writer))?;
            let version = connection.query_row("PRAGMA user_version", [], |row| row.get(0))?;
            Ok((connection, version))
        };
        let uri = sqlite_guard::file_uri(path);
        // A WAL database needs its `-shm` file, which a read-only folder
        // cannot hold: then SQLite reads it immutable, as last checkpointed
        // (nobody can write there anyway).
        let (connection, version) =
            open(uri.clone()).or_else(|_| open(format!("{uri}?immutable=1"))).map_err(|error| error.to_string())?;
        let current = MIGRATIONS.len();
        if usize::try_from(version).ok() != Some(current) {
            return Err(format!(
                "it is read-only ({why}) and its schema is version {version}, not this flowc's {current}: \
                 open it once with write access (it is migrated then) or use the flowc that made it"
            ));
        }
        Ok(SqliteStore {
            committer: Committer::new(connection, None),
            path: path.to_path_buf(),
            refusal: Some(Refusal::ReadOnly(why)),
            _lock: None,
        })
    }

    /// Refuses a write to a read-only or damaged store, naming its file.
    pub(super) fn writable(&self) -> Result<(), StoreError> {
        match &self.refusal {
            None => Ok(()),
            Some(refusal) => Err(StoreError::WriteRefused {
                location: format!("sqlite:{}", self.path.display()),
                reason: refusal.reason(&self.path),
            }),
        }
    }

    /// A session's save, checked and encoded here, on the turn's own
    /// thread: the committer's thread writes it ([`sqlite_commit`]).
    fn session_write(
        &self,
        session: &Session,
        expected_version: u64,
        transcript: &[Message],
    ) -> Result<SessionWrite, StoreError> {
        self.writable()?;
        let id = session.id.as_str();
        let rows::Write { version, expected, state } = rows::write(id, session.version, expected_version, session)?;
        Ok(SessionWrite {
            id: id.to_string(),
            version,
            expected,
            expected_version,
            flow: session.flow_name.clone(),
            step: session.step_name.clone(),
            turns: session.turns,
            state,
            transcript: transcript.iter().map(|message| (rows::role(message), message.text.clone())).collect(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(test)]
    pub(crate) fn checkpointer(&self) -> Option<&super::sqlite_checkpoint::Checkpointer> {
        self.committer.checkpointer()
    }

    pub(crate) fn connection(&self, _id: &str) -> Result<Held<'_>, StoreError> {
        Ok(self.committer.connection())
    }

    /// Takes in the sessions of the JSON-file store that came before
    /// (`.flowc/sessions/ID.json` beside this database), once: their lock
    /// and temporary files are removed and the folder is renamed
    /// `sessions.imported`. A file that does not read as a session is left
    /// there and said on stderr.
    fn import_json_sessions(&self) {
        let Some(dir) = self.path.parent().map(|parent| parent.join("sessions")) else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut kept = false;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".lock") || name.ends_with(".tmp") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            let imported = std::fs::read_to_string(&path)
                .map_err(|error| error.to_string())
                .and_then(|text| serde_json::from_str::<Session>(&text).map_err(|error| error.to_string()))
                .and_then(|mut session| {
                    // The file's name is the key it was asked for.
                    session.id = id.to_string();
                    let history = session.history.clone();
                    session.drop_oldest(history.len().saturating_sub(super::HISTORY_KEPT));
                    match self.load(id) {
                        Ok(Some(_)) => Ok(()),
                        _ => self.save(&session, 0, &history).map_err(|error| error.to_string()),
                    }
                });
            if let Err(error) = imported {
                kept = true;
                eprintln!("warning: cannot import the old session file {}: {error}", path.display());
            }
        }
        if !kept {
            let _ = std::fs::rename(&dir, dir.with_file_name("sessions.imported"));
        }
    }
}

/// Waits for another writer to commit: SQLite's own busy timeout sleeps
/// in steps of up to 100 ms, far longer than a turn's transaction holds
/// the lock, so concurrent writers would mostly sleep. Short waits first,
/// then 1 ms ones, for about 30 s in all before giving up (`false`).
fn wait_for_writer(attempt: i32) -> bool {
    let pause = match attempt {
        0..200 => Duration::from_micros(20),
        200..30_000 => Duration::from_millis(1),
        _ => return false,
    };
    std::thread::sleep(pause);
    true
}

/// WAL mode, retried: a database another process is creating at the same
/// moment can refuse the switch for an instant.
fn set_wal(connection: &Connection) -> rusqlite::Result<()> {
    let mut attempt = 0;
    loop {
        match connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(_) if attempt < 50 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Brings the database to the last of `migrations`, each step in its own
/// transaction (two processes opening a new database at once apply each
/// migration once: the second sees the first's version).
pub fn migrate(connection: &mut Connection, migrations: &[&str]) -> Result<(), String> {
    let target = migrations.len();
    loop {
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|error| error.to_string())?;
        let version: i64 =
            transaction.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(|error| error.to_string())?;
        let version = usize::try_from(version).map_err(|_| format!("its schema version {version} is invalid"))?;
        if version > target {
            return Err(format!(
                "its schema is version {version}, newer than this flowc knows ({target}); use a newer flowc"
            ));
        }
        let Some(migration) = migrations.get(version) else {
            return transaction.commit().map_err(|error| error.to_string());
        };
        transaction
            .execute_batch(migration)
            .map_err(|error| format!("migration to version {}: {error}", version + 1))?;
        transaction
            .pragma_update(None, "user_version", i64::try_from(version + 1).unwrap_or(i64::MAX))
            .map_err(|error| error.to_string())?;
        transaction.commit().map_err(|error| error.to_string())?;
    }
}

/// The first text after every text starting with `prefix` (its last
/// character incremented), or one past any text when it has none to
/// increment: the end of the prefix's range of keys.
impl SessionStore for SqliteStore {
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id)?;
        let connection = self.connection(id)?;
        let row: Option<(i64, String)> = connection
            .prepare_cached("SELECT version, state FROM sessions WHERE id = ?1")
            .and_then(|mut statement| statement.query_row([id], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(sql_error(id))?;
        let Some((version, state)) = row else {
            return Ok(None);
        };
        rows::session(id, version, &state).map(Some)
    }

    fn save(&self, session: &Session, expected_version: u64, transcript: &[Message]) -> Result<(), StoreError> {
        self.committer.save(self.session_write(session, expected_version, transcript)?)
    }

    fn save_queued(&self, session: &Session, expected_version: u64, transcript: &[Message]) -> SaveFuture {
        match self.session_write(session, expected_version, transcript) {
            Ok(write) => Box::pin(self.committer.save_queued(write).map(|saved| saved.map(|()| Swap::Written))),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }

    fn commits(&self) -> Option<(u64, u64)> {
        Some(self.committer.commits())
    }

    fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let (sessions, unreadable) = self.list_readable()?;
        match unreadable.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(sessions),
        }
    }

    fn list_readable(&self) -> Result<(Vec<SessionSummary>, Vec<StoreError>), StoreError> {
        let connection = self.connection("*")?;
        let mut statement = connection
            .prepare("SELECT id, flow, step, turns, version, updated_at FROM sessions ORDER BY id")
            .map_err(sql_error("*"))?;
        type Row = (String, Option<String>, Option<String>, i64, i64, String);
        let rows = statement
            .query_map([], |row| -> rusqlite::Result<Row> {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?))
            })
            .map_err(sql_error("*"))?;
        let mut sessions = Vec::new();
        let mut unreadable = Vec::new();
        for row in rows {
            let (id, flow, step, turns, version, updated_at) = row.map_err(sql_error("*"))?;
            let corrupt = |message: String| StoreError::Corrupt { id: id.clone(), message };
            match (u32::try_from(turns), u64::try_from(version)) {
                (Ok(turns), Ok(version)) => {
                    sessions.push(SessionSummary { id, flow, step, turns, version, updated_at });
                }
                (Err(_), _) => unreadable.push(corrupt(format!("its turn count {turns} is out of range"))),
                (_, Err(_)) => unreadable.push(corrupt(format!("its version {version} is out of range"))),
            }
        }
        Ok((sessions, unreadable))
    }

    fn count_sessions(&self, prefix: &str) -> Result<u64, StoreError> {
        caps::count_sessions(&*self.connection("*")?, prefix)
    }

    fn create_session(&self, session: &Session, cap: &Cap<'_>) -> Result<Created, StoreError> {
        self.writable()?;
        caps::create_session(&mut *self.connection(&session.id)?, session, cap)
    }

    fn delete(&self, id: &str) -> Result<bool, StoreError> {
        check_id(id)?;
        self.writable()?;
        let mut connection = self.connection(id)?;
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error(id))?;
        transaction.execute("DELETE FROM transcript WHERE session_id = ?1", [id]).map_err(sql_error(id))?;
        let deleted = transaction.execute("DELETE FROM sessions WHERE id = ?1", [id]).map_err(sql_error(id))?;
        transaction.commit().map_err(sql_error(id))?;
        Ok(deleted > 0)
    }

    fn transcript(&self, id: &str) -> Result<Vec<Message>, StoreError> {
        check_id(id)?;
        let connection = self.connection(id)?;
        let mut statement = connection
            .prepare("SELECT role, text FROM transcript WHERE session_id = ?1 ORDER BY seq")
            .map_err(sql_error(id))?;
        let rows = statement
            .query_map([id], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
            .map_err(sql_error(id))?;
        let mut messages = Vec::new();
        for row in rows {
            let (role, text) = row.map_err(sql_error(id))?;
            messages.push(rows::message(id, role, text)?);
        }
        Ok(messages)
    }
}

const RUN_COLUMNS: &str = "state, program, program_hash, version, due_at";

fn run_from_row(id: &str, row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<StoredRun, StoreError>> {
    let state: String = row.get(0)?;
    Ok(rows::run(id, &state, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?))
}

/// The run `id` with its step records and events, or `None`.
fn read_run(connection: &Connection, id: &str) -> Result<Option<StoredRun>, StoreError> {
    let head = connection
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))
        .and_then(|mut statement| statement.query_row([id], |row| run_from_row(id, row)).optional())
        .map_err(sql_error(id))?;
    let Some(mut stored) = head.transpose()? else {
        return Ok(None);
    };
    let texts = |query: &str| -> Result<Vec<String>, StoreError> {
        let mut statement = connection.prepare_cached(query).map_err(sql_error(id))?;
        let rows = statement.query_map([id], |row| row.get(0)).map_err(sql_error(id))?;
        rows.collect::<Result<Vec<String>, _>>().map_err(sql_error(id))
    };
    let steps = texts("SELECT record FROM run_steps WHERE run_id = ?1 ORDER BY idx")?;
    let events = texts("SELECT event FROM run_events WHERE run_id = ?1 ORDER BY seq")?;
    let warnings = texts("SELECT warning FROM run_warnings WHERE run_id = ?1 ORDER BY seq")?;
    rows::attach(&mut stored, steps, events, warnings)?;
    Ok(Some(stored))
}

/// Writes the step records, events and warnings a save adds (see
/// [`RunStore::save_run_parts`]); `stored_events` is how many the store
/// had. Gives the new count of events.
fn write_parts(
    transaction: &rusqlite::Transaction<'_>,
    run: &WorkflowRun,
    new: bool,
    stored_events: i64,
) -> Result<i64, StoreError> {
    let id = run.run.as_str();
    let mut step = transaction
        .prepare_cached("INSERT OR REPLACE INTO run_steps (run_id, idx, record) VALUES (?1, ?2, ?3)")
        .map_err(sql_error(id))?;
    for (index, record) in rows::step_rows(run, new)? {
        step.execute(params![id, index, record]).map_err(sql_error(id))?;
    }
    let mut event = transaction
        .prepare_cached("INSERT OR REPLACE INTO run_events (run_id, seq, event) VALUES (?1, ?2, ?3)")
        .map_err(sql_error(id))?;
    let appended = rows::event_rows(run, stored_events)?;
    let count = appended.last().map_or(stored_events, |(seq, _)| seq.saturating_add(1));
    for (seq, text) in appended {
        event.execute(params![id, seq, text]).map_err(sql_error(id))?;
    }
    // The next warning's place, from the key's index: no count to keep.
    let stored_warnings: i64 = transaction
        .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM run_warnings WHERE run_id = ?1")
        .and_then(|mut statement| statement.query_row([id], |row| row.get(0)))
        .map_err(sql_error(id))?;
    let mut warning = transaction
        .prepare_cached("INSERT OR REPLACE INTO run_warnings (run_id, seq, warning) VALUES (?1, ?2, ?3)")
        .map_err(sql_error(id))?;
    for (seq, text) in rows::warning_rows(run, stored_warnings) {
        warning.execute(params![id, seq, text]).map_err(sql_error(id))?;
    }
    Ok(count)
}

/// [`RunStore::save_run_parts`] inside `transaction`, which the caller
/// commits: a save, or the run a schedule starts with its tick.
pub(super) fn save_run_in(
    transaction: &rusqlite::Transaction<'_>,
    run: &WorkflowRun,
    meta: RunMeta<'_>,
    expected_version: u64,
    claim: Option<&Claim>,
) -> Result<(), StoreError> {
    let id = run.run.as_str();
    let rows::RunWrite { version, expected, head } = rows::run_write(run, meta.version, expected_version)?;
    let row: Option<(i64, Option<String>, Option<i64>, i64)> = transaction
        .prepare_cached("SELECT version, claimed_by, claimed_until, events_len FROM runs WHERE id = ?1")
        .and_then(|mut statement| {
            statement.query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))).optional()
        })
        .map_err(sql_error(id))?;
    let (stored_version, holder, until, events_len) = row.unwrap_or((0, None, None, 0));
    // Another holder under a live lease owns the run, whatever the
    // versions say.
    let held_by_other = match (&holder, until, claim) {
        (Some(holder), Some(until), Some(claim)) => *holder != claim.holder && until >= claim.now,
        _ => false,
    };
    if stored_version != expected || held_by_other {
        return Err(StoreError::RunConflict {
            id: id.to_string(),
            stored: u64::try_from(stored_version).unwrap_or(0),
            expected: expected_version,
        });
    }
    let events_len = write_parts(transaction, run, expected == 0, events_len)?;
    let now = now_text();
    transaction
        .prepare_cached(
            "INSERT INTO runs (id, program, program_hash, flow, status, due_at, version, claimed_by,
                 claimed_until, created_at, updated_at, state, events_len)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12)
             ON CONFLICT (id) DO UPDATE SET program = ?2, program_hash = ?3, flow = ?4, status = ?5,
                 due_at = ?6, version = ?7, claimed_by = ?8, claimed_until = ?9, updated_at = ?10, state = ?11,
                 events_len = ?12",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                id,
                meta.program,
                meta.program_hash,
                run.flow_name,
                rows::status(run),
                meta.due_at,
                version,
                claim.map(|claim| claim.holder.as_str()),
                claim.map(|claim| claim.until),
                now,
                head,
                events_len
            ])
        })
        .map_err(sql_error(id))?;
    Ok(())
}

/// Runs a holder may take by name: waiting and due (or `early`), paused by
/// a limit, or left running by a holder whose lease is over; never one
/// held under a live lease. Workers take due runs only ([`claim_due`]).
///
/// [`claim_due`]: RunStore::claim_due
const TAKEABLE: &str = "(claimed_until IS NULL OR claimed_until < ?2)
     AND ((status = 'waiting' AND (?3 OR due_at <= ?2)) OR status IN ('running', 'paused'))";

impl RunStore for SqliteStore {
    fn save_run_parts(
        &self,
        run: &WorkflowRun,
        meta: RunMeta<'_>,
        expected_version: u64,
        claim: Option<&Claim>,
    ) -> Result<(), StoreError> {
        self.writable()?;
        let id = run.run.as_str();
        let mut connection = self.connection(id)?;
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error(id))?;
        save_run_in(&transaction, run, meta, expected_version, claim)?;
        transaction.commit().map_err(sql_error(id))
    }

    fn load_run(&self, id: &str) -> Result<Option<StoredRun>, StoreError> {
        check_id(id)?;
        let connection = self.connection(id)?;
        read_run(&connection, id)
    }

    fn count_active_runs(&self, prefix: &str) -> Result<u64, StoreError> {
        caps::count_active_runs(&*self.connection("*")?, prefix)
    }

    fn create_run(&self, stored: &StoredRun, claim: Option<&Claim>, cap: &Cap<'_>) -> Result<Created, StoreError> {
        self.writable()?;
        caps::create_run(&mut *self.connection(&stored.run.run)?, stored, claim, cap)
    }

    fn list_runs_readable(&self) -> Result<(Vec<RunSummary>, Vec<StoreError>), StoreError> {
        let connection = self.connection("*")?;
        let mut statement = connection
            .prepare("SELECT id, flow, status, state, program, updated_at FROM runs ORDER BY created_at, id")
            .map_err(sql_error("*"))?;
        let mut found = statement.query([]).map_err(sql_error("*"))?;
        let (mut runs, mut unreadable) = (Vec::new(), Vec::new());
        while let Some(row) = found.next().map_err(sql_error("*"))? {
            // A column of the wrong type is that run's corruption, not the list's.
            let id: String = row.get(0).unwrap_or_else(|_| "?".to_string());
            let columns = (|| -> rusqlite::Result<(String, String, String, String, String)> {
                Ok((row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?))
            })();
            let summary = columns
                .map_err(|error| StoreError::Corrupt { id: id.clone(), message: error.to_string() })
                .and_then(|(flow, status, state, program, updated_at)| {
                    rows::summary(id, flow, status, &state, program, updated_at)
                });
            match summary {
                Ok(summary) => runs.push(summary),
                Err(error) => unreadable.push(error),
            }
        }
        Ok((runs, unreadable))
    }

    fn claim_run(&self, id: &str, claim: &Claim, early: bool) -> Result<Option<StoredRun>, StoreError> {
        check_id(id)?;
        self.writable()?;
        let mut connection = self.connection(id)?;
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error(id))?;
        let taken = transaction
            .execute(
                &format!("UPDATE runs SET claimed_by = ?4, claimed_until = ?5 WHERE id = ?1 AND {TAKEABLE}"),
                params![id, claim.now, early, claim.holder, claim.until],
            )
            .map_err(sql_error(id))?;
        if taken == 0 {
            return Ok(None);
        }
        let run = read_run(&transaction, id)?;
        transaction.commit().map_err(sql_error(id))?;
        Ok(run)
    }

    fn claim_due(&self, claim: &Claim, limit: usize) -> Result<Vec<StoredRun>, StoreError> {
        self.writable()?;
        let mut connection = self.connection("*")?;
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error("*"))?;
        // Two index range scans on (status, due_at), never a scan of the
        // runs that ended: runs left by a dead holder first, then the due
        // ones, oldest first.
        let mut ids: Vec<String> = Vec::new();
        for query in [
            "SELECT id FROM runs WHERE status = 'running' AND (claimed_until IS NULL OR claimed_until < ?1) LIMIT ?2",
            "SELECT id FROM runs WHERE status = 'waiting' AND due_at <= ?1
                 AND (claimed_until IS NULL OR claimed_until < ?1) ORDER BY due_at LIMIT ?2",
        ] {
            let wanted = i64::try_from(limit.saturating_sub(ids.len())).unwrap_or(i64::MAX);
            if wanted == 0 {
                break;
            }
            let mut statement = transaction.prepare_cached(query).map_err(sql_error("*"))?;
            let rows = statement.query_map(params![claim.now, wanted], |row| row.get(0)).map_err(sql_error("*"))?;
            for id in rows {
                ids.push(id.map_err(sql_error("*"))?);
            }
        }
        let mut runs = Vec::with_capacity(ids.len());
        for id in &ids {
            transaction
                .execute(
                    "UPDATE runs SET claimed_by = ?2, claimed_until = ?3 WHERE id = ?1",
                    params![id, claim.holder, claim.until],
                )
                .map_err(sql_error(id))?;
            if let Some(run) = read_run(&transaction, id)? {
                runs.push(run);
            }
        }
        transaction.commit().map_err(sql_error("*"))?;
        Ok(runs)
    }

    fn cancel_run(&self, id: &str, at: &str) -> Result<Cancel, StoreError> {
        check_id(id)?;
        self.writable()?;
        let mut connection = self.connection(id)?;
        let transaction =
            connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error(id))?;
        let Some(stored) = read_run(&transaction, id)? else {
            return Ok(Cancel::Missing);
        };
        if stored.run.status.has_ended() {
            return Ok(Cancel::Ended(stored.run.status));
        }
        let stored_events = i64::try_from(stored.run.events.len()).unwrap_or(i64::MAX);
        let stored = super::cancelled(stored, at);
        let rows::RunWrite { version, head, .. } = rows::run_write(&stored.run, stored.version, 0)?;
        let events_len = write_parts(&transaction, &stored.run, false, stored_events)?;
        transaction
            .execute(
                "UPDATE runs SET status = ?2, due_at = NULL, version = ?3, claimed_by = NULL, claimed_until = NULL,
                     updated_at = ?4, state = ?5, events_len = ?6 WHERE id = ?1",
                params![id, rows::status(&stored.run), version, now_text(), head, events_len],
            )
            .map_err(sql_error(id))?;
        transaction.commit().map_err(sql_error(id))?;
        Ok(Cancel::Cancelled(Box::new(stored)))
    }

    fn next_due(&self) -> Result<Option<i64>, StoreError> {
        let connection = self.connection("*")?;
        connection
            .query_row("SELECT MIN(due_at) FROM runs WHERE status = 'waiting'", [], |row| row.get(0))
            .map_err(sql_error("*"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn temp_db(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flowc-sqlite-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("flowc.db")
    }

    fn session(id: &str, version: u64) -> Session {
        let mut session = Session::new(id, "hash");
        session.version = version;
        session
    }

    #[test]
    fn a_tenants_sessions_are_counted_by_their_prefix_alone() {
        let store = SqliteStore::open(&temp_db("count")).unwrap();
        for id in ["acme_booking_1", "acme_booking_2", "acmeb_booking_1", "acme-x_booking_1", "b_booking_1"] {
            store.save(&session(id, 1), 0, &[]).unwrap();
        }
        assert_eq!(store.count_sessions("acme_").unwrap(), 2);
        assert_eq!(store.count_sessions("acmeb_").unwrap(), 1);
        assert_eq!(store.count_sessions("zed_").unwrap(), 0);
        assert_eq!(store.count_active_runs("acme_").unwrap(), 0);
    }

    #[test]
    fn saves_loads_lists_and_deletes_a_session_with_its_transcript() {
        let store = SqliteStore::open(&temp_db("roundtrip")).unwrap();
        let mut first = session("s1", 1);
        first.data.insert("hotel".into(), "Ritz".into());
        let said =
            [Message { role: Role::User, text: "hi".into() }, Message { role: Role::Assistant, text: "hello".into() }];
        store.save(&first, 0, &said).unwrap();
        let mut second = first.clone();
        second.version = 2;
        store.save(&second, 1, &said[..1]).unwrap();
        assert_eq!(store.load("s1").unwrap(), Some(second));
        assert_eq!(store.load("missing").unwrap(), None);
        assert_eq!(store.transcript("s1").unwrap().len(), 3);
        assert_eq!(store.list().unwrap().iter().map(|summary| summary.id.as_str()).collect::<Vec<_>>(), ["s1"]);
        assert!(store.delete("s1").unwrap());
        assert!(!store.delete("s1").unwrap());
        assert_eq!(store.load("s1").unwrap(), None);
        assert!(store.transcript("s1").unwrap().is_empty());
    }

    #[test]
    fn a_stale_version_is_a_conflict_and_changes_nothing() {
        let store = SqliteStore::open(&temp_db("conflict")).unwrap();
        store.save(&session("s2", 1), 0, &[]).unwrap();
        let mut winner = session("s2", 2);
        winner.data.insert("x".into(), 1.into());
        store.save(&winner, 1, &[]).unwrap();
        let error = store.save(&session("s2", 2), 1, &[]).unwrap_err();
        assert!(matches!(error, StoreError::Conflict { stored: 2, expected: 1, .. }), "{error}");
        assert!(matches!(store.save(&session("s2", 1), 0, &[]), Err(StoreError::Conflict { .. })));
        assert_eq!(store.load("s2").unwrap(), Some(winner));
    }

    #[test]
    fn a_row_holding_another_session_is_refused() {
        let path = temp_db("mismatch");
        let store = SqliteStore::open(&path).unwrap();
        store.save(&session("alice", 1), 0, &[]).unwrap();
        let connection = Connection::open(&path).unwrap();
        connection.execute("UPDATE sessions SET id = 'fork' WHERE id = 'alice'", []).unwrap();
        assert!(matches!(store.load("fork"), Err(StoreError::Corrupt { .. })));
        connection.execute("UPDATE sessions SET version = 9 WHERE id = 'fork'", []).unwrap();
        assert!(matches!(store.load("fork"), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn a_corrupt_row_is_left_out_of_the_list_and_named() {
        let path = temp_db("corrupt-row");
        let store = SqliteStore::open(&path).unwrap();
        store.save(&session("good", 1), 0, &[]).unwrap();
        store.save(&session("bad", 1), 0, &[]).unwrap();
        let connection = Connection::open(&path).unwrap();
        connection.execute("UPDATE sessions SET turns = -1 WHERE id = 'bad'", []).unwrap();
        let (sessions, unreadable) = store.list_readable().unwrap();
        assert_eq!(sessions.iter().map(|summary| summary.id.as_str()).collect::<Vec<_>>(), ["good"]);
        assert_eq!(unreadable.len(), 1);
        assert_eq!(unreadable[0].to_string(), "`bad` is corrupt in the store: its turn count -1 is out of range");
        assert!(store.list().is_err(), "the strict listing still refuses");
        assert_eq!(store.load("good").unwrap(), Some(session("good", 1)));
    }

    #[test]
    fn a_database_at_every_older_schema_version_migrates_and_keeps_its_data() {
        for version in 0..MIGRATIONS.len() {
            let path = temp_db(&format!("migrate-{version}"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut connection = Connection::open(&path).unwrap();
            migrate(&mut connection, &MIGRATIONS[..version]).unwrap();
            let at: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
            assert_eq!(at, i64::try_from(version).unwrap());
            if version >= 1 {
                let state = serde_json::to_string(&session("old", 3)).unwrap();
                connection
                    .execute(
                        "INSERT INTO sessions (id, version, flow, step, turns, transcript_len, updated_at, state)
                         VALUES ('old', 3, NULL, NULL, 0, 0, 'then', ?1)",
                        [state],
                    )
                    .unwrap();
            }
            drop(connection);
            let store = SqliteStore::open(&path).unwrap();
            let connection = store.connection("*").unwrap();
            let at: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
            drop(connection);
            assert_eq!(at, i64::try_from(MIGRATIONS.len()).unwrap(), "from version {version}");
            if version >= 1 {
                assert_eq!(store.load("old").unwrap(), Some(session("old", 3)), "from version {version}");
            }
            assert!(store.list_runs().unwrap().is_empty());
        }
    }

    /// A run as version 2 stored it: its step records and events inside
    /// its state.
    const OLD_RUN: &str = r#"{"run":"old-run","flow":0,"status":"waiting","next_step":1,"stopped_at":0,
        "resume_at":"2026-01-06T10:00:00Z","data":{"n":1},"context":{},
        "steps":[{"id":"a","status":"waiting","started_at":"t0","duration_ms":0,"output":null,"error":null},
                 {"id":"b","status":"pending","started_at":null,"duration_ms":null,"output":null,"error":null}],
        "warnings":["an old warning"],"flow_name":"f",
        "events":[{"event":"step_started","step":"a","at":"t1"},{"event":"step_completed","step":"a","at":"t2"}]}"#;

    #[test]
    fn runs_stored_whole_move_into_step_and_event_rows_and_go_on_appending() {
        let path = temp_db("migrate-runs");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut connection = Connection::open(&path).unwrap();
        migrate(&mut connection, &MIGRATIONS[..2]).unwrap();
        connection
            .execute(
                "INSERT INTO runs (id, program, program_hash, flow, status, due_at, version, created_at, updated_at,
                     state) VALUES ('old-run', 'p.flow', 'h', 'f', 'waiting', 5, 2, 'then', 'then', ?1)",
                [OLD_RUN],
            )
            .unwrap();
        drop(connection);
        let store = SqliteStore::open(&path).unwrap();
        let expected: crate::runtime::workflow::WorkflowRun = serde_json::from_str(OLD_RUN).unwrap();
        let mut stored = store.load_run("old-run").unwrap().unwrap();
        assert_eq!(stored.run, expected);
        let head: String = store
            .connection("*")
            .unwrap()
            .query_row("SELECT state FROM runs WHERE id = 'old-run'", [], |row| row.get(0))
            .unwrap();
        assert!(!head.contains("step_started"), "the events left the state: {head}");
        assert!(!head.contains("an old warning"), "the warnings left the state: {head}");

        let mut run = stored.run.clone();
        run.events.push(crate::runtime::workflow::RunEvent {
            event: "run_resumed".into(),
            step: None,
            at: "t3".into(),
        });
        run.step_mut(1).unwrap().status = crate::runtime::workflow::StepStatus::Completed;
        run.warnings.push("a new warning".into());
        super::super::commit_run(&store, &mut stored, run.clone(), None, None).unwrap();
        let loaded = store.load_run("old-run").unwrap().unwrap();
        assert_eq!(loaded.run, run);
        assert_eq!(loaded.version, 3);
        run.warnings.push("a third".into());
        super::super::commit_run(&store, &mut stored, run.clone(), None, None).unwrap();
        assert_eq!(
            store.load_run("old-run").unwrap().unwrap().run.warnings,
            ["an old warning", "a new warning", "a third"]
        );
        let connection = store.connection("*").unwrap();
        let rows: i64 = connection.query_row("SELECT COUNT(*) FROM run_warnings", [], |row| row.get(0)).unwrap();
        let head: String = connection.query_row("SELECT state FROM runs", [], |row| row.get(0)).unwrap();
        assert_eq!(rows, 3, "each warning is a row, written once");
        assert!(!head.contains("warning"), "{head}");
    }

    #[test]
    fn a_database_from_a_newer_flowc_is_refused() {
        let path = temp_db("newer");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let connection = Connection::open(&path).unwrap();
        connection.pragma_update(None, "user_version", 99).unwrap();
        drop(connection);
        let error = SqliteStore::open(&path).err().unwrap();
        assert!(error.to_string().contains("newer than this flowc knows"), "{error}");
    }

    #[test]
    fn the_old_json_store_is_imported_and_its_lock_files_removed() {
        let path = temp_db("import");
        let sessions = path.parent().unwrap().join("sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        let mut old = session("whatever", 4);
        old.history = vec![Message { role: Role::User, text: "hi".into() }];
        std::fs::write(sessions.join("alice.json"), serde_json::to_string(&old).unwrap()).unwrap();
        std::fs::write(sessions.join("alice.lock"), "").unwrap();
        let store = SqliteStore::open(&path).unwrap();
        let loaded = store.load("alice").unwrap().unwrap();
        assert_eq!(loaded.id, "alice", "the file's name is the key");
        assert_eq!(loaded.version, 4);
        assert_eq!(store.transcript("alice").unwrap().len(), 1);
        assert!(!sessions.exists());
        assert!(!path.parent().unwrap().join("sessions.imported/alice.lock").exists());
    }
}
