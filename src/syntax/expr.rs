//! Expressions and templates: from pest pairs to [`Expr`] and
//! [`Template`]. Both front ends go through here — `.flow` with pairs from
//! its own parse, YAML by parsing a string value with [`parse_expr`] and
//! [`parse_template`] — so an expression means the same in either syntax.
//!
//! Spans: inside a YAML string, the offsets pest reports are relative to the
//! string's value. A [`SpanMap`] turns them back into file offsets: exactly
//! when the value is a verbatim copy of the source (plain or simply quoted
//! scalars), or as the whole scalar when escapes or line folding mean the
//! value's characters are not the file's.

use super::ast::{BinaryOp, Expr, ExprKind, FunctionCall, Name, Template, TemplatePart, UnaryOp};
use super::error::ExpressionError;
use super::grammar::{FlowParser, Rule};
use crate::diag::Diagnostic;
use crate::source::{Span, Spanned};
use pest::Parser;
use pest::iterators::Pair;

/// How far expressions may nest (operators and brackets together). Deeper
/// input is refused with a diagnostic rather than risking the stack in the
/// passes that walk expressions recursively.
pub const MAX_EXPR_DEPTH: usize = 64;

/// How deep brackets of any kind may nest in a `.flow` file, checked on the
/// raw text before pest runs (pest recurses once per level): an expression
/// at the deepest [`MAX_EXPR_DEPTH`] sits inside blocks (`flow`, `step`,
/// `for`, `branch`), which nest too, so the text may go deeper than one
/// expression. The builders then refuse what is too deep, precisely.
pub const MAX_BRACKET_DEPTH: usize = 2 * MAX_EXPR_DEPTH;

/// Maps offsets within a parsed text back to the file.
#[derive(Clone, Copy, Debug)]
pub enum SpanMap {
    /// The text starts at this file offset and is a verbatim copy.
    Exact { base: u32 },
    /// The text is not a verbatim copy: every span is this one.
    Whole(Span),
}

impl SpanMap {
    pub fn span(&self, start: usize, end: usize) -> Span {
        match *self {
            SpanMap::Exact { base } => Span::new(
                base.saturating_add(u32::try_from(start).unwrap_or(u32::MAX)),
                base.saturating_add(u32::try_from(end).unwrap_or(u32::MAX)),
            ),
            SpanMap::Whole(span) => span,
        }
    }

    pub fn pair_span(&self, pair: &Pair<'_, Rule>) -> Span {
        let span = pair.as_span();
        self.span(span.start(), span.end())
    }
}

/// Parses a whole string as one expression (a YAML `if`, `skip_if`, `set`
/// value or argument). A parse failure is reported and yields
/// [`ExprKind::Error`] covering the text.
pub fn parse_expr(text: &str, map: SpanMap, diagnostics: &mut Vec<Diagnostic>) -> Expr {
    let whole = map.span(0, text.len());
    if let Some(offset) = too_deep(text) {
        diagnostics.push(too_deep_diagnostic(map.span(offset, offset + 1)));
        return Expr::error(whole);
    }
    match FlowParser::parse(Rule::expr_only, text) {
        Ok(mut pairs) => {
            let Some(expr_pair) = pairs.next().and_then(|top| top.into_inner().next()) else {
                return Expr::error(whole);
            };
            let mut builder = ExprBuilder { map, diagnostics };
            builder.expr(expr_pair, 0)
        }
        Err(error) => {
            diagnostics.push(syntax_error(&error, text, map, "an expression").into());
            Expr::error(whole)
        }
    }
}

/// Parses a string as a template: text with `{{ expr }}` interpolations.
pub fn parse_template(text: &str, map: SpanMap, diagnostics: &mut Vec<Diagnostic>) -> Template {
    let whole = map.span(0, text.len());
    if !text.contains("{{") {
        return Template::literal(text, whole);
    }
    if let Some(offset) = too_deep(text) {
        diagnostics.push(too_deep_diagnostic(map.span(offset, offset + 1)));
        return Template::literal(text, whole);
    }
    match FlowParser::parse(Rule::template_only, text) {
        Ok(mut pairs) => {
            let Some(top) = pairs.next() else {
                return Template::literal(text, whole);
            };
            let mut builder = ExprBuilder { map, diagnostics };
            let parts = builder.template_parts(top);
            Template { parts, span: whole }
        }
        Err(error) => {
            diagnostics.push(syntax_error(&error, text, map, "a template").into());
            Template::literal(text, whole)
        }
    }
}

/// Turns expression and template pairs into AST nodes, reporting what it
/// refuses into `diagnostics`.
pub struct ExprBuilder<'a> {
    pub map: SpanMap,
    pub diagnostics: &'a mut Vec<Diagnostic>,
}

