//! The caps of `[serve]` (`serve::caps`): a tenant at its cap of sessions
//! or of runs not yet ended gets a 429 naming the cap while other tenants
//! go on; a server at its cap of requests or connections answers 503
//! `overloaded` with `Retry-After`, keeps answering health and metrics, and
//! serves again once the load is gone. Every refusal is counted in
//! `/metrics`.

use super::{Client, TOKEN_ACME, TOKEN_GLOBEX, code, options, start, tenants};
use flowc::serve::auth::Auth;
use flowc::serve::caps::Caps;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A socket read that a broken server would leave hanging fails the test
/// after this instead of stalling the suite; nothing is timed by it.
const HANG: Duration = Duration::from_secs(60);

/// The value of a metric line (`name{labels}` as written) in `/metrics`.
fn metric(client: &Client, name: &str) -> u64 {
    let (status, text) = client.get("/metrics");
    assert_eq!(status, 200);
    let text = text.as_str().expect("the metrics are text").to_string();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
}

/// One request on a connection of its own: the answer's head (status line
/// and headers, lower-cased) and its body.
fn raw(addr: SocketAddr, request: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.set_read_timeout(Some(HANG)).expect("a read timeout");
    stream.write_all(request.as_bytes()).expect("the request is sent");
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a line of the answer");
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().expect("a length");
        }
        if line.trim().is_empty() {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the answer's body");
    (head, String::from_utf8_lossy(&body).into_owned())
}

