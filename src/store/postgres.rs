//! The PostgreSQL store (`--store postgres://…`): the SQLite store's schema
//! and semantics on a server that many machines share. A turn or a step is
//! one transaction; the compare-and-swap reads the row `FOR UPDATE`, so two
//! writers of one session serialize and the second sees the first's
//! version. Workers claim due runs with `FOR UPDATE SKIP LOCKED`: two
//! workers never take the same run, and neither waits for the other.
//!
//! The schema is versioned in a `schema_version` table; [`MIGRATIONS`]
//! takes a database of any older version to the current one, under an
//! advisory lock so that two processes starting at once migrate once.

mod caps;
mod versions;

use super::postgres_tls::describe;
use super::rows::{self, now_text};
use super::{
    Cancel, Cap, Claim, Created, RunMeta, RunStore, RunSummary, SessionStore, SessionSummary, StoreError, StoredRun,
    Swap, check_id,
};
use crate::message::Message;
use crate::runtime::session::Session;
use crate::runtime::workflow::WorkflowRun;
use postgres::{Client, GenericClient, Row, Statement};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};

/// `MIGRATIONS[n]` takes a database at version `n` to `n + 1`; the same
/// versions as the SQLite store's.
pub const MIGRATIONS: &[&str] = &[
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        flow TEXT,
        step TEXT,
        turns BIGINT NOT NULL,
        transcript_len BIGINT NOT NULL,
        updated_at TEXT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE TABLE transcript (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );",
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        program TEXT NOT NULL,
        program_hash TEXT NOT NULL,
        flow TEXT NOT NULL,
        status TEXT NOT NULL,
        due_at BIGINT,
        version BIGINT NOT NULL,
        claimed_by TEXT,
        claimed_until BIGINT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE INDEX runs_due ON runs (status, due_at);",
    // 3: as in the SQLite store, step records and events as rows.
    "CREATE TABLE run_steps (
        run_id TEXT NOT NULL,
        idx BIGINT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE run_events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    ALTER TABLE runs ADD COLUMN events_len BIGINT NOT NULL DEFAULT 0;
    INSERT INTO run_steps (run_id, idx, record)
        SELECT runs.id, step.ordinality - 1, step.value::text
        FROM runs, jsonb_array_elements(COALESCE(runs.state::jsonb -> 'steps', '[]'::jsonb))
            WITH ORDINALITY AS step(value, ordinality);
    INSERT INTO run_events (run_id, seq, event)
        SELECT runs.id, event.ordinality - 1, event.value::text
        FROM runs, jsonb_array_elements(COALESCE(runs.state::jsonb -> 'events', '[]'::jsonb))
            WITH ORDINALITY AS event(value, ordinality);
    UPDATE runs SET events_len = (SELECT COUNT(*) FROM run_events WHERE run_id = runs.id),
        state = ((runs.state::jsonb - 'steps') - 'events')::text;",
    // 4: as in the SQLite store, warnings as rows appended.
    "CREATE TABLE run_warnings (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        warning TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    INSERT INTO run_warnings (run_id, seq, warning)
        SELECT runs.id, warning.ordinality - 1, warning.value
        FROM runs, jsonb_array_elements_text(CASE WHEN jsonb_typeof(runs.state::jsonb -> 'warnings') = 'array'
                THEN runs.state::jsonb -> 'warnings' ELSE '[]'::jsonb END)
            WITH ORDINALITY AS warning(value, ordinality);
    UPDATE runs SET state = (runs.state::jsonb - 'warnings')::text;",
    // 5: as in the SQLite store, workflow schedules.
    "CREATE TABLE schedules (
        program TEXT NOT NULL,
        flow TEXT NOT NULL,
        cron TEXT NOT NULL,
        timezone TEXT NOT NULL,
        next_at BIGINT NOT NULL,
        last_run TEXT,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (program, flow)
    );
    CREATE INDEX schedules_next ON schedules (next_at);",
    versions::MIGRATION,
];

/// Any number that no other flowc lock uses: the migration lock's key.
const MIGRATION_LOCK: i64 = 0x0066_6c6f_7763;

/// The store many machines share: sessions and workflow runs in one
/// PostgreSQL database, over a pool of connections, with TLS as the URL's
/// `sslmode` asks ([`super::postgres_tls`]).
pub struct PostgresStore {
    pool: Pool,
    /// The URL, for the listening connection a worker opens.
    url: String,
    /// The connection that `LISTEN`s on [`NEWS`], opened by the first wait;
    /// never one of the pool's, which would miss news while lent.
    listener: Mutex<Option<Client>>,
}

/// How many connections a store opens at most when the URL says nothing
/// (`pool_size=N`): enough for the commits of concurrent turns to share
/// PostgreSQL's group commit, few enough that several processes stay well
/// inside the server's default `max_connections` (100).
pub(crate) const DEFAULT_POOL_SIZE: usize = 10;

