//! One client connection: hyper's HTTP/1.1 and HTTP/2 with the head
//! bounded, and a watchdog that closes it when it is idle too long, a
//! request head takes too long, or nothing progresses while requests wait
//! on it (the rule is `core::connection`). Progress is a request's (a head,
//! its body's bytes) or an answer's (its bytes written to the client),
//! never the connection's own chatter: HTTP/2 PINGs, settings and window
//! updates cost a client nothing, so they keep nothing open. The
//! connection's admission ticket rides in its I/O, so an upgraded socket
//! keeps it until it closes.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
    /// Milliseconds since `accepted` when a request or an answer last
    /// progressed.
    progress_ms: AtomicU64,
    /// Whether the last write waits for the client to take bytes.
    writing: AtomicBool,
    /// Where answers may wait: the answers waiting on their client (their
    /// body's bytes not taken), by id, each with the milliseconds since
    /// `accepted` when it began to.
    on_client: Mutex<HashMap<u64, u64>>,
    next_answer: AtomicU64,
    /// Wakes the watchdog: a head began, the last request ended, or an
    /// answer began to wait on its client.
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
            progress_ms: AtomicU64::new(0),
            writing: AtomicBool::new(false),
            on_client: Mutex::new(HashMap::new()),
            next_answer: AtomicU64::new(0),
            wake: Notify::new(),
        }
    }

    fn since_accepted_ms(&self) -> u64 {
        self.accepted.elapsed().as_millis() as u64
    }

    fn progressed(&self) {
        self.progress_ms.store(self.since_accepted_ms(), Ordering::Relaxed);
    }

    fn wrote(&self, polled: &Poll<io::Result<usize>>, progress: bool) {
        match polled {
            Poll::Ready(Ok(n)) if *n > 0 => {
                if progress {
                    self.progressed();
                }
                self.writing.store(false, Ordering::Relaxed);
            }
            Poll::Pending => self.writing.store(true, Ordering::Relaxed),
            _ => {}
        }
    }

    /// Bytes of HTTP/1.1 (or not yet told): a head's or a body's.
    fn http1_read(&self) {
        self.progressed();
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return;
        }
        let now = self.since_accepted_ms() + 1;
        if self.head_started_ms.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.wake.notify_one();
        }
    }

    /// A request began (its head is whole): held until its answer is
    /// written (or dropped). Its answer is watched when `watched`.
    fn begin(self: &Arc<Self>, watched: bool) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started_ms.store(0, Ordering::Relaxed);
        self.progressed();
        let answer = watched.then(|| self.next_answer.fetch_add(1, Ordering::Relaxed));
        InFlight { activity: self.clone(), answer }
    }

    fn lock_on_client(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.on_client.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answer `id` waits on its client from now: hyper has not taken its
    /// body, or holds bytes of it the client has not taken.
    fn on_client(&self, id: u64) {
        let mut on_client = self.lock_on_client();
        let first = on_client.is_empty();
        on_client.insert(id, self.since_accepted_ms());
        drop(on_client);
        if first {
            self.wake.notify_one();
        }
    }

    /// Answer `id` waits on itself (its body has nothing yet), or is done.
    fn not_on_client(&self, id: u64) {
        self.lock_on_client().remove(&id);
    }

    /// Since when the answer waiting longest on its client has waited.
    fn earliest_on_client(&self) -> Option<Duration> {
        self.lock_on_client().values().min().map(|ms| Duration::from_millis(*ms))
    }

    fn seen(&self) -> ConnectionSeen {
        // `in_flight` first: a request that ended wrote `idle_since` before.
        let in_flight = self.in_flight.load(Ordering::Acquire);
        let head = self.head_started_ms.load(Ordering::Relaxed);
        ConnectionSeen {
            in_flight,
            idle_since: Duration::from_millis(self.idle_since_ms.load(Ordering::Relaxed)),
            head_started: (head > 0).then(|| Duration::from_millis(head - 1)),
            last_io: Duration::from_millis(self.progress_ms.load(Ordering::Relaxed)),
            writing: self.writing.load(Ordering::Relaxed),
        }
    }
}

/// One request in flight on a connection.
pub struct InFlight {
    activity: Arc<Activity>,
    /// Its answer's id, where answers may wait (and are watched).
    answer: Option<u64>,
}

/// What an answer's body gave when polled.
enum Gave {
    Nothing,
    Frame,
    End,
}

