//! Tests of the type checker: the type of each expression and the errors
//! found, as values, and one snapshot of every wording.

use super::*;
use crate::expr::Function;
use crate::syntax::ast::BinaryOp;
use crate::syntax::expr::{SpanMap, parse_expr};

fn symbols() -> Symbols {
    let mut symbols = Symbols::default();
    let fields = [
        ("guests", Type::Int),
        ("hotel", Type::String),
        ("confirmed", Type::Bool),
        ("date", Type::Date),
        ("plan", Type::Enum(vec!["free".to_string(), "pro".to_string()].into())),
        ("contacts", Type::List(Type::Object(vec![("email".to_string(), Type::String)].into()).into())),
    ];
    for (index, (name, ty)) in fields.into_iter().enumerate() {
        symbols.fields.insert(name.to_string(), (FieldId(u32::try_from(index).unwrap_or(0)), ty));
    }
    symbols
        .context
        .insert("tier".to_string(), (ContextId(0), Type::Enum(vec!["basic".to_string(), "gold".to_string()].into())));
    symbols
}

/// Type-checks `text` and returns its type and the codes reported.
fn check(text: &str) -> (Type, Vec<String>) {
    check_with_steps(text, None)
}

/// [`check`] inside a workflow step that sees `steps`.
fn check_with_steps(text: &str, steps: Option<&StepOutputs>) -> (Type, Vec<String>) {
    let (ty, errors) = type_errors(text, steps);
    let codes = errors.into_iter().map(|error| error.into_diagnostic().code.as_str().to_string()).collect();
    (ty, codes)
}

/// Type-checks `text` (which must parse) and returns its type and the
/// errors found, in order.
fn type_errors(text: &str, steps: Option<&StepOutputs>) -> (Type, Vec<TypeError>) {
    check_at(text, &Place::Expr, steps, true)
}

/// Where an expression sits: a plain expression, a condition, or a
/// value written to a place of some type.
enum Place {
    Expr,
    Condition,
    Value(Type),
}

/// Type-checks `text` (which must parse) at `place`, in a workflow step
/// that sees `steps` or, without `fields_visible`, in a tool template.
fn check_at(text: &str, place: &Place, steps: Option<&StepOutputs>, fields_visible: bool) -> (Type, Vec<TypeError>) {
    let symbols = symbols();
    let mut syntax_errors = Vec::new();
    let ast = parse_expr(text, SpanMap::Exact { base: 0 }, &mut syntax_errors);
    assert_eq!(syntax_errors, Vec::new(), "{text}");
    let locals = [("c".to_string(), Type::Object(vec![("email".to_string(), Type::String)].into()))];
    let mut errors = Vec::new();
    let mut checker = Checker {
        scope: Scope { symbols: &symbols, fields_visible, locals: &locals, env_allowed: false, steps },
        errors: &mut errors,
    };
    let typed = match place {
        Place::Expr => checker.expr(&ast),
        Place::Condition => checker.condition(&ast),
        Place::Value(target) => checker.value_for(&ast, target, "`set`"),
    };
    (typed.ty, errors)
}

#[test]
fn well_typed_expressions_have_no_diagnostics() {
    for text in [
        "guests > 2 and confirmed == true",
        "plan in [\"free\", \"pro\"]",
        "context.tier == \"gold\"",
        "date >= today()",
        "date == \"2026-12-04\"",
        "len(contacts) > 0 and c.email is set",
        "lower(hotel) == \"ritz\" or contains(hotel, \"Grand\")",
        "guests + 1.5 > 3",
        "hotel + \"!\" != \"\"",
    ] {
        let (ty, codes) = check(text);
        assert_eq!((ty, codes), (Type::Bool, Vec::<String>::new()), "{text}");
    }
}

#[test]
fn int_compared_with_string_is_a_mismatch() {
    assert_eq!(check("guests == \"two\"").1, vec!["type_mismatch"]);
}

#[test]
fn enum_literal_must_be_declared() {
    assert_eq!(check("plan == \"gold\"").1, vec!["type_mismatch"]);
    assert_eq!(check("plan in [\"pro\", \"gold\"]").1, vec!["type_mismatch"]);
    assert_eq!(check("context.tier == \"platinum\"").1, vec!["type_mismatch"]);
}

