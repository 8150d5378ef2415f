//! `actors.call` (DESIGN §3.7): one actor calling another of its app.
//! The checks run in their order, each answering at once; the call then
//! goes through the output gate and the router, and waits at most until
//! the caller's call deadline.

use wasmkeep_core::deadline::actor_call_deadline;
use wasmkeep_core::{Address, Caller, Origin, RawAddress, Refusal, header_range};
use wasmkeep_runtime::{CallError, Request, Response};

use crate::event::EventError;
use crate::router;
use crate::storage_gate::EventHost;

pub(crate) async fn call(host: &mut EventHost, address: String, mut request: Request) -> Result<Response, CallError> {
    let limits = &host.node.limits;
    let callee = Address::parse(&address).map_err(|_| CallError::InvalidAddress)?;
    if request.body.len() as u64 > limits.body_bytes {
        return Err(CallError::TooLarge);
    }
    let caller = Caller::Actor(host.key.address.clone());
    if host.chain.is_reentrant(&caller, &callee) {
        return Err(CallError::Reentrant);
    }
    let now = std::time::Instant::now();
    let deadline = actor_call_deadline(
        host.started,
        limits.wall_per_event(),
        now,
        std::time::Duration::from_secs_f64(limits.call_limit_secs),
    );
    if now >= deadline {
        return Err(CallError::Timeout);
    }
    // Nothing leaves the actor before the writes made before it are durable.
    if let Err(e) = host.flush().await {
        tracing::warn!(actor = %host.key, "commit before a call failed: {e}");
        return Err(CallError::Failed("store unavailable".into()));
    }
    // The range is the host's: what the caller set of it goes.
    header_range::strip_pairs(&mut request.headers);
    let origin = Origin::Inside { chain: host.chain.extended_by(&caller), caller };
    let delivery = router::deliver(&host.node, host.key.app, RawAddress::from(&callee), origin, request);
    match tokio::time::timeout_at(deadline.into(), delivery).await {
        Err(_elapsed) => Err(CallError::Timeout),
        Ok(Ok(mut response)) => {
            header_range::strip_pairs(&mut response.headers);
            Ok(response)
        }
        Ok(Err(e)) => answer(e),
    }
}

/// A callee's failure, as its caller sees it: what the callee itself did
/// wrong, or its queue being full, is `failed`; a refusal of admission is
/// the answer HTTP would give (the capacity `503` included).
fn answer(e: EventError) -> Result<Response, CallError> {
    let reason = match &e {
        EventError::Refused(Refusal::Overloaded) => "callee overloaded",
        EventError::Trapped => "the callee failed",
        EventError::Wall => "the callee's event ran past its wall",
        EventError::InvalidResponse => "the callee answered an invalid response",
        EventError::ShuttingDown => "the node is shutting down",
        EventError::Refused(_) => {
            let a = e.answer();
            let mut headers = vec![("content-type".to_owned(), b"text/plain; charset=utf-8".to_vec())];
            if let Some(secs) = a.retry_after {
                headers.push(("retry-after".to_owned(), secs.to_string().into_bytes()));
            }
            return Ok(Response { status: a.status, headers, body: a.text.into_bytes() });
        }
    };
    Err(CallError::Failed(reason.into()))
}
