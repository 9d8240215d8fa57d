//! Running actions (`set`, `append`, `call`, `emit`, `say`, `for_each`,
//! `ask_model` through [`super::model_step`]) and turning IR
//! directives into [`Emission`]s. Conversations and workflows share this:
//! a step's actions run against a scratch copy of the data, in order (each
//! `set` visible to the next action), and the caller commits the copy when
//! the step completes, so a step's writes land all together or not at all.

use super::clock::Clock;
use super::directive::{Emission, Move, Source};
use super::events::Event;
use super::session::Data;
use super::tools::{ToolEnv, ToolError, ToolRegistry};
use super::validate::validate;
use super::workflow_run::StepRecord;
use crate::expr::eval::{Bindings, eval, is_true, render};
use crate::expr::{Expr, Template};
use crate::ir::successor::Jump;
use crate::ir::{Action, ActionKind, ContextId, Directive, Field, FieldId, Program, StepId, Tool, ToolId};
use serde_json::Value;

/// Names resolved against a session's (or run's) data.
pub(crate) struct Scope<'a> {
    /// The program whose fields and context keys the names refer to.
    pub program: &'a Program,
    /// The session's or run's data fields, by name.
    pub data: &'a Data,
    /// The context the embedder gave (`context.KEY`), by name.
    pub context: &'a Data,
    /// The values of the local slots in scope, by slot number.
    pub locals: &'a [Value],
    /// What `now` reads.
    pub clock: &'a dyn Clock,
    /// The running workflow's step records (empty in a conversation).
    pub steps: &'a [StepRecord],
}

impl Bindings for Scope<'_> {
    fn field(&self, field: FieldId) -> Value {
        self.program.field(field).and_then(|declared| self.data.get(&declared.name)).cloned().unwrap_or(Value::Null)
    }

    fn context(&self, key: ContextId) -> Value {
        self.program
            .context
            .get(key.index())
            .and_then(|declared| self.context.get(&declared.name))
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn local(&self, slot: u32) -> Value {
        self.locals.get(slot as usize).cloned().unwrap_or(Value::Null)
    }

    fn env(&self, _name: &str) -> Option<String> {
        // The type checker allows `env.NAME` only in http headers, which
        // the http tool renders with its own bindings.
        None
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    fn step_output(&self, step: StepId) -> Value {
        self.steps.get(step.index()).map_or(Value::Null, |record| record.output.clone())
    }
}

/// Why a step's actions failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// A tool the actions called failed.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A model step wrote nothing.
    #[error(transparent)]
    Model(#[from] super::model_step::ModelStepError),
    /// A value that does not fit the field it was to be written to (or a
    /// list append to a field that holds no list); the field kept its value.
    #[error("cannot write `{field}`: {reason}")]
    InvalidWrite {
        /// The field's name.
        field: String,
        /// Why the value does not fit.
        reason: String,
    },
}

/// What running actions produced besides data writes.
#[derive(Debug, Default)]
pub(crate) struct ActionOutput {
    /// The rendered text of each `say`, in order: what the user is shown.
    pub says: Vec<String>,
    /// The directives the actions emitted, for the caller's bus.
    pub emissions: Vec<Emission>,
    /// Names that resolved to nothing while evaluating.
    pub warnings: Vec<String>,
    /// Each tool call, as its [`Event::ToolCalled`].
    pub tool_calls: Vec<Event>,
    /// Tool results, in call order (a workflow step's output).
    pub results: Vec<Value>,
}

/// Everything actions need to run.
pub(crate) struct ActionRunner<'a> {
    /// The program the actions belong to.
    pub program: &'a Program,
    /// The tools a `call` action may call.
    pub tools: &'a ToolRegistry,
    /// What the tools run with: the program's folder, the clock, the id
    /// source.
    pub tool_env: &'a ToolEnv,
    /// The running workflow's step records, for `steps.NAME.output` (empty
    /// in a conversation).
    pub steps: &'a [StepRecord],
    /// The model `ask_model` asks; `None` where model steps cannot run.
    pub model: Option<&'a dyn super::model_step::Asks>,
}

