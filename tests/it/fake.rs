//! Fake model servers on 127.0.0.1 that speak the real wire formats: OpenAI
//! chat completions (JSON answers, SSE chunks, streamed tool calls) and
//! Anthropic messages (tool_use blocks, named SSE events).
//!
//! The "model" is scripted by facts per user message: the understand answer
//! is built from the JSON schema flowc sends (every key it asks for, a fact
//! where the script has one, null or false otherwise), so a request that
//! asks for the wrong thing shows up as a wrong conversation. A reply says
//! the step's instructions back, streamed in small pieces; a reply offered
//! tools calls the first one once, with arguments from the known data, then
//! reports the tool's result.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// A reply call: streamed, and not an understand call (which streams
    /// too, so that the fused reply it may carry arrives as it is written).
    pub fn is_stream(&self) -> bool {
        let body = self.json();
        body["stream"] == json!(true) && !is_understand(&body)
    }
}

/// What the server answers one request with.
pub enum Reply {
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `text/event-stream`, one chunk per event.
    Stream(Vec<String>),
    /// A stream with a pause before every chunk after the first.
    Paced(Vec<String>, Duration),
}

impl Reply {
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    /// The same stream, pausing `every` between chunks.
    pub fn paced(self, every: Duration) -> Reply {
        match self {
            Reply::Stream(chunks) | Reply::Paced(chunks, _) => Reply::Paced(chunks, every),
            full => full,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Full { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

/// Answers request number `index` (from 0).
pub type Handler = Arc<dyn Fn(&Request, usize) -> Reply + Send + Sync>;

pub struct FakeServer {
    pub url: String,
    address: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl FakeServer {
    pub fn start(handler: Handler) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let address = listener.local_addr().expect("local address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let counter = Arc::new(AtomicUsize::new(0));
        let (thread_requests, thread_stop) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (requests, handler, counter) = (thread_requests.clone(), handler.clone(), counter.clone());
                std::thread::spawn(move || serve(stream, &requests, &handler, &counter));
            }
        });
        FakeServer { url: format!("http://{address}"), address, requests, stop }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|requests| requests.clone()).unwrap_or_default()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(100));
    }
}

fn serve(mut stream: TcpStream, requests: &Mutex<Vec<Request>>, handler: &Handler, counter: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    // One request per connection: every answer says `connection: close`.
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    let index = counter.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut requests) = requests.lock() {
        requests.push(request.clone());
    }
    write_reply(&mut stream, handler(&request, index));
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position;
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Some(Request { method, path, headers, body: String::from_utf8_lossy(&body).to_string(), at: Instant::now() })
}

