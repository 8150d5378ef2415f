//! Each tenant's own trace export (ADR 0023): a tenant names an OTLP/HTTP
//! endpoint and headers; the spans of its apps (those whose
//! `wasmkeep.tenant` is it) go there, beside the operator's export, never
//! another tenant's and never the node's own (a span without a tenant).
//!
//! Exporting never slows a request: a span is handed to its tenant's
//! bounded queue or dropped (counted); each tenant's task batches its
//! queue and posts it, under the node's egress policy (the endpoint's
//! addresses checked, the checked address connected to), with a timeout.
//! A failed post drops its batch (counted).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::Value;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use prost::Message;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use wasmkeep_core::egress::EgressPolicy;

use crate::{Exposition, Source};

/// Spans a tenant's queue holds; past it, its spans are dropped.
pub const QUEUE_SPANS: usize = 2048;
/// Spans one post carries at most.
pub const BATCH_SPANS: usize = 512;
/// How long a batch gathers before it is posted.
pub const BATCH_WAIT: Duration = Duration::from_secs(1);
/// A post's connection, TLS, request and answer, all told.
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);
pub const ENDPOINT_BYTES_MAX: usize = 2048;
pub const HEADERS_MAX: usize = 16;
pub const HEADER_BYTES_MAX: usize = 4096;

/// What a tenant sets: where its spans go, and the headers they carry
/// (credentials: shown by name only, stored sealed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportSettings {
    /// The collector's OTLP/HTTP base URL; `/v1/traces` is added.
    pub endpoint: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// A checked endpoint: where to connect and what to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// The request's path: the endpoint's, with `/v1/traces`.
    pub path: String,
}

/// Headers a tenant may not set: the request's own.
const RESERVED: &[&str] =
    &["host", "content-type", "content-length", "transfer-encoding", "connection", "te", "upgrade"];

impl ExportSettings {
    /// The settings checked: one line saying what is wrong, if anything.
    pub fn check(&self) -> Result<Endpoint, String> {
        if self.endpoint.len() > ENDPOINT_BYTES_MAX {
            return Err(format!("endpoint: longer than {ENDPOINT_BYTES_MAX} bytes"));
        }
        let uri: http::Uri =
            self.endpoint.parse().map_err(|_| "endpoint: not a URL (http://host:port or https://…)".to_owned())?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("endpoint: the scheme must be http or https".into()),
        };
        let authority = uri.authority().ok_or("endpoint: no host")?;
        if authority.as_str().contains('@') {
            return Err("endpoint: credentials go in headers, not in the URL".into());
        }
        if uri.query().is_some() {
            return Err("endpoint: no query".into());
        }
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if host.is_empty() {
            return Err("endpoint: no host".into());
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path = format!("{}/v1/traces", uri.path().trim_end_matches('/'));
        if self.headers.len() > HEADERS_MAX {
            return Err(format!("headers: more than {HEADERS_MAX}"));
        }
        for (name, value) in &self.headers {
            let parsed = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers: {name:?} is not a header name"))?;
            if RESERVED.contains(&parsed.as_str()) || parsed.as_str().starts_with("x-wasmkeep-") {
                return Err(format!("headers: {name} is the request's own"));
            }
            if value.len() > HEADER_BYTES_MAX || http::HeaderValue::from_str(value).is_err() {
                return Err(format!(
                    "headers: the value of {name} is not a header value of at most {HEADER_BYTES_MAX} bytes"
                ));
            }
        }
        Ok(Endpoint { https, host, port, path })
    }
}

/// Where tenants' exports may go: the node's egress policy, and the hosts
/// the operator lets them reach whatever their addresses (a collector
/// gateway on the operator's own network).
#[derive(Debug, Clone)]
pub struct ExportPolicy {
    pub egress: EgressPolicy,
    pub also: Vec<String>,
}

