//! One client connection: hyper's HTTP/1.1 and HTTP/2 with the head
//! bounded, and a watchdog that closes it when it is idle too long, a
//! request head takes too long, or nothing moves while requests wait on
//! it (the rule is `core::connection`). The connection's admission ticket
//! rides in its I/O, so an upgraded socket keeps it until it closes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use wasmkeep_core::connection::{ConnectionSeen, Verdict, verdict};

use crate::accept::Ticket;
use crate::{Handler, Shared};

/// After a graceful close begins, how long the connection may take to end.
const CLOSING: Duration = Duration::from_secs(5);

/// What the watchdog reads; the I/O and the service write it.
pub(crate) struct Activity {
    accepted: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds since `accepted` when the last request ended.
    idle_since_ms: AtomicU64,
    /// One more than the milliseconds since `accepted` when the next head
    /// began; 0 when none has.
    head_started_ms: AtomicU64,
    /// Milliseconds since `accepted` when a byte last moved either way.
    last_io_ms: AtomicU64,
    /// Whether the last write waits for the client to take bytes.
    writing: AtomicBool,
    http2: AtomicBool,
    /// The connection's first bytes, until there are enough to tell the
    /// HTTP/2 preface (which may come in pieces).
    first_bytes: std::sync::Mutex<Option<Vec<u8>>>,
    /// Set once they have told: every later read skips the lock.
    version_known: AtomicBool,
    /// Wakes the watchdog: a head began, or the last request ended.
    wake: Notify,
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0";

impl Activity {
    fn new() -> Self {
        Self {
            accepted: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            head_started_ms: AtomicU64::new(0),
            last_io_ms: AtomicU64::new(0),
            writing: AtomicBool::new(false),
            http2: AtomicBool::new(false),
            first_bytes: std::sync::Mutex::new(Some(Vec::new())),
            version_known: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    fn since_accepted_ms(&self) -> u64 {
        self.accepted.elapsed().as_millis() as u64
    }

    fn moved(&self) {
        self.last_io_ms.store(self.since_accepted_ms(), Ordering::Relaxed);
    }

    fn wrote(&self, polled: &Poll<io::Result<usize>>) {
        match polled {
            Poll::Ready(Ok(n)) if *n > 0 => {
                self.moved();
                self.writing.store(false, Ordering::Relaxed);
            }
            Poll::Pending => self.writing.store(true, Ordering::Relaxed),
            _ => {}
        }
    }

    /// Whether the connection is HTTP/2, once its first bytes tell.
    fn learn_version(&self, bytes: &[u8]) {
        if self.version_known.load(Ordering::Relaxed) {
            return;
        }
        let mut first = self.first_bytes.lock().unwrap_or_else(|p| p.into_inner());
        let Some(seen) = first.as_mut() else { return };
        seen.extend_from_slice(&bytes[..bytes.len().min(PREFACE.len() - seen.len())]);
        if seen.len() == PREFACE.len() || !PREFACE.starts_with(seen) {
            self.http2.store(seen.as_slice() == PREFACE, Ordering::Relaxed);
            self.version_known.store(true, Ordering::Relaxed);
            *first = None;
        }
    }

    fn bytes_read(&self, bytes: &[u8]) {
        self.moved();
        self.learn_version(bytes);
        if self.http2.load(Ordering::Relaxed) || self.in_flight.load(Ordering::Acquire) > 0 {
            return;
        }
        let now = self.since_accepted_ms() + 1;
        if self.head_started_ms.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.wake.notify_one();
        }
    }

    /// A request began: held until its answer is written (or dropped).
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started_ms.store(0, Ordering::Relaxed);
        InFlight(self.clone())
    }

