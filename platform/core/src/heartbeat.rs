//! The membership heartbeat (docs/spec/cluster.md §2): the record each node
//! writes every second, which tells the others that it is alive, where to
//! reach it, how loaded it is and what it can do. A node whose heartbeat is
//! older than `--failover-wait-secs` is dead.
//!
//! One record of lines, joined by `\n`:
//!
//! ```text
//!  1  wasmkeep-heartbeat 1
//!  2  node id                      (1-63 of a-z 0-9 - _, starting with a letter)
//!  3  version                      (visible ASCII, no space)
//!  4  public address               (visible ASCII, no space)
//!  5  cluster (QUIC) address       (visible ASCII, no space)
//!  6  started at, unix ms          (decimal)
//!  7  sent at, unix ms             (decimal)
//!  8  serving | draining
//!  9  <resident actors>/<pool size> (decimal/decimal)
//! 10  open sockets                 (decimal)
//! 11  capability words, space separated (may be empty)
//! ```
//!
//! Readers ignore unknown capability words and lines past 11, so a newer
//! node can say more without an older one refusing it; a trailing newline
//! and `\r\n` line ends are tolerated. Everything else that is not as
//! above is refused, with the number of the line at fault.
//!
//! Writing, reading and storing the record are the cluster's; the clock
//! is the caller's (every time here is passed in).

use std::time::Duration;

use crate::names::ClassName;

/// Line 1: what the record is, and the version of its form.
pub const MAGIC: &str = "wasmkeep-heartbeat 1";
/// The lines of the record a reader needs; later ones are ignored.
pub const LINES: usize = 11;
/// How often a node writes its heartbeat.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How old a node's heartbeat may be before the node is dead: the default
/// of `--failover-wait-secs`.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(10);

/// The capability word of a node that takes over the actors of a dead one.
pub const TAKE: &str = "take";
/// The capability word of a node that runs fronts.
pub const FRONT: &str = "front";
/// The capability word of a node that takes a hand-off relayed to it
/// (docs/spec/sockets.md §15, docs/spec/cluster.md §2): a hand-off is
/// relayed only to an owner that announces it; otherwise the relaying node
/// answers `503` with `Retry-After: 1`.
pub const HANDOFF: &str = "handoff";

/// Why a heartbeat cannot be read. Every error but the record's length
/// names its line; for the node's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatError {
    #[error("line 1 is not `{MAGIC}`")]
    NotAHeartbeat,
    #[error("the heartbeat has {0} lines, fewer than {LINES}")]
    TooShort(usize),
    #[error("line 2: the node id is not 1-63 of a-z, 0-9, '-' and '_', starting with a letter")]
    Node,
    #[error("line 3: the version is empty or holds a space or a character that is not visible ASCII")]
    Version,
    #[error("line 4: the public address is empty or holds a space or a character that is not visible ASCII")]
    PublicAddr,
    #[error("line 5: the cluster address is empty or holds a space or a character that is not visible ASCII")]
    ClusterAddr,
    #[error("line 6: the start time is not a decimal number of unix milliseconds")]
    Started,
    #[error("line 7: the send time is not a decimal number of unix milliseconds")]
    Sent,
    #[error("line 8: the state is neither `serving` nor `draining`")]
    State,
    #[error("line 9: the load is not `<resident actors>/<pool size>` in decimal")]
    Load,
    #[error("line 10: the open sockets are not a decimal number")]
    Sockets,
}

impl HeartbeatError {
    /// The line at fault (`None` for a record too short).
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::NotAHeartbeat => Some(1),
            Self::TooShort(_) => None,
            Self::Node => Some(2),
            Self::Version => Some(3),
            Self::PublicAddr => Some(4),
            Self::ClusterAddr => Some(5),
            Self::Started => Some(6),
            Self::Sent => Some(7),
            Self::State => Some(8),
            Self::Load => Some(9),
            Self::Sockets => Some(10),
        }
    }
}

/// Whether the node takes new work (line 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeState {
    Serving,
    /// Shutting down: it finishes what it holds and is given nothing new.
    Draining,
}

impl NodeState {
    /// Its word on line 8.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Serving => "serving",
            Self::Draining => "draining",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "serving" => Some(Self::Serving),
            "draining" => Some(Self::Draining),
            _ => None,
        }
    }
}

