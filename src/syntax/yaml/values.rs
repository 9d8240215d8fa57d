//! Reads the leaves of the YAML tree into AST values — names, texts,
//! templates, expressions, numbers, booleans, durations — and the mappings
//! with a fixed key set, reporting every value of the wrong shape, unknown
//! key and repeated key. [`super::build`] assembles declarations from these.

use super::tree::{NodeId, NodeKind, Resolved, Scalar, Tree};
use crate::diag::{Diagnostic, nearest};
use crate::source::{Span, Spanned};
use crate::syntax::ast::{Assignment, Expr, ExprKind, Name, Number, Template, Text};
use crate::syntax::error::{ExpressionError, YamlError};
use crate::syntax::expr::{MAX_EXPR_DEPTH, SpanMap, parse_expr, parse_template};
use std::collections::HashMap;

/// The most keys any fixed-key mapping allows (a step has 20).
pub const MAX_KEYS: usize = 24;

/// A mapping entry being read: the key for messages, the value to read.
/// List items are read with their list's entry and the item as `value`.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub key: &'a str,
    pub key_span: Span,
    pub value: NodeId,
}

impl Entry<'_> {
    /// The same key with another value (a list item).
    pub fn with_value(self, value: NodeId) -> Self {
        Entry { value, ..self }
    }
}

/// The entries of a fixed-key mapping, by key.
pub struct Keyed<'a> {
    allowed: &'static [&'static str],
    found: [Option<Entry<'a>>; MAX_KEYS],
}

impl<'a> Keyed<'a> {
    pub fn get(&self, key: &str) -> Option<Entry<'a>> {
        let index = self.allowed.iter().position(|allowed| *allowed == key)?;
        self.found.get(index).copied().flatten()
    }
}

/// Finds a key's earlier use in a mapping whose keys are free (assignments,
/// headers, body objects): a scan for small mappings, a hash map for large
/// ones, so reading stays linear.
pub struct RepeatFinder<'a> {
    small: Vec<(&'a str, Span)>,
    large: Option<HashMap<&'a str, Span>>,
}

const SMALL_MAPPING: usize = 16;

impl<'a> RepeatFinder<'a> {
    pub fn new(entry_count: usize) -> RepeatFinder<'a> {
        if entry_count > SMALL_MAPPING {
            RepeatFinder { small: Vec::new(), large: Some(HashMap::with_capacity(entry_count)) }
        } else {
            RepeatFinder { small: Vec::with_capacity(entry_count), large: None }
        }
    }

    /// The span of the key's first use, if this is not its first use.
    pub fn earlier_use(&mut self, key: &'a str, span: Span) -> Option<Span> {
        if let Some(index) = self.large.as_mut() {
            return match index.get(key) {
                Some(first) => Some(*first),
                None => {
                    index.insert(key, span);
                    None
                }
            };
        }
        match self.small.iter().find(|(seen, _)| *seen == key) {
            Some((_, first)) => Some(*first),
            None => {
                self.small.push((key, span));
                None
            }
        }
    }
}

/// Reads values out of one tree, pushing what it refuses into `diagnostics`.
pub struct Values<'tree, 'input> {
    pub tree: &'tree Tree<'input>,
    pub diagnostics: &'tree mut Vec<Diagnostic>,
}

impl<'tree, 'input> Values<'tree, 'input> {
    pub fn span(&self, id: NodeId) -> Span {
        self.tree.node(id).span
    }

    pub fn scalar(&self, id: NodeId) -> Option<&'tree Scalar<'input>> {
        match &self.tree.node(id).kind {
            NodeKind::Scalar(scalar) => Some(scalar),
            _ => None,
        }
    }

    pub fn is_mapping(&self, id: NodeId) -> bool {
        matches!(self.tree.node(id).kind, NodeKind::Mapping(_))
    }

    pub fn is_sequence(&self, id: NodeId) -> bool {
        matches!(self.tree.node(id).kind, NodeKind::Sequence(_))
    }

    /// A key with no value (`steps:`), or a `null`/`~`.
    pub fn is_nothing(&self, id: NodeId) -> bool {
        self.scalar(id).is_some_and(|scalar| scalar.resolve() == Resolved::Null)
    }

    /// The span of a scalar's value without its quotes, anchor or tag, when
    /// known; else the node's span.
    pub fn value_span(&self, id: NodeId) -> Span {
        self.scalar(id).and_then(|scalar| scalar.verbatim).unwrap_or_else(|| self.span(id))
    }

