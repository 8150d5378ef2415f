//! The cluster as the node's router sees it ([`wasmkeep_actors::Remote`]):
//! owner hints (moka), the other nodes' liveness (membership), and a
//! request event carried to its owner as a signed hop over QUIC.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderName, HeaderValue, Method};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use wasmkeep_actors::{Answering, HopFailure, RelayStream, Relayed, Remote, Request, Response, SocketRequest};
use wasmkeep_core::head::{self, ERROR, is_reserved};
use wasmkeep_core::placement::Members;
use wasmkeep_core::signature::{CALL_NAMES, EMPTY_BODY_SHA256};
use wasmkeep_core::{Envelope, EventError, MailboxKey, Refusal, hop_answer};

use crate::membership::{Membership, unix_ms};
use crate::signing::{Signer, body_sha256};
use crate::tail::{self, TailHop};
use crate::transport::{CallError, Transport};
use crate::wire;
use wasmkeep_telemetry::logs::{LogFilter, TailItem};

/// Owner hints kept, at most.
const HINTS: u64 = 100_000;
/// A hint not used for this long is forgotten.
const HINT_IDLE: Duration = Duration::from_secs(600);
/// Longest a relayed open waits for the owner's answer
/// (docs/spec/tenancy.md §8: the relay of an upgrade).
const RELAY_OPEN: Duration = Duration::from_secs(30);
/// The largest answer to a relayed open that is not a `101` (an error's
/// text).
const RELAY_ANSWER_BYTES: usize = 64 * 1024;

/// This node's view of, and way to, the other nodes.
pub struct Peers {
    me: String,
    membership: Arc<Membership>,
    transport: Arc<Transport>,
    signer: Signer,
    hints: moka::sync::Cache<MailboxKey, String>,
    /// The largest answer body taken from a peer (the call body limit).
    body_limit: u64,
}

impl Peers {
    pub fn new(membership: Arc<Membership>, transport: Arc<Transport>, secret: &[u8; 32], body_limit: u64) -> Self {
        let me = membership.node().to_owned();
        Self {
            signer: Signer::new(&me, secret),
            me,
            membership,
            transport,
            hints: moka::sync::Cache::builder().max_capacity(HINTS).time_to_idle(HINT_IDLE).build(),
            body_limit,
        }
    }

    /// The hop's request: the actor's request with the envelope's head,
    /// signed at `now_ms`, as the call's head on the wire and its body.
    fn hop(&self, envelope: &Envelope, request: Request, now_ms: u64) -> Result<(Bytes, Bytes), String> {
        let method = Method::from_bytes(request.method.as_bytes()).map_err(|e| e.to_string())?;
        let path: PathAndQuery = request.path.parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
        if path.as_str().is_empty() || !path.as_str().starts_with('/') {
            return Err(format!("{:?} is not a path", request.path));
        }
        let mut headers = head::to_head(envelope, Instant::now());
        for (name, value) in &request.headers {
            if is_reserved(name) {
                continue;
            }
            let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value))
            else {
                continue;
            };
            headers.append(name, value);
        }
        let body = Bytes::from(request.body);
        self.signer
            .sign(&method, &path, &body_sha256(&body), &mut headers, &CALL_NAMES, now_ms)
            .map_err(|e| e.to_string())?;
        Ok((wire::request_head(&method, &path, &headers, body.len()), body))
    }

    /// Node `owner`'s cluster address, if it is alive (the store is read
    /// again first when it is not known alive: it may have just started).
    async fn address_of(&self, owner: &str) -> Result<(SocketAddr, u64), HopFailure> {
        let mut now = unix_ms();
        if !self.membership.is_alive(owner, now) {
            if let Err(e) = self.membership.refresh().await {
                tracing::warn!(error = %e, "the heartbeats could not be read");
            }
            now = unix_ms();
        }
        let peer = self
            .membership
            .live(owner, now)
            .ok_or_else(|| HopFailure::Unreachable(format!("node {owner} is not alive")))?;
        let addr = peer
            .cluster_addr
            .parse()
            .map_err(|_| HopFailure::Unreachable(format!("node {owner}'s cluster address {:?}", peer.cluster_addr)))?;
        Ok((addr, now))
    }

    async fn carry(&self, owner: String, envelope: Envelope, request: Request) -> Result<Response, HopFailure> {
        let (addr, now) = self.address_of(&owner).await?;
        let (head, body) = self.hop(&envelope, request, now).map_err(|e| HopFailure::Answer(bad_request(e)))?;
        let answer =
            self.transport.call(&owner, addr, head, body, self.body_limit as usize).await.map_err(|e| match e {
                CallError::TooLarge(_) => HopFailure::Answer(EventError::AnswerTooLarge(self.body_limit)),
                CallError::Transport(e) => HopFailure::Unreachable(e.to_string()),
            })?;
        host_error(&owner, &answer)?;
        let status = answer.status().as_u16();
        let mut headers: Vec<(String, Vec<u8>)> =
            answer.headers().iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect();
        head::strip_pairs(&mut headers);
        Ok(Response { status, headers, body: answer.into_body().to_vec() })
    }
}