/// The most `pool_size` may ask for: beyond it a typo, not a plan.
const MAX_POOL_SIZE: usize = 1000;

/// A bounded pool of connections: a caller takes an idle one, opens one
/// while fewer than `size` are open, or waits for one to come back. A
/// connection the server closed (or that broke) is dropped when it comes
/// back, and the next caller opens a fresh one in its place.
struct Pool {
    /// The URL without `pool_size`, as the client library takes it.
    url: String,
    size: usize,
    state: Mutex<PoolState>,
    returned: Condvar,
}

struct PoolState {
    idle: Vec<Connection>,
    /// Idle and lent together: never above the pool's size.
    open: usize,
}

/// A connection and the statements prepared on it, so that a statement
/// run again costs one round trip (bind and execute), not two.
pub(super) struct Connection {
    pub(super) client: Client,
    prepared: HashMap<&'static str, Statement>,
}

impl Connection {
    fn new(client: Client) -> Connection {
        Connection { client, prepared: HashMap::new() }
    }

    /// `sql` prepared on this connection, once.
    pub(super) fn statement(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.prepared.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// A connection lent by the pool; it goes back when dropped.
pub(super) struct Lent<'a> {
    pool: &'a Pool,
    connection: Option<Connection>,
    /// A call on it failed: dropped when it comes back.
    failed: bool,
}

impl Deref for Lent<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        // Taken out only in `drop`.
        self.connection.as_ref().unwrap_or_else(|| unreachable!("a lent connection is there until dropped"))
    }
}

impl DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.connection.as_mut().unwrap_or_else(|| unreachable!("a lent connection is there until dropped"))
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        // A poisoned lock means a caller panicked holding it: the state
        // is two plain fields, still consistent, so it is used anyway.
        let mut state = self.pool.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.failed || connection.client.is_closed() {
            state.open = state.open.saturating_sub(1);
        } else {
            state.idle.push(connection);
        }
        drop(state);
        self.pool.returned.notify_one();
    }
}

impl Pool {
    fn new(url: String, size: usize, first: Client) -> Pool {
        let state = PoolState { idle: vec![Connection::new(first)], open: 1 };
        Pool { url, size, state: Mutex::new(state), returned: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self) -> Result<Lent<'_>, StoreError> {
        let mut state = self.lock();
        loop {
            if let Some(connection) = state.idle.pop() {
                return Ok(Lent { pool: self, failed: false, connection: Some(connection) });
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                // Opened without the lock: the others go on meanwhile.
                return match super::postgres_tls::connect(&self.url) {
                    Ok(client) => Ok(Lent { pool: self, failed: false, connection: Some(Connection::new(client)) }),
                    Err(message) => {
                        self.lock().open -= 1;
                        self.returned.notify_one();
                        Err(StoreError::Open { location: redact(&self.url), message })
                    }
                };
            }
            state = self.returned.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// The pool's size from `pool_size=N` in `url`, and the URL without it.
pub(crate) fn pool_size(url: &str) -> Result<(usize, String), String> {
    let (base, query) = super::postgres_tls::split_query(url);
    let mut size = DEFAULT_POOL_SIZE;
    let mut kept = Vec::new();
    for parameter in query.split('&').filter(|parameter| !parameter.is_empty()) {
        match parameter.split_once('=') {
            Some(("pool_size", value)) => {
                size =
                    value.parse::<usize>().ok().filter(|size| (1..=MAX_POOL_SIZE).contains(size)).ok_or_else(|| {
                        format!("pool_size=`{value}` is not a whole number of connections from 1 to {MAX_POOL_SIZE}")
                    })?;
            }
            _ => kept.push(parameter),
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((size, rest))
}

const LOAD_SESSION: &str = "SELECT version, state FROM sessions WHERE id = $1";

/// A session's first save: the row is inserted unless another first save
/// got there first (then nothing is, and no line either). Its one row is
/// `(base, NULL, NULL)` when it wrote, `(NULL, stored version, stored
/// state)` when the row was there already, so a conflict costs no second
/// round trip, not even to read the session that won. Parameters: id,
/// version, flow, step, turns, lines appended, updated at, state, the
/// expected version (0, unused), the lines' roles and texts.
const INSERT_SESSION: &str = "WITH head AS (
        INSERT INTO sessions (id, version, flow, step, turns, transcript_len, updated_at, state)
        SELECT $1::TEXT, $2::BIGINT, $3::TEXT, $4::TEXT, $5::BIGINT, $6::BIGINT, $7::TEXT, $8::TEXT
        WHERE $9::BIGINT = 0
        ON CONFLICT (id) DO NOTHING
        RETURNING 0::BIGINT AS base),
    lines AS (
        INSERT INTO transcript (session_id, seq, role, text)
        SELECT $1, head.base + line.ord - 1, line.role, line.text
        FROM head, unnest($10::TEXT[], $11::TEXT[]) WITH ORDINALITY AS line(role, text, ord))
    SELECT base, NULL::BIGINT AS stored, NULL::TEXT AS state FROM head
    UNION ALL
    SELECT NULL, version, state FROM sessions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM head)";

/// A later save: the compare-and-swap is the `version = $9` condition,
/// which PostgreSQL checks again on the newest row after waiting for a
/// concurrent writer, so of two saves from one version exactly one
/// writes. Same parameters and answer as [`INSERT_SESSION`]; the stored
/// version and state it answers on a conflict are the statement's
/// snapshot's, which a writer that committed meanwhile may have passed
/// (the conflict stands either way, and a turn run again on that state
/// meets it at its own save).
const UPDATE_SESSION: &str = "WITH head AS (
        UPDATE sessions SET version = $2, flow = $3, step = $4, turns = $5,
            transcript_len = transcript_len + $6, updated_at = $7, state = $8
        WHERE id = $1 AND version = $9
        RETURNING transcript_len - $6 AS base),
    lines AS (
        INSERT INTO transcript (session_id, seq, role, text)
        SELECT $1, head.base + line.ord - 1, line.role, line.text
        FROM head, unnest($10::TEXT[], $11::TEXT[]) WITH ORDINALITY AS line(role, text, ord))
    SELECT base, NULL::BIGINT AS stored, NULL::TEXT AS state FROM head
    UNION ALL
    SELECT NULL, version, state FROM sessions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM head)";

/// The channel on which a save that releases a run, and a cancel, notify
/// the workers (the payload is the run's id).
pub const NEWS: &str = "flowc_runs";

/// The channel on which every save of a run notifies those following its
/// events (`flowc serve` answering `GET /v1/runs/{id}/events`); the payload
/// is the run's id.
pub const RUN_EVENTS: &str = "flowc_run_events";

pub(super) fn sql_error(id: &str) -> impl Fn(postgres::Error) -> StoreError + '_ {
    move |error| StoreError::Io { id: id.to_string(), message: describe(&error) }
}

