//! The sessions this server last saved, kept so that the next turn of a
//! conversation need not load (and decode) its session from the store: on
//! PostgreSQL that is a round trip, on SQLite a read and a JSON parse.
//!
//! The cache is never trusted on its own: a turn that starts from a cached
//! session saves with the compare-and-swap on the cached version, so a
//! session another process (or `flowc run --session`) changed meanwhile
//! loses the swap, and the turn is run again once on the stored session
//! ([`super::turn`]). A cached copy is therefore only ever a guess that is
//! usually right; the store stays the one truth.

use crate::runtime::session::Session;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// How many sessions a server keeps when nothing else is said: a booking
/// session is one to a few KiB, so the cache stays within some MiB however
/// many conversations the store holds.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Sessions by id, at the version this server last saved or loaded.
pub(crate) struct SessionCache {
    entries: Mutex<HashMap<String, Arc<Session>>>,
    capacity: usize,
}

impl SessionCache {
    /// A cache of at most `capacity` sessions; 0 keeps none.
    pub fn new(capacity: usize) -> SessionCache {
        SessionCache { entries: Mutex::new(HashMap::new()), capacity }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        // The map is whole after any panic (an insert or a remove), so a
        // poisoned lock is taken back rather than failing every turn.
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session as this server last saw it, if it kept it.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().get(id).cloned()
    }

    /// Keeps `session`, just saved or loaded, in place of an older copy;
    /// a newer copy kept already stays (two turns of one session awaiting
    /// their saves on async workers may come back in either order). A full
    /// cache drops some other session first: which one does not matter
    /// for correctness (a dropped one is loaded again), and a hash map's
    /// first entry costs nothing to find, unlike the least recently used
    /// one.
    pub fn put(&self, session: Arc<Session>) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries.get(&session.id).is_some_and(|kept| kept.version > session.version) {
            return;
        }
        if entries.len() >= self.capacity
            && !entries.contains_key(&session.id)
            && let Some(victim) = entries.keys().next().cloned()
        {
            entries.remove(&victim);
        }
        entries.insert(session.id.clone(), session);
    }

    /// Drops the session: deleted, or found stale.
    pub fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// How many sessions are kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, version: u64) -> Arc<Session> {
        let mut session = Session::new(id, "hash");
        session.version = version;
        Arc::new(session)
    }

    #[test]
    fn keeps_the_latest_version_and_forgets_on_request() {
        let cache = SessionCache::new(8);
        cache.put(session("a", 1));
        cache.put(session("a", 2));
        assert_eq!(cache.get("a").map(|kept| kept.version), Some(2));
        cache.forget("a");
        assert!(cache.get("a").is_none());
    }

    #[test]
    fn an_older_copy_put_late_does_not_replace_a_newer_one() {
        let cache = SessionCache::new(8);
        cache.put(session("a", 3));
        cache.put(session("a", 2));
        assert_eq!(cache.get("a").map(|kept| kept.version), Some(3));
    }

    #[test]
    fn never_holds_more_than_its_capacity() {
        let cache = SessionCache::new(3);
        for index in 0..10 {
            cache.put(session(&format!("s{index}"), 1));
        }
        assert_eq!(cache.len(), 3);
        // The session just put is always kept.
        assert!(cache.get("s9").is_some());
        // Replacing a kept session evicts nothing.
        cache.put(session("s9", 2));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn a_cache_of_no_capacity_keeps_nothing() {
        let cache = SessionCache::new(0);
        cache.put(session("a", 1));
        assert!(cache.get("a").is_none());
    }
}
