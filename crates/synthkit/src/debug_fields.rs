//! `debug_fields!`: a `Debug` impl that shows named fields of `self`, for types whose
//! `Debug` leaves fields out (secrets, clients, caches) or reaches through an inner `Arc`.
//!
//! ```text
//! debug_fields!(RedisCache { prefix: prefix, ttl_secs: ttl_secs, .. });
//! // f.debug_struct("RedisCache").field("prefix", &self.prefix)
//! //     .field("ttl_secs", &self.ttl_secs).finish_non_exhaustive()
//! debug_fields!(BpeTokenizer { name: name });   // ... .finish()
//! ```
//!
//! Each field is `label: path`, the path read from `self` (`keys: inner.keys`), or
//! `label: method()` for what a method of `self` returns; a trailing `..` ends with
//! `finish_non_exhaustive`. `Debug` impls that compute what they show in other ways stay
//! hand-written.

/// Writes a `Debug` impl of the form described in the module's docs.
macro_rules! debug_fields {
    ($ty:ident { $($label:ident: $($path:ident).+ $(($($call:tt)?))?),+ , .. $(,)? }) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($label), &self.$($path).+ $(($($call)?))?))+
                    .finish_non_exhaustive()
            }
        }
    };
    ($ty:ident { $($label:ident: $($path:ident).+ $(($($call:tt)?))?),+ $(,)? }) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($label), &self.$($path).+ $(($($call)?))?))+
                    .finish()
            }
        }
    };
}
