//! The node's long-lived metrics: counters and histograms that the request
//! path adds to, as `prometheus-client` families. The names and labels of
//! the families the spec names (docs/spec/actors-and-admission.md §8,
//! docs/spec/calls.md §13, docs/spec/cluster.md §4) are kept exactly
//! (`wasmkeep_front_requests_total` and the rest); an app's own series are
//! held by its [`AppMetrics`], so an event adds to them without looking its
//! labels up.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use wasmkeep_core::metric_labels::{
    EventOutcome, FrontCallOutcome, FrontRequestOutcome, HopKind, Label, Quota, RefusalReason,
};

use crate::exposition::{Exposition, Labels};
use crate::{Source, exposition};

/// A counter family with one label whose values are the closed set `L`,
/// each present from the start.
pub struct CounterFamily<L: Label> {
    name: &'static str,
    help: &'static str,
    family: Family<[(&'static str, &'static str); 1], Counter>,
    /// The counters by value, in `L::ALL`'s order: an increment looks
    /// nothing up by label.
    counters: Vec<(L, Counter)>,
}

impl<L: Label> CounterFamily<L> {
    pub fn new(name: &'static str, help: &'static str, label: &'static str) -> Self {
        let family: Family<_, Counter> = Family::default();
        let counters =
            L::ALL.iter().map(|value| (*value, family.get_or_create(&[(label, value.as_str())]).clone())).collect();
        Self { name, help, family, counters }
    }

    fn counter(&self, value: L) -> &Counter {
        // `new` made one for each of `L::ALL`, which lists every value.
        &self.counters.iter().find(|(v, _)| *v == value).expect("every value of the set has its counter").1
    }

    /// Adds one to the counter labelled `value`.
    pub fn inc(&self, value: L) {
        self.counter(value).inc();
    }

    /// The count labelled `value` now.
    pub fn get(&self, value: L) -> u64 {
        self.counter(value).get()
    }

    fn register(&self, out: &mut Exposition) {
        out.register(self.name, self.help, self.family.clone());
    }
}

/// A counter family per tenant and value of the closed set `L`: the
/// tenants are the node's accounts (made by sign-up, bounded by the
/// operator).
pub struct TenantCounters<L: Label> {
    name: &'static str,
    help: &'static str,
    label: &'static str,
    family: Family<Labels, Counter>,
    _values: std::marker::PhantomData<L>,
}

impl<L: Label> TenantCounters<L> {
    pub fn new(name: &'static str, help: &'static str, label: &'static str) -> Self {
        Self { name, help, label, family: Family::default(), _values: std::marker::PhantomData }
    }

    fn labels(&self, tenant: &str, value: L) -> Labels {
        vec![("tenant", tenant.to_owned()), (self.label, value.as_str().to_owned())]
    }

    /// Adds one to `tenant`'s counter labelled `value`.
    pub fn inc(&self, tenant: &str, value: L) {
        self.family.get_or_create(&self.labels(tenant, value)).inc();
    }

    pub fn get(&self, tenant: &str, value: L) -> u64 {
        self.family.get_or_create(&self.labels(tenant, value)).get()
    }

    fn register(&self, out: &mut Exposition) {
        out.register(self.name, self.help, self.family.clone());
    }
}

/// Seconds: from 100 µs to about 52 s, doubling.
fn seconds_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.0001, 2.0, 20))
}

type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// A family of histograms of seconds (100 µs to about 52 s), one per
/// label set: for a crate's own timings.
#[derive(Clone)]
pub struct SecondsFamily(Histograms);

impl Default for SecondsFamily {
    fn default() -> Self {
        Self(Family::new_with_constructor(seconds_buckets))
    }
}

impl SecondsFamily {
    pub fn observe(&self, labels: &Labels, seconds: f64) {
        self.0.get_or_create(labels).observe(seconds);
    }

    /// Adds the family to `out` as `name`.
    pub fn register(&self, out: &mut exposition::Exposition, name: &str, help_text: &str) {
        out.register(name, help_text, self.0.clone());
    }
}

/// The node's metrics.
pub struct Metrics {
    pub front_requests: CounterFamily<FrontRequestOutcome>,
    pub front_calls: CounterFamily<FrontCallOutcome>,
    pub forwards: CounterFamily<HopKind>,
    pub reroutes: CounterFamily<HopKind>,
    pub refusals: CounterFamily<RefusalReason>,
    pub quota_refusals: TenantCounters<Quota>,
    /// Events run, by tenant, app and outcome.
    events: Family<Labels, Counter>,
    event_seconds: Histograms,
    queue_wait: Histograms,
    admission_wait: Histograms,
    guest_cpu: Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>>,
    requests: Family<Labels, Counter>,
    wakes: Family<Labels, Counter>,
    hibernations: Family<Labels, Counter>,
    /// A commit's time in the store, for the node.
    pub store_commit_seconds: Histogram,
}

