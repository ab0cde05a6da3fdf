//! Several processes opening one new SQLite cache file at the same moment all succeed
//! (issue 17, item 8: "database is locked" when jobs share a fresh `--cache` file).
//!
//! The race is between real processes: this test binary runs itself again as
//! [`RACERS`] children. Each child says it is ready on stdout and waits for a byte on
//! stdin; once all are ready the parent writes the byte to every child at once, so the
//! opens start within microseconds of each other (no sleep sets the start). Each child
//! then opens the cache, writes one reply and reads it back. Repeated for [`ROUNDS`]
//! rounds, each on a fresh file.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use synthkit::layer::cache::{CachedReply, ResponseCache, SqliteCache};

const RACERS: usize = 6;
const ROUNDS: usize = 10;
/// The environment variable that turns the child test on: the cache file's path.
const CHILD_VAR: &str = "SYNTHKIT_CACHE_RACE_FILE";
/// The environment variable with the child's number.
const INDEX_VAR: &str = "SYNTHKIT_CACHE_RACE_INDEX";
/// What a child prints once it waits for the start.
const READY: &str = "RACER-READY";
/// What a child prints when its open, write and read succeeded.
const DONE: &str = "RACER-DONE";
/// The longest one child may take, start to end.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// The child: does nothing unless the parent set [`CHILD_VAR`].
#[test]
fn race_child() {
    let Ok(path) = std::env::var(CHILD_VAR) else {
        return;
    };
    let index = std::env::var(INDEX_VAR).unwrap();
    // libtest has written `test race_child ... ` without a newline: a marker is safer.
    println!("{READY}");
    std::io::stdout().flush().unwrap();
    let mut go = [0u8; 1];
    std::io::stdin().read_exact(&mut go).unwrap();
    let cache = match SqliteCache::open(&path) {
        Ok(c) => c,
        Err(e) => {
            println!("open failed: {e}");
            std::process::exit(3);
        }
    };
    let key = format!("key {index}");
    let reply = CachedReply {
        text: format!("reply {index}"),
        ..CachedReply::default()
    };
    futures::executor::block_on(cache.put(&key, &reply));
    match futures::executor::block_on(cache.get(&key)) {
        Some(found) if found == reply => println!("{DONE}"),
        other => {
            println!("read back {other:?}");
            std::process::exit(4);
        }
    }
}

/// The child test's name as libtest knows it in this binary (`cache_race::race_child`:
/// the module path without the crate's name).
fn child_test() -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or(module, |(_, m)| m);
    format!("{module}::race_child")
}

/// Starts one child that opens `path`, and waits for it to say it is ready.
fn spawn_child(
    path: &std::path::Path,
    index: usize,
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test(),
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_VAR, path)
        .env(INDEX_VAR, index.to_string())
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let ready = loop {
        line.clear();
        match out.read_line(&mut line) {
            Ok(0) | Err(_) => break false,
            Ok(_) if line.contains(READY) => break true,
            Ok(_) => {}
        }
    };
    if ready {
        (child, out)
    } else {
        let status = child.wait();
        panic!("child {index} ended before it was ready: {status:?}");
    }
}

/// Waits for `child` (bounded) and returns whether it succeeded and what it printed.
fn finish(mut child: Child, mut out: BufReader<std::process::ChildStdout>) -> (bool, String) {
    // Reading stdout to its end is the wait: it ends when the child exits.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            panic!("a child did not finish within {CHILD_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let text = reader.join().unwrap();
    (
        status.success() && text.contains(DONE),
        format!("{text}{stderr}"),
    )
}

#[test]
fn processes_opening_one_new_cache_file_at_once_all_succeed() {
    if std::env::var(CHILD_VAR).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut failed_children = 0;
    for round in 0..ROUNDS {
        let path = dir.path().join(format!("round-{round}.db"));
        let mut children: Vec<_> = (0..RACERS).map(|i| spawn_child(&path, i)).collect();
        // Every child is blocked on its stdin now: let them all go.
        for (child, _) in &mut children {
            let stdin = child.stdin.as_mut().unwrap();
            stdin.write_all(b"g").unwrap();
            stdin.flush().unwrap();
        }
        for (i, (child, out)) in children.into_iter().enumerate() {
            let (ok, text) = finish(child, out);
            if !ok {
                failed_children += 1;
                failures.push(format!("round {round}, child {i}: {}", text.trim()));
            }
        }
        // Every reply is there: no child's write was lost.
        let stored = SqliteCache::open(&path).map(|c| c.len());
        if stored.as_ref().ok() != Some(&RACERS) {
            failures.push(format!("round {round}: {stored:?} replies stored"));
        }
    }
    assert!(
        failures.is_empty(),
        "{failed_children} of {} processes failed:\n{}",
        RACERS * ROUNDS,
        failures.join("\n")
    );
}
