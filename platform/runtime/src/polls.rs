//! The node's cores, shared by tenants. Every poll of a guest (its
//! instantiation, an event, a front's body) runs on one of the node's
//! guest turns, as many as it has cores; a turn ends with the poll (the
//! guest waits on a host call, yields at a tick, or finishes). While
//! guests wait for turns, the next goes to the tenant whose guests have
//! used the least CPU time for its weight (a fair queue in virtual time,
//! each tenant's guests in arrival order). So a tenant sending as many
//! short requests as it can queues behind its own; another tenant's
//! event waits for one poll to end, not for everything queued before it.
//!
//! A tenant's charge is what its polls took, divided by its plan's
//! weight. A tenant that starts waiting starts at the node's virtual time
//! (the charge of the last turn given), so a tenant idle for a while
//! banks nothing, and one that ran alone owes nothing to newcomers.
//!
//! A poll lasts up to an epoch tick. When a tenant waits whose charge is
//! below that of a tenant on a turn for [`QUANTUM`] or more (its charge
//! counting the poll's time so far), the gate preempts: it advances the
//! engine's epoch, and every guest computing yields at its next epoch
//! check (a preemption is no tick: `cpu`). So another tenant's event
//! waits about a quantum for a turn, not a tick.
//!
//! Some work cannot yield at an epoch check: one `memory.fill` over a
//! guest's whole memory, its fresh pages faulted in one by one, host work
//! inside a poll. When a preemption has not freed a turn a quantum later,
//! the gate lends a turn beyond its own to the tenant owed the most (at
//! most half as many again), so an owed tenant waits two quanta and the
//! kernel's slicing, never for such work to end; a lent turn is paid back
//! by the next turn to end.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::share::GuestShare;

/// Virtual time per nanosecond of a poll of weight 1.
const PER_NANO: u64 = 1024;

/// The least a poll runs before another tenant's guest, owed more, may
/// preempt it; also how often the epoch thread looks (`engine`).
pub(crate) const QUANTUM: Duration = Duration::from_millis(1);

/// Turns the gate may lend beyond its own, for `turns` (half again, at
/// least one): the rest of the node's workers stay with its I/O.
fn most_lent(turns: usize) -> usize {
    turns.div_ceil(2)
}

/// What preempting does: advance the engine's epoch.
pub(crate) type Preempt = Arc<dyn Fn() + Send + Sync>;

/// The node's guest turns.
#[derive(Clone)]
pub(crate) struct PollGate {
    state: Arc<Mutex<GateState>>,
    preempt: Preempt,
}

struct GateState {
    free: usize,
    /// Turns lent beyond the gate's own, to be paid back as turns end.
    lent: usize,
    most_lent: usize,
    /// Guests waiting, in all tenants.
    waiting: usize,
    tenants: HashMap<Arc<str>, Tenant>,
    /// The node's virtual time: the charge of the tenant last given a turn.
    now: u64,
    /// The turns held: whose, and since when.
    held: Vec<Held>,
    next_turn: u64,
    /// When the gate last preempted: at most once a quantum.
    preempted: Option<Instant>,
}

struct Held {
    turn: u64,
    tenant: Arc<str>,
    since: Instant,
}

struct Tenant {
    /// What its polls have taken, in virtual time.
    charge: u64,
    weight: u32,
    queue: VecDeque<Arc<Waiter>>,
    /// Its guests on a turn now.
    running: u32,
}

enum Turn {
    Waiting(Waker),
    Given(u64),
    /// Its future was dropped while it waited.
    Gone,
}

struct Waiter(Mutex<Turn>);

impl Waiter {
    fn turn(&self) -> std::sync::MutexGuard<'_, Turn> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl GateState {
    fn tenant(&mut self, share: &GuestShare) -> &mut Tenant {
        let now = self.now;
        let tenant = self.tenants.entry(share.tenant.clone()).or_insert_with(|| Tenant {
            charge: now,
            weight: share.weight,
            queue: VecDeque::new(),
            running: 0,
        });
        tenant.weight = share.weight.max(1);
        // Idle, it banked nothing: it starts no earlier than now.
        if tenant.running == 0 && tenant.queue.is_empty() {
            tenant.charge = tenant.charge.max(now);
        }
        tenant
    }