impl ExportPolicy {
    fn operator_allows(&self, host: &str) -> bool {
        self.also.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Whether `host` may be named at all (before it is resolved): a host
    /// the policy refuses by name, or an address it refuses, is refused.
    pub fn allows_host(&self, host: &str) -> Result<(), String> {
        if self.operator_allows(host) {
            return Ok(());
        }
        if !self.egress.allows_host(host) {
            return Err(format!("endpoint: {host} is not a host this node's egress policy lets tenants reach"));
        }
        if let Ok(ip) = host.parse::<std::net::IpAddr>()
            && !self.egress.allows_addr(ip)
        {
            return Err(format!("endpoint: {host} is not a public address"));
        }
        Ok(())
    }

    /// The addresses of `endpoint` a post may connect to: some, or the
    /// failure's name (`denied`: none the policy allows; `dns`).
    pub async fn addresses(&self, endpoint: &Endpoint) -> Result<Vec<SocketAddr>, &'static str> {
        self.allows_host(&endpoint.host).map_err(|_| "denied")?;
        let resolved = tokio::net::lookup_host((endpoint.host.as_str(), endpoint.port)).await.map_err(|_| "dns")?;
        let operator = self.operator_allows(&endpoint.host);
        let allowed: Vec<SocketAddr> = resolved.filter(|a| operator || self.egress.allows_addr(a.ip())).collect();
        if allowed.is_empty() {
            return Err("denied");
        }
        Ok(allowed)
    }
}

/// What happened to a tenant's spans, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExportCounts {
    pub exported: u64,
    /// Dropped at a full queue (the endpoint is slower than the spans come).
    pub dropped: u64,
    /// In a post that failed (refused by policy, unreachable, not 2xx).
    pub failed: u64,
}

struct Tenant {
    queue: mpsc::Sender<SpanData>,
    task: tokio::task::JoinHandle<()>,
}

/// The node's tenants' exports: set and removed as tenants ask, fed by
/// [`TenantSpans`].
pub struct TenantExports {
    policy: ExportPolicy,
    tls: Arc<rustls::ClientConfig>,
    tenants: RwLock<HashMap<String, Tenant>>,
    counts: Arc<Mutex<BTreeMap<String, ExportCounts>>>,
    resource: RwLock<Resource>,
}

impl std::fmt::Debug for TenantExports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantExports").field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl TenantExports {
    pub fn new(policy: ExportPolicy, tls: Arc<rustls::ClientConfig>) -> Arc<Self> {
        Arc::new(Self {
            policy,
            tls,
            tenants: RwLock::default(),
            counts: Arc::default(),
            resource: RwLock::new(Resource::builder_empty().build()),
        })
    }

    /// Checks `settings` as an API request would: one line.
    pub fn check(&self, settings: &ExportSettings) -> Result<Endpoint, String> {
        let endpoint = settings.check()?;
        self.policy.allows_host(&endpoint.host)?;
        Ok(endpoint)
    }

    /// Checks `settings` and resolves their host now: a name with no
    /// address the policy allows is refused when set, not only later.
    pub async fn check_resolved(&self, settings: &ExportSettings) -> Result<Endpoint, String> {
        let endpoint = self.check(settings)?;
        match self.policy.addresses(&endpoint).await {
            Ok(_) => Ok(endpoint),
            Err("dns") => Err(format!("endpoint: {} does not resolve", endpoint.host)),
            Err(_) => Err(format!("endpoint: {} resolves to no public address", endpoint.host)),
        }
    }

    /// Sends `tenant`'s spans to `settings` from now on (`None`: nowhere).
    /// Must run on the node's runtime.
    pub fn set(&self, tenant: &str, settings: Option<ExportSettings>) -> Result<(), String> {
        let next = match settings {
            Some(settings) => {
                let endpoint = self.check(&settings)?;
                let (queue, spans) = mpsc::channel(QUEUE_SPANS);
                let post = Post {
                    tenant: tenant.to_owned(),
                    endpoint,
                    headers: settings.headers,
                    policy: self.policy.clone(),
                    tls: self.tls.clone(),
                    resource: self.resource.read().unwrap_or_else(|p| p.into_inner()).clone(),
                    counts: self.counts.clone(),
                };
                Some(Tenant { queue, task: tokio::spawn(post.run(spans)) })
            }
            None => None,
        };
        let mut tenants = self.tenants.write().unwrap_or_else(|p| p.into_inner());
        let old = match next {
            Some(next) => tenants.insert(tenant.to_owned(), next),
            None => tenants.remove(tenant),
        };
        // The old task posts what it holds, then ends with its queue.
        drop(old.map(|t| t.queue));
        Ok(())
    }

    /// What happened to `tenant`'s spans.
    pub fn counts(&self, tenant: &str) -> ExportCounts {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).copied().unwrap_or_default()
    }

    /// Hands a finished span to its tenant's queue, if its tenant exports.
    fn route(&self, span: SpanData) {
        let Some(tenant) = tenant_of(&span) else { return };
        let tenants = self.tenants.read().unwrap_or_else(|p| p.into_inner());
        let Some(export) = tenants.get(&tenant) else { return };
        if export.queue.try_send(span).is_err() {
            drop(tenants);
            self.counts.lock().unwrap_or_else(|p| p.into_inner()).entry(tenant).or_default().dropped += 1;
        }
    }
}

