//! Numbers in a message, and which int or float field each one fills.
//!
//! Candidates are digit runs (`2`, `-3`, `2.5`, `1,200`) and number words
//! (`one`…`nineteen`, `twenty`…`ninety`, `twenty-one`, `a couple` = 2,
//! `a dozen` = 12). Not numbers: digits glued to letters or to another
//! number by `-`, `/`, `_`, `@`, `.`, `:` (codes like `ORD-1234`, ranges
//! like `2-3`), ordinals (`4th`), `the one`/`which one`, and every token
//! already taken by a date, a time or another field.
//!
//! Assignment, never giving one number to two fields:
//! 1. a number next to a unit word names the field of that unit: the word
//!    after it (`2 guests`, `2-person`) or before it (`guests: 2`); a
//!    field's units are its name's words, its description's content words
//!    and their entry in a small table (guests = people, persons, adults…);
//! 2. a number followed by a content word that is no field's unit (`3
//!    nights` when only `guests` is asked) belongs to that word and fills
//!    nothing;
//! 3. the remaining "free" numbers go to the asked numeric field, or else to
//!    the only numeric field still without a value, when exactly one free
//!    number fits it (an int takes whole numbers only; `min`/`max` discard
//!    the rest).

use super::text::{Kind, Token, adjacent, is_stop_word, stem, term};
use crate::llm::FieldSpec;
use serde_json::Value;
use std::sync::{Arc, LazyLock};

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) value: f64,
    pub(crate) integral: bool,
    pub(crate) first: usize,
    pub(crate) last: usize,
    /// Stem of the content word right after the number, if any.
    pub(crate) unit_after: Option<String>,
    /// Stem of the word right before the number, if any.
    pub(crate) unit_before: Option<String>,
}

/// Integers beyond this are not exact as `f64`: no field means them.
const LARGEST_EXACT: f64 = 9_007_199_254_740_992.0;

fn is_glue(token: &Token) -> bool {
    token.kind == Kind::Symbol && matches!(token.lower.as_str(), "-" | "/" | "_" | "@" | "." | ":")
}

/// The number starting at the Number token `index`: its value, whether it
/// is whole, and its last token. `None` when the digits belong to a code.
fn digits_at(tokens: &[Token], index: usize) -> Option<(f64, bool, usize)> {
    let token = tokens.get(index)?;
    let mut negative = false;
    let touching_before = adjacent(tokens, index).and(index.checked_sub(1)).and_then(|before| tokens.get(before));
    if let Some(before) = touching_before {
        // `ORD-1234`, `v1.2`: the glue itself touches a word or a number.
        let glue_after_text = index.checked_sub(1).and_then(|glue| adjacent(tokens, glue)).is_some()
            && index.checked_sub(2).and_then(|i| tokens.get(i)).is_some_and(Token::is_alphanumeric);
        let glued_to_text = before.is_alphanumeric() || (is_glue(before) && glue_after_text);
        if glued_to_text {
            return None;
        }
        negative = before.is_symbol('-');
    }

    let mut text = token.lower.clone();
    let mut last = index;
    // Thousands separators: 1,200 and 12,000,000.
    if token.lower.len() <= 3 {
        while symbol_then_digits(tokens, last, ',', 3) {
            text.extend(tokens.get(last + 2).map(|t| t.lower.as_str()));
            last += 2;
        }
    }
    let mut integral = true;
    if symbol_then_digits(tokens, last, '.', 0) {
        let fraction = tokens.get(last + 2).map(|t| t.lower.as_str()).unwrap_or_default();
        text = format!("{text}.{fraction}");
        integral = fraction.chars().all(|ch| ch == '0');
        last += 2;
    }
    if let Some(after) = adjacent(tokens, last + 1) {
        let ordinal = after.kind == Kind::Word && matches!(after.lower.as_str(), "st" | "nd" | "rd" | "th");
        let glued_number = is_glue(after) && adjacent(tokens, last + 2).is_some_and(|t| t.kind == Kind::Number);
        let glued_code = matches!(after.lower.as_str(), "_" | "@" | "/") && adjacent(tokens, last + 2).is_some();
        if ordinal || after.kind == Kind::Number || glued_number || glued_code {
            return None;
        }
    }
    let magnitude: f64 = text.parse().ok()?;
    if magnitude >= LARGEST_EXACT {
        return None;
    }
    Some((if negative { -magnitude } else { magnitude }, integral, last))
}

