//! Tests of the quote check.

use std::sync::atomic::AtomicBool;

use super::*;
use crate::citation::work::POLL_EVERY;

fn sources<'a>(ids: &'a [String], texts: &'a [String], allowed: &'a BTreeSet<u32>) -> Sources<'a> {
    Sources {
        ids,
        texts,
        allowed,
        evidence: None,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The check of `raw`, to its end.
fn run(raw: &str, sources: &Sources<'_>) -> QuoteReport {
    let never = AtomicBool::new(false);
    check(raw, sources, Some, &mut Work::new(&never)).unwrap()
}

/// The steps the check of `raw` takes.
fn steps(raw: &str, sources: &Sources<'_>) -> u64 {
    let never = AtomicBool::new(false);
    let mut work = Work::new(&never);
    check(raw, sources, Some, &mut work).unwrap();
    work.steps()
}

#[test]
fn verified_quotes_give_character_offsets() {
    let ids = strings(&["a", "b"]);
    let texts = strings(&["Café déjà vu: the mirror is cleaned every six months.", "x"]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let r = run(
        "It is cleaned [1] \"the mirror is cleaned\".",
        &sources(&ids, &texts, &allowed),
    );
    let q = &r.quotes[0];
    assert_eq!(q.status, QuoteStatus::Verified);
    assert_eq!(q.node_id, "a");
    let start = q.start.unwrap();
    let end = q.end.unwrap();
    let text: Vec<char> = texts[0].chars().collect();
    let found: String = text[start..end].iter().collect();
    assert_eq!(found, "the mirror is cleaned");
    assert_eq!(start, 14);
    assert_ne!(
        texts[0].find("the mirror").unwrap(),
        start,
        "bytes differ from chars"
    );
}

#[test]
fn normalises_space_case_and_quote_marks() {
    let ids = strings(&["a"]);
    let texts = strings(&["He said \u{201C}open  the\n dome\u{201D} at dusk."]);
    let allowed: BTreeSet<u32> = [1].into();
    let r = run(
        "Yes [1] \u{201C}said \"OPEN the dome\" AT dusk.\u{201D}",
        &sources(&ids, &texts, &allowed),
    );
    assert_eq!(r.quotes[0].status, QuoteStatus::Verified, "{:?}", r.quotes);
    assert_eq!(r.quotes[0].start, Some(3));
}

#[test]
fn misattributed_and_not_found() {
    let ids = strings(&["a", "b"]);
    let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let r = run(
        "A [1] \"mirror is cleaned\". B [2] \"made up words\".",
        &sources(&ids, &texts, &allowed),
    );
    assert_eq!(r.quotes[0].status, QuoteStatus::Misattributed);
    assert_eq!(r.quotes[0].node_id, "b");
    assert_eq!(r.quotes[0].marked_node_id, "a");
    assert_eq!(r.quotes[1].status, QuoteStatus::NotFound);
    assert_eq!(r.quotes[1].start, None);
    assert!(r.supported.is_empty());
    assert_eq!(r.repointed, vec![(1, 2)]);
}

#[test]
fn flags_numbers_missing_from_the_cited_sources() {
    let ids = strings(&["a", "b"]);
    let texts = strings(&["Cleaned every 6 months, 1,000 visitors.", "Built in 1897."]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let r = run(
        "Every 6 months [1]. It has 1000 visitors and 3.5 domes [1]. Built 1897 [2]. Age 12.",
        &sources(&ids, &texts, &allowed),
    );
    let flagged: Vec<&str> = r
        .unsupported_numbers
        .iter()
        .map(|u| u.number.as_str())
        .collect();
    assert_eq!(flagged, vec!["3.5"]);
    assert_eq!(r.unsupported_numbers[0].markers, vec![1]);
    assert_eq!(
        r.unsupported_numbers[0].sentence,
        "It has 1000 visitors and 3.5 domes."
    );
}

#[test]
fn a_marker_after_the_full_stop_cites_the_sentence_before() {
    let ids = strings(&["a"]);
    let texts = strings(&["Open 9 to 5."]);
    let allowed: BTreeSet<u32> = [1].into();
    let r = run(
        "Open 9 to 6. [1] \"Open 9 to 5\"",
        &sources(&ids, &texts, &allowed),
    );
    assert_eq!(r.quotes[0].status, QuoteStatus::Verified);
    assert_eq!(r.unsupported_numbers.len(), 1);
    assert_eq!(r.unsupported_numbers[0].number, "6");
}

#[test]
fn markers_without_quotes_and_other_brackets() {
    let allowed: BTreeSet<u32> = [1, 2].into();
    let never = AtomicBool::new(false);
    let mut work = Work::new(&never);
    let ms = scan_markers("a [x] [1, 9] [2] b[3] [2, 2]", &allowed, &mut work).unwrap();
    assert_eq!(ms.checked.len(), 3);
    assert_eq!(ms.checked[0].numbers, vec![1]);
    assert_eq!(ms.checked[2].numbers, vec![2]);
    let read = |text: &str, at: usize| {
        let (closers, body) = quote_opening(text, at)?;
        read_quote(text, body, closers, &mut Work::new(&never)).unwrap()
    };
    assert!(read("[1] \"\"", 3).is_none());
    assert_eq!(read(" : \"ok\" rest", 0).unwrap().inside, "ok");
    assert!(read(" ok", 0).is_none());
}

#[test]
fn a_quote_matches_only_whole_words_of_its_source() {
    let ids = strings(&["a"]);
    let texts = strings(&["The drug is ineffective and unsafe for children aged 13."]);
    let allowed: BTreeSet<u32> = [1].into();
    let r = run(
        "It works [1] \"effective\". Safe [1] \"safe for children\". Age [1] \"aged 3\". \
         Unsafe [1] \"unsafe for children\".",
        &sources(&ids, &texts, &allowed),
    );
    let statuses: Vec<QuoteStatus> = r.quotes.iter().map(|q| q.status).collect();
    use QuoteStatus::{NotFound, Verified};
    assert_eq!(statuses, vec![NotFound, NotFound, NotFound, Verified]);
    assert_eq!((r.quotes[3].start, r.quotes[3].end), (Some(28), Some(47)));
}

#[test]
fn short_quotes_are_never_verified() {
    let ids = strings(&["a"]);
    let texts = strings(&["A dome, a mirror and a telescope."]);
    let allowed: BTreeSet<u32> = [1].into();
    let r = run(
        "One [1] \"a\". Two [1] \"mirror\". Three [1] \"a mirror\". Long [1] \"telescope\".",
        &sources(&ids, &texts, &allowed),
    );
    let got: Vec<(QuoteStatus, Option<UncheckedReason>)> =
        r.quotes.iter().map(|q| (q.status, q.reason)).collect();
    let short = (QuoteStatus::Unchecked, Some(UncheckedReason::TooShort));
    let verified = (QuoteStatus::Verified, None);
    assert_eq!(got, vec![short, short, verified, verified]);
    assert_eq!(r.quotes[0].start, None);
}

#[test]
fn a_quote_closes_only_with_its_own_mark() {
    let ids = strings(&["a"]);
    let texts = strings(&["The dome opens at dusk."]);
    let allowed: BTreeSet<u32> = [1].into();
    let src = sources(&ids, &texts, &allowed);
    // A curly quote closed by a straight mark is not closed: the straight mark and
    // what follows are part of it, so nothing is verified.
    let r = run("At dusk [1] \u{201C}the dome opens\" at dusk.", &src);
    assert_eq!(r.quotes[0].status, QuoteStatus::Unchecked);
    assert_eq!(r.quotes[0].reason, Some(UncheckedReason::Unclosed));
    assert!(r.supported.is_empty(), "an unclosed quote supports nothing");
    // A guillemet closes with its own mark, and so does a low-high German quote.
    let r = run(
        "At dusk [1] \u{ab}the dome opens\u{bb}, [1] \u{201E}opens at dusk\u{201C}.",
        &src,
    );
    assert_eq!(r.quotes.len(), 2);
    assert!(r.quotes.iter().all(|q| q.status == QuoteStatus::Verified));
    assert_eq!(r.supported, [1].into());
}

#[test]
fn over_long_and_unclosed_quotes_are_listed_and_support_nothing() {
    let ids = strings(&["a", "b"]);
    let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let long = "words ".repeat(MAX_QUOTE_CHARS / 6 + 2);
    let raw = format!("Long [1] \"{long}\" and open [2] \"the mirror is cleaned");
    let r = run(&raw, &sources(&ids, &texts, &allowed));
    let got: Vec<Option<UncheckedReason>> = r.quotes.iter().map(|q| q.reason).collect();
    assert_eq!(
        got,
        vec![
            Some(UncheckedReason::TooLong),
            Some(UncheckedReason::Unclosed)
        ]
    );
    assert!(r.quotes.iter().all(|q| q.status == QuoteStatus::Unchecked));
    assert!(r.quotes[0].quote.chars().count() <= MAX_QUOTE_CHARS);
    assert_eq!(r.quotes[1].quote, "the mirror is cleaned");
    assert!(r.supported.is_empty(), "{:?}", r.supported);
    assert!(r.repointed.is_empty());
}

#[test]
fn text_is_compared_in_nfc_on_both_sides() {
    let ids = strings(&["a", "b"]);
    // Source 1 writes "é" as e and a combining accent; source 2 precomposed.
    let texts = strings(&[
        "Le caf\u{65}\u{301} ferme t\u{f4}t.",
        "Un th\u{e9} glac\u{e9}.",
    ]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let r = run(
        "Early [1] \"caf\u{e9} ferme\". Tea [2] \"the\u{301} glace\u{301}\".",
        &sources(&ids, &texts, &allowed),
    );
    assert_eq!(r.quotes[0].status, QuoteStatus::Verified, "{:?}", r.quotes);
    assert_eq!((r.quotes[0].start, r.quotes[0].end), (Some(3), Some(14)));
    assert_eq!(r.quotes[1].status, QuoteStatus::Verified, "{:?}", r.quotes);
    assert_eq!((r.quotes[1].start, r.quotes[1].end), (Some(3), Some(12)));
}

#[test]
fn markers_past_the_cap_are_counted_and_support_nothing() {
    let ids = strings(&["a", "b"]);
    let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let raw = format!("{}Late [2].", "Dusk [1]. ".repeat(MAX_CHECKED_MARKERS));
    let r = run(&raw, &sources(&ids, &texts, &allowed));
    assert_eq!(r.unchecked_markers, 1);
    assert_eq!(r.supported, [1].into(), "[2] was never read");
    // Quotes past MAX_QUOTES are not read either, and support nothing.
    let raw = format!(
        "{}Late [2] \"the mirror is cleaned\".",
        "Dusk [1] \"the dome opens\". ".repeat(MAX_QUOTES)
    );
    let r = run(&raw, &sources(&ids, &texts, &allowed));
    assert_eq!(r.quotes.len(), MAX_QUOTES);
    assert_eq!(r.unchecked_markers, 1);
    assert_eq!(r.supported, [1].into());
}

/// The steps of checking `unit` repeated `n` and `2n` times: the second is at most
/// twice the first plus `slack`.
fn assert_linear(unit: &str, n: usize, slack: u64, sources: &Sources<'_>) {
    let one = steps(&unit.repeat(n), sources);
    let two = steps(&unit.repeat(2 * n), sources);
    assert!(
        two <= 2 * one + slack,
        "{n} x {unit:?}: {one} steps, twice as many: {two}"
    );
}

#[test]
fn the_check_is_linear_in_the_answer() {
    let ids = strings(&["a", "b"]);
    let texts = strings(&[
        "The dome opens at dusk; 3 people, 12 domes.",
        "The mirror is cleaned every 6 months.",
    ]);
    let allowed: BTreeSet<u32> = [1, 2].into();
    let src = sources(&ids, &texts, &allowed);
    // The attack: one sentence of nothing but markers, below and past the
    // cap of markers read.
    assert_linear("[1] ", 400, 1000, &src);
    assert_linear("[1] ", 4 * MAX_CHECKED_MARKERS, 1000, &src);
    // Long quotes, each searched for: below and past the cap of quotes checked.
    let quote = format!("[1] \"{}\" ", "made up words ".repeat(70));
    assert_linear(&quote, 100, 10_000, &src);
    assert_linear(&quote, 2 * MAX_QUOTES, 10_000, &src);
    // Unclosed quotes, numbers in cited sentences, brackets that open no marker.
    assert_linear("[1] \u{201C}no end ", 4 * MAX_QUOTES, 10_000, &src);
    assert_linear("3 people and 12 domes, 7 more [1, 2] ", 300, 10_000, &src);
    assert_linear("[[[[[[[[[[[1", 1000, 1000, &src);
    assert_linear("[1111111111111111111111111111", 1000, 1000, &src);
}

#[test]
fn a_stopped_check_returns_early() {
    let ids = strings(&["a"]);
    let texts = strings(&["The dome opens at dusk."]);
    let allowed: BTreeSet<u32> = [1].into();
    let src = sources(&ids, &texts, &allowed);
    let raw = "Dusk [1] \"the dome opens at dusk\". ".repeat(1000);
    let full = steps(&raw, &src);
    let stop = AtomicBool::new(true);
    let mut work = Work::new(&stop);
    assert_eq!(check(&raw, &src, Some, &mut work).err(), Some(Stopped));
    assert!(
        work.steps() <= POLL_EVERY,
        "{} steps of {full}",
        work.steps()
    );
    assert!(full > 10 * POLL_EVERY, "{full}");
}