/// What a node announces it can do (line 11): the words this node knows,
/// as flags. Words it does not know are ignored when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities {
    /// [`TAKE`].
    pub take: bool,
    /// [`FRONT`].
    pub front: bool,
    /// [`HANDOFF`].
    pub handoff: bool,
}

impl Capabilities {
    /// No capability at all.
    pub const NONE: Self = Self { take: false, front: false, handoff: false };
    /// What this node's build can do: every word it knows.
    pub const OURS: Self = Self { take: true, front: true, handoff: true };

    /// Reads line 11: words separated by spaces (runs of spaces are one
    /// separator); unknown words are ignored, words are case-sensitive.
    pub fn parse(line: &str) -> Self {
        let mut capabilities = Self::NONE;
        for word in line.split(' ') {
            match word {
                TAKE => capabilities.take = true,
                FRONT => capabilities.front = true,
                HANDOFF => capabilities.handoff = true,
                _ => {}
            }
        }
        capabilities
    }

    /// Line 11: the words held, always in the order `take front handoff`,
    /// single-spaced; empty for none.
    pub fn format(&self) -> String {
        [(self.take, TAKE), (self.front, FRONT), (self.handoff, HANDOFF)]
            .into_iter()
            .filter_map(|(held, word)| held.then_some(word))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One node's heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// The node's id: named like a class ([`is_node_id`]).
    pub node: String,
    /// The wasmkeep version the node runs.
    pub version: String,
    /// Where clients reach the node (as the node announces it: a host and
    /// port, or a URL; visible ASCII without spaces).
    pub public_addr: String,
    /// Where the other nodes reach it over QUIC.
    pub cluster_addr: String,
    /// When the node started, in unix milliseconds.
    pub started_ms: u64,
    /// When this heartbeat was written, in unix milliseconds.
    pub sent_ms: u64,
    pub state: NodeState,
    /// Actors resident on the node.
    pub resident: u64,
    /// The instance pool's size (resident actors are not checked against
    /// it: a pool may shrink under its residents).
    pub pool: u64,
    /// Sockets open on the node.
    pub sockets: u64,
    pub capabilities: Capabilities,
}

impl Heartbeat {
    /// The record: its eleven lines joined by `\n`, without a trailing
    /// newline (line 11 is empty for a node without capabilities).
    pub fn format(&self) -> String {
        [
            MAGIC.to_owned(),
            self.node.clone(),
            self.version.clone(),
            self.public_addr.clone(),
            self.cluster_addr.clone(),
            self.started_ms.to_string(),
            self.sent_ms.to_string(),
            self.state.as_str().to_owned(),
            format!("{}/{}", self.resident, self.pool),
            self.sockets.to_string(),
            self.capabilities.format(),
        ]
        .join("\n")
    }

    /// Reads a record. Lines end with `\n` or `\r\n`; a trailing newline
    /// and lines past 11 are ignored. Line 1 is checked first (a record
    /// that is not a heartbeat is said to be so, however long it is), then
    /// the length, then lines 2 to 10 in order.
    pub fn parse(record: &str) -> Result<Self, HeartbeatError> {
        let lines: Vec<&str> =
            record.split('\n').take(LINES).map(|line| line.strip_suffix('\r').unwrap_or(line)).collect();
        if lines[0] != MAGIC {
            return Err(HeartbeatError::NotAHeartbeat);
        }
        let [_, node, version, public_addr, cluster_addr, started, sent, state, load, sockets, capabilities] =
            lines[..]
        else {
            return Err(HeartbeatError::TooShort(lines.len()));
        };
        check_words(node, version, public_addr, cluster_addr)?;
        let started_ms = parse_number(started).ok_or(HeartbeatError::Started)?;
        let sent_ms = parse_number(sent).ok_or(HeartbeatError::Sent)?;
        let state = NodeState::parse(state).ok_or(HeartbeatError::State)?;
        let (resident, pool) = load
            .split_once('/')
            .and_then(|(resident, pool)| Some((parse_number(resident)?, parse_number(pool)?)))
            .ok_or(HeartbeatError::Load)?;
        let sockets = parse_number(sockets).ok_or(HeartbeatError::Sockets)?;
        Ok(Self {
            node: node.to_owned(),
            version: version.to_owned(),
            public_addr: public_addr.to_owned(),
            cluster_addr: cluster_addr.to_owned(),
            started_ms,
            sent_ms,
            state,
            resident,
            pool,
            sockets,
            capabilities: Capabilities::parse(capabilities),
        })
    }

