//! The walk of a successful parse into the AST: the [`Walker`] and its
//! leaves (names, texts, templates, expressions, numbers), and the
//! bookkeeping that reports a clause given twice. The constructs are
//! walked in [`super::declarations`] and [`super::flows`].

use super::lexical::{is_atomic, is_keyword, last_token_end, skip_trivia};
use crate::diag::Diagnostic;
use crate::source::{Span, Spanned};
use crate::syntax::ast::{Expr, ExprKind, Name, Number, Template, TemplatePart, Text};
use crate::syntax::error::{ExpressionError, FlowError};
use crate::syntax::expr::{self, ExprBuilder, SpanMap, too_deep_diagnostic};
use crate::syntax::grammar::Rule;
use pest::iterators::Pair;

/// The single-valued clauses already met in one construct, to report a
/// second one as YAML reports a key given twice.
///
/// The second list holds the clauses whose repeat is already reported: a
/// clause given a third time or more is the same mistake, and reporting
/// each one made a line of 1 MB of `""` (a type's description, again and
/// again) half a million diagnostics (issue 13).
#[derive(Default)]
pub(super) struct Seen(Vec<(&'static str, Span)>, Vec<&'static str>);

/// Walks a successful parse into the AST, collecting what it refuses.
pub(super) struct Walker<'text> {
    pub(super) text: &'text str,
    pub(super) map: SpanMap,
    pub(super) diagnostics: Vec<Diagnostic>,
}

