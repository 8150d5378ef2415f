//! Guests' logs (ADR 0021): each line a guest writes to stdout or stderr
//! becomes a record with whose it is (tenant, app, and the actor's class
//! and name, none for a front) and the trace it was written in. The node
//! writes each record to its own output (target `wasmkeep::guest`, JSON
//! under `log_format = "json"`), keeps each tenant's last few, and hands
//! them to whoever tails them (the provisioning API's
//! `/v1/apps/{app}/logs`).
//!
//! A guest is not trusted to be quiet: its lines are cut at
//! [`LINE_BYTES_MAX`], and each actor (each app, all its guests together)
//! has so many lines a second; the rest are dropped, counted per tenant,
//! and the guest's next record says how many of its lines went. Nor is a
//! tenant: each has its own ring of kept records and its own channel of
//! live ones, so its lines never push out, nor make a tail miss, another
//! tenant's; the rings together have a budget of bytes, and what a
//! tenant's channel holds for its slowest tail has a bound of bytes too.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use wasmkeep_core::names::{ACTOR_NAME_MAX, CLASS_NAME_MAX};

use crate::{Exposition, Source};

/// The target of the events that carry guests' records.
pub const TARGET: &str = "wasmkeep::guest";
/// A line longer than this is cut (its record says so).
pub const LINE_BYTES_MAX: usize = 16 * 1024;
/// Records kept for a tail that starts: each tenant's last, of all its
/// apps.
pub const TENANT_RECORDS: usize = 1000;
/// Bytes that every tenant's kept records may hold together (about 2,000
/// records of 16 KiB lines, or 100,000 short ones): with open sign-up,
/// the tenants' rings need a budget of their own.
pub const KEPT_BYTES: usize = 32 << 20;
/// Bytes a tenant's live channel may hold: an eighth of the rings'
/// budget. A channel holds each record until its slowest tail reads it,
/// so a tail that never reads would otherwise keep a flood of its
/// tenant's lines outside any budget.
pub const TAIL_BYTES: usize = KEPT_BYTES / 8;
/// Records a live tail may fall behind its tenant's guests by before it
/// misses some (and is told how many). A broadcast channel evicts by
/// count, not bytes, so this is as many of the largest records as
/// [`TAIL_BYTES`] holds, rounded down to a power of two (tokio rounds a
/// channel's capacity up to one): 128. A tail's own buffer
/// ([`TAIL_LINES_BUFFERED`]) takes the rest of a burst.
pub const TAIL_BACKLOG: usize = 1 << (TAIL_BYTES / RECORD_BYTES_MAX).ilog2();
const _: () = assert!(TAIL_BACKLOG * RECORD_BYTES_MAX <= TAIL_BYTES);
/// Guests the rate limiter remembers before it forgets the idle ones.
const GUESTS_REMEMBERED: usize = 10_000;
const WINDOW: Duration = Duration::from_secs(1);

/// Which stream a line was written to; `failure` is the node's own line
/// about an event of the guest's that ended badly (cut at its wall,
/// trapped with its panic's message, out of memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
    Failure,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Failure => "failure",
        }
    }
}

/// Whose output it is: an app's actor, or its front (no class, no name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GuestWho {
    pub tenant: Arc<str>,
    pub app: Arc<str>,
    pub class: Option<Arc<str>>,
    pub name: Option<Arc<str>>,
}

/// One line of a guest's, as the node keeps and tails it (and as a tail
/// across the cluster reads another node's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogRecord {
    /// When it was written, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub tenant: Arc<str>,
    pub app: Arc<str>,
    pub class: Option<Arc<str>>,
    pub name: Option<Arc<str>>,
    pub stream: Stream,
    /// The line, without its line break; invalid UTF-8 replaced.
    pub line: String,
    /// The line was longer than [`LINE_BYTES_MAX`]; this is its start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Lines of this guest's dropped by the rate limit since its last record.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_before: u64,
    /// The trace and span of the event (or front request) that wrote it.
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Which records a tail wants: an app's, perhaps of one class, one actor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFilter {
    pub tenant: String,
    pub app: String,
    pub class: Option<String>,
    pub name: Option<String>,
}

impl LogFilter {
    pub fn matches(&self, r: &LogRecord) -> bool {
        *r.tenant == *self.tenant
            && *r.app == *self.app
            && self.class.as_deref().is_none_or(|c| r.class.as_deref() == Some(c))
            && self.name.as_deref().is_none_or(|n| r.name.as_deref() == Some(n))
    }
}

