//! A reply that states what nobody said (issue 24): a model server, faked
//! on 127.0.0.1 as the weak model SmolLM2 behaved on the support desk,
//! writes a ticket number nobody gave, in its fused reply and in both
//! reply calls. The run is recorded, then replayed with the server gone:
//! the fused reply is set aside, the reply asked for once more, then
//! replaced by the step's prompt, and the `unfounded_claim` events say so
//! in `--trace`, in `--json`'s `/trace` and in `flowc test`'s report.

use crate::fake::{self, Facts, FakeServer, Request};
use crate::support::{flowc_in, stderr, stdout, temp_dir};
use serde_json::{Value, json};
use std::sync::Arc;

const PROGRAM: &str = r#"
agent Helpdesk { identity "You are the support assistant of Acme Cloud." rule "Be brief and friendly." }
schema {
  email: string "The email address on the customer's account"
  order_id: string "Order number" examples "ORD-1234"
}
flow billing "Billing and refunds" {
  when "the user has a billing question or wants a refund"
  step ask_email { prompt "What is the email address on your account?" collect email }
  step ask_order { prompt "What is the order number (like ORD-1234)?" collect order_id }
}
"#;

const MESSAGE: &str = "I was charged twice";
const PROMPT: &str = "What is the email address on your account?";

/// The model: routes the message to billing, and makes up a ticket number
/// in every reply it writes, fused or not.
fn inventive_model() -> fake::Handler {
    let fused = format!("I've opened ticket BILLING-1234 for you. {PROMPT}");
    let facts = Facts::new(&[(MESSAGE, json!({"flow": "billing", "step": "billing.ask_email", "reply": fused}))]);
    Arc::new(move |request: &Request, _| {
        if !request.is_stream() {
            return fake::openai_answer(&facts, request);
        }
        let body = request.json();
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        let text = format!("Sorry about that! Ticket BILLING-1234 is open. {}", fake::instructions(system));
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "model": body["model"],
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
        events.extend(text.split_inclusive(' ').map(|piece| chunk(json!({"content": piece}), Value::Null)));
        events.push(chunk(json!({}), json!("stop")));
        let mut chunks: Vec<String> = events.iter().map(|event| format!("data: {event}\n\n")).collect();
        chunks.push("data: [DONE]\n\n".into());
        fake::Reply::Stream(chunks)
    })
}

/// The `unfounded_claim` events among `events`: (claim, action, text).
fn claims(events: &[Value]) -> Vec<(String, String, Option<String>)> {
    events
        .iter()
        .filter(|event| event["event"] == "unfounded_claim")
        .map(|event| {
            let text = event["text"].as_str().map(str::to_string);
            (event["claim"].as_str().unwrap_or_default().to_string(), event["action"].to_string(), text)
        })
        .collect()
}

fn expected() -> Vec<(String, String, Option<String>)> {
    let claim = || "BILLING-1234".to_string();
    vec![
        (claim(), "\"set_aside\"".into(), None),
        (claim(), "\"asked_again\"".into(), None),
        (claim(), "\"replaced\"".into(), Some(PROMPT.to_string())),
    ]
}

#[test]
fn a_recorded_reply_that_invents_a_ticket_number_is_replaced_and_traced() {
    let dir = temp_dir("claims-replay");
    std::fs::write(dir.join("billing.flow"), PROGRAM).expect("program written");
    let script = format!("{MESSAGE}\n/trace\n");
    {
        let server = FakeServer::start(inventive_model());
        let base_url = format!("{}/v1", server.url);
        let args = ["run", "billing.flow", "--provider", "openai", "--base-url", &base_url, "--model", "weak"];
        let recorded =
            flowc_in(&dir, &[&args[..], &["--record", "billing.rec.json", "--json"]].concat(), Some(&script));
        assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
        let replies = server.requests().iter().filter(|request| request.is_stream()).count();
        assert_eq!(replies, 2, "the reply was asked for once more, not again and again");
    }
    // The server is gone: every answer comes from the recording.
    let replayed = flowc_in(
        &dir,
        &["run", "billing.flow", "--provider", "replay:billing.rec.json", "--json", "--trace"],
        Some(&script),
    );
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    let lines: Vec<Value> = stdout(&replayed).lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    assert_eq!(lines[0]["reply"], PROMPT, "the user is never told the made-up number");
    assert_eq!(lines[0]["llm_calls"], 3, "the understand call and two reply calls");
    // `--json`'s `/trace` and `--trace` read the same events.
    let events = lines[1]["result"]["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(claims(&events), expected());
    let fused = events.iter().find(|event| event["event"] == "fused_reply").expect("the fused reply is traced");
    assert_eq!(fused["used"], false);
    assert_eq!(fused["reason"], "the reply states \"BILLING-1234\", which appears nowhere the model was given");
    let traced: Vec<Value> = stderr(&replayed).lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    assert_eq!(claims(&traced), expected());

    // `flowc test` replays it too, and a failing expectation's report
    // shows the events.
    let case = format!(
        "program: billing.flow\nprovider: replay:billing.rec.json\ncases:\n  - name: charged twice\n    turns:\n      \
         - user: {MESSAGE}\n        step: ask_email\n        reply: {PROMPT}\n        llm_calls: 3\n  \
         - name: told the number\n    turns:\n      - user: {MESSAGE}\n        reply: {{ contains: BILLING-1234 }}\n"
    );
    std::fs::write(dir.join("billing.test.yaml"), case).expect("test file written");
    let tested = flowc_in(&dir, &["test", "--format", "json"], None);
    assert_eq!(tested.status.code(), Some(1), "{}", stderr(&tested));
    let report: Value = serde_json::from_str(&stdout(&tested)).expect("a JSON report");
    assert_eq!((&report["passed"], &report["failed"]), (&json!(1), &json!(1)), "{report:#}");
    let failure = &report["cases"][1]["failures"][0];
    assert_eq!(failure["actual"], json!(PROMPT).to_string());
    assert_eq!(claims(failure["events"].as_array().expect("the turn's events")), expected());
    // A recording keeps the estimated flag of a server that sent no usage.
    let usage = &report["cases"][0]["transcript"][0]["tokens"];
    assert_eq!(usage["estimated"], true, "{usage}");
}
