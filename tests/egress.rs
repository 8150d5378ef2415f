//! The egress sender: outbound HTTP from actors and fronts, with the
//! host's header range stripped from every answer's headers and trailers.

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Access;
use wasmkeep_tests::{TestNode, class, enc, guests, test_limits};

/// A real upstream on a local port: every connection gets one chunked
/// answer whose headers and trailers carry the host's range and others.
async fn upstream() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/path?q=1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = conn.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                }
                let answer = "HTTP/1.1 203 Non-Authoritative Information\r\n\
                    x-wasmkeep-app: evil/app\r\n\
                    X-Wasmkeep-Chain: open/a\r\n\
                    x-upstream: kept\r\n\
                    trailer: x-wasmkeep-caller, x-trailer\r\n\
                    transfer-encoding: chunked\r\n\
                    connection: close\r\n\r\n\
                    5\r\nhello\r\n0\r\n\
                    x-wasmkeep-caller: evil/_front/main\r\n\
                    x-trailer: kept\r\n\r\n";
                conn.write_all(answer.as_bytes()).await.unwrap();
                let _ = conn.shutdown().await;
            });
        }
    });
    url
}

fn names(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|h| h[0].as_str().unwrap().to_ascii_lowercase()).collect()
}

fn check(fetched: &Value) {
    assert_eq!(fetched["status"], 203, "{fetched}");
    assert_eq!(fetched["body"], "hello");
    let headers = names(&fetched["headers"]);
    assert!(headers.contains(&"x-upstream".to_owned()), "{headers:?}");
    assert!(!headers.iter().any(|h| h.starts_with("x-wasmkeep-")), "{headers:?}");
    let trailers = names(&fetched["trailers"]);
    assert_eq!(trailers, ["x-trailer"], "the range goes from trailers too");
}

#[tokio::test]
async fn an_upstreams_header_range_never_reaches_a_front() {
    let url = upstream().await;
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    let n = TestNode::start(test_limits(), spec).await;
    let a = n.get(&format!("/fetch?url={}", enc(&url))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    check(&a.json());
}

#[tokio::test]
async fn an_upstreams_header_range_never_reaches_an_actor() {
    let url = upstream().await;
    let spec = VersionSpec {
        front: None,
        classes: vec![class("web", Access::Open, &guests().uses_http)],
        ..Default::default()
    };
    let n = TestNode::start(test_limits(), spec).await;
    let a = n.get(&format!("/actor/web/a/?url={}", enc(&url))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    check(&a.json());
}

#[tokio::test]
async fn an_unreachable_upstream_is_an_error_for_the_guest_not_the_host() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    let n = TestNode::start(test_limits(), spec).await;
    let a = n.get(&format!("/fetch?url={}", enc(&format!("http://127.0.0.1:{port}/")))).await;
    assert_eq!(a.status, 200);
    assert!(a.json()["error"].as_str().unwrap().contains("ConnectionRefused"), "{}", a.body);
}

/// A node whose apps may reach public addresses only (as `serve` runs them).
async fn public_node(allowed_hosts: Option<Vec<&str>>) -> TestNode {
    use wasmkeep_core::egress::{EgressPolicy, HostPattern};
    let allowed_hosts = allowed_hosts.map(|h| h.iter().map(|h| HostPattern::parse(h).unwrap()).collect());
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    TestNode::start_with_egress(test_limits(), spec, EgressPolicy::Public { allowed_hosts }).await
}

async fn fetch_error(n: &TestNode, url: &str) -> String {
    let a = n.get(&format!("/fetch?url={}", enc(url))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()["error"].as_str().unwrap_or_else(|| panic!("{url} was fetched: {}", a.body)).to_owned()
}

#[tokio::test]
async fn a_public_only_policy_refuses_loopback_private_and_metadata_addresses_before_connecting() {
    // A real listener on loopback: under the policy nothing may reach it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let n = public_node(None).await;
    for url in [
        format!("http://127.0.0.1:{port}/"),
        // A name that resolves to loopback is refused by its address.
        format!("http://localhost:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
        "http://[::1]/".to_owned(),
    ] {
        assert!(fetch_error(&n, &url).await.contains("HttpRequestDenied"), "{url}");
    }
    let accepted = tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "no connection was made");
}

/// Local-use NAT64 (RFC 8215) is an operator's gateway into its own
/// networks: refused whatever it carries, as the registries' other
/// special-purpose blocks are. (Names resolve with the system resolver;
/// a name's addresses pass the same check as a literal's.)
#[tokio::test]
async fn a_public_only_policy_refuses_local_use_nat64_and_special_purpose_blocks() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let n = public_node(None).await;
    for url in [
        "http://[64:ff9b:1::1]/".to_owned(),
        // 169.254.169.254 and 127.0.0.1 as a local-use gateway may carry them.
        "http://[64:ff9b:1::a9fe:a9fe]/latest/meta-data/".to_owned(),
        "http://[64:ff9b:1:a9fe:a9:fe00::]/latest/meta-data/".to_owned(),
        format!("http://[64:ff9b:1::7f00:1]:{port}/"),
        // Even a public address, through a gateway the operator runs.
        "http://[64:ff9b:1::808:808]/".to_owned(),
        format!("http://[64:ff9b::7f00:1]:{port}/"),
        "http://192.88.99.1/".to_owned(),
        "http://198.18.0.1/".to_owned(),
        "http://[100::1]/".to_owned(),
        "http://[2001:2::1]/".to_owned(),
        "http://[3fff::1]/".to_owned(),
        "http://[5f00::1]/".to_owned(),
    ] {
        let error = fetch_error(&n, &url).await;
        assert!(error.contains("HttpRequestDenied"), "{url}: {error}");
    }
    let accepted = tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "no connection was made");
}

