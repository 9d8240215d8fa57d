//! Whether a reply the model wrote claims what nobody said: a specific
//! value-like token (an identifier or code such as `BILLING-1234`, a
//! number, a date, a clock time, an email, an amount) that appears nowhere
//! the model was given — the conversation, the session's data and context,
//! this reply's tool results, the program's own texts. Grounding keeps a
//! weak model's inventions out of the data; this keeps them out of what
//! the user is told, for the fused reply (set aside, `fused.rs`) and the
//! ordinary one (asked again, then replaced, `reply.rs`).
//!
//! Precise, not paranoid: words are never claims, and a token the model
//! was given backs the claim in any of the ways the shared readers read
//! it (`reading.rs`: a date in another format, a number in words, a code
//! punctuated otherwise). The turn's own texts are read first, then the
//! conversation's messages, and the program's only for a claim neither
//! backs, so a reply that restates the data or the message costs one
//! reading of those; the program's are read once a day for all turns
//! ([`ProgramTexts`], kept by the runtime).

pub(super) mod reading;

use crate::ir::Program;
use crate::llm::{ReplyAsk, ReplyRequest, ToolRound};
use crate::runtime::events::{ClaimAction, Event};
use crate::runtime::session::Session;
use chrono::NaiveDate;
use reading::{Known, claims};
use serde_json::Value;
use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::{Arc, Mutex, PoisonError};

/// What the program's own texts back, read once and kept by the
/// [`Runtime`](super::Runtime) for all its turns: reading them (the whole
/// IR) for each check cost a turn that restates one of them ten times the
/// rest of the check. Their reading depends on the day (a date without its
/// year, "tomorrow"), so a new day reads them again.
pub(super) struct ProgramTexts {
    program: Arc<Program>,
    read: Mutex<Option<(NaiveDate, Arc<Known>)>>,
}

impl ProgramTexts {
    pub(super) fn new(program: Arc<Program>) -> ProgramTexts {
        ProgramTexts { program, read: Mutex::new(None) }
    }

    /// Whether these are the texts of `program` (the same one, not an equal one).
    pub(super) fn of(&self, program: &Arc<Program>) -> bool {
        Arc::ptr_eq(&self.program, program)
    }

    fn known(&self, today: NaiveDate) -> Arc<Known> {
        // A check that panicked left nothing half-made: the value is set whole.
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        match &*read {
            Some((day, known)) if *day == today => Arc::clone(known),
            _ => {
                let known = Arc::new(Known::of(&program_texts(&self.program), today));
                *read = Some((today, Arc::clone(&known)));
                known
            }
        }
    }
}

/// Everything the model was given for a reply, as texts, read only when
/// the reply states a value-like token.
pub(super) struct Grounds<'a> {
    texts: Vec<Cow<'a, str>>,
    /// The conversation's messages, read only for a claim the rest of the
    /// turn's texts do not back: most claims restate the data or the
    /// message, and reading the conversation was most of a check's time.
    conversation: Vec<&'a str>,
    program: &'a ProgramTexts,
    today: NaiveDate,
    turn: OnceCell<Known>,
    said: OnceCell<Known>,
    everything: OnceCell<Arc<Known>>,
}

