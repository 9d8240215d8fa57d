//! Whole conversations through the real binary against fake model servers
//! on 127.0.0.1 that speak OpenAI's and Anthropic's wire formats: what
//! flowc sends, what it does with each answer, record and replay, and the
//! faults a user meets first (a bad key, a rate limit).

#![allow(clippy::unwrap_used)]

use crate::fake::{self, Facts, FakeServer, Reply};
use crate::support::{flowc_env, root, stderr, stdout, temp_dir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const KEY: &str = "test-key-7f3a9c21";
const WAIT: Duration = Duration::from_secs(60);
const SCRIPT: [&str; 5] = ["Hi, I'd like to book a hotel room", "The Savoy, please", "2026-12-04", "2 guests", "yes"];
/// What book_hotel.py answers for The Savoy, 2026-12-04, 2 guests. (A hotel
/// the schema's examples do not list: code would read one of those itself,
/// and these tests are about what crosses the wire.)
const BOOKING_ID: &str = "GH-C0487197";

fn booking_facts() -> Facts {
    Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
        ("The Savoy, please", json!({"fields": {"hotel": "The Savoy"}})),
        ("2026-12-04", json!({"fields": {"date": "2026-12-04"}})),
        ("2 guests", json!({"fields": {"guests": 2}})),
        ("yes", json!({"fields": {"confirmed": true}})),
    ])
}