    /// Whether [`Heartbeat::format`] writes a record [`Heartbeat::parse`]
    /// reads back: the node id, version and addresses are valid (the
    /// numbers, state and capabilities always are). For a writer, once.
    pub fn check(&self) -> Result<(), HeartbeatError> {
        check_words(&self.node, &self.version, &self.public_addr, &self.cluster_addr)
    }

    /// Whether the node is alive at `now_ms`, by [`is_live`].
    pub fn is_live(&self, now_ms: u64, failover_wait: Duration) -> bool {
        is_live(self.sent_ms, now_ms, failover_wait)
    }
}

/// Whether a node whose last heartbeat was sent at `sent_ms` is alive at
/// `now_ms`: while `now - sent <= failover_wait`. A heartbeat from the
/// future (the clocks of two nodes differ) is live: only age kills.
pub fn is_live(sent_ms: u64, now_ms: u64, failover_wait: Duration) -> bool {
    let wait_ms = u64::try_from(failover_wait.as_millis()).unwrap_or(u64::MAX);
    now_ms.saturating_sub(sent_ms) <= wait_ms
}

/// Whether `s` is a node id: named like a class, 1-63 of `a-z0-9-_`,
/// starting with a letter (it stands in signatures and metric labels).
pub fn is_node_id(s: &str) -> bool {
    ClassName::parse(s).is_ok()
}

/// Lines 2 to 5, in order.
fn check_words(node: &str, version: &str, public_addr: &str, cluster_addr: &str) -> Result<(), HeartbeatError> {
    if !is_node_id(node) {
        return Err(HeartbeatError::Node);
    }
    if !is_word(version) {
        return Err(HeartbeatError::Version);
    }
    if !is_word(public_addr) {
        return Err(HeartbeatError::PublicAddr);
    }
    if !is_word(cluster_addr) {
        return Err(HeartbeatError::ClusterAddr);
    }
    Ok(())
}

/// A version or an address: one or more visible ASCII characters, so no
/// space, no control character and no line end.
fn is_word(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic())
}

