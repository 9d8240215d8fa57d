//! Reads a `*.test.yaml` file into a [`TestFile`] on the span-carrying YAML
//! tree the program reader uses, checking every name against the compiled
//! program as it goes. What is wrong is a diagnostic with a code, as
//! `flowc check` gives, never a failed case: an expectation naming a step
//! that does not exist could never pass, and saying so at its line is what
//! the author needs.

use super::file::{
    Answer, Case, CaseBody, DirectiveExpect, Expect, ExpectKind, NeverBefore, ProviderChoice, ReplyMatch, Resume,
    StepExpect, Stub, TestFile, ToolExpect, Turn, WorkflowCase,
};
use crate::diag::{Code, Diagnostic, did_you_mean};
use crate::ir::Program;
use crate::source::{SourceFile, Span, Spanned};
use crate::syntax::yaml::tree::{self, NodeId, NodeKind, Resolved, Tree};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

const FILE_KEYS: &[&str] = &["program", "provider", "now", "tools", "cases"];
const CASE_KEYS: &[&str] =
    &["name", "context", "data", "tools", "provider", "turns", "workflow", "run", "resumes", "never", "never_before"];
const TURN_KEYS: &[&str] = &[
    "user",
    "flow",
    "step",
    "executed_steps",
    "stopped_reason",
    "data",
    "reply",
    "directives",
    "tools",
    "llm_calls",
    "ungrounded",
];
const RUN_KEYS: &[&str] = &["status", "steps", "data"];
const RESUME_KEYS: &[&str] = &["after", "status", "steps", "data"];
const STOP_REASONS: &[&str] = &[
    "needs_input",
    "flow_complete",
    "halt",
    "aborted",
    "auto_step_limit",
    "tool_round_limit",
    "token_limit",
    "time_limit",
    "waiting",
    "error",
    "step_limit",
    "session_token_limit",
    "session_time_limit",
    "error_limit",
];
const RUN_STATUSES: &[&str] = &["running", "completed", "failed", "waiting", "aborted", "paused"];
const STEP_STATUSES: &[&str] = &["pending", "running", "completed", "failed", "skipped", "waiting"];

/// The `program:` a test file names, resolved against its directory, read
/// before anything else so the rest can be checked against the program.
pub fn program_path(source: &SourceFile, path: &Path) -> Result<(PathBuf, Span), Diagnostic> {
    let mut diagnostics = Vec::new();
    let Some(tree) = tree::read(&source.text, &mut diagnostics, None) else {
        return Err(diagnostics.into_iter().next().unwrap_or_else(|| Diagnostic::new(Code::Syntax, "unreadable YAML")));
    };
    let root = tree.root();
    let entry = tree.entries(root).find(|(key, _)| scalar_text(&tree, *key) == Some("program"));
    let Some((_, value)) = entry else {
        return Err(Diagnostic::new(Code::MissingEntry, "a test file names its program")
            .at(Span::new(0, 0), "no `program:` key")
            .with_help("add `program: booking.flow` (a path relative to the test file)"));
    };
    match scalar_text(&tree, value) {
        Some(name) if !name.is_empty() => {
            let directory = path.parent().unwrap_or_else(|| Path::new(""));
            Ok((directory.join(name), tree.node(value).span))
        }
        _ => Err(Diagnostic::new(Code::InvalidValue, "`program` is a path")
            .at(tree.node(value).span, "not a path")
            .with_help("write `program: booking.flow`")),
    }
}

/// Reads the whole file. `program` is `None` when it did not compile: then
/// names are not checked (the program's own diagnostics say what is wrong).
pub fn read(source: SourceFile, path: &Path, program: Option<&Program>) -> (Option<TestFile>, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let Some(tree) = tree::read(&source.text, &mut diagnostics, None) else {
        return (None, diagnostics);
    };
    let mut reader = Reader { tree: &tree, program, diagnostics: Vec::new(), directory: directory_of(path) };
    let file = reader.file(&source, path);
    diagnostics.append(&mut reader.diagnostics);
    (file, diagnostics)
}