    /// Offsets in a scalar's value map to the file exactly when the value
    /// is a verbatim copy of its source; otherwise every span is the scalar.
    pub fn span_map(&self, id: NodeId) -> SpanMap {
        match self.scalar(id).and_then(|scalar| scalar.verbatim) {
            Some(verbatim) => SpanMap::Exact { base: verbatim.start },
            None => SpanMap::Whole(self.span(id)),
        }
    }

    /// "a mapping", "a number", "nothing": what a value is, for messages.
    pub fn describe(&self, id: NodeId) -> &'static str {
        match &self.tree.node(id).kind {
            NodeKind::Sequence(_) => "a list",
            NodeKind::Mapping(_) | NodeKind::Taken(_) => "a mapping",
            NodeKind::Scalar(scalar) => match scalar.resolve() {
                Resolved::Null if scalar.is_empty_plain() => "nothing",
                Resolved::Null => "`null`",
                Resolved::Bool(_) => "a boolean",
                Resolved::Int(_) | Resolved::BigInt | Resolved::Float(_) => "a number",
                Resolved::Str(_) => "a text",
            },
        }
    }

    /// Reports a value of the wrong shape: at the value, or at its key when
    /// there is no value to point at.
    pub fn wrong_shape(&mut self, entry: Entry<'_>, expected: &str, help: impl Into<String>) {
        let found = self.describe(entry.value);
        let value = (found != "nothing").then(|| self.span(entry.value));
        let error = YamlError::WrongShape {
            key: entry.key.to_string(),
            expected: expected.to_string(),
            found,
            key_span: entry.key_span,
            value,
            help: help.into(),
        };
        self.diagnostics.push(error.into());
    }

    /// Reports a required key that is missing from a mapping.
    pub fn missing_key(&mut self, span: Span, what: &str, key: &str, help: impl Into<String>) {
        let error = YamlError::MissingKey { what: what.to_string(), key: key.to_string(), span, help: help.into() };
        self.diagnostics.push(error.into());
    }

    /// The entries of a mapping with a fixed key set. Unknown keys and
    /// repeated keys are reported; the first use of a key is the one kept.
    /// `None` (reported) when the value is not a mapping.
    pub fn keyed(
        &mut self,
        entry: Entry<'_>,
        allowed: &'static [&'static str],
        what: &str,
        expected: &str,
    ) -> Option<Keyed<'tree>> {
        if !self.is_mapping(entry.value) {
            let help = format!("{what} is a mapping of {}", key_list(allowed));
            self.wrong_shape(entry, expected, help);
            return None;
        }
        Some(self.keyed_mapping(entry.value, allowed, what))
    }

    /// Like [`Values::keyed`] for a value known to be a mapping, or nothing
    /// (read as an empty mapping).
    pub fn keyed_mapping(&mut self, mapping: NodeId, allowed: &'static [&'static str], what: &str) -> Keyed<'tree> {
        debug_assert!(allowed.len() <= MAX_KEYS);
        let mut keyed = Keyed { allowed, found: [None; MAX_KEYS] };
        let tree = self.tree;
        for (key_id, value) in tree.entries(mapping) {
            let Some((key, key_span)) = self.key_text(key_id) else {
                continue;
            };
            let Some(index) = allowed.iter().position(|allowed_key| *allowed_key == key) else {
                self.unknown_key(key, key_span, allowed, what);
                continue;
            };
            let Some(slot) = keyed.found.get_mut(index) else {
                continue;
            };
            match slot {
                Some(first) => {
                    let first_span = first.key_span;
                    self.repeated_key(key, key_span, first_span, what);
                }
                None => {
                    *slot = Some(Entry { key, key_span, value });
                }
            }
        }
        keyed
    }

    pub fn unknown_key(&mut self, key: &str, key_span: Span, allowed: &[&str], what: &str) {
        let error = YamlError::UnknownKey {
            key: key.to_string(),
            what: what.to_string(),
            close: nearest(key, allowed.iter().copied()),
            allowed: key_list(allowed),
            span: key_span,
        };
        self.diagnostics.push(error.into());
    }

    pub fn repeated_key(&mut self, key: &str, key_span: Span, first_span: Span, what: &str) {
        let error =
            YamlError::RepeatedKey { key: key.to_string(), what: what.to_string(), span: key_span, first: first_span };
        self.diagnostics.push(error.into());
    }

    /// A mapping key as text: any scalar (a flow may be called `2024`;
    /// lowering says why that is not a valid id). A list or mapping used as
    /// a key is reported.
    pub fn key_text(&mut self, key_id: NodeId) -> Option<(&'tree str, Span)> {
        match self.scalar(key_id) {
            Some(scalar) => Some((&scalar.value, self.value_span(key_id))),
            None => {
                let found = self.describe(key_id);
                let span = self.span(key_id);
                self.diagnostics.push(YamlError::KeyNotName { found, span }.into());
                None
            }
        }
    }

    /// A mapping key as a declared id (a flow, a field, a tool).
    pub fn key_name(&mut self, key_id: NodeId) -> Option<Name> {
        let (key, span) = self.key_text(key_id)?;
        Some(Spanned::new(key.to_string(), span))
    }

    // ------------------------------------------------------------ scalars

    /// An id or a reference to one: a string, never a number or boolean.
    pub fn name(&mut self, entry: Entry<'_>, expected: &str) -> Option<Name> {
        if let Some(Resolved::Str(text)) = self.scalar(entry.value).map(Scalar::resolve) {
            return Some(Spanned::new(text.to_string(), self.value_span(entry.value)));
        }
        let help = format!("write {expected} after `{}:`", entry.key);
        self.wrong_shape(entry, expected, help);
        None
    }

    /// One name or a list of names (`collect: hotel`, `collect: [hotel, date]`).
    pub fn names(&mut self, entry: Entry<'_>, expected_list: &str) -> Vec<Name> {
        let help = || format!("write one name or a list of names, e.g. `{}: [hotel, date]`", entry.key);
        if self.is_sequence(entry.value) {
            let tree = self.tree;
            return tree
                .items(entry.value)
                .iter()
                .filter_map(|item| self.name(entry.with_value(*item), "a name"))
                .collect();
        }
        if self.is_nothing(entry.value) {
            return Vec::new();
        }
        match self.scalar(entry.value).map(Scalar::resolve) {
            Some(Resolved::Str(text)) if text.contains(',') => {
                self.wrong_shape(entry, expected_list, help());
                Vec::new()
            }
            Some(Resolved::Str(_)) => self.name(entry, expected_list).into_iter().collect(),
            _ => {
                self.wrong_shape(entry, expected_list, help());
                Vec::new()
            }
        }
    }

    /// Free text (a description, a title, a `when`): any scalar but null,
    /// as written, so `title: 2024` is the text "2024".
    pub fn text(&mut self, entry: Entry<'_>, expected: &str) -> Option<Text> {
        match self.scalar(entry.value) {
            Some(scalar) if scalar.resolve() != Resolved::Null => {
                Some(Spanned::new(scalar.value.to_string(), self.span(entry.value)))
            }
            _ => {
                self.wrong_shape(entry, expected, "write a text; quote it if it contains `: ` or ` #`");
                None
            }
        }
    }

    /// A word from a fixed set (`phase: pre`, `method: POST`): a string only.
    pub fn word(&mut self, entry: Entry<'_>, expected: &str, help: &str) -> Option<Text> {
        if let Some(Resolved::Str(text)) = self.scalar(entry.value).map(Scalar::resolve) {
            return Some(Spanned::new(text.to_string(), self.span(entry.value)));
        }
        self.wrong_shape(entry, expected, help);
        None
    }

    /// One text or a list of texts (`when`, `examples`).
    pub fn texts(&mut self, entry: Entry<'_>, expected: &str) -> Vec<Text> {
        if self.is_sequence(entry.value) {
            let tree = self.tree;
            return tree
                .items(entry.value)
                .iter()
                .filter_map(|item| self.text(entry.with_value(*item), "a text"))
                .collect();
        }
        if self.is_nothing(entry.value) {
            return Vec::new();
        }
        self.text(entry, expected).into_iter().collect()
    }

    /// A template: any scalar but null, with `{{ expr }}` interpolations.
    pub fn template(&mut self, entry: Entry<'_>) -> Option<Template> {
        match self.scalar(entry.value) {
            Some(scalar) if scalar.resolve() != Resolved::Null => {
                let map = self.span_map(entry.value);
                Some(parse_template(&scalar.value, map, self.diagnostics))
            }
            _ => {
                self.wrong_shape(
                    entry,
                    "a text",
                    "write a text, with `{{ name }}` where a value goes; quote it if it contains `: ` or ` #`",
                );
                None
            }
        }
    }

    /// One template or a list of them (`rules`, `append_prompt`).
    pub fn templates(&mut self, entry: Entry<'_>) -> Vec<Template> {
        if self.is_sequence(entry.value) {
            let tree = self.tree;
            return tree.items(entry.value).iter().filter_map(|item| self.template(entry.with_value(*item))).collect();
        }
        if self.is_nothing(entry.value) {
            return Vec::new();
        }
        self.template(entry).into_iter().collect()
    }

    /// An expression: a string is parsed (`guests > 2`; a string literal is
    /// written `'"Bob"'`), any other scalar is its literal, a list of
    /// values is a list literal.
    pub fn expr(&mut self, entry: Entry<'_>) -> Expr {
        self.expr_at_depth(entry, 0)
    }

    fn expr_at_depth(&mut self, entry: Entry<'_>, depth: usize) -> Expr {
        let span = self.span(entry.value);
        if self.is_sequence(entry.value) {
            if depth >= MAX_EXPR_DEPTH {
                self.diagnostics.push(ExpressionError::TooDeep { span, limit: MAX_EXPR_DEPTH }.into());
                return Expr::error(span);
            }
            let tree = self.tree;
            let items = tree
                .items(entry.value)
                .iter()
                .map(|item| self.expr_at_depth(entry.with_value(*item), depth + 1))
                .collect();
            return Expr { kind: ExprKind::List { items }, span };
        }
        let Some(scalar) = self.scalar(entry.value) else {
            self.wrong_shape(
                entry,
                "an expression",
                format!(
                    "write the expression as text, e.g. `{}: guests > 2`; quote it if it starts with `{{` or `[`",
                    entry.key
                ),
            );
            return Expr::error(span);
        };
        let kind = match scalar.resolve() {
            Resolved::Str(text) => {
                let map = self.span_map(entry.value);
                if let Some(path) = simple_path(text, map) {
                    return path;
                }
                return parse_expr(text, map, self.diagnostics);
            }
            Resolved::Null => ExprKind::Null,
            Resolved::Bool(value) => ExprKind::Bool { value },
            Resolved::Int(value) => ExprKind::Int { value },
            Resolved::Float(value) => ExprKind::Float { value },
            Resolved::BigInt => {
                self.integer_too_large(span);
                ExprKind::Error
            }
        };
        Expr { kind, span }
    }

    /// One expression or a list of them, all of which must hold (`if`).
    pub fn exprs(&mut self, entry: Entry<'_>) -> Vec<Expr> {
        if self.is_sequence(entry.value) {
            let tree = self.tree;
            return tree.items(entry.value).iter().map(|item| self.expr(entry.with_value(*item))).collect();
        }
        if self.is_nothing(entry.value) {
            return Vec::new();
        }
        vec![self.expr(entry)]
    }

    /// `{ field: expr, ... }`: `set`, `set_context`, `goto` data, call args.
    pub fn assignments(&mut self, entry: Entry<'_>, what: &str) -> Vec<Assignment> {
        if self.is_nothing(entry.value) {
            return Vec::new();
        }
        if !self.is_mapping(entry.value) {
            let help = format!("write one `name: expression` per line under `{}`", entry.key);
            self.wrong_shape(entry, "a mapping of names to expressions", help);
            return Vec::new();
        }
        let tree = self.tree;
        let mut repeats = RepeatFinder::new(tree.entry_count(entry.value));
        let mut assignments = Vec::with_capacity(tree.entry_count(entry.value));
        for (key_id, value) in tree.entries(entry.value) {
            let Some((key, key_span)) = self.key_text(key_id) else {
                continue;
            };
            if let Some(first_span) = repeats.earlier_use(key, key_span) {
                self.repeated_key(key, key_span, first_span, what);
                continue;
            }
            let value = self.expr(Entry { key, key_span, value });
            assignments.push(Assignment { name: Spanned::new(key.to_string(), key_span), value });
        }
        assignments
    }

    pub fn int(&mut self, entry: Entry<'_>) -> Option<Spanned<i64>> {
        match self.scalar(entry.value).map(Scalar::resolve) {
            Some(Resolved::Int(value)) => Some(Spanned::new(value, self.span(entry.value))),
            Some(Resolved::BigInt) => {
                self.integer_too_large(self.span(entry.value));
                None
            }
            _ => {
                let help = format!("write a whole number, e.g. `{}: 3`", entry.key);
                self.wrong_shape(entry, "a whole number", help);
                None
            }
        }
    }

    pub fn number(&mut self, entry: Entry<'_>) -> Option<Spanned<Number>> {
        let number = match self.scalar(entry.value).map(Scalar::resolve) {
            Some(Resolved::Int(value)) => Number::Int(value),
            Some(Resolved::Float(value)) => Number::Float(value),
            Some(Resolved::BigInt) => {
                self.integer_too_large(self.span(entry.value));
                return None;
            }
            _ => {
                let help = format!("write a number, e.g. `{}: 10`", entry.key);
                self.wrong_shape(entry, "a number", help);
                return None;
            }
        };
        Some(Spanned::new(number, self.span(entry.value)))
    }

    pub fn boolean(&mut self, entry: Entry<'_>) -> Option<Spanned<bool>> {
        if let Some(Resolved::Bool(value)) = self.scalar(entry.value).map(Scalar::resolve) {
            return Some(Spanned::new(value, self.span(entry.value)));
        }
        let help = format!("write `{}: true` or `{}: false`", entry.key, entry.key);
        self.wrong_shape(entry, "`true` or `false`", help);
        None
    }

    /// A duration as written (`30s`). A bare number is kept as its text so
    /// lowering can say the unit is missing.
    pub fn duration(&mut self, entry: Entry<'_>) -> Option<Text> {
        match self.scalar(entry.value).map(|scalar| (scalar, scalar.resolve())) {
            Some((scalar, Resolved::Str(_) | Resolved::Int(_) | Resolved::BigInt | Resolved::Float(_))) => {
                Some(Spanned::new(scalar.value.to_string(), self.span(entry.value)))
            }
            _ => {
                let help = format!("write a number and a unit, e.g. `{}: 30s` (s, m, h or d)", entry.key);
                self.wrong_shape(entry, "a duration", help);
                None
            }
        }
    }

    pub fn integer_too_large(&mut self, span: Span) {
        self.diagnostics.push(ExpressionError::IntegerTooLarge { span }.into());
    }
}

