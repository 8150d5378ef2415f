//! Per client address bounds on what an unauthenticated client can make
//! the API do: sign-ups, and failed authentications (guessing tokens,
//! sign-up keys). A client is its IPv4 address or IPv6 /64.

use std::net::IpAddr;
use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use wasmkeep_core::connection::client_key;

use super::ApiError;

/// The API's rates, per client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RateSettings {
    /// Sign-ups per hour.
    pub signups_per_hour: u32,
    /// Failed authentications per minute, then `429`.
    pub auth_failures_per_minute: u32,
}

impl Default for RateSettings {
    fn default() -> Self {
        Self { signups_per_hour: 10, auth_failures_per_minute: 20 }
    }
}

pub struct RateLimits {
    signups: DefaultKeyedRateLimiter<IpAddr>,
    failures: DefaultKeyedRateLimiter<IpAddr>,
}

impl RateLimits {
    pub fn new(settings: RateSettings) -> Self {
        let at_least_one = |n: u32| NonZeroU32::new(n.max(1)).expect("at least one");
        Self {
            signups: RateLimiter::keyed(Quota::per_hour(at_least_one(settings.signups_per_hour))),
            failures: RateLimiter::keyed(Quota::per_minute(at_least_one(settings.auth_failures_per_minute))),
        }
    }

    /// Takes one sign-up of `client`'s, or says when it may try again.
    pub fn signup(&self, client: IpAddr) -> Result<(), ApiError> {
        Self::take(&self.signups, client, "too many sign-ups from this address")
    }

    /// Counts a failed authentication of `client`'s: past the rate, the
    /// answer is `429` instead of `401`.
    pub fn failure(&self, client: IpAddr, error: ApiError) -> ApiError {
        Self::take(&self.failures, client, "too many failed authentications from this address").err().unwrap_or(error)
    }

    fn take(limiter: &DefaultKeyedRateLimiter<IpAddr>, client: IpAddr, what: &str) -> Result<(), ApiError> {
        limiter.check_key(&client_key(client)).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            ApiError::too_many(format!("{what}; retry in {secs} s"), secs)
        })
    }

    /// Forgets clients whose buckets are full again (called now and then,
    /// so the maps stay as small as the set of recent clients).
    pub fn forget_idle(&self) {
        self.signups.retain_recent();
        self.failures.retain_recent();
        self.signups.shrink_to_fit();
        self.failures.shrink_to_fit();
    }
}
