//! Group commit for the SQLite store's session saves: saves that arrive
//! while another transaction holds the store's connection wait in a queue,
//! and whoever takes the connection next commits every waiting save in one
//! transaction. A commit's fixed costs (the write lock taken and released
//! with `fcntl`, the WAL frames of the pages every save touches, such as
//! the transcript's last leaf) are then paid once for many turns.
//!
//! What a save guarantees is unchanged: it returns once the transaction
//! holding it has committed, and each save is its own compare-and-swap, in
//! order within the transaction (a second save of one session in the same
//! batch sees the first). A save that fails, on its version or an error
//! of its own, leaves nothing of itself (a savepoint per save) and takes
//! none of the others down; a commit that fails fails every save in it.
//!
//! The waiting thread parks; whoever releases the connection wakes the
//! first waiting save, whose thread then commits the queue (see
//! [`Held`]'s `Drop`). A save's thread is woken only when its save is
//! done or when it should take the connection, so a batch of a hundred
//! saves costs a hundred wake-ups in parallel, not a hundred lock
//! hand-offs in a row.

use super::StoreError;
use super::rows;
use super::sqlite_checkpoint::Checkpointer;
use rusqlite::{Connection, OptionalExtension, params};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::Thread;

/// The most saves one transaction holds: a bound on how long the thread
/// that commits them (one of the turns) waits for the others.
const MAX_BATCH: usize = 256;

/// One session save, checked and encoded before it waits.
pub(crate) struct SessionWrite {
    pub id: String,
    pub version: i64,
    pub expected: i64,
    pub expected_version: u64,
    pub flow: Option<String>,
    pub step: Option<String>,
    pub turns: u32,
    pub state: String,
    /// The transcript's new lines, as role and text.
    pub transcript: Vec<(String, String)>,
}

struct Slot {
    write: SessionWrite,
    outcome: Mutex<Option<Result<(), StoreError>>>,
    thread: Thread,
}

impl Slot {
    fn take_outcome(&self) -> Option<Result<(), StoreError>> {
        self.outcome.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn finish(&self, result: Result<(), StoreError>) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
        self.thread.unpark();
    }
}

/// The store's connection and the saves waiting for it.
pub(crate) struct Committer {
    /// First, so that it is dropped first: its thread's connection closes
    /// before the store's own.
    checkpointer: Option<Checkpointer>,
    connection: Mutex<Connection>,
    waiting: Mutex<Vec<Arc<Slot>>>,
}

/// The connection, held: when it is let go, the first waiting save (if
/// any) is woken to take it, so no save waits for a holder that has gone.
pub(crate) struct Held<'a> {
    // Fields drop in order: the connection is released before the waiting
    // save is woken to take it.
    guard: MutexGuard<'a, Connection>,
    _wake: Wake<'a>,
}

struct Wake<'a>(&'a Committer);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Runs before the fields are dropped: the connection is still held.
        if let Some(checkpointer) = &self._wake.0.checkpointer {
            checkpointer.written(self.guard.total_changes());
        }
    }
}

impl Drop for Wake<'_> {
    fn drop(&mut self) {
        let first = self.0.lock_waiting().first().map(|slot| slot.thread.clone());
        if let Some(thread) = first {
            thread.unpark();
        }
    }
}

impl Deref for Held<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.guard
    }
}

impl DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.guard
    }
}

impl Committer {
    /// The committer of `connection`; with `checkpointer`, the WAL is
    /// checkpointed by its thread ([`super::sqlite_checkpoint`]).
    pub fn new(connection: Connection, checkpointer: Option<Checkpointer>) -> Committer {
        Committer { checkpointer, connection: Mutex::new(connection), waiting: Mutex::new(Vec::new()) }
    }

    #[cfg(test)]
    pub fn checkpointer(&self) -> Option<&Checkpointer> {
        self.checkpointer.as_ref()
    }

