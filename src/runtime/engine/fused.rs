//! The fused reply: the understand call also writes the reply to the step
//! the turn is likely to stop at ([`reply_ask`] says which steps, from the
//! turn's plan), and the reply stage uses it instead of a reply call only
//! when code, having grounded and resolved as always, agrees with every
//! premise the model wrote it on ([`take_reply`]): the turn stops at the
//! step it named, every value the step's prompt reads is the value it saw
//! (or left to code as the prompt's `{{field}}`, filled with the accepted
//! value),
//! the reply mentions no value code did not accept (`mention.rs`), the step
//! offers no tools, and nothing else (a directive, a `say`, another step's
//! prompt) shapes the reply. Whether it was used, and why not, is traced
//! (`fused_reply`).

mod mention;

use super::TurnError;
use super::claims::{self, Grounds};
use super::plan::TurnPlan;
use super::services::Services;
use super::state::{Fused, TurnState, flow_name};
use crate::expr::eval::eval;
use crate::expr::ops::to_text;
use crate::expr::{Expr, ExprKind, Template, TemplatePart};
use crate::ir::{FieldId, FlowId, Program};
use crate::llm::{Proposal, ReplyAsk, ReplyStream, StepAsk, UnderstandRequest};
use crate::read::text::is_stop_word;
use crate::runtime::events::{Event, StopReason};
use mention::{Expected, Unaccepted};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The steps of the plan, offered for the fused reply, with what the
/// model needs to write it; `None` when the plan cannot tell where the
/// turn stops.
pub(super) fn reply_ask(st: &TurnState, sv: &Services, plan: &TurnPlan) -> Option<ReplyAsk> {
    if plan.likely.is_empty() {
        return None;
    }
    let program = sv.program;
    let scope = st.scope(sv);
    let mut warnings = Vec::new();
    let mut render = |template: &Template| crate::expr::eval::render(template, &scope, &mut warnings);
    let identity = program.agent.identity.as_ref().map(&mut render);
    let mut rules: Vec<String> = program.agent.rules.iter().map(&mut render).collect();
    let mut flows: Vec<FlowId> = Vec::new();
    for likely in &plan.likely {
        if !flows.contains(&likely.flow) {
            flows.push(likely.flow);
        }
    }
    for flow in flows.iter().filter_map(|flow| program.flow(*flow)) {
        rules.extend(flow.rules.iter().map(&mut render));
    }
    // A flow entered anew starts without its fresh fields: they are not
    // known to its steps.
    let mut data: Map<String, Value> = st.session.data.clone().into_iter().collect();
    if st.session.flow.is_none() {
        for field in flows.iter().filter_map(|flow| program.flow(*flow)).flat_map(|flow| &flow.fresh) {
            if let Some(declared) = program.field(*field) {
                data.remove(&declared.name);
            }
        }
    }
    let steps = plan
        .likely
        .iter()
        .filter_map(|likely| {
            let flow = program.flow(likely.flow)?;
            let step = flow.step(likely.step)?;
            let prompt = placeholder_text(st, sv, step.prompt.as_ref()?, &data, &plan.ask.fields);
            Some(StepAsk {
                id: step_id(&flow.name, &step.name),
                flow: flow.name.clone(),
                missing: likely
                    .missing
                    .iter()
                    .filter_map(|field| program.field(*field).map(|declared| declared.name.clone()))
                    .collect(),
                prompt,
            })
        })
        .collect();
    Some(ReplyAsk { identity, rules, data, fallback_flow: plan.fallback.map(|flow| flow_name(sv, flow)), steps })
}

/// Code read these values before the call: they are known to the model
/// (not asked of it), written into the prompts in place of their
/// placeholders, and a step they complete no longer asks. Then only the
/// steps the turn can plausibly stop at are kept ([`plausible_steps`]).
/// `None` when no step is left to offer.
pub(super) fn with_code_reads(
    mut ask: ReplyAsk,
    read: &BTreeMap<String, Proposal>,
    request: &UnderstandRequest,
) -> Option<ReplyAsk> {
    for (name, proposal) in read {
        ask.data.insert(name.clone(), proposal.value.clone());
    }
    for step in &mut ask.steps {
        step.missing.retain(|name| !read.contains_key(name));
        // A value code read is final (the model is not asked it): the
        // prompt says it as the reply call would.
        for (name, proposal) in read.iter().filter(|(_, proposal)| !proposal.value.is_null()) {
            step.prompt = step.prompt.replace(&format!("{{{{{name}}}}}"), &to_text(&proposal.value));
        }
    }
    ask.steps.retain(|step| !step.missing.is_empty());
    ask.steps = plausible_steps(std::mem::take(&mut ask.steps), request);
    (!ask.steps.is_empty()).then_some(ask)
}

