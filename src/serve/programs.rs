//! The programs a server answers for, by name: each file's stem (and its
//! `agent` name when that is free), compiled at start. A program edited on
//! disk is compiled again when it is next used; an edit with errors is
//! refused with the reason and the version before it keeps serving. Every
//! version a session may still run on is kept, so a session the edit
//! cannot adopt goes on with the version it started with.
//!
//! Every version compiled is recorded in the store with its text
//! ([`crate::store::versions`]); a session on a version this process never
//! compiled (another server's, or one from before a restart) runs on it
//! compiled again from the store. What the current version could not take,
//! and why, is kept per older version (bounded) for `GET /v1/programs`.
//!
//! Each version keeps a pool of ready runtimes: building one compiles the
//! offline reader's patterns, which a turn should not pay for.

mod dropped;

use crate::ir::Program;
use crate::llm::config::ProviderConfig;
use crate::runtime::engine::{Runtime, RuntimeOptions};
use crate::runtime::limits_config::OperatorLimits;
use crate::runtime::session::program_hash;
use crate::runtime::tools::{ToolEnv, ToolRegistry};
use crate::source::SourceFile;
use crate::store::Store;
use crate::store::versions::NewVersion;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// Runtimes kept ready per program version; more are built under load and
/// dropped when the pool is full.
const POOL_SIZE: usize = 256;

/// How many older versions still serving sessions `GET /v1/programs`
/// shows per program: the most recently used.
const OLDER_SHOWN: usize = 8;

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
    /// Whether it was compiled from the store's copy, not from its file.
    pub restored: bool,
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
    /// Older versions turns ran on since the current version came,
    /// because it could not take their sessions: the most recent last.
    older: Vec<OlderVersion>,
    /// Which sessions of the version before it the current version cannot
    /// take, from the two versions alone ([`dropped::dropped`]).
    dropped: Vec<String>,
}

/// An older version still serving sessions the current one cannot take.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct OlderVersion {
    pub hash: String,
    /// Why the current version does not adopt its sessions: the last
    /// reason found (sessions of one version may differ).
    pub reason: String,
    /// Turns this server ran on it since the current version came.
    pub turns: u64,
    /// Whether this server compiled it from the store's copy.
    pub from_store: bool,
}

/// The programs, by name.
pub(crate) struct Programs {
    entries: BTreeMap<String, Arc<Entry>>,
    settings: ProgramSettings,
    /// Where versions are recorded and found again.
    store: Option<Arc<dyn Store>>,
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
    /// Which sessions of the version before it the current one cannot
    /// take (they keep their version), said when it came.
    pub not_adopted: Vec<String>,
    /// Older versions still serving sessions the current one cannot take.
    pub older_versions: Vec<OlderVersion>,
}

