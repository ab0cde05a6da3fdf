//! The synthesis's intermediate steps, on request
//! ([`crate::SynthesizerBuilder::return_steps`]): one [`SynthStep`] per model call, in
//! [`crate::Response::steps`].
//!
//! A step says where the call stands (mode, step, tree level, index), which nodes its
//! prompt held, its tokens and time, its retries, context corrections and whether its
//! reply was cut at the output limit, and the reply itself: the refine chain's answers,
//! every tree level's summaries, accumulate's answers.
//!
//! Bounds: a step keeps at most [`MAX_STEP_REPLY_BYTES`] of its reply (cut at a character
//! boundary; [`SynthStep::reply_bytes`] is the full length and [`SynthStep::reply_cut`]
//! says it was cut, so a shortened reply is never shown as whole). There is one step per
//! model call, so their number is bounded by the calls the input needs. While a
//! synthesis runs, the recorder also keeps each call's context and reply in full, to
//! tell which nodes a call read; they are dropped when the steps are handed out.
//!
//! The steps are built from the same reports as any [`Observer`]'s (the CLI's `--trace`
//! writes them): [`StepRecorder`] is such an observer. A step's node ids are the ones
//! packing attached to its request (the same its span lists), and so are the calls whose
//! summaries a tree level was given (whatever citations made of their text on its way
//! up); only a request made without packing has them found by locating the prompt's
//! context.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::mode::{ResponseMode, Step};
use crate::model::StepInfo;
use crate::model::tags::{CallTag, PromptInputs, PromptNodes};
use crate::observe::{CallReport, Observer, SynthEvent};
use crate::text::abstention::ReplyReading;

mod attribute;

/// The most bytes of a call's reply a step keeps (16 KiB).
pub const MAX_STEP_REPLY_BYTES: usize = 16 * 1024;

