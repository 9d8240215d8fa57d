//! Validation of values against the schema: every write (extracted by the
//! model, set by an action, returned by a tool, given with `--data`) passes
//! here before it reaches a session.
//!
//! Model output is untrusted, so types are strict: an int is a JSON number
//! (never the string `"2"`), a bool is `true`/`false`. What is normalized
//! instead of rejected:
//!
//! - `2.0` for an int becomes `2`; any number for a float becomes a JSON
//!   float (`2` becomes `2.0`), so arithmetic sees the declared type.
//! - an enum value matches case-insensitively (surrounding spaces ignored)
//!   and is stored in its declared spelling.
//! - a date is `YYYY-MM-DD` (a real calendar day), trimmed.
//! - a datetime is RFC 3339, or `YYYY-MM-DDTHH:MM:SS` read as UTC; it is
//!   stored in UTC with a `Z` (`2026-01-05T11:00:00+01:00` becomes
//!   `2026-01-05T10:00:00Z`), so equal instants are equal strings.
//! - `pattern` is searched, not anchored (`Regex::is_match`, as written):
//!   write `^...$` to constrain the whole string.
//! - an object's declared fields are validated; a missing one is unset (null)
//!   and stays absent; an undeclared key is rejected.
//! - null is always valid: it means unset.

use crate::ir::{TypeKind, ValueType};
use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat};
use regex::Regex;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Checks `value` against `ty` and returns it normalized (an enum value in
/// its declared spelling, `2.0` for an int as `2`, a date trimmed), or why
/// it is invalid, in words fit for a trace ("45 is above the maximum 10").
pub fn validate(value: &Value, ty: &ValueType) -> Result<Value, String> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    match &ty.kind {
        TypeKind::String => string(value, ty),
        TypeKind::Int => int(value, ty),
        TypeKind::Float => float(value, ty),
        TypeKind::Bool => match value {
            Value::Bool(_) => Ok(value.clone()),
            _ => Err(not_a(value, "a bool (true or false)")),
        },
        TypeKind::Date => date(value),
        TypeKind::DateTime => datetime(value),
        TypeKind::Enum { values } => enumeration(value, values),
        TypeKind::List { items } => list(value, items, ty),
        TypeKind::Object { fields } => object(value, fields),
        // A type whose declaration had an error: the program does not run,
        // and nothing is known to check against.
        TypeKind::Unknown => Ok(value.clone()),
    }
}

fn string(value: &Value, ty: &ValueType) -> Result<Value, String> {
    let Value::String(text) = value else {
        return Err(not_a(value, "a string"));
    };
    if let Some(pattern) = &ty.pattern {
        let regex = compiled(pattern).map_err(|_| format!("the pattern `{pattern}` is not a valid regex"))?;
        if !regex.is_match(text) {
            return Err(format!("`{}` does not match the pattern `{pattern}`", excerpt(text)));
        }
    }
    Ok(value.clone())
}

fn int(value: &Value, ty: &ValueType) -> Result<Value, String> {
    let Value::Number(number) = value else {
        return Err(not_a(value, "an int"));
    };
    let whole = if let Some(whole) = number.as_i64() {
        whole
    } else {
        let float = number.as_f64().unwrap_or(f64::NAN);
        if float.fract() != 0.0 {
            return Err(format!("`{number}` is not a whole number"));
        }
        // Exact bounds: i64::MIN is -2^63 and every float below 2^63 that is
        // whole converts exactly.
        if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&float) {
            return Err(format!("`{number}` is too large for an int"));
        }
        float as i64
    };
    bounds(whole as f64, &whole.to_string(), ty)?;
    Ok(Value::from(whole))
}

fn float(value: &Value, ty: &ValueType) -> Result<Value, String> {
    let Value::Number(number) = value else {
        return Err(not_a(value, "a number"));
    };
    let float = number.as_f64().unwrap_or(f64::NAN);
    let normalized = Number::from_f64(float).ok_or_else(|| format!("`{number}` is not a finite number"))?;
    bounds(float, &number.to_string(), ty)?;
    Ok(Value::Number(normalized))
}