/// The offered steps the turn can plausibly stop at, fewest possible: in
/// each flow, the steps in order up to the first whose missing fields the
/// message cannot all give ([`may_give`]), where the turn stops unless the
/// model reads more than the message shows. A weak model picks among
/// fewer steps better, and every step dropped is one the turn could reach
/// only on a value the message holds no sign of.
fn plausible_steps(steps: Vec<StepAsk>, request: &UnderstandRequest) -> Vec<StepAsk> {
    let message = Message::of(request);
    let mut stopped: BTreeSet<String> = BTreeSet::new();
    let mut kept = Vec::new();
    for step in steps {
        if stopped.contains(&step.flow) {
            continue;
        }
        if !step.missing.iter().all(|name| message.may_give(request, name)) {
            stopped.insert(step.flow.clone());
        }
        kept.push(step);
    }
    kept
}

/// The message as [`plausible_steps`] reads it: its words, and the words
/// of what the request itself says (flows, fields, prompts), which name
/// what the user asks for, not a value.
struct Message<'r> {
    text: &'r str,
    today: Option<chrono::NaiveDate>,
    /// Content words of the message not found in the request's own words.
    own_words: usize,
}

impl<'r> Message<'r> {
    fn of(request: &'r UnderstandRequest) -> Message<'r> {
        let mut vocabulary = String::new();
        for flow in request.prefix.catalogue.iter().chain(&request.flows) {
            vocabulary.push_str(&flow.name);
            vocabulary.push(' ');
            vocabulary.push_str(flow.title.as_deref().unwrap_or_default());
            vocabulary.push(' ');
            vocabulary.push_str(&flow.when.join(" "));
            vocabulary.push(' ');
        }
        for field in &request.fields {
            vocabulary.push_str(&field.name.replace('_', " "));
            vocabulary.push(' ');
            vocabulary.push_str(field.description.as_deref().unwrap_or_default());
            vocabulary.push(' ');
        }
        for step in request.reply.iter().flat_map(|ask| &ask.steps) {
            vocabulary.push_str(&step.prompt);
            vocabulary.push(' ');
        }
        let known = crate::read::words_of(&vocabulary);
        let own_words = crate::read::words_of(&request.message)
            .split_whitespace()
            // A contraction's parts are words of their own ("i'd").
            .flat_map(|word| word.split('\''))
            .filter(|word| word.chars().count() > 2 && !is_stop_word(word))
            .filter(|word| !known.contains(&format!(" {word} ")))
            .count();
        Message {
            text: &request.message,
            today: chrono::NaiveDate::parse_from_str(&request.today, "%Y-%m-%d").ok(),
            own_words,
        }
    }

    /// Whether the message may give the field `name`: it is asked of the
    /// model, and the message holds something of its kind (a date for a
    /// date, a number for a number, for text a word of its own).
    fn may_give(&self, request: &UnderstandRequest, name: &str) -> bool {
        let Some(field) = request.fields.iter().find(|field| field.name == name) else {
            return false;
        };
        match field.kind.as_str() {
            "date" | "datetime" => !crate::read::dates_in(self.text, self.today).is_empty(),
            "int" | "float" => !crate::read::numbers_in(self.text).is_empty(),
            // A yes or no has no shape to look for.
            "bool" => true,
            _ => self.own_words > 0,
        }
    }
}

/// A prompt as the model is shown it: `{{field}}` for each interpolation
/// of a field this message may fill (one asked of the model, or one
/// without a value), the value of any other field as `data` holds it,
/// and the text of any other interpolation, rendered on the data before
/// the message (the plan admits only those that read nothing the message
/// may fill).
fn placeholder_text(
    st: &TurnState,
    sv: &Services,
    prompt: &Template,
    data: &Map<String, Value>,
    asked: &BTreeSet<FieldId>,
) -> String {
    let program = sv.program;
    let scope = st.scope(sv);
    let mut warnings = Vec::new();
    let mut text = String::new();
    for part in &prompt.parts {
        match part {
            TemplatePart::Text(literal) => text.push_str(literal),
            TemplatePart::Expr(expr) => {
                match plain_field(expr).and_then(|field| Some((field, program.field(field)?))) {
                    Some((field, declared)) => match data.get(&declared.name).filter(|value| !value.is_null()) {
                        Some(value) if !asked.contains(&field) => text.push_str(&to_text(value)),
                        _ => {
                            text.push_str("{{");
                            text.push_str(&declared.name);
                            text.push_str("}}");
                        }
                    },
                    None => text.push_str(&to_text(&eval(expr, &scope, &mut warnings))),
                }
            }
        }
    }
    text
}

fn plain_field(expr: &Expr) -> Option<FieldId> {
    match expr.kind {
        ExprKind::Field { field } => Some(field),
        _ => None,
    }
}

/// The id a step is offered under.
fn step_id(flow: &str, step: &str) -> String {
    format!("{flow}.{step}")
}

/// What else shapes this turn's reply besides the step's prompt, as the
/// reply stage sees it before the model would be asked.
pub(super) struct ReplyShape {
    /// The reply needs the model at all.
    pub(super) needs_model: bool,
    /// A directive's `reply` or a `halt` replaced it.
    pub(super) replaced: bool,
    /// `append_prompt` or `inject_tools` added to it.
    pub(super) augmented: bool,
}

/// A fused reply the turn may use: read whole, or still arriving, with the
/// fields its step's prompt reads that changed since the model saw them
/// (`stream_reply` reads it as it comes).
pub(super) enum Taken {
    Whole(String),
    Streaming(Vec<Unseen>),
}

impl Taken {
    /// The whole reply; a stream with nothing left to read from is
    /// unusable.
    pub(super) fn into_whole(self) -> Result<String, String> {
        match self {
            Taken::Whole(text) => Ok(text),
            Taken::Streaming(_) => Err("the reply's stream was already taken".into()),
        }
    }
}

/// The fused reply when the turn may use it, else why not.
pub(super) fn take_reply(st: &TurnState, sv: &Services, fused: &Fused, shape: &ReplyShape) -> Result<Taken, String> {
    let program = sv.program;
    let Some(reply) = &fused.reply else {
        return Err(match &fused.dropped {
            Some(problem) => format!("the answer's reply was dropped: {problem}"),
            None => "the model named no step or wrote no reply".into(),
        });
    };
    if shape.replaced {
        return Err("a directive replaced the reply".into());
    }
    if !shape.needs_model {
        return Err("the turn needed no reply from the model".into());
    }
    let Some((flow_id, step)) = asked_step(st, program) else {
        return Err(format!("the turn did not stop at a step that asks (the model named `{}`)", reply.step));
    };
    let stopped = step_id(&flow_name(sv, flow_id), &step.name);
    if stopped != reply.step {
        return Err(format!("the turn stopped at `{stopped}`, not at `{}` the model named", reply.step));
    }
    if !step.tools.is_empty() || shape.augmented {
        return Err("the step offers tools or the reply was augmented".into());
    }
    if !st.answer.says.is_empty() || st.answer.instructions.len() != 1 {
        return Err("the reply has more to say than the step's prompt".into());
    }
    let unseen = unseen_values(st, program, fused, step.prompt.as_ref());
    // A streamed reply's placeholders are read once it is whole (`stream_reply`).
    kept_as_placeholders(&unseen, fused.pending.is_none().then_some(reply.text.as_str()))?;
    // A yes or no has no words of its own to look for in the reply.
    if let Some(rejected) = unaccepted(st, fused).iter().find(|rejected| !mention::checkable(rejected.value)) {
        return Err(format!(
            "code did not accept the model's `{}`, which no reply text can be checked for",
            rejected.field
        ));
    }
    // A streamed reply's text is still arriving: `stream_reply` checks it.
    if fused.pending.is_none() {
        if reply.text.trim().is_empty() {
            return Err("the reply is empty".into());
        }
        let text = fill_placeholders(st, &reply.text)?;
        check_text(st, sv, fused, &unseen, &text)?;
        if let Some((field, value)) = omitted(st, sv, &text) {
            return Err(format!("the reply leaves out `{field}` ({value}), which the step's prompt shows"));
        }
        return Ok(Taken::Whole(text));
    }
    Ok(Taken::Streaming(unseen))
}

/// The reply with each `{{field}}` the model copied from a prompt written
/// as the field's accepted value (what the reply call would have said);
/// `Err` for one that names no field with a value: the user never sees a
/// placeholder.
fn fill_placeholders(st: &TurnState, text: &str) -> Result<String, String> {
    let mut filled = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            Piece::Text(text) => filled.push_str(text),
            Piece::Placeholder(name) => match st.session.data.get(name).filter(|value| !value.is_null()) {
                Some(value) => filled.push_str(&to_text(value)),
                None => return Err(format!("the reply holds the placeholder `{{{{{name}}}}}`, which has no value")),
            },
            Piece::Unclosed => return Err("the reply holds an unclosed `{{`".into()),
        }
    }
    Ok(filled)
}

