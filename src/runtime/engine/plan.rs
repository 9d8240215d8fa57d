//! What a turn asks the model, as one value ([`TurnPlan`]) worked out
//! from where the conversation stands before the understand call: the
//! fields the message may answer (with the confirmation rule), the open
//! signals, the AI conditions of the steps the turn can reach, and the
//! steps the turn is likely to stop at and ask (for the fused reply). The
//! understand call asks it, the relevance filter writes only what it
//! allows, and the post-phase signals follow its confirmation rule.

use super::conditions::{push_questions, reads_any};
use super::services::Services;
use super::state::TurnState;
use crate::expr::{ExprKind, Template, TemplatePart};
use crate::ir::successor::{self, Jump, Landing, entry_steps};
use crate::ir::{Behavior, FieldId, Flow, FlowId, Phase, Program, Step, StepId, TypeKind};
use crate::llm::{FlowChoice, PromptPrefix, Question, ReplyWriter, UnderstandRequest, Understanding};
use std::collections::BTreeSet;

/// What a turn asks the model.
pub(super) struct TurnPlan {
    /// The flow the conversation is in, and the step the message answers.
    active: Option<FlowId>,
    answering: Option<StepId>,
    /// What the program and the position alone say the call asks: the
    /// fields (`ask.fields`) and the field asked alone.
    pub(super) ask: StaticAsk,
    /// The open pre-phase signals, and the post-phase ones asked early.
    pub(super) pre_signals: Vec<usize>,
    pub(super) early_post: Vec<usize>,
    pub(super) conditions: Vec<Question>,
    /// The steps the turn may stop at and ask, in the order it reaches
    /// them, each with the fields it needs that are unset before the
    /// message: the turn stops at the first whose fields the message does
    /// not all give. Empty when where the turn stops cannot be told from
    /// the fields alone; then no fused reply is asked for.
    pub(super) likely: Vec<Likely>,
    /// The flow entered when the message routes to none and no flow is
    /// active.
    pub(super) fallback: Option<FlowId>,
}

/// A step the turn may stop at and ask.
pub(super) struct Likely {
    pub(super) flow: FlowId,
    pub(super) step: StepId,
    /// The fields it needs that are unset (or, for a confirmation entered
    /// anew, cleared) before the message.
    pub(super) missing: Vec<FieldId>,
}

/// The confirmations of a program: `bool` fields that some step collects.
/// Consent is never carried over: a confirmation is read only from the
/// message answering the step that asks for it, never ahead through
/// `requires`, entry steps or signal `extract`.
pub(super) struct Confirmations(BTreeSet<FieldId>);

impl Confirmations {
    pub(super) fn of(program: &Program) -> Confirmations {
        Confirmations(
            program
                .flows
                .iter()
                .flat_map(|flow| &flow.steps)
                .flat_map(|step| step.collect.iter().copied())
                .filter(|field| {
                    program.field(*field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool))
                })
                .collect(),
        )
    }

    /// Whether `field` may be read from the message: not a confirmation,
    /// or one the step the message answers collects (`None` after the
    /// reply, when the message answers no step any more).
    pub(super) fn admits(&self, field: FieldId, answering: Option<&Step>) -> bool {
        !self.0.contains(&field) || answering.is_some_and(|step| step.collect.contains(&field))
    }
}

impl TurnPlan {
    /// The plan of a turn about to ask the understand call: `candidates`
    /// are the flows whose guard holds, `routable` those of them the model
    /// may route to.
    pub(super) fn build(st: &TurnState, sv: &Services, candidates: &[FlowId], routable: &[FlowId]) -> TurnPlan {
        let program = sv.program;
        let active = st.session.flow;
        let mut plan = TurnPlan {
            active,
            answering: st.session.step.filter(|_| active.is_some()),
            ask: StaticAsk { fields: BTreeSet::new(), asked_alone: None, from: Vec::new() },
            pre_signals: open_signals(st, sv, &[Phase::Pre, Phase::Both]),
            early_post: Vec::new(),
            conditions: Vec::new(),
            likely: Vec::new(),
            fallback: None,
        };
        // Post-phase signals ask about the same message: asking them here
        // saves a model call; the answer is used after the reply (their
        // guard is checked again then, and one that opens only later is
        // asked in a call of its own).
        plan.early_post = open_signals(st, sv, &[Phase::Post])
            .into_iter()
            .filter(|signal| !plan.pre_signals.contains(signal))
            .collect();
        let asked_signals: Vec<usize> = plan.pre_signals.iter().chain(&plan.early_post).copied().collect();
        plan.ask = StaticAsk::at(program, active, plan.answering, candidates, routable, &asked_signals);
        let condition_flows: Vec<FlowId> = match active {
            Some(flow) => vec![flow],
            None => candidates.to_vec(),
        };
        plan.conditions = open_conditions(st, sv, &condition_flows, &plan.ask.from, &plan.ask.fields);
        match (active, plan.answering) {
            (Some(flow), answering) => plan.likely = likely_steps(st, sv, flow, answering),
            (None, _) => {
                plan.fallback = fallback_flow(program, candidates);
                let entered = routable.iter().copied().chain(plan.fallback);
                plan.likely = entered.flat_map(|flow| likely_steps(st, sv, flow, None)).collect();
            }
        }
        plan
    }

