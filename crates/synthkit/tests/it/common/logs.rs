//! Every log line a test's own thread writes, captured at every level.

use std::io;
use std::sync::{Arc, Mutex};

/// A writer appending to a shared buffer, for the tracing subscriber.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Captures every event at every level, without colours, on this thread until the guard
/// drops. The subscriber is the thread's default (never the process's global one, which
/// the other tests of this binary share): run the test on a current-thread runtime so
/// that everything it polls logs here.
pub fn capture() -> (tracing::subscriber::DefaultGuard, Captured) {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    // A callsite another thread was registering while this subscriber was installed may
    // have cached "no one listens"; ask every callsite again, now that it is.
    tracing::callsite::rebuild_interest_cache();
    (guard, logs)
}
