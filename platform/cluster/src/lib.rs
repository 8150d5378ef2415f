//! The cluster: nodes sharing one store, each actor owned by one node,
//! other nodes reaching it by signed hops over QUIC.
//!
//! This crate holds what only a cluster needs: the cluster directory
//! (`cluster_dir`: the CA, the nodes' identities, the shared secrets), TLS
//! between nodes (`tls`), the signature of a hop (`signing`), the QUIC
//! transport that carries hops (`transport`) and a call's bytes on it
//! (`wire`), the heartbeat (`membership`), the router's remote route over
//! all of them (`peers`), the receiving end of a hop (`hop_server`), and
//! the hop of a tail across the cluster (`tail`).
//! The node's own paths (`actors`) reach another node through the router's
//! remote route, built on these.

pub mod cluster_dir;
pub mod hop_server;
pub mod membership;
pub mod peers;
pub mod signing;
pub mod tail;
pub mod tls;
pub mod transport;
pub mod wire;

pub use cluster_dir::{ClusterDir, NodeId};
