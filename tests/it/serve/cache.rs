//! The sessions a server keeps between turns: two servers on one SQLite
//! store hold one conversation alternately, each turn starting from a
//! copy the other server has made stale, and a session changed from
//! outside the server (the store written directly, as `flowc run
//! --session` would) is read again rather than overwritten.

use super::{Client, code, options, start};
use flowc::serve::auth::Auth;
use flowc::store::{SessionStore, StoreLocation};
use serde_json::{Value, json};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

fn metric(client: &Client, name: &str) -> u64 {
    let (_, text) = client.get("/metrics");
    let text = text.as_str().unwrap_or_default().to_string();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn two_servers_on_one_sqlite_store_hold_one_conversation_alternately() {
    let first_options = options(Auth::default());
    let mut second_options = options(Auth::default());
    second_options.store = first_options.store.clone();
    hold_alternately(&first_options, &second_options);
}

/// On PostgreSQL the refused save answers with the stored session, on
/// which the turn runs again without loading it: the same conversation
/// holds.
#[test]
fn two_servers_on_one_postgres_hold_one_conversation_alternately() {
    let Some(url) = super::processes::fresh_database("serve_alternate") else {
        return;
    };
    let mut first_options = options(Auth::default());
    first_options.store = StoreLocation::Postgres(url);
    let mut second_options = options(Auth::default());
    second_options.store = first_options.store.clone();
    hold_alternately(&first_options, &second_options);
}

/// Two servers on one store, each turn of one conversation on the other
/// server than the turn before.
fn hold_alternately(first_options: &flowc::serve::ServeOptions, second_options: &flowc::serve::ServeOptions) {
    let first = start(first_options);
    let second = start(second_options);
    let one = Client::new(first.addr, None);
    let other = Client::new(second.addr, None);

    // The first server keeps the new session; the second's turn makes
    // that copy stale.
    let id = one.new_session();
    let (status, turn) = other.say(&id, BOOK);
    assert_eq!((status, turn["step"].as_str()), (200, Some("confirm")), "{turn}");
    // A client naming the version it read is still refused when it is
    // not the stored one, whatever this server kept.
    let (status, stale) = one.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "yes", "version": 1 }));
    assert_eq!((status, code(&stale)), (409, "version_conflict"), "{stale}");
    // Without a version: the turn starts from the stale copy, loses the
    // compare-and-swap, and runs again on the stored session.
    let (status, turn) = one.say(&id, "yes");
    assert_eq!((status, turn["stopped_reason"].as_str()), (200, Some("flow_complete")), "{turn}");
    let (_, shown) = other.get(&format!("/v1/sessions/{id}"));
    assert_eq!((shown["turns"].as_u64(), shown["history"].as_array().map(Vec::len)), (Some(2), Some(4)), "{shown}");
    assert_eq!(shown["data"]["confirmed"], Value::Bool(true), "{shown}");

    // The conversation goes on, alternating again: each
    // server's copy is stale at every turn it serves.
    let mut stale_before = metric(&one, "flowc_stale_sessions_total") + metric(&other, "flowc_stale_sessions_total");
    assert!(stale_before >= 1, "the first server ran a turn again");
    for (client, text) in [(&other, BOOK), (&one, "yes")] {
        let (status, turn) = client.say(&id, text);
        assert_eq!(status, 200, "{text}: {turn}");
        let stale = metric(&one, "flowc_stale_sessions_total") + metric(&other, "flowc_stale_sessions_total");
        assert_eq!(stale, stale_before + 1, "{text}: the serving server's copy was stale");
        stale_before = stale;
    }
    let (_, shown) = one.get(&format!("/v1/sessions/{id}"));
    assert_eq!(shown["turns"].as_u64(), Some(4), "{shown}");
}

#[test]
fn a_session_saved_from_outside_the_server_is_read_again_not_overwritten() {
    let options = options(Auth::default());
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    let (status, _) = client.say(&id, BOOK);
    assert_eq!(status, 200);

    // Another process's turn, as `flowc run --session` would save it: the
    // guests changed, the version moved on.
    let StoreLocation::Sqlite(path) = &options.store else { panic!("a SQLite store") };
    let store = flowc::store::sqlite::SqliteStore::open(path).expect("the store opens");
    let mut session = store.load(&id).expect("loads").expect("the session");
    let expected = session.version;
    session.version += 1;
    session.data.insert("guests".to_string(), json!(3));
    store.save(&session, expected, &[]).expect("saved from outside");
    drop(store);

    // The turn goes on from the stored session: the "yes" was asked about
    // 2 guests, so with 3 it is asked again (a copy kept from before would
    // have booked for 2).
    let (status, turn) = client.say(&id, "yes");
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["reply"], "Shall I book Grand Hotel on 2026-12-04 for 3 guests?", "{turn}");
    let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(shown["data"]["guests"], json!(3), "the turn went on from the stored session: {shown}");
    assert_eq!(shown["version"].as_u64(), Some(expected + 2), "{shown}");
    assert_eq!(metric(&client, "flowc_stale_sessions_total"), 1);
}

#[test]
fn a_deleted_session_is_not_served_from_what_the_server_kept() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    assert_eq!(client.say(&id, BOOK).0, 200);
    let (status, _) = client.send(reqwest::Method::DELETE, &format!("/v1/sessions/{id}"), None);
    assert_eq!(status, 204);
    let (status, gone) = client.say(&id, "yes");
    assert_eq!((status, code(&gone)), (404, "session_not_found"), "{gone}");
}
