//! What code reads from a message beyond doubt before any model is asked
//! ([`CertainReader`]), with the readers of `crate::read` that the offline
//! provider and grounding use too.

use crate::llm::{FieldSpec, Proposal, UnderstandRequest};
use crate::read::consent;
use crate::read::dates::{self, Value as DateValue};
use crate::read::numbers::{self, number_candidates};
use crate::read::patterns::Patterns;
use crate::read::text::{LocatedTerm, Token, located_terms, span_text, tokenize};
use chrono::NaiveDate;
use serde_json::Value;
use std::collections::BTreeMap;

/// Reads, before the model, the values the offline rules read beyond
/// doubt: the one number or the one yes/no of a message answering a step
/// that asks for that `int`, `float` or `bool` field alone, a `string`
/// field's `pattern` matching a span that is not plain
/// words (an email, an order number), a `string` field's example named
/// verbatim when it is the only example named, the one ISO date of a
/// message when one date field is asked, and an enum value named verbatim
/// (whole words, any case, not negated) when it is the only value of the
/// only enum field named. Everything else is left to the model. Keeps compiled patterns
/// between turns.
#[derive(Default)]
pub struct CertainReader {
    patterns: Patterns,
}

impl CertainReader {
    pub fn new() -> CertainReader {
        CertainReader::default()
    }

    /// The values read, keyed by field, with the words they were read from.
    pub fn read(&mut self, request: &UnderstandRequest) -> BTreeMap<String, Proposal> {
        let mut read = BTreeMap::new();
        let message = request.message.as_str();
        if message.trim().is_empty() {
            return read;
        }
        for field in request.fields.iter().filter(|field| field.kind == "string") {
            let Some(pattern) = field.pattern.as_deref().and_then(|source| self.patterns.get(source)) else {
                continue;
            };
            if let Some(found) = pattern.find(message, true) {
                let evidence = message.get(found.start..found.end).unwrap_or_default().to_string();
                read.insert(field.name.clone(), Proposal::new(Value::String(found.value), evidence));
            }
        }

        let date_fields: Vec<&FieldSpec> = request.fields.iter().filter(|field| field.kind == "date").collect();
        let enums: Vec<&FieldSpec> = request.fields.iter().filter(|field| field.kind == "enum").collect();
        let with_examples: Vec<&FieldSpec> = request
            .fields
            .iter()
            .filter(|field| field.kind == "string" && !field.examples.is_empty() && !read.contains_key(&field.name))
            .collect();
        let asked_alone = request.fields.iter().find(|field| field.asked && !read.contains_key(&field.name));
        if date_fields.len() != 1 && enums.is_empty() && with_examples.is_empty() && asked_alone.is_none() {
            return read;
        }
        let tokens = tokenize(message);
        // The field the current step asks for alone, answered by the one
        // number of the message ("2 guests" to "How many guests?"), or by a
        // message that is nothing but a yes or a no from the closed set of
        // forms ("yes please" to "Shall I book …?"): anything more is for
        // the model, whose yes must then pass the consent rule.
        if let Some(field) = asked_alone {
            match field.kind.as_str() {
                "int" | "float" => {
                    let integer = field.kind == "int";
                    if let [only] = number_candidates(&tokens).as_slice()
                        && only.fits(integer, field.min, field.max)
                    {
                        let evidence = span_text(message, &tokens, only.first, only.last);
                        read.insert(
                            field.name.clone(),
                            Proposal::new(numbers::json_number(integer, only.value), evidence),
                        );
                    }
                }
                "bool" => {
                    if let Some(answer) = consent::certain_tokens(&tokens) {
                        read.insert(field.name.clone(), Proposal::new(Value::Bool(answer), message.trim()));
                    }
                }
                _ => {}
            }
        }
        let terms = located_terms(&tokens);
        // A string field's declared example named verbatim is as certain as
        // an enum value named verbatim ("The Ritz Paris, please" for a hotel
        // whose examples list Ritz Paris), when it is the only one named.
        let examples_named: Vec<(&FieldSpec, &String, String)> = with_examples
            .iter()
            .flat_map(|field| field.examples.iter().map(move |example| (*field, example)))
            .filter_map(|(field, example)| {
                named_verbatim(message, &tokens, &terms, example).map(|evidence| (field, example, evidence))
            })
            .collect();
        if let [(field, example, evidence)] = examples_named.as_slice() {
            read.insert(field.name.clone(), Proposal::new(Value::String((*example).clone()), evidence.clone()));
        }
        if let [field] = date_fields.as_slice() {
            let mentions = dates::find(&tokens, None, &[]);
            let iso: Vec<(&dates::Mention, NaiveDate)> = mentions
                .iter()
                .filter_map(|mention| match mention.value {
                    Some(DateValue::Date(date)) if is_iso(message, &tokens, mention) => Some((mention, date)),
                    _ => None,
                })
                .collect();
            if let ([(mention, date)], 1) = (iso.as_slice(), mentions.len()) {
                let evidence = span_text(message, &tokens, mention.first, mention.last);
                read.insert(field.name.clone(), Proposal::new(Value::String(date.to_string()), evidence));
            }
        }

        if !enums.is_empty() {
            let named: Vec<(&FieldSpec, &String, String)> = enums
                .iter()
                .flat_map(|field| field.values.iter().map(move |value| (*field, value)))
                .filter_map(|(field, value)| named_verbatim(message, &tokens, &terms, value).map(|e| (field, value, e)))
                .collect();
            if let [(field, value, evidence)] = named.as_slice() {
                read.insert(field.name.clone(), Proposal::new(Value::String((*value).clone()), evidence.clone()));
            }
        }
        read
    }
}

