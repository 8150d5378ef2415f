//! A loaded front component: one fresh instance per request, exporting
//! `wasi:http/incoming-handler`.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Body;
use tokio::sync::oneshot;
use wasmtime::component::InstancePre;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use crate::guest_log::GuestLabel;
use crate::host::{Egress, GuestConfig, GuestHost, GuestState};
use crate::loader;
use crate::share::GuestShare;
use crate::wall::{self, timer};
use crate::{DeployError, EventFailure};

/// The body of a front's answer, streamed while the guest writes it. A
/// body the guest could not finish (its wall cut it, it trapped, it was
/// stopped) ends in an error, never in a clean end: the client must not
/// take a truncated answer for a whole one. (wasi:http's own body ends
/// cleanly when its writer is dropped, whatever the reason.)
pub struct FrontBody {
    inner: HyperOutgoingBody,
    /// Whether the instance returned; sent before its store (and so the
    /// body's writer) is dropped.
    ended: oneshot::Receiver<bool>,
}

impl hyper::body::Body for FrontBody {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        use tokio::sync::oneshot::error::TryRecvError;
        match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => match self.ended.try_recv() {
                // The instance ran past the body without returning: the
                // guest finished the body itself and goes on working.
                Ok(true) | Err(TryRecvError::Empty) => Poll::Ready(None),
                Ok(false) | Err(TryRecvError::Closed) => {
                    Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpResponseIncomplete)))
                }
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        false
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Why a client's request body failed on its way into a front (the port
/// paces bodies and bounds the bytes the node holds); the guest sees a
/// failed read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClientBodyError {
    #[error("the request body arrived too slowly")]
    TooSlow,
    #[error("the node holds too many request bodies; retry shortly")]
    NodeFull,
    #[error("the request body could not be read")]
    Broken,
}

impl From<ClientBodyError> for wasmtime_wasi_http::Error {
    fn from(e: ClientBodyError) -> Self {
        match e {
            ClientBodyError::TooSlow => Self::ConnectionReadTimeout,
            ClientBodyError::NodeFull => Self::ConnectionLimitReached,
            ClientBodyError::Broken => Self::ConnectionTerminated,
        }
    }
}

/// A front instance still running after its answer's head (writing its
/// body). Dropping this lets it run to its end or its wall.
pub struct FrontRun(tokio::task::AbortHandle);

impl FrontRun {
    /// Stops the instance now: its store, its host and its slot go.
    pub fn stop(self) {
        self.0.abort();
    }
}

/// A front ready to instantiate: one per version of an app.
pub struct FrontComponent<H: GuestHost> {
    pre: ProxyPre<GuestState<H>>,
    hash: String,
    guest: GuestConfig,
    /// What an instance's memories take when it starts (`memory`).
    initial_memory: u64,
}

impl<H: GuestHost> FrontComponent<H> {
    pub(crate) fn new(pre: InstancePre<GuestState<H>>, hash: String, guest: GuestConfig) -> Result<Self, DeployError> {
        let initial_memory = crate::memory::initial_memory(pre.component());
        let pre = ProxyPre::new(pre).map_err(|e| {
            DeployError::MissingExport(format!(
                "the `wasi:http/incoming-handler@0.2` interface ({})",
                crate::one_line(&e.to_string())
            ))
        })?;
        Ok(Self { pre, hash, guest, initial_memory })
    }

    /// The SHA-256 of the component's bytes.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The bytes of memory a new instance takes from the node's budget as
    /// it starts: what admission finds room for first.
    pub fn initial_memory(&self) -> u64 {
        self.initial_memory
    }

    /// Serves one request on a fresh instance holding `host`, within the
    /// wall that `ends` then. Returns when the guest has set its answer;
    /// the guest may go on writing the body, and the instance (with
    /// `host`) lives until it returns or its wall ends.
    pub async fn handle<B>(
        self: &Arc<Self>,
        host: H,
        label: GuestLabel,
        egress: Egress,
        cpu: GuestShare,
        request: http::Request<B>,
        ends: Instant,
    ) -> Result<(http::Response<FrontBody>, FrontRun), EventFailure>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        // The guest's whole life, its instantiation and its handler, is one
        // task on the node's turns: a turn ends as the task's poll returns.
        let (this, guest_label, share) = (self.clone(), label.clone(), cpu.clone());
        let (answer, answered) = oneshot::channel();
        let (returned, ended) = oneshot::channel();
        let life = async move {
            let mut store = loader::store(this.pre.engine(), &this.guest, host, guest_label, egress, cpu, ends);
            let state = store.data_mut();
            state.egress.trace = state.host.trace().clone();
            state.output.begin(state.egress.trace.parent.clone());
            let instantiated = tokio::time::timeout_at(timer(ends), this.pre.instantiate_async(&mut store)).await;
            let proxy = loader::instantiated(&store, instantiated)?;
            let mut http = store.data_mut().http();
            let resources = http
                .new_incoming_request(Scheme::Http, request)
                .and_then(|req| Ok((req, http.new_response_outparam(answer)?)));
            let (req, out) = resources.map_err(|e| EventFailure::Trap(format!("{e:?}")))?;
            let handled = proxy.wasi_http_incoming_handler().call_handle(&mut store, req, out);
            let outcome = match tokio::time::timeout_at(timer(ends), handled).await {
                Err(_elapsed) => Err(EventFailure::Wall.logged(&store)),
                Ok(Err(e)) => Err(EventFailure::from_trap(&store, &e).logged(&store)),
                Ok(Ok(())) => {
                    wall::log_output(&store);
                    Ok(())
                }
            };
            // Before the store, and with it the body's writer, is dropped.
            let _ = returned.send(outcome.is_ok());
            drop(store);
            outcome
        };
        let run = tokio::spawn(self.guest.polls.fair(share, life));
        match answered.await {
            Ok(Ok(response)) => {
                let response = response.map(|inner| FrontBody { inner, ended });
                Ok((response, FrontRun(run.abort_handle())))
            }
            Ok(Err(code)) => {
                let detail = format!("the front answered the error {code:?}");
                crate::guest_log::failure(&label, crate::guest_log::FailureKind::Trap, &detail, None);
                Err(EventFailure::Trap(detail))
            }
            // The guest returned, trapped or ran out of wall without an
            // answer; a trap or the wall was logged where it happened.
            Err(_dropped) => match run.await {
                Ok(Err(failure)) => Err(failure),
                Ok(Ok(())) => {
                    let detail = "the front returned without an answer";
                    crate::guest_log::failure(&label, crate::guest_log::FailureKind::Trap, detail, None);
                    Err(EventFailure::Trap(detail.into()))
                }
                Err(e) => Err(EventFailure::Trap(format!("the front's task failed: {e}"))),
            },
        }
    }
}
