//! Dates, datetimes and clock times found in a message.
//!
//! Every mention is reported with the tokens it covers, recognized or not
//! (`2026-13-45` is still a date-shaped span), so that number extraction
//! never reads a date's digits as numbers. Relative words are resolved
//! against the request's `today`; without a valid `today` they are
//! recognized but give no value.

use super::text::{Kind, Token, adjacent};
use chrono::{Datelike, Days, NaiveDate, Weekday};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Date(NaiveDate),
    /// An ISO datetime as `YYYY-MM-DDTHH:MM:SS` plus the offset written
    /// (`Z`, `+01:00`), or none.
    DateTime(String),
    Time {
        hour: u32,
        minute: u32,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mention {
    /// First and last token (inclusive).
    pub(crate) first: usize,
    pub(crate) last: usize,
    /// `None` for a date-shaped span that names no real day (`2026-02-30`).
    pub(crate) value: Option<Value>,
}

/// Every date, datetime and time in `tokens`, left to right, not
/// overlapping. `blocked` tokens (already taken by a pattern) start none.
pub(crate) fn find(tokens: &[Token], today: Option<NaiveDate>, blocked: &[bool]) -> Vec<Mention> {
    let mut mentions = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        let free = |first: usize, last: usize| (first..=last).all(|i| !blocked.get(i).copied().unwrap_or(false));
        let found = iso(tokens, index)
            .or_else(|| relative(tokens, index, today))
            .or_else(|| day_month(tokens, index, today))
            .or_else(|| month_day(tokens, index, today))
            .or_else(|| time(tokens, index).map(|(last, hour, minute)| (last, Some(Value::Time { hour, minute }))));
        match found {
            Some((last, value)) if free(index, last) => {
                mentions.push(Mention { first: index, last, value });
                index = last + 1;
            }
            _ => index += 1,
        }
    }
    mentions
}

fn number(token: Option<&Token>, min_digits: usize, max_digits: usize) -> Option<u32> {
    let token = token.filter(|token| token.kind == Kind::Number)?;
    let digits = token.lower.len();
    if digits < min_digits || digits > max_digits {
        return None;
    }
    token.lower.parse().ok()
}

fn symbol(token: Option<&Token>, ch: char) -> bool {
    token.is_some_and(|token| token.is_symbol(ch))
}

/// `YYYY-MM-DD`, optionally followed by a time (`T10:30`, ` 10:30:00`) and
/// an offset (`Z`, `+02:00`, `-0500`): a datetime.
fn iso(tokens: &[Token], index: usize) -> Option<(usize, Option<Value>)> {
    let year = number(tokens.get(index), 4, 4)?;
    if !(symbol(adjacent(tokens, index + 1), '-') && symbol(adjacent(tokens, index + 3), '-')) {
        return None;
    }
    let month = number(adjacent(tokens, index + 2), 1, 2)?;
    let day = number(adjacent(tokens, index + 4), 1, 2)?;
    let date = NaiveDate::from_ymd_opt(year as i32, month, day);
    let date_last = index + 4;

    let time_start = if adjacent(tokens, index + 5).is_some_and(|token| token.is_word("t")) {
        adjacent(tokens, index + 6).map(|_| index + 6)
    } else {
        tokens.get(index + 5).filter(|token| token.kind == Kind::Number).map(|_| index + 5)
    };
    let Some((time_last, hour, minute, second)) = time_start.and_then(|start| clock(tokens, start)) else {
        return Some((date_last, date.map(Value::Date)));
    };
    let (last, offset) = offset(tokens, time_last);
    let value = date.map(|date| Value::DateTime(format!("{date}T{hour:02}:{minute:02}:{second:02}{offset}")));
    Some((last, value))
}

