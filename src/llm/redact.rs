//! Keeping API keys out of everything a model call leaves behind: error
//! messages, replies (streamed and whole), and so the traces, sessions and
//! recordings made from them. [`redact`] is the one rule; [`Redacting`]
//! applies it to any provider, so no provider or caller has to remember to.
//!
//! A model can be made to repeat its key (a prompt injection asking for
//! it, an answer invalid only because it quotes it), and the runtime
//! echoes model output in errors ("unknown flow `sk-…`") and stores
//! replies. The wrapper sits between the provider and everything else.

use super::streamed::PieceFilter;
use super::{
    ModelReply, Provider, ProviderConfig, ProviderError, ReplyRequest, ToolRound, UnderstandRequest, Understanding,
    Understood,
};
use regex::Regex;
use std::sync::LazyLock;

/// Shorter values are not redacted: they would blank ordinary words.
const MIN_SECRET_LEN: usize = 4;

static KEY_PATTERN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(sk-[A-Za-z0-9_\-*]{6,}|Bearer\s+[A-Za-z0-9._\-]{6,})").ok());

/// Replaces every known secret, and anything shaped like an OpenAI or
/// Anthropic key or a bearer token (servers echo partial keys in 401
/// bodies), with `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut clean = text.to_string();
    for secret in secrets {
        if secret.len() >= MIN_SECRET_LEN {
            clean = clean.replace(secret.as_str(), "[redacted]");
        }
    }
    match KEY_PATTERN.as_ref() {
        Some(pattern) => pattern.replace_all(&clean, "[redacted]").into_owned(),
        None => clean,
    }
}

/// The secrets of one configuration and the rule that hides them.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        Redactor { secrets: secrets.into_iter().filter(|secret| secret.len() >= MIN_SECRET_LEN).collect() }
    }

    /// The configured API key, if any.
    pub fn from_config(config: &ProviderConfig) -> Redactor {
        Redactor::new(config.api_key.iter().map(|key| key.expose().to_string()))
    }

    /// No secret is configured: there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn text(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }

    /// The same error with its message redacted.
    pub fn error(&self, error: ProviderError) -> ProviderError {
        match error {
            ProviderError::Auth(message) => ProviderError::Auth(self.text(&message)),
            ProviderError::RateLimited(message) => ProviderError::RateLimited(self.text(&message)),
            ProviderError::Overloaded(message) => ProviderError::Overloaded(self.text(&message)),
            ProviderError::InvalidRequest(message) => ProviderError::InvalidRequest(self.text(&message)),
            ProviderError::ContextOverflow(message) => ProviderError::ContextOverflow(self.text(&message)),
            ProviderError::Timeout(message) => ProviderError::Timeout(self.text(&message)),
            ProviderError::Network(message) => ProviderError::Network(self.text(&message)),
            ProviderError::InvalidOutput(message) => ProviderError::InvalidOutput(self.text(&message)),
            ProviderError::NotRecorded(message) => ProviderError::NotRecorded(self.text(&message)),
            ProviderError::Cancelled => ProviderError::Cancelled,
        }
    }

    /// Every string inside a JSON value, keys left as they are (they are
    /// the program's names, not model text).
    pub fn value(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(text) => *text = self.text(text),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            serde_json::Value::Object(fields) => fields.values_mut().for_each(|field| self.value(field)),
            _ => {}
        }
    }

    /// The model's proposals: values, their evidence and the flow it named
    /// all reach the trace (`ungrounded` events quote them) and, once
    /// grounded, the session. A redacted value no longer matches the
    /// user's words, so grounding then drops it: a key is never written.
    pub fn understanding(&self, understanding: &mut Understanding) {
        if let Some(flow) = understanding.flow.as_mut() {
            *flow = self.text(flow);
        }
        for proposal in understanding.fields.values_mut() {
            self.value(&mut proposal.value);
            if let Some(evidence) = proposal.evidence.as_mut() {
                *evidence = self.text(evidence);
            }
        }
        for answer in understanding.conditions.values_mut().chain(understanding.signals.values_mut()) {
            if let Some(evidence) = answer.evidence.as_mut() {
                *evidence = self.text(evidence);
            }
        }
    }

    /// Where the part of a stream that can be redacted now ends: before
    /// a tail that may be the start of a secret or of a key-shaped word
    /// (`sk-…`, `Bearer …`), and before any match that reaches into it.
    /// Other text is passed on at once, so a reply still streams.
    fn safe_end(&self, text: &str) -> usize {
        let mut hold = 0;
        for secret in &self.secrets {
            let longest = secret.len().saturating_sub(1).min(text.len());
            let partial = (1..=longest).rev().find(|&len| secret.get(..len).is_some_and(|head| text.ends_with(head)));
            hold = hold.max(partial.unwrap_or(0));
        }
        let word: usize = text
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*' | '.'))
            .map(char::len_utf8)
            .sum();
        let head = text.get(..text.len() - word).unwrap_or("");
        let tail = text.get(text.len() - word..).unwrap_or("");
        if !tail.is_empty() && (tail.starts_with("sk-") || "sk-".starts_with(tail) || "Bearer".starts_with(tail)) {
            hold = hold.max(word);
        }
        let before = head.trim_end();
        if before.ends_with("Bearer") && (word > 0 || before.len() < head.len()) {
            hold = hold.max(text.len() - (before.len() - "Bearer".len()));
        }
        let mut cut = text.len() - hold.min(text.len());
        let mut matches: Vec<(usize, usize)> = self
            .secrets
            .iter()
            .flat_map(|secret| text.match_indices(secret.as_str()).map(|(at, found)| (at, at + found.len())))
            .collect();
        if let Some(pattern) = KEY_PATTERN.as_ref() {
            matches.extend(pattern.find_iter(text).map(|found| (found.start(), found.end())));
        }
        for (start, end) in matches {
            if start < cut && end >= cut {
                cut = start;
            }
        }
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        cut
    }
}

