//! The `.flow` front end: pest pairs of grammar/flow.pest into the AST.
//!
//! The walk must yield exactly the AST the YAML front end yields for the same
//! program, because both syntaxes are promised to compile to the same IR. So
//! every `.flow` form maps onto the YAML shape: a `say` in a step body is the
//! step's `say` while a `say` inside a block is an action; actions written
//! directly in a step body join its `do` actions in source order; a clause
//! given twice where YAML has one key is reported as `duplicate_key`, as a
//! YAML mapping with that key twice would be.
//!
//! pest stops at the first syntax error, so a program that does not parse
//! yields an empty AST and that one diagnostic.

use super::ast::{
    Abort, Action, ActionKind, Agent, Assignment, BodyValue, Branch, Call, Complete, Directive, ExecSpec, Expr,
    ExprKind, FieldDecl, FlowDecl, ForEach, Goto, GotoStep, HttpSpec, Limits, Name, Number, OnError, Program,
    SignalDecl, StepDecl, Template, TemplatePart, Text, Then, ToolDecl, ToolImpl, TypeExpr,
};
use super::compact::Compact;
use super::expr::{self, ExprBuilder, MAX_EXPR_DEPTH, SpanMap};
use super::grammar::{FlowParser, Rule};
use crate::diag::{Code, Diagnostic};
use crate::source::{SourceFile, Span, Spanned};
use pest::Parser;
use pest::iterators::Pair;

/// Parses a `.flow` program.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let text = file.text.as_str();
    let map = SpanMap::Exact { base: 0 };
    // Refused before pest runs: the generated parser recurses once per
    // bracket level, and so does the walk below.
    if let Some(offset) = expr::too_deep(text) {
        let mut diagnostic = too_deep_diagnostic(map.span(offset, next_char_end(text, offset)));
        if let Some(label) = diagnostic.labels.first_mut() {
            label.text = format!("more than {} brackets deep here", expr::MAX_BRACKET_DEPTH);
        }
        return (Program::default(), vec![diagnostic]);
    }
    // Large programs are cut at top-level item boundaries and the pieces
    // parsed on all cores; a piece that fails sends the whole file through
    // the sequential path, so diagnostics never depend on the cut.
    let pieces = split_at_items(text, super::parallelism());
    if pieces.len() > 1 {
        let parsed: Option<Vec<(Program, Vec<Diagnostic>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = pieces
                .iter()
                .map(|range| {
                    let range = range.clone();
                    std::thread::Builder::new()
                        .stack_size(super::PARSER_STACK)
                        .spawn_scoped(scope, move || parse_items(text, range))
                })
                .collect();
            handles.into_iter().map(|handle| handle.ok().and_then(|handle| handle.join().ok()).flatten()).collect()
        });
        if let Some(parsed) = parsed {
            return merge_pieces(parsed);
        }
    }
    match parse_items(text, 0..text.len()) {
        Some(parsed) => parsed,
        None => {
            // Parse the whole program again for the diagnostic: the same
            // failure, with the context pest needs to name what it expected.
            let mut diagnostics = Vec::new();
            if let Err(error) = FlowParser::parse(Rule::program, text) {
                diagnostics.push(parse_failure(&error, text, map));
            }
            (Program::default(), diagnostics)
        }
    }
}

/// Parses the top-level items in `range` one at a time: pest keeps every
/// token of what it parses, so parsing item by item bounds that memory.
/// `None` when an item does not parse.
fn parse_items(text: &str, range: std::ops::Range<usize>) -> Option<(Program, Vec<Diagnostic>)> {
    let mut program = Program::default();
    let mut diagnostics = Vec::new();
    let end = range.end.min(text.len());
    let mut offset = skip_trivia(text, range.start).min(end);
    while let Some(rest) = text.get(offset..end).filter(|rest| !rest.is_empty()) {
        let item_only = FlowParser::parse(Rule::item_only, rest).ok().and_then(|mut pairs| pairs.next())?;
        let consumed = item_only.as_span().end();
        let base = u32::try_from(offset).unwrap_or(u32::MAX);
        let mut walker = Walker { text: rest, map: SpanMap::Exact { base }, diagnostics };
        if let Some(item) = item_only.into_inner().next() {
            walker.item(&mut program, item);
        }
        diagnostics = walker.diagnostics;
        if consumed == 0 {
            break;
        }
        offset = skip_trivia(text, offset + consumed).min(end);
    }
    Some((program, diagnostics))
}

/// Joins the programs of consecutive pieces, in order.
fn merge_pieces(pieces: Vec<(Program, Vec<Diagnostic>)>) -> (Program, Vec<Diagnostic>) {
    let mut program = Program::default();
    let mut diagnostics = Vec::new();
    for (piece, piece_diagnostics) in pieces {
        diagnostics.extend(piece_diagnostics);
        if let Some(agent) = piece.agent {
            match &program.agent {
                Some(first) => diagnostics.push(duplicate_agent(first, &agent)),
                None => program.agent = Some(agent),
            }
        }
        program.schema.extend(piece.schema);
        program.context.extend(piece.context);
        program.tools.extend(piece.tools);
        program.signals.extend(piece.signals);
        program.flows.extend(piece.flows);
    }
    (program, diagnostics)
}

fn duplicate_agent(first: &Agent, second: &Agent) -> Diagnostic {
    Diagnostic::new(Code::DuplicateKey, "a program has one `agent`")
        .at(second.name.as_ref().map_or(second.span, |name| name.span), "a second agent")
        .with_label(first.name.as_ref().map_or(first.span, |name| name.span), "first agent")
        .with_help("merge the two `agent` blocks")
}

/// Cuts a program into about `pieces` ranges that end where a top-level
/// item ends (a `}` back at depth 0, outside strings and comments). Small
/// programs stay whole.
fn split_at_items(text: &str, pieces: usize) -> Vec<std::ops::Range<usize>> {
    if pieces <= 1 || text.len() < super::PARALLEL_THRESHOLD {
        return std::iter::once(0..text.len()).collect();
    }
    let target = text.len() / pieces;
    let mut cuts = vec![0];
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let bytes = text.as_bytes();
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match quote {
            Some(open) => {
                if byte == b'\\' {
                    index += 1;
                } else if byte == open {
                    quote = None;
                }
            }
            None => match byte {
                b'"' | b'\'' => quote = Some(byte),
                b'#' => {
                    while bytes.get(index).is_some_and(|&skipped| skipped != b'\n') {
                        index += 1;
                    }
                }
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    let last = cuts.last().copied().unwrap_or(0);
                    if depth == 0 && index + 1 - last >= target && cuts.len() < pieces {
                        cuts.push(index + 1);
                    }
                }
                _ => {}
            },
        }
        index += 1;
    }
    cuts.push(text.len());
    cuts.windows(2)
        .filter_map(|pair| match pair {
            [start, end] if start < end => Some(*start..*end),
            _ => None,
        })
        .collect()
}

