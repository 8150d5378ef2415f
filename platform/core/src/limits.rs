//! The node's limits (docs/spec/tenancy.md §8), loaded from
//! `policies/limits.toml`.
//!
//! Durations are seconds as decimals, so a test can set `idle_secs = 0.2`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Request or response body of an HTTP event or a call.
    pub body_bytes: u64,
    /// A guest's linear memory.
    pub memory_bytes: u64,
    /// Linear memory all guests of the node may hold together, charged at
    /// instantiation and at each `memory.grow`; 0 for the machine's memory
    /// (or its cgroup's limit, if lower) less a quarter, at least 1 GiB of
    /// it, kept for the node itself. Tenants share it by weight.
    pub guest_memory_bytes: u64,
    /// The wall of one actor event.
    pub wall_per_event_secs: f64,
    /// The wall of one front request.
    pub front_wall_secs: f64,
    /// Front slots per node (the part of the pool kept from actors).
    pub front_slots: u32,
    /// How long a front request waits for a free slot before `503`.
    pub front_slot_wait_secs: f64,
    /// Bytes of each front slot's linear memory kept mapped between
    /// requests, so that a front touching that much faults in no fresh
    /// pages and gives none back per request (actors' slots keep 256 KiB).
    /// Reserved out of the guests' budget for every front slot
    /// ([`Limits::front_memory_kept`]); 0 keeps what actors' slots keep.
    pub front_memory_kept_bytes: u64,
    /// Entries in one `call-many`.
    pub call_many_entries: u32,
    /// Events queued per actor before `callee overloaded`.
    pub queue_per_actor: u32,
    /// Idle time before an actor hibernates.
    pub idle_secs: f64,
    pub sockets_per_actor: u32,
    pub sockets_per_node: u32,
    pub socket_message_bytes: u64,
    pub socket_queue_bytes: u64,
    /// The longest any one call may wait.
    pub call_limit_secs: f64,
    /// How long an event waits for a pool instance before `503`.
    pub admission_wait_secs: f64,
    pub failover_wait_secs: f64,
    pub relay_secs: f64,
    /// A storage key, in bytes.
    pub storage_key_bytes: u32,
    /// A storage value, in bytes.
    pub storage_value_bytes: u64,
    /// Stored bytes (keys and values) of one actor; 0: no bound. A plan
    /// sets it for its tenants.
    pub storage_actor_bytes: u64,
    /// Stored bytes of all of one tenant's actors; 0: no bound.
    pub storage_tenant_bytes: u64,
    /// Instances in the node's pool, front slots included.
    pub pool_instances: u32,
    /// Classes of one version (each a component held and an entry per
    /// event's lookup; a component named by several is compiled once).
    pub classes_per_version: u32,
    /// Threads compiling components, each one compile at a time on one
    /// core, at a lower priority than requests; 0 for the node's cores.
    pub compile_threads: u32,
    /// Compiles one tenant may have waiting (beyond the one it runs);
    /// past it a deploy is refused `503`.
    pub compiles_queued_per_tenant: u32,
    /// The public port: a request head must arrive whole within this, from
    /// its first byte.
    pub header_read_secs: f64,
    /// The public port: a connection with no request in flight is closed
    /// after this (HTTP/1.1 between requests, HTTP/2 with no stream).
    pub keepalive_idle_secs: f64,
    /// The public port: a request body may take this long before the
    /// minimum rate applies.
    pub body_grace_secs: f64,
    /// The public port: after the grace, a request body must arrive at
    /// this many bytes per second on average, or the request fails.
    pub body_min_rate: u64,
    /// The public port: a request head (line and headers) in bytes.
    pub head_bytes: u32,
    /// The public port: open connections, upgraded sockets included; 0
    /// for the descriptor limit less a reserve of 1,024.
    pub max_connections: u32,
    /// The public port: open connections from one client address.
    pub max_connections_per_client: u32,
    /// The provisioning API: open connections. Its descriptors are kept
    /// apart from the public port's, so that neither starves the other.
    pub api_connections: u32,
    /// The provisioning API: open connections from one client address.
    pub api_connections_per_client: u32,
    /// The metrics listener: open connections, kept apart as the API's.
    pub metrics_connections: u32,
    /// The metrics listener: open connections from one client address.
    pub metrics_connections_per_client: u32,
    /// Request body bytes the provisioning API holds at once across the
    /// node (uploads being read, parsed and compiled); past it a body
    /// waits up to the body grace, then `503`.
    pub api_body_bytes: u64,
    /// Of those, what one tenant may hold; 0 for a quarter of them. Past
    /// it the tenant's body fails at once (`503`).
    pub api_body_bytes_per_tenant: u64,
    /// Uploads one tenant may have in flight (read, parsed, compiled).
    pub uploads_per_tenant: u32,
    /// The provisioning API: one request body must be whole within this
    /// from its start, however well it keeps the minimum rate, or `408`:
    /// a body holds its bytes of the budgets for no longer.
    pub api_body_secs: f64,
    /// The public port: requests being answered at once, which the tenants
    /// of a hosted node share by weight (a tenant over its share is
    /// refused, `503`, and its connection closed).
    pub requests_in_flight: u32,
    /// Request body bytes buffered across the node at once (actor bodies
    /// read whole, front bodies given to fronts); past it a request waits
    /// up to the body grace, then `503`.
    pub buffered_body_bytes: u64,
    /// A front request's body up to this size is read whole before the
    /// request takes a slot, so a slow client holds no slot for it.
    pub front_body_prefetch_bytes: u64,
    /// Front slots one client address may hold at once; 0 for half the
    /// slots.
    pub front_slots_per_client: u32,
    /// Guests that have computed past two ticks of one event (CPU-bound)
    /// and may run at once; 0 for one fewer than the node's cores, at
    /// least 1. Other guests and the node's I/O keep the rest.
    pub busy_guests_at_once: u32,
    /// Guests that may run at once, each poll of a guest on one of these
    /// turns, given by tenants' weighted CPU time while guests wait; 0 for
    /// the node's cores.
    pub guests_at_once: u32,
    /// Lines of stdout and stderr one actor (or front) may log a second;
    /// the rest are dropped and counted.
    pub log_lines_per_actor_per_second: u32,
    /// Lines all of one app's guests together may log a second.
    pub log_lines_per_app_per_second: u32,
    /// Guests' outbound connections open at once across the node (each a
    /// descriptor, kept apart from the listeners'); past it a guest's
    /// request fails `connection-limit-reached`.
    pub egress_connections: u32,
    /// Of those, what one tenant's guests may hold open.
    pub egress_connections_per_tenant: u32,
    /// Log tails the node serves at once (its API's and other nodes'):
    /// each may hold a reader's backlog of lines; past it `503`.
    pub log_tails: u32,
    /// Of those, one tenant's; past it `503`.
    pub log_tails_per_tenant: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes: 16 * MIB,
            memory_bytes: 128 * MIB,
            guest_memory_bytes: 0,
            wall_per_event_secs: 30.0,
            front_wall_secs: 30.0,
            front_slots: 100,
            front_slot_wait_secs: 1.0,
            front_memory_kept_bytes: 4 * MIB,
            call_many_entries: 16,
            queue_per_actor: 1000,
            idle_secs: 10.0,
            sockets_per_actor: 1000,
            sockets_per_node: 50_000,
            socket_message_bytes: MIB,
            socket_queue_bytes: 4 * MIB,
            call_limit_secs: 30.0,
            admission_wait_secs: 5.0,
            failover_wait_secs: 10.0,
            relay_secs: 30.0,
            storage_key_bytes: 2048,
            storage_value_bytes: MIB,
            storage_actor_bytes: 0,
            storage_tenant_bytes: 0,
            pool_instances: 1000,
            classes_per_version: 100,
            compile_threads: 0,
            compiles_queued_per_tenant: 4,
            header_read_secs: 10.0,
            keepalive_idle_secs: 30.0,
            body_grace_secs: 10.0,
            body_min_rate: 4096,
            head_bytes: 16 * 1024,
            max_connections: 0,
            max_connections_per_client: 10_000,
            api_connections: 1024,
            api_connections_per_client: 64,
            metrics_connections: 64,
            metrics_connections_per_client: 16,
            api_body_bytes: 512 * MIB,
            api_body_bytes_per_tenant: 0,
            uploads_per_tenant: 2,
            api_body_secs: 300.0,
            requests_in_flight: 10_000,
            buffered_body_bytes: 256 * MIB,
            front_body_prefetch_bytes: 64 * 1024,
            front_slots_per_client: 0,
            busy_guests_at_once: 0,
            guests_at_once: 0,
            log_lines_per_actor_per_second: 100,
            log_lines_per_app_per_second: 1000,
            egress_connections: 2048,
            egress_connections_per_tenant: 256,
            log_tails: 256,
            log_tails_per_tenant: 8,
        }
    }
}

