//! Grounding: code checks every proposal of the model against the user's
//! message before anything is written or any branch is taken.
//!
//! A field value is accepted only when its evidence (the words the model
//! says it read the value from) occurs in this turn's message — compared
//! as words, ignoring case, punctuation and spacing — and the value follows
//! from those words: a date or datetime read from them by the offline date
//! rules (`December 12`, `tomorrow`, ISO), a number read from them (`2`,
//! `two`), an enum value whose name's words (stemmed, synonyms folded) are
//! among them, a bool from their yes/no words, a string (each string of a
//! list or object) contained in them. A yes to an AI condition or a signal
//! needs evidence that occurs in the message too, with a word in it: data
//! alone (an email, a date, a number) cannot show that a condition holds.
//! Whatever fails is dropped — a value is not written, a yes counts as no —
//! and reported as an [`Event::Ungrounded`] with what the model proposed.
//!
//! The readers are `crate::read`'s, the offline provider's too: one set of
//! rules reads dates and numbers everywhere.

use super::events::Event;
use crate::ir::{Program, TypeKind, ValueType};
use crate::llm::{Answer, Proposal, Understanding};
use crate::read::consent::{Consent, Doubt, read_answering};
use crate::read::{ReadDate, dates_in, numbers_in, terms_in, words_of, yes_no_in};
use chrono::NaiveDate;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A text compared as words: the offline rules' words (letters and digits
/// apart, symbols dropped), lowercase, padded with a space on each side so
/// that `contains` matches whole words only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Words(String);

impl Words {
    pub fn new(text: &str) -> Words {
        Words(words_of(text))
    }

    /// Whether there is no word at all.
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// Whether `other`'s words occur here, in order and adjacent, as whole
    /// words: a value within its evidence.
    pub fn contains(&self, other: &Words) -> bool {
        !other.is_empty() && self.0.contains(other.0.as_str())
    }

    /// Where `other`'s words first occur here as whole words, as a byte
    /// range of these words.
    pub fn span_of(&self, other: &Words) -> Option<std::ops::Range<usize>> {
        if other.is_empty() {
            return None;
        }
        self.0.find(other.0.as_str()).map(|start| start + 1..start + other.0.len() - 1)
    }

    /// Whether `other`'s text occurs here, words possibly cut at its ends:
    /// evidence within the message. A pattern may read `ORD-1234` out of
    /// `refundORD-1234`, and its evidence is still the user's writing.
    pub fn quotes(&self, other: &Words) -> bool {
        !other.is_empty() && self.0.contains(other.0.trim())
    }
}

/// Whether a proposed value is grounded in the message; the error says
/// why not, in words for the trace.
pub fn check_value(
    ty: &ValueType,
    proposal: &Proposal,
    message: &Words,
    today: Option<NaiveDate>,
) -> Result<(), String> {
    let evidence = cited(proposal.evidence.as_deref(), message)?;
    if follows(ty, &proposal.value, evidence, today) {
        Ok(())
    } else {
        Err(format!("the value does not follow from \"{evidence}\""))
    }
}

/// Whether a yes is grounded: its evidence occurs in the message and has
/// words that could say so. An email, a date, a number or an order id is
/// what the user gave, not a sign that a condition holds: the weak local
/// model answered "frustrated" citing "jane@example.com", the whole of a
/// message that gave an email, and the user was handed to a person.
pub fn check_yes(answer: &Answer, message: &Words) -> Result<(), String> {
    let evidence = cited(answer.evidence.as_deref(), message)?;
    if has_words(evidence) {
        Ok(())
    } else {
        Err(format!("the evidence \"{evidence}\" is data, not words that could say so"))
    }
}

/// Whether `text` holds a word (two letters or more, in any language)
/// outside data: addresses (emails, links) and anything with a digit
/// (dates, numbers, ids such as `ORD-1234`). Which words mean yes is the
/// model's to judge; that there are words at all is code's.
fn has_words(text: &str) -> bool {
    text.split_whitespace()
        .filter(|token| {
            !token.contains('@')
                && !token.contains("://")
                && !token.starts_with("www.")
                && !token.chars().any(|c| c.is_ascii_digit())
        })
        .any(|token| token.chars().filter(|c| c.is_alphabetic()).count() >= 2)
}

