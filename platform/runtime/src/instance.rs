//! A loaded actor component and its live instances.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::InstancePre;
use wasmtime::{Store, UpdateDeadline};

use crate::DeployError;
use crate::bindings::{ActorCore, ActorCorePre};
use crate::host::{ActorHost, ActorState, Request, Response};

/// A component ready to instantiate: one per class of a version.
pub struct ActorComponent<H: ActorHost> {
    pre: ActorCorePre<ActorState<H>>,
    hash: String,
    memory_bytes: u64,
}

impl<H: ActorHost> ActorComponent<H> {
    pub(crate) fn new(pre: InstancePre<ActorState<H>>, hash: String, memory_bytes: u64) -> Result<Self, DeployError> {
        let pre = ActorCorePre::new(pre).map_err(|e| {
            DeployError::MissingExport(format!(
                "the `wasmkeep:actor/events@0.2.0` interface ({})",
                crate::one_line(&e.to_string())
            ))
        })?;
        Ok(Self { pre, hash, memory_bytes })
    }

    /// The SHA-256 of the component's bytes.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// A new instance from the pool, holding `host`. Instantiation runs
    /// the component's start code, within the wall that `ends` then.
    pub async fn instantiate(self: &Arc<Self>, host: H, ends: Instant) -> Result<ActorInstance<H>, EventFailure> {
        let mut store = Store::new(self.pre.engine(), ActorState::new(host, self.memory_bytes));
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut ctx| {
            let state = ctx.data_mut();
            match state.wall_ends {
                Some(end) if Instant::now() >= end => {
                    state.wall_exceeded = true;
                    Err(wasmtime::format_err!("the event's wall ended"))
                }
                // Yield at each tick: a long computation shares the thread.
                _ => Ok(UpdateDeadline::Yield(1)),
            }
        });
        store.data_mut().wall_ends = Some(ends);
        let bindings = match tokio::time::timeout_at(timer(ends), self.pre.instantiate_async(&mut store)).await {
            Err(_elapsed) => return Err(EventFailure::Wall),
            Ok(Err(_)) if store.data().wall_exceeded => return Err(EventFailure::Wall),
            Ok(Err(e)) => return Err(EventFailure::Trap(format!("{e:?}"))),
            Ok(Ok(bindings)) => bindings,
        };
        store.data_mut().wall_ends = None;
        Ok(ActorInstance { store, bindings, component: self.clone() })
    }
}

/// The timer for a guest blocked in a host call past `ends`; a computing
/// guest is cut by the epoch check first.
fn timer(ends: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(ends + crate::TICK * 2)
}

/// Why an event produced no answer. The text is for the node's log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventFailure {
    /// The guest trapped (a panic, a memory bomb, a host refusal).
    Trap(String),
    /// The event ran past its wall and was cut.
    Wall,
}

/// A live instance of an actor: its store and bindings. After a failure
/// the instance must be dropped, never reused.
pub struct ActorInstance<H: ActorHost> {
    store: Store<ActorState<H>>,
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

    /// Runs `on-request` within the wall that `ends` then.
    pub async fn on_request(&mut self, request: &Request, ends: Instant) -> Result<Response, EventFailure> {
        let data = self.store.data_mut();
        data.wall_ends = Some(ends);
        data.wall_exceeded = false;
        self.store.set_epoch_deadline(1);
        let events = self.bindings.wasmkeep_actor_events();
        // The epoch check cuts a computing guest; the timer cuts one
        // waiting in a host call. Both end in the same failure.
        let run = events.call_on_request(&mut self.store, request);
        let result = tokio::time::timeout_at(timer(ends), run).await;
        self.store.data_mut().wall_ends = None;
        match result {
            Err(_elapsed) => Err(EventFailure::Wall),
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) if self.store.data().wall_exceeded => Err(EventFailure::Wall),
            Ok(Err(e)) => Err(EventFailure::Trap(format!("{e:?}"))),
        }
    }
}
