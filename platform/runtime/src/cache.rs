//! Compiled components, cached on disk by the SHA-256 of their bytes and
//! the engine's compatibility hash: a component is compiled once per engine
//! configuration, not once per deploy or per node start.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The hex SHA-256 of a component's bytes: its name in the store and cache.
pub fn component_hash(wasm: &[u8]) -> String {
    hex::encode(Sha256::digest(wasm))
}

pub(crate) fn load(engine: &Engine, cache_dir: Option<&Path>, wasm: &[u8]) -> wasmtime::Result<Component> {
    let Some(dir) = cache_dir else {
        return Component::from_binary(engine, wasm);
    };
    let path = cached_path(engine, dir, wasm);
    if path.exists() {
        // SAFETY: the file was written by `precompile_component` of an
        // engine with this compatibility hash (it is in the file's name),
        // into the node's own cache directory.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), "recompiling a cached component that did not load: {e}")
            }
        }
    }
    let compiled = engine.precompile_component(wasm)?;
    std::fs::create_dir_all(dir)?;
    // Write then rename, so a reader never sees half a file; the temporary
    // name is unique per compile, as nodes in one process may race here.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!("tmp{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&tmp, &compiled)?;
    std::fs::rename(&tmp, &path)?;
    // SAFETY: these bytes were just produced by this engine.
    unsafe { Component::deserialize(engine, &compiled) }
}

fn cached_path(engine: &Engine, dir: &Path, wasm: &[u8]) -> PathBuf {
    let mut h = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    dir.join(format!("{}-{:016x}.cwasm", component_hash(wasm), h.finish()))
}