impl PostgresStore {
    /// Connects to the database at `url` and brings its tables to the
    /// current schema, holding an advisory lock so that processes starting
    /// at once migrate once.
    pub fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let shown = redact(url);
        let open_error = |message: String| StoreError::Open { location: shown.clone(), message };
        let (size, rest) = pool_size(url).map_err(open_error)?;
        let mut client = super::postgres_tls::connect(&rest).map_err(open_error)?;
        migrate(&mut client, MIGRATIONS).map_err(open_error)?;
        Ok(PostgresStore { pool: Pool::new(rest.clone(), size, client), url: rest, listener: Mutex::new(None) })
    }

    /// Runs `work` on a connection from the pool. A connection on which
    /// the work failed (the server gone, the socket cut, any error but a
    /// conflict or a bad row) is dropped, not lent again: the next call
    /// opens a fresh one.
    pub(super) fn using<T>(&self, work: impl FnOnce(&mut Lent<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut lent = self.pool.get()?;
        let done = work(&mut lent);
        if matches!(done, Err(StoreError::Io { .. })) {
            lent.failed = true;
        }
        done
    }
}

/// The URL without its password (in the credentials or a `password=`
/// parameter), for messages.
pub fn redact(url: &str) -> String {
    let shown = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = url.get(scheme + 3..at).unwrap_or_default();
            match credentials.split_once(':') {
                Some((user, _)) => format!(
                    "{}{user}:***{}",
                    url.get(..scheme + 3).unwrap_or_default(),
                    url.get(at..).unwrap_or_default()
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    };
    let Some((base, query)) = shown.split_once('?') else {
        return shown;
    };
    let parameters: Vec<&str> = query
        .split('&')
        .map(|parameter| if parameter.starts_with("password=") { "password=***" } else { parameter })
        .collect();
    format!("{base}?{}", parameters.join("&"))
}

/// Brings the database to the last of `migrations`, each step in its own
/// transaction under the migration lock; public so that the tests can build
/// a database as an older flowc left it.
pub fn migrate(client: &mut Client, migrations: &[&str]) -> Result<(), String> {
    // Up to date, nothing is written: a role that may only read, or a
    // standby, can still list and show (its writes fail, saying why).
    let target = i64::try_from(migrations.len()).unwrap_or(i64::MAX);
    if let Ok(Some(row)) = client.query_opt("SELECT version FROM schema_version", &[])
        && row.get::<_, i64>(0) == target
    {
        return Ok(());
    }
    let mut transaction = client.transaction().map_err(|error| describe(&error))?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(|error| describe(&error))?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .map_err(|error| describe(&error))?;
    let version: Option<i64> = transaction
        .query_opt("SELECT version FROM schema_version", &[])
        .map_err(|error| describe(&error))?
        .map(|row| row.get(0));
    if version.is_none() {
        transaction.execute("INSERT INTO schema_version VALUES (0)", &[]).map_err(|error| describe(&error))?;
    }
    let version = usize::try_from(version.unwrap_or(0)).map_err(|_| "its schema version is invalid".to_string())?;
    if version > migrations.len() {
        return Err(format!(
            "its schema is version {version}, newer than this flowc knows ({}); use a newer flowc",
            migrations.len()
        ));
    }
    for (index, migration) in migrations.iter().enumerate().skip(version) {
        transaction
            .batch_execute(migration)
            .map_err(|error| format!("migration to version {}: {}", index + 1, describe(&error)))?;
    }
    transaction.execute("UPDATE schema_version SET version = $1", &[&target]).map_err(|error| describe(&error))?;
    transaction.commit().map_err(|error| describe(&error))
}

/// A save refused on its version: what the store holds instead.
struct Refused {
    id: String,
    /// The stored version (0: no session), never the one expected.
    stored: i64,
    expected: u64,
    /// The stored session's state, when the statement read the newest.
    state: Option<String>,
}

impl Refused {
    fn conflict(&self) -> StoreError {
        StoreError::Conflict {
            id: self.id.clone(),
            stored: u64::try_from(self.stored).unwrap_or(0),
            expected: self.expected,
        }
    }
}

impl PostgresStore {
    /// The session's save in one statement ([`INSERT_SESSION`],
    /// [`UPDATE_SESSION`]): `None` when it wrote, else what the store holds.
    fn swap(
        &self,
        session: &Session,
        expected_version: u64,
        transcript: &[Message],
    ) -> Result<Option<Refused>, StoreError> {
        let id = session.id.as_str();
        let rows::Write { version, expected, state } = rows::write(id, session.version, expected_version, session)?;
        let appended = i64::try_from(transcript.len()).unwrap_or(i64::MAX);
        let turns = i64::from(session.turns);
        let now = now_text();
        let roles: Vec<String> = transcript.iter().map(rows::role).collect();
        let texts: Vec<&str> = transcript.iter().map(|message| message.text.as_str()).collect();
        self.using(|lent| {
            // One statement, so one round trip and one transaction: the head's
            // compare-and-swap and the transcript's lines, which are written
            // only if the head was; refused, the session that is stored.
            let sql = if expected == 0 { INSERT_SESSION } else { UPDATE_SESSION };
            let statement = lent.statement(sql).map_err(sql_error(id))?;
            let written = lent
                .client
                .query_opt(
                    &statement,
                    &[
                        &id,
                        &version,
                        &session.flow_name,
                        &session.step_name,
                        &turns,
                        &appended,
                        &now,
                        &state,
                        &expected,
                        &roles,
                        &texts,
                    ],
                )
                .map_err(sql_error(id))?;
            let (stored, state): (i64, Option<String>) = match written {
                Some(row) if row.get::<_, Option<i64>>(0).is_some() => return Ok(None),
                Some(row) => (row.get::<_, Option<i64>>(1).unwrap_or(0), row.get(2)),
                // No row at all: the session was deleted.
                None => (0, None),
            };
            let refused = |stored: i64, state: Option<String>| Refused {
                id: id.to_string(),
                stored,
                expected: expected_version,
                state,
            };
            // The snapshot still shows the version expected (a writer
            // committed after it began, or a first save raced): still a
            // conflict, never a success, and its state is not the newest.
            Ok(Some(if stored == expected {
                refused(expected.saturating_add(1), None)
            } else {
                refused(stored, state)
            }))
        })
    }
}

impl SessionStore for PostgresStore {
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id)?;
        self.using(|lent| {
            let statement = lent.statement(LOAD_SESSION).map_err(sql_error(id))?;
            let row = lent.client.query_opt(&statement, &[&id]).map_err(sql_error(id))?;
            let Some(row) = row else {
                return Ok(None);
            };
            let state: String = row.get(1);
            rows::session(id, row.get(0), &state).map(Some)
        })
    }

    fn save(&self, session: &Session, expected_version: u64, transcript: &[Message]) -> Result<(), StoreError> {
        match self.swap(session, expected_version, transcript)? {
            None => Ok(()),
            Some(refused) => Err(refused.conflict()),
        }
    }

    fn save_or_stored(
        &self,
        session: &Session,
        expected_version: u64,
        transcript: &[Message],
    ) -> Result<Swap, StoreError> {
        let Some(refused) = self.swap(session, expected_version, transcript)? else {
            return Ok(Swap::Written);
        };
        match &refused.state {
            Some(state) => {
                rows::session(&refused.id, refused.stored, state).map(|stored| Swap::Stale(Box::new(stored)))
            }
            None => Err(refused.conflict()),
        }
    }

    fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let (sessions, unreadable) = self.list_readable()?;
        match unreadable.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(sessions),
        }
    }

    fn list_readable(&self) -> Result<(Vec<SessionSummary>, Vec<StoreError>), StoreError> {
        self.using(|lent| {
            let client = &mut lent.client;
            let rows = client
                .query("SELECT id, flow, step, turns, version, updated_at FROM sessions ORDER BY id", &[])
                .map_err(sql_error("*"))?;
            let (mut sessions, mut unreadable) = (Vec::new(), Vec::new());
            for row in &rows {
                let id: String = row.get(0);
                let (turns, version): (i64, i64) = (row.get(3), row.get(4));
                let corrupt = |message: String| StoreError::Corrupt { id: id.clone(), message };
                match (u32::try_from(turns), u64::try_from(version)) {
                    (Ok(turns), Ok(version)) => sessions.push(SessionSummary {
                        id,
                        flow: row.get(1),
                        step: row.get(2),
                        turns,
                        version,
                        updated_at: row.get(5),
                    }),
                    (Err(_), _) => unreadable.push(corrupt(format!("its turn count {turns} is out of range"))),
                    (_, Err(_)) => unreadable.push(corrupt(format!("its version {version} is out of range"))),
                }
            }
            Ok((sessions, unreadable))
        })
    }

    fn count_sessions(&self, prefix: &str) -> Result<u64, StoreError> {
        self.using(|lent| caps::count_sessions(lent, prefix))
    }

    fn create_session(&self, session: &Session, cap: &Cap<'_>) -> Result<Created, StoreError> {
        self.using(|lent| caps::create_session(lent, session, cap))
    }

    fn delete(&self, id: &str) -> Result<bool, StoreError> {
        check_id(id)?;
        self.using(|lent| {
            let client = &mut lent.client;
            let mut transaction = client.transaction().map_err(sql_error(id))?;
            transaction.execute("DELETE FROM transcript WHERE session_id = $1", &[&id]).map_err(sql_error(id))?;
            let deleted = transaction.execute("DELETE FROM sessions WHERE id = $1", &[&id]).map_err(sql_error(id))?;
            transaction.commit().map_err(sql_error(id))?;
            Ok(deleted > 0)
        })
    }

    fn transcript(&self, id: &str) -> Result<Vec<Message>, StoreError> {
        check_id(id)?;
        self.using(|lent| {
            let client = &mut lent.client;
            let rows = client
                .query("SELECT role, text FROM transcript WHERE session_id = $1 ORDER BY seq", &[&id])
                .map_err(sql_error(id))?;
            rows.iter().map(|row| rows::message(id, row.get(0), row.get(1))).collect()
        })
    }
}

