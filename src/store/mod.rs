//! Session stores, behind one trait so the runtime never knows where a
//! session lives: in memory (tests, one-shot runs), as JSON files under
//! `.flowc/sessions/` (the default until the SQLite store lands), and later
//! SQLite and PostgreSQL. Saving is a compare-and-swap on
//! [`Session::version`]: a turn saves only if nobody saved since it loaded.

pub mod file;
pub mod memory;

use crate::runtime::session::Session;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session `{id}` was changed by someone else (stored version {stored}, expected {expected})")]
    Conflict { id: String, stored: u64, expected: u64 },
    #[error("cannot read or write session `{id}`: {message}")]
    Io { id: String, message: String },
    #[error("session `{id}` is corrupt: {message}")]
    Corrupt { id: String, message: String },
    #[error("`{id}` is not a valid session id (use letters, digits, `-` and `_`)")]
    InvalidId { id: String },
}

pub trait SessionStore {
    /// The stored session, or `None` if there is none with this id.
    fn load(&self, id: &str) -> Result<Option<Session>, StoreError>;

    /// Stores `session` if the stored version is still `expected_version`
    /// (0 for a session never stored), atomically.
    fn save(&self, session: &Session, expected_version: u64) -> Result<(), StoreError>;
}

/// Session ids become file names and keys: keep them plain.
pub fn check_id(id: &str) -> Result<(), StoreError> {
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|character| character.is_ascii_alphanumeric() || character == '-' || character == '_');
    if valid { Ok(()) } else { Err(StoreError::InvalidId { id: id.to_string() }) }
}