/// The evidence, when it is there and occurs in the message.
fn cited<'e>(evidence: Option<&'e str>, message: &Words) -> Result<&'e str, String> {
    let evidence = evidence.map(str::trim).filter(|evidence| !evidence.is_empty()).ok_or("no evidence was given")?;
    if message.quotes(&Words::new(evidence)) {
        Ok(evidence)
    } else {
        Err(format!("the evidence \"{evidence}\" is not in the message"))
    }
}

/// Whether the value follows from the evidence (relative dates resolved
/// against `today`).
fn follows(ty: &ValueType, value: &Value, evidence: &str, today: Option<NaiveDate>) -> bool {
    match (&ty.kind, value) {
        (TypeKind::String, Value::String(text)) => Words::new(evidence).contains(&Words::new(text)),
        (TypeKind::Int | TypeKind::Float, Value::Number(number)) => {
            number.as_f64().is_some_and(|wanted| numbers_in(evidence).iter().any(|read| (read - wanted).abs() < 1e-9))
        }
        (TypeKind::Bool, Value::Bool(yes)) => yes_no_in(evidence) == Some(*yes),
        (TypeKind::Enum { .. }, Value::String(name)) => names(evidence, name),
        (TypeKind::Date, Value::String(day)) => dates_in(evidence, today).iter().any(|read| match read {
            ReadDate::Date(date) => date.to_string() == *day,
            ReadDate::DateTime(datetime) => datetime.get(..10) == Some(day.as_str()),
            ReadDate::Time { .. } => false,
        }),
        (TypeKind::DateTime, Value::String(moment)) => says_moment(evidence, moment, today),
        (TypeKind::List { items }, Value::Array(values)) => {
            values.iter().all(|item| follows(items, item, evidence, today))
        }
        (TypeKind::Object { fields }, Value::Object(map)) => fields.iter().all(|field| {
            map.get(&field.name).is_none_or(|member| member.is_null() || follows(&field.ty, member, evidence, today))
        }),
        // A value of the wrong JSON type is the schema check's to reject.
        _ => true,
    }
}

/// Whether the evidence says this date and clock time (`2026-01-06T19:00`
/// from an ISO datetime, or from `tomorrow at 7pm`).
fn says_moment(evidence: &str, moment: &str, today: Option<NaiveDate>) -> bool {
    let (Some(day), Some(clock)) = (moment.get(..10), moment.get(11..16)) else {
        return false;
    };
    let read = dates_in(evidence, today);
    let whole = read.iter().any(|read| matches!(read, ReadDate::DateTime(said) if said.get(..16) == moment.get(..16)));
    let said_day = read.iter().any(|read| matches!(read, ReadDate::Date(date) if date.to_string() == day));
    let said_clock = read
        .iter()
        .any(|read| matches!(read, ReadDate::Time { hour, minute } if format!("{hour:02}:{minute:02}") == clock));
    whole || (said_day && said_clock)
}

/// Whether the evidence names an enum value: all the words of its name, as
/// written or as terms (stemmed, synonyms folded: `accounts` names
/// `account`, `invoice` names `billing`), not negated.
fn names(evidence: &str, name: &str) -> bool {
    if Words::new(evidence).contains(&Words::new(name)) {
        let said = terms_in(evidence);
        return !terms_in(name).iter().any(|term| said.contains(&format!("!{term}")));
    }
    let wanted = terms_in(name);
    let said = terms_in(evidence);
    !wanted.is_empty() && wanted.iter().all(|term| said.contains(term))
}

