//! `wasi:keyvalue` for actors, at the two versions guests import
//! (`0.2.0-draft`: wasmtime's and wasmCloud's; `0.2.0-draft2`: Spin's),
//! over the actor's own storage. Every operation is a `storage` operation
//! of the event: inside its atomic commit and behind its output gate,
//! under the same key, value and quota limits. A front has no storage;
//! its linker has no `wasi:keyvalue` and a deploy says why.
//!
//! The store named `""` or `"default"` is the actor's storage, the keys
//! `storage.get` reads; there is no other. Counters are decimal text, so
//! `storage` and JSON read them as numbers.

use wasmtime::component::Resource;

use super::{ActorHost, GuestState, StorageError};
use crate::standard::{keyvalue_draft as draft, keyvalue_draft2 as draft2};

/// An open bucket: the actor's storage, the only one.
pub struct Bucket;

/// A compare-and-swap handle (`0.2.0-draft2`): a key and the value seen
/// when it was made.
pub struct Cas {
    key: String,
    seen: Option<Vec<u8>>,
}

/// The identifiers that open the actor's storage.
const STORES: [&str; 2] = ["", "default"];

/// Keys per page of `list-keys`: the storage listing's own cap.
const KEYS_PAGE: u32 = wasmkeep_core::listing::LIST_LIMIT_MAX;

/// Keys one `get-many`, `set-many` or `delete-many` may name.
pub const BATCH_KEYS_MAX: usize = wasmkeep_core::listing::LIST_LIMIT_MAX as usize;

/// The values one `get-many` may answer, together: the host copies each
/// (a key may be named many times), so a batch is bounded like a page.
pub const BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Compare-and-swap handles a guest may hold at once: each keeps a value
/// (up to the value limit) in the host's memory, outside the guest's.
pub const CAS_OPEN_MAX: u32 = 16;

/// What the key-value host keeps per store.
#[derive(Debug, Default)]
pub(crate) struct KvState {
    /// Compare-and-swap handles the guest holds.
    cas_open: u32,
}

/// What the guest is told when storage fails (its `other` error).
fn failed(e: StorageError) -> String {
    match e {
        StorageError::TooLarge(why) => format!("too large: {why}"),
        StorageError::Unavailable(why) => format!("storage unavailable: {why}"),
    }
}

/// The operations both versions share, in terms of the actor's storage.
impl<H: ActorHost> GuestState<H> {
    fn open_bucket(&mut self, identifier: &str) -> wasmtime::Result<Option<Resource<Bucket>>> {
        Ok(match STORES.contains(&identifier) {
            true => Some(self.table.push(Bucket)?),
            false => None,
        })
    }

    /// Checks that `bucket` is one this guest holds (a forged handle traps).
    fn bucket(&self, bucket: &Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.get(bucket)?;
        Ok(())
    }

    async fn kv_get(&mut self, key: String) -> Result<Option<Vec<u8>>, String> {
        self.host.storage_get(key).await.map_err(failed)
    }

    async fn kv_set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        self.host.storage_set(key, value).await.map_err(failed)
    }

    async fn kv_delete(&mut self, key: String) -> Result<(), String> {
        self.host.storage_delete(key).await.map_err(failed)
    }

    /// One page of keys after `cursor` (a storage cursor).
    async fn kv_keys(&mut self, cursor: Option<String>) -> Result<(Vec<String>, Option<String>), String> {
        let page = self.host.storage_list(String::new(), cursor, KEYS_PAGE).await.map_err(failed)?;
        Ok((page.entries.into_iter().map(|(k, _)| k).collect(), page.cursor))
    }

    /// One page of keys after the first `skip` (an offset cursor, as
    /// `0.2.0-draft` has): the pages before are walked again, a cost of
    /// that version's cursors.
    async fn kv_keys_after(&mut self, skip: u64) -> Result<(Vec<String>, Option<u64>), String> {
        let mut to_skip = skip;
        let mut cursor = None;
        loop {
            let (keys, next) = self.kv_keys(cursor).await?;
            let len = keys.len() as u64;
            if to_skip >= len {
                to_skip -= len;
                match next {
                    Some(next) => cursor = Some(next),
                    None => return Ok((Vec::new(), None)),
                }
                continue;
            }
            let keys: Vec<String> = keys.into_iter().skip(to_skip as usize).collect();
            // A partial page is followed by the next; an offset says where.
            let more = next.map(|_| skip + keys.len() as u64);
            return Ok((keys, more));
        }
    }

    /// Adds to the decimal counter at `key` (absent is zero).
    async fn kv_increment<N>(&mut self, key: String, add: impl FnOnce(N) -> Option<N>) -> Result<N, String>
    where
        N: std::str::FromStr + std::fmt::Display + Default,
    {
        let current = match self.kv_get(key.clone()).await? {
            None => N::default(),
            Some(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("`{key}` does not hold a decimal integer of the counter's type"))?,
        };
        let next = add(current).ok_or_else(|| format!("incrementing `{key}` overflows"))?;
        self.kv_set(key, next.to_string().into_bytes()).await?;
        Ok(next)
    }

    async fn kv_get_many(&mut self, keys: Vec<String>) -> Result<Vec<Option<(String, Vec<u8>)>>, String> {
        batch_keys("get-many", keys.len())?;
        let mut found = Vec::with_capacity(keys.len());
        let mut bytes = 0;
        for key in keys {
            let value = self.kv_get(key.clone()).await?;
            bytes += value.as_ref().map_or(0, |v| v.len() + key.len());
            if bytes > BATCH_BYTES_MAX {
                return Err(format!(
                    "get-many: the values are over {BATCH_BYTES_MAX} bytes together; ask for fewer keys"
                ));
            }
            found.push(value.map(|v| (key, v)));
        }
        Ok(found)
    }

    async fn kv_set_many(&mut self, pairs: Vec<(String, Vec<u8>)>) -> Result<(), String> {
        batch_keys("set-many", pairs.len())?;
        for (key, value) in pairs {
            self.kv_set(key, value).await?;
        }
        Ok(())
    }

    async fn kv_delete_many(&mut self, keys: Vec<String>) -> Result<(), String> {
        batch_keys("delete-many", keys.len())?;
        for key in keys {
            self.kv_delete(key).await?;
        }
        Ok(())
    }
}

