//! A text read for the values it states, with the shared readers of
//! `crate::read` (numbers in digits or words, dates in their many
//! formats, clock times): [`Text`] for the fused reply's check of values
//! code set aside (`fused/mention.rs`) and [`Known`] for what the model
//! was given; [`claims`] cuts a reply into the value-like tokens it
//! states; [`date_renderings`] are the ways a date is commonly written,
//! which both checks look for.

use crate::read::dates::{self, Mention, Value as DateValue};
use crate::read::numbers::number_candidates;
use crate::read::text::{Kind, Token, tokenize};
use crate::read::{ReadDate, dates_in, numbers_in, words_of};
use chrono::{Datelike, NaiveDate};
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// A text as the checks read it, each reading made once.
pub(in crate::runtime::engine) struct Text {
    pub(in crate::runtime::engine) raw: String,
    pub(in crate::runtime::engine) words: String,
    pub(in crate::runtime::engine) numbers: Vec<f64>,
    /// Month and day of every date it names.
    pub(in crate::runtime::engine) dates: Vec<(u32, u32)>,
    pub(in crate::runtime::engine) today: NaiveDate,
}

impl Text {
    pub(in crate::runtime::engine) fn of(source: &str, today: NaiveDate) -> Text {
        let dates = dates_in(source, Some(today))
            .into_iter()
            .filter_map(|date| match date {
                ReadDate::Date(date) => Some((date.month(), date.day())),
                ReadDate::DateTime(text) => iso_date(&text).map(|date| (date.month(), date.day())),
                ReadDate::Time { .. } => None,
            })
            .collect();
        Text { raw: source.to_lowercase(), words: words_of(source), numbers: numbers_in(source), dates, today }
    }

    pub(in crate::runtime::engine) fn has_words(&self, words: &str) -> bool {
        !words.trim().is_empty() && self.words.contains(words)
    }
}

/// The ways a date is commonly written, with and without its year.
pub(in crate::runtime::engine) fn date_renderings(date: NaiveDate) -> Vec<String> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let (year, month, day) = (date.year(), date.month(), date.day());
    let name = MONTHS.get(month as usize - 1).copied().unwrap_or_default();
    let short: String = name.chars().take(3).collect();
    let mut renderings = vec![
        format!("{year}-{month:02}-{day:02}"),
        format!("{year}/{month:02}/{day:02}"),
        format!("{day:02}/{month:02}/{year}"),
        format!("{month:02}/{day:02}/{year}"),
        format!("{day}/{month}/{year}"),
        format!("{month}/{day}/{year}"),
        format!("{day}.{month}.{year}"),
        format!("{day:02}.{month:02}.{year}"),
        format!("{day:02}/{month:02}"),
        format!("{month:02}/{day:02}"),
        format!("{day}/{month}"),
        format!("{month}/{day}"),
    ];
    for month in [name, short.as_str()] {
        renderings.push(format!("{month} {day}"));
        renderings.push(format!("{day} {month}"));
        renderings.push(format!("{day}{} of {month}", ordinal_suffix(day)));
    }
    renderings
}

fn ordinal_suffix(day: u32) -> &'static str {
    match (day % 10, day % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

pub(in crate::runtime::engine) fn iso_date(text: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()
}

/// A value that is one date in other words ("June 3rd").
pub(in crate::runtime::engine) fn only_date(value: &str, today: NaiveDate) -> Option<NaiveDate> {
    match dates_in(value, Some(today)).as_slice() {
        [ReadDate::Date(date)] => Some(*date),
        _ => None,
    }
}

/// A value-like token a reply states, as it reads.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Claim {
    /// A number, an amount or a percentage (`3`, `$120.50`, `1,200`, `3rd`).
    Number(f64),
    /// A calendar date (month and day: a year left out still names it).
    Date(u32, u32),
    /// A clock time.
    Time(u32, u32),
    /// An identifier or a code: letters with digits, or digit groups
    /// (`BILLING-1234`, `GH-28745CD2`, `555-0100`), by its letters and
    /// digits, lowercase.
    Code(String),
    /// An email address, lowercase.
    Email(String),
}

/// Symbols that join the parts of one token (`ORD-1234`, `ann@x.test`,
/// `1,200.50`, `10:30`).
const JOINERS: &[char] = &['-', '_', '/', '.', ':', '@', '+', '#', ','];

