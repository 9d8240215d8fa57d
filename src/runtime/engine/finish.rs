//! The last stage of a turn: the history, usage and version are updated,
//! the result is built, and the working copy replaces the caller's session.

use super::Turn;
use crate::message::{Message, Role};
use crate::runtime::events::{Event, StopReason, Tokens, TurnResult};
use crate::runtime::session::ordered_data;

impl Turn<'_> {
    pub(super) fn finish(&mut self) -> TurnResult {
        let stop = self.stop.unwrap_or(StopReason::NeedsInput);
        self.emit(Event::TurnFinished { stopped_reason: stop });
        self.session.history.push(Message { role: Role::User, text: self.message.clone() });
        if !self.reply.is_empty() || !self.says.is_empty() {
            let text = if self.reply.is_empty() { self.says.join("\n") } else { self.reply.clone() };
            self.reply = text.clone();
            self.session.history.push(Message { role: Role::Assistant, text });
        }
        self.session.usage.add(self.usage);
        if self.runtime.limits.max_session_time.is_some() {
            let spent = u64::try_from(self.session_time().as_millis()).unwrap_or(u64::MAX);
            self.session.turn_time_ms = Some(spent);
        }
        self.session.version += 1;
        let program = self.program();
        let flow = self.session.flow.and_then(|flow| program.flow(flow));
        let result = TurnResult {
            turn: self.session.turns,
            user: self.message.clone(),
            reply: self.reply.clone(),
            flow: flow.map(|flow| flow.name.clone()),
            step: flow
                .and_then(|flow| self.session.step.and_then(|step| flow.step(step)))
                .map(|step| step.name.clone()),
            executed_steps: self.executed.clone(),
            stopped_reason: stop,
            data: ordered_data(&program, &self.session.data),
            directives: std::mem::take(&mut self.records),
            llm_calls: self.usage.calls,
            tokens: Tokens::from(self.usage),
            resume_at: self.resume_at.clone(),
            events: std::mem::take(&mut self.events),
        };
        *self.original = std::mem::take(&mut self.session);
        result
    }
}
