//! The SQLite store's WAL checkpoints, on a thread of their own with a
//! connection of its own, so that no commit waits for one.
//!
//! SQLite checkpoints by itself at the end of the commit that grows the WAL
//! past 1,000 pages: that commit copies the WAL into the database and
//! `fsync`s both files (about 4 ms each on the development VM) while it
//! holds the store's connection, and every turn waiting to commit waits
//! with it. Here the commits only count what they wrote; every
//! [`CHANGES_PER_CHECKPOINT`] changed rows the checkpoint thread is woken
//! and runs a `PASSIVE` checkpoint, which copies what it can without
//! taking the write lock, while commits go on.
//!
//! A `PASSIVE` checkpoint never empties a WAL that is written all the time
//! (commits land while it `fsync`s), and SQLite starts the WAL over only
//! once all of it is in the database. So the store's own connection keeps
//! an automatic checkpoint at [`WAL_BOUND_PAGES`] pages: past that bound,
//! the commit that crosses it copies what the thread has not (a little)
//! and the WAL starts over. That commit still `fsync`s both files while
//! the others wait (4–11 ms here), and those waits are what a served
//! turn's p99 is made of when they are frequent: at 5,000 booking turns/s
//! (about 12,500 pages/s) a bound of 10,000 pages gave 6–8 such commits in
//! a 4 s run, holding up about 1% of the turns, and p99 6.6–9.5 ms (median
//! 7.4, six runs); 40,000 pages gave 1–2 (p99 4.4–6.8 ms, median 5.0),
//! CPU per turn the same within the machine's drift (191–230 against
//! 209–242 µs, interleaved, idle; `cargo bench --bench serve -- --rate
//! 5000 --repeat 3`). An earlier trial of 32,768 pages cost CPU per turn
//! (347–364 against 285–322 µs at 3,000 turns/s) on a loaded machine,
//! when each turn wrote a third more pages; it did not show again idle.
//! On a store just filled with some 30,000 sessions that was still not
//! enough: the thread fell behind a bigger database, the commit crossing
//! the bound copied what it had left, 10–30 ms while every save waited,
//! and the p99 at 5,000 turns/s was 8–15 ms. So the thread now starts the
//! WAL over itself past [`RESTART_PAGES`]: right after its `PASSIVE`
//! checkpoint has moved nearly all of it, a `RESTART` checkpoint waits
//! for the commit in progress, holds the next ones off while it copies
//! what came since and `fsync`s, and the next commit writes the WAL from
//! its start. The bound stays as the backstop. On that filled store the
//! p99 was then 4.3–7.4 ms (five runs), and on a fresh one 3.8–5.2 ms
//! (seven). The `RESTART` itself took 3.3–6.7 ms at 5,000 turns/s, about
//! every 1.6 s, and 10–26 ms while the bench's closed loops created
//! sessions at full speed. The WAL file grows to about 80 MB under
//! sustained load. A WAL
//! that is not written all the time starts over well before (once the
//! thread has moved all of it), and its file is cut back to
//! [`WAL_FILE_LIMIT`] bytes when it starts over.
//!
//! Durability is unchanged: `synchronous = NORMAL` as before, a commit is
//! in the WAL (in the OS's hands) before it returns, so it survives a
//! killed process; a checkpoint only moves committed pages into the
//! database file, `fsync`ing the WAL before and the database after.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Rows changed (inserted, updated, deleted) between two checkpoints: a
/// booking turn changes three (its session and two transcript lines) and
/// writes about as many pages, so about 1,000 WAL pages, SQLite's own
/// cadence.
pub(crate) const CHANGES_PER_CHECKPOINT: u64 = 1024;

/// The WAL size, in pages, past which the thread starts the WAL over
/// itself after its checkpoint ([`Mode::Restart`]).
pub(crate) const RESTART_PAGES: u64 = 20_000;

/// The WAL size, in pages, past which the committing connection
/// checkpoints itself (SQLite's `wal_autocheckpoint`).
pub(crate) const WAL_BOUND_PAGES: i64 = 40_000;

