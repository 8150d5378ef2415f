//! The egress sender: every outbound HTTP request a guest makes, actor or
//! front, leaves through here (`wasi:http/outgoing-handler`). The host's
//! header range goes from both ways: from the request's headers and
//! trailers before it leaves, so that a guest cannot pose as the host to
//! an upstream (another node's edge, a service trusting the head), and
//! from the answer's before the guest sees them, so that an upstream
//! cannot pose as the host to the guest.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::uri::Scheme;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tracing::Instrument;
use tracing::field::Empty;
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::{TraceContext, head};
use wasmkeep_telemetry::traces::{self, TARGET};
use wasmtime_wasi_http::{Error, RequestOptions, WasiHttpHooks};

type WasiBody = UnsyncBoxBody<Bytes, Error>;
type Io = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Sent = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Io), Error>> + Send>;

/// How long a connection may take when the guest sets no timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The hooks wasmtime-wasi-http calls for a guest's outbound requests:
/// one per app, shared by its guests' stores, with the app's policy.
#[derive(Clone)]
pub struct Egress {
    /// `tenant/app`, as logs name it.
    app: Arc<str>,
    policy: Arc<EgressPolicy>,
    /// HTTPS's client configuration (roots), the node's.
    tls: Arc<rustls::ClientConfig>,
    /// The tenant's outbound requests per second, if its plan bounds them.
    quota: Option<Arc<dyn EgressQuota>>,
    /// What the app's guests sent out and received.
    counts: Arc<EgressCounts>,
    /// The running event's trace context (set as each begins): an
    /// outbound request's span is its child, and carries it on.
    pub(crate) trace: TraceContext,
}

/// An app's outbound requests, and the bytes of their answers' bodies,
/// since the node started (the metrics' counters), and how much of them
/// the control plane has recorded as usage: what is left to record is the
/// difference, never counted twice.
#[derive(Debug, Default)]
pub struct EgressCounts {
    requests: AtomicU64,
    bytes: AtomicU64,
    recorded_requests: AtomicU64,
    recorded_bytes: AtomicU64,
}

impl EgressCounts {
    fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn received(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Requests and bytes since the node started.
    pub fn totals(&self) -> (u64, u64) {
        (self.requests.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed))
    }

    /// Requests and bytes not yet recorded as usage.
    pub fn unrecorded(&self) -> (u64, u64) {
        let (requests, bytes) = self.totals();
        (
            requests.saturating_sub(self.recorded_requests.load(Ordering::Relaxed)),
            bytes.saturating_sub(self.recorded_bytes.load(Ordering::Relaxed)),
        )
    }

    /// The control plane recorded `requests` and `bytes` more.
    pub fn recorded(&self, requests: u64, bytes: u64) {
        self.recorded_requests.fetch_add(requests, Ordering::Relaxed);
        self.recorded_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A bound on how many outbound requests an app's guests make, and on how
/// many connections they hold open.
pub trait EgressQuota: Send + Sync + 'static {
    /// Takes one request; false when the guest must be refused.
    fn take(&self) -> bool;
    /// Holds one outbound connection open: the guard is kept until the
    /// connection closes. `None` when the tenant, or the node, has all it
    /// may open (each is a descriptor of the process).
    fn open(&self) -> Option<Box<dyn Send + Sync>>;
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress").field("app", &self.app).field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl Egress {
    pub fn for_app(app: Arc<str>, policy: Arc<EgressPolicy>, tls: Arc<rustls::ClientConfig>) -> Self {
        Self { app, policy, tls, quota: None, counts: Arc::default(), trace: TraceContext::default() }
    }

    /// The same, counting into `counts` (an app's, across its policies).
    pub fn with_counts(self, counts: Arc<EgressCounts>) -> Self {
        Self { counts, ..self }
    }

    /// The same, its requests bounded by `quota`.
    pub fn with_quota(self, quota: Arc<dyn EgressQuota>) -> Self {
        Self { quota: Some(quota), ..self }
    }
}

impl WasiHttpHooks for Egress {
    fn is_supported_scheme(&mut self, scheme: &Scheme) -> bool {
        *scheme == Scheme::HTTP || *scheme == Scheme::HTTPS
    }