/// Checks a whole understanding against `message`: drops the values whose
/// evidence fails and turns ungrounded yeses into noes. Returns the trace
/// of what was dropped. Values of names the program does not declare are
/// left for the caller to report.
pub fn ground(
    program: &Program,
    understanding: &mut Understanding,
    message: &str,
    today: Option<NaiveDate>,
) -> Vec<Event> {
    let mut events = Vec::new();
    let anything_proposed = !understanding.fields.is_empty()
        || understanding.conditions.values().chain(understanding.signals.values()).any(|answer| answer.yes);
    if !anything_proposed {
        return events;
    }
    let words = Words::new(message);
    understanding.fields.retain(|name, proposal| {
        let Some(field) = program.field_by_name(name).and_then(|id| program.field(id)) else {
            return true;
        };
        match check_value(&field.ty, proposal, &words, today) {
            Ok(()) => true,
            Err(reason) => {
                events.push(Event::Ungrounded {
                    kind: "field",
                    name: name.clone(),
                    value: proposal.value.clone(),
                    evidence: proposal.evidence.clone(),
                    reason,
                });
                false
            }
        }
    });
    for (kind, answers) in [("condition", &mut understanding.conditions), ("signal", &mut understanding.signals)] {
        for (id, answer) in answers.iter_mut().filter(|(_, answer)| answer.yes) {
            if let Err(reason) = check_yes(answer, &words) {
                events.push(Event::Ungrounded {
                    kind,
                    name: id.clone(),
                    value: Value::Bool(true),
                    evidence: answer.evidence.clone(),
                    reason,
                });
                answer.yes = false;
            }
        }
    }
    events
}

/// One span of the message grounds one field. When the words that are one
/// field's value overlap the words of another's, one of them keeps them: a
/// value code read with certainty first, then the field the step asks for;
/// the other proposal is dropped and traced. Overlaps between two
/// proposals that are neither are left alone. "12 Baker Street, London"
/// answers the address asked for, not a list of toppings; "then do 3000
/// for now", where a pattern read the amount, is not also the recipient.
///
/// The words a proposal claims are those it was read from when code read
/// it (code cites exactly), and otherwise the words that are its value: a
/// string's (each item's, for a list), a number's digits, an enum value's
/// name. A model that cites the whole message for every value claims no
/// more than its values.
pub fn one_field_per_span(
    fields: &mut BTreeMap<String, Proposal>,
    certain: &BTreeSet<String>,
    asked: Option<&str>,
    message: &str,
) -> Vec<Event> {
    let message = Words::new(message);
    let rank = |name: &str| u8::from(certain.contains(name)) * 2 + u8::from(asked == Some(name));
    let claims: Vec<(String, u8, Vec<std::ops::Range<usize>>)> = fields
        .iter()
        .map(|(name, proposal)| {
            let spans = if certain.contains(name) {
                proposal.evidence.iter().filter_map(|evidence| message.span_of(&Words::new(evidence))).collect()
            } else {
                value_spans(&proposal.value, &message)
            };
            (name.clone(), rank(name), spans)
        })
        .collect();
    let overlap = |ours: &[std::ops::Range<usize>], theirs: &[std::ops::Range<usize>]| {
        ours.iter().any(|a| theirs.iter().any(|b| a.start < b.end && b.start < a.end))
    };
    let mut events = Vec::new();
    for (name, rank, spans) in &claims {
        let winner = claims
            .iter()
            .find(|(other, other_rank, other_spans)| other != name && other_rank > rank && overlap(spans, other_spans));
        let Some((winner, _, _)) = winner else {
            continue;
        };
        if let Some(proposal) = fields.remove(name) {
            events.push(Event::Ungrounded {
                kind: "field",
                name: name.clone(),
                value: proposal.value,
                evidence: proposal.evidence,
                reason: format!("its words answer `{winner}`"),
            });
        }
    }
    events
}

/// Where the words that are `value` stand in the message: a string's, each
/// string item's, a number's digits; nothing for a yes/no, a date or an
/// object, which take no span of their own.
fn value_spans(value: &Value, message: &Words) -> Vec<std::ops::Range<usize>> {
    match value {
        Value::String(text) => message.span_of(&Words::new(text)).into_iter().collect(),
        Value::Number(number) => message.span_of(&Words::new(&number.to_string())).into_iter().collect(),
        Value::Array(items) => items.iter().flat_map(|item| value_spans(item, message)).collect(),
        _ => Vec::new(),
    }
}