/// Every value-like token of `text`, each with the words it is written
/// in, left to right. Words alone are no claim; nor is a list's number
/// (`1.` or `2)` opening a line), nor a date said in words only
/// ("tomorrow").
pub(super) fn claims(text: &str, today: NaiveDate) -> Vec<(String, Claim)> {
    let tokens = tokenize(text);
    let mentions = dates::find(&tokens, Some(today), &[]);
    claims_in(text, &tokens, &mentions)
}

/// [`claims`] of a text already cut into `tokens`, whose dates are
/// `mentions`.
fn claims_in(text: &str, tokens: &[Token], mentions: &[Mention]) -> Vec<(String, Claim)> {
    let mut taken = vec![false; tokens.len()];
    let mut found = Vec::new();
    for mention in mentions {
        let covered = tokens.get(mention.first..=mention.last).unwrap_or_default();
        if !covered.iter().any(|token| token.kind == Kind::Number) {
            continue;
        }
        for flag in taken.iter_mut().take(mention.last + 1).skip(mention.first) {
            *flag = true;
        }
        let written = span(text, covered);
        let claim = match &mention.value {
            Some(DateValue::Date(date)) => Claim::Date(date.month(), date.day()),
            Some(DateValue::DateTime(datetime)) => match iso_date(datetime) {
                Some(date) => Claim::Date(date.month(), date.day()),
                None => Claim::Code(normalized(covered)),
            },
            Some(DateValue::Time { hour, minute }) => Claim::Time(*hour, *minute),
            None => Claim::Code(normalized(covered)),
        };
        found.push((written, claim));
    }
    for chunk in chunks(tokens, &taken) {
        let parts = tokens.get(chunk.0..=chunk.1).unwrap_or_default();
        if let Some(claim) = classify(text, tokens, chunk)
            && !parts.is_empty()
        {
            found.push((span(text, parts), claim));
        }
    }
    found
}

/// What a text gives a claim to stand on: its numbers (in digits or
/// words, and the parts of its dates and times), its dates and times, the
/// renderings of its dates, its codes and its emails.
#[derive(Default)]
pub(super) struct Known {
    numbers: Vec<f64>,
    dates: BTreeSet<(u32, u32)>,
    /// Its dates with their years, rendered (`rendered`) only when a code
    /// is not backed otherwise: most replies state none, and rendering
    /// every date in every format was most of the check's work.
    days: BTreeSet<NaiveDate>,
    rendered: OnceLock<BTreeSet<String>>,
    times: BTreeSet<(u32, u32)>,
    codes: BTreeSet<String>,
    emails: BTreeSet<String>,
}

impl Known {
    pub(super) fn of(text: &str, today: NaiveDate) -> Known {
        let tokens = tokenize(text);
        let mut known = Known::default();
        known.numbers.extend(number_candidates(&tokens).into_iter().map(|candidate| candidate.value));
        // A code's digit groups back those digits alone ("order 1234" for
        // ORD-1234), which the number reader leaves to the code.
        let groups = tokens.iter().filter(|token| token.kind == Kind::Number);
        known.numbers.extend(groups.filter_map(|token| token.lower.parse::<f64>().ok()));
        let mentions = dates::find(&tokens, Some(today), &[]);
        for mention in &mentions {
            known.add_date(mention, &tokens);
        }
        for (_, claim) in claims_in(text, &tokens, &mentions) {
            match claim {
                Claim::Number(number) => known.numbers.push(number),
                Claim::Code(code) => {
                    known.codes.insert(code);
                }
                Claim::Email(email) => {
                    known.emails.insert(email);
                }
                Claim::Date(..) | Claim::Time(..) => {}
            }
        }
        known
    }

    /// Today, which the model is told: its date, and its year as a number.
    pub(super) fn with_today(mut self, today: NaiveDate) -> Known {
        self.dates.insert((today.month(), today.day()));
        self.numbers.push(f64::from(today.year()));
        self
    }

