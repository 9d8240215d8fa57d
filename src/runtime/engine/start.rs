//! Stage 1 of a turn: a directive armed by the last turn's post-phase
//! signals is applied before anything else, and understanding is skipped.

use super::{Cursor, Stage, Turn, TurnError};
use crate::ir::StepId;
use crate::runtime::directive::{Emission, Source};
use crate::runtime::events::Event;

impl Turn<'_> {
    pub(super) fn start(&mut self) -> Result<(), TurnError> {
        self.session.turns += 1;
        let turn = self.session.turns;
        let message = self.message.clone();
        self.emit(Event::TurnStarted { turn, message });
        // A session whose budget is spent still counts the turn it refuses,
        // and keeps a pending directive for when it may go on.
        if let Some(reason) = self.limit_reached() {
            self.stop = Some(reason);
            self.stage = Stage::Finish;
            return Ok(());
        }
        if let Some(pending) = self.session.pending.take() {
            self.emit(Event::PendingApplied { source: pending.source.to_string() });
            let mut pending = pending;
            pending.source = Source::Pending;
            self.record(&pending, true);
            self.apply_writes(&pending.set, &pending.set_context, &pending.source.to_string());
            self.halt |= pending.halt;
            if let Some(reply) = pending.reply.clone() {
                self.post_bus.push(Emission { reply: Some(reply), ..Emission::new(pending.source.clone()) });
            }
            self.cursor = match pending.position.clone() {
                Some(position) => self.position_cursor(position),
                None => self.current_cursor(),
            };
            self.stage = Stage::Resolve;
        } else {
            self.stage = Stage::Understand;
        }
        Ok(())
    }

    /// Where the conversation stands without routing.
    pub(super) fn current_cursor(&self) -> Cursor {
        match (self.session.flow, self.session.step) {
            (Some(flow), Some(step)) => Cursor::Evaluate { flow, step, fresh: false },
            (Some(flow), None) => Cursor::Enter(flow, StepId(0)),
            _ => Cursor::Idle,
        }
    }
}