fn write_script(dir: &Path, lines: &[&str]) -> PathBuf {
    let path = dir.join("script.txt");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn turns(output: &std::process::Output) -> Vec<Value> {
    stdout(output).lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect()
}

fn path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs the booking program with `args` after `--script … --json` from
/// the repository root.
fn run(program: &Path, script: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut all = vec!["run".to_string(), path(program), "--script".into(), path(script), "--json".into()];
    all.extend(args.iter().map(|arg| arg.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    flowc_env(root(), &all, env, WAIT)
}

fn assert_no_key(output: &std::process::Output) {
    assert!(!stdout(output).contains(KEY), "the key leaked to stdout");
    assert!(!stderr(output).contains(KEY), "the key leaked to stderr");
}

/// The replies and data of the booking conversation, whatever the wire.
fn assert_booking(turns: &[Value]) {
    let replies: Vec<&str> = turns.iter().map(|turn| turn["reply"].as_str().unwrap()).collect();
    assert_eq!(
        replies,
        [
            "Which hotel would you like to book?",
            "For which date?",
            "How many guests?",
            "Shall I book The Savoy on 2026-12-04 for 2 guests?",
            &format!("Booked! Your confirmation number is {BOOKING_ID}."),
        ]
    );
    let last = turns.last().unwrap();
    assert_eq!(last["stopped_reason"], "flow_complete");
    assert_eq!(
        last["data"],
        json!({
            "hotel": "The Savoy",
            "date": "2026-12-04",
            "guests": 2,
            "confirmed": true,
            "booking_id": BOOKING_ID,
        })
    );
    let steps: Vec<&str> = turns.iter().map(|turn| turn["step"].as_str().unwrap_or("-")).collect();
    assert_eq!(steps, ["ask_hotel", "ask_date", "ask_guests", "confirm", "-"]);
    // One understand call and one respond call per turn; the last turn only
    // says a fixed text, so it makes no respond call.
    let calls: Vec<u64> = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap()).collect();
    assert_eq!(calls, [2, 2, 2, 2, 1]);
    let (up, uc, ucached) = fake::UNDERSTAND_USAGE;
    let (rp, rc, rcached) = fake::RESPOND_USAGE;
    assert_eq!(turns[0]["tokens"], json!({"prompt": up + rp, "completion": uc + rc, "cached": ucached + rcached}));
    assert_eq!(turns[4]["tokens"], json!({"prompt": up, "completion": uc, "cached": ucached}));
}

#[test]
fn booking_through_the_openai_wire_format() {
    let dir = temp_dir("openai-booking");
    let script = write_script(&dir, &SCRIPT);
    let server = FakeServer::start(fake::openai(booking_facts()));
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let output = run(
        &program,
        &script,
        &["--provider", "openai", "--model", "gpt-test", "--base-url", &base_url],
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_no_key(&output);
    let turns = turns(&output);
    assert_booking(&turns);

    let requests = server.requests();
    let total: u64 = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap()).sum();
    assert_eq!(requests.len() as u64, total, "every model call is one request");
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.json()["model"], "gpt-test");
    }
    let (understands, responds): (Vec<_>, Vec<_>) = requests.iter().partition(|request| !request.is_stream());
    assert_eq!((understands.len(), responds.len()), (5, 4));
    for request in &understands {
        let body = request.json();
        let format = &body["response_format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["json_schema"]["strict"], true);
        assert_eq!(format["json_schema"]["schema"]["additionalProperties"], false);
        assert_eq!(body["messages"][0]["role"], "system");
    }
    // The first message routes among the flows; later ones extract what
    // the step asks for.
    let first = understands[0].json();
    let schema = &first["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["properties"]["flow"]["anyOf"][0]["enum"], json!(["booking"]));
    let second = understands[1].json();
    let fields = &second["response_format"]["json_schema"]["schema"]["properties"]["fields"]["properties"];
    assert!(fields.get("hotel").is_some(), "{fields}");
    // Every understand call of the session, the routing turn's included,
    // opens with the same system prompt (it lists the flows every time): a
    // cacheable prefix.
    let systems: Vec<Value> = understands.iter().map(|request| request.json()["messages"][0].clone()).collect();
    assert!(systems.windows(2).all(|pair| pair[0] == pair[1]), "the understand prefix is stable");
    assert!(systems[0]["content"].as_str().unwrap().contains("Flows:\n- booking (Book a hotel room)"));
    for request in &responds {
        let body = request.json();
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("response_format").is_none());
        assert!(body.get("tools").is_none(), "booking.flow's steps expose no tools");
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(system.starts_with("You are the concierge of the Grand Hotel group."), "{system}");
    }
    // The history reaches the model: the last respond call carries the
    // earlier turns.
    let last = responds.last().unwrap().json();
    let roles: Vec<&str> = last["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]);
}

#[test]
fn booking_through_the_anthropic_wire_format_with_the_base_url_from_flowc_toml() {
    let dir = temp_dir("anthropic-booking");
    let script = write_script(&dir, &SCRIPT);
    let server = FakeServer::start(fake::anthropic(booking_facts()));
    // flowc.toml in the working directory (flows/ has none beside the
    // program) points the anthropic provider at the fake server.
    std::fs::write(
        dir.join("flowc.toml"),
        format!("provider = \"anthropic\"\nmodel = \"claude-test\"\nbase_url = \"{}\"\n", server.url),
    )
    .unwrap();
    let program = root().join("flows/booking.flow");
    let args = ["run", &path(&program), "--script", &path(&script), "--json"];
    let output = flowc_env(&dir, &args, &[("ANTHROPIC_API_KEY", KEY)], WAIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_no_key(&output);
    let turns = turns(&output);
    assert_booking(&turns);

    let requests = server.requests();
    assert_eq!(requests.len(), 9);
    for request in &requests {
        assert_eq!(request.header("x-api-key"), Some(KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert!(request.header("authorization").is_none());
        let body = request.json();
        assert_eq!(body["model"], "claude-test");
        assert_eq!(body["max_tokens"], 1024);
        // The stable part of the system prompt is marked for caching.
        assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    }
    let (understands, responds): (Vec<_>, Vec<_>) = requests.iter().partition(|request| !request.is_stream());
    assert_eq!((understands.len(), responds.len()), (5, 4));
    for request in &understands {
        let body = request.json();
        assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "record_understanding"}));
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    }
    for request in &responds {
        assert!(request.json().get("tools").is_none());
    }
}

#[test]
fn anthropic_base_url_flag_and_missing_key() {
    let dir = temp_dir("anthropic-flag");
    let script = write_script(&dir, &SCRIPT[..1]);
    let server = FakeServer::start(fake::anthropic(booking_facts()));
    let program = root().join("flows/booking.flow");
    let output =
        run(&program, &script, &["--provider", "anthropic", "--base-url", &server.url], &[("ANTHROPIC_API_KEY", KEY)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(turns(&output)[0]["reply"], "Which hotel would you like to book?");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.requests()[0].json()["model"], "claude-haiku-4-5");

    // Anthropic's own endpoint needs a key: one line naming the variable.
    let output = run(&program, &script, &["--provider", "anthropic"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: ANTHROPIC_API_KEY is not set: export it to use the anthropic provider, or run with --provider offline\n"
    );
}

/// booking.flow with a tool on the confirm step: the model checks
/// availability before asking for confirmation.
fn booking_with_a_tool(dir: &Path) -> PathBuf {
    let source = std::fs::read_to_string(root().join("flows/booking.flow")).unwrap();
    let tool = "tool check_availability(hotel: string, date: date) -> { rooms_left: int } {\n  \
                description \"How many rooms are left at a hotel on a date.\"\n  \
                exec \"python3\" \"tools/availability.py\"\n  timeout 10s\n}\n\nflow booking";
    let with_tool = source.replacen("flow booking", tool, 1).replacen(
        "    collect confirmed\n",
        "    collect confirmed\n    tools check_availability\n",
        1,
    );
    assert_ne!(with_tool, source);
    assert!(with_tool.contains("tools check_availability"));
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::copy(root().join("flows/tools/book_hotel.py"), dir.join("tools/book_hotel.py")).unwrap();
    std::fs::write(
        dir.join("tools/availability.py"),
        "import json, sys\nrequest = json.load(sys.stdin)\nassert request[\"hotel\"] and request[\"date\"]\n\
         print(json.dumps({\"rooms_left\": 3}))\n",
    )
    .unwrap();
    let program = dir.join("booking.flow");
    std::fs::write(&program, with_tool).unwrap();
    program
}

/// The confirm turn of the tool program: understand, a round that calls
/// the tool, a round that replies.
fn assert_tool_round(turns: &[Value]) {
    let calls: Vec<u64> = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap()).collect();
    assert_eq!(calls, [2, 2, 2, 3, 1]);
    assert_eq!(
        turns[3]["reply"],
        "Shall I book The Savoy on 2026-12-04 for 2 guests? (The tool said {\"rooms_left\":3}.)"
    );
    assert_eq!(turns[4]["data"]["booking_id"], BOOKING_ID);
}

#[test]
fn a_tool_round_through_the_openai_wire_format() {
    let dir = temp_dir("openai-tool");
    let script = write_script(&dir, &SCRIPT);
    let program = booking_with_a_tool(&dir);
    let server = FakeServer::start(fake::openai(booking_facts()));
    let base_url = format!("{}/v1", server.url);
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[("OPENAI_API_KEY", KEY)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_tool_round(&turns(&output));

    let responds: Vec<Value> = server.requests().iter().filter(|r| r.is_stream()).map(|r| r.json()).collect();
    assert_eq!(responds.len(), 5);
    let offer = &responds[3];
    assert_eq!(offer["tool_choice"], "auto");
    assert_eq!(offer["tools"][0]["type"], "function");
    assert_eq!(offer["tools"][0]["function"]["name"], "check_availability");
    assert_eq!(offer["tools"][0]["function"]["parameters"]["properties"]["date"]["type"], "string");
    // The tool call goes back as the assistant's tool_calls, its result as
    // a `tool` message with the call's id.
    let messages = responds[4]["messages"].as_array().unwrap();
    let call = &messages[messages.len() - 2];
    assert_eq!(call["role"], "assistant");
    assert_eq!(call["tool_calls"][0]["id"], "call_1");
    assert_eq!(call["tool_calls"][0]["function"]["name"], "check_availability");
    let arguments: Value =
        serde_json::from_str(call["tool_calls"][0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"hotel": "The Savoy", "date": "2026-12-04"}));
    let result = &messages[messages.len() - 1];
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_1");
    assert_eq!(result["content"], "{\"rooms_left\":3}");
}

#[test]
fn a_tool_round_through_the_anthropic_wire_format() {
    let dir = temp_dir("anthropic-tool");
    let script = write_script(&dir, &SCRIPT);
    let program = booking_with_a_tool(&dir);
    let server = FakeServer::start(fake::anthropic(booking_facts()));
    let output =
        run(&program, &script, &["--provider", "anthropic", "--base-url", &server.url], &[("ANTHROPIC_API_KEY", KEY)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_tool_round(&turns(&output));

    let responds: Vec<Value> = server.requests().iter().filter(|r| r.is_stream()).map(|r| r.json()).collect();
    assert_eq!(responds.len(), 5);
    assert_eq!(responds[3]["tool_choice"], json!({"type": "auto"}));
    assert_eq!(responds[3]["tools"][0]["name"], "check_availability");
    let messages = responds[4]["messages"].as_array().unwrap();
    let call = &messages[messages.len() - 2];
    assert_eq!(call["role"], "assistant");
    assert_eq!(call["content"][0]["type"], "tool_use");
    assert_eq!(call["content"][0]["input"], json!({"hotel": "The Savoy", "date": "2026-12-04"}));
    let result = &messages[messages.len() - 1]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert_eq!(result["content"], "{\"rooms_left\":3}");
}

#[test]
fn a_recorded_run_replays_without_a_server_and_a_changed_script_fails_loudly() {
    let dir = temp_dir("record-replay");
    let script = write_script(&dir, &SCRIPT);
    let recording = dir.join("booking.rec.json");
    let program = root().join("flows/booking.flow");
    let recorded = {
        let server = FakeServer::start(fake::openai(booking_facts()));
        let base_url = format!("{}/v1", server.url);
        let args = ["--provider", "openai", "--base-url", &base_url, "--record", &path(&recording)];
        run(&program, &script, &args, &[("OPENAI_API_KEY", KEY)])
    };
    assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
    assert_booking(&turns(&recorded));
    let file = std::fs::read_to_string(&recording).unwrap();
    assert!(!file.contains(KEY), "the recording holds no key");
    let calls = serde_json::from_str::<Value>(&file).unwrap()["calls"].as_array().unwrap().len();
    assert_eq!(calls, 9);

    // The server is gone: the replay answers everything.
    let replay = format!("replay:{}", path(&recording));
    let replayed = run(&program, &script, &["--provider", &replay], &[]);
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    assert_eq!(stdout(&replayed), stdout(&recorded), "the replay gives the same JSON, turn for turn");

    // Another hotel is another request: not in the recording.
    let changed = write_script(&dir, &[SCRIPT[0], "The Overlook, please", "2026-12-04"]);
    let failed = run(&program, &changed, &["--provider", &replay], &[]);
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(turns(&failed).len(), 1, "the first turn was recorded and ran");
    let error = stderr(&failed);
    assert!(error.contains("not_recorded"), "{error}");
    assert!(error.contains("replay has no recorded answer for this request"), "{error}");
}

#[test]
fn a_rejected_key_fails_the_turn_in_one_line() {
    let dir = temp_dir("auth");
    let script = write_script(&dir, &SCRIPT);
    let server = FakeServer::start(Arc::new(|_: &fake::Request, _| {
        Reply::json(
            401,
            &json!({"error": {"message": format!("Incorrect API key provided: {KEY}."),
                              "type": "invalid_request_error", "code": "invalid_api_key"}}),
        )
    }));
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[("OPENAI_API_KEY", KEY)]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "", "no turn completed");
    assert_no_key(&output);
    let error = stderr(&output);
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.starts_with("error: model call failed (auth): authentication failed"), "{error}");
    assert!(error.contains("check the API key"), "{error}");
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
}

#[test]
fn a_rate_limit_with_retry_after_is_waited_out() {
    let dir = temp_dir("rate-limit");
    let script = write_script(&dir, &SCRIPT[..1]);
    let facts = booking_facts();
    let server = FakeServer::start(Arc::new(move |request: &fake::Request, index| {
        if index == 0 {
            Reply::json(429, &json!({"error": {"message": "Rate limit reached", "type": "requests"}}))
                .header("retry-after", "1")
        } else {
            fake::openai_answer(&facts, request)
        }
    }));
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[("OPENAI_API_KEY", KEY)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns[0]["reply"], "Which hotel would you like to book?");
    assert_eq!(turns[0]["llm_calls"], 2, "the retry is not a model call");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body, requests[1].body, "the same request again");
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_millis(900), "Retry-After: 1 was honoured ({waited:?})");
}

/// The history messages a request carries: chat turns between the system
/// prompt and the latest message (a reply), or the lines of the
/// understand prompt's "Conversation so far".
fn history_in(request: &fake::Request) -> usize {
    let messages = request.json()["messages"].as_array().cloned().unwrap_or_default();
    if request.is_stream() {
        return messages.len().saturating_sub(2);
    }
    let prompt = messages.get(1).and_then(|message| message["content"].as_str()).unwrap_or_default().to_string();
    prompt.lines().filter(|line| line.starts_with("user: ") || line.starts_with("assistant: ")).count()
}

#[test]
fn a_small_context_window_is_learned_from_the_refusal_and_the_history_trimmed_to_it() {
    let dir = temp_dir("window");
    let script = write_script(&dir, &SCRIPT);
    // Replies that ramble, as a small model's do: each question comes with
    // a paragraph, and the history fills up.
    let program = dir.join("booking.flow");
    let source = std::fs::read_to_string(root().join("flows/booking.flow")).unwrap();
    let rambling = " Take your time: I can tell you about the rooms, the prices and the neighbourhood, \
                    about the restaurants, the spa and the gardens, about the history of the house and \
                    the people who stayed in it, about the museums and theatres within a short walk, \
                    and about every other hotel of the group, before we go on.?\"";
    std::fs::write(&program, source.replace("?\"", rambling)).unwrap();
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::copy(root().join("flows/tools/book_hotel.py"), dir.join("tools/book_hotel.py")).unwrap();
    let facts = booking_facts();
    // A model of 760 tokens of 4 bytes: a longer request is refused as
    // llama-cpp-python refuses it.
    const WINDOW: usize = 760;
    let server = FakeServer::start(Arc::new(move |request: &fake::Request, _| {
        let tokens = request.body.len() / 4;
        if tokens > WINDOW {
            let message = format!("Requested tokens ({tokens}) exceed context window of {WINDOW}");
            return Reply::json(400, &json!({"error": {"message": message, "type": "invalid_request_error"}}));
        }
        fake::openai_answer(&facts, request)
    }));
    let base_url = format!("{}/v1", server.url);
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    let last = turns.last().unwrap();
    assert_eq!(last["stopped_reason"], "flow_complete");
    assert_eq!(last["data"]["booking_id"], BOOKING_ID);
    let calls: Vec<u64> = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap()).collect();
    assert_eq!(calls, [2, 2, 2, 2, 1], "a refused request is not a model call");
    let requests = server.requests();
    let refused = requests.iter().filter(|request| request.body.len() / 4 > WINDOW).count();
    assert!(refused >= 1, "the conversation outgrew the window");
    assert!(refused <= 2, "once the window is known, requests are trimmed before they go: {refused} refused");
    let trimmed = requests.iter().filter(|request| !request.is_stream()).map(history_in).max().unwrap_or(0);
    assert!(trimmed < 8, "the understand calls never carried the whole history: {trimmed}");
    let stderr = stderr(&output);
    assert!(stderr.contains("context_window = 760"), "the learned window is shown: {stderr}");
    assert_eq!(stderr.matches("note:").count(), 1, "{stderr}");
}

