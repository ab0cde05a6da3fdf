//! Tests of schemas, their cost and the check of replies.

#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

use crate::testing::doubling_schema;

#[test]
fn a_schema_that_doubles_at_each_reference_is_refused_by_its_cost() {
    let e = CompiledSchema::new(doubling_schema(22)).unwrap_err();
    assert_eq!(
        e,
        SchemaError::TooCostly {
            limit: MAX_SCHEMA_COST
        }
    );
    assert!(e.to_string().contains("10000"), "{e}");
    // Escaped pointers and anchors are followed too.
    let mut escaped = doubling_schema(30);
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
    // A chain within the limit compiles, and checks.
    let ok = CompiledSchema::new(doubling_schema(10)).unwrap();
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