/// Whether a date mention is written `YYYY-MM-DD`.
fn is_iso(message: &str, tokens: &[Token], mention: &dates::Mention) -> bool {
    let said = span_text(message, tokens, mention.first, mention.last);
    let bytes = said.as_bytes();
    bytes.len() == 10
        && bytes
            .iter()
            .enumerate()
            .all(|(index, byte)| if index == 4 || index == 7 { *byte == b'-' } else { byte.is_ascii_digit() })
}

/// The words naming `value` in the message, when they occur as whole words
/// and no negation governs them.
fn named_verbatim(message: &str, tokens: &[Token], terms: &[LocatedTerm], value: &str) -> Option<String> {
    let wanted: Vec<String> = tokenize(value).into_iter().filter(|t| t.is_alphanumeric()).map(|t| t.lower).collect();
    let words: Vec<(usize, &str)> =
        tokens.iter().enumerate().filter(|(_, t)| t.is_alphanumeric()).map(|(i, t)| (i, t.lower.as_str())).collect();
    if wanted.is_empty() {
        return None;
    }
    let (first, last) = words.windows(wanted.len()).find_map(|window| {
        let same = window.iter().zip(&wanted).all(|((_, word), wanted)| word == wanted);
        Some((window.first()?.0, window.last()?.0)).filter(|_| same)
    })?;
    let negated = terms.iter().any(|term| term.term.starts_with('!') && term.last >= first && term.last <= last);
    (!negated).then(|| span_text(message, tokens, first, last))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn field(name: &str, kind: &str) -> FieldSpec {
        FieldSpec::bare(name, kind)
    }

    fn request(message: &str, fields: Vec<FieldSpec>) -> UnderstandRequest {
        UnderstandRequest { message: message.into(), fields, today: "2026-01-05".into(), ..Default::default() }
    }

    fn read(message: &str, fields: Vec<FieldSpec>) -> Vec<(String, Value, String)> {
        CertainReader::new()
            .read(&request(message, fields))
            .into_iter()
            .map(|(name, proposal)| (name, proposal.value, proposal.evidence.unwrap_or_default()))
            .collect()
    }

    fn email() -> FieldSpec {
        let mut email = field("email", "string");
        email.pattern = Some("^[^@ ]+@[^@ ]+$".into());
        email
    }

    fn issue() -> FieldSpec {
        let mut issue = field("issue", "enum");
        issue.values = vec!["billing".into(), "technical".into(), "account".into()];
        issue
    }

    #[test]
    fn a_pattern_an_iso_date_and_an_enum_named_verbatim_are_read() {
        assert_eq!(
            read("my email is ann@example.com", vec![email()]),
            vec![("email".into(), Value::from("ann@example.com"), "ann@example.com".into())]
        );
        assert_eq!(
            read("2026-12-04", vec![field("date", "date")]),
            vec![("date".into(), Value::from("2026-12-04"), "2026-12-04".into())]
        );
        assert_eq!(
            read("It's about Billing.", vec![issue()]),
            vec![("issue".into(), Value::from("billing"), "Billing".into())]
        );
    }

    fn hotel() -> FieldSpec {
        let mut hotel = field("hotel", "string");
        hotel.examples = vec!["Grand Hotel".into(), "Overlook".into(), "Ritz Paris".into()];
        hotel
    }

    fn asked(mut spec: FieldSpec) -> FieldSpec {
        spec.asked = true;
        spec
    }

    #[test]
    fn the_answer_to_a_step_asking_for_one_number_or_a_yes_is_read() {
        let mut guests = asked(field("guests", "int"));
        guests.max = Some(10.0);
        assert_eq!(read("2 guests", vec![guests.clone()]), vec![("guests".into(), Value::from(2), "2".into())]);
        assert_eq!(read("two of us", vec![guests.clone()]), vec![("guests".into(), Value::from(2), "two".into())]);
        assert!(read("2 or 3", vec![guests.clone()]).is_empty(), "two numbers");
        assert!(read("40 guests", vec![guests.clone()]).is_empty(), "out of range");
        assert!(read("on 2026-12-04", vec![guests]).is_empty(), "a date is not a number");
        assert_eq!(
            read("Yes, please", vec![asked(field("confirmed", "bool"))]),
            vec![("confirmed".into(), Value::Bool(true), "Yes, please".into())]
        );
        assert_eq!(
            read("no", vec![asked(field("confirmed", "bool"))]),
            vec![("confirmed".into(), Value::Bool(false), "no".into())]
        );
        assert!(read("hmm, maybe", vec![asked(field("confirmed", "bool"))]).is_empty());
    }

    #[test]
    fn a_string_example_named_alone_is_read_as_declared() {
        assert_eq!(
            read("The ritz paris, please", vec![hotel()]),
            vec![("hotel".into(), Value::from("Ritz Paris"), "ritz paris".into())]
        );
        assert_eq!(
            read("not the Overlook: the Grand Hotel", vec![hotel()]),
            vec![("hotel".into(), Value::from("Grand Hotel"), "Grand Hotel".into())]
        );
        assert!(read("the Overlook or the Grand Hotel?", vec![hotel()]).is_empty(), "two examples");
        assert!(read("the Savoy", vec![hotel()]).is_empty(), "no example: the model's call");
    }

    #[test]
    fn what_is_not_beyond_doubt_is_left_to_the_model() {
        assert!(read("December 4", vec![field("date", "date")]).is_empty(), "not ISO");
        assert!(read("2026-12-04 or 2026-12-05", vec![field("date", "date")]).is_empty(), "two dates");
        assert!(read("2026-12-04", vec![field("from", "date"), field("to", "date")]).is_empty(), "two fields");
        assert!(read("billing or technical?", vec![issue()]).is_empty(), "two values");
        assert!(read("it's not billing", vec![issue()]).is_empty(), "negated");
        assert!(read("my invoice is wrong", vec![issue()]).is_empty(), "a synonym is the model's call");
        assert!(read("ann at example dot com", vec![email()]).is_empty());
        assert!(read("yes", vec![field("confirmed", "bool")]).is_empty(), "consent is never read ahead");
    }
}
