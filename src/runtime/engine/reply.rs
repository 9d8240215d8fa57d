//! Stage 5 of a turn: the reply, one model round per [`Turn::step`](super::Turn::step) (a
//! round that asks for tool calls hands them to the caller first; the next
//! step runs them and asks again), then the batch's `finalize` hooks and the
//! post-model bus.

use super::bus::{apply_merged, end_phase, record, run_post_hook};
use super::claims::{self, Gate, Grounds};
use super::fused::{self, ReplyShape};
use super::position::park;
use super::services::Services;
use super::state::{AFTER_PHASES, POST_MODEL, TurnState, flow_name};
use super::tool_loop::{Replying, ToolBudget, TurnToolLoop};
use super::{Stage, StageDone, StageOutcome, TurnError};
use crate::ir::ToolId;
use crate::llm::rounds::MAX_ROUNDS;
use crate::llm::{ModelReply, ReplyRequest, ReplyText, ToolCall, ToolLoop, ToolRound};
use crate::runtime::directive::{Merged, Source, merge};
use crate::runtime::events::{ClaimAction, EmptyReplyAction, Event, Purpose, StopReason};

/// Starts the reply: the pre-model bus settles, and the model is asked
/// its first round when the reply needs it. Returns the tool calls the
/// model asked for, which run at the next step.
pub(super) fn reply(st: &mut TurnState, sv: &mut Services) -> Result<StageOutcome, TurnError> {
    let program = sv.program;
    // Nothing writes between here and the model's answer: the pre-model
    // phase ends before the reply is decided, so the fused reply's check
    // and the reply request read the data as committed (or undone).
    end_phase(st, POST_MODEL);
    let (pre, verbatim) = settle_pre_bus(st);
    let needs_model = !st.bus.halt
        && verbatim.is_none()
        && st.stop != Some(StopReason::Aborted)
        && (!st.answer.instructions.is_empty() || (st.session.flow.is_none() && st.answer.says.is_empty()));
    // Part of a streamed fused reply shown, then set aside: the reply
    // call's text starts on a line of its own.
    let mut fused_shown = false;
    if let Some(mut fused) = st.reading.fused.take() {
        let shape = ReplyShape {
            needs_model: needs_model && !st.over_token_budget(sv),
            replaced: st.bus.halt || verbatim.is_some(),
            augmented: !pre.append_prompt.is_empty() || !pre.inject_tools.is_empty(),
        };
        let outcome = fused::take_reply(st, sv, &fused, &shape);
        // A reply not used is dropped here, still streaming: that cancels
        // the understand call's rest. What the call spent so far counts.
        let (outcome, streamed) = match (outcome, fused.take_stream()) {
            (Ok(fused::Taken::Streaming(unseen)), Some(stream)) => {
                let (outcome, shown) = fused::stream_reply(st, sv, &fused, &unseen, stream)?;
                fused_shown = shown;
                (outcome, true)
            }
            (outcome, stream) => {
                if let Some(stream) = stream {
                    st.counters.usage.add(stream.dropped_usage());
                }
                (outcome.and_then(fused::Taken::into_whole), false)
            }
        };
        // A reply read whole is checked here; a streamed one as it arrives.
        let outcome = match outcome {
            Ok(text) if !streamed => {
                let grounds =
                    Grounds::fused(sv.claims_setting(), &st.session, &st.message, &fused.ask, &st.answer.instructions);
                match grounds.unfounded(&text) {
                    Some(claim) => {
                        let (event, reason) = claims::set_aside(claim);
                        st.emit(event);
                        Err(reason)
                    }
                    None => Ok(text),
                }
            }
            other => other,
        };
        fused::trace(st, &fused, &outcome);
        if let Ok(text) = outcome {
            // The model wrote it in the understand call: no call of its own.
            if let (false, Some(sink)) = (streamed, sv.stream.as_mut()) {
                sink(&text);
            }
            complete_reply(st, sv, verbatim, Some(text))?;
            return Ok(StageOutcome::Done(StageDone::Replied));
        }
    }
    if !needs_model || st.over_token_budget(sv) {
        complete_reply(st, sv, verbatim, None)?;
        return Ok(StageOutcome::Done(StageDone::Replied));
    }
    let mut request = reply_request(st, sv, &pre.append_prompt, &pre.inject_tools);
    super::history::fit_reply(st, sv, &mut request);
    // The `say` texts lead the reply: shown at once, with the line
    // break that joins them to the model's text sent only once that
    // text starts.
    let said = st.answer.says.join("\n");
    if let Some(sink) = sv.stream.as_mut()
        && !said.is_empty()
    {
        sink(&said);
    }
    let budget = ToolBudget {
        exposed: request.tools.iter().map(|tool| tool.name.clone()).collect(),
        rounds: 0,
        max_rounds: program.agent.limits.max_tool_rounds,
        limit_hit: false,
        consecutive_errors: st.counters.consecutive_errors,
        max_errors: sv.limits.max_consecutive_errors,
        error_limit_hit: false,
    };
    st.answer.replying = Some(Replying {
        request,
        rounds: Vec::new(),
        asked: None,
        text: ReplyText::default(),
        verbatim,
        budget,
        separated: said.is_empty() && !fused_shown,
        asked_again: false,
        shown: false,
    });
    model_round(st, sv).map(StageOutcome::replied)
}

