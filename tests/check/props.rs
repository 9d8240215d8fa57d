//! Bad input through the whole pipeline: programs mutated at random (bytes
//! cut, tokens spliced in, lines repeated or swapped) and programs generated
//! from the language's pieces never make `pipeline::compile` panic, and
//! every diagnostic it returns points inside the file.

use flowc::pipeline::compile;
use flowc::source::SourceFile;
use proptest::prelude::*;

/// Valid and broken programs of both syntaxes to mutate.
fn corpus() -> &'static [(String, String)] {
    static CORPUS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(read_corpus)
}

pub(crate) fn read_corpus() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                files.push((path.to_string_lossy().into_owned(), text));
            }
        }
    }
    files.sort();
    files
}

/// Pieces that make mutations land on meaningful syntax more often than
/// random bytes would.
pub(crate) const TOKENS: &[&str] = &[
    "flow f { ",
    "step s { ",
    "auto step a { ",
    "}",
    "{",
    "->",
    " -> end",
    " next s",
    " next end",
    "branch { ",
    " if x == 1 ",
    " else -> s ",
    " when \"w\" ",
    " collect x",
    " requires x",
    " skip_if x is set",
    " wait 1s",
    " emit goto f",
    " emit goto_step f.s",
    " emit reset",
    " emit { halt }",
    " set x = null",
    " say \"{{x}}\"",
    " call t(a: x) -> x",
    " for c in xs { say \"{{c}}\" }",
    " default",
    "\n",
    ":",
    "- ",
    "  ",
    "steps:",
    "branches:",
    "then: ",
    "id: s",
    "goto_step: { flow: f, step: s }",
    "if: x > 1",
    "[",
    "]",
    "\"",
    "'",
    "{{",
    "}}",
    "#",
    "\u{0}",
    "é",
    "((((",
    "))))",
    " and ",
    " or not ",
];

#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    Cut { at: usize, len: usize },
    Insert { at: usize, token: usize },
    RepeatLine { line: usize },
    SwapLines { first: usize, second: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Cut { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        any::<usize>().prop_map(|line| Mutation::RepeatLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(first, second)| Mutation::SwapLines { first, second }),
    ]
}

fn char_boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

pub(crate) fn apply(text: &mut String, mutation: &Mutation) {
    match mutation {
        Mutation::Cut { at, len } => {
            let start = char_boundary(text, *at);
            let end = char_boundary(text, (start + len).min(text.len()));
            if start < end {
                text.replace_range(start..end, "");
            }
        }
        Mutation::Insert { at, token } => {
            let at = char_boundary(text, *at);
            text.insert_str(at, TOKENS.get(*token).copied().unwrap_or(""));
        }
        Mutation::RepeatLine { line } => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let index = line % lines.len();
                let repeated = lines.get(index).copied().unwrap_or("");
                lines.insert(index, repeated);
                *text = lines.join("\n");
            }
        }
        Mutation::SwapLines { first, second } => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let count = lines.len();
                lines.swap(first % count, second % count);
                *text = lines.join("\n");
            }
        }
    }
}

fn compiles_without_panicking(name: &str, text: String) -> Result<(), TestCaseError> {
    let length = text.len();
    let file = SourceFile::new(name, text);
    let compilation = compile(&file);
    for diagnostic in &compilation.diagnostics {
        for label in &diagnostic.labels {
            prop_assert!(
                label.span.start <= label.span.end && label.span.end as usize <= length,
                "{:?} points outside the file ({length} bytes)",
                diagnostic
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn mutated_programs_never_panic(pick in any::<usize>(), mutations in proptest::collection::vec(mutation(), 1..8)) {
        let corpus = corpus();
        prop_assume!(!corpus.is_empty());
        let (name, text) = corpus.get(pick % corpus.len()).cloned().unwrap_or_default();
        let mut text = text;
        for mutation in &mutations {
            apply(&mut text, mutation);
        }
        compiles_without_panicking(&name, text)?;
    }

    #[test]
    fn programs_built_from_pieces_never_panic(
        pieces in proptest::collection::vec(0..TOKENS.len(), 0..60),
        yaml in any::<bool>(),
    ) {
        let text: String = pieces.iter().filter_map(|index| TOKENS.get(*index).copied()).collect();
        let name = if yaml { "generated.yaml" } else { "generated.flow" };
        compiles_without_panicking(name, text)?;
    }
}
