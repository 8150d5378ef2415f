//! The node's memory budget for guests' linear memories. Every store's
//! limiter charges it: at instantiation (a memory's initial size) and at
//! each `memory.grow`; a store gives its charge back when it is dropped.
//! A tenant's guests hold at most its share (by weight, with room for a
//! tenant yet to come, `quota::memory_fits`); the node's at most the
//! budget. Past either (or past the guest's own limit), the grow fails:
//! `memory.grow` answers -1, and most guests' allocators abort. A grow within the tenant's share waits a moment while idle
//! actors of tenants over theirs hibernate, and a new instance waits for
//! room the same way (`MemoryBudget::room`), then is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use wasmkeep_core::quota;

use crate::share::GuestShare;

/// What all guests of a node may hold, and what each tenant's hold now.
pub struct MemoryBudget {
    budget: u64,
    held: Mutex<Held>,
    freed: tokio::sync::Notify,
    relief: OnceLock<Weak<dyn MemoryRelief>>,
}

/// How the budget makes room: the runtime's user knows which actors are
/// idle and how to hibernate one.
pub trait MemoryRelief: Send + Sync {
    /// Asks one idle actor of `tenant` (its longest idle) to hibernate now,
    /// giving its memory back; false when the tenant has none idle.
    fn hibernate_idle(&self, tenant: &str) -> bool;
}

/// How long a guest waits for one hibernating actor's memory before
/// another is asked to hibernate.
const HIBERNATION_WAIT: Duration = Duration::from_millis(100);

/// How long a guest's grow may wait for room the node's other tenants
/// give back (their idle actors hibernating); its wall still runs.
const GROW_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Held {
    node: u64,
    tenants: HashMap<Arc<str>, TenantHeld>,
}

struct TenantHeld {
    bytes: u64,
    weight: u32,
}

impl Held {
    /// The weights of the tenants holding memory, with `share`'s own.
    fn total_weight(&self, share: &GuestShare) -> u32 {
        let others = self.tenants.iter().filter(|(t, h)| **t != share.tenant && h.bytes > 0);
        others.fold(share.weight, |sum, (_, h)| sum.saturating_add(h.weight))
    }

    fn fits(&self, budget: u64, share: &GuestShare, bytes: u64) -> bool {
        if share.is_node() {
            return quota::memory_fits(budget, self.node, 0, 0, 0, bytes);
        }
        let tenant = self.tenants.get(&share.tenant).map_or(0, |h| h.bytes);
        quota::memory_fits(budget, self.node, tenant, share.weight.max(1), self.total_weight(share), bytes)
    }
}

impl MemoryBudget {
    pub fn new(budget: u64) -> Self {
        Self { budget, held: Mutex::default(), freed: tokio::sync::Notify::new(), relief: OnceLock::new() }
    }

