//! The reproducers of the 2026-11-25 reliability probe that belong to the
//! command line, the run time and secrets: each through the real binary (or
//! the library, where the compiler would refuse the program first), ending
//! with a clear exit code and never a crash. Large inputs are generated
//! here rather than stored.

use crate::support::{flowc_env, flowc_in, root, stderr, stdout, temp_dir};
use flowc::llm::offline::Offline;
use flowc::pipeline::compile;
use flowc::runtime::clock::{FixedClock, SeededIds};
use flowc::runtime::engine::{Runtime, RuntimeOptions, TurnError};
use flowc::runtime::tools::{ToolEnv, ToolRegistry};
use flowc::runtime::workflow::{RunStatus, StepStatus, WorkflowRunner};
use flowc::source::SourceFile;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The run ended by itself with a documented exit code and no panic text.
fn assert_clear_exit(output: &Output, what: &str) -> i32 {
    let text = stderr(output);
    let code = output.status.code();
    assert!(matches!(code, Some(0..=2)), "{what}: exit {code:?}\n{text}");
    assert!(!text.contains("crashed") && !text.contains("panicked"), "{what}: {text}");
    code.unwrap_or_default()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("the test writes its program");
}

// ------------------------------------------------- long lines (item 1)

/// `flow a "AAAA…" { x }`: a syntax error past column 65,535.
fn syntax_error_past_column_65535() -> String {
    format!("flow a \"{}\" {{ x }}\n", "A".repeat(65_530))
}

#[test]
fn a_diagnostic_past_column_65535_is_rendered_clipped_in_every_command() {
    let dir = temp_dir("reliability-long-line");
    write(&dir, "m.flow", &syntax_error_past_column_65535());
    for command in ["check", "compile", "graph", "run"] {
        let output = flowc_env(&dir, &[command, "m.flow"], &[], TIMEOUT);
        assert_eq!(assert_clear_exit(&output, command), 1, "{command}: {}", stderr(&output));
        let text = stderr(&output);
        // The column is the file's own, the line is clipped around the span.
        assert!(text.contains("m.flow:1:65543]"), "{command}: {text}");
        assert!(text.contains("…AAAA"), "{command}: {text}");
        assert!(text.lines().all(|line| line.chars().count() < 400), "{command}: a line was not clipped");
    }
}

#[test]
fn a_valid_program_whose_only_warning_is_past_column_65535_runs() {
    let dir = temp_dir("reliability-warning-only");
    let program =
        format!("schema {{ x: string \"{}\" }} flow b \"B\" {{ step s {{ say \"hi\" }} }}\n", "A".repeat(65_536));
    write(&dir, "w.flow", &program);
    let output = flowc_in(&dir, &["run", "w.flow"], Some("hi\n"));
    assert_eq!(assert_clear_exit(&output, "run"), 0, "{}", stderr(&output));
    assert!(stderr(&output).contains("the flow `b` is never entered"), "{}", stderr(&output));
    assert!(stdout(&output).contains("How can I help?"), "{}", stdout(&output));
}

#[test]
fn a_one_line_json_program_with_a_warning_is_checked() {
    let dir = temp_dir("reliability-json-line");
    let flows: Vec<String> = (0..1500)
        .map(|index| {
            format!(
                r#""f{index}": {{"title": "Flow {index}", "when": "the user asks about topic {index}", "steps": [{{"id": "s", "say": "Topic {index}"}}]}}"#
            )
        })
        .collect();
    let program = format!(
        r#"{{"agent": {{"name": "Gen"}}, "flows": {{{}, "orphan": {{"title": "never entered", "steps": [{{"id": "s", "say": "x"}}]}}}}}}"#,
        flows.join(", ")
    );
    assert!(program.len() > 65_536);
    write(&dir, "one.yaml", &program);
    let output = flowc_env(&dir, &["check", "one.yaml"], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "check"), 0, "{}", stderr(&output));
    let text = stderr(&output);
    assert!(text.contains("the flow `orphan` is never entered"), "{text}");
    assert!(text.contains("checked 1 program: 0 errors, 1 warning"), "{text}");
}

// ------------------------------------------------ large waits (item 3)

