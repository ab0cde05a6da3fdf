//! A request's `paths` read from Python: `synthesize_many(..., paths_root=DIR)` reads the
//! files and folders a request dict names instead of `nodes`, with `synthkit batch`'s
//! reader and rules ([`synthkit_frontend::retrieval::paths`]): under the root unless
//! `allow_paths_outside=True`, at most 10,000 files and 64 MiB a request, split into
//! chunks of `chunk_size` tokens and ranked for the query (the request's `top_k`, else
//! `top_k=`, else the 20 best of a folder), through a folder index when `index_dir=`
//! names where to keep it. What a read warns of goes to Python's `logging` (the
//! `synthkit_rs` logger).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use synthkit_frontend::retrieval::paths::{OptionNames, PathsReader, PathsRoot, PathsSettings};
use synthkit_frontend::retrieval::{Tell, TopK};

use crate::InputError;

/// The keyword arguments of `synthesize_many` and `evaluate` that say how `paths` are read.
const KEYWORDS: [&str; 5] = [
    "paths_root",
    "allow_paths_outside",
    "chunk_size",
    "top_k",
    "index_dir",
];

/// The reader that `options` (the extra keyword arguments of `function`) ask for; without
/// `paths_root`, under `default_root` (`evaluate`'s: the cases file's folder); `None`
/// when neither is given (a request or case with `paths` is then refused).
pub(crate) fn reader_of(
    options: Option<&Bound<'_, PyDict>>,
    function: &str,
    default_root: Option<PathBuf>,
) -> PyResult<Option<PathsReader>> {
    let mut root: Option<PathBuf> = None;
    let mut outside = false;
    let mut settings = PathsSettings::default();
    let mut others = Vec::new();
    for (key, value) in options.iter().flat_map(|o| o.iter()) {
        let key: String = key.extract()?;
        let bad = |what: &str| InputError::new_err(format!("{key} must be {what}"));
        match key.as_str() {
            "paths_root" if value.is_none() => {}
            "paths_root" => {
                root = Some(
                    value
                        .extract()
                        .map_err(|_| bad("a folder (a str or os.PathLike)"))?,
                );
            }
            "allow_paths_outside" => {
                outside = value.extract().map_err(|_| bad("True or False"))?;
                others.push(key);
            }
            "chunk_size" => {
                let size: usize = value
                    .extract()
                    .map_err(|_| bad("a number of tokens (an int)"))?;
                settings = settings.with_chunk_size(size);
                others.push(key);
            }
            "top_k" => {
                settings = settings.with_top_k(top_k_of(&value).map_err(|()| {
                    bad("a number of 1 or more, \"all\", or None (the 20 best of a folder)")
                })?);
                others.push(key);
            }
            "index_dir" if value.is_none() => {}
            "index_dir" => {
                let dir: PathBuf = value
                    .extract()
                    .map_err(|_| bad("a folder (a str or os.PathLike), or None"))?;
                settings = settings.with_index_dir(Some(dir));
                others.push(key);
            }
            _ => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "{function}() got an unexpected keyword argument '{key}' (it takes, for \
                     `paths`, {})",
                    KEYWORDS.join(", ")
                )));
            }
        }
    }
    let Some(root) = root.or(default_root) else {
        if others.is_empty() {
            return Ok(None);
        }
        return Err(InputError::new_err(format!(
            "{} say how `paths` are read: give paths_root= too (the folder they are read \
             under)",
            others.join(", ")
        )));
    };
    let root = PathsRoot::named(&root, outside, OptionNames::PYTHON)
        .map_err(|e| InputError::new_err(e.to_string()))?;
    let reader = PathsReader::new(
        &settings,
        Arc::new(root),
        synthkit::text::BpeTokenizer::cl100k_base().shared(),
    )
    .map_err(|e| InputError::new_err(e.to_string()))?;
    Ok(Some(reader))
}

/// `top_k=`: a positive int, `"all"`, or `None`.
fn top_k_of(value: &Bound<'_, PyAny>) -> Result<Option<TopK>, ()> {
    if value.is_none() {
        return Ok(None);
    }
    if value.is_instance_of::<PyString>() {
        return match value.extract::<String>() {
            Ok(all) if all.eq_ignore_ascii_case("all") => Ok(Some(TopK::All)),
            _ => Err(()),
        };
    }
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(());
    }
    match value.extract::<usize>() {
        Ok(k) if k >= 1 => Ok(Some(TopK::Best(k))),
        _ => Err(()),
    }
}

/// What the read says, as records of the `synthkit_rs` logger: warnings (a file decoded
/// imperfectly, a link out of the root skipped) at `WARNING`, notes at `INFO`; with the
/// logger at `DEBUG`, every file skipped is named. Its hints name the keyword arguments.
pub(crate) struct PythonLogging;

impl PythonLogging {
    fn log(level: &str, message: &str) {
        Python::attach(|py| {
            let logged = py
                .import("logging")
                .and_then(|logging| logging.call_method1("getLogger", ("synthkit_rs",)))
                .and_then(|logger| logger.call_method1(level, (message,)));
            if let Err(e) = logged {
                // A logging handler that raises loses that line only.
                e.print(py);
            }
        });
    }
}

impl Tell for PythonLogging {
    fn note(&self, message: &str) {
        Self::log("info", message);
    }

    fn warn(&self, message: &str) {
        Self::log("warning", message);
    }

    /// The logger at `DEBUG` names every file skipped (the command line's `-v`).
    fn verbose(&self) -> bool {
        Python::attach(|py| {
            py.import("logging")
                .and_then(|logging| {
                    let debug = logging.getattr("DEBUG")?;
                    logging
                        .call_method1("getLogger", ("synthkit_rs",))?
                        .call_method1("isEnabledFor", (debug,))?
                        .extract::<bool>()
                })
                .unwrap_or(false)
        })
    }

    fn names(&self) -> &'static OptionNames {
        &OptionNames::PYTHON
    }
}
