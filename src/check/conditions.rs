//! What the checker can tell about a condition without running it:
//!
//! - [`fold`]: its value when it depends on no data (`1 > 2`, `"a" in []`),
//!   so an `if` that is always false is found;
//! - [`key`]: a canonical spelling, so two entries with the same condition
//!   written differently (`x == 1` and `1 == x`) are recognised;
//! - [`facts`]: the fields it proves set when it holds (or fails): a read
//!   guarded by `x is set` is not a maybe-unset read;
//! - [`coverage`]: the values of one bool or enum field for which it holds,
//!   so a branch table that covers them all is seen to be exhaustive.
//!
//! Expressions nest at most [`crate::syntax::expr::MAX_EXPR_DEPTH`] deep (the
//! front ends refuse deeper ones), so these walks recurse; [`MAX_DEPTH`]
//! guards them anyway, answering "unknown" past it.

use crate::expr::{Expr, ExprKind, Function, Literal};
use crate::ir::{FieldId, Program, TypeKind};
use crate::syntax::ast::{BinaryOp, UnaryOp};
use serde_json::Value;
use std::collections::BTreeSet;

/// Past this depth every analysis here gives up (answers "unknown").
const MAX_DEPTH: usize = 256;

// ---------------------------------------------------------------- folding

// Folding is shared with lowering, which refuses a constant write that
// breaks a field's range (`set guests = -5`): it lives in `ir::fold`.
pub(crate) use crate::ir::fold::{fold, fold_bool};

// ---------------------------------------------------------------- keys

/// The conjuncts of a condition: `a and (b and c)` is `[a, b, c]`.
pub(crate) fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![expr];
    while let Some(expr) = stack.pop() {
        match &expr.kind {
            ExprKind::Binary { op: BinaryOp::And, left, right } => {
                stack.push(right);
                stack.push(left);
            }
            _ => out.push(expr),
        }
    }
    out
}

/// A canonical spelling of an expression: equal keys mean the expressions
/// always have the same value. Spans are ignored; `==`, `!=`, `and` and `or`
/// order their operands, and `<`/`<=` are turned around into `>`/`>=`.
/// `None` for an expression with an error (it equals nothing).
pub(crate) fn key(expr: &Expr) -> Option<String> {
    let mut out = String::new();
    write_key(expr, &mut out, 0).then_some(out)
}

fn write_key(expr: &Expr, out: &mut String, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let depth = depth + 1;
    match &expr.kind {
        ExprKind::Literal { value } => {
            // Numbers by value, so `1` and `1.0` agree.
            match value {
                Literal::Number(number) => out.push_str(&format!("n{}", number.as_f64().unwrap_or(f64::NAN))),
                other => {
                    out.push('l');
                    out.push_str(&other.to_value().to_string());
                }
            }
            true
        }
        ExprKind::List { items } => {
            out.push('[');
            for item in items {
                if !write_key(item, out, depth) {
                    return false;
                }
                out.push(',');
            }
            out.push(']');
            true
        }
        ExprKind::Field { field } => {
            out.push_str(&format!("f{}", field.0));
            true
        }
        ExprKind::Context { key } => {
            out.push_str(&format!("c{}", key.0));
            true
        }
        ExprKind::Local { slot, .. } => {
            out.push_str(&format!("v{slot}"));
            true
        }
        ExprKind::Env { name } => {
            out.push_str(&format!("e{name};"));
            true
        }
        ExprKind::StepOutput { step, .. } => {
            out.push_str(&format!("s{};", step.0));
            true
        }
        ExprKind::Member { object, member } => {
            out.push('m');
            if !write_key(object, out, depth) {
                return false;
            }
            out.push_str(&format!(".{member};"));
            true
        }
        ExprKind::Unary { op, operand } => {
            out.push_str(match op {
                UnaryOp::Not => "!(",
                UnaryOp::Neg => "-(",
            });
            let ok = write_key(operand, out, depth);
            out.push(')');
            ok
        }
        ExprKind::IsSet { operand, negated } => {
            out.push_str(if *negated { "unset(" } else { "set(" });
            let ok = write_key(operand, out, depth);
            out.push(')');
            ok
        }
        ExprKind::Binary { op, left, right } => {
            let mut left_key = String::new();
            let mut right_key = String::new();
            if !write_key(left, &mut left_key, depth) || !write_key(right, &mut right_key, depth) {
                return false;
            }
            let commutative = matches!(op, BinaryOp::Eq | BinaryOp::Ne | BinaryOp::And | BinaryOp::Or);
            if commutative && right_key < left_key {
                std::mem::swap(&mut left_key, &mut right_key);
            }
            // `a < b` is `b > a`: orderings are spelled with `>` and `>=`.
            let op = match op {
                BinaryOp::Lt => {
                    std::mem::swap(&mut left_key, &mut right_key);
                    BinaryOp::Gt
                }
                BinaryOp::Le => {
                    std::mem::swap(&mut left_key, &mut right_key);
                    BinaryOp::Ge
                }
                other => *other,
            };
            out.push('(');
            out.push_str(&left_key);
            out.push(' ');
            out.push_str(op.as_str());
            out.push(' ');
            out.push_str(&right_key);
            out.push(')');
            true
        }
        ExprKind::Call { function, args } => {
            out.push_str(function.name());
            out.push('(');
            for arg in args {
                if !write_key(arg, out, depth) {
                    return false;
                }
                out.push(',');
            }
            out.push(')');
            true
        }
        ExprKind::Error => false,
    }
}