/// One model call of a synthesis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SynthStep {
    /// The call's number, 1, 2, ... in the order the calls finished.
    pub call: u64,
    /// The response mode.
    pub mode: ResponseMode,
    /// What the call did within the mode.
    pub step: Step,
    /// The tree level (0 for modes without levels).
    pub level: u32,
    /// The call's position within its level or sequence.
    pub index: usize,
    /// The ids of the nodes whose text the prompt held (for a tree level above the first,
    /// the nodes under the summaries it read), in order. Empty when not known (a prompt
    /// made outside the synthesis's packing, or a mode without nodes).
    #[serde(default)]
    pub node_ids: Vec<String>,
    /// How many nodes the prompt held, when [`SynthStep::node_ids`] lists only the first
    /// of them (a step read back from a `--trace` line, which lists at most 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_count: Option<usize>,
    /// For a tree level above the first: the calls (by [`SynthStep::call`]) whose
    /// summaries the prompt held.
    #[serde(default)]
    pub input_calls: Vec<u64>,
    /// Prompt tokens: the server's count where it reported one, else ours.
    pub prompt_tokens: u64,
    /// synthkit's own count of the prompt, as checked against the budget.
    pub counted_prompt_tokens: usize,
    /// The output limit the request carried (the budget's output reserve).
    pub max_tokens: usize,
    /// Completion tokens: the server's count where it reported one, else ours.
    pub completion_tokens: u64,
    /// Whether the server reported the usage.
    pub usage_reported: bool,
    /// Time from sending to the last byte, in milliseconds.
    pub ms: f64,
    /// Attempts the retry layer made beyond the first.
    #[serde(default)]
    pub retries: u32,
    /// Context corrections on this step: the server found its prompt too long and the
    /// step was packed again under a lower limit (the rejected attempt made no step).
    #[serde(default)]
    pub corrections: u32,
    /// Whether the model's reply was cut at the output limit (`finish_reason: length`).
    #[serde(default)]
    pub truncated: bool,
    /// The reply, at most [`MAX_STEP_REPLY_BYTES`] of it.
    pub reply: String,
    /// The reply's full length in bytes.
    pub reply_bytes: usize,
    /// Whether [`SynthStep::reply`] was shortened to the cap.
    #[serde(default)]
    pub reply_cut: bool,
    /// A reasoning model's thinking on this call, at most [`MAX_STEP_REPLY_BYTES`] of it
    /// (sent apart by the server, or taken out of the reply's text: it is not in
    /// [`SynthStep::reply`], nor in any prompt or answer); empty for other models.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thinking: String,
    /// Of [`SynthStep::completion_tokens`], those spent thinking.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Of [`SynthStep::prompt_tokens`], those the server read from its prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
    /// Set when the reply was not used as an answer: how it read (it said the sources do
    /// not answer, talked about the previous answer, or stated facts in no passage shown
    /// in place of a grounded previous answer); see [`crate::text::abstention`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_used: Option<ReplyReading>,
    /// Whether the step's previous answer was kept in place of the reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept_previous: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SynthStep {
    /// A step from a call report (no node ids yet), numbered `call`.
    pub fn from_report(call: u64, report: &CallReport<'_>) -> Self {
        let info = report.request.step();
        let (reply, reply_cut) = cap_text(report.response, MAX_STEP_REPLY_BYTES);
        Self {
            call,
            mode: info.mode,
            step: info.step,
            level: info.level,
            index: info.index,
            node_ids: Vec::new(),
            node_count: None,
            input_calls: Vec::new(),
            prompt_tokens: report.usage.prompt_tokens,
            counted_prompt_tokens: report.request.prompt_tokens,
            max_tokens: report.request.max_tokens,
            completion_tokens: report.usage.completion_tokens,
            usage_reported: report.usage_reported,
            ms: (report.elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0,
            retries: report.retries,
            corrections: 0,
            truncated: report.truncated,
            reply: reply.to_string(),
            reply_bytes: report.response.len(),
            reply_cut,
            thinking: cap_text(report.thinking, MAX_STEP_REPLY_BYTES)
                .0
                .to_string(),
            reasoning_tokens: report.usage.reasoning_tokens,
            cached_prompt_tokens: report.usage.cached_prompt_tokens,
            not_used: None,
            kept_previous: false,
        }
    }

    /// Whether this step is the call `info` describes.
    fn is(&self, info: &StepInfo) -> bool {
        self.mode == info.mode
            && self.step == info.step
            && self.level == info.level
            && self.index == info.index
    }
}

// A text utility, named here too where step records use it.
pub use crate::text::cap_text;

/// One recorded call with what attribution needs (dropped at the end).
struct Recorded {
    step: SynthStep,
    /// The nodes the prompt held, as packing knew them (positions among all nodes).
    held: PromptNodes,
    /// The call's tag, and the tags of the calls whose replies its prompt held.
    tag: Option<u64>,
    inputs: PromptInputs,
    /// The context the prompt held (`context_str` or `context_msg`), in full.
    context: Option<String>,
    /// The reply, in full (a tree level's summaries are the next level's texts).
    reply: String,
}

#[derive(Default)]
struct Log {
    calls: Vec<Recorded>,
    /// Steps whose prompt the server rejected as too long.
    corrected: Vec<StepInfo>,
    /// Steps whose reply was not used as an answer.
    not_used: Vec<(StepInfo, ReplyReading, bool)>,
}

/// An [`Observer`] that records every call as a [`SynthStep`]; the synthesizer installs
/// one per synthesis when steps are asked for.
pub struct StepRecorder {
    /// The ids of the nodes with text, in order, and their model-visible text.
    nodes: Vec<(String, String)>,
    /// The ids of all the nodes, by position.
    ids: Vec<String>,
    log: Mutex<Log>,
}

debug_fields!(StepRecorder {
    nodes: nodes.len(),
    ..
});