    fn default_scheme(&mut self) -> Option<Scheme> {
        Some(Scheme::HTTP)
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _sent: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sent {
        tracing::debug!(app = %self.app, uri = %request.uri(), "an outbound request");
        let mut request = without_range(request);
        let span = outbound_span(&mut request, &self.app, &self.trace);
        if self.quota.as_ref().is_some_and(|q| !q.take()) {
            tracing::debug!(app = %self.app, "an outbound request over the plan's rate");
            traces::failed(&span, "quota");
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let open = match &self.quota {
            Some(quota) => match quota.open() {
                Some(open) => Some(open),
                None => {
                    tracing::debug!(app = %self.app, "an outbound request over the open connections' bound");
                    traces::failed(&span, "connections");
                    return Box::new(async { Err(Error::ConnectionLimitReached) });
                }
            },
            None => None,
        };
        let tls = (request.uri().scheme() == Some(&Scheme::HTTPS)).then(|| self.tls.clone());
        self.counts.request();
        let sending = send(request, options, self.policy.clone(), tls, self.counts.clone(), open);
        Box::new(async move {
            let sent = sending.instrument(span.clone()).await;
            match &sent {
                Ok((response, _)) => {
                    span.record("http.response.status_code", response.status().as_u16());
                }
                Err(e) => traces::failed(&span, error_name(e)),
            }
            sent
        })
    }
}

/// A guest's request without the host's header range, in its headers and
/// in the trailers its body may end in: what the range says is the host's
/// word, never a guest's.
fn without_range(request: http::Request<WasiBody>) -> http::Request<WasiBody> {
    let (mut parts, body) = request.into_parts();
    head::strip(&mut parts.headers);
    http::Request::from_parts(parts, body.map_frame(head::strip_trailers).boxed_unsync())
}

/// The span of an outbound request (kind client), a child of the running
/// event's; the request carries it on in `traceparent` (with tracing
/// off, the event's own context, if it came with one). A guest's own
/// `traceparent` and `tracestate` are replaced.
fn outbound_span(request: &mut http::Request<WasiBody>, app: &str, trace: &TraceContext) -> tracing::Span {
    let (tenant, app) = app.split_once('/').unwrap_or(("", app));
    let span = traces::child(trace, || {
        tracing::info_span!(
            target: TARGET,
            parent: None,
            "http.client",
            otel.name = %request.method(),
            otel.kind = "client",
            http.request.method = %request.method(),
            server.address = request.uri().host().unwrap_or(""),
            url.path = request.uri().path(),
            http.response.status_code = Empty,
            wasmkeep.tenant = tenant,
            wasmkeep.app = app,
        )
    });
    let carried = traces::carried(&span, trace);
    let headers = request.headers_mut();
    headers.remove(head::TRACEPARENT);
    headers.remove(head::TRACESTATE);
    if let Some(parent) = carried.parent.and_then(|p| http::HeaderValue::try_from(p).ok()) {
        headers.insert(head::TRACEPARENT, parent);
        if let Some(state) = carried.state.and_then(|s| http::HeaderValue::try_from(s).ok()) {
            headers.insert(head::TRACESTATE, state);
        }
    }
    span
}

/// An outbound request's failure, by name only.
fn error_name(e: &Error) -> &'static str {
    match e {
        Error::HttpRequestDenied => "denied",
        Error::ConnectionTimeout | Error::ConnectionReadTimeout => "timeout",
        Error::DnsError { .. } => "dns",
        Error::TlsCertificateError => "tls",
        Error::Connect(_) => "connect",
        _ => "failed",
    }
}

/// A connection to an upstream: plain, or TLS over the checked address.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    policy: Arc<EgressPolicy>,
    tls: Option<Arc<rustls::ClientConfig>>,
    counts: Arc<EgressCounts>,
    open: Option<Box<dyn Send + Sync>>,
) -> Result<(http::Response<WasiBody>, Io), Error> {
    let authority = request.uri().authority().ok_or(Error::HttpRequestUriInvalid)?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = authority.port_u16().unwrap_or(if tls.is_some() { 443 } else { 80 });
    let connect_timeout = options.and_then(|o| o.connect_timeout).unwrap_or(CONNECT_TIMEOUT);
    let tcp = tokio::time::timeout(connect_timeout, connect(&policy, &host, port))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let _ = tcp.set_nodelay(true);
    // TLS runs over the connection to the checked address; the certificate
    // is checked against the name the guest asked for.
    let stream: Box<dyn Stream> = match tls {
        Some(config) => {
            let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|_| Error::TlsCertificateError)?;
            let connector = tokio_rustls::TlsConnector::from(config);
            let tls = tokio::time::timeout(connect_timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(|e| {
                    tracing::debug!(%host, "TLS to an upstream failed: {e}");
                    Error::TlsCertificateError
                })?;
            Box::new(tls)
        }
        None => Box::new(tcp),
    };
    let (mut sender, connection) =
        tokio::time::timeout(connect_timeout, hyper::client::conn::http1::handshake(TokioIo::new(stream)))
            .await
            .map_err(|_| Error::ConnectionTimeout)??;
    // The connection holds its place among the open ones until it closes.
    let connection = tokio::spawn(async move {
        let _open = open;
        connection.await
    });

    // The request line carries the path only; the authority went to `Host`.
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| Error::HttpRequestUriInvalid)?;
    let sending = sender.send_request(request);
    let response = match options.and_then(|o| o.first_byte_timeout) {
        Some(limit) => tokio::time::timeout(limit, sending).await.map_err(|_| Error::ConnectionReadTimeout)?,
        None => sending.await,
    }?;

