//! The JSON schema of an understand answer, generated from the request, and
//! the validation of what a model returns against it.
//!
//! The answer mirrors [`Understanding`]: `flow` (an enum of the candidate
//! flows' names and null), `fields` (one property per field to extract:
//! `{"evidence": "<the user's words>", "value": <its schema from
//! [`FieldSpec::schema`]>}`, or null for "not given"), `conditions` and
//! `signals` (one `{"evidence": "<words>" | null, "yes": boolean}` per
//! question id). Evidence comes first, so a model writing in order quotes
//! before it concludes. A key appears only when the request asks for it,
//! so the schema and the answer stay small. When the request asks for the
//! reply too (the fused call), `step` (the id of the step the turn stops
//! at, or null) and `reply` (the message to the user, or null) come last:
//! a streamed answer is whole up to its extraction before the reply
//! starts, so code can ground it while the reply is being written
//! ([`read_reply`] reads those two members alone).
//!
//! Model output is untrusted: [`validate`] checks the shape (unknown keys,
//! unknown flow names, wrong JSON types) and says what is wrong in words fit
//! for a repair prompt. A bare value or boolean without its evidence object
//! is accepted as a proposal without evidence (the runtime drops it rather
//! than spend a repair call). Whether evidence holds is the runtime's
//! to check (`runtime::grounding`), and so is each value's full schema;
//! here only the JSON type is.
//!
//! [`FieldSpec::schema`]: crate::llm::FieldSpec::schema

use crate::llm::{Answer, FieldSpec, FusedReply, Proposal, UnderstandRequest, Understanding};
use serde_json::{Map, Value, json};

/// The most tokens a sound understand answer can take: a little for the
/// shape, each field's value with its evidence (a quote of the message at
/// most), and a word or two per question. Sent as `max_tokens` when the
/// configuration sets none, so that a weak model looping inside the JSON
/// (whitespace, a string that never closes) stops in seconds, not when the
/// context is full; an answer cut short is repaired like any invalid one.
pub fn answer_token_budget(request: &UnderstandRequest) -> u32 {
    const SHAPE: usize = 256;
    const PER_FIELD: usize = 64;
    const PER_QUESTION: usize = 48;
    // A quote costs at most its bytes over three in tokens.
    let quote = request.message.len().div_ceil(3);
    let questions = request.conditions.len() + request.signals.len() + usize::from(!request.flows.is_empty());
    // A reply is a short message: a sentence or three, and the step's id.
    const REPLY: usize = 192;
    let reply = if request.reply.is_some() { REPLY } else { 0 };
    let budget = SHAPE + request.fields.len() * (PER_FIELD + quote) + questions * (PER_QUESTION + quote) + reply;
    u32::try_from(budget).unwrap_or(u32::MAX)
}

/// The schema of the answer to `request`. Every key is required and no
/// other key is allowed, so a grammar-constrained server always writes the
/// whole shape (a null says "not given").
pub fn understanding_schema(request: &UnderstandRequest) -> Value {
    let mut properties = Map::new();
    if !request.flows.is_empty() {
        // `anyOf` rather than `"type": ["string", "null"]` beside `enum`:
        // llama.cpp's grammar converter reads a type list first and then
        // ignores the enum, letting any string through.
        let names: Vec<Value> = request.flows.iter().map(|flow| Value::String(flow.name.clone())).collect();
        properties.insert("flow".into(), json!({ "anyOf": [{ "type": "string", "enum": names }, { "type": "null" }] }));
    }
    if !request.fields.is_empty() {
        let fields = request.fields.iter().map(|field| (field.name.clone(), cited_value(&field.schema)));
        properties.insert("fields".into(), closed_object(fields.collect()));
    }
    for (key, questions) in [("conditions", &request.conditions), ("signals", &request.signals)] {
        if !questions.is_empty() {
            let answers = questions.iter().map(|question| (question.id.clone(), cited_answer()));
            properties.insert(key.into(), closed_object(answers.collect()));
        }
    }
    // Last, after everything code grounds: the step, then the reply.
    if let Some(ask) = &request.reply {
        let ids: Vec<Value> = ask.steps.iter().map(|step| Value::String(step.id.clone())).collect();
        properties.insert("step".into(), json!({ "anyOf": [{ "type": "string", "enum": ids }, { "type": "null" }] }));
        properties.insert("reply".into(), json!({ "anyOf": [{ "type": "string" }, { "type": "null" }] }));
    }
    closed_object(properties)
}