/// Runs the tool calls the model asked for in its last round, through
/// the one tool-call path, and asks the model again.
pub(super) fn answer_tool_calls(st: &mut TurnState, sv: &mut Services) -> Result<StageOutcome, TurnError> {
    let program = sv.program;
    let Some(replying) = st.answer.replying.as_mut() else {
        st.stage = Stage::PostSignals;
        return Ok(StageOutcome::Done(StageDone::Replied));
    };
    let asked = replying.asked.take().unwrap_or_default();
    let mut tool_loop = TurnToolLoop {
        program,
        tools: sv.tools,
        tool_env: sv.tool_env,
        budget: &mut replying.budget,
        events: Vec::new(),
        emissions: Vec::new(),
    };
    // A call whose arguments could not be read is answered with that
    // error, without running.
    let results = asked
        .calls
        .iter()
        .map(|call| call.arguments.clone().and_then(|arguments| tool_loop.call_tool(&call.name, arguments)))
        .collect();
    let events = std::mem::take(&mut tool_loop.events);
    let emissions = std::mem::take(&mut tool_loop.emissions);
    replying.rounds.push(ToolRound { asked, results });
    for event in events {
        st.emit(event);
    }
    st.bus.post.extend(emissions);
    model_round(st, sv).map(StageOutcome::replied)
}

/// One round of the model's reply: the reply is done (and completed
/// here), or the model asks for tool calls, which are returned.
fn model_round(st: &mut TurnState, sv: &mut Services) -> Result<Option<Vec<ToolCall>>, TurnError> {
    let Some(replying) = st.answer.replying.as_mut() else {
        return Ok(None);
    };
    let answer = if replying.rounds.len() < MAX_ROUNDS {
        replying.request.tools_spent = !replying.budget.may_call();
        let (program, today) = sv.claims_setting();
        let runtime = &mut *sv;
        let mut stream = runtime.stream.as_mut();
        let asked_again = replying.asked_again;
        let mut gate = stream.is_some().then(|| if asked_again { Gate::whole() } else { Gate::new() });
        let (separated, shown) = (&mut replying.separated, &mut replying.shown);
        let mut send = |chunk: &str| {
            if let Some(sink) = stream.as_mut()
                && !chunk.is_empty()
            {
                if !*separated {
                    *separated = true;
                    sink("\n");
                }
                sink(chunk);
                *shown = true;
            }
        };
        let (request, rounds) = (&replying.request, &replying.rounds);
        // What streams is shown a word at a time, and not past a token
        // nothing the model was given backs (`finish_model_reply` then asks
        // again, and shows that reply only once it is whole); with no one
        // to stream to, nothing is read here.
        let mut grounds = Grounds::new(program, today, &st.session, &st.message);
        grounds.request(request, rounds);
        let provider = &mut *runtime.provider;
        let mut on_text = |chunk: &str| {
            if let Some(gate) = gate.as_mut() {
                send(&gate.push(chunk, &grounds));
            }
        };
        let answer = replying.text.round(&mut on_text, |on_text| provider.reply(request, rounds, on_text));
        if let Some(gate) = gate.as_mut() {
            send(&gate.finish(&grounds));
        }
        Some(answer?)
    } else {
        // A safety net against a provider that never stops asking:
        // the reply is what was written so far.
        None
    };
    match answer {
        Some(ModelReply::ToolCalls(asked)) => {
            replying.text.add(&asked.text, asked.usage);
            let calls = asked.calls.clone();
            replying.asked = Some(asked);
            st.stage = Stage::ToolCalls;
            Ok(Some(calls))
        }
        Some(ModelReply::Done(response)) => {
            replying.text.add(&response.text, response.usage);
            finish_model_reply(st, sv)
        }
        None => finish_model_reply(st, sv),
    }
}

