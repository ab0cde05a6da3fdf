//! The bounds of a schema and of a reply's check, and the errors of a schema that is not
//! usable.

/// The most a schema may cost: the subschemas of the tree it expands to, `$ref`s
/// followed and every `anyOf`/`oneOf`/`allOf` branch counted (see the
/// [module documentation](super)).
pub const MAX_SCHEMA_COST: u64 = 10_000;

/// The deepest a schema may nest, in subschemas, `$ref`s followed.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// The most subschema applications checking one reply may take (see the
/// [module documentation](super)): a reply whose check would take more is refused before
/// the check starts.
pub const MAX_CHECK_STEPS: u64 = 10_000_000;

/// A failed reply is checked again for the path of its first violation only when its
/// check takes at most this many subschema applications; a costlier one is reported at
/// `/` without the detail (collecting the detail holds every failed branch's errors).
pub const MAX_DETAILED_CHECK_STEPS: u64 = 100_000;

/// How deep the count of a reply's check may recurse (subschema applications inside one
/// another); a deeper one is refused as too costly (it would also be too deep to check on
/// a thread's stack).
pub(super) const MAX_CHECK_NESTING: usize = 2048;

/// A JSON schema that is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema is not a valid JSON schema.
    #[error(
        "the output schema is not a valid JSON schema ({message} at {path}): fix the schema, or leave it out for a text answer"
    )]
    Invalid {
        /// Where in the schema (a JSON pointer).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The schema expands to more than [`MAX_SCHEMA_COST`] subschemas.
    #[error(
        "the output schema is too costly to check: with its `$ref`s followed and every `anyOf`/`oneOf`/`allOf` branch counted it expands to more than {limit} subschemas (the limit): use fewer alternatives or fewer references to schemas that branch"
    )]
    TooCostly {
        /// The limit, [`MAX_SCHEMA_COST`].
        limit: u64,
    },
    /// The schema nests deeper than [`MAX_SCHEMA_DEPTH`].
    #[error(
        "the output schema nests deeper than {limit} subschemas (the limit, `$ref`s followed) at {path}: flatten it"
    )]
    TooDeep {
        /// Where the limit was passed (a JSON pointer).
        path: String,
        /// The limit, [`MAX_SCHEMA_DEPTH`].
        limit: usize,
    },
    /// A `$ref` leads back to a schema it is part of without going into the value.
    #[error(
        "the output schema's `$ref` at {path} leads back to itself without going into the value (through `properties`, `items`, ...), so checking a reply would never end: remove the loop"
    )]
    RefCycle {
        /// Where the `$ref` is (a JSON pointer).
        path: String,
    },
}