    /// A turn is held from `now` by `tenant`'s guest: its id.
    fn hold(&mut self, tenant: &Arc<str>, now: Instant) -> u64 {
        self.free -= 1;
        let turn = self.next_turn;
        self.next_turn += 1;
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.running += 1;
            self.now = self.now.max(t.charge);
        }
        self.held.push(Held { turn, tenant: tenant.clone(), since: now });
        turn
    }

    /// Gives the free turns to waiting guests, the tenant of the least
    /// charge first; wakes each.
    fn give(&mut self, now: Instant, wake: &mut Vec<Waker>) {
        while self.free > 0 && self.waiting > 0 {
            let next = self.tenants.iter_mut().filter(|(_, t)| !t.queue.is_empty()).min_by_key(|(_, t)| t.charge);
            let Some((name, tenant)) = next else { break };
            let name = name.clone();
            let waiter = tenant.queue.pop_front().expect("a waiting guest");
            self.waiting -= 1;
            let mut turn = waiter.turn();
            if let Turn::Waiting(waker) = &*turn {
                wake.push(waker.clone());
                *turn = Turn::Given(self.hold(&name, now));
            }
        }
    }

    /// Whether another tenant waits, owed more than one on a turn for a
    /// quantum or more (that turn's poll so far counted).
    fn preempt_due(&self, now: Instant) -> bool {
        if self.preempted.is_some_and(|at| now < at + QUANTUM) {
            return false;
        }
        self.preempt_due_ignoring_rate(now)
    }

    /// As `preempt_due`, however recently the gate preempted.
    fn preempt_due_ignoring_rate(&self, now: Instant) -> bool {
        if self.waiting == 0 {
            return false;
        }
        self.held.iter().any(|held| {
            let long = now.saturating_duration_since(held.since);
            let Some(holder) = self.tenants.get(&held.tenant).filter(|_| long >= QUANTUM) else { return false };
            let so_far = u64::try_from(long.as_nanos()).unwrap_or(u64::MAX).saturating_mul(PER_NANO);
            let owed = holder.charge.saturating_add(so_far / u64::from(holder.weight));
            self.tenants.iter().any(|(name, t)| *name != held.tenant && !t.queue.is_empty() && t.charge < owed)
        })
    }

    /// Whether to lend a turn: the last preemption a quantum or more ago
    /// left a turn held through it while a tenant owed more still waits.
    fn lend_due(&self, now: Instant) -> bool {
        let Some(at) = self.preempted else { return false };
        self.lent < self.most_lent
            && now >= at + QUANTUM
            && self.held.iter().any(|held| held.since <= at)
            && self.preempt_due_ignoring_rate(now)
    }

    /// Forgets a tenant with nothing on a turn or waiting and no debt.
    fn forget_idle(&mut self, tenant: &Arc<str>) {
        let now = self.now;
        if self.tenants.get(tenant).is_some_and(|t| t.running == 0 && t.queue.is_empty() && t.charge <= now) {
            self.tenants.remove(tenant);
        }
    }
}

