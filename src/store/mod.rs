//! Durable state behind two traits, so the runtime never knows where it
//! lives: conversations ([`SessionStore`]) and workflow runs ([`RunStore`]).
//! SQLite (bundled, WAL) is the store on one machine, PostgreSQL the store
//! many machines share; an in-memory session store serves tests and
//! embedders.
//!
//! Every write is one transaction with a compare-and-swap on a version: a
//! turn or a step saves only if nobody saved since it loaded, and a kill at
//! any moment leaves the store as before the write or after it. A session
//! row holds the position, data and a bounded history; the full transcript
//! is appended to its own table, so a turn costs the same at turn 10,000 as
//! at turn 1.
//!
//! Its I/O: the databases; [`location`] reads `FLOWC_STORE` and `[store]`
//! in `flowc.toml`; a SQLite store imports, once, the JSON session files of
//! the store that came before it and warns on stderr about one it cannot
//! read. The memory store does none.

#![warn(missing_docs)]

pub mod location;
pub mod memory;
pub mod postgres;
pub mod postgres_tls;
pub mod schedules;
pub mod sqlite;
pub(crate) mod sqlite_checkpoint;
pub(crate) mod sqlite_commit;
pub(crate) mod sqlite_guard;
pub mod versions;

use crate::ir::Program;
use crate::message::Message;
use crate::runtime::session::Session;
use crate::runtime::workflow::{RunEvent, RunStatus, WorkflowRun};
use serde::Serialize;

pub use location::StoreLocation;

/// How many messages of history a session imported from a JSON file keeps,
/// its program unknown; older ones go to the transcript only. A session's
/// turns keep what its program's requests carry ([`Session::keep_history`]).
pub const HISTORY_KEPT: usize = 32;

/// Why a store could not load, save, list or delete. Each message names the
/// session, run or store concerned and says what to do where there is
/// something to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A session was saved by another turn since this one loaded it: the
    /// save was refused and nothing was written.
    #[error(
        "session `{id}` was changed by someone else (stored version {stored}, expected {expected}); run the turn again"
    )]
    Conflict {
        /// The session's id.
        id: String,
        /// The version the store holds now.
        stored: u64,
        /// The version the refused save expected to replace.
        expected: u64,
    },
    /// A workflow run was saved by another holder since this one loaded
    /// it: the save was refused and nothing was written.
    #[error("run `{id}` was changed by someone else (stored version {stored}, expected {expected})")]
    RunConflict {
        /// The run's id.
        id: String,
        /// The version the store holds now.
        stored: u64,
        /// The version the refused save expected to replace.
        expected: u64,
    },
    /// The run was cancelled (`flowc runs cancel`) while a step executed;
    /// the step's result was dropped rather than saved over the cancel.
    #[error("run `{id}` was cancelled while it ran: it stopped there, and the step in flight was not recorded")]
    RunCancelled {
        /// The run's id.
        id: String,
    },
    /// The database or file failed to read or write.
    #[error("cannot read or write `{id}`: {message}")]
    Io {
        /// The session or run being read or written.
        id: String,
        /// The database's or file system's own message.
        message: String,
    },
    /// A stored row cannot be decoded, or disagrees with itself.
    #[error("`{id}` is corrupt in the store: {message}")]
    Corrupt {
        /// The session or run whose row is corrupt.
        id: String,
        /// What is wrong with it.
        message: String,
    },
    /// An id that cannot be stored, refused before the store is touched.
    #[error("`{id}` is not a valid id (use letters, digits, `-` and `_`, at most 128)")]
    InvalidId {
        /// The id as given.
        id: String,
    },
    /// The store could not be opened, created or migrated.
    #[error("cannot open the store {location}: {message}")]
    Open {
        /// The store, as its location names it (a path or a URL without
        /// its password).
        location: String,
        /// Why it could not be opened.
        message: String,
    },
    /// The store is read-only, or was found damaged as it opened: reading
    /// goes on, writing is refused.
    #[error("cannot write to the store {location}: {reason}")]
    WriteRefused {
        /// The store, as its location names it.
        location: String,
        /// Why writing is refused.
        reason: String,
    },
}

