//! Damage contained (issue 23): a read-only SQLite store is listed and
//! shown and refuses writes naming its file; a database left damaged by an
//! unclean shutdown is found by `quick_check` and refused for writing; a
//! corrupt run row is left out of `flowc runs list` with a note, and
//! `flowc runs show` of it is an error naming it, on SQLite and PostgreSQL.

use crate::store::{TODAY, flowc_at, fresh_database};
use crate::support::{stderr, stdout, temp_dir};
use crate::workflows::PAUSING;
use flowc::runtime::session::Session;
use flowc::store::sqlite::SqliteStore;
use flowc::store::{SessionStore, StoreError};
use std::path::Path;

/// A new waiting run of PAUSING in `store`: its id.
fn waiting_run(dir: &Path, store: &str) -> String {
    assert!(std::fs::write(dir.join("pausing.flow"), PAUSING).is_ok());
    let output = flowc_at(dir, store, TODAY, &["run", "pausing.flow"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output).strip_prefix("run ").and_then(|rest| rest.split(':').next()).unwrap_or_default().to_string()
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    assert!(std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).is_ok());
}

#[cfg(unix)]
#[test]
fn a_read_only_sqlite_store_is_listed_and_shown_and_refuses_writes_naming_its_file() {
    let dir = temp_dir("store-read-only");
    let folder = dir.join("db");
    let file = folder.join("flowc.db");
    let store = format!("sqlite:{}", file.display());
    let id = waiting_run(&dir, &store);
    set_mode(&file, 0o444);
    set_mode(&folder, 0o555);

    let listed = flowc_at(&dir, &store, TODAY, &["runs", "list"]);
    let shown = flowc_at(&dir, &store, TODAY, &["runs", "show", &id]);
    let sessions = flowc_at(&dir, &store, TODAY, &["sessions", "list"]);
    let cancelled = flowc_at(&dir, &store, TODAY, &["runs", "cancel", &id]);
    set_mode(&folder, 0o755);
    set_mode(&file, 0o644);

    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(stdout(&listed).starts_with(&format!("{id}\tpausing\twaiting")), "{}", stdout(&listed));
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert!(stdout(&shown).starts_with(&format!("run {id}: waiting")), "{}", stdout(&shown));
    assert_eq!(sessions.status.code(), Some(0), "{}", stderr(&sessions));
    assert_ne!(cancelled.status.code(), Some(0));
    assert!(
        stderr(&cancelled).contains(&format!("cannot write to the store {store}: it is read-only")),
        "{}",
        stderr(&cancelled)
    );
    let after = flowc_at(&dir, &store, TODAY, &["runs", "show", &id]);
    assert!(stdout(&after).starts_with(&format!("run {id}: waiting")), "nothing was written: {}", stdout(&after));
}

fn session(id: &str) -> Session {
    let mut session = Session::new(id, "hash");
    session.version = 1;
    // Enough text that the sessions fill pages beyond the first few.
    session.data.insert("note".into(), "x".repeat(2_000).into());
    session
}

/// A store whose database has pages in the middle of its file
/// overwritten, copied with its WAL as a process killed mid-work leaves
/// them: the path of the copy.
fn damaged_copy(dir: &Path) -> std::path::PathBuf {
    let original = dir.join("original/flowc.db");
    let store = SqliteStore::open(&original).unwrap_or_else(|error| panic!("{error}"));
    for index in 0..200 {
        assert!(store.save(&session(&format!("s{index}")), 0, &[]).is_ok());
    }
    let checkpoint = rusqlite::Connection::open(&original)
        .and_then(|connection| connection.query_row("PRAGMA wal_checkpoint", [], |_| Ok(())));
    assert!(checkpoint.is_ok(), "{checkpoint:?}");
    // One more turn after the checkpoint: the WAL holds it, as after a kill.
    assert!(store.save(&session("last"), 0, &[]).is_ok());
    let copy = dir.join("copy/flowc.db");
    assert!(std::fs::create_dir_all(dir.join("copy")).is_ok());
    assert!(std::fs::copy(&original, &copy).is_ok());
    assert!(std::fs::copy(dir.join("original/flowc.db-wal"), dir.join("copy/flowc.db-wal")).is_ok());
    drop(store);
    let mut bytes = std::fs::read(&copy).unwrap_or_default();
    let middle = bytes.len() / 2;
    let damaged = bytes.get_mut(middle..middle + 12_000).map(|pages| pages.fill(0x5a));
    assert!(damaged.is_some(), "the database is {} bytes", bytes.len());
    assert!(std::fs::write(&copy, bytes).is_ok());
    copy
}

