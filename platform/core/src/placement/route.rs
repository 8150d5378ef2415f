//! One event's way to its actor (docs/spec/request-path.md §4,
//! docs/spec/cluster.md §6): whether it runs here or goes to the node that
//! owns its actor, how an owner's "it is elsewhere" is followed, and how
//! long an owner that does not answer is waited for.
//!
//! A [`Route`] is driven by its caller: it is given what happened (the
//! event arrived, the actor's task here found another owner, a hop failed,
//! time passed) and answers what to do next ([`Next`]) and what to note of
//! the actor's owner ([`Note`]). It does no I/O and reads no clock.

use std::time::{Duration, Instant};

use super::{Members, Note, Now};
use crate::{EventError, MailboxKey, Refusal};

/// How many times one event follows an owner's "it is elsewhere".
pub const REROUTES: u8 = 3;

/// How often the liveness of an owner that has not answered is looked at
/// again (the first time one of these after the hop was sent).
pub const RECHECK: Duration = Duration::from_millis(250);

/// Where an event entered this node, which decides what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A request event: a client's at `/actor/`, or an actor's call.
    Request,
    /// A request event another node sent here: it runs here or is
    /// answered "elsewhere", never sent on (its sender follows).
    Hopped,
    /// A socket's open: an `/actor/` upgrade, or a front's hand-off
    /// (`handoff`), relayed only to an owner that announces hand-offs.
    Open { handoff: bool },
    /// A socket's open another node relayed here: never relayed on, and
    /// refused while this node drains.
    Relayed,
    /// A socket's message or close: it runs where its socket is, here.
    Traffic,
    /// The control plane's delete: it runs here (an actor another node
    /// owns is answered "elsewhere").
    Delete,
}

/// What the node knows of the event's actor when the event arrives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Start {
    /// The actor is awake here: it is this node's.
    pub resident: bool,
    /// The node this one last heard owns the actor (a guess: it is checked
    /// for liveness here).
    pub hint: Option<String>,
    /// This node drains: it takes no actor.
    pub draining: bool,
}

/// What the actor's task here does when admission finds that another node
/// owns the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfElsewhere {
    /// Give the event back to the route ([`Route::ran_elsewhere`]), which
    /// sends it to that owner.
    HandBack,
    /// Answer [`Refusal::Elsewhere`]: the event was sent once already, or
    /// came from another node, or never travels.
    Answer,
}

/// What the route's driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Queue the event in the actor's mailbox here.
    RunHere(IfElsewhere),
    /// Send the event to node `to` (a hop, or a socket's relay);
    /// `reroute`: following an owner's "elsewhere". Its outcome goes to
    /// [`Route::hop`]; at [`Route::next_look`] meanwhile, [`Route::look`].
    Send { to: String, reroute: bool },
    /// Before sending a hand-off to `to`: read the members afresh if they
    /// do not know `to` alive, then [`Route::confirmed`].
    Confirm { to: String, reroute: bool },
    /// Nothing until [`Route::next_look`] (or the hop in flight answers).
    Wait,
    /// The event ends with this error.
    Fail(EventError),
}

/// What a route decided: what to note of the actor's owner, then what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub note: Note,
    pub next: Next,
}

impl Decision {
    fn just(next: Next) -> Self {
        Self { note: Note::Keep, next }
    }
}

/// Why a hop brought no answer of the owner's actor (an answer, even an
/// error of the owner's host, ends the event and is not the route's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hop {
    /// The node does not own the actor; this one does, as far as it knows
    /// (empty: none).
    Elsewhere(String),
    /// The node could not be reached, or stopped answering mid-way.
    Unreachable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Arriving,
    /// Queued here.
    Here(IfElsewhere),
    /// A hop to `to` is on its way (`reroute`: following an owner's
    /// "elsewhere"); its owner's liveness is looked at at `look_at`.
    Sent {
        to: String,
        reroute: bool,
        look_at: Instant,
    },
    /// `on` did not answer: waiting for its heartbeat to age out.
    Waiting {
        on: String,
        look_at: Instant,
    },
    Done,
}

