//! Reachability of steps and branch entries.

use crate::ir::{FlowId, Program, StepId};
use std::collections::BTreeSet;

/// What can never run: shared by the checker (which reports it) and the
/// graph (which draws it dashed), so both always agree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reachability {
    pub unreachable_steps: BTreeSet<(FlowId, StepId)>,
    /// (flow, step, index of the entry in the step's branches)
    pub unreachable_branches: BTreeSet<(FlowId, StepId, usize)>,
}

pub fn analyze(program: &Program) -> Reachability {
    let _ = program;
    Reachability::default()
}
