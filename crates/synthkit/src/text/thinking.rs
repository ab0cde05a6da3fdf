//! A reasoning model's thinking, told from its answer.
//!
//! Reasoning models (Qwen3, DeepSeek-R1, QwQ, ...) write their thinking before the answer.
//! A server that parses it sends it apart (`reasoning_content`, Anthropic's thinking
//! blocks); one that does not leaves it inline in the text, as a `<think>...</think>`
//! (or `<thinking>`, `<reasoning>`) block. [`split_thinking`] and the streaming
//! [`ThinkingSplitter`] take such blocks out of a reply's text, so that only the answer
//! goes on (into the next step's prompt, into the final answer), while the thinking stays
//! with the call (its step, trace and span).
//!
//! - Tags are matched without regard to ASCII case, anywhere in the text, and may be
//!   split across stream deltas at any byte: a delta's end that could be the start of a
//!   tag is held back (at most [`MAX_TAG_BYTES`]) until the next delta tells.
//! - A block the reply never closes (a reply cut at the output limit while thinking)
//!   holds the rest of the reply: [`Split::unclosed`] says so.
//! - A reply whose opening tag was in the prompt (DeepSeek-R1's and Qwen3's chat templates
//!   end the prompt with `<think>`) starts with thinking and closes it with a lone
//!   `</think>` (a closing tag before any opening one); the text before it is thinking.
//!   [`split_thinking`] always tells. A stream cannot be told apart until the closing tag
//!   comes, and holding the whole answer back for a tag that may never come would stop
//!   streaming, so the splitter lets text out as it comes (holding back no more than a
//!   possible tag): a lone closing tag in the same delta as all the text before it (a
//!   one-delta replay, a cached reply) is split exactly as the whole reply; one that
//!   comes after text was let out is left out, the rest is answer, and
//!   [`ThinkingSplitter::late_close`] says the thinking before it was let out (the engine
//!   then fails the stream rather than present thinking as an answer).
//! - Bounds: the thinking kept is at most [`MAX_THINKING_BYTES`] (cut at a character
//!   boundary; [`ThinkingSplitter::thinking_bytes`] is the whole length), so a block that
//!   never closes is never held without bound; what a splitter holds back of a possible
//!   tag is at most [`MAX_TAG_BYTES`].

/// The most bytes of a reply's thinking kept (64 KiB); the rest is counted, not kept.
pub const MAX_THINKING_BYTES: usize = 64 * 1024;

/// The longest tag matched (`</reasoning>`, 12 bytes): the most a splitter holds back.
pub const MAX_TAG_BYTES: usize = 12;

/// The blocks' names: `<think>`, `<thinking>`, `<reasoning>`.
const NAMES: [&str; 3] = ["think", "thinking", "reasoning"];

/// What a reply that thought and wrote no answer held, for its
/// [`crate::model::ModelError::NoText`]: `cut` when the server stopped it at the output
/// limit (the model was still thinking).
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) fn only_thought(cut: bool) -> &'static str {
    if cut {
        "reasoning (thinking): the reply was cut at the output limit while the model was still thinking, before any answer; raise the thinking reserve (SynthesizerBuilder::thinking_reserve, --thinking-reserve) or the output reserve (num_output)"
    } else {
        "reasoning (thinking): the model thought and wrote no answer"
    }
}

/// A reply's text split into its thinking and its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// The thinking, tags left out and trimmed (at most [`MAX_THINKING_BYTES`]).
    pub thinking: String,
    /// The answer: the text outside the blocks (its leading white space after a block
    /// left out). The whole text when it has no block.
    pub answer: String,
    /// Whether a block was still open at the end (the reply was cut while thinking).
    pub unclosed: bool,
}

impl Split {
    /// Whether the reply thought (inline).
    pub fn thought(&self) -> bool {
        !self.thinking.is_empty() || self.unclosed
    }
}

