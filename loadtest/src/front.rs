//! A trivial front (the `hello-front` guest: every request answers
//! `hello`) served three ways, loaded in one run by the same client:
//!
//! - wasmkeep: `wasmkeep dev` with the component as the app's front, a
//!   fresh instance per request in a front slot;
//! - `wasmtime serve` (wasmtime-cli 48) with the same component, which
//!   also instantiates per request;
//! - a plain hyper server answering `hello` (no WebAssembly at all).
//!
//! Rounds alternate between the servers, so drift on a shared machine
//! falls on all three.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::{flag, load, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 5.0)?;
    let conns: usize = flag(args, "--conns", 32)?;
    let rounds: usize = flag(args, "--rounds", 2)?;
    let wasmtime: PathBuf = flag(args, "--wasmtime", PathBuf::from("/opt/wasmtime-48/bin/wasmtime"))?;
    let pooling = args.iter().any(|a| a == "--wasmtime-pooling");
    // `--only wasmkeep` loads one server, e.g. to profile it.
    let only: String = flag(args, "--only", String::new())?;

    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let wasm = dir.path().join("hello.wasm");
    std::fs::write(&wasm, &wasmkeep_tests::guests().hello_front).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("wasmkeep.toml"), "name = \"hello\"\nfront = \"hello.wasm\"\n")
        .map_err(|e| e.to_string())?;

    let mut servers = Vec::new();
    let wanted = |name: &str| only.is_empty() || only == name;
    let mut command = Command::new(load::wasmkeep_bin()?);
    command.arg("dev").arg(dir.path()).args(["--listen", "127.0.0.1:0", "--data"]).arg(dir.path().join("data"));
    // `--limits FILE`: the node's limits, e.g. to compare its gates.
    let limits: String = flag(args, "--limits", String::new())?;
    if !limits.is_empty() {
        command.arg("--limits").arg(limits);
    }
    if wanted("wasmkeep") {
        servers.push(("wasmkeep", load::spawn(command, load::wasmkeep_addr)?));
    }

    let port = free_port()?;
    let mut command = Command::new(&wasmtime);
    command.args(["serve", "-S", "cli=y", "--addr", &format!("127.0.0.1:{port}")]);
    if pooling {
        command.args(["-O", "pooling-allocator=y"]);
    }
    command.arg(&wasm);
    let listening = format!("127.0.0.1:{port}");
    if wanted("wasmtime") && !wasmtime.is_file() {
        eprintln!("front: {} is missing: measuring without wasmtime serve", wasmtime.display());
    } else if wanted("wasmtime") {
        let server = load::spawn(command, |l| l.contains("Serving HTTP").then(|| listening.clone()))?;
        servers.push(("wasmtime serve", server));
    }

    let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    command.arg("hello-server");
    if wanted("hyper") {
        let server = load::spawn(command, |l| l.strip_prefix("hello-server: listening on ").map(str::to_owned))?;
        servers.push(("hyper hello", server));
    }

    // The client gets one thread; the servers keep the other core.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut results: Vec<(f64, Vec<Duration>, u64)> = servers.iter().map(|_| (0.0, Vec::new(), 0)).collect();
    for _ in 0..rounds {
        for (i, (_, server)) in servers.iter().enumerate() {
            let run = rt.block_on(load::run(&server.addr, "/", conns, Duration::from_secs_f64(secs)))?;
            results[i].0 += run.per_sec() / rounds as f64;
            results[i].2 += run.errors;
            results[i].1.extend(run.samples);
        }
    }
    println!("front: a trivial front, {conns} connections, {rounds} rounds of {secs} s each, one run");
    let mut p50s = Vec::new();
    for ((name, _), (rps, samples, errors)) in servers.iter().zip(results.iter()) {
        let summary = stats::summarize(samples.clone());
        println!("  {name:15} {rps:>8.0} requests/s, {errors} errors; latency {summary}");
        p50s.push(summary.p50);
    }
    let rps = |name: &str| servers.iter().position(|(n, _)| *n == name).map(|i| results[i].0);
    if let (Some(ours), Some(hyper), None) = (rps("wasmkeep"), rps("hyper hello"), rps("wasmtime serve")) {
        println!("  wasmkeep / hyper hello: {:.2}x the requests/s", ours / hyper);
    }
    if servers.len() < 3 {
        return Ok(());
    }
    let (ours, theirs, hyper) = (results[0].0, results[1].0, results[2].0);
    println!(
        "  wasmkeep / wasmtime serve: {:.2}x the requests/s, {:.2}x the p50; wasmkeep / hyper hello: {:.2}x the requests/s",
        ours / theirs,
        p50s[0].as_secs_f64() / p50s[1].as_secs_f64(),
        ours / hyper
    );
    Ok(())
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// The plain hyper server: `hello` to every request, HTTP/1.1 keep-alive,
/// on tokio's multi-thread runtime as the other two are.
pub fn hello_server() -> Result<(), String> {
    use http_body_util::Full;
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        eprintln!("hello-server: listening on {}", listener.local_addr().map_err(|e| e.to_string())?);
        loop {
            let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(bytes::Bytes::from_static(
                        b"hello",
                    ))))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
