//! Group commit for the SQLite store's session saves: a save is queued,
//! and the store's committer thread commits everything queued in one
//! transaction, then answers each save. A commit's fixed costs (the write
//! lock taken and released with `fcntl`, the WAL frames of the pages every
//! save touches, such as the transcript's last leaf) are then paid once
//! for many turns.
//!
//! A save is waited for by blocking its thread ([`Committer::save`]) or
//! awaited ([`Committer::save_queued`]): a turn computed on an async worker
//! hands its write over and the worker serves other requests meanwhile,
//! whose saves join the queue. The committer is one thread per store,
//! started by the first save and woken (a condition variable) only when
//! the queue was empty; a batch is whatever queued while the previous
//! commit ran, so a save alone is committed at once, with no timer and no
//! added wait. The thread commits what is still queued when the store is
//! dropped, then ends.
//!
//! What a save guarantees: its outcome is given once the transaction
//! holding it has committed, and each save is its own compare-and-swap, in
//! order within the transaction (a second save of one session in the same
//! batch sees the first). A save that fails, on its version or an error
//! of its own, leaves nothing of itself and takes none of the others down;
//! a commit that fails fails every save in it.

use super::StoreError;
use super::rows;
use super::sqlite_checkpoint::Checkpointer;
use rusqlite::{Connection, OptionalExtension, params};
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::{JoinHandle, Thread};

/// The most saves one transaction holds: a bound on how long the first of
/// them waits for the last to be written.
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

/// A queued save and, once committed (or failed), its outcome.
struct Slot {
    write: SessionWrite,
    state: Mutex<SlotState>,
}

struct SlotState {
    outcome: Option<Result<(), StoreError>>,
    waiter: Waiter,
}

/// Who is told when a save's outcome is set.
enum Waiter {
    /// Nobody yet: an awaited save not polled so far.
    Nobody,
    /// A thread blocked in [`Committer::save`].
    Thread(Thread),
    /// The task awaiting [`Saving`].
    Task(Waker),
}

impl Slot {
    fn new(write: SessionWrite, waiter: Waiter) -> Slot {
        Slot { write, state: Mutex::new(SlotState { outcome: None, waiter }) }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // An outcome and a waiter are whole after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_outcome(&self) -> Option<Result<(), StoreError>> {
        self.lock().outcome.take()
    }

    fn finished(&self) -> bool {
        self.lock().outcome.is_some()
    }

    fn finish(&self, result: Result<(), StoreError>) {
        let waiter = {
            let mut state = self.lock();
            state.outcome = Some(result);
            std::mem::replace(&mut state.waiter, Waiter::Nobody)
        };
        match waiter {
            Waiter::Nobody => {}
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Task(waker) => waker.wake(),
        }
    }
}

/// A batch being committed: a save it holds that has no outcome when it
/// is let go (a panic in the commit) fails, so that no waiter hangs.
struct Batch(Vec<Arc<Slot>>);

impl Drop for Batch {
    fn drop(&mut self) {
        for slot in &self.0 {
            if !slot.finished() {
                slot.finish(Err(StoreError::Io {
                    id: slot.write.id.clone(),
                    message: "the store's commit stopped (a panic) before this save was written".to_string(),
                }));
            }
        }
    }
}

/// An awaited save: ready once its transaction committed or failed.
pub(crate) struct Saving {
    slot: Arc<Slot>,
}

impl Future for Saving {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.lock();
        if let Some(outcome) = state.outcome.take() {
            return Poll::Ready(outcome);
        }
        match &state.waiter {
            Waiter::Task(waker) if waker.will_wake(context.waker()) => {}
            _ => state.waiter = Waiter::Task(context.waker().clone()),
        }
        Poll::Pending
    }
}

/// The queue of saves, and whether the committer waits for one.
struct Queue {
    slots: Vec<Arc<Slot>>,
    /// The committer sleeps on [`Shared::wake`]: the next save wakes it.
    idle: bool,
    /// The store is being dropped: the committer ends once the queue is empty.
    closing: bool,
}

/// What the store and its committer thread share.
struct Shared {
    /// First, so that it is dropped first: its thread's connection closes
    /// before the store's own.
    checkpointer: Option<Checkpointer>,
    connection: Mutex<Connection>,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Transactions committed by the committer, and the saves they held.
    commits: AtomicU64,
    saves: AtomicU64,
}

