//! The work a check has done and the flag that stops it ([`Work`]): the quote checks poll
//! it, so a check whose caller is gone stops within a few thousand steps.

use std::sync::atomic::{AtomicBool, Ordering};

/// The check polls its stop flag once every this many steps.
pub(super) const POLL_EVERY: u64 = 4096;

/// The work a check has done, in steps (characters read, sources' bytes searched,
/// lookups made), and the flag that stops it: set once its caller is gone.
#[derive(Debug)]
pub(crate) struct Work<'a> {
    steps: u64,
    next_poll: u64,
    stop: &'a AtomicBool,
}

/// The check stopped before its end: its caller is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

impl<'a> Work<'a> {
    /// No work done yet; the check stops once `stop` is set.
    pub(crate) fn new(stop: &'a AtomicBool) -> Self {
        Work {
            steps: 0,
            next_poll: 0,
            stop,
        }
    }

    /// The steps counted so far.
    pub(crate) fn steps(&self) -> u64 {
        self.steps
    }

    /// Counts `n` steps (about to be done); every [`POLL_EVERY`] steps, stops when asked.
    pub(crate) fn step(&mut self, n: usize) -> Result<(), Stopped> {
        self.steps = self.steps.saturating_add(n as u64);
        if self.steps >= self.next_poll {
            self.next_poll = self.steps.saturating_add(POLL_EVERY);
            if self.stop.load(Ordering::Relaxed) {
                return Err(Stopped);
            }
        }
        Ok(())
    }
}