/// One line of `flowc sessions list`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// The flow the conversation is in, if it has entered one.
    pub flow: Option<String>,
    /// The step of that flow it stands at.
    pub step: Option<String>,
    /// How many turns it has run.
    pub turns: u32,
    /// Its stored version, the one a save must expect.
    pub version: u64,
    /// When it was last saved, as the store wrote it (RFC 3339, UTC).
    pub updated_at: String,
}

/// Where conversations are kept between turns: a turn loads its session,
/// runs, and saves it with the version it loaded, so two turns racing on one
/// session cannot both win. [`sqlite::SqliteStore`],
/// [`postgres::PostgresStore`] and [`memory::MemoryStore`] implement it.
pub trait SessionStore {
    /// The stored session, or `None` if there is none with this id. A
    /// stored session whose own id or version disagrees with its row is
    /// [`StoreError::Corrupt`], never silently used.
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError>;

    /// Stores `session` if the stored version is still `expected_version`
    /// (0 for a session never stored), and appends `transcript` to the
    /// session's transcript, in one transaction.
    fn save(&self, session: &Session, expected_version: u64, transcript: &[Message]) -> Result<(), StoreError>;

    /// Every stored session, or the first error of one whose row cannot be
    /// read.
    fn list(&self) -> Result<Vec<SessionSummary>, StoreError>;

    /// [`SessionStore::list`], with the sessions whose row cannot be read
    /// left out and given as errors naming them, so that one corrupt row
    /// does not hide every session.
    fn list_readable(&self) -> Result<(Vec<SessionSummary>, Vec<StoreError>), StoreError> {
        self.list().map(|sessions| (sessions, Vec::new()))
    }

    /// Whether there was a session to delete.
    fn delete(&self, id: &str) -> Result<bool, StoreError>;

    /// Every message of the session, oldest first.
    fn transcript(&self, id: &str) -> Result<Vec<Message>, StoreError>;

    /// How many stored sessions have an id starting with `prefix` (a
    /// tenant's, for `flowc serve`'s cap). A store that can count in its
    /// database does so; this default reads the whole list.
    fn count_sessions(&self, prefix: &str) -> Result<u64, StoreError> {
        let (sessions, _) = self.list_readable()?;
        Ok(sessions.iter().filter(|session| session.id.starts_with(prefix)).count() as u64)
    }

    /// [`SessionStore::save`], whose refusal on the version answers with
    /// the session the store holds ([`Swap::Stale`]) when the store read it
    /// in the same step: a turn that started from a stale copy runs again
    /// on it without loading it. A store that cannot (or a session deleted
    /// meanwhile) refuses with [`StoreError::Conflict`] as `save` does.
    fn save_or_stored(
        &self,
        session: &Session,
        expected_version: u64,
        transcript: &[Message],
    ) -> Result<Swap, StoreError> {
        self.save(session, expected_version, transcript).map(|()| Swap::Written)
    }

    /// [`SessionStore::save_or_stored`] for a caller on an async worker,
    /// which must not block: the save is handed over before this returns
    /// and the future gives its outcome once it is committed, the worker
    /// serving other requests meanwhile. A store that cannot hand a save
    /// over saves here, before returning (this default: the memory store,
    /// and PostgreSQL, whose turns never run on a worker).
    fn save_queued(&self, session: &Session, expected_version: u64, transcript: &[Message]) -> SaveFuture {
        Box::pin(std::future::ready(self.save_or_stored(session, expected_version, transcript)))
    }

    /// Transactions of session saves committed so far and the saves they
    /// held, where the store commits saves together (SQLite's group
    /// commit); `None` elsewhere.
    fn commits(&self) -> Option<(u64, u64)> {
        None
    }

