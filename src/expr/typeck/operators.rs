//! Operators: `not` and `-`, the logic, comparisons, orders, membership and
//! arithmetic (`+` also joins strings and lists), with when two types can be
//! compared.

use super::{
    Checker, Operand, OperatorError, assignability, is_iso_date, is_iso_datetime, join, probe, string_literal,
};
use crate::diag::nearest;
use crate::expr::{Expr, ExprKind, Type};
use crate::source::Span;
use crate::syntax::ast::{self, BinaryOp, UnaryOp};

impl Checker<'_> {
    pub(super) fn unary(&mut self, op: UnaryOp, operand: &ast::Expr, span: Span) -> Expr {
        let operand = self.expr(operand);
        let ty = match op {
            UnaryOp::Not => {
                self.expect_bool(&operand, Operand::NotNeedsBool);
                Type::Bool
            }
            UnaryOp::Neg => {
                if !(operand.ty.is_numeric() || operand.ty.is_unknown() || operand.ty == Type::Null) {
                    self.mismatch(&operand, Operand::NegationNeedsNumber);
                }
                operand.ty.clone()
            }
        };
        Expr { kind: ExprKind::Unary { op, operand: Box::new(operand) }, ty, span }
    }

    pub(super) fn binary(&mut self, op: BinaryOp, left: &ast::Expr, right: &ast::Expr, span: Span) -> Expr {
        let left = self.expr(left);
        let right = self.expr(right);
        let ty = match op {
            BinaryOp::And | BinaryOp::Or => {
                self.expect_bool(&left, Operand::LogicNeedsBool(op));
                self.expect_bool(&right, Operand::LogicNeedsBool(op));
                Type::Bool
            }
            BinaryOp::Eq | BinaryOp::Ne => {
                self.expect_comparable(&left, &right, op);
                Type::Bool
            }
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                self.expect_ordered(&left, &right, op);
                Type::Bool
            }
            BinaryOp::In | BinaryOp::NotIn => {
                self.expect_membership(&left, &right, op);
                Type::Bool
            }
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                self.arithmetic(&left, &right, op)
            }
        };
        Expr { kind: ExprKind::Binary { op, left: Box::new(left), right: Box::new(right) }, ty, span }
    }

    fn expect_bool(&mut self, operand: &Expr, expected: Operand) {
        if !matches!(operand.ty, Type::Bool | Type::Unknown | Type::Null) {
            self.mismatch(operand, expected);
        }
    }

    pub(super) fn mismatch(&mut self, operand: &Expr, expected: Operand) {
        self.report(OperatorError::OperandMismatch {
            operand: expected,
            found: operand.ty.clone(),
            span: operand.span,
        });
    }

    fn expect_comparable(&mut self, left: &Expr, right: &Expr, op: BinaryOp) {
        if let Some(problem) = comparability(left, right).or_else(|| comparability(right, left)) {
            self.report(problem.into_error(left, right, op));
        }
    }

    fn expect_ordered(&mut self, left: &Expr, right: &Expr, op: BinaryOp) {
        for operand in [left, right] {
            if matches!(operand.ty, Type::Bool | Type::List(_) | Type::Object(_) | Type::Enum(_)) {
                self.report(OperatorError::Unordered { op, found: operand.ty.clone(), span: operand.span });
                return;
            }
        }
        self.expect_comparable(left, right, op);
    }

    fn expect_membership(&mut self, left: &Expr, right: &Expr, op: BinaryOp) {
        match &right.ty {
            Type::List(element) => {
                let element_probe = Expr { kind: ExprKind::Error, ty: (**element).clone(), span: right.span };
                if let ExprKind::List { items } = &right.kind {
                    for item in items {
                        self.expect_comparable(left, item, op);
                    }
                } else {
                    self.expect_comparable(left, &element_probe, op);
                }
            }
            Type::String => {
                if !matches!(left.ty, Type::String | Type::Enum(_) | Type::Unknown | Type::Null) {
                    self.mismatch(left, Operand::InStringNeedsString(op));
                }
            }
            Type::Unknown | Type::Null => {}
            other => {
                self.report(OperatorError::MembershipWithoutList { op, found: other.clone(), span: right.span });
            }
        }
    }

    fn arithmetic(&mut self, left: &Expr, right: &Expr, op: BinaryOp) -> Type {
        match (&left.ty, &right.ty) {
            (Type::Unknown | Type::Null, other) | (other, Type::Unknown | Type::Null) => match other {
                Type::Int | Type::Float | Type::String => other.clone(),
                Type::List(_) if op == BinaryOp::Add => other.clone(),
                _ => Type::Unknown,
            },
            (Type::List(left_items), Type::List(right_items)) if op == BinaryOp::Add => {
                // `F + [item]`: the right's items must fit the left's, so
                // that writing the sum back to F keeps F's item type.
                if assignability(&probe(right_items, right.span), left_items).is_none() {
                    return if left_items.is_unknown() { right.ty.clone() } else { left.ty.clone() };
                }
                match join(left_items, right_items) {
                    Some(joined) => Type::List(joined.into()),
                    None => {
                        self.report(OperatorError::Arithmetic {
                            op,
                            left: left.ty.clone(),
                            right: right.ty.clone(),
                            culprit: right.ty.clone(),
                            span: right.span,
                        });
                        Type::Unknown
                    }
                }
            }
            (Type::Int, Type::Int) => Type::Int,
            (Type::Int | Type::Float, Type::Int | Type::Float) => Type::Float,
            (Type::String | Type::Enum(_), Type::String | Type::Enum(_)) if op == BinaryOp::Add => Type::String,
            (left_ty, right_ty) => {
                let culprit = if left_ty.is_numeric() { right } else { left };
                self.report(OperatorError::Arithmetic {
                    op,
                    left: left_ty.clone(),
                    right: right_ty.clone(),
                    culprit: culprit.ty.clone(),
                    span: culprit.span,
                });
                Type::Unknown
            }
        }
    }
}