#[tokio::test]
async fn an_allow_list_refuses_other_hosts_before_resolving_them() {
    let n = public_node(Some(vec!["api.example.com"])).await;
    assert!(fetch_error(&n, "http://other.example.com/").await.contains("HttpRequestDenied"));
    assert!(fetch_error(&n, "http://93.184.216.34/").await.contains("HttpRequestDenied"));
}

/// A TLS upstream on a local port with a certificate for `localhost` from
/// a CA of its own; answers the CA's PEM and the upstream's URL.
async fn tls_upstream() -> (Vec<u8>, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &Issuer::new(ca_params, ca_key))
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://localhost:{}/secure", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that does not trust the CA ends the handshake.
                let Ok(mut tls) = acceptor.accept(conn).await else { return };
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = "HTTP/1.1 200 OK\r\ncontent-length: 13\r\nconnection: close\r\n\r\nsecure hello!";
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (ca.pem().into_bytes(), url)
}

#[tokio::test]
async fn https_egress_trusts_the_configured_roots_and_refuses_others() {
    let (ca, url) = tls_upstream().await;
    let spec = || VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    // Trusting the upstream's CA: the answer arrives, over TLS.
    let n = TestNode::start_with_egress_roots(test_limits(), spec(), ca).await;
    let a = n.get(&format!("/fetch?url={}", enc(&url))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["status"], 200, "{}", a.body);
    assert_eq!(a.json()["body"], "secure hello!");
    // Trusting only the public roots: the certificate is refused.
    let n = TestNode::start_with_egress_roots(test_limits(), spec(), Vec::new()).await;
    let error = fetch_error(&n, &url).await;
    assert!(error.contains("TlsCertificateError"), "{error}");
    // The name is checked, not only the chain: 127.0.0.1 is not `localhost`.
    let (ca, url) = tls_upstream().await;
    let n = TestNode::start_with_egress_roots(test_limits(), spec(), ca).await;
    let error = fetch_error(&n, &url.replace("localhost", "127.0.0.1")).await;
    assert!(error.contains("TlsCertificateError"), "{error}");
}

/// A local upstream that answers `200` and keeps each request as it
/// arrived: its head, and a chunked body with its trailers.
async fn recording_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/traced", listener.local_addr().unwrap());
    let heads: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let kept = heads.clone();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !arrived(&request) {
                    let n = conn.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                }
                kept.lock().unwrap().push(String::from_utf8_lossy(&request).to_ascii_lowercase());
                let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                conn.write_all(answer.as_bytes()).await.unwrap();
                let _ = conn.shutdown().await;
            });
        }
    });
    (url, heads)
}

/// Whether `request` is whole: its head, and if it is chunked, every
/// chunk to the last and the trailers after it.
fn arrived(request: &[u8]) -> bool {
    let text = String::from_utf8_lossy(request).to_ascii_lowercase();
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    if !head.contains("\r\ntransfer-encoding: chunked") {
        return true;
    }
    let last = if body.starts_with("0\r\n") { Some(0) } else { body.find("\r\n0\r\n").map(|i| i + 2) };
    last.is_some_and(|i| body[i + 3..].starts_with("\r\n") || body[i + 3..].contains("\r\n\r\n"))
}

/// The names of a head's (or a trailer section's) fields.
fn field_names(lines: &str) -> Vec<&str> {
    lines.split("\r\n").filter_map(|l| l.split_once(':')).map(|(n, _)| n.trim()).collect()
}

