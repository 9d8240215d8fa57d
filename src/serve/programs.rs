//! The programs a server answers for, by name: each file's stem (and its
//! `agent` name when that is free), compiled at start. A program edited on
//! disk is compiled again when it is next used; an edit with errors is
//! refused with the reason and the version before it keeps serving. Every
//! version a session may still run on is kept, so a session the edit
//! cannot adopt goes on with the version it started with.
//!
//! Each version keeps a pool of ready runtimes: building one compiles the
//! offline reader's patterns, which a turn should not pay for.

use crate::ir::Program;
use crate::llm::config::ProviderConfig;
use crate::runtime::engine::{Runtime, RuntimeOptions};
use crate::runtime::limits_config::OperatorLimits;
use crate::runtime::session::program_hash;
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::source::SourceFile;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// Runtimes kept ready per program version; more are built under load and
/// dropped when the pool is full.
const POOL_SIZE: usize = 256;

/// What every program shares: the model, the limits, the clock and ids,
/// and the in-process tool handlers an embedder registers (empty for
/// `flowc serve`: programs run their own tools).
#[derive(Clone)]
pub struct ProgramSettings {
    /// Which model provider answers, as the command line's flags say it.
    pub provider_flags: crate::llm::ProviderFlags,
    /// The operator's limits on turns, tools and runs.
    pub limits: OperatorLimits,
    /// The time every program reads.
    pub clock: Arc<dyn crate::runtime::clock::Clock>,
    /// Where new session and run ids come from.
    pub ids: Arc<dyn crate::runtime::clock::IdSource>,
    /// In-process tool handlers, by tool name. With the offline model, a
    /// turn whose tools are all builtin or handled here runs on the
    /// server's async workers: a handler must answer at once, not wait.
    pub tools: ToolRegistry,
}

/// One compiled version of a program.
pub(crate) struct Version {
    pub name: String,
    pub path: PathBuf,
    pub ir: Arc<Program>,
    pub hash: String,
    pub tool_env: ToolEnv,
    pub limits: OperatorLimits,
    tools: ToolRegistry,
    provider: ProviderConfig,
    pool: Mutex<Vec<Runtime>>,
    /// Where its turns' model calls are timed (`flowc_model_call_duration_seconds`).
    model_latency: Arc<super::metrics::Histogram>,
    /// Whether a turn of this version only computes: the offline model,
    /// not recording, and every tool builtin or answered by an in-process
    /// handler (no process, no HTTP). Such a turn may run on the server's
    /// async workers instead of the blocking pool ([`super::turn`]).
    pub in_process: bool,
}

impl Version {
    /// A runtime for one turn: from the pool, or a new one.
    pub fn runtime(&self) -> Result<Runtime, String> {
        if let Some(runtime) = lock(&self.pool).pop() {
            return Ok(runtime);
        }
        let provider = crate::llm::build_provider(&self.provider).map_err(|error| error.to_string())?;
        let provider = super::timed::Timed::wrap(provider, &self.model_latency);
        let options = RuntimeOptions {
            tool_env: self.tool_env.clone(),
            tools: self.tools.clone(),
            limits: self.limits.conversation,
        };
        Ok(Runtime::new(Arc::clone(&self.ir), provider, options))
    }

    /// The model a workflow run's model steps ask, on this version's provider.
    pub fn model(&self) -> Result<crate::runtime::model_step::Model, String> {
        let provider = crate::llm::build_provider(&self.provider).map_err(|error| error.to_string())?;
        Ok(crate::runtime::model_step::Model::new(provider))
    }

    /// Puts back a runtime that has no stream or observer of a request set.
    pub fn give_back(&self, runtime: Runtime) {
        let mut pool = lock(&self.pool);
        if pool.len() < POOL_SIZE {
            pool.push(runtime);
        }
    }

    /// The tools a run of this version uses.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Whether the program holds a conversation (a flow that is not all-`auto`).
    pub fn converses(&self) -> bool {
        self.ir.flows.is_empty() || self.ir.flows.iter().any(|flow| !flow.workflow)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a pool or a version list leaves the data whole
    // (a push or a replace), so the lock is taken back rather than failing
    // every later request.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Entry {
    path: PathBuf,
    state: Mutex<EntryState>,
}

struct EntryState {
    current: Arc<Version>,
    by_hash: HashMap<String, Arc<Version>>,
    /// The file's modification time and length when last compiled.
    stamp: Option<(SystemTime, u64)>,
    /// Why the last edit was refused, until a good edit replaces it.
    reload_error: Option<String>,
}

/// The programs, by name.
pub(crate) struct Programs {
    entries: BTreeMap<String, Arc<Entry>>,
    settings: ProgramSettings,
    model_latency: Arc<super::metrics::Histogram>,
}

/// What `GET /v1/programs` shows of one program.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ProgramInfo {
    pub name: String,
    pub file: String,
    pub hash: String,
    pub flows: Vec<serde_json::Value>,
    pub reload_error: Option<String>,
}

