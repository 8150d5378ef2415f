//! Fronts (DESIGN §3.5): one fresh instance per request, in a slot, under
//! the request's wall; its calls go out as the inside caller
//! `<tenant>/_front/main`, never in a chain, within the front's bounds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Body;
use wasmkeep_core::deadline::front_call_deadline;
use wasmkeep_core::{AppId, Caller, Chain};
use wasmkeep_runtime::{CallError, EventFailure, FrontBody, FrontRun, GuestHost, GuestLabel, Request, Response};
use wasmkeep_scheduler::{FrontBusy, FrontWait, InstanceLease};

use crate::calls::{self, CallSide};
use crate::mailbox::MailboxKey;
use crate::{Node, NodeInner};

/// Why a front request got no answer of the front's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    #[error("no such app")]
    NoSuchApp,
    /// The app has no front: only `/actor/` paths reach it.
    #[error("this app has no front; actors are at /actor/<class>/<name>/")]
    NoFront,
    /// No slot became free within the slot wait.
    #[error("too many requests for the fronts of this node; retry shortly")]
    Busy,
    /// The front trapped or answered an error.
    #[error("the front failed")]
    Trapped,
    /// The front ran past its request's wall without an answer.
    #[error("the front did not answer in time")]
    Wall,
}

/// The host of one front request: the app's values, the request's start
/// (its call deadline counts from it) and its slot, held as long as the
/// instance lives.
pub struct FrontHost {
    node: Arc<NodeInner>,
    app: AppId,
    values: Arc<BTreeMap<String, String>>,
    started: Instant,
    chain: Chain,
    _slot: InstanceLease,
    /// What the port holds for as long as the slot (the client's share).
    _with_slot: Box<dyn std::any::Any + Send>,
}

impl Node {
    /// Serves one request with the app's front: waits for a slot (at most
    /// the slot wait), then runs a fresh instance under the request's wall;
    /// `with_slot` is held as long as the slot.
    /// Answers the front's answer as soon as its head is set, with the
    /// instance still running (writing the body) to stop if need be.
    pub async fn serve_front<B>(
        &self,
        app: AppId,
        request: http::Request<B>,
        with_slot: Box<dyn std::any::Any + Send>,
    ) -> Result<(http::Response<FrontBody>, FrontRun), FrontError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let started = Instant::now();
        let node = &self.0;
        let entry = node.app(app).ok_or(FrontError::NoSuchApp)?;
        let front = entry.active().and_then(|v| v.front.clone()).ok_or(FrontError::NoFront)?;
        let slot = node.front_slots.lease(node.limits.front_slot_wait()).await.ok_or(FrontError::Busy)?;
        let host = FrontHost {
            node: node.clone(),
            app,
            values: entry.values(),
            started,
            chain: Chain::new(),
            _slot: slot,
            _with_slot: with_slot,
        };
        let label = GuestLabel { app: entry.label.clone(), guest: "_front".into() };
        // The runtime logs a failure, one line, where it happens.
        front.handle(host, label, request, started + node.limits.front_wall()).await.map_err(|f| match f {
            EventFailure::Wall => FrontError::Wall,
            EventFailure::Trap(_) => FrontError::Trapped,
        })
    }
}

impl GuestHost for FrontHost {
    fn value(&self, name: &str) -> Option<String> {
        self.values.get(name).cloned()
    }

    async fn call(&mut self, address: String, request: Request) -> Result<Response, CallError> {
        calls::call(self, address, request).await
    }

    async fn call_many(&mut self, calls: Vec<(String, Request)>) -> Vec<Result<Response, CallError>> {
        calls::call_many(self, calls).await
    }
}

/// A front calls as `_front/main`, with an empty chain, under its
/// request's call deadline and the node's front bounds; nothing to gate.
impl CallSide for FrontHost {
    fn node(&self) -> &Arc<NodeInner> {
        &self.node
    }

    fn app(&self) -> AppId {
        self.app
    }

    fn caller(&self) -> Caller {
        Caller::Front
    }

    fn chain(&self) -> &Chain {
        &self.chain
    }

    fn deadline(&self, now: Instant) -> Instant {
        let limits = &self.node.limits;
        front_call_deadline(self.started, limits.front_wall(), now, limits.call_limit())
    }

    async fn gate(&mut self) -> Result<(), CallError> {
        Ok(())
    }

    fn hold(&self, callee: &MailboxKey) -> Result<Option<FrontWait<MailboxKey>>, FrontBusy> {
        self.node.front_waits.hold(callee).map(Some)
    }

    fn count(&self, outcome: &Result<Response, CallError>) {
        self.node.metrics.front_calls.inc(calls::outcome(outcome));
    }
}
