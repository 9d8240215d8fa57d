//! Lowering's problems as values: each test lowers a small program and
//! asserts on the [`LowerError`]s it records, facts and spans, not on
//! their wording (which `tests/check`'s snapshots pin).

use super::*;
use crate::duration::DurationError;
use crate::expr::typeck::{NameError as TypeNameError, TypeError};
use crate::source::SourceFile;

/// The problems lowering records for `source` (a `.flow` file, or YAML
/// when `name` ends in `.yaml`), and the file to read their spans in.
fn lowered(name: &str, source: &str) -> (SourceFile, Vec<LowerError>) {
    let file = SourceFile::new(name, source);
    let (ast, front_end) = crate::syntax::parse(&file);
    assert!(front_end.is_empty(), "the front end reported {front_end:?}");
    let (_, errors) = lower_to_errors(ast);
    (file, errors)
}

fn errors(source: &str) -> (SourceFile, Vec<LowerError>) {
    lowered("test.flow", source)
}

fn at(file: &SourceFile, needle: &str, occurrence: usize) -> Span {
    crate::diag::span_of(&file.text, needle, occurrence)
}

/// The span of the last `length` bytes of `span`.
fn tail(span: Span, length: u32) -> Span {
    Span::new(span.end - length, span.end)
}

#[test]
fn a_field_declared_twice_keeps_both_places() {
    let (file, errors) = errors("schema { guests: int  guests: string }");
    assert_eq!(
        errors,
        [LowerError::Id(IdError::DuplicateId {
            kind: IdKind::Field,
            name: "guests".to_string(),
            span: at(&file, "guests", 1),
            first: at(&file, "guests", 0),
        })]
    );
}

#[test]
fn ids_that_are_not_names_or_are_reserved() {
    let (file, errors) = lowered("test.yaml", "schema:\n  my-field: string\n  end: int\n");
    assert_eq!(
        errors,
        [
            LowerError::Id(IdError::MalformedId {
                kind: IdKind::Field,
                name: "my-field".to_string(),
                span: at(&file, "my-field", 0)
            }),
            LowerError::Id(IdError::ReservedWord {
                kind: IdKind::Field,
                name: "end".to_string(),
                span: at(&file, "end", 0)
            }),
        ]
    );
}

#[test]
fn a_misspelt_field_names_the_close_declared_one() {
    let (file, errors) = errors(
        r#"schema { booking: string }
        flow f { when "w"  step s { collect bokking } }"#,
    );
    assert_eq!(
        errors,
        [LowerError::Name(NameError::UnknownField {
            name: "bokking".to_string(),
            span: at(&file, "bokking", 0),
            close: Some("booking".to_string()),
        })]
    );
}

#[test]
fn schema_problems_are_told_apart() {
    let (file, errors) = errors("schema { a: strng  b: int 5..2  c: string 7..9 }");
    assert_eq!(
        errors,
        [
            LowerError::Schema(SchemaError::UnknownType { name: "strng".to_string(), span: at(&file, "strng", 0) }),
            LowerError::Schema(SchemaError::MinAboveMax { min: at(&file, "5", 0), max: at(&file, "2", 0) }),
            LowerError::Schema(SchemaError::InvalidSchema {
                problem: SchemaProblem::BoundOnNonNumeric,
                span: at(&file, "7", 0)
            }),
            LowerError::Schema(SchemaError::InvalidSchema {
                problem: SchemaProblem::BoundOnNonNumeric,
                span: at(&file, "9", 0)
            }),
        ]
    );
}

#[test]
fn a_bare_step_of_another_flow_is_a_cross_flow_step() {
    let (file, errors) = errors(
        r#"flow a { when "a"  step s { say "s"  next t } }
        flow b { when "b"  step t { say "t" } }"#,
    );
    assert_eq!(
        errors,
        [LowerError::Name(NameError::CrossFlowStep {
            name: "t".to_string(),
            span: tail(at(&file, "next t", 0), 1),
            owner: "b".to_string(),
        })]
    );
}

