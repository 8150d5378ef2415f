//! `wasmkeep serve`'s provisioning API (and its other listeners) attacked
//! on what a request holds: the body budget held by slow uploads and by
//! callers without an account, and the connection watchdog under HTTP/2
//! (PINGs, windows held shut). The real binary and real sockets; each test
//! names the guard it attacks, and removing the guard fails it.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use serde_json::json;
use tokio::net::TcpStream;

async fn tenant_with_app(s: &Serve, name: &str) -> String {
    let token = signup(s, name).await;
    assert_eq!(s.api("PUT", "/v1/apps/shop", Some(&token), None).await.0, 201);
    token
}

/// F1: a body takes of the API's budget what its bytes fill as they come,
/// not what it declares. Two uploads declaring the whole node's budget and
/// trickling in at the minimum rate hold a few bytes of it, and another
/// tenant's upload is read at once (before, they held the budget until the
/// last byte, for as long as the rate let them: hours). A declared length
/// that could never fit is still `413` at once; one larger than what is
/// free now starts, and waits the grace, then `503`, when its bytes reach
/// the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_holds_of_the_budget_only_what_has_come() {
    let dir = tempfile::tempdir().unwrap();
    let mib = 1 << 20;
    let limits = limits_file(
        dir.path(),
        &format!(
            "api_body_bytes = {}\napi_body_bytes_per_tenant = {}\nuploads_per_tenant = 2\nbody_grace_secs = 2.0\n\
             body_min_rate = 1\n",
            8 * mib,
            8 * mib
        ),
    );
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let slow = tenant_with_app(&s, "slow").await;
    let quiet = tenant_with_app(&s, "quiet").await;
    let filler = tenant_with_app(&s, "filler").await;
    let late = tenant_with_app(&s, "late").await;

    let mut a = upload_in_flight(&s, &slow, "shop", 4 * mib, 1).await;
    let mut b = upload_in_flight(&s, &slow, "shop", 4 * mib, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    let (status, text) = s.api_raw("POST", "/v1/apps/shop/versions", Some(&quiet), Some(b"{}".to_vec())).await;
    assert_eq!(status, 400, "read at once, and refused for what it is: {text}");
    assert!(t.elapsed() < Duration::from_secs(1), "it did not wait for the budget: {:?}", t.elapsed());
    assert!(a.still().await && b.still().await, "the slow uploads go on");
    drop((a, b));

    // Never fits: refused before a byte is read.
    let mut never = upload_in_flight(&s, &quiet, "shop", 9 * mib, 1).await;
    let answer = never.answer(Duration::from_secs(2)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("the upload is larger than this node's API takes at once (8388608 bytes)"), "{answer}");

    // 6 MiB of bytes held; 4 MiB declared starts, and its bytes past the
    // 2 MiB free wait the grace, then 503.
    let mut full = upload_in_flight(&s, &filler, "shop", 7 * mib, 6 * mib).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(full.still().await);
    let mut over = upload_in_flight(&s, &late, "shop", 4 * mib, mib).await;
    assert!(over.still().await, "a declared length over what is free starts");
    let t = Instant::now();
    let mut tail = upload_in_flight(&s, &late, "shop", 4 * mib, 4 * mib - 1).await;
    let answer = tail.answer(Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("reading too many bodies"), "{answer}");
    assert!(t.elapsed() >= Duration::from_millis(1500), "it waited the grace: {:?}", t.elapsed());
    drop((full, over));
}

/// F1: a body keeping the minimum rate is still whole within
/// `api_body_secs`, or `408`: its bytes hold the budget for no longer.
#[tokio::test]
async fn an_api_body_is_whole_within_its_time_however_paced() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits_file(dir.path(), "api_body_secs = 3.0\nbody_grace_secs = 1.0\nbody_min_rate = 1\n");
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let token = tenant_with_app(&s, "acme").await;
    let t = Instant::now();
    let mut upload = upload_in_flight(&s, &token, "shop", 1 << 20, 1).await;
    let answer = upload.answer(Duration::from_secs(8)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("the upload took too long: a body must arrive whole within 3 s"), "{answer}");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(2900) && took < Duration::from_secs(5), "{took:?}");
}

