//! Record and replay: conversation tests with real-model behaviour that run
//! deterministically, offline.
//!
//! [`Recorder`] wraps any provider (`--record FILE`) and writes every call
//! of the run to a JSON file: the request, its fingerprint, and the answer
//! (the understanding, or the reply with the tool calls made on the way),
//! or the error. A reply is one entry however many rounds it took: it is
//! written when its last round answers (or fails), from the rounds the
//! caller passes back, so the recorder keeps no state between rounds. The file is rewritten after each call (temp file and
//! rename), so a run that dies keeps what it did; API keys are redacted.
//!
//! [`Replay`] (`--provider replay:FILE`) answers from such a file by
//! fingerprint, the hash of the request's canonical JSON, and fails loudly
//! with [`ProviderError::NotRecorded`] on a request it has not seen. A
//! replayed reply asks for its recorded tool calls again, one round each
//! while the tool budget allows, so tools, their records and their
//! directives behave as they did; then it answers the recorded text.

use crate::llm::http::redact;
use crate::llm::{
    ModelReply, Provider, ProviderError, ReplyRequest, ReplyText, Response, ToolCall, ToolCalls, ToolRound,
    UnderstandRequest, Understanding,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

const FORMAT_VERSION: u32 = 1;

/// A recorded run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub version: u32,
    /// The provider that answered (`openai:gpt-4o-mini`).
    pub provider: String,
    pub calls: Vec<RecordedCall>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Understand,
    /// Written `respond`, the call's name when the format was fixed: the
    /// name is also hashed into every reply's fingerprint, so renaming it
    /// would orphan every recording made before. `reply` is read too.
    #[serde(rename = "respond", alias = "reply")]
    Reply,
    /// A model step's call; the answer is kept as the response's text (the
    /// value as JSON) and usage.
    Ask,
}

impl CallKind {
    /// The name in the file and in fingerprints.
    fn as_str(self) -> &'static str {
        match self {
            CallKind::Understand => "understand",
            CallKind::Reply => "respond",
            CallKind::Ask => "ask",
        }
    }
}

