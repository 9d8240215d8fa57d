//! The directive bus: directives evaluated into [`Emission`]s (values, not
//! expressions), tagged with their [`Source`], and merged per phase by the
//! rules of LANGUAGE.md section 5:
//!
//! - position fields are winner-takes-all by precedence
//!   `abort > complete > goto/goto_step > reset`, the last emission winning
//!   inside a tier;
//! - `reply`: the last wins; `set`/`set_context` shallow-merge in emission
//!   order (validated later as one unit); `append_prompt` concatenates;
//!   `inject_tools` concatenates and dedupes by name, the later one winning;
//!   `halt` is a logical OR;
//! - `reply` together with `abort` (from two sources): abort wins and the
//!   reply is dropped with a trace warning.

#![warn(missing_docs)]

use crate::ir::successor::Jump;
use crate::ir::{FlowId, StepId, ToolId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a directive came from, rendered `kind:path` in traces, JSON and
/// saved sessions (`pending`, `signal:wants_human`,
/// `branch:booking.confirm#2`, `hook:booking.confirm.prepare`,
/// `action:booking.book#1`, `tool:book_hotel`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Source {
    /// A directive armed by the last turn's post-phase signals, applied
    /// first thing this turn.
    Pending,
    /// A signal's directive (the signal's name).
    Signal(String),
    /// A branch entry's directive (where the entry is, as `flow.step#n`).
    Branch(String),
    /// A flow or step hook (`on_enter`, `prepare`, `finalize`, `on_complete`).
    Hook(String),
    /// An `emit` in a step's `do`.
    Action(String),
    /// A tool result's `directive`.
    Tool(String),
    /// A step's `on_no_answer`.
    OnNoAnswer(String),
    /// A step's `on_error`.
    OnError(String),
    /// Post-phase signals that matched together and armed one directive
    /// (`signal:a+signal:b`).
    Armed(Vec<Source>),
}

impl Source {
    fn kind_and_path(&self) -> Option<(&'static str, &str)> {
        match self {
            Source::Signal(path) => Some(("signal", path)),
            Source::Branch(path) => Some(("branch", path)),
            Source::Hook(path) => Some(("hook", path)),
            Source::Action(path) => Some(("action", path)),
            Source::Tool(path) => Some(("tool", path)),
            Source::OnNoAnswer(path) => Some(("on_no_answer", path)),
            Source::OnError(path) => Some(("on_error", path)),
            Source::Pending | Source::Armed(_) => None,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self, self.kind_and_path()) {
            (_, Some((kind, path))) => write!(formatter, "{kind}:{path}"),
            (Source::Armed(sources), _) => {
                for (index, source) in sources.iter().enumerate() {
                    if index > 0 {
                        formatter.write_str("+")?;
                    }
                    write!(formatter, "{source}")?;
                }
                Ok(())
            }
            _ => formatter.write_str("pending"),
        }
    }
}

impl From<Source> for String {
    fn from(source: Source) -> String {
        source.to_string()
    }
}

/// Reads a source back from a saved session.
impl TryFrom<String> for Source {
    type Error = String;

    fn try_from(text: String) -> Result<Source, String> {
        if text == "pending" {
            return Ok(Source::Pending);
        }
        if text.contains('+') {
            let parts: Result<Vec<Source>, String> =
                text.split('+').map(|part| Source::try_from(part.to_string())).collect();
            return parts.map(Source::Armed);
        }
        let Some((kind, path)) = text.split_once(':') else {
            return Err(format!("`{text}` is not a directive source"));
        };
        let path = path.to_string();
        match kind {
            "signal" => Ok(Source::Signal(path)),
            "branch" => Ok(Source::Branch(path)),
            "hook" => Ok(Source::Hook(path)),
            "action" => Ok(Source::Action(path)),
            "tool" => Ok(Source::Tool(path)),
            "on_no_answer" => Ok(Source::OnNoAnswer(path)),
            "on_error" => Ok(Source::OnError(path)),
            _ => Err(format!("`{text}` is not a directive source")),
        }
    }
}