impl Programs {
    /// Compiles every program of `files`. Any error stops the start: a
    /// server must not come up missing a program it was asked to serve.
    pub fn load(files: &[PathBuf], settings: ProgramSettings) -> Result<Programs, String> {
        let mut entries = BTreeMap::new();
        let model_latency = Arc::new(super::metrics::Histogram::default());
        let mut agents = Vec::new();
        for path in files {
            let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            let mut name = stem_name(&absolute);
            // The same program in both syntaxes (booking.flow, booking.yaml):
            // the second is named with its extension, as `flowc test`'s
            // files name it (`booking-yaml`).
            if entries.contains_key(&name) {
                let extension = absolute.extension().map(|ext| ext.to_string_lossy().into_owned()).unwrap_or_default();
                name = sanitize(&format!("{name}-{extension}"));
            }
            let stamp = stamp(&absolute);
            let version = compile(&name, &absolute, &settings, &model_latency)?;
            if let Some(agent) = version.ir.agent.name.clone() {
                agents.push((agent, name.clone()));
            }
            let version = Arc::new(version);
            let state = EntryState {
                by_hash: HashMap::from([(version.hash.clone(), Arc::clone(&version))]),
                current: version,
                stamp,
                reload_error: None,
            };
            let entry = Arc::new(Entry { path: absolute.clone(), state: Mutex::new(state) });
            if let Some(other) = entries.insert(name.clone(), entry) {
                return Err(format!(
                    "two programs are named `{name}`: {} and {}; serve one of them, or rename it",
                    other.path.display(),
                    absolute.display()
                ));
            }
        }
        // An agent name is a second name for its program when it is a valid
        // name and no file has it.
        for (agent, stem) in agents {
            let alias = sanitize(&agent);
            if alias == agent && !entries.contains_key(&alias) {
                let entry = entries.get(&stem).map(Arc::clone);
                if let Some(entry) = entry {
                    entries.insert(alias, entry);
                }
            }
        }
        Ok(Programs { entries, settings, model_latency })
    }

    /// The histogram the model calls of every program's turns are timed in.
    pub fn model_latency(&self) -> Arc<super::metrics::Histogram> {
        Arc::clone(&self.model_latency)
    }

    /// The clock every program runs on.
    pub fn clock(&self) -> &dyn crate::runtime::clock::Clock {
        self.settings.clock.as_ref()
    }

    /// The current version of `name`, compiled again first if its file
    /// changed since.
    pub fn current(&self, name: &str) -> Option<Arc<Version>> {
        let entry = self.entries.get(name)?;
        let mut state = lock(&entry.state);
        self.refresh(entry, &mut state);
        Some(Arc::clone(&state.current))
    }

    /// Whether the current version of `name`, as last compiled, only
    /// computes ([`Version::in_process`]); the file is not looked at.
    pub fn in_process(&self, name: &str) -> bool {
        self.entries.get(name).is_some_and(|entry| lock(&entry.state).current.in_process)
    }

    /// The version of `name` whose hash is `hash`, if this server has had it.
    pub fn version(&self, name: &str, hash: &str) -> Option<Arc<Version>> {
        let entry = self.entries.get(name)?;
        lock(&entry.state).by_hash.get(hash).map(Arc::clone)
    }

    pub fn info(&self) -> Vec<ProgramInfo> {
        self.entries
            .iter()
            .map(|(name, entry)| {
                let mut state = lock(&entry.state);
                self.refresh(entry, &mut state);
                let flows = state
                    .current
                    .ir
                    .flows
                    .iter()
                    .map(|flow| serde_json::json!({ "name": flow.name, "workflow": flow.workflow }))
                    .collect();
                ProgramInfo {
                    name: name.clone(),
                    file: entry.path.display().to_string(),
                    hash: state.current.hash.clone(),
                    flows,
                    reload_error: state.reload_error.clone(),
                }
            })
            .collect()
    }