/// The trace and span ids of a `traceparent`, if it is one.
pub fn trace_ids(traceparent: Option<&str>) -> (Option<String>, Option<String>) {
    let mut parts = traceparent.unwrap_or_default().split('-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(trace), Some(span)) if trace.len() == 32 && span.len() == 16 => {
            (Some(trace.to_owned()), Some(span.to_owned()))
        }
        _ => (None, None),
    }
}

/// How many lines a second a guest, and an app, may log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRates {
    pub per_actor: u32,
    pub per_app: u32,
}

struct Window {
    started: Instant,
    lines: u32,
    dropped: u64,
}

impl Window {
    fn new(now: Instant) -> Self {
        Self { started: now, lines: 0, dropped: 0 }
    }

    /// Counts a line at `now`: whether `allowed` lines a window leave room.
    fn take(&mut self, now: Instant, allowed: u32) -> bool {
        if now.duration_since(self.started) >= WINDOW {
            self.started = now;
            self.lines = 0;
        }
        if self.lines >= allowed {
            return false;
        }
        self.lines += 1;
        true
    }
}

/// The rate limit: a window per guest and one per app. Pure: the time is
/// passed in.
#[derive(Default)]
struct Limiter {
    guests: HashMap<GuestWho, Window>,
    apps: HashMap<(Arc<str>, Arc<str>), Window>,
}

impl Limiter {
    /// Whether `who` may log a line at `now`: `Some(lines it dropped
    /// since its last)`, or `None` (counted as dropped).
    fn admit(&mut self, who: &GuestWho, rates: LogRates, now: Instant) -> Option<u64> {
        if self.guests.len() >= GUESTS_REMEMBERED && !self.guests.contains_key(who) {
            // Forget the guests whose window is over and dropped nothing.
            self.guests.retain(|_, w| now.duration_since(w.started) < WINDOW || w.dropped > 0);
            if self.guests.len() >= GUESTS_REMEMBERED {
                self.guests.clear();
            }
            self.apps.retain(|_, w| now.duration_since(w.started) < WINDOW);
        }
        let app = self.apps.entry((who.tenant.clone(), who.app.clone())).or_insert_with(|| Window::new(now));
        let app_allows = app.take(now, rates.per_app);
        let guest = self.guests.entry(who.clone()).or_insert_with(|| Window::new(now));
        if !app_allows || !guest.take(now, rates.per_actor) {
            guest.dropped += 1;
            return None;
        }
        Some(std::mem::take(&mut guest.dropped))
    }
}

/// How much [`Kept`] holds: records per tenant, and bytes for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeptBounds {
    tenant_records: usize,
    bytes: usize,
}

impl Default for KeptBounds {
    fn default() -> Self {
        Self { tenant_records: TENANT_RECORDS, bytes: KEPT_BYTES }
    }
}

/// What a tenant's ring costs beyond its records: its entries in the map
/// and the index, and a small deque's slots.
const RING_BYTES: usize = 1024;

/// What a record costs against the budget: the record, its slots in a
/// ring (one that shrank keeps up to four a record), and its text (the
/// names are shared with the guest while it runs, the record's own after).
fn record_bytes(r: &LogRecord) -> usize {
    let names: usize =
        [Some(&r.tenant), Some(&r.app), r.class.as_ref(), r.name.as_ref()].into_iter().flatten().map(|n| n.len()).sum();
    let ids: usize = [&r.trace_id, &r.span_id].into_iter().flatten().map(String::len).sum();
    RECORD_FIXED_BYTES + r.line.len() + names + ids
}

/// What every record costs, whatever its text.
const RECORD_FIXED_BYTES: usize =
    std::mem::size_of::<LogRecord>() + 2 * std::mem::size_of::<usize>() + 4 * std::mem::size_of::<Slot>();

/// What the largest record costs: a line of [`LINE_BYTES_MAX`], the
/// longest names (a tenant and an app are named like a class) and a
/// trace's and a span's ids.
const RECORD_BYTES_MAX: usize = RECORD_FIXED_BYTES + LINE_BYTES_MAX + 3 * CLASS_NAME_MAX + ACTOR_NAME_MAX + 32 + 16;

/// A kept record and its place in the order they were kept.
type Slot = (u64, Arc<LogRecord>);

/// One tenant's kept records, oldest first, and what they cost.
struct Ring {
    records: VecDeque<Slot>,
    bytes: usize,
}

impl Ring {
    /// Where the ring stands among the others for the budget: by what it
    /// holds, then (among equals) by its oldest record, the oldest last.
    fn rank(&self, tenant: &Arc<str>) -> Rank {
        let oldest = self.records.front().map_or(0, |(seq, _)| *seq);
        (self.bytes, std::cmp::Reverse(oldest), tenant.clone())
    }