/// Splits a whole reply's text into thinking and answer. A text without a block is all
/// answer, unchanged.
///
/// ```
/// use synthkit::text::thinking::split_thinking;
/// let s = split_thinking("<think>The user asks when.</think>\n\nEvery six months.");
/// assert_eq!((s.thinking.as_str(), s.answer.as_str()), ("The user asks when.", "Every six months."));
/// let s = split_thinking("<think>Let me count: one, two");
/// assert!(s.unclosed && s.answer.is_empty());
/// ```
pub fn split_thinking(text: &str) -> Split {
    if !text.contains('<') {
        return Split {
            answer: text.to_string(),
            ..Split::default()
        };
    }
    let mut splitter = ThinkingSplitter::default();
    // A closing tag that closes no block opened in the reply: the opening tag was in the
    // prompt, and all before it is thinking (blocks nested in it included).
    if let Some((at, tag_len)) = unbalanced_close(text) {
        splitter.keep_thinking(text.get(..at).unwrap_or_default());
        splitter.closed = true;
        splitter.skip_space = true;
        let rest = text.get(at + tag_len..).unwrap_or_default();
        let mut answer = splitter.feed(rest);
        answer.push_str(&splitter.finish());
        return splitter.into_split(answer);
    }
    let mut answer = splitter.feed(text);
    answer.push_str(&splitter.finish());
    splitter.into_split(answer)
}

/// Splits a streamed reply delta by delta: [`ThinkingSplitter::feed`] returns the answer
/// text a delta lets out (possibly empty), [`ThinkingSplitter::finish`] what was held
/// back at the end. The thinking is kept aside, bounded.
#[derive(Debug, Default)]
pub struct ThinkingSplitter {
    /// Inside a block: the name whose closing tag ends it.
    open: Option<&'static str>,
    /// Inside a block: how many blocks of its name are open inside it.
    nested: usize,
    /// Text held back: it may be the start of a tag (at most [`MAX_TAG_BYTES`]).
    held: String,
    /// The thinking kept (at most [`MAX_THINKING_BYTES`]).
    thinking: String,
    /// The thinking's whole length in bytes.
    thinking_bytes: usize,
    /// A block has closed.
    closed: bool,
    /// Leave out white space before the answer's first text (after a block).
    skip_space: bool,
    /// Answer text has been let out.
    answered: bool,
    /// A lone closing tag came after answer text had been let out.
    late_close: bool,
}

#[derive(Clone, Copy)]
enum Tag {
    Open,
    Close,
}

impl Tag {
    fn matches(self, text: &[u8], name: &str) -> Option<usize> {
        let prefix: &[u8] = match self {
            Tag::Open => b"<",
            Tag::Close => b"</",
        };
        let len = prefix.len() + name.len() + 1;
        let t = text.get(..len)?;
        let ok = t.get(..prefix.len()) == Some(prefix)
            && t.get(prefix.len()..len - 1)
                .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
            && t.last() == Some(&b'>');
        ok.then_some(len)
    }

    /// Whether `text` (shorter than a whole tag) could be the start of one.
    fn could_start(self, text: &[u8], only: Option<&str>) -> bool {
        NAMES
            .iter()
            .filter(|n| only.is_none_or(|o| o == **n))
            .any(|name| {
                let whole = match self {
                    Tag::Open => format!("<{name}>"),
                    Tag::Close => format!("</{name}>"),
                };
                text.len() < whole.len()
                    && whole
                        .as_bytes()
                        .get(..text.len())
                        .is_some_and(|w| w.eq_ignore_ascii_case(text))
            })
    }
}

/// The first whole tag of `kind` in `text`: its start and length.
fn find_tag(text: &str, kind: Tag) -> Option<(usize, usize)> {
    find_named(text, kind, None).map(|(at, len, _)| (at, len))
}

/// The first whole tag of `kind` (of the name `only`, if given): start, length, name.
fn find_named(text: &str, kind: Tag, only: Option<&str>) -> Option<(usize, usize, &'static str)> {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'<')
        .find_map(|(at, _)| {
            let rest = bytes.get(at..)?;
            NAMES
                .iter()
                .filter(|n| only.is_none_or(|o| o == **n))
                .find_map(|name| kind.matches(rest, name).map(|len| (at, len, *name)))
        })
}

/// The first closing tag of `text` that closes no block opened before it in `text`: its
/// start and length. Inside a block only tags of its own name count (they nest); outside,
/// any closing tag closes nothing.
fn unbalanced_close(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    // The open block's name and how many of its name are open.
    let mut open: Option<(&str, usize)> = None;
    for (at, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b'<') {
        let rest = bytes.get(at..)?;
        match open {
            None => {
                if let Some(name) = NAMES.iter().find(|n| Tag::Open.matches(rest, n).is_some()) {
                    open = Some((name, 1));
                } else if let Some(len) = NAMES.iter().find_map(|n| Tag::Close.matches(rest, n)) {
                    return Some((at, len));
                }
            }
            Some((name, depth)) => {
                if Tag::Open.matches(rest, name).is_some() {
                    open = Some((name, depth + 1));
                } else if Tag::Close.matches(rest, name).is_some() {
                    open = (depth > 1).then_some((name, depth - 1));
                }
            }
        }
    }
    None
}

