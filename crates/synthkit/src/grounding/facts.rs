//! The facts an answer states, read from its text as written: first the text is cut into
//! chunks (runs of non-space characters without their punctuation), quotes, code and
//! citation markers; then each chunk is read as a date, a version, a number, a name (and
//! the run of names it opens), code or nothing.

use std::borrow::Cow;
use std::sync::LazyLock;

use rustc_hash::FxHashSet;

use super::chars::{char_at, char_before, is_word_char};
use super::dates::date_at;
use super::lookup::{Key, leading_punctuation, trailing_punctuation};
use super::numbers::{Number, is_tens_word, number_word, scan_numbers};
use super::{Fact, FactKind, MAX_CANDIDATES, MAX_NAME_WORDS, MAX_PHRASE_CHARS, MAX_SPAN_CHARS};

/// The longest citation marker skipped, in bytes (as `citation` reads them).
const MAX_MARKER_BYTES: usize = 160;

/// Words that open sentences and are not names when they do (compared in lower case):
/// articles, pronouns, conjunctions, prepositions, common adverbs, imperatives and
/// participles, separated by spaces. A capitalised word elsewhere in a sentence is a name
/// whatever it is.
const SENTENCE_OPENERS: &str = "\
    a about above according actually add added additionally after again against all along \
    already also although always among an and another answer any are around as at based \
    basically be because been before being below besides between beyond both build built \
    but by call called can certainly check choose click completed configure consider \
    considered constructed could create created currently described designed despite \
    developed did disable do does due during each earlier either enable especially \
    established even every example except few finally first firstly following for \
    fortunately found founded from furthermore generally get give given go had has have \
    he held hence her here his how however i if in indeed initially inside install \
    instead into introduced is it it's its just keep known last lastly later launched let \
    like listed located made make many may meanwhile might more moreover most much must \
    my named near neither never next no none nor not note nothing now of often ok okay on \
    once only open opened or originally other otherwise our over overall particularly \
    pass per please produced published put question read recently regarding released \
    remember required result results run running second secondly see seen select set \
    several she should shown similarly since so some sometimes soon source sources \
    specifically start started step still stop such summary supported sure take taken \
    than thanks that the their them then there therefore these they third this those \
    though through thus to today together toward try turn typically under unfortunately \
    unless unlike until update upgrade upon use used using usually via was we well were \
    what when whenever where whether which while who whose why will with within without \
    would write written yes yet you your";

/// [`SENTENCE_OPENERS`], for lookups.
static OPENERS: LazyLock<FxHashSet<&str>> =
    LazyLock::new(|| SENTENCE_OPENERS.split_ascii_whitespace().collect());

/// Capitalised words that are never names.
const NEVER_NAMES: &[&str] = &["i'm", "i've", "i'll", "i'd"];

/// Titles before a name, not part of what is looked up (`Dr. John Smith` is looked up as
/// `john smith`).
const TITLES: &[&str] = &[
    "capt", "col", "dr", "gen", "gov", "hon", "jr", "lt", "mr", "mrs", "ms", "mt", "pres", "prof",
    "rep", "rev", "sen", "sgt", "sr", "st",
];

/// A run of non-space characters: its word (`start..end`, punctuation trimmed) and how it
/// stands in the text.
struct Chunk {
    start: usize,
    end: usize,
    /// The trimmed punctuation after the word.
    trail_end: usize,
    /// Punctuation was trimmed before the word.
    lead: bool,
    /// A line break, a marker, a quote, code or a dash stands between it and the chunk
    /// before.
    apart: bool,
    /// It opens a line.
    line_start: bool,
    /// It opens a sentence.
    opens_sentence: bool,
}

/// What opens at a byte of the answer, other than a chunk.
enum Special {
    /// A citation marker, `[1]`: skipped.
    Marker { end: usize },
    /// Quoted punctuation, `"."`: skipped, as a marker is.
    Punctuation { end: usize },
    /// Code between backticks, or quoted words: one fact.
    Span {
        kind: FactKind,
        inside: (usize, usize),
        end: usize,
    },
}

