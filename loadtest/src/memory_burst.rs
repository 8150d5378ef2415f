//! Memory after a burst: `wasmkeep dev` in its own process takes 64
//! concurrent request bodies of 15 MiB to 64 actors, then rests. Its RSS
//! is read before, at the peak, and after the rest: the node must bound
//! what it holds (the budget of buffered bodies) and give the memory back.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::{flag, probe_process};

async fn post(addr: String, path: String, body: Bytes) -> Result<u16, String> {
    let stream = tokio::net::TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = hyper::Request::post(path).header("host", addr).body(Full::new(body)).unwrap();
    let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    res.into_body().collect().await.map_err(|e| e.to_string())?;
    Ok(status)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let conns: usize = flag(args, "--conns", 64)?;
    let body_mib: usize = flag(args, "--mib", 15)?;
    let rest: f64 = flag(args, "--rest-secs", 6.0)?;
    let (server, _dir) = probe_process::start("burst", "")?;
    let pid = server.pid();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let addr = server.addr.clone();
        post(addr.clone(), "/actor/open/warm/echo".into(), Bytes::from_static(b"x")).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = probe_process::rss_kib(pid)?;
        let body = Bytes::from(vec![b'b'; body_mib << 20]);
        let started = Instant::now();
        let tasks: Vec<_> = (0..conns)
            .map(|i| tokio::spawn(post(addr.clone(), format!("/actor/open/m{i}/echo"), body.clone())))
            .collect();
        let mut peak = before;
        while !tasks.iter().all(|t| t.is_finished()) {
            peak = peak.max(probe_process::rss_kib(pid)?);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = started.elapsed();
        let mut statuses = std::collections::BTreeMap::new();
        for t in tasks {
            let s = t.await.map_err(|e| e.to_string())?.unwrap_or(0);
            *statuses.entry(s).or_insert(0) += 1;
        }
        tokio::time::sleep(Duration::from_secs_f64(rest)).await;
        let after = probe_process::rss_kib(pid)?;
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "memory-burst: {conns} bodies of {body_mib} MiB at once, in {:.1} s; answers {statuses:?}",
            took.as_secs_f64()
        );
        println!(
            "  node RSS: before {:.0} MiB, peak {:.0} MiB, after {rest} s {:.0} MiB ({:.2}x before)",
            mib(before),
            mib(peak),
            mib(after),
            after as f64 / before as f64
        );
        Ok(())
    })
}