fn directory_of(path: &Path) -> PathBuf {
    path.parent().map_or_else(PathBuf::new, Path::to_path_buf)
}

fn scalar_text<'a>(tree: &'a Tree<'_>, id: NodeId) -> Option<&'a str> {
    match &tree.node(id).kind {
        NodeKind::Scalar(scalar) => Some(&scalar.value),
        _ => None,
    }
}

struct Reader<'a, 'input> {
    tree: &'a Tree<'input>,
    program: Option<&'a Program>,
    diagnostics: Vec<Diagnostic>,
    directory: PathBuf,
}

/// A mapping's entries: key text, key span, value.
type Entries<'a> = Vec<(&'a str, Span, NodeId)>;

impl<'a> Reader<'a, '_> {
    fn span(&self, id: NodeId) -> Span {
        self.tree.node(id).span
    }

    fn error(&mut self, code: Code, message: impl Into<String>, span: Span, label: &str, help: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(code, message).at(span, label).with_help(help));
    }

    /// The entries of a mapping with the keys `allowed` (a wrong or
    /// repeated key is reported and dropped); `None` when it is no mapping.
    fn mapping(&mut self, id: NodeId, allowed: &[&str], what: &str) -> Option<Entries<'a>> {
        if !matches!(self.tree.node(id).kind, NodeKind::Mapping(_)) {
            let found = self.describe(id);
            self.error(
                Code::InvalidValue,
                format!("{what} is a mapping"),
                self.span(id),
                found,
                "write `key: value` lines",
            );
            return None;
        }
        let tree = self.tree;
        let mut entries: Entries<'a> = Vec::new();
        for (key, value) in tree.entries(id) {
            let key_span = tree.node(key).span;
            let Some(name) = scalar_text(tree, key) else {
                self.error(Code::Syntax, "expected a name as a mapping key", key_span, "not a name", "write a word");
                continue;
            };
            if !allowed.is_empty() && !allowed.contains(&name) {
                let help = match did_you_mean(name, allowed.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("{what} takes {}", allowed.join(", ")),
                };
                self.error(Code::UnknownKey, format!("unknown key `{name}` in {what}"), key_span, "unknown key", help);
                continue;
            }
            if let Some((_, first, _)) = entries.iter().find(|(known, _, _)| *known == name) {
                let first = *first;
                self.diagnostics.push(
                    Diagnostic::new(Code::DuplicateKey, format!("key `{name}` appears twice in {what}"))
                        .at(key_span, "used again here")
                        .with_label(first, "first used here"),
                );
                continue;
            }
            entries.push((name, key_span, value));
        }
        Some(entries)
    }

    fn describe(&self, id: NodeId) -> &'static str {
        match &self.tree.node(id).kind {
            NodeKind::Sequence(_) => "a list",
            NodeKind::Mapping(_) | NodeKind::Taken(_) => "a mapping",
            NodeKind::Scalar(scalar) => match scalar.resolve() {
                Resolved::Null => "nothing",
                Resolved::Bool(_) => "a boolean",
                Resolved::Int(_) | Resolved::BigInt | Resolved::Float(_) => "a number",
                Resolved::Str(_) => "a text",
            },
        }
    }

    /// A text: any scalar but null (a reply may be `42`).
    fn text(&mut self, id: NodeId, what: &str) -> Option<String> {
        match &self.tree.node(id).kind {
            NodeKind::Scalar(scalar) if scalar.resolve() != Resolved::Null => Some(scalar.value.to_string()),
            _ => {
                let found = self.describe(id);
                self.error(Code::InvalidValue, format!("{what} is a text"), self.span(id), found, "write a text");
                None
            }
        }
    }

    /// A text that should be one of `known` (a stop reason, a run status):
    /// another is reported as an unknown `noun`, labelled `label`, with
    /// `help` listing them, and still returned, so the case is read on.
    fn known_word(
        &mut self,
        id: NodeId,
        what: &str,
        known: &[&str],
        (noun, label): (&str, &str),
        help: String,
    ) -> Option<String> {
        let word = self.text(id, what)?;
        if !known.contains(&word.as_str()) {
            self.error(Code::InvalidValue, format!("unknown {noun} `{word}`"), self.span(id), label, help);
        }
        Some(word)
    }

    /// A text or `null`.
    fn optional_text(&mut self, id: NodeId, what: &str) -> Option<Option<String>> {
        match &self.tree.node(id).kind {
            NodeKind::Scalar(scalar) if scalar.resolve() == Resolved::Null => Some(None),
            _ => self.text(id, what).map(Some),
        }
    }

    /// A list of texts; one text alone is a list of one.
    fn texts(&mut self, id: NodeId, what: &str) -> Option<Vec<Spanned<String>>> {
        let items: Vec<NodeId> = match &self.tree.node(id).kind {
            NodeKind::Sequence(_) => self.tree.items(id).to_vec(),
            _ => vec![id],
        };
        let mut texts = Vec::new();
        for item in items {
            let text = self.text(item, what)?;
            texts.push(Spanned::new(text, self.span(item)));
        }
        Some(texts)
    }

    fn items(&self, id: NodeId) -> Vec<NodeId> {
        match &self.tree.node(id).kind {
            NodeKind::Sequence(_) => self.tree.items(id).to_vec(),
            _ => vec![id],
        }
    }

    /// Any value as JSON.
    fn json(&mut self, id: NodeId) -> Value {
        match &self.tree.node(id).kind {
            NodeKind::Scalar(scalar) => match scalar.resolve() {
                Resolved::Null => Value::Null,
                Resolved::Bool(flag) => Value::Bool(flag),
                Resolved::Int(number) => Value::from(number),
                Resolved::Float(number) => serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number),
                Resolved::BigInt => {
                    let span = self.span(id);
                    self.error(Code::InvalidValue, "integer too large", span, "past 64 bits", "write a smaller number");
                    Value::Null
                }
                Resolved::Str(text) => Value::String(text.to_string()),
            },
            NodeKind::Sequence(_) => {
                let items = self.tree.items(id).to_vec();
                Value::Array(items.into_iter().map(|item| self.json(item)).collect())
            }
            NodeKind::Mapping(_) => {
                let tree = self.tree;
                let mut object = Map::new();
                for (key, value) in tree.entries(id) {
                    let key = scalar_text(tree, key).unwrap_or_default().to_string();
                    let value = self.json(value);
                    object.insert(key, value);
                }
                Value::Object(object)
            }
            NodeKind::Taken(_) => Value::Null,
        }
    }

    fn object(&mut self, id: NodeId, what: &str) -> Option<Map<String, Value>> {
        match self.json(id) {
            Value::Object(object) => Some(object),
            Value::Null => Some(Map::new()),
            _ => {
                let found = self.describe(id);
                self.error(
                    Code::InvalidValue,
                    format!("{what} is a mapping"),
                    self.span(id),
                    found,
                    "write `name: value`",
                );
                None
            }
        }
    }

    fn file(&mut self, source: &SourceFile, path: &Path) -> Option<TestFile> {
        let root = self.tree.root();
        let entries = self.mapping(root, FILE_KEYS, "a test file")?;
        let mut file = TestFile {
            source: source.clone(),
            path: path.to_path_buf(),
            program: PathBuf::new(),
            provider: ProviderChoice::Offline,
            now: None,
            tools: Vec::new(),
            cases: Vec::new(),
        };
        let mut has_cases = false;
        for (key, _, value) in entries {
            match key {
                "program" => {
                    let name = self.text(value, "`program`")?;
                    file.program = self.directory.join(name);
                }
                // A wrong value is reported and the rest read on, so that
                // one run shows every problem of the file.
                "provider" => {
                    if let Some(provider) = self.provider(value) {
                        file.provider = provider;
                    }
                }
                "now" => {
                    let Some(text) = self.text(value, "`now`") else { continue };
                    if crate::runtime::clock::FixedClock::parse(&text).is_err() {
                        self.error(
                            Code::InvalidValue,
                            "`now` is a time",
                            self.span(value),
                            "not a time",
                            "write 2026-01-05T10:00:00Z",
                        );
                    }
                    file.now = Some(Spanned::new(text, self.span(value)));
                }
                "tools" => file.tools = self.stubs(value),
                "cases" => {
                    has_cases = true;
                    for item in self.items(value) {
                        if let Some(case) = self.case(item) {
                            file.cases.push(case);
                        }
                    }
                }
                _ => {}
            }
        }
        if !has_cases {
            self.error(
                Code::MissingEntry,
                "a test file has cases",
                Span::new(0, 0),
                "no `cases:` key",
                "add `cases:` with a list of cases",
            );
        }
        Some(file)
    }

    fn provider(&mut self, id: NodeId) -> Option<ProviderChoice> {
        let text = self.text(id, "`provider`")?;
        if text == "offline" {
            return Some(ProviderChoice::Offline);
        }
        if let Some(recording) = text.strip_prefix("replay:") {
            let recording = self.directory.join(recording.trim());
            if !recording.is_file() {
                let span = self.span(id);
                self.error(
                    Code::InvalidValue,
                    format!("no recording at `{}`", recording.display()),
                    span,
                    "not found",
                    "record one with `flowc run --record FILE` or `flowc test --record DIR`",
                );
            }
            return Some(ProviderChoice::Replay(recording));
        }
        let span = self.span(id);
        self.error(
            Code::InvalidValue,
            format!("unknown provider `{text}`"),
            span,
            "not a test provider",
            "cases run on `offline` (the default) or `replay:FILE`, a recording made with --record",
        );
        None
    }

    fn known_tool(&mut self, name: &Spanned<String>) {
        let Some(program) = self.program else { return };
        if program.tools.iter().any(|tool| tool.name == name.value) {
            return;
        }
        let close = did_you_mean(&name.value, program.tools.iter().map(|tool| tool.name.as_str()));
        let help = close.map_or_else(
            || "the program declares no such tool".to_string(),
            |close| format!("did you mean `{close}`?"),
        );
        self.error(Code::UnknownTool, format!("unknown tool `{}`", name.value), name.span, "no such tool", help);
    }

    fn known_field(&mut self, name: &str, span: Span, context: bool) {
        let Some(program) = self.program else { return };
        let declared = if context { &program.context } else { &program.fields };
        if declared.iter().any(|field| field.name == name) {
            return;
        }
        let close = did_you_mean(name, declared.iter().map(|field| field.name.as_str()));
        let what = if context { "context key" } else { "field" };
        let help = close
            .map_or_else(|| format!("the program declares no such {what}"), |close| format!("did you mean `{close}`?"));
        let code = Code::UnknownField;
        self.error(code, format!("unknown {what} `{name}`"), span, format!("no such {what}").as_str(), help);
    }

    fn known_flow(&mut self, name: &str, span: Span) {
        let Some(program) = self.program else { return };
        if program.flow_by_name(name).is_some() {
            return;
        }
        let close = did_you_mean(name, program.flows.iter().map(|flow| flow.name.as_str()));
        let help = close
            .map_or_else(|| "the program has no such flow".to_string(), |close| format!("did you mean `{close}`?"));
        self.error(Code::UnknownTarget, format!("unknown flow `{name}`"), span, "no such flow", help);
    }

    /// A step of `flow`, or of any flow when none is named.
    fn known_step(&mut self, name: &str, span: Span, flow: Option<&str>) {
        let Some(program) = self.program else { return };
        let flows: Vec<&crate::ir::Flow> = match flow.and_then(|flow| program.flow_by_name(flow)) {
            Some(id) => program.flow(id).into_iter().collect(),
            None => program.flows.iter().collect(),
        };
        if flows.iter().any(|flow| flow.steps.iter().any(|step| step.name == name)) {
            return;
        }
        let names = flows.iter().flat_map(|flow| flow.steps.iter().map(|step| step.name.as_str()));
        let close = did_you_mean(name, names);
        let whose =
            flow.map_or_else(|| "no flow has this step".to_string(), |flow| format!("`{flow}` has no such step"));
        let help = close.map_or(whose, |close| format!("did you mean `{close}`?"));
        self.error(Code::UnknownTarget, format!("unknown step `{name}`"), span, "no such step", help);
    }

    fn data_keys(&mut self, id: NodeId, context: bool) {
        let tree = self.tree;
        for (key, _) in tree.entries(id) {
            if let Some(name) = scalar_text(tree, key) {
                self.known_field(name, tree.node(key).span, context);
            }
        }
    }

    fn stubs(&mut self, id: NodeId) -> Vec<Stub> {
        let Some(entries) = self.mapping(id, &[], "`tools`") else { return Vec::new() };
        let mut stubs = Vec::new();
        for (name, key_span, value) in entries {
            let tool = Spanned::new(name.to_string(), key_span);
            self.known_tool(&tool);
            let mut answers = Vec::new();
            for item in self.items(value) {
                if let Some(answer) = self.answer(item) {
                    answers.push(answer);
                }
            }
            stubs.push(Stub { tool, answers });
        }
        stubs
    }

    fn answer(&mut self, id: NodeId) -> Option<Answer> {
        let entries = self.mapping(id, &["returns", "error"], "a tool stub")?;
        match entries.as_slice() {
            [("returns", _, value)] => Some(Answer::Returns(self.json(*value))),
            [("error", _, value)] => self.text(*value, "`error`").map(Answer::Error),
            _ => {
                let span = self.span(id);
                self.error(
                    Code::InvalidValue,
                    "a tool stub gives one answer",
                    span,
                    "neither or both",
                    "write `{returns: {...}}` or `{error: \"...\"}`, or a list of them for successive calls",
                );
                None
            }
        }
    }

    fn case(&mut self, id: NodeId) -> Option<Case> {
        let entries = self.mapping(id, CASE_KEYS, "a case")?;
        let span = self.span(id);
        let find = |key: &str| {
            entries.iter().find(|(name, _, _)| *name == key).map(|(_, key_span, value)| (*key_span, *value))
        };
        let name = match find("name") {
            Some((_, value)) => self.text(value, "a case's `name`")?,
            None => {
                self.error(
                    Code::MissingEntry,
                    "a case has a name",
                    span,
                    "no `name:`",
                    "add `name: books after a yes`",
                );
                return None;
            }
        };
        let mut case = Case {
            name,
            context: Map::new(),
            data: Map::new(),
            tools: Vec::new(),
            provider: None,
            body: CaseBody::Conversation(Vec::new()),
            never: Vec::new(),
            never_before: Vec::new(),
        };
        if let Some((_, value)) = find("context") {
            self.data_keys(value, true);
            case.context = self.object(value, "`context`")?;
        }
        if let Some((_, value)) = find("data") {
            self.data_keys(value, false);
            case.data = self.object(value, "`data`")?;
        }
        if let Some((_, value)) = find("tools") {
            case.tools = self.stubs(value);
        }
        if let Some((_, value)) = find("provider") {
            case.provider = self.provider(value);
        }
        if let Some((_, value)) = find("never") {
            for item in self.items(value) {
                let entries = self.mapping(item, &["tool"], "`never`")?;
                if let Some((_, _, tool)) = entries.first() {
                    let tool = Spanned::new(self.text(*tool, "`tool`")?, self.span(*tool));
                    self.known_tool(&tool);
                    case.never.push(tool);
                }
            }
        }
        if let Some((_, value)) = find("never_before") {
            for item in self.items(value) {
                let entries = self.mapping(item, &["tool", "reply_to"], "`never_before`")?;
                let tool = entries.iter().find(|(key, _, _)| *key == "tool").map(|entry| entry.2);
                let reply_to = entries.iter().find(|(key, _, _)| *key == "reply_to").map(|entry| entry.2);
                let (Some(tool), Some(reply_to)) = (tool, reply_to) else {
                    let span = self.span(item);
                    self.error(
                        Code::MissingEntry,
                        "`never_before` names a tool and a message",
                        span,
                        "incomplete",
                        "write `{tool: book_hotel, reply_to: \"yes\"}`",
                    );
                    continue;
                };
                let tool = Spanned::new(self.text(tool, "`tool`")?, self.span(tool));
                self.known_tool(&tool);
                let reply_to = self.text(reply_to, "`reply_to`")?;
                case.never_before.push(NeverBefore { tool, reply_to, span: self.span(item) });
            }
        }
        let turns = find("turns");
        let workflow = find("workflow");
        case.body = match (turns, workflow) {
            (Some((_, value)), None) => {
                for (key, key_span, _) in &entries {
                    if matches!(*key, "run" | "resumes") {
                        self.error(
                            Code::UnknownKey,
                            format!("`{key}` belongs to a workflow case"),
                            *key_span,
                            "not with `turns`",
                            "a conversation case has `turns`; a workflow case `workflow`, `run` and `resumes`",
                        );
                    }
                }
                let mut turns = Vec::new();
                for item in self.items(value) {
                    if let Some(turn) = self.turn(item) {
                        turns.push(turn);
                    }
                }
                CaseBody::Conversation(turns)
            }
            (None, Some((_, value))) => CaseBody::Workflow(self.workflow(value, find("run"), find("resumes"))?),
            (Some(_), Some((key_span, _))) => {
                self.error(
                    Code::InvalidValue,
                    "a case has `turns` or `workflow`, not both",
                    key_span,
                    "second kind",
                    "split it into two cases",
                );
                return None;
            }
            (None, None) => {
                self.error(
                    Code::MissingEntry,
                    "a case has `turns` (a conversation) or `workflow` (a run)",
                    span,
                    "neither",
                    "add `turns:` with `- user: ...` items",
                );
                return None;
            }
        };
        Some(case)
    }

    fn turn(&mut self, id: NodeId) -> Option<Turn> {
        let entries = self.mapping(id, TURN_KEYS, "a turn")?;
        let span = self.span(id);
        let Some((_, _, user)) = entries.iter().find(|(key, _, _)| *key == "user") else {
            self.error(
                Code::MissingEntry,
                "a turn has a `user` message",
                span,
                "no `user:`",
                "add `user: Book the Grand Hotel`",
            );
            return None;
        };
        let user = self.text(*user, "`user`")?;
        let flow = entries
            .iter()
            .find(|(key, _, _)| *key == "flow")
            .and_then(|(_, _, value)| scalar_text(self.tree, *value))
            .map(str::to_string);
        let mut expects = Vec::new();
        for (key, key_span, value) in entries {
            if key == "user" {
                continue;
            }
            if let Some(kind) = self.expectation(key, value, flow.as_deref(), None) {
                expects.push(Expect { kind, key: key_span, value: self.span(value) });
            }
        }
        Some(Turn { user, span, expects })
    }

    /// One expectation of a turn or a run; `workflow` is the run's flow.
    fn expectation(
        &mut self,
        key: &str,
        value: NodeId,
        flow: Option<&str>,
        workflow: Option<&str>,
    ) -> Option<ExpectKind> {
        let span = self.span(value);
        Some(match key {
            "flow" => {
                let name = self.optional_text(value, "`flow`")?;
                if let Some(name) = &name {
                    self.known_flow(name, span);
                }
                ExpectKind::Flow(name)
            }
            "step" => {
                let name = self.optional_text(value, "`step`")?;
                if let Some(name) = &name {
                    self.known_step(name, span, flow);
                }
                ExpectKind::Step(name)
            }
            "executed_steps" => {
                let names = self.texts(value, "a step name")?;
                for name in &names {
                    self.known_step(&name.value, name.span, None);
                }
                ExpectKind::ExecutedSteps(names.into_iter().map(|name| name.value).collect())
            }
            "stopped_reason" => {
                let known = format!("a turn stops with one of {}", STOP_REASONS.join(", "));
                ExpectKind::StoppedReason(self.known_word(
                    value,
                    "`stopped_reason`",
                    STOP_REASONS,
                    ("stop reason", "not a stop reason"),
                    known,
                )?)
            }
            "data" => {
                self.data_keys(value, false);
                ExpectKind::Data(self.object(value, "`data`")?)
            }
            "reply" => ExpectKind::Reply(self.reply(value)?),
            "directives" => {
                let mut expected = Vec::new();
                for item in self.items(value) {
                    expected.push(self.directive(item)?);
                }
                ExpectKind::Directives(expected)
            }
            "tools" => {
                let mut expected = Vec::new();
                for item in self.items(value) {
                    expected.push(self.tool_call(item)?);
                }
                ExpectKind::Tools(expected)
            }
            "llm_calls" => match self.json(value).as_u64().and_then(|count| u32::try_from(count).ok()) {
                Some(count) => ExpectKind::LlmCalls(count),
                None => {
                    self.error(
                        Code::InvalidValue,
                        "`llm_calls` is a count",
                        span,
                        "not a whole number",
                        "write the most model calls the turn may make, like `2`",
                    );
                    return None;
                }
            },
            "ungrounded" => {
                ExpectKind::Ungrounded(self.texts(value, "a name")?.into_iter().map(|name| name.value).collect())
            }
            "status" => {
                let known = format!("a run is {}", RUN_STATUSES.join(", "));
                ExpectKind::Status(self.known_word(
                    value,
                    "`status`",
                    RUN_STATUSES,
                    ("run status", "not a status"),
                    known,
                )?)
            }
            "steps" => ExpectKind::Steps(self.step_records(value, workflow)?),
            _ => return None,
        })
    }

    fn reply(&mut self, id: NodeId) -> Option<ReplyMatch> {
        if !matches!(self.tree.node(id).kind, NodeKind::Mapping(_)) {
            return self.text(id, "`reply`").map(ReplyMatch::Exact);
        }
        let entries = self.mapping(id, &["contains", "matches"], "`reply`")?;
        match entries.as_slice() {
            [("contains", _, value)] => self.text(*value, "`contains`").map(ReplyMatch::Contains),
            [("matches", _, value)] => {
                let pattern = self.text(*value, "`matches`")?;
                match regex::Regex::new(&pattern) {
                    Ok(regex) => Some(ReplyMatch::Matches(regex)),
                    Err(error) => {
                        let span = self.span(*value);
                        let message = error.to_string().lines().last().unwrap_or_default().to_string();
                        self.error(Code::InvalidValue, "invalid regular expression", span, "does not compile", message);
                        None
                    }
                }
            }
            _ => {
                let span = self.span(id);
                self.error(
                    Code::InvalidValue,
                    "`reply` is a text, `{contains: ...}` or `{matches: ...}`",
                    span,
                    "one of them",
                    "write one key",
                );
                None
            }
        }
    }

    fn directive(&mut self, id: NodeId) -> Option<DirectiveExpect> {
        if !matches!(self.tree.node(id).kind, NodeKind::Mapping(_)) {
            let source = self.text(id, "a directive's source")?;
            return Some(DirectiveExpect { source, applied: None, directive: None });
        }
        let entries = self.mapping(id, &["source", "applied", "directive"], "a directive")?;
        let mut expected = DirectiveExpect { source: String::new(), applied: None, directive: None };
        for (key, _, value) in entries {
            match key {
                "source" => expected.source = self.text(value, "`source`")?,
                "applied" => expected.applied = self.json(value).as_bool(),
                _ => expected.directive = Some(self.json(value)),
            }
        }
        Some(expected)
    }

    fn tool_call(&mut self, id: NodeId) -> Option<ToolExpect> {
        let (tool, span, args) = if matches!(self.tree.node(id).kind, NodeKind::Mapping(_)) {
            let entries = self.mapping(id, &["tool", "args"], "a tool call")?;
            let tool = entries.iter().find(|(key, _, _)| *key == "tool").map(|entry| entry.2);
            let Some(tool) = tool else {
                let span = self.span(id);
                self.error(
                    Code::MissingEntry,
                    "a tool call names its tool",
                    span,
                    "no `tool:`",
                    "write `{tool: book_hotel, args: {...}}`",
                );
                return None;
            };
            let args = match entries.iter().find(|(key, _, _)| *key == "args") {
                Some((_, _, value)) => Some(self.object(*value, "`args`")?),
                None => None,
            };
            (self.text(tool, "`tool`")?, self.span(tool), args)
        } else {
            (self.text(id, "a tool name")?, self.span(id), None)
        };
        self.known_tool(&Spanned::new(tool.clone(), span));
        Some(ToolExpect { tool, args })
    }

    fn step_records(&mut self, id: NodeId, workflow: Option<&str>) -> Option<Vec<StepExpect>> {
        let entries = self.mapping(id, &[], "`steps`")?;
        let mut expected = Vec::new();
        for (step, key_span, value) in entries {
            self.known_step(step, key_span, workflow);
            let mut record = StepExpect { step: step.to_string(), status: None, output: None };
            if matches!(self.tree.node(value).kind, NodeKind::Mapping(_)) {
                for (key, _, inner) in self.mapping(value, &["status", "output"], "a step record")? {
                    if key == "status" {
                        record.status = Some(self.step_status(inner)?);
                    } else {
                        record.output = Some(self.json(inner));
                    }
                }
            } else {
                record.status = Some(self.step_status(value)?);
            }
            expected.push(record);
        }
        Some(expected)
    }

    fn step_status(&mut self, id: NodeId) -> Option<String> {
        let status = self.text(id, "a step status")?;
        if !STEP_STATUSES.contains(&status.as_str()) {
            let span = self.span(id);
            let help = format!("a step is {}", STEP_STATUSES.join(", "));
            self.error(Code::InvalidValue, format!("unknown step status `{status}`"), span, "not a step status", help);
        }
        Some(status)
    }

    fn workflow(
        &mut self,
        flow: NodeId,
        run: Option<(Span, NodeId)>,
        resumes: Option<(Span, NodeId)>,
    ) -> Option<WorkflowCase> {
        let name = self.text(flow, "`workflow`")?;
        let span = self.span(flow);
        self.known_flow(&name, span);
        if let Some(program) = self.program
            && let Some(found) = program.flow_by_name(&name).and_then(|id| program.flow(id))
            && !found.workflow
        {
            self.error(
                Code::InvalidValue,
                format!("`{name}` is not a workflow"),
                span,
                "a conversation",
                "a workflow case runs a flow whose steps are all `auto`; talk to a conversation with `turns`",
            );
        }
        let expects = match run {
            Some((_, value)) => self.run_expects(value, RUN_KEYS, &name)?,
            None => Vec::new(),
        };
        let mut case = WorkflowCase { flow: Spanned::new(name.clone(), span), expects, resumes: Vec::new() };
        if let Some((_, value)) = resumes {
            for item in self.items(value) {
                let entries = self.mapping(item, RESUME_KEYS, "a resume")?;
                let after = entries.iter().find(|(key, _, _)| *key == "after").map(|entry| entry.2);
                let after_ms = match after {
                    Some(after) => {
                        let text = self.text(after, "`after`")?;
                        match crate::duration::parse_duration_ms(&text) {
                            Ok(ms) => ms,
                            Err(error) => {
                                let span = self.span(after);
                                self.error(
                                    Code::InvalidDuration,
                                    format!("`{text}` is not a duration"),
                                    span,
                                    "not a duration",
                                    match error {
                                        crate::duration::DurationError::Malformed => {
                                            "write a whole number and a unit: 500ms, 30s, 10m, 2h, 1d"
                                        }
                                        crate::duration::DurationError::TooLong => "at most 3650d",
                                    },
                                );
                                return None;
                            }
                        }
                    }
                    None => 0,
                };
                let expects = self.run_expects(item, RESUME_KEYS, &name)?;
                case.resumes.push(Resume { after_ms, span: self.span(item), expects });
            }
        }
        Some(case)
    }

    fn run_expects(&mut self, id: NodeId, allowed: &[&str], flow: &str) -> Option<Vec<Expect>> {
        let entries = self.mapping(id, allowed, "a run's expectations")?;
        let mut expects = Vec::new();
        for (key, key_span, value) in entries {
            if key == "after" {
                continue;
            }
            if let Some(kind) = self.expectation(key, value, Some(flow), Some(flow)) {
                expects.push(Expect { kind, key: key_span, value: self.span(value) });
            }
        }
        Some(expects)
    }
}

#[cfg(test)]
mod tests;
