//! A deterministic simulation of the cluster's placement (docs/adr/0029,
//! docs/spec/cluster.md §2-§10). Three nodes drive `core::placement`'s
//! real decisions (a `Route` per request, the take, what a node holds,
//! its tenure) over a simulated store, network and clock, as the actors
//! crate's router, admission and actor task drive them:
//!
//! - every step of a node is a scheduled event, and a node may crash
//!   (losing everything it held) or pause (SIGSTOP: resuming exactly where
//!   it was, its heartbeat unwritten meanwhile) before any of them;
//! - hops are delayed, reordered, duplicated, or lost (the sender learns
//!   the connection broke; the hop may have run all the same);
//! - a store operation's answer may be lost after it took effect;
//! - each node's clock is off by a bounded drift;
//! - a node may drain.
//!
//! The store is the contract every store implements
//! (`storage/src/lib.rs`: `plan_take`, `ClusterStore::take`, `commit`'s
//! epoch check, `release`), checked on the real stores by the storage
//! conformance suite. Properties: at most one writer per actor per epoch;
//! no acknowledged write lost; a read misses no write acknowledged before
//! it began (an expired owner never serves again); ownership settles once
//! the faults stop; every request ends within its deadline (not counting
//! time its nodes spent paused). A failing seed is printed and replays
//! exactly: `SIM_SEED=<seed> cargo test -p wasmkeep-core --test
//! placement_simulation replay -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, NodeState};
use wasmkeep_core::placement::holding::{self, AtRetire, Tenure};
use wasmkeep_core::placement::take::{TakeBy, owned_elsewhere, take_by, taken_here, while_draining};
use wasmkeep_core::placement::{Entry, Hop, IfElsewhere, Members, Next, Note, Now, Route, Start};
use wasmkeep_core::{AppId, EventError, MailboxKey, RawAddress, Refusal};

const NODES: usize = 3;
const ACTORS: usize = 2;
const WAIT: Duration = Duration::from_secs(10);
const WAIT_MS: u64 = 10_000;
const BEAT_MS: u64 = 1_000;
const IDLE_MS: u64 = 3_000;
const DEADLINE_MS: u64 = 5_000;
/// Faults happen until then; then the cluster runs quiet and must settle.
const FAULTS_END_MS: u64 = 60_000;
const END_MS: u64 = 100_000;
const T0: u64 = 1_700_000_000_000;

/// What may go wrong, and how often (per mille).
#[derive(Debug, Clone, Copy)]
struct Faults {
    crash: u32,
    pause: u32,
    hop_lost: u32,
    hop_duplicated: u32,
    store_answer_lost: u32,
    drain: u32,
    /// The largest clock error of a node, either way (ms).
    drift_ms: u64,
}

const FAULTS: Faults =
    Faults { crash: 4, pause: 4, hop_lost: 30, hop_duplicated: 30, store_answer_lost: 20, drain: 1, drift_ms: 500 };

/// Which rule of the protocol a variant breaks, to show the simulation
/// can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Correct,
    /// A commit does not compare the epoch.
    NoFence,
    /// The tenure is not looked at before an event.
    NoTenure,
    /// A heartbeat's write does not look for the silence it ends (the
    /// tenure is looked at before events only).
    LazyTenure,
    /// A node takes actors while its own heartbeat is not current.
    TakeWhileSilent,
}

/// SplitMix64: small, seedable, the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }
}

// ---------------------------------------------------------------- store

/// An actor's row: its owner and epoch, and its value (the ids of the
/// writes it holds, a read-modify-write each).
#[derive(Debug, Clone, Default)]
struct Row {
    owner: String,
    epoch: i64,
    value: Vec<u64>,
}

#[derive(Debug, Default)]
struct Store {
    rows: BTreeMap<usize, Row>,
    /// Each node's last heartbeat: its sending time as its clock said, and
    /// whether it drains.
    beats: BTreeMap<String, (u64, bool)>,
    /// Every successful commit: (actor, epoch) → node.
    writers: BTreeMap<(usize, i64), String>,
    last_epoch: BTreeMap<usize, i64>,
}

enum Took {
    Owned(i64),
    Elsewhere(String),
}

impl Store {
    /// The compare-and-set (`plan_take`): no row, no owner, this node, or
    /// an owner whose heartbeat was sent before `dead_before`: taken, the
    /// epoch raised; else the owner.
    fn take(&mut self, actor: usize, node: &str, dead_before: u64) -> Took {
        let beats = &self.beats;
        let row = self.rows.entry(actor).or_default();
        let other = Some(row.owner.as_str()).filter(|o| !o.is_empty() && *o != node);
        if let Some(owner) = other
            && beats.get(owner).is_some_and(|(sent, _)| *sent >= dead_before)
        {
            return Took::Elsewhere(owner.to_owned());
        }
        row.epoch += 1;
        row.owner = node.to_owned();
        Took::Owned(row.epoch)
    }

    /// A commit under `epoch` (`check_epoch`): refused unless it is the row's.
    fn commit(&mut self, actor: usize, epoch: i64, node: &str, value: Vec<u64>, fence: bool) -> Result<(), String> {
        let row = self.rows.entry(actor).or_default();
        if fence && row.epoch != epoch {
            return Err("fenced".into());
        }
        row.value = value;
        // One writer per actor per epoch, epochs never going back.
        if let Some(writer) = self.writers.insert((actor, epoch), node.to_owned())
            && writer != node
        {
            return Err(format!("VIOLATION two writers under epoch {epoch} of actor {actor}: {writer} and {node}"));
        }
        let last = self.last_epoch.entry(actor).or_default();
        if epoch < *last {
            return Err(format!("VIOLATION actor {actor} committed under epoch {epoch} after {last}"));
        }
        *last = epoch;
        Ok(())
    }