/// A reply's text read for the placeholders a model copies from a prompt.
#[derive(Debug, PartialEq)]
enum Piece<'t> {
    Text(&'t str),
    /// `{{name}}`, the name trimmed.
    Placeholder(&'t str),
    /// A `{{` with no `}}` after it; nothing is read past it.
    Unclosed,
}

/// The pieces of `text`, in order: the one reader of its placeholders.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            pieces.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            pieces.push(Piece::Unclosed);
            return pieces;
        };
        pieces.push(Piece::Placeholder(after[..end].trim()));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    pieces
}

/// The proposals the data does not hold as the model wrote them, now that
/// the turn has resolved: grounding, validation or the consent rule set
/// them aside, code read another value, or a step changed it since.
fn unaccepted<'f>(st: &TurnState, fused: &'f Fused) -> Vec<Unaccepted<'f>> {
    fused
        .proposed
        .iter()
        .filter(|(_, proposal)| !proposal.value.is_null())
        .filter(|(name, proposal)| !st.session.data.get(*name).is_some_and(|now| same_value(&proposal.value, now)))
        .map(|(name, proposal)| Unaccepted {
            field: name,
            value: &proposal.value,
            evidence: proposal.evidence.as_deref(),
        })
        .collect()
}

/// Whether a proposed value is the accepted one, written alike: the same
/// JSON, or the same words (case and punctuation aside), or the same
/// number.
fn same_value(proposed: &Value, accepted: &Value) -> bool {
    if proposed == accepted {
        return true;
    }
    let number = |value: &Value| match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse::<f64>().ok(),
        _ => None,
    };
    if let (Some(proposed), Some(accepted)) = (number(proposed), number(accepted)) {
        return proposed == accepted;
    }
    match (proposed, accepted) {
        (Value::String(proposed), Value::String(accepted)) => {
            let words = crate::read::words_of(proposed);
            !words.trim().is_empty() && words == crate::read::words_of(accepted)
        }
        _ => false,
    }
}

