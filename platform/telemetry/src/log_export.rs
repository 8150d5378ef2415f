//! Guests' records as OTLP logs, to the operator's collector (ADR 0021).
//!
//! A guest's line is written once, as an event of target
//! [`logs::TARGET`](crate::logs::TARGET) with the record's fields; the
//! node's subscriber sends it to each output the operator asked for: its
//! log output (text or JSON) and, with a logs endpoint, this layer, which
//! makes an OpenTelemetry log record of it (its trace and span are the
//! record's trace context, so a backend shows the line inside its trace)
//! and hands it to the SDK's batch processor: a bounded queue, posted
//! from a thread of its own, never waited for by the guest.

use std::time::SystemTime;

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::trace::{SpanId, TraceFlags, TraceId};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::{SdkLogger, SdkLoggerProvider};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::otlp::{self, env};
use crate::traces::TraceSettings;

/// The logs endpoint: the setting's or the base variable's URL with
/// `/v1/logs`, or the logs variable's as it is; none when nothing names
/// one, or when `OTEL_LOGS_EXPORTER` is `none`.
pub fn endpoint(settings: &TraceSettings) -> Result<Option<String>, String> {
    if env("OTEL_LOGS_EXPORTER").is_some_and(|e| e.trim().eq_ignore_ascii_case("none")) {
        return Ok(None);
    }
    let wire = otlp::wire(settings, &otlp::LOGS)?;
    Ok(otlp::endpoint(settings, &otlp::LOGS, wire))
}

/// The running logs export: records still queued are sent when it is
/// shut down.
pub(crate) struct LogExport {
    pub(crate) provider: SdkLoggerProvider,
}

impl LogExport {
    /// The OTLP/HTTP export to `endpoint`, and the layer that feeds it.
    pub(crate) fn start<S>(
        settings: &TraceSettings,
        endpoint: String,
        resource: Resource,
    ) -> Result<(Self, impl Layer<S> + use<S>), String>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        let wire = otlp::wire(settings, &otlp::LOGS)?;
        let provider = SdkLoggerProvider::builder().with_resource(resource);
        let provider = match otlp::log_exporter(&endpoint, wire)? {
            otlp::Exporter::Http(exporter) => provider.with_batch_exporter(exporter),
            otlp::Exporter::Grpc(exporter) => provider.with_batch_exporter(exporter),
        }
        .build();
        let layer = GuestRecords::layer(&provider);
        Ok((Self { provider }, layer))
    }
}

/// The layer that turns guests' records into OpenTelemetry log records.
pub struct GuestRecords {
    logger: SdkLogger,
}

impl GuestRecords {
    /// The layer, for `provider`'s processors; it sees guests' records
    /// only (a static filter: no other event is ever asked of it).
    pub fn layer<S>(provider: &SdkLoggerProvider) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        Self { logger: provider.logger("wasmkeep") }.with_filter(
            tracing_subscriber::filter::Targets::new().with_target(crate::logs::TARGET, tracing::Level::INFO),
        )
    }
}

impl<S: tracing::Subscriber> Layer<S> for GuestRecords {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.stream.is_none() {
            // The node's own line about a guest (a trap, a wall hit): its
            // log output's, not a record of the guest's.
            return;
        }
        let mut record = self.logger.create_log_record();
        let now = SystemTime::now();
        record.set_timestamp(now);
        record.set_observed_timestamp(now);
        // stderr as an error, stdout as information: what container
        // platforms' log agents make of the two streams.
        let (number, text) = match fields.stream.as_deref() {
            Some("stderr" | "failure") => (Severity::Error, "ERROR"),
            _ => (Severity::Info, "INFO"),
        };
        record.set_severity_number(number);
        record.set_severity_text(text);
        record.set_body(AnyValue::from(fields.message));
        let named = [
            ("wasmkeep.tenant", fields.tenant),
            ("wasmkeep.app", fields.app),
            ("wasmkeep.actor.class", fields.class),
            ("wasmkeep.actor.name", fields.name),
            ("log.iostream", fields.stream),
        ];
        for (key, value) in named {
            if let Some(value) = value {
                record.add_attribute(key, value);
            }
        }
        if fields.truncated {
            record.add_attribute("wasmkeep.log.truncated", true);
        }
        if fields.dropped_before > 0 {
            record.add_attribute("wasmkeep.log.dropped_before", fields.dropped_before as i64);
        }
        let ids = (fields.trace_id.as_deref().map(TraceId::from_hex), fields.span_id.as_deref().map(SpanId::from_hex));
        if let (Some(Ok(trace)), Some(Ok(span))) = ids {
            record.set_trace_context(trace, span, Some(TraceFlags::SAMPLED));
        }
        self.logger.emit(record);
    }
}