/// One call and its outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    pub kind: CallKind,
    pub fingerprint: String,
    pub request: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub understanding: Option<Understanding>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RecordedToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedToolCall {
    pub name: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A failed call: its class (`ProviderError::class`) and message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedError {
    pub class: String,
    pub message: String,
}

impl RecordedError {
    fn from_error(error: &ProviderError) -> RecordedError {
        let message = match error {
            ProviderError::Auth(message)
            | ProviderError::RateLimited(message)
            | ProviderError::Overloaded(message)
            | ProviderError::InvalidRequest(message)
            | ProviderError::ContextOverflow(message)
            | ProviderError::Timeout(message)
            | ProviderError::Network(message)
            | ProviderError::InvalidOutput(message)
            | ProviderError::NotRecorded(message) => message.clone(),
            ProviderError::Cancelled => String::new(),
        };
        RecordedError { class: error.class().to_string(), message }
    }

    fn to_error(&self) -> ProviderError {
        let message = self.message.clone();
        match self.class.as_str() {
            "auth" => ProviderError::Auth(message),
            "rate_limited" => ProviderError::RateLimited(message),
            "overloaded" => ProviderError::Overloaded(message),
            "invalid_request" => ProviderError::InvalidRequest(message),
            "context_overflow" => ProviderError::ContextOverflow(message),
            "timeout" => ProviderError::Timeout(message),
            "network" => ProviderError::Network(message),
            "cancelled" => ProviderError::Cancelled,
            "not_recorded" => ProviderError::NotRecorded(message),
            _ => ProviderError::InvalidOutput(message),
        }
    }
}

/// The fingerprint of a request: 128-bit FNV-1a of its canonical JSON
/// (object keys sorted at every level), prefixed by the call kind. FNV is
/// stable across Rust versions and platforms, unlike `DefaultHasher`; this
/// is an index, not a security boundary.
pub fn fingerprint(kind: CallKind, request: &Value) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let text = canonical(request).to_string();
    let mut hash = OFFSET;
    for byte in kind.as_str().bytes().chain([0u8]).chain(text.bytes()) {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    format!("{}-{hash:032x}", kind.as_str())
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let sorted: Map<String, Value> =
                keys.into_iter().filter_map(|key| map.get(key).map(|value| (key.clone(), canonical(value)))).collect();
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn request_json<T: Serialize>(request: &T) -> Value {
    serde_json::to_value(request).unwrap_or(Value::Null)
}

/// Records every call of the provider it wraps.
pub struct Recorder {
    inner: Box<dyn Provider>,
    path: PathBuf,
    recording: Recording,
    secrets: Vec<String>,
}

impl Recorder {
    /// Starts a recording at `path`, writing the (empty) file at once so a
    /// path that cannot be written fails before the run, not after.
    pub fn create(path: &Path, inner: Box<dyn Provider>, secrets: Vec<String>) -> Result<Recorder, ProviderError> {
        let recording = Recording { version: FORMAT_VERSION, provider: inner.name(), calls: Vec::new() };
        let recorder = Recorder { inner, path: path.to_path_buf(), recording, secrets };
        recorder.save()?;
        Ok(recorder)
    }

    fn push(&mut self, call: RecordedCall) -> Result<(), ProviderError> {
        self.recording.calls.push(call);
        self.save()
    }

    /// Writes the whole recording, keys redacted, through a temp file and a
    /// rename. A failure is reported as an invalid request: the run cannot
    /// keep the promise `--record` made.
    fn save(&self) -> Result<(), ProviderError> {
        let text = serde_json::to_string_pretty(&self.recording)
            .map_err(|error| ProviderError::InvalidRequest(format!("cannot encode the recording: {error}")))?;
        let text = redact(&text, &self.secrets);
        let temp = self.path.with_extension("json.tmp");
        let written = std::fs::write(&temp, format!("{text}\n")).and_then(|()| std::fs::rename(&temp, &self.path));
        written.map_err(|error| {
            ProviderError::InvalidRequest(format!("cannot write the recording {}: {error}", self.path.display()))
        })
    }
}

impl Provider for Recorder {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn modes(&self) -> Option<String> {
        self.inner.modes()
    }

    fn ask(&mut self, request: &crate::llm::AskRequest) -> Result<crate::llm::AskAnswer, ProviderError> {
        let result = self.inner.ask(request);
        if result.as_ref().is_ok_and(|answer| answer.calls.is_some()) {
            // A tool round: the step's entry is written with its answer.
            return result;
        }
        let request_value = request_json(request);
        let response = result.as_ref().ok().map(|answer| {
            let mut usage = answer.usage;
            for round in &request.rounds {
                usage.add(round.asked.usage);
            }
            Response { text: serde_json::to_string(&answer.value).unwrap_or_default(), usage }
        });
        let call = RecordedCall {
            kind: CallKind::Ask,
            fingerprint: fingerprint(CallKind::Ask, &request_value),
            request: request_value,
            understanding: None,
            tool_calls: recorded_tool_calls(&request.rounds),
            response,
            error: result.as_ref().err().map(RecordedError::from_error),
        };
        self.push(call)?;
        result
    }

    fn understand_left_out(&self, request: &UnderstandRequest) -> usize {
        self.inner.understand_left_out(request)
    }

    fn reply_left_out(&self, request: &ReplyRequest) -> usize {
        self.inner.reply_left_out(request)
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let result = self.inner.understand(request);
        let request = request_json(request);
        let call = RecordedCall {
            kind: CallKind::Understand,
            fingerprint: fingerprint(CallKind::Understand, &request),
            request,
            understanding: result.as_ref().ok().cloned(),
            tool_calls: Vec::new(),
            response: None,
            error: result.as_ref().err().map(RecordedError::from_error),
        };
        self.push(call)?;
        result
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let result = self.inner.reply(request, rounds, on_text);
        let response = match &result {
            Ok(ModelReply::ToolCalls(_)) => return result,
            Ok(ModelReply::Done(last)) => Some(whole_reply(rounds, last)),
            Err(_) => None,
        };
        let request_value = request_json(request);
        let call = RecordedCall {
            kind: CallKind::Reply,
            fingerprint: fingerprint(CallKind::Reply, &request_value),
            request: request_value,
            understanding: None,
            tool_calls: recorded_tool_calls(rounds),
            response,
            error: result.as_ref().err().map(RecordedError::from_error),
        };
        self.push(call)?;
        result
    }
}

/// The reply over all its rounds, as the caller joins it.
fn whole_reply(rounds: &[ToolRound], last: &Response) -> Response {
    let mut reply = ReplyText::default();
    for round in rounds {
        reply.add(&round.asked.text, round.asked.usage);
    }
    reply.add(&last.text, last.usage);
    reply.finish()
}

/// The tool calls that ran, with their results. A call whose arguments
/// could not be read ran no tool and is not replayed.
fn recorded_tool_calls(rounds: &[ToolRound]) -> Vec<RecordedToolCall> {
    rounds
        .iter()
        .flat_map(ToolRound::answered)
        .filter_map(|(call, result)| {
            let arguments = call.arguments.as_ref().ok()?.clone();
            Some(RecordedToolCall {
                name: call.name.clone(),
                arguments,
                result: result.ok().cloned(),
                error: result.err().map(str::to_string),
            })
        })
        .collect()
}

/// Answers from a recording.
pub struct Replay {
    name: String,
    /// Calls by fingerprint, in recorded order. The last answer of a
    /// fingerprint is kept and reused once the others are consumed, so a
    /// request repeated more often than recorded still gets an answer.
    calls: HashMap<String, VecDeque<RecordedCall>>,
    /// The reply whose rounds are being replayed, taken at its first round.
    replying: Option<RecordedCall>,
    /// The model step being replayed, between its tool rounds.
    asking: Option<RecordedCall>,
}

impl Replay {
    pub fn load(path: &Path) -> Result<Replay, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ProviderError::InvalidRequest(format!("cannot read the recording {}: {error}", path.display()))
        })?;
        let recording: Recording = serde_json::from_str(&text).map_err(|error| {
            ProviderError::InvalidRequest(format!("{} is not a flowc recording: {error}", path.display()))
        })?;
        if recording.version != FORMAT_VERSION {
            return Err(ProviderError::InvalidRequest(format!(
                "{} is a version {} recording; this flowc reads version {FORMAT_VERSION}",
                path.display(),
                recording.version
            )));
        }
        let file_name = path.file_name().map(|name| name.to_string_lossy().to_string()).unwrap_or_default();
        Ok(Replay::from_recording(&file_name, recording))
    }

    pub fn from_recording(label: &str, recording: Recording) -> Replay {
        let mut calls: HashMap<String, VecDeque<RecordedCall>> = HashMap::new();
        for call in recording.calls {
            calls.entry(call.fingerprint.clone()).or_default().push_back(call);
        }
        Replay { name: format!("replay:{label}"), calls, replying: None, asking: None }
    }

    fn next(&mut self, kind: CallKind, request: &Value, message: &str) -> Result<RecordedCall, ProviderError> {
        let key = fingerprint(kind, request);
        let queue = self.calls.get_mut(&key).filter(|queue| !queue.is_empty()).ok_or_else(|| {
            ProviderError::NotRecorded(format!(
                "{} call {key} for the message {} (record the run again with --record)",
                kind.as_str(),
                Value::String(message.to_string())
            ))
        })?;
        let call = if queue.len() > 1 { queue.pop_front() } else { queue.front().cloned() };
        call.ok_or(ProviderError::NotRecorded(key))
    }
}

