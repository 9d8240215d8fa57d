//! Which model a run uses and how to reach it: `flowc.toml`, then the
//! environment, then command-line flags, each overriding the one before
//! (DESIGN.md "Understanding and the model"). [`build_provider`] turns the
//! result into a [`Provider`](crate::llm::Provider).
//!
//! [`build_provider`]: crate::llm::build_provider
//!
//! The top-level keys of `flowc.toml` (found and parsed by `crate::config`,
//! which hands the file here) are this module's:
//!
//! ```toml
//! provider = "openai"              # offline | openai | anthropic | replay:FILE
//! model = "gpt-4o-mini"
//! base_url = "http://127.0.0.1:8080/v1"
//! api_key_env = "OPENAI_API_KEY"   # the variable holding the key
//! timeout = "60s"                  # whole request, per attempt
//! connect_timeout = "10s"
//! max_retries = 2
//! temperature = 0.2
//! max_tokens = 512
//! context_window = 8192            # tokens; else learned from the server
//! structured_output = "json_schema" # json_schema | json_object | tool | prompt
//! tool_choice = "auto"             # auto | forced
//! fused_reply = true               # false: the reply always in a call of its own
//! ```
//!
//! API keys come only from the environment, never from the file, so a
//! committed `flowc.toml` cannot leak one. Tables (`[store]`, …) are left to
//! the modules that own them.

use crate::config::Config;
use crate::duration::parse_duration_ms;
use crate::llm::ProviderError;
use crate::llm::context::MIN_CONTEXT_WINDOW;
use crate::llm::http::{CancelFlag, HttpSettings};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// The OpenAI endpoint when `base_url` is not set.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The Anthropic endpoint when `base_url` is not set.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The OpenAI model when `model` is not set.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";
/// The Anthropic model when `model` is not set.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-haiku-4-5";

/// The model behind a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// The offline provider: rules, no network.
    Offline,
    /// An OpenAI-compatible server.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Answers read back from a `--record` file.
    Replay(PathBuf),
}

impl FromStr for ProviderKind {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "offline" => Ok(ProviderKind::Offline),
            "openai" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            other => match other.strip_prefix("replay:") {
                Some(path) if !path.is_empty() => Ok(ProviderKind::Replay(PathBuf::from(path))),
                _ => Err(ConfigError::Invalid(format!(
                    "unknown provider `{other}` (use offline, openai, anthropic or replay:FILE)"
                ))),
            },
        }
    }
}

/// How the understand call's answer is constrained on an OpenAI-compatible
/// server. On a refusal the provider moves to the next mode, in this
/// order, and keeps it for the rest of its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// `response_format: {type: json_schema, json_schema: {strict: true, schema}}`.
    JsonSchema,
    /// `response_format: {type: json_object, schema}` (llama-cpp-python's form).
    JsonObject,
    /// A forced function call whose parameters are the schema.
    Tool,
    /// The shape in the prompt, the answer validated afterwards.
    Prompt,
}

impl StructuredOutput {
    /// The mode to fall back to when a server rejects this one.
    pub fn next(self) -> Option<StructuredOutput> {
        match self {
            StructuredOutput::JsonSchema => Some(StructuredOutput::JsonObject),
            StructuredOutput::JsonObject => Some(StructuredOutput::Tool),
            StructuredOutput::Tool => Some(StructuredOutput::Prompt),
            StructuredOutput::Prompt => None,
        }
    }

    /// The mode's name in `flowc.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            StructuredOutput::JsonSchema => "json_schema",
            StructuredOutput::JsonObject => "json_object",
            StructuredOutput::Tool => "tool",
            StructuredOutput::Prompt => "prompt",
        }
    }
}

impl FromStr for StructuredOutput {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "json_schema" => Ok(StructuredOutput::JsonSchema),
            "json_object" => Ok(StructuredOutput::JsonObject),
            "tool" => Ok(StructuredOutput::Tool),
            "prompt" => Ok(StructuredOutput::Prompt),
            other => Err(ConfigError::Invalid(format!(
                "unknown structured_output `{other}` (use json_schema, json_object, tool or prompt)"
            ))),
        }
    }
}

/// How the model is offered tools in a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoiceMode {
    /// Native `tool_choice: auto`: the model calls tools or writes the reply.
    Auto,
    /// For servers where only a forced call works: each round is one forced
    /// call of a `next_action` function (a tool and its arguments, or
    /// "reply"), then the reply is streamed without tools.
    Forced,
}

