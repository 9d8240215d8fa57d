//! A reply one model round at a time.
//!
//! [`Provider::reply`] makes one round: the model either answers
//! ([`ModelReply::Done`]) or asks for tool calls ([`ModelReply::ToolCalls`]).
//! The caller runs the calls and asks again with every earlier round and its
//! results ([`ToolRound`]); the provider rebuilds its messages from the
//! request plus those rounds, so it keeps no state between rounds. An
//! embedder thus sees each call before it runs.
//!
//! [`reply_with_tools`] drives the rounds through a [`ToolLoop`], for a
//! caller that only wants the finished reply.

use super::{Provider, ProviderError, ReplyRequest, Response, Usage};
use serde_json::{Value, json};

/// A safety net against a tool loop whose `may_call` never says no.
pub const MAX_ROUNDS: usize = 32;

/// What one round of a reply produced.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelReply {
    /// The reply is written.
    Done(Response),
    /// The model asks for tool calls before it answers.
    ToolCalls(ToolCalls),
}

/// The tool calls of one round, with what the model said before them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCalls {
    /// The calls, in the order the model asked them.
    pub calls: Vec<ToolCall>,
    /// Text the model wrote in this round (already given to `on_text`); it
    /// is part of the reply ("Let me check.").
    pub text: String,
    /// Tokens the round spent.
    pub usage: Usage,
    /// The provider's own record of its turn in this round (its assistant
    /// message or content blocks), sent back to the model as it was in the
    /// next round. It is the model's words unredacted and goes nowhere
    /// else; `Null` when the provider keeps nothing.
    pub echo: Value,
}

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The provider's id for the call, which its result answers.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments object, or why the model's arguments could not be
    /// read: that reason goes back to the model as the call's error and no
    /// tool runs.
    pub arguments: Result<Value, String>,
}

/// An earlier round: the calls the model asked for and each one's result
/// (`Err` carries the error text for the model), in the order of the calls.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRound {
    /// The calls the model asked for.
    pub asked: ToolCalls,
    /// Each call's result, in the order of the calls.
    pub results: Vec<Result<Value, String>>,
}

impl ToolRound {
    /// Each call with its result; a call left without one (the caller
    /// answered fewer) reads as an error, so the model is never told a
    /// call succeeded that did not run.
    pub fn answered(&self) -> impl Iterator<Item = (&ToolCall, Result<&Value, &str>)> {
        self.asked.calls.iter().enumerate().map(|(index, call)| {
            let result = match self.results.get(index) {
                Some(Ok(value)) => Ok(value),
                Some(Err(message)) => Err(message.as_str()),
                None => Err("the call was not run"),
            };
            (call, result)
        })
    }
}

/// A result as the text fed back to the model: the result object, or
/// `{"error": …}`.
pub fn result_text(result: Result<&Value, &str>) -> String {
    match result {
        Ok(value) => value.to_string(),
        Err(message) => json!({ "error": message }).to_string(),
    }
}

/// How the runtime runs tools for the model's tool loop. The runtime counts
/// rounds against `limits.max_tool_rounds`, records every call, and routes a
/// result's `directive` to the post-model bus.
pub trait ToolLoop {
    /// Runs one tool call; `Err` carries a message for the model.
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, String>;
    /// Whether another round of tool calls is allowed.
    fn may_call(&self) -> bool;
}

/// A tool loop for replies that expose no tools.
pub struct NoTools;

impl ToolLoop for NoTools {
    fn call_tool(&mut self, name: &str, _arguments: Value) -> Result<Value, String> {
        Err(format!("no tool `{name}` is available in this step"))
    }

    fn may_call(&self) -> bool {
        false
    }
}

