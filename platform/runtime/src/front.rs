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

use crate::host::{Egress, GuestHost, GuestState};
use crate::wall::{self, timer};
use crate::{DeployError, EventFailure};

/// The body of a front's answer, streamed while the guest writes it.
pub type FrontBody = HyperOutgoingBody;

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
    memory_bytes: u64,
}

impl<H: GuestHost> FrontComponent<H> {
    pub(crate) fn new(pre: InstancePre<GuestState<H>>, hash: String, memory_bytes: u64) -> Result<Self, DeployError> {
        let pre = ProxyPre::new(pre).map_err(|e| {
            DeployError::MissingExport(format!(
                "the `wasi:http/incoming-handler@0.2` interface ({})",
                crate::one_line(&e.to_string())
            ))
        })?;
        Ok(Self { pre, hash, memory_bytes })
    }

    /// The SHA-256 of the component's bytes.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Serves one request on a fresh instance holding `host`, within the
    /// wall that `ends` then. Returns when the guest has set its answer;
    /// the guest may go on writing the body, and the instance (with
    /// `host`) lives until it returns or its wall ends.
    pub async fn handle<B>(
        self: &Arc<Self>,
        host: H,
        request: http::Request<B>,
        ends: Instant,
    ) -> Result<(http::Response<FrontBody>, FrontRun), EventFailure>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let mut store = wall::guest_store(self.pre.engine(), GuestState::new(host, self.memory_bytes, Egress), ends);
        let proxy = match tokio::time::timeout_at(timer(ends), self.pre.instantiate_async(&mut store)).await {
            Err(_elapsed) => return Err(EventFailure::Wall),
            Ok(Err(e)) => return Err(EventFailure::from_trap(&store, &e)),
            Ok(Ok(proxy)) => proxy,
        };
        let (answer, answered) = oneshot::channel();
        let mut http = store.data_mut().http();
        let resources = http
            .new_incoming_request(Scheme::Http, request)
            .and_then(|req| Ok((req, http.new_response_outparam(answer)?)));
        let (req, out) = resources.map_err(|e| EventFailure::Trap(format!("{e:?}")))?;

        let run = tokio::spawn(async move {
            let handled = proxy.wasi_http_incoming_handler().call_handle(&mut store, req, out);
            match tokio::time::timeout_at(timer(ends), handled).await {
                Err(_elapsed) => Err(EventFailure::Wall),
                Ok(Err(e)) => Err(EventFailure::from_trap(&store, &e)),
                Ok(Ok(())) => Ok(()),
            }
        });
        match answered.await {
            Ok(Ok(response)) => Ok((response, FrontRun(run.abort_handle()))),
            Ok(Err(code)) => Err(EventFailure::Trap(format!("the front answered the error {code:?}"))),
            // The guest returned, trapped or ran out of wall without an answer.
            Err(_dropped) => match run.await {
                Ok(Err(failure)) => Err(failure),
                Ok(Ok(())) => Err(EventFailure::Trap("the front returned without an answer".into())),
                Err(e) => Err(EventFailure::Trap(format!("the front's task failed: {e}"))),
            },
        }
    }
}
