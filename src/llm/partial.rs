//! Reads an understand answer while it streams.
//!
//! The answer is one JSON object whose members before `reply` are the
//! extraction (flow, fields, conditions, signals, the step the reply is
//! for) and whose `reply`, written last, is text for the user. Fed the
//! answer's bytes in whatever pieces the wire delivers them,
//! [`PartialReader`] reports, in order: once, the members before `reply`,
//! parsed, as soon as the `reply` member starts (or the object closes
//! without one), so the caller can check them while the model is still
//! writing; then the reply string's decoded pieces as they arrive; then
//! the end of the reply.
//!
//! Pieces may split anything: a key, an escape, a `\uXXXX` surrogate pair,
//! a multi-byte UTF-8 character. Text before the opening brace (a code
//! fence, a word of prose from a model answering in the prompt mode) and
//! after the closing one is skipped. Members after `reply` are parsed for
//! their syntax only.

use serde_json::{Map, Value};

/// The member holding the text for the user.
pub const REPLY_MEMBER: &str = "reply";

/// What the reader learned from the bytes it was just fed, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Every member before `reply` is complete (every member, when the
    /// object closed without a `reply`): they are handed over parsed.
    Prefix(Map<String, Value>),
    /// A piece of the reply string, decoded.
    Reply(String),
    /// The reply string is closed.
    ReplyEnd,
}

/// Why the bytes are not the JSON object the reader expects.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the answer is not a JSON object at byte {at}: {problem}")]
pub struct PartialError {
    /// The offset of the offending byte in the whole answer.
    pub at: usize,
    /// What was wrong there.
    pub problem: String,
}

#[derive(Debug)]
enum State {
    /// Before the opening brace.
    Before,
    /// After `{` or `,`: a key (or, after `{`, the end).
    KeyOrEnd,
    /// Inside a key string.
    Key { escaped: bool },
    /// After a key, before its colon.
    Colon,
    /// After a colon, before the value's first byte.
    ValueStart,
    /// Inside a value other than the reply string.
    Value { depth: u32, in_string: bool, escaped: bool },
    /// Inside the reply string.
    Reply,
    /// After a value: `,` or `}`.
    AfterValue,
    /// The object is closed; the rest is ignored.
    Done,
    /// A syntax error was met; nothing more is read.
    Failed(PartialError),
}

/// An incremental reader of one answer (see the module doc).
#[derive(Debug)]
pub struct PartialReader {
    state: State,
    /// Raw bytes of the key or value being read.
    token: Vec<u8>,
    /// The key whose value is being read.
    key: String,
    members: Map<String, Value>,
    prefix_sent: bool,
    /// A reply string started.
    reply_seen: bool,
    reply: ReplyDecoder,
    /// Bytes read so far, for error offsets.
    offset: usize,
}

impl Default for PartialReader {
    fn default() -> Self {
        PartialReader {
            state: State::Before,
            token: Vec::new(),
            key: String::new(),
            members: Map::new(),
            prefix_sent: false,
            reply_seen: false,
            reply: ReplyDecoder::default(),
            offset: 0,
        }
    }
}