/// Runs a reply to its end: each round's tool calls go through `tools`
/// (a call whose arguments could not be read is answered with that error,
/// without running), tools stay offered while [`ToolLoop::may_call`]
/// allows, and the usage is summed over the rounds. After `MAX_ROUNDS`
/// rounds of calls the reply is what was written so far.
pub fn reply_with_tools(
    provider: &mut dyn Provider,
    request: &ReplyRequest,
    tools: &mut dyn ToolLoop,
    on_text: &mut dyn FnMut(&str),
) -> Result<Response, ProviderError> {
    let mut request = request.clone();
    let mut rounds: Vec<ToolRound> = Vec::new();
    let mut reply = ReplyText::default();
    for _ in 0..MAX_ROUNDS {
        request.tools_spent = !tools.may_call();
        let answer = reply.round(on_text, |on_text| provider.reply(&request, &rounds, on_text))?;
        match answer {
            ModelReply::Done(response) => {
                reply.add(&response.text, response.usage);
                return Ok(reply.finish());
            }
            ModelReply::ToolCalls(asked) => {
                reply.add(&asked.text, asked.usage);
                let results = asked
                    .calls
                    .iter()
                    .map(|call| call.arguments.clone().and_then(|arguments| tools.call_tool(&call.name, arguments)))
                    .collect();
                rounds.push(ToolRound { asked, results });
            }
        }
    }
    Ok(reply.finish())
}

/// The reply over its rounds: rounds that say something are separated by a
/// blank line, both in the whole text and as it streams, so "Let me
/// check." and the answer after a tool call do not run together.
#[derive(Debug, Default)]
pub struct ReplyText {
    text: String,
    usage: Usage,
    /// Whether any earlier round streamed text.
    streamed: bool,
}

impl ReplyText {
    /// Runs one round, streaming its pieces to `on_text` with the blank
    /// line before the first text of a round that follows text.
    pub fn round<T>(&mut self, on_text: &mut dyn FnMut(&str), round: impl FnOnce(&mut dyn FnMut(&str)) -> T) -> T {
        let mut separate = self.streamed;
        let streamed = &mut self.streamed;
        round(&mut |piece: &str| {
            if !piece.is_empty() {
                if separate {
                    separate = false;
                    on_text("\n\n");
                }
                *streamed = true;
            }
            on_text(piece);
        })
    }

    /// Adds a round's text and usage to the reply.
    pub fn add(&mut self, text: &str, usage: Usage) {
        self.usage.add(usage);
        if text.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.push_str(text);
    }

    /// The reply, once no round asks for tools.
    pub fn finish(self) -> Response {
        Response { text: self.text, usage: self.usage }
    }
}

/// The text of one streamed round: every non-empty piece goes to `on_text`
/// and into `text`.
pub(crate) struct RoundText<'a> {
    pub(crate) text: String,
    on_text: &'a mut dyn FnMut(&str),
}

