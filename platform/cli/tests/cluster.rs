//! Three `wasmkeep serve` processes on loopback with one PostgreSQL: a
//! cluster as an operator runs it (issue 11, item 9). The real binary, the
//! examples deployed with the CLI through any node's API, real clients on
//! every public port, and the nodes killed, paused and drained for real.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::{Message, http};

/// A cluster's nodes, their cluster directory and its store.
struct Cluster {
    nodes: Vec<Serve>,
    dir: tempfile::TempDir,
    _data: Vec<tempfile::TempDir>,
}

/// Nodes `names` of a new cluster on one new PostgreSQL database, each
/// with `extra` flags too.
async fn cluster(names: &[&str], extra: &[&str]) -> Cluster {
    cluster_with(names, extra, &[]).await
}

/// As [`cluster`], each node with variables `env` set.
async fn cluster_with(names: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Cluster {
    let url = wasmkeep_storage::test_postgres::server().database().await;
    let dir = tempfile::tempdir().unwrap();
    let init = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .args(["cluster", "init"])
        .arg(dir.path())
        .args(["--nodes", &names.join(",")])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let (mut nodes, mut data) = (Vec::new(), Vec::new());
    for id in names {
        let d = tempfile::tempdir().unwrap();
        let mut flags: Vec<String> = [
            "--store",
            &url,
            "--node-id",
            id,
            "--cluster-dir",
            &dir.path().display().to_string(),
            "--cluster-listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        flags.extend(extra.iter().map(|s| s.to_string()));
        nodes.push(Serve::start_with(d.path(), &flags.iter().map(String::as_str).collect::<Vec<_>>(), env));
        data.push(d);
    }
    Cluster { nodes, dir, _data: data }
}

impl Cluster {
    fn operator_token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("operator-token")).unwrap().trim().to_owned()
    }

    /// The sum of one metric's sample over every node still running.
    async fn metric(&self, sample: &str) -> f64 {
        let mut sum = 0.0;
        for node in &self.nodes {
            sum += node.metric(sample).await;
        }
        sum
    }
}