fn opening_quote(c: char) -> bool {
    matches!(c, '"' | '\u{201C}' | '\u{201E}' | '\u{00AB}')
}

fn closing_quote(c: char) -> bool {
    matches!(c, '"' | '\u{201D}' | '\u{201C}' | '\u{00BB}')
}

/// The marker, quote or code opening at byte `at` (whose char is `c`), if one does.
fn special_at(text: &str, at: usize, c: char) -> Option<Special> {
    match c {
        '[' => marker_end(text, at).map(|end| Special::Marker { end }),
        '`' if char_before(text, at) != Some('`') => code_at(text, at),
        c if opening_quote(c) && !char_before(text, at).is_some_and(is_word_char) => {
            quote_at(text, at, c)
        }
        _ => None,
    }
}

/// The byte after the citation marker (`[1]`, `[2, 3]`, `[2-4]`) opening at byte `at`.
fn marker_end(text: &str, at: usize) -> Option<usize> {
    let body = at + 1;
    for (k, c) in text.get(body..)?.char_indices() {
        if c == ']' {
            let inside = text.get(body..body + k)?;
            return inside
                .bytes()
                .any(|b| b.is_ascii_digit())
                .then_some(body + k + 1);
        }
        let marker_char = c.is_ascii_digit() || matches!(c, ',' | ';' | ' ' | '-' | '\u{2013}');
        if !marker_char || k >= MAX_MARKER_BYTES {
            return None;
        }
    }
    None
}

/// The code opening at byte `at` with a run of backticks, closed by the same run within
/// [`MAX_PHRASE_CHARS`]; a fence's first line (its language) is not part of it.
fn code_at(text: &str, at: usize) -> Option<Special> {
    let rest = text.get(at..)?;
    let ticks = rest.len() - rest.trim_start_matches('`').len();
    let fence = rest.get(..ticks)?;
    let body = at + ticks;
    let after = text.get(body..)?;
    let close = after
        .char_indices()
        .take(MAX_PHRASE_CHARS + 1)
        .find(|&(k, c)| c == '`' && after.get(k..).is_some_and(|t| t.starts_with(fence)))
        .map(|(k, _)| k)?;
    let mut inside = (body, body + close);
    if ticks >= 3
        && let Some(newline) = after.get(..close).and_then(|t| t.find('\n'))
    {
        inside.0 = body + newline + 1;
    }
    Some(Special::Span {
        kind: FactKind::Code,
        inside,
        end: body + close + ticks,
    })
}

/// The quote opening at byte `at` with the mark `open`, closed within
/// [`MAX_PHRASE_CHARS`]: quoted words when there is a letter or digit inside, quoted
/// punctuation (`"."`) otherwise, which is skipped whole so that its closing mark cannot
/// open a quote running on to the next one. A straight `"` followed by white space opens
/// nothing (it closes what came before).
fn quote_at(text: &str, at: usize, open: char) -> Option<Special> {
    let body = at + open.len_utf8();
    let after = text.get(body..)?;
    if open == '"' && after.chars().next().is_none_or(char::is_whitespace) {
        return None;
    }
    let (k, close) = after
        .char_indices()
        .take(MAX_PHRASE_CHARS + 1)
        .find(|&(_, c)| closing_quote(c))?;
    let inside = after.get(..k)?;
    let end = body + k + close.len_utf8();
    Some(if inside.chars().any(char::is_alphanumeric) {
        Special::Span {
            kind: FactKind::Quote,
            inside: (body, body + k),
            end,
        }
    } else {
        Special::Punctuation { end }
    })
}

/// The text cut into chunks, with the quotes and code found between them (each with the
/// index of the chunk after it).
struct Pieces {
    chunks: Vec<Chunk>,
    spans: Vec<(usize, FactKind, (usize, usize))>,
}