impl ExprBuilder<'_> {
    /// Builds an expression from an `expr` pair or one of its operands.
    pub fn expr(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Expr {
        let span = self.map.pair_span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.diagnostics.push(too_deep_diagnostic(span));
            return Expr::error(span);
        }
        match pair.as_rule() {
            Rule::expr => self.operators(pair, depth),
            Rule::int_lit => match pair.as_str().parse::<i64>() {
                Ok(value) => Expr { kind: ExprKind::Int { value }, span },
                Err(_) => {
                    self.diagnostics.push(ExpressionError::IntegerTooLarge { span }.into());
                    Expr::error(span)
                }
            },
            Rule::float_lit => {
                Expr { kind: ExprKind::Float { value: pair.as_str().parse::<f64>().unwrap_or(f64::NAN) }, span }
            }
            Rule::bool_lit => Expr { kind: ExprKind::Bool { value: pair.as_str() == "true" }, span },
            Rule::null_lit => Expr { kind: ExprKind::Null, span },
            Rule::quoted => Expr { kind: ExprKind::String { value: unescape_text(pair) }, span },
            Rule::list => {
                let items = pair.into_inner().map(|item| self.expr(item, depth + 1)).collect();
                Expr { kind: ExprKind::List { items }, span }
            }
            Rule::call => {
                let mut inner = pair.into_inner();
                let Some(function) = inner.next().map(|name| self.name(&name)) else {
                    return Expr::error(span);
                };
                let args = inner.map(|arg| self.expr(arg, depth + 1)).collect();
                Expr { kind: ExprKind::Call(Box::new(FunctionCall { function, args })), span }
            }
            Rule::path => {
                // `collect()` would give the usual one segment room for four.
                let segments_in = pair.into_inner();
                let mut segments = Vec::with_capacity(segments_in.len());
                segments.extend(segments_in.map(|segment| self.name(&segment)));
                Expr { kind: ExprKind::Path { segments }, span }
            }
            _ => Expr::error(span),
        }
    }

    /// Applies precedence to a flat `expr` (operands and operators) with a
    /// Pratt parser. Comparisons do not chain: `a < b < c` is refused, as
    /// the language gives it no meaning.
    fn operators(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Expr {
        let span = self.map.pair_span(&pair);
        let operators = pair.clone().into_inner().filter(|inner| is_operator(inner.as_rule())).count();
        if depth + operators > MAX_EXPR_DEPTH {
            self.diagnostics.push(too_deep_diagnostic(span));
            return Expr::error(span);
        }
        let map = self.map;
        let builder = std::cell::RefCell::new(self);
        let (expr, _) = pratt()
            .map_primary(|operand| (builder.borrow_mut().expr(operand, depth + 1), false))
            .map_prefix(|op, (operand, _)| {
                let joined = map.pair_span(&op).to(operand.span);
                let expr = match op.as_rule() {
                    Rule::neg_op => negate(operand, joined),
                    _ => Expr { kind: ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(operand) }, span: joined },
                };
                (expr, false)
            })
            .map_postfix(|(operand, _), op| {
                let joined = operand.span.to(map.pair_span(&op));
                let negated = op.as_rule() == Rule::is_not_set;
                (Expr { kind: ExprKind::IsSet { operand: Box::new(operand), negated }, span: joined }, true)
            })
            .map_infix(|(left, left_compares), op, (right, _)| {
                let joined = left.span.to(right.span);
                let op_text: String = op.as_str().split_whitespace().collect::<Vec<_>>().join(" ");
                let op = match op_text.as_str() {
                    "or" => BinaryOp::Or,
                    "and" => BinaryOp::And,
                    "==" => BinaryOp::Eq,
                    "!=" => BinaryOp::Ne,
                    "<" => BinaryOp::Lt,
                    "<=" => BinaryOp::Le,
                    ">" => BinaryOp::Gt,
                    ">=" => BinaryOp::Ge,
                    "in" => BinaryOp::In,
                    "not in" => BinaryOp::NotIn,
                    "+" => BinaryOp::Add,
                    "-" => BinaryOp::Sub,
                    "*" => BinaryOp::Mul,
                    "/" => BinaryOp::Div,
                    _ => BinaryOp::Rem,
                };
                let compares = is_comparison(op);
                if compares && left_compares {
                    builder.borrow_mut().diagnostics.push(ExpressionError::ChainedComparison { span: joined }.into());
                    return (Expr::error(joined), false);
                }
                (
                    Expr { kind: ExprKind::Binary { op, left: Box::new(left), right: Box::new(right) }, span: joined },
                    compares,
                )
            })
            .parse(pair.into_inner());
        expr
    }

    pub fn name(&self, pair: &Pair<'_, Rule>) -> Name {
        Spanned::new(pair.as_str().to_string(), self.map.pair_span(pair))
    }

    /// The parts of a `string` (quoted, `.flow`) or `template_only` (YAML) pair.
    pub fn template_parts(&mut self, pair: Pair<'_, Rule>) -> Vec<TemplatePart> {
        let mut parts: Vec<TemplatePart> = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::interp => {
                    let span = self.map.pair_span(&inner);
                    let expr = match inner.into_inner().next() {
                        Some(expr_pair) => self.expr(expr_pair, 0),
                        None => Expr::error(span),
                    };
                    parts.push(TemplatePart::Expr(expr));
                }
                Rule::escape => push_text(&mut parts, unescape(inner.as_str())),
                Rule::dq_text | Rule::sq_text | Rule::bare_text => push_text(&mut parts, inner.as_str()),
                _ => {}
            }
        }
        parts
    }

    /// A quoted `.flow` string as a template.
    pub fn template(&mut self, pair: Pair<'_, Rule>) -> Template {
        let span = self.map.pair_span(&pair);
        let parts = self.template_parts(pair);
        Template { parts, span }
    }
}