/// The reply's text against every value code did not accept: `Err` names
/// the first it mentions.
fn check_text(st: &TurnState, sv: &Services, fused: &Fused, unseen: &[Unseen], text: &str) -> Result<(), String> {
    let prompt = st.answer.instructions.first().map(String::as_str).unwrap_or_default();
    let known: Vec<String> = st.session.data.values().filter(|value| !value.is_null()).map(to_text).collect();
    let expected =
        Expected { prompt, known: &known, message: &st.message, today: sv.tool_env.clock.now().date_naive() };
    for rejected in unaccepted(st, fused) {
        if let Some(rendering) = mention::mentioned(text, &rejected, &expected) {
            return Err(format!("the reply mentions {rendering}, which code did not accept for `{}`", rejected.field));
        }
    }
    // A value the model saw that is no longer the field's, left to code's
    // placeholder, must not be in the reply's own words either.
    for gone in unseen {
        let Some(seen) = gone.seen.as_ref() else {
            continue;
        };
        let stale = Unaccepted { field: &gone.name, value: seen, evidence: None };
        if let Some(rendering) = mention::mentioned(text, &stale, &expected) {
            return Err(format!("the reply mentions {rendering}, no longer the value of `{}`", gone.name));
        }
    }
    Ok(())
}

/// Shows a streamed fused reply to the user as it arrives and returns it,
/// or why it cannot be used: leading whitespace is held back, so a reply
/// that turns out empty has shown nothing and the reply call is made
/// instead. When code did not accept some value the model proposed, or an
/// offered prompt has a placeholder the model may copy, the whole reply is
/// read first, its placeholders filled, and shown only if it mentions none
/// of those values (the user never sees half a reply that is then
/// withdrawn). A stream
/// that fails midway fails the turn, as a reply call's would (part of it
/// may have been shown). The tokens the call reported after the extraction
/// are counted here. Also says whether any of it was shown.
pub(super) fn stream_reply(
    st: &mut TurnState,
    sv: &mut Services,
    fused: &Fused,
    unseen: &[Unseen],
    stream: ReplyStream,
) -> Result<(Result<String, String>, bool), TurnError> {
    let mut shown = false;
    let outcome = read_stream(st, sv, fused, unseen, stream, &mut shown)?;
    Ok((outcome, shown))
}

