//! Python values to synthkit nodes, and JSON values both ways.
//!
//! A node is a string, a dict (`{"id"|"id_"|"node_id", "text", "metadata", "score",
//! "excluded_llm_metadata_keys"}` or `{"node": {...}, "score": ...}`, with an image:
//! `"image"` (base64, or `{"data", "mime_type"}`), `"image_mimetype"`, `"image_url"`), or
//! any object shaped like LlamaIndex's `NodeWithScore` / `TextNode` / `ImageNode` (read
//! with `getattr`, so LlamaIndex is not needed). Each becomes a JSON value that the library's node reader
//! (`synthkit::node::NodeListReader`) reads, so the shapes, the id rule (`id`, else `id_`,
//! else `node_id`, else the 1-based position) and the errors are the library's.

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use synthkit::Node;
use synthkit::node::NodeListReader;

use crate::InputError;

/// How deep nested metadata may go before the rest is shown as its `str()`.
const MAX_DEPTH: usize = 32;

/// The fields of a node that must have a JSON type of their own (a Python object that is
/// not a str, number, list or dict there is an error, not its `str()`): the library's.
const TYPED_FIELDS: [&str; 6] = synthkit::node::json::NODE_FIELDS;
/// The image fields of a node (a LlamaIndex `ImageNode`'s `image`, `image_mimetype`,
/// `image_url`, `image_path`; synthkit's `image` dict): typed as [`TYPED_FIELDS`], and
/// read by the library (which never fetches a URL nor reads a path).
const IMAGE_FIELDS: [&str; 4] = synthkit::node::json::IMAGE_FIELDS;

/// The nodes in `items` (any iterable), in order, read by the library's node reader: the
/// `i`-th node (1-based) without an id gets `"i"`, and ids must be unique.
pub(crate) fn nodes_from(items: &Bound<'_, PyAny>) -> PyResult<Vec<Node>> {
    if items.is_instance_of::<PyString>() || items.is_instance_of::<PyDict>() {
        return Err(InputError::new_err(
            "nodes must be a list (of strings, dicts or LlamaIndex nodes), not a single string or dict",
        ));
    }
    let iter = items.try_iter().map_err(|_| {
        InputError::new_err(format!("nodes must be a list, got {}", type_name(items)))
    })?;
    let mut reader = NodeListReader::with_capacity(items.len().unwrap_or(0));
    for item in iter {
        let position = reader.len() + 1;
        let value = node_value(&item?, position, true)?;
        reader
            .push(value)
            .map_err(|e| InputError::new_err(e.to_string()))?;
    }
    Ok(reader.into_nodes())
}

/// One node as JSON for the library's reader; `position` (1-based) names it in errors.
/// `outer`: whether it may be a `NodeWithScore` (the node inside one may not, and is not
/// read as one: the library then says so).
fn node_value(item: &Bound<'_, PyAny>, position: usize, outer: bool) -> PyResult<Value> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = item.cast::<PyDict>() {
        return dict_value(d, position, outer);
    }
    object_value(item, position, outer)
}

/// A dict node: its node fields converted, `node` read as a node, other keys kept as
/// `null` (the library ignores them, and names them when `text` is missing).
fn dict_value(d: &Bound<'_, PyDict>, position: usize, outer: bool) -> PyResult<Value> {
    let mut map = Map::new();
    for (k, v) in d.iter() {
        let key = match k.cast::<PyString>() {
            Ok(s) => s.to_cow()?.into_owned(),
            Err(_) => k.str()?.to_cow()?.into_owned(),
        };
        let value = match key.as_str() {
            "node" if outer && !v.is_none() => node_value(&v, position, false)?,
            "node" => to_json(&v, 1)?,
            "score" => score_value(&v, position)?,
            field => match TYPED_FIELDS
                .iter()
                .chain(&IMAGE_FIELDS)
                .find(|f| **f == field)
            {
                Some(field) => typed_value(&v, field, position)?,
                None => Value::Null,
            },
        };
        map.insert(key, value);
    }
    Ok(Value::Object(map))
}

/// A LlamaIndex-like object: a `NodeWithScore` (`.node`, `.score`) or a node (`.id`,
/// `.id_` or `.node_id`, `.get_content()` or `.text`, `.metadata`,
/// `.excluded_llm_metadata_keys`, `.score`).
fn object_value(obj: &Bound<'_, PyAny>, position: usize, outer: bool) -> PyResult<Value> {
    let mut map = Map::new();
    if let Some(inner) = attr(obj, "node")? {
        if outer {
            map.insert("node".into(), node_value(&inner, position, false)?);
            if let Some(score) = attr(obj, "score")? {
                map.insert("score".into(), score_value(&score, position)?);
            }
            return Ok(Value::Object(map));
        }
        // A NodeWithScore inside another: the library names it.
        map.insert("node".into(), Value::String(type_name(&inner)));
    }
    // `get_content()` with no argument is the text without metadata (MetadataMode.NONE);
    // the metadata is passed apart, and synthkit shows it to the model as LlamaIndex does.
    let text = match attr(obj, "get_content")? {
        Some(f) if f.is_callable() => Some(f.call0()?),
        _ => attr(obj, "text")?,
    };
    let Some(text) = text else {
        return Err(InputError::new_err(format!(
            "node {position} has no text: expected a string, a dict with \"text\", or a node with .text or .get_content(), got {}",
            type_name(obj)
        )));
    };
    map.insert("text".into(), typed_value(&text, "text", position)?);
    for field in ["id", "id_", "node_id"] {
        // A method is not an id.
        if let Some(id) = attr(obj, field)?.filter(|v| !v.is_callable()) {
            map.insert(field.into(), typed_value(&id, field, position)?);
        }
    }
    for field in ["metadata", "excluded_llm_metadata_keys"] {
        if let Some(v) = attr(obj, field)? {
            map.insert(field.into(), typed_value(&v, field, position)?);
        }
    }
    // A LlamaIndex `ImageNode`'s image (base64 text, its mime type, or a data URL).
    for field in IMAGE_FIELDS {
        if let Some(v) = attr(obj, field)?.filter(|v| !v.is_callable()) {
            map.insert(field.into(), image_value(&v, field, position)?);
        }
    }
    if let Some(score) = attr(obj, "score")? {
        map.insert("score".into(), score_value(&score, position)?);
    }
    Ok(Value::Object(map))
}

