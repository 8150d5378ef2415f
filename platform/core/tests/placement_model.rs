//! An exhaustive model check of actor ownership in a cluster
//! (docs/spec/cluster.md §2, §3, §9, §10), with stateright: every
//! interleaving of two nodes' heartbeats, pauses, takes, events, commits,
//! hibernations, drains and releases of one actor, with no bound on time.
//!
//! The model follows the code; each step names what it stands for (paths
//! under `platform/`):
//!
//! | step | the code |
//! |---|---|
//! | `Tick` | a tick passes; a node that runs beats within it (`cluster/src/membership.rs` `Membership::run`) |
//! | `Beat(n)` | the first beat after a pause, `Membership::beat`: the store's `nodes.sent_ms` and `written_ms` move to now |
//! | `Pause(n)`, `Resume(n)` | the whole process stops (GC, VM freeze, SIGSTOP): no beat, no step |
//! | `Admit(n, a)` | `actors/src/actor.rs` `run` (a new task starts with `owned.take`, under `NodeInner::tenure`), then `actors/src/admission.rs` `admit_event`: the tenure check (`actors/src/lib.rs` `current_tenure`), then `admission::take` → `storage/src/sqlite.rs` `take_in` / `storage/src/lib.rs` `plan_take` (the compare-and-set) |
//! | `Read(n, a)` | the guest reads: its instance's memory when resident, else the store |
//! | `Commit(n, a)` | `actors/src/actor_host.rs` `StorageGate::finish` → `sqlite.rs` `commit` → `check_epoch`; fenced: `actor.rs` `execute` drops the epoch and the instance |
//! | `Ack(n, a)` | the answer leaves (`actor.rs` `release`, after the commit) |
//! | `Hibernate(n, a)` | `actor.rs` `run`, retiring: the `keep` closure keeps the epoch (`owned.keep`) if its tenure is `NodeInner::tenure` and the node is not draining; a draining node releases it instead |
//! | `HibernateRacing(n, a)` | the same, while another actor's admission on `n` grows the tenure (`current_tenure`: `fetch_max`, then `owned.clear()`) between the closure's check and its `owned.keep` |
//! | `Forget(n, a)` | `Kept::keep` evicts the oldest kept epoch |
//! | `Drain(n)` | `cli/src/serve.rs` `drain` → `actors/src/drain.rs` `Node::drain`: no more takes; queued events still run |
//! | `Release(n, a)` | `Node::drain` releases a kept epoch → `sqlite.rs` `release`: `owner = '', epoch = epoch + 1 WHERE epoch = ?` |
//!
//! Time is each node's heartbeat age in ticks (`now - sent`, counted up to
//! `WAIT + 1`): dead to the others once over the failover wait, as in
//! `Heartbeat::is_live` and the take's `sent_ms >= dead_before`; silent to
//! itself a tick earlier (`Placement::margin`). One clock: no drift. Tenures
//! are kept as the comparisons the code makes of them. Epochs and writes
//! are bounded; ticks, pauses and events are not.
//!
//! Every property is an `always`, over the state or over the step that led
//! to it (`State::step`). A flag on `Placement` switches one rule off, and
//! a test pins what that breaks, with the shortest counterexample (run with
//! `--nocapture` to see it).
//!
//! The code broke (3) and (4) three ways, each fixed in issue 25 and
//! pinned by a `d*` test with the other two fixed: D6 (`Membership::beat`
//! hid a silence from the lazy tenure), D11 (a node silent to itself could
//! still take an actor; now `placement::take::take_by` answers
//! `NotCurrent`) and D12 (a kept epoch that raced the tenure's growth was
//! trusted; now `Owned` keeps each epoch with its tenure).
//! `Placement::correct()` is the code: every property holds, and each fix
//! is needed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model, Path, Property};

/// The failover wait, in ticks: a heartbeat older than this is dead. With 1,
/// a node that runs (it beats every tick) is never dead nor silent, and a
/// pause that ends before the node finds itself silent changes nothing; the
/// model skips those states (`Tick`, `Beat`, `Resume`).
const WAIT: u8 = 1;

/// A node, as an index (A, B in traces).
type NodeId = u8;

// What the last step did (`State::step`), one bit each.
const TWO_WRITERS: u16 = 1 << 0;
const CAME_BACK: u16 = 1 << 1;
const STALE_READ: u16 = 1 << 2;
const OWN_FENCED: u16 = 1 << 3;
const TOOK_OVER: u16 = 1 << 4;
const RELEASED_AFTER_COMMIT: u16 = 1 << 5;
const FENCED: u16 = 1 << 6;
const TENURE_DROPPED: u16 = 1 << 7;