/// A closing tag in `rest` (start, length) that comes before any opening tag: outside a
/// block, it closes one opened before.
fn lone_close(rest: &str) -> Option<(usize, usize)> {
    let (at, len) = find_tag(rest, Tag::Close)?;
    let opens_before = find_tag(rest.get(..at).unwrap_or_default(), Tag::Open).is_some();
    (!opens_before).then_some((at, len))
}

/// Where a possible (cut) tag starts at the end of `text`, if one may.
fn held_from(text: &str, kind: Tag, only: Option<&str>) -> Option<usize> {
    let bytes = text.as_bytes();
    let from = bytes.len().saturating_sub(MAX_TAG_BYTES);
    (from..bytes.len()).find(|&at| {
        bytes.get(at) == Some(&b'<') && kind.could_start(bytes.get(at..).unwrap_or_default(), only)
    })
}

impl ThinkingSplitter {
    /// Takes one delta; returns the answer text it lets out.
    pub fn feed(&mut self, delta: &str) -> String {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(delta);
        let mut answer = String::new();
        let mut rest = text.as_str();
        loop {
            match self.open {
                None => match find_named(rest, Tag::Open, None) {
                    // A closing tag before any block opens: it closes a block opened before
                    // (in the prompt, or one this one was nested in), and the text before it
                    // is thinking.
                    _ if let Some((at, len)) = lone_close(rest) => {
                        let before = rest.get(..at).unwrap_or_default();
                        self.late_close |= self.answered;
                        self.keep_thinking(before);
                        self.closed = true;
                        self.skip_space = !self.answered;
                        rest = rest.get(at + len..).unwrap_or_default();
                    }
                    Some((at, len, name)) => {
                        self.answer(&mut answer, rest.get(..at).unwrap_or_default());
                        self.open = Some(name);
                        self.nested = 0;
                        rest = rest.get(at + len..).unwrap_or_default();
                    }
                    None => {
                        // A possible opening or (lone) closing tag at the end is held back.
                        let open = held_from(rest, Tag::Open, None).unwrap_or(rest.len());
                        let close = held_from(rest, Tag::Close, None).unwrap_or(rest.len());
                        let keep = open.min(close);
                        self.answer(&mut answer, rest.get(..keep).unwrap_or_default());
                        self.held = rest.get(keep..).unwrap_or_default().to_string();
                        return answer;
                    }
                },
                Some(name) => {
                    let close = find_named(rest, Tag::Close, Some(name));
                    let inner = find_named(rest, Tag::Open, Some(name));
                    match (close, inner) {
                        // A block of the same name opens inside: its closing tag does not
                        // end this one.
                        (c, Some((at, len, _))) if c.is_none_or(|(c_at, ..)| at < c_at) => {
                            self.keep_thinking(rest.get(..at + len).unwrap_or_default());
                            self.nested += 1;
                            rest = rest.get(at + len..).unwrap_or_default();
                        }
                        (Some((at, len, _)), _) if self.nested > 0 => {
                            self.keep_thinking(rest.get(..at + len).unwrap_or_default());
                            self.nested -= 1;
                            rest = rest.get(at + len..).unwrap_or_default();
                        }
                        (Some((at, len, _)), _) => {
                            self.keep_thinking(rest.get(..at).unwrap_or_default());
                            self.open = None;
                            self.closed = true;
                            self.skip_space = !self.answered;
                            rest = rest.get(at + len..).unwrap_or_default();
                        }
                        (None, _) => {
                            let close =
                                held_from(rest, Tag::Close, Some(name)).unwrap_or(rest.len());
                            let open = held_from(rest, Tag::Open, Some(name)).unwrap_or(rest.len());
                            let keep = close.min(open);
                            self.keep_thinking(rest.get(..keep).unwrap_or_default());
                            self.held = rest.get(keep..).unwrap_or_default().to_string();
                            return answer;
                        }
                    }
                }
            }
        }
    }

    /// Whether a closing tag that closes no block opened in the reply came after answer
    /// text had been let out: the text let out before it was thinking (its block was
    /// opened in the prompt, or a block was nested in another), and cannot be taken
    /// back.
    pub fn late_close(&self) -> bool {
        self.late_close
    }

    /// Ends the reply: the answer text held back, if any (a cut tag is text).
    pub fn finish(&mut self) -> String {
        let held = std::mem::take(&mut self.held);
        let mut answer = String::new();
        if self.open.is_some() {
            self.keep_thinking(&held);
        } else {
            self.answer(&mut answer, &held);
        }
        answer
    }