/// The diagnostic for pest's failure: what was expected at the furthest
/// point the parse reached, with the offending word quoted whole ("found
/// `Which`", not "found `W`").
fn parse_failure(error: &pest::error::Error<Rule>, text: &str, map: SpanMap) -> Diagnostic {
    let offset = error_offset(error);
    // pest's own guard (stack or call limit) fires on nesting that hides
    // where the bracket count cannot see it, inside `{{ }}`.
    if let pest::error::ErrorVariant::CustomError { message } = &error.variant
        && message.contains("limit reached")
    {
        return too_deep_diagnostic(map.span(offset, next_char_end(text, offset)));
    }
    let detailed = detailed_failure(text);
    let (offset, mut diagnostic, expected_tokens) = match &detailed {
        Some((detailed, tokens)) => {
            (error_offset(detailed), expr::syntax_error(detailed, text, map, "a program"), tokens.as_slice())
        }
        None => (offset, expr::syntax_error(error, text, map, "a program"), &[][..]),
    };
    for (shown, said) in
        [("` `", "a space"), ("`\\t`", "a tab"), ("`\\n`", "the end of the line"), ("`\\r`", "the end of the line")]
    {
        if let Some(expected) = diagnostic.message.strip_suffix(&format!("found {shown}")) {
            diagnostic.message = format!("{expected}found {said}");
        }
    }
    let first_char_end = next_char_end(text, offset);
    let word_end = word_end(text, offset);
    if word_end > first_char_end
        && let (Some(first_char), Some(word)) = (text.get(offset..first_char_end), text.get(offset..word_end))
    {
        let short = format!("found `{}`", first_char.escape_debug());
        if let Some(expected) = diagnostic.message.strip_suffix(&short) {
            diagnostic.message = format!("{expected}found `{word}`");
            if let Some(label) = diagnostic.labels.first_mut() {
                label.span = map.span(offset, word_end);
            }
        }
    }
    if let Some(keyword) = text.get(offset..word_end).and_then(|word| misspelt_keyword(word, expected_tokens)) {
        diagnostic.help = Some(format!("did you mean `{keyword}`?"));
    }
    if expected_tokens.iter().any(|token| token == "}") {
        diagnostic = blame_unclosed_brace(diagnostic, text, offset, map);
    }
    diagnostic
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
fn blame_unclosed_brace(diagnostic: Diagnostic, text: &str, failed_at: usize, map: SpanMap) -> Diagnostic {
    let braces = open_braces(text, failed_at);
    if braces.unclosed_in_file == 0 {
        return diagnostic;
    }
    let Some(brace) = braces.misindented.first().or(braces.open_at_failure.last()).copied() else {
        return diagnostic;
    };
    let gave_up = diagnostic.primary_span().unwrap_or_else(|| map.span(failed_at, failed_at));
    Diagnostic::new(Code::Syntax, "a `{` is never closed")
        .at(map.span(brace, brace + 1), "this `{` has no matching `}`")
        .with_label(gave_up, format!("the parser gave up here: {}", diagnostic.message))
        .with_help("add the missing `}` where the block should end")
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

/// Keywords that start a clause of each construct, for naming the construct
/// instead of listing twenty keywords.
const PROGRAM_ITEMS: &[&str] = &["agent", "schema", "context", "tool", "signal", "flow"];
const STEP_CLAUSES: &[&str] = &[
    "prompt",
    "say",
    "collect",
    "requires",
    "skip_if",
    "when",
    "if",
    "branch",
    "next",
    "do",
    "on_enter",
    "prepare",
    "finalize",
    "tools",
    "max_asks",
    "on_no_answer",
    "on_error",
    "wait",
    "set",
    "call",
    "emit",
    "for",
];
const FLOW_CLAUSES: &[&str] = &[
    "when",
    "if",
    "default",
    "requires",
    "optional",
    "keep",
    "fresh",
    "rule",
    "on_enter",
    "on_complete",
    "complete",
    "auto",
    "step",
];
const ACTIONS: &[&str] = &["set", "call", "emit", "for", "say"];
const EXPRESSION_STARTS: &[&str] = &["\"", "'", "(", "[", "-", "_", "true", "false", "null", "not"];
const OPERATORS: &[&str] = &["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or", "in", "not", "is"];

/// "a step clause (`prompt`, …) or `}`" from the tokens pest expected.
///
/// `tokens` are pest's expected tokens as text: literals as written, and
/// character ranges as `a..z`. `deepest` are the rules that failed there.
fn describe_expected(tokens: &[String], deepest: &[Rule]) -> Option<String> {
    let mut literals: Vec<String> = Vec::new();
    let mut letters = false;
    let mut digits = false;
    let mut inside_token = true;
    for token in tokens {
        let is_range = token.chars().count() == 4 && token.get(1..3) == Some("..");
        match token.as_str() {
            " " | "\t" | "\r" | "\n" => inside_token = false,
            "#" | "BUILTIN_RULE" => {}
            "_" => letters = true,
            _ if is_range && token.starts_with(|first: char| first.is_ascii_digit()) => digits = true,
            _ if is_range => letters = true,
            _ => literals.push(token.clone()),
        }
    }
    if deepest.contains(&Rule::duration) {
        let description = if inside_token {
            "a duration unit (`ms`, `s`, `m`, `h` or `d`)"
        } else {
            "a duration (`500ms`, `30s`, `10m`, `2h`, `1d`)"
        };
        return Some(description.to_string());
    }
    if deepest.contains(&Rule::http_method) {
        return Some("an HTTP method in capitals (`GET`, `POST`, …)".to_string());
    }
    let has = |literals: &[String], token: &str| literals.iter().any(|literal| literal == token);
    let mut parts: Vec<String> = Vec::new();
    let take = |literals: &mut Vec<String>, group: &[&str], description: String, parts: &mut Vec<String>| {
        literals.retain(|literal| !group.contains(&literal.as_str()));
        parts.push(description);
    };
    if has(&literals, "goto_step") {
        let description = if letters {
            letters = false;
            "a step or flow name, or a directive (`goto F`, `goto_step S`, `complete`, `abort`, `reply \"…\"`, …)"
        } else {
            "a directive clause (`goto`, `goto_step`, `complete`, `abort`, `reset`, `reply`, `set`, …)"
        };
        take(&mut literals, super::ast::DIRECTIVE_KEYS, description.to_string(), &mut parts);
        literals.retain(|literal| literal != "{");
    }
    if has(&literals, "agent") && has(&literals, "schema") {
        let description = "`agent`, `schema`, `context`, `tool`, `signal` or `flow`".to_string();
        take(&mut literals, PROGRAM_ITEMS, description, &mut parts);
    }
    if has(&literals, "prompt") && has(&literals, "collect") {
        let description = "a step clause (`prompt`, `say`, `collect`, `requires`, `next`, `branch`, `do`, …)";
        take(&mut literals, STEP_CLAUSES, description.to_string(), &mut parts);
    }
    if has(&literals, "on_complete") && has(&literals, "step") {
        let description = "a `step` or a flow clause (`when`, `if`, `requires`, `rule`, `on_enter`, …)";
        take(&mut literals, FLOW_CLAUSES, description.to_string(), &mut parts);
    }
    if has(&literals, "call") && has(&literals, "emit") {
        let description = "an action (`set`, `call`, `emit`, `for`, `say`)";
        take(&mut literals, ACTIONS, description.to_string(), &mut parts);
    }
    if has(&literals, "enum") && has(&literals, "object") {
        letters = false;
        let description =
            "a type (`string`, `int`, `float`, `bool`, `date`, `datetime`, `enum(…)`, `list(…)`, `object {…}`)";
        take(&mut literals, &["enum", "list", "object"], description.to_string(), &mut parts);
    }
    if has(&literals, "null") && has(&literals, "true") {
        letters = false;
        digits = false;
        take(&mut literals, EXPRESSION_STARTS, "an expression".to_string(), &mut parts);
    }
    if has(&literals, "==") || has(&literals, "+") {
        take(&mut literals, OPERATORS, "an operator".to_string(), &mut parts);
    }
    let quotes = has(&literals, "\"") || has(&literals, "'");
    if quotes && inside_token {
        // Only the string's own characters could follow: it was never closed.
        return Some("the closing quote of the string".to_string());
    }
    if quotes {
        take(&mut literals, &["\"", "'"], "a quoted string".to_string(), &mut parts);
    }
    if letters {
        parts.push("a name".to_string());
    }
    if digits {
        parts.push("a number".to_string());
    }
    parts.extend(literals.iter().map(|literal| format!("`{literal}`")));
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => {
            let last = parts.pop().unwrap_or_default();
            Some(format!("{} or {last}", parts.join(", ")))
        }
    }
}

/// The end of the identifier-like word starting at `offset` (or `offset`).
fn word_end(text: &str, offset: usize) -> usize {
    let rest = text.get(offset..).unwrap_or("");
    let length =
        rest.find(|character: char| !(character.is_ascii_alphanumeric() || character == '_')).unwrap_or(rest.len());
    offset + length
}

fn next_char_end(text: &str, offset: usize) -> usize {
    text.get(offset..).and_then(|rest| rest.chars().next()).map_or(offset, |first| offset + first.len_utf8())
}

fn too_deep_diagnostic(span: Span) -> Diagnostic {
    Diagnostic::new(Code::Syntax, "nesting is too deep")
        .at(span, format!("more than {MAX_EXPR_DEPTH} levels deep here"))
        .with_help("split the expression or block into smaller parts")
}

/// The single-valued clauses already met in one construct, to report a
/// second one as YAML reports a key given twice.
///
/// The second list holds the clauses whose repeat is already reported: a
/// clause given a third time or more is the same mistake, and reporting
/// each one made a line of 1 MB of `""` (a type's description, again and
/// again) half a million diagnostics (issue 13).
#[derive(Default)]
struct Seen(Vec<(&'static str, Span)>, Vec<&'static str>);

/// Walks a successful parse into the AST, collecting what it refuses.
struct Walker<'text> {
    text: &'text str,
    map: SpanMap,
    diagnostics: Vec<Diagnostic>,
}

impl Walker<'_> {
    // ------------------------------------------------------------ leaves

    /// A pair's span without trailing white space or comments. pest puts
    /// into a non-atomic rule the trivia it skipped before an optional or
    /// repeated part that then did not match (`abort ` in `-> abort  "label"`).
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
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

    fn name(&self, pair: &Pair<'_, Rule>) -> Name {
        Spanned::new(pair.as_str().to_string(), self.span(pair))
    }

    /// A `text` pair (quoted, no interpolation) as its unescaped value.
    fn text(&self, pair: Pair<'_, Rule>) -> Text {
        let span = self.span(&pair);
        Spanned::new(expr::unescape_text(pair), span)
    }

    /// A `name` or a `text`, for places that accept either (enum values,
    /// header names, JSON keys).
    fn name_or_text(&self, pair: Pair<'_, Rule>) -> Name {
        if pair.as_rule() == Rule::text { self.text(pair) } else { self.name(&pair) }
    }

    fn template(&mut self, pair: Pair<'_, Rule>) -> Template {
        let mut builder = ExprBuilder { map: self.map, diagnostics: &mut self.diagnostics };
        let mut template = builder.template(pair);
        self.tidy_template(&mut template);
        template
    }

    fn expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let mut builder = ExprBuilder { map: self.map, diagnostics: &mut self.diagnostics };
        let mut expr = builder.expr(pair, 0);
        self.tidy_expr(&mut expr);
        expr
    }

    /// The `name`s of a `names` pair, or of any pair whose children are names.
    fn names(&self, pair: Pair<'_, Rule>) -> Vec<Name> {
        pair.into_inner()
            .flat_map(|inner| match inner.as_rule() {
                Rule::names => inner.into_inner().map(|name| self.name(&name)).collect(),
                Rule::name => vec![self.name(&inner)],
                _ => Vec::new(),
            })
            .collect()
    }

    /// The `text`s of a clause such as `when "a", "b"`.
    fn texts(&self, pair: Pair<'_, Rule>) -> Vec<Text> {
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
    fn exprs(&mut self, pair: Pair<'_, Rule>) -> Vec<Expr> {
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
    fn value<'pair>(pair: Pair<'pair, Rule>) -> Option<Pair<'pair, Rule>> {
        pair.into_inner().find(|inner| !is_keyword(inner.as_rule()))
    }

    fn template_value(&mut self, pair: Pair<'_, Rule>) -> Option<Template> {
        Self::value(pair).map(|value| self.template(value))
    }

    /// The value of a clause as text: a quoted `text` unescaped, anything
    /// else (a duration, a word) as written.
    fn text_value(&self, pair: Pair<'_, Rule>) -> Option<Text> {
        Self::value(pair).map(|value| self.name_or_text(value))
    }

    fn name_value(&self, pair: Pair<'_, Rule>) -> Option<Name> {
        Self::value(pair).map(|value| self.name(&value))
    }

    /// A number literal as written, an integer unless it has a fraction.
    fn number(&mut self, pair: &Pair<'_, Rule>) -> Option<Spanned<Number>> {
        let span = self.span(pair);
        let written = pair.as_str();
        if written.contains('.') {
            let value = written.parse::<f64>().ok()?;
            return Some(Spanned::new(Number::Float(value), span));
        }
        match written.parse::<i64>() {
            Ok(value) => Some(Spanned::new(Number::Int(value), span)),
            Err(_) => {
                self.diagnostics.push(integer_too_large(span));
                None
            }
        }
    }

    /// A whole number where only one makes sense (`max_asks`, limits, `retry`).
    fn whole_number(&mut self, pair: &Pair<'_, Rule>, clause: &str) -> Option<Spanned<i64>> {
        let span = self.span(pair);
        match self.number(pair)?.value {
            Number::Int(value) => Some(Spanned::new(value, span)),
            Number::Float(_) => {
                self.diagnostics.push(
                    Diagnostic::new(Code::Syntax, format!("`{clause}` takes a whole number"))
                        .at(span, "not a whole number")
                        .with_help(format!("write `{clause} 3`")),
                );
                None
            }
        }
    }

    /// The span from the first bracket at or after `from` (skipping white
    /// space and comments) to `end`: the `(…)` of `enum(…)`, the `{…}` of
    /// `object {…}`.
    fn bracketed_span(&self, from: usize, end: usize) -> Span {
        let start = skip_trivia(self.text, from).min(end);
        self.map.span(start, end)
    }

    /// Whether this is the first `keyword` clause of a construct; a second
    /// one is reported and ignored, and any later one only ignored.
    fn first_time(&mut self, seen: &mut Seen, keyword: &'static str, span: Span, construct: &str) -> bool {
        if let Some((_, first)) = seen.0.iter().find(|(known, _)| *known == keyword) {
            let first = *first;
            if seen.1.contains(&keyword) {
                return false;
            }
            seen.1.push(keyword);
            self.diagnostics.push(
                Diagnostic::new(Code::DuplicateKey, format!("`{keyword}` is given twice in this {construct}"))
                    .at(span, "given again here")
                    .with_label(first, "first given here")
                    .with_help(format!("keep one `{keyword}`")),
            );
            return false;
        }
        seen.0.push((keyword, span));
        true
    }

    fn too_deep(&mut self, span: Span) {
        self.diagnostics.push(too_deep_diagnostic(span));
    }

    // ------------------------------------------------------------ program

    /// Adds one top-level construct to the program.
    fn item(&mut self, program: &mut Program, item: Pair<'_, Rule>) {
        {
            match item.as_rule() {
                Rule::agent => {
                    let agent = self.agent(item);
                    if let Some(first) = &program.agent {
                        self.diagnostics.push(duplicate_agent(first, &agent));
                    } else {
                        program.agent = Some(agent);
                    }
                }
                Rule::schema => program.schema.extend(self.field_decls(item, 0)),
                Rule::context => program.context.extend(self.field_decls(item, 0)),
                Rule::tool => program.tools.push(self.tool(item)),
                Rule::signal => program.signals.push(self.signal(item)),
                Rule::flow => program.flows.push(self.flow(item)),
                _ => {}
            }
        }
    }

    // ------------------------------------------------------------ agent

    fn agent(&mut self, pair: Pair<'_, Rule>) -> Agent {
        let mut agent = Agent { span: self.span(&pair), ..Agent::default() };
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => agent.name = Some(self.name(&inner)),
                Rule::identity if self.first_time(&mut seen, "identity", span, "agent") => {
                    agent.identity = self.template_value(inner);
                }
                Rule::rule_item => agent.rules.extend(self.template_value(inner)),
                Rule::limits => self.limits(inner, &mut agent.limits, &mut seen),
                _ => {}
            }
        }
        agent
    }

    /// Several `limits` blocks merge; each limit may be given once.
    fn limits(&mut self, pair: Pair<'_, Rule>, limits: &mut Limits, seen: &mut Seen) {
        for limit in pair.into_inner().filter(|inner| inner.as_rule() == Rule::limit) {
            let span = self.span(&limit);
            let mut parts = limit.into_inner();
            let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                continue;
            };
            let keyword = match key.as_str() {
                "max_auto_steps" => "max_auto_steps",
                "max_tool_rounds" => "max_tool_rounds",
                "max_turn_tokens" => "max_turn_tokens",
                _ => "turn_timeout",
            };
            if !self.first_time(seen, keyword, span, "agent's limits") {
                continue;
            }
            if keyword == "turn_timeout" {
                limits.turn_timeout = Some(self.name(&value));
                continue;
            }
            if value.as_rule() != Rule::int_lit {
                self.diagnostics.push(
                    Diagnostic::new(Code::Syntax, format!("`{keyword}` takes a whole number"))
                        .at(self.span(&value), "not a number")
                        .with_help(format!("write `{keyword} 10`")),
                );
                continue;
            }
            let number = self.whole_number(&value, keyword);
            match keyword {
                "max_auto_steps" => limits.max_auto_steps = number,
                "max_tool_rounds" => limits.max_tool_rounds = number,
                _ => limits.max_turn_tokens = number,
            }
        }
    }

    // ------------------------------------------------------------ schema and types

    /// The `field_decl` children of a pair (schema, context, params, returns,
    /// object members).
    fn field_decls(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Vec<FieldDecl> {
        let mut fields = Vec::new();
        for inner in pair.into_inner() {
            if inner.as_rule() == Rule::field_decl
                && let Some(field) = self.field_decl(inner, depth)
            {
                fields.push(field);
            }
        }
        fields
    }

    fn field_decl(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<FieldDecl> {
        let span = self.span(&pair);
        let mut inner = pair.into_inner();
        let name = self.name(&inner.next()?);
        let ty = self.type_expr(inner.next()?, depth)?;
        Some(FieldDecl { name, ty, span })
    }

    fn type_expr(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<TypeExpr> {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.too_deep(span);
            return None;
        }
        let mut inner = pair.into_inner();
        let head = inner.next()?;
        let mut ty = self.type_head(head, span, depth)?;
        let mut seen = Seen::default();
        for option in inner {
            let option_span = self.span(&option);
            match option.as_rule() {
                Rule::text if self.first_time(&mut seen, "description", option_span, "type") => {
                    ty.description = Some(self.text(option));
                }
                Rule::range if self.first_time(&mut seen, "min..max", option_span, "type") => {
                    self.range(option, &mut ty);
                }
                Rule::pattern_opt if self.first_time(&mut seen, "pattern", option_span, "type") => {
                    ty.pattern = self.text_value(option);
                }
                Rule::examples_opt => ty.examples.extend(self.texts(option)),
                _ => {}
            }
        }
        Some(ty)
    }

    /// The type's name and structure: a plain type word, `enum(…)`,
    /// `list(T)` or `object {…}`.
    fn type_head(&mut self, head: Pair<'_, Rule>, span: Span, depth: usize) -> Option<TypeExpr> {
        let head_end = head.as_span().end();
        let rule = head.as_rule();
        if rule == Rule::name {
            return Some(bare_type(self.name(&head), span));
        }
        let mut parts = head.into_inner();
        let keyword = parts.next()?;
        let keyword_name = self.name(&keyword);
        let after_keyword = keyword.as_span().end();
        let mut ty = bare_type(keyword_name, span);
        match rule {
            Rule::enum_type => {
                let values = parts.map(|value| self.name_or_text(value)).collect();
                ty.values = Some(Spanned::new(values, self.bracketed_span(after_keyword, head_end)));
            }
            Rule::list_type => {
                ty.items = match parts.next() {
                    Some(items) => self.type_expr(items, depth + 1).map(Box::new),
                    None => None,
                };
            }
            _ => {
                let mut fields = Vec::new();
                for member in parts {
                    if let Some(field) = self.field_decl(member, depth + 1) {
                        fields.push(field);
                    }
                }
                ty.fields = Some(Spanned::new(fields, self.bracketed_span(after_keyword, head_end)));
            }
        }
        Some(ty)
    }

    /// `min..max`, either side optional.
    fn range(&mut self, pair: Pair<'_, Rule>, ty: &mut TypeExpr) {
        let range_start = pair.as_span().start();
        let range_span = self.span(&pair);
        let mut bounds = 0;
        for bound in pair.into_inner() {
            bounds += 1;
            let is_min = bound.as_span().start() == range_start;
            let number = self.number(&bound);
            if is_min {
                ty.min = number;
            } else {
                ty.max = number;
            }
        }
        if bounds == 0 {
            self.diagnostics.push(
                Diagnostic::new(Code::Syntax, "a range needs a bound")
                    .at(range_span, "neither a minimum nor a maximum")
                    .with_help("write `1..10`, `1..` or `..10`"),
            );
        }
    }

    // ------------------------------------------------------------ tools

    fn tool(&mut self, pair: Pair<'_, Rule>) -> ToolDecl {
        let span = self.span(&pair);
        let mut name = None;
        let mut description = None;
        let mut params = Vec::new();
        let mut returns = None;
        let mut implementations = Vec::new();
        let mut headers: Vec<(Name, Template, Span)> = Vec::new();
        let mut body: Option<(BodyValue, Span)> = None;
        let mut timeout: Option<(Text, Span)> = None;
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let inner_span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => name = Some(self.name(&inner)),
                Rule::field_decl => params.extend(self.field_decl(inner, 0)),
                Rule::returns => {
                    let brace_span = self.bracketed_span(inner.as_span().start() + "->".len(), inner.as_span().end());
                    returns = Some(Spanned::new(self.field_decls(inner, 0), brace_span));
                }
                Rule::description if self.first_time(&mut seen, "description", inner_span, "tool") => {
                    description = self.text_value(inner);
                }
                Rule::http => implementations.extend(self.http(inner)),
                Rule::exec => implementations.push(ToolImpl::Exec(ExecSpec {
                    command: self.texts(inner),
                    timeout: None,
                    span: inner_span,
                })),
                Rule::builtin => {
                    if let Some(builtin_name) = self.name_value(inner) {
                        implementations.push(ToolImpl::Builtin { name: builtin_name, span: inner_span });
                    }
                }
                Rule::header => {
                    let mut parts = inner.into_inner().skip(1);
                    if let (Some(header_name), Some(value)) = (parts.next(), parts.next()) {
                        let header_name = self.name_or_text(header_name);
                        let value = self.template(value);
                        headers.push((header_name, value, inner_span));
                    }
                }
                Rule::body => {
                    if self.first_time(&mut seen, "body", inner_span, "tool")
                        && let Some(value) = Self::value(inner)
                    {
                        body = self.body_value(value, 0).map(|value| (value, inner_span));
                    }
                }
                Rule::timeout if self.first_time(&mut seen, "timeout", inner_span, "tool") => {
                    timeout = self.text_value(inner).map(|value| (value, inner_span));
                }
                _ => {}
            }
        }
        self.attach_http_options(&mut implementations, headers, body, timeout);
        ToolDecl {
            name: name.unwrap_or_else(|| Spanned::new(String::new(), span)),
            description,
            params,
            returns,
            implementations,
            span,
        }
    }

    fn http(&mut self, pair: Pair<'_, Rule>) -> Option<ToolImpl> {
        let span = self.span(&pair);
        let mut parts = pair.into_inner().skip(1);
        let method = self.name(&parts.next()?);
        let url = self.template(parts.next()?);
        Some(ToolImpl::Http(HttpSpec { method, url, headers: Vec::new(), body: None, timeout: None, span }))
    }

    /// `header` and `body` belong to the tool's `http` request and `timeout`
    /// to its `http` or `exec` one; they may be written before or after it.
    /// With several implementations (an `invalid_tool` for lowering) they go
    /// to the first that takes them.
    fn attach_http_options(
        &mut self,
        implementations: &mut [ToolImpl],
        headers: Vec<(Name, Template, Span)>,
        body: Option<(BodyValue, Span)>,
        timeout: Option<(Text, Span)>,
    ) {
        let mut http = implementations.iter_mut().find_map(|implementation| match implementation {
            ToolImpl::Http(spec) => Some(spec),
            _ => None,
        });
        for (header_name, value, span) in headers {
            match http.as_deref_mut() {
                Some(spec) => spec.headers.push((header_name, value)),
                None => self.diagnostics.push(needs_http("header", span)),
            }
        }
        if let Some((value, span)) = body {
            match http {
                Some(spec) => spec.body = Some(value),
                None => self.diagnostics.push(needs_http("body", span)),
            }
        }
        let Some((value, span)) = timeout else {
            return;
        };
        let target = implementations.iter_mut().find_map(|implementation| match implementation {
            ToolImpl::Http(spec) => Some(&mut spec.timeout),
            ToolImpl::Exec(spec) => Some(&mut spec.timeout),
            ToolImpl::Builtin { .. } => None,
        });
        match target {
            Some(slot) => *slot = Some(value),
            None => self.diagnostics.push(
                Diagnostic::new(Code::Syntax, "`timeout` needs an `http` or `exec` tool")
                    .at(span, "nothing to time out")
                    .with_help("builtin tools take no timeout; remove it"),
            ),
        }
    }

    fn body_value(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<BodyValue> {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.too_deep(span);
            return None;
        }
        let value = match pair.as_rule() {
            Rule::null_lit => BodyValue::Null(span),
            Rule::bool_lit => BodyValue::Bool(Spanned::new(pair.as_str() == "true", span)),
            Rule::number => BodyValue::Number(self.number(&pair)?),
            Rule::string => BodyValue::String(self.template(pair)),
            Rule::json_list => {
                let mut items = Vec::new();
                for item in pair.into_inner() {
                    items.extend(self.body_value(item, depth + 1));
                }
                BodyValue::List(Spanned::new(items, span))
            }
            Rule::json_object => {
                let mut members = Vec::new();
                for member in pair.into_inner() {
                    let mut parts = member.into_inner();
                    let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    let key = self.name_or_text(key);
                    if let Some(value) = self.body_value(value, depth + 1) {
                        members.push((key, value));
                    }
                }
                BodyValue::Object(Spanned::new(members, span))
            }
            _ => return None,
        };
        Some(value)
    }

    // ------------------------------------------------------------ signals

    fn signal(&mut self, pair: Pair<'_, Rule>) -> SignalDecl {
        let span = self.span(&pair);
        let mut signal = SignalDecl {
            name: Spanned::new(String::new(), span),
            when: Vec::new(),
            guard: Vec::new(),
            phase: None,
            behavior: None,
            cooldown: None,
            extract: Vec::new(),
            then: None,
            span,
        };
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let inner_span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => signal.name = self.name(&inner),
                Rule::when => signal.when.extend(self.texts(inner)),
                Rule::guard => {
                    let guards = self.exprs(inner);
                    signal.guard.extend(guards);
                }
                Rule::phase if self.first_time(&mut seen, "phase", inner_span, "signal") => {
                    signal.phase = self.name_value(inner);
                }
                Rule::behavior if self.first_time(&mut seen, "behavior", inner_span, "signal") => {
                    for part in inner.into_inner() {
                        match part.as_rule() {
                            Rule::name => signal.behavior = Some(self.name(&part)),
                            Rule::duration => signal.cooldown = Some(self.name(&part)),
                            _ => {}
                        }
                    }
                }
                Rule::extract => signal.extract.extend(self.names(inner)),
                Rule::then if self.first_time(&mut seen, "then", inner_span, "signal") => {
                    signal.then = Self::value(inner).map(|target| self.target(target));
                }
                _ => {}
            }
        }
        signal
    }

    // ------------------------------------------------------------ flows

    fn flow(&mut self, pair: Pair<'_, Rule>) -> FlowDecl {
        let span = self.span(&pair);
        let mut flow = FlowDecl {
            name: Spanned::new(String::new(), span),
            title: None,
            when: Vec::new(),
            guard: Vec::new(),
            default: None,
            requires: Vec::new(),
            optional: Vec::new(),
            keep: Vec::new(),
            fresh: Vec::new(),
            rules: Vec::new(),
            on_enter: Vec::new(),
            on_complete: Vec::new(),
            complete_next: None,
            steps: Vec::new(),
            span,
        };
        let mut seen = Seen::default();
        let items = pair.into_inner();
        // Steps are most of a program's AST: allocate exactly, not by doubling.
        flow.steps.reserve_exact(items.clone().filter(|item| item.as_rule() == Rule::step).count());
        for inner in items {
            let inner_span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => flow.name = self.name(&inner),
                Rule::text => flow.title = Some(self.text(inner)),
                Rule::when => flow.when.extend(self.texts(inner)),
                Rule::guard => {
                    let guards = self.exprs(inner);
                    flow.guard.extend(guards);
                }
                Rule::default_kw if self.first_time(&mut seen, "default", inner_span, "flow") => {
                    flow.default = Some(Spanned::new(true, inner_span));
                }
                Rule::requires => flow.requires.extend(self.names(inner)),
                Rule::optional => flow.optional.extend(self.names(inner)),
                Rule::keep => flow.keep.extend(self.names(inner)),
                Rule::fresh => flow.fresh.extend(self.names(inner)),
                Rule::rule_item => flow.rules.extend(self.template_value(inner)),
                Rule::on_enter => {
                    let actions = self.block_of(inner, 0);
                    flow.on_enter.extend(actions);
                }
                Rule::on_complete => {
                    let actions = self.block_of(inner, 0);
                    flow.on_complete.extend(actions);
                }
                Rule::flow_complete if self.first_time(&mut seen, "complete next", inner_span, "flow") => {
                    flow.complete_next = self.name_value(inner);
                }
                Rule::step => flow.steps.push(self.step(inner)),
                _ => {}
            }
        }
        flow.compact();
        flow
    }

    // ------------------------------------------------------------ steps

    fn step(&mut self, pair: Pair<'_, Rule>) -> StepDecl {
        let mut step = StepDecl { span: self.span(&pair), ..StepDecl::default() };
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let span = self.span(&inner);
            match inner.as_rule() {
                Rule::auto_kw => step.auto = Some(Spanned::new(true, span)),
                Rule::name => step.id = Some(self.name(&inner)),
                Rule::prompt if self.first_time(&mut seen, "prompt", span, "step") => {
                    step.prompt = self.template_value(inner);
                }
                Rule::say if self.first_time(&mut seen, "say", span, "step") => {
                    step.say = self.template_value(inner);
                }
                Rule::collect => step.collect.extend(self.names(inner)),
                Rule::requires => step.requires.extend(self.names(inner)),
                Rule::skip_if if self.first_time(&mut seen, "skip_if", span, "step") => {
                    step.skip_if = Self::value(inner).map(|condition| self.expr(condition));
                }
                Rule::when => step.when.extend(self.texts(inner)),
                Rule::guard => {
                    let guards = self.exprs(inner);
                    step.guard.extend(guards);
                }
                Rule::branches if self.first_time(&mut seen, "branch", span, "step") => {
                    let entries = inner
                        .into_inner()
                        .filter(|entry| entry.as_rule() == Rule::branch_entry)
                        .map(|entry| self.branch(entry))
                        .collect();
                    step.branches = Some(Spanned::new(entries, span));
                }
                Rule::next if self.first_time(&mut seen, "next", span, "step") => {
                    step.next = self.name_value(inner);
                }
                Rule::do_block => {
                    let actions = self.block_of(inner, 0);
                    step.actions.extend(actions);
                }
                Rule::prepare => {
                    let actions = self.block_of(inner, 0);
                    step.prepare.extend(actions);
                }
                Rule::finalize => {
                    let actions = self.block_of(inner, 0);
                    step.finalize.extend(actions);
                }
                Rule::on_enter => {
                    let actions = self.block_of(inner, 0);
                    step.on_enter.extend(actions);
                }
                Rule::tools => step.tools.extend(self.names(inner)),
                Rule::max_asks => {
                    if self.first_time(&mut seen, "max_asks", span, "step")
                        && let Some(value) = Self::value(inner)
                    {
                        step.max_asks = self.whole_number(&value, "max_asks");
                    }
                }
                Rule::on_no_answer if self.first_time(&mut seen, "on_no_answer", span, "step") => {
                    step.on_no_answer = self.on_no_answer(inner).map(Box::new);
                }
                Rule::on_error if self.first_time(&mut seen, "on_error", span, "step") => {
                    step.on_error = self.on_error(inner);
                }
                Rule::wait if self.first_time(&mut seen, "wait", span, "step") => {
                    step.wait = self.name_value(inner);
                }
                Rule::set_action | Rule::call_action | Rule::emit_action | Rule::for_each => {
                    step.actions.extend(self.action(inner, 0));
                }
                _ => {}
            }
        }
        step
    }

    fn branch(&mut self, pair: Pair<'_, Rule>) -> Branch {
        let mut branch =
            Branch { guard: Vec::new(), when: Vec::new(), then: None, label: None, span: self.span(&pair) };
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::guard => branch.guard = self.exprs(inner),
                Rule::when => branch.when = self.texts(inner),
                Rule::name | Rule::directive => branch.then = Some(self.target(inner)),
                Rule::text => branch.label = Some(self.text(inner)),
                _ => {}
            }
        }
        branch
    }

    /// YAML's `on_no_answer` is a directive object, so a bare name (which
    /// could be a step or a flow) has no equivalent and is refused.
    fn on_no_answer(&mut self, pair: Pair<'_, Rule>) -> Option<Directive> {
        let target = Self::value(pair)?;
        if target.as_rule() == Rule::directive {
            return Some(self.directive(target));
        }
        let name = target.as_str();
        self.diagnostics.push(
            Diagnostic::new(Code::Syntax, "`on_no_answer` takes a directive, not a bare name")
                .at(self.span(&target), "a step or a flow?")
                .with_help(format!(
                    "write `on_no_answer goto_step {name}` for a step or `on_no_answer goto {name}` for a flow"
                )),
        );
        None
    }

    fn on_error(&mut self, pair: Pair<'_, Rule>) -> Option<OnError> {
        let value = Self::value(pair)?;
        let span = self.span(&value);
        if value.as_rule() == Rule::retry {
            let mut times = None;
            let mut backoff = None;
            for part in value.into_inner() {
                match part.as_rule() {
                    Rule::int_lit => times = self.whole_number(&part, "retry"),
                    Rule::duration => backoff = Some(self.name(&part)),
                    _ => {}
                }
            }
            return Some(OnError::Retry { times: times?, backoff, span });
        }
        if value.as_rule() == Rule::directive {
            return Some(OnError::Directive(Box::new(self.directive(value))));
        }
        match value.as_str() {
            "stop" => Some(OnError::Stop(span)),
            "continue" => Some(OnError::Continue(span)),
            other => {
                self.diagnostics.push(
                    Diagnostic::new(Code::Syntax, format!("unknown `on_error` policy `{other}`"))
                        .at(span, "not a policy")
                        .with_help("write `on_error stop`, `continue` or `retry 3 backoff 2s` in a workflow; `on_error reply \"…\"`, `goto_step STEP` or `abort \"…\"` in a conversation"),
                );
                None
            }
        }
    }

    // ------------------------------------------------------------ actions

    /// The actions of the `block` inside a clause such as `do { … }`.
    fn block_of(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Vec<Action> {
        match pair.into_inner().find(|inner| inner.as_rule() == Rule::block) {
            Some(block) => self.block(block, depth),
            None => Vec::new(),
        }
    }

    fn block(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Vec<Action> {
        let mut actions = Vec::new();
        for inner in pair.into_inner() {
            actions.extend(self.action(inner, depth));
        }
        actions
    }

    fn action(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<Action> {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.too_deep(span);
            return None;
        }
        let kind = match pair.as_rule() {
            Rule::say => ActionKind::Say(self.template_value(pair)?),
            Rule::set_action => ActionKind::Set(self.assignments(pair)),
            Rule::emit_action => ActionKind::Emit(Box::new(self.directive(Self::value(pair)?))),
            Rule::call_action => ActionKind::Call(self.call(pair)?),
            Rule::for_each => ActionKind::ForEach(Box::new(self.for_each(pair, depth)?)),
            _ => return None,
        };
        Some(Action { kind, span })
    }

    /// The `field = expr` children of a `set` or `set_context`.
    fn assignments(&mut self, pair: Pair<'_, Rule>) -> Vec<Assignment> {
        let mut assignments = Vec::new();
        for inner in pair.into_inner() {
            if inner.as_rule() == Rule::assignment {
                assignments.extend(self.assignment(inner));
            }
        }
        assignments
    }

    fn assignment(&mut self, pair: Pair<'_, Rule>) -> Option<Assignment> {
        let mut parts = pair.into_inner();
        let name = self.name(&parts.next()?);
        let value = self.expr(parts.next()?);
        Some(Assignment { name, value })
    }

    /// `call tool(a: expr, b) -> save`: a bare `b` passes the field of the
    /// same name, as YAML's `args: { b: b }`.
    fn call(&mut self, pair: Pair<'_, Rule>) -> Option<Call> {
        let span = self.span(&pair);
        let mut tool = None;
        let mut args = Vec::new();
        let mut save = None;
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name if tool.is_none() => tool = Some(self.name(&inner)),
                Rule::name => save = Some(self.name(&inner)),
                Rule::argument => {
                    let mut parts = inner.into_inner();
                    let Some(name_pair) = parts.next() else {
                        continue;
                    };
                    let name = self.name(&name_pair);
                    let value = match parts.next() {
                        Some(value) => self.expr(value),
                        None => Expr { kind: ExprKind::Path { segments: vec![name.clone()] }, span: name.span },
                    };
                    args.push(Assignment { name, value });
                }
                _ => {}
            }
        }
        Some(Call { tool: tool?, args, save, span })
    }

    /// `for c in items where filter { actions }`.
    fn for_each(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<ForEach> {
        let span = self.span(&pair);
        let mut binding = None;
        let mut items = None;
        let mut filter = None;
        let mut actions = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name => binding = Some(self.name(&inner)),
                Rule::expr if items.is_none() => items = Some(self.expr(inner)),
                Rule::expr => filter = Some(self.expr(inner)),
                Rule::block => actions = self.block(inner, depth + 1),
                _ => {}
            }
        }
        Some(ForEach { items: items?, binding: binding?, filter, actions, span })
    }

    // ------------------------------------------------------------ directives

    /// A branch, signal or `emit` target: a bare name or a directive.
    fn target(&mut self, pair: Pair<'_, Rule>) -> Then {
        if pair.as_rule() == Rule::directive {
            Then::Directive(Box::new(self.directive(pair)))
        } else {
            Then::Target(self.name(&pair))
        }
    }

    /// One clause or a `{ clause* }` block; clauses accumulate as the keys
    /// of one YAML directive object do.
    fn directive(&mut self, pair: Pair<'_, Rule>) -> Directive {
        let mut directive = Directive { span: self.span(&pair), ..Directive::default() };
        let mut seen = Seen::default();
        for clause in pair.into_inner() {
            let span = self.span(&clause);
            match clause.as_rule() {
                Rule::goto if self.first_time(&mut seen, "goto", span, "directive") => {
                    directive.goto = self.goto(clause);
                }
                Rule::goto_step if self.first_time(&mut seen, "goto_step", span, "directive") => {
                    let mut names = self.names(clause);
                    let step = names.pop();
                    directive.goto_step = Some(GotoStep { flow: names.pop(), step, span });
                }
                Rule::complete if self.first_time(&mut seen, "complete", span, "directive") => {
                    let next = self.names(clause).pop();
                    directive.complete = Some(Complete { next, span });
                }
                Rule::abort if self.first_time(&mut seen, "abort", span, "directive") => {
                    let reason = self.template_value(clause);
                    directive.abort = Some(Abort { reason, span });
                }
                Rule::reset if self.first_time(&mut seen, "reset", span, "directive") => {
                    directive.reset = Some(Spanned::new(true, span));
                }
                Rule::halt if self.first_time(&mut seen, "halt", span, "directive") => {
                    directive.halt = Some(Spanned::new(true, span));
                }
                Rule::reply if self.first_time(&mut seen, "reply", span, "directive") => {
                    directive.reply = self.template_value(clause);
                }
                Rule::set_clause => {
                    let assignments = self.assignments(clause);
                    directive.set.extend(assignments);
                }
                Rule::set_context => {
                    let assignments = self.assignments(clause);
                    directive.set_context.extend(assignments);
                }
                Rule::append_prompt => {
                    for prompt in clause.into_inner().filter(|inner| inner.as_rule() == Rule::string) {
                        let template = self.template(prompt);
                        directive.append_prompt.push(template);
                    }
                }
                Rule::inject_tools => directive.inject_tools.extend(self.names(clause)),
                _ => {}
            }
        }
        directive
    }

    /// `goto F` or `goto F with { key: expr, … }`.
    fn goto(&mut self, pair: Pair<'_, Rule>) -> Option<Goto> {
        let span = self.span(&pair);
        let mut flow = None;
        let mut data = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name => flow = Some(self.name(&inner)),
                Rule::member => data.extend(self.assignment(inner)),
                _ => {}
            }
        }
        Some(Goto { flow, data, span })
    }
}