    fn pop(&mut self) {
        if let Some((_, oldest)) = self.records.pop_front() {
            self.bytes -= record_bytes(&oldest);
        }
        // A ring that shrank far gives its slots back, so that a tenant
        // left with few records does not hold a full ring's worth.
        if self.records.capacity() > 64 && self.records.len() < self.records.capacity() / 4 {
            self.records.shrink_to(self.records.len() * 2);
        }
    }
}

type Rank = (usize, std::cmp::Reverse<u64>, Arc<str>);

/// The kept records, a ring per tenant: one tenant's lines push out only
/// its own records, at most [`KeptBounds::tenant_records`]. Over the
/// budget of bytes for all, the oldest record of the tenant holding the
/// most goes: that tenant holds more than the budget's fair share (the
/// budget over the tenants holding records), so a quiet tenant below its
/// share never loses a record to another's. A ring left empty goes, and
/// every ring costs something, so the budget bounds the rings too. Pure:
/// the lock is the caller's.
struct Kept {
    bounds: KeptBounds,
    rings: HashMap<Arc<str>, Ring>,
    /// Every ring's rank: the last is the one the budget takes from.
    ranks: BTreeSet<Rank>,
    bytes: usize,
    kept: u64,
}

impl Kept {
    fn new(bounds: KeptBounds) -> Self {
        Self { bounds, rings: HashMap::new(), ranks: BTreeSet::new(), bytes: 0, kept: 0 }
    }

    /// Keeps `record` in its tenant's ring.
    fn push(&mut self, record: Arc<LogRecord>) {
        let tenant = record.tenant.clone();
        let (most, seq) = (self.bounds.tenant_records, self.kept);
        self.kept += 1;
        self.change(&tenant, |ring| {
            if ring.records.len() >= most {
                ring.pop();
            }
            ring.bytes += record_bytes(&record);
            ring.records.push_back((seq, record));
        });
        while self.bytes > self.bounds.bytes {
            let Some((_, _, largest)) = self.ranks.last().cloned() else { break };
            self.change(&largest, Ring::pop);
        }
    }

    /// Changes `tenant`'s ring (made when it has none) with `change`,
    /// keeping the total and the ranks; drops the ring when it is left
    /// empty.
    fn change(&mut self, tenant: &Arc<str>, change: impl FnOnce(&mut Ring)) {
        let ring = match self.rings.entry(tenant.clone()) {
            Entry::Occupied(ring) => {
                let ring = ring.into_mut();
                self.ranks.remove(&ring.rank(tenant));
                self.bytes -= ring.bytes;
                ring
            }
            Entry::Vacant(ring) => ring.insert(Ring { records: VecDeque::new(), bytes: RING_BYTES }),
        };
        change(ring);
        if ring.records.is_empty() {
            self.rings.remove(tenant);
            return;
        }
        self.bytes += ring.bytes;
        self.ranks.insert(ring.rank(tenant));
    }

    /// `tenant`'s kept records, oldest first.
    fn records(&self, tenant: &str) -> impl Iterator<Item = &Arc<LogRecord>> {
        self.rings.get(tenant).into_iter().flat_map(|ring| ring.records.iter().map(|(_, r)| r))
    }

    #[cfg(test)]
    fn ring_bytes(&self, tenant: &str) -> usize {
        self.rings.get(tenant).map_or(0, |ring| ring.bytes)
    }
}

/// The kept records and the live channels, under one lock: a tail that
/// starts gets each record once, kept or live.
struct Rings {
    kept: Kept,
    /// The live channel of each tenant being tailed now.
    live: HashMap<Arc<str>, broadcast::Sender<Arc<LogRecord>>>,
}

/// How many tails the node serves at once, and one tenant of them: each
/// holds a reader's backlog ([`TAIL_LINES_BUFFERED`] lines, up to 512 KiB)
/// for as long as its reader is slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailBounds {
    pub node: usize,
    pub per_tenant: usize,
}

impl Default for TailBounds {
    fn default() -> Self {
        Self { node: 256, per_tenant: 8 }
    }
}

/// A tenant's records as they are written, for one tail.
pub type LiveRecords = broadcast::Receiver<Arc<LogRecord>>;

/// A tail not started: the caller may retry when one ends (a `503`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TailRefused {
    #[error("the account has {0} log tails open on this node already; close one and retry")]
    Tenant(usize),
    #[error("this node serves {0} log tails already; retry shortly")]
    Node(usize),
}

/// The node's guest logs: the limiter, each tenant's last records and
/// live tails, and the count of dropped lines.
pub struct GuestLogs {
    rates: LogRates,
    tails: TailBounds,
    limiter: Mutex<Limiter>,
    rings: Mutex<Rings>,
    dropped: Mutex<std::collections::BTreeMap<Arc<str>, u64>>,
}