    /// Gives the actor up if `epoch` is still its (`release`).
    fn release(&mut self, actor: usize, epoch: i64) {
        if let Some(row) = self.rows.get_mut(&actor).filter(|r| r.epoch == epoch) {
            row.owner.clear();
            row.epoch += 1;
        }
    }

    fn members(&self, me: &str) -> Members {
        let beats = self.beats.iter().map(|(node, (sent_ms, draining))| Heartbeat {
            node: node.clone(),
            version: "0.1.0".into(),
            public_addr: "127.0.0.1:1".into(),
            cluster_addr: "127.0.0.1:2".into(),
            started_ms: 0,
            sent_ms: *sent_ms,
            state: if *draining { NodeState::Draining } else { NodeState::Serving },
            resident: 0,
            pool: 0,
            sockets: 0,
            capabilities: Capabilities { take: !draining, ..Capabilities::OURS },
        });
        Members::new(me, WAIT, beats)
    }
}

// ---------------------------------------------------------------- nodes

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write(u64),
    Read,
}

/// One request as its client sees it.
#[derive(Debug, Clone)]
struct Request {
    actor: usize,
    kind: Kind,
    started: u64,
    deadline: u64,
    /// The nodes it passed through (their pauses do not count against its
    /// deadline).
    touched: BTreeSet<usize>,
    answered: Option<(u64, Result<Vec<u64>, String>)>,
}

/// Where a flight's answer goes: a node's hop (node, flight, hop).
type ReplyTo = (usize, u64, u64);

/// A request in a node's hands: its route, and where its answer goes.
struct Flight {
    req: usize,
    route: Route,
    /// Which look is current (an older scheduled look is stale).
    look: u64,
    /// Which hop is current.
    hop: u64,
    /// Whom to answer: the client (None), or a node's hop (node, flight,
    /// hop).
    reply_to: Option<ReplyTo>,
}

#[derive(Default)]
struct Resident {
    epoch: Option<i64>,
    tenure: u64,
    memory: Option<Vec<u64>>,
    queue: VecDeque<(u64 /*flight*/, IfElsewhere, u64 /*arrived*/)>,
    busy: bool,
    /// Bumped each time it runs an event: an idle retirement scheduled
    /// before is stale.
    activity: u64,
}

struct Node {
    id: String,
    up: bool,
    /// Its port is open: only once its first heartbeat is written
    /// (`serve` ends if that fails).
    serving: bool,
    incarnation: u64,
    paused_until: Option<u64>,
    drift: i64,
    written_ms: u64,
    tenure: Tenure,
    /// The tenure its kept epochs belong to (`NodeInner.tenure`).
    held_tenure: u64,
    view: Members,
    hints: BTreeMap<usize, String>,
    draining: Option<u64>,
    kept: BTreeMap<usize, i64>,
    actors: BTreeMap<usize, Resident>,
    flights: BTreeMap<u64, Flight>,
}

impl Node {
    fn new(i: usize, drift: i64) -> Self {
        let id = format!("n{i}");
        Node {
            view: Members::new(id.clone(), WAIT, []),
            id,
            up: true,
            serving: false,
            incarnation: 0,
            paused_until: None,
            drift,
            written_ms: 0,
            tenure: Tenure::default(),
            held_tenure: 0,
            hints: BTreeMap::new(),
            draining: None,
            kept: BTreeMap::new(),
            actors: BTreeMap::new(),
            flights: BTreeMap::new(),
        }
    }

    fn unix_ms(&self, t: u64) -> u64 {
        (T0 + t).saturating_add_signed(self.drift)
    }
}

// ---------------------------------------------------------------- the simulation

#[derive(Debug, Clone)]
enum Step {
    Beat,
    /// A client's request arrives at the node.
    Arrive {
        req: usize,
    },
    /// A hop arrives from `from`'s flight `flight` (its `hop`th send).
    HopIn {
        req: usize,
        from: usize,
        flight: u64,
        hop: u64,
    },
    /// A hop's answer arrives at the sender's flight (`hop`: which send).
    HopAnswer {
        flight: u64,
        hop: u64,
        answer: HopAnswer,
    },
    Look {
        flight: u64,
        look: u64,
    },
    /// The actor's next event, or its retirement once idle.
    Run {
        actor: usize,
    },
    Retire {
        actor: usize,
        activity: u64,
    },
    /// A store operation's answer reaches the actor's event.
    Admitted {
        actor: usize,
        flight: u64,
        ie: IfElsewhere,
        took: Result<Took, String>,
    },
    /// The event runs: it reads its value.
    Exec {
        actor: usize,
        flight: u64,
        epoch: i64,
    },
    /// A write's commit, under the epoch it read with.
    Commit {
        actor: usize,
        flight: u64,
        epoch: i64,
        value: Vec<u64>,
    },
    Committed {
        actor: usize,
        flight: u64,
        done: Result<Vec<u64>, String>,
    },
    Restart,
    Fault,
}

#[derive(Debug, Clone)]
enum HopAnswer {
    Answer(Result<Vec<u64>, String>),
    Elsewhere(String),
    Unreachable,
}

impl std::fmt::Debug for Took {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Took::Owned(e) => write!(f, "Owned({e})"),
            Took::Elsewhere(o) => write!(f, "Elsewhere({o})"),
        }
    }
}

impl Clone for Took {
    fn clone(&self) -> Self {
        match self {
            Took::Owned(e) => Took::Owned(*e),
            Took::Elsewhere(o) => Took::Elsewhere(o.clone()),
        }
    }
}

