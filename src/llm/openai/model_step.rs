//! A model step over the OpenAI-compatible wire: one chat completion whose
//! answer is `{"value": …}` constrained by the field's schema in the
//! provider's structured-output mode (falling back on a refusal, as
//! understand does). Validation and the one repair are the runtime's
//! (`runtime::model_step`): this only carries the request and reads the
//! value back.
//!
//! With tools, the step's tools are offered beside the structured answer
//! (`tool_choice: auto`; in `tool` mode beside the answer function): a
//! reply that calls them is read as a tool round, and the rounds so far
//! are sent back as a reply's are (the assistant's `tool_calls` message,
//! then one `tool` message per result). A server that refuses `auto`
//! (as the reply finds, [`ToolChoiceMode::Forced`]) is asked as a reply's
//! forced choice is: a `next_action` call picks a tool and its arguments,
//! or `reply` (here: give the value), and the results go back as notes;
//! the same call twice is read as "answer".

use super::{
    ACTION_FUNCTION, CallError, MODE_WORDS, OpenAi, StructuredOutput, chat, function_tool, insert_structured,
    is_refusal, parse_arguments, push_rounds, read_answer,
};
use crate::llm::config::ToolChoiceMode;
use crate::llm::model_step::{self, answer_schema};
use crate::llm::schema::without_patterns;
use crate::llm::{AskAnswer, AskRequest, ProviderError, ToolCall, ToolCalls};
use serde_json::{Value, json};

/// The function name of the answer in `tool` mode.
const ANSWER_FUNCTION: &str = "answer";
/// Room for the answer when the configuration sets no `max_tokens`: a
/// short text or a small list, with the wrapper.
const ANSWER_TOKENS: u32 = 1024;

impl OpenAi {
    /// One model step's call, in the current mode, falling back on refusals.
    pub(super) fn ask_value(&mut self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        self.http.set_deadline(request.deadline);
        let schema = without_patterns(&answer_schema(&request.field));
        let (messages, called) = ask_messages(request);
        let mut spent = crate::llm::Usage::default();
        loop {
            let offer_tools = request.offers_tools();
            if offer_tools && self.tool_choice == ToolChoiceMode::Forced {
                let (action, usage) = self.decide(&messages, &request.tools)?;
                spent.add(usage);
                if let Some((name, arguments)) = action
                    && !called.iter().any(|(made, with)| *made == name && *with == arguments)
                {
                    let echo = json!({ ACTION_FUNCTION: {"name": name, "arguments": arguments} });
                    let id = format!("{ACTION_FUNCTION}_{}", request.rounds.len());
                    let calls = vec![ToolCall { id, name, arguments: Ok(arguments) }];
                    let calls = ToolCalls { calls, text: String::new(), usage: spent, echo };
                    return Ok(AskAnswer { value: Ok(Value::Null), usage: spent, calls: Some(calls) });
                }
            }
            let auto = offer_tools && self.tool_choice == ToolChoiceMode::Auto;
            let mode = self.mode;
            let body = self.ask_body(mode, &messages, auto, request, &schema);
            let rejects = |status: u16, message: &str| {
                (mode != StructuredOutput::Prompt || auto) && is_refusal(status, message, MODE_WORDS)
            };
            match self.http.post_json(&self.url(), &self.headers(), &body, &rejects) {
                Ok(answer) => {
                    if let Some(mut calls) = tool_calls(request, &answer, &body) {
                        spent.add(calls.usage);
                        calls.usage = spent;
                        return Ok(AskAnswer { value: Ok(Value::Null), usage: spent, calls: Some(calls) });
                    }
                    let raw = read_answer(mode, &answer, &body);
                    let value = model_step::read_answer(&raw.text).map_err(|error| {
                        if raw.truncated {
                            format!("{error}; the answer was cut off by the max_tokens limit")
                        } else {
                            error
                        }
                    });
                    spent.add(raw.usage);
                    return Ok(AskAnswer { value, usage: spent, calls: None });
                }
                // Tools offered with `auto` are given up first, as the
                // reply does, before the structured-output mode.
                Err(CallError::Rejected { .. }) if auto => self.tool_choice = ToolChoiceMode::Forced,
                Err(CallError::Rejected { status, message }) => match mode.next() {
                    Some(next) => self.mode = next,
                    None => return Err(CallError::Rejected { status, message }.into_provider_error()),
                },
                Err(CallError::Failed(error)) => return Err(error),
            }
        }
    }

