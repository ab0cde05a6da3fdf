//! The grounding guard of a refine chain (`refine`, and `compact`, which refines over
//! packed chunks): a step whose reply would replace an answer grounded in what the chain
//! has shown the model with a reply whose facts are in none of it keeps the answer.
//!
//! The rule, with [`crate::grounding::check`] against every text the chain has shown the
//! model so far (the current step's too): when the answer so far states facts and some
//! are found (`found > 0`: supported, or partly), and the reply states facts and none is
//! found (unsupported), the reply is not used ([`ReplyReading::Ungrounded`], reported as
//! [`crate::SynthEvent::ReplyNotUsed`] with `kept_previous`). A reply with no fact to
//! check, or with one found, is used as before; so is any reply when the answer so far
//! has nothing found (it was not grounded, so there is nothing to keep).
//!
//! It holds in the intermediate steps, streamed or not, and in a final step that is not
//! streamed. A streamed final step has shown its reply token by token before it could be
//! checked whole (holding back a whole reply would undo streaming), so its text stays and
//! the synthesis's grounding gate ([`crate::synth`]) flags it, as it flags any answer.
//! A final step packed again after the server rejected it (the job's limit lowered) keeps
//! what the chain had shown.
//!
//! Only plain-text steps are checked: a JSON reply (an output schema, answer filtering)
//! is not read, nor is `generation`'s (it shows no sources).

use std::sync::Arc;

use super::Job;
use crate::grounding::{self, GroundingStatus};
use crate::model::ModelRequest;
use crate::text::abstention::ReplyReading;

/// What a refine chain has shown the model, and what is known of its answer so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroundingGuard {
    /// The texts shown so far, in order: each step's piece as it was cut (without the
    /// label line a citation prompt puts before it).
    shown: Vec<Arc<str>>,
    /// Whether the answer so far was found grounded in `shown`. Once it is, it stays so
    /// (more text shown loses no fact found), so it is not checked again.
    answer_grounded: bool,
}

impl GroundingGuard {
    /// Notes `text` as shown to the model.
    pub(crate) fn show(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.shown.push(Arc::from(text));
        }
    }

    /// The chain has a new answer: its grounding is not known yet.
    pub(crate) fn new_answer(&mut self) {
        self.answer_grounded = false;
    }

    /// The guard of a chain resumed at its final step (packed again under a lowered
    /// limit): the rejected step's text is shown again by the resumed chain.
    pub(crate) fn resumed(mut self) -> Self {
        self.shown.pop();
        self
    }
}

impl Job {
    /// How `reply` to `request` (a reply read as an answer) reads against the grounding
    /// guard: [`ReplyReading::Ungrounded`] when it would replace `previous`, an answer
    /// grounded in what `guard` says was shown, with a reply whose facts are in none of
    /// it; [`ReplyReading::Answer`] otherwise. Not reported here.
    ///
    /// The checks read every text shown so far (linear in it, the answers bounded by
    /// [`grounding::MAX_ANSWER_BYTES`]). The first, of the reply against the current
    /// step's text, runs on the runtime's thread when the two together are at most
    /// [`INLINE_CHECK_BYTES`] (a few hundred microseconds at most, less than handing them
    /// to another thread costs); it settles most replies. The rest run on a blocking
    /// thread, as the synthesis's grounding gate does (inline without a runtime).
    pub(crate) async fn grounding_reading(
        &self,
        request: &ModelRequest,
        reply: &str,
        previous: Option<&str>,
        guard: &mut GroundingGuard,
    ) -> ReplyReading {
        let Some(previous) = previous.filter(|p| !p.trim().is_empty()) else {
            return ReplyReading::Answer;
        };
        if !self.reads(request) || reply.trim().is_empty() {
            return ReplyReading::Answer;
        }
        let Some(current) = guard.shown.last() else {
            return ReplyReading::Answer;
        };
        let here = (reply.len() + current.len() <= INLINE_CHECK_BYTES)
            .then(|| grounding::check(reply, &self.query, std::slice::from_ref(current)));
        if here
            .as_ref()
            .is_some_and(|h| h.status != GroundingStatus::Unsupported)
        {
            return ReplyReading::Answer;
        }
        let (reply, previous, question) =
            (reply.to_string(), previous.to_string(), self.query.clone());
        let shown = guard.shown.clone();
        let known = guard.answer_grounded;
        let run = move || judge(&reply, &previous, &question, &shown, known, here);
        let verdict = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => match runtime.spawn_blocking(run).await {
                Ok(v) => v,
                // The check panicked: the reply is used, as without the guard.
                Err(_) => return ReplyReading::Answer,
            },
            Err(_) => run(),
        };
        guard.answer_grounded |= verdict.answer_grounded;
        match verdict.unsupported {
            Some(unsupported) => {
                tracing::debug!(
                    target: "synthkit",
                    step = request.step().step.as_str(),
                    index = request.step().index,
                    unsupported = %crate::text::list_excerpt(&unsupported),
                    "a refine reply states facts found in no passage shown; the grounded answer so far is kept"
                );
                ReplyReading::Ungrounded
            }
            None => ReplyReading::Answer,
        }
    }
}