fn bare_type(name: Name, span: Span) -> TypeExpr {
    TypeExpr {
        name,
        description: None,
        min: None,
        max: None,
        pattern: None,
        values: None,
        examples: Vec::new(),
        items: None,
        fields: None,
        span,
    }
}

fn needs_http(clause: &str, span: Span) -> Diagnostic {
    Diagnostic::new(Code::Syntax, format!("`{clause}` needs an `http` request in the same tool"))
        .at(span, "no `http` to attach to")
        .with_help(format!("add `http METHOD \"url\"` to the tool, or remove the `{clause}`"))
}

fn integer_too_large(span: Span) -> Diagnostic {
    Diagnostic::new(Code::Syntax, "integer literal is too large")
        .at(span, "does not fit in 64 bits")
        .with_help("integers range from -9223372036854775808 to 9223372036854775807")
}

/// The offset of the first character at or after `offset` that is neither
/// white space nor inside a `#` comment.
fn skip_trivia(text: &str, offset: usize) -> usize {
    let mut position = offset;
    let bytes = text.as_bytes();
    while let Some(&byte) = bytes.get(position) {
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' => position += 1,
            b'#' => {
                while let Some(&skipped) = bytes.get(position) {
                    if skipped == b'\n' {
                        break;
                    }
                    position += 1;
                }
            }
            _ => break,
        }
    }
    position
}

