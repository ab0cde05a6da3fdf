//! Measuring a schema (its cost, depth and `$ref` loops, its ids and anchors) and counting
//! the subschema applications checking one reply takes, both bounded.

use serde_json::Value;

use super::limits::{
    MAX_CHECK_NESTING, MAX_CHECK_STEPS, MAX_SCHEMA_COST, MAX_SCHEMA_DEPTH, SchemaError,
};

/// Measures `schema` (the [module documentation](super)): its cost and depth within the limits,
/// and no `$ref` loop that stays on the same value; its ids and anchors.
pub(super) fn measure(schema: &Value) -> Result<Ids, SchemaError> {
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
pub(super) struct Ids(Vec<(String, String)>);

impl Ids {
    /// Collects the ids and anchors of `v` (at `path`), to `MAX_SCHEMA_DEPTH` levels
    /// (deeper schemas are refused by the walk).
    pub(super) fn collect(&mut self, v: &Value, path: String, depth: usize) {
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
    pub(super) fn resolve(&self, r: &str) -> Option<String> {
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
    pub(super) fn schema(
        &mut self,
        v: &Value,
        path: &str,
        depth: usize,
    ) -> Result<u64, SchemaError> {
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
    pub(super) fn one_or_many(
        &mut self,
        v: &Value,
        path: &str,
        depth: usize,
    ) -> Result<u64, SchemaError> {
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
    pub(super) fn reference(
        &mut self,
        r: &str,
        path: &str,
        depth: usize,
    ) -> Result<u64, SchemaError> {
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

/// The count of one reply's check (a compiled schema's `check_steps`): how many subschema
/// applications validating the reply takes, every branch tried and every reference
/// followed, the count of each (reference target, value) pair remembered so that a
/// branching recursion is counted in time linear in the pairs, not in the paths.
pub(super) struct CheckCount<'a> {
    root: &'a Value,
    ids: &'a Ids,
    /// Reference targets resolved so far, by reference text.
    targets: std::collections::HashMap<&'a str, Vec<&'a Value>>,
    /// The count of each (target, value) pair, by their addresses.
    pub(super) memo: std::collections::HashMap<(usize, usize), u64>,
    /// Subschemas visited while counting (the work of counting itself).
    pub(super) visits: u64,
}

/// Why a count stopped: over [`MAX_CHECK_STEPS`] or [`MAX_CHECK_NESTING`].
pub(super) struct TooCostly;

/// A property name, as the value `propertyNames` is applied to (counted once per name).
static PROPERTY_NAME: Value = Value::String(String::new());

impl<'a> CheckCount<'a> {
    pub(super) fn new(root: &'a Value, ids: &'a Ids) -> Self {
        Self {
            root,
            ids,
            targets: std::collections::HashMap::new(),
            memo: std::collections::HashMap::new(),
            visits: 0,
        }
    }

    /// The applications of subschema `s` to `v` (`nesting` applications deep).
    pub(super) fn apply(
        &mut self,
        s: &'a Value,
        v: &'a Value,
        nesting: usize,
    ) -> Result<u64, TooCostly> {
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
    pub(super) fn reference(
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
    pub(super) fn targets_of(&mut self, r: &'a str, dynamic: bool) -> Vec<&'a Value> {
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
pub(super) fn percent_decode(r: &str) -> String {
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
pub(super) fn pointer_or_root(p: &str) -> String {
    if p.is_empty() {
        "/".to_string()
    } else {
        p.to_string()
    }
}