// The properties, in `Model::properties` order (an index in
// `Placement::shown`), each stated where `properties` lists it. The names are
// short: the checker hashes each one at every state.
const ONE_WRITER: &str = "(1) one writer per epoch";
const NO_LOST_WRITE: &str = "(2) no acked write lost";
const NO_COMEBACK: &str = "(3) no expired owner back";
const NO_STALE_READ: &str = "(4) no two live runners";
const DRAIN_FENCES_NOTHING: &str = "(5) no drain fences itself";
const ALWAYS: [&str; 5] = [ONE_WRITER, NO_LOST_WRITE, NO_COMEBACK, NO_STALE_READ, DRAIN_FENCES_NOTHING];
// Examples, to show the states that matter are reached.
const TAKEOVER: &str = "takeover";
const RELEASE_AFTER_COMMIT: &str = "release after commit";
const A_FENCE: &str = "late commit fenced";
const A_TENURE_DROP: &str = "tenure drop";
const SOMETIMES: [&str; 4] = [TAKEOVER, RELEASE_AFTER_COMMIT, A_FENCE, A_TENURE_DROP];

/// The cluster (`N` nodes, `A` actors) and the rules it runs by.
/// `Placement::correct()` is the protocol as it should be; each rule's flag
/// set `false` (or `TakerCheck` weakened) switches that rule off.
struct Placement<const N: usize, const A: usize> {
    /// Commits, over all actors (a write id is a bit of a `u8`).
    max_writes: u8,
    /// States where an actor's epoch passed this are not explored.
    max_epoch: u8,
    /// How many nodes may drain.
    max_drains: u8,
    /// Whether to look for the examples too (`SOMETIMES`).
    examples: bool,
    /// Whether to explore one of the states that differ only by the
    /// nodes' names (symmetry reduction: half the states with two nodes;
    /// `trace` shows a path under the names it started with).
    symmetric: bool,
    /// A commit checks the row's epoch (`sqlite.rs` `check_epoch`).
    epoch_check: bool,
    /// A take respects a live other owner (`take_in`'s `owner_alive`);
    /// `false`: it takes from anyone, as a wake does.
    take_checks_heartbeat: bool,
    /// A draining node releases an actor only between its events
    /// (`actor.rs` `give_up` and the retire path, `Node::drain`'s kept
    /// epochs); `false`: also while an event is mid-way.
    release_after_last_commit: bool,
    /// `Membership::beat` first asks for the silence, so the tenure grows
    /// if the last beat is older than the wait. `false` is the code before
    /// issue 25: only `Membership::tenure`, asked at admission, looked
    /// (D6).
    tenure_at_beat: bool,
    /// A node counts itself silent before the others count it dead
    /// (`placement::holding::trusted_silence`, three quarters of the wait,
    /// issue 25): here, after one tick without a beat, where the others
    /// wait two. `false`: both at the wait.
    margin: bool,
    /// What a take asks of the taker's own heartbeat (`take_by`: that it
    /// is current; before issue 25 nothing, D11).
    taker_check: TakerCheck,
    /// A kept epoch keeps the tenure it was taken under, and a task that
    /// takes it back starts under that one (`Owned` keeps both). `false`
    /// is `run` before issue 25, which started it under `NodeInner::tenure`
    /// as it was then (D12).
    kept_epoch_keeps_its_tenure: bool,
    /// stateright's BFS records a property's discovery again at every later
    /// state that shows it, keeping the last one found, not the shortest.
    /// So each property shows once: at the first state in BFS order, the
    /// one with the fewest steps (one checker thread).
    shown: Arc<[AtomicBool; ALWAYS.len() + SOMETIMES.len()]>,
}

impl<const N: usize, const A: usize> Placement<N, A> {
    /// The protocol as it should be.
    fn correct() -> Self {
        Placement {
            max_writes: 2,
            max_epoch: 3,
            max_drains: 1,
            examples: false,
            symmetric: false,
            epoch_check: true,
            take_checks_heartbeat: true,
            release_after_last_commit: true,
            tenure_at_beat: true,
            margin: true,
            taker_check: TakerCheck::NotSilent,
            kept_epoch_keeps_its_tenure: true,
            shown: Arc::default(),
        }
    }

    /// Whether `shows` is the first showing of property `i` (see `shown`).
    fn first(&self, i: usize, shows: bool) -> bool {
        shows && !self.shown[i].swap(true, Ordering::Relaxed)
    }

    /// Whether node `n`'s heartbeat is dead: others may take its actors.
    fn dead(&self, s: &State<N, A>, n: NodeId) -> bool {
        s.nodes[n as usize].age > WAIT
    }

    /// Whether node `n` finds its own heartbeat unwritten for too long
    /// (`Tenure::at`'s `silent`).
    fn silent(&self, s: &State<N, A>, n: NodeId) -> bool {
        s.nodes[n as usize].age > if self.margin { WAIT - 1 } else { WAIT }
    }

    /// `Membership::tenure` (`Tenure::at`): it grows once per silence, when
    /// the last written heartbeat is too old.
    fn ask_tenure(&self, s: &mut State<N, A>, n: NodeId) {
        let silent = self.silent(s, n);
        let node = &mut s.nodes[n as usize];
        if silent && !node.noticed {
            node.noticed = true;
            node.behind = true;
        }
    }

