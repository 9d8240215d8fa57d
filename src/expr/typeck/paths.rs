//! Names in an expression: fields, locals, `context.KEY`, `env.NAME`,
//! `steps.NAME.output` and the members of objects.

use super::{Checker, NameError, StepOutputError};
use crate::diag::nearest;
use crate::expr::{Expr, ExprKind, Type};
use crate::source::Span;
use crate::syntax::ast;

impl Checker<'_> {
    pub(super) fn path(&mut self, segments: &[ast::Name], span: Span) -> Expr {
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
                return self.error(NameError::ContextWithoutKey { span: head.span });
            };
            match self.scope.symbols.context.get(&key.value) {
                Some((id, ty)) => {
                    (Expr { kind: ExprKind::Context { key: *id }, ty: ty.clone(), span: head.span.to(key.span) }, rest)
                }
                None => {
                    let close = nearest(&key.value, self.scope.symbols.context.keys().map(String::as_str));
                    return self.error(NameError::UnknownContextKey { key: key.value.clone(), span: key.span, close });
                }
            }
        } else if name == "env" {
            let Some((variable, rest)) = rest.split_first() else {
                return self.error(NameError::EnvWithoutVariable { span: head.span });
            };
            if !self.scope.env_allowed {
                return self.error(NameError::EnvNotAllowed {
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
    ) -> Result<(Expr, &'n [ast::Name]), Box<StepOutputError>> {
        let (Some(step), Some(output)) = (rest.first(), rest.get(1)) else {
            return Err(Box::new(StepOutputError::StepsWithoutOutput { span: head.span }));
        };
        if output.value != "output" {
            return Err(Box::new(StepOutputError::NotAStepOutput {
                step: step.value.clone(),
                member: output.value.clone(),
                span: output.span,
            }));
        }
        let span = head.span.to(output.span);
        let Some(outputs) = self.scope.steps else {
            return Err(Box::new(StepOutputError::StepOutputOutsideWorkflow { step: step.value.clone(), span }));
        };
        let Some(index) = outputs.steps.iter().position(|(name, _)| *name == step.value) else {
            let close = nearest(&step.value, outputs.steps.iter().map(|(name, _)| name.as_str()));
            return Err(Box::new(StepOutputError::UnknownStep { step: step.value.clone(), span: step.span, close }));
        };
        if index >= outputs.current {
            let own = index == outputs.current;
            return Err(Box::new(StepOutputError::StepOutputNotYetRecorded { step: step.value.clone(), own, span }));
        }
        let Some(ty) = outputs.steps.get(index).and_then(|(_, ty)| ty.clone()) else {
            return Err(Box::new(StepOutputError::UntypedStepOutput { step: step.value.clone(), span }));
        };
        let expr = Expr {
            kind: ExprKind::StepOutput { step: crate::ids::StepId::from_index(index), name: step.value.clone() },
            ty,
            span,
        };
        Ok((expr, rest.get(2..).unwrap_or_default()))
    }

    fn unknown_name(&self, name: &ast::Name) -> NameError {
        let mut candidates: Vec<&str> = self.scope.locals.iter().map(|(local, _)| local.as_str()).collect();
        if self.scope.fields_visible {
            candidates.extend(self.scope.symbols.fields.keys().map(String::as_str));
        }
        NameError::UnknownName {
            name: name.value.clone(),
            span: name.span,
            close: nearest(&name.value, candidates),
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
                    let close = nearest(&member.value, fields.iter().map(|(name, _)| name.as_str()));
                    return self.error(NameError::UnknownMember {
                        member: member.value.clone(),
                        object: object.ty.clone(),
                        span: member.span,
                        close,
                    });
                }
            },
            other => {
                return self.error(NameError::MemberOfNonObject {
                    member: member.value.clone(),
                    found: other.clone(),
                    span: member.span,
                });
            }
        };
        Expr { kind: ExprKind::Member { object: Box::new(object), member: member.value.clone() }, ty, span }
    }
}