impl Drop for TenantExports {
    fn drop(&mut self) {
        for (_, tenant) in self.tenants.get_mut().unwrap_or_else(|p| p.into_inner()).drain() {
            tenant.task.abort();
        }
    }
}

/// The tenant a span belongs to: its `wasmkeep.tenant`; none for the
/// node's own spans.
fn tenant_of(span: &SpanData) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == "wasmkeep.tenant").and_then(|kv| match &kv.value {
        Value::String(s) if !s.as_str().is_empty() => Some(s.as_str().to_owned()),
        _ => None,
    })
}

/// The span processor that feeds [`TenantExports`], beside the operator's.
#[derive(Debug, Clone)]
pub struct TenantSpans(pub Arc<TenantExports>);

impl SpanProcessor for TenantSpans {
    fn on_start(&self, _span: &mut Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        self.0.route(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        *self.0.resource.write().unwrap_or_else(|p| p.into_inner()) = resource.clone();
    }
}

/// One tenant's export: its queue, batched and posted.
struct Post {
    tenant: String,
    endpoint: Endpoint,
    headers: BTreeMap<String, String>,
    policy: ExportPolicy,
    tls: Arc<rustls::ClientConfig>,
    resource: Resource,
    counts: Arc<Mutex<BTreeMap<String, ExportCounts>>>,
}

impl Post {
    async fn run(self, mut spans: mpsc::Receiver<SpanData>) {
        let mut batch = Vec::with_capacity(BATCH_SPANS);
        loop {
            // The first span starts a batch; the batch goes when full, or
            // when it has gathered for BATCH_WAIT, or the queue ends.
            let Some(first) = spans.recv().await else { return };
            batch.push(first);
            let gathering = tokio::time::sleep(BATCH_WAIT);
            tokio::pin!(gathering);
            let mut ended = false;
            while batch.len() < BATCH_SPANS {
                tokio::select! {
                    next = spans.recv() => match next {
                        Some(span) => batch.push(span),
                        None => { ended = true; break; }
                    },
                    () = &mut gathering => break,
                }
            }
            let n = batch.len() as u64;
            let posted = tokio::time::timeout(POST_TIMEOUT, self.post(std::mem::take(&mut batch))).await;
            let outcome = posted.unwrap_or(Err("timeout"));
            {
                let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
                let counts = counts.entry(self.tenant.clone()).or_default();
                match outcome {
                    Ok(()) => counts.exported += n,
                    Err(_) => counts.failed += n,
                }
            }
            if let Err(why) = outcome {
                tracing::info!(tenant = %self.tenant, host = %self.endpoint.host, "a tenant's span export failed: {why}");
            }
            if ended {
                return;
            }
        }
    }