/// Waits until `path` at `host` answers `200` on every node. A node
/// compiles a new version's components one at a time on a niced thread
/// (the compile scheduler), beside the other tests' nodes doing the same on
/// two cores: a version of four components can take a minute to be ready
/// everywhere, so the wait is long and the test's claims come after it.
async fn until_everywhere(c: &Cluster, host: &str, path: &str) {
    for node in &c.nodes {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut ok = false;
        while Instant::now() < deadline {
            if node.public(host, path).await.0 == 200 {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ok, "{host}{path} never answered on {}", node.public);
    }
}

fn example(name: &str) -> String {
    repo().join("docs/examples").join(name).display().to_string()
}

/// One more on the counter example's actor `name`, through `s`.
async fn counter(s: &Serve, name: &str) -> Result<i64, (u16, String)> {
    let (status, text) = s.public("counter.alpha.localhost", &format!("/actor/counter/{name}/")).await;
    match status {
        200 => Ok(text.trim().parse().unwrap()),
        _ => Err((status, text)),
    }
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_json(ws: &mut Ws) -> Value {
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("a message in time") {
        Some(Ok(Message::Text(t))) => serde_json::from_str(&t).unwrap(),
        other => panic!("{other:?}"),
    }
}

/// Joins the chat example's room `room` through `s` as `user` (logged in
/// through `s` too).
async fn join_chat(s: &Serve, user: &str, room: &str) -> Ws {
    let client = reqwest::Client::new();
    // The chat's value, set through another node, reaches this one within
    // a second or so: until then its login answers 503.
    let mut answer = (0, String::new());
    for _ in 0..200 {
        let login = client
            .post(format!("http://{}/login", s.public))
            .header("host", "chat.alpha.localhost")
            .form(&[("user", user)])
            .send()
            .await
            .unwrap();
        answer = (login.status().as_u16(), login.text().await.unwrap());
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answer.0, 200, "{}", answer.1);
    let body: Value = serde_json::from_str(&answer.1).unwrap();
    let token = body["token"].as_str().unwrap().to_owned();
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{}/rooms/{room}/ws?token={token}", s.public).into_client_request().unwrap();
    request.headers_mut().insert("host", "chat.alpha.localhost".parse().unwrap());
    tokio_tungstenite::connect_async(request).await.expect("the chat opens").0
}

#[tokio::test]
async fn three_nodes_serve_the_counter_the_shop_and_the_chat_through_any_port() {
    let c = cluster(&["a", "b", "c"], &[]).await;
    let (a, b, n3) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    let login = tempfile::tempdir().unwrap();
    // Signed up on a, deployed through b's API and c's: the provisioning
    // API works on every node.
    let token = pro_tenant(&c, a).await;
    let with = |args: &[&str]| -> Vec<String> {
        args.iter().map(|s| s.to_string()).chain(["--token".to_owned(), token.clone()]).collect()
    };
    let run = |via: &Serve, args: &[&str], stdin: Option<&str>| {
        let args = with(args);
        let (ok, _, err) = cli(via, login.path(), &args.iter().map(String::as_str).collect::<Vec<_>>(), stdin);
        assert!(ok, "{args:?}: {err}");
    };
    run(b, &["deploy", &example("counter")], None);
    run(n3, &["deploy", &example("chat")], None);
    run(a, &["deploy", &example("shop")], None);
    // A value set through one node is the app's on every node.
    run(b, &["values", "set", "chat", "TOKEN_SECRET"], Some("a long secret\n"));
    until_everywhere(&c, "counter.alpha.localhost", "/actor/counter/warm/peek").await;
    until_everywhere(&c, "shop.alpha.localhost", "/").await;
    until_everywhere(&c, "chat.alpha.localhost", "/").await;

    // The counter through the three ports in turn: one writer, in order.
    for n in 1..=30 {
        assert_eq!(counter(&c.nodes[n as usize % 3], "hits").await, Ok(n));
    }
    // The shop's page through any node: its front calls the user's actors,
    // wherever they are.
    for node in &c.nodes {
        let (status, page) = node.public("shop.alpha.localhost", "/page/ann").await;
        assert_eq!(status, 200, "{page}");
    }
    // Two chat clients on different nodes, one room: the room is internal,
    // so each socket is the front's hand-off, relayed to the room's owner
    // from every other node.
    let mut ann = join_chat(a, "ann", "lobby").await;
    let mut bob = join_chat(b, "bob", "lobby").await;
    let mut cy = join_chat(n3, "cy", "lobby").await;
    ann.send(Message::text(r#"{"text":"hi all"}"#)).await.unwrap();
    let said = serde_json::json!({ "user": "ann", "text": "hi all" });
    for ws in [&mut ann, &mut bob, &mut cy] {
        assert_eq!(next_json(ws).await, said);
    }
    assert!(c.metric("wasmkeep_forwards_total{kind=\"handoff\"} ").await >= 2.0, "two of three sockets were relayed");
    assert!(c.metric("wasmkeep_forwards_total{kind=\"call\"} ").await >= 1.0, "the fronts' calls went to owners");
    assert!(c.metric("wasmkeep_forwards_total{kind=\"request\"} ").await >= 20.0, "two thirds of the counter's");
    // The transport's own: streams each way, the calls' round trips by
    // peer, QUIC's round-trip estimate of each kept connection.
    let (out, into) = (
        c.metric("wasmkeep_cluster_streams_total{direction=\"out\"} ").await,
        c.metric("wasmkeep_cluster_streams_total{direction=\"in\"} ").await,
    );
    assert!(out >= 20.0 && into >= 20.0, "{out} out, {into} in");
    let mut pages = String::new();
    for node in &c.nodes {
        pages += &reqwest::get(node.metrics.as_ref().unwrap()).await.unwrap().text().await.unwrap();
    }
    let calls: f64 = pages
        .lines()
        .filter(|l| l.starts_with("wasmkeep_cluster_call_seconds_count{peer=\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(calls >= 1.0, "the fronts' calls were timed: {pages}");
    let rtts: Vec<&str> = pages.lines().filter(|l| l.starts_with("wasmkeep_peer_rtt_seconds{node=\"")).collect();
    assert!(rtts.len() >= 2 && rtts.iter().all(|l| !l.ends_with(" 0")), "{rtts:?}");
    // The room is not public on any node; under `--cluster-plaintext
    // refuse` (the default) a node's signature on the public port is a
    // client's header: not read, the upgrade is an outside one.
    for node in &c.nodes {
        assert_eq!(node.public("chat.alpha.localhost", "/actor/room/lobby/").await.0, 403);
    }
    let secret = wasmkeep_cluster::ClusterDir::load(c.dir.path(), &wasmkeep_cluster::NodeId::parse("a").unwrap())
        .unwrap()
        .secret;
    let believed_elsewhere = signed(&secret, relay("alpha/chat", Some("alpha/_front/main"), true), now_ms());
    assert_eq!(send(b, &believed_elsewhere, true).await, 403);

    // The operator's and the tenant's changes through one node hold on all:
    // a suspension, then the resumption, then an app deleted.
    let operator = c.operator_token();
    assert_eq!(n3.api("POST", "/v1/tenants/alpha/suspend", Some(&operator), None).await.0, 200);
    for node in &c.nodes {
        assert!(until(|| async { node.public("shop.alpha.localhost", "/").await.0 == 503 }).await, "suspended");
    }
    assert_eq!(a.api("POST", "/v1/tenants/alpha/resume", Some(&operator), None).await.0, 200);
    for node in &c.nodes {
        let resumed = until(|| async { node.public("shop.alpha.localhost", "/").await.0 == 200 }).await;
        let log = node.log.lock().unwrap().clone();
        assert!(resumed, "resumed: {:?}\n{log}", node.public("shop.alpha.localhost", "/").await);
    }
    assert_eq!(b.api("DELETE", "/v1/apps/shop", Some(&token), None).await.0, 204);
    for node in &c.nodes {
        assert!(until(|| async { node.public("shop.alpha.localhost", "/").await.0 == 404 }).await, "deleted");
    }
}

/// Whether `check` holds within 20 s (each node reads the store once a
/// second; a loaded CI machine runs other tests beside).
async fn until<F: std::future::Future<Output = bool>>(check: impl Fn() -> F) -> bool {
    for _ in 0..200 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A relayed hand-off's head to the chat's room `lobby`, as a node sends it
/// (the host the chat's, so that an upgrade not believed reaches the room
/// as a client's would).
fn relay(app: &str, caller: Option<&str>, mark: bool) -> http::HeaderMap {
    let mut head = http::HeaderMap::new();
    for (n, v) in [
        ("host", "chat.alpha.localhost"),
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("x-wasmkeep-app", app),
    ] {
        head.insert(n, v.parse().unwrap());
    }
    if let Some(caller) = caller {
        head.insert("x-wasmkeep-caller", caller.parse().unwrap());
    }
    if mark {
        head.insert("x-wasmkeep-upgrade", "websocket".parse().unwrap());
    }
    head
}

use wasmkeep_cluster::membership::unix_ms as now_ms;

const ROOM: &str = "/actor/room/lobby/?user=mallory";

fn signed(secret: &[u8; 32], mut head: http::HeaderMap, at: u64) -> http::HeaderMap {
    let names: &[&str] = if head.contains_key("x-wasmkeep-upgrade") { &["x-wasmkeep-upgrade"] } else { &[] };
    let pq = http::uri::PathAndQuery::from_static(ROOM);
    let signer = wasmkeep_cluster::signing::Signer::new("a", secret);
    signer.sign(&http::Method::GET, &pq, &wasmkeep_core::signature::EMPTY_BODY_SHA256, &mut head, names, at).unwrap();
    head
}

/// Sends `head` as `GET ROOM` to `s`'s public port: the status.
async fn send(s: &Serve, head: &http::HeaderMap, upgrade: bool) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut text = format!("GET {ROOM} HTTP/1.1\r\n");
    for (name, value) in head {
        if upgrade || (name != "upgrade" && name != "connection") {
            text.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
        }
    }
    text.push_str("content-length: 0\r\n\r\n");
    let mut stream = tokio::net::TcpStream::connect(s.public).await.unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer)).await.unwrap().unwrap();
    let head = String::from_utf8_lossy(&answer[..n]).into_owned();
    head.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn forged_signatures_get_the_seeds_answers_from_the_real_binary() {
    let c = cluster(&["a", "b"], &["--cluster-plaintext", "allow"]).await;
    let b = &c.nodes[1];
    let login = tempfile::tempdir().unwrap();
    assert!(cli(b, login.path(), &["signup", "alpha"], None).0);
    let (ok, _, err) = cli(b, login.path(), &["deploy", &example("chat")], None);
    assert!(ok, "{err}");
    assert!(cli(b, login.path(), &["values", "set", "chat", "TOKEN_SECRET"], Some("a secret\n")).0);
    until_everywhere(&c, "chat.alpha.localhost", "/").await;
    let id = wasmkeep_cluster::NodeId::parse("a").unwrap();
    let secret = wasmkeep_cluster::ClusterDir::load(c.dir.path(), &id).unwrap().secret;
    let now = now_ms;
    let front = || relay("alpha/chat", Some("alpha/_front/main"), true);
    // The front's hand-off, signed as a node signs it: opened.
    let good = signed(&secret, front(), now());
    assert_eq!(send(b, &good, true).await, 101, "a believed relay opens");
    // Each forgery of a relay (docs/spec/sockets.md §15), and its answer.
    assert_eq!(send(b, &front(), true).await, 403, "no signature: an outside upgrade, and the room is internal");
    assert_eq!(send(b, &signed(&[7; 32], front(), now()), true).await, 403, "bad MAC");
    assert_eq!(send(b, &good, true).await, 403, "replayed nonce");
    assert_eq!(send(b, &signed(&secret, front(), now() - 31_000), true).await, 403, "out of window");
    assert_eq!(send(b, &signed(&secret, front(), now()), false).await, 403, "mark without upgrade");
    let unmarked = signed(&secret, relay("alpha/chat", Some("alpha/_front/main"), false), now());
    assert_eq!(send(b, &unmarked, true).await, 403, "upgrade without mark");
    let caller = signed(&secret, relay("alpha/chat", Some("alpha/room/x"), true), now());
    assert_eq!(send(b, &caller, true).await, 403, "wrong caller");
    let nobody = signed(&secret, relay("alpha/chat", None, true), now());
    assert_eq!(send(b, &nobody, true).await, 403, "no caller");
}

/// Increments the counter through `via` (in turn) until `stop`; answers
/// every acknowledged count, in order, with when it was. A `503` is
/// retried, as a client does.
async fn increments(
    via: Vec<std::net::SocketAddr>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(i64, Instant)> {
    let client = reqwest::Client::new();
    let (mut acked, mut turn) = (Vec::new(), 0);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        turn += 1;
        let addr = via[turn % via.len()];
        let sent = client
            .get(format!("http://{addr}/actor/counter/hits/"))
            .header("host", "counter.alpha.localhost")
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == 200 => acked.push((r.text().await.unwrap().trim().parse().unwrap(), Instant::now())),
            // Retried, as a client does: the actor moving, or its rate.
            Ok(r) if [429, 503, 504].contains(&r.status().as_u16()) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Ok(r) => panic!("{} {}", r.status(), r.text().await.unwrap()),
            Err(e) => panic!("{addr}: {e:?}"),
        }
    }
    acked
}

/// Signs `alpha` up through `s` on the pro plan (its actors take 200
/// events a second); answers its token.
async fn pro_tenant(c: &Cluster, s: &Serve) -> String {
    let token = signup(s, "alpha").await;
    let plan = Some(serde_json::json!({"plan": "pro"}));
    assert_eq!(s.api("PUT", "/v1/tenants/alpha/plan", Some(&c.operator_token()), plan).await.0, 200);
    token
}

/// Deploys the counter through the first node and waits until every node
/// serves it.
async fn with_counter(c: &Cluster) {
    let login = tempfile::tempdir().unwrap();
    let s = &c.nodes[0];
    let token = pro_tenant(c, s).await;
    let (ok, _, err) = cli(s, login.path(), &["deploy", &example("counter"), "--token", &token], None);
    assert!(ok, "{err}");
    until_everywhere(c, "counter.alpha.localhost", "/actor/counter/warm/peek").await;
}

fn signal(s: &Serve, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &s.child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

fn strictly_increasing(acked: &[(i64, Instant)]) -> bool {
    acked.windows(2).all(|w| w[0].0 < w[1].0)
}

#[tokio::test]
async fn an_owner_killed_under_load_loses_no_acknowledged_increment() {
    let c = cluster(&["a", "b", "c"], &["--failover-wait-secs", "3"]).await;
    with_counter(&c).await;
    // Node a owns the counter; the increments go through b and c.
    assert_eq!(counter(&c.nodes[0], "hits").await, Ok(1));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = tokio::spawn(increments(vec![c.nodes[1].public, c.nodes[2].public], stop.clone()));
    tokio::time::sleep(Duration::from_millis(700)).await;
    signal(&c.nodes[0], "KILL");
    let killed = Instant::now();
    // After the failover wait the increments go on.
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = load.await.unwrap();
    let after = acked.iter().filter(|(_, at)| *at > killed).count();
    assert!(after > 5, "increments went on after the kill: {after} of {}", acked.len());
    // One writer at a time: every acknowledged count is new.
    assert!(strictly_increasing(&acked), "{acked:?}");
    let acked: Vec<i64> = acked.into_iter().map(|(n, _)| n).collect();
    assert!(acked[0] >= 2);
    let (status, last) = c.nodes[1].public("counter.alpha.localhost", "/actor/counter/hits/peek").await;
    assert_eq!(status, 200);
    // Nothing acknowledged is lost (an increment whose answer died with a
    // may have counted once more, never less).
    let last: i64 = last.trim().parse().unwrap();
    assert!(last >= *acked.last().unwrap() && last <= acked.last().unwrap() + 1, "{last} after {acked:?}");
    assert!(killed.elapsed() < Duration::from_secs(30));
}

/// One more on the probe's actor `hits`, through `s`: its JSON count.
async fn probe_count(s: &Serve) -> i64 {
    let (status, text) = s.public("probe.alpha.localhost", "/actor/probe/hits/count").await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str::<Value>(&text).unwrap()["count"].as_i64().unwrap()
}

#[tokio::test]
async fn a_paused_owner_finds_its_late_commit_refused() {
    let c = cluster(&["a", "b"], &["--failover-wait-secs", "2"]).await;
    let (a, b) = (&c.nodes[0], &c.nodes[1]);
    let token = pro_tenant(&c, a).await;
    deploy(a, &token, "probe").await;
    until_everywhere(&c, "probe.alpha.localhost", "/actor/probe/warm/peek").await;
    assert_eq!(probe_count(a).await, 1);
    // An event on a that writes (100 more), then is paused with its node.
    let slow = {
        let addr = a.public;
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("http://{addr}/actor/probe/hits/sleep?ms=1500"))
                .header("host", "probe.alpha.localhost")
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(a, "STOP");
    // b waits out the failover wait, takes the actor, and counts on.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(probe_count(b).await, 2);
    signal(a, "CONT");
    // The paused event's commit, under a's old epoch, is refused.
    let status = slow.await.unwrap().unwrap();
    assert_eq!(status, 503, "a late commit is refused");
    assert_eq!(probe_count(b).await, 3, "nothing of the late event stands");
    assert_eq!(probe_count(a).await, 4, "a, back, reaches the actor on b");
    let log = a.log.lock().unwrap().clone();
    assert!(log.contains("commit failed: stale owner epoch"), "{log}");
}

#[tokio::test]
async fn a_draining_node_under_load_loses_no_request() {
    let c = cluster(&["a", "b", "c"], &[]).await;
    with_counter(&c).await;
    assert_eq!(counter(&c.nodes[0], "hits").await, Ok(1));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = tokio::spawn(increments(vec![c.nodes[1].public, c.nodes[2].public], stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The operator drains a with the CLI; a moves its actors and exits.
    let config = tempfile::tempdir().unwrap();
    let drain = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .args(["drain", "--api", &c.nodes[0].api, "--token", &c.operator_token()])
        .env("WASMKEEP_CONFIG_DIR", config.path())
        .output()
        .unwrap();
    assert!(drain.status.success(), "{}", String::from_utf8_lossy(&drain.stderr));
    assert_eq!(
        String::from_utf8_lossy(&drain.stdout).trim(),
        "node a is draining; it stops once its actors have moved"
    );
    let mut exited = false;
    for _ in 0..200 {
        if c.nodes[0].log.lock().unwrap().contains("wasmkeep: stopping") {
            exited = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(exited, "a drained and stopped");
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = load.await.unwrap();
    assert!(strictly_increasing(&acked), "{acked:?}");
    let acked: Vec<i64> = acked.into_iter().map(|(n, _)| n).collect();
    let (status, last) = c.nodes[1].public("counter.alpha.localhost", "/actor/counter/hits/peek").await;
    assert_eq!(status, 200);
    assert_eq!(last.trim().parse::<i64>().unwrap(), *acked.last().unwrap(), "every request answered once");
    assert_eq!(acked.len() as i64, acked.last().unwrap() - 1, "no increment lost, none counted twice");
    let log = c.nodes[0].log.lock().unwrap().clone();
    assert!(log.contains("wasmkeep: draining") && log.contains("wasmkeep: drained"), "{log}");
}

/// The shop's page through a, its cart on b and the user's profile and
/// recommendations on c: one trace, the client's, across the three nodes
/// (each node exporting its own spans, the context carried in the hops).
#[tokio::test]
async fn a_page_whose_calls_run_on_three_nodes_is_one_trace() {
    let collector = wasmkeep_tests::otlp::Collector::start().await;
    let endpoint = collector.endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let c = cluster_with(&["a", "b", "c"], &[], &env).await;
    let (a, b, n3) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    let token = pro_tenant(&c, a).await;
    let login = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(a, login.path(), &["deploy", &example("shop"), "--token", &token], None);
    assert!(ok, "{err}");
    until_everywhere(&c, "shop.alpha.localhost", "/").await;
    // Owners: ann's cart on b (its first event ran there), her profile and
    // recommendations on c.
    let cart = reqwest::Client::new()
        .post(format!("http://{}/cart/ann", b.public))
        .header("host", "shop.alpha.localhost")
        .body(r#"{"sku": "tea", "qty": 1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(cart.status().as_u16(), 200);
    assert_eq!(n3.public("shop.alpha.localhost", "/page/ann").await.0, 200);
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let page = reqwest::Client::new()
        .get(format!("http://{}/page/ann", a.public))
        .header("host", "shop.alpha.localhost")
        .header("traceparent", format!("00-{trace}-b7ad6b7169203331-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let spans = collector.trace(trace, |s| s.iter().filter(|s| s.name == "actor.event").count() >= 3).await;
    let node_of = |name: &str, class: Option<&str>| -> Vec<String> {
        spans
            .iter()
            .filter(|s| s.name == name && (class.is_none() || s.attr("wasmkeep.actor.class") == class))
            .map(|s| s.instance.clone())
            .collect()
    };
    assert_eq!(node_of("GET", None), ["a"], "{spans:#?}");
    assert_eq!(node_of("front", None), ["a"]);
    assert_eq!(node_of("actors.call-many", None), ["a"]);
    assert_eq!(node_of("actors.call", None), ["a", "a", "a"]);
    assert_eq!(node_of("actor.event", Some("cart")), ["b"], "{spans:#?}");
    assert_eq!(node_of("actor.event", Some("profile")), ["c"]);
    assert_eq!(node_of("actor.event", Some("recommendations")), ["c"]);
    // Each remote event is its call's child, though it ran elsewhere.
    for event in spans.iter().filter(|s| s.name == "actor.event") {
        let call = spans.iter().find(|s| s.span_id == event.parent).expect("the event's parent");
        assert_eq!(call.name, "actors.call");
        assert_eq!(call.attr("wasmkeep.actor.class"), event.attr("wasmkeep.actor.class"));
    }
}

/// The node's cluster address, as it told it.
fn cluster_addr(s: &Serve) -> std::net::SocketAddr {
    let log = s.log.lock().unwrap().clone();
    let line = log.lines().find(|l| l.contains("hops on ")).unwrap_or_else(|| panic!("{log}"));
    line.split("hops on ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

/// The NDJSON records of a tail's answer.
fn records(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A tail through any node has the whole app's lines: the node asked asks
/// the others for theirs (kept and live) over a signed hop; a tail hop that
/// a node of the cluster did not sign gets nothing, over the real QUIC
/// port with a real node's certificate.
#[tokio::test]
async fn a_tail_through_any_node_has_the_lines_written_on_every_node() {
    let c = cluster(&["a", "b"], &[]).await;
    let (a, b) = (&c.nodes[0], &c.nodes[1]);
    let token = signup(a, "alpha").await;
    deploy(a, &token, "p").await;
    until_everywhere(&c, "p.alpha.localhost", "/").await;
    // Lines written on each node (an actor is taken by the node a request
    // for it reaches first).
    assert_eq!(a.public("p.alpha.localhost", "/actor/probe/on-a/print?text=from-a").await.0, 200);
    assert_eq!(b.public("p.alpha.localhost", "/actor/probe/on-b/print?text=from-b").await.0, 200);
    let lines = |text: &str| -> Vec<String> {
        records(text).iter().map(|r| r["line"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    for node in [a, b] {
        let (status, text) = node.api_raw("GET", "/v1/apps/p/logs", Some(&token), None).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(lines(&text), ["from-a 0", "from-b 0"], "every node's, in time order, through {}", node.api);
    }
    // Another tenant's tail of an app of the same name has none of them.
    let beta = signup(b, "beta").await;
    deploy(b, &beta, "p").await;
    let (_, text) = a.api_raw("GET", "/v1/apps/p/logs", Some(&beta), None).await;
    assert!(records(&text).is_empty(), "{text}");

    // Live: a follow through a has b's next line.
    let mut tail = reqwest::Client::new()
        .get(format!("{}/v1/apps/p/logs?follow=true&class=probe&name=on-b", a.api))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(tail.status().as_u16(), 200);
    let mut got = String::new();
    let mut printed = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !got.contains("live-b 0") {
        assert!(Instant::now() < deadline, "the live line through a: {got}");
        if got.contains("from-b 0") && !printed {
            // b's kept line came: b's tail is on; now a live one.
            assert_eq!(b.public("p.alpha.localhost", "/actor/probe/on-b/print?text=live-b").await.0, 200);
            printed = true;
        }
        if let Ok(Ok(Some(chunk))) = tokio::time::timeout(Duration::from_secs(1), tail.chunk()).await {
            got.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
    assert!(!got.contains("from-a"), "the filter holds across nodes: {got}");

    // A tail hop to b's cluster port from a real node's certificate:
    // unsigned, signed with another secret, or signed without its mark
    // among the signed names, it is refused; signed as a node signs it, it
    // is answered.
    let id = wasmkeep_cluster::NodeId::parse("a").unwrap();
    let dir = wasmkeep_cluster::ClusterDir::load(c.dir.path(), &id).unwrap();
    let quic = wasmkeep_cluster::transport::Transport::bind("127.0.0.1:0".parse().unwrap(), &dir).unwrap();
    let path = "/_tail?tenant=alpha&app=p";
    let pq = http::uri::PathAndQuery::from_static(path);
    let ask = |secret: [u8; 32], names: &'static [&'static str]| {
        let mut head = http::HeaderMap::new();
        head.insert("x-wasmkeep-tail", "1".parse().unwrap());
        if secret != [0; 32] {
            let signer = wasmkeep_cluster::signing::Signer::new("a", &secret);
            let empty = wasmkeep_core::signature::EMPTY_BODY_SHA256;
            signer.sign(&http::Method::GET, &pq, &empty, &mut head, names, now_ms()).unwrap();
        }
        let mut request = http::Request::get(path).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
        *request.headers_mut() = head;
        request
    };
    let to_b = cluster_addr(b);
    let status = |request| async { quic.request("b", to_b, request).await.unwrap().status().as_u16() };
    assert_eq!(status(ask([0; 32], &[])).await, 403, "unsigned");
    assert_eq!(status(ask([7; 32], &["x-wasmkeep-tail"])).await, 403, "another secret");
    assert_eq!(status(ask(dir.secret, &[])).await, 403, "the mark not signed");
    let answer = quic.request("b", to_b, ask(dir.secret, &["x-wasmkeep-tail"])).await.unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    use http_body_util::BodyExt;
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(lines(&String::from_utf8_lossy(&body)), ["from-b 0", "live-b 0"], "b's own, nothing of a's");
}