fn write_reply(stream: &mut TcpStream, reply: Reply) {
    match reply {
        Reply::Full { status, headers, body } => {
            let mut head =
                format!("HTTP/1.1 {status} Status\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
        Reply::Stream(chunks) => write_stream(stream, chunks, Duration::ZERO),
        Reply::Paced(chunks, pause) => write_stream(stream, chunks, pause),
    }
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn write_stream(stream: &mut TcpStream, chunks: Vec<String>, pause: Duration) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    for (index, chunk) in chunks.into_iter().enumerate() {
        if index > 0 && !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
        if stream.write_all(framed.as_bytes()).and_then(|()| stream.flush()).is_err() {
            return;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

// ------------------------------------------------------------ the "model"

/// What the user's messages say: for each message, the facts the
/// understand answer reports (`{"flow": …, "fields": {…}, "conditions": {…}}`).
#[derive(Clone, Default)]
pub struct Facts(pub BTreeMap<String, Value>);

impl Facts {
    pub fn new(pairs: &[(&str, Value)]) -> Facts {
        Facts(pairs.iter().map(|(message, facts)| (message.to_string(), facts.clone())).collect())
    }

    /// The understand answer to `message` for the answer `schema` flowc
    /// sent: every key the schema asks for, the fact or null/false.
    pub fn answer(&self, schema: &Value, message: &str) -> Value {
        let facts = self.0.get(message).cloned().unwrap_or_else(|| json!({}));
        let mut answer = Map::new();
        let properties = schema["properties"].as_object().cloned().unwrap_or_default();
        for (key, property) in properties {
            let value = match key.as_str() {
                "flow" => {
                    let names = flow_names(&property);
                    match facts["flow"].as_str() {
                        Some(flow) if names.iter().any(|name| name == flow) => json!(flow),
                        _ => Value::Null,
                    }
                }
                "fields" | "conditions" | "signals" => {
                    let names = property["properties"].as_object().cloned().unwrap_or_default();
                    let object: Map<String, Value> =
                        names.keys().map(|name| (name.clone(), cite(&key, facts[&key].get(name), message))).collect();
                    Value::Object(object)
                }
                // The fused reply: written only where the facts of the
                // message give it; otherwise each turn that asks makes its
                // reply call as before.
                "step" | "reply" => facts.get(&key).cloned().unwrap_or(Value::Null),
                other => panic!("the answer schema asks for an unknown key `{other}`: {schema}"),
            };
            answer.insert(key, value);
        }
        Value::Object(answer)
    }
}

/// A fact as the answer writes it: a bare value or yes cites the whole
/// message, as a model quoting the user would; a fact already written as
/// `{"evidence", "value"}` or `{"evidence", "yes"}` (a model citing words
/// of its own choosing, or none) is sent as it is.
fn cite(key: &str, fact: Option<&Value>, message: &str) -> Value {
    match (key, fact) {
        (_, Some(written)) if written.get("evidence").is_some() => written.clone(),
        ("fields", None | Some(Value::Null)) => Value::Null,
        ("fields", Some(value)) => json!({"evidence": message, "value": value}),
        (_, Some(Value::Bool(true))) => json!({"evidence": message, "yes": true}),
        _ => json!({"evidence": null, "yes": false}),
    }
}

/// The flow names a `flow` property allows (`anyOf` of an enum and null).
fn flow_names(property: &Value) -> Vec<String> {
    let mut names = Vec::new();
    let mut collect = |schema: &Value| {
        if let Some(values) = schema["enum"].as_array() {
            names.extend(values.iter().filter_map(Value::as_str).map(str::to_string));
        }
    };
    collect(property);
    if let Some(choices) = property["anyOf"].as_array() {
        choices.iter().for_each(&mut collect);
    }
    names
}

/// The user message an understand prompt is about.
pub fn latest_message(prompt: &str) -> String {
    let quoted = prompt.rsplit("Latest user message: ").next().expect("the prompt names the message");
    serde_json::from_str(quoted.trim()).expect("the message is a JSON string")
}

/// The instructions of a respond prompt, as the reply says them back.
pub fn instructions(system: &str) -> String {
    let Some((_, rest)) = system.split_once("Instructions:") else {
        return "How can I help?".into();
    };
    let items: Vec<&str> = rest.lines().filter_map(|line| line.strip_prefix("- ")).collect();
    if items.is_empty() { "How can I help?".into() } else { items.join(" ") }
}

/// The `Known data` of a respond prompt.
pub fn known_data(system: &str) -> Map<String, Value> {
    system
        .lines()
        .find_map(|line| line.strip_prefix("Known data: "))
        .and_then(|data| serde_json::from_str(data).ok())
        .unwrap_or_default()
}

/// The arguments of a call of `tool` (an OpenAI function or Anthropic tool
/// definition's parameters): the known values of its parameters.
fn arguments(parameters: &Value, data: &Map<String, Value>) -> Value {
    let names = parameters["properties"].as_object().cloned().unwrap_or_default();
    Value::Object(names.keys().filter_map(|name| Some((name.clone(), data.get(name)?.clone()))).collect())
}

/// Text in pieces of at most 7 characters (cut inside words), as tokens
/// stream.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(7).map(|piece| piece.iter().collect()).collect()
}

pub const UNDERSTAND_USAGE: (u64, u64, u64) = (120, 15, 64);
pub const RESPOND_USAGE: (u64, u64, u64) = (80, 10, 0);

// ------------------------------------------------------------ OpenAI

/// A chat completions server for `facts`.
pub fn openai(facts: Facts) -> Handler {
    Arc::new(move |request: &Request, _| openai_answer(&facts, request))
}

pub fn openai_answer(facts: &Facts, request: &Request) -> Reply {
    assert_eq!(request.path, "/v1/chat/completions", "flowc posts to chat completions");
    let body = request.json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let system = messages.first().and_then(|message| message["content"].as_str()).unwrap_or_default();
    if body["stream"] == json!(true) && !system.starts_with(UNDERSTAND_TASK) {
        return openai_stream(&body, &messages);
    }
    let schema = if body["response_format"]["type"] == "json_schema" {
        body["response_format"]["json_schema"]["schema"].clone()
    } else if body["response_format"]["type"] == "json_object" {
        body["response_format"]["schema"].clone()
    } else {
        body["tools"][0]["function"]["parameters"].clone()
    };
    let prompt = messages.get(1).and_then(|message| message["content"].as_str()).unwrap_or_default();
    let answer = facts.answer(&schema, &latest_message(prompt));
    let (prompt_tokens, completion_tokens, cached) = UNDERSTAND_USAGE;
    if body["stream"] == json!(true) {
        return streamed_understanding(&body, &answer.to_string());
    }
    Reply::json(
        200,
        &json!({
            "id": "chatcmpl-understand",
            "object": "chat.completion",
            "created": 1_767_607_200,
            "model": body["model"],
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": answer.to_string()},
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }),
    )
}

/// How the understand prompt starts: a streamed request that starts so is
/// an understand call, answered as a stream of the answer's text.
const UNDERSTAND_TASK: &str = "You read the latest user message";

/// Whether a request body is an understand call: OpenAI's starts with the
/// understand task, Anthropic's forces the understand tool.
fn is_understand(body: &Value) -> bool {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    system.starts_with(UNDERSTAND_TASK) || body["tool_choice"]["type"] == "tool"
}

/// An understand answer streamed in small pieces (`delta.content`, or the
/// forced call's arguments in the tool mode), then its usage.
fn streamed_understanding(body: &Value, answer: &str) -> Reply {
    let tool = body["tool_choice"]["type"] == "function";
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-understand", "object": "chat.completion.chunk", "model": body["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    for piece in pieces(answer) {
        let delta = if tool {
            json!({"tool_calls": [{"index": 0, "id": "call_u", "type": "function",
                                   "function": {"name": "understanding", "arguments": piece}}]})
        } else {
            json!({"content": piece})
        };
        events.push(chunk(delta, Value::Null));
    }
    events.push(chunk(json!({}), json!("stop")));
    let (prompt_tokens, completion_tokens, cached) = UNDERSTAND_USAGE;
    if body["stream_options"]["include_usage"] == json!(true) {
        events.push(json!({"id": "chatcmpl-understand", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": cached}}}));
    }
    let mut chunks: Vec<String> = events.iter().map(|event| format!("data: {event}\n\n")).collect();
    chunks.push("data: [DONE]\n\n".into());
    Reply::Stream(chunks)
}

fn openai_stream(body: &Value, messages: &[Value]) -> Reply {
    let system = messages.first().and_then(|message| message["content"].as_str()).unwrap_or_default();
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-respond",
            "object": "chat.completion.chunk",
            "created": 1_767_607_200,
            "model": body["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    let tool_result = messages.iter().rev().find(|message| message["role"] == "tool");
    let offered = body["tools"].as_array().and_then(|tools| tools.first());
    match (offered, tool_result) {
        (Some(tool), None) => {
            let name = &tool["function"]["name"];
            let arguments = arguments(&tool["function"]["parameters"], &known_data(system)).to_string();
            let (head, tail) = arguments.split_at(arguments.len() / 2);
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                       "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for part in [head, tail] {
                events.push(chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}), Value::Null));
            }
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        (_, result) => {
            let mut text = instructions(system);
            if let Some(result) = result {
                text = format!("{text} (The tool said {}.)", result["content"].as_str().unwrap_or_default());
            }
            for piece in pieces(&text) {
                events.push(chunk(json!({"content": piece}), Value::Null));
            }
            events.push(chunk(json!({}), json!("stop")));
        }
    }
    let (prompt_tokens, completion_tokens, cached) = RESPOND_USAGE;
    if body["stream_options"]["include_usage"] == json!(true) {
        events.push(json!({
            "id": "chatcmpl-respond",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        }));
    }
    let mut chunks: Vec<String> = events.iter().map(|event| format!("data: {event}\n\n")).collect();
    chunks.push("data: [DONE]\n\n".into());
    Reply::Stream(chunks)
}

// ------------------------------------------------------------ Anthropic

/// A Messages API server for `facts`.
pub fn anthropic(facts: Facts) -> Handler {
    Arc::new(move |request: &Request, _| anthropic_answer(&facts, request))
}

fn anthropic_answer(facts: &Facts, request: &Request) -> Reply {
    assert_eq!(request.path, "/v1/messages", "flowc posts to messages");
    let body = request.json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let forced = body["tool_choice"]["type"] == "tool";
    if body["stream"] == json!(true) && !forced {
        return anthropic_stream(&body, &messages);
    }
    let schema = &body["tools"][0]["input_schema"];
    let prompt = messages.first().and_then(|message| message["content"].as_str()).unwrap_or_default();
    let input = facts.answer(schema, &latest_message(prompt));
    let (prompt_tokens, completion_tokens, cached) = UNDERSTAND_USAGE;
    if body["stream"] == json!(true) {
        let usage = json!({"input_tokens": prompt_tokens - cached, "cache_read_input_tokens": cached,
                           "cache_creation_input_tokens": 0, "output_tokens": 1});
        let mut events = vec![
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_understand", "type": "message",
                "role": "assistant", "model": body["model"], "content": [], "stop_reason": null, "usage": usage}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": "toolu_understand", "name": body["tools"][0]["name"], "input": {}}}),
            ),
        ];
        for piece in pieces(&input.to_string()) {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
        events.push((
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": completion_tokens}}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        return Reply::Stream(events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect());
    }
    Reply::json(
        200,
        &json!({
            "id": "msg_understand",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "tool_use", "id": "toolu_understand", "name": body["tools"][0]["name"], "input": input}],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": prompt_tokens - cached, "cache_read_input_tokens": cached,
                      "cache_creation_input_tokens": 0, "output_tokens": completion_tokens},
        }),
    )
}

fn anthropic_stream(body: &Value, messages: &[Value]) -> Reply {
    let system: String = body["system"]
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|block| block["text"].as_str()).collect::<Vec<_>>().join(""))
        .unwrap_or_else(|| body["system"].as_str().unwrap_or_default().to_string());
    let tool_result = messages.iter().rev().find_map(|message| {
        message["content"].as_array()?.iter().find(|block| block["type"] == "tool_result").cloned()
    });
    let offered =
        body["tools"].as_array().and_then(|tools| tools.first()).filter(|_| body["tool_choice"]["type"] == "auto");
    let (prompt_tokens, completion_tokens, cached) = RESPOND_USAGE;
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_respond", "type": "message", "role": "assistant", "model": body["model"], "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": prompt_tokens - cached, "cache_read_input_tokens": cached,
                      "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
    )];
    let stop_reason = match (offered, &tool_result) {
        (Some(tool), None) => {
            let arguments = arguments(&tool["input_schema"], &known_data(&system)).to_string();
            let (head, tail) = arguments.split_at(arguments.len() / 2);
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "tool_use", "id": "toolu_1", "name": tool["name"], "input": {}}}),
            ));
            for part in [head, tail] {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta", "partial_json": part}}),
                ));
            }
            events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
            "tool_use"
        }
        (_, result) => {
            let mut text = instructions(&system);
            if let Some(result) = result {
                text = format!("{text} (The tool said {}.)", result["content"].as_str().unwrap_or_default());
            }
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            for piece in pieces(&text) {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
                ));
            }
            events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
            "end_turn"
        }
    };
    events.push(("ping", json!({"type": "ping"})));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": completion_tokens}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    Reply::Stream(events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect())
}
