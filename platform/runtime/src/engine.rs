//! The node's one wasmtime `Engine`: pooling allocator, epoch ticks.

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
    /// Component instances the pool holds (actors and front slots).
    pub instances: u32,
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

/// Core instances, memories and tables one component may take: a Rust
/// component holds its module plus a few shim modules.
const CORE_INSTANCES_PER_COMPONENT: u32 = 8;
const TABLES_PER_COMPONENT: u32 = 8;
const MEMORIES_PER_COMPONENT: u32 = 2;

pub(crate) fn build(cfg: &EngineConfig) -> wasmtime::Result<Engine> {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(cfg.instances)
        .total_core_instances(cfg.instances * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(cfg.instances * MEMORIES_PER_COMPONENT)
        .total_tables(cfg.instances * TABLES_PER_COMPONENT)
        .total_stacks(cfg.instances)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_tables_per_module(TABLES_PER_COMPONENT)
        .max_memory_size(cfg.memory_bytes as usize)
        // A reused memory is reset page by page where the guest wrote
        // (PAGEMAP_SCAN, Linux 6.7+), its first 256 KiB kept mapped: no
        // `madvise` and no TLB shootdown on the other cores per instance,
        // which cost more than half of a front request (ADR 0007).
        .linear_memory_keep_resident(256 * 1024)
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
    /// Each tick also ends the CPU gate's turns (`cpu`).
    pub(crate) fn start(engine: Engine, gate: CpuGate, polls: PollGate) -> Self {
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
                    engine.increment_epoch();
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
