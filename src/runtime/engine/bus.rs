//! The directive bus: running actions and hooks, merging the emissions of
//! the pre-model and post-model buses, validating and applying writes, and
//! recording every directive.

use super::{Turn, TurnError};
use crate::ir::{FlowId, Program, StepId};
use crate::runtime::actions::{ActionOutput, ActionRunner, ActionSource, evaluate_directive};
use crate::runtime::directive::{Emission, Move, Source, describe, merge};
use crate::runtime::events::{DirectiveRecord, Event, StopReason};
use crate::runtime::validate::validate;
use serde_json::Value;

impl Turn<'_> {
    /// Evaluates a directive against the turn's data now; its warnings join
    /// the trace.
    pub(super) fn directive_emission(&mut self, directive: &crate::ir::Directive, source: Source) -> Emission {
        let mut warnings = Vec::new();
        let emission = evaluate_directive(directive, source, &self.scope(&[]), &mut warnings);
        for warning in warnings {
            self.warn(warning);
        }
        emission
    }

    pub(super) fn action_runner_output(
        &mut self,
        actions: &[crate::ir::Action],
        source: &ActionSource<'_>,
    ) -> Result<ActionOutput, TurnError> {
        let mut data = self.session.data.clone();
        let mut out = ActionOutput::default();
        let result = {
            let runner = ActionRunner {
                program: &self.runtime.program,
                tools: &self.runtime.tools,
                tool_env: &self.runtime.tool_env,
                steps: &[],
            };
            runner.run(actions, source, &mut data, &self.session.context, &mut Vec::new(), &mut out)
        };
        for event in std::mem::take(&mut out.tool_calls) {
            self.emit(event);
        }
        for warning in std::mem::take(&mut out.warnings) {
            self.warn(warning);
        }
        result?;
        self.session.data = data;
        Ok(out)
    }

    /// Runs a step's `do` (or a pre-model hook): writes commit together,
    /// says join the reply, emissions join the pre-model bus.
    pub(super) fn run_actions(
        &mut self,
        actions: &[crate::ir::Action],
        source: &ActionSource<'_>,
        post: bool,
    ) -> Result<(), TurnError> {
        if actions.is_empty() {
            return Ok(());
        }
        let out = self.action_runner_output(actions, source)?;
        self.says.extend(out.says);
        for emission in out.emissions {
            let directive = describe(&emission, &self.runtime.program);
            self.emit(Event::DirectiveEmitted { source: emission.source.to_string(), directive });
            if post {
                self.post_bus.push(emission);
            } else {
                self.pre_bus.push(emission);
            }
        }
        Ok(())
    }

    pub(super) fn run_hook(&mut self, actions: &[crate::ir::Action], path: &str) -> Result<(), TurnError> {
        let source = ActionSource { kind: Source::Hook, path, numbered: false };
        self.run_actions(actions, &source, false)
    }

    pub(super) fn run_post_hook(&mut self, actions: &[crate::ir::Action], path: &str) -> Result<(), TurnError> {
        let source = ActionSource { kind: Source::Hook, path, numbered: false };
        self.run_actions(actions, &source, true)
    }

    /// Merges the pre-model emissions not yet applied: their writes as one
    /// unit, and a winning position, which moves the cursor. Returns whether
    /// the cursor moved.
    pub(super) fn apply_pre_positions(&mut self) -> bool {
        let fresh: Vec<Emission> = self.pre_bus.get(self.pre_applied..).unwrap_or_default().to_vec();
        self.pre_applied = self.pre_bus.len();
        if fresh.is_empty() {
            return false;
        }
        // The merge's only warning (a reply dropped for an abort) is given
        // once, when the whole pre-model bus is merged before the reply.
        let merged = merge(&fresh);
        for (index, emission) in fresh.iter().enumerate() {
            let lost =
                emission.position.is_some() && merged.position.as_ref().is_some_and(|(_, winner)| *winner != index);
            self.record(emission, !lost);
        }
        self.apply_writes(&merged.set, &merged.set_context, "pre-model bus");
        match merged.position {
            Some((position, _)) => {
                self.cursor = self.position_cursor(position);
                true
            }
            None => false,
        }
    }

    /// Validates writes as one unit and applies them, or none of them.
    pub(super) fn apply_writes(&mut self, set: &[(String, Value)], set_context: &[(String, Value)], source: &str) {
        let program = self.program();
        let mut staged: Vec<(bool, String, Value)> = Vec::new();
        for (is_context, writes) in [(false, set), (true, set_context)] {
            for (name, value) in writes {
                let declared = if is_context {
                    program.context.iter().find(|key| key.name == *name)
                } else {
                    program.fields.iter().find(|field| field.name == *name)
                };
                let Some(declared) = declared else {
                    self.warn(format!("{source}: `{name}` is not declared; the writes were not applied"));
                    return;
                };
                match validate(value, &declared.ty) {
                    Ok(valid) => staged.push((is_context, name.clone(), valid)),
                    Err(reason) => {
                        self.warn(format!("{source}: `{name}` {reason}; the writes were not applied"));
                        return;
                    }
                }
            }
        }
        for (is_context, name, value) in staged {
            let target = if is_context { &mut self.session.context } else { &mut self.session.data };
            if value.is_null() {
                target.remove(&name);
            } else {
                target.insert(name, value);
            }
        }
    }

    pub(super) fn record(&mut self, emission: &Emission, applied: bool) {
        let directive = describe(emission, &self.runtime.program);
        if applied {
            self.emit(Event::DirectiveApplied { source: emission.source.to_string() });
        }
        self.records.push(DirectiveRecord { source: emission.source.to_string(), directive, applied });
    }

    /// Applies a post-model position: the session waits at the target for
    /// the next turn (entering a flow still runs its `on_enter`).
    pub(super) fn park(&mut self, position: Move) -> Result<(), TurnError> {
        let program = self.program();
        match position {
            Move::Goto { flow, data } => {
                self.start_run(flow);
                self.apply_writes(&data, &[], "goto");
                self.enter_parked(&program, flow, StepId(0))?;
            }
            Move::GotoStep { flow, step } => {
                if self.session.flow == Some(flow) {
                    self.session.step = Some(step);
                    self.session.asks = 0;
                } else {
                    self.enter_parked(&program, flow, step)?;
                }
            }
            Move::Complete { next } => {
                if let Some(flow) = self.session.flow.and_then(|flow| program.flow(flow)) {
                    self.emit(Event::FlowCompleted { flow: flow.name.clone() });
                }
                self.session.flow = None;
                self.session.step = None;
                if let Some(next) = next {
                    self.start_run(next);
                    self.enter_parked(&program, next, StepId(0))?;
                }
            }
            Move::Abort { reason } => {
                if let Some(reason) = reason {
                    self.says.push(reason);
                }
                self.session.flow = None;
                self.session.step = None;
                self.stop = Some(StopReason::Aborted);
            }
            Move::Reset => {
                if let Some(flow) = self.session.flow {
                    self.start_run(flow);
                    self.session.step = Some(StepId(0));
                    self.session.asks = 0;
                }
            }
        }
        Ok(())
    }

    pub(super) fn enter_parked(&mut self, program: &Program, flow_id: FlowId, step: StepId) -> Result<(), TurnError> {
        let Some(flow) = program.flow(flow_id) else {
            return Ok(());
        };
        self.emit(Event::FlowEntered { flow: flow.name.clone() });
        self.session.flow = Some(flow_id);
        self.session.step = Some(step);
        self.session.asks = 0;
        let path = format!("{}.on_enter", flow.name);
        self.run_post_hook(&flow.on_enter, &path)?;
        Ok(())
    }
}
