//! Host-owned sockets, two measures against `wasmkeep dev` as its own
//! process serving the test probe:
//!
//! - `broadcast`: one of 1,000 sockets of one room asks the room to send
//!   64 bytes to all of them (`all:<64 bytes>`); the time until every
//!   client has it, against the raw write floor: a plain tokio-tungstenite
//!   server in this process writing the same frame to its own 1,000
//!   sockets in a loop, timed the same way by the same clients.
//! - `memory`: the node's resident memory before and after 10,000 sockets
//!   on 10 rooms have opened and their rooms hibernated (parked).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;

use crate::{flag, probe_process, stats};

/// Starts `wasmkeep dev` serving the probe as class `open`, with `limits`.
/// Clients that count the messages they receive.
pub(crate) struct Clients {
    senders: Vec<futures_util::stream::SplitSink<Ws, Message>>,
    received: Arc<AtomicUsize>,
    arrived: Arc<Notify>,
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn clients(url: &str, n: usize) -> Result<Clients, String> {
    clients_at(std::iter::repeat_n(url, n)).await
}

/// A client at each of `urls`, in turn.
pub(crate) async fn clients_at(urls: impl IntoIterator<Item = &str>) -> Result<Clients, String> {
    let received = Arc::new(AtomicUsize::new(0));
    let arrived = Arc::new(Notify::new());
    let mut senders = Vec::new();
    for url in urls {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.map_err(|e| format!("{url}: {e:?}"))?;
        let (tx, mut rx) = ws.split();
        senders.push(tx);
        let (received, arrived) = (received.clone(), arrived.clone());
        tokio::spawn(async move {
            while let Some(Ok(m)) = rx.next().await {
                if m.is_text() || m.is_binary() {
                    received.fetch_add(1, Ordering::Relaxed);
                    arrived.notify_one();
                }
            }
        });
    }
    Ok(Clients { senders, received, arrived })
}

impl Clients {
    /// Closes every client's socket.
    pub(crate) async fn close(mut self) {
        for s in &mut self.senders {
            let _ = s.close().await;
        }
    }

    /// Sends `trigger` from the first client and times until every client
    /// has received one more message.
    pub(crate) async fn round(&mut self, trigger: &str) -> Result<Duration, String> {
        let want = self.received.load(Ordering::Relaxed) + self.senders.len();
        let t = Instant::now();
        self.senders[0].send(Message::text(trigger)).await.map_err(|e| e.to_string())?;
        while self.received.load(Ordering::Relaxed) < want {
            tokio::time::timeout(Duration::from_secs(10), self.arrived.notified())
                .await
                .map_err(|_| format!("{} of {want} arrived", self.received.load(Ordering::Relaxed)))?;
        }
        Ok(t.elapsed())
    }
}

/// The floor: a plain server writing the frame to each of its sockets in
/// a loop when any of them sends.
async fn raw_server() -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (joined, mut sockets) = mpsc::unbounded_channel();
    let (triggered, mut triggers) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (joined, triggered) = (joined.clone(), triggered.clone());
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
                let (tx, mut rx) = ws.split();
                let _ = joined.send(tx);
                while let Some(Ok(Message::Text(t))) = rx.next().await {
                    let _ = triggered.send(t.to_string());
                }
            });
        }
    });
    tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(text) = triggers.recv().await {
            while let Ok(s) = sockets.try_recv() {
                all.push(s);
            }
            let frame = text.strip_prefix("all:").unwrap_or(&text).to_owned();
            for s in &mut all {
                let _ = s.send(Message::text(frame.clone())).await;
            }
        }
    });
    Ok(format!("ws://{addr}/"))
}

pub fn broadcast(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 30)?;
    let sockets: usize = flag(args, "--sockets", 1000)?;
    let (server, _dir) = probe_process::start("sockets", "")?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let payload = format!("all:{}", "x".repeat(64));
        let mut room = clients(&format!("ws://{}/actor/open/room/ws?quiet", server.addr), sockets).await?;
        let mut raw = clients(&raw_server().await?, sockets).await?;
        // Warm both, then alternate.
        room.round(&payload).await?;
        raw.round(&payload).await?;
        let (mut ours, mut floor) = (Vec::new(), Vec::new());
        for _ in 0..n {
            ours.push(room.round(&payload).await?);
            floor.push(raw.round(&payload).await?);
        }
        let (ours, floor) = (stats::summarize(ours), stats::summarize(floor));
        println!("sockets broadcast: 64 bytes to {sockets} sockets of one room, {n} rounds, one run");
        println!("  wasmkeep room   {ours}");
        println!("  raw write floor {floor}");
        println!("  room / floor: {:.2}x (p50)", ours.p50.as_secs_f64() / floor.p50.as_secs_f64());
        Ok(())
    })
}

pub fn memory(args: &[String]) -> Result<(), String> {
    let sockets: usize = flag(args, "--sockets", 10_000)?;
    let rooms = sockets.div_ceil(1000);
    let (server, _dir) = probe_process::start("sockets", "idle_secs = 0.5\nmax_connections_per_client = 20000\n")?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // Wake and park every room once, so what grows is the sockets.
        for r in 0..rooms {
            let url = format!("ws://{}/actor/open/room{r}/ws?quiet", server.addr);
            clients(&url, 1).await?.close().await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = probe_process::rss_kib(server.pid())?;
        let mut held = Vec::new();
        for r in 0..rooms {
            let url = format!("ws://{}/actor/open/room{r}/ws?quiet", server.addr);
            held.push(clients(&url, sockets / rooms).await?);
        }
        // Every room hibernates with its sockets open: parked.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = probe_process::rss_kib(server.pid())?;
        println!("sockets memory: {sockets} parked sockets on {rooms} rooms, node RSS {before} KiB -> {after} KiB");
        println!("  per parked socket: {:.2} KiB", (after.saturating_sub(before)) as f64 / sockets as f64);
        for h in held {
            h.close().await;
        }
        Ok(())
    })
}
