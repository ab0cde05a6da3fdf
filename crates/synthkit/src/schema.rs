//! Output schemas: checking a JSON schema when it is given, and checking structured replies
//! against it.
//!
//! A schema is compiled once ([`CompiledSchema::new`]); a bad one is refused with
//! [`SchemaError`] before any call is made. Every structured reply is parsed as JSON and
//! then validated; a reply that breaks the schema is a [`ModelError::SchemaMismatch`]
//! naming the JSON path of the first violation (`/answer`, `/sources/2`, or `/` for the
//! whole value).
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
//! let err = schema.check(&json!({"answer": 3})).unwrap_err();
//! assert!(err.to_string().contains("/answer"), "{err}");
//! assert!(CompiledSchema::new(json!({"type": 5})).is_err());
//! # Ok::<(), synthkit::schema::SchemaError>(())
//! ```

use std::fmt;
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
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("schema", &self.value)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles `schema`; fails when it is not a valid JSON schema.
    pub fn new(schema: impl Into<Arc<Value>>) -> Result<Self, SchemaError> {
        let value: Arc<Value> = schema.into();
        let validator = jsonschema::validator_for(&value).map_err(|e| SchemaError::Invalid {
            path: pointer(&e.schema_path().to_string()),
            message: e.to_string(),
        })?;
        Ok(Self {
            value,
            validator: Arc::new(validator),
        })
    }

    /// The schema.
    pub fn value(&self) -> &Arc<Value> {
        &self.value
    }

    /// Checks `instance` against the schema: the first violation, with its path.
    pub fn check(&self, instance: &Value) -> Result<(), ModelError> {
        match self.validator.validate(instance) {
            Ok(()) => Ok(()),
            Err(e) => Err(ModelError::SchemaMismatch {
                path: pointer(&e.instance_path().to_string()),
                message: e.to_string(),
            }),
        }
    }
}

/// A JSON pointer for messages: `/` for the root.
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
