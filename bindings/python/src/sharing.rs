//! The constructor's `rpm=`, `tpm=`, `redis_url=`, `redis_prefix=`, `cache=` and
//! `cache_ttl=`: where the rate budget and the response cache live, read into the
//! library's [`SharingOptions`] (the same choices as `synthkit serve`'s) and opened once
//! per `Synthesizer`.
//!
//! - `rpm` / `tpm`: requests and tokens per minute; each model call is charged its prompt
//!   tokens plus its whole output reserve (`num_output`). Without `redis_url`, for this
//!   `Synthesizer`; with it, one budget for every process given the same URL and prefix.
//! - `cache`: `None`; `"memory"` (this `Synthesizer`, at most 64 MiB, least recently used
//!   entries evicted first); `"redis"` (needs `redis_url`: every process with the same URL
//!   and prefix, entries living `cache_ttl` seconds, a day by default); any other string
//!   or an `os.PathLike`: an SQLite file (kept between runs; `"./memory"` for a file
//!   named `memory`).

use std::path::PathBuf;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyString;
use synthkit::layer::sharing::{CacheLocation, Sharing, SharingError, SharingOptions};
use synthkit::layer::stack::CacheIdentity;

use crate::{InputError, SynthkitError};

/// The sharing arguments as given.
pub(crate) struct SharingArgs<'a, 'py> {
    pub rpm: Option<i64>,
    pub tpm: Option<i64>,
    pub redis_url: Option<String>,
    pub redis_prefix: Option<String>,
    pub cache: Option<&'a Bound<'py, PyAny>>,
    pub cache_ttl: Option<f64>,
}

impl SharingArgs<'_, '_> {
    /// The library's options, checked (nothing is opened yet).
    pub(crate) fn options(&self) -> PyResult<SharingOptions> {
        let rpm = per_minute("rpm", self.rpm)?;
        let tpm = per_minute("tpm", self.tpm)?;
        let mut opts = SharingOptions::default().with_rates(rpm, tpm);
        let url = self
            .redis_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty());
        if let Some(url) = url {
            opts = opts.with_redis(url, self.redis_prefix.clone());
        } else if self.redis_prefix.is_some() {
            return Err(InputError::new_err(
                "redis_prefix applies with redis_url only",
            ));
        }
        let location = self.location()?;
        if self.cache_ttl.is_some() && !matches!(location, CacheLocation::Redis { .. }) {
            return Err(InputError::new_err(
                "cache_ttl applies to cache=\"redis\" only (the memory and SQLite caches keep entries until evicted or deleted)",
            ));
        }
        opts = opts.with_cache(location);
        opts.check().map_err(to_py)?;
        Ok(opts)
    }

    /// Where the cache lives.
    fn location(&self) -> PyResult<CacheLocation> {
        let Some(cache) = self.cache.filter(|c| !c.is_none()) else {
            return Ok(CacheLocation::None);
        };
        if let Ok(s) = cache.cast::<PyString>() {
            let s = s.to_cow()?;
            return match s.trim() {
                "" => Err(InputError::new_err(
                    "cache must be \"memory\", \"redis\" or an SQLite file's path, got an empty string",
                )),
                "memory" => Ok(CacheLocation::memory()),
                "redis" => {
                    let ttl = match self.cache_ttl {
                        None => return Ok(CacheLocation::redis()),
                        Some(secs) => Duration::try_from_secs_f64(secs)
                            .ok()
                            .filter(|d| d.as_secs() >= 1)
                            .ok_or_else(|| {
                                InputError::new_err(format!(
                                    "cache_ttl must be at least 1 second, got {secs}"
                                ))
                            })?,
                    };
                    Ok(CacheLocation::Redis { ttl })
                }
                _ => Ok(CacheLocation::Sqlite(PathBuf::from(s.as_ref()))),
            };
        }
        if cache.hasattr("__fspath__")? {
            let path: PathBuf = cache.extract()?;
            return Ok(CacheLocation::Sqlite(path));
        }
        Err(InputError::new_err(format!(
            "cache must be None, \"memory\", \"redis\" or an SQLite file's path, got {}",
            cache
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        )))
    }
}

/// Opens the cache and connects to Redis.
pub(crate) async fn open(opts: SharingOptions) -> PyResult<Sharing> {
    opts.open().await.map_err(to_py)
}

/// A rate as the library takes it (0: none).
fn per_minute(name: &str, value: Option<i64>) -> PyResult<u32> {
    match value {
        None => Ok(0),
        Some(n) if n >= 1 => u32::try_from(n).map_err(|_| {
            InputError::new_err(format!("{name} must be at most {}, got {n}", u32::MAX))
        }),
        Some(n) => Err(InputError::new_err(format!(
            "{name} must be at least 1 (None for no limit), got {n}"
        ))),
    }
}

/// The library's refusal as a Python exception, naming the constructor's arguments.
fn to_py(e: SharingError) -> PyErr {
    let message = match &e {
        SharingError::RedisCacheWithoutUrl => {
            "cache=\"redis\" needs redis_url= (or keep the cache in memory or in a file)"
        }
        SharingError::NothingToShare => {
            "redis_url shares the rate budget (rpm=, tpm=) and cache=\"redis\": give one of them, or leave out redis_url"
        }
        SharingError::EmptyPrefix => "redis_prefix must not be empty",
        // Redis unreachable (the URL without its password), a cache file that cannot be
        // opened: the library's message.
        _ => return SynthkitError::new_err(e.to_string()),
    };
    InputError::new_err(message)
}

/// What a Python LLM's replies depend on, for cache keys: its class, its model name,
/// whether it chats, and its `temperature` and `max_tokens` where it has them. Two LLM
/// objects that differ otherwise (another endpoint, other sampling fields) share entries:
/// give them different `redis_prefix` values or cache files.
pub(crate) fn llm_identity(llm: &Bound<'_, PyAny>, name: &str, chat: bool) -> CacheIdentity {
    let class = llm
        .get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_default();
    let mut params = format!("chat={chat}");
    for field in ["temperature", "max_tokens"] {
        let value = llm
            .getattr(field)
            .ok()
            .filter(|v| !v.is_none() && !v.is_callable())
            .and_then(|v| v.repr().ok())
            .map(|r| r.to_string());
        if let Some(v) = value {
            params.push_str(&format!(" {field}={v}"));
        }
    }
    CacheIdentity::new(format!("python {class} {name}"), params)
}

/// `, budget=..., cache=...` for a repr, when there is a budget or a cache (no URL).
pub(crate) fn describe(sharing: &Sharing) -> String {
    let mut out = String::new();
    if sharing.budget_kind() != "none" {
        out.push_str(&format!(", budget={:?}", sharing.budget_kind()));
    }
    if sharing.cache_kind() != "none" {
        out.push_str(&format!(", cache={:?}", sharing.cache_kind()));
    }
    out
}