impl Programs {
    /// Compiles every program of `files`, recording each version in
    /// `store`. Any error stops the start: a server must not come up
    /// missing a program it was asked to serve.
    pub fn load(
        files: &[PathBuf],
        settings: ProgramSettings,
        store: Option<Arc<dyn Store>>,
    ) -> Result<Programs, String> {
        let mut entries = BTreeMap::new();
        let model_latency = Arc::new(super::metrics::Histogram::default());
        let mut agents = Vec::new();
        for path in files {
            let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            let mut name = crate::store::versions::program_name(&absolute);
            // The same program in both syntaxes (booking.flow, booking.yaml):
            // the second is named with its extension, as `flowc test`'s
            // files name it (`booking-yaml`).
            if entries.contains_key(&name) {
                let extension = absolute.extension().map(|ext| ext.to_string_lossy().into_owned()).unwrap_or_default();
                name = crate::store::versions::safe_name(&format!("{name}-{extension}"));
            }
            let stamp = stamp(&absolute);
            let (version, text) = compile(&name, &absolute, &settings, &model_latency)?;
            record(store.as_deref(), &version, &text);
            if let Some(agent) = version.ir.agent.name.clone() {
                agents.push((agent, name.clone()));
            }
            let version = Arc::new(version);
            let state = EntryState {
                by_hash: HashMap::from([(version.hash.clone(), Arc::clone(&version))]),
                current: version,
                stamp,
                reload_error: None,
                older: Vec::new(),
                dropped: Vec::new(),
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
            let alias = crate::store::versions::safe_name(&agent);
            if alias == agent && !entries.contains_key(&alias) {
                let entry = entries.get(&stem).map(Arc::clone);
                if let Some(entry) = entry {
                    entries.insert(alias, entry);
                }
            }
        }
        Ok(Programs { entries, settings, store, model_latency })
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

    /// The version of `name` whose hash is `hash`: one this server has, or
    /// else the store's copy compiled again.
    pub fn version(&self, name: &str, hash: &str) -> Option<Arc<Version>> {
        self.version_or_why(name, hash).ok()
    }

    /// [`Programs::version`], or why there is none, said of the version
    /// ("is not in the store …").
    pub fn version_or_why(&self, name: &str, hash: &str) -> Result<Arc<Version>, String> {
        let entry =
            self.entries.get(name).ok_or_else(|| format!("belongs to `{name}`, which this server does not serve"))?;
        // Versions are recorded under the file's name; a session may have
        // been started under the program's agent name.
        let name = {
            let state = lock(&entry.state);
            if let Some(version) = state.by_hash.get(hash) {
                return Ok(Arc::clone(version));
            }
            state.current.name.clone()
        };
        let store = self.store.as_deref().ok_or_else(|| "is not on this server, which has no store".to_string())?;
        let stored = off_runtime(|| store.load_version(&name, hash))
            .and_then(|loaded| loaded.map_err(|error| error.to_string()))
            .map_err(|error| format!("cannot be read from the store: {error}"))?
            .ok_or_else(|| {
                "is not in the store: the session was last saved by a server that did not record its versions"
                    .to_string()
            })?;
        let path = restored_path(Path::new(&stored.path), &entry.path);
        let mut version = compile_text(&name, &path, &stored.source, &self.settings, &self.model_latency)
            .map_err(|_| "is in the store but its text does not compile with this flowc".to_string())?;
        if version.hash != hash {
            return Err(format!(
                "is in the store but its text compiles to version {} with this flowc: it was recorded by a flowc \
                 that compiled it differently",
                version.hash
            ));
        }
        version.restored = true;
        // Compiled outside the lock; a turn that restored it meanwhile wins.
        let mut state = lock(&entry.state);
        let kept = state.by_hash.entry(hash.to_string()).or_insert_with(|| Arc::new(version));
        Ok(Arc::clone(kept))
    }

    /// Notes that a turn of `name` runs on the older `version` because the
    /// current version (`current`) cannot take its session, for `reason`:
    /// said on stderr the first time since `current` came, shown by
    /// [`Programs::info`].
    pub fn note_older(&self, name: &str, version: &Version, current: &str, reason: &str) {
        let Some(entry) = self.entries.get(name) else {
            return;
        };
        let mut state = lock(&entry.state);
        if state.current.hash != current {
            // The current version changed meanwhile: what it takes is news.
            return;
        }
        let noted = match state.older.iter().position(|older| older.hash == version.hash) {
            Some(index) => state.older.remove(index),
            None => {
                eprintln!(
                    "note: {name}: version {} cannot take the sessions of version {}, which keeps serving them{}: {reason}",
                    current,
                    version.hash,
                    if version.restored { " (compiled from the store)" } else { "" }
                );
                OlderVersion {
                    hash: version.hash.clone(),
                    reason: String::new(),
                    turns: 0,
                    from_store: version.restored,
                }
            }
        };
        let older = OlderVersion { reason: reason.to_string(), turns: noted.turns.saturating_add(1), ..noted };
        state.older.push(older);
        let excess = state.older.len().saturating_sub(OLDER_SHOWN);
        state.older.drain(..excess);
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
                    not_adopted: state.dropped.clone(),
                    older_versions: state.older.iter().rev().cloned().collect(),
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
            Ok((version, _)) if version.hash == state.current.hash => {}
            Ok((version, text)) => {
                record(self.store.as_deref(), &version, &text);
                let version = Arc::new(version);
                eprintln!("note: {} changed: now serving version {}", entry.path.display(), version.hash);
                state.dropped = dropped::dropped(&state.current.ir, &version.ir);
                if !state.dropped.is_empty() {
                    eprintln!(
                        "note: version {} cannot take the sessions of version {} {}: they keep version {}",
                        version.hash,
                        state.current.hash,
                        state.dropped.join("; "),
                        state.current.hash
                    );
                }
                state.by_hash.insert(version.hash.clone(), Arc::clone(&version));
                state.current = version;
                state.reload_error = None;
                state.older.clear();
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

/// Records `version`, compiled from `text`, in the store. A failure is
/// said and the version serves on: only a process without it loses.
fn record(store: Option<&dyn Store>, version: &Version, text: &str) {
    let Some(store) = store else {
        return;
    };
    let path = version.path.display().to_string();
    let new = NewVersion { program: &version.name, hash: &version.hash, path: &path, source: text };
    let recorded =
        off_runtime(|| store.record_version(&new)).and_then(|recorded| recorded.map_err(|error| error.to_string()));
    if let Err(error) = recorded {
        eprintln!(
            "warning: cannot record version {} of {} in the store ({error}); a server without it cannot serve its \
             sessions once the program changes",
            version.hash, version.name
        );
    }
}

/// Where a version read from the store is compiled as if it lay: where it
/// was recorded, its folder holding the tools its paths name; or, when that
/// folder is not on this machine (a server elsewhere recorded it), under its
/// file name in the folder of the file this server serves.
fn restored_path(recorded: &Path, served: &Path) -> PathBuf {
    if recorded.parent().is_some_and(Path::is_dir) {
        return recorded.to_path_buf();
    }
    match (served.parent(), recorded.file_name()) {
        (Some(folder), Some(file)) => folder.join(file),
        _ => served.to_path_buf(),
    }
}

/// Runs a store call on a thread of its own. Programs are looked up from
/// async handlers too, and the PostgreSQL client blocks on a runtime of its
/// own, which a thread of the server's runtime cannot enter; a version is
/// recorded or read back rarely (a compile, a session on a version this
/// process never had), so a thread each time costs nothing that counts.
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| scope.spawn(work).join())
        .map_err(|_| "the store call stopped before it answered".to_string())
}

/// Compiles the program file at `path`, and gives its text with it.
fn compile(
    name: &str,
    path: &Path,
    settings: &ProgramSettings,
    model_latency: &Arc<super::metrics::Histogram>,
) -> Result<(Version, String), String> {
    let display = path.display();
    if !crate::source::SourceKind::is_program_path(path) {
        return Err(format!("{display} is not a program file: flowc reads .flow, .yaml and .yml files"));
    }
    let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {display}: {error}"))?;
    let version = compile_text(name, path, &text, settings, model_latency)?;
    Ok((version, text))
}

/// Compiles `text` as the program file at `path` (whose extension picks
/// the syntax, whose folder is where its tools' paths start).
fn compile_text(
    name: &str,
    path: &Path,
    text: &str,
    settings: &ProgramSettings,
    model_latency: &Arc<super::metrics::Histogram>,
) -> Result<Version, String> {
    let display = path.display();
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
        restored: false,
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
        let exec = Programs::load(&files, settings(ToolRegistry::default()), None).unwrap();
        assert!(!exec.in_process("booking"), "its tool starts a process");
        let mut tools = ToolRegistry::default();
        tools.register("book_hotel", Arc::new(Answer));
        let handled = Programs::load(&files, settings(tools), None).unwrap();
        assert!(handled.in_process("booking"), "its one tool is answered in process");
        assert!(!handled.in_process("nothing"), "no such program");
    }

    fn offline() -> ProgramSettings {
        let (clock, ids) = crate::runtime::clock::from_values(Some("2026-01-05T10:00:00Z"), None).unwrap();
        ProgramSettings {
            provider_flags: Default::default(),
            limits: Default::default(),
            clock,
            ids,
            tools: ToolRegistry::default(),
        }
    }

    /// A folder with `chat.flow` saying `greeting`, and a store beside it.
    fn chat(test: &str, greeting: &str) -> (PathBuf, Arc<dyn Store>) {
        let dir = std::env::temp_dir().join(format!("flowc-programs-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("chat.flow");
        std::fs::write(&file, program_text(greeting)).unwrap();
        let store: Arc<dyn Store> = Arc::new(crate::store::sqlite::SqliteStore::open(&dir.join("flowc.db")).unwrap());
        (file, store)
    }

    fn program_text(greeting: &str) -> String {
        format!("flow chat {{ step hello {{ say \"{greeting}\" }} }}\n")
    }

    #[test]
    fn a_version_another_process_compiled_is_compiled_again_from_the_store() {
        let (file, store) = chat("restore", "Hello");
        let first = Programs::load(std::slice::from_ref(&file), offline(), Some(Arc::clone(&store))).unwrap();
        let old = first.current("chat").unwrap();
        let recorded = store.load_version("chat", &old.hash).unwrap().unwrap();
        assert_eq!((recorded.source, recorded.path), (program_text("Hello"), file.display().to_string()));

        std::fs::write(&file, program_text("Hi there")).unwrap();
        let second = Programs::load(std::slice::from_ref(&file), offline(), Some(Arc::clone(&store))).unwrap();
        assert_ne!(second.current("chat").unwrap().hash, old.hash);
        let restored = second.version_or_why("chat", &old.hash).unwrap();
        assert_eq!((restored.hash.as_str(), restored.restored), (old.hash.as_str(), true));
        assert_eq!(restored.tool_env.base_dir, file.parent().unwrap());
        assert!(Arc::ptr_eq(&restored, &second.version_or_why("chat", &old.hash).unwrap()), "kept once compiled");

        let missing = second.version_or_why("chat", "0123456789abcdef").err().unwrap();
        assert!(missing.starts_with("is not in the store"), "{missing}");
        assert!(
            Programs::load(std::slice::from_ref(&file), offline(), None)
                .unwrap()
                .version_or_why("chat", &old.hash)
                .is_err()
        );
        // A text that no longer gives its hash (another flowc recorded it)
        // is refused, not run as something else.
        let text = program_text("Another");
        let wrong = NewVersion { program: "chat", hash: "fedcba9876543210", path: "/x/chat.flow", source: &text };
        store.record_version(&wrong).unwrap();
        let refused = second.version_or_why("chat", "fedcba9876543210").err().unwrap();
        assert!(refused.contains("compiles to version"), "{refused}");
        store.record_version(&NewVersion { hash: "0000000000000000", source: "flow a {}", ..wrong }).unwrap();
        let broken = second.version_or_why("chat", "0000000000000000").err().unwrap();
        assert_eq!(broken, "is in the store but its text does not compile with this flowc");
    }

    #[test]
    fn older_versions_serving_sessions_are_shown_bounded_and_forgotten_with_the_next_version() {
        let (file, store) = chat("older", "Hello");
        let programs = Programs::load(std::slice::from_ref(&file), offline(), Some(store)).unwrap();
        let current = programs.current("chat").unwrap().hash.clone();
        let settings = offline();
        let latency = programs.model_latency();
        let olders: Vec<Version> = (0..OLDER_SHOWN + 2)
            .map(|index| compile_text("chat", &file, &program_text(&format!("v{index}")), &settings, &latency).unwrap())
            .collect();
        for older in &olders {
            programs.note_older("chat", older, &current, "its step `chat.gone` is no longer in the program");
        }
        programs.note_older("chat", &olders[OLDER_SHOWN + 1], &current, "a later reason");
        programs.note_older("chat", &olders[0], "not-the-current-hash", "a stale note");
        let info = programs.info();
        let shown = &info[0].older_versions;
        assert_eq!(shown.len(), OLDER_SHOWN);
        assert_eq!((shown[0].hash.as_str(), shown[0].turns), (olders[OLDER_SHOWN + 1].hash.as_str(), 2));
        assert_eq!(shown[0].reason, "a later reason");
        assert!(shown.iter().all(|older| older.hash != olders[0].hash), "the least recent went first");

        std::fs::write(&file, program_text("Hi there, longer")).unwrap();
        assert!(programs.info()[0].older_versions.is_empty(), "a new version asks afresh");
    }

    #[test]
    fn a_version_from_another_machine_is_compiled_in_the_served_files_folder() {
        let here = std::env::temp_dir();
        let recorded = here.join("booking.flow");
        assert_eq!(restored_path(&recorded, Path::new("/srv/flows/booking.flow")), recorded);
        let elsewhere = Path::new("/no/such/folder/on/this/machine/booking.yaml");
        assert_eq!(
            restored_path(elsewhere, Path::new("/srv/flows/booking.flow")),
            Path::new("/srv/flows/booking.yaml")
        );
    }
}
