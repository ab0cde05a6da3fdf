//! The response cache layer: hits replace model calls, streams are stored only when
//! complete, failures are never stored, keys separate what must be separate, and the
//! SQLite store persists across reopening and fails clearly at open.

use crate::common::fixtures::collect;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde_json::json;
use synthkit::layer::cache::{CacheStats, CachedModel, CachedReply, CallKind, MemoryCache};
use synthkit::model::{
    Completion, CompletionStream, FinishReason, LanguageModel, ModelError, ModelFuture, ModelInfo,
    ModelRequest, StepInfo, StreamEvent, Usage,
};
use synthkit::prompt::{RenderedPrompt, TemplateKind};
use synthkit::testing::ScriptedModel;
use synthkit::{Concurrency, Node, ResponseMode, Step, Synthesizer};

fn info() -> ModelInfo {
    crate::common::fixtures::scripted(1024, 64)
}

/// A deterministic answer derived from the prompt (structured calls get JSON).
fn answer(r: &ModelRequest) -> Result<String, ModelError> {
    let prompt = r.prompt.to_text();
    let tag = prompt.len() % 997;
    if r.schema.is_some() {
        return Ok(json!({"query_satisfied": true, "answer": format!("fact {tag}")}).to_string());
    }
    Ok(format!(
        "summary {tag} of {} words",
        prompt.split_whitespace().count()
    ))
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let text = (0..120)
                .map(|w| format!("w{}x{}", i, (w * 7 + i) % 31))
                .collect::<Vec<_>>()
                .join(" ");
            Node::new(format!("n{i}"), text)
        })
        .collect()
}

fn cached(model: &ScriptedModel) -> Arc<CachedModel<ScriptedModel>> {
    Arc::new(CachedModel::new(
        model.clone(),
        Arc::new(MemoryCache::new()),
        "scripted",
        "",
    ))
}

fn synth(model: Arc<dyn LanguageModel>, mode: ResponseMode) -> Synthesizer {
    Synthesizer::builder(model)
        .mode(mode)
        .concurrency(Concurrency::limit(4))
        .build()
        .unwrap()
}

fn request(prompt: &str) -> ModelRequest {
    synthkit::testing::qa_request(RenderedPrompt::Text(prompt.to_string()), 3, 64, Some("q"))
}

#[tokio::test]
async fn second_identical_synthesis_makes_no_call() {
    for mode in [
        ResponseMode::TreeSummarize,
        ResponseMode::Refine,
        ResponseMode::Compact,
        ResponseMode::Accumulate,
    ] {
        let model = ScriptedModel::new(info(), answer);
        let layer = cached(&model);
        let s = synth(layer.clone(), mode);
        let first = s.synthesize("What is said?", nodes(12)).await.unwrap();
        let calls = model.requests().len();
        assert!(calls >= 2, "{mode}: {calls} calls");
        assert_eq!(
            layer.stats(),
            CacheStats {
                hits: 0,
                misses: calls as u64
            },
            "{mode}"
        );

        let second = s.synthesize("What is said?", nodes(12)).await.unwrap();
        assert_eq!(
            model.requests().len(),
            calls,
            "{mode}: the second run called"
        );
        assert_eq!(second.text, first.text, "{mode}");
        assert_eq!(second.usage, first.usage, "{mode}: replayed usage");
        assert_eq!(layer.stats().hits, calls as u64, "{mode}");

        // Another question is another set of prompts.
        s.synthesize("Something else?", nodes(12)).await.unwrap();
        assert!(model.requests().len() > calls, "{mode}");
    }
}