/// A batch names at most [`BATCH_KEYS_MAX`] keys.
fn batch_keys(op: &str, keys: usize) -> Result<(), String> {
    match keys <= BATCH_KEYS_MAX {
        true => Ok(()),
        false => Err(format!("{op}: {keys} keys, over the limit of {BATCH_KEYS_MAX}")),
    }
}

/// `store` (but `list-keys`) and `batch`, the same at both versions.
macro_rules! store_and_batch {
    ($version:ident) => {
        impl<H: ActorHost> $version::wasi::keyvalue::store::Host for GuestState<H> {
            async fn open(
                &mut self,
                identifier: String,
            ) -> wasmtime::Result<Result<Resource<Bucket>, $version::wasi::keyvalue::store::Error>> {
                Ok(self.open_bucket(&identifier)?.ok_or($version::wasi::keyvalue::store::Error::NoSuchStore))
            }
        }

        impl<H: ActorHost> $version::wasi::keyvalue::batch::Host for GuestState<H> {
            async fn get_many(
                &mut self,
                bucket: Resource<Bucket>,
                keys: Vec<String>,
            ) -> wasmtime::Result<Result<Vec<Option<(String, Vec<u8>)>>, $version::wasi::keyvalue::store::Error>> {
                self.bucket(&bucket)?;
                Ok(self.kv_get_many(keys).await.map_err($version::wasi::keyvalue::store::Error::Other))
            }

            async fn set_many(
                &mut self,
                bucket: Resource<Bucket>,
                key_values: Vec<(String, Vec<u8>)>,
            ) -> wasmtime::Result<Result<(), $version::wasi::keyvalue::store::Error>> {
                self.bucket(&bucket)?;
                Ok(self.kv_set_many(key_values).await.map_err($version::wasi::keyvalue::store::Error::Other))
            }

            async fn delete_many(
                &mut self,
                bucket: Resource<Bucket>,
                keys: Vec<String>,
            ) -> wasmtime::Result<Result<(), $version::wasi::keyvalue::store::Error>> {
                self.bucket(&bucket)?;
                Ok(self.kv_delete_many(keys).await.map_err($version::wasi::keyvalue::store::Error::Other))
            }
        }
    };
}

/// A bucket's methods but `list-keys`, the same at both versions.
macro_rules! bucket_methods {
    ($version:ident) => {
        async fn get(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
        ) -> wasmtime::Result<Result<Option<Vec<u8>>, $version::wasi::keyvalue::store::Error>> {
            self.bucket(&bucket)?;
            Ok(self.kv_get(key).await.map_err($version::wasi::keyvalue::store::Error::Other))
        }

        async fn set(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
            value: Vec<u8>,
        ) -> wasmtime::Result<Result<(), $version::wasi::keyvalue::store::Error>> {
            self.bucket(&bucket)?;
            Ok(self.kv_set(key, value).await.map_err($version::wasi::keyvalue::store::Error::Other))
        }

        async fn delete(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
        ) -> wasmtime::Result<Result<(), $version::wasi::keyvalue::store::Error>> {
            self.bucket(&bucket)?;
            Ok(self.kv_delete(key).await.map_err($version::wasi::keyvalue::store::Error::Other))
        }

        async fn exists(
            &mut self,
            bucket: Resource<Bucket>,
            key: String,
        ) -> wasmtime::Result<Result<bool, $version::wasi::keyvalue::store::Error>> {
            self.bucket(&bucket)?;
            Ok(self.kv_get(key).await.map(|v| v.is_some()).map_err($version::wasi::keyvalue::store::Error::Other))
        }

        async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
            self.table.delete(bucket)?;
            Ok(())
        }
    };
}

