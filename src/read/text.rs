//! Words: the tokenizer and the normalization every offline rule shares.
//!
//! A message is cut into [`Token`]s (words, digit runs and single symbols,
//! each with its byte span, so extraction can tell what is adjacent and can
//! slice the original text). Routing and yes/no questions compare *terms*:
//! content words, lowercased, stemmed by [`stem`], folded onto a canonical
//! word by a small synonym table, and marked `!` when a negation governs
//! them ([`terms_of`]).

use std::collections::HashMap;
use std::sync::LazyLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Letters, with apostrophes inside (`don't`, `it's`).
    Word,
    /// A run of ASCII digits.
    Number,
    /// Any other single character that is not whitespace.
    Symbol,
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) kind: Kind,
    /// Lowercased, with typographic apostrophes folded onto `'`.
    pub(crate) lower: String,
    /// Byte span in the text.
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Token {
    pub(crate) fn is_word(&self, word: &str) -> bool {
        self.kind == Kind::Word && self.lower == word
    }

    pub(crate) fn is_symbol(&self, symbol: char) -> bool {
        self.kind == Kind::Symbol && self.lower.chars().eq(std::iter::once(symbol))
    }

    pub(crate) fn is_alphanumeric(&self) -> bool {
        self.kind != Kind::Symbol
    }
}

fn is_apostrophe(ch: char) -> bool {
    matches!(ch, '\'' | '\u{2019}' | '\u{2018}')
}

/// Cuts `text` into tokens. Whitespace separates tokens and is dropped;
/// adjacency survives in the spans (`a.end == b.start`).
pub(crate) fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, ch)) = chars.next() {
        if ch.is_whitespace() {
            continue;
        }
        let mut end = start + ch.len_utf8();
        let kind = if ch.is_alphabetic() {
            while let Some(&(index, next)) = chars.peek() {
                let inner_apostrophe = is_apostrophe(next) && {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek().is_some_and(|&(_, after)| after.is_alphabetic())
                };
                if !(next.is_alphabetic() || inner_apostrophe) {
                    break;
                }
                end = index + next.len_utf8();
                chars.next();
            }
            Kind::Word
        } else if ch.is_ascii_digit() {
            while let Some(&(index, next)) = chars.peek() {
                if !next.is_ascii_digit() {
                    break;
                }
                end = index + next.len_utf8();
                chars.next();
            }
            Kind::Number
        } else {
            Kind::Symbol
        };
        let raw = text.get(start..end).unwrap_or_default();
        let lower = if raw.is_ascii() {
            raw.to_ascii_lowercase()
        } else {
            raw.chars().map(|c| if is_apostrophe(c) { '\'' } else { c }).collect::<String>().to_lowercase()
        };
        tokens.push(Token { kind, lower, start, end });
    }
    tokens
}

/// The token at `index` if it touches the one before it (no space between).
pub(crate) fn adjacent(tokens: &[Token], index: usize) -> Option<&Token> {
    let previous = tokens.get(index.checked_sub(1)?)?;
    let token = tokens.get(index)?;
    (previous.end == token.start).then_some(token)
}

