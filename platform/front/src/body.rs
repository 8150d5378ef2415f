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
use wasmkeep_core::{Limits, header_range};

use crate::BoxError;
use crate::error::HttpError;

/// The budget is counted in KiB: a semaphore's permits are `u32`s.
const UNIT: u64 = 1024;

/// Request body bytes held across the node at once.
pub(crate) struct BodyBudget(Arc<Semaphore>);

impl BodyBudget {
    pub(crate) fn new(limits: &Limits) -> Self {
        let units = (limits.buffered_body_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS as u64);
        Self(Arc::new(Semaphore::new(units as usize)))
    }
}

/// The share of the budget one request holds: given back when the last
/// holder (its body, its event or its front instance) lets go.
#[derive(Clone, Default)]
pub(crate) struct Held(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl Held {
    fn add(&self, permit: OwnedSemaphorePermit) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match held.as_mut() {
            Some(p) => p.merge(permit),
            None => *held = Some(permit),
        }
    }
}

impl From<BodyError> for HttpError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooSlow => HttpError::BodyTooSlow,
            BodyError::NodeFull => HttpError::BodiesFull,
            BodyError::Broken => HttpError::BodyUnreadable,
        }
    }
}

/// A client's request body under the port's rules.
pub(crate) struct Paced {
    inner: Incoming,
    started: tokio::time::Instant,
    received: u64,
    limits: Arc<Limits>,
    budget: Arc<Semaphore>,
    held: Held,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// A frame waiting for its share of the budget.
    waiting: Option<(Frame<Bytes>, BoxFuture<'static, Option<OwnedSemaphorePermit>>)>,
    failed: bool,
}

impl Paced {
    pub(crate) fn new(inner: Incoming, limits: Arc<Limits>, budget: &BodyBudget, held: Held) -> Self {
        let started = tokio::time::Instant::now();
        let timer = Box::pin(tokio::time::sleep_until(started + limits.body_allowance(0)));
        Self {
            inner,
            started,
            received: 0,
            limits,
            budget: budget.0.clone(),
            held,
            timer,
            waiting: None,
            failed: false,
        }
    }

    fn fail(&mut self, e: BodyError) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.failed = true;
        Poll::Ready(Some(Err(e)))
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
            if let Some((_, acquire)) = this.waiting.as_mut() {
                match acquire.as_mut().poll(cx) {
                    Poll::Ready(Some(permit)) => {
                        this.held.add(permit);
                        let (frame, _) = this.waiting.take().expect("a frame waits");
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    Poll::Ready(None) => return this.fail(BodyError::NodeFull),
                    Poll::Pending => {
                        // The wait for the budget is within the body's pace.
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
            let frame = header_range::strip_trailers(frame);
            let Some(data) = frame.data_ref() else { return Poll::Ready(Some(Ok(frame))) };
            let len = data.len() as u64;
            this.received += len;
            let ends = this.started + this.limits.body_allowance(this.received);
            this.timer.as_mut().reset(ends);
            let units = len.div_ceil(UNIT) as u32;
            if units == 0 {
                return Poll::Ready(Some(Ok(frame)));
            }
            match this.budget.clone().try_acquire_many_owned(units) {
                Ok(permit) => {
                    this.held.add(permit);
                    return Poll::Ready(Some(Ok(frame)));
                }
                Err(_) => {
                    let budget = this.budget.clone();
                    let acquire = Box::pin(async move { budget.acquire_many_owned(units).await.ok() });
                    this.waiting = Some((frame, acquire));
                }
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
pub(crate) async fn read(body: Paced, limit: u64) -> Result<Bytes, HttpError> {
    if body.size_hint().lower() > limit {
        return Err(HttpError::BodyTooLarge(limit));
    }
    let mut whole = BytesMut::new();
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        if let Some(data) = frame.data_ref() {
            if whole.len() as u64 + data.len() as u64 > limit {
                return Err(HttpError::BodyTooLarge(limit));
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
pub(crate) async fn prefetch(mut body: Paced, prefetch: u64) -> Result<FrontRequestBody, HttpError> {
    let mut read = VecDeque::new();
    let mut bytes = 0u64;
    loop {
        if bytes >= prefetch || body.is_end_stream() {
            break;
        }
        match body.frame().await {
            None => return Ok(FrontRequestBody { read, rest: None }),
            Some(frame) => {
                let frame = frame?;
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
