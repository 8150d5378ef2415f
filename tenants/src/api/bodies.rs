//! Request bodies of the API, read as the public port reads its own: paced
//! (after a grace, a minimum rate, or `408`; and whole within
//! `api_body_secs` however paced, or `408`), and held within budgets that
//! no one party can exhaust: the bytes the API holds across the node (past
//! them a body waits, within the grace, then `503`), the bytes one tenant
//! holds (past them `503` at once, so that a tenant waits behind nobody but
//! itself), the bytes of callers without an account together (sign-ups, a
//! small share, `503` at once past it), and the uploads one tenant has in
//! flight. A body takes of the budgets what its bytes fill as they come,
//! not what it declares: a body trickling in holds only what has come. An
//! upload's share is held until its version is compiled and stored, even
//! when its client has left: the bundle is parsed, decoded and compiled
//! from those bytes; its decoding takes its components' bytes more of the
//! node's budget until the body is dropped (`beside`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use wasmkeep_core::body_units::{self, UNIT};
use wasmkeep_core::{Limits, TenantId};

use super::ApiError;

/// Callers without an account (sign-ups; the operator's few bodies) share
/// this part of the node's budget: anyone can open many of them, so they
/// never starve the tenants' uploads.
const ANONYMOUS_PART: u64 = 16;

/// What each tenant's bodies hold now; `None` for those of callers
/// without an account, together.
type Tenants = Arc<Mutex<HashMap<Option<TenantId>, Held>>>;

/// What the API's bodies hold, across the node and per tenant.
pub struct BodyBudget {
    units: Arc<Semaphore>,
    /// All of it, in units: no body may need more.
    capacity: u32,
    per_tenant_bytes: u64,
    anonymous_bytes: u64,
    uploads_per_tenant: u32,
    tenants: Tenants,
    limits: Limits,
}

#[derive(Default)]
struct Held {
    bytes: u64,
    uploads: u32,
}

/// One body's share of the budgets, given back on drop.
pub struct BodyShare {
    permit: Option<OwnedSemaphorePermit>,
    tenant: Option<TenantId>,
    tenants: Tenants,
    /// Of the node's, in units (the tenant's or the anonymous share holds
    /// as many KiB).
    units: u64,
    upload: bool,
}

impl Drop for BodyShare {
    fn drop(&mut self) {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = tenants.get_mut(&self.tenant) {
            held.bytes -= self.units * UNIT;
            held.uploads -= u32::from(self.upload);
            if held.bytes == 0 && held.uploads == 0 {
                tenants.remove(&self.tenant);
            }
        }
    }
}

/// Who a body is read for, and what it is.
pub struct Reading<'a> {
    /// The tenant it counts to, once the caller is known (a sign-up's is
    /// not: it counts to the share of callers without an account).
    pub tenant: Option<&'a TenantId>,
    /// An upload: counted among the tenant's uploads in flight.
    pub upload: bool,
    /// Its bound in bytes; past it `413`.
    pub limit: usize,
    /// What it is, for the error (`the upload`).
    pub what: &'a str,
}

impl BodyBudget {
    pub fn new(limits: &Limits) -> Self {
        let capacity = body_units::capacity(limits.api_body_bytes);
        let all = u64::from(capacity) * UNIT;
        // At least one JSON body's worth, or a sign-up could never be read.
        let anonymous_bytes = (all / ANONYMOUS_PART).max(super::JSON_BYTES_MAX as u64).min(all);
        Self {
            units: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            per_tenant_bytes: limits.api_body_bytes_for_one_tenant(),
            anonymous_bytes,
            uploads_per_tenant: limits.uploads_per_tenant,
            tenants: Arc::default(),
            limits: limits.clone(),
        }
    }