impl<'a> Grounds<'a> {
    /// What any reply of the turn stands on: the session's conversation
    /// (and its summary), data and context, the user's message, and
    /// today's date (the date and its year, not its day and month as
    /// numbers: "5 guests" is no reading of January 5).
    pub(super) fn new(
        program: &'a ProgramTexts,
        today: NaiveDate,
        session: &'a Session,
        message: &'a str,
    ) -> Grounds<'a> {
        let mut grounds = Grounds::of(program, today);
        grounds.session(session, message);
        grounds
    }

    /// Nothing given yet but the program's texts and today's date.
    fn of(program: &'a ProgramTexts, today: NaiveDate) -> Grounds<'a> {
        Grounds {
            texts: Vec::new(),
            conversation: Vec::new(),
            program,
            today,
            turn: OnceCell::new(),
            said: OnceCell::new(),
            everything: OnceCell::new(),
        }
    }

    fn session(&mut self, session: &'a Session, message: &'a str) {
        let grounds = self;
        grounds.texts.push(Cow::Borrowed(message));
        grounds.conversation.extend(session.history.iter().map(|said| said.text.as_str()));
        if let Some(summary) = &session.summary {
            grounds.texts.push(Cow::Borrowed(summary.text.as_str()));
        }
        for value in session.data.values().chain(session.context.values()) {
            grounds.value(value);
        }
    }

    fn text(&mut self, text: &'a str) {
        self.texts.push(Cow::Borrowed(text));
    }

    /// Adds a value the model was given, as it was shown (JSON).
    fn value(&mut self, value: &'a Value) {
        match value {
            Value::Null | Value::Bool(_) => {}
            Value::String(text) => self.text(text),
            other => self.texts.push(Cow::Owned(other.to_string())),
        }
    }

    /// Adds an ordinary reply's request and the tool results of its rounds.
    pub(super) fn request(&mut self, request: &'a ReplyRequest, rounds: &'a [ToolRound]) {
        let texts = request.identity.iter().chain(&request.rules).chain(&request.flow_rules);
        let texts = texts.chain(&request.instructions).chain(&request.appended).chain(&request.said);
        self.texts.extend(texts.map(|text| Cow::Borrowed(text.as_str())));
        self.conversation.extend(request.history.iter().map(|said| said.text.as_str()));
        for value in request.data.values() {
            self.value(value);
        }
        for tool in &request.tools {
            self.texts.extend(tool.description.iter().map(|text| Cow::Borrowed(text.as_str())));
            self.texts.push(Cow::Owned(tool.parameters.to_string()));
        }
        for (_, result) in rounds.iter().flat_map(ToolRound::answered) {
            match result {
                Ok(value) => self.value(value),
                Err(error) => self.text(error),
            }
        }
    }

    /// What a fused reply stands on: the turn's, what the understand call
    /// was given to write it, and the prompts of the steps the turn asks
    /// with, rendered on the accepted data.
    pub(super) fn fused(
        (program, today): (&'a ProgramTexts, NaiveDate),
        session: &'a Session,
        message: &'a str,
        ask: &'a ReplyAsk,
        instructions: &'a [String],
    ) -> Grounds<'a> {
        let mut grounds = Grounds::new(program, today, session, message);
        grounds.ask(ask);
        grounds.texts.extend(instructions.iter().map(|text| Cow::Borrowed(text.as_str())));
        grounds
    }

    /// Adds what the understand call was given to write a fused reply.
    fn ask(&mut self, ask: &'a ReplyAsk) {
        self.texts.extend(ask.identity.iter().chain(&ask.rules).map(|text| Cow::Borrowed(text.as_str())));
        self.texts.extend(ask.steps.iter().map(|step| Cow::Borrowed(step.prompt.as_str())));
        for value in ask.data.values() {
            self.value(value);
        }
    }

    /// The first token `reply` states that nothing the model was given
    /// backs, as the reply wrote it.
    pub(super) fn unfounded(&self, reply: &str) -> Option<String> {
        if !reply.contains(|ch: char| ch.is_ascii_digit() || ch == '@') {
            return None;
        }
        let stated = claims(reply, self.today);
        let turn = self.turn.get_or_init(|| Known::of(&self.texts.join("\n"), self.today).with_today(self.today));
        let mut open = stated.into_iter().filter(|(_, claim)| !turn.backs(claim)).peekable();
        open.peek()?;
        let said = self.said.get_or_init(|| Known::of(&self.conversation.join("\n"), self.today));
        let mut open = open.filter(|(_, claim)| !said.backs(claim)).peekable();
        open.peek()?;
        let everything = self.everything.get_or_init(|| self.program.known(self.today));
        open.find(|(_, claim)| !everything.backs(claim)).map(|(written, _)| written)
    }
}

