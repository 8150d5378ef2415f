//! The component host: one wasmtime `Engine` and `Linker` per node, one
//! `InstancePre` per component, a `Store` per resident actor.

mod bindings;
mod cache;
mod engine;
mod host;
mod instance;

use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::Linker;

pub use cache::component_hash;
pub use engine::{EngineConfig, TICK};
pub use host::{ActorHost, ActorState, CallError, Page, Request, Response, StorageError};
pub use instance::{ActorComponent, ActorInstance, EventFailure};

/// Why a component cannot be deployed. One line, for the deployer.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("not a valid component: {0}")]
    Invalid(String),
    #[error("component imports {0}, which this host does not provide")]
    MissingImport(String),
    #[error("component does not export {0}")]
    MissingExport(String),
}

/// The node's engine and the linker for actors.
pub struct Runtime<H: ActorHost> {
    engine: Engine,
    actor_linker: Linker<ActorState<H>>,
    cache_dir: Option<PathBuf>,
    memory_bytes: u64,
    _ticker: Arc<engine::Ticker>,
    _host: PhantomData<fn() -> H>,
}

impl<H: ActorHost> Runtime<H> {
    /// Builds the engine and starts its epoch ticks. Compiled components
    /// are cached under `cache_dir` when given.
    pub fn new(cfg: &EngineConfig, cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        let engine = engine::build(cfg).map_err(|e| anyhow::anyhow!("building the engine: {e}"))?;
        let actor_linker = host::actor_linker(&engine).map_err(|e| anyhow::anyhow!("linking the host: {e}"))?;
        let ticker = Arc::new(engine::Ticker::start(engine.clone()));
        Ok(Self {
            engine,
            actor_linker,
            cache_dir,
            memory_bytes: cfg.memory_bytes,
            _ticker: ticker,
            _host: PhantomData,
        })
    }

    /// Compiles (or loads from the cache) an actor component and checks
    /// that this host provides every import it names.
    pub fn load_actor(&self, wasm: &[u8]) -> Result<ActorComponent<H>, DeployError> {
        let component = cache::load(&self.engine, self.cache_dir.as_deref(), wasm)
            .map_err(|e| DeployError::Invalid(one_line(&e.to_string())))?;
        let pre = self.actor_linker.instantiate_pre(&component).map_err(|e| missing_import(&e.to_string()))?;
        ActorComponent::new(pre, component_hash(wasm), self.memory_bytes)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
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
