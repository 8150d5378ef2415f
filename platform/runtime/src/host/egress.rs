//! The egress sender: every outbound HTTP request a guest makes, actor or
//! front, leaves through here (`wasi:http/outgoing-handler`). The answer's
//! headers and trailers lose the host's header range before the
//! guest sees them: an upstream cannot pose as the host.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::uri::Scheme;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use wasmkeep_core::head;
use wasmtime_wasi_http::{Error, RequestOptions, WasiHttpHooks};

type WasiBody = UnsyncBoxBody<Bytes, Error>;
type Io = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Sent = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Io), Error>> + Send>;

/// How long a connection may take when the guest sets no timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The hooks wasmtime-wasi-http calls for a guest's outbound requests:
/// one per app, shared by its guests' stores (the egress policy it will
/// hold is the app's).
#[derive(Debug, Clone)]
pub struct Egress {
    /// `tenant/app`, as logs name it.
    app: Arc<str>,
}

impl Egress {
    pub fn for_app(app: Arc<str>) -> Self {
        Self { app }
    }
}

impl WasiHttpHooks for Egress {
    /// Plain HTTP only: TLS comes with the egress policy.
    fn is_supported_scheme(&mut self, scheme: &Scheme) -> bool {
        *scheme == Scheme::HTTP
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
        Box::new(send(request, options))
    }
}

async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<(http::Response<WasiBody>, Io), Error> {
    let authority = request.uri().authority().ok_or(Error::HttpRequestUriInvalid)?;
    let target = match authority.port() {
        Some(_) => authority.to_string(),
        None => format!("{authority}:80"),
    };
    let connect_timeout = options.and_then(|o| o.connect_timeout).unwrap_or(CONNECT_TIMEOUT);
    let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(&target))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) =
        tokio::time::timeout(connect_timeout, hyper::client::conn::http1::handshake(TokioIo::new(stream)))
            .await
            .map_err(|_| Error::ConnectionTimeout)??;
    let connection = tokio::spawn(connection);

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
    let body = body.map_err(Error::from).map_frame(head::strip_trailers).boxed_unsync();
    let io: Io = Box::new(async move {
        match connection.await {
            Ok(result) => result.map_err(Error::from),
            Err(_cancelled) => Ok(()),
        }
    });
    Ok((http::Response::from_parts(parts, body), io))
}
