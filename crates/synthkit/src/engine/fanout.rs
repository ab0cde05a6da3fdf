//! Map steps: many calls with bounded concurrency, answers in request order.
//!
//! Every call runs in a task owned by the job: its handle aborts the task when dropped, so
//! dropping the synthesis future (or a stream) cancels the calls in flight, their retries
//! and their back-off sleeps at once. Nothing is detached.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{BoxStream, FuturesUnordered};
use futures::{Stream, StreamExt};

use super::origins::{CallTag, Origin};
use super::{Job, Verdict};
use crate::error::SynthError;
use crate::many::OwnedTask;
use crate::model::{ModelRequest, StepInfo};

/// Where a map step's requests come from, built one at a time as calls free up (so packing
/// overlaps the calls in flight).
pub(crate) trait RequestSource: Send {
    /// The next request, or `None` when there are no more.
    fn next_request(
        &mut self,
    ) -> impl Future<Output = Result<Option<ModelRequest>, SynthError>> + Send;
}

/// Requests known in advance.
pub(crate) struct Prebuilt(pub(crate) std::vec::IntoIter<ModelRequest>);

impl RequestSource for Prebuilt {
    async fn next_request(&mut self) -> Result<Option<ModelRequest>, SynthError> {
        Ok(self.0.next())
    }
}

/// Where an answer goes in a map step's output: the request's position, then the
/// position of each re-split part within its request (`[3]`, `[3, 0]`, `[3, 1]`, ...).
/// Keys sort in output order.
type Slot = Vec<usize>;

/// A finished call of a map step: where its answer goes, its request, and its result.
type Finished<T> = (Slot, ModelRequest, Result<T, SynthError>);

impl Job {
    /// Runs the requests of `source` with bounded concurrency; answers keep the requests'
    /// order. A finished call frees its place at once, whatever the calls started before
    /// it are doing (no head-of-line blocking): the next request starts as soon as any
    /// call ends. A request the server rejects as too long is re-split under the lowered
    /// limit at once, and its parts' answers take its place. Each answer comes with its
    /// origin: the nodes its prompt held and its call's [`CallTag`], which each request
    /// carries from its start.
    pub(crate) async fn call_all(
        &self,
        source: impl RequestSource,
    ) -> Result<Vec<Reply>, SynthError> {
        self.call_all_with(source, |job, request| Box::pin(job.call_text(request)))
            .await
    }

    /// [`Job::call_all`] with each call made by `call` (which reads the reply its own
    /// way, such as map_reduce's records).
    pub(crate) async fn call_all_with<T: Send + 'static>(
        &self,
        mut source: impl RequestSource,
        call: for<'a> fn(&'a Job, &'a ModelRequest) -> BoxFuture<'a, Result<T, SynthError>>,
    ) -> Result<Vec<Reply<T>>, SynthError> {
        let limit = self.concurrency().max(1);
        let mut running: FuturesUnordered<OwnedTask<Finished<T>>> = FuturesUnordered::new();
        let mut answers: BTreeMap<Slot, Reply<T>> = BTreeMap::new();
        // Parts of re-split requests, started before new requests.
        let mut parts: VecDeque<(Slot, ModelRequest)> = VecDeque::new();
        let mut next_index = 0;
        let mut exhausted = false;
        loop {
            // While the prompt limit may still be calibrated from the first reply, the
            // first call goes alone: every later prompt is then packed under the same
            // limit, run after run.
            let cap = if self.caller.calibrating() { 1 } else { limit };
            while running.len() < cap {
                let (slot, request) = match parts.pop_front() {
                    Some(part) => part,
                    None if exhausted => break,
                    None => match source.next_request().await? {
                        Some(request) => {
                            next_index += 1;
                            (vec![next_index - 1], request)
                        }
                        None => {
                            exhausted = true;
                            break;
                        }
                    },
                };
                self.caller.plan(1);
                let request = request.with_extension(CallTag(self.next_call_tag()));
                let job = self.clone();
                running.push(OwnedTask::spawn(async move {
                    let answer = call(&job, &request).await;
                    (slot, request, answer)
                }));
            }
            let Some(finished) = running.next().await else {
                break;
            };
            let (slot, request, result) = finished?;
            match result {
                Ok(answer) => {
                    let reply = Reply {
                        text: answer,
                        origin: Origin::of_reply(&request),
                        step: request.step(),
                    };
                    answers.insert(slot, reply);
                }
                Err(e) => match self.absorb(&e, &request) {
                    Verdict::Repack => {
                        for (j, part) in self.resplit(&request).await?.into_iter().enumerate() {
                            let mut s = slot.clone();
                            s.push(j);
                            parts.push_back((s, part));
                        }
                    }
                    Verdict::Fail => return Err(e),
                },
            }
        }
        Ok(answers.into_values().collect())
    }
}

/// One answer of [`Job::call_all`] (or [`Job::call_all_with`]): its text (or what the
/// call read from it), where it came from, and its call's step.
pub(crate) struct Reply<T = String> {
    pub(crate) text: T,
    pub(crate) origin: Origin,
    pub(crate) step: StepInfo,
}

/// A stream whose items are produced by a driver future it owns: polling the stream polls
/// the driver, and dropping the stream drops the driver (and every task the driver owns).
/// An error from the driver is the stream's last item; the stream never ends quietly
/// after a failure.
pub(crate) struct Driven<T> {
    driver: Option<BoxFuture<'static, Result<(), SynthError>>>,
    /// `None` once it has ended.
    output: Option<BoxStream<'static, Result<T, SynthError>>>,
    done: bool,
}

impl<T> Driven<T> {
    pub(crate) fn new(
        driver: BoxFuture<'static, Result<(), SynthError>>,
        output: BoxStream<'static, Result<T, SynthError>>,
    ) -> Self {
        Self {
            driver: Some(driver),
            output: Some(output),
            done: false,
        }
    }
}

impl<T> Stream for Driven<T> {
    type Item = Result<T, SynthError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(driver) = self.driver.as_mut() {
            match driver.as_mut().poll(cx) {
                Poll::Ready(Ok(())) => self.driver = None,
                Poll::Ready(Err(e)) => {
                    self.driver = None;
                    self.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Pending => {}
            }
        }
        let Some(output) = self.output.as_mut() else {
            // The output has ended; the driver's result decides how the stream ends.
            return if self.driver.is_some() {
                Poll::Pending
            } else {
                self.done = true;
                Poll::Ready(None)
            };
        };
        match output.as_mut().poll_next(cx) {
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            Poll::Ready(None) => {
                self.output = None;
                if self.driver.is_some() {
                    // Wait for the driver's result (it was polled above and will wake us).
                    Poll::Pending
                } else {
                    self.done = true;
                    Poll::Ready(None)
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
