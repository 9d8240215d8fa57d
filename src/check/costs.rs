//! What a turn can cost, from the program alone: the one cost model behind
//! `flowc check --costs` and the `turn_token_budget` warning.
//!
//! A row is a place a turn can start: a step that asks (the user's message
//! answers it), or a flow entered from no flow (the message starts it).
//! For each, the model calls the turn can make, best and worst case, as
//! the runtime decides them (`runtime/engine`: `plan.rs`, `understand.rs`,
//! `reply.rs`, `tool_loop.rs`, `signals.rs`), and an estimate of each
//! call's prompt tokens. The rules, each mirroring the runtime's:
//!
//! - **understand**: asked when the turn's request is not empty after code
//!   read what it could (fields, routable flows, AI conditions of the steps
//!   the turn can reach, open signals). Best case 0 when every field asked
//!   is one code can read beyond doubt (`runtime::certain`) and nothing
//!   else needs asking whatever the guards say; worst case 2: the call and
//!   the one repair an answer that fails the schema gets.
//! - **reply**: made when the turn ends with instructions for the model (a
//!   step's `prompt`: the step it stops at to ask, or a step that prompts
//!   without collecting), or outside every flow with nothing `say`-ed;
//!   never after an `abort`. Which endings a turn can reach is walked on the
//!   successor rule (`ir::successor`): best case is the cheapest ending,
//!   worst case the dearest. A step that asks with `tools` may take
//!   `agent.limits.max_tool_rounds` rounds of tool calls and the answer
//!   after them.
//! - **the fused reply** (`runtime/engine/fused.rs`): when the turn may
//!   stop at a step the plan can predict (a chain of steps that ask, where
//!   which one asks next depends only on which fields get filled:
//!   `plan.rs`'s `likely_steps`), the understand call also writes that
//!   step's reply, and no reply call is made when the turn stops there
//!   with nothing else to say and no tools: best case, one call.
//! - **model steps** (`ask_model`): one structured call each, and its one
//!   repair, for every model step of a step the turn (or a workflow run)
//!   can execute, its hooks included, and in a conversation those of the
//!   hooks of the flows those steps are in; best case 0 (a path may pass
//!   them by), worst case each of them on the way. One inside a `for_each`
//!   is counted once: it runs once per item (`in_loops` says so). One
//!   with `tools` may first take `agent.limits.max_tool_rounds` rounds of
//!   tool calls (a call each, as a reply's), all in the worst case. Their
//!   prompts (`llm::model_step`'s) count in the worst case's tokens.
//! - **post signals**: a post-phase signal whose code guard opens only
//!   after the steps acted is asked in a call of its own (and its repair).
//!
//! Tokens are estimated from the prompts the runtime would send, built by
//! `llm::prompt` from the requests built here: one token per
//! [`BYTES_PER_TOKEN`] bytes of the prompt text and the answer's schema
//! (four characters a token, in ASCII text). Templates are rendered with each interpolation as
//! [`PLACEHOLDER`], and the user's message, the history and the collected
//! data are left out: they come on top, and the history is bounded by the
//! model's window (`llm::context`).

use crate::diag::{Code, Diagnostic, Label};
use crate::expr::{Template, TemplatePart};
use crate::ir::successor::{self, Landing};
use crate::ir::{ActionKind, Behavior, FieldId, Flow, FlowId, Phase, Program, Step, StepId, ToolId, TypeKind};
use crate::llm::{Question, ReplyAsk, ReplyRequest, StepAsk, UnderstandRequest};
use crate::runtime::engine::StaticAsk;
use crate::source::Span;
use serde::Serialize;
use std::collections::BTreeSet;

// The estimator is shared with the providers, which estimate a call's
// tokens when the server reports none.
pub use crate::llm::{BYTES_PER_TOKEN, tokens};
/// What an interpolation in a template counts as.
pub const PLACEHOLDER: &str = "{value}";
/// Understand and post-signal calls, at worst: the call and its repair.
const UNDERSTAND_WORST: u32 = 2;
/// The most rounds a reply takes, whatever `max_tool_rounds` says
/// (`llm::rounds::MAX_ROUNDS`).
const MAX_REPLY_ROUNDS: u32 = crate::llm::rounds::MAX_ROUNDS as u32;

