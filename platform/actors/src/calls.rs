//! `actors.call` (docs/spec/calls.md §1–§6) and `calls.call-many`
//! (docs/spec/calls.md §7–§12), for actors and fronts alike: the checks
//! (`core::call_check`) run in their order, each answering at once; a call
//! then passes the caller's gate and bounds, goes through the router with
//! its envelope, and waits at most until the caller's call deadline. What
//! differs between an actor and a front is its [`CallSide`].

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;
use tracing::field::Empty;
use wasmkeep_core::budget::{ResponseBudget, content_length, is_bodyless};
use wasmkeep_core::call_check::{CallCheck, CallRefusal};
use wasmkeep_core::metric_labels::FrontCallOutcome;
use wasmkeep_core::{
    Address, AppRef, AsCall, Caller, Chain, Envelope, EventError, Failure, Limits, MailboxKey, Origin, RawAddress,
    TraceContext, head,
};
use wasmkeep_runtime::{CallError, Request, Response};
use wasmkeep_scheduler::{FrontBusy, FrontWait};
use wasmkeep_telemetry::traces::{self, TARGET};

use crate::NodeInner;

/// A front call past the per-actor bound.
pub(crate) const FRONT_BUSY_ACTOR: &str = "front busy: too many front calls waiting on this actor";
/// A front call past the per-node bound.
pub(crate) const FRONT_BUSY_NODE: &str = "front busy: too many front calls waiting on this node";

/// Who makes a call: an actor's event or a front's request.
pub(crate) trait CallSide: Send {
    fn node(&self) -> &Arc<NodeInner>;
    fn app(&self) -> &Arc<AppRef>;
    fn caller(&self) -> Caller;
    /// The actors waiting on the caller (a front is never in a chain).
    fn chain(&self) -> &Chain;
    /// The limits the caller runs under.
    fn limits(&self) -> &Limits;
    /// The trace the caller is part of; its calls carry it on.
    fn trace(&self) -> &TraceContext;
    /// The caller's call deadline for a call starting at `now`.
    fn deadline(&self, now: Instant) -> Instant;
    /// The output gate: what must be durable before a call leaves.
    fn gate(&mut self) -> impl Future<Output = Result<(), CallError>> + Send;
    /// The caller's bound on waiting calls: a front's per-actor and
    /// per-node bounds; none for an actor.
    fn hold(&self, _callee: &MailboxKey) -> Result<Option<FrontWait<MailboxKey>>, FrontBusy> {
        Ok(None)
    }
    /// Counts one call's outcome (a front's metrics).
    fn count(&self, _outcome: &Result<Response, CallError>) {}
}

fn refused(r: CallRefusal) -> CallError {
    match r {
        CallRefusal::InvalidAddress => CallError::InvalidAddress,
        CallRefusal::TooLarge => CallError::TooLarge,
        CallRefusal::Reentrant => CallError::Reentrant,
        CallRefusal::Timeout => CallError::Timeout,
    }
}

pub(crate) async fn call<S: CallSide>(side: &mut S, address: String, request: Request) -> Result<Response, CallError> {
    let result = checked_call(side, address, request).await;
    side.count(&result);
    result
}

async fn checked_call<S: CallSide>(side: &mut S, address: String, request: Request) -> Result<Response, CallError> {
    let now = Instant::now();
    let caller = side.caller();
    let deadline = side.deadline(now);
    let check = CallCheck { caller: &caller, chain: side.chain(), body_limit: side.limits().body_bytes, deadline };
    let callee = check.call(&address, request.body.len() as u64, now).map_err(refused)?;
    side.gate().await?;
    let delivery = Delivery::new(side, callee, request, deadline, side.trace());
    let wait = side.hold(&delivery.envelope.mailbox()).map_err(busy)?;
    delivery.send(wait).await
}

