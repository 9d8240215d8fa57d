//! Constant folding: the value of an expression that reads no data, by
//! the operators the runtime uses ([`crate::expr::ops`]). Lowering folds
//! the value of a write to check it against the field's range and pattern
//! (`set guests = -5`), and the checker folds conditions (an `if` always
//! false).

use crate::expr::ops::{self, Typing};
use crate::expr::{Expr, ExprKind, Function, Type};
use crate::syntax::ast::BinaryOp;
use serde_json::Value;

/// Past this depth folding gives up (answers "unknown"); the front ends
/// refuse deeper expressions anyway.
const MAX_DEPTH: usize = 256;

/// The value of an expression that reads no data, if it has one: what the
/// runtime would compute, by the same operators ([`crate::expr::ops`]). An
/// operation the runtime would warn about (overflow, division by zero) is
/// left unknown rather than folded to its null.
pub fn fold(expr: &Expr) -> Option<Value> {
    fold_at(expr, 0)
}

/// Whether a condition is always false (`Some(false)`) or always true.
pub fn fold_bool(expr: &Expr) -> Option<bool> {
    fold(expr).map(|value| ops::is_true(&value))
}

fn fold_at(expr: &Expr, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let depth = depth + 1;
    let mut warnings = Vec::new();
    let value = match &expr.kind {
        ExprKind::Literal { value } => value.to_value(),
        ExprKind::List { items } => {
            Value::Array(items.iter().map(|item| fold_at(item, depth)).collect::<Option<Vec<_>>>()?)
        }
        ExprKind::Unary { op, operand } => {
            ops::unary(*op, &fold_at(operand, depth)?, expr.ty == Type::Float, &mut warnings)
        }
        ExprKind::Binary { op: op @ (BinaryOp::And | BinaryOp::Or), left, right } => {
            // `false and x` is false whatever `x` is; the same for `or`.
            let absorbing = *op == BinaryOp::Or;
            let truth = |side: &Expr| fold_at(side, depth).map(|value| ops::is_true(&value));
            let (left, right) = (truth(left), truth(right));
            if left == Some(absorbing) || right == Some(absorbing) {
                return Some(Value::Bool(absorbing));
            }
            left.zip(right)?;
            Value::Bool(!absorbing)
        }
        ExprKind::Binary { op, left, right } => {
            let (left_value, right_value) = (fold_at(left, depth)?, fold_at(right, depth)?);
            ops::binary(*op, &left_value, &right_value, Typing::of(&left.ty, &right.ty, &expr.ty), &mut warnings)
        }
        ExprKind::IsSet { operand, negated } => ops::is_set(&fold_at(operand, depth)?, *negated),
        ExprKind::Call { function, args } => return fold_call(*function, args, depth),
        ExprKind::Field { .. }
        | ExprKind::Context { .. }
        | ExprKind::Local { .. }
        | ExprKind::Env { .. }
        | ExprKind::StepOutput { .. }
        | ExprKind::Member { .. }
        | ExprKind::Error => return None,
    };
    warnings.is_empty().then_some(value)
}

fn fold_call(function: Function, args: &[Expr], depth: usize) -> Option<Value> {
    let values = args.iter().map(|arg| fold_at(arg, depth)).collect::<Option<Vec<_>>>()?;
    match (function, values.as_slice()) {
        (Function::Len, [Value::Null]) => Some(Value::from(0)),
        (Function::Len, [Value::String(text)]) => Some(Value::from(text.chars().count())),
        (Function::Len, [Value::Array(items)]) => Some(Value::from(items.len())),
        (Function::Lower | Function::Upper, [Value::Null]) => Some(Value::Null),
        (Function::Lower, [Value::String(text)]) => Some(Value::String(text.to_lowercase())),
        (Function::Upper, [Value::String(text)]) => Some(Value::String(text.to_uppercase())),
        (Function::Contains, [Value::String(text), Value::String(part)]) => {
            Some(Value::Bool(text.contains(part.as_str())))
        }
        (Function::Contains, [Value::Array(items), item]) => {
            Some(Value::Bool(items.iter().any(|candidate| ops::equal(candidate, item, false))))
        }
        _ => None,
    }
}