fn pieces(text: &str) -> Pieces {
    let mut out = Pieces {
        chunks: Vec::new(),
        spans: Vec::new(),
    };
    let (mut at, mut line_start, mut opens, mut apart) = (0, true, true, true);
    while let Some(c) = char_at(text, at) {
        if c.is_whitespace() {
            if c == '\n' {
                (line_start, opens, apart) = (true, true, true);
            }
            at += c.len_utf8();
            continue;
        }
        match special_at(text, at, c) {
            Some(Special::Marker { end } | Special::Punctuation { end }) => {
                at = end;
                apart = true;
                continue;
            }
            Some(Special::Span { kind, inside, end }) => {
                out.spans.push((out.chunks.len(), kind, inside));
                let said = text.get(inside.0..inside.1).unwrap_or_default();
                opens = kind == FactKind::Quote && said.trim_end().ends_with(['.', '!', '?']);
                (at, apart, line_start) = (end, true, false);
                continue;
            }
            None => {}
        }
        let end = chunk_end(text, at, c);
        let raw = text.get(at..end).unwrap_or_default();
        let word = raw.trim_start_matches(leading_punctuation);
        let start = at + (raw.len() - word.len());
        let word = word.trim_end_matches(trailing_punctuation);
        let (start, word_end) = strip_emphasis(text, start, start + word.len());
        let chunk = Chunk {
            start,
            end: word_end,
            trail_end: end,
            lead: start > at,
            apart,
            line_start,
            opens_sentence: opens,
        };
        let said = text.get(chunk.start..chunk.end).unwrap_or_default();
        let punctuation_only = !said.chars().any(char::is_alphanumeric);
        let bullet = line_start && (punctuation_only || is_list_number(text, &chunk));
        let ends_sentence = if punctuation_only {
            raw
        } else {
            trail(text, &chunk)
        }
        .contains(['.', '!', '?', ':']);
        opens = (bullet && opens) || ends_sentence;
        apart = punctuation_only;
        line_start = line_start && bullet;
        out.chunks.push(chunk);
        at = end;
    }
    out
}

/// Where the chunk starting at byte `at` (whose char is `first`) ends: at white space, or
/// where a marker, quote or code opens.
fn chunk_end(text: &str, at: usize, first: char) -> usize {
    let from = at + first.len_utf8();
    let rest = text.get(from..).unwrap_or_default();
    rest.char_indices()
        .find(|&(k, c)| c.is_whitespace() || special_at(text, from + k, c).is_some())
        .map_or(text.len(), |(k, _)| from + k)
}

/// `start..end` without a pair of `_` around one word (`_emphasis_`, not `__init__`).
fn strip_emphasis(text: &str, start: usize, end: usize) -> (usize, usize) {
    let word = text.get(start..end).unwrap_or_default();
    match word.strip_prefix('_').and_then(|w| w.strip_suffix('_')) {
        Some(inner) if !inner.is_empty() && !inner.contains('_') => (start + 1, end - 1),
        _ => (start, end),
    }
}

fn word<'a>(text: &'a str, chunk: &Chunk) -> &'a str {
    text.get(chunk.start..chunk.end).unwrap_or_default()
}

fn trail<'a>(text: &'a str, chunk: &Chunk) -> &'a str {
    text.get(chunk.end..chunk.trail_end).unwrap_or_default()
}

/// A list's number at a line's start: `1.`, `2)`.
fn is_list_number(text: &str, chunk: &Chunk) -> bool {
    let w = word(text, chunk);
    (1..=3).contains(&w.len())
        && w.bytes().all(|b| b.is_ascii_digit())
        && matches!(trail(text, chunk), "." | ")")
}

