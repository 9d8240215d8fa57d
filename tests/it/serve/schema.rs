//! A JSON Schema check for the subset `GET /openapi.json` uses (`$ref`
//! into the document, `allOf`, `type`, `const`, `enum`, `required`,
//! `properties`, `additionalProperties: false`, `items`, `minimum`):
//! enough to hold every answer of the server to its documented schema. A
//! keyword outside the subset is itself a problem, so the document cannot
//! grow a rule this check would silently pass.

use serde_json::Value;

/// Keywords that say nothing to check.
const NOTES: [&str; 2] = ["description", "default"];

/// Every way `value` breaks `schema`, each with the JSON path it is at;
/// `$ref`s are read in `document`.
pub fn problems(document: &Value, schema: &Value, value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    check(document, schema, value, "$", &mut found);
    found
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(value: &Value, wanted: &str) -> bool {
    let actual = type_name(value);
    actual == wanted || (wanted == "number" && actual == "integer")
}

fn check(document: &Value, schema: &Value, value: &Value, at: &str, found: &mut Vec<String>) {
    let Some(rules) = schema.as_object() else {
        found.push(format!("{at}: the schema is not an object: {schema}"));
        return;
    };
    for (keyword, rule) in rules {
        match keyword.as_str() {
            "$ref" => match rule.as_str().and_then(|reference| reference.strip_prefix('#')) {
                Some(pointer) => match document.pointer(pointer) {
                    Some(target) => check(document, target, value, at, found),
                    None => found.push(format!("{at}: `$ref` {rule} names nothing in the document")),
                },
                None => found.push(format!("{at}: `$ref` {rule} is not into the document")),
            },
            "allOf" => {
                for part in rule.as_array().into_iter().flatten() {
                    check(document, part, value, at, found);
                }
            }
            "type" => {
                let wanted: Vec<&str> = match rule {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(several) => several.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                if !wanted.iter().any(|wanted| is_type(value, wanted)) {
                    found.push(format!("{at}: {} where the schema wants {rule}", type_name(value)));
                }
            }
            "const" if value != rule => found.push(format!("{at}: {value} is not {rule}")),
            "enum" if !rule.as_array().is_some_and(|allowed| allowed.contains(value)) => {
                found.push(format!("{at}: {value} is not one of {rule}"));
            }
            "required" => {
                for name in rule.as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if value.as_object().is_some_and(|object| !object.contains_key(name)) {
                        found.push(format!("{at}: no `{name}`"));
                    }
                }
            }
            "properties" => {
                if let (Some(properties), Some(object)) = (rule.as_object(), value.as_object()) {
                    for (name, property) in properties {
                        if let Some(member) = object.get(name) {
                            check(document, property, member, &format!("{at}.{name}"), found);
                        }
                    }
                }
            }
            "additionalProperties" => match (rule, value.as_object()) {
                (Value::Bool(false), Some(object)) => {
                    let declared = rules.get("properties").and_then(Value::as_object);
                    for name in
                        object.keys().filter(|name| !declared.is_some_and(|declared| declared.contains_key(*name)))
                    {
                        found.push(format!("{at}: `{name}` is not a declared property"));
                    }
                }
                (Value::Bool(_), _) => {}
                _ => found.push(format!("{at}: `additionalProperties` other than true or false is not checked")),
            },
            "items" => {
                for (index, item) in value.as_array().into_iter().flatten().enumerate() {
                    check(document, rule, item, &format!("{at}[{index}]"), found);
                }
            }
            "minimum" => {
                if let (Some(minimum), Some(number)) = (rule.as_f64(), value.as_f64())
                    && number < minimum
                {
                    found.push(format!("{at}: {number} is under the minimum {minimum}"));
                }
            }
            "const" | "enum" => {}
            other if NOTES.contains(&other) => {}
            other => found.push(format!("{at}: the schema keyword `{other}` is not one this check knows")),
        }
    }
}

#[test]
fn the_check_finds_what_each_keyword_forbids_and_passes_what_it_allows() {
    let document = serde_json::json!({ "components": { "schemas": {
        "Error": { "type": "object", "required": ["error"], "additionalProperties": false,
            "properties": { "error": { "type": "object", "required": ["code"],
                "properties": { "code": { "type": "string" }, "n": { "type": ["integer", "null"], "minimum": 0 } } } } }
    } } });
    let schema = serde_json::json!({ "allOf": [
        { "$ref": "#/components/schemas/Error" },
        { "properties": { "error": { "properties": { "code": { "enum": ["a", "b"] } } } } }
    ] });
    let good = serde_json::json!({ "error": { "code": "a", "n": null } });
    assert_eq!(problems(&document, &schema, &good), Vec::<String>::new());
    for (bad, says) in [
        (serde_json::json!({ "error": { "code": "c" } }), "is not one of"),
        (serde_json::json!({ "error": { "code": 1 } }), "where the schema wants"),
        (serde_json::json!({ "error": {} }), "no `code`"),
        (serde_json::json!({ "error": { "code": "a" }, "extra": 1 }), "`extra` is not a declared property"),
        (serde_json::json!({ "error": { "code": "a", "n": -1 } }), "under the minimum"),
    ] {
        let found = problems(&document, &schema, &bad);
        assert!(found.iter().any(|problem| problem.contains(says)), "{bad}: {found:?}");
    }
    let unknown = problems(&document, &serde_json::json!({ "pattern": "x" }), &good);
    assert!(unknown.iter().any(|problem| problem.contains("`pattern`")), "{unknown:?}");
}
