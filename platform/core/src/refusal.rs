//! Why the host did not run an event or serve a request, and how each
//! reason is answered: the one mapping from every refusal and failure to
//! its status, `Retry-After`, the text a client reads (never host detail),
//! what a call sees, and how a socket closes. The public port, a call's
//! error and a socket's close are thin renderers of [`Answer`].

use std::borrow::Cow;

use crate::close::{self, Close};
use crate::labels::Label;
use crate::names::NameError;
use crate::quota::Quota;

/// Why admission did not run an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No app answers at this host name.
    #[error("no such app")]
    NoSuchApp,
    /// The operator suspended the app's tenant: its data is kept, its
    /// apps answer nothing until it is resumed.
    #[error("this app's account is suspended")]
    Suspended,
    /// The class is not one of the active version's.
    #[error("no such actor class")]
    NoSuchClass,
    /// The name (or class syntax) is not valid.
    #[error("{0}")]
    InvalidName(NameError),
    /// An outside caller reached an `internal` class (the early rule).
    #[error("actor class is internal")]
    Internal,
    /// A value the app requires is not set.
    #[error("app value {0} is not set")]
    ValueMissing(String),
    /// The actor does not exist and this caller does not create it.
    #[error("no such actor")]
    NoSuchActor,
    /// The actor's mailbox is full.
    #[error("callee overloaded")]
    Overloaded,
    /// No pool instance was free within the admission wait.
    #[error("no capacity for this actor now")]
    Capacity,
    /// The caller's deadline passed before the event could start: it
    /// never starts.
    #[error("the actor could not take the request before its deadline")]
    DeadlinePassed,
    /// The tenant is over one of its plan's quotas.
    #[error("over the plan's {} quota{}", quota.label(), retry_text(*quota, *retry_after))]
    Quota { quota: Quota, retry_after: u32 },
    /// The tenant's requests hold its share of the port's requests in
    /// flight: its flood costs it, not the other tenants.
    #[error("too many requests for this account at once; retry shortly")]
    TenantBusy,
    /// The store failed; the text is for the log, not the client.
    #[error("store unavailable")]
    StoreUnavailable(String),
    /// Another node owns the actor and is alive; `owner` is its id. The
    /// event goes there (the router follows it); when it cannot, this is
    /// the answer: the actor is moving, retry. The text never names the
    /// owner: a client does not learn node ids.
    #[error("the actor is moving between nodes; retry")]
    Elsewhere { owner: String },
}

crate::labels::labels! {
    /// A refusal's name, without its detail: `wasmkeep_refusals_total{reason}`,
    /// a refused event's outcome, a span's status.
    pub enum RefusalReason {
        NoSuchApp => "no_such_app",
        Suspended => "suspended",
        NoSuchClass => "no_such_class",
        InvalidName => "invalid_name",
        Internal => "internal",
        ValueMissing => "value_missing",
        NoSuchActor => "no_such_actor",
        Overloaded => "overloaded",
        Capacity => "capacity",
        /// The caller had stopped waiting before the event could start.
        DeadlinePassed => "deadline",
        Quota => "quota",
        TenantBusy => "tenant_busy",
        StoreUnavailable => "store_unavailable",
        Elsewhere => "elsewhere",
    }
}

impl Refusal {
    pub fn reason(&self) -> RefusalReason {
        match self {
            Self::NoSuchApp => RefusalReason::NoSuchApp,
            Self::Suspended => RefusalReason::Suspended,
            Self::NoSuchClass => RefusalReason::NoSuchClass,
            Self::InvalidName(_) => RefusalReason::InvalidName,
            Self::Internal => RefusalReason::Internal,
            Self::ValueMissing(_) => RefusalReason::ValueMissing,
            Self::NoSuchActor => RefusalReason::NoSuchActor,
            Self::Overloaded => RefusalReason::Overloaded,
            Self::Capacity => RefusalReason::Capacity,
            Self::DeadlinePassed => RefusalReason::DeadlinePassed,
            Self::Quota { .. } => RefusalReason::Quota,
            Self::TenantBusy => RefusalReason::TenantBusy,
            Self::StoreUnavailable(_) => RefusalReason::StoreUnavailable,
            Self::Elsewhere { .. } => RefusalReason::Elsewhere,
        }
    }

    /// Its name ([`Refusal::reason`]).
    pub fn label(&self) -> &'static str {
        self.reason().as_str()
    }
}

