//! Field extraction: the value of each requested field found in a message,
//! by the field's type, in an order that lets no span be read twice.
//!
//! 1. `string` fields with a `pattern` (the program's own regex is the most
//!    specific evidence there is; see [`crate::read::patterns`]);
//! 2. dates, datetimes and clock times ([`crate::read::dates`]): their tokens are
//!    always removed, field or not, so `2026-12-04` is never also 2026, 12
//!    and 4;
//! 3. `string` fields with `examples`: an example found in the message,
//!    case-insensitive, whole words, longest first, in its declared spelling;
//! 4. `enum` fields: the first value mentioned (whole words, case and
//!    inflection folded: `Billing`, `accounts`), in its declared spelling;
//! 5. `bool` fields: the yes/no word lists below;
//! 6. `list` fields: every value named, for a list of enum values; an
//!    enumeration ("ham, olives and mushrooms") for a list of strings;
//! 7. `int`/`float` fields ([`super::numbers`]) from what is left.
//!
//! Last, and decided by the caller once yes/no questions are answered, a
//! `string` field the current step asks for alone takes the whole answer
//! ([`whole_answer`]). `object` fields are never extracted. Every value
//! comes with the words it was read from, its evidence.

use super::cache::Cache;
use super::numbers;
use crate::llm::{FieldSpec, Proposal};
use crate::read::consent::{self, Consent};
use crate::read::dates::{self, Value as DateValue};
use crate::read::numbers::candidates;
use crate::read::text::{Kind, Token, is_stop_word, span_text, stem};
use chrono::NaiveDate;
use serde_json::Value;
use std::collections::BTreeMap;

/// The alphanumeric tokens of a message, for phrase matching.
struct Words<'a> {
    /// (token index, lowercase text, stem); stems are computed only when
    /// some field compares stems (enums).
    words: Vec<(usize, &'a str, String)>,
}

impl<'a> Words<'a> {
    fn new(tokens: &'a [Token], with_stems: bool) -> Self {
        let words = tokens
            .iter()
            .enumerate()
            .filter(|(_, token)| token.is_alphanumeric())
            .map(|(index, token)| {
                let stemmed = if with_stems { stem(&token.lower) } else { String::new() };
                (index, token.lower.as_str(), stemmed)
            })
            .collect();
        Words { words }
    }

    /// The first place (token span) where `phrase` occurs on free tokens,
    /// compared as lowercase words, or as stems with `stemmed`.
    fn find(&self, phrase: &[String], stemmed: bool, consumed: &[bool]) -> Option<(usize, usize)> {
        if phrase.is_empty() {
            return None;
        }
        (0..self.words.len()).find_map(|start| {
            let window = self.words.get(start..start + phrase.len())?;
            let same = window.iter().zip(phrase).all(
                |((_, lower, stem), wanted)| {
                    if stemmed { stem == wanted } else { lower == wanted }
                },
            );
            let free = window.iter().all(|(index, _, _)| !consumed.get(*index).copied().unwrap_or(true));
            let first = window.first()?.0;
            let last = window.last()?.0;
            (same && free).then_some((first, last))
        })
    }
}

fn consume(consumed: &mut [bool], first: usize, last: usize) {
    for flag in consumed.iter_mut().take(last + 1).skip(first) {
        *flag = true;
    }
}

