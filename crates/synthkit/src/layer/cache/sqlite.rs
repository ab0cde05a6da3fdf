//! The persistent store: one SQLite file (cargo feature `sqlite-cache`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, params};

use super::{CacheError, CachedReply, ResponseCache};
use crate::model::{FinishReason, Usage};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INT,
    completion_tokens INT,
    finish_reason TEXT,
    created_at INT NOT NULL,
    reasoning_tokens INT,
    thinking TEXT
)";
/// Columns added after the first release: a file made before them gets them on open
/// (its rows read as without thinking).
const ADDED: [(&str, &str); 2] = [
    (
        "reasoning_tokens",
        "ALTER TABLE responses ADD COLUMN reasoning_tokens INT",
    ),
    ("thinking", "ALTER TABLE responses ADD COLUMN thinking TEXT"),
];
const SELECT: &str = "SELECT text, prompt_tokens, completion_tokens, finish_reason,
    reasoning_tokens, thinking FROM responses WHERE key = ?1";
const UPSERT: &str = "INSERT OR REPLACE INTO responses
    (key, text, prompt_tokens, completion_tokens, finish_reason, created_at,
     reasoning_tokens, thinking)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// How long a statement waits for another process holding the file's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest pause between two tries of a setup statement that found the file busy.
const MAX_SETUP_PAUSE: Duration = Duration::from_millis(50);

/// Readies a new connection: the busy timeout first (before anything touches the file),
/// then WAL mode, `synchronous=NORMAL`, the table, and a check that both statements
/// compile against it. Returns the journal mode in force.
///
/// Several processes may open one new file at the same moment. SQLite's busy handler
/// does not cover every case then: switching to WAL needs an exclusive lock, and a
/// connection that holds a shared lock while another waits for the exclusive one gets
/// `SQLITE_BUSY` at once (waiting could deadlock). So each step is tried again, after a
/// short pause that lets the locks go, until [`BUSY_TIMEOUT`] has passed; and WAL mode
/// that another process has switched on already is taken as done.
fn setup(conn: &Connection) -> rusqlite::Result<String> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mode = retry_busy(deadline, || {
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(mode);
        }
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
    })?;
    retry_busy(deadline, || {
        conn.pragma_update(None, "synchronous", "NORMAL")
    })?;
    retry_busy(deadline, || conn.execute_batch(CREATE))?;
    for (column, add) in ADDED {
        retry_busy(deadline, || add_column(conn, column, add))?;
    }
    // Both statements must compile against the table as it is (an older or foreign
    // table of the same name fails here, not at every call).
    retry_busy(deadline, || {
        conn.prepare_cached(SELECT)?;
        conn.prepare_cached(UPSERT)?;
        Ok(())
    })?;
    Ok(mode)
}

/// Adds `column` with `add` unless the table has it (another process may have added it
/// at the same moment: a duplicate column is taken as done).
fn add_column(conn: &Connection, column: &str, add: &str) -> rusqlite::Result<()> {
    let mut has = false;
    conn.pragma(None, "table_info", "responses", |r| {
        has |= r.get::<_, String>(1)? == column;
        Ok(())
    })?;
    if has {
        return Ok(());
    }
    match conn.execute_batch(add) {
        Err(e) if e.to_string().contains("duplicate column") => Ok(()),
        other => other,
    }
}

/// Runs `step` until it succeeds, fails with something other than "busy", or
/// `deadline` passes (then the last "busy" error is returned). Pauses grow from 1 ms to
/// [`MAX_SETUP_PAUSE`].
fn retry_busy<T>(
    deadline: Instant,
    mut step: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut pause = Duration::from_millis(1);
    loop {
        match step() {
            Err(e) if is_busy(&e) && Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_SETUP_PAUSE);
            }
            done => return done,
        }
    }
}