/// What [`judge`] found.
struct Verdict {
    /// The reply's unsupported facts, when it is set aside.
    unsupported: Option<Vec<String>>,
    /// Whether the answer so far is known to be grounded in what was shown.
    answer_grounded: bool,
}

/// The most bytes of a reply and the current step's text together that the guard's
/// first check reads on the runtime's thread ([`Job::grounding_reading`]); longer ones
/// are read on a blocking thread.
const INLINE_CHECK_BYTES: usize = 8 * 1024;

/// The rule, on texts: the reply is set aside when it is unsupported by `shown` and
/// `previous` is not (`known`: it was found grounded already). `here` is the reply's
/// check against the last of `shown` when it was made already.
fn judge(
    reply: &str,
    previous: &str,
    question: &str,
    shown: &[Arc<str>],
    known: bool,
    here: Option<grounding::Grounding>,
) -> Verdict {
    let used = Verdict {
        unsupported: None,
        answer_grounded: known,
    };
    // The current step's text first: a reply is most often grounded in it, and then the
    // rest need not be read.
    let Some((current, earlier)) = shown.split_last() else {
        return used;
    };
    let here =
        here.unwrap_or_else(|| grounding::check(reply, question, std::slice::from_ref(current)));
    // No fact to check is `Supported`; some found is `Supported` or `Partly`.
    if here.status != GroundingStatus::Unsupported {
        return used;
    }
    // The facts checked are the reply's whatever the sources, so none found here and
    // none found in the rest is none found in all.
    if !earlier.is_empty()
        && grounding::check(reply, question, earlier).status != GroundingStatus::Unsupported
    {
        return used;
    }
    // `found > 0` is `Supported` or `Partly` with a fact found (not an answer without
    // facts, which is `Supported` with nothing checked).
    let grounded = known || grounding::check(previous, question, shown).found > 0;
    Verdict {
        unsupported: grounded.then_some(here.unsupported),
        answer_grounded: grounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(texts: &[&str]) -> Vec<Arc<str>> {
        texts.iter().map(|t| Arc::from(*t)).collect()
    }

    const Q: &str = "How often is the mirror cleaned?";

    #[test]
    fn an_ungrounded_reply_is_set_aside_for_a_grounded_answer() {
        let texts = shown(&[
            "The mirror is cleaned every 6 months.",
            "The dome opens at dusk.",
        ]);
        let v = judge(
            "It is cleaned every 14 weeks in 1935.",
            "The mirror is cleaned every 6 months.",
            Q,
            &texts,
            false,
            None,
        );
        assert_eq!(
            v.unsupported.as_deref(),
            Some(&["14".into(), "1935".into()][..])
        );
        assert!(v.answer_grounded);
    }

    #[test]
    fn replies_that_are_used() {
        let texts = shown(&[
            "The mirror is cleaned every 6 months.",
            "Since 1935, every 14 weeks.",
        ]);
        let previous = "The mirror is cleaned every 6 months.";
        // Grounded in the current text, in an earlier one, or with no fact to check.
        for reply in [
            "It is cleaned every 14 weeks in 1935.",
            "Every 6 months, and it was 14 weeks once in 1822.",
            "It is cleaned often.",
        ] {
            let v = judge(reply, previous, Q, &texts, false, None);
            assert!(v.unsupported.is_none(), "{reply}");
        }
        // An answer so far that is not grounded has nothing to keep.
        let texts = shown(&["The dome opens at dusk.", "The dome closes at dawn."]);
        let v = judge("Every 14 weeks.", previous, Q, &texts, false, None);
        assert!(v.unsupported.is_none());
        assert!(!v.answer_grounded);
        // An answer known to be grounded is not checked again.
        let v = judge("Every 14 weeks.", previous, Q, &texts, true, None);
        assert!(v.unsupported.is_some());
    }
}
