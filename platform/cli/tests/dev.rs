//! `wasmkeep dev` as a user runs it: the real binary, the counter example
//! built with cargo, a real HTTP client, a restart.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Starts `wasmkeep dev` and answers it with its base URL, read from the
/// line where it says it is serving.
fn start(app: &Path, data: &Path, extra: &[&str]) -> (Node, String) {
    let (child, url, _) = start_with_lines(app, data, extra);
    (child, url)
}

/// A running `wasmkeep dev`, killed when dropped: a failing test leaves
/// no node behind.
struct Node(Child);

impl Node {
    fn kill(&mut self) -> std::io::Result<()> {
        self.0.kill()
    }

    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// As [`start`], with the lines it printed before serving.
fn start_with_lines(app: &Path, data: &Path, extra: &[&str]) -> (Node, String, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .arg("dev")
        .arg(app)
        .args(["--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let node = Node(child);
    let mut lines = BufReader::new(stderr).lines();
    let mut before = Vec::new();
    let url = loop {
        let line = lines.next().expect("wasmkeep dev ended before serving").unwrap();
        eprintln!("{line}");
        if let Some(rest) = line.split(" on ").nth(1).filter(|_| line.starts_with("wasmkeep: serving")) {
            break rest.trim().to_owned();
        }
        before.push(line);
    };
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (node, url, before)
}

async fn text(client: &reqwest::Client, req: reqwest::RequestBuilder) -> (u16, String) {
    let _ = client;
    let r = req.timeout(Duration::from_secs(30)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn the_counter_counts_across_restarts() {
    let data = tempfile::tempdir().unwrap();
    let app = repo().join("docs/examples/counter");
    let client = reqwest::Client::new();

    let (mut node, url) = start(&app, data.path(), &[]);
    for want in ["1", "2", "3"] {
        assert_eq!(text(&client, client.get(format!("{url}/actor/counter/alice/"))).await, (200, want.into()));
    }
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/alice/peek"))).await, (200, "3".into()));
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/bob%2Fx/"))).await, (200, "1".into()));
    // Killed outright: every answered count was committed before it left.
    node.kill().unwrap();
    node.wait().unwrap();

    let (mut node, url) = start(&app, data.path(), &[]);
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/alice/"))).await, (200, "4".into()));
    assert_eq!(text(&client, client.delete(format!("{url}/actor/counter/alice/"))).await, (204, "".into()));
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/alice/peek"))).await, (200, "0".into()));
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/bob%2Fx/peek"))).await, (200, "1".into()));
    node.kill().unwrap();
    node.wait().unwrap();
}

#[tokio::test]
async fn the_typescript_counter_is_built_with_npm_and_counts_across_restarts() {
    let data = tempfile::tempdir().unwrap();
    let app = repo().join("docs/examples/counter-ts");
    let client = reqwest::Client::new();
    // Built afresh, not reused from an earlier run's `dist/`.
    let _ = std::fs::remove_file(app.join("dist/actor.wasm.inputs"));
    let (mut node, url, before) = start_with_lines(&app, data.path(), &["--no-watch"]);
    assert!(before.iter().any(|l| l.contains("(actor component, wasmkeep-build)")), "{before:?}");
    assert!(before.iter().any(|l| l.starts_with("wasmkeep-build: wrote ")), "progress is shown: {before:?}");
    for want in ["1", "2"] {
        assert_eq!(text(&client, client.get(format!("{url}/actor/counter/ann/"))).await, (200, want.into()));
    }
    node.kill().unwrap();
    node.wait().unwrap();
    let (_node, url) = start(&app, data.path(), &["--no-watch"]);
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/ann/peek"))).await, (200, "2".into()));
    assert_eq!(text(&client, client.delete(format!("{url}/actor/counter/ann/"))).await, (204, "".into()));
    assert_eq!(text(&client, client.get(format!("{url}/actor/counter/ann/peek"))).await, (200, "0".into()));
}

#[tokio::test]
async fn the_shop_gathers_a_page_with_one_call_many_and_keeps_carts_internal() {
    let data = tempfile::tempdir().unwrap();
    let app = repo().join("docs/examples/shop");
    let client = reqwest::Client::new();
    let (mut node, url, lines) = start_with_lines(&app, data.path(), &["--metrics-listen", "127.0.0.1:0"]);
    let metrics = lines
        .iter()
        .find_map(|l| l.strip_prefix("wasmkeep: metrics on "))
        .expect("the metrics listener is announced")
        .to_owned();
    let json = |(status, body): (u16, String)| {
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };

    let page = json(text(&client, client.get(format!("{url}/page/alice"))).await);
    assert_eq!(page["cart"], serde_json::json!([]));
    assert_eq!(page["profile"], serde_json::json!({ "user": "alice", "views": 1 }));
    assert_eq!(page["recommendations"].as_array().unwrap().len(), 3);

    let item = r#"{"sku":"tea","qty":2}"#;
    let cart = json(text(&client, client.post(format!("{url}/cart/alice")).body(item)).await);
    assert_eq!(cart, serde_json::json!([{ "sku": "tea", "qty": 2 }]));
    let page = json(text(&client, client.get(format!("{url}/page/alice"))).await);
    assert_eq!(page["cart"], cart);
    assert_eq!(page["profile"]["views"], 2);

    let (status, _) = text(&client, client.post(format!("{url}/cart/alice")).body("not json")).await;
    assert_eq!(status, 400);
    // Carts are internal: no client reaches one directly.
    let (status, _) = text(&client, client.get(format!("{url}/actor/cart/alice/"))).await;
    assert_eq!(status, 403);
    let page = json(text(&client, client.get(format!("{url}/page/bob%20smith"))).await);
    assert_eq!(page["profile"]["user"], "bob smith");

    let (status, scraped) = text(&client, client.get(&metrics)).await;
    assert_eq!(status, 200);
    for line in [
        "wasmkeep_front_requests_total{outcome=\"ok\"} 5",
        "wasmkeep_front_calls_total{outcome=\"ok\"} 10",
        "wasmkeep_forwards_total{kind=\"call\"} 0",
        "# TYPE wasmkeep_actor_queue_depth gauge",
    ] {
        assert!(scraped.lines().any(|l| l == line), "{line:?} is not in:\n{scraped}");
    }
    node.kill().unwrap();
    node.wait().unwrap();
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next message on `ws`, as JSON.
async fn next(ws: &mut Ws) -> serde_json::Value {
    use futures_util::StreamExt;
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap() {
        Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t))) => serde_json::from_str(&t).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn two_users_chat_through_the_front_and_an_internal_room() {
    chat_through_the_front_and_an_internal_room("docs/examples/chat").await;
}

#[tokio::test]
async fn two_users_chat_through_the_typescript_front_and_room() {
    chat_through_the_front_and_an_internal_room("docs/examples/chat-ts").await;
}

/// The chat example at `example` (Rust or TypeScript, the same behaviour):
/// sign-in, two users, the history, forged tokens, the internal room.
async fn chat_through_the_front_and_an_internal_room(example: &str) {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;

    let data = tempfile::tempdir().unwrap();
    let app = repo().join(example);
    let client = reqwest::Client::new();
    let (_node, url) = start(&app, data.path(), &["--value", "TOKEN_SECRET=a test secret"]);

    let answer = client.get(format!("{url}/")).send().await.unwrap();
    let types: Vec<_> =
        answer.headers().get_all("content-type").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
    assert_eq!(types, ["text/html; charset=utf-8"], "the page is HTML, said once");
    let (status, page) = (answer.status().as_u16(), answer.text().await.unwrap());
    assert_eq!(status, 200);
    assert!(page.contains("<title>wasmkeep chat</title>"), "{page}");
    let login = |user: &'static str| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let (status, body) = text(&client, client.post(format!("{url}/login")).form(&[("user", user)])).await;
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<serde_json::Value>(&body).unwrap()["token"].as_str().unwrap().to_owned()
        }
    };
    let (ann, bob) = (login("ann").await, login("bob").await);
    let (status, _) = text(&client, client.post(format!("{url}/login")).form(&[("user", "no spaces")])).await;
    assert_eq!(status, 400);

    let ws_url = url.replace("http://", "ws://");
    let join = |token: String| {
        let ws_url = ws_url.clone();
        async move { tokio_tungstenite::connect_async(format!("{ws_url}/rooms/lobby/ws?token={token}")).await }
    };
    let mut a = join(ann.clone()).await.expect("ann joins").0;
    let mut b = join(bob).await.expect("bob joins").0;
    a.send(Message::text(r#"{"text":"hi bob"}"#)).await.unwrap();
    let said = serde_json::json!({ "user": "ann", "text": "hi bob" });
    assert_eq!(next(&mut a).await, said);
    assert_eq!(next(&mut b).await, said);
    // One who joins later gets the history.
    let mut c = join(login("carl").await).await.expect("carl joins").0;
    assert_eq!(next(&mut c).await, said);

    // A forged or missing token never opens a socket.
    let last = if ann.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{last}", &ann[..ann.len() - 1]);
    for token in [forged.as_str(), "", "ann.00"] {
        let err = join(token.to_owned()).await.unwrap_err().to_string();
        assert!(err.contains("403"), "{token:?}: {err}");
    }
    // The room is internal: no client reaches it directly.
    let (status, _) = text(&client, client.get(format!("{url}/actor/room/lobby/"))).await;
    assert_eq!(status, 403);
}

/// An app serving the counter's component as a built `.wasm`, with
/// `access`, in a directory of its own.
fn counter_app(access: &str) -> tempfile::TempDir {
    let counter = repo().join("docs/examples/counter");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--quiet", "--target", "wasm32-wasip2"])
        .current_dir(&counter)
        .status()
        .unwrap();
    assert!(status.success());
    let app = tempfile::tempdir().unwrap();
    std::fs::copy(counter.join("target/wasm32-wasip2/release/counter.wasm"), app.path().join("counter.wasm")).unwrap();
    set_access(app.path(), access);
    app
}

fn set_access(app: &Path, access: &str) {
    let manifest =
        format!("name = \"reload\"\n[classes.counter]\naccess = \"{access}\"\ncomponent = \"counter.wasm\"\n");
    std::fs::write(app.join("wasmkeep.toml"), manifest).unwrap();
}

/// Waits up to 15 s for `GET url` to answer `status`.
async fn until_status(client: &reqwest::Client, url: &str, status: u16) -> bool {
    for _ in 0..150 {
        if client.get(url).send().await.is_ok_and(|r| r.status().as_u16() == status) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn the_app_redeploys_when_its_sources_change() {
    let app = counter_app("open");
    let data = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (_node, url) = start(app.path(), data.path(), &[]);
    let counter = format!("{url}/actor/counter/a/");
    let peek = format!("{counter}peek");
    assert_eq!(text(&client, client.get(&counter)).await, (200, "1".into()));
    set_access(app.path(), "internal");
    assert!(until_status(&client, &peek, 403).await, "the new version made the class internal");
    set_access(app.path(), "open");
    assert!(until_status(&client, &peek, 200).await);
    assert_eq!(text(&client, client.get(&counter)).await.1, "2", "storage survives deploys");
}

#[tokio::test]
async fn sighup_redeploys_and_a_broken_version_keeps_the_old_one() {
    let app = counter_app("open");
    let data = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (node, url) = start(app.path(), data.path(), &["--no-watch"]);
    let counter = format!("{url}/actor/counter/a/peek");
    assert_eq!(text(&client, client.get(&counter)).await.0, 200);
    let hangup = || {
        let status = Command::new("kill").args(["-HUP", &node.0.id().to_string()]).status().unwrap();
        assert!(status.success());
    };
    set_access(app.path(), "internal");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(text(&client, client.get(&counter)).await.0, 200, "--no-watch: no redeploy without SIGHUP");
    hangup();
    assert!(until_status(&client, &counter, 403).await);
    std::fs::write(app.path().join("wasmkeep.toml"), "name = \"reload\"\n[classes.counter]\naccess = \"nope\"\n")
        .unwrap();
    hangup();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(text(&client, client.get(&counter)).await.0, 403, "the running version keeps serving");
}

fn run_failing(app: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmkeep")).arg("dev").arg(app).args(extra).output().unwrap();
    assert!(!out.status.success());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_bad_manifest_is_one_line_naming_the_file_and_the_field() {
    let app = tempfile::tempdir().unwrap();
    std::fs::write(
        app.path().join("wasmkeep.toml"),
        "name = \"x\"\n[classes.c]\naccess = \"public\"\ncomponent = \".\"\n",
    )
    .unwrap();
    let err = run_failing(app.path(), &[]);
    let file = app.path().join("wasmkeep.toml");
    assert_eq!(
        err,
        format!("wasmkeep: {}: classes.c.access: `public` is not one of open, existing, internal\n", file.display())
    );

    let empty = tempfile::tempdir().unwrap();
    let err = run_failing(empty.path(), &[]);
    assert!(
        err.starts_with(&format!("wasmkeep: {}: cannot read", empty.path().join("wasmkeep.toml").display())),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn a_bad_value_flag_or_limit_is_refused() {
    let app = repo().join("docs/examples/counter");
    let err = run_failing(&app, &["--value", "NOEQUALS"]);
    assert!(err.contains("`NOEQUALS` is not NAME=VALUE"), "{err}");

    let limits = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(limits.path(), "idle_secs = -1\n").unwrap();
    let err = run_failing(&app, &["--limits", limits.path().to_str().unwrap()]);
    assert_eq!(err, "wasmkeep: limits: idle_secs: must be a positive number of seconds\n");

    std::fs::write(limits.path(), "idle_sec = 1\n").unwrap();
    let err = run_failing(&app, &["--limits", limits.path().to_str().unwrap()]);
    assert!(err.starts_with("wasmkeep: limits: unknown field"), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn a_failed_build_ends_in_one_line_naming_the_project() {
    let app = tempfile::tempdir().unwrap();
    let dir = app.path();
    std::fs::write(dir.join("wasmkeep.toml"), "name = \"broken\"\n[classes.c]\naccess = \"open\"\ncomponent = \".\"\n")
        .unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"broken\"\nversion = \"0.1.0\"\nedition = \"2024\"\n[lib]\ncrate-type = [\"cdylib\"]\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "this is not rust\n").unwrap();
    let err = run_failing(dir, &[]);
    // cargo's own messages come first; wasmkeep's verdict is the last line.
    let last = err.lines().last().unwrap();
    assert!(last.starts_with(&format!("wasmkeep: building {} failed", dir.join(".").display())), "{last}");
    assert!(last.ends_with("cargo's messages are above"), "{last}");
    assert!(err.contains("wasmkeep: building"), "progress is shown: {err}");
}

/// A TypeScript app in a directory of its own: `manifest`, and `source` as
/// its `src/index.ts`, the SDK linked from the repository.
fn typescript_app(manifest: &str, source: &str) -> tempfile::TempDir {
    let app = tempfile::tempdir().unwrap();
    let dir = app.path();
    std::fs::write(dir.join("wasmkeep.toml"), manifest).unwrap();
    let sdk = repo().join("platform/sdk/ts").canonicalize().unwrap();
    let package = serde_json::json!({
        "name": "typed", "private": true, "type": "module", "main": "src/index.ts",
        "dependencies": {"@wasmkeep/sdk": format!("file:{}", sdk.display())},
    });
    std::fs::write(dir.join("package.json"), package.to_string()).unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/index.ts"), source).unwrap();
    app
}

#[test]
fn a_typescript_type_error_is_one_line_naming_the_file_and_line() {
    let app = typescript_app(
        "name = \"typed\"\n[classes.c]\naccess = \"open\"\ncomponent = \".\"\n",
        "import type { Actor } from '@wasmkeep/sdk';\nexport default class C implements Actor {\n  onRequest(): Response { const n: number = 'x'; return new Response(String(n)); }\n}\n",
    );
    let dir = app.path();
    let want = format!(
        "wasmkeep: building {} failed: src/index.ts:3:33: Type 'string' is not assignable to type 'number'. (TS2322)",
        dir.join(".").display()
    );
    let err = run_failing(dir, &[]);
    // No lockfile: npm install made one.
    assert!(dir.join("package-lock.json").is_file());
    assert_eq!(err.lines().last().unwrap(), want);
    // package.json moved past its lockfile: installed again (`npm ci` would
    // refuse the stale lockfile), and the same error is found.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let package = std::fs::read_to_string(dir.join("package.json")).unwrap();
    std::fs::write(
        dir.join("package.json"),
        package.replace("\"private\":true", "\"private\":true,\"version\":\"0.0.2\""),
    )
    .unwrap();
    let err = run_failing(dir, &[]);
    assert!(err.contains("packages (npm install)"), "{err}");
    assert_eq!(err.lines().last().unwrap(), want);
}

#[test]
fn a_typescript_front_using_an_actors_storage_is_refused_in_one_line() {
    let app = typescript_app(
        "name = \"typed\"\nfront = \".\"\n",
        "import { storage } from '@wasmkeep/sdk';\nexport default { fetch: () => new Response(storage.getText('k') ?? '') };\n",
    );
    let err = run_failing(app.path(), &[]);
    let last = err.lines().last().unwrap();
    assert!(last.ends_with("(import @wasmkeep/sdk/front, not @wasmkeep/sdk)"), "{last}");
    assert!(last.contains("failed: src/index.ts: a front cannot use wasmkeep:actor/storage@0.2.0"), "{last}");
}

/// `wasmkeep dev` whose every line is kept: a test waits for the lines it
/// expects, and for the ones that must not come.
struct Watched {
    _node: Node,
    url: String,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Watched {
    fn start(app: &Path, data: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
            .arg("dev")
            .arg(app)
            .args(["--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                kept.lock().unwrap().push(line);
            }
        });
        let mut w = Watched { _node: Node(child), url: String::new(), lines };
        let serving = w.until(0, "wasmkeep: serving", 300);
        w.url = serving.split(" on ").nth(1).unwrap().trim().to_owned();
        w
    }

    fn count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// The first line from the `from`th on that contains `text`, within
    /// `secs` seconds.
    fn until(&self, from: usize, text: &str, secs: u64) -> String {
        let end = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(line) = self.lines.lock().unwrap().iter().skip(from).find(|l| l.contains(text)) {
                return line.clone();
            }
            assert!(std::time::Instant::now() < end, "no line with {text:?} in {secs} s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn has(&self, from: usize, text: &str) -> bool {
        self.lines.lock().unwrap().iter().skip(from).any(|l| l.contains(text))
    }
}

/// A new TypeScript app (`wasmkeep init`, the checkout's SDK) in a
/// directory of its own.
fn ts_app() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let sdk = repo().join("platform/sdk/ts");
    // The SDK's packages, installed once for every test that links it.
    wasmkeep_tests::typescript::sdk();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .args(["init", "app", "--lang", "ts", "--sdk"])
        .arg(&sdk)
        .current_dir(home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    home
}

/// `dev` never loses an edit and never builds for nothing: the lockfile
/// the first build writes is no change; a redeploy whose TypeScript inputs
/// are unchanged reuses its component; an edit saved while a build runs
/// (after the build read the sources) is deployed next.
#[tokio::test]
async fn dev_deploys_every_edit_and_rebuilds_only_what_changed() {
    let home = ts_app();
    let app = home.path().join("app");
    let data = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let dev = Watched::start(&app, data.path());
    let peek = format!("{}/actor/counter/a/peek", dev.url);
    assert_eq!(text(&client, client.get(&peek)).await, (200, "0".into()));
    // npm wrote package-lock.json during the first build: not an edit.
    let after_start = dev.count();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(!dev.has(0, "the app changed"), "the first build's lockfile made a redeploy");

    // The manifest changes, the component's inputs do not: no build.
    let manifest = app.join("wasmkeep.toml");
    let text_of = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text_of}# touched\n")).unwrap();
    // (The same components again: the node keeps version 1.)
    dev.until(after_start, "serving app version 1", 60);
    assert!(dev.has(after_start, "actor component unchanged"));
    assert!(!dev.has(after_start, "wasmkeep-build:"), "an unchanged component was built again");

    // An edit, and a second one saved once the build has read the first.
    let source = app.join("src/counter.ts");
    let code = std::fs::read_to_string(&source).unwrap();
    let peeked = "return new Response(String(count));";
    assert!(code.contains(peeked));
    let edited = |answer: &str| code.replace(peeked, &format!("return new Response('{answer} ' + String(count));"));
    let before_edits = dev.count();
    std::fs::write(&source, edited("first")).unwrap();
    dev.until(before_edits, "wasmkeep-build: making the actor component", 60);
    std::fs::write(&source, edited("second")).unwrap();
    dev.until(before_edits, "serving app version 2", 120);
    assert!(until_body(&client, &peek, "second 0").await, "the edit saved during the build was never deployed");
}

/// Waits up to 2 minutes for `GET url` to answer `body`.
async fn until_body(client: &reqwest::Client, url: &str, body: &str) -> bool {
    for _ in 0..1200 {
        if let Ok(r) = client.get(url).send().await
            && r.text().await.is_ok_and(|t| t == body)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A `.wasm` that is no component says what it is instead: not
/// WebAssembly at all (not a WAT parse error), or a core module.
#[test]
fn a_wasm_file_that_is_no_component_says_what_it_is() {
    let app = tempfile::tempdir().unwrap();
    std::fs::write(
        app.path().join("wasmkeep.toml"),
        "name = \"x\"\n[classes.c]\naccess = \"open\"\ncomponent = \"c.wasm\"\n",
    )
    .unwrap();
    let cases: [(&[u8], &str); 2] = [
        (
            b"hello\n",
            "class c: not a valid component: the file is not WebAssembly (a component starts with the bytes \\0asm)",
        ),
        (b"\0asm\x01\0\0\0", "class c: not a valid component: a core WebAssembly module, not a component"),
    ];
    for (bytes, expected) in cases {
        std::fs::write(app.path().join("c.wasm"), bytes).unwrap();
        let err = run_failing(app.path(), &["--listen", "127.0.0.1:0"]);
        let last = err.lines().last().unwrap();
        assert!(last.contains(expected), "{err}");
        assert!(!err.contains("expected `(`"), "{err}");
    }
}