    /// Stores `session` as a new session (its first save, with no
    /// transcript) unless the store already keeps `cap.max` sessions whose
    /// id starts with `cap.prefix`. Counting and inserting are one atomic
    /// step, so creations racing at the cap never pass it, from any number
    /// of processes. An id the store has already is
    /// [`StoreError::Conflict`], as for a first save.
    fn create_session(&self, session: &Session, cap: &Cap<'_>) -> Result<Created, StoreError>;
}

/// A save's outcome, awaited ([`SessionStore::save_queued`]); it owns
/// what it waits on, so it outlives the borrow of the store.
pub type SaveFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Swap, StoreError>> + Send>>;

/// What [`SessionStore::save_or_stored`] did.
#[derive(Debug)]
pub enum Swap {
    /// The session was written.
    Written,
    /// Nothing was written: the store holds this session, at another
    /// version than the one expected.
    Stale(Box<Session>),
}

/// A per-tenant cap that a creation must stay within: at most `max`
/// records whose ids start with `prefix`.
#[derive(Clone, Copy, Debug)]
pub struct Cap<'a> {
    /// The ids counted (a tenant's).
    pub prefix: &'a str,
    /// How many may be kept; the creation that would make one more is refused.
    pub max: u64,
}

/// What a capped creation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    /// Stored.
    Stored,
    /// Refused, nothing written: the store keeps `kept` (at least the
    /// cap's `max`) already.
    Full {
        /// How many the store counted.
        kept: u64,
    },
}

/// A workflow run as stored: the run itself and what resuming it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRun {
    /// The run: its steps, data, status and events.
    pub run: WorkflowRun,
    /// The program file, absolute: a resume compiles it again.
    pub program: String,
    /// The hash of the program the run started on; a resume on a changed
    /// program is refused.
    pub program_hash: String,
    /// Incremented on every save (compare-and-swap).
    pub version: u64,
    /// When the run may be resumed, in seconds since the epoch.
    pub due_at: Option<i64>,
}

/// One line of `flowc runs list`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    /// The run's id.
    pub run: String,
    /// The workflow it runs.
    pub flow: String,
    /// Its status, as `flowc runs list` prints it (`running`, `waiting`,
    /// `completed`, ...).
    pub status: String,
    /// When a waiting run may be resumed (RFC 3339, UTC).
    pub resume_at: Option<String>,
    /// The program file it runs.
    pub program: String,
    /// When it was last saved (RFC 3339, UTC).
    pub updated_at: String,
}

/// Who holds a run while it executes, and until when (seconds since the
/// epoch): a holder that dies leaves the run to whoever comes after the
/// lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Who holds the run: one name per process.
    pub holder: String,
    /// The time of the claim; a lease that ended before it is free.
    pub now: i64,
    /// When the lease ends.
    pub until: i64,
}

/// What a save stores beside the run itself.
#[derive(Clone, Copy, Debug)]
pub struct RunMeta<'a> {
    /// The program file, as in [`StoredRun::program`].
    pub program: &'a str,
    /// The program's hash, as in [`StoredRun::program_hash`].
    pub program_hash: &'a str,
    /// The version this save writes.
    pub version: u64,
    /// When the run may be resumed, in seconds since the epoch.
    pub due_at: Option<i64>,
}

impl StoredRun {
    /// What a save of this run stores beside the run itself, borrowed.
    pub fn meta(&self) -> RunMeta<'_> {
        RunMeta { program: &self.program, program_hash: &self.program_hash, version: self.version, due_at: self.due_at }
    }
}

/// The stored statuses of a run that has not ended: what
/// [`RunStore::count_active_runs`] counts.
pub const ACTIVE_STATUSES: [&str; 3] = ["running", "waiting", "paused"];

/// Where workflow runs are kept, step by step, so that a run survives the
/// process that ran it and is resumed where it stopped. Saves are
/// compare-and-swap on a version, and a [`Claim`] keeps two processes from
/// running one run at once.
pub trait RunStore {
    /// Stores `run` at `meta.version` if its stored version is still
    /// `expected_version` (0 for a new run), renewing `claim` or, with
    /// `None`, releasing the run. One transaction that rewrites the run's
    /// head, writes the step records `run.touched` names (all of them for a
    /// new run) and appends the events the store does not have yet: its
    /// cost does not grow with the run's length.
    fn save_run_parts(
        &self,
        run: &WorkflowRun,
        meta: RunMeta<'_>,
        expected_version: u64,
        claim: Option<&Claim>,
    ) -> Result<(), StoreError>;

