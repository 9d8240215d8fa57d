//! Drives a conversation on `flows/booking.flow` one stage at a time, the
//! way a program embedding flowc (a web server, a test harness) does:
//! `Runtime::begin` starts a turn, each `Turn::step` runs one stage of the
//! pipeline (or one transition while resolving), and the last one answers
//! with why the turn stopped and its result. Every event reaches the
//! observer as it happens. The offline provider stands in for a model, so
//! the run needs no network and prints the same lines every time (but for
//! how long the booking tool took).
//!
//! Run it with `cargo run --example step_by_step`.

use flowc::llm::offline::Offline;
use flowc::pipeline::compile;
use flowc::runtime::clock::{FixedClock, SeededIds};
use flowc::runtime::tools::{ToolEnv, ToolRegistry};
use flowc::runtime::{ContinuationLimits, Event, Progress, Runtime, RuntimeOptions, TurnResult};
use flowc::source::SourceFile;
use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};

/// What the user says, one message per turn.
pub const MESSAGES: [&str; 3] = ["Book the Grand Hotel for 2 guests on 2026-12-04", "yes", "thanks"];

fn main() -> ExitCode {
    match run(&mut std::io::stdout().lock()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Holds the conversation, printing each stage and event to `out`, and
/// returns the turns' results.
pub fn run(out: &mut dyn Write) -> Result<Vec<TurnResult>, Box<dyn Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("flows/booking.flow"))?;
    let compilation = compile(&SourceFile::new("booking.flow", text));
    if let Some(error) = compilation.diagnostics.iter().find(|diagnostic| diagnostic.is_error()) {
        return Err(format!("booking.flow does not compile: {}", error.message).into());
    }
    let tool_env = ToolEnv {
        // `exec` tools run in the program's directory.
        base_dir: root.join("flows"),
        // A fixed clock and seeded ids make every run print the same.
        clock: Arc::new(FixedClock::parse("2026-01-05T10:00:00Z")?),
        ids: Arc::new(SeededIds::new(7)),
    };
    // Limits of the embedding program, on top of the flow's `agent.limits`.
    let limits = ContinuationLimits {
        max_steps_per_turn: Some(20),
        max_session_tokens: Some(50_000),
        max_consecutive_errors: Some(3),
        ..ContinuationLimits::default()
    };
    let options = RuntimeOptions { tool_env, tools: ToolRegistry::default(), limits };
    let mut runtime = Runtime::new(Arc::new(compilation.ir), Box::new(Offline::new()), options);

    // The observer must outlive the turn (and may run on another thread),
    // so it sends each event away; this loop prints them after each stage.
    let (events, received) = channel::<Event>();
    runtime.set_observer(move |event: &Event| {
        // The receiver lives as long as the conversation; a send can only
        // fail after it, when nobody is listening.
        let _ = events.send(event.clone());
    });

    let mut session = runtime.new_session("step-by-step");
    let mut results = Vec::new();
    for message in MESSAGES {
        writeln!(out, "> {message}")?;
        let mut turn = runtime.begin(&mut session, message)?;
        let result = loop {
            let progress = turn.step()?;
            print_events(out, &received)?;
            match progress {
                Progress::Continue(stage) => writeln!(out, "  [{stage:?}]")?,
                // The model asks for tools before it answers; they run at
                // the next step. (The offline model calls none: booking's
                // tool is a `call` action, seen as a `tool_called` event.)
                Progress::ToolCalls(calls) => {
                    for call in calls {
                        let arguments = call.arguments.map_or_else(|error| error, |arguments| arguments.to_string());
                        writeln!(out, "  [tool call: {}({arguments})]", call.name)?;
                    }
                }
                Progress::Finished { reason, result } => {
                    writeln!(out, "  [finished: {} — {}]", reason.as_str(), reason.explanation())?;
                    break result;
                }
            }
        };
        writeln!(out, "< {}", result.reply)?;
        results.push(*result);
    }
    Ok(results)
}

fn print_events(out: &mut dyn Write, received: &Receiver<Event>) -> Result<(), Box<dyn Error>> {
    for event in received.try_iter() {
        writeln!(out, "    {}", serde_json::to_string(&event)?)?;
    }
    Ok(())
}