/// What the WAL file is cut back to when it starts over (SQLite's
/// `journal_size_limit`), in bytes: the bound, and room for what is
/// written while a checkpoint of the thread holds the commits' own off.
pub(crate) const WAL_FILE_LIMIT: i64 = 192 * 1024 * 1024;

/// Sets the checkpoint bounds on the store's own connection, which writes.
pub(crate) fn bound(connection: &Connection) -> rusqlite::Result<()> {
    connection.pragma_update(None, "wal_autocheckpoint", WAL_BOUND_PAGES)?;
    connection.pragma_update(None, "journal_size_limit", WAL_FILE_LIMIT)?;
    Ok(())
}

#[derive(Default)]
struct Signal {
    due: bool,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    signal: Mutex<Signal>,
    wake: Condvar,
    /// The writing connection's `total_changes` when the thread was last
    /// woken.
    woken_at: AtomicU64,
    /// Checkpoints run, and what the last one found: the WAL's frames,
    /// and how many of them were in the database after it.
    checkpoints: AtomicU64,
    log: AtomicU64,
    moved: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Signal> {
        // Two flags, whole after any panic.
        self.signal.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The checkpoint thread of one store; stopped (and its connection closed)
/// when dropped, so the store's own connection closes last and SQLite's
/// last close checkpoints and deletes the WAL, as before.
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread for the database at `path`; `None` if no thread
    /// can be started (the commits then checkpoint at the bound).
    pub fn start(path: &Path) -> Option<Checkpointer> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let path = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("flowc-sqlite-checkpoint".to_string())
            .spawn(move || run(&path, &theirs))
            .ok()?;
        Some(Checkpointer { shared, thread: Some(thread) })
    }

    /// Told by the writing connection, as it is let go, how many rows it
    /// has changed in all: wakes the thread every
    /// [`CHANGES_PER_CHECKPOINT`]. Two loads and a compare otherwise.
    pub fn written(&self, total_changes: u64) {
        let woken_at = self.shared.woken_at.load(Ordering::Relaxed);
        if total_changes.saturating_sub(woken_at) < CHANGES_PER_CHECKPOINT {
            return;
        }
        self.shared.woken_at.store(total_changes, Ordering::Relaxed);
        self.shared.lock().due = true;
        self.shared.wake.notify_all();
    }

    /// Checkpoints run so far; the last one's WAL frames, and how many of
    /// them were in the database after it.
    #[cfg(test)]
    pub fn done(&self) -> (u64, u64, u64) {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        (load(&self.shared.checkpoints), load(&self.shared.log), load(&self.shared.moved))
    }
}

#[cfg(test)]
impl Checkpointer {
    /// Wakes the thread for a checkpoint, whatever was written.
    pub fn request(&self) {
        self.shared.lock().due = true;
        self.shared.wake.notify_all();
    }