    fn lock_waiting(&self) -> MutexGuard<'_, Vec<Arc<Slot>>> {
        // The queue is whole after any panic (a push or a drain).
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection, waiting for it; `None` if a panic poisoned it.
    pub fn connection(&self) -> Option<Held<'_>> {
        let guard = self.connection.lock().ok()?;
        Some(Held { guard, _wake: Wake(self) })
    }

    /// Saves `write` in the next transaction to commit, and returns once
    /// that transaction has committed (or failed).
    pub fn save(&self, write: SessionWrite) -> Result<(), StoreError> {
        let slot = Arc::new(Slot { write, outcome: Mutex::new(None), thread: std::thread::current() });
        self.lock_waiting().push(Arc::clone(&slot));
        loop {
            if let Some(outcome) = slot.take_outcome() {
                return outcome;
            }
            let guard = match self.connection.try_lock() {
                Ok(guard) => guard,
                // A panic in another save's transaction rolled it back
                // (the transaction's drop): the connection is usable.
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    // Woken when the holder lets go, or when this save is done.
                    std::thread::park();
                    continue;
                }
            };
            let held = Held { guard, _wake: Wake(self) };
            let batch: Vec<Arc<Slot>> = {
                let mut waiting = self.lock_waiting();
                let count = waiting.len().min(MAX_BATCH);
                waiting.drain(..count).collect()
            };
            if !batch.is_empty() {
                commit(&held, &batch);
            }
            // `held` goes here, waking the next waiting save; this one's
            // outcome is set if it was in this batch or an earlier one.
        }
    }
}

