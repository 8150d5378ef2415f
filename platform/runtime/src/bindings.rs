//! Host bindings of the `wasmkeep:actor@0.2.0` package.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "wasmkeep:actor/actor-core",
    imports: { default: async | trappable },
    exports: { default: async },
});
