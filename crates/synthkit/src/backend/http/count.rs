//! Token counts as servers report them, read leniently: a count that is not a whole
//! number from 0 to `u64::MAX` (negative, fractional, a string, too large) is ignored
//! with a warning, and the rest of the reply is kept.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Deserializes an optional token count: `None` for `null`, and for a value that is no
/// count (logged at `warn` once per value, naming it).
pub(crate) fn lenient_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(count_of(&value))
}

/// `value` as a token count, if it is one.
pub(crate) fn count_of(value: &Value) -> Option<u64> {
    if value.is_null() {
        return None;
    }
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    if let Some(n) = value.as_f64().and_then(whole) {
        return Some(n);
    }
    tracing::warn!(
        value = %crate::model::excerpt(&value.to_string(), 40),
        "the server reported a token count that is not a whole number of tokens; ignoring it"
    );
    None
}

/// The `input_tokens` of a counting endpoint's reply (`{"input_tokens": n}`: Anthropic's
/// `count_tokens`, llama.cpp's `/v1/chat/completions/input_tokens`); `endpoint` names it
/// in the error when the reply is not JSON or has no such count.
pub(crate) fn input_tokens_reply(
    bytes: &[u8],
    endpoint: &str,
) -> Result<usize, crate::model::ModelError> {
    use crate::model::ModelError;
    let reply: Value = serde_json::from_slice(bytes)
        .map_err(|e| ModelError::Malformed(format!("{endpoint} answered unparsable JSON: {e}")))?;
    reply
        .get("input_tokens")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| ModelError::Malformed(format!("{endpoint} answered without `input_tokens`")))
}

/// An integral float within range (`12.0`): a count written as a float.
// The bounds are checked first, so the cast is exact.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(f: f64) -> Option<u64> {
    (f.fract() == 0.0 && (0.0..18_446_744_073_709_551_615.0).contains(&f)).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_are_read_leniently() {
        assert_eq!(count_of(&json!(7)), Some(7));
        assert_eq!(count_of(&json!(7.0)), Some(7));
        assert_eq!(count_of(&json!(u64::MAX)), Some(u64::MAX));
        for bad in [
            json!(-1),
            json!(1.5),
            json!("12"),
            json!(1e30),
            json!([1]),
            json!({"n": 1}),
            json!(true),
        ] {
            assert_eq!(count_of(&bad), None, "{bad}");
        }
        assert_eq!(count_of(&Value::Null), None);
    }
}
