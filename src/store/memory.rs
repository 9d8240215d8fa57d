//! An in-memory session store: sessions live as long as the process (tests,
//! embedders). Same compare-and-swap and transcript rules as SQLite.

use super::{SessionStore, SessionSummary, StoreError, check_id, check_loaded};
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
        check_id(&session.id)?;
        let mut sessions = self.sessions(&session.id)?;
        let stored = sessions.get(&session.id).map_or(0, |(stored, _)| stored.version);
        if stored != expected_version {
            return Err(StoreError::Conflict { id: session.id.clone(), stored, expected: expected_version });
        }
        let entry = sessions.entry(session.id.clone()).or_insert_with(|| (session.clone(), Vec::new()));
        entry.0 = session.clone();
        entry.1.extend_from_slice(transcript);
        Ok(())
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
