//! Fairness: a quiet tenant's latency with a noisy one flooding the same
//! node. `wasmkeep serve` in its own process, two tenants on the same plan
//! (100 requests/s each); the quiet one sends a tenth of its rate, paced,
//! to its actors, alone and then while the noisy one sends ten times its
//! rate, each request to a new actor (enough to fill the pool), the phases
//! alternating `--rounds` times (default 3, `--secs` 20 each); the noisy
//! requests paced one a millisecond, or with `--burst` twenty at once every
//! 20 ms. Goal: the
//! quiet tenant's p99 with the noisy one within 2x of its p99 alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::serve_process::{self, request};
use crate::{flag, stats};

/// Signs `tenant` up and deploys the probe as its app `app`; answers its token.
async fn tenant_with_probe(api: &str, tenant: &str) -> Result<(), String> {
    let (status, body) =
        request(api, "POST", "api", "/v1/tenants", None, format!("{{\"name\":\"{tenant}\"}}").into_bytes()).await?;
    if status != 201 {
        return Err(format!("sign-up: {status} {body}"));
    }
    let token = body.split("\"token\":\"").nth(1).and_then(|r| r.split('"').next()).ok_or("no token")?.to_owned();
    let probe = base64::engine::general_purpose::STANDARD.encode(&wasmkeep_tests::guests().probe);
    let bundle = format!(
        "{{\"manifest\":{{\"classes\":{{\"probe\":{{\"access\":\"open\",\"component\":\"p\"}}}}}},\"components\":{{\"p\":\"{probe}\"}}}}"
    );
    let steps = [
        ("PUT", "/v1/apps/app", Vec::new()),
        ("POST", "/v1/apps/app/versions", bundle.into_bytes()),
        ("POST", "/v1/apps/app/versions/1/activate", Vec::new()),
    ];
    for (method, path, body) in steps {
        let (status, answer) = request(api, method, "api", path, Some(&token), body).await?;
        if status >= 300 {
            return Err(format!("{method} {path}: {status} {answer}"));
        }
    }
    Ok(())
}

/// The quiet tenant: `rate` requests a second, paced, over its `actors`,
/// for `length`; answers each latency and the failures.
async fn quiet(addr: &str, rate: u32, actors: u32, length: Duration) -> Result<(Vec<Duration>, u64), String> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let (mut samples, mut failed) = (Vec::new(), 0);
    let gap = Duration::from_secs_f64(1.0 / f64::from(rate));
    let end = Instant::now() + length;
    let mut next = Instant::now();
    let mut i = 0;
    while Instant::now() < end {
        tokio::time::sleep_until(next.into()).await;
        next += gap;
        sender.ready().await.map_err(|e| e.to_string())?;
        let path = format!("/actor/probe/q{}/ping", i % actors);
        i += 1;
        let req =
            hyper::Request::get(path).header("host", "app.quiet.localhost").body(Full::new(Bytes::new())).unwrap();
        let t = Instant::now();
        let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = res.status();
        res.into_body().collect().await.map_err(|e| e.to_string())?;
        samples.push(t.elapsed());
        if status != 200 {
            failed += 1;
        }
    }
    Ok((samples, failed))
}