    /// Who hibernates idle actors to make room (set once).
    pub fn set_relief(&self, relief: Weak<dyn MemoryRelief>) {
        let _ = self.relief.set(relief);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// What all guests hold now.
    pub fn held(&self) -> u64 {
        self.lock().node
    }

    /// What `tenant`'s guests hold now.
    pub fn held_by(&self, tenant: &str) -> u64 {
        self.lock().tenants.get(tenant).map_or(0, |h| h.bytes)
    }

    /// What each tenant's guests hold now, by tenant.
    pub fn held_by_tenants(&self) -> Vec<(Arc<str>, u64)> {
        let mut rows: Vec<_> = self.lock().tenants.iter().map(|(t, h)| (t.clone(), h.bytes)).collect();
        rows.sort();
        rows
    }

    /// Whether a guest of `share` may take `bytes` more now.
    pub fn fits(&self, share: &GuestShare, bytes: u64) -> bool {
        self.lock().fits(self.budget, share, bytes)
    }

    /// Whether a guest of `share` taking `bytes` more stays within its
    /// tenant's share (whatever the node holds).
    pub fn fits_share(&self, share: &GuestShare, bytes: u64) -> bool {
        if share.is_node() {
            return true;
        }
        let held = self.lock();
        let tenant = held.tenants.get(&share.tenant).map_or(0, |h| h.bytes);
        let most = quota::share_with_room(self.budget, share.weight.max(1), held.total_weight(share));
        tenant.saturating_add(bytes) <= most
    }

    /// The tenants holding more than their share now, furthest over first:
    /// whose idle actors hibernate to make room.
    pub fn over_share(&self) -> Vec<Arc<str>> {
        let held = self.lock();
        let total = held.tenants.values().filter(|h| h.bytes > 0).fold(0u32, |s, h| s.saturating_add(h.weight));
        let mut over: Vec<(u64, Arc<str>)> = held
            .tenants
            .iter()
            .filter_map(|(tenant, h)| {
                let share = quota::share_with_room(self.budget, h.weight.max(1), total);
                h.bytes.checked_sub(share).filter(|o| *o > 0).map(|o| (o, tenant.clone()))
            })
            .collect();
        over.sort_by_key(|o| std::cmp::Reverse(o.0));
        over.into_iter().map(|(_, t)| t).collect()
    }

    /// Waits until a new instance of `share` taking `bytes` fits, making
    /// room as it waits: within its share but not the node's budget, idle
    /// actors of the tenants furthest over their shares hibernate, oldest
    /// first, one at a time; at its own share, its own idle actors do.
    /// False when `until` passes first.
    pub async fn room(&self, share: &GuestShare, bytes: u64, until: Instant) -> bool {
        self.wait_for(share, bytes, until, true, |budget| budget.fits(share, bytes)).await
    }

    /// Takes `bytes` for a growing guest of `share`, waiting for others'
    /// idle actors to give memory back when only the node's budget stands
    /// in the way. False at once when the tenant is at its share.
    async fn take_waiting(&self, share: &GuestShare, bytes: u64, until: Instant) -> bool {
        self.wait_for(share, bytes, until, false, |budget| budget.take(share, bytes)).await
    }

    async fn wait_for(
        &self,
        share: &GuestShare,
        bytes: u64,
        until: Instant,
        own: bool,
        mut done: impl FnMut(&Self) -> bool,
    ) -> bool {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if done(self) {
                return true;
            }
            let asked = match self.relief.get().and_then(Weak::upgrade) {
                Some(relief) if self.fits_share(share, bytes) => {
                    self.over_share().iter().any(|tenant| relief.hibernate_idle(tenant))
                }
                Some(relief) if own && !share.is_node() => relief.hibernate_idle(&share.tenant),
                _ => return false,
            };
            let wait = if asked { until.min(Instant::now() + HIBERNATION_WAIT) } else { until };
            let timed_out = tokio::time::timeout_at(wait.into(), freed).await.is_err();
            if timed_out && Instant::now() >= until {
                return false;
            }
        }
    }

    fn take(&self, share: &GuestShare, bytes: u64) -> bool {
        let mut held = self.lock();
        if !held.fits(self.budget, share, bytes) {
            return false;
        }
        held.node += bytes;
        if !share.is_node() {
            let tenant = held.tenants.entry(share.tenant.clone()).or_insert(TenantHeld { bytes: 0, weight: 1 });
            tenant.bytes += bytes;
            tenant.weight = share.weight.max(1);
        }
        true
    }

    fn give_back(&self, tenant: &Arc<str>, bytes: u64) {
        if bytes == 0 {
            return;
        }
        {
            let mut held = self.lock();
            held.node = held.node.saturating_sub(bytes);
            if let Some(h) = held.tenants.get_mut(tenant) {
                h.bytes = h.bytes.saturating_sub(bytes);
                if h.bytes == 0 {
                    held.tenants.remove(tenant);
                }
            }
        }
        self.freed.notify_waiters();
    }
}

/// One store's limiter: its guest's own limit, and its charge against the
/// node's budget, given back when the store is dropped.
pub(crate) struct GuestMemory {
    budget: Arc<MemoryBudget>,
    share: GuestShare,
    limit: u64,
    held: u64,
    /// The last grow's charge, given back if the grow then fails.
    pending: u64,
    /// Whether the budget (not the guest's own limit) refused a grow.
    pub(crate) refused_by_node: bool,
    /// Whether a grow past the guest's own limit was refused.
    pub(crate) refused_at_limit: bool,
}

impl GuestMemory {
    pub(crate) fn new(budget: Arc<MemoryBudget>, share: GuestShare, node_limit: u64) -> Self {
        let limit = share.memory_bytes.map_or(node_limit, |plan| plan.min(node_limit));
        Self { budget, share, limit, held: 0, pending: 0, refused_by_node: false, refused_at_limit: false }
    }

    /// The guest's own memory limit, in bytes.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

#[async_trait::async_trait]
impl wasmtime::ResourceLimiterAsync for GuestMemory {
    async fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.pending = 0;
        // Past its own limit the grow fails, as past the budget: a guest
        // that can do without the memory goes on.
        if desired as u64 > self.limit || maximum.is_some_and(|max| desired > max) {
            self.refused_at_limit = true;
            return Ok(false);
        }
        let bytes = desired.saturating_sub(current) as u64;
        if !self.budget.take_waiting(&self.share, bytes, Instant::now() + GROW_WAIT).await {
            // The grow fails (`memory.grow` answers -1): a guest that can do
            // without the memory goes on; most allocators then abort.
            self.refused_by_node = true;
            return Ok(false);
        }
        self.held += bytes;
        self.pending = bytes;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        let pending = std::mem::take(&mut self.pending);
        self.held -= pending;
        self.budget.give_back(&self.share.tenant, pending);
        Err(error.context("growing the guest's memory failed"))
    }

