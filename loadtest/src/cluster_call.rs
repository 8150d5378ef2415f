//! Calls between the nodes of a cluster: three nodes in this process
//! (`wasmkeep_tests::cluster`: one real PostgreSQL store, hops over QUIC
//! with mutual TLS under the cluster CA, signed and checked), the caller
//! on node `a`. An actor is owned by the first node that runs it, so each
//! callee is woken through the node meant to own it before measuring.
//!
//! - `call`: the `actors.call` round trip, guest to guest, timed in the
//!   caller's clock (`/call-bench`), to a callee node `b` owns (the signed
//!   hop: the head built and signed, a stream of the kept QUIC connection
//!   carrying HTTP/1.1, the signature checked on `b`, the event, the
//!   answer back) and to one on `a` itself; against the raw QUIC round
//!   trip on the same machine in the same run: a quinn bidirectional
//!   stream on a kept connection with the cluster's own mutual-TLS configs
//!   (`wasmkeep_cluster::tls`, the identities of `a` and `b`), open, write
//!   64 bytes, finish, read the echo. A fourth line places the hop between
//!   the two: a signed `GET /ping` carried by `a`'s own transport
//!   (`Transport::call`, as a call's hop) to the callee on `b`, no guest
//!   and no router on `a`'s side. Rounds alternate between the four.
//! - `call_many`: `calls.call-many` of 16 callees spread over the three
//!   nodes (each callee waiting 20 ms in a guest sleep, as `call-many`),
//!   against one such call to a callee on `b`, against 16 callees all on
//!   `a`, and against the same 16 spread calls made one after another.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmkeep_actors::Request;
use wasmkeep_cluster::cluster_dir::ClusterDir;
use wasmkeep_cluster::membership::unix_ms;
use wasmkeep_cluster::signing::{Signer, body_sha256};
use wasmkeep_cluster::tls;
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::signature::CALL_NAMES;
use wasmkeep_core::{AppId, Origin, RawAddress};
use wasmkeep_tests::cluster::{Member, cluster, forwarded};

use crate::{flag, stats};

/// `GET path` of `actor` through node `m`, as an outside caller: its body,
/// if it answered `200`.
async fn get(m: &Member, app: AppId, actor: &str, path: String) -> Result<Vec<u8>, String> {
    let request = Request { method: "GET".into(), path, headers: vec![], body: vec![] };
    let target = RawAddress::split(actor).map_err(|e| format!("{actor}: {e:?}"))?;
    let r = m.node.request_to(app, target, Origin::Outside, request).await.map_err(|e| e.to_string())?;
    if r.status != 200 {
        return Err(format!("{actor} answered {}: {}", r.status, String::from_utf8_lossy(&r.body)));
    }
    Ok(r.body)
}

/// `n` calls from `probe/caller` (on `m`) to `to`, each timed by the caller.
async fn call_bench(m: &Member, app: AppId, to: &str, n: usize) -> Result<Vec<Duration>, String> {
    let body = get(m, app, "probe/caller", format!("/call-bench?to={to}&n={n}")).await?;
    let nanos: Vec<u64> = String::from_utf8_lossy(&body)
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    if nanos.len() != n {
        return Err(format!("the caller answered {} samples: {}", nanos.len(), String::from_utf8_lossy(&body)));
    }
    Ok(nanos.into_iter().map(Duration::from_nanos).collect())
}

/// The floor: a quinn connection kept between two endpoints of this
/// process, each with a node's identity and the cluster's TLS configs; the
/// server echoes each stream, from a task of its own (as the transport
/// serves each hop's stream).
struct RawQuic {
    connection: quinn::Connection,
    _endpoints: (quinn::Endpoint, quinn::Endpoint),
}