/// `min`/`max` of a number, or of a list's length.
fn bounds(measure: f64, shown: &str, ty: &ValueType) -> Result<(), String> {
    let is_list = matches!(ty.kind, TypeKind::List { .. });
    if let Some(min) = ty.min
        && measure < min
    {
        return Err(if is_list {
            format!("the list has {shown} items, fewer than the minimum {}", bound(min))
        } else {
            format!("`{shown}` is below the minimum {}", bound(min))
        });
    }
    if let Some(max) = ty.max
        && measure > max
    {
        return Err(if is_list {
            format!("the list has {shown} items, more than the maximum {}", bound(max))
        } else {
            format!("`{shown}` is above the maximum {}", bound(max))
        });
    }
    Ok(())
}

/// A bound as the user wrote it: `10`, not `10.0`.
fn bound(limit: f64) -> String {
    let whole = limit.fract() == 0.0 && limit.abs() < 1e15;
    if whole {
        let limit = limit as i64;
        limit.to_string()
    } else {
        limit.to_string()
    }
}

fn date(value: &Value) -> Result<Value, String> {
    let Value::String(text) = value else {
        return Err(not_a(value, "a date (YYYY-MM-DD)"));
    };
    let trimmed = text.trim();
    if !has_date_shape(trimmed) {
        return Err(format!("`{}` is not a date (YYYY-MM-DD)", excerpt(text)));
    }
    match NaiveDate::parse_from_str(trimmed, "%Y-%m-%d") {
        Ok(_) => Ok(Value::String(trimmed.to_string())),
        Err(_) => Err(format!("`{trimmed}` is not a day of the calendar")),
    }
}

/// Exactly `DDDD-DD-DD`: chrono alone would also take `2026-1-5` or `+2026-01-05`.
fn has_date_shape(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(position, byte)| match position {
            4 | 7 => *byte == b'-',
            _ => byte.is_ascii_digit(),
        })
}

fn datetime(value: &Value) -> Result<Value, String> {
    let Value::String(text) = value else {
        return Err(not_a(value, "a datetime (RFC 3339)"));
    };
    let trimmed = text.trim();
    let starts_with_date = trimmed.get(..10).is_some_and(has_date_shape);
    let parsed = DateTime::parse_from_rfc3339(trimmed)
        .map(|datetime| datetime.to_utc())
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(trimmed, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|datetime| datetime.and_utc())
        })
        .filter(|_| starts_with_date);
    match parsed {
        Some(datetime) => Ok(Value::String(datetime.to_rfc3339_opts(SecondsFormat::AutoSi, true))),
        None => Err(format!("`{}` is not a datetime (e.g. 2026-12-04T09:30:00Z)", excerpt(text))),
    }
}

fn enumeration(value: &Value, values: &[String]) -> Result<Value, String> {
    let Value::String(text) = value else {
        return Err(not_a(value, &format!("one of {}", values.join(", "))));
    };
    let wanted = text.trim();
    let declared = values
        .iter()
        .find(|declared| *declared == wanted)
        .or_else(|| values.iter().find(|declared| declared.to_lowercase() == wanted.to_lowercase()));
    match declared {
        Some(declared) => Ok(Value::String(declared.clone())),
        None => Err(format!("`{}` is not one of {}", excerpt(text), values.join(", "))),
    }
}

fn list(value: &Value, items: &ValueType, ty: &ValueType) -> Result<Value, String> {
    let Value::Array(elements) = value else {
        return Err(not_a(value, "a list"));
    };
    bounds(elements.len() as f64, &elements.len().to_string(), ty)?;
    let mut normalized = Vec::with_capacity(elements.len());
    for (position, element) in elements.iter().enumerate() {
        let element = validate(element, items).map_err(|reason| format!("item {}: {reason}", position + 1))?;
        normalized.push(element);
    }
    Ok(Value::Array(normalized))
}

