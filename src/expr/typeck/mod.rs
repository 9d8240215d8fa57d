//! Resolution and type checking of expressions: AST expressions become typed
//! [`Expr`]s against a [`Scope`] (schema fields, context, locals, env, and
//! in a workflow step the outputs of the steps before it).
//! Every problem is recorded as a [`TypeError`] (worded in `error`) and
//! the expression replaced by an [`ExprKind::Error`] of [`Type::Unknown`], so
//! a single mistake is reported once.

mod calls;
mod error;
mod operators;
mod paths;

pub use error::{CallError, NameError, Operand, OperatorError, StepOutputError, TypeError, Unassignable};

use super::{Expr, ExprKind, Literal, Template, TemplatePart, Type};
use crate::ids::{ContextId, FieldId};
use crate::source::Span;
use crate::syntax::ast;
use std::collections::HashMap;

/// The names a program declares, with their types.
#[derive(Debug, Default)]
pub struct Symbols {
    pub fields: HashMap<String, (FieldId, Type)>,
    pub context: HashMap<String, (ContextId, Type)>,
}

/// What a name in an expression can refer to at one place in a program.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub symbols: &'a Symbols,
    /// False in tool templates, which see only the tool's params.
    pub fields_visible: bool,
    /// Loop variables (or tool params); a local's slot is its index.
    pub locals: &'a [(String, Type)],
    /// `env.NAME` is allowed only in http headers.
    pub env_allowed: bool,
    /// The workflow step an expression belongs to, for `steps.NAME.output`;
    /// `None` anywhere else (conversations, flow guards, tools).
    pub steps: Option<&'a StepOutputs>,
}

/// The steps of a workflow whose recorded `output` an expression may read.
#[derive(Debug, Default)]
pub struct StepOutputs {
    /// Every step of the flow in order, with the static type of its output
    /// (`None`: it has none a later step could rely on).
    pub steps: Vec<(String, Option<Type>)>,
    /// Steps before this index have completed when the expression runs: the
    /// step being lowered, or the one after it for its own branches.
    pub current: usize,
}

pub struct Checker<'a> {
    pub scope: Scope<'a>,
    /// What the checker finds wrong, in the order found.
    pub errors: &'a mut Vec<TypeError>,
}

impl Checker<'_> {
    pub fn template(&mut self, template: &ast::Template) -> Template {
        let parts = template
            .parts
            .iter()
            .map(|part| match part {
                ast::TemplatePart::Text(text) => TemplatePart::Text(text.clone()),
                ast::TemplatePart::Expr(expr) => TemplatePart::Expr(self.expr(expr)),
            })
            .collect();
        Template { parts, span: template.span }
    }

    /// An expression that must be a bool (`if`, `skip_if`, `where`).
    pub fn condition(&mut self, expr: &ast::Expr) -> Expr {
        let typed = self.expr(expr);
        if !matches!(typed.ty, Type::Bool | Type::Unknown | Type::Null) {
            self.errors.push(TypeError::NotACondition { found: typed.ty.clone(), span: typed.span });
        }
        typed
    }

    /// An expression whose value is written to a place of type `target`.
    pub fn value_for(&mut self, expr: &ast::Expr, target: &Type, what: &str) -> Expr {
        let typed = self.expr(expr);
        if let Some(problem) = assignability(&typed, target) {
            self.errors.push(TypeError::NotAssignable {
                what: what.to_string(),
                target: target.clone(),
                found: typed.ty.clone(),
                problem,
                span: typed.span,
            });
        }
        typed
    }

    pub fn expr(&mut self, expr: &ast::Expr) -> Expr {
        let span = expr.span;
        match &expr.kind {
            ast::ExprKind::Null => literal(Literal::Null, Type::Null, span),
            ast::ExprKind::Bool { value } => literal((*value).into(), Type::Bool, span),
            ast::ExprKind::Int { value } => literal((*value).into(), Type::Int, span),
            ast::ExprKind::Float { value } => match serde_json::Number::from_f64(*value) {
                Some(number) => literal(Literal::Number(number), Type::Float, span),
                None => self.error(TypeError::NonFiniteNumber { span }),
            },
            ast::ExprKind::String { value } => literal(value.clone().into(), Type::String, span),
            ast::ExprKind::List { items } => self.list(items, span),
            ast::ExprKind::Path { segments } => self.path(segments, span),
            ast::ExprKind::Unary { op, operand } => self.unary(*op, operand, span),
            ast::ExprKind::Binary { op, left, right } => self.binary(*op, left, right, span),
            ast::ExprKind::IsSet { operand, negated } => {
                let operand = self.expr(operand);
                Expr { kind: ExprKind::IsSet { operand: Box::new(operand), negated: *negated }, ty: Type::Bool, span }
            }
            ast::ExprKind::Call(call) => self.call(&call.function, &call.args, span),
            ast::ExprKind::Error => Expr { kind: ExprKind::Error, ty: Type::Unknown, span },
        }
    }

    fn error(&mut self, error: impl Into<TypeError>) -> Expr {
        let error = error.into();
        let span = error.span();
        self.errors.push(error);
        Expr { kind: ExprKind::Error, ty: Type::Unknown, span }
    }

    fn report(&mut self, error: impl Into<TypeError>) {
        self.errors.push(error.into());
    }

    fn list(&mut self, items: &[ast::Expr], span: Span) -> Expr {
        let typed: Vec<Expr> = items.iter().map(|item| self.expr(item)).collect();
        let mut element = Type::Unknown;
        for item in &typed {
            if item.ty.is_unknown() || item.ty == Type::Null {
                continue;
            }
            match join(&element, &item.ty) {
                Some(joined) => element = joined,
                None => {
                    self.errors.push(TypeError::MixedList {
                        element: element.clone(),
                        found: item.ty.clone(),
                        span: item.span,
                    });
                    break;
                }
            }
        }
        Expr { kind: ExprKind::List { items: typed }, ty: Type::List(element.into()), span }
    }
}

