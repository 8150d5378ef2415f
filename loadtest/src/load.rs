//! What the HTTP scenarios share: starting a server process and reading
//! where it listens, and loading it with keep-alive HTTP/1.1 connections.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    pub addr: String,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` and waits for the stderr line from which `addr` reads
/// its `host:port`.
pub fn spawn(mut command: Command, addr: impl Fn(&str) -> Option<String>) -> Result<Server, String> {
    let shown = format!("{command:?}");
    let mut child = command.stderr(Stdio::piped()).spawn().map_err(|e| format!("{shown}: {e}"))?;
    let mut lines = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
    let found = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(a) = addr(&line) {
                    break a;
                }
            }
            _ => {
                let _ = child.kill();
                return Err(format!("{shown} ended before listening"));
            }
        }
    };
    // What the server says after it listens goes to this stderr.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| eprintln!("  | {l}")));
    Ok(Server { child, addr: found })
}

/// What a load run saw.
pub struct Load {
    pub ok: u64,
    pub errors: u64,
    pub samples: Vec<Duration>,
    pub length: Duration,
}

impl Load {
    pub fn per_sec(&self) -> f64 {
        self.ok as f64 / self.length.as_secs_f64()
    }
}

/// `conns` connections each sending `GET path` back to back for `length`
/// (after one warming request).
pub async fn run(addr: &str, path: &str, conns: usize, length: Duration) -> Result<Load, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    one_connection(addr, path, Arc::new(AtomicBool::new(true)), ok.clone(), errors.clone()).await?;
    ok.store(0, Ordering::Relaxed);
    errors.store(0, Ordering::Relaxed);
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (stop, ok, errors, addr, path) =
            (stop.clone(), ok.clone(), errors.clone(), addr.to_owned(), path.to_owned());
        tasks.push(tokio::spawn(async move { one_connection(&addr, &path, stop, ok, errors).await }));
    }
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for t in tasks {
        samples.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok(Load { ok: ok.load(Ordering::Relaxed), errors: errors.load(Ordering::Relaxed), samples, length })
}

/// One connection's requests until `stop` (at least one).
async fn one_connection(
    addr: &str,
    path: &str,
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
) -> Result<Vec<Duration>, String> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut samples = Vec::new();
    loop {
        sender.ready().await.map_err(|e| e.to_string())?;
        let req = hyper::Request::get(path).header("host", addr).body(Empty::<Bytes>::new()).unwrap();
        let t = Instant::now();
        let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let good = res.status() == 200;
        res.into_body().collect().await.map_err(|e| e.to_string())?;
        samples.push(t.elapsed());
        if good {
            ok.fetch_add(1, Ordering::Relaxed)
        } else {
            errors.fetch_add(1, Ordering::Relaxed)
        };
        if stop.load(Ordering::Relaxed) {
            return Ok(samples);
        }
    }
}

/// The repository's root.
pub fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The release `wasmkeep` binary, which the scenarios run as users do.
pub fn wasmkeep_bin() -> Result<std::path::PathBuf, String> {
    let bin = repo().join("target/release/wasmkeep");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("{} is missing: cargo build --release -p wasmkeep", bin.display()))
    }
}

/// Reads `wasmkeep dev`'s "serving ... on http://ADDR" line.
pub fn wasmkeep_addr(line: &str) -> Option<String> {
    line.strip_prefix("wasmkeep: serving ").and_then(|l| l.split("http://").nth(1)).map(|a| a.trim().to_owned())
}