/// F1: bodies sent without an account (sign-ups, from any number of
/// addresses) share a sixteenth of the API's budget: past it they are
/// refused `503` at once, and a tenant's bodies are read as ever.
#[tokio::test]
async fn bodies_without_an_account_share_a_small_part_of_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let limits =
        limits_file(dir.path(), &format!("api_body_bytes = {}\nbody_grace_secs = 2.0\nbody_min_rate = 1\n", 2 << 20));
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let token = signup(&s, "acme").await;
    let head = "POST /v1/tenants HTTP/1.1\r\nhost: api\r\n";
    let sign_up = |i: usize| {
        let mut body = format!("{{\"name\": \"anon{i}\"").into_bytes();
        body.resize(50 * 1024, b' ');
        body
    };
    // 2 MiB / 16 = 128 KiB: two of 50 KiB fit, a third does not.
    let mut held = Vec::new();
    for i in 0..2 {
        held.push(body_in_flight(api_addr(&s), &format!("127.0.4.{}", i + 1), head, 60 * 1024, &sign_up(i)).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let t = Instant::now();
    let mut third = body_in_flight(api_addr(&s), "127.0.4.3", head, 60 * 1024, &sign_up(2)).await;
    let answer = third.answer(Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("bodies sent without an account hold their share of this node's API"), "{answer}");
    assert!(t.elapsed() < Duration::from_secs(1), "refused at once: {:?}", t.elapsed());
    for body in &mut held {
        assert!(body.still().await, "the first two go on");
    }
    let (status, body) = s.api("POST", "/v1/tokens", Some(&token), Some(json!({"scope": "read"}))).await;
    assert_eq!(status, 201, "a tenant's body is read: {body}");
}

/// An HTTP/2 client over a raw socket (prior knowledge, no TLS).
struct H2 {
    send: h2::client::SendRequest<Bytes>,
    authority: String,
    /// Ends when the connection does.
    ended: tokio::task::JoinHandle<()>,
    pings: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for H2 {
    fn drop(&mut self) {
        self.ended.abort();
        if let Some(pings) = &self.pings {
            pings.abort();
        }
    }
}

impl H2 {
    /// Connects to `to`; with `window` as the initial window of every
    /// stream it receives on (0: no answer's byte may come).
    async fn connect(to: SocketAddr, authority: &str, window: Option<u32>) -> (Self, h2::PingPong) {
        let tcp = TcpStream::connect(to).await.unwrap();
        let mut builder = h2::client::Builder::new();
        if let Some(window) = window {
            builder.initial_window_size(window);
        }
        let (send, mut connection) = builder.handshake::<_, Bytes>(tcp).await.unwrap();
        let pong = connection.ping_pong().unwrap();
        let ended = tokio::spawn(async move {
            let _ = connection.await;
        });
        (Self { send, authority: authority.to_owned(), ended, pings: None }, pong)
    }

    /// Sends a PING every half second for as long as the connection lives.
    fn ping_forever(&mut self, mut pong: h2::PingPong) {
        self.pings = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if pong.ping(h2::Ping::opaque()).await.is_err() {
                    return;
                }
            }
        }));
    }

    /// `GET path`: the answer's status and its body as it comes.
    async fn get(&mut self, path: &str, token: Option<&str>) -> (u16, h2::RecvStream) {
        let mut request = http::Request::get(format!("http://{}{path}", self.authority));
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let mut send = self.send.clone().ready().await.unwrap();
        let (answer, _) = send.send_request(request.body(()).unwrap(), true).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), answer).await.unwrap().unwrap();
        (answer.status().as_u16(), answer.into_body())
    }

    /// Whether the connection ends within `limit`.
    async fn ends_within(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, &mut self.ended).await.is_ok()
    }
}

/// Reads `body` whole, opening the window as it comes.
async fn whole(body: &mut h2::RecvStream) -> Vec<u8> {
    let mut all = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), body.data()).await.unwrap() {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        all.extend_from_slice(&chunk);
    }
    all
}

