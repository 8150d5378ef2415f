//! `wasmkeep serve` attacked as a hosted service is: the real binary, real
//! tokens over real sockets, real uploads of real components.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use wasmkeep_tests::guests;

#[tokio::test]
async fn signup_tokens_and_scopes() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let admin = signup(&s, "acme").await;
    assert!(admin.starts_with("wk_") && admin.len() >= 3 + 22, "{admin}");
    let (status, body) = s.api("POST", "/v1/tenants", None, Some(json!({"name": "acme"}))).await;
    assert_eq!((status, body["error"].as_str().unwrap()), (409, "tenant name `acme` is taken"));
    for bad in ["Acme", "9lives", "", "a.b", "_host"] {
        let (status, body) = s.api("POST", "/v1/tenants", None, Some(json!({"name": bad}))).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].as_str().unwrap().starts_with("name: "), "{body}");
    }
    // A sign-up may not choose its plan.
    let (status, _) = s.api("POST", "/v1/tenants", None, Some(json!({"name": "cheap", "plan": "pro"}))).await;
    assert_eq!(status, 403);

    // No token, a malformed one, an unknown one.
    assert_eq!(s.api("GET", "/v1/apps", None, None).await.0, 401);
    assert_eq!(s.api("GET", "/v1/apps", Some("not-a-token"), None).await.0, 401);
    assert_eq!(s.api("GET", "/v1/apps", Some(&format!("wk_{}", "A".repeat(43))), None).await.0, 401);

    // A read token reads and does nothing else.
    let (status, made) = s.api("POST", "/v1/tokens", Some(&admin), Some(json!({"scope": "read"}))).await;
    assert_eq!(status, 201, "{made}");
    let read = made["token"].as_str().unwrap().to_owned();
    deploy(&s, &admin, "shop").await;
    assert_eq!(s.api("GET", "/v1/apps", Some(&read), None).await.0, 200);
    assert_eq!(s.api("GET", "/v1/apps/shop/versions", Some(&read), None).await.0, 200);
    for (method, path) in [
        ("PUT", "/v1/apps/other"),
        ("POST", "/v1/apps/shop/versions"),
        ("POST", "/v1/apps/shop/versions/1/activate"),
        ("PUT", "/v1/apps/shop/values/K"),
        ("DELETE", "/v1/apps/shop/values/K"),
        ("DELETE", "/v1/apps/shop"),
        ("POST", "/v1/tokens"),
        ("GET", "/v1/tokens"),
    ] {
        let (status, body) = s.api(method, path, Some(&read), Some(json!({"scope": "admin"}))).await;
        assert_eq!(status, 403, "{method} {path}: {body}");
        assert!(body["error"].as_str().unwrap().contains("scope is `read`"), "{body}");
    }
    // A deploy token deploys but does not manage tokens or delete apps.
    let (_, made) = s.api("POST", "/v1/tokens", Some(&admin), Some(json!({"scope": "deploy"}))).await;
    let deployer = made["token"].as_str().unwrap().to_owned();
    assert_eq!(s.api("PUT", "/v1/apps/shop/values/K", Some(&deployer), None).await.0, 204);
    assert_eq!(s.api("DELETE", "/v1/apps/shop", Some(&deployer), None).await.0, 403);
    assert_eq!(s.api("POST", "/v1/tokens", Some(&deployer), Some(json!({"scope": "admin"}))).await.0, 403);

    // Listing tokens never shows a secret; revoking takes effect at once.
    let (status, listed) = s.api("GET", "/v1/tokens", Some(&admin), None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 3);
    assert!(!listed.to_string().contains("wk_"), "{listed}");
    let id = made["id"].as_str().unwrap();
    assert_eq!(s.api("DELETE", &format!("/v1/tokens/{id}"), Some(&admin), None).await.0, 204);
    let (status, body) = s.api("GET", "/v1/apps", Some(&deployer), None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(s.api("DELETE", &format!("/v1/tokens/{id}"), Some(&admin), None).await.0, 404);
    let (status, body) = s.api("POST", "/v1/tokens", Some(&admin), Some(json!({"scope": "root"}))).await;
    assert_eq!(status, 400, "{body}");

    // The account's last admin token stays: it alone can manage the others.
    let (_, listed) = s.api("GET", "/v1/tokens", Some(&admin), None).await;
    let admin_id = |listed: &Value| {
        listed["tokens"].as_array().unwrap().iter().find(|t| t["scope"] == "admin").unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = admin_id(&listed);
    let (status, body) = s.api("DELETE", &format!("/v1/tokens/{first}"), Some(&admin), None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "this is the account's last admin token; create another admin token first");
    assert_eq!(s.api("GET", "/v1/apps", Some(&admin), None).await.0, 200);
    // With another admin token made, the first may go.
    let (_, second) = s.api("POST", "/v1/tokens", Some(&admin), Some(json!({"scope": "admin"}))).await;
    let second = second["token"].as_str().unwrap().to_owned();
    assert_eq!(s.api("DELETE", &format!("/v1/tokens/{first}"), Some(&second), None).await.0, 204);
    assert_eq!(s.api("GET", "/v1/apps", Some(&admin), None).await.0, 401);
}

#[tokio::test]
async fn tenants_are_kept_apart() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let a = signup(&s, "alpha").await;
    let b = signup(&s, "beta").await;
    deploy(&s, &a, "shop").await;
    assert_eq!(s.api("PUT", "/v1/apps/shop/values/K", Some(&a), None).await.0, 204);

    // Every route of alpha's app, with beta's admin token: 404, as for an
    // app nobody has, never 403.
    let nobody: Vec<_> = [
        ("GET", "/v1/apps/{app}"),
        ("DELETE", "/v1/apps/{app}"),
        ("POST", "/v1/apps/{app}/versions"),
        ("GET", "/v1/apps/{app}/versions"),
        ("POST", "/v1/apps/{app}/versions/1/activate"),
        ("GET", "/v1/apps/{app}/values"),
        ("PUT", "/v1/apps/{app}/values/K"),
        ("DELETE", "/v1/apps/{app}/values/K"),
    ]
    .into_iter()
    .collect();
    for (method, route) in &nobody {
        for app in ["shop", "never"] {
            let path = route.replace("{app}", app);
            let (status, body) = s.api(method, &path, Some(&b), None).await;
            assert_eq!((status, body["error"].as_str()), (404, Some("no such app")), "{method} {path}");
        }
    }
    // beta sees none of it, and alpha's app is whole.
    assert_eq!(s.api("GET", "/v1/apps", Some(&b), None).await.1["apps"], json!([]));
    assert_eq!(s.api("GET", "/v1/apps/shop/values", Some(&a), None).await.1["values"], json!(["K"]));
    // beta may have an app of the same name: its own.
    assert_eq!(s.api("PUT", "/v1/apps/shop", Some(&b), None).await.0, 201);

    // The public port: by host name only.
    assert_eq!(s.public("shop.alpha.localhost", "/").await, (200, "hello".into()));
    assert_eq!(s.public("shop.alpha.localhost:8080", "/actor/probe/x/count").await.0, 200);
    // beta's shop has no version yet: nothing of alpha's answers there.
    assert_eq!(s.public("shop.beta.localhost", "/actor/probe/x/count").await.0, 404);
    assert_eq!(s.public("shop.gamma.localhost", "/").await.0, 404);
    assert_eq!(s.public("localhost", "/").await.0, 404);
    assert_eq!(s.public("alpha.localhost", "/").await.0, 404);

    // Confusion aimed at alpha's app from beta's host name.
    let raw = |request: String| {
        let mut stream = TcpStream::connect(s.public).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    // An absolute-form target wins over Host (RFC 9112 §3.2.2).
    let answer = raw(
        "GET http://shop.beta.localhost/actor/probe/x/count HTTP/1.1\r\nHost: shop.alpha.localhost\r\nConnection: close\r\n\r\n"
            .into(),
    );
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let answer = raw(
        "GET http://shop.alpha.localhost/actor/probe/x/count HTTP/1.1\r\nHost: shop.beta.localhost\r\nConnection: close\r\n\r\n"
            .into(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // X-Forwarded-Host is never trusted; forged range headers are dropped.
    let answer = raw(
        "GET /actor/probe/x/whoami HTTP/1.1\r\nHost: shop.beta.localhost\r\nX-Forwarded-Host: shop.alpha.localhost\r\nConnection: close\r\n\r\n"
            .into(),
    );
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let answer = raw(
        "GET /actor/probe/x/whoami HTTP/1.1\r\nHost: shop.alpha.localhost\r\nx-wasmkeep-app: beta/shop\r\nx-wasmkeep-caller: beta/shop/probe/x\r\nConnection: close\r\n\r\n"
            .into(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    assert!(!body.contains("beta"), "{body}");
    // Two Host headers: refused, whichever names what.
    let answer =
        raw("GET / HTTP/1.1\r\nHost: shop.alpha.localhost\r\nHost: shop.beta.localhost\r\nConnection: close\r\n\r\n"
            .into());
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

/// The lines of a tail's answer (NDJSON records).
fn tail_lines(text: &str) -> Vec<String> {
    text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["line"].as_str().unwrap().to_owned()).collect()
}

/// A tenant's guest writing 1,600 lines keeps another tenant's kept lines:
/// each tenant's records are kept in a ring of its own, bounded on its own
/// (the node's last 1,000 records of everyone's used to be one ring).
#[tokio::test]
async fn a_tenants_flood_of_lines_leaves_another_tenants_tail_its_own() {
    let (data, conf) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let limits = conf.path().join("limits.toml");
    // Rates a guest can flood within one event.
    std::fs::write(&limits, "log_lines_per_actor_per_second = 5000\nlog_lines_per_app_per_second = 5000\n").unwrap();
    let s = Serve::start(data.path(), &["--limits", limits.to_str().unwrap()]);
    let (alpha, beta) = (signup(&s, "alpha").await, signup(&s, "beta").await);
    deploy(&s, &alpha, "p").await;
    deploy(&s, &beta, "p").await;
    assert_eq!(s.public("p.beta.localhost", "/actor/probe/quiet/print?text=mine&times=3").await.0, 200);
    assert_eq!(s.public("p.alpha.localhost", "/actor/probe/loud/print?text=flood&times=1600").await.0, 200);
    let (status, text) = s.api_raw("GET", "/v1/apps/p/logs", Some(&beta), None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(tail_lines(&text), ["mine 0", "mine 1", "mine 2"]);
    // The flooding tenant keeps its own last 1,000.
    let (_, text) = s.api_raw("GET", "/v1/apps/p/logs", Some(&alpha), None).await;
    let flood = tail_lines(&text);
    assert_eq!(flood.len(), 1000);
    assert_eq!((flood[0].as_str(), flood[999].as_str()), ("flood 600", "flood 1599"));
    // A live tail starts with its tenant's kept lines too.
    let mut follow = reqwest::Client::new()
        .get(format!("{}/v1/apps/p/logs?follow=true", s.api))
        .bearer_auth(&beta)
        .send()
        .await
        .unwrap();
    let mut got = String::new();
    while got.lines().count() < 3 {
        let chunk = tokio::time::timeout(Duration::from_secs(20), follow.chunk()).await.unwrap().unwrap().unwrap();
        got.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(tail_lines(&got), ["mine 0", "mine 1", "mine 2"]);
}

#[tokio::test]
async fn uploads_are_checked_before_anything_is_stored() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let t = signup(&s, "acme").await;
    assert_eq!(s.api("PUT", "/v1/apps/app", Some(&t), None).await.0, 201);
    let upload = |manifest: Value, components: Value| {
        json!({"manifest": manifest, "components": components}).to_string().into_bytes()
    };
    let g = guests();
    let cases = [
        // A core module, not a component.
        (upload(json!({"front": "m"}), json!({"m": b64(b"\0asm\x01\0\0\0")})), "front: not a valid component"),
        // An actor as the front: it imports what a front's host lacks.
        (upload(json!({"front": "p"}), json!({"p": b64(&g.probe)})), "front: component imports `wasmkeep:actor/"),
        // A front as an actor class: not the actor's world.
        (
            upload(json!({"classes": {"c": {"access": "open", "component": "f"}}}), json!({"f": b64(&g.hello_front)})),
            "class c: component does not export",
        ),
        // The manifest names a component the bundle lacks.
        (
            upload(json!({"classes": {"cart": {"access": "open", "component": "cart"}}}), json!({})),
            "manifest: class `cart` names component `cart`, which the bundle does not hold",
        ),
        (b"{not json".to_vec(), "bundle: "),
    ];
    for (body, expected) in cases {
        let (status, text) = s.api_raw("POST", "/v1/apps/app/versions", Some(&t), Some(body)).await;
        let error = serde_json::from_str::<Value>(&text).unwrap()["error"].as_str().unwrap().to_owned();
        assert_eq!(status, 400, "{text}");
        assert!(error.starts_with(expected), "{error} (expected {expected})");
        assert!(!error.contains('\n'));
    }
    // Nothing of them was kept.
    assert_eq!(s.api("GET", "/v1/apps/app/versions", Some(&t), None).await.1["versions"], json!([]));

    // Ten times the free plan's 32 MiB: refused at its declared length,
    // before a byte of it is read.
    let mut stream = TcpStream::connect(s.api.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST /v1/apps/app/versions HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {t}\r\nContent-Length: {}\r\n\r\n",
        320u64 << 20
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = vec![0; 4096];
    let n = stream.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("the upload is over 33554432 bytes"), "{answer}");
    // Streamed without a length: cut at the limit, the answer read while
    // the client still sends.
    let mut stream = TcpStream::connect(s.api.trim_start_matches("http://")).unwrap();
    let head = format!(
        "POST /v1/apps/app/versions HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {t}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut reader = stream.try_clone().unwrap();
    reader.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let answer = std::thread::spawn(move || {
        let mut answer = vec![0; 4096];
        let n = reader.read(&mut answer).unwrap_or(0);
        String::from_utf8_lossy(&answer[..n]).into_owned()
    });
    let chunk = format!("{:x}\r\n{}\r\n", 1 << 20, " ".repeat(1 << 20));
    for _ in 0..40 {
        if stream.write_all(chunk.as_bytes()).is_err() {
            break;
        }
    }
    let answer = answer.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(s.api("GET", "/v1/apps/app/versions", Some(&t), None).await.1["versions"], json!([]));
}

#[tokio::test]
async fn a_component_written_for_another_host_runs_with_its_env_config_and_keyvalue() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let t = signup(&s, "acme").await;
    assert_eq!(s.api("PUT", "/v1/apps/std", Some(&t), None).await.0, 201);
    let g = guests();
    let upload = |env: Value, front: &[u8]| {
        json!({
            "manifest": {"front": "web", "env": env, "classes": {"kv": {"access": "open", "component": "kv"}}},
            "components": {"web": b64(front), "kv": b64(&g.std_kv)},
        })
        .to_string()
        .into_bytes()
    };
    // Refused, each with its reason in one line, and nothing kept.
    let refused = [
        (upload(json!({"1X": "y"}), &g.std_front), "manifest: env: `1X` is not a variable name"),
        (upload(json!({"A": "x\0y"}), &g.std_front), "manifest: env: `A`: the value holds a NUL character"),
        (
            upload(json!({}), &g.kv_front),
            "front: component imports `wasi:keyvalue/store@0.2.0-draft`, which a front cannot have: \
             a front has no storage (an actor has its own)",
        ),
    ];
    for (body, expected) in refused {
        let (status, text) = s.api_raw("POST", "/v1/apps/std/versions", Some(&t), Some(body)).await;
        assert_eq!(status, 400, "{text}");
        let error = serde_json::from_str::<Value>(&text).unwrap()["error"].as_str().unwrap().to_owned();
        assert!(error.starts_with(expected), "{error} (expected {expected})");
        assert!(!error.contains('\n') && !error.contains('\0'), "{error:?}");
    }
    assert_eq!(s.api("GET", "/v1/apps/std/versions", Some(&t), None).await.1["versions"], json!([]));

    let (status, text) = s
        .api_raw("POST", "/v1/apps/std/versions", Some(&t), Some(upload(json!({"MODE": "hosted"}), &g.std_front)))
        .await;
    assert_eq!(status, 201, "{text}");
    assert_eq!(s.api("POST", "/v1/apps/std/versions/1/activate", Some(&t), None).await.0, 200);
    let versions = s.api("GET", "/v1/apps/std/versions", Some(&t), None).await.1;
    assert_eq!(versions["versions"][0]["env"], json!({"MODE": "hosted"}));
    let (status, _) = s.api_raw("PUT", "/v1/apps/std/values/REGION", Some(&t), Some(b"eu".to_vec())).await;
    assert_eq!(status, 204);

    let host = "std.acme.localhost";
    assert_eq!(s.public(host, "/env").await, (200, "MODE=hosted\n".into()));
    assert_eq!(s.public(host, "/config/spin?key=REGION").await, (200, "eu".into()));
    assert_eq!(s.public(host, "/actor/kv/a/set?v=draft2&key=n&value=1").await.0, 200);
    assert_eq!(s.public(host, "/actor/kv/a/incr?v=draft&key=n&by=41").await, (200, "42".into()));
    // Kept by the store across a restart of the node.
    let s = s.restart();
    assert_eq!(s.public(host, "/actor/kv/a/get?v=draft2&key=n").await, (200, "42".into()));
    assert_eq!(s.public(host, "/env").await, (200, "MODE=hosted\n".into()));
}

#[tokio::test]
async fn values_are_never_in_clear_and_everything_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    let secret = format!("s3cr3t-{}", std::process::id());
    let (status, _) = s.api_raw("PUT", "/v1/apps/shop/values/TOKEN", Some(&t), Some(secret.clone().into_bytes())).await;
    assert_eq!(status, 204);
    // The guest reads it; the API never answers it.
    assert_eq!(s.public("shop.acme.localhost", "/actor/probe/v/value?name=TOKEN").await, (200, secret.clone()));
    for path in ["/v1/apps/shop/values", "/v1/apps", "/v1/apps/shop", "/v1/apps/shop/versions", "/v1/tokens"] {
        assert_eq!(s.api("GET", path, Some(&t), None).await.0, 200);
    }
    assert_eq!(s.api("GET", "/v1/apps/shop/values", Some(&t), None).await.1["values"], json!(["TOKEN"]));
    // Too large, or not text: refused without echoing it.
    let (status, text) = s.api_raw("PUT", "/v1/apps/shop/values/BIG", Some(&t), Some(vec![b'x'; 65 * 1024])).await;
    assert_eq!(status, 413, "{text}");
    let (status, _) = s.api_raw("PUT", "/v1/apps/shop/values/BIN", Some(&t), Some(vec![0xff, 0xfe])).await;
    assert_eq!(status, 400);
    for _ in 0..3 {
        assert_eq!(s.public("shop.acme.localhost", "/actor/probe/c/count").await.0, 200);
    }
    let log = s.log.lock().unwrap().clone();
    s.stop();

    assert!(!RESPONSES.lock().unwrap().contains(&secret), "an API answer held the value");
    assert!(!log.contains(&secret), "the log held the value");
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{} held the value", path.display());
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for file in ["operator-token", "pepper", "value-key"] {
            let mode = std::fs::metadata(data.path().join(file)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
    }

    // Restarted: tenants, tokens, apps, versions, values and counts.
    let s = Serve::start(data.path(), &[]);
    let (status, apps) = s.api("GET", "/v1/apps", Some(&t), None).await;
    assert_eq!(status, 200);
    assert_eq!(apps["apps"][0]["app"], "shop");
    assert_eq!(apps["apps"][0]["active_version"], 1);
    assert_eq!(s.api("GET", "/v1/apps/shop/versions", Some(&t), None).await.1["versions"].as_array().unwrap().len(), 1);
    assert_eq!(s.public("shop.acme.localhost", "/actor/probe/v/value?name=TOKEN").await, (200, secret.clone()));
    assert_eq!(count(&s, "shop.acme.localhost", "c").await, 4);
    assert_eq!(s.api("POST", "/v1/tenants", None, Some(json!({"name": "acme"}))).await.0, 409);
}

#[tokio::test]
async fn one_node_on_postgresql_keeps_everything_in_it_across_a_restart() {
    use wasmkeep_storage::{AppStore, PostgresStore};
    let url = wasmkeep_storage::test_postgres::server().database().await;
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &["--store", &url]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    let secret = format!("pg-s3cr3t-{}", std::process::id());
    let (status, _) = s.api_raw("PUT", "/v1/apps/shop/values/TOKEN", Some(&t), Some(secret.clone().into_bytes())).await;
    assert_eq!(status, 204);
    for n in 1..=3 {
        assert_eq!(count(&s, "shop.acme.localhost", "c").await, n);
    }
    s.stop();
    // Nothing of the apps is in the data directory: the store is the
    // server's, and the value is sealed there.
    assert!(!data.path().join("store.db").exists());
    let store = PostgresStore::connect(&url, 1).await.unwrap();
    let app = store.find_app("acme", "shop").await.unwrap().unwrap();
    let sealed = &store.values(app.id).await.unwrap()["TOKEN"];
    assert!(!sealed.windows(secret.len()).any(|w| w == secret.as_bytes()), "the store held the value in clear");

    let s = Serve::start(data.path(), &["--store", &url]);
    assert_eq!(s.api("GET", "/v1/apps", Some(&t), None).await.1["apps"][0]["active_version"], 1);
    assert_eq!(s.public("shop.acme.localhost", "/actor/probe/v/value?name=TOKEN").await, (200, secret));
    assert_eq!(count(&s, "shop.acme.localhost", "c").await, 4);
    assert_eq!(s.api("POST", "/v1/tenants", None, Some(json!({"name": "acme"}))).await.0, 409);
    // A store that cannot be reached is one line at start.
    let refused = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .args(["serve", "--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0", "--store"])
        .arg("postgres://nobody:hunter2@127.0.0.1:1/none")
        .arg("--data")
        .arg(data.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let last = stderr.lines().last().unwrap_or("");
    assert!(!refused.status.success() && last.contains("the store: "), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the store's password was printed: {stderr}");
}

#[tokio::test]
async fn the_operator_lists_suspends_and_resumes() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &["--signup", "closed"]);
    let operator = s.operator_token();
    // Closed: only the operator makes tenants.
    let (status, body) = s.api("POST", "/v1/tenants", None, Some(json!({"name": "acme"}))).await;
    assert_eq!(status, 403, "{body}");
    let (status, made) =
        s.api("POST", "/v1/tenants", Some(&operator), Some(json!({"name": "acme", "plan": "pro"}))).await;
    assert_eq!(status, 201, "{made}");
    let t = made["token"].as_str().unwrap().to_owned();
    deploy(&s, &t, "shop").await;
    // A tenant's token on an operator's route, and the other way round.
    assert_eq!(s.api("GET", "/v1/tenants", Some(&t), None).await.0, 403);
    assert_eq!(s.api("POST", "/v1/tenants", Some(&t), Some(json!({"name": "other"}))).await.0, 403);
    assert_eq!(s.api("GET", "/v1/apps", Some(&operator), None).await.0, 403);
    let (status, listed) = s.api("GET", "/v1/tenants", Some(&operator), None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["tenants"][0]["plan"], "pro");

    assert_eq!(s.public("shop.acme.localhost", "/").await.0, 200);
    assert_eq!(s.api("POST", "/v1/tenants/acme/suspend", Some(&operator), None).await.0, 200);
    let (status, text) = s.public("shop.acme.localhost", "/actor/probe/x/count").await;
    assert_eq!((status, text.as_str()), (503, "this app's account is suspended\n"));
    // Suspended, it reads and changes nothing.
    assert_eq!(s.api("GET", "/v1/apps", Some(&t), None).await.0, 200);
    let (status, body) = s.api("PUT", "/v1/apps/other", Some(&t), None).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("suspended"));
    assert_eq!(s.api("POST", "/v1/tenants/acme/resume", Some(&operator), None).await.0, 200);
    assert_eq!(count(&s, "shop.acme.localhost", "x").await, 1);
    let (status, body) = s.api("PUT", "/v1/tenants/acme/plan", Some(&operator), Some(json!({"plan": "gold"}))).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("no plan `gold`")));
    assert_eq!(s.api("PUT", "/v1/tenants/nobody/plan", Some(&operator), Some(json!({"plan": "free"}))).await.0, 404);
    let (status, body) = s.api("PUT", "/v1/tenants/acme/plan", Some(&operator), Some(json!({"plan": "free"}))).await;
    assert_eq!((status, body["plan"].as_str()), (200, Some("free")));
}

#[tokio::test]
async fn signups_and_failed_authentications_are_rate_limited() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("serve.toml");
    std::fs::write(&config, "[rates]\nsignups_per_hour = 2\nauth_failures_per_minute = 3\n").unwrap();
    let s = Serve::start(&data.path().join("data"), &["--config", config.to_str().unwrap()]);
    signup(&s, "one").await;
    signup(&s, "two").await;
    let (status, body) = s.api("POST", "/v1/tenants", None, Some(json!({"name": "three"}))).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["error"].as_str().unwrap().starts_with("too many sign-ups from this address"));

    let bad = format!("wk_{}", "B".repeat(43));
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(s.api("GET", "/v1/apps", Some(&bad), None).await.0);
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429]);
    let r = reqwest::Client::new().get(format!("{}/v1/apps", s.api)).bearer_auth(&bad).send().await.unwrap();
    assert!(r.headers().get("retry-after").is_some());
}