/// Model calls, best case and worst case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Calls {
    /// The fewest calls the turn can make.
    pub best: u32,
    /// The most.
    pub worst: u32,
}

/// Where a turn starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// The message answers this step, which asked.
    Step(String),
    /// The message starts the flow from no flow.
    Entry,
    /// A workflow run, from its first step (no message, no reply).
    Run,
}

/// What a turn that starts at one place can cost.
#[derive(Clone, Debug, Serialize)]
pub struct TurnCost {
    /// The flow the turn starts in (or enters).
    pub flow: String,
    /// Where in it.
    pub start: Start,
    /// The step's span (the flow's, for an entry).
    #[serde(skip)]
    pub span: Span,
    /// The understand call.
    pub understand: Calls,
    /// The reply, with its tool rounds.
    pub reply: Calls,
    /// The post-phase signals' own call.
    pub post_signals: Calls,
    /// The model steps (`ask_model`) of the steps it can execute.
    pub model_steps: Calls,
    /// A model step sits in a `for_each`: it runs once per item, and
    /// `model_steps` counts one.
    pub in_loops: bool,
    /// All of them. The best case is the cheapest way through, so it may
    /// be less than the sum of the parts' best cases (a fused reply needs
    /// the understand call).
    pub calls: Calls,
    /// The understand call may write the reply (the fused call), so a
    /// turn that stops at a step it predicts makes no reply call.
    pub fused: bool,
    /// One understand call's estimated prompt tokens (the worst case's
    /// request: every field, flow, condition and signal it may ask).
    pub understand_tokens: u64,
    /// One reply call's estimated prompt tokens (0 when no reply is made).
    pub reply_tokens: u64,
    /// The estimated prompt tokens of the worst case's calls together.
    pub worst_tokens: u64,
}

/// Every place a turn can start, in flow and step order: each
/// conversation flow's entry from no flow, then each of its steps that
/// asks; and each workflow's run.
pub fn costs(program: &Program) -> Vec<TurnCost> {
    let mut rows = Vec::new();
    for (index, flow) in program.flows.iter().enumerate() {
        let flow_id = FlowId::from_index(index);
        rows.push(turn_cost(program, flow_id, None));
        if flow.workflow {
            continue;
        }
        for (index, step) in flow.steps.iter().enumerate() {
            if asks(step) {
                rows.push(turn_cost(program, flow_id, Some(StepId::from_index(index))));
            }
        }
    }
    rows
}

/// The budget warnings: `turn_token_budget` and `run_budget`.
pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    check_turns(program, diagnostics);
    run_budget::check(program, diagnostics);
}

/// The `turn_token_budget` warnings: a turn whose worst case's prompts
/// alone are estimated over `agent.limits.max_turn_tokens`. Nothing is
/// walked when the program sets no such budget.
fn check_turns(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    let Some(budget) = program.agent.limits.max_turn_tokens else {
        return;
    };
    for row in costs(program).into_iter().filter(|row| row.worst_tokens > budget) {
        let place = match &row.start {
            Start::Step(step) => format!("a turn at `{}.{step}`", row.flow),
            Start::Entry => format!("a turn that starts `{}`", row.flow),
            Start::Run => format!("a run of `{}`", row.flow),
        };
        let mut diagnostic = Diagnostic::new(
            Code::TurnTokenBudget,
            format!("{place} can spend about {} prompt tokens, over `max_turn_tokens` ({budget})", row.worst_tokens),
        );
        diagnostic.labels.push(Label {
            span: row.span,
            text: format!(
                "up to {} model calls: understand {}, reply {}, post signals {} (about {} + {} tokens a call)",
                row.calls.worst,
                row.understand.worst,
                row.reply.worst,
                row.post_signals.worst,
                row.understand_tokens,
                row.reply_tokens
            ),
        });
        diagnostic.help = Some(
            "raise `max_turn_tokens` in `agent.limits`, lower `max_tool_rounds`, or ask less in one turn; \
             `flowc check --costs` shows each turn's estimate"
                .to_string(),
        );
        diagnostics.push(diagnostic);
    }
}

/// A conversation step that waits for the user: it collects or requires
/// a field, so a turn can stop at it and the next message answers it.
fn asks(step: &Step) -> bool {
    !step.auto && (!step.collect.is_empty() || !step.requires.is_empty())
}

