//! What the runtime and store benches share: a provider that answers at
//! once from a table, the booking tool in process, and the booking
//! conversation's messages and answers, and the benches' number flags.

#![allow(dead_code)]

use flowc::ir::{Program, Tool};
use flowc::llm::{
    ModelReply, Proposal, Provider, ProviderError, ReplyRequest, Response, ToolRound, UnderstandRequest, Understanding,
    Usage,
};
use flowc::pipeline::compile;
use flowc::runtime::clock::{FixedClock, SeededIds};
use flowc::runtime::engine::{Runtime, RuntimeOptions};
use flowc::runtime::tools::{ToolEnv, ToolError, ToolHandler, ToolRegistry};
use flowc::source::SourceFile;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Answers every call at once from a table keyed by the user message.
pub struct Canned {
    understandings: HashMap<String, Understanding>,
}

impl Provider for Canned {
    fn name(&self) -> String {
        "canned".to_string()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        Ok(self.understandings.get(&request.message).cloned().unwrap_or_default())
    }

    fn reply(
        &mut self,
        _request: &ReplyRequest,
        _rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let text = "ok";
        on_text(text);
        Ok(ModelReply::Done(Response { text: text.to_string(), usage: Usage { calls: 1, ..Usage::default() } }))
    }
}

/// The booking system, in process: no exec, no process spawned.
pub struct BookDouble;

impl ToolHandler for BookDouble {
    fn call(&self, _tool: &Tool, _args: &Map<String, Value>, _env: &ToolEnv) -> Result<Value, ToolError> {
        Ok(json!({ "booking_id": "GH-BENCH01" }))
    }
}

pub fn compiled(name: &str, text: &str) -> Arc<Program> {
    let compilation = compile(&SourceFile::new(name, text));
    if compilation.has_errors() {
        eprintln!("{name} does not compile");
        std::process::exit(2);
    }
    Arc::new(compilation.ir)
}

pub fn runtime(program: &Arc<Program>, understandings: HashMap<String, Understanding>) -> Runtime {
    let mut tools = ToolRegistry::default();
    tools.register("book_hotel", Arc::new(BookDouble));
    let clock = FixedClock::parse("2026-01-05T10:00:00Z").unwrap_or(FixedClock(chrono::DateTime::UNIX_EPOCH));
    let options = RuntimeOptions {
        tool_env: ToolEnv {
            base_dir: PathBuf::from("flows"),
            clock: Arc::new(clock),
            ids: Arc::new(SeededIds::new(7)),
        },
        tools,
        limits: Default::default(),
    };
    Runtime::new(Arc::clone(program), Box::new(Canned { understandings }), options)
}

/// An answer whose values cite their words, as a good model's do: the
/// runtime checks each against the message, and that check is timed too.
pub fn understood(flow: Option<&str>, fields: &[(&str, Value, &str)]) -> Understanding {
    Understanding {
        flow: flow.map(str::to_string),
        fields: fields
            .iter()
            .map(|(name, value, evidence)| (name.to_string(), Proposal::new(value.clone(), *evidence)))
            .collect(),
        usage: Usage { calls: 1, ..Usage::default() },
        ..Understanding::default()
    }
}

pub const BOOKING_TURNS: [&str; 5] =
    ["Hi, I'd like to book a hotel room", "The Grand Hotel, please", "2026-12-04", "2 guests", "yes"];

/// What the model understands from each of [`BOOKING_TURNS`].
pub fn booking_answers() -> HashMap<String, Understanding> {
    [
        (BOOKING_TURNS[0], understood(Some("booking"), &[])),
        (BOOKING_TURNS[1], understood(None, &[("hotel", json!("Grand Hotel"), "Grand Hotel")])),
        (BOOKING_TURNS[2], understood(None, &[("date", json!("2026-12-04"), "2026-12-04")])),
        (BOOKING_TURNS[3], understood(None, &[("guests", json!(2), "2 guests")])),
        (BOOKING_TURNS[4], understood(None, &[("confirmed", json!(true), "yes")])),
    ]
    .into_iter()
    .map(|(message, answer)| (message.to_string(), answer))
    .collect()
}

pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    format!("{cores} cores, {model}")
}

/// The value after `flag` on the command line, as a number (`Ok(None)`
/// when the flag is not given).
pub fn number_after(flag: &str) -> Result<Option<usize>, String> {
    let args: Vec<String> = std::env::args().collect();
    let Some(at) = args.iter().position(|arg| arg == flag) else {
        return Ok(None);
    };
    let value = args.get(at + 1).ok_or_else(|| format!("{flag} needs a number"))?;
    value.parse().map(Some).map_err(|_| format!("{flag} needs a number, not `{value}`"))
}