/// A `when` description in a canonical form: case and spacing do not make
/// two questions to the model different.
pub(crate) fn when_key(text: &str) -> String {
    text.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------- facts

/// The fields a condition proves set when it evaluates to `truth`. An unset
/// field is null, and null fails every ordering, every comparison with a
/// non-null value and every `in` a list without null; so `guests > 2`
/// holding proves `guests` set.
pub(crate) fn facts(expr: &Expr, truth: bool, out: &mut Vec<FieldId>) {
    facts_at(expr, truth, out, 0);
}

fn facts_at(expr: &Expr, truth: bool, out: &mut Vec<FieldId>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let depth = depth + 1;
    match &expr.kind {
        ExprKind::Field { field } if truth => out.push(*field),
        ExprKind::IsSet { operand, negated } => {
            if truth != *negated
                && let Some(field) = read_field(operand)
            {
                out.push(field);
            }
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => facts_at(operand, !truth, out, depth),
        ExprKind::Binary { op, left, right } => match (op, truth) {
            (BinaryOp::And, true) | (BinaryOp::Or, false) => {
                facts_at(left, truth, out, depth);
                facts_at(right, truth, out, depth);
            }
            (BinaryOp::And, false) | (BinaryOp::Or, true) => {
                let mut left_facts = Vec::new();
                let mut right_facts = Vec::new();
                facts_at(left, truth, &mut left_facts, depth);
                facts_at(right, truth, &mut right_facts, depth);
                out.extend(left_facts.into_iter().filter(|field| right_facts.contains(field)));
            }
            (BinaryOp::Eq, _) | (BinaryOp::Ne, _) => {
                // `x == c` holding, or `x != c` failing, means x equals c.
                let equal = (*op == BinaryOp::Eq) == truth;
                for (place, other) in [(left, right), (right, left)] {
                    let Some(field) = read_field(place) else {
                        continue;
                    };
                    match fold(other) {
                        Some(Value::Null) if !equal => out.push(field),
                        Some(value) if equal && !value.is_null() => out.push(field),
                        _ => {}
                    }
                }
            }
            (BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge, true) => {
                out.extend(read_field(left));
                out.extend(read_field(right));
            }
            (BinaryOp::In, true) | (BinaryOp::NotIn, false) => {
                let null_free = matches!(fold(right), Some(Value::Array(items)) if !items.iter().any(Value::is_null));
                if null_free {
                    out.extend(read_field(left));
                }
            }
            _ => {}
        },
        ExprKind::Call { function: Function::Contains, args } if truth => {
            out.extend(args.first().and_then(read_field));
        }
        _ => {}
    }
}

/// The field an expression is, when it is a bare field.
fn read_field(expr: &Expr) -> Option<FieldId> {
    match &expr.kind {
        ExprKind::Field { field } => Some(*field),
        _ => None,
    }
}

// ---------------------------------------------------------------- coverage

/// A set of values of a bool (`"true"`, `"false"`) or enum field.
pub(crate) type Values = BTreeSet<String>;

/// Every value a bool or enum field can hold when set; `None` for other types.
pub(crate) fn domain(program: &Program, field: FieldId) -> Option<Values> {
    match &program.field(field)?.ty.kind {
        TypeKind::Bool => Some(["true", "false"].into_iter().map(String::from).collect()),
        TypeKind::Enum { values } => Some(values.iter().cloned().collect()),
        _ => None,
    }
}

/// For a condition on one bool or enum field, the field and the values for
/// which the condition holds when the field is set. `None` when the
/// condition is not of that shape (two fields, a non-literal…).
pub(crate) fn coverage(program: &Program, expr: &Expr) -> Option<(FieldId, Values)> {
    coverage_at(program, expr, 0)
}

fn coverage_at(program: &Program, expr: &Expr, depth: usize) -> Option<(FieldId, Values)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let depth = depth + 1;
    match &expr.kind {
        ExprKind::Field { field } => {
            let domain = domain(program, *field)?;
            domain.contains("true").then(|| (*field, ["true".to_string()].into_iter().collect()))
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => {
            let (field, values) = coverage_at(program, operand, depth)?;
            let domain = domain(program, field)?;
            Some((field, domain.difference(&values).cloned().collect()))
        }
        ExprKind::IsSet { operand, negated } => {
            let field = read_field(operand)?;
            let domain = domain(program, field)?;
            Some((field, if *negated { Values::new() } else { domain }))
        }
        ExprKind::Binary { op, left, right } => match op {
            BinaryOp::Or | BinaryOp::And => {
                let (left_field, left_values) = coverage_at(program, left, depth)?;
                let (right_field, right_values) = coverage_at(program, right, depth)?;
                if left_field != right_field {
                    return None;
                }
                let values = if *op == BinaryOp::Or {
                    left_values.union(&right_values).cloned().collect()
                } else {
                    left_values.intersection(&right_values).cloned().collect()
                };
                Some((left_field, values))
            }
            BinaryOp::Eq | BinaryOp::Ne => {
                let (field, value) = match (read_field(left), read_field(right)) {
                    (Some(field), None) => (field, fold(right)?),
                    (None, Some(field)) => (field, fold(left)?),
                    _ => return None,
                };
                let domain = domain(program, field)?;
                let value = value_name(&value)?;
                let equal: Values = domain.iter().filter(|candidate| **candidate == value).cloned().collect();
                if *op == BinaryOp::Eq {
                    Some((field, equal))
                } else {
                    Some((field, domain.difference(&equal).cloned().collect()))
                }
            }
            BinaryOp::In | BinaryOp::NotIn => {
                let field = read_field(left)?;
                let Value::Array(items) = fold(right)? else {
                    return None;
                };
                let domain = domain(program, field)?;
                let listed: Values =
                    items.iter().filter_map(value_name).filter(|value| domain.contains(value)).collect();
                if *op == BinaryOp::In {
                    Some((field, listed))
                } else {
                    Some((field, domain.difference(&listed).cloned().collect()))
                }
            }
            _ => None,
        },
        _ => None,
    }
}

fn value_name(value: &Value) -> Option<String> {
    match value {
        Value::Bool(value) => Some(value.to_string()),
        Value::String(text) => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Program;

    /// The program and the typed condition `text` (a branch `if` over a
    /// small schema).
    fn condition(text: &str) -> (Program, Expr) {
        let source = format!(
            "schema {{ n: int  ok: bool  plan: enum(free, pro, team)  s: string }}\n\
             flow f {{ when \"w\"  step a {{ branch {{ if {text} -> a }} }} }}"
        );
        let file = crate::source::SourceFile::new("test.flow", source);
        let compilation = crate::pipeline::compile(&file);
        let expr = compilation
            .ir
            .flows
            .first()
            .and_then(|flow| flow.steps.first())
            .and_then(|step| step.branches.first())
            .and_then(|branch| branch.guard.first())
            .cloned()
            .unwrap_or_else(|| panic!("no condition in {text}"));
        (compilation.ir, expr)
    }

    fn folded(text: &str) -> Option<bool> {
        fold_bool(&condition(text).1)
    }

    #[test]
    fn constant_conditions_fold() {
        assert_eq!(folded("1 > 2"), Some(false));
        assert_eq!(folded("\"a\" in [\"a\", \"b\"]"), Some(true));
        assert_eq!(folded("not (1 + 1 == 2)"), Some(false));
        assert_eq!(folded("n > 1 and false"), Some(false));
        assert_eq!(folded("true or n > 1"), Some(true));
        assert_eq!(folded("null < 1"), Some(false));
        assert_eq!(folded("null is set"), Some(false));
        assert_eq!(folded("len(\"abc\") == 3"), Some(true));
        assert_eq!(folded("contains(\"abc\", \"d\")"), Some(false));
        assert_eq!(folded("1 == 1.0"), Some(true));
    }

    /// Constant expressions need no data; reading any is a bug in the test.
    struct NoData;

    impl crate::expr::eval::Bindings for NoData {
        fn field(&self, _: FieldId) -> Value {
            unreachable!("a constant condition reads no field")
        }
        fn context(&self, _: crate::ir::ContextId) -> Value {
            unreachable!("a constant condition reads no context")
        }
        fn local(&self, _: u32) -> Value {
            unreachable!("a constant condition reads no local")
        }
        fn env(&self, _: &str) -> Option<String> {
            None
        }
        fn now(&self) -> chrono::DateTime<chrono::Utc> {
            chrono::DateTime::UNIX_EPOCH
        }
    }

    /// The checker calls a branch dead only when the runtime would find its
    /// condition false: the fold and the evaluator share one meaning of
    /// each operator. Before they did, `[1] == [1.0]` folded false (the
    /// runtime says true) and `7 / 2 == 3` did not fold at all.
    #[test]
    fn constant_conditions_fold_to_what_the_runtime_computes() {
        let cases = [
            ("[1] == [1.0]", Some(true)),
            ("7 / 2 == 3", Some(true)),
            ("-7 % 2 == -1", Some(true)),
            ("2 * 1.5 == 3", Some(true)),
            ("\"b\" < \"a\"", Some(false)),
            ("\"a\" + \"b\" == \"ab\"", Some(true)),
            ("null not in [1, 2]", Some(true)),
            ("-(1) < 0", Some(true)),
            // The runtime warns and gives null: left to it, not folded.
            ("1 / 0 == 0", None),
            ("9223372036854775807 + 1 > 0", None),
        ];
        for (text, expected) in cases {
            let (program, expr) = condition(text);
            assert!(program.flows.first().is_some_and(|flow| !flow.incomplete), "{text} does not compile");
            assert_eq!(fold_bool(&expr), expected, "{text}");
            let mut warnings = Vec::new();
            let value = crate::expr::eval::eval(&expr, &NoData, &mut warnings);
            match expected {
                Some(expected) => assert_eq!(crate::expr::eval::is_true(&value), expected, "the runtime's {text}"),
                None => assert!(!warnings.is_empty(), "the runtime warns on {text}"),
            }
        }
    }

    #[test]
    fn conditions_on_data_do_not_fold() {
        assert_eq!(folded("n > 1"), None);
        assert_eq!(folded("n > 1 and true"), None);
        assert_eq!(folded("ok or false"), None);
    }

    #[test]
    fn keys_ignore_spelling_but_not_meaning() {
        let key_of = |text: &str| key(&condition(text).1);
        assert_eq!(key_of("n > 4"), key_of("4 < n"));
        assert_eq!(key_of("n <= 4"), key_of("4 >= (n)"));
        assert_eq!(key_of("plan == \"pro\""), key_of("\"pro\" == plan"));
        assert_eq!(key_of("ok and n == 1"), key_of("n == 1 and ok"));
        assert_ne!(key_of("n > 4"), key_of("n >= 4"));
        assert_ne!(key_of("n - 1 > 0"), key_of("1 - n > 0"));
        assert_eq!(when_key(" The user   wants it "), when_key("the user wants it"));
    }

    #[test]
    fn facts_are_what_a_condition_proves_set() {
        let proven = |text: &str, truth: bool| {
            let (program, expr) = condition(text);
            let mut fields = Vec::new();
            facts(&expr, truth, &mut fields);
            let mut names: Vec<String> =
                fields.iter().filter_map(|field| program.field(*field).map(|field| field.name.clone())).collect();
            names.sort();
            names
        };
        assert_eq!(proven("n is set and s == \"x\"", true), ["n", "s"]);
        assert_eq!(proven("n is set or ok", true), Vec::<String>::new());
        assert_eq!(proven("n is set or n > 2", true), ["n"]);
        assert_eq!(proven("n is not set", false), ["n"]);
        assert_eq!(proven("n == null or s == null", false), ["n", "s"]);
        assert_eq!(proven("not (plan in [\"free\"])", false), ["plan"]);
        assert_eq!(proven("s != \"x\"", true), Vec::<String>::new());
    }

    #[test]
    fn coverage_is_the_values_a_condition_accepts() {
        let covered = |text: &str| {
            let (program, expr) = condition(text);
            coverage(&program, &expr).map(|(_, values)| values.into_iter().collect::<Vec<_>>())
        };
        assert_eq!(covered("ok"), Some(vec!["true".to_string()]));
        assert_eq!(covered("not ok"), Some(vec!["false".to_string()]));
        assert_eq!(covered("plan != \"free\""), Some(vec!["pro".to_string(), "team".to_string()]));
        assert_eq!(covered("plan in [\"free\", \"team\"]"), Some(vec!["free".to_string(), "team".to_string()]));
        assert_eq!(covered("plan == \"free\" or plan == \"pro\""), Some(vec!["free".to_string(), "pro".to_string()]));
        assert_eq!(covered("ok and n > 1"), None);
        assert_eq!(covered("n > 1"), None);
    }
}
