//! The PostgreSQL store's pool of connections: racing writers of one
//! session, each on its own connection, lose no update (the turn's
//! compare-and-swap is one statement, checked by PostgreSQL on the newest
//! row), the pool never opens more than `pool_size` connections, and a
//! connection the server closed is replaced, not lent again.
//!
//! Needs the server `scripts/test.sh` starts (`FLOWC_TEST_POSTGRES`);
//! without it the tests say so and skip.

use crate::store::fresh_database;
use flowc::message::{Message, Role};
use flowc::store::postgres::PostgresStore;
use flowc::store::{SessionStore, StoreError};
use std::sync::Arc;

/// Connections to `url`'s database other than the asker's.
fn connections(url: &str) -> i64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|error| panic!("{error}"));
    client
        .query_one(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .map(|row| row.get(0))
        .unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn racing_writers_on_a_pool_lose_no_update_and_open_at_most_pool_size_connections() {
    let Some(url) = fresh_database("pool_race") else {
        return;
    };
    let store =
        Arc::new(PostgresStore::connect(&format!("{url}?pool_size=3")).unwrap_or_else(|error| panic!("{error}")));
    let first = flowc::runtime::session::Session::new("s", "hash");
    let mut saved = first.clone();
    saved.version = 1;
    assert!(store.save(&saved, 0, &[]).is_ok());
    let (writers, each) = (8, 25);
    let handles: Vec<_> = (0..writers)
        .map(|writer| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut conflicts = 0;
                for turn in 0..each {
                    loop {
                        let Ok(Some(mut session)) = store.load("s") else {
                            panic!("the session is there");
                        };
                        let expected = session.version;
                        session.version += 1;
                        session.turns += 1;
                        let said = [Message { role: Role::User, text: format!("{writer}:{turn}") }];
                        match store.save(&session, expected, &said) {
                            Ok(()) => break,
                            Err(StoreError::Conflict { stored, expected: asked, .. }) => {
                                assert!(stored > asked, "a conflict names a newer stored version");
                                conflicts += 1;
                            }
                            Err(error) => panic!("{error}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: usize = handles.into_iter().map(|handle| handle.join().unwrap_or_else(|_| panic!("a writer"))).sum();
    let Ok(Some(last)) = store.load("s") else {
        panic!("the session is there");
    };
    let total = writers * each;
    assert_eq!(last.version, 1 + total as u64, "every save won once ({conflicts} conflicts retried)");
    assert_eq!(last.turns as usize, total);
    let lines = store.transcript("s").unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(lines.len(), total, "one line per won save, none from a lost one");
    // Each writer's lines in its own order: the transcript is appended
    // only by the save that won, at the place its version gave it.
    for writer in 0..writers {
        let turns: Vec<usize> = lines
            .iter()
            .filter_map(|line| line.text.split_once(':'))
            .filter(|(who, _)| *who == writer.to_string())
            .filter_map(|(_, turn)| turn.parse().ok())
            .collect();
        assert_eq!(turns, (0..each).collect::<Vec<_>>());
    }
    assert!(connections(&url) <= 3, "at most pool_size connections are open");
}

#[test]
fn a_connection_the_server_closed_is_replaced_not_reused() {
    let Some(url) = fresh_database("pool_killed") else {
        return;
    };
    let store = PostgresStore::connect(&format!("{url}?pool_size=1")).unwrap_or_else(|error| panic!("{error}"));
    let mut session = flowc::runtime::session::Session::new("s", "hash");
    session.version = 1;
    assert!(store.save(&session, 0, &[]).is_ok());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|error| panic!("{error}"));
    let killed: i64 = admin
        .query_one(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .map(|row| row.get(0))
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(killed, 1, "the store's one connection");
    // The first call finds its connection closed and says so; the pool
    // then drops it, and the next call gets a fresh one.
    let broken = store.load("s");
    assert!(matches!(broken, Err(StoreError::Io { .. })), "{broken:?}");
    assert_eq!(store.load("s").ok().flatten().map(|session| session.version), Some(1));
    session.version = 2;
    assert!(store.save(&session, 1, &[]).is_ok());
}