/// An object schema whose properties are all required and the only ones.
fn closed_object(properties: Map<String, Value>) -> Value {
    let required: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A field's entry: its value with the words it was read from, or null.
fn cited_value(schema: &Value) -> Value {
    let mut entry = Map::new();
    entry.insert("evidence".into(), json!({ "type": "string" }));
    entry.insert("value".into(), schema.clone());
    json!({ "anyOf": [closed_object(entry), { "type": "null" }] })
}

/// A question's entry: yes or no, and for a yes the words that show it.
fn cited_answer() -> Value {
    let mut entry = Map::new();
    entry.insert("evidence".into(), json!({ "anyOf": [{ "type": "string" }, { "type": "null" }] }));
    entry.insert("yes".into(), json!({ "type": "boolean" }));
    closed_object(entry)
}

fn nullable(schema: &Value) -> Value {
    let accepts_null = match schema.get("type") {
        Some(Value::String(kind)) => kind == "null",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "null"),
        _ => false,
    };
    if accepts_null || schema.as_object().is_some_and(Map::is_empty) {
        return schema.clone();
    }
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// The schema rewritten for OpenAI's strict structured outputs: every
/// object lists all its properties as required and allows no others (a
/// property that was optional becomes nullable), as strict mode demands.
pub fn strict_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut strict: Map<String, Value> =
                map.iter().map(|(key, value)| (key.clone(), strict_schema(value))).collect();
            if let Some(Value::Object(properties)) = map.get("properties") {
                let required: Vec<&str> = map
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|names| names.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut strict_properties = Map::new();
                for (name, property) in properties {
                    let property = strict_schema(property);
                    let property = if required.contains(&name.as_str()) { property } else { nullable(&property) };
                    strict_properties.insert(name.clone(), property);
                }
                let all: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
                strict.insert("properties".into(), Value::Object(strict_properties));
                strict.insert("required".into(), Value::Array(all));
                strict.insert("additionalProperties".into(), Value::Bool(false));
            }
            Value::Object(strict)
        }
        Value::Array(items) => Value::Array(items.iter().map(strict_schema).collect()),
        other => other.clone(),
    }
}

