//! Bad requests get bounded, clear answers and the server goes on: broken
//! JSON, a body over the limit, an unknown route, a client that drops a
//! streamed turn midway.

use super::{Client, code, options, start};
use flowc::serve::auth::Auth;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

#[test]
fn malformed_json_is_a_400_that_says_so() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    for body in ["{", "[1, 2]", "", "{\"program\": \"booking\",}", "\u{0}"] {
        let (status, error) = client.send(reqwest::Method::POST, "/v1/sessions", Some(body));
        assert_eq!((status, code(&error)), (400, "invalid_body"), "{body:?}: {error}");
    }
    assert_eq!(client.get("/healthz").0, 200);
}

#[test]
fn a_body_over_the_limit_is_a_413_and_the_server_goes_on() {
    let mut options = options(Auth::default());
    options.body_limit = 4096;
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    let over = json!({ "text": "a".repeat(8192) }).to_string();
    let (status, error) = client.send(reqwest::Method::POST, &format!("/v1/sessions/{id}/messages"), Some(&over));
    assert_eq!((status, code(&error)), (413, "body_too_large"), "{error}");

    // A client announcing a gigabyte is answered before it sends it.
    let mut stream = TcpStream::connect(server.addr).expect("connects");
    let head = format!(
        "POST /v1/sessions/{id}/messages HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n{{\"text\": \""
    );
    stream.write_all(head.as_bytes()).expect("the head is sent");
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
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the answer's body");
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error");
    assert_eq!(code(&body), "body_too_large");

    let (status, turn) = client.say(&id, "Book the Grand Hotel for 2 guests on 2026-12-04");
    assert_eq!(status, 200, "{turn}");
}

#[test]
fn an_unknown_route_is_a_json_404() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    for path in ["/nowhere", "/v1", "/v1/sessions/a/b/c", "/favicon.ico"] {
        let (status, error) = client.get(path);
        assert_eq!((status, code(&error)), (404, "route_not_found"), "{path}: {error}");
    }
}

#[test]
fn a_client_that_drops_a_streamed_turn_midway_leaves_the_turn_committed() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    let response = client
        .request(reqwest::Method::POST, &format!("/v1/sessions/{id}/messages"))
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(json!({ "text": "Book the Grand Hotel for 2 guests on 2026-12-04" }).to_string())
        .send()
        .expect("the server answers");
    let mut lines = BufReader::new(response).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(first.starts_with("event:") || first.starts_with(':'), "{first}");
    drop(lines);
    // The turn finishes on the server whether or not anyone reads it: wait
    // for its commit, which the next turn's version check then sees.
    let mut turns = 0;
    for _ in 0..2000 {
        let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
        turns = shown["turns"].as_u64().unwrap_or(0);
        if turns == 1 {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(turns, 1, "the dropped turn was committed");
    let (status, turn) = client.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": "yes", "version": 2 }));
    assert_eq!((status, turn["stopped_reason"].as_str()), (200, Some("flow_complete")), "{turn}");
}