#[tokio::test]
async fn structured_calls_are_cached_and_parsed_again() {
    let model = ScriptedModel::new(info(), answer);
    let layer = cached(&model);
    let s = Synthesizer::builder(layer.clone())
        .mode(ResponseMode::Refine)
        .answer_filtering(synthkit::AnswerFiltering::on())
        .build()
        .unwrap();
    let first = s.synthesize("q?", nodes(4)).await.unwrap();
    let calls = model.requests().len();
    assert!(model.requests().iter().any(|r| r.schema.is_some()));
    let second = s.synthesize("q?", nodes(4)).await.unwrap();
    assert_eq!(model.requests().len(), calls);
    assert_eq!(second.text, first.text);
    assert!(second.text.contains("fact"), "{}", second.text);

    // The same prompt as a structured call and as a plain call: two keys.
    let mut r = request("p");
    let plain = layer.key(&r, CallKind::Complete);
    r.schema = Some(Arc::new(json!({"type": "object"})));
    assert_ne!(plain, layer.key(&r, CallKind::Structured));
    let v = layer.complete(&r).await.unwrap();
    let again = layer.complete(&r).await.unwrap();
    assert_eq!(v, again);
    let value: serde_json::Value = serde_json::from_str(&v.text).unwrap();
    assert_eq!(value["query_satisfied"], json!(true));
}

#[tokio::test]
async fn streamed_calls_are_cached_and_replay_as_a_stream() {
    let model = ScriptedModel::new(info(), answer);
    let layer = cached(&model);
    let s = synth(layer.clone(), ResponseMode::TreeSummarize);

    let mut streaming = s.stream("q?", nodes(6)).await.unwrap();
    let mut streamed = String::new();
    let mut deltas = 0;
    while let Some(d) = streaming.next().await {
        streamed.push_str(&d.unwrap());
        deltas += 1;
    }
    let first = streaming.finish().await.unwrap();
    assert_eq!(first.text, streamed);
    assert!(deltas > 1, "ScriptedModel streams word by word");
    let calls = model.requests().len();

    // Replayed: same text, no call, and as a stream.
    let mut streaming = s.stream("q?", nodes(6)).await.unwrap();
    let mut replayed = String::new();
    while let Some(d) = streaming.next().await {
        replayed.push_str(&d.unwrap());
    }
    let second = streaming.finish().await.unwrap();
    assert_eq!(model.requests().len(), calls);
    assert_eq!(replayed, streamed);
    assert_eq!(second.text, first.text);
    assert_eq!(second.usage, first.usage);

    // Streamed and plain calls share their key: a plain run is answered too.
    let plain = s.synthesize("q?", nodes(6)).await.unwrap();
    assert_eq!(model.requests().len(), calls);
    assert_eq!(plain.text, first.text);

    // At the model level: one delta with the full text, then Done with the usage.
    let r = request("a prompt with five words");
    let live = collect(layer.stream(&r).await.unwrap()).await;
    let replay = collect(layer.stream(&r).await.unwrap()).await;
    let text = answer(&r).unwrap();
    assert_eq!(
        format!("{:?}", replay),
        format!(
            "{:?}",
            vec![
                Ok::<_, ModelError>(StreamEvent::Delta(text.clone())),
                Ok::<_, ModelError>(StreamEvent::Done {
                    usage: Some(Usage {
                        prompt_tokens: 3,
                        completion_tokens: text.split_whitespace().count() as u64,
                        ..Default::default()
                    }),
                    finish_reason: Some(FinishReason::Stop),
                })
            ]
        )
    );
    assert_eq!(format!("{:?}", live.last()), format!("{:?}", replay.last()));
    // And a stored stream answers a plain call.
    assert_eq!(layer.complete(&r).await.unwrap().text, text);
}

/// A model whose streams are cut: `Delta("partial")`, then the stream ends (or fails),
/// never reaching `Done`. Plain calls fail.
struct CutStream {
    calls: AtomicUsize,
    fail: bool,
}

