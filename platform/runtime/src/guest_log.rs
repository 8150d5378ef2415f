//! What guests make the node log: their output, a record per line
//! (`wasmkeep_telemetry::logs`, which bounds each guest's rate), and their
//! failures, one line each, at most a few per guest per interval. A hosted
//! node runs guests it does not trust; a guest that prints in a loop or
//! traps on every request must not flood the node's log or fill its disk.
//!
//! A failure's line carries the output that led to it (a panic's
//! message): the last [`KEPT_BYTES`] the guest wrote.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use wasmkeep_telemetry::logs::{GuestLogs, GuestWho, LINE_BYTES_MAX, Stream};
#[cfg(test)]
use wasmkeep_telemetry::logs::{LogFilter, LogRates};
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

/// A guest's output: written by WASI's stdout and stderr. Each line is a
/// record of the node's guest logs as it completes (an event's last,
/// unfinished line at the event's end); the most recent bytes are also
/// kept for the line that reports a failure.
#[derive(Clone)]
pub(crate) struct GuestOutput {
    shared: Arc<Mutex<Written>>,
    stream: Stream,
}

struct Written {
    kept: BytesMut,
    /// The line being written to stdout and to stderr.
    lines: [Vec<u8>; 2],
    /// A stream's line was cut: the rest of it, to its break, is dropped.
    cutting: [bool; 2],
    who: GuestWho,
    logs: Arc<GuestLogs>,
    /// The `traceparent` of the event being run.
    trace: Option<String>,
    /// A panic's report is being written to stderr: its lines are the
    /// failure's record, not records of their own.
    panicking: bool,
    /// Blank stderr lines not yet recorded: the one a panic's report
    /// starts with is not a record.
    blank_stderr: u32,
}

impl Written {
    fn end_line(&mut self, i: usize, stream: Stream) {
        let line = std::mem::take(&mut self.lines[i]);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if stream == Stream::Stderr {
            if self.panicking {
                return;
            }
            if line.is_empty() {
                self.blank_stderr += 1;
                return;
            }
            if is_panic_report(line) {
                self.panicking = true;
                self.blank_stderr = 0;
                return;
            }
            self.flush_blanks();
        }
        self.logs.line(&self.who, stream, line, self.trace.as_deref());
    }

    fn flush_blanks(&mut self) {
        for _ in 0..std::mem::take(&mut self.blank_stderr) {
            self.logs.line(&self.who, Stream::Stderr, b"", self.trace.as_deref());
        }
    }
}

/// The first line of Rust's panic report: `thread '…' panicked at …`
/// (`thread '…' (1) panicked at …` from Rust 1.91).
fn is_panic_report(line: &[u8]) -> bool {
    line.starts_with(b"thread '") && line.windows(13).any(|w| w == b" panicked at ")
}

/// A guest's stream's slot (a guest writes no `failure` stream: the node does).
fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr | Stream::Failure => 1,
    }
}

impl GuestOutput {
    /// The guest's stdout; [`Self::stderr`] gives its stderr.
    pub(crate) fn new(who: GuestWho, logs: Arc<GuestLogs>) -> Self {
        let written = Written {
            kept: BytesMut::new(),
            lines: Default::default(),
            cutting: [false; 2],
            who,
            logs,
            trace: None,
            panicking: false,
            blank_stderr: 0,
        };
        Self { shared: Arc::new(Mutex::new(written)), stream: Stream::Stdout }
    }

    pub(crate) fn stderr(&self) -> Self {
        Self { shared: self.shared.clone(), stream: Stream::Stderr }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Written> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, mut bytes: &[u8]) {
        let mut w = self.lock();
        w.kept.extend_from_slice(bytes);
        if w.kept.len() > KEPT_BYTES {
            let extra = w.kept.len() - KEPT_BYTES;
            let _ = w.kept.split_to(extra);
        }
        let i = index(self.stream);
        while !bytes.is_empty() {
            let (part, ends) = match bytes.iter().position(|b| *b == b'\n') {
                Some(at) => (&bytes[..at], Some(at + 1)),
                None => (bytes, None),
            };
            if !w.cutting[i] {
                let room = (LINE_BYTES_MAX + 1).saturating_sub(w.lines[i].len());
                w.lines[i].extend_from_slice(&part[..part.len().min(room)]);
                if w.lines[i].len() > LINE_BYTES_MAX {
                    // The record is the line's start, marked cut.
                    w.end_line(i, self.stream);
                    w.cutting[i] = true;
                }
            }
            match ends {
                Some(at) => {
                    if !std::mem::take(&mut w.cutting[i]) {
                        w.end_line(i, self.stream);
                    }
                    bytes = &bytes[at..];
                }
                None => break,
            }
        }
    }

    /// The event that runs next, in the trace `traceparent` names.
    pub(crate) fn begin(&self, traceparent: Option<String>) {
        self.lock().trace = traceparent;
    }