/// Runs one statement of transaction control, prepared once per
/// connection: `execute_batch` parsed `BEGIN`, `SAVEPOINT`, `RELEASE` and
/// `COMMIT` again at every save, a quarter of a save's instructions.
fn control(connection: &Connection, sql: &str) -> rusqlite::Result<()> {
    connection.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Commits `batch` in one transaction and tells every save how it went.
fn commit(connection: &Connection, batch: &[Arc<Slot>]) {
    let io = |id: &str, error: &rusqlite::Error| StoreError::Io { id: id.to_string(), message: error.to_string() };
    // A panic in the middle of an earlier commit (its lock poisoned and
    // taken back) left its transaction open: it ends here, unkept.
    if !connection.is_autocommit() {
        let _ = control(connection, "ROLLBACK");
    }
    if let Err(error) = control(connection, "BEGIN IMMEDIATE") {
        for slot in batch {
            slot.finish(Err(io(&slot.write.id, &error)));
        }
        return;
    }
    // A save alone needs no savepoint: if it fails, its transaction is
    // rolled back whole. Savepoints also copy every page they change to
    // a journal in memory.
    let alone = batch.len() == 1;
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(batch.len());
    for slot in batch {
        results.push(save_one(connection, &slot.write, !alone));
    }
    let ended = if alone && results.iter().any(Result::is_err) {
        control(connection, "ROLLBACK")
    } else {
        control(connection, "COMMIT")
    };
    if let Err(error) = ended {
        // Nothing of the batch was kept: every save fails, those refused
        // on their version with their own reason.
        if !connection.is_autocommit() {
            let _ = control(connection, "ROLLBACK");
        }
        for (slot, result) in batch.iter().zip(&mut results) {
            if result.is_ok() {
                *result = Err(io(&slot.write.id, &error));
            }
        }
    }
    for (slot, result) in batch.iter().zip(results) {
        slot.finish(result);
    }
}

/// One save inside the batch's transaction: the compare-and-swap, then
/// the transcript's new lines and the session's row, under a savepoint
/// (when others share the transaction) so that a failing save leaves
/// nothing behind.
fn save_one(connection: &Connection, write: &SessionWrite, savepoint: bool) -> Result<(), StoreError> {
    let id = write.id.as_str();
    let error = |error: rusqlite::Error| StoreError::Io { id: id.to_string(), message: error.to_string() };
    let stored: Option<(i64, i64)> = connection
        .prepare_cached("SELECT version, transcript_len FROM sessions WHERE id = ?1")
        .and_then(|mut statement| statement.query_row([id], |row| Ok((row.get(0)?, row.get(1)?))).optional())
        .map_err(error)?;
    let (stored_version, transcript_len) = stored.unwrap_or((0, 0));
    if stored_version != write.expected {
        return Err(StoreError::Conflict {
            id: id.to_string(),
            stored: u64::try_from(stored_version).unwrap_or(0),
            expected: write.expected_version,
        });
    }
    if !savepoint {
        return write_rows(connection, write, transcript_len).map_err(error);
    }
    control(connection, "SAVEPOINT save_one").map_err(error)?;
    let written = write_rows(connection, write, transcript_len);
    let ended = if written.is_ok() {
        control(connection, "RELEASE save_one")
    } else {
        control(connection, "ROLLBACK TO save_one").and_then(|()| control(connection, "RELEASE save_one"))
    };
    written.and(ended).map_err(error)
}

fn write_rows(transaction: &Connection, write: &SessionWrite, transcript_len: i64) -> rusqlite::Result<()> {
    let id = write.id.as_str();
    {
        let mut append = transaction
            .prepare_cached("INSERT INTO transcript (session_id, seq, role, text) VALUES (?1, ?2, ?3, ?4)")?;
        for (offset, (role, text)) in (0i64..).zip(&write.transcript) {
            append.execute(params![id, transcript_len + offset, role, text])?;
        }
    }
    let appended = i64::try_from(write.transcript.len()).unwrap_or(i64::MAX);
    transaction
        .prepare_cached(
            "INSERT INTO sessions (id, version, flow, step, turns, transcript_len, updated_at, state)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (id) DO UPDATE SET version = ?2, flow = ?3, step = ?4, turns = ?5,
                 transcript_len = ?6, updated_at = ?7, state = ?8",
        )?
        .execute(params![
            id,
            write.version,
            write.flow,
            write.step,
            write.turns,
            transcript_len.saturating_add(appended),
            rows::now_text(),
            write.state
        ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::message::{Message, Role};
    use crate::runtime::session::Session;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{SessionStore, StoreError};
    use std::sync::{Arc, Barrier};

    fn store(name: &str) -> SqliteStore {
        let dir = std::env::temp_dir().join(format!("flowc-group-commit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        SqliteStore::open(&dir.join("flowc.db")).unwrap()
    }

    fn said(text: &str) -> Vec<Message> {
        vec![Message { role: Role::User, text: text.to_string() }]
    }

    /// Many threads saving at once: each save is its own compare-and-swap
    /// whichever transaction carries it, so every thread's own session
    /// ends at its last version with every line, and of the racers on one
    /// shared session exactly one wins each version.
    #[test]
    fn concurrent_saves_share_transactions_and_keep_every_compare_and_swap() {
        const OWN: usize = 12;
        const RACERS: usize = 6;
        const TURNS: u64 = 40;
        let store = Arc::new(store("concurrent"));
        store.save(&Session::new("shared", "h"), 0, &[]).unwrap();
        let start = Arc::new(Barrier::new(OWN + RACERS));
        let mut threads = Vec::new();
        for index in 0..OWN {
            let (store, start) = (Arc::clone(&store), Arc::clone(&start));
            threads.push(std::thread::spawn(move || {
                let mut session = Session::new(format!("own{index}"), "h");
                start.wait();
                for turn in 1..=TURNS {
                    session.version = turn;
                    store.save(&session, turn - 1, &said(&turn.to_string())).unwrap();
                }
                0
            }));
        }
        for _ in 0..RACERS {
            let (store, start) = (Arc::clone(&store), Arc::clone(&start));
            threads.push(std::thread::spawn(move || {
                start.wait();
                let mut won = 0;
                for _ in 0..TURNS {
                    let mut session = store.load("shared").unwrap().unwrap();
                    let expected = session.version;
                    session.version += 1;
                    match store.save(&session, expected, &said("race")) {
                        Ok(()) => won += 1,
                        Err(StoreError::Conflict { .. }) => {}
                        Err(error) => panic!("{error}"),
                    }
                }
                won
            }));
        }
        let won: u64 = threads.into_iter().map(|thread| thread.join().unwrap()).sum();
        for index in 0..OWN {
            let id = format!("own{index}");
            assert_eq!(store.load(&id).unwrap().unwrap().version, TURNS);
            let lines: Vec<String> = store.transcript(&id).unwrap().into_iter().map(|line| line.text).collect();
            assert_eq!(lines, (1..=TURNS).map(|turn| turn.to_string()).collect::<Vec<_>>());
        }
        let shared = store.load("shared").unwrap().unwrap();
        assert!(won >= 1);
        assert_eq!(shared.version, won, "one winner per version");
        assert_eq!(store.transcript("shared").unwrap().len() as u64, won, "only winners wrote lines");
    }

    fn slot(id: &str, transcript: &[&str]) -> Arc<super::Slot> {
        let mut session = Session::new(id, "h");
        session.version = 1;
        Arc::new(super::Slot {
            write: super::SessionWrite {
                id: id.to_string(),
                version: 1,
                expected: 0,
                expected_version: 0,
                flow: None,
                step: None,
                turns: 0,
                state: serde_json::to_string(&session).unwrap(),
                transcript: transcript.iter().map(|text| ("user".to_string(), text.to_string())).collect(),
            },
            outcome: std::sync::Mutex::new(None),
            thread: std::thread::current(),
        })
    }

    /// A save that fails while writing (here its first transcript line
    /// collides with a row already there) leaves nothing of itself,
    /// whether it commits alone (no savepoint: its transaction is rolled
    /// back) or in a batch (its savepoint is), and the connection goes on.
    #[test]
    fn a_save_failing_in_its_writes_leaves_nothing_alone_or_in_a_batch() {
        let store = store("failing-write");
        let connection = store.connection("*").unwrap();
        for id in ["alone", "batched"] {
            connection
                .execute("INSERT INTO transcript (session_id, seq, role, text) VALUES (?1, 0, 'user', 'x')", [id])
                .unwrap();
        }
        let alone = [slot("alone", &["hi"])];
        super::commit(&connection, &alone);
        assert!(matches!(alone[0].take_outcome(), Some(Err(StoreError::Io { .. }))));
        let batch = [slot("first", &["hi"]), slot("batched", &["hi"]), slot("last", &[])];
        super::commit(&connection, &batch);
        let outcomes: Vec<_> = batch.iter().map(|slot| slot.take_outcome().unwrap()).collect();
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(matches!(outcomes[1], Err(StoreError::Io { .. })), "{outcomes:?}");
        assert!(connection.is_autocommit(), "no transaction left open");
        drop(connection);
        assert!(store.load("alone").unwrap().is_none() && store.load("batched").unwrap().is_none());
        assert_eq!(store.transcript("alone").unwrap().len(), 1, "only the line put there by hand");
        assert!(store.load("first").unwrap().is_some() && store.load("last").unwrap().is_some());
        assert_eq!(store.transcript("first").unwrap().len(), 1);
        // A save alone after the failures commits as ever.
        let again = [slot("again", &["hi", "there"])];
        super::commit(&store.connection("*").unwrap(), &again);
        assert!(matches!(again[0].take_outcome(), Some(Ok(()))));
        assert_eq!(store.transcript("again").unwrap().len(), 2);
    }

    /// A save refused on its version in the middle of a batch leaves the
    /// others of the batch committed.
    #[test]
    fn a_refused_save_in_a_batch_takes_no_other_down() {
        let store = store("refused");
        let mut batch = Vec::new();
        for index in 0..3 {
            let mut session = Session::new(format!("s{index}"), "h");
            session.version = 1;
            batch.push(session);
        }
        let connection = store.connection("*").unwrap();
        let slots: Vec<_> = batch
            .iter()
            .enumerate()
            .map(|(index, session)| {
                let expected = if index == 1 { 5 } else { 0 };
                Arc::new(super::Slot {
                    write: super::SessionWrite {
                        id: session.id.clone(),
                        version: 1,
                        expected,
                        expected_version: expected as u64,
                        flow: None,
                        step: None,
                        turns: 0,
                        state: serde_json::to_string(session).unwrap(),
                        transcript: vec![("user".into(), "hi".into())],
                    },
                    outcome: std::sync::Mutex::new(None),
                    thread: std::thread::current(),
                })
            })
            .collect();
        super::commit(&connection, &slots);
        drop(connection);
        let outcomes: Vec<_> = slots.iter().map(|slot| slot.take_outcome().unwrap()).collect();
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(matches!(outcomes[1], Err(StoreError::Conflict { stored: 0, expected: 5, .. })), "{outcomes:?}");
        assert!(store.load("s0").unwrap().is_some() && store.load("s2").unwrap().is_some());
        assert!(store.load("s1").unwrap().is_none());
        assert!(store.transcript("s1").unwrap().is_empty());
    }
}