/// booking.flow with a `turn_timeout` of one second, in `dir`.
fn booking_with_a_second_to_spare(dir: &Path) -> PathBuf {
    let program = dir.join("booking.flow");
    let source = std::fs::read_to_string(root().join("flows/booking.flow")).unwrap();
    std::fs::write(&program, source.replace("turn_timeout 60s", "turn_timeout 1s")).unwrap();
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::copy(root().join("flows/tools/book_hotel.py"), dir.join("tools/book_hotel.py")).unwrap();
    program
}

#[test]
fn an_understand_call_slower_than_the_turn_timeout_is_cut_off_and_the_turn_stops_with_time_limit() {
    let dir = temp_dir("slow-understand");
    let script = write_script(&dir, &SCRIPT[..1]);
    let program = booking_with_a_second_to_spare(&dir);
    let facts = booking_facts();
    // Each answer takes a minute, far past the turn's second and inside
    // the provider's own 60-second timeout.
    let server = FakeServer::start(Arc::new(move |request: &fake::Request, _| {
        std::thread::sleep(Duration::from_secs(60));
        fake::openai_answer(&facts, request)
    }));
    let base_url = format!("{}/v1", server.url);
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["stopped_reason"], "time_limit");
    assert_eq!(turns[0]["llm_calls"], 0, "the cut call answered nothing");
    assert_eq!(turns[0]["executed_steps"], json!([]), "nothing acted");
    assert_eq!(server.requests().len(), 1, "a call cut off by the turn is not retried");
}