/// Whether `tokens[last + 1]` is `symbol` glued to digits at `last + 2`
/// (of exactly `length` digits, or any length when 0).
fn symbol_then_digits(tokens: &[Token], last: usize, symbol: char, length: usize) -> bool {
    let symbol_glued = adjacent(tokens, last + 1).is_some_and(|t| t.is_symbol(symbol));
    let digits = adjacent(tokens, last + 2).filter(|t| t.kind == Kind::Number);
    symbol_glued && digits.is_some_and(|t| length == 0 || t.lower.len() == length)
}

fn unit_word(word: &str) -> Option<u32> {
    Some(match word {
        "zero" => 0,
        "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        "thirteen" => 13,
        "fourteen" => 14,
        "fifteen" => 15,
        "sixteen" => 16,
        "seventeen" => 17,
        "eighteen" => 18,
        "nineteen" => 19,
        _ => return None,
    })
}

fn tens_word(word: &str) -> Option<u32> {
    Some(match word {
        "twenty" => 20,
        "thirty" => 30,
        "forty" => 40,
        "fifty" => 50,
        "sixty" => 60,
        "seventy" => 70,
        "eighty" => 80,
        "ninety" => 90,
        _ => return None,
    })
}

/// The number spelled at Word token `index`, and its last token.
fn words_at(tokens: &[Token], index: usize) -> Option<(f64, usize)> {
    let token = tokens.get(index)?;
    let word = token.lower.as_str();
    if word == "a" || word == "an" {
        let next = tokens.get(index + 1)?;
        return match next.lower.as_str() {
            "couple" | "pair" => Some((2.0, index + 1)),
            "dozen" => Some((12.0, index + 1)),
            _ => None,
        };
    }
    if let Some(tens) = tens_word(word) {
        // twenty-one, twenty one
        let hyphen = adjacent(tokens, index + 1).is_some_and(|t| t.is_symbol('-'));
        let unit_index = if hyphen { index + 2 } else { index + 1 };
        let unit = tokens.get(unit_index).and_then(|t| unit_word(&t.lower)).filter(|unit| (1..=9).contains(unit));
        return Some(match unit {
            Some(unit) => (f64::from(tens + unit), unit_index),
            None => (f64::from(tens), index),
        });
    }
    let value = unit_word(word)?;
    let pronoun_one = value == 1
        && index.checked_sub(1).and_then(|before| tokens.get(before)).is_some_and(|before| {
            matches!(
                before.lower.as_str(),
                "the" | "this" | "that" | "which" | "any" | "no" | "every" | "each" | "another"
            )
        });
    if pronoun_one {
        return None;
    }
    Some((f64::from(value), index))
}

/// Words between a number and its noun that do not change what it counts.
/// `of` is skipped too (`a couple of nights`), so `2 of us` ends on `us`.
fn is_modifier(word: &str) -> bool {
    matches!(word, "more" | "extra" | "additional" | "other" | "total")
}

fn unit_after(tokens: &[Token], last: usize) -> Option<String> {
    let mut index = last + 1;
    // `2-person`: the hyphen joins the number to its noun.
    if adjacent(tokens, index).is_some_and(|t| t.is_symbol('-')) {
        index += 1;
    }
    while tokens.get(index).is_some_and(|t| is_modifier(&t.lower) || t.is_word("of")) {
        index += 1;
    }
    let word = tokens.get(index).filter(|t| t.kind == Kind::Word)?;
    (!is_stop_word(&word.lower) && word.lower.chars().count() > 1).then(|| stem(&word.lower))
}

fn unit_before(tokens: &[Token], first: usize) -> Option<String> {
    let mut index = first.checked_sub(1)?;
    if tokens.get(index).is_some_and(|t| t.is_symbol(':') || t.is_symbol('=')) {
        index = index.checked_sub(1)?;
    }
    let word = tokens.get(index).filter(|t| t.kind == Kind::Word)?;
    Some(stem(&word.lower))
}