/// Function words, conversational filler and the words every description
/// of a user shares ("the user wants to…"): they never decide a match.
pub(crate) fn is_stop_word(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "the"
            | "i"
            | "me"
            | "my"
            | "mine"
            | "myself"
            | "we"
            | "us"
            | "our"
            | "ours"
            | "you"
            | "your"
            | "yours"
            | "he"
            | "him"
            | "his"
            | "she"
            | "her"
            | "it"
            | "its"
            | "they"
            | "them"
            | "their"
            | "this"
            | "that"
            | "these"
            | "those"
            | "there"
            | "here"
            | "am"
            | "is"
            | "are"
            | "was"
            | "were"
            | "be"
            | "been"
            | "being"
            | "do"
            | "does"
            | "did"
            | "done"
            | "doing"
            | "have"
            | "has"
            | "had"
            | "having"
            | "to"
            | "of"
            | "in"
            | "on"
            | "at"
            | "for"
            | "with"
            | "by"
            | "from"
            | "about"
            | "into"
            | "onto"
            | "over"
            | "under"
            | "up"
            | "out"
            | "off"
            | "as"
            | "than"
            | "then"
            | "so"
            | "too"
            | "very"
            | "just"
            | "also"
            | "only"
            | "and"
            | "or"
            | "but"
            | "if"
            | "because"
            | "while"
            | "when"
            | "where"
            | "what"
            | "which"
            | "who"
            | "whom"
            | "whose"
            | "why"
            | "how"
            | "can"
            | "could"
            | "would"
            | "should"
            | "will"
            | "shall"
            | "may"
            | "might"
            | "must"
            | "please"
            | "pls"
            | "thanks"
            | "thank"
            | "hi"
            | "hello"
            | "hey"
            | "dear"
            | "some"
            | "any"
            | "all"
            | "each"
            | "every"
            | "no"
            | "not"
            | "nor"
            | "yes"
            | "yeah"
            | "ok"
            | "okay"
            | "want"
            | "wants"
            | "wanted"
            | "wanting"
            | "wanna"
            | "like"
            | "need"
            | "needs"
            | "needed"
            | "wish"
            | "user"
            | "users"
            | "ask"
            | "asks"
            | "asked"
            | "asking"
            | "say"
            | "says"
            | "said"
            | "tell"
            | "tells"
            | "let"
            | "get"
            | "got"
            | "go"
            | "going"
            | "gonna"
            | "make"
            | "actually"
            | "well"
            | "um"
            | "uh"
            | "oh"
            | "hmm"
            | "really"
            | "maybe"
            | "now"
            | "still"
            | "again"
            | "more"
            | "other"
            | "question"
            | "questions"
            | "problem"
            | "problems"
            | "issue"
            | "issues"
            | "thing"
            | "things"
            | "something"
            | "anything"
            | "number"
            | "one"
            | "two"
            | "three"
            | "four"
            | "five"
            | "six"
            | "seven"
            | "eight"
            | "nine"
            | "ten"
    )
}

/// Light suffix stripping, the same for both sides of every comparison, so
/// `booking`/`booked`/`books` → `book` and `change`/`changing`/`changed` →
/// `chang`. Not a linguistic stemmer: it only has to be consistent.
pub(crate) fn stem(word: &str) -> String {
    let length = word.chars().count();
    let mut stemmed = if let Some(base) = word.strip_suffix("ies").filter(|_| length >= 5) {
        format!("{base}y")
    } else if let Some(base) = word.strip_suffix("ing").filter(|_| length >= 6) {
        base.to_string()
    } else if let Some(base) = word.strip_suffix("ed").filter(|_| length >= 5) {
        base.to_string()
    } else if let Some(base) = word.strip_suffix('s').filter(|_| length >= 4 && !word.ends_with("ss")) {
        base.to_string()
    } else {
        word.to_string()
    };
    if stemmed.chars().count() >= 4 && stemmed.ends_with('e') {
        stemmed.pop();
    }
    let mut tail = stemmed.chars().rev();
    let doubled_consonant = match (tail.next(), tail.next()) {
        (Some(last), Some(before)) => last == before && !matches!(last, 'a' | 'e' | 'i' | 'o' | 'u'),
        _ => false,
    };
    if doubled_consonant && stemmed.chars().count() >= 4 {
        stemmed.pop();
    }
    stemmed
}

/// Words that mean the same thing for routing and yes/no questions; the
/// first of each group is the canonical term. Kept small on purpose: each
/// entry is a guess about what users say.
const SYNONYMS: &[&[&str]] = &[
    &[
        "change",
        "modify",
        "different",
        "another",
        "switch",
        "reschedule",
        "move",
        "edit",
        "update",
        "alter",
        "amend",
        "instead",
    ],
    &["human", "person", "agent", "someone", "somebody", "operator", "representative", "staff", "colleague"],
    &["urgent", "down", "outage", "emergency", "asap", "immediately", "critical", "crash", "offline"],
    &[
        "angry",
        "upset",
        "furious",
        "frustrated",
        "annoyed",
        "mad",
        "unhappy",
        "ridiculous",
        "terrible",
        "awful",
        "hate",
        "disappointed",
        "fed",
    ],
    &["book", "reserve", "reservation"],
    &["refund", "reimburse", "reimbursement", "chargeback"],
    &["bill", "invoice", "charge", "payment", "pay", "paid"],
    &["cancel", "cancellation"],
    &["date", "day"],
    GREETINGS,
];

