//! Paused tokio time for tests that also do real I/O (a loopback server).
//!
//! With `#[tokio::test(start_paused = true)]`, tokio moves the paused clock on to the next
//! timer whenever the runtime has nothing to run: also while it only waits for a socket,
//! which would fire an HTTP timeout the moment a request is sent. A [`Hold`] stops that:
//! while one lives, the clock moves only when the test calls `tokio::time::advance`, so
//! timeouts and retry waits happen exactly when the test says and cost no wall time.
//!
//! It works the way tokio documents for this case ("Preventing auto-advance" under
//! `tokio::time::pause`): a `spawn_blocking` task in flight inhibits auto-advance.
#![allow(dead_code, missing_docs)]

/// Keeps the paused clock from auto-advancing while it lives (or until
/// [`Hold::release`]). Make it inside the test's runtime.
pub struct Hold {
    release: Option<std::sync::mpsc::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Hold {
    pub fn new() -> Self {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        // The blocking task inhibits auto-advance from the moment it is spawned until it
        // ends, which is when `release` is dropped.
        let task = tokio::task::spawn_blocking(move || {
            let _ = wait.recv();
        });
        Self {
            release: Some(release),
            task: Some(task),
        }
    }

    /// Lets the clock auto-advance again, and returns once it can (the blocking task has
    /// ended).
    pub async fn release(mut self) {
        drop(self.release.take());
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Default for Hold {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        // Ends the blocking task (auto-advance resumes as soon as it has returned).
        drop(self.release.take());
    }
}