#[test]
fn join_takes_a_list_and_a_string_separator() {
    assert_eq!(check("join(contacts, \", \")"), (Type::String, Vec::new()));
    assert_eq!(check("join(hotel, \", \")").1, vec!["type_mismatch"]);
    assert_eq!(check("join(contacts, 1)").1, vec!["type_mismatch"]);
    assert_eq!(check("join(contacts)").1, vec!["wrong_arity"]);
}

#[test]
fn plus_joins_lists_of_one_item_type() {
    let contact = Type::Object(vec![("email".to_string(), Type::String)].into());
    let contacts = Type::List(contact.into());
    assert_eq!(check("contacts + contacts"), (contacts.clone(), vec![]));
    assert_eq!(check("contacts + []"), (contacts.clone(), vec![]));
    assert_eq!(check("null + contacts"), (contacts, vec![]));
    assert_eq!(check("[1] + [2.5]"), (Type::List(Type::Float.into()), vec![]));
    assert_eq!(check("[hotel] + [guests]").1, ["type_mismatch"]);
    assert_eq!(check("[hotel] + hotel").1, ["type_mismatch"]);
    assert_eq!(check("[hotel] - [hotel]").1, ["type_mismatch"]);
}

#[test]
fn ordering_a_bool_is_a_mismatch() {
    assert_eq!(check("confirmed < true").1, vec!["type_mismatch"]);
}

#[test]
fn unknown_names_and_functions() {
    assert_eq!(check("gests > 1").1, vec!["unknown_field"]);
    assert_eq!(check("context.tear == 1").1, vec!["unknown_field"]);
    assert_eq!(check("c.mail is set").1, vec!["unknown_field"]);
    assert_eq!(check("lenght(hotel) > 1").1, vec!["unknown_function"]);
    assert_eq!(check("len(hotel, 2) > 1").1, vec!["wrong_arity"]);
    assert_eq!(check("env.TOKEN == \"x\"").1, vec!["unknown_field"]);
}

#[test]
fn one_mistake_is_reported_once() {
    assert_eq!(check("gests > 1 and gests < 3 + gests").1.len(), 3);
    assert_eq!(check("(gests + 1) * 2 > 3").1, vec!["unknown_field"]);
}

#[test]
fn invalid_dates_are_mismatches() {
    assert_eq!(check("date == \"tomorrow\"").1, vec!["type_mismatch"]);
}

/// Type-checks `text` inside the third step of a workflow whose steps
/// record `fetch` (a tool's object), `log` (untyped), `review` (this
/// step) and `send` (later).
fn check_in_workflow(text: &str) -> (Type, Vec<String>) {
    let outputs = StepOutputs {
        steps: vec![
            ("fetch".to_string(), Some(Type::Object(vec![("score".to_string(), Type::Int)].into()))),
            ("log".to_string(), None),
            ("review".to_string(), Some(Type::Object(Vec::new().into()))),
            ("send".to_string(), Some(Type::Object(Vec::new().into()))),
        ],
        current: 2,
    };
    check_with_steps(text, Some(&outputs))
}

#[test]
fn an_earlier_steps_output_has_its_recorded_type() {
    assert_eq!(check_in_workflow("steps.fetch.output.score"), (Type::Int, Vec::new()));
    assert_eq!(check_in_workflow("steps.fetch.output.score > guests"), (Type::Bool, Vec::new()));
    assert_eq!(check_in_workflow("steps.fetch.output.score == \"high\"").1, vec!["type_mismatch"]);
    assert_eq!(check_in_workflow("steps.fetch.output.scor").1, vec!["unknown_field"]);
}

#[test]
fn unreadable_step_outputs_are_errors() {
    assert_eq!(check_in_workflow("steps.log.output is set").1, vec!["type_mismatch"]);
    assert_eq!(check_in_workflow("steps.review.output is set").1, vec!["unknown_field"]);
    assert_eq!(check_in_workflow("steps.send.output is set").1, vec!["unknown_field"]);
    assert_eq!(check_in_workflow("steps.fech.output is set").1, vec!["unknown_field"]);
    assert_eq!(check_in_workflow("steps.fetch.status is set").1, vec!["unknown_field"]);
    assert_eq!(check_in_workflow("steps.fetch is set").1, vec!["unknown_field"]);
}

