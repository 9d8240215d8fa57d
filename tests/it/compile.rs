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