impl PartialReader {
    /// Reads the next bytes of the answer, appending what they complete to
    /// `out`. After an error the reader reads nothing more and gives the
    /// same error again.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Progress>) -> Result<(), PartialError> {
        for &byte in bytes {
            if let State::Failed(error) = &self.state {
                return Err(error.clone());
            }
            if let Err(problem) = self.step(byte, out) {
                let error = PartialError { at: self.offset, problem };
                self.state = State::Failed(error.clone());
                self.flush_reply(out);
                return Err(error);
            }
            self.offset += 1;
        }
        if let State::Failed(error) = &self.state {
            return Err(error.clone());
        }
        self.flush_reply(out);
        Ok(())
    }

    /// Whether the object has been read to its closing brace.
    #[cfg(test)]
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Whether the members before `reply` have been handed over.
    #[cfg(test)]
    pub fn has_prefix(&self) -> bool {
        self.prefix_sent
    }

    /// Whether a `reply` string has started (a `reply` that is not a
    /// string is no reply).
    pub fn has_reply(&self) -> bool {
        self.reply_seen
    }

    fn step(&mut self, byte: u8, out: &mut Vec<Progress>) -> Result<(), String> {
        match &mut self.state {
            State::Before => {
                if byte == b'{' {
                    self.state = State::KeyOrEnd;
                }
            }
            State::KeyOrEnd => match byte {
                b'"' => {
                    self.token.clear();
                    self.state = State::Key { escaped: false };
                }
                b'}' => self.close(out),
                _ if byte.is_ascii_whitespace() => {}
                _ => return Err(format!("expected a key, found {}", shown(byte))),
            },
            State::Key { escaped } => match byte {
                _ if *escaped => {
                    *escaped = false;
                    self.token.push(byte);
                }
                b'\\' => {
                    *escaped = true;
                    self.token.push(byte);
                }
                b'"' => {
                    self.key = decode_key(&self.token)?;
                    self.state = State::Colon;
                }
                _ => self.token.push(byte),
            },
            State::Colon => match byte {
                b':' => self.state = State::ValueStart,
                _ if byte.is_ascii_whitespace() => {}
                _ => return Err(format!("expected `:`, found {}", shown(byte))),
            },
            State::ValueStart => {
                if byte.is_ascii_whitespace() {
                    return Ok(());
                }
                if self.key == REPLY_MEMBER && !self.prefix_sent {
                    self.send_prefix(out);
                    if byte == b'"' {
                        self.reply = ReplyDecoder::default();
                        self.reply_seen = true;
                        self.state = State::Reply;
                        return Ok(());
                    }
                }
                self.token.clear();
                self.state = State::Value { depth: 0, in_string: false, escaped: false };
                self.value_byte(byte, out)?;
            }
            State::Value { .. } => self.value_byte(byte, out)?,
            State::Reply => {
                if self.reply.push(byte)? {
                    self.flush_reply(out);
                    out.push(Progress::ReplyEnd);
                    self.state = State::AfterValue;
                }
            }
            State::AfterValue => match byte {
                b',' => self.state = State::KeyOrEnd,
                b'}' => self.close(out),
                _ if byte.is_ascii_whitespace() => {}
                _ => return Err(format!("expected `,` or `}}`, found {}", shown(byte))),
            },
            State::Done | State::Failed(_) => {}
        }
        Ok(())
    }

    /// One byte of a value other than the reply string. A string, object
    /// or array ends at its closing byte; a number or literal at the
    /// byte after it, which is then read as what follows the value.
    fn value_byte(&mut self, byte: u8, out: &mut Vec<Progress>) -> Result<(), String> {
        let State::Value { depth, in_string, escaped } = &mut self.state else {
            return Ok(());
        };
        if *in_string {
            self.token.push(byte);
            if *escaped {
                *escaped = false;
            } else if byte == b'\\' {
                *escaped = true;
            } else if byte == b'"' {
                *in_string = false;
                if *depth == 0 {
                    return self.end_value();
                }
            }
            return Ok(());
        }
        match byte {
            b'"' => {
                *in_string = true;
                self.token.push(byte);
            }
            b'{' | b'[' => {
                *depth += 1;
                self.token.push(byte);
            }
            b'}' | b']' if *depth > 0 => {
                *depth -= 1;
                self.token.push(byte);
                if *depth == 0 {
                    return self.end_value();
                }
            }
            b',' | b'}' | b']' if *depth == 0 => {
                self.end_value()?;
                return self.step(byte, out);
            }
            _ if byte.is_ascii_whitespace() && *depth == 0 => {
                if !self.token.is_empty() {
                    self.end_value()?;
                }
            }
            _ => self.token.push(byte),
        }
        Ok(())
    }

    fn end_value(&mut self) -> Result<(), String> {
        let value: Value = serde_json::from_slice(&self.token)
            .map_err(|error| format!("the value of `{}` is not JSON ({error})", self.key))?;
        self.token.clear();
        if !self.prefix_sent {
            self.members.insert(std::mem::take(&mut self.key), value);
        }
        self.state = State::AfterValue;
        Ok(())
    }

    fn close(&mut self, out: &mut Vec<Progress>) {
        if !self.prefix_sent {
            self.send_prefix(out);
        }
        self.state = State::Done;
    }

    fn send_prefix(&mut self, out: &mut Vec<Progress>) {
        self.prefix_sent = true;
        out.push(Progress::Prefix(std::mem::take(&mut self.members)));
    }

    fn flush_reply(&mut self, out: &mut Vec<Progress>) {
        let text = std::mem::take(&mut self.reply.text);
        if !text.is_empty() {
            out.push(Progress::Reply(text));
        }
    }
}