/// Redacts a reply as it streams: a piece is passed on once no secret can
/// straddle its end.
struct Stream {
    redactor: Redactor,
    pending: String,
}

impl Stream {
    fn new(redactor: &Redactor) -> Stream {
        Stream { redactor: redactor.clone(), pending: String::new() }
    }

    /// What of the text so far may go on now, redacted.
    fn ready(&mut self, piece: &str) -> String {
        self.pending.push_str(piece);
        let cut = self.redactor.safe_end(&self.pending);
        let rest = self.pending.split_off(cut);
        let ready = std::mem::replace(&mut self.pending, rest);
        if ready.is_empty() { ready } else { self.redactor.text(&ready) }
    }

    fn rest(&mut self) -> String {
        let rest = self.redactor.text(&self.pending);
        self.pending.clear();
        rest
    }

    fn push(&mut self, piece: &str, sink: &mut dyn FnMut(&str)) {
        let ready = self.ready(piece);
        if !ready.is_empty() {
            sink(&ready);
        }
    }

    fn finish(mut self, sink: &mut dyn FnMut(&str)) {
        let rest = self.rest();
        if !rest.is_empty() {
            sink(&rest);
        }
    }
}

impl PieceFilter for Stream {
    fn push(&mut self, piece: &str) -> String {
        self.ready(piece)
    }

    fn finish(&mut self) -> String {
        self.rest()
    }

    fn error(&self, error: ProviderError) -> ProviderError {
        self.redactor.error(error)
    }
}

/// A provider whose errors and replies never hold a configured secret.
pub struct Redacting {
    inner: Box<dyn Provider>,
    redactor: Redactor,
}

impl Redacting {
    pub fn new(inner: Box<dyn Provider>, redactor: Redactor) -> Redacting {
        Redacting { inner, redactor }
    }
}

impl Provider for Redacting {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn modes(&self) -> Option<String> {
        self.inner.modes()
    }

    fn ask(&mut self, request: &crate::llm::AskRequest) -> Result<crate::llm::AskAnswer, ProviderError> {
        let mut answer = self.inner.ask(request).map_err(|error| self.redactor.error(error))?;
        match &mut answer.value {
            Ok(value) => self.redactor.value(value),
            Err(reason) => *reason = self.redactor.text(reason),
        }
        Ok(answer)
    }

    fn understand_left_out(&self, request: &UnderstandRequest) -> usize {
        self.inner.understand_left_out(request)
    }