fn read_stream(
    st: &mut TurnState,
    sv: &mut Services,
    fused: &Fused,
    unseen: &[Unseen],
    mut stream: ReplyStream,
    any_shown: &mut bool,
) -> Result<Result<String, String>, TurnError> {
    // A model copies the placeholders of the prompts it was shown: a reply
    // that may hold one is read whole, filled, then shown.
    let mut hold = !unaccepted(st, fused).is_empty()
        || !unseen.is_empty()
        || fused.ask.steps.iter().any(|step| step.prompt.contains("{{"));
    // Shown a word at a time, and held from a token nothing the model was
    // given backs (`claims.rs`): such a reply is set aside.
    let grounds = Grounds::fused(sv.claims_setting(), &st.session, &st.message, &fused.ask, &st.answer.instructions);
    let mut text = String::new();
    let mut shown = 0;
    let result = loop {
        let piece = match stream.next_piece() {
            Ok(Some(piece)) => piece,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        text.push_str(&piece);
        // One the prompts did not suggest is held from where it starts.
        hold |= text.contains("{{") || text.ends_with('{');
        if hold {
            continue;
        }
        let Some(end) = grounds.release(&text, shown) else {
            hold = true;
            continue;
        };
        let show = if shown > 0 { &text[shown..end] } else { text[..end].trim_start() };
        if show.is_empty() {
            continue;
        }
        if let Some(sink) = sv.stream.as_mut() {
            sink(show);
            *any_shown = true;
        }
        shown = end;
    };
    st.counters.usage.add(stream.late_usage());
    result?;
    if text.trim().is_empty() {
        return Ok(Err("the reply is empty".into()));
    }
    // What was shown stays shown: a reply set aside after it began (a
    // placeholder with no value that no prompt suggested) is followed by
    // the reply call's. Nothing is held back for the values check then:
    // with no value set aside, there is nothing to check.
    if let Err(reason) = kept_as_placeholders(unseen, Some(&text)) {
        return Ok(Err(reason));
    }
    let (before, held) = text.split_at(shown);
    let held = match fill_placeholders(st, if shown == 0 { held.trim_start() } else { held }) {
        Ok(held) => held,
        Err(reason) => return Ok(Err(reason)),
    };
    let whole = format!("{}{held}", before.trim_start());
    if let Err(reason) = check_text(st, sv, fused, unseen, &whole) {
        return Ok(Err(reason));
    }
    if let Some((field, value)) = omitted(st, sv, &whole) {
        return Ok(Err(format!("the reply leaves out `{field}` ({value}), which the step's prompt shows")));
    }
    if let Some(claim) = grounds.unfounded(&whole) {
        let (event, reason) = claims::set_aside(claim);
        st.emit(event);
        return Ok(Err(reason));
    }
    if !held.is_empty()
        && let Some(sink) = sv.stream.as_mut()
    {
        sink(&held);
    }
    Ok(Ok(whole))
}

/// A field the step's prompt reads whose value now is not the one the
/// model wrote the reply with, and the value it saw.
pub(super) struct Unseen {
    name: String,
    seen: Option<Value>,
    /// Read by a computed interpolation, which no placeholder stands for.
    computed: bool,
}

/// The first value the step the turn stopped at shows in its prompt
/// (a field interpolated as such) that `reply` does not say in any
/// rendering, as field and value: a reply without it would have the user
/// answer something other than what code holds ("Shall I book Grand Hotel
/// on 5 guests?" while the data holds 2).
pub(super) fn omitted(st: &TurnState, sv: &Services, reply: &str) -> Option<(String, String)> {
    let (_, step) = asked_step(st, sv.program)?;
    let prompt = step.prompt.as_ref()?;
    let shown: Vec<(&str, &Value)> = prompt
        .parts
        .iter()
        .filter_map(|part| match part {
            TemplatePart::Expr(expr) => plain_field(expr),
            TemplatePart::Text(_) => None,
        })
        .filter_map(|field| sv.program.field(field))
        .filter_map(|declared| {
            let value = st.session.data.get(&declared.name).filter(|value| !value.is_null())?;
            mention::checkable(value).then_some((declared.name.as_str(), value))
        })
        .collect();
    if shown.is_empty() {
        return None;
    }
    let values: Vec<&Value> = shown.iter().map(|(_, value)| *value).collect();
    let unsaid = mention::first_unsaid(reply, &values, sv.tool_env.clock.now().date_naive())?;
    shown.get(unsaid).map(|(name, value)| (name.to_string(), to_text(value)))
}

/// The step the turn stopped at to ask.
fn asked_step<'p>(st: &TurnState, program: &'p Program) -> Option<(FlowId, &'p crate::ir::Step)> {
    st.answer
        .asking
        .filter(|_| st.stop == Some(StopReason::NeedsInput))
        .and_then(|(flow, step)| Some((flow, program.flow(flow)?.step(step)?)))
}

