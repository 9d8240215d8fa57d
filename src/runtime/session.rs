//! A conversation's (or workflow run's) whole state, serializable so any
//! store can keep it: position, data, context, history, the pending
//! directive, signal records, step records and the version a store uses
//! for compare-and-swap; and what decides whether a stored session can go
//! on with an edited program ([`adopt`]).

#![warn(missing_docs)]

use super::directive::Emission;
use super::validate::validate;
use crate::ir::{FlowId, Program, StepId};
use crate::llm::Usage;
use crate::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Field or context values by name.
pub type Data = BTreeMap<String, serde_json::Value>;

/// One conversation's state between turns: where it stands, what it
/// collected, its history and what it spent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The session's id.
    pub id: String,
    /// Hash of the program the session runs; a session is refused by a
    /// different program (its ids would mean other things).
    pub program_hash: String,
    /// The current flow, if any.
    pub flow: Option<FlowId>,
    /// The current step: the one that asked and waits for an answer, or
    /// where an interrupted auto chain resumes.
    pub step: Option<StepId>,
    /// The names of `flow` and `step` when the session was last saved: an
    /// edited program finds them by name (see [`adopt`]).
    #[serde(default)]
    pub flow_name: Option<String>,
    #[serde(default)]
    /// The name of `step` when last saved.
    pub step_name: Option<String>,
    /// How many times the current step has asked.
    pub asks: u32,
    /// Set fields only; an absent field is unset (null).
    pub data: Data,
    /// What the current step showed when it last asked, if it collects a
    /// confirmation: the values its consent is about ([`Step::confirms`]).
    ///
    /// [`Step::confirms`]: crate::ir::Step::confirms
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Offered>,
    /// Context values, by key.
    pub context: Data,
    /// The conversation so far, oldest first.
    pub history: Vec<Message>,
    /// The summary of the oldest messages of `history`, sent to the model in
    /// their place (`agent.history.summarize`); absent in sessions that
    /// never needed one, and in those saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<HistorySummary>,
    /// Armed by a post-phase signal; applied first thing next turn.
    pub pending: Option<Emission>,
    /// Per signal, what its `behavior` remembers.
    pub signals: BTreeMap<String, SignalRecord>,
    /// Turns taken.
    pub turns: u32,
    /// Tokens spent over all turns.
    pub usage: Usage,
    /// Time spent running this session's turns, kept only while the runtime
    /// limits it ([`crate::runtime::engine::ContinuationLimits::max_session_time`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_time_ms: Option<u64>,
    /// Incremented on every saved turn (stores compare-and-swap on it).
    pub version: u64,
}

/// The values a confirming step asked about, keyed by field name (an unset
/// field is `null`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    /// The flow of the confirming step.
    pub flow: FlowId,
    /// The confirming step.
    pub step: StepId,
    /// The values it showed, by field name.
    pub values: BTreeMap<String, serde_json::Value>,
}

/// A summary of the oldest messages of a session's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySummary {
    /// The summary, as the model wrote it.
    pub text: String,
    /// How many of the history's first messages it stands for.
    pub through: usize,
}

/// What a signal's `behavior` needs to remember.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRecord {
    /// How many times the signal fired.
    pub fired: u32,
    /// RFC 3339.
    pub last_fired_at: Option<String>,
}

impl Session {
    /// A new session of the program whose hash is `program_hash`.
    pub fn new(id: impl Into<String>, program_hash: impl Into<String>) -> Session {
        Session { id: id.into(), program_hash: program_hash.into(), ..Session::default() }
    }

    /// The history a model request carries: the summary (if any) in place
    /// of the messages it stands for, then at most the last `keep_last`
    /// messages after them.
    pub fn model_history(&self, keep_last: usize) -> Vec<Message> {
        let after = self.unsummarised();
        let kept = after.get(after.len().saturating_sub(keep_last)..).unwrap_or_default();
        let summary = self.summary.as_ref().map(|summary| crate::llm::context::summary::summary_message(&summary.text));
        summary.into_iter().chain(kept.iter().cloned()).collect()
    }