    /// Waits until `count` checkpoints have run.
    pub fn wait_for(&self, count: u64) {
        let mut signal = self.shared.lock();
        while self.shared.checkpoints.load(Ordering::Relaxed) < count {
            signal = self.shared.wake.wait(signal).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: waits to be woken, checkpoints, and so on until stopped.
/// Its connection is opened at the first checkpoint, so a store that
/// writes little (a CLI command) never opens it.
fn run(path: &PathBuf, shared: &Shared) {
    let mut connection: Option<Connection> = None;
    let mut said = false;
    loop {
        {
            let mut signal = shared.lock();
            while !signal.due && !signal.stop {
                signal = shared.wake.wait(signal).unwrap_or_else(PoisonError::into_inner);
            }
            if signal.stop {
                return;
            }
            signal.due = false;
        }
        if connection.is_none() {
            // A checkpoint itself never waits for a lock (`PASSIVE`), but
            // opening the WAL may, briefly, while another connection
            // recovers it.
            connection = Connection::open(path)
                .and_then(|opened| opened.busy_timeout(Duration::from_millis(100)).map(|()| opened))
                .map_err(|error| report(&mut said, path, &error))
                .ok();
        }
        let Some(open) = &connection else {
            continue;
        };
        match checkpoint(open, Mode::Passive).and_then(|(log, moved)| {
            // Nearly all of a long WAL is in the database now: starting it
            // over here costs the commits the copy of what came since and
            // two `fsync`s, where the commit crossing the bound would
            // copy whatever this thread has not.
            if log >= RESTART_PAGES { checkpoint(open, Mode::Restart) } else { Ok((log, moved)) }
        }) {
            Ok((log, moved)) => {
                shared.log.store(log, Ordering::Relaxed);
                shared.moved.store(moved, Ordering::Relaxed);
                // Under the lock, so that a waiter between its check and
                // its wait cannot miss the wake-up.
                let _signal = shared.lock();
                shared.checkpoints.fetch_add(1, Ordering::Relaxed);
                shared.wake.notify_all();
            }
            Err(error) => report(&mut said, path, &error),
        }
    }
}

/// How a checkpoint of the thread runs.
#[derive(Clone, Copy)]
enum Mode {
    /// Copies what it can without taking the write lock, while commits go on.
    Passive,
    /// Waits for the commit in progress, holds new ones off while it copies
    /// the rest of the WAL and `fsync`s, and has the next commit start the
    /// WAL over. A busy database (past the connection's timeout) leaves it
    /// to the next turn of the thread, or to the bound.
    Restart,
}

/// One checkpoint: the WAL's frames, and how many of them are in the
/// database after it.
fn checkpoint(connection: &Connection, mode: Mode) -> rusqlite::Result<(u64, u64)> {
    let pragma = match mode {
        Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
        Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
    };
    let count = |value: i64| u64::try_from(value).unwrap_or(0);
    connection.query_row(pragma, [], |row| Ok((count(row.get(1)?), count(row.get(2)?))))
}

/// A checkpoint that fails harms nothing (the commits checkpoint at the
/// bound): said once on stderr, not at every attempt.
fn report(said: &mut bool, path: &Path, error: &rusqlite::Error) {
    if !*said {
        *said = true;
        eprintln!(
            "warning: the store sqlite:{}: the checkpoint thread cannot checkpoint ({error}); commits checkpoint instead",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{CHANGES_PER_CHECKPOINT, WAL_BOUND_PAGES, WAL_FILE_LIMIT};
    use crate::message::{Message, Role};
    use crate::runtime::session::Session;
    use crate::store::SessionStore;
    use crate::store::sqlite::SqliteStore;
    use std::path::PathBuf;

    fn database(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flowc-checkpoint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("flowc.db")
    }

    fn wal(path: &std::path::Path) -> PathBuf {
        path.with_file_name("flowc.db-wal")
    }

    /// `saves` turns of one session, each with one transcript line of
    /// `line` bytes.
    fn write(store: &SqliteStore, saves: u64, line: usize) {
        let mut session = Session::new("s", "h");
        let text = "x".repeat(line);
        for version in 1..=saves {
            session.version = version;
            let said = [Message { role: Role::User, text: text.clone() }];
            store.save(&session, version - 1, &said).unwrap();
        }
    }

    /// Commits wake the thread, which checkpoints on its own connection:
    /// the store's connection checkpoints only past the bound.
    #[test]
    fn commits_wake_the_thread_which_checkpoints() {
        let path = database("thread");
        let store = SqliteStore::open(&path).unwrap();
        let connection = store.connection("*").unwrap();
        let bound: i64 = connection.query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0)).unwrap();
        let limit: i64 = connection.query_row("PRAGMA journal_size_limit", [], |row| row.get(0)).unwrap();
        assert_eq!((bound, limit), (WAL_BOUND_PAGES, WAL_FILE_LIMIT));
        drop(connection);
        assert_eq!(store.checkpointer().unwrap().done(), (0, 0, 0), "nothing written, nothing checkpointed");
        // Each save changes two rows: its session and its line.
        write(&store, CHANGES_PER_CHECKPOINT / 2 + 1, 100);
        store.checkpointer().unwrap().wait_for(1);
        let (count, log, moved) = store.checkpointer().unwrap().done();
        assert!(count >= 1 && log > 0 && moved > 0, "{count} checkpoints, {moved} of {log} frames");
        assert_eq!(store.transcript("s").unwrap().len() as u64, CHANGES_PER_CHECKPOINT / 2 + 1);
    }

    /// The thread's `RESTART`, taken while commits go on from another
    /// connection, moves the whole WAL, and the next commit starts it
    /// over: what the thread does past [`super::RESTART_PAGES`].
    #[test]
    fn a_restart_moves_the_whole_wal_and_the_next_commit_starts_it_over() {
        let path = database("restart");
        let store = SqliteStore::open(&path).unwrap();
        write(&store, 300, 4096);
        let thread = rusqlite::Connection::open(&path).unwrap();
        thread.busy_timeout(std::time::Duration::from_millis(100)).unwrap();
        let (log, moved) = super::checkpoint(&thread, super::Mode::Restart).unwrap();
        assert!(log > 300 && moved == log, "all of the WAL moved: {moved} of {log} frames");
        let mut session = store.load("s").unwrap().unwrap();
        session.version += 1;
        store.save(&session, 300, &[]).unwrap();
        let (after, _) = super::checkpoint(&thread, super::Mode::Passive).unwrap();
        assert!(after < log, "the WAL started over: {after} frames, {log} before the save");
    }

    /// The thread's connection closes before the store's, so the last
    /// close checkpoints and deletes the WAL as ever (the next opener does
    /// not take the store for one a killed process left).
    #[test]
    fn the_wal_is_gone_once_the_store_is_closed() {
        let path = database("close");
        let store = SqliteStore::open(&path).unwrap();
        write(&store, CHANGES_PER_CHECKPOINT, 100);
        store.checkpointer().unwrap().wait_for(1);
        assert!(wal(&path).exists());
        drop(store);
        assert!(!wal(&path).exists(), "the last close removed the WAL");
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.load("s").unwrap().unwrap().version, CHANGES_PER_CHECKPOINT);
    }

    /// Once the writes stop and a checkpoint has moved all of the WAL,
    /// the next commit writes at its start (the last checkpoint finds a
    /// WAL shorter than before that commit): the WAL starts over without
    /// reaching the bound.
    #[test]
    fn the_wal_starts_over_once_all_of_it_is_moved() {
        let path = database("bound");
        let store = SqliteStore::open(&path).unwrap();
        let saves = 2000;
        write(&store, saves, 4096);
        let checkpointer = store.checkpointer().unwrap();
        // The second checkpoint asked for starts after the first ends,
        // so after the last write: it moves the whole WAL.
        for _ in 0..2 {
            let done = checkpointer.done().0;
            checkpointer.request();
            checkpointer.wait_for(done + 1);
        }
        // How big the WAL is here depends on whether it already started
        // over while the saves were written (the thread caught up): not
        // pinned, only that the checkpoint moved all of it.
        let (_, before, moved) = checkpointer.done();
        assert!(before > 0 && moved == before, "all of the WAL moved: {moved} of {before} frames");
        let mut session = store.load("s").unwrap().unwrap();
        session.version += 1;
        store.save(&session, saves, &[]).unwrap();
        let done = checkpointer.done().0;
        checkpointer.request();
        checkpointer.wait_for(done + 1);
        let (_, log, moved) = checkpointer.done();
        assert!(log < before && moved == log, "the WAL started over: {log} frames, {before} before the save");
        let size = std::fs::metadata(wal(&path)).unwrap().len();
        assert!(size > 2000 * 4096, "the WAL file ({size} bytes) held the saves");
        assert_eq!(store.transcript("s").unwrap().len() as u64, saves);
    }
}