impl GuestLogs {
    pub fn new(rates: LogRates) -> Self {
        Self {
            rates,
            tails: TailBounds::default(),
            limiter: Mutex::default(),
            rings: Mutex::new(Rings { kept: Kept::new(KeptBounds::default()), live: HashMap::new() }),
            dropped: Mutex::default(),
        }
    }

    /// With tails bounded by `tails` rather than the defaults.
    pub fn with_tail_bounds(self, tails: TailBounds) -> Self {
        Self { tails, ..self }
    }

    /// A line `who` wrote to `stream` (without its line break), in the
    /// trace `traceparent` names.
    pub fn line(&self, who: &GuestWho, stream: Stream, line: &[u8], traceparent: Option<&str>) {
        self.line_at(who, stream, line, traceparent, Instant::now())
    }

    fn line_at(&self, who: &GuestWho, stream: Stream, line: &[u8], traceparent: Option<&str>, now: Instant) {
        let admitted = self.limiter.lock().unwrap_or_else(|p| p.into_inner()).admit(who, self.rates, now);
        let Some(dropped_before) = admitted else {
            *self.dropped.lock().unwrap_or_else(|p| p.into_inner()).entry(who.tenant.clone()).or_default() += 1;
            return;
        };
        let mut truncated = line.len() > LINE_BYTES_MAX;
        let mut line = String::from_utf8_lossy(&line[..line.len().min(LINE_BYTES_MAX)]).into_owned();
        // An invalid byte becomes three (U+FFFD): cut again, as the bounds
        // of bytes count on no line being longer.
        if line.len() > LINE_BYTES_MAX {
            line.truncate(line.floor_char_boundary(LINE_BYTES_MAX));
            truncated = true;
        }
        let (trace_id, span_id) = trace_ids(traceparent);
        let time_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let record = Arc::new(LogRecord {
            time_ms,
            tenant: who.tenant.clone(),
            app: who.app.clone(),
            class: who.class.clone(),
            name: who.name.clone(),
            stream,
            line,
            truncated,
            dropped_before,
            trace_id,
            span_id,
        });
        emit(&record);
        let mut rings = self.rings.lock().unwrap_or_else(|p| p.into_inner());
        rings.kept.push(record.clone());
        // A channel whose last tail left goes.
        if let Some(live) = rings.live.get(&who.tenant)
            && live.send(record).is_err()
        {
            rings.live.remove(&who.tenant);
        }
    }

    /// The kept records `filter` wants (of its tenant's ring), oldest first.
    pub fn recent(&self, filter: &LogFilter) -> Vec<Arc<LogRecord>> {
        let rings = self.rings.lock().unwrap_or_else(|p| p.into_inner());
        rings.kept.records(&filter.tenant).filter(|r| filter.matches(r)).cloned().collect()
    }

    /// The kept records `filter` wants, and every record of its tenant's
    /// after them (a tail filters its own); refused past the bounds on
    /// tails (a tail is counted for as long as its receiver lives).
    pub fn recent_and_follow(&self, filter: &LogFilter) -> Result<(Vec<Arc<LogRecord>>, LiveRecords), TailRefused> {
        let mut rings = self.rings.lock().unwrap_or_else(|p| p.into_inner());
        // The channels of tenants whose tails all left go (a quiet
        // tenant's would otherwise wait for its next line).
        rings.live.retain(|_, live| live.receiver_count() > 0);
        let tenants = rings.live.get(filter.tenant.as_str()).map_or(0, broadcast::Sender::receiver_count);
        if tenants >= self.tails.per_tenant {
            return Err(TailRefused::Tenant(tenants));
        }
        let node: usize = rings.live.values().map(broadcast::Sender::receiver_count).sum();
        if node >= self.tails.node {
            return Err(TailRefused::Node(node));
        }
        let kept = rings.kept.records(&filter.tenant).filter(|r| filter.matches(r)).cloned().collect();
        let live = rings
            .live
            .entry(Arc::from(filter.tenant.as_str()))
            .or_insert_with(|| broadcast::channel(TAIL_BACKLOG).0)
            .subscribe();
        Ok((kept, live))
    }

    /// Lines of `tenant`'s guests dropped by the rate limit.
    pub fn dropped(&self, tenant: &str) -> u64 {
        self.dropped.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).copied().unwrap_or(0)
    }
}

/// Lines a tail holds for a slow reader before it waits for it (and the
/// node's channel, if the reader stays slow, tells it what it missed).
pub const TAIL_LINES_BUFFERED: usize = 32;

/// What a tail carries: a record, or how many records a reader too slow
/// for the guests missed.
#[derive(Debug, Clone, PartialEq)]
pub enum TailItem {
    Record(Arc<LogRecord>),
    Missed(u64),
}