/// Whether `e` says another connection holds a lock on the file (`SQLITE_BUSY`, with
/// any extended code, or `SQLITE_LOCKED`).
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A [`ResponseCache`] in one SQLite file: table
/// `responses(key TEXT PRIMARY KEY, text, prompt_tokens, completion_tokens, finish_reason,
/// created_at)` (`created_at` in Unix seconds; the token columns are `NULL` when the
/// model reported no usage). Inspect it with the `sqlite3` shell; delete the file (and
/// its `-wal` and `-shm` companions) to empty it.
///
/// **Durability.** The file is in WAL mode with `synchronous=NORMAL`, and every
/// [`ResponseCache::put`] is one statement in autocommit mode, that is its own committed
/// transaction: when the future `put` returns resolves, the reply is in the write-ahead
/// log, written to the operating system. A process killed at any point (even `SIGKILL`)
/// therefore loses only the calls that were still in flight; SQLite's atomic commits mean
/// a half-written reply is never seen. (An operating-system crash or power loss may lose
/// the last few commits, never corrupt the file: that is what `NORMAL` trades against an
/// `fsync` per call.)
///
/// **From async code.** `get` and `put` never block the task that awaits them: each runs
/// its one statement on tokio's blocking pool ([`tokio::task::spawn_blocking`]), with the
/// connection shared as an `Arc<Mutex<Connection>>` (one statement at a time per
/// `SqliteCache`; the others wait their turn on blocking threads). A statement usually
/// takes microseconds to a few milliseconds, but several processes may share the file,
/// and a write then waits up to a 5 s busy timeout for a write lock held by another
/// process (or connection): that wait occupies a blocking-pool thread, never a runtime
/// worker, so other tasks keep running, on a current-thread runtime too. The statement
/// is handed to the pool when the future is first polled. Dropping the future after that
/// does not stop it: it runs to its end on its thread (one row, bounded by the busy
/// timeout), so a `put` whose caller has gone still commits its reply (complete and
/// correct, so a later run finds it) and a `get`'s answer is thrown away; a runtime
/// shutting down waits for the statements still running. Outside a tokio runtime (under
/// another executor) the statement runs on the thread that polls the future.
/// [`SqliteCache::open`] and [`SqliteCache::len`] are synchronous and block the calling
/// thread: open the cache before the work starts (or inside `spawn_blocking`).
///
/// **Shared files.** Several processes may use one file, and may open (even create) it
/// at the same moment: [`SqliteCache::open`] sets the busy timeout before anything else
/// and tries the switch to WAL mode and the table's creation again while another
/// process holds the lock (up to the busy timeout in all).
///
/// Errors: [`SqliteCache::open`] fails with a clear [`CacheError`]; afterwards a failing
/// read or write is logged (`tracing::warn!` the first time, then at debug level) and
/// treated as a miss, never returned.
#[derive(Debug)]
pub struct SqliteCache {
    /// Shared with the blocking tasks that run the statements.
    conn: Arc<Mutex<Connection>>,
    /// Where failures are reported from (the blocking tasks too).
    log: Arc<FailureLog>,
}

/// Logs store failures: a warning the first time, then at debug level.
#[derive(Debug)]
struct FailureLog {
    path: PathBuf,
    warned: AtomicBool,
}

impl FailureLog {
    fn failed(&self, op: &str, error: &dyn fmt::Display) {
        if self.warned.swap(true, Ordering::Relaxed) {
            tracing::debug!(path = %self.path.display(), %error, "response cache {op} failed");
        } else {
            tracing::warn!(
                path = %self.path.display(),
                %error,
                "response cache {op} failed; going on without it for this call (further failures are logged at debug level)"
            );
        }
    }
}

impl SqliteCache {
    /// Opens (or creates) the cache file at `path`: WAL mode, `synchronous=NORMAL`, the
    /// `responses` table. Fails if the file cannot be created or opened for writing, or
    /// is not an SQLite database with a usable `responses` table.
    ///
    /// Blocks the calling thread (file I/O, and up to the busy timeout if another
    /// process holds the file's lock).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CacheError> {
        let path = path.as_ref();
        let fail = |message: String| CacheError::Open {
            path: path.display().to_string(),
            message,
        };
        if path.is_dir() {
            return Err(fail("it is a directory".into()));
        }
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        let mode = setup(&conn).map_err(|e| fail(e.to_string()))?;
        if conn.is_readonly("main").unwrap_or(false) {
            return Err(fail("the file is read-only".into()));
        }
        if !mode.eq_ignore_ascii_case("wal") {
            // Still durable per commit (rollback journal), only slower.
            tracing::warn!(path = %path.display(), mode = %mode, "the cache file cannot use WAL mode");
        }
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            log: Arc::new(FailureLog {
                path: path.to_path_buf(),
                warned: AtomicBool::new(false),
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.log.path
    }

    /// Replies stored (0 if the file cannot be read). Blocks the calling thread: meant
    /// for tools and tests, not for a hot async path.
    pub fn len(&self) -> usize {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.query_row("SELECT count(*) FROM responses", [], |r| r.get::<_, i64>(0))
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `statement` with the connection on tokio's blocking pool (on the polling
    /// thread outside a tokio runtime), once the future is first polled. A failure is
    /// logged (from the blocking thread, so also when nobody awaits any more) and gives
    /// `None`.
    fn run<T, F>(&self, op: &'static str, statement: F) -> BoxFuture<'static, Option<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let log = Arc::clone(&self.log);
        let task = {
            let log = Arc::clone(&log);
            move || {
                let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
                statement(&conn).inspect_err(|e| log.failed(op, e)).ok()
            }
        };
        Box::pin(async move {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return task();
            };
            // Dropping the handle (the caller gave up) detaches the task; it still runs
            // its one statement to the end (see the type's docs).
            match runtime.spawn_blocking(task).await {
                Ok(found) => found,
                Err(e) => {
                    // The statement panicked, or the runtime is shutting down.
                    log.failed(op, &e);
                    None
                }
            }
        })
    }
}

fn to_sql_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn from_sql_count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn finish_reason_name(r: FinishReason) -> &'static str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Other => "other",
    }
}

