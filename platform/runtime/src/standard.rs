//! Host bindings of the standard interfaces that guests written for other
//! hosts import beyond WASI 0.2 (`wit-standard/`): runtime configuration
//! at the three versions in use, and key-value storage at the two.

pub mod config_rc1 {
    wasmtime::component::bindgen!({
        path: "wit-standard/config@0.2.0-rc.1",
        world: "wasi:config/imports",
        imports: { default: trappable },
    });
}

pub mod config_draft {
    wasmtime::component::bindgen!({
        path: "wit-standard/config@0.2.0-draft",
        world: "wasi:config/imports",
        imports: { default: trappable },
    });
}

pub mod config_draft_2024_09_27 {
    wasmtime::component::bindgen!({
        path: "wit-standard/config@0.2.0-draft-2024-09-27",
        world: "wasi:config/imports",
        imports: { default: trappable },
    });
}

pub mod keyvalue_draft {
    wasmtime::component::bindgen!({
        path: "wit-standard/keyvalue@0.2.0-draft",
        world: "wasi:keyvalue/imports",
        imports: { default: async | trappable },
        with: { "wasi:keyvalue/store.bucket": crate::host::keyvalue::Bucket },
    });
}

pub mod keyvalue_draft2 {
    wasmtime::component::bindgen!({
        path: "wit-standard/keyvalue@0.2.0-draft2",
        world: "wasi:keyvalue/imports",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": crate::host::keyvalue::Bucket,
            "wasi:keyvalue/atomics.cas": crate::host::keyvalue::Cas,
        },
    });
}
