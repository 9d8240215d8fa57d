//! Builds the provider a configuration names, with the wrappers every run
//! gets: trimming to the context window (servers), redaction of secrets,
//! and recording when asked. The providers read
//! their configuration; this is the one place that knows them all.

use super::Provider;
use super::config::{ConfigError, ProviderConfig, ProviderKind};

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
    match &config.record {
        Some(path) => {
            let secrets: Vec<String> = config.api_key.iter().map(|key| key.expose().to_string()).collect();
            Ok(Box::new(super::replay::Recorder::create(path, provider, secrets)?))
        }
        None => Ok(provider),
    }
}
