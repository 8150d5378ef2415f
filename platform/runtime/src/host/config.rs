//! `wasi:config/store`, at each version guests import: the app's values,
//! the same that `wasmkeep:actor/values` reads. Values are set by the
//! tenant, never by a guest, so there is nothing to fail.

use super::{GuestHost, GuestState};

macro_rules! config_store {
    ($($version:ident),*) => {$(
        impl<H: GuestHost> crate::standard::$version::wasi::config::store::Host for GuestState<H> {
            fn get(
                &mut self,
                key: String,
            ) -> wasmtime::Result<Result<Option<String>, crate::standard::$version::wasi::config::store::Error>> {
                Ok(Ok(self.host.values().get(&key).cloned()))
            }

            fn get_all(
                &mut self,
            ) -> wasmtime::Result<Result<Vec<(String, String)>, crate::standard::$version::wasi::config::store::Error>>
            {
                Ok(Ok(self.host.values().iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
            }
        }
    )*};
}

config_store!(config_rc1, config_draft, config_draft_2024_09_27);

/// Links `wasi:config/store` at every version.
pub(crate) fn add_to_linker<H: GuestHost>(
    linker: &mut wasmtime::component::Linker<GuestState<H>>,
) -> wasmtime::Result<()> {
    use crate::standard::*;
    use wasmtime::component::HasSelf;
    config_rc1::wasi::config::store::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    config_draft::wasi::config::store::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    config_draft_2024_09_27::wasi::config::store::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
