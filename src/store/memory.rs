//! An in-memory store: sessions live as long as the process.

use super::{SessionStore, StoreError, check_id};
use crate::runtime::session::Session;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, Session>>,
}

impl SessionStore for MemoryStore {
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError> {
        check_id(id)?;
        let sessions = self
            .sessions
            .lock()
            .map_err(|_| StoreError::Io { id: id.to_string(), message: "the store's lock is poisoned".to_string() })?;
        Ok(sessions.get(id).cloned())
    }

    fn save(&self, session: &Session, expected_version: u64) -> Result<(), StoreError> {
        check_id(&session.id)?;
        let mut sessions = self.sessions.lock().map_err(|_| StoreError::Io {
            id: session.id.clone(),
            message: "the store's lock is poisoned".to_string(),
        })?;
        let stored = sessions.get(&session.id).map_or(0, |stored| stored.version);
        if stored != expected_version {
            return Err(StoreError::Conflict { id: session.id.clone(), stored, expected: expected_version });
        }
        sessions.insert(session.id.clone(), session.clone());
        Ok(())
    }
}
