//! An OTLP/HTTP receiver for tests: `POST /v1/traces` and `/v1/logs`
//! bodies decoded with the protocol's own definitions
//! (`opentelemetry-proto`), every span and log record kept for the test to
//! look at.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message;

/// One span as the receiver got it.
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root.
    pub parent: String,
    pub name: String,
    /// `SPAN_KIND_*`: 1 internal, 2 server, 3 client.
    pub kind: i32,
    pub attributes: HashMap<String, String>,
    /// 0 unset, 1 ok, 2 error; and the error's message.
    pub status: (i32, String),
    /// The resource's `service.name`, and `service.instance.id` (a
    /// node's id).
    pub service: String,
    pub instance: String,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// One log record as the receiver got it.
#[derive(Debug, Clone)]
pub struct Record {
    pub body: String,
    /// `SEVERITY_NUMBER_*`: 9 info, 17 error.
    pub severity: i32,
    /// Empty when the record is in no trace.
    pub trace_id: String,
    pub span_id: String,
    pub attributes: HashMap<String, String>,
    pub service: String,
}

impl Record {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// What a receiver keeps.
#[derive(Default)]
struct Kept {
    spans: Vec<Span>,
    records: Vec<Record>,
}

/// A running receiver.
pub struct Collector {
    pub addr: SocketAddr,
    kept: Arc<Mutex<Kept>>,
    /// Export requests received, and how many could not be decoded.
    pub requests: Arc<Mutex<(usize, usize)>>,
    /// The `authorization` header of each export request that had one.
    pub authorizations: Arc<Mutex<Vec<String>>>,
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Collector {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let kept: Arc<Mutex<Kept>> = Arc::default();
        let requests: Arc<Mutex<(usize, usize)>> = Arc::default();
        let authorizations: Arc<Mutex<Vec<String>>> = Arc::default();
        let (stored, counted, seen) = (kept.clone(), requests.clone(), authorizations.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (kept, counted, seen) = (stored.clone(), counted.clone(), seen.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (kept, counted, seen) = (kept.clone(), counted.clone(), seen.clone());
                        async move {
                            let path = req.uri().path().to_owned();
                            if let Some(auth) = req.headers().get("authorization").and_then(|v| v.to_str().ok()) {
                                seen.lock().unwrap().push(auth.to_owned());
                            }
                            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let mut count = counted.lock().unwrap();
                            count.0 += 1;
                            let decoded = match path.as_str() {
                                "/v1/traces" => ExportTraceServiceRequest::decode(body)
                                    .map(|r| kept.lock().unwrap().spans.extend(spans_of(r)))
                                    .is_ok(),
                                "/v1/logs" => ExportLogsServiceRequest::decode(body)
                                    .map(|r| kept.lock().unwrap().records.extend(records_of(r)))
                                    .is_ok(),
                                _ => false,
                            };
                            if !decoded {
                                count.1 += 1;
                            }
                            let mut answer = http::Response::new(Full::new(Bytes::new()));
                            answer.headers_mut().insert("content-type", "application/x-protobuf".parse().unwrap());
                            Ok::<_, std::convert::Infallible>(answer)
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        Self { addr, kept, requests, authorizations }
    }

    /// A receiver of OTLP over gRPC (`TraceService` and `LogsService`,
    /// served by tonic), keeping what it gets as [`Collector::start`]'s
    /// does.
    pub async fn start_grpc() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let grpc = Grpc { kept: Arc::default(), requests: Arc::default(), authorizations: Arc::default() };
        let collector = Self {
            addr,
            kept: grpc.kept.clone(),
            requests: grpc.requests.clone(),
            authorizations: grpc.authorizations.clone(),
        };
        let incoming = tokio_stream_of(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(grpc.clone()))
                .add_service(LogsServiceServer::new(grpc))
                .serve_with_incoming(incoming),
        );
        collector
    }

    /// The receiver's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.kept.lock().unwrap().spans.clone()
    }

    /// Every log record received so far.
    pub fn records(&self) -> Vec<Record> {
        self.kept.lock().unwrap().records.clone()
    }

    /// The log records received once `done` holds of them (within 20 s),
    /// or what came by then.
    pub async fn records_until(&self, done: impl Fn(&[Record]) -> bool) -> Vec<Record> {
        let mut found = Vec::new();
        for _ in 0..200 {
            found = self.records();
            if done(&found) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        found
    }

    /// The spans of trace `trace_id` once `done` holds of them (within
    /// 20 s), or what came by then.
    pub async fn trace(&self, trace_id: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let mut found = Vec::new();
        for _ in 0..200 {
            found = self.spans().into_iter().filter(|s| s.trace_id == trace_id).collect();
            if done(&found) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        found
    }
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<Span> {
    let mut out = Vec::new();
    for resource in request.resource_spans {
        let attribute = |key: &str| {
            resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == key))
                .map(|a| text(&a.value))
                .unwrap_or_default()
        };
        let (service, instance) = (attribute("service.name"), attribute("service.instance.id"));
        for scope in resource.scope_spans {
            for span in scope.spans {
                out.push(Span {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    name: span.name,
                    kind: span.kind,
                    attributes: span.attributes.iter().map(|a| (a.key.clone(), text(&a.value))).collect(),
                    status: span.status.map(|s| (s.code, s.message)).unwrap_or_default(),
                    service: service.clone(),
                    instance: instance.clone(),
                });
            }
        }
    }
    out
}

fn records_of(request: ExportLogsServiceRequest) -> Vec<Record> {
    let mut out = Vec::new();
    for resource in request.resource_logs {
        let service = resource
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for scope in resource.scope_logs {
            for record in scope.log_records {
                out.push(Record {
                    body: text(&record.body),
                    severity: record.severity_number,
                    trace_id: hex(&record.trace_id),
                    span_id: hex(&record.span_id),
                    attributes: record.attributes.iter().map(|a| (a.key.clone(), text(&a.value))).collect(),
                    service: service.clone(),
                });
            }
        }
    }
    out
}

/// The gRPC receiver's services.
#[derive(Clone)]
struct Grpc {
    kept: Arc<Mutex<Kept>>,
    requests: Arc<Mutex<(usize, usize)>>,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl Grpc {
    fn saw<T>(&self, request: &tonic::Request<T>) {
        self.requests.lock().unwrap().0 += 1;
        if let Some(auth) = request.metadata().get("authorization").and_then(|v| v.to_str().ok()) {
            self.authorizations.lock().unwrap().push(auth.to_owned());
        }
    }
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.saw(&request);
        self.kept.lock().unwrap().spans.extend(spans_of(request.into_inner()));
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl LogsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        self.saw(&request);
        self.kept.lock().unwrap().records.extend(records_of(request.into_inner()));
        Ok(tonic::Response::new(ExportLogsServiceResponse { partial_success: None }))
    }
}

/// A listener's connections as the stream tonic's server takes.
fn tokio_stream_of(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}
