//! The public port's edge: the header range, paths outside `/actor/`, the
//! body limit, and deploys refusing what the host does not provide.

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::{Access, Limits};
use wasmkeep_tests::{TestNode, class, guests, open_probe_node, test_limits};

async fn node(limits: Limits) -> TestNode {
    open_probe_node(limits).await
}

#[tokio::test]
async fn client_sent_wasmkeep_headers_never_reach_a_guest() {
    let n = node(test_limits()).await;
    let req = n
        .client
        .get(format!("{}/actor/open/a/headers", n.url))
        .header("x-wasmkeep-caller", "t/open/forged")
        .header("X-Wasmkeep-Chain", "t/open/x")
        .header("x-wasmkeep-internal", "v4 forged")
        .header("x-wasmkeep-", "empty suffix")
        .header("x-wasmkeeper", "not in the range")
        .header("x-custom", "kept");
    let names: Vec<String> = serde_json::from_value(n.send(req).await.json()).unwrap();
    assert!(names.iter().all(|h| !h.starts_with("x-wasmkeep-")), "{names:?}");
    assert!(names.contains(&"x-custom".to_string()));
    assert!(names.contains(&"x-wasmkeeper".to_string()));
}

#[tokio::test]
async fn the_actor_sees_the_rest_of_the_path_and_the_query() {
    let n = node(test_limits()).await;
    let a = n.send(n.client.post(format!("{}/actor/open/a%2Fb/echo?x=1&y=%20", n.url)).body("hello")).await.json();
    assert_eq!(a["method"], "POST");
    assert_eq!(a["uri"], "/echo?x=1&y=%20");
    assert_eq!(a["body_len"], 5);
    // No rest: the actor sees `/`.
    assert_eq!(n.get("/actor/open/a").await.json()["uri"], "/");
    assert_eq!(n.get("/actor/open/a/").await.json()["uri"], "/");
    assert_eq!(n.get("/actor/open/a?q=1").await.json()["uri"], "/?q=1");
}

#[tokio::test]
async fn paths_outside_actor_answer_404_without_a_front() {
    let n = node(test_limits()).await;
    for path in ["/", "/index.html", "/actor", "/actors/open/a/"] {
        let a = n.get(path).await;
        assert_eq!(a.status, 404, "{path}");
        assert!(a.body.contains("no front"), "{path}: {}", a.body);
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let n = node(Limits { body_bytes: 1024, ..test_limits() }).await;
    let ok = n.send(n.client.post(format!("{}/actor/open/a/echo", n.url)).body(vec![0u8; 1024])).await;
    assert_eq!((ok.status, ok.json()["body_len"].as_u64()), (200, Some(1024)));
    let big = n.send(n.client.post(format!("{}/actor/open/a/echo", n.url)).body(vec![0u8; 1025])).await;
    assert_eq!((big.status, big.body.as_str()), (413, "request body is over 1024 bytes\n"));
}

#[tokio::test]
async fn a_component_the_host_cannot_serve_is_refused_naming_why() {
    let store = wasmkeep_storage::SqliteStore::open(&tempfile::tempdir().unwrap().keep().join("s.db")).unwrap();
    let node = wasmkeep_actors::Node::new(
        wasmkeep_actors::NodeConfig {
            id: "t".into(),
            limits: test_limits(),
            cache_dir: Some(wasmkeep_tests::cache_dir()),
            values: std::sync::Arc::new(wasmkeep_storage::ValueKey::generate()),
            egress_roots: Vec::new(),
            egress: wasmkeep_core::egress::EgressPolicy::Open,
        },
        std::sync::Arc::new(store),
    )
    .unwrap();
    // `calls` has its host side: a component importing it deploys.
    let spec = VersionSpec {
        front: None,
        classes: vec![class("fan", Access::Open, &guests().uses_calls)],
        ..Default::default()
    };
    node.deploy("t", "fan", spec).await.unwrap();

    // Outbound HTTP goes through the egress sender: it links.
    let spec = VersionSpec {
        front: None,
        classes: vec![class("web", Access::Open, &guests().uses_http)],
        ..Default::default()
    };
    node.deploy("t", "web", spec).await.unwrap();

    // A front has no storage: an actor deployed as a front is refused,
    // naming the first import wasmtime cannot satisfy.
    let spec = VersionSpec { front: Some(guests().probe.clone()), classes: vec![], ..Default::default() };
    let err = node.deploy("t", "app", spec).await.unwrap_err().to_string();
    assert!(err.starts_with("front: component imports `wasmkeep:actor/"), "{err}");
    assert!(err.ends_with("`, which this host does not provide"), "{err}");

    // A front deployed as an actor class lacks the events export.
    let spec =
        VersionSpec { front: None, classes: vec![class("f", Access::Open, &guests().front)], ..Default::default() };
    let err = node.deploy("t", "app", spec).await.unwrap_err().to_string();
    assert!(err.starts_with("class f: component does not export the `wasmkeep:actor/events@0.2.0` interface"), "{err}");
    assert!(!err.contains('\n'));

    let spec =
        VersionSpec { front: None, classes: vec![class("junk", Access::Open, b"not wasm")], ..Default::default() };
    let err = node.deploy("t", "app", spec).await.unwrap_err().to_string();
    assert!(err.starts_with("class junk: not a valid component"), "{err}");
    assert!(!err.contains('\n'));

    let probe = &guests().probe;
    let spec = VersionSpec {
        front: None,
        classes: vec![class("a", Access::Open, probe), class("a", Access::Open, probe)],
        ..Default::default()
    };
    assert_eq!(node.deploy("t", "app", spec).await.unwrap_err().to_string(), "class a is named twice");
}

#[tokio::test]
async fn the_actor_cannot_set_the_framing_headers() {
    let n = node(test_limits()).await;
    let a = n.get("/actor/open/a/framing").await;
    assert_eq!((a.status, a.body.as_str()), (200, "abc"));
    assert_eq!(a.header("content-length"), Some("3"));
    assert_eq!(a.header("transfer-encoding"), None);
    // Nor the host's header range.
    assert_eq!(a.header("x-wasmkeep-caller"), None);
    // The connection stays usable.
    assert_eq!(n.get("/actor/open/a/framing").await.body, "abc");
}

#[tokio::test]
async fn sockets_are_truthfully_empty_until_upgrades_exist() {
    let n = node(test_limits()).await;
    // No socket exists: none is listed, none can be written to.
    assert_eq!(n.get("/actor/open/a/sockets").await.json(), serde_json::json!([]));
    assert_eq!(n.get("/actor/open/a/send").await.body, "Err(SocketError::NoSuchSocket)");
}
