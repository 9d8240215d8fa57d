//! Whether a fused reply tells the user a value code did not accept: the
//! one check that lets a reply written beside a rejected proposal be used
//! at all. A weak model echoes its inventions ("2026-06-03 is a fantastic
//! choice" beside a date the message never gave), so the reply is read
//! for every rendering of the value it might repeat: the value as the
//! model wrote it, the words it cited as evidence, the number in digits or
//! words, the date in the common formats (with or without the year), a
//! word of its own (the Ritz of "Ritz Paris"). What a truthful reply may
//! say anyway is no sign of the invention: the step's prompt rendered on
//! the accepted data (the reply code would have asked for says it too),
//! the accepted values themselves, and, for the evidence, the user's own
//! words.

use crate::read::text::is_stop_word;
use crate::read::words_of;
use crate::runtime::engine::claims::reading::{Text, date_renderings, iso_date, only_date};
use chrono::{Datelike, NaiveDate};
use serde_json::Value;

/// A value the model proposed that the data does not hold once the turn
/// has resolved, with the words it cited.
pub(in crate::runtime::engine) struct Unaccepted<'a> {
    pub(in crate::runtime::engine) field: &'a str,
    pub(in crate::runtime::engine) value: &'a Value,
    pub(in crate::runtime::engine) evidence: Option<&'a str>,
}

/// What a reply is read against: the reply the step's prompt would give,
/// rendered on the accepted data; the accepted values, as text; the user's
/// message; and today (for dates written without their year).
pub(in crate::runtime::engine) struct Expected<'a> {
    pub(in crate::runtime::engine) prompt: &'a str,
    pub(in crate::runtime::engine) known: &'a [String],
    pub(in crate::runtime::engine) message: &'a str,
    pub(in crate::runtime::engine) today: NaiveDate,
}

/// Whether any text could say `value`: a yes/no has no rendering of its
/// own (a reply may say "booked" or "great" for it), so a reply beside a
/// rejected one cannot be checked and is never used.
pub(in crate::runtime::engine) fn checkable(value: &Value) -> bool {
    match value {
        Value::Bool(_) => false,
        Value::Array(items) => items.iter().all(checkable),
        Value::Object(members) => members.values().all(checkable),
        Value::Null | Value::Number(_) | Value::String(_) => true,
    }
}

/// The first rendering of `rejected` that `reply` holds and the expected
/// reply does not, in words for the trace; `None` when the reply says none.
pub(in crate::runtime::engine) fn mentioned(reply: &str, rejected: &Unaccepted, expected: &Expected) -> Option<String> {
    let text = Text::of(reply, expected.today);
    let mut truthful = vec![expected.prompt];
    truthful.extend(expected.known.iter().map(String::as_str));
    let allowed = Text::of(&truthful.join("\n"), expected.today);
    if let Some(found) = value_mentioned(&text, &allowed, rejected.value) {
        return Some(found);
    }
    let evidence = rejected.evidence?.trim();
    if quoted(&text, &allowed, evidence) {
        return Some(format!("its evidence \"{evidence}\""));
    }
    // The user's words may be echoed; words of the evidence the user did
    // not say are the model's own (a hotel "Grand Hotel" cited for a
    // greeting).
    truthful.push(expected.message);
    let allowed = Text::of(&truthful.join("\n"), expected.today);
    own_word(&text, &allowed, evidence).map(|word| format!("\"{word}\" of its evidence \"{evidence}\""))
}

/// The first of `values` that `reply` does not say in any of its
/// renderings (a date in another format, a number in words), by index.
pub(in crate::runtime::engine) fn first_unsaid(reply: &str, values: &[&Value], today: NaiveDate) -> Option<usize> {
    let (text, nothing) = (Text::of(reply, today), Text::of("", today));
    values.iter().position(|value| value_mentioned(&text, &nothing, value).is_none())
}

fn value_mentioned(text: &Text, allowed: &Text, value: &Value) -> Option<String> {
    match value {
        Value::Null | Value::Bool(_) => None,
        Value::Number(number) => number.as_f64().and_then(|number| number_mentioned(text, allowed, number)),
        Value::String(string) => string_mentioned(text, allowed, string),
        Value::Array(items) => items.iter().find_map(|item| value_mentioned(text, allowed, item)),
        Value::Object(members) => members.values().find_map(|member| value_mentioned(text, allowed, member)),
    }
}

fn number_mentioned(text: &Text, allowed: &Text, number: f64) -> Option<String> {
    let said = |reading: &Text| reading.numbers.iter().any(|found| (found - number).abs() < 1e-9);
    (said(text) && !said(allowed)).then(|| format!("the number {number}"))
}