    /// [`RunStore::save_run_parts`] for a run held with its meta.
    fn save_run(&self, stored: &StoredRun, expected_version: u64, claim: Option<&Claim>) -> Result<(), StoreError> {
        self.save_run_parts(&stored.run, stored.meta(), expected_version, claim)
    }

    /// The stored run, or `None` if there is none with this id.
    fn load_run(&self, id: &str) -> Result<Option<StoredRun>, StoreError>;

    /// Every run, or the first error of a run whose row cannot be read.
    fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let (runs, unreadable) = self.list_runs_readable()?;
        match unreadable.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(runs),
        }
    }

    /// Every run whose row reads, and an error naming each one that does
    /// not (left out, so that one corrupt row does not hide every run).
    fn list_runs_readable(&self) -> Result<(Vec<RunSummary>, Vec<StoreError>), StoreError>;

    /// Takes `id` for `claim.holder` if nobody holds it (or their lease is
    /// over) and it is waiting (due by `claim.now`, unless `early`) or was
    /// left running by a holder that died. `None` when it cannot be taken.
    fn claim_run(&self, id: &str, claim: &Claim, early: bool) -> Result<Option<StoredRun>, StoreError>;

    /// Takes up to `limit` due runs for `claim.holder`, oldest due first;
    /// no two holders ever get the same run.
    fn claim_due(&self, claim: &Claim, limit: usize) -> Result<Vec<StoredRun>, StoreError>;

    /// Cancels a run that has not ended, whoever holds it: it is recorded
    /// `cancelled` (with a `run_cancelled` event at `at`), its claim is
    /// dropped and no worker or resume takes it again. A holder running it
    /// finds its next save refused.
    fn cancel_run(&self, id: &str, at: &str) -> Result<Cancel, StoreError>;

    /// When the next waiting run comes due (seconds since the epoch), if
    /// one waits.
    fn next_due(&self) -> Result<Option<i64>, StoreError>;

    /// How many runs with an id starting with `prefix` have not ended
    /// (running, waiting or paused), for `flowc serve`'s per-tenant cap. A
    /// store that can count in its database does so; this default reads the
    /// whole list.
    fn count_active_runs(&self, prefix: &str) -> Result<u64, StoreError> {
        let (runs, _) = self.list_runs_readable()?;
        Ok(runs
            .iter()
            .filter(|run| run.run.starts_with(prefix) && ACTIVE_STATUSES.contains(&run.status.as_str()))
            .count() as u64)
    }

    /// Stores `stored` as a new run (a save expecting version 0, held by
    /// `claim`) unless the store already has `cap.max` runs not yet ended
    /// whose id starts with `cap.prefix`. Counting and inserting are one
    /// atomic step, as for [`SessionStore::create_session`]. An id the
    /// store has already is [`StoreError::RunConflict`].
    fn create_run(&self, stored: &StoredRun, claim: Option<&Claim>, cap: &Cap<'_>) -> Result<Created, StoreError>;

    /// Waits at most `timeout` for news of a run (one became due, was
    /// released or was cancelled): `true` when there was news. A store
    /// that cannot be told just sleeps, and its worker polls.
    fn wait_for_news(&self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        std::thread::sleep(timeout);
        Ok(false)
    }
}

/// What [`RunStore::cancel_run`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Cancel {
    /// The run as it is stored now, cancelled.
    Cancelled(Box<StoredRun>),
    /// The run had already ended, with this status: nothing changed.
    Ended(RunStatus),
    /// There is no run with this id.
    Missing,
}

/// The run `stored` becomes when it is cancelled at `at`: nothing runs
/// next, nothing is due.
pub fn cancelled(mut stored: StoredRun, at: &str) -> StoredRun {
    stored.run.status = RunStatus::Cancelled;
    stored.run.next_step = None;
    stored.run.resume_at = None;
    stored.run.limited = None;
    stored.run.events.push(RunEvent { event: "run_cancelled".to_string(), step: None, at: at.to_string() });
    stored.version = stored.version.saturating_add(1);
    stored.due_at = None;
    stored
}