fn finish_reason_from(name: &str) -> FinishReason {
    match name {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        _ => FinishReason::Other,
    }
}

/// The row under `key`, if any (one blocking statement).
fn read(conn: &Connection, key: &str) -> rusqlite::Result<Option<CachedReply>> {
    let row = conn.prepare_cached(SELECT)?.query_row(params![key], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, Option<i64>>(2)?,
            r.get::<_, Option<String>>(3)?,
            r.get::<_, Option<i64>>(4)?,
            r.get::<_, Option<String>>(5)?,
        ))
    });
    Ok(row.optional()?.map(
        |(text, prompt, completion, finish, reasoning, thinking)| CachedReply {
            text,
            usage: match (prompt, completion) {
                (Some(p), Some(c)) => Some(Usage {
                    prompt_tokens: from_sql_count(p),
                    completion_tokens: from_sql_count(c),
                    reasoning_tokens: reasoning.map_or(0, from_sql_count),
                    // A replayed reply reused no server cache: nothing was sent.
                    ..Usage::default()
                }),
                _ => None,
            },
            finish_reason: finish.as_deref().map(finish_reason_from),
            thinking: thinking.unwrap_or_default(),
        },
    ))
}

/// Stores `value` under `key` (one blocking statement, its own transaction).
fn write(conn: &Connection, key: &str, value: &CachedReply) -> rusqlite::Result<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| to_sql_count(d.as_secs()));
    conn.prepare_cached(UPSERT)?.execute(params![
        key,
        value.text,
        value.usage.map(|u| to_sql_count(u.prompt_tokens)),
        value.usage.map(|u| to_sql_count(u.completion_tokens)),
        value.finish_reason.map(finish_reason_name),
        now,
        value.usage.map(|u| to_sql_count(u.reasoning_tokens)),
        value.thinking,
    ])?;
    Ok(())
}

impl ResponseCache for SqliteCache {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<CachedReply>> {
        let key = key.to_owned();
        let found = self.run("read", move |conn| read(conn, &key));
        Box::pin(async move { found.await.flatten() })
    }

    fn put<'a>(&'a self, key: &'a str, value: &'a CachedReply) -> BoxFuture<'a, ()> {
        let (key, value) = (key.to_owned(), value.clone());
        let written = self.run("write", move |conn| write(conn, &key, &value));
        Box::pin(async move {
            written.await;
        })
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn reply(text: &str) -> CachedReply {
        CachedReply {
            text: text.into(),
            usage: Some(Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                ..Default::default()
            }),
            finish_reason: Some(FinishReason::Length),
            thinking: String::new(),
        }
    }

    #[test]
    fn outside_a_tokio_runtime_statements_run_on_the_polling_thread() {
        let dir = tempfile::tempdir().unwrap();
        let c = SqliteCache::open(dir.path().join("c.db")).unwrap();
        futures::executor::block_on(c.put("k", &reply("v")));
        assert_eq!(futures::executor::block_on(c.get("k")), Some(reply("v")));
        assert_eq!(futures::executor::block_on(c.get("other")), None);
    }

    #[tokio::test]
    async fn nothing_runs_before_the_first_poll() {
        let dir = tempfile::tempdir().unwrap();
        let c = SqliteCache::open(dir.path().join("c.db")).unwrap();
        let v = reply("v");
        let never_polled = c.put("k", &v);
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(never_polled);
        assert!(c.is_empty());
        c.put("k", &v).await;
        assert_eq!(c.len(), 1);
    }

    /// A `put` whose caller gives up once the statement is on the blocking pool still
    /// commits (here it waits for another connection's write lock first).
    #[tokio::test]
    async fn a_dropped_put_still_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let c = SqliteCache::open(&path).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        // One poll hands the statement to the pool, where it waits for the lock; then
        // the future is dropped.
        assert_eq!(c.put("k", &reply("v")).now_or_never(), None);
        tokio::time::sleep(Duration::from_millis(100)).await;
        other.execute_batch("COMMIT").unwrap();
        let start = Instant::now();
        while c.is_empty() && start.elapsed() < BUSY_TIMEOUT {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(c.get("k").await, Some(reply("v")));
    }
}
