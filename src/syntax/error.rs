//! What the front ends find wrong, as values, and the one place that puts
//! them into words.
//!
//! The `.flow` and YAML readers record a [`SyntaxError`] holding the facts
//! of each problem (spans, the key or keyword found, the nearest known key
//! for a did-you-mean, the kind of value expected and found);
//! [`SyntaxError::into_diagnostic`] turns it into the [`Diagnostic`] a user
//! sees: its code, message, labels and help. pest's own failure is
//! translated here too ([`ExpressionError::Unexpected`]); the flow reader
//! then sharpens that diagnostic with what it knows of the file's braces
//! and words (`flow/errors.rs`).

use crate::diag::{Code, Diagnostic, suggestion};
use crate::source::Span;

/// One problem a front end found, with the facts its diagnostic is written
/// from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SyntaxError {
    /// The file has nothing but white space and comments.
    EmptyProgram,
    Expression(ExpressionError),
    Flow(FlowError),
    Yaml(YamlError),
}

/// A problem in an expression, a template or a number, in either syntax.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExpressionError {
    /// pest stopped: `found` is the text there (`None` at the end of the
    /// input); `expected` what it would have accepted ("" when it cannot
    /// say); `what` the construct being read ("an expression");
    /// `names_blanks` whether a space, tab or line end found is named in
    /// words (the `.flow` reader's choice); `close` the keyword the text
    /// found is likely a misspelling of.
    Unexpected {
        found: Option<String>,
        expected: String,
        what: String,
        span: Span,
        names_blanks: bool,
        close: Option<String>,
    },
    IntegerTooLarge {
        span: Span,
    },
    ChainedComparison {
        span: Span,
    },
    /// Nested deeper than `limit` levels.
    TooDeep {
        span: Span,
        limit: usize,
    },
    /// More than `limit` brackets open at once, refused before parsing.
    TooManyBrackets {
        span: Span,
        limit: usize,
    },
}

/// A problem only the `.flow` syntax can have.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FlowError {
    /// A `{` left open: `gave_up` is what the parser said where it stopped.
    UnclosedBrace {
        brace: Span,
        gave_up: Box<ExpressionError>,
    },
    DuplicateAgent {
        second: Span,
        first: Span,
    },
    /// A limit (`max_auto_steps`, …) given something that is not a number.
    LimitNotNumber {
        keyword: String,
        span: Span,
    },
    /// A clause that counts (`retry 2.5`) given a fraction.
    NotWholeNumber {
        clause: String,
        span: Span,
    },
    RangeWithoutBound {
        span: Span,
    },
    TimeoutWithoutRequest {
        span: Span,
    },
    /// A clause of a tool (`env`) with no `exec` beside it.
    NeedsExec {
        clause: String,
        span: Span,
    },
    /// A clause of a tool (`headers`, `body`) with no `http` beside it.
    NeedsHttp {
        clause: String,
        span: Span,
    },
    BareNoAnswerTarget {
        name: String,
        span: Span,
    },
    UnknownErrorPolicy {
        policy: String,
        span: Span,
    },
    RepeatedClause {
        keyword: String,
        construct: String,
        span: Span,
        first: Span,
    },
}

/// A problem only the YAML syntax can have.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum YamlError {
    NoDocument,
    SecondDocument {
        span: Span,
    },
    AliasInsideAnchor {
        span: Span,
    },
    /// Aliases expanded past `limit` nodes.
    AliasExpansion {
        span: Span,
        limit: u64,
    },
    UnknownAnchor {
        name: String,
        span: Span,
    },
    UnsupportedTag {
        tag: String,
        span: Span,
    },
    TabIndentation {
        span: Span,
    },
    /// saphyr's scanner stopped: `info` is its reason, `at_tab` whether
    /// it stopped at a tab.
    Invalid {
        info: String,
        at_tab: bool,
        span: Span,
    },
    /// Nested deeper than `limit` levels.
    TooDeep {
        span: Span,
        limit: usize,
    },
    NotAProgram {
        found: &'static str,
        span: Span,
    },
    /// A value of the wrong kind for `key`: `value` is its span, or `None`
    /// when the key has no value (the label then sits on the key).
    WrongShape {
        key: String,
        expected: String,
        found: &'static str,
        key_span: Span,
        value: Option<Span>,
        help: String,
    },
    MissingKey {
        what: String,
        key: String,
        span: Span,
        help: String,
    },
    /// `close` is the nearest allowed key; `allowed` all of them, listed
    /// when nothing is near.
    UnknownKey {
        key: String,
        what: String,
        close: Option<String>,
        allowed: String,
        span: Span,
    },
    RepeatedKey {
        key: String,
        what: String,
        span: Span,
        first: Span,
    },
    KeyNotName {
        found: &'static str,
        span: Span,
    },
    ActionWithTwoKeys {
        span: Span,
        first: Span,
    },
}