    /// Ends the event: a line it left unfinished is a record of its own.
    pub(crate) fn end(&self) {
        let mut w = self.lock();
        for (i, stream) in [(0, Stream::Stdout), (1, Stream::Stderr)] {
            if !w.lines[i].is_empty() {
                w.end_line(i, stream);
            }
            w.cutting[i] = false;
        }
        if !std::mem::take(&mut w.panicking) {
            w.flush_blanks();
        }
        w.blank_stderr = 0;
    }

    /// The node's record of the event's failure (`tenant_line`), in the
    /// event's trace.
    pub(crate) fn fail(&self, line: &str) {
        let w = self.lock();
        w.logs.line(&w.who, Stream::Failure, line.as_bytes(), w.trace.as_deref());
    }

    /// The output since the last take, as one line (line breaks shown as
    /// ` | `, control characters dropped): for a failure's line.
    pub(crate) fn take(&self) -> Option<String> {
        let bytes = std::mem::take(&mut self.lock().kept);
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

/// Which guest a line is about: its tenant, app, and the actor's class
/// and name (none for a front).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GuestLabel {
    pub who: GuestWho,
}

impl GuestLabel {
    /// An actor of `app`.
    pub fn actor(app: &wasmkeep_core::AppRef, address: &wasmkeep_core::Address) -> Self {
        let who = GuestWho {
            tenant: app.tenant.as_str().into(),
            app: app.name.as_str().into(),
            class: Some(address.class.as_str().into()),
            name: Some(address.name.as_str().into()),
        };
        Self { who }
    }

    /// The front of `app`.
    pub fn front(app: &wasmkeep_core::AppRef) -> Self {
        let who =
            GuestWho { tenant: app.tenant.as_str().into(), app: app.name.as_str().into(), class: None, name: None };
        Self { who }
    }

    /// `tenant/app`, as the node's lines name an app.
    fn app(&self) -> String {
        format!("{}/{}", self.who.tenant, self.who.app)
    }

