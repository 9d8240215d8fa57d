//! What a turn uses but does not change: the program, the model, the
//! tools and their environment (clock, ids), the operator's limits and the
//! code reader. Borrowed from the [`Runtime`] for the
//! length of one turn, apart from the [`TurnState`](super::state::TurnState)
//! the stages change, so a stage's signature says which it may touch.

use super::claims::ProgramTexts;
use super::runtime::StreamSink;
use super::runtime::{ContinuationLimits, Runtime};
use crate::ir::Program;
use crate::llm::Provider;
use crate::runtime::certain::CertainReader;
use crate::runtime::tools::{ToolEnv, ToolRegistry};

pub(super) struct Services<'a> {
    pub(super) program: &'a Program,
    /// What the program's texts back, for the reply-claims check.
    pub(super) program_texts: &'a ProgramTexts,
    pub(super) tools: &'a ToolRegistry,
    pub(super) tool_env: &'a ToolEnv,
    pub(super) limits: ContinuationLimits,
    /// Reads what the offline rules read beyond doubt before the model is
    /// asked (it keeps its compiled patterns).
    pub(super) reader: &'a mut CertainReader,
    /// The model: only the stages that call it (understand, post-phase
    /// signals, reply, and resolution, whose steps' and hooks' model steps
    /// it is lent to) take the services mutably.
    pub(super) provider: &'a mut dyn Provider,
    pub(super) stream: Option<&'a mut StreamSink>,
}

impl<'a> Services<'a> {
    /// The program's texts and today's date, which every reading of the
    /// reply-claims check needs (`claims.rs`).
    pub(super) fn claims_setting(&self) -> (&'a ProgramTexts, chrono::NaiveDate) {
        (self.program_texts, self.tool_env.clock.now().date_naive())
    }

    /// The services of `runtime`, and its observer, which the turn's trace
    /// feeds as events happen.
    pub(super) fn borrow(runtime: &'a mut Runtime) -> (Services<'a>, Option<&'a mut dyn super::Observer>) {
        let Runtime { program, provider, tools, tool_env, observer, limits, stream, reader, program_texts, .. } =
            runtime;
        let program: &'a std::sync::Arc<Program> = program;
        // `Runtime::program` is public: a program set in place of the one
        // the texts were read from has its own read.
        if !program_texts.of(program) {
            *program_texts = ProgramTexts::new(std::sync::Arc::clone(program));
        }
        let services = Services {
            program: program.as_ref(),
            program_texts,
            tools,
            tool_env,
            limits: *limits,
            reader,
            provider: provider.as_mut(),
            stream: stream.as_mut(),
        };
        let observer: Option<&'a mut dyn super::Observer> = match observer {
            Some(observer) => Some(observer.as_mut()),
            None => None,
        };
        (services, observer)
    }
}
