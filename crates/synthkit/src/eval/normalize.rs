//! SQuAD-style answer normalisation.
//!
//! [`normalize()`] lowercases the text, drops every character that is neither a letter, a
//! digit nor whitespace (SQuAD drops ASCII punctuation; Unicode punctuation and symbols go
//! too, so curly quotes and dashes make no difference), drops the articles `a`, `an` and
//! `the`, and joins the words with one space. Answers and alternatives are compared after
//! it, word by word ([`tokens`]).

/// The words dropped as articles.
pub const ARTICLES: [&str; 3] = ["a", "an", "the"];

/// `text` normalised: lowercase, no punctuation, no articles, single spaces.
pub fn normalize(text: &str) -> String {
    tokens(text).join(" ")
}

/// The words of `text` after normalisation.
pub fn tokens(text: &str) -> Vec<String> {
    let kept: String = text
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect();
    kept.split_whitespace()
        .filter(|w| !ARTICLES.contains(w))
        .map(str::to_string)
        .collect()
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
}
