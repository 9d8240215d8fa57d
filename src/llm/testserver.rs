//! A scripted HTTP/1.1 server on 127.0.0.1 for the providers' wire tests.
//!
//! Written on `std::net` rather than taken from a crate so that a test
//! controls every byte: chunked server-sent events with pauses between
//! chunks, a response that stalls, a body cut off mid-JSON, a connection
//! closed mid-stream, a stream held mid-way until the test opens a
//! [`Gate`]. Each connection gets the next scripted [`Reply`] and is closed
//! after it; every request is kept for assertions, and so is how many
//! chunks of each stream the client was still there to receive.

use serde_json::Value;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// What the server answers one connection with.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A complete response with a `Content-Length`.
    Full { status: u16, headers: Vec<(String, String)>, body: String },
    /// `text/event-stream`, chunked: each item is one chunk, sent after
    /// `pause`. With `close_early` the connection drops without the final
    /// empty chunk, as a crashed server would. With `hold`, the stream
    /// stops before chunk number `at` until the gate opens.
    Stream { chunks: Vec<String>, pause: Duration, close_early: bool, hold: Option<(usize, Gate)> },
    /// Waits, then answers.
    Delayed(Duration, Box<Reply>),
    /// Raw bytes written as they are, then the connection is closed.
    Raw(String),
}

impl Reply {
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    pub fn text(status: u16, body: &str) -> Reply {
        Reply::Full { status, headers: vec![("content-type".into(), "text/plain".into())], body: body.into() }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Full { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// Server-sent events, one `data:` line each (OpenAI's form).
    pub fn sse(data: &[Value]) -> Reply {
        let mut chunks: Vec<String> = data.iter().map(|value| format!("data: {value}\n\n")).collect();
        chunks.push("data: [DONE]\n\n".into());
        Reply::Stream { chunks, pause: Duration::ZERO, close_early: false, hold: None }
    }

    /// Named server-sent events (Anthropic's form).
    pub fn events(events: &[(&str, Value)]) -> Reply {
        let chunks = events.iter().map(|(name, value)| format!("event: {name}\ndata: {value}\n\n")).collect();
        Reply::Stream { chunks, pause: Duration::ZERO, close_early: false, hold: None }
    }

    pub fn paced(self, every: Duration) -> Reply {
        match self {
            Reply::Stream { chunks, close_early, hold, .. } => {
                Reply::Stream { chunks, pause: every, close_early, hold }
            }
            other => other,
        }
    }

    /// Holds the stream before its chunk number `at` until `gate` opens.
    pub fn held_at(self, at: usize, gate: &Gate) -> Reply {
        match self {
            Reply::Stream { chunks, pause, close_early, .. } => {
                Reply::Stream { chunks, pause, close_early, hold: Some((at, gate.clone())) }
            }
            other => other,
        }
    }

    /// Drops the stream's last chunk (`[DONE]`, `message_stop`) and the
    /// connection with it, as a server that crashed mid-answer.
    pub fn cut_short(self) -> Reply {
        match self {
            Reply::Stream { mut chunks, pause, hold, .. } => {
                chunks.pop();
                Reply::Stream { chunks, pause, close_early: true, hold }
            }
            other => other,
        }
    }

    pub fn after(self, delay: Duration) -> Reply {
        Reply::Delayed(delay, Box::new(self))
    }
}

/// A point a held stream waits at, opened by the test.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn open(&self) {
        let (open, changed) = &*self.0;
        if let Ok(mut open) = open.lock() {
            *open = true;
        }
        changed.notify_all();
    }

    /// Waits until the gate opens; a test that never opens it has failed,
    /// so the wait ends after a minute anyway.
    fn wait(&self) {
        let (open, changed) = &*self.0;
        let Ok(guard) = open.lock() else { return };
        let _ = changed.wait_timeout_while(guard, Duration::from_secs(60), |open| !*open);
    }
}

/// How a streamed reply went: chunks the client took, out of those scripted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Streamed {
    pub sent: usize,
    pub scripted: usize,
}

type Finished = Arc<(Mutex<Vec<Streamed>>, Condvar)>;

pub struct TestServer {
    pub url: String,
    address: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    streams: Finished,
    stop: Arc<AtomicBool>,
}