    fn add_date(&mut self, mention: &Mention, tokens: &[Token]) {
        let covered = tokens.get(mention.first..=mention.last).unwrap_or_default();
        let mut date = |date: NaiveDate| {
            self.dates.insert((date.month(), date.day()));
            self.numbers.extend([f64::from(date.year()), f64::from(date.month()), f64::from(date.day())]);
            self.days.insert(date);
        };
        match &mention.value {
            Some(DateValue::Date(day)) => date(*day),
            Some(DateValue::DateTime(datetime)) => {
                if let Some(day) = iso_date(datetime) {
                    date(day);
                }
                let clock = datetime.get(11..16).and_then(|clock| {
                    let (hour, minute) = clock.split_once(':')?;
                    Some((hour.parse().ok()?, minute.parse().ok()?))
                });
                if let Some((hour, minute)) = clock {
                    self.time(hour, minute);
                }
            }
            Some(DateValue::Time { hour, minute }) => self.time(*hour, *minute),
            None => {}
        }
        self.codes.insert(normalized(covered));
    }

    fn time(&mut self, hour: u32, minute: u32) {
        self.times.insert((hour, minute));
        self.numbers.extend([f64::from(hour), f64::from(minute)]);
        if hour > 12 {
            self.numbers.push(f64::from(hour - 12));
        }
    }

    /// The codes its dates are as rendered in the common formats
    /// (`2026-12-04` as `20261204`, `4th of December`), read once.
    fn renderings(&self) -> &BTreeSet<String> {
        self.rendered.get_or_init(|| {
            let renderings = self.days.iter().flat_map(|day| date_renderings(*day));
            renderings.map(|rendering| normalized(&tokenize(&rendering))).collect()
        })
    }

    /// Whether `claim` stands on this text.
    pub(super) fn backs(&self, claim: &Claim) -> bool {
        match claim {
            Claim::Number(number) => self.numbers.iter().any(|known| (known - number).abs() < 1e-9),
            Claim::Date(month, day) => self.dates.contains(&(*month, *day)),
            Claim::Time(hour, minute) => self.times.contains(&(*hour, *minute)),
            Claim::Code(code) => self.codes.contains(code) || self.renderings().contains(code),
            Claim::Email(email) => self.emails.contains(email),
        }
    }
}

/// The letters and digits of `tokens`, lowercase: a code however it is
/// punctuated (`GH-28745CD2` and `gh28745cd2` are one).
fn normalized(tokens: &[Token]) -> String {
    tokens.iter().filter(|token| token.is_alphanumeric()).map(|token| token.lower.as_str()).collect()
}

fn span(text: &str, tokens: &[Token]) -> String {
    match (tokens.first(), tokens.last()) {
        (Some(first), Some(last)) => text.get(first.start..last.end).unwrap_or_default().to_string(),
        _ => String::new(),
    }
}

/// The runs of tokens written as one (no space between), joined only by
/// [`JOINERS`], starting and ending with a word or a number; `taken`
/// tokens (a date's) are in none. Each run as its first and last index.
fn chunks(tokens: &[Token], taken: &[bool]) -> Vec<(usize, usize)> {
    let free = |index: usize| !taken.get(index).copied().unwrap_or(true);
    let joined = |index: usize| {
        let (Some(before), Some(token)) = (index.checked_sub(1).and_then(|i| tokens.get(i)), tokens.get(index)) else {
            return false;
        };
        before.end == token.start && free(index)
    };
    let mut found = Vec::new();
    let mut index = 0;
    while let Some(token) = tokens.get(index) {
        if !token.is_alphanumeric() || !free(index) {
            index += 1;
            continue;
        }
        let first = index;
        let mut last = index;
        loop {
            let next = last + 1;
            match tokens.get(next) {
                Some(token) if token.is_alphanumeric() && joined(next) => last = next,
                Some(token)
                    if token.kind == Kind::Symbol
                        && token.lower.chars().all(|symbol| JOINERS.contains(&symbol))
                        && joined(next)
                        && tokens.get(next + 1).is_some_and(|after| after.is_alphanumeric())
                        && joined(next + 1) =>
                {
                    last = next + 1;
                }
                _ => break,
            }
        }
        found.push((first, last));
        index = last + 1;
    }
    found
}

