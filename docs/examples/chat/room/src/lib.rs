//! A chat room (internal: every socket it has was handed off by the
//! front, so the user named in the open's path is the front's word).
//!
//! A socket sends `{"text": …}`; the room sends each message as
//! `{"user": …, "text": …}` to all its sockets, keeps the last 50 and
//! sends them to a socket that joins.

use serde_json::{Value, json};
use wasmkeep_sdk::{Actor, Conn, Message, Request, Response, sockets, storage};

/// Messages kept for those who join.
const HISTORY: usize = 50;
/// The longest message text, in characters.
const TEXT_MAX: usize = 2000;

#[derive(Default)]
struct Room;

fn history() -> Vec<Value> {
    storage::get_json("history").ok().flatten().unwrap_or_default()
}

impl Actor for Room {
    fn on_request(&mut self, _req: Request) -> Response {
        Response::json(200, &json!({ "history": history(), "sockets": sockets::list().len() }))
    }

    fn on_websocket_open(&mut self, conn: Conn, path: String) -> Result<(), String> {
        let user = Request::get(path).query_param("user").ok_or("no user")?;
        storage::set(&format!("user/{conn}"), &user).map_err(|e| e.to_string())?;
        for message in history() {
            let _ = sockets::send_text(conn, &message.to_string());
        }
        Ok(())
    }

    fn on_websocket_message(&mut self, conn: Conn, message: Message) {
        let Message::Text(text) = message else { return };
        let Some(text) = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["text"].as_str().map(str::to_owned))
        else {
            return;
        };
        let text: String = text.chars().take(TEXT_MAX).collect();
        let user = storage::get(&format!("user/{conn}")).ok().flatten().and_then(|u| String::from_utf8(u).ok());
        let message = json!({ "user": user.unwrap_or_default(), "text": text });
        let mut kept = history();
        kept.push(message.clone());
        let drop = kept.len().saturating_sub(HISTORY);
        kept.drain(..drop);
        if storage::set_json("history", &kept).is_err() {
            return;
        }
        for other in sockets::list() {
            let _ = sockets::send_text(other, &message.to_string());
        }
    }

    fn on_websocket_close(&mut self, conn: Conn, _code: u16, _reason: String) {
        let _ = storage::delete(&format!("user/{conn}"));
    }
}

wasmkeep_sdk::actor!(Room);
