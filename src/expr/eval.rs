//! Evaluation of typed expressions and rendering of templates, against
//! whatever holds the values ([`Bindings`]): a session's data, a workflow
//! run, a tool call's arguments.
//!
//! What each operator does to values is [`super::ops`]; this file decides
//! what is evaluated and in which order: `and`/`or` short-circuit, function
//! calls (where silent, LANGUAGE.md section 2 is completed here):
//!
//! - `join(list, separator)` renders each item as a template would and
//!   leaves null items out; a null list or separator gives null.
//! - `contains(list, x)` uses `==`; `contains(s, part)` and `part in s` are
//!   case-sensitive substring tests.

use super::ops::{self, Typing, contained, is_temporal};
pub use super::ops::{is_true, to_text};
use super::{Expr, ExprKind, Function, Template, TemplatePart, Type};
use crate::ids::{ContextId, FieldId, StepId};
use crate::syntax::ast::BinaryOp;
use chrono::SecondsFormat;
use serde_json::Value;

/// Where evaluation reads names from. Unset fields are `Value::Null`.
pub trait Bindings {
    fn field(&self, field: FieldId) -> Value;
    fn context(&self, key: ContextId) -> Value;
    /// A loop variable or tool param by slot.
    fn local(&self, slot: u32) -> Value;
    /// An environment variable (http headers only; the type checker
    /// guarantees no other place reads one).
    fn env(&self, name: &str) -> Option<String>;
    /// The injectable clock (`FLOWC_NOW` freezes it).
    fn now(&self) -> chrono::DateTime<chrono::Utc>;
    /// The recorded output of a step of the running workflow; null outside
    /// a workflow (the type checker allows `steps.…` only in one).
    fn step_output(&self, _step: StepId) -> Value {
        Value::Null
    }
}

/// Evaluates an expression. Runtime anomalies the language defines as null
/// (division by zero) add a line to `warnings` for the trace.
pub fn eval(expr: &Expr, bindings: &dyn Bindings, warnings: &mut Vec<String>) -> Value {
    match &expr.kind {
        ExprKind::Literal { value } => value.to_value(),
        ExprKind::List { items } => Value::Array(items.iter().map(|item| eval(item, bindings, warnings)).collect()),
        ExprKind::Field { field } => bindings.field(*field),
        ExprKind::Context { key } => bindings.context(*key),
        ExprKind::Local { slot, .. } => bindings.local(*slot),
        ExprKind::Env { name } => bindings.env(name).map_or(Value::Null, Value::String),
        ExprKind::StepOutput { step, .. } => bindings.step_output(*step),
        ExprKind::Member { object, member } => match eval(object, bindings, warnings) {
            Value::Object(mut map) => map.shift_remove(member).unwrap_or(Value::Null),
            _ => Value::Null,
        },
        ExprKind::Unary { op, operand } => {
            let value = eval(operand, bindings, warnings);
            ops::unary(*op, &value, expr.ty == Type::Float, warnings)
        }
        ExprKind::Binary { op, left, right } => binary(*op, expr, left, right, bindings, warnings),
        ExprKind::IsSet { operand, negated } => ops::is_set(&eval(operand, bindings, warnings), *negated),
        ExprKind::Call { function, args } => call(*function, args, bindings, warnings),
        // A program with errors never runs; null is the harmless answer.
        ExprKind::Error => Value::Null,
    }
}

/// Renders a template; null renders as the empty string.
pub fn render(template: &Template, bindings: &dyn Bindings, warnings: &mut Vec<String>) -> String {
    let mut out = String::new();
    for part in &template.parts {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Expr(expr) => out.push_str(&to_text(&eval(expr, bindings, warnings))),
        }
    }
    out
}

fn binary(
    op: BinaryOp,
    expr: &Expr,
    left: &Expr,
    right: &Expr,
    bindings: &dyn Bindings,
    warnings: &mut Vec<String>,
) -> Value {
    match op {
        BinaryOp::And => {
            if !is_true(&eval(left, bindings, warnings)) {
                return Value::Bool(false);
            }
            Value::Bool(is_true(&eval(right, bindings, warnings)))
        }
        BinaryOp::Or => {
            if is_true(&eval(left, bindings, warnings)) {
                return Value::Bool(true);
            }
            Value::Bool(is_true(&eval(right, bindings, warnings)))
        }
        _ => {
            let left_value = eval(left, bindings, warnings);
            let right_value = eval(right, bindings, warnings);
            ops::binary(op, &left_value, &right_value, Typing::of(&left.ty, &right.ty, &expr.ty), warnings)
        }
    }
}

