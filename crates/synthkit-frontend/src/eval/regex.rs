//! Answer regexes: compiled case-insensitively, each within a size limit and all of a
//! cases file within one budget.

/// The largest compiled size of an answer regex (bytes): a larger pattern is refused.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The most memory the answer regexes of one cases file take together, compiled (bytes,
/// 64 MiB): past it a regex is refused ([`RegexBudget`]). Each regex is also at most
/// [`REGEX_SIZE_LIMIT`], so a file of many small patterns that each compile large (the
/// 7 bytes of `\w{20}` take 1.1 MB compiled) cannot take gigabytes; `\b6 months\b`
/// takes 17 KB, so the budget holds thousands of ordinary ones.
pub const MAX_REGEX_BYTES: usize = 64 << 20;

/// What the answer regexes read so far take, against a bound ([`MAX_REGEX_BYTES`] by
/// default): one budget for a whole cases file
/// ([`parse_case_within`](super::case::parse_case_within)). A regex is charged what it
/// takes compiled (`regex_automata`'s `memory_usage`) and its pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexBudget {
    limit: usize,
    used: usize,
}

impl Default for RegexBudget {
    fn default() -> Self {
        Self::new(MAX_REGEX_BYTES)
    }
}

impl RegexBudget {
    /// A budget of `limit` bytes of compiled regexes.
    pub fn new(limit: usize) -> Self {
        Self { limit, used: 0 }
    }

    /// The bytes the regexes compiled so far take.
    pub fn used(&self) -> usize {
        self.used
    }

    /// The bound.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn left(&self) -> usize {
        self.limit.saturating_sub(self.used)
    }
}

/// Why a pattern is not an answer regex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegexError {
    /// It does not parse.
    #[error("not a valid regex: {0}")]
    Invalid(String),
    /// It compiles larger than [`REGEX_SIZE_LIMIT`].
    #[error(
        "a regex that compiles larger than {limit} bytes: make it simpler (a bounded \
         repeat of a Unicode class such as `\\w{{40}}` is large; `[a-z0-9_]` is smaller)"
    )]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The regexes before it already take (nearly) all of the budget.
    #[error(
        "over the budget of a file's answer regexes: together they take at most {limit} \
         bytes compiled, and those before this one take {used}: use fewer or simpler \
         regexes (a plain string or a list of strings matches whole words without one)"
    )]
    OverBudget {
        /// The bytes taken before this regex.
        used: usize,
        /// The budget.
        limit: usize,
    },
}

/// A regex alternative: matched case-insensitively against the raw answer.
#[derive(Debug, Clone)]
pub struct AnswerRegex {
    pattern: String,
    regex: regex_automata::meta::Regex,
}

impl AnswerRegex {
    /// Compiles `pattern` (case-insensitive; at most [`REGEX_SIZE_LIMIT`] compiled), on
    /// a budget of its own.
    pub fn new(pattern: &str) -> Result<Self, RegexError> {
        Self::within(pattern, &mut RegexBudget::default())
    }

    /// Compiles `pattern` (case-insensitive) and charges its compiled size to `budget`:
    /// at most [`REGEX_SIZE_LIMIT`], and at most what is left of the budget.
    pub fn within(pattern: &str, budget: &mut RegexBudget) -> Result<Self, RegexError> {
        let left = budget.left();
        if left == 0 {
            return Err(RegexError::OverBudget {
                used: budget.used,
                limit: budget.limit,
            });
        }
        let limit = REGEX_SIZE_LIMIT.min(left);
        let regex = regex_automata::meta::Regex::builder()
            .syntax(regex_automata::util::syntax::Config::new().case_insensitive(true))
            .configure(
                regex_automata::meta::Config::new()
                    .nfa_size_limit(Some(limit))
                    .onepass_size_limit(Some(limit))
                    .dfa_size_limit(Some(limit))
                    .hybrid_cache_capacity(limit),
            )
            .build(pattern)
            .map_err(|e| match e.size_limit() {
                Some(_) if limit < REGEX_SIZE_LIMIT => RegexError::OverBudget {
                    used: budget.used,
                    limit: budget.limit,
                },
                Some(_) => RegexError::TooLarge {
                    limit: REGEX_SIZE_LIMIT,
                },
                None => RegexError::Invalid(e.to_string()),
            })?;
        let size = regex.memory_usage().saturating_add(pattern.len());
        if size > left {
            return Err(RegexError::OverBudget {
                used: budget.used,
                limit: budget.limit,
            });
        }
        budget.used = budget.used.saturating_add(size);
        Ok(Self {
            pattern: pattern.to_string(),
            regex,
        })
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether `text` matches somewhere. The search's scratch space is made for this call
    /// and dropped after it, so a file of many regexes holds none between searches.
    pub fn is_match(&self, text: &str) -> bool {
        let mut cache = self.regex.create_cache();
        let input = regex_automata::Input::new(text).earliest(true);
        self.regex.search_half_with(&mut cache, &input).is_some()
    }
}

impl PartialEq for AnswerRegex {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}
