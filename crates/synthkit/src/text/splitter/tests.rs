//! Unit tests of the token text splitter and its cursor.

use super::*;
use crate::text::{BpeTokenizer, Tokenizer};
use std::sync::Arc;

/// Tokens are whitespace-separated words.
use crate::testing::WordTokenizer as Words;

fn words(size: usize, overlap: usize) -> TokenTextSplitter {
    TokenTextSplitter::new(size, overlap, Arc::new(Words)).unwrap()
}

fn cl100k(size: usize, overlap: usize) -> TokenTextSplitter {
    TokenTextSplitter::new(size, overlap, BpeTokenizer::cl100k_base().shared()).unwrap()
}

#[test]
fn settings_are_checked() {
    let tok = BpeTokenizer::cl100k_base().shared();
    assert_eq!(
        TokenTextSplitter::new(0, 0, tok.clone()).unwrap_err(),
        SplitError::ZeroChunkSize
    );
    let err = TokenTextSplitter::new(10, 11, tok.clone()).unwrap_err();
    assert_eq!(
        err,
        SplitError::OverlapTooLarge {
            overlap: 11,
            chunk_size: 10
        }
    );
    assert!(err.to_string().contains("at most the chunk size"));
    assert!(
        SplitError::ZeroChunkSize
            .to_string()
            .contains("greater than 0")
    );
    let s = TokenTextSplitter::new(10, 10, tok).unwrap();
    assert_eq!((s.chunk_size(), s.chunk_overlap()), (10, 10));
    assert_eq!(s.separator(), " ");
    assert_eq!(s.backup_separators(), ["\n"]);
}

#[test]
fn reference_word_examples() {
    let text = "Hello world foo Hello world bar";
    assert_eq!(
        words(2, 0).split_text(text),
        ["Hello world", "foo Hello", "world bar"]
    );
    assert_eq!(
        words(1, 0).split_text(text),
        ["Hello", "world", "foo", "Hello", "world", "bar"]
    );
    assert_eq!(
        words(2, 1).split_text("foo bar hello world"),
        ["foo bar", "bar hello", "hello world"]
    );
    assert_eq!(words(1, 0).split_text("foo bar"), ["foo", "bar"]);
    assert_eq!(cl100k(1, 0).split_text("foo bar"), ["foo", "bar"]);
}

#[test]
fn empty_and_blank() {
    let s = cl100k(10, 2);
    assert_eq!(s.split_text(""), [""]);
    assert!(s.split_chunks("").is_empty());
    assert!(s.split_text(" \n\t ").is_empty());
    assert!(s.split_chunks("   ").is_empty());
    let mut c = s.cursor("  \n ");
    assert!(c.is_done());
    assert_eq!(c.next_chunk(5, 0), None);
}

#[test]
fn separators_stay_in_front() {
    // The reference's pieces: "Hello", ". World", ". Bye", ".".
    let s = words(2, 0)
        .with_separator(".")
        .with_backup_separators(vec![]);
    assert_eq!(
        s.split_text("Hello. World. Bye."),
        ["Hello", ". World", ". Bye", "."]
    );
    let s = words(1, 0)
        .with_separator(".")
        .with_backup_separators(vec![]);
    // ".b b" is two words: cut into characters, where "." and "b" count one each.
    assert_eq!(s.split_text("a a..b b"), ["a", "a", ".", ".", "b", "b"]);
    assert_eq!(words(1, 0).split_text(" a b"), ["a", "b"]);
}

#[test]
fn abcde_at_100() {
    let text = "abcde".repeat(200);
    let chunks = cl100k(100, 0).split_chunks(&text);
    assert_eq!(chunks.len(), 10);
    assert!(chunks.iter().all(|c| c.tokens <= 100 && !c.oversized));
}

#[test]
fn rocket_is_oversized() {
    let s = cl100k(1, 0);
    let chunks = s.split_chunks("🚀");
    assert_eq!(chunks.len(), 1);
    assert!(chunks.iter().all(|c| c.oversized && c.tokens > 1));
    assert_eq!(s.split_text("🚀"), ["🚀"]);
    let many = "🚀".repeat(20);
    let chunks = s.split_text(&many);
    assert_eq!(chunks.len(), 20);
    assert!(chunks.iter().all(|c| c == "🚀"));
}

#[test]
fn newline_backup_separator() {
    let tok = BpeTokenizer::cl100k_base();
    let text = format!("{}\n{}", "a".repeat(49), "a".repeat(50));
    let whole = tok.count(&text);
    let halves = tok
        .count(&"a".repeat(49))
        .max(tok.count(&format!("\n{}", "a".repeat(50))));
    assert!(halves < whole);
    let chunks = cl100k(whole - 1, 0).split_text(&text);
    let lens: Vec<usize> = chunks.iter().map(String::len).collect();
    assert_eq!(lens, [49, 50]);
}

#[test]
fn exact_limit_after_trim() {
    // The reference sums per-split counts, which undercounts once the first word
    // loses its leading space; the final text must still fit.
    let tok = BpeTokenizer::cl100k_base();
    let text = "initializing hexdigit longbyteschar shortstring setdefault ".repeat(40);
    for size in [5, 7, 16, 33, 64, 100, 256] {
        for c in cl100k(size, size / 10).split_chunks(&text) {
            assert_eq!(tok.count(c.text(&text)), c.tokens);
            assert!(c.tokens <= size, "{} > {size}", c.tokens);
        }
    }
}

#[test]
fn cursor_matches_split_chunks() {
    let text = "The quick brown fox jumps over the lazy dog.\n\n".repeat(30);
    let s = cl100k(20, 4);
    let all = s.split_chunks(&text);
    let mut cursor = s.cursor(&text);
    let mut again = Vec::new();
    while let Some(c) = cursor.next_chunk(20, 4) {
        again.push(c);
    }
    assert_eq!(all, again);
    assert!(cursor.is_done());
}

#[test]
fn is_done_right_after_last_chunk() {
    let text = "one two three four five six seven  \n ";
    let mut cursor = words(3, 1).cursor(text);
    let mut n = 0;
    while let Some(_c) = cursor.next_chunk(3, 1) {
        n += 1;
        if cursor.is_done() {
            break;
        }
    }
    assert!(cursor.is_done());
    assert_eq!(cursor.next_chunk(3, 1), None);
    assert!(n >= 3);
}

#[test]
fn oversized_whitespace_is_dropped_not_the_text() {
    // U+2000 alone is more than one token; it must not end the splitting.
    assert_eq!(cl100k(1, 0).split_text("\u{2000}!"), ["!"]);
    assert_eq!(cl100k(1, 1).split_text("a\u{2000}\u{2000}b"), ["a", "b"]);
}

#[test]
fn odd_inputs_do_not_panic() {
    let s = cl100k(3, 1);
    for text in [
        "a\r\nb\r\n\r\nc",
        "\0\0\0 \0",
        "e\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}",
        "👩‍👩‍👧‍👦👩‍👩‍👧‍👦 👨‍🔬",
        "  leading and trailing  ",
        "中文文本没有空格但是很长很长很长很长很长",
    ] {
        let chunks = s.split_chunks(text);
        for c in &chunks {
            assert!(text.is_char_boundary(c.start) && text.is_char_boundary(c.end));
            assert!(c.tokens <= 3 || (c.oversized && c.text(text).chars().count() == 1));
        }
    }
}