/// A program compiled with a one-day wait, then given `wait_ms` as only a
/// program not built by the compiler could have it.
fn with_wait(source: &str, wait_ms: u64) -> Arc<flowc::ir::Program> {
    let compilation = compile(&SourceFile::new("t.flow", source));
    assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
    let mut program = compilation.ir;
    for step in program.flows.iter_mut().flat_map(|flow| flow.steps.iter_mut()) {
        if step.wait_ms.is_some() {
            step.wait_ms = Some(wait_ms);
        }
    }
    Arc::new(program)
}

fn tool_env() -> ToolEnv {
    let clock = FixedClock::parse("2026-01-05T10:00:00Z").expect("a valid time");
    ToolEnv { base_dir: root().join("flows"), clock: Arc::new(clock), ids: Arc::new(SeededIds::new(7)) }
}

/// 100,000,000 days: past the latest time a timestamp holds.
const HUGE_WAIT_MS: u64 = 100_000_000 * 86_400_000;

#[test]
fn a_workflow_wait_past_the_representable_time_fails_the_run() {
    let program = with_wait(
        "schema { x: string }\nflow w \"W\" {\n  auto step a { wait 1d }\n  auto step b { set x = \"done\" }\n}\n",
        HUGE_WAIT_MS,
    );
    let tools = ToolRegistry::default();
    let env = tool_env();
    let sleep = |_: Duration| {};
    let mut on_progress = |_: &flowc::runtime::workflow::StepProgress| {};
    let mut checkpoint = |_: &flowc::runtime::workflow::WorkflowRun| Ok(());
    let mut runner = WorkflowRunner {
        program: &program,
        tools: &tools,
        tool_env: &env,
        sleep: &sleep,
        on_progress: &mut on_progress,
        checkpoint: &mut checkpoint,
        model: None,
    };
    let flow = program.flow_by_name("w").expect("the flow exists");
    let mut run = runner.start(flow, &serde_json::Map::new(), Default::default()).expect("the run starts");
    assert!(runner.run(&mut run).is_ok(), "no checkpoint fails");
    assert_eq!(run.status, RunStatus::Failed);
    let first = run.steps.first().expect("a step record");
    assert_eq!(first.status, StepStatus::Failed);
    let error = first.error.clone().unwrap_or_default();
    assert!(error.contains("ends past the latest time flowc can record"), "{error}");
    assert!(run.resume_at.is_none());
}

#[test]
fn a_conversation_wait_past_the_representable_time_fails_the_turn() {
    let program = with_wait(
        "schema { name: string \"The user's name\" }\nflow greet \"Greet\" {\n  default\n  step ask { prompt \"Name?\" collect name }\n  auto step pause { wait 1d }\n  step bye { say \"bye {{name}}\" }\n}\n",
        HUGE_WAIT_MS,
    );
    let options = RuntimeOptions { tool_env: tool_env(), tools: ToolRegistry::default(), limits: Default::default() };
    let mut runtime = Runtime::new(program, Box::new(Offline::new()), options);
    let mut session = runtime.new_session("wait");
    assert!(runtime.run_turn(&mut session, "hello").is_ok());
    match runtime.run_turn(&mut session, "Bob") {
        Err(error @ TurnError::Wait(_)) => {
            assert!(error.to_string().contains("ends past the latest time flowc can record"), "{error}");
        }
        other => panic!("the turn must fail on the wait: {other:?}"),
    }
}

#[test]
fn the_probe_wait_programs_end_clearly() {
    let fixtures = root().join("tests/fixtures/reliability");
    let workflow = flowc_env(&fixtures, &["run", "wait_overflow_workflow.flow", "--data", "{}"], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&workflow, "workflow"), 1, "{}", stderr(&workflow));
    let conversation = flowc_in(&fixtures, &["run", "wait_overflow_conversation.flow", "--json"], Some("hello\nBob\n"));
    assert_eq!(assert_clear_exit(&conversation, "conversation"), 1, "{}", stderr(&conversation));
}

// ---------------------------------------------- symlink cycles (item 6)

#[cfg(unix)]
#[test]
fn check_dir_follows_no_directory_link_and_reads_each_file_once() {
    let dir = temp_dir("reliability-symlinks");
    write(&dir, "a.flow", "flow a \"A\" { default step s { say \"hi\" } }\n");
    std::fs::create_dir_all(dir.join("sub")).expect("a subdirectory");
    write(&dir.join("sub"), "b.flow", "flow b \"B\" { default step s { say \"hi\" } }\n");
    for (link, target) in [("a", "."), ("b", "."), ("loop", "."), ("sub/up", ".."), ("again.flow", "a.flow")] {
        std::os::unix::fs::symlink(target, dir.join(link)).expect("a symlink");
    }
    let output = flowc_env(&dir, &["check", "."], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "check"), 0, "{}", stderr(&output));
    assert!(stderr(&output).contains("checked 2 programs"), "{}", stderr(&output));
}