fn turn_cost(program: &Program, flow_id: FlowId, answering: Option<StepId>) -> TurnCost {
    let flow = program.flow(flow_id);
    let step = answering.and_then(|step| flow?.step(step));
    let (start, span) = match step {
        Some(step) => (Start::Step(step.name.clone()), step.span),
        None if flow.is_some_and(|flow| flow.workflow) => (Start::Run, flow.map(|flow| flow.span).unwrap_or_default()),
        None => (Start::Entry, flow.map(|flow| flow.span).unwrap_or_default()),
    };
    if start == Start::Run {
        let reached = successor::reachable(program, &[(flow_id, successor::ENTRY)]);
        let found = model_steps(program, &reached);
        let model_steps = Calls { best: 0, worst: found.worst };
        return TurnCost {
            flow: flow.map(|flow| flow.name.clone()).unwrap_or_default(),
            start,
            span,
            understand: Calls::default(),
            reply: Calls::default(),
            post_signals: Calls::default(),
            model_steps,
            in_loops: found.in_loops,
            calls: model_steps,
            fused: false,
            understand_tokens: 0,
            reply_tokens: 0,
            worst_tokens: found.tokens * u64::from(UNDERSTAND_WORST),
        };
    }
    let likely = likely_chain(program, flow_id, answering);
    let mut worst_request = understand_request(program, flow_id, answering, Case::Worst);
    worst_request.reply = reply_ask(program, &likely);
    let best_request = understand_request(program, flow_id, answering, Case::Best);
    let understand = Calls {
        best: u32::from(!code_reads_all(&best_request)),
        worst: if worst_request.is_empty() { 0 } else { UNDERSTAND_WORST },
    };
    let from = match answering {
        Some(step) => vec![(flow_id, Landing::Step(step))],
        None => vec![(flow_id, Landing::Enter(flow_id, StepId(0)))],
    };
    let endings = endings(program, &from, answering.map(|step| (flow_id, step)), &likely);
    let rounds = if endings.tools.is_empty() {
        1
    } else {
        program.agent.limits.max_tool_rounds.saturating_add(1).min(MAX_REPLY_ROUNDS)
    };
    // A fused reply needs the understand call that writes it.
    let fused = endings.fused && understand.worst > 0;
    let reply = Calls { best: u32::from(!endings.silent && !fused), worst: if endings.replied { rounds } else { 0 } };
    let mut best = understand.best + 1;
    if endings.silent {
        best = best.min(understand.best);
    }
    if fused {
        best = best.min(understand.best.max(1));
    }
    let reply_tokens = if endings.replied { tokens(reply_bytes(program, flow_id, &endings)) } else { 0 };
    let post = post_request(program, flow_id);
    let post_signals = Calls { best: 0, worst: if post.signals.is_empty() { 0 } else { UNDERSTAND_WORST } };
    let post_tokens = if post.signals.is_empty() { 0 } else { tokens(prompt_bytes(&post)) };
    let understand_tokens = if worst_request.is_empty() { 0 } else { tokens(prompt_bytes(&worst_request)) };
    let found = model_steps(program, &successor::reachable(program, &from));
    let model_steps = Calls { best: 0, worst: found.worst };
    let worst_tokens = understand_tokens * u64::from(understand.worst)
        + reply_tokens * u64::from(reply.worst)
        + post_tokens * u64::from(post_signals.worst)
        + found.tokens * u64::from(UNDERSTAND_WORST);
    TurnCost {
        flow: flow.map(|flow| flow.name.clone()).unwrap_or_default(),
        start,
        span,
        understand,
        reply,
        post_signals,
        model_steps,
        in_loops: found.in_loops,
        calls: Calls { best, worst: understand.worst + reply.worst + post_signals.worst + model_steps.worst },
        fused,
        understand_tokens,
        reply_tokens,
        worst_tokens,
    }
}

/// Which side of the guards a request is built for: the worst case asks
/// everything a guard may leave open, the best case only what no guard,
/// `once` or cooldown can close.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Best,
    Worst,
}