/// The schema without `pattern`s, for servers that constrain decoding
/// with a grammar. llama.cpp's converter turns a negated class such as
/// `[^@ ]` into a grammar that also admits `"` and `\`, so a string never
/// has to close and a small model writes on until the context is full.
/// Patterns stay in the prompt, and the runtime checks every value
/// against the field's full schema.
pub fn without_patterns(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let value = match (key.as_str(), value) {
            ("pattern", Value::String(_)) => continue,
            ("properties", Value::Object(properties)) => Value::Object(
                properties.iter().map(|(name, property)| (name.clone(), without_patterns(property))).collect(),
            ),
            ("items" | "additionalProperties" | "not", Value::Object(_)) => without_patterns(value),
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(schemas)) => {
                Value::Array(schemas.iter().map(without_patterns).collect())
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

/// A compact picture of the expected answer for prompts that carry no
/// schema (`json_object` on servers that ignore the schema, `prompt` mode):
/// `{"flow": "booking" | "support" | null, "fields": {"guests": {"evidence":
/// string, "value": integer} | null}}`. Type names, not sample values: a
/// small model copies a sample (`"words"`) into its answer.
pub fn answer_sketch(request: &UnderstandRequest) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !request.flows.is_empty() {
        let names: Vec<String> = request.flows.iter().map(|flow| format!("\"{}\"", flow.name)).collect();
        parts.push(format!("\"flow\": {} | null", names.join(" | ")));
    }
    if !request.fields.is_empty() {
        let fields: Vec<String> = request
            .fields
            .iter()
            .map(|field| {
                format!("\"{}\": {{\"evidence\": string, \"value\": {}}} | null", field.name, value_sketch(field))
            })
            .collect();
        parts.push(format!("\"fields\": {{{}}}", fields.join(", ")));
    }
    for (key, questions) in [("conditions", &request.conditions), ("signals", &request.signals)] {
        if !questions.is_empty() {
            let answers: Vec<String> = questions
                .iter()
                .map(|question| format!("\"{}\": {{\"evidence\": string | null, \"yes\": true | false}}", question.id))
                .collect();
            parts.push(format!("\"{key}\": {{{}}}", answers.join(", ")));
        }
    }
    if let Some(ask) = &request.reply {
        let ids: Vec<String> = ask.steps.iter().map(|step| format!("\"{}\"", step.id)).collect();
        parts.push(format!("\"step\": {} | null", ids.join(" | ")));
        parts.push("\"reply\": string | null".to_string());
    }
    format!("{{{}}}", parts.join(", "))
}

fn value_sketch(field: &FieldSpec) -> String {
    // Type names, not sample values: a small model copies a sample value
    // ("text") into its answer.
    match field.kind.as_str() {
        "enum" if !field.values.is_empty() => {
            field.values.iter().map(|value| format!("\"{value}\"")).collect::<Vec<_>>().join(" | ")
        }
        "date" => "date string (YYYY-MM-DD)".into(),
        "datetime" => "date-time string (ISO 8601)".into(),
        "int" => "integer".into(),
        "float" => "number".into(),
        "bool" => "true | false".into(),
        "list" => "list".into(),
        "object" => "object".into(),
        _ => "string".into(),
    }
}

/// Reads a JSON object out of a model's text: bare, in a Markdown code
/// fence, or between the first `{` and the last `}` of surrounding prose.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("the answer is empty".into());
    }
    let first_error = match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let candidates = [fenced(trimmed), braced(trimmed)];
    for candidate in candidates.into_iter().flatten() {
        if let Ok(value) = serde_json::from_str::<Value>(candidate) {
            return Ok(value);
        }
    }
    // A small model quoting the user may break a line inside a string
    // (evidence copied with its line break): a raw control character is
    // invalid there, and outside strings it can only be whitespace, so
    // reading each as a space loses nothing.
    if trimmed.chars().any(char::is_control) {
        let spaced: String = trimmed.chars().map(|ch| if ch.is_control() { ' ' } else { ch }).collect();
        if let Some(value) = [Some(spaced.as_str()), fenced(&spaced), braced(&spaced)]
            .into_iter()
            .flatten()
            .find_map(|candidate| serde_json::from_str::<Value>(candidate).ok())
        {
            return Ok(value);
        }
    }
    Err(format!("the answer is not valid JSON ({first_error})"))
}

fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = text.get(start + 3..)?;
    let body_start = after.find('\n')? + 1;
    let body = after.get(body_start..)?;
    let end = body.find("```")?;
    body.get(..end)
}

fn braced(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    if end < start {
        return None;
    }
    text.get(start..=end)
}

/// Checks the shape of an answer and turns it into an [`Understanding`]
/// (usage left empty). A missing key means "nothing to say" (null);
/// everything present must be something that was asked, of the right type.
pub fn validate(answer: &Value, request: &UnderstandRequest) -> Result<Understanding, String> {
    let Value::Object(map) = answer else {
        return Err(format!("the answer must be a JSON object, not {}", json_type(answer)));
    };
    let mut problems: Vec<String> = Vec::new();
    let mut understanding = Understanding::default();
    if request.reply.is_some() {
        // A bad step or reply drops the reply alone: a repair would cost
        // a call the reply call may not even need.
        match read_reply(map, request) {
            Ok(reply) => understanding.reply = reply,
            Err(problem) => understanding.reply_dropped = Some(problem),
        }
    }
    for (key, value) in map {
        match key.as_str() {
            "step" | "reply" if request.reply.is_some() => {}
            "flow" if !request.flows.is_empty() => understanding.flow = read_flow(value, request, &mut problems),
            "fields" if !request.fields.is_empty() => read_fields(value, request, &mut understanding, &mut problems),
            "conditions" if !request.conditions.is_empty() => {
                understanding.conditions = read_booleans(key, value, &request.conditions, &mut problems);
            }
            "signals" if !request.signals.is_empty() => {
                understanding.signals = read_booleans(key, value, &request.signals, &mut problems);
            }
            _ => problems.push(format!("unknown key `{key}` (allowed: {})", allowed_keys(request))),
        }
    }
    if problems.is_empty() { Ok(understanding) } else { Err(problems.join("; ")) }
}

