//! A tail across the cluster: the hop by which the node a tenant's tail
//! reached asks another node for the app's guests' records (ADR 0021).
//!
//! `GET /_tail?tenant=…&app=…[&class=…&name=…][&follow=1]` with the mark
//! `x-wasmkeep-tail: 1`, signed over the empty body with the mark among
//! the signed names: the filter is in the path, so the signature covers
//! it. The answer streams the records as NDJSON (`logs::TailItem`).

use wasmkeep_core::names::{decode, encode};
use wasmkeep_telemetry::logs::LogFilter;

/// The path every tail hop asks for.
pub const PATH: &str = "/_tail";
/// The mark's one value.
pub const MARK: &str = "1";
/// The longest line a tail hop's answer may send (a record's line is at
/// most 16 KiB, which JSON's escapes may make six times as long).
pub const LINE_BYTES_MAX: usize = 128 * 1024;

/// A tail hop's request: what it wants, and whether it follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailHop {
    pub filter: LogFilter,
    pub follow: bool,
}

impl TailHop {
    /// The hop's path and query.
    pub fn path(&self) -> String {
        let f = &self.filter;
        let mut path = format!("{PATH}?tenant={}&app={}", encode(&f.tenant), encode(&f.app));
        if let Some(class) = &f.class {
            path += &format!("&class={}", encode(class));
        }
        if let Some(name) = &f.name {
            path += &format!("&name={}", encode(name));
        }
        if self.follow {
            path += "&follow=1";
        }
        path
    }

    /// Reads a tail hop's path and query; the reason, when it is not one.
    pub fn parse(path: &str, query: Option<&str>) -> Result<Self, &'static str> {
        if path != PATH {
            return Err("not a tail's path");
        }
        let mut hop = TailHop { filter: LogFilter::default(), follow: false };
        let (mut tenant, mut app) = (None, None);
        for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or("a pair without a value")?;
            let value = String::from_utf8(decode(value).map_err(|_| "a value badly encoded")?)
                .map_err(|_| "a value that is not UTF-8")?;
            let slot = match key {
                "tenant" => &mut tenant,
                "app" => &mut app,
                "class" => &mut hop.filter.class,
                "name" => &mut hop.filter.name,
                "follow" if value == "1" => {
                    hop.follow = true;
                    continue;
                }
                _ => return Err("an unknown key"),
            };
            if slot.replace(value).is_some() {
                return Err("a key given twice");
            }
        }
        hop.filter.tenant = tenant.filter(|t| !t.is_empty()).ok_or("no tenant")?;
        hop.filter.app = app.filter(|a| !a.is_empty()).ok_or("no app")?;
        if hop.filter.name.is_some() && hop.filter.class.is_none() {
            return Err("a name without its class");
        }
        Ok(hop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(class: Option<&str>, name: Option<&str>, follow: bool) -> TailHop {
        TailHop {
            filter: LogFilter {
                tenant: "alpha".into(),
                app: "shop".into(),
                class: class.map(str::to_owned),
                name: name.map(str::to_owned),
            },
            follow,
        }
    }

    #[test]
    fn a_tail_hop_reads_back_as_it_was_written() {
        for h in [hop(None, None, false), hop(Some("cart"), None, true), hop(Some("cart"), Some("a b/é&x=1"), true)] {
            let path = h.path();
            let (p, q) = path.split_once('?').unwrap();
            assert_eq!(TailHop::parse(p, Some(q)), Ok(h), "{path}");
        }
        assert_eq!(
            hop(Some("cart"), Some("a b/é&x=1"), false).path(),
            "/_tail?tenant=alpha&app=shop&class=cart&name=a%20b%2F%C3%A9%26x%3D1"
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for (path, query, why) in [
            ("/actor/x", Some("tenant=a&app=b"), "path"),
            (PATH, Some("app=b"), "tenant"),
            (PATH, Some("tenant=a"), "app"),
            (PATH, Some("tenant=a&tenant=b&app=c"), "twice"),
            (PATH, Some("tenant=a&app=b&name=n"), "class"),
            (PATH, Some("tenant=a&app=b&who=me"), "unknown"),
            (PATH, Some("tenant=a&app=b&follow=yes"), "unknown"),
            (PATH, Some("tenant=%zz&app=b"), "encoded"),
            (PATH, Some("tenant=%ff&app=b"), "UTF-8"),
            (PATH, Some("tenant"), "without"),
        ] {
            let e = TailHop::parse(path, query).unwrap_err();
            assert!(e.contains(why), "{query:?}: {e}");
        }
    }
}
