//! The runtime: a program, its model and its tools, ready to hold
//! conversations. Each message is one turn, run by the pipeline of the
//! stage files beside this one ([`super`]).

use super::claims::ProgramTexts;
use super::{Progress, Turn};
use crate::ir::Program;
use crate::llm::{Provider, ProviderError};
use crate::runtime::actions::ActionError;
use crate::runtime::certain::CertainReader;
use crate::runtime::clock::{Clock, IdSource};
use crate::runtime::events::{Event, TurnResult};
use crate::runtime::session::{Session, program_hash};
use crate::runtime::tools::{ToolEnv, ToolError, ToolRegistry};
use std::sync::Arc;
use std::time::Duration;

/// Why a turn failed. The session is left exactly as it was.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("model call failed ({class}): {0}", class = .0.class())]
    /// The model call failed.
    Provider(#[from] ProviderError),
    #[error("tool call failed: {0}")]
    /// A tool call failed.
    Tool(#[from] ToolError),
    #[error("{0}")]
    /// A directive could not be applied.
    Action(#[from] ActionError),
    #[error("{0}")]
    /// A `wait` could not be worked out.
    Wait(String),
    #[error("the session belongs to another version of the program (hash {found}, expected {expected})")]
    /// The session was saved by another version of the program.
    ProgramMismatch {
        /// The hash the session was saved with.
        found: String,
        /// The hash of the program running now.
        expected: String,
    },
}

/// Receives every event of every turn as it happens, in the order of
/// [`TurnResult::events`] (which is what it received). A closure
/// `|event: &Event| …` is an observer.
pub trait Observer: Send {
    /// Called with each event, in order.
    fn event(&mut self, event: &Event);
}

impl<F: FnMut(&Event) + Send> Observer for F {
    fn event(&mut self, event: &Event) {
        self(event)
    }
}

/// Receives the reply of a turn as it is written (see [`Runtime::set_stream`]).
pub type StreamSink = Box<dyn FnMut(&str) + Send>;

/// What a runtime needs besides the program and the model.
#[derive(Clone)]
pub struct RuntimeOptions {
    /// The environment tools run in: folder, clock, ids.
    pub tool_env: ToolEnv,
    /// In-process tool handlers, by tool name.
    pub tools: ToolRegistry,
    /// The embedder's limits on top of the program's own.
    pub limits: ContinuationLimits,
}

/// Limits an embedder sets on top of the program's own `agent.limits`
/// (`max_auto_steps`, `max_tool_rounds`, `max_turn_tokens`,
/// `turn_timeout`, which keep their meaning). Each stops a turn with its
/// own [`StopReason`](crate::runtime::events::StopReason), at a point the next turn resumes from: before a step
/// is evaluated or executed, or between stages. `None` is no limit, the
/// default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContinuationLimits {
    /// Steps one turn may execute ([`StopReason::StepLimit`](crate::runtime::events::StopReason::StepLimit)).
    pub max_steps_per_turn: Option<u32>,
    /// Tokens a session may spend over all its turns
    /// ([`StopReason::SessionTokenLimit`](crate::runtime::events::StopReason::SessionTokenLimit)).
    pub max_session_tokens: Option<u64>,
    /// Time a session may spend running turns, over all of them
    /// ([`StopReason::SessionTimeLimit`](crate::runtime::events::StopReason::SessionTimeLimit)). The time is kept in the session
    /// (`turn_time_ms`) only while this limit is set.
    pub max_session_time: Option<Duration>,
    /// Failures in a row within a turn, failed steps and failed tool calls
    /// of the model's tool loop, before it stops ([`StopReason::ErrorLimit`](crate::runtime::events::StopReason::ErrorLimit)).
    pub max_consecutive_errors: Option<u32>,
}

/// A program ready to hold conversations.
pub struct Runtime {
    /// The compiled program the runtime runs.
    pub program: Arc<Program>,
    pub(super) provider: Box<dyn Provider>,
    pub(super) tools: ToolRegistry,
    pub(super) tool_env: ToolEnv,
    pub(super) program_hash: String,
    pub(super) observer: Option<Box<dyn Observer>>,
    pub(super) limits: ContinuationLimits,
    pub(super) stream: Option<StreamSink>,
    /// Reads what the offline rules read beyond doubt before the model is
    /// asked (its compiled patterns live as long as the runtime).
    pub(super) reader: CertainReader,
    /// What the program's texts back, read once for the reply-claims check.
    pub(super) program_texts: ProgramTexts,
}

impl Runtime {
    /// A runtime for `program`, asking `provider`.
    pub fn new(program: Arc<Program>, provider: Box<dyn Provider>, options: RuntimeOptions) -> Runtime {
        let program_hash = program_hash(&program);
        Runtime {
            program_texts: ProgramTexts::new(Arc::clone(&program)),
            program,
            provider,
            tools: options.tools,
            tool_env: options.tool_env,
            limits: options.limits,
            program_hash,
            observer: None,
            stream: None,
            reader: CertainReader::new(),
        }
    }

    /// Receives the reply of each turn that calls the model while it is
    /// written, for a terminal to show it as it streams: the turn's `say`
    /// texts first (when the model is about to be called), then a line
    /// break and the model's text, piece by piece. Unless a post-model
    /// `reply` directive replaces the model's text, what the sink received
    /// is [`TurnResult::reply`]; a turn without a model call sends nothing.
    /// A turn that fails may have sent part of a reply.
    pub fn set_stream(&mut self, sink: StreamSink) {
        self.stream = Some(sink);
    }

    /// Receives every event as it happens (the REPL's live trace).
    pub fn set_observer(&mut self, observer: impl Observer + 'static) {
        self.observer = Some(Box::new(observer));
    }

    /// The provider's name, as traces show it.
    pub fn provider_name(&self) -> String {
        self.provider.name()
    }

    /// What the provider negotiated with its server so far ([`Provider::modes`]).
    pub fn provider_modes(&self) -> Option<String> {
        self.provider.modes()
    }

    /// The hash of the program, which every session it saves carries.
    pub fn program_hash(&self) -> &str {
        &self.program_hash
    }

    /// The time the runtime reads.
    pub fn clock(&self) -> &dyn Clock {
        self.tool_env.clock.as_ref()
    }

    /// Where the runtime's new ids come from.
    pub fn ids(&self) -> &dyn IdSource {
        self.tool_env.ids.as_ref()
    }

    /// A fresh session for this program.
    pub fn new_session(&self, id: impl Into<String>) -> Session {
        Session::new(id, self.program_hash.clone())
    }

    /// Runs one whole turn.
    pub fn run_turn(&mut self, session: &mut Session, message: &str) -> Result<TurnResult, TurnError> {
        let mut turn = self.begin(session, message)?;
        loop {
            if let Progress::Finished { result, .. } = turn.step()? {
                return Ok(*result);
            }
        }
    }

    /// Starts a turn to drive stage by stage with [`Turn::step`].
    pub fn begin<'a>(&'a mut self, session: &'a mut Session, message: &str) -> Result<Turn<'a>, TurnError> {
        if session.program_hash != self.program_hash {
            return Err(TurnError::ProgramMismatch {
                found: session.program_hash.clone(),
                expected: self.program_hash.clone(),
            });
        }
        Ok(Turn::new(self, session, message))
    }
}
