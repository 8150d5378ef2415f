//! An app's logs: its guests' stdout and stderr lines, as records (one
//! JSON object a line), the ones the node kept and, with `follow=true`,
//! every one after as it is written, until the client leaves or the node
//! stops. A tenant sees its own apps' records only.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};
use wasmkeep_core::names::{ActorName, ClassName};
use wasmkeep_telemetry::logs::{LogFilter, LogRecord};

use super::apps::find;
use super::{ApiError, Caller, Service};
use crate::token::Scope;

/// Lines a tail holds for a slow client before it waits for it (and the
/// node's channel, if the client stays slow, tells it what it missed).
const TAIL_LINES_BUFFERED: usize = 256;

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
        let kept: Vec<u8> = logs.recent(&filter).iter().flat_map(|r| line(r)).collect();
        return Ok((content_type, kept).into_response());
    }
    let (kept, live) = logs.recent_and_follow(&filter);
    let (tx, rx) = mpsc::channel(TAIL_LINES_BUFFERED);
    tokio::spawn(follow(kept, live, filter, tx, service.stopping.clone()));
    Ok((content_type, axum::body::Body::new(Lines(rx))).into_response())
}

fn line(record: &LogRecord) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(record).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Sends the kept records, then the live ones `filter` wants, until the
/// client leaves or the node stops.
async fn follow(
    kept: Vec<Arc<LogRecord>>,
    mut live: broadcast::Receiver<Arc<LogRecord>>,
    filter: LogFilter,
    tx: mpsc::Sender<Bytes>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    for record in kept {
        if tx.send(line(&record).into()).await.is_err() {
            return;
        }
    }
    loop {
        let next = tokio::select! {
            next = live.recv() => next,
            () = tx.closed() => return,
            _ = stopping.wait_for(|s| *s) => return,
        };
        let bytes: Bytes = match next {
            Ok(record) if filter.matches(&record) => line(&record).into(),
            Ok(_) => continue,
            // The client read slower than the node's guests wrote.
            Err(broadcast::error::RecvError::Lagged(n)) => format!("{{\"missed\":{n}}}\n").into(),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if tx.send(bytes).await.is_err() {
            return;
        }
    }
}

/// A tail's body: its lines as they come.
struct Lines(mpsc::Receiver<Bytes>);

impl http_body::Body for Lines {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|line| line.map(|bytes| Ok(http_body::Frame::data(bytes))))
    }
}
