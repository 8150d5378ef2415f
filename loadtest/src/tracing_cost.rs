//! What traces cost on the request path: the `http-events` and `front`
//! shapes (the counter example, an event with a storage write; a trivial
//! front) each served by three `wasmkeep dev` processes at once: tracing
//! off (no endpoint), on with every trace sampled, and on with 1 in 100
//! (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`). The spans go over
//! OTLP to a sink in this process that reads each export and answers
//! `200` (its own thread, so the client's thread only loads). Rounds
//! alternate between the three; each mode's figures are also given as a
//! ratio to "off" of the same shape.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{flag, load, stats};

/// The sink: counts exports and their bytes.
fn sink() -> Result<(String, Arc<AtomicU64>, Arc<AtomicU64>), String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (exports, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (e, b) = (exports.clone(), bytes.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (e, b) = (e.clone(), b.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (e, b) = (e.clone(), b.clone());
                        async move {
                            use http_body_util::BodyExt;
                            let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                            e.fetch_add(1, Ordering::Relaxed);
                            b.fetch_add(body.len() as u64, Ordering::Relaxed);
                            Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                                bytes::Bytes::new(),
                            )))
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
    });
    Ok((format!("http://{addr}"), exports, bytes))
}

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 5.0)?;
    let conns: usize = flag(args, "--conns", 32)?;
    let rounds: usize = flag(args, "--rounds", 2)?;
    let (endpoint, exports, bytes) = sink()?;

    let front = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(front.path().join("hello.wasm"), &wasmkeep_tests::guests().hello_front)
        .map_err(|e| e.to_string())?;
    std::fs::write(front.path().join("wasmkeep.toml"), "name = \"hello\"\nfront = \"hello.wasm\"\n")
        .map_err(|e| e.to_string())?;
    let counter = load::repo().join("docs/examples/counter");
    let shapes = [("http-events", counter, "/actor/counter/bench/"), ("front", front.path().to_path_buf(), "/")];
    let modes: [(&str, Vec<(&str, &str)>); 3] = [
        ("off", vec![]),
        ("on, sampled 1.0", vec![("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint), ("OTEL_TRACES_SAMPLER", "always_on")]),
        (
            "on, sampled 0.01",
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
            ],
        ),
    ];
    let mut servers = Vec::new();
    let mut data = Vec::new();
    for (shape, dir, path) in &shapes {
        for (mode, env) in &modes {
            let d = tempfile::tempdir().map_err(|e| e.to_string())?;
            let mut command = std::process::Command::new(load::wasmkeep_bin()?);
            command.arg("dev").arg(dir).args(["--listen", "127.0.0.1:0", "--data"]).arg(d.path());
            command.envs(env.iter().copied()).current_dir(load::repo());
            servers.push((*shape, *mode, *path, load::spawn(command, load::wasmkeep_addr)?));
            data.push(d);
        }
    }
    // The client gets one thread; the servers share the other core.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut results: Vec<(f64, Vec<Duration>, u64)> = servers.iter().map(|_| (0.0, Vec::new(), 0)).collect();
    for _ in 0..rounds {
        for (i, (_, _, path, server)) in servers.iter().enumerate() {
            let run = rt.block_on(load::run(&server.addr, path, conns, Duration::from_secs_f64(secs)))?;
            results[i].0 += run.per_sec() / rounds as f64;
            results[i].2 += run.errors;
            results[i].1.extend(run.samples);
        }
    }
    // The last spans reach the sink within the batch delay.
    std::thread::sleep(Duration::from_secs(6));
    println!("tracing-cost: {conns} connections, {rounds} rounds of {secs} s each, one run");
    let mut off = (0.0, Duration::ZERO);
    for ((shape, mode, _, _), (rps, samples, errors)) in servers.iter().zip(results) {
        let summary = stats::summarize(samples);
        if *mode == "off" {
            off = (rps, summary.p50);
        }
        println!(
            "  {shape:11} {mode:17} {rps:>8.0} /s ({:.2}x off), {errors} errors; latency {summary} (p50 {:.2}x off)",
            rps / off.0,
            summary.p50.as_secs_f64() / off.1.as_secs_f64()
        );
    }
    println!(
        "  sink: {} exports, {:.1} MB of spans",
        exports.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed) as f64 / 1e6
    );
    Ok(())
}