    /// `lib.rs` `current_tenure`: asks the membership; when its tenure grew
    /// past `NodeInner::tenure`, the kept epochs are forgotten, and every
    /// task's tenure is an older one.
    fn current_tenure(&self, s: &mut State<N, A>, n: NodeId) {
        self.ask_tenure(s, n);
        let node = &mut s.nodes[n as usize];
        if node.behind {
            node.behind = false;
            for side in &mut node.sides {
                side.kept = None;
                if let Some(task) = side.task.as_mut() {
                    task.old = true;
                }
            }
        }
    }

    /// `ClusterStore::take` (`take_in`, `plan_take`): the compare-and-set.
    /// `None`: "elsewhere" (or refused, see `taker_check`).
    fn take(&self, s: &mut State<N, A>, n: NodeId, a: usize) -> Option<Held> {
        let me_dead = self.dead(s, n);
        let refused = match self.taker_check {
            TakerCheck::Nothing => false,
            TakerCheck::NotDead => me_dead,
            TakerCheck::NotSilent => self.silent(s, n),
        };
        if refused {
            return None;
        }
        if let Some(owner) = s.store[a].owner.filter(|&o| o != n) {
            let owner_dead = self.dead(s, owner);
            if self.take_checks_heartbeat && !owner_dead {
                return None;
            }
            if owner_dead {
                s.step |= TOOK_OVER;
            }
        }
        let row = &mut s.store[a];
        row.epoch += 1;
        row.owner = Some(n);
        Some(Held { epoch: row.epoch, aged: me_dead })
    }

    /// `ClusterStore::release` (`sqlite.rs` `release`).
    fn release(&self, s: &mut State<N, A>, n: NodeId, a: usize, epoch: u8) {
        if s.store[a].epoch != epoch {
            return;
        }
        s.store[a].owner = None;
        s.store[a].epoch += 1;
        if s.last_commit[a] == Some((n, epoch)) {
            s.step |= RELEASED_AFTER_COMMIT;
        }
        if let Some(event) = s.nodes[n as usize].sides[a].event.as_mut().filter(|e| e.epoch == epoch) {
            event.released_by_self = true;
        }
    }

    /// `actor.rs` `run` and `handle` → `admission.rs` `admit_event`.
    fn admit(&self, s: &mut State<N, A>, n: NodeId, a: usize) {
        let ni = n as usize;
        // actor.rs:28-29: a new task starts with the kept epoch, under
        // `NodeInner::tenure` as it is now (or, fixed, under the epoch's).
        let side = &mut s.nodes[ni].sides[a];
        if side.task.is_none() {
            let kept = side.kept.take();
            let old = self.kept_epoch_keeps_its_tenure && kept.is_some_and(|k| k.old);
            side.task = Some(Task { held: kept.map(|k| k.held), old, memory: None });
        }
        // admission.rs:151-158: an epoch of an older tenure goes, with the
        // instance.
        self.current_tenure(s, n);
        let node = &mut s.nodes[ni];
        let task = node.sides[a].task.as_mut().expect("started above");
        if task.old {
            if task.held.is_some() {
                s.step |= TENURE_DROPPED;
            }
            *task = Task { held: None, old: false, memory: None };
        }
        let held = match task.held {
            Some(held) => held,
            // admission.rs `take`: a draining node takes nothing (the event
            // goes to the owner or a successor).
            None if node.draining => return,
            None => match self.take(s, n, a) {
                Some(held) => {
                    s.nodes[ni].sides[a].task.as_mut().expect("started above").held = Some(held);
                    held
                }
                // Elsewhere: the event is handed on, out of this model.
                None => return,
            },
        };
        s.nodes[ni].sides[a].event = Some(Event {
            epoch: held.epoch,
            must_see: s.acked[a],
            on_aged: held.aged,
            read: None,
            came_back: false,
            stale: false,
            wrote: None,
            released_by_self: false,
        });
    }

    /// The guest reads: from its instance's memory when it has one, else
    /// from the store (and the new instance holds what it read).
    fn read(&self, s: &mut State<N, A>, n: NodeId, a: usize) {
        let row = s.store[a];
        let side = &mut s.nodes[n as usize].sides[a];
        let event = side.event.as_mut().expect("reads in an event");
        let memory = side.task.as_ref().and_then(|t| t.memory);
        let read = memory.unwrap_or(row.value);
        event.read = Some(read);
        // Judged now, answered at `Ack`. (3): from memory, under a holding
        // that aged before the event, once another node took the actor.
        event.came_back = memory.is_some() && event.on_aged && row.epoch != event.epoch;
        // (4): a write acknowledged before the event is missing.
        event.stale = event.must_see & !read != 0;
        // Ghosts no longer needed (fewer states).
        (event.must_see, event.on_aged) = (0, false);
        if let Some(task) = side.task.as_mut().filter(|t| t.held.is_some()) {
            task.memory = Some(read);
        }
    }

