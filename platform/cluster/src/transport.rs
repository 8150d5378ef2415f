//! The transport between nodes: QUIC (quinn, TLS 1.3 with mutual
//! authentication under the cluster CA), one bidirectional stream per call
//! or relay, carrying HTTP/1.1: the request head with the hop's
//! `x-wasmkeep-` head and signature, and the body. A call
//! ([`Transport::call`]) writes its request whole and finishes its side,
//! and the peer ends the stream with its answer (`wire`); a relay
//! ([`Transport::request`]) streams both ways and its upgrade continues on
//! the same stream. A connection per peer is kept and reused; a closed one
//! is dialled again on the next hop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use hyper::body::{Body, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use wasmkeep_core::handoff::is_websocket_upgrade;

use crate::cluster_dir::ClusterDir;
use crate::{tls, wire};

/// Streams one peer may have open to this node at once: every call and
/// relay of a busy node's fronts and actors is one.
pub const STREAMS_PER_PEER: u32 = 4096;
/// A connection with nothing on it is closed after this long.
const IDLE: Duration = Duration::from_secs(30);
/// Keep-alives keep a quiet connection to a live peer from idling out.
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Longest a dial may take before the peer counts as unreachable.
const DIAL: Duration = Duration::from_secs(5);

/// Why a hop could not be carried.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("cannot reach node {node} at {addr}: {reason}")]
    Unreachable { node: String, addr: SocketAddr, reason: String },
    #[error("the hop to node {node} failed: {reason}")]
    Failed { node: String, reason: String },
}

/// Why a call was not answered.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("the answer's body is over {0} bytes")]
    TooLarge(usize),
}

/// What answers the hops that reach this node.
pub trait Hops: Clone + Send + Sync + 'static {
    /// The body of a relay's answer.
    type Body: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static;
    /// The largest call body taken; a larger one is refused unread.
    fn body_limit(&self) -> usize;
    /// A call: its request whole, answered whole.
    fn call(&self, request: Request<Bytes>) -> impl Future<Output = Response<Bytes>> + Send;
    /// A relay's open (a WebSocket upgrade): after a `101` the stream is
    /// the socket's.
    fn open(&self, request: Request<Incoming>) -> impl Future<Output = Response<Self::Body>> + Send;
    /// A tail (`x-wasmkeep-tail`): its answer's body streams for as long
    /// as the tail goes on.
    fn tail(&self, request: Request<Incoming>) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// One stream a peer opened: a call, read whole and answered whole; or a
/// relay's open or a tail, which hyper serves (its head, already read,
/// given back to it first).
async fn serve_stream<H: Hops>(hops: H, mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    let mut read = BytesMut::new();
    let head = loop {
        match wire::read_request(&read) {
            Ok(Some(head)) => break head,
            Ok(None) => {}
            Err(e) => return refuse(send, StatusCode::BAD_REQUEST, &e.to_string()).await,
        }
        match recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => read.extend_from_slice(&chunk.bytes),
            Ok(None) | Err(_) => return,
        }
    };
    let upgrade = is_websocket_upgrade(&head.parts.method, &head.parts.headers);
    if upgrade || head.parts.headers.contains_key(wasmkeep_core::head::TAIL) {
        let io = TokioIo::new(Prefixed { first: read.freeze(), rest: tokio::io::join(recv, send) });
        let open = hyper::service::service_fn(move |request| {
            let hops = hops.clone();
            async move {
                let answer = if upgrade { hops.open(request).await } else { hops.tail(request).await };
                Ok::<_, std::convert::Infallible>(answer)
            }
        });
        // Not `keep_alive(false)`: it would answer `connection: close` on
        // the `101` itself. The relaying node drops the stream after any
        // other answer.
        let served = hyper::server::conn::http1::Builder::new()
            .auto_date_header(false)
            .serve_connection(io, open)
            .with_upgrades()
            .await;
        if let Err(e) = served {
            tracing::debug!(error = %e, "a relay's stream ended early");
        }
        return;
    }
    if head.body_len > hops.body_limit() {
        let _ = recv.stop(0u32.into());
        return refuse(send, StatusCode::PAYLOAD_TOO_LARGE, "the hop's body is over the limit").await;
    }
    let whole = head.head_len + head.body_len;
    while read.len() < whole {
        match recv.read_chunk(whole - read.len(), true).await {
            Ok(Some(chunk)) => read.extend_from_slice(&chunk.bytes),
            Ok(None) | Err(_) => return,
        }
    }
    let body = read.freeze().slice(head.head_len..);
    let answer = hops.call(Request::from_parts(head.parts, body)).await;
    // The sender finished its side with the request: its end is here by
    // now, and taking it spares the peer a STOP_SENDING.
    let _ = std::pin::pin!(recv.read_chunk(1, true)).poll(&mut Context::from_waker(Waker::noop()));
    let (parts, body) = answer.into_parts();
    let head = wire::answer_head(parts.status, &parts.headers, body.len());
    if send.write_all_chunks(&mut [head, body]).await.is_ok() {
        let _ = send.finish();
    }
}

