//! The PostgreSQL store over TLS, against a real server: `verify-full` with
//! the test CA stores a conversation and reads it back, `require` is really
//! encrypted, and each way of failing (no CA, a host the certificate does
//! not name, a server without TLS, a missing CA file, a TLS-only user asked
//! for `disable`) is one line that names the store, password hidden, and
//! says what to do.
//!
//! `scripts/test.sh` starts the server with a throwaway CA, sets
//! `FLOWC_TEST_POSTGRES` and `FLOWC_TEST_POSTGRES_CA` (the CA's PEM file),
//! and creates the role `flowc_tls`, which its pg_hba.conf admits only over
//! TLS, and `flowc_scram` (password `flowc-test`), which logs in with SCRAM
//! over TLS. Without `FLOWC_TEST_POSTGRES` the server tests say so and skip; with
//! it but no CA they fail, since they would prove nothing.

use crate::support::{flowc_env, root, stderr, stdout, temp_dir, unique};
use flowc::runtime::session::Session;
use flowc::store::postgres::PostgresStore;
use flowc::store::{SessionStore, StoreError};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// The test server: its `host:port` and the CA that signed its certificate.
struct TlsServer {
    address: String,
    ca: String,
}

impl TlsServer {
    /// The test server, or `None` (with the reason said) when there is none.
    fn get(test: &str) -> Option<TlsServer> {
        let Ok(url) = std::env::var("FLOWC_TEST_POSTGRES") else {
            eprintln!(
                "skipped {test}: FLOWC_TEST_POSTGRES is not set (scripts/test.sh starts a PostgreSQL and sets it)"
            );
            return None;
        };
        let Ok(ca) = std::env::var("FLOWC_TEST_POSTGRES_CA") else {
            panic!("FLOWC_TEST_POSTGRES is set but FLOWC_TEST_POSTGRES_CA is not: scripts/test.sh sets both");
        };
        let address = url
            .split_once('@')
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(address, _)| address.to_string())
            .unwrap_or_else(|| panic!("FLOWC_TEST_POSTGRES={url} is not postgres://USER@HOST:PORT/DB"));
        Some(TlsServer { address, ca })
    }

    fn port(&self) -> &str {
        self.address.rsplit_once(':').map_or("5432", |(_, port)| port)
    }

    /// A fresh database owned by `flowc_tls`, made by the superuser.
    fn database(&self, test: &str) -> String {
        self.database_of("flowc_tls", test)
    }

    fn database_of(&self, owner: &str, test: &str) -> String {
        let name = format!("flowc_tls_{test}_{}_{}", std::process::id(), unique());
        let admin = format!("postgres://flowc@{}/postgres", self.address);
        let mut client = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|error| panic!("{admin} does not connect: {error}"));
        if let Err(error) = client.batch_execute(&format!("CREATE DATABASE {name} OWNER {owner}")) {
            panic!("cannot create a test database: {error}");
        }
        name
    }

    /// The URL of `database` as the TLS-only user, with a password that
    /// must never be shown (the server trusts the user without it).
    fn url(&self, host: &str, database: &str, query: &str) -> String {
        format!("postgres://flowc_tls:hunter2@{host}:{}/{database}?{query}", self.port())
    }
}

fn open_error(url: &str) -> String {
    match PostgresStore::connect(url) {
        Ok(_) => panic!("{url} connected"),
        Err(error @ StoreError::Open { .. }) => error.to_string(),
        Err(other) => panic!("not an open error: {other:?}"),
    }
}

/// One line that names the store without its password.
fn assert_one_line_naming_the_store(message: &str) {
    assert!(!message.trim_end().contains('\n'), "one line: {message}");
    assert!(message.contains("flowc_tls:***@"), "the store is named: {message}");
    assert!(!message.contains("hunter2"), "the password is hidden: {message}");
}