fn string_mentioned(text: &Text, allowed: &Text, string: &str) -> Option<String> {
    let shown = string.trim();
    if let Some(date) = iso_date(shown).or_else(|| only_date(shown, text.today))
        && let Some(found) = date_mentioned(text, allowed, date)
    {
        return Some(found);
    }
    if let Ok(number) = shown.parse::<f64>()
        && let Some(found) = number_mentioned(text, allowed, number)
    {
        return Some(found);
    }
    if quoted(text, allowed, shown) {
        return Some(format!("\"{shown}\""));
    }
    // A part of a name says it too ("the Ritz" for "Ritz Paris").
    own_word(text, allowed, shown).map(|word| format!("\"{word}\" of \"{shown}\""))
}

/// The first content word of `source` (three letters or more, not a
/// function word) that `text` holds and `allowed` does not.
fn own_word(text: &Text, allowed: &Text, source: &str) -> Option<String> {
    let words = |text: &str| -> String {
        // An elided article is part of its word ("l'Hotel"): the word
        // after it is what a reply may share.
        let mut words = String::from(" ");
        for word in words_of(text).split_whitespace() {
            words.push_str(word.rsplit('\'').next().unwrap_or(word));
            words.push(' ');
        }
        words
    };
    let (said, truthful) = (words(&text.raw), words(&allowed.raw));
    words_of(source)
        .split_whitespace()
        .map(|word| word.rsplit('\'').next().unwrap_or(word))
        .filter(|word| word.chars().any(char::is_alphabetic) && word.chars().count() > 2 && !is_stop_word(word))
        .find(|word| {
            let word = format!(" {word} ");
            said.contains(&word) && !truthful.contains(&word)
        })
        .map(str::to_string)
}

/// Whether `text` repeats `quote`: its words in order, or, for a quote of
/// symbols only (a model's stray JSON), its characters; a quote the
/// expected reply holds as well is not counted.
fn quoted(text: &Text, allowed: &Text, quote: &str) -> bool {
    let words = words_of(quote);
    if words.trim().is_empty() {
        let raw = quote.trim().to_lowercase();
        return !raw.is_empty() && text.raw.contains(&raw) && !allowed.raw.contains(&raw);
    }
    text.has_words(&words) && !allowed.has_words(&words)
}