enum Incomparable {
    NotAValue { value: String, values: Vec<String> },
    NotADate { value: String, date_time: bool },
    Types,
}

impl Incomparable {
    /// The error of comparing `left` with `right`, pointing at the side
    /// that holds the offending literal (or, for types, at the right).
    fn into_error(self, left: &Expr, right: &Expr, op: BinaryOp) -> OperatorError {
        let literal_side =
            |value: &str| if string_literal(right).is_some_and(|text| text == value) { right } else { left };
        match self {
            Incomparable::NotAValue { value, values } => {
                let span = literal_side(&value).span;
                let close = nearest(&value, values.iter().map(String::as_str));
                OperatorError::NotAnEnumValue { value, values, span, close }
            }
            Incomparable::NotADate { value, date_time } => {
                let span = literal_side(&value).span;
                OperatorError::NotADate { value, date_time, span }
            }
            Incomparable::Types => {
                OperatorError::Incomparable { op, left: left.ty.clone(), right: right.ty.clone(), span: right.span }
            }
        }
    }
}

/// Whether `left` (a typed place) can be compared with `right`.
fn comparability(left: &Expr, right: &Expr) -> Option<Incomparable> {
    match (&left.ty, &right.ty) {
        (Type::Unknown | Type::Null, _) | (_, Type::Unknown | Type::Null) => None,
        (Type::Enum(values), Type::String) => {
            let literal = string_literal(right)?;
            (!values.iter().any(|value| value == literal))
                .then(|| Incomparable::NotAValue { value: literal.to_string(), values: values.to_vec() })
        }
        (Type::Date, Type::String) => {
            let literal = string_literal(right)?;
            (!is_iso_date(literal)).then(|| Incomparable::NotADate { value: literal.to_string(), date_time: false })
        }
        (Type::DateTime, Type::String) => {
            let literal = string_literal(right)?;
            (!is_iso_datetime(literal)).then(|| Incomparable::NotADate { value: literal.to_string(), date_time: true })
        }
        (Type::String, Type::Enum(_) | Type::Date | Type::DateTime) => None,
        (Type::Enum(left_values), Type::Enum(right_values)) => {
            let shared = left_values.iter().any(|value| right_values.contains(value));
            (!shared).then_some(Incomparable::Types)
        }
        (Type::Int | Type::Float, Type::Int | Type::Float) => None,
        (Type::Date, Type::DateTime) | (Type::DateTime, Type::Date) => None,
        (Type::List(left_items), Type::List(right_items)) => {
            let left_probe = probe(left_items, left.span);
            let right_probe = probe(right_items, right.span);
            comparability(&left_probe, &right_probe)
        }
        (left_ty, right_ty) if left_ty == right_ty => None,
        (Type::Object(_), Type::Object(_)) => None,
        _ => Some(Incomparable::Types),
    }
}