#[test]
fn step_outputs_are_unknown_outside_a_workflow_step() {
    assert_eq!(check("steps.fetch.output is set").1, vec!["unknown_field"]);
}

/// A float literal past `f64::MAX`, which parses as infinity.
const INFINITE_FLOAT: &str = concat!(
    "1",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
    ".0 > 1"
);

/// One expression of every kind the checker rejects, with where it sits
/// and whether it is in a workflow's third step (`in_workflow`) or a
/// tool template (`!fields_visible`).
fn wording_cases() -> Vec<(&'static str, Place, bool, bool)> {
    let plan = Type::Enum(vec!["free".to_string(), "pro".to_string()].into());
    vec![
        ("guests + 1", Place::Condition, false, true),
        ("hotel", Place::Value(Type::Int), false, true),
        ("\"gold\"", Place::Value(plan), false, true),
        ("\"tomorrow\"", Place::Value(Type::Date), false, true),
        ("\"soon\"", Place::Value(Type::DateTime), false, true),
        ("[1]", Place::Value(Type::List(Type::String.into())), false, true),
        (INFINITE_FLOAT, Place::Expr, false, true),
        ("[1, \"a\"]", Place::Expr, false, true),
        ("context", Place::Expr, false, true),
        ("context.tiers", Place::Expr, false, true),
        ("context.zzzzzz", Place::Expr, false, true),
        ("env", Place::Expr, false, true),
        ("env.TOKEN", Place::Expr, false, true),
        ("steps.fetch", Place::Expr, true, true),
        ("steps.fetch.status", Place::Expr, true, true),
        ("steps.fetch.output", Place::Expr, false, true),
        ("steps.fech.output", Place::Expr, true, true),
        ("steps.zzzzzz.output", Place::Expr, true, true),
        ("steps.review.output", Place::Expr, true, true),
        ("steps.send.output", Place::Expr, true, true),
        ("steps.log.output", Place::Expr, true, true),
        ("gests", Place::Expr, false, true),
        ("zzzzzz", Place::Expr, false, true),
        ("zzzzzz", Place::Expr, false, false),
        ("c.mail", Place::Expr, false, true),
        ("c.zzzzzz", Place::Expr, false, true),
        ("hotel.name", Place::Expr, false, true),
        ("not guests", Place::Expr, false, true),
        ("guests and confirmed", Place::Expr, false, true),
        ("-hotel", Place::Expr, false, true),
        ("guests not in \"abc\"", Place::Expr, false, true),
        ("contains(guests, 1)", Place::Expr, false, true),
        ("join(hotel, \",\")", Place::Expr, false, true),
        ("plan == \"gold\"", Place::Expr, false, true),
        ("\"fre\" == plan", Place::Expr, false, true),
        ("date == \"tomorrow\"", Place::Expr, false, true),
        ("steps.fetch.output.at == \"soon\"", Place::Expr, true, true),
        ("guests == \"two\"", Place::Expr, false, true),
        ("confirmed < true", Place::Expr, false, true),
        ("guests in 3", Place::Expr, false, true),
        ("confirmed + 1", Place::Expr, false, true),
        ("hotel * 2", Place::Expr, false, true),
        ("contacts + [hotel]", Place::Expr, false, true),
        ("lenn(hotel)", Place::Expr, false, true),
        ("zzzzzz()", Place::Expr, false, true),
        ("len(hotel, 2)", Place::Expr, false, true),
        ("today(1)", Place::Expr, false, true),
        ("len(guests)", Place::Expr, false, true),
    ]
}

fn workflow_outputs() -> StepOutputs {
    let fetched = vec![("score".to_string(), Type::Int), ("at".to_string(), Type::DateTime)];
    StepOutputs {
        steps: vec![
            ("fetch".to_string(), Some(Type::Object(fetched.into()))),
            ("log".to_string(), None),
            ("review".to_string(), Some(Type::Object(Vec::new().into()))),
            ("send".to_string(), Some(Type::Object(Vec::new().into()))),
        ],
        current: 2,
    }
}

