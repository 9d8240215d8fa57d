//! The offline answer to a model step ([`AskRequest`]): a value of the
//! field's type built from the rendered instruction and the values it
//! reads, by rules (docs/offline.md, "Model steps"), so that workflows with
//! model steps run and test with no model.
//!
//! The value follows the field's JSON schema, recursively:
//! - a string is the rendered instruction (with a `pattern`: the first
//!   example, then the first string the instruction reads, that matches);
//! - an enum is the first of its values the instruction names as a whole
//!   word (any case), else its first value;
//! - an int or float is the first number written in the instruction, else
//!   the first number it reads, else the minimum or 0, clamped to the
//!   range (an int rounded);
//! - a bool is the first bool the instruction reads, else `true`;
//! - a date is the first ISO date in the instruction or what it reads,
//!   else `today`; a datetime the same date at midnight UTC;
//! - a list is built from the first list the instruction reads, each item
//!   converted to the item type (an object item becomes, as a string, its
//!   string members joined by spaces), cut to `maxItems`; none read: empty;
//! - an object takes each member from the first object the instruction
//!   reads that has it, converted, else drafts it by these rules.
//!
//! A repair is answered the same way: the offline model is deterministic,
//! so a value it cannot make fit is refused twice and the step fails.
//!
//! With `tools`, the first call asks, in one round, for each tool offered
//! whose required parameters can all be filled: each parameter from the
//! member of that name of an object the instruction reads (a tool with no
//! required parameter, such as `clock` or `uuid`, always can). No tool
//! fillable: it answers at once. Once the calls ran (or the tools are
//! spent), it answers by the rules above with each successful result read
//! as one more value the instruction reads, after them; and a string
//! without a `pattern` is the instruction followed by each result as text
//! (its string members joined by spaces), one per line.

use crate::llm::{AskAnswer, AskRequest, ToolCall, ToolCalls, ToolSpec, Usage};
use serde_json::{Map, Value};

/// The offline answer to `request`.
pub(super) fn ask(request: &AskRequest) -> AskAnswer {
    let mut prompt = words(&request.instruction)
        + request.field.description.as_deref().map_or(0, words)
        + request.field.examples.iter().map(|example| words(example)).sum::<u64>()
        + request.repair.as_ref().map_or(0, |repair| words(&repair.error) + words(&repair.answer));
    if request.rounds.is_empty() && request.offers_tools() {
        let calls: Vec<ToolCall> = request
            .tools
            .iter()
            .filter_map(|tool| Some((tool, arguments(tool, &request.inputs)?)))
            .enumerate()
            .map(|(index, (tool, arguments))| ToolCall {
                id: format!("call_{index}"),
                name: tool.name.clone(),
                arguments: Ok(arguments),
            })
            .collect();
        if !calls.is_empty() {
            let completion = calls.iter().map(|call| words(&call.name)).sum();
            let usage = Usage { calls: 1, prompt, completion, cached: 0, estimated: false };
            let asked = ToolCalls { calls, text: String::new(), usage, echo: Value::Null };
            return AskAnswer { value: Ok(Value::Null), usage, calls: Some(asked) };
        }
    }
    let results: Vec<Value> = request
        .rounds
        .iter()
        .flat_map(|round| round.answered())
        .filter_map(|(_, result)| result.ok().cloned())
        .collect();
    prompt += results.iter().map(|result| words(&result.to_string())).sum::<u64>();
    let mut inputs = request.inputs.clone();
    inputs.extend(results.iter().cloned());
    let drafter = Drafter { request, inputs: &inputs, results: &results };
    let value = drafter.draft(&request.field.schema, true);
    let completion = words(&value.to_string());
    AskAnswer {
        value: Ok(value),
        usage: Usage { calls: 1, prompt, completion, cached: 0, estimated: false },
        calls: None,
    }
}

/// The arguments of a call of `tool` filled from the objects `inputs`
/// holds, by parameter name; `None` when a required one is not there.
fn arguments(tool: &ToolSpec, inputs: &[Value]) -> Option<Value> {
    let find = |name: &str| inputs.iter().filter_map(Value::as_object).find_map(|input| input.get(name)).cloned();
    let required: Vec<&str> = tool
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Map::new();
    for name in tool.parameters.get("properties").and_then(Value::as_object).into_iter().flat_map(Map::keys) {
        match find(name) {
            Some(value) if !value.is_null() => {
                arguments.insert(name.clone(), value);
            }
            _ if required.contains(&name.as_str()) => return None,
            _ => {}
        }
    }
    Some(Value::Object(arguments))
}