/// One event's route. See the module's documentation.
#[derive(Debug, Clone)]
pub struct Route {
    entry: Entry,
    deadline: Instant,
    reroutes: u8,
    phase: Phase,
}

impl Route {
    /// The route of an event that entered as `entry`, whose caller waits
    /// until `deadline`.
    pub fn new(entry: Entry, deadline: Instant) -> Self {
        Self { entry, deadline, reroutes: 0, phase: Phase::Arriving }
    }

    /// The first decision, as the event arrives.
    pub fn start(&mut self, start: Start, actor: &MailboxKey, now: Now, members: &Members) -> Decision {
        // A guess of the hints counts only for another node, alive now.
        let hint = start.hint.filter(|h| h != members.me() && members.is_alive(h, now.unix_ms));
        match self.entry {
            Entry::Request => match hint.filter(|_| !start.resident) {
                // Draining is admission's: an actor's owner is asked there.
                Some(owner) => self.send(owner, false, now),
                None => self.here(IfElsewhere::HandBack),
            },
            Entry::Open { .. } => {
                let mut owner = hint.filter(|_| !start.resident);
                // A node alone has nowhere else to open it.
                if start.draining && members.is_clustered() {
                    // No socket opens on a draining node: it goes to the
                    // actor's next owner, or the client retries.
                    owner = owner.or_else(|| members.successor(actor, now.unix_ms));
                    if owner.is_none() {
                        return self.fail(EventError::ShuttingDown);
                    }
                }
                match owner {
                    Some(owner) => self.send(owner, false, now),
                    None => self.here(IfElsewhere::HandBack),
                }
            }
            Entry::Relayed if start.draining => self.fail(EventError::ShuttingDown),
            Entry::Hopped | Entry::Relayed | Entry::Traffic | Entry::Delete => self.here(IfElsewhere::Answer),
        }
    }

    /// The actor's task here found that node `owner` owns the actor (and
    /// admission noted it): the event goes there, once.
    pub fn ran_elsewhere(&mut self, owner: String, now: Now, members: &Members) -> Decision {
        match self.phase {
            Phase::Here(IfElsewhere::HandBack) if !owner.is_empty() && owner != members.me() => {
                self.send(owner, false, now)
            }
            _ => self.fail(Refusal::Elsewhere { owner }.into()),
        }
    }

