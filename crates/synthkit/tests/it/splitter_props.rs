//! Properties of the token text splitter and the chunk cursor, on arbitrary text.
//!
//! Run more cases with `PROPTEST_CASES=10000 cargo test -p synthkit --test splitter_props`.

use std::sync::Arc;
use synthkit::testing::{LumpyTokenizer, WordTokenizer};

use proptest::prelude::*;
use synthkit::text::splitter::{Chunk, ChunkCursor};

use crate::common::chunks::check_chunks;
use synthkit::text::{BpeTokenizer, SharedTokenizer, TokenTextSplitter, Tokenizer};

fn cl100k() -> SharedTokenizer {
    BpeTokenizer::cl100k_base().shared()
}

/// 256 cases unless `PROPTEST_CASES` says otherwise.
fn config() -> ProptestConfig {
    ProptestConfig::default()
}

/// Text biased to what real documents (and edge cases) contain.
fn texty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        6 => "[a-zA-Z]{1,12}",
        4 => Just(" ".to_string()),
        2 => Just("\n".to_string()),
        1 => Just("\n\n".to_string()),
        1 => Just("\r\n".to_string()),
        1 => Just("\t".to_string()),
        1 => "[.,;:!?'\"()-]{1,3}",
        1 => "[0-9]{1,6}",
        1 => prop::sample::select(vec![
            "🚀", "👩‍👩‍👧‍👦", "👨‍🔬", "🇫🇷", "e\u{301}", "\u{301}\u{302}", "\0", "\u{200b}",
            "\u{a0}", "\u{3000}", "ß", "İ", "\u{feff}",
        ])
        .prop_map(str::to_string),
        2 => "[\u{4e00}-\u{4e80}]{1,8}",
        1 => "[\u{ac00}-\u{ac40}]{1,5}",
        1 => "[а-я]{1,8}",
    ];
    prop::collection::vec(piece, 0..120).prop_map(|v| v.concat())
}

/// Any text, mostly `texty`, sometimes raw Unicode, sometimes long runs.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => texty(),
        2 => any::<String>(),
        1 => "\\PC{0,300}",
        1 => ("[a-z🚀中]", 0..600usize).prop_map(|(c, n)| c.repeat(n)),
    ]
}

/// The reference algorithm (llama-index-core 0.14.25), literally: split recursively, merge
/// by the sum of per-split counts.
fn reference_split_text(
    text: &str,
    size: usize,
    overlap: usize,
    seps: &[&str],
    tok: &dyn Tokenizer,
) -> Vec<String> {
    fn split_by_sep(text: &str, sep: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (i, part) in text.split(sep).enumerate() {
            let piece = if i == 0 {
                part.to_string()
            } else {
                format!("{sep}{part}")
            };
            if !piece.is_empty() {
                out.push(piece);
            }
        }
        out
    }
    fn split(text: &str, size: usize, seps: &[&str], tok: &dyn Tokenizer) -> Vec<String> {
        if tok.count(text) <= size {
            return vec![text.to_string()];
        }
        let mut pieces = None;
        for sep in seps {
            let p = split_by_sep(text, sep);
            if p.len() > 1 {
                pieces = Some(p);
                break;
            }
        }
        let pieces = pieces.unwrap_or_else(|| text.chars().map(String::from).collect());
        let single = pieces.len() == 1;
        let mut out = Vec::new();
        for p in pieces {
            if tok.count(&p) <= size || single {
                out.push(p);
            } else {
                out.extend(split(&p, size, seps, tok));
            }
        }
        out
    }
    if text.is_empty() {
        return vec![String::new()];
    }
    let splits = split(text, size, seps, tok);
    let mut chunks = Vec::new();
    let mut cur: Vec<(String, usize)> = Vec::new();
    let mut cur_len = 0;
    for s in splits {
        let n = tok.count(&s);
        if cur_len + n > size {
            let c: String = cur.iter().map(|(s, _)| s.as_str()).collect();
            let c = c.trim();
            if !c.is_empty() {
                chunks.push(c.to_string());
            }
            while !cur.is_empty() && (cur_len > overlap || cur_len + n > size) {
                let (_, m) = cur.remove(0);
                cur_len -= m;
            }
        }
        cur.push((s, n));
        cur_len += n;
    }
    let c: String = cur.iter().map(|(s, _)| s.as_str()).collect();
    let c = c.trim();
    if !c.is_empty() {
        chunks.push(c.to_string());
    }
    chunks
}