impl RawQuic {
    async fn connect(server: &ClusterDir, client: &ClusterDir) -> Result<Self, String> {
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls::server_config(server)?)
            .map_err(|e| format!("QUIC: {e}"))?;
        let listening = quinn::Endpoint::server(
            quinn::ServerConfig::with_crypto(Arc::new(crypto)),
            "127.0.0.1:0".parse().expect("an address"),
        )
        .map_err(|e| e.to_string())?;
        let addr = listening.local_addr().map_err(|e| e.to_string())?;
        let accepting = listening.clone();
        tokio::spawn(async move {
            while let Some(incoming) = accepting.accept().await {
                tokio::spawn(async move {
                    let Ok(connection) = incoming.await else { return };
                    while let Ok((mut send, mut recv)) = connection.accept_bi().await {
                        tokio::spawn(async move {
                            let Ok(message) = recv.read_to_end(64 * 1024).await else { return };
                            if send.write_all(&message).await.is_ok() {
                                let _ = send.finish();
                            }
                        });
                    }
                });
            }
        });
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls::client_config(client)?)
            .map_err(|e| format!("QUIC: {e}"))?;
        let mut dialling =
            quinn::Endpoint::client("127.0.0.1:0".parse().expect("an address")).map_err(|e| e.to_string())?;
        dialling.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        let connection = dialling
            .connect(addr, server.node.as_str())
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| format!("the raw QUIC handshake: {e}"))?;
        Ok(Self { connection, _endpoints: (listening, dialling) })
    }

    /// One stream: open, write `message`, finish, read the echo to its end.
    async fn round_trip(&self, message: &[u8]) -> Result<Duration, String> {
        let t = Instant::now();
        let (mut send, mut recv) = self.connection.open_bi().await.map_err(|e| e.to_string())?;
        send.write_all(message).await.map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())?;
        let echo = recv.read_to_end(64 * 1024).await.map_err(|e| e.to_string())?;
        let elapsed = t.elapsed();
        if echo != message {
            return Err(format!("the raw echo came back as {} bytes", echo.len()));
        }
        Ok(elapsed)
    }

    async fn bench(&self, n: usize) -> Result<Vec<Duration>, String> {
        let message = [b'm'; 64];
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            samples.push(self.round_trip(&message).await?);
        }
        Ok(samples)
    }
}

/// A step between the floor and the call: a signed hop carried by node
/// `a`'s own transport to `b` (`GET /ping` of `actor` as an outside
/// request event: the head, its signature, the call's HTTP/1.1 on a QUIC
/// stream of the kept connection, the check on `b`, the event there, the
/// answer read whole), with no guest and no router on `a`'s side.
async fn hop_bench(a: &Member, b: &Member, actor: &str, n: usize) -> Result<Vec<Duration>, String> {
    let signer = Signer::new(a.dir.node.as_str(), &a.dir.secret);
    let path = http::uri::PathAndQuery::from_static("/ping");
    let (to, addr) = (b.dir.node.as_str(), b.transport.local_addr());
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut head = http::HeaderMap::new();
        head.insert("x-wasmkeep-app", http::HeaderValue::from_static("t/app"));
        head.insert("x-wasmkeep-target", http::HeaderValue::try_from(actor).map_err(|e| e.to_string())?);
        head.insert("x-wasmkeep-deadline", http::HeaderValue::from_static("5000"));
        signer
            .sign(&http::Method::GET, &path, &body_sha256(b""), &mut head, &CALL_NAMES, unix_ms())
            .map_err(|e| e.to_string())?;
        let request = wasmkeep_cluster::wire::request_head(&http::Method::GET, &path, &head, 0);
        let answer =
            a.transport.call(to, addr, request, bytes::Bytes::new(), 1 << 20).await.map_err(|e| e.to_string())?;
        let status = answer.status();
        samples.push(t.elapsed());
        if status != http::StatusCode::OK {
            return Err(format!("the signed hop was answered {status}"));
        }
    }
    Ok(samples)
}

pub fn call(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 2000)?;
    let rounds: usize = flag(args, "--rounds", 4)?;
    let per_round = n.div_ceil(rounds.max(1));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let body = async move {
        let (_dir, m, app) = cluster(&["a", "b", "c"]).await;
        let (a, b) = (&m[0], &m[1]);
        // Owners: the caller and `local` on a, `remote` on b.
        get(a, app, "probe/caller", "/ping".into()).await?;
        get(a, app, "probe/local", "/ping".into()).await?;
        get(b, app, "probe/remote", "/ping".into()).await?;
        let raw = RawQuic::connect(&b.dir, &a.dir).await?;
        // Warm all three (the hint of `remote`'s owner, the connections).
        call_bench(a, app, "probe/remote", 100).await?;
        call_bench(a, app, "probe/local", 100).await?;
        raw.bench(100).await?;
        hop_bench(a, b, "probe/remote", 100).await?;
        let (mut cross, mut same, mut floor, mut hop) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let hops_before = forwarded(a, HopKind::Call);
        for _ in 0..rounds {
            cross.extend(call_bench(a, app, "probe/remote", per_round).await?);
            let hops = forwarded(a, HopKind::Call);
            same.extend(call_bench(a, app, "probe/local", per_round).await?);
            if forwarded(a, HopKind::Call) != hops {
                return Err("a call to the callee on a's own node was forwarded".into());
            }
            floor.extend(raw.bench(per_round).await?);
            hop.extend(hop_bench(a, b, "probe/remote", per_round).await?);
        }
        let hops = forwarded(a, HopKind::Call) - hops_before;
        if hops != cross.len() as u64 {
            return Err(format!("{hops} calls forwarded for {} cross-node calls", cross.len()));
        }
        let (cross, same, floor, hop) =
            (stats::summarize(cross), stats::summarize(same), stats::summarize(floor), stats::summarize(hop));
        println!(
            "cluster-call: actors.call round trip, guest to guest, 3 nodes in one process, {} samples each in {rounds} alternating rounds, one run",
            cross.n
        );
        println!("  cross-node (a -> b, signed QUIC hop) {cross}");
        println!("  same node (a -> a)                  {same}");
        println!("  raw QUIC round trip (quinn, mTLS)   {floor}");
        println!("  (signed hop a -> b, no guest)       {hop}");
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let added = us(cross.p50) - us(same.p50);
        let ratio = added / us(floor.p50);
        println!(
            "  cross-node / same node: {:.1}x; cross-node - same node: {added:.1}µs = {ratio:.2}x the raw round trip (p50s)",
            us(cross.p50) / us(same.p50)
        );
        println!(
            "  goal: cross-node <= same node + 1.5 x raw ({:.1}µs <= {:.1}µs): {}",
            us(cross.p50),
            us(same.p50) + 1.5 * us(floor.p50),
            if ratio <= 1.5 { "met" } else { "not met" }
        );
        Ok(())
    };
    rt.block_on(async { tokio::spawn(body).await.map_err(|e| e.to_string())? })
}

