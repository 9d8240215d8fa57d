use super::*;
use crate::pipeline::compile;
use crate::source::SourceFile;

const WORKFLOW: &str = r#"schema { total: int  note: string }
    tool clock() -> { now: datetime } { builtin now }
    tool echo(note: string) -> { note: string } { builtin echo }
    flow f { default
        auto step count { set total = 1 }
        auto step stamp { call clock() }
        auto step twice { call clock()  call clock() }
        auto step looped { for t in [1, 2] { call clock() } }
        auto step saved { call echo(note: "a") -> note }
        auto step use { set total = steps.count.output.total * 10
                        set note = steps.saved.output.note } }"#;

fn shapes(text: &str) -> (Vec<OutputShape>, Vec<&'static str>) {
    let compiled = compile(&SourceFile::new("t.flow", text));
    let codes = compiled.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
    let flow = compiled.ir.flows.first();
    (flow.map(|flow| flow.steps.iter().map(|step| output_shape(&step.actions)).collect()).unwrap_or_default(), codes)
}

#[test]
fn a_steps_output_shape_follows_its_actions() {
    let (shapes, codes) = shapes(WORKFLOW);
    assert_eq!(codes, Vec::<&str>::new());
    assert_eq!(
        shapes,
        [
            OutputShape::Fields(vec![FieldId(0)]),
            OutputShape::Call(ToolId(0)),
            OutputShape::Untyped,
            OutputShape::Untyped,
            OutputShape::Fields(vec![FieldId(1)]),
            OutputShape::Fields(vec![FieldId(0), FieldId(1)]),
        ]
    );
}

#[test]
fn a_later_step_reads_an_earlier_output_at_its_type() {
    let compiled = compile(&SourceFile::new("t.flow", WORKFLOW));
    let last = compiled.ir.flows.first().and_then(|flow| flow.steps.last());
    let Some(ActionKind::Set(write)) = last.and_then(|step| step.actions.first()).map(|action| &action.kind) else {
        panic!("the last step sets a field first");
    };
    assert_eq!(write.value.ty, Type::Int);
    let crate::expr::ExprKind::Binary { left, .. } = &write.value.kind else {
        panic!("a product: {:?}", write.value.kind);
    };
    let crate::expr::ExprKind::Member { object, member } = &left.kind else {
        panic!("a member: {:?}", left.kind);
    };
    assert_eq!(member, "total");
    assert!(
        matches!(&object.kind, crate::expr::ExprKind::StepOutput { step, name } if *step == StepId(0) && name == "count")
    );
    assert_eq!(object.ty, Type::Object(vec![("total".to_string(), Type::Int)].into()));
}

#[test]
fn a_steps_branches_read_its_own_output_and_its_skip_if_cannot() {
    let text = r#"schema { total: int }
        tool clock() -> { now: datetime } { builtin now }
        flow f { default
            auto step stamp { call clock()
                              branch { if steps.stamp.output.now is set -> done } }
            auto step done { set total = 1 } }"#;
    assert_eq!(shapes(text).1, Vec::<&str>::new());
    let own_skip = text.replace("auto step stamp {", "auto step stamp { skip_if steps.stamp.output is set ");
    assert_eq!(shapes(&own_skip).1, ["unknown_field"]);
}

#[test]
fn a_conversation_cannot_read_step_outputs() {
    let text = r#"schema { note: string }
        flow f { default
            step ask { prompt "Note?"  collect note }
            step show { say "{{steps.ask.output}}" } }"#;
    assert_eq!(shapes(text).1, ["unknown_field"]);
}