/// Both stores in one, with the schedules that start runs and the program
/// versions sessions run on: what `--store` opens.
pub trait Store: SessionStore + RunStore + schedules::ScheduleStore + versions::VersionStore + Send + Sync {}
impl<T: SessionStore + RunStore + schedules::ScheduleStore + versions::VersionStore + Send + Sync> Store for T {}

/// Opens the store at `location`, creating and migrating it as needed.
pub fn open(location: &StoreLocation) -> Result<Box<dyn Store>, StoreError> {
    match location {
        StoreLocation::Sqlite(path) => Ok(Box::new(sqlite::SqliteStore::open(path)?)),
        StoreLocation::Postgres(url) => Ok(Box::new(postgres::PostgresStore::connect(url)?)),
    }
}

/// Commits one turn of `after`, which was `before` when the turn began:
/// the session records where it stands by name (so that an edited
/// `program` can find the place again), the messages the turn added go to
/// the transcript, the session keeps only what its program's requests can
/// still carry ([`Session::keep_history`]), and the
/// save is a compare-and-swap on the version the turn started from.
pub fn commit_turn(
    store: &dyn SessionStore,
    program: &Program,
    before: &Session,
    after: &mut Session,
) -> Result<(), StoreError> {
    let added = turn_written(program, before, after);
    store.save(after, before.version, &added)
}

/// [`commit_turn`], whose refusal on the version answers with the stored
/// session when the store read it in the same step
/// ([`SessionStore::save_or_stored`]).
pub fn commit_turn_or_stored(
    store: &dyn SessionStore,
    program: &Program,
    before: &Session,
    after: &mut Session,
) -> Result<Swap, StoreError> {
    let added = turn_written(program, before, after);
    store.save_or_stored(after, before.version, &added)
}

/// [`commit_turn_or_stored`] for a caller on an async worker
/// ([`SessionStore::save_queued`]): `after` is readied and the save handed
/// over before this returns.
pub fn commit_turn_queued(
    store: &dyn SessionStore,
    program: &Program,
    before: &Session,
    after: &mut Session,
) -> SaveFuture {
    let added = turn_written(program, before, after);
    store.save_queued(after, before.version, &added)
}

/// Readies `after` for its save (its position by name, its history cut to
/// what the program's requests can still carry) and gives the messages the
/// turn added. Every save of a turn writes the session's history whole, so
/// what it keeps is a cost per turn: the 32 messages kept before, where
/// requests carried 12, were a fifth of a served turn's time (`cargo bench
/// --bench serve`).
fn turn_written(program: &Program, before: &Session, after: &mut Session) -> Vec<Message> {
    after.record_position(program);
    let added = after.history.get(before.history.len()..).unwrap_or_default().to_vec();
    after.keep_history(&program.agent.history);
    added
}

/// Saves `run` as the next version of `stored`, a compare-and-swap on the
/// version `stored` has, renewing `claim` or, with `None`, releasing the
/// run. `stored` becomes what was saved; a refused save leaves it as it was.
pub fn commit_run(
    store: &dyn RunStore,
    stored: &mut StoredRun,
    mut run: WorkflowRun,
    due_at: Option<i64>,
    claim: Option<&Claim>,
) -> Result<(), StoreError> {
    let expected = stored.version;
    let meta = RunMeta { version: expected.saturating_add(1), due_at, ..stored.meta() };
    store.save_run_parts(&run, meta, expected, claim)?;
    run.touched.clear();
    stored.run = run;
    stored.version = expected.saturating_add(1);
    stored.due_at = due_at;
    Ok(())
}

/// Saves `run`, which `stored` held when it was loaded and which has run
/// on since, as the next version, renewing `claim`: a checkpoint. Only the
/// version of `stored` moves (copying the run at every step would cost
/// its length); a refused save leaves it as it was.
pub fn checkpoint_run(
    store: &dyn RunStore,
    stored: &mut StoredRun,
    run: &WorkflowRun,
    claim: &Claim,
) -> Result<(), StoreError> {
    let expected = stored.version;
    let meta = RunMeta { version: expected.saturating_add(1), due_at: None, ..stored.meta() };
    store.save_run_parts(run, meta, expected, Some(claim))?;
    stored.version = expected.saturating_add(1);
    Ok(())
}

