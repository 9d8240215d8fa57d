//! A scripted provider and a small harness around the library API, so each
//! pipeline rule is tested precisely: the test says what the "model"
//! understood and answered, and reads back every request the runtime made.

use flowc::ir::Program;
use flowc::llm::{
    Answer, ModelReply, Proposal, Provider, ProviderError, ReplyRequest, ReplyStream, Response, ToolCall, ToolCalls,
    ToolRound, UnderstandRequest, Understanding, Understood as Streamed, Usage,
};
use flowc::pipeline::compile;
use flowc::runtime::clock::{Clock, FixedClock, SeededIds};
use flowc::runtime::engine::{ContinuationLimits, Runtime, RuntimeOptions};
use flowc::runtime::events::{Event, TurnResult};
use flowc::runtime::session::Session;
use flowc::runtime::tools::{ToolEnv, ToolError, ToolHandler, ToolRegistry};
use flowc::source::SourceFile;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The frozen "now" of every harness turn (as `FLOWC_NOW` in the CLI tests).
pub const NOW: &str = "2026-01-05T10:00:00Z";

/// What the scripted model does when asked to reply.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    pub text: String,
    pub usage: Usage,
    /// Tool calls made before answering, in order; the loop stops at the
    /// first call the runtime refuses.
    pub tool_calls: Vec<(String, Value)>,
    /// Keep calling the first tool of `tool_calls` until refused (a model
    /// that never stops calling tools).
    pub call_forever: bool,
    /// Go on calling after a tool fails, as a model reading the error
    /// would, while the runtime still allows calls ([`ToolLoop::may_call`]).
    pub past_errors: bool,
    pub sleep: Option<Duration>,
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply { text: text.to_string(), ..Reply::default() }
    }
}

/// What the scripted model was asked and what it will answer next.
#[derive(Default)]
pub struct Script {
    pub understandings: VecDeque<Understanding>,
    pub replies: VecDeque<Reply>,
    /// Slept in every understand call (a slow model).
    pub understand_sleep: Option<Duration>,
    /// The next this many understand calls answer invalid JSON, as a weak
    /// model cut off by its token limit does, even after a repair.
    pub invalid_answers: usize,
    pub understand_requests: Vec<UnderstandRequest>,
    pub reply_requests: Vec<ReplyRequest>,
    /// Results (or refusals) of the tool calls made in respond.
    pub tool_results: Vec<Result<Value, String>>,
    /// The reply being given, one tool call per round, from its first round.
    replying: Option<Reply>,
    /// Stream the fused reply as a streaming server does: the extraction
    /// first, then the reply a word at a time (`understand_streamed`).
    pub stream_fused: bool,
    /// The tokens each streamed fused reply reports after the extraction.
    pub fused_tokens: Usage,
    /// The pieces of streamed fused replies the runtime read, in order.
    pub fused_read: Vec<String>,
    /// Streamed fused replies dropped before their end (the call cancelled).
    pub fused_cancelled: usize,
}

/// A streamed fused reply's pieces as the runtime reads them: each is
/// recorded, and one dropped before its end is a cancelled call.
struct Pieces {
    left: VecDeque<String>,
    script: Arc<Mutex<Script>>,
}

impl Iterator for Pieces {
    type Item = Result<String, ProviderError>;

    fn next(&mut self) -> Option<Self::Item> {
        let piece = self.left.pop_front()?;
        lock(&self.script).fused_read.push(piece.clone());
        Some(Ok(piece))
    }
}

impl Drop for Pieces {
    fn drop(&mut self) {
        if !self.left.is_empty() {
            lock(&self.script).fused_cancelled += 1;
        }
    }
}

/// A provider that answers from a [`Script`] and records every request.
/// Unscripted understand calls understand nothing; unscripted replies echo
/// the turn's instructions (`"reply: …"`), so tests can see what reached
/// the model.
pub struct Scripted {
    pub script: Arc<Mutex<Script>>,
}

