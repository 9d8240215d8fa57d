//! Numbers in a text: digit runs (`2`, `-3`, `2.5`, `1,200`) and number
//! words (`one`…`nineteen`, `twenty`…`ninety`, `twenty-one`, `a couple` = 2,
//! `a dozen` = 12), each with the words around it that may name its unit.
//! Not numbers: digits glued to letters or to another number by `-`, `/`,
//! `_`, `@`, `.`, `:` (codes like `ORD-1234`, ranges like `2-3`), ordinals
//! (`4th`), `the one`/`which one`, numbers taken back ("not 2"), and every
//! token the caller marks as already taken (by a date, a time or a field).
//! Which field a number fills is the reader's business (the offline
//! provider's `numbers.rs`).

use super::text::{Kind, Token, adjacent, is_stop_word, stem};
use serde_json::Value;

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

/// Every number in `tokens` that is not part of a date or a time.
pub(crate) fn number_candidates(tokens: &[Token]) -> Vec<Candidate> {
    let mut blocked = vec![false; tokens.len()];
    for mention in super::dates::find(tokens, None, &[]) {
        for flag in blocked.iter_mut().take(mention.last + 1).skip(mention.first) {
            *flag = true;
        }
    }
    candidates(tokens, &blocked)
}

impl Candidate {
    /// Whether this number can be a value of a field of that kind and
    /// range: an integer field takes whole numbers only.
    pub(crate) fn fits(&self, integer: bool, min: Option<f64>, max: Option<f64>) -> bool {
        let whole_enough = !integer || self.integral;
        let above_min = min.is_none_or(|min| self.value >= min);
        let below_max = max.is_none_or(|max| self.value <= max);
        whole_enough && above_min && below_max
    }
}

/// `value` as the JSON of an integer field (truncated) or a float field.
pub(crate) fn json_number(integer: bool, value: f64) -> Value {
    if integer { Value::from(value as i64) } else { Value::from(value) }
}

#[cfg(test)]
mod tests {
    use super::super::text::tokenize;
    use super::*;

    fn numbers(text: &str) -> Vec<f64> {
        let tokens = tokenize(text);
        candidates(&tokens, &vec![false; tokens.len()]).into_iter().map(|c| c.value).collect()
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
}
