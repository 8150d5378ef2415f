//! The actor's durable storage: string keys to bytes, private to the actor.
//!
//! Reads see the event's own writes. The event's writes commit together
//! when it ends, before its answer leaves; if the event fails, none of
//! them happened.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wit::storage as w;

/// Why a storage operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageError {
    /// A key or value over its limit, or a write over a storage quota (then
    /// nothing of the event is stored).
    TooLarge(String),
    /// The store could not serve the operation.
    Unavailable(String),
    /// A stored value is not the JSON the caller asked for.
    Json(String),
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge(m) => write!(f, "too large: {m}"),
            Self::Unavailable(m) => write!(f, "storage unavailable: {m}"),
            Self::Json(m) => write!(f, "stored value is not the expected JSON: {m}"),
        }
    }
}

impl std::error::Error for StorageError {}

impl From<w::StorageError> for StorageError {
    fn from(e: w::StorageError) -> Self {
        match e {
            w::StorageError::TooLarge(m) => Self::TooLarge(m),
            w::StorageError::Unavailable(m) => Self::Unavailable(m),
        }
    }
}

pub type Result<T> = std::result::Result<T, StorageError>;

/// The value at `key`.
pub fn get(key: &str) -> Result<Option<Vec<u8>>> {
    Ok(w::get(key)?)
}

/// The value at `key` as UTF-8 text (lossily).
pub fn get_string(key: &str) -> Result<Option<String>> {
    Ok(get(key)?.map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// The value at `key` parsed as JSON.
pub fn get_json<T: DeserializeOwned>(key: &str) -> Result<Option<T>> {
    get(key)?.map(|v| serde_json::from_slice(&v).map_err(|e| StorageError::Json(e.to_string()))).transpose()
}

pub fn set(key: &str, value: impl AsRef<[u8]>) -> Result<()> {
    Ok(w::set(key, value.as_ref())?)
}

/// Stores `value` as JSON.
pub fn set_json<T: Serialize + ?Sized>(key: &str, value: &T) -> Result<()> {
    set(key, serde_json::to_vec(value).map_err(|e| StorageError::Json(e.to_string()))?)
}

pub fn delete(key: &str) -> Result<()> {
    Ok(w::delete(key)?)
}

/// Deletes every key of the actor.
pub fn delete_all() -> Result<()> {
    Ok(w::delete_all()?)
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub entries: Vec<(String, Vec<u8>)>,
    /// Present when more keys follow: pass it to the next [`list`].
    pub cursor: Option<String>,
}

/// Up to `limit` (at most 1,000; 0 for the most) entries whose keys start
/// with `prefix`, after `cursor`, in ascending key order.
pub fn list(prefix: &str, cursor: Option<&str>, limit: u32) -> Result<Page> {
    let p = w::list(prefix, cursor, limit)?;
    Ok(Page { entries: p.entries, cursor: p.cursor })
}

/// Every entry whose key starts with `prefix`, page by page.
pub fn list_all(prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = list(prefix, cursor.as_deref(), 0)?;
        out.extend(page.entries);
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
}