impl<'a> RoundText<'a> {
    pub(crate) fn new(on_text: &'a mut dyn FnMut(&str)) -> RoundText<'a> {
        RoundText { text: String::new(), on_text }
    }

    pub(crate) fn push(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        self.text.push_str(piece);
        (self.on_text)(piece);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::{UnderstandRequest, Understanding};

    /// A model that says something, calls `lookup` once per round for
    /// `rounds` rounds, then answers with what it was told.
    struct Looking {
        rounds: usize,
        seen: Vec<(bool, usize)>,
    }

    impl Provider for Looking {
        fn name(&self) -> String {
            "looking".into()
        }

        fn understand(&mut self, _request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Ok(Understanding::default())
        }

        fn reply(
            &mut self,
            request: &ReplyRequest,
            rounds: &[ToolRound],
            on_text: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            self.seen.push((request.tools_spent, rounds.len()));
            let usage = Usage { calls: 1, prompt: 10, completion: 1, cached: 0, estimated: false };
            if rounds.len() < self.rounds && !request.tools_spent {
                on_text("Checking.");
                let n = rounds.len();
                let call = ToolCall { id: format!("c{n}"), name: "lookup".into(), arguments: Ok(json!({"n": n})) };
                let bad = ToolCall { id: format!("b{n}"), name: "lookup".into(), arguments: Err("not JSON".into()) };
                let calls = vec![call, bad];
                return Ok(ModelReply::ToolCalls(ToolCalls {
                    calls,
                    text: "Checking.".into(),
                    usage,
                    echo: Value::Null,
                }));
            }
            let told: Vec<String> =
                rounds.iter().flat_map(|round| round.answered().map(|(_, result)| result_text(result))).collect();
            let text = told.join(" ");
            on_text(&text);
            Ok(ModelReply::Done(Response { text, usage }))
        }
    }

    struct Counting {
        calls: Vec<Value>,
        limit: usize,
    }

    impl ToolLoop for Counting {
        fn call_tool(&mut self, _name: &str, arguments: Value) -> Result<Value, String> {
            self.calls.push(arguments.clone());
            Ok(json!({"got": arguments}))
        }

        fn may_call(&self) -> bool {
            self.calls.len() < self.limit
        }
    }

    #[test]
    fn rounds_run_their_calls_and_the_answer_reads_the_results() {
        let mut model = Looking { rounds: 2, seen: Vec::new() };
        let mut tools = Counting { calls: Vec::new(), limit: 10 };
        let mut streamed = String::new();
        let response =
            reply_with_tools(&mut model, &ReplyRequest::default(), &mut tools, &mut |piece| streamed.push_str(piece))
                .unwrap();
        assert_eq!(tools.calls, vec![json!({"n": 0}), json!({"n": 1})], "unreadable arguments run no tool");
        let expected = r#"Checking.

Checking.

{"got":{"n":0}} {"error":"not JSON"} {"got":{"n":1}} {"error":"not JSON"}"#;
        assert_eq!(response.text, expected);
        assert_eq!(streamed, expected);
        assert_eq!(response.usage, Usage { calls: 3, prompt: 30, completion: 3, cached: 0, estimated: false });
        assert_eq!(model.seen, vec![(false, 0), (false, 1), (false, 2)]);
    }

    #[test]
    fn a_spent_tool_budget_is_an_input_of_the_next_round() {
        let mut model = Looking { rounds: 5, seen: Vec::new() };
        let mut tools = Counting { calls: Vec::new(), limit: 1 };
        let response = reply_with_tools(&mut model, &ReplyRequest::default(), &mut tools, &mut |_| {}).unwrap();
        assert_eq!(model.seen, vec![(false, 0), (true, 1)]);
        assert_eq!(response.text, "Checking.\n\n{\"got\":{\"n\":0}} {\"error\":\"not JSON\"}");
    }

    #[test]
    fn a_loop_that_never_ends_stops_after_the_safety_net() {
        let mut model = Looking { rounds: usize::MAX, seen: Vec::new() };
        let mut tools = Counting { calls: Vec::new(), limit: usize::MAX };
        let response = reply_with_tools(&mut model, &ReplyRequest::default(), &mut tools, &mut |_| {}).unwrap();
        assert_eq!(model.seen.len(), MAX_ROUNDS);
        assert_eq!(tools.calls.len(), MAX_ROUNDS);
        assert_eq!(response.usage.calls, MAX_ROUNDS as u32);
        assert_eq!(response.text, vec!["Checking."; MAX_ROUNDS].join("\n\n"));
    }

    #[test]
    fn a_round_left_unanswered_tells_the_model_its_calls_did_not_run() {
        let call = ToolCall { id: "a".into(), name: "t".into(), arguments: Ok(json!({})) };
        let round = ToolRound { asked: ToolCalls { calls: vec![call], ..ToolCalls::default() }, results: vec![] };
        let texts: Vec<String> = round.answered().map(|(_, result)| result_text(result)).collect();
        assert_eq!(texts, [r#"{"error":"the call was not run"}"#]);
    }
}