/// Every value found for `fields`, keyed by field name, each with the words
/// it was read from.
pub(crate) fn extract(
    message: &str,
    tokens: &[Token],
    fields: &[FieldSpec],
    today: Option<NaiveDate>,
    cache: &mut Cache,
) -> BTreeMap<String, Proposal> {
    let mut consumed = vec![false; tokens.len()];
    let mut values = BTreeMap::new();

    for field in fields.iter().filter(|field| field.kind == "string") {
        let Some(pattern) = field.pattern.as_deref().and_then(|source| cache.patterns.get(source)) else {
            continue;
        };
        let Some(found) = pattern.find(message, !field.asked) else {
            continue;
        };
        for (flag, token) in consumed.iter_mut().zip(tokens) {
            *flag |= token.start < found.end && token.end > found.start;
        }
        let evidence = message.get(found.start..found.end).unwrap_or_default().to_string();
        values.insert(field.name.clone(), Proposal::new(Value::String(found.value), evidence));
    }

    let mentions = dates::find(tokens, today, &consumed);
    for mention in &mentions {
        consume(&mut consumed, mention.first, mention.last);
    }
    assign_dates(message, tokens, fields, &mentions, &mut values);

    let words = Words::new(tokens, fields.iter().any(|field| field.kind == "enum" || field.kind == "list"));
    for field in fields.iter().filter(|field| field.kind == "string") {
        if values.contains_key(&field.name) {
            continue;
        }
        if let Some((example, first, last)) = find_example(field, &words, &consumed, cache) {
            consume(&mut consumed, first, last);
            let evidence = span_text(message, tokens, first, last);
            values.insert(field.name.clone(), Proposal::new(Value::String(example), evidence));
        }
    }

    for field in fields.iter().filter(|field| field.kind == "enum") {
        if let Some((value, first, last)) = find_enum(field, &words, &consumed, cache) {
            consume(&mut consumed, first, last);
            let evidence = span_text(message, tokens, first, last);
            values.insert(field.name.clone(), Proposal::new(Value::String(value), evidence));
        }
    }

    let bools: Vec<&FieldSpec> = fields.iter().filter(|field| field.kind == "bool").collect();
    // A yes is read only when nothing in the message takes it back (see
    // `consent`): "yes, but 3 guests" answers no bool.
    let answer = match bools.is_empty() {
        true => None,
        false => match consent::read_tokens(tokens) {
            Consent::Yes => Some(true),
            Consent::No => Some(false),
            Consent::Unclear(_) | Consent::Silent => None,
        },
    };
    if let Some(answer) = answer {
        let any_asked = fields.iter().any(|field| field.asked);
        for field in &bools {
            if field.asked || (!any_asked && bools.len() == 1) {
                values.insert(field.name.clone(), Proposal::new(Value::Bool(answer), message.trim()));
            }
        }
    }

    let lists: Vec<&FieldSpec> = fields.iter().filter(|field| field.kind == "list").collect();
    for field in &lists {
        let alone = field.asked || lists.len() == 1;
        if let Some((items, first, last)) = find_list(field, alone, message, tokens, &words, &consumed, cache) {
            consume(&mut consumed, first, last);
            let evidence = span_text(message, tokens, first, last);
            values.insert(field.name.clone(), Proposal::new(Value::Array(items), evidence));
        }
    }

    let numeric: Vec<&FieldSpec> = fields.iter().filter(|field| numbers::is_numeric(field)).collect();
    if !numeric.is_empty() {
        let candidates = candidates(tokens, &consumed);
        if !candidates.is_empty() {
            let units: Vec<_> = numeric.iter().map(|field| cache.units(field, numbers::units)).collect();
            for (name, value, candidate) in numbers::assign(&numeric, &units, &candidates) {
                let evidence = span_text(message, tokens, candidate.first, candidate.last);
                values.insert(name, Proposal::new(value, evidence));
            }
        }
    }
    values
}

/// Date fields take date mentions in message order, one each (the asked
/// field first); a datetime field takes an ISO datetime, or else a date and
/// a clock time of the message together. A plain date is never a datetime.
fn assign_dates(
    message: &str,
    tokens: &[Token],
    fields: &[FieldSpec],
    mentions: &[dates::Mention],
    values: &mut BTreeMap<String, Proposal>,
) {
    let said = |mention: &dates::Mention| span_text(message, tokens, mention.first, mention.last);
    let mut days = mentions.iter().filter_map(|mention| match &mention.value {
        Some(DateValue::Date(date)) => Some((date.to_string(), said(mention))),
        Some(DateValue::DateTime(datetime)) => datetime.get(..10).map(|day| (day.to_string(), said(mention))),
        _ => None,
    });
    let mut date_fields: Vec<&FieldSpec> = fields.iter().filter(|field| field.kind == "date").collect();
    date_fields.sort_by_key(|field| !field.asked);
    for field in date_fields {
        let Some((day, evidence)) = days.next() else { break };
        values.insert(field.name.clone(), Proposal::new(Value::String(day), evidence));
    }

    let datetime = mentions.iter().find_map(|mention| match &mention.value {
        Some(DateValue::DateTime(datetime)) => Some((datetime.clone(), said(mention))),
        _ => None,
    });
    // A date and a clock time said apart: the evidence runs from one to
    // the other.
    let combined = || {
        let (day, day_mention) = mentions.iter().find_map(|mention| match &mention.value {
            Some(DateValue::Date(date)) => Some((*date, mention)),
            _ => None,
        })?;
        let (hour, minute, time_mention) = mentions.iter().find_map(|mention| match &mention.value {
            Some(DateValue::Time { hour, minute }) => Some((*hour, *minute, mention)),
            _ => None,
        })?;
        let first = day_mention.first.min(time_mention.first);
        let last = day_mention.last.max(time_mention.last);
        Some((format!("{day}T{hour:02}:{minute:02}:00"), span_text(message, tokens, first, last)))
    };
    if let Some(field) = fields.iter().find(|field| field.kind == "datetime") {
        if let Some((value, evidence)) = datetime.or_else(combined) {
            values.insert(field.name.clone(), Proposal::new(Value::String(value), evidence));
        }
    }
}

