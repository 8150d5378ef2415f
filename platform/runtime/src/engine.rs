//! The node's wasmtime engines, one pool each: actors' and fronts' (a
//! front slot keeps more of its memory mapped between requests); their
//! epoch ticks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::cpu::CpuGate;
use crate::polls::{PollGate, QUANTUM};

/// How often the epoch advances. An event's wall is checked at each tick,
/// and a guest that computes past a tick yields to other tasks, so one
/// busy guest never holds a runtime thread for long.
pub const TICK: Duration = Duration::from_millis(10);

/// What the engine is sized for.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Component instances the actors' pool holds.
    pub instances: u32,
    /// Component instances the fronts' pool holds: the front slots, and
    /// a few for stores being dropped.
    pub front_instances: u32,
    /// Bytes of each front slot's memory kept mapped between requests
    /// (`Limits::front_memory_kept`), reserved out of `guest_memory_bytes`.
    pub front_memory_kept: u64,
    /// A guest's linear memory limit.
    pub memory_bytes: u64,
    /// What all guests' linear memories may hold together (`memory`).
    pub guest_memory_bytes: u64,
    /// What one host call may copy out of a guest (`loader::host_call_bytes`).
    pub host_call_bytes: u64,
    /// CPU-bound guests that may run at once (`cpu`).
    pub busy_guests: usize,
    /// Guests that may run at once, shared by tenants (`polls`).
    pub guests_at_once: usize,
    /// Where guests' stdout and stderr lines go.
    pub logs: std::sync::Arc<wasmkeep_telemetry::logs::GuestLogs>,
}

impl EngineConfig {
    /// The engines `limits` size on a machine of `cores`, its guests'
    /// lines going to `logs`.
    pub fn new(limits: &wasmkeep_core::Limits, cores: usize, logs: Arc<wasmkeep_telemetry::logs::GuestLogs>) -> Self {
        let guest_memory_bytes = limits.guest_memory(crate::machine_memory().unwrap_or(u64::MAX));
        // A front's slot is its store's data, which wasmtime drops before
        // it gives the store's instance back to the pool: a request given
        // the slot in between finds the pool a slot short. The pool holds
        // the slots and as many more as the runtime's threads could be
        // dropping at once.
        let front_instances = limits.front_slots.saturating_add((4 * cores as u32).max(16));
        // Without PAGEMAP_SCAN (Linux 6.7) a reused memory's kept bytes are
        // all zeroed at each teardown, touched or not: 4 MiB a request
        // would cost more than the faults it saves.
        let front_memory_kept = match pagemap_scan_exists() {
            true => limits.front_memory_kept(guest_memory_bytes, front_instances, MEMORIES_PER_COMPONENT),
            false => wasmkeep_core::limits::SLOT_MEMORY_KEPT,
        };
        Self {
            instances: limits.actor_instances(),
            front_instances,
            front_memory_kept,
            memory_bytes: limits.memory_bytes,
            guest_memory_bytes,
            host_call_bytes: crate::host_call_bytes(limits),
            busy_guests: limits.busy_guests(cores),
            guests_at_once: limits.guests_at_once(cores),
            logs,
        }
    }
}

/// Whether the kernel resets memories page by page where they were
/// written (`PAGEMAP_SCAN`, Linux 6.7 and later).
pub fn pagemap_scan_exists() -> bool {
    crate::slices::kernel() >= (6, 7)
}

/// Core instances, memories and tables one component may take: a Rust
/// component holds its module plus a few shim modules.
const CORE_INSTANCES_PER_COMPONENT: u32 = 8;
const TABLES_PER_COMPONENT: u32 = 8;
pub const MEMORIES_PER_COMPONENT: u32 = 2;

/// The node's two engines. A front instance lives for one request, so its
/// slot is reused at the request rate: what the slot keeps mapped, the next
/// request there faults in and gives back for nothing (a front touching a
/// few MiB spent most of its time so, and its teardown's TLB shootdowns
/// reached every core). An actor's instance lives until it hibernates, so
/// its slot keeps little. One engine has one pool and one setting for it:
/// hence two, compiled alike (a cached compile loads in either).
pub(crate) struct Engines {
    pub(crate) actors: Engine,
    pub(crate) fronts: Engine,
}

pub(crate) fn build(cfg: &EngineConfig) -> wasmtime::Result<Engines> {
    Ok(Engines {
        actors: one(cfg.instances, wasmkeep_core::limits::SLOT_MEMORY_KEPT, cfg.memory_bytes)?,
        fronts: one(cfg.front_instances.max(1), cfg.front_memory_kept, cfg.memory_bytes)?,
    })
}

/// An engine whose pool holds `instances`, each memory keeping `kept`
/// bytes mapped when its instance ends.
fn one(instances: u32, kept: u64, memory_bytes: u64) -> wasmtime::Result<Engine> {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(instances * MEMORIES_PER_COMPONENT)
        .total_tables(instances * TABLES_PER_COMPONENT)
        .total_stacks(instances)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_tables_per_module(TABLES_PER_COMPONENT)
        .max_memory_size(memory_bytes as usize)
        // A reused memory is reset page by page where the guest wrote
        // (PAGEMAP_SCAN, Linux 6.7+), its first `kept` bytes kept mapped:
        // no `madvise` and no TLB shootdown on the other cores per
        // instance, which cost more than half of a front request (ADR 0007).
        .linear_memory_keep_resident(kept as usize)
        .table_keep_resident(16 * 1024)
        .pagemap_scan(wasmtime::Enabled::Auto);

    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        // A compile runs on one of the node's compile threads, at a lower
        // priority than the requests, one core each: never on every core
        // at once (ADR 0026).
        .parallel_compilation(false)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config)
}

/// Advances the engine's epoch every [`TICK`] until dropped, and
/// between ticks, every [`QUANTUM`], lets the poll gate preempt.
pub(crate) struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Ticker {
    /// Both engines' epochs move together (a store's deadline is counted
    /// in its engine's ticks). Each tick also ends the CPU gate's turns
    /// (`cpu`).
    pub(crate) fn start(engines: [Engine; 2], gate: CpuGate, polls: PollGate) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("wasmkeep-epoch".into())
            .spawn(move || {
                let mut next = Instant::now() + TICK;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(QUANTUM.min(next.saturating_duration_since(Instant::now())));
                    let now = Instant::now();
                    if now < next {
                        polls.preempt_if_due();
                        continue;
                    }
                    next = (next + TICK).max(now);
                    // Counted before the epoch moves, so the callbacks it
                    // causes are ticks; the epoch before the turns end, so
                    // a guest given a turn below runs until the next tick,
                    // not just to this one.
                    gate.count_tick();
                    engines.iter().for_each(Engine::increment_epoch);
                    gate.end_turns();
                }
            })
            .expect("spawning the epoch thread");
        Self { stop }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
