//! A streamed understand call: its extraction handed over as soon as the
//! model has written it, and the reply the model writes after it read as
//! it arrives, or dropped, which cancels the request.
//!
//! The wire formats differ only in where the answer's text arrives
//! (OpenAI-compatible: `delta.content`, or a forced call's
//! `delta.tool_calls[].function.arguments`; Anthropic: `input_json_delta`
//! pieces of a forced `tool_use`); each provider turns its events into an
//! [`AnswerSource`] of text pieces, and [`AnswerReader`] does the rest with
//! the [`PartialReader`]. Where a server cannot stream the structured
//! answer, [`ReplyStream::whole`] hands over a reply that arrived whole.

use crate::llm::partial::{PartialReader, Progress, REPLY_MEMBER};
use crate::llm::{ProviderError, UnderstandRequest, Understanding, Usage};
use serde_json::{Map, Value};
use std::collections::VecDeque;

/// What a streamed understand call hands over once the extraction is read.
#[derive(Debug, Default)]
pub struct Understood {
    /// The extraction, validated like any understand answer. Its usage is
    /// what the call had reported by then (one call; tokens reported later
    /// come from [`ReplyStream::late_usage`]). While the reply streams,
    /// `understanding.reply` names its step with the text still empty; an
    /// answer that arrived whole holds its reply there, text and all.
    pub understanding: Understanding,
    /// The reply the model is writing after the extraction, for the step
    /// it named: read it with [`ReplyStream::next_piece`], or drop it to
    /// cancel the rest of the request. `None` when the answer arrived
    /// whole or has no reply for a step.
    pub reply: Option<ReplyStream>,
}

/// The `reply` member of an understand answer, as it arrives.
pub struct ReplyStream {
    inner: Inner,
    filter: Option<Box<dyn PieceFilter>>,
    done: bool,
}

enum Inner {
    Live { reader: Box<AnswerReader>, reported: Usage },
    Whole(Option<String>),
    Pieces { pieces: Box<dyn Iterator<Item = Result<String, ProviderError>> + Send>, tokens: Usage },
}

/// Rewrites a reply's pieces on their way (redaction): `push` gives what
/// may go on now, `finish` what was held back.
pub(crate) trait PieceFilter: Send {
    fn push(&mut self, piece: &str) -> String;
    fn finish(&mut self) -> String;
    /// An error of the stream, as the filter lets it out.
    fn error(&self, error: ProviderError) -> ProviderError {
        error
    }
}

impl std::fmt::Debug for ReplyStream {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Live { .. } => formatter.write_str("ReplyStream(live)"),
            Inner::Whole(text) => write!(formatter, "ReplyStream({text:?})"),
            Inner::Pieces { .. } => formatter.write_str("ReplyStream(pieces)"),
        }
    }
}

impl ReplyStream {
    /// A reply that arrived whole (a server that cannot stream structured
    /// output, a provider that does not stream): one piece.
    pub fn whole(text: String) -> ReplyStream {
        ReplyStream::new(Inner::Whole(Some(text)))
    }

    pub(crate) fn live(reader: AnswerReader, reported: Usage) -> ReplyStream {
        ReplyStream::new(Inner::Live { reader: Box::new(reader), reported })
    }

    /// A reply read from `pieces` as they come, for a provider of one's
    /// own that streams (the library's [`Provider`](crate::llm::Provider)
    /// is open to implement): `tokens` are those the call spent after the
    /// extraction, counted whether the reply is read to its end or
    /// dropped. Dropping the stream drops `pieces`, which is how such a
    /// provider learns to cancel its call.
    pub fn from_pieces(
        pieces: impl Iterator<Item = Result<String, ProviderError>> + Send + 'static,
        tokens: Usage,
    ) -> ReplyStream {
        ReplyStream::new(Inner::Pieces { pieces: Box::new(pieces), tokens })
    }