impl From<ExpressionError> for SyntaxError {
    fn from(error: ExpressionError) -> SyntaxError {
        SyntaxError::Expression(error)
    }
}

impl From<FlowError> for SyntaxError {
    fn from(error: FlowError) -> SyntaxError {
        SyntaxError::Flow(error)
    }
}

impl From<YamlError> for SyntaxError {
    fn from(error: YamlError) -> SyntaxError {
        SyntaxError::Yaml(error)
    }
}

impl From<SyntaxError> for Diagnostic {
    fn from(error: SyntaxError) -> Diagnostic {
        error.into_diagnostic()
    }
}

impl From<ExpressionError> for Diagnostic {
    fn from(error: ExpressionError) -> Diagnostic {
        error.into_diagnostic()
    }
}

impl From<FlowError> for Diagnostic {
    fn from(error: FlowError) -> Diagnostic {
        error.into_diagnostic()
    }
}

impl From<YamlError> for Diagnostic {
    fn from(error: YamlError) -> Diagnostic {
        error.into_diagnostic()
    }
}

impl SyntaxError {
    /// The diagnostic a user sees for this problem.
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            SyntaxError::EmptyProgram => Diagnostic::new(Code::Syntax, "the file holds no program")
                .at(Span::new(0, 0), "empty, or only comments and white space")
                .with_help("a program declares at least one flow; see flows/booking.flow for an example"),
            SyntaxError::Expression(error) => error.into_diagnostic(),
            SyntaxError::Flow(error) => error.into_diagnostic(),
            SyntaxError::Yaml(error) => error.into_diagnostic(),
        }
    }
}

impl ExpressionError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            ExpressionError::Unexpected { found, expected, what, span, names_blanks, close } => {
                let quoted = found
                    .as_deref()
                    .map_or_else(|| "end of input".to_string(), |found| format!("`{}`", found.escape_debug()));
                let message = if expected.is_empty() {
                    format!("unexpected {quoted} in {what}")
                } else {
                    let found = match found.as_deref() {
                        Some(" ") if names_blanks => "a space".to_string(),
                        Some("\t") if names_blanks => "a tab".to_string(),
                        Some("\n" | "\r") if names_blanks => "the end of the line".to_string(),
                        _ => quoted,
                    };
                    format!("expected {expected}, found {found}")
                };
                let help = suggestion(close.as_deref(), || {
                    format!("see the language reference (docs/language.md) for the forms of {what}")
                });
                Diagnostic::new(Code::Syntax, message).at(span, "unexpected here").with_help(help)
            }
            ExpressionError::IntegerTooLarge { span } => Diagnostic::new(Code::Syntax, "integer literal is too large")
                .at(span, "does not fit in 64 bits")
                .with_help("integers range from -9223372036854775808 to 9223372036854775807"),
            ExpressionError::ChainedComparison { span } => Diagnostic::new(Code::Syntax, "comparisons do not chain")
                .at(span, "two comparisons in a row")
                .with_help("join them with `and`, e.g. `1 < x and x < 5`"),
            ExpressionError::TooDeep { span, limit } => Diagnostic::new(Code::Syntax, "nesting is too deep")
                .at(span, format!("more than {limit} levels deep here"))
                .with_help("split the expression or block into smaller parts"),
            ExpressionError::TooManyBrackets { span, limit } => Diagnostic::new(Code::Syntax, "nesting is too deep")
                .at(span, format!("more than {limit} brackets deep here"))
                .with_help("split the expression or block into smaller parts"),
        }
    }
}

