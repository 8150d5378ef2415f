//! An app's logs: its guests' stdout and stderr lines, as records (one
//! JSON object a line), the ones the nodes kept and, with `follow=true`,
//! every one after as it is written, until the client leaves or the node
//! stops. In a cluster, the node asked asks every other live node for its
//! records of the app (a signed hop each), so a tail shows the whole app
//! whichever node it reached. A tenant sees its own apps' records only.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use wasmkeep_core::names::{ActorName, ClassName};
use wasmkeep_telemetry::logs::{LogFilter, TAIL_LINES_BUFFERED, TailBody, TailItem};

use super::apps::find;
use super::{ApiError, Caller, Service};
use crate::token::Scope;

/// How long a tail without `follow` waits for the other nodes' records.
const OTHERS_WAIT: Duration = Duration::from_secs(5);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailQuery {
    #[serde(default)]
    follow: bool,
    class: Option<String>,
    name: Option<String>,
}

/// `GET /v1/apps/{app}/logs` (read): `application/x-ndjson`.
pub async fn tail(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(app): Path<String>,
    Query(query): Query<TailQuery>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let app = find(&service, tenant, &app).await?;
    if let Some(class) = &query.class {
        ClassName::parse(class).map_err(|e| ApiError::bad_request(format!("class: {e}")))?;
    }
    if let Some(name) = &query.name {
        if query.class.is_none() {
            return Err(ApiError::bad_request("name: give the class too"));
        }
        ActorName::parse(name).map_err(|e| ApiError::bad_request(format!("name: {e}")))?;
    }
    let filter = LogFilter {
        tenant: app.tenant.as_str().to_owned(),
        app: app.name.as_str().to_owned(),
        class: query.class,
        name: query.name,
    };
    let logs = service.node.guest_logs();
    let content_type = [(http::header::CONTENT_TYPE, "application/x-ndjson")];
    if !query.follow {
        // This node's kept records and every other node's, in time order.
        let (tx, mut rx) = mpsc::channel(TAIL_LINES_BUFFERED);
        let asked = service.node.tail_others(filter.clone(), false, tx);
        let mut records = logs.recent(&filter);
        if asked > 0 {
            // A node slow to answer is left out rather than waited for.
            let _ = tokio::time::timeout(OTHERS_WAIT, async {
                while let Some(item) = rx.recv().await {
                    if let TailItem::Record(record) = item {
                        records.push(record);
                    }
                }
            })
            .await;
        }
        records.sort_by_key(|r| r.time_ms);
        let kept: Vec<u8> = records.into_iter().flat_map(|r| TailItem::Record(r).line()).collect();
        return Ok((content_type, kept).into_response());
    }
    let (tx, rx) = mpsc::channel(TAIL_LINES_BUFFERED);
    // This node's tail first: past the node's bounds on tails, nothing
    // else is asked of the others.
    let stop = stopped(service.stopping.clone());
    let local = logs.tail(filter.clone(), true, tx.clone(), stop).map_err(|e| ApiError::busy(e.to_string()))?;
    // The other nodes' records come through a forwarder of their own, so
    // that the tail ends when the client leaves or this node stops, however
    // the others are.
    let (others_tx, others) = mpsc::channel(TAIL_LINES_BUFFERED);
    if service.node.tail_others(filter, true, others_tx) > 0 {
        tokio::spawn(forward(others, tx, service.stopping.clone()));
    }
    tokio::spawn(local);
    Ok((content_type, axum::body::Body::new(TailBody(rx))).into_response())
}

/// Completes when the node starts to stop.
async fn stopped(mut stopping: watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

/// Hands the other nodes' items on to the tail, until the client leaves
/// or this node stops.
async fn forward(mut others: mpsc::Receiver<TailItem>, tx: mpsc::Sender<TailItem>, stopping: watch::Receiver<bool>) {
    let mut stop = std::pin::pin!(stopped(stopping));
    loop {
        let item = tokio::select! {
            item = others.recv() => item,
            () = tx.closed() => return,
            () = &mut stop => return,
        };
        let Some(item) = item else { return };
        if tx.send(item).await.is_err() {
            return;
        }
    }
}