impl ActionRunner<'_> {
    /// Runs `actions` against `data` (a scratch copy the caller commits).
    /// `path` names the list for directive sources: `kind:path` with the
    /// action's 1-based position for `do` lists, the hook path otherwise.
    pub(crate) fn run(
        &self,
        actions: &[Action],
        source: &ActionSource<'_>,
        data: &mut Data,
        context: &Data,
        locals: &mut Vec<Value>,
        out: &mut ActionOutput,
    ) -> Result<(), ActionError> {
        for (index, action) in actions.iter().enumerate() {
            let emission_source = source.for_action(index);
            match &action.kind {
                ActionKind::Set(write) => {
                    let value = self.eval(&write.value, data, context, locals, out);
                    self.write(write.field, value, data)?;
                }
                ActionKind::Append(write) => {
                    let item = self.eval(&write.value, data, context, locals, out);
                    let list = self.appended(write.field, item, data)?;
                    self.write(write.field, list, data)?;
                }
                ActionKind::Call(call) => {
                    let tool = self.program.tool(call.tool);
                    let Some(tool) = tool else {
                        continue;
                    };
                    let arguments = tool
                        .params
                        .iter()
                        .zip(&call.args)
                        .map(|(param, expr)| (param, self.eval(expr, data, context, locals, out)));
                    let made =
                        call_tool(self.program, self.tools, self.tool_env, tool, arguments).map_err(|invalid| {
                            ActionError::Tool(ToolError::Failed {
                                tool: tool.name.clone(),
                                message: format!("argument `{}` is invalid: {}", invalid.param, invalid.reason),
                            })
                        })?;
                    out.tool_calls.push(made.event);
                    let result = made.result?;
                    out.warnings.extend(made.warnings);
                    out.emissions.extend(made.emission);
                    if let Some(field) = call.save {
                        let saved = match tool.returns.as_deref() {
                            Some([single]) => result.get(&single.name).cloned().unwrap_or(Value::Null),
                            _ => strip_directive(&result),
                        };
                        self.write(field, saved, data)?;
                    }
                    out.results.push(result);
                }
                ActionKind::Emit(directive) => {
                    let scope = self.scope(data, context, locals);
                    let emission = evaluate_directive(directive, emission_source, &scope, &mut out.warnings);
                    out.emissions.push(emission);
                }
                ActionKind::Say { text } => {
                    let rendered = self.render(text, data, context, locals, out);
                    out.says.push(rendered);
                }
                ActionKind::AskModel(ask) => {
                    let Some(field) = self.program.field(ask.field) else {
                        continue;
                    };
                    let scope = self.scope(data, context, locals);
                    let instruction = render(&ask.instruction, &scope, &mut out.warnings);
                    let inputs = ask
                        .instruction
                        .parts
                        .iter()
                        .filter_map(|part| match part {
                            crate::expr::TemplatePart::Expr(expr) => Some(eval(expr, &scope, &mut out.warnings)),
                            crate::expr::TemplatePart::Text(_) => None,
                        })
                        .collect();
                    let question = super::model_step::Question {
                        step: source.path,
                        instruction,
                        inputs,
                        examples: &ask.examples,
                        tools: super::model_step::tools(self.program, &ask.tools),
                        today: self.tool_env.clock.now().date_naive().to_string(),
                    };
                    let offered = super::model_step::tools(self.program, &ask.tools);
                    let (mut events, mut emissions, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
                    let run = |tool: &Tool, raw: &serde_json::Map<String, Value>| {
                        let arguments = tool
                            .params
                            .iter()
                            .map(|param| (param, raw.get(&param.name).cloned().unwrap_or(Value::Null)));
                        let made = call_tool(self.program, self.tools, self.tool_env, tool, arguments)
                            .map_err(|invalid| format!("argument `{}`: {}", invalid.param, invalid.reason))?;
                        events.push(made.event);
                        let result = made.result.map_err(|error| error.to_string())?;
                        warnings.extend(made.warnings);
                        emissions.extend(made.emission);
                        Ok(result)
                    };
                    let max_calls = self.program.agent.limits.max_tool_rounds;
                    let mut tools = super::model_step::StepTools::new(offered, max_calls, run);
                    let asked = super::model_step::ask(self.model, field, question, &mut tools);
                    // The calls ran whether or not the answer fits: they are
                    // traced (and their directives kept) either way.
                    out.tool_calls.append(&mut events);
                    out.warnings.append(&mut warnings);
                    out.emissions.append(&mut emissions);
                    let value = asked?;
                    self.write(ask.field, value, data)?;
                }
                ActionKind::ForEach(for_each) => {
                    let items = self.eval(&for_each.items, data, context, locals, out);
                    let Value::Array(items) = items else {
                        continue;
                    };
                    let slot = for_each.slot as usize;
                    for item in items {
                        locals.truncate(slot);
                        locals.resize(slot, Value::Null);
                        locals.push(item);
                        let keep = match &for_each.filter {
                            Some(filter) => is_true(&self.eval(filter, data, context, locals, out)),
                            None => true,
                        };
                        if keep {
                            let nested = ActionSource { kind: source.kind, path: source.path, numbered: false };
                            self.run(&for_each.actions, &nested, data, context, locals, out)?;
                        }
                    }
                    locals.truncate(slot);
                }
            }
        }
        Ok(())
    }

    fn scope<'s>(&'s self, data: &'s Data, context: &'s Data, locals: &'s [Value]) -> Scope<'s> {
        Scope { program: self.program, data, context, locals, clock: self.tool_env.clock.as_ref(), steps: self.steps }
    }

    fn eval(&self, expr: &Expr, data: &Data, context: &Data, locals: &[Value], out: &mut ActionOutput) -> Value {
        let scope = self.scope(data, context, locals);
        eval(expr, &scope, &mut out.warnings)
    }

    fn render(
        &self,
        template: &Template,
        data: &Data,
        context: &Data,
        locals: &[Value],
        out: &mut ActionOutput,
    ) -> String {
        let scope = self.scope(data, context, locals);
        render(template, &scope, &mut out.warnings)
    }

    /// The list `field` holds with `item` added at the end; an unset list
    /// counts as empty.
    fn appended(&self, field: FieldId, item: Value, data: &Data) -> Result<Value, ActionError> {
        let Some(declared) = self.program.field(field) else {
            return Ok(Value::Null);
        };
        let mut items = match data.get(&declared.name) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(other) => {
                return Err(ActionError::InvalidWrite {
                    field: declared.name.clone(),
                    reason: format!("cannot append to {other}, which is not a list"),
                });
            }
        };
        items.push(item);
        Ok(Value::Array(items))
    }

    fn write(&self, field: FieldId, value: Value, data: &mut Data) -> Result<(), ActionError> {
        let Some(declared) = self.program.field(field) else {
            return Ok(());
        };
        let value = validate(&value, &declared.ty)
            .map_err(|reason| ActionError::InvalidWrite { field: declared.name.clone(), reason })?;
        if value.is_null() {
            data.remove(&declared.name);
        } else {
            data.insert(declared.name.clone(), value);
        }
        Ok(())
    }
}