impl LanguageModel for CutStream {
    fn info(&self) -> ModelInfo {
        info()
    }
    fn complete<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Err(ModelError::Connection("reset".into())) })
    }
    fn stream<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut events = vec![
            Ok::<_, ModelError>(StreamEvent::Delta("partial".into())),
            Ok::<_, ModelError>(StreamEvent::Delta(" answer".into())),
        ];
        if self.fail {
            events.push(Err(ModelError::Incomplete("connection reset".into())));
        }
        Box::pin(async move {
            let s: CompletionStream = Box::pin(futures::stream::iter(events));
            Ok(s)
        })
    }
}

#[tokio::test]
async fn a_cut_stream_is_not_cached() {
    for fail in [false, true] {
        let store = Arc::new(MemoryCache::new());
        let layer = CachedModel::new(
            CutStream {
                calls: AtomicUsize::new(0),
                fail,
            },
            store.clone(),
            "cut",
            "",
        );
        let r = request("p");
        let events = collect(layer.stream(&r).await.unwrap()).await;
        assert_eq!(events.len(), if fail { 3 } else { 2 });
        assert!(store.is_empty(), "a cut stream was stored (fail: {fail})");
        // So the next call asks the model again, and still gets a cut stream.
        let again = collect(layer.stream(&r).await.unwrap()).await;
        assert_eq!(format!("{:?}", again), format!("{:?}", events));
        assert_eq!(layer.inner().calls.load(Ordering::SeqCst), 2);
        assert_eq!(layer.stats(), CacheStats { hits: 0, misses: 2 });
        // Plain failures are not stored either.
        assert!(layer.complete(&r).await.is_err());
        assert!(store.is_empty());
    }

    // Through the synthesizer: the stream reports the cut, and nothing is stored.
    let store = Arc::new(MemoryCache::new());
    let layer = Arc::new(CachedModel::new(
        CutStream {
            calls: AtomicUsize::new(0),
            fail: false,
        },
        store.clone(),
        "cut",
        "",
    ));
    let s = synth(layer, ResponseMode::SimpleSummarize);
    let mut streaming = s.stream("q?", nodes(1)).await.unwrap();
    let mut failed = false;
    while let Some(d) = streaming.next().await {
        failed |= d.is_err();
    }
    assert!(failed);
    assert!(store.is_empty());
}

#[tokio::test]
async fn a_stream_dropped_before_done_is_not_cached() {
    let model = ScriptedModel::new(info(), |_| Ok("one two three four".to_string()));
    let store = Arc::new(MemoryCache::new());
    let layer = CachedModel::new(model.clone(), store.clone(), "scripted", "");
    let r = request("p");
    let mut s = layer.stream(&r).await.unwrap();
    assert_eq!(
        format!("{:?}", s.next().await),
        format!(
            "{:?}",
            Some(Ok::<_, ModelError>(StreamEvent::Delta("one".into())))
        )
    );
    drop(s);
    assert!(store.is_empty());
    let full = collect(layer.stream(&r).await.unwrap()).await;
    assert_eq!(full.len(), 5);
    assert_eq!(store.len(), 1);
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn failures_are_not_cached() {
    let n = Arc::new(AtomicUsize::new(0));
    let counter = n.clone();
    let model = ScriptedModel::new(info(), move |_| {
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            Err(ModelError::Server {
                status: 503,
                body: "busy".into(),
            })
        } else {
            Ok("fine".into())
        }
    });
    let layer = cached(&model);
    let r = request("p");
    assert!(layer.complete(&r).await.is_err());
    assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
    assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
    assert_eq!(model.requests().len(), 2);
    assert_eq!(layer.stats(), CacheStats { hits: 1, misses: 2 });

    // A reply to a structured request that does not parse is not stored: asked again.
    let model = ScriptedModel::constant(info(), "GARBLED OUTPUT");
    let layer = cached(&model);
    let mut r = request("p");
    r.schema = Some(Arc::new(json!({"type": "object"})));
    assert!(layer.complete(&r).await.is_ok());
    assert!(layer.complete(&r).await.is_ok());
    assert_eq!(model.requests().len(), 2);
}