    let (mut parts, body) = response.into_parts();
    head::strip(&mut parts.headers);
    let body = body
        .map_err(Error::from)
        .map_frame(move |frame| {
            if let Some(data) = frame.data_ref() {
                counts.received(data.len() as u64);
            }
            head::strip_trailers(frame)
        })
        .boxed_unsync();
    let io: Io = Box::new(async move {
        match connection.await {
            Ok(result) => result.map_err(Error::from),
            Err(_cancelled) => Ok(()),
        }
    });
    Ok((http::Response::from_parts(parts, body), io))
}

/// Resolves `host`, keeps the addresses the policy allows, and connects to
/// one of those: the address checked is the address connected to, so a
/// name that resolves differently a second time changes nothing. A host
/// the policy does not allow, or one with no allowed address, is
/// `HTTP-request-denied`.
async fn connect(policy: &EgressPolicy, host: &str, port: u16) -> Result<TcpStream, Error> {
    if !policy.allows_host(host) {
        tracing::info!(%host, "an outbound request to a host the app may not reach was refused");
        return Err(Error::HttpRequestDenied);
    }
    let resolved = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| Error::DnsError { rcode: Some("address not found".into()), info_code: None })?;
    let allowed: Vec<_> = resolved.filter(|a| policy.allows_addr(a.ip())).collect();
    if allowed.is_empty() {
        tracing::info!(%host, "an outbound request to a non-public address was refused");
        return Err(Error::HttpRequestDenied);
    }
    let mut last = None;
    for addr in allowed {
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Connect(last.expect("one address was tried")))
}

#[cfg(test)]
mod tests {
    use super::EgressCounts;

    /// The totals only grow; what is left to record is what the control
    /// plane has not recorded, whatever was counted meanwhile.
    #[test]
    fn usage_is_the_totals_less_what_was_recorded() {
        let counts = EgressCounts::default();
        counts.request();
        counts.received(5);
        counts.request();
        assert_eq!((counts.totals(), counts.unrecorded()), ((2, 5), (2, 5)));
        let told = counts.unrecorded();
        counts.request();
        counts.received(7);
        counts.recorded(told.0, told.1);
        assert_eq!((counts.totals(), counts.unrecorded()), ((3, 12), (1, 7)));
    }
}
