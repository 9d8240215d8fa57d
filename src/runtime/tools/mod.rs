//! Tools: the trait they plug into, and the three kinds of LANGUAGE.md
//! section 6 (builtin, exec, http).

use crate::ir::Tool;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// What a tool call may use besides its arguments.
#[derive(Clone)]
pub struct ToolEnv {
    /// The program's directory: exec tools run there.
    pub base_dir: PathBuf,
    pub clock: Arc<dyn crate::runtime::clock::Clock>,
    pub ids: Arc<dyn crate::runtime::clock::IdSource>,
}

/// Why a tool call failed; the message keeps what the user needs (stderr,
/// HTTP status and body excerpt).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("`{tool}` timed out after {ms} ms")]
    Timeout { tool: String, ms: u64 },
    #[error("`{tool}` failed: {message}")]
    Failed { tool: String, message: String },
    #[error("`{tool}` returned an invalid result: {message}")]
    InvalidResult { tool: String, message: String },
}

/// A tool implementation. The runtime validates arguments before and
/// results after the call.
pub trait ToolHandler: Send + Sync {
    fn call(&self, tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError>;
}

/// The tools a run uses: the program's own (by kind) unless a handler is
/// registered for the tool's name (an embedding program, or a test double).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    overrides: std::collections::HashMap<String, Arc<dyn ToolHandler>>,
}

impl ToolRegistry {
    pub fn register(&mut self, name: impl Into<String>, handler: Arc<dyn ToolHandler>) {
        self.overrides.insert(name.into(), handler);
    }

    /// Calls a tool and checks its result against `returns`: an object
    /// holding every declared field with a valid value (extra keys are
    /// kept; a `directive` key is left for the runtime).
    pub fn call(&self, tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError> {
        let _ = (tool, args, env);
        todo!("tool dispatch")
    }
}