impl Grounds<'_> {
    /// How far a streamed `text`, shown up to `shown`, may be shown now:
    /// to its last whole word, when nothing it states so far is unbacked
    /// (`None` when something is).
    pub(super) fn release(&self, text: &str, shown: usize) -> Option<usize> {
        let end = whole_words(text).max(shown);
        self.unfounded(text.get(..end)?).is_none().then_some(end)
    }
}

/// The end of `text`'s last whole word: what follows may be a word cut
/// in the middle.
fn whole_words(text: &str) -> usize {
    text.rfind(char::is_whitespace).map_or(0, |at| at + 1)
}

/// Every text of the program, as the model may have been shown it: its
/// identity, rules, titles, descriptions, examples, prompts and the other
/// strings of its IR (numbers such as limits are not texts).
fn program_texts(program: &Program) -> String {
    fn collect(value: &Value, into: &mut String) {
        match value {
            Value::String(text) => {
                into.push_str(text);
                into.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|item| collect(item, into)),
            Value::Object(members) => members.values().for_each(|member| collect(member, into)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    let mut texts = String::new();
    if let Ok(ir) = serde_json::to_value(program) {
        collect(&ir, &mut texts);
    }
    texts
}

/// A fused reply that states `claim`, set aside: the event that traces it
/// and the reason the `fused_reply` event gives.
pub(super) fn set_aside(claim: String) -> (Event, String) {
    let reason = reason(&claim);
    (event(claim, ClaimAction::SetAside, None), reason)
}

/// Why a reply that states `claim` is not used, for the trace.
fn reason(claim: &str) -> String {
    format!("the reply states \"{claim}\", which appears nowhere the model was given")
}

/// The event of a reply set aside, asked again or replaced for `claim`.
pub(super) fn event(claim: String, action: ClaimAction, text: Option<String>) -> Event {
    Event::UnfoundedClaim { claim, action, text }
}

/// A streamed reply shown only as far as what it states is backed: text
/// is released a whole word at a time, and nothing more once a word
/// states a token nothing backs (the reply is then set aside, or asked
/// again, by the caller).
pub(super) struct Gate {
    text: String,
    shown: usize,
    blocked: Option<String>,
    /// Nothing is shown before the end.
    whole: bool,
}

impl Gate {
    pub(super) fn new() -> Gate {
        Gate { text: String::new(), shown: 0, blocked: None, whole: false }
    }

    /// A gate that shows the reply only once it has ended, and only if it
    /// states nothing unbacked: for a reply asked again, so that a model
    /// that made something up once is not shown making it up twice.
    pub(super) fn whole() -> Gate {
        Gate { whole: true, ..Gate::new() }
    }

    /// Takes the next piece; returns what may be shown now.
    pub(super) fn push(&mut self, piece: &str, grounds: &Grounds) -> String {
        self.text.push_str(piece);
        if self.whole {
            return String::new();
        }
        self.release(whole_words(&self.text), grounds)
    }

    /// The end of the reply: the rest, if it states nothing unbacked.
    pub(super) fn finish(&mut self, grounds: &Grounds) -> String {
        self.release(self.text.len(), grounds)
    }

    /// The token that stopped the reply, if one did.
    #[cfg(test)]
    fn blocked(&self) -> Option<&str> {
        self.blocked.as_deref()
    }

    fn release(&mut self, end: usize, grounds: &Grounds) -> String {
        if self.blocked.is_some() || end <= self.shown {
            return String::new();
        }
        let Some(upto) = self.text.get(..end) else {
            return String::new();
        };
        if let Some(claim) = grounds.unfounded(upto) {
            self.blocked = Some(claim);
            return String::new();
        }
        let released = upto.get(self.shown..).unwrap_or_default().to_string();
        self.shown = end;
        released
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
