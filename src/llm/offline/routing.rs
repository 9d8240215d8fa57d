//! Routing a message among flows, and yes/no questions, by keyword overlap
//! of terms ([`crate::read::text::terms`]: content words, stemmed, synonyms
//! folded).
//!
//! - A flow's vocabulary is the terms of its `when`s, its `title` and its
//!   fields' `examples`. Each message term found in a vocabulary scores
//!   `1 / n`, where `n` is the number of candidate flows whose vocabulary
//!   holds it, so a word every flow shares decides nothing between them.
//!   The best score wins if it is above zero — one shared content word is
//!   enough — and ties go to the flow declared first. A flow with no `when`
//!   is never chosen: such flows are entered by their `if`, as the default,
//!   or by a directive, which the runtime decides.
//! - A question (an AI condition or a signal) is yes when a term of the
//!   message is a term of any of its `when` texts.

use super::cache::Cache;
use crate::llm::{FlowChoice, Question};
use crate::read::text::LocatedTerm;
use std::sync::Arc;

/// The flow the message is about, if any.
pub(crate) fn route(flows: &[FlowChoice], message_terms: &[String], cache: &mut Cache) -> Option<String> {
    if message_terms.is_empty() {
        return None;
    }
    // Each candidate's vocabulary, as the term lists of its texts.
    let vocabularies: Vec<(&FlowChoice, Vec<Arc<[String]>>)> = flows
        .iter()
        .filter(|flow| !flow.when.is_empty())
        .map(|flow| {
            let texts = flow.when.iter().chain(&flow.title).chain(&flow.examples);
            (flow, texts.map(|text| cache.terms(text)).collect())
        })
        .collect();
    let holds = |lists: &[Arc<[String]>], term: &String| lists.iter().any(|list| list.contains(term));
    let holders = |term: &String| vocabularies.iter().filter(|(_, lists)| holds(lists, term)).count();

    let mut best: Option<(&FlowChoice, f64)> = None;
    for (flow, lists) in &vocabularies {
        let score: f64 =
            message_terms.iter().filter(|term| holds(lists, term)).map(|term| 1.0 / holders(term).max(1) as f64).sum();
        // The epsilon keeps equal sums of fractions equal.
        let better = score > 0.0 && best.is_none_or(|(_, best_score)| score > best_score + 1e-9);
        if better {
            best = Some((flow, score));
        }
    }
    best.map(|(flow, _)| flow.name.clone())
}