#[test]
fn a_store_damaged_by_an_unclean_shutdown_is_checked_and_refused_for_writing() {
    let dir = temp_dir("store-damaged");
    let copy = damaged_copy(&dir);
    let refused = |store: &SqliteStore| match store.save(&session("new"), 0, &[]) {
        Err(StoreError::WriteRefused { location, reason }) => {
            assert_eq!(location, format!("sqlite:{}", copy.display()));
            assert!(reason.contains("damaged (SQLite's quick_check: "), "{reason}");
            assert!(reason.contains(&format!("sqlite3 {} .recover", copy.display())), "{reason}");
        }
        other => panic!("a write to the damaged store was not refused: {other:?}"),
    };
    let store = SqliteStore::open(&copy).unwrap_or_else(|error| panic!("{error}"));
    refused(&store);
    drop(store);
    // Closed cleanly, the WAL is gone: the damage found is remembered.
    assert!(!dir.join("copy/flowc.db-wal").exists());
    let store = SqliteStore::open(&copy).unwrap_or_else(|error| panic!("{error}"));
    refused(&store);
    drop(store);

    let store = format!("sqlite:{}", copy.display());
    let deleted = flowc_at(&dir, &store, TODAY, &["sessions", "delete", "s1"]);
    assert_ne!(deleted.status.code(), Some(0));
    assert!(
        stderr(&deleted).contains(&format!("cannot write to the store {store}: its database is damaged")),
        "{}",
        stderr(&deleted)
    );
}

#[test]
fn a_store_closed_cleanly_is_written_without_a_check() {
    let dir = temp_dir("store-clean");
    let path = dir.join("flowc.db");
    let store = SqliteStore::open(&path).unwrap_or_else(|error| panic!("{error}"));
    assert!(store.save(&session("a"), 0, &[]).is_ok());
    drop(store);
    let store = SqliteStore::open(&path).unwrap_or_else(|error| panic!("{error}"));
    assert!(store.save(&session("b"), 0, &[]).is_ok());
}

