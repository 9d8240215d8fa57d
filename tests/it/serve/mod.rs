//! `flowc serve` end to end: the API in process (sessions, turns, errors,
//! tenants, server-sent events, workflow runs, the OpenAPI document), and
//! the binary (SIGTERM draining open requests, two servers on one
//! PostgreSQL). Every server listens on 127.0.0.1 on a port the system
//! picks.

mod api;
mod cache;
mod caps;
mod contract;
mod contract_codes;
mod failures;
mod faults;
mod folders;
mod inline;
mod metrics;
mod processes;
mod robustness;
mod runs;
mod schema;
mod versions;

use crate::support::{root, temp_dir, unique};
use flowc::serve::auth::Auth;
use flowc::serve::programs::ProgramSettings;
use flowc::serve::{Running, ServeOptions};
use flowc::store::StoreLocation;
use serde_json::{Value, json};
use std::time::Duration;

pub const TOKEN_ACME: &str = "acme-token-0123456789";
pub const TOKEN_GLOBEX: &str = "globex-token-0123456789";

/// The options of a server on a fresh SQLite store serving the booking
/// and onboarding examples, frozen clock.
pub fn options(auth: Auth) -> ServeOptions {
    let dir = temp_dir(&format!("serve-{}", unique()));
    let (clock, ids) = flowc::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), None).expect("clock");
    ServeOptions {
        files: vec![root().join("flows/booking.flow"), root().join("flows/onboarding.flow")],
        addr: "127.0.0.1:0".parse().expect("address"),
        store: StoreLocation::Sqlite(dir.join("flowc.db")),
        auth,
        insecure_open: false,
        body_limit: 64 * 1024,
        settings: ProgramSettings {
            provider_flags: Default::default(),
            limits: Default::default(),
            clock,
            ids,
            tools: Default::default(),
        },
        run_poll: Duration::from_millis(5),
        deadlines: Default::default(),
        caps: Default::default(),
    }
}

pub fn start(options: &ServeOptions) -> Running {
    flowc::serve::start(options, 2, false).expect("the server starts")
}

pub fn tenants() -> Auth {
    Auth::new(vec![("acme".into(), TOKEN_ACME.into()), ("globex".into(), TOKEN_GLOBEX.into())]).expect("tokens")
}

/// A blocking client of one server, optionally with a token.
pub struct Client {
    pub base: String,
    pub token: Option<String>,
    http: reqwest::blocking::Client,
}

impl Client {
    pub fn new(addr: std::net::SocketAddr, token: Option<&str>) -> Client {
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        Client { base: format!("http://{addr}"), token: token.map(str::to_string), http }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::blocking::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `body` (raw text) and answers the status and the JSON body.
    pub fn send(&self, method: reqwest::Method, path: &str, body: Option<&str>) -> (u16, Value) {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().expect("the server answers");
        let status = response.status().as_u16();
        let text = response.text().expect("a body");
        let value =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        (status, value)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(&body.to_string()))
    }

    /// A new booking session's id.
    pub fn new_session(&self) -> String {
        let (status, created) = self.post("/v1/sessions", &json!({ "program": "booking" }));
        assert_eq!(status, 201, "{created}");
        created["id"].as_str().expect("an id").to_string()
    }

    pub fn say(&self, id: &str, text: &str) -> (u16, Value) {
        self.post(&format!("/v1/sessions/{id}/messages"), &json!({ "text": text }))
    }
}

/// The code of an error body.
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("(no error code)")
}

/// Server-sent events read from a response: (event, data) pairs.
pub fn read_events(response: reqwest::blocking::Response) -> Vec<(String, String)> {
    use std::io::BufRead;
    let mut events = Vec::new();
    let mut event = String::new();
    let mut data = String::new();
    for line in std::io::BufReader::new(response).lines() {
        let line = line.expect("a line of the stream");
        if line.is_empty() {
            if !event.is_empty() || !data.is_empty() {
                events.push((std::mem::take(&mut event), std::mem::take(&mut data)));
            }
        } else if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_string();
        } else if let Some(text) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(text.strip_prefix(' ').unwrap_or(text));
        }
    }
    events
}

/// The next server-sent event of a stream being read: (event, data).
pub fn next_event(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> Option<(String, String)> {
    let mut event = String::new();
    let mut data = String::new();
    for line in lines {
        let line = line.expect("a line of the stream");
        if line.is_empty() {
            if !event.is_empty() || !data.is_empty() {
                return Some((event, data));
            }
        } else if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_string();
        } else if let Some(text) = line.strip_prefix("data:") {
            data.push_str(text.strip_prefix(' ').unwrap_or(text));
        }
    }
    None
}

/// Follows run `id`'s events from `client` while its one step holds: reads
/// up to the step's start, lets the step finish, and answers every event
/// after. The stream is open before the step ends, so what follows its
/// start can only come from news of the save, or a poll.
pub fn follow_held_run(client: &Client, id: &str, dir: &std::path::Path) -> Vec<(String, Value)> {
    use std::io::BufRead;
    let response = client.request(reqwest::Method::GET, &format!("/v1/runs/{id}/events")).send().expect("events");
    assert_eq!(response.status().as_u16(), 200);
    let mut lines = std::io::BufReader::new(response).lines();
    loop {
        let (kind, data) = next_event(&mut lines).expect("the step's start before the stream ends");
        let event: Value = serde_json::from_str(&data).expect("json data");
        assert_eq!(kind, "step", "the run ended before it was released: {data}");
        if event["event"] == "step_started" {
            break;
        }
    }
    std::fs::write(dir.join("release"), "").expect("release");
    std::iter::from_fn(|| next_event(&mut lines))
        .map(|(kind, data)| (kind, serde_json::from_str(&data).expect("json data")))
        .collect()
}

/// A workflow whose one step holds until the test writes `release` in
/// its folder (its tool writes `started` first).
pub const HOLD: &str = r#"agent Hold {
  identity "A workflow whose one step waits for the test."
}

schema {
  released: bool "Whether the test let the step finish"
}

tool hold() -> { released: bool } {
  description "Waits until the file `release` exists."
  exec "python3" "hold.py"
  timeout 60s
}

flow hold {
  auto step hold {
    call hold() -> released
  }
}
"#;

pub const HOLD_PY: &str = r#"import json, os, sys, time
sys.stdin.read()
open("started", "w").close()
while not os.path.exists("release"):
    time.sleep(0.01)
print(json.dumps({"released": True}))
"#;