impl PollGate {
    /// `turns` turns; `preempt` advances the engine's epoch.
    pub(crate) fn new(turns: usize, preempt: Preempt) -> Self {
        let state = GateState {
            free: turns.max(1),
            lent: 0,
            most_lent: most_lent(turns.max(1)),
            waiting: 0,
            tenants: HashMap::new(),
            now: 0,
            held: Vec::new(),
            next_turn: 0,
            preempted: None,
        };
        Self { state: Arc::new(Mutex::new(state)), preempt }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `future`, each of its polls on a turn charged to `share`'s tenant.
    pub(crate) fn fair<F: Future>(&self, share: GuestShare, future: F) -> Fair<F> {
        Fair { inner: Box::pin(future), gate: self.clone(), share, waiting: None }
    }

    /// Preempts the guests on turns if a waiting tenant is owed more
    /// (the epoch thread asks every quantum; a guest starting to wait asks
    /// at once).
    pub(crate) fn preempt_if_due(&self) {
        let now = Instant::now();
        let mut wake = Vec::new();
        let due = {
            let mut state = self.state();
            if state.lend_due(now) {
                state.lent += 1;
                state.free += 1;
                state.give(now, &mut wake);
            }
            let due = state.preempt_due(now);
            if due {
                state.preempted = Some(now);
            }
            due
        };
        for waker in wake {
            waker.wake();
        }
        if due {
            (self.preempt)();
        }
    }

    /// A turn at once, when one is free and nobody waits (its id); else
    /// `waker` waits in its tenant's queue.
    fn take_or_wait(&self, share: &GuestShare, waker: &Waker) -> Result<u64, Arc<Waiter>> {
        let mut state = self.state();
        if state.free > 0 && state.waiting == 0 {
            state.tenant(share);
            return Ok(state.hold(&share.tenant, Instant::now()));
        }
        let waiter = Arc::new(Waiter(Mutex::new(Turn::Waiting(waker.clone()))));
        state.tenant(share).queue.push_back(waiter.clone());
        state.waiting += 1;
        drop(state);
        self.preempt_if_due();
        Err(waiter)
    }

    /// Turn `turn` ends, its poll having taken `nanos`; the turn goes on.
    fn end(&self, share: &GuestShare, turn: u64, nanos: u64) {
        let mut wake = Vec::new();
        {
            let mut state = self.state();
            match state.lent {
                0 => state.free += 1,
                _ => state.lent -= 1,
            }
            state.held.retain(|held| held.turn != turn);
            if let Some(tenant) = state.tenants.get_mut(&share.tenant) {
                tenant.running = tenant.running.saturating_sub(1);
                tenant.charge = tenant.charge.saturating_add(nanos.saturating_mul(PER_NANO) / u64::from(tenant.weight));
            }
            state.give(Instant::now(), &mut wake);
            state.forget_idle(&share.tenant);
        }
        // Outside the lock: a woken task may run here and ask for a turn.
        for waker in wake {
            waker.wake();
        }
    }

    /// A waiting guest's future went: a turn given to it goes on.
    fn leave(&self, share: &GuestShare, waiter: &Waiter) {
        let given = {
            let mut turn = waiter.turn();
            match std::mem::replace(&mut *turn, Turn::Gone) {
                Turn::Given(id) => Some(id),
                _ => None,
            }
        };
        if let Some(id) = given {
            self.end(share, id, 0);
        } else {
            // Still queued: `give` skips it; count it out now.
            let mut state = self.state();
            if let Some(tenant) = state.tenants.get_mut(&share.tenant) {
                let before = tenant.queue.len();
                tenant.queue.retain(|w| !std::ptr::eq(Arc::as_ptr(w), waiter));
                let removed = before - tenant.queue.len();
                state.waiting -= removed;
            }
            state.forget_idle(&share.tenant);
        }
    }

    #[cfg(test)]
    fn free(&self) -> usize {
        self.state().free
    }
}

thread_local! {
    /// This thread polls a guest on a turn now: a guest future polled
    /// inside it (a host call running another guest in place) rides on
    /// that turn rather than asking for a second one.
    static ON_A_TURN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A guest's future whose polls run on the node's turns.
pub struct Fair<F> {
    inner: Pin<Box<F>>,
    gate: PollGate,
    share: GuestShare,
    waiting: Option<Arc<Waiter>>,
}

/// Ends the turn when the poll returns or unwinds.
struct OnTurn<'a> {
    gate: &'a PollGate,
    share: &'a GuestShare,
    turn: u64,
    started: Instant,
}

impl Drop for OnTurn<'_> {
    fn drop(&mut self) {
        ON_A_TURN.with(|on| on.set(false));
        let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.gate.end(self.share, self.turn, nanos);
    }
}

impl<F: Future> Future for Fair<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if ON_A_TURN.with(|on| on.get()) {
            return this.inner.as_mut().poll(cx);
        }
        let turn = match &this.waiting {
            Some(waiter) => {
                let mut turn = waiter.turn();
                let id = match &mut *turn {
                    Turn::Waiting(waker) => {
                        waker.clone_from(cx.waker());
                        return Poll::Pending;
                    }
                    Turn::Given(id) => *id,
                    Turn::Gone => unreachable!("only its own drop leaves"),
                };
                drop(turn);
                this.waiting = None;
                id
            }
            None => match this.gate.take_or_wait(&this.share, cx.waker()) {
                Ok(id) => id,
                Err(waiter) => {
                    this.waiting = Some(waiter);
                    return Poll::Pending;
                }
            },
        };
        ON_A_TURN.with(|on| on.set(true));
        let _turn = OnTurn { gate: &this.gate, share: &this.share, turn, started: Instant::now() };
        this.inner.as_mut().poll(cx)
    }
}

