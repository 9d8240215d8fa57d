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
pub(super) fn describe_expected(tokens: &[String], deepest: &[Rule]) -> Option<String> {
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
        take(&mut literals, crate::syntax::ast::DIRECTIVE_KEYS, description.to_string(), &mut parts);
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