/// A turn's understand request, as `runtime::engine::plan` builds it from
/// where the conversation stands: at `answering` in `active`, or (`None`)
/// in no flow, with `active` among the flows the message may start. What
/// follows from the program and the position is the plan's own
/// (`StaticAsk`); the session's part (which guards hold, which signals are
/// open) is the case's: every flow and signal a guard may open in the
/// worst case, only those without one in the best.
fn understand_request(program: &Program, active: FlowId, answering: Option<StepId>, case: Case) -> UnderstandRequest {
    let open_flow = |flow: &&Flow| !flow.workflow && (case == Case::Worst || flow.guard.is_empty());
    let candidates: Vec<FlowId> = program
        .flows
        .iter()
        .enumerate()
        .filter(|(_, flow)| open_flow(flow))
        .map(|(index, _)| FlowId::from_index(index))
        .collect();
    let routable: Vec<FlowId> = candidates
        .iter()
        .copied()
        .filter(|flow| program.flow(*flow).is_some_and(|declared| !declared.when.is_empty()))
        .collect();
    // A turn at a step is in its flow; one that enters a flow starts
    // from no flow, where every candidate may take the message.
    let in_flow = answering.map(|_| active);
    let signals = open_signals(program, &[Phase::Pre, Phase::Both, Phase::Post], case);
    let ask = StaticAsk::at(program, in_flow, answering, &candidates, &routable, &signals);
    UnderstandRequest {
        conditions: conditions(program, &ask.from, case),
        today: "2026-01-01".to_string(),
        // As every turn sends it; the fused reply's writer only when the
        // turn asks for a reply (a turn that asks none is a turn of a
        // session that may).
        prefix: crate::runtime::engine::prompt_prefix(program, true, &mut rendered),
        ..ask.request(program, in_flow, &routable, &signals)
    }
}

/// Whether code may read every field `request` asks (`runtime::certain`),
/// with nothing else to ask: then no understand call is made.
fn code_reads_all(request: &UnderstandRequest) -> bool {
    request.flows.is_empty()
        && request.conditions.is_empty()
        && request.signals.is_empty()
        && request.fields.iter().all(|field| match field.kind.as_str() {
            "string" => field.pattern.is_some() || !field.examples.is_empty(),
            "date" | "enum" => true,
            "int" | "float" | "bool" => field.asked,
            _ => false,
        })
}

/// The steps a turn starting here may stop at with a reply the understand
/// call wrote, as `runtime::engine::plan`'s `likely_steps` finds them
/// (judged on the program alone: no step is passed over, each asks): from
/// the step the message answers, or the flow's entry, along steps that ask
/// with a prompt and no tools, while they leave by their fields alone.
/// Empty when the step answered has an AI branch entry, or is the only
/// one.
fn likely_chain(program: &Program, flow_id: FlowId, answering: Option<StepId>) -> BTreeSet<(FlowId, StepId)> {
    let mut likely = BTreeSet::new();
    let Some(flow) = program.flow(flow_id) else {
        return likely;
    };
    successor::asking_chain(
        flow,
        answering,
        |_| false,
        |_, step_id, _| {
            likely.insert((flow_id, step_id));
            true
        },
    );
    if let Some(step) = answering
        && likely.iter().all(|(_, found)| *found == step)
    {
        likely.clear();
    }
    likely
}

/// What the understand request adds to write the fused reply: the likely
/// steps' prompts (`fused.rs`'s `reply_ask`, with no data known).
fn reply_ask(program: &Program, likely: &BTreeSet<(FlowId, StepId)>) -> Option<ReplyAsk> {
    if likely.is_empty() {
        return None;
    }
    let mut rules: Vec<String> = program.agent.rules.iter().map(rendered).collect();
    let flows: BTreeSet<FlowId> = likely.iter().map(|(flow, _)| *flow).collect();
    for flow in flows.iter().filter_map(|flow| program.flow(*flow)) {
        rules.extend(flow.rules.iter().map(rendered));
    }
    let steps = likely
        .iter()
        .filter_map(|(flow, step)| {
            let flow = program.flow(*flow)?;
            let step = flow.step(*step)?;
            Some(StepAsk {
                id: format!("{}.{}", flow.name, step.name),
                flow: flow.name.clone(),
                missing: step
                    .collect
                    .iter()
                    .chain(&step.requires)
                    .filter_map(|field| program.field(*field).map(|declared| declared.name.clone()))
                    .collect(),
                prompt: rendered(step.prompt.as_ref()?),
            })
        })
        .collect();
    Some(ReplyAsk {
        identity: program.agent.identity.as_ref().map(rendered),
        rules,
        data: serde_json::Map::new(),
        fallback_flow: None,
        steps,
    })
}

