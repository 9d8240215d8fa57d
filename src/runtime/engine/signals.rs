//! Signals: which are open, firing one, and the post-phase signals asked
//! after the reply.

use super::{Stage, Turn, TurnError};
use super::{confirmation_fields, field_spec};
use crate::ir::{Behavior, FieldId, Phase, Program, Signal};
use crate::llm::{Question, UnderstandRequest, Understanding};
use crate::message::{Message, Role};
use crate::runtime::directive::{Emission, Move, Source, describe, merge};
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

    /// A signal matched, before the reply (`pre`) or after it (`post`): it
    /// is traced, its firing counts for its `behavior`, and its `then` is
    /// evaluated now, with the data as it is at this moment.
    fn fire_signal(&mut self, signal: &Signal, phase: &'static str) -> Option<Emission> {
        self.emit(Event::SignalMatched { signal: signal.name.clone(), phase });
        let now = self.runtime.tool_env.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let record = self.session.signals.entry(signal.name.clone()).or_default();
        record.fired += 1;
        record.last_fired_at = Some(now);
        let directive = signal.then.as_ref()?;
        Some(self.directive_emission(directive, Source::Signal(signal.name.clone())))
    }

    /// Fires the pre-phase signals of `signals` the understanding answered
    /// yes; their directives are merged by the caller before routing acts.
    pub(super) fn fire_pre_signals(&mut self, program: &Program, signals: &[usize]) -> Vec<Emission> {
        let mut emissions = Vec::new();
        for signal in signals.iter().filter_map(|signal| program.signals.get(*signal)) {
            if !self.understanding.signals.get(&signal.name).is_some_and(|answer| answer.yes) {
                continue;
            }
            emissions.extend(self.fire_signal(signal, "pre"));
        }
        emissions
    }

    /// Applies the directives of the pre-phase signals that fired, merged:
    /// their writes now, their reply and augmentation on the pre-model bus.
    /// Returns the winning position, which overrides routing.
    pub(super) fn apply_pre_signal_directives(&mut self, signal_emissions: &[Emission]) -> Option<Move> {
        let merged = merge(signal_emissions);
        for warning in &merged.warnings {
            self.warn(warning.clone());
        }
        for (index, emission) in signal_emissions.iter().enumerate() {
            let applied =
                merged.position.as_ref().is_none_or(|(_, winner)| *winner == index) || emission.position.is_none();
            self.record(emission, applied);
        }
        self.apply_writes(&merged.set, &merged.set_context, "signals");
        self.halt |= merged.halt;
        if merged.reply.is_some() || !merged.append_prompt.is_empty() || !merged.inject_tools.is_empty() {
            // Augmentation is layered on top of the turn: it joins the
            // pre-model bus (already recorded above).
            // A reply the merge dropped (an abort won) must not come back
            // when the whole bus is merged again before the model call.
            let keep_replies = merged.reply.is_some();
            self.pre_bus.extend(signal_emissions.iter().map(|emission| Emission {
                position: None,
                reply: emission.reply.clone().filter(|_| keep_replies),
                set: Vec::new(),
                set_context: Vec::new(),
                ..emission.clone()
            }));
            self.pre_applied = self.pre_bus.len();
        }
        merged.position.map(|(position, _)| position)
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
        // A signal the understand call asked is not asked again, even when
        // that answer was set aside: a model that could not answer the
        // message once is not asked about it in one more call.
        let unanswered: Vec<usize> = signals
            .iter()
            .copied()
            .filter(|signal| {
                program.signals.get(*signal).is_some_and(|declared| !self.asked_signals.contains(&declared.name))
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
            // After the steps acted: see `understand_request`.
            deadline: None,
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
            armed.extend(self.fire_signal(signal, "post"));
        }
        // Only the fields of the signals that matched are written.
        self.asked_fields = fields;
        self.understanding.fields = answer.fields;
        self.write_extraction(&program, &extracting);
        if !armed.is_empty() {
            self.arm_pending(&program, &armed);
        }
        Ok(())
    }

    /// Merges the directives of the post-phase signals that fired into the
    /// one the next turn applies first; they are recorded as not applied
    /// (yet), and their augmentation, which could only act before a model
    /// call, is dropped.
    fn arm_pending(&mut self, program: &Program, armed: &[Emission]) {
        let merged = merge(armed);
        let mut pending = Emission::new(Source::Armed(armed.iter().map(|emission| emission.source.clone()).collect()));
        pending.position = merged.position.map(|(position, _)| position);
        pending.reply = merged.reply.map(|(reply, _)| reply);
        pending.set = merged.set;
        pending.set_context = merged.set_context;
        for emission in armed {
            if emission.has_augmentation() {
                self.warn(format!(
                    "{}: halt, append_prompt and inject_tools of a post-phase signal are dropped",
                    emission.source
                ));
            }
            self.records.push(DirectiveRecord {
                source: emission.source.to_string(),
                directive: describe(emission, program),
                applied: false,
            });
        }
        self.session.pending = Some(pending);
    }
}