/// F3: HTTP/2 PINGs are no progress. On each listener (the API, the public
/// port, the metrics listener) a connection that had one answer, then only
/// PINGs twice a second, is closed once idle for `keepalive_idle_secs`
/// (then a graceful close of at most 5 s), as a silent one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_pings_keep_no_connection_open() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits_file(dir.path(), "keepalive_idle_secs = 2.0\n");
    let extra = ["--limits", limits.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"];
    let s = Serve::start(&dir.path().join("data"), &extra);
    let metrics: SocketAddr =
        s.metrics.as_ref().unwrap().trim_start_matches("http://").trim_end_matches("/metrics").parse().unwrap();
    let listeners =
        [(api_addr(&s), "api", "/v1/openapi.yaml"), (s.public, "shop.acme.localhost", "/"), (metrics, "m", "/metrics")];
    let mut pinging = Vec::new();
    for (to, authority, path) in listeners {
        let (mut h2, pong) = H2::connect(to, authority, None).await;
        let (status, mut body) = h2.get(path, None).await;
        assert!(status > 0);
        whole(&mut body).await;
        h2.ping_forever(pong);
        pinging.push((h2, path, Instant::now()));
    }
    for (mut h2, path, answered) in pinging {
        let left = Duration::from_secs(12).saturating_sub(answered.elapsed());
        assert!(h2.ends_within(left).await, "{path}: PINGs kept the connection open for 12 s");
        let open = answered.elapsed();
        assert!(open >= Duration::from_millis(1900), "{path}: closed before the idle time: {open:?}");
    }
}

/// F3: an API answer waits on itself only for as long as its body does
/// (a log tail waiting for lines); one that waits on its client is cut
/// when nothing progresses for the idle time. A client that asks for the
/// API's document (64 KiB) with every window held shut, PINGing all along,
/// is cut after the idle time; a tail whose client reads goes on while it
/// waits for lines, well past the idle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_answer_whose_client_never_opens_its_window_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits_file(dir.path(), "keepalive_idle_secs = 2.0\n");
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let token = tenant_with_app(&s, "acme").await;

    // The tail that waits for lines, its client reading.
    let (mut tail, _) = H2::connect(api_addr(&s), "api", None).await;
    let (status, mut lines) = tail.get("/v1/apps/shop/logs?follow=true", Some(&token)).await;
    assert_eq!(status, 200);

    let (mut shut, pong) = H2::connect(api_addr(&s), "api", Some(0)).await;
    shut.ping_forever(pong);
    let asked = Instant::now();
    let (status, _body) = shut.get("/v1/openapi.yaml", None).await;
    assert_eq!(status, 200, "the head needs no window");
    assert!(shut.ends_within(Duration::from_secs(8)).await, "an answer never taken held its connection for 8 s");
    let open = asked.elapsed();
    assert!(open >= Duration::from_millis(1900), "cut before the idle time: {open:?}");

    // By now the tail has waited for lines longer than the idle time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!tail.ends_within(Duration::from_millis(100)).await, "a tail waiting for lines was cut");
    let waiting = tokio::time::timeout(Duration::from_millis(100), lines.data()).await;
    assert!(waiting.is_err(), "no lines yet: {waiting:?}");
    // And the connection still serves.
    let (status, mut body) = tail.get("/v1/openapi.yaml", None).await;
    assert_eq!(status, 200);
    assert!(whole(&mut body).await.len() > 65_000);
}

/// F3: a log tail may wait for lines as long as it likes, but not for its
/// client: one whose client never opens its window (PINGing all along) is
/// cut once its lines wait on the client for the idle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_tail_whose_client_never_opens_its_window_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits_file(dir.path(), "keepalive_idle_secs = 2.0\n");
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let token = signup(&s, "acme").await;
    deploy(&s, &token, "p").await;
    assert_eq!(s.public("p.acme.localhost", "/actor/probe/a/print?text=line&times=3").await.0, 200);

    let (mut shut, pong) = H2::connect(api_addr(&s), "api", Some(0)).await;
    shut.ping_forever(pong);
    let asked = Instant::now();
    let (status, _lines) = shut.get("/v1/apps/p/logs?follow=true", Some(&token)).await;
    assert_eq!(status, 200);
    assert!(shut.ends_within(Duration::from_secs(8)).await, "a tail never read held its connection for 8 s");
    let open = asked.elapsed();
    assert!(open >= Duration::from_millis(1900), "cut before the idle time: {open:?}");
}

