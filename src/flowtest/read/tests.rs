use super::*;
use crate::diag::Code;

fn booking() -> Program {
    crate::pipeline::compile(&SourceFile::new("booking.flow", include_str!("../../../flows/booking.flow"))).ir
}

fn onboarding() -> Program {
    crate::pipeline::compile(&SourceFile::new("onboarding.flow", include_str!("../../../flows/onboarding.flow"))).ir
}

fn read_text(text: &str, program: &Program) -> (Option<TestFile>, Vec<Diagnostic>) {
    read(SourceFile::new("t.test.yaml", text), Path::new("dir/t.test.yaml"), Some(program))
}

fn codes(diagnostics: &[Diagnostic]) -> Vec<Code> {
    diagnostics.iter().map(|diagnostic| diagnostic.code).collect()
}

#[test]
fn a_turn_reads_into_expectations_with_the_spans_of_their_values() {
    let text = "program: booking.flow\ncases:\n  - name: c\n    turns:\n      - user: hi\n        step: confirm\n        \
                llm_calls: 2\n        reply: { matches: \"^Shall\" }\n";
    let (file, diagnostics) = read_text(text, &booking());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let file = file.expect("read");
    assert_eq!(file.program, PathBuf::from("dir/booking.flow"), "relative to the test file");
    let CaseBody::Conversation(turns) = &file.cases[0].body else { panic!("a conversation") };
    let kinds: Vec<&str> = turns[0].expects.iter().map(|expect| expect.kind.key()).collect();
    assert_eq!(kinds, ["step", "llm_calls", "reply"]);
    let step = &turns[0].expects[0];
    assert_eq!(&text[step.value.range()], "confirm");
    assert!(matches!(&turns[0].expects[1].kind, ExpectKind::LlmCalls(2)));
}

#[test]
fn a_workflow_case_must_name_a_workflow_and_a_valid_duration() {
    let text = "program: onboarding.flow\ncases:\n  - name: w\n    workflow: onboarding\n    run: { status: waiting, \
                steps: { check: pending } }\n    resumes:\n      - after: one day\n";
    let (_, diagnostics) = read_text(text, &onboarding());
    assert_eq!(codes(&diagnostics), [Code::InvalidDuration]);
    let text = "program: booking.flow\ncases:\n  - name: w\n    workflow: booking\n";
    let (_, diagnostics) = read_text(text, &booking());
    assert_eq!(codes(&diagnostics), [Code::InvalidValue]);
    assert!(diagnostics[0].message.contains("is not a workflow"), "{diagnostics:?}");
}

#[test]
fn shapes_the_reader_refuses_are_diagnostics() {
    let text = "program: booking.flow\nprovider: gpt\ncases:\n  - name: both\n    turns: []\n    workflow: booking\n  \
                - name: stub\n    tools:\n      book_hotel: { returns: {}, error: x }\n    turns:\n      - user: hi\n        \
                stopped_reason: finished\n        llm_calls: -1\n";
    let (_, diagnostics) = read_text(text, &booking());
    let found = codes(&diagnostics);
    assert_eq!(found.iter().filter(|code| **code == Code::InvalidValue).count(), 5, "{diagnostics:?}");
    let text = "cases: []\n";
    let error = program_path(&SourceFile::new("t.test.yaml", text), Path::new("t.test.yaml")).err();
    assert_eq!(error.map(|diagnostic| diagnostic.code), Some(Code::MissingEntry));
}

#[test]
fn a_replay_names_a_recording_that_exists() {
    let text = "program: booking.flow\nprovider: replay:missing.json\ncases: []\n";
    let (_, diagnostics) = read_text(text, &booking());
    assert_eq!(codes(&diagnostics), [Code::InvalidValue]);
    assert!(diagnostics[0].message.contains("no recording at"), "{diagnostics:?}");
}

#[test]
fn an_unknown_stop_reason_or_run_status_is_named_with_the_known_ones() {
    let text =
        "program: booking.flow\ncases:\n  - name: c\n    turns:\n      - user: hi\n        stopped_reason: parked\n";
    let (_, diagnostics) = read_text(text, &booking());
    assert_eq!(codes(&diagnostics), [Code::InvalidValue]);
    assert_eq!(diagnostics[0].message, "unknown stop reason `parked`");
    assert_eq!(diagnostics[0].labels[0].text, "not a stop reason");
    assert!(
        diagnostics[0].help.as_deref().is_some_and(|help| help.starts_with("a turn stops with one of needs_input"))
    );
    assert_eq!(&text[diagnostics[0].labels[0].span.range()], "parked");

    let text = "program: onboarding.flow\ncases:\n  - name: w\n    workflow: onboarding\n    run: { status: asleep }\n";
    let (_, diagnostics) = read_text(text, &onboarding());
    assert_eq!(codes(&diagnostics), [Code::InvalidValue]);
    assert_eq!(diagnostics[0].message, "unknown run status `asleep`");
    assert_eq!(diagnostics[0].labels[0].text, "not a status");
    assert!(diagnostics[0].help.as_deref().is_some_and(|help| help.starts_with("a run is ")));
}