#[test]
fn verify_full_with_the_ca_stores_a_turn_and_reads_it_back() {
    let Some(server) = TlsServer::get("verify_full_with_the_ca_stores_a_turn_and_reads_it_back") else {
        return;
    };
    let database = server.database("full");
    // By name and by address: the certificate lists both.
    for host in ["localhost", "127.0.0.1"] {
        let store = server.url(host, &database, &format!("sslmode=verify-full&sslrootcert={}", server.ca));
        let dir = temp_dir(&format!("tls-full-{host}"));
        let booking = root().join("flows/booking.flow").to_string_lossy().into_owned();
        std::fs::write(dir.join("script.txt"), "Book the Grand Hotel for 2 guests on 2026-12-04\n")
            .unwrap_or_else(|error| panic!("{error}"));
        let session = format!("tls-{}", host.replace('.', "-"));
        let run = flowc_env(
            &dir,
            &["run", &booking, "--session", &session, "--script", "script.txt", "--store", &store],
            &[],
            Duration::from_secs(120),
        );
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
        let shown =
            flowc_env(&dir, &["sessions", "show", &session, "--json", "--store", &store], &[], Duration::from_secs(60));
        assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
        let stored: serde_json::Value = serde_json::from_str(stdout(&shown).trim()).unwrap_or_default();
        assert_eq!(stored["turns"], 1, "{}", stdout(&shown));
        assert!(stdout(&shown).contains("Book the Grand Hotel"), "the transcript is read back: {}", stdout(&shown));

        // A connection that fails changes nothing stored.
        let refused = flowc_env(
            &dir,
            &["sessions", "show", &session, "--store", &server.url(host, &database, "sslmode=verify-full")],
            &[],
            Duration::from_secs(60),
        );
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        let again =
            flowc_env(&dir, &["sessions", "show", &session, "--json", "--store", &store], &[], Duration::from_secs(60));
        assert_eq!(stdout(&again), stdout(&shown));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn verify_full_or_verify_ca_without_the_ca_fails_and_says_to_name_it() {
    let Some(server) = TlsServer::get("verify_full_or_verify_ca_without_the_ca_fails_and_says_to_name_it") else {
        return;
    };
    let database = server.database("noca");
    let message = open_error(&server.url("127.0.0.1", &database, "sslmode=verify-full"));
    assert_one_line_naming_the_store(&message);
    assert!(message.contains("not signed by a CA flowc trusts"), "{message}");
    assert!(message.contains("sslrootcert=PATH"), "says what to do: {message}");
    let chain_only = open_error(&server.url("127.0.0.1", &database, "sslmode=verify-ca"));
    assert!(chain_only.contains("not signed by a CA flowc trusts"), "verify-ca checks the chain too: {chain_only}");
}

#[test]
fn verify_full_refuses_a_host_the_certificate_does_not_name_and_verify_ca_does_not_care() {
    let Some(server) = TlsServer::get("verify_full_refuses_a_host_the_certificate_does_not_name") else {
        return;
    };
    let database = server.database("name");
    // The server's own address, under a name its certificate does not list.
    let query = |mode: &str| format!("sslmode={mode}&sslrootcert={}&hostaddr=127.0.0.1", server.ca);
    let message = open_error(&server.url("db.flowc.invalid", &database, &query("verify-full")));
    assert_one_line_naming_the_store(&message);
    assert!(message.contains("not for this host"), "{message}");
    assert!(message.contains("db.flowc.invalid"), "names the host: {message}");
    assert!(message.contains("sslmode=verify-ca"), "says what to do: {message}");

    let store = PostgresStore::connect(&server.url("db.flowc.invalid", &database, &query("verify-ca")));
    assert!(store.is_ok(), "verify-ca checks the chain only: {:?}", store.err());
}

#[test]
fn require_encrypts_without_checking_the_certificate() {
    let Some(server) = TlsServer::get("require_encrypts_without_checking_the_certificate") else {
        return;
    };
    let database = server.database("require");
    let url = server.url("127.0.0.1", &database, "sslmode=require");
    let mut client = flowc::store::postgres_tls::connect(&url).unwrap_or_else(|error| panic!("{error}"));
    let encrypted: bool = client
        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .map(|row| row.get(0))
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(encrypted, "the server sees a TLS connection");
    drop(client);

    let store = PostgresStore::connect(&url).unwrap_or_else(|error| panic!("{error}"));
    let mut session = Session::new("enc", "hash");
    session.version = 1;
    assert!(store.save(&session, 0, &[]).is_ok());
    assert_eq!(store.load("enc").ok().flatten(), Some(session));
}

#[test]
fn a_user_the_server_admits_only_over_tls_is_refused_under_disable() {
    let Some(server) = TlsServer::get("a_user_the_server_admits_only_over_tls_is_refused_under_disable") else {
        return;
    };
    let database = server.database("disable");
    let message = open_error(&server.url("127.0.0.1", &database, "sslmode=disable"));
    assert_one_line_naming_the_store(&message);
    assert!(message.contains("no encryption"), "the server's reason: {message}");
    assert!(message.contains("use sslmode=require"), "says what to do: {message}");
}

#[test]
fn a_password_login_is_bound_to_the_verified_tls_channel() {
    let Some(server) = TlsServer::get("a_password_login_is_bound_to_the_verified_tls_channel") else {
        return;
    };
    let database = server.database_of("flowc_scram", "scram");
    let url = |password: &str| {
        format!(
            "postgres://flowc_scram:{password}@localhost:{}/{database}?sslmode=verify-full&sslrootcert={}\
             &channel_binding=require",
            server.port(),
            server.ca
        )
    };
    // SCRAM-SHA-256-PLUS: the server checks the client saw its certificate.
    let store = PostgresStore::connect(&url("flowc-test")).unwrap_or_else(|error| panic!("{error}"));
    let mut session = Session::new("scram", "hash");
    session.version = 1;
    assert!(store.save(&session, 0, &[]).is_ok());
    assert_eq!(store.load("scram").ok().flatten(), Some(session));

    let message = open_error(&url("hunter2"));
    assert!(message.contains("flowc_scram:***@"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("password authentication failed"), "{message}");
}

/// A server without TLS, as far as the TLS question goes: it answers `N` to
/// the client's request for TLS, then reports the next message it is sent.
fn server_without_tls() -> (u16, std::thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|error| panic!("{error}"));
    let port = listener.local_addr().map(|address| address.port()).unwrap_or_else(|error| panic!("{error}"));
    let handle = std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return Vec::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut request = [0u8; 8];
        if stream.read_exact(&mut request).is_err() {
            return Vec::new();
        }
        // SSLRequest: length 8, code 80877103.
        assert_eq!(request, [0, 0, 0, 8, 4, 210, 22, 47], "the client asks for TLS first");
        let _ = stream.write_all(b"N");
        let mut next = [0u8; 8];
        match stream.read_exact(&mut next) {
            Ok(()) => next.to_vec(),
            Err(_) => Vec::new(),
        }
    });
    (port, handle)
}

