//! A tenant's rate quotas as buckets: its requests, its actors' creations,
//! and each of its actors' events. Each tenant has buckets of its own
//! size (its plan's), so one tenant's traffic never drains another's.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The rates a tenant's plan grants, per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    pub requests: u32,
    pub request_burst: u32,
    pub events_per_actor: u32,
    pub creations: u32,
    pub egress: u32,
}

/// One tenant's buckets; `K` names an actor.
pub struct TenantRates<K: Hash + Eq + Clone> {
    requests: DefaultDirectRateLimiter,
    creations: DefaultDirectRateLimiter,
    egress: DefaultDirectRateLimiter,
    events: DefaultKeyedRateLimiter<K>,
}

fn per_second(rate: u32, burst: u32) -> Quota {
    let at_least_one = |n: u32| NonZeroU32::new(n.max(1)).expect("at least one");
    Quota::per_second(at_least_one(rate)).allow_burst(at_least_one(burst))
}

/// How long until the bucket would let one through, read on `clock`: the
/// bucket's own. A new clock per refusal would cost a calibration (CPUID,
/// a VM exit on most hosts) on the very path a flood takes.
fn wait(clock: &DefaultClock) -> impl Fn(governor::NotUntil<governor::clock::QuantaInstant>) -> Duration + '_ {
    move |not_until| not_until.wait_time_from(clock.now())
}

impl<K: Hash + Eq + Clone> TenantRates<K> {
    pub fn new(rates: Rates) -> Self {
        Self {
            requests: RateLimiter::direct(per_second(rates.requests, rates.request_burst.max(rates.requests))),
            // A second's worth at once: a page that creates a few actors
            // is not refused for arriving together.
            creations: RateLimiter::direct(per_second(rates.creations, rates.creations)),
            egress: RateLimiter::direct(per_second(rates.egress, rates.egress)),
            events: RateLimiter::keyed(per_second(rates.events_per_actor, rates.events_per_actor)),
        }
    }

    /// Takes one outbound request of the tenant's guests.
    pub fn egress(&self) -> Result<(), Duration> {
        self.egress.check().map_err(wait(self.egress.clock()))
    }

    /// Takes one request, or says how long until one would pass.
    pub fn request(&self) -> Result<(), Duration> {
        self.requests.check().map_err(wait(self.requests.clock()))
    }

    /// Takes one creation of an actor.
    pub fn creation(&self) -> Result<(), Duration> {
        self.creations.check().map_err(wait(self.creations.clock()))
    }

    /// Takes one event of actor `key`.
    pub fn event(&self, key: &K) -> Result<(), Duration> {
        self.events.check_key(key).map_err(wait(self.events.clock()))
    }

    /// Forgets actors whose buckets are full again, so the map holds only
    /// recently busy actors.
    pub fn forget_idle(&self) {
        self.events.retain_recent();
        self.events.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates() -> Rates {
        Rates { requests: 2, request_burst: 3, events_per_actor: 1, creations: 2, egress: 1 }
    }

    #[test]
    fn a_bucket_passes_its_burst_then_says_how_long() {
        let r = TenantRates::<u32>::new(rates());
        for _ in 0..3 {
            r.request().unwrap();
        }
        let wait = r.request().unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(500), "{wait:?}");
    }

    #[test]
    fn each_actor_has_its_own_bucket_and_tenants_share_none() {
        let a = TenantRates::<u32>::new(rates());
        let b = TenantRates::<u32>::new(rates());
        a.event(&1).unwrap();
        assert!(a.event(&1).is_err());
        a.event(&2).unwrap();
        b.event(&1).unwrap();
        a.creation().unwrap();
        a.creation().unwrap();
        assert!(a.creation().is_err());
        b.creation().unwrap();
        a.forget_idle();
    }
}
