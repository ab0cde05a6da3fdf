//! Helpers of the reading tests: files written into a temporary tree, paths shown
//! relative to it, and a read that must end within a deadline.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use synthkit_documents::{ReadOptions, ReadReport, read_paths};

/// Writes `bytes` to `root/name`, making its folders.
pub fn write(root: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = root.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Writes each `(name, text)` under `root`.
pub fn write_all(root: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        write(root, name, text);
    }
}

/// `path` relative to `root` (as it is when outside it).
pub fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Reads `path` with a deadline, so that a walk that never ends fails the test.
pub fn read_within_deadline(path: &Path, options: ReadOptions) -> ReadReport {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(read_paths(&[path], &options));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the read did not finish in 60 s (a symlink loop followed?)")
        .unwrap()
}