impl TestServer {
    /// Starts a server answering connections with `replies` in order; any
    /// request beyond them gets a 500 that names the test's mistake.
    pub fn start(replies: Vec<Reply>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let address = listener.local_addr().expect("local address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let streams: Finished = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (thread_requests, thread_streams, thread_stop) = (requests.clone(), streams.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (requests, streams, script) = (thread_requests.clone(), thread_streams.clone(), script.clone());
                std::thread::spawn(move || serve(stream, &requests, &streams, &script));
            }
        });
        TestServer { url: format!("http://{address}"), address, requests, streams, stop }
    }

    /// Waits until `count` streamed replies have ended (sent whole, or cut
    /// off by the client going away) and gives how each went.
    pub fn streams_ended(&self, count: usize) -> Vec<Streamed> {
        let (streams, changed) = &*self.streams;
        let guard = streams.lock().expect("stream records");
        let (guard, _) = changed
            .wait_timeout_while(guard, Duration::from_secs(60), |streams| streams.len() < count)
            .expect("stream records");
        assert!(guard.len() >= count, "only {} of {count} streams ended", guard.len());
        guard.clone()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|requests| requests.clone()).unwrap_or_default()
    }

    pub fn request(&self, index: usize) -> Recorded {
        self.requests().get(index).cloned().unwrap_or_else(|| panic!("no request #{index}"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(100));
    }
}

fn serve(mut stream: TcpStream, requests: &Mutex<Vec<Recorded>>, streams: &Finished, script: &Mutex<VecDeque<Reply>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    if let Ok(mut requests) = requests.lock() {
        requests.push(request);
    }
    let reply = script.lock().ok().and_then(|mut script| script.pop_front()).unwrap_or_else(|| {
        Reply::json(500, &serde_json::json!({"error": {"message": "test server: no reply scripted for this request"}}))
    });
    if let Some(streamed) = write_reply(&mut stream, reply) {
        let (records, changed) = &**streams;
        if let Ok(mut records) = records.lock() {
            records.push(streamed);
        }
        changed.notify_all();
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position;
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(chunk.get(..read)?);
    };
    let head = String::from_utf8_lossy(buffer.get(..header_end)?).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer.get(header_end + 4..)?.to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(chunk.get(..read)?);
    }
    Some(Recorded { method, path, headers, body: String::from_utf8_lossy(&body).to_string(), at: Instant::now() })
}

/// Writes the reply; for a stream, says how many chunks got out.
fn write_reply(stream: &mut TcpStream, reply: Reply) -> Option<Streamed> {
    let mut streamed = None;
    match reply {
        Reply::Full { status, headers, body } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
        Reply::Stream { chunks, pause, close_early, hold } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                        transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            let mut record = Streamed { sent: 0, scripted: chunks.len() };
            if stream.write_all(head.as_bytes()).is_err() {
                return Some(record);
            }
            for (index, chunk) in chunks.into_iter().enumerate() {
                if let Some((_, gate)) = hold.as_ref().filter(|(at, _)| *at == index) {
                    gate.wait();
                }
                if !pause.is_zero() {
                    std::thread::sleep(pause);
                }
                let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                if stream.write_all(framed.as_bytes()).and_then(|()| stream.flush()).is_err() {
                    return Some(record);
                }
                record.sent += 1;
            }
            if !close_early {
                let _ = stream.write_all(b"0\r\n\r\n");
            }
            streamed = Some(record);
        }
        Reply::Delayed(delay, reply) => {
            std::thread::sleep(delay);
            return write_reply(stream, *reply);
        }
        Reply::Raw(bytes) => {
            let _ = stream.write_all(bytes.as_bytes());
        }
    }
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
    streamed
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// HTTP settings for tests: short waits, two retries.
pub fn fast_http() -> crate::llm::http::HttpSettings {
    crate::llm::http::HttpSettings {
        connect_timeout: Duration::from_secs(1),
        timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base: Duration::from_millis(10),
        retry_max_wait: Duration::from_secs(2),
    }
}

/// A tool loop that books hotels and allows `limit` calls.
pub struct Tools {
    pub calls: Vec<(String, Value)>,
    pub limit: usize,
}

impl Tools {
    pub fn allowing(limit: usize) -> Tools {
        Tools { calls: Vec::new(), limit }
    }
}

impl crate::llm::ToolLoop for Tools {
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        self.calls.push((name.to_string(), arguments));
        match name {
            "book_hotel" => Ok(serde_json::json!({"booking_id": "B-1"})),
            other => Err(format!("no tool `{other}`")),
        }
    }

    fn may_call(&self) -> bool {
        self.calls.len() < self.limit
    }
}

/// A port on which nothing listens.
pub fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("local address");
    drop(listener);
    format!("http://{address}")
}
