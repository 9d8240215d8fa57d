//! A program edited so that live sessions cannot follow: each goes on with
//! the version it started on, on the server that compiled that version and
//! on any other process sharing the store (which compiles it again from the
//! store's copy); new sessions take the edit; `GET /v1/programs` and the
//! server's stderr say which older versions still serve and why. A session
//! whose version is nowhere (saved before versions were recorded) is a 409
//! naming both reasons. A waiting run resumed after a restart and an edit
//! goes on with its own version too. The same across two server processes
//! on PostgreSQL, and the PostgreSQL store's version table itself.

use super::processes::{Server, fresh_database};
use super::{Client, code, options, start};
use crate::support::{root, temp_dir, unique};
use flowc::serve::auth::Auth;
use flowc::store::StoreLocation;
use serde_json::Value;
use std::path::{Path, PathBuf};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// A copy of the booking example and its tools in `dir`: its file.
fn booking_copy(dir: &Path) -> PathBuf {
    example_copy(dir, "booking.flow")
}

/// A copy of the example `name` and the examples' tools in `dir`: its file.
fn example_copy(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join(name);
    std::fs::copy(root().join("flows").join(name), &file).expect("a copy");
    std::fs::create_dir_all(dir.join("tools")).expect("a tools folder");
    for entry in std::fs::read_dir(root().join("flows/tools")).expect("the example's tools") {
        let path = entry.expect("a tool").path();
        std::fs::copy(&path, dir.join("tools").join(path.file_name().expect("a name"))).expect("a tool copied");
    }
    file
}

/// Edits the booking program so that its `confirm` step is gone (renamed):
/// a session standing there cannot be adopted.
fn remove_the_confirm_step(file: &Path) {
    let text = std::fs::read_to_string(file).expect("the program");
    let edited = text.replace("step confirm {", "step check {");
    assert_ne!(edited, text);
    std::fs::write(file, edited).expect("an edit");
}

/// A booking session held to its `confirm` step.
fn at_confirm(client: &Client) -> String {
    at_confirm_as(client, "booking")
}

/// A session of the booking program, started under `name` (its file's
/// name or its agent's), held to its `confirm` step.
fn at_confirm_as(client: &Client, name: &str) -> String {
    let (status, created) = client.post("/v1/sessions", &serde_json::json!({ "program": name }));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("an id").to_string();
    let (status, turn) = client.say(&id, BOOK);
    assert_eq!((status, turn["step"].as_str()), (200, Some("confirm")), "{turn}");
    id
}

/// The booking program's line of `GET /v1/programs`.
fn booking_info(client: &Client) -> Value {
    let (status, programs) = client.get("/v1/programs");
    assert_eq!(status, 200, "{programs}");
    programs["programs"]
        .as_array()
        .and_then(|programs| programs.iter().find(|program| program["name"] == "booking"))
        .cloned()
        .unwrap_or_else(|| panic!("no booking program in {programs}"))
}

/// "yes" at `confirm` books on the version with that step.
fn books(client: &Client, id: &str) {
    let (status, turn) = client.say(id, "yes");
    assert_eq!((status, turn["stopped_reason"].as_str()), (200, Some("flow_complete")), "{turn}");
    assert!(turn["reply"].as_str().is_some_and(|reply| reply.starts_with("Booked!")), "{turn}");
}

