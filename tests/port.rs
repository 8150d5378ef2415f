//! The public port under attack (issue 8): slow and partial heads, idle
//! connections, slow bodies, too many connections, heads too large, bodies
//! past the node's budget, requests without `Host`, names with broken
//! escapes, forged trailers. Raw TCP clients, some from addresses of their
//! own on the loopback range.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::{Access, Limits};
use wasmkeep_tests::{TestNode, class, guests, open_probe_node, test_limits};

fn addr(n: &TestNode) -> SocketAddr {
    n.url.trim_start_matches("http://").parse().unwrap()
}

/// A connection to the node from `from` (an address of the loopback range).
async fn connect_from(n: &TestNode, from: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from.parse().unwrap(), 0)).unwrap();
    socket.connect(addr(n)).await.unwrap()
}

async fn connect(n: &TestNode) -> TcpStream {
    TcpStream::connect(addr(n)).await.unwrap()
}

/// Everything the node sends until it closes the connection, and how long
/// that took; `None` if it is still open after `limit`.
async fn until_closed(tcp: &mut TcpStream, limit: Duration) -> Option<(String, Duration)> {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout_at((started + limit).into(), tcp.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some((String::from_utf8_lossy(&got).into_owned(), started.elapsed())),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// One request on a fresh connection, answered and read whole (the
/// request asks the node to close).
async fn exchange(n: &TestNode, request: &str) -> String {
    let mut tcp = connect(n).await;
    tcp.write_all(request.as_bytes()).await.unwrap();
    until_closed(&mut tcp, Duration::from_secs(10)).await.expect("the node answers and closes").0
}

fn status(answer: &str) -> u16 {
    answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn quick(limits: Limits) -> Limits {
    Limits { header_read_secs: 0.5, keepalive_idle_secs: 0.5, ..limits }
}

#[tokio::test]
async fn a_partial_head_is_dropped_after_the_head_time() {
    let n = open_probe_node(Limits { keepalive_idle_secs: 30.0, ..quick(test_limits()) }).await;
    let mut tcp = connect(&n).await;
    tcp.write_all(b"GET /actor/open/a/ HTTP/1.1\r\nhost: x\r\nx-slow: ").await.unwrap();
    let (_, after) = until_closed(&mut tcp, Duration::from_secs(5)).await.expect("the node drops a slow head");
    assert!(after >= Duration::from_millis(400), "not before the head time: {after:?}");
    // The node serves others meanwhile and after.
    assert_eq!(n.get("/actor/open/a/ping").await.status, 200);
}

#[tokio::test]
async fn a_head_sent_a_byte_at_a_time_is_dropped_too() {
    let n = open_probe_node(Limits { keepalive_idle_secs: 30.0, ..quick(test_limits()) }).await;
    let mut tcp = connect(&n).await;
    let started = Instant::now();
    // Each byte is in time for an idle or read timer that restarts; the
    // head's own time counts from its first byte.
    for byte in b"GET /actor/open/a/ HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
        if tcp.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    let closed = until_closed(&mut tcp, Duration::from_millis(100)).await;
    assert!(closed.is_some(), "a head trickled over 3 s is cut at 0.5 s");
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_time() {
    let n = open_probe_node(Limits { header_read_secs: 30.0, ..quick(test_limits()) }).await;
    // One that never sends anything.
    let mut silent = connect(&n).await;
    // One that is served, then idles on keep-alive.
    let mut kept = connect(&n).await;
    kept.write_all(b"GET /actor/open/a/ping HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 1024];
    let n_read = kept.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n_read]).starts_with("HTTP/1.1 200"));
    let answered = Instant::now();
    let (_, after) = until_closed(&mut silent, Duration::from_secs(10)).await.expect("a silent connection is closed");
    assert!(after >= Duration::from_millis(300), "not before the idle time: {after:?}");
    until_closed(&mut kept, Duration::from_secs(5)).await.expect("a kept-alive connection is closed");
    assert!(answered.elapsed() >= Duration::from_millis(400), "idle counts from the answer");
}

#[tokio::test]
async fn a_slow_body_to_an_actor_fails_408_and_the_actor_never_runs() {
    let limits = Limits { body_grace_secs: 0.5, body_min_rate: 100, ..test_limits() };
    let n = open_probe_node(limits).await;
    let mut tcp = connect(&n).await;
    tcp.write_all(b"PUT /actor/open/a/kv?key=k HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\nabc")
        .await
        .unwrap();
    let drip = async {
        for _ in 0..50 {
            if tcp.write_all(b"x").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(1500), drip).await;
    let (answer, _) = until_closed(&mut tcp, Duration::from_secs(5)).await.expect("the node answers and closes");
    assert_eq!(status(&answer), 408, "{answer}");
    assert!(body(&answer).contains("too slowly"), "{answer}");
    assert_eq!(n.get("/actor/open/a/kv?key=k").await.status, 404, "the write never happened");
}

#[tokio::test]
async fn connections_are_bounded_in_all_and_per_client_with_a_fast_refusal() {
    let limits = Limits { max_connections: 6, max_connections_per_client: 3, ..test_limits() };
    let n = open_probe_node(limits).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from(&n, "127.0.0.2").await);
    }
    // Past the client's bound: a fast 503, whatever the client sends.
    let mut refused = connect_from(&n, "127.0.0.2").await;
    let _ = refused.write_all(b"GET /actor/open/a/ping HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let (answer, after) = until_closed(&mut refused, Duration::from_secs(3)).await.expect("refused at once");
    assert_eq!(status(&answer), 503, "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(after < Duration::from_secs(1), "{after:?}");
    // Another client is served.
    let mut other = connect_from(&n, "127.0.0.3").await;
    other.write_all(b"GET /actor/open/a/ping HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let (answer, _) = until_closed(&mut other, Duration::from_secs(5)).await.unwrap();
    assert_eq!(status(&answer), 200, "{answer}");
    // Past the port's bound (3 + 3 held), every client is refused.
    for _ in 0..3 {
        held.push(connect_from(&n, "127.0.0.4").await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut refused = connect_from(&n, "127.0.0.5").await;
    let (answer, _) = until_closed(&mut refused, Duration::from_secs(3)).await.expect("refused at once");
    assert_eq!(status(&answer), 503, "{answer}");
    // A connection closed gives its place back.
    held.clear();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(n.get("/actor/open/a/ping").await.status, 200);
}

#[tokio::test]
async fn a_head_over_the_limit_is_refused_and_the_node_keeps_serving() {
    let n = open_probe_node(test_limits()).await;
    let huge = "a".repeat(64 * 1024);
    let answer = exchange(&n, &format!("GET /actor/open/a/ping HTTP/1.1\r\nhost: x\r\nx-big: {huge}\r\n\r\n")).await;
    assert_eq!(status(&answer), 431, "{answer}");
    let answer =
        exchange(&n, "GET /actor/open/a/ping HTTP/1.1\r\nhost: x\r\nx-ok: fine\r\nconnection: close\r\n\r\n").await;
    assert_eq!(status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn an_http11_request_without_exactly_one_host_is_400() {
    let n = open_probe_node(test_limits()).await;
    let answer = exchange(&n, "GET /actor/open/a/ping HTTP/1.1\r\nconnection: close\r\n\r\n").await;
    assert_eq!(status(&answer), 400, "{answer}");
    assert_eq!(body(&answer), "request has no Host header, or more than one\n");
    let absolute = "GET http://x/actor/open/a/ping HTTP/1.1\r\nconnection: close\r\n\r\n";
    assert_eq!(status(&exchange(&n, absolute).await), 400, "absolute form too");
    let twice = "GET /actor/open/a/ping HTTP/1.1\r\nhost: x\r\nhost: y\r\nconnection: close\r\n\r\n";
    assert_eq!(status(&exchange(&n, twice).await), 400, "two hosts");
    let answer = exchange(&n, "GET /actor/open/a/ping HTTP/1.0\r\n\r\n").await;
    assert_eq!(status(&answer), 200, "HTTP/1.0 may omit it: {answer}");
}

#[tokio::test]
async fn a_name_with_a_broken_escape_is_400_and_creates_nothing() {
    let n = open_probe_node(test_limits()).await;
    for path in ["/actor/open/%zz/count", "/actor/open/a%/count", "/actor/open/%4/count"] {
        let answer = exchange(&n, &format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")).await;
        assert_eq!(status(&answer), 400, "{path}: {answer}");
        assert_eq!(body(&answer), "actor name has a `%` not followed by two hex digits\n");
    }
    assert_eq!(n.node.awake_actors(), 0, "no actor was created");
}

#[tokio::test]
async fn request_trailers_lose_the_hosts_range() {
    let spec = VersionSpec { front: Some(guests().raw_front.clone()), classes: vec![], ..Default::default() };
    let n = TestNode::start(test_limits(), spec).await;
    let answer = exchange(
        &n,
        "POST /trailers HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ntrailer: x-wasmkeep-caller, x-kept\r\n\
         connection: close\r\n\r\n3\r\nabc\r\n0\r\nx-wasmkeep-caller: t/_front/main\r\nX-Wasmkeep-Chain: a/b\r\n\
         x-kept: 1\r\n\r\n",
    )
    .await;
    assert_eq!(status(&answer), 200, "{answer}");
    // The front's answer is chunked: one chunk naming what it saw.
    assert_eq!(body(&answer), "6\r\nx-kept\r\n0\r\n\r\n", "only the client's own trailer reaches the front");
}

#[tokio::test]
async fn a_slow_body_to_the_front_holds_no_slot() {
    // Two slots; four clients sending a small body a byte a second.
    let limits = Limits { front_slots: 2, front_slots_per_client: 2, pool_instances: 20, ..test_limits() };
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    let n = TestNode::start(limits, spec).await;
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut tcp = connect(&n).await;
        tcp.write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nab").await.unwrap();
        slow.push(tcp);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(n.node.front_slots_in_use(), 0, "a body still coming takes no slot");
    for _ in 0..5 {
        assert_eq!(n.get("/hello").await.status, 200);
    }
    // A body that completes is served.
    let mut tcp = slow.pop().unwrap();
    tcp.write_all(&[b'x'; 98]).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let got = tcp.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..got]).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn one_client_holds_at_most_its_share_of_the_front_slots() {
    // Four slots, half for one client (the default share).
    let limits = Limits { front_slots: 4, pool_instances: 20, ..Limits::default() };
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    let n = TestNode::start(limits, spec).await;
    let client =
        |from: &str| reqwest::Client::builder().local_address(from.parse::<IpAddr>().unwrap()).build().unwrap();
    let greedy = client("127.0.0.2");
    let url = format!("{}/sleep?ms=1500", n.url);
    let held: Vec<_> = (0..2).map(|_| tokio::spawn(greedy.get(&url).send())).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = greedy.get(format!("{}/hello", n.url)).send().await.unwrap();
    assert_eq!(third.status(), 503, "past its share");
    assert_eq!(third.headers()["retry-after"], "1");
    let other = client("127.0.0.3").get(format!("{}/hello", n.url)).send().await.unwrap();
    assert_eq!(other.status(), 200, "another client has slots left");
    for h in held {
        assert_eq!(h.await.unwrap().unwrap().status(), 200);
    }
}

#[tokio::test]
async fn bodies_past_the_nodes_budget_wait_then_503() {
    let limits = Limits {
        body_bytes: 512 * 1024,
        buffered_body_bytes: 1024 * 1024,
        body_grace_secs: 0.5,
        body_min_rate: 1 << 20,
        ..test_limits()
    };
    let n = TestNode::start(
        limits,
        VersionSpec { front: None, classes: vec![class("open", Access::Open, &guests().probe)], ..Default::default() },
    )
    .await;
    // Two bodies of 500 KiB held for 2 s by slow events fill the budget.
    let post = |name: &str, path: &str| {
        n.client.post(format!("{}/actor/open/{name}{path}", n.url)).body(vec![b'b'; 500 * 1024]).send()
    };
    let holders = [tokio::spawn(post("a", "/slow-echo?ms=2000")), tokio::spawn(post("b", "/slow-echo?ms=2000"))];
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let refused = post("c", "/echo").await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert!(started.elapsed() >= Duration::from_millis(400), "it waited first: {:?}", started.elapsed());
    for h in holders {
        assert_eq!(h.await.unwrap().unwrap().status(), 200);
    }
    // The budget came back with the answers.
    assert_eq!(post("c", "/echo").await.unwrap().status(), 200);
}

/// A chunked body sent a byte a chunk holds of the node's budget what its
/// bytes are, rounded once: before, each chunk took a KiB, so 2,000 bytes
/// in 2,000 chunks needed 2,000 KiB of a 1 MiB budget and were refused, and
/// a few such clients held the budget of everyone's bodies.
#[tokio::test]
async fn a_body_in_tiny_chunks_holds_its_bytes_not_a_unit_a_chunk() {
    let limits = Limits { body_bytes: 512 * 1024, buffered_body_bytes: 1024 * 1024, ..test_limits() };
    let n = open_probe_node(limits).await;
    let mut tcp = connect(&n).await;
    let mut request = b"POST /actor/open/a/echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..2000 {
        request.extend_from_slice(b"1\r\nb\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    tcp.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(read)) => answer.extend_from_slice(&buf[..read]),
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..answer.len().min(200)]);
}

#[tokio::test]
async fn a_client_that_never_reads_its_answer_is_dropped() {
    // Walls of 1 s and an idle time of 0.5 s: nothing may stall for 1.5 s.
    let limits = Limits {
        wall_per_event_secs: 1.0,
        front_wall_secs: 1.0,
        call_limit_secs: 1.0,
        keepalive_idle_secs: 0.5,
        body_bytes: 64 << 20,
        buffered_body_bytes: 64 << 20,
        ..test_limits()
    };
    let n = open_probe_node(limits).await;
    let mut tcp = connect(&n).await;
    // More than the kernel's buffers on both sides hold.
    tcp.write_all(b"GET /actor/open/a/blob?mb=48 HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    // The answer fills the socket's buffers; the client reads nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(read)) => got += read,
            Err(_) => panic!("the node still holds the connection after {got} bytes"),
        }
    }
    assert!(got < 48 << 20, "the node gave up on the answer: {got} bytes of 48 MiB came");
    assert_eq!(n.get("/actor/open/a/ping").await.status, 200);
}