impl InFlight {
    /// Its answer is ready: it waits on hyper, and so on the client, until
    /// its body is polled.
    fn answered(&self) {
        if let Some(id) = self.answer {
            self.activity.on_client(id);
        }
    }

    /// Its body was polled: with nothing yet it waits on itself (a tail
    /// waiting for lines), which is its business; with a frame, it waits on
    /// the client to take it until the body is polled again.
    fn polled(&self, gave: Gave) {
        let Some(id) = self.answer else { return };
        match gave {
            Gave::Frame => self.activity.on_client(id),
            Gave::Nothing | Gave::End => self.activity.not_on_client(id),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.activity;
        if let Some(id) = self.answer {
            activity.not_on_client(id);
        }
        activity.idle_since_ms.store(activity.since_accepted_ms(), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.wake.notify_one();
        }
    }
}

/// A connection's byte stream: the socket, or TLS over it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// What a connection speaks, once its first bytes tell.
enum Version {
    /// Not told yet: the bytes so far (fewer than the preface's).
    Unknown(Vec<u8>),
    Http1,
    Http2(Box<Frames>),
}

impl Version {
    /// Bytes read from the client: progress, a head begun, or neither.
    fn read(&mut self, bytes: &[u8], activity: &Activity) {
        match self {
            Self::Http1 => activity.http1_read(),
            Self::Http2(frames) => {
                if frames.read(bytes) {
                    activity.progressed();
                }
            }
            Self::Unknown(seen) => {
                let mut all = std::mem::take(seen);
                all.extend_from_slice(bytes);
                let told = all.len().min(PREFACE.len());
                if told < PREFACE.len() && PREFACE.starts_with(&all) {
                    // Perhaps a preface, perhaps a head: slow either way.
                    *seen = all;
                    activity.http1_read();
                } else if all[..told] == *PREFACE {
                    activity.head_started_ms.store(0, Ordering::Relaxed);
                    let mut frames = Box::new(Frames::new());
                    if frames.read(&all) {
                        activity.progressed();
                    }
                    *self = Self::Http2(frames);
                } else {
                    *self = Self::Http1;
                    activity.http1_read();
                }
            }
        }
    }

    /// Whether bytes written to the client are an answer's.
    fn wrote(&mut self, bytes: &[u8]) -> bool {
        match self {
            Self::Http2(frames) => frames.wrote(bytes),
            _ => true,
        }
    }
}

mod kind {
    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    pub const RST_STREAM: u8 = 3;
    pub const CONTINUATION: u8 = 9;
}
const END_STREAM: u8 = 0x1;
/// The client's preface, before its first frame.
const PREFACE_BYTES: usize = 24;
/// Streams followed at once: beyond the concurrent streams a connection
/// may open (the others are refused), so none that matters is missed.
const OPEN_MAX: usize = 1024;

/// An HTTP/2 connection's frames, followed both ways only as far as
/// progress needs: a request body's bytes on a stream the client may still
/// send on, and an answer's head and body bytes written.
struct Frames {
    read: FrameCursor,
    write: FrameCursor,
    /// Streams whose request body the client may still send.
    open: Vec<u32>,
}

/// A frame's header: its type, flags and stream.
#[derive(Clone, Copy)]
struct FrameHead {
    kind: u8,
    flags: u8,
    stream: u32,
}

/// Where one direction's bytes are among its frames.
struct FrameCursor {
    /// Bytes to pass before the first frame (the client's preface).
    skip: usize,
    head: [u8; 9],
    /// Of the current frame's header; 9 once whole, then its payload.
    have: usize,
    /// Payload bytes left of the current frame.
    left: u32,
    /// Whether the current frame's payload is progress.
    counts: bool,
}

impl FrameCursor {
    fn new(skip: usize) -> Self {
        Self { skip, head: [0; 9], have: 0, left: 0, counts: false }
    }

    /// Follows `bytes`; `counts` says, at each frame's header, whether its
    /// payload is progress. Whether any such payload byte was among them.
    fn feed(&mut self, bytes: &[u8], mut counts: impl FnMut(FrameHead) -> bool) -> bool {
        let skipped = self.skip.min(bytes.len());
        self.skip -= skipped;
        let mut bytes = &bytes[skipped..];
        let mut progressed = false;
        while !bytes.is_empty() {
            if self.have < self.head.len() {
                let n = (self.head.len() - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have < self.head.len() {
                    break;
                }
                let h = self.head;
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                self.counts = counts(FrameHead { kind: h[3], flags: h[4], stream });
                self.left = u32::from_be_bytes([0, h[0], h[1], h[2]]);
            } else {
                let n = (self.left as usize).min(bytes.len());
                progressed |= self.counts && n > 0;
                self.left -= n as u32;
                bytes = &bytes[n..];
            }
            if self.have == self.head.len() && self.left == 0 {
                self.have = 0;
            }
        }
        progressed
    }
}

impl Frames {
    fn new() -> Self {
        Self { read: FrameCursor::new(PREFACE_BYTES), write: FrameCursor::new(0), open: Vec::new() }
    }

