//! Which int or float field each number of a message fills (the numbers
//! themselves are read by `crate::read::numbers`).
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

use crate::llm::FieldSpec;
use crate::read::numbers::Candidate;
use crate::read::text::{Kind, stem, term, tokenize};
use serde_json::Value;
use std::sync::{Arc, LazyLock};

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
    for word in tokenize(description).iter().filter(|t| t.kind == Kind::Word) {
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
    candidate.fits(field.kind == "int", field.min, field.max)
}

pub(crate) fn json_number(field: &FieldSpec, value: f64) -> Value {
    crate::read::numbers::json_number(field.kind == "int", value)
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
    use super::*;
    use crate::read::numbers::candidates;
    use crate::read::text::tokenize;
    use serde_json::json;

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