/// Once a step has acted, the model's reply is never cut off: failing the
/// turn then would forget what the step did, and the next message would
/// do it again (book twice).
#[test]
fn a_reply_after_a_step_acted_is_not_cut_off_by_the_turn_timeout() {
    let dir = temp_dir("slow-reply");
    let script = write_script(&dir, &["Book The Savoy for 2 guests on 2026-12-04", "yes"]);
    let program = booking_with_a_second_to_spare(&dir);
    let facts = Facts::new(&[
        (
            "Book The Savoy for 2 guests on 2026-12-04",
            json!({"flow": "booking", "fields": {"hotel": "The Savoy", "date": "2026-12-04", "guests": 2}}),
        ),
        ("yes", json!({"fields": {"confirmed": true}})),
    ]);
    // Understanding is quick; every reply takes longer than the turn.
    let server = FakeServer::start(Arc::new(move |request: &fake::Request, _| {
        if request.is_stream() {
            std::thread::sleep(Duration::from_millis(1500));
        }
        fake::openai_answer(&facts, request)
    }));
    let base_url = format!("{}/v1", server.url);
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns.len(), 2, "{}", stderr(&output));
    assert!(turns[0]["reply"].as_str().is_some_and(|reply| reply.contains("Shall I book")), "{}", turns[0]);
    assert_eq!(turns[1]["executed_steps"], json!(["confirm", "book"]));
    assert_eq!(turns[1]["data"]["booking_id"], BOOKING_ID, "the booking is kept");
}

