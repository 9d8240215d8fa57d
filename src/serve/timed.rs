//! The model calls of a server's turns timed, for the
//! `flowc_model_call_duration_seconds` histogram: a provider wrapping the
//! one a runtime is built with, observing each call's duration. Only
//! `flowc serve` wraps its providers; the command line and embedders pay
//! nothing.

use super::metrics::Histogram;
use crate::llm::{
    AskAnswer, AskRequest, ModelReply, Provider, ProviderError, ReplyRequest, ToolRound, UnderstandRequest,
    Understanding, Understood,
};
use std::sync::Arc;
use std::time::Instant;

/// A provider whose calls are timed into `latency`. A streamed understand
/// call counts until it returns, that is until the members of the answer
/// before the reply have arrived; the reply streaming after it is the
/// turn's, in `flowc_turn_duration_seconds`.
pub(crate) struct Timed {
    inner: Box<dyn Provider>,
    latency: Arc<Histogram>,
}

impl Timed {
    pub fn wrap(inner: Box<dyn Provider>, latency: &Arc<Histogram>) -> Box<dyn Provider> {
        Box::new(Timed { inner, latency: Arc::clone(latency) })
    }

    fn time<T>(&mut self, call: impl FnOnce(&mut dyn Provider) -> T) -> T {
        let started = Instant::now();
        let answer = call(self.inner.as_mut());
        self.latency.observe(started.elapsed());
        answer
    }
}

impl Provider for Timed {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn modes(&self) -> Option<String> {
        self.inner.modes()
    }

    fn fused_reply(&self) -> bool {
        self.inner.fused_reply()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        self.time(|inner| inner.understand(request))
    }

    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        self.time(|inner| inner.understand_streamed(request))
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        self.time(|inner| inner.reply(request, rounds, on_text))
    }

    fn ask(&mut self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        self.time(|inner| inner.ask(request))
    }

    fn understand_left_out(&self, request: &UnderstandRequest) -> usize {
        self.inner.understand_left_out(request)
    }

    fn reply_left_out(&self, request: &ReplyRequest) -> usize {
        self.inner.reply_left_out(request)
    }
}
