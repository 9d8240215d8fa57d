//! Stages 2–3 of a turn: one model call understands the message (routing,
//! extraction, pre-phase signals, open AI conditions), code reads what it
//! can first, the proposals are grounded, and the turn is routed.

use super::{Cursor, Stage, Turn, TurnError};
use super::{confirmation_fields, field_spec};
use crate::expr::{Expr, ExprKind};
use crate::ir::successor::{self, Landing};
use crate::ir::{FieldId, Flow, FlowId, Phase, Program, StepId};
use crate::llm::{FlowChoice, ProviderError, Question, UnderstandRequest, Understanding, Usage};
use crate::runtime::events::{Event, Purpose, StopReason};
use crate::runtime::grounding;
use crate::runtime::validate::validate;
use serde_json::Value;
use std::collections::BTreeSet;

impl Turn<'_> {
    pub(super) fn understand(&mut self) -> Result<(), TurnError> {
        let program = self.program();
        let active = self.session.flow;
        let candidates: Vec<FlowId> = (0..program.flows.len())
            .map(FlowId::from_index)
            .filter(|flow| {
                program.flow(*flow).is_some_and(|declared| !declared.workflow && self.guard_passes(&declared.guard))
            })
            .collect();
        let routable: Vec<FlowId> = candidates
            .iter()
            .copied()
            .filter(|flow| program.flow(*flow).is_some_and(|declared| !declared.when.is_empty()))
            .collect();
        let (mut request, signals) = self.understand_request(&program, &candidates, &routable);
        // Code reads first: what the rules read beyond doubt is taken as
        // read, and the model is asked only for the rest.
        let read_by_code = self.runtime.reader.read(&request);
        request.fields.retain(|field| !read_by_code.contains_key(&field.name));
        if !request.is_empty() {
            self.asked_signals = request.signals.iter().map(|question| question.id.clone()).collect();
            let mut understanding = match self.understand_or_nothing(&request) {
                Ok(understanding) => understanding,
                // The turn's time ran out during the call. Nothing has acted
                // yet this turn, so it stops as the limit stops it, with
                // nothing understood, rather than failing.
                Err(TurnError::Provider(ProviderError::Timeout(reason))) => match self.limit_reached() {
                    Some(limit) => {
                        self.warn(format!("the understand call was cut off: {reason}"));
                        self.stop = Some(limit);
                        self.stage = Stage::Finish;
                        return Ok(());
                    }
                    None => return Err(ProviderError::Timeout(reason).into()),
                },
                Err(error) => return Err(error),
            };
            self.count_call(Purpose::Understand, understanding.usage);
            self.ground(&mut understanding);
            self.understanding = understanding;
            if self.over_token_budget() {
                self.stop = Some(StopReason::TokenLimit);
                self.stage = Stage::Finish;
                return Ok(());
            }
        }
        let certain: BTreeSet<String> = read_by_code.keys().cloned().collect();
        let asked = self.current_step(&program).and_then(|step| match step.collect.as_slice() {
            [only] => program.field(*only).map(|declared| declared.name.clone()),
            _ => None,
        });
        for (name, proposal) in read_by_code {
            let evidence = proposal.evidence.clone().unwrap_or_default();
            self.emit(Event::ReadByCode { field: name.clone(), value: proposal.value.clone(), evidence });
            self.understanding.fields.insert(name, proposal);
        }
        for event in
            grounding::one_field_per_span(&mut self.understanding.fields, &certain, asked.as_deref(), &self.message)
        {
            self.emit(event);
        }
        self.ground_consent(&program);
        let route = self.choose_route(&program, &candidates, &routable);

        // Pre-phase signals (step 3): they run before routing takes effect.
        let signal_emissions = self.fire_pre_signals(&program, &signals);
        let relevant = self.relevant_fields(&program, route.map(|(flow, _)| flow).or(active));
        self.write_extraction(&program, &relevant);
        let signal_position = self.apply_pre_signal_directives(&signal_emissions);

        if let Some(position) = signal_position {
            self.cursor = self.position_cursor(position);
        } else if let Some((flow, reason)) = route {
            if active.is_some() {
                self.emit(Event::FlowLeft {
                    flow: self.flow_name(active.unwrap_or(flow)),
                    reason: format!("routed to `{}`", self.flow_name(flow)),
                });
            }
            self.emit(Event::Routed { flow: self.flow_name(flow), reason });
            self.start_run(flow);
            self.cursor = Cursor::EnterFlow(flow, StepId(0));
        } else {
            self.cursor = self.current_cursor();
        }
        self.stage = Stage::Resolve;
        Ok(())
    }

    /// What the understand call asks: routing among the routable flows, the
    /// fields this message may answer, the open AI conditions and the open
    /// signals (pre-phase, and post-phase ones asked early). Returns the
    /// request and the pre-phase signals it asks about.
    fn understand_request(
        &mut self,
        program: &Program,
        candidates: &[FlowId],
        routable: &[FlowId],
    ) -> (UnderstandRequest, Vec<usize>) {
        let active = self.session.flow;
        // Fields: the current step's, the active flow's, and when no flow is
        // active (or another may take over), the candidates'.
        let mut fields: BTreeSet<FieldId> = BTreeSet::new();
        let current_step = self.current_step(program);
        if let Some(step) = current_step {
            fields.extend(step.collect.iter().chain(&step.requires).copied());
        }
        let extraction_flows: Vec<FlowId> = match active {
            Some(flow) => std::iter::once(flow).chain(routable.iter().copied()).collect(),
            None => candidates.to_vec(),
        };
        for flow in &extraction_flows {
            if let Some(declared) = program.flow(*flow) {
                fields.extend(declared.requires.iter().chain(&declared.optional).copied());
                if active.is_none()
                    && let Some(entry) = declared.steps.first()
                {
                    fields.extend(entry.collect.iter().copied());
                }
            }
        }
        let signals: Vec<usize> = self.open_signals(program, &[Phase::Pre, Phase::Both]);
        // Post-phase signals ask about the same message: asking them here
        // saves a model call; the answer is used after the reply (their
        // guard is checked again then, and one that opens only later is
        // asked in a call of its own).
        let early_post: Vec<usize> =
            self.open_signals(program, &[Phase::Post]).into_iter().filter(|signal| !signals.contains(signal)).collect();
        // Early post-phase answers need their `extract` fields asked too:
        // no later call asks them again.
        for signal in signals.iter().chain(&early_post) {
            if let Some(declared) = program.signals.get(*signal) {
                fields.extend(declared.extract.iter().copied());
            }
        }
        // Consent is never carried over: a confirmation (a `bool` some step
        // collects) is read only from the message answering the step that
        // asks for it, never ahead through `requires`, entry steps or
        // signal `extract`.
        let confirmations = confirmation_fields(program);
        fields.retain(|field| {
            !confirmations.contains(field) || current_step.is_some_and(|step| step.collect.contains(field))
        });
        let asked_alone: Option<FieldId> = current_step.and_then(|step| match step.collect.as_slice() {
            [only] => Some(*only),
            _ => None,
        });

        let condition_flows: Vec<FlowId> = match active {
            Some(flow) => vec![flow],
            None => candidates.to_vec(),
        };
        let conditions = self.open_conditions(program, &condition_flows, &fields);

        let request = UnderstandRequest {
            message: self.message.clone(),
            history: self.history_window(),
            active_flow: active.map(|flow| self.flow_name(flow)),
            flows: routable
                .iter()
                .filter(|flow| Some(**flow) != active)
                .filter_map(|flow| program.flow(*flow).map(|declared| flow_choice(program, declared)))
                .collect(),
            fields: fields
                .iter()
                .filter_map(|field| program.field(*field).map(|declared| (field, declared)))
                .map(|(field, declared)| field_spec(declared, asked_alone == Some(*field)))
                .collect(),
            conditions,
            signals: signals
                .iter()
                .chain(&early_post)
                .filter_map(|signal| program.signals.get(*signal))
                .map(|signal| Question { id: signal.name.clone(), when: signal.when.clone() })
                .collect(),
            today: self.runtime.tool_env.clock.now().date_naive().to_string(),
            // Only this call is cut off at the turn's end: it comes before
            // any step acts. A later call cut off would fail a turn whose
            // steps already ran, and the next message would run them again.
            deadline: self.deadline(),
        };
        self.asked_fields = fields;
        (request, signals)
    }

    /// The routing decision: the flow the turn moves to and why (`when`,
    /// `if` or `default`), or `None` to stay where the conversation is.
    fn choose_route(
        &mut self,
        program: &Program,
        candidates: &[FlowId],
        routable: &[FlowId],
    ) -> Option<(FlowId, &'static str)> {
        let active = self.session.flow;
        let current_step = self.current_step(program);
        let understood_flow = self
            .understanding
            .flow
            .clone()
            .and_then(|name| program.flow_by_name(&name))
            .filter(|flow| routable.contains(flow));
        if let Some(name) = self.understanding.flow.clone()
            && understood_flow.is_none()
        {
            self.warn(format!("the model routed to `{name}`, which is not a candidate; ignored"));
        }
        let answered_current = current_step.is_some_and(|step| {
            step.collect.iter().any(|field| {
                program.field(*field).is_some_and(|declared| self.understanding.fields.contains_key(&declared.name))
            })
        });
        match (active, understood_flow) {
            (Some(active), Some(flow)) if flow != active && !answered_current => Some((flow, "when")),
            (Some(_), _) => None,
            (None, Some(flow)) => Some((flow, "when")),
            (None, None) => candidates
                .iter()
                .copied()
                .find(|flow| {
                    program.flow(*flow).is_some_and(|declared| declared.when.is_empty() && !declared.guard.is_empty())
                })
                .map(|flow| (flow, "if"))
                .or_else(|| {
                    program.default_flow.filter(|flow| candidates.contains(flow)).map(|flow| (flow, "default"))
                }),
        }
    }

    /// The fields whose extracted values are written, as one unit: the
    /// current step's, those of the flow the turn settles in, and the
    /// `extract` fields of matched signals.
    fn relevant_fields(&self, program: &Program, settled_flow: Option<FlowId>) -> BTreeSet<FieldId> {
        let mut relevant: BTreeSet<FieldId> = BTreeSet::new();
        if let Some(step) = self.current_step(program) {
            relevant.extend(step.collect.iter().chain(&step.requires).copied());
        }
        if let Some(flow) = settled_flow.and_then(|flow| program.flow(flow)) {
            relevant.extend(flow.requires.iter().chain(&flow.optional).copied());
            if self.session.flow.is_none()
                && let Some(entry) = flow.steps.first()
            {
                relevant.extend(entry.collect.iter().copied());
            }
        }
        for signal in &program.signals {
            if self.understanding.signals.get(&signal.name).is_some_and(|answer| answer.yes) {
                relevant.extend(signal.extract.iter().copied());
            }
        }
        relevant
    }

    /// Asks the model to understand; an answer that is still invalid after
    /// the provider's repair proposes nothing code could check, so the turn
    /// goes on as if the model had understood nothing: the step asks again
    /// instead of the turn failing. A weak model that rambles past its
    /// token limit then costs the user a question, not the conversation.
    /// Every other failure (network, authentication, cancellation) still
    /// fails the turn and leaves the session as it was.
    pub(super) fn understand_or_nothing(&mut self, request: &UnderstandRequest) -> Result<Understanding, TurnError> {
        match self.runtime.provider.understand(request) {
            Ok(understanding) => Ok(understanding),
            Err(ProviderError::InvalidOutput(reason)) => {
                self.warn(format!("the model's answer was unusable and was set aside: {reason}"));
                Ok(Understanding { usage: Usage { calls: 1, ..Usage::default() }, ..Understanding::default() })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The AI conditions this turn may reach that code has not ruled out:
    /// branch entry and step `when`s of the steps the successor rule says
    /// the turn can reach ([`successor::reachable`]) from where the
    /// conversation is in the active flow, or from the given flows'
    /// entries, in flow then list order. An entry whose code guard is
    /// already false, and reads no field this turn may extract, cannot
    /// match: its `when` is not asked.
    pub(super) fn open_conditions(
        &self,
        program: &Program,
        flows: &[FlowId],
        extracting: &BTreeSet<FieldId>,
    ) -> Vec<Question> {
        let from: Vec<(FlowId, Landing)> = flows
            .iter()
            .map(|flow| match self.session.step {
                Some(step) if Some(*flow) == self.session.flow => (*flow, Landing::Step(step)),
                _ => (*flow, Landing::Enter(*flow, StepId(0))),
            })
            .collect();
        let reached = successor::reachable(program, &from);
        // The flows asked about first, then any other the turn may enter.
        let mut order: Vec<FlowId> = flows.to_vec();
        for (flow, _) in &reached {
            if !order.contains(flow) {
                order.push(*flow);
            }
        }
        let mut questions = Vec::new();
        for flow_id in order {
            let Some(flow) = program.flow(flow_id) else {
                continue;
            };
            for (index, step) in flow.steps.iter().enumerate() {
                if !reached.contains(&(flow_id, StepId::from_index(index))) {
                    continue;
                }
                for (index, entry) in step.branches.iter().enumerate() {
                    if entry.when.is_empty() {
                        continue;
                    }
                    let ruled_out = !entry.guard.is_empty()
                        && !reads_any(&entry.guard, extracting)
                        && !self.guard_passes(&entry.guard);
                    if ruled_out {
                        continue;
                    }
                    let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
                    push_questions(&mut questions, &base, &entry.when);
                }
                if !step.when.is_empty() {
                    let base = format!("{}.{}", flow.name, step.name);
                    push_questions(&mut questions, &base, &step.when);
                }
            }
        }
        questions
    }

    /// Writes the extracted values of `relevant` fields, all or none.
    pub(super) fn write_extraction(&mut self, program: &Program, relevant: &BTreeSet<FieldId>) {
        let mut staged: Vec<(String, Value)> = Vec::new();
        let mut rejected = false;
        let extracted = std::mem::take(&mut self.understanding.fields);
        for (name, proposal) in &extracted {
            let value = &proposal.value;
            if value.is_null() {
                continue;
            }
            let Some(field_id) = program.field_by_name(name) else {
                self.warn(format!("the model extracted `{name}`, which is not a field; ignored"));
                continue;
            };
            if !self.asked_fields.contains(&field_id) || !relevant.contains(&field_id) {
                continue;
            }
            let Some(field) = program.field(field_id) else {
                continue;
            };
            match validate(value, &field.ty) {
                Ok(valid) => staged.push((name.clone(), valid)),
                Err(reason) => {
                    rejected = true;
                    self.emit(Event::ExtractionRejected { field: name.clone(), value: value.clone(), reason });
                }
            }
        }
        self.understanding.fields = extracted;
        if rejected {
            self.warn("the extracted values were not written: one of them is invalid");
            return;
        }
        for (name, value) in staged {
            self.emit(Event::Extracted { field: name.clone(), value: value.clone() });
            self.extracted_this_turn.insert(name.clone());
            self.session.data.insert(name, value);
        }
    }

    /// Holds the answers to the confirmations the asking step collects to
    /// the consent rule (`grounding::ground_consent`).
    fn ground_consent(&mut self, program: &Program) {
        let confirmations: Vec<String> = self
            .current_step(program)
            .map(|step| {
                step.collect
                    .iter()
                    .filter_map(|field| program.field(*field))
                    .filter(|declared| matches!(declared.ty.kind, crate::ir::TypeKind::Bool))
                    .map(|declared| declared.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        // What the question showed: its values and the names of their
        // fields, which a yes may repeat without adding to it.
        let shown: Vec<String> = self
            .session
            .offered
            .iter()
            .flat_map(|offered| &offered.values)
            .flat_map(|(name, value)| {
                let value = match value {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                [name.replace('_', " "), value]
            })
            .collect();
        let (events, doubt) =
            grounding::ground_consent(&confirmations, &mut self.understanding.fields, &self.message, &shown);
        for event in events {
            self.emit(event);
        }
        self.consent_doubt = doubt;
    }

    /// Checks the model's proposals against the user's message
    /// (`grounding`): what the message does not back is dropped and traced.
    pub(super) fn ground(&mut self, understanding: &mut Understanding) {
        let program = self.program();
        let today = self.runtime.tool_env.clock.now().date_naive();
        for event in grounding::ground(&program, understanding, &self.message, Some(today)) {
            self.emit(event);
        }
    }
}

pub(super) fn flow_choice(program: &Program, flow: &Flow) -> FlowChoice {
    let mut examples = Vec::new();
    for field in flow.requires.iter().chain(&flow.optional) {
        if let Some(declared) = program.field(*field) {
            examples.extend(declared.ty.examples.iter().cloned());
        }
    }
    FlowChoice { name: flow.name.clone(), title: flow.title.clone(), when: flow.when.clone(), examples }
}

pub(super) fn question_id(base: &str, count: usize, index: usize) -> String {
    if count == 1 { base.to_string() } else { format!("{base}.{}", index + 1) }
}

pub(super) fn push_questions(questions: &mut Vec<Question>, base: &str, whens: &[String]) {
    for (index, when) in whens.iter().enumerate() {
        questions.push(Question { id: question_id(base, whens.len(), index), when: vec![when.clone()] });
    }
}

/// Whether any of the expressions reads one of the fields.
pub(super) fn reads_any(exprs: &[Expr], fields: &BTreeSet<FieldId>) -> bool {
    let mut found = false;
    for expr in exprs {
        expr.walk(&mut |node| {
            if let ExprKind::Field { field } = node.kind
                && fields.contains(&field)
            {
                found = true;
            }
        });
    }
    found
}
