//! The transport between nodes: QUIC (quinn, TLS 1.3 with mutual
//! authentication under the cluster CA), one bidirectional stream per call
//! or relay, carrying HTTP/1.1: the request head with the hop's
//! `x-wasmkeep-` head and signature, and the body, streamed both ways (an
//! upgrade continues on the same stream). A connection per peer is kept
//! and reused; a closed one is dialled again on the next hop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper_util::rt::TokioIo;

use crate::cluster_dir::ClusterDir;
use crate::tls;

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
        Ok(Self { endpoint, peers: Mutex::new(HashMap::new()) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr().expect("a bound endpoint has an address")
    }

    /// Answers peers' hops with `service` until the endpoint closes: each
    /// stream is one HTTP/1.1 exchange (upgrades included).
    pub async fn serve<S, B>(&self, service: S)
    where
        S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        while let Some(incoming) = self.endpoint.accept().await {
            let service = service.clone();
            tokio::spawn(async move {
                let connection = match incoming.await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "a peer's QUIC handshake failed");
                        return;
                    }
                };
                while let Ok((send, recv)) = connection.accept_bi().await {
                    let service = service.clone();
                    tokio::spawn(async move {
                        let io = TokioIo::new(tokio::io::join(recv, send));
                        let served = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .with_upgrades()
                            .await;
                        if let Err(e) = served {
                            tracing::debug!(error = %e, "a hop's stream ended early");
                        }
                    });
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
        let connecting = self.endpoint.connect(addr, node).map_err(|e| unreachable(e.to_string()))?;
        let connection = tokio::time::timeout(DIAL, connecting)
            .await
            .map_err(|_| unreachable("no answer".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(node.to_owned(), connection.clone());
        Ok(connection)
    }

    /// Carries `request` to `node` at `addr` on a stream of its own;
    /// answers the peer's response, its body streaming (and the stream
    /// upgradable, for a relay).
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
        let connection = self.connection(node, addr).await?;
        let (send, recv) = match connection.open_bi().await {
            Ok(stream) => stream,
            // The kept connection died since: dial once more.
            Err(_) => {
                self.peers.lock().unwrap_or_else(|p| p.into_inner()).remove(node);
                self.connection(node, addr).await?.open_bi().await.map_err(|e| failed(e.to_string()))?
            }
        };
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

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::{BodyExt, Full};

    use super::*;
    use crate::cluster_dir::{self, NodeId};

    fn cluster(names: &[&str]) -> (tempfile::TempDir, Vec<ClusterDir>) {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<NodeId> = names.iter().map(|n| NodeId::parse(n).unwrap()).collect();
        cluster_dir::init(dir.path(), &ids).unwrap();
        let loaded = ids.iter().map(|id| ClusterDir::load(dir.path(), id).unwrap()).collect();
        (dir, loaded)
    }

    fn echo_on(dir: &ClusterDir) -> Arc<Transport> {
        let t = Arc::new(Transport::bind("127.0.0.1:0".parse().unwrap(), dir).unwrap());
        let served = t.clone();
        tokio::spawn(async move {
            served
                .serve(hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let path = req.uri().path().to_owned();
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!("{path}:{}", body.len())))))
                }))
                .await
        });
        t
    }

    async fn call(t: &Transport, node: &str, addr: SocketAddr, path: &str, body: usize) -> Result<String, String> {
        let req = Request::post(path).body(Full::new(Bytes::from(vec![b'x'; body]))).unwrap();
        let res = t.request(node, addr, req).await.map_err(|e| e.to_string())?;
        Ok(String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap())
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