/// `HH:MM` or `HH:MM:SS` (with an ignored fraction), all adjacent.
fn clock(tokens: &[Token], index: usize) -> Option<(usize, u32, u32, u32)> {
    let hour = number(tokens.get(index), 1, 2).filter(|hour| *hour < 24)?;
    if !symbol(adjacent(tokens, index + 1), ':') {
        return None;
    }
    let minute = number(adjacent(tokens, index + 2), 2, 2).filter(|minute| *minute < 60)?;
    let mut last = index + 2;
    let mut second = 0;
    if symbol(adjacent(tokens, last + 1), ':') {
        if let Some(value) = number(adjacent(tokens, last + 2), 2, 2).filter(|second| *second < 60) {
            second = value;
            last += 2;
            if symbol(adjacent(tokens, last + 1), '.')
                && adjacent(tokens, last + 2).is_some_and(|t| t.kind == Kind::Number)
            {
                last += 2;
            }
        }
    }
    Some((last, hour, minute, second))
}

/// A time zone right after a time: `Z`, `+HH:MM`, `-HH:MM`, `+HHMM`.
fn offset(tokens: &[Token], last: usize) -> (usize, String) {
    if adjacent(tokens, last + 1).is_some_and(|token| token.is_word("z")) {
        return (last + 1, "Z".to_string());
    }
    let sign = match adjacent(tokens, last + 1) {
        Some(token) if token.is_symbol('+') => '+',
        Some(token) if token.is_symbol('-') => '-',
        _ => return (last, String::new()),
    };
    if let Some(hours) = number(adjacent(tokens, last + 2), 2, 2).filter(|hours| *hours < 24) {
        if symbol(adjacent(tokens, last + 3), ':') {
            if let Some(minutes) = number(adjacent(tokens, last + 4), 2, 2).filter(|minutes| *minutes < 60) {
                return (last + 4, format!("{sign}{hours:02}:{minutes:02}"));
            }
        }
    }
    if let Some(packed) =
        number(adjacent(tokens, last + 2), 4, 4).filter(|packed| packed / 100 < 24 && packed % 100 < 60)
    {
        return (last + 2, format!("{sign}{:02}:{:02}", packed / 100, packed % 100));
    }
    (last, String::new())
}

/// `today`, `tonight`, `tomorrow`, `yesterday`, `the day after tomorrow`
/// and weekday names (the next such day strictly after today).
fn relative(tokens: &[Token], index: usize, today: Option<NaiveDate>) -> Option<(usize, Option<Value>)> {
    let token = tokens.get(index).filter(|token| token.kind == Kind::Word)?;
    let day_after_tomorrow = token.is_word("day")
        && tokens.get(index + 1).is_some_and(|token| token.is_word("after"))
        && tokens.get(index + 2).is_some_and(|token| token.is_word("tomorrow"));
    if day_after_tomorrow {
        return Some((index + 2, shifted(today, 2)));
    }
    let value = match token.lower.as_str() {
        "today" | "tonight" => today.map(Value::Date),
        "tomorrow" => shifted(today, 1),
        "yesterday" => today.and_then(|today| today.checked_sub_days(Days::new(1))).map(Value::Date),
        word => {
            let weekday = weekday(word)?;
            today.and_then(|today| next_weekday(today, weekday)).map(Value::Date)
        }
    };
    Some((index, value))
}