/// A position to move to, with evaluated data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Move {
    /// Start a flow, with the data it is handed.
    Goto {
        /// The flow.
        flow: FlowId,
        /// Field values handed to it.
        data: Vec<(String, Value)>,
    },
    /// Go to a step of a flow.
    GotoStep {
        /// The step's flow.
        flow: FlowId,
        /// The step.
        step: StepId,
    },
    /// Complete the current flow, going on to `next` if given.
    Complete {
        /// The flow to start next.
        next: Option<FlowId>,
    },
    /// Abort the current flow.
    Abort {
        /// Why, as the directive says it.
        reason: Option<String>,
    },
    /// Restart the current flow from its entry (a new run of it).
    Reset,
}

impl Move {
    /// Where the move goes, without what it carries.
    pub fn jump(&self) -> Jump {
        match self {
            Move::Goto { flow, .. } => Jump::Goto(*flow),
            Move::GotoStep { flow, step } => Jump::GotoStep(*flow, *step),
            Move::Complete { next } => Jump::Complete(*next),
            Move::Abort { .. } => Jump::Abort,
            Move::Reset => Jump::Reset,
        }
    }

    /// The move's rank when emissions compete: the higher one wins.
    pub fn precedence(&self) -> u8 {
        self.jump().precedence()
    }
}

/// One evaluated directive from one source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Emission {
    /// Where the directive came from.
    pub source: Source,
    /// Where it moves the conversation, if anywhere.
    pub position: Option<Move>,
    /// The reply it gives instead of the model's.
    pub reply: Option<String>,
    /// Field name and value, in emission order.
    pub set: Vec<(String, Value)>,
    /// Context values to set, by key.
    pub set_context: Vec<(String, Value)>,
    /// Text appended to the reply's prompt.
    pub append_prompt: Vec<String>,
    /// Tools offered to the model for this reply.
    pub inject_tools: Vec<ToolId>,
    /// Stop before the model is asked.
    pub halt: bool,
}

impl Emission {
    /// An emission from `source` that does nothing yet.
    pub fn new(source: Source) -> Emission {
        Emission {
            source,
            position: None,
            reply: None,
            set: Vec::new(),
            set_context: Vec::new(),
            append_prompt: Vec::new(),
            inject_tools: Vec::new(),
            halt: false,
        }
    }

    /// Whether it carries augmentation, which acts only before the model.
    pub fn has_augmentation(&self) -> bool {
        self.halt || !self.append_prompt.is_empty() || !self.inject_tools.is_empty()
    }
}

/// The result of merging one phase's emissions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Merged {
    /// The winning position and the index of the emission it came from.
    pub position: Option<(Move, usize)>,
    /// The winning reply and the index of the emission it came from.
    pub reply: Option<(String, usize)>,
    /// Shallow-merged: one value per field, the last emission winning.
    pub set: Vec<(String, Value)>,
    /// Context values, the last emission winning.
    pub set_context: Vec<(String, Value)>,
    /// Prompt additions, in emission order.
    pub append_prompt: Vec<String>,
    /// Tools offered, in emission order.
    pub inject_tools: Vec<ToolId>,
    /// Whether any emission halted.
    pub halt: bool,
    /// Trace warnings (a reply dropped because abort won).
    pub warnings: Vec<String>,
}

/// Merges one phase's emissions by the rules in the module doc.
pub fn merge(emissions: &[Emission]) -> Merged {
    let mut merged = Merged::default();
    for (index, emission) in emissions.iter().enumerate() {
        if let Some(position) = &emission.position {
            let wins = match &merged.position {
                None => true,
                Some((current, _)) => position.precedence() >= current.precedence(),
            };
            if wins {
                merged.position = Some((position.clone(), index));
            }
        }
        if let Some(reply) = &emission.reply {
            merged.reply = Some((reply.clone(), index));
        }
        shallow_merge(&mut merged.set, &emission.set);
        shallow_merge(&mut merged.set_context, &emission.set_context);
        merged.append_prompt.extend(emission.append_prompt.iter().cloned());
        for tool in &emission.inject_tools {
            merged.inject_tools.retain(|existing| existing != tool);
            merged.inject_tools.push(*tool);
        }
        merged.halt |= emission.halt;
    }
    if let (Some((Move::Abort { .. }, abort_index)), Some((_, reply_index))) = (&merged.position, &merged.reply) {
        let abort_source = emissions.get(*abort_index).map(|emission| emission.source.to_string());
        let reply_source = emissions.get(*reply_index).map(|emission| emission.source.to_string());
        merged.warnings.push(format!(
            "the reply from {} was dropped: abort from {} wins",
            reply_source.unwrap_or_default(),
            abort_source.unwrap_or_default()
        ));
        merged.reply = None;
    }
    merged
}