fn retry_text(quota: Quota, retry_after: u32) -> String {
    match quota {
        _ if quota.passes() => format!("; retry in {retry_after} s"),
        Quota::Actors => "; an actor must be deleted first".into(),
        _ => "; something stored must be deleted first".into(),
    }
}

/// Why an event gave no response of the actor's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Admission refused it; the refusal says why.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The guest trapped; its writes were rolled back. The text is what
    /// its tenant reads of it (the trap, a panic's message; empty when
    /// unknown): a calling guest's reason, never an HTTP client's body.
    #[error("the actor failed")]
    Trapped(String),
    /// The event ran past its wall and was cut; its writes were rolled back.
    #[error("the actor's event ran past its wall")]
    Wall,
    /// The actor answered what HTTP cannot carry (a bad status or header);
    /// its writes were rolled back.
    #[error("the actor answered an invalid response")]
    InvalidResponse,
    /// The actor's answer is over the body limit; its writes were rolled
    /// back.
    #[error("the actor's answer is over {0} bytes")]
    AnswerTooLarge(u64),
    /// The node is stopping.
    #[error("the node is shutting down")]
    ShuttingDown,
}

crate::labels::labels! {
    /// How an admitted event failed: an [`EventError`] other than a
    /// refusal, by name.
    pub enum EventFault {
        Trapped => "trapped",
        Wall => "wall",
        InvalidResponse => "invalid_response",
        AnswerTooLarge => "answer_too_large",
        ShuttingDown => "shutting_down",
    }
}

/// How an event ended: `wasmkeep_events_total{outcome}`. It ran (`ok`),
/// admission refused it, or it failed; the refusal's or fault's name is
/// the label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventOutcome {
    Ok,
    Refused(RefusalReason),
    Failed(EventFault),
}

const EVENT_OUTCOMES: usize = 1 + RefusalReason::ALL.len() + EventFault::ALL.len();

/// `ok`, then every refusal, then every fault: built from their lists,
/// so that none can be left out.
const fn event_outcomes() -> [EventOutcome; EVENT_OUTCOMES] {
    let mut all = [EventOutcome::Ok; EVENT_OUTCOMES];
    let mut i = 0;
    while i < RefusalReason::ALL.len() {
        all[1 + i] = EventOutcome::Refused(RefusalReason::ALL[i]);
        i += 1;
    }
    let mut j = 0;
    while j < EventFault::ALL.len() {
        all[1 + i + j] = EventOutcome::Failed(EventFault::ALL[j]);
        j += 1;
    }
    all
}

impl EventOutcome {
    pub const ALL: &'static [Self] = &event_outcomes();

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Refused(reason) => reason.as_str(),
            Self::Failed(fault) => fault.as_str(),
        }
    }
}

impl Label for EventOutcome {
    const ALL: &'static [Self] = EventOutcome::ALL;

    fn as_str(self) -> &'static str {
        EventOutcome::as_str(self)
    }
}

impl From<&EventError> for EventOutcome {
    fn from(e: &EventError) -> Self {
        match e {
            EventError::Refused(r) => Self::Refused(r.reason()),
            EventError::Trapped(_) => Self::Failed(EventFault::Trapped),
            EventError::Wall => Self::Failed(EventFault::Wall),
            EventError::InvalidResponse => Self::Failed(EventFault::InvalidResponse),
            EventError::AnswerTooLarge(_) => Self::Failed(EventFault::AnswerTooLarge),
            EventError::ShuttingDown => Self::Failed(EventFault::ShuttingDown),
        }
    }
}

/// Longest text a failure carries (a trap's, an argument of a hop's
/// error), in bytes.
pub const TEXT_MAX: usize = 512;

/// What ends a text cut to [`TEXT_MAX`].
pub(crate) const CUT: char = '…';

/// `text`, or its first [`TEXT_MAX`] bytes ending with `…` (cut at a
/// character boundary).
pub(crate) fn cut(text: &str) -> Cow<'_, str> {
    if text.len() <= TEXT_MAX {
        return text.into();
    }
    let mut end = TEXT_MAX - CUT.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end]).into()
}

impl EventError {
    /// A trap, its tenant's text of it cut to what a hop carries
    /// ([`TEXT_MAX`] bytes): a call fails with the same reason on any
    /// node.
    pub fn trapped(why: &str) -> Self {
        Self::Trapped(cut(why).into_owned())
    }

    /// Its name, for a span's status and the like: never a detail.
    pub fn label(&self) -> &'static str {
        EventOutcome::from(self).as_str()
    }
}