impl FromStr for ToolChoiceMode {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "auto" => Ok(ToolChoiceMode::Auto),
            "forced" => Ok(ToolChoiceMode::Forced),
            other => Err(ConfigError::Invalid(format!("unknown tool_choice `{other}` (use auto or forced)"))),
        }
    }
}

/// An API key. Its `Debug` never shows it; [`Secret::expose`] is called
/// only where a header is written.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that writes it into a header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Secret([redacted])")
    }
}

/// Everything needed to build a provider.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// Which model provider answers.
    pub provider: ProviderKind,
    /// The model's name, as the provider spells it.
    pub model: String,
    /// The endpoint root: `…/v1` for OpenAI-compatible servers, the host
    /// for Anthropic (`/v1/messages` is appended).
    pub base_url: String,
    /// The API key, if the provider needs one.
    pub api_key: Option<Secret>,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// Sampling temperature; the provider's default when unset.
    pub temperature: Option<f64>,
    /// Completion budget per call (Anthropic requires one: 1024 unless set).
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens: requests are trimmed to fit
    /// (`llm::context`). Learned from the server's refusals when unset.
    pub context_window: Option<u32>,
    /// How structured answers are asked for (JSON schema, tool, or prompt).
    pub structured_output: StructuredOutput,
    /// Whether the model may call tools or must.
    pub tool_choice: ToolChoiceMode,
    /// Whether the understand call also asks for the reply (the fused
    /// call); off, every reply that needs the model is a call of its own,
    /// as before the fused call (to compare the two, or for a model whose
    /// fused replies are poor).
    pub fused_reply: bool,
    /// `--record FILE`: store every request and answer of the run.
    pub record: Option<PathBuf>,
    /// Shared with the CLI, which sets it on Ctrl-C.
    pub cancel: CancelFlag,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            provider: ProviderKind::Offline,
            model: String::new(),
            base_url: String::new(),
            api_key: None,
            http: HttpSettings::default(),
            temperature: None,
            max_tokens: None,
            context_window: None,
            structured_output: StructuredOutput::JsonSchema,
            tool_choice: ToolChoiceMode::Auto,
            fused_reply: true,
            record: None,
            cancel: CancelFlag::new(),
        }
    }
}

/// What the command line may override; the CLI fills it from its flags.
#[derive(Clone, Debug, Default)]
pub struct ProviderFlags {
    /// `--provider`: `offline`, `openai`, `anthropic` or `replay:FILE`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--timeout`: the whole request, per attempt.
    pub timeout: Option<Duration>,
    /// `--temperature`.
    pub temperature: Option<f64>,
    /// `--max-tokens`.
    pub max_tokens: Option<u32>,
    /// `--structured-output`.
    pub structured_output: Option<StructuredOutput>,
    /// `--tool-choice`.
    pub tool_choice: Option<ToolChoiceMode>,
    /// `--record FILE`.
    pub record: Option<PathBuf>,
}

/// Why no provider could be set up; each message is one line that says
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    /// `flowc.toml` cannot be read or parsed.
    Parse {
        /// The file.
        path: String,
        /// What is wrong in it.
        message: String,
    },
    #[error("{0}")]
    /// A setting's value is not allowed.
    Invalid(String),
    #[error("{variable} is not set: export it to use the {provider} provider, or run with --provider offline")]
    /// The provider's API-key variable is not set.
    MissingKey {
        /// The environment variable to export.
        variable: String,
        /// The provider that needs it.
        provider: &'static str,
    },
    #[error("{0}")]
    /// The provider cannot be used here.
    Unavailable(String),
    #[error("{0}")]
    /// The provider answered an error while being set up.
    Provider(#[from] ProviderError),
}

/// The keys of `flowc.toml` this module owns.
#[derive(Debug, Default, Deserialize)]
struct FileConfig {
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    timeout: Option<DurationValue>,
    connect_timeout: Option<DurationValue>,
    max_retries: Option<u32>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    context_window: Option<u32>,
    structured_output: Option<String>,
    tool_choice: Option<String>,
    fused_reply: Option<bool>,
    /// Everything else: tables belong to other modules; a stray top-level
    /// value is a typo and an error.
    #[serde(flatten)]
    rest: toml::Table,
}

/// A duration written as flowc writes durations (`"500ms"`, `"30s"`,
/// `"2m"`), or as a TOML number of seconds.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DurationValue {
    Seconds(f64),
    Text(String),
}