#[allow(clippy::panic)]
fn splitter(size: usize, overlap: usize, tok: SharedTokenizer) -> TokenTextSplitter {
    match TokenTextSplitter::new(size, overlap, tok) {
        Ok(s) => s,
        Err(e) => panic!("valid settings rejected: {e}"),
    }
}

/// Splits `text` with `size` and `overlap`, checks the chunks ([`check_chunks`]) and
/// returns them.
fn split_and_check(
    text: &str,
    size: usize,
    overlap: usize,
    tok: &SharedTokenizer,
) -> Result<Vec<Chunk>, String> {
    let chunks = splitter(size, overlap, tok.clone()).split_chunks(text);
    let sizes = vec![size; chunks.len()];
    check_chunks(text, &chunks, &sizes, overlap == 0, tok.as_ref())?;
    Ok(chunks)
}

fn size_and_overlap() -> impl Strategy<Value = (usize, usize)> {
    (1usize..300).prop_flat_map(|size| (Just(size), 0..=size))
}

fn small_size_and_overlap() -> impl Strategy<Value = (usize, usize)> {
    (1usize..12).prop_flat_map(|size| (Just(size), 0..=size))
}

proptest! {
    #![proptest_config(config())]

    /// cl100k: exact limit, nothing lost, order kept, never panics.
    #[test]
    fn cl100k_chunks_fit_and_keep_text(text in any_text(), (size, overlap) in size_and_overlap()) {
        let tok = cl100k();
        prop_assert_eq!(split_and_check(&text, size, overlap, &tok).err(), None);
    }

    /// Small sizes make every level of the split (separator, newline, characters) and the
    /// back-off work hard.
    #[test]
    fn cl100k_small_sizes(text in any_text(), (size, overlap) in small_size_and_overlap()) {
        let tok = cl100k();
        prop_assert_eq!(split_and_check(&text, size, overlap, &tok).err(), None);
    }

    /// A non-additive tokenizer: the sum of split counts under-estimates; the limit holds.
    #[test]
    fn lumpy_tokenizer_limit_is_exact(text in any_text(), (size, overlap) in small_size_and_overlap()) {
        let tok: SharedTokenizer = Arc::new(LumpyTokenizer);
        prop_assert_eq!(split_and_check(&text, size, overlap, &tok).err(), None);
    }

    /// Custom separators (multi-character, overlapping patterns) keep the properties.
    #[test]
    fn custom_separators(
        text in "[ab. \n]{0,200}",
        sep in prop::sample::select(vec![".", "..", "ab", "aba", "\n\n", " "]),
        backup in prop::sample::select(vec!["", "b", "\n", ". "]),
        (size, overlap) in small_size_and_overlap(),
    ) {
        let tok = cl100k();
        let s = splitter(size, overlap, tok.clone())
            .with_separator(sep)
            .with_backup_separators(vec![backup.to_string()]);
        let chunks = s.split_chunks(&text);
        let sizes = vec![size; chunks.len()];
        prop_assert_eq!(check_chunks(&text, &chunks, &sizes, overlap == 0, tok.as_ref()), Ok(()));
    }

    /// With a tokenizer whose sums never under-count, the output is exactly the reference's.
    #[test]
    fn matches_reference_with_word_tokenizer(
        text in prop::collection::vec(
            prop_oneof![
                4 => "[a-z]{1,15}",
                3 => Just(" ".to_string()),
                1 => Just("\n".to_string())
            ], 0..80
        ).prop_map(|v| v.concat()),
        (size, overlap) in small_size_and_overlap(),
    ) {
        let tok: SharedTokenizer = Arc::new(WordTokenizer);
        let ours = splitter(size, overlap, tok.clone()).split_text(&text);
        let theirs = reference_split_text(&text, size, overlap, &[" ", "\n"], tok.as_ref());
        prop_assert_eq!(ours, theirs);
    }

    /// `split_text` and `split_chunks` agree, and a cursor with a fixed size gives the same
    /// chunks.
    #[test]
    fn split_text_cursor_and_chunks_agree(text in texty(), (size, overlap) in size_and_overlap()) {
        let s = splitter(size, overlap, cl100k());
        let chunks = s.split_chunks(&text);
        let texts: Vec<String> = chunks.iter().map(|c| c.text(&text).to_string()).collect();
        if text.is_empty() {
            prop_assert_eq!(s.split_text(&text), vec![String::new()]);
        } else {
            prop_assert_eq!(s.split_text(&text), texts);
        }
        let mut cursor = s.cursor(&text);
        let mut again = Vec::new();
        while let Some(c) = cursor.next_chunk(size, overlap) {
            again.push(c);
        }
        prop_assert!(cursor.is_done());
        prop_assert_eq!(chunks, again);
    }

    /// A cursor with a different size at every step never exceeds that step's size and
    /// never loses text; `is_done` turns true exactly after the last chunk.
    #[test]
    fn cursor_with_varying_sizes(
        text in any_text(),
        steps in prop::collection::vec((1usize..300, 0usize..60), 1..40),
        lumpy in any::<bool>(),
    ) {
        let tok: SharedTokenizer = if lumpy { Arc::new(LumpyTokenizer) } else { cl100k() };
        let mut cursor = ChunkCursor::new(&text, " ", &["\n".to_string()], tok.clone());
        prop_assert_eq!(cursor.text(), text.as_str());
        let mut chunks = Vec::new();
        let mut sizes = Vec::new();
        let mut i = 0;
        loop {
            let (size, overlap) = steps[i % steps.len()];
            let was_done = cursor.is_done();
            match cursor.next_chunk(size, overlap) {
                Some(c) => {
                    prop_assert!(!was_done, "a chunk after is_done");
                    chunks.push(c);
                    sizes.push(size);
                }
                None => {
                    prop_assert!(was_done, "no chunk before is_done");
                    break;
                }
            }
            i += 1;
        }
        prop_assert_eq!(check_chunks(&text, &chunks, &sizes, false, tok.as_ref()), Ok(()));
    }
}