    /// Drops the messages no model request will carry again under
    /// `history` (the transcript keeps every one): those a summary stands
    /// for, and without `summarize` all but the last `keep_last` after it.
    /// With `summarize` the messages after the summary stay, as the next
    /// turn folds those past `keep_last` into it, but no more than
    /// [`UNFOLDED_KEPT`] (or twice `keep_last`): a summary call that keeps
    /// failing folds nothing, and every turn writes what is kept.
    pub fn keep_history(&mut self, history: &crate::ir::History) {
        let through = self.summarised();
        let keep_last = usize::try_from(history.keep_last).unwrap_or(usize::MAX);
        let kept = if history.summarize { keep_last.saturating_mul(2).max(UNFOLDED_KEPT) } else { keep_last };
        self.drop_oldest(through.max(self.history.len().saturating_sub(kept)));
    }

    /// Drops the first `count` messages of the history; a summary that
    /// stood for some of them stands for the rest of those only.
    pub(crate) fn drop_oldest(&mut self, count: usize) {
        let count = count.min(self.history.len());
        let through = self.summarised().saturating_sub(count);
        if let Some(summary) = &mut self.summary {
            summary.through = through;
        }
        self.history.drain(..count);
    }

    /// How many of the history's first messages the summary stands for
    /// (none without one; never more than the history holds).
    fn summarised(&self) -> usize {
        self.summary.as_ref().map_or(0, |summary| summary.through.min(self.history.len()))
    }

    /// The history's messages after the ones its summary stands for.
    pub(crate) fn unsummarised(&self) -> &[Message] {
        self.history.get(self.summarised()..).unwrap_or_default()
    }
}

/// The fewest messages after its summary a session with `summarize` keeps
/// ([`Session::keep_history`]), unless twice its `keep_last` is more.
pub const UNFOLDED_KEPT: usize = 32;