impl DurationValue {
    fn to_duration(&self, key: &str) -> Result<Duration, String> {
        let invalid = || format!("`{key}` must be a duration such as \"30s\", \"500ms\" or \"2m\"");
        let seconds = match self {
            DurationValue::Seconds(seconds) => *seconds,
            DurationValue::Text(text) => parse_duration_ms(text).map_err(|_| invalid())? as f64 / 1000.0,
        };
        if !seconds.is_finite() || seconds <= 0.0 || seconds > 86_400.0 {
            return Err(invalid());
        }
        Ok(Duration::from_secs_f64(seconds))
    }
}

/// The provider settings of this process: the top-level keys of its
/// `flowc.toml` (`config`), the real environment, and `flags`.
pub fn load(config: &Config, flags: &ProviderFlags) -> Result<ProviderConfig, ConfigError> {
    load_with(config, &|name| std::env::var(name).ok(), flags)
}

/// [`load`] with the environment given, for tests.
pub fn load_with(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    flags: &ProviderFlags,
) -> Result<ProviderConfig, ConfigError> {
    let file = file_config(config).map_err(|message| ConfigError::Parse { path: config.shown(), message })?;
    let env = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let mut config = ProviderConfig::default();

    let provider = flags.provider.clone().or_else(|| env("FLOWC_PROVIDER")).or(file.provider.clone());
    if let Some(provider) = provider {
        config.provider = provider.parse()?;
    }
    let (default_model, default_base_url, key_variable) = match config.provider {
        ProviderKind::OpenAi => (DEFAULT_OPENAI_MODEL, DEFAULT_OPENAI_BASE_URL, "OPENAI_API_KEY"),
        ProviderKind::Anthropic => (DEFAULT_ANTHROPIC_MODEL, DEFAULT_ANTHROPIC_BASE_URL, "ANTHROPIC_API_KEY"),
        ProviderKind::Offline | ProviderKind::Replay(_) => ("", "", ""),
    };
    config.model = flags
        .model
        .clone()
        .or_else(|| env("FLOWC_MODEL"))
        .or(file.model.clone())
        .unwrap_or_else(|| default_model.to_string());
    let env_base_url = if config.provider == ProviderKind::OpenAi { env("OPENAI_BASE_URL") } else { None };
    let custom_base_url = flags.base_url.clone().or(env_base_url).or(file.base_url.clone());
    config.base_url =
        custom_base_url.clone().unwrap_or_else(|| default_base_url.to_string()).trim_end_matches('/').to_string();

    if let Some(timeout) = &file.timeout {
        config.http.timeout = timeout.to_duration("timeout").map_err(ConfigError::Invalid)?;
    }
    if let Some(timeout) = &file.connect_timeout {
        config.http.connect_timeout = timeout.to_duration("connect_timeout").map_err(ConfigError::Invalid)?;
    }
    if let Some(retries) = file.max_retries {
        config.http.max_retries = retries.min(10);
    }
    config.http.timeout = flags.timeout.unwrap_or(config.http.timeout);
    config.temperature = flags.temperature.or(file.temperature);
    if let Some(temperature) = config.temperature
        && !(0.0..=2.0).contains(&temperature)
    {
        return Err(ConfigError::Invalid(format!("temperature {temperature} is outside 0 to 2")));
    }
    config.max_tokens = flags.max_tokens.or(file.max_tokens);
    config.context_window = match file.context_window {
        Some(window) if window < MIN_CONTEXT_WINDOW => {
            return Err(ConfigError::Invalid(format!(
                "context_window {window} is too small: a model's window is at least {MIN_CONTEXT_WINDOW} tokens"
            )));
        }
        window => window,
    };
    if let Some(mode) = flags.structured_output {
        config.structured_output = mode;
    } else if let Some(mode) = &file.structured_output {
        config.structured_output = mode.parse()?;
    }
    if let Some(choice) = flags.tool_choice {
        config.tool_choice = choice;
    } else if let Some(choice) = &file.tool_choice {
        config.tool_choice = choice.parse()?;
    }
    config.fused_reply = file.fused_reply.unwrap_or(true);
    config.record = flags.record.clone();

    if !key_variable.is_empty() {
        let variable = file.api_key_env.clone().unwrap_or_else(|| key_variable.to_string());
        config.api_key = env(&variable).map(|key| Secret::new(key.trim()));
        // A custom endpoint (a local server, a gateway) may need no key; the
        // vendor's own always does.
        let key_required = custom_base_url.is_none() || config.base_url == default_base_url;
        if config.api_key.is_none() && key_required {
            let provider = if config.provider == ProviderKind::OpenAi { "openai" } else { "anthropic" };
            return Err(ConfigError::MissingKey { variable, provider });
        }
    }
    Ok(config)
}