    /// `StorageGate::finish` → `ActorStore::commit` (`check_epoch`), and
    /// `actor.rs` `execute` on a fence.
    fn commit(&self, s: &mut State<N, A>, n: NodeId, a: usize) {
        let side = &mut s.nodes[n as usize].sides[a];
        let event = side.event.as_mut().expect("commits in an event");
        if self.epoch_check && s.store[a].epoch != event.epoch {
            s.step |= FENCED;
            if event.released_by_self {
                s.step |= OWN_FENCED;
            }
            // actor.rs:418-424: the epoch and the instance go; the event
            // answers 503.
            side.event = None;
            if let Some(task) = side.task.as_mut() {
                (task.held, task.memory) = (None, None);
            }
            return;
        }
        let id = s.next_write;
        s.next_write += 1;
        // The guest writes what it read with its own write added.
        let value = event.read.expect("an event commits after it read") | 1 << id;
        s.store[a].value = value;
        event.wrote = Some(id);
        if let Some(task) = side.task.as_mut().filter(|t| t.held.is_some()) {
            task.memory = Some(value);
        }
        if let Some((m, e)) = s.last_commit[a]
            && (event.epoch < e || (event.epoch == e && m != n))
        {
            s.step |= TWO_WRITERS;
        }
        s.last_commit[a] = Some((n, event.epoch));
    }
}

/// What a take asks of the taker's own heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TakerCheck {
    /// Nothing (the code before issue 25: D11).
    Nothing,
    /// That it is alive, by the wait (`sent_ms >= dead_before` for the
    /// taker too): not enough with the margin.
    NotDead,
    /// That the taker does not find itself silent, by the same measure as
    /// its tenure (`trusted_silence`).
    NotSilent,
}

/// One actor's row in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Row {
    owner: Option<NodeId>,
    epoch: u8,
    /// The actor's stored value: the write ids it holds, as bits.
    value: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Node<const A: usize> {
    paused: bool,
    draining: bool,
    /// Ticks since its last heartbeat (the store's `nodes.sent_ms`, and
    /// `Membership::written_ms`: a beat writes both), up to `WAIT + 1`.
    age: u8,
    /// This silence was counted (`Membership::stale_after` is the last
    /// beat).
    noticed: bool,
    /// `NodeInner::tenure` is behind `Membership::tenure`.
    behind: bool,
    /// Per actor.
    sides: [Side; A],
}

/// What a node holds of one actor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Side {
    /// `NodeInner::owned`: the epoch kept across hibernation.
    kept: Option<Kept>,
    /// The actor's task (`Residence`).
    task: Option<Task>,
    /// The event the task runs.
    event: Option<Event>,
}

/// An epoch a node holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Held {
    epoch: u8,
    /// Ghost: from its take on, the node's heartbeat was dead at some
    /// moment, so another node may have taken the actor.
    aged: bool,
}

/// An epoch kept across hibernation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Kept {
    held: Held,
    /// Taken under a tenure older than `NodeInner::tenure` (only a keep
    /// that raced the tenure's growth leaves one).
    old: bool,
}