/// Session and run ids become keys and appear in commands: keep them plain.
pub fn check_id(id: &str) -> Result<(), StoreError> {
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|character| character.is_ascii_alphanumeric() || character == '-' || character == '_');
    if valid { Ok(()) } else { Err(StoreError::InvalidId { id: shown_id(id) }) }
}

/// An id as an error shows it: control characters escaped (a terminal
/// never obeys them), and a long one cut to its start with its length.
fn shown_id(id: &str) -> String {
    const SHOWN: usize = 64;
    let start: String = id.chars().take(SHOWN).collect::<String>().escape_debug().collect();
    if id.chars().count() > SHOWN { format!("{start}… ({} bytes)", id.len()) } else { start }
}

/// What a loaded session must satisfy whatever the program: its id is the
/// key it was asked for, and its version can still grow.
pub fn check_loaded(key: &str, session: &Session) -> Result<(), StoreError> {
    if session.id != key {
        return Err(StoreError::Corrupt {
            id: key.to_string(),
            message: format!("it holds session `{}`; delete it with `flowc sessions delete {key}`", session.id),
        });
    }
    if session.version >= i64::MAX as u64 {
        return Err(StoreError::Corrupt {
            id: key.to_string(),
            message: format!("its version {} is out of range", session.version),
        });
    }
    Ok(())
}

/// What both database stores share: how a row's text becomes a session or
/// a run and back.
pub(crate) mod rows {
    use super::{StoreError, StoredRun, check_loaded};
    use crate::message::{Message, Role};
    use crate::runtime::session::Session;
    use crate::runtime::workflow::WorkflowRun;

    pub fn to_i64(id: &str, value: u64) -> Result<i64, StoreError> {
        i64::try_from(value).map_err(|_| StoreError::Corrupt {
            id: id.to_string(),
            message: format!("version {value} is out of range"),
        })
    }

    /// What every save writes, checked before its transaction starts: a
    /// valid id, both versions as the databases' integers, and the state
    /// as JSON text.
    pub struct Write {
        pub version: i64,
        pub expected: i64,
        pub state: String,
    }

    pub fn write(
        id: &str,
        version: u64,
        expected_version: u64,
        state: &impl serde::Serialize,
    ) -> Result<Write, StoreError> {
        super::check_id(id)?;
        let version = to_i64(id, version)?;
        let expected = to_i64(id, expected_version)?;
        let state = serde_json::to_string(state)
            .map_err(|error| StoreError::Io { id: id.to_string(), message: error.to_string() })?;
        Ok(Write { version, expected, state })
    }

