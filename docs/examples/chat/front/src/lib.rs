//! The chat's front.
//!
//! - `GET /` serves the page;
//! - `POST /login` with the form field `user` (1–32 of letters, digits,
//!   `-`, `_`) answers `{"token": …}`: the user and an HMAC-SHA256 of it
//!   keyed with the app's `TOKEN_SECRET`;
//! - `GET /rooms/<room>/ws?token=…`, a WebSocket upgrade, checks the token
//!   and hands the socket to the room (internal), naming the user in the
//!   path's query; a bad or missing token is `403` before any socket opens.

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;
use wasmkeep_sdk::front::{Request, Response, hand_off, is_websocket, values};

const PAGE: &str = include_str!("page.html");

fn handle(req: Request) -> Response {
    let segments = req.segments().unwrap_or_default();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (req.method(), segments.as_slice()) {
        ("GET", [""]) => Response::text(200, PAGE).header("content-type", "text/html; charset=utf-8"),
        ("POST", ["login"]) => login(&req),
        ("GET", ["rooms", room, "ws"]) if !room.is_empty() => join(&req, room),
        _ => Response::not_found(),
    }
}

type Signer = Hmac<Sha256>;

fn signer() -> Option<Signer> {
    // Admission has checked that the app has it: it is a required value.
    let secret = values::get("TOKEN_SECRET")?;
    Signer::new_from_slice(secret.as_bytes()).ok()
}

fn valid_user(user: &str) -> bool {
    (1..=32).contains(&user.len()) && user.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn login(req: &Request) -> Response {
    let user = req.form_param("user").unwrap_or_default();
    if !valid_user(&user) {
        return Response::text(400, "user: 1 to 32 of letters, digits, '-' and '_'\n");
    }
    let Some(mut mac) = signer() else { return Response::text(503, "TOKEN_SECRET is not set\n") };
    mac.update(user.as_bytes());
    let tag: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    Response::json(200, &json!({ "token": format!("{user}.{tag}") }))
}

/// The user a token signs, if it is valid.
fn verify(token: &str) -> Option<String> {
    let (user, tag) = token.rsplit_once('.')?;
    let tag: Vec<u8> = (0..tag.len())
        .step_by(2)
        .map(|i| tag.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<_>>()?;
    let mut mac = signer()?;
    mac.update(user.as_bytes());
    // Compared in constant time.
    mac.verify_slice(&tag).ok()?;
    valid_user(user).then(|| user.to_owned())
}

fn join(req: &Request, room: &str) -> Response {
    let Some(user) = req.query_param("token").as_deref().and_then(verify) else {
        return Response::text(403, "a valid token is required: POST /login first\n");
    };
    if !is_websocket(req) {
        return Response::text(426, "this is a WebSocket endpoint\n");
    }
    // The room trusts the path: only the front can put a socket there.
    hand_off("room", room, &format!("/join?user={user}"))
}

wasmkeep_sdk::front!(handle);