    /// Posts `batch` as one OTLP/HTTP protobuf request; the failure's name.
    async fn post(&self, batch: Vec<SpanData>) -> Result<(), &'static str> {
        let resource = ResourceAttributesWithSchema::from(&self.resource);
        let body = ExportTraceServiceRequest { resource_spans: group_spans_by_resource_and_scope(batch, &resource) }
            .encode_to_vec();
        let addresses = self.policy.addresses(&self.endpoint).await?;
        let mut tcp = None;
        for addr in addresses {
            if let Ok(stream) = tokio::net::TcpStream::connect(addr).await {
                tcp = Some(stream);
                break;
            }
        }
        let tcp = tcp.ok_or("connect")?;
        let io: Box<dyn Io> = if self.endpoint.https {
            let name = rustls::pki_types::ServerName::try_from(self.endpoint.host.clone()).map_err(|_| "tls")?;
            let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp).await.map_err(|_| "tls")?;
            Box::new(tls)
        } else {
            Box::new(tcp)
        };
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io)).await.map_err(|_| "connect")?;
        let connection = tokio::spawn(connection);
        let mut request = http::Request::post(self.endpoint.path.as_str())
            .header(http::header::HOST, host_header(&self.endpoint))
            .header(http::header::CONTENT_TYPE, "application/x-protobuf");
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request.body(http_body_util::Full::new(Bytes::from(body))).map_err(|_| "request")?;
        let answer = sender.send_request(request).await.map_err(|_| "connect");
        connection.abort();
        match answer?.status() {
            s if s.is_success() => Ok(()),
            _ => Err("refused"),
        }
    }
}