impl Provider for Replay {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn ask(&mut self, request: &crate::llm::AskRequest) -> Result<crate::llm::AskAnswer, ProviderError> {
        let request_value = request_json(request);
        let call = match (&self.asking, request.rounds.is_empty()) {
            (Some(call), false) if call.fingerprint == fingerprint(CallKind::Ask, &request_value) => call.clone(),
            _ => {
                let call = self.next(CallKind::Ask, &request_value, &request.instruction)?;
                self.asking = Some(call.clone());
                call
            }
        };
        // As a reply: the recorded tool calls are asked again, one a
        // round, while the step's tool budget allows; the usage recorded
        // for the whole step comes with its answer.
        let asked: usize = request.rounds.iter().map(|round| round.asked.calls.len()).sum();
        if let Some(tool_call) = call.tool_calls.get(asked)
            && !request.tools_spent
        {
            let call = ToolCall {
                id: format!("call_{asked}"),
                name: tool_call.name.clone(),
                arguments: Ok(tool_call.arguments.clone()),
            };
            let calls = ToolCalls { calls: vec![call], ..ToolCalls::default() };
            return Ok(crate::llm::AskAnswer {
                value: Ok(Value::Null),
                usage: crate::llm::Usage::default(),
                calls: Some(calls),
            });
        }
        self.asking = None;
        if let Some(error) = &call.error {
            return Err(error.to_error());
        }
        let response = call.response.unwrap_or_default();
        let value = serde_json::from_str(&response.text)
            .map_err(|error| ProviderError::NotRecorded(format!("the recorded answer is unreadable: {error}")))?;
        Ok(crate::llm::AskAnswer { value, usage: response.usage, calls: None })
    }