/// A stable hash of a program's IR, for [`Session::program_hash`].
pub fn program_hash(program: &crate::ir::Program) -> String {
    // FNV-1a over the IR's compact JSON without spans: stable across Rust
    // versions and platforms, unlike `DefaultHasher`, and unchanged by edits
    // that only move code around.
    struct Fnv1a(u64);
    impl std::io::Write for Fnv1a {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            for byte in bytes {
                self.0 ^= u64::from(*byte);
                self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hasher = Fnv1a(0xcbf2_9ce4_8422_2325);
    // Writing into the hasher cannot fail, and the IR has no map with
    // non-string keys.
    let _ = crate::source::write_json(program, false, false, &mut hasher);
    let hash = hasher.0;
    format!("{hash:016x}")
}

impl Session {
    /// Records the names of the current flow and step, so that an edited
    /// program can find them again; called before every save.
    pub fn record_position(&mut self, program: &Program) {
        let flow = self.flow.and_then(|flow| program.flow(flow));
        self.flow_name = flow.map(|flow| flow.name.clone());
        self.step_name = self.step.and_then(|step| flow.and_then(|flow| flow.step(step))).map(|step| step.name.clone());
    }
}

/// Why a stored session cannot go on with this program, and what to do.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("session `{session}` cannot go on with this program: {problem}\nhelp: {help}")]
pub struct Incompatible {
    /// The session's id.
    pub session: String,
    /// What in the program no longer fits the session.
    pub problem: String,
    /// What to do about it.
    pub help: String,
}

/// Makes a stored session run on `program` (whose hash is `hash`), or says
/// why it cannot. The same program takes it as it is, once its positions
/// are checked to be in range. An edited program takes it when what the
/// session relies on is still there: its flow and step (found by name, so
/// steps may be added, moved or reworded), and every stored data and
/// context value still types against the schema. Wording and prompts do not
/// matter.
pub fn adopt(program: &Program, hash: &str, session: &mut Session) -> Result<(), Incompatible> {
    let id = session.id.clone();
    let incompatible = |problem: String, help: String| Incompatible { session: id.clone(), problem, help };
    let delete = format!("delete it with `flowc sessions delete {}` to start over", session.id);
    if session.step.is_some() && session.flow.is_none() {
        return Err(incompatible("it has a step but no flow".to_string(), delete));
    }
    if session.program_hash == hash {
        let flow = session.flow.map(|flow| program.flow(flow));
        if flow.is_some_and(|flow| flow.is_none()) {
            return Err(incompatible("its flow is out of range".to_string(), delete));
        }
        let step_in_range = session.step.is_none_or(|step| flow.flatten().and_then(|flow| flow.step(step)).is_some());
        if !step_in_range {
            return Err(incompatible("its step is out of range".to_string(), delete));
        }
        return Ok(());
    }
    if session.pending.is_some() {
        return Err(incompatible(
            "it holds a directive armed by the previous version of the program for its next turn".to_string(),
            format!("run one more turn with the previous version, or {delete}"),
        ));
    }
    let flow = match (session.flow, &session.flow_name) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(incompatible("it was saved without the name of its flow".to_string(), delete));
        }
        (Some(_), Some(name)) => match program.flow_by_name(name) {
            Some(flow) => Some(flow),
            None => {
                return Err(incompatible(
                    format!("its flow `{name}` is no longer in the program"),
                    format!("put the flow `{name}` back, or {delete}"),
                ));
            }
        },
    };
    let step = match (session.step, &session.step_name, flow.and_then(|flow| program.flow(flow))) {
        (None, _, _) => None,
        (Some(_), Some(name), Some(flow)) => match flow.step_by_name(name) {
            Some(step) => Some(step),
            None => {
                return Err(incompatible(
                    format!("its step `{}.{name}` is no longer in the program", flow.name),
                    format!("put the step `{name}` back in `{}`, or {delete}", flow.name),
                ));
            }
        },
        (Some(_), _, _) => {
            return Err(incompatible("it was saved without the name of its step".to_string(), delete));
        }
    };
    for (kind, stored, declared) in
        [("field", &session.data, &program.fields), ("context key", &session.context, &program.context)]
    {
        for (name, value) in stored {
            let Some(declaration) = declared.iter().find(|declaration| declaration.name == *name) else {
                return Err(incompatible(
                    format!("it holds a value for the {kind} `{name}`, which the schema no longer declares"),
                    format!("declare `{name}` again, or {delete}"),
                ));
            };
            if let Err(reason) = validate(value, &declaration.ty) {
                return Err(incompatible(
                    format!("its {kind} `{name}` no longer types: {reason}"),
                    format!("change the type of `{name}` back, or {delete}"),
                ));
            }
        }
    }
    // What the current step offered for confirmation follows it to its new
    // place; an offer of another step (there is none in a saved session
    // today) is dropped rather than pointed at the wrong step.
    let offered_here = session
        .offered
        .as_ref()
        .is_some_and(|offered| Some(offered.flow) == session.flow && Some(offered.step) == session.step);
    match (offered_here, flow, step) {
        (true, Some(flow), Some(step)) => {
            if let Some(offered) = &mut session.offered {
                offered.flow = flow;
                offered.step = step;
            }
        }
        _ => session.offered = None,
    }
    session.flow = flow;
    session.step = step;
    session.program_hash = hash.to_string();
    Ok(())
}

