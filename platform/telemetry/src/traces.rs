//! Traces: the request path's spans, sent over OTLP (HTTP/protobuf) when
//! an endpoint is configured, and none at all when not.
//!
//! Every span of the request path is made under one target, [`TARGET`],
//! so the node's log output never sees them and, with no exporter, no
//! layer wants them: the span macros then cost a load and a branch.
//!
//! A span's parent is explicit, never the task's current span: events run
//! on their actor's task, calls cross nodes, so a span adopts the W3C
//! context its envelope carries ([`adopt`]) and hands its own on
//! ([`carried`]). With tracing off, the context a request came with is
//! carried through unchanged.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;
use wasmkeep_core::TraceContext;

use crate::log_export::LogExport;
use crate::otlp::{self, env};
use crate::tenant_export::{TenantExports, TenantSpans};

/// The target of every span of the request path.
pub const TARGET: &str = "wasmkeep::trace";

/// Where traces go, from the serve config; each unset field falls back to
/// its standard variable (`OTEL_EXPORTER_OTLP_ENDPOINT`,
/// `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`). The sampler
/// (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), resource attributes
/// (`OTEL_RESOURCE_ATTRIBUTES`), batch (`OTEL_BSP_*`) and export
/// (`OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`) variables are read as the
/// OpenTelemetry SDK reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSettings {
    /// The collector's base URL (`/v1/traces` is added).
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc`.
    pub protocol: Option<String>,
    pub service_name: Option<String>,
    /// This node's id, as `service.instance.id` (a node of a cluster).
    pub instance: Option<String>,
}

/// The running exports: spans and records still queued are sent when it
/// is dropped.
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
    logs: Option<LogExport>,
}

impl Drop for Tracing {
    fn drop(&mut self) {
        if let Some(provider) = &self.provider
            && let Err(e) = provider.shutdown_with_timeout(Duration::from_secs(5))
        {
            eprintln!("wasmkeep: the last spans could not be sent: {e}");
        }
        if let Some(logs) = &self.logs
            && let Err(e) = logs.provider.shutdown_with_timeout(Duration::from_secs(5))
        {
            eprintln!("wasmkeep: the last guests' records could not be sent: {e}");
        }
    }
}

/// The traces endpoint: the setting's or the base variable's URL (with
/// `/v1/traces` over HTTP), or the traces variable's as it is; none when
/// nothing names one (tracing is off).
pub fn endpoint(settings: &TraceSettings) -> Result<Option<String>, String> {
    let wire = otlp::wire(settings, &otlp::TRACES)?;
    Ok(otlp::endpoint(settings, &otlp::TRACES, wire))
}

impl Tracing {
    /// Starts the exports `settings` name (the operator's spans and
    /// guests' records) and `tenants`' (each tenant's own spans), and the
    /// layer that feeds them; `None` when none is configured.
    pub fn start<S>(
        settings: &TraceSettings,
        tenants: Option<Arc<TenantExports>>,
    ) -> Result<Option<(Self, impl Layer<S>)>, String>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        let endpoint = endpoint(settings)?;
        let logs_endpoint = crate::log_export::endpoint(settings)?;
        if endpoint.is_none() && tenants.is_none() && logs_endpoint.is_none() {
            return Ok(None);
        }
        let mut resource = Resource::builder();
        let name = settings.service_name.clone().or_else(|| env("OTEL_SERVICE_NAME"));
        resource = resource.with_service_name(name.unwrap_or_else(|| "wasmkeep".into()));
        if let Some(node) = &settings.instance {
            resource = resource.with_attribute(opentelemetry::KeyValue::new("service.instance.id", node.clone()));
        }
        let resource = resource.build();
        let (logs, records) = match logs_endpoint {
            Some(url) => {
                let (logs, layer) = LogExport::start(settings, url, resource.clone())?;
                (Some(logs), Some(layer))
            }
            None => (None, None),
        };
        // Records alone leave the request path's spans off.
        let provider = match (endpoint, tenants) {
            (None, None) => None,
            (endpoint, tenants) => {
                let mut provider = SdkTracerProvider::builder().with_resource(resource);
                if let Some(endpoint) = endpoint {
                    let wire = otlp::wire(settings, &otlp::TRACES)?;
                    provider = match otlp::span_exporter(&endpoint, wire)? {
                        otlp::Exporter::Http(exporter) => provider.with_batch_exporter(exporter),
                        otlp::Exporter::Grpc(exporter) => provider.with_batch_exporter(exporter),
                    };
                }
                if let Some(tenants) = tenants {
                    provider = provider.with_span_processor(TenantSpans(tenants));
                }
                Some(provider.build())
            }
        };
        let spans = provider.as_ref().map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("wasmkeep"))
                .with_tracked_inactivity(false)
                .with_threads(false)
                .with_location(false)
                .with_target(false)
                // A static filter: every other call site (wasmtime's,
                // hyper's) is never asked again, rather than asked at each
                // span; and at the spans' level, so the subscriber's most
                // verbose level stays the log output's (`log` records below
                // it, which dependencies write in hot paths, stop at
                // `log`'s own check).
                .with_filter(tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::INFO))
        });
        Ok(Some((Self { provider, logs }, Layer::and_then(spans, records))))
    }
}

/// The log output's filter: `directives` (as `WASMKEEP_LOG` gives them),
/// never the request path's spans.
pub fn logs_filter(directives: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::new(directives)
        .add_directive(format!("{TARGET}=off").parse().expect("a directive of the target"))
}

/// How the node writes its log output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// A line a person reads.
    #[default]
    Text,
    /// One JSON object a line, its fields named (a log pipeline's input).
    Json,
}

/// Whether text written to stderr may be coloured: it is a terminal, and
/// `NO_COLOR` is not set (no escape codes in a file, a pipe or a journal).
pub fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn logs<S, W>(directives: &str, format: LogFormat, writer: W, colour: bool) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(colour)
            .with_writer(writer)
            .with_filter(logs_filter(directives))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .with_filter(logs_filter(directives))
            .boxed(),
    }
}

/// The node's subscriber with no export: its log lines only (coloured
/// when `colour`). No layer wants the request path's spans, so their call
/// sites are off.
pub fn without_spans<W>(
    directives: &str,
    format: LogFormat,
    writer: W,
    colour: bool,
) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    tracing_subscriber::registry().with(logs(directives, format, writer, colour))
}

/// The node's subscriber exporting the request path's spans through
/// `spans` (from [`Tracing::start`]), beside its log lines.
pub fn with_spans<W>(
    directives: &str,
    format: LogFormat,
    writer: W,
    colour: bool,
    spans: impl Layer<tracing_subscriber::Registry> + Send + Sync,
) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    tracing_subscriber::registry().with(spans).with(logs(directives, format, writer, colour))
}

/// Whether the trace `trace` carries is one whose spans are recorded: it
/// has no context (a span made for it starts a trace, and samples it), or
/// its `traceparent` says sampled. A span of an unsampled trace is not
/// made at all: the edge's span took the sampler's decision, and only it
/// pays for a trace that goes nowhere.
pub fn sampled(trace: &TraceContext) -> bool {
    match &trace.parent {
        None => true,
        Some(parent) => parent
            .rsplit('-')
            .next()
            .and_then(|flags| u8::from_str_radix(flags, 16).ok())
            .is_some_and(|flags| flags & 1 == 1),
    }
}

/// A span of the request path below the edge's: made by `make` only when
/// the trace `trace` carries is sampled ([`sampled`]; else no span at
/// all, `Span::none()`), and a child of that trace's context.
pub fn child(trace: &TraceContext, make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if !sampled(trace) {
        return tracing::Span::none();
    }
    let span = make();
    adopt(&span, trace);
    span
}

/// Makes `span` a child of the context `trace` carries, if it carries one
/// (none: the span starts a trace). Call it before [`carried`].
pub fn adopt(span: &tracing::Span, trace: &TraceContext) {
    if span.is_disabled() {
        return;
    }
    let Some(parent) = &trace.parent else { return };
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_owned(), parent.clone());
    if let Some(state) = &trace.state {
        carrier.insert("tracestate".to_owned(), state.clone());
    }
    let _ = span.set_parent(TraceContextPropagator::new().extract(&carrier));
}

/// The context to hand on from `span`: its own, or `passthrough` when it
/// records nothing (tracing is off), so a client's context still reaches
/// what the request calls.
pub fn carried(span: &tracing::Span, passthrough: &TraceContext) -> TraceContext {
    if span.is_disabled() {
        return passthrough.clone();
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return passthrough.clone();
    }
    let mut carrier: HashMap<String, String> = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    match carrier.remove("traceparent") {
        Some(parent) => TraceContext { parent: Some(parent), state: carrier.remove("tracestate") },
        None => passthrough.clone(),
    }
}

/// Marks `span` failed with `reason` (a refusal's or an error's name,
/// never a value or a body).
pub fn failed(span: &tracing::Span, reason: &str) {
    if span.is_disabled() {
        return;
    }
    span.set_status(opentelemetry::trace::Status::error(reason.to_owned()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_configured_tracing_is_off() {
        let settings = TraceSettings::default();
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
            && std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        {
            assert_eq!(endpoint(&settings), Ok(None));
        }
        let named = TraceSettings { endpoint: Some("http://collector:4318/".into()), ..Default::default() };
        if std::env::var_os("OTEL_EXPORTER_OTLP_PROTOCOL").is_none() {
            assert_eq!(endpoint(&named), Ok(Some("http://collector:4318/v1/traces".into())));
        }
    }

    /// The node's subscriber as `main` makes it: with no export, the
    /// request path's spans are disabled at their call site (no span is
    /// made, nothing is recorded); with one, they are made.
    #[test]
    fn with_no_export_the_request_paths_spans_cost_nothing() {
        tracing::subscriber::with_default(without_spans("info", LogFormat::Text, std::io::sink, false), || {
            assert!(tracing::info_span!(target: TARGET, "off").is_disabled());
            assert!(!tracing::info_span!("a log line's span").is_disabled());
        });
        let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let spans = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("test"))
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| meta.target() == TARGET));
        tracing::subscriber::with_default(with_spans("info", LogFormat::Text, std::io::sink, false, spans), || {
            let span = tracing::info_span!(target: TARGET, parent: None, "on");
            assert!(!span.is_disabled());
            let client = TraceContext {
                parent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
                state: None,
            };
            adopt(&span, &client);
            let carried = carried(&span, &client);
            let parent = carried.parent.expect("the span's own context");
            assert!(parent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"), "{parent}");
            assert_ne!(parent, client.parent.unwrap(), "the span's own id, not the client's");
        });
        let _ = provider.force_flush();
        let finished = exporter.get_finished_spans().unwrap();
        assert_eq!(finished.len(), 1);
        assert_eq!(finished[0].parent_span_id.to_string(), "00f067aa0ba902b7");
    }

    #[test]
    fn a_trace_is_sampled_by_its_flags_or_when_it_starts() {
        let with = |p: &str| TraceContext { parent: Some(p.into()), state: None };
        assert!(sampled(&TraceContext::default()));
        assert!(sampled(&with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")));
        assert!(sampled(&with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03")));
        assert!(!sampled(&with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")));
        assert!(!sampled(&with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz")));
    }

    #[test]
    fn a_disabled_span_carries_the_clients_context_through() {
        let client = TraceContext {
            parent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
            state: Some("k=v".into()),
        };
        let span = tracing::Span::none();
        adopt(&span, &client);
        assert_eq!(carried(&span, &client), client);
        assert_eq!(carried(&span, &TraceContext::default()), TraceContext::default());
    }
}
