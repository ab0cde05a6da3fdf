//! Helpers for the HTTP backends' unit tests.

use crate::model::ModelError;

use super::server::ParseReply;

/// Asserts that `parse` takes each of `bodies` as a malformed reply.
pub(crate) fn assert_malformed(parse: ParseReply, bodies: &[&[u8]]) {
    for body in bodies {
        let parsed = parse(body, None);
        assert!(
            matches!(parsed, Err(ModelError::Malformed(_))),
            "{parsed:?}"
        );
    }
}

/// An environment lookup that knows only `vars` (name, value).
pub(crate) fn lookup_in<'v>(vars: &'v [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'v {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}
