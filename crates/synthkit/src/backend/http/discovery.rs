//! Reading what a server says about itself: the model it lists first, and its context
//! window and its slots in llama.cpp's `/props`, or a `/models` listing.

use serde_json::Value;

/// The first model id in a `/models` listing: `data[].id` (OpenAI's shape, served by
/// llama.cpp, vLLM, Ollama and LM Studio), else `models[].model` or `models[].name`.
pub(crate) fn first_model_id(listing: &Value) -> Option<String> {
    let named = |entries: Option<&Value>, keys: &[&str]| {
        entries?.as_array()?.iter().find_map(|e| {
            keys.iter()
                .find_map(|k| e.get(*k).and_then(Value::as_str))
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(str::to_string)
        })
    };
    named(listing.get("data"), &["id"]).or_else(|| named(listing.get("models"), &["model", "name"]))
}

/// The context window in a llama.cpp `/props` answer.
pub(crate) fn props_context_window(props: &Value) -> Option<usize> {
    let positive = |v: Option<&Value>| {
        v.and_then(Value::as_u64)
            .filter(|&n| n > 0 && n <= MAX_REPORTED_WINDOW)
            .and_then(|n| usize::try_from(n).ok())
    };
    positive(
        props
            .get("default_generation_settings")
            .and_then(|s| s.get("n_ctx")),
    )
    .or_else(|| positive(props.get("n_ctx")))
}

/// The largest context window a server may report and be believed (2^32 tokens): a
/// larger one is a broken server, not a model.
pub(crate) const MAX_REPORTED_WINDOW: u64 = 1 << 32;

/// The error for a `/props` answer whose context window cannot be right (`n_ctx` of 0,
/// negative, not a whole number, or above [`MAX_REPORTED_WINDOW`]) when it gives no
/// usable one: the server is at fault, and the user must name the window, since a
/// window guessed for it would make every prompt budget wrong. `url` is shown redacted.
pub(crate) fn props_window_error(props: &Value, url: &str) -> Option<crate::model::ModelError> {
    if props_context_window(props).is_some() {
        return None;
    }
    let reported = props
        .get("default_generation_settings")
        .and_then(|s| s.get("n_ctx"))
        .or_else(|| props.get("n_ctx"))?;
    Some(crate::model::ModelError::Other(format!(
        "the server at {} reports a context window of {} tokens (`n_ctx` in /props), which cannot be right: check the server (llama.cpp: its --ctx-size), or set the model's context window yourself (--context-window, `context_window`)",
        crate::secret::redact_url(url),
        crate::model::excerpt(&reported.to_string(), 40)
    )))
}

/// The context window in a `/models` listing: the entry named `model` (else the first
/// one that says), from `max_model_len` (vLLM), `meta.n_ctx` (llama.cpp),
/// `context_length` or `max_context_length` (others).
pub(crate) fn models_context_window(models: &Value, model: &str) -> Option<usize> {
    let data = models.get("data")?.as_array()?;
    let window = |entry: &Value| {
        ["max_model_len", "context_length", "max_context_length"]
            .iter()
            .find_map(|k| entry.get(*k).and_then(Value::as_u64))
            .or_else(|| {
                entry
                    .get("meta")
                    .and_then(|m| m.get("n_ctx"))
                    .and_then(Value::as_u64)
            })
            .filter(|&n| n > 0 && n <= MAX_REPORTED_WINDOW)
            .and_then(|n| usize::try_from(n).ok())
    };
    data.iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(model))
        .and_then(window)
        .or_else(|| data.iter().find_map(window))
}

/// Whether the model takes images, as llama.cpp's `/props` says it
/// (`modalities.vision`), else as a models listing's entry for `model` (else its first)
/// says it: llama.cpp's `capabilities` (`multimodal`), or `architecture.input_modalities`
/// (`image`). `None` when neither says.
pub(crate) fn vision_in(
    props: Option<&Value>,
    listing: Option<&Value>,
    model: &str,
) -> Option<bool> {
    if let Some(v) = props
        .and_then(|p| p.get("modalities"))
        .and_then(|m| m.get("vision"))
        .and_then(Value::as_bool)
    {
        return Some(v);
    }
    let data = listing?.get("data")?.as_array()?;
    let says = |entry: &Value| -> Option<bool> {
        let has = |list: Option<&Value>, word: &str| {
            list.and_then(Value::as_array)
                .map(|l| l.iter().any(|c| c.as_str() == Some(word)))
        };
        has(entry.get("capabilities"), "multimodal").or_else(|| {
            has(
                entry
                    .get("architecture")
                    .and_then(|a| a.get("input_modalities")),
                "image",
            )
        })
    };
    data.iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(model))
        .and_then(says)
        .or_else(|| data.iter().find_map(says))
}

/// `total_slots` from a `/props` reply, if positive.
pub(crate) fn slots_in(props: &Value) -> Option<usize> {
    props
        .get("total_slots")
        .and_then(Value::as_u64)
        .filter(|&n| n > 0)
        .and_then(|n| usize::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonsense_windows_are_the_servers_fault() {
        use serde_json::json;
        let url = "http://127.0.0.1:1";
        for bad in [
            json!({"default_generation_settings": {"n_ctx": 0}}),
            json!({"n_ctx": -1}),
            json!({"n_ctx": 1e30}),
            json!({"n_ctx": "many"}),
            json!({"n_ctx": 8_589_934_592u64}),
        ] {
            let e = props_window_error(&bad, url).map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains("--context-window")),
                "{bad}: {e:?}"
            );
        }
        assert!(props_window_error(&json!({"n_ctx": 4096}), url).is_none());
        assert!(props_window_error(&json!({"total_slots": 1}), url).is_none());
    }

    #[test]
    fn reads_vision() {
        use serde_json::json;
        let props = json!({"modalities": {"vision": true, "audio": false}});
        assert_eq!(vision_in(Some(&props), None, "m"), Some(true));
        let props = json!({"modalities": {"vision": false}});
        assert_eq!(vision_in(Some(&props), None, "m"), Some(false));
        let listing = json!({"data": [{"id": "m", "capabilities": ["completion", "multimodal"]}]});
        assert_eq!(vision_in(Some(&json!({})), Some(&listing), "m"), Some(true));
        let listing = json!({"data": [{"id": "m", "capabilities": ["completion"]}]});
        assert_eq!(vision_in(None, Some(&listing), "m"), Some(false));
        let listing =
            json!({"data": [{"id": "x", "architecture": {"input_modalities": ["text", "image"]}}]});
        assert_eq!(vision_in(None, Some(&listing), "m"), Some(true));
        assert_eq!(
            vision_in(None, Some(&json!({"data": [{"id": "m"}]})), "m"),
            None
        );
        assert_eq!(vision_in(None, None, "m"), None);
    }

    #[test]
    fn reads_total_slots() {
        assert_eq!(slots_in(&serde_json::json!({"total_slots": 4})), Some(4));
        assert_eq!(slots_in(&serde_json::json!({"total_slots": 0})), None);
        assert_eq!(slots_in(&serde_json::json!({})), None);
    }
}