/// A scheduled step: at `at`, on node `node` of incarnation `inc`.
#[derive(Debug)]
struct Scheduled {
    at: u64,
    seq: u64,
    node: usize,
    inc: u64,
    step: Step,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Sim {
    rng: Rng,
    variant: Variant,
    faults: Faults,
    t: u64,
    base: Instant,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    store: Store,
    nodes: Vec<Node>,
    requests: Vec<Request>,
    /// Writes acknowledged to their clients: id → when.
    acked: BTreeMap<u64, u64>,
    /// Each node's pauses: (from, to).
    pauses: Vec<Vec<(u64, u64)>>,
    next_flight: u64,
    next_write: u64,
    violations: Vec<String>,
    log: Vec<String>,
    keep_log: bool,
    /// How often each interesting thing happened.
    stats: BTreeMap<&'static str, u64>,
}

fn key(actor: usize) -> MailboxKey {
    MailboxKey { app: AppId(1), address: RawAddress::split(&format!("counter/c{actor}")).unwrap() }
}

impl Sim {
    fn new(seed: u64, variant: Variant, faults: Faults) -> Self {
        let mut rng = Rng(seed);
        let nodes = (0..NODES)
            .map(|i| {
                let span = faults.drift_ms * 2 + 1;
                Node::new(i, rng.below(span) as i64 - faults.drift_ms as i64)
            })
            .collect();
        let mut sim = Sim {
            rng,
            variant,
            faults,
            t: 0,
            base: Instant::now(),
            seq: 0,
            queue: BinaryHeap::new(),
            store: Store::default(),
            nodes,
            requests: Vec::new(),
            acked: BTreeMap::new(),
            pauses: vec![Vec::new(); NODES],
            next_flight: 1,
            next_write: 1,
            violations: Vec::new(),
            log: Vec::new(),
            keep_log: false,
            stats: BTreeMap::new(),
        };
        for n in 0..NODES {
            let first = sim.rng.below(BEAT_MS);
            sim.at(first, n, Step::Beat);
        }
        sim.schedule_fault();
        // The clients: a request every ~250 ms, to a random node.
        let mut t = 1_500;
        while t < END_MS - 10_000 {
            let actor = sim.rng.below(ACTORS as u64) as usize;
            let kind = if sim.rng.chance(600) {
                sim.next_write += 1;
                Kind::Write(sim.next_write)
            } else {
                Kind::Read
            };
            sim.client(t, actor, kind);
            t += 1 + sim.rng.below(500);
        }
        sim
    }

    fn client(&mut self, t: u64, actor: usize, kind: Kind) -> usize {
        let node = self.rng.below(NODES as u64) as usize;
        let req = self.requests.len();
        self.requests.push(Request {
            actor,
            kind,
            started: t,
            deadline: t + DEADLINE_MS,
            touched: BTreeSet::from([node]),
            answered: None,
        });
        self.at(t - self.t.min(t), node, Step::Arrive { req });
        req
    }

