//! `flowc run` on an all-`auto` flow: the run is stored before its first
//! step, executed as `flowc resume` and `flowc worker` execute runs, and
//! reported as they report it.

use super::{RunArgs, RunError};
use crate::cli::Outcome;
use crate::cli::stored_run::{execute, holder_name, report};
use crate::config::Config;
use crate::ir::{FlowId, Program};
use crate::runtime::session::Data;
use crate::runtime::tools::ToolEnv;
use crate::runtime::workflow::RunLimits;
use crate::store::{Claim, Store, StoreError, StoredRun};
use crate::stored_run::claim_at;
use std::io::{IsTerminal, Write};

pub(super) fn run_workflow(
    args: &RunArgs,
    program: &Program,
    flow: FlowId,
    data: &serde_json::Map<String, serde_json::Value>,
    context: Data,
    tool_env: &ToolEnv,
    (limits, config): (RunLimits, &Config),
) -> Result<Outcome, RunError> {
    let grace = crate::cli::shutdown::grace(args.grace, "run", config).map_err(RunError::Usage)?;
    // The model its model steps ask, built before the run is stored: a
    // provider that cannot be built is a usage error, not a failed run.
    let flags = crate::llm::ProviderFlags { record: args.record.clone(), ..args.model.provider_flags() };
    let provider = crate::llm::config::load(config, &flags)
        .map_err(|error| error.to_string())
        .and_then(|provider| crate::llm::build_provider(&provider).map_err(|error| error.to_string()))
        .map_err(RunError::Usage)?;
    let model = crate::runtime::model_step::Model::new(provider);
    let (store, location) = match crate::cli::open_store(args.store.as_deref(), Some(&args.file)) {
        Ok(opened) => opened,
        Err(outcome) => return Ok(outcome),
    };
    let run = crate::runtime::workflow::start(program, tool_env, flow, data, context)
        .map_err(|error| RunError::Usage(error.to_string()))?;
    let file = std::fs::canonicalize(&args.file).unwrap_or_else(|_| args.file.clone());
    let claim = claim_at(&holder_name(), tool_env.clock.as_ref());
    let mut stored = StoredRun {
        run,
        program: file.to_string_lossy().into_owned(),
        program_hash: crate::runtime::session::program_hash(program),
        version: 1,
        due_at: None,
    };
    crate::cli::stored_run::record_program(store.as_ref(), &file, program);
    store_new(store.as_ref(), &mut stored, &claim, tool_env).map_err(|error| RunError::Usage(error.to_string()))?;
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    // SIGTERM or SIGINT from here on stops the run after the step in
    // flight, saved and released for `flowc resume` or a worker.
    crate::cli::shutdown::install(grace);
    execute(store.as_ref(), &mut stored, program, tool_env, &claim, (limits, Some(&model)), show_progress)
        .map_err(|error| RunError::Failed(error.to_string()))?;
    for warning in &stored.run.warnings {
        eprintln!("warning: {warning}");
    }
    let _ = std::io::stdout().flush();
    Ok(report(&stored.run, Some(program), args.json, &location))
}

/// Stores a run before its first step, claimed. Seeded ids (FLOWC_SEED)
/// repeat across processes: an id the store already has takes the next.
fn store_new(store: &dyn Store, stored: &mut StoredRun, claim: &Claim, tool_env: &ToolEnv) -> Result<(), StoreError> {
    let mut attempts = 0;
    loop {
        match store.save_run(stored, 0, Some(claim)) {
            Err(StoreError::RunConflict { .. }) if attempts < 100 => {
                attempts += 1;
                stored.run.run = tool_env.ids.next_id();
            }
            Ok(()) => {
                stored.run.touched.clear();
                return Ok(());
            }
            saved => return saved,
        }
    }
}
