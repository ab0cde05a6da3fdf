//! Context-overflow correction: the one owner of a job's prompt limit.
//!
//! When a server rejects a prompt as longer than its context (its tokenizer counts more
//! than ours), the job lowers its prompt limit to the server's room and re-packs the
//! rejected step. Every part of a job (concurrent map calls, refine steps, the final call,
//! streamed accumulate) reads and lowers the limit here, under one lock.
//!
//! Termination: the limit only shrinks, and each shrink is by at least one token; at most
//! [`MAX_CORRECTIONS`] shrinks are made per job. A rejected prompt built under an earlier,
//! larger limit (it was in flight while another call shrank the limit) is re-packed
//! without a shrink; re-packing gives prompts within the current limit, so such stale
//! rejections are bounded by the prompts that were built before the last shrink. As a
//! last guard, at most [`MAX_REPACKS`] re-packs are made per job.

use std::sync::Mutex;

use crate::error::SynthError;
use crate::model::{ModelError, ModelRequest};
use crate::observe::SynthEvent;
use crate::prompt::BudgetError;

/// The most times one job shrinks its prompt limit.
pub(crate) const MAX_CORRECTIONS: usize = 4;
/// The most re-packs (shrinking or not) one job makes.
pub(crate) const MAX_REPACKS: usize = 256;

/// What to do with a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Re-pack the step under the current limit (possibly just lowered) and go on.
    Repack,
    /// Return the error.
    Fail,
}

#[derive(Debug)]
struct State {
    /// The most prompt tokens a request may have now.
    limit: usize,
    /// The largest offset learned from the server's reported usage.
    offset: usize,
    /// Shrinks made so far.
    shrinks: usize,
    /// Re-packs made so far.
    repacks: usize,
}

/// A job's prompt limit and its corrections.
#[derive(Debug)]
pub(crate) struct Corrections {
    /// The limit before any correction: `context_window - num_output`.
    initial: usize,
    num_output: usize,
    state: Mutex<State>,
}

/// What [`Corrections::absorb`] did, for the event.
pub(crate) struct Shrunk {
    pub(crate) server_prompt_tokens: Option<u64>,
    pub(crate) server_context_window: Option<u64>,
    pub(crate) limit: usize,
}

