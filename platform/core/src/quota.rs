//! A tenant's quotas: their names (as refusals and metrics carry them) and
//! the arithmetic of their answers. The buckets themselves are the
//! scheduler's; what a plan grants is `plan`'s.

use std::time::{Duration, Instant};

/// One quota of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quota {
    /// Requests per second to all of the tenant's apps.
    Requests,
    /// Events per second to one actor.
    ActorEvents,
    /// Actors created per second.
    Creations,
    /// Actors of the tenant resident on the node at once.
    ResidentActors,
    /// Open sockets of the tenant on the node.
    Sockets,
    /// Outbound requests per second of the tenant's guests.
    Egress,
    /// Stored bytes of one actor.
    ActorStorage,
    /// Stored bytes of all of the tenant's actors.
    TenantStorage,
    /// Actors the tenant keeps (created and not deleted), across its apps.
    Actors,
}

impl Quota {
    pub const ALL: [Quota; 9] = [
        Quota::Requests,
        Quota::ActorEvents,
        Quota::Creations,
        Quota::ResidentActors,
        Quota::Sockets,
        Quota::Egress,
        Quota::ActorStorage,
        Quota::TenantStorage,
        Quota::Actors,
    ];

    /// Its name in `wasmkeep_quota_refusals_total{quota}` and in answers.
    pub fn label(self) -> &'static str {
        match self {
            Self::Requests => "requests_per_second",
            Self::ActorEvents => "events_per_second_per_actor",
            Self::Creations => "actor_creations_per_second",
            Self::ResidentActors => "resident_actors",
            Self::Sockets => "sockets",
            Self::Egress => "egress_requests_per_second",
            Self::ActorStorage => "storage_bytes_per_actor",
            Self::TenantStorage => "storage_bytes",
            Self::Actors => "actors",
        }
    }

    /// The status of its refusal: a rate is `429` (slow down), a bound on
    /// what is held is `503` (come back when some is let go), what is
    /// stored is `507` (waiting frees none: something stored must go).
    /// Stored actors are of the last kind, not of the rates' `429`: no
    /// actor is ever deleted by time passing, so a client told to retry
    /// later would be refused for ever.
    pub fn status(self) -> u16 {
        match self {
            Self::Requests | Self::ActorEvents | Self::Creations | Self::Egress => 429,
            Self::ResidentActors | Self::Sockets => 503,
            Self::ActorStorage | Self::TenantStorage | Self::Actors => 507,
        }
    }

    /// Whether waiting ends the refusal, so that it carries `Retry-After`.
    pub fn passes(self) -> bool {
        self.status() != 507
    }
}

/// A tenant's share of `pool` instances against the weights of the
/// tenants using the node now (its own included): at least one.
pub fn fair_share(pool: u32, weight: u32, total_weight: u32) -> u32 {
    if total_weight == 0 {
        return pool.max(1);
    }
    let share = u64::from(pool) * u64::from(weight) / u64::from(total_weight);
    u32::try_from(share).unwrap_or(u32::MAX).max(1)
}

/// A tenant's share of a node-wide bound of `size` (the port's requests in
/// flight, its buffered body bytes) against the weights of the tenants
/// holding some of it now (its own included), keeping one weight unit's
/// worth for a tenant yet to come: however alone, no tenant holds all of
/// what another tenant's first request needs. At least one.
pub fn share_with_room(size: u64, weight: u32, total_weight: u32) -> u64 {
    let share = u128::from(size) * u128::from(weight) / (u128::from(total_weight) + 1);
    u64::try_from(share).unwrap_or(u64::MAX).max(1)
}

/// Whether a guest may take `bytes` more of the node's guest memory: the
/// node, holding `node` of its `budget`, stays within it, and a tenant's
/// guest (holding `tenant` together, at `weight` against the weights of
/// the tenants holding some, `total_weight`, its own included) within its
/// share with room for a tenant yet to come. The node's own guests (no
/// tenant, `weight` 0) meet the budget alone.
pub fn memory_fits(budget: u64, node: u64, tenant: u64, weight: u32, total_weight: u32, bytes: u64) -> bool {
    let within_node = node.checked_add(bytes).is_some_and(|n| n <= budget);
    let within_share =
        weight == 0 || tenant.checked_add(bytes).is_some_and(|t| t <= share_with_room(budget, weight, total_weight));
    within_node && within_share
}

