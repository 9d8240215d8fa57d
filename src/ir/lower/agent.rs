//! The `agent` block: its name, identity, rules and continuation limits.

use super::*;

impl Lowerer {
    pub(super) fn agent(&mut self, agent: Option<&ast::Agent>) -> Agent {
        let Some(agent) = agent else {
            return Agent {
                name: None,
                identity: None,
                rules: Vec::new(),
                limits: Limits::default(),
                history: History::default(),
            };
        };
        let mut limits = Limits::default();
        if let Some(value) = &agent.limits.max_auto_steps
            && let Some(number) = self.positive(value, "max_auto_steps")
        {
            limits.max_auto_steps = number;
        }
        if let Some(value) = &agent.limits.max_tool_rounds
            && let Some(number) = self.positive(value, "max_tool_rounds")
        {
            limits.max_tool_rounds = number;
        }
        if let Some(value) = &agent.limits.max_turn_tokens {
            limits.max_turn_tokens = self.positive(value, "max_turn_tokens").map(u64::from);
        }
        if let Some(value) = &agent.limits.max_run_llm_calls {
            limits.max_run_llm_calls = self.positive(value, "max_run_llm_calls").map(u64::from);
        }
        if let Some(value) = &agent.limits.max_run_tokens {
            limits.max_run_tokens = self.positive(value, "max_run_tokens").map(u64::from);
        }
        if let Some(text) = &agent.limits.turn_timeout
            && let Some(ms) = self.duration(text)
        {
            limits.turn_timeout_ms = ms;
        }
        limits.message = agent.limits.message.as_ref().map(|message| self.template(message, &[]));
        let mut history = History { summarize: agent.history.summarize, ..History::default() };
        if let Some(value) = &agent.history.keep_last
            && let Some(number) = self.positive(value, "keep_last")
        {
            history.keep_last = number;
        }
        Agent {
            history,
            name: agent.name.as_ref().map(|name| name.value.clone()),
            identity: agent.identity.as_ref().map(|identity| self.template(identity, &[])),
            rules: agent.rules.iter().map(|rule| self.template(rule, &[])).collect(),
            limits,
        }
    }
}
