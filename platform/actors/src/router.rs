//! Where an actor lives, answered in one place (DESIGN §8, step 3). HTTP
//! events and calls alike are delivered here. One node: every actor is
//! here, in its mailbox; the cluster adds owners elsewhere behind this
//! function without any caller changing.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::time::Instant;
use wasmkeep_core::{AppId, Origin, RawAddress};
use wasmkeep_runtime::{Request, Response};

use crate::NodeInner;
use crate::event::{Event, EventError, EventKind};
use crate::mailbox::MailboxKey;

/// Delivers a request event to the actor at `target` and waits for its
/// answer.
pub(crate) async fn deliver(
    node: &Arc<NodeInner>,
    app: AppId,
    target: RawAddress,
    origin: Origin,
    request: Request,
) -> Result<Response, EventError> {
    let (reply, answer) = oneshot::channel();
    post(node, app, target, origin, EventKind::Request { request, reply })?;
    answer.await.unwrap_or(Err(EventError::ShuttingDown))
}

/// Posts any event to the actor at `target`; its answer, if it has one,
/// goes where the event says.
pub(crate) fn post(
    node: &Arc<NodeInner>,
    app: AppId,
    target: RawAddress,
    origin: Origin,
    kind: EventKind,
) -> Result<(), wasmkeep_core::Refusal> {
    let event = Event { origin, kind, arrived: Instant::now() };
    node.mailboxes.post(node, MailboxKey { app, address: target }, event)
}
