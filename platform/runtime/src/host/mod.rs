//! The host side of each WIT interface, one file per interface. Each
//! delegates to [`ActorHost`], the policy the actor runtime supplies per
//! resident actor: the runtime knows how to talk to a guest, the host knows
//! what an operation means for this actor.

mod actors;
mod calls;
mod self_;
mod sockets;
mod storage;
mod values;

use std::future::Future;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub use crate::bindings::wasmkeep::actor::actors::{CallError, Request, Response};
pub use crate::bindings::wasmkeep::actor::storage::{Page, StorageError};

/// What an actor's host calls mean, for one resident actor. The actor
/// runtime implements it; the runtime's bindings call it.
pub trait ActorHost: Send + 'static {
    /// The actor's own address, `class/name`.
    fn address(&self) -> String;
    fn value(&self, name: &str) -> Option<String>;
    fn storage_get(&mut self, key: String) -> impl Future<Output = Result<Option<Vec<u8>>, StorageError>> + Send;
    fn storage_set(&mut self, key: String, value: Vec<u8>) -> Result<(), StorageError>;
    fn storage_delete(&mut self, key: String) -> Result<(), StorageError>;
    fn storage_list(
        &mut self,
        prefix: String,
        cursor: Option<String>,
        limit: u32,
    ) -> impl Future<Output = Result<Page, StorageError>> + Send;
    fn storage_delete_all(&mut self) -> Result<(), StorageError>;
    /// Marks the actor deleted; the runtime deletes it when the event ends.
    fn delete_self(&mut self);
    /// Calls another actor of the app and waits for its answer.
    fn call(&mut self, address: String, request: Request) -> impl Future<Output = Result<Response, CallError>> + Send;
    /// Calls several at once; one result per entry, in input order.
    fn call_many(
        &mut self,
        calls: Vec<(String, Request)>,
    ) -> impl Future<Output = Vec<Result<Response, CallError>>> + Send;
}

/// A store's data: WASI's context, the guest's limits and the actor's host.
pub struct ActorState<H> {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: StoreLimits,
    /// When the current event's wall ends; checked at each epoch tick.
    pub(crate) wall_ends: Option<std::time::Instant>,
    pub(crate) wall_exceeded: bool,
    pub host: H,
}

impl<H> ActorState<H> {
    pub(crate) fn new(host: H, memory_bytes: u64) -> Self {
        Self {
            // Guests write their stdout and stderr to the node's.
            wasi: WasiCtx::builder().inherit_stdout().inherit_stderr().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new().memory_size(memory_bytes as usize).trap_on_grow_failure(true).build(),
            wall_ends: None,
            wall_exceeded: false,
            host,
        }
    }
}

impl<H: Send> WasiView for ActorState<H> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Links everything an actor may import: WASI 0.2 and the package's
/// interfaces. Outbound HTTP is not linked yet, so a component importing
/// it is refused at deploy, naming it.
pub(crate) fn actor_linker<H: ActorHost>(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<ActorState<H>>> {
    use crate::bindings::wasmkeep::actor as wit;
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wit::actors::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::calls::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::storage::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::sockets::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::self_::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::values::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}
