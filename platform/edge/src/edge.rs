//! The edge: which app a request is for, and the client's headers of the
//! host's range removed before anything else reads the request.

use std::sync::Arc;

use http::request::Parts;
use wasmkeep_actors::Node;
use wasmkeep_core::host::{self, BaseDomain};
use wasmkeep_core::{AppId, AppRef, Refusal, head};

use wasmkeep_core::{Failure, PortError};

/// How the port finds a request's app.
#[derive(Debug, Clone)]
pub enum AppRouting {
    /// `wasmkeep dev`: every host name reaches the one app.
    Single(AppId),
    /// `wasmkeep serve`: `<app>.<tenant>.<base domain>` reaches that
    /// tenant's app, named by the absolute-form target's authority when
    /// there is one, else by `Host` (never by `X-Forwarded-Host`).
    ByHost(BaseDomain),
}

impl AppRouting {
    pub(crate) fn app_for(&self, parts: &Parts, node: &Node) -> Result<Arc<AppRef>, Refusal> {
        match self {
            Self::Single(app) => node.app_ref(*app).ok_or(Refusal::NoSuchApp),
            Self::ByHost(base) => {
                let authority = host::request_authority(&parts.uri, parts.headers.get(http::header::HOST));
                let (tenant, app) = authority.and_then(|a| host::app_of(a, base)).ok_or(Refusal::NoSuchApp)?;
                node.app_named(&tenant, &app)
            }
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
