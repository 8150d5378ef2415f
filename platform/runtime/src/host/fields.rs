//! `wasi:http`'s `fields` made from lists, read in place. wasmtime lifts a
//! host call's arguments whole before the call (up to the store's hostcall
//! fuel), so a guest passing 100,000 header values that all alias one
//! buffer made each `fields.from-list` copy tens of MiB on the node's
//! threads, only for the fields to trap at their size limit after the
//! first 128 KiB: 32 such fronts at once held another tenant's requests
//! for hundreds of milliseconds. Here `from-list` and `set` take the lists
//! as views of the guest's memory: the least the values would cost the
//! fields is summed first, and a list that could never fit traps as
//! wasmtime's would, having copied nothing; one that fits (at most the
//! limit's bytes) is copied and built exactly as wasmtime builds it.

use http::HeaderValue;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, WasmList, WasmStr};
use wasmtime_wasi_http::p2::bindings::http::types::HeaderError;
use wasmtime_wasi_http::{FieldMap, FieldMapError, WasiHttpView};

use super::GuestState;

/// The bytes a guest's `fields` may hold (wasmtime's default, set on every
/// guest's context so that the two agree).
pub const FIELD_SIZE_LIMIT: usize = 128 * 1024;

/// The interface whose functions are replaced (the guests' older 0.2
/// imports resolve to it).
const TYPES: &str = "wasi:http/types@0.2.12";

/// The least a list's values cost a `FieldMap` so far: each its bytes and
/// its `HeaderValue` (what wasmtime charges for every value, whatever its
/// name).
#[derive(Default)]
struct Least(usize);

impl Least {
    /// Counts a value of `len` bytes; the trap once the list could never fit.
    fn add(&mut self, len: usize) -> wasmtime::Result<()> {
        self.0 = self.0.saturating_add(len + size_of::<HeaderValue>());
        if self.0 > FIELD_SIZE_LIMIT { Err(over_limit()) } else { Ok(()) }
    }
}

fn over_limit() -> wasmtime::Error {
    wasmtime::Error::msg(format!("header fields over their size limit ({FIELD_SIZE_LIMIT} bytes)"))
}

/// Adds the two functions over wasmtime's own.
pub(crate) fn add_to_linker<H: Send + 'static>(linker: &mut Linker<GuestState<H>>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES)?;
    types.func_wrap("[static]fields.from-list", from_list::<H>)?;
    types.func_wrap("[method]fields.set", set::<H>)?;
    linker.allow_shadowing(false);
    Ok(())
}

type Entries = WasmList<(WasmStr, WasmList<u8>)>;

fn from_list<H: Send + 'static>(
    mut store: StoreContextMut<'_, GuestState<H>>,
    (entries,): (Entries,),
) -> wasmtime::Result<(Result<Resource<FieldMap>, HeaderError>,)> {
    let mut least = Least::default();
    let mut views = Vec::new();
    for entry in entries.iter(&mut store)? {
        let (name, value) = entry?;
        least.add(value.len())?;
        views.push((name, value));
    }
    let mut copied = Vec::with_capacity(views.len());
    for (name, value) in &views {
        copied.push((name.to_str(&store)?.into_owned(), value.as_le_slice(&store).to_vec()));
    }
    let http = store.data_mut().http();
    let mut fields = FieldMap::new_mutable(FIELD_SIZE_LIMIT);
    for (name, value) in copied {
        if let Err(e) = fields.append(http.hooks, name, value) {
            return Ok((Err(header_error(e)?),));
        }
    }
    Ok((Ok(http.table.push(fields)?),))
}

fn set<H: Send + 'static>(
    mut store: StoreContextMut<'_, GuestState<H>>,
    (fields, name, values): (Resource<FieldMap>, WasmStr, WasmList<WasmList<u8>>),
) -> wasmtime::Result<(Result<(), HeaderError>,)> {
    let mut least = Least::default();
    let mut views = Vec::new();
    for value in values.iter(&mut store)? {
        let value = value?;
        least.add(value.len())?;
        views.push(value);
    }
    let name = name.to_str(&store)?.into_owned();
    let copied: Vec<Vec<u8>> = views.iter().map(|v| v.as_le_slice(&store).to_vec()).collect();
    let http = store.data_mut().http();
    let fields = http.table.get_mut(&fields)?;
    match fields.set(http.hooks, name, copied) {
        Ok(()) => Ok((Ok(()),)),
        Err(e) => Ok((Err(header_error(e)?),)),
    }
}

/// What the guest is answered for `e`, as wasmtime answers it: the size
/// bounds trap.
fn header_error(e: FieldMapError) -> wasmtime::Result<HeaderError> {
    match e {
        FieldMapError::Immutable => Ok(HeaderError::Immutable),
        FieldMapError::InvalidHeaderName | FieldMapError::InvalidHeaderValue => Ok(HeaderError::InvalidSyntax),
        FieldMapError::Forbidden => Ok(HeaderError::Forbidden),
        FieldMapError::TooManyFields | FieldMapError::TotalSizeTooBig => Err(over_limit()),
    }
}
