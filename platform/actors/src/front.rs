//! Fronts (docs/spec/actors-and-admission.md §8): one fresh instance per
//! request, in a slot, under the request's wall; its calls go out as the
//! inside caller `<tenant>/_front/main`, never in a chain, within the
//! front's bounds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Body;
use wasmkeep_core::deadline::front_call_deadline;
use wasmkeep_core::{AppRef, Caller, Chain, FrontError, Limits, MailboxKey, TraceContext};
use wasmkeep_runtime::{CallError, EventFailure, FrontBody, FrontRun, GuestHost, GuestLabel, Request, Response};
use wasmkeep_scheduler::{FrontBusy, FrontWait, InstanceLease, ShareTicket};

use crate::calls::{self, CallSide};
use crate::{Node, NodeInner};

/// The host of one front request: the app's values, the request's start
/// (its call deadline counts from it) and its slot, held as long as the
/// instance lives.
pub struct FrontHost {
    node: Arc<NodeInner>,
    app: Arc<AppRef>,
    values: Arc<BTreeMap<String, String>>,
    limits: Arc<Limits>,
    started: Instant,
    chain: Chain,
    trace: TraceContext,
    _slot: (InstanceLease, Option<ShareTicket>),
    /// What the port holds for as long as the slot (the client's share).
    _with_slot: Box<dyn std::any::Any + Send>,
}

impl NodeInner {
    /// A front slot for a request of `app`, with its place in its tenant's
    /// count of slots. When none is free, a tenant holding its weighted
    /// share of the slots or more is refused at once instead of queueing
    /// ahead of the others (ADR 0014).
    async fn front_slot(
        &self,
        app: &AppRef,
        wait: std::time::Duration,
    ) -> Result<(InstanceLease, Option<ShareTicket>), FrontError> {
        let tenant = self.tenant(app);
        let ticket = tenant.as_ref().and_then(|t| t.front_slots.take());
        if let Some(slot) = self.front_slots.try_lease() {
            return Ok((slot, ticket));
        }
        if let Some(tenant) = &tenant {
            let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
            let share = apps.share_of(tenant, self.front_slots.size(), |t| t.front_slots.held());
            // Its ticket for this request is held already.
            if tenant.front_slots.held().saturating_sub(1) >= share {
                return Err(FrontError::Busy);
            }
        }
        let slot = self.front_slots.lease(wait).await.ok_or(FrontError::Busy)?;
        Ok((slot, ticket))
    }
}

impl Node {
    /// Serves one request with the app's front: waits for a slot (at most
    /// the slot wait), then runs a fresh instance under the request's wall;
    /// `with_slot` is held as long as the slot.
    /// Answers the front's answer as soon as its head is set, with the
    /// instance still running (writing the body) to stop if need be.
    pub async fn serve_front<B>(
        &self,
        app: &Arc<AppRef>,
        trace: TraceContext,
        request: http::Request<B>,
        with_slot: Box<dyn std::any::Any + Send>,
    ) -> Result<(http::Response<FrontBody>, FrontRun), FrontError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let started = Instant::now();
        let node = &self.0;
        let entry = node.app(app.id).ok_or(FrontError::NoSuchApp)?;
        let version = entry.active().ok_or(FrontError::NoFront)?;
        let front = version.front.clone().ok_or(FrontError::NoFront)?;
        let values = entry.values();
        if let Some(missing) = version.missing_value(&values) {
            return Err(FrontError::ValueMissing(missing.to_owned()));
        }
        let limits = node.limits_for(app);
        let slot = node.front_slot(app, limits.front_slot_wait()).await?;
        let ends = started + limits.front_wall();
        let host = FrontHost {
            node: node.clone(),
            app: app.clone(),
            values,
            limits,
            started,
            chain: Chain::new(),
            trace,
            _slot: slot,
            _with_slot: with_slot,
        };
        let label = GuestLabel::front(&entry.reference);
        // The runtime logs a failure, one line, where it happens.
        let share = self.0.guest_share(&entry.reference);
        let until = Instant::now() + host.limits.front_slot_wait();
        node.memory_room(&share, front.initial_memory(), until).await.map_err(|_| FrontError::Busy)?;
        // Its time until its answer's head is counted (the body it writes
        // after runs on, uncounted).
        let handled = front.handle(host, label, entry.egress(), share, request, ends);
        entry.usage.front(Some(&entry.metrics), handled).await.map_err(|f| match f {
            EventFailure::Wall => FrontError::Wall,
            EventFailure::Trap(_) => FrontError::Trapped,
            EventFailure::NoMemory => FrontError::Busy,
        })
    }
}

impl GuestHost for FrontHost {
    fn trace(&self) -> &TraceContext {
        &self.trace
    }

    fn values(&self) -> &BTreeMap<String, String> {
        &self.values
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

    fn app(&self) -> &Arc<AppRef> {
        &self.app
    }

    fn caller(&self) -> Caller {
        Caller::Front
    }

    fn chain(&self) -> &Chain {
        &self.chain
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn trace(&self) -> &TraceContext {
        &self.trace
    }

    fn deadline(&self, now: Instant) -> Instant {
        front_call_deadline(self.started, self.limits.front_wall(), now, self.limits.call_limit())
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
