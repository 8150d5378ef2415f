//! One actor's events per second over HTTP, each with a storage write:
//! `wasmkeep dev` serving the counter example (a real process, a real
//! SQLite file), loaded by keep-alive HTTP/1.1 connections from this one.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use crate::{flag, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 5.0)?;
    let conns: usize = flag(args, "--conns", 32)?;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = repo.join("target/release/wasmkeep");
    if !bin.is_file() {
        return Err(format!("{} is missing: cargo build --release -p wasmkeep", bin.display()));
    }
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut server = Command::new(&bin)
        .args(["dev", "docs/examples/counter", "--listen", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .current_dir(&repo)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().ok_or("wasmkeep dev ended before serving")?.map_err(|e| e.to_string())?;
        if let Some(url) = line.strip_prefix("wasmkeep: serving ").and_then(|l| l.split("http://").nth(1)) {
            break url.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));

    // The client gets one thread; the server keeps the other core.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let result = rt.block_on(load(&addr, conns, Duration::from_secs_f64(secs)));
    let _ = server.kill();
    let _ = server.wait();
    let (done, samples, errors) = result?;
    let summary = stats::summarize(samples);
    println!(
        "http-events: one actor, a storage write per event, {conns} connections, {secs} s: {:.0} events/s, {errors} errors; latency {summary}",
        done as f64 / secs
    );
    Ok(())
}

async fn load(addr: &str, conns: usize, length: Duration) -> Result<(u64, Vec<Duration>, u64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    // Warm: wake the actor once.
    one_connection(addr, Arc::new(AtomicBool::new(true)), done.clone(), errors.clone(), 1).await?;
    done.store(0, Ordering::Relaxed);
    for _ in 0..conns {
        let (stop, done, errors, addr) = (stop.clone(), done.clone(), errors.clone(), addr.to_owned());
        tasks.push(tokio::spawn(async move { one_connection(&addr, stop, done, errors, u64::MAX).await }));
    }
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for t in tasks {
        samples.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok((done.load(Ordering::Relaxed), samples, errors.load(Ordering::Relaxed)))
}

async fn one_connection(
    addr: &str,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    at_least: u64,
) -> Result<Vec<Duration>, String> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut samples = Vec::new();
    let mut sent = 0u64;
    while sent < at_least.min(1) || !stop.load(Ordering::Relaxed) {
        sender.ready().await.map_err(|e| e.to_string())?;
        let req =
            hyper::Request::get("/actor/counter/bench/").header("host", addr).body(Empty::<Bytes>::new()).unwrap();
        let t = Instant::now();
        let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let ok = res.status() == 200;
        res.into_body().collect().await.map_err(|e| e.to_string())?;
        samples.push(t.elapsed());
        sent += 1;
        if ok {
            done.fetch_add(1, Ordering::Relaxed);
        } else {
            errors.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(samples)
}
