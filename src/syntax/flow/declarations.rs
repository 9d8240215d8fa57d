//! Walks the top-level declarations into the AST: the agent and its
//! limits, schema and context fields with their types, tools with their
//! `http`/`exec`/`builtin` implementation, and signals.

use super::duplicate_agent;
use super::walker::{Seen, Walker};
use crate::diag::Diagnostic;
use crate::source::{Span, Spanned};
use crate::syntax::ast::History;
use crate::syntax::ast::{
    Agent, BodyValue, ExecSpec, FieldDecl, HttpSpec, Limits, Name, Program, SignalDecl, Template, Text, ToolDecl,
    ToolImpl, TypeExpr,
};
use crate::syntax::error::FlowError;
use crate::syntax::expr::MAX_EXPR_DEPTH;
use crate::syntax::grammar::Rule;
use pest::iterators::Pair;

impl Walker<'_> {
    // ------------------------------------------------------------ program

    /// Adds one top-level construct to the program.
    pub(super) fn item(&mut self, program: &mut Program, item: Pair<'_, Rule>) {
        {
            match item.as_rule() {
                Rule::agent => {
                    let agent = self.agent(item);
                    if let Some(first) = &program.agent {
                        self.diagnostics.push(duplicate_agent(first, &agent));
                    } else {
                        program.agent = Some(agent);
                    }
                }
                Rule::schema => program.schema.extend(self.field_decls(item, 0)),
                Rule::context => program.context.extend(self.field_decls(item, 0)),
                Rule::tool => program.tools.push(self.tool(item)),
                Rule::signal => program.signals.push(self.signal(item)),
                Rule::flow => program.flows.push(self.flow(item)),
                _ => {}
            }
        }
    }

    // ------------------------------------------------------------ agent

    fn agent(&mut self, pair: Pair<'_, Rule>) -> Agent {
        let mut agent = Agent { span: self.span(&pair), ..Agent::default() };
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => agent.name = Some(self.name(&inner)),
                Rule::identity if self.first_time(&mut seen, "identity", span, "agent") => {
                    agent.identity = self.template_value(inner);
                }
                Rule::rule_item => agent.rules.extend(self.template_value(inner)),
                Rule::limits => self.limits(inner, &mut agent.limits, &mut seen),
                Rule::history if self.first_time(&mut seen, "history", span, "agent") => {
                    agent.history = self.history(inner);
                }
                _ => {}
            }
        }
        agent
    }

    /// Several `limits` blocks merge; each limit may be given once.
    fn limits(&mut self, pair: Pair<'_, Rule>, limits: &mut Limits, seen: &mut Seen) {
        for message in pair.clone().into_inner().filter(|inner| inner.as_rule() == Rule::limit_message) {
            let span = self.span(&message);
            if self.first_time(seen, "message", span, "agent's limits") {
                limits.message = self.template_value(message);
            }
        }
        for limit in pair.into_inner().filter(|inner| inner.as_rule() == Rule::limit) {
            let span = self.span(&limit);
            let mut parts = limit.into_inner();
            let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                continue;
            };
            let keyword = match key.as_str() {
                "max_auto_steps" => "max_auto_steps",
                "max_tool_rounds" => "max_tool_rounds",
                "max_turn_tokens" => "max_turn_tokens",
                "max_run_llm_calls" => "max_run_llm_calls",
                "max_run_tokens" => "max_run_tokens",
                _ => "turn_timeout",
            };
            if !self.first_time(seen, keyword, span, "agent's limits") {
                continue;
            }
            if keyword == "turn_timeout" {
                limits.turn_timeout = Some(self.name(&value));
                continue;
            }
            if value.as_rule() != Rule::int_lit {
                let span = self.span(&value);
                self.diagnostics.push(FlowError::LimitNotNumber { keyword: keyword.to_string(), span }.into());
                continue;
            }
            let number = self.whole_number(&value, keyword);
            match keyword {
                "max_auto_steps" => limits.max_auto_steps = number,
                "max_tool_rounds" => limits.max_tool_rounds = number,
                "max_run_llm_calls" => limits.max_run_llm_calls = number,
                "max_run_tokens" => limits.max_run_tokens = number,
                _ => limits.max_turn_tokens = number,
            }
        }
    }

    /// `history { keep_last N  summarize }`; each item may be given once.
    fn history(&mut self, pair: Pair<'_, Rule>) -> History {
        let mut history = History::default();
        let mut seen = Seen::default();
        for item in pair.into_inner() {
            let span = self.span(&item);
            match item.as_rule() {
                Rule::keep_last if self.first_time(&mut seen, "keep_last", span, "agent's history") => {
                    if let Some(value) = item.into_inner().find(|inner| inner.as_rule() == Rule::int_lit) {
                        history.keep_last = self.whole_number(&value, "keep_last");
                    }
                }
                Rule::summarize if self.first_time(&mut seen, "summarize", span, "agent's history") => {
                    history.summarize = true;
                }
                _ => {}
            }
        }
        history
    }

    // ------------------------------------------------------------ schema and types

    /// The `field_decl` children of a pair (schema, context, params, returns,
    /// object members).
    fn field_decls(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Vec<FieldDecl> {
        let mut fields = Vec::new();
        for inner in pair.into_inner() {
            if inner.as_rule() == Rule::field_decl
                && let Some(field) = self.field_decl(inner, depth)
            {
                fields.push(field);
            }
        }
        fields
    }

    fn field_decl(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<FieldDecl> {
        let span = self.span(&pair);
        let mut inner = pair.into_inner();
        let name = self.name(&inner.next()?);
        let ty = self.type_expr(inner.next()?, depth)?;
        Some(FieldDecl { name, ty, span })
    }

    fn type_expr(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<TypeExpr> {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.too_deep(span);
            return None;
        }
        let mut inner = pair.into_inner();
        let head = inner.next()?;
        let mut ty = self.type_head(head, span, depth)?;
        let mut seen = Seen::default();
        for option in inner {
            let option_span = self.span(&option);
            match option.as_rule() {
                Rule::text if self.first_time(&mut seen, "description", option_span, "type") => {
                    ty.description = Some(self.text(option));
                }
                Rule::range if self.first_time(&mut seen, "min..max", option_span, "type") => {
                    self.range(option, &mut ty);
                }
                Rule::pattern_opt if self.first_time(&mut seen, "pattern", option_span, "type") => {
                    ty.pattern = self.text_value(option);
                }
                Rule::examples_opt => ty.examples.extend(self.texts(option)),
                _ => {}
            }
        }
        Some(ty)
    }

    /// The type's name and structure: a plain type word, `enum(…)`,
    /// `list(T)` or `object {…}`.
    fn type_head(&mut self, head: Pair<'_, Rule>, span: Span, depth: usize) -> Option<TypeExpr> {
        let head_end = head.as_span().end();
        let rule = head.as_rule();
        if rule == Rule::name {
            return Some(TypeExpr::bare(self.name(&head), span));
        }
        let mut parts = head.into_inner();
        let keyword = parts.next()?;
        let keyword_name = self.name(&keyword);
        let after_keyword = keyword.as_span().end();
        let mut ty = TypeExpr::bare(keyword_name, span);
        match rule {
            Rule::enum_type => {
                let values = parts.map(|value| self.name_or_text(value)).collect();
                ty.values = Some(Spanned::new(values, self.bracketed_span(after_keyword, head_end)));
            }
            Rule::list_type => {
                ty.items = match parts.next() {
                    Some(items) => self.type_expr(items, depth + 1).map(Box::new),
                    None => None,
                };
            }
            _ => {
                let mut fields = Vec::new();
                for member in parts {
                    if let Some(field) = self.field_decl(member, depth + 1) {
                        fields.push(field);
                    }
                }
                ty.fields = Some(Spanned::new(fields, self.bracketed_span(after_keyword, head_end)));
            }
        }
        Some(ty)
    }

    /// `min..max`, either side optional.
    fn range(&mut self, pair: Pair<'_, Rule>, ty: &mut TypeExpr) {
        let range_start = pair.as_span().start();
        let range_span = self.span(&pair);
        let mut bounds = 0;
        for bound in pair.into_inner() {
            bounds += 1;
            let is_min = bound.as_span().start() == range_start;
            let number = self.number(&bound);
            if is_min {
                ty.min = number;
            } else {
                ty.max = number;
            }
        }
        if bounds == 0 {
            self.diagnostics.push(FlowError::RangeWithoutBound { span: range_span }.into());
        }
    }

    // ------------------------------------------------------------ tools

    fn tool(&mut self, pair: Pair<'_, Rule>) -> ToolDecl {
        let span = self.span(&pair);
        let mut name = None;
        let mut description = None;
        let mut params = Vec::new();
        let mut returns = None;
        let mut implementations = Vec::new();
        let mut headers: Vec<(Name, Template, Span)> = Vec::new();
        let mut body: Option<(BodyValue, Span)> = None;
        let mut timeout: Option<(Text, Span)> = None;
        let mut env: Vec<(Vec<Name>, Span)> = Vec::new();
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let inner_span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => name = Some(self.name(&inner)),
                Rule::field_decl => params.extend(self.field_decl(inner, 0)),
                Rule::returns => {
                    let brace_span = self.bracketed_span(inner.as_span().start() + "->".len(), inner.as_span().end());
                    returns = Some(Spanned::new(self.field_decls(inner, 0), brace_span));
                }
                Rule::description if self.first_time(&mut seen, "description", inner_span, "tool") => {
                    description = self.text_value(inner);
                }
                Rule::http => implementations.extend(self.http(inner)),
                Rule::exec => implementations.push(ToolImpl::Exec(ExecSpec {
                    command: self.texts(inner),
                    timeout: None,
                    env: Vec::new(),
                    span: inner_span,
                })),
                Rule::tool_env => {
                    let names = inner.into_inner().skip(1).flat_map(|names| names.into_inner());
                    let names: Vec<Name> = names.map(|pair| self.name(&pair)).collect();
                    env.push((names, inner_span));
                }
                Rule::builtin => {
                    if let Some(builtin_name) = self.name_value(inner) {
                        implementations.push(ToolImpl::Builtin { name: builtin_name, span: inner_span });
                    }
                }
                Rule::header => {
                    let mut parts = inner.into_inner().skip(1);
                    if let (Some(header_name), Some(value)) = (parts.next(), parts.next()) {
                        let header_name = self.name_or_text(header_name);
                        let value = self.template(value);
                        headers.push((header_name, value, inner_span));
                    }
                }
                Rule::body => {
                    if self.first_time(&mut seen, "body", inner_span, "tool")
                        && let Some(value) = Self::value(inner)
                    {
                        body = self.body_value(value, 0).map(|value| (value, inner_span));
                    }
                }
                Rule::timeout if self.first_time(&mut seen, "timeout", inner_span, "tool") => {
                    timeout = self.text_value(inner).map(|value| (value, inner_span));
                }
                _ => {}
            }
        }
        self.attach_http_options(&mut implementations, headers, body, timeout);
        self.attach_env(&mut implementations, env);
        ToolDecl {
            name: name.unwrap_or_else(|| Spanned::new(String::new(), span)),
            description,
            params,
            returns,
            implementations,
            span,
        }
    }

    /// `env` belongs to the tool's `exec`, written before or after it.
    fn attach_env(&mut self, implementations: &mut [ToolImpl], env: Vec<(Vec<Name>, Span)>) {
        let mut exec = implementations.iter_mut().find_map(|implementation| match implementation {
            ToolImpl::Exec(spec) => Some(spec),
            _ => None,
        });
        for (names, span) in env {
            match exec.as_deref_mut() {
                Some(spec) => spec.env.extend(names),
                None => self.diagnostics.push(FlowError::NeedsExec { clause: "env".to_string(), span }.into()),
            }
        }
    }

    fn http(&mut self, pair: Pair<'_, Rule>) -> Option<ToolImpl> {
        let span = self.span(&pair);
        let mut parts = pair.into_inner().skip(1);
        let method = self.name(&parts.next()?);
        let url = self.template(parts.next()?);
        Some(ToolImpl::Http(HttpSpec { method, url, headers: Vec::new(), body: None, timeout: None, span }))
    }

    /// `header` and `body` belong to the tool's `http` request and `timeout`
    /// to its `http` or `exec` one; they may be written before or after it.
    /// With several implementations (an `invalid_tool` for lowering) they go
    /// to the first that takes them.
    fn attach_http_options(
        &mut self,
        implementations: &mut [ToolImpl],
        headers: Vec<(Name, Template, Span)>,
        body: Option<(BodyValue, Span)>,
        timeout: Option<(Text, Span)>,
    ) {
        let mut http = implementations.iter_mut().find_map(|implementation| match implementation {
            ToolImpl::Http(spec) => Some(spec),
            _ => None,
        });
        for (header_name, value, span) in headers {
            match http.as_deref_mut() {
                Some(spec) => spec.headers.push((header_name, value)),
                None => self.diagnostics.push(needs_http("header", span)),
            }
        }
        if let Some((value, span)) = body {
            match http {
                Some(spec) => spec.body = Some(value),
                None => self.diagnostics.push(needs_http("body", span)),
            }
        }
        let Some((value, span)) = timeout else {
            return;
        };
        let target = implementations.iter_mut().find_map(|implementation| match implementation {
            ToolImpl::Http(spec) => Some(&mut spec.timeout),
            ToolImpl::Exec(spec) => Some(&mut spec.timeout),
            ToolImpl::Builtin { .. } => None,
        });
        match target {
            Some(slot) => *slot = Some(value),
            None => self.diagnostics.push(FlowError::TimeoutWithoutRequest { span }.into()),
        }
    }

    fn body_value(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<BodyValue> {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            self.too_deep(span);
            return None;
        }
        let value = match pair.as_rule() {
            Rule::null_lit => BodyValue::Null(span),
            Rule::bool_lit => BodyValue::Bool(Spanned::new(pair.as_str() == "true", span)),
            Rule::number => BodyValue::Number(self.number(&pair)?),
            Rule::string => BodyValue::String(self.template(pair)),
            Rule::json_list => {
                let mut items = Vec::new();
                for item in pair.into_inner() {
                    items.extend(self.body_value(item, depth + 1));
                }
                BodyValue::List(Spanned::new(items, span))
            }
            Rule::json_object => {
                let mut members = Vec::new();
                for member in pair.into_inner() {
                    let mut parts = member.into_inner();
                    let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    let key = self.name_or_text(key);
                    if let Some(value) = self.body_value(value, depth + 1) {
                        members.push((key, value));
                    }
                }
                BodyValue::Object(Spanned::new(members, span))
            }
            _ => return None,
        };
        Some(value)
    }

    // ------------------------------------------------------------ signals

    fn signal(&mut self, pair: Pair<'_, Rule>) -> SignalDecl {
        let span = self.span(&pair);
        let mut signal = SignalDecl {
            name: Spanned::new(String::new(), span),
            when: Vec::new(),
            guard: Vec::new(),
            phase: None,
            behavior: None,
            cooldown: None,
            extract: Vec::new(),
            then: None,
            span,
        };
        let mut seen = Seen::default();
        for inner in pair.into_inner() {
            let inner_span = self.span(&inner);
            match inner.as_rule() {
                Rule::name => signal.name = self.name(&inner),
                Rule::when => signal.when.extend(self.texts(inner)),
                Rule::guard => {
                    let guards = self.exprs(inner);
                    signal.guard.extend(guards);
                }
                Rule::phase if self.first_time(&mut seen, "phase", inner_span, "signal") => {
                    signal.phase = self.name_value(inner);
                }
                Rule::behavior if self.first_time(&mut seen, "behavior", inner_span, "signal") => {
                    for part in inner.into_inner() {
                        match part.as_rule() {
                            Rule::name => signal.behavior = Some(self.name(&part)),
                            Rule::duration => signal.cooldown = Some(self.name(&part)),
                            _ => {}
                        }
                    }
                }
                Rule::extract => signal.extract.extend(self.names(inner)),
                Rule::then if self.first_time(&mut seen, "then", inner_span, "signal") => {
                    signal.then = Self::value(inner).map(|target| self.target(target));
                }
                _ => {}
            }
        }
        signal
    }
}

fn needs_http(clause: &str, span: Span) -> Diagnostic {
    FlowError::NeedsHttp { clause: clause.to_string(), span }.into()
}