/// What a machine of `machine` bytes keeps from its guests for the node
/// itself (request bodies, uploads and their compiles, the store's cache,
/// the pool's resident pages): a quarter, at least 1 GiB.
pub fn guest_memory_reserve(machine: u64) -> u64 {
    (machine / 4).max(1024 * MIB).min(machine)
}

/// What every slot's linear memory keeps mapped between instances, the
/// least a front slot keeps too: a reused memory is reset where the guest
/// wrote, these first bytes by writing zeros rather than giving the pages
/// back (ADR 0007).
pub const SLOT_MEMORY_KEPT: u64 = 256 * 1024;

/// The guests' budget less what the front slots keep mapped while no
/// request is in them: `slots` front slots of `memories` linear memories
/// each, `kept` bytes a memory (from [`Limits::front_memory_kept`]), as
/// far as it is more than every slot keeps; never below what one guest
/// may hold (`guest`), as the budget itself is not, unless the budget is.
pub fn budget_less_front_kept(budget: u64, kept: u64, slots: u32, memories: u32, guest: u64) -> u64 {
    budget.saturating_sub(front_kept_reserve(kept, slots, memories)).max(guest.min(budget))
}

/// What `slots` front slots of `memories` memories keep at most, `kept`
/// bytes each, beyond the [`SLOT_MEMORY_KEPT`] every slot keeps (that is
/// the node's own, in what [`guest_memory_reserve`] keeps for it).
pub fn front_kept_reserve(kept: u64, slots: u32, memories: u32) -> u64 {
    let beyond = kept.saturating_sub(SLOT_MEMORY_KEPT);
    beyond.saturating_mul(u64::from(slots)).saturating_mul(u64::from(memories))
}