/// The model has written the reply: its usage is counted and the reply
/// completed. A reply that is empty or only whitespace, or that states a
/// token nothing the model was given backs (`claims.rs`), is asked for
/// once more (the tool calls of that round, if any, are returned); a
/// second such one is replaced by what the turn's steps asked the reply to
/// do, so the user is never answered with nothing, nor told what nobody
/// said.
fn finish_model_reply(st: &mut TurnState, sv: &mut Services) -> Result<Option<Vec<ToolCall>>, TurnError> {
    let Some(mut replying) = st.answer.replying.take() else {
        return Ok(None);
    };
    let response = std::mem::take(&mut replying.text).finish();
    st.count_call(sv, Purpose::Respond, response.usage);
    let fault = if response.text.trim().is_empty() {
        // Past the last round too: it is not asked again (below), but gets
        // the stand-in all the same, never silence.
        Some(Fault::Empty)
    } else {
        let (program, today) = sv.claims_setting();
        let mut grounds = Grounds::new(program, today, &st.session, &st.message);
        grounds.request(&replying.request, &replying.rounds);
        grounds.unfounded(&response.text).map(Fault::Claim).or_else(|| {
            super::fused::omitted(st, sv, &response.text).map(|(field, value)| Fault::Omits { field, value })
        })
    };
    let Some(fault) = fault else {
        return finish_reply(st, sv, replying, response.text).map(|()| None);
    };
    // What was shown of the reply set aside stays: what follows starts on
    // a line of its own.
    if std::mem::take(&mut replying.shown) {
        replying.separated = false;
    }
    // A reply leaving out a shown value is not asked for again: the
    // stand-in says exactly what code holds, at no call.
    let omits = matches!(fault, Fault::Omits { .. });
    if !omits && !replying.asked_again && replying.rounds.len() < MAX_ROUNDS {
        st.emit(fault.event(Retry::AskedAgain, None));
        replying.asked_again = true;
        st.answer.replying = Some(replying);
        return model_round(st, sv);
    }
    let text = stand_in_reply(&st.answer.instructions, &replying.request.appended);
    st.emit(fault.event(Retry::Replaced, Some(text.clone())));
    if let Some(sink) = sv.stream.as_mut() {
        if !replying.separated {
            sink("\n");
        }
        sink(&text);
    }
    finish_reply(st, sv, replying, text).map(|()| None)
}

/// Why a reply the model wrote is not used as it is.
enum Fault {
    Empty,
    /// It states this token, which nothing the model was given backs.
    Claim(String),
    /// It leaves out this field's value, which its step's prompt shows.
    Omits {
        field: String,
        value: String,
    },
}

/// What is done about a [`Fault`]: one more try, then the stand-in.
enum Retry {
    AskedAgain,
    Replaced,
}