/// A call the stream could not carry, answered in one line.
async fn refuse(mut send: quinn::SendStream, status: StatusCode, why: &str) {
    let body = Bytes::from(format!("{why}\n"));
    let head = wire::answer_head(status, &http::HeaderMap::new(), body.len());
    if send.write_all_chunks(&mut [head, body]).await.is_ok() {
        let _ = send.finish();
    }
}

/// A stream whose first bytes were read already: they are read again
/// first.
struct Prefixed<T> {
    first: Bytes,
    rest: T,
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if self.first.is_empty() {
            return Pin::new(&mut self.rest).poll_read(cx, buf);
        }
        let n = self.first.len().min(buf.remaining());
        buf.put_slice(&self.first.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.rest).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.rest).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.rest).poll_shutdown(cx)
    }
}

fn transport_config() -> Arc<quinn::TransportConfig> {
    let mut config = quinn::TransportConfig::default();
    config.max_concurrent_bidi_streams(STREAMS_PER_PEER.into());
    config.max_concurrent_uni_streams(0u32.into());
    config.max_idle_timeout(Some(IDLE.try_into().expect("30 s is a valid idle timeout")));
    config.keep_alive_interval(Some(KEEP_ALIVE));
    Arc::new(config)
}

/// This node's end of the transport: it answers peers and dials them.
pub struct Transport {
    endpoint: quinn::Endpoint,
    /// Kept connections, by peer node id.
    peers: Mutex<HashMap<String, quinn::Connection>>,
    /// Streams opened to peers and accepted from them.
    opened: AtomicU64,
    accepted: AtomicU64,
    /// A call's round trip (stream opened to answer read), by peer.
    call_seconds: wasmkeep_telemetry::SecondsFamily,
}

