//! Request bodies from clients: paced (after a grace, a minimum rate, or
//! the request fails), counted against the node's budget of buffered body
//! bytes (past it, the body waits, within its pace, then fails `503`),
//! and stripped of the host's header range in their trailers. Actor bodies
//! are read whole up to the body limit; a front's small body is read
//! before it takes a slot.

use std::any::Any;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmkeep_actors::ClientBodyError as BodyError;
use wasmkeep_actors::RequestPlace;
use wasmkeep_core::body_units::{self, UNIT};
use wasmkeep_core::{Failure, Limits, PortError, head};

use crate::BoxError;

/// Request body bytes held across the node at once.
pub(crate) struct BodyBudget {
    units: Arc<Semaphore>,
    /// All of it, in units: no body may need more.
    capacity: u32,
}

impl BodyBudget {
    pub(crate) fn new(limits: &Limits) -> Self {
        let capacity = body_units::capacity(limits.buffered_body_bytes);
        Self { units: Arc::new(Semaphore::new(capacity as usize)), capacity }
    }
}

/// The share of the budget one request holds, and its tenant's place
/// among the tenant's requests (with the body bytes counted to the tenant):
/// given back when the last holder (its body, its event or its front
/// instance) lets go.
#[derive(Clone)]
pub(crate) struct Held {
    permit: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
    request: Arc<RequestPlace>,
}

impl Held {
    pub(crate) fn new(request: RequestPlace) -> Self {
        Self { permit: Arc::default(), request: Arc::new(request) }
    }

    fn add(&self, permit: OwnedSemaphorePermit) {
        let mut held = self.permit.lock().unwrap_or_else(|p| p.into_inner());
        match held.as_mut() {
            Some(p) => p.merge(permit),
            None => *held = Some(permit),
        }
    }
}

/// How a body that could not be read is answered.
fn failure(e: BodyError) -> Failure {
    Failure::Port(match e {
        BodyError::TooSlow => PortError::BodyTooSlow,
        BodyError::NodeFull => PortError::BodiesFull,
        BodyError::Broken => PortError::BodyUnreadable,
    })
}

/// A client's request body under the port's rules.
///
/// A body of declared length takes its whole share of the budget when its
/// first bytes arrive (a head alone takes nothing), so bodies never hold
/// part of the budget while waiting for the rest of it (which, with many
/// at once, would stall them all); a chunked body takes its share frame by
/// frame. A body that needs more than the whole budget fails at once. The
/// time a body waits for the budget is at most the grace in all, and does
/// not count against its pace: the wait is the node's, not the client's.
pub(crate) struct Paced {
    inner: Incoming,
    started: tokio::time::Instant,
    received: u64,
    /// The declared length (0: none): its first bytes take its share.
    declared: u64,
    /// Units of the budget taken so far.
    units_held: u64,
    limits: Arc<Limits>,
    budget: Arc<Semaphore>,
    capacity: u32,
    held: Held,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// A wait for the budget: the frame it is for, and since when.
    waiting: Option<Waiting>,
    /// How long this body has waited for the budget so far.
    waited: std::time::Duration,
    failed: bool,
}

struct Waiting {
    frame: Frame<Bytes>,
    units: u64,
    acquire: BoxFuture<'static, Option<OwnedSemaphorePermit>>,
    since: tokio::time::Instant,
}

impl Paced {
    pub(crate) fn new(inner: Incoming, limits: Arc<Limits>, budget: &BodyBudget, held: Held) -> Self {
        let started = tokio::time::Instant::now();
        let timer = Box::pin(tokio::time::sleep_until(started + limits.body_allowance(0)));
        let declared = inner.size_hint().exact().unwrap_or(0);
        Self {
            inner,
            started,
            received: 0,
            declared,
            units_held: 0,
            limits,
            budget: budget.units.clone(),
            capacity: budget.capacity,
            held,
            timer,
            waiting: None,
            waited: std::time::Duration::ZERO,
            failed: false,
        }
    }

