//! The syntax errors a `.flow` program gets: what was expected, where, and
//! nesting refused before it can exhaust the stack.

use super::*;

// ------------------------------------------------------------ syntax errors

#[test]
fn a_syntax_error_names_what_was_expected_and_points_at_the_word() {
    let source = "flow f {\n  step a {\n    colect hotel\n  }\n}\n";
    let error = one_error(source);
    assert_eq!(error.code, Code::Syntax);
    assert_eq!(
        error.message,
        "expected a step clause (`prompt`, `say`, `collect`, `requires`, `next`, `branch`, `do`, …) or `}`, \
             found `colect`"
    );
    assert_eq!(error.primary_span(), Some(Span::new(24, 30)));
    assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("colect"));
}

#[test]
fn a_clause_repeated_many_times_is_reported_once() {
    let (_, diagnostics) = parse_text(&format!("schema {{ company: string {} }}", "\"\"".repeat(1_000)));
    let messages: Vec<&str> = diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect();
    assert_eq!(messages, ["`description` is given twice in this type"]);
}

#[test]
fn a_misspelt_keyword_gets_a_did_you_mean() {
    for (source, keyword) in [
        ("flow f {\n  step a {\n    colect hotel\n  }\n}\n", "collect"),
        ("shema { a: string }\nflow f { step a { } }", "schema"),
    ] {
        let error = one_error(source);
        assert_eq!(error.help.as_deref(), Some(format!("did you mean `{keyword}`?").as_str()), "for {source}");
    }
}

#[test]
fn an_unclosed_brace_is_reported_at_the_brace() {
    let source = "flow support { when \"help\"\n  step ask { say \"a\"\n  step b { say \"b\" }\n}\n";
    let error = one_error(source);
    assert_eq!(error.message, "a `{` is never closed");
    let spans: Vec<(usize, &str)> =
        error.labels.iter().map(|label| (label.span.start as usize, slice(source, label.span))).collect();
    let step_ask_brace = source.find("ask {").map(|at| at + 4);
    assert_eq!(spans.first().map(|(at, _)| Some(*at)), Some(step_ask_brace));
    assert_eq!(spans.get(1).map(|(_, text)| *text), Some("step"), "where the parser gave up");
    // At the end of the file: the innermost brace still open there.
    let error = one_error("flow f { default\n  step a { say \"x\" }\n");
    assert_eq!(error.primary_span().map(|span| span.start), Some(7));
}

#[test]
fn a_misplaced_clause_in_balanced_braces_is_not_blamed_on_a_brace() {
    let error = one_error("flow f { step a { } colect x }");
    assert!(error.message.starts_with("expected a `step`"), "{}", error.message);
}

#[test]
fn missing_punctuation_is_named() {
    let cases = [
        ("flow f \"Title\" step a { }", "expected `{`, found `step`"),
        ("flow f { step a { branch { when \"x\" b } } }", "expected `,` or `->`, found `b`"),
        ("schema { a string }", "expected `:`, found `string`"),
        ("flwo f { }", "expected `agent`, `schema`, `context`, `tool`, `signal` or `flow`, found `flwo`"),
        ("flow f { step a { prompt Which } }", "expected a quoted string, found `Which`"),
        ("flow f { step a { prompt \"open } }", "expected the closing quote of the string, found end of input"),
        ("flow f { step a { wait 2 } }", "expected a duration unit (`ms`, `s`, `m`, `h` or `d`), found a space"),
        ("flow f { step a { call t(a: 1 } }", "expected an operator, `)` or `,`, found `}`"),
        (
            "flow f { step a { do { sat x = 1 } } }",
            "expected an action (`set`, `append`, `call`, `emit`, `for`, `ask_model`, `say`) or `}`, found `sat`",
        ),
    ];
    for (source, message) in cases {
        assert_eq!(one_error(source).message, message, "for {source}");
    }
}

/// YAML expressions report through `describe_rule` (no detailed re-parse):
/// an operand's many starting rules read as one "expression".
#[test]
fn expression_errors_outside_flow_files_name_an_expression() {
    let mut diagnostics = Vec::new();
    expr::parse_expr("guests == ", SpanMap::Exact { base: 0 }, &mut diagnostics);
    assert_eq!(
        diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect::<Vec<_>>(),
        ["expected an expression, found end of input"]
    );
    diagnostics.clear();
    expr::parse_expr("guests guests", SpanMap::Exact { base: 0 }, &mut diagnostics);
    assert_eq!(
        diagnostics.first().map(|diagnostic| diagnostic.message.as_str()),
        Some("expected `is`, an operator or end of input, found `g`")
    );
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let source = format!("flow f {{ step s {{ if {}1{} }} }}", "(".repeat(200), ")".repeat(200));
    let error = one_error(&source);
    assert_eq!(error.message, "nesting is too deep");
    let blocks = format!("flow f {{ step s {{ do {{ {} }} }} }}", "for c in l { ".repeat(100) + &"}".repeat(100));
    assert_eq!(one_error(&blocks).message, "nesting is too deep");
}

#[test]
fn deep_nesting_inside_a_template_is_refused() {
    let source = format!("flow f {{ step s {{ say \"{{{{ {}1{} }}}}\" }} }}", "(".repeat(5000), ")".repeat(5000));
    let (program, diagnostics) = parse_text(&source);
    assert!(diagnostics.iter().any(|diagnostic| diagnostic.message == "nesting is too deep"), "{diagnostics:?}");
    assert!(program.flows.len() <= 1);
}

#[test]
fn nesting_up_to_the_limit_parses() {
    let depth = MAX_EXPR_DEPTH - 4;
    let source = format!("flow f {{ step s {{ if {}1{} }} }}", "(".repeat(depth), ")".repeat(depth));
    with_main_thread_stack(|| check(&source));
}
