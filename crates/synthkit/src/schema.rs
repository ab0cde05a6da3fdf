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

/// The most a schema may cost: the subschemas of the tree it expands to, `$ref`s
/// followed and every `anyOf`/`oneOf`/`allOf` branch counted (see the
/// [module documentation](self)).
pub const MAX_SCHEMA_COST: u64 = 10_000;

/// The deepest a schema may nest, in subschemas, `$ref`s followed.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// The most subschema applications checking one reply may take (see the
/// [module documentation](self)): a reply whose check would take more is refused before
/// the check starts.
pub const MAX_CHECK_STEPS: u64 = 10_000_000;

/// A failed reply is checked again for the path of its first violation only when its
/// check takes at most this many subschema applications; a costlier one is reported at
/// `/` without the detail (collecting the detail holds every failed branch's errors).
pub const MAX_DETAILED_CHECK_STEPS: u64 = 100_000;

/// How deep the count of a reply's check may recurse (subschema applications inside one
/// another); a deeper one is refused as too costly (it would also be too deep to check on
/// a thread's stack).
const MAX_CHECK_NESTING: usize = 2048;

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
    /// The schema expands to more than [`MAX_SCHEMA_COST`] subschemas.
    #[error(
        "the output schema is too costly to check: with its `$ref`s followed and every `anyOf`/`oneOf`/`allOf` branch counted it expands to more than {limit} subschemas (the limit): use fewer alternatives or fewer references to schemas that branch"
    )]
    TooCostly {
        /// The limit, [`MAX_SCHEMA_COST`].
        limit: u64,
    },
    /// The schema nests deeper than [`MAX_SCHEMA_DEPTH`].
    #[error(
        "the output schema nests deeper than {limit} subschemas (the limit, `$ref`s followed) at {path}: flatten it"
    )]
    TooDeep {
        /// Where the limit was passed (a JSON pointer).
        path: String,
        /// The limit, [`MAX_SCHEMA_DEPTH`].
        limit: usize,
    },
    /// A `$ref` leads back to a schema it is part of without going into the value.
    #[error(
        "the output schema's `$ref` at {path} leads back to itself without going into the value (through `properties`, `items`, ...), so checking a reply would never end: remove the loop"
    )]
    RefCycle {
        /// Where the `$ref` is (a JSON pointer).
        path: String,
    },
}

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

/// Measures `schema` ([module documentation](self)): its cost and depth within the limits,
/// and no `$ref` loop that stays on the same value; its ids and anchors.
fn measure(schema: &Value) -> Result<Ids, SchemaError> {
    let mut ids = Ids::default();
    ids.collect(schema, String::new(), 0);
    let mut m = Measure {
        root: schema,
        ids: &ids,
        memo: std::collections::HashMap::new(),
        open: std::collections::HashMap::new(),
        descents: 0,
    };
    m.open.insert(String::new(), 0);
    m.schema(schema, "", 0)?;
    Ok(ids)
}

/// Keywords whose subschemas apply to the value's parts (properties, items): a `$ref`
/// loop through one of them goes one level into the value each time.
const DESCENDING: &[&str] = &[
    "items",
    "prefixItems",
    "additionalItems",
    "additionalProperties",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "propertyNames",
];

/// Keywords whose value is one subschema or a list of them, on the same value.
const SAME_VALUE: &[&str] = &[
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];

/// A schema's `$id`, `$anchor` and `$dynamicAnchor` values with the pointer of their
/// schema (anchors as `#name`), to resolve its references.
#[derive(Debug, Default)]
struct Ids(Vec<(String, String)>);