fn host_header(endpoint: &Endpoint) -> String {
    let host = if endpoint.host.contains(':') { format!("[{}]", endpoint.host) } else { endpoint.host.clone() };
    match (endpoint.https, endpoint.port) {
        (true, 443) | (false, 80) => host,
        (_, port) => format!("{host}:{port}"),
    }
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

impl Source for TenantExports {
    fn collect(&self, out: &mut Exposition) {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let of = |pick: fn(&ExportCounts) -> u64| -> Vec<(crate::Labels, u64)> {
            counts.iter().map(|(tenant, c)| (vec![("tenant", tenant.clone())], pick(c))).collect()
        };
        out.counter(
            "wasmkeep_tenant_spans_exported_total",
            "Spans posted to tenants' own endpoints, by tenant.",
            of(|c| c.exported),
        );
        out.counter(
            "wasmkeep_tenant_spans_dropped_total",
            "Spans dropped at a tenant's full export queue, by tenant.",
            of(|c| c.dropped),
        );
        out.counter(
            "wasmkeep_tenant_spans_failed_total",
            "Spans in posts to tenants' endpoints that failed (refused by the egress policy, unreachable, not 2xx), by tenant.",
            of(|c| c.failed),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: &str) -> ExportSettings {
        ExportSettings { endpoint: endpoint.into(), headers: BTreeMap::new() }
    }

    #[test]
    fn an_endpoint_is_an_http_url_with_a_host_and_no_credentials() {
        let e = settings("https://otel.example.com/otlp/").check().unwrap();
        assert_eq!(
            (e.https, e.host.as_str(), e.port, e.path.as_str()),
            (true, "otel.example.com", 443, "/otlp/v1/traces")
        );
        let e = settings("http://[2001:db8::1]:4318").check().unwrap();
        assert_eq!((e.host.as_str(), e.port, e.path.as_str()), ("2001:db8::1", 4318, "/v1/traces"));
        for (bad, why) in [
            ("ftp://x.example.com", "scheme"),
            ("otel.example.com:4318", "scheme"),
            ("https://user:pw@x.example.com", "credentials"),
            ("https://x.example.com/?a=b", "query"),
            ("not a url", "not a URL"),
        ] {
            let e = settings(bad).check().unwrap_err();
            assert!(e.contains(why) && !e.contains('\n'), "{bad}: {e}");
        }
        assert!(settings(&format!("https://{}.com", "x".repeat(3000))).check().unwrap_err().contains("longer"));
    }

    #[test]
    fn headers_are_names_and_values_never_the_requests_own() {
        let with = |name: &str, value: &str| ExportSettings {
            endpoint: "https://x.example.com".into(),
            headers: [(name.to_owned(), value.to_owned())].into(),
        };
        assert!(with("authorization", "Bearer abc").check().is_ok());
        assert!(with("Host", "evil").check().unwrap_err().contains("own"));
        assert!(with("x-wasmkeep-internal", "v4").check().unwrap_err().contains("own"));
        assert!(with("bad name", "v").check().unwrap_err().contains("header name"));
        assert!(with("k", "a\nb").check().unwrap_err().contains("header value"));
        let many = ExportSettings {
            endpoint: "https://x.example.com".into(),
            headers: (0..17).map(|i| (format!("h{i}"), "v".to_owned())).collect(),
        };
        assert!(many.check().unwrap_err().contains("more than"));
    }

    fn span_of(tenant: &str) -> SpanData {
        use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(1u128),
                SpanId::from(1u64),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Server,
            name: "GET".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: vec![opentelemetry::KeyValue::new("wasmkeep.tenant", tenant.to_owned())],
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    /// An endpoint that takes the connection and never answers: the
    /// tenant's queue fills, the spans past it are dropped and counted,
    /// and handing a span over never waits; another tenant is untouched.
    #[tokio::test]
    async fn a_stalled_endpoint_drops_spans_and_never_holds_the_caller() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut kept = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                kept.push(stream);
            }
        });
        let policy =
            ExportPolicy { egress: EgressPolicy::Public { allowed_hosts: None }, also: vec!["127.0.0.1".into()] };
        let tls = Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        );
        let exports = TenantExports::new(policy, tls);
        exports.set("alpha", Some(settings(&format!("http://{addr}")))).unwrap();
        let sent = QUEUE_SPANS + BATCH_SPANS + 1000;
        for _ in 0..sent {
            exports.route(span_of("alpha"));
            exports.route(span_of("beta"));
            exports.route(span_of(""));
        }
        let counts = exports.counts("alpha");
        assert!(counts.dropped >= (sent - QUEUE_SPANS - BATCH_SPANS) as u64, "{counts:?}");
        assert_eq!(counts.exported, 0);
        assert_eq!(exports.counts("beta"), ExportCounts::default(), "a tenant with no export has none");
        let mut out = Exposition::default();
        exports.collect(&mut out);
        let text = out.finish();
        assert!(
            text.contains(&format!("wasmkeep_tenant_spans_dropped_total{{tenant=\"alpha\"}} {}", counts.dropped)),
            "{text}"
        );
        held.abort();
    }

    #[test]
    fn the_policy_refuses_private_and_metadata_addresses_unless_the_operator_allows_the_host() {
        let policy = ExportPolicy { egress: EgressPolicy::Public { allowed_hosts: None }, also: vec![] };
        for host in ["127.0.0.1", "169.254.169.254", "10.0.0.7", "::1"] {
            assert!(policy.allows_host(host).unwrap_err().contains("not a public address"), "{host}");
        }
        assert!(policy.allows_host("otel.example.com").is_ok());
        assert!(policy.allows_host("8.8.8.8").is_ok());
        let operator = ExportPolicy { also: vec!["127.0.0.1".into()], ..policy };
        assert!(operator.allows_host("127.0.0.1").is_ok());
        assert!(operator.allows_host("10.0.0.7").is_err());
    }
}