/// What a run of tokens claims, if anything.
fn classify(text: &str, tokens: &[Token], (first, last): (usize, usize)) -> Option<Claim> {
    let parts = tokens.get(first..=last)?;
    if parts.iter().any(|token| token.is_symbol('@')) {
        let at = parts.iter().position(|token| token.is_symbol('@'))?;
        let domain = parts.get(at + 1..).unwrap_or_default();
        if at > 0 && domain.iter().any(|token| token.is_symbol('.')) {
            return Some(Claim::Email(span(text, parts).to_lowercase()));
        }
    }
    if !parts.iter().any(|token| token.kind == Kind::Number) {
        return None;
    }
    if let [only] = parts
        && list_marker(text, tokens, first, only)
    {
        return None;
    }
    // Digits with `.` and `,` only: a number (`1,200.50`).
    if parts.iter().all(|token| token.kind == Kind::Number || token.is_symbol('.') || token.is_symbol(',')) {
        let digits: String =
            parts.iter().filter(|token| !token.is_symbol(',')).map(|token| token.lower.as_str()).collect();
        if let Ok(number) = digits.parse::<f64>() {
            return Some(Claim::Number(number));
        }
    }
    // A number with a short suffix: an ordinal (`3rd`) or a unit (`2x`, `5G`).
    if let [number, suffix] = parts
        && number.kind == Kind::Number
        && suffix.kind == Kind::Word
        && suffix.lower.chars().count() <= 2
        && let Ok(value) = number.lower.parse::<f64>()
    {
        return Some(Claim::Number(value));
    }
    Some(Claim::Code(normalized(parts)))
}

/// A number that opens a line, followed by `.` or `)`: a list's item.
fn list_marker(text: &str, tokens: &[Token], index: usize, token: &Token) -> bool {
    let line_start = text.get(..token.start).is_some_and(|before| {
        let line = before.rsplit('\n').next().unwrap_or(before);
        line.trim().is_empty()
    });
    let marked = tokens
        .get(index + 1)
        .is_some_and(|next| next.start == token.end && (next.is_symbol('.') || next.is_symbol(')')));
    line_start && marked
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 1, 5).unwrap()
    }

    fn read(text: &str) -> Vec<(String, Claim)> {
        claims(text, today())
    }

    #[test]
    fn codes_numbers_dates_and_emails_are_claims_and_words_are_not() {
        let found = read("Ticket BILLING-1234 for ann@initech.test: $120.50 on December 4th, at 10:30 (2 guests).");
        assert_eq!(
            found,
            [
                ("December 4th".to_string(), Claim::Date(12, 4)),
                ("10:30".to_string(), Claim::Time(10, 30)),
                ("BILLING-1234".to_string(), Claim::Code("billing1234".into())),
                ("ann@initech.test".to_string(), Claim::Email("ann@initech.test".into())),
                ("120.50".to_string(), Claim::Number(120.5)),
                ("2".to_string(), Claim::Number(2.0)),
            ]
        );
        assert_eq!(read("Which hotel would you like? A well-known one, e.g. the Ritz."), []);
        assert_eq!(read("See you tomorrow!"), [], "a date in words only states no token");
        assert_eq!(read("1,200 guests"), [("1,200".to_string(), Claim::Number(1200.0))]);
        assert_eq!(read("your 3rd stay"), [("3rd".to_string(), Claim::Number(3.0))]);
        assert_eq!(read("GH-28745CD2."), [("GH-28745CD2".to_string(), Claim::Code("gh28745cd2".into()))]);
    }

    #[test]
    fn a_lists_numbers_are_no_claims() {
        assert_eq!(read("Options:\n1. Billing\n2) Technical"), []);
        assert_eq!(read("Pick 2. Thanks"), [("2".to_string(), Claim::Number(2.0))], "not at a line's start");
    }

    #[test]
    fn what_a_text_knows_backs_a_claim_in_any_of_its_readings() {
        let known = Known::of("I'd like 2026-12-04 for two guests, ref ORD-1234, mail ann@x.test, at 7pm", today());
        for (written, claim) in read("December 4, 2 guests, ord 1234? ORD-1234 ANN@X.TEST 04/12 12/04/2026 19:00 4th") {
            assert!(known.backs(&claim), "{written}");
        }
        for (written, claim) in read("December 5, 3 guests, ORD-1235, bob@x.test, 8pm") {
            assert!(!known.backs(&claim), "{written}");
        }
    }
}