impl Ids {
    /// Collects the ids and anchors of `v` (at `path`), to `MAX_SCHEMA_DEPTH` levels
    /// (deeper schemas are refused by the walk).
    fn collect(&mut self, v: &Value, path: String, depth: usize) {
        if depth > MAX_SCHEMA_DEPTH * 2 {
            return;
        }
        match v {
            Value::Object(o) => {
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = o.get(key) {
                        self.0
                            .push((id.trim_end_matches('#').to_string(), path.clone()));
                    }
                }
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(Value::String(a)) = o.get(key) {
                        self.0.push((format!("#{a}"), path.clone()));
                    }
                }
                for (k, child) in o {
                    let token = k.replace('~', "~0").replace('/', "~1");
                    self.collect(child, format!("{path}/{token}"), depth + 1);
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    self.collect(child, format!("{path}/{i}"), depth + 1);
                }
            }
            _ => {}
        }
    }

    /// The JSON pointer (from the root) of the reference `r`: `#`, `#/json/pointer`,
    /// `#anchor`, or an `$id` (with a pointer after it); `None` when it names nothing here.
    fn resolve(&self, r: &str) -> Option<String> {
        let r = percent_decode(r);
        let (base, fragment) = match r.split_once('#') {
            Some((base, fragment)) => (base, fragment),
            None => (r.as_str(), ""),
        };
        let start = if base.is_empty() {
            String::new()
        } else {
            let found = self.0.iter().find(|(id, _)| {
                id == base || id.ends_with(&format!("/{base}")) || base.ends_with(&format!("/{id}"))
            })?;
            found.1.clone()
        };
        if fragment.is_empty() {
            Some(start)
        } else if fragment.starts_with('/') {
            Some(format!("{start}{fragment}"))
        } else {
            let anchor = format!("#{fragment}");
            self.0
                .iter()
                .find(|(id, p)| *id == anchor && p.starts_with(&start))
                .map(|(_, p)| p.clone())
        }
    }
}

/// The state of one [`measure`].
struct Measure<'a> {
    root: &'a Value,
    ids: &'a Ids,
    /// The cost of each `$ref` target measured so far, by pointer.
    memo: std::collections::HashMap<String, u64>,
    /// The targets being measured (a `$ref` to one of them is a loop), with the count of
    /// descents into the value when it was entered.
    open: std::collections::HashMap<String, u64>,
    /// Keywords that go into the value (`DESCENDING`, `properties`) on the current path.
    descents: u64,
}

impl Measure<'_> {
    /// The cost of the subschema `v` at `path`, `depth` subschemas deep.
    fn schema(&mut self, v: &Value, path: &str, depth: usize) -> Result<u64, SchemaError> {
        let object = match v {
            Value::Object(o) => o,
            Value::Bool(_) => return Ok(1),
            // Not a schema: compiling it fails.
            _ => return Ok(0),
        };
        if depth > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep {
                path: pointer_or_root(path),
                limit: MAX_SCHEMA_DEPTH,
            });
        }
        let mut cost: u64 = 1;
        for (key, child) in object {
            let token = key.replace('~', "~0").replace('/', "~1");
            let at = format!("{path}/{token}");
            let add = match key.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => match child {
                    Value::String(r) => self.reference(r, &at, depth)?,
                    _ => 0,
                },
                "properties" | "patternProperties" | "dependentSchemas" | "dependencies" => {
                    let descends = key != "dependentSchemas" && key != "dependencies";
                    self.descents += u64::from(descends);
                    let mut sum = 0u64;
                    if let Value::Object(map) = child {
                        for (name, sub) in map {
                            let token = name.replace('~', "~0").replace('/', "~1");
                            sum = sum.saturating_add(self.schema(
                                sub,
                                &format!("{at}/{token}"),
                                depth + 1,
                            )?);
                            if sum > MAX_SCHEMA_COST {
                                break;
                            }
                        }
                    }
                    self.descents -= u64::from(descends);
                    sum
                }
                k if DESCENDING.contains(&k) => {
                    self.descents += 1;
                    let sum = self.one_or_many(child, &at, depth);
                    self.descents -= 1;
                    sum?
                }
                k if SAME_VALUE.contains(&k) => self.one_or_many(child, &at, depth)?,
                // Data (`enum`, `const`, `default`, ...), annotations, and `$defs`, whose
                // schemas count where they are referred to.
                _ => 0,
            };
            cost = cost.saturating_add(add);
            if cost > MAX_SCHEMA_COST {
                return Err(SchemaError::TooCostly {
                    limit: MAX_SCHEMA_COST,
                });
            }
        }
        Ok(cost)
    }

    /// The cost of `v`, one subschema or a list of them.
    fn one_or_many(&mut self, v: &Value, path: &str, depth: usize) -> Result<u64, SchemaError> {
        match v {
            Value::Array(items) => {
                let mut sum = 0u64;
                for (i, item) in items.iter().enumerate() {
                    sum =
                        sum.saturating_add(self.schema(item, &format!("{path}/{i}"), depth + 1)?);
                    if sum > MAX_SCHEMA_COST {
                        return Err(SchemaError::TooCostly {
                            limit: MAX_SCHEMA_COST,
                        });
                    }
                }
                Ok(sum)
            }
            other => self.schema(other, path, depth + 1),
        }
    }

    /// The cost of the target of the reference `r` (at `path`).
    fn reference(&mut self, r: &str, path: &str, depth: usize) -> Result<u64, SchemaError> {
        let Some(target) = self.ids.resolve(r) else {
            return Err(SchemaError::Invalid {
                path: path.to_string(),
                message: format!(
                    "`$ref` {r:?} is not in the schema; an output schema must be self-contained (`#/$defs/...`)"
                ),
            });
        };
        if let Some(&cost) = self.memo.get(&target) {
            return Ok(cost);
        }
        if let Some(&entered) = self.open.get(&target) {
            if entered == self.descents {
                return Err(SchemaError::RefCycle {
                    path: path.to_string(),
                });
            }
            // A loop through the value's parts: bounded by the value's depth.
            return Ok(1);
        }
        let root = self.root;
        let Some(v) = root.pointer(&target) else {
            return Err(SchemaError::Invalid {
                path: path.to_string(),
                message: format!("`$ref` {r:?} points to nothing in the schema"),
            });
        };
        self.open.insert(target.clone(), self.descents);
        let cost = self.schema(v, &target, depth + 1);
        self.open.remove(&target);
        let cost = cost?;
        self.memo.insert(target, cost);
        Ok(cost)
    }
}

