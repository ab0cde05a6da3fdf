//! What every suite of the binary's tests shares: the command in a clean environment,
//! files in temporary folders, the output as text or JSON, a running `synthkit serve`,
//! and the lock that keeps the heavy real-model tests one at a time.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use synthkit::ResponseMode;

pub use synthkit_testkit::server::free_port as closed_port;

pub const MIRROR: &str =
    "The primary mirror is cleaned every three months with carbon dioxide snow.";
pub const QUESTION: &str = "How often is the primary mirror cleaned?";

/// Every response mode's name, in the reference's order ([`ResponseMode::ALL`]).
pub fn all_modes() -> impl Iterator<Item = &'static str> {
    ResponseMode::ALL.into_iter().map(ResponseMode::as_str)
}

/// Variables the command reads from its environment: removed from every run, so that
/// the caller's shell (a key, a base URL, a log level) cannot change a test's outcome.
const ENVIRONMENT: [&str; 13] = [
    "SYNTHKIT_API",
    "SYNTHKIT_BASE_URL",
    "SYNTHKIT_MODEL",
    "SYNTHKIT_REDIS_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "RUST_LOG",
    "NO_COLOR",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
];

/// Where the tests' folder indexes are kept: under the build's temporary folder, never
/// the user's cache.
pub fn test_index_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("folder-index")
}

/// `synthkit` in a clean environment, killed after 180 s.
pub fn synthkit() -> Command {
    let mut cmd = Command::cargo_bin("synthkit").unwrap();
    for var in ENVIRONMENT {
        cmd.env_remove(var);
    }
    cmd.env("SYNTHKIT_INDEX_DIR", test_index_dir());
    cmd.timeout(Duration::from_secs(180));
    cmd
}

/// `synthkit` in a clean environment, to spawn (a service, a run killed part-way).
pub fn spawn_synthkit() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_synthkit"));
    hermetic(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment the variables `synthkit` reads.
pub fn hermetic(cmd: &mut std::process::Command) {
    for var in ENVIRONMENT {
        cmd.env_remove(var);
    }
    cmd.env("SYNTHKIT_INDEX_DIR", test_index_dir());
}

/// `synthkit ARGS PATH`: a command over one file or folder.
pub fn on(path: &Path, args: &[&str]) -> Output {
    synthkit().args(args).arg(path).output().unwrap()
}

/// `synthkit ask QUESTION FLAGS... PATH`.
pub fn ask_on(path: &Path, question: &str, flags: &[&str]) -> Output {
    on(path, &[&["ask", question], flags].concat())
}

/// The flags for model `m` at the OpenAI-compatible server at `base`, with a known window
/// (no discovery).
pub fn server_flags(base: &str) -> Vec<&str> {
    vec![
        "--base-url",
        base,
        "--model",
        "m",
        "--context-window",
        "4096",
    ]
}

/// `synthkit ask QUESTION` over `dir` against the OpenAI-compatible server at `base`, with
/// a 4,096-token window, no key and `extra`.
pub fn ask_at(base: &str, dir: &Path, extra: &[&str]) -> Output {
    synthkit()
        .args(["ask", QUESTION, "--base-url", base, "-q"])
        .args(["--context-window", "4096"])
        .args(extra)
        .arg(dir)
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap()
}

/// `synthkit ARGS` run in `dir`.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    synthkit().current_dir(dir).args(args).output().unwrap()
}

/// A new temporary folder holding one file, `name` with `bytes`, and the file's path.
pub fn temp_file(name: &str, bytes: impl AsRef<[u8]>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, bytes);
    (dir, path)
}

/// Writes `bytes` to `dir/name`, creating the folders on the way.
pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A folder with three small documents; the mirror sentence is in `maintenance.md`.
pub fn docs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "about.md",
        "# About\n\nHarrow Ridge Observatory sits at 1,420 metres. The dome opens at dusk. Visitors park behind the cafe.\n",
    );
    write(
        dir.path(),
        "maintenance.md",
        format!(
            "# Maintenance\n\nThe technician plans all work. {MIRROR} The dome motors are greased every year.\n"
        ),
    );
    write(
        dir.path(),
        "notes/safety.txt",
        "Two people must be on site whenever the dome is open. Wear warm clothes.\n",
    );
    dir
}

/// `data` compressed with gzip (the reader's own gzip crate).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// The repository's sample documents (`examples/docs`).
pub fn examples_docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/docs")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Fails the test unless `text` (the stream named `what`) contains `needle` (showing it).
#[track_caller]
pub fn assert_has(what: &str, text: &str, needle: &str) {
    assert!(text.contains(needle), "no {needle:?} in {what}: {text}");
}

/// Fails the test if `text` (the stream named `what`) contains `needle` (showing it).
#[track_caller]
pub fn assert_lacks(what: &str, text: &str, needle: &str) {
    assert!(!text.contains(needle), "{needle:?} in {what}: {text}");
}

/// Fails the test unless the command's standard error contains `needle` (showing it).
#[track_caller]
pub fn assert_stderr_has(out: &Output, needle: &str) {
    assert_has("standard error", &stderr(out), needle);
}

/// Fails the test unless the command was refused as a usage error (exit status 2) whose
/// standard error contains `needle` (showing it).
#[track_caller]
pub fn assert_usage_error(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert_has("standard error", &stderr(out), needle);
}

/// Fails the test unless the command's standard output contains `needle` (showing it).
#[track_caller]
pub fn assert_stdout_has(out: &Output, needle: &str) {
    assert_has("standard output", &stdout(out), needle);
}

