//! What a TypeScript actor costs against the Rust one, in one run: the
//! counter example in both languages (`docs/examples/counter`, built by
//! cargo; `docs/examples/counter-ts`, built by npm and `wasmkeep-build`
//! with componentize-js, a JavaScript engine inside). For each:
//!
//! - the component's size;
//! - compiling it at deploy (no compiled-component cache), and loading it
//!   from that cache (what a restart or another node pays);
//! - raw instantiation from its `InstancePre` (the floor), and with the
//!   first event (`GET /peek`);
//! - a wake through the node: the same event to a hibernated actor;
//! - events per second of one actor through the node (`GET /`: a read and
//!   a write, committed);
//! - resident memory per awake actor (the process's RSS over N actors).
//!
//! Each TypeScript figure is printed with its ratio to the Rust one.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmkeep_actors::Request;
use wasmkeep_core::{Limits, Origin, RawAddress};
use wasmkeep_runtime::{GuestEvent, Runtime};

use crate::instantiate::MemoryHost;
use crate::{flag, stats};

struct Figures {
    size: usize,
    compile: Duration,
    cached: Duration,
    raw: stats::Summary,
    raw_event: stats::Summary,
    wake: stats::Summary,
    events_per_sec: f64,
    event: stats::Summary,
    rss_per_actor_kib: f64,
}

fn get(path: &str) -> Request {
    Request { method: "GET".into(), path: path.into(), headers: vec![], body: vec![] }
}

fn rss_kib() -> Result<u64, String> {
    crate::probe_process::rss_kib(std::process::id())
}

/// The Rust counter, built for `wasm32-wasip2`.
fn rust_counter() -> Result<Vec<u8>, String> {
    let dir = wasmkeep_tests::repo().join("docs/examples/counter");
    let status = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--quiet", "--target", "wasm32-wasip2"])
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err("building docs/examples/counter failed".into());
    }
    std::fs::read(dir.join("target/wasm32-wasip2/release/counter.wasm")).map_err(|e| e.to_string())
}

/// The TypeScript counter, built as `wasmkeep dev` builds it.
fn ts_counter() -> Vec<u8> {
    let dir = wasmkeep_tests::repo().join("docs/examples/counter-ts");
    wasmkeep_tests::typescript::npm_component(&dir, "actor", &dir.join("dist/actor.wasm"))
}