#[test]
fn unresolved_targets_keep_what_they_could_have_meant() {
    let (file, errors) = errors(
        r#"flow a { when "a"
            step ask { branch { if 1 == 2 -> compelte  else -> tell } }
            step tell { say "t"  next billing } }
        flow billing { when "b"  step u { say "u" } }"#,
    );
    assert_eq!(
        errors,
        [
            LowerError::Name(NameError::UnknownStepTarget {
                name: "compelte".to_string(),
                span: at(&file, "compelte", 0),
                flows_allowed: true,
                close: None,
                misspelt_directive: Some("complete"),
                names_a_flow: false,
            }),
            LowerError::Name(NameError::UnknownStepTarget {
                name: "billing".to_string(),
                span: tail(at(&file, "next billing", 0), 7),
                flows_allowed: false,
                close: None,
                misspelt_directive: None,
                names_a_flow: true,
            }),
        ]
    );
}

#[test]
fn a_call_names_its_unknown_and_missing_params() {
    let (file, errors) = errors(
        r#"schema { hotel: string }
        tool book(hotel: string, guests: int) { builtin echo }
        flow f { when "w"  auto step s { call book(hotel: hotel, room: 2) } }"#,
    );
    assert_eq!(
        errors,
        [
            LowerError::Action(ActionError::UnknownParam {
                tool: "book".to_string(),
                param: "room".to_string(),
                span: at(&file, "room", 0),
                params: vec!["hotel".to_string(), "guests".to_string()],
            }),
            LowerError::Action(ActionError::MissingArguments {
                tool: "book".to_string(),
                missing: vec!["guests".to_string()],
                span: at(&file, "book", 1),
            }),
        ]
    );
}

#[test]
fn a_save_that_does_not_fit_holds_both_types() {
    let (file, errors) = errors(
        r#"schema { booking_id: int }
        tool book() -> { id: string } { builtin uuid }
        flow f { when "w"  auto step s { call book() -> booking_id } }"#,
    );
    assert_eq!(
        errors,
        [LowerError::Action(ActionError::SaveMismatch {
            field: "booking_id".to_string(),
            field_type: Type::Int,
            tool: "book".to_string(),
            saved: Some("id".to_string()),
            saved_type: Type::String,
            span: at(&file, "booking_id", 1),
        })]
    );
}

#[test]
fn a_directive_with_two_positions_names_both_keys() {
    let (_, errors) = errors(
        r#"flow f { when "w"  step s { say "s"  emit { goto g  reset } } }
        flow g { when "g"  step t { say "t" } }"#,
    );
    let [LowerError::Directive(DirectiveError::TwoPositions { first, second, .. })] = errors.as_slice() else {
        panic!("expected one TwoPositions, found {errors:?}");
    };
    assert_eq!((*first, *second), ("goto", "reset"));
}

#[test]
fn durations_and_step_settings_out_of_range() {
    let (file, errors) = errors(
        r#"schema { x: string }
        flow f { when "w"
            step ask { collect x  max_asks 0  wait 1m }
            auto step s { set x = "y"  wait 5min } }"#,
    );
    assert_eq!(
        errors,
        [
            LowerError::Step(StepError::WaitOnInputStep { step: "ask".to_string(), span: at(&file, "1m", 0) }),
            LowerError::Step(StepError::MaxAsksBelowOne { value: 0, span: at(&file, "0", 0) }),
            LowerError::Value(ValueError::InvalidDuration {
                text: "5min".to_string(),
                problem: DurationError::Malformed,
                span: at(&file, "5min", 0),
            }),
        ]
    );
}

#[test]
fn on_error_kinds_are_checked_against_the_kind_of_flow() {
    let (_, errors) = errors(
        r#"schema { x: string }
        flow f { when "w"  step s { collect x  on_error continue } }"#,
    );
    let [LowerError::Step(StepError::OnErrorNotAllowed { step, workflow, kind, .. })] = errors.as_slice() else {
        panic!("expected one OnErrorNotAllowed, found {errors:?}");
    };
    assert_eq!((step.as_str(), *workflow, *kind), ("s", false, OnErrorKind::Continue));
}