fn find_example(
    field: &FieldSpec,
    words: &Words,
    consumed: &[bool],
    cache: &mut Cache,
) -> Option<(String, usize, usize)> {
    let mut examples: Vec<_> = field.examples.iter().map(|example| (example, cache.phrase(example))).collect();
    // Longest first, so `Ritz Paris` wins over `Ritz`; the sort is stable.
    examples.sort_by_key(|(example, phrase)| std::cmp::Reverse((phrase.words.len(), example.len())));
    for (example, phrase) in examples {
        let Some((first, last)) = words.find(&phrase.words, false, consumed) else {
            continue;
        };
        let valid = match field.pattern.as_deref() {
            Some(source) => cache.patterns.get(source).is_some_and(|pattern| pattern.find(example, false).is_some()),
            None => true,
        };
        if valid {
            return Some((example.trim().to_string(), first, last));
        }
    }
    None
}

fn find_enum(field: &FieldSpec, words: &Words, consumed: &[bool], cache: &mut Cache) -> Option<(String, usize, usize)> {
    let mut best: Option<(&String, usize, usize)> = None;
    for value in &field.values {
        let Some((first, last)) = words.find(&cache.phrase(value).stems, true, consumed) else {
            continue;
        };
        let earlier = best
            .is_none_or(|(_, best_first, best_last)| first < best_first || (first == best_first && last > best_last));
        if earlier {
            best = Some((value, first, last));
        }
    }
    best.map(|(value, first, last)| (value.clone(), first, last))
}

/// Words that join the items of an enumeration.
fn joins_items(token: &Token) -> bool {
    match token.kind {
        Kind::Symbol => matches!(token.lower.as_str(), "," | ";" | "&" | "+" | "/"),
        Kind::Word => matches!(token.lower.as_str(), "and" | "or" | "plus"),
        Kind::Number => false,
    }
}