/// The count of one reply's check ([`CompiledSchema::check_steps`]): how many subschema
/// applications validating the reply takes, every branch tried and every reference
/// followed, the count of each (reference target, value) pair remembered so that a
/// branching recursion is counted in time linear in the pairs, not in the paths.
struct CheckCount<'a> {
    root: &'a Value,
    ids: &'a Ids,
    /// Reference targets resolved so far, by reference text.
    targets: std::collections::HashMap<&'a str, Vec<&'a Value>>,
    /// The count of each (target, value) pair, by their addresses.
    memo: std::collections::HashMap<(usize, usize), u64>,
    /// Subschemas visited while counting (the work of counting itself).
    visits: u64,
}

/// Why a count stopped: over [`MAX_CHECK_STEPS`] or [`MAX_CHECK_NESTING`].
struct TooCostly;

/// A property name, as the value `propertyNames` is applied to (counted once per name).
static PROPERTY_NAME: Value = Value::String(String::new());

impl<'a> CheckCount<'a> {
    fn new(root: &'a Value, ids: &'a Ids) -> Self {
        Self {
            root,
            ids,
            targets: std::collections::HashMap::new(),
            memo: std::collections::HashMap::new(),
            visits: 0,
        }
    }

    /// The applications of subschema `s` to `v` (`nesting` applications deep).
    fn apply(&mut self, s: &'a Value, v: &'a Value, nesting: usize) -> Result<u64, TooCostly> {
        let object = match s {
            Value::Object(o) => o,
            Value::Bool(_) => return Ok(1),
            _ => return Ok(0),
        };
        if nesting > MAX_CHECK_NESTING {
            return Err(TooCostly);
        }
        self.visits += 1;
        let inner = nesting + 1;
        let mut steps: u64 = 1;
        let add = |steps: &mut u64, n: u64| {
            *steps = steps.saturating_add(n);
            if *steps > MAX_CHECK_STEPS {
                Err(TooCostly)
            } else {
                Ok(())
            }
        };
        for (key, child) in object {
            match key.as_str() {
                "$ref" | "$recursiveRef" | "$dynamicRef" => {
                    if let Value::String(r) = child {
                        for target in self.targets_of(r, key == "$dynamicRef") {
                            let n = self.reference(target, v, inner)?;
                            add(&mut steps, n)?;
                        }
                    }
                }
                "allOf" | "anyOf" | "oneOf" => {
                    for sub in child.as_array().into_iter().flatten() {
                        let n = self.apply(sub, v, inner)?;
                        add(&mut steps, n)?;
                    }
                }
                "not" | "if" | "then" | "else" => {
                    let n = self.apply(child, v, inner)?;
                    add(&mut steps, n)?;
                }
                "dependentSchemas" | "dependencies" => {
                    for sub in child.as_object().into_iter().flat_map(|m| m.values()) {
                        let n = self.apply(sub, v, inner)?;
                        add(&mut steps, n)?;
                    }
                }
                "properties" => {
                    if let (Value::Object(props), Value::Object(value)) = (child, v) {
                        for (name, sub) in props {
                            if let Some(part) = value.get(name) {
                                let n = self.apply(sub, part, inner)?;
                                add(&mut steps, n)?;
                            }
                        }
                    }
                }
                "patternProperties" => {
                    if let (Value::Object(patterns), Value::Object(value)) = (child, v) {
                        for sub in patterns.values() {
                            for part in value.values() {
                                let n = self.apply(sub, part, inner)?;
                                add(&mut steps, n)?;
                            }
                        }
                    }
                }
                "additionalProperties" | "unevaluatedProperties" => {
                    for part in v.as_object().into_iter().flat_map(|m| m.values()) {
                        let n = self.apply(child, part, inner)?;
                        add(&mut steps, n)?;
                    }
                }
                "propertyNames" => {
                    let names = v.as_object().map_or(0, serde_json::Map::len) as u64;
                    if names > 0 {
                        let n = self.apply(child, &PROPERTY_NAME, inner)?;
                        add(&mut steps, n.saturating_mul(names))?;
                    }
                }
                "items" | "prefixItems" => {
                    if let Value::Array(items) = v {
                        match child {
                            // A list of schemas: one per position.
                            Value::Array(subs) => {
                                for (sub, item) in subs.iter().zip(items) {
                                    let n = self.apply(sub, item, inner)?;
                                    add(&mut steps, n)?;
                                }
                            }
                            sub => {
                                for item in items {
                                    let n = self.apply(sub, item, inner)?;
                                    add(&mut steps, n)?;
                                }
                            }
                        }
                    }
                }
                "additionalItems" | "unevaluatedItems" | "contains" => {
                    for item in v.as_array().into_iter().flatten() {
                        let n = self.apply(child, item, inner)?;
                        add(&mut steps, n)?;
                    }
                }
                _ => {}
            }
        }
        // Which parts were evaluated is found by applying the other keywords again.
        if object.contains_key("unevaluatedProperties") || object.contains_key("unevaluatedItems") {
            let again = steps;
            add(&mut steps, again)?;
        }
        Ok(steps)
    }