fn lock(script: &Mutex<Script>) -> std::sync::MutexGuard<'_, Script> {
    script.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Provider for Scripted {
    fn name(&self) -> String {
        "scripted".to_string()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let mut script = lock(&self.script);
        script.understand_requests.push(request.clone());
        if let Some(sleep) = script.understand_sleep {
            std::thread::sleep(sleep);
        }
        if script.invalid_answers > 0 {
            script.invalid_answers -= 1;
            return Err(ProviderError::InvalidOutput(
                "the answer is not valid JSON (EOF while parsing a string)".to_string(),
            ));
        }
        let mut understanding = script.understandings.pop_front().unwrap_or_default();
        // A real model's constrained output answers every question asked:
        // what the test did not script is a no.
        for question in &request.conditions {
            understanding.conditions.entry(question.id.clone()).or_insert_with(Answer::no);
        }
        for question in &request.signals {
            understanding.signals.entry(question.id.clone()).or_insert_with(Answer::no);
        }
        // What the test scripted without evidence cites the whole message,
        // as a model quoting the user whole would (`uncited` scripts a
        // proposal that cites nothing).
        let whole = || Some(request.message.clone());
        for proposal in understanding.fields.values_mut() {
            proposal.evidence = proposal.evidence.take().or_else(whole);
        }
        for answer in understanding.conditions.values_mut().chain(understanding.signals.values_mut()) {
            if answer.yes {
                answer.evidence = answer.evidence.take().or_else(whole);
            }
        }
        Ok(understanding)
    }

    /// With `stream_fused`, the scripted fused reply arrives after the
    /// extraction a word at a time (each word with the spaces after it).
    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Streamed, ProviderError> {
        let mut understanding = self.understand(request)?;
        let (stream, tokens) = {
            let script = lock(&self.script);
            (script.stream_fused, script.fused_tokens)
        };
        let Some(reply) = understanding.reply.as_mut().filter(|_| stream) else {
            return Ok(Streamed { understanding, reply: None });
        };
        let text = std::mem::take(&mut reply.text);
        let left = text.split_inclusive(' ').map(str::to_string).collect();
        let pieces = Pieces { left, script: Arc::clone(&self.script) };
        Ok(Streamed { understanding, reply: Some(ReplyStream::from_pieces(pieces, tokens)) })
    }

    /// Asks for the scripted tool calls one round each, until one is
    /// refused, then answers.
    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        if rounds.is_empty() {
            let reply = {
                let mut script = lock(&self.script);
                script.reply_requests.push(request.clone());
                script.replies.pop_front()
            };
            let reply = reply.unwrap_or_else(|| Reply::text(&format!("reply: {}", request.instructions.join(" | "))));
            if let Some(sleep) = reply.sleep {
                std::thread::sleep(sleep);
            }
            lock(&self.script).replying = Some(reply);
        }
        let mut script = lock(&self.script);
        let reply = script.replying.clone().unwrap_or_default();
        let last = rounds.last().and_then(|round| round.results.first().cloned());
        // A model reading the errors goes on while the runtime still offers
        // tools (`past_errors`); otherwise the first refusal ends the calls.
        let refused = last.as_ref().is_some_and(Result::is_err) && (!reply.past_errors || request.tools_spent);
        script.tool_results.extend(last);
        let limit = if reply.call_forever { 1000 } else { reply.tool_calls.len() };
        let next = reply.tool_calls.iter().cycle().nth(rounds.len());
        if let Some((name, arguments)) = next
            && rounds.len() < limit
            && !refused
        {
            let call = ToolCall { id: rounds.len().to_string(), name: name.clone(), arguments: Ok(arguments.clone()) };
            return Ok(ModelReply::ToolCalls(ToolCalls { calls: vec![call], ..ToolCalls::default() }));
        }
        script.replying = None;
        drop(script);
        on_text(&reply.text);
        Ok(ModelReply::Done(Response { text: reply.text, usage: reply.usage }))
    }
}

/// An understanding built field by field.
#[derive(Default)]
pub struct Understood(pub Understanding);

impl Understood {
    pub fn new() -> Understood {
        Understood::default()
    }

    pub fn flow(mut self, flow: &str) -> Understood {
        self.0.flow = Some(flow.to_string());
        self
    }

    /// A value read from the whole message.
    pub fn field(mut self, name: &str, value: Value) -> Understood {
        self.0.fields.insert(name.to_string(), Proposal { value, evidence: None });
        self
    }

    /// A value and the words it claims to be read from.
    pub fn cited(mut self, name: &str, value: Value, evidence: &str) -> Understood {
        self.0.fields.insert(name.to_string(), Proposal::new(value, evidence));
        self
    }

    /// A value that cites no words at all.
    pub fn uncited(mut self, name: &str, value: Value) -> Understood {
        self.0.fields.insert(name.to_string(), Proposal::new(value, ""));
        self
    }

