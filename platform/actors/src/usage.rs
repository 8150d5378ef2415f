//! What each app used: requests, events, guest CPU and wall time (its
//! actors' and its front's), outbound requests and bytes (the control
//! plane adds what it stores and its open sockets). Counted where it
//! happens; the control plane adds the counts to the store per period now
//! and then (`Node::usage_told` takes off what it added).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use wasmkeep_telemetry::AppMetrics;

/// One app's counters.
#[derive(Debug, Default)]
pub struct AppUsage {
    pub requests: AtomicU64,
    pub events: AtomicU64,
    pub cpu_micros: AtomicU64,
    pub wall_micros: AtomicU64,
}

impl AppUsage {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn request(&self) {
        Self::add(&self.requests, 1);
    }

    /// Runs one event's guest code, counting its CPU and wall time.
    pub(crate) async fn event<F: Future>(&self, metrics: Option<&AppMetrics>, run: F) -> F::Output {
        let out = self.timed(metrics, run).await;
        Self::add(&self.events, 1);
        out
    }

    /// Runs a front request's guest code, counting its CPU and wall time
    /// (not an event).
    pub(crate) async fn front<F: Future>(&self, metrics: Option<&AppMetrics>, run: F) -> F::Output {
        self.timed(metrics, run).await
    }

    async fn timed<F: Future>(&self, metrics: Option<&AppMetrics>, run: F) -> F::Output {
        let started = Instant::now();
        let mut cpu = 0;
        let out = CpuTimed { inner: std::pin::pin!(run), cpu: &mut cpu }.await;
        Self::add(&self.cpu_micros, cpu);
        if let Some(metrics) = metrics {
            metrics.guest_cpu(cpu as f64 / 1e6);
        }
        Self::add(&self.wall_micros, started.elapsed().as_micros() as u64);
        out
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// What an app's actors store, as the store last measured it, and whether
/// a commit on this node may have changed it since. Commits only mark it:
/// the store is asked by [`Node::measure_storage`](crate::Node::measure_storage),
/// off the request path, for the apps marked.
#[derive(Debug, Default)]
pub struct StoredBytes {
    bytes: AtomicU64,
    measured: AtomicBool,
    changed: AtomicBool,
}

impl StoredBytes {
    /// A commit or a deletion of one of the app's actors.
    pub(crate) fn changed(&self) {
        self.changed.store(true, Ordering::Relaxed);
    }

    /// Whether the store should be asked again: never measured, or changed
    /// since (the mark is taken: a commit after it marks again).
    pub(crate) fn take_stale(&self) -> bool {
        let changed = self.changed.swap(false, Ordering::Relaxed);
        changed || !self.measured.load(Ordering::Relaxed)
    }

    pub(crate) fn measured(&self, bytes: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
        self.measured.store(true, Ordering::Relaxed);
    }

    /// The last measure, if there was one.
    pub fn get(&self) -> Option<u64> {
        self.measured.load(Ordering::Relaxed).then(|| self.bytes.load(Ordering::Relaxed))
    }
}

/// The CPU time of the thread polling it, in microseconds.
fn thread_cpu_micros() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

/// A future whose polls' CPU time (on whichever thread polls it) adds up in
/// `cpu`: the guest's own computing, not its waits.
struct CpuTimed<'a, F> {
    inner: Pin<&'a mut F>,
    cpu: &'a mut u64,
}

impl<F: Future> Future for CpuTimed<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let before = thread_cpu_micros();
        let polled = self.inner.as_mut().poll(cx);
        let spent = thread_cpu_micros().saturating_sub(before);
        *self.cpu += spent;
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_event_counts_its_cpu_and_not_its_waits() {
        let usage = AppUsage::default();
        // 20 ms of this thread's CPU (however long the machine makes it
        // take), then a wait that uses none.
        usage
            .event(None, async {
                let start = thread_cpu_micros();
                while thread_cpu_micros() - start < 20_000 {
                    std::hint::black_box(0);
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            })
            .await;
        let (cpu, wall) = (AppUsage::get(&usage.cpu_micros), AppUsage::get(&usage.wall_micros));
        assert!(cpu >= 20_000, "cpu {cpu} µs");
        assert!(wall >= cpu + 50_000, "wall {wall} µs, cpu {cpu} µs");
        // Waiting alone costs (next to) nothing.
        usage.event(None, tokio::time::sleep(std::time::Duration::from_millis(100))).await;
        let waited = AppUsage::get(&usage.cpu_micros) - cpu;
        assert!(waited < 10_000, "a wait counted {waited} µs of CPU");
        assert_eq!(AppUsage::get(&usage.events), 2);
    }
}
