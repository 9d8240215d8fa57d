//! What a SQLite store checks as it opens, so that damage stays contained:
//! whether it may write at all (a read-only file or folder is opened
//! read-only, listed and shown, never migrated or switched to WAL), and
//! whether the last process to use it stopped cleanly (if not, SQLite's
//! `quick_check` runs, and a damaged database is refused for writing).
//!
//! "Unclean" is detected the way SQLite itself knows it must recover a
//! WAL: the last connection to close checkpoints the WAL and deletes the
//! `-wal` file, so a `-wal` file found by the *first* process to open the
//! database means the one before was killed (or the machine stopped).
//! SQLite does not say whether a connection is the first, so every store
//! holds a shared `flock` on `FILE.lock` beside the database while it is
//! open, and an opener that gets it exclusively is the only one. The kernel
//! drops the lock of a killed process: nothing is left stale. Damage found
//! is written into the lock file, so every later opener checks again (and
//! goes on refusing) until the database is repaired or replaced.

use rusqlite::Connection;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why a store refuses to write, said in full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    ReadOnly(String),
    Damaged(String),
}

impl Refusal {
    /// The reason, for the database at `path`.
    pub fn reason(&self, path: &Path) -> String {
        match self {
            Refusal::ReadOnly(why) => format!("it is read-only ({why}): it can be listed and shown, not written"),
            Refusal::Damaged(what) => format!(
                "its database is damaged (SQLite's quick_check: {what}); flowc will not write to it: \
                 restore it from a backup or recover it with `sqlite3 {} .recover`",
                path.display()
            ),
        }
    }
}

/// Why the database at `path` cannot be written by this process, if it
/// cannot: the file or its folder (where WAL mode writes `-wal` and `-shm`
/// files) is marked read-only or not writable by this user, or on a
/// read-only mount. A database that does not exist yet is made, not
/// opened: writable. Asked without opening the file, since closing a
/// descriptor of a database would drop the locks SQLite holds on it in
/// this process.
pub fn read_only(path: &Path) -> Option<String> {
    let metadata = std::fs::metadata(path).ok()?;
    if metadata.permissions().readonly() || !writable(path) {
        return Some(format!("{} is not writable", path.display()));
    }
    let folder = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let folder_read_only = std::fs::metadata(folder).is_ok_and(|metadata| metadata.permissions().readonly());
    if folder_read_only || !writable(folder) {
        return Some(format!("its folder {} is not writable", folder.display()));
    }
    None
}

/// Whether this user may write `path` (access(2) with `W_OK`: permissions
/// and read-only mounts).
#[cfg(unix)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) reads the NUL-terminated name, which outlives the call.
    unsafe { libc::access(name.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(not(unix))]
fn writable(_: &Path) -> bool {
    true
}

/// `path` as an SQLite `file:` URI, whatever characters it holds.
pub fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for character in path.to_string_lossy().chars() {
        match character {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            other => uri.push(other),
        }
    }
    uri
}

/// The lock a store holds while it is open: shared, so that the next
/// opener can tell whether anyone else has the database open.
pub struct OpenLock {
    file: File,
    path: PathBuf,
}

/// What taking the lock found.
pub struct Opening {
    pub lock: OpenLock,
    /// Whether `quick_check` must run: this is the only process with the
    /// database open and the last one did not close it cleanly, or damage
    /// was found before.
    pub check: bool,
}

pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// Takes the open lock of the database at `path` (before SQLite opens it:
/// SQLite deletes a clean `-wal` as its last connection closes, and the
/// lock tells "first" from "another is open").
pub fn open_lock(path: &Path) -> Result<Opening, String> {
    let lock_path = lock_path(path);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|error| format!("cannot open {}: {error}", lock_path.display()))?;
    let mut recorded = String::new();
    // An unreadable lock file records nothing: it is rewritten on damage.
    let _ = file.read_to_string(&mut recorded);
    let damaged_before = recorded.starts_with("damaged");
    let check = if flock::try_exclusive(&file) {
        let unclean = std::fs::metadata(wal_path(path)).is_ok_and(|metadata| metadata.len() > 0);
        // Held exclusively while the check runs: later openers wait for
        // its verdict instead of writing meanwhile.
        unclean || damaged_before
    } else {
        flock::shared(&file).map_err(|error| format!("cannot lock {}: {error}", lock_path.display()))?;
        damaged_before
    };
    Ok(Opening { lock: OpenLock { file, path: lock_path }, check })
}

impl OpenLock {
    /// From the exclusive lock of the first opener to the shared one every
    /// open store holds.
    pub fn share(&self) -> Result<(), String> {
        flock::shared(&self.file).map_err(|error| format!("cannot lock {}: {error}", self.path.display()))
    }

    /// Records what the check found, for the next openers.
    pub fn record(&mut self, damage: Option<&str>) {
        let text = damage.map(|what| format!("damaged: {what}\n")).unwrap_or_default();
        // Recording is a courtesy to the next opener; the refusal itself
        // holds in this process whatever the file says.
        let _ = self.file.set_len(0);
        let _ = self.file.seek(SeekFrom::Start(0));
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.sync_data();
    }
}

/// SQLite's `quick_check` (the integrity check without the index
/// cross-checks, linear in the file's size): `None` when the database is
/// whole, else what it found (its first lines).
pub fn quick_check(connection: &Connection) -> Option<String> {
    let found: Result<Vec<String>, rusqlite::Error> = connection
        .prepare("PRAGMA quick_check(5)")
        .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect());
    match found {
        Ok(lines) if lines == ["ok"] => None,
        Ok(lines) => Some(lines.join("; ")),
        Err(error) => Some(error.to_string()),
    }
}

#[cfg(unix)]
mod flock {
    use std::fs::File;
    use std::os::fd::AsRawFd;

    pub fn try_exclusive(file: &File) -> bool {
        // SAFETY: flock on a descriptor this File owns; no memory is shared.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    pub fn shared(file: &File) -> std::io::Result<()> {
        loop {
            // SAFETY: as above.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } == 0 {
                return Ok(());
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

#[cfg(not(unix))]
mod flock {
    //! Without `flock`, no opener knows it is the only one: the check runs
    //! only where damage was recorded.
    use std::fs::File;

    pub fn try_exclusive(_: &File) -> bool {
        false
    }

    pub fn shared(_: &File) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_db(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flowc-guard-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("flowc.db")
    }

    #[test]
    fn a_second_opener_is_not_the_first_and_a_left_wal_asks_for_a_check() {
        let path = temp_db("first");
        let first = open_lock(&path).unwrap();
        assert!(!first.check, "no WAL was left");
        first.lock.share().unwrap();
        std::fs::write(wal_path(&path), b"left by a killed process").unwrap();
        let second = open_lock(&path).unwrap();
        assert!(!second.check, "another store is open: its WAL is live, not left");
        drop(second);
        drop(first);
        assert!(open_lock(&path).unwrap().check, "alone with a WAL left behind");
    }

    #[test]
    fn recorded_damage_asks_every_later_opener_for_a_check() {
        let path = temp_db("recorded");
        let mut opening = open_lock(&path).unwrap();
        opening.lock.record(Some("page 3 is never used"));
        opening.lock.share().unwrap();
        assert!(open_lock(&path).unwrap().check);
        opening.lock.record(None);
        assert!(!open_lock(&path).unwrap().check);
    }

    #[test]
    fn a_file_marked_read_only_is_read_only() {
        let path = temp_db("read-only");
        assert_eq!(read_only(&path), None, "a database not made yet");
        std::fs::write(&path, b"").unwrap();
        assert_eq!(read_only(&path), None);
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&path, permissions).unwrap();
        assert!(read_only(&path).unwrap().contains("is not writable"));
    }
}