    fn ask_body(
        &self,
        mode: StructuredOutput,
        messages: &[Value],
        auto: bool,
        request: &AskRequest,
        schema: &Value,
    ) -> Value {
        let mut body = self.body(messages);
        if self.max_tokens.is_none() {
            body.insert("max_tokens".into(), json!(ANSWER_TOKENS));
        }
        insert_structured(&mut body, mode, (ANSWER_FUNCTION, "Give the value asked for."), schema);
        if auto {
            let mut tools = match body.remove("tools") {
                Some(Value::Array(answer)) => answer,
                _ => Vec::new(),
            };
            tools.extend(request.tools.iter().map(function_tool));
            body.insert("tools".into(), Value::Array(tools));
            // In `tool` mode the answer function is one choice among the
            // tools, no longer forced.
            body.insert("tool_choice".into(), Value::String("auto".into()));
        }
        Value::Object(body)
    }
}

/// The messages of a model step's call: its prompts, then each earlier
/// round with its results: as tool messages, or, for a forced-choice
/// round, as one note per result (as a reply's). Also the calls made in
/// forced rounds, which a repeated choice is checked against.
fn ask_messages(request: &AskRequest) -> (Vec<Value>, Vec<(String, Value)>) {
    let mut messages =
        vec![chat("system", &model_step::system_prompt(request)), chat("user", &model_step::user_prompt(request))];
    let called = push_rounds(&mut messages, &request.rounds, "your answer");
    (messages, called)
}