fn shallow_merge(into: &mut Vec<(String, Value)>, writes: &[(String, Value)]) {
    for (name, value) in writes {
        match into.iter_mut().find(|(existing, _)| existing == name) {
            Some(slot) => slot.1 = value.clone(),
            None => into.push((name.clone(), value.clone())),
        }
    }
}

/// The directive as JSON in the language's own keys, for traces and `--json`.
pub fn describe(emission: &Emission, program: &crate::ir::Program) -> Value {
    let mut object = serde_json::Map::new();
    let flow_name = |flow: FlowId| program.flow(flow).map_or_else(String::new, |flow| flow.name.clone());
    match &emission.position {
        Some(Move::Goto { flow, data }) if data.is_empty() => {
            object.insert("goto".into(), flow_name(*flow).into());
        }
        Some(Move::Goto { flow, data }) => {
            let data: serde_json::Map<String, Value> = data.iter().cloned().collect();
            object.insert("goto".into(), serde_json::json!({ "flow": flow_name(*flow), "data": data }));
        }
        Some(Move::GotoStep { flow, step }) => {
            let step_name = program
                .flow(*flow)
                .and_then(|found| found.step(*step))
                .map_or_else(String::new, |step| step.name.clone());
            object.insert("goto_step".into(), serde_json::json!({ "flow": flow_name(*flow), "step": step_name }));
        }
        Some(Move::Complete { next: None }) => {
            object.insert("complete".into(), true.into());
        }
        Some(Move::Complete { next: Some(next) }) => {
            object.insert("complete".into(), serde_json::json!({ "next": flow_name(*next) }));
        }
        Some(Move::Abort { reason }) => {
            object.insert("abort".into(), reason.clone().map_or(Value::Bool(true), Value::String));
        }
        Some(Move::Reset) => {
            object.insert("reset".into(), true.into());
        }
        None => {}
    }
    if let Some(reply) = &emission.reply {
        object.insert("reply".into(), reply.clone().into());
    }
    if !emission.set.is_empty() {
        object.insert("set".into(), Value::Object(emission.set.iter().cloned().collect()));
    }
    if !emission.set_context.is_empty() {
        object.insert("set_context".into(), Value::Object(emission.set_context.iter().cloned().collect()));
    }
    if !emission.append_prompt.is_empty() {
        object.insert("append_prompt".into(), emission.append_prompt.clone().into());
    }
    if !emission.inject_tools.is_empty() {
        let names: Vec<Value> = emission
            .inject_tools
            .iter()
            .filter_map(|tool| program.tool(*tool).map(|tool| Value::String(tool.name.clone())))
            .collect();
        object.insert("inject_tools".into(), Value::Array(names));
    }
    if emission.halt {
        object.insert("halt".into(), true.into());
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn emission(source: &str) -> Emission {
        Emission::new(Source::Action(source.to_string()))
    }

    fn with_position(source: &str, position: Move) -> Emission {
        Emission { position: Some(position), ..emission(source) }
    }

    #[test]
    fn precedence_decides_between_position_fields() {
        let merged = merge(&[
            with_position("a", Move::Complete { next: None }),
            with_position("b", Move::Goto { flow: FlowId(1), data: vec![] }),
            with_position("c", Move::Reset),
        ]);
        assert_eq!(merged.position, Some((Move::Complete { next: None }, 0)));
    }

    #[test]
    fn last_emission_wins_inside_a_tier() {
        let merged = merge(&[
            with_position("a", Move::Goto { flow: FlowId(1), data: vec![] }),
            with_position("b", Move::GotoStep { flow: FlowId(0), step: StepId(2) }),
        ]);
        assert_eq!(merged.position, Some((Move::GotoStep { flow: FlowId(0), step: StepId(2) }, 1)));
    }

    #[test]
    fn writes_merge_shallowly_in_emission_order() {
        let mut first = emission("a");
        first.set = vec![("date".into(), "2026-12-04".into()), ("guests".into(), 2.into())];
        let mut second = emission("b");
        second.set = vec![("guests".into(), 3.into())];
        let merged = merge(&[first, second]);
        assert_eq!(merged.set, vec![("date".into(), "2026-12-04".into()), ("guests".into(), 3.into())]);
    }

    #[test]
    fn halt_is_an_or_and_tools_dedupe_later_wins() {
        let mut first = emission("a");
        first.halt = true;
        first.inject_tools = vec![ToolId(1), ToolId(2)];
        let mut second = emission("b");
        second.inject_tools = vec![ToolId(1)];
        second.append_prompt = vec!["x".into()];
        let merged = merge(&[first, second]);
        assert!(merged.halt);
        assert_eq!(merged.inject_tools, vec![ToolId(2), ToolId(1)]);
        assert_eq!(merged.append_prompt, vec!["x".to_string()]);
    }

    #[test]
    fn abort_drops_a_reply_from_another_source_with_a_warning() {
        let mut reply = emission("f.s#1");
        reply.reply = Some("hello".into());
        let mut abort = with_position("", Move::Abort { reason: None });
        abort.source = Source::Signal("stop".into());
        let merged = merge(&[reply, abort]);
        assert_eq!(merged.reply, None);
        assert_eq!(merged.warnings.len(), 1);
        assert!(merged.warnings[0].contains("signal:stop"));
    }

    fn any_move() -> impl Strategy<Value = Option<Move>> {
        prop_oneof![
            Just(None),
            Just(Some(Move::Reset)),
            (0u32..3).prop_map(|flow| Some(Move::Goto { flow: FlowId(flow), data: vec![] })),
            (0u32..3, 0u32..3).prop_map(|(flow, step)| Some(Move::GotoStep { flow: FlowId(flow), step: StepId(step) })),
            Just(Some(Move::Complete { next: None })),
            Just(Some(Move::Abort { reason: None })),
        ]
    }

    proptest! {
        #[test]
        fn abort_always_wins(moves in proptest::collection::vec(any_move(), 0..12)) {
            let emissions: Vec<Emission> = moves
                .iter()
                .enumerate()
                .map(|(index, position)| Emission { position: position.clone(), ..emission(&index.to_string()) })
                .collect();
            let merged = merge(&emissions);
            let any_abort = moves.iter().any(|position| matches!(position, Some(Move::Abort { .. })));
            prop_assert_eq!(any_abort, matches!(merged.position, Some((Move::Abort { .. }, _))));
        }

        #[test]
        fn no_lower_precedence_position_survives_a_higher_one(moves in proptest::collection::vec(any_move(), 0..12)) {
            let emissions: Vec<Emission> = moves
                .iter()
                .enumerate()
                .map(|(index, position)| Emission { position: position.clone(), ..emission(&index.to_string()) })
                .collect();
            let merged = merge(&emissions);
            let highest = moves.iter().flatten().map(Move::precedence).max();
            prop_assert_eq!(merged.position.as_ref().map(|(position, _)| position.precedence()), highest);
            if let Some((position, index)) = &merged.position {
                // The winner is the last emission of the winning tier.
                let last_of_tier = moves
                    .iter()
                    .rposition(|candidate| candidate.as_ref().map(Move::precedence) == Some(position.precedence()));
                prop_assert_eq!(Some(*index), last_of_tier);
            }
        }
    }

    #[test]
    fn a_source_reads_back_from_the_text_a_session_saved() {
        let armed = Source::Armed(vec![Source::Signal("wants_human".into()), Source::Signal("angry".into())]);
        for source in [
            Source::Pending,
            Source::Branch("booking.confirm#2".into()),
            Source::Hook("booking.confirm.prepare".into()),
            Source::Action("booking.book#1".into()),
            Source::Tool("book_hotel".into()),
            Source::OnNoAnswer("booking.ask".into()),
            Source::OnError("booking.book".into()),
            armed,
        ] {
            let saved = serde_json::to_value(&source).unwrap_or_default();
            assert_eq!(saved, Value::String(source.to_string()));
            assert_eq!(serde_json::from_value::<Source>(saved).ok(), Some(source));
        }
        assert_eq!(
            Source::Armed(vec![Source::Signal("a".into()), Source::Signal("b".into())]).to_string(),
            "signal:a+signal:b"
        );
        assert!(serde_json::from_value::<Source>(Value::String("nowhere".into())).is_err());
    }
}