/// The end of the last character in `text[from..to]` that is neither white
/// space nor part of a `#` comment, or `from` when there is none. The range
/// must hold no string literal.
fn last_token_end(text: &str, from: usize, to: usize) -> usize {
    let bytes = text.as_bytes();
    let mut position = from;
    let mut end = from;
    while position < to {
        match bytes.get(position) {
            Some(b' ' | b'\t' | b'\r' | b'\n') => position += 1,
            Some(b'#') => {
                while position < to && bytes.get(position) != Some(&b'\n') {
                    position += 1;
                }
            }
            Some(_) => {
                position += 1;
                end = position;
            }
            None => break,
        }
    }
    // Multi-byte characters are never trivia, so `end` only stops short of
    // a character boundary if `to` does; step forward to the boundary.
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// Rules pest matches as one token (`@` and `$` rules): their spans hold no
/// skipped trivia, and their white space and `#` are content.
fn is_atomic(rule: Rule) -> bool {
    is_keyword(rule)
        || matches!(
            rule,
            Rule::name
                | Rule::ident
                | Rule::int_lit
                | Rule::float_lit
                | Rule::number
                | Rule::duration
                | Rule::bool_lit
                | Rule::null_lit
                | Rule::string
                | Rule::dq_text
                | Rule::sq_text
                | Rule::escape
                | Rule::bare_text
                | Rule::text
                | Rule::plain_dq
                | Rule::plain_sq
                | Rule::quoted
                | Rule::path
                | Rule::or_op
                | Rule::and_op
                | Rule::not_op
                | Rule::cmp_op
                | Rule::limit_key
                | Rule::http_method
                | Rule::default_kw
                | Rule::auto_kw
                | Rule::else_kw
                | Rule::reset
                | Rule::halt
        )
}

/// Keyword pairs (`kw_*`) carry no value; the walk skips them.
fn is_keyword(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_agent
            | Rule::kw_schema
            | Rule::kw_context
            | Rule::kw_tool
            | Rule::kw_signal
            | Rule::kw_flow
            | Rule::kw_step
            | Rule::kw_identity
            | Rule::kw_rule
            | Rule::kw_limits
            | Rule::kw_pattern
            | Rule::kw_examples
            | Rule::kw_description
            | Rule::kw_http
            | Rule::kw_header
            | Rule::kw_body
            | Rule::kw_exec
            | Rule::kw_builtin
            | Rule::kw_timeout
            | Rule::kw_phase
            | Rule::kw_behavior
            | Rule::kw_extract
            | Rule::kw_then
            | Rule::kw_when
            | Rule::kw_if
            | Rule::kw_requires
            | Rule::kw_optional
            | Rule::kw_keep
            | Rule::kw_fresh
            | Rule::kw_on_enter
            | Rule::kw_on_complete
            | Rule::kw_complete
            | Rule::kw_next
            | Rule::kw_prompt
            | Rule::kw_say
            | Rule::kw_collect
            | Rule::kw_skip_if
            | Rule::kw_branch
            | Rule::kw_do
            | Rule::kw_prepare
            | Rule::kw_finalize
            | Rule::kw_tools
            | Rule::kw_max_asks
            | Rule::kw_on_no_answer
            | Rule::kw_on_error
            | Rule::kw_retry
            | Rule::kw_backoff
            | Rule::kw_wait
            | Rule::kw_set
            | Rule::kw_call
            | Rule::kw_emit
            | Rule::kw_for
            | Rule::kw_in
            | Rule::kw_where
            | Rule::kw_goto
            | Rule::kw_with
            | Rule::kw_goto_step
            | Rule::kw_abort
            | Rule::kw_reply
            | Rule::kw_set_context
            | Rule::kw_append_prompt
            | Rule::kw_inject_tools
            | Rule::kw_enum
            | Rule::kw_list
            | Rule::kw_object
            | Rule::kw_is
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_program_parses_the_same_in_pieces_as_whole() {
        let text = crate::testgen::large_program(400, 20);
        assert!(split_at_items(&text, 2).len() == 2, "the program is large enough to be cut");
        let file = SourceFile::new("big.flow", text.clone());
        let (in_pieces, piece_diagnostics) = parse(&file);
        let (whole, whole_diagnostics) = parse_items(&text, 0..text.len()).unwrap();
        assert_eq!(piece_diagnostics, whole_diagnostics);
        assert_eq!(serde_json::to_value(&in_pieces).unwrap(), serde_json::to_value(&whole).unwrap());
        assert_eq!(in_pieces.flows.len(), 400);
    }

    #[test]
    fn a_syntax_error_in_a_large_program_is_reported_as_in_a_small_one() {
        let mut text = crate::testgen::large_program(400, 20);
        let broken_at = text.rfind("prompt").unwrap();
        text.replace_range(broken_at..broken_at + 6, "promt");
        let (_, diagnostics) = parse(&SourceFile::new("big.flow", text.clone()));
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].code, Code::Syntax);
        assert_eq!(diagnostics[0].primary_span().map(|span| span.start as usize), Some(broken_at));
    }

    /// LANGUAGE.md section 10, with the schema of section 1.
    const BOOKING: &str = r#"