/// Descriptors kept for the store, compiled components, the cluster's
/// sockets and the node's own files, apart from every listener's.
pub const DESCRIPTOR_RESERVE: u64 = 1024;

/// Refusals one listener writes at once (each a descriptor for a moment);
/// past it a refused connection is just closed.
pub const REFUSALS_AT_ONCE: u32 = 64;

/// What one listener may hold: connections in all and per client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub connections: u32,
    pub per_client: u32,
}

/// The listeners' shares of the process's descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorBudget {
    pub public: Bound,
    pub api: Bound,
    pub metrics: Bound,
    /// Whether the shares and the reserve fit in the descriptor limit (a
    /// node started with a small limit warns).
    pub fits: bool,
}

/// A limit that cannot be served. The text names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limits: {field}: {reason}")]
pub struct LimitError {
    pub field: &'static str,
    pub reason: &'static str,
}

impl Limits {
    /// Checks what deserialization cannot: positive durations, a pool
    /// larger than the front's slots.
    pub fn validate(&self) -> Result<(), LimitError> {
        let secs = [
            ("wall_per_event_secs", self.wall_per_event_secs),
            ("front_wall_secs", self.front_wall_secs),
            ("front_slot_wait_secs", self.front_slot_wait_secs),
            ("idle_secs", self.idle_secs),
            ("call_limit_secs", self.call_limit_secs),
            ("admission_wait_secs", self.admission_wait_secs),
            ("failover_wait_secs", self.failover_wait_secs),
            ("relay_secs", self.relay_secs),
            ("header_read_secs", self.header_read_secs),
            ("keepalive_idle_secs", self.keepalive_idle_secs),
            ("body_grace_secs", self.body_grace_secs),
            ("api_body_secs", self.api_body_secs),
        ];
        for (field, v) in secs {
            if !(v.is_finite() && v > 0.0 && v < 1e9) {
                return Err(LimitError { field, reason: "must be a positive number of seconds" });
            }
        }
        if self.queue_per_actor == 0 {
            return Err(LimitError { field: "queue_per_actor", reason: "must be at least 1" });
        }
        if self.classes_per_version == 0 {
            return Err(LimitError { field: "classes_per_version", reason: "must be at least 1" });
        }
        if self.front_slots == 0 {
            return Err(LimitError { field: "front_slots", reason: "must be at least 1" });
        }
        if self.pool_instances <= self.front_slots {
            return Err(LimitError { field: "pool_instances", reason: "must be larger than front_slots" });
        }
        if self.body_min_rate == 0 {
            return Err(LimitError { field: "body_min_rate", reason: "must be at least 1 byte per second" });
        }
        if !(8192..=1 << 20).contains(&self.head_bytes) {
            return Err(LimitError { field: "head_bytes", reason: "must be between 8192 and 1048576" });
        }
        if self.requests_in_flight == 0 {
            return Err(LimitError { field: "requests_in_flight", reason: "must be at least 1" });
        }
        let at_least_one = [
            ("max_connections_per_client", self.max_connections_per_client),
            ("api_connections", self.api_connections),
            ("api_connections_per_client", self.api_connections_per_client),
            ("metrics_connections", self.metrics_connections),
            ("metrics_connections_per_client", self.metrics_connections_per_client),
            ("uploads_per_tenant", self.uploads_per_tenant),
            ("egress_connections", self.egress_connections),
            ("egress_connections_per_tenant", self.egress_connections_per_tenant),
            ("log_tails", self.log_tails),
            ("log_tails_per_tenant", self.log_tails_per_tenant),
        ];
        for (field, n) in at_least_one {
            if n == 0 {
                return Err(LimitError { field, reason: "must be at least 1" });
            }
        }
        if self.buffered_body_bytes < self.body_bytes {
            return Err(LimitError { field: "buffered_body_bytes", reason: "must be at least body_bytes" });
        }
        if self.memory_bytes < 64 * 1024 {
            return Err(LimitError { field: "memory_bytes", reason: "must be at least one 64 KiB page" });
        }
        Ok(())
    }