fn is_operator(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::or_op
            | Rule::and_op
            | Rule::not_op
            | Rule::neg_op
            | Rule::cmp_op
            | Rule::add_op
            | Rule::mul_op
            | Rule::is_set
            | Rule::is_not_set
    )
}

fn is_comparison(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge
            | BinaryOp::In
            | BinaryOp::NotIn
    )
}

/// The precedence table, lowest first (LANGUAGE.md section 2).
fn pratt() -> &'static pest::pratt_parser::PrattParser<Rule> {
    use pest::pratt_parser::{Assoc, Op, PrattParser};
    static PRATT: std::sync::OnceLock<PrattParser<Rule>> = std::sync::OnceLock::new();
    PRATT.get_or_init(|| {
        PrattParser::new()
            .op(Op::infix(Rule::or_op, Assoc::Left))
            .op(Op::infix(Rule::and_op, Assoc::Left))
            .op(Op::prefix(Rule::not_op))
            .op(Op::infix(Rule::cmp_op, Assoc::Left) | Op::postfix(Rule::is_set) | Op::postfix(Rule::is_not_set))
            .op(Op::infix(Rule::add_op, Assoc::Left))
            .op(Op::infix(Rule::mul_op, Assoc::Left))
            .op(Op::prefix(Rule::neg_op))
    })
}

fn negate(expr: Expr, span: Span) -> Expr {
    // `-3` is a literal, not an operation, so that `min: -3` and
    // `x > -3` fold the same way in both syntaxes.
    let kind = match expr.kind {
        ExprKind::Int { value } if value != i64::MIN => ExprKind::Int { value: -value },
        ExprKind::Float { value } => ExprKind::Float { value: -value },
        other => ExprKind::Unary { op: UnaryOp::Neg, operand: Box::new(Expr { kind: other, span: expr.span }) },
    };
    Expr { kind, span }
}

fn push_text(parts: &mut Vec<TemplatePart>, text: &str) {
    if let Some(TemplatePart::Text(last)) = parts.last_mut() {
        last.push_str(text);
    } else {
        parts.push(TemplatePart::Text(text.to_string()));
    }
}

fn unescape(escape: &str) -> &'static str {
    match escape {
        "\\n" => "\n",
        "\\t" => "\t",
        "\\r" => "\r",
        "\\\"" => "\"",
        "\\'" => "'",
        "\\{" => "{",
        "\\}" => "}",
        _ => "\\",
    }
}

/// The value of a `text` or `quoted` pair: its characters with escapes applied.
pub fn unescape_text(pair: Pair<'_, Rule>) -> String {
    let mut value = String::new();
    for inner in pair.into_inner() {
        match inner.as_rule() {
            Rule::escape => value.push_str(unescape(inner.as_str())),
            _ => value.push_str(inner.as_str()),
        }
    }
    value
}

