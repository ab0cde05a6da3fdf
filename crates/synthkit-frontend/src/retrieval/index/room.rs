//! What the indexes of one index folder may take together: the bound and its eviction,
//! and an index's files (SQLite's write-ahead log and shared memory beside it).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{EXTENSION, MAX_INDEX_BYTES, UNUSED_DAYS};

/// Removes the indexes of `dir` unused for [`UNUSED_DAYS`] days, then the least recently
/// used until all fit in [`MAX_INDEX_BYTES`]; `current` goes last (and only when it alone
/// is over the bound).
pub(super) fn make_room(dir: &Path, current: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let unused = Duration::from_secs(UNUSED_DAYS * 24 * 3600);
    let now = SystemTime::now();
    let mut indexes: Vec<(bool, SystemTime, u64, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let used = meta.modified().unwrap_or(now);
        let size = meta.len() + companion_size(&path);
        indexes.push((path == current, used, size, path));
    }
    // Oldest first, the current one last.
    indexes.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut total: u64 = indexes.iter().map(|i| i.2).sum();
    for (is_current, used, size, path) in indexes {
        let stale = !is_current && now.duration_since(used).is_ok_and(|age| age > unused);
        if !stale && total <= MAX_INDEX_BYTES {
            continue;
        }
        remove(&path);
        total = total.saturating_sub(size);
    }
}

/// SQLite's write-ahead log and shared-memory files beside an index.
fn companions(path: &Path) -> [PathBuf; 2] {
    let name = path.as_os_str().to_os_string();
    let with = |suffix: &str| {
        let mut n = name.clone();
        n.push(suffix);
        PathBuf::from(n)
    };
    [with("-wal"), with("-shm")]
}

fn companion_size(path: &Path) -> u64 {
    companions(path)
        .iter()
        .filter_map(|p| fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// Removes the index file at `path` and SQLite's files beside it.
pub fn remove(path: &Path) {
    let _ = fs::remove_file(path);
    for c in companions(path) {
        let _ = fs::remove_file(c);
    }
}