/// The calls of the step's tools an answer makes, as a round; `None` when
/// it calls none (it answers, through the answer function or its text).
fn tool_calls(request: &AskRequest, answer: &Value, sent: &Value) -> Option<ToolCalls> {
    if request.tools.is_empty() {
        return None;
    }
    let message = answer.pointer("/choices/0/message")?;
    // A call of the answer function beside them is left out, echo
    // included: every call echoed must get a result.
    let raw: Vec<&Value> = message
        .get("tool_calls")
        .and_then(Value::as_array)?
        .iter()
        .filter(|call| call.pointer("/function/name").and_then(Value::as_str) != Some(ANSWER_FUNCTION))
        .collect();
    let calls: Vec<ToolCall> = raw
        .iter()
        .filter_map(|call| {
            let name = call.pointer("/function/name").and_then(Value::as_str)?;
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(text)) => parse_arguments(text),
                Some(other) => Ok(other.clone()),
                None => Ok(json!({})),
            };
            let id = call.get("id").and_then(Value::as_str).unwrap_or(name).to_string();
            Some(ToolCall { id, name: name.to_string(), arguments })
        })
        .collect();
    if calls.is_empty() {
        return None;
    }
    let echo = json!({"role": "assistant", "content": Value::Null, "tool_calls": raw});
    let usage = super::call_usage(answer, sent);
    Some(ToolCalls { calls, text: String::new(), usage, echo })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::config::{ProviderConfig, ProviderKind};
    use crate::llm::testserver::{Reply, TestServer, fast_http};
    use crate::llm::{FieldSpec, Provider};

    fn provider(server: &TestServer, mode: StructuredOutput) -> OpenAi {
        OpenAi::new(&ProviderConfig {
            provider: ProviderKind::OpenAi,
            model: "gpt-test".into(),
            base_url: format!("{}/v1", server.url),
            http: fast_http(),
            structured_output: mode,
            ..ProviderConfig::default()
        })
        .unwrap()
    }

    fn completion(content: &str) -> Reply {
        Reply::json(
            200,
            &json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 80, "completion_tokens": 6},
            }),
        )
    }

    fn request() -> AskRequest {
        let mut field = FieldSpec::bare("tone", "enum");
        field.schema = json!({"type": "string", "enum": ["warm", "formal"]});
        AskRequest {
            step: "outreach.choose_tone".into(),
            instruction: "Choose the tone for Ann".into(),
            field,
            inputs: vec![json!("Ann")],
            tools: vec![],
            today: "2026-01-05".into(),
            repair: None,
            rounds: vec![],
            tools_spent: false,
            deadline: None,
        }
    }

    #[test]
    fn the_value_is_asked_under_the_fields_schema_and_read_back() {
        let server = TestServer::start(vec![completion(r#"{"value": "formal"}"#)]);
        let answer = provider(&server, StructuredOutput::JsonSchema).ask(&request()).unwrap();
        assert_eq!(answer.value, Ok(json!("formal")));
        assert_eq!((answer.usage.calls, answer.usage.prompt, answer.usage.completion), (1, 80, 6));
        let sent = server.request(0).json();
        let schema = &sent["response_format"]["json_schema"]["schema"];
        assert_eq!(schema["properties"]["value"]["enum"], json!(["warm", "formal"]), "{sent}");
        assert!(sent["messages"][1]["content"].as_str().unwrap().starts_with("Choose the tone for Ann"));
    }

    #[test]
    fn a_refused_mode_falls_back_and_an_unreadable_answer_is_left_to_the_runtime() {
        let refusal = Reply::json(400, &json!({"error": {"message": "response_format json_schema is not supported"}}));
        let server = TestServer::start(vec![refusal, completion("I think warm")]);
        let mut openai = provider(&server, StructuredOutput::JsonSchema);
        let answer = openai.ask(&request()).unwrap();
        assert!(answer.value.as_ref().is_err_and(|error| error.contains("not JSON")), "{answer:?}");
        assert_eq!(openai.structured_output(), StructuredOutput::JsonObject);
        assert_eq!(server.request(1).json()["response_format"]["type"], "json_object");
    }

    #[test]
    fn the_steps_tools_are_offered_beside_the_answer_and_a_round_goes_back_as_tool_messages() {
        let call = Reply::json(
            200,
            &json!({
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 4},
            }),
        );
        let server = TestServer::start(vec![call, completion(r#"{"value": "warm"}"#)]);
        let mut openai = provider(&server, StructuredOutput::JsonSchema);
        let mut asked = request();
        asked.tools = vec![crate::llm::ToolSpec {
            name: "clock".into(),
            description: Some("The time.".into()),
            parameters: json!({"type": "object", "properties": {}}),
        }];
        let first = openai.ask(&asked).unwrap();
        let calls = first.calls.unwrap();
        assert_eq!((calls.calls[0].id.as_str(), calls.calls[0].name.as_str()), ("c1", "clock"));
        assert_eq!(calls.usage.prompt, 50);
        let sent = server.request(0).json();
        assert_eq!(sent["tools"][0]["function"]["name"], "clock", "{sent}");
        assert_eq!(sent["tool_choice"], "auto");
        assert!(sent["response_format"]["json_schema"].is_object(), "the answer stays structured: {sent}");
        asked.rounds = vec![crate::llm::ToolRound { asked: calls, results: vec![Ok(json!({"now": "10:00"}))] }];
        asked.tools_spent = true;
        let answer = openai.ask(&asked).unwrap();
        assert_eq!((answer.value, answer.calls), (Ok(json!("warm")), None));
        let sent = server.request(1).json();
        let messages = sent["messages"].as_array().unwrap();
        assert_eq!(messages[2]["tool_calls"][0]["id"], "c1", "{sent}");
        assert_eq!(messages[3], json!({"role": "tool", "tool_call_id": "c1", "content": "{\"now\":\"10:00\"}"}));
        assert!(sent.get("tools").is_none(), "spent tools are not offered: {sent}");
    }

    #[test]
    fn a_server_that_refuses_auto_is_asked_by_forced_choice_and_a_repeated_choice_answers() {
        let decision = |arguments: &str| {
            Reply::json(
                200,
                &json!({
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": null,
                        "tool_calls": [{"id": "d", "type": "function",
                            "function": {"name": "next_action", "arguments": arguments}}]}}],
                    "usage": {"prompt_tokens": 40, "completion_tokens": 3},
                }),
            )
        };
        let refusal = Reply::json(400, &json!({"error": {"message": "tool_choice auto is not supported"}}));
        let chosen = r#"{"action": "clock", "arguments": {}}"#;
        let server =
            TestServer::start(vec![refusal, decision(chosen), decision(chosen), completion(r#"{"value": "warm"}"#)]);
        let mut openai = provider(&server, StructuredOutput::JsonSchema);
        let mut asked = request();
        asked.tools = vec![crate::llm::ToolSpec {
            name: "clock".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {}}),
        }];
        let calls = openai.ask(&asked).unwrap().calls.unwrap();
        assert_eq!((calls.calls[0].name.as_str(), calls.usage.calls), ("clock", 1));
        assert_eq!(openai.tool_choice(), ToolChoiceMode::Forced);
        assert_eq!(server.request(0).json()["tool_choice"], "auto");
        assert_eq!(server.request(1).json()["tool_choice"]["function"]["name"], "next_action");
        asked.rounds = vec![crate::llm::ToolRound { asked: calls, results: vec![Ok(json!({"now": "10:00"}))] }];
        let answer = openai.ask(&asked).unwrap();
        assert_eq!((answer.value, answer.usage.calls), (Ok(json!("warm")), 2), "the choice again, then the answer");
        let note = server.request(2).json()["messages"][2]["content"].as_str().unwrap().to_string();
        assert!(note.contains("`clock`") && note.contains("10:00"), "{note}");
        let sent = server.request(3).json();
        assert!(sent.get("tools").is_none() && sent["response_format"].is_object(), "{sent}");
    }
}
