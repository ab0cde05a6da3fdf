//! [`RedisServer`]: a real `redis-server` on a free loopback port, for the scale-out tests
//! and the load program; killed on drop.
//!
//! [`RedisServer::for_test`] skips with a message when `redis-server` is not installed,
//! unless `CI` is set: then it fails (CI must install it: `apt-get install -y redis-server`).

use std::io::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::free_port;

/// How long a started server may take to accept connections.
const START_DEADLINE: Duration = Duration::from_secs(10);

/// A running `redis-server` (no persistence); killed when dropped.
pub struct RedisServer {
    /// `redis://127.0.0.1:PORT/`.
    pub url: String,
    child: Child,
}

impl RedisServer {
    /// Starts one, or says why it cannot.
    pub fn start() -> Result<Self, String> {
        let mut last = String::new();
        // The port is chosen before redis binds it: another process may take it first.
        for _attempt in 0..3 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run redis-server: {e}"))?;
            let mut server = Self {
                url: format!("redis://127.0.0.1:{port}/"),
                child,
            };
            match server.wait_listening(port) {
                Ok(()) => return Ok(server),
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    /// A server for a test: `None` after a skip message when `redis-server` is not
    /// installed (a failure under `CI`).
    pub fn for_test() -> Option<Self> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-server is not installed: CI must install it (apt-get install -y redis-server)"
            );
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: redis-server is not installed (apt-get install -y redis-server)"
            );
            return None;
        }
        Some(Self::start().unwrap_or_else(|why| panic!("{why}")))
    }

    /// Waits until the server accepts connections on `port`, or it exits, or the deadline.
    fn wait_listening(&mut self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let listening = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            // Exited: the port was someone else's (or redis failed); try another.
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("redis-server exited with {status} (port {port})"));
            }
            if listening {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "redis-server did not listen on port {port} within {START_DEADLINE:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
