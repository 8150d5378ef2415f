//! A node shared by tenants who do not trust each other (issue 23):
//! `wasmkeep serve` in its own process, a quiet tenant sending 40
//! requests a second (`--quiet-rate`) to its 20 actors, alone and then beside each of three
//! others in turn:
//!
//! - **memory**: a tenant filling its plan's memory: 64 of its 200 actors
//!   at a time each taking what it is granted of 60 MiB and holding it for
//!   3 s, then the next (12 GiB by its plan; the node's guest budget is
//!   `--budget-mib`, 3,072 by default), over and over;
//! - **aliasing**: 32 front requests at once, each asking `fields.from-list`
//!   for 100,000 values that alias one 1 KiB buffer (100 MiB to copy);
//! - **plain fronts**, the aliasing phase's control: the same 32 requests
//!   at once to the same front, each asking for one value (answered);
//! - **uploads**: 4 big uploads at once, queued behind each other for the
//!   compile threads, again and again.
//!
//! Those neighbours' plans have no request rates (what is measured is the
//! node's shares, not the rates); the first three then run again on the
//! free plan as shipped (50 requests a second, a burst of 100, 20 actor
//! creations a second): what a tenant within its plan can do. On this
//! machine every client shares the node's two cores, which real clients
//! elsewhere would not: the neighbours' client threads run at nice 19, and
//! the quiet tenant's runs first whenever it is ready (`SCHED_FIFO`;
//! `--quiet-first 0` puts it at the node's priority, where waiting for a
//! core is counted as the node's latency).
//!
//! Each phase records the quiet tenant's p50 and p99 (the goal: within 2x
//! of alone) and the node's largest RSS (the goal: within the guests'
//! budget and what the node keeps). Then a big component's compile time
//! with wasmtime's parallel compilation against the node's one niced
//! thread, in this process: what keeping a compile to one core costs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::{flag, probe_process, serve_process, stats};