store_and_batch!(draft);
store_and_batch!(draft2);

impl<H: ActorHost> draft::wasi::keyvalue::store::HostBucket for GuestState<H> {
    bucket_methods!(draft);

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> wasmtime::Result<Result<draft::wasi::keyvalue::store::KeyResponse, draft::wasi::keyvalue::store::Error>> {
        self.bucket(&bucket)?;
        Ok(self
            .kv_keys_after(cursor.unwrap_or(0))
            .await
            .map(|(keys, cursor)| draft::wasi::keyvalue::store::KeyResponse { keys, cursor })
            .map_err(draft::wasi::keyvalue::store::Error::Other))
    }
}

impl<H: ActorHost> draft2::wasi::keyvalue::store::HostBucket for GuestState<H> {
    bucket_methods!(draft2);

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<String>,
    ) -> wasmtime::Result<Result<draft2::wasi::keyvalue::store::KeyResponse, draft2::wasi::keyvalue::store::Error>>
    {
        self.bucket(&bucket)?;
        Ok(self
            .kv_keys(cursor)
            .await
            .map(|(keys, cursor)| draft2::wasi::keyvalue::store::KeyResponse { keys, cursor })
            .map_err(draft2::wasi::keyvalue::store::Error::Other))
    }
}

impl<H: ActorHost> draft::wasi::keyvalue::atomics::Host for GuestState<H> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> wasmtime::Result<Result<u64, draft::wasi::keyvalue::store::Error>> {
        self.bucket(&bucket)?;
        Ok(self
            .kv_increment(key, |n: u64| n.checked_add(delta))
            .await
            .map_err(draft::wasi::keyvalue::store::Error::Other))
    }
}

impl<H: ActorHost> draft2::wasi::keyvalue::atomics::Host for GuestState<H> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: i64,
    ) -> wasmtime::Result<Result<i64, draft2::wasi::keyvalue::store::Error>> {
        self.bucket(&bucket)?;
        Ok(self
            .kv_increment(key, |n: i64| n.checked_add(delta))
            .await
            .map_err(draft2::wasi::keyvalue::store::Error::Other))
    }

    /// Stores `value` if the key still holds what `cas` saw. An actor runs
    /// one event at a time, so only the event itself can have changed it.
    async fn swap(
        &mut self,
        cas: Resource<Cas>,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), draft2::wasi::keyvalue::atomics::CasError>> {
        use draft2::wasi::keyvalue::atomics::CasError;
        use draft2::wasi::keyvalue::store::Error;
        let Cas { key, seen } = self.table.delete(cas)?;
        self.keyvalue.cas_open = self.keyvalue.cas_open.saturating_sub(1);
        let now = match self.kv_get(key.clone()).await {
            Ok(now) => now,
            Err(e) => return Ok(Err(CasError::StoreError(Error::Other(e)))),
        };
        if now != seen {
            let again = self.table.push(Cas { key, seen: now })?;
            self.keyvalue.cas_open += 1;
            return Ok(Err(CasError::CasFailed(again)));
        }
        Ok(self.kv_set(key, value).await.map_err(|e| CasError::StoreError(Error::Other(e))))
    }
}

impl<H: ActorHost> draft2::wasi::keyvalue::atomics::HostCas for GuestState<H> {
    async fn new(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Resource<Cas>, draft2::wasi::keyvalue::store::Error>> {
        use draft2::wasi::keyvalue::store::Error;
        self.bucket(&bucket)?;
        if self.keyvalue.cas_open >= CAS_OPEN_MAX {
            return Ok(Err(Error::Other(format!(
                "at most {CAS_OPEN_MAX} compare-and-swap handles may be open at once"
            ))));
        }
        match self.kv_get(key.clone()).await {
            Ok(seen) => {
                let cas = self.table.push(Cas { key, seen })?;
                self.keyvalue.cas_open += 1;
                Ok(Ok(cas))
            }
            Err(e) => Ok(Err(Error::Other(e))),
        }
    }

    async fn current(
        &mut self,
        cas: Resource<Cas>,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, draft2::wasi::keyvalue::store::Error>> {
        Ok(Ok(self.table.get(&cas)?.seen.clone()))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        self.table.delete(cas)?;
        self.keyvalue.cas_open = self.keyvalue.cas_open.saturating_sub(1);
        Ok(())
    }
}

/// Links `wasi:keyvalue` at both versions.
pub(crate) fn add_to_linker<H: ActorHost>(
    linker: &mut wasmtime::component::Linker<GuestState<H>>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    draft::wasi::keyvalue::store::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    draft::wasi::keyvalue::atomics::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    draft::wasi::keyvalue::batch::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    draft2::wasi::keyvalue::store::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    draft2::wasi::keyvalue::atomics::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    draft2::wasi::keyvalue::batch::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
