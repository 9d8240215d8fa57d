//! What each operator does to values, written once: the runtime's
//! evaluator ([`super::eval`]) applies it, and the checker folds constant
//! conditions with it (`check::conditions`), so a condition the checker
//! calls always false is one the runtime finds false.
//!
//! The rules are LANGUAGE.md section 2. Where it is silent:
//!
//! - `/` on two ints is integer division truncated toward zero (`7 / 2` is
//!   `3`, `-7 / 2` is `-3`) and `%` is its remainder (sign of the dividend),
//!   as in Rust, SQL and Java. The type checker types `int / int` as `int`, so
//!   a result written to an int field must stay an int; write `x * 1.0 / y`
//!   for a fractional result.
//! - An operation whose static type is `float` computes in floats even when
//!   both values happen to be whole JSON numbers (a float field given `2` in
//!   `--data`), so the static type decides, not the JSON spelling.
//! - Overflow (ints beyond 64 bits, floats beyond `f64`), division or `%` by
//!   zero give null and a warning; applying an operator never panics.
//! - `and`/`or` always give a bool: only `true` is true, so `null and x` is
//!   false and `not null` is true.
//! - Dates and datetimes are ISO strings in JSON; whenever either side of a
//!   comparison is typed `date` or `datetime`, both are compared as instants
//!   (a date is midnight UTC, a datetime without offset is UTC), so
//!   `"2026-01-05T10:00:00+01:00" == "2026-01-05T09:00:00Z"` and
//!   `date < now()` work. A string that does not parse compares as text.
//! - `in` and `not in` are each other's negation: `null not in [..]` is true
//!   unless the list holds null; a null list holds nothing.
//! - `part in s` is a case-sensitive substring test.

use super::Type;
use crate::syntax::ast::{BinaryOp, UnaryOp};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde_json::{Number, Value};
use std::cmp::Ordering;

/// How the static types of an operation's operands and result bear on
/// what it does to values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Typing {
    /// Either operand is typed `date` or `datetime` (or a list of them):
    /// strings compare as instants.
    pub temporal: bool,
    /// The result is typed `float`: arithmetic computes in floats.
    pub float: bool,
}

impl Typing {
    /// The typing of an operation from its operands' and its result's
    /// static types.
    pub fn of(left: &Type, right: &Type, result: &Type) -> Typing {
        Typing { temporal: is_temporal(left) || is_temporal(right), float: *result == Type::Float }
    }
}

/// `op` applied to two values already computed (`and` and `or` included:
/// the evaluator short-circuits before it gets here). Anomalies the
/// language defines as null add a line to `warnings`.
pub fn binary(op: BinaryOp, left: &Value, right: &Value, typing: Typing, warnings: &mut Vec<String>) -> Value {
    let temporal = typing.temporal;
    match op {
        BinaryOp::And => Value::Bool(is_true(left) && is_true(right)),
        BinaryOp::Or => Value::Bool(is_true(left) || is_true(right)),
        BinaryOp::Eq => Value::Bool(equal(left, right, temporal)),
        BinaryOp::Ne => Value::Bool(!equal(left, right, temporal)),
        BinaryOp::Lt => ordered(left, right, temporal, Ordering::is_lt),
        BinaryOp::Le => ordered(left, right, temporal, Ordering::is_le),
        BinaryOp::Gt => ordered(left, right, temporal, Ordering::is_gt),
        BinaryOp::Ge => ordered(left, right, temporal, Ordering::is_ge),
        BinaryOp::In => Value::Bool(contained(left, right, temporal)),
        BinaryOp::NotIn => Value::Bool(!contained(left, right, temporal)),
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
            arithmetic(op, left, right, typing.float, warnings)
        }
    }
}

/// `op` applied to one value; `float` is whether the result is typed
/// `float`.
pub fn unary(op: UnaryOp, value: &Value, float: bool, warnings: &mut Vec<String>) -> Value {
    match op {
        UnaryOp::Not => Value::Bool(!is_true(value)),
        UnaryOp::Neg => negate(value, float, warnings),
    }
}