/// The offset of the first bracket nested deeper than [`MAX_BRACKET_DEPTH`],
/// ignoring brackets inside quoted strings and comments.
pub fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, byte) in code_bytes(text) {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_BRACKET_DEPTH {
                    return Some(offset);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The bytes of `.flow` source that are code, with their offsets: a quoted
/// string yields its quotes but not what is between them (escapes
/// included), and a `#` comment yields only the newline that ends it.
pub fn code_bytes(text: &str) -> impl Iterator<Item = (usize, u8)> + '_ {
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    let mut in_comment = false;
    text.bytes().enumerate().filter(move |&(_, byte)| {
        if in_comment {
            in_comment = byte != b'\n';
            return !in_comment;
        }
        let Some(open) = quote else {
            match byte {
                b'"' | b'\'' => quote = Some(byte),
                b'#' => in_comment = true,
                _ => {}
            }
            return !in_comment;
        };
        if escaped {
            escaped = false;
        } else if byte == b'\\' {
            escaped = true;
        } else if byte == open {
            quote = None;
            return true;
        }
        false
    })
}

pub(crate) fn too_deep_diagnostic(span: Span) -> Diagnostic {
    ExpressionError::TooDeep { span, limit: MAX_EXPR_DEPTH }.into()
}

/// A pest failure as a `syntax` error: where, and what was expected there.
pub(crate) fn syntax_error(error: &pest::error::Error<Rule>, text: &str, map: SpanMap, what: &str) -> ExpressionError {
    let offset = match error.location {
        pest::error::InputLocation::Pos(offset) => offset,
        pest::error::InputLocation::Span((start, _)) => start,
    };
    let found_end = next_char_end(text, offset);
    let span = map.span(offset, found_end);
    let found = text.get(offset..found_end).filter(|found| !found.is_empty()).map(str::to_string);
    let expected = match &error.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => describe_rules(positives),
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    ExpressionError::Unexpected { found, expected, what: what.to_string(), span, names_blanks: false, close: None }
}

fn next_char_end(text: &str, offset: usize) -> usize {
    text.get(offset..).and_then(|rest| rest.chars().next()).map_or(offset, |first| offset + first.len_utf8())
}

/// "a name, `}` or `step`" from the rules pest would have accepted.
fn describe_rules(rules: &[Rule]) -> String {
    let mut descriptions: Vec<String> = Vec::new();
    for grammar_rule in rules {
        let description = describe_rule(*grammar_rule);
        if !descriptions.contains(&description) {
            descriptions.push(description);
        }
    }
    descriptions.sort();
    match descriptions.len() {
        0 => String::new(),
        1 => descriptions.remove(0),
        count if count > 8 => {
            let shown = descriptions[..7].join(", ");
            format!("{shown} or {} more", count - 7)
        }
        _ => {
            let last = descriptions.pop().unwrap_or_default();
            format!("{} or {last}", descriptions.join(", "))
        }
    }
}

fn describe_rule(grammar_rule: Rule) -> String {
    let name = format!("{grammar_rule:?}");
    if let Some(keyword) = name.strip_prefix("kw_") {
        return format!("`{keyword}`");
    }
    let described = match grammar_rule {
        Rule::EOI => "end of input",
        Rule::program => "`agent`, `schema`, `context`, `tool`, `signal` or `flow`",
        Rule::name | Rule::names => "a name",
        // Everything an operand may start with: listing them one by one
        // ("`bool lit`, `list`, `neg op`, …") tells a reader less.
        Rule::expr
        | Rule::exprs
        | Rule::not_op
        | Rule::ident
        | Rule::path
        | Rule::call
        | Rule::list
        | Rule::quoted
        | Rule::int_lit
        | Rule::float_lit
        | Rule::bool_lit
        | Rule::null_lit
        | Rule::neg_op => "an expression",
        Rule::string | Rule::text | Rule::texts => "a quoted string",
        Rule::dq_text | Rule::sq_text | Rule::plain_dq | Rule::plain_sq | Rule::escape => "the closing quote",
        Rule::number => "a number",
        Rule::duration => "a duration (`30s`, `10m`, `2h`, `1d`)",
        Rule::limit_key => {
            "a limit (`max_auto_steps`, `max_tool_rounds`, `max_turn_tokens`, `max_run_llm_calls`, `max_run_tokens`, `turn_timeout`)"
        }
        Rule::or_op | Rule::and_op | Rule::cmp_op | Rule::add_op | Rule::mul_op => "an operator",
        Rule::is_set | Rule::is_not_set => "`is set`",
        Rule::interp => "`{{`",
        Rule::directive => "a directive",
        Rule::type_expr => "a type",
        Rule::field_decl => "a field declaration (`name: type`)",
        Rule::auto_kw => "`auto`",
        Rule::else_kw => "`else`",
        Rule::default_kw => "`default`",
        Rule::reset => "`reset`",
        Rule::halt => "`halt`",
        Rule::http_method => "an HTTP method (`GET`, `POST`, ...)",
        Rule::json | Rule::json_object | Rule::json_list => "a JSON value",
        _ => return format!("`{}`", name.replace('_', " ")),
    };
    described.to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn parse(text: &str) -> (Expr, Vec<Diagnostic>) {
        let mut diagnostics = Vec::new();
        let expr = parse_expr(text, SpanMap::Exact { base: 10 }, &mut diagnostics);
        (expr, diagnostics)
    }

    /// An expression as a fully parenthesized string, for asserting on
    /// structure (the YAML front end's tests use it too).
    pub(crate) fn shape(expr: &Expr) -> String {
        match &expr.kind {
            ExprKind::Null => "null".into(),
            ExprKind::Bool { value } => value.to_string(),
            ExprKind::Int { value } => value.to_string(),
            ExprKind::Float { value } => format!("{value:?}"),
            ExprKind::String { value } => format!("{value:?}"),
            ExprKind::List { items } => format!("[{}]", items.iter().map(shape).collect::<Vec<_>>().join(", ")),
            ExprKind::Path { segments } => segments.iter().map(|s| s.value.as_str()).collect::<Vec<_>>().join("."),
            ExprKind::Unary { op, operand } => format!("({op:?} {})", shape(operand)),
            ExprKind::Binary { op, left, right } => format!("({} {} {})", shape(left), op.as_str(), shape(right)),
            ExprKind::IsSet { operand, negated } => {
                format!("({} is{} set)", shape(operand), if *negated { " not" } else { "" })
            }
            ExprKind::Call(call) => {
                format!("{}({})", call.function.value, call.args.iter().map(shape).collect::<Vec<_>>().join(", "))
            }
            ExprKind::Error => "<error>".into(),
        }
    }

    #[test]
    fn precedence_follows_the_language() {
        let (expr, diagnostics) = parse("not a and b or c == 1 + 2 * 3");
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(shape(&expr), "(((Not a) and b) or (c == (1 + (2 * 3))))");
    }

    #[test]
    fn membership_and_is_set() {
        assert_eq!(shape(&parse("plan not in [\"pro\", 'x']").0), "(plan not in [\"pro\", \"x\"])");
        assert_eq!(shape(&parse("context.tier is not set").0), "(context.tier is not set)");
        assert_eq!(shape(&parse("len(contacts) >= -2").0), "(len(contacts) >= -2)");
    }

    #[test]
    fn spans_are_file_offsets() {
        let (expr, _) = parse("guests == 2");
        assert_eq!(expr.span, Span::new(10, 21));
        let ExprKind::Binary { right, .. } = expr.kind else { panic!("not binary") };
        assert_eq!(right.span, Span::new(20, 21));
    }

    #[test]
    fn syntax_error_points_at_the_offending_character() {
        let (expr, diagnostics) = parse("guests == == 2");
        assert!(matches!(expr.kind, ExprKind::Error));
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].primary_span(), Some(Span::new(20, 21)));
        assert!(diagnostics[0].message.starts_with("expected"), "{}", diagnostics[0].message);
    }

    #[test]
    fn comparisons_do_not_chain() {
        let (expr, diagnostics) = parse("1 < guests < 5");
        assert!(matches!(expr.kind, ExprKind::Error));
        assert_eq!(diagnostics[0].message, "comparisons do not chain");
        let (expr, diagnostics) = parse("(1 < guests) == true");
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(shape(&expr), "((1 < guests) == true)");
        assert_eq!(shape(&parse("not x is set and - -2 < y").0), "((Not (x is set)) and (2 < y))");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("{}1{}", "(".repeat(500), ")".repeat(500));
        let (expr, diagnostics) = parse(&text);
        assert!(matches!(expr.kind, ExprKind::Error));
        assert_eq!(diagnostics[0].message, "nesting is too deep");
        let chain = vec!["a"; 500].join(" + ");
        let (_, diagnostics) = parse(&chain);
        assert_eq!(diagnostics[0].message, "nesting is too deep");
    }

    #[test]
    fn templates_split_text_and_interpolations() {
        let mut diagnostics = Vec::new();
        let template = parse_template("Book {{ hotel }} on {{date}}?", SpanMap::Exact { base: 0 }, &mut diagnostics);
        assert!(diagnostics.is_empty());
        assert_eq!(template.parts.len(), 5);
        let TemplatePart::Expr(expr) = &template.parts[1] else { panic!("not expr") };
        assert_eq!(expr.span, Span::new(8, 13));
    }

    #[test]
    fn whole_map_gives_every_node_the_scalar_span() {
        let mut diagnostics = Vec::new();
        let whole = Span::new(3, 40);
        let expr = parse_expr("a == b", SpanMap::Whole(whole), &mut diagnostics);
        assert_eq!(expr.span, whole);
    }
}
