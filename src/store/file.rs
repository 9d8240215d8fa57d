//! Sessions as JSON files (`DIR/ID.json`), written atomically: a temporary
//! file in the same directory, then a rename over the old one, so a crash
//! never leaves half a session. The compare-and-swap is checked under an
//! exclusive lock file, so two `flowc` processes on one machine cannot both
//! win a turn.

use super::{SessionStore, StoreError, check_id};
use crate::runtime::session::Session;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct FileStore {
    directory: PathBuf,
}

impl FileStore {
    pub fn new(directory: impl Into<PathBuf>) -> FileStore {
        FileStore { directory: directory.into() }
    }

    /// `.flowc/sessions` under `root`.
    pub fn default_in(root: &Path) -> FileStore {
        FileStore::new(root.join(".flowc").join("sessions"))
    }

    fn path(&self, id: &str) -> PathBuf {
        self.directory.join(format!("{id}.json"))
    }

    fn io_error(id: &str, error: &std::io::Error) -> StoreError {
        StoreError::Io { id: id.to_string(), message: error.to_string() }
    }
}

/// An exclusive lock held while the file exists (created with
/// `create_new`, removed on drop).
struct LockFile {
    path: PathBuf,
}

impl LockFile {
    fn acquire(path: PathBuf, id: &str) -> Result<LockFile, StoreError> {
        for _ in 0..200 {
            match fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => return Ok(LockFile { path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(error) => return Err(FileStore::io_error(id, &error)),
            }
        }
        Err(StoreError::Io {
            id: id.to_string(),
            message: format!("the session is locked by another process ({} exists)", path.display()),
        })
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

impl SessionStore for FileStore {
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id)?;
        let text = match fs::read_to_string(self.path(id)) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(FileStore::io_error(id, &error)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| StoreError::Corrupt { id: id.to_string(), message: error.to_string() })
    }

    fn save(&self, session: &Session, expected_version: u64) -> Result<(), StoreError> {
        let id = session.id.as_str();
        check_id(id)?;
        fs::create_dir_all(&self.directory).map_err(|error| FileStore::io_error(id, &error))?;
        let _lock = LockFile::acquire(self.directory.join(format!("{id}.lock")), id)?;
        let stored = self.load(id)?.map_or(0, |stored| stored.version);
        if stored != expected_version {
            return Err(StoreError::Conflict { id: id.to_string(), stored, expected: expected_version });
        }
        let text = serde_json::to_string_pretty(session)
            .map_err(|error| StoreError::Io { id: id.to_string(), message: error.to_string() })?;
        let temporary = self.directory.join(format!(".{id}.json.tmp"));
        let write = || -> std::io::Result<()> {
            let mut file = fs::File::create(&temporary)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            fs::rename(&temporary, self.path(id))
        };
        write().map_err(|error| FileStore::io_error(id, &error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flowc-store-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn saves_and_loads_a_session() {
        let store = FileStore::new(temp_dir("roundtrip"));
        let mut session = Session::new("s1", "hash");
        session.version = 1;
        session.data.insert("hotel".into(), "Ritz".into());
        store.save(&session, 0).unwrap();
        assert_eq!(store.load("s1").unwrap(), Some(session));
        assert_eq!(store.load("missing").unwrap(), None);
    }

    #[test]
    fn a_stale_version_is_a_conflict_and_changes_nothing() {
        let store = FileStore::new(temp_dir("conflict"));
        let mut session = Session::new("s2", "hash");
        session.version = 1;
        store.save(&session, 0).unwrap();
        let mut stale = session.clone();
        stale.version = 2;
        stale.data.insert("x".into(), 1.into());
        store.save(&stale, 1).unwrap();
        let mut other = session.clone();
        other.version = 2;
        let error = store.save(&other, 1).unwrap_err();
        assert!(matches!(error, StoreError::Conflict { stored: 2, expected: 1, .. }));
        assert_eq!(store.load("s2").unwrap(), Some(stale));
    }

    #[test]
    fn ids_that_could_escape_the_directory_are_refused() {
        let store = FileStore::new(temp_dir("ids"));
        assert!(matches!(store.load("../etc/passwd"), Err(StoreError::InvalidId { .. })));
    }
}