/// `email`, `item.email`: the most common expression (call arguments, `set`
/// values, `in`) read without the expression parser, which dominates the
/// cost of reading a large program otherwise. It yields exactly what
/// [`parse_expr`] does: a path whose span is the whole text. Texts the
/// grammar reads differently are left to it: a first segment that is a
/// literal or `not` (`true.x` and `not` are errors there).
fn simple_path(text: &str, map: SpanMap) -> Option<Expr> {
    let is_ident = |segment: &str| {
        let mut bytes = segment.bytes();
        bytes.next().is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
            && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
    };
    let mut segments = Vec::new();
    let mut offset = 0usize;
    for segment in text.split('.') {
        if !is_ident(segment) {
            return None;
        }
        segments.push(Spanned::new(segment.to_string(), map.span(offset, offset + segment.len())));
        offset += segment.len() + 1;
    }
    let first = segments.first()?;
    if matches!(first.value.as_str(), "true" | "false" | "null" | "not") {
        return None;
    }
    Some(Expr { kind: ExprKind::Path { segments }, span: map.span(0, text.len()) })
}

/// "`id`, `prompt` or `say`".
pub fn key_list(keys: &[&str]) -> String {
    match keys {
        [] => String::from("no keys"),
        [only] => format!("`{only}`"),
        [init @ .., last] => {
            let init: Vec<String> = init.iter().map(|key| format!("`{key}`")).collect();
            format!("{} or `{last}`", init.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_paths_read_as_the_expression_parser_reads_them() {
        let map = SpanMap::Exact { base: 7 };
        let texts = [
            "email",
            "item.email",
            "_x",
            "a1.b2.c3",
            "and",
            "in",
            "set",
            "is",
            "nothing",
            "true",
            "null",
            "not",
            "true.x",
            "not.x",
            "x.",
            ".x",
            "a..b",
            "a-b",
            "é",
            "1a",
            "",
        ];
        for text in texts {
            let Some(fast) = simple_path(text, map) else {
                continue;
            };
            let mut diagnostics = Vec::new();
            let parsed = parse_expr(text, map, &mut diagnostics);
            assert!(diagnostics.is_empty(), "{text:?}: {diagnostics:?}");
            let as_json = |expr: &Expr| serde_json::to_string(expr).unwrap_or_default();
            assert_eq!(as_json(&fast), as_json(&parsed), "{text:?}");
        }
        for text in ["true", "null", "not", "true.x", "x.", "a..b", "a-b", "é", ""] {
            assert!(simple_path(text, map).is_none(), "{text:?}");
        }
    }

    #[test]
    fn key_lists_read_as_prose() {
        assert_eq!(key_list(&["a"]), "`a`");
        assert_eq!(key_list(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
