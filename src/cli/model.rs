//! The flags that name the model (`--provider`, `--model`, `--base-url`),
//! one declaration shared by `run`, `serve` and `test`.

/// Which model a command talks to, over `flowc.toml` and the environment.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ModelFlags {
    /// The model: offline (default), openai, anthropic or replay:FILE
    #[arg(long)]
    pub provider: Option<String>,
    /// The model name (overrides flowc.toml and FLOWC_MODEL)
    #[arg(long)]
    pub model: Option<String>,
    /// The endpoint root: an OpenAI-compatible server's /v1, or Anthropic's host (overrides OPENAI_BASE_URL and flowc.toml)
    #[arg(long)]
    pub base_url: Option<String>,
}

impl ModelFlags {
    /// The provider overrides these flags make, nothing else set.
    pub fn provider_flags(&self) -> crate::llm::ProviderFlags {
        crate::llm::ProviderFlags {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            ..crate::llm::ProviderFlags::default()
        }
    }
}