#[test]
fn keys_separate_what_changes_replies() {
    let m = |name: &str| ScriptedModel::constant(ModelInfo::new(name), "x");
    let layer = |name: &str, backend: &str, params: &str| {
        CachedModel::new(m(name), Arc::new(MemoryCache::new()), backend, params)
    };
    let base = layer("m", "openai http://a/v1", "temperature=0.1");
    let r = request("the prompt");
    let k = base.key(&r, CallKind::Complete);
    assert_eq!(k.len(), 64);
    assert!(
        k.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    // Stable: same inputs, same key, from another layer too.
    assert_eq!(
        k,
        layer("m", "openai http://a/v1", "temperature=0.1").key(&r, CallKind::Complete)
    );

    let mut keys = vec![k.clone()];
    keys.push(layer("other", "openai http://a/v1", "temperature=0.1").key(&r, CallKind::Complete));
    keys.push(layer("m", "openai http://b/v1", "temperature=0.1").key(&r, CallKind::Complete));
    keys.push(layer("m", "openai http://a/v1", "temperature=0.7").key(&r, CallKind::Complete));
    keys.push(base.key(&r, CallKind::Structured));
    keys.push(base.key(&request("another prompt"), CallKind::Complete));
    let mut chat = r.clone();
    chat.prompt = RenderedPrompt::Chat(vec![]);
    keys.push(base.key(&chat, CallKind::Complete));
    let mut schema = r.clone();
    schema.schema = Some(Arc::new(json!({"type": "object"})));
    keys.push(base.key(&schema, CallKind::Complete));
    let mut schema2 = r.clone();
    schema2.schema = Some(Arc::new(json!({"type": "array"})));
    keys.push(base.key(&schema2, CallKind::Complete));
    let mut max = r.clone();
    max.max_tokens = 65;
    keys.push(base.key(&max, CallKind::Complete));
    let mut vars = r.clone();
    vars.extensions.insert(synthkit::prompt::PromptSource::new(
        TemplateKind::Qa,
        vec![("query_str".into(), "other".into())],
    ));
    keys.push(base.key(&vars, CallKind::Complete));
    let mut kind = r.clone();
    kind.extensions.insert(synthkit::prompt::PromptSource::new(
        TemplateKind::Summary,
        Vec::new(),
    ));
    keys.push(base.key(&kind, CallKind::Complete));
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len(), "two inputs share a key");

    // Where the call stands and our token count are not part of the key.
    let mut moved = r.clone();
    moved
        .extensions
        .insert(StepInfo::new(ResponseMode::TreeSummarize, Step::Summary));
    moved.prompt_tokens = 999;
    assert_eq!(base.key(&moved, CallKind::Complete), k);
}

#[test]
fn memory_cache_round_trip() {
    use futures::FutureExt;
    use synthkit::layer::cache::ResponseCache;
    let c = MemoryCache::new();
    // A map lookup never waits: the futures are ready at once, no runtime needed.
    assert_eq!(c.get("k").now_or_never(), Some(None));
    let v = CachedReply {
        text: "t".into(),
        usage: None,
        finish_reason: Some(FinishReason::Length),
        thinking: "hmm".into(),
    };
    assert_eq!(c.put("k", &v).now_or_never(), Some(()));
    assert_eq!(c.get("k").now_or_never(), Some(Some(v.clone())));
    // Through the `Arc` impl and as a trait object.
    let shared: Arc<dyn ResponseCache> = Arc::new(Arc::new(c));
    assert_eq!(shared.get("k").now_or_never(), Some(Some(v)));
}

#[cfg(feature = "sqlite-cache")]
mod sqlite {
    use super::*;
    use synthkit::layer::cache::{CacheError, ResponseCache, SqliteCache};