/// What the model steps a turn (or run) can reach may spend.
struct ModelSteps {
    /// Model steps, each one call (a repair is one more).
    count: u32,
    /// Their calls at worst: each its call and repair, and the tool
    /// rounds of those with `tools`.
    worst: u32,
    /// The prompt tokens of all of them, each asked once.
    tokens: u64,
    /// One sits in a `for_each`: it runs once per item.
    in_loops: bool,
}

/// The model steps of these steps (their `do`, hooks included) and, in a
/// conversation, of the hooks of the flows they are in (a turn that
/// reaches a step may have entered or may complete its flow).
fn model_steps(program: &Program, steps: &BTreeSet<(FlowId, StepId)>) -> ModelSteps {
    let mut found = ModelSteps { count: 0, worst: 0, tokens: 0, in_loops: false };
    let mut lists: Vec<&[crate::ir::Action]> = Vec::new();
    let mut flows = BTreeSet::new();
    for (flow_id, step) in steps {
        let Some(flow) = program.flow(*flow_id) else {
            continue;
        };
        let Some(step) = flow.step(*step) else {
            continue;
        };
        lists.extend([&step.actions[..], &step.on_enter, &step.prepare, &step.finalize]);
        if !flow.workflow && flows.insert(*flow_id) {
            lists.extend([&flow.on_enter[..], &flow.on_complete]);
        }
    }
    for actions in lists {
        let looped: Vec<&crate::ir::Action> = crate::ir::walk::all_actions(actions)
            .into_iter()
            .filter_map(|action| match &action.kind {
                ActionKind::ForEach(each) => Some(each),
                _ => None,
            })
            .flat_map(|each| crate::ir::walk::all_actions(&each.actions))
            .collect();
        for action in crate::ir::walk::all_actions(actions) {
            if let ActionKind::AskModel(ask) = &action.kind {
                found.count = found.count.saturating_add(1);
                let rounds =
                    if ask.tools.is_empty() { 0 } else { program.agent.limits.max_tool_rounds.min(MAX_REPLY_ROUNDS) };
                found.worst = found.worst.saturating_add(UNDERSTAND_WORST).saturating_add(rounds);
                found.tokens = found.tokens.saturating_add(ask_tokens(program, ask));
                found.in_loops |= looped.iter().any(|inner| std::ptr::eq(*inner, action));
            }
        }
    }
    found
}

/// The prompt tokens of one model step's call, as `llm::model_step` writes
/// it (its repair sends a little more).
fn ask_tokens(program: &Program, ask: &crate::ir::AskModel) -> u64 {
    let Some(field) = program.field(ask.field) else {
        return 0;
    };
    let mut spec = crate::runtime::spec::field_spec(field, true);
    spec.examples.extend(ask.examples.iter().cloned());
    let request = crate::llm::AskRequest {
        step: String::new(),
        instruction: rendered(&ask.instruction),
        field: spec,
        inputs: Vec::new(),
        tools: ask.tools.iter().filter_map(|tool| program.tool(*tool)).map(crate::runtime::spec::tool_spec).collect(),
        today: String::new(),
        repair: None,
        rounds: Vec::new(),
        tools_spent: false,
        deadline: None,
    };
    tokens(crate::llm::model_step::system_prompt(&request).len() + crate::llm::model_step::user_prompt(&request).len())
}

fn is_bool(program: &Program, field: FieldId) -> bool {
    program.field(field).is_some_and(|declared| matches!(declared.ty.kind, TypeKind::Bool))
}

/// Signals of these phases asked with the `when`s: in the best case, only
/// those no guard, `once` or cooldown can close.
fn open_signals(program: &Program, phases: &[Phase], case: Case) -> Vec<usize> {
    program
        .signals
        .iter()
        .enumerate()
        .filter(|(_, signal)| phases.contains(&signal.phase) && !signal.when.is_empty())
        .filter(|(_, signal)| {
            case == Case::Worst || (signal.guard.is_empty() && matches!(signal.behavior, Behavior::Always))
        })
        .map(|(index, _)| index)
        .collect()
}