/// `calls.call-many` (docs/spec/calls.md §7–§12): every entry is a call
/// checked as above, all started at once under one deadline, answered in
/// input order.
pub(crate) async fn call_many<S: CallSide>(
    side: &mut S,
    calls: Vec<(String, Request)>,
) -> Vec<Result<Response, CallError>> {
    let limits = side.limits();
    let n = calls.len();
    // Whole-batch refusals: nothing is started, and a front counts the
    // batch once, however long its list.
    let refusal = if n > limits.call_many_entries as usize {
        Some(CallError::Failed(format!("too many calls: at most {} in one call-many", limits.call_many_entries)))
    } else if calls.iter().map(|(_, r)| r.body.len() as u64).sum::<u64>() > limits.body_bytes {
        Some(CallError::TooLarge)
    } else {
        None
    };
    if let Some(e) = refusal {
        side.count(&Err(e.clone()));
        return (0..n).map(|_| Err(e.clone())).collect();
    }

    let now = Instant::now();
    let deadline = side.deadline(now);
    let caller = side.caller();
    // One span for the batch, its entries' spans its children.
    let batch = traces::child(side.trace(), || {
        tracing::info_span!(
            target: TARGET,
            parent: None,
            "actors.call-many",
            otel.kind = "client",
            wasmkeep.tenant = side.app().tenant.as_str(),
            wasmkeep.app = side.app().name.as_str(),
            wasmkeep.calls = n,
        )
    });
    let entries_parent = traces::carried(&batch, side.trace());
    let mut results: Vec<Option<Result<Response, CallError>>> = (0..n).map(|_| None).collect();
    let mut checked = Vec::new();
    {
        let check = CallCheck { caller: &caller, chain: side.chain(), body_limit: limits.body_bytes, deadline };
        for (i, (address, request)) in calls.into_iter().enumerate() {
            match check.entry(&address, Instant::now()) {
                Ok(callee) => checked.push((i, callee, request)),
                Err(r) => results[i] = Some(Err(refused(r))),
            }
        }
    }
    if !checked.is_empty()
        && let Err(e) = side.gate().await
    {
        for (i, _, _) in checked.drain(..) {
            results[i] = Some(Err(e.clone()));
        }
    }
    // Siblings run concurrently; none is in another's chain. Each holds
    // its place under the caller's bounds while it waits.
    let mut running = tokio::task::JoinSet::new();
    for (i, callee, request) in checked {
        let delivery = Delivery::new(side, callee, request, deadline, &entries_parent);
        let method = delivery.request.method.clone();
        match side.hold(&delivery.envelope.mailbox()) {
            Ok(wait) => {
                running.spawn(async move { (i, method, delivery.send(wait).await) });
            }
            Err(b) => results[i] = Some(Err(busy(b))),
        }
    }
    // Answers count against the batch's response budget as they arrive
    // (here, whole: a local callee's answer is one piece).
    let mut budget = ResponseBudget::new(side.limits().body_bytes);
    while let Some(joined) = running.join_next().await {
        let Ok((i, method, result)) = joined else { continue };
        results[i] = Some(match result {
            Ok(r) => {
                let bodyless = is_bodyless(&method, r.status);
                if budget.take_whole(content_length(&r.headers), bodyless, r.body.len() as u64) {
                    Ok(r)
                } else {
                    Err(CallError::TooLarge)
                }
            }
            Err(e) => Err(e),
        });
    }
    let results: Vec<_> =
        results.into_iter().map(|r| r.unwrap_or(Err(CallError::Failed("the call did not complete".into())))).collect();
    for r in &results {
        side.count(r);
    }
    drop(batch);
    results
}

fn busy(b: FrontBusy) -> CallError {
    CallError::Failed(match b {
        FrontBusy::Actor => FRONT_BUSY_ACTOR.into(),
        FrontBusy::Node => FRONT_BUSY_NODE.into(),
    })
}

/// One call on its way: its envelope and request, owned, so a batch can
/// run its entries as tasks.
struct Delivery {
    node: Arc<NodeInner>,
    envelope: Envelope,
    request: Request,
    /// The call's span (kind client), from its start to its answer.
    span: tracing::Span,
}