impl Shared {
    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        // The queue is whole after any panic (a push or a drain).
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn held(&self) -> Held<'_> {
        let guard = self.connection.lock().unwrap_or_else(|poisoned| {
            // A panic while it was held may have left a transaction open:
            // it ends here, unkept, and the connection serves on.
            let guard = poisoned.into_inner();
            if !guard.is_autocommit() {
                let _ = guard.execute_batch("ROLLBACK");
            }
            self.connection.clear_poison();
            guard
        });
        Held { guard, shared: self }
    }

    /// The next batch: up to [`MAX_BATCH`] of the queued saves.
    fn take_batch(queue: &mut Queue) -> Batch {
        let count = queue.slots.len().min(MAX_BATCH);
        Batch(queue.slots.drain(..count).collect())
    }

    /// Commits the queued saves, a batch at a time, until none is left.
    fn commit_queued(&self) {
        loop {
            let batch = Shared::take_batch(&mut self.lock_queue());
            if batch.0.is_empty() {
                return;
            }
            self.commit_batch(&batch);
        }
    }

    fn commit_batch(&self, batch: &Batch) {
        let held = self.held();
        commit(&held, &batch.0);
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.saves.fetch_add(batch.0.len() as u64, Ordering::Relaxed);
    }

    /// The committer thread: commits what is queued, sleeps while nothing
    /// is, ends when the store closes with nothing queued.
    fn run(&self) {
        loop {
            let batch = {
                let mut queue = self.lock_queue();
                while queue.slots.is_empty() {
                    if queue.closing {
                        return;
                    }
                    queue.idle = true;
                    queue = self.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
                    queue.idle = false;
                }
                Shared::take_batch(&mut queue)
            };
            // A panic in a commit fails its batch (the batch's drop) and
            // leaves the thread to commit the next.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.commit_batch(&batch)));
        }
    }
}

/// The store's connection and the saves waiting for it.
pub(crate) struct Committer {
    shared: Arc<Shared>,
    /// The committer thread, started by the first save; `None` inside if it
    /// could not be started (saves are then committed by their callers).
    thread: OnceLock<Option<JoinHandle<()>>>,
}