#[test]
fn a_server_that_refuses_json_schema_gets_json_object_and_the_user_is_told_once() {
    let dir = temp_dir("fallback");
    let script = write_script(&dir, &SCRIPT[..2]);
    let facts = booking_facts();
    // llama-cpp-python as shipped: a 500 naming the response format.
    let server = FakeServer::start(Arc::new(move |request: &fake::Request, _| {
        if request.json()["response_format"]["type"] == "json_schema" {
            Reply::json(500, &json!({"error": {"message": "Unsupported response_format type: json_schema"}}))
        } else {
            fake::openai_answer(&facts, request)
        }
    }));
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let output = run(&program, &script, &["--provider", "openai", "--base-url", &base_url], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns[1]["data"], json!({"hotel": "The Savoy"}));
    assert_eq!(turns[0]["llm_calls"], 2, "the refused request is not a model call");
    assert_eq!(
        stderr(&output),
        "note: the server refused a setting; openai:gpt-4o-mini now uses structured_output = \"json_object\", \
         tool_choice = \"auto\" (put it in flowc.toml to skip the probing)\n"
    );
    let formats: Vec<Value> = server
        .requests()
        .iter()
        .filter(|r| !r.is_stream())
        .map(|r| r.json()["response_format"]["type"].clone())
        .collect();
    assert_eq!(formats, ["json_schema", "json_object", "json_object"], "the fallback is kept for the session");
    // No key is needed for a server of one's own.
    assert!(server.requests().iter().all(|request| request.header("authorization").is_none()));
}

