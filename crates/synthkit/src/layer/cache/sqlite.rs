//! The persistent store: one SQLite file (cargo feature `sqlite-cache`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use super::{CacheError, CachedReply, ResponseCache};
use crate::model::{FinishReason, Usage};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INT,
    completion_tokens INT,
    finish_reason TEXT,
    created_at INT NOT NULL
)";
const SELECT: &str =
    "SELECT text, prompt_tokens, completion_tokens, finish_reason FROM responses WHERE key = ?1";
const UPSERT: &str = "INSERT OR REPLACE INTO responses
    (key, text, prompt_tokens, completion_tokens, finish_reason, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// How long a statement waits for another process holding the file's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`ResponseCache`] in one SQLite file: table
/// `responses(key TEXT PRIMARY KEY, text, prompt_tokens, completion_tokens, finish_reason,
/// created_at)` (`created_at` in Unix seconds; the token columns are `NULL` when the
/// model reported no usage). Inspect it with the `sqlite3` shell; delete the file (and
/// its `-wal` and `-shm` companions) to empty it.
///
/// **Durability.** The file is in WAL mode with `synchronous=NORMAL`, and every
/// [`ResponseCache::put`] is one statement in autocommit mode, that is its own committed
/// transaction: when `put` returns, the reply is in the write-ahead log, written to the
/// operating system. A process killed at any point (even `SIGKILL`) therefore loses only
/// the calls that were still in flight; SQLite's atomic commits mean a half-written reply
/// is never seen. (An operating-system crash or power loss may lose the last few commits,
/// never corrupt the file: that is what `NORMAL` trades against an `fsync` per call.)
///
/// **From async code.** The connection sits behind a `Mutex`, and `get`/`put` run their
/// one statement synchronously on the calling task: a primary-key lookup or a one-row
/// insert into a local file takes microseconds to a few milliseconds (no `fsync` per
/// commit with WAL and `NORMAL`), far below a model call, so moving it to a blocking
/// thread would cost more than it saves. Several processes may share the file (a 5 s
/// busy timeout covers a write lock held by another).
///
/// Errors: [`SqliteCache::open`] fails with a clear [`CacheError`]; afterwards a failing
/// read or write is logged (`tracing::warn!` the first time, then at debug level) and
/// treated as a miss, never returned.
#[derive(Debug)]
pub struct SqliteCache {
    conn: Mutex<Connection>,
    path: PathBuf,
    warned: AtomicBool,
}

impl SqliteCache {
    /// Opens (or creates) the cache file at `path`: WAL mode, `synchronous=NORMAL`, the
    /// `responses` table. Fails if the file cannot be created or opened for writing, or
    /// is not an SQLite database with a usable `responses` table.
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
        let setup = || -> rusqlite::Result<String> {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            let mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.execute_batch(CREATE)?;
            // Both statements must compile against the table as it is (an older or
            // foreign table of the same name fails here, not at every call).
            conn.prepare_cached(SELECT)?;
            conn.prepare_cached(UPSERT)?;
            Ok(mode)
        };
        let mode = setup().map_err(|e| fail(e.to_string()))?;
        if conn.is_readonly("main").unwrap_or(false) {
            return Err(fail("the file is read-only".into()));
        }
        if !mode.eq_ignore_ascii_case("wal") {
            // Still durable per commit (rollback journal), only slower.
            tracing::warn!(path = %path.display(), mode = %mode, "the cache file cannot use WAL mode");
        }
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            warned: AtomicBool::new(false),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replies stored (0 if the file cannot be read).
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

    fn failed(&self, op: &str, error: &rusqlite::Error) {
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

impl ResponseCache for SqliteCache {
    fn get(&self, key: &str) -> Option<CachedReply> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let row = conn.prepare_cached(SELECT).and_then(|mut stmt| {
            stmt.query_row(params![key], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .optional()
        });
        match row {
            Ok(Some((text, prompt, completion, finish))) => Some(CachedReply {
                text,
                usage: match (prompt, completion) {
                    (Some(p), Some(c)) => Some(Usage {
                        prompt_tokens: from_sql_count(p),
                        completion_tokens: from_sql_count(c),
                    }),
                    _ => None,
                },
                finish_reason: finish.as_deref().map(finish_reason_from),
            }),
            Ok(None) => None,
            Err(e) => {
                self.failed("read", &e);
                None
            }
        }
    }

    fn put(&self, key: &str, value: &CachedReply) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| to_sql_count(d.as_secs()));
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let written = conn.prepare_cached(UPSERT).and_then(|mut stmt| {
            stmt.execute(params![
                key,
                value.text,
                value.usage.map(|u| to_sql_count(u.prompt_tokens)),
                value.usage.map(|u| to_sql_count(u.completion_tokens)),
                value.finish_reason.map(finish_reason_name),
                now,
            ])
        });
        if let Err(e) = written {
            self.failed("write", &e);
        }
    }
}