fn get(addr: SocketAddr, path: &str) -> (String, String) {
    raw(addr, &format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n"))
}

#[test]
fn a_tenant_at_its_cap_of_sessions_gets_a_429_and_others_go_on() {
    let mut options = options(tenants());
    options.caps = Caps { sessions_per_tenant: Some(2), ..Caps::default() };
    let server = start(&options);
    let acme = Client::new(server.addr, Some(TOKEN_ACME));
    let globex = Client::new(server.addr, Some(TOKEN_GLOBEX));
    let first = acme.new_session();
    acme.new_session();
    let response = acme
        .request(reqwest::Method::POST, "/v1/sessions")
        .header("content-type", "application/json")
        .body(json!({ "program": "booking" }).to_string())
        .send()
        .expect("the server answers");
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers().get("retry-after"), None, "waiting frees no session");
    let refused: Value = response.json().expect("a JSON error");
    assert_eq!(code(&refused), "too_many_sessions", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_sessions_per_tenant = 2"), "{message}");

    // The cap is per tenant: globex is not held back by acme's sessions.
    globex.new_session();
    // A session deleted frees its place.
    assert_eq!(acme.send(reqwest::Method::DELETE, &format!("/v1/sessions/{first}"), None).0, 204);
    acme.new_session();
    assert_eq!(metric(&acme, "flowc_rejected_total{reason=\"sessions\"}"), 1);
}

#[test]
fn a_tenant_at_its_cap_of_runs_not_yet_ended_gets_a_429_until_one_ends() {
    let mut options = options(Auth::default());
    options.caps = Caps { runs_per_tenant: Some(1), ..Caps::default() };
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let onboarding = json!({
        "program": "onboarding",
        "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] }
    });
    let (status, run) = client.post("/v1/runs", &onboarding);
    assert_eq!((status, run["status"].as_str()), (201, Some("waiting")), "{run}");
    let (status, refused) = client.post("/v1/runs", &onboarding);
    assert_eq!((status, code(&refused)), (429, "too_many_runs"), "{refused}");
    // A session is not a run: the run cap leaves conversations alone.
    client.new_session();

    let id = run["run"].as_str().expect("a run id");
    let (status, cancelled) = client.post(&format!("/v1/runs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{cancelled}");
    let (status, run) = client.post("/v1/runs", &onboarding);
    assert_eq!(status, 201, "a cancelled run has ended and frees its place: {run}");
    assert_eq!(metric(&client, "flowc_rejected_total{reason=\"runs\"}"), 1);
}

#[test]
fn a_server_at_its_cap_of_requests_answers_503_and_still_shows_its_health() {
    let mut options = options(Auth::default());
    options.caps = Caps { requests: Some(1), ..Caps::default() };
    let server = start(&options);
    let client = Client::new(server.addr, None);

    // A request whose body has not all arrived is one being answered.
    let mut slow = TcpStream::connect(server.addr).expect("connects");
    slow.set_read_timeout(Some(HANG)).expect("a read timeout");
    let body = json!({ "program": "booking" }).to_string();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    slow.write_all(head.as_bytes()).expect("the head is sent");
    slow.write_all(&body.as_bytes()[..4]).expect("a piece of the body is sent");
    // Health and metrics are never refused: they tell when it is in.
    while metric(&client, "flowc_requests_in_flight") < 1 {
        std::thread::yield_now();
    }

    let (head, refused) = raw(
        server.addr,
        &format!("POST /v1/sessions HTTP/1.1\r\nhost: test\r\ncontent-length: {}\r\n\r\n{body}", body.len()),
    );
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 1\r\n"), "{head}");
    let refused: Value = serde_json::from_str(&refused).expect("a JSON error");
    assert_eq!(code(&refused), "overloaded", "{refused}");
    assert!(get(server.addr, "/healthz").0.starts_with("http/1.1 200"));

    // The slow request finishes, and the server takes requests again.
    slow.write_all(&body.as_bytes()[4..]).expect("the rest of the body is sent");
    let mut answer = String::new();
    BufReader::new(&slow).read_line(&mut answer).expect("the answer");
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(client.post("/v1/sessions", &json!({ "program": "booking" })).0, 201);
    assert_eq!(metric(&client, "flowc_rejected_total{reason=\"requests\"}"), 1);
}

#[test]
fn a_server_at_its_cap_of_connections_answers_503_and_closes_the_newcomer() {
    let mut options = options(Auth::default());
    options.caps = Caps { connections: Some(1), ..Caps::default() };
    let server = start(&options);

    // One connection kept alive, answered once so it is surely taken.
    let mut kept = TcpStream::connect(server.addr).expect("connects");
    kept.set_read_timeout(Some(HANG)).expect("a read timeout");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n").expect("sent");
    let mut reader = BufReader::new(kept.try_clone().expect("a clone"));
    let mut status = String::new();
    reader.read_line(&mut status).expect("the answer");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");

    let (head, refused) = get(server.addr, "/v1/programs");
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 1\r\n") && head.contains("connection: close\r\n"), "{head}");
    let refused: Value = serde_json::from_str(&refused).expect("a JSON error");
    assert_eq!(code(&refused), "overloaded", "{refused}");

    // The kept connection goes; once the server has seen it go, a new one
    // is served (each refusal until then is an answer, not a hang).
    drop(reader);
    drop(kept);
    let metrics = loop {
        let (head, body) = get(server.addr, "/metrics");
        if head.starts_with("http/1.1 200") {
            break body;
        }
        assert!(head.starts_with("http/1.1 503"), "{head}");
        std::thread::yield_now();
    };
    let refused = metrics
        .lines()
        .find_map(|line| line.strip_prefix("flowc_rejected_total{reason=\"connections\"} ")?.parse::<u64>().ok());
    assert!(refused.is_some_and(|refused| refused >= 1), "{metrics}");
}

#[test]
fn the_openapi_document_lists_the_caps_answers() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let (_, document) = client.get("/openapi.json");
    for (path, method) in [("/v1/sessions", "post"), ("/v1/runs", "post")] {
        assert!(document["paths"][path][method]["responses"].get("429").is_some(), "{method} {path}: no 429");
    }
    let paths = document["paths"].as_object().expect("paths");
    for (path, methods) in paths {
        for (method, operation) in methods.as_object().expect("methods") {
            // Health and metrics too: the cap of requests spares them, the
            // cap of connections refuses them like any other.
            let overload = operation["responses"].get("503");
            let header = overload.map(|response| &response["headers"]["Retry-After"]);
            assert!(header.is_some_and(|header| header.is_object()), "{method} {path}: no 503 with Retry-After");
            if matches!(path.as_str(), "/healthz" | "/metrics") {
                let codes = overload.map(|response| response.to_string()).unwrap_or_default();
                assert!(codes.contains("(codes: overloaded)"), "{method} {path}: only overloaded: {codes}");
            }
        }
    }
}

#[test]
fn the_tenant_caps_count_in_postgresql_across_the_servers_sharing_it() {
    let Some(url) = crate::store::fresh_database("serve_caps") else {
        return;
    };
    let mut options = options(tenants());
    options.store = flowc::store::StoreLocation::Postgres(url);
    options.caps = Caps { sessions_per_tenant: Some(2), runs_per_tenant: Some(1), ..Caps::default() };
    let first = start(&options);
    let second = start(&options);
    let acme = [Client::new(first.addr, Some(TOKEN_ACME)), Client::new(second.addr, Some(TOKEN_ACME))];
    acme[0].new_session();
    acme[1].new_session();
    // Each server made one: the count is the store's, not the process's.
    let (status, refused) = acme[0].post("/v1/sessions", &json!({ "program": "booking" }));
    assert_eq!((status, code(&refused)), (429, "too_many_sessions"), "{refused}");
    Client::new(second.addr, Some(TOKEN_GLOBEX)).new_session();

    let onboarding = json!({
        "program": "onboarding",
        "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] }
    });
    let (status, run) = acme[1].post("/v1/runs", &onboarding);
    assert_eq!((status, run["status"].as_str()), (201, Some("waiting")), "{run}");
    let (status, refused) = acme[0].post("/v1/runs", &onboarding);
    assert_eq!((status, code(&refused)), (429, "too_many_runs"), "{refused}");
}

#[test]
fn the_binary_reads_its_caps_from_flowc_toml_and_its_flags() {
    let dir = crate::support::temp_dir(&format!("serve-caps-{}", crate::support::unique()));
    std::fs::copy(crate::support::root().join("flows/booking.flow"), dir.join("booking.flow")).expect("copied");
    std::fs::write(dir.join("flowc.toml"), "[serve]\nmax_sessions_per_tenant = 1\n").expect("written");
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let server = super::processes::Server::start(&dir, &["booking.flow", "--store", &store], &[]);
    let client = Client::new(server.addr, None);
    client.new_session();
    let (status, refused) = client.post("/v1/sessions", &json!({ "program": "booking" }));
    assert_eq!((status, code(&refused)), (429, "too_many_sessions"), "{refused}");
    drop(server);

    // A flag wins over the file.
    let server = super::processes::Server::start(
        &dir,
        &["booking.flow", "--store", &store, "--max-sessions-per-tenant", "2"],
        &[],
    );
    let client = Client::new(server.addr, None);
    client.new_session();
    assert_eq!(client.post("/v1/sessions", &json!({ "program": "booking" })).0, 429);
    drop(server);

    let refused = crate::support::flowc_in(&dir, &["serve", "booking.flow", "--max-requests", "0"], None);
    assert_eq!(refused.status.code(), Some(2));
    assert!(crate::support::stderr(&refused).contains("--max-requests must be 1 or more"), "{refused:?}");
    std::fs::write(dir.join("flowc.toml"), "[serve]\nmax_conections = 5\n").expect("written");
    let refused = crate::support::flowc_in(&dir, &["serve", "booking.flow"], None);
    assert_eq!(refused.status.code(), Some(2));
    assert!(crate::support::stderr(&refused).contains("unknown key `max_conections` in [serve]"), "{refused:?}");
}

/// Creations of one tenant at once, on two servers sharing `store`, at a
/// cap of 3: exactly 3 are answered 201, every other 429.
fn racing_creations_leave_exactly_the_cap(store: flowc::store::StoreLocation) {
    let mut first_options = options(tenants());
    first_options.caps = Caps { sessions_per_tenant: Some(3), ..Caps::default() };
    first_options.store = store;
    let mut second_options = options(tenants());
    second_options.caps = first_options.caps;
    second_options.store = first_options.store.clone();
    let servers = [start(&first_options), start(&second_options)];
    let creators = 16;
    let ready = std::sync::Arc::new(std::sync::Barrier::new(creators));
    let answers: Vec<_> = (0..creators)
        .map(|index| {
            let client = Client::new(servers[index % 2].addr, Some(TOKEN_ACME));
            let ready = std::sync::Arc::clone(&ready);
            std::thread::spawn(move || {
                ready.wait();
                client.post("/v1/sessions", &json!({ "program": "booking" }))
            })
        })
        .collect();
    let mut statuses: Vec<u16> = answers.into_iter().map(|answer| answer.join().expect("a creator").0).collect();
    statuses.sort_unstable();
    let mut expected = vec![201; 3];
    expected.extend(vec![429; creators - 3]);
    assert_eq!(statuses, expected);
    let listed = Client::new(servers[0].addr, Some(TOKEN_ACME)).get("/v1/sessions").1;
    assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(3), "{listed}");
}

#[test]
fn sessions_created_at_once_on_two_servers_on_sqlite_never_pass_the_cap() {
    let store = options(tenants()).store;
    racing_creations_leave_exactly_the_cap(store);
}

#[test]
fn sessions_created_at_once_on_two_servers_on_postgres_never_pass_the_cap() {
    let Some(url) = super::processes::fresh_database("serve_caps_race") else {
        return;
    };
    racing_creations_leave_exactly_the_cap(flowc::store::StoreLocation::Postgres(url));
}