impl Transport {
    /// Binds the cluster's UDP address `addr` with this node's identity.
    pub fn bind(addr: SocketAddr, dir: &ClusterDir) -> Result<Self, String> {
        let server = quinn::crypto::rustls::QuicServerConfig::try_from(tls::server_config(dir)?)
            .map_err(|e| format!("QUIC: {e}"))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(server));
        server.transport_config(transport_config());
        let client = quinn::crypto::rustls::QuicClientConfig::try_from(tls::client_config(dir)?)
            .map_err(|e| format!("QUIC: {e}"))?;
        let mut client = quinn::ClientConfig::new(Arc::new(client));
        client.transport_config(transport_config());
        let mut endpoint =
            quinn::Endpoint::server(server, addr).map_err(|e| format!("cannot listen on {addr} (UDP): {e}"))?;
        endpoint.set_default_client_config(client);
        Ok(Self {
            endpoint,
            peers: Mutex::new(HashMap::new()),
            opened: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            call_seconds: Default::default(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr().expect("a bound endpoint has an address")
    }

    /// Answers peers' hops with `hops` until the endpoint closes: each
    /// stream is one exchange, a call's or a relay's.
    pub async fn serve<H: Hops>(self: &Arc<Self>, hops: H) {
        while let Some(incoming) = self.endpoint.accept().await {
            let (hops, me) = (hops.clone(), self.clone());
            tokio::spawn(async move {
                let connection = match incoming.await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "a peer's QUIC handshake failed");
                        return;
                    }
                };
                while let Ok((send, recv)) = connection.accept_bi().await {
                    me.accepted.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(serve_stream(hops.clone(), send, recv));
                }
            });
        }
    }

    /// A connection to `node` at `addr`: the kept one, or a new one.
    async fn connection(&self, node: &str, addr: SocketAddr) -> Result<quinn::Connection, TransportError> {
        let kept = self.peers.lock().unwrap_or_else(|p| p.into_inner()).get(node).cloned();
        if let Some(c) = kept.filter(|c| c.close_reason().is_none() && c.remote_address() == addr) {
            return Ok(c);
        }
        let unreachable = |reason: String| TransportError::Unreachable { node: node.to_owned(), addr, reason };
        // Dialled on a task of its own: the connection's driver task keeps
        // the span current where it is dialled (quinn instruments it), and
        // a call's span would stay open as long as the connection.
        let (endpoint, name) = (self.endpoint.clone(), node.to_owned());
        let dial = tokio::spawn(async move {
            let connecting = endpoint.connect(addr, &name).map_err(|e| e.to_string())?;
            let connected = tokio::time::timeout(DIAL, connecting).await.map_err(|_| "no answer".to_string())?;
            connected.map_err(|e| e.to_string())
        });
        let connection = dial.await.map_err(|e| unreachable(e.to_string()))?.map_err(unreachable)?;
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(node.to_owned(), connection.clone());
        Ok(connection)
    }

    /// A new stream to `node` at `addr`, on the kept connection (dialled
    /// once more if it died since).
    async fn open(
        &self,
        node: &str,
        addr: SocketAddr,
    ) -> Result<(quinn::SendStream, quinn::RecvStream), TransportError> {
        let connection = self.connection(node, addr).await?;
        let stream = match connection.open_bi().await {
            Ok(stream) => stream,
            Err(_) => {
                self.peers.lock().unwrap_or_else(|p| p.into_inner()).remove(node);
                let failed = |reason: String| TransportError::Failed { node: node.to_owned(), reason };
                self.connection(node, addr).await?.open_bi().await.map_err(|e| failed(e.to_string()))?
            }
        };
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(stream)
    }

    /// Carries a call to `node` at `addr` on a stream of its own: the
    /// request head and `body` written whole and the stream's send side
    /// finished, the answer read to the stream's end. An answer whose body
    /// is over `body_limit` is [`CallError::TooLarge`].
    pub async fn call(
        &self,
        node: &str,
        addr: SocketAddr,
        head: Bytes,
        body: Bytes,
        body_limit: usize,
    ) -> Result<Response<Bytes>, CallError> {
        let failed = |reason: String| TransportError::Failed { node: node.to_owned(), reason };
        let started = std::time::Instant::now();
        let (mut send, mut recv) = self.open(node, addr).await?;
        send.write_all_chunks(&mut [head, body]).await.map_err(|e| failed(e.to_string()))?;
        // Finished now, the request and its end go in one packet.
        send.finish().map_err(|e| failed(e.to_string()))?;
        let answer = match recv.read_to_end(body_limit.saturating_add(wire::MAX_HEAD)).await {
            Ok(bytes) => bytes,
            Err(quinn::ReadToEndError::TooLong) => return Err(CallError::TooLarge(body_limit)),
            Err(e) => return Err(failed(e.to_string()).into()),
        };
        self.call_seconds.observe(&vec![("peer", node.to_owned())], started.elapsed().as_secs_f64());
        wire::read_answer(Bytes::from(answer), body_limit).map_err(|e| match e {
            wire::WireError::TooLarge(limit) => CallError::TooLarge(limit),
            e => failed(e.to_string()).into(),
        })
    }

    /// Carries `request` to `node` at `addr` on a stream of its own;
    /// answers the peer's response, its body streaming and the stream
    /// upgradable (a relay).
    pub async fn request<B>(
        &self,
        node: &str,
        addr: SocketAddr,
        request: Request<B>,
    ) -> Result<Response<Incoming>, TransportError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let failed = |reason: String| TransportError::Failed { node: node.to_owned(), reason };
        let (send, recv) = self.open(node, addr).await?;
        let io = TokioIo::new(tokio::io::join(recv, send));
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(|e| failed(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "a hop's stream ended early");
            }
        });
        sender.ready().await.map_err(|e| failed(e.to_string()))?;
        sender.send_request(request).await.map_err(|e| failed(e.to_string()))
    }

    /// Closes every connection and stops answering.
    pub fn close(&self) {
        self.endpoint.close(0u32.into(), b"closing");
    }
}

impl wasmkeep_telemetry::Source for Transport {
    fn collect(&self, out: &mut wasmkeep_telemetry::Exposition) {
        out.counter(
            "wasmkeep_cluster_streams_total",
            "QUIC streams (one per call or relay) opened to peers (out) and accepted from them (in).",
            [
                (vec![("direction", "out".to_owned())], self.opened.load(Ordering::Relaxed)),
                (vec![("direction", "in".to_owned())], self.accepted.load(Ordering::Relaxed)),
            ],
        );
        self.call_seconds.register(
            out,
            "wasmkeep_cluster_call_seconds",
            "Round trip of a call to a peer: its stream opened, the request sent, the answer read; by peer.",
        );
        let mut peers: Vec<(String, quinn::Connection)> =
            self.peers.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(n, c)| (n.clone(), c.clone())).collect();
        peers.retain(|(_, c)| c.close_reason().is_none());
        peers.sort_by(|a, b| a.0.cmp(&b.0));
        out.gauge_f64(
            "wasmkeep_peer_rtt_seconds",
            "QUIC's round-trip estimate of the kept connection to each peer, by node.",
            peers.iter().map(|(node, c)| (vec![("node", node.clone())], c.rtt().as_secs_f64())),
        );
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;

