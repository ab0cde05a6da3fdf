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