#[test]
fn a_server_without_tls_fails_require_and_prefer_goes_on_in_plain() {
    let (port, server) = server_without_tls();
    let message = open_error(&format!("postgres://flowc_tls:hunter2@127.0.0.1:{port}/db?sslmode=require"));
    assert_one_line_naming_the_store(&message);
    assert!(message.contains("the server does not offer TLS, and sslmode=require needs it"), "{message}");
    assert_eq!(server.join().ok(), Some(Vec::new()), "nothing is sent in the clear");

    let (port, server) = server_without_tls();
    let message = open_error(&format!("postgres://flowc_tls:hunter2@127.0.0.1:{port}/db?sslmode=prefer"));
    assert_one_line_naming_the_store(&message);
    let startup = server.join().unwrap_or_default();
    // A startup message: its length, then protocol 3.0.
    assert_eq!(startup.get(4..8), Some(&[0u8, 3, 0, 0][..]), "prefer goes on without TLS, as libpq does");
}

#[test]
fn a_missing_or_unreadable_root_certificate_is_one_line_naming_the_store() {
    let dir = temp_dir("tls-rootcert");
    for (root_cert, said) in [
        ("/nonexistent/flowc/ca.pem".to_string(), "cannot read sslrootcert `/nonexistent/flowc/ca.pem`"),
        (dir.display().to_string(), "cannot read sslrootcert"),
    ] {
        // Nothing listens on port 1: the file is read before connecting.
        let store = format!("postgres://flowc_tls:hunter2@127.0.0.1:1/db?sslmode=verify-full&sslrootcert={root_cert}");
        let output = flowc_env(&dir, &["sessions", "list", "--store", &store], &[], Duration::from_secs(60));
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let message = stderr(&output);
        assert_one_line_naming_the_store(&message);
        assert!(message.starts_with("error: cannot open the store postgres://"), "{message}");
        assert!(message.contains(said), "{message}");
        assert!(message.contains("give the path of the CA's certificate"), "says what to do: {message}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
