//! Selection: ranked candidates into an answer that fits a token budget, and the answer's
//! text: sentences in their original order joined by spaces, a list under its lead-in one
//! item a line (`- item`, `- …` when not all fit), source markers when the passages had
//! labels, the release heading before a sentence when the question asks which release.

use std::collections::{BTreeMap, HashMap};

use super::cite::{mark, markers};
use super::rank::Term;
use super::sentences::{Kind, Sentence};
use super::window::{LONG_SENTENCE_WORDS, WINDOW_WORDS, fit, window};
use synthkit::text::SharedTokenizer;

/// Candidates rejected in a row (too long for the room left) before selection stops.
const MAX_REJECTIONS_IN_A_ROW: usize = 64;

/// A candidate: one sentence, or a list unit (its lead-in, perhaps the sentence before it,
/// and its items).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Cand {
    /// Its first sentence.
    pub first: usize,
    /// Its last sentence (inclusive).
    pub last: usize,
    /// The lead-in, for a list unit.
    pub lead: Option<usize>,
    /// A list unit to add with this sentence when room is left (the sentence is what the
    /// unit's lead-in refers back to).
    pub follow: Option<usize>,
    /// For a list item on its own: the first sentence of its list's unit; the sentences
    /// from there to the lead-in are shown with the item when room is left.
    pub head: Option<usize>,
    /// For a list unit whose items speak to the question more than its lead-in (a FAQ):
    /// the items to show, the others left out (`- …`).
    pub only: Option<Vec<usize>>,
}

/// What selection needs besides the candidates.
pub(super) struct Selector<'a> {
    /// All sentences of the request.
    pub sentences: &'a [Sentence],
    /// Release headings, when a sentence is to be shown under its heading.
    pub headings: Option<&'a [String]>,
    /// Whether sentences get their source's marker.
    pub marks: bool,
    /// Query term weights, for windows.
    pub weights: &'a HashMap<Term, f64>,
    /// Measures the answer.
    pub tok: &'a SharedTokenizer,
    /// The answer's budget in tokens.
    pub budget: usize,
}

/// The answer chosen.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Answer {
    /// Its text.
    pub text: String,
    /// Whether the best candidate alone was longer than the budget and had to be cut.
    pub truncated: bool,
    /// The source numbers of its sentences, ascending.
    pub sources: Vec<u32>,
}

/// Sentences picked so far, each with the text it shows.
#[derive(Debug, Default, Clone)]
pub(super) struct Picked {
    /// Sentence index to the text it shows.
    pub shown: BTreeMap<usize, String>,
}