/// A guest's outbound request loses the host's header range, from its
/// headers and from its body's trailers, before it leaves; its other
/// headers and trailers arrive as it sent them. Actors and fronts alike.
#[tokio::test]
async fn a_guests_header_range_never_leaves_on_an_outbound_request() {
    let (url, heads) = recording_upstream().await;
    let spec = VersionSpec {
        front: Some(guests().front.clone()),
        classes: vec![class("web", Access::Open, &guests().uses_http)],
        ..Default::default()
    };
    let n = TestNode::start(test_limits(), spec).await;
    let headers = "x-wasmkeep-caller: victim/_front/main\nX-Wasmkeep-Internal: 1\n\
        x-wasmkeep-chain: victim/a\nx-ordinary: kept\ntrailer: x-wasmkeep-caller, x-wasmkeep-app, x-trailer";
    let trailers = "x-wasmkeep-caller: victim/_front/main\nX-Wasmkeep-App: victim/app\nx-trailer: kept";
    let lines = |s: &str| enc(s).replace('\n', "%0A");
    let query = format!("url={}&headers={}&trailers={}", enc(&url), lines(headers), lines(trailers));
    for path in [format!("/actor/web/a/?{query}"), format!("/fetch?{query}")] {
        let a = n.get(&path).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.json()["status"], 200, "{}", a.body);
    }
    let received = heads.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "{received:?}");
    for request in &received {
        let (head, body) = request.split_once("\r\n\r\n").unwrap();
        let (_, trailers) = body.split_once("\r\n0\r\n").unwrap_or_else(|| panic!("a chunked body: {request}"));
        let (head, trailers) = (field_names(head), field_names(trailers));
        assert!(!head.iter().chain(&trailers).any(|n| n.starts_with("x-wasmkeep-")), "{request}");
        assert!(request.contains("\r\nx-ordinary: kept\r\n"), "{request}");
        assert_eq!(trailers, ["x-trailer"], "{request}");
        assert!(body.contains("sent"), "{request}");
    }
}

/// An actor's and a front's outbound requests carry the trace context of
/// the request that ran them (with no export configured, the client's
/// own, passed through); a request without one carries none.
#[tokio::test]
async fn an_outbound_request_carries_its_events_trace_context() {
    let (url, heads) = recording_upstream().await;
    let spec = VersionSpec {
        front: Some(guests().front.clone()),
        classes: vec![class("web", Access::Open, &guests().uses_http)],
        ..Default::default()
    };
    let n = TestNode::start(test_limits(), spec).await;
    let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for path in [format!("/actor/web/a/?url={}", enc(&url)), format!("/fetch?url={}", enc(&url))] {
        let request =
            n.client.get(format!("{}{path}", n.url)).header("traceparent", client).header("tracestate", "k=v");
        let a = n.send(request).await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    assert_eq!(n.get(&format!("/actor/web/b/?url={}", enc(&url))).await.status, 200);
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3, "{heads:?}");
    for head in &heads[..2] {
        assert!(head.contains(&format!("traceparent: {client}\r\n")), "{head}");
        assert!(head.contains("tracestate: k=v\r\n"), "{head}");
    }
    assert!(!heads[2].contains("traceparent"), "{}", heads[2]);
}

/// An upstream that takes connections and never answers: each one a guest
/// opens stays open. Answers its URL and how many it holds.
async fn silent_upstream() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = held.clone();
    tokio::spawn(async move {
        let mut kept = Vec::new();
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            kept.push(conn);
        }
    });
    (url, held)
}

/// Issue 23 (a review's finding): a guest's outbound connections are
/// descriptors of the node, bounded per tenant (and across the node): a
/// front whose upstream never answers holds its tenant's 4 connections,
/// and the next request fails `connection-limit-reached` at once instead
/// of opening a fifth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_guests_hold_at_most_its_outbound_connections() {
    let (url, held) = silent_upstream().await;
    let limits = wasmkeep_core::Limits {
        egress_connections_per_tenant: 4,
        front_slots: 20,
        front_slots_per_client: 20,
        pool_instances: 50,
        ..test_limits()
    };
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: vec![], ..Default::default() };
    let n = std::sync::Arc::new(TestNode::start(limits, spec).await);
    let plan: wasmkeep_core::plan::Plan = wasmkeep_core::plan::Plan {
        weight: 1,
        apps: 3,
        versions_kept: 10,
        upload_bytes: 1 << 25,
        requests_per_second: 1000,
        request_burst: 1000,
        events_per_second_per_actor: 1000,
        resident_actors: 100,
        actor_creations_per_second: 100,
        actors: 1000,
        sockets: 100,
        storage_bytes_per_actor: 1 << 20,
        storage_bytes: 1 << 30,
        egress_requests_per_second: 1000,
        allowed_hosts: None,
        limits: Default::default(),
    };
    n.node.set_tenant_plan(&wasmkeep_core::TenantId::parse("t").unwrap(), Some(std::sync::Arc::new(plan)));
    let path = format!("/fetch?url={}", enc(&url));
    let waiting: Vec<_> = (0..4)
        .map(|_| {
            let (n, path) = (n.clone(), path.clone());
            tokio::spawn(async move { n.get(&path).await })
        })
        .collect();
    for _ in 0..100 {
        if held.load(std::sync::atomic::Ordering::SeqCst) == 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(held.load(std::sync::atomic::Ordering::SeqCst), 4, "the four requests are open upstream");
    let refused = n.get(&path).await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert_eq!(refused.json()["error"], "ErrorCode::ConnectionLimitReached", "{}", refused.body);
    assert_eq!(held.load(std::sync::atomic::Ordering::SeqCst), 4, "no fifth connection was opened");
    for w in waiting {
        w.abort();
    }
}