fn allowed_keys(request: &UnderstandRequest) -> String {
    let mut keys = Vec::new();
    if !request.flows.is_empty() {
        keys.push("`flow`");
    }
    if !request.fields.is_empty() {
        keys.push("`fields`");
    }
    if !request.conditions.is_empty() {
        keys.push("`conditions`");
    }
    if !request.signals.is_empty() {
        keys.push("`signals`");
    }
    if request.reply.is_some() {
        keys.extend(["`step`", "`reply`"]);
    }
    keys.join(", ")
}

/// The reply of a fused answer: its `step` and `reply` members, read
/// apart from the rest so that a streamed answer can be checked member by
/// member. `None` when the model named no step or wrote no reply (then the
/// runtime asks for the reply in a call of its own); an error for a step
/// that was not offered or a member of the wrong type.
pub fn read_reply(answer: &Map<String, Value>, request: &UnderstandRequest) -> Result<Option<FusedReply>, String> {
    let Some(ask) = &request.reply else {
        return Ok(None);
    };
    let step = match answer.get("step") {
        // With one step offered, a reply is for that step whether or not
        // the model named it: code still checks that the turn stops there
        // with the values the model saw (`runtime/engine/fused.rs`).
        Some(Value::Null) if answer.get("reply").is_some_and(Value::is_string) => match ask.steps.as_slice() {
            [only] => Some(only.id.clone()),
            _ => None,
        },
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if ask.steps.iter().any(|step| &step.id == id) => Some(id.clone()),
        Some(Value::String(id)) => {
            let ids: Vec<String> = ask.steps.iter().map(|step| format!("`{}`", step.id)).collect();
            return Err(format!("unknown step `{id}` (choose one of {} or null)", ids.join(", ")));
        }
        Some(other) => return Err(format!("`step` must be a step id or null, not {}", json_type(other))),
    };
    let text = match answer.get("reply") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => return Err(format!("`reply` must be a string or null, not {}", json_type(other))),
    };
    Ok(step.zip(text).map(|(step, text)| FusedReply { step, text }))
}

fn read_flow(value: &Value, request: &UnderstandRequest, problems: &mut Vec<String>) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(name) if request.flows.iter().any(|flow| &flow.name == name) => Some(name.clone()),
        Value::String(name) => {
            let names: Vec<String> = request.flows.iter().map(|flow| format!("`{}`", flow.name)).collect();
            problems.push(format!("unknown flow `{name}` (choose one of {} or null)", names.join(", ")));
            None
        }
        other => {
            problems.push(format!("`flow` must be a flow name or null, not {}", json_type(other)));
            None
        }
    }
}

fn read_fields(
    value: &Value,
    request: &UnderstandRequest,
    understanding: &mut Understanding,
    problems: &mut Vec<String>,
) {
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return,
        other => {
            problems.push(format!("`fields` must be an object, not {}", json_type(other)));
            return;
        }
    };
    for (name, field_value) in map {
        let Some(field) = request.fields.iter().find(|field| &field.name == name) else {
            problems.push(format!("unknown field `{name}`"));
            continue;
        };
        let Some(proposal) = read_cited(field_value) else {
            continue;
        };
        match type_problem(field, &proposal.value) {
            Some(problem) => problems.push(problem),
            None => {
                understanding.fields.insert(name.clone(), proposal);
            }
        }
    }
}

/// A field's entry, `{"evidence", "value"}` or a bare value (no evidence);
/// `None` for null.
fn read_cited(entry: &Value) -> Option<Proposal> {
    if let Value::Object(map) = entry
        && map.contains_key("value")
        && map.keys().all(|key| key == "value" || key == "evidence")
    {
        let value = map.get("value").cloned().unwrap_or(Value::Null);
        let evidence = map.get("evidence").and_then(Value::as_str).map(str::to_string);
        return (!value.is_null()).then_some(Proposal { value, evidence });
    }
    (!entry.is_null()).then(|| Proposal { value: entry.clone(), evidence: None })
}

