//! The operator's OTLP exporters, for spans and for guests' records: over
//! HTTP/protobuf (the default, `/v1/traces` and `/v1/logs` under the
//! collector's base URL) or gRPC (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, the
//! base URL itself, port 4317 by convention).
//!
//! The SDK's batch processors export from threads of their own, and the
//! gRPC client (tonic on hyper) needs a Tokio reactor wherever it runs: a
//! gRPC exporter is built inside, and each of its exports runs on, a small
//! runtime of its own ([`OnRuntime`]), apart from the node's.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::logs::{LogBatch, LogExporter, SdkLogRecord};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::traces::TraceSettings;

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// How an exporter talks to its collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    HttpProtobuf,
    Grpc,
}

/// One signal's names: its endpoint variable, its protocol variable, its
/// path under an HTTP collector's base URL.
pub(crate) struct Signal {
    pub endpoint_variable: &'static str,
    pub protocol_variable: &'static str,
    pub path: &'static str,
}

pub(crate) const TRACES: Signal = Signal {
    endpoint_variable: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    protocol_variable: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    path: "/v1/traces",
};

pub(crate) const LOGS: Signal = Signal {
    endpoint_variable: "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    protocol_variable: "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
    path: "/v1/logs",
};

/// The signal's protocol: the setting's, the signal's variable, or
/// `OTEL_EXPORTER_OTLP_PROTOCOL`'s; `http/protobuf` by default.
pub(crate) fn wire(settings: &TraceSettings, signal: &Signal) -> Result<Wire, String> {
    let protocol = settings
        .protocol
        .clone()
        .or_else(|| env(signal.protocol_variable))
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".into());
    match protocol.trim() {
        "http/protobuf" => Ok(Wire::HttpProtobuf),
        "grpc" => Ok(Wire::Grpc),
        other => Err(format!("OTLP protocol {other:?}: http/protobuf or grpc (http/json is not built in)")),
    }
}

/// The signal's endpoint: the setting's or `OTEL_EXPORTER_OTLP_ENDPOINT`'s
/// base URL (with the signal's path over HTTP; as it is over gRPC), or the
/// signal's own variable as it is; none when nothing names one.
pub(crate) fn endpoint(settings: &TraceSettings, signal: &Signal, wire: Wire) -> Option<String> {
    let path = if wire == Wire::Grpc { "" } else { signal.path };
    let base = |url: &str| format!("{}{path}", url.trim_end_matches('/'));
    match (&settings.endpoint, env(signal.endpoint_variable), env("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(url), _, _) => Some(base(url)),
        (None, Some(url), _) => Some(url),
        (None, None, Some(url)) => Some(base(&url)),
        (None, None, None) => None,
    }
}

/// An exporter whose exports run on a runtime of its own (see the module).
pub(crate) struct OnRuntime<E> {
    runtime: Option<tokio::runtime::Runtime>,
    inner: Arc<E>,
}

impl<E> std::fmt::Debug for OnRuntime<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnRuntime").finish_non_exhaustive()
    }
}

impl<E: Send + Sync + 'static> OnRuntime<E> {
    /// Builds the exporter with `build`, inside a new runtime.
    fn build(build: impl FnOnce() -> Result<E, String>) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("wasmkeep-otlp")
            .enable_all()
            .build()
            .map_err(|e| format!("the OTLP exporter's runtime: {e}"))?;
        let inner = {
            let _inside = runtime.enter();
            build()?
        };
        Ok(Self { runtime: Some(runtime), inner: Arc::new(inner) })
    }

    async fn run<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> Result<T, OTelSdkError> {
        let runtime = self.runtime.as_ref().ok_or(OTelSdkError::AlreadyShutdown)?;
        runtime.spawn(work).await.map_err(|e| OTelSdkError::InternalFailure(e.to_string()))
    }
}

impl<E> Drop for OnRuntime<E> {
    fn drop(&mut self) {
        // Dropped on whichever thread ends the provider: never wait there.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl<E: SpanExporter + 'static> SpanExporter for OnRuntime<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let inner = self.inner.clone();
        self.run(async move { inner.export(batch).await }).await?
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Set once, as the provider is built, before any export holds it.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}

impl<E: LogExporter + 'static> LogExporter for OnRuntime<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let inner = self.inner.clone();
        let owned: Vec<(SdkLogRecord, InstrumentationScope)> =
            batch.iter().map(|(record, scope)| (record.clone(), scope.clone())).collect();
        self.run(async move {
            let borrowed: Vec<(&SdkLogRecord, &InstrumentationScope)> = owned.iter().map(|(r, s)| (r, s)).collect();
            inner.export(LogBatch::new(&borrowed)).await
        })
        .await?
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}

/// An exporter of spans or records, over HTTP or over gRPC.
pub(crate) enum Exporter<E> {
    Http(E),
    Grpc(OnRuntime<E>),
}

/// An OTLP exporter from `builder` (a signal's exporter builder) to
/// `endpoint` over `wire`; `what` names it in an error. A macro: the
/// signals' builders share their methods' names, not a trait.
macro_rules! build_exporter {
    ($builder:expr, $endpoint:expr, $wire:expr, $what:literal) => {{
        let endpoint: &str = $endpoint;
        let failed = |e: opentelemetry_otlp::ExporterBuildError| format!("{} for {endpoint}: {e}", $what);
        match $wire {
            Wire::HttpProtobuf => $builder
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(endpoint)
                .build()
                .map(Exporter::Http)
                .map_err(failed),
            Wire::Grpc => OnRuntime::build(|| $builder.with_tonic().with_endpoint(endpoint).build().map_err(failed))
                .map(Exporter::Grpc),
        }
    }};
}

/// The span exporter to `endpoint` over `wire`.
pub(crate) fn span_exporter(endpoint: &str, wire: Wire) -> Result<Exporter<opentelemetry_otlp::SpanExporter>, String> {
    build_exporter!(opentelemetry_otlp::SpanExporter::builder(), endpoint, wire, "the OTLP exporter")
}

/// The log exporter to `endpoint` over `wire`.
pub(crate) fn log_exporter(endpoint: &str, wire: Wire) -> Result<Exporter<opentelemetry_otlp::LogExporter>, String> {
    build_exporter!(opentelemetry_otlp::LogExporter::builder(), endpoint, wire, "the OTLP logs exporter")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_takes_the_base_url_and_http_the_signals_path() {
        if env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some() {
            return;
        }
        let named = TraceSettings { endpoint: Some("http://collector:4317/".into()), ..Default::default() };
        assert_eq!(endpoint(&named, &TRACES, Wire::Grpc).as_deref(), Some("http://collector:4317"));
        assert_eq!(endpoint(&named, &TRACES, Wire::HttpProtobuf).as_deref(), Some("http://collector:4317/v1/traces"));
        assert_eq!(endpoint(&named, &LOGS, Wire::HttpProtobuf).as_deref(), Some("http://collector:4317/v1/logs"));
    }

    #[test]
    fn the_protocol_is_http_protobuf_or_grpc() {
        let with = |p: &str| TraceSettings { protocol: Some(p.into()), ..Default::default() };
        assert_eq!(wire(&with("grpc"), &TRACES), Ok(Wire::Grpc));
        assert_eq!(wire(&with("http/protobuf"), &LOGS), Ok(Wire::HttpProtobuf));
        let e = wire(&with("http/json"), &TRACES).unwrap_err();
        assert!(e.contains("http/protobuf or grpc") && !e.contains('\n'), "{e}");
    }
}