impl Delivery {
    /// A call to `callee`, its span a child of `parent`.
    fn new<S: CallSide>(
        side: &S,
        callee: Address,
        mut request: Request,
        deadline: Instant,
        parent: &TraceContext,
    ) -> Self {
        // The range is the host's: what the caller set of it goes.
        head::strip_pairs(&mut request.headers);
        let caller = side.caller();
        let span = traces::child(parent, || {
            tracing::info_span!(
                target: TARGET,
                parent: None,
                "actors.call",
                otel.kind = "client",
                wasmkeep.tenant = side.app().tenant.as_str(),
                wasmkeep.app = side.app().name.as_str(),
                wasmkeep.actor.class = callee.class.as_str(),
                wasmkeep.actor.name = %callee.name,
                http.request.method = request.method.as_str(),
                http.response.status_code = Empty,
            )
        });
        let envelope = Envelope {
            app: side.app().clone(),
            target: RawAddress::from(&callee),
            origin: Origin::Inside { chain: side.chain().extended_by(&caller), caller },
            deadline,
            trace: traces::carried(&span, parent),
        };
        Self { node: side.node().clone(), envelope, request, span }
    }

    /// Sends the call and waits for its answer until its deadline; `_wait`,
    /// the caller's place under its bounds, ends with it.
    async fn send(self, _wait: Option<FrontWait<MailboxKey>>) -> Result<Response, CallError> {
        let span = self.span;
        let answer = Self::carry(self.node, self.envelope, self.request).instrument(span.clone()).await;
        match &answer {
            Ok(response) => {
                span.record("http.response.status_code", response.status);
            }
            Err(e) => traces::failed(&span, outcome(&Err(e.clone())).as_str()),
        }
        answer
    }

    async fn carry(node: Arc<NodeInner>, envelope: Envelope, request: Request) -> Result<Response, CallError> {
        let deadline = envelope.deadline;
        let delivery = node.router.request(wasmkeep_core::placement::Entry::Request, envelope, request);
        match tokio::time::timeout_at(deadline.into(), delivery).await {
            Err(_elapsed) => Err(CallError::Timeout),
            Ok(Ok(mut response)) => {
                head::strip_pairs(&mut response.headers);
                Ok(response)
            }
            Ok(Err(e)) => answer(e),
        }
    }
}

/// A callee's failure as its caller sees it: `core::refusal` decides; this
/// renders it as a call's result.
fn answer(e: EventError) -> Result<Response, CallError> {
    let a = Failure::from(e).answer();
    match a.as_call {
        AsCall::Respond => Ok(Response {
            status: a.status,
            headers: a.headers().into_iter().map(|(n, v)| (n.to_owned(), v.into_bytes())).collect(),
            body: a.text.into_bytes(),
        }),
        AsCall::Failed(reason) => Err(CallError::Failed(reason.into())),
        AsCall::TooLarge => Err(CallError::TooLarge),
        AsCall::Timeout => Err(CallError::Timeout),
    }
}

/// How a front's call is counted in `wasmkeep_front_calls_total`.
pub(crate) fn outcome(result: &Result<Response, CallError>) -> FrontCallOutcome {
    match result {
        Ok(_) => FrontCallOutcome::Ok,
        Err(CallError::InvalidAddress) => FrontCallOutcome::InvalidAddress,
        Err(CallError::TooLarge) => FrontCallOutcome::TooLarge,
        Err(CallError::Timeout) => FrontCallOutcome::Timeout,
        Err(CallError::Reentrant) => FrontCallOutcome::Reentrant,
        Err(CallError::Failed(reason)) if reason == FRONT_BUSY_ACTOR || reason == FRONT_BUSY_NODE => {
            FrontCallOutcome::Busy
        }
        Err(CallError::Failed(_)) => FrontCallOutcome::Failed,
    }
}
