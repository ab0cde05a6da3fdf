//! The command's own lines on standard error: `note:` (hidden by `--quiet`) and
//! `warning:` (always shown). A leaf: every tier may say something.

/// An informational note on standard error (hidden by `--quiet`).
pub fn note(quiet: bool, message: &str) {
    if !quiet {
        eprintln!("note: {message}");
    }
}

/// A warning on standard error (always shown).
pub fn warn(message: &str) {
    eprintln!("warning: {message}");
}

/// The retriever's notes and warnings ([`synthkit_frontend::retrieval::Tell`]) as this
/// command's own lines on standard error.
pub struct Stderr;

impl synthkit_frontend::retrieval::Tell for Stderr {
    fn note(&self, message: &str) {
        note(false, message);
    }

    fn warn(&self, message: &str) {
        warn(message);
    }
}
