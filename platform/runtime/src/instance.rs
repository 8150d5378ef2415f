//! A loaded actor component and its live instances.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::exports::wasmkeep::actor::events::Message as SocketMessage;
use crate::bindings::{ActorCore, ActorCorePre};
use crate::guest_log::GuestLabel;
use crate::host::{ActorHost, Egress, GuestConfig, GuestState, Request, Response};
use crate::loader;
use crate::share::GuestShare;
use crate::wall::{self, timer};
use crate::{DeployError, EventFailure};

/// A component ready to instantiate: one per class of a version.
pub struct ActorComponent<H: ActorHost> {
    pre: ActorCorePre<GuestState<H>>,
    hash: String,
    guest: GuestConfig,
    /// What an instance's memories take when it starts (`memory`).
    initial_memory: u64,
}

impl<H: ActorHost> ActorComponent<H> {
    pub(crate) fn new(pre: InstancePre<GuestState<H>>, hash: String, guest: GuestConfig) -> Result<Self, DeployError> {
        let initial_memory = crate::memory::initial_memory(pre.component());
        let pre = ActorCorePre::new(pre).map_err(|e| {
            DeployError::MissingExport(format!(
                "the `wasmkeep:actor/events@0.2.0` interface ({})",
                crate::one_line(&e.to_string())
            ))
        })?;
        Ok(Self { pre, hash, guest, initial_memory })
    }

    /// The SHA-256 of the component's bytes.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The bytes of memory a new instance takes from the node's budget as
    /// it starts: what admission finds room for first.
    pub fn initial_memory(&self) -> u64 {
        self.initial_memory
    }

    /// A new instance from the pool, holding `host`, its outbound requests
    /// under its app's `egress`. Instantiation runs the component's start
    /// code, within the wall that `ends` then.
    pub async fn instantiate(
        self: &Arc<Self>,
        host: H,
        label: GuestLabel,
        egress: Egress,
        cpu: GuestShare,
        ends: Instant,
    ) -> Result<ActorInstance<H>, EventFailure> {
        let polls = self.guest.polls.clone();
        let mut store = loader::store(self.pre.engine(), &self.guest, host, label, egress, cpu.clone(), ends);
        let instantiating = polls.fair(cpu, self.pre.instantiate_async(&mut store));
        let instantiated = tokio::time::timeout_at(timer(ends), instantiating).await;
        let bindings = loader::instantiated(&store, instantiated)?;
        wall::stop(&mut store);
        Ok(ActorInstance { store, bindings, component: self.clone() })
    }
}

/// A live instance of an actor: its store and bindings. After a failure
/// the instance must be dropped, never reused.
pub struct ActorInstance<H: ActorHost> {
    store: Store<GuestState<H>>,
    bindings: ActorCore,
    component: Arc<ActorComponent<H>>,
}

impl<H: ActorHost> ActorInstance<H> {
    pub fn host(&self) -> &H {
        &self.store.data().host
    }

    pub fn host_mut(&mut self) -> &mut H {
        &mut self.store.data_mut().host
    }

    /// The component this instance runs.
    pub fn component(&self) -> &Arc<ActorComponent<H>> {
        &self.component
    }

    /// Runs one event within the wall that `ends` then.
    pub async fn run(&mut self, event: &GuestEvent, ends: Instant) -> Result<EventAnswer, EventFailure> {
        wall::start(&mut self.store, ends);
        let state = self.store.data_mut();
        state.egress.trace = state.host.trace().clone();
        state.output.begin(state.egress.trace.parent.clone());
        let share = state.cpu.share().clone();
        let (store, events) = (&mut self.store, self.bindings.wasmkeep_actor_events());
        let run = async {
            wasmtime::Result::Ok(match event {
                GuestEvent::Request(request) => {
                    EventAnswer::Response(events.call_on_request(&mut *store, request).await?)
                }
                GuestEvent::SocketOpen { conn, path } => {
                    EventAnswer::Opened(events.call_on_websocket_open(&mut *store, *conn, path).await?)
                }
                GuestEvent::SocketMessage { conn, message } => {
                    events.call_on_websocket_message(&mut *store, *conn, message).await?;
                    EventAnswer::Done
                }
                GuestEvent::SocketClose { conn, code, reason } => {
                    events.call_on_websocket_close(&mut *store, *conn, *code, reason).await?;
                    EventAnswer::Done
                }
            })
        };
        let result = tokio::time::timeout_at(timer(ends), self.component.guest.polls.fair(share, run)).await;
        wall::stop(&mut self.store);
        match result {
            Ok(Ok(answer)) => {
                wall::log_output(&self.store);
                Ok(answer)
            }
            Err(_elapsed) => Err(EventFailure::Wall.logged(&self.store)),
            Ok(Err(e)) => Err(EventFailure::from_trap(&self.store, &e).logged(&self.store)),
        }
    }
}

/// An event as the guest receives it.
#[derive(Debug, Clone)]
pub enum GuestEvent {
    Request(Request),
    SocketOpen { conn: u64, path: String },
    SocketMessage { conn: u64, message: SocketMessage },
    SocketClose { conn: u64, code: u16, reason: String },
}

/// What the guest answered to an event.
#[derive(Debug, Clone)]
pub enum EventAnswer {
    /// To a request.
    Response(Response),
    /// To a socket's open: accepted, or refused with a reason.
    Opened(Result<(), String>),
    /// To a socket's message or close.
    Done,
}