static CANONICAL: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
    let mut canonical = HashMap::new();
    for group in SYNONYMS {
        let Some(first) = group.first() else { continue };
        let head = stem(first);
        for word in *group {
            canonical.insert(stem(word), head.clone());
        }
    }
    canonical
});

/// Greetings: filler where a message gives values (a stop word), but a term
/// where it is asked what it says, so "hello" answers a signal whose `when`
/// is "the user says hello" (all fold onto `hello`).
const GREETINGS: &[&str] = &["hello", "hi", "hey", "hiya", "howdy", "greet", "greeting", "greetings"];

/// The term a content word stands for: stemmed, then folded by the synonym
/// table. `None` for stop words (greetings aside), contractions and
/// one-letter words.
pub(crate) fn term(word: &str) -> Option<String> {
    let word = word.strip_suffix("'s").unwrap_or(word);
    if word.contains('\'') || word.chars().count() < 2 || (is_stop_word(word) && !GREETINGS.contains(&word)) {
        return None;
    }
    let stemmed = stem(word);
    Some(CANONICAL.get(&stemmed).cloned().unwrap_or(stemmed))
}

/// Words that negate the rest of their clause. `no` does too, except as
/// the first word of a clause, where it answers a question ("no, I want to
/// change the date", "No I want to change the date").
fn negates(word: &str, clause_start: bool) -> bool {
    matches!(word, "not" | "never" | "cannot" | "dont" | "nor" | "without")
        || word.ends_with("n't")
        || (!clause_start && matches!(word, "no"))
}

/// Where a clause ends: sentence punctuation, or `but`.
fn ends_clause(token: &Token) -> bool {
    match token.kind {
        Kind::Symbol => matches!(token.lower.as_str(), "," | "." | ";" | ":" | "!" | "?"),
        Kind::Word => matches!(token.lower.as_str(), "but" | "however" | "though"),
        Kind::Number => false,
    }
}

/// The distinct terms of some tokens, in order of first appearance. A term
/// after a negation in the same clause is marked `!` (`it does not work` →
/// `!work`), so it only matches a negated term: "it works" is not "it does
/// not work". Digits never count: a number says nothing about a topic.
pub(crate) fn terms_of(tokens: &[Token]) -> Vec<String> {
    located_terms(tokens).into_iter().map(|located| located.term).collect()
}

/// A term of a message and the tokens that say it (from the negation, for
/// a negated term): the evidence of a yes that rests on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocatedTerm {
    pub(crate) term: String,
    pub(crate) first: usize,
    pub(crate) last: usize,
}

/// [`terms_of`], each term with where it first appears.
pub(crate) fn located_terms(tokens: &[Token]) -> Vec<LocatedTerm> {
    let mut found: Vec<LocatedTerm> = Vec::new();
    let mut negation: Option<usize> = None;
    let mut clause_start = true;
    for (index, token) in tokens.iter().enumerate() {
        if ends_clause(token) {
            negation = None;
            clause_start = true;
            continue;
        }
        if token.kind != Kind::Word {
            continue;
        }
        let starts_clause = std::mem::replace(&mut clause_start, false);
        if negates(&token.lower, starts_clause) {
            negation = negation.or(Some(index));
            continue;
        }
        let Some(term) = term(&token.lower) else { continue };
        let (term, first) = match negation {
            Some(first) => (format!("!{term}"), first),
            None => (term, index),
        };
        if !found.iter().any(|known| known.term == term) {
            found.push(LocatedTerm { term, first, last: index });
        }
    }
    found
}

pub(crate) fn terms(text: &str) -> Vec<String> {
    terms_of(&tokenize(text))
}

/// Words only (no symbols), lowercased: what phrases are compared on, so
/// `Ritz-Paris` and `ritz paris` are the same sequence.
pub(crate) fn word_sequence(text: &str) -> Vec<String> {
    tokenize(text).into_iter().filter(Token::is_alphanumeric).map(|token| token.lower).collect()
}

