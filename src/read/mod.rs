//! Reading a message by rules: the words of a text (`text`: tokens,
//! stems, terms, negation), dates and clock times (`dates`), numbers
//! (`numbers`), a schema's patterns (`patterns`) and the answer to a
//! yes/no question ([`consent`]). One set of rules serves every reader: the
//! offline provider extracts with them, grounding checks every provider's
//! evidence with them, and the runtime reads with them what needs no model.
//! Nothing here knows a provider, a program or a session: the callers turn
//! what is read into their own values.
#![warn(missing_docs)]

pub mod consent;
pub(crate) mod dates;
pub(crate) mod numbers;
pub(crate) mod patterns;
pub(crate) mod text;

use chrono::NaiveDate;
use dates::Value as DateValue;
use text::{located_terms, tokenize};

/// A date or time read from a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadDate {
    /// A calendar date.
    Date(NaiveDate),
    /// An ISO datetime as written (`2026-12-04T10:30:00Z`).
    DateTime(String),
    /// A clock time without a date.
    Time {
        /// 0 to 23.
        hour: u32,
        /// 0 to 59.
        minute: u32,
    },
}

/// Every date, datetime and clock time in `text`, relative words resolved
/// against `today`.
pub fn dates_in(text: &str, today: Option<NaiveDate>) -> Vec<ReadDate> {
    let tokens = tokenize(text);
    dates::find(&tokens, today, &[])
        .into_iter()
        .filter_map(|mention| match mention.value? {
            DateValue::Date(date) => Some(ReadDate::Date(date)),
            DateValue::DateTime(datetime) => Some(ReadDate::DateTime(datetime)),
            DateValue::Time { hour, minute } => Some(ReadDate::Time { hour, minute }),
        })
        .collect()
}

/// Every number in `text`, in digits or words (`2`, `two`, `a couple`);
/// the digits of dates and times are not numbers.
pub fn numbers_in(text: &str) -> Vec<f64> {
    numbers::number_candidates(&tokenize(text)).into_iter().map(|candidate| candidate.value).collect()
}

/// The yes or no `text` says; `None` for neither or both.
pub fn yes_no_in(text: &str) -> Option<bool> {
    consent::polarity_tokens(&tokenize(text))
}

/// The words of `text` as the offline rules cut them (letters and digits
/// apart, symbols dropped), lowercase, each between single spaces: a text
/// whose words occur in another's, in order, is a substring of it.
pub fn words_of(text: &str) -> String {
    let mut words = String::with_capacity(text.len() + 2);
    words.push(' ');
    for token in tokenize(text).iter().filter(|token| token.is_alphanumeric()) {
        words.push_str(&token.lower);
        words.push(' ');
    }
    words
}

/// The terms of `text` (content words, stemmed, synonyms folded); a term
/// under a negation starts with `!`.
pub fn terms_in(text: &str) -> Vec<String> {
    located_terms(&tokenize(text)).into_iter().map(|located| located.term).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_the_offline_rules() {
        let today = NaiveDate::from_ymd_opt(2026, 1, 5);
        assert_eq!(dates_in("tomorrow", today), vec![ReadDate::Date(NaiveDate::from_ymd_opt(2026, 1, 6).unwrap())]);
        assert_eq!(numbers_in("two guests on 2026-12-04"), vec![2.0]);
        assert_eq!(yes_no_in("yes please"), Some(true));
        assert_eq!(yes_no_in("no thanks"), Some(false));
        assert_eq!(yes_no_in("no, not sure"), None, "both");
        assert_eq!(words_of("The GRAND-hotel, A12!"), " the grand hotel a 12 ");
        assert!(terms_in("it does not work").contains(&"!work".to_string()));
    }
}