/// A date in the reply with the rejected date's month and day (a year
/// left out still names it), or one of its common renderings.
fn date_mentioned(text: &Text, allowed: &Text, date: NaiveDate) -> Option<String> {
    let day = (date.month(), date.day());
    if text.dates.contains(&day) && !allowed.dates.contains(&day) {
        return Some(format!("the date {date}"));
    }
    date_renderings(date)
        .into_iter()
        .find(|rendering| {
            let words = words_of(rendering);
            text.has_words(&words) && !allowed.has_words(&words)
        })
        .map(|rendering| format!("the date {date} as \"{rendering}\""))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 1, 5).unwrap()
    }

    /// What `reply` is found to say of `value` (cited as `evidence`) at a
    /// step whose prompt, rendered, is `prompt`.
    fn check(reply: &str, value: Value, evidence: Option<&str>, prompt: &str) -> Option<String> {
        answer(reply, value, evidence, prompt, &[], "")
    }

    /// [`check`] with the accepted values and the user's message.
    fn answer(
        reply: &str,
        value: Value,
        evidence: Option<&str>,
        prompt: &str,
        known: &[&str],
        message: &str,
    ) -> Option<String> {
        let rejected = Unaccepted { field: "f", value: &value, evidence };
        let known: Vec<String> = known.iter().map(|value| value.to_string()).collect();
        mentioned(reply, &rejected, &Expected { prompt, known: &known, message, today: today() })
    }

    #[test]
    fn an_invented_date_is_found_in_every_common_format_with_or_without_its_year() {
        let date = || json!("2026-06-03");
        let prompt = "For which date?";
        for reply in [
            "2026-06-03 is a fantastic choice! How many guests?",
            "Great, June 3rd it is. How many guests?",
            "Great, 3 June. How many guests?",
            "the 3rd of June works. How many guests?",
            "Jun 3, 2026 noted. How many guests?",
            "Noted: 03/06/2026. How many guests?",
            "Noted: 6/3/2026. How many guests?",
            "Noted: 3.6.2026. How many guests?",
            "Noted for 06/03. How many guests?",
        ] {
            assert!(check(reply, date(), None, prompt).is_some(), "{reply}");
        }
        assert_eq!(check("How many guests will there be?", date(), None, prompt), None);
        // Another date is not this one.
        assert_eq!(check("December 4th, lovely. How many guests?", date(), None, prompt), None);
    }

    #[test]
    fn an_invented_number_is_found_in_digits_and_in_words_but_not_in_a_date() {
        let prompt = "Shall I book Grand Hotel on 2026-12-04 for 2 guests?";
        for reply in ["Shall I book it for 3 guests?", "Three guests, noted. Shall I book?", "So, 3?"] {
            assert!(check(reply, json!(3), None, prompt).is_some(), "{reply}");
        }
        // 3 in a date or in an ordinal is not the count.
        assert_eq!(check("Shall I book Grand Hotel on 2026-12-03 for 2 guests?", json!(3), None, prompt), None);
        assert_eq!(
            check("Your 3rd stay! Shall I book Grand Hotel on 2026-12-04 for 2 guests?", json!(3), None, prompt),
            None
        );
        // The number the prompt itself says (the accepted count) is no sign.
        assert_eq!(check("Shall I book Grand Hotel on 2026-12-04 for 2 guests?", json!(2), None, prompt), None);
        // A number written as text is read as a number too.
        assert!(check("For three guests?", json!("3"), None, "How many guests?").is_some());
    }

    #[test]
    fn an_invented_name_is_found_whole_or_by_a_word_of_its_own() {
        let prompt = "For which date?";
        let ritz = || json!("Ritz Paris");
        assert!(check("The Ritz Paris is lovely. For which date?", ritz(), None, prompt).is_some());
        assert!(check("The ritz, great. For which date?", ritz(), None, prompt).is_some(), "any case, a part");
        assert_eq!(check("For which date would you like to come?", ritz(), None, prompt), None);
        // A word the expected reply holds is no sign: the accepted hotel
        // shares it.
        let confirm = "Shall I book Grand Hotel on 2026-12-04 for 2 guests?";
        assert_eq!(check(confirm, json!("Grand Plaza"), None, confirm), None);
        assert!(
            check("Shall I book Grand Plaza on 2026-12-04 for 2 guests?", json!("Grand Plaza"), None, confirm)
                .is_some()
        );
    }

    #[test]
    fn stray_symbols_and_the_cited_evidence_are_found_as_written() {
        let prompt = "For which date?";
        let garbage = || json!("); } }, {");
        assert!(check("Noted ); } }, { For which date?", garbage(), None, prompt).is_some());
        assert_eq!(check("For which date?", garbage(), None, prompt), None);
        let found = check("Please give it as YYYY-MM-DD.", json!("2026-11-27"), Some("YYYY-MM-DD"), prompt);
        assert_eq!(found.as_deref(), Some("its evidence \"YYYY-MM-DD\""));
        assert!(check("Sure: integer|null guests?", json!(3), Some("integer|null"), prompt).is_some());
        // Evidence the expected reply holds (the accepted date, cited for an
        // invented count) is no sign.
        let confirm = "Shall I book Grand Hotel on 2026-12-04 for 2 guests?";
        assert_eq!(check(confirm, json!(5), Some("2026-12-04"), confirm), None);
    }

    #[test]
    fn words_of_the_evidence_the_user_did_not_say_are_the_models_own() {
        // SmolLM2 on "Hi, I'd like to book a hotel room": a hotel "Bonjour"
        // cited as "Bienvenue à la Grand Hotel", and a reply that names a
        // Grand Hotel nobody chose.
        let prompt = "Which hotel would you like to book?";
        let message = "Hi, I'd like to book a hotel room";
        let found = answer(
            "Je vais bienvenue à l'Hotel de Grand Hotel.",
            json!("Bonjour"),
            Some("Bienvenue à la Grand Hotel"),
            prompt,
            &[],
            message,
        );
        assert_eq!(found.as_deref(), Some("\"bienvenue\" of its evidence \"Bienvenue à la Grand Hotel\""));
        // Evidence that quotes the user is theirs to hear again.
        let echo = answer("A hotel room, gladly. Which hotel?", json!(5), Some(message), prompt, &[], message);
        assert_eq!(echo, None);
        // An elided article is no word of its own: "l'Hotel" is "hotel",
        // which the prompt says.
        let elided =
            answer("Bienvenue ! Which hotel?", json!("Bonjour"), Some("La date de l'Hotel"), prompt, &[], message);
        assert_eq!(elided, None);
        // An accepted value may be said, though the invented value's
        // evidence names it (the accepted hotel, cited for a made-up date).
        let found = answer(
            "The Grand Hotel, lovely. For which date?",
            json!("2026-06-03"),
            Some("Grand Hotel"),
            "For which date?",
            &["Grand Hotel"],
            "The Grand Hotel, please",
        );
        assert_eq!(found, None);
        // But not a word of the invented value itself, though the user
        // said it.
        let found = answer("The Ritz! For which date?", json!("Ritz"), None, "For which date?", &[], "not the Ritz");
        assert_eq!(found.as_deref(), Some("\"Ritz\""));
    }

    #[test]
    fn a_yes_or_no_cannot_be_checked() {
        assert!(!checkable(&json!(true)));
        assert!(!checkable(&json!([1, false])));
        assert!(checkable(&json!({"a": [1, "x", null]})));
    }

    #[test]
    fn lists_are_read_item_by_item() {
        assert!(check("With the spa and the gym?", json!(["gym", "pool"]), None, "Anything else?").is_some());
        assert_eq!(check("Anything else?", json!(["gym", "pool"]), None, "Anything else?"), None);
    }
}