    /// Whether the hand-off may go to the node [`Next::Confirm`] named: only
    /// to one that announces it takes them; otherwise the actor is moving,
    /// and the client retries (the owner was sent nothing).
    pub fn confirmed(&mut self, now: Now, members: &Members) -> Decision {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Sent { to, reroute, .. } if self.entry == (Entry::Open { handoff: true }) => {
                if members.takes_handoffs(&to, now.unix_ms) {
                    // Sent now: its first look is one recheck from now.
                    self.phase = Phase::Sent { to: to.clone(), reroute, look_at: now.at + RECHECK };
                    Decision::just(Next::Send { to, reroute })
                } else {
                    self.fail(Refusal::Elsewhere { owner: to }.into())
                }
            }
            // Nothing was to be confirmed: a driver's bug, and the event ends.
            _ => self.fail(EventError::ShuttingDown),
        }
    }

    /// The hop sent to the owner brought no answer of its actor.
    pub fn hop(&mut self, outcome: Hop, now: Now, members: &Members) -> Decision {
        let Phase::Sent { to, .. } = std::mem::replace(&mut self.phase, Phase::Done) else {
            return self.fail(EventError::ShuttingDown);
        };
        match outcome {
            // The owner gave it up, to this node (it drains): the store
            // decides here.
            Hop::Elsewhere(next) if next == members.me() => self.came_back(),
            Hop::Elsewhere(next) if self.reroutes < REROUTES && next != to && !next.is_empty() => {
                self.reroutes += 1;
                let mut decision = self.send(next.clone(), true, now);
                decision.note = Note::Owner(next);
                decision
            }
            // The owners disagree, or none is left: the store decides here.
            Hop::Elsewhere(_) => self.came_back(),
            Hop::Unreachable => self.unreachable(to, now, members),
        }
    }

    /// When the driver is to call [`Route::look`] next: while a hop is on
    /// its way, or while an owner that did not answer is waited for.
    pub fn next_look(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Sent { look_at, .. } | Phase::Waiting { look_at, .. } => Some(*look_at),
            _ => None,
        }
    }

    /// Time passed ([`Route::next_look`]): an owner found dead while its
    /// hop is on its way will never answer (a node that takes the actor
    /// fences any late commit of the dead one's), and one waited for is
    /// waited for until it dies or the deadline passes.
    pub fn look(&mut self, now: Now, members: &Members) -> Decision {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Sent { to, reroute, .. } if members.is_alive(&to, now.unix_ms) => {
                self.phase = Phase::Sent { to, reroute, look_at: now.at + RECHECK };
                Decision::just(Next::Wait)
            }
            Phase::Sent { to, .. } | Phase::Waiting { on: to, .. } => self.unreachable(to, now, members),
            // Nothing was to be looked at: a driver's bug, and the event ends.
            _ => self.fail(EventError::ShuttingDown),
        }
    }

    fn unreachable(&mut self, owner: String, now: Now, members: &Members) -> Decision {
        // The deadline is looked at first: an event past it never starts.
        if now.at >= self.deadline {
            return self.fail(Refusal::DeadlinePassed.into());
        }
        if !members.is_alive(&owner, now.unix_ms) {
            // The owner died: its actor is taken here.
            return self.came_back();
        }
        let look_at = (now.at + RECHECK).min(self.deadline);
        self.phase = Phase::Waiting { on: owner, look_at };
        Decision::just(Next::Wait)
    }

    /// The event runs here after all, and is never sent on again.
    fn came_back(&mut self) -> Decision {
        self.phase = Phase::Here(IfElsewhere::Answer);
        Decision { note: Note::Forget, next: Next::RunHere(IfElsewhere::Answer) }
    }

    fn here(&mut self, if_elsewhere: IfElsewhere) -> Decision {
        self.phase = Phase::Here(if_elsewhere);
        Decision::just(Next::RunHere(if_elsewhere))
    }

    fn send(&mut self, to: String, reroute: bool, now: Now) -> Decision {
        self.phase = Phase::Sent { to: to.clone(), reroute, look_at: now.at + RECHECK };
        Decision::just(match self.entry {
            Entry::Open { handoff: true } => Next::Confirm { to, reroute },
            _ => Next::Send { to, reroute },
        })
    }

    fn fail(&mut self, error: EventError) -> Decision {
        self.phase = Phase::Done;
        Decision::just(Next::Fail(error))
    }
}

#[cfg(test)]
mod tests {
    use super::super::members::tests::{WAIT, beat, key};
    use super::*;

    const NOW_MS: u64 = 1_000_000;

    /// Members seen from `a`: `b`, `c`, `d` alive (`d` takes no hand-offs),
    /// `dead` dead.
    fn members() -> Members {
        let mut d = beat("d", NOW_MS);
        d.capabilities.handoff = false;
        Members::new("a", WAIT, [beat("a", NOW_MS), beat("b", NOW_MS), beat("c", NOW_MS), d, beat("dead", 0)])
    }

    fn alone() -> Members {
        Members::new("a", WAIT, [beat("a", NOW_MS)])
    }

    struct Clock {
        start: Instant,
    }

    impl Clock {
        fn new() -> Self {
            Self { start: Instant::now() }
        }
        /// `ms` after the start (wall and monotonic move together here).
        fn at(&self, ms: u64) -> Now {
            Now { at: self.start + Duration::from_millis(ms), unix_ms: NOW_MS + ms }
        }
        fn deadline(&self, ms: u64) -> Instant {
            self.start + Duration::from_millis(ms)
        }
    }

    fn start(resident: bool, hint: Option<&str>, draining: bool) -> Start {
        Start { resident, hint: hint.map(str::to_owned), draining }
    }