    pub fn now_text() -> String {
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    /// A session row: its state must hold the session asked for, at the
    /// row's version.
    pub fn session(id: &str, version: i64, state: &str) -> Result<Session, StoreError> {
        let session: Session = serde_json::from_str(state)
            .map_err(|error| StoreError::Corrupt { id: id.to_string(), message: error.to_string() })?;
        if u64::try_from(version).ok() != Some(session.version) {
            return Err(StoreError::Corrupt {
                id: id.to_string(),
                message: format!("its row is at version {version} but it holds version {}", session.version),
            });
        }
        check_loaded(id, &session)?;
        Ok(session)
    }

    /// A run's head row: the run without its step records and events,
    /// which [`attach`] adds from their rows.
    pub fn run(
        id: &str,
        state: &str,
        program: String,
        program_hash: String,
        version: i64,
        due_at: Option<i64>,
    ) -> Result<StoredRun, StoreError> {
        let run = serde_json::from_str::<WorkflowRun>(state)
            .map_err(|error| StoreError::Corrupt { id: id.to_string(), message: error.to_string() })?;
        if run.run != id {
            return Err(StoreError::Corrupt { id: id.to_string(), message: format!("it holds run `{}`", run.run) });
        }
        Ok(StoredRun { run, program, program_hash, version: u64::try_from(version).unwrap_or(0), due_at })
    }

    /// What a run's save writes, checked before its transaction starts.
    pub struct RunWrite {
        pub version: i64,
        pub expected: i64,
        pub head: String,
    }

    pub fn run_write(run: &WorkflowRun, version: u64, expected: u64) -> Result<RunWrite, StoreError> {
        let id = run.run.as_str();
        super::check_id(id)?;
        let head =
            run.head_json().map_err(|error| StoreError::Io { id: id.to_string(), message: error.to_string() })?;
        Ok(RunWrite { version: to_i64(id, version)?, expected: to_i64(id, expected)?, head })
    }

    /// The step records a save writes, by index, as JSON: all of them for
    /// a new run, else those that changed.
    pub fn step_rows(run: &WorkflowRun, new: bool) -> Result<Vec<(i64, String)>, StoreError> {
        let indexes: Vec<usize> = if new || run.touched.all {
            (0..run.steps.len()).collect()
        } else {
            run.touched.steps.iter().copied().collect()
        };
        indexes
            .into_iter()
            .filter_map(|index| run.steps.get(index).map(|record| (index, record)))
            .map(|(index, record)| {
                let text = serde_json::to_string(record)
                    .map_err(|error| StoreError::Io { id: run.run.clone(), message: error.to_string() })?;
                Ok((i64::try_from(index).unwrap_or(i64::MAX), text))
            })
            .collect()
    }

    /// The events a save appends: those after the `stored` the store has.
    pub fn event_rows(run: &WorkflowRun, stored: i64) -> Result<Vec<(i64, String)>, StoreError> {
        let from = usize::try_from(stored).unwrap_or(0);
        (from..run.events.len())
            .filter_map(|index| run.events.get(index).map(|event| (index, event)))
            .map(|(index, event)| {
                let text = serde_json::to_string(event)
                    .map_err(|error| StoreError::Io { id: run.run.clone(), message: error.to_string() })?;
                Ok((i64::try_from(index).unwrap_or(i64::MAX), text))
            })
            .collect()
    }

    /// The warnings a save appends: those after the `stored` the store has.
    pub fn warning_rows(run: &WorkflowRun, stored: i64) -> Vec<(i64, &str)> {
        let from = usize::try_from(stored).unwrap_or(0);
        let warnings = run.warnings.get(from..).unwrap_or_default();
        (stored..).zip(warnings.iter().map(String::as_str)).collect()
    }

    /// Puts the step records, events and warnings read from their rows
    /// into the run read from its head.
    pub fn attach(
        stored: &mut StoredRun,
        steps: Vec<String>,
        events: Vec<String>,
        warnings: Vec<String>,
    ) -> Result<(), StoreError> {
        let corrupt = |what: &str, error: serde_json::Error| StoreError::Corrupt {
            id: stored.run.run.clone(),
            message: format!("{what}: {error}"),
        };
        let steps = steps
            .iter()
            .map(|text| serde_json::from_str(text).map_err(|error| corrupt("a step record", error)))
            .collect::<Result<Vec<_>, _>>()?;
        let events = events
            .iter()
            .map(|text| serde_json::from_str(text).map_err(|error| corrupt("an event", error)))
            .collect::<Result<Vec<_>, _>>()?;
        stored.run.steps = steps;
        stored.run.events = events;
        stored.run.warnings = warnings;
        Ok(())
    }

    /// A line of `flowc runs list` from a run's head row: its state must
    /// read as the run of this id, with the status its row says.
    pub fn summary(
        id: String,
        flow: String,
        status: String,
        state: &str,
        program: String,
        updated_at: String,
    ) -> Result<super::RunSummary, StoreError> {
        let corrupt = |message: String| StoreError::Corrupt { id: id.clone(), message };
        let run = serde_json::from_str::<WorkflowRun>(state).map_err(|error| corrupt(error.to_string()))?;
        if run.run != id {
            return Err(corrupt(format!("it holds run `{}`", run.run)));
        }
        if run.status.as_str() != status {
            return Err(corrupt(format!(
                "its row says `{status}` but it holds a run that is `{}`",
                run.status.as_str()
            )));
        }
        Ok(super::RunSummary { run: id, flow, status, resume_at: run.resume_at, program, updated_at })
    }

    pub fn status(run: &WorkflowRun) -> String {
        run.status.as_str().to_string()
    }

    pub fn role(message: &Message) -> String {
        serde_json::to_value(message.role).ok().and_then(|role| role.as_str().map(str::to_string)).unwrap_or_default()
    }

    pub fn message(id: &str, role: String, text: String) -> Result<Message, StoreError> {
        let role: Role = serde_json::from_value(serde_json::Value::String(role))
            .map_err(|error| StoreError::Corrupt { id: id.to_string(), message: error.to_string() })?;
        Ok(Message { role, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn message(text: &str) -> Message {
        Message { role: Role::User, text: text.to_string() }
    }

    #[test]
    fn the_active_statuses_are_those_of_runs_not_ended() {
        use crate::runtime::workflow::RunStatus;
        let all = [
            RunStatus::Running,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Waiting,
            RunStatus::Aborted,
            RunStatus::Paused,
            RunStatus::Cancelled,
        ];
        for status in all {
            assert_eq!(ACTIVE_STATUSES.contains(&status.as_str()), !status.has_ended(), "{status:?}");
        }
    }

    #[test]
    fn a_turn_appends_its_messages_and_keeps_the_history_a_request_carries() {
        let store = memory::MemoryStore::default();
        let mut before = Session::new("s", "h");
        before.history = (0..HISTORY_KEPT).map(|index| message(&index.to_string())).collect();
        let mut after = before.clone();
        after.history.push(message("new question"));
        after.history.push(message("new answer"));
        after.version = 1;
        let program =
            crate::pipeline::compile(&crate::source::SourceFile::new("t.flow", "flow f { step a { say \"hi\" } }")).ir;
        commit_turn(&store, &program, &before, &mut after).unwrap();
        assert_eq!(after.history.len(), crate::ir::DEFAULT_KEEP_LAST as usize, "what a request carries");
        assert_eq!(after.history.last(), Some(&message("new answer")));
        assert_eq!(store.transcript("s").unwrap(), vec![message("new question"), message("new answer")]);
        assert_eq!(store.load("s").unwrap(), Some(after));
    }

    #[test]
    fn a_committed_turn_names_where_the_session_stands() {
        let store = memory::MemoryStore::default();
        let program = crate::pipeline::compile(&crate::source::SourceFile::new(
            "t.flow",
            "flow book { step ask { say \"hi\" } }",
        ))
        .ir;
        let before = Session::new("s", "h");
        let mut after = before.clone();
        after.flow = Some(crate::ids::FlowId(0));
        after.step = Some(crate::ids::StepId(0));
        after.version = 1;
        commit_turn(&store, &program, &before, &mut after).unwrap();
        let stored = store.load("s").unwrap().unwrap();
        assert_eq!((stored.flow_name.as_deref(), stored.step_name.as_deref()), (Some("book"), Some("ask")));
    }

    #[test]
    fn an_invalid_id_is_shown_escaped_and_cut() {
        let error = check_id("a\u{1b}[31mb").unwrap_err().to_string();
        assert!(error.starts_with("`a\\u{1b}[31mb` is not a valid id"), "{error}");
        let long = "x".repeat(100_000);
        let error = check_id(&long).unwrap_err().to_string();
        assert!(error.len() < 200 && error.contains("… (100000 bytes)"), "{error}");
    }

    #[test]
    fn a_session_under_another_key_or_at_the_last_version_is_refused() {
        let mut session = Session::new("alice", "h");
        assert!(check_loaded("alice", &session).is_ok());
        assert!(matches!(check_loaded("fork", &session), Err(StoreError::Corrupt { .. })));
        session.version = u64::MAX;
        assert!(matches!(check_loaded("alice", &session), Err(StoreError::Corrupt { .. })));
    }
}