fn shifted(today: Option<NaiveDate>, days: u64) -> Option<Value> {
    today.and_then(|today| today.checked_add_days(Days::new(days))).map(Value::Date)
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

fn next_weekday(today: NaiveDate, weekday: Weekday) -> Option<NaiveDate> {
    let ahead = (weekday.num_days_from_monday() + 7 - today.weekday().num_days_from_monday()) % 7;
    let ahead = if ahead == 0 { 7 } else { ahead };
    today.checked_add_days(Days::new(u64::from(ahead)))
}

fn month(token: Option<&Token>) -> Option<u32> {
    let token = token.filter(|token| token.kind == Kind::Word)?;
    Some(match token.lower.as_str() {
        "january" | "jan" => 1,
        "february" | "feb" => 2,
        "march" | "mar" => 3,
        "april" | "apr" => 4,
        "may" => 5,
        "june" | "jun" => 6,
        "july" | "jul" => 7,
        "august" | "aug" => 8,
        "september" | "sep" | "sept" => 9,
        "october" | "oct" => 10,
        "november" | "nov" => 11,
        "december" | "dec" => 12,
        _ => return None,
    })
}

/// Skips an ordinal suffix glued to a day number (`4th`).
fn after_ordinal(tokens: &[Token], day_index: usize) -> usize {
    match adjacent(tokens, day_index + 1) {
        Some(token) if matches!(token.lower.as_str(), "st" | "nd" | "rd" | "th") => day_index + 1,
        _ => day_index,
    }
}

/// Skips the dot of an abbreviated month (`Dec.`).
fn after_month(tokens: &[Token], month_index: usize) -> usize {
    if symbol(adjacent(tokens, month_index + 1), '.') { month_index + 1 } else { month_index }
}

/// An optional year after a day and month: `[,] YYYY`.
fn year_after(tokens: &[Token], last: usize) -> Option<(usize, i32)> {
    let comma = symbol(tokens.get(last + 1), ',');
    let year_index = if comma { last + 2 } else { last + 1 };
    let year = number(tokens.get(year_index), 4, 4).filter(|year| (1900..=2200).contains(year))?;
    Some((year_index, year as i32))
}

/// A day and month with no year: the first such day on or after today.
fn resolve(day: u32, month: u32, year: Option<i32>, today: Option<NaiveDate>) -> Option<Value> {
    let date = match year {
        Some(year) => NaiveDate::from_ymd_opt(year, month, day)?,
        None => {
            let today = today?;
            let this_year = NaiveDate::from_ymd_opt(today.year(), month, day);
            match this_year {
                Some(date) if date >= today => date,
                _ => NaiveDate::from_ymd_opt(today.year() + 1, month, day)?,
            }
        }
    };
    Some(Value::Date(date))
}

/// `4 December`, `4th of Dec. 2026`, `4 December, 2026`.
fn day_month(tokens: &[Token], index: usize, today: Option<NaiveDate>) -> Option<(usize, Option<Value>)> {
    let day = number(tokens.get(index), 1, 2).filter(|day| (1..=31).contains(day))?;
    let mut month_index = after_ordinal(tokens, index) + 1;
    if tokens.get(month_index).is_some_and(|token| token.is_word("of")) {
        month_index += 1;
    }
    let month = month(tokens.get(month_index))?;
    let last = after_month(tokens, month_index);
    match year_after(tokens, last) {
        Some((year_index, year)) => Some((year_index, resolve(day, month, Some(year), today))),
        None => Some((last, resolve(day, month, None, today))),
    }
}

/// `December 4`, `Dec 4th, 2026`.
fn month_day(tokens: &[Token], index: usize, today: Option<NaiveDate>) -> Option<(usize, Option<Value>)> {
    let month = month(tokens.get(index))?;
    let day_index = after_month(tokens, index) + 1;
    let day = number(tokens.get(day_index), 1, 2).filter(|day| (1..=31).contains(day))?;
    let last = after_ordinal(tokens, day_index);
    match year_after(tokens, last) {
        Some((year_index, year)) => Some((year_index, resolve(day, month, Some(year), today))),
        None => Some((last, resolve(day, month, None, today))),
    }
}

/// A clock time: `10:30`, `7pm`, `7 pm`, `10:30 am`, `7 o'clock`.
fn time(tokens: &[Token], index: usize) -> Option<(usize, u32, u32)> {
    let (last, hour, minute) = match clock(tokens, index) {
        Some((last, hour, minute, _)) => (last, hour, minute),
        None => (index, number(tokens.get(index), 1, 2)?, 0),
    };
    let suffix = tokens.get(last + 1).map(|token| token.lower.as_str());
    match suffix {
        Some("am") | Some("pm") if (1..=12).contains(&hour) => {
            let pm = suffix == Some("pm");
            let hour = match (hour, pm) {
                (12, false) => 0,
                (12, true) => 12,
                (hour, true) => hour + 12,
                (hour, false) => hour,
            };
            Some((last + 1, hour, minute))
        }
        Some("o'clock") if (1..=12).contains(&hour) && last == index => Some((last + 1, hour, 0)),
        _ if last > index => Some((last, hour, minute)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::text::tokenize;
    use super::*;

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap_or_default()
    }

    /// Mentions as (covered text, value), on Monday 2026-01-05.
    fn check(text: &str) -> Vec<(String, Option<Value>)> {
        let tokens = tokenize(text);
        let blocked = vec![false; tokens.len()];
        find(&tokens, Some(day("2026-01-05")), &blocked)
            .into_iter()
            .map(|mention| {
                let start = tokens[mention.first].start;
                let end = tokens[mention.last].end;
                (text[start..end].to_string(), mention.value)
            })
            .collect()
    }

    fn date(text: &str) -> Option<Value> {
        Some(Value::Date(day(text)))
    }

    #[test]
    fn iso_dates() {
        assert_eq!(check("on 2026-12-04, please"), vec![("2026-12-04".into(), date("2026-12-04"))]);
        assert_eq!(check("2026-2-3"), vec![("2026-2-3".into(), date("2026-02-03"))]);
    }

    #[test]
    fn impossible_iso_dates_are_still_spans() {
        assert_eq!(check("2026-02-30"), vec![("2026-02-30".into(), None)]);
    }

    #[test]
    fn iso_datetimes() {
        let datetime = |text: &str| Some(Value::DateTime(text.to_string()));
        assert_eq!(check("2026-12-04T10:30"), vec![("2026-12-04T10:30".into(), datetime("2026-12-04T10:30:00"))]);
        assert_eq!(
            check("2026-12-04 10:30:15Z"),
            vec![("2026-12-04 10:30:15Z".into(), datetime("2026-12-04T10:30:15Z"))]
        );
        assert_eq!(
            check("2026-12-04T10:30+02:00"),
            vec![("2026-12-04T10:30+02:00".into(), datetime("2026-12-04T10:30:00+02:00"))]
        );
        assert_eq!(
            check("2026-12-04T10:30:00.5-0500"),
            vec![("2026-12-04T10:30:00.5-0500".into(), datetime("2026-12-04T10:30:00-05:00"))]
        );
    }

    #[test]
    fn relative_days() {
        assert_eq!(check("today"), vec![("today".into(), date("2026-01-05"))]);
        assert_eq!(check("Tomorrow!"), vec![("Tomorrow".into(), date("2026-01-06"))]);
        assert_eq!(check("the day after tomorrow"), vec![("day after tomorrow".into(), date("2026-01-07"))]);
        assert_eq!(check("yesterday"), vec![("yesterday".into(), date("2026-01-04"))]);
    }

    #[test]
    fn weekdays_are_the_next_such_day_after_today() {
        assert_eq!(check("on Friday"), vec![("Friday".into(), date("2026-01-09"))]);
        // Today is a Monday: "monday" is next week's.
        assert_eq!(check("monday"), vec![("monday".into(), date("2026-01-12"))]);
        assert_eq!(check("sunday"), vec![("sunday".into(), date("2026-01-11"))]);
    }

    #[test]
    fn day_and_month_in_words() {
        assert_eq!(check("4 December 2026"), vec![("4 December 2026".into(), date("2026-12-04"))]);
        assert_eq!(check("the 4th of Dec."), vec![("4th of Dec.".into(), date("2026-12-04"))]);
        assert_eq!(check("December 4, 2027"), vec![("December 4, 2027".into(), date("2027-12-04"))]);
        assert_eq!(check("Jan 2nd"), vec![("Jan 2nd".into(), date("2027-01-02"))]);
        assert_eq!(check("Jan 5"), vec![("Jan 5".into(), date("2026-01-05"))]);
        assert_eq!(check("February 30"), vec![("February 30".into(), None)]);
        assert!(check("I may come").is_empty());
    }

    #[test]
    fn clock_times_are_spans() {
        let time = |hour, minute| Some(Value::Time { hour, minute });
        assert_eq!(check("at 10:30"), vec![("10:30".into(), time(10, 30))]);
        assert_eq!(check("at 7pm"), vec![("7pm".into(), time(19, 0))]);
        assert_eq!(check("at 12 am"), vec![("12 am".into(), time(0, 0))]);
        assert_eq!(check("7 o'clock"), vec![("7 o'clock".into(), time(7, 0))]);
        assert!(check("2 guests").is_empty());
    }

    #[test]
    fn relative_words_need_today() {
        let tokens = tokenize("tomorrow");
        let found = find(&tokens, None, &[false]);
        assert_eq!(found, vec![Mention { first: 0, last: 0, value: None }]);
    }
}