/// Whether a value's JSON type fits the field's kind. Only the type: enum
/// values, ranges and patterns are the runtime's to check.
fn type_problem(field: &FieldSpec, value: &Value) -> Option<String> {
    let (fits, expected) = match field.kind.as_str() {
        "string" | "date" | "datetime" | "enum" => (value.is_string(), "a string"),
        "int" => (value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|x| x.fract() == 0.0), "an integer"),
        "float" => (value.is_number(), "a number"),
        "bool" => (value.is_boolean(), "true or false"),
        "list" => (value.is_array(), "a list"),
        "object" => (value.is_object(), "an object"),
        _ => (true, ""),
    };
    (!fits).then(|| format!("field `{}` must be {expected} or null, not {}", field.name, json_type(value)))
}

fn read_booleans(
    key: &str,
    value: &Value,
    questions: &[crate::llm::Question],
    problems: &mut Vec<String>,
) -> std::collections::BTreeMap<String, Answer> {
    let mut answers = std::collections::BTreeMap::new();
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return answers,
        other => {
            problems.push(format!("`{key}` must be an object, not {}", json_type(other)));
            return answers;
        }
    };
    for (id, answer) in map {
        if !questions.iter().any(|question| &question.id == id) {
            problems.push(format!("unknown id `{id}` in `{key}`"));
            continue;
        }
        let (yes, evidence) = match answer {
            Value::Object(entry) => (entry.get("yes").unwrap_or(&Value::Null), entry.get("evidence")),
            bare => (bare, None),
        };
        let evidence = evidence.and_then(Value::as_str).map(str::to_string);
        match yes {
            Value::Bool(yes) => {
                answers.insert(id.clone(), Answer { yes: *yes, evidence });
            }
            Value::Null => {}
            other => problems.push(format!("`{key}.{id}` must be true or false, not {}", json_type(other))),
        }
    }
    answers
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use crate::llm::{FlowChoice, Question};

    /// The booking program's confirm step, as the runtime would ask it.
    pub(crate) fn booking_request() -> UnderstandRequest {
        UnderstandRequest {
            message: "Ritz Paris, the 3rd of June, for two".into(),
            history: vec![crate::message::Message {
                role: crate::message::Role::Assistant,
                text: "Which hotel?".into(),
            }],
            active_flow: Some("booking".into()),
            flows: vec![
                FlowChoice {
                    name: "booking".into(),
                    title: Some("Book a hotel room".into()),
                    when: vec!["the user wants to book a hotel room".into()],
                    examples: vec!["Grand Hotel".into()],
                },
                FlowChoice {
                    name: "support".into(),
                    title: None,
                    when: vec!["the user has a problem".into()],
                    examples: vec![],
                },
            ],
            fields: vec![
                field("hotel", "string", json!({"type": "string"})),
                field("date", "date", json!({"type": "string", "format": "date"})),
                field("guests", "int", json!({"type": "integer", "minimum": 1, "maximum": 10})),
            ],
            conditions: vec![Question {
                id: "booking.confirm#2".into(),
                when: vec!["the user wants to change the date".into()],
            }],
            signals: vec![Question { id: "wants_human".into(), when: vec!["the user asks for a human agent".into()] }],
            today: "2026-01-05".into(),
            reply: None,
            deadline: None,
            prefix: crate::llm::PromptPrefix::default(),
        }
    }

    pub(crate) fn field(name: &str, kind: &str, schema: Value) -> FieldSpec {
        FieldSpec {
            name: name.into(),
            kind: kind.into(),
            schema,
            description: None,
            values: vec![],
            examples: vec![],
            pattern: None,
            min: None,
            max: None,
            asked: false,
        }
    }

    #[test]
    fn patterns_are_left_out_of_constrained_schemas() {
        let email = json!({"type": "string", "pattern": "^[^@ ]+@[^@ ]+$", "description": "Email"});
        let schema = json!({
            "type": "object",
            "properties": {
                "email": {"anyOf": [email, {"type": "null"}]},
                "pattern": {"type": "string", "pattern": "^x$"},
                "codes": {"type": "array", "items": {"type": "string", "pattern": "^[A-Z]+$"}},
            },
        });
        assert_eq!(
            without_patterns(&schema),
            json!({
                "type": "object",
                "properties": {
                    "email": {"anyOf": [{"type": "string", "description": "Email"}, {"type": "null"}]},
                    "pattern": {"type": "string"},
                    "codes": {"type": "array", "items": {"type": "string"}},
                },
            })
        );
    }

    #[test]
    fn schema_has_one_property_per_question() {
        let schema = understanding_schema(&booking_request());
        let cited = |value: Value| {
            json!({"anyOf": [{
                "type": "object",
                "properties": {"evidence": {"type": "string"}, "value": value},
                "required": ["evidence", "value"],
                "additionalProperties": false,
            }, {"type": "null"}]})
        };
        let answer = json!({
            "type": "object",
            "properties": {"evidence": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "yes": {"type": "boolean"}},
            "required": ["evidence", "yes"],
            "additionalProperties": false,
        });
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "flow": {"anyOf": [{"type": "string", "enum": ["booking", "support"]}, {"type": "null"}]},
                    "fields": {
                        "type": "object",
                        "properties": {
                            "hotel": cited(json!({"type": "string"})),
                            "date": cited(json!({"type": "string", "format": "date"})),
                            "guests": cited(json!({"type": "integer", "minimum": 1, "maximum": 10})),
                        },
                        "required": ["hotel", "date", "guests"],
                        "additionalProperties": false,
                    },
                    "conditions": {
                        "type": "object",
                        "properties": {"booking.confirm#2": answer.clone()},
                        "required": ["booking.confirm#2"],
                        "additionalProperties": false,
                    },
                    "signals": {
                        "type": "object",
                        "properties": {"wants_human": answer},
                        "required": ["wants_human"],
                        "additionalProperties": false,
                    },
                },
                "required": ["flow", "fields", "conditions", "signals"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn schema_leaves_out_what_is_not_asked() {
        let request = UnderstandRequest {
            fields: vec![field("confirmed", "bool", json!({"type": "boolean"}))],
            ..UnderstandRequest::default()
        };
        let schema = understanding_schema(&request);
        assert_eq!(schema["required"], json!(["fields"]));
        assert_eq!(
            answer_sketch(&request),
            r#"{"fields": {"confirmed": {"evidence": string, "value": true | false} | null}}"#
        );
    }

    #[test]
    fn strict_schema_requires_every_property() {
        let contact = json!({
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}, "required": ["name"]},
        });
        let strict = strict_schema(&contact);
        assert_eq!(
            strict["items"],
            json!({
                "type": "object",
                "properties": {"name": {"type": "string"}, "email": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                "required": ["name", "email"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn sketch_shows_the_expected_answer() {
        assert_eq!(
            answer_sketch(&booking_request()),
            r#"{"flow": "booking" | "support" | null, "fields": {"hotel": {"evidence": string, "value": string} | null, "date": {"evidence": string, "value": date string (YYYY-MM-DD)} | null, "guests": {"evidence": string, "value": integer} | null}, "conditions": {"booking.confirm#2": {"evidence": string | null, "yes": true | false}}, "signals": {"wants_human": {"evidence": string | null, "yes": true | false}}}"#
        );
    }

    #[test]
    fn valid_answer_is_read() {
        let answer = json!({
            "flow": "booking",
            "fields": {
                "hotel": {"evidence": "Ritz Paris", "value": "Ritz Paris"},
                "date": {"evidence": "the 3rd of June", "value": "2026-06-03"},
                "guests": {"evidence": "for two", "value": 2},
            },
            "conditions": {"booking.confirm#2": {"evidence": null, "yes": false}},
            "signals": {"wants_human": null},
        });
        let understanding = validate(&answer, &booking_request()).unwrap();
        assert_eq!(understanding.flow.as_deref(), Some("booking"));
        assert_eq!(understanding.fields.get("date"), Some(&Proposal::new(json!("2026-06-03"), "the 3rd of June")));
        assert_eq!(understanding.fields.len(), 3);
        assert_eq!(understanding.conditions.get("booking.confirm#2"), Some(&Answer::no()));
        assert!(understanding.signals.is_empty());
    }

    #[test]
    fn bare_values_are_proposals_without_evidence() {
        let answer = json!({
            "fields": {"hotel": "Ritz Paris", "guests": {"evidence": "two", "value": null}},
            "signals": {"wants_human": true},
        });
        let understanding = validate(&answer, &booking_request()).unwrap();
        assert_eq!(understanding.fields.get("hotel"), Some(&Proposal { value: json!("Ritz Paris"), evidence: None }));
        assert!(!understanding.fields.contains_key("guests"), "a null value is not given");
        assert_eq!(understanding.signals.get("wants_human"), Some(&Answer { yes: true, evidence: None }));
    }

    #[test]
    fn old_recordings_still_load() {
        let old: Understanding =
            serde_json::from_value(json!({"flow": null, "fields": {"hotel": "Ritz"}, "signals": {"x": true}})).unwrap();
        assert_eq!(old.fields.get("hotel"), Some(&Proposal { value: json!("Ritz"), evidence: None }));
        assert_eq!(old.signals.get("x"), Some(&Answer { yes: true, evidence: None }));
        let new = serde_json::to_value(&old).unwrap();
        assert_eq!(new["fields"]["hotel"], json!({"value": "Ritz", "evidence": null}));
        assert_eq!(serde_json::from_value::<Understanding>(new).unwrap(), old);
    }

    #[test]
    fn nulls_and_missing_keys_mean_not_given() {
        let answer = json!({"flow": null, "fields": {"hotel": null}});
        let understanding = validate(&answer, &booking_request()).unwrap();
        assert_eq!(understanding, Understanding::default());
    }

    #[test]
    fn bad_shapes_are_explained() {
        let check = |answer: Value, expected: &str| {
            assert_eq!(validate(&answer, &booking_request()).unwrap_err(), expected);
        };
        check(json!([]), "the answer must be a JSON object, not a list");
        check(json!({"flow": "billing"}), "unknown flow `billing` (choose one of `booking`, `support` or null)");
        check(json!({"flow": 3}), "`flow` must be a flow name or null, not a number");
        check(json!({"hotel": "Ritz"}), "unknown key `hotel` (allowed: `flow`, `fields`, `conditions`, `signals`)");
        check(json!({"fields": {"room": "12"}}), "unknown field `room`");
        check(json!({"fields": {"guests": "two"}}), "field `guests` must be an integer or null, not a string");
        check(json!({"conditions": {"x": true}}), "unknown id `x` in `conditions`");
        check(json!({"signals": {"wants_human": "yes"}}), "`signals.wants_human` must be true or false, not a string");
        check(
            json!({"flow": "x", "fields": []}),
            "unknown flow `x` (choose one of `booking`, `support` or null); `fields` must be an object, not a list",
        );
        let only_fields = UnderstandRequest { fields: vec![field("a", "string", json!({}))], ..Default::default() };
        assert_eq!(
            validate(&json!({"flow": "booking"}), &only_fields).unwrap_err(),
            "unknown key `flow` (allowed: `fields`)"
        );
    }

    /// The booking request at the date step, asking for the fused reply.
    pub(crate) fn fused_request() -> UnderstandRequest {
        let step = |id: &str, missing: &[&str], prompt: &str| crate::llm::StepAsk {
            id: id.into(),
            flow: "booking".into(),
            missing: missing.iter().map(|name| name.to_string()).collect(),
            prompt: prompt.into(),
        };
        UnderstandRequest {
            reply: Some(crate::llm::ReplyAsk {
                identity: Some("You are a concierge.".into()),
                rules: vec![],
                data: serde_json::Map::from_iter([("hotel".to_string(), json!("Ritz Paris"))]),
                fallback_flow: None,
                steps: vec![
                    step("booking.ask_date", &["date"], "For which date?"),
                    step("booking.confirm", &["confirmed"], "Book {{hotel}} on {{date}}?"),
                ],
            }),
            ..booking_request()
        }
    }

    #[test]
    fn the_step_and_the_reply_come_last_after_everything_code_grounds() {
        let request = fused_request();
        let schema = understanding_schema(&request);
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["flow", "fields", "conditions", "signals", "step", "reply"]);
        assert_eq!(
            schema["properties"]["step"],
            json!({"anyOf": [{"type": "string", "enum": ["booking.ask_date", "booking.confirm"]}, {"type": "null"}]})
        );
        assert!(
            answer_sketch(&request)
                .ends_with(r#""step": "booking.ask_date" | "booking.confirm" | null, "reply": string | null}"#)
        );
        assert!(answer_token_budget(&request) > answer_token_budget(&booking_request()), "room for the reply");
        // Without the reply asked, neither key is allowed.
        assert_eq!(
            validate(&json!({"reply": "Hi"}), &booking_request()).unwrap_err(),
            "unknown key `reply` (allowed: `flow`, `fields`, `conditions`, `signals`)"
        );
    }

    #[test]
    fn a_fused_answer_is_read_with_its_reply() {
        let request = fused_request();
        let answer = json!({
            "fields": {"date": {"evidence": "the 3rd of June", "value": "2026-06-03"}},
            "step": "booking.confirm",
            "reply": "Shall I book the Ritz Paris on June 3?",
        });
        let understanding = validate(&answer, &request).unwrap();
        assert_eq!(
            understanding.reply,
            Some(FusedReply { step: "booking.confirm".into(), text: "Shall I book the Ritz Paris on June 3?".into() })
        );
        assert_eq!(understanding.fields.len(), 1);
        // A step with no reply, or a reply with no step, is no reply; an
        // answer cut before the reply (a stream read up to it) is whole.
        for partial in [json!({"step": "booking.confirm"}), json!({"step": null, "reply": "Hi"}), json!({})] {
            assert_eq!(validate(&partial, &request).unwrap().reply, None, "{partial}");
        }
        let map = |value: Value| value.as_object().cloned().unwrap();
        // One step offered: a reply with no step named is that step's.
        let mut one = request.clone();
        if let Some(ask) = one.reply.as_mut() {
            ask.steps.truncate(1);
        }
        assert_eq!(
            read_reply(&map(json!({"step": null, "reply": "For which date?"})), &one).unwrap(),
            Some(FusedReply { step: "booking.ask_date".into(), text: "For which date?".into() })
        );
        assert_eq!(read_reply(&map(json!({"step": null, "reply": null})), &one).unwrap(), None);
        assert_eq!(
            read_reply(&map(json!({"step": "booking.pay", "reply": "x"})), &request).unwrap_err(),
            "unknown step `booking.pay` (choose one of `booking.ask_date`, `booking.confirm` or null)"
        );
        assert_eq!(
            read_reply(&map(json!({"step": "booking.confirm", "reply": 3})), &request).unwrap_err(),
            "`reply` must be a string or null, not a number"
        );
    }

    #[test]
    fn a_bad_step_or_reply_drops_the_reply_and_keeps_the_extraction() {
        let request = fused_request();
        let date = json!({"date": {"evidence": "the 3rd of June", "value": "2026-06-03"}});
        for (answer, problem) in [
            (
                json!({"fields": date, "step": "booking.pay", "reply": "Paid?"}),
                "unknown step `booking.pay` (choose one of `booking.ask_date`, `booking.confirm` or null)",
            ),
            (json!({"fields": date, "step": 7, "reply": "Booked?"}), "`step` must be a step id or null, not a number"),
            (
                json!({"fields": date, "step": "booking.confirm", "reply": {"text": "Booked?"}}),
                "`reply` must be a string or null, not an object",
            ),
        ] {
            // Valid, so no repair is asked for: the reply alone is dropped.
            let understanding = validate(&answer, &request).unwrap();
            assert_eq!(understanding.reply, None, "{answer}");
            assert_eq!(understanding.reply_dropped.as_deref(), Some(problem), "{answer}");
            assert_eq!(understanding.fields["date"].value, json!("2026-06-03"), "{answer}");
        }
        // The extraction's own problems still fail the answer, beside it.
        let answer = json!({"fields": {"date": {"evidence": "x", "value": 3}}, "step": "booking.pay", "reply": "x"});
        assert!(validate(&answer, &request).is_err());
    }

    #[test]
    fn json_is_found_in_prose_and_fences() {
        assert_eq!(extract_json(" {\"a\": 1} ").unwrap(), json!({"a": 1}));
        assert_eq!(extract_json("Sure!\n```json\n{\"a\": 1}\n```\nDone").unwrap(), json!({"a": 1}));
        assert_eq!(extract_json("The answer is {\"a\": {\"b\": 2}}.").unwrap(), json!({"a": {"b": 2}}));
        assert!(extract_json("{\"a\": ").unwrap_err().starts_with("the answer is not valid JSON (EOF"));
        assert_eq!(extract_json("  ").unwrap_err(), "the answer is empty");
        assert!(extract_json("} nothing {").is_err());
        assert_eq!(
            extract_json("{\"evidence\": \"two\nguests\",\n\"value\": 2}").unwrap(),
            json!({"evidence": "two guests", "value": 2}),
            "a line break inside a string"
        );
    }
}
