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
    kept: Mutex<Kept>,
    capacity: usize,
}

/// The kept sessions, each in a slot of its own, and the clock's hand: a
/// full cache drops the first session, from the hand on, that no turn
/// used since the hand last passed it (CLOCK, the second-chance
/// approximation of least recently used), so a conversation that goes on
/// stays kept. Dropping whichever entry a hash map listed first, as
/// before, made two conversations hashed low evict each other on every
/// turn once the cache was full: each turn of theirs loaded its session
/// from the store, on the async worker.
#[derive(Default)]
struct Kept {
    slots: Vec<Slot>,
    by_id: HashMap<String, usize>,
    hand: usize,
}

struct Slot {
    session: Arc<Session>,
    used: bool,
}

impl Kept {
    /// The slot of the session the clock drops: one not used since the
    /// hand last passed it (a whole turn of the hand clears every mark, so
    /// this ends within two).
    fn victim(&mut self) -> usize {
        loop {
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
            let at = self.hand;
            self.hand += 1;
            match self.slots.get_mut(at) {
                Some(slot) if slot.used => slot.used = false,
                _ => return at,
            }
        }
    }
}

impl SessionCache {
    /// A cache of at most `capacity` sessions; 0 keeps none.
    pub fn new(capacity: usize) -> SessionCache {
        SessionCache { kept: Mutex::new(Kept::default()), capacity }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // The slots and their index are whole after any panic (each change
        // is made in one step under the lock), so a poisoned lock is taken
        // back rather than failing every turn.
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session as this server last saw it, if it kept it.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut kept = self.lock();
        let at = *kept.by_id.get(id)?;
        let slot = kept.slots.get_mut(at)?;
        slot.used = true;
        Some(Arc::clone(&slot.session))
    }

    /// Keeps `session`, just saved or loaded, in place of an older copy;
    /// a newer copy kept already stays (two turns of one session awaiting
    /// their saves on async workers may come back in either order). A full
    /// cache drops the session the clock points at ([`Kept`]).
    pub fn put(&self, session: Arc<Session>) {
        if self.capacity == 0 {
            return;
        }
        let mut kept = self.lock();
        let kept = &mut *kept;
        if let Some(slot) = kept.by_id.get(&session.id).copied().and_then(|at| kept.slots.get_mut(at)) {
            if slot.session.version <= session.version {
                slot.session = session;
            }
            slot.used = true;
            return;
        }
        let id = session.id.clone();
        let slot = Slot { session, used: true };
        if kept.slots.len() < self.capacity {
            kept.by_id.insert(id, kept.slots.len());
            kept.slots.push(slot);
            return;
        }
        let at = kept.victim();
        if let Some(dropped) = kept.slots.get_mut(at).map(|old| std::mem::replace(old, slot)) {
            kept.by_id.remove(&dropped.session.id);
            kept.by_id.insert(id, at);
        }
    }

    /// Drops the session: deleted, or found stale.
    pub fn forget(&self, id: &str) {
        let mut kept = self.lock();
        let Some(at) = kept.by_id.remove(id) else {
            return;
        };
        if at < kept.slots.len() {
            kept.slots.swap_remove(at);
        }
        // The last slot moved into the freed one.
        if let Some(moved) = kept.slots.get(at).map(|slot| slot.session.id.clone()) {
            kept.by_id.insert(moved, at);
        }
    }

    /// How many sessions are kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().slots.len()
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
    fn conversations_that_go_on_stay_kept_in_a_full_cache() {
        let cache = SessionCache::new(64);
        for index in 0..64 {
            cache.put(session(&format!("old{index}"), 1));
        }
        // Ten conversations take turns, each a get then a put of the next
        // version, while new sessions keep arriving.
        let mut missed = 0;
        for turn in 1..50u64 {
            for conversation in 0..10 {
                let id = format!("live{conversation}");
                if cache.get(&id).is_none() {
                    missed += 1;
                }
                cache.put(session(&id, turn));
            }
            cache.put(session(&format!("new{turn}"), 1));
        }
        // Each missed only its first turn, before it was ever kept.
        assert_eq!(missed, 10);
        assert_eq!(cache.len(), 64);
    }

    #[test]
    fn forgetting_keeps_the_others_findable() {
        let cache = SessionCache::new(4);
        for id in ["a", "b", "c", "d"] {
            cache.put(session(id, 1));
        }
        cache.forget("a");
        cache.forget("zz");
        assert_eq!(cache.len(), 3);
        for id in ["b", "c", "d"] {
            assert_eq!(cache.get(id).map(|kept| kept.id.clone()).as_deref(), Some(id));
        }
        cache.put(session("e", 1));
        cache.put(session("f", 1));
        assert_eq!(cache.len(), 4);
        assert!(cache.get("f").is_some());
    }

    #[test]
    fn a_cache_of_no_capacity_keeps_nothing() {
        let cache = SessionCache::new(0);
        cache.put(session("a", 1));
        assert!(cache.get("a").is_none());
    }
}