const RUN_COLUMNS: &str = "id, state, program, program_hash, version, due_at";

fn run_from_row(row: &Row) -> Result<StoredRun, StoreError> {
    let id: String = row.get(0);
    let state: String = row.get(1);
    rows::run(&id, &state, row.get(2), row.get(3), row.get(4), row.get(5))
}

/// Adds the step records and events from their rows to a run read from
/// its head row.
fn with_parts(client: &mut impl GenericClient, mut stored: StoredRun) -> Result<StoredRun, StoreError> {
    let id = stored.run.run.clone();
    let id = id.as_str();
    let texts = |rows: Vec<Row>| rows.iter().map(|row| row.get::<_, String>(0)).collect::<Vec<_>>();
    let steps =
        client.query("SELECT record FROM run_steps WHERE run_id = $1 ORDER BY idx", &[&id]).map_err(sql_error(id))?;
    let events =
        client.query("SELECT event FROM run_events WHERE run_id = $1 ORDER BY seq", &[&id]).map_err(sql_error(id))?;
    let warnings = client
        .query("SELECT warning FROM run_warnings WHERE run_id = $1 ORDER BY seq", &[&id])
        .map_err(sql_error(id))?;
    rows::attach(&mut stored, texts(steps), texts(events), texts(warnings))?;
    Ok(stored)
}

