//! What guests make the node log: their output and their failures, one
//! line each, at most a few per guest per interval. A hosted node runs
//! guests it does not trust; a guest that prints in a loop or traps on
//! every request must not flood the node's log or fill its disk.
//!
//! A guest's stdout and stderr are kept in memory (the last
//! [`KEPT_BYTES`]) and logged once per event, as one line; a failure is
//! one line too, with the output that led to it (a panic's message).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Output kept per instance, its most recent bytes.
pub const KEPT_BYTES: usize = 2048;
/// Lines logged per guest per interval at most.
const LINES_PER_INTERVAL: u32 = 5;
/// Lines logged per app (all its guests) per interval at most.
const LINES_PER_APP: u32 = 50;
const INTERVAL: Duration = Duration::from_secs(10);
/// Guests remembered by the limiter before the oldest are forgotten.
const GUESTS_REMEMBERED: usize = 10_000;

/// A guest's output: written by WASI's stdout and stderr, read by the host
/// at the end of each event.
#[derive(Clone, Default)]
pub(crate) struct GuestOutput(Arc<Mutex<BytesMut>>);

impl GuestOutput {
    fn push(&self, bytes: &[u8]) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.extend_from_slice(bytes);
        if kept.len() > KEPT_BYTES {
            let extra = kept.len() - KEPT_BYTES;
            let _ = kept.split_to(extra);
        }
    }

    /// The output since the last take, as one line (line breaks shown as
    /// ` | `, control characters dropped).
    pub(crate) fn take(&self) -> Option<String> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<String> = text
            .lines()
            .map(|l| l.chars().filter(|c| !c.is_control()).collect::<String>())
            .filter(|l| !l.trim().is_empty())
            .collect();
        (!lines.is_empty()).then(|| lines.join(" | "))
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Which guest a line is about: `tenant/app`, and the actor's address or
/// `_front`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GuestLabel {
    pub app: Arc<str>,
    pub guest: Arc<str>,
}

/// What ended an event badly, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Trap,
    Wall,
}

struct Window {
    started: Instant,
    logged: u32,
    suppressed: u64,
}

/// How many lines each guest logged in its current interval.
fn windows() -> &'static Mutex<HashMap<GuestLabel, Window>> {
    static WINDOWS: OnceLock<Mutex<HashMap<GuestLabel, Window>>> = OnceLock::new();
    WINDOWS.get_or_init(Mutex::default)
}

/// The key of an app's own window: no guest is named `*`.
fn app_key(label: &GuestLabel) -> GuestLabel {
    GuestLabel { app: label.app.clone(), guest: "*".into() }
}

/// Counts a line in `window` at `now`: whether it may be logged.
fn count(window: &mut Window, now: Instant, allowed: u32) -> bool {
    if now.duration_since(window.started) >= INTERVAL {
        window.started = now;
        window.logged = 0;
    }
    if window.logged >= allowed {
        return false;
    }
    window.logged += 1;
    true
}

/// Whether `label` may log a line now, and how many of its lines were
/// suppressed before it. A guest has its few lines per interval, and its
/// app a few more for all its guests together: many guests of one app
/// (an actor name per request, each trapping) log no more than one app.
fn admit(label: &GuestLabel, now: Instant) -> Option<u64> {
    let mut windows = windows().lock().unwrap_or_else(|p| p.into_inner());
    if windows.len() >= GUESTS_REMEMBERED && !windows.contains_key(label) {
        windows.retain(|k, w| now.duration_since(w.started) < INTERVAL || &*k.guest == "*");
        if windows.len() >= GUESTS_REMEMBERED {
            // Forget the guests, never the apps' windows.
            windows.retain(|k, _| &*k.guest == "*");
        }
    }
    let fresh = || Window { started: now, logged: 0, suppressed: 0 };
    let app_allows = count(windows.entry(app_key(label)).or_insert_with(fresh), now, LINES_PER_APP);
    let window = windows.entry(label.clone()).or_insert_with(fresh);
    if !app_allows || !count(window, now, LINES_PER_INTERVAL) {
        window.suppressed += 1;
        return None;
    }
    Some(std::mem::take(&mut window.suppressed))
}