# The hotel concierge.
agent Concierge {
  identity "You are the concierge of the Grand Hotel group."
  rule "Never promise a room before the booking tool confirms it."
  limits { max_auto_steps 10  turn_timeout 60s }
}

schema {
  hotel: string "Name of the hotel" examples "Grand Hotel", "Overlook"
  date: date "Check-in date"
  guests: int 1..10
  confirmed: bool
  plan: enum(free, pro, enterprise)
  booking_id: string
}

tool book_hotel(hotel: string, date: date, guests: int) -> { booking_id: string } {
  description "Reserve a room and return its booking id."
  http POST "http://127.0.0.1:8080/bookings" timeout 10s
}

flow booking "Book a hotel room" {
  when "the user wants to book a hotel room"
  requires hotel, date, guests

  step ask_hotel {
    prompt "Which hotel would you like to book?"
    collect hotel
  }
  step ask_date {
    prompt "For which date?"
    collect date
  }
  step ask_guests {
    prompt "How many guests?"
    collect guests
    skip_if guests is set
  }
  step confirm {
    requires hotel, date, guests
    prompt "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"
    collect confirmed
    branch {
      if confirmed == true                      -> book
      when "the user wants to change the date" -> ask_date  "change date"
      else                                      -> cancelled
    }
  }
  auto step book {
    call book_hotel(hotel, date, guests) -> booking_id
    say "Booked! Your confirmation number is {{booking_id}}."
    next end
  }
  step cancelled { say "No problem, nothing was booked." }
}
"#;

    fn parse_text(source: &str) -> (Program, Vec<Diagnostic>) {
        parse(&SourceFile::new("test.flow", source))
    }

    /// Parses a program that must have no diagnostic.
    fn check(source: &str) -> Program {
        let (program, diagnostics) = parse_text(source);
        assert!(diagnostics.is_empty(), "unexpected diagnostics: {diagnostics:#?}");
        program
    }

    /// Parses a program that must have exactly one diagnostic.
    fn one_error(source: &str) -> Diagnostic {
        let (_, mut diagnostics) = parse_text(source);
        assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
        diagnostics.remove(0)
    }

    fn slice(source: &str, span: Span) -> &str {
        source.get(span.range()).unwrap_or("<not on a char boundary>")
    }

    fn names(names: &[Name]) -> Vec<&str> {
        names.iter().map(|name| name.value.as_str()).collect()
    }

    fn texts(texts: &[Text]) -> Vec<&str> {
        texts.iter().map(|text| text.value.as_str()).collect()
    }

    /// A template as text, with `{{…}}` around each interpolated expression's source.
    fn template(source: &str, template: &Template) -> String {
        template
            .parts
            .iter()
            .map(|part| match part {
                TemplatePart::Text(text) => text.clone(),
                TemplatePart::Expr(expr) => format!("{{{{{}}}}}", slice(source, expr.span)),
            })
            .collect()
    }

    fn only_flow(program: &Program) -> &FlowDecl {
        assert_eq!(program.flows.len(), 1);
        &program.flows[0]
    }

    fn only_step(program: &Program) -> &StepDecl {
        let flow = only_flow(program);
        assert_eq!(flow.steps.len(), 1);
        &flow.steps[0]
    }

    fn step_id(step: &StepDecl) -> &str {
        step.id.as_ref().map_or("", |id| id.value.as_str())
    }

    fn target_name(then: Option<&Then>) -> &str {
        match then {
            Some(Then::Target(name)) => &name.value,
            other => panic!("not a bare target: {other:?}"),
        }
    }

    fn directive(then: Option<&Then>) -> &Directive {
        match then {
            Some(Then::Directive(directive)) => directive,
            other => panic!("not a directive: {other:?}"),
        }
    }

    /// The directive of the single branch entry of a one-step program.
    fn branch_directive(program: &Program) -> &Directive {
        let branches = &only_step(program).branches.as_ref().expect("branches").value;
        directive(branches[0].then.as_ref())
    }

    fn in_step(body: &str) -> String {
        format!("flow f {{\n  step s {{\n    {body}\n  }}\n}}\n")
    }

    fn in_branch(entry: &str) -> String {
        in_step(&format!("branch {{ {entry} }}"))
    }

    // ------------------------------------------------------------ the booking program

    #[test]
    fn booking_program_parses_into_the_expected_ast() {
        let program = check(BOOKING);

        let agent = program.agent.as_ref().expect("agent");
        assert_eq!(agent.name.as_ref().map(|name| name.value.as_str()), Some("Concierge"));
        assert_eq!(agent.rules.len(), 1);
        assert_eq!(agent.limits.max_auto_steps.as_ref().map(|limit| limit.value), Some(10));
        assert_eq!(agent.limits.turn_timeout.as_ref().map(|limit| limit.value.as_str()), Some("60s"));

        let field_names: Vec<&str> = program.schema.iter().map(|field| field.name.value.as_str()).collect();
        assert_eq!(field_names, ["hotel", "date", "guests", "confirmed", "plan", "booking_id"]);
        let hotel = &program.schema[0].ty;
        assert_eq!(hotel.name.value, "string");
        assert_eq!(hotel.description.as_ref().map(|text| text.value.as_str()), Some("Name of the hotel"));
        assert_eq!(texts(&hotel.examples), ["Grand Hotel", "Overlook"]);
        let guests = &program.schema[2].ty;
        assert_eq!(guests.min.as_ref().map(|min| min.value), Some(Number::Int(1)));
        assert_eq!(guests.max.as_ref().map(|max| max.value), Some(Number::Int(10)));
        let plan = &program.schema[4].ty;
        assert_eq!(texts(&plan.values.as_ref().expect("values").value), ["free", "pro", "enterprise"]);

        let tool = &program.tools[0];
        assert_eq!(tool.name.value, "book_hotel");
        assert_eq!(
            names(&tool.params.iter().map(|param| param.name.clone()).collect::<Vec<_>>()),
            ["hotel", "date", "guests"]
        );
        assert_eq!(tool.returns.as_ref().map(|returns| returns.value.len()), Some(1));
        let [ToolImpl::Http(http)] = tool.implementations.as_slice() else {
            panic!("one http implementation: {:?}", tool.implementations)
        };
        assert_eq!(http.method.value, "POST");
        assert_eq!(template(BOOKING, &http.url), "http://127.0.0.1:8080/bookings");
        assert_eq!(http.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("10s"));

        let flow = only_flow(&program);
        assert_eq!(flow.name.value, "booking");
        assert_eq!(slice(BOOKING, flow.name.span), "booking");
        assert_eq!(flow.title.as_ref().map(|title| title.value.as_str()), Some("Book a hotel room"));
        assert_eq!(texts(&flow.when), ["the user wants to book a hotel room"]);
        assert_eq!(names(&flow.requires), ["hotel", "date", "guests"]);
        assert!(slice(BOOKING, flow.span).starts_with("flow booking"));
        assert!(slice(BOOKING, flow.span).ends_with("nothing was booked.\" }\n}"));

        let step_ids: Vec<&str> = flow.steps.iter().map(step_id).collect();
        assert_eq!(step_ids, ["ask_hotel", "ask_date", "ask_guests", "confirm", "book", "cancelled"]);
        let ask_hotel = &flow.steps[0];
        assert_eq!(ask_hotel.id.as_ref().map(|id| slice(BOOKING, id.span)), Some("ask_hotel"));
        assert_eq!(names(&ask_hotel.collect), ["hotel"]);
        assert!(ask_hotel.auto.is_none());
        assert!(slice(BOOKING, ask_hotel.span).starts_with("step ask_hotel {"));

        let skip_if = flow.steps[2].skip_if.as_ref().expect("skip_if");
        assert_eq!(slice(BOOKING, skip_if.span), "guests is set");

        let confirm = &flow.steps[3];
        assert_eq!(
            confirm.prompt.as_ref().map(|prompt| template(BOOKING, prompt)).as_deref(),
            Some("Shall I book {{hotel}} on {{date}} for {{guests}} guests?")
        );
        let branches = &confirm.branches.as_ref().expect("branches").value;
        assert_eq!(branches.len(), 3);
        assert_eq!(slice(BOOKING, branches[0].guard[0].span), "confirmed == true");
        assert_eq!(target_name(branches[0].then.as_ref()), "book");
        assert_eq!(texts(&branches[1].when), ["the user wants to change the date"]);
        assert_eq!(target_name(branches[1].then.as_ref()), "ask_date");
        assert_eq!(branches[1].label.as_ref().map(|label| label.value.as_str()), Some("change date"));
        assert!(branches[2].guard.is_empty() && branches[2].when.is_empty());
        let Some(Then::Target(cancelled)) = &branches[2].then else { panic!("else has a bare target") };
        assert_eq!(slice(BOOKING, cancelled.span), "cancelled");
        assert!(slice(BOOKING, branches[2].span).starts_with("else"));

        let book = &flow.steps[4];
        assert_eq!(book.auto.as_ref().map(|auto| (auto.value, slice(BOOKING, auto.span))), Some((true, "auto")));
        assert!(slice(BOOKING, book.span).starts_with("auto step book"));
        assert_eq!(book.next.as_ref().map(|next| next.value.as_str()), Some("end"));
        assert_eq!(
            book.say.as_ref().map(|say| template(BOOKING, say)).as_deref(),
            Some("Booked! Your confirmation number is {{booking_id}}.")
        );
        let [Action { kind: ActionKind::Call(call), .. }] = book.actions.as_slice() else {
            panic!("one call: {:?}", book.actions)
        };
        assert_eq!(call.tool.value, "book_hotel");
        assert_eq!(call.save.as_ref().map(|save| save.value.as_str()), Some("booking_id"));

        let cancelled_step = &flow.steps[5];
        assert_eq!(
            cancelled_step.say.as_ref().map(|say| template(BOOKING, say)).as_deref(),
            Some("No problem, nothing was booked.")
        );
    }

    /// The `.flow` twin of the YAML front end's every-key fixture: with spans
    /// set aside, both read into the same AST (checked against that front
    /// end; YAML's `halt: false` has no `.flow` spelling and was left out).
    const EVERY_KEY: &str = r#"agent Helpdesk {
  identity "You help {{ context.tier }} customers."
  rule "Be brief."
  limits { max_auto_steps 5 max_tool_rounds 3 max_turn_tokens 20000 turn_timeout 30s }
}
schema {
  email: string "Account email" pattern "^[^@]+@[^@]+$" examples "a@b.c"
  plan: enum(free, pro)
  count: int 0..99
  contacts: list(object { name: string, email: string })
  ok: bool
}
context {
  tier: enum(basic, gold)
}
tool lookup(email: string) -> { name: string } {
  description "Find a customer."
  http GET "https://example.com/customers?email={{email}}"
  header Accept "application/json"
  body [1, 2.5, true, null, "{{email}}", { nested: "x" }]
  timeout 5s
}
tool clock { builtin now }
tool script() { exec "./run.sh" timeout 1m }
signal human {
  when "the user wants a person", "the user is angry"
  if context.tier == "gold"
  phase both
  behavior once 10m
  extract email
  then goto handoff with { ok: false }
}
flow main "Main" {
  when "the user needs help"
  if context.tier is set
  default
  requires email
  optional plan
  rule "Stay polite."
  on_enter { say "Welcome." }
  on_complete { emit { append_prompt "Thank the user." inject_tools clock } }
  complete next handoff
  step ask {
    prompt "What is your email?"
    collect email
    skip_if email is set
    when "the user has an account"
    if count < 3
    max_asks 2
    on_no_answer { abort "no email" reply "Bye." }
    tools lookup
    on_enter { set count = count + 1 }
    prepare { emit append_prompt "Ask once." }
    finalize { emit set_context tier = "basic" }
    branch {
      if ok == true, count > 1 when "the user agrees" -> goto_step handoff.connect "agreed"
      -> work
    }
  }
  auto step work {
    on_error retry 2 backoff 1s
    wait 1h
    call lookup(email) -> contacts
    for c in contacts where c.email is set { say "Hi {{c.name}}" }
    emit { complete next handoff reset goto main goto_step ask }
    next end
  }
}
flow handoff {
  step connect { say "Connecting you now." }
}
"#;

    #[test]
    fn every_key_reads_clean() {
        let program = check(EVERY_KEY);
        assert_eq!(program.tools.len(), 3);
        assert_eq!(program.flows.len(), 2);
        let main = &program.flows[0];
        assert_eq!((main.on_enter.len(), main.on_complete.len()), (1, 1));
        let ask = &main.steps[0];
        assert_eq!(ask.max_asks.as_ref().map(|max| max.value), Some(2));
        assert!(
            ask.on_no_answer.as_ref().is_some_and(|directive| directive.abort.is_some() && directive.reply.is_some())
        );
        assert_eq!((ask.on_enter.len(), ask.prepare.len(), ask.finalize.len()), (1, 1, 1));
        let work = &main.steps[1];
        assert_eq!(work.wait.as_ref().map(|wait| wait.value.as_str()), Some("1h"));
        assert_eq!(work.actions.len(), 3);
        let ActionKind::Emit(emitted) = &work.actions[2].kind else { panic!("emit") };
        assert!(emitted.complete.is_some() && emitted.goto.is_some() && emitted.goto_step.is_some());
        assert!(emitted.reset.as_ref().is_some_and(|reset| reset.value));
        let signal = &program.signals[0];
        assert_eq!(
            (signal.behavior.as_ref().map(|b| b.value.as_str()), signal.cooldown.as_ref().map(|c| c.value.as_str())),
            (Some("once"), Some("10m"))
        );
    }

    // ------------------------------------------------------------ agent, schema, context

    #[test]
    fn agent_limits_take_numbers_and_a_duration() {
        let program = check(
            "agent A { identity \"I am {{ context.tier }}\" rule \"a\" rule \"b\"
               limits { max_auto_steps 3 max_tool_rounds 4 max_turn_tokens 20000 turn_timeout 90s } }",
        );
        let agent = program.agent.expect("agent");
        assert_eq!(agent.rules.len(), 2);
        assert!(matches!(agent.identity.as_ref().map(|identity| identity.parts.len()), Some(2)));
        assert_eq!(agent.limits.max_tool_rounds.map(|limit| limit.value), Some(4));
        assert_eq!(agent.limits.max_turn_tokens.map(|limit| limit.value), Some(20000));
        assert_eq!(agent.limits.turn_timeout.map(|limit| limit.value), Some("90s".to_string()));
    }

    #[test]
    fn a_count_limit_given_a_duration_is_refused() {
        let source = "agent A { limits { max_auto_steps 10s } }";
        let error = one_error(source);
        assert_eq!(error.code, Code::Syntax);
        assert_eq!(error.message, "`max_auto_steps` takes a whole number");
        assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("10s"));
    }

    #[test]
    fn type_options_fill_the_type() {
        let source = r#"schema {
            score: float -1.5..2.5 "A score"
            age: int 18..
            code: string pattern "^[A-Z]+$" examples "AB", 'CD'
            tags: list(string) ..5
            tier: enum(basic, "gold plus")
            contacts: list(object { name: string, email: string "Where to write" })
        }"#;
        let program = check(source);
        let [score, age, code, tags, tier, contacts] = program.schema.as_slice() else { panic!("six fields") };
        assert_eq!(score.ty.min.as_ref().map(|min| min.value), Some(Number::Float(-1.5)));
        assert_eq!(score.ty.max.as_ref().map(|max| max.value), Some(Number::Float(2.5)));
        assert_eq!(score.ty.description.as_ref().map(|text| text.value.as_str()), Some("A score"));
        assert_eq!(age.ty.min.as_ref().map(|min| min.value), Some(Number::Int(18)));
        assert!(age.ty.max.is_none());
        assert_eq!(code.ty.pattern.as_ref().map(|pattern| pattern.value.as_str()), Some("^[A-Z]+$"));
        assert_eq!(texts(&code.ty.examples), ["AB", "CD"]);
        assert!(tags.ty.min.is_none());
        assert_eq!(tags.ty.max.as_ref().map(|max| max.value), Some(Number::Int(5)));
        assert_eq!(tags.ty.name.value, "list");
        assert_eq!(tags.ty.items.as_ref().map(|items| items.name.value.as_str()), Some("string"));

        assert_eq!(tier.ty.name.value, "enum");
        assert_eq!(slice(source, tier.ty.name.span), "enum");
        let values = tier.ty.values.as_ref().expect("values");
        assert_eq!(texts(&values.value), ["basic", "gold plus"]);
        assert_eq!(slice(source, values.span), "(basic, \"gold plus\")");
        assert_eq!(slice(source, values.value[1].span), "\"gold plus\"");
        assert_eq!(slice(source, tier.span), "tier: enum(basic, \"gold plus\")");

        let object = contacts.ty.items.as_ref().expect("items");
        assert_eq!(object.name.value, "object");
        let fields = object.fields.as_ref().expect("fields");
        assert!(slice(source, fields.span).starts_with('{') && slice(source, fields.span).ends_with('}'));
        assert_eq!(fields.value.len(), 2);
        assert_eq!(fields.value[1].ty.description.as_ref().map(|text| text.value.as_str()), Some("Where to write"));
    }

    #[test]
    fn an_empty_enum_keeps_its_empty_values() {
        let program = check("schema { nothing: enum() }");
        assert_eq!(program.schema[0].ty.values.as_ref().map(|values| values.value.len()), Some(0));
    }

    #[test]
    fn context_and_several_schema_blocks_accumulate() {
        let program = check("schema { a: int } context { tier: enum(basic, gold) } schema { b: bool, c: date }");
        assert_eq!(program.schema.iter().map(|field| field.name.value.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(program.context.len(), 1);
        assert_eq!(program.context[0].name.value, "tier");
    }

    #[test]
    fn a_second_agent_is_a_duplicate() {
        let source = "agent A { } agent B { }";
        let error = one_error(source);
        assert_eq!(error.code, Code::DuplicateKey);
        assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("B"));
    }

    // ------------------------------------------------------------ tools

    #[test]
    fn http_tool_takes_headers_body_and_timeout_in_any_order() {
        let source = r#"tool notify(to: string, count: int) {
            header Authorization "Bearer {{ env.TOKEN }}"
            http POST "https://example.test/{{to}}"
            header "X-Trace" "flowc"
            body { to: "{{to}}", "n": [1, 2.5, -3], ok: true, none: null }
            timeout 5s
        }"#;
        let program = check(source);
        let tool = &program.tools[0];
        let [ToolImpl::Http(http)] = tool.implementations.as_slice() else { panic!("one http implementation") };
        let header_names: Vec<&str> = http.headers.iter().map(|(name, _)| name.value.as_str()).collect();
        assert_eq!(header_names, ["Authorization", "X-Trace"]);
        assert_eq!(template(source, &http.headers[0].1), "Bearer {{env.TOKEN}}");
        assert_eq!(template(source, &http.url), "https://example.test/{{to}}");
        assert_eq!(http.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("5s"));
        let Some(BodyValue::Object(members)) = &http.body else { panic!("an object body") };
        let keys: Vec<&str> = members.value.iter().map(|(key, _)| key.value.as_str()).collect();
        assert_eq!(keys, ["to", "n", "ok", "none"]);
        assert!(matches!(&members.value[0].1, BodyValue::String(value) if template(source, value) == "{{to}}"));
        let BodyValue::List(numbers) = &members.value[1].1 else { panic!("a list") };
        let numbers: Vec<Number> = numbers
            .value
            .iter()
            .filter_map(|item| match item {
                BodyValue::Number(number) => Some(number.value),
                _ => None,
            })
            .collect();
        assert_eq!(numbers, [Number::Int(1), Number::Float(2.5), Number::Int(-3)]);
        assert!(matches!(&members.value[2].1, BodyValue::Bool(flag) if flag.value));
        assert!(matches!(&members.value[3].1, BodyValue::Null(_)));
    }

    #[test]
    fn exec_and_builtin_tools_and_tools_without_params() {
        let source = r#"
            tool lookup(email: string) { exec "./tools/lookup.sh" "--json" timeout 3s }
            tool clock { builtin now }
            tool twice() { builtin uuid exec "x" }
        "#;
        let program = check(source);
        let [ToolImpl::Exec(exec)] = program.tools[0].implementations.as_slice() else { panic!("exec") };
        assert_eq!(texts(&exec.command), ["./tools/lookup.sh", "--json"]);
        assert_eq!(exec.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("3s"));
        let clock = &program.tools[1];
        assert!(clock.params.is_empty() && clock.returns.is_none());
        let [ToolImpl::Builtin { name, span }] = clock.implementations.as_slice() else { panic!("builtin") };
        assert_eq!(name.value, "now");
        assert_eq!(slice(source, *span), "builtin now");
        // Two implementations are kept for lowering to report `invalid_tool`.
        assert_eq!(program.tools[2].implementations.len(), 2);
    }

    #[test]
    fn returns_span_the_braces() {
        let source = "tool t(a: int) -> { b: int } { builtin echo }";
        let program = check(source);
        let returns = program.tools[0].returns.as_ref().expect("returns");
        assert_eq!(slice(source, returns.span), "{ b: int }");
    }

    #[test]
    fn header_or_body_without_http_is_refused() {
        let source = "tool t { exec \"x\" header Accept \"json\" }";
        let error = one_error(source);
        assert_eq!(error.code, Code::Syntax);
        assert_eq!(error.message, "`header` needs an `http` request in the same tool");
        assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("header Accept \"json\""));
        let (_, diagnostics) = parse_text("tool t { builtin now body { a: 1 } timeout 2s }");
        let messages: Vec<&str> = diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect();
        assert_eq!(
            messages,
            ["`body` needs an `http` request in the same tool", "`timeout` needs an `http` or `exec` tool"]
        );
    }

    // ------------------------------------------------------------ signals

    #[test]
    fn signal_clauses_fill_the_signal() {
        let source = r#"signal wants_human {
            when "the user asks for a human", "the user is angry"
            if context.tier == "gold", len(history) > 2
            phase both
            behavior cooldown 10m
            extract reason, urgency
            then { goto handoff  reply "One moment." }
        }"#;
        let program = check(source);
        let signal = &program.signals[0];
        assert_eq!(slice(source, signal.name.span), "wants_human");
        assert_eq!(signal.when.len(), 2);
        assert_eq!(signal.guard.len(), 2);
        assert_eq!(signal.phase.as_ref().map(|phase| phase.value.as_str()), Some("both"));
        assert_eq!(signal.behavior.as_ref().map(|behavior| behavior.value.as_str()), Some("cooldown"));
        assert_eq!(signal.cooldown.as_ref().map(|cooldown| cooldown.value.as_str()), Some("10m"));
        assert_eq!(names(&signal.extract), ["reason", "urgency"]);
        let then = directive(signal.then.as_ref());
        assert_eq!(
            then.goto.as_ref().and_then(|goto| goto.flow.as_ref()).map(|flow| flow.value.as_str()),
            Some("handoff")
        );
        assert!(then.reply.is_some());
        assert_eq!(slice(source, then.span), "{ goto handoff  reply \"One moment.\" }");
    }

    #[test]
    fn behavior_once_has_no_cooldown() {
        let program = check("signal s { when \"x\" behavior once then goto f }");
        assert_eq!(program.signals[0].behavior.as_ref().map(|behavior| behavior.value.as_str()), Some("once"));
        assert!(program.signals[0].cooldown.is_none());
    }

    // ------------------------------------------------------------ flows

    #[test]
    fn flow_clauses_fill_the_flow() {
        let source = r#"flow support {
            when "a", "b"
            if context.tier is set, true
            default
            requires email
            optional plan, phone
            rule "Keep answers short."
            on_enter { set plan = "free" }
            on_complete { emit complete }
            complete next survey
            step only { say "hi" }
        }"#;
        let program = check(source);
        let flow = only_flow(&program);
        assert!(flow.title.is_none());
        assert_eq!(texts(&flow.when), ["a", "b"]);
        assert_eq!(flow.guard.len(), 2);
        assert_eq!(
            flow.default.as_ref().map(|default| (default.value, slice(source, default.span))),
            Some((true, "default"))
        );
        assert_eq!(names(&flow.requires), ["email"]);
        assert_eq!(names(&flow.optional), ["plan", "phone"]);
        assert_eq!(flow.rules.len(), 1);
        assert!(matches!(flow.on_enter.as_slice(), [Action { kind: ActionKind::Set(_), .. }]));
        assert!(matches!(flow.on_complete.as_slice(), [Action { kind: ActionKind::Emit(_), .. }]));
        assert_eq!(flow.complete_next.as_ref().map(|next| slice(source, next.span)), Some("survey"));
    }

    // ------------------------------------------------------------ steps

    #[test]
    fn every_step_key_has_a_clause() {
        let source = r#"flow f { step s {
            prompt "Ask"
            collect a, b
            requires c
            skip_if a is set
            when "the user is ready"
            if b > 1, c
            next other
            prepare { say "p" }
            finalize { set a = 1 }
            on_enter { emit halt }
            tools lookup, book
            max_asks 2
            on_no_answer goto_step other
            on_error retry 3 backoff 2s
            wait 2d
        } }"#;
        let program = check(source);
        let step = only_step(&program);
        assert_eq!(step.prompt.as_ref().map(|prompt| template(source, prompt)).as_deref(), Some("Ask"));
        assert_eq!(names(&step.collect), ["a", "b"]);
        assert_eq!(names(&step.requires), ["c"]);
        assert!(step.skip_if.is_some());
        assert_eq!(texts(&step.when), ["the user is ready"]);
        assert_eq!(step.guard.iter().map(|guard| slice(source, guard.span)).collect::<Vec<_>>(), ["b > 1", "c"]);
        assert_eq!(step.next.as_ref().map(|next| next.value.as_str()), Some("other"));
        assert!(matches!(step.prepare.as_slice(), [Action { kind: ActionKind::Say(_), .. }]));
        assert!(matches!(step.finalize.as_slice(), [Action { kind: ActionKind::Set(_), .. }]));
        assert!(matches!(step.on_enter.as_slice(), [Action { kind: ActionKind::Emit(_), .. }]));
        assert_eq!(names(&step.tools), ["lookup", "book"]);
        assert_eq!(step.max_asks.as_ref().map(|max_asks| max_asks.value), Some(2));
        let on_no_answer = step.on_no_answer.as_ref().expect("on_no_answer");
        assert_eq!(
            on_no_answer
                .goto_step
                .as_ref()
                .and_then(|goto_step| goto_step.step.as_ref())
                .map(|step| step.value.as_str()),
            Some("other")
        );
        let Some(OnError::Retry { times, backoff, span }) = &step.on_error else { panic!("retry") };
        assert_eq!(times.value, 3);
        assert_eq!(backoff.as_ref().map(|backoff| backoff.value.as_str()), Some("2s"));
        assert_eq!(slice(source, *span), "retry 3 backoff 2s");
        assert_eq!(step.wait.as_ref().map(|wait| wait.value.as_str()), Some("2d"));
        assert!(step.auto.is_none() && step.branches.is_none() && step.actions.is_empty());
    }

    #[test]
    fn on_error_stop_and_continue() {
        let stop = check(&in_step("on_error stop"));
        assert!(matches!(only_step(&stop).on_error, Some(OnError::Stop(_))));
        let keep_going = check(&in_step("on_error continue"));
        assert!(matches!(only_step(&keep_going).on_error, Some(OnError::Continue(_))));
        let error = one_error(&in_step("on_error ignore"));
        assert_eq!(error.message, "unknown `on_error` policy `ignore`");
    }

    #[test]
    fn on_no_answer_refuses_a_bare_name() {
        let source = in_step("on_no_answer cancelled");
        let error = one_error(&source);
        assert_eq!(error.code, Code::Syntax);
        assert_eq!(error.primary_span().map(|span| slice(&source, span)), Some("cancelled"));
        assert!(error.help.as_deref().is_some_and(|help| help.contains("goto_step cancelled")));
    }

    #[test]
    fn max_asks_must_be_whole() {
        let error = one_error(&in_step("max_asks 1.5"));
        assert_eq!(error.message, "`max_asks` takes a whole number");
    }

    #[test]
    fn a_clause_given_twice_is_a_duplicate_key() {
        let source = in_step("prompt \"a\"\n    prompt \"b\"");
        let error = one_error(&source);
        assert_eq!(error.code, Code::DuplicateKey);
        assert_eq!(error.message, "`prompt` is given twice in this step");
        assert_eq!(error.primary_span().map(|span| slice(&source, span)), Some("prompt \"b\""));
        assert_eq!(error.labels.get(1).map(|label| slice(&source, label.span)), Some("prompt \"a\""));
    }

    #[test]
    fn body_actions_and_do_blocks_keep_source_order() {
        let source = in_step(
            r#"say "Step say"
            set a = 1
            do { say "Action say"  call t() }
            emit reset
            do { set b = 2 }
            for c in contacts { set n = n + 1 }"#,
        );
        let program = check(&source);
        let step = only_step(&program);
        assert_eq!(step.say.as_ref().map(|say| template(&source, say)).as_deref(), Some("Step say"));
        let kinds: Vec<&str> = step
            .actions
            .iter()
            .map(|action| match &action.kind {
                ActionKind::Set(_) => "set",
                ActionKind::Call(_) => "call",
                ActionKind::Emit(_) => "emit",
                ActionKind::Say(_) => "say",
                ActionKind::ForEach(_) => "for",
            })
            .collect();
        assert_eq!(kinds, ["set", "say", "call", "emit", "set", "for"]);
        assert_eq!(slice(&source, step.actions[0].span), "set a = 1");
        let ActionKind::Set(assignments) = &step.actions[0].kind else { panic!("set") };
        assert_eq!(assignments.len(), 1);
        assert_eq!(slice(&source, assignments[0].name.span), "a");
        assert_eq!(slice(&source, assignments[0].value.span), "1");
    }

    #[test]
    fn one_set_may_assign_several_fields() {
        let source = in_step("set a = 1, b = a + 1");
        let program = check(&source);
        let [Action { kind: ActionKind::Set(assignments), span }] = only_step(&program).actions.as_slice() else {
            panic!("one set action")
        };
        let fields: Vec<&str> = assignments.iter().map(|assignment| assignment.name.value.as_str()).collect();
        assert_eq!(fields, ["a", "b"]);
        assert_eq!(slice(&source, *span), "set a = 1, b = a + 1");
        assert_eq!(slice(&source, assignments[1].value.span), "a + 1");
    }

    #[test]
    fn auto_is_absent_unless_written() {
        let source = "flow f { auto step a { set x = 1 } step b { } }";
        let program = check(source);
        let flow = only_flow(&program);
        assert_eq!(flow.steps[0].auto.as_ref().map(|auto| slice(source, auto.span)), Some("auto"));
        assert!(flow.steps[1].auto.is_none());
    }

    #[test]
    fn an_empty_branch_block_is_kept_empty() {
        let program = check(&in_step("branch { }"));
        let branches = only_step(&program).branches.as_ref().expect("branches");
        assert!(branches.value.is_empty());
    }

    #[test]
    fn branch_entries_take_guards_whens_and_labels() {
        let source = in_branch(
            r#"if a == 1, b when "x", "y" -> first "both"
               -> second
               else -> { abort "why" } "give up""#,
        );
        let program = check(&source);
        let branches = &only_step(&program).branches.as_ref().expect("branches").value;
        assert_eq!(branches[0].guard.len(), 2);
        assert_eq!(texts(&branches[0].when), ["x", "y"]);
        assert_eq!(branches[0].label.as_ref().map(|label| label.value.as_str()), Some("both"));
        assert_eq!(slice(&source, branches[0].span), "if a == 1, b when \"x\", \"y\" -> first \"both\"");
        assert!(branches[1].guard.is_empty() && branches[1].when.is_empty());
        assert_eq!(target_name(branches[1].then.as_ref()), "second");
        let abort = directive(branches[2].then.as_ref()).abort.as_ref().expect("abort");
        assert_eq!(abort.reason.as_ref().map(|reason| template(&source, reason)).as_deref(), Some("why"));
        assert_eq!(branches[2].label.as_ref().map(|label| label.value.as_str()), Some("give up"));
    }

    // ------------------------------------------------------------ directives

    #[test]
    fn a_keyword_prefix_of_a_name_is_a_target() {
        let program = check(&in_branch("-> completed"));
        let branches = &only_step(&program).branches.as_ref().expect("branches").value;
        assert_eq!(target_name(branches[0].then.as_ref()), "completed");
        let program = check(&in_branch("-> halted -> resetting -> abortive -> goto_x"));
        let branches = &only_step(&program).branches.as_ref().expect("branches").value;
        let targets: Vec<&str> = branches.iter().map(|branch| target_name(branch.then.as_ref())).collect();
        assert_eq!(targets, ["halted", "resetting", "abortive", "goto_x"]);
        let program = check(&in_branch("-> complete"));
        assert!(branch_directive(&program).complete.is_some());
    }

    #[test]
    fn goto_with_data_and_goto_step_across_flows() {
        let source = in_branch("-> goto billing with { plan: \"pro\", seats: seats + 1 }");
        let program = check(&source);
        let goto = branch_directive(&program).goto.as_ref().expect("goto");
        assert_eq!(goto.flow.as_ref().map(|flow| slice(&source, flow.span)), Some("billing"));
        assert_eq!(names(&goto.data.iter().map(|data| data.name.clone()).collect::<Vec<_>>()), ["plan", "seats"]);
        assert_eq!(slice(&source, goto.data[1].value.span), "seats + 1");

        let program = check(&in_branch("-> goto_step billing.ask_card"));
        let goto_step = branch_directive(&program).goto_step.as_ref().expect("goto_step");
        assert_eq!(goto_step.flow.as_ref().map(|flow| flow.value.as_str()), Some("billing"));
        assert_eq!(goto_step.step.as_ref().map(|step| step.value.as_str()), Some("ask_card"));
        let program = check(&in_branch("-> goto_step ask_card"));
        let goto_step = branch_directive(&program).goto_step.as_ref().expect("goto_step");
        assert!(goto_step.flow.is_none());
        assert_eq!(goto_step.step.as_ref().map(|step| step.value.as_str()), Some("ask_card"));
    }

    #[test]
    fn clause_block_accumulates_every_key() {
        let source = in_branch(
            r#"-> {
                complete next survey
                reset
                reply "Done {{name}}"
                set a = 1
                set b = a, c = b
                set_context tier = "gold"
                append_prompt "Be brief."
                append_prompt "Be kind.", "Be {{ mood }}."
                inject_tools lookup, book
                halt
            }"#,
        );
        let program = check(&source);
        let directive = branch_directive(&program);
        assert_eq!(
            directive.complete.as_ref().and_then(|complete| complete.next.as_ref()).map(|next| next.value.as_str()),
            Some("survey")
        );
        assert_eq!(directive.reset.as_ref().map(|reset| reset.value), Some(true));
        assert_eq!(directive.halt.as_ref().map(|halt| slice(&source, halt.span)), Some("halt"));
        assert_eq!(directive.reply.as_ref().map(|reply| template(&source, reply)).as_deref(), Some("Done {{name}}"));
        assert_eq!(names(&directive.set.iter().map(|set| set.name.clone()).collect::<Vec<_>>()), ["a", "b", "c"]);
        assert_eq!(directive.set_context.len(), 1);
        assert_eq!(directive.append_prompt.len(), 3);
        assert_eq!(names(&directive.inject_tools), ["lookup", "book"]);
        assert!(slice(&source, directive.span).starts_with('{') && slice(&source, directive.span).ends_with('}'));
    }

    #[test]
    fn single_clauses_are_directives_spanning_the_clause() {
        let source = in_branch("-> abort -> complete -> reply \"ok\" -> set_context k = 1");
        let program = check(&source);
        let branches = &only_step(&program).branches.as_ref().expect("branches").value;
        let abort = directive(branches[0].then.as_ref());
        assert!(abort.abort.as_ref().is_some_and(|abort| abort.reason.is_none()));
        assert_eq!(slice(&source, abort.span), "abort");
        let complete = directive(branches[1].then.as_ref());
        assert!(complete.complete.as_ref().is_some_and(|complete| complete.next.is_none()));
        assert_eq!(slice(&source, directive(branches[2].then.as_ref()).span), "reply \"ok\"");
        assert_eq!(slice(&source, directive(branches[3].then.as_ref()).span), "set_context k = 1");
    }

    #[test]
    fn two_position_clauses_are_kept_but_a_repeated_one_is_a_duplicate() {
        let program = check(&in_branch("-> { goto a goto_step b }"));
        let directive = branch_directive(&program);
        assert!(directive.goto.is_some() && directive.goto_step.is_some());
        let error = one_error(&in_branch("-> { goto a goto b }"));
        assert_eq!(error.message, "`goto` is given twice in this directive");
    }

    #[test]
    fn spans_stop_before_trailing_space_and_comments() {
        let source = in_branch(
            "if (a == 1) and not b   # why\n   -> complete   # the reason\n  \"label\"\n -> { halt }  # done\n",
        );
        let program = check(&source);
        let branches = &only_step(&program).branches.as_ref().expect("branches").value;
        assert_eq!(slice(&source, branches[0].guard[0].span), "a == 1) and not b");
        let ExprKind::Binary { right, .. } = &branches[0].guard[0].kind else { panic!("and") };
        assert_eq!(slice(&source, right.span), "not b");
        assert_eq!(slice(&source, directive(branches[0].then.as_ref()).span), "complete");
        assert!(slice(&source, branches[0].span).ends_with("\"label\""));
        assert_eq!(slice(&source, branches[1].span), "-> { halt }");
        let program = check("flow f { step s { skip_if x is not set   # note\n } }");
        let skip_if = only_step(&program).skip_if.as_ref().expect("skip_if");
        assert_eq!(skip_if.span, Span::new(26, 38));
    }

    // ------------------------------------------------------------ actions

    #[test]
    fn call_arguments_bare_or_named() {
        let source = in_step("call book(hotel, guests: guests + 1) -> booking_id");
        let program = check(&source);
        let step = only_step(&program);
        let [Action { kind: ActionKind::Call(call), span }] = step.actions.as_slice() else { panic!("one call") };
        assert_eq!(slice(&source, *span), "call book(hotel, guests: guests + 1) -> booking_id");
        assert_eq!(call.span, *span);
        let hotel = &call.args[0];
        assert_eq!(slice(&source, hotel.name.span), "hotel");
        assert_eq!(hotel.value.span, hotel.name.span);
        let ExprKind::Path { segments } = &hotel.value.kind else { panic!("a bare argument is a path") };
        assert_eq!(names(segments), ["hotel"]);
        assert_eq!(slice(&source, call.args[1].value.span), "guests + 1");
        assert_eq!(call.save.as_ref().map(|save| slice(&source, save.span)), Some("booking_id"));
        let program = check(&in_step("call ping()"));
        let [Action { kind: ActionKind::Call(call), .. }] = only_step(&program).actions.as_slice() else {
            panic!("one call")
        };
        assert!(call.args.is_empty() && call.save.is_none());
    }

    #[test]
    fn for_each_with_a_filter_and_nested_actions() {
        let source = in_step(
            r#"do {
                for c in contacts where c.email is set {
                    call notify(to: c.email)
                    for t in c.tags { say "{{ t }}" }
                }
            }"#,
        );
        let program = check(&source);
        let [Action { kind: ActionKind::ForEach(for_each), .. }] = only_step(&program).actions.as_slice() else {
            panic!("one for")
        };
        assert_eq!(slice(&source, for_each.binding.span), "c");
        assert_eq!(slice(&source, for_each.items.span), "contacts");
        assert_eq!(for_each.filter.as_ref().map(|filter| slice(&source, filter.span)), Some("c.email is set"));
        assert_eq!(for_each.actions.len(), 2);
        assert!(matches!(&for_each.actions[1].kind, ActionKind::ForEach(inner) if inner.filter.is_none()));
    }

    #[test]
    fn emit_takes_a_clause_or_a_block() {
        let source = in_step("do { emit goto billing emit { append_prompt \"x\" halt } }");
        let program = check(&source);
        let actions = &only_step(&program).actions;
        let kinds: Vec<(bool, bool)> = actions
            .iter()
            .map(|action| match &action.kind {
                ActionKind::Emit(directive) => (directive.goto.is_some(), directive.halt.is_some()),
                _ => (false, false),
            })
            .collect();
        assert_eq!(kinds, [(true, false), (false, true)]);
        assert_eq!(slice(&source, actions[0].span), "emit goto billing");
    }

    // ------------------------------------------------------------ lexical

    #[test]
    fn comments_and_escapes() {
        let source = "# leading\nflow f { # after a brace\n step s { say \"a \\\"quoted\\\" \\{{ not }}\" } }";
        let program = check(source);
        let say = only_step(&program).say.as_ref().expect("say");
        assert_eq!(template(source, say), "a \"quoted\" {{ not }}");
    }

    #[test]
    fn a_template_error_points_inside_the_string() {
        let source = in_step("say \"Hi {{ name == }}\"");
        let error = one_error(&source);
        assert_eq!(error.code, Code::Syntax);
        assert_eq!(error.message, "expected an expression, found `}`");
    }

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
                "expected an action (`set`, `call`, `emit`, `for`, `say`) or `}`, found `sat`",
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

    /// Runs `work` on a thread with a main thread's stack. In debug builds
    /// the expression builder needs about 40 KiB of stack per bracket level,
    /// more than a 2 MiB test thread holds at the nesting limit.
    fn with_main_thread_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .stack_size(8 << 20)
                .spawn_scoped(scope, work)
                .expect("spawn a parser thread");
            match handle.join() {
                Ok(value) => value,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    #[test]
    fn nesting_up_to_the_limit_parses() {
        let depth = MAX_EXPR_DEPTH - 4;
        let source = format!("flow f {{ step s {{ if {}1{} }} }}", "(".repeat(depth), ")".repeat(depth));
        with_main_thread_stack(|| check(&source));
    }

    // ------------------------------------------------------------ robustness

    mod properties {
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
                    prop::sample::select(vec![
                        "{", "}", "\"", "'", "->", "#", "{{", "}}", "(", ")", ",", "\\", " ", "é"
                    ])
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
    }
}
