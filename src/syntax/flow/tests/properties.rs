//! Mutated and random programs never panic the parser and only get
//! diagnostics with spans inside the file.

use super::*;
use proptest::prelude::*;

/// One edit of a valid program.
#[derive(Clone, Debug)]
enum Mutation {
    Delete { at: usize, length: usize },
    Duplicate { at: usize, length: usize },
    Insert { at: usize, piece: &'static str },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let position = 0..BOOKING.len();
    prop_oneof![
        (position.clone(), 1usize..40).prop_map(|(at, length)| Mutation::Delete { at, length }),
        (position.clone(), 1usize..80).prop_map(|(at, length)| Mutation::Duplicate { at, length }),
        (
            position,
            prop::sample::select(vec!["{", "}", "\"", "'", "->", "#", "{{", "}}", "(", ")", ",", "\\", " ", "é"])
        )
            .prop_map(|(at, piece)| Mutation::Insert { at, piece }),
    ]
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &mut String, mutation: &Mutation) {
    match *mutation {
        Mutation::Delete { at, length } => {
            let start = floor_boundary(text, at);
            let end = floor_boundary(text, start + length);
            text.replace_range(start..end, "");
        }
        Mutation::Duplicate { at, length } => {
            let start = floor_boundary(text, at);
            let end = floor_boundary(text, start + length);
            let copy = text[start..end].to_string();
            text.insert_str(end, &copy);
        }
        Mutation::Insert { at, piece } => {
            let at = floor_boundary(text, at);
            text.insert_str(at, piece);
        }
    }
}

fn parses_without_panicking(source: &str) {
    let (_, diagnostics) = with_main_thread_stack(|| parse_text(source));
    for diagnostic in &diagnostics {
        for label in &diagnostic.labels {
            assert!(label.span.start <= label.span.end, "{diagnostic:?}");
            assert!(label.span.end as usize <= source.len(), "{diagnostic:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn mutated_programs_never_panic(mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut source = BOOKING.to_string();
        for mutation in &mutations {
            apply(&mut source, mutation);
        }
        parses_without_panicking(&source);
    }

    #[test]
    fn random_text_never_panics(source in "[a-z_ {}()\\[\\]\"'#:,.=<>\\-+0-9\n]{0,200}") {
        parses_without_panicking(&source);
    }

    #[test]
    fn arbitrary_strings_never_panic(source in any::<String>()) {
        parses_without_panicking(&source);
    }
}