/// Why a front request got no answer of the front's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    #[error("no such app")]
    NoSuchApp,
    /// The app has no front: only `/actor/` paths reach it.
    #[error("this app has no front; actors are at /actor/<class>/<name>/")]
    NoFront,
    /// No slot became free within the slot wait (or the client holds its
    /// share of them).
    #[error("too many requests for the fronts of this node; retry shortly")]
    Busy,
    /// The front trapped, answered an error, or asked for a broken hand-off.
    #[error("the front failed")]
    Trapped,
    /// The front ran past its request's wall without an answer.
    #[error("the front did not answer in time")]
    Wall,
    /// A value the app requires is not set: the front does not run, as no
    /// actor event does (docs/spec/actors-and-admission.md §5 and §8).
    #[error("app value {0} is not set")]
    ValueMissing(String),
}

/// What the public port itself refuses, before any event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    #[error("request body is over {0} bytes")]
    BodyTooLarge(u64),
    #[error("request body could not be read")]
    BodyUnreadable,
    /// The body came slower than the minimum rate.
    #[error("the request body arrived too slowly")]
    BodyTooSlow,
    /// The node holds its budget of request bodies.
    #[error("the node holds too many request bodies; retry shortly")]
    BodiesFull,
    #[error("request has no Host header, or more than one")]
    NoHost,
    /// Too many sockets on the actor or the node.
    #[error("too many sockets; retry later")]
    SocketsFull,
    /// The actor's `on-websocket-open` refused a socket, with its reason.
    #[error("{0}")]
    SocketRefused(String),
}

/// Every failure a request can meet on its way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Event(#[from] EventError),
    #[error(transparent)]
    Front(#[from] FrontError),
    #[error(transparent)]
    Port(#[from] PortError),
}

impl Failure {
    /// Its name, for a span's status: the refusal's or error's, never a
    /// detail (a socket's refusal reason is the guest's text, so not it).
    pub fn label(&self) -> &'static str {
        match self {
            Failure::Event(e) => e.label(),
            Failure::Front(FrontError::NoSuchApp) => "no_such_app",
            Failure::Front(FrontError::NoFront) => "no_front",
            Failure::Front(FrontError::Busy) => "front_busy",
            Failure::Front(FrontError::Trapped) => "front_failed",
            Failure::Front(FrontError::Wall) => "front_wall",
            Failure::Front(FrontError::ValueMissing(_)) => "value_missing",
            Failure::Port(PortError::BodyTooLarge(_)) => "body_too_large",
            Failure::Port(PortError::BodyUnreadable) => "body_unreadable",
            Failure::Port(PortError::BodyTooSlow) => "body_too_slow",
            Failure::Port(PortError::BodiesFull) => "bodies_full",
            Failure::Port(PortError::NoHost) => "no_host",
            Failure::Port(PortError::SocketsFull) => "sockets_full",
            Failure::Port(PortError::SocketRefused(_)) => "socket_refused",
        }
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Self::Event(EventError::Refused(r))
    }
}

/// What a call sees of a callee's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsCall {
    /// The answer's status and text, as HTTP would have them.
    Respond,
    /// `failed`, with a reason for the calling guest.
    Failed(Cow<'static, str>),
    /// `too-large`.
    TooLarge,
    /// `timeout`.
    Timeout,
}

/// How one failure is answered, wherever it is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<u32>,
    /// The body a client (or a calling guest) reads, whole: host texts end
    /// with a newline; an actor's own refusal reason is passed as it is.
    pub text: String,
    /// Whether the connection closes after the answer (the rest of a slow
    /// body is not worth waiting for).
    pub close_connection: bool,
    /// What a call sees instead of a response, if anything.
    pub as_call: AsCall,
    /// How a socket whose event met this failure closes; `None` leaves it
    /// open.
    pub close: Option<Close>,
}

impl Answer {
    /// The answer's headers, the same through the public port and in a
    /// call's response.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("content-type", "text/plain; charset=utf-8".to_owned())];
        if let Some(secs) = self.retry_after {
            headers.push(("retry-after", secs.to_string()));
        }
        if self.close_connection {
            headers.push(("connection", "close".to_owned()));
        }
        headers
    }
}