pub fn call_many(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 20)?;
    let ms: u64 = flag(args, "--ms", 20)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let body = async move {
        let (_dir, m, app) = cluster(&["a", "b", "c"]).await;
        let a = &m[0];
        get(a, app, "probe/caller", "/ping".into()).await?;
        // `s<i>` owned by node i % 3; `l<i>` all on a.
        let spread: Vec<String> = (0..16).map(|i| format!("probe/s{i}")).collect();
        let local: Vec<String> = (0..16).map(|i| format!("probe/l{i}")).collect();
        for (i, callee) in spread.iter().enumerate() {
            get(&m[i % 3], app, callee, "/ping".into()).await?;
        }
        for callee in &local {
            get(a, app, callee, "/ping".into()).await?;
        }
        let sleep = format!("path=/sleep%3Fms%3D{ms}");
        let (spread, local) = (spread.join(","), local.join(","));
        let shapes = [
            ("one call, a -> b", format!("/call?to=probe/s1&{sleep}")),
            ("call_many of 16 over a, b, c", format!("/many?to={spread}&{sleep}")),
            ("call_many of 16 all on a", format!("/many?to={local}&{sleep}")),
            ("16 calls in a row over a, b, c", format!("/sequential?to={spread}&{sleep}")),
        ];
        let time = |path: String| async move {
            let t = Instant::now();
            let body = get(a, app, "probe/caller", path).await?;
            Ok::<_, String>((t.elapsed(), body))
        };
        // Warm every callee (and the hints of their owners) first.
        for shape in [&shapes[1], &shapes[2]] {
            let (_, body) = time(shape.1.clone()).await?;
            let answered = String::from_utf8_lossy(&body).matches("\"status\":200").count();
            if answered != 16 {
                return Err(format!("warming answered {answered} of 16: {}", String::from_utf8_lossy(&body)));
            }
        }
        let (b, c) = (forwarded(a, HopKind::Call), [&m[1], &m[2]].map(|m| forwarded(m, HopKind::Call)));
        let mut p50 = Vec::new();
        println!(
            "cluster-call-many: 3 nodes in one process, callees each waiting {ms} ms, {n} samples of each, one run"
        );
        for (name, path) in &shapes {
            let mut samples = Vec::new();
            for _ in 0..n {
                samples.push(time(path.clone()).await?.0);
            }
            let s = stats::summarize(samples);
            println!("  {name:31} {s}");
            p50.push(s.p50);
        }
        // One call to b, then 10 of 16 entries off a per batch and per row.
        let expected = n as u64 * (1 + 10 + 10);
        let forwarded_here = forwarded(a, HopKind::Call) - b;
        if forwarded_here != expected || [&m[1], &m[2]].map(|m| forwarded(m, HopKind::Call)) != c {
            return Err(format!("a forwarded {forwarded_here} calls, {expected} expected"));
        }
        let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
        println!(
            "  call_many over 3 nodes / one call: {:.2}x; / call_many on one node: {:.2}x; 16 in a row / call_many over 3 nodes: {:.1}x (p50s)",
            ratio(p50[1], p50[0]),
            ratio(p50[1], p50[2]),
            ratio(p50[3], p50[1])
        );
        println!(
            "  goal: call_many of 16 over 3 nodes <= 1.3x one call: {}",
            if ratio(p50[1], p50[0]) <= 1.3 { "met" } else { "not met" }
        );
        Ok(())
    };
    rt.block_on(async { tokio::spawn(body).await.map_err(|e| e.to_string())? })
}