/// The AI conditions of the steps the turn can reach (branch entries and
/// step `when`s, one question per description); in the best case only
/// those without a code guard, which may rule them out.
fn conditions(program: &Program, from: &[(FlowId, Landing)], case: Case) -> Vec<Question> {
    let reached = successor::reachable(program, from);
    let mut questions = Vec::new();
    for (flow_id, step_id) in reached {
        let Some((flow, step)) = program.flow(flow_id).and_then(|flow| Some((flow, flow.step(step_id)?))) else {
            continue;
        };
        for (index, entry) in step.branches.iter().enumerate() {
            if case == Case::Best && !entry.guard.is_empty() {
                continue;
            }
            push_questions(&mut questions, &format!("{}.{}#{}", flow.name, step.name, index + 1), &entry.when);
        }
        if case == Case::Worst || step.guard.is_empty() {
            push_questions(&mut questions, &format!("{}.{}", flow.name, step.name), &step.when);
        }
    }
    questions
}

fn push_questions(questions: &mut Vec<Question>, base: &str, whens: &[String]) {
    for (index, when) in whens.iter().enumerate() {
        let id = if whens.len() == 1 { base.to_string() } else { format!("{base}.{}", index + 1) };
        questions.push(Question { id, when: vec![when.clone()] });
    }
}

/// The post-phase signals' own request, built as the turn builds it
/// ([`StaticAsk::after_reply`]): the signals asked after the reply, those
/// whose guard may open only once the steps acted.
fn post_request(program: &Program, flow: FlowId) -> UnderstandRequest {
    let signals: Vec<usize> = open_signals(program, &[Phase::Post, Phase::Both], Case::Worst)
        .into_iter()
        .filter(|signal| program.signals.get(*signal).is_some_and(|declared| !declared.guard.is_empty()))
        .collect();
    UnderstandRequest {
        today: "2026-01-01".to_string(),
        ..StaticAsk::after_reply(program, &signals).request(program, Some(flow), &[], &signals)
    }
}

/// The understand prompt's bytes, as every provider sends it.
fn prompt_bytes(request: &UnderstandRequest) -> usize {
    crate::llm::context::understand_bytes(request)
}

/// The reply prompt's bytes for the dearest ending: the identity,
/// the rules, every instruction the turn may gather and the tools of the
/// step that asks with the most.
fn reply_bytes(program: &Program, flow: FlowId, endings: &Endings) -> usize {
    let request = ReplyRequest {
        identity: program.agent.identity.as_ref().map(rendered),
        rules: program.agent.rules.iter().map(rendered).collect(),
        flow_rules: program.flow(flow).map(|flow| flow.rules.iter().map(rendered).collect()).unwrap_or_default(),
        instructions: endings.instructions.clone(),
        tools: endings
            .tools
            .iter()
            .filter_map(|tool| program.tool(*tool))
            .map(crate::runtime::spec::tool_spec)
            .collect(),
        ..ReplyRequest::default()
    };
    crate::llm::context::reply_bytes(&request, &[])
}

/// A template's text with each interpolation as [`PLACEHOLDER`].
fn rendered(template: &Template) -> String {
    template
        .parts
        .iter()
        .map(|part| match part {
            TemplatePart::Text(text) => text.as_str(),
            TemplatePart::Expr(_) => PLACEHOLDER,
        })
        .collect()
}

/// How the turns from one place can end, as far as the reply goes.
#[derive(Default)]
struct Endings {
    /// Some ending makes no reply call.
    silent: bool,
    /// Some ending makes one.
    replied: bool,
    /// Some ending stops at a step the understand call may have written
    /// the reply for, with nothing else to say.
    fused: bool,
    /// The most tools a step the turn may stop at offers.
    tools: Vec<ToolId>,
    /// Every step prompt the turn may gather (an upper bound on one
    /// ending's instructions).
    instructions: Vec<String>,
}

/// What a turn has gathered on its way: a prompt for the model, a `say`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Gathered {
    prompted: bool,
    said: bool,
}