impl Failure {
    pub fn answer(&self) -> Answer {
        let (status, retry_after) = self.status();
        let text = match self {
            Self::Port(PortError::SocketRefused(reason)) => reason.clone(),
            other => format!("{other}\n"),
        };
        Answer {
            status,
            retry_after,
            text,
            // A slow body's rest is not worth waiting for; a tenant over
            // its share of requests gives its connection back.
            close_connection: matches!(
                self,
                Self::Port(PortError::BodyTooSlow) | Self::Event(EventError::Refused(Refusal::TenantBusy))
            ),
            as_call: self.as_call(),
            close: self.close(),
        }
    }

    /// Its status and `Retry-After` (the hop's answer carries the same).
    pub(crate) fn status(&self) -> (u16, Option<u32>) {
        match self {
            Self::Event(EventError::Refused(r)) => match r {
                Refusal::NoSuchApp | Refusal::NoSuchClass | Refusal::NoSuchActor => (404, None),
                Refusal::InvalidName(_) => (400, None),
                Refusal::Internal => (403, None),
                Refusal::ValueMissing(_) => (503, Some(10)),
                Refusal::Suspended => (503, Some(60)),
                Refusal::Overloaded
                | Refusal::Capacity
                | Refusal::StoreUnavailable(_)
                | Refusal::TenantBusy
                | Refusal::Elsewhere { .. } => (503, Some(1)),
                Refusal::DeadlinePassed => (504, None),
                Refusal::Quota { quota, retry_after } => (quota.status(), quota.passes().then_some(*retry_after)),
            },
            Self::Event(EventError::Trapped(_) | EventError::InvalidResponse | EventError::AnswerTooLarge(_)) => {
                (500, None)
            }
            Self::Event(EventError::Wall) => (504, None),
            Self::Event(EventError::ShuttingDown) => (503, Some(1)),
            Self::Front(FrontError::NoSuchApp | FrontError::NoFront) => (404, None),
            Self::Front(FrontError::Busy) => (503, Some(1)),
            Self::Front(FrontError::Trapped) => (500, None),
            Self::Front(FrontError::Wall) => (504, None),
            Self::Front(FrontError::ValueMissing(_)) => (503, Some(10)),
            Self::Port(PortError::BodyTooLarge(_)) => (413, None),
            Self::Port(PortError::BodyUnreadable | PortError::NoHost) => (400, None),
            Self::Port(PortError::BodyTooSlow) => (408, None),
            Self::Port(PortError::BodiesFull) => (503, Some(1)),
            Self::Port(PortError::SocketsFull) => (503, Some(5)),
            Self::Port(PortError::SocketRefused(_)) => (403, None),
        }
    }

    /// A callee's failure as its caller sees it: what the callee itself did
    /// wrong, its queue being full, or its node not taking it now (shutting
    /// down; the actor moving to another node, whose id the caller is not
    /// told) is `failed`; a refusal of admission is the answer HTTP would
    /// give (the capacity `503` included).
    fn as_call(&self) -> AsCall {
        match self {
            Self::Event(EventError::AnswerTooLarge(_)) => AsCall::TooLarge,
            Self::Event(EventError::Refused(Refusal::DeadlinePassed)) => AsCall::Timeout,
            Self::Event(EventError::Refused(Refusal::Overloaded)) => AsCall::Failed("callee overloaded".into()),
            Self::Event(EventError::Trapped(why)) if why.is_empty() => AsCall::Failed("the callee failed".into()),
            Self::Event(EventError::Trapped(why)) => AsCall::Failed(format!("the callee failed: {why}").into()),
            Self::Event(EventError::Wall) => AsCall::Failed("the callee's event ran past its wall".into()),
            Self::Event(EventError::InvalidResponse) => {
                AsCall::Failed("the callee answered an invalid response".into())
            }
            Self::Event(EventError::ShuttingDown) => AsCall::Failed("the node is shutting down".into()),
            Self::Event(EventError::Refused(Refusal::Elsewhere { .. })) => {
                AsCall::Failed("callee unavailable: it is moving between nodes".into())
            }
            _ => AsCall::Respond,
        }
    }