// ---------------------------------------------- newcomer items (item 7)

#[test]
fn a_file_with_another_extension_is_not_read_as_a_program() {
    let dir = temp_dir("reliability-extension");
    write(&dir, "README.md", "# Notes\n\nflow is a word here.\n");
    for command in ["check", "compile", "graph", "run"] {
        let output = flowc_env(&dir, &[command, "README.md"], &[], TIMEOUT);
        assert_eq!(assert_clear_exit(&output, command), 2, "{command}");
        assert!(
            stderr(&output).contains("`README.md` is not a program file: flowc reads .flow, .yaml and .yml files"),
            "{command}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn data_for_a_program_of_several_workflows_needs_a_flow() {
    let dir = temp_dir("reliability-workflows");
    write(
        &dir,
        "two.flow",
        "schema { x: string }\nflow first \"A\" { auto step s { set x = \"a\" } }\nflow second \"B\" { auto step s { set x = \"b\" } }\n",
    );
    let output = flowc_env(&dir, &["run", "two.flow", "--data", "{}"], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "run"), 2);
    assert!(
        stderr(&output).contains("several workflows (`first`, `second`) and no default: choose one with --flow"),
        "{}",
        stderr(&output)
    );
    let chosen = flowc_env(&dir, &["run", "two.flow", "--data", "{}", "--flow", "second"], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&chosen, "run --flow"), 0, "{}", stderr(&chosen));
    assert!(stdout(&chosen).contains("completed"), "{}", stdout(&chosen));
}

// ------------------------------------------------- http tools (7 and 8)

/// What a local server saw of one request: its request line and headers
/// (names in lower case).
#[derive(Clone, Debug)]
struct Seen {
    request_line: String,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// A server on 127.0.0.1 that records every request and answers with the
/// response `answer` gives for its path.
fn server(answer: impl Fn(&str) -> String + Send + 'static) -> (u16, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let port = listener.local_addr().expect("an address").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(&stream);
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.trim_end().split_once(':') {
                    headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
                }
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
            record
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(Seen { request_line: request_line.trim_end().to_string(), headers });
            let mut writer = &stream;
            let _ = writer.write_all(answer(&path).as_bytes());
            let _ = writer.flush();
        }
    });
    (port, seen)
}

