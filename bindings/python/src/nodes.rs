//! Python values to synthkit nodes, and JSON values both ways.
//!
//! A node is a string, a dict (`{"id"|"id_"|"node_id", "text", "metadata", "score",
//! "excluded_llm_metadata_keys"}` or `{"node": {...}, "score": ...}`), or any object shaped
//! like LlamaIndex's `NodeWithScore` / `TextNode` (read with `getattr`, so LlamaIndex is
//! not needed).

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use synthkit::Node;

use crate::InputError;

/// How deep nested metadata may go before the rest is shown as its `str()`.
const MAX_DEPTH: usize = 32;

/// The nodes in `items` (any iterable), in order. The `i`-th node without an id gets `"i"`.
pub(crate) fn nodes_from(items: &Bound<'_, PyAny>) -> PyResult<Vec<Node>> {
    if items.is_instance_of::<PyString>() || items.is_instance_of::<PyDict>() {
        return Err(InputError::new_err(
            "nodes must be a list (of strings, dicts or LlamaIndex nodes), not a single string or dict",
        ));
    }
    let iter = items.try_iter().map_err(|_| {
        InputError::new_err(format!("nodes must be a list, got {}", type_name(items)))
    })?;
    let mut nodes = Vec::with_capacity(items.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        nodes.push(node_from(&item?, i)?);
    }
    Ok(nodes)
}

/// One node; `index` names it in errors and is its id when it has none.
fn node_from(item: &Bound<'_, PyAny>, index: usize) -> PyResult<Node> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(Node::new(index.to_string(), s.to_cow()?));
    }
    if let Ok(d) = item.cast::<PyDict>() {
        return node_from_dict(d, index);
    }
    node_from_object(item, index)
}

fn node_from_dict(d: &Bound<'_, PyDict>, index: usize) -> PyResult<Node> {
    // `{"node": {...}, "score": s}`: the NodeWithScore shape.
    if let Some(inner) = d.get_item("node")? {
        let mut node = node_from(&inner, index)?;
        if let Some(score) = d.get_item("score")? {
            node.score = score_from(&score, index)?;
        }
        return Ok(node);
    }
    let id = ["id", "id_", "node_id"]
        .iter()
        .find_map(|k| d.get_item(*k).ok().flatten())
        .filter(|v| !v.is_none());
    let text = d.get_item("text")?.filter(|v| !v.is_none());
    let Some(text) = text else {
        return Err(InputError::new_err(format!(
            "node {index} has no text: a dict node needs a \"text\" string (keys given: {})",
            dict_keys(d)
        )));
    };
    let mut node = Node::new(id_string(id.as_ref(), index)?, text_string(&text, index)?);
    if let Some(m) = d.get_item("metadata")?.filter(|v| !v.is_none()) {
        node.metadata = metadata_from(&m, index)?;
    }
    if let Some(keys) = d
        .get_item("excluded_llm_metadata_keys")?
        .filter(|v| !v.is_none())
    {
        node.excluded_llm_metadata_keys = keys.extract().map_err(|_| {
            InputError::new_err(format!(
                "node {index}: excluded_llm_metadata_keys must be a list of strings"
            ))
        })?;
    }
    if let Some(score) = d.get_item("score")? {
        node.score = score_from(&score, index)?;
    }
    Ok(node)
}

/// A LlamaIndex-like object: a `NodeWithScore` (`.node`, `.score`) or a node (`.node_id`
/// or `.id_`, `.get_content()` or `.text`, `.metadata`, `.excluded_llm_metadata_keys`).
fn node_from_object(obj: &Bound<'_, PyAny>, index: usize) -> PyResult<Node> {
    if let Some(inner) = attr(obj, "node")? {
        let mut node = node_from(&inner, index)?;
        if let Some(score) = attr(obj, "score")? {
            node.score = score_from(&score, index)?;
        }
        return Ok(node);
    }
    // `get_content()` with no argument is the text without metadata (MetadataMode.NONE);
    // the metadata is passed apart, and synthkit shows it to the model as LlamaIndex does.
    let text = match attr(obj, "get_content")? {
        Some(f) if f.is_callable() => Some(f.call0()?),
        _ => attr(obj, "text")?,
    };
    let Some(text) = text else {
        return Err(InputError::new_err(format!(
            "node {index} has no text: expected a string, a dict with \"text\", or a node with .text or .get_content(), got {}",
            type_name(obj)
        )));
    };
    let id = match attr(obj, "node_id")? {
        Some(id) => Some(id),
        None => attr(obj, "id_")?,
    };
    let mut node = Node::new(id_string(id.as_ref(), index)?, text_string(&text, index)?);
    if let Some(m) = attr(obj, "metadata")? {
        node.metadata = metadata_from(&m, index)?;
    }
    if let Some(keys) = attr(obj, "excluded_llm_metadata_keys")? {
        node.excluded_llm_metadata_keys = keys.extract().map_err(|_| {
            InputError::new_err(format!(
                "node {index}: excluded_llm_metadata_keys must be a list of strings"
            ))
        })?;
    }
    if let Some(score) = attr(obj, "score")? {
        node.score = score_from(&score, index)?;
    }
    Ok(node)
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

fn id_string(id: Option<&Bound<'_, PyAny>>, index: usize) -> PyResult<String> {
    match id {
        None => Ok(index.to_string()),
        Some(v) => match v.cast::<PyString>() {
            Ok(s) => Ok(s.to_cow()?.into_owned()),
            Err(_) => Ok(v.str()?.to_cow()?.into_owned()),
        },
    }
}

fn text_string(text: &Bound<'_, PyAny>, index: usize) -> PyResult<String> {
    match text.cast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(InputError::new_err(format!(
            "node {index}: text must be a string, got {}",
            type_name(text)
        ))),
    }
}

fn score_from(score: &Bound<'_, PyAny>, index: usize) -> PyResult<Option<f64>> {
    if score.is_none() {
        return Ok(None);
    }
    score.extract::<f64>().map(Some).map_err(|_| {
        InputError::new_err(format!(
            "node {index}: score must be a number or None, got {}",
            type_name(score)
        ))
    })
}

fn metadata_from(m: &Bound<'_, PyAny>, index: usize) -> PyResult<Map<String, Value>> {
    let Ok(d) = m.cast::<PyDict>() else {
        return Err(InputError::new_err(format!(
            "node {index}: metadata must be a dict, got {}",
            type_name(m)
        )));
    };
    dict_to_map(d, 0)
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

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_string())
}

fn dict_keys(d: &Bound<'_, PyDict>) -> String {
    let keys: Vec<String> = d
        .keys()
        .iter()
        .filter_map(|k| k.str().ok().map(|s| s.to_string()))
        .collect();
    if keys.is_empty() {
        "none".to_string()
    } else {
        keys.join(", ")
    }
}
