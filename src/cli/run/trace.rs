//! `flowc run --trace`: each turn's events as JSON lines on stderr while
//! they happen, and with `--trace prompts` every request flowc makes of
//! the model and the model's raw answer, configured keys redacted.

use crate::llm::redact::Redactor;
use crate::llm::{
    ModelReply, Provider, ProviderError, ReplyRequest, ToolRound, UnderstandRequest, Understanding, Understood,
};
use crate::runtime::engine::Runtime;
use crate::runtime::events::Event;
use serde_json::{Value, json};

/// How much `--trace` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceLevel {
    /// The runtime's events.
    Events,
    /// The events, and the model's requests and raw answers.
    Prompts,
}

/// One JSON line on stderr.
fn emit(line: &Value) {
    crate::cli::report::print_stderr(&format!("{line}\n"));
}

/// Prints every event of the runtime's turns as it happens, configured
/// keys redacted (a user may paste one into a message).
pub fn observe(runtime: &mut Runtime, redactor: Redactor) {
    runtime.set_observer(move |event: &Event| {
        let mut line = serde_json::to_value(event).unwrap_or_default();
        redactor.value(&mut line);
        emit(&line);
    });
}

/// A provider that prints what it is asked and what it answers.
pub struct Traced {
    inner: Box<dyn Provider>,
    redactor: Redactor,
}

impl Traced {
    pub fn new(inner: Box<dyn Provider>, redactor: Redactor) -> Traced {
        Traced { inner, redactor }
    }

    fn emit(&self, mut line: Value) {
        self.redactor.value(&mut line);
        emit(&line);
    }
}

fn rounds_json(rounds: &[ToolRound]) -> Value {
    Value::Array(
        rounds
            .iter()
            .map(|round| {
                let calls: Vec<Value> = round
                    .asked
                    .calls
                    .iter()
                    .zip(&round.results)
                    .map(|(call, result)| {
                        json!({
                            "name": call.name,
                            "arguments": call.arguments.as_ref().map_or_else(|error| json!({"unreadable": error}), Clone::clone),
                            "result": result.as_ref().map_or_else(|error| json!({"error": error}), Clone::clone),
                        })
                    })
                    .collect();
                json!({"text": round.asked.text, "calls": calls})
            })
            .collect(),
    )
}

impl Provider for Traced {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn modes(&self) -> Option<String> {
        self.inner.modes()
    }

    fn fused_reply(&self) -> bool {
        self.inner.fused_reply()
    }

    fn understand_left_out(&self, request: &UnderstandRequest) -> usize {
        self.inner.understand_left_out(request)
    }

    fn reply_left_out(&self, request: &ReplyRequest) -> usize {
        self.inner.reply_left_out(request)
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let provider = self.inner.name();
        self.emit(json!({"event": "model_request", "call": "understand", "provider": provider, "request": request}));
        let answer = self.inner.understand(request);
        match &answer {
            Ok(understanding) => {
                self.emit(json!({"event": "model_answer", "call": "understand", "answer": understanding}))
            }
            Err(error) => self.emit(json!({"event": "model_error", "call": "understand", "error": error.to_string()})),
        }
        answer
    }

    /// As `understand`; the answer traced is the extraction, the reply's
    /// text still streaming then (the turn's events say what became of it).
    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        let provider = self.inner.name();
        self.emit(json!({"event": "model_request", "call": "understand", "provider": provider, "request": request}));
        let answer = self.inner.understand_streamed(request);
        match &answer {
            Ok(understood) => {
                self.emit(json!({"event": "model_answer", "call": "understand", "answer": understood.understanding}))
            }
            Err(error) => self.emit(json!({"event": "model_error", "call": "understand", "error": error.to_string()})),
        }
        answer
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let provider = self.inner.name();
        self.emit(json!({
            "event": "model_request",
            "call": "reply",
            "provider": provider,
            "request": request,
            "rounds": rounds_json(rounds),
        }));
        let answer = self.inner.reply(request, rounds, on_text);
        match &answer {
            Ok(ModelReply::Done(response)) => {
                self.emit(json!({"event": "model_answer", "call": "reply", "answer": response}));
            }
            Ok(ModelReply::ToolCalls(asked)) => {
                let calls: Vec<Value> = asked
                    .calls
                    .iter()
                    .map(|call| {
                        json!({
                            "name": call.name,
                            "arguments": call.arguments.as_ref().map_or_else(|error| json!({"unreadable": error}), Clone::clone),
                        })
                    })
                    .collect();
                self.emit(json!({"event": "model_answer", "call": "reply", "text": asked.text, "tool_calls": calls}));
            }
            Err(error) => self.emit(json!({"event": "model_error", "call": "reply", "error": error.to_string()})),
        }
        answer
    }
}