/// The connection, held: as it is let go, the checkpointer is told how
/// much was written.
pub(crate) struct Held<'a> {
    guard: MutexGuard<'a, Connection>,
    shared: &'a Shared,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Runs before the fields are dropped: the connection is still held.
        if let Some(checkpointer) = &self.shared.checkpointer {
            checkpointer.written(self.guard.total_changes());
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
        let shared = Shared {
            checkpointer,
            connection: Mutex::new(connection),
            queue: Mutex::new(Queue { slots: Vec::new(), idle: false, closing: false }),
            wake: Condvar::new(),
            commits: AtomicU64::new(0),
            saves: AtomicU64::new(0),
        };
        Committer { shared: Arc::new(shared), thread: OnceLock::new() }
    }

    #[cfg(test)]
    pub fn checkpointer(&self) -> Option<&Checkpointer> {
        self.shared.checkpointer.as_ref()
    }

    /// The connection, waiting for it.
    pub fn connection(&self) -> Held<'_> {
        self.shared.held()
    }

    /// Transactions of saves committed so far, and the saves they held.
    pub fn commits(&self) -> (u64, u64) {
        (self.shared.commits.load(Ordering::Relaxed), self.shared.saves.load(Ordering::Relaxed))
    }

    /// Queues `slot` for the committer; `false` if there is no committer
    /// thread (it could not be started), in which case the caller commits.
    fn queue(&self, slot: Arc<Slot>) -> bool {
        let started = self.thread.get_or_init(|| {
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new().name("flowc-sqlite-commit".to_string()).spawn(move || shared.run()).ok()
        });
        let mut queue = self.shared.lock_queue();
        queue.slots.push(slot);
        if queue.idle {
            queue.idle = false;
            self.shared.wake.notify_one();
        }
        started.is_some()
    }

    /// Saves `write` in the next transaction to commit, and returns once
    /// that transaction has committed (or failed).
    pub fn save(&self, write: SessionWrite) -> Result<(), StoreError> {
        let slot = Arc::new(Slot::new(write, Waiter::Thread(std::thread::current())));
        if !self.queue(Arc::clone(&slot)) {
            self.shared.commit_queued();
        }
        loop {
            if let Some(outcome) = slot.take_outcome() {
                return outcome;
            }
            // Woken when the save is done (or spuriously: looked at again).
            std::thread::park();
        }
    }

    /// Queues `write` for the next transaction to commit, at once, and
    /// gives a future ready once that transaction has committed (or
    /// failed). It owns what it waits on: the store may be dropped before
    /// it is awaited (the committer commits what is queued before it ends).
    pub fn save_queued(&self, write: SessionWrite) -> Saving {
        let slot = Arc::new(Slot::new(write, Waiter::Nobody));
        if !self.queue(Arc::clone(&slot)) {
            self.shared.commit_queued();
        }
        Saving { slot }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.shared.lock_queue().closing = true;
        self.shared.wake.notify_one();
        if let Some(Some(thread)) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs one statement of transaction control, prepared once per
/// connection: `execute_batch` parsed `BEGIN`, `COMMIT` and the like
/// again at every save, a quarter of a save's instructions.
fn control(connection: &Connection, sql: &str) -> rusqlite::Result<()> {
    connection.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Ends the open transaction, if any, keeping nothing of it.
fn roll_back(connection: &Connection) {
    // An error here (SQLite may have rolled back by itself, on a full disk
    // or an I/O error) leaves nothing to do.
    if !connection.is_autocommit() {
        let _ = control(connection, "ROLLBACK");
    }
}

/// Commits `batch` in one transaction and tells every save how it went.
///
/// No savepoint per save (each copied every page it changed to a journal
/// in memory): a save refused on its version is refused before it writes
/// anything, and a save failing in its writes rolls the whole transaction
/// back, after which every save of the batch is committed again alone, in
/// order, so that the failing one takes no other down.
fn commit(connection: &Connection, batch: &[Arc<Slot>]) {
    let again_alone = match transaction(connection, batch) {
        Ok(results) => {
            for (slot, result) in batch.iter().zip(results) {
                slot.finish(result);
            }
            return;
        }
        Err(error) if batch.len() == 1 => {
            if let Some(slot) = batch.first() {
                slot.finish(Err(error));
            }
            return;
        }
        Err(_) => batch,
    };
    for slot in again_alone {
        match transaction(connection, std::slice::from_ref(slot)) {
            Ok(results) => results.into_iter().for_each(|result| slot.finish(result)),
            Err(error) => slot.finish(Err(error)),
        }
    }
}

/// One transaction holding `batch`: each save's outcome, or, if a save
/// failed in its writes, its error, the transaction rolled back whole.
fn transaction(connection: &Connection, batch: &[Arc<Slot>]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let io = |id: &str, error: &rusqlite::Error| StoreError::Io { id: id.to_string(), message: error.to_string() };
    // A panic in the middle of an earlier commit left its transaction
    // open: it ends here, unkept.
    roll_back(connection);
    if let Err(error) = control(connection, "BEGIN IMMEDIATE") {
        return Ok(batch.iter().map(|slot| Err(io(&slot.write.id, &error))).collect());
    }
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(batch.len());
    for slot in batch {
        match save_one(connection, &slot.write) {
            Ok(()) => results.push(Ok(())),
            Err(refused @ StoreError::Conflict { .. }) => results.push(Err(refused)),
            Err(error) => {
                roll_back(connection);
                return Err(error);
            }
        }
    }
    if results.iter().all(Result::is_err) {
        // Nothing was written: nothing to commit.
        roll_back(connection);
        return Ok(results);
    }
    if let Err(error) = control(connection, "COMMIT") {
        // Nothing of the batch was kept: every save fails, those refused
        // on their version with their own reason.
        roll_back(connection);
        for (slot, result) in batch.iter().zip(&mut results) {
            if result.is_ok() {
                *result = Err(io(&slot.write.id, &error));
            }
        }
    }
    Ok(results)
}

/// One save inside the batch's transaction: the compare-and-swap, which
/// writes nothing when refused, then the transcript's new lines and the
/// session's row.
fn save_one(connection: &Connection, write: &SessionWrite) -> Result<(), StoreError> {
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
    write_rows(connection, write, transcript_len).map_err(error)
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
        Arc::new(super::Slot::new(
            super::SessionWrite {
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
            super::Waiter::Nobody,
        ))
    }

    /// A save that fails while writing (here its first transcript line
    /// collides with a row already there) leaves nothing of itself,
    /// whether it commits alone (its transaction is rolled back) or in a
    /// batch (the batch is rolled back and its saves committed again one
    /// by one), and the connection goes on.
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
                Arc::new(super::Slot::new(
                    super::SessionWrite {
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
                    super::Waiter::Nobody,
                ))
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

    /// A write of `session` at the next version, expecting the one it has.
    fn write_of(session: &Session, transcript: &[&str]) -> super::SessionWrite {
        let mut saved = session.clone();
        saved.version += 1;
        let expected = i64::try_from(session.version).unwrap();
        super::SessionWrite {
            id: session.id.clone(),
            version: expected + 1,
            expected,
            expected_version: session.version,
            flow: None,
            step: None,
            turns: 0,
            state: serde_json::to_string(&saved).unwrap(),
            transcript: transcript.iter().map(|text| ("user".to_string(), text.to_string())).collect(),
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap()
    }

    /// Many tasks on two async workers, each awaiting its saves in turn:
    /// every save is committed, in order per session, and the committer's
    /// transactions held them all.
    #[test]
    fn concurrent_awaited_saves_are_all_committed_in_order() {
        const TASKS: usize = 50;
        const TURNS: u64 = 20;
        let store = Arc::new(store("awaited"));
        runtime().block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|index| {
                    let store = Arc::clone(&store);
                    tokio::spawn(async move {
                        let mut session = Session::new(format!("s{index}"), "h");
                        for turn in 1..=TURNS {
                            let write = write_of(&session, &[&turn.to_string()]);
                            store.committer.save_queued(write).await.unwrap();
                            session.version = turn;
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        });
        for index in 0..TASKS {
            let id = format!("s{index}");
            assert_eq!(store.load(&id).unwrap().unwrap().version, TURNS);
            let lines: Vec<String> = store.transcript(&id).unwrap().into_iter().map(|line| line.text).collect();
            assert_eq!(lines, (1..=TURNS).map(|turn| turn.to_string()).collect::<Vec<_>>());
        }
        let (commits, saves) = store.committer.commits();
        assert_eq!(saves, TASKS as u64 * TURNS);
        assert!(commits >= 1 && commits <= saves, "{commits} commits");
    }

    /// Saves queued while the connection is held (here by the test, as by
    /// a long commit) wait together: once it is let go, a hundred saves
    /// take at most two transactions (the committer may have taken the
    /// first before it found the connection held). Two saves of one
    /// session expecting the same version: the first wins, the second is
    /// refused on its version, and neither takes another down.
    #[test]
    fn saves_queued_meanwhile_share_a_transaction_and_keep_their_compare_and_swap() {
        let store = store("queued");
        let held = store.committer.connection();
        let mut saving = Vec::new();
        for index in 0..100 {
            let session = Session::new(format!("s{index}"), "h");
            saving.push(store.committer.save_queued(write_of(&session, &["hi"])));
        }
        let twice = Session::new("twice", "h");
        let first = store.committer.save_queued(write_of(&twice, &["first"]));
        let second = store.committer.save_queued(write_of(&twice, &["second"]));
        drop(held);
        let outcomes = runtime().block_on(futures_util::future::join_all(saving));
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        let (first, second) = runtime().block_on(async { (first.await, second.await) });
        assert!(first.is_ok(), "{first:?}");
        assert!(matches!(second, Err(StoreError::Conflict { stored: 1, expected: 0, .. })), "{second:?}");
        let lines: Vec<String> = store.transcript("twice").unwrap().into_iter().map(|line| line.text).collect();
        assert_eq!(lines, ["first"]);
        let (commits, saves) = store.committer.commits();
        assert_eq!(saves, 102);
        assert!(commits <= 2, "{commits} transactions for 102 saves queued together");
    }

    /// An awaited save failing in its writes (its first transcript line
    /// collides with a row put there by hand), queued with others: it
    /// fails alone and leaves nothing; the others are committed.
    #[test]
    fn an_awaited_save_failing_in_its_writes_takes_no_other_down() {
        let store = store("awaited-failing");
        let held = store.committer.connection();
        held.execute("INSERT INTO transcript (session_id, seq, role, text) VALUES ('bad', 0, 'user', 'x')", [])
            .unwrap();
        let saving: Vec<_> = ["a", "bad", "b"]
            .iter()
            .map(|id| store.committer.save_queued(write_of(&Session::new(*id, "h"), &["hi"])))
            .collect();
        drop(held);
        let outcomes = runtime().block_on(futures_util::future::join_all(saving));
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(matches!(outcomes[1], Err(StoreError::Io { .. })), "{outcomes:?}");
        assert!(store.load("bad").unwrap().is_none());
        assert_eq!(store.transcript("bad").unwrap().len(), 1, "only the line put there by hand");
        assert!(store.load("a").unwrap().is_some() && store.load("b").unwrap().is_some());
    }

    /// The store dropped with saves queued and not yet awaited: its
    /// committer commits them before it ends, so each future is ready with
    /// its outcome (none waits forever), and the saves are in the file.
    #[test]
    fn saves_queued_when_the_store_is_dropped_are_committed_and_answered() {
        let store = store("dropped");
        let path = store.path().to_path_buf();
        let saving: Vec<_> = (0..50)
            .map(|index| store.committer.save_queued(write_of(&Session::new(format!("s{index}"), "h"), &["hi"])))
            .collect();
        drop(store);
        let outcomes = runtime().block_on(futures_util::future::join_all(saving));
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(reopened.list().unwrap().len(), 50);
    }
}
