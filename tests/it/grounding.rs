//! Grounded understanding end to end, through the real binary: the
//! conversations of issue 12 on the offline provider, and a weak model's
//! inventions recorded from a fake OpenAI-compatible server and replayed.
//! A model that proposes what the user did not say makes flowc ask again,
//! never act.

#![allow(clippy::unwrap_used)]

use crate::fake::{self, Facts, FakeServer};
use crate::support::{flowc_env, root, stderr, stdout, temp_dir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The script the real local model booked six times with.
const SEVEN_TURNS: [&str; 7] = [
    "Hi, I'd like to book a hotel room",
    "The Grand Hotel, please",
    "2026-12-04",
    "2 guests",
    "yes",
    "thanks",
    "what was the date again?",
];

fn write_script(dir: &Path, lines: &[&str]) -> PathBuf {
    let path = dir.join("script.txt");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn run(program: &str, script: &Path, args: &[&str]) -> std::process::Output {
    let program = root().join(program).to_string_lossy().into_owned();
    let script = script.to_string_lossy().into_owned();
    let mut all = vec!["run", program.as_str(), "--script", script.as_str(), "--json"];
    all.extend(args);
    flowc_env(root(), &all, &[("FLOWC_NOW", "2026-01-05T10:00:00Z"), ("OPENAI_API_KEY", "test-key")], WAIT)
}

fn turns(output: &std::process::Output) -> Vec<Value> {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The turns (1-based) whose executed steps include `step`.
fn turns_running(turns: &[Value], step: &str) -> Vec<u64> {
    turns
        .iter()
        .filter(|turn| turn["executed_steps"].as_array().unwrap().iter().any(|ran| ran == step))
        .map(|turn| turn["turn"].as_u64().unwrap())
        .collect()
}

#[test]
fn offline_the_seven_turn_script_books_once_on_yes() {
    let dir = temp_dir("grounding-seven");
    let script = write_script(&dir, &SEVEN_TURNS);
    for program in ["flows/booking.flow", "flows/booking.yaml"] {
        let turns = turns(&run(program, &script, &[]));
        assert_eq!(turns_running(&turns, "book"), [5], "{program}");
        assert_eq!(turns[3]["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    }
}

#[test]
fn offline_consent_in_the_first_message_is_not_taken_ahead() {
    let dir = temp_dir("grounding-consent");
    let script = write_script(&dir, &["Book the Grand Hotel for 2 guests on 2026-12-04, yes go ahead", "yes"]);
    let turns = turns(&run("flows/booking.flow", &script, &[]));
    assert_eq!(turns[0]["step"], "confirm");
    assert_eq!(turns[0]["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert!(turns[0]["data"].get("confirmed").is_none(), "{}", turns[0]["data"]);
    assert_eq!(turns_running(&turns, "book"), [2]);
}

#[test]
fn offline_an_email_at_the_email_step_is_read_by_code() {
    let dir = temp_dir("grounding-email");
    let script = write_script(&dir, &["Hello, I need help", "my email is ann@example.com"]);
    let turns = turns(&run("flows/support.yaml", &script, &[]));
    assert_eq!(turns[1]["data"]["email"], "ann@example.com");
    assert_eq!(turns[1]["step"], "ask_issue");
}

#[test]
fn offline_lists_are_read_from_enumerations() {
    let dir = temp_dir("grounding-lists");
    let program = dir.join("pizza.flow");
    std::fs::write(
        &program,
        "schema { toppings: list(string) }\n\
         flow order \"Order a pizza\" {\n  when \"the user wants a pizza\"\n  \
         step ask { prompt \"Which toppings?\" collect toppings }\n  \
         step done { say \"A pizza with {{toppings}}.\" }\n}\n",
    )
    .unwrap();
    let script = write_script(&dir, &["I want a pizza", "ham, olives and mushrooms please"]);
    let turns = turns(&run(&program.to_string_lossy(), &script, &[]));
    assert_eq!(turns[1]["data"]["toppings"], json!(["ham", "olives", "mushrooms"]));
}

/// What the weak local model answered on the seven-turn script, as cited
/// proposals: besides the hotel, turn 2 invents today's date and 3 guests,
/// citing words that do not say them or none; turn 3 reads 3 guests into
/// a date; turn 4 cites a word the message does not have.
fn weak_model() -> Facts {
    let cited = |evidence: Value, value: Value| json!({"evidence": evidence, "value": value});
    Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
        (
            "The Grand Hotel, please",
            json!({"fields": {
                "hotel": cited(json!("The Grand Hotel"), json!("Grand Hotel")),
                "date": cited(json!("please"), json!("2026-01-05")),
                "guests": cited(Value::Null, json!(3)),
            }}),
        ),
        ("2026-12-04", json!({"fields": {"guests": cited(json!("2026-12-04"), json!(3))}})),
        ("2 guests", json!({"fields": {"guests": 2, "hotel": cited(json!("Overlook"), json!("Overlook"))}})),
        ("yes", json!({"fields": {"confirmed": true}})),
    ])
}

#[test]
fn replayed_a_weak_model_asks_again_and_books_only_on_yes() {
    let dir = temp_dir("grounding-weak");
    let script = write_script(&dir, &SEVEN_TURNS);
    let recording = dir.join("weak.rec.json");
    let recorded = {
        let server = FakeServer::start(fake::openai(weak_model()));
        let base_url = format!("{}/v1", server.url);
        let record = recording.to_string_lossy().into_owned();
        run("flows/booking.flow", &script, &["--provider", "openai", "--base-url", &base_url, "--record", &record])
    };
    let live = turns(&recorded);
    let steps: Vec<&str> = live.iter().map(|turn| turn["step"].as_str().unwrap_or("-")).collect();
    assert_eq!(steps, ["ask_hotel", "ask_date", "ask_guests", "confirm", "-", "-", "-"]);
    assert_eq!(live[2]["data"], json!({"hotel": "Grand Hotel", "date": "2026-12-04"}), "no invented value written");
    assert_eq!(live[3]["data"]["hotel"], "Grand Hotel");
    assert_eq!(turns_running(&live, "book"), [5]);

    // No turn but the one answering the confirm step may ask the model for
    // consent (that one's plain "yes" is read by code before the model).
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let asking_consent: Vec<&str> = file["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|call| call["kind"] == "understand")
        .filter(|call| call["request"]["fields"].as_array().unwrap().iter().any(|field| field["name"] == "confirmed"))
        .map(|call| call["request"]["message"].as_str().unwrap())
        .collect();
    assert!(asking_consent.iter().all(|message| *message == "yes"), "{asking_consent:?}");

    let replay = format!("replay:{}", recording.to_string_lossy());
    let replayed = run("flows/booking.flow", &script, &["--provider", &replay]);
    assert_eq!(stdout(&replayed), stdout(&recorded), "the replay gives the same turns");
}

// ------------------------------------------------------------ the real model

/// A provider that keeps every understanding it passes on: what the model
/// proposed, before the runtime checks it.
struct Watched {
    inner: Box<dyn flowc::llm::Provider>,
    proposed: std::sync::Arc<std::sync::Mutex<Vec<flowc::llm::Understanding>>>,
}

impl flowc::llm::Provider for Watched {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn understand(
        &mut self,
        request: &flowc::llm::UnderstandRequest,
    ) -> Result<flowc::llm::Understanding, flowc::llm::ProviderError> {
        let understanding = self.inner.understand(request)?;
        self.proposed.lock().unwrap().push(understanding.clone());
        Ok(understanding)
    }

    fn reply(
        &mut self,
        request: &flowc::llm::ReplyRequest,
        rounds: &[flowc::llm::ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<flowc::llm::ModelReply, flowc::llm::ProviderError> {
        self.inner.reply(request, rounds, on_text)
    }
}

/// What one conversation did, turn by turn.
struct Conversation {
    turns: Vec<flowc::runtime::events::TurnResult>,
    /// `field=value` proposals of each turn, before the checks.
    proposed: Vec<Vec<String>>,
    /// Turns that failed (an answer still invalid after its repair), with
    /// the error: the session is left as it was, nothing acts.
    failed: Vec<(String, String)>,
}

fn converse(program: &str, script: &[&str], config: &flowc::llm::ProviderConfig) -> Conversation {
    use flowc::runtime::clock::{FixedClock, SeededIds};
    use flowc::runtime::engine::{Runtime, RuntimeOptions};
    use flowc::runtime::tools::{ToolEnv, ToolRegistry};
    use std::sync::{Arc, Mutex};

    // A small model on a shared CPU takes more than the examples' 60 s
    // turn timeout; a turn cut short by it would make the replay diverge
    // from the live run, and the timeout is not what is tested here.
    let text = std::fs::read_to_string(root().join(program)).unwrap().replace("turn_timeout 60s", "turn_timeout 900s");
    let source = flowc::source::SourceFile::new(program, text);
    let program = Arc::new(flowc::pipeline::compile(&source).ir);
    let proposed = Arc::new(Mutex::new(Vec::new()));
    let inner = flowc::llm::build_provider(config).unwrap();
    let provider = Box::new(Watched { inner, proposed: Arc::clone(&proposed) });
    let tool_env = ToolEnv {
        base_dir: root().join("flows"),
        clock: Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").unwrap()),
        ids: Arc::new(SeededIds::new(7)),
    };
    let mut runtime = Runtime::new(
        program,
        provider,
        RuntimeOptions { tool_env, tools: ToolRegistry::default(), limits: Default::default() },
    );
    let mut session = runtime.new_session("real");
    let mut conversation = Conversation { turns: Vec::new(), proposed: Vec::new(), failed: Vec::new() };
    for message in script {
        let before = proposed.lock().unwrap().len();
        let result = match runtime.run_turn(&mut session, message) {
            Ok(result) => result,
            Err(error) => {
                conversation.failed.push((message.to_string(), error.to_string()));
                continue;
            }
        };
        let this_turn: Vec<String> = proposed.lock().unwrap()[before..]
            .iter()
            .flat_map(|understanding| {
                let fields = understanding.fields.iter().map(|(name, proposal)| {
                    format!("{name}={} ({:?})", proposal.value, proposal.evidence.as_deref().unwrap_or("-"))
                });
                let yeses = understanding
                    .conditions
                    .iter()
                    .chain(&understanding.signals)
                    .filter(|(_, answer)| answer.yes)
                    .map(|(id, answer)| format!("{id}=yes ({:?})", answer.evidence.as_deref().unwrap_or("-")));
                fields.chain(yeses).collect::<Vec<_>>()
            })
            .collect();
        conversation.proposed.push(this_turn);
        conversation.turns.push(result);
    }
    conversation
}

/// Prints the figures of a conversation: per turn, the model calls, the
/// values proposed, those rejected as ungrounded and those read by code.
fn report(label: &str, conversation: &Conversation) {
    use flowc::runtime::events::Event;
    let calls: Vec<u32> = conversation.turns.iter().map(|turn| turn.llm_calls).collect();
    let mut proposed = 0;
    let mut rejected = 0;
    println!("{label}: model calls per turn {calls:?}");
    for (turn, values) in conversation.turns.iter().zip(&conversation.proposed) {
        let ungrounded: Vec<String> = turn
            .events
            .iter()
            .filter_map(|event| match event {
                Event::Ungrounded { kind, name, value, reason, .. } => Some(format!("{kind} {name}={value}: {reason}")),
                _ => None,
            })
            .collect();
        let by_code: Vec<String> = turn
            .events
            .iter()
            .filter_map(|event| match event {
                Event::ReadByCode { field, value, .. } => Some(format!("{field}={value}")),
                _ => None,
            })
            .collect();
        proposed += values.len();
        rejected += ungrounded.len();
        println!(
            "  turn {} {:?}: {} call(s), {}, ran {:?}, at {:?}/{:?}, reply {:?}\n    proposed {:?}\n    ungrounded {:?}\n    read by code {:?}",
            turn.turn,
            turn.user,
            turn.llm_calls,
            turn.stopped_reason.as_str(),
            turn.executed_steps,
            turn.flow,
            turn.step,
            turn.reply.chars().take(60).collect::<String>(),
            values,
            ungrounded,
            by_code
        );
    }
    for (message, error) in &conversation.failed {
        println!("  failed turn {message:?}: {error}");
    }
    println!("  {label}: {proposed} proposals, {rejected} rejected as ungrounded");
}

/// The seven-turn script and the support conversation against the real
/// local model (`FLOWC_REAL_MODEL_URL`, run by `scripts/real-model-test.sh`),
/// recorded, then replayed from the recording: `book` must run on the
/// "yes" turn or not at all, never on another turn nor twice, and "my
/// email is ann@example.com" must set the email.
#[test]
#[ignore = "needs a real server: FLOWC_REAL_MODEL=1 bash scripts/real-model-test.sh"]
fn real_model_books_only_on_yes() {
    use flowc::llm::ProviderConfig;
    use flowc::llm::config::{ProviderKind, StructuredOutput, ToolChoiceMode};
    let Ok(base_url) = std::env::var("FLOWC_REAL_MODEL_URL") else {
        // Asked for by name (`--ignored`) without a server: a failure that
        // says why, never a pass that tested nothing.
        panic!(
            "real_model_books_only_on_yes needs a real server: FLOWC_REAL_MODEL_URL is not set \
             (run it with FLOWC_REAL_MODEL=1 bash scripts/real-model-test.sh)"
        );
    };
    let dir = temp_dir("grounding-real");
    let live = |recording: &Path| ProviderConfig {
        provider: ProviderKind::OpenAi,
        model: std::env::var("FLOWC_MODEL").unwrap_or_else(|_| "smollm2".into()),
        base_url: base_url.clone(),
        temperature: Some(0.0),
        structured_output: StructuredOutput::JsonObject,
        tool_choice: ToolChoiceMode::Forced,
        http: flowc::llm::http::HttpSettings { timeout: Duration::from_secs(900), ..Default::default() },
        // Without a cap the small model may write one evidence string on
        // until its context is full (minutes on a shared CPU); a cut answer
        // is repaired once, or the turn fails cleanly.
        max_tokens: Some(300),
        record: Some(recording.to_path_buf()),
        ..ProviderConfig::default()
    };
    let replay = |recording: &Path| ProviderConfig {
        provider: ProviderKind::Replay(recording.to_path_buf()),
        ..ProviderConfig::default()
    };
    let booked_on = |conversation: &Conversation| -> Vec<u32> {
        conversation
            .turns
            .iter()
            .filter(|turn| turn.executed_steps.iter().any(|step| step == "book"))
            .map(|turn| turn.turn)
            .collect()
    };

    let booking_recording = dir.join("booking.rec.json");
    let booking = converse("flows/booking.flow", &SEVEN_TURNS, &live(&booking_recording));
    report("booking (7 turns)", &booking);
    let replayed = converse("flows/booking.flow", &SEVEN_TURNS, &replay(&booking_recording));
    let replies = |conversation: &Conversation| -> Vec<String> {
        conversation.turns.iter().map(|turn| turn.reply.clone()).collect()
    };
    assert_eq!(replies(&replayed), replies(&booking), "the replay holds the same conversation");
    assert_eq!(replayed.failed, booking.failed, "and the same failed turns");
    for (label, conversation) in [("live", &booking), ("replayed", &replayed)] {
        let booked = booked_on(conversation);
        assert!(booked.is_empty() || booked == [5], "{label}: `book` ran on turns {booked:?}");
    }

    let support_script = [
        "Hello, I need help",
        "my email is ann@example.com",
        "It's a technical problem, the service is down",
        "yes, thanks",
    ];
    let support_recording = dir.join("support.rec.json");
    let support = converse("flows/support.yaml", &support_script, &live(&support_recording));
    report("support", &support);
    let email =
        support.turns.iter().find(|turn| turn.user == support_script[1]).and_then(|turn| turn.data.get("email"));
    assert_eq!(email, Some(&json!("ann@example.com")));
}