/// An argument that does not fit its parameter: the tool was not called.
#[derive(Debug)]
pub(crate) struct InvalidArgument {
    /// The parameter's name.
    pub param: String,
    /// Why the argument does not fit it.
    pub reason: String,
}

/// A tool call that was made.
pub(crate) struct ToolCall {
    /// Its [`Event::ToolCalled`]: name, outcome and duration.
    pub event: Event,
    /// What the tool answered, or why it failed.
    pub result: Result<Value, ToolError>,
    /// The result's `directive`, for the caller's bus.
    pub emission: Option<Emission>,
    /// Names in that directive that resolve to nothing.
    pub warnings: Vec<String>,
}

/// Calls a tool the one way both a `call` action and the model's tool loop
/// do: each argument validated against its parameter, in order (the first
/// that does not fit stops the call before the tool runs), then the tool
/// run and timed, and a successful result's `directive` read.
pub(crate) fn call_tool<'t>(
    program: &Program,
    tools: &ToolRegistry,
    tool_env: &ToolEnv,
    tool: &Tool,
    arguments: impl IntoIterator<Item = (&'t Field, Value)>,
) -> Result<ToolCall, InvalidArgument> {
    let mut args = serde_json::Map::new();
    for (param, value) in arguments {
        let valid =
            validate(&value, &param.ty).map_err(|reason| InvalidArgument { param: param.name.clone(), reason })?;
        args.insert(param.name.clone(), valid);
    }
    let started = std::time::Instant::now();
    let result = tools.call(tool, &args, tool_env);
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let error = result.as_ref().err().map(ToString::to_string);
    let event = Event::ToolCalled { tool: tool.name.clone(), ok: error.is_none(), duration_ms, error };
    let (emission, warnings) = match result.as_ref().ok().and_then(|result| result.get("directive")) {
        Some(directive) => {
            let (emission, warnings) = emission_from_json(program, directive, Source::Tool(tool.name.clone()));
            (Some(emission), warnings)
        }
        None => (None, Vec::new()),
    };
    Ok(ToolCall { event, result, emission, warnings })
}