#[tokio::test]
async fn the_api_document_and_unknown_routes() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let (status, text) = s.api_raw("GET", "/v1/openapi.yaml", None, None).await;
    assert_eq!(status, 200);
    assert!(text.starts_with("openapi: 3.1"), "{}", &text[..text.len().min(80)]);
    let (status, body) = s.api("GET", "/v1/nothing", None, None).await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("openapi.yaml"));
}

/// Runs the CLI against `s` with its own config directory; answers its
/// exit success, standard output and standard error.

#[tokio::test]
async fn two_tenants_sign_up_and_deploy_with_the_cli_and_everything_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let (alpha, beta) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = Serve::start(data.path(), &[]);
    let examples = repo().join("docs/examples");
    let example = |name: &str| examples.join(name).display().to_string();

    let (ok, out, _) = cli(&s, alpha.path(), &["signup", "alpha"], None);
    assert!(ok);
    assert!(out.lines().last().unwrap().starts_with("wk_"), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(alpha.path().join("credentials.toml")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(cli(&s, beta.path(), &["signup", "beta"], None).0);
    let (ok, _, err) = cli(&s, beta.path(), &["signup", "alpha"], None);
    assert!(!ok);
    assert_eq!(err.trim(), "wasmkeep: tenant name `alpha` is taken");

    let (ok, out, err) = cli(&s, alpha.path(), &["deploy", &example("counter")], None);
    assert!(ok, "{err}");
    let port = s.public.port();
    assert_eq!(out.trim(), format!("http://counter.alpha.localhost:{port}/"));
    // The chat needs its value before its rooms run.
    let (ok, _, err) = cli(&s, alpha.path(), &["values", "set", "chat", "TOKEN_SECRET"], Some("a long secret\n"));
    assert!(!ok && err.contains("no such app"), "{err}");
    assert!(cli(&s, alpha.path(), &["deploy", &example("chat")], None).0);
    // Until its required value is set, the chat's front does not run: the
    // node answers for it, as it does for the chat's actors.
    let unset = s.public_with_retry("chat.alpha.localhost", "/").await;
    assert_eq!(unset, (503, Some("10".into()), "app value TOKEN_SECRET is not set\n".into()));
    assert!(cli(&s, alpha.path(), &["values", "set", "chat", "TOKEN_SECRET"], Some("a long secret\n")).0);
    assert_eq!(cli(&s, alpha.path(), &["values", "ls", "chat"], None).1, "TOKEN_SECRET\n");
    let (ok, _, err) = cli(&s, beta.path(), &["deploy", &example("shop")], None);
    assert!(ok, "{err}");
    // A TypeScript app is built with npm and the SDK, then uploaded alike.
    let (ok, out, err) = cli(&s, beta.path(), &["deploy", &example("counter-ts")], None);
    assert!(ok, "{err}");
    // Built with npm, or reused from a build of the same inputs.
    let built = err.contains("(actor component, wasmkeep-build)") || err.contains("actor component unchanged");
    assert!(built, "{err}");
    assert_eq!(out.trim(), format!("http://counter-ts.beta.localhost:{port}/"));
    assert_eq!(s.public("counter-ts.beta.localhost", "/actor/counter/a/").await, (200, "1".into()));

    let (_, apps, _) = cli(&s, alpha.path(), &["apps", "ls"], None);
    assert_eq!(apps.lines().map(|l| l.split('\t').next().unwrap()).collect::<Vec<_>>(), ["chat", "counter"]);
    assert_eq!(s.public("counter.alpha.localhost", "/actor/counter/a/").await, (200, "1".into()));
    assert_eq!(s.public("counter.alpha.localhost", "/actor/counter/a/").await, (200, "2".into()));
    assert_eq!(s.public("chat.alpha.localhost", "/").await.0, 200);
    assert_eq!(s.public("shop.beta.localhost", "/page/ann").await.0, 200);
    // Each tenant's apps only under its own name.
    assert_eq!(s.public("counter.beta.localhost", "/actor/counter/a/").await.0, 404);
    assert_eq!(s.public("shop.alpha.localhost", "/page/ann").await.0, 404);

    // Tokens: a read token lists but cannot deploy; revoked, it is refused.
    let (_, read, _) = cli(&s, alpha.path(), &["tokens", "create", "--scope", "read"], None);
    let read = read.trim().to_owned();
    let (ok, _, err) = cli(&s, alpha.path(), &["deploy", &example("counter"), "--token", &read], None);
    assert!(!ok && err.contains("scope is `read`"), "{err}");
    let (_, listed, _) = cli(&s, alpha.path(), &["tokens", "ls"], None);
    let id = listed.lines().find(|l| l.ends_with("\tread")).unwrap().split('\t').next().unwrap().to_owned();
    assert!(cli(&s, alpha.path(), &["tokens", "revoke", &id], None).0);
    let (ok, _, err) = cli(&s, alpha.path(), &["apps", "ls", "--token", &read], None);
    assert!(!ok && err.contains("not valid"), "{err}");

    // Restarted: tenants, tokens, apps, versions, values, counts.
    let s = s.restart();
    let (ok, apps, _) = cli(&s, alpha.path(), &["apps", "ls"], None);
    assert!(ok);
    assert_eq!(apps.lines().count(), 2);
    assert_eq!(s.public("counter.alpha.localhost", "/actor/counter/a/").await, (200, "3".into()));
    assert_eq!(s.public("shop.beta.localhost", "/page/ann").await.0, 200);
    assert_eq!(cli(&s, alpha.path(), &["values", "ls", "chat"], None).1, "TOKEN_SECRET\n");

    // No API there: one line that says what to do.
    let mut dead = Command::new(env!("CARGO_BIN_EXE_wasmkeep"));
    let out = dead.args(["apps", "ls", "--api", "http://127.0.0.1:9", "--token", "wk_x"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot reach the API at http://127.0.0.1:9") && err.contains("wasmkeep serve"), "{err}");
}

/// A plans directory whose `free` plan is the shipped one with `changes`.
fn plans_with(dir: &Path, changes: &[(&str, &str)]) -> PathBuf {
    let plans = dir.join("plans");
    std::fs::create_dir_all(&plans).unwrap();
    let mut text = std::fs::read_to_string(repo().join("policies/plans/free.toml")).unwrap();
    for (field, value) in changes {
        let line = text.lines().find(|l| l.starts_with(&format!("{field} ="))).unwrap().to_owned();
        text = text.replace(&line, &format!("{field} = {value}"));
    }
    std::fs::write(plans.join("free.toml"), text).unwrap();
    plans
}

#[tokio::test]
async fn each_quota_is_enforced_named_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let plans = plans_with(
        dir.path(),
        &[
            ("requests_per_second", "1"),
            ("request_burst", "6"),
            ("events_per_second_per_actor", "1"),
            ("actor_creations_per_second", "1"),
            ("resident_actors", "2"),
        ],
    );
    let s = Serve::start(
        &dir.path().join("data"),
        &["--plans", plans.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"],
    );
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    let host = "shop.acme.localhost";
    let quota = |name: &str| format!("wasmkeep_quota_refusals_total{{tenant=\"acme\",quota=\"{name}\"}}");

    // Creations: one a second; the second new actor within it is 429.
    assert_eq!(s.public(host, "/actor/probe/a/ping").await.0, 200);
    let (status, retry, text) = s.public_with_retry(host, "/actor/probe/b/ping").await;
    assert_eq!((status, retry.as_deref()), (429, Some("1")), "{text}");
    assert_eq!(text, "over the plan's actor_creations_per_second quota; retry in 1 s\n");
    assert_eq!(s.metric(&quota("actor_creations_per_second")).await, 1.0);
    // Events per actor: the second event to `a` within its second is 429.
    let (status, retry, text) = s.public_with_retry(host, "/actor/probe/a/ping").await;
    assert_eq!((status, retry.as_deref()), (429, Some("1")), "{text}");
    assert!(text.contains("events_per_second_per_actor"), "{text}");
    assert_eq!(s.metric(&quota("events_per_second_per_actor")).await, 1.0);
    // A second later `b` is made; waking `a` again spends no creation.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(s.public(host, "/actor/probe/b/ping").await.0, 200);
    assert_eq!(s.public(host, "/actor/probe/a/ping").await.0, 200);
    // Resident actors: `a` and `b` hold the plan's two; a third waits for
    // one of them to hibernate.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, retry, text) = s.public_with_retry(host, "/actor/probe/c/ping").await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")), "{text}");
    assert!(text.contains("resident_actors"), "{text}");
    // Requests: a burst of six, then one a second, for every app of the tenant.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(s.public(host, "/").await.0);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    let (status, retry, text) = s.public_with_retry(host, "/").await;
    assert_eq!(status, 429, "{text}");
    assert!(retry.is_some());
    assert!(text.contains("requests_per_second"), "{text}");
    assert!(s.metric(&quota("requests_per_second")).await >= 2.0);
    assert!(s.metric("wasmkeep_refusals_total{reason=\"quota\"}").await >= 3.0);
}

#[tokio::test]
async fn a_plan_bounds_what_an_actor_and_a_tenant_store() {
    let dir = tempfile::tempdir().unwrap();
    let plans = plans_with(dir.path(), &[("storage_bytes_per_actor", "1000"), ("storage_bytes", "2500")]);
    let data = dir.path().join("data");
    let s = Serve::start(&data, &["--plans", plans.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    deploy(&s, &t, "chat").await;
    let other = signup(&s, "other").await;
    deploy(&s, &other, "shop").await;
    let (shop, chat) = ("shop.acme.localhost", "chat.acme.localhost");
    let quota = |name: &str| format!("wasmkeep_quota_refusals_total{{tenant=\"acme\",quota=\"{name}\"}}");
    let x = |n: usize| vec![b'x'; n];

    // One actor: 1 + 900 bytes fit its 1000; 1 + 100 more do not, and the
    // guest reads why.
    assert_eq!(s.public_put(shop, "/actor/probe/a/kv?key=k", x(900)).await.0, 204);
    let (status, text) = s.public_put(shop, "/actor/probe/a/kv?key=j", x(100)).await;
    assert_eq!(
        (status, text.as_str()),
        (
            400,
            "too large: storage quota: this actor would store 1002 bytes; the plan allows 1000; nothing of this event is stored"
        )
    );
    assert_eq!(s.public(shop, "/actor/probe/a/kv?key=j").await.0, 404);
    assert_eq!(s.metric(&quota("storage_bytes_per_actor")).await, 1.0);
    // Overwriting a key counts only what it adds.
    assert_eq!(s.public_put(shop, "/actor/probe/a/kv?key=k", x(999)).await.0, 204);
    // The tenant: its actors in every app share 2500 bytes.
    assert_eq!(s.public_put(chat, "/actor/probe/b/kv?key=k", x(999)).await.0, 204);
    let (status, text) = s.public_put(chat, "/actor/probe/c/kv?key=k", x(501)).await;
    assert_eq!(
        (status, text.as_str()),
        (
            400,
            "too large: storage quota: this account's actors would store 2502 bytes; the plan allows 2500; nothing of this event is stored"
        )
    );
    assert_eq!(s.metric(&quota("storage_bytes")).await, 1.0);
    // Another tenant's room is its own.
    assert_eq!(s.public_put("shop.other.localhost", "/actor/probe/a/kv?key=k", x(999)).await.0, 204);
    // Deleting an actor frees its bytes, and the figures survive a restart.
    let s = s.restart();
    assert_eq!(s.api("DELETE", "/v1/apps/chat/actors/probe/b", Some(&t), None).await.0, 204);
    assert_eq!(s.public_put(chat, "/actor/probe/c/kv?key=k", x(501)).await.0, 204);
    let (status, text) = s.public_put(shop, "/actor/probe/a/kv?key=j", x(1)).await;
    assert!(status == 400 && text.contains("this actor would store 1002 bytes"), "{text}");
    let (_, usage) = s.api("GET", "/v1/usage", Some(&t), None).await;
    let bytes: Vec<_> =
        usage["apps"].as_array().unwrap().iter().map(|a| a["storage_bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes.iter().sum::<u64>(), 1000 + 502, "{usage}");
}

#[tokio::test]
async fn sigterm_stops_accepting_and_finishes_what_is_in_flight() {
    let data = tempfile::tempdir().unwrap();
    let mut s = Serve::start(data.path(), &[]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    let public = s.public;
    let slow = tokio::spawn(async move {
        let r = reqwest::Client::new()
            .get(format!("http://{public}/actor/probe/slow/sleep?ms=1500"))
            .header("host", "shop.acme.localhost")
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pid = s.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // No longer accepting...
    assert!(TcpStream::connect(public).is_err(), "the port still accepts after SIGTERM");
    // ...but the request in flight is answered, and the node exits cleanly.
    assert_eq!(slow.await.unwrap(), (200, "slept".into()));
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// Sends a WebSocket upgrade for `path` at `host`; answers the stream and
/// the head of the answer.
fn upgrade(s: &Serve, host: &str, path: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(s.public).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
        answer.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn a_tenant_holds_at_most_its_plans_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let plans = plans_with(dir.path(), &[("sockets", "1")]);
    let s = Serve::start(&dir.path().join("data"), &["--plans", plans.to_str().unwrap()]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    let host = "shop.acme.localhost";
    let (first, answer) = upgrade(&s, host, "/actor/probe/a/");
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    let (_, answer) = upgrade(&s, host, "/actor/probe/b/");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 5"), "{answer}");
    // The first one closed, its place is free again.
    drop(first);
    let mut reopened = false;
    for _ in 0..50 {
        if upgrade(&s, host, "/actor/probe/b/").1.starts_with("HTTP/1.1 101") {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reopened, "the closed socket's place was never given back");
}

#[tokio::test]
async fn a_tenant_lists_shows_and_deletes_its_actors() {
    let data = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let (ok, _, _) = cli(&s, config.path(), &["signup", "acme"], None);
    assert!(ok);
    let t = std::fs::read_to_string(config.path().join("credentials.toml")).unwrap();
    let t = t.lines().find_map(|l| l.strip_prefix("token = \"")).unwrap().trim_end_matches('"').to_owned();
    let other = signup(&s, "other").await;
    deploy(&s, &t, "shop").await;
    let host = "shop.acme.localhost";
    for name in ["ann", "anna", "bob", "x%2Fy"] {
        assert_eq!(s.public(host, &format!("/actor/probe/{name}/count")).await.0, 200);
    }
    let (status, page) = s.api("GET", "/v1/apps/shop/actors?limit=2", Some(&t), None).await;
    assert_eq!(status, 200, "{page}");
    let names = |page: &Value| {
        page["actors"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(names(&page), ["ann", "anna"]);
    let cursor = page["cursor"].as_str().unwrap().to_owned();
    let (_, next) = s
        .api("GET", &format!("/v1/apps/shop/actors?limit=2&cursor={}", cursor.replace('/', "%2F")), Some(&t), None)
        .await;
    assert_eq!(names(&next), ["bob", "x/y"]);
    let (_, found) = s.api("GET", "/v1/apps/shop/actors?prefix=ann&class=probe", Some(&t), None).await;
    assert_eq!(names(&found), ["ann", "anna"]);
    let (status, bad) = s.api("GET", "/v1/apps/shop/actors?limit=0", Some(&t), None).await;
    assert_eq!(status, 400, "{bad}");

    let (status, actor) = s.api("GET", "/v1/apps/shop/actors/probe/x%2Fy", Some(&t), None).await;
    assert_eq!(status, 200, "{actor}");
    assert_eq!(actor["name"], "x/y");
    assert_eq!(actor["resident"], true);
    assert!(actor["keys"].as_u64().unwrap() >= 1 && actor["bytes"].as_u64().unwrap() > 0, "{actor}");
    assert!(actor["last_event"].as_u64().unwrap() > 1_700_000_000, "{actor}");
    // Another tenant: nothing of it.
    assert_eq!(s.api("GET", "/v1/apps/shop/actors", Some(&other), None).await.0, 404);
    assert_eq!(s.api("DELETE", "/v1/apps/shop/actors/probe/ann", Some(&other), None).await.0, 404);
    // A read token reads, does not delete.
    let (_, made) = s.api("POST", "/v1/tokens", Some(&t), Some(json!({"scope": "read"}))).await;
    let read = made["token"].as_str().unwrap().to_owned();
    assert_eq!(s.api("DELETE", "/v1/apps/shop/actors/probe/ann", Some(&read), None).await.0, 403);

    // Deleted: gone from the list, its storage with it; reached again it starts afresh.
    assert_eq!(s.api("DELETE", "/v1/apps/shop/actors/probe/ann", Some(&t), None).await.0, 204);
    assert_eq!(s.api("GET", "/v1/apps/shop/actors/probe/ann", Some(&t), None).await.0, 404);
    assert_eq!(s.api("DELETE", "/v1/apps/shop/actors/probe/ann", Some(&t), None).await.0, 404);
    assert_eq!(s.api("DELETE", "/v1/apps/shop/actors/nope/ann", Some(&t), None).await.0, 404);
    assert_eq!(count(&s, host, "ann").await, 1);

    let (ok, out, err) = cli(&s, config.path(), &["actors", "ls", "shop", "--prefix", "a"], None);
    assert!(ok, "{err}");
    let listed: Vec<_> = out.lines().map(|l| l.split('\t').take(3).collect::<Vec<_>>().join(" ")).collect();
    assert_eq!(listed, ["probe ann resident", "probe anna resident"]);
}

#[tokio::test]
async fn a_plan_narrows_egress_to_its_hosts_and_bounds_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let plans = plans_with(dir.path(), &[("egress_requests_per_second", "2")]);
    let free = plans.join("free.toml");
    let text = std::fs::read_to_string(&free).unwrap();
    // `.invalid` names never resolve (RFC 6761): nothing leaves the machine.
    let text = text.replace("[limits]", "allowed_hosts = [\"allowed.invalid\"]\n\n[limits]");
    std::fs::write(&free, text).unwrap();
    let s = Serve::start(
        &dir.path().join("data"),
        &["--plans", plans.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"],
    );
    let t = signup(&s, "acme").await;
    assert_eq!(s.api("PUT", "/v1/apps/web", Some(&t), None).await.0, 201);
    let bundle =
        json!({"manifest": {"front": "f"}, "components": {"f": b64(&guests().front)}}).to_string().into_bytes();
    let (status, text) = s.api_raw("POST", "/v1/apps/web/versions", Some(&t), Some(bundle)).await;
    assert_eq!(status, 201, "{text}");
    assert_eq!(s.api("POST", "/v1/apps/web/versions/1/activate", Some(&t), None).await.0, 200);
    // A host the plan does not list: refused before it is resolved.
    assert_eq!(fetch_via(&s, "http://elsewhere.invalid/").await, "ErrorCode::HttpRequestDenied");
    // The listed host is tried (and its name does not resolve).
    let error = fetch_via(&s, "http://allowed.invalid/").await;
    assert!(error.starts_with("ErrorCode::DnsError"), "{error}");
    // Two a second: past them, refused and counted.
    for _ in 0..5 {
        assert_eq!(fetch_via(&s, "http://elsewhere.invalid/").await, "ErrorCode::HttpRequestDenied");
    }
    let sample = "wasmkeep_quota_refusals_total{tenant=\"acme\",quota=\"egress_requests_per_second\"}";
    assert!(s.metric(sample).await >= 1.0);
}

/// The error the test front's outbound `GET url` met (empty when none).
async fn fetch_via(s: &Serve, url: &str) -> String {
    let path = format!("/fetch?url={}", url.replace(':', "%3A").replace('/', "%2F"));
    let (status, body) = s.public("web.acme.localhost", &path).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["error"].as_str().unwrap_or("").to_owned()
}

#[tokio::test]
async fn a_plan_keeps_so_many_versions_and_never_the_active_one_goes() {
    let dir = tempfile::tempdir().unwrap();
    let plans = plans_with(dir.path(), &[("versions_kept", "2")]);
    let s = Serve::start(&dir.path().join("data"), &["--plans", plans.to_str().unwrap()]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    for _ in 0..3 {
        let (status, text) = s.api_raw("POST", "/v1/apps/shop/versions", Some(&t), Some(bundle())).await;
        assert_eq!(status, 201, "{text}");
    }
    let (_, listed) = s.api("GET", "/v1/apps/shop/versions", Some(&t), None).await;
    let kept: Vec<_> = listed["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["version"].as_i64().unwrap(), v["active"].as_bool().unwrap()))
        .collect();
    // Version 1 is active: it stays; of the others the newest is kept.
    assert_eq!(kept, [(1, true), (4, false)]);
    assert_eq!(s.api("POST", "/v1/apps/shop/versions/2/activate", Some(&t), None).await.0, 404);
    assert_eq!(s.api("POST", "/v1/apps/shop/versions/4/activate", Some(&t), None).await.0, 200);
    assert_eq!(s.public("shop.acme.localhost", "/").await, (200, "hello".into()));
}

#[tokio::test]
async fn usage_counts_each_apps_requests_events_time_storage_and_sockets() {
    let data = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    assert_eq!(s.api("PUT", "/v1/apps/idle", Some(&t), None).await.0, 201);
    let host = "shop.acme.localhost";
    for name in ["a", "b", "c"] {
        assert_eq!(count(&s, host, name).await, 1);
    }
    let (_held, answer) = upgrade(&s, host, "/actor/probe/a/");
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    let (status, usage) = s.api("GET", "/v1/usage", Some(&t), None).await;
    assert_eq!(status, 200, "{usage}");
    let apps = usage["apps"].as_array().unwrap();
    let shop = apps.iter().find(|a| a["app"] == "shop").unwrap();
    assert_eq!(shop["requests"], 4, "{shop}");
    assert_eq!(shop["events"], 4, "three counts and the socket's open: {shop}");
    assert!(shop["wall_ms"].as_u64().is_some() && shop["cpu_ms"].as_u64().is_some());
    assert!(shop["storage_bytes"].as_u64().unwrap() > 0, "{shop}");
    assert_eq!(shop["sockets"], 1);
    let idle = apps.iter().find(|a| a["app"] == "idle").unwrap();
    assert_eq!((idle["requests"].as_u64(), idle["storage_bytes"].as_u64()), (Some(0), Some(0)));
    let period = usage["period"].as_str().unwrap().to_owned();
    assert_eq!(period.len(), 7, "{period}");
    assert!(usage["since"].as_i64().unwrap() > 1_700_000_000);

    // Stopped (SIGTERM) and started again: the period's counts were
    // recorded, and the new node's add to them.
    // The socket closes first (its close is an event of its actor).
    drop(_held);
    let closed = async {
        loop {
            let (_, usage) = s.api("GET", "/v1/usage", Some(&t), None).await;
            let shop = usage["apps"].as_array().unwrap().iter().find(|a| a["app"] == "shop").unwrap().clone();
            if shop["sockets"] == 0 && shop["events"] == 5 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), closed).await.unwrap();
    let mut s = s;
    assert!(Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().unwrap().success());
    assert!(s.child.wait().unwrap().success());
    let s = Serve::start(data.path(), &[]);
    assert_eq!(count(&s, host, "a").await, 2);
    let (_, usage) = s.api("GET", &format!("/v1/usage?period={period}"), Some(&t), None).await;
    let shop = usage["apps"].as_array().unwrap().iter().find(|a| a["app"] == "shop").unwrap().clone();
    assert_eq!((shop["requests"].as_u64(), shop["events"].as_u64()), (Some(5), Some(6)), "{shop}");
    // Another month has nothing; a period that is not one is refused.
    let (_, old) = s.api("GET", "/v1/usage?period=2020-01", Some(&t), None).await;
    assert_eq!((old["since"].as_i64(), old["apps"][0]["requests"].as_u64()), (Some(1_577_836_800), Some(0)));
    let (status, refused) = s.api("GET", "/v1/usage?period=2020-1", Some(&t), None).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("period `2020-1` is not a month as YYYY-MM"), "{refused}");
}

/// Sends a request head declaring `declared` body bytes and the first
/// byte of the body (if any), then stalls: the request holds its place and
/// its body's share of the budget.
fn stalled(s: &Serve, host: &str, path: &str, declared: usize) -> TcpStream {
    let mut stream = TcpStream::connect(s.public).unwrap();
    let first = if declared > 0 { "x" } else { "" };
    write!(stream, "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {declared}\r\n\r\n{first}").unwrap();
    // Each is taken in before the next is sent.
    std::thread::sleep(Duration::from_millis(150));
    stream
}

/// What a stalled request was answered at once, if anything (within 1 s).
fn answered(stream: &mut TcpStream) -> Option<String> {
    stream.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    (!answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn a_tenants_slow_bodies_and_held_requests_cost_it_not_another() {
    let dir = tempfile::tempdir().unwrap();
    // A port of 10 requests at once and 64 KiB of bodies; bodies of up to
    // 16 KiB, waiting at most 3 s for the budget.
    let limits = dir.path().join("limits.toml");
    std::fs::write(
        &limits,
        "requests_in_flight = 10\nbuffered_body_bytes = 65536\nbody_bytes = 16384\nbody_grace_secs = 3.0\n",
    )
    .unwrap();
    let s = Serve::start(
        &dir.path().join("data"),
        &["--limits", limits.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"],
    );
    let (a, b) = (signup(&s, "acme").await, signup(&s, "beta").await);
    deploy(&s, &a, "shop").await;
    deploy(&s, &b, "shop").await;
    let (host_a, host_b) = ("shop.acme.localhost", "shop.beta.localhost");

    // Slow bodies: tenant A's share of the 64 KiB, alone, is half; two of
    // its 15 KiB bodies fit, the next two are refused at once.
    let mut slow: Vec<TcpStream> =
        (0..4).map(|i| stalled(&s, host_a, &format!("/actor/probe/a{i}/echo"), 15360)).collect();
    assert_eq!(answered(&mut slow[0]), None);
    for refused in &mut slow[2..] {
        let answer = answered(refused).expect("refused at once");
        assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("too many request bodies"), "{answer}");
    }
    // B's body finds its room at once, beside A's.
    let b_body = reqwest::Client::new()
        .post(format!("http://{}/actor/probe/b/echo", s.public))
        .header("host", host_b)
        .body(vec![b'y'; 15360])
        .send()
        .await
        .unwrap();
    assert_eq!(b_body.status(), 200);

    // Requests held: A's share of the 10 is half; with its two slow bodies
    // held, three more (each answered in 3 s) are taken, the next are
    // refused and their connections closed.
    let held_path = |i| format!("/actor/probe/h{i}/slow-echo?ms=3000");
    let mut held: Vec<TcpStream> = (0..5).map(|i| stalled(&s, host_a, &held_path(i), 0)).collect();
    assert_eq!(answered(&mut held[2]), None);
    for refused in &mut held[3..] {
        let answer = answered(refused).expect("refused at once");
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("too many requests for this account at once"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    }
    assert_eq!(s.metric("wasmkeep_refusals_total{reason=\"tenant_busy\"}").await, 2.0);
    // B is served all the while.
    assert_eq!(s.public(host_b, "/actor/probe/b/ping").await.0, 200);
    // A's places come back with its requests.
    drop(slow);
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.public(host_a, "/actor/probe/a/ping").await.0, 200);
}

#[tokio::test]
async fn spinning_guests_share_the_cpu_by_their_plans_weights() {
    let dir = tempfile::tempdir().unwrap();
    // The free plan, and a `heavy` one of weight 3; events cut at 2 s.
    let plans = plans_with(dir.path(), &[]);
    let free = std::fs::read_to_string(plans.join("free.toml")).unwrap();
    std::fs::write(plans.join("heavy.toml"), free.replace("weight = 1 ", "weight = 3 ")).unwrap();
    let limits = dir.path().join("limits.toml");
    // One CPU turn for spinning guests, whatever the machine's cores.
    std::fs::write(&limits, "wall_per_event_secs = 2.0\nbusy_guests_at_once = 1\n").unwrap();
    let s = Serve::start(
        &dir.path().join("data"),
        &["--plans", plans.to_str().unwrap(), "--limits", limits.to_str().unwrap()],
    );
    let (light, heavy) = (signup(&s, "light").await, signup(&s, "heavy").await);
    let operator = s.operator_token();
    let (status, _) = s.api("PUT", "/v1/tenants/heavy/plan", Some(&operator), Some(json!({"plan": "heavy"}))).await;
    assert_eq!(status, 200);
    deploy(&s, &light, "app").await;
    deploy(&s, &heavy, "app").await;

    // Three guests of each spin until their wall, all at once.
    let spins: Vec<_> = ["light", "heavy"]
        .into_iter()
        .flat_map(|tenant| (0..3).map(move |i| (tenant, i)))
        .map(|(tenant, i)| {
            let public = s.public;
            tokio::spawn(async move {
                reqwest::Client::new()
                    .get(format!("http://{public}/actor/probe/spin{i}/loop"))
                    .header("host", format!("app.{tenant}.localhost"))
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    for spin in spins {
        assert_eq!(spin.await.unwrap(), 504, "cut at its wall");
    }
    let cpu = |usage: &Value| usage["apps"][0]["cpu_ms"].as_u64().unwrap() as f64;
    let (_, used_light) = s.api("GET", "/v1/usage", Some(&light), None).await;
    let (_, used_heavy) = s.api("GET", "/v1/usage", Some(&heavy), None).await;
    let (l, h) = (cpu(&used_light), cpu(&used_heavy));
    // One turn, both tenants waiting for it all along: three to one (less
    // the ticks a guest takes to ask again on a busy machine).
    assert!(h + l > 500.0, "light {l} ms, heavy {h} ms");
    assert!((1.6..=4.5).contains(&(h / l)), "light {l} ms, heavy {h} ms of CPU");
    eprintln!("CPU light {l} ms, heavy {h} ms");
}

#[tokio::test]
async fn a_noisy_tenant_filling_the_pool_costs_a_quiet_one_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A small pool (20 actor instances) and plans whose residents could
    // fill it: only the scheduler's shares keep it fair.
    let limits = dir.path().join("limits.toml");
    std::fs::write(&limits, "pool_instances = 24\nfront_slots = 4\n").unwrap();
    let plans = plans_with(
        dir.path(),
        &[
            ("requests_per_second", "20"),
            ("request_burst", "20"),
            ("actor_creations_per_second", "50"),
            ("resident_actors", "500"),
        ],
    );
    let s = Serve::start(
        &dir.path().join("data"),
        &["--plans", plans.to_str().unwrap(), "--limits", limits.to_str().unwrap()],
    );
    let noisy = signup(&s, "noisy").await;
    let quiet = signup(&s, "quiet").await;
    deploy(&s, &noisy, "app").await;
    deploy(&s, &quiet, "app").await;

    // The noisy tenant: ten times its rate, each request to a new actor,
    // for four seconds: what passes its quota fills the pool.
    let public = s.public;
    let flood = tokio::spawn(async move {
        let client = reqwest::Client::new();
        let mut sent = Vec::new();
        for i in 0..800 {
            let client = client.clone();
            sent.push(tokio::spawn(async move {
                let r = client
                    .get(format!("http://{public}/actor/probe/n{i}/ping"))
                    .header("host", "app.noisy.localhost")
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await;
                r.map(|r| r.status().as_u16()).unwrap_or(0)
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut statuses = Vec::new();
        for s in sent {
            statuses.push(s.await.unwrap());
        }
        statuses
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The quiet tenant: a tenth of its rate, each request to a new actor.
    // (Without the shares each would wait out the admission wait for an
    // instance and be refused: `503 no capacity`.)
    let mut quiet_statuses = Vec::new();
    for i in 0..6 {
        let (status, text) = s.public("app.quiet.localhost", &format!("/actor/probe/q{i}/ping")).await;
        quiet_statuses.push((status, text));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let noisy_statuses = flood.await.unwrap();
    let ok = noisy_statuses.iter().filter(|s| **s == 200).count();
    assert!(ok >= 20, "the noisy tenant filled the pool: {ok} answered");
    assert!(noisy_statuses.contains(&429));
    for (status, text) in &quiet_statuses {
        assert_eq!(*status, 200, "{text} ({quiet_statuses:?})");
    }
    let _ = quiet;
}

/// One HTTP/1.1 exchange over TLS to `addr`, the server checked against
/// `roots` for `name`; answers the ALPN protocol agreed and the answer.
async fn over_tls(
    addr: &str,
    name: &str,
    roots: &rustls::RootCertStore,
    alpn: &[&[u8]],
    request: &[u8],
) -> (Option<Vec<u8>>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(server, tcp).await.unwrap();
    let agreed = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    if request.is_empty() {
        return (agreed, String::new());
    }
    tls.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut answer)).await;
    (agreed, String::from_utf8_lossy(&answer).into_owned())
}

fn http(method: &str, host: &str, path: &str, token: Option<&str>, body: &[u8]) -> Vec<u8> {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

#[tokio::test]
async fn both_listeners_serve_https_with_the_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let names = vec!["api.localhost".to_owned(), "shop.acme.localhost".to_owned()];
    let cert = rcgen::CertificateParams::new(names).unwrap().self_signed(&key).unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let s = Serve::start(
        &dir.path().join("data"),
        &["--tls-cert", cert_file.to_str().unwrap(), "--tls-key", key_file.to_str().unwrap()],
    );
    assert!(s.api.starts_with("https://"), "{}", s.api);
    let api = s.api.trim_start_matches("https://").to_owned();
    let public = s.public.to_string();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let h1: &[&[u8]] = &[b"http/1.1"];

    let body_of = |answer: &str| answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    let (_, answer) = over_tls(
        &api,
        "api.localhost",
        &roots,
        h1,
        &http("POST", "api.localhost", "/v1/tenants", None, br#"{"name":"acme"}"#),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let token = serde_json::from_str::<Value>(&body_of(&answer)).unwrap()["token"].as_str().unwrap().to_owned();
    for (method, path, body) in [
        ("PUT", "/v1/apps/shop", Vec::new()),
        ("POST", "/v1/apps/shop/versions", bundle()),
        ("POST", "/v1/apps/shop/versions/1/activate", Vec::new()),
    ] {
        let (_, answer) =
            over_tls(&api, "api.localhost", &roots, h1, &http(method, "api.localhost", path, Some(&token), &body))
                .await;
        assert!(answer.starts_with("HTTP/1.1 20"), "{method} {path}: {answer}");
        if path.ends_with("activate") {
            let url = serde_json::from_str::<Value>(&body_of(&answer)).unwrap()["url"].as_str().unwrap().to_owned();
            assert!(url.starts_with("https://shop.acme.localhost:"), "{url}");
        }
    }
    let (agreed, answer) =
        over_tls(&public, "shop.acme.localhost", &roots, h1, &http("GET", "shop.acme.localhost", "/", None, b"")).await;
    assert_eq!(agreed.as_deref(), Some(&b"http/1.1"[..]));
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"), "{answer}");
    // HTTP/2 by ALPN, on both.
    for (addr, name) in [(&public, "shop.acme.localhost"), (&api, "api.localhost")] {
        let (agreed, _) = over_tls(addr, name, &roots, &[b"h2", b"http/1.1"], b"").await;
        assert_eq!(agreed.as_deref(), Some(&b"h2"[..]), "{addr}");
    }
    // Plain HTTP to the TLS port gets no answer of the app's.
    let mut plain = TcpStream::connect(s.public).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    plain.write_all(b"GET / HTTP/1.1\r\nHost: shop.acme.localhost\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("hello"));
}

#[tokio::test]
async fn a_tenant_holding_its_share_of_front_slots_does_not_queue_ahead_of_another() {
    let dir = tempfile::tempdir().unwrap();
    // Four front slots, no per-address share (both tenants come from here).
    let limits = dir.path().join("limits.toml");
    std::fs::write(&limits, "front_slots = 4\nfront_slots_per_client = 4\nfront_slot_wait_secs = 3.0\n").unwrap();
    let s = Serve::start(&dir.path().join("data"), &["--limits", limits.to_str().unwrap()]);
    let front_app = |token: String| {
        let s = &s;
        async move {
            assert_eq!(s.api("PUT", "/v1/apps/web", Some(&token), None).await.0, 201);
            let bundle =
                json!({"manifest": {"front": "f"}, "components": {"f": b64(&guests().front)}}).to_string().into_bytes();
            assert_eq!(s.api_raw("POST", "/v1/apps/web/versions", Some(&token), Some(bundle)).await.0, 201);
            assert_eq!(s.api("POST", "/v1/apps/web/versions/1/activate", Some(&token), None).await.0, 200);
        }
    };
    front_app(signup(&s, "noisy").await).await;
    front_app(signup(&s, "quiet").await).await;

    // The noisy tenant holds every slot with slow requests, and keeps
    // sending more: once past its share, those are refused, not queued.
    let public = s.public;
    let slow = |i: u32| async move {
        let r = reqwest::Client::new()
            .get(format!("http://{public}/sleep?ms=2500&i={i}"))
            .header("host", "web.noisy.localhost")
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap();
        r.status().as_u16()
    };
    let holding: Vec<_> = (0..4).map(|i| tokio::spawn(slow(i))).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let more: Vec<_> = (4..10).map(|i| tokio::spawn(slow(i))).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The quiet tenant waits for the first slot to free and gets it.
    let (status, text) = s.public("web.quiet.localhost", "/hello").await;
    assert_eq!((status, text.as_str()), (200, "hello"));
    for h in holding {
        assert_eq!(h.await.unwrap(), 200);
    }
    let refused: Vec<u16> = futures_util::future::join_all(more).await.into_iter().map(|r| r.unwrap()).collect();
    assert!(refused.iter().all(|s| *s == 503), "{refused:?}");
}

#[tokio::test]
async fn two_nodes_of_a_cluster_serve_one_counter_in_order_and_load_each_others_deploys() {
    let url = wasmkeep_storage::test_postgres::server().database().await;
    let cluster = tempfile::tempdir().unwrap();
    let init = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .args(["cluster", "init"])
        .arg(cluster.path())
        .args(["--nodes", "a,b"])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let dir = cluster.path().display().to_string();
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node = |id: &'static str| {
        vec![
            "--store".to_owned(),
            url.clone(),
            "--node-id".into(),
            id.into(),
            "--cluster-dir".into(),
            dir.clone(),
            "--cluster-listen".into(),
            "127.0.0.1:0".into(),
            "--metrics-listen".into(),
            "127.0.0.1:0".into(),
        ]
    };
    let (flags_a, flags_b) = (node("a"), node("b"));
    let a = Serve::start(data_a.path(), &flags_a.iter().map(String::as_str).collect::<Vec<_>>());
    let b = Serve::start(data_b.path(), &flags_b.iter().map(String::as_str).collect::<Vec<_>>());
    // Signed up and deployed through a; b loads the app within a second or so.
    let t = signup(&a, "acme").await;
    deploy(&a, &t, "shop").await;
    let host = "shop.acme.localhost";
    let mut loaded = false;
    for _ in 0..50 {
        if b.public(host, "/actor/probe/warm/peek").await.0 == 200 {
            loaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(loaded, "b never loaded the app a deployed");
    // The counter through both public ports in turn: one owner, in order.
    for n in 1..=10 {
        let via = if n % 2 == 1 { &a } else { &b };
        assert_eq!(count(via, host, "c").await, n);
    }
    let forwarded = a.metric("wasmkeep_forwards_total{kind=\"request\"} ").await
        + b.metric("wasmkeep_forwards_total{kind=\"request\"} ").await;
    assert_eq!(forwarded, 5.0, "one node carried the other's half");
    // Both are ready; the API of either knows the tenant.
    for s in [&a, &b] {
        let ready = reqwest::get(s.metrics.as_ref().unwrap().replace("/metrics", "/readyz")).await.unwrap();
        assert_eq!(ready.status().as_u16(), 200);
    }
    assert_eq!(b.api("GET", "/v1/apps", Some(&t), None).await.1["apps"][0]["app"], "shop");
}

/// The actors `tenant` (token `t`) keeps and its plan's bound, as
/// `/v1/usage` says them.
async fn actors_kept(s: &Serve, t: &str) -> (u64, u64) {
    let (status, usage) = s.api("GET", "/v1/usage", Some(t), None).await;
    assert_eq!(status, 200, "{usage}");
    let kept = usage["apps"].as_array().unwrap().iter().map(|a| a["actors"].as_u64().unwrap()).sum::<u64>();
    let (stored, limit) = (usage["actors"]["stored"].as_u64().unwrap(), usage["actors"]["limit"].as_u64().unwrap());
    assert_eq!(kept, stored, "{usage}");
    (stored, limit)
}

#[tokio::test]
async fn a_plan_bounds_the_actors_a_tenant_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let plans = plans_with(dir.path(), &[("actors", "5")]);
    let data = dir.path().join("data");
    let s = Serve::start(&data, &["--plans", plans.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"]);
    let t = signup(&s, "acme").await;
    deploy(&s, &t, "shop").await;
    deploy(&s, &t, "chat").await;
    let other = signup(&s, "other").await;
    deploy(&s, &other, "shop").await;
    let (shop, chat, elsewhere) = ("shop.acme.localhost", "chat.acme.localhost", "shop.other.localhost");
    let refusals = |tenant: &str| format!("wasmkeep_quota_refusals_total{{tenant=\"{tenant}\",quota=\"actors\"}}");
    let refused = "over the plan's actors quota; an actor must be deleted first\n";

    // Five places for the tenant, in all its apps.
    for name in ["a1", "a2", "a3"] {
        assert_eq!(count(&s, shop, name).await, 1);
    }
    for name in ["b1", "b2"] {
        assert_eq!(count(&s, chat, name).await, 1);
    }
    assert_eq!(actors_kept(&s, &t).await, (5, 5));
    // The sixth is refused, named, without `Retry-After` (waiting frees no
    // place), in either app; nothing of it is made.
    let (status, retry, text) = s.public_with_retry(shop, "/actor/probe/a6/count").await;
    assert_eq!((status, retry, text.as_str()), (507, None, refused));
    let (status, retry, text) = s.public_with_retry(chat, "/actor/probe/b6/count").await;
    assert_eq!((status, retry, text.as_str()), (507, None, refused));
    assert_eq!(s.api("GET", "/v1/apps/shop/actors/probe/a6", Some(&t), None).await.0, 404);
    // The actors it keeps answer as before.
    assert_eq!(count(&s, shop, "a1").await, 2);
    // A guest's call that would create one gets the same refusal as its answer.
    let (status, text) = s.public(shop, "/actor/probe/a1/call?to=probe/a6&path=/count").await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((answer["status"].as_u64(), answer["body"].as_str()), (Some(507), Some(refused)), "{answer}");
    assert_eq!(s.metric(&refusals("acme")).await, 3.0);
    assert_eq!(actors_kept(&s, &t).await, (5, 5));

    // Another tenant's places are its own, and so is its bound.
    for name in ["x1", "x2", "x3", "x4", "x5"] {
        assert_eq!(count(&s, elsewhere, name).await, 1);
    }
    assert_eq!(s.public(elsewhere, "/actor/probe/x6/count").await, (507, refused.to_owned()));
    assert_eq!(s.metric(&refusals("other")).await, 1.0);
    assert_eq!(s.metric(&refusals("acme")).await, 3.0);

    // A deletion through the API frees a place: the next one gets it, the
    // one after does not.
    assert_eq!(s.api("DELETE", "/v1/apps/shop/actors/probe/a2", Some(&t), None).await.0, 204);
    assert_eq!(actors_kept(&s, &t).await, (4, 5));
    assert_eq!(count(&s, shop, "a6").await, 1);
    assert_eq!(s.public(shop, "/actor/probe/a7/count").await.0, 507);
    // So does an actor deleting itself; bringing it back is a creation.
    let r = reqwest::Client::new()
        .delete(format!("http://{}/actor/probe/b1/", s.public))
        .header("host", chat)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(count(&s, chat, "b6").await, 1);
    assert_eq!(s.public(chat, "/actor/probe/b1/count").await, (507, refused.to_owned()));

    // The count is the store's: it survives a restart.
    let s = s.restart();
    assert_eq!(actors_kept(&s, &t).await, (5, 5));
    assert_eq!(s.public(shop, "/actor/probe/a7/count").await.0, 507);
    // Deleting an app frees its actors' places.
    assert_eq!(s.api("DELETE", "/v1/apps/chat", Some(&t), None).await.0, 204);
    assert_eq!(actors_kept(&s, &t).await, (3, 5));
    assert_eq!(count(&s, shop, "a7").await, 1);
    assert_eq!(count(&s, shop, "a8").await, 1);
    assert_eq!(s.public(shop, "/actor/probe/a9/count").await.0, 507);
    assert_eq!(actors_kept(&s, &other).await, (5, 5));
}

/// A first deploy the node refuses takes its app back (the CLI deletes it
/// with `?unused=true`, which spares an app holding a version or a value):
/// a refused deploy holds no slot of the plan's `apps`. The quota's
/// refusal says what to do, not to find a token of more scope. And the
/// CLI's account commands: whoami, values, usage, telemetry, completions.
#[tokio::test]
async fn a_refused_first_upload_holds_no_app_and_the_cli_shows_the_account() {
    let data = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let s = Serve::start(data.path(), &[]);
    let (ok, out, _) = cli(&s, config.path(), &["signup", "alpha"], None);
    assert!(ok);
    let token = out.lines().last().unwrap().trim().to_owned();
    let apps = async |s: &Serve, token: &str| -> Vec<String> {
        let (_, body) = s.api("GET", "/v1/apps", Some(token), None).await;
        body["apps"].as_array().unwrap().iter().map(|a| a["app"].as_str().unwrap().to_owned()).collect()
    };
    // A first deploy the node refuses (a core module, not a component),
    // through the CLI: the app it made for the upload is taken back.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(
        bad.path().join("wasmkeep.toml"),
        "name = \"broken\"\n[classes.c]\naccess = \"open\"\ncomponent = \"c.wasm\"\n",
    )
    .unwrap();
    std::fs::write(bad.path().join("c.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let (ok, _, err) = cli(&s, config.path(), &["deploy", bad.path().to_str().unwrap()], None);
    assert!(!ok && err.contains("not a valid component: a core WebAssembly module"), "{err}");
    assert!(apps(&s, &token).await.is_empty());
    // The API never takes an app back by itself; `unused=true` deletes
    // only one holding nothing, with a deploy token.
    let (_, deploy_token, _) = cli(&s, config.path(), &["tokens", "create", "--scope", "deploy"], None);
    let deploy_token = deploy_token.trim();
    assert_eq!(s.api("PUT", "/v1/apps/kept", Some(&token), None).await.0, 201);
    let set = s.api_raw("PUT", "/v1/apps/kept/values/SECRET", Some(&token), Some(b"x".to_vec())).await;
    assert_eq!(set.0, 204, "{}", set.1);
    let (status, _) = s.api_raw("POST", "/v1/apps/kept/versions", Some(&token), Some(b"{}".to_vec())).await;
    assert_eq!(status, 400);
    assert_eq!(apps(&s, &token).await, ["kept"]);
    let (status, body) = s.api_raw("DELETE", "/v1/apps/kept?unused=true", Some(deploy_token), None).await;
    assert_eq!((status, body.as_str()), (409, r#"{"error":"the app holds versions or values: it is in use"}"#));
    assert_eq!(s.api_raw("DELETE", "/v1/apps/kept", Some(deploy_token), None).await.0, 403);
    assert_eq!(s.api("PUT", "/v1/apps/empty", Some(&token), None).await.0, 201);
    assert_eq!(s.api_raw("DELETE", "/v1/apps/empty?unused=true", Some(deploy_token), None).await.0, 204);
    assert_eq!(apps(&s, &token).await, ["kept"]);
    // values ls, as text and JSON, and rm.
    assert_eq!(cli(&s, config.path(), &["values", "ls", "kept"], None).1, "SECRET\n");
    let (_, listed, _) = cli(&s, config.path(), &["values", "ls", "kept", "--json"], None);
    assert_eq!(serde_json::from_str::<Value>(&listed).unwrap(), json!({"values": ["SECRET"]}));
    assert!(cli(&s, config.path(), &["values", "rm", "kept", "SECRET"], None).0);
    assert_eq!(cli(&s, config.path(), &["values", "ls", "kept"], None).1, "");

    // The free plan's three apps, then a fourth through the CLI: the
    // quota's line, no advice about scopes.
    for app in ["b", "c"] {
        assert_eq!(s.api("PUT", &format!("/v1/apps/{app}"), Some(&token), None).await.0, 201);
    }
    let counter = repo().join("docs/examples/counter").display().to_string();
    let (ok, _, err) = cli(&s, config.path(), &["deploy", &counter], None);
    assert!(!ok);
    let refusal = err.lines().last().unwrap();
    assert_eq!(refusal, "wasmkeep: quota apps: the plan allows 3 apps; delete one or change plans");

    // whoami, as text and JSON; a read token's refusal names the scope.
    let (ok, out, _) = cli(&s, config.path(), &["whoami"], None);
    assert!(ok && out.starts_with(&format!("tenant alpha at {} (scope admin, plan free; token tok_", s.api)), "{out}");
    let (ok, out, _) = cli(&s, config.path(), &["whoami", "--json"], None);
    assert!(ok);
    let me: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (me["tenant"].as_str(), me["scope"].as_str(), me["suspended"].as_bool()),
        (Some("alpha"), Some("admin"), Some(false))
    );
    let (_, read, _) = cli(&s, config.path(), &["tokens", "create", "--scope", "read"], None);
    let (ok, _, err) = cli(&s, config.path(), &["apps", "rm", "b", "--yes", "--token", read.trim()], None);
    assert!(!ok && err.contains("this needs `admin`") && err.contains("tokens create --scope"), "{err}");
    // usage, as text and JSON.
    let (ok, out, _) = cli(&s, config.path(), &["usage"], None);
    assert!(ok && out.starts_with("period ") && out.contains("\tactors 0 of "), "{out}");
    let (ok, out, _) = cli(&s, config.path(), &["usage", "--json"], None);
    assert!(ok && serde_json::from_str::<Value>(&out).unwrap()["apps"].is_array(), "{out}");
    let (ok, _, err) = cli(&s, config.path(), &["usage", "--period", "last month"], None);
    assert!(!ok && err.contains("is not a month as YYYY-MM"), "{err}");
    // This node sends no tenant's spans: the telemetry commands say so.
    let (ok, _, err) = cli(&s, config.path(), &["telemetry", "show"], None);
    assert!(!ok && err.contains("does not send tenants' traces"), "{err}");
    // apps rm, then the slot is free again.
    assert!(cli(&s, config.path(), &["apps", "rm", "b", "--yes"], None).0);
    let (ok, out, err) = cli(&s, config.path(), &["deploy", &counter], None);
    assert!(ok, "{err}");
    assert!(out.starts_with("http://counter.alpha.localhost:"), "{out}");

    // Completions for each shell name every command.
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_wasmkeep")).args(["completions", shell]).output().unwrap();
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success());
        for command in ["init", "rollback", "whoami", "telemetry"] {
            assert!(script.contains(command), "{shell} completions lack {command}");
        }
    }
}

/// A tenant sees in its own tail why an event of its app failed: one
/// `failure` record each for a panic (its message and place, and no
/// stderr records of the panic's report), a wall cut, a memory limit and
/// a quota's refusal (at an actor's admission, or of the app's requests
/// before any guest), each with the trace id of the request that ran it.
#[tokio::test]
async fn a_tenant_sees_its_failures_in_its_tail_with_their_trace() {
    let (data, conf) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let limits = conf.path().join("limits.toml");
    std::fs::write(&limits, "wall_per_event_secs = 1.0\nmemory_bytes = 33554432\n").unwrap();
    // The log as a person reads it (text, not JSON), to a pipe.
    let text = [("WASMKEEP_TELEMETRY__LOG_FORMAT", "text")];
    let s = Serve::start_with(data.path(), &["--limits", limits.to_str().unwrap()], &text);
    let token = signup(&s, "alpha").await;
    deploy(&s, &token, "p").await;
    let traced = |path: &'static str, trace: &'static str| {
        let public = s.public;
        async move {
            let answer = reqwest::Client::new()
                .get(format!("http://{public}{path}"))
                .header("host", "p.alpha.localhost")
                .header("traceparent", format!("00-{trace}-b7ad6b7169203331-01"))
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .unwrap();
            answer.status().as_u16()
        }
    };
    let (panic, wall, memory) =
        ("0af7651916cd43dd8448eb211c80319c", "1af7651916cd43dd8448eb211c80319c", "2af7651916cd43dd8448eb211c80319c");
    assert_eq!(traced("/actor/probe/a/trap-after-write", panic).await, 500);
    assert_eq!(traced("/actor/probe/b/loop", wall).await, 504);
    assert_eq!(traced("/actor/probe/c/membomb", memory).await, 500);
    // An actor asked faster than the plan's events per second.
    let quota = "3af7651916cd43dd8448eb211c80319c";
    let mut refused = false;
    for _ in 0..500 {
        if traced("/actor/probe/d/ping", quota).await == 429 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the free plan's events per second were never exceeded");
    // The app asked faster than the plan's requests per second (refused
    // before any front or actor), a second later: one record a second,
    // whatever the flood, the next saying how many went untold.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let until_refused = |trace: &'static str| async move {
        for _ in 0..500 {
            if traced("/nothing-here", trace).await == 429 {
                return;
            }
        }
        panic!("the free plan's requests per second were never exceeded");
    };
    let (rps, rps_later) = ("4af7651916cd43dd8448eb211c80319c", "5af7651916cd43dd8448eb211c80319c");
    until_refused(rps).await;
    // A flood within the second (at once, so that the quota's bucket has
    // no time to refill): refused, and not told.
    let flood = futures_util::future::join_all((0..20).map(|_| traced("/nothing-here", rps))).await;
    let untold = flood.iter().filter(|status| **status == 429).count();
    assert!(untold >= 15, "{flood:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    until_refused(rps_later).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, text) = s.api_raw("GET", "/v1/apps/p/logs", Some(&token), None).await;
    assert_eq!(status, 200, "{text}");
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let failure = |trace: &str| -> String {
        let found: Vec<&Value> =
            records.iter().filter(|r| r["stream"] == "failure" && r["trace_id"].as_str() == Some(trace)).collect();
        assert_eq!(found.len(), 1, "one failure record for {trace}: {records:#?}");
        found[0]["line"].as_str().unwrap().to_owned()
    };
    let line = failure(panic);
    assert!(line.starts_with("trapped: panicked at probe/src/lib.rs:"), "{line}");
    assert!(line.contains(": the probe traps on purpose (wasm trap:"), "{line}");
    let report: Vec<&Value> =
        records.iter().filter(|r| r["stream"] == "stderr" && r["trace_id"].as_str() == Some(panic)).collect();
    assert!(report.is_empty(), "the panic's report is the failure's record, not stderr lines: {report:#?}");
    assert_eq!(failure(wall), "cut at its wall: the event ran out of time and was stopped");
    let line = failure(memory);
    assert!(line.starts_with("out of memory (the instance's limit is 32 MiB): memory allocation of"), "{line}");
    assert!(failure(quota).starts_with("refused: over the plan's events_per_second_per_actor quota"), "{records:#?}");
    let line = failure(rps);
    assert!(line.starts_with("refused: over the plan's requests_per_second quota") && !line.contains("more"), "{line}");
    let line = failure(rps_later);
    assert!(line.ends_with(&format!(" ({untold} more refused since the last record)")), "{line}");
    let of_rps: Vec<&Value> = records.iter().filter(|r| r["trace_id"].as_str() == Some(rps)).collect();
    assert!(of_rps.iter().all(|r| r["class"].is_null() && r["name"].is_null()), "the app's, no actor's: {of_rps:#?}");
    // The operator's log has its own line for each; written to a pipe, it
    // has no colour codes.
    let log = s.log.lock().unwrap().clone();
    assert!(log.contains("trapped: ") && log.contains("cut at its wall"), "{log}");
    assert!(!log.contains('\x1b'), "escape codes in a log that is not a terminal: {log}");
    // The CLI's tail shows them as they are, with the trace.
    let config = tempfile::tempdir().unwrap();
    let (ok, out, err) = cli(&s, config.path(), &["tail", "p", "--no-follow", "--token", &token], None);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l.contains("  probe/b  failure  cut at its wall") && l.ends_with(wall)), "{out}");
}

/// The sample configuration starts a node as the docs run it, anywhere:
/// from a directory without `policies/` (its plans are the built-in ones);
/// a plans directory that is not there is one line saying what to do.
#[test]
fn the_ops_sample_configuration_starts_a_node_anywhere() {
    use std::io::BufRead;
    let (cwd, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sample = repo().join("ops/serve.toml");
    let start = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
            .args(["serve", "--config"])
            .arg(&sample)
            .arg("--data")
            .arg(data.path())
            .args(["--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(extra)
            .current_dir(cwd.path())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut node = start(&[]);
    let lines = std::io::BufReader::new(node.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.map_while(Result::ok) {
        let serving = line.starts_with("wasmkeep: provisioning API on ");
        seen.push(line);
        if serving {
            break;
        }
    }
    let _ = node.kill();
    let _ = node.wait();
    assert!(seen.last().is_some_and(|l| l.starts_with("wasmkeep: provisioning API on ")), "{seen:#?}");
    let out = start(&["--plans", "/nonexistent/plans"]).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("/nonexistent/plans: cannot read the plans") && err.contains("leave `plans` unset"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
