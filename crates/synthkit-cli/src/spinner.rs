//! The spinner shown on standard error while files are read, split and ranked, before
//! any model call (reading `/usr/share/doc` takes tens of seconds): `reading: 1,204
//! files, 38.2 MB (/usr/share/doc/bash/NEWS.gz)`. Never drawn when standard error is not a
//! terminal or with `--quiet`.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use synthkit_documents::ProgressFn;

/// Characters of the current path shown (its end).
const PATH_CHARS: usize = 60;

/// A spinner with a message, cleared when its last clone is dropped.
#[derive(Clone)]
pub struct Spinner {
    bar: Option<Arc<Bar>>,
}

/// The bar, cleared on drop (indicatif would leave it on the terminal).
struct Bar(ProgressBar);

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl Spinner {
    /// A spinner that draws only if `enabled` and standard error is a terminal.
    pub fn new(enabled: bool) -> Self {
        if !enabled || !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Self {
            bar: Some(Arc::new(Bar(bar))),
        }
    }

    /// Says what is being done now.
    pub fn set(&self, message: impl Into<String>) {
        if let Some(bar) = &self.bar {
            bar.0.set_message(message.into());
        }
    }

    /// The reader's progress callback, showing files and bytes read.
    pub fn reading(&self) -> ProgressFn {
        let spinner = self.clone();
        Arc::new(move |p| {
            // Redrawing is throttled by indicatif; formatting is cheap.
            spinner.set(reading_message(p.files, p.bytes, p.path));
        })
    }

    /// Removes the spinner from the terminal.
    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.0.finish_and_clear();
        }
    }
}

/// `reading: 1,204 files, 38.2 MB (…/bash/NEWS.gz)`.
fn reading_message(files: usize, bytes: u64, path: &Path) -> String {
    let path = path.display().to_string();
    let count = path.chars().count();
    let shown = if count > PATH_CHARS {
        let tail: String = path.chars().skip(count - PATH_CHARS + 1).collect();
        format!("…{tail}")
    } else {
        path
    };
    format!(
        "reading: {} file{}, {:.1} MB ({shown})",
        thousands(files),
        if files == 1 { "" } else { "s" },
        bytes as f64 / 1e6
    )
}

pub use synthkit_frontend::retrieval::thousands;

/// The retriever's progress on this spinner.
impl synthkit_frontend::retrieval::Progress for Spinner {
    fn set(&self, what: &str) {
        Spinner::set(self, what);
    }

    fn clear(&self) {
        Spinner::clear(self);
    }

    fn reading(&self) -> Option<synthkit_documents::ProgressFn> {
        self.bar.is_some().then(|| Spinner::reading(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
        let m = reading_message(1, 2_500_000, Path::new("docs/a.md"));
        assert_eq!(m, "reading: 1 file, 2.5 MB (docs/a.md)");
        let long = "x/".repeat(50);
        assert!(reading_message(3, 0, Path::new(&long)).contains("(…"));
    }
}