fn words(text: &str) -> u64 {
    u64::try_from(text.split_whitespace().count()).unwrap_or(u64::MAX)
}

struct Drafter<'a> {
    request: &'a AskRequest,
    /// What the instruction reads, then the tools' results.
    inputs: &'a [Value],
    /// The tools' results.
    results: &'a [Value],
}

impl Drafter<'_> {
    /// A value of `schema` drafted from the instruction; `top` when it is
    /// the field itself (whose examples the request carries).
    fn draft(&self, schema: &Value, top: bool) -> Value {
        let instruction = self.request.instruction.as_str();
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return first_named(values, instruction);
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => match schema.get("format").and_then(Value::as_str) {
                Some("date") => Value::String(self.date()),
                Some("date-time") => Value::String(format!("{}T00:00:00Z", self.date())),
                _ => Value::String(self.string(schema, top)),
            },
            Some("integer") => clamp(self.number(), schema, true),
            Some("number") => clamp(self.number(), schema, false),
            Some("boolean") => Value::Bool(self.inputs.iter().find_map(Value::as_bool).unwrap_or(true)),
            Some("array") => {
                let items = schema.get("items").cloned().unwrap_or(Value::Null);
                let seed = self.inputs.iter().find_map(Value::as_array);
                let mut list: Vec<Value> =
                    seed.map(|seed| seed.iter().map(|item| self.convert(item, &items)).collect()).unwrap_or_default();
                if let Some(max) = schema.get("maxItems").and_then(Value::as_f64) {
                    list.truncate(max as usize);
                }
                Value::Array(list)
            }
            Some("object") => {
                let seed = self.inputs.iter().find_map(Value::as_object);
                self.object(schema, seed)
            }
            _ => Value::String(instruction.to_string()),
        }
    }

    fn object(&self, schema: &Value, seed: Option<&Map<String, Value>>) -> Value {
        let mut object = Map::new();
        for (name, member) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
            let from_inputs = seed
                .and_then(|seed| seed.get(name))
                .or_else(|| self.inputs.iter().filter_map(Value::as_object).find_map(|input| input.get(name)));
            let value = match from_inputs {
                Some(found) => self.convert(found, member),
                None => self.draft(member, false),
            };
            object.insert(name.clone(), value);
        }
        Value::Object(object)
    }

    /// `seed` (a value the instruction reads) as a value of `schema`.
    fn convert(&self, seed: &Value, schema: &Value) -> Value {
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return match seed {
                Value::String(text) if values.iter().any(|value| value.as_str() == Some(text)) => seed.clone(),
                other => first_named(values, &as_text(other)),
            };
        }
        match (schema.get("type").and_then(Value::as_str), seed) {
            (Some("string"), _) if schema.get("format").is_none() => Value::String(as_text(seed)),
            (Some("integer"), Value::Number(number)) => clamp(number.as_f64(), schema, true),
            (Some("number"), Value::Number(number)) => clamp(number.as_f64(), schema, false),
            (Some("integer" | "number"), Value::String(text)) => {
                clamp(first_number(text), schema, schema.get("type").and_then(Value::as_str) == Some("integer"))
            }
            (Some("boolean"), Value::Bool(_)) => seed.clone(),
            (Some("array"), Value::Array(items)) => {
                let item_schema = schema.get("items").cloned().unwrap_or(Value::Null);
                Value::Array(items.iter().map(|item| self.convert(item, &item_schema)).collect())
            }
            (Some("object"), Value::Object(object)) => self.object(schema, Some(object)),
            _ => self.draft(schema, false),
        }
    }

    fn string(&self, schema: &Value, top: bool) -> String {
        let instruction = &self.request.instruction;
        let Some(pattern) = schema.get("pattern").and_then(Value::as_str) else {
            let mut text = instruction.clone();
            for result in self.results {
                text.push('\n');
                text.push_str(&as_text(result));
            }
            return text;
        };
        let Ok(pattern) = regex::Regex::new(pattern) else {
            return instruction.clone();
        };
        let examples = if top { self.request.field.examples.as_slice() } else { &[] };
        let read = self.inputs.iter().filter_map(Value::as_str);
        examples
            .iter()
            .map(String::as_str)
            .chain(read)
            .find(|candidate| pattern.is_match(candidate))
            .map_or_else(|| instruction.clone(), str::to_string)
    }

    fn number(&self) -> Option<f64> {
        first_number(&self.request.instruction).or_else(|| self.inputs.iter().find_map(Value::as_f64))
    }

    fn date(&self) -> String {
        let texts =
            std::iter::once(self.request.instruction.as_str()).chain(self.inputs.iter().filter_map(Value::as_str));
        texts.filter_map(first_iso_date).next().unwrap_or_else(|| self.request.today.clone())
    }
}

