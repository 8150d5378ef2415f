//! `storage.list` over an event's pending writes (docs/spec/wit.md §4): the
//! event's own writes and deletes are merged into what the store holds, so
//! a listing sees what a `get` would. Pure: the store's rows come in.

use std::collections::BTreeMap;
use std::ops::Bound;

/// Most entries one `list` answers.
pub const LIST_LIMIT_MAX: u32 = 1000;

/// A pending write: the new value, or `None` for a delete.
pub type Pending = Option<Vec<u8>>;

/// One `list` call.
#[derive(Debug, Clone, Copy)]
pub struct Listing<'a> {
    pub prefix: &'a str,
    /// The last key of the previous page.
    pub after: Option<&'a str>,
    /// How many entries a page holds (the guest's `0` is the most).
    pub limit: usize,
}

impl<'a> Listing<'a> {
    pub fn new(prefix: &'a str, after: Option<&'a str>, limit: u32) -> Self {
        let limit = if limit == 0 { LIST_LIMIT_MAX } else { limit.min(LIST_LIMIT_MAX) } as usize;
        Self { prefix, after, limit }
    }

    fn in_range(&self, k: &str) -> bool {
        k.starts_with(self.prefix) && self.after.is_none_or(|c| k > c)
    }

    /// The pending writes within the listing's range, in key order; each
    /// can hide one stored entry, so the store is asked for that many more.
    pub fn pending<'w>(&self, writes: &'w BTreeMap<String, Pending>) -> Vec<(&'w String, &'w Pending)> {
        let lower = match self.after {
            Some(c) if c >= self.prefix => Bound::Excluded(c.to_owned()),
            _ => Bound::Included(self.prefix.to_owned()),
        };
        writes
            .range((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(self.prefix))
            .filter(|(k, _)| self.in_range(k))
            .collect()
    }

    /// How many rows to ask the store for: a page, one per pending write,
    /// and one more to learn whether there is more.
    pub fn rows_wanted(&self, pending: usize) -> usize {
        self.limit + pending + 1
    }

    /// The page: the store's `rows` (as asked) with the pending writes
    /// merged, and the cursor of the next page if there is more.
    pub fn merge(
        &self,
        rows: Vec<(String, Vec<u8>)>,
        pending: &[(&String, &Pending)],
    ) -> (Vec<(String, Vec<u8>)>, Option<String>) {
        let want = self.rows_wanted(pending.len()) - 1;
        let complete = rows.len() <= want;
        let stored: Vec<_> = rows.into_iter().take(want).collect();
        // When the store had more, the merged view is exact only up to the
        // last stored key fetched.
        let horizon = if complete { None } else { stored.last().map(|(k, _)| k.clone()) };
        let mut merged: BTreeMap<String, Vec<u8>> = stored.into_iter().collect();
        for (k, v) in pending {
            match v {
                Some(v) => merged.insert((*k).clone(), v.clone()),
                None => merged.remove(*k),
            };
        }
        let mut visible = merged.into_iter().filter(|(k, _)| horizon.as_ref().is_none_or(|h| k <= h));
        let entries: Vec<(String, Vec<u8>)> = visible.by_ref().take(self.limit).collect();
        let more = visible.next().is_some() || horizon.is_some();
        let cursor = if more { entries.last().map(|(k, _)| k.clone()) } else { None };
        (entries, cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store holding `stored`, listed page by page through `writes`.
    fn pages(stored: &[&str], writes: &[(&str, bool)], prefix: &str, limit: u32) -> Vec<Vec<String>> {
        let stored: BTreeMap<String, Vec<u8>> = stored.iter().map(|k| (k.to_string(), k.as_bytes().to_vec())).collect();
        let writes: BTreeMap<String, Pending> =
            writes.iter().map(|(k, set)| (k.to_string(), set.then(|| b"x".to_vec()))).collect();
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let listing = Listing::new(prefix, cursor.as_deref(), limit);
            let pending = listing.pending(&writes);
            let rows: Vec<_> = stored
                .iter()
                .filter(|(k, _)| k.starts_with(prefix) && cursor.as_deref().is_none_or(|c| k.as_str() > c))
                .take(listing.rows_wanted(pending.len()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let (entries, next) = listing.merge(rows, &pending);
            out.push(entries.into_iter().map(|(k, _)| k).collect());
            match next {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
        panic!("listing did not end")
    }

    #[test]
    fn pending_writes_merge_page_by_page() {
        let stored = ["a/1", "a/2", "a/3", "a/4", "a/5", "b/1"];
        let writes = [("a/3", true), ("a/6", true), ("a/0", true), ("a/2", false), ("a/4", false)];
        assert_eq!(pages(&stored, &writes, "a/", 2), [vec!["a/0", "a/1"], vec!["a/3", "a/5"], vec!["a/6"]]);
        assert_eq!(pages(&stored, &writes, "a/", 0), [vec!["a/0", "a/1", "a/3", "a/5", "a/6"]]);
        assert_eq!(pages(&stored, &writes, "b/", 1), [vec!["b/1"]]);
    }

    #[test]
    fn deletes_that_hide_a_full_page_leave_the_rest_reachable() {
        let stored = ["a/0", "a/1", "a/3", "a/5", "a/6"];
        let writes = [("a/0", false), ("a/1", false), ("a/3", false), ("a/5", false)];
        let all: Vec<String> = pages(&stored, &writes, "a/", 1).into_iter().flatten().collect();
        assert_eq!(all, ["a/6"]);
    }

    #[test]
    fn a_cursor_below_the_prefix_starts_at_the_prefix() {
        let writes: BTreeMap<String, Pending> =
            [("a".to_string(), Some(vec![])), ("b/1".to_string(), Some(vec![]))].into();
        let listing = Listing::new("b/", Some("a"), 10);
        assert_eq!(listing.pending(&writes).len(), 1);
    }

    #[test]
    fn a_page_holds_at_most_the_limit() {
        assert_eq!(Listing::new("", None, 0).limit, 1000);
        assert_eq!(Listing::new("", None, 5000).limit, 1000);
        assert_eq!(Listing::new("", None, 7).limit, 7);
        let keys: Vec<String> = (0..1005).map(|i| format!("k{i:05}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let got = pages(&refs, &[], "", 5000);
        assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), [1000, 5]);
        assert_eq!(got[0].last().map(String::as_str), Some("k00999"));
    }
}