impl Walker<'_> {
    // ------------------------------------------------------------ leaves

    /// A pair's span without trailing white space or comments. pest puts
    /// into a non-atomic rule the trivia it skipped before an optional or
    /// repeated part that then did not match (`abort ` in `-> abort  "label"`).
    pub(super) fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let start = pair.as_span().start();
        self.map.span(start, self.content_end(pair))
    }

    /// Where a pair's own characters end. Past its last child a non-atomic
    /// pair holds only punctuation and trivia (strings are always child
    /// pairs), so a `#` there is always a comment.
    fn content_end(&self, pair: &Pair<'_, Rule>) -> usize {
        let span = pair.as_span();
        if is_atomic(pair.as_rule()) {
            return span.end();
        }
        let after_children = match pair.clone().into_inner().next_back() {
            Some(last_child) => self.content_end(&last_child),
            None => span.start(),
        };
        last_token_end(self.text, after_children, span.end())
    }

    /// Trims the ends of an expression's spans as [`Walker::span`] does for
    /// pairs: the expression builder takes them from pairs as pest gives them.
    fn tidy_expr(&self, expr: &mut Expr) {
        let last_child_end = match &mut expr.kind {
            ExprKind::Unary { operand, .. } | ExprKind::IsSet { operand, .. } => {
                self.tidy_expr(operand);
                operand.span.end
            }
            ExprKind::Binary { left, right, .. } => {
                self.tidy_expr(left);
                self.tidy_expr(right);
                right.span.end
            }
            ExprKind::List { items } => {
                items.iter_mut().for_each(|item| self.tidy_expr(item));
                items.last().map_or(expr.span.start, |item| item.span.end)
            }
            ExprKind::Call(call) => {
                call.args.iter_mut().for_each(|arg| self.tidy_expr(arg));
                call.args.last().map_or(call.function.span.end, |arg| arg.span.end)
            }
            _ => return,
        };
        // Expression spans are file offsets; the walker's text starts at the
        // item's base.
        let base = match self.map {
            SpanMap::Exact { base } => base,
            SpanMap::Whole(_) => 0,
        };
        let end = last_token_end(
            self.text,
            last_child_end.saturating_sub(base) as usize,
            expr.span.end.saturating_sub(base) as usize,
        );
        expr.span.end = u32::try_from(end).map_or(expr.span.end, |end| end.saturating_add(base));
    }

    fn tidy_template(&self, template: &mut Template) {
        for part in &mut template.parts {
            if let TemplatePart::Expr(expr) = part {
                self.tidy_expr(expr);
            }
        }
    }

    pub(super) fn name(&self, pair: &Pair<'_, Rule>) -> Name {
        Spanned::new(pair.as_str().to_string(), self.span(pair))
    }

    /// A `text` pair (quoted, no interpolation) as its unescaped value.
    pub(super) fn text(&self, pair: Pair<'_, Rule>) -> Text {
        let span = self.span(&pair);
        Spanned::new(expr::unescape_text(pair), span)
    }

    /// A `name` or a `text`, for places that accept either (enum values,
    /// header names, JSON keys).
    pub(super) fn name_or_text(&self, pair: Pair<'_, Rule>) -> Name {
        if pair.as_rule() == Rule::text { self.text(pair) } else { self.name(&pair) }
    }

    pub(super) fn template(&mut self, pair: Pair<'_, Rule>) -> Template {
        let mut builder = ExprBuilder { map: self.map, diagnostics: &mut self.diagnostics };
        let mut template = builder.template(pair);
        self.tidy_template(&mut template);
        template
    }

    pub(super) fn expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let mut builder = ExprBuilder { map: self.map, diagnostics: &mut self.diagnostics };
        let mut expr = builder.expr(pair, 0);
        self.tidy_expr(&mut expr);
        expr
    }

    /// The `name`s of a `names` pair, or of any pair whose children are names.
    pub(super) fn names(&self, pair: Pair<'_, Rule>) -> Vec<Name> {
        pair.into_inner()
            .flat_map(|inner| match inner.as_rule() {
                Rule::names => inner.into_inner().map(|name| self.name(&name)).collect(),
                Rule::name => vec![self.name(&inner)],
                _ => Vec::new(),
            })
            .collect()
    }

    /// The `text`s of a clause such as `when "a", "b"`.
    pub(super) fn texts(&self, pair: Pair<'_, Rule>) -> Vec<Text> {
        let mut texts = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::texts => texts.extend(inner.into_inner().map(|text| self.text(text))),
                Rule::text => texts.push(self.text(inner)),
                _ => {}
            }
        }
        texts
    }

    /// The expressions of a clause such as `if a, b`.
    pub(super) fn exprs(&mut self, pair: Pair<'_, Rule>) -> Vec<Expr> {
        let mut exprs = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::exprs => {
                    for expr_pair in inner.into_inner() {
                        exprs.push(self.expr(expr_pair));
                    }
                }
                Rule::expr => exprs.push(self.expr(inner)),
                _ => {}
            }
        }
        exprs
    }

    /// The first child of a clause that is not a keyword: the value of
    /// `prompt "…"`, `next id`, `wait 2d`.
    pub(super) fn value<'pair>(pair: Pair<'pair, Rule>) -> Option<Pair<'pair, Rule>> {
        pair.into_inner().find(|inner| !is_keyword(inner.as_rule()))
    }

    pub(super) fn template_value(&mut self, pair: Pair<'_, Rule>) -> Option<Template> {
        Self::value(pair).map(|value| self.template(value))
    }

    /// The value of a clause as text: a quoted `text` unescaped, anything
    /// else (a duration, a word) as written.
    pub(super) fn text_value(&self, pair: Pair<'_, Rule>) -> Option<Text> {
        Self::value(pair).map(|value| self.name_or_text(value))
    }

    pub(super) fn name_value(&self, pair: Pair<'_, Rule>) -> Option<Name> {
        Self::value(pair).map(|value| self.name(&value))
    }

    /// A number literal as written, an integer unless it has a fraction.
    pub(super) fn number(&mut self, pair: &Pair<'_, Rule>) -> Option<Spanned<Number>> {
        let span = self.span(pair);
        let written = pair.as_str();
        if written.contains('.') {
            let value = written.parse::<f64>().ok()?;
            return Some(Spanned::new(Number::Float(value), span));
        }
        match written.parse::<i64>() {
            Ok(value) => Some(Spanned::new(Number::Int(value), span)),
            Err(_) => {
                self.diagnostics.push(ExpressionError::IntegerTooLarge { span }.into());
                None
            }
        }
    }

    /// A whole number where only one makes sense (`max_asks`, limits, `retry`).
    pub(super) fn whole_number(&mut self, pair: &Pair<'_, Rule>, clause: &str) -> Option<Spanned<i64>> {
        let span = self.span(pair);
        match self.number(pair)?.value {
            Number::Int(value) => Some(Spanned::new(value, span)),
            Number::Float(_) => {
                self.diagnostics.push(FlowError::NotWholeNumber { clause: clause.to_string(), span }.into());
                None
            }
        }
    }

    /// The span from the first bracket at or after `from` (skipping white
    /// space and comments) to `end`: the `(…)` of `enum(…)`, the `{…}` of
    /// `object {…}`.
    pub(super) fn bracketed_span(&self, from: usize, end: usize) -> Span {
        let start = skip_trivia(self.text, from).min(end);
        self.map.span(start, end)
    }

    /// Whether this is the first `keyword` clause of a construct; a second
    /// one is reported and ignored, and any later one only ignored.
    pub(super) fn first_time(&mut self, seen: &mut Seen, keyword: &'static str, span: Span, construct: &str) -> bool {
        if let Some((_, first)) = seen.0.iter().find(|(known, _)| *known == keyword) {
            let first = *first;
            if seen.1.contains(&keyword) {
                return false;
            }
            seen.1.push(keyword);
            self.diagnostics.push(
                FlowError::RepeatedClause {
                    keyword: keyword.to_string(),
                    construct: construct.to_string(),
                    span,
                    first,
                }
                .into(),
            );
            return false;
        }
        seen.0.push((keyword, span));
        true
    }

    pub(super) fn too_deep(&mut self, span: Span) {
        self.diagnostics.push(too_deep_diagnostic(span));
    }
}
