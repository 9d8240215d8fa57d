//! The builtin tools: `now` (`{"now": RFC 3339}` from the injectable
//! clock), `uuid` (`{"uuid": id}` from the injectable id source) and `echo`
//! (its arguments).
//!
//! A builtin's natural key rarely matches what the program declares
//! (`returns: { booking_ref: string }` on a `uuid` tool), so when `returns`
//! declares exactly one field and the result holds exactly one value under
//! another name, the value moves to the declared name. For `now`, a
//! declared `date` field gets today's date (UTC) rather than a datetime.

use super::ToolEnv;
use crate::ir::{Builtin, Tool, TypeKind};
use chrono::SecondsFormat;
use serde_json::{Map, Value};

pub(super) fn call(tool: &Tool, builtin: Builtin, args: &Map<String, Value>, env: &ToolEnv) -> Value {
    let single_return = match tool.returns.as_deref() {
        Some([only]) => Some(only),
        _ => None,
    };
    let mut result = Map::new();
    match builtin {
        Builtin::Now => {
            let now = env.clock.now();
            let wants_date = single_return.is_some_and(|field| matches!(field.ty.kind, TypeKind::Date));
            let text = if wants_date {
                now.date_naive().format("%Y-%m-%d").to_string()
            } else {
                now.to_rfc3339_opts(SecondsFormat::Secs, true)
            };
            result.insert("now".to_string(), Value::String(text));
        }
        Builtin::Uuid => {
            result.insert("uuid".to_string(), Value::String(env.ids.next_id()));
        }
        Builtin::Echo => result.clone_from(args),
    }
    if let Some(field) = single_return
        && result.len() == 1
        && !result.contains_key(&field.name)
        && let Some(key) = result.keys().next().cloned()
        && let Some(value) = result.remove(&key)
    {
        result.insert(field.name.clone(), value);
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::super::ToolRegistry;
    use super::super::tests::{args, env, tool};
    use crate::ir::{Builtin, ToolImpl, TypeKind};
    use serde_json::{Value, json};
    use std::path::PathBuf;

    fn run(builtin: Builtin, returns: Option<&[(&str, TypeKind)]>, call_args: Value) -> Value {
        let tool = tool("builtin", &[], returns, Some(ToolImpl::Builtin { builtin }));
        ToolRegistry::default()
            .call(&tool, &args(call_args), &env(PathBuf::from(".")))
            .unwrap_or_else(|error| json!({ "error": error.to_string() }))
    }

    #[test]
    fn now_reads_the_clock() {
        assert_eq!(run(Builtin::Now, None, json!({})), json!({"now": "2026-01-05T10:00:00Z"}));
        assert_eq!(
            run(Builtin::Now, Some(&[("started_at", TypeKind::DateTime)]), json!({})),
            json!({"started_at": "2026-01-05T10:00:00Z"})
        );
        assert_eq!(run(Builtin::Now, Some(&[("today", TypeKind::Date)]), json!({})), json!({"today": "2026-01-05"}));
    }

    #[test]
    fn uuid_reads_the_id_source() {
        let Value::Object(result) = run(Builtin::Uuid, None, json!({})) else {
            panic!("not an object");
        };
        let id = result.get("uuid").and_then(Value::as_str).unwrap_or_default();
        assert_eq!(id.len(), 36, "{id}");
        let renamed = run(Builtin::Uuid, Some(&[("booking_id", TypeKind::String)]), json!({}));
        assert!(renamed.get("booking_id").is_some_and(Value::is_string), "{renamed}");
    }

    #[test]
    fn echo_returns_its_arguments() {
        assert_eq!(run(Builtin::Echo, None, json!({"a": 1, "b": [true]})), json!({"a": 1, "b": [true]}));
        assert_eq!(
            run(Builtin::Echo, Some(&[("copy", TypeKind::String)]), json!({"text": "hi"})),
            json!({"copy": "hi"})
        );
        // Several values are never guessed into one field: the check fails.
        assert_eq!(
            run(Builtin::Echo, Some(&[("copy", TypeKind::String)]), json!({"a": "x", "b": "y"})),
            json!({"error": "`builtin` returned an invalid result: the declared field `copy` is missing (it has a, b)"})
        );
    }
}
