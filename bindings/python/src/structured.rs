//! Structured answers from Python: `output_schema=` (a JSON schema the final answer
//! follows: `Response.structured`) and `structured_answer_filtering=` (refine and compact
//! steps say whether their context answered the query).

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;
use synthkit::{AnswerFiltering, ResponseMode};

use crate::InputError;

/// The structured options of one synthesizer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Structured {
    /// The JSON schema of the final answer, if any.
    schema: Option<Value>,
    /// Whether refine/compact steps are filtering steps.
    filtering: bool,
}

impl Structured {
    /// Reads `output_schema` (a dict, a JSON string, or a class with pydantic's
    /// `model_json_schema()`) and `structured_answer_filtering` for `mode`.
    ///
    /// Filtering is refused outside refine and compact (the only modes whose steps the
    /// library filters); combining it with a schema, or a schema with citations, is refused
    /// by the library's builder.
    pub(crate) fn read(
        output_schema: Option<&Bound<'_, PyAny>>,
        filtering: bool,
        mode: ResponseMode,
    ) -> PyResult<Self> {
        if filtering && !matches!(mode, ResponseMode::Refine | ResponseMode::Compact) {
            return Err(InputError::new_err(format!(
                "structured_answer_filtering applies to the refine and compact modes (each step says whether its context answered); mode `{}` has no such steps",
                mode.as_str()
            )));
        }
        let schema = match output_schema.filter(|s| !s.is_none()) {
            Some(s) => Some(schema_value(s)?),
            None => None,
        };
        Ok(Self { schema, filtering })
    }

    /// Sets these options in `options`.
    pub(crate) fn set(self, options: &mut synthkit::SynthesisOptions) {
        options.output_schema = self.schema;
        if self.filtering {
            options.answer_filtering = Some(AnswerFiltering::on());
        }
    }
}

/// The schema `value` stands for, as JSON (through Python's `json.dumps`, so a value JSON
/// cannot hold is an error rather than a guess).
fn schema_value(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    let py = value.py();
    let text = if let Ok(s) = value.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else {
        let schema = if value.hasattr("model_json_schema")? {
            value.call_method0("model_json_schema")?
        } else {
            value.clone()
        };
        py.import("json")?
            .call_method1("dumps", (schema,))
            .map_err(|e| {
                InputError::new_err(format!(
                    "output_schema must be a JSON schema (a dict of JSON values, a JSON string or a pydantic model class): {}",
                    e.value(py)
                ))
            })?
            .extract()?
    };
    let schema: Value = serde_json::from_str(&text)
        .map_err(|e| InputError::new_err(format!("output_schema is not valid JSON: {e}")))?;
    if !schema.is_object() {
        return Err(InputError::new_err(
            "output_schema must be a JSON schema object (a dict such as {\"type\": \"object\", ...})",
        ));
    }
    Ok(schema)
}
