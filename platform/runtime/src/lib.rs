//! The component host: one wasmtime `Engine` per node, a `Linker` per kind
//! of guest (actor, front), one `InstancePre` per component, a `Store` per
//! resident actor and per front request.

mod bindings;
mod cache;
mod cpu;
mod engine;
mod front;
mod guest_log;
mod host;
mod instance;
mod loader;
mod memory;
mod polls;
mod share;
pub mod slices;
mod standard;
mod wall;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::Linker;

pub use bindings::exports::wasmkeep::actor::events::Message as SocketMessage;
pub use cache::component_hash;
pub use engine::{EngineConfig, TICK, pagemap_scan_exists};
pub use front::{ClientBodyError, FrontBody, FrontComponent, FrontRun};
pub use guest_log::GuestLabel;
pub use host::egress_tls;
pub use host::{
    ActorHost, CallError, Egress, EgressCounts, EgressQuota, GuestHost, GuestState, Page, Request, Response,
    SocketError, SocketSend, StorageError,
};
pub use instance::{ActorComponent, ActorInstance, EventAnswer, GuestEvent};
pub use loader::host_call_bytes;
pub use memory::{MemoryBudget, MemoryRelief, machine_memory};
pub use polls::Fair;
pub use share::GuestShare;
pub use wall::EventFailure;

/// Why `wasm` is plainly no component, before the compiler's own words:
/// not WebAssembly at all (which wasmtime would read as WAT text, and
/// fail to parse), or a core module.
fn not_a_component(wasm: &[u8]) -> Option<&'static str> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_MODULE: [u8; 4] = [1, 0, 0, 0];
    if !wasm.starts_with(MAGIC) {
        return Some("the file is not WebAssembly (a component starts with the bytes \\0asm)");
    }
    if wasm.get(4..8) == Some(&CORE_MODULE[..]) {
        return Some(
            "a core WebAssembly module, not a component (build it for wasm32-wasip2, or wrap it with `wasm-tools component new`)",
        );
    }
    None
}

/// Why a component cannot be deployed. One line, for the deployer.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("not a valid component: {0}")]
    Invalid(String),
    #[error("component imports {0}, which this host does not provide")]
    MissingImport(String),
    #[error("component imports {0}, which a front cannot have: a front has no storage (an actor has its own)")]
    FrontStorage(String),
    #[error("component does not export {0}")]
    MissingExport(String),
}

/// The node's engines and the linkers for its actors (hosted by `A`) and
/// its fronts (hosted by `F`), each on its own engine (`engine::Engines`).
pub struct Runtime<A: ActorHost, F: GuestHost> {
    engine: Engine,
    front_engine: Engine,
    actor_linker: Linker<GuestState<A>>,
    front_linker: Linker<GuestState<F>>,
    cache_dir: Option<PathBuf>,
    guest: host::GuestConfig,
    _ticker: Arc<engine::Ticker>,
}

impl<A: ActorHost, F: GuestHost> Runtime<A, F> {
    /// Builds the engine and starts its epoch ticks. Compiled components
    /// are cached under `cache_dir` when given.
    pub fn new(cfg: &EngineConfig, cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        let engine::Engines { actors: engine, fronts: front_engine } =
            engine::build(cfg).map_err(|e| anyhow::anyhow!("building the engine: {e}"))?;
        let link = |e: wasmtime::Error| anyhow::anyhow!("linking the host: {e}");
        let actor_linker = host::actor_linker(&engine).map_err(link)?;
        let front_linker = host::front_linker(&front_engine).map_err(link)?;
        // What the front slots keep mapped between requests is the node's
        // memory as surely as a guest's: the guests share what is left.
        let budget = wasmkeep_core::limits::budget_less_front_kept(
            cfg.guest_memory_bytes,
            cfg.front_memory_kept,
            cfg.front_instances,
            engine::MEMORIES_PER_COMPONENT,
            cfg.memory_bytes,
        );
        let engines = [engine.clone(), front_engine.clone()];
        let guest = host::GuestConfig {
            memory_bytes: cfg.memory_bytes,
            memory: Arc::new(memory::MemoryBudget::new(budget)),
            host_call_bytes: cfg.host_call_bytes,
            cpu: cpu::CpuGate::new(cfg.busy_guests),
            polls: polls::PollGate::new(cfg.guests_at_once, {
                let engines = engines.clone();
                Arc::new(move || engines.iter().for_each(Engine::increment_epoch))
            }),
            logs: cfg.logs.clone(),
            env: Arc::default(),
        };
        let ticker = Arc::new(engine::Ticker::start(engines, guest.cpu.clone(), guest.polls.clone()));
        Ok(Self { engine, front_engine, actor_linker, front_linker, cache_dir, guest, _ticker: ticker })
    }

