//! Validation of values against the schema: every write (extracted by the
//! model, set by an action, returned by a tool, given with `--data`) passes
//! here before it reaches a session.

use crate::ir::ValueType;
use serde_json::Value;

/// Checks `value` against `ty` and returns it normalized (an enum value in
/// its declared spelling, `2.0` for an int as `2`, a date trimmed), or why
/// it is invalid, in words fit for a trace ("45 is above the maximum 10").
pub fn validate(value: &Value, ty: &ValueType) -> Result<Value, String> {
    let _ = (value, ty);
    todo!("validation")
}
