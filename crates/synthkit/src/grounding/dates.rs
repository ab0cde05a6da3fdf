//! Dates as answers and sources write them (`12 March 2024`, `March 12`, `2024-03-12`),
//! each read as the [`DateKey`] lookups compare.

/// A date, as much of it as was written: 0 for a part not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct DateKey {
    pub(super) year: u16,
    pub(super) month: u8,
    pub(super) day: u8,
}

/// Month names and the abbreviations read for them, by month - 1.
const MONTHS: [(&str, &[&str]); 12] = [
    ("january", &["jan"]),
    ("february", &["feb"]),
    ("march", &["mar"]),
    ("april", &["apr"]),
    ("may", &[]),
    ("june", &["jun"]),
    ("july", &["jul"]),
    ("august", &["aug"]),
    ("september", &["sep", "sept"]),
    ("october", &["oct"]),
    ("november", &["nov"]),
    ("december", &["dec"]),
];

/// The month a word names (any case), 1 to 12.
pub(super) fn month(word: &str) -> Option<u8> {
    // Month names and their short forms are 3 to 9 ASCII letters: most words are not.
    if !(3..=9).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let n = MONTHS.iter().position(|(name, short)| {
        name.eq_ignore_ascii_case(word) || short.iter().any(|s| s.eq_ignore_ascii_case(word))
    })?;
    u8::try_from(n + 1).ok()
}

/// A day of the month as written: `3`, `03`, `3rd`.
fn day(word: &str) -> Option<u8> {
    let digits = word
        .strip_suffix("st")
        .or_else(|| word.strip_suffix("nd"))
        .or_else(|| word.strip_suffix("rd"))
        .or_else(|| word.strip_suffix("th"))
        .unwrap_or(word);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A year as written: four digits.
fn year(word: &str) -> Option<u16> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
        .filter(|&y| y > 0)
}

/// An ISO 8601 date: `2019-04-01`.
pub(super) fn iso_date(word: &str) -> Option<DateKey> {
    let mut parts = word.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = day(m).filter(|&m| m <= 12)?;
    Some(DateKey {
        year: year(y)?,
        month,
        day: day(d)?,
    })
}

/// A date read from the words `words` (cores of white-space separated chunks, without
/// their punctuation): `March 3, 2020`, `3 March 2020`, `March 2020`, `March 3`,
/// `2019-04-01`. Returns how many words it took. `joined(k)` says whether word `k`
/// follows word `k - 1` with nothing but white space and punctuation between; with
/// `capital_months`, a month must be written with a capital (as in an answer).
pub(super) fn date_at<'w>(
    word: impl Fn(usize) -> Option<&'w str>,
    joined: impl Fn(usize) -> bool,
    i: usize,
    capital_months: bool,
) -> Option<(usize, DateKey)> {
    let first = word(i)?;
    if let Some(key) = iso_date(first) {
        return Some((1, key));
    }
    let month_at = |k: usize| {
        let w = word(k)?;
        if capital_months && !w.starts_with(|c: char| c.is_uppercase()) {
            return None;
        }
        month(w)
    };
    let next = |k: usize| word(k).filter(|_| joined(k));
    if let Some(m) = month_at(i) {
        if let Some(d) = next(i + 1).and_then(day) {
            let y = next(i + 2).and_then(year);
            let key = DateKey {
                year: y.unwrap_or(0),
                month: m,
                day: d,
            };
            return Some((if y.is_some() { 3 } else { 2 }, key));
        }
        let y = next(i + 1).and_then(year)?;
        return Some((
            2,
            DateKey {
                year: y,
                month: m,
                day: 0,
            },
        ));
    }
    let d = day(first)?;
    let m = month_at(i + 1).filter(|_| joined(i + 1))?;
    let y = next(i + 2).and_then(year);
    let key = DateKey {
        year: y.unwrap_or(0),
        month: m,
        day: d,
    };
    Some((if y.is_some() { 3 } else { 2 }, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_named_in_full_or_short_in_any_case() {
        assert_eq!(month("SEPT"), Some(9));
        assert_eq!(month("december"), Some(12));
        assert_eq!(month("May"), Some(5));
        assert_eq!(month("ma"), None);
        assert_eq!(month("septembers"), None);
        assert_eq!(month("m\u{e4}r"), None);
    }
}