    /// Compiles (or loads from the cache) an actor component and checks
    /// that this host provides every import it names. Its instances see
    /// `env` through `wasi:cli/environment`.
    pub fn load_actor(&self, wasm: &[u8], env: &BTreeMap<String, String>) -> Result<ActorComponent<A>, DeployError> {
        let component = self.compile(&self.engine, wasm)?;
        let pre = self.actor_linker.instantiate_pre(&component).map_err(|e| missing_import(&e.to_string()))?;
        ActorComponent::new(pre, component_hash(wasm), self.guest.with_env(env))
    }

    /// Compiles (or loads from the cache) a front component (world
    /// `front`) and checks its imports and its export. Its instances see
    /// `env` through `wasi:cli/environment`.
    pub fn load_front(&self, wasm: &[u8], env: &BTreeMap<String, String>) -> Result<FrontComponent<F>, DeployError> {
        let component = self.compile(&self.front_engine, wasm)?;
        let pre = self.front_linker.instantiate_pre(&component).map_err(|e| front_import(&e.to_string()))?;
        FrontComponent::new(pre, component_hash(wasm), self.guest.with_env(env))
    }

    fn compile(&self, engine: &Engine, wasm: &[u8]) -> Result<wasmtime::component::Component, DeployError> {
        if let Some(why) = not_a_component(wasm) {
            return Err(DeployError::Invalid(why.into()));
        }
        cache::load(engine, self.cache_dir.as_deref(), wasm).map_err(|e| DeployError::Invalid(one_line(&e.to_string())))
    }

    /// Bytes the pools keep mapped in slots no instance is in now:
    /// `(fronts, actors)`.
    pub fn memory_kept(&self) -> (u64, u64) {
        let kept = |e: &Engine| e.pooling_allocator_metrics().map_or(0, |m| m.unused_memory_bytes_resident() as u64);
        (kept(&self.front_engine), kept(&self.engine))
    }

    /// `task`, each of its polls on one of the node's guest turns charged
    /// to `share`'s tenant (a guest run inside it rides on the same turn).
    pub fn fair<T: std::future::Future>(&self, share: GuestShare, task: T) -> Fair<T> {
        self.guest.polls.fair(share, task)
    }

    /// The node's budget for its guests' memory, which every store charges.
    pub fn memory(&self) -> &Arc<MemoryBudget> {
        &self.guest.memory
    }
}

/// A front's missing import; `wasi:keyvalue` is missing for a reason.
fn front_import(msg: &str) -> DeployError {
    match missing_import(msg) {
        DeployError::MissingImport(name) if name.starts_with("`wasi:keyvalue/") => DeployError::FrontStorage(name),
        other => other,
    }
}

/// wasmtime names a missing import as "component imports instance `x`, but
/// a matching implementation was not found in the linker"; keep the name.
fn missing_import(msg: &str) -> DeployError {
    let mut parts = msg.splitn(3, '`');
    match (parts.next(), parts.next()) {
        (Some(_), Some(name)) => DeployError::MissingImport(format!("`{name}`")),
        _ => DeployError::MissingImport(one_line(msg)),
    }
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}
