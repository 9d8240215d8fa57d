//! Builds the provider a configuration names, with the wrappers every run
//! gets: trimming to the context window (servers), redaction of secrets,
//! recording when asked, and the operator's `fused_reply = false`. The
//! providers read their configuration; this is the one place that knows
//! them all.

use super::config::{ConfigError, ProviderConfig, ProviderKind};
use super::{
    AskAnswer, AskRequest, ModelReply, Provider, ProviderError, ReplyRequest, ToolRound, UnderstandRequest,
    Understanding, Understood,
};

/// The provider a configuration names, wrapped so its errors and replies
/// never show the API key, and in a recorder when the run records.
pub fn build_provider(config: &ProviderConfig) -> Result<Box<dyn Provider>, ConfigError> {
    let window = || super::context::ContextWindow::new(config.context_window, config.max_tokens);
    // Servers get requests trimmed to the model's window; the recorder,
    // outside, keeps the request as the runtime made it, so replays match.
    let provider: Box<dyn Provider> = match &config.provider {
        ProviderKind::OpenAi => {
            Box::new(super::context::Windowed::new(Box::new(super::openai::OpenAi::new(config)?), window()))
        }
        ProviderKind::Anthropic => {
            Box::new(super::context::Windowed::new(Box::new(super::anthropic::Anthropic::new(config)?), window()))
        }
        ProviderKind::Replay(path) => Box::new(super::replay::Replay::load(path)?),
        // The offline model has no window of its own; given one
        // (`context_window`), it trims and summarises as a server would.
        ProviderKind::Offline if config.context_window.is_some() => {
            Box::new(super::context::Windowed::new(Box::new(super::offline::Offline::new()), window()))
        }
        ProviderKind::Offline => Box::new(super::offline::Offline::new()),
    };
    // Inside the recorder, so recordings hold what the run saw.
    let redactor = super::redact::Redactor::from_config(config);
    let provider: Box<dyn Provider> =
        if redactor.is_empty() { provider } else { Box::new(super::redact::Redacting::new(provider, redactor)) };
    let provider: Box<dyn Provider> = match &config.record {
        Some(path) => {
            let secrets: Vec<String> = config.api_key.iter().map(|key| key.expose().to_string()).collect();
            Box::new(super::replay::Recorder::create(path, provider, secrets)?)
        }
        None => provider,
    };
    // Outermost: the runtime asks the provider it holds.
    Ok(if config.fused_reply { provider } else { Box::new(NoFusedReply(provider)) })
}

/// A provider the runtime never asks for the fused reply
/// (`fused_reply = false`): everything else goes to the one inside.
struct NoFusedReply(Box<dyn Provider>);

impl Provider for NoFusedReply {
    fn name(&self) -> String {
        self.0.name()
    }

    fn modes(&self) -> Option<String> {
        self.0.modes()
    }

    fn fused_reply(&self) -> bool {
        false
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        self.0.understand(request)
    }

    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        self.0.understand_streamed(request)
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        self.0.reply(request, rounds, on_text)
    }

    fn ask(&mut self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        self.0.ask(request)
    }

    fn understand_left_out(&self, request: &UnderstandRequest) -> usize {
        self.0.understand_left_out(request)
    }

    fn reply_left_out(&self, request: &ReplyRequest) -> usize {
        self.0.reply_left_out(request)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_turns_the_fused_reply_off_and_nothing_else() {
        let on = build_provider(&ProviderConfig::default()).unwrap();
        assert!(on.fused_reply());
        let config = ProviderConfig { fused_reply: false, ..ProviderConfig::default() };
        let mut off = build_provider(&config).unwrap();
        assert!(!off.fused_reply());
        assert_eq!(off.name(), on.name());
        let request = UnderstandRequest { message: "hello".into(), ..UnderstandRequest::default() };
        assert!(off.understand(&request).is_ok(), "the calls go through");
    }
}
