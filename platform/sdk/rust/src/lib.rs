//! Write wasmkeep actors, and the app's front, in Rust.
//!
//! An actor is a type with handlers for its events; [`actor!`] exports it.
//! One value of the type lives as long as the actor's instance: it is
//! created on the first event after a wake and lost at hibernation, so keep
//! what must last in [`storage`].
//!
//! ```ignore
//! use wasmkeep_sdk::{Actor, Request, Response, storage};
//!
//! #[derive(Default)]
//! struct Counter;
//!
//! impl Actor for Counter {
//!     fn on_request(&mut self, req: Request) -> Response {
//!         let n: u64 = storage::get_json("count").unwrap().unwrap_or(0) + 1;
//!         storage::set_json("count", &n).unwrap();
//!         Response::text(200, n.to_string())
//!     }
//! }
//!
//! wasmkeep_sdk::actor!(Counter);
//! ```

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "wasmkeep:actor/actor-core",
        pub_export_macro: true,
        export_macro_name: "__export_actor_core",
        default_bindings_module: "wasmkeep_sdk::bindings",
        generate_all,
    });
}

pub mod actors;
pub mod calls;
pub mod front;
pub mod head;
mod http;
pub mod sockets;
pub mod storage;

pub use http::{Request, Response, is_websocket};

#[doc(hidden)]
pub use wasip2 as __wasip2;

use bindings::wasmkeep::actor as wit;

/// A socket's id, stable for the socket's life.
pub type Conn = u64;

/// A socket message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Text(String),
    Binary(Vec<u8>),
}

/// An actor: handlers for its events. Only `on_request` is required.
pub trait Actor: Default + 'static {
    /// An HTTP request at `/actor/<class>/<name>/...`, or a call.
    fn on_request(&mut self, request: Request) -> Response;

    /// A socket opens at `path`; `Err` refuses it with that reason.
    fn on_websocket_open(&mut self, conn: Conn, path: String) -> Result<(), String> {
        let _ = (conn, path);
        Err("this actor does not accept sockets".into())
    }

    fn on_websocket_message(&mut self, conn: Conn, message: Message) {
        let _ = (conn, message);
    }

    fn on_websocket_close(&mut self, conn: Conn, code: u16, reason: String) {
        let _ = (conn, code, reason);
    }
}

/// The actor's own address, `class/name`.
pub fn address() -> String {
    wit::self_::address()
}

/// The actor's name (the address after the class).
pub fn name() -> String {
    let a = address();
    a.split_once('/').map(|(_, n)| n.to_owned()).unwrap_or(a)
}

/// Deletes this actor: its storage is deleted and it stops existing when
/// the current event ends. The event still answers.
pub fn delete_self() {
    wit::self_::delete_self()
}

/// The app's configured values.
pub mod values {
    /// The value named `name`, if the app has it set.
    pub fn get(name: &str) -> Option<String> {
        crate::wit::values::get(name)
    }
}

#[doc(hidden)]
pub mod __private {
    use std::cell::RefCell;

    use super::*;
    use crate::bindings::exports::wasmkeep::actor::events as exp;

    thread_local! {
        static ACTOR: RefCell<Option<Box<dyn std::any::Any>>> = const { RefCell::new(None) };
    }

    /// Runs `f` on this instance's one value of `A`.
    pub fn with<A: Actor, R>(f: impl FnOnce(&mut A) -> R) -> R {
        ACTOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            let actor = slot.get_or_insert_with(|| Box::new(A::default()));
            f(actor.downcast_mut::<A>().expect("one actor type per component"))
        })
    }

    pub fn on_request<A: Actor>(request: wit::actors::Request) -> wit::actors::Response {
        with(|a: &mut A| a.on_request(request.into())).into()
    }

    pub fn on_websocket_open<A: Actor>(conn: Conn, path: String) -> Result<(), String> {
        with(|a: &mut A| a.on_websocket_open(conn, path))
    }

    pub fn on_websocket_message<A: Actor>(conn: Conn, message: exp::Message) {
        let message = match message {
            exp::Message::Text(t) => Message::Text(t),
            exp::Message::Binary(b) => Message::Binary(b),
        };
        with(|a: &mut A| a.on_websocket_message(conn, message))
    }

    pub fn on_websocket_close<A: Actor>(conn: Conn, code: u16, reason: String) {
        with(|a: &mut A| a.on_websocket_close(conn, code, reason))
    }
}

/// Exports an [`Actor`] type as the component's events.
#[macro_export]
macro_rules! actor {
    ($actor:ty) => {
        const _: () = {
            struct __WasmkeepEvents;
            impl $crate::bindings::exports::wasmkeep::actor::events::Guest for __WasmkeepEvents {
                fn on_request(
                    request: $crate::bindings::wasmkeep::actor::actors::Request,
                ) -> $crate::bindings::wasmkeep::actor::actors::Response {
                    $crate::__private::on_request::<$actor>(request)
                }
                fn on_websocket_open(
                    conn: u64,
                    path: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::on_websocket_open::<$actor>(conn, path)
                }
                fn on_websocket_message(
                    conn: u64,
                    message: $crate::bindings::exports::wasmkeep::actor::events::Message,
                ) {
                    $crate::__private::on_websocket_message::<$actor>(conn, message)
                }
                fn on_websocket_close(conn: u64, code: u16, reason: ::std::string::String) {
                    $crate::__private::on_websocket_close::<$actor>(conn, code, reason)
                }
            }
    $crate::bindings::__export_actor_core!(__WasmkeepEvents with_types_in $crate::bindings);
        };
    };
}
