//! `flowc compile`: the IR of every example (snapshotted), the two
//! syntaxes agreeing, and the exit codes of bad input.

use crate::snapshot;
use crate::support::{examples, flowc, root, stderr, stdout, temp_dir};

#[test]
fn every_example_compiles_and_its_ir_is_snapshotted() {
    let examples = examples();
    assert!(examples.len() >= 4, "flows/ holds the examples");
    for path in examples {
        let relative = path.strip_prefix(root()).expect("under the root");
        let relative = relative.to_string_lossy();
        let output = flowc(&["compile", &relative]);
        assert_eq!(output.status.code(), Some(0), "{relative}: {}", stderr(&output));
        assert_eq!(stderr(&output), "", "{relative} compiles without diagnostics");
        let name = format!("ir__{}", relative.replace(['/', '.'], "_"));
        snapshot!(name, stdout(&output));
    }
}

#[test]
fn booking_is_the_same_program_in_both_syntaxes() {
    let from_flow = flowc(&["compile", "flows/booking.flow"]);
    let from_yaml = flowc(&["compile", "flows/booking.yaml"]);
    assert_eq!(from_flow.status.code(), Some(0));
    assert!(!stdout(&from_flow).is_empty());
    assert_eq!(stdout(&from_flow), stdout(&from_yaml));
}

#[test]
fn onboarding_is_the_same_program_in_both_syntaxes() {
    let from_flow = flowc(&["compile", "flows/onboarding.flow"]);
    let from_yaml = flowc(&["compile", "flows/onboarding.yaml"]);
    assert_eq!(from_flow.status.code(), Some(0));
    assert!(stdout(&from_flow).contains("\"action\": \"append\""), "{}", stdout(&from_flow));
    assert_eq!(stdout(&from_flow), stdout(&from_yaml));
}

#[test]
fn spans_appear_only_when_asked() {
    let plain = stdout(&flowc(&["compile", "flows/booking.flow"]));
    let with_spans = stdout(&flowc(&["compile", "flows/booking.flow", "--spans"]));
    assert!(!plain.contains("\"span\""));
    assert!(with_spans.contains("\"span\""));
}

#[test]
fn no_object_has_a_key_twice_with_or_without_spans() {
    // `input_loop.flow` emits directives from actions: their span and the
    // action's would be one key twice if the directive were merged in.
    for emit in ["json", "ast"] {
        for spans in [false, true] {
            let mut arguments = vec!["compile", "tests/fixtures/ok/input_loop.flow", "--emit", emit];
            if spans {
                arguments.push("--spans");
            }
            let output = flowc(&arguments);
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
            let printed = stdout(&output);
            let mut deserializer = serde_json::Deserializer::from_str(&printed);
            serde::de::Deserializer::deserialize_any(&mut deserializer, UniqueKeys)
                .unwrap_or_else(|error| panic!("--emit {emit}, spans {spans}: {error}"));
        }
    }
}

/// Visits a JSON document and fails on an object with a key twice (which
/// `serde_json::Value` would silently collapse).
struct UniqueKeys;

