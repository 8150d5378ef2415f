//! Request bodies of the API, read as the public port reads its own: paced
//! (after a grace, a minimum rate, or `408`), and held within budgets that
//! no one party can exhaust: the bytes the API holds across the node (past
//! them a body waits, within the grace, then `503`), the bytes one tenant
//! holds (past them `503` at once, so that a tenant waits behind nobody but
//! itself), and the uploads one tenant has in flight. An upload's share is
//! held until its handler ends: the bundle is parsed, decoded and compiled
//! from those bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use wasmkeep_core::{Limits, TenantId};

use super::ApiError;

/// The budget is counted in KiB: a semaphore's permits are `u32`s.
const UNIT: u64 = 1024;

/// What each tenant's bodies hold now.
type Tenants = Arc<Mutex<HashMap<TenantId, Held>>>;

/// What the API's bodies hold, across the node and per tenant.
pub struct BodyBudget {
    units: Arc<Semaphore>,
    /// All of it, in units: no body may need more.
    capacity: u32,
    per_tenant_bytes: u64,
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
    _permits: Vec<OwnedSemaphorePermit>,
    tenant: Option<(TenantId, Tenants)>,
    /// Of the tenant's, in bytes; of the node's, in units.
    bytes: u64,
    units: u64,
    upload: bool,
}

impl Drop for BodyShare {
    fn drop(&mut self) {
        let Some((tenant, tenants)) = &self.tenant else { return };
        let mut tenants = tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = tenants.get_mut(tenant) {
            held.bytes -= self.bytes;
            held.uploads -= u32::from(self.upload);
            if held.bytes == 0 && held.uploads == 0 {
                tenants.remove(tenant);
            }
        }
    }
}

/// Who a body is read for, and what it is.
pub struct Reading<'a> {
    /// The tenant it counts to, once the caller is known (a sign-up's is
    /// not: it counts to the node's budget only).
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
        let capacity = (limits.api_body_bytes / UNIT).clamp(1, u32::MAX as u64) as u32;
        Self {
            units: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            per_tenant_bytes: limits.api_body_bytes_for_one_tenant(),
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
        let mut share = self.enter(tenant, upload)?;
        let started = Instant::now();
        // Time spent waiting for the node's budget is the node's, not the
        // client's: it does not count against the body's pace.
        let mut waited = std::time::Duration::ZERO;
        if let Some(n) = declared.filter(|n| *n > 0) {
            waited += self.take(&mut share, n.div_ceil(UNIT), what).await?;
        }
        let mut bytes = BytesMut::new();
        let mut body = body;
        loop {
            let received = bytes.len() as u64;
            let deadline = started + waited + self.limits.body_allowance(received);
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(self.too_slow(what)),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(ApiError::bad_request(format!("{what} could not be read"))),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else { continue };
            if received + data.len() as u64 > limit as u64 {
                return Err(too_large());
            }
            if declared.is_none() {
                // The units its bytes fill so far, whatever its frames' sizes.
                let more = (received + data.len() as u64).div_ceil(UNIT).saturating_sub(share.units);
                if more > 0 {
                    waited += self.take(&mut share, more, what).await?;
                }
            } else if received + data.len() as u64 > declared.unwrap_or(0) {
                // More than declared: hyper refuses it; never count past.
                return Err(ApiError::bad_request(format!("{what} could not be read")));
            }
            bytes.extend_from_slice(&data);
        }
        Ok((bytes.freeze(), share))
    }

    /// A share with nothing taken yet: the tenant's upload counted, if it
    /// is one and the tenant has room for it.
    fn enter(&self, tenant: Option<&TenantId>, upload: bool) -> Result<BodyShare, ApiError> {
        let tenant = tenant.map(|t| (t.clone(), self.tenants.clone()));
        if let (Some((id, tenants)), true) = (&tenant, upload) {
            let mut tenants = tenants.lock().unwrap_or_else(|p| p.into_inner());
            let held = tenants.entry(id.clone()).or_default();
            if held.uploads >= self.uploads_per_tenant {
                let most = self.uploads_per_tenant;
                return Err(ApiError::busy(format!(
                    "the account has {most} uploads in flight already; retry when one ends"
                )));
            }
            held.uploads += 1;
        }
        Ok(BodyShare { _permits: Vec::new(), tenant, bytes: 0, units: 0, upload })
    }

    /// Takes `units` more of the budgets for `share`: of the tenant's at
    /// once or `503`, then of the node's, waiting at most the grace; a body
    /// that could never fit is `413`. How long it waited.
    async fn take(&self, share: &mut BodyShare, units: u64, what: &str) -> Result<std::time::Duration, ApiError> {
        let never = |whose: &str, bytes: u64| {
            let message = format!("{what} is larger than {whose} ({bytes} bytes)");
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
        };
        let total = share.units + units;
        if total > u64::from(self.capacity) {
            return Err(never("this node's API takes at once", u64::from(self.capacity) * UNIT));
        }
        if share.tenant.is_some() && total * UNIT > self.per_tenant_bytes {
            return Err(never("one account's share of this node's API", self.per_tenant_bytes));
        }
        let units = units as u32;
        if let Some((tenant, tenants)) = &share.tenant {
            let mut tenants = tenants.lock().unwrap_or_else(|p| p.into_inner());
            let held = tenants.entry(tenant.clone()).or_default();
            let taken = u64::from(units) * UNIT;
            if held.bytes + taken > self.per_tenant_bytes {
                return Err(ApiError::busy("the account's bodies hold their share of this node's API; retry shortly"));
            }
            held.bytes += taken;
            share.bytes += taken;
        }
        let asked = Instant::now();
        let permit = match self.units.clone().try_acquire_many_owned(units) {
            Ok(permit) => permit,
            Err(_) => {
                let waiting = self.units.clone().acquire_many_owned(units);
                match tokio::time::timeout(self.limits.body_grace(), waiting).await {
                    Ok(Ok(permit)) => permit,
                    _ => return Err(ApiError::busy("this node's API is reading too many bodies; retry shortly")),
                }
            }
        };
        share._permits.push(permit);
        share.units += u64::from(units);
        Ok(asked.elapsed())
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
}