/// One request over a fresh connection: its status and body (status 0
/// and the error when it could not be made).
async fn request(
    addr: &str,
    method: &str,
    host: &str,
    path: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (u16, String) {
    serve_process::request(addr, method, host, path, token, body).await.unwrap_or_else(|e| (0, e))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Signs `tenant` up and creates its app `app`; answers its token.
async fn tenant(api: &str, tenant: &str) -> Result<String, String> {
    let body = format!("{{\"name\":\"{tenant}\"}}").into_bytes();
    with_app(api, request(api, "POST", "api", "/v1/tenants", None, body).await).await
}

/// `tenant` on `plan`, made by the operator, with its app `app`; answers
/// its token.
async fn tenant_on(api: &str, data: &std::path::Path, tenant: &str, plan: &str) -> Result<String, String> {
    let operator = std::fs::read_to_string(data.join("data/operator-token")).map_err(|e| e.to_string())?;
    let body = format!("{{\"name\":\"{tenant}\",\"plan\":\"{plan}\"}}").into_bytes();
    with_app(api, request(api, "POST", "api", "/v1/tenants", Some(operator.trim()), body).await).await
}

/// From a tenant's creation answer, its token, once its app `app` is made.
async fn with_app(api: &str, (status, body): (u16, String)) -> Result<String, String> {
    if status != 201 {
        return Err(format!("tenant: {status} {body}"));
    }
    let token = body.split("\"token\":\"").nth(1).and_then(|r| r.split('"').next()).ok_or("no token")?.to_owned();
    let (status, body) = request(api, "PUT", "api", "/v1/apps/app", Some(&token), Vec::new()).await;
    if status != 201 {
        return Err(format!("app: {status} {body}"));
    }
    Ok(token)
}

/// Uploads `bundle` as a version of `token`'s app: its status and answer.
async fn upload(api: &str, token: &str, bundle: Vec<u8>) -> (u16, String) {
    request(api, "POST", "api", "/v1/apps/app/versions", Some(token), bundle).await
}

async fn deploy(api: &str, token: &str, bundle: Vec<u8>) -> Result<(), String> {
    let (status, body) = upload(api, token, bundle).await;
    if status != 201 {
        return Err(format!("upload: {status} {body}"));
    }
    let (status, body) = request(api, "POST", "api", "/v1/apps/app/versions/1/activate", Some(token), Vec::new()).await;
    if status != 200 {
        return Err(format!("activate: {status} {body}"));
    }
    Ok(())
}

/// The quiet tenant: `rate` requests a second, paced, over its 20 actors,
/// for `length`; each latency, and the failures.
async fn quiet(addr: &str, rate: u32, length: Duration) -> Result<(Vec<Duration>, u64), String> {
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
        let path = format!("/actor/probe/q{}/ping", i % 20);
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

/// What a neighbour does, over and over until `stop`, on its own thread.
#[derive(Clone, Copy)]
enum Neighbour {
    Memory,
    Aliasing,
    PlainFronts,
    Uploads,
}

impl Neighbour {
    /// The phase's short name, for `--phases`.
    fn short(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Aliasing => "aliasing",
            Self::PlainFronts => "control",
            Self::Uploads => "uploads",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Memory => "a tenant filling its plan's memory (64 actors at a time holding 60 MiB)",
            Self::Aliasing => "32 fronts copying 100,000 aliased values each",
            Self::PlainFronts => "32 fronts asking for one value each (the control)",
            Self::Uploads => "4 big uploads at once, queued for the compile threads",
        }
    }
}

/// A bundle of `wasm` that no upload before it sent: the node compiles a
/// component once and keeps it by the hash of its bytes, so the same
/// bytes again would cost it a load from its cache, not a compile. A
/// custom section at the component's end, naming `(worker, round)`, makes
/// the bytes new and leaves the code as it was.
fn heavy_bundle(wasm: &[u8], (worker, round): (u32, u64)) -> Vec<u8> {
    let name = b"wasmkeep-loadtest";
    let payload = format!("{worker}/{round}");
    let mut wasm = wasm.to_vec();
    let size = 1 + name.len() + payload.len();
    assert!(size < 128 && name.len() < 128, "one-byte LEB128 lengths");
    wasm.extend([0, size as u8, name.len() as u8]);
    wasm.extend(name);
    wasm.extend(payload.as_bytes());
    format!(
        "{{\"manifest\":{{\"classes\":{{\"heavy\":{{\"access\":\"open\",\"component\":\"c\"}}}}}},\"components\":{{\"c\":\"{}\"}}}}",
        b64(&wasm)
    )
    .into_bytes()
}

/// Runs `neighbour` until `stop`; counts what it sent and what was refused.
fn neighbour_load(
    neighbour: Neighbour,
    public: String,
    api: String,
    (tenant, token): (String, String),
    heavy: Arc<Vec<u8>>,
    (stop, sent, refused): (Arc<AtomicBool>, Arc<AtomicU64>, Arc<AtomicU64>),
) {
    lowest_priority();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (workers, round): (u32, _) = match neighbour {
            Neighbour::Memory => (64, Arc::new(AtomicU64::new(0))),
            Neighbour::Aliasing | Neighbour::PlainFronts => (32, Arc::default()),
            Neighbour::Uploads => (4, Arc::default()),
        };
        let mut tasks = Vec::new();
        for w in 0..workers {
            let (public, api, token, heavy) = (public.clone(), api.clone(), token.clone(), heavy.clone());
            let host = format!("app.{tenant}.localhost");
            let (stop, sent, refused, round) = (stop.clone(), sent.clone(), refused.clone(), round.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let (status, answer) = match neighbour {
                        Neighbour::Memory => {
                            // Its 200 actors in turn, each taking what the
                            // node grants of 60 MiB for 3 s; then the next.
                            let n = round.fetch_add(1, Ordering::Relaxed) % 200;
                            let path = format!("/actor/probe/m{n}/hold?mb=60&ms=3000");
                            request(&public, "GET", &host, &path, None, Vec::new()).await
                        }
                        Neighbour::Aliasing => {
                            let path = "/alias?n=100000&kib=1";
                            request(&public, "GET", &host, path, None, Vec::new()).await
                        }
                        Neighbour::PlainFronts => {
                            let path = "/alias?n=1&kib=1";
                            request(&public, "GET", &host, path, None, Vec::new()).await
                        }
                        Neighbour::Uploads => upload(&api, &token, heavy_bundle(&heavy, (w, i))).await,
                    };
                    sent.fetch_add(1, Ordering::Relaxed);
                    if !(200..300).contains(&status) {
                        // The first refusal of each kind, to read beside the figures.
                        if refused.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!(
                                "{}: first refusal {status} {}",
                                neighbour.name(),
                                answer.lines().next().unwrap_or("")
                            );
                        }
                        // A refused upload waits as a client told to retry.
                        if matches!(neighbour, Neighbour::Uploads) {
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
}

/// The load generator's neighbours run at the lowest priority, in short
/// slices: on this machine they share the node's two cores, and a
/// neighbour's clients computing their requests would take from the node
/// what real clients, elsewhere, never could (once on a core, a thread
/// keeps it for its slice, whatever its priority).
fn lowest_priority() {
    wasmkeep_runtime::slices::set(19, Duration::from_micros(100));
}

/// The quiet tenant's client thread runs first whenever it is ready
/// (`SCHED_FIFO`), as a client on a machine of its own would: on this
/// one it shares two cores with the node's busy workers, and waiting
/// for a core (a scheduler slice, 1.5 ms here) would be counted as the
/// node's latency. It sends 40 requests a second, so it takes nothing
/// from the node. Answers whether the thread got the priority.
fn first_priority() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `sched_setscheduler` reads `param`, which outlives the call;
    // pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) == 0 }
}

/// [`quiet`] on a thread of its own, run first when `first` (and when the
/// machine allows it: answered with the samples).
fn quiet_client(addr: &str, rate: u32, length: Duration, first: bool) -> Result<(Vec<Duration>, u64, bool), String> {
    let addr = addr.to_owned();
    std::thread::spawn(move || {
        let first = first && first_priority();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        let (samples, failed) = rt.block_on(quiet(&addr, rate, length))?;
        Ok((samples, failed, first))
    })
    .join()
    .map_err(|_| "the quiet client panicked".to_owned())?
}

/// The node's largest RSS, sampled every 100 ms until `stop`, in MiB.
fn rss_sampler(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut most = 0;
        while !stop.load(Ordering::Relaxed) {
            most = most.max(probe_process::rss_kib(pid).unwrap_or(0) / 1024);
            std::thread::sleep(Duration::from_millis(100));
        }
        most
    })
}

/// How long compiling `wasm` takes on an engine with wasmtime's parallel
/// compilation, and on one without it (the node's: one thread a compile).
fn compile_times(wasm: &[u8]) -> Result<(Duration, Duration), String> {
    let time = |parallel: bool| -> Result<Duration, String> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).parallel_compilation(parallel);
        let engine = wasmtime::Engine::new(&config).map_err(|e| e.to_string())?;
        let t = Instant::now();
        wasmtime::component::Component::new(&engine, wasm).map_err(|e| e.to_string())?;
        Ok(t.elapsed())
    };
    Ok((time(true)?, time(false)?))
}

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 15.0)?;
    let budget_mib: u64 = flag(args, "--budget-mib", 3072)?;
    // 0: the node's default (its cores); set to compare.
    let guests_at_once: u32 = flag(args, "--guests-at-once", 0)?;
    // 40 a second, 600 samples in 15 s: the p99 is the sixth-slowest,
    // not (at 10, 150 samples) the second, one stall's worth.
    let quiet_rate: u32 = flag(args, "--quiet-rate", 40)?;
    // 0: the quiet client at the node's priority, sharing its cores' slices.
    let quiet_first: u8 = flag(args, "--quiet-first", 1)?;
    let quiet_first = quiet_first != 0;
    // Which phases run after the quiet tenant alone: all by default, or a
    // comma-separated list of `memory`, `aliasing`, `control`, `uploads`,
    // each with `-rated` for the free plan's rates (`--phases aliasing`).
    let only: String = flag(args, "--phases", String::new())?;
    let only: Vec<&str> = only.split(',').filter(|p| !p.is_empty()).collect();
    // The neighbours may send as fast as they like: what is measured is the
    // node's shares, not the plans' rates. An upload is up to 64 MiB.
    let plan = [
        ("requests_per_second", "100000"),
        ("request_burst", "100000"),
        ("actor_creations_per_second", "100000"),
        ("events_per_second_per_actor", "100000"),
        ("upload_bytes", "67108864"),
    ];
    let limits = format!(
        "guest_memory_bytes = {}\npool_instances = 400\nfront_slots = 64\nuploads_per_tenant = 4\nidle_secs = 600.0\nguests_at_once = {guests_at_once}\n",
        budget_mib << 20
    );
    let (server, api, data) = serve_process::start(&plan, &limits)?;

    let g = wasmkeep_tests::guests();
    let probe_bundle = format!(
        "{{\"manifest\":{{\"classes\":{{\"probe\":{{\"access\":\"open\",\"component\":\"p\"}}}}}},\"components\":{{\"p\":\"{}\"}}}}",
        b64(&g.probe)
    );
    let alias_bundle = format!(
        "{{\"manifest\":{{\"front\":\"w\",\"classes\":{{}}}},\"components\":{{\"w\":\"{}\"}}}}",
        b64(&g.raw_front)
    );
    // About 4 MB of component, 1.6 s of compile on one thread each.
    let heavy_wasm = wasmkeep_tests::slow_to_compile(7, 6000);
    let heavy = Arc::new(heavy_wasm);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rows = rt.block_on(async {
        let quiet_token = tenant(&api, "quiet").await?;
        deploy(&api, &quiet_token, probe_bundle.clone().into_bytes()).await?;
        let hog = tenant(&api, "hog").await?;
        deploy(&api, &hog, probe_bundle.clone().into_bytes()).await?;
        let alias = tenant(&api, "alias").await?;
        deploy(&api, &alias, alias_bundle.clone().into_bytes()).await?;
        let uploader = tenant(&api, "uploads").await?;
        // The same neighbours on the free plan as shipped, its rates kept.
        let hog_rated = tenant_on(&api, data.path(), "hograted", "shipped").await?;
        deploy(&api, &hog_rated, probe_bundle.clone().into_bytes()).await?;
        let alias_rated = tenant_on(&api, data.path(), "aliasrated", "shipped").await?;
        deploy(&api, &alias_rated, alias_bundle.clone().into_bytes()).await?;
        // Warm: the quiet tenant's 20 actors are resident.
        quiet(&server.addr, 20, Duration::from_secs(2)).await?;
        let length = Duration::from_secs_f64(secs);
        let mut rows = Vec::new();
        let stop_rss = Arc::new(AtomicBool::new(false));
        let rss = rss_sampler(server.pid(), stop_rss.clone());
        let (alone, failed, first) = quiet_client(&server.addr, quiet_rate, length, quiet_first)?;
        stop_rss.store(true, Ordering::Relaxed);
        rows.push(("alone".to_owned(), stats::summarize(alone), failed, rss.join().unwrap_or(0), 0, 0));
        let phases = [
            (Neighbour::Memory, "hog", &hog),
            (Neighbour::Aliasing, "alias", &alias),
            (Neighbour::PlainFronts, "alias", &alias),
            (Neighbour::Uploads, "uploads", &uploader),
            (Neighbour::Memory, "hograted", &hog_rated),
            (Neighbour::Aliasing, "aliasrated", &alias_rated),
            (Neighbour::PlainFronts, "aliasrated", &alias_rated),
        ];
        let chosen = |neighbour: Neighbour, name: &str| {
            let rated = if name.ends_with("rated") { "-rated" } else { "" };
            only.is_empty() || only.contains(&format!("{}{rated}", neighbour.short()).as_str())
        };
        for (neighbour, name, token) in phases.into_iter().filter(|(n, name, _)| chosen(*n, name)) {
            let (stop, sent, refused) = (Arc::new(AtomicBool::new(false)), Arc::default(), Arc::default());
            let thread = {
                let (public, api, heavy) = (server.addr.clone(), api.clone(), heavy.clone());
                let (stop, sent, refused) = (stop.clone(), Arc::clone(&sent), Arc::clone(&refused));
                let who = (name.to_owned(), token.clone());
                std::thread::spawn(move || neighbour_load(neighbour, public, api, who, heavy, (stop, sent, refused)))
            };
            tokio::time::sleep(Duration::from_secs(2)).await;
            let stop_rss = Arc::new(AtomicBool::new(false));
            let rss = rss_sampler(server.pid(), stop_rss.clone());
            let (beside, failed, _) = quiet_client(&server.addr, quiet_rate, length, quiet_first)?;
            stop.store(true, Ordering::Relaxed);
            stop_rss.store(true, Ordering::Relaxed);
            let _ = thread.join();
            let (sent, refused): (&AtomicU64, &AtomicU64) = (&sent, &refused);
            rows.push((
                match name.ends_with("rated") {
                    true => format!("beside {}, at the free plan's rates", neighbour.name()),
                    false => format!("beside {}", neighbour.name()),
                },
                stats::summarize(beside),
                failed,
                rss.join().unwrap_or(0),
                sent.load(Ordering::Relaxed),
                refused.load(Ordering::Relaxed),
            ));
        }
        Ok::<_, String>((rows, first))
    })?;
    let (rows, quiet_first) = rows;

    let (parallel, single) = compile_times(&wasmkeep_tests::slow_to_compile(7, 6000))?;
    println!(
        "shared-node: the quiet tenant at {quiet_rate} req/s to 20 actors, {secs} s a phase; guests' memory budget {budget_mib} MiB; its client {}",
        match quiet_first {
            true => "runs first when ready (SCHED_FIFO), as on a machine of its own",
            false => "shares the node's cores at the node's priority",
        }
    );
    println!("| quiet tenant | p50 | p99 | p99 / alone | failed | node RSS, most | neighbour's requests (not 2xx) |");
    println!("|---|---|---|---|---|---|---|");
    let alone = rows[0].1.p99.as_secs_f64();
    for (name, s, failed, rss, sent, refused) in &rows {
        println!(
            "| {name} | {:?} | {:?} | {:.2}x | {failed} | {rss} MiB | {sent} ({refused}) |",
            s.p50,
            s.p99,
            s.p99.as_secs_f64() / alone
        );
    }
    println!(
        "compile of a {} KB component: {:?} with wasmtime's parallel compilation, {:?} on one thread ({:.2}x)",
        heavy.len() / 1000,
        parallel,
        single,
        single.as_secs_f64() / parallel.as_secs_f64()
    );
    Ok(())
}
