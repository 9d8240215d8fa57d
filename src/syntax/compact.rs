//! Releases the spare capacity of a flow's AST once it is built.
//!
//! Both front ends build lists by pushing, and `collect()` over an iterator
//! std cannot trust gives even a one-item list room for four. Most lists in
//! a flow hold one or two items (a path's segments, a template's parts, a
//! step's actions), so the slack was about a third of the AST of a large
//! program. Compacting each flow as soon as it is built keeps the AST, and
//! with it what a fresh `flowc` process must take from the OS, in
//! proportion to the source.

use super::ast::{
    Abort, Action, ActionKind, AskModel, Assignment, Branch, Call, Complete, Directive, Expr, ExprKind, FlowDecl,
    ForEach, Goto, GotoStep, OnError, StepDecl, Template, TemplatePart, Then,
};
use crate::source::Spanned;

/// A node whose lists can give back their spare capacity.
pub trait Compact {
    fn compact(&mut self);
}

impl<T: Compact> Compact for Vec<T> {
    fn compact(&mut self) {
        self.shrink_to_fit();
        self.iter_mut().for_each(Compact::compact);
    }
}

impl<T: Compact> Compact for Option<T> {
    fn compact(&mut self) {
        if let Some(inner) = self {
            inner.compact();
        }
    }
}

impl<T: Compact> Compact for Box<T> {
    fn compact(&mut self) {
        (**self).compact();
    }
}

impl<T: Compact> Compact for Spanned<T> {
    fn compact(&mut self) {
        self.value.compact();
    }
}

impl<A: Compact, B: Compact> Compact for (A, B) {
    fn compact(&mut self) {
        self.0.compact();
        self.1.compact();
    }
}

impl Compact for String {
    fn compact(&mut self) {
        self.shrink_to_fit();
    }
}

impl Compact for bool {
    fn compact(&mut self) {}
}

impl Compact for i64 {
    fn compact(&mut self) {}
}

impl Compact for FlowDecl {
    fn compact(&mut self) {
        let FlowDecl {
            name,
            title,
            when,
            guard,
            default: _,
            requires,
            optional,
            keep,
            fresh,
            rules,
            on_enter,
            on_complete,
            complete_next,
            steps,
            schedule: _,
            span: _,
        } = self;
        name.compact();
        title.compact();
        when.compact();
        guard.compact();
        requires.compact();
        optional.compact();
        keep.compact();
        fresh.compact();
        rules.compact();
        on_enter.compact();
        on_complete.compact();
        complete_next.compact();
        steps.compact();
    }
}

impl Compact for StepDecl {
    fn compact(&mut self) {
        let StepDecl {
            id,
            prompt,
            say,
            collect,
            requires,
            skip_if,
            when,
            guard,
            auto: _,
            branches,
            next,
            actions,
            on_enter,
            prepare,
            finalize,
            tools,
            max_asks: _,
            on_no_answer,
            on_error,
            wait,
            span: _,
        } = self;
        id.compact();
        prompt.compact();
        say.compact();
        collect.compact();
        requires.compact();
        skip_if.compact();
        when.compact();
        guard.compact();
        branches.compact();
        next.compact();
        actions.compact();
        on_enter.compact();
        prepare.compact();
        finalize.compact();
        tools.compact();
        on_no_answer.compact();
        on_error.compact();
        wait.compact();
    }
}

impl Compact for Branch {
    fn compact(&mut self) {
        let Branch { guard, when, then, label, span: _ } = self;
        guard.compact();
        when.compact();
        then.compact();
        label.compact();
    }
}

impl Compact for Then {
    fn compact(&mut self) {
        match self {
            Then::Target(name) => name.compact(),
            Then::Directive(directive) => directive.compact(),
        }
    }
}

impl Compact for Directive {
    fn compact(&mut self) {
        let Directive {
            goto,
            goto_step,
            ask_again,
            complete,
            abort,
            reset: _,
            reply,
            set,
            set_context,
            append_prompt,
            inject_tools,
            halt: _,
            span: _,
        } = self;
        goto.compact();
        goto_step.compact();
        ask_again.compact();
        complete.compact();
        abort.compact();
        reply.compact();
        set.compact();
        set_context.compact();
        append_prompt.compact();
        inject_tools.compact();
    }
}