/// The booking conversation with a model that writes the fused reply on
/// the turn that asks for the date: that turn takes it as it streams and
/// makes no reply call; the turns where the model writes none make theirs.
#[test]
fn a_streamed_fused_reply_is_used_without_a_reply_call() {
    let dir = temp_dir("openai-fused");
    let script = write_script(&dir, &SCRIPT);
    let facts = Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
        (
            "The Savoy, please",
            json!({"fields": {"hotel": "The Savoy"}, "step": "booking.ask_date", "reply": "Lovely. For which date?"}),
        ),
        ("2026-12-04", json!({"fields": {"date": "2026-12-04"}})),
        ("2 guests", json!({"fields": {"guests": 2}})),
        ("yes", json!({"fields": {"confirmed": true}})),
    ]);
    let server = FakeServer::start(fake::openai(facts));
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let output = run(
        &program,
        &script,
        &["--provider", "openai", "--model", "gpt-test", "--base-url", &base_url, "--trace"],
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    let replies: Vec<&str> = turns.iter().map(|turn| turn["reply"].as_str().unwrap()).collect();
    assert_eq!(replies[1..3], ["Lovely. For which date?", "How many guests?"]);
    let calls: Vec<u64> = turns.iter().map(|turn| turn["llm_calls"].as_u64().unwrap()).collect();
    assert_eq!(calls[1..3], [1, 2], "the fused reply saved the reply call");
    let used: Vec<Value> = stderr(&output)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "fused_reply" && event["used"] == true)
        .collect();
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0]["step"], "booking.ask_date");
    // The understand calls that asked for the reply streamed.
    let streamed = server
        .requests()
        .iter()
        .map(|request| request.json())
        .filter(|body| body["response_format"].is_object() && body["stream"] == true)
        .count();
    assert!(streamed >= 1, "{streamed}");
}

