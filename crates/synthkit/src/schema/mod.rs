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
//! **What a schema may cost.** Validating a reply walks the schema with every `$ref`
//! followed and every branch of `anyOf`/`oneOf`/`allOf` tried, so a small schema whose
//! `$defs` chain pairs of references (`l0: anyOf[$ref l1, $ref l1]`, `l1: ...`) costs
//! 2<sup>depth</sup> checks of each reply. [`CompiledSchema::new`] therefore measures the
//! schema before compiling it: its *cost* is the number of subschemas of the tree it
//! expands to (each `$ref` replaced by its target, counted with memoisation, so measuring
//! is linear in the schema's size), and it refuses a schema whose cost is over
//! [`MAX_SCHEMA_COST`] (10,000) with [`SchemaError::TooCostly`], one nested deeper than
//! [`MAX_SCHEMA_DEPTH`] (64 subschemas, `$ref`s followed) with [`SchemaError::TooDeep`], and a
//! `$ref` that leads back to itself without going into the value (`{"$ref": "#"}`, which
//! would never end) with [`SchemaError::RefCycle`]. A reference back to an enclosing
//! schema through `properties`, `items` and the like (a tree of nodes) is allowed: it
//! goes one level into the value each time, and a value's depth is bounded (JSON is parsed
//! to at most 128 levels); it is counted once.
//!
//! **What a reply may cost.** A reference back through `items` or `properties` is counted
//! once when the schema is measured, but checking a reply walks it once per level of the
//! reply's nesting, and `allOf`/`anyOf` branches around it multiply: two branches that
//! both recurse cost 2<sup>depth</sup> for a reply nested `depth` levels. So
//! [`CompiledSchema::check`] first counts, on the reply itself, how many subschema
//! applications its check would take (every branch and every reference counted, each
//! (reference, value) pair counted once and remembered, so counting is linear in the
//! schema's size times the reply's), and refuses a reply whose check would take more than
//! [`MAX_CHECK_STEPS`] (10,000,000) with [`ModelError::SchemaMismatch`] saying so, before
//! any validation starts. A reply that passes is validated without collecting errors; only
//! when it fails, and its check costs at most [`MAX_DETAILED_CHECK_STEPS`] (100,000), is it
//! validated again for the path of the first violation (collecting the errors of every
//! failed `anyOf` branch is what costs memory). So the time and memory of a check are
//! bounded by construction, whatever the reply, and no check outlives its bound.
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

mod limits;
mod measure;
#[cfg(test)]
mod tests;

pub use limits::{
    MAX_CHECK_STEPS, MAX_DETAILED_CHECK_STEPS, MAX_SCHEMA_COST, MAX_SCHEMA_DEPTH, SchemaError,
};
use measure::{CheckCount, Ids, measure};

/// A schema compiled for validation; cheap to clone.
#[derive(Clone)]
pub struct CompiledSchema {
    value: Arc<Value>,
    /// The schema's `$id`s and anchors, for following its references when a reply's
    /// check is counted.
    ids: Arc<Ids>,
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
        let ids = Arc::new(measure(&value)?);
        #[cfg(feature = "schema-validation")]
        {
            let validator =
                jsonschema::validator_for(&value).map_err(|e| SchemaError::Invalid {
                    path: pointer(&e.schema_path().to_string()),
                    message: e.to_string(),
                })?;
            Ok(Self {
                value,
                ids,
                validator: Arc::new(validator),
            })
        }
        #[cfg(not(feature = "schema-validation"))]
        {
            shape(&value)?;
            Ok(Self { value, ids })
        }
    }

    /// The schema.
    pub fn value(&self) -> &Arc<Value> {
        &self.value
    }

    /// How many subschema applications checking `instance` takes (every branch and
    /// reference counted; see the [module documentation](self)), or `None` when it is more
    /// than [`MAX_CHECK_STEPS`]. Counting is linear in the schema's size times the
    /// instance's.
    pub fn check_steps(&self, instance: &Value) -> Option<u64> {
        CheckCount::new(&self.value, &self.ids)
            .apply(&self.value, instance, 0)
            .ok()
    }

    /// Checks `instance` against the schema: the first violation, with its path; a reply
    /// whose check would take more than [`MAX_CHECK_STEPS`] is refused unchecked. Without
    /// the feature `schema-validation`, always `Ok`.
    pub fn check(&self, instance: &Value) -> Result<(), ModelError> {
        #[cfg(feature = "schema-validation")]
        {
            let Some(steps) = self.check_steps(instance) else {
                return Err(ModelError::SchemaMismatch {
                    path: "/".to_string(),
                    message: format!(
                        "the reply is too costly to check against the output schema: its nesting through the schema's recursive references and `allOf`/`anyOf`/`oneOf` branches would take more than {MAX_CHECK_STEPS} checks, so it was not checked; ask for a flatter reply or use a schema whose recursive parts do not branch"
                    ),
                });
            };
            if self.validator.is_valid(instance) {
                return Ok(());
            }
            if steps > MAX_DETAILED_CHECK_STEPS {
                return Err(ModelError::SchemaMismatch {
                    path: "/".to_string(),
                    message: format!(
                        "the reply does not match the output schema (where is not told for a reply whose check takes over {MAX_DETAILED_CHECK_STEPS} steps)"
                    ),
                });
            }
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

/// How long checking one reply against its schema may take before the call fails with
/// [`ModelError::Other`] (the check itself is bounded by [`MAX_CHECK_STEPS`], so it ends
/// soon after on tokio's blocking pool).
pub const MAX_CHECK_TIME: std::time::Duration = std::time::Duration::from_secs(30);

/// [`CompiledSchema::check`] on tokio's blocking pool (never on the thread that polls the
/// call, so a costly check holds no runtime thread and a request that ends or times out
/// stops waiting for it), within [`MAX_CHECK_TIME`]; `value` back when it passes.
pub(crate) async fn check_off_thread(
    schema: CompiledSchema,
    value: Value,
) -> Result<Value, ModelError> {
    if !CompiledSchema::VALIDATES {
        return Ok(value);
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        // Not on tokio: nowhere else to run it.
        return schema.check(&value).map(|()| value);
    };
    let task = runtime.spawn_blocking(move || schema.check(&value).map(|()| value));
    match tokio::time::timeout(MAX_CHECK_TIME, task).await {
        Ok(Ok(checked)) => checked,
        Ok(Err(e)) => Err(ModelError::Other(format!(
            "checking the reply against the output schema failed: {e}"
        ))),
        Err(_) => Err(ModelError::Other(format!(
            "checking the reply against the output schema took over {} s: simplify the schema",
            MAX_CHECK_TIME.as_secs()
        ))),
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