/// `word` in lower case with typographic apostrophes straightened (borrowed when it is
/// so already, as most words are).
fn lower(word: &str) -> Cow<'_, str> {
    if !word.bytes().any(|b| b.is_ascii_uppercase() || b >= 0x80) {
        return Cow::Borrowed(word);
    }
    let lower = word.to_lowercase();
    Cow::Owned(if lower.contains('\u{2019}') {
        lower.replace('\u{2019}', "'")
    } else {
        lower
    })
}

fn is_opener(word: &str) -> bool {
    OPENERS.contains(&*lower(word))
}

/// A capitalised word (`Drummelo`, `MSRV`, `Jean-Paul`, `O'Brien`, `COVID-19`).
fn is_name_word(word: &str) -> bool {
    let mut chars = word.chars();
    let capital = chars.next().is_some_and(char::is_uppercase);
    let shout = word.chars().all(|c| !c.is_lowercase()) && is_opener(word);
    capital
        && chars.next().is_some()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '\'' | '\u{2019}'))
        && !shout
        && !NEVER_NAMES.contains(&&*lower(word))
}

fn is_title(text: &str, chunk: &Chunk) -> bool {
    let w = word(text, chunk);
    w.starts_with(char::is_uppercase)
        && TITLES.contains(&w.to_lowercase().as_str())
        && trail(text, chunk).starts_with('.')
}

/// An initial: one capital letter and a point (`J.`).
fn is_initial(text: &str, chunk: &Chunk) -> bool {
    let w = word(text, chunk);
    let mut chars = w.chars();
    chars.next().is_some_and(char::is_uppercase)
        && chars.next().is_none()
        && trail(text, chunk).starts_with('.')
}

/// A version: `1.65.0`, `v2.3`, `v2`; what is looked up (without the `v`).
fn version(word: &str) -> Option<&str> {
    let (v, rest) = match word.strip_prefix(['v', 'V']) {
        Some(rest) => (true, rest),
        None => (false, word),
    };
    let parts = rest.split('.');
    let numeric = parts
        .clone()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (numeric && (parts.count() >= 3 || v)).then_some(rest)
}

/// Code or an identifier written without backticks: `crate::Type`, `--flags`,
/// `--features=bundled`, `a/b.c`, `https://…`, `snake_case`, `Cargo.toml`, `iPhone`,
/// `C#`, `C++`, `user@host`.
fn is_code(word: &str) -> bool {
    // A word of lower-case letters alone is none of these (most words of an answer).
    if word.bytes().all(|b| b.is_ascii_lowercase()) {
        return false;
    }
    let between_words = |sep: char| {
        word.match_indices(sep).any(|(i, _)| {
            char_before(word, i).is_some_and(is_word_char)
                && char_at(word, i + sep.len_utf8()).is_some_and(is_word_char)
        })
    };
    let dashes = word.len() - word.trim_start_matches('-').len();
    let flag = (1..=2).contains(&dashes)
        && word
            .trim_start_matches('-')
            .starts_with(|c: char| c.is_ascii_alphabetic());
    let path = word.contains("://")
        || (word.contains('/') && (word.starts_with(['/', '~', '.']) || word.contains(['.', '_'])));
    let snake = word.contains('_') && word.chars().any(char::is_alphabetic);
    let dotted = {
        let mut parts = word.split('.');
        word.contains('.')
            && parts
                .clone()
                .all(|p| !p.is_empty() && p.chars().all(|c| is_word_char(c) || c == '-'))
            && parts.clone().any(|p| p.chars().any(char::is_alphabetic))
            && parts.any(|p| p.chars().count() >= 2)
    };
    let mut chars = word.chars();
    let camel = chars.next().is_some_and(char::is_lowercase)
        && chars.clone().any(char::is_uppercase)
        && chars.all(char::is_alphanumeric);
    let language = word.starts_with(char::is_alphabetic) && word.ends_with(['#', '+']);
    word.contains("::")
        || flag
        || path
        || between_words('=')
        || between_words('@')
        || snake
        || dotted
        || camel
        || language
}