/// `x is set` (or `x is not set` when `negated`).
pub fn is_set(value: &Value, negated: bool) -> Value {
    Value::Bool(value.is_null() == negated)
}

/// How a value reads inside rendered text: null is empty, strings are raw,
/// numbers and bools as JSON, lists and objects as compact JSON.
pub fn to_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::Array(_) | Value::Object(_) => serde_json::to_string(value).unwrap_or_default(),
    }
}

/// Whether a condition's value counts as true: only `true` does (null,
/// the value of an unset field, is false).
pub fn is_true(value: &Value) -> bool {
    matches!(value, Value::Bool(true))
}

/// A JSON number as arithmetic sees it.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(value: &Value) -> Option<Num> {
        let Value::Number(number) = value else {
            return None;
        };
        // A u64 above i64::MAX cannot be an int here; it is kept as a float.
        number.as_i64().map(Num::Int).or_else(|| number.as_f64().map(Num::Float))
    }

    fn as_f64(self) -> f64 {
        match self {
            // Precision loss above 2^53 is the price of mixing ints with floats.
            Num::Int(value) => value as f64,
            Num::Float(value) => value,
        }
    }

    fn to_float(self) -> Num {
        Num::Float(self.as_f64())
    }
}

fn compare_numbers(left: Num, right: Num) -> Option<Ordering> {
    match (left, right) {
        (Num::Int(left), Num::Int(right)) => Some(left.cmp(&right)),
        (left, right) => left.as_f64().partial_cmp(&right.as_f64()),
    }
}

/// A float result as JSON, or null with a warning when it is not finite.
fn float_value(value: f64, what: &str, warnings: &mut Vec<String>) -> Value {
    match Number::from_f64(value) {
        Some(number) => Value::Number(number),
        None => {
            warnings.push(format!("{what} overflows; the result is null"));
            Value::Null
        }
    }
}

fn int_value(value: Option<i64>, what: &str, warnings: &mut Vec<String>) -> Value {
    match value {
        Some(value) => Value::from(value),
        None => {
            warnings.push(format!("{what} overflows 64-bit integers; the result is null"));
            Value::Null
        }
    }
}

pub fn negate(value: &Value, float: bool, warnings: &mut Vec<String>) -> Value {
    let Some(number) = Num::of(value) else {
        return Value::Null;
    };
    let number = if float { number.to_float() } else { number };
    let what = format!("`-{}`", to_text(value));
    match number {
        Num::Int(value) => int_value(value.checked_neg(), &what, warnings),
        Num::Float(value) => float_value(-value, &what, warnings),
    }
}

/// Whether values of this static type (or the items of a list of it) are
/// ISO date strings to compare as instants.
pub fn is_temporal(ty: &Type) -> bool {
    match ty {
        Type::Date | Type::DateTime => true,
        Type::List(items) => is_temporal(items),
        _ => false,
    }
}

/// An ISO date (midnight UTC), an RFC 3339 datetime, or a datetime without
/// offset (UTC).
fn instant(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return date.and_hms_opt(0, 0, 0).map(|midnight| midnight.and_utc());
    }
    if let Ok(datetime) = DateTime::parse_from_rfc3339(text) {
        return Some(datetime.to_utc());
    }
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|datetime| datetime.and_utc())
}

pub fn equal(left: &Value, right: &Value, temporal: bool) -> bool {
    match (left, right) {
        (Value::Number(_), Value::Number(_)) => match (Num::of(left), Num::of(right)) {
            (Some(left), Some(right)) => compare_numbers(left, right) == Some(Ordering::Equal),
            _ => left == right,
        },
        (Value::String(left_text), Value::String(right_text)) if temporal => {
            match (instant(left_text), instant(right_text)) {
                (Some(left_instant), Some(right_instant)) => left_instant == right_instant,
                _ => left_text == right_text,
            }
        }
        (Value::Array(left_items), Value::Array(right_items)) => {
            left_items.len() == right_items.len()
                && left_items
                    .iter()
                    .zip(right_items)
                    .all(|(left_item, right_item)| equal(left_item, right_item, temporal))
        }
        (Value::Object(left_map), Value::Object(right_map)) => {
            left_map.len() == right_map.len()
                && left_map.iter().all(|(key, left_member)| {
                    right_map.get(key).is_some_and(|right_member| equal(left_member, right_member, false))
                })
        }
        _ => left == right,
    }
}

