//! A string field's `pattern`, searched for in a message.
//!
//! Schema patterns are usually anchored (`^[^@ ]+@[^@ ]+$`): they describe
//! the whole value, not where it sits in a sentence. So a pattern is tried,
//! in order, on the whole message (trimmed of surrounding punctuation), on
//! each whitespace-separated piece of it (trimmed the same way), and finally
//! unanchored over the message, where a candidate must still match the
//! pattern as written from end to end. The first match wins.
//!
//! Compiled regexes are cached per pattern source in [`Patterns`]: a
//! program has few patterns and every turn reuses them.

use regex::Regex;
use std::collections::HashMap;

pub(crate) struct Pattern {
    exact: Regex,
    /// The pattern with its outer `^`/`$` (or `\A`/`\z`) removed, when it
    /// had any.
    search: Option<Regex>,
}

/// A value found by a pattern, with its byte span in the message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Found {
    pub(crate) value: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

#[derive(Default)]
pub(crate) struct Patterns {
    compiled: HashMap<String, Option<Pattern>>,
}

impl Patterns {
    /// The compiled pattern, or `None` when it is not a valid regex (the
    /// compiler rejects those; the field then extracts nothing).
    pub(crate) fn get(&mut self, source: &str) -> Option<&Pattern> {
        if !self.compiled.contains_key(source) {
            self.compiled.insert(source.to_string(), compile(source));
        }
        self.compiled.get(source)?.as_ref()
    }
}

fn compile(source: &str) -> Option<Pattern> {
    let exact = Regex::new(source).ok()?;
    let search = unanchored(source).and_then(|body| Regex::new(&body).ok());
    Some(Pattern { exact, search })
}

fn unanchored(source: &str) -> Option<String> {
    let mut body = source;
    let mut changed = false;
    if let Some(rest) = body.strip_prefix('^').or_else(|| body.strip_prefix("\\A")) {
        body = rest;
        changed = true;
    }
    if let Some(rest) = body.strip_suffix('$').or_else(|| body.strip_suffix("\\z")) {
        // `\$` is a literal dollar, not an anchor.
        let escaped = rest.chars().rev().take_while(|ch| *ch == '\\').count() % 2 == 1;
        if !escaped {
            body = rest;
            changed = true;
        }
    }
    changed.then(|| body.to_string())
}

const OPENERS: &[char] = &['"', '\'', '(', '[', '{', '<', '\u{201c}', '\u{2018}'];
const CLOSERS: &[char] = &['"', '\'', ')', ']', '}', '>', '.', ',', ';', ':', '!', '?', '\u{201d}', '\u{2019}'];

/// `text` without surrounding whitespace, quotes, brackets and trailing
/// sentence punctuation, and the byte offset of what is left.
fn trim_piece(text: &str, offset: usize) -> (&str, usize) {
    let start_trimmed = text.trim_start().trim_start_matches(OPENERS);
    let offset = offset + (text.len() - start_trimmed.len());
    (start_trimmed.trim_end().trim_end_matches(CLOSERS).trim_end(), offset)
}

/// Whitespace-separated pieces with their byte offsets.
fn pieces(text: &str) -> impl Iterator<Item = (usize, &str)> {
    // Each piece is a subslice of `text`, so the address difference is its
    // byte offset.
    let base = text.as_ptr() as usize;
    text.split_whitespace().map(move |piece| (piece.as_ptr() as usize - base, piece))
}

impl Pattern {
    /// The first value in `message` the pattern accepts. With
    /// `require_code`, a value made only of letters and spaces is refused:
    /// a loose pattern (`^[A-Za-z ]+$`) must not pick an arbitrary word of
    /// a message that was not answering this field.
    pub(crate) fn find(&self, message: &str, require_code: bool) -> Option<Found> {
        // A match must hold a letter or a digit: symbols alone ("!@[" for
        // an email pattern written loosely) are no value, and grounding
        // could never find their words in the message.
        let accept = |value: &str| {
            value.chars().any(char::is_alphanumeric)
                && (!require_code || value.chars().any(|ch| !(ch.is_alphabetic() || ch.is_whitespace())))
        };
        let first_in = |text: &str, offset: usize| {
            self.exact.find_iter(text).find(|found| accept(found.as_str())).map(|found| Found {
                value: found.as_str().to_string(),
                start: offset + found.start(),
                end: offset + found.end(),
            })
        };

        let (whole, offset) = trim_piece(message, 0);
        if let Some(found) = first_in(whole, offset) {
            return Some(found);
        }
        for (start, piece) in pieces(message) {
            let (piece, offset) = trim_piece(piece, start);
            if let Some(found) = first_in(piece, offset) {
                return Some(found);
            }
        }
        let search = self.search.as_ref()?;
        search.find_iter(message).find_map(|found| {
            let (candidate, offset) = trim_piece(found.as_str(), found.start());
            let whole_match = self.exact.find(candidate).is_some_and(|m| m.start() == 0 && m.end() == candidate.len());
            (whole_match && accept(candidate)).then(|| Found {
                value: candidate.to_string(),
                start: offset,
                end: offset + candidate.len(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pattern: &str, message: &str, require_code: bool) -> Option<String> {
        let mut patterns = Patterns::default();
        let found = patterns.get(pattern)?.find(message, require_code)?;
        assert_eq!(message.get(found.start..found.end), Some(found.value.as_str()), "span of {found:?}");
        Some(found.value)
    }

    const EMAIL: &str = "^[^@ ]+@[^@ ]+$";
    const ORDER: &str = "^ORD-[0-9]{4}$";

    #[test]
    fn anchored_pattern_on_the_whole_message() {
        assert_eq!(check(EMAIL, "ann@example.com", true).as_deref(), Some("ann@example.com"));
        assert_eq!(check(EMAIL, "  ann@example.com. ", true).as_deref(), Some("ann@example.com"));
    }

    #[test]
    fn anchored_pattern_on_a_piece_of_the_message() {
        assert_eq!(check(EMAIL, "it's ann@example.com, thanks", true).as_deref(), Some("ann@example.com"));
        assert_eq!(check(ORDER, "I want a refund for ORD-1234", true).as_deref(), Some("ORD-1234"));
        assert_eq!(check(ORDER, "order (ORD-1234)?", true).as_deref(), Some("ORD-1234"));
    }

    #[test]
    fn unanchored_pattern_finds_its_match() {
        assert_eq!(check("ORD-[0-9]{4}", "refund for #ORD-1234 please", true).as_deref(), Some("ORD-1234"));
    }

    #[test]
    fn pattern_spanning_words_is_searched_unanchored() {
        assert_eq!(check("^[0-9]{3} [0-9]{4}$", "call 555 1234 now", true).as_deref(), Some("555 1234"));
    }

    #[test]
    fn no_match_is_none() {
        assert_eq!(check(ORDER, "ord-1234", true), None);
        assert_eq!(check(EMAIL, "no email here", true), None);
    }

    #[test]
    fn loose_patterns_need_the_field_to_be_asked() {
        assert_eq!(check("^[A-Za-z]+$", "Book the Grand Hotel", true), None);
        assert_eq!(check("^[A-Za-z ]+$", "Ann Smith", false).as_deref(), Some("Ann Smith"));
    }

    #[test]
    fn escaped_dollar_is_not_an_anchor() {
        assert_eq!(unanchored("^price\\$"), Some("price\\$".to_string()));
        assert_eq!(unanchored("^a$"), Some("a".to_string()));
        assert_eq!(unanchored("a"), None);
    }

    #[test]
    fn invalid_pattern_finds_nothing() {
        assert_eq!(check("(", "(", false), None);
    }
}