/// A decimal `u64`: digits only (no sign, no space), leading zeros allowed.
fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn heartbeat() -> Heartbeat {
        Heartbeat {
            node: "node-a_1".to_owned(),
            version: "0.1.0".to_owned(),
            public_addr: "203.0.113.7:443".to_owned(),
            cluster_addr: "[2001:db8::7]:4433".to_owned(),
            started_ms: 1_700_000_000_000,
            sent_ms: 1_700_000_123_456,
            state: NodeState::Serving,
            resident: 12,
            pool: 64,
            sockets: 3,
            capabilities: Capabilities::OURS,
        }
    }

    const RECORD: &str = "wasmkeep-heartbeat 1\nnode-a_1\n0.1.0\n203.0.113.7:443\n[2001:db8::7]:4433\n\
                          1700000000000\n1700000123456\nserving\n12/64\n3\ntake front handoff";

    /// The record's lines with line `n` (1-based) replaced by `value`.
    fn with_line(n: usize, value: &str) -> String {
        let mut lines: Vec<&str> = RECORD.split('\n').collect();
        lines[n - 1] = value;
        lines.join("\n")
    }

    #[test]
    fn a_heartbeat_is_written_as_the_design_says() {
        assert_eq!(heartbeat().format(), RECORD);
        assert_eq!(RECORD.split('\n').count(), LINES);
        assert_eq!(heartbeat().check(), Ok(()));
    }

    #[test]
    fn a_heartbeat_reads_back_what_was_written() {
        let mut h = heartbeat();
        assert_eq!(Heartbeat::parse(&h.format()), Ok(h.clone()));
        h.state = NodeState::Draining;
        h.capabilities = Capabilities::NONE;
        h.started_ms = 0;
        h.sent_ms = u64::MAX;
        h.resident = 0;
        h.pool = u64::MAX;
        h.sockets = u64::MAX;
        h.node = "n".to_owned();
        h.version = "1.2.3-rc.1+build.5".to_owned();
        assert_eq!(Heartbeat::parse(&h.format()), Ok(h.clone()));
        for capabilities in [
            Capabilities { take: true, ..Capabilities::NONE },
            Capabilities { front: true, ..Capabilities::NONE },
            Capabilities { handoff: true, ..Capabilities::NONE },
            Capabilities { take: true, handoff: true, front: false },
        ] {
            h.capabilities = capabilities;
            assert_eq!(Heartbeat::parse(&h.format()), Ok(h.clone()), "{capabilities:?}");
        }
    }

    #[test]
    fn a_node_without_capabilities_writes_an_empty_line_eleven() {
        let h = Heartbeat { capabilities: Capabilities::NONE, ..heartbeat() };
        let record = h.format();
        assert!(record.ends_with("\n3\n"), "{record:?}");
        assert_eq!(Heartbeat::parse(&record), Ok(h.clone()));
        // A trailing newline after the empty line 11 is tolerated too.
        assert_eq!(Heartbeat::parse(&format!("{record}\n")), Ok(h));
    }

    #[test]
    fn a_trailing_newline_crlf_and_lines_past_eleven_are_tolerated() {
        let h = heartbeat();
        assert_eq!(Heartbeat::parse(&format!("{RECORD}\n")), Ok(h.clone()));
        assert_eq!(Heartbeat::parse(&RECORD.replace('\n', "\r\n")), Ok(h.clone()));
        assert_eq!(Heartbeat::parse(&format!("{}\r\n", RECORD.replace('\n', "\r\n"))), Ok(h.clone()));
        assert_eq!(
            Heartbeat::parse(&format!("{RECORD}\nline 12\n\n not even words \u{7f}\nwasmkeep-heartbeat 2")),
            Ok(h)
        );
        // Some lines `\r\n`, some `\n`.
        let mixed = RECORD.replacen('\n', "\r\n", 4);
        assert_eq!(Heartbeat::parse(&mixed), Ok(heartbeat()));
    }

    #[test]
    fn only_one_carriage_return_ends_a_line() {
        assert_eq!(Heartbeat::parse(&with_line(8, "serving\r\r")), Err(HeartbeatError::State));
        assert_eq!(Heartbeat::parse(&with_line(1, "wasmkeep-heartbeat 1\r\r")), Err(HeartbeatError::NotAHeartbeat));
    }

    #[test]
    fn line_one_must_be_exactly_the_magic() {
        for bad in [
            "",
            "wasmkeep-heartbeat 2",
            "wasmkeep-heartbeat 10",
            "wasmkeep-heartbeat",
            "wasmkeep-heartbeat  1",
            "wasmkeep-heartbeat 1 ",
            " wasmkeep-heartbeat 1",
            "Wasmkeep-heartbeat 1",
            "wasmkeep-heartbeat\t1",
        ] {
            let e = Heartbeat::parse(&with_line(1, bad)).unwrap_err();
            assert_eq!(e, HeartbeatError::NotAHeartbeat, "{bad:?}");
            assert_eq!(e.line(), Some(1));
        }
        assert_eq!(Heartbeat::parse(""), Err(HeartbeatError::NotAHeartbeat));
        assert_eq!(Heartbeat::parse("\n"), Err(HeartbeatError::NotAHeartbeat));
        assert_eq!(Heartbeat::parse("hello\nworld"), Err(HeartbeatError::NotAHeartbeat));
    }

    #[test]
    fn fewer_than_eleven_lines_is_too_short() {
        let lines: Vec<&str> = RECORD.split('\n').collect();
        for n in 1..LINES {
            let record = lines[..n].join("\n");
            let e = Heartbeat::parse(&record).unwrap_err();
            assert_eq!(e, HeartbeatError::TooShort(n), "{n} lines");
            assert_eq!(e.line(), None);
        }
        // Ten lines and a trailing newline: line 11 is there, empty.
        let ten = format!("{}\n", lines[..10].join("\n"));
        assert_eq!(Heartbeat::parse(&ten).unwrap().capabilities, Capabilities::NONE);
        // A trailing `\r\n` after ten lines likewise.
        let ten = format!("{}\r\n", lines[..10].join("\r\n"));
        assert_eq!(Heartbeat::parse(&ten).unwrap().capabilities, Capabilities::NONE);
    }

    #[test]
    fn every_malformed_line_is_named() {
        use HeartbeatError::*;
        let cases: &[(usize, &str, HeartbeatError)] = &[
            (2, "", Node),
            (2, "Node-a", Node),
            (2, "1node", Node),
            (2, "_node", Node),
            (2, "node a", Node),
            (2, "node.a", Node),
            (2, &"n".repeat(64), Node),
            (3, "", Version),
            (3, "0.1.0 beta", Version),
            (3, "0.1.0\t", Version),
            (3, "0.1.0\u{7f}", Version),
            (3, "0.1.0-é", Version),
            (4, "", PublicAddr),
            (4, "203.0.113.7: 443", PublicAddr),
            (4, " 203.0.113.7:443", PublicAddr),
            (4, "203.0.113.7:443\t", PublicAddr),
            (4, "ex\u{0}ample:443", PublicAddr),
            (4, "exämple.org:443", PublicAddr),
            (5, "", ClusterAddr),
            (5, "[::1] :4433", ClusterAddr),
            (5, "[::1]:4433\u{b}", ClusterAddr),
            (6, "", Started),
            (6, "-1", Started),
            (6, "+1", Started),
            (6, "1.5", Started),
            (6, " 1", Started),
            (6, "1e3", Started),
            (6, "18446744073709551616", Started),
            (7, "", Sent),
            (7, "now", Sent),
            (7, "18446744073709551616", Sent),
            (8, "", State),
            (8, "Serving", State),
            (8, "serving ", State),
            (8, "stopped", State),
            (8, "serving draining", State),
            (9, "", Load),
            (9, "12", Load),
            (9, "12/", Load),
            (9, "/64", Load),
            (9, "/", Load),
            (9, "12/64/1", Load),
            (9, "12 / 64", Load),
            (9, "+12/64", Load),
            (9, "12/-64", Load),
            (9, "12/18446744073709551616", Load),
            (9, "12:64", Load),
            (10, "", Sockets),
            (10, "-3", Sockets),
            (10, "3 ", Sockets),
            (10, "three", Sockets),
            (10, "18446744073709551616", Sockets),
        ];
        for (line, value, error) in cases {
            let e = Heartbeat::parse(&with_line(*line, value)).unwrap_err();
            assert_eq!(&e, error, "line {line}: {value:?}");
            assert_eq!(e.line(), Some(*line), "line {line}: {value:?}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
    }

    #[test]
    fn the_first_bad_line_is_the_one_named() {
        let record = with_line(3, "").replace("\nserving\n", "\nstopped\n");
        assert_eq!(Heartbeat::parse(&record), Err(HeartbeatError::Version));
        let record = with_line(6, "x").replace("\n12/64\n", "\nx\n");
        assert_eq!(Heartbeat::parse(&record), Err(HeartbeatError::Started));
    }

    #[test]
    fn numbers_may_have_leading_zeros_and_reach_u64_max() {
        let h = Heartbeat::parse(&with_line(9, "007/0064")).unwrap();
        assert_eq!((h.resident, h.pool), (7, 64));
        let h = Heartbeat::parse(&with_line(10, "18446744073709551615")).unwrap();
        assert_eq!(h.sockets, u64::MAX);
        // More residents than the pool holds is what the node says; read as is.
        let h = Heartbeat::parse(&with_line(9, "65/64")).unwrap();
        assert_eq!((h.resident, h.pool), (65, 64));
    }

    #[test]
    fn the_states_are_two_words() {
        assert_eq!(Heartbeat::parse(&with_line(8, "draining")).unwrap().state, NodeState::Draining);
        for state in [NodeState::Serving, NodeState::Draining] {
            assert_eq!(NodeState::parse(state.as_str()), Some(state));
        }
        assert_eq!(NodeState::parse("DRAINING"), None);
    }

    #[test]
    fn capabilities_are_written_in_a_fixed_order() {
        assert_eq!(Capabilities::OURS.format(), "take front handoff");
        assert_eq!(Capabilities::NONE.format(), "");
        assert_eq!(Capabilities::default(), Capabilities::NONE);
        assert_eq!(Capabilities { handoff: true, take: true, front: false }.format(), "take handoff");
        assert_eq!(Capabilities { front: true, ..Capabilities::NONE }.format(), "front");
        assert_eq!(Capabilities::OURS, Capabilities { take: true, front: true, handoff: true });
    }

    #[test]
    fn unknown_capability_words_are_ignored() {
        assert_eq!(Capabilities::parse("handoff front take"), Capabilities::OURS);
        assert_eq!(
            Capabilities::parse("  take   teleport handoff  "),
            Capabilities { take: true, handoff: true, front: false }
        );
        assert_eq!(Capabilities::parse("Take FRONT hand-off handoffs fronts"), Capabilities::NONE);
        assert_eq!(Capabilities::parse(""), Capabilities::NONE);
        assert_eq!(Capabilities::parse("take take"), Capabilities { take: true, ..Capabilities::NONE });
        // Separated by spaces only: a tab joins two words into an unknown one.
        assert_eq!(Capabilities::parse("take\tfront"), Capabilities::NONE);
        let h = Heartbeat::parse(&with_line(11, "quic2 take \u{1f980} handoff")).unwrap();
        assert_eq!(h.capabilities, Capabilities { take: true, handoff: true, front: false });
    }

    #[test]
    fn a_node_relays_a_handoff_only_to_an_owner_announcing_it() {
        let older = Heartbeat::parse(&with_line(11, "take front")).unwrap();
        assert!(!older.capabilities.handoff);
        assert!(Heartbeat::parse(RECORD).unwrap().capabilities.handoff);
    }

    #[test]
    fn check_refuses_what_parse_would() {
        let bad = [
            (Heartbeat { node: "Node".to_owned(), ..heartbeat() }, HeartbeatError::Node),
            (Heartbeat { version: String::new(), ..heartbeat() }, HeartbeatError::Version),
            (Heartbeat { public_addr: "a b".to_owned(), ..heartbeat() }, HeartbeatError::PublicAddr),
            (Heartbeat { cluster_addr: "a\nb".to_owned(), ..heartbeat() }, HeartbeatError::ClusterAddr),
        ];
        for (h, error) in bad {
            assert_eq!(h.check(), Err(error), "{h:?}");
            assert!(Heartbeat::parse(&h.format()).is_err(), "{h:?}");
        }
    }

    #[test]
    fn a_node_is_live_while_its_heartbeat_is_no_older_than_the_wait() {
        let wait = FAILOVER_WAIT;
        let sent = 1_700_000_000_000;
        assert!(is_live(sent, sent, wait));
        assert!(is_live(sent, sent + 1, wait));
        assert!(is_live(sent, sent + 10_000, wait));
        assert!(!is_live(sent, sent + 10_001, wait));
        assert!(!is_live(sent, sent + 3_600_000, wait));
        assert!(!is_live(0, u64::MAX, wait));
        // From the future: another node's clock runs ahead; alive.
        assert!(is_live(sent + 60_000, sent, wait));
        assert!(is_live(u64::MAX, 0, wait));
        // A wait of zero: alive only in the heartbeat's own millisecond.
        assert!(is_live(sent, sent, Duration::ZERO));
        assert!(!is_live(sent, sent + 1, Duration::ZERO));
        // Parts of a millisecond do not count.
        assert!(is_live(sent, sent + 10, MS(10) + Duration::from_micros(999)));
        assert!(!is_live(sent, sent + 11, MS(10) + Duration::from_micros(999)));
        // A wait past u64 milliseconds never ends.
        assert!(is_live(0, u64::MAX, Duration::MAX));
        assert!(is_live(0, u64::MAX, MS(u64::MAX)));
        // The heartbeat's own method.
        let h = heartbeat();
        assert!(h.is_live(h.sent_ms + 10_000, wait));
        assert!(!h.is_live(h.sent_ms + 10_001, wait));
    }

    #[test]
    fn the_constants_are_the_designs() {
        assert_eq!(MAGIC, "wasmkeep-heartbeat 1");
        assert_eq!(LINES, 11);
        assert_eq!(INTERVAL, Duration::from_secs(1));
        assert_eq!(FAILOVER_WAIT, Duration::from_secs(10));
        assert!(INTERVAL < FAILOVER_WAIT);
        assert_eq!([TAKE, FRONT, HANDOFF], ["take", "front", "handoff"]);
    }

    #[test]
    fn node_ids_are_named_like_classes() {
        for good in ["a", "node-1", "n_2", &"a".repeat(63), "a-", "z9"] {
            assert!(is_node_id(good), "{good:?}");
        }
        for bad in ["", "1a", "-a", "_a", "A", "nodé", "node 1", "node.1", "node/1", &"a".repeat(64)] {
            assert!(!is_node_id(bad), "{bad:?}");
        }
    }
}