    fn seen(&self) -> ConnectionSeen {
        // `in_flight` first: a request that ended wrote `idle_since` before.
        let in_flight = self.in_flight.load(Ordering::Acquire);
        let head = self.head_started_ms.load(Ordering::Relaxed);
        ConnectionSeen {
            in_flight,
            idle_since: Duration::from_millis(self.idle_since_ms.load(Ordering::Relaxed)),
            head_started: (head > 0).then(|| Duration::from_millis(head - 1)),
            last_io: Duration::from_millis(self.last_io_ms.load(Ordering::Relaxed)),
            writing: self.writing.load(Ordering::Relaxed),
        }
    }
}

/// One request in flight on a connection.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.idle_since_ms.store(activity.since_accepted_ms(), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.wake.notify_one();
        }
    }
}

/// A connection's byte stream: the socket, or TLS over it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

pin_project_lite::pin_project! {
    /// The connection's stream (TLS already undone), telling the watchdog
    /// when bytes come and holding the connection's ticket for as long as
    /// the socket lives.
    pub(crate) struct Watched {
        #[pin]
        stream: Box<dyn Io>,
        activity: Arc<Activity>,
        ticket: Ticket,
    }
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let polled = this.stream.poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && buf.filled().len() > before
        {
            this.activity.bytes_read(&buf.filled()[before..]);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.project();
        let polled = this.stream.poll_write(cx, buf);
        this.activity.wrote(&polled);
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let polled = this.stream.poll_write_vectored(cx, bufs);
        this.activity.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The HTTP server for a listener's connections, its head bounded.
pub(crate) fn builder(head_bytes: u32) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // The watchdog bounds the head's time; hyper bounds its size (the
        // read buffer holds the head).
        .header_read_timeout(None)
        .max_buf_size(head_bytes as usize);
    builder.http2().timer(TokioTimer::new()).max_header_list_size(head_bytes).max_concurrent_streams(100);
    builder
}

/// Serves one accepted connection until it ends, is idle too long, or
/// takes too long over a head.
pub(crate) async fn serve<S>(listener: Arc<Shared<S>>, stream: TcpStream, peer: SocketAddr, ticket: Ticket)
where
    S: Handler,
{
    let _ = stream.set_nodelay(true);
    let name = listener.name;
    // TLS first, within the time a head gets: a client that never finishes
    // its handshake holds its ticket no longer than a slow head would.
    let stream: Box<dyn Io> = match &listener.tls {
        Some(acceptor) => match tokio::time::timeout(listener.times.header_read, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Box::new(tls),
            _ => {
                tracing::debug!(%peer, "{name}: a TLS handshake failed or took too long");
                return;
            }
        },
        None => Box::new(stream),
    };
    let activity = Arc::new(Activity::new());
    let io = Watched { stream, activity: activity.clone(), ticket };
    let times = listener.times;
    let service = {
        let (activity, listener) = (activity.clone(), listener.clone());
        service_fn(move |request: http::Request<Incoming>| {
            let in_flight = activity.begin();
            let answer = listener.handler.handle(request, peer);
            async move {
                let (parts, body) = answer.await.into_parts();
                Ok::<_, std::convert::Infallible>(http::Response::from_parts(parts, Holding { body, in_flight }))
            }
        })
    };
    let connection = listener.http.serve_connection_with_upgrades(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    loop {
        let now = activity.accepted.elapsed();
        let at = match verdict(activity.seen(), now, times) {
            Verdict::LookAgainAt(at) => at,
            Verdict::SlowHead => {
                tracing::debug!(%peer, "{name}: a request head took too long; connection dropped");
                return;
            }
            Verdict::Stalled => {
                tracing::debug!(%peer, "{name}: nothing moved on a connection with requests in flight; dropped");
                return;
            }
            Verdict::Idle => {
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(CLOSING, connection.as_mut()).await;
                return;
            }
        };
        let wake = tokio::time::Instant::from_std(activity.accepted + at);
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!("{name}: connection ended: {e}");
                }
                return;
            }
            () = tokio::time::sleep_until(wake) => {}
            () = activity.wake.notified() => {}
        }
    }
}

pin_project_lite::pin_project! {
    /// An answer's body, holding its request in flight until hyper has
    /// written it whole (or dropped it).
    pub struct Holding<B> {
        #[pin]
        body: B,
        in_flight: InFlight,
    }
}

impl<B: Body> Body for Holding<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