    /// Whether a block is open (the reply is thinking now).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Whether the reply has thought so far (a block opened).
    pub fn thought(&self) -> bool {
        self.closed || self.open.is_some()
    }

    /// The thinking so far (tags left out; at most [`MAX_THINKING_BYTES`]).
    pub fn thinking(&self) -> &str {
        &self.thinking
    }

    /// The thinking's whole length in bytes (what was kept may be less).
    pub fn thinking_bytes(&self) -> usize {
        self.thinking_bytes
    }

    /// The thinking, trimmed, and the reply's split.
    pub fn into_split(self, answer: String) -> Split {
        Split {
            thinking: self.thinking.trim().to_string(),
            answer,
            unclosed: self.open.is_some(),
        }
    }

    fn answer(&mut self, out: &mut String, text: &str) {
        let text = if self.skip_space {
            text.trim_start()
        } else {
            text
        };
        if !text.is_empty() {
            self.skip_space = false;
            self.answered = true;
            out.push_str(text);
        }
    }

    fn keep_thinking(&mut self, text: &str) {
        self.thinking_bytes = self.thinking_bytes.saturating_add(text.len());
        push_capped(&mut self.thinking, text, MAX_THINKING_BYTES);
    }
}

/// Appends as much of `text` to `out` as keeps it within `cap` bytes (at a character
/// boundary).
pub(crate) fn push_capped(out: &mut String, text: &str, cap: usize) {
    let room = cap.saturating_sub(out.len());
    if room == 0 {
        return;
    }
    let (part, _) = crate::text::cap_text(text, room);
    out.push_str(part);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(deltas: &[&str]) -> Split {
        let mut s = ThinkingSplitter::default();
        let mut answer = String::new();
        for d in deltas {
            answer.push_str(&s.feed(d));
        }
        answer.push_str(&s.finish());
        s.into_split(answer)
    }

    #[test]
    fn thinking_plain_text_is_all_answer() {
        for t in [
            "Every six months.",
            "",
            "  a < b and c > d  ",
            "x <th",
            "<b>bold</b>",
        ] {
            let s = split_thinking(t);
            assert_eq!(s.answer, t);
            assert!(!s.thought());
            assert_eq!(stream(&[t]).answer, t);
        }
    }

    #[test]
    fn thinking_blocks_of_each_name_and_case() {
        for (open, close) in [
            ("<think>", "</think>"),
            ("<THINKING>", "</thinking>"),
            ("<Reasoning>", "</REASONING>"),
        ] {
            let t = format!("{open}\nweigh it\n{close}\n\nEvery six months.");
            let s = split_thinking(&t);
            assert_eq!(s.thinking, "weigh it");
            assert_eq!(s.answer, "Every six months.");
            assert!(!s.unclosed);
        }
        // A closing tag of another name does not close the block.
        let s = split_thinking("<think>a</thinking>b</think>c");
        assert_eq!(
            (s.thinking.as_str(), s.answer.as_str()),
            ("a</thinking>b", "c")
        );
        // Two blocks, text between them kept.
        let s = split_thinking("<think>a</think>One. <think>b</think>Two.");
        assert_eq!(s.answer, "One. Two.");
        assert_eq!(s.thinking, "ab");
    }

    #[test]
    fn thinking_unclosed_and_lone_closer() {
        let s = split_thinking("<think>Let me count: one, two");
        assert!(s.unclosed && s.answer.is_empty());
        assert_eq!(s.thinking, "Let me count: one, two");
        // Cut inside the closing tag.
        let s = split_thinking("<think>hmm</thi");
        assert!(s.unclosed && s.answer.is_empty());
        // The opening tag was in the prompt.
        let s = split_thinking("Okay, the user asks.\n</think>\n\nEvery six months.");
        assert_eq!(s.thinking, "Okay, the user asks.");
        assert_eq!(s.answer, "Every six months.");
        // Thinking only.
        let s = split_thinking("<think>all of it</think>\n");
        assert!(s.thought() && s.answer.is_empty() && !s.unclosed);
    }

    #[test]
    fn thinking_split_across_deltas_at_every_byte() {
        let text = "<think>The user asks <when>. Hmm.</think>\n\nEvery <b>six</b> months.";
        let whole = split_thinking(text);
        assert_eq!(whole.answer, "Every <b>six</b> months.");
        for cut in 1..text.len() {
            for cut2 in cut..text.len() {
                let (a, rest) = text.split_at(cut);
                let (b, c) = rest.split_at(cut2 - cut);
                let s = stream(&[a, b, c]);
                assert_eq!(s, whole, "cut at {cut}, {cut2}");
            }
        }
        // One byte at a time, nothing of the thinking is let out.
        let mut sp = ThinkingSplitter::default();
        for ch in text.chars() {
            let out = sp.feed(&ch.to_string());
            assert!(!out.contains("user") && !out.contains("think"), "{out}");
        }
    }

    #[test]
    fn thinking_lone_closer_in_a_stream() {
        let text = "Okay, the user asks.\n</think>\n\nEvery six months.";
        let whole = split_thinking(text);
        // In one delta (a replay): exactly the whole reply's split.
        let mut sp = ThinkingSplitter::default();
        let mut answer = sp.feed(text);
        answer.push_str(&sp.finish());
        assert!(!sp.late_close());
        assert_eq!(sp.into_split(answer), whole);
        let closer_end = text.find("</think>").unwrap() + "</think>".len();
        // Cut at every byte: the closing tag is never let out; once text before it was
        // let out, the splitter says so, and the answer after it is the same.
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            let mut sp = ThinkingSplitter::default();
            let first = sp.feed(a);
            let mut out = first.clone();
            out.push_str(&sp.feed(b));
            out.push_str(&sp.finish());
            assert!(!out.contains("</"), "cut at {cut}: {out}");
            let late = cut < closer_end;
            assert_eq!(sp.late_close(), late, "cut at {cut}");
            assert!(out.ends_with("Every six months."), "cut at {cut}: {out}");
            if !late {
                assert_eq!(sp.into_split(out), whole, "cut at {cut}");
            }
        }
        // A closing tag after a block closes a block opened before it: what was let out
        // before it was thinking, and the stream says so; the tag itself never leaks.
        let mut sp = ThinkingSplitter::default();
        let mut out = sp.feed("<think>a</think>b");
        out.push_str(&sp.feed("</think>c"));
        out.push_str(&sp.finish());
        assert_eq!(out, "bc");
        assert!(sp.late_close());
        // Text that only looks like the start of a closing tag is let out at the end.
        let mut sp = ThinkingSplitter::default();
        assert_eq!(sp.feed("a </thi"), "a ");
        assert_eq!(sp.finish(), "</thi");
        assert!(!sp.late_close());
    }

    #[test]
    fn nested_blocks_stay_thinking_whole_and_streamed() {
        let text = "<think>outer <think>inner</think> still outer</think>\n\nThe answer.";
        let whole = split_thinking(text);
        assert_eq!(whole.answer, "The answer.");
        assert_eq!(
            whole.thinking, "outer <think>inner</think> still outer",
            "{whole:?}"
        );
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(stream(&[a, b]), whole, "cut at {cut}");
        }
        let mut sp = ThinkingSplitter::default();
        let mut out = String::new();
        for ch in text.chars() {
            out.push_str(&sp.feed(&ch.to_string()));
        }
        out.push_str(&sp.finish());
        assert_eq!(out, "The answer.");
        // Three deep, and a block of another name inside.
        let s = split_thinking(
            "<think>a<think>b<thinking>c</thinking><think>d</think></think>e</think>Yes.",
        );
        assert_eq!(s.answer, "Yes.");
        assert!(!s.unclosed);
        // A block opened in the prompt with one nested in it: all before the closing tag
        // that closes nothing is thinking.
        let s = split_thinking("x <think>y</think> z</think>\nThe answer.");
        assert_eq!(s.answer, "The answer.");
        assert_eq!(s.thinking, "x <think>y</think> z");
        // A nested block that never closes leaves the reply unclosed, nothing let out.
        let s = split_thinking("<think>a <think>b</think> c");
        assert!(s.unclosed && s.answer.is_empty(), "{s:?}");
    }

    #[test]
    fn thinking_is_bounded() {
        let mut sp = ThinkingSplitter::default();
        assert!(sp.feed("<think>").is_empty());
        let piece = "é".repeat(1000);
        for _ in 0..100 {
            assert!(sp.feed(&piece).is_empty());
            assert!(sp.held.len() <= MAX_TAG_BYTES);
        }
        assert!(sp.thinking().len() <= MAX_THINKING_BYTES);
        assert_eq!(sp.thinking_bytes(), 100 * piece.len());
        assert!(sp.is_open());
        assert!(sp.finish().is_empty());
    }
}