/// How directives emitted by a list of actions are attributed.
pub(crate) struct ActionSource<'a> {
    /// [`Source::Action`] for a step's `do`, [`Source::Hook`] for hooks.
    pub kind: fn(String) -> Source,
    /// `booking.book`, `booking.confirm.prepare`.
    pub path: &'a str,
    /// Whether sources carry the action's position (`action:booking.book#1`).
    pub numbered: bool,
}

impl ActionSource<'_> {
    fn for_action(&self, index: usize) -> Source {
        if self.numbered {
            (self.kind)(format!("{}#{}", self.path, index + 1))
        } else {
            (self.kind)(self.path.to_string())
        }
    }
}

fn strip_directive(result: &Value) -> Value {
    match result {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "directive")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Evaluates an IR directive into an emission.
pub(crate) fn evaluate_directive(
    directive: &Directive,
    source: Source,
    scope: &Scope<'_>,
    warnings: &mut Vec<String>,
) -> Emission {
    let program = scope.program;
    let field_name = |field: FieldId| program.field(field).map_or_else(String::new, |field| field.name.clone());
    // Where the move leads is the jump's (`ir::successor`); evaluating
    // adds what it carries: a `goto`'s data, an `abort`'s reason.
    let position = directive.position.as_ref().map(|position| match Jump::from(position) {
        Jump::Goto(flow) => Move::Goto {
            flow,
            data: position
                .data()
                .iter()
                .map(|write| (field_name(write.field), eval(&write.value, scope, warnings)))
                .collect(),
        },
        Jump::GotoStep(flow, step) => Move::GotoStep { flow, step },
        Jump::Complete(next) => Move::Complete { next },
        Jump::Abort => Move::Abort { reason: position.reason().map(|reason| render(reason, scope, warnings)) },
        Jump::Reset => Move::Reset,
    });
    Emission {
        source,
        position,
        reply: directive.reply.as_ref().map(|reply| render(reply, scope, warnings)),
        set: directive.set.iter().map(|write| (field_name(write.field), eval(&write.value, scope, warnings))).collect(),
        set_context: directive
            .set_context
            .iter()
            .map(|write| {
                let name = program.context.get(write.key.index()).map_or_else(String::new, |key| key.name.clone());
                (name, eval(&write.value, scope, warnings))
            })
            .collect(),
        append_prompt: directive.append_prompt.iter().map(|text| render(text, scope, warnings)).collect(),
        inject_tools: directive.inject_tools.clone(),
        halt: directive.halt,
    }
}

/// A tool result's `directive` (JSON in the language's keys, values
/// literal) as an emission. Names that resolve to nothing are dropped with
/// a warning: tool output is untrusted.
pub(crate) fn emission_from_json(program: &Program, json: &Value, source: Source) -> (Emission, Vec<String>) {
    let mut emission = Emission::new(source.clone());
    let mut warnings = Vec::new();
    let Value::Object(object) = json else {
        warnings.push(format!("{source}: a directive must be an object; ignored"));
        return (emission, warnings);
    };
    let mut positions: Vec<Move> = Vec::new();
    for (key, value) in object {
        match (key.as_str(), value) {
            ("goto", Value::String(flow)) => match program.flow_by_name(flow) {
                Some(flow) => positions.push(Move::Goto { flow, data: Vec::new() }),
                None => warnings.push(format!("{source}: goto names no flow `{flow}`")),
            },
            ("goto", Value::Object(goto)) => {
                let flow = goto.get("flow").and_then(Value::as_str).and_then(|flow| program.flow_by_name(flow));
                let data = goto
                    .get("data")
                    .and_then(Value::as_object)
                    .map(|data| data.iter().map(|(name, value)| (name.clone(), value.clone())).collect())
                    .unwrap_or_default();
                match flow {
                    Some(flow) => positions.push(Move::Goto { flow, data }),
                    None => warnings.push(format!("{source}: goto names no flow")),
                }
            }
            ("goto_step", Value::Object(goto)) => {
                let flow = goto.get("flow").and_then(Value::as_str).and_then(|flow| program.flow_by_name(flow));
                let step = flow.and_then(|flow| {
                    let name = goto.get("step").and_then(Value::as_str)?;
                    program.flow(flow)?.step_by_name(name)
                });
                match (flow, step) {
                    (Some(flow), Some(step)) => positions.push(Move::GotoStep { flow, step }),
                    _ => warnings.push(format!("{source}: goto_step names no step")),
                }
            }
            ("complete", Value::Bool(true)) => positions.push(Move::Complete { next: None }),
            ("complete", Value::Object(complete)) => {
                let next = complete.get("next").and_then(Value::as_str).and_then(|flow| program.flow_by_name(flow));
                positions.push(Move::Complete { next });
            }
            ("abort", Value::Bool(true)) => positions.push(Move::Abort { reason: None }),
            ("abort", Value::String(reason)) => positions.push(Move::Abort { reason: Some(reason.clone()) }),
            ("reset", Value::Bool(true)) => positions.push(Move::Reset),
            ("reply", Value::String(reply)) => emission.reply = Some(reply.clone()),
            ("set", Value::Object(writes)) => {
                emission.set = writes.iter().map(|(name, value)| (name.clone(), value.clone())).collect();
            }
            ("set_context", Value::Object(writes)) => {
                emission.set_context = writes.iter().map(|(name, value)| (name.clone(), value.clone())).collect();
            }
            ("append_prompt", Value::String(text)) => emission.append_prompt.push(text.clone()),
            ("append_prompt", Value::Array(texts)) => {
                emission.append_prompt.extend(texts.iter().filter_map(Value::as_str).map(str::to_string));
            }
            ("inject_tools", Value::Array(names)) => {
                for name in names.iter().filter_map(Value::as_str) {
                    match program.tools.iter().position(|tool| tool.name == name) {
                        Some(index) => emission.inject_tools.push(ToolId::from_index(index)),
                        None => warnings.push(format!("{source}: inject_tools names no tool `{name}`")),
                    }
                }
            }
            ("halt", Value::Bool(halt)) => emission.halt = *halt,
            (other, _) => warnings.push(format!("{source}: ignored the directive key `{other}`")),
        }
    }
    if positions.len() > 1 {
        warnings.push(format!("{source}: a directive with several position fields; the strongest wins"));
    }
    emission.position = positions.into_iter().max_by_key(Move::precedence);
    (emission, warnings)
}
