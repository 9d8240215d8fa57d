//! An in-memory session store: sessions live as long as the process (tests,
//! embedders). Same compare-and-swap and transcript rules as SQLite, and
//! the program versions ([`super::versions`]) as the database stores keep
//! them.

use super::versions::{NewVersion, StoredVersion, VersionStore};
use super::{Cap, Created, SessionStore, SessionSummary, StoreError, Swap, check_id, check_loaded};
use crate::message::Message;
use crate::runtime::session::Session;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Each session with its transcript.
type Sessions = BTreeMap<String, (Session, Vec<Message>)>;

/// A [`super::SessionStore`] held in memory, gone with the
/// process: for tests and for embedders that keep conversations
/// themselves. It stores no workflow runs.
#[derive(Default)]
pub struct MemoryStore {
    sessions: Mutex<Sessions>,
    /// Program versions by program name and hash.
    versions: Mutex<BTreeMap<(String, String), StoredVersion>>,
}

impl MemoryStore {
    fn sessions(&self, id: &str) -> Result<MutexGuard<'_, Sessions>, StoreError> {
        self.sessions
            .lock()
            .map_err(|_| StoreError::Io { id: id.to_string(), message: "the store's lock is poisoned".to_string() })
    }
}

impl SessionStore for MemoryStore {
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id)?;
        let session = self.sessions(id)?.get(id).map(|(session, _)| session.clone());
        if let Some(session) = &session {
            check_loaded(id, session)?;
        }
        Ok(session)
    }

    fn save(&self, session: &Session, expected_version: u64, transcript: &[Message]) -> Result<(), StoreError> {
        match self.save_or_stored(session, expected_version, transcript)? {
            Swap::Written => Ok(()),
            Swap::Stale(stored) => {
                Err(StoreError::Conflict { id: session.id.clone(), stored: stored.version, expected: expected_version })
            }
        }
    }

    fn save_or_stored(
        &self,
        session: &Session,
        expected_version: u64,
        transcript: &[Message],
    ) -> Result<Swap, StoreError> {
        check_id(&session.id)?;
        let mut sessions = self.sessions(&session.id)?;
        match sessions.get(&session.id) {
            Some((stored, _)) if stored.version != expected_version => {
                return Ok(Swap::Stale(Box::new(stored.clone())));
            }
            None if expected_version != 0 => {
                return Err(StoreError::Conflict { id: session.id.clone(), stored: 0, expected: expected_version });
            }
            _ => {}
        }
        let entry = sessions.entry(session.id.clone()).or_insert_with(|| (session.clone(), Vec::new()));
        entry.0 = session.clone();
        entry.1.extend_from_slice(transcript);
        Ok(Swap::Written)
    }

    fn create_session(&self, session: &Session, cap: &Cap<'_>) -> Result<Created, StoreError> {
        check_id(&session.id)?;
        // One lock for the count and the insert: nothing comes between.
        let mut sessions = self.sessions(&session.id)?;
        let kept = sessions.keys().filter(|id| id.starts_with(cap.prefix)).count() as u64;
        if kept >= cap.max {
            return Ok(Created::Full { kept });
        }
        if let Some((stored, _)) = sessions.get(&session.id) {
            return Err(StoreError::Conflict { id: session.id.clone(), stored: stored.version, expected: 0 });
        }
        sessions.insert(session.id.clone(), (session.clone(), Vec::new()));
        Ok(Created::Stored)
    }

    fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        Ok(self
            .sessions("*")?
            .values()
            .map(|(session, _)| SessionSummary {
                id: session.id.clone(),
                flow: session.flow_name.clone(),
                step: session.step_name.clone(),
                turns: session.turns,
                version: session.version,
                updated_at: String::new(),
            })
            .collect())
    }

    fn delete(&self, id: &str) -> Result<bool, StoreError> {
        check_id(id)?;
        Ok(self.sessions(id)?.remove(id).is_some())
    }

    fn transcript(&self, id: &str) -> Result<Vec<Message>, StoreError> {
        check_id(id)?;
        Ok(self.sessions(id)?.get(id).map(|(_, transcript)| transcript.clone()).unwrap_or_default())
    }
}

impl VersionStore for MemoryStore {
    fn record_version(&self, version: &NewVersion<'_>) -> Result<(), StoreError> {
        let mut versions = self.versions.lock().map_err(|_| poisoned(version.program))?;
        versions.entry((version.program.to_string(), version.hash.to_string())).or_insert_with(|| StoredVersion {
            program: version.program.to_string(),
            hash: version.hash.to_string(),
            path: version.path.to_string(),
            source: version.source.to_string(),
            first_seen: super::rows::now_text(),
        });
        Ok(())
    }

    fn load_version(&self, program: &str, hash: &str) -> Result<Option<StoredVersion>, StoreError> {
        let versions = self.versions.lock().map_err(|_| poisoned(program))?;
        Ok(versions.get(&(program.to_string(), hash.to_string())).cloned())
    }
}

fn poisoned(id: &str) -> StoreError {
    StoreError::Io { id: id.to_string(), message: "the store's lock is poisoned".to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(version: u64, hotel: &str) -> Session {
        let mut session = Session::new("s", "hash");
        session.version = version;
        session.data.insert("hotel".into(), hotel.into());
        session
    }

    #[test]
    fn versions_are_recorded_once_and_read_by_program_and_hash() {
        crate::store::versions::check_store(&MemoryStore::default());
    }

    #[test]
    fn a_refused_save_answers_with_the_stored_session_and_writes_nothing() {
        let store = MemoryStore::default();
        store.save(&session(1, "Grand"), 0, &[]).unwrap();
        store.save(&session(2, "Ritz"), 1, &[]).unwrap();
        match store.save_or_stored(&session(2, "Savoy"), 1, &[]) {
            Ok(Swap::Stale(stored)) => assert_eq!(*stored, session(2, "Ritz")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(store.save(&session(2, "Savoy"), 1, &[]), Err(StoreError::Conflict { stored: 2, .. })));
        assert_eq!(store.load("s").unwrap(), Some(session(2, "Ritz")));
        store.delete("s").unwrap();
        let gone = store.save_or_stored(&session(3, "Ritz"), 2, &[]);
        assert!(matches!(gone, Err(StoreError::Conflict { stored: 0, expected: 2, .. })), "{gone:?}");
    }

    #[test]
    fn a_creation_at_the_cap_is_refused_and_an_id_taken_is_a_conflict() {
        let store = MemoryStore::default();
        let cap = Cap { prefix: "acme_", max: 2 };
        let new = |id: &str| {
            let mut session = Session::new(id, "hash");
            session.version = 1;
            session
        };
        store.save(&new("globex_1"), 0, &[]).unwrap();
        assert_eq!(store.create_session(&new("acme_1"), &cap).unwrap(), Created::Stored);
        assert!(matches!(store.create_session(&new("acme_1"), &cap), Err(StoreError::Conflict { stored: 1, .. })));
        assert_eq!(store.create_session(&new("acme_2"), &cap).unwrap(), Created::Stored);
        assert_eq!(store.create_session(&new("acme_3"), &cap).unwrap(), Created::Full { kept: 2 });
        assert_eq!(store.load("acme_3").unwrap(), None);
    }
}