impl<F> Drop for Fair<F> {
    fn drop(&mut self) {
        if let Some(waiter) = self.waiting.take() {
            self.gate.leave(&self.share, &waiter);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    fn gate(turns: usize) -> PollGate {
        PollGate::new(turns, Arc::new(|| {}))
    }

    fn share(tenant: &str, weight: u32) -> GuestShare {
        GuestShare { tenant: tenant.into(), weight, memory_bytes: None }
    }

    /// The tests that time polls run one at a time: each keeps both
    /// cores busy, and a poll preempted by another test's counts longer.
    static TIMED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// A guest computing for `each` per poll, `polls` times.
    async fn computes(each: Duration, polls: u32) {
        for _ in 0..polls {
            let until = Instant::now() + each;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            yield_at_a_tick().await;
        }
    }

    /// Pending once, woken at once: how a guest yields at an epoch tick
    /// (tokio's own `yield_now` defers its wake until the worker idles,
    /// which would run every guest once a round whatever its tenant).
    async fn yield_at_a_tick() {
        let mut yielded = false;
        std::future::poll_fn(|cx| {
            if yielded {
                return Poll::Ready(());
            }
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await
    }

    #[tokio::test]
    async fn a_poll_holds_a_turn_and_a_waiting_guest_takes_it_after() {
        let gate = gate(1);
        // A guest parked in a host call holds no turn.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let parked = tokio::spawn(gate.fair(share("a", 1), rx));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(gate.free(), 1);
        // One poll at a time: two guests of two tenants both finish.
        let b = tokio::spawn(gate.fair(share("b", 1), computes(Duration::from_millis(1), 5)));
        let c = tokio::spawn(gate.fair(share("c", 1), computes(Duration::from_millis(1), 5)));
        b.await.unwrap();
        c.await.unwrap();
        tx.send(()).unwrap();
        parked.await.unwrap().unwrap();
        assert_eq!(gate.free(), 1);
        assert_eq!(gate.state().waiting, 0);
    }

    #[test]
    fn a_dropped_waiting_guest_gives_back_what_it_was_given() {
        let gate = gate(1);
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        // The one turn is held (by a guest in the middle of a poll).
        gate.state().free = 0;
        // A guest queued and dropped before it is given a turn.
        let mut queued = Box::pin(gate.fair(share("a", 1), async {}));
        assert!(queued.as_mut().poll(&mut cx).is_pending());
        assert_eq!(gate.state().waiting, 1);
        drop(queued);
        assert_eq!(gate.state().waiting, 0);
        // A guest given the turn as the poll ends, and dropped before it
        // runs: the turn goes back.
        let mut given = Box::pin(gate.fair(share("b", 1), async {}));
        assert!(given.as_mut().poll(&mut cx).is_pending());
        gate.end(&share("a", 1), u64::MAX, 0);
        assert_eq!(gate.free(), 0, "given to the waiting guest");
        drop(given);
        assert_eq!(gate.free(), 1, "and given back");
        // A guest that finishes on its turn gives it back too.
        assert!(Box::pin(gate.fair(share("c", 1), async {})).as_mut().poll(&mut cx).is_ready());
        assert_eq!(gate.free(), 1);
    }

    fn noop_waker() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        Waker::from(Arc::new(Noop))
    }

    /// A gate whose preemptions are counted.
    fn counting(turns: usize) -> (PollGate, Arc<AtomicU32>) {
        let preempted = Arc::new(AtomicU32::new(0));
        let count = preempted.clone();
        (PollGate::new(turns, Arc::new(move || _ = count.fetch_add(1, Ordering::Relaxed))), preempted)
    }

    /// Holds the gate's one turn for `tenant` since `ago`, as a guest
    /// in the middle of its poll does.
    fn held_since(gate: &PollGate, tenant: &str, ago: Duration) -> u64 {
        let mut state = gate.state();
        state.tenant(&share(tenant, 1));
        state.hold(&Arc::from(tenant), Instant::now() - ago)
    }

    #[test]
    fn another_tenant_owed_more_preempts_a_poll_past_a_quantum() {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        // The holder's own guests never preempt it.
        let (gate, preempted) = counting(1);
        held_since(&gate, "flood", QUANTUM * 5);
        let mut own = Box::pin(gate.fair(share("flood", 1), async {}));
        assert!(own.as_mut().poll(&mut cx).is_pending());
        gate.preempt_if_due();
        assert_eq!(preempted.load(Ordering::Relaxed), 0, "a tenant never preempts itself");
        // Another tenant arriving: at once, the poll being past a quantum.
        let mut quiet = Box::pin(gate.fair(share("quiet", 1), async {}));
        assert!(quiet.as_mut().poll(&mut cx).is_pending());
        assert_eq!(preempted.load(Ordering::Relaxed), 1, "preempted as the quiet guest waits");
        // At most once a quantum, however many ask.
        gate.preempt_if_due();
        assert_eq!(preempted.load(Ordering::Relaxed), 1);

        // A poll younger than a quantum is left to run; the epoch thread's
        // look a quantum later preempts it.
        let (gate, preempted) = counting(1);
        held_since(&gate, "flood", Duration::ZERO);
        let mut quiet = Box::pin(gate.fair(share("quiet", 1), async {}));
        assert!(quiet.as_mut().poll(&mut cx).is_pending());
        assert_eq!(preempted.load(Ordering::Relaxed), 0, "the poll has had no quantum yet");
        std::thread::sleep(QUANTUM);
        gate.preempt_if_due();
        assert_eq!(preempted.load(Ordering::Relaxed), 1, "a quantum later");

        // A waiting tenant that has had more than the holder is not owed.
        let (gate, preempted) = counting(1);
        held_since(&gate, "flood", QUANTUM * 2);
        gate.state().tenant(&share("greedy", 1)).charge += 1_000_000_000 * PER_NANO;
        let mut greedy = Box::pin(gate.fair(share("greedy", 1), async {}));
        assert!(greedy.as_mut().poll(&mut cx).is_pending());
        assert_eq!(preempted.load(Ordering::Relaxed), 0, "a second's charge ahead: owed nothing");
    }

    /// The epoch thread's look every quantum, until dropped.
    struct Looks {
        stop: Arc<std::sync::atomic::AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Looks {
        fn every_quantum(gate: &PollGate) -> Self {
            let (gate, stop) = (gate.clone(), Arc::new(std::sync::atomic::AtomicBool::new(false)));
            let stopped = stop.clone();
            let thread = std::thread::spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(QUANTUM);
                    gate.preempt_if_due();
                }
            });
            Self { stop, thread: Some(thread) }
        }
    }

    impl Drop for Looks {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quiet_tenant_waits_a_quantum_not_a_long_poll() {
        let _alone = TIMED.lock().await;
        // A preemption sets a flag the guests check, as the epoch is.
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = cut.clone();
        let gate = PollGate::new(1, Arc::new(move || flag.store(true, Ordering::Release)));
        // A guest that computes 100 ms a poll unless cut, then yields.
        let long_polls = |cut: Arc<std::sync::atomic::AtomicBool>| async move {
            for _ in 0..4 {
                let until = Instant::now() + Duration::from_millis(100);
                while Instant::now() < until && !cut.swap(false, Ordering::AcqRel) {
                    std::hint::spin_loop();
                }
                yield_at_a_tick().await;
            }
        };
        let _epoch = Looks::every_quantum(&gate);
        let flood = tokio::spawn(gate.fair(share("flood", 1), long_polls(cut.clone())));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = Instant::now();
        tokio::spawn(gate.fair(share("quiet", 1), computes(Duration::from_micros(100), 2))).await.unwrap();
        let waited = t.elapsed();
        assert!(waited < Duration::from_millis(50), "the quiet guest's two polls waited {waited:?} behind 100 ms ones");
        flood.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn a_poll_that_cannot_yield_is_lent_around_not_waited_for() {
        let _alone = TIMED.lock().await;
        let gate = gate(1);
        let _epoch = Looks::every_quantum(&gate);
        // One poll of 200 ms that no preemption cuts: a `memory.fill`
        // over a whole memory, host work.
        let stuck = tokio::spawn(gate.fair(share("stuck", 1), async {
            std::thread::sleep(Duration::from_millis(200));
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = Instant::now();
        tokio::spawn(gate.fair(share("quiet", 1), computes(Duration::from_micros(100), 2))).await.unwrap();
        let waited = t.elapsed();
        assert!(
            waited < Duration::from_millis(50),
            "the quiet guest waited {waited:?} behind a poll that cannot yield"
        );
        // Lending is bounded: a second owed tenant waits for the stuck
        // poll (one turn lent at most for one turn), then the lent turn
        // is paid back as turns end.
        assert!(!stuck.is_finished());
        {
            let state = gate.state();
            assert_eq!((state.lent, state.free), (0, 0), "the lent turn paid back as the quiet guest ended");
        }
        stuck.await.unwrap();
        assert_eq!(gate.free(), 1, "the gate's own turn back");
    }

    #[test]
    fn lent_turns_are_bounded_and_paid_back() {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (gate, _preempted) = counting(2);
        let at = Instant::now() - QUANTUM * 10;
        held_since(&gate, "stuck", QUANTUM * 20);
        held_since(&gate, "stuck", QUANTUM * 20);
        gate.state().preempted = Some(at);
        let mut waiting: Vec<_> = (0..3).map(|i| Box::pin(gate.fair(share(&format!("q{i}"), 1), async {}))).collect();
        for w in &mut waiting {
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        // Each look lends one while the stuck polls hold; at most one for
        // two turns.
        for _ in 0..3 {
            gate.state().preempted = Some(at);
            gate.preempt_if_due();
        }
        let state = gate.state();
        assert_eq!(state.lent, most_lent(2));
        assert_eq!(state.waiting, 2, "one owed guest given the lent turn");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quiet_tenant_waits_for_one_poll_not_for_a_flood() {
        let _alone = TIMED.lock().await;
        let gate = gate(1);
        // A flood: 256 guests of one tenant, each 4 polls of 1 ms, about
        // 250 ms of polls queued at any time.
        let done = Arc::new(AtomicU32::new(0));
        let mut flood = Vec::new();
        for _ in 0..256 {
            let done = done.clone();
            let guest = gate.fair(share("flood", 1), computes(Duration::from_millis(1), 4));
            flood.push(tokio::spawn(async move {
                guest.await;
                done.fetch_add(1, Ordering::Relaxed);
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        // A quiet guest of one short poll: behind a poll or two of the
        // flood, not the 250 ms of polls queued before it.
        let t = Instant::now();
        let quiet = gate.fair(share("quiet", 1), computes(Duration::from_micros(100), 1));
        tokio::spawn(quiet).await.unwrap();
        let waited = t.elapsed();
        assert!(done.load(Ordering::Relaxed) < 200, "the flood was still queued");
        assert!(waited < Duration::from_millis(50), "the quiet guest waited {waited:?}");
        for f in flood {
            f.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn busy_tenants_share_the_turns_by_weight() {
        let _alone = TIMED.lock().await;
        let gate = gate(1);
        let polls: Arc<Mutex<HashMap<&'static str, u32>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut guests = Vec::new();
        for (tenant, weight) in [("heavy", 3), ("light", 1)] {
            for _ in 0..4 {
                let (polls, stop) = (polls.clone(), stop.clone());
                let fut = async move {
                    while !stop.load(Ordering::Relaxed) {
                        computes(Duration::from_micros(200), 1).await;
                        *polls.lock().unwrap().entry(tenant).or_default() += 1;
                    }
                };
                guests.push(tokio::spawn(gate.fair(share(tenant, weight), fut)));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        polls.lock().unwrap().clear();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let counts = polls.lock().unwrap().clone();
        stop.store(true, Ordering::Relaxed);
        for g in guests {
            g.await.unwrap();
        }
        let (heavy, light) = (f64::from(counts["heavy"]), f64::from(counts["light"]));
        let ratio = heavy / light;
        assert!((2.4..=3.6).contains(&ratio), "three to one by CPU time: {counts:?}");
    }
}
