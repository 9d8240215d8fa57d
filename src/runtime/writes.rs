//! One phase's writes as one unit: everything the emitters of a phase
//! (signals, hooks, actions' `emit`s and `set`s, tools' directives) write
//! is validated here against the schema, and the phase is committed whole
//! or not at all. A phase with a bad write names every bad write, not the
//! first: the conversation runtime records them in one `data_validation`
//! event ([`PhaseWrites`]), a workflow run in its step's error.

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
    /// The emitter whose write it was (`signal:vip`,
    /// `hook:book.pay.on_enter`), where a phase merges several; empty
    /// where the unit is one emitter's (a workflow step's).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
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
                invalid.push(InvalidWrite {
                    field: shown,
                    reason: "is not declared".to_string(),
                    source: String::new(),
                });
                continue;
            };
            match validate(value, &field.ty) {
                Ok(valid) if is_context => staged.context.push((name.clone(), valid)),
                Ok(valid) => staged.data.push((name.clone(), valid)),
                Err(reason) => invalid.push(InvalidWrite { field: shown, reason, source: String::new() }),
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

/// An emitter's writes: to the data (`set`), to the context (`set_context`).
pub(crate) type Writes<'a> = (&'a [(String, Value)], &'a [(String, Value)]);

/// Data or context: the two maps a phase writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Data,
    Context,
}

/// A field or context key a phase wrote: its value when the phase began
/// (`None`: unset) and the value the phase last gave it.
#[derive(Debug)]
struct Touched {
    target: Target,
    name: String,
    before: Option<Value>,
    written: Option<Value>,
}

/// The writes of one phase of a conversation turn, applied as they come
/// so that what runs later in the phase (routing, hooks, the next step)
/// reads them, with what is needed to take them all back. The first bad
/// write fails the phase: everything it wrote is undone at once, and
/// nothing it writes afterwards is applied (its bad writes are still
/// named). [`PhaseWrites::close`] returns every bad write, for one
/// `data_validation` event.
#[derive(Debug)]
pub(crate) struct PhaseWrites {
    name: &'static str,
    touched: Vec<Touched>,
    invalid: Vec<InvalidWrite>,
    /// The fields (`context.KEY` for a context key) whose valid writes the
    /// first bad one took back.
    undone: Vec<String>,
}

/// What a phase that had a bad write reports when it ends.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Every bad write, in the order they came.
    pub(crate) invalid: Vec<InvalidWrite>,
    /// The fields the phase had written and put back.
    pub(crate) undone: Vec<String>,
}

impl PhaseWrites {
    /// A phase named `name` (`pre-model`, `post-model`) begins.
    pub(crate) fn open(name: &'static str) -> PhaseWrites {
        PhaseWrites { name, touched: Vec::new(), invalid: Vec::new(), undone: Vec::new() }
    }

    /// The phase's name, the `source` of its `data_validation` event.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Whether a write of this phase was bad: then nothing of it is kept.
    pub(crate) fn failed(&self) -> bool {
        !self.invalid.is_empty()
    }

    /// One emitter's writes (or several merged): validated together; when
    /// all fit and the phase has not failed they are applied to `data`
    /// and `context` now. `source` names the emitter of a bad write (by
    /// the field as shown, `context.KEY` for a context key). Returns
    /// whether they were applied.
    pub(crate) fn apply(
        &mut self,
        program: &Program,
        (set, set_context): Writes<'_>,
        source: &dyn Fn(&str) -> String,
        data: &mut Data,
        context: &mut Data,
    ) -> bool {
        match check(program, set, set_context) {
            Ok(staged) if !self.failed() => {
                for (name, value) in &staged.data {
                    self.note(Target::Data, name, data.get(name).cloned(), value);
                }
                for (name, value) in &staged.context {
                    self.note(Target::Context, name, context.get(name).cloned(), value);
                }
                staged.commit(data, context);
                true
            }
            // The phase failed before: these writes fit, but are not kept.
            Ok(_) => false,
            Err(bad) => {
                if !self.failed() {
                    self.undo(data, context);
                }
                self.invalid
                    .extend(bad.into_iter().map(|write| InvalidWrite { source: source(&write.field), ..write }));
                false
            }
        }
    }

    /// Takes the data an emitter's own actions wrote as they ran (`set`,
    /// a `call`'s saved result; each validated by the action itself) into
    /// the phase: `written` replaces `data`, unless the phase has failed,
    /// when nothing more of it is kept. Returns whether it was taken.
    pub(crate) fn adopt(&mut self, data: &mut Data, written: Data) -> bool {
        if self.failed() {
            return false;
        }
        let names: std::collections::BTreeSet<&String> = data.keys().chain(written.keys()).collect();
        for name in names {
            let (before, after) = (data.get(name), written.get(name));
            if before != after {
                let after = after.cloned().unwrap_or(Value::Null);
                self.note(Target::Data, name, before.cloned(), &after);
            }
        }
        *data = written;
        true
    }