    /// The step the message answers.
    pub(super) fn answering_step<'p>(&self, program: &'p Program) -> Option<&'p Step> {
        program.flow(self.active?)?.step(self.answering?)
    }

    /// The fields of the step the message answers: those it collects and
    /// those it requires.
    fn step_fields(&self, program: &Program) -> BTreeSet<FieldId> {
        self.answering_step(program)
            .map(|step| step.collect.iter().chain(&step.requires).copied().collect())
            .unwrap_or_default()
    }

    /// The fields a flow may take from the message: its `requires` and
    /// `optional`, and, entered from no flow, those its entry collects.
    fn flow_fields(&self, program: &Program, flow: FlowId) -> BTreeSet<FieldId> {
        let Some(declared) = program.flow(flow) else {
            return BTreeSet::new();
        };
        let mut fields: BTreeSet<FieldId> = declared.requires.iter().chain(&declared.optional).copied().collect();
        if self.active.is_none() {
            for step in entry_steps(declared).into_iter().filter_map(|step| declared.step(step)) {
                fields.extend(step.collect.iter().copied());
            }
        }
        fields
    }

    /// The fields whose extracted values are written, as one unit: the
    /// answering step's, those of the flow the turn settles in, and the
    /// `extract` fields of matched signals.
    pub(super) fn relevant(
        &self,
        program: &Program,
        settled: Option<FlowId>,
        understanding: &Understanding,
    ) -> BTreeSet<FieldId> {
        let mut relevant = self.step_fields(program);
        if let Some(flow) = settled {
            relevant.extend(self.flow_fields(program, flow));
        }
        let matched: Vec<usize> = (0..program.signals.len())
            .filter(|signal| {
                program
                    .signals
                    .get(*signal)
                    .is_some_and(|declared| understanding.signals.get(&declared.name).is_some_and(|answer| answer.yes))
            })
            .collect();
        relevant.extend(signal_fields(program, &matched));
        relevant
    }
}

/// What a turn asks the model that follows from the program and where
/// the conversation stands alone, apart from what the session decides
/// (which guards hold, which signals are open, which AI conditions code
/// rules out): the turn's plan and `flowc check --costs` build their
/// understand requests on it.
pub(crate) struct StaticAsk {
    /// The fields the message may answer, the confirmation rule applied.
    pub(crate) fields: BTreeSet<FieldId>,
    /// The field the answering step collects alone (a bare answer is its).
    pub(crate) asked_alone: Option<FieldId>,
    /// Where the AI conditions the turn may reach are reached from: the
    /// step answered, or the entries of the flows the message may start,
    /// and where the asked pre-phase signals' positions land.
    pub(crate) from: Vec<(FlowId, Landing)>,
}