    fn reply_left_out(&self, request: &ReplyRequest) -> usize {
        self.inner.reply_left_out(request)
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let mut understanding = self.inner.understand(request).map_err(|error| self.redactor.error(error))?;
        self.redactor.understanding(&mut understanding);
        Ok(understanding)
    }

    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        let mut understood = self.inner.understand_streamed(request).map_err(|error| self.redactor.error(error))?;
        self.redactor.understanding(&mut understood.understanding);
        understood.reply = understood.reply.map(|reply| reply.filtered(Box::new(Stream::new(&self.redactor))));
        Ok(understood)
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let mut stream = Stream::new(&self.redactor);
        let result = self.inner.reply(request, rounds, &mut |piece| stream.push(piece, on_text));
        stream.finish(on_text);
        match result {
            Ok(ModelReply::Done(mut response)) => {
                response.text = self.redactor.text(&response.text);
                Ok(ModelReply::Done(response))
            }
            Ok(ModelReply::ToolCalls(mut asked)) => {
                asked.text = self.redactor.text(&asked.text);
                // Arguments the model wrote: a key it repeats there would
                // reach the tool, the trace and the session's tool records.
                // The echo is left as it is: it only goes back to the model.
                for call in &mut asked.calls {
                    match &mut call.arguments {
                        Ok(arguments) => self.redactor.value(arguments),
                        Err(reason) => *reason = self.redactor.text(reason),
                    }
                }
                Ok(ModelReply::ToolCalls(asked))
            }
            Err(error) => Err(self.redactor.error(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{NoTools, ReplyStream, Response, ToolCall, ToolCalls, ToolLoop, reply_with_tools};

    const KEY: &str = "sk-test-0123456789abcdef";

    /// A model that repeats its key: in a reply streamed in small pieces,
    /// and in an invalid understand answer.
    struct Leaky;

    impl Provider for Leaky {
        fn name(&self) -> String {
            "leaky".to_string()
        }

        fn understand(&mut self, _request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Err(ProviderError::InvalidOutput(format!("unknown flow `{KEY}` (choose one of `a` or null)")))
        }

        fn reply(
            &mut self,
            _request: &ReplyRequest,
            _rounds: &[ToolRound],
            on_text: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            let text = format!("Sure! My key is {KEY}, and the token is Bearer abcdef123456 and bye.");
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(3) {
                on_text(&piece.iter().collect::<String>());
            }
            Ok(ModelReply::Done(Response { text, ..Response::default() }))
        }
    }

    fn redacting() -> Redacting {
        Redacting::new(Box::new(Leaky), Redactor::new([KEY.to_string()]))
    }

    #[test]
    fn an_invalid_answer_quoting_the_key_is_redacted() {
        let error = redacting().understand(&UnderstandRequest::default()).err();
        assert_eq!(
            error,
            Some(ProviderError::InvalidOutput("unknown flow `[redacted]` (choose one of `a` or null)".to_string()))
        );
    }

    #[test]
    fn a_reply_holding_the_key_is_redacted_whole_and_streamed() {
        let mut streamed = String::new();
        let response = reply_with_tools(&mut redacting(), &ReplyRequest::default(), &mut NoTools, &mut |piece| {
            streamed.push_str(piece);
        });
        let expected = "Sure! My key is [redacted], and the token is [redacted] and bye.";
        assert_eq!(response.map(|response| response.text), Ok(expected.to_string()));
        assert_eq!(streamed, expected);
    }

    #[test]
    fn a_secret_split_across_pieces_is_caught_and_other_text_streams_at_once() {
        let redactor = Redactor::new(["hunter2-secret".to_string()]);
        let mut stream = Stream::new(&redactor);
        let mut out = Vec::new();
        for piece in ["the password is hun", "ter2-sec", "ret ok"] {
            stream.push(piece, &mut |text| out.push(text.to_string()));
        }
        stream.finish(&mut |text| out.push(text.to_string()));
        assert_eq!(out.concat(), "the password is [redacted] ok");
        // Text that cannot be part of the secret is passed on before the end.
        assert!(out.len() > 1 && out.first().is_some_and(|first| first.starts_with("the pa")), "{out:?}");
    }

    /// A model whose streamed understand answer repeats the key in its
    /// reply, split across pieces.
    struct StreamingLeak;

    impl Provider for StreamingLeak {
        fn name(&self) -> String {
            "streaming".to_string()
        }

        fn understand(&mut self, _request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Ok(Understanding::default())
        }

        fn understand_streamed(&mut self, _request: &UnderstandRequest) -> Result<Understood, ProviderError> {
            let pieces = ["For which date? My key is sk-te", "st-0123456789", "abcdef, bye."];
            Ok(Understood { understanding: Understanding::default(), reply: Some(ReplyStream::pieces(&pieces)) })
        }

        fn reply(
            &mut self,
            _request: &ReplyRequest,
            _rounds: &[ToolRound],
            _on_text: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            Ok(ModelReply::Done(Response::default()))
        }
    }

    #[test]
    fn a_streamed_fused_reply_is_redacted_as_it_streams() {
        let mut provider = Redacting::new(Box::new(StreamingLeak), Redactor::new([KEY.to_string()]));
        let understood = provider.understand_streamed(&UnderstandRequest::default()).unwrap();
        let mut pieces = Vec::new();
        let text = understood.reply.unwrap().read_all(&mut |piece| pieces.push(piece.to_string())).unwrap();
        assert_eq!(text, "For which date? My key is [redacted], bye.");
        assert!(pieces.first().is_some_and(|first| first.starts_with("For which date?")), "{pieces:?}");
    }

    /// A model that proposes its key as a value, as evidence and as a tool
    /// argument.
    struct Proposing;

    impl Provider for Proposing {
        fn name(&self) -> String {
            "proposing".to_string()
        }

        fn understand(&mut self, _request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            let mut understanding = Understanding { flow: Some(format!("flow {KEY}")), ..Understanding::default() };
            understanding.fields.insert(
                "note".to_string(),
                crate::llm::Proposal::new(serde_json::json!({"items": [format!("key {KEY}")]}), format!("it is {KEY}")),
            );
            understanding.signals.insert("leak".to_string(), crate::llm::Answer::yes(KEY));
            Ok(understanding)
        }

        /// Calls `lookup` in the first round, then answers with its result.
        fn reply(
            &mut self,
            _request: &ReplyRequest,
            rounds: &[ToolRound],
            _on_text: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            let Some(round) = rounds.first() else {
                let arguments = serde_json::json!({"query": format!("find {KEY}"), "n": 1});
                let call = ToolCall { id: "1".into(), name: "lookup".into(), arguments: Ok(arguments) };
                return Ok(ModelReply::ToolCalls(ToolCalls { calls: vec![call], ..ToolCalls::default() }));
            };
            let result = round.results.first().cloned().unwrap_or_else(|| Err("no result".into()));
            let result = result.map_err(ProviderError::InvalidRequest)?;
            Ok(ModelReply::Done(Response { text: result.to_string(), ..Response::default() }))
        }
    }

    #[test]
    fn proposals_evidence_and_the_named_flow_are_redacted() {
        let mut provider = Redacting::new(Box::new(Proposing), Redactor::new([KEY.to_string()]));
        let understanding = provider.understand(&UnderstandRequest::default());
        let text = serde_json::to_string(&understanding.ok()).unwrap_or_default();
        assert!(!text.contains(KEY) && text.contains("[redacted]"), "{text}");
    }

    #[test]
    fn tool_arguments_the_model_writes_are_redacted() {
        struct Echo;
        impl ToolLoop for Echo {
            fn call_tool(&mut self, _name: &str, arguments: serde_json::Value) -> Result<serde_json::Value, String> {
                Ok(arguments)
            }
            fn may_call(&self) -> bool {
                true
            }
        }
        let mut provider = Redacting::new(Box::new(Proposing), Redactor::new([KEY.to_string()]));
        let response = reply_with_tools(&mut provider, &ReplyRequest::default(), &mut Echo, &mut |_| {});
        assert_eq!(response.map(|response| response.text), Ok(r#"{"query":"find [redacted]","n":1}"#.to_string()));
    }

    #[test]
    fn short_values_are_not_secrets() {
        let redactor = Redactor::new(["abc".to_string()]);
        assert!(redactor.is_empty());
        assert_eq!(redactor.text("abc"), "abc");
    }
}
