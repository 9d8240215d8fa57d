//! What a failed parse becomes: the one `syntax` diagnostic naming what
//! was expected where pest gave up, with the word found, a did-you-mean,
//! and a `{` left open blamed at the brace.

use super::expected::describe_expected;
use crate::diag::Diagnostic;
use crate::syntax::error::{ExpressionError, FlowError};
use crate::syntax::expr::{self, SpanMap, too_deep_diagnostic};
use crate::syntax::grammar::{FlowParser, Rule};
use pest::Parser;

/// The diagnostic for pest's failure: what was expected at the furthest
/// point the parse reached, with the offending word quoted whole ("found
/// `Which`", not "found `W`").
pub(super) fn parse_failure(error: &pest::error::Error<Rule>, text: &str, map: SpanMap) -> Diagnostic {
    let offset = error_offset(error);
    // pest's own guard (stack or call limit) fires on nesting that hides
    // where the bracket count cannot see it, inside `{{ }}`.
    if let pest::error::ErrorVariant::CustomError { message } = &error.variant
        && message.contains("limit reached")
    {
        return too_deep_diagnostic(map.span(offset, next_char_end(text, offset)));
    }
    let detailed = detailed_failure(text);
    let (offset, mut unexpected, expected_tokens) = match &detailed {
        Some((detailed, tokens)) => {
            (error_offset(detailed), expr::syntax_error(detailed, text, map, "a program"), tokens.as_slice())
        }
        None => (offset, expr::syntax_error(error, text, map, "a program"), &[][..]),
    };
    let first_char_end = next_char_end(text, offset);
    let word_end = word_end(text, offset);
    if let ExpressionError::Unexpected { found, expected, span, names_blanks, close, .. } = &mut unexpected {
        *names_blanks = true;
        // The word is shown whole where pest names only its first character.
        if word_end > first_char_end
            && !expected.is_empty()
            && found.is_some()
            && let Some(word) = text.get(offset..word_end)
        {
            *found = Some(word.to_string());
            *span = map.span(offset, word_end);
        }
        *close =
            text.get(offset..word_end).and_then(|word| misspelt_keyword(word, expected_tokens)).map(str::to_string);
    }
    if expected_tokens.iter().any(|token| token == "}") {
        return blame_unclosed_brace(unexpected, text, offset, map);
    }
    unexpected.into()
}

/// The keyword pest expected that `word` is a likely misspelling of.
fn misspelt_keyword<'a>(word: &str, expected_tokens: &'a [String]) -> Option<&'a str> {
    let is_keyword =
        |token: &&String| token.chars().all(|character| character.is_ascii_lowercase() || character == '_');
    crate::diag::did_you_mean(word, expected_tokens.iter().filter(is_keyword).map(String::as_str))
}

/// When a `}` would have fitted where the parse failed and the file opens
/// more braces than it closes, the mistake is most likely a `{` left open
/// earlier, not the word the parser stopped at: the diagnostic then points
/// at that `{`, with where the parser gave up as a second label.
fn blame_unclosed_brace(unexpected: ExpressionError, text: &str, failed_at: usize, map: SpanMap) -> Diagnostic {
    let braces = open_braces(text, failed_at);
    if braces.unclosed_in_file == 0 {
        return unexpected.into();
    }
    let Some(brace) = braces.misindented.first().or(braces.open_at_failure.last()).copied() else {
        return unexpected.into();
    };
    let brace = map.span(brace, brace + 1);
    FlowError::UnclosedBrace { brace, gave_up: Box::new(unexpected) }.into()
}

/// What a scan of a file's braces (outside strings and comments) tells
/// about one that was left open.
struct OpenBraces {
    /// The `{` still open where the parse failed, outermost first.
    open_at_failure: Vec<usize>,
    /// The `{` before the failure that a `}` starting a line at a shallower
    /// indentation skipped over: by the layout, the ones never closed.
    misindented: Vec<usize>,
    /// How many more `{` than `}` the file has.
    unclosed_in_file: usize,
}