    /// A live-like stream of the given pieces, for tests.
    #[cfg(test)]
    pub(crate) fn pieces(pieces: &[&str]) -> ReplyStream {
        let pieces: Vec<String> = pieces.iter().map(|piece| piece.to_string()).collect();
        ReplyStream::from_pieces(pieces.into_iter().map(Ok), Usage::default())
    }

    fn new(inner: Inner) -> ReplyStream {
        ReplyStream { inner, filter: None, done: false }
    }

    /// The same stream, its pieces passed through `filter`.
    pub(crate) fn filtered(mut self, filter: Box<dyn PieceFilter>) -> ReplyStream {
        self.filter = Some(filter);
        self
    }

    /// The next piece of the reply, decoded; `None` once it is complete.
    /// The call's last events (its usage) are read before `None`.
    pub fn next_piece(&mut self) -> Result<Option<String>, ProviderError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let raw = match self.next_raw() {
                Ok(raw) => raw,
                Err(error) => return Err(self.filter.as_ref().map_or(error.clone(), |filter| filter.error(error))),
            };
            let Some(filter) = self.filter.as_mut() else {
                self.done = raw.is_none();
                return Ok(raw);
            };
            match raw {
                Some(piece) => {
                    let ready = filter.push(&piece);
                    if !ready.is_empty() {
                        return Ok(Some(ready));
                    }
                }
                None => {
                    self.done = true;
                    let rest = filter.finish();
                    return Ok((!rest.is_empty()).then_some(rest));
                }
            }
        }
    }

    fn next_raw(&mut self) -> Result<Option<String>, ProviderError> {
        match &mut self.inner {
            Inner::Whole(text) => Ok(text.take().filter(|text| !text.is_empty())),
            Inner::Live { reader, .. } => reader.next_reply_piece(),
            Inner::Pieces { pieces, .. } => pieces.next().transpose(),
        }
    }

    /// Reads the whole reply, giving each piece to `on_text` as it
    /// arrives; returns the reply.
    pub fn read_all(&mut self, on_text: &mut dyn FnMut(&str)) -> Result<String, ProviderError> {
        let mut text = String::new();
        while let Some(piece) = self.next_piece()? {
            on_text(&piece);
            text.push_str(&piece);
        }
        Ok(text)
    }

    /// Tokens the call reported after the extraction was handed over
    /// (`calls` is 0: the call was counted with the extraction).
    pub fn late_usage(&self) -> Usage {
        self.usage_since(false)
    }

    /// [`late_usage`](Self::late_usage) for a reply dropped before its end:
    /// the call's tokens so far, estimated when the server reported none
    /// yet (it will not now: the stream is cancelled).
    pub fn dropped_usage(&self) -> Usage {
        self.usage_since(true)
    }

    fn usage_since(&self, dropped: bool) -> Usage {
        match &self.inner {
            Inner::Whole(_) => Usage::default(),
            Inner::Pieces { tokens, .. } => Usage { calls: 0, ..*tokens },
            Inner::Live { reader, reported } => {
                let now = if dropped { reader.source.dropped_usage() } else { reader.usage() };
                Usage {
                    calls: 0,
                    prompt: now.prompt.saturating_sub(reported.prompt),
                    completion: now.completion.saturating_sub(reported.completion),
                    cached: now.cached.saturating_sub(reported.cached),
                    estimated: now.estimated,
                }
            }
        }
    }
}

/// An answer's text as one wire format delivers it.
pub(crate) trait AnswerSource: Send {
    /// The next piece of the answer's text; `None` at the end of the answer.
    fn next_piece(&mut self) -> Result<Option<String>, ProviderError>;
    /// The tokens the server has reported so far (`calls` is 1).
    fn usage(&self) -> Usage;
    /// The tokens of an answer dropped before its end: those reported, or
    /// an estimate of what was sent and received when none were.
    fn dropped_usage(&self) -> Usage {
        self.usage()
    }
    /// Whether the answer stopped at the completion budget.
    fn truncated(&self) -> bool;
}

