//! Errors and exit codes: 0 success, 2 usage errors, 1 everything else.
//!
//! A usage error is made where a flag is checked ([`crate::flags::usage`]); the verbs make
//! theirs through this module too (a file named on the command line that cannot be read),
//! and the retriever its [`InputError`]s (a path that does not exist, a file too large).

use crate::flags::UsageError;
pub use crate::flags::usage;
use synthkit_frontend::retrieval::InputError;

/// Exit code of a usage error (bad flags, unreadable arguments), as clap uses.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of every other failure.
pub const EXIT_FAILURE: u8 = 1;

/// The exit code for `err`.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err
        .chain()
        .any(|e| e.is::<UsageError>() || e.is::<InputError>())
    {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}

/// The message for `err`: its chain joined by `: `, leaving out causes whose text is
/// already shown (library errors often repeat their source in their own message).
pub fn message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn codes_and_messages() {
        let e = usage("bad flag");
        assert_eq!(exit_code(&e), EXIT_USAGE);
        let e = Err::<(), _>(usage("inner")).context("outer").unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert_eq!(message(&e), "outer: inner");
        let e = anyhow::anyhow!("x failed: boom").context("x failed: boom");
        assert_eq!(exit_code(&e), EXIT_FAILURE);
        assert_eq!(message(&e), "x failed: boom");
    }
}
