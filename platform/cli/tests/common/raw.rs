//! Raw sockets against `serve`'s listeners: connections from chosen
//! loopback addresses, requests whose bodies are held in flight.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::Serve;

pub fn limits_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("limits.toml");
    std::fs::write(&path, text).unwrap();
    path
}

pub fn api_addr(s: &Serve) -> SocketAddr {
    s.api.trim_start_matches("http://").parse().unwrap()
}

/// A connection to `to` from the loopback address `from` (any of
/// 127.0.0.0/8 is this machine): each is a client address of its own.
pub async fn connect_from(to: SocketAddr, from: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0))?;
    socket.connect(to).await
}

/// Whether the server closes `tcp` within `limit`: what it sent before.
pub async fn closed_within(tcp: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(limit, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.ok().map(|()| String::from_utf8_lossy(&seen).into_owned())
}

/// One request over a fresh connection: the answer's status line and body.
pub async fn raw(to: SocketAddr, from: &str, request: &str) -> String {
    let mut tcp = connect_from(to, from).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    closed_within(&mut tcp, Duration::from_secs(10)).await.expect("an answer and a close")
}

/// A request body held in flight: the head and the first bytes sent, then
/// a byte every half second, fast enough for a minimum rate of one byte a
/// second.
pub struct InFlight {
    read: tokio::net::tcp::OwnedReadHalf,
    trickle: tokio::task::JoinHandle<()>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.trickle.abort();
    }
}

impl InFlight {
    /// Whether it is still in flight (no answer yet).
    pub async fn still(&mut self) -> bool {
        let mut buf = [0u8; 256];
        tokio::time::timeout(Duration::from_millis(100), self.read.read(&mut buf)).await.is_err()
    }

    /// What it was answered within `limit` (empty: nothing).
    pub async fn answer(&mut self, limit: Duration) -> String {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let _ = tokio::time::timeout(limit, async {
            loop {
                match self.read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
                // An answer before the body is whole may leave the
                // connection open: its JSON's end is enough.
                if seen.ends_with(b"}") {
                    return;
                }
            }
        })
        .await;
        String::from_utf8_lossy(&seen).into_owned()
    }
}

/// Starts a request of `declared` body bytes from `from`: `head` (its line
/// and headers, no content-length), then `first` of the body at once.
pub async fn body_in_flight(to: SocketAddr, from: &str, head: &str, declared: usize, first: &[u8]) -> InFlight {
    let tcp = connect_from(to, from).await.unwrap();
    let (read, mut write) = tcp.into_split();
    let head = format!("{head}content-length: {declared}\r\n\r\n");
    write.write_all(head.as_bytes()).await.unwrap();
    let first = first.to_vec();
    // In its own task: a server that stops reading (waiting for its
    // budget) or answers early must not hold the test up.
    let trickle = tokio::spawn(async move {
        if write.write_all(&first).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    InFlight { read, trickle }
}

/// Starts an upload of `declared` bytes for `token`'s app `app`, its
/// `first` bytes sent at once.
pub async fn upload_in_flight(s: &Serve, token: &str, app: &str, declared: usize, first: usize) -> InFlight {
    let head = format!("POST /v1/apps/{app}/versions HTTP/1.1\r\nhost: api\r\nauthorization: Bearer {token}\r\n");
    let mut body = b"{".to_vec();
    body.resize(first.max(1), b' ');
    body_in_flight(api_addr(s), "127.0.0.1", &head, declared, &body).await
}