/// What the reader found before the reply.
pub(crate) enum Extraction {
    /// The members before `reply`, parsed; the reply, if any, follows.
    Prefix(Map<String, Value>),
    /// No readable object: the answer has been read to its end, for the
    /// validation and repair every answer gets.
    Whole,
}

/// An [`AnswerSource`] read through the [`PartialReader`], keeping the
/// whole text for the validation of an answer that cannot be read early.
pub(crate) struct AnswerReader {
    source: Box<dyn AnswerSource>,
    reader: PartialReader,
    text: String,
    progress: VecDeque<Progress>,
    ended: bool,
    /// The reader met a syntax error: the text is read on, but not through it.
    unreadable: bool,
}

impl AnswerReader {
    pub fn new(source: Box<dyn AnswerSource>) -> AnswerReader {
        AnswerReader {
            source,
            reader: PartialReader::default(),
            text: String::new(),
            progress: VecDeque::new(),
            ended: false,
            unreadable: false,
        }
    }

    /// Reads one more piece; `false` at the end of the answer.
    fn pull(&mut self) -> Result<bool, ProviderError> {
        if self.ended {
            return Ok(false);
        }
        let Some(piece) = self.source.next_piece()? else {
            self.ended = true;
            return Ok(false);
        };
        self.text.push_str(&piece);
        if !self.unreadable {
            let mut progress = Vec::new();
            let read = self.reader.push(piece.as_bytes(), &mut progress);
            self.progress.extend(progress);
            self.unreadable = read.is_err();
        }
        Ok(true)
    }

    /// Reads until the members before `reply` are complete.
    pub fn extraction(&mut self) -> Result<Extraction, ProviderError> {
        loop {
            if let Some(Progress::Prefix(prefix)) = self.progress.front() {
                let prefix = prefix.clone();
                self.progress.pop_front();
                return Ok(Extraction::Prefix(prefix));
            }
            if self.unreadable || !self.pull()? {
                self.drain()?;
                return Ok(Extraction::Whole);
            }
        }
    }

    /// Whether a reply string started after the extraction.
    pub fn has_reply(&self) -> bool {
        self.reader.has_reply()
    }

    /// Reads the answer to its end.
    pub fn drain(&mut self) -> Result<(), ProviderError> {
        while self.pull()? {}
        Ok(())
    }

    fn next_reply_piece(&mut self) -> Result<Option<String>, ProviderError> {
        loop {
            match self.progress.pop_front() {
                Some(Progress::Reply(piece)) => return Ok(Some(piece)),
                Some(Progress::ReplyEnd) => {
                    // What follows the reply is the stream's end and its
                    // usage; a fault there does not undo a complete reply.
                    let _ = self.drain();
                    return Ok(None);
                }
                Some(Progress::Prefix(_)) => {}
                None => {
                    if self.unreadable || !self.pull()? {
                        return Err(ProviderError::Network("the answer stream ended inside the reply".into()));
                    }
                }
            }
        }
    }

    /// The answer as received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn usage(&self) -> Usage {
        self.source.usage()
    }

    pub fn truncated(&self) -> bool {
        self.source.truncated()
    }
}

/// The members before the reply, validated as the extraction. When a
/// reply follows and the request asked for one, the reply's step is read
/// too, its text left empty until it arrives.
pub(crate) fn validate_prefix(
    mut prefix: Map<String, Value>,
    request: &UnderstandRequest,
    reply_follows: bool,
) -> Result<Understanding, String> {
    if reply_follows && request.reply.is_some() {
        prefix.insert(REPLY_MEMBER.into(), Value::String(String::new()));
    }
    crate::llm::schema::validate(&Value::Object(prefix), request)
}