/// Walks every way the turn can go from `from` on the successor rule,
/// as `reachable` does, carrying what it gathered, and records each
/// ending: stopping at a step that asks, parking before a `wait`, leaving
/// every flow, aborting.
fn endings(
    program: &Program,
    from: &[(FlowId, Landing)],
    answering: Option<(FlowId, StepId)>,
    likely: &BTreeSet<(FlowId, StepId)>,
) -> Endings {
    let mut endings = Endings::default();
    let mut prompts: BTreeSet<(FlowId, StepId)> = BTreeSet::new();
    let mut seen_steps: BTreeSet<(FlowId, StepId, Gathered)> = BTreeSet::new();
    let mut seen_completions: BTreeSet<(FlowId, Option<FlowId>, Gathered)> = BTreeSet::new();
    let mut seen_entries: BTreeSet<(FlowId, StepId, Gathered)> = BTreeSet::new();
    let start = Gathered { prompted: false, said: false };
    let mut work: Vec<(FlowId, Landing, Gathered)> = from.iter().map(|(flow, place)| (*flow, *place, start)).collect();
    while let Some((flow_id, place, gathered)) = work.pop() {
        let Some(flow) = program.flow(flow_id) else {
            continue;
        };
        let mut visit = |step_id: StepId, work: &mut Vec<(FlowId, Landing, Gathered)>, endings: &mut Endings| {
            let Some(step) = flow.step(step_id) else {
                // A step past the end: the flow completes.
                work.push((flow_id, Landing::Complete(None), gathered));
                return;
            };
            if !seen_steps.insert((flow_id, step_id, gathered)) {
                return;
            }
            if asks(step) {
                // It may stop here and ask (its prompt is the reply's
                // instruction), or find its fields set and go on; but a
                // confirmation is taken only from the message answering
                // the step that asked it, never carried into another.
                let prompted = gathered.prompted || step.prompt.is_some();
                endings.end(prompted);
                endings.fused |= likely.contains(&(flow_id, step_id))
                    && !gathered.prompted
                    && !gathered.said
                    && step.tools.is_empty();
                if prompted && step.tools.len() > endings.tools.len() {
                    endings.tools = step.tools.clone();
                }
                if step.prompt.is_some() {
                    prompts.insert((flow_id, step_id));
                }
                let confirms = step.collect.iter().any(|field| is_bool(program, *field));
                if confirms && answering != Some((flow_id, step_id)) {
                    return;
                }
            }
            let prompts_here = step.collect.is_empty() && step.prompt.is_some();
            if prompts_here {
                prompts.insert((flow_id, step_id));
            }
            let after =
                Gathered { prompted: gathered.prompted || prompts_here, said: gathered.said || step.say.is_some() };
            if step.wait_ms.is_some() {
                endings.end(after.prompted);
                return;
            }
            for (_, landing) in successor::exits(flow_id, step_id, step) {
                work.push((flow_id, landing, after));
            }
        };
        match place {
            Landing::Step(step) => visit(step, &mut work, &mut endings),
            Landing::Listed(from) => {
                let mut all_passed_over = true;
                for (index, step) in flow.steps.iter().enumerate().skip(from) {
                    visit(StepId::from_index(index), &mut work, &mut endings);
                    if !successor::can_be_passed_over(step) {
                        all_passed_over = false;
                        break;
                    }
                }
                if all_passed_over {
                    work.push((flow_id, Landing::Complete(None), gathered));
                }
            }
            Landing::Complete(named) => {
                if !seen_completions.insert((flow_id, named, gathered)) {
                    continue;
                }
                match successor::after_completion(flow, named) {
                    Some(next) => work.push((flow_id, Landing::Enter(next, StepId(0)), gathered)),
                    // Out of every flow: the model replies unless a step
                    // said something or prompted for it.
                    None => endings.end(gathered.prompted || !gathered.said),
                }
            }
            Landing::Enter(next, step) => {
                if !seen_entries.insert((next, step, gathered)) {
                    continue;
                }
                if let Some(declared) = program.flow(next) {
                    for directive in crate::ir::walk::emitted(&declared.on_enter) {
                        if let Some(position) = &directive.position {
                            let jump = successor::Jump::from(position);
                            work.push((next, successor::landing(next, jump), gathered));
                        }
                    }
                }
                work.push((next, successor::arrival(step), gathered));
            }
            // An aborted turn makes no reply call.
            Landing::Abort => endings.end(false),
        }
    }
    endings.instructions = prompts
        .iter()
        .filter_map(|(flow, step)| program.flow(*flow)?.step(*step)?.prompt.as_ref())
        .map(rendered)
        .collect();
    endings
}

impl Endings {
    fn end(&mut self, replies: bool) {
        if replies {
            self.replied = true;
        } else {
            self.silent = true;
        }
    }
}

mod run_budget;

#[cfg(test)]
mod tests;