impl Fault {
    fn event(self, retry: Retry, text: Option<String>) -> Event {
        match (self, retry) {
            (Fault::Empty, Retry::AskedAgain) => Event::EmptyReply { action: EmptyReplyAction::AskedAgain, text },
            (Fault::Empty, Retry::Replaced) => Event::EmptyReply { action: EmptyReplyAction::Replaced, text },
            (Fault::Claim(claim), Retry::AskedAgain) => claims::event(claim, ClaimAction::AskedAgain, text),
            (Fault::Claim(claim), Retry::Replaced) => claims::event(claim, ClaimAction::Replaced, text),
            (Fault::Omits { field, value }, _) => Event::ReplyOmits { field, value, text: text.unwrap_or_default() },
        }
    }
}

/// The reply that stands in for a model that answered nothing twice: the
/// steps' rendered prompts (what the reply was to do), else the turn's
/// appended instructions, else an offer of help.
fn stand_in_reply(instructions: &[String], appended: &[String]) -> String {
    let said: Vec<&str> =
        instructions.iter().chain(appended).map(|text| text.trim()).filter(|text| !text.is_empty()).collect();
    if said.is_empty() { crate::llm::offline::FALLBACK_REPLY.to_string() } else { said.join(" ") }
}

fn finish_reply(st: &mut TurnState, sv: &mut Services, replying: Replying, text: String) -> Result<(), TurnError> {
    let Replying { verbatim, budget, .. } = replying;
    st.counters.tool_limit_hit = budget.limit_hit;
    st.counters.consecutive_errors = budget.consecutive_errors;
    // A loop the limit cut short (tools were no longer offered, or a
    // call was refused) stopped for the errors.
    st.counters.error_limit_hit = budget.error_limit_hit || budget.out_of_errors();
    complete_reply(st, sv, verbatim, Some(text))
}

/// Merges the whole pre-model bus before the model is asked: its halt,
/// and its verbatim `reply` unless the flow was aborted. Returns the
/// merge (for its augmentation) and the verbatim reply.
fn settle_pre_bus(st: &mut TurnState) -> (Merged, Option<String>) {
    let pre = merge(&st.bus.pre);
    for warning in &pre.warnings {
        st.warn(warning.clone());
    }
    st.bus.halt |= pre.halt;
    // A `reply` a later one overrode did not act: its directive, when the
    // reply was all it could still do, is not applied.
    if let Some((_, winner)) = &pre.reply {
        for (index, emission) in st.bus.pre.iter().enumerate() {
            if index == *winner || emission.reply.is_none() {
                continue;
            }
            if let Some(record) =
                st.bus.pre_records.get(index).copied().flatten().and_then(|at| st.trace.records.get_mut(at))
            {
                record.applied = false;
            }
        }
    }
    let mut verbatim = pre.reply.as_ref().map(|(reply, _)| reply.clone());
    // An abort that is not on the bus (a signal's, or `max_asks` with no
    // `on_no_answer`) beats a reply all the same.
    if st.stop == Some(StopReason::Aborted)
        && let Some((_, index)) = &pre.reply
    {
        let source = st.bus.pre.get(*index).map(|emission| emission.source.to_string()).unwrap_or_default();
        st.warn(format!("the reply from {source} was dropped: the flow was aborted"));
        verbatim = None;
    }
    (pre, verbatim)
}

/// After the model (or without it): the batch finalizes, the post-model
/// bus is applied, and the reply is put together.
fn complete_reply(
    st: &mut TurnState,
    sv: &mut Services,
    verbatim: Option<String>,
    model_text: Option<String>,
) -> Result<(), TurnError> {
    if st.bus.halt && st.stop == Some(StopReason::NeedsInput) {
        st.stop = Some(StopReason::Halt);
    }
    finalize_batch(st, sv)?;
    let post_reply = apply_post_bus(st, sv)?;
    end_phase(st, AFTER_PHASES);
    let mut parts: Vec<String> = st.answer.says.clone();
    match (post_reply.or(verbatim), model_text) {
        (Some(reply), _) => parts.push(reply),
        (None, Some(text)) if !text.trim().is_empty() => parts.push(text),
        _ => {}
    }
    st.answer.reply = parts.join("\n");
    if st.counters.error_limit_hit {
        st.stop = Some(StopReason::ErrorLimit);
    }
    if st.counters.tool_limit_hit {
        st.stop = Some(StopReason::ToolRoundLimit);
    }
    if st.over_token_budget(sv) {
        st.stop = Some(StopReason::TokenLimit);
    }
    st.stage = Stage::PostSignals;
    Ok(())
}