impl Selector<'_> {
    /// Picks candidates (`order`, best first) while the answer fits the budget.
    pub(super) fn select(&self, cands: &[Cand], order: &[usize]) -> Answer {
        if self.budget == 0 || order.is_empty() {
            return Answer::default();
        }
        let picked = self.pick(cands, order);
        if !picked.shown.is_empty() {
            return self.answer(&picked, false);
        }
        let mut picked = picked;
        // Even the best candidate is too long: a window of it that fits.
        let Some(best) = order.first().and_then(|&c| cands.get(c)) else {
            return Answer::default();
        };
        let i = best.lead.unwrap_or(best.first);
        let Some(s) = self.sentences.get(i) else {
            return Answer::default();
        };
        let reserve = match (self.marks, s.source) {
            (true, Some(n)) => self.tok.count(&format!(" [{n}]")),
            _ => 0,
        };
        let text = fit(
            &s.text,
            self.weights,
            self.budget.saturating_sub(reserve),
            self.tok,
        );
        if text.is_empty() {
            return Answer::default();
        }
        picked.shown.insert(i, text);
        let mut answer = self.answer(&picked, true);
        if self
            .tok
            .count_till_limit(&answer.text, self.budget)
            .is_none()
        {
            answer.text = fit(&answer.text, self.weights, self.budget, self.tok);
        }
        answer
    }

    /// `picked` with `cand` added, if the answer still fits: a list unit whole, else with
    /// as many items as fit (at least one) and `- …`.
    fn add(&self, picked: &Picked, cand: &Cand) -> Option<Picked> {
        if let (Some(only), Some(lead)) = (&cand.only, cand.lead) {
            let mut trial = picked.clone();
            for i in (cand.first..=lead).chain(only.iter().copied()) {
                if let Some(s) = self.sentences.get(i) {
                    trial.shown.entry(i).or_insert_with(|| self.shown(s));
                }
            }
            return self.fits(&trial).then_some(trial);
        }
        let mut trial = picked.clone();
        for i in cand.first..=cand.last {
            if let Some(s) = self.sentences.get(i) {
                trial.shown.entry(i).or_insert_with(|| self.shown(s));
            }
        }
        if self.fits(&trial) {
            return Some(trial);
        }
        let lead = cand.lead?;
        // As many items as fit, then `- …`.
        let (mut lo, mut hi) = (0usize, cand.last.saturating_sub(lead).saturating_sub(1));
        let with = |m: usize| {
            let mut t = picked.clone();
            for i in cand.first..=lead + m {
                if let Some(s) = self.sentences.get(i) {
                    t.shown.entry(i).or_insert_with(|| self.shown(s));
                }
            }
            t
        };
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.fits(&with(mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let mut t = with(lo);
        // Items of this list picked on their own beyond the cut would leave a gap.
        t.shown.retain(|&k, _| k <= lead + lo || k > cand.last);
        (lo >= 1 && self.fits(&t)).then_some(t)
    }

    /// The candidates of `order` (best first) picked while their text fits the budget.
    pub(super) fn pick(&self, cands: &[Cand], order: &[usize]) -> Picked {
        let mut picked = Picked::default();
        if self.budget == 0 {
            return picked;
        }
        let mut rejections = 0usize;
        for &c in order {
            if rejections >= MAX_REJECTIONS_IN_A_ROW {
                break;
            }
            let Some(cand) = cands.get(c) else {
                continue;
            };
            if (cand.first..=cand.last).all(|i| picked.shown.contains_key(&i)) {
                continue;
            }
            // An item with its lead-in when room is left, else alone.
            let with_head = cand.head.and_then(|h| {
                let lead = self.sentences.get(cand.first).and_then(|s| s.lead)?;
                let mut t = picked.clone();
                for i in (h..=lead).chain([cand.first]) {
                    let s = self.sentences.get(i)?;
                    t.shown.entry(i).or_insert_with(|| self.shown(s));
                }
                self.fits(&t).then_some(t)
            });
            match with_head.or_else(|| self.add(&picked, cand)) {
                Some(next) => {
                    picked = next;
                    rejections = 0;
                    if let Some(unit) = cand.follow.and_then(|u| cands.get(u))
                        && let Some(next) = self.add(&picked, unit)
                    {
                        picked = next;
                    }
                }
                None => rejections += 1,
            }
            if self
                .tok
                .count_till_limit(&self.render(&picked), self.budget.saturating_sub(2))
                .is_none()
            {
                break;
            }
        }
        picked
    }

    /// The text of the sentences `only` of `picked`, as [`Selector::render`] writes them.
    pub(super) fn render_only(&self, picked: &Picked, only: &[usize]) -> String {
        let subset = Picked {
            shown: picked
                .shown
                .iter()
                .filter(|(i, _)| only.contains(i))
                .map(|(&i, t)| (i, t.clone()))
                .collect(),
        };
        self.render(&subset)
    }

    /// The text a sentence shows: a window of it when it is long.
    fn shown(&self, s: &Sentence) -> String {
        if s.kind != Kind::Code && s.text.split_whitespace().count() > LONG_SENTENCE_WORDS {
            window(&s.text, self.weights, WINDOW_WORDS)
        } else {
            s.text.clone()
        }
    }

    fn fits(&self, picked: &Picked) -> bool {
        self.tok
            .count_till_limit(&self.render(picked), self.budget)
            .is_some()
    }

    fn answer(&self, picked: &Picked, truncated: bool) -> Answer {
        let mut sources: Vec<u32> = Vec::new();
        for (&i, text) in &picked.shown {
            let own = markers(text);
            if own.is_empty() {
                sources.extend(self.sentences.get(i).and_then(|s| s.source));
            } else {
                sources.extend(own);
            }
        }
        sources.sort_unstable();
        sources.dedup();
        Answer {
            text: self.render(picked),
            truncated,
            sources,
        }
    }

    /// The answer's text for `picked`.
    fn render(&self, picked: &Picked) -> String {
        let mut out = String::new();
        // The lead-in whose list is being written, and the last heading shown.
        let mut list: Option<usize> = None;
        let mut heading: Option<usize> = None;
        let mut last_item: Option<usize> = None;
        for (&i, text) in &picked.shown {
            let Some(s) = self.sentences.get(i) else {
                continue;
            };
            let listed = s.lead.is_some_and(|l| picked.shown.contains_key(&l));
            if list.is_some() && (!listed || s.lead != list) {
                self.close_list(&mut out, list, last_item);
                list = None;
                last_item = None;
            }
            if let (true, Kind::Item { depth }) = (listed, s.kind) {
                // Items left out before this one.
                let gap = match last_item {
                    Some(prev) => i > prev + 1,
                    None => s.lead.is_some_and(|l| i > l + 1),
                };
                if gap {
                    out.push_str("\n- …");
                }
                last_item = Some(i);
                out.push('\n');
                out.push_str(&"  ".repeat(depth));
                out.push_str("- ");
                out.push_str(text);
                list = s.lead;
                continue;
            }
            let prev = picked.shown.range(..i).next_back().map(|(&k, _)| k);
            let under_lead = prev.is_some_and(|p| {
                p + 1 == i
                    && self
                        .sentences
                        .get(p)
                        .is_some_and(|ps| ps.code > 0 || ps.kind == Kind::Code)
            });
            if s.kind == Kind::Code && under_lead {
                // Code under the sentence announcing it: a line of its own, indented.
                out.push_str("\n    ");
                out.push_str(text);
                continue;
            }
            let mut piece = text.clone();
            if s.code > 0 && !picked.shown.contains_key(&(i + 1)) {
                // It announced code that is not shown: it ends as a statement.
                if let Some(stem) = piece.strip_suffix(':') {
                    piece = format!("{}.", stem.trim_end());
                }
            }
            if s.kind == Kind::Heading {
                heading = s.heading;
            } else if let (Some(headings), Some(h)) = (self.headings, s.heading)
                && heading != Some(h)
                && let Some(title) = headings.get(h)
            {
                piece = format!("{}: {piece}", title.trim_end_matches(['.', ':']));
                heading = Some(h);
            }
            if self.marks
                && let Some(n) = s.source
                && markers(&piece).is_empty()
            {
                piece = mark(&piece, n);
            }
            // Items of one list shown without its lead-in: one a line too.
            let next = picked.shown.range(i + 1..).next().map(|(&k, _)| k);
            let bare_item = prev.is_some_and(|p| self.same_list(p, i))
                || next.is_some_and(|n| self.same_list(i, n));
            if !out.is_empty() {
                out.push(if bare_item || ends_with_block(&out) {
                    '\n'
                } else {
                    ' '
                });
            }
            if bare_item {
                out.push_str("- ");
            }
            out.push_str(&piece);
            if s.items > 0 && picked.shown.contains_key(&(i + 1)) {
                list = Some(i);
            }
        }
        self.close_list(&mut out, list, last_item);
        out
    }
}

impl Selector<'_> {
    /// Ends the list of lead-in `list`: `- …` when items after `last_item` were left out.
    fn close_list(&self, out: &mut String, list: Option<usize>, last_item: Option<usize>) {
        if let (Some(l), Some(last)) = (list, last_item)
            && self.sentences.get(l).is_some_and(|s| last < l + s.items)
        {
            out.push_str("\n- …");
        }
    }

    /// Whether sentences `a` to `b` are all items of one list.
    fn same_list(&self, a: usize, b: usize) -> bool {
        let lead = self.sentences.get(a).map(|s| s.lead);
        self.sentences.get(a..=b).is_some_and(|run| {
            run.iter()
                .all(|s| matches!(s.kind, Kind::Item { .. }) && Some(s.lead) == lead)
        })
    }
}

/// Whether `out` ends with a list or code line.
fn ends_with_block(out: &str) -> bool {
    out.rsplit('\n').next().is_some_and(|l| {
        out.contains('\n') && (l.trim_start().starts_with("- ") || l.starts_with("    "))
    })
}
