//! Guests share the node's cores with its I/O (accepts, sockets, the
//! store) and with each other. At every epoch tick a running guest yields
//! to the scheduler, behind the I/O that is ready; a guest still computing
//! after [`BUSY_AFTER_TICKS`] ticks of one event is CPU-bound, and from
//! then on starts each tick's slice only with a turn of the node's CPU
//! gate: a few turns (one fewer than the cores, by default), each ended by
//! the next tick, given to the waiting tenants by the weights of their
//! plans (and to each tenant's guests in arrival order). So CPU-bound guests, however many, use at most the gate's
//! cores, and a short event or the node's I/O never waits behind them for
//! more than a tick. The wall still cuts each at its end.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use wasmtime::UpdateDeadline;

use crate::share::GuestShare;

/// Ticks of one event a guest may compute through before it is CPU-bound.
pub(crate) const BUSY_AFTER_TICKS: u32 = 2;

/// The node's turns for CPU-bound guests. A turn lasts until the next
/// tick, whatever its guest does meanwhile: a guest blocked in a host call
/// (a call, a sleep) holds none for longer.
#[derive(Clone)]
pub(crate) struct CpuGate {
    state: Arc<Mutex<GateState>>,
    /// Ticks so far: an epoch callback with no new tick is the poll
    /// gate's preemption (`polls`), which yields but is no tick.
    ticks: Arc<AtomicU64>,
}

struct GateState {
    turns: usize,
    free: usize,
    /// Each tenant with CPU-bound guests: its waiting guests and its pass
    /// (stride scheduling: every turn it is given adds `STRIDE / weight`).
    tenants: HashMap<Arc<str>, Waiting>,
    /// The pass of the last turn given: a tenant that starts waiting
    /// starts there, so a tenant that waited for nothing banks no turns.
    pass: u64,
}

struct Waiting {
    pass: u64,
    weight: u32,
    guests: VecDeque<oneshot::Sender<()>>,
    /// Its guests CPU-bound now, waiting or running: its pass is kept
    /// while it has any (a guest asking again a tick late keeps what its
    /// tenant is owed), and forgotten when it has none (no turns banked).
    busy: u32,
}

const STRIDE: u64 = 1 << 20;

impl GateState {
    /// Gives the free turns to waiting guests, the tenant of the lowest
    /// pass first.
    fn give(&mut self) {
        while self.free > 0 {
            let next = self.tenants.values_mut().filter(|w| !w.guests.is_empty()).min_by_key(|w| w.pass);
            let Some(waiting) = next else { return };
            let guest = waiting.guests.pop_front().expect("a waiting guest");
            // A guest gone (its event cut meanwhile) takes no turn.
            if guest.send(()).is_ok() {
                self.free -= 1;
                self.pass = waiting.pass;
                waiting.pass += STRIDE / u64::from(waiting.weight.max(1));
            }
        }
        // A tenant with no guest CPU-bound any more is forgotten.
        self.tenants.retain(|_, w| w.busy > 0 || !w.guests.is_empty());
    }

    /// The entry of `share`'s tenant; a tenant new to the gate starts at
    /// the pass of the last turn given.
    fn tenant(&mut self, share: &GuestShare) -> &mut Waiting {
        let start = self.pass;
        let waiting = self.tenants.entry(share.tenant.clone()).or_insert_with(|| Waiting {
            pass: start,
            weight: share.weight,
            guests: VecDeque::new(),
            busy: 0,
        });
        waiting.weight = share.weight;
        waiting
    }
}