    /// An answer; a yes cites the whole message.
    pub fn condition(mut self, id: &str, yes: bool) -> Understood {
        self.0.conditions.insert(id.to_string(), Answer { yes, evidence: None });
        self
    }

    /// An answer; a yes cites the whole message.
    pub fn signal(mut self, name: &str, yes: bool) -> Understood {
        self.0.signals.insert(name.to_string(), Answer { yes, evidence: None });
        self
    }

    /// A yes to a condition that cites these words.
    pub fn cited_condition(mut self, id: &str, evidence: &str) -> Understood {
        self.0.conditions.insert(id.to_string(), Answer::yes(evidence));
        self
    }

    /// A yes to a signal that cites these words.
    pub fn signal_cited(mut self, name: &str, evidence: &str) -> Understood {
        self.0.signals.insert(name.to_string(), Answer::yes(evidence));
        self
    }

    /// The reply written in the same call (the fused call), for `step`.
    pub fn fused(mut self, step: &str, text: &str) -> Understood {
        self.0.reply = Some(flowc::llm::FusedReply { step: step.to_string(), text: text.to_string() });
        self
    }

    pub fn tokens(mut self, prompt: u64) -> Understood {
        self.0.usage = Usage { calls: 1, prompt, completion: 0, cached: 0, estimated: false };
        self
    }
}

/// Compiles an inline program; a program with errors fails the test with
/// its diagnostics.
pub fn program(source: &str) -> Arc<Program> {
    let compilation = compile(&SourceFile::new("t.flow", source));
    let errors: Vec<String> = compilation
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.is_error())
        .map(|diagnostic| format!("{}: {}", diagnostic.code.as_str(), diagnostic.message))
        .collect();
    assert!(errors.is_empty(), "the test program does not compile: {errors:#?}");
    Arc::new(compilation.ir)
}

pub fn tool_env_at(now: &str) -> ToolEnv {
    let clock: Arc<dyn Clock> = match FixedClock::parse(now) {
        Ok(clock) => Arc::new(clock),
        Err(error) => panic!("{error}"),
    };
    ToolEnv { base_dir: crate::support::root().join("flows"), clock, ids: Arc::new(SeededIds::new(7)) }
}

/// A tool double: records its arguments and answers with a fixed result
/// (or fails).
pub struct Double {
    pub calls: Mutex<Vec<Map<String, Value>>>,
    pub result: Result<Value, String>,
    /// How long each call takes (a slow booking system).
    pub sleep: Option<Duration>,
}

impl Double {
    pub fn returning(result: Value) -> Arc<Double> {
        Arc::new(Double { calls: Mutex::new(Vec::new()), result: Ok(result), sleep: None })
    }

    pub fn slow(result: Value, sleep: Duration) -> Arc<Double> {
        Arc::new(Double { calls: Mutex::new(Vec::new()), result: Ok(result), sleep: Some(sleep) })
    }

    pub fn failing(message: &str) -> Arc<Double> {
        Arc::new(Double { calls: Mutex::new(Vec::new()), result: Err(message.to_string()), sleep: None })
    }