fn call(function: Function, args: &[Expr], bindings: &dyn Bindings, warnings: &mut Vec<String>) -> Value {
    match function {
        Function::Today => {
            return Value::String(bindings.now().date_naive().format("%Y-%m-%d").to_string());
        }
        Function::Now => {
            return Value::String(bindings.now().to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        _ => {}
    }
    let values: Vec<Value> = args.iter().map(|arg| eval(arg, bindings, warnings)).collect();
    match (function, values.as_slice()) {
        (Function::Len, [Value::Null]) => Value::from(0),
        (Function::Len, [Value::String(text)]) => Value::from(text.chars().count()),
        (Function::Len, [Value::Array(items)]) => Value::from(items.len()),
        (Function::Len, [Value::Object(members)]) => Value::from(members.len()),
        (Function::Lower, [Value::String(text)]) => Value::String(text.to_lowercase()),
        (Function::Upper, [Value::String(text)]) => Value::String(text.to_uppercase()),
        (Function::Contains, [haystack, needle]) if !haystack.is_null() && !needle.is_null() => {
            let temporal = args.iter().any(|arg| is_temporal(&arg.ty));
            match haystack {
                Value::Array(_) | Value::String(_) => Value::Bool(contained(needle, haystack, temporal)),
                _ => Value::Null,
            }
        }
        (Function::Join, [Value::Array(items), Value::String(separator)]) => {
            // Items read as they do in a template; a null item is left out
            // rather than leaving two separators side by side.
            let texts: Vec<String> = items.iter().filter(|item| !item.is_null()).map(to_text).collect();
            Value::String(texts.join(separator))
        }
        // A null operand gives null; other shapes cannot pass the type checker.
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::typeck::{Checker, Scope, Symbols};
    use crate::syntax::expr::{SpanMap, parse_expr, parse_template};
    use chrono::{DateTime, Utc};
    use serde_json::json;

    /// A session with a fixed clock; unset fields are absent.
    struct TestBindings {
        fields: Vec<(&'static str, Type, Value)>,
        tier: Value,
    }

    fn object_type(fields: &[(&str, Type)]) -> Type {
        Type::Object(fields.iter().map(|(name, ty)| (name.to_string(), ty.clone())).collect::<Vec<_>>().into())
    }

    fn session() -> TestBindings {
        let plan = Type::Enum(vec!["free".to_string(), "pro".to_string()].into());
        let contact = object_type(&[("name", Type::String), ("email", Type::String)]);
        TestBindings {
            fields: vec![
                ("guests", Type::Int, json!(3)),
                ("zero", Type::Int, json!(0)),
                ("big", Type::Int, json!(i64::MAX)),
                ("small", Type::Int, json!(i64::MIN)),
                ("price", Type::Float, json!(2)),
                ("huge", Type::Float, json!(1e308)),
                ("hotel", Type::String, json!("Grand Hotel")),
                ("confirmed", Type::Bool, json!(true)),
                ("declined", Type::Bool, json!(false)),
                ("date", Type::Date, json!("2026-01-04")),
                ("at", Type::DateTime, json!("2026-01-05T11:00:00+01:00")),
                ("plan", plan, json!("pro")),
                ("tags", Type::List(Type::String.into()), json!(["a", "b"])),
                ("days", Type::List(Type::Date.into()), json!(["2026-01-04"])),
                ("contact", contact.clone(), json!({"name": "Ada", "email": "ada@example.com"})),
                ("contacts", Type::List(contact.clone().into()), json!([{"name": "Ada"}])),
                ("nobody", contact, Value::Null),
                ("missing", Type::Int, Value::Null),
                ("nothing", Type::String, Value::Null),
                ("no_list", Type::List(Type::String.into()), Value::Null),
            ],
            tier: json!("gold"),
        }
    }

    impl Bindings for TestBindings {
        fn field(&self, field: FieldId) -> Value {
            self.fields.get(field.index()).map_or(Value::Null, |(_, _, value)| value.clone())
        }
        fn context(&self, _key: ContextId) -> Value {
            self.tier.clone()
        }
        fn local(&self, slot: u32) -> Value {
            match slot {
                0 => json!({"email": "c@example.com"}),
                _ => Value::Null,
            }
        }
        fn env(&self, name: &str) -> Option<String> {
            (name == "TOKEN").then(|| "secret".to_string())
        }
        fn now(&self) -> DateTime<Utc> {
            DateTime::parse_from_rfc3339("2026-01-05T10:00:00Z").map(|at| at.to_utc()).unwrap_or_default()
        }
    }

    fn scope_symbols(bindings: &TestBindings) -> Symbols {
        let mut symbols = Symbols::default();
        for (index, (name, ty, _)) in bindings.fields.iter().enumerate() {
            symbols.fields.insert(name.to_string(), (FieldId::from_index(index), ty.clone()));
        }
        let tier = Type::Enum(vec!["basic".to_string(), "gold".to_string()].into());
        symbols.context.insert("tier".to_string(), (ContextId(0), tier));
        symbols
    }

    /// Parses, type-checks (no diagnostics allowed) and evaluates `text`,
    /// returning the value and the warnings.
    fn run(text: &str) -> (Value, Vec<String>) {
        let bindings = session();
        let symbols = scope_symbols(&bindings);
        let mut diagnostics = Vec::new();
        let ast = parse_expr(text, SpanMap::Exact { base: 0 }, &mut diagnostics);
        let locals = [("c".to_string(), object_type(&[("email", Type::String)]))];
        assert!(diagnostics.is_empty(), "{text}: {diagnostics:?}");
        let mut type_errors = Vec::new();
        let typed = Checker {
            scope: Scope { symbols: &symbols, fields_visible: true, locals: &locals, env_allowed: true, steps: None },
            errors: &mut type_errors,
        }
        .expr(&ast);
        assert!(type_errors.is_empty(), "{text}: {type_errors:?}");
        let mut warnings = Vec::new();
        let value = eval(&typed, &bindings, &mut warnings);
        (value, warnings)
    }

    /// Evaluates each `(expression, expected)` pair, expecting no warnings.
    fn check(cases: &[(&str, Value)]) {
        for (text, expected) in cases {
            let (value, warnings) = run(text);
            assert_eq!(&value, expected, "{text}");
            assert!(warnings.is_empty(), "{text}: {warnings:?}");
        }
    }

    /// Evaluates `text` expecting null and one warning containing `needle`.
    fn check_warns(text: &str, needle: &str) {
        let (value, warnings) = run(text);
        assert_eq!(value, Value::Null, "{text}");
        assert_eq!(warnings.len(), 1, "{text}: {warnings:?}");
        assert!(warnings.iter().all(|warning| warning.contains(needle)), "{text}: {warnings:?}");
    }

    #[test]
    fn literals_and_names() {
        check(&[
            ("42", json!(42)),
            ("3.5", json!(3.5)),
            ("'text'", json!("text")),
            ("null", Value::Null),
            ("[1, 2]", json!([1, 2])),
            ("guests", json!(3)),
            ("missing", Value::Null),
            ("context.tier", json!("gold")),
            ("contact.email", json!("ada@example.com")),
            ("c.email", json!("c@example.com")),
            ("env.TOKEN", json!("secret")),
            ("env.NOT_SET", Value::Null),
        ]);
    }

    #[test]
    fn plus_joins_lists_and_an_unset_list_counts_as_empty() {
        check(&[
            ("tags + [\"c\"]", json!(["a", "b", "c"])),
            ("tags + tags", json!(["a", "b", "a", "b"])),
            ("no_list + [\"c\"]", json!(["c"])),
            ("[\"c\"] + no_list", json!(["c"])),
            ("no_list + no_list", Value::Null),
            ("len(tags + [hotel])", json!(3)),
        ]);
    }

    #[test]
    fn member_of_an_unset_object_is_null() {
        check(&[
            ("nobody.email", Value::Null),
            ("nobody.email is set", json!(false)),
            ("len(contacts) == 1", json!(true)),
        ]);
    }

    #[test]
    fn equality_with_null_is_normal() {
        check(&[
            ("missing == null", json!(true)),
            ("missing != null", json!(false)),
            ("guests == null", json!(false)),
            ("missing == 3", json!(false)),
            ("missing != 3", json!(true)),
            ("nothing == \"\"", json!(false)),
        ]);
    }

    #[test]
    fn equality_of_numbers_strings_lists() {
        check(&[
            ("guests == 3", json!(true)),
            ("guests == 3.0", json!(true)),
            ("price == 2", json!(true)),
            ("guests != 4", json!(true)),
            ("hotel == \"Grand Hotel\"", json!(true)),
            ("hotel == \"grand hotel\"", json!(false)),
            ("tags == [\"a\", \"b\"]", json!(true)),
            ("tags == [\"b\", \"a\"]", json!(false)),
            ("confirmed == true", json!(true)),
            ("declined == true", json!(false)),
        ]);
    }

    #[test]
    fn ordering_with_null_is_false() {
        check(&[
            ("missing < 3", json!(false)),
            ("missing <= 3", json!(false)),
            ("missing > 3", json!(false)),
            ("missing >= 3", json!(false)),
            ("3 > missing", json!(false)),
            ("not (missing > 3)", json!(true)),
        ]);
    }

    #[test]
    fn ordering_numbers_and_strings() {
        check(&[
            ("guests < 4", json!(true)),
            ("guests <= 3", json!(true)),
            ("guests > 2.5", json!(true)),
            ("guests >= 3.5", json!(false)),
            ("price < 2.5", json!(true)),
            ("\"apple\" < \"banana\"", json!(true)),
            ("hotel > \"A\"", json!(true)),
        ]);
    }

    #[test]
    fn dates_compare_as_dates() {
        check(&[
            ("date < today()", json!(true)),
            ("date >= today()", json!(false)),
            ("date == \"2026-01-04\"", json!(true)),
            ("today() == \"2026-01-05\"", json!(true)),
            ("at == \"2026-01-05T10:00:00Z\"", json!(true)),
            ("at == now()", json!(true)),
            ("at > \"2026-01-05T09:30:00Z\"", json!(true)),
            ("date < now()", json!(true)),
            ("date < at", json!(true)),
            ("date in [\"2026-01-03\", \"2026-01-04\"]", json!(true)),
            ("contains(days, \"2026-01-04\")", json!(true)),
        ]);
    }

    #[test]
    fn today_and_now_come_from_the_clock() {
        check(&[("today()", json!("2026-01-05")), ("now()", json!("2026-01-05T10:00:00Z"))]);
    }

    #[test]
    fn enums_compare_as_strings() {
        check(&[
            ("plan == \"pro\"", json!(true)),
            ("plan != \"free\"", json!(true)),
            ("plan in [\"pro\"]", json!(true)),
            ("context.tier == \"gold\"", json!(true)),
            ("upper(plan)", json!("PRO")),
            ("plan + \"!\"", json!("pro!")),
        ]);
    }

    #[test]
    fn logic_short_circuits_and_null_is_false() {
        check(&[
            ("confirmed and guests == 3", json!(true)),
            ("confirmed and declined", json!(false)),
            ("declined or confirmed", json!(true)),
            ("declined or declined", json!(false)),
            ("not confirmed", json!(false)),
            ("not declined", json!(true)),
            ("not null", json!(true)),
            ("null and true", json!(false)),
            ("null or true", json!(true)),
            ("null or null", json!(false)),
        ]);
        // The right side of a short-circuited operator is never evaluated:
        // its warning would appear otherwise.
        let (value, warnings) = run("declined and 1 / zero == 1");
        assert_eq!((value, warnings.len()), (json!(false), 0));
        let (value, warnings) = run("confirmed or 1 / zero == 1");
        assert_eq!((value, warnings.len()), (json!(true), 0));
    }

    #[test]
    fn membership_in_lists_and_strings() {
        check(&[
            ("\"a\" in tags", json!(true)),
            ("\"c\" in tags", json!(false)),
            ("\"c\" not in tags", json!(true)),
            ("\"a\" not in tags", json!(false)),
            ("3 in [1, 2, 3]", json!(true)),
            ("3 in [1.5, 3.0]", json!(true)),
            ("\"Grand\" in hotel", json!(true)),
            ("\"grand\" in hotel", json!(false)),
            ("missing in [1, 2]", json!(false)),
            ("missing not in [1, 2]", json!(true)),
            ("missing in [1, null]", json!(true)),
            ("\"a\" in no_list", json!(false)),
            ("\"a\" not in no_list", json!(true)),
            ("nothing in hotel", json!(false)),
        ]);
    }

    #[test]
    fn is_set() {
        check(&[
            ("guests is set", json!(true)),
            ("missing is set", json!(false)),
            ("missing is not set", json!(true)),
            ("guests is not set", json!(false)),
            ("contact.email is set", json!(true)),
        ]);
    }

    #[test]
    fn arithmetic_on_ints_and_floats() {
        check(&[
            ("guests + 1", json!(4)),
            ("guests - 5", json!(-2)),
            ("guests * 2", json!(6)),
            ("7 / 2", json!(3)),
            ("-7 / 2", json!(-3)),
            ("6 / 3", json!(2)),
            ("7 % 3", json!(1)),
            ("-7 % 3", json!(-1)),
            ("guests + 0.5", json!(3.5)),
            ("7 / 2.0", json!(3.5)),
            ("7.5 % 2", json!(1.5)),
            ("-guests", json!(-3)),
            ("-price", json!(-2.0)),
            ("(guests + 1) * 2", json!(8)),
        ]);
    }

    #[test]
    fn float_typed_arithmetic_stays_float_for_whole_values() {
        // `price` holds the JSON integer 2 but is declared float.
        let (value, _) = run("price / 4");
        assert_eq!(value, json!(0.5));
        let (value, _) = run("price + 1");
        assert!(value.is_f64(), "{value}");
    }

    #[test]
    fn strings_join_with_plus() {
        check(&[("hotel + \"!\"", json!("Grand Hotel!")), ("\"a\" + 'b'", json!("ab"))]);
    }

    #[test]
    fn null_operands_give_null() {
        check(&[
            ("missing + 1", Value::Null),
            ("1 - missing", Value::Null),
            ("missing * 2", Value::Null),
            ("missing / 0", Value::Null),
            ("missing % 2", Value::Null),
            ("-missing", Value::Null),
            ("nothing + \"x\"", Value::Null),
            ("lower(nothing)", Value::Null),
            ("upper(nothing)", Value::Null),
            ("contains(nothing, \"a\")", Value::Null),
            ("contains(hotel, nothing)", Value::Null),
            ("len(nothing)", json!(0)),
            ("len(no_list)", json!(0)),
        ]);
    }

    #[test]
    fn division_by_zero_is_null_with_a_warning() {
        check_warns("guests / zero", "division by zero");
        check_warns("guests % zero", "division by zero");
        check_warns("price / 0", "division by zero");
        check_warns("1.5 % 0.0", "division by zero");
    }

    #[test]
    fn overflow_is_null_with_a_warning() {
        check_warns("big + 1", "overflows");
        check_warns("small - 1", "overflows");
        check_warns("big * 2", "overflows");
        check_warns("small / -1", "overflows");
        check_warns("-small", "overflows");
        check_warns("huge * 10.0", "overflows");
    }

    #[test]
    fn functions() {
        check(&[
            ("len(hotel)", json!(11)),
            ("len(\"héllo\")", json!(5)),
            ("len(tags)", json!(2)),
            ("len(contact)", json!(2)),
            ("lower(hotel)", json!("grand hotel")),
            ("upper(hotel)", json!("GRAND HOTEL")),
            ("contains(hotel, \"Grand\")", json!(true)),
            ("contains(hotel, \"grand\")", json!(false)),
            ("contains(tags, \"b\")", json!(true)),
            ("contains(tags, \"z\")", json!(false)),
            ("join(tags, \", \")", json!("a, b")),
            ("join(tags, \"\")", json!("ab")),
            ("join(days, \" / \")", json!("2026-01-04")),
            ("join(no_list, \", \")", Value::Null),
        ]);
    }

    #[test]
    fn join_reads_items_as_a_template_does() {
        let (rendered, warnings) = render_text("Toppings: {{ join(tags, \" and \") }}.");
        assert_eq!((rendered.as_str(), warnings.len()), ("Toppings: a and b.", 0));
    }

    fn render_text(text: &str) -> (String, Vec<String>) {
        let bindings = session();
        let symbols = scope_symbols(&bindings);
        let mut diagnostics = Vec::new();
        let ast = parse_template(text, SpanMap::Exact { base: 0 }, &mut diagnostics);
        let mut type_errors = Vec::new();
        let template = Checker {
            scope: Scope { symbols: &symbols, fields_visible: true, locals: &[], env_allowed: false, steps: None },
            errors: &mut type_errors,
        }
        .template(&ast);
        assert!(diagnostics.is_empty() && type_errors.is_empty(), "{text}");
        let mut warnings = Vec::new();
        let rendered = render(&template, &bindings, &mut warnings);
        (rendered, warnings)
    }

    #[test]
    fn templates_render_values_as_text() {
        for (text, expected) in [
            ("Book {{hotel}} for {{guests}}?", "Book Grand Hotel for 3?"),
            ("[{{missing}}]", "[]"),
            ("{{confirmed}}/{{declined}}", "true/false"),
            ("{{ 7 / 2.0 }}", "3.5"),
            ("{{tags}}", "[\"a\",\"b\"]"),
            ("{{contact}}", "{\"name\":\"Ada\",\"email\":\"ada@example.com\"}"),
            ("on {{date}}", "on 2026-01-04"),
            ("no braces", "no braces"),
        ] {
            assert_eq!(render_text(text).0, expected, "{text}");
        }
        let (rendered, warnings) = render_text("{{guests / zero}}!");
        assert_eq!((rendered.as_str(), warnings.len()), ("!", 1));
    }
}
