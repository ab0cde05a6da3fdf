//! The OpenAI byte-pair encodings behind [`BpeTokenizer`](super::BpeTokenizer), built from
//! their tiktoken rank files at first use.
//!
//! The binary carries only the gzipped rank files (`data/*.tiktoken.gz`, 0.8 MB for
//! `cl100k_base`, 1.7 MB for `o200k_base`; MIT, see `data/NOTICE`). The first count with
//! an encoding in a process builds its tables (`cl100k_base` about 0.3 s, `o200k_base`
//! about 0.8 s in a release build on an idle core); later uses share them.
//!
//! Text is first split into pre-tokens with the encoding's pattern, as tiktoken does, and
//! each pre-token is encoded on its own. tiktoken's patterns use a negative look-ahead
//! (`\s+(?!\S)`: a whitespace run that does not end right before a non-space), which a
//! linear-time regex engine cannot express. It is written here as its own pattern that
//! matches one character more (`\s+\s`), and that last character is given back.
//!
//! For `cl100k_base`, pre-tokens of ASCII text are read by a hand-written scanner
//! ([`super::pretoken`]) that gives the same pieces several times faster; the regex reads
//! wherever a character outside ASCII decides a piece.

use std::io::Read;
use std::sync::OnceLock;

use bpe::byte_pair_encoding::BytePairEncoding;
use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

use super::pretoken::Scanner;

/// The hash factor that gives the tokens of both encodings distinct hashes in
/// [`BytePairEncoding`] (the factor the `bpe` crate's authors found for them).
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

/// The contractions both patterns treat as pre-tokens of their own.
const CONTRACTIONS: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";

/// The two encodings built into the crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    /// `cl100k_base` (GPT-3.5, GPT-4).
    Cl100k,
    /// `o200k_base` (GPT-4o and later).
    O200k,
}

impl Table {
    /// The gzipped tiktoken rank file: one base64 token and its rank a line.
    fn rank_file(self) -> &'static [u8] {
        match self {
            Table::Cl100k => include_bytes!("../../data/cl100k_base.tiktoken.gz"),
            Table::O200k => include_bytes!("../../data/o200k_base.tiktoken.gz"),
        }
    }

    /// The pre-token patterns, in priority order, and for each whether its last character
    /// is a look-ahead to give back.
    fn patterns(self) -> Vec<(String, bool)> {
        let words = match self {
            Table::Cl100k => vec![
                CONTRACTIONS.to_string(),
                r"[^\r\n\p{L}\p{N}]?\p{L}+".to_string(),
                r"\p{N}{1,3}".to_string(),
                r" ?[^\s\p{L}\p{N}]+[\r\n]*".to_string(),
            ],
            Table::O200k => {
                let upper = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]";
                let lower = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]";
                vec![
                    format!(r"[^\r\n\p{{L}}\p{{N}}]?{upper}*{lower}+{CONTRACTIONS}?"),
                    format!(r"[^\r\n\p{{L}}\p{{N}}]?{upper}+{lower}*{CONTRACTIONS}?"),
                    r"\p{N}{1,3}".to_string(),
                    r" ?[^\s\p{L}\p{N}]+[\r\n/]*".to_string(),
                ]
            }
        };
        let mut first = words;
        // Newlines with the whitespace before them; trailing whitespace at the very end.
        first.push(r"\s*[\r\n]+".to_string());
        first.push(r"\s+$".to_string());
        vec![
            (first.join("|"), false),
            // `\s+(?!\S)`: the run and one more whitespace character, given back.
            (r"\s+\s".to_string(), true),
            // Whatever whitespace is left (a single space before a word).
            (r"\s+".to_string(), false),
        ]
    }

    /// Whether text is put in Unicode NFC before splitting (neither OpenAI encoding does).
    fn nfc(self) -> bool {
        false
    }

    /// The hand-written pre-tokenizer of ASCII text, where there is one
    /// ([`super::pretoken`]); the regex reads the rest.
    fn scanner(self) -> Option<Scanner> {
        match self {
            Table::Cl100k => Some(super::pretoken::cl100k_piece),
            Table::O200k => None,
        }
    }
}

/// One encoding: its byte-pair tables and its pre-tokenizer.
pub(crate) struct Encoding {
    /// Token ids of byte strings, and back.
    pub(crate) bpe: BytePairEncoding,
    /// All patterns in one automaton; a match says which pattern matched.
    splitter: Regex,
    /// For each pattern, whether its last character is a look-ahead.
    lookahead: Vec<bool>,
    /// Whether text is NFC-normalized first.
    nfc: bool,
    /// The pre-token at the start of a text when its characters decide it without the
    /// regex (`None` from it: ask the regex).
    scanner: Option<Scanner>,
}

static CL100K: OnceLock<Encoding> = OnceLock::new();
static O200K: OnceLock<Encoding> = OnceLock::new();

/// The encoding of `table`, built on first use and shared by the whole process.
pub(crate) fn encoding(table: Table) -> &'static Encoding {
    let cell = match table {
        Table::Cl100k => &CL100K,
        Table::O200k => &O200K,
    };
    cell.get_or_init(|| Encoding::build(table))
}