/// The candidate a misspelt `name` most likely meant, for a did-you-mean.
fn literal(value: Literal, ty: Type, span: Span) -> Expr {
    Expr { kind: ExprKind::Literal { value }, ty, span }
}

/// The common type of two list items, if any.
fn join(left: &Type, right: &Type) -> Option<Type> {
    match (left, right) {
        (Type::Unknown, other) | (other, Type::Unknown) => Some(other.clone()),
        (Type::Int, Type::Float) | (Type::Float, Type::Int) => Some(Type::Float),
        (left, right) if left == right => Some(left.clone()),
        _ => None,
    }
}

/// The literal string of an expression, if it is one.
fn string_literal(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::Literal { value: Literal::String(text) } => Some(text),
        _ => None,
    }
}

fn probe(ty: &Type, span: Span) -> Expr {
    Expr { kind: ExprKind::Error, ty: ty.clone(), span }
}

/// Why a value of `value`'s type cannot be stored in a place of `target`
/// type, if it cannot.
pub fn assignability(value: &Expr, target: &Type) -> Option<Unassignable> {
    let found = || Unassignable::Type;
    match (target, &value.ty) {
        (_, Type::Unknown | Type::Null) | (Type::Unknown, _) => None,
        (Type::Float, Type::Int) => None,
        (Type::Enum(values), Type::String) => match string_literal(value) {
            Some(literal) if !values.iter().any(|allowed| allowed == literal) => {
                Some(Unassignable::NotAnEnumValue(literal.to_string()))
            }
            _ => None,
        },
        (Type::Enum(values), Type::Enum(given)) => (!given.iter().all(|value| values.contains(value))).then(found),
        (Type::String, Type::Enum(_)) => None,
        (Type::Date, Type::String) => match string_literal(value) {
            Some(literal) if !is_iso_date(literal) => Some(Unassignable::NotAnIsoDate(literal.to_string())),
            _ => None,
        },
        (Type::DateTime, Type::String) => match string_literal(value) {
            Some(literal) if !is_iso_datetime(literal) => Some(Unassignable::NotAnIsoDatetime(literal.to_string())),
            _ => None,
        },
        (Type::DateTime, Type::Date) => None,
        (Type::List(target_items), Type::List(value_items)) => {
            let item_probe = probe(value_items, value.span);
            assignability(&item_probe, target_items).map(|_| found())
        }
        (Type::Object(target_fields), Type::Object(value_fields)) => {
            let compatible = value_fields.iter().all(|(name, ty)| {
                target_fields
                    .iter()
                    .find(|(target_name, _)| target_name == name)
                    .is_some_and(|(_, target_ty)| assignability(&probe(ty, value.span), target_ty).is_none())
            });
            (!compatible).then(found)
        }
        (target, given) if target == given => None,
        _ => Some(found()),
    }
}

pub fn is_iso_date(text: &str) -> bool {
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok()
}

pub fn is_iso_datetime(text: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(text).is_ok()
        || chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").is_ok()
}

#[cfg(test)]
mod tests;