/// The whole seconds to tell a client to wait (`Retry-After`): `wait`
/// rounded up, at least one.
pub fn retry_after_secs(wait: Duration) -> u32 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    u32::try_from(secs).unwrap_or(u32::MAX).max(1)
}

/// How often an app's tail is told of refusals: a client flooding past
/// its tenant's quota fills neither the tail nor the app's share of it.
pub const REFUSALS_TOLD_EVERY: Duration = Duration::from_secs(1);

/// The refusals of one app its tail is told of: at most one a
/// [`REFUSALS_TOLD_EVERY`]; the others are counted into the next.
#[derive(Debug, Default)]
pub struct RefusalsTold {
    last: Option<Instant>,
    untold: u64,
}

impl RefusalsTold {
    /// Whether a refusal at `now` is told: `Some(refusals untold since
    /// the last told)`, or `None` (counted).
    pub fn tell(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < REFUSALS_TOLD_EVERY) {
            self.untold += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.untold))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_fits_the_node_and_the_tenants_share() {
        let mib = 1 << 20;
        let budget = 900 * mib;
        // Alone, a tenant of weight 1 keeps half for a tenant yet to come.
        assert!(memory_fits(budget, 0, 0, 1, 1, 450 * mib));
        assert!(!memory_fits(budget, 0, 0, 1, 1, 451 * mib));
        // Beside another of weight 1: a third each, a third for a newcomer.
        assert!(memory_fits(budget, 450 * mib, 0, 1, 2, 300 * mib));
        assert!(!memory_fits(budget, 450 * mib, 450 * mib, 1, 2, mib), "over its share, it grows no more");
        // Within its share but not the node's budget.
        assert!(!memory_fits(budget, 899 * mib, 0, 10, 11, 2 * mib));
        // The node's own guests meet the budget alone.
        assert!(memory_fits(budget, 0, 0, 0, 0, budget));
        assert!(!memory_fits(budget, 1, 0, 0, 0, budget));
        assert!(!memory_fits(budget, u64::MAX, 0, 0, 0, 1), "no overflow");
    }

    #[test]
    fn retry_after_rounds_up_and_is_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(u64::MAX)), u32::MAX);
    }

    #[test]
    fn shares_follow_weights_and_are_never_zero() {
        assert_eq!(fair_share(100, 1, 11), 9);
        assert_eq!(fair_share(100, 10, 11), 90);
        assert_eq!(fair_share(100, 1, 1), 100);
        assert_eq!(fair_share(3, 1, 1000), 1);
        assert_eq!(fair_share(100, 5, 0), 100);
        assert_eq!(fair_share(u32::MAX, u32::MAX, 1), u32::MAX);
    }

    #[test]
    fn a_share_with_room_leaves_a_newcomer_some() {
        // Alone on the free plan's weight: half; on the pro plan's: 10/11.
        assert_eq!(share_with_room(1000, 1, 1), 500);
        assert_eq!(share_with_room(1100, 10, 10), 1000);
        // Beside another holder of weight 1.
        assert_eq!(share_with_room(1000, 1, 2), 333);
        assert_eq!(share_with_room(3, 1, 1000), 1);
        // No overflow at the extremes.
        assert!(share_with_room(u64::MAX, u32::MAX, u32::MAX) > u64::MAX / 2);
    }

    #[test]
    fn labels_are_distinct_and_rates_are_429() {
        let labels: std::collections::HashSet<_> = Quota::ALL.iter().map(|q| q.label()).collect();
        assert_eq!(labels.len(), Quota::ALL.len());
        assert_eq!(Quota::Requests.status(), 429);
        assert_eq!(Quota::ResidentActors.status(), 503);
        assert_eq!(Quota::ActorStorage.status(), 507);
        assert!(Quota::Sockets.passes() && !Quota::TenantStorage.passes());
        assert_eq!((Quota::Actors.label(), Quota::Actors.status(), Quota::Actors.passes()), ("actors", 507, false));
    }

    #[test]
    fn refusals_are_told_once_a_second_with_those_untold_between() {
        let (mut told, t0) = (RefusalsTold::default(), Instant::now());
        assert_eq!(told.tell(t0), Some(0));
        for ms in [1, 500, 999] {
            assert_eq!(told.tell(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(told.tell(t0 + Duration::from_millis(1000)), Some(3));
        assert_eq!(told.tell(t0 + Duration::from_millis(1500)), None);
        assert_eq!(told.tell(t0 + Duration::from_secs(60)), Some(1));
        // A clock read out of order is never a reason to tell twice.
        assert_eq!(told.tell(t0), None);
    }
}