impl StepRecorder {
    /// A recorder for a synthesis over `nodes`: each of the synthesis's nodes, all of
    /// them and in their order, with its id and its text as the model sees it (a
    /// request's nodes are named by position; a prompt made without packing is located
    /// in these texts).
    pub fn new(nodes: Vec<(String, String)>) -> Self {
        let ids = nodes.iter().map(|(id, _)| id.clone()).collect();
        let nodes = nodes
            .into_iter()
            .filter(|(_, t)| !t.trim().is_empty())
            .collect();
        Self {
            nodes,
            ids,
            log: Mutex::new(Log::default()),
        }
    }

    /// The steps so far, ordered by level, then index, then finishing order, with their
    /// node ids and corrections; the recorder is emptied.
    pub fn take(&self) -> Vec<SynthStep> {
        let log = std::mem::take(
            &mut *self
                .log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut calls = log.calls;
        calls.sort_by_key(|c| (c.step.level, c.step.index, c.step.call));
        // Packing's own account, where the request carries it, is exact; the rest is
        // found by locating each prompt's context.
        // A tag's call and its place in step order.
        let by_tag: std::collections::HashMap<u64, (usize, u64)> = calls
            .iter()
            .enumerate()
            .filter_map(|(rank, c)| Some((c.tag?, (rank, c.step.call))))
            .collect();
        for c in &mut calls {
            let id = |&i: &u32| self.ids.get(i as usize).cloned();
            c.step.node_ids = c.held.positions().iter().filter_map(id).collect();
            let mut inputs: Vec<(usize, u64)> = c
                .inputs
                .tags()
                .iter()
                .filter_map(|t| by_tag.get(t).copied())
                .collect();
            inputs.sort_unstable();
            c.step.input_calls = inputs.into_iter().map(|(_, call)| call).collect();
        }
        attribute::node_ids(&mut calls, &self.nodes);
        let mut steps: Vec<SynthStep> = calls.into_iter().map(|c| c.step).collect();
        for (info, reading, kept) in &log.not_used {
            // The last call at this place is the one whose reply was read.
            if let Some(s) = steps.iter_mut().rev().find(|s| s.is(info)) {
                s.not_used = Some(*reading);
                s.kept_previous = *kept;
            }
        }
        for info in &log.corrected {
            // The re-packed call carries the rejected step's place.
            if let Some(s) = steps.iter_mut().find(|s| s.is(info)) {
                s.corrections += 1;
            }
        }
        steps
    }
}

impl Observer for StepRecorder {
    fn call_finished(&self, report: &CallReport<'_>) {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let call = log.calls.len() as u64 + 1;
        let context = report.request.source().and_then(|s| {
            s.variable("context_str")
                .or_else(|| s.variable("context_msg"))
                .map(str::to_string)
        });
        log.calls.push(Recorded {
            step: SynthStep::from_report(call, report),
            held: PromptNodes::of(report.request),
            tag: CallTag::of(report.request),
            inputs: PromptInputs::of(report.request),
            context,
            reply: report.response.to_string(),
        });
    }

    fn event(&self, event: &SynthEvent) {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            SynthEvent::ContextCorrected { step, .. } => log.corrected.push(*step),
            SynthEvent::ReplyNotUsed {
                step,
                reading,
                kept_previous,
            } => log.not_used.push((*step, *reading, *kept_previous)),
            _ => {}
        }
    }
}

/// The user's observer (if any) and `recorder`, both told of everything.
pub(crate) fn with_recorder(
    user: Option<Arc<dyn Observer>>,
    recorder: Arc<StepRecorder>,
) -> Arc<dyn Observer> {
    match user {
        None => recorder,
        Some(user) => Arc::new(AlsoRecording { user, recorder }),
    }
}

/// An observer that also records steps.
struct AlsoRecording {
    user: Arc<dyn Observer>,
    recorder: Arc<StepRecorder>,
}

impl Observer for AlsoRecording {
    fn calls_planned(&self, total: usize) {
        self.user.calls_planned(total);
    }
    fn call_finished(&self, report: &CallReport<'_>) {
        self.recorder.call_finished(report);
        self.user.call_finished(report);
    }
    fn event(&self, event: &SynthEvent) {
        self.recorder.event(event);
        self.user.event(event);
    }
}