    pub fn calls(&self) -> Vec<Map<String, Value>> {
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl ToolHandler for Double {
    fn call(&self, tool: &flowc::ir::Tool, args: &Map<String, Value>, _env: &ToolEnv) -> Result<Value, ToolError> {
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(args.clone());
        if let Some(sleep) = self.sleep {
            std::thread::sleep(sleep);
        }
        self.result.clone().map_err(|message| ToolError::Failed { tool: tool.name.clone(), message })
    }
}

/// A runtime on a scripted provider, with one session.
pub struct Harness {
    pub runtime: Runtime,
    pub session: Session,
    pub script: Arc<Mutex<Script>>,
    program: Arc<Program>,
    tools: ToolRegistry,
    limits: ContinuationLimits,
    now: String,
    /// Understand and respond calls seen before the last turn.
    seen: (usize, usize),
}

impl Harness {
    pub fn new(source: &str) -> Harness {
        Harness::with_tools(source, ToolRegistry::default())
    }

    pub fn with_tools(source: &str, tools: ToolRegistry) -> Harness {
        let program = program(source);
        let script = Arc::new(Mutex::new(Script::default()));
        let limits = ContinuationLimits::default();
        let runtime = build_runtime(&program, &script, &tools, NOW, limits);
        let session = runtime.new_session("test");
        Harness { runtime, session, script, program, tools, limits, now: NOW.to_string(), seen: (0, 0) }
    }

    /// A harness whose tool `tool` always fails with `message`, and the
    /// double that records the calls it got.
    pub fn with_failing_tool(source: &str, tool: &str, message: &str) -> (Harness, Arc<Double>) {
        let double = Double::failing(message);
        let mut tools = ToolRegistry::default();
        tools.register(tool, double.clone());
        (Harness::with_tools(source, tools), double)
    }

    /// Moves the clock: the same program, script and session on a runtime
    /// whose frozen clock reads `now`.
    pub fn set_now(&mut self, now: &str) {
        self.now = now.to_string();
        self.runtime = build_runtime(&self.program, &self.script, &self.tools, now, self.limits);
    }

    /// The same program, script and session on a runtime with these
    /// library limits.
    pub fn set_limits(&mut self, limits: ContinuationLimits) {
        self.limits = limits;
        self.runtime = build_runtime(&self.program, &self.script, &self.tools, &self.now, limits);
    }

    pub fn understand_next(&mut self, understood: Understood) {
        lock(&self.script).understandings.push_back(understood.0);
    }

    pub fn reply_next(&mut self, reply: Reply) {
        lock(&self.script).replies.push_back(reply);
    }

    /// One turn; it must succeed.
    pub fn say(&mut self, message: &str) -> TurnResult {
        self.remember_counts();
        match self.runtime.run_turn(&mut self.session, message) {
            Ok(result) => result,
            Err(error) => panic!("the turn {message:?} failed: {error}"),
        }
    }

    /// One turn answered by `understood`.
    pub fn say_with(&mut self, message: &str, understood: Understood) -> TurnResult {
        self.understand_next(understood);
        self.say(message)
    }

    pub fn remember_counts(&mut self) {
        let script = lock(&self.script);
        self.seen = (script.understand_requests.len(), script.reply_requests.len());
    }

    /// (understand calls, respond calls) made by the last turn.
    pub fn calls_last_turn(&self) -> (usize, usize) {
        let script = lock(&self.script);
        (script.understand_requests.len() - self.seen.0, script.reply_requests.len() - self.seen.1)
    }

    pub fn last_understand(&self) -> UnderstandRequest {
        match lock(&self.script).understand_requests.last() {
            Some(request) => request.clone(),
            None => panic!("no understand call was made"),
        }
    }

    pub fn last_respond(&self) -> ReplyRequest {
        match lock(&self.script).reply_requests.last() {
            Some(request) => request.clone(),
            None => panic!("no respond call was made"),
        }
    }

    pub fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        lock(&self.script)
    }

    pub fn data(&self, field: &str) -> Option<Value> {
        self.session.data.get(field).cloned()
    }
}

fn build_runtime(
    program: &Arc<Program>,
    script: &Arc<Mutex<Script>>,
    tools: &ToolRegistry,
    now: &str,
    limits: ContinuationLimits,
) -> Runtime {
    Runtime::new(
        Arc::clone(program),
        Box::new(Scripted { script: Arc::clone(script) }),
        RuntimeOptions { tool_env: tool_env_at(now), tools: tools.clone(), limits },
    )
}

/// The directive chain as `(source, applied)` pairs.
pub fn chain(result: &TurnResult) -> Vec<(String, bool)> {
    result.directives.iter().map(|record| (record.source.clone(), record.applied)).collect()
}

/// The directive a source emitted in this turn.
pub fn directive_from(result: &TurnResult, source: &str) -> Value {
    match result.directives.iter().find(|record| record.source == source) {
        Some(record) => record.directive.clone(),
        None => panic!("no directive from {source}: {:#?}", chain(result)),
    }
}

pub fn warnings(result: &TurnResult) -> Vec<String> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::Warning { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

pub fn skipped(result: &TurnResult) -> Vec<String> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::StepSkipped { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect()
}

pub fn entered_flows(result: &TurnResult) -> Vec<String> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::FlowEntered { flow } => Some(flow.clone()),
            _ => None,
        })
        .collect()
}

pub fn steps(result: &TurnResult) -> Vec<&str> {
    result.executed_steps.iter().map(String::as_str).collect()
}

pub fn position(result: &TurnResult) -> (Option<&str>, Option<&str>) {
    (result.flow.as_deref(), result.step.as_deref())
}