    /// A socket whose actor can no longer take its events closes: a deploy
    /// made the class internal or removed it, the actor is gone, or its
    /// mailbox is full. Any other failure leaves it open.
    fn close(&self) -> Option<Close> {
        match self {
            Self::Event(EventError::Refused(r)) => match r {
                Refusal::Internal => Some(close::CLASS_INTERNAL),
                Refusal::NoSuchClass => Some(close::CLASS_REMOVED),
                Refusal::NoSuchActor => Some(close::ACTOR_GONE),
                Refusal::Overloaded | Refusal::DeadlinePassed => Some(close::OVERLOADED),
                _ => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_failure() -> Vec<Failure> {
        let refusals = [
            Refusal::NoSuchApp,
            Refusal::Suspended,
            Refusal::NoSuchClass,
            Refusal::InvalidName(NameError::EmptyName),
            Refusal::Internal,
            Refusal::ValueMissing("K".into()),
            Refusal::NoSuchActor,
            Refusal::Overloaded,
            Refusal::Capacity,
            Refusal::DeadlinePassed,
            Refusal::Quota { quota: Quota::Requests, retry_after: 2 },
            Refusal::Quota { quota: Quota::ResidentActors, retry_after: 1 },
            Refusal::Quota { quota: Quota::TenantStorage, retry_after: 0 },
            Refusal::Quota { quota: Quota::Actors, retry_after: 0 },
            Refusal::TenantBusy,
            Refusal::StoreUnavailable("disk I/O error at /var/lib/x".into()),
            Refusal::Elsewhere { owner: "node-b".into() },
        ];
        let events = [
            EventError::Trapped(String::new()),
            EventError::Wall,
            EventError::InvalidResponse,
            EventError::AnswerTooLarge(16),
            EventError::ShuttingDown,
        ];
        let fronts = [
            FrontError::NoSuchApp,
            FrontError::NoFront,
            FrontError::Busy,
            FrontError::Trapped,
            FrontError::Wall,
            FrontError::ValueMissing("K".into()),
        ];
        let ports = [
            PortError::BodyTooLarge(16),
            PortError::BodyUnreadable,
            PortError::BodyTooSlow,
            PortError::BodiesFull,
            PortError::NoHost,
            PortError::SocketsFull,
            PortError::SocketRefused("no room".into()),
        ];
        refusals
            .into_iter()
            .map(Failure::from)
            .chain(events.into_iter().map(Failure::from))
            .chain(fronts.into_iter().map(Failure::from))
            .chain(ports.into_iter().map(Failure::from))
            .collect()
    }

    #[test]
    fn every_failure_has_one_answer() {
        let table: Vec<(u16, Option<u32>, &str)> = every_failure()
            .iter()
            .map(|f| {
                let a = f.answer();
                (a.status, a.retry_after, &*Box::leak(a.text.into_boxed_str()))
            })
            .collect();
        assert_eq!(
            table,
            [
                (404, None, "no such app\n"),
                (503, Some(60), "this app's account is suspended\n"),
                (404, None, "no such actor class\n"),
                (400, None, "actor name is empty\n"),
                (403, None, "actor class is internal\n"),
                (503, Some(10), "app value K is not set\n"),
                (404, None, "no such actor\n"),
                (503, Some(1), "callee overloaded\n"),
                (503, Some(1), "no capacity for this actor now\n"),
                (504, None, "the actor could not take the request before its deadline\n"),
                (429, Some(2), "over the plan's requests_per_second quota; retry in 2 s\n"),
                (503, Some(1), "over the plan's resident_actors quota; retry in 1 s\n"),
                (507, None, "over the plan's storage_bytes quota; something stored must be deleted first\n"),
                (507, None, "over the plan's actors quota; an actor must be deleted first\n"),
                (503, Some(1), "too many requests for this account at once; retry shortly\n"),
                (503, Some(1), "store unavailable\n"),
                (503, Some(1), "the actor is moving between nodes; retry\n"),
                (500, None, "the actor failed\n"),
                (504, None, "the actor's event ran past its wall\n"),
                (500, None, "the actor answered an invalid response\n"),
                (500, None, "the actor's answer is over 16 bytes\n"),
                (503, Some(1), "the node is shutting down\n"),
                (404, None, "no such app\n"),
                (404, None, "this app has no front; actors are at /actor/<class>/<name>/\n"),
                (503, Some(1), "too many requests for the fronts of this node; retry shortly\n"),
                (500, None, "the front failed\n"),
                (504, None, "the front did not answer in time\n"),
                (503, Some(10), "app value K is not set\n"),
                (413, None, "request body is over 16 bytes\n"),
                (400, None, "request body could not be read\n"),
                (408, None, "the request body arrived too slowly\n"),
                (503, Some(1), "the node holds too many request bodies; retry shortly\n"),
                (400, None, "request has no Host header, or more than one\n"),
                (503, Some(5), "too many sockets; retry later\n"),
                (403, None, "no room"),
            ]
        );
    }

    #[test]
    fn no_host_detail_reaches_the_client() {
        for f in every_failure() {
            let text = f.answer().text;
            assert!(!text.contains("/var/lib") && !text.contains("disk") && !text.contains("node-b"), "{text}");
        }
    }

    #[test]
    fn only_a_slow_body_and_a_busy_tenant_close_the_connection() {
        for f in every_failure() {
            let closes = [PortError::BodyTooSlow.into(), Refusal::TenantBusy.into()];
            assert_eq!(f.answer().close_connection, closes.contains(&f), "{f:?}");
        }
        let h = |f: Failure| f.answer().headers();
        assert_eq!(h(Refusal::NoSuchActor.into()), [("content-type", "text/plain; charset=utf-8".to_owned())]);
        assert_eq!(h(Refusal::Capacity.into())[1], ("retry-after", "1".to_owned()));
        assert_eq!(h(PortError::BodyTooSlow.into())[1], ("connection", "close".to_owned()));
    }

    #[test]
    fn a_call_sees_what_the_callee_did_wrong_as_failed_and_a_refusal_as_its_answer() {
        let call = |f: Failure| f.answer().as_call;
        assert_eq!(call(EventError::AnswerTooLarge(1).into()), AsCall::TooLarge);
        assert_eq!(call(Refusal::DeadlinePassed.into()), AsCall::Timeout);
        let failed = |why: &'static str| AsCall::Failed(why.into());
        assert_eq!(call(Refusal::Overloaded.into()), failed("callee overloaded"));
        assert_eq!(call(EventError::Trapped(String::new()).into()), failed("the callee failed"));
        let panicked = EventError::trapped("trapped: panicked at src/lib.rs:3:5: no such item");
        assert_eq!(
            call(panicked.into()),
            failed("the callee failed: trapped: panicked at src/lib.rs:3:5: no such item")
        );
        // A long text is cut to what a hop carries, so that a call fails
        // with the same reason whichever node ran its callee.
        let long = EventError::trapped(&format!("trapped: {}", "é".repeat(600)));
        let EventError::Trapped(why) = &long else { unreachable!() };
        assert!(why.len() <= crate::hop_answer::TEXT_MAX && why.ends_with('…'), "{why}");
        assert_eq!(crate::hop_answer::decode(&crate::hop_answer::encode(&long)), Ok(long));
        assert_eq!(call(EventError::Wall.into()), failed("the callee's event ran past its wall"));
        assert_eq!(call(EventError::InvalidResponse.into()), failed("the callee answered an invalid response"));
        assert_eq!(call(EventError::ShuttingDown.into()), failed("the node is shutting down"));
        assert_eq!(
            call(Refusal::Elsewhere { owner: "node-b".into() }.into()),
            AsCall::Failed("callee unavailable: it is moving between nodes".into())
        );
        for r in [Refusal::NoSuchClass, Refusal::NoSuchActor, Refusal::Internal, Refusal::Capacity] {
            assert_eq!(call(r.into()), AsCall::Respond);
        }
    }

    #[test]
    fn a_socket_closes_only_when_its_actor_cannot_take_it() {
        let close = |f: Failure| f.answer().close.map(|c| c.code);
        assert_eq!(close(Refusal::Internal.into()), Some(1008));
        assert_eq!(close(Refusal::NoSuchClass.into()), Some(1001));
        assert_eq!(close(Refusal::NoSuchActor.into()), Some(1000));
        assert_eq!(close(Refusal::Overloaded.into()), Some(1013));
        assert_eq!(close(Refusal::DeadlinePassed.into()), Some(1013));
        // An actor owned elsewhere leaves the socket as it is: a socket's
        // events never travel between nodes.
        let elsewhere = Failure::from(Refusal::Elsewhere { owner: "node-b".into() });
        for f in [
            EventError::Trapped(String::new()).into(),
            EventError::Wall.into(),
            Failure::from(Refusal::Capacity),
            elsewhere,
        ] {
            assert_eq!(close(f), None);
        }
    }

    #[test]
    fn every_refusal_has_its_own_label() {
        let labels: Vec<&str> = every_failure()
            .iter()
            .filter_map(|f| match f {
                Failure::Event(EventError::Refused(r)) => Some(r.label()),
                _ => None,
            })
            .collect();
        let distinct: std::collections::HashSet<_> = labels.iter().collect();
        // The four quota samples share one label.
        assert_eq!(distinct.len(), labels.len() - 3);
        assert_eq!(Refusal::Elsewhere { owner: "node-b".into() }.label(), "elsewhere");
    }
}
