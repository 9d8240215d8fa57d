//! The third kind of request, besides understand and reply: a model step
//! (`ask_model F: "…"`) asks for one value of a field's type. The runtime
//! renders the instruction, sends one [`AskRequest`], validates the answer
//! against the field and, when it does not fit, sends the same request
//! once more with [`AskRequest::repair`] saying what was wrong
//! (`runtime::model_step`); providers only carry the request over their
//! wire and read a JSON value back.
//!
//! With `tools`, the step is a tool loop like a reply's (`llm::rounds`): an
//! answer may be tool calls ([`AskAnswer::calls`]) instead of a value; the
//! runtime runs them and asks again with every round so far
//! ([`AskRequest::rounds`]), until the model gives its value. Providers
//! keep no state between rounds.

use super::{FieldSpec, ToolCalls, ToolRound, ToolSpec, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Instant;

/// What a model step asks the model for.
#[derive(Clone, Debug, Serialize)]
pub struct AskRequest {
    /// The step asking (`outreach.draft`), for traces and the prompt.
    pub step: String,
    /// The rendered instruction: what the value must be.
    pub instruction: String,
    /// The field written: its type, constraints and examples (the step's
    /// `examples` added to the field's own).
    pub field: FieldSpec,
    /// The values the instruction's interpolations read, in order: what
    /// the offline model drafts from (a real model reads the instruction).
    pub inputs: Vec<Value>,
    /// Tools the program lets the model call for this step.
    pub tools: Vec<ToolSpec>,
    /// Today's date (ISO), for relative dates.
    pub today: String,
    /// The earlier answer and why it was refused: this is the repair call.
    pub repair: Option<AskRepair>,
    /// The tool rounds of this step so far, with their results, oldest
    /// first. Not part of the fingerprint: a recording keeps one entry per
    /// step's call, with the tool calls it made (as a reply's).
    #[serde(skip)]
    pub rounds: Vec<ToolRound>,
    /// The step's tool budget is spent (`agent.limits.max_tool_rounds`):
    /// the tools are not offered any more, the model must answer.
    #[serde(skip)]
    pub tools_spent: bool,
    /// When the call is cut off. Not part of what is recorded.
    #[serde(skip)]
    pub deadline: Option<Instant>,
}

/// An answer that did not fit the field, sent back once for repair.
#[derive(Clone, Debug, Serialize)]
pub struct AskRepair {
    /// The answer as the model gave it.
    pub answer: String,
    /// Why it was refused.
    pub error: String,
}

/// The model's answer to an [`AskRequest`], not yet validated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AskAnswer {
    /// The proposed value, as JSON; `Err` text when no JSON value could be
    /// read from the answer at all (the repair call says so).
    pub value: Result<Value, String>,
    /// Tokens the call spent.
    pub usage: Usage,
    /// The tool calls the model asks for before it answers; `value` is
    /// then not read.
    #[serde(skip)]
    pub calls: Option<ToolCalls>,
}

impl AskRequest {
    /// Whether the model may call a tool in this call.
    pub fn offers_tools(&self) -> bool {
        !self.tools.is_empty() && !self.tools_spent
    }
}

/// The JSON schema of the answer object, `{"value": …}`: an object at the
/// top, as every structured-output mode wants.
pub fn answer_schema(field: &FieldSpec) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": { "value": field.schema },
        "required": ["value"],
        "additionalProperties": false,
    })
}

/// The system prompt of a model step, the same for every wire format. The
/// field's name and description are left out (the schema carries the
/// description): small models copy either as their answer.
pub fn system_prompt(request: &AskRequest) -> String {
    let mut prompt = String::from(
        "You write one value for a program. Do what the user asks and answer with a JSON object \
         {\"value\": ...} and nothing else; the value must follow the JSON schema given.",
    );
    if !request.field.examples.is_empty() {
        prompt.push_str("\nExamples of good values: ");
        prompt.push_str(&request.field.examples.join(" | "));
    }
    if request.offers_tools() {
        prompt.push_str("\nYou may first call the tools offered to look up what you need; then give the value.");
    }
    prompt
}

/// The user prompt: the instruction, the schema, and for a repair the
/// refused answer and why.
pub fn user_prompt(request: &AskRequest) -> String {
    // The schema's descriptions are left out here too: they are what a
    // small model copies instead of doing what the instruction asks.
    let mut prompt = format!(
        "{}\n\nAnswer schema: {}",
        request.instruction,
        serde_json::to_string(&without_descriptions(&answer_schema(&request.field))).unwrap_or_default()
    );
    if let Some(repair) = &request.repair {
        prompt.push_str(&format!(
            "\n\nYour previous answer was refused: {}\nIt was: {}\nAnswer again with a valid JSON object.",
            repair.error,
            clip(&repair.answer, 2000)
        ));
    }
    prompt
}

/// `schema` without its `description`s, at every level.
fn without_descriptions(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "description")
                .map(|(key, value)| (key.clone(), without_descriptions(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// The value of an answer's text: `{"value": X}` gives X; any other JSON
/// is taken as the value itself (small models often drop the wrapper).
pub fn read_answer(text: &str) -> Result<Value, String> {
    let json = super::schema::extract_json(text)
        .map_err(|error| format!("the answer is not JSON ({error}): {}", clip(text, 200)))?;
    Ok(match json {
        Value::Object(mut object) if object.len() == 1 && object.contains_key("value") => {
            object.remove("value").unwrap_or(Value::Null)
        }
        other => other,
    })
}

fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_with_or_without_its_wrapper() {
        assert_eq!(read_answer(r#"{"value": "Hi Ann"}"#), Ok(Value::from("Hi Ann")));
        assert_eq!(
            read_answer(
                r#"```json
{"value": 3}
```"#
            ),
            Ok(Value::from(3))
        );
        assert_eq!(read_answer(r#"["a", "b"]"#), Ok(serde_json::json!(["a", "b"])));
        assert!(read_answer("no json here").is_err_and(|error| error.contains("not JSON")));
    }

    #[test]
    fn the_repair_prompt_says_what_was_wrong() {
        let mut request = AskRequest {
            step: "w.s".into(),
            instruction: "Pick a size".into(),
            field: FieldSpec::bare("size", "int"),
            inputs: vec![],
            tools: vec![],
            today: "2026-01-05".into(),
            repair: None,
            rounds: vec![],
            tools_spent: false,
            deadline: None,
        };
        assert!(!user_prompt(&request).contains("refused"));
        request.repair = Some(AskRepair { answer: "12".into(), error: "12 is above the maximum 10".into() });
        let prompt = user_prompt(&request);
        assert!(prompt.contains("12 is above the maximum 10") && prompt.starts_with("Pick a size"), "{prompt}");
    }
}
