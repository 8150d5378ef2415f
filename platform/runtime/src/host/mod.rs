//! The host side of each WIT interface, one file per interface. Each
//! delegates to [`ActorHost`], the policy the actor runtime supplies per
//! resident actor: the runtime knows how to talk to a guest, the host knows
//! what an operation means for this actor.

mod actors;
mod calls;
mod config;
mod egress;
pub mod egress_tls;
mod fields;
pub(crate) mod keyvalue;
mod self_;
mod sockets;
mod storage;
mod values;

use crate::cpu::{CpuGate, CpuTurn};
use crate::guest_log::{GuestLabel, GuestOutput};
use crate::share::GuestShare;
use std::future::Future;
use std::sync::Arc;
use wasmkeep_telemetry::logs::GuestLogs;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

pub use egress::{Egress, EgressCounts, EgressQuota};

pub use crate::bindings::wasmkeep::actor::actors::{CallError, Request, Response};
pub use crate::bindings::wasmkeep::actor::sockets::SocketError;
pub use crate::bindings::wasmkeep::actor::storage::{Page, StorageError};

/// What any guest of an app may ask the host, actor or front: the app's
/// values and calls to its actors. The actor runtime implements it per
/// event (an actor) or per request (a front).
pub trait GuestHost: Send + 'static {
    /// The app's values: what `values.get` and `wasi:config/store` read.
    fn values(&self) -> &std::collections::BTreeMap<String, String>;
    /// The trace context of the event or request now running: a guest's
    /// outbound requests are its children.
    fn trace(&self) -> &wasmkeep_core::TraceContext;
    /// Calls another actor of the app and waits for its answer.
    fn call(&mut self, address: String, request: Request) -> impl Future<Output = Result<Response, CallError>> + Send;
    /// Calls several at once; one result per entry, in input order.
    fn call_many(
        &mut self,
        calls: Vec<(String, Request)>,
    ) -> impl Future<Output = Vec<Result<Response, CallError>>> + Send;
}

/// What an actor's own host calls mean, for one resident actor: its
/// address, its storage, its deletion.
pub trait ActorHost: GuestHost {
    /// The actor's own address, `class/name`.
    fn address(&self) -> String;
    fn storage_get(&mut self, key: String) -> impl Future<Output = Result<Option<Vec<u8>>, StorageError>> + Send;
    /// A write may ask the store what is stored (near the actor's storage
    /// quota), so it may wait.
    fn storage_set(&mut self, key: String, value: Vec<u8>) -> impl Future<Output = Result<(), StorageError>> + Send;
    fn storage_delete(&mut self, key: String) -> impl Future<Output = Result<(), StorageError>> + Send;
    fn storage_list(
        &mut self,
        prefix: String,
        cursor: Option<String>,
        limit: u32,
    ) -> impl Future<Output = Result<Page, StorageError>> + Send;
    fn storage_delete_all(&mut self) -> Result<(), StorageError>;
    /// Marks the actor deleted; the runtime deletes it when the event ends.
    fn delete_self(&mut self);
    /// Sends on, or closes, one of the actor's sockets. An `Err` traps the
    /// guest (a close code no socket may send, the store failing).
    fn socket_send(
        &mut self,
        conn: u64,
        message: SocketSend,
    ) -> impl Future<Output = Result<Result<(), SocketError>, String>> + Send;
    /// The actor's open sockets.
    fn socket_list(&self) -> Vec<u64>;
}

/// What an actor sends on a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSend {
    Text(String),
    Binary(Vec<u8>),
    Close { code: u16, reason: String },
}

