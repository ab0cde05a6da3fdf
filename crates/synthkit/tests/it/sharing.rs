//! `layer::sharing`: the options every front end reads into one value, what is refused
//! before anything is opened, and the budget and cache applied to a stack (a repeated call
//! answered from the cache; a file cache kept for the next stack). Redis itself is
//! exercised by the service's scale-out tests and the Python package's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use synthkit::layer::sharing::{CacheLocation, Sharing, SharingError, SharingOptions};
use synthkit::layer::stack::{CacheIdentity, ModelStack};
use synthkit::testing::ScriptedModel;
use synthkit::{Node, Synthesizer};

/// A model counting its calls.
fn counting(calls: &Arc<AtomicUsize>) -> ScriptedModel {
    let calls = Arc::clone(calls);
    ScriptedModel::new(crate::common::fixtures::scripted(4096, 64), move |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok("ok".into())
    })
}

/// A stack around a model counting its calls in `calls`, with `sharing` applied.
fn stack_on(sharing: &Sharing, calls: &Arc<AtomicUsize>) -> ModelStack {
    sharing
        .apply(
            ModelStack::builder(counting(calls)),
            CacheIdentity::new("scripted", ""),
        )
        .build()
}

async fn ask(stack: &ModelStack) {
    Synthesizer::builder(stack.model())
        .build()
        .unwrap()
        .synthesize("q?", vec![Node::new("a", "some text")])
        .await
        .unwrap();
}

#[test]
fn what_cannot_work_is_refused_before_anything_opens() {
    let url = "redis://:hunter2@127.0.0.1:1/";
    for (opts, expected) in [
        (
            SharingOptions::default().with_redis(url, None),
            SharingError::NothingToShare,
        ),
        (
            SharingOptions::default().with_cache(CacheLocation::Redis {
                ttl: std::time::Duration::from_secs(5),
            }),
            SharingError::RedisCacheWithoutUrl,
        ),
        (
            SharingOptions::default()
                .with_rates(10, 0)
                .with_redis(url, Some(String::new())),
            SharingError::EmptyPrefix,
        ),
    ] {
        assert_eq!(opts.check(), Err(expected));
    }
    // No password in Debug.
    let opts = SharingOptions::default()
        .with_rates(10, 0)
        .with_redis(url, None);
    assert!(!format!("{opts:?}").contains("hunter2"));
}

#[tokio::test]
async fn an_unreachable_redis_is_named_without_its_password() {
    let err = SharingOptions::default()
        .with_rates(10, 0)
        .with_redis("redis://:hunter2@127.0.0.1:1/", None)
        .open()
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("127.0.0.1:1"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn local_rates_and_a_memory_cache_apply_to_the_stack() {
    let sharing = SharingOptions::default()
        .with_rates(600, 0)
        .with_cache(CacheLocation::memory())
        .open()
        .await
        .unwrap();
    assert_eq!(
        (sharing.budget_kind(), sharing.cache_kind()),
        ("local", "memory")
    );
    assert!(sharing.shared_budget().is_none());
    let calls = Arc::new(AtomicUsize::new(0));
    let stack = stack_on(&sharing, &calls);
    ask(&stack).await;
    ask(&stack).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(stack.cache_stats().map(|s| s.hits), Some(1));
}

#[tokio::test]
async fn an_sqlite_cache_serves_the_next_stack() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SharingOptions::default().with_cache(CacheLocation::Sqlite(dir.path().join("c.db")));
    let calls = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let sharing = opts.open().await.unwrap();
        assert_eq!(
            (sharing.budget_kind(), sharing.cache_kind()),
            ("none", "sqlite")
        );
        let stack = stack_on(&sharing, &calls);
        ask(&stack).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_cache_file_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "not a database ".repeat(100)).unwrap();
    let err = SharingOptions::default()
        .with_cache(CacheLocation::Sqlite(path))
        .open()
        .await
        .unwrap_err();
    assert!(matches!(err, SharingError::Cache(_)), "{err}");
}
