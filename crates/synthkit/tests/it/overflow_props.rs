//! Context-overflow correction under random server-side excess: whatever the server
//! rejects, at any concurrency, every job completes or fails with a typed error, within the
//! correction cap, and never sends a prompt over the (corrected) budget.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use proptest::prelude::*;
use synthkit::model::{ModelError, ModelInfo};
use synthkit::prompt::PromptBudget;
use synthkit::testing::ScriptedModel;
use synthkit::{Concurrency, Node, Observer, ResponseMode, SynthError, SynthEvent, Synthesizer};

/// The most corrections one job makes (the engine's cap).
const CAP: usize = 4;

#[derive(Default)]
struct Corrections(Mutex<usize>);

impl Observer for Corrections {
    fn event(&self, event: &SynthEvent) {
        if matches!(event, SynthEvent::ContextCorrected { .. }) {
            *self.0.lock().unwrap() += 1;
        }
    }
}

#[derive(Debug, Clone)]
struct Case {
    mode: ResponseMode,
    concurrency: Concurrency,
    window: usize,
    /// Server tokens per our token on affected steps.
    excess: f64,
    /// Percent of steps (by prompt) the excess applies to.
    affected: u64,
    texts: Vec<String>,
    stream: bool,
}

fn case() -> impl Strategy<Value = Case> {
    let modes = prop::sample::select(crate::common::fixtures::PACKING_MODES.to_vec());
    let concurrency = prop::sample::select(vec![
        Concurrency::limit(1),
        Concurrency::limit(8),
        Concurrency::Unlimited,
    ]);
    let text = (1usize..400).prop_map(|n| {
        (0..n)
            .map(|i| format!("w{}", i % 17))
            .collect::<Vec<_>>()
            .join(" ")
    });
    (
        modes,
        concurrency,
        500usize..1500,
        1.0f64..3.0,
        0u64..=100,
        prop::collection::vec(text, 1..25),
        any::<bool>(),
    )
        .prop_map(
            |(mode, concurrency, window, excess, affected, texts, stream)| Case {
                mode,
                concurrency,
                window,
                excess,
                affected,
                texts,
                stream,
            },
        )
}

fn hash(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

async fn run(case: Case) -> Result<(), TestCaseError> {
    let num_output = 100;
    let window = case.window;
    let (excess, affected) = (case.excess, case.affected);
    let over = Arc::new(Mutex::new(Vec::<(usize, usize)>::new()));
    let over_seen = over.clone();
    let model = ScriptedModel::new(
        ModelInfo::new("overflow").with_context_window(window),
        move |r| {
            let text = match &r.prompt {
                synthkit::prompt::RenderedPrompt::Text(t) => t.clone(),
                synthkit::prompt::RenderedPrompt::Chat(m) => {
                    m.iter().map(|m| m.content.as_str()).collect()
                }
            };
            // A different excess for each prompt, up to `excess`.
            let h = hash(&text);
            let ratio = if h % 100 < affected {
                1.0 + (excess - 1.0) * ((h >> 8) % 1000) as f64 / 1000.0
            } else {
                1.0
            };
            let server = (r.prompt_tokens as f64 * ratio).ceil() as u64;
            if server as usize + num_output > window {
                return Err(ModelError::ContextTooLong {
                    message: "too long".into(),
                    prompt_tokens: Some(server),
                    context_window: Some(window as u64),
                });
            }
            over_seen.lock().unwrap().push((r.prompt_tokens, window));
            Ok("a short answer".into())
        },
    );
    let corrections = Arc::new(Corrections::default());
    let synth = Synthesizer::builder(Arc::new(model))
        .mode(case.mode)
        .concurrency(case.concurrency)
        .budget(PromptBudget::new(window, num_output).unwrap())
        .observer(corrections.clone())
        .build()
        .unwrap();
    let nodes: Vec<Node> = case
        .texts
        .iter()
        .enumerate()
        .map(|(i, t)| Node::new(i.to_string(), t.clone()))
        .collect();
    let job = async {
        if case.stream {
            let mut s = synth.stream("what do the words say?", nodes).await?;
            while let Some(d) = s.next().await {
                d?;
            }
            s.finish().await
        } else {
            synth.synthesize("what do the words say?", nodes).await
        }
    };
    // A hang, not a slow machine: a case takes well under a second alone, and this
    // leaves room for a CI machine busy with other builds (30 s failed once under load).
    let result = tokio::time::timeout(Duration::from_secs(120), job)
        .await
        .map_err(|_| TestCaseError::fail(format!("{case:?}: did not finish")))?;
    let result_ok = result.is_ok();
    match result {
        Ok(r) => prop_assert!(!r.text.is_empty()),
        Err(
            SynthError::Model {
                source: ModelError::ContextTooLong { .. },
                ..
            }
            | SynthError::Budget(_)
            | SynthError::TreeNotConverging { .. },
        ) => {}
        Err(e) => prop_assert!(false, "{case:?}: untyped failure {e:?}"),
    }
    let n = *corrections.0.lock().unwrap();
    if std::env::var_os("OVERFLOW_STATS").is_some() {
        eprintln!("STAT corrections={n} ok={} mode={:?}", result_ok, case.mode);
    }
    prop_assert!(n <= CAP, "{case:?}: {n} corrections");
    // Every prompt the server accepted was within the original budget.
    for (tokens, w) in over.lock().unwrap().iter() {
        prop_assert!(tokens + num_output <= *w);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_job_completes_or_fails_typed_within_the_cap(case in case()) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(case))?;
    }
}
