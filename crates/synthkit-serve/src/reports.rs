//! Reports kept for `GET /v1/report/{id}`: a synthesis asked with `"report": true` leaves
//! its HTML page here and answers with its address.
//!
//! Bounds: a report is served for [`REPORT_TTL`] after it was made, at most
//! [`MAX_REPORTS`] are kept and together at most [`MAX_REPORT_BYTES`]; past either cap the
//! oldest go first. Ids are 128 random bits (hex), so a report cannot be guessed from
//! another; the route sits behind the same API keys as the synthesis, and a report
//! belongs to the key that made it: it remembers the key's digest ([`KeyId`], never the
//! key) and any other key is told there is no such report, as for an unknown id. Without
//! keys every report is anyone's who has its id.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::auth::KeyId;

/// How long a report is served.
pub const REPORT_TTL: Duration = Duration::from_secs(15 * 60);
/// The most reports kept at once.
pub const MAX_REPORTS: usize = 100;
/// The most bytes of reports kept at once (256 MiB).
pub const MAX_REPORT_BYTES: usize = 256 * 1024 * 1024;
/// The path prefix of a report.
pub const REPORT_PATH_PREFIX: &str = "/v1/report/";

struct Entry {
    id: String,
    made: Instant,
    page: Arc<str>,
    /// The key that made it (`None`: the service has no keys).
    owner: Option<KeyId>,
}

impl Entry {
    /// Whether `asker` may read it: the key that made it, or anyone without keys.
    fn readable_by(&self, asker: Option<&KeyId>) -> bool {
        match (&self.owner, asker) {
            (None, _) => true,
            (Some(owner), Some(asker)) => owner.same(asker),
            (Some(_), None) => false,
        }
    }
}

/// The reports kept, oldest first.
#[derive(Default)]
pub(crate) struct ReportStore {
    entries: Mutex<VecDeque<Entry>>,
}

impl ReportStore {
    /// Keeps `page`, made with the key `owner`, and returns its id, or `None` when no
    /// random id could be drawn or the page alone is over [`MAX_REPORT_BYTES`].
    pub(crate) fn insert(&self, page: String, owner: Option<KeyId>) -> Option<String> {
        if page.len() > MAX_REPORT_BYTES {
            return None;
        }
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).ok()?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        expire(&mut entries, now);
        let mut total: usize = entries.iter().map(|e| e.page.len()).sum::<usize>() + page.len();
        while entries.len() >= MAX_REPORTS || total > MAX_REPORT_BYTES {
            let Some(old) = entries.pop_front() else {
                break;
            };
            total -= old.page.len();
        }
        entries.push_back(Entry {
            id: id.clone(),
            made: now,
            page: Arc::from(page),
            owner,
        });
        Some(id)
    }

    /// The page of report `id`, while it is kept, when `asker` may read it (the key that
    /// made it; any one without keys).
    pub(crate) fn get(&self, id: &str, asker: Option<&KeyId>) -> Option<Arc<str>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        expire(&mut entries, Instant::now());
        entries
            .iter()
            .find(|e| e.id == id && e.readable_by(asker))
            .map(|e| Arc::clone(&e.page))
    }
}

/// Drops the reports older than [`REPORT_TTL`].
fn expire(entries: &mut VecDeque<Entry>, now: Instant) {
    while entries
        .front()
        .is_some_and(|e| now.duration_since(e.made) >= REPORT_TTL)
    {
        entries.pop_front();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reports_expire_and_are_capped() {
        let store = ReportStore::default();
        let first = store.insert("one".into(), None).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(store.get(&first, None).as_deref(), Some("one"));
        tokio::time::advance(REPORT_TTL).await;
        assert!(store.get(&first, None).is_none());
        let ids: Vec<String> = (0..MAX_REPORTS + 1)
            .map(|i| store.insert(i.to_string(), None).unwrap())
            .collect();
        assert!(store.get(&ids[0], None).is_none(), "the oldest went first");
        assert_eq!(store.get(&ids[MAX_REPORTS], None).as_deref(), Some("100"));
        assert!(store.get("not-an-id", None).is_none());
    }
}