/// Whether the message says what one of the question's `when`s describes:
/// the first message term that is a term of one of them (the evidence of
/// the yes), or `None` for no.
pub(crate) fn answer<'t>(
    question: &Question,
    message_terms: &'t [LocatedTerm],
    cache: &mut Cache,
) -> Option<&'t LocatedTerm> {
    if message_terms.is_empty() {
        return None;
    }
    let vocabulary: Vec<Arc<[String]>> = question.when.iter().map(|when| cache.terms(when)).collect();
    message_terms.iter().find(|located| vocabulary.iter().any(|terms| terms.contains(&located.term)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::text::{located_terms, span_text, terms, tokenize};

    fn flow(name: &str, title: Option<&str>, when: &[&str], examples: &[&str]) -> FlowChoice {
        FlowChoice {
            name: name.to_string(),
            title: title.map(str::to_string),
            when: when.iter().map(|w| w.to_string()).collect(),
            examples: examples.iter().map(|e| e.to_string()).collect(),
        }
    }

    fn flows() -> Vec<FlowChoice> {
        vec![
            flow(
                "booking",
                Some("Book a hotel room"),
                &["the user wants to book a hotel room"],
                &["Grand Hotel", "Overlook", "Ritz Paris"],
            ),
            flow(
                "billing",
                Some("Billing and refunds"),
                &["the user has a billing question or wants a refund"],
                &["ORD-1234"],
            ),
            flow("survey", Some("Satisfaction survey"), &["the user wants to give feedback"], &[]),
            flow("handoff", Some("Hand over to a human"), &[], &[]),
        ]
    }

    fn check(message: &str) -> Option<String> {
        route(&flows(), &terms(message), &mut Cache::default())
    }

    #[test]
    fn routes_by_when() {
        assert_eq!(check("Hi, I'd like to book a hotel room").as_deref(), Some("booking"));
        assert_eq!(check("I want a refund for ORD-1234").as_deref(), Some("billing"));
        assert_eq!(check("I was charged twice").as_deref(), Some("billing"));
        assert_eq!(check("some feedback for you").as_deref(), Some("survey"));
    }

    #[test]
    fn routes_by_title_and_examples() {
        assert_eq!(check("the Overlook").as_deref(), Some("booking"));
        assert_eq!(check("a satisfaction thing").as_deref(), Some("survey"));
    }

    #[test]
    fn negated_words_do_not_route() {
        assert_eq!(check("I don't want to book a hotel, I want a refund").as_deref(), Some("billing"));
        assert_eq!(check("I don't want to book anything"), None);
    }

    #[test]
    fn nothing_shared_is_no_flow() {
        assert_eq!(check("hello"), None);
        assert_eq!(check("2026-12-04"), None);
        assert_eq!(check("yes"), None);
        assert_eq!(route(&[], &terms("book a room"), &mut Cache::default()), None);
    }

    #[test]
    fn flows_without_when_are_never_routed() {
        assert_eq!(check("I want a human"), None);
    }

    #[test]
    fn rarer_words_weigh_more() {
        let flows = [flow("a", None, &["hotel bill"], &[]), flow("b", None, &["hotel room"], &[])];
        // `hotel` is in both (1/2 each), `room` only in b.
        assert_eq!(route(&flows, &terms("hotel room"), &mut Cache::default()).as_deref(), Some("b"));
    }

    #[test]
    fn ties_go_to_the_first_declared() {
        let flows = [flow("a", None, &["hotel"], &[]), flow("b", None, &["hotel"], &[])];
        assert_eq!(route(&flows, &terms("hotel"), &mut Cache::default()).as_deref(), Some("a"));
    }

    fn yes(question: &Question, message: &str) -> bool {
        evidence(question, message).is_some()
    }

    fn evidence(question: &Question, message: &str) -> Option<String> {
        let tokens = tokenize(message);
        let located = located_terms(&tokens);
        let found = answer(question, &located, &mut Cache::default())?;
        Some(span_text(message, &tokens, found.first, found.last))
    }

    #[test]
    fn a_yes_cites_the_words_it_rests_on() {
        let change = question(&["the user wants to change the date"]);
        assert_eq!(evidence(&change, "No, make it a different day instead").as_deref(), Some("different"));
        let frustrated = question(&["the user is frustrated or says it still does not work"]);
        assert_eq!(evidence(&frustrated, "Well, it still doesn't work!").as_deref(), Some("doesn't work"));
        assert_eq!(evidence(&frustrated, "it works"), None);
    }

    fn question(when: &[&str]) -> Question {
        Question { id: "q".to_string(), when: when.iter().map(|w| w.to_string()).collect() }
    }

    #[test]
    fn questions_by_keyword_and_synonym() {
        let change = question(&["the user wants to change the date"]);
        assert!(yes(&change, "actually, can we change the date?"));
        assert!(yes(&change, "can I pick a different day"));
        assert!(!yes(&change, "no"));
        assert!(!yes(&change, "yes"));
        assert!(!yes(&change, "I don't want to change the date"));
        assert!(yes(&change, "no, I'd rather change the date"));
        let human = question(&["the user asks for a human agent or a real person"]);
        assert!(yes(&human, "let me talk to someone"));
        assert!(!yes(&human, "ann@example.com"));
        let urgent = question(&["the service is down or the problem is urgent"]);
        assert!(yes(&urgent, "we have an outage"));
        assert!(!yes(&urgent, "a technical problem"));
        let upset = question(&["the user is angry or upset"]);
        assert!(yes(&upset, "I'm furious"));
        let frustrated = question(&["the user is frustrated or says it still does not work"]);
        assert!(yes(&frustrated, "it still doesn't work"));
        assert!(yes(&frustrated, "this is so frustrating"));
        assert!(!yes(&frustrated, "it works now, thanks"));
    }

    #[test]
    fn a_greeting_answers_a_greeting_question_and_nothing_else() {
        let hello = question(&["the user says hello"]);
        assert_eq!(evidence(&hello, "hello").as_deref(), Some("hello"));
        assert_eq!(evidence(&hello, "Hi!").as_deref(), Some("Hi"));
        assert!(yes(&question(&["hello"]), "hey there"));
        assert!(yes(&question(&["the user greets us"]), "hello"));
        assert!(!yes(&hello, "yes"));
        assert!(!yes(&question(&["the user wants to change the date"]), "hello"));
        let flows = [flow("booking", None, &["the user wants to book a hotel"], &[])];
        assert_eq!(route(&flows, &terms("hi"), &mut Cache::default()), None, "a greeting routes nowhere by itself");
        let flows =
            [flow("booking", None, &["the user wants to book a hotel"], &[]), flow("welcome", None, &["hello"], &[])];
        assert_eq!(
            route(&flows, &terms("Hi, I want to book a hotel"), &mut Cache::default()).as_deref(),
            Some("booking")
        );
    }

    #[test]
    fn any_when_of_a_question_is_enough() {
        let either = question(&["the user wants a refund", "the user mentions an invoice"]);
        assert!(yes(&either, "where is my invoice"));
        assert!(!yes(&question(&[]), "anything"));
    }
}