fn suppressed_note(n: u64) -> String {
    if n == 0 { String::new() } else { format!(" ({n} earlier lines of this guest not logged)") }
}

/// Logs a guest's output of one event, as one line.
pub(crate) fn output(label: &GuestLabel, output: Option<String>) {
    let Some(output) = output else { return };
    if let Some(suppressed) = admit(label, Instant::now()) {
        let note = suppressed_note(suppressed);
        tracing::info!(target: "wasmkeep::guest", app = %label.app, guest = %label.guest, "output: {output}{note}");
    }
}

/// Logs a guest's failure, as one line, with its output.
pub(crate) fn failure(label: &GuestLabel, kind: FailureKind, detail: &str, output: Option<String>) {
    let Some(suppressed) = admit(label, Instant::now()) else { return };
    let note = suppressed_note(suppressed);
    let output = output.map(|o| format!("; output: {o}")).unwrap_or_default();
    match kind {
        FailureKind::Wall => {
            tracing::warn!(target: "wasmkeep::guest", app = %label.app, guest = %label.guest, "cut at its wall{output}{note}")
        }
        FailureKind::Trap => {
            tracing::warn!(target: "wasmkeep::guest", app = %label.app, guest = %label.guest, "trapped: {detail}{output}{note}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(guest: &str) -> GuestLabel {
        GuestLabel { app: "t/app".into(), guest: guest.into() }
    }

    #[test]
    fn a_guest_logs_a_few_lines_per_interval_then_says_how_many_it_skipped() {
        let a = label("limiter-test/a");
        let t0 = Instant::now();
        for _ in 0..LINES_PER_INTERVAL {
            assert_eq!(admit(&a, t0), Some(0));
        }
        assert_eq!(admit(&a, t0 + Duration::from_secs(1)), None);
        assert_eq!(admit(&a, t0 + Duration::from_secs(2)), None);
        assert_eq!(admit(&label("limiter-test/b"), t0), Some(0), "another guest has its own");
        assert_eq!(admit(&a, t0 + INTERVAL), Some(2), "the next interval tells what was skipped");
        assert_eq!(admit(&a, t0 + INTERVAL), Some(0));
    }

    #[test]
    fn an_apps_guests_together_log_a_bounded_number_of_lines() {
        let t0 = Instant::now();
        let guest = |i: usize| GuestLabel { app: "limiter-test/many".into(), guest: format!("room/{i}").into() };
        let logged = (0..500).filter(|i| admit(&guest(*i), t0).is_some()).count();
        assert_eq!(logged, LINES_PER_APP as usize, "one name per request does not multiply the lines");
        let other = GuestLabel { app: "limiter-test/other".into(), guest: "room/0".into() };
        assert_eq!(admit(&other, t0), Some(0), "another app is not held back");
        assert!(admit(&guest(0), t0 + INTERVAL).is_some(), "the next interval logs again");
    }

    #[test]
    fn output_is_kept_short_and_on_one_line() {
        let out = GuestOutput::default();
        assert_eq!(out.take(), None);
        out.push(b"thread panicked at src/lib.rs:3:\nthe probe traps\n\n\x1b[0m");
        assert_eq!(out.take().as_deref(), Some("thread panicked at src/lib.rs:3: | the probe traps | [0m"));
        assert_eq!(out.take(), None, "taken once");
        out.push(&vec![b'x'; 10 * KEPT_BYTES]);
        out.push(b"\nlast");
        let kept = out.take().unwrap();
        assert!(kept.len() <= KEPT_BYTES + 3 && kept.ends_with("last"), "{}", kept.len());
    }
}