impl StaticAsk {
    /// At `answering` in `active` (a step only inside a flow), or in no
    /// flow; `candidates` are the flows the message may be in after it
    /// (their guards hold), `routable` those of them with a `when`, and
    /// `signals` the signals asked (their `extract` fields are asked too:
    /// no later call asks them again).
    pub(crate) fn at(
        program: &Program,
        active: Option<FlowId>,
        answering: Option<StepId>,
        candidates: &[FlowId],
        routable: &[FlowId],
        signals: &[usize],
    ) -> StaticAsk {
        let answering = answering.filter(|_| active.is_some());
        let step = active.zip(answering).and_then(|(flow, step)| program.flow(flow)?.step(step));
        // Fields: the answering step's, the active flow's, and when no
        // flow is active (or another may take over), the candidates'.
        let mut fields: BTreeSet<FieldId> =
            step.map(|step| step.collect.iter().chain(&step.requires).copied().collect()).unwrap_or_default();
        let extraction_flows: Vec<FlowId> = match active {
            Some(flow) => std::iter::once(flow).chain(routable.iter().copied()).collect(),
            None => candidates.to_vec(),
        };
        for flow in extraction_flows.iter().filter_map(|flow| program.flow(*flow)) {
            fields.extend(flow.requires.iter().chain(&flow.optional).copied());
            // Entered from no flow, its entry's fields too.
            if active.is_none() {
                for entry in entry_steps(flow).into_iter().filter_map(|entry| flow.step(entry)) {
                    fields.extend(entry.collect.iter().copied());
                }
            }
        }
        fields.extend(signal_fields(program, signals));
        let confirmations = Confirmations::of(program);
        fields.retain(|field| confirmations.admits(*field, step));
        let asked_alone = step.and_then(|step| match step.collect.as_slice() {
            [only] => Some(*only),
            _ => None,
        });
        let condition_flows: Vec<FlowId> = match active {
            Some(flow) => vec![flow],
            None => candidates.to_vec(),
        };
        let mut from: Vec<(FlowId, Landing)> = condition_flows
            .iter()
            .map(|flow| match answering {
                Some(step) if Some(*flow) == active => (*flow, Landing::Step(step)),
                _ => (*flow, Landing::Enter(*flow, StepId(0))),
            })
            .collect();
        // A pre-phase signal's position acts before the turn resolves: the
        // steps it lands on are reached this turn too.
        let pre = signals
            .iter()
            .filter_map(|signal| program.signals.get(*signal))
            .filter(|signal| matches!(signal.phase, Phase::Pre | Phase::Both));
        for signal in pre {
            let Some(jump) = signal.then.as_ref().and_then(|then| then.position.as_ref()).map(Jump::from) else {
                continue;
            };
            let landed = match active {
                Some(current) => Some((current, successor::landing(current, jump))),
                // From outside every flow only a move into a flow goes
                // anywhere.
                None => match successor::landing_outside(jump) {
                    Some(landing @ Landing::Enter(flow, _)) => Some((flow, landing)),
                    _ => None,
                },
            };
            from.extend(landed);
        }
        StaticAsk { fields, asked_alone, from }
    }

    /// The ask of the post-phase signals' own call, after the reply: the
    /// `extract` fields of `signals`, a confirmation never among them (the
    /// message answers no step any more), and no AI condition. The turn's
    /// post-signal stage and `flowc check --costs` build that request on
    /// it.
    pub(crate) fn after_reply(program: &Program, signals: &[usize]) -> StaticAsk {
        let confirmations = Confirmations::of(program);
        let mut fields = signal_fields(program, signals);
        fields.retain(|field| confirmations.admits(*field, None));
        StaticAsk { fields, asked_alone: None, from: Vec::new() }
    }

    /// The understand request's parts that follow from this ask: the flows
    /// offered (the routable ones but the active), the fields (in schema
    /// order) and the signals' questions; the rest is the caller's.
    pub(crate) fn request(
        &self,
        program: &Program,
        active: Option<FlowId>,
        routable: &[FlowId],
        signals: &[usize],
    ) -> UnderstandRequest {
        UnderstandRequest {
            active_flow: active.and_then(|flow| program.flow(flow)).map(|flow| flow.name.clone()),
            flows: routable
                .iter()
                .filter(|flow| Some(**flow) != active)
                .filter_map(|flow| program.flow(*flow).map(|declared| flow_choice(program, declared)))
                .collect(),
            fields: self
                .fields
                .iter()
                .filter_map(|field| program.field(*field).map(|declared| (field, declared)))
                .map(|(field, declared)| super::field_spec(declared, self.asked_alone == Some(*field)))
                .collect(),
            signals: signals
                .iter()
                .filter_map(|signal| program.signals.get(*signal))
                .map(|signal| Question { id: signal.name.clone(), when: signal.when.clone() })
                .collect(),
            ..UnderstandRequest::default()
        }
    }
}

/// The prompt prefix every understand call of this session shares.
pub(super) fn session_prefix(st: &TurnState, sv: &Services) -> PromptPrefix {
    let scope = st.scope(sv);
    let mut warnings = Vec::new();
    prompt_prefix(sv.program, sv.provider.fused_reply(), &mut |template| {
        crate::expr::eval::render(template, &scope, &mut warnings)
    })
}

