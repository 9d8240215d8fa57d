//! A model step over the Anthropic Messages API: one call that must use an
//! `answer` tool whose input schema is `{"value": …}` under the field's
//! schema (Anthropic's way to constrain output, as understand does).
//! Validation and the one repair are the runtime's (`runtime::model_step`).
//!
//! With tools, the step's tools are offered beside the answer tool and the
//! model must use one of them (`tool_choice: any`): calls of the step's
//! tools without the answer are a tool round, sent back as a reply's are
//! (the assistant's content, then one `tool_result` per call). Once the
//! tools are spent, the answer tool is forced.

use super::{Anthropic, CallError, assistant_content, call_usage};
use crate::llm::model_step::{self, answer_schema};
use crate::llm::rounds::result_text;
use crate::llm::{AskAnswer, AskRequest, ProviderError, ToolCall, ToolCalls};
use serde_json::{Value, json};

/// The tool the answer is given through.
const ANSWER_TOOL: &str = "answer";

impl Anthropic {
    /// One model step's call.
    pub(super) fn ask_value(&mut self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        self.http.set_deadline(request.deadline);
        let mut messages = vec![json!({"role": "user", "content": model_step::user_prompt(request)})];
        for round in &request.rounds {
            messages.push(json!({"role": "assistant", "content": assistant_content(round)}));
            let results: Vec<Value> = round
                .answered()
                .map(|(call, result)| {
                    json!({"type": "tool_result", "tool_use_id": call.id, "content": result_text(result),
                           "is_error": result.is_err()})
                })
                .collect();
            messages.push(json!({"role": "user", "content": results}));
        }
        let mut body = self.body(Value::String(model_step::system_prompt(request)), &messages);
        let mut tools = vec![json!({
            "name": ANSWER_TOOL,
            "description": "Give the value asked for.",
            "input_schema": answer_schema(&request.field),
        })];
        // Listed even when spent: the API refuses a history of `tool_use`
        // blocks whose tools the request does not define.
        if request.offers_tools() || !request.rounds.is_empty() {
            tools.extend(request.tools.iter().map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description.clone().unwrap_or_default(),
                    "input_schema": tool.parameters,
                })
            }));
        }
        if request.offers_tools() {
            body.insert("tool_choice".into(), json!({"type": "any"}));
        } else {
            body.insert("tool_choice".into(), json!({"type": "tool", "name": ANSWER_TOOL}));
        }
        body.insert("tools".into(), Value::Array(tools));
        let body = Value::Object(body);
        let answer = self
            .http
            .post_json(&self.url(), &self.headers(), &body, &|_, _| false)
            .map_err(CallError::into_provider_error)?;
        let usage = call_usage(&answer, &body);
        if let Some(calls) = tool_calls(request, &answer, usage) {
            return Ok(AskAnswer { value: Ok(Value::Null), usage, calls: Some(calls) });
        }
        Ok(AskAnswer { value: read_value(&answer), usage, calls: None })
    }
}

/// The calls of the step's tools an answer makes when it does not use the
/// answer tool, as a round.
fn tool_calls(request: &AskRequest, answer: &Value, usage: crate::llm::Usage) -> Option<ToolCalls> {
    if request.tools.is_empty() {
        return None;
    }
    let blocks = answer.get("content").and_then(Value::as_array)?;
    let uses: Vec<&Value> =
        blocks.iter().filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use")).collect();
    if uses.iter().any(|block| block.get("name").and_then(Value::as_str) == Some(ANSWER_TOOL)) {
        return None;
    }
    let calls: Vec<ToolCall> = uses
        .iter()
        .filter_map(|block| {
            let name = block.get("name").and_then(Value::as_str)?;
            let id = block.get("id").and_then(Value::as_str).unwrap_or(name).to_string();
            let arguments = match block.get("input") {
                Some(input @ Value::Object(_)) => Ok(input.clone()),
                other => Err(format!("the tool input is not a JSON object: {}", other.unwrap_or(&Value::Null))),
            };
            Some(ToolCall { id, name: name.to_string(), arguments })
        })
        .collect();
    if calls.is_empty() {
        return None;
    }
    Some(ToolCalls { calls, text: String::new(), usage, echo: Value::Null })
}