/// A `list` field's items: for enum items, every value named, in message
/// order; for other items, an enumeration ("ham, olives and mushrooms"):
/// runs of content words joined by commas, `and`, `or`, `plus`, at least
/// two of them, taken only when the field is asked or is the only list
/// asked about (`alone`). Returns the items and the tokens they span.
fn find_list(
    field: &FieldSpec,
    alone: bool,
    message: &str,
    tokens: &[Token],
    words: &Words,
    consumed: &[bool],
    cache: &mut Cache,
) -> Option<(Vec<Value>, usize, usize)> {
    let item_values: Vec<String> = field
        .schema
        .get("items")
        .and_then(|items| items.get("enum"))
        .and_then(Value::as_array)
        .map(|values| values.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if !item_values.is_empty() {
        let mut named: Vec<(usize, usize, &String)> = item_values
            .iter()
            .filter_map(|value| words.find(&cache.phrase(value).stems, true, consumed).map(|(f, l)| (f, l, value)))
            .collect();
        named.sort();
        let first = named.first()?.0;
        let last = named.iter().map(|(_, last, _)| *last).max()?;
        return Some((named.into_iter().map(|(_, _, value)| Value::String(value.clone())).collect(), first, last));
    }
    if !alone || field.schema.get("items").and_then(|items| items.get("type")) != Some(&Value::from("string")) {
        return None;
    }
    // Each item: (first, last) token of a run of free content words.
    let content = |token: &Token| token.is_alphanumeric() && !is_stop_word(&token.lower);
    let mut best: Vec<(usize, usize)> = Vec::new();
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut run: Option<(usize, usize)> = None;
    let mut joined = false;
    for (index, token) in tokens.iter().enumerate() {
        let free = !consumed.get(index).copied().unwrap_or(true);
        if free && content(token) {
            run = Some(run.map_or((index, index), |(first, _)| (first, index)));
            continue;
        }
        if free && joins_items(token) {
            if let Some(item) = run.take() {
                items.push(item);
            }
            joined = true;
            continue;
        }
        // Anything else ends the enumeration: the run before it is its
        // last item, if a joiner came before.
        if let Some(item) = run.take() {
            if joined || items.is_empty() {
                items.push(item);
            }
        }
        if items.len() > best.len() {
            best = std::mem::take(&mut items);
        }
        // The run after a stop word may start a new enumeration.
        items.clear();
        joined = false;
    }
    if let Some(item) = run.take() {
        items.push(item);
    }
    if items.len() > best.len() {
        best = items;
    }
    if best.len() < 2 {
        return None;
    }
    let first = best.first()?.0;
    let last = best.last()?.1;
    let said = |(first, last): (usize, usize)| Value::String(span_text(message, tokens, first, last));
    Some((best.into_iter().map(said).collect(), first, last))
}

/// Words that wrap an answer without being part of it.
const LEADING_FILLER: &[&[&str]] = &[
    &["please"],
    &["um"],
    &["uh"],
    &["er"],
    &["erm"],
    &["hmm"],
    &["well"],
    &["so"],
    &["oh"],
    &["ok"],
    &["okay"],
    &["sure"],
    &["yes"],
    &["yeah"],
    &["it's"],
    &["it", "is"],
    &["that's"],
    &["that", "is"],
];
const TRAILING_FILLER: &[&[&str]] =
    &[&["please"], &["thanks"], &["thank", "you"], &["thank", "you", "very", "much"], &["thx"], &["cheers"]];

fn is_wrapping_symbol(token: &Token) -> bool {
    token.kind == Kind::Symbol && matches!(token.lower.as_str(), "," | "." | "!" | ";" | ":" | "-" | "\"" | "'")
}

fn words_at(tokens: &[Token], range: std::ops::Range<usize>) -> Vec<&str> {
    tokens.get(range).unwrap_or_default().iter().map(|token| token.lower.as_str()).collect()
}

/// The message trimmed of politeness and filler (`please`, `thanks`, `um`,
/// `it's`) and of surrounding punctuation, as the user wrote it: the value
/// of a string field asked alone. `None` when nothing is left, when what
/// is left is only yes/no words, or when the message is a question.
pub(crate) fn whole_answer(message: &str, tokens: &[Token]) -> Option<String> {
    if message.trim_end().ends_with('?') {
        return None;
    }
    let mut first = 0;
    let mut end = tokens.len();
    loop {
        if tokens.get(first).is_some_and(is_wrapping_symbol) && first < end {
            first += 1;
            continue;
        }
        let ahead = words_at(tokens, first..end);
        match LEADING_FILLER.iter().filter(|phrase| ahead.starts_with(phrase)).map(|phrase| phrase.len()).max() {
            Some(length) => first += length,
            None => break,
        }
    }
    loop {
        if end > first && end.checked_sub(1).and_then(|last| tokens.get(last)).is_some_and(is_wrapping_symbol) {
            end -= 1;
            continue;
        }
        let behind = words_at(tokens, first..end);
        match TRAILING_FILLER.iter().filter(|phrase| behind.ends_with(phrase)).map(|phrase| phrase.len()).max() {
            Some(length) => end -= length,
            None => break,
        }
    }
    let kept = tokens.get(first..end).unwrap_or_default();
    let start = kept.first()?.start;
    let stop = kept.last()?.end;
    if consent::only_answer_words(kept) {
        return None;
    }
    message.get(start..stop).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::super::tests::field;
    use super::*;
    use crate::read::text::tokenize;
    use serde_json::json;

    fn asked(mut field: FieldSpec) -> FieldSpec {
        field.asked = true;
        field
    }

    fn with_examples(mut field: FieldSpec, examples: &[&str]) -> FieldSpec {
        field.examples = examples.iter().map(|e| e.to_string()).collect();
        field
    }

    fn with_values(mut field: FieldSpec, values: &[&str]) -> FieldSpec {
        field.values = values.iter().map(|e| e.to_string()).collect();
        field
    }

    fn with_pattern(mut field: FieldSpec, pattern: &str) -> FieldSpec {
        field.pattern = Some(pattern.to_string());
        field
    }

    /// The extracted values as JSON, on Monday 2026-01-05.
    fn check(fields: &[FieldSpec], message: &str) -> Value {
        let tokens = tokenize(message);
        let today = NaiveDate::from_ymd_opt(2026, 1, 5);
        let values = extract(message, &tokens, fields, today, &mut Cache::default());
        Value::Object(values.into_iter().map(|(name, proposal)| (name, proposal.value)).collect())
    }

    fn list_of(name: &str, items: Value) -> FieldSpec {
        let mut list = field(name, "list");
        list.schema = json!({"type": "array", "items": items});
        list
    }

    #[test]
    fn lists_are_read_from_enumerations() {
        let toppings = || asked(list_of("toppings", json!({"type": "string"})));
        assert_eq!(
            check(&[toppings()], "I'd like ham, olives and mushrooms please"),
            json!({"toppings": ["ham", "olives", "mushrooms"]})
        );
        assert_eq!(check(&[toppings()], "Ham and extra cheese"), json!({"toppings": ["Ham", "extra cheese"]}));
        assert_eq!(check(&[toppings()], "just ham"), json!({}), "one item is no enumeration");
        let tokens = tokenize("ham, olives and mushrooms please");
        let read = extract("ham, olives and mushrooms please", &tokens, &[toppings()], None, &mut Cache::default());
        assert_eq!(read.get("toppings").and_then(|p| p.evidence.as_deref()), Some("ham, olives and mushrooms"));
        let sizes = list_of("sizes", json!({"type": "string", "enum": ["small", "medium", "large"]}));
        assert_eq!(check(&[sizes], "one large and two small ones"), json!({"sizes": ["large", "small"]}));
    }

    fn answer(message: &str) -> Option<bool> {
        match consent::read_tokens(&tokenize(message)) {
            Consent::Yes => Some(true),
            Consent::No => Some(false),
            Consent::Unclear(_) | Consent::Silent => None,
        }
    }

    #[test]
    fn yes_words() {
        for message in
            ["yes", "Yeah!", "yep", "sure", "OK", "okay then", "correct", "please do", "go ahead", "y", "Of course"]
        {
            assert_eq!(answer(message), Some(true), "{message}");
        }
    }

    #[test]
    fn no_words() {
        for message in ["no", "Nope.", "nah", "cancel it", "don't", "do not", "never mind", "n", "it didn't work"] {
            assert_eq!(answer(message), Some(false), "{message}");
        }
    }

    #[test]
    fn yes_no_whole_words_only_and_never_both() {
        assert_eq!(answer("yesterday I knew"), None);
        assert_eq!(answer("nobody"), None);
        assert_eq!(answer("not sure"), None);
        assert_eq!(answer("no, go ahead"), None);
        assert_eq!(answer("2026-12-04"), None);
    }

    #[test]
    fn bool_goes_to_the_asked_field() {
        let fields = [field("hotel", "string"), asked(field("confirmed", "bool")), field("vip", "bool")];
        assert_eq!(check(&fields, "yes"), json!({"confirmed": true}));
        assert_eq!(check(&fields, "no"), json!({"confirmed": false}));
    }

    #[test]
    fn bool_goes_to_the_only_bool_field_when_nothing_is_asked() {
        assert_eq!(check(&[field("confirmed", "bool")], "yep"), json!({"confirmed": true}));
        assert_eq!(check(&[field("a", "bool"), field("b", "bool")], "yep"), json!({}));
        assert_eq!(check(&[field("a", "bool"), asked(field("date", "date"))], "yep"), json!({}));
    }

    #[test]
    fn dates_fill_date_fields_in_order() {
        let fields = [field("check_in", "date"), field("check_out", "date")];
        assert_eq!(
            check(&fields, "from December 4 to 2026-12-06"),
            json!({"check_in": "2026-12-04", "check_out": "2026-12-06"})
        );
        assert_eq!(check(&fields, "tomorrow"), json!({"check_in": "2026-01-06"}));
        let fields = [field("check_in", "date"), asked(field("check_out", "date"))];
        assert_eq!(check(&fields, "friday"), json!({"check_out": "2026-01-09"}));
    }

    #[test]
    fn datetime_from_iso_or_from_a_date_and_a_time() {
        let fields = [field("at", "datetime")];
        assert_eq!(check(&fields, "2026-12-04T10:30Z"), json!({"at": "2026-12-04T10:30:00Z"}));
        assert_eq!(check(&fields, "tomorrow at 7pm"), json!({"at": "2026-01-06T19:00:00"}));
        assert_eq!(check(&fields, "tomorrow"), json!({}));
        assert_eq!(check(&[field("day", "date")], "2026-12-04T10:30"), json!({"day": "2026-12-04"}));
    }

    #[test]
    fn iso_date_is_never_read_as_numbers() {
        let fields = [field("date", "date"), field("guests", "int")];
        assert_eq!(check(&fields, "2026-12-04"), json!({"date": "2026-12-04"}));
        assert_eq!(check(&[field("guests", "int")], "2026-12-04"), json!({}));
        assert_eq!(check(&[field("guests", "int")], "December 4 at 10:30"), json!({}));
    }

    #[test]
    fn enum_values_whole_words_any_case_first_mentioned() {
        let issue = with_values(field("issue", "enum"), &["billing", "technical", "account"]);
        assert_eq!(check(std::slice::from_ref(&issue), "it's about Billing"), json!({"issue": "billing"}));
        assert_eq!(check(std::slice::from_ref(&issue), "my accounts"), json!({"issue": "account"}));
        assert_eq!(check(std::slice::from_ref(&issue), "a technical billing thing"), json!({"issue": "technical"}));
        assert_eq!(check(std::slice::from_ref(&issue), "accountant"), json!({}));
        let status = with_values(field("status", "enum"), &["in_progress", "done"]);
        assert_eq!(check(&[status], "it's in progress"), json!({"status": "in_progress"}));
    }

    #[test]
    fn string_examples_longest_first_in_declared_spelling() {
        let hotel = with_examples(field("hotel", "string"), &["Ritz", "Ritz Paris", "Grand Hotel"]);
        assert_eq!(check(std::slice::from_ref(&hotel), "The Grand Hotel, please"), json!({"hotel": "Grand Hotel"}));
        assert_eq!(check(std::slice::from_ref(&hotel), "the ritz paris"), json!({"hotel": "Ritz Paris"}));
        assert_eq!(check(std::slice::from_ref(&hotel), "the Ritz"), json!({"hotel": "Ritz"}));
        assert_eq!(check(&[hotel], "the Grandiose Hotel"), json!({}));
    }

    #[test]
    fn string_pattern_first_match() {
        let email = with_pattern(field("email", "string"), "^[^@ ]+@[^@ ]+$");
        assert_eq!(check(std::slice::from_ref(&email), "ann@example.com"), json!({"email": "ann@example.com"}));
        assert_eq!(check(&[email], "mail me at ann@example.com."), json!({"email": "ann@example.com"}));
    }

    #[test]
    fn pattern_span_is_not_read_again() {
        let fields = [with_pattern(field("order_id", "string"), "^ORD-[0-9]{4}$"), field("count", "int")];
        assert_eq!(check(&fields, "ORD-1234"), json!({"order_id": "ORD-1234"}));
    }

    #[test]
    fn strings_without_examples_or_pattern_wait_for_the_whole_answer() {
        assert_eq!(check(&[asked(field("details", "string"))], "my server is down"), json!({}));
    }

    #[test]
    fn never_invents_a_value() {
        let fields = [
            field("hotel", "string"),
            field("date", "date"),
            field("guests", "int"),
            field("confirmed", "bool"),
            with_values(field("plan", "enum"), &["free", "pro"]),
        ];
        assert_eq!(check(&fields, "hello there"), json!({}));
        assert_eq!(check(&fields, ""), json!({}));
    }

    fn whole(message: &str) -> Option<String> {
        whole_answer(message, &tokenize(message))
    }

    #[test]
    fn whole_answer_trims_politeness() {
        assert_eq!(whole("The Savoy, please.").as_deref(), Some("The Savoy"));
        assert_eq!(whole("  um, it's the Savoy! thank you").as_deref(), Some("the Savoy"));
        assert_eq!(whole("My server keeps crashing").as_deref(), Some("My server keeps crashing"));
        assert_eq!(whole("\"quoted\"").as_deref(), Some("quoted"));
    }

    #[test]
    fn whole_answer_refuses_questions_yes_no_and_nothing() {
        assert_eq!(whole("can we change the date?"), None);
        assert_eq!(whole("no thanks"), None);
        assert_eq!(whole("yes please"), None);
        assert_eq!(whole("not sure"), None);
        assert_eq!(whole("please!"), None);
        assert_eq!(whole("do it").as_deref(), None);
        assert_eq!(whole("Good").as_deref(), Some("Good"));
        assert_eq!(whole(""), None);
    }
}
