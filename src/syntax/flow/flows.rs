//! Walks a flow into the AST: its clauses, its steps, and in them branches,
//! actions and directives.

use super::walker::{Seen, Walker};
use crate::source::Spanned;
use crate::syntax::ast::{
    Abort, Action, ActionKind, AskModel, Assignment, Branch, Call, Complete, Directive, Expr, ExprKind, FlowDecl,
    ForEach, Goto, GotoStep, OnError, ScheduleDecl, StepDecl, Then,
};
use crate::syntax::compact::Compact;
use crate::syntax::error::FlowError;
use crate::syntax::expr::MAX_EXPR_DEPTH;
use crate::syntax::grammar::Rule;
use pest::iterators::Pair;

impl Walker<'_> {
    // ------------------------------------------------------------ flows

    pub(super) fn flow(&mut self, pair: Pair<'_, Rule>) -> FlowDecl {
        let span = self.span(&pair);
        let mut flow = FlowDecl {
            name: Spanned::new(String::new(), span),
            title: None,
            when: Vec::new(),
            guard: Vec::new(),
            default: None,
            requires: Vec::new(),
            optional: Vec::new(),
            keep: Vec::new(),
            fresh: Vec::new(),
            rules: Vec::new(),
            on_enter: Vec::new(),
            on_complete: Vec::new(),
            complete_next: None,
            steps: Vec::new(),
            schedule: None,
            span,
        };
        let mut seen = Seen::default();
        let items = pair.into_inner();
        // Steps are most of a program's AST: allocate exactly, not by doubling.
        flow.steps.reserve_exact(items.clone().filter(|item| item.as_rule() == Rule::step).count());
        for inner in items {
            let inner_span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => flow.name = self.name(&inner),
                Rule::text => flow.title = Some(self.text(inner)),
                Rule::when => flow.when.extend(self.texts(inner)),
                Rule::guard => {
                    let guards = self.exprs(inner);
                    flow.guard.extend(guards);
                }
                Rule::default_kw if self.first_time(&mut seen, "default", inner_span, "flow") => {
                    flow.default = Some(Spanned::new(true, inner_span));
                }
                Rule::requires => flow.requires.extend(self.names(inner)),
                Rule::optional => flow.optional.extend(self.names(inner)),
                Rule::keep => flow.keep.extend(self.names(inner)),
                Rule::fresh => flow.fresh.extend(self.names(inner)),
                Rule::rule_item => flow.rules.extend(self.template_value(inner)),
                Rule::on_enter => {
                    let actions = self.block_of(inner, 0);
                    flow.on_enter.extend(actions);
                }
                Rule::on_complete => {
                    let actions = self.block_of(inner, 0);
                    flow.on_complete.extend(actions);
                }
                Rule::flow_complete if self.first_time(&mut seen, "complete next", inner_span, "flow") => {
                    flow.complete_next = self.name_value(inner);
                }
                Rule::step => flow.steps.push(self.step(inner)),
                Rule::schedule if self.first_time(&mut seen, "schedule", inner_span, "flow") => {
                    flow.schedule = self.schedule(inner);
                }
                _ => {}
            }
        }
        flow.compact();
        flow
    }

    /// `schedule "CRON" [in "ZONE"]`: the expression, then the zone.
    fn schedule(&self, pair: Pair<'_, Rule>) -> Option<ScheduleDecl> {
        let span = self.span(&pair);
        let mut texts = pair.into_inner().filter(|inner| inner.as_rule() == Rule::text);
        let cron = self.text(texts.next()?);
        let timezone = texts.next().map(|zone| self.text(zone));
        Some(ScheduleDecl { cron, timezone, span })
    }

    // ------------------------------------------------------------ steps

    fn step(&mut self, pair: Pair<'_, Rule>) -> StepDecl {
        let mut step = StepDecl { span: self.span(&pair), ..StepDecl::default() };
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let span = self.span(&inner);
            match inner.as_rule() {
                Rule::auto_kw => step.auto = Some(Spanned::new(true, span)),
                Rule::name => step.id = Some(self.name(&inner)),
                Rule::prompt if self.first_time(&mut seen, "prompt", span, "step") => {
                    step.prompt = self.template_value(inner);
                }
                Rule::say if self.first_time(&mut seen, "say", span, "step") => {
                    step.say = self.template_value(inner);
                }
                Rule::collect => step.collect.extend(self.names(inner)),
                Rule::requires => step.requires.extend(self.names(inner)),
                Rule::skip_if if self.first_time(&mut seen, "skip_if", span, "step") => {
                    step.skip_if = Self::value(inner).map(|condition| self.expr(condition));
                }
                Rule::when => step.when.extend(self.texts(inner)),
                Rule::guard => {
                    let guards = self.exprs(inner);
                    step.guard.extend(guards);
                }
                Rule::branches if self.first_time(&mut seen, "branch", span, "step") => {
                    let entries = inner
                        .into_inner()
                        .filter(|entry| entry.as_rule() == Rule::branch_entry)
                        .map(|entry| self.branch(entry))
                        .collect();
                    step.branches = Some(Spanned::new(entries, span));
                }
                Rule::next if self.first_time(&mut seen, "next", span, "step") => {
                    step.next = self.name_value(inner);
                }
                Rule::do_block => {
                    let actions = self.block_of(inner, 0);
                    step.actions.extend(actions);
                }
                Rule::prepare => {
                    let actions = self.block_of(inner, 0);
                    step.prepare.extend(actions);
                }
                Rule::finalize => {
                    let actions = self.block_of(inner, 0);
                    step.finalize.extend(actions);
                }
                Rule::on_enter => {
                    let actions = self.block_of(inner, 0);
                    step.on_enter.extend(actions);
                }
                Rule::tools => step.tools.extend(self.names(inner)),
                Rule::max_asks => {
                    if self.first_time(&mut seen, "max_asks", span, "step")
                        && let Some(value) = Self::value(inner)
                    {
                        step.max_asks = self.whole_number(&value, "max_asks");
                    }
                }
                Rule::on_no_answer if self.first_time(&mut seen, "on_no_answer", span, "step") => {
                    step.on_no_answer = self.on_no_answer(inner).map(Box::new);
                }
                Rule::on_error if self.first_time(&mut seen, "on_error", span, "step") => {
                    step.on_error = self.on_error(inner);
                }
                Rule::wait if self.first_time(&mut seen, "wait", span, "step") => {
                    step.wait = self.name_value(inner);
                }
                Rule::set_action
                | Rule::append_action
                | Rule::call_action
                | Rule::emit_action
                | Rule::for_each
                | Rule::ask_model => {
                    step.actions.extend(self.action(inner, 0));
                }
                _ => {}
            }
        }
        step
    }

    fn branch(&mut self, pair: Pair<'_, Rule>) -> Branch {
        let mut branch =
            Branch { guard: Vec::new(), when: Vec::new(), then: None, label: None, span: self.span(&pair) };
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::guard => branch.guard = self.exprs(inner),
                Rule::when => branch.when = self.texts(inner),
                Rule::name | Rule::directive => branch.then = Some(self.target(inner)),
                Rule::text => branch.label = Some(self.text(inner)),
                _ => {}
            }
        }
        branch
    }

    /// YAML's `on_no_answer` is a directive object, so a bare name (which
    /// could be a step or a flow) has no equivalent and is refused.
    fn on_no_answer(&mut self, pair: Pair<'_, Rule>) -> Option<Directive> {
        let target = Self::value(pair)?;
        if target.as_rule() == Rule::directive {
            return Some(self.directive(target));
        }
        let name = target.as_str();
        let span = self.span(&target);
        self.diagnostics.push(FlowError::BareNoAnswerTarget { name: name.to_string(), span }.into());
        None
    }

    fn on_error(&mut self, pair: Pair<'_, Rule>) -> Option<OnError> {
        let value = Self::value(pair)?;
        let span = self.span(&value);
        if value.as_rule() == Rule::retry {
            let mut times = None;
            let mut backoff = None;
            for part in value.into_inner() {
                match part.as_rule() {
                    Rule::int_lit => times = self.whole_number(&part, "retry"),
                    Rule::duration => backoff = Some(self.name(&part)),
                    _ => {}
                }
            }
            return Some(OnError::Retry { times: times?, backoff, span });
        }
        if value.as_rule() == Rule::directive {
            return Some(OnError::Directive(Box::new(self.directive(value))));
        }
        match value.as_str() {
            "stop" => Some(OnError::Stop(span)),
            "continue" => Some(OnError::Continue(span)),
            other => {
                self.diagnostics.push(FlowError::UnknownErrorPolicy { policy: other.to_string(), span }.into());
                None
            }
        }
    }

    // ------------------------------------------------------------ actions

    /// The actions of the `block` inside a clause such as `do { … }`.
    fn block_of(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Vec<Action> {
        match pair.into_inner().find(|inner| inner.as_rule() == Rule::block) {
            Some(block) => self.block(block, depth),
            None => Vec::new(),
        }
    }

    fn block(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Vec<Action> {
        let mut actions = Vec::new();
        for inner in pair.into_inner() {
            actions.extend(self.action(inner, depth));
        }
        actions
    }

    fn action(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<Action> {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.too_deep(span);
            return None;
        }
        let kind = match pair.as_rule() {
            Rule::say => ActionKind::Say(self.template_value(pair)?),
            Rule::set_action => ActionKind::Set(self.assignments(pair)),
            Rule::append_action => ActionKind::Append(vec![self.append(pair)?]),
            Rule::emit_action => ActionKind::Emit(Box::new(self.directive(Self::value(pair)?))),
            Rule::call_action => ActionKind::Call(self.call(pair)?),
            Rule::for_each => ActionKind::ForEach(Box::new(self.for_each(pair, depth)?)),
            Rule::ask_model => ActionKind::AskModel(Box::new(self.ask_model(pair)?)),
            _ => return None,
        };
        Some(Action { kind, span })
    }

    /// The `field = expr` children of a `set` or `set_context`.
    fn assignments(&mut self, pair: Pair<'_, Rule>) -> Vec<Assignment> {
        let mut assignments = Vec::new();
        for inner in pair.into_inner() {
            if inner.as_rule() == Rule::assignment {
                assignments.extend(self.assignment(inner));
            }
        }
        assignments
    }

    fn assignment(&mut self, pair: Pair<'_, Rule>) -> Option<Assignment> {
        let mut parts = pair.into_inner();
        let name = self.name(&parts.next()?);
        let value = self.expr(parts.next()?);
        Some(Assignment { name, value })
    }

    /// `append item to list`: the list's name and the item, as an assignment.
    fn append(&mut self, pair: Pair<'_, Rule>) -> Option<Assignment> {
        let mut parts = pair.into_inner().filter(|part| matches!(part.as_rule(), Rule::expr | Rule::name));
        let value = self.expr(parts.next()?);
        let name = self.name(&parts.next()?);
        Some(Assignment { name, value })
    }

    /// `ask_model field: "instruction" examples ["…"] tools [t]`.
    fn ask_model(&mut self, pair: Pair<'_, Rule>) -> Option<AskModel> {
        let span = self.span(&pair);
        let mut into = None;
        let mut instruction = None;
        let mut examples = Vec::new();
        let mut tools = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name => into = Some(self.name(&inner)),
                Rule::string => instruction = Some(self.template(inner)),
                Rule::ask_examples => examples = self.texts(inner),
                Rule::ask_tools => tools = self.names(inner),
                _ => {}
            }
        }
        Some(AskModel { into: into?, instruction: instruction?, examples, tools, span })
    }

    /// `call tool(a: expr, b) -> save`: a bare `b` passes the field of the
    /// same name, as YAML's `args: { b: b }`.
    fn call(&mut self, pair: Pair<'_, Rule>) -> Option<Call> {
        let span = self.span(&pair);
        let mut tool = None;
        let mut args = Vec::new();
        let mut save = None;
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name if tool.is_none() => tool = Some(self.name(&inner)),
                Rule::name => save = Some(self.name(&inner)),
                Rule::argument => {
                    let mut parts = inner.into_inner();
                    let Some(name_pair) = parts.next() else {
                        continue;
                    };
                    let name = self.name(&name_pair);
                    let value = match parts.next() {
                        Some(value) => self.expr(value),
                        None => Expr { kind: ExprKind::Path { segments: vec![name.clone()] }, span: name.span },
                    };
                    args.push(Assignment { name, value });
                }
                _ => {}
            }
        }
        Some(Call { tool: tool?, args, save, span })
    }

    /// `for c in items where filter { actions }`.
    fn for_each(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<ForEach> {
        let span = self.span(&pair);
        let mut binding = None;
        let mut items = None;
        let mut filter = None;
        let mut actions = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name => binding = Some(self.name(&inner)),
                Rule::expr if items.is_none() => items = Some(self.expr(inner)),
                Rule::expr => filter = Some(self.expr(inner)),
                Rule::block => actions = self.block(inner, depth + 1),
                _ => {}
            }
        }
        Some(ForEach { items: items?, binding: binding?, filter, actions, span })
    }

    // ------------------------------------------------------------ directives

    /// A branch, signal or `emit` target: a bare name or a directive.
    pub(super) fn target(&mut self, pair: Pair<'_, Rule>) -> Then {
        if pair.as_rule() == Rule::directive {
            Then::Directive(Box::new(self.directive(pair)))
        } else {
            Then::Target(self.name(&pair))
        }
    }

    /// One clause or a `{ clause* }` block; clauses accumulate as the keys
    /// of one YAML directive object do.
    fn directive(&mut self, pair: Pair<'_, Rule>) -> Directive {
        let mut directive = Directive { span: self.span(&pair), ..Directive::default() };
        let mut seen = Seen::default();
        for clause in pair.into_inner() {
            let span = self.span(&clause);
            match clause.as_rule() {
                Rule::goto if self.first_time(&mut seen, "goto", span, "directive") => {
                    directive.goto = self.goto(clause);
                }
                Rule::goto_step if self.first_time(&mut seen, "goto_step", span, "directive") => {
                    let mut names = self.names(clause);
                    let step = names.pop();
                    directive.goto_step = Some(GotoStep { flow: names.pop(), step, span });
                }
                Rule::ask_again if self.first_time(&mut seen, "ask_again", span, "directive") => {
                    let mut names = self.names(clause);
                    let step = names.pop();
                    directive.ask_again = Some(GotoStep { flow: names.pop(), step, span });
                }
                Rule::complete if self.first_time(&mut seen, "complete", span, "directive") => {
                    let next = self.names(clause).pop();
                    directive.complete = Some(Complete { next, span });
                }
                Rule::abort if self.first_time(&mut seen, "abort", span, "directive") => {
                    let reason = self.template_value(clause);
                    directive.abort = Some(Abort { reason, span });
                }
                Rule::reset if self.first_time(&mut seen, "reset", span, "directive") => {
                    directive.reset = Some(Spanned::new(true, span));
                }
                Rule::halt if self.first_time(&mut seen, "halt", span, "directive") => {
                    directive.halt = Some(Spanned::new(true, span));
                }
                Rule::reply if self.first_time(&mut seen, "reply", span, "directive") => {
                    directive.reply = self.template_value(clause);
                }
                Rule::set_clause => {
                    let assignments = self.assignments(clause);
                    directive.set.extend(assignments);
                }
                Rule::set_context => {
                    let assignments = self.assignments(clause);
                    directive.set_context.extend(assignments);
                }
                Rule::append_prompt => {
                    for prompt in clause.into_inner().filter(|inner| inner.as_rule() == Rule::string) {
                        let template = self.template(prompt);
                        directive.append_prompt.push(template);
                    }
                }
                Rule::inject_tools => directive.inject_tools.extend(self.names(clause)),
                _ => {}
            }
        }
        directive
    }

    /// `goto F` or `goto F with { key: expr, … }`.
    fn goto(&mut self, pair: Pair<'_, Rule>) -> Option<Goto> {
        let span = self.span(&pair);
        let mut flow = None;
        let mut data = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::name => flow = Some(self.name(&inner)),
                Rule::member => data.extend(self.assignment(inner)),
                _ => {}
            }
        }
        Some(Goto { flow, data, span })
    }
}