    /// Reads `body` whole under the rules above: its bytes and its share,
    /// to be held for as long as the bytes (or what is made of them) are.
    pub async fn read(&self, body: axum::body::Body, reading: Reading<'_>) -> Result<(Bytes, BodyShare), ApiError> {
        let Reading { tenant, upload, limit, what } = reading;
        let too_large = || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("{what} is over {limit} bytes"));
        let declared = http_body::Body::size_hint(&body).exact();
        if http_body::Body::size_hint(&body).lower() > limit as u64 {
            return Err(too_large());
        }
        // A declared length that could never fit is refused before a byte
        // is read; one larger than what is free now starts, and waits (or
        // is refused) when its bytes reach the budget.
        if let Some(n) = declared {
            self.fits(tenant.is_some(), n.div_ceil(UNIT), what)?;
        }
        let mut share = self.enter(tenant, upload)?;
        let started = Instant::now();
        // However well paced, a body is whole within this: its bytes hold
        // the budgets for no longer.
        let whole_by = Duration::try_from_secs_f64(self.limits.api_body_secs).ok().and_then(|d| started.checked_add(d));
        // Time spent waiting for the node's budget is the node's, not the
        // client's: it does not count against the body's pace.
        let mut waited = Duration::ZERO;
        let mut bytes = BytesMut::new();
        let mut body = body;
        loop {
            let received = bytes.len() as u64;
            let paced_by = started + waited + self.limits.body_allowance(received);
            let deadline = whole_by.map_or(paced_by, |w| w.min(paced_by));
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) if whole_by.is_some_and(|w| w <= paced_by) => return Err(self.too_long(what)),
                Err(_) => return Err(self.too_slow(what)),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(ApiError::bad_request(format!("{what} could not be read"))),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else { continue };
            let now = received + data.len() as u64;
            if now > limit as u64 {
                return Err(too_large());
            }
            if declared.is_some_and(|n| now > n) {
                // More than declared: hyper refuses it; never count past.
                return Err(ApiError::bad_request(format!("{what} could not be read")));
            }
            // The units its bytes fill so far, whatever its frames' sizes.
            let more = body_units::more(share.units, now);
            if more > 0 {
                waited += self.take(&mut share, more, whole_by, what).await?;
            }
            bytes.extend_from_slice(&data);
        }
        Ok((bytes.freeze(), share))
    }

    /// `413` when a body of `units` could never be held: it is more than
    /// the node's API holds at once, or than its caller's share.
    fn fits(&self, tenant: bool, units: u64, what: &str) -> Result<(), ApiError> {
        let never = |whose: &str, bytes: u64| {
            let message = format!("{what} is larger than {whose} ({bytes} bytes)");
            Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message))
        };
        if units > u64::from(self.capacity) {
            return never("this node's API takes at once", u64::from(self.capacity) * UNIT);
        }
        if tenant && units * UNIT > self.per_tenant_bytes {
            return never("one account's share of this node's API", self.per_tenant_bytes);
        }
        if !tenant && units * UNIT > self.anonymous_bytes {
            return never("this node's API takes without an account", self.anonymous_bytes);
        }
        Ok(())
    }

    /// A share with nothing taken yet: the tenant's upload counted, if it
    /// is one and the tenant has room for it.
    fn enter(&self, tenant: Option<&TenantId>, upload: bool) -> Result<BodyShare, ApiError> {
        let tenant = tenant.cloned();
        if let (Some(_), true) = (&tenant, upload) {
            let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
            let held = tenants.entry(tenant.clone()).or_default();
            if held.uploads >= self.uploads_per_tenant {
                let most = self.uploads_per_tenant;
                return Err(ApiError::busy(format!(
                    "the account has {most} uploads in flight already; retry when one ends"
                )));
            }
            held.uploads += 1;
        }
        Ok(BodyShare { permit: None, tenant, tenants: self.tenants.clone(), units: 0, upload })
    }

    /// Takes `units` more of the budgets for `share`: of its caller's share
    /// (the tenant's, or that of callers without an account) at once or
    /// `503`, then of the node's, waiting at most the grace (and never past
    /// `whole_by`); a body that could never fit is `413`. How long it
    /// waited.
    async fn take(
        &self,
        share: &mut BodyShare,
        units: u64,
        whole_by: Option<Instant>,
        what: &str,
    ) -> Result<Duration, ApiError> {
        self.fits(share.tenant.is_some(), share.units + units, what)?;
        let taken = units * UNIT;
        {
            let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
            let held = tenants.entry(share.tenant.clone()).or_default();
            let (bound, full) = match share.tenant {
                Some(_) => (self.per_tenant_bytes, "the account's bodies hold"),
                None => (self.anonymous_bytes, "bodies sent without an account hold"),
            };
            if held.bytes + taken > bound {
                if held.bytes == 0 && held.uploads == 0 {
                    tenants.remove(&share.tenant);
                }
                return Err(ApiError::busy(format!("{full} their share of this node's API; retry shortly")));
            }
            held.bytes += taken;
        }
        // Counted to the caller's share from here: given back on drop.
        share.units += units;
        let units = units as u32;
        let asked = Instant::now();
        let permit = match self.units.clone().try_acquire_many_owned(units) {
            Ok(permit) => permit,
            Err(_) => {
                let waiting = self.units.clone().acquire_many_owned(units);
                let until =
                    whole_by.map_or(asked + self.limits.body_grace(), |w| w.min(asked + self.limits.body_grace()));
                match tokio::time::timeout_at(until, waiting).await {
                    Ok(Ok(permit)) => permit,
                    _ => return Err(ApiError::busy("this node's API is reading too many bodies; retry shortly")),
                }
            }
        };
        match &mut share.permit {
            Some(held) => held.merge(permit),
            None => share.permit = Some(permit),
        }
        Ok(asked.elapsed())
    }

    /// `bytes` more of the node's budget beside `share`, for what is made
    /// of a body while the body is still held (an upload's components,
    /// decoded): waiting at most the grace, `503` past it, `413` when the
    /// two could never be held together. Given back when dropped.
    pub async fn beside(&self, share: &BodyShare, bytes: u64, what: &str) -> Result<OwnedSemaphorePermit, ApiError> {
        let units = bytes.div_ceil(UNIT);
        if share.units + units > u64::from(self.capacity) {
            let all = u64::from(self.capacity) * UNIT;
            let message = format!(
                "{what}, with its components decoded, is larger than this node's API takes at once ({all} bytes)"
            );
            return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message));
        }
        let waiting = self.units.clone().acquire_many_owned(units as u32);
        match tokio::time::timeout(self.limits.body_grace(), waiting).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(ApiError::busy("this node's API is reading too many bodies; retry shortly")),
        }
    }

    fn too_slow(&self, what: &str) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "{what} came too slowly: after {} s a body must arrive at {} bytes/s at least",
                self.limits.body_grace_secs, self.limits.body_min_rate
            ),
        )
    }

    fn too_long(&self, what: &str) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!("{what} took too long: a body must arrive whole within {} s", self.limits.api_body_secs),
        )
    }
}