impl CpuGate {
    pub(crate) fn new(turns: usize) -> Self {
        let turns = turns.max(1);
        let state = GateState { turns, free: turns, tenants: HashMap::new(), pass: 0 };
        Self { state: Arc::new(Mutex::new(state)), ticks: Arc::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Turns free now.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.state().free
    }

    /// A tick begins (the epoch thread's, before it advances the epoch):
    /// the epoch callbacks it causes count as ticks.
    pub(crate) fn count_tick(&self) {
        self.ticks.fetch_add(1, Ordering::Release);
    }

    /// Ends every turn given (the epoch thread, at each tick), and gives
    /// the turns to the guests waiting.
    pub(crate) fn end_turns(&self) {
        let mut state = self.state();
        state.free = state.turns;
        state.give();
    }

    /// A guest of `share`'s tenant became CPU-bound.
    fn join(&self, share: &GuestShare) {
        self.state().tenant(share).busy += 1;
    }

    /// A CPU-bound guest's event ended (or the guest went).
    fn leave(&self, share: &GuestShare) {
        let mut state = self.state();
        if let Some(waiting) = state.tenants.get_mut(&share.tenant) {
            waiting.busy = waiting.busy.saturating_sub(1);
            if waiting.busy == 0 && waiting.guests.is_empty() {
                state.tenants.remove(&share.tenant);
            }
        }
    }

    /// Waits for a turn: at once when one is free and nobody waits.
    async fn take_turn(self, share: GuestShare) {
        let turn = {
            let mut state = self.state();
            if state.free > 0 && state.tenants.values().all(|w| w.guests.is_empty()) {
                state.free -= 1;
                return;
            }
            let (tx, rx) = oneshot::channel();
            state.tenant(&share).guests.push_back(tx);
            state.give();
            rx
        };
        let _ = turn.await;
    }
}

/// One guest's standing: how many ticks it computed through in this event.
pub(crate) struct CpuTurn {
    gate: CpuGate,
    share: GuestShare,
    ticks: u32,
    /// The gate's tick count at its last tick (or its event's start).
    seen: u64,
    /// Counted among its tenant's CPU-bound guests.
    joined: bool,
}

impl Drop for CpuTurn {
    fn drop(&mut self) {
        if self.joined {
            self.gate.leave(&self.share);
        }
    }
}

impl CpuTurn {
    pub(crate) fn new(gate: CpuGate, share: GuestShare) -> Self {
        let seen = gate.ticks.load(Ordering::Acquire);
        Self { gate, share, ticks: 0, seen, joined: false }
    }

    /// Whose guest this is.
    pub(crate) fn share(&self) -> &GuestShare {
        &self.share
    }

    /// An event begins: the guest is not CPU-bound.
    pub(crate) fn reset(&mut self) {
        self.ticks = 0;
        self.seen = self.gate.ticks.load(Ordering::Acquire);
        if std::mem::take(&mut self.joined) {
            self.gate.leave(&self.share);
        }
    }