impl<'de> serde::de::Visitor<'de> for UniqueKeys {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("the key `{key}` appears twice in one object")));
            }
            map.next_value_seed(UniqueKeys)?;
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(UniqueKeys)?.is_some() {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for UniqueKeys {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

#[test]
fn emit_ast_prints_the_syntax_tree() {
    let output = flowc(&["compile", "flows/support.yaml", "--emit", "ast"]);
    assert_eq!(output.status.code(), Some(0));
    let ast: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(ast["flows"][0]["name"]["value"], "triage");
}

#[test]
fn a_program_with_errors_prints_diagnostics_and_exits_1() {
    let dir = temp_dir("compile-errors");
    let file = dir.join("broken.flow");
    std::fs::write(&file, "flow f {\n  step a { next nowhere }\n}\n").expect("write");
    let output = flowc(&["compile", &file.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let errors = stderr(&output);
    assert!(errors.contains("flowc::unknown_target"), "{errors}");
    assert!(errors.contains("help:"), "{errors}");
}

#[test]
fn unreadable_and_missing_paths_exit_2() {
    let output = flowc(&["compile", "flows/does-not-exist.flow"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot read `flows/does-not-exist.flow`"));
    let dir = temp_dir("empty-dir");
    let output = flowc(&["check", &dir.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("holds no program"), "{}", stderr(&output));
}

#[test]
fn empty_and_non_utf8_files_are_syntax_errors() {
    let dir = temp_dir("bad-bytes");
    let empty = dir.join("empty.yaml");
    std::fs::write(&empty, "# only a comment\n\n").expect("write");
    let output = flowc(&["compile", &empty.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("flowc::syntax"));
    let binary = dir.join("binary.flow");
    std::fs::write(&binary, b"flow f {\xff\xfe }").expect("write");
    let output = flowc(&["compile", &binary.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("not valid UTF-8"), "{}", stderr(&output));
}

#[test]
fn usage_errors_exit_2() {
    let output = flowc(&["compile"]);
    assert_eq!(output.status.code(), Some(2));
    let output = flowc(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
}

const RUNS_FLOW: &str = r#"
schema { hotel: string  confirmed: bool  booking_id: string  note: string }
tool book(hotel: string) -> { booking_id: string } { builtin echo }
flow booking {
  when "the user wants to book"
  keep hotel
  fresh booking_id
  step ask_hotel { prompt "Which hotel?" collect hotel }
  step confirm { prompt "Book {{hotel}}?" collect confirmed }
  auto step book {
    call book(hotel) -> booking_id
    set note = join([hotel, booking_id], " / ")
    on_error { reply "The booking system is down."  goto_step confirm }
  }
}
"#;

const RUNS_YAML: &str = r#"
schema:
  hotel: string
  confirmed: bool
  booking_id: string
  note: string
tools:
  book:
    params: { hotel: string }
    returns: { booking_id: string }
    builtin: echo
flows:
  booking:
    when: the user wants to book
    keep: [hotel]
    fresh: [booking_id]
    steps:
      - id: ask_hotel
        prompt: Which hotel?
        collect: [hotel]
      - id: confirm
        prompt: "Book {{hotel}}?"
        collect: [confirmed]
      - id: book
        auto: true
        do:
          - call: { tool: book, args: { hotel: hotel }, save: booking_id }
          - set: { note: 'join([hotel, booking_id], " / ")' }
        on_error: { reply: The booking system is down., goto_step: confirm }
"#;

/// `keep`, `fresh` and a conversation `on_error` mean the same in both
/// syntaxes: a run clears what its steps collect, minus `keep`, plus `fresh`.
#[test]
fn keep_fresh_and_on_error_are_the_same_in_both_syntaxes() {
    let dir = temp_dir("compile-runs");
    let written = [("runs.flow", RUNS_FLOW), ("runs.yaml", RUNS_YAML)]
        .iter()
        .all(|(name, text)| std::fs::write(dir.join(name), text).is_ok());
    assert!(written);
    let from_flow = flowc(&["compile", &dir.join("runs.flow").to_string_lossy()]);
    let from_yaml = flowc(&["compile", &dir.join("runs.yaml").to_string_lossy()]);
    assert_eq!(stderr(&from_flow), "");
    assert_eq!(stderr(&from_yaml), "");
    assert_eq!(stdout(&from_flow), stdout(&from_yaml));
    let ir: serde_json::Value = serde_json::from_str(&stdout(&from_flow)).unwrap_or_default();
    let flow = &ir["flows"][0];
    // Fields 0 hotel (kept), 1 confirmed (collected), 2 booking_id (fresh).
    assert_eq!(flow["fresh"], serde_json::json!([1, 2]));
    assert_eq!(flow["keep"], serde_json::json!([0]));
    let recovery = &flow["steps"][2]["recovery"]["directive"];
    assert_eq!(recovery["reply"]["parts"][0]["text"], "The booking system is down.");
    let _ = std::fs::remove_dir_all(&dir);
}

fn codes(name: &str, text: &str) -> Vec<&'static str> {
    let file = flowc::source::SourceFile::new(name, text);
    flowc::pipeline::compile(&file).diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect()
}

#[test]
fn on_error_kinds_belong_to_their_kind_of_flow() {
    let conversation = r#"
schema { a: string }
flow f {
  when "the user wants f"
  step ask { prompt "A?" collect a }
  auto step work { set a = "x"  ON_ERROR }
}
"#;
    for (on_error, expected) in [
        ("on_error continue", vec!["invalid_step"]),
        ("on_error retry 2 backoff 1s", vec!["invalid_step"]),
        ("on_error stop", vec![]),
        ("on_error reply \"Sorry.\"", vec![]),
        ("on_error abort \"Sorry.\"", vec![]),
    ] {
        assert_eq!(codes("c.flow", &conversation.replace("ON_ERROR", on_error)), expected, "{on_error}");
    }
    let workflow = r#"
schema { a: string }
flow w {
  auto step work { set a = "x"  ON_ERROR }
}
"#;
    for (on_error, expected) in [
        ("on_error continue", vec![]),
        ("on_error reply \"Sorry.\"", vec!["invalid_step"]),
        ("on_error { abort \"Sorry.\" }", vec!["invalid_step"]),
    ] {
        assert_eq!(codes("w.flow", &workflow.replace("ON_ERROR", on_error)), expected, "{on_error}");
    }
    let yaml_workflow = "schema:\n  a: string\nflows:\n  w:\n    steps:\n      - id: work\n        auto: true\n        do:\n          - set: { a: '\"x\"' }\n        on_error: { reply: Sorry. }\n";
    assert_eq!(codes("w.yaml", yaml_workflow), ["invalid_step"]);
}
