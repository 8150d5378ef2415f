//! The accept loop: every connection takes a ticket, within the
//! listener's bound and the bound per client address. Past either the
//! client gets a fast `503` and the node goes on serving the others; an
//! accept that fails (out of descriptors) is logged once per interval, not
//! per try.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmkeep_core::limits::{Bound, REFUSALS_AT_ONCE};

use crate::per_client::{PerClient, Place};

/// How often an accept failure is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// How long a refusal waits for the client's request before it closes.
const REFUSAL_LINGER: Duration = Duration::from_millis(200);
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
retry-after: 1\r\nconnection: close\r\ncontent-length: 36\r\n\r\ntoo many connections; retry shortly\n";

/// The connections a listener holds, in all and per client address.
pub(crate) struct Tickets {
    all: Arc<Semaphore>,
    per_client: PerClient,
    refusing: Arc<Semaphore>,
}

/// One connection's place: given back when the connection's socket closes
/// (an upgraded socket keeps it).
pub(crate) struct Ticket {
    _client: Place,
    _place: OwnedSemaphorePermit,
}

impl Tickets {
    pub(crate) fn new(bound: Bound) -> Self {
        Self {
            all: Arc::new(Semaphore::new(bound.connections as usize)),
            per_client: PerClient::new(bound.per_client),
            // Refusing never takes descriptors the node needs.
            refusing: Arc::new(Semaphore::new(REFUSALS_AT_ONCE as usize)),
        }
    }

    fn take(&self, client: IpAddr) -> Option<Ticket> {
        let place = self.all.clone().try_acquire_owned().ok()?;
        Some(Ticket { _client: self.per_client.take(client)?, _place: place })
    }

    /// Answers `503` without reading more than the request's first bytes,
    /// then closes; under a flood of refusals, just closes.
    fn refuse(&self, mut stream: TcpStream) {
        let Ok(refusing) = self.refusing.clone().try_acquire_owned() else { return };
        tokio::spawn(async move {
            let _refusing = refusing;
            let _ = tokio::time::timeout(REFUSAL_LINGER, stream.write_all(REFUSAL)).await;
            let _ = stream.shutdown().await;
            // Reading what the client sent lets the close be a FIN, not a
            // reset that could take the answer with it.
            let mut sink = [0u8; 4096];
            let _ = tokio::time::timeout(REFUSAL_LINGER, async {
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        });
    }
}

/// Accept failures, logged once per interval with how many there were.
struct AcceptFailures {
    last_logged: Option<Instant>,
    since: u64,
}

impl AcceptFailures {
    /// Counts a failure at `now`; the count to report, when it is time.
    fn failed(&mut self, now: Instant) -> Option<u64> {
        self.since += 1;
        if self.last_logged.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            return None;
        }
        self.last_logged = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

/// Accepts connections until `shutdown`, handing each with its ticket to
/// `serve`; `name` is the listener's, for the log.
pub(crate) async fn accept_loop<F, Fut>(
    name: &'static str,
    listener: TcpListener,
    tickets: Tickets,
    shutdown: impl std::future::Future<Output = ()>,
    serve: F,
) where
    F: Fn(TcpStream, std::net::SocketAddr, Ticket) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut shutdown = std::pin::pin!(shutdown);
    let mut failures = AcceptFailures { last_logged: None, since: 0 };
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    if let Some(times) = failures.failed(Instant::now()) {
                        tracing::warn!("{name}: accept failed ({times} times since the last report): {e}");
                    }
                    // Out of descriptors: give the node a moment to close some.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        match tickets.take(peer.ip()) {
            Some(ticket) => {
                tokio::spawn(serve(stream, peer, ticket));
            }
            None => tickets.refuse(stream),
        }
    }
}

/// Raises the soft limit of open descriptors to the hard one and returns
/// it: each connection and socket is a descriptor.
pub fn raise_descriptor_limit() -> u64 {
    static RAISED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RAISED.get_or_init(raise)
}

fn raise() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` and `setrlimit` read and write the one struct
    // given, which lives for the calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_are_reported_once_per_interval_with_their_count() {
        let mut failures = AcceptFailures { last_logged: None, since: 0 };
        let t0 = Instant::now();
        assert_eq!(failures.failed(t0), Some(1), "the first is reported at once");
        for i in 1..200 {
            assert_eq!(failures.failed(t0 + Duration::from_millis(i * 50)), None);
        }
        assert_eq!(failures.failed(t0 + LOG_EVERY), Some(200), "then the count, once per interval");
        assert_eq!(failures.failed(t0 + LOG_EVERY + Duration::from_secs(1)), None);
    }

    #[tokio::test]
    async fn tickets_are_bounded_in_all_and_per_client() {
        let tickets = Tickets::new(Bound { connections: 3, per_client: 2 });
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let a1 = tickets.take(a).unwrap();
        let _a2 = tickets.take(a).unwrap();
        assert!(tickets.take(a).is_none(), "two per client");
        let b1 = tickets.take(b).unwrap();
        assert!(tickets.take(b).is_none(), "three in all");
        drop(a1);
        assert!(tickets.take(a).is_some(), "a closed connection gives its place back");
        drop(b1);
        assert!(tickets.take(b).is_some());
    }
}
