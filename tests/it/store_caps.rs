//! Creations under a per-tenant cap (`SessionStore::create_session`,
//! `RunStore::create_run`): many creations at once, from threads on two
//! stores opened on one database (as two processes would), at a cap of N
//! leave exactly N, on SQLite and on PostgreSQL; another tenant's records
//! are not counted, and runs that ended free their place.
//!
//! The PostgreSQL tests need the server `scripts/test.sh` starts
//! (`FLOWC_TEST_POSTGRES`); without it they say so and skip.

use crate::store::fresh_database;
use crate::support::temp_dir;
use flowc::runtime::clock::{FixedClock, SeededIds};
use flowc::runtime::session::Session;
use flowc::runtime::tools::ToolEnv;
use flowc::runtime::workflow::RunStatus;
use flowc::store::{Cap, Created, Store, StoreLocation, StoredRun};
use std::sync::{Arc, Barrier};

const CAP: u64 = 5;
const CREATORS: usize = 24;
const WORKFLOW: &str = "schema { sent: int }\nflow digest {\n  auto step send { set sent = 1 }\n}\n";

fn open(location: &str) -> Arc<dyn Store> {
    let location = StoreLocation::parse(location).unwrap_or_else(|error| panic!("{error}"));
    Arc::from(flowc::store::open(&location).unwrap_or_else(|error| panic!("{error}")))
}

fn session(id: &str) -> Session {
    let mut session = Session::new(id, "hash");
    session.version = 1;
    session
}

/// A new run under `id`, running (not ended).
fn run(id: &str) -> StoredRun {
    let file = flowc::source::SourceFile::new("digest.flow", WORKFLOW);
    let program = flowc::pipeline::compile(&file).ir;
    let clock = FixedClock::parse("2026-11-30T08:00:00Z").unwrap_or_else(|error| panic!("{error}"));
    let tool_env = ToolEnv { base_dir: ".".into(), clock: Arc::new(clock), ids: Arc::new(SeededIds::new(1)) };
    let mut run = flowc::runtime::workflow::start(
        &program,
        &tool_env,
        flowc::ir::FlowId::from_index(0),
        &serde_json::Map::new(),
        Default::default(),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    run.run = id.to_string();
    StoredRun { run, program: "/p/digest.flow".into(), program_hash: "h".into(), version: 1, due_at: None }
}

/// `CREATORS` creations at once (`create(store, index)`), alternating
/// between the stores: how many were stored.
fn race(stores: &[Arc<dyn Store>], create: fn(&dyn Store, usize) -> Created) -> usize {
    let start = Arc::new(Barrier::new(CREATORS));
    let creators: Vec<_> = (0..CREATORS)
        .map(|index| {
            let store = Arc::clone(&stores[index % stores.len()]);
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                start.wait();
                create(store.as_ref(), index)
            })
        })
        .collect();
    let created: Vec<Created> =
        creators.into_iter().map(|creator| creator.join().unwrap_or_else(|_| panic!("a creator panicked"))).collect();
    for outcome in &created {
        if let Created::Full { kept } = outcome {
            assert!(*kept >= CAP, "refused below the cap: {outcome:?}");
        }
    }
    created.iter().filter(|outcome| **outcome == Created::Stored).count()
}

fn create_session(store: &dyn Store, index: usize) -> Created {
    store
        .create_session(&session(&format!("acme_booking_{index}")), &Cap { prefix: "acme_", max: CAP })
        .unwrap_or_else(|error| panic!("{error}"))
}

fn create_run(store: &dyn Store, index: usize) -> Created {
    store
        .create_run(&run(&format!("acme_digest_{index}")), None, &Cap { prefix: "acme_", max: CAP })
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The cap holds for sessions and runs on the store at `location`, opened
/// twice.
fn caps_hold(location: &str) {
    let stores = [open(location), open(location)];
    // Another tenant's, and a tenant whose name starts like this one's.
    for other in ["globex_booking_1", "acmeb_booking_1"] {
        assert!(stores[0].save(&session(other), 0, &[]).is_ok());
        assert!(stores[0].save_run(&run(&other.replace("booking", "digest")), 0, None).is_ok());
    }
    assert_eq!(race(&stores, create_session), CAP as usize, "sessions created at a cap of {CAP}");
    assert_eq!(stores[1].count_sessions("acme_").ok(), Some(CAP));
    assert_eq!(race(&stores, create_run), CAP as usize, "runs created at a cap of {CAP}");
    assert_eq!(stores[1].count_active_runs("acme_").ok(), Some(CAP));

    // An id already taken is a conflict, not a place used.
    let taken = stores[0].create_session(&session("globex_booking_1"), &Cap { prefix: "globex_", max: CAP });
    assert!(matches!(taken, Err(flowc::store::StoreError::Conflict { .. })), "{taken:?}");
    // A run that ended frees its place.
    let Some(mut ended) =
        stores[0].load_run("acme_digest_0").ok().flatten().or_else(|| {
            (0..CREATORS).find_map(|index| stores[0].load_run(&format!("acme_digest_{index}")).ok().flatten())
        })
    else {
        panic!("a run created");
    };
    let expected = ended.version;
    ended.run.status = RunStatus::Completed;
    ended.version += 1;
    assert!(stores[0].save_run(&ended, expected, None).is_ok());
    assert_eq!(
        stores[1].create_run(&run("acme_digest_late"), None, &Cap { prefix: "acme_", max: CAP }).ok(),
        Some(Created::Stored)
    );
    assert_eq!(
        stores[1].create_run(&run("acme_digest_later"), None, &Cap { prefix: "acme_", max: CAP }).ok(),
        Some(Created::Full { kept: CAP })
    );
}

#[test]
fn creations_racing_at_a_cap_on_sqlite_leave_exactly_the_cap() {
    let dir = temp_dir("store_caps");
    caps_hold(&format!("sqlite:{}", dir.join("flowc.db").display()));
}

#[test]
fn creations_racing_at_a_cap_on_postgres_leave_exactly_the_cap() {
    let Some(url) = fresh_database("caps_race") else {
        return;
    };
    // Pools as large as the creators: every creation in flight at once.
    caps_hold(&format!("{url}?pool_size={CREATORS}"));
}