    fn run(entry: Entry, s: Start) -> Decision {
        let clock = Clock::new();
        Route::new(entry, clock.deadline(5_000)).start(s, &key("x"), clock.at(0), &members())
    }

    fn next(next: Next) -> Decision {
        Decision { note: Note::Keep, next }
    }

    fn send(to: &str) -> Next {
        Next::Send { to: to.into(), reroute: false }
    }

    const HERE: Next = Next::RunHere(IfElsewhere::HandBack);
    const ANSWER_HERE: Next = Next::RunHere(IfElsewhere::Answer);

    fn elsewhere(owner: &str) -> Next {
        Next::Fail(Refusal::Elsewhere { owner: owner.into() }.into())
    }

    #[test]
    fn a_request_goes_to_a_live_other_hinted_owner_unless_its_actor_is_awake_here() {
        assert_eq!(run(Entry::Request, start(false, Some("b"), false)), next(send("b")));
        assert_eq!(run(Entry::Request, start(true, Some("b"), false)), next(HERE), "awake here: this node's");
        assert_eq!(run(Entry::Request, start(false, Some("dead"), false)), next(HERE));
        assert_eq!(run(Entry::Request, start(false, Some("a"), false)), next(HERE), "a hint of this node");
        assert_eq!(run(Entry::Request, start(false, Some("nobody"), false)), next(HERE));
        assert_eq!(run(Entry::Request, start(false, None, false)), next(HERE));
        // Draining is admission's to act on (it asks the store's owner).
        assert_eq!(run(Entry::Request, start(false, None, true)), next(HERE));
        assert_eq!(run(Entry::Request, start(false, Some("b"), true)), next(send("b")));
    }

    #[test]
    fn what_came_from_another_node_and_a_sockets_traffic_and_a_delete_run_here() {
        for entry in [Entry::Hopped, Entry::Traffic, Entry::Delete] {
            for s in [start(false, Some("b"), false), start(false, Some("b"), true), start(true, None, true)] {
                assert_eq!(run(entry, s), next(ANSWER_HERE), "{entry:?}");
            }
        }
        assert_eq!(run(Entry::Relayed, start(false, Some("b"), false)), next(ANSWER_HERE));
        assert_eq!(run(Entry::Relayed, start(false, None, true)), next(Next::Fail(EventError::ShuttingDown)));
    }

    #[test]
    fn a_socket_open_goes_to_the_hinted_owner_or_while_draining_the_successor() {
        let open = Entry::Open { handoff: false };
        assert_eq!(run(open, start(false, Some("b"), false)), next(send("b")));
        assert_eq!(run(open, start(true, Some("b"), false)), next(HERE));
        assert_eq!(run(open, start(false, None, false)), next(HERE));
        // Draining: the hint, else the successor (one of the live takers).
        assert_eq!(run(open, start(false, Some("c"), true)), next(send("c")));
        let successor = members().successor(&key("x"), NOW_MS).unwrap();
        assert_eq!(run(open, start(false, None, true)), next(send(&successor)));
        assert_eq!(run(open, start(true, Some("c"), true)), next(send(&successor)), "awake here, yet it drains");
        let clock = Clock::new();
        let mut route = Route::new(open, clock.deadline(5_000));
        let refused = route.start(start(false, None, true), &key("x"), clock.at(0), &alone());
        assert_eq!(refused, next(Next::Fail(EventError::ShuttingDown)), "no other node takes actors");
        let mut route = Route::new(open, clock.deadline(5_000));
        let d = route.start(start(false, None, true), &key("x"), clock.at(0), &Members::alone("a"));
        assert_eq!(d, next(HERE), "a node alone opens its sockets itself");
    }