/// The prompt prefix of every understand call of a session of `program`
/// ([`PromptPrefix`]): every flow a message may be routed to (a flow with
/// a `when`, guard aside: whether it is offered is the turn's), and, when
/// the session asks for fused replies, the assistant who writes them, its
/// templates rendered by `render`. Shared with `flowc check --costs`.
pub(crate) fn prompt_prefix(
    program: &Program,
    fused: bool,
    render: &mut dyn FnMut(&Template) -> String,
) -> PromptPrefix {
    let catalogue = program
        .flows
        .iter()
        .filter(|flow| !flow.workflow && !flow.when.is_empty())
        .map(|flow| flow_choice(program, flow))
        .collect();
    let writer = fused.then(|| ReplyWriter {
        identity: program.agent.identity.as_ref().map(&mut *render),
        rules: program.agent.rules.iter().map(&mut *render).collect(),
    });
    PromptPrefix { catalogue, writer }
}

/// A flow as the understand call describes it to the model.
pub(super) fn flow_choice(program: &Program, flow: &Flow) -> FlowChoice {
    let mut examples = Vec::new();
    for field in flow.requires.iter().chain(&flow.optional) {
        if let Some(declared) = program.field(*field) {
            examples.extend(declared.ty.examples.iter().cloned());
        }
    }
    FlowChoice { name: flow.name.clone(), title: flow.title.clone(), when: flow.when.clone(), examples }
}

/// The flow a message that routes nowhere enters when no flow is active:
/// the first `if`-only flow whose guard holds, else the default (the rule
/// of the understand stage's routing).
pub(super) fn fallback_flow(program: &Program, candidates: &[FlowId]) -> Option<FlowId> {
    candidates
        .iter()
        .copied()
        .find(|flow| program.flow(*flow).is_some_and(|declared| declared.when.is_empty() && !declared.guard.is_empty()))
        .or_else(|| program.default_flow.filter(|flow| candidates.contains(flow)))
}

/// The steps of `flow` the turn may stop at and ask, in the order it
/// reaches them: from `answering` (asked again while its fields are
/// missing), or from the flow's entry (a new run: its fresh fields are
/// cleared). The walk follows the successor rule while which step asks
/// depends only on which fields get filled, and stops at the first step
/// where it would not: an auto step, a step with tools, branches, `do`
/// actions, a `say` or a `wait`, a step passed over by an AI `when`, a
/// step without a prompt or one whose prompt computes from a field the
/// message may fill. Nothing is likely when the step the message answers
/// has a branch entry with a `when`, which may take the turn elsewhere.
fn likely_steps(st: &TurnState, sv: &Services, flow_id: FlowId, answering: Option<StepId>) -> Vec<Likely> {
    let program = sv.program;
    let Some(flow) = program.flow(flow_id) else {
        return Vec::new();
    };
    let cleared: BTreeSet<FieldId> = match answering {
        Some(_) => BTreeSet::new(),
        None => flow.fresh.iter().copied().collect(),
    };
    let unset = |field: &FieldId| {
        cleared.contains(field)
            || program
                .field(*field)
                .is_none_or(|declared| st.session.data.get(&declared.name).is_none_or(serde_json::Value::is_null))
    };
    let mut likely = Vec::new();
    successor::asking_chain(
        flow,
        answering,
        |step| passed_over_now(st, sv, step),
        |visited, step_id, step| {
            // A confirmation is asked anew on every visit: entered afresh,
            // a step starts without it.
            let entered = visited > 0 || answering.is_none();
            let confirmation = |field: &FieldId| {
                program.field(*field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool))
            };
            let mut seen = BTreeSet::new();
            let missing: Vec<FieldId> = step
                .collect
                .iter()
                .chain(&step.requires)
                .copied()
                .filter(|field| seen.insert(*field))
                .filter(|field| unset(field) || (entered && step.collect.contains(field) && confirmation(field)))
                .collect();
            if missing.is_empty() {
                return true;
            }
            let needed: BTreeSet<FieldId> = missing.iter().copied().collect();
            let predictable =
                step.prompt.as_ref().is_some_and(|prompt| prompt_is_predictable(prompt, &needed, &cleared));
            if predictable {
                likely.push(Likely { flow: flow_id, step: step_id, missing });
            }
            predictable
        },
    );
    // The message most likely answers the step that asked it: when that
    // step is the only one offered, where the turn goes once it is
    // answered cannot be told, and offering it would cost every answer
    // the prompt of a reply used only when the user did not answer.
    if answering.is_some() && likely.iter().all(|found| Some(found.step) == answering) {
        likely.clear();
    }
    likely
}

/// Whether a step reached in list order is passed over, judged on the data
/// before the message (its `when`s make the walk stop before this).
fn passed_over_now(st: &TurnState, sv: &Services, step: &Step) -> bool {
    let skipped = step.skip_if.as_ref().is_some_and(|skip_if| st.guard_passes(sv, std::slice::from_ref(skip_if)));
    skipped || !st.guard_passes(sv, &step.guard)
}