/// Whether the number starting at `first` is one the message takes back:
/// "not 2", "instead of 2", "rather than 2" ("3 guests, not 2").
fn negated(tokens: &[Token], first: usize) -> bool {
    let word_before = |back: usize| first.checked_sub(back).and_then(|index| tokens.get(index));
    let said = |back: usize, word: &str| word_before(back).is_some_and(|token| token.is_word(word));
    said(1, "not") || (said(1, "of") && said(2, "instead")) || (said(1, "than") && said(2, "rather"))
}

/// Every number in `tokens`, left to right, skipping `consumed` tokens and
/// numbers taken back ([`negated`]).
pub(crate) fn candidates(tokens: &[Token], consumed: &[bool]) -> Vec<Candidate> {
    let is_free = |index: usize| !consumed.get(index).copied().unwrap_or(false);
    let mut found = Vec::new();
    let mut index = 0;
    while let Some(token) = tokens.get(index) {
        let number = match token.kind {
            Kind::Number => digits_at(tokens, index),
            Kind::Word => words_at(tokens, index).map(|(value, last)| (value, true, last)),
            Kind::Symbol => None,
        };
        match number {
            Some((_, _, last)) if negated(tokens, index) => index = last + 1,
            Some((value, integral, last)) if (index..=last).all(is_free) => {
                found.push(Candidate {
                    value,
                    integral,
                    first: index,
                    last,
                    unit_after: unit_after(tokens, last),
                    unit_before: unit_before(tokens, index),
                });
                index = last + 1;
            }
            _ => index += 1,
        }
    }
    found
}

/// Units that count the same things; each group is expanded whole when a
/// field's own words hit one of its members.
const UNIT_GROUPS: &[&[&str]] = &[
    &[
        "guest",
        "people",
        "person",
        "adult",
        "pax",
        "traveler",
        "traveller",
        "visitor",
        "passenger",
        "attendee",
        "participant",
    ],
    &["child", "children", "kid"],
    &["minute", "min", "mins"],
    &["hour", "hr", "hrs"],
    &["ticket", "seat"],
    &["age", "year", "yr", "old"],
];

static UNIT_GROUP_STEMS: LazyLock<Vec<Vec<String>>> =
    LazyLock::new(|| UNIT_GROUPS.iter().map(|group| group.iter().map(|word| stem(word)).collect()).collect());

/// A field's unit stems, each with a strength: 2 for its name's words, 1
/// for its description's and the unit table's.
pub(crate) fn units(field: &FieldSpec) -> Vec<(String, u8)> {
    fn add(units: &mut Vec<(String, u8)>, unit: String, strength: u8) {
        match units.iter_mut().find(|(known, _)| *known == unit) {
            Some(entry) => entry.1 = entry.1.max(strength),
            None => units.push((unit, strength)),
        }
    }
    let mut units: Vec<(String, u8)> = Vec::new();
    for part in field.name.split('_').filter(|part| part.chars().count() > 1) {
        add(&mut units, stem(&part.to_lowercase()), 2);
    }
    let description = field.description.as_deref().unwrap_or_default();
    for word in super::text::tokenize(description).iter().filter(|t| t.kind == Kind::Word) {
        if term(&word.lower).is_some() {
            add(&mut units, stem(&word.lower), 1);
        }
    }
    let own: Vec<String> = units.iter().map(|(unit, _)| unit.clone()).collect();
    for group in UNIT_GROUP_STEMS.iter() {
        if group.iter().any(|member| own.contains(member)) {
            for member in group {
                add(&mut units, member.clone(), 1);
            }
        }
    }
    units
}

pub(crate) fn fits(field: &FieldSpec, candidate: &Candidate) -> bool {
    let whole_enough = field.kind != "int" || candidate.integral;
    let above_min = field.min.is_none_or(|min| candidate.value >= min);
    let below_max = field.max.is_none_or(|max| candidate.value <= max);
    whole_enough && above_min && below_max
}

pub(crate) fn json_number(field: &FieldSpec, value: f64) -> Value {
    if field.kind == "int" { Value::from(value as i64) } else { Value::from(value) }
}

pub(crate) fn is_numeric(field: &FieldSpec) -> bool {
    matches!(field.kind.as_str(), "int" | "float")
}