    /// The guests' memory budget on a machine (or cgroup) of `machine`
    /// bytes: `guest_memory_bytes` when set, else the machine less its
    /// reserve ([`guest_memory_reserve`]).
    pub fn guest_memory(&self, machine: u64) -> u64 {
        if self.guest_memory_bytes > 0 {
            return self.guest_memory_bytes;
        }
        machine.saturating_sub(guest_memory_reserve(machine)).max(self.memory_bytes)
    }

    /// What each memory of the fronts' pool keeps mapped between
    /// requests, on a node whose guests' budget is `budget`, the pool
    /// holding `slots` instances of `memories` linear memories each:
    /// `front_memory_kept_bytes`, at least what every slot keeps, and what
    /// it keeps beyond that never more than a quarter of the budget for the
    /// whole pool, in whole 64 KiB pages.
    pub fn front_memory_kept(&self, budget: u64, slots: u32, memories: u32) -> u64 {
        const PAGE: u64 = 64 * 1024;
        let beyond = self.front_memory_kept_bytes.saturating_sub(SLOT_MEMORY_KEPT);
        let most = budget / 4 / (u64::from(slots.max(1)) * u64::from(memories.max(1)));
        SLOT_MEMORY_KEPT + beyond.min(most) / PAGE * PAGE
    }

    /// Instances actors may hold at once: the pool less the front's slots.
    pub fn actor_instances(&self) -> u32 {
        self.pool_instances.saturating_sub(self.front_slots)
    }

    /// Front calls that may wait on one actor at once: a quarter of the
    /// slots, at least one.
    pub fn front_calls_per_actor(&self) -> u32 {
        (self.front_slots / 4).max(1)
    }