fn open_braces(text: &str, failed_at: usize) -> OpenBraces {
    // Each open brace with the indentation of the line it is on.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut open_at_failure: Option<Vec<usize>> = None;
    let mut misindented = Vec::new();
    let mut indent = 0usize;
    let mut line_is_blank = true;
    for (offset, byte) in expr::code_bytes(text) {
        if offset >= failed_at && open_at_failure.is_none() {
            open_at_failure = Some(open.iter().map(|(at, _)| *at).collect());
        }
        let leads_line = line_is_blank && !matches!(byte, b' ' | b'\t' | b'\n' | b'\r');
        match byte {
            b'\n' => {
                line_is_blank = true;
                indent = 0;
            }
            b' ' | b'\t' if line_is_blank => indent += 1,
            _ => line_is_blank = false,
        }
        match byte {
            b'{' => open.push((offset, indent)),
            b'}' => {
                let matching = open.iter().rposition(|(_, opened_at)| *opened_at == indent);
                let skipped_over = match matching {
                    Some(position) if leads_line && offset < failed_at => open.len() - position - 1,
                    _ => 0,
                };
                for _ in 0..skipped_over {
                    if let Some((at, _)) = open.pop() {
                        misindented.push(at);
                    }
                }
                open.pop();
            }
            _ => {}
        }
    }
    let unclosed_in_file = open.len() + misindented.len();
    misindented.sort_unstable();
    let open_at_failure = open_at_failure.unwrap_or_else(|| open.iter().map(|(at, _)| *at).collect());
    OpenBraces { open_at_failure, misindented, unclosed_in_file }
}

fn error_offset(error: &pest::error::Error<Rule>) -> usize {
    match error.location {
        pest::error::InputLocation::Pos(offset) => offset,
        pest::error::InputLocation::Span((start, _)) => start,
    }
}

/// Serialises the re-parses that switch pest's error detail on: the switch
/// is process-wide and read when a parse starts, so two threads toggling it
/// could each parse with the other's setting. Nothing else in flowc touches
/// the switch (pest offers no getter to restore a previous value), so it is
/// off outside these re-parses.
static ERROR_DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Parses a failing program again with pest's error detail switched on
/// (slower, so only after a failure) and turns the tokens it expected at
/// the furthest position into a custom error. pest's plain error lists only
/// rules, never the literal tokens such as `->`, `,` or `}`, and so can
/// point inside an earlier string when what is missing is punctuation.
///
/// Also returns the tokens it expected, for a did-you-mean and for telling
/// whether a `}` would have fitted.
fn detailed_failure(text: &str) -> Option<(pest::error::Error<Rule>, Vec<String>)> {
    let failure = {
        let _lock = ERROR_DETAIL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pest::set_error_detail(true);
        let result = FlowParser::parse(Rule::program, text);
        pest::set_error_detail(false);
        result.err()?
    };
    // pest does not export the types of its attempts; their text is enough.
    let attempts = failure.parse_attempts()?;
    let tokens: Vec<String> = attempts.expected_tokens().iter().map(ToString::to_string).collect();
    let deepest: Vec<Rule> =
        attempts.call_stacks().iter().filter_map(|stack| stack.deepest.get_rule().copied()).collect();
    let message = describe_expected(&tokens, &deepest)?;
    let position = pest::Position::new(text, attempts.max_position)?;
    Some((pest::error::Error::new_from_pos(pest::error::ErrorVariant::CustomError { message }, position), tokens))
}

/// The end of the identifier-like word starting at `offset` (or `offset`).
fn word_end(text: &str, offset: usize) -> usize {
    let rest = text.get(offset..).unwrap_or("");
    let length =
        rest.find(|character: char| !(character.is_ascii_alphanumeric() || character == '_')).unwrap_or(rest.len());
    offset + length
}

pub(super) fn next_char_end(text: &str, offset: usize) -> usize {
    text.get(offset..).and_then(|rest| rest.chars().next()).map_or(offset, |first| offset + first.len_utf8())
}