    fn refresh(&self, entry: &Entry, state: &mut EntryState) {
        let now = stamp(&entry.path);
        if now.is_none() || now == state.stamp {
            return;
        }
        state.stamp = now;
        match compile(&state.current.name, &entry.path, &self.settings, &self.model_latency) {
            Ok(version) if version.hash == state.current.hash => {}
            Ok(version) => {
                let version = Arc::new(version);
                eprintln!("note: {} changed: now serving version {}", entry.path.display(), version.hash);
                state.by_hash.insert(version.hash.clone(), Arc::clone(&version));
                state.current = version;
                state.reload_error = None;
            }
            Err(reason) => {
                eprintln!("warning: {reason}; version {} keeps serving", state.current.hash);
                state.reload_error = Some(reason);
            }
        }
    }
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// A program's name from its file: the stem, with anything but letters,
/// digits, `-` and `_` made `-` (the name goes into ids).
fn stem_name(path: &Path) -> String {
    let stem = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
    sanitize(&stem)
}

fn sanitize(name: &str) -> String {
    let clean: String =
        name.chars()
            .take(64)
            .map(|character| {
                if character.is_ascii_alphanumeric() || character == '_' || character == '-' { character } else { '-' }
            })
            .collect();
    if clean.is_empty() { "program".to_string() } else { clean }
}

fn compile(
    name: &str,
    path: &Path,
    settings: &ProgramSettings,
    model_latency: &Arc<super::metrics::Histogram>,
) -> Result<Version, String> {
    let display = path.display();
    if !crate::source::SourceKind::is_program_path(path) {
        return Err(format!("{display} is not a program file: flowc reads .flow, .yaml and .yml files"));
    }
    let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {display}: {error}"))?;
    let compilation = crate::pipeline::compile(&SourceFile::new(display.to_string(), text));
    let errors = compilation.diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count();
    if errors > 0 {
        return Err(format!(
            "{display} has {errors} error{} (`flowc check {display}` shows them)",
            if errors == 1 { "" } else { "s" }
        ));
    }
    let config = crate::config::Config::load(Some(path)).map_err(|error| format!("{display}: {error}"))?;
    let provider =
        crate::llm::config::load(&config, &settings.provider_flags).map_err(|error| format!("{display}: {error}"))?;
    let ir = Arc::new(compilation.ir);
    let in_process = provider.provider == crate::llm::config::ProviderKind::Offline
        && provider.record.is_none()
        && ir.tools.iter().all(|tool| {
            settings.tools.handles(&tool.name)
                || matches!(tool.implementation, Some(crate::ir::ToolImpl::Builtin { .. }))
        });
    let base_dir = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok(Version {
        name: name.to_string(),
        path: path.to_path_buf(),
        hash: program_hash(&ir),
        ir,
        tool_env: ToolEnv { base_dir, clock: Arc::clone(&settings.clock), ids: Arc::clone(&settings.ids) },
        limits: settings.limits,
        tools: settings.tools.clone(),
        provider,
        pool: Mutex::new(Vec::new()),
        model_latency: Arc::clone(model_latency),
        in_process,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Answer;

    impl crate::runtime::tools::ToolHandler for Answer {
        fn call(
            &self,
            _tool: &crate::ir::Tool,
            _args: &serde_json::Map<String, serde_json::Value>,
            _env: &ToolEnv,
        ) -> Result<serde_json::Value, crate::runtime::tools::ToolError> {
            Ok(serde_json::json!({ "booking_id": "GH-1" }))
        }
    }

    #[test]
    fn a_version_only_computes_with_the_offline_model_and_its_tools_answered_in_process() {
        let (clock, ids) = crate::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), None).unwrap();
        let settings = |tools| ProgramSettings {
            provider_flags: Default::default(),
            limits: Default::default(),
            clock: Arc::clone(&clock),
            ids: Arc::clone(&ids),
            tools,
        };
        let files = [PathBuf::from("flows/booking.flow")];
        let exec = Programs::load(&files, settings(ToolRegistry::default())).unwrap();
        assert!(!exec.in_process("booking"), "its tool starts a process");
        let mut tools = ToolRegistry::default();
        tools.register("book_hotel", Arc::new(Answer));
        let handled = Programs::load(&files, settings(tools)).unwrap();
        assert!(handled.in_process("booking"), "its one tool is answered in process");
        assert!(!handled.in_process("nothing"), "no such program");
    }

    #[test]
    fn names_are_stems_made_safe_for_ids() {
        assert_eq!(stem_name(Path::new("flows/booking.flow")), "booking");
        assert_eq!(stem_name(Path::new("a b.c.yaml")), "a-b-c");
        assert_eq!(sanitize(""), "program");
    }
}