/// A store's data: WASI's contexts, the guest's limits and its host.
pub struct GuestState<H> {
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) egress: Egress,
    pub(crate) table: ResourceTable,
    /// What `wasi:keyvalue` keeps between calls.
    pub(crate) keyvalue: keyvalue::KvState,
    /// Its memory: its own limit, and its charge against the node's budget.
    pub(crate) memory: crate::memory::GuestMemory,
    /// When the current event's wall ends; checked at each epoch tick.
    pub(crate) wall_ends: Option<std::time::Instant>,
    pub(crate) wall_exceeded: bool,
    /// What the guest prints: its lines' records (`guest_log`).
    pub(crate) output: GuestOutput,
    pub(crate) label: GuestLabel,
    /// Its standing at the node's CPU gate.
    pub(crate) cpu: CpuTurn,
    pub host: H,
}

/// What every guest store of a node is given.
#[derive(Clone)]
pub(crate) struct GuestConfig {
    pub memory_bytes: u64,
    /// What all guests of the node may hold.
    pub memory: Arc<crate::memory::MemoryBudget>,
    /// What one host call may copy out of a guest (`loader`).
    pub host_call_bytes: u64,
    pub cpu: CpuGate,
    /// The node's turns for every poll of a guest.
    pub polls: crate::polls::PollGate,
    /// Where guests' lines go.
    pub logs: Arc<GuestLogs>,
    /// The environment of one version's guests (`[env]`).
    pub env: Arc<[(String, String)]>,
}

impl GuestConfig {
    /// This config for the guests of a version whose environment is `env`.
    pub(crate) fn with_env(&self, env: &std::collections::BTreeMap<String, String>) -> Self {
        Self { env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), ..self.clone() }
    }
}

impl<H> GuestState<H> {
    pub(crate) fn new(host: H, label: GuestLabel, config: &GuestConfig, egress: Egress, share: GuestShare) -> Self {
        let output = GuestOutput::new(label.who.clone(), config.logs.clone());
        Self {
            // A guest's output is not written to the node's own: each line
            // is a record of the node's guest logs, under their limits.
            wasi: WasiCtx::builder().stdout(output.clone()).stderr(output.stderr()).envs(&config.env).build(),
            output,
            label,
            memory: crate::memory::GuestMemory::new(config.memory.clone(), share.clone(), config.memory_bytes),
            cpu: CpuTurn::new(config.cpu.clone(), share),
            http: {
                let mut http = WasiHttpCtx::new();
                http.set_field_size_limit(fields::FIELD_SIZE_LIMIT);
                http
            },
            egress,
            table: guest_table(),
            keyvalue: keyvalue::KvState::default(),
            wall_ends: None,
            wall_exceeded: false,
            host,
        }
    }
}

/// Handles (streams, fields, buckets, …) a guest may hold at once. Each
/// is host memory outside the guest's limit; wasmtime's default allows a
/// million. Past it the call traps.
pub const GUEST_HANDLES_MAX: usize = 4_096;

fn guest_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(GUEST_HANDLES_MAX);
    table
}

impl<H: Send> WasiView for GuestState<H> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl<H: Send> WasiHttpView for GuestState<H> {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.egress }
    }
}

/// Links everything an actor may import: what every guest has, the
/// package's actor interfaces, and `wasi:keyvalue` over its storage.
pub(crate) fn actor_linker<H: ActorHost>(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<GuestState<H>>> {
    use crate::bindings::wasmkeep::actor as wit;
    let mut linker = guest_linker(engine)?;
    wit::storage::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::sockets::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::self_::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    keyvalue::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// Links everything a front may import (world `front`): what every guest
/// has; the incoming handler is its export.
pub(crate) fn front_linker<H: GuestHost>(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<GuestState<H>>> {
    guest_linker(engine)
}

/// What actors and fronts both import: WASI 0.2, outbound HTTP through the
/// host's egress sender, calls and values, and `wasi:config` over values.
fn guest_linker<H: GuestHost>(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<GuestState<H>>> {
    use crate::bindings::wasmkeep::actor as wit;
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    fields::add_to_linker(&mut linker)?;
    wit::actors::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::calls::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    wit::values::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    config::add_to_linker(&mut linker)?;
    Ok(linker)
}