/// The first of `values` that `text` names as a whole word, any case;
/// else the first value.
fn first_named(values: &[Value], text: &str) -> Value {
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect();
    values
        .iter()
        .find(|value| value.as_str().is_some_and(|value| words.iter().any(|word| *word == value.to_lowercase())))
        .or_else(|| values.first())
        .cloned()
        .unwrap_or(Value::Null)
}

/// A value as text: a string as it is, an object's string members joined
/// by spaces, anything else as JSON.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Object(object) => object.values().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}

fn clamp(number: Option<f64>, schema: &Value, integer: bool) -> Value {
    let min = schema.get("minimum").and_then(Value::as_f64);
    let max = schema.get("maximum").and_then(Value::as_f64);
    let mut number = number.or(min).unwrap_or(0.0);
    if let Some(min) = min {
        number = number.max(min);
    }
    if let Some(max) = max {
        number = number.min(max);
    }
    if integer {
        Value::from(number.round() as i64)
    } else {
        serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)
    }
}

/// The first number written in `text` as digits (a leading `-` and a
/// decimal part kept); digits inside a word or an ISO date are not one.
fn first_number(text: &str) -> Option<f64> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '!' | '?'))
        .map(|word| word.trim_end_matches(['.', ':']))
        .find_map(|word| word.parse::<f64>().ok().filter(|number| number.is_finite()))
}