/// The consent rule, for the confirmations (`bool`s) the answered step
/// collects: a yes is kept only when the message is an unqualified assent
/// (nothing in it asks, hesitates, sets a condition, corrects, says "but"
/// or also says no), a no only when the message is a plain refusal.
/// Anything else is set aside as unclear, traced with the reason; the
/// doubt is returned so the step can say why it asks again. Runs after
/// grounding, on what code read and what the model proposed alike.
pub fn ground_consent(
    confirmations: &[String],
    fields: &mut BTreeMap<String, Proposal>,
    message: &str,
    shown: &[String],
) -> (Vec<Event>, Option<Doubt>) {
    let mut events = Vec::new();
    if confirmations.is_empty() {
        return (events, None);
    }
    let reading = read_answering(message, shown);
    let doubt = match &reading {
        Consent::Unclear(doubt) => Some(doubt.clone()),
        Consent::Yes | Consent::No | Consent::Silent => None,
    };
    let mut set_aside = None;
    for field in confirmations {
        let proposed = fields.get(field).map(|proposal| proposal.value.clone());
        let doubt = match (&proposed, &reading) {
            (Some(Value::Bool(true)), Consent::Yes) | (Some(Value::Bool(false)), Consent::No) => continue,
            (Some(_), Consent::Unclear(doubt)) => doubt.clone(),
            (Some(Value::Bool(true)), _) => Doubt::no_assent(),
            (Some(_), _) => Doubt::no_refusal(),
            (None, Consent::Unclear(doubt)) => doubt.clone(),
            (None, _) => continue,
        };
        fields.remove(field);
        events.push(Event::ConsentUnclear { field: field.clone(), proposed, reason: doubt.reason() });
        set_aside = Some(doubt);
    }
    (events, set_aside.or(doubt))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ty(kind: TypeKind) -> ValueType {
        ValueType { kind, description: None, min: None, max: None, pattern: None, examples: Vec::new() }
    }

    fn today() -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(2026, 1, 5)
    }

    fn check(kind: TypeKind, value: Value, evidence: &str, message: &str) -> Result<(), String> {
        check_value(&ty(kind), &Proposal::new(value, evidence), &Words::new(message), today())
    }

    #[test]
    fn evidence_must_occur_in_the_message_as_words() {
        let message = Words::new("The  GRAND hotel, please!");
        assert!(message.contains(&Words::new("grand Hotel")));
        assert!(message.contains(&Words::new("hotel please")), "punctuation is not a word");
        assert!(!message.contains(&Words::new("and hotel")), "whole words only");
        assert!(!message.contains(&Words::new("  ,")), "no words, no evidence");
        assert!(message.quotes(&Words::new("and hotel")), "evidence may cut a word");
        assert!(!message.quotes(&Words::new("  ,")));
        let unsaid = Proposal { value: json!("Overlook"), evidence: None };
        assert_eq!(
            check_value(&ty(TypeKind::String), &unsaid, &message, today()).unwrap_err(),
            "no evidence was given"
        );
        assert_eq!(
            check(TypeKind::String, json!("Overlook"), "the Overlook", "The Grand Hotel, please").unwrap_err(),
            "the evidence \"the Overlook\" is not in the message"
        );
    }

    #[test]
    fn strings_must_be_in_their_evidence() {
        assert!(check(TypeKind::String, json!("Grand Hotel"), "The Grand Hotel", "The Grand Hotel, please").is_ok());
        assert_eq!(
            check(TypeKind::String, json!("Overlook"), "The Grand Hotel", "The Grand Hotel, please").unwrap_err(),
            "the value does not follow from \"The Grand Hotel\""
        );
        assert!(check(TypeKind::String, json!("ann@example.com"), "ann@example.com", "it's ann@example.com").is_ok());
    }

    #[test]
    fn dates_follow_from_what_the_user_wrote() {
        let message = "No, make it December 12 instead";
        assert!(check(TypeKind::Date, json!("2026-12-12"), "December 12", message).is_ok());
        assert!(check(TypeKind::Date, json!("2026-01-06"), "tomorrow", "tomorrow then").is_ok());
        assert!(check(TypeKind::Date, json!("2026-12-04"), "2026-12-04", "2026-12-04").is_ok());
        assert!(check(TypeKind::Date, json!("2026-01-05"), "Grand Hotel", "The Grand Hotel, please").is_err());
        assert!(check(TypeKind::Date, json!("2026-12-13"), "December 12", message).is_err());
        assert!(check(TypeKind::DateTime, json!("2026-01-06T19:00:00"), "tomorrow at 7pm", "tomorrow at 7pm").is_ok());
        assert!(check(TypeKind::DateTime, json!("2026-01-06T18:00:00"), "tomorrow at 7pm", "tomorrow at 7pm").is_err());
    }

    #[test]
    fn numbers_bools_and_enums_follow_from_their_words() {
        assert!(check(TypeKind::Int, json!(2), "two guests", "two guests please").is_ok());
        assert!(check(TypeKind::Int, json!(2), "2", "2 guests").is_ok());
        assert!(check(TypeKind::Int, json!(3), "2", "2 guests").is_err());
        assert!(check(TypeKind::Int, json!(4), "2026-12-04", "2026-12-04").is_err(), "a date's digits are no number");
        assert!(check(TypeKind::Bool, json!(true), "yes", "yes").is_ok());
        assert!(check(TypeKind::Bool, json!(true), "Hi", "Hi, I'd like to book a hotel room").is_err());
        assert!(check(TypeKind::Bool, json!(false), "No", "No, make it December 12 instead").is_ok());
        let issue = || TypeKind::Enum { values: vec!["billing".into(), "technical".into(), "account".into()] };
        assert!(check(issue(), json!("account"), "my accounts", "it's my accounts").is_ok());
        assert!(check(issue(), json!("billing"), "invoice", "the invoice is wrong").is_ok(), "a synonym");
        assert!(check(issue(), json!("technical"), "invoice", "the invoice is wrong").is_err());
        assert!(check(issue(), json!("billing"), "not billing", "not billing").is_err(), "negated");
    }

    #[test]
    fn lists_and_objects_follow_item_by_item() {
        let toppings = || TypeKind::List { items: Box::new(ty(TypeKind::String)) };
        let message = "ham, olives and mushrooms please";
        let evidence = "ham, olives and mushrooms";
        assert!(check(toppings(), json!(["ham", "olives", "mushrooms"]), evidence, message).is_ok());
        assert!(check(toppings(), json!(["ham", "pineapple"]), evidence, message).is_err());
    }

    #[test]
    fn a_yes_needs_words_not_data() {
        let check = |evidence: &str, message: &str| check_yes(&Answer::yes(evidence), &Words::new(message));
        assert_eq!(
            check("jane@example.com", "jane@example.com"),
            Err("the evidence \"jane@example.com\" is data, not words that could say so".into())
        );
        for data in ["2026-12-04", "ORD-1234", "3", "12:30", "https://acme.test/x", "www.acme.test"] {
            assert!(check(data, &format!("see {data} now")).is_err(), "{data}");
        }
        for words in ["this is ridiculous", "a real person", "it still does not work", "yes", "uh", "ça marche pas"] {
            assert!(check(words, &format!("well, {words}!")).is_ok(), "{words}");
        }
        assert!(check("mail jane@example.com now", "mail jane@example.com now").is_ok(), "words around data count");
    }

    #[test]
    fn ungrounded_yeses_count_as_no_and_are_traced() {
        let program = crate::pipeline::compile(&crate::source::SourceFile::new(
            "t.yaml",
            "schema:\n  hotel: string\n  confirmed: bool\nflows:\n  f:\n    steps:\n      - id: a\n        collect: [hotel, confirmed]\n",
        ))
        .ir;
        let mut understanding = Understanding::default();
        understanding.fields.insert("hotel".into(), Proposal::new(json!("Overlook"), "Overlook"));
        understanding.fields.insert("confirmed".into(), Proposal { value: json!(true), evidence: None });
        understanding.signals.insert("human".into(), Answer::yes("a person"));
        understanding.conditions.insert("f.a#1".into(), Answer::yes("the Grand"));
        let events = ground(&program, &mut understanding, "The Grand Hotel, please", today());
        assert!(understanding.fields.is_empty());
        assert!(!understanding.signals.get("human").unwrap().yes);
        assert!(understanding.conditions.get("f.a#1").unwrap().yes);
        let dropped: Vec<(&str, String)> = events
            .iter()
            .filter_map(|event| match event {
                Event::Ungrounded { kind, name, .. } => Some((*kind, name.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(dropped, vec![("field", "confirmed".into()), ("field", "hotel".into()), ("signal", "human".into())]);
    }

    fn proposals(entries: &[(&str, Value, &str)]) -> BTreeMap<String, Proposal> {
        entries
            .iter()
            .map(|(name, value, evidence)| (name.to_string(), Proposal::new(value.clone(), *evidence)))
            .collect()
    }

    #[test]
    fn the_asked_field_keeps_its_words_from_a_free_text_list() {
        let message = "12 Baker Street, London";
        let mut fields = proposals(&[
            ("address", json!("12 Baker Street, London"), message),
            ("toppings", json!(["12 Baker Street", "London"]), message),
        ]);
        let events = one_field_per_span(&mut fields, &BTreeSet::new(), Some("address"), message);
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["address"]);
        assert!(matches!(&events[..], [Event::Ungrounded { name, reason, .. }]
            if name == "toppings" && reason == "its words answer `address`"));
    }

    #[test]
    fn a_certain_read_keeps_its_words_from_the_whole_answer() {
        let message = "then do 3000 for now";
        let mut fields =
            proposals(&[("amount", json!(3000), "3000"), ("recipient", json!("then do 3000 for now"), message)]);
        let certain = BTreeSet::from(["amount".to_string()]);
        one_field_per_span(&mut fields, &certain, Some("recipient"), message);
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["amount"]);
    }

    #[test]
    fn values_that_cite_the_whole_message_claim_only_their_own_words() {
        let message = "Book The Savoy for 2 guests on 2026-12-04";
        let mut fields = proposals(&[
            ("hotel", json!("The Savoy"), message),
            ("guests", json!(2), message),
            ("date", json!("2026-12-04"), "2026-12-04"),
        ]);
        let certain = BTreeSet::from(["date".to_string()]);
        assert!(one_field_per_span(&mut fields, &certain, Some("hotel"), message).is_empty());
        assert_eq!(fields.len(), 3);
    }

    #[test]
    fn a_yes_to_a_confirmation_must_be_unqualified() {
        let confirmations = ["confirmed".to_string()];
        let run = |value: Value, message: &str| {
            let mut fields = proposals(&[("confirmed", value, message)]);
            let (events, doubt) = ground_consent(&confirmations, &mut fields, message, &[]);
            (fields.get("confirmed").map(|proposal| proposal.value.clone()), events.len(), doubt.map(|d| d.kind))
        };
        use crate::read::consent::DoubtKind;
        assert_eq!(run(json!(true), "yes please"), (Some(json!(true)), 0, None));
        assert_eq!(run(json!(true), "I need to correct the date"), (None, 1, Some(DoubtKind::Hesitation)));
        assert_eq!(run(json!(true), "yes please, but wait"), (None, 1, Some(DoubtKind::Hesitation)));
        assert_eq!(run(json!(true), "yes but for 3 guests"), (None, 1, Some(DoubtKind::Contrast)));
        assert_eq!(run(json!(true), "the Grand Hotel"), (None, 1, Some(DoubtKind::NoAssent)));
        assert_eq!(run(json!(false), "no idea"), (None, 1, Some(DoubtKind::Hesitation)));
        assert_eq!(run(json!(false), "no, please don't"), (Some(json!(false)), 0, None));
        let mut nothing = BTreeMap::new();
        let (events, doubt) = ground_consent(&confirmations, &mut nothing, "is that right?", &[]);
        assert!(matches!(&events[..], [Event::ConsentUnclear { proposed: None, .. }]));
        assert_eq!(doubt.map(|doubt| doubt.kind), Some(DoubtKind::Question));
    }
}