    /// The applications of the reference target `target` to `v`, counted once per pair.
    fn reference(
        &mut self,
        target: &'a Value,
        v: &'a Value,
        nesting: usize,
    ) -> Result<u64, TooCostly> {
        let key = (
            std::ptr::from_ref(target) as usize,
            std::ptr::from_ref(v) as usize,
        );
        if let Some(&n) = self.memo.get(&key) {
            return Ok(n);
        }
        let n = self.apply(target, v, nesting)?;
        self.memo.insert(key, n);
        Ok(n)
    }

    /// The schemas the reference `r` may lead to: its target, and for a `$dynamicRef`
    /// every schema with the anchor it names (the dynamic scope picks one of them).
    fn targets_of(&mut self, r: &'a str, dynamic: bool) -> Vec<&'a Value> {
        if let Some(t) = self.targets.get(r) {
            return t.clone();
        }
        let root = self.root;
        let mut found: Vec<&'a Value> = self
            .ids
            .resolve(r)
            .and_then(|p| root.pointer(&p))
            .into_iter()
            .collect();
        if dynamic && let Some((_, fragment)) = r.split_once('#') {
            let anchor = format!("#{fragment}");
            for (_, p) in self.ids.0.iter().filter(|(id, _)| *id == anchor) {
                if let Some(t) = root.pointer(p)
                    && !found.iter().any(|f| std::ptr::eq(*f, t))
                {
                    found.push(t);
                }
            }
        }
        self.targets.insert(r, found.clone());
        found
    }
}

/// `r` with its `%XX` escapes decoded (as JSON pointers in URI fragments are written).
fn percent_decode(r: &str) -> String {
    if !r.contains('%') {
        return r.to_string();
    }
    let bytes = r.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes.get(i), bytes.get(i + 1), bytes.get(i + 2)) {
            (Some(b'%'), Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let v = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 3;
            }
            (Some(&b), _, _) => {
                out.push(b);
                i += 1;
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `/` for the root's empty pointer.
fn pointer_or_root(p: &str) -> String {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// `l0 -> anyOf[$ref l1, $ref l1] -> ... -> l{depth} -> integer`: 2^depth checks.
    fn doubling(depth: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..depth {
            let next = format!("#/$defs/l{}", i + 1);
            defs.insert(
                format!("l{i}"),
                json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(format!("l{depth}"), json!({"type": "integer"}));
        json!({"$defs": defs, "$ref": "#/$defs/l0"})
    }

    #[test]
    fn a_schema_that_doubles_at_each_reference_is_refused_quickly() {
        let start = std::time::Instant::now();
        let e = CompiledSchema::new(doubling(22)).unwrap_err();
        assert_eq!(
            e,
            SchemaError::TooCostly {
                limit: MAX_SCHEMA_COST
            }
        );
        assert!(e.to_string().contains("10000"), "{e}");
        // Escaped pointers and anchors are followed too.
        let mut escaped = doubling(30);
        escaped["$ref"] = json!("#/%24defs/l0");
        assert!(matches!(
            CompiledSchema::new(escaped),
            Err(SchemaError::TooCostly { .. })
        ));
        let anchored = json!({"$defs": {
            "a": {"$anchor": "a", "anyOf": [{"$ref": "#b"}, {"$ref": "#b"}, {"$ref": "#b"}]},
            "b": {"$anchor": "b", "anyOf": [{"$ref": "#c"}, {"$ref": "#c"}, {"$ref": "#c"}]},
            "c": {"$anchor": "c", "anyOf": [{"$ref": "#d"}, {"$ref": "#d"}, {"$ref": "#d"}]},
            "d": {"$anchor": "d", "anyOf": [{"$ref": "#e"}, {"$ref": "#e"}, {"$ref": "#e"}]},
            "e": {"$anchor": "e", "anyOf": [{"$ref": "#f"}, {"$ref": "#f"}, {"$ref": "#f"}]},
            "f": {"$anchor": "f", "anyOf": [{"$ref": "#g"}, {"$ref": "#g"}, {"$ref": "#g"}]},
            "g": {"$anchor": "g", "anyOf": [{"$ref": "#h"}, {"$ref": "#h"}, {"$ref": "#h"}]},
            "h": {"$anchor": "h", "anyOf": [{"$ref": "#i"}, {"$ref": "#i"}, {"$ref": "#i"}]},
            "i": {"$anchor": "i", "anyOf": [{"$ref": "#j"}, {"$ref": "#j"}, {"$ref": "#j"}]},
            "j": {"$anchor": "j", "type": "integer"}},
            "$ref": "#a"});
        assert!(matches!(
            CompiledSchema::new(anchored),
            Err(SchemaError::TooCostly { .. })
        ));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        // A chain within the limit compiles, and checks.
        let ok = CompiledSchema::new(doubling(10)).unwrap();
        assert!(ok.check(&json!(3)).is_ok());
    }

    #[test]
    fn loops_that_stay_on_the_value_are_refused_and_trees_of_nodes_are_not() {
        for looping in [
            json!({"$ref": "#"}),
            json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]}),
            json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}},
                   "$ref": "#/$defs/a"}),
        ] {
            let e = CompiledSchema::new(looping.clone()).unwrap_err();
            assert!(matches!(e, SchemaError::RefCycle { .. }), "{looping}: {e}");
        }
        let tree = json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}}}});
        let tree = CompiledSchema::new(tree).unwrap();
        assert!(
            tree.check(&json!({"name": "a", "children": [{"name": "b", "children": []}]}))
                .is_ok()
        );
    }

    /// The issue's 152-byte schema: `n` is `allOf` of two copies of "an array whose items
    /// are `n`", so checking a reply nested `depth` arrays deep walks 2^depth paths.
    fn branching_recursion(combinator: &str) -> Value {
        let branch = json!({"type": "array", "items": {"$ref": "#/$defs/n"}});
        json!({"$defs": {"n": {combinator: [branch.clone(), branch]}}, "$ref": "#/$defs/n"})
    }

    fn nested_arrays(depth: usize) -> Value {
        let mut v = json!([]);
        for _ in 0..depth {
            v = json!([v]);
        }
        v
    }

    #[test]
    fn a_branching_recursive_schema_is_bounded_by_the_reply_it_checks() {
        let schema = branching_recursion("allOf");
        assert!(schema.to_string().len() < 200);
        let compiled = CompiledSchema::new(schema).unwrap();
        // Counted, not walked: the count of a shallow reply is exact and small ...
        let shallow = compiled.check_steps(&nested_arrays(3)).unwrap();
        assert!(shallow < 100, "{shallow}");
        assert!(compiled.check(&nested_arrays(3)).is_ok());
        // ... it doubles with each level ...
        let a = compiled.check_steps(&nested_arrays(10)).unwrap();
        let b = compiled.check_steps(&nested_arrays(11)).unwrap();
        assert!(b >= 2 * a, "{a} then {b}");
        // ... and a reply whose check would pass the bound is refused unchecked, for
        // every depth up to the most JSON nests.
        for depth in [28, 40, 127] {
            assert_eq!(compiled.check_steps(&nested_arrays(depth)), None);
            let e = compiled.check(&nested_arrays(depth)).unwrap_err();
            assert!(e.to_string().contains("too costly to check"), "{e}");
        }
    }

    #[test]
    fn counting_a_reply_is_linear_in_the_pairs_it_meets() {
        // The count reaches each (reference, value) pair once: counting a reply nested
        // 100 levels deep visits about 100 pairs, though its paths are 2^100.
        let schema = branching_recursion("anyOf");
        let compiled = CompiledSchema::new(schema).unwrap();
        let reply = nested_arrays(100);
        let mut count = CheckCount::new(&compiled.value, &compiled.ids);
        let r = count.apply(&compiled.value, &reply, 0);
        assert!(r.is_err());
        assert!(count.memo.len() <= 101, "{}", count.memo.len());
        // A handful of subschemas per level, not 2^level.
        assert!(count.visits <= 10 * 101, "{}", count.visits);
    }

    #[test]
    fn wide_replies_are_counted_per_item_and_a_failure_names_its_path_when_cheap() {
        let schema = CompiledSchema::new(json!({
            "type": "array",
            "items": {"type": "object", "properties": {"a": {"type": "integer"}}}
        }))
        .unwrap();
        let items: Vec<Value> = (0..1000).map(|i| json!({"a": i})).collect();
        let steps = schema.check_steps(&json!(items)).unwrap();
        assert!((2000..=4000).contains(&steps), "{steps}");
        if CompiledSchema::VALIDATES {
            let e = schema.check(&json!([{"a": 1}, {"a": "x"}])).unwrap_err();
            assert!(e.to_string().contains("/1/a"), "{e}");
            // A failing reply too costly for the detail is still refused, at `/`.
            let mut many: Vec<Value> = (0..60_000).map(|i| json!({"a": i})).collect();
            many.push(json!({"a": "x"}));
            let e = schema.check(&json!(many)).unwrap_err();
            assert!(
                matches!(&e, ModelError::SchemaMismatch { path, .. } if path == "/"),
                "{e}"
            );
        }
    }

    #[test]
    fn deep_and_wide_schemas_are_refused_without_overflowing() {
        let mut deep = json!({"type": "integer"});
        for _ in 0..100 {
            deep = json!({"not": deep});
        }
        let e = CompiledSchema::new(deep).unwrap_err();
        assert!(matches!(e, SchemaError::TooDeep { limit: 64, .. }), "{e}");
        let wide: Vec<Value> = (0..20_000).map(|i| json!({"const": i})).collect();
        let e = CompiledSchema::new(json!({"anyOf": wide})).unwrap_err();
        assert!(matches!(e, SchemaError::TooCostly { .. }), "{e}");
        let e = CompiledSchema::new(json!({"$ref": "https://example.com/s.json"})).unwrap_err();
        assert!(e.to_string().contains("self-contained"), "{e}");
    }
}
