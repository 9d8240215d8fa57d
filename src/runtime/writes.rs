//! One phase's writes as one unit: everything the emitters of a phase
//! (signals, hooks, actions' `emit`s, tools' directives) set, merged, is
//! validated here together against the schema, and is committed whole or
//! not at all. A unit with a bad write names every bad write, not the
//! first: the conversation runtime records them in one `data_validation`
//! event, a workflow run in its step's error.

use super::session::Data;
use super::validate::validate;
use crate::ir::Program;
use serde::Serialize;
use serde_json::Value;

/// A write of a phase that was refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InvalidWrite {
    /// The field written (`context.KEY` for a context key).
    pub field: String,
    /// Why the value does not fit it ("`350` is above the maximum 10", "is
    /// not declared").
    pub reason: String,
}

/// A unit's writes, each validated and normalized, ready to commit.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    data: Vec<(String, Value)>,
    context: Vec<(String, Value)>,
}

/// Validates the merged writes of one phase together: every write to the
/// data (`set`) and to the context (`set_context`) must name a declared
/// field or key and fit its type. `Err` names each one that does not.
pub(crate) fn check(
    program: &Program,
    set: &[(String, Value)],
    set_context: &[(String, Value)],
) -> Result<Staged, Vec<InvalidWrite>> {
    let mut staged = Staged::default();
    let mut invalid = Vec::new();
    for (is_context, writes) in [(false, set), (true, set_context)] {
        let declared = if is_context { &program.context } else { &program.fields };
        for (name, value) in writes {
            let shown = if is_context { format!("context.{name}") } else { name.clone() };
            let Some(field) = declared.iter().find(|field| field.name == *name) else {
                invalid.push(InvalidWrite { field: shown, reason: "is not declared".to_string() });
                continue;
            };
            match validate(value, &field.ty) {
                Ok(valid) if is_context => staged.context.push((name.clone(), valid)),
                Ok(valid) => staged.data.push((name.clone(), valid)),
                Err(reason) => invalid.push(InvalidWrite { field: shown, reason }),
            }
        }
    }
    if invalid.is_empty() { Ok(staged) } else { Err(invalid) }
}

impl Staged {
    /// Writes the unit into `data` and `context`; null unsets.
    pub(crate) fn commit(self, data: &mut Data, context: &mut Data) {
        for (target, writes) in [(data, self.data), (context, self.context)] {
            for (name, value) in writes {
                if value.is_null() {
                    target.remove(&name);
                } else {
                    target.insert(name, value);
                }
            }
        }
    }
}

/// "`y`: `350` is above the maximum 10; `context.k`: is not declared".
pub(crate) fn describe(invalid: &[InvalidWrite]) -> String {
    invalid.iter().map(|write| format!("`{}`: {}", write.field, write.reason)).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn program() -> Program {
        let source = "schema { a: string  y: int 1..10 }\ncontext { tier: enum(basic, gold) }\nflow f { step s { collect a } }\n";
        crate::pipeline::compile(&crate::source::SourceFile::new("t.flow", source)).ir
    }

    fn writes(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs.iter().map(|(name, value)| (name.to_string(), value.clone())).collect()
    }

    #[test]
    fn a_valid_unit_commits_whole_normalized_and_null_unsets() {
        let program = program();
        let staged =
            check(&program, &writes(&[("a", json!("x")), ("y", json!(2.0))]), &writes(&[("tier", json!("GOLD"))]));
        let (mut data, mut context) = (Data::new(), Data::new());
        data.insert("gone".into(), json!(1));
        staged.unwrap().commit(&mut data, &mut context);
        assert_eq!(data.get("y"), Some(&json!(2)));
        assert_eq!(context.get("tier"), Some(&json!("gold")));
        let staged = check(&program, &writes(&[("a", Value::Null)]), &[]).unwrap();
        staged.commit(&mut data, &mut context);
        assert_eq!(data.get("a"), None);
    }

    #[test]
    fn every_bad_write_of_a_unit_is_named_and_none_is_staged() {
        let program = program();
        let invalid = check(
            &program,
            &writes(&[("a", json!("fine")), ("y", json!(350)), ("nope", json!(1))]),
            &writes(&[("tier", json!("platinum"))]),
        )
        .unwrap_err();
        let fields: Vec<&str> = invalid.iter().map(|write| write.field.as_str()).collect();
        assert_eq!(fields, ["y", "nope", "context.tier"]);
        assert_eq!(invalid[1].reason, "is not declared");
        assert!(describe(&invalid).starts_with("`y`: `350` is above the maximum 10; `nope`: is not declared; "));
    }
}