/// Every step of the batch finalizes, in order. The reply is written:
/// a failing `finalize` is traced and dropped, not a failed turn.
fn finalize_batch(st: &mut TurnState, sv: &mut Services) -> Result<(), TurnError> {
    let program = sv.program;
    for (flow, step) in std::mem::take(&mut st.answer.batch) {
        let Some(step) = program.flow(flow).and_then(|found| found.step(step)) else {
            continue;
        };
        let path = format!("{}.{}.finalize", flow_name(sv, flow), step.name);
        match run_post_hook(st, sv, &step.finalize, &path) {
            Ok(()) => {}
            Err(TurnError::Action(failure)) => st.emit(Event::HookFailed { hook: path, error: failure.to_string() }),
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The post-model bus: writes and a position for the next turn;
/// augmentation can no longer act. Returns its `reply`, which replaces
/// the model's.
fn apply_post_bus(st: &mut TurnState, sv: &mut Services) -> Result<Option<String>, TurnError> {
    let post = merge(&st.bus.post);
    for warning in &post.warnings {
        st.warn(warning.clone());
    }
    let post_emissions = std::mem::take(&mut st.bus.post);
    for (index, emission) in post_emissions.iter().enumerate() {
        if emission.has_augmentation() {
            st.warn(format!(
                "{}: halt, append_prompt and inject_tools act only before the model; dropped",
                emission.source
            ));
        }
        let lost_position =
            emission.position.is_some() && post.position.as_ref().is_some_and(|(_, winner)| *winner != index);
        // One without a position that a later `reply` overrode did not act
        // either (its writes merged with the rest).
        let lost_reply = emission.position.is_none()
            && emission.reply.is_some()
            && post.reply.as_ref().is_some_and(|(_, winner)| *winner != index);
        let lost = lost_position || lost_reply;
        if emission.source != Source::Pending {
            record(st, sv, emission, !lost);
        }
    }
    apply_merged(st, sv, &post_emissions, &post.set, &post.set_context);
    if let Some((position, _)) = post.position {
        park(st, sv, position)?;
    }
    Ok(post.reply.map(|(reply, _)| reply))
}

pub(super) fn reply_request(
    st: &mut TurnState,
    sv: &Services,
    appended: &[String],
    injected: &[ToolId],
) -> ReplyRequest {
    let program = sv.program;
    let identity = program.agent.identity.as_ref().map(|identity| st.render(sv, identity));
    let rules: Vec<String> = program.agent.rules.iter().map(|rule| st.render(sv, rule)).collect();
    let flow_rules: Vec<String> = st
        .session
        .flow
        .and_then(|flow| program.flow(flow))
        .map(|flow| flow.rules.iter().map(|rule| st.render(sv, rule)).collect())
        .unwrap_or_default();
    let mut tools: Vec<ToolId> = st
        .answer
        .asking
        .and_then(|(flow, step)| program.flow(flow).and_then(|found| found.step(step)))
        .map(|step| step.tools.clone())
        .unwrap_or_default();
    for tool in injected {
        if !tools.contains(tool) {
            tools.push(*tool);
        }
    }
    ReplyRequest {
        identity,
        rules,
        flow_rules,
        instructions: st.answer.instructions.clone(),
        appended: appended.to_vec(),
        said: st.answer.says.clone(),
        history: st.history_window(),
        message: st.message.clone(),
        data: st.session.data.clone().into_iter().collect(),
        tools: tools.iter().filter_map(|tool| program.tool(*tool)).map(crate::runtime::spec::tool_spec).collect(),
        tools_spent: false,
        // After the steps acted: see `understand_request`.
        deadline: None,
    }
}