fn first_iso_date(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(9)).find_map(|start| {
        let candidate = text.get(start..start + 10)?;
        chrono::NaiveDate::parse_from_str(candidate, "%Y-%m-%d").ok().map(|_| candidate.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::FieldSpec;
    use serde_json::json;

    fn request(instruction: &str, schema: Value, inputs: Vec<Value>) -> AskRequest {
        let mut field = FieldSpec::bare("f", "string");
        field.schema = schema;
        AskRequest {
            step: "w.s".into(),
            instruction: instruction.into(),
            field,
            inputs,
            tools: vec![],
            today: "2026-01-05".into(),
            repair: None,
            rounds: vec![],
            tools_spent: false,
            deadline: None,
        }
    }

    fn value(instruction: &str, schema: Value, inputs: Vec<Value>) -> Value {
        ask(&request(instruction, schema, inputs)).value.unwrap()
    }

    #[test]
    fn a_string_is_the_rendered_instruction_and_counts_one_call() {
        let answer = ask(&request("Write a short welcome for Ann", json!({"type": "string"}), vec![json!("Ann")]));
        assert_eq!(answer.value, Ok(json!("Write a short welcome for Ann")));
        assert_eq!((answer.usage.calls, answer.usage.prompt, answer.usage.completion), (1, 6, 6));
    }

    #[test]
    fn a_patterned_string_takes_the_first_example_or_input_that_matches() {
        let schema = json!({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"});
        let mut asked = request("Pick a code for Ann", schema.clone(), vec![json!("zz"), json!("AB-12")]);
        assert_eq!(ask(&asked).value, Ok(json!("AB-12")));
        asked.field.examples = vec!["XY-9".into()];
        assert_eq!(ask(&asked).value, Ok(json!("XY-9")));
    }

    #[test]
    fn an_enum_is_the_value_the_instruction_names_else_the_first() {
        let schema = json!({"type": "string", "enum": ["low", "high"]});
        assert_eq!(value("The priority is HIGH, surely", schema.clone(), vec![]), json!("high"));
        assert_eq!(value("Decide the priority", schema, vec![]), json!("low"));
    }

    #[test]
    fn numbers_are_read_then_clamped_to_the_range() {
        let schema = json!({"type": "integer", "minimum": 1, "maximum": 5});
        assert_eq!(value("Rate it 9 out of 10", schema.clone(), vec![]), json!(5));
        assert_eq!(value("Rate it", schema.clone(), vec![json!(3)]), json!(3));
        assert_eq!(value("Rate it", schema, vec![]), json!(1));
        assert_eq!(value("Score 2.5 please", json!({"type": "number"}), vec![]), json!(2.5));
    }

    #[test]
    fn dates_come_from_the_instruction_else_today() {
        let schema = json!({"type": "string", "format": "date"});
        assert_eq!(value("Follow up after 2026-02-03.", schema.clone(), vec![]), json!("2026-02-03"));
        assert_eq!(value("Pick a day", schema, vec![]), json!("2026-01-05"));
        assert_eq!(
            value("When?", json!({"type": "string", "format": "date-time"}), vec![]),
            json!("2026-01-05T00:00:00Z")
        );
    }

    #[test]
    fn a_list_is_built_from_the_list_the_instruction_reads() {
        let contacts = json!([{"name": "Ann", "email": "a@x"}, {"name": "Bo", "email": "b@x"}]);
        let strings = json!({"type": "array", "items": {"type": "string"}, "maxItems": 5});
        assert_eq!(value("Names of {{contacts}}", strings, vec![contacts.clone()]), json!(["Ann a@x", "Bo b@x"]));
        let objects = json!({"type": "array", "maxItems": 1, "items": {
            "type": "object", "properties": {"email": {"type": "string"}, "tier": {"type": "string", "enum": ["gold", "free"]}}
        }});
        assert_eq!(value("Tier them", objects, vec![contacts]), json!([{"email": "a@x", "tier": "gold"}]));
        assert_eq!(value("Nothing read", json!({"type": "array", "items": {"type": "string"}}), vec![]), json!([]));
    }

    #[test]
    fn an_object_takes_members_from_what_it_reads_and_drafts_the_rest() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "vip": {"type": "boolean"}, "score": {"type": "integer", "maximum": 3}
        }});
        assert_eq!(
            value("Profile of Ann, score 7", schema, vec![json!({"name": "Ann"})]),
            json!({"name": "Ann", "vip": true, "score": 3})
        );
    }

    #[test]
    fn with_tools_it_calls_each_it_can_fill_once_then_answers_with_the_results() {
        let tool = |name: &str, required: &[&str]| ToolSpec {
            name: name.into(),
            description: None,
            parameters: json!({
                "type": "object",
                "properties": required.iter().map(|name| (name.to_string(), json!({"type": "string"}))).collect::<Map<_, _>>(),
                "required": required,
            }),
        };
        let mut asked = request("Write to {{contact}}", json!({"type": "string"}), vec![json!({"email": "a@x"})]);
        asked.tools = vec![tool("clock", &[]), tool("lookup", &["email"]), tool("geo", &["zip"])];
        let first = ask(&asked);
        let calls = first.calls.clone().unwrap();
        let named: Vec<(&str, &Value)> =
            calls.calls.iter().map(|call| (call.name.as_str(), call.arguments.as_ref().unwrap())).collect();
        assert_eq!(named, [("clock", &json!({})), ("lookup", &json!({"email": "a@x"}))], "geo's zip is not read");
        asked.rounds = vec![crate::llm::ToolRound {
            asked: calls,
            results: vec![Ok(json!({"now": "2026-01-05T10:00:00Z"})), Err("lookup failed".into())],
        }];
        let answer = ask(&asked);
        assert!(answer.calls.is_none(), "one round only");
        assert_eq!(answer.value, Ok(json!("Write to {{contact}}\n2026-01-05T10:00:00Z")));
        asked.rounds.clear();
        asked.tools_spent = true;
        assert!(ask(&asked).calls.is_none(), "spent tools are not called");
    }
}