/// Words in `text`, as a cost estimate (the offline provider's "tokens").
pub(crate) fn word_count(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// The words of `message` that tokens `first..=last` cover: the evidence
/// of a value read from them.
pub(crate) fn span_text(message: &str, tokens: &[Token], first: usize, last: usize) -> String {
    let start = tokens.get(first).map_or(0, |token| token.start);
    let end = tokens.get(last).map_or(start, |token| token.end);
    message.get(start..end).unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, String)> {
        tokenize(text).into_iter().map(|token| (token.kind, token.lower)).collect()
    }

    #[test]
    fn tokens_split_words_digits_and_symbols() {
        assert_eq!(
            kinds("I'd book ORD-1234, 2026-12-04T10"),
            vec![
                (Kind::Word, "i'd".into()),
                (Kind::Word, "book".into()),
                (Kind::Word, "ord".into()),
                (Kind::Symbol, "-".into()),
                (Kind::Number, "1234".into()),
                (Kind::Symbol, ",".into()),
                (Kind::Number, "2026".into()),
                (Kind::Symbol, "-".into()),
                (Kind::Number, "12".into()),
                (Kind::Symbol, "-".into()),
                (Kind::Number, "04".into()),
                (Kind::Word, "t".into()),
                (Kind::Number, "10".into()),
            ]
        );
    }

    #[test]
    fn apostrophes_stay_inside_words_only() {
        assert_eq!(
            kinds("Don’t 'quote'"),
            vec![
                (Kind::Word, "don't".into()),
                (Kind::Symbol, "'".into()),
                (Kind::Word, "quote".into()),
                (Kind::Symbol, "'".into()),
            ]
        );
    }

    #[test]
    fn spans_keep_adjacency() {
        let tokens = tokenize("ORD-1234 x");
        assert!(adjacent(&tokens, 1).is_some());
        assert!(adjacent(&tokens, 3).is_none());
        assert!(adjacent(&tokens, 0).is_none());
        assert!(adjacent(&tokens, 9).is_none());
    }

    #[test]
    fn stems_agree_across_inflections() {
        for (a, b) in [
            ("booking", "book"),
            ("booked", "books"),
            ("change", "changing"),
            ("changed", "changes"),
            ("date", "dates"),
            ("billing", "bill"),
            ("cancelled", "cancel"),
            ("running", "run"),
            ("guests", "guest"),
            ("companies", "company"),
            ("address", "addresses"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} vs {b}");
        }
        assert_eq!(stem("need"), "need");
        assert_eq!(stem("yes"), "yes");
    }

    #[test]
    fn negation_marks_the_rest_of_its_clause() {
        assert_eq!(terms("it still does not work"), vec!["!work"]);
        assert_eq!(terms("it doesn't work, the printer"), vec!["!work", "printer"]);
        assert_eq!(terms("I don't want to change the date"), vec!["!chang", "!dat"]);
        assert_eq!(terms("not the date but the hotel"), vec!["!dat", "hotel"]);
        assert_eq!(terms("no refund needed"), vec!["refund"]);
        assert_eq!(terms("I want no refund"), vec!["!refund"]);
        assert_eq!(terms("No I want to change the date"), vec!["chang", "dat"]);
        assert_eq!(terms("no, change the date"), vec!["chang", "dat"]);
    }

    #[test]
    fn terms_drop_stop_words_and_fold_synonyms() {
        // A greeting is a term (a signal may ask for it), folded onto `hello`.
        assert_eq!(terms("Hi, I'd like to book a hotel room"), vec!["hello", "book", "hotel", "room"]);
        assert_eq!(terms("hey there, greetings"), vec!["hello"]);
        assert_eq!(terms("the user wants to change the date"), vec!["chang", "dat"]);
        assert_eq!(terms("Can I modify the day?"), vec!["chang", "dat"]);
        assert_eq!(terms("I want to talk to a real person"), vec!["talk", "real", "human"]);
        assert_eq!(terms("the hotel's 2 rooms"), vec!["hotel", "room"]);
        assert!(terms("no").is_empty());
        assert!(terms("not really, no").is_empty());
        assert!(terms("2026-12-04").is_empty());
    }
}