/// The data in schema order, for results people read.
pub fn ordered_data(program: &Program, data: &Data) -> serde_json::Map<String, serde_json::Value> {
    program
        .fields
        .iter()
        .filter_map(|field| data.get(&field.name).map(|value| (field.name.clone(), value.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(source: &str) -> (Program, String) {
        let compilation = crate::pipeline::compile(&crate::source::SourceFile::new("test.flow", source));
        assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
        let hash = program_hash(&compilation.ir);
        (compilation.ir, hash)
    }

    fn said(count: usize) -> Vec<Message> {
        let role =
            |index: usize| if index % 2 == 0 { crate::message::Role::User } else { crate::message::Role::Assistant };
        (0..count).map(|index| Message { role: role(index), text: format!("message {index}") }).collect()
    }

    #[test]
    fn keeping_the_history_never_changes_what_a_request_carries() {
        let shapes = [(0, None), (5, None), (12, None), (34, None), (34, Some(20)), (34, Some(40)), (8, Some(3))];
        for summarize in [false, true] {
            for keep_last in [1u32, 4, 12, 50] {
                for (count, through) in shapes {
                    let mut session = Session::new("s", "h");
                    session.history = said(count);
                    session.summary = through.map(|through| HistorySummary { text: "earlier".into(), through });
                    let carried = session.model_history(keep_last as usize);
                    session.keep_history(&crate::ir::History { keep_last, summarize });
                    let case = format!("summarize {summarize}, keep_last {keep_last}, {count} messages, {through:?}");
                    assert_eq!(session.model_history(keep_last as usize), carried, "{case}");
                    let kept = session.history.len();
                    let unsummarised = count.saturating_sub(through.unwrap_or(0).min(count));
                    if summarize {
                        let bound = (2 * keep_last as usize).max(UNFOLDED_KEPT);
                        assert_eq!(kept, unsummarised.min(bound), "{case}: the next turn folds what is past keep_last");
                    } else {
                        assert_eq!(kept, unsummarised.min(keep_last as usize), "{case}");
                    }
                    assert_eq!(session.summary.as_ref().map(|summary| summary.through), through.map(|_| 0), "{case}");
                    let newest = said(count).last().cloned().filter(|_| unsummarised > 0);
                    assert_eq!(session.history.last().cloned(), newest, "{case}: the newest message stays");
                }
            }
        }
    }

    const BOOKING: &str = r#"
schema {
  hotel: string "The hotel"
  guests: int "How many"
}
flow booking "Book a hotel" {
  when "the user wants a hotel"
  step ask_hotel {
    prompt "Which hotel?"
    collect hotel
  }
  step ask_guests {
    prompt "How many guests?"
    collect guests
  }
}
"#;

    fn stored_on(program: &Program, hash: &str) -> Session {
        let mut session = Session::new("alice", hash);
        session.flow = Some(FlowId(0));
        session.step = Some(StepId(1));
        session.data.insert("hotel".into(), "Ritz".into());
        session.record_position(program);
        session
    }

    #[test]
    fn a_reworded_or_reordered_program_keeps_the_session_at_its_step() {
        let (old, old_hash) = program(BOOKING);
        let mut session = stored_on(&old, &old_hash);
        let edited = BOOKING
            .replace("How many guests?", "For how many people?")
            .replace("  step ask_hotel {", "  step greet {\n    say \"Hello\"\n  }\n  step ask_hotel {");
        let (new, new_hash) = program(&edited);
        assert_ne!(old_hash, new_hash);
        session.offered = Some(Offered { flow: FlowId(0), step: StepId(1), values: BTreeMap::new() });
        adopt(&new, &new_hash, &mut session).unwrap();
        assert_eq!(session.step, Some(StepId(2)), "found by name after a step was inserted before it");
        assert_eq!(session.offered.map(|offered| offered.step), Some(StepId(2)), "the offer follows its step");
        assert_eq!(session.program_hash, new_hash);
    }

    #[test]
    fn a_removed_step_or_a_retyped_field_names_the_session_and_what_to_do() {
        let (old, old_hash) = program(BOOKING);
        let without_step =
            BOOKING.replace("  step ask_guests {\n    prompt \"How many guests?\"\n    collect guests\n  }\n", "");
        let (new, new_hash) = program(&without_step);
        let error = adopt(&new, &new_hash, &mut stored_on(&old, &old_hash)).unwrap_err();
        assert_eq!(error.problem, "its step `booking.ask_guests` is no longer in the program");
        assert!(error.help.contains("flowc sessions delete alice"), "{}", error.help);

        let retyped = BOOKING.replace("hotel: string", "hotel: int");
        let (new, new_hash) = program(&retyped);
        let error = adopt(&new, &new_hash, &mut stored_on(&old, &old_hash)).unwrap_err();
        assert!(error.problem.starts_with("its field `hotel` no longer types"), "{}", error.problem);
    }

    #[test]
    fn positions_out_of_range_are_refused() {
        let (program, hash) = program(BOOKING);
        let mut session = stored_on(&program, &hash);
        session.step = Some(StepId(7));
        assert_eq!(adopt(&program, &hash, &mut session).unwrap_err().problem, "its step is out of range");
        session.flow = Some(FlowId(3));
        assert_eq!(adopt(&program, &hash, &mut session).unwrap_err().problem, "its flow is out of range");
    }

    /// Sessions stored before `offered` existed still load.
    #[test]
    fn a_session_without_an_offer_loads() {
        let stored = serde_json::to_value(Session::new("s1", "hash")).unwrap_or_default();
        assert!(stored.get("offered").is_none(), "nothing stored when nothing was offered");
        let loaded: Result<Session, _> = serde_json::from_value(stored);
        assert!(loaded.is_ok_and(|session| session.offered.is_none()));
    }
}