/// Whether a prompt's text is known but for the values of fields: each
/// interpolation is a field, or computes only from fields the message
/// cannot fill before the step asks.
fn prompt_is_predictable(prompt: &Template, missing: &BTreeSet<FieldId>, cleared: &BTreeSet<FieldId>) -> bool {
    prompt.parts.iter().all(|part| match part {
        TemplatePart::Text(_) => true,
        TemplatePart::Expr(expr) => {
            matches!(expr.kind, ExprKind::Field { .. })
                || (!reads_any(std::slice::from_ref(expr), missing) && !reads_any(std::slice::from_ref(expr), cleared))
        }
    })
}

/// The `extract` fields of these signals.
pub(super) fn signal_fields(program: &Program, signals: &[usize]) -> BTreeSet<FieldId> {
    signals
        .iter()
        .filter_map(|signal| program.signals.get(*signal))
        .flat_map(|signal| signal.extract.iter().copied())
        .collect()
}

/// Signals of these phases whose guard holds and whose behavior allows
/// another firing.
pub(super) fn open_signals(st: &TurnState, sv: &Services, phases: &[Phase]) -> Vec<usize> {
    let program = sv.program;
    let now = sv.tool_env.clock.now();
    program
        .signals
        .iter()
        .enumerate()
        .filter(|(_, signal)| phases.contains(&signal.phase) && !signal.when.is_empty())
        .filter(|(_, signal)| st.guard_passes(sv, &signal.guard))
        .filter(|(_, signal)| {
            let record = st.session.signals.get(&signal.name);
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

/// The AI conditions this turn may reach that code has not ruled out:
/// branch entry and step `when`s of the steps the successor rule says
/// the turn can reach ([`successor::reachable`]) from where the
/// conversation is in the active flow, or from the given flows'
/// entries, and from where the pre-phase signals' positions land, in flow
/// then list order. An entry whose code guard is
/// already false, and reads no field this turn may extract, cannot
/// match: its `when` is not asked.
fn open_conditions(
    st: &TurnState,
    sv: &Services,
    flows: &[FlowId],
    from: &[(FlowId, Landing)],
    extracting: &BTreeSet<FieldId>,
) -> Vec<Question> {
    let program = sv.program;
    let asks_any = |flow: &crate::ir::Flow| {
        flow.steps.iter().any(|step| !step.when.is_empty() || step.branches.iter().any(|entry| !entry.when.is_empty()))
    };
    // Most programs ask no AI condition: then where the turn may go need
    // not be worked out on every turn.
    if !program.flows.iter().any(asks_any) {
        return Vec::new();
    }
    let reached = successor::reachable(program, from);
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
                    && !st.guard_passes(sv, &entry.guard);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    fn program(source: &str) -> Program {
        let compilation = crate::pipeline::compile(&SourceFile::new("test.flow", source));
        assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
        compilation.ir
    }

    const ENTRY: &str = r#"
agent A {
  identity "A test."
}

schema {
  name: string "A name"
  n: int "A number"
  ok: bool "Whether it is fine"
}

flow f "F" {
  when "the user wants f"
  step greet {
    skip_if name is set
    prompt "Name?"
    collect name
  }
  step maybe {
    when "the user is in a hurry"
    prompt "A number?"
    collect n
  }
  step confirm {
    prompt "Fine?"
    collect ok
  }
  step after {
    say "done"
  }
}
"#;

    #[test]
    fn a_flows_entry_may_arrive_at_each_step_that_may_be_passed_over_and_the_first_that_cannot() {
        let program = program(ENTRY);
        let flow = program.flow(FlowId(0)).expect("flow f");
        assert_eq!(entry_steps(flow), [StepId(0), StepId(1), StepId(2)]);
    }

    #[test]
    fn a_confirmation_is_admitted_only_from_the_step_that_asks_it() {
        let program = program(ENTRY);
        let confirmations = Confirmations::of(&program);
        let flow = program.flow(FlowId(0)).expect("flow f");
        let ok = program.field_by_name("ok").expect("field ok");
        let n = program.field_by_name("n").expect("field n");
        assert!(confirmations.admits(n, None), "not a confirmation");
        assert!(!confirmations.admits(ok, None), "after the reply, or asked ahead");
        assert!(!confirmations.admits(ok, flow.step(StepId(0))), "another step asks");
        assert!(confirmations.admits(ok, flow.step(StepId(2))), "the step that collects it");
    }
}