/// Writes the step records, events and warnings a save adds (see
/// [`RunStore::save_run_parts`]); `stored_events` is how many the store
/// had. Gives the new count of events.
fn write_parts(
    transaction: &mut postgres::Transaction<'_>,
    run: &WorkflowRun,
    new: bool,
    stored_events: i64,
) -> Result<i64, StoreError> {
    let id = run.run.as_str();
    let steps = rows::step_rows(run, new)?;
    if !steps.is_empty() {
        let statement = transaction
            .prepare(
                "INSERT INTO run_steps (run_id, idx, record) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id, idx) DO UPDATE SET record = $3",
            )
            .map_err(sql_error(id))?;
        for (index, record) in steps {
            transaction.execute(&statement, &[&id, &index, &record]).map_err(sql_error(id))?;
        }
    }
    let appended = rows::event_rows(run, stored_events)?;
    let count = appended.last().map_or(stored_events, |(seq, _)| seq.saturating_add(1));
    if !appended.is_empty() {
        let statement = transaction
            .prepare(
                "INSERT INTO run_events (run_id, seq, event) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id, seq) DO UPDATE SET event = $3",
            )
            .map_err(sql_error(id))?;
        for (seq, text) in appended {
            transaction.execute(&statement, &[&id, &seq, &text]).map_err(sql_error(id))?;
        }
    }
    // The next warning's place, from the key's index: no count to keep.
    let stored_warnings: i64 = transaction
        .query_one("SELECT COALESCE(MAX(seq) + 1, 0) FROM run_warnings WHERE run_id = $1", &[&id])
        .map_err(sql_error(id))?
        .get(0);
    let warnings = rows::warning_rows(run, stored_warnings);
    if !warnings.is_empty() {
        let statement = transaction
            .prepare(
                "INSERT INTO run_warnings (run_id, seq, warning) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id, seq) DO UPDATE SET warning = $3",
            )
            .map_err(sql_error(id))?;
        for (seq, text) in warnings {
            transaction.execute(&statement, &[&id, &seq, &text]).map_err(sql_error(id))?;
        }
    }
    Ok(count)
}