/// The answer's facts, in order, each once, at most [`MAX_CANDIDATES`]; and whether there
/// were more.
struct Collector<'a> {
    text: &'a str,
    facts: Vec<Fact>,
    seen: FxHashSet<Key>,
    full: bool,
}

impl Collector<'_> {
    fn push(&mut self, kind: FactKind, start: usize, end: usize, key: Option<Key>) {
        let Some(key) = key else { return };
        if self.facts.len() >= MAX_CANDIDATES {
            self.full = true;
            return;
        }
        if self.seen.insert(key.clone()) {
            let written = self.text.get(start..end).unwrap_or_default();
            self.facts.push(Fact {
                kind,
                text: bounded_span(written),
                key,
            });
        }
    }
}

/// `written` cut to [`MAX_SPAN_CHARS`] characters (an ellipsis marks the cut).
pub(super) fn bounded_span(written: &str) -> String {
    match written.char_indices().nth(MAX_SPAN_CHARS) {
        Some((cut, _)) => format!("{}…", written.get(..cut).unwrap_or_default()),
        None => written.to_string(),
    }
}

/// The facts `text` states, in order, each once; and whether there were more than
/// [`MAX_CANDIDATES`].
pub(super) fn extract(text: &str) -> (Vec<Fact>, bool) {
    let Pieces { chunks, spans } = pieces(text);
    let mut out = Collector {
        text,
        facts: Vec::new(),
        seen: FxHashSet::default(),
        full: false,
    };
    let mut spans = spans.into_iter().peekable();
    let mut i = 0;
    while i < chunks.len() && !out.full {
        while let Some((_, kind, inside)) = spans.next_if(|s| s.0 <= i) {
            push_span(&mut out, kind, inside);
        }
        i += read_chunk(&mut out, &chunks, i).max(1);
    }
    for (_, kind, inside) in spans {
        push_span(&mut out, kind, inside);
    }
    (out.facts, out.full)
}

/// Quoted words or code: one fact, looked up as written (a quote without the `.`, `,`,
/// `;`, `:`, `!` or `?` English puts inside its marks).
fn push_span(out: &mut Collector<'_>, kind: FactKind, (start, end): (usize, usize)) {
    let said = out.text.get(start..end).unwrap_or_default();
    let trimmed = said.trim();
    let start = start + (said.len() - said.trim_start().len());
    let end = start + trimmed.len();
    let looked_up = match kind {
        FactKind::Quote => trimmed.trim_end_matches(['.', ',', ';', ':', '!', '?']),
        _ => trimmed,
    };
    let key = Key::text(looked_up);
    out.push(kind, start, end, key);
}

/// Reads chunk `i` (and those it runs on into): how many it took.
fn read_chunk(out: &mut Collector<'_>, chunks: &[Chunk], i: usize) -> usize {
    let text = out.text;
    let Some(chunk) = chunks.get(i) else { return 1 };
    let w = word(text, chunk);
    if !w.chars().any(char::is_alphanumeric) || (chunk.line_start && is_list_number(text, chunk)) {
        return 1;
    }
    let word_at = |k: usize| chunks.get(k).map(|c| word(text, c));
    let joined = |k: usize| chunks.get(k).is_some_and(|c| !c.apart);
    if let Some((taken, key)) = date_at(word_at, joined, i, true) {
        let end = chunks.get(i + taken - 1).map_or(chunk.end, |c| c.end);
        out.push(FactKind::Date, chunk.start, end, Some(Key::Date(key)));
        return taken;
    }
    let long = w.chars().nth(MAX_PHRASE_CHARS).is_some();
    if !long && let Some(v) = version(w) {
        out.push(FactKind::Version, chunk.start, chunk.end, Key::text(v));
        return 1;
    }
    let lower_word = lower(w);
    if let Some(n) = number_word(&lower_word).filter(|_| lower_word != "one") {
        let next = chunks
            .get(i + 1)
            .filter(|c| !c.apart && !c.lead && trail(text, chunk).is_empty());
        let unit = next
            .and_then(|c| number_word(&lower(word(text, c))))
            .filter(|u| is_tens_word(&lower_word) && (1..=9).contains(u));
        if let (Some(u), Some(c)) = (unit, next) {
            let key = Key::Number(Number::whole(n + u));
            out.push(FactKind::Number, chunk.start, c.end, Some(key));
            return 2;
        }
        let key = Key::Number(Number::whole(n));
        out.push(FactKind::Number, chunk.start, chunk.end, Some(key));
        return 1;
    }
    if !long && (is_name_word(w) || is_title(text, chunk) || is_initial(text, chunk)) {
        return read_name(out, chunks, i);
    }
    if !long && is_code(w) {
        out.push(FactKind::Code, chunk.start, chunk.end, Key::text(w));
        return 1;
    }
    let mut numbers = Vec::new();
    scan_numbers(w, |start, end, n| numbers.push((start, end, n)));
    let alone = numbers.len() == 1;
    for (start, end, n) in numbers {
        // One number in a word is shown with what the word says of it (`42%`, `3rd`, `$5`).
        let (start, end) = if alone { (0, w.len()) } else { (start, end) };
        let at = chunk.start;
        out.push(FactKind::Number, at + start, at + end, Some(Key::Number(n)));
    }
    1
}

