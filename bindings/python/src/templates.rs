//! The constructor's templates: strings, LlamaIndex `PromptTemplate`s and
//! `ChatPromptTemplate`s read into synthkit templates, each with its kind.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use synthkit::prompt::{PromptTemplate, Role, TemplateKind};

use crate::InputError;

/// The constructor's template arguments.
pub(crate) struct TemplateArgs<'a, 'py> {
    pub(crate) qa: Option<&'a Bound<'py, PyAny>>,
    pub(crate) refine: Option<&'a Bound<'py, PyAny>>,
    pub(crate) summary: Option<&'a Bound<'py, PyAny>>,
    pub(crate) simple: Option<&'a Bound<'py, PyAny>>,
}

impl TemplateArgs<'_, '_> {
    /// The templates given, each with its kind.
    pub(crate) fn read(&self) -> PyResult<Vec<PromptTemplate>> {
        let mut out = Vec::new();
        for (arg, kind, name) in [
            (self.qa, TemplateKind::Qa, "qa_template"),
            (self.refine, TemplateKind::Refine, "refine_template"),
            (self.summary, TemplateKind::Summary, "summary_template"),
            (self.simple, TemplateKind::Simple, "simple_template"),
        ] {
            if let Some(t) = arg.filter(|t| !t.is_none()) {
                out.push(template_from(t, kind, name)?);
            }
        }
        Ok(out)
    }
}

/// A template from a string, a LlamaIndex `PromptTemplate` (`.template`) or a
/// `ChatPromptTemplate` (`.message_templates`: `.role`, `.content`), with the partial
/// values of either (`.kwargs`). Variable and function mappings are refused rather than
/// ignored.
fn template_from(t: &Bound<'_, PyAny>, kind: TemplateKind, arg: &str) -> PyResult<PromptTemplate> {
    if let Ok(s) = t.cast::<PyString>() {
        return Ok(PromptTemplate::completion(kind, s.to_cow()?.into_owned()));
    }
    for mapping in ["template_var_mappings", "function_mappings"] {
        if let Ok(m) = t.getattr(mapping)
            && m.is_truthy()?
        {
            return Err(InputError::new_err(format!(
                "{arg}: the template's {mapping} are not supported: name the variables as synthkit fills them (context_str, query_str, existing_answer, context_msg) or pass partial values"
            )));
        }
    }
    let template = bare_template(t, kind, arg)?;
    match t.getattr("kwargs") {
        Ok(kwargs) => match kwargs.cast::<PyDict>() {
            Ok(kwargs) => {
                let mut template = template;
                for (k, v) in kwargs.iter() {
                    template = template.partial(&k.str()?.to_string(), &v.str()?.to_string());
                }
                Ok(template)
            }
            Err(_) => Ok(template),
        },
        Err(_) => Ok(template),
    }
}

/// A template's text or messages, without its partial values.
fn bare_template(t: &Bound<'_, PyAny>, kind: TemplateKind, arg: &str) -> PyResult<PromptTemplate> {
    if let Ok(text) = t.getattr("template").and_then(|v| v.extract::<String>()) {
        return Ok(PromptTemplate::completion(kind, text));
    }
    if let Ok(messages) = t.getattr("message_templates") {
        let mut out = Vec::new();
        for m in messages.try_iter()? {
            let m = m?;
            let role = m.getattr("role")?;
            let role = match role.getattr("value") {
                Ok(v) => v.str()?.to_string(),
                Err(_) => role.str()?.to_string(),
            };
            let role = match role.as_str() {
                "system" => Role::System,
                "assistant" => Role::Assistant,
                "user" => Role::User,
                other => {
                    return Err(InputError::new_err(format!(
                        "{arg}: chat role `{other}` is not supported (system, user or assistant)"
                    )));
                }
            };
            let content: Option<String> = m.getattr("content")?.extract()?;
            out.push((role, content.unwrap_or_default()));
        }
        return PromptTemplate::chat(kind, out)
            .map_err(|e| InputError::new_err(format!("{arg}: {e}")));
    }
    Err(InputError::new_err(format!(
        "{arg} must be a string or a LlamaIndex PromptTemplate, got {}",
        t.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}