/// As in the SQLite store: waiting and due (or `early`), paused by a
/// limit, or left running by a holder whose lease is over; `now` and
/// `early` are SQL parameters.
fn takeable(now: &str, early: &str) -> String {
    format!(
        "(claimed_until IS NULL OR claimed_until < {now})
         AND ((status = 'waiting' AND ({early} OR due_at <= {now})) OR status IN ('running', 'paused'))"
    )
}

/// [`RunStore::save_run_parts`] inside `transaction`, which the caller
/// commits: a save, or the run a schedule starts with its tick.
pub(super) fn save_run_in(
    transaction: &mut postgres::Transaction<'_>,
    run: &WorkflowRun,
    meta: RunMeta<'_>,
    expected_version: u64,
    claim: Option<&Claim>,
) -> Result<(), StoreError> {
    let id = run.run.as_str();
    let rows::RunWrite { version, expected, head } = rows::run_write(run, meta.version, expected_version)?;
    let conflict = |stored: i64| StoreError::RunConflict {
        id: id.to_string(),
        stored: u64::try_from(stored).unwrap_or(0),
        expected: expected_version,
    };
    let row = transaction
        .query_opt("SELECT version, claimed_by, claimed_until, events_len FROM runs WHERE id = $1 FOR UPDATE", &[&id])
        .map_err(sql_error(id))?;
    let (stored_version, holder, until, events_len): (i64, Option<String>, Option<i64>, i64) =
        row.map_or((0, None, None, 0), |row| (row.get(0), row.get(1), row.get(2), row.get(3)));
    let held_by_other = match (&holder, until, claim) {
        (Some(holder), Some(until), Some(claim)) => *holder != claim.holder && until >= claim.now,
        _ => false,
    };
    if stored_version != expected || held_by_other {
        return Err(conflict(stored_version));
    }
    let now = now_text();
    let status = rows::status(run);
    let holder = claim.map(|claim| claim.holder.clone());
    let until = claim.map(|claim| claim.until);
    // One upsert for a new run and an existing one: the version
    // condition makes a concurrent first save of the same id write
    // nothing (the existing row is locked above otherwise).
    let events_after = events_len.max(i64::try_from(run.events.len()).unwrap_or(i64::MAX));
    let written = transaction
        .execute(
            "INSERT INTO runs (id, program, program_hash, flow, status, due_at, version, claimed_by,
             claimed_until, created_at, updated_at, state, events_len)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $13)
         ON CONFLICT (id) DO UPDATE SET program = $2, program_hash = $3, flow = $4, status = $5,
             due_at = $6, version = $7, claimed_by = $8, claimed_until = $9, updated_at = $10, state = $11,
             events_len = $13
         WHERE runs.version = $12",
            &[
                &id,
                &meta.program,
                &meta.program_hash,
                &run.flow_name,
                &status,
                &meta.due_at,
                &version,
                &holder,
                &until,
                &now,
                &head,
                &expected,
                &events_after,
            ],
        )
        .map_err(sql_error(id))?;
    if written == 0 {
        return Err(conflict(expected.saturating_add(1)));
    }
    write_parts(transaction, run, expected == 0, events_len)?;
    if claim.is_none() {
        // Released: it may be due, or due later than a worker thought.
        // Delivered on commit, so no worker looks before the row is there.
        transaction.execute("SELECT pg_notify($1, $2)", &[&NEWS, &id]).map_err(sql_error(id))?;
    }
    // Every save: a step started or ended is news to its followers.
    transaction.execute("SELECT pg_notify($1, $2)", &[&RUN_EVENTS, &id]).map_err(sql_error(id))?;
    Ok(())
}

