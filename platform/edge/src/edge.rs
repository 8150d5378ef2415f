//! The edge: which app a request is for, the client's headers of the
//! host's range removed before anything else reads the request, and the
//! envelope an actor's event leaves the port with.

use std::sync::Arc;
use std::time::Instant;

use http::request::Parts;
use wasmkeep_actors::Node;
use wasmkeep_core::deadline::event_deadline;
use wasmkeep_core::{AppId, AppRef, Envelope, Origin, RawAddress, TraceContext, head};

use wasmkeep_core::{Failure, PortError};

/// How the port finds a request's app.
#[derive(Debug, Clone)]
pub enum AppRouting {
    /// `wasmkeep dev`: every host name reaches the one app.
    Single(AppId),
}

impl AppRouting {
    pub(crate) fn app_for(&self, _parts: &Parts) -> Option<AppId> {
        match self {
            Self::Single(app) => Some(*app),
        }
    }
}

/// Removes every header of the host's range that the client sent.
pub(crate) fn strip_client_headers(parts: &mut Parts) {
    head::strip(&mut parts.headers);
}

/// An HTTP/1.1 request names its host in exactly one `Host` header (RFC
/// 9112 §3.2), in absolute form too: otherwise it is a `400`, whatever its
/// path. HTTP/2 carries `:authority` instead; an HTTP/1.0 request may omit
/// it (the front, which needs a host, checks again).
pub(crate) fn check_host(parts: &Parts) -> Result<(), Failure> {
    let hosts = parts.headers.get_all(http::header::HOST).iter().count();
    let needs_one = parts.version == http::Version::HTTP_11;
    if hosts > 1 || (needs_one && hosts == 0) {
        return Err(Failure::Port(PortError::NoHost));
    }
    Ok(())
}

/// The envelope of an event the port sends to an actor, built once here:
/// it waits at most the call limit from now.
pub(crate) fn envelope(
    node: &Node,
    app: &Arc<AppRef>,
    target: RawAddress,
    origin: Origin,
    trace: TraceContext,
) -> Envelope {
    let deadline = event_deadline(Instant::now(), node.limits_for(app).call_limit());
    Envelope { app: app.clone(), target, origin, deadline, trace }
}