impl FlowError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            FlowError::UnclosedBrace { brace, gave_up } => {
                let parser = gave_up.into_diagnostic();
                let diagnostic = Diagnostic::new(Code::Syntax, "a `{` is never closed")
                    .at(brace, "this `{` has no matching `}`")
                    .with_help("add the missing `}` where the block should end");
                match parser.primary_span() {
                    Some(span) => diagnostic.with_label(span, format!("the parser gave up here: {}", parser.message)),
                    None => diagnostic,
                }
            }
            FlowError::DuplicateAgent { second, first } => {
                Diagnostic::new(Code::DuplicateKey, "a program has one `agent`")
                    .at(second, "a second agent")
                    .with_label(first, "first agent")
                    .with_help("merge the two `agent` blocks")
            }
            FlowError::LimitNotNumber { keyword, span } => {
                Diagnostic::new(Code::Syntax, format!("`{keyword}` takes a whole number"))
                    .at(span, "not a number")
                    .with_help(format!("write `{keyword} 10`"))
            }
            FlowError::NotWholeNumber { clause, span } => {
                Diagnostic::new(Code::Syntax, format!("`{clause}` takes a whole number"))
                    .at(span, "not a whole number")
                    .with_help(format!("write `{clause} 3`"))
            }
            FlowError::RangeWithoutBound { span } => Diagnostic::new(Code::Syntax, "a range needs a bound")
                .at(span, "neither a minimum nor a maximum")
                .with_help("write `1..10`, `1..` or `..10`"),
            FlowError::TimeoutWithoutRequest { span } => {
                Diagnostic::new(Code::Syntax, "`timeout` needs an `http` or `exec` tool")
                    .at(span, "nothing to time out")
                    .with_help("builtin tools take no timeout; remove it")
            }
            FlowError::NeedsExec { clause, span } => {
                Diagnostic::new(Code::Syntax, format!("`{clause}` needs an `exec` program in the same tool"))
                    .at(span, "no `exec` to give it to")
                    .with_help(format!("only exec tools run with an environment; remove the `{clause}`"))
            }
            FlowError::NeedsHttp { clause, span } => {
                Diagnostic::new(Code::Syntax, format!("`{clause}` needs an `http` request in the same tool"))
                    .at(span, "no `http` to attach to")
                    .with_help(format!("add `http METHOD \"url\"` to the tool, or remove the `{clause}`"))
            }
            FlowError::BareNoAnswerTarget { name, span } => {
                Diagnostic::new(Code::Syntax, "`on_no_answer` takes a directive, not a bare name")
                    .at(span, "a step or a flow?")
                    .with_help(format!(
                        "write `on_no_answer goto_step {name}` for a step or `on_no_answer goto {name}` for a flow"
                    ))
            }
            FlowError::UnknownErrorPolicy { policy, span } => {
                Diagnostic::new(Code::Syntax, format!("unknown `on_error` policy `{policy}`"))
                    .at(span, "not a policy")
                    .with_help("write `on_error stop`, `continue` or `retry 3 backoff 2s` in a workflow; `on_error reply \"…\"`, `goto_step STEP` or `abort \"…\"` in a conversation")
            }
            FlowError::RepeatedClause { keyword, construct, span, first } => {
                Diagnostic::new(Code::DuplicateKey, format!("`{keyword}` is given twice in this {construct}"))
                    .at(span, "given again here")
                    .with_label(first, "first given here")
                    .with_help(format!("keep one `{keyword}`"))
            }
        }
    }
}