    use super::*;
    use crate::cluster_dir::{self, NodeId};

    fn cluster(names: &[&str]) -> (tempfile::TempDir, Vec<ClusterDir>) {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<NodeId> = names.iter().map(|n| NodeId::parse(n).unwrap()).collect();
        cluster_dir::init(dir.path(), &ids).unwrap();
        let loaded = ids.iter().map(|id| ClusterDir::load(dir.path(), id).unwrap()).collect();
        (dir, loaded)
    }

    /// Answers a call with its path and body length; a relay's open with
    /// a `101`, then echoes the stream.
    #[derive(Clone)]
    struct Echo;

    impl Hops for Echo {
        type Body = Full<Bytes>;
        fn body_limit(&self) -> usize {
            8 << 20
        }
        async fn call(&self, request: Request<Bytes>) -> Response<Bytes> {
            Response::new(Bytes::from(format!("{}:{}", request.uri().path(), request.body().len())))
        }
        async fn open(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
            tokio::spawn(async move {
                let upgraded = hyper::upgrade::on(request).await.unwrap();
                let (mut r, mut w) = tokio::io::split(TokioIo::new(upgraded));
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            response.headers_mut().insert("connection", http::HeaderValue::from_static("upgrade"));
            response.headers_mut().insert("upgrade", http::HeaderValue::from_static("websocket"));
            response
        }
        async fn tail(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
            Response::new(Full::new(Bytes::from(format!("tail {}", request.uri()))))
        }
    }

    fn echo_on(dir: &ClusterDir) -> Arc<Transport> {
        let t = Arc::new(Transport::bind("127.0.0.1:0".parse().unwrap(), dir).unwrap());
        let served = t.clone();
        tokio::spawn(async move { served.serve(Echo).await });
        t
    }

    async fn call(t: &Transport, node: &str, addr: SocketAddr, path: &str, body: usize) -> Result<String, String> {
        let path = http::uri::PathAndQuery::try_from(path).unwrap();
        let head = wire::request_head(&http::Method::POST, &path, &http::HeaderMap::new(), body);
        let answer =
            t.call(node, addr, head, Bytes::from(vec![b'x'; body]), 1 << 20).await.map_err(|e| e.to_string())?;
        Ok(String::from_utf8(answer.into_body().to_vec()).unwrap())
    }

    /// A stream to `addr` with `bytes` written and the send side finished:
    /// what came back before the peer finished.
    async fn raw(t: &Transport, node: &str, addr: SocketAddr, bytes: &[u8], finish: bool) -> String {
        let (mut send, mut recv) = t.open(node, addr).await.unwrap();
        send.write_all(bytes).await.unwrap();
        if finish {
            send.finish().unwrap();
        }
        let answer = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20)).await;
        String::from_utf8_lossy(&answer.expect("an answer within 10 s").unwrap()).into_owned()
    }

    #[tokio::test]
    async fn a_call_is_answered_whole_and_a_broken_one_in_a_line() {
        let (_d, dirs) = cluster(&["a", "b"]);
        let (a, b) = (echo_on(&dirs[0]), echo_on(&dirs[1]));
        let to = b.local_addr();
        // The answer comes once the body is whole, whether or not the
        // sender finished its side.
        let unfinished = raw(&a, "b", to, b"POST /x HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc", false).await;
        assert!(unfinished.starts_with("HTTP/1.1 200 OK\r\n") && unfinished.ends_with("\r\n\r\n/x:3"), "{unfinished}");
        // Over the node's limit: refused by its head, the body unread.
        let big = raw(&a, "b", to, b"POST /x HTTP/1.1\r\ncontent-length: 9999999999\r\n\r\n", false).await;
        assert!(big.starts_with("HTTP/1.1 413 ") && big.ends_with("the hop's body is over the limit\n"), "{big}");
        for broken in [&b"\x16\x03\x01garbage\r\n\r\n"[..], b"POST /x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"] {
            let answer = raw(&a, "b", to, broken, true).await;
            assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
            assert_eq!(answer.lines().last().unwrap().len(), answer.lines().last().unwrap().trim().len());
        }
        // A head that never ends is refused once it passes the bound.
        let endless = format!("GET / HTTP/1.1\r\nx: {}", "y".repeat(wire::MAX_HEAD + 1));
        assert!(raw(&a, "b", to, endless.as_bytes(), false).await.starts_with("HTTP/1.1 400 "));
        // A body shorter than its length, then the end: nothing answered.
        assert_eq!(raw(&a, "b", to, b"POST /x HTTP/1.1\r\ncontent-length: 5\r\n\r\nab", true).await, "");
        // An answer over the caller's limit is too large, not broken.
        let head = wire::request_head(&http::Method::POST, &"/x".try_into().unwrap(), &http::HeaderMap::new(), 0);
        let e = a.call("b", to, head, Bytes::new(), 2).await.unwrap_err();
        assert!(matches!(e, CallError::TooLarge(2)), "{e}");
    }

