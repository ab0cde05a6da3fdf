//! Output schemas: checking a JSON schema when it is given, and checking structured replies
//! against it.
//!
//! A schema is compiled once ([`CompiledSchema::new`]); a bad one is refused with
//! [`SchemaError`] before any call is made. Every structured reply is parsed as JSON and
//! then validated; a reply that breaks the schema is a [`ModelError::SchemaMismatch`]
//! naming the JSON path of the first violation (`/answer`, `/sources/2`, or `/` for the
//! whole value).
//!
//! Validation needs the cargo feature `schema-validation` (the `jsonschema` crate; the CLI,
//! the service and the Python bindings turn it on). Without it a schema is only checked to
//! be a JSON object (or `true`/`false`) whose `type`, if any, names JSON types, and a reply
//! is only parsed as JSON: [`CompiledSchema::check`] accepts any value, so a reply that
//! breaks the schema reaches you as the model wrote it and `Response::parse` is the first
//! to notice. [`CompiledSchema::VALIDATES`] says which build you have.
//!
//! ```
//! use serde_json::json;
//! use synthkit::schema::CompiledSchema;
//!
//! let schema = CompiledSchema::new(json!({
//!     "type": "object",
//!     "properties": {"answer": {"type": "string"}},
//!     "required": ["answer"]
//! }))?;
//! assert!(schema.check(&json!({"answer": "yes"})).is_ok());
//! if CompiledSchema::VALIDATES {
//!     let err = schema.check(&json!({"answer": 3})).unwrap_err();
//!     assert!(err.to_string().contains("/answer"), "{err}");
//! }
//! assert!(CompiledSchema::new(json!({"type": 5})).is_err());
//! # Ok::<(), synthkit::schema::SchemaError>(())
//! ```

use std::sync::Arc;

use serde_json::Value;

use crate::model::ModelError;

/// A JSON schema that is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema is not a valid JSON schema.
    #[error(
        "the output schema is not a valid JSON schema ({message} at {path}): fix the schema, or leave it out for a text answer"
    )]
    Invalid {
        /// Where in the schema (a JSON pointer).
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A schema compiled for validation; cheap to clone.
#[derive(Clone)]
pub struct CompiledSchema {
    value: Arc<Value>,
    #[cfg(feature = "schema-validation")]
    validator: Arc<jsonschema::Validator>,
}

debug_fields!(CompiledSchema { schema: value, .. });

impl CompiledSchema {
    /// Whether replies are validated against the schema: true with the cargo feature
    /// `schema-validation`; without it [`check`](Self::check) accepts any value.
    pub const VALIDATES: bool = cfg!(feature = "schema-validation");

    /// Compiles `schema`; fails when it is not a valid JSON schema (without the feature
    /// `schema-validation`: when it is not an object or boolean, or its `type` names no
    /// JSON type).
    pub fn new(schema: impl Into<Arc<Value>>) -> Result<Self, SchemaError> {
        let value: Arc<Value> = schema.into();
        #[cfg(feature = "schema-validation")]
        {
            let validator =
                jsonschema::validator_for(&value).map_err(|e| SchemaError::Invalid {
                    path: pointer(&e.schema_path().to_string()),
                    message: e.to_string(),
                })?;
            Ok(Self {
                value,
                validator: Arc::new(validator),
            })
        }
        #[cfg(not(feature = "schema-validation"))]
        {
            shape(&value)?;
            Ok(Self { value })
        }
    }

    /// The schema.
    pub fn value(&self) -> &Arc<Value> {
        &self.value
    }

    /// Checks `instance` against the schema: the first violation, with its path. Without
    /// the feature `schema-validation`, always `Ok`.
    pub fn check(&self, instance: &Value) -> Result<(), ModelError> {
        #[cfg(feature = "schema-validation")]
        {
            match self.validator.validate(instance) {
                Ok(()) => Ok(()),
                Err(e) => Err(ModelError::SchemaMismatch {
                    path: pointer(&e.instance_path().to_string()),
                    message: e.to_string(),
                }),
            }
        }
        #[cfg(not(feature = "schema-validation"))]
        {
            let _ = instance;
            Ok(())
        }
    }
}

/// The checks made without `jsonschema`: an object or a boolean, whose `type` (if any) is
/// a JSON type name or a list of them.
#[cfg(not(feature = "schema-validation"))]
fn shape(schema: &Value) -> Result<(), SchemaError> {
    const TYPES: &[&str] = &[
        "null", "boolean", "object", "array", "number", "integer", "string",
    ];
    let invalid = |path: &str, message: &str| SchemaError::Invalid {
        path: path.to_string(),
        message: message.to_string(),
    };
    let object = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(object) => object,
        _ => return Err(invalid("/", "a schema must be a JSON object or a boolean")),
    };
    let named = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
    match object.get("type") {
        None => Ok(()),
        Some(Value::Array(types)) if types.iter().all(named) => Ok(()),
        Some(t) if named(t) => Ok(()),
        Some(_) => Err(invalid(
            "/type",
            "`type` must name JSON types (string, object, ...)",
        )),
    }
}

/// A JSON pointer for messages: `/` for the root.
#[cfg(feature = "schema-validation")]
fn pointer(p: &str) -> String {
    if p.is_empty() {
        "/".to_string()
    } else {
        p.to_string()
    }
}

/// The schemas of one synthesis, compiled on first use (by identity, then by value).
#[derive(Debug, Default)]
pub(crate) struct SchemaCache {
    compiled: std::sync::Mutex<Vec<CompiledSchema>>,
}

impl SchemaCache {
    /// `schema` compiled, from the cache when it was seen before.
    pub(crate) fn get(&self, schema: &Arc<Value>) -> Result<CompiledSchema, ModelError> {
        let mut compiled = self
            .compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = compiled
            .iter()
            .find(|c| Arc::ptr_eq(&c.value, schema) || *c.value == **schema)
        {
            return Ok(c.clone());
        }
        let c = CompiledSchema::new(Arc::clone(schema))
            .map_err(|e| ModelError::Other(e.to_string()))?;
        // A handful of schemas per synthesis at most (the output's, the filter's).
        if compiled.len() < 16 {
            compiled.push(c.clone());
        }
        Ok(c)
    }
}