#[test]
fn an_incompatible_edit_leaves_old_sessions_on_their_version_in_every_process_sharing_the_store() {
    let dir = temp_dir(&format!("serve-versions-{}", unique()));
    let file = booking_copy(&dir);
    let database = dir.join("flowc.db");
    let mut first_options = options(Auth::default());
    first_options.files = vec![file.clone()];
    first_options.store = StoreLocation::Sqlite(database.clone());
    let first = start(&first_options);
    let one = Client::new(first.addr, None);
    let old_hash = booking_info(&one)["hash"].as_str().expect("a hash").to_string();
    let here = at_confirm(&one);
    // Started under the agent's name: the version is found by the file's.
    let elsewhere = at_confirm_as(&one, "Concierge");
    let nowhere = at_confirm(&one);

    remove_the_confirm_step(&file);
    books(&one, &here);
    let fresh = one.new_session();
    let (status, turn) = one.say(&fresh, BOOK);
    assert_eq!((status, turn["step"].as_str()), (200, Some("check")), "a new session takes the edit: {turn}");
    let info = booking_info(&one);
    assert_ne!(info["hash"].as_str(), Some(old_hash.as_str()), "{info}");
    assert_eq!(info["not_adopted"], serde_json::json!(["at the step `booking.confirm`, no longer in the program"]));
    let older = &info["older_versions"];
    assert_eq!(older.as_array().map(Vec::len), Some(1), "{info}");
    assert_eq!((older[0]["hash"].as_str(), older[0]["turns"].as_u64()), (Some(old_hash.as_str()), Some(1)), "{info}");
    assert_eq!(older[0]["from_store"], false, "this server compiled it from its file: {info}");
    let reason = older[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("confirm"), "the reason names the step that is gone: {info}");
    let (_, document) = one.get("/openapi.json");
    let (_, programs) = one.get("/v1/programs");
    let schema = serde_json::json!({ "$ref": "#/components/schemas/Programs" });
    assert_eq!(super::schema::problems(&document, &schema, &programs), Vec::<String>::new(), "{programs}");

    // A second process, started after the edit, never compiled the old
    // version: it has it from the store.
    let store = format!("sqlite:{}", database.display());
    let mut second = Server::start(&dir, &["booking.flow", "--store", &store], &[]);
    let other = Client::new(second.addr, None);
    books(&other, &elsewhere);
    let info = booking_info(&other);
    assert_eq!(
        (info["older_versions"][0]["hash"].as_str(), &info["older_versions"][0]["from_store"]),
        (Some(old_hash.as_str()), &Value::Bool(true)),
        "{info}"
    );
    // Its stderr, whole once it has exited.
    second.child.kill().expect("the second server stops");
    let (_, said) = second.exit();
    assert!(
        said.contains(&format!("cannot take the sessions of version {old_hash}")) && said.contains("confirm"),
        "{said}"
    );

    // A session whose version is in no process and not in the store.
    let connection = rusqlite::Connection::open(&database).expect("the store");
    let removed = connection.execute("DELETE FROM program_versions WHERE hash = ?1", [&old_hash]).expect("a delete");
    assert_eq!(removed, 1, "the old version was recorded once");
    let mut third_options = options(Auth::default());
    third_options.files = vec![file.clone()];
    third_options.store = StoreLocation::Sqlite(database.clone());
    let third = start(&third_options);
    let (status, refused) = Client::new(third.addr, None).say(&nowhere, "yes");
    assert_eq!((status, code(&refused)), (409, "incompatible_program"), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("confirm") && message.contains(&old_hash), "{message}");
    assert!(message.contains("is not in the store"), "{message}");
}

#[test]
fn a_waiting_run_resumes_after_a_restart_and_an_edit_on_the_version_it_started_on() {
    let dir = temp_dir(&format!("serve-versions-run-{}", unique()));
    let file = example_copy(&dir, "onboarding.flow");
    let mut server_options = options(Auth::default());
    server_options.files = vec![file.clone()];
    server_options.store = StoreLocation::Sqlite(dir.join("flowc.db"));
    let first = start(&server_options);
    let data =
        serde_json::json!({ "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] });
    let (status, run) =
        Client::new(first.addr, None).post("/v1/runs", &serde_json::json!({ "program": "onboarding", "data": data }));
    assert_eq!((status, run["status"].as_str()), (201, Some("waiting")), "{run}");
    let id = run["run"].as_str().expect("a run id").to_string();
    drop(first);

    let text = std::fs::read_to_string(&file).expect("the program");
    let edited = text.replace("wait 1d", "wait 2d");
    assert_ne!(edited, text);
    std::fs::write(&file, edited).expect("an edit");
    let second = start(&server_options);
    let client = Client::new(second.addr, None);
    let (status, resumed) = client.post(&format!("/v1/runs/{id}/resume"), &serde_json::json!({ "now": true }));
    assert_eq!((status, resumed["status"].as_str()), (200, Some("completed")), "{resumed}");
}

#[test]
fn two_servers_on_one_postgres_serve_the_version_a_session_started_on() {
    let Some(url) = fresh_database("serve_versions") else {
        return;
    };
    let dir = temp_dir(&format!("serve-versions-pg-{}", unique()));
    booking_copy(&dir);
    let args = ["booking.flow", "--store", url.as_str()];
    let first = Server::start(&dir, &args, &[]);
    let one = Client::new(first.addr, None);
    let here = at_confirm(&one);
    let elsewhere = at_confirm(&one);
    remove_the_confirm_step(&dir.join("booking.flow"));
    let second = Server::start(&dir, &args, &[]);
    let other = Client::new(second.addr, None);
    books(&other, &elsewhere);
    books(&one, &here);
    let fresh = other.new_session();
    let (status, turn) = one.say(&fresh, BOOK);
    assert_eq!((status, turn["step"].as_str()), (200, Some("check")), "{turn}");
    assert_eq!(booking_info(&other)["older_versions"][0]["from_store"], true);
    assert_eq!(booking_info(&one)["older_versions"][0]["from_store"], false);
}

#[test]
fn the_postgres_store_records_a_version_once_and_reads_it_by_program_and_hash() {
    let Some(url) = fresh_database("store_versions") else {
        return;
    };
    let store = flowc::store::postgres::PostgresStore::connect(&url).expect("the store");
    flowc::store::versions::check_store(&store);
}