async fn measure(wasm: &[u8], n: usize, events: usize, resident: usize, cache: &Path) -> Result<Figures, String> {
    let limits = Limits { idle_secs: 0.2, pool_instances: (resident as u32 + 50).max(1000), ..Limits::default() };
    let config = crate::instantiate::engine_config(&limits);

    // Compiling at deploy: an empty cache each time; then a cache hit.
    let mut compiles = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let runtime: Runtime<MemoryHost, MemoryHost> =
            Runtime::new(&config, Some(dir.path().to_path_buf())).map_err(|e| e.to_string())?;
        let t = Instant::now();
        runtime.load_actor(wasm, &Default::default()).map_err(|e| e.to_string())?;
        compiles.push(t.elapsed());
    }
    compiles.sort();
    let runtime: Runtime<MemoryHost, MemoryHost> =
        Runtime::new(&config, Some(cache.to_path_buf())).map_err(|e| e.to_string())?;
    runtime.load_actor(wasm, &Default::default()).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let component = Arc::new(runtime.load_actor(wasm, &Default::default()).map_err(|e| e.to_string())?);
    let cached = t.elapsed();

    // Raw instantiation, and with the first event.
    let guest = crate::instantiate::RawGuest::new("counter/raw")?;
    let fresh = || guest.instance(&component);
    let peek = GuestEvent::Request(wasmkeep_runtime::Request {
        method: "GET".into(),
        path: "/peek".into(),
        headers: vec![],
        body: vec![],
    });
    let (mut raw, mut raw_event) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        drop(fresh().await?);
        raw.push(t.elapsed());
        let t = Instant::now();
        let mut instance = fresh().await?;
        instance.run(&peek, Instant::now() + Duration::from_secs(30)).await.map_err(|e| format!("{e:?}"))?;
        raw_event.push(t.elapsed());
    }
    drop(component);
    drop(runtime);

    // Through a node: one actor's events, then wakes.
    let node = crate::probe_node::start_with(limits, "languages", "counter", wasm).await?;
    let (node_ref, app) = (&node.node, node.app);
    let actor = |name: &str| RawAddress::split(&format!("counter/{name}")).unwrap();
    let send = async |name: &str, path: &str| {
        let r = node_ref.request_to(app, actor(name), Origin::Outside, get(path)).await.map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("{path}: {}", r.status));
        }
        Ok::<_, String>(())
    };
    send("hot", "/").await?;
    let mut event = Vec::with_capacity(events);
    let started = Instant::now();
    for _ in 0..events {
        let t = Instant::now();
        send("hot", "/").await?;
        event.push(t.elapsed());
    }
    let events_per_sec = events as f64 / started.elapsed().as_secs_f64();

    let sleepers = n.min(200);
    for i in 0..sleepers {
        send(&format!("s{i}"), "/").await?;
    }
    let hibernated = async || {
        while node_ref.awake_actors() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    hibernated().await;
    let mut wake = Vec::with_capacity(sleepers);
    for i in 0..sleepers {
        let t = Instant::now();
        send(&format!("s{i}"), "/peek").await?;
        wake.push(t.elapsed());
    }
    hibernated().await;
    drop(node);

    // Memory: N actors kept awake (a long idle time) on a fresh node.
    let defaults = Limits::default();
    let limits = Limits { idle_secs: 600.0, pool_instances: resident as u32 + defaults.front_slots + 50, ..defaults };
    let node = crate::probe_node::start_with(limits, "resident", "counter", wasm).await?;
    let one = RawAddress::split("counter/first").unwrap();
    node.node.request_to(node.app, one, Origin::Outside, get("/")).await.map_err(|e| e.to_string())?;
    let before = rss_kib()?;
    for i in 0..resident {
        let a = RawAddress::split(&format!("counter/r{i}")).unwrap();
        node.node.request_to(node.app, a, Origin::Outside, get("/")).await.map_err(|e| e.to_string())?;
    }
    let after = rss_kib()?;
    drop(node);

    Ok(Figures {
        size: wasm.len(),
        compile: compiles[1],
        cached,
        raw: stats::summarize(raw),
        raw_event: stats::summarize(raw_event),
        wake: stats::summarize(wake),
        events_per_sec,
        event: stats::summarize(event),
        rss_per_actor_kib: after.saturating_sub(before) as f64 / resident as f64,
    })
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 300)?;
    let events: usize = flag(args, "--events", 2000)?;
    let resident: usize = flag(args, "--resident", 200)?;
    let rust = rust_counter()?;
    // `--ts FILE` measures another JavaScript component in the counter's place.
    let ts = match args.iter().position(|a| a == "--ts") {
        Some(i) => std::fs::read(args.get(i + 1).ok_or("--ts needs a file")?).map_err(|e| e.to_string())?,
        None => ts_counter(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cache = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (r, t) = rt.block_on(async {
        tokio::spawn(async move {
            let r = measure(&rust, n, events, resident, cache.path()).await?;
            let t = measure(&ts, n, events, resident, cache.path()).await?;
            Ok::<_, String>((r, t))
        })
        .await
        .map_err(|e| e.to_string())?
    })?;
    let ratio = |a: f64, b: f64| format!("{:.1}x", a / b);
    let d = |x: Duration| x.as_secs_f64();
    println!("languages: the counter in Rust and in TypeScript (componentize-js), one run");
    println!("| | Rust | TypeScript | TypeScript / Rust |");
    println!("|---|---|---|---|");
    println!(
        "| component size | {:.2} MiB | {:.2} MiB | {} |",
        r.size as f64 / 1048576.0,
        t.size as f64 / 1048576.0,
        ratio(t.size as f64, r.size as f64)
    );
    println!(
        "| compile at deploy (no cache) | {} | {} | {} |",
        ms(r.compile),
        ms(t.compile),
        ratio(d(t.compile), d(r.compile))
    );
    println!(
        "| load from the compiled cache | {} | {} | {} |",
        ms(r.cached),
        ms(t.cached),
        ratio(d(t.cached), d(r.cached))
    );
    println!(
        "| raw instantiation p50 (the floor) | {} | {} | {} |",
        us(r.raw.p50),
        us(t.raw.p50),
        ratio(d(t.raw.p50), d(r.raw.p50))
    );
    println!(
        "| raw instantiation + first event p50 | {} | {} | {} |",
        us(r.raw_event.p50),
        us(t.raw_event.p50),
        ratio(d(t.raw_event.p50), d(r.raw_event.p50))
    );
    println!(
        "| wake through the node p50 (x its raw + event) | {} ({}) | {} ({}) | {} |",
        us(r.wake.p50),
        ratio(d(r.wake.p50), d(r.raw_event.p50)),
        us(t.wake.p50),
        ratio(d(t.wake.p50), d(t.raw_event.p50)),
        ratio(d(t.wake.p50), d(r.wake.p50))
    );
    println!(
        "| one actor's events/s (a write each) | {:.0} (p50 {}) | {:.0} (p50 {}) | {} |",
        r.events_per_sec,
        us(r.event.p50),
        t.events_per_sec,
        us(t.event.p50),
        ratio(t.events_per_sec, r.events_per_sec)
    );
    println!(
        "| RSS per awake actor | {:.0} KiB | {:.0} KiB | {} |",
        r.rss_per_actor_kib,
        t.rss_per_actor_kib,
        ratio(t.rss_per_actor_kib, r.rss_per_actor_kib.max(1.0))
    );
    println!("languages: wake n={} and {}; raw n={}", r.wake.n, t.wake.n, r.raw.n);
    Ok(())
}