/// `Residence`: the task's epoch, its tenure, its instance's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Task {
    held: Option<Held>,
    /// `Residence::tenure` is older than `NodeInner::tenure`.
    old: bool,
    /// The instance's memory: what it read and wrote (write ids, as bits).
    memory: Option<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Event {
    /// The epoch it runs and commits under (`Admitted::epoch`).
    epoch: u8,
    /// Ghost, until it reads: the writes acknowledged before it was
    /// admitted (its answer must show them).
    must_see: u8,
    /// Ghost, until it reads: it was admitted under an aged holding.
    on_aged: bool,
    read: Option<u8>,
    /// Ghost: its read breaks property (3) if answered.
    came_back: bool,
    /// Ghost: its read breaks property (4) if answered.
    stale: bool,
    /// The write id it committed.
    wrote: Option<u8>,
    /// Ghost: its own node released its epoch.
    released_by_self: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct State<const N: usize, const A: usize> {
    /// Per actor.
    store: [Row; A],
    nodes: [Node<A>; N],
    next_write: u8,
    /// Ghost, per actor: the write ids acknowledged to clients.
    acked: [u8; A],
    /// Ghost, per actor: the last successful commit's node and epoch.
    last_commit: [Option<(NodeId, u8)>; A],
    /// Ghost: what the step that led here did (the bits above).
    step: u16,
}

/// Calls `f` with every order of `N` nodes (Heap's algorithm).
fn each_order<const N: usize>(mut f: impl FnMut(&[usize; N])) {
    let mut order: [usize; N] = std::array::from_fn(|i| i);
    f(&order);
    let mut c = [0; N];
    let mut i = 1;
    while i < N {
        if c[i] < i {
            order.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
            f(&order);
            c[i] += 1;
            i = 1;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
}

impl<const N: usize, const A: usize> State<N, A> {
    /// The least of the states that differ from this one only by the nodes'
    /// names.
    fn canonical(self) -> Self {
        let mut best = self;
        each_order(|order| best = best.min(self.renamed(order)));
        best
    }

    /// This state with node `order[i]` renamed `i`.
    fn renamed(&self, order: &[usize; N]) -> Self {
        let mut name = [0; N];
        for (new, &old) in order.iter().enumerate() {
            name[old] = new as NodeId;
        }
        let mut s = *self;
        s.nodes = std::array::from_fn(|i| self.nodes[order[i]]);
        for row in &mut s.store {
            row.owner = row.owner.map(|o| name[o as usize]);
        }
        for (node, _) in s.last_commit.iter_mut().flatten() {
            *node = name[*node as usize];
        }
        s
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Beat(NodeId),
    Pause(NodeId),
    Resume(NodeId),
    Drain(NodeId),
    Admit(NodeId, u8),
    Read(NodeId, u8),
    Commit(NodeId, u8),
    Ack(NodeId, u8),
    Hibernate(NodeId, u8),
    HibernateRacing(NodeId, u8),
    Forget(NodeId, u8),
    Release(NodeId, u8),
}

impl<const N: usize, const A: usize> Model for Placement<N, A> {
    type State = State<N, A>;
    type Action = Action;

    fn init_states(&self) -> Vec<State<N, A>> {
        let node =
            Node { paused: false, draining: false, age: 0, noticed: false, behind: false, sides: [Side::default(); A] };
        vec![State {
            store: [Row { owner: None, epoch: 0, value: 0 }; A],
            nodes: [node; N],
            next_write: 0,
            acked: [0; A],
            last_commit: [None; A],
            step: 0,
        }]
    }

    fn actions(&self, s: &State<N, A>, actions: &mut Vec<Action>) {
        // A node that runs beats within every tick; one that resumed beats
        // before the next.
        if s.nodes.iter().all(|n| n.paused || n.age == 0) {
            actions.push(Action::Tick);
        }
        let drains = s.nodes.iter().filter(|n| n.draining).count();
        for (n, node) in s.nodes.iter().enumerate() {
            let n = n as NodeId;
            if node.paused {
                // A pause that ends before the node finds itself silent is a
                // node that did nothing for a while: no new state.
                if self.silent(s, n) {
                    actions.push(Action::Resume(n));
                }
                continue;
            }
            actions.push(Action::Pause(n));
            if node.age > 0 {
                actions.push(Action::Beat(n));
            }
            if !node.draining && drains < self.max_drains as usize {
                actions.push(Action::Drain(n));
            }
            for (a, side) in node.sides.iter().enumerate() {
                let a = a as u8;
                match &side.event {
                    // A draining node runs only what was queued before the
                    // drain, on a task that is awake.
                    None if !node.draining || side.task.is_some() => actions.push(Action::Admit(n, a)),
                    None => {}
                    Some(event) if event.read.is_none() => actions.push(Action::Read(n, a)),
                    Some(event) => {
                        if event.wrote.is_none() && s.next_write < self.max_writes {
                            actions.push(Action::Commit(n, a));
                        }
                        actions.push(Action::Ack(n, a));
                    }
                }
                if let (Some(task), None) = (side.task, side.event) {
                    actions.push(Action::Hibernate(n, a));
                    // Only when the tenure would grow (another actor's
                    // admission changes nothing else here).
                    let grows = node.behind || (self.silent(s, n) && !node.noticed);
                    if task.held.is_some() && !task.old && !node.draining && grows {
                        actions.push(Action::HibernateRacing(n, a));
                    }
                }
                if side.kept.is_some() {
                    actions.push(Action::Forget(n, a));
                }
                let mid_event = side.event.is_some() && side.task.is_some_and(|t| t.held.is_some());
                if node.draining && (side.kept.is_some() || (!self.release_after_last_commit && mid_event)) {
                    actions.push(Action::Release(n, a));
                }
            }
        }
    }

    fn next_state(&self, last: &State<N, A>, action: Action) -> Option<State<N, A>> {
        let s = self.step(last, action);
        Some(if self.symmetric { s.canonical() } else { s })
    }

    fn within_boundary(&self, s: &State<N, A>) -> bool {
        s.store.iter().all(|r| r.epoch <= self.max_epoch)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            // (1) Commits under one epoch come from one node, and no commit
            // lands under an epoch older than the last one's.
            Property::always(ONE_WRITER, |m: &Self, s: &State<N, A>| !m.first(0, s.step & TWO_WRITERS != 0)),
            // (2) Every acknowledged write is in the actor's stored value.
            Property::always(NO_LOST_WRITE, |m: &Self, s: &State<N, A>| {
                !m.first(1, s.acked.iter().zip(&s.store).any(|(acked, row)| acked & !row.value != 0))
            }),
            // (3) A node never answers a read from its instance's memory, in
            // an event admitted under a holding held while the node's own
            // heartbeat was dead, when by the read another node had taken
            // (or released) the actor. (A read before the take is current;
            // a pause inside one event is (4)'s to judge.)
            Property::always(NO_COMEBACK, |m: &Self, s: &State<N, A>| !m.first(2, s.step & CAME_BACK != 0)),
            // (4) Reads are current: no answer misses a write acknowledged
            // before its event was admitted, as a second live runner's
            // would.
            Property::always(NO_STALE_READ, |m: &Self, s: &State<N, A>| !m.first(3, s.step & STALE_READ != 0)),
            // (5) No commit of a draining node is fenced by its own release.
            Property::always(DRAIN_FENCES_NOTHING, |m: &Self, s: &State<N, A>| !m.first(4, s.step & OWN_FENCED != 0)),
        ];
        if !self.examples {
            return properties;
        }
        properties.extend([
            // A node took the actor from an owner whose heartbeat was dead.
            Property::sometimes(TAKEOVER, |m: &Self, s: &State<N, A>| m.first(5, s.step & TOOK_OVER != 0)),
            // A drain released the actor after a commit under its epoch.
            Property::sometimes(RELEASE_AFTER_COMMIT, |m: &Self, s: &State<N, A>| {
                m.first(6, s.step & RELEASED_AFTER_COMMIT != 0)
            }),
            // A late commit was fenced.
            Property::sometimes(A_FENCE, |m: &Self, s: &State<N, A>| m.first(7, s.step & FENCED != 0)),
            // Admission dropped an epoch because the tenure grew.
            Property::sometimes(A_TENURE_DROP, |m: &Self, s: &State<N, A>| m.first(8, s.step & TENURE_DROPPED != 0)),
        ]);
        properties
    }
}

impl<const N: usize, const A: usize> Placement<N, A> {
    /// The state `action` leads to from `last` (with the nodes' names as
    /// they were).
    fn step(&self, last: &State<N, A>, action: Action) -> State<N, A> {
        let mut s = *last;
        s.step = 0;

        match action {
            Action::Tick => {
                // A node that runs beat within the tick, so its heartbeat
                // stays current; a paused one's ages.
                for node in s.nodes.iter_mut().filter(|n| n.paused) {
                    node.age = (node.age + 1).min(WAIT + 1);
                    if node.age > WAIT {
                        for side in &mut node.sides {
                            let kept = side.kept.iter_mut().map(|k| &mut k.held);
                            for held in kept.chain(side.task.iter_mut().flat_map(|t| t.held.as_mut())) {
                                held.aged = true;
                            }
                        }
                    }
                }
            }
            Action::Beat(n) => {
                if self.tenure_at_beat {
                    self.ask_tenure(&mut s, n);
                }
                let node = &mut s.nodes[n as usize];
                node.age = 0;
                node.noticed = false;
            }
            Action::Pause(n) => s.nodes[n as usize].paused = true,
            Action::Resume(n) => s.nodes[n as usize].paused = false,
            Action::Drain(n) => s.nodes[n as usize].draining = true,
            Action::Admit(n, a) => self.admit(&mut s, n, a as usize),
            Action::Read(n, a) => self.read(&mut s, n, a as usize),
            Action::Commit(n, a) => self.commit(&mut s, n, a as usize),
            Action::Ack(n, a) => {
                let a = a as usize;
                let event = s.nodes[n as usize].sides[a].event.take().expect("acks an event");
                if let Some(id) = event.wrote {
                    s.acked[a] |= 1 << id;
                }
                if event.came_back {
                    s.step |= CAME_BACK;
                }
                if event.stale {
                    s.step |= STALE_READ;
                }
            }
            Action::Hibernate(n, a) => {
                let a = a as usize;
                let node = &mut s.nodes[n as usize];
                let task = node.sides[a].task.take().expect("a task hibernates");
                if node.draining {
                    if let Some(held) = task.held {
                        self.release(&mut s, n, a, held.epoch);
                    }
                } else if !task.old {
                    node.sides[a].kept = task.held.map(|held| Kept { held, old: false });
                }
            }
            Action::HibernateRacing(n, a) => {
                let a = a as usize;
                // The closure found the task's tenure current ...
                let task = s.nodes[n as usize].sides[a].task.take().expect("a task hibernates");
                // ... another actor's admission grew it and cleared `owned` ...
                self.current_tenure(&mut s, n);
                // ... and the epoch, of the older tenure now, is kept.
                s.nodes[n as usize].sides[a].kept = task.held.map(|held| Kept { held, old: true });
            }
            Action::Forget(n, a) => s.nodes[n as usize].sides[a as usize].kept = None,
            Action::Release(n, a) => {
                let a = a as usize;
                let side = &mut s.nodes[n as usize].sides[a];
                let epoch = match side.kept.take() {
                    Some(kept) => kept.held.epoch,
                    // `give_up` while an event is mid-way (only without
                    // `release_after_last_commit`): the instance and the
                    // epoch go; the event goes on under its own.
                    None => side.task.take().and_then(|t| t.held).expect("a release holds an epoch").epoch,
                };
                self.release(&mut s, n, a, epoch);
            }
        }
        s
    }
}

fn node_name(n: NodeId) -> char {
    char::from(b'A' + n)
}

fn bits(b: u8) -> String {
    format!("{b:02b}")
}

impl Action {
    /// This action with its node `n` renamed `order[n]`.
    fn renamed(self, order: &[usize]) -> Self {
        let to = |n: NodeId| order[n as usize] as NodeId;
        match self {
            Action::Tick => Action::Tick,
            Action::Beat(n) => Action::Beat(to(n)),
            Action::Pause(n) => Action::Pause(to(n)),
            Action::Resume(n) => Action::Resume(to(n)),
            Action::Drain(n) => Action::Drain(to(n)),
            Action::Admit(n, a) => Action::Admit(to(n), a),
            Action::Read(n, a) => Action::Read(to(n), a),
            Action::Commit(n, a) => Action::Commit(to(n), a),
            Action::Ack(n, a) => Action::Ack(to(n), a),
            Action::Hibernate(n, a) => Action::Hibernate(to(n), a),
            Action::HibernateRacing(n, a) => Action::HibernateRacing(to(n), a),
            Action::Forget(n, a) => Action::Forget(to(n), a),
            Action::Release(n, a) => Action::Release(to(n), a),
        }
    }
}

/// An action as a trace shows it.
fn show_action(action: &Action) -> String {
    let (name, n, a) = match *action {
        Action::Tick => return "Tick".into(),
        Action::Beat(n) => ("Beat", n, None),
        Action::Pause(n) => ("Pause", n, None),
        Action::Resume(n) => ("Resume", n, None),
        Action::Drain(n) => ("Drain", n, None),
        Action::Admit(n, a) => ("Admit", n, Some(a)),
        Action::Read(n, a) => ("Read", n, Some(a)),
        Action::Commit(n, a) => ("Commit", n, Some(a)),
        Action::Ack(n, a) => ("Ack", n, Some(a)),
        Action::Hibernate(n, a) => ("Hibernate", n, Some(a)),
        Action::HibernateRacing(n, a) => ("HibernateRacing", n, Some(a)),
        Action::Forget(n, a) => ("Forget", n, Some(a)),
        Action::Release(n, a) => ("Release", n, Some(a)),
    };
    match a {
        Some(a) => format!("{name}({}, {a})", node_name(n)),
        None => format!("{name}({})", node_name(n)),
    }
}

/// A state, in a line.
fn show_state<const N: usize, const A: usize>(s: &State<N, A>) -> String {
    let held = |h: &Held| format!("e{}{}", h.epoch, if h.aged { " aged" } else { "" });
    let kept = |k: &Kept| format!("{}{}", held(&k.held), if k.old { " old" } else { "" });
    let mut out = Vec::new();
    for (a, (row, acked)) in s.store.iter().zip(&s.acked).enumerate() {
        let owner = row.owner.map_or('-', node_name);
        out.push(format!("actor {a}: owner {owner} e{} value {} acked {}", row.epoch, bits(row.value), bits(*acked)));
    }
    for (n, node) in s.nodes.iter().enumerate() {
        let mut line = format!("{}: age {}", node_name(n as NodeId), node.age);
        for (flag, word) in [
            (node.paused, " paused"),
            (node.draining, " draining"),
            (node.noticed, " silence-seen"),
            (node.behind, " tenure-grew"),
        ] {
            if flag {
                line.push_str(word);
            }
        }
        for side in &node.sides {
            if let Some(k) = &side.kept {
                line.push_str(&format!(" kept {}", kept(k)));
            }
            if let Some(t) = &side.task {
                let h = t.held.as_ref().map_or("-".into(), held);
                let memory = t.memory.map_or("-".into(), bits);
                line.push_str(&format!(" task({h}{} memory {memory})", if t.old { " old" } else { "" }));
            }
            if let Some(e) = &side.event {
                let read = e.read.map_or("-".into(), bits);
                line.push_str(&format!(" event(e{} read {read})", e.epoch));
            }
        }
        out.push(line);
    }
    out.join(" | ")
}

/// A path, a step a line, and its actions. With `symmetric`, the path's
/// states have their nodes renamed at will; the steps are replayed here
/// under the names they started with.
fn trace<const N: usize, const A: usize>(model: &Placement<N, A>, path: &Path<State<N, A>, Action>) -> String {
    let steps = path.clone().into_vec();
    let mut state = steps[0].0;
    // The path's node `i` is `state`'s node `order[i]`.
    let mut order: [usize; N] = std::array::from_fn(|i| i);
    let mut actions = Vec::new();
    let mut out = format!("{:>3}. {:<16} {}\n", 0, "(start)", show_state(&state));
    for (i, window) in steps.windows(2).enumerate() {
        let action = window[0].1.expect("a step between two states").renamed(&order);
        state = model.step(&state, action);
        let mut found = None;
        each_order(|o| {
            if found.is_none() && state.renamed(o) == window[1].0 {
                found = Some(*o);
            }
        });
        order = found.expect("the path's state, renamed");
        out.push_str(&format!("{:>3}. {:<16} {}\n", i + 1, show_action(&action), show_state(&state)));
        actions.push(action);
    }
    out + &format!("{actions:?}\n")
}

/// Explores every state (with `until`, until those properties all showed)
/// and prints what that took.
fn check<const N: usize, const A: usize>(
    name: &str,
    model: Placement<N, A>,
    until: Option<&[&'static str]>,
) -> impl Checker<Placement<N, A>> {
    let started = Instant::now();
    let builder = model.checker();
    let builder = match until {
        Some(names) => builder.finish_when(HasDiscoveries::AllOf(names.iter().copied().collect())),
        None => builder,
    };
    let checker = builder.spawn_bfs().join();
    eprintln!(
        "{name}: {} states, {} unique, depth {}, in {:.2?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}

/// Asserts `property` breaks, and prints its shortest counterexample.
fn breaks<const N: usize, const A: usize>(checker: &impl Checker<Placement<N, A>>, property: &'static str) {
    let path = checker.assert_any_discovery(property);
    let steps = path.clone().into_actions().len();
    eprintln!("counterexample to {property}, {steps} steps:\n{}", trace(checker.model(), &path));
}

/// Asserts `property` holds in every state.
fn holds<const N: usize, const A: usize>(checker: &impl Checker<Placement<N, A>>, property: &'static str) {
    checker.assert_no_discovery(property);
    eprintln!("holds: {property}");
}

#[test]
fn the_protocol_keeps_every_property() {
    let model = Placement::<2, 1> { examples: true, symmetric: true, ..Placement::correct() };
    let checker = check("the protocol", model, None);
    for property in ALWAYS {
        holds(&checker, property);
    }
    // Not vacuous: the states that matter are reached, and many of them.
    for example in SOMETIMES {
        let path = checker.assert_any_discovery(example);
        eprintln!("example, {example}:\n{}", trace(checker.model(), &path));
    }
    let states = checker.unique_state_count();
    assert!(states > 1_000_000, "{states} states: the model explores less than it did");
}

#[test]
fn without_the_epoch_check_a_stale_commit_loses_a_write() {
    let model = Placement::<2, 1> { epoch_check: false, ..Placement::correct() };
    let checker = check("no epoch check", model, Some(&[ONE_WRITER, NO_LOST_WRITE]));
    breaks(&checker, ONE_WRITER);
    breaks(&checker, NO_LOST_WRITE);
}

#[test]
fn a_take_ignoring_a_live_owner_makes_two_live_runners() {
    let model = Placement::<2, 1> { take_checks_heartbeat: false, ..Placement::correct() };
    let checker = check("a take ignores the heartbeat", model, Some(&[NO_STALE_READ]));
    breaks(&checker, NO_STALE_READ);
}

#[test]
fn a_release_mid_event_fences_the_drains_own_commit() {
    // The margin plays no part in a drain; without it, the check is half
    // the size.
    let model =
        Placement::<2, 1> { release_after_last_commit: false, margin: false, symmetric: true, ..Placement::correct() };
    let checker = check("release mid-event", model, None);
    breaks(&checker, DRAIN_FENCES_NOTHING);
    // The epoch check still keeps the writes safe.
    for property in [ONE_WRITER, NO_LOST_WRITE, NO_COMEBACK, NO_STALE_READ] {
        holds(&checker, property);
    }
}

/// D6, the code before issue 25: `Membership::beat` moved `written_ms` on
/// without asking for the silence, so a node paused past the wait that
/// beat before its next admission never saw it: its instance served from
/// memory an actor another node took. Fixed by `tenure_at_beat`.
#[test]
fn d6_a_beat_hides_the_silence_from_the_lazy_tenure() {
    // As the code was then: no margin either.
    let model = Placement::<2, 1> { tenure_at_beat: false, margin: false, ..Placement::correct() };
    an_expired_owner_comes_back("D6: lazy tenure", model);
}

/// D11, the code before issue 25 (with D6 fixed): a node resumed after a pause past the
/// wait takes an actor before its first beat, while its own heartbeat is
/// dead; its tenure grew for this silence already, and grows no more.
/// Another node takes the actor at once, and the first keeps serving it
/// from memory. Fixed by `TakerCheck::NotSilent`.
#[test]
fn d11_a_take_while_silent_outlives_the_silence() {
    let model = Placement::<2, 1> { taker_check: TakerCheck::Nothing, ..Placement::correct() };
    an_expired_owner_comes_back("D11: a take while silent", model);
}

/// D11 fixed by the store's measure (the taker alive by the wait) is not
/// fixed with the margin: a node silent by its own measure but not yet
/// dead takes, goes quiet again, and the silence it already counted hides
/// the take.
#[test]
fn d11_a_take_refused_only_to_a_dead_taker_is_not_enough() {
    let model = Placement::<2, 1> { taker_check: TakerCheck::NotDead, ..Placement::correct() };
    an_expired_owner_comes_back("D11: taker alive by the wait", model);
}

/// D12, the code before issue 25, with D6 and D11 fixed: a retiring task decides to keep
/// its epoch, another actor's admission grows the tenure and clears the kept
/// epochs, then the epoch is kept; the actor's next task starts it under the
/// new tenure, so admission trusts it, and its instance serves an actor
/// another node took. Fixed by `kept_epoch_keeps_its_tenure`.
#[test]
fn d12_an_epoch_kept_across_the_tenure_growth_is_trusted() {
    let model = Placement::<2, 1> { kept_epoch_keeps_its_tenure: false, ..Placement::correct() };
    an_expired_owner_comes_back("D12: kept across the growth", model);
}

/// `model` lets an expired owner come back and serve a stale read: both
/// properties break.
fn an_expired_owner_comes_back(name: &str, model: Placement<2, 1>) {
    let checker = check(name, model, Some(&[NO_COMEBACK, NO_STALE_READ]));
    breaks(&checker, NO_COMEBACK);
    breaks(&checker, NO_STALE_READ);
}
