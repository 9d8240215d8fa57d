//! Calls of the built-in functions: known names, arity and argument types.

use super::{CallError, Checker, Operand};
use crate::diag::nearest;
use crate::expr::{Expr, ExprKind, Function, Type};
use crate::source::Span;
use crate::syntax::ast;

impl Checker<'_> {
    pub(super) fn call(&mut self, function: &ast::Name, args: &[ast::Expr], span: Span) -> Expr {
        let typed_args: Vec<Expr> = args.iter().map(|arg| self.expr(arg)).collect();
        let Some(known) = Function::from_name(&function.value) else {
            let close = nearest(&function.value, Function::ALL.iter().map(|known| known.name()));
            return self.error(CallError::UnknownFunction { name: function.value.clone(), span: function.span, close });
        };
        if typed_args.len() != known.arity() {
            return self.error(CallError::WrongArity { function: known, found: typed_args.len(), span });
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
                self.report(CallError::ArgumentMismatch { function, found: arg.ty.clone(), span: arg.span });
            }
        }
    }
}
