//! The host's cost over raw instantiation. Three layers, one run, one
//! component (the probe), one pooling engine:
//!
//! 1. raw: a `Store` and an instance from the component's `InstancePre`;
//! 2. raw + event: the same, then `on-request` (`GET /peek`, one storage
//!    read from an in-memory map);
//! 3. wasmkeep: the same event to a hibernated actor through the node
//!    (mailbox task, admission, owner epoch in SQLite, pool lease,
//!    instantiation, a storage read from SQLite, storage gate), one
//!    hibernated actor after another.
//!
//! `--gap-ms N` pauses before every sample of every layer, to see each
//! with the caches and the CPU cooled as for a lone request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmkeep_core::{Limits, RawAddress};
use wasmkeep_runtime::{
    ActorHost, CallError, EngineConfig, GuestEvent, GuestHost, Page, Request, Response, Runtime, SocketError,
    SocketSend, StorageError,
};

use crate::{flag, stats};

/// A host that keeps storage in memory: what a bare embedding would do.
#[derive(Default)]
pub(crate) struct MemoryHost {
    kv: BTreeMap<String, Vec<u8>>,
    values: BTreeMap<String, String>,
    trace: wasmkeep_core::TraceContext,
}

impl GuestHost for MemoryHost {
    fn values(&self) -> &BTreeMap<String, String> {
        &self.values
    }
    fn trace(&self) -> &wasmkeep_core::TraceContext {
        &self.trace
    }
    async fn call(&mut self, _address: String, _request: Request) -> Result<Response, CallError> {
        Err(CallError::Failed("no calls in this benchmark".into()))
    }
    async fn call_many(&mut self, calls: Vec<(String, Request)>) -> Vec<Result<Response, CallError>> {
        calls.iter().map(|_| Err(CallError::Failed("no calls in this benchmark".into()))).collect()
    }
}

