//! A refused save on PostgreSQL answers, in the same statement, with the
//! session the store holds (`SessionStore::save_or_stored`), so that a
//! turn started from a stale copy runs again on it without a load; and it
//! writes nothing, not even a line of transcript.
//!
//! Needs the server `scripts/test.sh` starts (`FLOWC_TEST_POSTGRES`);
//! without it the test says so and skips.

use crate::store::fresh_database;
use flowc::message::{Message, Role};
use flowc::runtime::session::Session;
use flowc::store::postgres::PostgresStore;
use flowc::store::{SessionStore, StoreError, Swap};

fn session(id: &str, version: u64, hotel: &str) -> Session {
    let mut session = Session::new(id, "hash");
    session.version = version;
    session.data.insert("hotel".into(), hotel.into());
    session
}

fn said(text: &str) -> Vec<Message> {
    vec![Message { role: Role::User, text: text.to_string() }]
}

#[test]
fn a_refused_save_on_postgres_answers_with_the_stored_session_and_writes_nothing() {
    let Some(url) = fresh_database("swap") else {
        return;
    };
    let store = PostgresStore::connect(&url).unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(store.save_or_stored(&session("s", 1, "Grand"), 0, &said("one")), Ok(Swap::Written)));
    assert!(matches!(store.save_or_stored(&session("s", 2, "Ritz"), 1, &said("two")), Ok(Swap::Written)));

    // A turn from version 1 again: refused, with version 2 as stored.
    match store.save_or_stored(&session("s", 2, "Savoy"), 1, &said("lost")) {
        Ok(Swap::Stale(stored)) => assert_eq!(*stored, session("s", 2, "Ritz")),
        other => panic!("a stale save: {other:?}"),
    }
    // A first save of an id already taken: the same.
    match store.save_or_stored(&session("s", 1, "Savoy"), 0, &said("lost")) {
        Ok(Swap::Stale(stored)) => assert_eq!(stored.version, 2),
        other => panic!("a second first save: {other:?}"),
    }
    // `save` says the same as a conflict naming the stored version.
    let refused = store.save(&session("s", 2, "Savoy"), 1, &said("lost"));
    assert!(matches!(refused, Err(StoreError::Conflict { stored: 2, expected: 1, .. })), "{refused:?}");
    // Nothing of the refused saves was kept.
    assert_eq!(store.load("s").ok().flatten(), Some(session("s", 2, "Ritz")));
    assert_eq!(store.transcript("s").ok(), Some([said("one"), said("two")].concat()));

    // A session deleted meanwhile has nothing to answer with.
    assert_eq!(store.delete("s").ok(), Some(true));
    let gone = store.save_or_stored(&session("s", 3, "Ritz"), 2, &said("late"));
    assert!(matches!(gone, Err(StoreError::Conflict { stored: 0, expected: 2, .. })), "{gone:?}");
}