impl Compact for Goto {
    fn compact(&mut self) {
        self.flow.compact();
        self.data.compact();
    }
}

impl Compact for GotoStep {
    fn compact(&mut self) {
        self.flow.compact();
        self.step.compact();
    }
}

impl Compact for Complete {
    fn compact(&mut self) {
        self.next.compact();
    }
}

impl Compact for Abort {
    fn compact(&mut self) {
        self.reason.compact();
    }
}

impl Compact for Assignment {
    fn compact(&mut self) {
        self.name.compact();
        self.value.compact();
    }
}

impl Compact for Action {
    fn compact(&mut self) {
        match &mut self.kind {
            ActionKind::Set(assignments) | ActionKind::Append(assignments) => assignments.compact(),
            ActionKind::Call(call) => call.compact(),
            ActionKind::Emit(directive) => directive.compact(),
            ActionKind::Say(template) => template.compact(),
            ActionKind::ForEach(for_each) => for_each.compact(),
            ActionKind::AskModel(ask) => ask.compact(),
        }
    }
}

impl Compact for AskModel {
    fn compact(&mut self) {
        let AskModel { into, instruction, examples, tools, span: _ } = self;
        into.compact();
        instruction.compact();
        examples.compact();
        tools.compact();
    }
}

impl Compact for Call {
    fn compact(&mut self) {
        self.tool.compact();
        self.args.compact();
        self.save.compact();
    }
}

impl Compact for ForEach {
    fn compact(&mut self) {
        let ForEach { items, binding, filter, actions, span: _ } = self;
        items.compact();
        binding.compact();
        filter.compact();
        actions.compact();
    }
}

impl Compact for OnError {
    fn compact(&mut self) {
        match self {
            OnError::Retry { backoff, .. } => backoff.compact(),
            OnError::Directive(directive) => directive.compact(),
            OnError::Stop(_) | OnError::Continue(_) => {}
        }
    }
}

impl Compact for Template {
    fn compact(&mut self) {
        self.parts.compact();
    }
}

impl Compact for TemplatePart {
    fn compact(&mut self) {
        match self {
            TemplatePart::Text(text) => text.compact(),
            TemplatePart::Expr(expr) => expr.compact(),
        }
    }
}

impl Compact for Expr {
    fn compact(&mut self) {
        match &mut self.kind {
            ExprKind::String { value } => value.compact(),
            ExprKind::List { items } => items.compact(),
            ExprKind::Path { segments } => segments.compact(),
            ExprKind::Unary { operand, .. } | ExprKind::IsSet { operand, .. } => operand.compact(),
            ExprKind::Binary { left, right, .. } => {
                left.compact();
                right.compact();
            }
            ExprKind::Call(call) => {
                call.function.compact();
                call.args.compact();
            }
            ExprKind::Null
            | ExprKind::Bool { .. }
            | ExprKind::Int { .. }
            | ExprKind::Float { .. }
            | ExprKind::Error => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Compact;
    use crate::source::SourceFile;

    #[test]
    fn compacting_leaves_no_list_with_spare_room_and_changes_nothing_else() {
        let file = SourceFile::new("t.flow", crate::testgen::large_program(2, 12));
        let (program, diagnostics) = crate::syntax::parse(&file);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let flow = program.flows.first().expect("a flow");
        let mut copy = flow.clone();
        copy.compact();
        assert_eq!(format!("{copy:?}"), format!("{flow:?}"));
        for step in &flow.steps {
            assert_eq!(step.collect.capacity(), step.collect.len());
            assert_eq!(step.actions.capacity(), step.actions.len());
            for part in step.prompt.iter().chain(&step.say).flat_map(|template| &template.parts) {
                if let crate::syntax::ast::TemplatePart::Expr(expr) = part {
                    if let crate::syntax::ast::ExprKind::Path { segments } = &expr.kind {
                        assert_eq!(segments.capacity(), segments.len());
                    }
                }
            }
            if let Some(template) = &step.prompt {
                assert_eq!(template.parts.capacity(), template.parts.len());
            }
        }
    }
}