    fn reply(text: &str) -> CachedReply {
        CachedReply {
            text: text.into(),
            usage: Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 3,
                reasoning_tokens: 2,
                ..Usage::default()
            }),
            finish_reason: Some(FinishReason::Stop),
            thinking: format!("thought before {text}"),
        }
    }

    #[tokio::test]
    async fn persists_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.db");
        {
            let c = SqliteCache::open(&path).unwrap();
            assert!(c.is_empty());
            c.put("a", &reply("alpha")).await;
            c.put(
                "b",
                &CachedReply {
                    text: "beta".into(),
                    usage: None,
                    finish_reason: None,
                    thinking: String::new(),
                },
            )
            .await;
            c.put("a", &reply("alpha 2")).await;
            assert_eq!(c.len(), 2);
        }
        let c = SqliteCache::open(&path).unwrap();
        assert_eq!(c.get("a").await, Some(reply("alpha 2")));
        assert_eq!(
            c.get("b").await,
            Some(CachedReply {
                text: "beta".into(),
                usage: None,
                finish_reason: None,
                thinking: String::new(),
            })
        );
        assert_eq!(c.get("missing").await, None);
        // WAL mode.
        assert!(dir.path().join("cache.db-wal").exists());
    }

    #[tokio::test]
    async fn a_file_made_before_thinking_was_kept_still_reads_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL,
                 prompt_tokens INT, completion_tokens INT, finish_reason TEXT,
                 created_at INT NOT NULL);
                 INSERT INTO responses VALUES ('old', 'old reply', 4, 5, 'stop', 0);",
            )
            .unwrap();
        }
        let c = SqliteCache::open(&path).unwrap();
        assert_eq!(
            c.get("old").await,
            Some(CachedReply {
                text: "old reply".into(),
                usage: Some(Usage {
                    prompt_tokens: 4,
                    completion_tokens: 5,
                    ..Default::default()
                }),
                finish_reason: Some(FinishReason::Stop),
                thinking: String::new(),
            })
        );
        c.put("new", &reply("gamma")).await;
        drop(c);
        // Opened again (the columns are there now), both rows read.
        let c = SqliteCache::open(&path).unwrap();
        assert_eq!(c.get("new").await, Some(reply("gamma")));
        assert_eq!(c.len(), 2);
    }

    #[tokio::test]
    async fn a_reopened_cache_answers_a_whole_synthesis() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let model = ScriptedModel::new(info(), answer);
        let run = |model: ScriptedModel| {
            let path = path.clone();
            async move {
                let store = Arc::new(SqliteCache::open(&path).unwrap());
                let layer = Arc::new(CachedModel::new(model, store, "scripted", "t=0"));
                let s = synth(layer.clone(), ResponseMode::TreeSummarize);
                let r = s.synthesize("q?", nodes(10)).await.unwrap();
                (r.text, layer.stats())
            }
        };
        let (first, stats) = run(model.clone()).await;
        let calls = model.requests().len();
        assert_eq!(stats.misses, calls as u64);
        let (second, stats) = run(model.clone()).await;
        assert_eq!(second, first);
        assert_eq!(model.requests().len(), calls);
        assert_eq!(
            stats,
            CacheStats {
                hits: calls as u64,
                misses: 0
            }
        );
    }

    #[test]
    fn bad_paths_fail_clearly_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let expect_err = |path: &std::path::Path, what: &str| {
            let e = SqliteCache::open(path).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("cannot open cache {}: ", path.display())),
                "{msg}"
            );
            assert!(msg.contains(what), "{msg}");
            assert!(matches!(e, CacheError::Open { .. }));
        };
        // Not a database.
        let corrupt = dir.path().join("corrupt.db");
        std::fs::write(
            &corrupt,
            b"this is not an SQLite file at all, just text. ".repeat(200),
        )
        .unwrap();
        expect_err(&corrupt, "not a database");
        // A directory.
        expect_err(dir.path(), "directory");
        // A folder that does not exist.
        expect_err(&dir.path().join("no/such/dir/cache.db"), "unable to open");
        // A database whose `responses` table is something else.
        let foreign = dir.path().join("foreign.db");
        {
            let conn = rusqlite::Connection::open(&foreign).unwrap();
            conn.execute_batch("CREATE TABLE responses (id INT)")
                .unwrap();
        }
        expect_err(&foreign, "no such column");
    }

    #[tokio::test]
    async fn store_failures_are_misses_not_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let store = Arc::new(SqliteCache::open(&path).unwrap());
        let model = ScriptedModel::constant(info(), "fine");
        let layer = CachedModel::new(model.clone(), store.clone(), "scripted", "");
        let r = request("p");
        assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
        assert_eq!(store.len(), 1);
        // Someone drops the table under us: reads and writes fail, calls still work.
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE responses")
            .unwrap();
        assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
        assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
        assert_eq!(model.requests().len(), 3);
        assert_eq!(layer.stats(), CacheStats { hits: 0, misses: 3 });
    }

    /// A write that waits for another connection's lock must not hold up the runtime: on
    /// a current-thread runtime, a ticker task keeps running while the cache's `put`
    /// waits (the old synchronous store blocked the only thread for up to its 5 s busy
    /// timeout, so the ticker could not tick at all).
    #[tokio::test(flavor = "current_thread")]
    async fn a_locked_file_does_not_block_the_runtime() {
        use std::sync::atomic::AtomicBool;
        use std::time::Duration;

        /// Ticks of the runtime's ticker (10 ms apart) that show its thread is free while
        /// the write waits: half a second, far longer than the miss takes to reach the write.
        const TICKS: usize = 50;
        /// How long the lock is held at most when the ticker cannot tick (a failure): a
        /// safety net, never reached when the ticker runs.
        const DEADLINE: Duration = Duration::from_secs(60);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let store = Arc::new(SqliteCache::open(&path).unwrap());
        let model = ScriptedModel::constant(info(), "fine");
        let layer = CachedModel::new(model.clone(), store.clone(), "scripted", "");

        let released = Arc::new(AtomicBool::new(false));
        let (tick_tx, tick_rx) = std::sync::mpsc::channel::<()>();
        // Another connection (as another process would) takes the write lock and holds it
        // until the runtime's ticker has ticked `TICKS` times (or `DEADLINE` passed),
        // returning the ticks it saw meanwhile.
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let holder = {
            let (path, released) = (path.clone(), released.clone());
            std::thread::spawn(move || {
                let conn = rusqlite::Connection::open(&path).unwrap();
                conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
                locked_tx.send(()).unwrap();
                let deadline = std::time::Instant::now() + DEADLINE;
                let mut during = 0;
                while during < TICKS {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    match tick_rx.recv_timeout(left) {
                        Ok(()) => during += 1,
                        Err(_) => break,
                    }
                }
                released.store(true, Ordering::SeqCst);
                conn.execute_batch("COMMIT").unwrap();
                during
            })
        };
        locked_rx.recv().unwrap();

        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if tick_tx.send(()).is_err() {
                    return;
                }
            }
        });
        // A miss: the read goes through (WAL readers do not wait for writers), the model
        // answers, and storing the reply waits for the lock.
        let r = request("p");
        assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
        assert!(
            released.load(Ordering::SeqCst),
            "the write did not wait for the lock"
        );
        ticker.abort();
        let during = holder.join().unwrap();
        assert_eq!(
            during, TICKS,
            "the runtime was blocked while the cache waited: {during} ticks in {DEADLINE:?}"
        );
        // The write went in once the lock was released.
        assert_eq!(store.len(), 1);
        assert_eq!(layer.complete(&r).await.unwrap().text, "fine");
        assert_eq!(layer.stats(), CacheStats { hits: 1, misses: 1 });
        assert_eq!(model.requests().len(), 1);
    }
}