/// The fields the step's prompt reads whose value now is not the one the
/// model wrote the reply with: a field interpolated as such against what
/// the model saw, one a computed interpolation reads against the data the
/// prompt was shown rendered with.
fn unseen_values(st: &TurnState, program: &Program, fused: &Fused, prompt: Option<&Template>) -> Vec<Unseen> {
    let Some(prompt) = prompt else {
        return Vec::new();
    };
    let mut plain: BTreeSet<FieldId> = BTreeSet::new();
    let mut computed: BTreeSet<FieldId> = BTreeSet::new();
    for part in &prompt.parts {
        let TemplatePart::Expr(expr) = part else {
            continue;
        };
        match plain_field(expr) {
            Some(field) => {
                plain.insert(field);
            }
            None => expr.walk(&mut |node| {
                if let ExprKind::Field { field } = node.kind {
                    computed.insert(field);
                }
            }),
        }
    }
    fn set<'m>(map: &'m Map<String, Value>, name: &str) -> Option<&'m Value> {
        map.get(name).filter(|value| !value.is_null())
    }
    let differs = |field: &FieldId, seen: &Map<String, Value>, computed: bool| {
        program.field(*field).and_then(|declared| {
            let now = st.session.data.get(&declared.name).filter(|value| !value.is_null());
            let seen = set(seen, &declared.name);
            (now != seen).then(|| Unseen { name: declared.name.clone(), seen: seen.cloned(), computed })
        })
    };
    let plain = plain.iter().filter_map(|field| differs(field, &fused.view, false));
    plain.chain(computed.iter().filter_map(|field| differs(field, &fused.ask.data, true))).collect()
}

/// Whether the reply stands although values its step's prompt reads
/// changed since the model saw them: only where it left each such field
/// as the prompt's `{{field}}`, which code fills with the accepted value
/// (what the reply call would have said), so the value the model saw is
/// not what the user reads. `text` is `None` while a streamed reply is
/// still arriving: only what no placeholder can mend is judged then.
fn kept_as_placeholders(unseen: &[Unseen], text: Option<&str>) -> Result<(), String> {
    let holds = |name: &str| text.is_none_or(|text| pieces(text).contains(&Piece::Placeholder(name)));
    match unseen.iter().find(|gone| gone.computed || !holds(&gone.name)) {
        Some(gone) => Err(format!("the step's prompt reads `{}`, whose value is not the one the model saw", gone.name)),
        None => Ok(()),
    }
}

/// Traces what became of a fused reply.
pub(super) fn trace(st: &mut TurnState, fused: &Fused, outcome: &Result<String, String>) {
    st.emit(Event::FusedReply {
        step: fused.reply.as_ref().map(|reply| reply.step.clone()),
        used: outcome.is_ok(),
        reason: outcome.as_ref().err().cloned(),
    });
}

#[cfg(test)]
mod tests {
    use super::{Piece, pieces};

    #[test]
    fn a_reply_is_read_into_text_and_placeholders_once() {
        assert_eq!(
            pieces("Book {{ hotel }} on {{date}}?"),
            [
                Piece::Text("Book "),
                Piece::Placeholder("hotel"),
                Piece::Text(" on "),
                Piece::Placeholder("date"),
                Piece::Text("?")
            ]
        );
        assert_eq!(pieces("{{guests}}"), [Piece::Placeholder("guests")]);
        assert_eq!(pieces("no placeholder"), [Piece::Text("no placeholder")]);
        assert_eq!(pieces("cut {{ short"), [Piece::Text("cut "), Piece::Unclosed]);
        assert!(pieces("").is_empty());
    }
}