fn decode_key(raw: &[u8]) -> Result<String, String> {
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice(&quoted).map_err(|error| format!("a key is not a JSON string ({error})"))
}

fn shown(byte: u8) -> String {
    if byte.is_ascii_graphic() { format!("`{}`", byte as char) } else { format!("byte 0x{byte:02x}") }
}

/// Decodes the reply string one byte at a time: escapes, `\uXXXX` with
/// surrogate pairs, and UTF-8 characters, each of which may be split
/// across pieces. A lone surrogate or invalid UTF-8 becomes U+FFFD.
#[derive(Debug, Default)]
struct ReplyDecoder {
    /// Decoded text not yet handed over.
    text: String,
    /// Bytes of an unfinished UTF-8 character.
    pending: Vec<u8>,
    escape: Escape,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
}

#[derive(Debug, Default)]
enum Escape {
    #[default]
    None,
    Backslash,
    Unicode(Vec<u8>),
}

impl ReplyDecoder {
    /// Reads one byte; `Ok(true)` at the closing quote.
    fn push(&mut self, byte: u8) -> Result<bool, String> {
        match std::mem::take(&mut self.escape) {
            Escape::Unicode(mut hex) => {
                if !byte.is_ascii_hexdigit() {
                    return Err(format!("expected a hex digit in a `\\u` escape, found {}", shown(byte)));
                }
                hex.push(byte);
                if hex.len() < 4 {
                    self.escape = Escape::Unicode(hex);
                    return Ok(false);
                }
                let digits = std::str::from_utf8(&hex).map_err(|error| error.to_string())?;
                let unit = u16::from_str_radix(digits, 16).map_err(|error| error.to_string())?;
                self.code_unit(unit);
            }
            Escape::Backslash => {
                if byte == b'u' {
                    self.escape = Escape::Unicode(Vec::with_capacity(4));
                    return Ok(false);
                }
                let decoded = match byte {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    _ => return Err(format!("unknown escape `\\{}`", byte as char)),
                };
                self.lone_high();
                self.text.push(decoded);
            }
            Escape::None => match byte {
                b'\\' => {
                    self.flush_pending();
                    self.escape = Escape::Backslash;
                }
                b'"' => {
                    self.lone_high();
                    self.flush_pending();
                    return Ok(true);
                }
                _ => {
                    self.lone_high();
                    self.pending.push(byte);
                    self.decode_pending();
                }
            },
        }
        Ok(false)
    }

    fn code_unit(&mut self, unit: u16) {
        match (self.high.take(), unit) {
            (Some(high), 0xDC00..=0xDFFF) => {
                let code = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                self.text.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            (high, _) => {
                if high.is_some() {
                    self.text.push(char::REPLACEMENT_CHARACTER);
                }
                match unit {
                    0xD800..=0xDBFF => self.high = Some(unit),
                    _ => self.text.push(char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER)),
                }
            }
        }
    }

    /// A high surrogate not followed by a `\u` escape stands alone.
    fn lone_high(&mut self) {
        if self.high.take().is_some() {
            self.text.push(char::REPLACEMENT_CHARACTER);
        }
    }

    /// Moves the complete characters of `pending` to `text`.
    fn decode_pending(&mut self) {
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    self.text.push_str(text);
                    self.pending.clear();
                    return;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    self.text.push_str(&String::from_utf8_lossy(self.pending.get(..valid).unwrap_or_default()));
                    match error.error_len() {
                        // An unfinished character: wait for its next bytes.
                        None => {
                            self.pending.drain(..valid);
                            return;
                        }
                        Some(bad) => {
                            self.text.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// An unfinished character followed by something else is invalid.
    fn flush_pending(&mut self) {
        if !self.pending.is_empty() {
            self.text.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