    /// Bytes from the client: whether they carried a request body's bytes.
    /// A head is counted when hyper hands the request on.
    fn read(&mut self, bytes: &[u8]) -> bool {
        let open = &mut self.open;
        self.read.feed(bytes, |head| {
            let known = open.iter().position(|s| *s == head.stream);
            let ends = head.flags & END_STREAM != 0;
            match head.kind {
                kind::DATA => {
                    if let (Some(i), true) = (known, ends) {
                        open.swap_remove(i);
                    }
                    known.is_some()
                }
                kind::HEADERS => {
                    match known {
                        Some(i) if ends => _ = open.swap_remove(i),
                        None if !ends && open.len() < OPEN_MAX => open.push(head.stream),
                        _ => {}
                    }
                    false
                }
                kind::RST_STREAM => {
                    if let Some(i) = known {
                        open.swap_remove(i);
                    }
                    false
                }
                _ => false,
            }
        })
    }

    /// Bytes to the client: whether they carried an answer's head or body.
    fn wrote(&mut self, bytes: &[u8]) -> bool {
        let open = &mut self.open;
        self.write.feed(bytes, |head| match head.kind {
            kind::DATA | kind::HEADERS | kind::CONTINUATION => true,
            kind::RST_STREAM => {
                // The server gave up the stream: what the client sends on
                // it now is not a body anyone reads.
                open.retain(|s| *s != head.stream);
                false
            }
            _ => false,
        })
    }
}

pin_project_lite::pin_project! {
    /// The connection's stream (TLS already undone), telling the watchdog
    /// when requests and answers progress and holding the connection's
    /// ticket for as long as the socket lives.
    pub(crate) struct Watched {
        #[pin]
        stream: Box<dyn Io>,
        activity: Arc<Activity>,
        version: Version,
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
            this.version.read(&buf.filled()[before..], this.activity);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.project();
        let polled = this.stream.poll_write(cx, buf);
        let progress = match &polled {
            Poll::Ready(Ok(n)) => this.version.wrote(&buf[..*n]),
            _ => false,
        };
        this.activity.wrote(&polled, progress);
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
        let mut progress = false;
        if let Poll::Ready(Ok(n)) = &polled {
            let mut left = *n;
            for buf in bufs {
                let n = left.min(buf.len());
                progress |= this.version.wrote(&buf[..n]);
                left -= n;
                if left == 0 {
                    break;
                }
            }
        }
        this.activity.wrote(&polled, progress);
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
    let io = Watched { stream, activity: activity.clone(), version: Version::Unknown(Vec::new()), ticket };
    let times = listener.times;
    let service = {
        let (activity, listener) = (activity.clone(), listener.clone());
        service_fn(move |request: http::Request<Incoming>| {
            let in_flight = activity.begin(times.answers_may_wait);
            let answer = listener.handler.handle(request, peer);
            async move {
                let (parts, body) = answer.await.into_parts();
                in_flight.answered();
                Ok::<_, std::convert::Infallible>(http::Response::from_parts(parts, Holding { body, in_flight }))
            }
        })
    };
    let connection = listener.http.serve_connection_with_upgrades(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    loop {
        let now = activity.accepted.elapsed();
        let seen = activity.seen();
        let mut at = verdict(seen, now, times);
        // Where answers may wait, they may only while they wait on
        // themselves: one waiting on its client (a window held shut, a
        // socket not read) has the idle time, as an idle connection has.
        if let (Verdict::LookAgainAt(then), Some(since)) = (at, activity.earliest_on_client()) {
            let ends = since.max(seen.last_io) + times.keepalive_idle;
            if now >= ends {
                tracing::debug!(%peer, "{name}: an answer waited on its client for the idle time; connection dropped");
                return;
            }
            at = Verdict::LookAgainAt(then.min(ends));
        }
        let at = match at {
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
    /// written it whole (or dropped it), and telling the watchdog whether
    /// it waits on itself or on its client.
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
        let this = self.project();
        let polled = this.body.poll_frame(cx);
        this.in_flight.polled(match &polled {
            Poll::Pending => Gave::Nothing,
            Poll::Ready(Some(Ok(_))) => Gave::Frame,
            Poll::Ready(_) => Gave::End,
        });
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut bytes = vec![len[1], len[2], len[3], kind, flags];
        bytes.extend_from_slice(&stream.to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    const PING: u8 = 6;
    const SETTINGS: u8 = 4;
    const WINDOW_UPDATE: u8 = 8;

    /// The client's bytes, read in pieces of `piece` bytes: whether each
    /// frame's bytes were progress.
    fn read_in_pieces(frames: &mut Frames, bytes: &[u8], piece: usize) -> bool {
        bytes.chunks(piece).fold(false, |progressed, chunk| frames.read(chunk) | progressed)
    }

    #[test]
    fn only_a_request_bodys_bytes_are_progress_of_the_client() {
        for piece in [1, 5, 4096] {
            let mut frames = Frames::new();
            let mut start = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            start.extend(frame(SETTINGS, 0, 0, &[0; 6]));
            assert!(!read_in_pieces(&mut frames, &start, piece), "the preface and settings are not");
            assert!(!read_in_pieces(&mut frames, &frame(PING, 0, 0, &[7; 8]), piece), "a PING is not");
            assert!(!read_in_pieces(&mut frames, &frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]), piece));
            // A head is counted when hyper hands the request on, not here.
            assert!(!read_in_pieces(&mut frames, &frame(kind::HEADERS, 0x4, 1, &[0x82; 20]), piece));
            assert!(read_in_pieces(&mut frames, &frame(kind::DATA, 0, 1, b"body"), piece), "a body's bytes are");
            assert!(!read_in_pieces(&mut frames, &frame(kind::DATA, 0, 3, b"body"), piece), "on no open stream");
            assert!(read_in_pieces(&mut frames, &frame(kind::DATA, END_STREAM, 1, b"last"), piece));
            assert!(!read_in_pieces(&mut frames, &frame(kind::DATA, 0, 1, b"more"), piece), "past its end");
            // A stream the server reset is no body anyone reads.
            assert!(!read_in_pieces(&mut frames, &frame(kind::HEADERS, 0x4, 5, &[0x82; 3]), piece));
            assert!(!frames.wrote(&frame(kind::RST_STREAM, 0, 5, &[0, 0, 0, 0])));
            assert!(!read_in_pieces(&mut frames, &frame(kind::DATA, 0, 5, b"x"), piece));
            assert!(frames.open.is_empty(), "{:?}", frames.open);
        }
    }

    #[test]
    fn only_an_answers_bytes_are_progress_to_the_client() {
        let mut frames = Frames::new();
        assert!(!frames.wrote(&frame(SETTINGS, 0, 0, &[0; 12])));
        assert!(!frames.wrote(&frame(PING, 0x1, 0, &[7; 8])), "a PING's answer is not");
        assert!(!frames.wrote(&frame(WINDOW_UPDATE, 0, 1, &[0, 0, 1, 0])));
        assert!(frames.wrote(&frame(kind::HEADERS, 0x4, 1, &[0x88; 10])), "an answer's head is");
        let data = frame(kind::DATA, 0, 1, &[b'x'; 100]);
        // Its header alone is not yet: its bytes are.
        assert!(!frames.wrote(&data[..9]));
        assert!(frames.wrote(&data[9..10]));
        assert!(frames.wrote(&data[10..]));
        assert!(!frames.wrote(&frame(PING, 0x1, 0, &[7; 8])));
    }

    #[test]
    fn the_version_is_told_from_the_first_bytes_in_pieces() {
        let activity = Activity::new();
        let mut version = Version::Unknown(Vec::new());
        version.read(b"PRI * H", &activity);
        assert!(matches!(version, Version::Unknown(_)));
        version.read(b"TTP/2.0\r\n\r\nSM\r\n\r\n", &activity);
        let Version::Http2(frames) = &mut version else { panic!("HTTP/2") };
        assert_eq!(frames.read.skip, 0, "the preface is passed");
        assert_eq!(activity.seen().head_started, None, "a preface is no head begun");
        let mut version = Version::Unknown(Vec::new());
        version.read(b"GE", &activity);
        assert!(matches!(version, Version::Http1));
        assert!(activity.seen().head_started.is_some(), "a head begun");
    }
}
