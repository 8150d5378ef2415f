//! Request bodies, read whole up to the node's body limit.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use crate::error::HttpError;

pub(crate) async fn read(body: Incoming, limit: u64) -> Result<Bytes, HttpError> {
    match Limited::new(body, limit as usize).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(HttpError::BodyTooLarge(limit)),
        Err(_) => Err(HttpError::BodyUnreadable),
    }
}
