//! The built-in encodings give exactly the tokens of `bpe-openai` (whose encodings are
//! checked against tiktoken by its authors): token budgets promise the server's counts.

use bpe_openai::Tokenizer as Reference;
use synthkit::text::{BpeTokenizer, Tokenizer};

/// Texts that exercise every branch of the pre-token patterns.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        " ",
        "  ",
        "\n",
        "\r\n\r\n",
        "hello world",
        "Hello, World!! How's it going? I'm fine, you'll see; we'd THEY'RE we've",
        "don't DON'T Don'T 'tis '' 's",
        "a  b   c    d\t\te\u{a0}\u{a0}f",
        "trailing spaces   ",
        "  leading spaces",
        "x   \n\n  y  \n",
        "1 12 123 1234 12345 123456 3.14159 1,000,000 -42 +7e10 ٣٤٥ ⅷ",
        "fn main() {\n    let x = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
        "def f(a, b):\n\treturn a/b  # divide\n\n\nclass C: pass",
        "<|endoftext|> <|fim_prefix|>{query_str}</s>",
        "émigré naïve café Ångström ﬁ ﬃ e\u{301}",
        "日本語のテキストです。中文文本。한국어 텍스트.",
        "Привет, мир! Ελληνικά κείμενα. עברית ערבית العربية",
        "emoji 🚀🚀 👩‍👩‍👧‍👦 🇫🇷 ✨done✨",
        "CamelCaseWords and snake_case_words and SCREAMING_CASE",
        "path/to/file.rs:12:34 https://example.com/a?b=c&d=e#f //comment",
        "!!!??? ... --- *** ___ ~~~ \u{200b}\u{feff}",
        "mixed\u{2028}line\u{2029}separators\u{85}next\u{b}vt\u{c}ff",
        "ǅungla ǈudevit ǋ titlecase ʰmodifier",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Longer texts: runs of every kind, repeated with shifting separators.
    let mut long = String::new();
    for i in 0..400 {
        long.push_str(
            [
                "word", " ", "  ", "\n", "1234", "'s", "é", "🚀", "\t", "x/y",
            ][i % 10],
        );
        if i % 7 == 0 {
            long.push_str(&" ".repeat(i % 5));
        }
    }
    texts.push(long);
    texts.push("ab".repeat(3000));
    texts.push(" ".repeat(1000) + "end");
    texts
}

fn check(ours: &BpeTokenizer, reference: &Reference) {
    for text in texts() {
        let tokens = reference.encode(text.as_str());
        assert_eq!(
            ours.encode(&text),
            tokens,
            "{}: encoding of {text:?}",
            ours.name()
        );
        assert_eq!(
            ours.count(&text),
            tokens.len(),
            "{}: count of {text:?}",
            ours.name()
        );
        assert_eq!(
            ours.count_till_limit(&text, tokens.len()),
            Some(tokens.len())
        );
        assert_eq!(ours.decode(&tokens).as_deref(), Some(text.as_str()));
    }
}

#[test]
fn cl100k_base_equals_bpe_openai() {
    check(&BpeTokenizer::cl100k_base(), bpe_openai::cl100k_base());
}

#[test]
fn o200k_base_equals_bpe_openai() {
    check(&BpeTokenizer::o200k_base(), bpe_openai::o200k_base());
}