/// Every wording of the type checker, one case per kind of error:
/// the source, then the code, message, labels and help it is written as.
#[test]
fn every_type_error_in_words() {
    use std::fmt::Write as _;
    let outputs = workflow_outputs();
    let mut out = String::new();
    for (text, place, in_workflow, fields_visible) in wording_cases() {
        let (_, errors) = check_at(text, &place, in_workflow.then_some(&outputs), fields_visible);
        assert_eq!(errors.len(), 1, "{text}: {errors:?}");
        for diagnostic in errors.into_iter().map(TypeError::into_diagnostic) {
            let _ = writeln!(out, "{text}\n  {}: {}", diagnostic.code.as_str(), diagnostic.message);
            for label in &diagnostic.labels {
                let _ = writeln!(out, "  {}..{}: {}", label.span.start, label.span.end, label.text);
            }
            let _ = writeln!(out, "  help: {}", diagnostic.help.as_deref().unwrap_or("-"));
        }
    }
    insta::with_settings!({ snapshot_path => "../../../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("typeck_wording", out);
    });
}

#[test]
fn an_unknown_name_carries_the_nearest_declared_name() {
    let (ty, errors) = type_errors("gests > 1", None);
    let unknown = NameError::UnknownName {
        name: "gests".to_string(),
        span: Span::new(0, 5),
        close: Some("guests".to_string()),
        fields_visible: true,
    };
    assert_eq!((ty, errors), (Type::Bool, vec![unknown.into()]));
}

#[test]
fn errors_are_recorded_in_the_order_found() {
    let (_, errors) = type_errors("gests > 1 and zzz < 3 + hotel", None);
    let found: Vec<(Span, &str)> = errors
        .iter()
        .map(|error| match error {
            TypeError::Name(NameError::UnknownName { name, .. }) => (error.span(), name.as_str()),
            other => (other.span(), "not an unknown name"),
        })
        .collect();
    let arithmetic = OperatorError::Arithmetic {
        op: BinaryOp::Add,
        left: Type::Int,
        right: Type::String,
        culprit: Type::String,
        span: Span::new(24, 29),
    };
    assert_eq!(
        found,
        vec![(Span::new(0, 5), "gests"), (Span::new(14, 17), "zzz"), (Span::new(24, 29), "not an unknown name")]
    );
    assert_eq!(errors.get(2), Some(&arithmetic.into()));
}

#[test]
fn an_enum_comparison_points_at_the_literal_on_either_side() {
    let not_a_value = |span| OperatorError::NotAnEnumValue {
        value: "fre".to_string(),
        values: vec!["free".to_string(), "pro".to_string()],
        span,
        close: Some("free".to_string()),
    };
    assert_eq!(type_errors("plan == \"fre\"", None).1, vec![not_a_value(Span::new(8, 13)).into()]);
    assert_eq!(type_errors("\"fre\" == plan", None).1, vec![not_a_value(Span::new(0, 5)).into()]);
}

#[test]
fn a_call_with_too_many_arguments_is_unknown_and_counts_them() {
    let (ty, errors) = type_errors("len(hotel, 2)", None);
    let arity = CallError::WrongArity { function: Function::Len, found: 2, span: Span::new(0, 13) };
    assert_eq!((ty, errors), (Type::Unknown, vec![arity.into()]));
}

#[test]
fn a_value_for_a_place_says_why_it_does_not_fit() {
    let plan = Type::Enum(vec!["free".to_string(), "pro".to_string()].into());
    let (_, errors) = check_at("\"gold\"", &Place::Value(plan.clone()), None, true);
    let unassignable = TypeError::NotAssignable {
        what: "`set`".to_string(),
        target: plan,
        found: Type::String,
        problem: Unassignable::NotAnEnumValue("gold".to_string()),
        span: Span::new(0, 6),
    };
    assert_eq!(errors, vec![unassignable]);
}

#[test]
fn a_step_output_read_too_early_says_whose_it_is() {
    let outputs = workflow_outputs();
    let (_, errors) = type_errors("steps.review.output", Some(&outputs));
    let own =
        StepOutputError::StepOutputNotYetRecorded { step: "review".to_string(), own: true, span: Span::new(0, 19) };
    assert_eq!(errors, vec![own.into()]);
}