#[test]
fn signal_settings_and_a_second_default() {
    let (file, errors) = errors(
        r#"signal s { when "x"  phase later  then f }
        flow f { default  step a { say "a" } }
        flow g { default  step b { say "b" } }"#,
    );
    assert_eq!(
        errors,
        [
            LowerError::Id(IdError::DuplicateDefault {
                flow: "g".to_string(),
                span: at(&file, "default", 1),
                first_flow: "f".to_string(),
                first: at(&file, "default", 0),
            }),
            LowerError::Value(ValueError::InvalidSignalSetting {
                problem: SignalProblem::UnknownPhase("later".to_string()),
                span: at(&file, "later", 0),
            }),
        ]
    );
}

#[test]
fn an_expression_problem_is_the_type_checkers_own_in_the_order_found() {
    let (_, errors) = errors(
        r#"schema { n: int }
        flow f { when "w"  step s { say "{{missing}}"  collect nn } }"#,
    );
    let [
        LowerError::Name(NameError::UnknownField { name, .. }),
        LowerError::Expression(TypeError::Name(TypeNameError::UnknownName { name: missing, .. })),
    ] = errors.as_slice()
    else {
        panic!("expected an unknown field, then the type checker's unknown name, found {errors:?}");
    };
    assert_eq!((name.as_str(), missing.as_str()), ("nn", "missing"));
}

#[test]
fn the_diagnostic_is_written_from_the_value_alone() {
    let error = LowerError::Schema(SchemaError::UnknownType { name: "strng".to_string(), span: Span::new(3, 8) });
    let diagnostic = error.into_diagnostic();
    assert_eq!(diagnostic.code, crate::diag::Code::UnknownType);
    assert_eq!(diagnostic.primary_span(), Some(Span::new(3, 8)));
    assert_eq!(diagnostic.help.as_deref(), Some("did you mean `string`?"));
}

#[test]
fn an_append_in_a_loop_lowers_to_an_append_of_a_typed_item() {
    let source = r#"schema { contacts: list(object { name: string, email: string })  welcomed: list(string) }
        flow f { requires contacts
          auto step s { for c in contacts { append c.email to welcomed } } }"#;
    let (ast, front_end) = crate::syntax::parse(&SourceFile::new("test.flow", source));
    assert!(front_end.is_empty(), "the front end reported {front_end:?}");
    let (program, errors) = lower_to_errors(ast);
    assert!(errors.is_empty(), "lowering reported {errors:?}");
    let actions = &program.flows[0].steps[0].actions;
    let [Action { kind: ActionKind::ForEach(for_each), .. }] = actions.as_slice() else {
        panic!("one for_each, found {actions:?}")
    };
    let [Action { kind: ActionKind::Append(write), .. }] = for_each.actions.as_slice() else {
        panic!("one append in the loop, found {:?}", for_each.actions)
    };
    assert_eq!(program.field(write.field).map(|field| field.name.as_str()), Some("welcomed"));
    assert_eq!(write.value.ty, Type::String);
}

#[test]
fn an_append_needs_a_list_field_and_an_item_of_its_type() {
    let (file, errors) = errors(
        r#"schema { welcomed: list(string)  count: int }
        flow f { when "w"  auto step s { append 3 to welcomed  append "x" to count } }"#,
    );
    let [
        LowerError::Expression(TypeError::NotAssignable { target: Type::String, found: Type::Int, span: item, .. }),
        LowerError::Action(ActionError::AppendToNonList { field, found: Type::Int, span: list }),
    ] = errors.as_slice()
    else {
        panic!("expected an item that does not fit, then a field that is not a list, found {errors:?}");
    };
    assert_eq!(*item, at(&file, "3", 0));
    assert_eq!((field.as_str(), *list), ("count", at(&file, "count", 1)));
}