    /// The phase ends: its writes stay if all were good (they are applied
    /// already); otherwise they were undone when the first bad one came,
    /// and the bad writes and the fields put back are returned.
    pub(crate) fn close(self) -> Option<Refused> {
        (!self.invalid.is_empty()).then_some(Refused { invalid: self.invalid, undone: self.undone })
    }

    fn note(&mut self, target: Target, name: &str, before: Option<Value>, value: &Value) {
        let written = (!value.is_null()).then(|| value.clone());
        match self.touched.iter_mut().find(|touched| touched.target == target && touched.name == name) {
            Some(touched) => touched.written = written,
            None => self.touched.push(Touched { target, name: name.to_string(), before, written }),
        }
    }

    /// Puts back what the phase's writes replaced. A field something else
    /// wrote since (the message's extraction, a new run's clearing) keeps
    /// that value: it is not the phase's write.
    fn undo(&mut self, data: &mut Data, context: &mut Data) {
        for touched in std::mem::take(&mut self.touched) {
            let map = match touched.target {
                Target::Data => &mut *data,
                Target::Context => &mut *context,
            };
            if map.get(&touched.name) != touched.written.as_ref() {
                continue;
            }
            self.undone.push(match touched.target {
                Target::Data => touched.name.clone(),
                Target::Context => format!("context.{}", touched.name),
            });
            match touched.before {
                Some(value) => map.insert(touched.name, value),
                None => map.remove(&touched.name),
            };
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

    fn named(invalid: &[InvalidWrite]) -> Vec<(&str, &str)> {
        invalid.iter().map(|write| (write.field.as_str(), write.source.as_str())).collect()
    }

    #[test]
    fn a_phase_applies_its_writes_as_they_come_and_undoes_them_all_at_its_first_bad_one() {
        let program = program();
        let (mut data, mut context) = (Data::new(), Data::new());
        data.insert("a".into(), json!("before"));
        let mut phase = PhaseWrites::open("pre-model");
        let by = |name: &'static str| move |_: &str| name.to_string();
        assert!(phase.apply(&program, (&writes(&[("a", json!("x"))]), &[]), &by("signal:s"), &mut data, &mut context));
        assert_eq!(data.get("a"), Some(&json!("x")), "what runs next reads it");
        let mut written = data.clone();
        written.insert("y".into(), json!(3));
        assert!(phase.adopt(&mut data, written));
        assert!(phase.apply(
            &program,
            (&[], &writes(&[("tier", json!("gold"))])),
            &by("hook:f.s.on_enter"),
            &mut data,
            &mut context
        ));
        assert!(!phase.apply(
            &program,
            (&writes(&[("y", json!(40))]), &[]),
            &by("action:f.s#1"),
            &mut data,
            &mut context
        ));
        assert!(phase.failed());
        assert_eq!(data.get("a"), Some(&json!("before")), "undone at once");
        assert_eq!((data.get("y"), context.get("tier")), (None, None));
        // A later write fits but is not kept; a later bad one is named too.
        assert!(!phase.apply(&program, (&writes(&[("a", json!("z"))]), &[]), &by("later"), &mut data, &mut context));
        assert!(!phase.adopt(&mut data, Data::new()));
        assert!(!phase.apply(&program, (&writes(&[("nope", json!(1))]), &[]), &by("last"), &mut data, &mut context));
        assert_eq!(data.get("a"), Some(&json!("before")));
        let refused = phase.close().unwrap();
        assert_eq!(named(&refused.invalid), [("y", "action:f.s#1"), ("nope", "last")]);
        assert_eq!(refused.undone, ["a", "y", "context.tier"]);
    }

    #[test]
    fn an_undone_phase_leaves_a_field_something_else_wrote_since() {
        let program = program();
        let (mut data, mut context) = (Data::new(), Data::new());
        let mut phase = PhaseWrites::open("pre-model");
        let by = |_: &str| "signal:s".to_string();
        phase.apply(&program, (&writes(&[("a", json!("signal")), ("y", json!(2))]), &[]), &by, &mut data, &mut context);
        // The message's extraction writes `a` after the signal did.
        data.insert("a".into(), json!("extracted"));
        phase.apply(&program, (&writes(&[("y", json!(99))]), &[]), &by, &mut data, &mut context);
        assert_eq!(data.get("a"), Some(&json!("extracted")));
        assert_eq!(data.get("y"), None);
        let ok = PhaseWrites::open("post-model");
        assert_eq!(ok.close(), None, "a phase without a bad write names nothing");
    }
}