impl ActorHost for MemoryHost {
    fn address(&self) -> String {
        "probe/raw".into()
    }
    async fn storage_get(&mut self, key: String) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.kv.get(&key).cloned())
    }
    async fn storage_set(&mut self, key: String, value: Vec<u8>) -> Result<(), StorageError> {
        self.kv.insert(key, value);
        Ok(())
    }
    async fn storage_delete(&mut self, key: String) -> Result<(), StorageError> {
        self.kv.remove(&key);
        Ok(())
    }
    async fn storage_list(&mut self, _p: String, _c: Option<String>, _l: u32) -> Result<Page, StorageError> {
        Ok(Page { entries: vec![], cursor: None })
    }
    fn storage_delete_all(&mut self) -> Result<(), StorageError> {
        self.kv.clear();
        Ok(())
    }
    fn delete_self(&mut self) {}
    async fn socket_send(&mut self, _conn: u64, _message: SocketSend) -> Result<Result<(), SocketError>, String> {
        Ok(Err(SocketError::NoSuchSocket))
    }
    fn socket_list(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// A bare engine sized by `limits`, one guest computing at a time, its
/// guests' lines dropped.
pub(crate) fn engine_config(limits: &Limits) -> EngineConfig {
    let logs =
        wasmkeep_telemetry::logs::GuestLogs::new(wasmkeep_telemetry::logs::LogRates { per_actor: 0, per_app: 0 });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    EngineConfig { busy_guests: 1, ..EngineConfig::new(limits, cores, Arc::new(logs)) }
}

/// A raw instance of an actor, given what the node would give it: its log
/// label and an open egress.
pub(crate) struct RawGuest {
    label: wasmkeep_runtime::GuestLabel,
    egress: wasmkeep_runtime::Egress,
}

impl RawGuest {
    pub(crate) fn new(address: &str) -> Result<Self, String> {
        let app = wasmkeep_core::AppRef {
            id: wasmkeep_core::AppId(1),
            tenant: wasmkeep_core::TenantId::parse("bench").map_err(|e| e.to_string())?,
            name: wasmkeep_core::AppName::parse("app").map_err(|e| e.to_string())?,
        };
        let address = wasmkeep_core::Address::parse(address).map_err(|e| e.to_string())?;
        let label = wasmkeep_runtime::GuestLabel::actor(&app, &address);
        let open = std::sync::Arc::new(wasmkeep_core::egress::EgressPolicy::Open);
        let tls = wasmkeep_runtime::egress_tls::client_config(b"").map_err(|e| e.to_string())?;
        Ok(Self { label, egress: wasmkeep_runtime::Egress::for_app("bench/app".into(), open, tls) })
    }

    /// A fresh instance of `component` from the pool.
    pub(crate) async fn instance(
        &self,
        component: &Arc<wasmkeep_runtime::ActorComponent<MemoryHost>>,
    ) -> Result<wasmkeep_runtime::ActorInstance<MemoryHost>, String> {
        let ends = Instant::now() + Duration::from_secs(30);
        let cpu = wasmkeep_runtime::GuestShare::default();
        component
            .instantiate(MemoryHost::default(), self.label.clone(), self.egress.clone(), cpu, ends)
            .await
            .map_err(|e| format!("{e:?}"))
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 2000)?;
    let gap = Duration::from_millis(flag(args, "--gap-ms", 0u64)?);
    // More rounds of wakes (all measured) make a profile of the host's part.
    let rounds: usize = flag(args, "--wake-rounds", 1)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(flag(args, "--threads", 2)?)
        .enable_all()
        .build()
        .unwrap();
    // On a worker thread, as a request is: block_on's own thread is not
    // one, and a hop to a worker would be counted as the host's.
    let body = async move {
        let probe = wasmkeep_tests::guests().probe.clone();
        let limits = Limits { idle_secs: 0.05, ..Limits::default() };
        let engine = engine_config(&limits);
        let runtime: Runtime<MemoryHost, MemoryHost> =
            Runtime::new(&engine, Some(wasmkeep_tests::cache_dir())).map_err(|e| e.to_string())?;
        let component = Arc::new(runtime.load_actor(&probe, &Default::default()).map_err(|e| e.to_string())?);
        let peek = Request { method: "GET".into(), path: "/peek".into(), headers: vec![], body: vec![] };
        let peek_event = GuestEvent::Request(peek.clone());

        // A pause before each sample, as a hibernated actor has before it
        // wakes: caches and the CPU cool down in it.
        let mut raw = Vec::with_capacity(n);
        let mut raw_event = Vec::with_capacity(n);
        let guest = RawGuest::new("probe/raw")?;
        // A fresh instance from the pool, timed with what follows it.
        let fresh = || guest.instance(&component);
        for _ in 0..n {
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            let t = Instant::now();
            let instance = fresh().await?;
            raw.push(t.elapsed());
            drop(instance);
            let t = Instant::now();
            let mut instance = fresh().await?;
            instance.run(&peek_event, Instant::now() + Duration::from_secs(30)).await.map_err(|e| format!("{e:?}"))?;
            raw_event.push(t.elapsed());
        }
        // The same, but holding the last 100 instances live, so each one
        // takes another pool slot, as a node's many actors do: its memory
        // and caches are cold, where the loop above reuses one warm slot.
        let mut rotating = Vec::with_capacity(n);
        let mut held = std::collections::VecDeque::new();
        for _ in 0..n {
            let t = Instant::now();
            let mut instance = fresh().await?;
            instance.run(&peek_event, Instant::now() + Duration::from_secs(30)).await.map_err(|e| format!("{e:?}"))?;
            rotating.push(t.elapsed());
            held.push_back(instance);
            if held.len() > 100 {
                held.pop_front();
            }
        }
        drop(held);

        let probe_node = crate::probe_node::start(limits, "raw").await?;
        let (node, app) = (&probe_node.node, probe_node.app);
        // Hibernated actors woken one after another, as the raw layers run
        // one instantiation after another.
        let actors = (n / 4).max(1);
        let target = |i: usize| RawAddress::split(&format!("probe/raw-{i}")).unwrap();
        for i in 0..actors {
            node.request_to(app, target(i), wasmkeep_core::Origin::Outside, peek.clone())
                .await
                .map_err(|e| e.to_string())?;
        }
        while node.awake_actors() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut hosted = Vec::with_capacity(actors * rounds);
        for _ in 0..rounds {
            for i in 0..actors {
                if !gap.is_zero() {
                    tokio::time::sleep(gap).await;
                }
                let t = Instant::now();
                node.request_to(app, target(i), wasmkeep_core::Origin::Outside, peek.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                hosted.push(t.elapsed());
            }
            while node.awake_actors() > 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }

        let (raw, raw_event, hosted) = (stats::summarize(raw), stats::summarize(raw_event), stats::summarize(hosted));
        let rotating = stats::summarize(rotating);
        println!("instantiate: raw instantiation: {raw}");
        println!("instantiate: raw instantiation + GET /peek: {raw_event}");
        println!("instantiate: raw instantiation + GET /peek, 100 instances live: {rotating}");
        println!("instantiate: wasmkeep, the same event waking a hibernated actor: {hosted}");
        println!(
            "instantiate: the host adds {:.1}µs at p50 over raw instantiation + event ({:.2}x)",
            (hosted.p50.as_secs_f64() - raw_event.p50.as_secs_f64()) * 1e6,
            hosted.p50.as_secs_f64() / raw_event.p50.as_secs_f64()
        );
        println!(
            "instantiate: over the floor with 100 instances live, the host adds {:.1}µs at p50 ({:.2}x)",
            (hosted.p50.as_secs_f64() - rotating.p50.as_secs_f64()) * 1e6,
            hosted.p50.as_secs_f64() / rotating.p50.as_secs_f64()
        );
        Ok(())
    };
    rt.block_on(async { tokio::spawn(body).await.map_err(|e| e.to_string())? })
}
