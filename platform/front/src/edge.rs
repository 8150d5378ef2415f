//! The edge: which app a request is for, and the client's `x-wasmkeep-`
//! headers removed before anything else reads the request.

use http::request::Parts;
use wasmkeep_core::{AppId, header_range};

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
    header_range::strip(&mut parts.headers);
}