/// F6: an upload holds its share of the budgets, and its place among the
/// tenant's uploads in flight, until its version is compiled, even when
/// its client leaves as soon as the bundle is sent. Before, a client that
/// left freed both at once while the node still held the bundle, queued
/// for the compile threads: a tenant could queue any number of bundles
/// beyond its bounds. With one compile thread, two abandoned uploads of
/// a slow component hold the tenant's two uploads in flight: a third is
/// `503` until they are compiled, then taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_upload_holds_its_share_until_it_is_compiled() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let limits = limits_file(dir.path(), "compile_threads = 1\nuploads_per_tenant = 2\n");
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let token = tenant_with_app(&s, "leaver").await;
    let slow = wasmkeep_tests::slow_to_compile(3, 6000);
    let slow_bundle = json!({"manifest": {"classes": {"slow": {"access": "open", "component": "c"}}},
                        "components": {"c": b64(&slow)}})
    .to_string();
    let head = format!(
        "POST /v1/apps/shop/versions HTTP/1.1\r\nhost: api\r\nauthorization: Bearer {token}\r\ncontent-length: {}\r\n\r\n",
        slow_bundle.len()
    );
    let sent = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let mut tcp = connect_from(api_addr(&s), "127.0.0.1").await.unwrap();
        tcp.write_all(head.as_bytes()).await.unwrap();
        tcp.write_all(slow_bundle.as_bytes()).await.unwrap();
        clients.push(tcp);
    }
    // Once the bundles are read (a client leaving before that cancels its
    // upload), the clients leave without their answers.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    drop(clients);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, text) = s.api_raw("POST", "/v1/apps/shop/versions", Some(&token), Some(bundle())).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("has 2 uploads in flight already"), "{text}");
    // Taken again once both are compiled (and refused as no actor class).
    let (status, text) = loop {
        let (status, text) = s.api_raw("POST", "/v1/apps/shop/versions", Some(&token), Some(bundle())).await;
        if status != 503 || sent.elapsed() > Duration::from_secs(120) {
            break (status, text);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status, 201, "{text}");
    eprintln!("two abandoned compiles held the uploads for {:?}", sent.elapsed());
}

/// The log tails a node serves are bounded per tenant and in all: each
/// holds a backlog of lines for a slow reader. Before, any number of
/// follow tails could be open, each up to 4 MiB of lines unread. One
/// tenant's third tail is `503` (its bound is two), another tenant's
/// first fits and then the node's three are all held; a tail that ends
/// gives its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_tails_are_bounded_per_tenant_and_for_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits_file(dir.path(), "log_tails = 3\nlog_tails_per_tenant = 2\n");
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let (a, b, c) = (tenant_with_app(&s, "ta").await, tenant_with_app(&s, "tb").await, tenant_with_app(&s, "tc").await);
    let to = api_addr(&s);
    // A follow tail over its own connection: the connection, and the head
    // of its answer (a refusal's body too).
    let open = |token: String| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = connect_from(to, "127.0.0.1").await.unwrap();
        let request = format!(
            "GET /v1/apps/shop/logs?follow=true HTTP/1.1\r\nhost: api\r\nauthorization: Bearer {token}\r\n\r\n"
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !(seen.windows(4).any(|w| w == b"\r\n\r\n")
            && (seen.starts_with(b"HTTP/1.1 200") || seen.ends_with(b"}")))
        {
            match tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        (tcp, String::from_utf8_lossy(&seen).into_owned())
    };
    let (a1, answer) = open(a.clone()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_a2, answer) = open(a.clone()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_, refused) = open(a.clone()).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("the account has 2 log tails open on this node already"), "{refused}");
    let (_b1, answer) = open(b.clone()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_, refused) = open(c.clone()).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("this node serves 3 log tails already"), "{refused}");
    // A tail whose client leaves gives its place back.
    drop(a1);
    let left = Instant::now();
    let answer = loop {
        let (_tail, answer) = open(c.clone()).await;
        if answer.starts_with("HTTP/1.1 200") || left.elapsed() > Duration::from_secs(10) {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    eprintln!("a left tail's place came back within {:?}", left.elapsed());
}