/// A JSON array as JSON lines: each element on its own line.
pub fn json_lines(array: &Value) -> String {
    let items = array.as_array().expect("a JSON array");
    items.iter().map(|n| format!("{n}\n")).collect()
}

/// The JSON report of a successful run.
pub fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}: {}", out.status, stderr(out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(out), stderr(out)))
}

/// The ids of a report's sources, in order.
pub fn source_ids(report: &Value) -> Vec<String> {
    report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// The tests against a real llama-server share one lock: those with the tiny model hold
/// it shared ([`llama_shared`]) and may run together; those with SmolLM2 (a real model,
/// heavy on the CPU, whose calls have a time budget) hold it alone ([`heavy`]), so they
/// run one at a time and beside no other model server of this binary.
static LLAMA: RwLock<()> = RwLock::new(());

/// The lock of a SmolLM2 test: exclusive. A test that failed holding it blocks no other.
pub fn heavy() -> RwLockWriteGuard<'static, ()> {
    LLAMA
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The lock of a tiny-model llama-server test: shared with the others like it.
pub fn llama_shared() -> RwLockReadGuard<'static, ()> {
    LLAMA
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits for `child` to end, at most `limit`: its status, or `None` after killing it.
/// The wait is an event (a thread blocked in `wait`), not polling.
pub fn wait_exit(mut child: Child, limit: Duration) -> Option<ExitStatus> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx.recv_timeout(limit).ok().and_then(Result::ok);
    if status.is_none() {
        signal(pid, "-KILL");
    }
    waiter.join().unwrap();
    status
}

/// CPU time `pid` has used so far, in clock ticks (`utime + stime` of `/proc/PID/stat`).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name (in parentheses, which may hold spaces): the state is
    // field 3, utime field 14 and stime field 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// How long a child may go without any progress before [`wait_while_progressing`] calls
/// it hung.
pub const STALL: Duration = Duration::from_secs(120);

/// Waits for `child` to end, calling `each` every 10 ms meanwhile (to sample its memory,
/// say). A hang fails the test, a slow machine does not: the child is killed and the
/// test fails only after [`STALL`] in which `progress` (a count that grows as the child
/// works: its CPU time, lines written) did not change. There is no bound on the run's
/// total time.
pub fn wait_while_progressing(
    child: &mut Child,
    what: &str,
    mut progress: impl FnMut() -> u64,
    mut each: impl FnMut(),
) -> ExitStatus {
    let mut last = progress();
    let mut moved = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        each();
        let now = progress();
        if now != last {
            (last, moved) = (now, Instant::now());
        } else if moved.elapsed() > STALL {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: no progress in {STALL:?} (stuck at {last})");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Peak resident set size of a running process, in KiB (`VmHWM`).
pub fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix("VmHWM:")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// [`wait_while_progressing`] for a child that writes `out` as it works: its progress is
/// the bytes written and the CPU time used. Returns how it ended and its peak resident
/// set size in KiB (0 when none was read).
pub fn wait_writing(child: &mut Child, what: &str, out: &Path) -> (ExitStatus, u64) {
    let pid = child.id();
    let mut peak = 0;
    let status = wait_while_progressing(
        child,
        what,
        || std::fs::metadata(out).map_or(0, |m| m.len()) + cpu_ticks(pid).unwrap_or(0),
        || peak = peak_rss_kb(pid).unwrap_or(peak).max(peak),
    );
    (status, peak)
}

/// Sends `sig` (`-TERM`, `-KILL`) to `pid`.
pub fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

/// A running `synthkit serve` on a free loopback port; killed when dropped.
pub struct Service {
    pub addr: String,
    child: Option<Child>,
}

impl Service {
    /// `cmd` (a `synthkit serve` without `--bind`, or a shell wrapping it that passes
    /// the address on) on a free port, its stdout dropped and its stderr to `stderr`;
    /// returns once `GET /healthz` answers 200, failing if it ends first or takes over
    /// 30 s.
    pub fn start(mut cmd: std::process::Command, stderr: Stdio) -> Self {
        let addr = format!("127.0.0.1:{}", closed_port());
        let child = cmd
            .args(["--bind", &addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut service = Self {
            addr,
            child: Some(child),
        };
        // Polling: nothing tells us when the service is listening. The deadline is a
        // safety net for a service that never starts, not a bound on its speed.
        let deadline = Instant::now() + Duration::from_secs(120);
        while get(&service.addr, "/healthz", Duration::from_secs(2)).map(|r| r.0) != Some(200) {
            if let Some(status) = service.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("serve ended before it answered ({status})");
            }
            assert!(Instant::now() < deadline, "the service did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        service
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGTERM, then its exit status (`None`: still running after 60 s, then killed).
    pub fn terminate(mut self) -> Option<ExitStatus> {
        let child = self.child.take().unwrap();
        signal(child.id(), "-TERM");
        wait_exit(child, Duration::from_secs(60))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `METHOD path` on `addr` over a fresh HTTP/1.1 connection, with `headers` and `body`:
/// the status and body, or `None` if no answer came within `limit`.
pub fn request(
    addr: &str,
    head: &str,
    headers: &[(&str, &str)],
    body: &str,
    limit: Duration,
) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    let mut text = format!("{head} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(text.as_bytes()).ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.get(9..12)?.parse().ok()?;
    let (head, rest) = answer.split_once("\r\n\r\n")?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Some((status, if chunked { dechunk(rest) } else { rest.into() }))
}

/// `GET path` on `addr`: see [`request`].
pub fn get(addr: &str, path: &str, limit: Duration) -> Option<(u16, String)> {
    request(addr, &format!("GET {path}"), &[], "", limit)
}

/// The body of a chunked transfer.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}