fn app_labels(tenant: &str, app: &str) -> Labels {
    vec![("tenant", tenant.to_owned()), ("app", app.to_owned())]
}

impl Metrics {
    /// The series of app `app` of `tenant`, held by the app.
    pub fn app(&self, tenant: &str, app: &str) -> AppMetrics {
        let labels = app_labels(tenant, app);
        let mut ok = labels.clone();
        ok.push(("outcome", "ok".to_owned()));
        AppMetrics {
            labels: labels.clone(),
            events: self.events.clone(),
            events_ok: self.events.get_or_create(&ok).clone(),
            event_seconds: self.event_seconds.get_or_create(&labels).clone(),
            queue_wait: self.queue_wait.get_or_create(&labels).clone(),
            admission_wait: self.admission_wait.get_or_create(&labels).clone(),
            guest_cpu: self.guest_cpu.get_or_create(&labels).clone(),
            requests: self.requests.get_or_create(&labels).clone(),
            wakes: self.wakes.get_or_create(&labels).clone(),
            hibernations: self.hibernations.get_or_create(&labels).clone(),
        }
    }

    /// Forgets app `app`'s series (the app is deleted).
    pub fn forget_app(&self, tenant: &str, app: &str) {
        let labels = app_labels(tenant, app);
        for family in [&self.requests, &self.wakes, &self.hibernations] {
            family.remove(&labels);
        }
        for family in [&self.event_seconds, &self.queue_wait, &self.admission_wait] {
            family.remove(&labels);
        }
        self.guest_cpu.remove(&labels);
        for outcome in EventOutcome::ALL {
            let mut with = labels.clone();
            with.push(("outcome", outcome.as_str().to_owned()));
            self.events.remove(&with);
        }
    }
}

/// One app's series: what its events and requests add to.
#[derive(Clone)]
pub struct AppMetrics {
    labels: Labels,
    events: Family<Labels, Counter>,
    events_ok: Counter,
    event_seconds: Histogram,
    queue_wait: Histogram,
    admission_wait: Histogram,
    guest_cpu: Counter<f64, std::sync::atomic::AtomicU64>,
    requests: Counter,
    wakes: Counter,
    hibernations: Counter,
}

impl AppMetrics {
    /// An admitted event ended with `outcome`, after `seconds` of wall time.
    pub fn event(&self, outcome: EventOutcome, seconds: f64) {
        match outcome {
            EventOutcome::Ok => self.events_ok.inc(),
            other => self.events.get_or_create(&self.with_outcome(other)).inc(),
        };
        self.event_seconds.observe(seconds);
    }

    /// An event admission refused.
    pub fn refused(&self, reason: RefusalReason) {
        self.events.get_or_create(&self.with_outcome(EventOutcome::Refused(reason))).inc();
    }

    fn with_outcome(&self, outcome: EventOutcome) -> Labels {
        let mut labels = self.labels.clone();
        labels.push(("outcome", outcome.as_str().to_owned()));
        labels
    }

    /// How long an event waited in its actor's queue: the queue's age
    /// when the event left it.
    pub fn queued(&self, seconds: f64) {
        self.queue_wait.observe(seconds);
    }

    /// How long an event waited for admission (a pool instance, a slot).
    pub fn admission_waited(&self, seconds: f64) {
        self.admission_wait.observe(seconds);
    }

    /// CPU time its guests (actors and front) spent.
    pub fn guest_cpu(&self, seconds: f64) {
        self.guest_cpu.inc_by(seconds);
    }

    /// A request reached the app at the public port.
    pub fn request(&self) {
        self.requests.inc();
    }

    pub fn woke(&self) {
        self.wakes.inc();
    }

    pub fn hibernated(&self) {
        self.hibernations.inc();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            front_requests: CounterFamily::new(
                "wasmkeep_front_requests_total",
                "Requests served by apps' fronts, by outcome.",
                "outcome",
            ),
            front_calls: CounterFamily::new(
                "wasmkeep_front_calls_total",
                "Calls made by fronts (each call-many entry counts), by outcome.",
                "outcome",
            ),
            forwards: CounterFamily::new(
                "wasmkeep_forwards_total",
                "Calls, requests, upgrades and hand-offs forwarded to another node, by kind.",
                "kind",
            ),
            reroutes: CounterFamily::new(
                "wasmkeep_reroutes_total",
                "Calls, requests, upgrades and hand-offs sent on after the node they went to answered that another node owns the actor, by kind.",
                "kind",
            ),
            refusals: CounterFamily::new("wasmkeep_refusals_total", "Events admission refused, by reason.", "reason"),
            quota_refusals: TenantCounters::new(
                "wasmkeep_quota_refusals_total",
                "Requests and events refused for a tenant's quota, by tenant and quota.",
                "quota",
            ),
            events: Family::default(),
            event_seconds: Family::new_with_constructor(seconds_buckets),
            queue_wait: Family::new_with_constructor(seconds_buckets),
            admission_wait: Family::new_with_constructor(seconds_buckets),
            guest_cpu: Family::default(),
            requests: Family::default(),
            wakes: Family::default(),
            hibernations: Family::default(),
            store_commit_seconds: seconds_buckets(),
        }
    }
}

