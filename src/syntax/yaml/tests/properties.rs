//! Mutated and random YAML never panics the front end, and every label
//! it reports lies inside the text.

use super::{BOOKING, EVERY_KEY, parse};
use proptest::prelude::*;

/// Checks the front end returned, with every label inside the text.
fn check_returns(text: &str) {
    let (_, diagnostics) = parse(text);
    for diagnostic in &diagnostics {
        for label in &diagnostic.labels {
            assert!(label.span.start <= label.span.end, "{diagnostic:?}");
            assert!((label.span.end as usize) <= text.len(), "{diagnostic:?}");
            assert!(text.is_char_boundary(label.span.start as usize), "{diagnostic:?}");
            assert!(text.is_char_boundary(label.span.end as usize), "{diagnostic:?}");
        }
    }
}

const SNIPPETS: &[&str] =
    &[":", "-", "\t", "&a", "*a", "{", "[", "}", "]", "\n", " ", "'", "\"", "#", "!", "|", "{{", "é"];

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, usize),
    Duplicate(usize, usize),
    Swap(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(at, len)| Mutation::Delete(at, len)),
        (any::<usize>(), 0..SNIPPETS.len()).prop_map(|(at, snippet)| Mutation::Insert(at, snippet)),
        (any::<usize>(), 0usize..80).prop_map(|(at, len)| Mutation::Duplicate(at, len)),
        (any::<usize>(), any::<usize>(), 1usize..40).prop_map(|(a, b, len)| Mutation::Swap(a, b, len)),
    ]
}

fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &mut String, mutation: &Mutation) {
    match *mutation {
        Mutation::Delete(at, len) => {
            let start = boundary(text, at);
            let end = boundary(text, start + len.min(text.len() - start));
            text.replace_range(start..end, "");
        }
        Mutation::Insert(at, snippet) => {
            let at = boundary(text, at);
            text.insert_str(at, SNIPPETS[snippet]);
        }
        Mutation::Duplicate(at, len) => {
            let start = boundary(text, at);
            let end = boundary(text, start + len.min(text.len() - start));
            let copy = text[start..end].to_string();
            text.insert_str(end, &copy);
        }
        Mutation::Swap(a, b, len) => {
            let (a, b) = (boundary(text, a), boundary(text, b));
            let (first, second) = (a.min(b), a.max(b));
            let first_end = boundary(text, (first + len).min(second));
            let second_end = boundary(text, second + len.min(text.len() - second));
            let first_part = text[first..first_end].to_string();
            let second_part = text[second..second_end].to_string();
            text.replace_range(second..second_end, &first_part);
            text.replace_range(first..first_end, &second_part);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        check_returns(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn yamlish_noise_never_panics(parts in proptest::collection::vec(0..SNIPPETS.len() + 3, 0..120)) {
        let words = ["flows", "steps", "id"];
        let text: String = parts
            .iter()
            .map(|part| SNIPPETS.get(*part).copied().unwrap_or_else(|| words[*part - SNIPPETS.len()]))
            .collect();
        check_returns(&text);
    }

    #[test]
    fn mutated_programs_never_panic(
        base in prop_oneof![Just(BOOKING), Just(EVERY_KEY)],
        mutations in proptest::collection::vec(mutation(), 1..8),
    ) {
        let mut text = base.to_string();
        for mutation in &mutations {
            apply(&mut text, mutation);
        }
        check_returns(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever a mutation breaks, building flows while reading (on one
    /// thread or two) changes nothing in the AST or the diagnostics.
    #[test]
    fn mutated_programs_build_the_same_while_reading(
        base in prop_oneof![Just(BOOKING), Just(EVERY_KEY)],
        mutations in proptest::collection::vec(mutation(), 1..8),
    ) {
        let mut text = base.to_string();
        for mutation in &mutations {
            apply(&mut text, mutation);
        }
        super::assert_same_as_whole_tree(&text);
    }
}