    #[test]
    fn a_handoff_goes_only_to_an_owner_that_takes_them() {
        let clock = Clock::new();
        let handoff = Entry::Open { handoff: true };
        let mut route = Route::new(handoff, clock.deadline(5_000));
        let d = route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        assert_eq!(d, next(Next::Confirm { to: "b".into(), reroute: false }));
        assert_eq!(route.confirmed(clock.at(1), &members()), next(send("b")));

        let mut route = Route::new(handoff, clock.deadline(5_000));
        route.start(start(false, Some("d"), false), &key("x"), clock.at(0), &members());
        assert_eq!(route.confirmed(clock.at(1), &members()), next(elsewhere("d")), "d announces no hand-offs");
        assert_eq!(route.next_look(), None, "nothing was sent");

        // A reroute is confirmed too, and stays a reroute.
        let mut route = Route::new(handoff, clock.deadline(5_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        route.confirmed(clock.at(0), &members());
        let d = route.hop(Hop::Elsewhere("c".into()), clock.at(1), &members());
        assert_eq!(
            d,
            Decision { note: Note::Owner("c".into()), next: Next::Confirm { to: "c".into(), reroute: true } }
        );
        assert_eq!(route.confirmed(clock.at(1), &members()), next(Next::Send { to: "c".into(), reroute: true }));
    }

    #[test]
    fn an_event_handed_back_by_the_actor_here_goes_to_the_owner_it_found_once() {
        let clock = Clock::new();
        for entry in [Entry::Request, Entry::Open { handoff: false }] {
            let mut route = Route::new(entry, clock.deadline(5_000));
            assert_eq!(route.start(start(false, None, false), &key("x"), clock.at(0), &members()), next(HERE));
            assert_eq!(route.ran_elsewhere("b".into(), clock.at(1), &members()), next(send("b")));
            // It comes back: it runs here, and is never handed on again.
            assert_eq!(route.hop(Hop::Elsewhere("a".into()), clock.at(2), &members()).next, ANSWER_HERE);
            assert_eq!(route.ran_elsewhere("b".into(), clock.at(3), &members()), next(elsewhere("b")));
        }
        // An owner that is this node, or none, is not sent to.
        for owner in ["a", ""] {
            let mut route = Route::new(Entry::Request, clock.deadline(5_000));
            route.start(start(false, None, false), &key("x"), clock.at(0), &members());
            assert_eq!(route.ran_elsewhere(owner.into(), clock.at(1), &members()), next(elsewhere(owner)));
        }
        // An event that must answer answers.
        let mut route = Route::new(Entry::Hopped, clock.deadline(5_000));
        route.start(start(false, None, false), &key("x"), clock.at(0), &members());
        assert_eq!(route.ran_elsewhere("b".into(), clock.at(1), &members()), next(elsewhere("b")));
    }

    #[test]
    fn an_owners_elsewhere_is_followed_three_times_then_the_store_decides_here() {
        let clock = Clock::new();
        let mut route = Route::new(Entry::Request, clock.deadline(5_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        for (i, to) in ["c", "b", "c"].into_iter().enumerate() {
            let d = route.hop(Hop::Elsewhere(to.into()), clock.at(i as u64), &members());
            assert_eq!(d, Decision { note: Note::Owner(to.into()), next: Next::Send { to: to.into(), reroute: true } });
        }
        let d = route.hop(Hop::Elsewhere("b".into()), clock.at(9), &members());
        assert_eq!(d, Decision { note: Note::Forget, next: ANSWER_HERE }, "the fourth is not followed");
    }

    #[test]
    fn an_elsewhere_naming_this_node_the_same_owner_or_none_runs_here() {
        let clock = Clock::new();
        for said in ["a", "b", ""] {
            let mut route = Route::new(Entry::Request, clock.deadline(5_000));
            route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
            let d = route.hop(Hop::Elsewhere(said.into()), clock.at(1), &members());
            assert_eq!(d, Decision { note: Note::Forget, next: ANSWER_HERE }, "{said:?}");
            assert_eq!(route.next_look(), None);
        }
    }

    #[test]
    fn an_unreachable_owner_is_waited_for_until_it_dies_within_the_deadline() {
        let clock = Clock::new();
        let mut route = Route::new(Entry::Request, clock.deadline(1_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        assert_eq!(route.hop(Hop::Unreachable, clock.at(10), &members()), next(Next::Wait));
        assert_eq!(route.next_look(), Some(clock.deadline(260)));
        assert_eq!(route.look(clock.at(260), &members()), next(Next::Wait));
        assert_eq!(route.next_look(), Some(clock.deadline(510)));
        // Near the deadline the look comes at the deadline.
        assert_eq!(route.look(clock.at(900), &members()), next(Next::Wait));
        assert_eq!(route.next_look(), Some(clock.deadline(1_000)));
        // b dies: the actor is taken here.
        let b_dead = Members::new("a", WAIT, [beat("a", NOW_MS), beat("b", NOW_MS - 20_000)]);
        assert_eq!(route.look(clock.at(950), &b_dead), Decision { note: Note::Forget, next: ANSWER_HERE });
        assert_eq!(route.next_look(), None);
    }

    #[test]
    fn the_deadline_is_looked_at_before_the_owners_death() {
        let clock = Clock::new();
        let b_dead = Members::new("a", WAIT, [beat("a", NOW_MS), beat("b", NOW_MS - 20_000)]);
        let mut route = Route::new(Entry::Request, clock.deadline(1_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        let d = route.hop(Hop::Unreachable, clock.at(1_000), &b_dead);
        assert_eq!(d, next(Next::Fail(Refusal::DeadlinePassed.into())));
        // Waiting, past the deadline, with the owner still alive.
        let mut route = Route::new(Entry::Request, clock.deadline(1_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        route.hop(Hop::Unreachable, clock.at(10), &members());
        assert_eq!(route.look(clock.at(1_000), &members()), next(Next::Fail(Refusal::DeadlinePassed.into())));
        // Unreachable and dead already, within the deadline: here.
        let mut route = Route::new(Entry::Request, clock.deadline(1_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        assert_eq!(route.hop(Hop::Unreachable, clock.at(10), &b_dead).next, ANSWER_HERE);
    }

    #[test]
    fn an_owner_that_dies_while_its_hop_is_on_the_way_is_given_up() {
        let clock = Clock::new();
        let mut route = Route::new(Entry::Request, clock.deadline(60_000));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        assert_eq!(route.next_look(), Some(clock.deadline(250)), "first looked at one recheck after the send");
        assert_eq!(route.look(clock.at(250), &members()), next(Next::Wait));
        assert_eq!(route.next_look(), Some(clock.deadline(500)));
        let b_dead = Members::new("a", WAIT, [beat("a", NOW_MS), beat("b", NOW_MS - 20_000)]);
        assert_eq!(route.look(clock.at(500), &b_dead), Decision { note: Note::Forget, next: ANSWER_HERE });
        // The hop in flight is not bounded by the deadline here (the hop
        // carries the deadline itself): past it, a live owner is waited for.
        let mut route = Route::new(Entry::Request, clock.deadline(100));
        route.start(start(false, Some("b"), false), &key("x"), clock.at(0), &members());
        assert_eq!(route.look(clock.at(250), &members()), next(Next::Wait));
        assert_eq!(route.look(clock.at(500), &b_dead), next(Next::Fail(Refusal::DeadlinePassed.into())));
    }

    #[test]
    fn a_route_not_waiting_has_no_look_and_ends_on_one() {
        let clock = Clock::new();
        let mut route = Route::new(Entry::Request, clock.deadline(1_000));
        assert_eq!(route.next_look(), None);
        route.start(start(false, None, false), &key("x"), clock.at(0), &members());
        assert_eq!(route.next_look(), None);
        assert_eq!(route.look(clock.at(10), &members()), next(Next::Fail(EventError::ShuttingDown)));
        assert_eq!(route.next_look(), None);
        // A hop outcome with no hop sent is a driver's bug: the event ends.
        assert_eq!(route.hop(Hop::Unreachable, clock.at(10), &members()), next(Next::Fail(EventError::ShuttingDown)));
    }

    /// Every sequence of up to five inputs, from every entry and start: a
    /// route sends at most `1 + REROUTES` hops and never to this node or a
    /// dead one, never sends after it chose to answer here, waits only
    /// with a look to come, never looks past the deadline while waiting
    /// for a dead owner, and ends with its deadline passed only when it is.
    #[test]
    fn every_short_run_of_inputs_keeps_the_routes_rules() {
        #[derive(Debug, Clone)]
        enum In {
            Ran(&'static str),
            Confirm,
            Elsewhere(&'static str),
            Unreachable,
            Look,
        }
        let inputs = [
            In::Ran("b"),
            In::Ran("a"),
            In::Confirm,
            In::Elsewhere("a"),
            In::Elsewhere("b"),
            In::Elsewhere("c"),
            In::Elsewhere(""),
            In::Unreachable,
            In::Look,
        ];
        let entries = [
            Entry::Request,
            Entry::Hopped,
            Entry::Open { handoff: false },
            Entry::Open { handoff: true },
            Entry::Relayed,
            Entry::Traffic,
            Entry::Delete,
        ];
        let starts = [
            start(false, None, false),
            start(false, Some("b"), false),
            start(true, Some("b"), false),
            start(false, None, true),
            start(false, Some("c"), true),
        ];
        let clock = Clock::new();
        let (m, actor) = (members(), key("x"));
        let mut runs = 0u64;
        for entry in entries {
            for s in &starts {
                let mut stack = vec![Vec::<usize>::new()];
                while let Some(seq) = stack.pop() {
                    runs += 1;
                    check_run(entry, s.clone(), &seq, &inputs, &clock, &m, &actor);
                    if seq.len() < 5 {
                        for i in 0..inputs.len() {
                            let mut longer = seq.clone();
                            longer.push(i);
                            stack.push(longer);
                        }
                    }
                }
            }
        }
        assert!(runs > 2_000_000, "{runs} runs");

        fn check_run(
            entry: Entry,
            s: Start,
            seq: &[usize],
            inputs: &[In],
            clock: &Clock,
            m: &Members,
            actor: &MailboxKey,
        ) {
            let deadline = clock.deadline(400);
            let mut route = Route::new(entry, deadline);
            let mut sends = 0;
            let mut answered_here = false;
            let mut d = route.start(s, actor, clock.at(0), m);
            for (step, &i) in seq.iter().enumerate() {
                let now = clock.at(100 * (step as u64 + 1));
                match &d.next {
                    Next::Send { to, .. } | Next::Confirm { to, .. } => {
                        assert!(to != "a" && to != "dead" && !to.is_empty(), "{entry:?} {seq:?}: sent to {to:?}");
                        if matches!(d.next, Next::Send { .. }) {
                            sends += 1;
                        }
                        assert!(!answered_here, "{entry:?} {seq:?}: sent after answering here");
                    }
                    Next::RunHere(IfElsewhere::Answer) => answered_here = true,
                    Next::Wait => assert!(route.next_look().is_some(), "{entry:?} {seq:?}: a wait with no look"),
                    Next::Fail(EventError::Refused(Refusal::DeadlinePassed)) => {
                        assert!(now.at > deadline, "{entry:?} {seq:?}: deadline refused early")
                    }
                    _ => {}
                }
                assert!(sends <= 1 + usize::from(REROUTES), "{entry:?} {seq:?}: {sends} sends");
                d = match &inputs[i] {
                    In::Ran(owner) => route.ran_elsewhere((*owner).into(), now, m),
                    In::Confirm => route.confirmed(now, m),
                    In::Elsewhere(owner) => route.hop(Hop::Elsewhere((*owner).into()), now, m),
                    In::Unreachable => route.hop(Hop::Unreachable, now, m),
                    In::Look => route.look(now, m),
                };
                if matches!(d.next, Next::Send { .. } | Next::Wait) {
                    let look = route.next_look().expect("a look to come");
                    assert!(look >= now.at, "{entry:?} {seq:?}: a look in the past");
                }
                if let (Next::Send { to, reroute: true } | Next::Confirm { to, reroute: true }, In::Elsewhere(_)) =
                    (&d.next, &inputs[i])
                {
                    assert_eq!(d.note, Note::Owner(to.clone()), "a reroute notes its owner");
                }
            }
        }
    }
}