impl TailItem {
    /// The item as a line of the tail's NDJSON: the record's object, or
    /// `{"missed": n}`.
    pub fn line(&self) -> Bytes {
        let mut bytes = match self {
            Self::Record(record) => serde_json::to_vec(&**record).unwrap_or_default(),
            Self::Missed(n) => format!("{{\"missed\":{n}}}").into_bytes(),
        };
        bytes.push(b'\n');
        bytes.into()
    }

    /// A line of a tail's NDJSON read back (another node's): `None` when it
    /// is neither.
    pub fn parse(line: &[u8]) -> Option<Self> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Missed {
            missed: u64,
        }
        if let Ok(record) = serde_json::from_slice::<LogRecord>(line) {
            return Some(Self::Record(Arc::new(record)));
        }
        serde_json::from_slice::<Missed>(line).ok().map(|m| Self::Missed(m.missed))
    }
}

impl GuestLogs {
    /// The records `filter` wants into `tx`: those kept, then, with
    /// `follow`, each one after as it is written, until `tx`'s reader
    /// leaves or `stop` completes. Refused, at once, past the bounds.
    pub fn tail(
        &self,
        filter: LogFilter,
        follow: bool,
        tx: mpsc::Sender<TailItem>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<impl std::future::Future<Output = ()> + Send + 'static, TailRefused> {
        let (kept, live) = self.recent_and_follow(&filter)?;
        Ok(async move {
            for record in kept {
                if tx.send(TailItem::Record(record)).await.is_err() {
                    return;
                }
            }
            if follow {
                follow_live(live, filter, tx, stop).await;
            }
        })
    }
}

async fn follow_live(
    mut live: broadcast::Receiver<Arc<LogRecord>>,
    filter: LogFilter,
    tx: mpsc::Sender<TailItem>,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    loop {
        let next = tokio::select! {
            next = live.recv() => next,
            () = tx.closed() => return,
            () = &mut stop => return,
        };
        let item = match next {
            Ok(record) if filter.matches(&record) => TailItem::Record(record),
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(n)) => TailItem::Missed(n),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if tx.send(item).await.is_err() {
            return;
        }
    }
}

/// A tail's body: its items as NDJSON lines, as they come.
pub struct TailBody(pub mpsc::Receiver<TailItem>);

impl http_body::Body for TailBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|item| item.map(|item| Ok(http_body::Frame::data(item.line()))))
    }
}

impl std::fmt::Debug for GuestLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestLogs").field("rates", &self.rates).finish_non_exhaustive()
    }
}

/// The record on the node's own output: one event of target
/// `wasmkeep::guest`, its fields the record's.
fn emit(r: &LogRecord) {
    tracing::info!(
        target: TARGET,
        tenant = &*r.tenant,
        app = &*r.app,
        class = r.class.as_deref(),
        name = r.name.as_deref(),
        stream = r.stream.as_str(),
        trace_id = r.trace_id.as_deref(),
        span_id = r.span_id.as_deref(),
        truncated = r.truncated,
        dropped_before = r.dropped_before,
        "{}",
        printable(&r.line)
    );
}