/// The `value` of the answer tool's input, or why there is none.
fn read_value(answer: &Value) -> Result<Value, String> {
    if answer.get("stop_reason").and_then(Value::as_str) == Some("max_tokens") {
        return Err("the answer was cut off by the max_tokens limit".into());
    }
    let input = answer.get("content").and_then(Value::as_array).and_then(|blocks| {
        blocks.iter().find_map(|block| {
            (block.get("type").and_then(Value::as_str) == Some("tool_use")
                && block.get("name").and_then(Value::as_str) == Some(ANSWER_TOOL))
            .then(|| block.get("input"))
            .flatten()
        })
    });
    match input {
        Some(Value::Object(input)) if input.contains_key("value") => {
            Ok(input.get("value").cloned().unwrap_or_default())
        }
        Some(other) => Err(format!("the `{ANSWER_TOOL}` tool's input has no `value`: {other}")),
        None => Err(format!("the answer must call the `{ANSWER_TOOL}` tool")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::config::{ProviderConfig, ProviderKind};
    use crate::llm::testserver::{Reply, TestServer, fast_http};
    use crate::llm::{FieldSpec, Provider};

    fn answer(content: Value) -> Reply {
        Reply::json(
            200,
            &json!({
                "type": "message", "role": "assistant", "content": content, "stop_reason": "tool_use",
                "usage": {"input_tokens": 70, "output_tokens": 9},
            }),
        )
    }

    fn ask(server: &TestServer) -> AskAnswer {
        anthropic(server).ask(&rate(vec![])).unwrap()
    }

    fn anthropic(server: &TestServer) -> Anthropic {
        Anthropic::new(&ProviderConfig {
            provider: ProviderKind::Anthropic,
            model: "claude-test".into(),
            base_url: server.url.clone(),
            http: fast_http(),
            ..ProviderConfig::default()
        })
        .unwrap()
    }

    fn rate(tools: Vec<crate::llm::ToolSpec>) -> AskRequest {
        let mut field = FieldSpec::bare("rating", "int");
        field.schema = json!({"type": "integer", "minimum": 1, "maximum": 5});
        AskRequest {
            step: "w.rate".into(),
            instruction: "Rate the welcome".into(),
            field,
            inputs: vec![],
            tools,
            today: "2026-01-05".into(),
            repair: None,
            rounds: vec![],
            tools_spent: false,
            deadline: None,
        }
    }

    #[test]
    fn the_value_comes_through_the_forced_answer_tool() {
        let server = TestServer::start(vec![answer(
            json!([{"type": "tool_use", "id": "t1", "name": "answer", "input": {"value": 4}}]),
        )]);
        let answered = ask(&server);
        assert_eq!(answered.value, Ok(json!(4)));
        assert_eq!((answered.usage.calls, answered.usage.prompt, answered.usage.completion), (1, 70, 9));
        let sent = server.request(0).json();
        assert_eq!(sent["tool_choice"], json!({"type": "tool", "name": "answer"}));
        assert_eq!(sent["tools"][0]["input_schema"]["properties"]["value"]["maximum"], 5);
    }

    #[test]
    fn an_answer_without_the_tool_is_left_to_the_runtime_to_repair() {
        let server = TestServer::start(vec![answer(json!([{"type": "text", "text": "four"}]))]);
        assert!(ask(&server).value.is_err_and(|error| error.contains("must call")));
    }

    #[test]
    fn the_steps_tools_are_offered_beside_the_answer_tool_and_a_round_goes_back_as_tool_results() {
        let server = TestServer::start(vec![
            answer(json!([{"type": "tool_use", "id": "t1", "name": "clock", "input": {}}])),
            answer(json!([{"type": "tool_use", "id": "t2", "name": "answer", "input": {"value": 5}}])),
        ]);
        let mut anthropic = anthropic(&server);
        let clock = crate::llm::ToolSpec {
            name: "clock".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {}}),
        };
        let mut asked = rate(vec![clock]);
        let first = anthropic.ask(&asked).unwrap();
        let calls = first.calls.unwrap();
        assert_eq!((calls.calls[0].id.as_str(), &calls.calls[0].arguments), ("t1", &Ok(json!({}))));
        let sent = server.request(0).json();
        assert_eq!(sent["tool_choice"], json!({"type": "any"}));
        assert_eq!(
            (sent["tools"][0]["name"].as_str(), sent["tools"][1]["name"].as_str()),
            (Some("answer"), Some("clock"))
        );
        asked.rounds = vec![crate::llm::ToolRound { asked: calls, results: vec![Ok(json!({"now": "10:00"}))] }];
        asked.tools_spent = true;
        let answered = anthropic.ask(&asked).unwrap();
        assert_eq!((answered.value, answered.calls), (Ok(json!(5)), None));
        let sent = server.request(1).json();
        assert_eq!(sent["tool_choice"], json!({"type": "tool", "name": "answer"}), "spent: the answer is forced");
        assert_eq!(sent["tools"][1]["name"], "clock", "still defined for the history's tool_use");
        assert_eq!(sent["messages"][1]["content"][0]["id"], "t1", "{sent}");
        let result = &sent["messages"][2]["content"][0];
        assert_eq!((result["type"].as_str(), result["tool_use_id"].as_str()), (Some("tool_result"), Some("t1")));
        assert_eq!(result["content"], "{\"now\":\"10:00\"}");
    }
}