/// `< <= > >=`: false when either side is null or the two do not order.
pub fn ordered(left: &Value, right: &Value, temporal: bool, accept: fn(Ordering) -> bool) -> Value {
    let ordering = match (left, right) {
        (Value::Number(_), Value::Number(_)) => match (Num::of(left), Num::of(right)) {
            (Some(left), Some(right)) => compare_numbers(left, right),
            _ => None,
        },
        (Value::String(left_text), Value::String(right_text)) => {
            let instants = if temporal { instant(left_text).zip(instant(right_text)) } else { None };
            match instants {
                Some((left_instant, right_instant)) => Some(left_instant.cmp(&right_instant)),
                None => Some(left_text.cmp(right_text)),
            }
        }
        _ => None,
    };
    Value::Bool(ordering.is_some_and(accept))
}

/// `needle in haystack`: an item of a list, or a substring of a string.
pub fn contained(needle: &Value, haystack: &Value, temporal: bool) -> bool {
    match (needle, haystack) {
        (_, Value::Array(items)) => items.iter().any(|item| equal(needle, item, temporal)),
        (Value::String(part), Value::String(text)) => text.contains(part.as_str()),
        _ => false,
    }
}

pub fn arithmetic(op: BinaryOp, left: &Value, right: &Value, float: bool, warnings: &mut Vec<String>) -> Value {
    if op == BinaryOp::Add {
        // Joining lists: an unset list counts as empty, as `append` treats it.
        match (left, right) {
            (Value::Array(left_items), Value::Array(right_items)) => {
                return Value::Array(left_items.iter().chain(right_items).cloned().collect());
            }
            (Value::Array(items), Value::Null) | (Value::Null, Value::Array(items)) => {
                return Value::Array(items.clone());
            }
            _ => {}
        }
    }
    if left.is_null() || right.is_null() {
        return Value::Null;
    }
    let what = format!("`{} {} {}`", to_text(left), op.as_str(), to_text(right));
    if let (BinaryOp::Add, Value::String(left_text), Value::String(right_text)) = (op, left, right) {
        return Value::String(format!("{left_text}{right_text}"));
    }
    let (Some(left_number), Some(right_number)) = (Num::of(left), Num::of(right)) else {
        warnings.push(format!("{what} mixes values arithmetic cannot combine; the result is null"));
        return Value::Null;
    };
    let (left_number, right_number) = match (left_number, right_number) {
        (Num::Int(_), Num::Int(_)) if !float => (left_number, right_number),
        _ => (left_number.to_float(), right_number.to_float()),
    };
    let divides = matches!(op, BinaryOp::Div | BinaryOp::Rem);
    let zero_divisor = match right_number {
        Num::Int(value) => value == 0,
        Num::Float(value) => value == 0.0,
    };
    if divides && zero_divisor {
        warnings.push(format!("division by zero in {what}; the result is null"));
        return Value::Null;
    }
    match (left_number, right_number) {
        (Num::Int(left_int), Num::Int(right_int)) => {
            let result = match op {
                BinaryOp::Add => left_int.checked_add(right_int),
                BinaryOp::Sub => left_int.checked_sub(right_int),
                BinaryOp::Mul => left_int.checked_mul(right_int),
                BinaryOp::Div => left_int.checked_div(right_int),
                _ => left_int.checked_rem(right_int),
            };
            int_value(result, &what, warnings)
        }
        (left_number, right_number) => {
            let (left_float, right_float) = (left_number.as_f64(), right_number.as_f64());
            let result = match op {
                BinaryOp::Add => left_float + right_float,
                BinaryOp::Sub => left_float - right_float,
                BinaryOp::Mul => left_float * right_float,
                BinaryOp::Div => left_float / right_float,
                _ => left_float % right_float,
            };
            float_value(result, &what, warnings)
        }
    }
}