    /// The actor's address (`class/name`), or `_front`.
    fn guest(&self) -> String {
        match (&self.who.class, &self.who.name) {
            (Some(class), Some(name)) => format!("{class}/{name}"),
            _ => "_front".to_owned(),
        }
    }
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

/// A guest's window: its app's label and its own.
type GuestKey = (String, String);

/// How many lines each guest logged in its current interval.
fn windows() -> &'static Mutex<HashMap<GuestKey, Window>> {
    static WINDOWS: OnceLock<Mutex<HashMap<GuestKey, Window>>> = OnceLock::new();
    WINDOWS.get_or_init(Mutex::default)
}

/// The key of an app's own window: no guest is named `*`.
fn app_key(label: &GuestLabel) -> GuestKey {
    (label.app(), "*".into())
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
    let key: GuestKey = (label.app(), label.guest());
    let mut windows = windows().lock().unwrap_or_else(|p| p.into_inner());
    if windows.len() >= GUESTS_REMEMBERED && !windows.contains_key(&key) {
        windows.retain(|k, w| now.duration_since(w.started) < INTERVAL || &*k.1 == "*");
        if windows.len() >= GUESTS_REMEMBERED {
            // Forget the guests, never the apps' windows.
            windows.retain(|k, _| &*k.1 == "*");
        }
    }
    let fresh = || Window { started: now, logged: 0, suppressed: 0 };
    let app_allows = count(windows.entry(app_key(label)).or_insert_with(fresh), now, LINES_PER_APP);
    let window = windows.entry(key).or_insert_with(fresh);
    if !app_allows || !count(window, now, LINES_PER_INTERVAL) {
        window.suppressed += 1;
        return None;
    }
    Some(std::mem::take(&mut window.suppressed))
}

fn suppressed_note(n: u64) -> String {
    if n == 0 { String::new() } else { format!(" ({n} earlier lines of this guest not logged)") }
}

/// The failure as its tenant reads it in the tail: what ended the event,
/// with a panic's location and message when the output has one.
pub(crate) fn tenant_line(
    kind: FailureKind,
    detail: &str,
    output: Option<&str>,
    out_of_memory: Option<&str>,
) -> String {
    match (kind, out_of_memory, output.and_then(panic_message)) {
        (FailureKind::Wall, ..) => "cut at its wall: the event ran out of time and was stopped".to_owned(),
        (FailureKind::Trap, Some(why), _) => {
            let said = output.filter(|o| o.contains("memory allocation of")).map(|o| {
                let from = o.find("memory allocation of").unwrap_or(0);
                format!(": {}", o[from..].split(" | ").next().unwrap_or_default())
            });
            format!("out of memory ({why}){}", said.unwrap_or_default())
        }
        (FailureKind::Trap, None, Some(panic)) => format!("trapped: {panic} ({detail})"),
        (FailureKind::Trap, None, None) => format!("trapped: {detail}"),
    }
}

/// `panicked at FILE:LINE:COL: MESSAGE` from a failure's output (its lines
/// joined with ` | `), without the note about backtraces.
fn panic_message(output: &str) -> Option<String> {
    let at = output.find("panicked at ")?;
    let report = &output[at..];
    let report = report.split(" | note: ").next().unwrap_or(report);
    Some(report.replace(" | ", " ").trim().to_owned())
}

/// Logs a guest's failure, as one line, with its output.
pub(crate) fn failure(label: &GuestLabel, kind: FailureKind, detail: &str, output: Option<String>) {
    let Some(suppressed) = admit(label, Instant::now()) else { return };
    let note = suppressed_note(suppressed);
    let output = output.map(|o| format!("; output: {o}")).unwrap_or_default();
    match kind {
        FailureKind::Wall => {
            tracing::warn!(target: "wasmkeep::guest", app = %label.app(), guest = %label.guest(), "cut at its wall{output}{note}")
        }
        FailureKind::Trap => {
            tracing::warn!(target: "wasmkeep::guest", app = %label.app(), guest = %label.guest(), "trapped: {detail}{output}{note}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(guest: &str) -> GuestLabel {
        named("t/app", guest)
    }

    fn named(app: &str, guest: &str) -> GuestLabel {
        let (tenant, app) = app.split_once('/').unwrap();
        let (class, name) = guest.split_once('/').unwrap();
        let who =
            GuestWho { tenant: tenant.into(), app: app.into(), class: Some(class.into()), name: Some(name.into()) };
        GuestLabel { who }
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
        let guest = |i: usize| named("limiter-test/many", &format!("room/{i}"));
        let logged = (0..500).filter(|i| admit(&guest(*i), t0).is_some()).count();
        assert_eq!(logged, LINES_PER_APP as usize, "one name per request does not multiply the lines");
        let other = named("limiter-test/other", "room/0");
        assert_eq!(admit(&other, t0), Some(0), "another app is not held back");
        assert!(admit(&guest(0), t0 + INTERVAL).is_some(), "the next interval logs again");
    }

    #[test]
    fn output_is_kept_short_and_on_one_line() {
        let out = output(1000);
        assert_eq!(out.take(), None);
        out.push(b"thread panicked at src/lib.rs:3:\nthe probe traps\n\n\x1b[0m");
        assert_eq!(out.take().as_deref(), Some("thread panicked at src/lib.rs:3: | the probe traps | [0m"));
        assert_eq!(out.take(), None, "taken once");
        out.push(&vec![b'x'; 10 * KEPT_BYTES]);
        out.push(b"\nlast");
        let kept = out.take().unwrap();
        assert!(kept.len() <= KEPT_BYTES + 3 && kept.ends_with("last"), "{}", kept.len());
    }

    fn output(rate: u32) -> GuestOutput {
        let who = GuestWho { tenant: "t".into(), app: "a".into(), class: Some("c".into()), name: Some("n".into()) };
        GuestOutput::new(who, Arc::new(GuestLogs::new(LogRates { per_actor: rate, per_app: rate })))
    }

    fn records(out: &GuestOutput) -> Vec<(Stream, String, bool, Option<String>)> {
        let logs = out.lock().logs.clone();
        let filter = LogFilter { tenant: "t".into(), app: "a".into(), ..Default::default() };
        logs.recent(&filter).iter().map(|r| (r.stream, r.line.clone(), r.truncated, r.trace_id.clone())).collect()
    }

    /// Lines are records as they complete, whatever the writes' sizes; an
    /// event's unfinished line is one at its end; each stream its own.
    #[test]
    fn each_line_is_a_record_of_its_stream_and_its_events_trace() {
        let out = output(1000);
        let err = out.stderr();
        out.begin(Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()));
        out.push(b"hel");
        err.push(b"oops\r\n");
        out.push(b"lo\nwor");
        assert_eq!(records(&out).len(), 2);
        out.push(b"ld\n\nlast");
        out.end();
        let trace = Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned());
        let got = records(&out);
        let lines: Vec<_> = got.iter().map(|r| (r.0, r.1.as_str())).collect();
        assert_eq!(
            lines,
            [
                (Stream::Stderr, "oops"),
                (Stream::Stdout, "hello"),
                (Stream::Stdout, "world"),
                (Stream::Stdout, ""),
                (Stream::Stdout, "last")
            ]
        );
        assert!(got.iter().all(|r| r.3 == trace));
        out.begin(None);
        out.push(b"untraced\n");
        assert_eq!(records(&out).last().unwrap().3, None);
    }

    /// A line over the limit is its start, marked cut; the rest of it, in
    /// however many writes, is dropped; the next line is whole.
    #[test]
    fn a_long_line_is_cut_once() {
        let out = output(1000);
        out.push(&vec![b'x'; LINE_BYTES_MAX - 1]);
        out.push(b"yy");
        out.push(&vec![b'z'; 3 * LINE_BYTES_MAX]);
        out.push(&vec![b'z'; 3 * LINE_BYTES_MAX]);
        assert!(out.lock().lines[0].len() <= LINE_BYTES_MAX + 1, "the node holds no more of a line than it logs");
        out.push(b"z\nnext\n");
        let got = records(&out);
        assert_eq!(got.len(), 2, "{:?}", got.iter().map(|r| r.1.len()).collect::<Vec<_>>());
        assert_eq!((got[0].1.len(), got[0].2), (LINE_BYTES_MAX, true));
        assert!(got[0].1.ends_with("xy"));
        assert_eq!((got[1].1.as_str(), got[1].2), ("next", false));
    }
}