    /// Front calls that may wait on the node at once: the slots' worth.
    pub fn front_calls_per_node(&self) -> u32 {
        self.front_slots
    }

    pub fn front_wall(&self) -> Duration {
        Duration::from_secs_f64(self.front_wall_secs)
    }

    pub fn front_slot_wait(&self) -> Duration {
        Duration::from_secs_f64(self.front_slot_wait_secs)
    }

    pub fn call_limit(&self) -> Duration {
        Duration::from_secs_f64(self.call_limit_secs)
    }

    /// How long a stopping node waits for the requests in flight: the
    /// longest any one may take (a front's wall, an event's wall after the
    /// longest wait for it).
    pub fn shutdown_grace(&self) -> Duration {
        self.front_wall().max(self.call_limit() + self.wall_per_event())
    }

    pub fn wall_per_event(&self) -> Duration {
        Duration::from_secs_f64(self.wall_per_event_secs)
    }

    pub fn idle(&self) -> Duration {
        Duration::from_secs_f64(self.idle_secs)
    }

    pub fn admission_wait(&self) -> Duration {
        Duration::from_secs_f64(self.admission_wait_secs)
    }

    /// When the port closes a connection (`connection::verdict`). With
    /// requests in flight, nothing may move either way for longer than the
    /// longest wait an answer may have before it starts (a front's wall,
    /// an event's, a call's), plus the idle time.
    pub fn connection_times(&self) -> crate::connection::ConnectionTimes {
        let keepalive_idle = Duration::from_secs_f64(self.keepalive_idle_secs);
        let longest_wait = self.front_wall().max(self.wall_per_event()).max(self.call_limit());
        crate::connection::ConnectionTimes {
            header_read: Duration::from_secs_f64(self.header_read_secs),
            keepalive_idle,
            stalled: longest_wait + keepalive_idle,
            answers_may_wait: false,
        }
    }

    pub fn body_grace(&self) -> Duration {
        Duration::from_secs_f64(self.body_grace_secs)
    }

    /// How long a body of which `received` bytes have come may have taken
    /// so far: the grace, then the minimum rate.
    pub fn body_allowance(&self, received: u64) -> Duration {
        self.body_grace() + Duration::from_secs_f64(received as f64 / self.body_min_rate as f64)
    }

    /// How the process's descriptors are shared, given its limit: a reserve
    /// for the store, components and the node's own files, each listener's
    /// refusals, the API's and the metrics listener's bounds, and the rest
    /// for the public port (or `max_connections`). Each listener holds only
    /// its own, so a flood on one never leaves another without descriptors.
    pub fn descriptor_budget(&self, descriptor_limit: u64) -> DescriptorBudget {
        let kept = DESCRIPTOR_RESERVE
            + 3 * u64::from(REFUSALS_AT_ONCE)
            + u64::from(self.api_connections)
            + u64::from(self.metrics_connections)
            + u64::from(self.egress_connections);
        let public = match self.max_connections {
            0 => descriptor_limit.saturating_sub(kept).clamp(64, u32::MAX as u64) as u32,
            n => n,
        };
        DescriptorBudget {
            public: Bound { connections: public, per_client: self.max_connections_per_client },
            api: Bound { connections: self.api_connections, per_client: self.api_connections_per_client },
            metrics: Bound { connections: self.metrics_connections, per_client: self.metrics_connections_per_client },
            fits: u64::from(public) + kept <= descriptor_limit,
        }
    }

    /// The API's body bytes one tenant may hold at once.
    pub fn api_body_bytes_for_one_tenant(&self) -> u64 {
        match self.api_body_bytes_per_tenant {
            0 => self.api_body_bytes / 4,
            n => n.min(self.api_body_bytes),
        }
    }

    /// Front slots one client address may hold; `None` when that is all of
    /// them (then a client waits for a slot as any request does).
    pub fn front_slots_for_one_client(&self) -> Option<u32> {
        let share = match self.front_slots_per_client {
            0 => (self.front_slots / 2).max(1),
            n => n,
        };
        (share < self.front_slots).then_some(share)
    }