impl RunStore for PostgresStore {
    fn save_run_parts(
        &self,
        run: &WorkflowRun,
        meta: RunMeta<'_>,
        expected_version: u64,
        claim: Option<&Claim>,
    ) -> Result<(), StoreError> {
        let id = run.run.as_str();
        self.using(|lent| {
            let mut transaction = lent.client.transaction().map_err(sql_error(id))?;
            save_run_in(&mut transaction, run, meta, expected_version, claim)?;
            transaction.commit().map_err(sql_error(id))
        })
    }

    fn load_run(&self, id: &str) -> Result<Option<StoredRun>, StoreError> {
        check_id(id)?;
        self.using(|lent| {
            let client = &mut lent.client;
            let row = client
                .query_opt(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"), &[&id])
                .map_err(sql_error(id))?;
            let Some(stored) = row.as_ref().map(run_from_row).transpose()? else {
                return Ok(None);
            };
            with_parts(&mut *client, stored).map(Some)
        })
    }

    fn list_runs_readable(&self) -> Result<(Vec<RunSummary>, Vec<StoreError>), StoreError> {
        self.using(|lent| {
            let client = &mut lent.client;
            let rows = client
                .query("SELECT id, flow, status, state, program, updated_at FROM runs ORDER BY created_at, id", &[])
                .map_err(sql_error("*"))?;
            let (mut runs, mut unreadable) = (Vec::new(), Vec::new());
            for row in &rows {
                match rows::summary(row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5)) {
                    Ok(summary) => runs.push(summary),
                    Err(error) => unreadable.push(error),
                }
            }
            Ok((runs, unreadable))
        })
    }

    fn count_active_runs(&self, prefix: &str) -> Result<u64, StoreError> {
        self.using(|lent| caps::count_active_runs(lent, prefix))
    }

    fn create_run(&self, stored: &StoredRun, claim: Option<&Claim>, cap: &Cap<'_>) -> Result<Created, StoreError> {
        self.using(|lent| caps::create_run(lent, stored, claim, cap))
    }

    fn claim_run(&self, id: &str, claim: &Claim, early: bool) -> Result<Option<StoredRun>, StoreError> {
        check_id(id)?;
        self.using(|lent| {
            let client = &mut lent.client;
            let row = client
                .query_opt(
                    &format!(
                        "UPDATE runs SET claimed_by = $4, claimed_until = $5 WHERE id = $1 AND {}
                     RETURNING {RUN_COLUMNS}",
                        takeable("$2", "$3")
                    ),
                    &[&id, &claim.now, &early, &claim.holder, &claim.until],
                )
                .map_err(sql_error(id))?;
            let Some(stored) = row.as_ref().map(run_from_row).transpose()? else {
                return Ok(None);
            };
            with_parts(&mut *client, stored).map(Some)
        })
    }