/// `line` with its control characters escaped: a guest's line never
/// moves the cursor of, or forges a line in, the node's text output.
fn printable(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.chars().any(char::is_control) {
        return line.into();
    }
    line.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

impl Source for GuestLogs {
    fn collect(&self, out: &mut Exposition) {
        let dropped = self.dropped.lock().unwrap_or_else(|p| p.into_inner()).clone();
        out.counter(
            "wasmkeep_guest_log_lines_dropped_total",
            "Lines of guests' stdout and stderr dropped by the log rate limit, by tenant.",
            dropped.into_iter().map(|(tenant, n)| (vec![("tenant", tenant.to_string())], n)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(class: &str, name: &str) -> GuestWho {
        GuestWho { tenant: "t".into(), app: "a".into(), class: Some(class.into()), name: Some(name.into()) }
    }

    const RATES: LogRates = LogRates { per_actor: 3, per_app: 5 };

    #[test]
    fn a_guest_has_so_many_lines_a_second_and_its_next_record_says_how_many_went() {
        let logs = GuestLogs::new(RATES);
        let (room, t0) = (who("room", "r1"), Instant::now());
        for i in 0..5 {
            logs.line_at(&room, Stream::Stdout, format!("line {i}").as_bytes(), None, t0);
        }
        let filter = LogFilter { tenant: "t".into(), app: "a".into(), ..Default::default() };
        let kept: Vec<_> = logs.recent(&filter).iter().map(|r| r.line.clone()).collect();
        assert_eq!(kept, ["line 0", "line 1", "line 2"]);
        assert_eq!(logs.dropped("t"), 2);
        logs.line_at(&room, Stream::Stderr, b"later", None, t0 + WINDOW);
        let last = logs.recent(&filter).pop().unwrap();
        assert_eq!((last.line.as_str(), last.dropped_before, last.stream), ("later", 2, Stream::Stderr));
    }

    #[test]
    fn an_apps_guests_together_have_the_apps_rate() {
        let logs = GuestLogs::new(RATES);
        let t0 = Instant::now();
        for i in 0..20 {
            logs.line_at(&who("room", &format!("r{i}")), Stream::Stdout, b"x", None, t0);
        }
        let filter = LogFilter { tenant: "t".into(), app: "a".into(), ..Default::default() };
        assert_eq!(logs.recent(&filter).len(), 5);
        assert_eq!(logs.dropped("t"), 15);
        let other = GuestWho { app: "b".into(), ..who("room", "r0") };
        logs.line_at(&other, Stream::Stdout, b"y", None, t0);
        assert_eq!(logs.recent(&LogFilter { app: "b".into(), ..filter }).len(), 1, "another app has its own");
    }

    #[test]
    fn a_long_line_is_cut_and_says_so() {
        let logs = GuestLogs::new(LogRates { per_actor: 10, per_app: 10 });
        let long = vec![b'x'; LINE_BYTES_MAX + 10];
        logs.line_at(&who("c", "n"), Stream::Stdout, &long, None, Instant::now());
        let r = logs.recent(&LogFilter { tenant: "t".into(), app: "a".into(), ..Default::default() }).pop().unwrap();
        assert!(r.truncated);
        assert_eq!(r.line.len(), LINE_BYTES_MAX);
        let json = serde_json::to_value(&*r).unwrap();
        assert_eq!(json["truncated"], true);
        // Invalid bytes, each replaced by three, are cut to the limit too.
        logs.line_at(&who("c", "n"), Stream::Stdout, &[0xff; LINE_BYTES_MAX], None, Instant::now());
        let r = logs.recent(&LogFilter { tenant: "t".into(), app: "a".into(), ..Default::default() }).pop().unwrap();
        assert!(r.truncated && r.line.len() <= LINE_BYTES_MAX && r.line.starts_with('\u{fffd}'), "{}", r.line.len());
    }

    #[test]
    fn a_filter_takes_its_apps_class_and_name() {
        let logs = GuestLogs::new(LogRates { per_actor: 10, per_app: 10 });
        let now = Instant::now();
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        logs.line_at(&who("room", "r1"), Stream::Stdout, b"one", Some(parent), now);
        logs.line_at(&who("room", "r2"), Stream::Stdout, b"two", None, now);
        logs.line_at(&who("lobby", "r1"), Stream::Stdout, b"three", None, now);
        let front = GuestWho { class: None, name: None, ..who("", "") };
        logs.line_at(&front, Stream::Stdout, b"four", None, now);
        let base = LogFilter { tenant: "t".into(), app: "a".into(), ..Default::default() };
        let lines = |f: LogFilter| logs.recent(&f).iter().map(|r| r.line.clone()).collect::<Vec<_>>();
        assert_eq!(lines(base.clone()), ["one", "two", "three", "four"]);
        assert_eq!(lines(LogFilter { class: Some("room".into()), ..base.clone() }), ["one", "two"]);
        assert_eq!(lines(LogFilter { class: Some("room".into()), name: Some("r1".into()), ..base.clone() }), ["one"]);
        assert_eq!(lines(LogFilter { tenant: "u".into(), ..base.clone() }), Vec::<String>::new());
        let first = &logs.recent(&base)[0];
        assert_eq!(first.trace_id.as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(first.span_id.as_deref(), Some("00f067aa0ba902b7"));
    }

    fn tenant(t: &str) -> GuestWho {
        GuestWho { tenant: t.into(), ..who("room", "r1") }
    }

    fn lines_of(logs: &GuestLogs, tenant: &str) -> Vec<String> {
        let filter = LogFilter { tenant: tenant.into(), app: "a".into(), ..Default::default() };
        logs.recent(&filter).iter().map(|r| r.line.clone()).collect()
    }

    const LOUD: LogRates = LogRates { per_actor: 100_000, per_app: 100_000 };

    #[test]
    fn a_tenants_flood_of_lines_leaves_another_tenants_kept_records() {
        let logs = GuestLogs::new(LOUD);
        let now = Instant::now();
        for i in 0..3 {
            logs.line_at(&tenant("quiet"), Stream::Stdout, format!("mine {i}").as_bytes(), None, now);
        }
        for i in 0..1500 {
            logs.line_at(&tenant("loud"), Stream::Stdout, format!("flood {i}").as_bytes(), None, now);
        }
        assert_eq!(lines_of(&logs, "quiet"), ["mine 0", "mine 1", "mine 2"]);
        // The loud tenant's ring holds its last TENANT_RECORDS.
        let loud = lines_of(&logs, "loud");
        assert_eq!(loud.len(), TENANT_RECORDS);
        assert_eq!((loud[0].as_str(), loud[TENANT_RECORDS - 1].as_str()), ("flood 500", "flood 1499"));
    }

    fn record(tenant: &str, line: String) -> Arc<LogRecord> {
        Arc::new(LogRecord {
            time_ms: 0,
            tenant: tenant.into(),
            app: "a".into(),
            class: None,
            name: None,
            stream: Stream::Stdout,
            line,
            truncated: false,
            dropped_before: 0,
            trace_id: None,
            span_id: None,
        })
    }

    #[test]
    fn a_tenants_ring_is_bounded_and_the_budget_takes_from_the_tenant_holding_the_most() {
        const BUDGET: usize = 256 * 1024;
        let mut kept = Kept::new(KeptBounds { tenant_records: 100, bytes: BUDGET });
        for i in 0..5 {
            kept.push(record("quiet", format!("mine {i}")));
        }
        let quiet = kept.ring_bytes("quiet");
        // Eight loud tenants in turn, each line a few hundred bytes: far
        // more than the budget together.
        let loud: Vec<String> = (0..8).map(|i| format!("loud{i}")).collect();
        for i in 0..2000 {
            for t in &loud {
                kept.push(record(t, format!("{i} {}", "x".repeat(200))));
                assert!(kept.bytes <= BUDGET, "{} over {BUDGET}", kept.bytes);
            }
        }
        // Below its fair share, the quiet tenant lost nothing.
        assert!(quiet < BUDGET / 9, "{quiet}");
        let mine: Vec<&str> = kept.records("quiet").map(|r| r.line.as_str()).collect();
        assert_eq!(mine, ["mine 0", "mine 1", "mine 2", "mine 3", "mine 4"]);
        // The loud ones share the rest evenly (within a record), each its
        // last lines, and none holds more than its bound.
        let sizes: Vec<usize> = loud.iter().map(|t| kept.ring_bytes(t)).collect();
        let one = record_bytes(&record("loud0", format!("1999 {}", "x".repeat(200))));
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= one, "{sizes:?}");
        for t in &loud {
            let lines: Vec<&LogRecord> = kept.records(t).map(|r| &**r).collect();
            assert!(!lines.is_empty() && lines.len() <= 100, "{}", lines.len());
            assert!(lines.last().unwrap().line.starts_with("1999 "));
        }
        // Alone, a tenant keeps its bound of records, no more.
        let mut alone = Kept::new(KeptBounds { tenant_records: 100, bytes: BUDGET });
        for i in 0..150 {
            alone.push(record("t", format!("{i}")));
        }
        assert_eq!(alone.records("t").count(), 100);
        assert_eq!(alone.records("t").next().unwrap().line, "50");
    }

    #[test]
    fn many_tenants_hold_the_budget_and_their_rings_go_when_emptied() {
        const BUDGET: usize = 64 * 1024;
        let mut kept = Kept::new(KeptBounds { tenant_records: 100, bytes: BUDGET });
        // Open sign-up: ten thousand tenants, a line each.
        for t in 0..10_000 {
            kept.push(record(&format!("t{t:04}"), "hello".into()));
            assert!(kept.bytes <= BUDGET);
        }
        let cost = RING_BYTES + record_bytes(&record("t0000", "hello".into()));
        assert!(kept.rings.len() <= BUDGET / cost, "{} rings", kept.rings.len());
        assert_eq!(kept.rings.len(), kept.ranks.len());
        let counted: usize = kept.rings.values().map(|ring| ring.bytes).sum();
        assert_eq!(counted, kept.bytes, "the total is the rings'");
        // Among tenants holding as much, the oldest line went: the
        // newest tenants' lines are the ones kept.
        assert_eq!(kept.records("t9999").count(), 1);
        assert_eq!(kept.records("t0000").count(), 0);
    }

    #[test]
    fn a_live_tail_has_its_tenants_records_only_and_misses_none_for_another_tenants() {
        let logs = GuestLogs::new(LOUD);
        let now = Instant::now();
        let quiet = LogFilter { tenant: "quiet".into(), app: "a".into(), ..Default::default() };
        let (_, mut live) = logs.recent_and_follow(&quiet).unwrap();
        // More of another tenant's lines than a tail's backlog, unread.
        for i in 0..TAIL_BACKLOG + 100 {
            logs.line_at(&tenant("loud"), Stream::Stdout, format!("flood {i}").as_bytes(), None, now);
        }
        logs.line_at(&tenant("quiet"), Stream::Stdout, b"mine", None, now);
        assert_eq!(live.try_recv().unwrap().line, "mine");
        assert!(live.try_recv().is_err());
        // The channel of a tenant whose tail left goes.
        drop(live);
        let (_, _loud) = logs.recent_and_follow(&LogFilter { tenant: "loud".into(), ..quiet.clone() }).unwrap();
        let rings = logs.rings.lock().unwrap();
        assert_eq!(rings.live.keys().map(|t| &**t).collect::<Vec<_>>(), ["loud"]);
    }

    #[test]
    fn a_tail_that_never_reads_holds_at_most_its_tenants_share() {
        let logs = GuestLogs::new(LOUD);
        // The largest records there are: the longest names, lines past the limit.
        let who = GuestWho {
            tenant: "t".repeat(CLASS_NAME_MAX).into(),
            app: "a".repeat(CLASS_NAME_MAX).into(),
            class: Some("c".repeat(CLASS_NAME_MAX).into()),
            name: Some("n".repeat(ACTOR_NAME_MAX).into()),
        };
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let filter = LogFilter { tenant: who.tenant.to_string(), app: who.app.to_string(), ..Default::default() };
        let (_, mut idle) = logs.recent_and_follow(&filter).unwrap();
        let (flood, now) = (4 * TAIL_BACKLOG, Instant::now());
        for _ in 0..flood {
            logs.line_at(&who, Stream::Stdout, &[b'x'; LINE_BYTES_MAX + 1], Some(parent), now);
        }
        let queued = logs.rings.lock().unwrap().live[&who.tenant].len();
        // What the channel holds is what its reader has left to read.
        let (mut held, mut missed) = (Vec::new(), 0);
        loop {
            match idle.try_recv() {
                Ok(record) => held.push(record),
                Err(broadcast::error::TryRecvError::Lagged(n)) => missed += n as usize,
                Err(_) => break,
            }
        }
        assert_eq!(held.len(), queued);
        assert_eq!(record_bytes(&held[0]), RECORD_BYTES_MAX);
        let bytes: usize = held.iter().map(|r| record_bytes(r)).sum();
        assert!(bytes <= TAIL_BYTES, "the tail held {bytes} bytes, over {TAIL_BYTES}");
        assert_eq!((missed, held.len()), (flood - TAIL_BACKLOG, TAIL_BACKLOG), "the reader is told what it missed");
        // A channel whose tails left holds nothing, and goes at its next line.
        let (_, unread) = logs.recent_and_follow(&filter).unwrap();
        logs.line_at(&who, Stream::Stdout, b"unread", None, now);
        drop((idle, unread));
        assert_eq!(logs.rings.lock().unwrap().live[&who.tenant].len(), 0);
        logs.line_at(&who, Stream::Stdout, b"no tail", None, now);
        assert!(logs.rings.lock().unwrap().live.is_empty());
    }

    #[test]
    fn tails_are_bounded_per_tenant_and_for_the_node() {
        let logs = GuestLogs::new(RATES).with_tail_bounds(TailBounds { node: 3, per_tenant: 2 });
        let of = |tenant: &str| LogFilter { tenant: tenant.into(), app: "a".into(), ..Default::default() };
        let a1 = logs.recent_and_follow(&of("a")).unwrap();
        let _a2 = logs.recent_and_follow(&of("a")).unwrap();
        assert_eq!(logs.recent_and_follow(&of("a")).unwrap_err(), TailRefused::Tenant(2));
        let _b1 = logs.recent_and_follow(&of("b")).unwrap();
        assert_eq!(logs.recent_and_follow(&of("c")).unwrap_err(), TailRefused::Node(3));
        // A tail that ends gives its place back.
        drop(a1);
        let _c1 = logs.recent_and_follow(&of("c")).unwrap();
        assert_eq!(
            TailRefused::Tenant(8).to_string(),
            "the account has 8 log tails open on this node already; close one and retry"
        );
    }

    #[test]
    fn control_characters_reach_the_nodes_output_escaped() {
        assert_eq!(printable("plain"), "plain");
        assert_eq!(printable("a\rb\u{1b}[0m"), "a\\rb\\u{1b}[0m");
    }

    #[test]
    fn only_a_traceparent_gives_ids() {
        assert_eq!(trace_ids(None), (None, None));
        assert_eq!(trace_ids(Some("garbage")), (None, None));
        assert_eq!(trace_ids(Some("00-abc-def-01")), (None, None));
    }
}
