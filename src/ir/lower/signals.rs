//! Signals: their guard, phase, behavior, extracted fields and target.

use super::*;

impl Lowerer {
    pub(super) fn signal(&mut self, signal: &ast::SignalDecl) -> Signal {
        let guard = signal.guard.iter().map(|expr| self.condition(expr, &[])).collect();
        let phase = match signal.phase.as_ref().map(|phase| (phase.value.as_str(), phase.span)) {
            None | Some(("pre", _)) => Phase::Pre,
            Some(("post", _)) => Phase::Post,
            Some(("both", _)) => Phase::Both,
            Some((other, span)) => {
                self.invalid_value(span, &format!("unknown phase `{other}`"), "a signal's phase is pre, post or both");
                Phase::Pre
            }
        };
        let behavior = match signal.behavior.as_ref().map(|behavior| (behavior.value.as_str(), behavior.span)) {
            None | Some(("always", _)) => Behavior::Always,
            Some(("once", _)) => Behavior::Once,
            Some(("cooldown", span)) => match &signal.cooldown {
                Some(text) => Behavior::Cooldown { cooldown_ms: self.duration(text).unwrap_or(0) },
                None => {
                    self.invalid_value(span, "`cooldown` needs a duration", "add `cooldown: 10m`");
                    Behavior::Always
                }
            },
            Some((other, span)) => {
                self.invalid_value(
                    span,
                    &format!("unknown behavior `{other}`"),
                    "a signal's behavior is always, once or cooldown",
                );
                Behavior::Always
            }
        };
        if let Some(cooldown) = &signal.cooldown
            && !matches!(behavior, Behavior::Cooldown { .. })
        {
            self.invalid_value(
                cooldown.span,
                "`cooldown` applies only with `behavior: cooldown`",
                "add `behavior: cooldown` or remove `cooldown`",
            );
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

    pub(super) fn invalid_value(&mut self, span: Span, message: &str, help: &str) {
        self.diagnostics.push(Diagnostic::new(Code::InvalidValue, message).at(span, "here").with_help(help));
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
        let directive = misspelt_directive(&name.value);
        let help = match did_you_mean(&name.value, self.flow_names.iter().map(String::as_str)) {
            Some(close) => format!("did you mean `{close}`?"),
            None if directive.is_some() => directive.unwrap_or_default(),
            None if self.step_owners.contains_key(&name.value) => {
                "a signal's target is a flow; for a step use `goto_step` with its flow (`goto_step F.S` in .flow, `goto_step: { flow: F, step: S }` in YAML)".to_string()
            }
            None => "a signal's target names a flow".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::new(Code::UnknownTarget, format!("`{}` names no flow", name.value))
                .at(name.span, "no flow has this id")
                .with_help(help),
        );
        None
    }
}