/// This module's keys of the file, checked.
fn file_config(config: &Config) -> Result<FileConfig, String> {
    if config.path().is_none() {
        return Ok(FileConfig::default());
    }
    let file: FileConfig = toml::Value::Table(config.table().clone())
        .try_into()
        .map_err(|error: toml::de::Error| error.message().to_string())?;
    if file.rest.contains_key("api_key") {
        return Err("API keys do not belong in flowc.toml: set OPENAI_API_KEY or ANTHROPIC_API_KEY".to_string());
    }
    for (key, value) in &file.rest {
        if !value.is_table() {
            return Err(format!(
                "unknown key `{key}` (known: provider, model, base_url, api_key_env, timeout, connect_timeout, \
                 max_retries, temperature, max_tokens, context_window, structured_output, tool_choice, fused_reply)"
            ));
        }
    }
    Ok(file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("flowc-config-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn check(
        dir: &Dir,
        program: Option<&Path>,
        env: &[(&str, &str)],
        flags: &ProviderFlags,
    ) -> Result<ProviderConfig, ConfigError> {
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let config = Config::load_from(program, &dir.0).map_err(|error| ConfigError::Invalid(error.to_string()))?;
        load_with(&config, &|name| env.get(name).cloned(), flags)
    }

    #[test]
    fn no_file_no_env_is_offline() {
        let dir = Dir::new("empty");
        let config = check(&dir, None, &[], &ProviderFlags::default()).unwrap();
        assert_eq!(config.provider, ProviderKind::Offline);
        assert!(config.api_key.is_none());
    }

    #[test]
    fn the_context_window_comes_from_the_file_and_a_typo_is_refused() {
        let dir = Dir::new("window");
        dir.write("flowc.toml", "context_window = 2048\n");
        assert_eq!(check(&dir, None, &[], &ProviderFlags::default()).unwrap().context_window, Some(2048));
        dir.write("flowc.toml", "context_window = 204\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert_eq!(error, "context_window 204 is too small: a model's window is at least 256 tokens");
        dir.write("flowc.toml", "context_windows = 2048\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert!(error.contains("unknown key `context_windows`") && error.contains("context_window,"), "{error}");
        let dir = Dir::new("no-window");
        assert_eq!(check(&dir, None, &[], &ProviderFlags::default()).unwrap().context_window, None);
    }

    #[test]
    fn file_then_env_then_flags() {
        let dir = Dir::new("layers");
        dir.write(
            "flowc.toml",
            "provider = \"openai\"\nmodel = \"from-file\"\nbase_url = \"http://127.0.0.1:9/v1/\"\ntimeout = \"500ms\"\n\
             connect_timeout = 2\ntemperature = 0.5\nstructured_output = \"json_object\"\ntool_choice = \"forced\"\n\
             max_tokens = 64\n\n[store]\nkind = \"sqlite\"\n",
        );
        let config = check(&dir, None, &[], &ProviderFlags::default()).unwrap();
        assert_eq!(config.provider, ProviderKind::OpenAi);
        assert_eq!(config.model, "from-file");
        assert_eq!(config.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(config.http.timeout, Duration::from_millis(500));
        assert_eq!(config.http.connect_timeout, Duration::from_secs(2));
        assert_eq!(config.temperature, Some(0.5));
        assert_eq!(config.max_tokens, Some(64));
        assert_eq!(config.structured_output, StructuredOutput::JsonObject);
        assert_eq!(config.tool_choice, ToolChoiceMode::Forced);
        assert!(config.fused_reply, "the fused call is on unless turned off");
        assert!(config.api_key.is_none(), "a local server needs no key");

        let env =
            [("FLOWC_MODEL", "from-env"), ("OPENAI_BASE_URL", "http://127.0.0.1:10/v1"), ("OPENAI_API_KEY", "sk-test")];
        let config = check(&dir, None, &env, &ProviderFlags::default()).unwrap();
        assert_eq!(config.model, "from-env");
        assert_eq!(config.base_url, "http://127.0.0.1:10/v1");
        assert_eq!(config.api_key, Some(Secret::new("sk-test")));

        let flags = ProviderFlags {
            model: Some("from-flag".into()),
            structured_output: Some(StructuredOutput::Prompt),
            timeout: Some(Duration::from_secs(3)),
            ..ProviderFlags::default()
        };
        let config = check(&dir, None, &env, &flags).unwrap();
        assert_eq!(config.model, "from-flag");
        assert_eq!(config.structured_output, StructuredOutput::Prompt);
        assert_eq!(config.http.timeout, Duration::from_secs(3));
    }

    #[test]
    fn the_fused_reply_is_turned_off_in_the_file_by_a_boolean() {
        let dir = Dir::new("fused");
        dir.write("flowc.toml", "fused_reply = false\n");
        assert!(!check(&dir, None, &[], &ProviderFlags::default()).unwrap().fused_reply);
        dir.write("flowc.toml", "fused_reply = \"no\"\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert!(error.ends_with("flowc.toml: invalid type: string \"no\", expected a boolean"), "{error}");
    }

    #[test]
    fn the_file_beside_the_program_wins() {
        let dir = Dir::new("beside");
        dir.write("flowc.toml", "model = \"cwd\"\n");
        let program = dir.write("app/booking.flow", "");
        dir.write("app/flowc.toml", "provider = \"anthropic\"\nmodel = \"beside\"\n");
        let config =
            check(&dir, Some(&program), &[("ANTHROPIC_API_KEY", "k-123456")], &ProviderFlags::default()).unwrap();
        assert_eq!(config.provider, ProviderKind::Anthropic);
        assert_eq!(config.model, "beside");
        assert_eq!(config.base_url, DEFAULT_ANTHROPIC_BASE_URL);
    }

    #[test]
    fn missing_keys_name_the_variable() {
        let dir = Dir::new("keys");
        let flags = ProviderFlags { provider: Some("openai".into()), ..ProviderFlags::default() };
        let error = check(&dir, None, &[], &flags).unwrap_err();
        assert_eq!(
            error.to_string(),
            "OPENAI_API_KEY is not set: export it to use the openai provider, or run with --provider offline"
        );
        let error = check(
            &dir,
            None,
            &[("FLOWC_PROVIDER", "anthropic"), ("ANTHROPIC_API_KEY", " ")],
            &ProviderFlags::default(),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ANTHROPIC_API_KEY is not set: export it to use the anthropic provider, or run with --provider offline"
        );
        dir.write("flowc.toml", "provider = \"openai\"\napi_key_env = \"GATEWAY_KEY\"\n");
        let error = check(&dir, None, &[("OPENAI_API_KEY", "sk-unused")], &ProviderFlags::default()).unwrap_err();
        assert!(error.to_string().starts_with("GATEWAY_KEY is not set"));
        let config = check(&dir, None, &[("GATEWAY_KEY", "gw-secret")], &ProviderFlags::default()).unwrap();
        assert_eq!(format!("{:?}", config.api_key), "Some(Secret([redacted]))");
    }

    #[test]
    fn bad_files_are_one_line_errors() {
        let dir = Dir::new("bad");
        dir.write("flowc.toml", "modle = \"x\"\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert!(error.contains("unknown key `modle`"), "{error}");
        assert!(!error.contains('\n'));
        dir.write("flowc.toml", "api_key = \"sk-oops\"\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert!(error.contains("API keys do not belong in flowc.toml"), "{error}");
        dir.write("flowc.toml", "timeout = \"soon\"\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert!(error.contains("`timeout` must be a duration"), "{error}");
        dir.write("flowc.toml", "provider = \"gemini\"\n");
        let error = check(&dir, None, &[], &ProviderFlags::default()).unwrap_err().to_string();
        assert_eq!(error, "unknown provider `gemini` (use offline, openai, anthropic or replay:FILE)");
        dir.write("flowc.toml", "structured_output = \"xml\"\n");
        assert!(check(&dir, None, &[], &ProviderFlags::default()).is_err());
        dir.write("flowc.toml", "temperature = 7\n");
        assert!(check(&dir, None, &[], &ProviderFlags::default()).is_err());
    }

    #[test]
    fn providers_and_durations_parse() {
        assert_eq!("replay:run.json".parse::<ProviderKind>().unwrap(), ProviderKind::Replay("run.json".into()));
        assert!("replay:".parse::<ProviderKind>().is_err());
        let text = |text: &str| DurationValue::Text(text.to_string()).to_duration("timeout").ok();
        assert_eq!(text("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(text("2m"), Some(Duration::from_secs(120)));
        assert_eq!(DurationValue::Seconds(1.5).to_duration("timeout").ok(), Some(Duration::from_millis(1500)));
        // The language's grammar: no bare or fractional numbers in text.
        assert_eq!(text("1.5"), None);
        assert_eq!(text("0s"), None);
        assert_eq!(text("5 parsecs"), None);
        assert_eq!(text("2d"), None, "a request timeout is at most a day");
        assert_eq!(StructuredOutput::JsonSchema.next(), Some(StructuredOutput::JsonObject));
        assert_eq!(StructuredOutput::Prompt.next(), None);
    }
}