/// Prompt caching over a whole session (issue 24): the understand calls of
/// the booking conversation, from the routing turn to the confirmation
/// (which asks for no fused reply), send one byte-identical system
/// message: the task, every flow, the fused reply's task and who writes
/// it. What the turn offers follows in the user message.
#[test]
fn every_understand_call_of_a_session_sends_the_same_system_message() {
    let dir = temp_dir("openai-prefix");
    let script = write_script(&dir, &SCRIPT);
    let server = FakeServer::start(fake::openai(booking_facts()));
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let output = run(
        &program,
        &script,
        &["--provider", "openai", "--model", "gpt-test", "--base-url", &base_url],
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let understand: Vec<Value> = server
        .requests()
        .iter()
        .map(|request| request.json())
        .filter(|body| body["response_format"].is_object())
        .collect();
    assert_eq!(understand.len(), 5, "one understand call per turn");
    let system = |body: &Value| body["messages"][0]["content"].as_str().unwrap_or_default().to_string();
    let user = |body: &Value| body["messages"][1]["content"].as_str().unwrap_or_default().to_string();
    let first = system(&understand[0]);
    for (turn, body) in understand.iter().enumerate() {
        assert_eq!(system(body), first, "turn {}: the system message differs", turn + 1);
    }
    for part in [
        "Flows:\n- booking (Book a hotel room): the user wants to book a hotel room",
        "When the answer has `step` and `reply`",
        "The assistant: You are the concierge of the Grand Hotel group.",
    ] {
        assert!(first.contains(part), "{part:?} in {first}");
    }
    // The routing turn offers the flow; the turns inside it offer none and
    // say where they are; the confirmation asks for no reply.
    assert!(user(&understand[0]).contains("Flows offered: booking."), "{}", user(&understand[0]));
    assert!(user(&understand[1]).contains("Current flow: booking.") && !user(&understand[1]).contains("Flows offered"));
    assert!(user(&understand[1]).contains("Steps, in order:"));
    assert!(!user(&understand[4]).contains("Steps, in order:"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fake OpenAI server that reports no usage, as llama-cpp-python streams
/// none even when asked: the `usage` block is taken out of every answer.
fn openai_without_usage() -> FakeServer {
    let facts = booking_facts();
    FakeServer::start(Arc::new(move |request: &fake::Request, _| match fake::openai_answer(&facts, request) {
        Reply::Full { status, headers, body } => {
            let mut answer: Value = serde_json::from_str(&body).unwrap();
            answer.as_object_mut().unwrap().remove("usage");
            Reply::Full { status, headers, body: answer.to_string() }
        }
        Reply::Stream(chunks) => Reply::Stream(without_usage(chunks)),
        Reply::Paced(chunks, pause) => Reply::Paced(without_usage(chunks), pause),
    }))
}

fn without_usage(chunks: Vec<String>) -> Vec<String> {
    chunks.into_iter().filter(|chunk| !chunk.contains("\"usage\"")).collect()
}

/// With no usage reported, each turn's tokens are flowc's estimate from
/// the requests sent and the answers received, marked estimated (issue 24).
#[test]
fn a_server_without_usage_gets_estimated_tokens() {
    let dir = temp_dir("openai-no-usage");
    let script = write_script(&dir, &SCRIPT);
    let server = openai_without_usage();
    let base_url = format!("{}/v1", server.url);
    let program = root().join("flows/booking.flow");
    let args = ["--provider", "openai", "--model", "gpt-test", "--base-url", &base_url, "--trace"];
    let output = run(&program, &script, &args, &[("OPENAI_API_KEY", KEY)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let turns = turns(&output);
    assert_eq!(turns.len(), 5);
    assert_eq!(turns[4]["stopped_reason"], "flow_complete", "the conversation is unchanged");
    for turn in &turns {
        let tokens = &turn["tokens"];
        assert_eq!(tokens["estimated"], true, "{turn}");
        assert!(tokens["prompt"].as_u64().unwrap() > 100, "a system message of the understand call alone: {turn}");
        assert!(tokens["completion"].as_u64().unwrap() > 0, "{turn}");
    }
    let called: Vec<Value> = stderr(&output)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "model_called")
        .collect();
    assert!(!called.is_empty());
    assert!(called.iter().all(|event| event["usage"]["estimated"] == true), "{called:?}");
}

/// `agent.limits.max_turn_tokens` bites on estimated tokens as on reported
/// ones: the first turn's understand call alone goes over 100.
#[test]
fn max_turn_tokens_bites_on_estimated_tokens() {
    let dir = temp_dir("openai-no-usage-limit");
    let script = write_script(&dir, &SCRIPT[..1]);
    let booking = std::fs::read_to_string(root().join("flows/booking.flow")).unwrap();
    let tool = path(&root().join("flows/tools/book_hotel.py"));
    let limited = booking
        .replace("max_auto_steps 10", "max_auto_steps 10\n    max_turn_tokens 100")
        .replace("\"tools/book_hotel.py\"", &format!("{tool:?}"));
    assert_ne!(limited, booking);
    let program = dir.join("booking.flow");
    std::fs::write(&program, limited).unwrap();
    let server = openai_without_usage();
    let base_url = format!("{}/v1", server.url);
    let args = ["--provider", "openai", "--model", "gpt-test", "--base-url", &base_url];
    let output = run(&program, &script, &args, &[("OPENAI_API_KEY", KEY)]);
    let turns = turns(&output);
    assert_eq!(turns.len(), 1, "{}", stderr(&output));
    assert_eq!(turns[0]["stopped_reason"], "token_limit", "{}", turns[0]);
    assert_eq!(turns[0]["tokens"]["estimated"], true);
}

/// The fused part never costs a call (issue 24): in `json_object` mode
/// the server's schema is a hint, and a model may name a step that was not
/// offered or write a reply that is not text. The reply alone is dropped
/// (traced with the reason), the extraction stands, and no repair is asked
/// for: the turn makes its ordinary reply call.
#[test]
fn a_fused_reply_for_no_step_offered_or_not_text_is_dropped_without_a_repair() {
    for (case, step, reply, reason) in [
        ("step", json!("booking.pay"), json!("Paid?"), "unknown step `booking.pay`"),
        ("reply", json!("booking.ask_date"), json!(42), "`reply` must be a string or null, not a number"),
    ] {
        let dir = temp_dir(&format!("fused-dropped-{case}"));
        let script = write_script(&dir, &SCRIPT[..2]);
        let facts = Facts::new(&[
            ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
            ("The Savoy, please", json!({"fields": {"hotel": "The Savoy"}, "step": step, "reply": reply})),
        ]);
        let server = FakeServer::start(fake::openai(facts));
        std::fs::write(
            dir.join("flowc.toml"),
            format!(
                "provider = \"openai\"\nmodel = \"gpt-test\"\nbase_url = \"{}/v1\"\nstructured_output = \"json_object\"\n",
                server.url
            ),
        )
        .unwrap();
        let program = root().join("flows/booking.flow");
        let args = ["run", &path(&program), "--script", &path(&script), "--json", "--trace"];
        let output = flowc_env(&dir, &args, &[("OPENAI_API_KEY", KEY)], WAIT);
        assert_eq!(output.status.code(), Some(0), "{case}: {}", stderr(&output));
        let turns = turns(&output);
        assert_eq!(turns[1]["data"]["hotel"], "The Savoy", "{case}: the extraction stands");
        assert_eq!(turns[1]["llm_calls"], 2, "{case}: the understand call and the reply call, no repair");
        let dropped: Vec<Value> = stderr(&output)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|event| event["event"] == "fused_reply")
            .collect();
        let last = dropped.last().cloned().unwrap_or_default();
        assert_eq!(last["used"], false, "{case}: {dropped:?}");
        let traced = last["reason"].as_str().unwrap_or_default();
        assert!(traced.starts_with("the answer's reply was dropped: ") && traced.contains(reason), "{case}: {traced}");
        let understands =
            server.requests().iter().filter(|request| request.json()["response_format"].is_object()).count();
        assert_eq!(understands, 2, "{case}: one understand request a turn");
    }
}