fn object(value: &Value, fields: &[crate::ir::Field]) -> Result<Value, String> {
    let Value::Object(members) = value else {
        return Err(not_a(value, "an object"));
    };
    if let Some(unknown) = members.keys().find(|key| !fields.iter().any(|field| field.name == **key)) {
        let declared: Vec<&str> = fields.iter().map(|field| field.name.as_str()).collect();
        let known = if declared.is_empty() {
            "it declares no fields".to_string()
        } else {
            format!("the fields are {}", declared.join(", "))
        };
        return Err(format!("unknown field `{}` ({known})", excerpt(unknown)));
    }
    // Declared order, so a stored object reads the same whatever the source.
    let mut normalized = Map::new();
    for field in fields {
        if let Some(member) = members.get(&field.name) {
            let member = validate(member, &field.ty).map_err(|reason| format!("`{}`: {reason}", field.name))?;
            normalized.insert(field.name.clone(), member);
        }
    }
    Ok(Value::Object(normalized))
}

/// "`x` is a string, not an int".
fn not_a(value: &Value, expected: &str) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    format!("`{}` is {kind}, not {expected}", excerpt(&crate::expr::eval::to_text(value)))
}

/// At most 60 characters of a value, for a reason that stays one line.
fn excerpt(text: &str) -> String {
    const LIMIT: usize = 60;
    let single_line = text.replace(['\n', '\r'], " ");
    match single_line.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", single_line.get(..cut).unwrap_or_default()),
        None => single_line,
    }
}