    /// At an epoch callback: yield. At a tick, yield behind the ready
    /// I/O, and once CPU-bound, wait for a turn first; between ticks (the
    /// poll gate preempting) only yield, its CPU turn still held.
    pub(crate) fn tick(&mut self) -> UpdateDeadline {
        let now = self.gate.ticks.load(Ordering::Acquire);
        if now == self.seen {
            return UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()));
        }
        self.seen = now;
        self.ticks = self.ticks.saturating_add(1);
        if self.ticks < BUSY_AFTER_TICKS {
            return UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()));
        }
        if !self.joined {
            self.joined = true;
            self.gate.join(&self.share);
        }
        let (gate, share) = (self.gate.clone(), self.share.clone());
        UpdateDeadline::YieldCustom(
            1,
            Box::pin(async move {
                tokio::task::yield_now().await;
                gate.take_turn(share).await;
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yielded(d: UpdateDeadline) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        match d {
            UpdateDeadline::YieldCustom(1, f) => f,
            _ => panic!("a tick yields"),
        }
    }

    #[tokio::test]
    async fn busy_guests_take_turns_that_end_at_the_next_tick() {
        let gate = CpuGate::new(1);
        let mut a = CpuTurn::new(gate.clone(), GuestShare::default());
        let mut b = CpuTurn::new(gate.clone(), GuestShare::default());
        // The first tick of an event only yields.
        gate.count_tick();
        yielded(a.tick()).await;
        yielded(b.tick()).await;
        assert_eq!(gate.free(), 1);
        // From the second on, a guest runs on a turn.
        gate.count_tick();
        yielded(a.tick()).await;
        assert_eq!(gate.free(), 0);
        let waiting = tokio::spawn(yielded(b.tick()));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "b waits while a holds the turn");
        // The tick ends a's turn (whether a computes or waits in a host
        // call), and b, first in line, gets it.
        gate.end_turns();
        waiting.await.unwrap();
        assert_eq!(gate.free(), 0);
        gate.count_tick();
        let a_waits = tokio::spawn(yielded(a.tick()));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!a_waits.is_finished());
        gate.end_turns();
        a_waits.await.unwrap();
        gate.end_turns();
        assert_eq!(gate.free(), 1);
        // A new event starts afresh.
        a.reset();
        gate.count_tick();
        yielded(a.tick()).await;
        assert_eq!(gate.free(), 1);
    }

    #[tokio::test]
    async fn a_preemption_between_ticks_is_no_tick() {
        let gate = CpuGate::new(1);
        let mut a = CpuTurn::new(gate.clone(), GuestShare::default());
        // Epoch callbacks with no tick between (the poll gate preempting)
        // only yield: however many, the guest is not CPU-bound.
        for _ in 0..5 {
            yielded(a.tick()).await;
        }
        assert_eq!((a.ticks, a.joined), (0, false));
        gate.count_tick();
        yielded(a.tick()).await;
        yielded(a.tick()).await;
        assert_eq!(a.ticks, 1, "one tick, however many callbacks");
        gate.count_tick();
        yielded(a.tick()).await;
        assert!(a.joined, "CPU-bound at its second tick");
        assert_eq!(gate.free(), 0, "on a turn");
        // Preempted on its turn, it keeps it: no second turn is taken.
        yielded(a.tick()).await;
        assert_eq!(gate.free(), 0);
        gate.end_turns();
        assert_eq!(gate.free(), 1);
    }

    #[tokio::test]
    async fn waiting_tenants_get_turns_by_weight() {
        let gate = CpuGate::new(1);
        let counts: Arc<Mutex<HashMap<&'static str, u32>>> = Arc::default();
        // Three spinning guests of a tenant of weight 3, three of one of
        // weight 1: each asks for a turn again as soon as it has one.
        let mut guests = Vec::new();
        for (tenant, weight) in [("heavy", 3), ("light", 1)] {
            for _ in 0..3 {
                let (gate, counts) = (gate.clone(), counts.clone());
                let share = GuestShare { tenant: tenant.into(), weight, memory_bytes: None };
                guests.push(tokio::spawn(async move {
                    loop {
                        gate.clone().take_turn(share.clone()).await;
                        *counts.lock().unwrap().entry(tenant).or_default() += 1;
                    }
                }));
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        counts.lock().unwrap().clear();
        for _ in 0..400 {
            gate.end_turns();
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        }
        let counts = counts.lock().unwrap().clone();
        let (heavy, light) = (counts["heavy"], counts["light"]);
        assert!((380..=420).contains(&(heavy + light)), "{counts:?}");
        assert!((3 * light).abs_diff(heavy) <= 8, "three to one: {counts:?}");
        // A tenant that comes to wait later banks nothing for the wait it
        // did not do: it starts level with the others.
        for g in guests {
            g.abort();
        }
    }

    #[tokio::test]
    async fn a_guest_asking_again_late_keeps_what_its_tenant_is_owed() {
        let gate = CpuGate::new(1);
        let counts: Arc<Mutex<HashMap<&'static str, u32>>> = Arc::default();
        let (tick_tx, tick_rx) = tokio::sync::watch::channel(0u64);
        let mut guests = Vec::new();
        for (tenant, weight) in [("heavy", 3), ("light", 1)] {
            for _ in 0..3 {
                let (gate, counts, mut ticks) = (gate.clone(), counts.clone(), tick_rx.clone());
                let share = GuestShare { tenant: tenant.into(), weight, memory_bytes: None };
                guests.push(tokio::spawn(async move {
                    gate.join(&share);
                    loop {
                        gate.clone().take_turn(share.clone()).await;
                        *counts.lock().unwrap().entry(tenant).or_default() += 1;
                        // It runs to the next tick and notices it only a
                        // tick later (a busy worker), then asks again.
                        let seen = *ticks.borrow_and_update();
                        let _ = ticks.wait_for(|t| *t > seen + 1).await;
                    }
                }));
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        counts.lock().unwrap().clear();
        for t in 1..=400u64 {
            gate.end_turns();
            tick_tx.send_replace(t);
            tokio::time::sleep(std::time::Duration::from_micros(300)).await;
        }
        let counts = counts.lock().unwrap().clone();
        let (heavy, light) = (counts["heavy"], counts["light"]);
        assert!((3 * light).abs_diff(heavy) <= 12, "three to one: {counts:?}");
        for g in guests {
            g.abort();
        }
    }
}