    /// Schedules `step` on node `node`, `after` ms from now.
    fn at(&mut self, after: u64, node: usize, step: Step) {
        self.seq += 1;
        let inc = self.nodes[node].incarnation;
        self.queue.push(Scheduled { at: self.t + after, seq: self.seq, node, inc, step });
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    /// Whether a fault of this likelihood happens now (none once the
    /// faults end).
    fn fault_chance(&mut self, per_mille: u32) -> bool {
        self.t < FAULTS_END_MS && self.rng.chance(per_mille)
    }

    /// A step's small delay: the awaits between a node's steps.
    fn delay(&mut self) -> u64 {
        1 + self.rng.below(20)
    }

    fn now(&self, node: usize) -> Now {
        Now { at: self.base + Duration::from_millis(self.t), unix_ms: self.nodes[node].unix_ms(self.t) }
    }

    fn schedule_fault(&mut self) {
        let after = 200 + self.rng.below(400);
        self.at(after, 0, Step::Fault);
    }

    fn note(&mut self, node: usize, actor: usize, note: Note) {
        let hints = &mut self.nodes[node].hints;
        match note {
            Note::Keep => {}
            Note::Forget => {
                hints.remove(&actor);
            }
            Note::Owner(owner) => {
                hints.insert(actor, owner);
            }
        }
    }

    fn run(&mut self) {
        self.run_until(END_MS);
        self.check_end();
    }

    fn run_until(&mut self, end: u64) {
        while let Some(s) = self.queue.pop() {
            if s.at > end {
                self.queue.push(s);
                break;
            }
            self.t = s.at;
            let node = &self.nodes[s.node];
            let arriving = matches!(s.step, Step::Arrive { .. } | Step::HopIn { .. });
            if arriving && !(node.up && node.serving) {
                // Nothing listens: the connection is refused.
                match s.step {
                    Step::Arrive { req } => self.answer_client(req, Err("connection refused".into())),
                    Step::HopIn { from, flight, hop, .. } => {
                        self.seq += 1;
                        let inc = self.nodes[from].incarnation;
                        let answer = HopAnswer::Unreachable;
                        let step = Step::HopAnswer { flight, hop, answer };
                        self.queue.push(Scheduled { at: s.at + 1, seq: self.seq, node: from, inc, step });
                    }
                    _ => {}
                }
                continue;
            }
            let stale = node.incarnation != s.inc || !node.up;
            if stale && !arriving && !matches!(s.step, Step::Fault | Step::Restart) {
                // A crashed node's steps are gone (its clients were told).
                continue;
            }
            if let Some(until) = node.paused_until.filter(|u| *u > self.t && !matches!(s.step, Step::Fault)) {
                // Paused: the step waits until the node resumes.
                self.queue.push(Scheduled { at: until, ..s });
                continue;
            }
            if self.keep_log && !matches!(s.step, Step::Fault) {
                self.log.push(format!("{:>6} n{} {:?}", self.t, s.node, s.step));
            }
            self.step(s.node, s.step);
        }
    }

    fn step(&mut self, n: usize, step: Step) {
        match step {
            Step::Fault => self.fault(),
            Step::Restart => {
                let drift = self.nodes[n].drift;
                let inc = self.nodes[n].incarnation;
                self.nodes[n] = Node::new(n, drift);
                self.nodes[n].incarnation = inc + 1;
                self.at(1, n, Step::Beat);
            }
            Step::Beat => self.beat(n),
            Step::Arrive { req } => {
                let flight = self.flight(n, req, Entry::Request, None);
                self.start(n, flight);
            }
            Step::HopIn { req, from, flight: sender, hop } => {
                self.requests[req].touched.insert(n);
                let flight = self.flight(n, req, Entry::Hopped, Some((from, sender, hop)));
                self.start(n, flight);
            }
            Step::HopAnswer { flight, hop, answer } => {
                let Some(f) = self.nodes[n].flights.get_mut(&flight) else { return };
                if f.hop != hop {
                    return; // a duplicate's answer, or an older hop's
                }
                let decision = match answer {
                    HopAnswer::Answer(answer) => return self.finish(n, flight, answer),
                    HopAnswer::Elsewhere(owner) => Some(Hop::Elsewhere(owner)),
                    HopAnswer::Unreachable => Some(Hop::Unreachable),
                };
                let now = self.now(n);
                let node = &mut self.nodes[n];
                let f = node.flights.get_mut(&flight).unwrap();
                let d = f.route.hop(decision.unwrap(), now, &node.view);
                self.apply(n, flight, d);
            }
            Step::Look { flight, look } => {
                let now = self.now(n);
                let node = &mut self.nodes[n];
                let Some(f) = node.flights.get_mut(&flight).filter(|f| f.look == look) else { return };
                let d = f.route.look(now, &node.view);
                self.apply(n, flight, d);
            }
            Step::Run { actor } => self.run_actor(n, actor),
            Step::Retire { actor, activity } => self.retire(n, actor, activity),
            Step::Admitted { actor, flight, ie, took } => self.admitted(n, actor, flight, ie, took),
            Step::Exec { actor, flight, epoch } => self.exec(n, actor, flight, epoch),
            Step::Commit { actor, flight, epoch, value } => {
                let node_id = self.nodes[n].id.clone();
                let fence = self.variant != Variant::NoFence;
                let done = self.store.commit(actor, epoch, &node_id, value.clone(), fence).map(|()| value);
                let done = match done {
                    Ok(_) if self.fault_chance(self.faults.store_answer_lost) => {
                        Err("the commit's answer was lost".into())
                    }
                    done => done,
                };
                let d = self.delay();
                self.at(d, n, Step::Committed { actor, flight, done });
            }
            Step::Committed { actor, flight, done } => {
                let answer = match done {
                    Ok(value) => {
                        self.nodes[n].actors.get_mut(&actor).unwrap().memory = Some(value.clone());
                        Ok(value)
                    }
                    Err(e) => {
                        if e.starts_with("VIOLATION") {
                            self.violations.push(e.clone());
                        }
                        if e == "fenced" {
                            self.count("commit fenced");
                        }
                        // Fenced or failed: the epoch and memory go.
                        let r = self.nodes[n].actors.get_mut(&actor).unwrap();
                        r.epoch = None;
                        r.memory = None;
                        Err(e)
                    }
                };
                self.finish(n, flight, answer);
                self.next_event(n, actor);
            }
        }
    }

    fn fault(&mut self) {
        self.schedule_fault();
        if self.t >= FAULTS_END_MS {
            return;
        }
        let n = self.rng.below(NODES as u64) as usize;
        let f = self.faults;
        if self.nodes[n].up && self.nodes[n].paused_until.is_none() {
            if self.rng.chance(f.crash) {
                self.count("crash");
                self.crash(n);
            } else if self.rng.chance(f.pause) {
                let until = self.t + 500 + self.rng.below(2 * WAIT_MS);
                self.count("pause");
                self.nodes[n].paused_until = Some(until);
                self.pauses[n].push((self.t, until));
            } else if self.rng.chance(f.drain) && self.nodes.iter().filter(|n| n.up && n.draining.is_none()).count() > 1
            {
                self.count("drain");
                self.drain(n);
            }
        }
        if let Some(until) = self.nodes[n].paused_until
            && until <= self.t
        {
            self.nodes[n].paused_until = None;
        }
    }

    fn crash(&mut self, n: usize) {
        // Its clients lose their connections; hops it sent are forgotten.
        self.stop(n);
        let back = 500 + self.rng.below(5_000);
        self.at(back, n, Step::Restart);
    }

    /// The node's process ends: its clients lose their connections, and
    /// the nodes waiting on its hops learn it.
    fn stop(&mut self, n: usize) {
        let waiting: Vec<(Option<ReplyTo>, usize)> =
            self.nodes[n].flights.values().map(|f| (f.reply_to, f.req)).collect();
        for (reply_to, req) in waiting {
            match reply_to {
                None => self.answer_client(req, Err("connection lost".into())),
                Some((from, flight, hop)) => {
                    let d = 50 + self.rng.below(200);
                    self.at(d, from, Step::HopAnswer { flight, hop, answer: HopAnswer::Unreachable });
                }
            }
        }
        let node = &mut self.nodes[n];
        node.up = false;
        node.flights.clear();
        node.incarnation += 1;
    }

    fn drain(&mut self, n: usize) {
        let t = self.t;
        self.nodes[n].draining = Some(t);
        // Its kept epochs are released (`Node::drain`), once the awake
        // actors hibernated (they release theirs as they retire).
        let kept: Vec<(usize, i64)> = std::mem::take(&mut self.nodes[n].kept).into_iter().collect();
        for (actor, epoch) in kept {
            self.store.release(actor, epoch);
        }
    }

    fn beat(&mut self, n: usize) {
        self.at(BEAT_MS, n, Step::Beat);
        if self.nodes[n].draining.is_some_and(|since| self.t > since + 2_000) {
            // Drained: the process ends.
            return self.stop(n);
        }
        let now = self.nodes[n].unix_ms(self.t);
        // The beat looks for a silence before its write ends it.
        let node = &mut self.nodes[n];
        let before = node.tenure.last();
        if self.variant != Variant::LazyTenure && node.tenure.at(node.written_ms, now, WAIT) > before {
            self.count("a beat found its node silent too long");
        }
        let lost = self.fault_chance(self.faults.store_answer_lost);
        if !lost || self.rng.chance(500) {
            let draining = self.nodes[n].draining.is_some();
            self.store.beats.insert(self.nodes[n].id.clone(), (now, draining));
        }
        if lost {
            return; // failed, or written with its answer lost: written_ms stays
        }
        let node = &mut self.nodes[n];
        node.written_ms = now;
        node.serving = true;
        node.view = self.store.members(&node.id);
    }

    fn flight(&mut self, n: usize, req: usize, entry: Entry, reply_to: Option<ReplyTo>) -> u64 {
        let id = self.next_flight;
        self.next_flight += 1;
        let deadline = self.base + Duration::from_millis(self.requests[req].deadline);
        let route = Route::new(entry, deadline);
        self.nodes[n].flights.insert(id, Flight { req, route, look: 0, hop: 0, reply_to });
        id
    }

    fn start(&mut self, n: usize, flight: u64) {
        let now = self.now(n);
        let node = &mut self.nodes[n];
        let f = node.flights.get_mut(&flight).unwrap();
        let actor = self.requests[f.req].actor;
        let start = Start {
            resident: node.actors.contains_key(&actor),
            hint: node.hints.get(&actor).cloned(),
            draining: node.draining.is_some(),
        };
        let d = f.route.start(start, &key(actor), now, &node.view);
        self.apply(n, flight, d);
    }

    /// Does what a route decided.
    fn apply(&mut self, n: usize, flight: u64, d: wasmkeep_core::placement::Decision) {
        let f = self.nodes[n].flights.get_mut(&flight).unwrap();
        // A new decision: the looks scheduled before are old, and so is a
        // hop in flight unless the route still waits for it.
        f.look += 1;
        if d.next != Next::Wait {
            f.hop += 1;
        }
        let req = f.req;
        let actor = self.requests[req].actor;
        self.note(n, actor, d.note);
        match d.next {
            Next::RunHere(ie) => {
                let arrived = self.t;
                let r = self.nodes[n].actors.entry(actor).or_insert_with(|| {
                    // A new task: the epoch kept, under the tenure held.
                    Resident { epoch: None, tenure: 0, ..Resident::default() }
                });
                let fresh = r.queue.is_empty() && !r.busy && r.memory.is_none() && r.epoch.is_none();
                r.queue.push_back((flight, ie, arrived));
                if fresh {
                    let node = &mut self.nodes[n];
                    let kept = node.kept.remove(&actor);
                    let held = node.held_tenure;
                    let r = node.actors.get_mut(&actor).unwrap();
                    r.epoch = kept;
                    r.tenure = held;
                }
                if !self.nodes[n].actors[&actor].busy {
                    self.nodes[n].actors.get_mut(&actor).unwrap().busy = true;
                    let dl = self.delay();
                    self.at(dl, n, Step::Run { actor });
                }
            }
            Next::Send { to, reroute } => {
                if reroute {
                    self.count("reroute");
                }
                let to: usize = to[1..].parse().unwrap();
                let hop = self.nodes[n].flights[&flight].hop;
                self.look_later(n, flight);
                self.requests[req].touched.insert(to);
                let lost = self.fault_chance(self.faults.hop_lost);
                let arrives = !lost || self.rng.chance(500);
                let delay = 1 + self.rng.below(30);
                if lost {
                    self.count(if arrives { "hop ran, its answer lost" } else { "hop lost" });
                }
                if arrives {
                    self.at(delay, to, Step::HopIn { req, from: n, flight, hop });
                    if self.fault_chance(self.faults.hop_duplicated) {
                        self.count("hop duplicated");
                        let again = delay + self.rng.below(50);
                        self.at(again, to, Step::HopIn { req, from: n, flight, hop });
                    }
                }
                if lost {
                    // The connection broke: the sender learns it.
                    let after = 20 + self.rng.below(300);
                    self.at(after, n, Step::HopAnswer { flight, hop, answer: HopAnswer::Unreachable });
                }
            }
            Next::Confirm { .. } => unreachable!("only a hand-off confirms"),
            Next::Wait => self.look_later(n, flight),
            Next::Fail(e) => {
                let e = match e {
                    EventError::Refused(Refusal::Elsewhere { owner }) => return self.elsewhere(n, flight, owner),
                    e => e.to_string(),
                };
                self.finish(n, flight, Err(e));
            }
        }
    }

    fn look_later(&mut self, n: usize, flight: u64) {
        let f = &self.nodes[n].flights[&flight];
        let look = f.look;
        if let Some(at) = f.route.next_look() {
            let after = at.saturating_duration_since(self.base).as_millis() as u64;
            let after = after.saturating_sub(self.t).max(1);
            self.at(after, n, Step::Look { flight, look });
        }
    }

    /// A flight's end with "elsewhere": a hop's sender follows it; a
    /// client gets a 503.
    fn elsewhere(&mut self, n: usize, flight: u64, owner: String) {
        let Some(f) = self.nodes[n].flights.remove(&flight) else { return };
        match f.reply_to {
            Some((from, sender, hop)) => {
                let d = self.delay();
                self.at(d, from, Step::HopAnswer { flight: sender, hop, answer: HopAnswer::Elsewhere(owner) });
            }
            None => self.answer_client(f.req, Err("503 the actor is moving".into())),
        }
    }

    /// A flight's end with an answer.
    fn finish(&mut self, n: usize, flight: u64, answer: Result<Vec<u64>, String>) {
        let Some(f) = self.nodes[n].flights.remove(&flight) else { return };
        match f.reply_to {
            Some((from, sender, hop)) => {
                // The answer may be lost on the way back.
                let d = self.delay();
                let answer = if self.fault_chance(self.faults.hop_lost) {
                    HopAnswer::Unreachable
                } else {
                    HopAnswer::Answer(answer)
                };
                self.at(d, from, Step::HopAnswer { flight: sender, hop, answer });
            }
            None => self.answer_client(f.req, answer),
        }
    }

    fn answer_client(&mut self, req: usize, answer: Result<Vec<u64>, String>) {
        let r = &mut self.requests[req];
        if r.answered.is_some() {
            return;
        }
        if let (Kind::Write(id), Ok(_)) = (r.kind, &answer) {
            self.acked.insert(id, self.t);
        }
        r.answered = Some((self.t, answer));
    }

    // ------------------------------------------------------------ the actor's task

    fn run_actor(&mut self, n: usize, actor: usize) {
        let now = self.now(n);
        let Some((flight, ie, arrived)) = self.nodes[n].actors.get_mut(&actor).and_then(|r| r.queue.pop_front()) else {
            return self.idle(n, actor);
        };
        if !self.nodes[n].flights.contains_key(&flight) {
            return self.next_event(n, actor);
        }
        self.nodes[n].actors.get_mut(&actor).unwrap().activity += 1;
        let node = &mut self.nodes[n];
        // An event that arrived once the drain began gives its actor up.
        if holding::gives_up(
            self.base + Duration::from_millis(arrived),
            node.draining.map(|s| self.base + Duration::from_millis(s)),
        ) && let Some(epoch) = node.actors.get_mut(&actor).and_then(|r| r.epoch.take())
        {
            node.actors.get_mut(&actor).unwrap().memory = None;
            self.store.release(actor, epoch);
        }
        // Admission: the deadline, then the tenure, then the take.
        let req = node.flights[&flight].req;
        if self.t >= self.requests[req].deadline {
            self.finish(n, flight, Err(Refusal::DeadlinePassed.to_string()));
            return self.next_event(n, actor);
        }
        let node = &mut self.nodes[n];
        if self.variant != Variant::NoTenure {
            let tenure = node.tenure.at(node.written_ms, now.unix_ms, WAIT);
            if tenure > node.held_tenure {
                node.held_tenure = tenure;
                node.kept.clear();
                *self.stats.entry("epochs dropped: tenure grew").or_default() += 1;
            }
            let r = node.actors.get_mut(&actor).unwrap();
            if !holding::still_holds(r.tenure, tenure) {
                r.epoch = None;
                r.memory = None;
                r.tenure = tenure;
            }
        }
        let r = &node.actors[&actor];
        if let Some(epoch) = r.epoch {
            let d = self.delay();
            return self.at(d, n, Step::Admitted { actor, flight, ie, took: Ok(Took::Owned(epoch)) });
        }
        let current =
            self.variant == Variant::TakeWhileSilent || holding::is_current(node.written_ms, now.unix_ms, WAIT);
        let took = match take_by(node.draining.is_some(), current, &node.view, now.unix_ms) {
            TakeBy::Wake => unreachable!("a cluster node"),
            TakeBy::NotCurrent => Err("this node's heartbeat is not current".into()),
            TakeBy::AskOwner => {
                let owner = self.store.rows.get(&actor).map(|r| r.owner.clone()).filter(|o| !o.is_empty());
                let (note, refusal) = while_draining(owner.as_deref(), &key(actor), &node.view, now.unix_ms);
                self.note(n, actor, note);
                match refusal {
                    Refusal::Elsewhere { owner } => Ok(Took::Elsewhere(owner)),
                    other => Err(other.to_string()),
                }
            }
            TakeBy::CompareAndSet { dead_before_ms } => {
                let id = node.id.clone();
                let took = self.store.take(actor, &id, dead_before_ms);
                if self.fault_chance(self.faults.store_answer_lost) {
                    Err("the store's answer was lost".into())
                } else {
                    Ok(took)
                }
            }
        };
        let d = self.delay();
        self.at(d, n, Step::Admitted { actor, flight, ie, took });
    }

    fn admitted(&mut self, n: usize, actor: usize, flight: u64, ie: IfElsewhere, took: Result<Took, String>) {
        if !self.nodes[n].flights.contains_key(&flight) {
            return self.next_event(n, actor);
        }
        let epoch = match took {
            Ok(Took::Owned(epoch)) => {
                if epoch > 1 && self.nodes[n].actors[&actor].epoch.is_none() {
                    self.count("taken from another owner, or again");
                }
                if self.nodes[n].actors[&actor].epoch.is_none() {
                    self.note(n, actor, taken_here());
                }
                epoch
            }
            Ok(Took::Elsewhere(owner)) => {
                self.count(if ie == IfElsewhere::HandBack { "handed back" } else { "answered elsewhere" });
                let (note, _) = owned_elsewhere(owner.clone());
                self.note(n, actor, note);
                if ie == IfElsewhere::HandBack {
                    // Handed back to its route, which sends it on.
                    let now = self.now(n);
                    let node = &mut self.nodes[n];
                    let f = node.flights.get_mut(&flight).unwrap();
                    let d = f.route.ran_elsewhere(owner, now, &node.view);
                    self.apply(n, flight, d);
                } else {
                    self.elsewhere(n, flight, owner);
                }
                return self.next_event(n, actor);
            }
            Err(e) => {
                self.finish(n, flight, Err(e));
                return self.next_event(n, actor);
            }
        };
        self.nodes[n].actors.get_mut(&actor).unwrap().epoch = Some(epoch);
        let d = self.delay();
        self.at(d, n, Step::Exec { actor, flight, epoch });
    }

    /// The event reads its value: from memory when resident, else from the
    /// store; a write then commits it, a read answers it.
    fn exec(&mut self, n: usize, actor: usize, flight: u64, epoch: i64) {
        if !self.nodes[n].flights.contains_key(&flight) {
            return self.next_event(n, actor);
        }
        let r = self.nodes[n].actors.get_mut(&actor).unwrap();
        let value = match &r.memory {
            Some(memory) => memory.clone(),
            None => {
                let v = self.store.rows.get(&actor).map(|r| r.value.clone()).unwrap_or_default();
                r.memory = Some(v.clone());
                v
            }
        };
        let req = self.nodes[n].flights[&flight].req;
        let d = self.delay();
        match self.requests[req].kind {
            Kind::Read => self.at(d, n, Step::Committed { actor, flight, done: Ok(value) }),
            Kind::Write(id) => {
                let mut value = value;
                value.push(id);
                self.at(d, n, Step::Commit { actor, flight, epoch, value });
            }
        }
    }

    fn next_event(&mut self, n: usize, actor: usize) {
        let d = self.delay();
        self.at(d, n, Step::Run { actor });
    }

    fn idle(&mut self, n: usize, actor: usize) {
        let Some(r) = self.nodes[n].actors.get_mut(&actor) else { return };
        r.busy = false;
        let activity = r.activity;
        // A draining node's actors hibernate at once.
        let after = if self.nodes[n].draining.is_some() { 1 } else { IDLE_MS };
        self.at(after, n, Step::Retire { actor, activity });
    }

    fn retire(&mut self, n: usize, actor: usize, activity: u64) {
        let node = &mut self.nodes[n];
        let Some(r) = node.actors.get(&actor) else { return };
        if r.activity != activity || r.busy || !r.queue.is_empty() {
            return;
        }
        let r = node.actors.remove(&actor).unwrap();
        let Some(epoch) = r.epoch else { return };
        match holding::at_retire(r.tenure, node.held_tenure, node.draining.is_some()) {
            AtRetire::Keep => {
                node.kept.insert(actor, epoch);
            }
            AtRetire::Release => self.store.release(actor, epoch),
            AtRetire::Drop => {}
        }
    }

    // ------------------------------------------------------------ properties

    fn check_end(&mut self) {
        // No acknowledged write lost.
        for (actor, row) in &self.store.rows {
            let held: BTreeSet<u64> = row.value.iter().copied().collect();
            for r in &self.requests {
                if let (Kind::Write(id), true) = (r.kind, r.actor == *actor)
                    && self.acked.contains_key(&id)
                    && !held.contains(&id)
                {
                    self.violations.push(format!("VIOLATION acknowledged write {id} of actor {actor} lost"));
                }
            }
        }
        for (i, r) in self.requests.iter().enumerate() {
            // A read misses no write acknowledged before it began.
            if let (Kind::Read, Some((_, Ok(value)))) = (r.kind, &r.answered) {
                for other in &self.requests {
                    if let Kind::Write(id) = other.kind
                        && other.actor == r.actor
                        && self.acked.get(&id).is_some_and(|at| *at < r.started)
                        && !value.contains(&id)
                    {
                        self.violations.push(format!(
                            "VIOLATION read {i} (at {}) of actor {} missed write {id} acknowledged at {}",
                            r.started, r.actor, self.acked[&id]
                        ));
                    }
                }
            }
            // Every request ends within its deadline (its nodes' pauses
            // aside, and the event that started in time let finish).
            let paused: u64 = r
                .touched
                .iter()
                .flat_map(|n| &self.pauses[*n])
                .map(|(from, to)| to.min(&(r.deadline + 60_000)).saturating_sub(*from.max(&r.started)))
                .sum();
            let limit = r.deadline + 1_000 + paused;
            match &r.answered {
                Some((at, _)) if *at > limit => self.violations.push(format!(
                    "VIOLATION request {i} answered at {at}, past its deadline {} (+{paused} ms paused)",
                    r.deadline
                )),
                None if self.t > limit => {
                    self.violations.push(format!("VIOLATION request {i} never answered (deadline {})", r.deadline))
                }
                _ => {}
            }
        }
    }
}

/// After the faults: every live node writes to every actor, and each
/// write succeeds (ownership settled; no node stuck refusing).
fn settles(sim: &mut Sim) {
    let t = END_MS - 5_000;
    sim.run_until(t - 1);
    let mut asked = Vec::new();
    for n in 0..NODES {
        if !sim.nodes[n].up || sim.nodes[n].draining.is_some() {
            continue;
        }
        for actor in 0..ACTORS {
            sim.next_write += 1;
            let req = sim.requests.len();
            sim.requests.push(Request {
                actor,
                kind: Kind::Write(sim.next_write),
                started: t,
                deadline: t + DEADLINE_MS,
                touched: BTreeSet::from([n]),
                answered: None,
            });
            sim.seq += 1;
            let inc = sim.nodes[n].incarnation;
            sim.queue.push(Scheduled { at: t, seq: sim.seq, node: n, inc, step: Step::Arrive { req } });
            asked.push(req);
        }
    }
    sim.run();
    for req in asked {
        match &sim.requests[req].answered {
            Some((_, Ok(_))) => {}
            other => sim.violations.push(format!("VIOLATION after the faults, request {req} got {other:?}")),
        }
    }
}

/// One seed's run: its violations.
fn simulate(seed: u64, variant: Variant, faults: Faults, log: bool) -> (Vec<String>, Vec<String>) {
    let (violations, log, _) = simulate_counting(seed, variant, faults, log);
    (violations, log)
}

fn simulate_counting(
    seed: u64,
    variant: Variant,
    faults: Faults,
    log: bool,
) -> (Vec<String>, Vec<String>, BTreeMap<&'static str, u64>) {
    let mut sim = Sim::new(seed, variant, faults);
    sim.keep_log = log;
    settles(&mut sim);
    for r in &sim.requests {
        let what = match &r.answered {
            Some((_, Ok(_))) => "request answered",
            Some((_, Err(e))) if e.contains("deadline") => "request past its deadline",
            Some((_, Err(e))) if e.starts_with("503") => "request answered 503 elsewhere",
            Some(_) => "request failed otherwise",
            None => "request unanswered",
        };
        *sim.stats.entry(what).or_default() += 1;
    }
    (sim.violations, sim.log, sim.stats)
}

fn seeds(default: u64) -> u64 {
    std::env::var("SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn run_seeds(count: u64, variant: Variant) -> Option<(u64, Vec<String>)> {
    (0..count).find_map(|seed| {
        let (violations, _) = simulate(seed, variant, FAULTS, false);
        (!violations.is_empty()).then_some((seed, violations))
    })
}

#[test]
fn thousands_of_seeds_keep_every_property() {
    let count = seeds(1_000);
    let mut stats = BTreeMap::<&str, u64>::new();
    for seed in 0..count {
        let (violations, _, counted) = simulate_counting(seed, Variant::Correct, FAULTS, false);
        assert!(
            violations.is_empty(),
            "seed {seed} broke a property (replay: SIM_SEED={seed} cargo test -p wasmkeep-core --test \
             placement_simulation replay -- --nocapture):\n{}",
            violations.join("\n")
        );
        for (what, n) in counted {
            *stats.entry(what).or_default() += n;
        }
    }
    eprintln!("{count} seeds, every property kept: {stats:#?}");
    // The faults and the windows they open were reached.
    for what in [
        "crash",
        "pause",
        "drain",
        "hop lost",
        "hop ran, its answer lost",
        "hop duplicated",
        "reroute",
        "handed back",
        "answered elsewhere",
        "commit fenced",
        "taken from another owner, or again",
        "epochs dropped: tenure grew",
        "a beat found its node silent too long",
        "request past its deadline",
    ] {
        assert!(stats.get(what).is_some_and(|n| *n > 0), "{what} never happened: {stats:#?}");
    }
}

/// The long run: `SIM_SEEDS=1000000 cargo test --release -p wasmkeep-core
/// --test placement_simulation -- --ignored` (recorded in
/// loadtest/RESULTS.md).
#[test]
#[ignore = "the long run"]
fn the_long_run() {
    let count = seeds(1_000_000);
    let started = std::time::Instant::now();
    if let Some((seed, violations)) = run_seeds(count, Variant::Correct) {
        panic!("seed {seed}:\n{}", violations.join("\n"));
    }
    eprintln!("{count} seeds, every property kept, in {:?}", started.elapsed());
}

/// Replays one seed with its steps printed.
#[test]
fn replay() {
    let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else { return };
    let (violations, log) = simulate(seed, Variant::Correct, FAULTS, true);
    for line in log {
        eprintln!("{line}");
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn a_seed_replays_exactly() {
    let (a, log_a) = simulate(7, Variant::Correct, FAULTS, true);
    let (b, log_b) = simulate(7, Variant::Correct, FAULTS, true);
    assert_eq!(a, b);
    assert!(log_a.len() > 1_000, "{} steps", log_a.len());
    assert_eq!(log_a, log_b, "the same seed, the same steps");
}

/// The simulation can fail: with a rule of the protocol broken, some seed
/// shows it.
#[test]
fn a_commit_without_the_epoch_check_is_caught() {
    let (seed, violations) = run_seeds(2_000, Variant::NoFence).expect("a seed that shows it");
    eprintln!("seed {seed}: {violations:?}");
    assert!(violations.iter().all(|v| v.starts_with("VIOLATION")), "{violations:?}");
}

#[test]
fn an_event_that_ignores_the_tenure_is_caught() {
    let (seed, violations) = run_seeds(2_000, Variant::NoTenure).expect("a seed that shows it");
    eprintln!("seed {seed}: {violations:?}");
    assert!(violations.iter().any(|v| v.contains("missed")), "{violations:?}");
}

/// A node trusts its own silence for three quarters of the failover wait
/// only: clocks that differ by more than the quarter left let another
/// node take an actor that a paused node still serves from memory, and
/// the simulation sees it.
#[test]
fn clocks_further_apart_than_the_margin_are_caught() {
    let faults = Faults { drift_ms: 3_000, pause: 150, crash: 0, drain: 0, ..FAULTS };
    caught_missing_a_write(Variant::Correct, faults);
}

/// A heartbeat that ends a silence must look for it first: a node paused
/// past the wait whose first act is its beat would otherwise serve from
/// memory an actor another node took.
#[test]
fn a_beat_that_ends_a_silence_unasked_is_caught() {
    let faults = Faults { pause: 150, crash: 0, drain: 0, ..FAULTS };
    caught_missing_a_write(Variant::LazyTenure, faults);
}

/// A node whose own heartbeat is not current takes no actor: one that
/// counted its silence and took an actor before its next beat would trust
/// that epoch past the silence, while another node takes the actor too.
#[test]
fn a_take_while_silent_is_caught() {
    let faults = Faults { pause: 400, crash: 0, drain: 0, ..FAULTS };
    caught_missing_a_write(Variant::TakeWhileSilent, faults);
}

/// Some seed of the first 3,000 shows `variant` under `faults` letting a
/// read miss an acknowledged write.
fn caught_missing_a_write(variant: Variant, faults: Faults) {
    let found = (0..3_000).find_map(|seed| {
        let (violations, _) = simulate(seed, variant, faults, false);
        (!violations.is_empty()).then_some((seed, violations))
    });
    let (seed, violations) = found.expect("a seed that shows it");
    eprintln!("seed {seed}: {violations:?}");
    assert!(violations.iter().any(|v| v.contains("missed")), "{violations:?}");
}