    /// Compile threads on a node of `cores` cores.
    pub fn compile_threads(&self, cores: usize) -> usize {
        match self.compile_threads {
            0 => cores.max(1),
            n => n as usize,
        }
    }

    /// Guests that may run at once on a node of `cores` cores.
    pub fn guests_at_once(&self, cores: usize) -> usize {
        match self.guests_at_once {
            0 => cores.max(1),
            n => n as usize,
        }
    }

    /// CPU-bound guests that may run at once on a node of `cores` cores.
    pub fn busy_guests(&self, cores: usize) -> usize {
        match self.busy_guests_at_once {
            0 => cores.saturating_sub(1).max(1),
            n => n as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guests_memory_is_the_machine_less_a_quarter_or_a_gib() {
        let gib = 1024 * MIB;
        let l = Limits::default();
        assert_eq!(l.guest_memory(24 * gib), 18 * gib);
        assert_eq!(l.guest_memory(2 * gib), gib, "at least 1 GiB is kept");
        // A machine smaller than the reserve still runs one guest.
        assert_eq!(l.guest_memory(512 * MIB), l.memory_bytes);
        let set = Limits { guest_memory_bytes: 3 * gib, ..Limits::default() };
        assert_eq!(set.guest_memory(24 * gib), 3 * gib, "the operator's figure stands");
    }

    #[test]
    fn front_slots_keep_their_memory_within_a_quarter_of_the_budget() {
        let gib = 1024 * MIB;
        let l = Limits::default();
        // 100 slots of 2 memories, 4 MiB each, 256 KiB of it what every
        // slot keeps: 750 MiB of an 18 GiB budget.
        assert_eq!(l.front_memory_kept(18 * gib, 100, 2), 4 * MIB);
        assert_eq!(budget_less_front_kept(18 * gib, 4 * MIB, 100, 2, 0), 18 * gib - 750 * MIB);
        assert_eq!(front_kept_reserve(SLOT_MEMORY_KEPT, 100, 2), 0, "what every slot keeps is the node's");
        // A small budget keeps less a slot: a quarter of 1 GiB over 200
        // memories is 1.28 MiB beyond every slot's 256 KiB, in whole 64 KiB
        // pages.
        assert_eq!(l.front_memory_kept(gib, 100, 2), SLOT_MEMORY_KEPT + 20 * 64 * 1024);
        assert!(front_kept_reserve(l.front_memory_kept(gib, 100, 2), 100, 2) <= gib / 4);
        // Never less than every slot keeps.
        let none = Limits { front_memory_kept_bytes: 0, ..Limits::default() };
        assert_eq!(none.front_memory_kept(18 * gib, 100, 2), SLOT_MEMORY_KEPT);
        assert_eq!(l.front_memory_kept(32 * MIB, 100, 2), SLOT_MEMORY_KEPT, "8 MiB over 200 memories is no page more");
        assert_eq!(budget_less_front_kept(MIB, u64::MAX, u32::MAX, u32::MAX, 0), 0, "saturates");
    }

    #[test]
    fn the_front_bounds_are_a_quarter_of_the_slots_and_the_slots() {
        let with = |front_slots| Limits { front_slots, ..Limits::default() };
        assert_eq!(with(8).front_calls_per_actor(), 2);
        assert_eq!(with(9).front_calls_per_actor(), 2);
        assert_eq!(with(3).front_calls_per_actor(), 1, "never zero");
        assert_eq!(with(1).front_calls_per_actor(), 1);
        assert_eq!(with(8).front_calls_per_node(), 8);
    }

    #[test]
    fn defaults_are_design_section_6() {
        let l = Limits::default();
        assert_eq!(l.body_bytes, 16 << 20);
        assert_eq!(l.memory_bytes, 128 << 20);
        assert_eq!(l.wall_per_event(), Duration::from_secs(30));
        assert_eq!(l.front_slots, 100);
        assert_eq!(l.queue_per_actor, 1000);
        assert_eq!(l.idle(), Duration::from_secs(10));
        assert_eq!(l.admission_wait(), Duration::from_secs(5));
        assert_eq!(l.actor_instances(), 900);
        assert_eq!(l.front_wall(), Duration::from_secs(30));
        assert_eq!(l.front_calls_per_actor(), 25);
        assert_eq!(l.front_calls_per_node(), 100);
        assert_eq!(l.call_limit(), Duration::from_secs(30));
        assert_eq!(l.validate(), Ok(()));
    }

    #[test]
    fn the_ports_limits_resolve() {
        let l = Limits::default();
        let budget = l.descriptor_budget(20_000);
        assert_eq!(budget.public, Bound { connections: 20_000 - 1024 - 192 - 1024 - 64 - 2048, per_client: 10_000 });
        assert_eq!(budget.api, Bound { connections: 1024, per_client: 64 });
        assert_eq!(budget.metrics, Bound { connections: 64, per_client: 16 });
        assert!(budget.fits);
        let small = l.descriptor_budget(1000);
        assert_eq!(small.public.connections, 64, "never below a usable few");
        assert!(!small.fits, "and said not to fit");
        let set = Limits {
            max_connections: 500,
            api_connections: 10,
            metrics_connections: 5,
            egress_connections: 5,
            ..l.clone()
        };
        assert_eq!(set.descriptor_budget(20_000).public.connections, 500);
        assert_eq!(set.descriptor_budget(1500).api.connections, 10);
        assert!(set.descriptor_budget(1736).fits && !set.descriptor_budget(1735).fits);
        assert_eq!(l.api_body_bytes_for_one_tenant(), 128 << 20, "a quarter");
        let set = Limits { api_body_bytes_per_tenant: 1 << 40, ..l.clone() };
        assert_eq!(set.api_body_bytes_for_one_tenant(), 512 << 20, "never more than all");
        assert_eq!(l.front_slots_for_one_client(), Some(50));
        assert_eq!(Limits { front_slots_per_client: 7, ..l.clone() }.front_slots_for_one_client(), Some(7));
        assert_eq!(Limits { front_slots_per_client: 100, ..l.clone() }.front_slots_for_one_client(), None);
        assert_eq!(Limits { front_slots: 1, ..l.clone() }.front_slots_for_one_client(), None, "one slot is shared");
        assert_eq!((l.compile_threads(2), l.compile_threads(0)), (2, 1));
        assert_eq!(Limits { compile_threads: 1, ..l.clone() }.compile_threads(8), 1);
        assert_eq!(l.busy_guests(2), 1);
        assert_eq!(l.busy_guests(1), 1);
        assert_eq!(l.busy_guests(8), 7);
        assert_eq!(Limits { busy_guests_at_once: 3, ..l.clone() }.busy_guests(2), 3);
        assert_eq!(l.guests_at_once(2), 2);
        assert_eq!(l.guests_at_once(0), 1);
        assert_eq!(Limits { guests_at_once: 5, ..l.clone() }.guests_at_once(2), 5);
        assert_eq!(l.body_allowance(0), Duration::from_secs(10));
        assert_eq!(l.body_allowance(4096 * 5), Duration::from_secs(15));
        let times = l.connection_times();
        assert_eq!(times.header_read, Duration::from_secs(10));
        assert_eq!(times.keepalive_idle, Duration::from_secs(30));
        assert_eq!(times.stalled, Duration::from_secs(60), "the longest wall or call, then the idle time");
    }

    #[test]
    fn validation_names_the_field() {
        let l = Limits { idle_secs: 0.0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().to_string(), "limits: idle_secs: must be a positive number of seconds");
        let l = Limits { pool_instances: 100, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "pool_instances");
        let l = Limits { wall_per_event_secs: f64::NAN, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "wall_per_event_secs");
        let l = Limits { front_slots: 0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "front_slots");
        let l = Limits { queue_per_actor: 0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "queue_per_actor");
        let l = Limits { head_bytes: 4096, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "head_bytes");
        let l = Limits { body_min_rate: 0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "body_min_rate");
        let l = Limits { buffered_body_bytes: 1, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "buffered_body_bytes");
        let l = Limits { api_connections_per_client: 0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "api_connections_per_client");
        let l = Limits { header_read_secs: -1.0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().field, "header_read_secs");
    }
}
