//! Signals: which are open, firing one, and the post-phase signals asked
//! after the reply.

use super::{Stage, Turn, TurnError};
use super::{confirmation_fields, field_spec};
use crate::ir::{Behavior, FieldId, Phase, Program};
use crate::llm::{Message, Question, Role, UnderstandRequest, Understanding};
use crate::runtime::actions::evaluate_directive;
use crate::runtime::directive::{Emission, Source, describe, merge};
use crate::runtime::events::{DirectiveRecord, Event, Purpose, StopReason};
use std::collections::BTreeSet;

impl Turn<'_> {
    /// Signals of these phases whose guard holds and whose behavior allows
    /// another firing.
    pub(super) fn open_signals(&self, program: &Program, phases: &[Phase]) -> Vec<usize> {
        let now = self.runtime.tool_env.clock.now();
        program
            .signals
            .iter()
            .enumerate()
            .filter(|(_, signal)| phases.contains(&signal.phase) && !signal.when.is_empty())
            .filter(|(_, signal)| self.guard_passes(&signal.guard))
            .filter(|(_, signal)| {
                let record = self.session.signals.get(&signal.name);
                match signal.behavior {
                    Behavior::Always => true,
                    Behavior::Once => record.is_none_or(|record| record.fired == 0),
                    Behavior::Cooldown { cooldown_ms } => record
                        .and_then(|record| record.last_fired_at.as_deref())
                        .and_then(|last| chrono::DateTime::parse_from_rfc3339(last).ok())
                        .is_none_or(|last| {
                            let elapsed = now.signed_duration_since(last.with_timezone(&chrono::Utc));
                            elapsed.num_milliseconds() >= i64::try_from(cooldown_ms).unwrap_or(i64::MAX)
                        }),
                }
            })
            .map(|(index, _)| index)
            .collect()
    }

    pub(super) fn fire_signal(&mut self, name: &str) {
        let now = self.runtime.tool_env.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let record = self.session.signals.entry(name.to_string()).or_default();
        record.fired += 1;
        record.last_fired_at = Some(now);
    }

    pub(super) fn post_signals(&mut self) -> Result<(), TurnError> {
        self.stage = Stage::Finish;
        if matches!(self.stop, Some(StopReason::TokenLimit | StopReason::TimeLimit)) {
            return Ok(());
        }
        let program = self.program();
        let signals = self.open_signals(&program, &[Phase::Post, Phase::Both]);
        if signals.is_empty() {
            return Ok(());
        }
        let early_answers = self.understanding.signals.clone();
        let unanswered: Vec<usize> = signals
            .iter()
            .copied()
            .filter(|signal| {
                program.signals.get(*signal).is_some_and(|declared| !early_answers.contains_key(&declared.name))
            })
            .collect();
        let mut fields: BTreeSet<FieldId> = BTreeSet::new();
        for signal in &unanswered {
            if let Some(declared) = program.signals.get(*signal) {
                fields.extend(declared.extract.iter().copied());
            }
        }
        // The signals asked here opened during the turn: they see the reply
        // they are about (a yes still cites the user's words).
        let mut history = self.history_window();
        history.push(Message { role: Role::User, text: self.message.clone() });
        let reply = if self.reply.is_empty() { self.says.join("\n") } else { self.reply.clone() };
        if !reply.is_empty() {
            history.push(Message { role: Role::Assistant, text: reply });
        }
        let confirmations = confirmation_fields(&program);
        fields.retain(|field| !confirmations.contains(field));
        let request = UnderstandRequest {
            message: self.message.clone(),
            history,
            active_flow: self.session.flow.map(|flow| self.flow_name(flow)),
            flows: Vec::new(),
            fields: fields
                .iter()
                .filter_map(|field| program.field(*field))
                .map(|declared| field_spec(declared, false))
                .collect(),
            conditions: Vec::new(),
            signals: unanswered
                .iter()
                .filter_map(|signal| program.signals.get(*signal))
                .map(|signal| Question { id: signal.name.clone(), when: signal.when.clone() })
                .collect(),
            today: self.runtime.tool_env.clock.now().date_naive().to_string(),
        };
        let answer = if request.signals.is_empty() {
            Understanding::default()
        } else {
            let mut answer = self.understand_or_nothing(&request)?;
            self.count_call(Purpose::PostSignals, answer.usage);
            self.ground(&mut answer);
            answer
        };
        let mut armed = Vec::new();
        let mut extracting: BTreeSet<FieldId> = BTreeSet::new();
        for signal in signals.iter().filter_map(|signal| program.signals.get(*signal)) {
            let matched = answer.signals.get(&signal.name).or_else(|| early_answers.get(&signal.name));
            if !matched.is_some_and(|answer| answer.yes) {
                continue;
            }
            // The pre half of a `both` signal answered yes about this same
            // message and has fired already: firing again would arm the
            // same directive for the next turn.
            if signal.phase == Phase::Both && early_answers.get(&signal.name).is_some_and(|answer| answer.yes) {
                continue;
            }
            if answer.signals.contains_key(&signal.name) {
                extracting.extend(signal.extract.iter().copied());
            }
            self.emit(Event::SignalMatched { signal: signal.name.clone(), phase: "post" });
            self.fire_signal(&signal.name);
            if let Some(directive) = &signal.then {
                let mut warnings = Vec::new();
                let emission =
                    evaluate_directive(directive, Source::new("signal", &signal.name), &self.scope(&[]), &mut warnings);
                for warning in warnings {
                    self.warn(warning);
                }
                armed.push(emission);
            }
        }
        // Only the fields of the signals that matched are written.
        self.asked_fields = fields;
        self.understanding.fields = answer.fields;
        self.write_extraction(&program, &extracting);
        if armed.is_empty() {
            return Ok(());
        }
        let merged = merge(&armed);
        let mut pending = Emission::new(Source(
            armed.iter().map(|emission| emission.source.to_string()).collect::<Vec<_>>().join("+"),
        ));
        pending.position = merged.position.map(|(position, _)| position);
        pending.reply = merged.reply.map(|(reply, _)| reply);
        pending.set = merged.set;
        pending.set_context = merged.set_context;
        for emission in &armed {
            if emission.has_augmentation() {
                self.warn(format!(
                    "{}: halt, append_prompt and inject_tools of a post-phase signal are dropped",
                    emission.source
                ));
            }
            self.records.push(DirectiveRecord {
                source: emission.source.to_string(),
                directive: describe(emission, &program),
                applied: false,
            });
        }
        self.session.pending = Some(pending);
        Ok(())
    }
}