#[test]
fn reference_examples_with_word_tokenizer() {
    let tok: SharedTokenizer = Arc::new(WordTokenizer);
    let text = "Hello world foo Hello world bar";
    assert_eq!(
        splitter(2, 0, tok.clone()).split_text(text),
        ["Hello world", "foo Hello", "world bar"]
    );
    assert_eq!(
        splitter(1, 0, tok.clone()).split_text(text),
        ["Hello", "world", "foo", "Hello", "world", "bar"]
    );
    assert_eq!(
        splitter(2, 1, tok.clone()).split_text("foo bar hello world"),
        ["foo bar", "bar hello", "hello world"]
    );
    for (size, overlap) in [(2, 0), (1, 0), (2, 1), (3, 1), (4, 2)] {
        assert_eq!(
            splitter(size, overlap, tok.clone()).split_text(text),
            reference_split_text(text, size, overlap, &[" ", "\n"], tok.as_ref())
        );
    }
}

#[test]
fn reference_examples_with_cl100k() {
    let tok = cl100k();
    // "abcde" * 200 at size 100: 10 chunks.
    let text = "abcde".repeat(200);
    assert_eq!(splitter(100, 0, tok.clone()).split_chunks(&text).len(), 10);
    // A single rocket is 3 tokens: one oversized chunk.
    let s = splitter(1, 0, tok.clone());
    let chunks = s.split_chunks("🚀");
    assert_eq!(chunks.len(), 1);
    assert!(chunks[0].oversized);
    assert_eq!(chunks[0].tokens, 3);
    assert_eq!(s.split_text("🚀"), ["🚀"]);
    // 20 rockets: 20 singletons, no blow-up.
    let rockets = "🚀".repeat(20);
    let chunks = s.split_chunks(&rockets);
    assert_eq!(chunks.len(), 20);
    assert!(
        chunks
            .iter()
            .all(|c| c.oversized && c.text(&rockets) == "🚀")
    );
    // "a"*49 + "\n" + "a"*50 splits at the newline.
    let text = format!("{}\n{}", "a".repeat(49), "a".repeat(50));
    let size = tok.count(&text) - 1;
    let lens: Vec<usize> = splitter(size, 0, tok.clone())
        .split_text(&text)
        .iter()
        .map(String::len)
        .collect();
    assert_eq!(lens, [49, 50]);
    // "a"*100 (reference: gpt2 at size 20): the chunks concatenate to the input.
    let text = "a".repeat(100);
    let chunks = splitter(5, 0, tok.clone()).split_text(&text);
    assert!(chunks.len() > 1);
    assert_eq!(chunks.concat(), text);
    // truncate("foo bar") at size 1 keeps "foo".
    assert_eq!(
        splitter(1, 0, tok.clone())
            .split_text("foo bar")
            .first()
            .map(String::as_str),
        Some("foo")
    );
}