    #[tokio::test]
    async fn a_relays_open_goes_on_as_the_sockets_stream() {
        let (_d, dirs) = cluster(&["a", "b"]);
        let (a, b) = (echo_on(&dirs[0]), echo_on(&dirs[1]));
        let open = Request::get("/actor/room/r/ws")
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let answer = a.request("b", b.local_addr(), open).await.unwrap();
        assert_eq!(answer.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(answer.headers()["connection"], "upgrade", "the 101 keeps its connection header");
        let mut io = TokioIo::new(hyper::upgrade::on(answer).await.unwrap());
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        io.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        io.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
    }

    #[tokio::test]
    async fn hops_travel_both_ways_on_one_kept_connection() {
        let (_d, dirs) = cluster(&["a", "b"]);
        let (a, b) = (echo_on(&dirs[0]), echo_on(&dirs[1]));
        let b_addr = b.local_addr();
        assert_eq!(call(&a, "b", b_addr, "/one", 3).await.unwrap(), "/one:3");
        // A body larger than a QUIC stream's first window.
        assert_eq!(call(&a, "b", b_addr, "/big", 4 << 20).await.unwrap(), format!("/big:{}", 4 << 20));
        // Many at once on the same connection.
        let many = (0..64).map(|i| {
            let a = a.clone();
            async move { call(&a, "b", b_addr, &format!("/{i}"), i).await.unwrap() }
        });
        let answers = futures_join_all(many).await;
        assert_eq!(answers[63], "/63:63");
        let kept = a.peers.lock().unwrap()["b"].stable_id();
        assert_eq!(call(&a, "b", b_addr, "/again", 0).await.unwrap(), "/again:0");
        assert_eq!(a.peers.lock().unwrap()["b"].stable_id(), kept);
        assert_eq!(call(&b, "a", a.local_addr(), "/back", 1).await.unwrap(), "/back:1");
    }

    #[tokio::test]
    async fn only_the_named_node_of_the_same_ca_is_believed() {
        let (_d, dirs) = cluster(&["a", "b", "c"]);
        let (a, b) = (echo_on(&dirs[0]), echo_on(&dirs[1]));
        // Dialling b's address as if it were c: b's certificate names b.
        let e = call(&a, "c", b.local_addr(), "/", 0).await.unwrap_err();
        assert!(e.contains("cannot reach node c"), "{e}");
        // A node of another cluster can neither dial in nor be dialled.
        let (_o, others) = cluster(&["b"]);
        let stranger = echo_on(&others[0]);
        assert!(call(&stranger, "b", b.local_addr(), "/", 0).await.is_err());
        assert!(call(&a, "b", stranger.local_addr(), "/", 0).await.is_err());
        // A client that trusts the cluster's CA but holds another CA's
        // certificate is refused by the node it dials.
        let mut impostor = others[0].clone();
        impostor.ca = dirs[0].ca.clone();
        let impostor = Transport::bind("127.0.0.1:0".parse().unwrap(), &impostor).unwrap();
        assert!(call(&impostor, "b", b.local_addr(), "/", 0).await.is_err(), "a foreign client certificate was taken");
        // The same client with the cluster's own certificate is answered.
        assert_eq!(call(&a, "b", b.local_addr(), "/", 0).await.unwrap(), "/:0");
        // Nothing listening: unreachable, in bounded time.
        let gone = Transport::bind("127.0.0.1:0".parse().unwrap(), &dirs[2]).unwrap();
        let addr = gone.local_addr();
        gone.close();
        drop(gone);
        let e = call(&a, "c", addr, "/", 0).await.unwrap_err();
        assert!(e.contains("cannot reach node c"), "{e}");
    }

    async fn futures_join_all<F: std::future::Future + Send + 'static>(fs: impl Iterator<Item = F>) -> Vec<F::Output>
    where
        F::Output: Send + 'static,
    {
        let handles: Vec<_> = fs.map(tokio::spawn).collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    }
}
