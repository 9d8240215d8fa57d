//! `flowc serve PATH...`: reads the flags, the tokens and the store into
//! [`crate::serve::ServeOptions`] and runs the server until SIGTERM or
//! Ctrl-C.

use super::Outcome;
use super::limits::LimitFlags;
use super::load::expand_paths;
use crate::config::Config;
use crate::serve::auth::{Auth, parse_pair, tokens_from_table};
use crate::serve::caps::Caps;
use crate::serve::programs::ProgramSettings;
use crate::serve::{DEFAULT_BODY_LIMIT, ServeOptions};
use crate::store::StoreLocation;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Programs (.flow, .yaml, .yml) or folders of them; each is served by its file name without extension
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The address to listen on (port 0 picks a free port, printed at start)
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// The store: sqlite:PATH or postgres://… (default: .flowc/flowc.db beside the first program, or FLOWC_STORE, or [store] in flowc.toml)
    #[arg(long)]
    pub store: Option<String>,
    /// A bearer token, as TENANT=TOKEN (repeatable; also FLOWC_SERVE_TOKENS, comma-separated, and [serve.tokens] in flowc.toml)
    #[arg(long = "token", value_name = "TENANT=TOKEN")]
    pub tokens: Vec<String>,
    /// Listen on a non-loopback address without any token
    #[arg(long)]
    pub insecure_open: bool,
    /// The largest request body taken, in bytes (larger ones get 413)
    #[arg(long, default_value_t = DEFAULT_BODY_LIMIT)]
    pub max_body: usize,
    /// Async worker threads (turns run on tokio's blocking pool beside them)
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// How often a run's event stream reads a running run again, e.g. 100ms
    #[arg(long, default_value = "100ms", value_parser = parse_poll)]
    pub events_poll: Duration,
    /// How long a client may take to send a request's head, e.g. 10s (then the connection is closed)
    #[arg(long, default_value = "10s", value_parser = parse_poll)]
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body, e.g. 30s (then 408)
    #[arg(long, default_value = "30s", value_parser = parse_poll)]
    pub body_timeout: Duration,
    /// Sessions one tenant may keep in the store (over [serve] max_sessions_per_tenant; beyond: 429)
    #[arg(long, value_name = "N")]
    pub max_sessions_per_tenant: Option<u64>,
    /// Workflow runs of one tenant not yet ended (over [serve] max_runs_per_tenant; beyond: 429)
    #[arg(long, value_name = "N")]
    pub max_runs_per_tenant: Option<u64>,
    /// Connections open at once (over [serve] max_connections; beyond: 503 and closed)
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Requests answered at once (over [serve] max_requests; beyond: 503)
    #[arg(long, value_name = "N")]
    pub max_requests: Option<usize>,
    #[command(flatten)]
    pub model: crate::cli::model::ModelFlags,
    #[command(flatten)]
    pub limits: LimitFlags,
}

fn parse_poll(text: &str) -> Result<Duration, String> {
    crate::runtime::limits_config::parse_time(text)
}

pub fn run(args: &ServeArgs) -> Outcome {
    match options(args) {
        Ok(options) => serve(&options, args.workers),
        Err(message) => {
            eprintln!("error: {message}");
            Outcome::Error
        }
    }
}

fn serve(options: &ServeOptions, workers: usize) -> Outcome {
    let running = match crate::serve::start(options, workers, true) {
        Ok(running) => running,
        Err(message) => {
            eprintln!("error: {message}");
            return Outcome::Error;
        }
    };
    // The one line a script or test waits for: where to connect.
    eprintln!("flowc serve: listening on http://{} (store {})", running.addr, options.store);
    match running.wait() {
        Ok(()) => {
            eprintln!("flowc serve: stopped");
            Outcome::Success
        }
        Err(message) => {
            eprintln!("error: {message}");
            Outcome::Error
        }
    }
}

fn options(args: &ServeArgs) -> Result<ServeOptions, String> {
    let files = expand_paths(&args.paths).map_err(|error| error.to_string())?;
    let first = files.first().cloned();
    let store = StoreLocation::resolve(args.store.as_deref(), first.as_deref()).map_err(|error| error.to_string())?;
    let config = Config::load(first.as_deref()).map_err(|error| error.to_string())?;
    let limits = match &first {
        Some(_) => args.limits.resolve(&config)?,
        None => Default::default(),
    };
    let (clock, ids) = crate::runtime::clock::from_env().map_err(|error| error.to_string())?;
    let provider_flags = args.model.provider_flags();
    let auth = Auth::new(tokens(args, &config)?)?;
    let caps = caps(args, &config)?;
    Ok(ServeOptions {
        files,
        addr: args.addr,
        store,
        auth,
        insecure_open: args.insecure_open,
        body_limit: args.max_body,
        settings: ProgramSettings { provider_flags, limits, clock, ids, tools: Default::default() },
        run_poll: args.events_poll,
        deadlines: crate::serve::listen::Deadlines { header: args.header_timeout, body: args.body_timeout },
        caps,
    })
}

/// The caps of `[serve]` in flowc.toml with the flags over them; a flag
/// of 0 is refused as the file's 0 is (a cap of nothing would refuse all).
fn caps(args: &ServeArgs, config: &Config) -> Result<Caps, String> {
    let mut caps = Caps::from_table(config.table()).map_err(|message| format!("{}: {message}", config.shown()))?;
    let positive = |flag: &str, value: Option<u64>| match value {
        Some(0) => Err(format!("--{flag} must be 1 or more")),
        _ => Ok(value),
    };
    if let Some(max) = positive("max-sessions-per-tenant", args.max_sessions_per_tenant)? {
        caps.sessions_per_tenant = Some(max);
    }
    if let Some(max) = positive("max-runs-per-tenant", args.max_runs_per_tenant)? {
        caps.runs_per_tenant = Some(max);
    }
    if let Some(max) = positive("max-connections", args.max_connections.map(|max| max as u64))? {
        caps.connections = usize::try_from(max).ok();
    }
    if let Some(max) = positive("max-requests", args.max_requests.map(|max| max as u64))? {
        caps.requests = usize::try_from(max).ok();
    }
    Ok(caps)
}

/// The tokens of `[serve.tokens]` in flowc.toml, `FLOWC_SERVE_TOKENS` and
/// `--token`, later ones replacing a tenant's earlier token.
fn tokens(args: &ServeArgs, config: &Config) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> =
        tokens_from_table(config.table()).map_err(|message| format!("{}: {message}", config.shown()))?;
    let env = std::env::var("FLOWC_SERVE_TOKENS").unwrap_or_default();
    let given = env.split(',').map(str::trim).filter(|text| !text.is_empty()).map(str::to_string);
    for text in given.chain(args.tokens.iter().cloned()) {
        let (tenant, token) = parse_pair(&text)?;
        pairs.retain(|(known, _)| *known != tenant);
        pairs.push((tenant, token));
    }
    Ok(pairs)
}