/// The byte-pair tables of a gzipped tiktoken rank file, or why it cannot be read.
///
/// Built by `bpe`'s own `from_tiktoken`, not its generic `from_dictionary`: a generic
/// function is compiled in the crate that calls it, and in a debug build of this one the
/// tables took 5.2 s to build instead of 1.5 s (the `bpe` crate is optimised in debug
/// builds, this one is not).
fn read_rank_file(gz: &[u8]) -> Result<BytePairEncoding, String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot unpack: {e}"))?;
    BytePairEncoding::from_tiktoken(&text, Some(HASH_FACTOR))
        .map_err(|e| format!("bad base64: {e}"))
}

impl Encoding {
    /// Builds the tables of `table` from its embedded rank file.
    fn build(table: Table) -> Self {
        // The rank files and patterns are part of the crate, checked by its tests: a
        // failure here is a broken build, not bad input.
        let bpe =
            read_rank_file(table.rank_file()).unwrap_or_else(|e| unreachable!("{table:?}: {e}"));
        let (patterns, lookahead): (Vec<String>, Vec<bool>) = table.patterns().into_iter().unzip();
        let splitter =
            Regex::new_many(&patterns).unwrap_or_else(|e| unreachable!("{table:?}: {e}"));
        Self {
            bpe,
            splitter,
            lookahead,
            nfc: table.nfc(),
            scanner: table.scanner(),
        }
    }

    /// `text` as the encoding sees it (NFC when the encoding asks for it).
    pub(crate) fn normalize<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if self.nfc {
            use unicode_normalization::UnicodeNormalization;
            std::borrow::Cow::Owned(text.nfc().collect())
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }

    /// The pre-tokens of (normalized) `text`, in order; together they are all of it.
    pub(crate) fn split<'a>(&'a self, text: &'a str) -> Pieces<'a> {
        Pieces {
            encoding: self,
            text,
            at: 0,
            scanner: self.scanner,
        }
    }

    /// [`Encoding::split`] with the regex alone, as the scanner is checked against.
    #[cfg(test)]
    pub(crate) fn split_by_regex<'a>(&'a self, text: &'a str) -> Pieces<'a> {
        Pieces {
            scanner: None,
            ..self.split(text)
        }
    }

    /// The token ids of `text`.
    pub(crate) fn encode(&self, text: &str) -> Vec<u32> {
        let text = self.normalize(text);
        self.split(&text)
            .flat_map(|piece| self.bpe.encode_via_backtracking(piece.as_bytes()))
            .collect()
    }

    /// The text of `tokens`, or `None` when they are not valid UTF-8 (or not tokens).
    pub(crate) fn decode(&self, tokens: &[u32]) -> Option<String> {
        let count = self.bpe.num_tokens();
        if tokens.iter().any(|&t| t as usize >= count) {
            return None;
        }
        String::from_utf8(self.bpe.decode_tokens(tokens)).ok()
    }
}

/// The pre-tokens of a text (see [`Encoding::split`]).
pub(crate) struct Pieces<'a> {
    encoding: &'a Encoding,
    text: &'a str,
    /// Where the next pre-token starts.
    at: usize,
    /// The encoding's scanner, tried before the regex.
    scanner: Option<Scanner>,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.text.get(self.at..)?;
        if rest.is_empty() {
            return None;
        }
        if let Some(len) = self.scanner.and_then(|scan| scan(rest.as_bytes())) {
            // An ASCII piece: it ends at a character boundary.
            let piece = rest.get(..len)?;
            self.at += len;
            return Some(piece);
        }
        let found = self
            .encoding
            .splitter
            .find(Input::new(rest).anchored(Anchored::Yes));
        let mut len = match found {
            Some(m) => {
                let mut len = m.end();
                if self.encoding.lookahead.get(m.pattern().as_usize()) == Some(&true) {
                    // Give back the look-ahead character, keeping at least one.
                    let last = rest[..len].chars().next_back().map_or(0, char::len_utf8);
                    if len > last {
                        len -= last;
                    }
                }
                len
            }
            None => 0,
        };
        if len == 0 {
            // The patterns cover every character; should one not match, it is a
            // pre-token of its own rather than an endless loop.
            len = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        let piece = &rest[..len];
        self.at += len;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_files_unpack_to_their_token_counts() {
        assert_eq!(
            read_rank_file(Table::Cl100k.rank_file()).map(|t| t.num_tokens()),
            Ok(100_256)
        );
        assert_eq!(
            read_rank_file(Table::O200k.rank_file()).map(|t| t.num_tokens()),
            Ok(199_998)
        );
        assert!(read_rank_file(b"not gzip").is_err());
    }

    #[test]
    fn patterns_compile() {
        for table in [Table::Cl100k, Table::O200k] {
            let (patterns, _): (Vec<String>, Vec<bool>) = table.patterns().into_iter().unzip();
            assert!(Regex::new_many(&patterns).is_ok(), "{table:?}");
        }
    }

    #[test]
    fn pieces_cover_the_text() {
        let enc = encoding(Table::Cl100k);
        for text in ["", " ", "a  b", "x   \n\n  y  ", "don't 12345 ??!"] {
            assert_eq!(enc.split(text).collect::<String>(), text);
        }
        let pieces: Vec<&str> = enc.split("a   b").collect();
        assert_eq!(pieces, ["a", "  ", " b"]);
    }

    #[test]
    fn out_of_range_tokens_do_not_decode() {
        assert_eq!(encoding(Table::Cl100k).decode(&[u32::MAX]), None);
    }
}