/// `obj.name`, or `None` when it has no such attribute or it is `None`.
fn attr<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    match obj.getattr(name) {
        Ok(v) if v.is_none() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(obj.py()) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A node field as JSON, for the library to check its type: `None`, bools, numbers,
/// strings, lists, tuples and dicts; any other object is an error naming its type (its
/// `str()` would hide the mistake).
fn typed_value(v: &Bound<'_, PyAny>, field: &str, position: usize) -> PyResult<Value> {
    let plain = v.is_none()
        || v.is_instance_of::<PyBool>()
        || v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyFloat>()
        || v.is_instance_of::<PyString>()
        || v.is_instance_of::<PyList>()
        || v.is_instance_of::<PyTuple>()
        || v.is_instance_of::<PyDict>();
    if !plain {
        let expected = match field {
            "metadata" => "a dict",
            "excluded_llm_metadata_keys" => "a list of strings",
            _ => "a string",
        };
        return Err(InputError::new_err(format!(
            "node {position}: `{field}` must be {expected}, got {}",
            type_name(v)
        )));
    }
    to_json(v, 1)
}

/// An image field as JSON: a `str` as it is, a `pathlib.Path` (`image_path`) as its
/// `str()` (the library then says it reads no files), else as [`typed_value`].
fn image_value(v: &Bound<'_, PyAny>, field: &str, position: usize) -> PyResult<Value> {
    if field == "image_path" && !v.is_instance_of::<PyString>() && v.hasattr("__fspath__")? {
        return Ok(Value::String(v.str()?.to_cow()?.into_owned()));
    }
    typed_value(v, field, position)
}

/// A score as JSON: `None`, or anything Python turns into a float (numpy's floats too); a
/// NaN or infinite score is an error; anything else goes to the library as it is, which
/// says what it must be.
fn score_value(score: &Bound<'_, PyAny>, position: usize) -> PyResult<Value> {
    if score.is_none() || score.is_instance_of::<PyBool>() || score.is_instance_of::<PyString>() {
        return to_json(score, 1);
    }
    match score.extract::<f64>() {
        Ok(f) => Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            InputError::new_err(format!(
                "node {position}: `score` must be a finite number or None, got {f}"
            ))
        }),
        Err(_) => to_json(score, 1),
    }
}

/// A Python value as JSON: `None`, bools, ints, floats, strings, lists, tuples and dicts
/// map as expected (dict keys through `str()`); anything else becomes its `str()`.
pub(crate) fn to_json(v: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    if depth >= MAX_DEPTH {
        return Ok(Value::String(v.str()?.to_cow()?.into_owned()));
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Ok(Value::String(v.str()?.to_cow()?.into_owned()));
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        return Ok(Number::from_f64(f.value())
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return Ok(Value::Object(dict_to_map(d, depth + 1)?));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for item in v.try_iter()? {
            out.push(to_json(&item?, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    Ok(Value::String(v.str()?.to_cow()?.into_owned()))
}

fn dict_to_map(d: &Bound<'_, PyDict>, depth: usize) -> PyResult<Map<String, Value>> {
    let mut map = Map::new();
    for (k, v) in d.iter() {
        let key = match k.cast::<PyString>() {
            Ok(s) => s.to_cow()?.into_owned(),
            Err(_) => k.str()?.to_cow()?.into_owned(),
        };
        map.insert(key, to_json(&v, depth)?);
    }
    Ok(map)
}

/// A JSON value as a Python object (objects become dicts in their order).
pub(crate) fn from_json<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into_bound_py_any(py)?,
            (None, Some(u), _) => u.into_bound_py_any(py)?,
            (None, None, Some(f)) => f.into_bound_py_any(py)?,
            (None, None, None) => n.to_string().into_bound_py_any(py)?,
        },
        Value::String(s) => s.into_bound_py_any(py)?,
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_json(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => map_to_dict(py, map)?.into_any(),
    })
}

/// A JSON object as a Python dict.
pub(crate) fn map_to_dict<'py>(
    py: Python<'py>,
    map: &Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        dict.set_item(k, from_json(py, v)?)?;
    }
    Ok(dict)
}

/// The Python type name of `v`, for error messages.
pub(crate) fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_string())
}