/// The owner's host error on a hop's answer, if it carries one.
fn host_error<B>(owner: &str, answer: &http::Response<B>) -> Result<(), HopFailure> {
    let Some(error) = answer.headers().get(ERROR) else { return Ok(()) };
    let decoded = error.to_str().ok().map(hop_answer::decode);
    Err(match decoded {
        Some(Ok(EventError::Refused(Refusal::Elsewhere { owner }))) => HopFailure::Elsewhere(owner),
        Some(Ok(error)) => HopFailure::Answer(error),
        _ => {
            tracing::warn!(%owner, "a peer answered an error this node cannot read");
            HopFailure::Answer(EventError::Trapped(String::new()))
        }
    })
}

/// A request this node cannot put on the wire (a guest's method or path
/// that is not HTTP): the guest's own mistake, as a failed event.
fn bad_request(why: String) -> EventError {
    tracing::info!("a request could not be carried to its owner: {why}");
    EventError::InvalidResponse
}

impl Peers {
    /// A socket's open, relayed (docs/spec/sockets.md §15):
    /// `GET /actor/<class>/<encoded name><path>` with the client's WebSocket
    /// headers and the app. A front's hand-off carries the front's caller
    /// and the upgrade mark and is signed afresh for each send, the mark
    /// among the signed names; an outside upgrade goes unsigned, as the
    /// client's (the owner reads it as one, whatever it carries).
    async fn relay_open(
        &self,
        owner: String,
        envelope: Envelope,
        socket: SocketRequest,
    ) -> Result<Relayed, HopFailure> {
        let (addr, now) = self.address_of(&owner).await?;
        let path = format!("/actor/{}{}", head::format_target(&envelope.target), socket.path);
        let path: PathAndQuery = path.parse().map_err(|_| HopFailure::Answer(Refusal::NoSuchActor.into()))?;
        let mut headers = head::to_relay_head(&envelope);
        headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("upgrade"));
        for (name, value) in &socket.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value))
                && !is_reserved(name.as_str())
            {
                headers.append(name, value);
            }
        }
        if headers.contains_key(head::CALLER) {
            self.signer
                .sign(&Method::GET, &path, &EMPTY_BODY_SHA256, &mut headers, &[head::UPGRADE], now)
                .map_err(|e| HopFailure::Answer(bad_request(e.to_string())))?;
        }
        let mut hop = http::Request::builder()
            .method(Method::GET)
            .uri(path)
            .body(Full::new(Bytes::new()))
            .map_err(|e| HopFailure::Answer(bad_request(e.to_string())))?;
        *hop.headers_mut() = headers;
        let mut answer = tokio::time::timeout(RELAY_OPEN, self.transport.request(&owner, addr, hop))
            .await
            .map_err(|_| HopFailure::Unreachable(format!("node {owner} did not answer a relayed open")))?
            .map_err(|e| HopFailure::Unreachable(e.to_string()))?;
        host_error(&owner, &answer)?;
        let status = answer.status().as_u16();
        let mut headers: Vec<(String, Vec<u8>)> =
            answer.headers().iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect();
        head::strip_pairs(&mut headers);
        if answer.status() == http::StatusCode::SWITCHING_PROTOCOLS {
            let upgraded = hyper::upgrade::on(&mut answer)
                .await
                .map_err(|e| HopFailure::Unreachable(format!("node {owner}'s relayed socket: {e}")))?;
            let io: Box<dyn RelayStream> = Box::new(TokioIo::new(upgraded));
            return Ok(Relayed { status, headers, body: Vec::new(), io: Some(io) });
        }
        let body = Limited::new(answer.into_body(), RELAY_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| HopFailure::Unreachable(format!("node {owner}'s answer broke off: {e}")))?
            .to_bytes();
        Ok(Relayed { status, headers, body: body.to_vec(), io: None })
    }
}