/// Fills numeric `fields` from `candidates`, given each field's [`units`];
/// returns (field name, value, the candidate read).
pub(crate) fn assign<'c>(
    fields: &[&FieldSpec],
    units: &[Arc<[(String, u8)]>],
    candidates: &'c [Candidate],
) -> Vec<(String, Value, &'c Candidate)> {
    let mut taken: Vec<Option<usize>> = vec![None; fields.len()];
    let mut used = vec![false; candidates.len()];
    let mut tied = vec![false; candidates.len()];

    // 1. Units name their field.
    // The field a unit word names: the one holding it most strongly, the
    // first in request order on a tie.
    let field_of = |word: Option<&String>| {
        let word = word?;
        let mut best: Option<(usize, u8)> = None;
        for (field_index, field_units) in units.iter().enumerate() {
            let strength = field_units.iter().filter(|(unit, _)| unit == word).map(|(_, strength)| *strength).max();
            if let Some(strength) = strength {
                if best.is_none_or(|(_, best_strength)| strength > best_strength) {
                    best = Some((field_index, strength));
                }
            }
        }
        best.map(|(field_index, _)| field_index)
    };
    for (candidate_index, candidate) in candidates.iter().enumerate() {
        let best = field_of(candidate.unit_after.as_ref()).or_else(|| field_of(candidate.unit_before.as_ref()));
        if let Some(field_index) = best {
            let free_field = taken.get(field_index).is_some_and(Option::is_none);
            let fitting = fields.get(field_index).is_some_and(|field| fits(field, candidate));
            if free_field && fitting {
                if let Some(slot) = taken.get_mut(field_index) {
                    *slot = Some(candidate_index);
                }
                if let Some(flag) = used.get_mut(candidate_index) {
                    *flag = true;
                }
            }
        }
        // 2. A number followed by a noun counts that noun.
        if best.is_some() || candidate.unit_after.is_some() {
            if let Some(flag) = tied.get_mut(candidate_index) {
                *flag = true;
            }
        }
    }

    // 3. Free numbers go to the asked field, else to the only one left.
    let open: Vec<usize> = (0..fields.len()).filter(|i| taken.get(*i).is_some_and(Option::is_none)).collect();
    let asked = open.iter().copied().find(|i| fields.get(*i).is_some_and(|field| field.asked));
    let target = asked.or(match open.as_slice() {
        [only] => Some(*only),
        _ => None,
    });
    if let Some(field_index) = target {
        let fitting: Vec<usize> = (0..candidates.len())
            .filter(|i| !used.get(*i).copied().unwrap_or(true) && !tied.get(*i).copied().unwrap_or(true))
            .filter(|i| {
                let field = fields.get(field_index);
                candidates.get(*i).is_some_and(|candidate| field.is_some_and(|field| fits(field, candidate)))
            })
            .collect();
        if let [only] = fitting.as_slice() {
            if let Some(slot) = taken.get_mut(field_index) {
                *slot = Some(*only);
            }
        }
    }

    fields
        .iter()
        .zip(&taken)
        .filter_map(|(field, taken)| {
            let candidate = candidates.get((*taken)?)?;
            Some((field.name.clone(), json_number(field, candidate.value), candidate))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::text::tokenize;
    use super::*;
    use serde_json::json;

    fn numbers(text: &str) -> Vec<f64> {
        let tokens = tokenize(text);
        candidates(&tokens, &vec![false; tokens.len()]).into_iter().map(|c| c.value).collect()
    }

    pub(crate) fn int(name: &str, min: Option<f64>, max: Option<f64>) -> FieldSpec {
        FieldSpec {
            name: name.to_string(),
            kind: "int".to_string(),
            schema: json!({"type": "integer"}),
            description: None,
            values: vec![],
            examples: vec![],
            pattern: None,
            min,
            max,
            asked: false,
        }
    }

    fn check(fields: &[FieldSpec], text: &str) -> Vec<(String, Value)> {
        let tokens = tokenize(text);
        let found = candidates(&tokens, &vec![false; tokens.len()]);
        let fields: Vec<&FieldSpec> = fields.iter().collect();
        let units: Vec<Arc<[(String, u8)]>> = fields.iter().map(|field| units(field).into()).collect();
        assign(&fields, &units, &found).into_iter().map(|(name, value, _)| (name, value)).collect()
    }

    fn pairs(expected: &[(&str, Value)]) -> Vec<(String, Value)> {
        expected.iter().map(|(name, value)| (name.to_string(), value.clone())).collect()
    }

    #[test]
    fn digits_and_signs() {
        assert_eq!(numbers("2 guests"), vec![2.0]);
        assert_eq!(numbers("-3 degrees, (4)"), vec![-3.0, 4.0]);
        assert_eq!(numbers("2.5 or 1,200"), vec![2.5, 1200.0]);
        assert_eq!(numbers("2."), vec![2.0]);
    }

    #[test]
    fn codes_ranges_and_ordinals_are_not_numbers() {
        assert!(numbers("ORD-1234").is_empty());
        assert!(numbers("A12 and 4th and 2-3 and 12/04 and ann2@x.com and v1.2").is_empty());
    }

    #[test]
    fn number_words() {
        assert_eq!(numbers("three"), vec![3.0]);
        assert_eq!(numbers("Twenty-one and twenty two and forty"), vec![21.0, 22.0, 40.0]);
        assert_eq!(numbers("a couple of nights, a dozen roses"), vec![2.0, 12.0]);
        assert!(numbers("the one with the pool, which one").is_empty());
    }

    #[test]
    fn unit_word_names_the_field() {
        let fields = [int("guests", Some(1.0), Some(10.0)), int("nights", None, None)];
        assert_eq!(check(&fields, "3 nights for 2 guests"), pairs(&[("guests", json!(2)), ("nights", json!(3))]));
        assert_eq!(check(&fields, "guests: 4"), pairs(&[("guests", json!(4))]));
        assert_eq!(check(&fields, "a 2-person room"), pairs(&[("guests", json!(2))]));
        assert_eq!(check(&fields, "2 adults"), pairs(&[("guests", json!(2))]));
        assert_eq!(check(&fields, "2 more guests"), pairs(&[("guests", json!(2))]));
        let fields = [int("num_guests", None, None), int("nights", None, None)];
        assert_eq!(check(&fields, "3 nights, 2 people"), pairs(&[("num_guests", json!(2)), ("nights", json!(3))]));
    }

    #[test]
    fn description_words_are_units() {
        let mut count = int("count", None, None);
        count.description = Some("Number of guests".to_string());
        assert_eq!(check(&[count, int("nights", None, None)], "2 people"), pairs(&[("count", json!(2))]));
    }

    #[test]
    fn lone_number_goes_to_the_only_numeric_field() {
        let fields = [int("guests", Some(1.0), Some(10.0))];
        assert_eq!(check(&fields, "for 2 please"), pairs(&[("guests", json!(2))]));
        assert_eq!(check(&fields, "two of us"), pairs(&[("guests", json!(2))]));
    }

    #[test]
    fn number_counting_another_noun_fills_nothing() {
        let fields = [int("guests", None, None)];
        assert!(check(&fields, "3 nights").is_empty());
    }

    #[test]
    fn several_fields_and_no_unit_is_ambiguous() {
        let fields = [int("guests", None, None), int("nights", None, None)];
        assert!(check(&fields, "2").is_empty());
    }

    #[test]
    fn asked_field_takes_the_lone_number() {
        let mut nights = int("nights", None, None);
        nights.asked = true;
        assert_eq!(check(&[int("guests", None, None), nights], "2"), pairs(&[("nights", json!(2))]));
    }

    #[test]
    fn two_free_numbers_are_ambiguous() {
        let fields = [int("guests", None, None)];
        assert!(check(&fields, "2 or 3").is_empty());
    }

    #[test]
    fn min_and_max_discard_implausible_numbers() {
        let fields = [int("guests", Some(1.0), Some(10.0))];
        assert!(check(&fields, "45").is_empty());
        assert!(check(&fields, "45 guests").is_empty());
        assert_eq!(check(&fields, "2 in 2027"), pairs(&[("guests", json!(2))]));
    }

    #[test]
    fn ints_take_whole_numbers_and_floats_any() {
        let mut price = int("price", None, None);
        price.kind = "float".to_string();
        assert!(check(&[int("guests", None, None)], "2.5").is_empty());
        assert_eq!(check(&[int("guests", None, None)], "2.0"), pairs(&[("guests", json!(2))]));
        assert_eq!(check(&[price], "2.5"), pairs(&[("price", json!(2.5))]));
    }

    #[test]
    fn one_number_never_fills_two_fields() {
        let fields = [int("guests", None, None), int("adults", None, None)];
        assert_eq!(check(&fields, "2 guests"), pairs(&[("guests", json!(2))]));
    }
}