impl Corrections {
    pub(crate) fn new(max_prompt_tokens: usize, num_output: usize) -> Self {
        Self {
            initial: max_prompt_tokens,
            num_output,
            state: Mutex::new(State {
                limit: max_prompt_tokens,
                offset: 0,
                shrinks: 0,
                repacks: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most prompt tokens a request may have now.
    pub(crate) fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Tokens taken off the initial limit so far.
    pub(crate) fn shrink(&self) -> usize {
        self.initial.saturating_sub(self.limit())
    }

    /// Whether a server has rejected a prompt of this job as too long (the limit then
    /// follows the server's own accounting of prompt and output reserve); a calibration
    /// from reported usage does not count.
    pub(crate) fn server_corrected(&self) -> bool {
        self.lock().shrinks > 0
    }

    /// Decides what to do with `error`, the failure of `request`: re-pack when the server
    /// found the prompt too long (lowering the limit to the server's room, unless the
    /// request was built under an earlier, larger limit) or when the call door refused a
    /// request built before a shrink; fail otherwise, or once the caps are reached.
    pub(crate) fn absorb(
        &self,
        error: &SynthError,
        request: &ModelRequest,
    ) -> (Verdict, Option<Shrunk>) {
        let server = match error {
            SynthError::Model {
                source:
                    ModelError::ContextTooLong {
                        prompt_tokens,
                        context_window,
                        ..
                    },
                ..
            } => Some((*prompt_tokens, *context_window)),
            SynthError::Budget(BudgetError::PromptOverBudget { .. }) => None,
            _ => return (Verdict::Fail, None),
        };
        let mut st = self.lock();
        if st.repacks >= MAX_REPACKS {
            return (Verdict::Fail, None);
        }
        if request.prompt_tokens > st.limit {
            // Built under a larger limit: re-packing under the current one is enough.
            st.repacks += 1;
            return (Verdict::Repack, None);
        }
        let Some((prompt_tokens, context_window)) = server else {
            // The call door refused a prompt within the limit: a real budget error.
            return (Verdict::Fail, None);
        };
        if st.shrinks >= MAX_CORRECTIONS {
            return (Verdict::Fail, None);
        }
        // The server's room for a prompt, converted to our tokens by this prompt's ratio of
        // our count to the server's (their tokenizers differ), less a margin; a tenth off
        // the limit when the server did not say.
        let target = match (prompt_tokens, context_window) {
            (Some(p), Some(w)) if p > 0 => {
                let ours_per_theirs = request.prompt_tokens as f64 / p as f64;
                let room =
                    ((w as f64 - self.num_output as f64).max(0.0) * ours_per_theirs) as usize;
                room.saturating_sub((room / 50).max(16))
            }
            _ => st.limit.saturating_sub((st.limit / 10).max(16)),
        };
        // Strictly smaller than both the current limit and the rejected prompt.
        st.limit = target
            .min(st.limit.saturating_sub(1))
            .min(request.prompt_tokens.saturating_sub(1));
        st.shrinks += 1;
        st.repacks += 1;
        let shrunk = Shrunk {
            server_prompt_tokens: prompt_tokens,
            server_context_window: context_window,
            limit: st.limit,
        };
        (Verdict::Repack, Some(shrunk))
    }
}

/// What [`Corrections::calibrate`] did.
pub(crate) struct Calibrated {
    pub(crate) offset: usize,
    pub(crate) margin: usize,
    pub(crate) limit: usize,
}

impl Corrections {
    /// Learns from a reply's usage: when the server counted `server` prompt tokens for a
    /// prompt of `ours`, the difference is overhead the server adds (a chat template) or a
    /// tokenizer difference. The limit is lowered to leave room for that offset plus a
    /// margin of 2% (at least 8 tokens), by at most a quarter of the initial limit (a
    /// larger excess is left to the context-overflow correction, which uses the server's
    /// own error); it only ever goes down. `None` when nothing changed.
    pub(crate) fn calibrate(&self, ours: usize, server: u64) -> Option<Calibrated> {
        let server = usize::try_from(server).ok()?;
        let offset = server.checked_sub(ours).filter(|&o| o > 0)?;
        let mut st = self.lock();
        if offset <= st.offset {
            return None;
        }
        st.offset = offset;
        let margin = (self.initial / 50).max(8);
        let most = self.initial / 4;
        let target = self
            .initial
            .saturating_sub((offset + margin).min(most))
            .max(1);
        if target >= st.limit {
            return None;
        }
        st.limit = target;
        Some(Calibrated {
            offset,
            margin,
            limit: target,
        })
    }
}

impl Shrunk {
    pub(crate) fn event(&self, request: &ModelRequest) -> SynthEvent {
        SynthEvent::ContextCorrected {
            step: request.step(),
            server_prompt_tokens: self.server_prompt_tokens,
            server_context_window: self.server_context_window,
            budget: self.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::{ResponseMode, Step};

    use crate::prompt::RenderedPrompt;

    fn request(tokens: usize) -> ModelRequest {
        crate::testing::qa_request(RenderedPrompt::Text(String::new()), tokens, 10, None)
    }

    fn too_long(p: Option<u64>, w: Option<u64>) -> SynthError {
        SynthError::Model {
            mode: ResponseMode::Compact,
            step: Step::Qa,
            source: ModelError::ContextTooLong {
                message: String::new(),
                prompt_tokens: p,
                context_window: w,
            },
        }
    }

    #[test]
    fn the_limit_only_shrinks_and_the_cap_holds() {
        let c = Corrections::new(1000, 100);
        let mut last = c.limit();
        let mut shrinks = 0;
        for _ in 0..20 {
            // The server always claims the prompt is far smaller than ours: the limit must
            // still go down, never up.
            let (v, s) = c.absorb(&too_long(Some(10), Some(100_000)), &request(c.limit()));
            if v == Verdict::Fail {
                break;
            }
            if s.is_some() {
                shrinks += 1;
            }
            assert!(c.limit() < last, "{} !< {last}", c.limit());
            last = c.limit();
        }
        assert_eq!(shrinks, MAX_CORRECTIONS);
    }

    #[test]
    fn a_stale_request_is_repacked_without_a_shrink() {
        let c = Corrections::new(1000, 100);
        let (v, s) = c.absorb(&too_long(Some(1200), Some(1000)), &request(1000));
        assert_eq!(v, Verdict::Repack);
        assert!(s.is_some());
        let limit = c.limit();
        let (v, s) = c.absorb(&too_long(Some(1200), Some(1000)), &request(1000));
        assert_eq!(v, Verdict::Repack);
        assert!(s.is_none());
        assert_eq!(c.limit(), limit);
    }

    #[test]
    fn calibration_learns_the_largest_offset_and_only_lowers() {
        let c = Corrections::new(1000, 100);
        assert!(c.calibrate(500, 500).is_none());
        assert!(c.calibrate(500, 480).is_none());
        let first = c.calibrate(500, 523).expect("an offset of 23");
        assert_eq!((first.offset, first.margin, first.limit), (23, 20, 957));
        assert!(
            c.calibrate(400, 410).is_none(),
            "a smaller offset changes nothing"
        );
        assert_eq!(c.calibrate(400, 440).map(|x| x.limit), Some(940));
        assert_eq!(c.limit(), 940);
        // At most a quarter of the initial limit.
        assert_eq!(c.calibrate(400, 1400).map(|x| x.limit), Some(750));
    }

    #[test]
    fn only_a_server_rejection_counts_as_a_server_correction() {
        let c = Corrections::new(1000, 100);
        assert!(c.calibrate(500, 523).is_some());
        assert!(c.shrink() > 0);
        assert!(!c.server_corrected(), "a calibration is not a rejection");
        let (v, _) = c.absorb(&too_long(Some(1200), Some(1000)), &request(900));
        assert_eq!(v, Verdict::Repack);
        assert!(c.server_corrected());
    }

    #[test]
    fn other_errors_fail() {
        let c = Corrections::new(1000, 100);
        let e = SynthError::Model {
            mode: ResponseMode::Compact,
            step: Step::Qa,
            source: ModelError::Timeout {
                kind: crate::model::TimeoutKind::Request,
                waited: std::time::Duration::from_secs(1),
                limit: std::time::Duration::from_secs(1),
            },
        };
        assert_eq!(c.absorb(&e, &request(10)).0, Verdict::Fail);
    }
}