    fn claim_due(&self, claim: &Claim, limit: usize) -> Result<Vec<StoredRun>, StoreError> {
        self.using(|lent| {
            let client = &mut lent.client;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            // As in the SQLite store: runs left by a dead holder first, then the
            // due ones, oldest first; each an index range scan. SKIP LOCKED
            // passes over rows another worker is claiming this instant.
            let rows = client
                .query(
                    "WITH dead AS (
                     SELECT id FROM runs WHERE status = 'running'
                         AND (claimed_until IS NULL OR claimed_until < $1)
                         LIMIT $4 FOR UPDATE SKIP LOCKED),
                 due AS (
                     SELECT id, due_at FROM runs WHERE status = 'waiting' AND due_at <= $1
                         AND (claimed_until IS NULL OR claimed_until < $1)
                         ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED),
                 taken AS (
                     (SELECT id FROM dead) UNION ALL (SELECT id FROM due ORDER BY due_at) LIMIT $4)
                 UPDATE runs SET claimed_by = $2, claimed_until = $3 FROM taken WHERE runs.id = taken.id
                 RETURNING runs.id, runs.state, runs.program, runs.program_hash, runs.version, runs.due_at",
                    &[&claim.now, &claim.holder, &claim.until, &limit],
                )
                .map_err(sql_error("*"))?;
            let heads = rows.iter().map(run_from_row).collect::<Result<Vec<_>, _>>()?;
            heads.into_iter().map(|stored| with_parts(&mut *client, stored)).collect()
        })
    }

    fn cancel_run(&self, id: &str, at: &str) -> Result<Cancel, StoreError> {
        check_id(id)?;
        self.using(|lent| {
            let client = &mut lent.client;
            let mut transaction = client.transaction().map_err(sql_error(id))?;
            let row = transaction
                .query_opt(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1 FOR UPDATE"), &[&id])
                .map_err(sql_error(id))?;
            let Some(stored) = row.as_ref().map(run_from_row).transpose()? else {
                return Ok(Cancel::Missing);
            };
            let stored = with_parts(&mut transaction, stored)?;
            if stored.run.status.has_ended() {
                return Ok(Cancel::Ended(stored.run.status));
            }
            let stored_events = i64::try_from(stored.run.events.len()).unwrap_or(i64::MAX);
            let stored = super::cancelled(stored, at);
            let rows::RunWrite { version, head, .. } = rows::run_write(&stored.run, stored.version, 0)?;
            let events_len = write_parts(&mut transaction, &stored.run, false, stored_events)?;
            transaction
                .execute(
                    "UPDATE runs SET status = $2, due_at = NULL, version = $3, claimed_by = NULL, claimed_until = NULL,
                     updated_at = $4, state = $5, events_len = $6 WHERE id = $1",
                    &[&id, &rows::status(&stored.run), &version, &now_text(), &head, &events_len],
                )
                .map_err(sql_error(id))?;
            transaction.execute("SELECT pg_notify($1, $2)", &[&NEWS, &id]).map_err(sql_error(id))?;
            transaction.execute("SELECT pg_notify($1, $2)", &[&RUN_EVENTS, &id]).map_err(sql_error(id))?;
            transaction.commit().map_err(sql_error(id))?;
            Ok(Cancel::Cancelled(Box::new(stored)))
        })
    }

    fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.using(|lent| {
            let client = &mut lent.client;
            let row = client
                .query_one("SELECT MIN(due_at) FROM runs WHERE status = 'waiting'", &[])
                .map_err(sql_error("*"))?;
            Ok(row.get(0))
        })
    }

    fn wait_for_news(&self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        let mut listener = self
            .listener
            .lock()
            .map_err(|_| StoreError::Io { id: "*".to_string(), message: "the store's lock is poisoned".to_string() })?;
        if listener.is_none() {
            let mut client = super::postgres_tls::connect(&self.url)
                .map_err(|message| StoreError::Open { location: redact(&self.url), message })?;
            client.batch_execute(&format!("LISTEN {NEWS}")).map_err(sql_error("*"))?;
            *listener = Some(client);
        }
        let Some(client) = listener.as_mut() else {
            return Ok(false);
        };
        use postgres::fallible_iterator::FallibleIterator;
        let waited = client.notifications().timeout_iter(timeout).next();
        match waited {
            Ok(news) => {
                // Several saves at once are one piece of news: the worker
                // claims until nothing is due.
                while let Ok(Some(_)) = client.notifications().iter().next() {}
                Ok(news.is_some())
            }
            Err(error) => {
                // A broken listening connection is opened again by the next wait.
                *listener = None;
                Err(StoreError::Io { id: "*".to_string(), message: describe(&error) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_size_is_taken_out_of_the_url_and_the_rest_kept() {
        assert_eq!(pool_size("postgres://u@db/app"), Ok((DEFAULT_POOL_SIZE, "postgres://u@db/app".to_string())));
        assert_eq!(
            pool_size("postgres://u@db/app?sslmode=require&pool_size=32&connect_timeout=5"),
            Ok((32, "postgres://u@db/app?sslmode=require&connect_timeout=5".to_string()))
        );
        assert_eq!(pool_size("postgres://u@db/app?pool_size=4"), Ok((4, "postgres://u@db/app".to_string())));
    }

    #[test]
    fn a_bad_pool_size_is_refused_before_connecting_naming_the_parameter() {
        for bad in ["0", "many", "100000", ""] {
            let Err(error) = PostgresStore::connect(&format!("postgres://u@127.0.0.1:1/app?pool_size={bad}")) else {
                panic!("pool_size={bad} was taken");
            };
            let said = error.to_string();
            assert!(said.contains("pool_size=") && said.contains("whole number"), "{said}");
        }
    }

    #[test]
    fn a_password_never_appears_in_messages() {
        assert_eq!(redact("postgres://flowc:secret@127.0.0.1:5432/db"), "postgres://flowc:***@127.0.0.1:5432/db");
        assert_eq!(redact("postgres://127.0.0.1/db"), "postgres://127.0.0.1/db");
        assert_eq!(redact("postgres://flowc@127.0.0.1/db"), "postgres://flowc@127.0.0.1/db");
        assert_eq!(
            redact("postgres://flowc@db/app?sslmode=require&password=secret&sslrootcert=ca.pem"),
            "postgres://flowc@db/app?sslmode=require&password=***&sslrootcert=ca.pem"
        );
    }
}
