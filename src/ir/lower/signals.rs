//! Signals: their guard, phase, behavior, extracted fields and target.

use super::*;
use crate::diag::nearest;

impl Lowerer {
    pub(super) fn signal(&mut self, signal: &ast::SignalDecl) -> Signal {
        let guard = signal.guard.iter().map(|expr| self.condition(expr, &[])).collect();
        let phase = match signal.phase.as_ref().map(|phase| (phase.value.as_str(), phase.span)) {
            None | Some(("pre", _)) => Phase::Pre,
            Some(("post", _)) => Phase::Post,
            Some(("both", _)) => Phase::Both,
            Some((other, span)) => {
                self.invalid_setting(span, SignalProblem::UnknownPhase(other.to_string()));
                Phase::Pre
            }
        };
        let behavior = match signal.behavior.as_ref().map(|behavior| (behavior.value.as_str(), behavior.span)) {
            None | Some(("always", _)) => Behavior::Always,
            Some(("once", _)) => Behavior::Once,
            Some(("cooldown", span)) => match &signal.cooldown {
                Some(text) => Behavior::Cooldown { cooldown_ms: self.duration(text).unwrap_or(0) },
                None => {
                    self.invalid_setting(span, SignalProblem::CooldownWithoutDuration);
                    Behavior::Always
                }
            },
            Some((other, span)) => {
                self.invalid_setting(span, SignalProblem::UnknownBehavior(other.to_string()));
                Behavior::Always
            }
        };
        if let Some(cooldown) = &signal.cooldown
            && !matches!(behavior, Behavior::Cooldown { .. })
        {
            self.invalid_setting(cooldown.span, SignalProblem::CooldownWithoutBehavior);
        }
        let extract = self.fields(&signal.extract);
        let then = signal.then.as_ref().and_then(|then| match then {
            ast::Then::Target(name) => self.signal_target(name),
            ast::Then::Directive(directive) => Some(self.directive(directive, None, &[])),
        });
        Signal {
            name: signal.name.value.clone(),
            when: signal.when.iter().map(|text| text.value.clone()).collect(),
            guard,
            phase,
            behavior,
            extract,
            then,
            span: signal.name.span,
        }
    }

    fn invalid_setting(&mut self, span: Span, problem: SignalProblem) {
        self.report(ValueError::InvalidSignalSetting { problem, span });
    }

    /// A signal's bare target: a flow (there is no current flow to find a
    /// step in when the signal is declared).
    pub(super) fn signal_target(&mut self, name: &ast::Name) -> Option<Directive> {
        if let Some(flow) = self.flows.get(&name.value) {
            return Some(goto_directive(*flow, name.span));
        }
        if name.value == "end" {
            return Some(complete_directive(name.span));
        }
        self.report(NameError::UnknownSignalTarget {
            name: name.value.clone(),
            span: name.span,
            close: nearest(&name.value, self.flow_names.iter().map(String::as_str)),
            misspelt_directive: misspelt_directive(&name.value),
            names_a_step: self.step_owners.contains_key(&name.value),
        });
        None
    }
}