    fn fail(&mut self, e: BodyError) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.failed = true;
        Poll::Ready(Some(Err(e)))
    }

    /// Takes `units` more of the budget now for `frame`, or starts waiting
    /// for them: `Ok(Some)` is the frame to give out now; `Err` a body
    /// larger than the budget.
    fn take_budget(&mut self, frame: Frame<Bytes>, units: u64) -> Result<Option<Frame<Bytes>>, ()> {
        if self.units_held + units > u64::from(self.capacity) {
            return Err(());
        }
        let units = units as u32;
        // The tenant's bodies hold at most its share: past it, this body
        // fails at once rather than wait ahead of another tenant's.
        if !self.held.request.take_body(u64::from(units) * UNIT, u64::from(self.capacity) * UNIT) {
            return Err(());
        }
        if let Ok(permit) = self.budget.clone().try_acquire_many_owned(units) {
            self.held.add(permit);
            self.units_held += u64::from(units);
            return Ok(Some(frame));
        }
        let budget = self.budget.clone();
        let acquire = Box::pin(async move { budget.acquire_many_owned(units).await.ok() });
        let now = tokio::time::Instant::now();
        let left = self.limits.body_grace().saturating_sub(self.waited);
        self.timer.as_mut().reset(now + left);
        self.waiting = Some(Waiting { frame, units: u64::from(units), acquire, since: now });
        Ok(None)
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        loop {
            if let Some(waiting) = this.waiting.as_mut() {
                match waiting.acquire.as_mut().poll(cx) {
                    Poll::Ready(Some(permit)) => {
                        this.held.add(permit);
                        let waiting = this.waiting.take().expect("a wait");
                        let waited = waiting.since.elapsed();
                        this.waited += waited;
                        this.started += waited;
                        this.units_held += waiting.units;
                        this.timer.as_mut().reset(this.started + this.limits.body_allowance(this.received));
                        return Poll::Ready(Some(Ok(waiting.frame)));
                    }
                    Poll::Ready(None) => return this.fail(BodyError::NodeFull),
                    Poll::Pending => {
                        return match this.timer.as_mut().poll(cx) {
                            Poll::Ready(()) => this.fail(BodyError::NodeFull),
                            Poll::Pending => Poll::Pending,
                        };
                    }
                }
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => {
                    ready!(this.timer.as_mut().poll(cx));
                    return this.fail(BodyError::TooSlow);
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(_))) => return this.fail(BodyError::Broken),
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            let frame = head::strip_trailers(frame);
            let Some(data) = frame.data_ref() else { return Poll::Ready(Some(Ok(frame))) };
            let len = data.len() as u64;
            this.received += len;
            let ends = this.started + this.limits.body_allowance(this.received);
            this.timer.as_mut().reset(ends);
            // The first bytes of a body of declared length take its whole
            // share; what that does not cover (a chunked body, or one longer
            // than it said) is taken as it comes, rounded up once for the
            // whole body, not per frame (a byte a frame holds its bytes).
            if len == 0 {
                return Poll::Ready(Some(Ok(frame)));
            }
            let more = body_units::more(this.units_held, this.declared.max(this.received));
            if more == 0 {
                return Poll::Ready(Some(Ok(frame)));
            }
            match this.take_budget(frame, more) {
                Ok(Some(frame)) => return Poll::Ready(Some(Ok(frame))),
                Ok(None) => continue,
                Err(()) => return this.fail(BodyError::NodeFull),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.waiting.is_none() && (self.failed || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An actor's body, read whole up to the body limit; the bytes hold their
/// share of the budget through `held` until the request is answered.
pub(crate) async fn read(body: Paced, limit: u64) -> Result<Bytes, Failure> {
    if body.size_hint().lower() > limit {
        return Err(Failure::Port(PortError::BodyTooLarge(limit)));
    }
    let mut whole = BytesMut::new();
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(failure)?;
        if let Some(data) = frame.data_ref() {
            if whole.len() as u64 + data.len() as u64 > limit {
                return Err(Failure::Port(PortError::BodyTooLarge(limit)));
            }
            whole.extend_from_slice(data);
        }
    }
    Ok(whole.freeze())
}

/// A front's body: when it is small (its whole within `prefetch` bytes),
/// read now, before the request takes a slot, so that a slow client
/// holds no slot; otherwise the first `prefetch` bytes are read now and
/// the rest streams under the body's pace.
pub(crate) async fn prefetch(mut body: Paced, prefetch: u64) -> Result<FrontRequestBody, Failure> {
    let mut read = VecDeque::new();
    let mut bytes = 0u64;
    loop {
        if bytes >= prefetch || body.is_end_stream() {
            break;
        }
        match body.frame().await {
            None => return Ok(FrontRequestBody { read, rest: None }),
            Some(frame) => {
                let frame = frame.map_err(failure)?;
                bytes += frame.data_ref().map_or(0, |d| d.len() as u64);
                read.push_back(frame);
            }
        }
    }
    let rest = (!body.is_end_stream()).then_some(body);
    Ok(FrontRequestBody { read, rest })
}

/// A front's request body: what was read before the slot, then the rest.
pub struct FrontRequestBody {
    read: VecDeque<Frame<Bytes>>,
    rest: Option<Paced>,
}

impl Body for FrontRequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(frame) = self.read.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }
}

/// An answer's body that keeps something alive (a request's place in its
/// connection, a share of the budget) until it is written or dropped.
pub(crate) struct Holding {
    inner: UnsyncBoxBody<Bytes, BoxError>,
    _held: Box<dyn Any + Send>,
}

impl Holding {
    pub(crate) fn boxed(
        inner: UnsyncBoxBody<Bytes, BoxError>,
        held: Box<dyn Any + Send>,
    ) -> UnsyncBoxBody<Bytes, BoxError> {
        UnsyncBoxBody::new(Self { inner, _held: held })
    }
}

impl Body for Holding {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
