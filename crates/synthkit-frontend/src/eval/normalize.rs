//! Answer normalisation: SQuAD's, with words split as a reader of technical text splits
//! them.
//!
//! [`normalize()`] lowercases the text and cuts it into words, drops the articles `a`,
//! `an` and `the`, and joins the words with one space. A word is a run of letters or a run
//! of digits: every other character (white space, ASCII and Unicode punctuation, symbols)
//! ends a word, and so does a change between letters and digits. So a version, a flag, a
//! path or a code name falls apart into the words a reader sees in it: `` `1.65.0` `` is
//! `1 65 0`, `--features=bundled` is `features bundled`, `synthkit::Type` is `crate type`,
//! `src/main.rs` is `src main rs`, `v1.65` is `v 1 65`. SQuAD drops punctuation instead
//! (`1.65.0` became `1650`, where `1.65` could never be found).
//!
//! Numbers are read as numbers where they are written as numbers: a comma between digit
//! groups of three is a thousands separator, so `1,000` and `1000` are one word, `1000`
//! (but `1,2,3` is three numbers). A number written with dots (`1.65.0`, `3.14`) keeps its
//! parts as words, and the matcher ([`crate::eval::metrics`]) knows they belong together:
//! `1.65` is found in `1.65.0` but not in `1.650`, `11.65` or `2.1.65`. Number words are
//! not numbers (`six` is not `6`).
//!
//! Answers and alternatives are compared after it, word by word ([`tokens`]).

/// The words dropped as articles.
pub const ARTICLES: [&str; 3] = ["a", "an", "the"];

/// `text` normalised: lowercase, words as the [module documentation](self) cuts them, no
/// articles, single spaces.
pub fn normalize(text: &str) -> String {
    tokens(text).join(" ")
}

/// The words of `text` after normalisation.
pub fn tokens(text: &str) -> Vec<String> {
    words(text).into_iter().map(|w| w.text).collect()
}

/// One word of a text, as [`words`] cuts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// Lowercase letters, or digits (thousands separators dropped).
    pub text: String,
    /// A part of a dotted number after its first (`65` and `0` in `1.65.0`): it belongs
    /// with the word before it.
    pub after_dot: bool,
}

/// What kind of word a character continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Letters,
    Digits,
}

fn kind(c: char) -> Option<Kind> {
    if c.is_numeric() {
        Some(Kind::Digits)
    } else if c.is_alphabetic() {
        Some(Kind::Letters)
    } else {
        None
    }
}

/// Whether `chars[at..]` is a comma followed by exactly three digits and then no digit
/// (a thousands separator inside a number).
fn thousands_separator(chars: &[char], at: usize) -> bool {
    let is_digit = |i: usize| chars.get(i).is_some_and(|c| c.is_ascii_digit());
    chars.get(at) == Some(&',')
        && is_digit(at + 1)
        && is_digit(at + 2)
        && is_digit(at + 3)
        && !chars.get(at + 4).is_some_and(|c| c.is_numeric())
}

/// The words of `text` (see the [module documentation](self)), articles dropped.
pub(crate) fn words(text: &str) -> Vec<Word> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<Word> = Vec::new();
    let mut current = String::new();
    let mut current_kind: Option<Kind> = None;
    // Whether the word being read is a part of a dotted number after its first.
    let mut after_dot = false;
    // Whether the last character was a dot right after a digit, before a digit.
    let mut dot = false;
    let flush = |current: &mut String, after_dot: bool, out: &mut Vec<Word>| {
        if current.is_empty() {
            return;
        }
        let text = std::mem::take(current);
        if !ARTICLES.contains(&text.as_str()) {
            out.push(Word { text, after_dot });
        }
    };
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let k = kind(c);
        match (current_kind, k) {
            (Some(Kind::Digits), _) if thousands_separator(&chars, i) => {
                // `1,000`: the comma is dropped and the number goes on.
            }
            (Some(was), Some(now)) if was == now => current.extend(c.to_lowercase()),
            (_, Some(now)) => {
                // A new word; after a dot between digits, a part of the same number.
                flush(&mut current, after_dot, &mut out);
                after_dot = dot && now == Kind::Digits;
                current_kind = Some(now);
                current.extend(c.to_lowercase());
            }
            (Some(Kind::Digits), None)
                if c == '.' && chars.get(i + 1).is_some_and(|n| n.is_numeric()) =>
            {
                // `1.65`: the dot ends this part, and the next digit starts the next one.
                flush(&mut current, after_dot, &mut out);
                current_kind = None;
                dot = true;
                i += 1;
                continue;
            }
            (_, None) => {
                flush(&mut current, after_dot, &mut out);
                after_dot = false;
                current_kind = None;
            }
        }
        dot = false;
        i += 1;
    }
    flush(&mut current, after_dot, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_drops_punctuation_articles_and_extra_space() {
        assert_eq!(
            normalize("  The Mirror,  is  cleaned!  "),
            "mirror is cleaned"
        );
        assert_eq!(normalize("An apple a day"), "apple day");
        assert_eq!(normalize("“Six” months — 6,000 km"), "six months 6000 km");
        assert_eq!(normalize("Théâtre\tÉTÉ\n"), "théâtre été");
        // Articles are whole words only.
        assert_eq!(normalize("another theme"), "another theme");
        assert_eq!(normalize("... ---"), "");
        assert_eq!(tokens("A B c"), vec!["b", "c"]);
    }

    #[test]
    fn technical_text_splits_as_a_reader_reads_it() {
        assert_eq!(normalize("`1.65.0`"), "1 65 0");
        assert_eq!(normalize("--features=bundled"), "features bundled");
        assert_eq!(normalize("`crate::Type`"), "crate type");
        assert_eq!(normalize("src/main.rs"), "src main rs");
        assert_eq!(normalize("v1.65, SHA-256"), "v 1 65 sha 256");
        assert_eq!(normalize("1.51.x"), "1 51 x");
        assert_eq!(normalize("don't"), "don t");
    }

    #[test]
    fn thousands_separators_join_a_number_and_dots_chain_its_parts() {
        assert_eq!(normalize("1,000 and 1000"), "1000 and 1000");
        assert_eq!(normalize("12,345,678"), "12345678");
        assert_eq!(normalize("1,2,3"), "1 2 3");
        assert_eq!(normalize("1,0000"), "1 0000");
        assert_eq!(normalize("at 3, 4 and 5"), "at 3 4 and 5");
        let dotted: Vec<bool> = words("1.65.0 and 3. 4")
            .iter()
            .map(|w| w.after_dot)
            .collect();
        assert_eq!(dotted, [false, true, true, false, false, false]);
        // A sentence's full stop after a number chains nothing.
        let dotted: Vec<bool> = words("It is 1.65. Then 2")
            .iter()
            .map(|w| w.after_dot)
            .collect();
        assert_eq!(dotted, [false, false, false, true, false, false]);
    }
}