#[test]
fn korean_and_chinese_split_into_several_chunks() {
    let tok = cl100k();
    let korean = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다. ".repeat(20);
    let chunks = split_and_check(&korean, 64, 6, &tok).unwrap();
    assert!(chunks.len() > 1);
    let chinese = "我们的文章讨论了迭代器和异常处理的各种细节，并给出了很多例子。".repeat(40);
    let chunks = split_and_check(&chinese, 512, 51, &tok).unwrap();
    assert!(chunks.len() >= 2);
}

#[test]
fn huge_single_line_and_huge_word() {
    let tok = cl100k();
    let text = "x".repeat(200_000);
    split_and_check(&text, 256, 25, &tok).unwrap();
    let text = format!("start {} end", "ab\u{301}".repeat(50_000));
    split_and_check(&text, 100, 10, &tok).unwrap();
}

/// Compact-style packing of a conformance node (`overlap_0`, node 0 has 253 cl100k tokens):
/// the whole node fits in one 256-token chunk and the count is exact.
#[test]
fn exact_counts_on_real_text() {
    let tok = cl100k();
    let para = "Char, attempting find initializing tab checked typing. Shortcut comma executed selected sections complexity scope matrix honored bucket nonzero hexdigit floor or this propagated reserved.\n\n";
    let text = para.repeat(50);
    for (size, overlap) in [(256, 25), (100, 10), (17, 1), (3070, 307)] {
        split_and_check(&text, size, overlap, &tok).unwrap();
    }
}

/// Node texts and their cl100k counts as recorded from the reference
/// (`shared/conformance/traces`, `content_tokens`).
#[test]
fn conformance_trace_counts() {
    let tok = cl100k();
    let cases = [
        (
            "The template variable {query_str} must not be substituted inside context.",
            14,
        ),
        ("async repeatedly mathematical insertion intrinsic", 5),
        (
            "Separating overridden excepting denotes terminates sys gets juice.",
            11,
        ),
        ("Iterables raise StopIteration when exhausted.", 8),
        (
            "Café déjà vu — naïve façade, coöperate; Ångström and Œuvre.",
            24,
        ),
    ];
    for (text, tokens) in cases {
        assert_eq!(tok.count(text), tokens, "{text}");
        let whole = splitter(tokens, 0, tok.clone()).split_chunks(text);
        assert_eq!(whole.len(), 1);
        assert_eq!(
            (whole[0].start, whole[0].end, whole[0].tokens),
            (0, text.len(), tokens)
        );
        for size in [1, 2, tokens / 2, tokens - 1] {
            let size = size.max(1);
            let chunks = split_and_check(text, size, size / 4, &tok).unwrap();
            assert!(chunks.len() > 1);
        }
    }
    // Whitespace-only node text: no chunk.
    assert!(splitter(10, 1, tok).split_chunks("   ").is_empty());
}
