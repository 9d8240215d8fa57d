//! What a reload drops that a live session may rely on, read from the two
//! versions alone: flows and steps no longer there by name, and fields and
//! context keys no longer declared. A session standing at such a step or
//! holding such a value cannot be adopted by the new version
//! ([`crate::runtime::session::adopt`]) and keeps the version it started
//! on; said when the reload happens, before any of them takes a turn. A
//! type that changed is not judged here: whether a stored value still
//! types is a fact of each session, found at its turn.

use crate::ir::{Field, Program};

/// How many dropped places a reload names; the rest are counted.
const NAMED: usize = 12;

/// Which sessions `new` cannot take that `old` held, in words ("at the
/// step `booking.confirm`"), at most [`NAMED`] and a count of the rest.
pub(crate) fn dropped(old: &Program, new: &Program) -> Vec<String> {
    let mut found = Vec::new();
    for flow in &old.flows {
        let Some(kept) = new.flow_by_name(&flow.name).and_then(|id| new.flow(id)) else {
            found.push(format!("in the flow `{}`, no longer in the program", flow.name));
            continue;
        };
        for step in &flow.steps {
            if kept.step_by_name(&step.name).is_none() {
                found.push(format!("at the step `{}.{}`, no longer in the program", flow.name, step.name));
            }
        }
    }
    let undeclared = |kind: &str, old: &[Field], new: &[Field], found: &mut Vec<String>| {
        for field in old {
            if !new.iter().any(|declared| declared.name == field.name) {
                found.push(format!("holding the {kind} `{}`, no longer declared", field.name));
            }
        }
    };
    undeclared("field", &old.fields, &new.fields, &mut found);
    undeclared("context key", &old.context, &new.context, &mut found);
    if found.len() > NAMED {
        let more = found.len() - NAMED;
        found.truncate(NAMED);
        found.push(format!("and {more} more"));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(source: &str) -> Program {
        let compilation = crate::pipeline::compile(&crate::source::SourceFile::new("t.flow", source));
        assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
        compilation.ir
    }

    #[test]
    fn steps_flows_fields_and_context_keys_gone_are_named_and_rewording_is_not() {
        let old = program(
            "schema { a: string \"A\"\n b: int \"B\" }\ncontext { user: string \"Who\" }\n\
             flow f { step one { say \"1\" } step two { say \"2\" } }\nflow g { step x { say \"x\" } }\n",
        );
        let reworded = program(
            "schema { a: string \"An A\"\n b: int \"B\" }\ncontext { user: string \"Who\" }\n\
             flow g { step x { say \"x!\" } }\nflow f { step two { say \"2\" } step one { say \"one\" } step three { say \"3\" } }\n",
        );
        assert_eq!(dropped(&old, &reworded), Vec::<String>::new(), "moved, reworded and added keep every session");
        let cut = program("schema { a: string \"A\" }\nflow f { step one { say \"1\" } }\n");
        assert_eq!(
            dropped(&old, &cut),
            [
                "at the step `f.two`, no longer in the program",
                "in the flow `g`, no longer in the program",
                "holding the field `b`, no longer declared",
                "holding the context key `user`, no longer declared",
            ]
        );
    }

    #[test]
    fn a_long_list_is_cut_and_counted() {
        let steps: String = (0..20).map(|index| format!("step s{index} {{ say \"{index}\" }} ")).collect();
        let old = program(&format!("flow f {{ {steps} }}\n"));
        let new = program("flow f { step s0 { say \"0\" } }\n");
        let found = dropped(&old, &new);
        assert_eq!(found.len(), NAMED + 1);
        assert_eq!(found.last().map(String::as_str), Some("and 7 more"));
    }
}