/// Patterns compiled once per process: validation runs on every write.
/// The cache is bounded by the patterns of the programs loaded.
fn compiled(pattern: &str) -> Result<Arc<Regex>, regex::Error> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    // A poisoned lock only means another thread panicked mid-insert; the
    // map itself is still sound.
    let mut map = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(regex) = map.get(pattern) {
        return Ok(Arc::clone(regex));
    }
    let regex = Arc::new(Regex::new(pattern)?);
    map.insert(pattern.to_string(), Arc::clone(&regex));
    Ok(regex)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Field;
    use crate::source::Span;
    use serde_json::json;

    fn ty(kind: TypeKind) -> ValueType {
        ValueType { kind, description: None, min: None, max: None, pattern: None, examples: Vec::new() }
    }

    fn bounded(kind: TypeKind, min: Option<f64>, max: Option<f64>) -> ValueType {
        ValueType { min, max, ..ty(kind) }
    }

    fn plan() -> ValueType {
        ty(TypeKind::Enum { values: vec!["free".to_string(), "pro".to_string()] })
    }

    fn field(name: &str, value_type: ValueType) -> Field {
        Field { name: name.to_string(), ty: value_type, span: Span::default() }
    }

    fn contact() -> ValueType {
        ty(TypeKind::Object { fields: vec![field("name", ty(TypeKind::String)), field("age", ty(TypeKind::Int))] })
    }

    /// Each value validates to the expected normalized value.
    fn check_ok(value_type: &ValueType, cases: &[(Value, Value)]) {
        for (value, expected) in cases {
            assert_eq!(validate(value, value_type).as_ref(), Ok(expected), "{value}");
        }
    }

    /// Each value is rejected with exactly this reason.
    fn check_err(value_type: &ValueType, cases: &[(Value, &str)]) {
        for (value, reason) in cases {
            assert_eq!(validate(value, value_type), Err(reason.to_string()), "{value}");
        }
    }

    #[test]
    fn null_is_always_valid() {
        for kind in [TypeKind::String, TypeKind::Int, TypeKind::Bool, TypeKind::Date, TypeKind::DateTime] {
            assert_eq!(validate(&Value::Null, &ty(kind)), Ok(Value::Null));
        }
        assert_eq!(validate(&Value::Null, &plan()), Ok(Value::Null));
        assert_eq!(validate(&Value::Null, &contact()), Ok(Value::Null));
    }

    #[test]
    fn strings() {
        let string = ty(TypeKind::String);
        check_ok(&string, &[(json!("Grand Hotel"), json!("Grand Hotel")), (json!(""), json!(""))]);
        check_err(
            &string,
            &[(json!(2), "`2` is a number, not a string"), (json!(true), "`true` is a bool, not a string")],
        );
    }

    #[test]
    fn patterns_search_as_written() {
        let code = ValueType { pattern: Some("[A-Z]{3}-[0-9]+".to_string()), ..ty(TypeKind::String) };
        check_ok(&code, &[(json!("ABC-12"), json!("ABC-12")), (json!("ref ABC-12 ok"), json!("ref ABC-12 ok"))]);
        check_err(&code, &[(json!("abc-12"), "`abc-12` does not match the pattern `[A-Z]{3}-[0-9]+`")]);
        let anchored = ValueType { pattern: Some("^[0-9]{5}$".to_string()), ..ty(TypeKind::String) };
        check_ok(&anchored, &[(json!("75001"), json!("75001"))]);
        check_err(&anchored, &[(json!("750012"), "`750012` does not match the pattern `^[0-9]{5}$`")]);
        let broken = ValueType { pattern: Some("(".to_string()), ..ty(TypeKind::String) };
        check_err(&broken, &[(json!("x"), "the pattern `(` is not a valid regex")]);
    }

    #[test]
    fn ints_are_numbers_and_whole_floats_normalize() {
        let int_type = ty(TypeKind::Int);
        check_ok(
            &int_type,
            &[(json!(2), json!(2)), (json!(2.0), json!(2)), (json!(-7), json!(-7)), (json!(1e3), json!(1000))],
        );
        let value = validate(&json!(2.0), &int_type);
        assert!(value.as_ref().is_ok_and(Value::is_i64), "{value:?}");
        check_err(
            &int_type,
            &[
                (json!("2"), "`2` is a string, not an int"),
                (json!(2.5), "`2.5` is not a whole number"),
                (json!(1e19), "`1e+19` is too large for an int"),
                (json!(u64::MAX), "`18446744073709551615` is too large for an int"),
                (json!([1]), "`[1]` is a list, not an int"),
            ],
        );
    }

    #[test]
    fn floats_accept_any_number() {
        let float_type = ty(TypeKind::Float);
        check_ok(&float_type, &[(json!(2.5), json!(2.5)), (json!(2), json!(2.0))]);
        let value = validate(&json!(2), &float_type);
        assert!(value.as_ref().is_ok_and(Value::is_f64), "{value:?}");
        check_err(&float_type, &[(json!("2.5"), "`2.5` is a string, not a number")]);
    }

    #[test]
    fn number_bounds() {
        let guests = bounded(TypeKind::Int, Some(1.0), Some(10.0));
        check_ok(&guests, &[(json!(1), json!(1)), (json!(10), json!(10)), (json!(10.0), json!(10))]);
        check_err(&guests, &[(json!(45), "`45` is above the maximum 10"), (json!(0), "`0` is below the minimum 1")]);
        let ratio = bounded(TypeKind::Float, Some(0.5), Some(1.5));
        check_ok(&ratio, &[(json!(0.5), json!(0.5))]);
        check_err(
            &ratio,
            &[(json!(0.25), "`0.25` is below the minimum 0.5"), (json!(2), "`2` is above the maximum 1.5")],
        );
    }

    #[test]
    fn bools_are_strict() {
        let flag = ty(TypeKind::Bool);
        check_ok(&flag, &[(json!(true), json!(true)), (json!(false), json!(false))]);
        check_err(
            &flag,
            &[
                (json!("yes"), "`yes` is a string, not a bool (true or false)"),
                (json!(1), "`1` is a number, not a bool (true or false)"),
            ],
        );
    }

    #[test]
    fn dates_are_iso_calendar_days() {
        let day = ty(TypeKind::Date);
        check_ok(&day, &[(json!("2026-12-04"), json!("2026-12-04")), (json!(" 2028-02-29 "), json!("2028-02-29"))]);
        check_err(
            &day,
            &[
                (json!("2026-02-30"), "`2026-02-30` is not a day of the calendar"),
                (json!("2026-2-3"), "`2026-2-3` is not a date (YYYY-MM-DD)"),
                (json!("tomorrow"), "`tomorrow` is not a date (YYYY-MM-DD)"),
                (json!("2026-12-04T10:00:00Z"), "`2026-12-04T10:00:00Z` is not a date (YYYY-MM-DD)"),
                (json!(20261204), "`20261204` is a number, not a date (YYYY-MM-DD)"),
            ],
        );
    }

    #[test]
    fn datetimes_normalize_to_utc() {
        let at = ty(TypeKind::DateTime);
        check_ok(
            &at,
            &[
                (json!("2026-01-05T10:00:00Z"), json!("2026-01-05T10:00:00Z")),
                (json!("2026-01-05T11:00:00+01:00"), json!("2026-01-05T10:00:00Z")),
                (json!("2026-01-05T10:00:00"), json!("2026-01-05T10:00:00Z")),
                (json!("2026-01-05T10:00:00.250Z"), json!("2026-01-05T10:00:00.250Z")),
            ],
        );
        check_err(
            &at,
            &[
                (json!("2026-01-05"), "`2026-01-05` is not a datetime (e.g. 2026-12-04T09:30:00Z)"),
                (json!("2026-01-05T25:00:00Z"), "`2026-01-05T25:00:00Z` is not a datetime (e.g. 2026-12-04T09:30:00Z)"),
                (json!("soon"), "`soon` is not a datetime (e.g. 2026-12-04T09:30:00Z)"),
            ],
        );
    }

    #[test]
    fn enums_match_case_insensitively() {
        let plan = plan();
        check_ok(
            &plan,
            &[(json!("pro"), json!("pro")), (json!("PRO"), json!("pro")), (json!(" Free "), json!("free"))],
        );
        check_err(
            &plan,
            &[(json!("gold"), "`gold` is not one of free, pro"), (json!(1), "`1` is a number, not one of free, pro")],
        );
    }

    #[test]
    fn lists_check_length_and_items() {
        let tags = ValueType { min: Some(1.0), max: Some(2.0), ..ty(TypeKind::List { items: Box::new(plan()) }) };
        check_ok(&tags, &[(json!(["PRO"]), json!(["pro"])), (json!(["free", null]), json!(["free", null]))]);
        check_err(
            &tags,
            &[
                (json!([]), "the list has 0 items, fewer than the minimum 1"),
                (json!(["pro", "pro", "pro"]), "the list has 3 items, more than the maximum 2"),
                (json!(["pro", "gold"]), "item 2: `gold` is not one of free, pro"),
                (json!("pro"), "`pro` is a string, not a list"),
            ],
        );
    }

    #[test]
    fn objects_check_declared_fields() {
        let contact = contact();
        check_ok(
            &contact,
            &[
                (json!({"age": 3.0, "name": "Ada"}), json!({"name": "Ada", "age": 3})),
                (json!({"name": "Ada"}), json!({"name": "Ada"})),
                (json!({}), json!({})),
            ],
        );
        check_err(
            &contact,
            &[
                (json!({"name": "Ada", "email": "a@b.c"}), "unknown field `email` (the fields are name, age)"),
                (json!({"age": "three"}), "`age`: `three` is a string, not an int"),
                (json!(["Ada"]), "`[\"Ada\"]` is a list, not an object"),
            ],
        );
        let nested = ty(TypeKind::List { items: Box::new(contact) });
        check_err(&nested, &[(json!([{"name": "Ada"}, {"age": 1.5}]), "item 2: `age`: `1.5` is not a whole number")]);
    }

    #[test]
    fn long_values_are_cut_in_reasons() {
        let long = "x".repeat(100);
        let reason = validate(&json!(long), &plan()).err().unwrap_or_default();
        assert!(reason.starts_with(&format!("`{}…`", "x".repeat(60))), "{reason}");
    }
}