impl Peers {
    /// A tail hop to another node, signed at `now_ms`.
    fn tail_request(&self, hop: &TailHop, now_ms: u64) -> Result<http::Request<Full<Bytes>>, String> {
        let path: PathAndQuery = hop.path().parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
        let mut headers = http::HeaderMap::new();
        headers.insert(head::TAIL, HeaderValue::from_static(tail::MARK));
        self.signer
            .sign(&Method::GET, &path, &EMPTY_BODY_SHA256, &mut headers, &[head::TAIL], now_ms)
            .map_err(|e| e.to_string())?;
        let mut request = http::Request::get(path).body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
        *request.headers_mut() = headers;
        Ok(request)
    }
}

/// Reads node `node`'s answer to a tail hop into `to`, each record checked
/// against `filter` (a node that sends anything else is read no more),
/// until it ends or `to`'s reader leaves.
async fn tail_from(
    transport: Arc<Transport>,
    node: String,
    addr: SocketAddr,
    request: http::Request<Full<Bytes>>,
    filter: LogFilter,
    to: tokio::sync::mpsc::Sender<TailItem>,
) {
    let asked = tokio::select! {
        answer = tokio::time::timeout(RELAY_OPEN, transport.request(&node, addr, request)) => answer,
        () = to.closed() => return,
    };
    let mut body = match asked {
        Ok(Ok(answer)) if answer.status() == http::StatusCode::OK => answer.into_body(),
        Ok(Ok(answer)) => return tracing::warn!(%node, status = %answer.status(), "a node refused a tail"),
        Ok(Err(e)) => return tracing::warn!(%node, error = %e, "a node could not be asked for a tail"),
        Err(_) => return tracing::warn!(%node, "a node did not answer a tail"),
    };
    let mut pending = bytes::BytesMut::new();
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = to.closed() => return,
        };
        let Some(Ok(frame)) = frame else { return };
        let Ok(data) = frame.into_data() else { continue };
        pending.extend_from_slice(&data);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line = pending.split_to(at + 1);
            let item = match TailItem::parse(&line[..at]) {
                Some(TailItem::Record(record)) if filter.matches(&record) => TailItem::Record(record),
                Some(missed @ TailItem::Missed(_)) => missed,
                _ => return tracing::warn!(%node, "a node's tail sent what is not a record of the app"),
            };
            if to.send(item).await.is_err() {
                return;
            }
        }
        if pending.len() > tail::LINE_BYTES_MAX {
            return tracing::warn!(%node, "a node's tail sent a line over {} bytes", tail::LINE_BYTES_MAX);
        }
    }
}

impl Remote for Peers {
    fn members(&self) -> Arc<Members> {
        self.membership.members()
    }

    fn members_knowing(&self, node: String) -> Answering<'_, Arc<Members>> {
        Box::pin(async move {
            // A node the store names may have started since the last read.
            if !self.membership.is_alive(&node, unix_ms())
                && let Err(e) = self.membership.refresh().await
            {
                tracing::warn!(error = %e, "the heartbeats could not be read");
            }
            self.membership.members()
        })
    }

    fn tenure(&self) -> u64 {
        self.membership.tenure(unix_ms())
    }

    fn is_current(&self) -> bool {
        self.membership.is_current(unix_ms())
    }

    fn hint(&self, actor: &MailboxKey) -> Option<String> {
        self.hints.get(actor)
    }

    fn note(&self, actor: &MailboxKey, owner: Option<&str>) {
        match owner {
            Some(owner) if owner != self.me => self.hints.insert(actor.clone(), owner.to_owned()),
            _ => self.hints.invalidate(actor),
        }
    }

    fn request(
        &self,
        owner: String,
        envelope: Envelope,
        request: Request,
    ) -> Answering<'_, Result<Response, HopFailure>> {
        Box::pin(self.carry(owner, envelope, request))
    }

    fn relay(
        &self,
        owner: String,
        envelope: Envelope,
        socket: SocketRequest,
    ) -> Answering<'_, Result<Relayed, HopFailure>> {
        Box::pin(self.relay_open(owner, envelope, socket))
    }

    fn tail(&self, filter: LogFilter, follow: bool, to: tokio::sync::mpsc::Sender<TailItem>) -> usize {
        let now = unix_ms();
        let hop = TailHop { filter, follow };
        let mut asked = 0;
        for peer in self.membership.alive(now).into_iter().filter(|p| p.node != self.me) {
            let Ok(addr) = peer.cluster_addr.parse() else { continue };
            let request = match self.tail_request(&hop, now) {
                Ok(request) => request,
                Err(e) => {
                    tracing::warn!(error = %e, "a tail hop could not be made");
                    return asked;
                }
            };
            let filter = hop.filter.clone();
            tokio::spawn(tail_from(self.transport.clone(), peer.node, addr, request, filter, to.clone()));
            asked += 1;
        }
        asked
    }
}
