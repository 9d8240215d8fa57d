//! Resolution and type checking of expressions: AST expressions become typed
//! [`Expr`]s against a [`Scope`] (schema fields, context, locals, env, and
//! in a workflow step the outputs of the steps before it).
//! Every problem is recorded as a [`TypeError`] (worded in [`error`]) and
//! the expression replaced by an [`ExprKind::Error`] of [`Type::Unknown`], so
//! a single mistake is reported once.

mod error;

pub use error::{Operand, TypeError, Unassignable};

use super::{Expr, ExprKind, Function, Literal, Template, TemplatePart, Type};
use crate::diag::did_you_mean;
use crate::ids::{ContextId, FieldId};
use crate::source::Span;
use crate::syntax::ast::{self, BinaryOp, UnaryOp};
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

    fn error(&mut self, error: TypeError) -> Expr {
        let span = error.span();
        self.errors.push(error);
        Expr { kind: ExprKind::Error, ty: Type::Unknown, span }
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

    fn path(&mut self, segments: &[ast::Name], span: Span) -> Expr {
        let Some((head, rest)) = segments.split_first() else {
            return Expr { kind: ExprKind::Error, ty: Type::Unknown, span };
        };
        let name = head.value.as_str();
        let (base, rest) = if let Some(slot) = self.scope.locals.iter().rposition(|(local, _)| local == name) {
            let ty = self.scope.locals.get(slot).map_or(Type::Unknown, |(_, ty)| ty.clone());
            let expr = Expr {
                kind: ExprKind::Local { slot: u32::try_from(slot).unwrap_or(u32::MAX), name: name.to_string() },
                ty,
                span: head.span,
            };
            (expr, rest)
        } else if name == "context" {
            let Some((key, rest)) = rest.split_first() else {
                return self.error(TypeError::ContextWithoutKey { span: head.span });
            };
            match self.scope.symbols.context.get(&key.value) {
                Some((id, ty)) => {
                    (Expr { kind: ExprKind::Context { key: *id }, ty: ty.clone(), span: head.span.to(key.span) }, rest)
                }
                None => {
                    let close = close_to(&key.value, self.scope.symbols.context.keys().map(String::as_str));
                    return self.error(TypeError::UnknownContextKey { key: key.value.clone(), span: key.span, close });
                }
            }
        } else if name == "env" {
            let Some((variable, rest)) = rest.split_first() else {
                return self.error(TypeError::EnvWithoutVariable { span: head.span });
            };
            if !self.scope.env_allowed {
                return self.error(TypeError::EnvNotAllowed {
                    variable: variable.value.clone(),
                    span: head.span.to(variable.span),
                });
            }
            (
                Expr {
                    kind: ExprKind::Env { name: variable.value.clone() },
                    ty: Type::String,
                    span: head.span.to(variable.span),
                },
                rest,
            )
        } else if name == "steps" {
            match self.step_output(head, rest) {
                Ok((expr, rest)) => (expr, rest),
                Err(error) => return self.error(*error),
            }
        } else if let Some((id, ty)) = self.scope.symbols.fields.get(name).filter(|_| self.scope.fields_visible) {
            (Expr { kind: ExprKind::Field { field: *id }, ty: ty.clone(), span: head.span }, rest)
        } else {
            return self.error(self.unknown_name(head));
        };
        let mut expr = base;
        for member in rest {
            expr = self.member(expr, member);
        }
        expr
    }

    /// `steps.NAME.output`: typed by what the step's actions write, read
    /// only from a later step of the same workflow.
    fn step_output<'n>(
        &self,
        head: &ast::Name,
        rest: &'n [ast::Name],
    ) -> Result<(Expr, &'n [ast::Name]), Box<TypeError>> {
        let (Some(step), Some(output)) = (rest.first(), rest.get(1)) else {
            return Err(Box::new(TypeError::StepsWithoutOutput { span: head.span }));
        };
        if output.value != "output" {
            return Err(Box::new(TypeError::NotAStepOutput {
                step: step.value.clone(),
                member: output.value.clone(),
                span: output.span,
            }));
        }
        let span = head.span.to(output.span);
        let Some(outputs) = self.scope.steps else {
            return Err(Box::new(TypeError::StepOutputOutsideWorkflow { step: step.value.clone(), span }));
        };
        let Some(index) = outputs.steps.iter().position(|(name, _)| *name == step.value) else {
            let close = close_to(&step.value, outputs.steps.iter().map(|(name, _)| name.as_str()));
            return Err(Box::new(TypeError::UnknownStep { step: step.value.clone(), span: step.span, close }));
        };
        if index >= outputs.current {
            let own = index == outputs.current;
            return Err(Box::new(TypeError::StepOutputNotYetRecorded { step: step.value.clone(), own, span }));
        }
        let Some(ty) = outputs.steps.get(index).and_then(|(_, ty)| ty.clone()) else {
            return Err(Box::new(TypeError::UntypedStepOutput { step: step.value.clone(), span }));
        };
        let expr = Expr {
            kind: ExprKind::StepOutput { step: crate::ids::StepId::from_index(index), name: step.value.clone() },
            ty,
            span,
        };
        Ok((expr, rest.get(2..).unwrap_or_default()))
    }

    fn unknown_name(&self, name: &ast::Name) -> TypeError {
        let mut candidates: Vec<&str> = self.scope.locals.iter().map(|(local, _)| local.as_str()).collect();
        if self.scope.fields_visible {
            candidates.extend(self.scope.symbols.fields.keys().map(String::as_str));
        }
        TypeError::UnknownName {
            name: name.value.clone(),
            span: name.span,
            close: close_to(&name.value, candidates),
            fields_visible: self.scope.fields_visible,
        }
    }

    fn member(&mut self, object: Expr, member: &ast::Name) -> Expr {
        let span = object.span.to(member.span);
        let ty = match &object.ty {
            Type::Unknown => Type::Unknown,
            Type::Object(fields) => match fields.iter().find(|(name, _)| *name == member.value) {
                Some((_, ty)) => ty.clone(),
                None => {
                    let close = close_to(&member.value, fields.iter().map(|(name, _)| name.as_str()));
                    return self.error(TypeError::UnknownMember {
                        member: member.value.clone(),
                        object: object.ty.clone(),
                        span: member.span,
                        close,
                    });
                }
            },
            other => {
                return self.error(TypeError::MemberOfNonObject {
                    member: member.value.clone(),
                    found: other.clone(),
                    span: member.span,
                });
            }
        };
        Expr { kind: ExprKind::Member { object: Box::new(object), member: member.value.clone() }, ty, span }
    }

    fn unary(&mut self, op: UnaryOp, operand: &ast::Expr, span: Span) -> Expr {
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

    fn binary(&mut self, op: BinaryOp, left: &ast::Expr, right: &ast::Expr, span: Span) -> Expr {
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

    fn mismatch(&mut self, operand: &Expr, expected: Operand) {
        self.errors.push(TypeError::OperandMismatch {
            operand: expected,
            found: operand.ty.clone(),
            span: operand.span,
        });
    }

    fn expect_comparable(&mut self, left: &Expr, right: &Expr, op: BinaryOp) {
        if let Some(problem) = comparability(left, right).or_else(|| comparability(right, left)) {
            self.errors.push(problem.into_error(left, right, op));
        }
    }

    fn expect_ordered(&mut self, left: &Expr, right: &Expr, op: BinaryOp) {
        for operand in [left, right] {
            if matches!(operand.ty, Type::Bool | Type::List(_) | Type::Object(_) | Type::Enum(_)) {
                self.errors.push(TypeError::Unordered { op, found: operand.ty.clone(), span: operand.span });
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
                self.errors.push(TypeError::MembershipWithoutList { op, found: other.clone(), span: right.span });
            }
        }
    }

    fn arithmetic(&mut self, left: &Expr, right: &Expr, op: BinaryOp) -> Type {
        match (&left.ty, &right.ty) {
            (Type::Unknown | Type::Null, other) | (other, Type::Unknown | Type::Null) => match other {
                Type::Int | Type::Float | Type::String => other.clone(),
                _ => Type::Unknown,
            },
            (Type::Int, Type::Int) => Type::Int,
            (Type::Int | Type::Float, Type::Int | Type::Float) => Type::Float,
            (Type::String | Type::Enum(_), Type::String | Type::Enum(_)) if op == BinaryOp::Add => Type::String,
            (left_ty, right_ty) => {
                let culprit = if left_ty.is_numeric() { right } else { left };
                self.errors.push(TypeError::Arithmetic {
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

    fn call(&mut self, function: &ast::Name, args: &[ast::Expr], span: Span) -> Expr {
        let typed_args: Vec<Expr> = args.iter().map(|arg| self.expr(arg)).collect();
        let Some(known) = Function::from_name(&function.value) else {
            let close = close_to(&function.value, Function::ALL.iter().map(|known| known.name()));
            return self.error(TypeError::UnknownFunction { name: function.value.clone(), span: function.span, close });
        };
        if typed_args.len() != known.arity() {
            return self.error(TypeError::WrongArity { function: known, found: typed_args.len(), span });
        }
        let ty = match known {
            Function::Len => {
                self.expect_args(&typed_args, known, |ty| matches!(ty, Type::List(_) | Type::String | Type::Object(_)));
                Type::Int
            }
            Function::Lower | Function::Upper => {
                self.expect_args(&typed_args, known, |ty| matches!(ty, Type::String | Type::Enum(_)));
                Type::String
            }
            Function::Contains => {
                if let Some(haystack) = typed_args.first() {
                    match &haystack.ty {
                        Type::String | Type::Enum(_) => {
                            self.expect_args(typed_args.get(1..).unwrap_or_default(), known, |ty| {
                                matches!(ty, Type::String | Type::Enum(_))
                            });
                        }
                        Type::List(_) | Type::Unknown | Type::Null => {}
                        _ => self.mismatch(haystack, Operand::ContainsNeedsStringOrList),
                    }
                }
                Type::Bool
            }
            Function::Join => {
                if let Some(list) = typed_args.first() {
                    match &list.ty {
                        Type::List(_) | Type::Unknown | Type::Null => {}
                        _ => self.mismatch(list, Operand::JoinNeedsList),
                    }
                }
                self.expect_args(typed_args.get(1..).unwrap_or_default(), known, |ty| matches!(ty, Type::String));
                Type::String
            }
            Function::Today => Type::Date,
            Function::Now => Type::DateTime,
        };
        Expr { kind: ExprKind::Call { function: known, args: typed_args }, ty, span }
    }

    fn expect_args(&mut self, args: &[Expr], function: Function, accepts: impl Fn(&Type) -> bool) {
        for arg in args {
            if !(accepts(&arg.ty) || arg.ty.is_unknown() || arg.ty == Type::Null) {
                self.errors.push(TypeError::ArgumentMismatch { function, found: arg.ty.clone(), span: arg.span });
            }
        }
    }
}

/// The candidate a misspelt `name` most likely meant, for a did-you-mean.
fn close_to<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    did_you_mean(name, candidates).map(str::to_string)
}

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

enum Incomparable {
    NotAValue { value: String, values: Vec<String> },
    NotADate { value: String, date_time: bool },
    Types,
}

impl Incomparable {
    /// The error of comparing `left` with `right`, pointing at the side
    /// that holds the offending literal (or, for types, at the right).
    fn into_error(self, left: &Expr, right: &Expr, op: BinaryOp) -> TypeError {
        let literal_side =
            |value: &str| if string_literal(right).is_some_and(|text| text == value) { right } else { left };
        match self {
            Incomparable::NotAValue { value, values } => {
                let span = literal_side(&value).span;
                let close = close_to(&value, values.iter().map(String::as_str));
                TypeError::NotAnEnumValue { value, values, span, close }
            }
            Incomparable::NotADate { value, date_time } => {
                let span = literal_side(&value).span;
                TypeError::NotADate { value, date_time, span }
            }
            Incomparable::Types => {
                TypeError::Incomparable { op, left: left.ty.clone(), right: right.ty.clone(), span: right.span }
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
mod tests {
    use super::*;
    use crate::syntax::expr::{SpanMap, parse_expr};

    fn symbols() -> Symbols {
        let mut symbols = Symbols::default();
        let fields = [
            ("guests", Type::Int),
            ("hotel", Type::String),
            ("confirmed", Type::Bool),
            ("date", Type::Date),
            ("plan", Type::Enum(vec!["free".to_string(), "pro".to_string()].into())),
            ("contacts", Type::List(Type::Object(vec![("email".to_string(), Type::String)].into()).into())),
        ];
        for (index, (name, ty)) in fields.into_iter().enumerate() {
            symbols.fields.insert(name.to_string(), (FieldId(u32::try_from(index).unwrap_or(0)), ty));
        }
        symbols.context.insert(
            "tier".to_string(),
            (ContextId(0), Type::Enum(vec!["basic".to_string(), "gold".to_string()].into())),
        );
        symbols
    }

    /// Type-checks `text` and returns its type and the codes reported.
    fn check(text: &str) -> (Type, Vec<String>) {
        check_with_steps(text, None)
    }

    /// [`check`] inside a workflow step that sees `steps`.
    fn check_with_steps(text: &str, steps: Option<&StepOutputs>) -> (Type, Vec<String>) {
        let (ty, errors) = type_errors(text, steps);
        let codes = errors.into_iter().map(|error| error.into_diagnostic().code.as_str().to_string()).collect();
        (ty, codes)
    }

    /// Type-checks `text` (which must parse) and returns its type and the
    /// errors found, in order.
    fn type_errors(text: &str, steps: Option<&StepOutputs>) -> (Type, Vec<TypeError>) {
        check_at(text, &Place::Expr, steps, true)
    }

    /// Where an expression sits: a plain expression, a condition, or a
    /// value written to a place of some type.
    enum Place {
        Expr,
        Condition,
        Value(Type),
    }

    /// Type-checks `text` (which must parse) at `place`, in a workflow step
    /// that sees `steps` or, without `fields_visible`, in a tool template.
    fn check_at(
        text: &str,
        place: &Place,
        steps: Option<&StepOutputs>,
        fields_visible: bool,
    ) -> (Type, Vec<TypeError>) {
        let symbols = symbols();
        let mut syntax_errors = Vec::new();
        let ast = parse_expr(text, SpanMap::Exact { base: 0 }, &mut syntax_errors);
        assert_eq!(syntax_errors, Vec::new(), "{text}");
        let locals = [("c".to_string(), Type::Object(vec![("email".to_string(), Type::String)].into()))];
        let mut errors = Vec::new();
        let mut checker = Checker {
            scope: Scope { symbols: &symbols, fields_visible, locals: &locals, env_allowed: false, steps },
            errors: &mut errors,
        };
        let typed = match place {
            Place::Expr => checker.expr(&ast),
            Place::Condition => checker.condition(&ast),
            Place::Value(target) => checker.value_for(&ast, target, "`set`"),
        };
        (typed.ty, errors)
    }

    #[test]
    fn well_typed_expressions_have_no_diagnostics() {
        for text in [
            "guests > 2 and confirmed == true",
            "plan in [\"free\", \"pro\"]",
            "context.tier == \"gold\"",
            "date >= today()",
            "date == \"2026-12-04\"",
            "len(contacts) > 0 and c.email is set",
            "lower(hotel) == \"ritz\" or contains(hotel, \"Grand\")",
            "guests + 1.5 > 3",
            "hotel + \"!\" != \"\"",
        ] {
            let (ty, codes) = check(text);
            assert_eq!((ty, codes), (Type::Bool, Vec::<String>::new()), "{text}");
        }
    }

    #[test]
    fn int_compared_with_string_is_a_mismatch() {
        assert_eq!(check("guests == \"two\"").1, vec!["type_mismatch"]);
    }

    #[test]
    fn enum_literal_must_be_declared() {
        assert_eq!(check("plan == \"gold\"").1, vec!["type_mismatch"]);
        assert_eq!(check("plan in [\"pro\", \"gold\"]").1, vec!["type_mismatch"]);
        assert_eq!(check("context.tier == \"platinum\"").1, vec!["type_mismatch"]);
    }

    #[test]
    fn join_takes_a_list_and_a_string_separator() {
        assert_eq!(check("join(contacts, \", \")"), (Type::String, Vec::new()));
        assert_eq!(check("join(hotel, \", \")").1, vec!["type_mismatch"]);
        assert_eq!(check("join(contacts, 1)").1, vec!["type_mismatch"]);
        assert_eq!(check("join(contacts)").1, vec!["wrong_arity"]);
    }

    #[test]
    fn ordering_a_bool_is_a_mismatch() {
        assert_eq!(check("confirmed < true").1, vec!["type_mismatch"]);
    }

    #[test]
    fn unknown_names_and_functions() {
        assert_eq!(check("gests > 1").1, vec!["unknown_field"]);
        assert_eq!(check("context.tear == 1").1, vec!["unknown_field"]);
        assert_eq!(check("c.mail is set").1, vec!["unknown_field"]);
        assert_eq!(check("lenght(hotel) > 1").1, vec!["unknown_function"]);
        assert_eq!(check("len(hotel, 2) > 1").1, vec!["wrong_arity"]);
        assert_eq!(check("env.TOKEN == \"x\"").1, vec!["unknown_field"]);
    }

    #[test]
    fn one_mistake_is_reported_once() {
        assert_eq!(check("gests > 1 and gests < 3 + gests").1.len(), 3);
        assert_eq!(check("(gests + 1) * 2 > 3").1, vec!["unknown_field"]);
    }

    #[test]
    fn invalid_dates_are_mismatches() {
        assert_eq!(check("date == \"tomorrow\"").1, vec!["type_mismatch"]);
    }

    /// Type-checks `text` inside the third step of a workflow whose steps
    /// record `fetch` (a tool's object), `log` (untyped), `review` (this
    /// step) and `send` (later).
    fn check_in_workflow(text: &str) -> (Type, Vec<String>) {
        let outputs = StepOutputs {
            steps: vec![
                ("fetch".to_string(), Some(Type::Object(vec![("score".to_string(), Type::Int)].into()))),
                ("log".to_string(), None),
                ("review".to_string(), Some(Type::Object(Vec::new().into()))),
                ("send".to_string(), Some(Type::Object(Vec::new().into()))),
            ],
            current: 2,
        };
        check_with_steps(text, Some(&outputs))
    }

    #[test]
    fn an_earlier_steps_output_has_its_recorded_type() {
        assert_eq!(check_in_workflow("steps.fetch.output.score"), (Type::Int, Vec::new()));
        assert_eq!(check_in_workflow("steps.fetch.output.score > guests"), (Type::Bool, Vec::new()));
        assert_eq!(check_in_workflow("steps.fetch.output.score == \"high\"").1, vec!["type_mismatch"]);
        assert_eq!(check_in_workflow("steps.fetch.output.scor").1, vec!["unknown_field"]);
    }

    #[test]
    fn unreadable_step_outputs_are_errors() {
        assert_eq!(check_in_workflow("steps.log.output is set").1, vec!["type_mismatch"]);
        assert_eq!(check_in_workflow("steps.review.output is set").1, vec!["unknown_field"]);
        assert_eq!(check_in_workflow("steps.send.output is set").1, vec!["unknown_field"]);
        assert_eq!(check_in_workflow("steps.fech.output is set").1, vec!["unknown_field"]);
        assert_eq!(check_in_workflow("steps.fetch.status is set").1, vec!["unknown_field"]);
        assert_eq!(check_in_workflow("steps.fetch is set").1, vec!["unknown_field"]);
    }

    #[test]
    fn step_outputs_are_unknown_outside_a_workflow_step() {
        assert_eq!(check("steps.fetch.output is set").1, vec!["unknown_field"]);
    }

    /// A float literal past `f64::MAX`, which parses as infinity.
    const INFINITE_FLOAT: &str = concat!(
        "1",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        ".0 > 1"
    );

    /// One expression of every kind the checker rejects, with where it sits
    /// and whether it is in a workflow's third step (`in_workflow`) or a
    /// tool template (`!fields_visible`).
    fn wording_cases() -> Vec<(&'static str, Place, bool, bool)> {
        let plan = Type::Enum(vec!["free".to_string(), "pro".to_string()].into());
        vec![
            ("guests + 1", Place::Condition, false, true),
            ("hotel", Place::Value(Type::Int), false, true),
            ("\"gold\"", Place::Value(plan), false, true),
            ("\"tomorrow\"", Place::Value(Type::Date), false, true),
            ("\"soon\"", Place::Value(Type::DateTime), false, true),
            ("[1]", Place::Value(Type::List(Type::String.into())), false, true),
            (INFINITE_FLOAT, Place::Expr, false, true),
            ("[1, \"a\"]", Place::Expr, false, true),
            ("context", Place::Expr, false, true),
            ("context.tiers", Place::Expr, false, true),
            ("context.zzzzzz", Place::Expr, false, true),
            ("env", Place::Expr, false, true),
            ("env.TOKEN", Place::Expr, false, true),
            ("steps.fetch", Place::Expr, true, true),
            ("steps.fetch.status", Place::Expr, true, true),
            ("steps.fetch.output", Place::Expr, false, true),
            ("steps.fech.output", Place::Expr, true, true),
            ("steps.zzzzzz.output", Place::Expr, true, true),
            ("steps.review.output", Place::Expr, true, true),
            ("steps.send.output", Place::Expr, true, true),
            ("steps.log.output", Place::Expr, true, true),
            ("gests", Place::Expr, false, true),
            ("zzzzzz", Place::Expr, false, true),
            ("zzzzzz", Place::Expr, false, false),
            ("c.mail", Place::Expr, false, true),
            ("c.zzzzzz", Place::Expr, false, true),
            ("hotel.name", Place::Expr, false, true),
            ("not guests", Place::Expr, false, true),
            ("guests and confirmed", Place::Expr, false, true),
            ("-hotel", Place::Expr, false, true),
            ("guests not in \"abc\"", Place::Expr, false, true),
            ("contains(guests, 1)", Place::Expr, false, true),
            ("join(hotel, \",\")", Place::Expr, false, true),
            ("plan == \"gold\"", Place::Expr, false, true),
            ("\"fre\" == plan", Place::Expr, false, true),
            ("date == \"tomorrow\"", Place::Expr, false, true),
            ("steps.fetch.output.at == \"soon\"", Place::Expr, true, true),
            ("guests == \"two\"", Place::Expr, false, true),
            ("confirmed < true", Place::Expr, false, true),
            ("guests in 3", Place::Expr, false, true),
            ("confirmed + 1", Place::Expr, false, true),
            ("hotel * 2", Place::Expr, false, true),
            ("lenn(hotel)", Place::Expr, false, true),
            ("zzzzzz()", Place::Expr, false, true),
            ("len(hotel, 2)", Place::Expr, false, true),
            ("today(1)", Place::Expr, false, true),
            ("len(guests)", Place::Expr, false, true),
        ]
    }

    fn workflow_outputs() -> StepOutputs {
        let fetched = vec![("score".to_string(), Type::Int), ("at".to_string(), Type::DateTime)];
        StepOutputs {
            steps: vec![
                ("fetch".to_string(), Some(Type::Object(fetched.into()))),
                ("log".to_string(), None),
                ("review".to_string(), Some(Type::Object(Vec::new().into()))),
                ("send".to_string(), Some(Type::Object(Vec::new().into()))),
            ],
            current: 2,
        }
    }

    /// Every wording of the type checker, one case per kind of error:
    /// the source, then the code, message, labels and help it is written as.
    #[test]
    fn every_type_error_in_words() {
        use std::fmt::Write as _;
        let outputs = workflow_outputs();
        let mut out = String::new();
        for (text, place, in_workflow, fields_visible) in wording_cases() {
            let (_, errors) = check_at(text, &place, in_workflow.then_some(&outputs), fields_visible);
            assert_eq!(errors.len(), 1, "{text}: {errors:?}");
            for diagnostic in errors.into_iter().map(TypeError::into_diagnostic) {
                let _ = writeln!(out, "{text}\n  {}: {}", diagnostic.code.as_str(), diagnostic.message);
                for label in &diagnostic.labels {
                    let _ = writeln!(out, "  {}..{}: {}", label.span.start, label.span.end, label.text);
                }
                let _ = writeln!(out, "  help: {}", diagnostic.help.as_deref().unwrap_or("-"));
            }
        }
        insta::with_settings!({ snapshot_path => "../../../snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!("typeck_wording", out);
        });
    }

    #[test]
    fn an_unknown_name_carries_the_nearest_declared_name() {
        let (ty, errors) = type_errors("gests > 1", None);
        let unknown = TypeError::UnknownName {
            name: "gests".to_string(),
            span: Span::new(0, 5),
            close: Some("guests".to_string()),
            fields_visible: true,
        };
        assert_eq!((ty, errors), (Type::Bool, vec![unknown]));
    }

    #[test]
    fn errors_are_recorded_in_the_order_found() {
        let (_, errors) = type_errors("gests > 1 and zzz < 3 + hotel", None);
        let found: Vec<(Span, &str)> = errors
            .iter()
            .map(|error| match error {
                TypeError::UnknownName { name, .. } => (error.span(), name.as_str()),
                other => (other.span(), "not an unknown name"),
            })
            .collect();
        let arithmetic = TypeError::Arithmetic {
            op: BinaryOp::Add,
            left: Type::Int,
            right: Type::String,
            culprit: Type::String,
            span: Span::new(24, 29),
        };
        assert_eq!(
            found,
            vec![(Span::new(0, 5), "gests"), (Span::new(14, 17), "zzz"), (Span::new(24, 29), "not an unknown name")]
        );
        assert_eq!(errors.get(2), Some(&arithmetic));
    }

    #[test]
    fn an_enum_comparison_points_at_the_literal_on_either_side() {
        let not_a_value = |span| TypeError::NotAnEnumValue {
            value: "fre".to_string(),
            values: vec!["free".to_string(), "pro".to_string()],
            span,
            close: Some("free".to_string()),
        };
        assert_eq!(type_errors("plan == \"fre\"", None).1, vec![not_a_value(Span::new(8, 13))]);
        assert_eq!(type_errors("\"fre\" == plan", None).1, vec![not_a_value(Span::new(0, 5))]);
    }

    #[test]
    fn a_call_with_too_many_arguments_is_unknown_and_counts_them() {
        let (ty, errors) = type_errors("len(hotel, 2)", None);
        let arity = TypeError::WrongArity { function: Function::Len, found: 2, span: Span::new(0, 13) };
        assert_eq!((ty, errors), (Type::Unknown, vec![arity]));
    }

    #[test]
    fn a_value_for_a_place_says_why_it_does_not_fit() {
        let plan = Type::Enum(vec!["free".to_string(), "pro".to_string()].into());
        let (_, errors) = check_at("\"gold\"", &Place::Value(plan.clone()), None, true);
        let unassignable = TypeError::NotAssignable {
            what: "`set`".to_string(),
            target: plan,
            found: Type::String,
            problem: Unassignable::NotAnEnumValue("gold".to_string()),
            span: Span::new(0, 6),
        };
        assert_eq!(errors, vec![unassignable]);
    }

    #[test]
    fn a_step_output_read_too_early_says_whose_it_is() {
        let outputs = workflow_outputs();
        let (_, errors) = type_errors("steps.review.output", Some(&outputs));
        let own = TypeError::StepOutputNotYetRecorded { step: "review".to_string(), own: true, span: Span::new(0, 19) };
        assert_eq!(errors, vec![own]);
    }
}