fn json_ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn redirect(location: &str) -> String {
    format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

fn requests(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

#[test]
fn http_values_dot_and_dot_dot_never_move_up_the_url_path() {
    let (port, seen) = server(|_| json_ok("{}"));
    let dir = temp_dir("reliability-dotdot");
    write(
        &dir,
        "dotdot.flow",
        &format!(
            "schema {{ id: string \"An id\" }}\ntool fetch(id: string) {{\n  http GET \"http://127.0.0.1:{port}/api/users/{{{{id}}}}/profile?x=1\"\n  timeout 5s\n}}\nflow w \"W\" {{\n  auto step a {{ call fetch(id) }}\n}}\n"
        ),
    );
    for value in ["..", ".", "%2e%2e"] {
        let data = serde_json::json!({ "id": value }).to_string();
        let output = flowc_env(&dir, &["run", "dotdot.flow", "--data", &data], &[], TIMEOUT);
        let code = assert_clear_exit(&output, value);
        // `%2e%2e` is sent encoded (`%252e%252e`): it names a user.
        if value == "%2e%2e" {
            assert_eq!(code, 0, "{}", stderr(&output));
        } else {
            assert_eq!(code, 1, "{value}: {}", stdout(&output));
            assert!(stdout(&output).contains("which moves up the path"), "{value}: {}", stdout(&output));
        }
    }
    let output = flowc_env(&dir, &["run", "dotdot.flow", "--data", r#"{"id": "..."}"#], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "..."), 0, "{}", stderr(&output));
    let lines: Vec<String> = requests(&seen).into_iter().map(|seen| seen.request_line).collect();
    assert_eq!(
        lines,
        ["GET /api/users/%252e%252e/profile?x=1 HTTP/1.1", "GET /api/users/.../profile?x=1 HTTP/1.1"],
        "a dot segment must never reach the server"
    );
}

fn redirect_program(port: u16) -> String {
    format!(
        "schema {{ id: string \"An id\" }}\ntool fetch(id: string) {{\n  http GET \"http://127.0.0.1:{port}/redirect_api/{{{{id}}}}\"\n  header Authorization \"Bearer {{{{ env.SVC_TOKEN }}}}\"\n  header X-Api-Key \"{{{{ env.SVC_TOKEN }}}}\"\n  timeout 5s\n}}\nflow w \"W\" {{ auto step a {{ call fetch(id) }} }}\n"
    )
}

#[test]
fn http_headers_never_follow_a_redirect_to_another_origin() {
    let (other_port, other_seen) = server(|_| json_ok("{}"));
    let (port, seen) = server(move |_| redirect(&format!("http://127.0.0.1:{other_port}/landing")));
    let dir = temp_dir("reliability-redirect");
    write(&dir, "redirect.flow", &redirect_program(port));
    let secret = [("SVC_TOKEN", "s3cr3t-token-value")];
    let output = flowc_env(&dir, &["run", "redirect.flow", "--data", r#"{"id": "x"}"#], &secret, TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "run"), 1, "{}", stdout(&output));
    assert!(stdout(&output).contains("does not follow a redirect to another origin"), "{}", stdout(&output));
    assert!(!stdout(&output).contains("s3cr3t") && !stderr(&output).contains("s3cr3t"));
    assert_eq!(requests(&seen).len(), 1);
    assert_eq!(
        requests(&seen).first().and_then(|seen| seen.header("x-api-key").map(String::from)),
        Some(secret[0].1.to_string())
    );
    assert!(requests(&other_seen).is_empty(), "the other origin was reached: {:?}", requests(&other_seen));
}

#[test]
fn http_headers_follow_a_redirect_within_the_origin() {
    let (port, seen) =
        server(|path| if path.starts_with("/redirect_api/") { redirect("/landing") } else { json_ok("{}") });
    let dir = temp_dir("reliability-redirect-same");
    write(&dir, "redirect.flow", &redirect_program(port));
    let output =
        flowc_env(&dir, &["run", "redirect.flow", "--data", r#"{"id": "x"}"#], &[("SVC_TOKEN", "t0ken")], TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "run"), 0, "{}", stdout(&output));
    let requests = requests(&seen);
    let landing = requests.iter().find(|seen| seen.request_line.starts_with("GET /landing "));
    assert_eq!(landing.and_then(|seen| seen.header("x-api-key")), Some("t0ken"), "{requests:?}");
}

// ------------------------------------------------------ secrets (item 9)

/// Not shaped like a provider key, so only the configured-secret rule can
/// catch it.
const LEAKED_KEY: &str = "corp-gateway-7f3a9c21d4";

/// A chat-completions answer whose message content is `content`.
fn completion(content: &str) -> crate::fake::Reply {
    crate::fake::Reply::json(
        200,
        &serde_json::json!({
            "id": "chatcmpl-leak",
            "object": "chat.completion",
            "created": 1_767_607_200,
            "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }),
    )
}

/// A streamed reply of `text`, five characters an event.
fn streamed(text: &str) -> crate::fake::Reply {
    let chars: Vec<char> = text.chars().collect();
    let mut chunks: Vec<String> = chars
        .chunks(5)
        .map(|piece| {
            let piece: String = piece.iter().collect();
            let event =
                serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
            format!("data: {event}\n\n")
        })
        .collect();
    chunks.push(format!(
        "data: {}\n\n",
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    chunks.push("data: [DONE]\n\n".to_string());
    crate::fake::Reply::Stream(chunks)
}

fn run_against(handler: crate::fake::Handler, record: &str) -> (Output, String) {
    let server = crate::fake::FakeServer::start(handler);
    let dir = temp_dir(&format!("reliability-secrets-{record}"));
    write(
        &dir,
        "chat.flow",
        "flow chat \"Chat\" {\n  default\n  step s { prompt \"Answer the user.\" }\n}\n\
         flow billing \"Billing\" {\n  when \"the user asks about billing\"\n  step b { prompt \"Help with billing.\" }\n}\n",
    );
    let base_url = format!("{}/v1", server.url);
    let args = ["run", "chat.flow", "--provider", "openai", "--base-url", &base_url, "--record", record, "--json"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--script", "messages.txt"]);
    write(&dir, "messages.txt", "hello\n");
    let output = flowc_env(&dir, &args, &[("OPENAI_API_KEY", LEAKED_KEY)], TIMEOUT);
    let recording = std::fs::read_to_string(dir.join(record)).unwrap_or_default();
    (output, recording)
}

fn assert_no_leak(output: &Output, recording: &str) {
    assert!(!stdout(output).contains(LEAKED_KEY), "stdout: {}", stdout(output));
    assert!(!stderr(output).contains(LEAKED_KEY), "stderr: {}", stderr(output));
    assert!(!recording.contains(LEAKED_KEY), "recording: {recording}");
}

#[test]
fn a_reply_repeating_the_api_key_is_redacted() {
    let handler: crate::fake::Handler = Arc::new(|request: &crate::fake::Request, _| {
        if request.is_stream() {
            streamed(&format!("Sure, the key is {LEAKED_KEY}; keep it safe."))
        } else {
            completion(r#"{"flow": null}"#)
        }
    });
    let (output, recording) = run_against(handler, "reply.json");
    assert_eq!(assert_clear_exit(&output, "run"), 0, "{}", stderr(&output));
    assert_no_leak(&output, &recording);
    assert!(stdout(&output).contains("Sure, the key is [redacted]; keep it safe."), "{}", stdout(&output));
}

#[test]
fn an_invalid_answer_quoting_the_api_key_is_redacted() {
    let handler: crate::fake::Handler = Arc::new(|request: &crate::fake::Request, _| {
        if request.is_stream() { streamed("unused") } else { completion(&format!(r#"{{"flow": "{LEAKED_KEY}"}}"#)) }
    });
    let (output, recording) = run_against(handler, "invalid.json");
    // The unusable answer is set aside (the turn goes on as if nothing was
    // understood, and the default flow replies); the key it quoted reaches
    // neither the output nor the recording.
    assert_eq!(assert_clear_exit(&output, "run"), 0, "{}", stderr(&output));
    assert_no_leak(&output, &recording);
    assert!(
        stdout(&output).contains(r#""reply":"unused","flow":null,"step":null,"executed_steps":["s"]"#),
        "{}",
        stdout(&output)
    );
}

// ----------------------------------------------------- the README tour

/// The README's tour is a real run: its messages, replayed as a script,
/// print its replies and trace lines.
#[test]
fn the_readme_tour_is_what_flowc_prints() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let block: Vec<&str> = readme
        .split("$ flowc run flows/booking.flow\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the tour block")
        .lines()
        .collect();
    let messages: Vec<&str> = block.iter().filter_map(|line| line.strip_prefix("you> ")).collect();
    let shown: Vec<&str> =
        block.iter().copied().filter(|line| !line.starts_with("you> ") && !line.starts_with("Concierge — ")).collect();
    assert!(messages.len() >= 2 && shown.len() >= 4, "{block:?}");
    let output = flowc_in(root(), &["run", "flows/booking.flow"], Some(&format!("{}\n", messages.join("\n"))));
    assert_eq!(assert_clear_exit(&output, "run"), 0);
    let printed = format!("{}{}", stdout(&output), stderr(&output));
    for line in shown {
        assert!(printed.lines().any(|printed| printed == line), "the README shows {line:?}; flowc printed:\n{printed}");
    }
}

#[test]
fn the_readme_script_ships_and_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let command = "flowc run flows/support.yaml --script flows/support.chat --json";
    assert!(readme.contains(command), "the README runs {command}");
    let output =
        flowc_env(root(), &["run", "flows/support.yaml", "--script", "flows/support.chat", "--json"], &[], TIMEOUT);
    assert_eq!(assert_clear_exit(&output, "run"), 0, "{}", stderr(&output));
    let turns: Vec<serde_json::Value> =
        stdout(&output).lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let script = std::fs::read_to_string(root().join("flows/support.chat")).expect("flows/support.chat");
    assert_eq!(turns.len(), script.lines().filter(|line| !line.trim().is_empty()).count());
    assert!(turns.iter().all(|turn| turn["reply"].as_str().is_some_and(|reply| !reply.is_empty())), "{turns:?}");
}