/// The noisy tenant's load, on its own runtime, until `stop`.
fn noisy_load(
    addr: &str,
    round: u32,
    burst: bool,
    stop: &Arc<AtomicBool>,
    sent: &Arc<AtomicU64>,
    refused: &Arc<AtomicU64>,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut noisy = Vec::new();
        for c in 0..20u64 {
            let (stop, sent, refused, addr) = (stop.clone(), sent.clone(), refused.clone(), addr.to_owned());
            noisy.push(tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                // Evenly paced, connection `c` ticking `c` ms into each 20 ms
                // (one request a millisecond in all); with `burst`, all 20 at
                // once every 20 ms.
                let offset = if burst { 0 } else { c };
                let start = tokio::time::Instant::now() + Duration::from_millis(offset);
                let mut tick = tokio::time::interval_at(start, Duration::from_millis(20));
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    i += 1;
                    sender.ready().await.map_err(|e| e.to_string())?;
                    let path = format!("/actor/probe/n{round}-{c}-{i}/ping");
                    let req = hyper::Request::get(path)
                        .header("host", "app.noisy.localhost")
                        .body(Full::new(Bytes::new()))
                        .unwrap();
                    let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
                    sent.fetch_add(1, Ordering::Relaxed);
                    if res.status() != 200 {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    res.into_body().collect().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            }));
        }
        for n in noisy {
            n.await.map_err(|e| e.to_string())??;
        }
        Ok(())
    })
}

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 20.0)?;
    let rounds: u32 = flag(args, "--rounds", 3)?;
    let burst = args.iter().any(|a| a == "--burst");
    let plan = [
        ("requests_per_second", "100"),
        ("request_burst", "100"),
        ("actor_creations_per_second", "1000"),
        ("resident_actors", "100000"),
    ];
    let (server, api, _data) = serve_process::start(&plan, "pool_instances = 200\nfront_slots = 10\n")?;

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        tenant_with_probe(&api, "quiet").await?;
        tenant_with_probe(&api, "noisy").await?;
        let length = Duration::from_secs_f64(secs);
        // Warm: the quiet tenant's 20 actors are resident.
        quiet(&server.addr, 20, 20, Duration::from_secs(2)).await?;
        // The phases alternate, alone then beside, `rounds` times, and the
        // samples are pooled: a drift of the machine (a neighbour on the
        // host, a frequency change) lands in both, not in one.
        let (mut alone, mut beside, mut failed_alone, mut failed_beside) = (Vec::new(), Vec::new(), 0, 0);
        let (sent, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        for round in 0..rounds {
            let (a, failed) = quiet(&server.addr, 10, 20, length).await?;
            failed_alone += failed;
            let stop = Arc::new(AtomicBool::new(false));
            // Ten times its plan's rate: 20 keep-alive connections, 50
            // requests a second each, every request to a new actor. They run
            // on a thread of their own: the quiet tenant's latencies are the
            // server's, not the time its client's thread spent on the noisy
            // one's requests.
            let noisy_thread = {
                let (stop, sent, refused, addr) = (stop.clone(), sent.clone(), refused.clone(), server.addr.clone());
                std::thread::spawn(move || noisy_load(&addr, round, burst, &stop, &sent, &refused))
            };
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (b, failed) = quiet(&server.addr, 10, 20, length).await?;
            failed_beside += failed;
            stop.store(true, Ordering::Relaxed);
            noisy_thread.join().map_err(|_| "the noisy load panicked".to_string())??;
            let (ra, rb) = (stats::summarize(a.clone()), stats::summarize(b.clone()));
            println!(
                "round {}: p99 alone {:?}, beside {:?}: {:.2}x",
                round + 1,
                ra.p99,
                rb.p99,
                rb.p99.as_secs_f64() / ra.p99.as_secs_f64()
            );
            alone.extend(a);
            beside.extend(b);
        }

        let (a, b) = (stats::summarize(alone), stats::summarize(beside));
        println!("fairness: the quiet tenant at 10 req/s (a tenth of its plan), {rounds} rounds of {secs} s alone then {secs} s beside the noisy one at 1,000 req/s (ten times its plan), each to a new actor, {}; samples pooled", if burst { "in bursts of 20 every 20 ms" } else { "one a millisecond" });
        println!("| quiet tenant | p50 | p99 | failed |");
        println!("|---|---|---|---|");
        println!("| alone | {:?} | {:?} | {failed_alone} |", a.p50, a.p99);
        println!("| beside the noisy one | {:?} | {:?} | {failed_beside} |", b.p50, b.p99);
        println!(
            "noisy: {} answered, {} refused; p99 beside / alone: {:.2}x",
            sent.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
            b.p99.as_secs_f64() / a.p99.as_secs_f64()
        );
        Ok(())
    })
}
