//! Names what pest expected in words: "a step clause (`prompt`, …) or `}`"
//! instead of the twenty keywords and character ranges it lists.

use crate::syntax::grammar::Rule;

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
    "append",
    "call",
    "emit",
    "for",
    "ask_model",
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
    "schedule",
    "auto",
    "step",
];
const ACTIONS: &[&str] = &["set", "append", "call", "emit", "for", "ask_model", "say"];
const EXPRESSION_STARTS: &[&str] = &["\"", "'", "(", "[", "-", "_", "true", "false", "null", "not"];
const OPERATORS: &[&str] = &["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or", "in", "not", "is"];

/// "a step clause (`prompt`, …) or `}`" from the tokens pest expected.
///
/// `tokens` are pest's expected tokens as text: literals as written, and
/// character ranges as `a..z`. `deepest` are the rules that failed there.
pub(super) fn describe_expected(tokens: &[String], deepest: &[Rule]) -> Option<String> {
    let mut expected = Expected::sort(tokens);
    if let Some(description) = describe_rule(deepest, expected.inside_token) {
        return Some(description.to_string());
    }
    let mut parts: Vec<String> = Vec::new();
    expected.describe_groups(&mut parts);
    let quotes = expected.has("\"") || expected.has("'");
    if quotes && expected.inside_token {
        // Only the string's own characters could follow: it was never closed.
        return Some("the closing quote of the string".to_string());
    }
    if quotes {
        expected.take(&["\"", "'"], "a quoted string", &mut parts);
    }
    if expected.letters {
        parts.push("a name".to_string());
    }
    if expected.digits {
        parts.push("a number".to_string());
    }
    parts.extend(expected.literals.iter().map(|literal| format!("`{literal}`")));
    join_with_or(parts)
}

/// What to say when the failure is inside a rule whose alternatives would
/// read badly as a list of tokens.
fn describe_rule(deepest: &[Rule], inside_token: bool) -> Option<&'static str> {
    if deepest.contains(&Rule::duration) {
        return Some(if inside_token {
            "a duration unit (`ms`, `s`, `m`, `h` or `d`)"
        } else {
            "a duration (`500ms`, `30s`, `10m`, `2h`, `1d`)"
        });
    }
    if deepest.contains(&Rule::http_method) {
        return Some("an HTTP method in capitals (`GET`, `POST`, …)");
    }
    None
}

/// pest's expected tokens sorted by kind, the literals shrinking as groups
/// of them are described.
struct Expected {
    /// Literal tokens not yet described.
    literals: Vec<String>,
    /// A letter or `_` could follow: a name.
    letters: bool,
    /// A digit could follow: a number.
    digits: bool,
    /// No white space could follow, so the parse stopped inside a token.
    inside_token: bool,
}

impl Expected {
    fn sort(tokens: &[String]) -> Self {
        let mut expected = Expected { literals: Vec::new(), letters: false, digits: false, inside_token: true };
        for token in tokens {
            let is_range = token.chars().count() == 4 && token.get(1..3) == Some("..");
            match token.as_str() {
                " " | "\t" | "\r" | "\n" => expected.inside_token = false,
                "#" | "BUILTIN_RULE" => {}
                "_" => expected.letters = true,
                _ if is_range && token.starts_with(|first: char| first.is_ascii_digit()) => expected.digits = true,
                _ if is_range => expected.letters = true,
                _ => expected.literals.push(token.clone()),
            }
        }
        expected
    }

    fn has(&self, token: &str) -> bool {
        self.literals.iter().any(|literal| literal == token)
    }

    /// Replaces the literals of `group` with one `description` in `parts`.
    fn take(&mut self, group: &[&str], description: &str, parts: &mut Vec<String>) {
        self.literals.retain(|literal| !group.contains(&literal.as_str()));
        parts.push(description.to_string());
    }

    /// Names each construct whose keywords were expected, instead of
    /// listing them. A keyword that starts a group is tested together with
    /// one only that group has, as several groups share keywords.
    fn describe_groups(&mut self, parts: &mut Vec<String>) {
        if self.has("goto_step") {
            let description = if self.letters {
                self.letters = false;
                "a step or flow name, or a directive (`goto F`, `goto_step S`, `complete`, `abort`, `reply \"…\"`, …)"
            } else {
                "a directive clause (`goto`, `goto_step`, `complete`, `abort`, `reset`, `reply`, `set`, …)"
            };
            self.take(crate::syntax::ast::DIRECTIVE_KEYS, description, parts);
            self.literals.retain(|literal| literal != "{");
        }
        if self.has("agent") && self.has("schema") {
            self.take(PROGRAM_ITEMS, "`agent`, `schema`, `context`, `tool`, `signal` or `flow`", parts);
        }
        if self.has("prompt") && self.has("collect") {
            let description = "a step clause (`prompt`, `say`, `collect`, `requires`, `next`, `branch`, `do`, …)";
            self.take(STEP_CLAUSES, description, parts);
        }
        if self.has("on_complete") && self.has("step") {
            let description = "a `step` or a flow clause (`when`, `if`, `requires`, `rule`, `on_enter`, …)";
            self.take(FLOW_CLAUSES, description, parts);
        }
        if self.has("call") && self.has("emit") {
            self.take(ACTIONS, "an action (`set`, `append`, `call`, `emit`, `for`, `ask_model`, `say`)", parts);
        }
        if self.has("enum") && self.has("object") {
            self.letters = false;
            let description =
                "a type (`string`, `int`, `float`, `bool`, `date`, `datetime`, `enum(…)`, `list(…)`, `object {…}`)";
            self.take(&["enum", "list", "object"], description, parts);
        }
        if self.has("null") && self.has("true") {
            self.letters = false;
            self.digits = false;
            self.take(EXPRESSION_STARTS, "an expression", parts);
        }
        if self.has("==") || self.has("+") {
            self.take(OPERATORS, "an operator", parts);
        }
    }
}

/// "a, b or c".
fn join_with_or(mut parts: Vec<String>) -> Option<String> {
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => {
            let last = parts.pop().unwrap_or_default();
            Some(format!("{} or {last}", parts.join(", ")))
        }
    }
}