/// The understanding once its extraction is read from a stream: with the
/// reply still arriving when the model named a step for it, else alone
/// (a reply for no step is of no use: dropping it cancels the request).
pub(crate) fn understood(
    mut answer: AnswerReader,
    mut understanding: Understanding,
    request: &UnderstandRequest,
) -> Result<Understood, ProviderError> {
    if answer.has_reply() && understanding.reply.is_some() {
        understanding.usage = answer.usage();
        let reply = ReplyStream::live(answer, understanding.usage);
        return Ok(Understood { understanding, reply: Some(reply) });
    }
    if !answer.has_reply() {
        answer.drain()?;
        // A `reply` that is no text was not read as one: why, for the trace.
        if understanding.reply_dropped.is_none()
            && let Ok(Value::Object(whole)) = crate::llm::schema::extract_json(answer.text())
            && let Err(problem) = crate::llm::schema::read_reply(&whole, request)
        {
            understanding.reply_dropped = Some(problem);
        }
    }
    understanding.usage = answer.usage();
    Ok(Understood { understanding, reply: None })
}

/// The booking request of the schema tests, asking for the reply to its
/// confirmation step too (the fused call).
#[cfg(test)]
pub(crate) fn fused_request() -> UnderstandRequest {
    let step = crate::llm::StepAsk {
        id: "booking.confirm".into(),
        flow: "booking".into(),
        missing: vec!["confirmed".into()],
        prompt: "Shall I book {{hotel}} on {{date}} for {{guests}}?".into(),
    };
    let ask = crate::llm::ReplyAsk { steps: vec![step], ..crate::llm::ReplyAsk::default() };
    UnderstandRequest { reply: Some(ask), ..crate::llm::schema::tests::booking_request() }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Pieces handed over one by one, then the end.
    struct Canned(VecDeque<String>);

    impl AnswerSource for Canned {
        fn next_piece(&mut self) -> Result<Option<String>, ProviderError> {
            Ok(self.0.pop_front())
        }
        fn usage(&self) -> Usage {
            Usage { calls: 1, prompt: 10, completion: 5, cached: 0, estimated: false }
        }
        fn truncated(&self) -> bool {
            false
        }
    }

    fn reader(pieces: &[&str]) -> AnswerReader {
        AnswerReader::new(Box::new(Canned(pieces.iter().map(|piece| piece.to_string()).collect())))
    }

    #[test]
    fn the_extraction_comes_before_the_reply_pieces() {
        let mut answer = reader(&["{\"flow\": null, \"re", "ply\": \"Hel", "lo\"}"]);
        let Extraction::Prefix(prefix) = answer.extraction().unwrap() else { panic!("a prefix") };
        assert_eq!(Value::Object(prefix), serde_json::json!({"flow": null}));
        assert!(answer.has_reply());
        let mut stream = ReplyStream::live(answer, Usage::default());
        assert_eq!(stream.read_all(&mut |_| {}).unwrap(), "Hello");
        assert_eq!(stream.late_usage(), Usage { calls: 0, prompt: 10, completion: 5, cached: 0, estimated: false });
    }

    #[test]
    fn an_answer_without_reply_has_no_reply_stream() {
        let mut answer = reader(&["{\"flow\": null}"]);
        assert!(matches!(answer.extraction().unwrap(), Extraction::Prefix(_)));
        assert!(!answer.has_reply());
    }

    #[test]
    fn an_unreadable_answer_is_read_whole() {
        let mut answer = reader(&["I think {\"flow\" = 1", "} and more"]);
        assert!(matches!(answer.extraction().unwrap(), Extraction::Whole));
        assert_eq!(answer.text(), "I think {\"flow\" = 1} and more");
    }

    #[test]
    fn a_reply_cut_off_is_an_error() {
        let mut answer = reader(&["{\"reply\": \"Hel"]);
        assert!(matches!(answer.extraction().unwrap(), Extraction::Prefix(_)));
        let mut stream = ReplyStream::live(answer, Usage::default());
        assert_eq!(stream.next_piece().unwrap().as_deref(), Some("Hel"));
        assert_eq!(stream.next_piece().unwrap_err().class(), "network");
    }

    #[test]
    fn a_whole_reply_is_one_piece() {
        let mut stream = ReplyStream::whole("Hi".into());
        assert_eq!(stream.next_piece().unwrap().as_deref(), Some("Hi"));
        assert_eq!(stream.next_piece().unwrap(), None);
    }
}
