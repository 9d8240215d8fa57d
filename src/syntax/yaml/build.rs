//! Assembles the AST from the YAML tree: the program's sections, and in
//! them every declaration, step, branch, action and directive, following
//! the fixed key sets and shorthands of the language reference.
//!
//! Id-keyed mappings (flows, schema, context, tools, signals, object
//! `fields`, tool `params`/`returns`) keep every entry in order, repeats
//! included: lowering reports `duplicate_id` once for both syntaxes. Every
//! other mapping has a fixed key set or free keys checked for repeats here.

use super::tree::{NodeId, NodeKind, Resolved, Scalar, Tree};
use super::values::{Entry, Keyed, RepeatFinder, Values};
use crate::diag::Diagnostic;
use crate::source::{Span, Spanned};
use crate::syntax::ast::History;
use crate::syntax::ast::{
    Abort, Action, ActionKind, Agent, AskModel, BodyValue, Branch, Call, Complete, Directive, ExecSpec, FieldDecl,
    FlowDecl, ForEach, Goto, GotoStep, HttpSpec, Limits, Name, Number, OnError, Program, SignalDecl, StepDecl, Then,
    ToolDecl, ToolImpl, TypeExpr,
};
use crate::syntax::compact::Compact;
use crate::syntax::error::YamlError;

mod schedule;

const PROGRAM_KEYS: &[&str] = &["agent", "schema", "context", "tools", "signals", "flows"];
const AGENT_KEYS: &[&str] = &["name", "identity", "rules", "limits", "history"];
const HISTORY_KEYS: &[&str] = &["keep_last", "summarize"];
const LIMIT_KEYS: &[&str] = &[
    "max_auto_steps",
    "max_tool_rounds",
    "max_turn_tokens",
    "max_run_llm_calls",
    "max_run_tokens",
    "turn_timeout",
    "message",
];
const TYPE_KEYS: &[&str] = &["type", "description", "min", "max", "pattern", "values", "examples", "items", "fields"];
const TOOL_KEYS: &[&str] = &["description", "params", "returns", "http", "exec", "builtin"];
const HTTP_KEYS: &[&str] = &["method", "url", "headers", "body", "timeout"];
const EXEC_KEYS: &[&str] = &["command", "timeout", "env"];
const SIGNAL_KEYS: &[&str] = &["when", "if", "phase", "behavior", "cooldown", "extract", "then"];
const FLOW_KEYS: &[&str] = &[
    "title",
    "when",
    "if",
    "default",
    "requires",
    "optional",
    "keep",
    "fresh",
    "rules",
    "on_enter",
    "on_complete",
    "complete",
    "steps",
    "schedule",
];
const NEXT_KEYS: &[&str] = &["next"];
const STEP_KEYS: &[&str] = &[
    "id",
    "prompt",
    "say",
    "collect",
    "requires",
    "skip_if",
    "when",
    "if",
    "auto",
    "branches",
    "next",
    "do",
    "on_enter",
    "prepare",
    "finalize",
    "tools",
    "max_asks",
    "on_no_answer",
    "on_error",
    "wait",
];
const BRANCH_KEYS: &[&str] = &["if", "when", "then", "label"];
const ON_ERROR_KEYS: &[&str] = &["retry", "backoff"];
const ACTION_KEYS: &[&str] = &["set", "append", "call", "emit", "say", "for_each", "ask_model"];
const ASK_MODEL_KEYS: &[&str] = &["into", "instruction", "examples", "tools"];
const CALL_KEYS: &[&str] = &["tool", "args", "save"];
const FOR_EACH_KEYS: &[&str] = &["in", "as", "where", "do"];
const GOTO_KEYS: &[&str] = &["flow", "data"];
const GOTO_STEP_KEYS: &[&str] = &["flow", "step"];

const DIRECTIVE_HELP: &str =
    "a directive is a mapping such as `{ goto: FLOW }`, `{ reply: TEXT }` or `{ abort: true }`";

/// Builds the program held by `tree`, reporting what does not fit the
/// language into `diagnostics`. `taken` holds the flows built by
/// [`flow_body`] while the tree was read, by the number of their
/// [`NodeKind::Taken`] node.
pub fn build(tree: &Tree<'_>, taken: Vec<Option<FlowDecl>>, diagnostics: &mut Vec<Diagnostic>) -> Program {
    let mut builder = Builder { values: Values { tree, diagnostics }, taken };
    builder.program(tree.root())
}

/// Builds one flow declaration, `key: value` in the `flows` section, from a
/// tree still being read (see [`super::tree::FlowSink`]).
pub fn flow_body(tree: &Tree<'_>, key: NodeId, value: NodeId, diagnostics: &mut Vec<Diagnostic>) -> Option<FlowDecl> {
    let mut builder = Builder { values: Values { tree, diagnostics }, taken: Vec::new() };
    let (name, entry, span) = builder.declaration_entry(key, value)?;
    builder.flow(name, entry, span)
}

struct Builder<'tree, 'input> {
    values: Values<'tree, 'input>,
    taken: Vec<Option<FlowDecl>>,
}

