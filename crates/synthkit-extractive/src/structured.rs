//! Structured replies: JSON text for a request's schema, carrying the extracted answer.

use serde_json::{Map, Value};

/// JSON text for `schema` carrying `answer` and `satisfied`.
///
/// Object schemas get every property filled: `query_satisfied` and booleans with
/// `satisfied` (`no_information`, map_reduce's, with its opposite), strings with the answer, arrays of strings with the answer as one item,
/// enums with their first value, numbers with 0, anything else with `null`. A string schema
/// gets the answer as a JSON string; any other schema `{"answer": ...}`.
pub(super) fn structured_reply(schema: &Value, answer: &str, satisfied: bool) -> String {
    let value = match schema.get("properties").and_then(Value::as_object) {
        Some(props) => {
            let mut obj = Map::new();
            for (name, prop) in props {
                let v = if name == "query_satisfied" {
                    Value::Bool(satisfied)
                } else if name == "no_information" {
                    // map_reduce's record: nothing found is the opposite of satisfied.
                    Value::Bool(!satisfied)
                } else if name == "answer" {
                    Value::String(answer.to_string())
                } else {
                    fill(prop, answer, satisfied)
                };
                obj.insert(name.clone(), v);
            }
            Value::Object(obj)
        }
        None if primary_type(schema) == Some("string") => Value::String(answer.to_string()),
        None => {
            let mut obj = Map::new();
            obj.insert("answer".to_string(), Value::String(answer.to_string()));
            Value::Object(obj)
        }
    };
    value.to_string()
}

/// A best-effort value for one property schema.
fn fill(prop: &Value, answer: &str, satisfied: bool) -> Value {
    if let Some(first) = prop
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(c) = prop.get("const") {
        return c.clone();
    }
    match primary_type(prop) {
        Some("string") => Value::String(answer.to_string()),
        Some("boolean") => Value::Bool(satisfied),
        Some("integer" | "number") => Value::from(0),
        Some("array") => {
            let item_is_string = prop
                .get("items")
                .is_some_and(|items| primary_type(items) == Some("string"));
            if item_is_string && !answer.is_empty() {
                Value::Array(vec![Value::String(answer.to_string())])
            } else {
                Value::Array(Vec::new())
            }
        }
        Some("object") => Value::Object(Map::new()),
        _ => Value::Null,
    }
}

/// The schema's type: `"type": "x"`, or the first non-null entry of `"type": [...]`.
fn primary_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(s) => Some(s.as_str()),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        _ => None,
    }
}
