//! The bound on what a user hands a run: a message (a line of `--script`
//! or stdin, or a REPL line) and the `--data`/`--context` texts are at most
//! `max_message_bytes` (`--max-message-bytes`, else `[input]` in
//! `flowc.toml`, else [`DEFAULT_MAX_MESSAGE_BYTES`]). Too long is refused
//! with a clear error before anything runs or is stored, and a script is
//! read with the bound: an oversized line is never held in memory whole.

use crate::config::Config;
use std::io::BufRead;

/// A few hundred KB: far more than anyone types or pastes into a chat, far
/// less than what would strain memory (a message is held a few times over
/// by a turn: history, transcript, prompts).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// The bound for a run: the flag, else `max_message_bytes` in the
/// `[input]` table of its `flowc.toml` (`config`), else the default.
pub fn max_message_bytes(flag: Option<usize>, config: &Config) -> Result<usize, String> {
    if let Some(bytes) = flag {
        return Ok(bytes);
    }
    configured(config.table()).map_err(|message| format!("{}: {message}", config.shown()))
}

fn configured(table: &toml::Table) -> Result<usize, String> {
    let Some(input) = table.get("input") else {
        return Ok(DEFAULT_MAX_MESSAGE_BYTES);
    };
    let Some(input) = input.as_table() else {
        return Err("`input` must be a table with `max_message_bytes = N`".to_string());
    };
    if let Some(key) = input.keys().find(|key| *key != "max_message_bytes") {
        return Err(format!("unknown key `{key}` in [input] (known: max_message_bytes)"));
    }
    match input.get("max_message_bytes") {
        None => Ok(DEFAULT_MAX_MESSAGE_BYTES),
        Some(value) => value
            .as_integer()
            .and_then(|bytes| usize::try_from(bytes).ok())
            .filter(|bytes| *bytes > 0)
            .ok_or_else(|| "[input] max_message_bytes must be a positive number of bytes".to_string()),
    }
}

fn too_long(what: &str, bytes: usize, max: usize) -> String {
    format!(
        "{what} is {} long, over the maximum message size of {}; nothing was run or stored \
         (raise it with --max-message-bytes or [input] max_message_bytes in flowc.toml)",
        size(bytes),
        size(max)
    )
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{:.0} KB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} bytes")
    }
}

/// Refuses a text over the bound; `what` names it ("the message").
pub fn check(what: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max { Err(too_long(what, text.len(), max)) } else { Ok(()) }
}

/// The non-empty lines of `reader`, trimmed; an error naming the first
/// line over `max` bytes, which is skipped to its end without being kept.
pub fn read_lines(mut reader: impl BufRead, max: usize, source: &str) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        number += 1;
        // At most one byte over the bound is kept: enough to know.
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        let read = std::io::Read::take(&mut reader, limit)
            .read_until(b'\n', &mut line)
            .map_err(|error| format!("cannot read {source}: {error}"))?;
        if read == 0 {
            return Ok(lines);
        }
        let ended = line.last() == Some(&b'\n');
        let content = line.strip_suffix(b"\n").unwrap_or(&line);
        if content.len() > max || (!ended && read as u64 == limit) {
            let length =
                content.len() + skip_line(&mut reader).map_err(|error| format!("cannot read {source}: {error}"))?;
            return Err(too_long(&format!("line {number} of {source}"), length, max));
        }
        let text = String::from_utf8_lossy(content);
        let text = text.trim();
        if !text.is_empty() {
            lines.push(text.to_string());
        }
    }
}

/// Reads to the end of the line, keeping nothing; how many bytes it had.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<usize> {
    let mut skipped = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(skipped);
        }
        match buffer.iter().position(|byte| *byte == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(skipped + end);
            }
            None => {
                let length = buffer.len();
                reader.consume(length);
                skipped += length;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_within_the_bound_are_read_trimmed_and_blank_ones_dropped() {
        let read = read_lines("hi there \n\n  book it\nlast".as_bytes(), 16, "the script").unwrap();
        assert_eq!(read, ["hi there", "book it", "last"]);
    }

    #[test]
    fn a_line_over_the_bound_is_refused_with_its_number_and_size() {
        let text = format!("hi\n{}\nbye\n", "x".repeat(3000));
        let error = read_lines(text.as_bytes(), 2048, "the script").unwrap_err();
        assert!(
            error.starts_with("line 2 of the script is 3 KB long, over the maximum message size of 2 KB"),
            "{error}"
        );
        let exact = format!("{}\n", "y".repeat(2048));
        assert_eq!(read_lines(exact.as_bytes(), 2048, "s").unwrap().len(), 1, "the bound itself is allowed");
        let unended = "z".repeat(2049);
        assert!(read_lines(unended.as_bytes(), 2048, "s").is_err());
    }

    #[test]
    fn the_bound_comes_from_the_input_table() {
        let configured = |text: &str| configured(&text.parse::<toml::Table>().unwrap());
        assert_eq!(configured(""), Ok(DEFAULT_MAX_MESSAGE_BYTES));
        assert_eq!(configured("[input]\nmax_message_bytes = 1000\n"), Ok(1000));
        assert!(configured("[input]\nmax_message_bytes = 0\n").is_err());
        assert_eq!(
            configured("[input]\nmax_bytes = 1\n"),
            Err("unknown key `max_bytes` in [input] (known: max_message_bytes)".to_string())
        );
        assert!(check("the message", "abc", 2).is_err());
        assert!(check("the message", "ab", 2).is_ok());
    }
}