impl Source for Metrics {
    fn collect(&self, out: &mut exposition::Exposition) {
        self.front_requests.register(out);
        self.front_calls.register(out);
        self.forwards.register(out);
        self.reroutes.register(out);
        self.refusals.register(out);
        self.quota_refusals.register(out);
        out.register(
            "wasmkeep_app_requests_total",
            "Requests that reached an app at the public port, by tenant and app.",
            self.requests.clone(),
        );
        out.register(
            "wasmkeep_events_total",
            "Actor events run or refused, by tenant, app and outcome (ok, or the error's name).",
            self.events.clone(),
        );
        out.register(
            "wasmkeep_event_duration_seconds",
            "Wall time of actor events, by tenant and app.",
            self.event_seconds.clone(),
        );
        out.register(
            "wasmkeep_queue_wait_seconds",
            "Time events waited in their actor's queue before they were taken, by tenant and app.",
            self.queue_wait.clone(),
        );
        out.register(
            "wasmkeep_admission_wait_seconds",
            "Time events waited for admission (a pool instance), by tenant and app.",
            self.admission_wait.clone(),
        );
        out.register(
            "wasmkeep_guest_cpu_seconds_total",
            "CPU time of an app's guests (actors and front), by tenant and app.",
            self.guest_cpu.clone(),
        );
        out.register("wasmkeep_actor_wakes_total", "Actors woken, by tenant and app.", self.wakes.clone());
        out.register(
            "wasmkeep_actor_hibernations_total",
            "Actors hibernated, by tenant and app.",
            self.hibernations.clone(),
        );
        out.register(
            "wasmkeep_store_commit_seconds",
            "Time of an actor's commit in the store.",
            self.store_commit_seconds.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render;

    #[test]
    fn every_label_value_is_present_from_the_start() {
        let m = Metrics::default();
        m.front_requests.inc(FrontRequestOutcome::Ok);
        m.front_requests.inc(FrontRequestOutcome::Ok);
        m.front_calls.inc(FrontCallOutcome::Busy);
        m.reroutes.inc(HopKind::Upgrade);
        let text = render(&[&m]);
        assert!(text.contains("# TYPE wasmkeep_front_requests_total counter\n"), "{text}");
        assert!(text.contains("wasmkeep_front_requests_total{outcome=\"ok\"} 2\n"));
        assert!(text.contains("wasmkeep_front_requests_total{outcome=\"busy\"} 0\n"));
        assert!(text.contains("wasmkeep_front_calls_total{outcome=\"busy\"} 1\n"));
        assert!(text.contains("wasmkeep_forwards_total{kind=\"call\"} 0\n"));
        assert!(text.contains("wasmkeep_reroutes_total{kind=\"upgrade\"} 1\n"), "{text}");
        for kind in HopKind::ALL {
            for family in ["wasmkeep_forwards_total", "wasmkeep_reroutes_total"] {
                assert!(text.contains(&format!("{family}{{kind=\"{}\"}} ", kind.as_str())), "{family} {kind:?}");
            }
        }
        assert!(text.contains("wasmkeep_refusals_total{reason=\"deadline\"} 0\n"), "{text}");
        assert_eq!(m.front_requests.get(FrontRequestOutcome::Ok), 2);
    }

    #[test]
    fn an_apps_series_are_its_own_and_go_with_it() {
        let m = Metrics::default();
        let shop = m.app("alpha", "shop");
        shop.event(EventOutcome::Ok, 0.002);
        shop.event(EventOutcome::Failed(wasmkeep_core::EventFault::Trapped), 0.5);
        shop.refused(RefusalReason::Capacity);
        shop.woke();
        m.app("beta", "shop").event(EventOutcome::Ok, 0.001);
        let text = render(&[&m]);
        for line in [
            "wasmkeep_events_total{tenant=\"alpha\",app=\"shop\",outcome=\"ok\"} 1\n",
            "wasmkeep_events_total{tenant=\"alpha\",app=\"shop\",outcome=\"trapped\"} 1\n",
            "wasmkeep_events_total{tenant=\"alpha\",app=\"shop\",outcome=\"capacity\"} 1\n",
            "wasmkeep_events_total{tenant=\"beta\",app=\"shop\",outcome=\"ok\"} 1\n",
            "wasmkeep_event_duration_seconds_count{tenant=\"alpha\",app=\"shop\"} 2\n",
            "wasmkeep_actor_wakes_total{tenant=\"alpha\",app=\"shop\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        m.forget_app("alpha", "shop");
        let text = render(&[&m]);
        assert!(!text.contains("tenant=\"alpha\""), "{text}");
        assert!(text.contains("tenant=\"beta\""), "{text}");
    }
}
