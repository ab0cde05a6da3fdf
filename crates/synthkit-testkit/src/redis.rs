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

/// A fake Redis on loopback that answers `PING` with `PONG` and every other command with
/// `OK` (enough for a client to connect) until [`HungRedis::hang`]; from then on it reads
/// every command and answers none, as a Redis that is stopped or stuck does, with the
/// connection left open.
pub struct HungRedis {
    /// `redis://127.0.0.1:PORT/`.
    pub url: String,
    hung: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The commands read (their names, upper case) since [`HungRedis::hang`].
    unanswered: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    port: u16,
}

impl HungRedis {
    /// Starts it, answering.
    pub fn start() -> Self {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hung = Arc::new(AtomicBool::new(false));
        let unanswered = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, u, s) = (
            Arc::clone(&hung),
            Arc::clone(&unanswered),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Acquire) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (h, u) = (Arc::clone(&h), Arc::clone(&u));
                std::thread::spawn(move || serve_resp(conn, &h, &u));
            }
        });
        Self {
            url: format!("redis://127.0.0.1:{port}/"),
            hung,
            unanswered,
            stop,
            port,
        }
    }

    /// From now on no command is answered.
    pub fn hang(&self) {
        self.hung.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The commands read and left unanswered since [`HungRedis::hang`], in arrival
    /// order: their names, upper case (`EVALSHA`, `GET`...). Each is a round trip some
    /// client waited on until its own timeout.
    pub fn unanswered(&self) -> Vec<String> {
        self.unanswered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Drop for HungRedis {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        // Wakes the accept loop so that it sees the stop.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads RESP commands from `conn` until it closes; answers them while `hung` is unset,
/// and records in `unanswered` the names of those it leaves unanswered.
fn serve_resp(
    conn: std::net::TcpStream,
    hung: &std::sync::atomic::AtomicBool,
    unanswered: &std::sync::Mutex<Vec<String>>,
) {
    use std::io::{BufRead as _, BufReader, Read as _};
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        // `*N` then N bulk strings `$LEN` + bytes; an inline command is one line.
        let mut words: Vec<String> = Vec::new();
        if let Some(n) = line.trim_end().strip_prefix('*') {
            let n: usize = n.parse().unwrap_or(0);
            for _ in 0..n {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let len: usize = line.trim_end().trim_start_matches('$').parse().unwrap_or(0);
                let mut bytes = vec![0u8; len + 2];
                if reader.read_exact(&mut bytes).is_err() {
                    return;
                }
                bytes.truncate(len);
                words.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        } else {
            words.extend(line.split_whitespace().map(str::to_string));
        }
        if hung.load(std::sync::atomic::Ordering::Acquire) {
            let name = words.first().map_or_else(String::new, |w| w.to_uppercase());
            unanswered
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(name);
            continue;
        }
        let answer: &[u8] = if words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("PING"))
        {
            b"+PONG\r\n"
        } else {
            b"+OK\r\n"
        };
        if out.write_all(answer).is_err() {
            return;
        }
    }
}