/// Two runs, the second's row made unreadable by `corrupt` (SQL taking the
/// run's id as its one parameter): the listing keeps the first and names
/// the second, and showing the second is an error naming it.
fn a_corrupt_run_row_is_left_out_and_named(dir: &Path, store: &str, corrupt: impl Fn(&str)) {
    let good = waiting_run(dir, store);
    let bad = waiting_run(dir, store);
    corrupt(&bad);
    let listed = flowc_at(dir, store, TODAY, &["runs", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_eq!(stdout(&listed).lines().count(), 1, "{}", stdout(&listed));
    assert!(stdout(&listed).starts_with(&good), "{}", stdout(&listed));
    assert!(
        stderr(&listed).contains(&format!("warning: left out of the list: `{bad}` is corrupt in the store")),
        "{}",
        stderr(&listed)
    );
    let shown = flowc_at(dir, store, TODAY, &["runs", "show", &bad]);
    assert_ne!(shown.status.code(), Some(0));
    assert!(stderr(&shown).contains(&format!("`{bad}` is corrupt in the store")), "{}", stderr(&shown));
    let json = flowc_at(dir, store, TODAY, &["runs", "list", "--json"]);
    assert!(stdout(&json).contains(&good) && !stdout(&json).contains(&bad), "{}", stdout(&json));
}

const CORRUPTION: &str = "UPDATE runs SET state = '{\"run\": 7}' WHERE id = ";

#[test]
fn a_corrupt_run_row_is_left_out_of_the_list_on_sqlite() {
    let dir = temp_dir("store-corrupt-run");
    let file = dir.join("flowc.db");
    let store = format!("sqlite:{}", file.display());
    a_corrupt_run_row_is_left_out_and_named(&dir, &store, |id| {
        let changed = rusqlite::Connection::open(&file)
            .and_then(|connection| connection.execute(&format!("{CORRUPTION}?1"), [id]));
        assert_eq!(changed.ok(), Some(1));
    });
}

#[test]
fn a_corrupt_run_row_is_left_out_of_the_list_on_postgres() {
    let Some(url) = fresh_database("corrupt_run") else {
        return;
    };
    let dir = temp_dir("store-corrupt-run-pg");
    a_corrupt_run_row_is_left_out_and_named(&dir, &url, |id| {
        let changed = postgres::Client::connect(&url, postgres::NoTls)
            .and_then(|mut client| client.execute(&format!("{CORRUPTION}$1"), &[&id]));
        assert_eq!(changed.ok(), Some(1));
    });
}

#[test]
fn a_corrupt_session_row_is_left_out_of_the_list_on_postgres() {
    let Some(url) = fresh_database("corrupt_session") else {
        return;
    };
    let store = flowc::store::postgres::PostgresStore::connect(&url).unwrap_or_else(|error| panic!("{error}"));
    for id in ["good", "bad"] {
        assert!(store.save(&session(id), 0, &[]).is_ok());
    }
    let changed = postgres::Client::connect(&url, postgres::NoTls)
        .and_then(|mut client| client.execute("UPDATE sessions SET turns = -1 WHERE id = 'bad'", &[]));
    assert_eq!(changed.ok(), Some(1));
    let (sessions, unreadable) = store.list_readable().unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(sessions.iter().map(|summary| summary.id.as_str()).collect::<Vec<_>>(), ["good"]);
    let named: Vec<String> = unreadable.iter().map(ToString::to_string).collect();
    assert_eq!(named, ["`bad` is corrupt in the store: its turn count -1 is out of range"]);
    assert!(store.list().is_err(), "the strict listing still refuses");
}

/// A role that may only read a PostgreSQL store (or a standby) lists and
/// shows its runs: connecting writes nothing once the schema is current.
#[test]
fn a_read_only_postgres_role_lists_and_shows_and_its_writes_fail_saying_why() {
    let Some(url) = fresh_database("read_only_role") else {
        return;
    };
    let dir = temp_dir("store-read-only-pg");
    let id = waiting_run(&dir, &url);
    let role = format!("flowc_reader_{}_{}", std::process::id(), crate::support::unique());
    let granted = postgres::Client::connect(&url, postgres::NoTls).and_then(|mut client| {
        client
            .batch_execute(&format!("CREATE ROLE {role} LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
    });
    assert!(granted.is_ok(), "{granted:?}");
    let reader = url.replacen("://flowc@", &format!("://{role}@"), 1);
    assert_ne!(reader, url, "the test server's user is `flowc`: {url}");

    let listed = flowc_at(&dir, &reader, TODAY, &["runs", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(stdout(&listed).starts_with(&format!("{id}\tpausing\twaiting")), "{}", stdout(&listed));
    let shown = flowc_at(&dir, &reader, TODAY, &["runs", "show", &id]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let cancelled = flowc_at(&dir, &reader, TODAY, &["runs", "cancel", &id]);
    assert_ne!(cancelled.status.code(), Some(0));
    assert!(stderr(&cancelled).contains("permission denied"), "{}", stderr(&cancelled));
}