    /// A request that asks for the fused reply is answered by its
    /// recorded call; a recording made before the fused call has only the
    /// request without it, which is answered without a reply (the runtime
    /// then asks for the reply in a call of its own, as that run did).
    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let json = request_json(request);
        let call = match self.next(CallKind::Understand, &json, &request.message) {
            Err(ProviderError::NotRecorded(reason)) if request.reply.is_some() => {
                let unfused = UnderstandRequest { reply: None, ..request.clone() };
                let mut call = self
                    .next(CallKind::Understand, &request_json(&unfused), &request.message)
                    .map_err(|_| ProviderError::NotRecorded(reason))?;
                if let Some(understanding) = call.understanding.as_mut() {
                    understanding.reply = None;
                }
                call
            }
            other => other?,
        };
        if let Some(error) = &call.error {
            return Err(error.to_error());
        }
        Ok(call.understanding.unwrap_or_default())
    }

    /// The first round takes the recorded reply; each round then asks for
    /// its next recorded tool call, one at a time, and stops asking once the
    /// tool budget is spent, as the recorded run did.
    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let request_value = request_json(request);
        let call = match (&self.replying, rounds.is_empty()) {
            (Some(call), false) if call.fingerprint == fingerprint(CallKind::Reply, &request_value) => call.clone(),
            _ => {
                let call = self.next(CallKind::Reply, &request_value, &request.message)?;
                self.replying = Some(call.clone());
                call
            }
        };
        let asked: usize = rounds.iter().map(|round| round.asked.calls.len()).sum();
        if let Some(tool_call) = call.tool_calls.get(asked)
            && !request.tools_spent
        {
            // The tool's answer now may differ from the recorded one; the
            // runtime records and validates it as usual.
            let call = ToolCall {
                id: format!("call_{asked}"),
                name: tool_call.name.clone(),
                arguments: Ok(tool_call.arguments.clone()),
            };
            return Ok(ModelReply::ToolCalls(ToolCalls { calls: vec![call], ..ToolCalls::default() }));
        }
        self.replying = None;
        if let Some(error) = &call.error {
            return Err(error.to_error());
        }
        let response = call.response.unwrap_or_default();
        if !response.text.is_empty() {
            on_text(&response.text);
        }
        Ok(ModelReply::Done(response))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::schema::tests::booking_request;
    use crate::llm::{NoTools, ToolLoop, Usage, reply_with_tools};
    use serde_json::json;

    /// A provider with canned answers that counts its calls.
    struct Canned {
        calls: usize,
    }

    impl Provider for Canned {
        fn name(&self) -> String {
            "canned".into()
        }

        fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            self.calls += 1;
            if request.message == "fail" {
                return Err(ProviderError::RateLimited("HTTP 429 for key sk-abcdefgh12345".into()));
            }
            Ok(Understanding {
                flow: Some("booking".into()),
                usage: Usage { calls: 1, prompt: 10, completion: 5, cached: 2, estimated: false },
                ..Understanding::default()
            })
        }

        /// Books in the first round, then answers with the booking id.
        fn reply(
            &mut self,
            _request: &ReplyRequest,
            rounds: &[ToolRound],
            on_text: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            self.calls += 1;
            let Some(round) = rounds.first() else {
                let call =
                    ToolCall { id: "1".into(), name: "book_hotel".into(), arguments: Ok(json!({"hotel": "Ritz"})) };
                return Ok(ModelReply::ToolCalls(ToolCalls { calls: vec![call], ..ToolCalls::default() }));
            };
            let result = round.results[0].clone().map_err(ProviderError::InvalidOutput)?;
            let text = format!("Booked: {}", result["booking_id"].as_str().unwrap_or("?"));
            on_text(&text);
            Ok(ModelReply::Done(Response {
                text,
                usage: Usage { calls: 2, prompt: 30, completion: 8, cached: 0, estimated: false },
            }))
        }
    }

    struct Booking {
        calls: Vec<Value>,
    }

    impl ToolLoop for Booking {
        fn call_tool(&mut self, _name: &str, arguments: Value) -> Result<Value, String> {
            self.calls.push(arguments);
            Ok(json!({"booking_id": "B-1"}))
        }

        fn may_call(&self) -> bool {
            true
        }
    }

    fn temp_file(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("flowc-replay-{name}-{}.json", std::process::id()))
    }

    #[test]
    fn fingerprints_ignore_key_order_only() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, 2]}, "b": 1});
        assert_eq!(fingerprint(CallKind::Understand, &a), fingerprint(CallKind::Understand, &b));
        assert_ne!(fingerprint(CallKind::Understand, &a), fingerprint(CallKind::Reply, &a));
        let c = json!({"a": {"x": null, "y": [2, 1]}, "b": 1});
        assert_ne!(fingerprint(CallKind::Understand, &a), fingerprint(CallKind::Understand, &c));
        assert_eq!(fingerprint(CallKind::Reply, &json!({})).len(), "respond-".len() + 32);
    }

    #[test]
    fn record_then_replay() {
        let path = temp_file("roundtrip");
        let understand = booking_request();
        let respond = ReplyRequest { message: "book it".into(), ..ReplyRequest::default() };
        let mut failing = booking_request();
        failing.message = "fail".into();

        let mut recorder =
            Recorder::create(&path, Box::new(Canned { calls: 0 }), vec!["sk-abcdefgh12345".into()]).unwrap();
        let recorded = recorder.understand(&understand).unwrap();
        let mut tools = Booking { calls: vec![] };
        let mut streamed = String::new();
        let reply =
            reply_with_tools(&mut recorder, &respond, &mut tools, &mut |piece| streamed.push_str(piece)).unwrap();
        assert_eq!(reply.text, "Booked: B-1");
        let recorded_error = recorder.understand(&failing).unwrap_err();

        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-abcdefgh12345"), "keys are redacted");
        assert!(text.contains("[redacted]"));
        let file: Recording = serde_json::from_str(&text).unwrap();
        assert_eq!(file.provider, "canned");
        assert_eq!(file.calls.len(), 3);
        assert_eq!(file.calls[1].tool_calls[0].result, Some(json!({"booking_id": "B-1"})));

        let mut replay = Replay::load(&path).unwrap();
        assert_eq!(replay.name(), format!("replay:{}", path.file_name().unwrap().to_string_lossy()));
        assert_eq!(replay.understand(&understand).unwrap(), recorded);
        let mut tools = Booking { calls: vec![] };
        let mut replayed = String::new();
        let again = reply_with_tools(&mut replay, &respond, &mut tools, &mut |piece| replayed.push_str(piece)).unwrap();
        assert_eq!(again, reply);
        assert_eq!(replayed, "Booked: B-1");
        assert_eq!(tools.calls, vec![json!({"hotel": "Ritz"})], "recorded tool calls run again");
        let error = replay.understand(&failing).unwrap_err();
        assert_eq!(error.class(), recorded_error.class());
        assert!(!error.to_string().contains("sk-abcdefgh12345"));
        // A request seen again gets the same answer.
        assert_eq!(replay.understand(&understand).unwrap(), recorded);
        let _ = std::fs::remove_file(&path);
    }

    /// A recording written before replies came in rounds: one `respond`
    /// entry holding every tool call and the whole reply.
    fn recording_before_rounds(request: &ReplyRequest, kind: &str) -> String {
        let request = request_json(request);
        let key = fingerprint(CallKind::Reply, &request);
        assert!(key.starts_with("respond-"), "the fingerprint keeps its name: {key}");
        json!({
            "version": 1,
            "provider": "openai:gpt-test",
            "calls": [{
                "kind": kind,
                "fingerprint": key,
                "request": request,
                "tool_calls": [
                    {"name": "book_hotel", "arguments": {"hotel": "Ritz"}, "result": {"booking_id": "B-1"}},
                    {"name": "book_hotel", "arguments": {"hotel": "Savoy"}, "error": "sold out"},
                ],
                "response": {"text": "Let me check.\n\nBooked the Ritz.", "usage": {"calls": 3, "prompt": 90, "completion": 12, "cached": 0}},
            }],
        })
        .to_string()
    }

    #[test]
    fn a_recording_made_before_rounds_replays_as_it_did() {
        let request = ReplyRequest { message: "book it".into(), ..ReplyRequest::default() };
        // The fingerprint of this request when replies were one call: the
        // tool budget, which changes between rounds, is not part of it.
        assert_eq!(fingerprint(CallKind::Reply, &request_json(&request)), "respond-4f381ac1496683c1b2e9d4fc1e218d43");
        for kind in ["respond", "reply"] {
            let recording: Recording = serde_json::from_str(&recording_before_rounds(&request, kind)).unwrap();
            assert_eq!(recording.calls[0].kind, CallKind::Reply, "`{kind}` is read");
            let mut replay = Replay::from_recording("old.json", recording.clone());
            let mut tools = Booking { calls: vec![] };
            let mut streamed = String::new();
            let response =
                reply_with_tools(&mut replay, &request, &mut tools, &mut |piece| streamed.push_str(piece)).unwrap();
            assert_eq!(Some(&response), recording.calls[0].response.as_ref());
            assert_eq!(streamed, response.text);
            assert_eq!(tools.calls, vec![json!({"hotel": "Ritz"}), json!({"hotel": "Savoy"})]);
        }
        assert_eq!(serde_json::to_value(CallKind::Reply).unwrap(), json!("respond"), "new recordings read as old");
    }

    #[test]
    fn replayed_rounds_ask_one_recorded_call_each_until_the_budget_is_spent() {
        let mut request = ReplyRequest { message: "book it".into(), ..ReplyRequest::default() };
        let recording: Recording = serde_json::from_str(&recording_before_rounds(&request, "respond")).unwrap();
        let mut replay = Replay::from_recording("old.json", recording);
        let first = replay.reply(&request, &[], &mut |_| {}).unwrap();
        let ModelReply::ToolCalls(asked) = first else { panic!("a tool call expected: {first:?}") };
        assert_eq!(asked.calls.len(), 1);
        assert_eq!(asked.calls[0].arguments, Ok(json!({"hotel": "Ritz"})));
        let rounds = [ToolRound { asked, results: vec![Ok(json!({"booking_id": "B-1"}))] }];
        request.tools_spent = true;
        let mut streamed = String::new();
        let second = replay.reply(&request, &rounds, &mut |piece| streamed.push_str(piece)).unwrap();
        let ModelReply::Done(response) = second else { panic!("the answer expected: {second:?}") };
        assert_eq!(response.text, "Let me check.\n\nBooked the Ritz.");
        assert_eq!(streamed, response.text);
    }

    #[test]
    fn replay_fails_loudly_on_an_unseen_request() {
        let mut replay = Replay::from_recording("empty.json", Recording::default());
        let mut request = booking_request();
        request.message = "something new".into();
        let error = replay.understand(&request).unwrap_err();
        assert_eq!(error.class(), "not_recorded");
        let text = error.to_string();
        assert!(
            text.starts_with("replay has no recorded answer for this request: understand call understand-"),
            "{text}"
        );
        assert!(text.contains("for the message \"something new\""), "{text}");
        let error = reply_with_tools(&mut replay, &ReplyRequest::default(), &mut NoTools, &mut |_| {}).unwrap_err();
        assert_eq!(error.class(), "not_recorded");
    }

    #[test]
    fn repeated_requests_replay_in_order() {
        let request = json!({"message": "hi"});
        let key = fingerprint(CallKind::Understand, &request);
        let answer = |flow: &str| RecordedCall {
            kind: CallKind::Understand,
            fingerprint: key.clone(),
            request: request.clone(),
            understanding: Some(Understanding { flow: Some(flow.into()), ..Understanding::default() }),
            tool_calls: vec![],
            response: None,
            error: None,
        };
        let recording = Recording { version: 1, provider: "x".into(), calls: vec![answer("a"), answer("b")] };
        let mut replay = Replay::from_recording("r", recording);
        let ask = UnderstandRequest { message: "hi".into(), ..UnderstandRequest::default() };
        // The UnderstandRequest serializes to more than {"message"}: build the
        // same JSON the replay will fingerprint.
        let mut replay_calls = HashMap::new();
        let real_key = fingerprint(CallKind::Understand, &request_json(&ask));
        replay_calls.insert(real_key, replay.calls.remove(&key).unwrap());
        replay.calls = replay_calls;
        let flows: Vec<Option<String>> = (0..3).map(|_| replay.understand(&ask).unwrap().flow).collect();
        assert_eq!(flows, vec![Some("a".into()), Some("b".into()), Some("b".into())]);
    }

    #[test]
    fn a_fused_call_is_one_recorded_call_and_older_recordings_answer_it_without_the_reply() {
        let fused = crate::llm::schema::tests::fused_request();
        let written = crate::llm::FusedReply { step: "booking.confirm".into(), text: "Book it?".into() };
        let answer = |request: &UnderstandRequest, reply: Option<crate::llm::FusedReply>| {
            let request = request_json(request);
            RecordedCall {
                kind: CallKind::Understand,
                fingerprint: fingerprint(CallKind::Understand, &request),
                request,
                understanding: Some(Understanding { flow: Some("booking".into()), reply, ..Understanding::default() }),
                tool_calls: vec![],
                response: None,
                error: None,
            }
        };
        // Recorded with the reply: replayed with it, from the one call.
        let recording =
            Recording { version: 1, provider: "x".into(), calls: vec![answer(&fused, Some(written.clone()))] };
        let mut replay = Replay::from_recording("fused", recording);
        assert_eq!(replay.understand(&fused).unwrap().reply, Some(written));
        // Recorded before the fused call, the same request without the
        // reply: answered without one, so the turn makes its reply call.
        let unfused = UnderstandRequest { reply: None, ..fused.clone() };
        let recording = Recording { version: 1, provider: "x".into(), calls: vec![answer(&unfused, None)] };
        let mut replay = Replay::from_recording("old", recording);
        let understood = replay.understand(&fused).unwrap();
        assert_eq!((understood.flow.as_deref(), understood.reply), (Some("booking"), None));
        let other = UnderstandRequest { message: "something else".into(), ..fused };
        assert_eq!(replay.understand(&other).unwrap_err().class(), "not_recorded");
    }

    /// A provider whose server reported no usage: every figure estimated.
    struct Unreported;

    impl Provider for Unreported {
        fn name(&self) -> String {
            "unreported".into()
        }

        fn understand(&mut self, _request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Ok(Understanding {
                flow: Some("booking".into()),
                usage: Usage::estimate(400, 60),
                ..Understanding::default()
            })
        }

        fn reply(
            &mut self,
            _request: &ReplyRequest,
            _rounds: &[ToolRound],
            on_text: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            on_text("Which date?");
            Ok(ModelReply::Done(Response { text: "Which date?".into(), usage: Usage::estimate(300, 11) }))
        }
    }

    #[test]
    fn estimated_figures_are_recorded_as_estimated_and_replayed_so() {
        let path = temp_file("estimated");
        let understand = booking_request();
        let respond = ReplyRequest { message: "book it".into(), ..ReplyRequest::default() };
        let mut recorder = Recorder::create(&path, Box::new(Unreported), vec![]).unwrap();
        let understood = recorder.understand(&understand).unwrap();
        let replied = reply_with_tools(&mut recorder, &respond, &mut NoTools, &mut |_| {}).unwrap();
        assert!(understood.usage.estimated && replied.usage.estimated);

        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(file["calls"][0]["understanding"]["usage"]["estimated"], true);
        assert_eq!(file["calls"][1]["response"]["usage"]["estimated"], true);
        let mut replay = Replay::load(&path).unwrap();
        assert_eq!(replay.understand(&understand).unwrap().usage, Usage::estimate(400, 60));
        let again = reply_with_tools(&mut replay, &respond, &mut NoTools, &mut |_| {}).unwrap();
        assert_eq!(again.usage, Usage::estimate(300, 11));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_recording_without_the_estimated_flag_loads_as_counted() {
        let respond = ReplyRequest { message: "book it".into(), ..ReplyRequest::default() };
        let mut replay =
            Replay::from_recording("old", serde_json::from_str(&recording_before_rounds(&respond, "respond")).unwrap());
        let reply = reply_with_tools(&mut replay, &respond, &mut NoTools, &mut |_| {}).unwrap();
        assert_eq!(reply.usage, Usage { calls: 3, prompt: 90, completion: 12, cached: 0, estimated: false });
    }

    #[test]
    fn unreadable_recordings_are_clear_errors() {
        let path = temp_file("garbage");
        std::fs::write(&path, "not json").unwrap();
        let error = Replay::load(&path).err().unwrap().to_string();
        assert!(error.contains("is not a flowc recording"), "{error}");
        let _ = std::fs::remove_file(&path);
        let error = Replay::load(Path::new("/nonexistent/run.json")).err().unwrap().to_string();
        assert!(error.contains("cannot read the recording /nonexistent/run.json"), "{error}");
    }

    #[test]
    fn a_model_steps_tool_rounds_are_one_entry_replayed_call_by_call() {
        let path = temp_file("ask-rounds");
        let mut recorder = Recorder::create(&path, Box::new(crate::llm::offline::Offline::new()), vec![]).unwrap();
        let mut request = crate::llm::AskRequest {
            step: "w.s".into(),
            instruction: "Note the time".into(),
            field: crate::llm::FieldSpec::bare("note", "string"),
            inputs: vec![],
            tools: vec![crate::llm::ToolSpec {
                name: "clock".into(),
                description: None,
                parameters: json!({"type": "object", "properties": {}}),
            }],
            today: "2026-01-05".into(),
            repair: None,
            rounds: vec![],
            tools_spent: false,
            deadline: None,
        };
        request.field.schema = json!({"type": "string"});
        let asked = recorder.ask(&request).unwrap().calls.unwrap();
        let round = ToolRound { asked, results: vec![Ok(json!({"now": "10:00"}))] };
        let answered = recorder.ask(&crate::llm::AskRequest { rounds: vec![round], ..request.clone() }).unwrap();
        assert_eq!(answered.value, Ok(json!("Note the time\n10:00")));
        let recording: Recording = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(recording.calls.len(), 1, "one entry for the step");
        assert_eq!(recording.calls[0].tool_calls[0].name, "clock");
        assert_eq!(recording.calls[0].response.as_ref().unwrap().usage.calls, 2, "both calls' usage");
        let mut replay = Replay::from_recording("ask.json", recording);
        let asked = replay.ask(&request).unwrap().calls.unwrap();
        assert_eq!((asked.calls[0].name.as_str(), &asked.calls[0].arguments), ("clock", &Ok(json!({}))));
        let round = ToolRound { asked, results: vec![Ok(json!({"now": "11:00"}))] };
        let replayed = replay.ask(&crate::llm::AskRequest { rounds: vec![round], ..request }).unwrap();
        assert_eq!((replayed.value, replayed.calls, replayed.usage.calls), (answered.value, None, 2));
    }
}