/// A guest record's fields, as `logs::emit` writes them.
#[derive(Default)]
struct Fields {
    message: String,
    tenant: Option<String>,
    app: Option<String>,
    class: Option<String>,
    name: Option<String>,
    stream: Option<String>,
    trace_id: Option<String>,
    span_id: Option<String>,
    truncated: bool,
    dropped_before: u64,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "message" => {
                self.message = value.to_owned();
                return;
            }
            "tenant" => &mut self.tenant,
            "app" => &mut self.app,
            "class" => &mut self.class,
            "name" => &mut self.name,
            "stream" => &mut self.stream,
            "trace_id" => &mut self.trace_id,
            "span_id" => &mut self.span_id,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "truncated" {
            self.truncated = value;
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "dropped_before" {
            self.dropped_before = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // The line itself comes as format arguments: their Debug is the
        // text.
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::{GuestLogs, GuestWho, LogRates, Stream};
    use opentelemetry_sdk::logs::InMemoryLogExporter;
    use std::sync::Arc;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn the_logs_endpoint_follows_the_traces_base() {
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
            && std::env::var_os("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT").is_none()
        {
            assert_eq!(endpoint(&TraceSettings::default()), Ok(None));
        }
        if std::env::var_os("OTEL_LOGS_EXPORTER").is_none() && std::env::var_os("OTEL_EXPORTER_OTLP_PROTOCOL").is_none()
        {
            let named = TraceSettings { endpoint: Some("http://collector:4318/".into()), ..Default::default() };
            assert_eq!(endpoint(&named), Ok(Some("http://collector:4318/v1/logs".into())));
        }
    }

    /// A guest's line through the node's subscriber: one log record with
    /// its line, its guest's names, its stream and the trace and span of
    /// its event; the node's other events are not records.
    #[test]
    fn a_guests_line_is_a_log_record_in_its_trace() {
        let exporter = InMemoryLogExporter::default();
        let provider = SdkLoggerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let subscriber = tracing_subscriber::registry().with(GuestRecords::layer(&provider));
        let logs = GuestLogs::new(LogRates { per_actor: 10, per_app: 10 });
        let who = GuestWho {
            tenant: Arc::from("alpha"),
            app: Arc::from("shop"),
            class: Some(Arc::from("cart")),
            name: Some(Arc::from("c1")),
        };
        tracing::subscriber::with_default(subscriber, || {
            // Another test's thread may have registered the record's call
            // site, with no subscriber, while this one was being set:
            // its cached interest ("never") is asked again.
            tracing::callsite::rebuild_interest_cache();
            logs.line(
                &who,
                Stream::Stderr,
                b"out of stock",
                Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            );
            tracing::info!(target: "wasmkeep", "the node's own line");
        });
        let records = exporter.get_emitted_logs().unwrap();
        assert_eq!(records.len(), 1, "{records:#?}");
        let record = &records[0].record;
        assert_eq!(record.body(), Some(&AnyValue::from("out of stock".to_owned())));
        assert_eq!(record.severity_number(), Some(Severity::Error));
        let attrs: Vec<(String, String)> =
            record.attributes_iter().map(|(k, v)| (k.to_string(), format!("{v:?}"))).collect();
        for (key, value) in [
            ("wasmkeep.tenant", "alpha"),
            ("wasmkeep.app", "shop"),
            ("wasmkeep.actor.class", "cart"),
            ("wasmkeep.actor.name", "c1"),
            ("log.iostream", "stderr"),
        ] {
            assert!(attrs.iter().any(|(k, v)| k == key && v.contains(value)), "{key}: {attrs:?}");
        }
        let context = record.trace_context().expect("the event's trace");
        assert_eq!(context.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.span_id.to_string(), "00f067aa0ba902b7");
    }
}