    async fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(maximum.is_none_or(|max| desired <= max))
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        self.budget.give_back(&self.share.tenant, self.held);
    }
}

/// What an instance of `component` takes from the budget as it starts:
/// each memory's initial size (the largest one's, for each). One 64 KiB
/// page when the component does not say.
pub(crate) fn initial_memory(component: &wasmtime::component::Component) -> u64 {
    const PAGE: u64 = 64 * 1024;
    component
        .resources_required()
        .map(|r| u64::from(r.num_memories) * r.max_initial_memory_size.unwrap_or(1) * PAGE)
        .unwrap_or(PAGE)
        .max(PAGE)
}

/// The memory of the machine the node runs on: its physical memory, or
/// its cgroup's limit when lower (a container's). `None` when neither can
/// be read.
pub fn machine_memory() -> Option<u64> {
    let physical = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    let cgroup = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse::<u64>().ok());
    match (physical, cgroup) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiterAsync;

    const MIB: u64 = 1 << 20;

    fn share(tenant: &str, weight: u32) -> GuestShare {
        GuestShare { tenant: tenant.into(), weight, memory_bytes: None }
    }

    #[tokio::test]
    async fn a_store_charges_its_grows_and_gives_them_back_when_dropped() {
        let budget = Arc::new(MemoryBudget::new(300 * MIB));
        let mut a = GuestMemory::new(budget.clone(), share("a", 1), 512 * MIB);
        assert!(a.memory_growing(0, MIB as usize, None).await.unwrap());
        assert!(a.memory_growing(MIB as usize, 120 * MIB as usize, None).await.unwrap());
        assert_eq!((budget.held(), budget.held_by("a")), (120 * MIB, 120 * MIB));
        // Alone, a tenant holds at most half: room for a tenant yet to come.
        assert!(!a.memory_growing(120 * MIB as usize, 151 * MIB as usize, None).await.unwrap(), "the grow fails");
        assert!(a.refused_by_node);
        assert_eq!(budget.over_share(), Vec::<Arc<str>>::new());
        // A grow the engine then fails is given back.
        assert!(a.memory_growing(120 * MIB as usize, 130 * MIB as usize, None).await.unwrap());
        assert!(a.memory_grow_failed(wasmtime::format_err!("mmap")).is_err());
        assert_eq!(budget.held(), 120 * MIB);
        // Beside a second tenant, the first is over its third.
        let mut b = GuestMemory::new(budget.clone(), share("b", 1), 128 * MIB);
        assert!(b.memory_growing(0, 50 * MIB as usize, None).await.unwrap());
        assert_eq!(budget.over_share(), vec![Arc::<str>::from("a")]);
        drop(a);
        assert_eq!((budget.held(), budget.held_by("a")), (50 * MIB, 0));
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_guest_meets_its_plans_limit_before_the_nodes() {
        let budget = Arc::new(MemoryBudget::new(1024 * MIB));
        let plan = GuestShare { memory_bytes: Some(64 * MIB), ..share("a", 1) };
        let mut a = GuestMemory::new(budget.clone(), plan, 128 * MIB);
        assert!(a.memory_growing(0, 64 * MIB as usize, None).await.unwrap());
        assert!(!a.memory_growing(64 * MIB as usize, 65 * MIB as usize, None).await.unwrap());
        assert!(!a.refused_by_node, "its own limit, not the node's");
        assert_eq!(budget.held(), 64 * MIB);
    }

    #[tokio::test]
    async fn the_nodes_own_guests_meet_the_budget_alone() {
        let budget = Arc::new(MemoryBudget::new(100 * MIB));
        let mut own = GuestMemory::new(budget.clone(), GuestShare::default(), 128 * MIB);
        assert!(own.memory_growing(0, 100 * MIB as usize, None).await.unwrap());
        assert!(!own.memory_growing(100 * MIB as usize, 101 * MIB as usize, None).await.unwrap());
        assert!(budget.over_share().is_empty());
    }

    #[test]
    fn the_machine_has_memory() {
        assert!(machine_memory().is_some_and(|m| m > 64 * MIB));
    }
}