/// A name and the run of capitalised words it opens (`Dr. John Smith`, `J. R. R.
/// Tolkien`, `New York City`), at most [`MAX_NAME_WORDS`] words; a sentence's first word
/// is not a name when it is one of [`SENTENCE_OPENERS`] or an adverb before a comma
/// (`Typically,`).
fn read_name(out: &mut Collector<'_>, chunks: &[Chunk], i: usize) -> usize {
    let text = out.text;
    let Some(first) = chunks.get(i) else { return 1 };
    let w = word(text, first);
    let adverb = lower(w).ends_with("ly") && trail(text, first).starts_with(',');
    if first.opens_sentence && (is_opener(w) || adverb) {
        return 1;
    }
    let runs_on = |c: &Chunk| {
        !c.apart
            && !c.lead
            && !c.line_start
            && (is_name_word(word(text, c)) || is_initial(text, c) || is_title(text, c))
    };
    let mut last = i;
    while last + 1 - i < MAX_NAME_WORDS {
        let (Some(here), Some(next)) = (chunks.get(last), chunks.get(last + 1)) else {
            break;
        };
        let point = trail(text, here) == "."
            && (is_title(text, here) || is_initial(text, here))
            && !is_opener(word(text, next));
        // A possessive ends the name: "Tokio's MSRV" is Tokio and, apart, MSRV.
        let possessive = ["'s", "\u{2019}s"]
            .iter()
            .any(|p| word(text, here).ends_with(p));
        if possessive || !runs_on(next) || !(trail(text, here).is_empty() || point) {
            break;
        }
        last += 1;
    }
    let run = chunks.get(i..=last).unwrap_or_default();
    let named: Vec<&Chunk> = run.iter().skip_while(|c| is_title(text, c)).collect();
    let lone_initial = named.len() == 1 && named.iter().all(|c| is_initial(text, c));
    if named.is_empty() || lone_initial {
        return run.len();
    }
    let mut looked_up = String::new();
    for (k, c) in named.iter().enumerate() {
        if k > 0 {
            looked_up.push(' ');
        }
        let w = word(text, c);
        if k + 1 == named.len() {
            let w = ["'s", "\u{2019}s"]
                .iter()
                .find_map(|s| w.strip_suffix(s))
                .unwrap_or(w);
            looked_up.push_str(w);
        } else {
            looked_up.push_str(w);
            if is_initial(text, c) {
                looked_up.push('.');
            }
        }
    }
    let end = run.last().map_or(first.end, |c| c.end);
    out.push(FactKind::Name, first.start, end, Key::text(&looked_up));
    run.len()
}