impl YamlError {
    fn into_diagnostic(self) -> Diagnostic {
        match self {
            YamlError::NoDocument => Diagnostic::new(Code::Syntax, "the file holds no YAML document")
                .at(Span::new(0, 0), "nothing to read")
                .with_help("a program is a YAML mapping with `agent`, `schema`, `tools`, `signals` and `flows`"),
            YamlError::SecondDocument { span } => {
                Diagnostic::new(Code::Syntax, "the file holds more than one YAML document")
                    .at(span, "a second document starts here")
                    .with_help("one program per file: move this document into a file of its own")
            }
            YamlError::AliasInsideAnchor { span } => {
                Diagnostic::new(Code::Syntax, "an alias refers to the node that contains it")
                    .at(span, "this alias is inside its own anchor")
                    .with_help("an anchor can be used only after its node is complete")
            }
            YamlError::AliasExpansion { span, limit } => {
                Diagnostic::new(Code::Syntax, format!("aliases expand to more than {limit} nodes"))
                    .at(span, "this alias takes the expansion over the limit")
                    .with_help("each alias is a full copy of its anchor; use fewer or smaller anchors")
            }
            YamlError::UnknownAnchor { name, span } => {
                Diagnostic::new(Code::Syntax, format!("unknown anchor `{name}`"))
                    .at(span, "no anchor of this name comes before")
                    .with_help(format!("define the anchor first (`&{name}`), then refer to it (`*{name}`)"))
            }
            YamlError::UnsupportedTag { tag, span } => {
                Diagnostic::new(Code::Syntax, format!("unsupported YAML tag `{tag}`"))
                    .at(span, "this tag")
                    .with_help("remove the tag: flowc accepts only the core-schema tags (`!!str`, `!!int`, ...)")
            }
            YamlError::TabIndentation { span } => {
                Diagnostic::new(Code::Syntax, "YAML indentation must use spaces, not tabs")
                    .at(span, "a tab in the indentation")
                    .with_help("replace the tabs at the start of this line with spaces")
            }
            YamlError::Invalid { info, at_tab, span } => {
                let help = if at_tab {
                    "YAML separates values with spaces: replace this tab with a space"
                } else {
                    "check the indentation and the `:` and `-` here; quote a value that contains `: ` or ` #`, or starts with `{`, `[`, `*`, `&`, `!`, `|` or `>`"
                };
                Diagnostic::new(Code::Syntax, format!("invalid YAML: {info}"))
                    .at(span, "the YAML reader stopped here")
                    .with_help(help)
            }
            YamlError::TooDeep { span, limit } => {
                Diagnostic::new(Code::Syntax, format!("YAML nesting is deeper than {limit} levels"))
                    .at(Span::new(span.start, span.start.saturating_add(1)), "too deep here")
                    .with_help("a program never needs this much nesting; flatten the structure")
            }
            YamlError::NotAProgram { found, span } => {
                Diagnostic::new(Code::Syntax, format!("expected a mapping of program sections, found {found}"))
                    .at(span, format!("this is {found}"))
                    .with_help(
                        "a program is a mapping with `agent`, `schema`, `context`, `tools`, `signals` and `flows`",
                    )
            }
            YamlError::WrongShape { key, expected, found, key_span, value, help } => {
                let diagnostic =
                    Diagnostic::new(Code::Syntax, format!("expected {expected} for `{key}`, found {found}"));
                match value {
                    None => diagnostic.at(key_span, format!("`{key}` has no value")),
                    Some(value) => diagnostic.at(value, format!("this is {found}")),
                }
                .with_help(help)
            }
            YamlError::MissingKey { what, key, span, help } => {
                Diagnostic::new(Code::Syntax, format!("{what} needs `{key}`"))
                    .at(span, format!("no `{key}` here"))
                    .with_help(help)
            }
            YamlError::UnknownKey { key, what, close, allowed, span } => {
                let help = if key == "<<" {
                    // YAML 1.2 has no merge key; flowc reads `<<` as any other key.
                    String::from("YAML merge keys (`<<`) are not supported: write the keys out")
                } else {
                    suggestion(close.as_deref(), || format!("{what} takes {allowed}"))
                };
                Diagnostic::new(Code::UnknownKey, format!("unknown key `{key}` in {what}"))
                    .at(span, format!("not a key of {what}"))
                    .with_help(help)
            }
            YamlError::RepeatedKey { key, what, span, first } => {
                Diagnostic::new(Code::DuplicateKey, format!("key `{key}` appears twice in {what}"))
                    .at(span, "used again here")
                    .with_label(first, "first used here")
                    .with_help("keep one of them: a YAML mapping's keys must be unique")
            }
            YamlError::KeyNotName { found, span } => {
                Diagnostic::new(Code::Syntax, format!("expected a name as a mapping key, found {found}"))
                    .at(span, format!("this key is {found}"))
                    .with_help("keys are plain names; quote the key if it is meant as text")
            }
            YamlError::ActionWithTwoKeys { span, first } => {
                Diagnostic::new(Code::Syntax, "an action holds exactly one key")
                    .at(span, "a second key in the same action")
                    .with_label(first, "the action's key")
                    .with_help("start a new list item (`- `) for each action")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each front end is fed a small bad program and must record exactly the
    //! diagnostic the expected value writes: the facts (spans, names, the
    //! nearest key) are what is asserted; the wording is tested once, on a
    //! bare value, and through the snapshots of `tests/check`.

    use super::*;
    use crate::diag::span_of;
    use crate::source::SourceFile;

    fn only_diagnostic(name: &str, text: &str) -> Diagnostic {
        let (_, mut diagnostics) = crate::syntax::parse(&SourceFile::new(name, text));
        assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
        diagnostics.remove(0)
    }

    #[test]
    fn the_flow_reader_records_an_unknown_policy_by_its_word_and_span() {
        let text = "flow f {\n  step s {\n    on_error ignore\n  }\n}\n";
        let expected = FlowError::UnknownErrorPolicy { policy: "ignore".to_string(), span: span_of(text, "ignore", 0) };
        assert_eq!(only_diagnostic("bad.flow", text), expected.into());
    }

    #[test]
    fn the_flow_reader_records_a_repeated_clause_with_both_spans() {
        let text = "flow f {\n  step s {\n    prompt \"a\"\n    prompt \"b\"\n  }\n}\n";
        let expected = FlowError::RepeatedClause {
            keyword: "prompt".to_string(),
            construct: "step".to_string(),
            span: span_of(text, "prompt \"b\"", 0),
            first: span_of(text, "prompt \"a\"", 0),
        };
        assert_eq!(only_diagnostic("bad.flow", text), expected.into());
    }

    #[test]
    fn the_expression_parser_records_a_chained_comparison_over_both_comparisons() {
        let text = "flow f {\n  step s {\n    branch {\n      if 1 < guests < 5 -> done\n    }\n  }\n}\n";
        let expected = ExpressionError::ChainedComparison { span: span_of(text, "1 < guests < 5", 0) };
        assert_eq!(only_diagnostic("bad.flow", text), expected.into());
    }

    #[test]
    fn the_flow_reader_records_a_misspelt_keyword_as_the_whole_word_and_the_keyword_meant() {
        let text = "flow f {\n  step s {\n    promt \"hi\"\n  }\n}\n";
        let (_, diagnostics) = crate::syntax::parse(&SourceFile::new("bad.flow", text));
        let [diagnostic] = diagnostics.as_slice() else {
            panic!("one diagnostic expected: {diagnostics:#?}");
        };
        assert_eq!(diagnostic.help.as_deref(), Some("did you mean `prompt`?"));
        let expected = ExpressionError::Unexpected {
            found: Some("promt".to_string()),
            expected: diagnostic
                .message
                .strip_prefix("expected ")
                .and_then(|rest| rest.strip_suffix(", found `promt`"))
                .unwrap_or_default()
                .to_string(),
            what: "a program".to_string(),
            span: span_of(text, "promt", 0),
            names_blanks: true,
            close: Some("prompt".to_string()),
        };
        assert_eq!(diagnostic, &Diagnostic::from(expected));
    }

    #[test]
    fn the_yaml_reader_records_an_unknown_key_with_the_nearest_one() {
        let text = "flows:\n  f:\n    steps:\n      - id: s\n        colect: [hotel]\n";
        let (_, diagnostics) = crate::syntax::parse(&SourceFile::new("bad.yaml", text));
        let Some(diagnostic) = diagnostics.first() else {
            panic!("no diagnostic for an unknown key");
        };
        let Some(help) = diagnostic.help.as_deref() else {
            panic!("an unknown key has a help");
        };
        assert_eq!(help, "did you mean `collect`?");
        let expected = YamlError::UnknownKey {
            key: "colect".to_string(),
            what: "a step".to_string(),
            close: Some("collect".to_string()),
            // Not written when a key is near; the rendering ignores it.
            allowed: String::new(),
            span: span_of(text, "colect", 0),
        };
        assert_eq!(diagnostic, &Diagnostic::from(expected));
    }

    #[test]
    fn the_yaml_reader_records_a_second_document_at_its_marker() {
        let text = "flows: {}\n---\nflows: {}\n";
        let expected = YamlError::SecondDocument { span: span_of(text, "---", 0) };
        assert_eq!(only_diagnostic("bad.yaml", text), expected.into());
    }

    #[test]
    fn a_blank_file_records_an_empty_program() {
        assert_eq!(only_diagnostic("blank.yaml", "# nothing\n"), SyntaxError::EmptyProgram.into());
        assert_eq!(only_diagnostic("blank.flow", "\n"), SyntaxError::EmptyProgram.into());
    }

    #[test]
    fn a_bare_value_is_written_with_its_code_labels_and_help() {
        let error = YamlError::RepeatedKey {
            key: "prompt".to_string(),
            what: "a step".to_string(),
            span: Span::new(30, 36),
            first: Span::new(10, 16),
        };
        let diagnostic = SyntaxError::from(error).into_diagnostic();
        assert_eq!(diagnostic.code, Code::DuplicateKey);
        assert_eq!(diagnostic.message, "key `prompt` appears twice in a step");
        let labels: Vec<(Span, &str)> =
            diagnostic.labels.iter().map(|label| (label.span, label.text.as_str())).collect();
        assert_eq!(labels, [(Span::new(30, 36), "used again here"), (Span::new(10, 16), "first used here")]);
        assert_eq!(diagnostic.help.as_deref(), Some("keep one of them: a YAML mapping's keys must be unique"));
    }
}
