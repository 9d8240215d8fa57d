//! One keep-alive connection speaking just enough HTTP/1.1 for the serve
//! benches: a hand-written client costs the machine far less than the
//! server it measures. Errors come back as text for the bench's own
//! `fail`, which may have servers to stop first.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

/// The first booking message every serve bench sends: it fills the whole
/// flow, so the turn stops at confirm.
pub const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// The body of a booking message (`BOOK`, or the "yes" after it).
pub fn message(text: &str) -> String {
    serde_json::json!({ "text": text }).to_string()
}

/// The id in the answer to `POST /v1/sessions`.
pub fn session_id(body: &str) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    value["id"].as_str().map(str::to_string).ok_or_else(|| format!("no session id in {body}"))
}

pub struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    pub fn open(addr: SocketAddr) -> Result<Connection, String> {
        let stream = TcpStream::connect(addr).map_err(|error| format!("cannot connect: {error}"))?;
        let _ = stream.set_nodelay(true);
        let writer = stream.try_clone().map_err(|error| format!("cannot clone the socket: {error}"))?;
        Ok(Connection { reader: BufReader::new(stream), writer })
    }

    /// Sends one request with a JSON body and reads its answer: the status
    /// and the body.
    pub fn request(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        self.writer.write_all(request.as_bytes()).map_err(|error| format!("cannot send: {error}"))?;
        let mut status = 0;
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return Err("a server closed the connection".to_string()),
                Ok(_) => {}
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some(rest) = trimmed.strip_prefix("HTTP/1.1 ") {
                status = rest.get(..3).and_then(|code| code.parse().ok()).unwrap_or(0);
            } else if let Some((name, value)) = trimmed.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).map_err(|error| format!("cannot read a response: {error}"))?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}
