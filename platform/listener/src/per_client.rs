//! Counting what each client address holds (connections, front slots): a
//! client cannot take more than its share, whatever it sends, so the rest
//! stays for the others.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

type Counts = Arc<Mutex<HashMap<IpAddr, u32>>>;

/// What each client holds of one kind of thing, up to `limit` each.
pub struct PerClient {
    counts: Counts,
    limit: u32,
}

/// One thing a client holds; given back on drop.
pub struct Place {
    client: IpAddr,
    counts: Counts,
}

impl Place {
    pub fn client(&self) -> IpAddr {
        self.client
    }
}

impl PerClient {
    pub fn new(limit: u32) -> Self {
        Self { counts: Counts::default(), limit }
    }

    /// A place for `client`, or `None` when it holds its share already.
    pub fn take(&self, client: IpAddr) -> Option<Place> {
        let client = wasmkeep_core::connection::client_key(client);
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(client).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(Place { client, counts: self.counts.clone() })
    }

    #[cfg(test)]
    fn clients(&self) -> usize {
        self.counts.lock().unwrap().len()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_its_share() {
        let per = PerClient::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = per.take(a).unwrap();
        let _a2 = per.take(a).unwrap();
        assert!(per.take(a).is_none());
        let b1 = per.take(b).expect("another client is not held back");
        drop(a1);
        assert!(per.take(a).is_some(), "a place given back is free again");
        drop(b1);
        assert_eq!(per.clients(), 1, "no entry is kept for a client holding nothing");
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let per = PerClient::new(1);
        let _a = per.take("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(per.take("2001:db8:1:2:ffff::9".parse().unwrap()).is_none(), "the same /64");
        assert!(per.take("2001:db8:1:3::1".parse().unwrap()).is_some(), "another /64");
        let _v4 = per.take("192.0.2.7".parse().unwrap()).unwrap();
        assert!(per.take("::ffff:192.0.2.7".parse().unwrap()).is_none(), "a mapped IPv4 is that address");
    }
}