impl<'tree> Builder<'tree, '_> {
    fn program(&mut self, root: NodeId) -> Program {
        let mut program = Program::default();
        if !self.values.is_mapping(root) {
            let found = self.values.describe(root);
            let span = self.values.span(root);
            self.values.diagnostics.push(YamlError::NotAProgram { found, span }.into());
            return program;
        }
        let sections = self.values.keyed_mapping(root, PROGRAM_KEYS, "a program");
        if let Some(entry) = sections.get("agent") {
            program.agent = self.agent(entry);
        }
        if let Some(entry) = sections.get("schema") {
            program.schema = self.field_decls(entry).map(|fields| fields.value).unwrap_or_default();
        }
        if let Some(entry) = sections.get("context") {
            program.context = self.field_decls(entry).map(|fields| fields.value).unwrap_or_default();
        }
        if let Some(entry) = sections.get("tools") {
            program.tools =
                self.declarations(entry, "tools", |builder, name, entry, span| builder.tool(name, entry, span));
        }
        if let Some(entry) = sections.get("signals") {
            program.signals =
                self.declarations(entry, "signals", |builder, name, entry, span| builder.signal(name, entry, span));
        }
        if let Some(entry) = sections.get("flows") {
            program.flows =
                self.declarations(entry, "flows", |builder, name, entry, span| builder.flow(name, entry, span));
        }
        program
    }

    /// An id-keyed mapping of declarations, in order, repeats included.
    fn declarations<T>(
        &mut self,
        entry: Entry<'_>,
        plural: &str,
        mut declaration: impl FnMut(&mut Self, Name, Entry<'tree>, Span) -> Option<T>,
    ) -> Vec<T> {
        if self.values.is_nothing(entry.value) {
            return Vec::new();
        }
        if !self.values.is_mapping(entry.value) {
            let help = format!("write each of the {plural} as `id:` followed by its keys, indented below it");
            self.values.wrong_shape(entry, &format!("a mapping of ids to {plural}"), help);
            return Vec::new();
        }
        let tree = self.values.tree;
        let mut declarations = Vec::with_capacity(tree.entry_count(entry.value));
        for (key_id, value) in tree.entries(entry.value) {
            let Some((name, entry, span)) = self.declaration_entry(key_id, value) else {
                continue;
            };
            if let Some(built) = declaration(self, name, entry, span) {
                declarations.push(built);
            }
        }
        declarations
    }

    /// The name, entry and whole span of one `id: body` declaration; `None`
    /// (reported) when the key is not a name.
    fn declaration_entry(&mut self, key_id: NodeId, value: NodeId) -> Option<(Name, Entry<'tree>, Span)> {
        let name = self.values.key_name(key_id)?;
        let span = name.span.to(self.values.span(value));
        let key = &*self.values.scalar(key_id)?.value;
        let entry = Entry { key, key_span: name.span, value };
        Some((name, entry, span))
    }

    /// The keys of a declaration's body; an empty body is an empty mapping.
    fn body(&mut self, entry: Entry<'_>, allowed: &'static [&'static str], what: &str) -> Option<Keyed<'tree>> {
        if self.values.is_nothing(entry.value) {
            return Some(self.values.keyed_mapping(entry.value, allowed, what));
        }
        self.values.keyed(entry, allowed, what, "a mapping")
    }

    // ------------------------------------------------------------ agent

    fn agent(&mut self, entry: Entry<'_>) -> Option<Agent> {
        let keys = self.body(entry, AGENT_KEYS, "the agent")?;
        let mut agent = Agent { span: entry.key_span.to(self.values.span(entry.value)), ..Agent::default() };
        if let Some(name) = keys.get("name") {
            agent.name = self.values.text(name, "a name");
        }
        if let Some(identity) = keys.get("identity") {
            agent.identity = self.values.template(identity);
        }
        if let Some(rules) = keys.get("rules") {
            agent.rules = self.values.templates(rules);
        }
        if let Some(limits) = keys.get("limits") {
            agent.limits = self.limits(limits);
        }
        if let Some(history) = keys.get("history") {
            agent.history = self.history(history);
        }
        Some(agent)
    }

    /// `history: {keep_last: N, summarize: true}`.
    fn history(&mut self, entry: Entry<'_>) -> History {
        let Some(keys) = self.body(entry, HISTORY_KEYS, "`history`") else {
            return History::default();
        };
        History {
            keep_last: keys.get("keep_last").and_then(|value| self.values.int(value)),
            summarize: keys.get("summarize").and_then(|value| self.values.boolean(value)).is_some_and(|on| on.value),
        }
    }

    fn limits(&mut self, entry: Entry<'_>) -> Limits {
        let Some(keys) = self.body(entry, LIMIT_KEYS, "`limits`") else {
            return Limits::default();
        };
        Limits {
            max_auto_steps: keys.get("max_auto_steps").and_then(|value| self.values.int(value)),
            max_tool_rounds: keys.get("max_tool_rounds").and_then(|value| self.values.int(value)),
            max_turn_tokens: keys.get("max_turn_tokens").and_then(|value| self.values.int(value)),
            max_run_llm_calls: keys.get("max_run_llm_calls").and_then(|value| self.values.int(value)),
            max_run_tokens: keys.get("max_run_tokens").and_then(|value| self.values.int(value)),
            turn_timeout: keys.get("turn_timeout").and_then(|value| self.values.duration(value)),
            message: keys.get("message").and_then(|value| self.values.template(value)),
        }
    }

    // ------------------------------------------------------------ types

    /// `name: type` declarations (schema, context, params, returns, object
    /// fields), repeats included.
    fn field_decls(&mut self, entry: Entry<'_>) -> Option<Spanned<Vec<FieldDecl>>> {
        let span = self.values.span(entry.value);
        if self.values.is_nothing(entry.value) {
            return Some(Spanned::new(Vec::new(), entry.key_span));
        }
        if !self.values.is_mapping(entry.value) {
            self.values.wrong_shape(
                entry,
                "a mapping of field names to types",
                "write one `name: type` per line, e.g. `hotel: string`",
            );
            return None;
        }
        let tree = self.values.tree;
        let mut fields = Vec::with_capacity(tree.entry_count(entry.value));
        for (key_id, value) in tree.entries(entry.value) {
            let Some(name) = self.values.key_name(key_id) else {
                continue;
            };
            let Some(key_scalar) = self.values.scalar(key_id) else {
                continue;
            };
            let field_entry = Entry { key: &key_scalar.value, key_span: name.span, value };
            let Some(ty) = self.type_expr(field_entry) else {
                continue;
            };
            let span = name.span.to(ty.span);
            fields.push(FieldDecl { name, ty, span });
        }
        Some(Spanned::new(fields, span))
    }

    /// A type: its name alone (`bool`), or a mapping with `type` and options.
    fn type_expr(&mut self, entry: Entry<'_>) -> Option<TypeExpr> {
        let span = self.values.span(entry.value);
        if let Some(Resolved::Str(_)) = self.values.scalar(entry.value).map(Scalar::resolve) {
            let name = self.values.name(entry, "a type")?;
            return Some(TypeExpr::bare(name, span));
        }
        if !self.values.is_mapping(entry.value) {
            self.values.wrong_shape(
                entry,
                "a type",
                "write a type name (`string`, `int`, `date`, ...) or a mapping such as `{ type: int, min: 1 }`",
            );
            return None;
        }
        let keys = self.values.keyed_mapping(entry.value, TYPE_KEYS, "a field type");
        let Some(type_entry) = keys.get("type") else {
            self.values.missing_key(
                span,
                "a field type",
                "type",
                "add `type:` with one of string, int, float, bool, date, datetime, enum, list, object",
            );
            return None;
        };
        let name = self.values.name(type_entry, "a type name")?;
        let values = keys.get("values").and_then(|values_entry| {
            if self.values.is_sequence(values_entry.value) || self.values.is_nothing(values_entry.value) {
                let span = self.values.span(values_entry.value);
                Some(Spanned::new(self.values.texts(values_entry, "a list of values"), span))
            } else {
                self.values.wrong_shape(
                    values_entry,
                    "a list of values",
                    "write the values as a list: `values: [free, pro]`",
                );
                None
            }
        });
        Some(TypeExpr {
            name,
            description: keys.get("description").and_then(|value| self.values.text(value, "a description")),
            min: keys.get("min").and_then(|value| self.values.number(value)),
            max: keys.get("max").and_then(|value| self.values.number(value)),
            pattern: keys.get("pattern").and_then(|value| self.values.text(value, "a pattern")),
            values,
            examples: keys
                .get("examples")
                .map(|value| self.values.texts(value, "a list of examples"))
                .unwrap_or_default(),
            items: keys.get("items").and_then(|value| self.type_expr(value)).map(Box::new),
            fields: keys.get("fields").and_then(|value| self.field_decls(value)),
            span,
        })
    }

    // ------------------------------------------------------------ tools

    fn tool(&mut self, name: Name, entry: Entry<'_>, span: Span) -> Option<ToolDecl> {
        let keys = self.body(entry, TOOL_KEYS, "a tool")?;
        let mut implementations: Vec<ToolImpl> = Vec::new();
        if let Some(http) = keys.get("http") {
            implementations.extend(self.http(http));
        }
        if let Some(exec) = keys.get("exec") {
            implementations.extend(self.exec(exec));
        }
        if let Some(builtin) = keys.get("builtin") {
            if let Some(builtin_name) = self.values.name(builtin, "a builtin name") {
                implementations.push(ToolImpl::Builtin {
                    name: builtin_name,
                    span: builtin.key_span.to(self.values.span(builtin.value)),
                });
            }
        }
        implementations.sort_by_key(|implementation| implementation.span().start);
        Some(ToolDecl {
            name,
            description: keys.get("description").and_then(|value| self.values.text(value, "a description")),
            params: keys
                .get("params")
                .and_then(|value| self.field_decls(value))
                .map(|fields| fields.value)
                .unwrap_or_default(),
            returns: keys.get("returns").and_then(|value| self.field_decls(value)),
            implementations,
            span,
        })
    }

    fn http(&mut self, entry: Entry<'_>) -> Option<ToolImpl> {
        let keys = self.values.keyed(entry, HTTP_KEYS, "an `http` block", "a mapping")?;
        let span = entry.key_span.to(self.values.span(entry.value));
        // A missing method or url is reported but the implementation is
        // kept, so the tool is not also reported as having none.
        let method = match keys.get("method") {
            Some(method) => self.values.word(method, "an HTTP method", "write `method: GET` (or POST, PUT, ...)"),
            None => {
                self.values.missing_key(span, "an `http` block", "method", "add `method: GET` (or POST, PUT, ...)");
                None
            }
        };
        let url = match keys.get("url") {
            Some(url) => self.values.template(url),
            None => {
                self.values.missing_key(span, "an `http` block", "url", "add `url: \"https://...\"`");
                None
            }
        };
        Some(ToolImpl::Http(HttpSpec {
            method: method.unwrap_or_else(|| Spanned::new(String::new(), entry.key_span)),
            url: url.unwrap_or_else(|| crate::syntax::ast::Template::literal("", entry.key_span)),
            headers: keys.get("headers").map(|headers| self.headers(headers)).unwrap_or_default(),
            body: keys.get("body").map(|body| self.body_value(body)),
            timeout: keys.get("timeout").and_then(|value| self.values.duration(value)),
            span,
        }))
    }

    fn headers(&mut self, entry: Entry<'_>) -> Vec<(Name, crate::syntax::ast::Template)> {
        if self.values.is_nothing(entry.value) {
            return Vec::new();
        }
        if !self.values.is_mapping(entry.value) {
            self.values.wrong_shape(
                entry,
                "a mapping of header names to values",
                "write one `Header-Name: value` per line",
            );
            return Vec::new();
        }
        let tree = self.values.tree;
        let mut repeats = RepeatFinder::new(tree.entry_count(entry.value));
        let mut headers = Vec::new();
        for (key_id, value) in tree.entries(entry.value) {
            let Some((key, key_span)) = self.values.key_text(key_id) else {
                continue;
            };
            if let Some(first_span) = repeats.earlier_use(key, key_span) {
                self.values.repeated_key(key, key_span, first_span, "`headers`");
                continue;
            }
            if let Some(template) = self.values.template(Entry { key, key_span, value }) {
                headers.push((Spanned::new(key.to_string(), key_span), template));
            }
        }
        headers
    }

    /// A JSON body: strings are templates, everything else is kept as is.
    fn body_value(&mut self, entry: Entry<'_>) -> BodyValue {
        let span = self.values.span(entry.value);
        let tree = self.values.tree;
        if self.values.is_sequence(entry.value) {
            let items = tree.items(entry.value).iter().map(|item| self.body_value(entry.with_value(*item))).collect();
            return BodyValue::List(Spanned::new(items, span));
        }
        if self.values.is_mapping(entry.value) {
            let mut repeats = RepeatFinder::new(tree.entry_count(entry.value));
            let mut members = Vec::with_capacity(tree.entry_count(entry.value));
            for (key_id, value) in tree.entries(entry.value) {
                let Some((key, key_span)) = self.values.key_text(key_id) else {
                    continue;
                };
                if let Some(first_span) = repeats.earlier_use(key, key_span) {
                    self.values.repeated_key(key, key_span, first_span, "a `body` object");
                    continue;
                }
                let member = self.body_value(Entry { key, key_span, value });
                members.push((Spanned::new(key.to_string(), key_span), member));
            }
            return BodyValue::Object(Spanned::new(members, span));
        }
        let resolved = self.values.scalar(entry.value).map(Scalar::resolve);
        match resolved {
            Some(Resolved::Bool(value)) => BodyValue::Bool(Spanned::new(value, span)),
            Some(Resolved::Int(value)) => BodyValue::Number(Spanned::new(Number::Int(value), span)),
            Some(Resolved::Float(value)) => BodyValue::Number(Spanned::new(Number::Float(value), span)),
            Some(Resolved::BigInt) => {
                self.values.integer_too_large(span);
                BodyValue::Null(span)
            }
            Some(Resolved::Str(_)) => match self.values.template(entry) {
                Some(template) => BodyValue::String(template),
                None => BodyValue::Null(span),
            },
            Some(Resolved::Null) | None => BodyValue::Null(span),
        }
    }

    /// `exec: [program, args...]`, `exec: program`, or
    /// `exec: { command: [...], timeout: 10s }`.
    fn exec(&mut self, entry: Entry<'_>) -> Option<ToolImpl> {
        let span = entry.key_span.to(self.values.span(entry.value));
        if self.values.is_mapping(entry.value) {
            let keys = self.values.keyed_mapping(entry.value, EXEC_KEYS, "an `exec` block");
            let command = match keys.get("command") {
                Some(command) => self.command(command)?,
                None => {
                    self.values.missing_key(span, "an `exec` block", "command", "add `command: [./program, arg]`");
                    Vec::new()
                }
            };
            let env = keys.get("env").map(|names| self.values.texts(names, "environment variable names"));
            return Some(ToolImpl::Exec(ExecSpec {
                command,
                timeout: keys.get("timeout").and_then(|value| self.values.duration(value)),
                env: env.unwrap_or_default(),
                span,
            }));
        }
        let command = self.command(entry)?;
        Some(ToolImpl::Exec(ExecSpec { command, timeout: None, env: Vec::new(), span }))
    }

    fn command(&mut self, entry: Entry<'_>) -> Option<Vec<Spanned<String>>> {
        if self.values.is_sequence(entry.value) {
            return Some(self.values.texts(entry, "a program and its arguments"));
        }
        if let Some(Resolved::Str(_)) = self.values.scalar(entry.value).map(Scalar::resolve) {
            return Some(self.values.texts(entry, "a program"));
        }
        self.values.wrong_shape(
            entry,
            "a program and its arguments",
            "write a list: `[./tools/lookup.sh, --verbose]` (no shell is involved)",
        );
        None
    }

    // ------------------------------------------------------------ signals

    fn signal(&mut self, name: Name, entry: Entry<'_>, span: Span) -> Option<SignalDecl> {
        let keys = self.body(entry, SIGNAL_KEYS, "a signal")?;
        Some(SignalDecl {
            name,
            when: keys.get("when").map(|value| self.values.texts(value, "a condition")).unwrap_or_default(),
            guard: keys.get("if").map(|value| self.values.exprs(value)).unwrap_or_default(),
            phase: keys
                .get("phase")
                .and_then(|value| self.values.word(value, "a phase", "write `phase: pre`, `post` or `both`")),
            behavior: keys.get("behavior").and_then(|value| {
                self.values.word(value, "a behavior", "write `behavior: always`, `once` or `cooldown`")
            }),
            cooldown: keys.get("cooldown").and_then(|value| self.values.duration(value)),
            extract: keys
                .get("extract")
                .map(|value| self.values.names(value, "a list of field names"))
                .unwrap_or_default(),
            then: keys.get("then").and_then(|value| self.then(value)),
            span,
        })
    }

    // ------------------------------------------------------------ flows

    fn flow(&mut self, name: Name, entry: Entry<'_>, span: Span) -> Option<FlowDecl> {
        if let NodeKind::Taken(taken) = self.values.tree.node(entry.value).kind {
            return self.taken.get_mut(taken as usize).and_then(Option::take);
        }
        let keys = self.body(entry, FLOW_KEYS, "a flow")?;
        let complete_next = keys.get("complete").and_then(|complete| {
            let next_keys = self.values.keyed(complete, NEXT_KEYS, "a flow's `complete`", "`{ next: FLOW }`")?;
            let next = next_keys.get("next")?;
            self.values.name(next, "a flow name")
        });
        let mut flow = FlowDecl {
            name,
            title: keys.get("title").and_then(|value| self.values.text(value, "a title")),
            when: keys.get("when").map(|value| self.values.texts(value, "a condition")).unwrap_or_default(),
            guard: keys.get("if").map(|value| self.values.exprs(value)).unwrap_or_default(),
            default: keys.get("default").and_then(|value| self.values.boolean(value)),
            requires: keys
                .get("requires")
                .map(|value| self.values.names(value, "a list of field names"))
                .unwrap_or_default(),
            optional: keys
                .get("optional")
                .map(|value| self.values.names(value, "a list of field names"))
                .unwrap_or_default(),
            keep: keys.get("keep").map(|value| self.values.names(value, "a list of field names")).unwrap_or_default(),
            fresh: keys.get("fresh").map(|value| self.values.names(value, "a list of field names")).unwrap_or_default(),
            rules: keys.get("rules").map(|value| self.values.templates(value)).unwrap_or_default(),
            on_enter: keys.get("on_enter").map(|value| self.actions(value)).unwrap_or_default(),
            on_complete: keys.get("on_complete").map(|value| self.actions(value)).unwrap_or_default(),
            complete_next,
            steps: keys.get("steps").map(|value| self.steps(value)).unwrap_or_default(),
            schedule: keys.get("schedule").and_then(|value| self.schedule(value)),
            span,
        };
        flow.compact();
        Some(flow)
    }

    fn steps(&mut self, entry: Entry<'_>) -> Vec<StepDecl> {
        if self.values.is_nothing(entry.value) {
            return Vec::new();
        }
        if !self.values.is_sequence(entry.value) {
            self.values.wrong_shape(
                entry,
                "a list of steps",
                "start each step with `- id: NAME`, one list item per step",
            );
            return Vec::new();
        }
        let items = self.values.tree.items(entry.value);
        // Steps are most of a program's AST: allocate exactly, not by doubling.
        let mut steps = Vec::with_capacity(items.len());
        steps.extend(items.iter().filter_map(|item| self.step(entry.with_value(*item))));
        steps
    }

    fn step(&mut self, entry: Entry<'_>) -> Option<StepDecl> {
        let keys = self.values.keyed(entry, STEP_KEYS, "a step", "a step (a mapping with `id`)")?;
        let list = |builder: &mut Self, key: &str| {
            keys.get(key).map(|value| builder.values.names(value, "a list of names")).unwrap_or_default()
        };
        let actions =
            |builder: &mut Self, key: &str| keys.get(key).map(|value| builder.actions(value)).unwrap_or_default();
        Some(StepDecl {
            id: keys.get("id").and_then(|value| self.values.name(value, "a step id")),
            prompt: keys.get("prompt").and_then(|value| self.values.template(value)),
            say: keys.get("say").and_then(|value| self.values.template(value)),
            collect: keys
                .get("collect")
                .map(|value| self.values.names(value, "a list of field names"))
                .unwrap_or_default(),
            requires: keys
                .get("requires")
                .map(|value| self.values.names(value, "a list of field names"))
                .unwrap_or_default(),
            skip_if: keys.get("skip_if").map(|value| self.values.expr(value)),
            when: keys.get("when").map(|value| self.values.texts(value, "a condition")).unwrap_or_default(),
            guard: keys.get("if").map(|value| self.values.exprs(value)).unwrap_or_default(),
            auto: keys.get("auto").and_then(|value| self.values.boolean(value)),
            branches: keys.get("branches").and_then(|value| self.branches(value)),
            next: keys.get("next").and_then(|value| self.values.name(value, "a step id or `end`")),
            actions: actions(self, "do"),
            on_enter: actions(self, "on_enter"),
            prepare: actions(self, "prepare"),
            finalize: actions(self, "finalize"),
            tools: list(self, "tools"),
            max_asks: keys.get("max_asks").and_then(|value| self.values.int(value)),
            on_no_answer: keys.get("on_no_answer").and_then(|value| self.directive(value)).map(Box::new),
            on_error: keys.get("on_error").and_then(|value| self.on_error(value)),
            wait: keys.get("wait").and_then(|value| self.values.duration(value)),
            span: self.values.span(entry.value),
        })
    }

    fn branches(&mut self, entry: Entry<'_>) -> Option<Spanned<Vec<Branch>>> {
        let span = self.values.span(entry.value);
        if self.values.is_nothing(entry.value) {
            return Some(Spanned::new(Vec::new(), entry.key_span));
        }
        if !self.values.is_sequence(entry.value) {
            self.values.wrong_shape(
                entry,
                "a list of branch entries",
                "write each entry as a list item: `- if: confirmed == true` then `then: book`",
            );
            return None;
        }
        let tree = self.values.tree;
        let branches = tree.items(entry.value).iter().filter_map(|item| self.branch(entry.with_value(*item))).collect();
        Some(Spanned::new(branches, span))
    }

    fn branch(&mut self, entry: Entry<'_>) -> Option<Branch> {
        let keys = self.values.keyed(entry, BRANCH_KEYS, "a branch entry", "a branch entry (a mapping with `then`)")?;
        let span = self.values.span(entry.value);
        let then = match keys.get("then") {
            Some(then) => self.then(then),
            None => {
                self.values.missing_key(
                    span,
                    "a branch entry",
                    "then",
                    "add `then:` with a step id, a flow id or a directive",
                );
                None
            }
        };
        Some(Branch {
            guard: keys.get("if").map(|value| self.values.exprs(value)).unwrap_or_default(),
            when: keys.get("when").map(|value| self.values.texts(value, "a condition")).unwrap_or_default(),
            then,
            label: keys.get("label").and_then(|value| self.values.text(value, "a label")),
            span,
        })
    }

    /// `then: NAME` (a step, else a flow) or `then: { directive }`.
    fn then(&mut self, entry: Entry<'_>) -> Option<Then> {
        if self.values.is_mapping(entry.value) {
            return self.directive(entry).map(|directive| Then::Directive(Box::new(directive)));
        }
        if let Some(Resolved::Str(_)) = self.values.scalar(entry.value).map(Scalar::resolve) {
            return self.values.name(entry, "a target").map(Then::Target);
        }
        self.values.wrong_shape(
            entry,
            "a step or flow id, or a directive",
            format!("write `then: STEP`, or a directive: {DIRECTIVE_HELP}"),
        );
        None
    }

    /// `on_error: stop | continue | { retry: N, backoff: 2s }` (workflows),
    /// or a directive object (conversations): a mapping with `retry` or
    /// `backoff` is a retry policy, any other mapping a directive.
    fn on_error(&mut self, entry: Entry<'_>) -> Option<OnError> {
        let span = self.values.span(entry.value);
        let help = "write `on_error: stop`, `continue` or `{ retry: 3, backoff: 2s }` in a workflow; a directive such as `on_error: { reply: \"…\" }` in a conversation";
        if self.values.is_mapping(entry.value) && !self.is_retry_policy(entry) {
            return self.directive(entry).map(|directive| OnError::Directive(Box::new(directive)));
        }
        if self.values.is_mapping(entry.value) {
            let keys = self.values.keyed_mapping(entry.value, ON_ERROR_KEYS, "`on_error`");
            let Some(retry) = keys.get("retry") else {
                self.values.missing_key(span, "`on_error`", "retry", help);
                return None;
            };
            return Some(OnError::Retry {
                times: self.values.int(retry)?,
                backoff: keys.get("backoff").and_then(|value| self.values.duration(value)),
                span,
            });
        }
        match self.values.scalar(entry.value).map(Scalar::resolve) {
            Some(Resolved::Str("stop")) => Some(OnError::Stop(span)),
            Some(Resolved::Str("continue")) => Some(OnError::Continue(span)),
            _ => {
                self.values.wrong_shape(
                    entry,
                    "`stop`, `continue`, `{ retry: N, backoff: DURATION }` or a directive",
                    help,
                );
                None
            }
        }
    }

    /// Whether an `on_error` mapping is a workflow retry policy (it names
    /// `retry` or `backoff`) rather than a directive.
    fn is_retry_policy(&self, entry: Entry<'_>) -> bool {
        let tree = self.values.tree;
        tree.entries(entry.value).any(|(key, _)| {
            matches!(self.values.scalar(key).map(Scalar::resolve), Some(Resolved::Str("retry" | "backoff")))
        })
    }

    // ------------------------------------------------------------ actions

    fn actions(&mut self, entry: Entry<'_>) -> Vec<Action> {
        if self.values.is_nothing(entry.value) {
            return Vec::new();
        }
        if !self.values.is_sequence(entry.value) {
            self.values.wrong_shape(
                entry,
                "a list of actions",
                "write each action as a list item, e.g. `- say: Hello`",
            );
            return Vec::new();
        }
        let tree = self.values.tree;
        tree.items(entry.value).iter().filter_map(|item| self.action(entry.with_value(*item))).collect()
    }

    /// A one-key mapping: `set`, `append`, `call`, `emit`, `say`, `for_each` or `ask_model`.
    fn action(&mut self, entry: Entry<'_>) -> Option<Action> {
        let span = self.values.span(entry.value);
        if !self.values.is_mapping(entry.value) {
            self.values.wrong_shape(
                entry,
                "an action",
                "an action is a mapping with one key: `set`, `append`, `call`, `emit`, `say`, `for_each` or `ask_model`",
            );
            return None;
        }
        let tree = self.values.tree;
        let mut action: Option<Action> = None;
        let mut first_key_span: Option<Span> = None;
        for (key_id, value) in tree.entries(entry.value) {
            let Some((key, key_span)) = self.values.key_text(key_id) else {
                continue;
            };
            if !ACTION_KEYS.contains(&key) {
                self.values.unknown_key(key, key_span, ACTION_KEYS, "an action");
                continue;
            }
            if let Some(first) = first_key_span {
                self.values.diagnostics.push(YamlError::ActionWithTwoKeys { span: key_span, first }.into());
                continue;
            }
            first_key_span = Some(key_span);
            let action_entry = Entry { key, key_span, value };
            let kind = match key {
                "set" => Some(ActionKind::Set(self.values.assignments(action_entry, "`set`"))),
                "append" => Some(ActionKind::Append(self.values.assignments(action_entry, "`append`"))),
                "call" => self.call(action_entry).map(ActionKind::Call),
                "emit" => self.directive(action_entry).map(|directive| ActionKind::Emit(Box::new(directive))),
                "say" => self.values.template(action_entry).map(ActionKind::Say),
                "ask_model" => self.ask_model(action_entry).map(|ask| ActionKind::AskModel(Box::new(ask))),
                _ => self.for_each(action_entry).map(|for_each| ActionKind::ForEach(Box::new(for_each))),
            };
            action = kind.map(|kind| Action { kind, span });
        }
        if action.is_none() && first_key_span.is_none() && tree.entry_count(entry.value) == 0 {
            self.values.wrong_shape(
                entry,
                "an action",
                "an action is a mapping with one key: `set`, `append`, `call`, `emit`, `say`, `for_each` or `ask_model`",
            );
        }
        action
    }

    fn ask_model(&mut self, entry: Entry<'_>) -> Option<AskModel> {
        let keys = self.values.keyed(
            entry,
            ASK_MODEL_KEYS,
            "`ask_model`",
            "`{ into: FIELD, instruction: TEXT, examples: [...], tools: [...] }`",
        )?;
        let span = entry.key_span.to(self.values.span(entry.value));
        let Some(into) = keys.get("into") else {
            self.values.missing_key(span, "`ask_model`", "into", "add `into:` with the field the answer is written to");
            return None;
        };
        let Some(instruction) = keys.get("instruction") else {
            self.values.missing_key(
                span,
                "`ask_model`",
                "instruction",
                "add `instruction:` with what to ask the model",
            );
            return None;
        };
        Some(AskModel {
            into: self.values.name(into, "a field name")?,
            instruction: self.values.template(instruction)?,
            examples: keys
                .get("examples")
                .map(|examples| self.values.texts(examples, "a list of examples"))
                .unwrap_or_default(),
            tools: keys.get("tools").map(|tools| self.values.names(tools, "a list of tool names")).unwrap_or_default(),
            span,
        })
    }

    fn call(&mut self, entry: Entry<'_>) -> Option<Call> {
        let keys = self.values.keyed(entry, CALL_KEYS, "a call", "`{ tool: NAME, args: {...}, save: FIELD }`")?;
        let span = entry.key_span.to(self.values.span(entry.value));
        let Some(tool) = keys.get("tool") else {
            self.values.missing_key(span, "a call", "tool", "add `tool:` with the name of the tool to call");
            return None;
        };
        Some(Call {
            tool: self.values.name(tool, "a tool name")?,
            args: keys.get("args").map(|args| self.values.assignments(args, "`args`")).unwrap_or_default(),
            save: keys.get("save").and_then(|save| self.values.name(save, "a field name")),
            span,
        })
    }

    fn for_each(&mut self, entry: Entry<'_>) -> Option<ForEach> {
        let keys = self.values.keyed(entry, FOR_EACH_KEYS, "`for_each`", "`{ in: LIST, as: NAME, do: [actions] }`")?;
        let span = entry.key_span.to(self.values.span(entry.value));
        let items = match keys.get("in") {
            Some(items) => Some(self.values.expr(items)),
            None => {
                self.values.missing_key(span, "`for_each`", "in", "add `in:` with the list to go through");
                None
            }
        };
        let binding = match keys.get("as") {
            Some(binding) => self.values.name(binding, "a name"),
            None => {
                self.values.missing_key(span, "`for_each`", "as", "add `as:` with a name for the current item");
                None
            }
        };
        let filter = keys.get("where").map(|filter| self.values.expr(filter));
        let actions = keys.get("do").map(|actions| self.actions(actions)).unwrap_or_default();
        Some(ForEach { items: items?, binding: binding?, filter, actions, span })
    }

    // ------------------------------------------------------------ directives

    fn directive(&mut self, entry: Entry<'_>) -> Option<Directive> {
        let keys = self.values.keyed(entry, super::super::ast::DIRECTIVE_KEYS, "a directive", "a directive")?;
        let mut directive = Directive { span: self.values.span(entry.value), ..Directive::default() };
        if let Some(goto) = keys.get("goto") {
            directive.goto = self.goto(goto);
        }
        if let Some(goto_step) = keys.get("goto_step") {
            directive.goto_step = self.goto_step(goto_step, "`goto_step`");
        }
        if let Some(ask_again) = keys.get("ask_again") {
            directive.ask_again = self.goto_step(ask_again, "`ask_again`");
        }
        if let Some(complete) = keys.get("complete") {
            directive.complete = self.complete(complete);
        }
        if let Some(abort) = keys.get("abort") {
            directive.abort = self.abort(abort);
        }
        if let Some(reset) = keys.get("reset") {
            directive.reset = self.values.boolean(reset);
        }
        if let Some(reply) = keys.get("reply") {
            directive.reply = self.values.template(reply);
        }
        if let Some(set) = keys.get("set") {
            directive.set = self.values.assignments(set, "`set`");
        }
        if let Some(set_context) = keys.get("set_context") {
            directive.set_context = self.values.assignments(set_context, "`set_context`");
        }
        if let Some(append_prompt) = keys.get("append_prompt") {
            directive.append_prompt = self.values.templates(append_prompt);
        }
        if let Some(inject_tools) = keys.get("inject_tools") {
            directive.inject_tools = self.values.names(inject_tools, "a list of tool names");
        }
        if let Some(halt) = keys.get("halt") {
            directive.halt = self.values.boolean(halt);
        }
        Some(directive)
    }

    /// `goto: FLOW` or `goto: { flow: FLOW, data: { field: expr } }`.
    fn goto(&mut self, entry: Entry<'_>) -> Option<Goto> {
        let span = entry.key_span.to(self.values.span(entry.value));
        if self.values.is_mapping(entry.value) {
            let keys = self.values.keyed_mapping(entry.value, GOTO_KEYS, "`goto`");
            return Some(Goto {
                flow: keys.get("flow").and_then(|flow| self.values.name(flow, "a flow id")),
                data: keys.get("data").map(|data| self.values.assignments(data, "`data`")).unwrap_or_default(),
                span,
            });
        }
        let flow = self.values.name(entry, "a flow id or `{ flow: FLOW, data: {...} }`")?;
        Some(Goto { flow: Some(flow), data: Vec::new(), span })
    }

    /// `goto_step: STEP` or `goto_step: { flow: FLOW, step: STEP }`, and
    /// `ask_again` in the same shapes (`key` names it in messages).
    fn goto_step(&mut self, entry: Entry<'_>, key: &str) -> Option<GotoStep> {
        let span = entry.key_span.to(self.values.span(entry.value));
        if self.values.is_mapping(entry.value) {
            let keys = self.values.keyed_mapping(entry.value, GOTO_STEP_KEYS, key);
            return Some(GotoStep {
                flow: keys.get("flow").and_then(|flow| self.values.name(flow, "a flow id")),
                step: keys.get("step").and_then(|step| self.values.name(step, "a step id")),
                span,
            });
        }
        let step = self.values.name(entry, "a step id or `{ flow: FLOW, step: STEP }`")?;
        Some(GotoStep { flow: None, step: Some(step), span })
    }

    /// `complete: true`, `complete: false` (no completion) or
    /// `complete: { next: FLOW }`.
    fn complete(&mut self, entry: Entry<'_>) -> Option<Complete> {
        let span = entry.key_span.to(self.values.span(entry.value));
        if self.values.is_mapping(entry.value) {
            let keys = self.values.keyed_mapping(entry.value, NEXT_KEYS, "`complete`");
            return Some(Complete {
                next: keys.get("next").and_then(|next| self.values.name(next, "a flow id")),
                span,
            });
        }
        match self.values.scalar(entry.value).map(Scalar::resolve) {
            Some(Resolved::Bool(true)) => Some(Complete { next: None, span }),
            Some(Resolved::Bool(false)) => None,
            _ => {
                self.values.wrong_shape(
                    entry,
                    "`true` or `{ next: FLOW }`",
                    "write `complete: true`, or `complete: { next: FLOW }` to enter FLOW next",
                );
                None
            }
        }
    }

    /// `abort: true`, `abort: false` (no abort) or `abort: "reason"`.
    fn abort(&mut self, entry: Entry<'_>) -> Option<Abort> {
        let span = entry.key_span.to(self.values.span(entry.value));
        match self.values.scalar(entry.value).map(Scalar::resolve) {
            Some(Resolved::Bool(true)) => Some(Abort { reason: None, span }),
            Some(Resolved::Bool(false)) => None,
            Some(Resolved::Str(_) | Resolved::Int(_) | Resolved::BigInt | Resolved::Float(_)) => {
                Some(Abort { reason: self.values.template(entry), span })
            }
            _ => {
                self.values.wrong_shape(
                    entry,
                    "`true` or a reason",
                    "write `abort: true`, or `abort: \"why the flow stops\"`",
                );
                None
            }
        }
    }
}
