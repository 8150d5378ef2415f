//! Two people chat through `docs/examples/chat` (and its TypeScript twin,
//! `chat-ts`) in a real browser:
//! headless Chromium (Debian's `chromium`, which `.ci/run` installs)
//! driven over the DevTools protocol, two pages on the real binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` and answers the rest of the first stderr line that
/// starts with `marker`.
fn spawn(mut command: Command, marker: &str) -> (Proc, String) {
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let stderr = child.stderr.take().unwrap();
    let proc = Proc(child);
    let mut lines = BufReader::new(stderr).lines();
    let found = loop {
        let line = lines.next().unwrap_or_else(|| panic!("{command:?} ended before printing {marker:?}")).unwrap();
        if let Some(i) = line.find(marker) {
            break line[i + marker.len()..].trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (proc, found)
}

/// A DevTools protocol connection to the browser.
struct DevTools {
    ws: Ws,
    id: u64,
}

impl DevTools {
    async fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.id += 1;
        let mut msg = json!({ "id": self.id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        loop {
            let answer = tokio::time::timeout(Duration::from_secs(30), self.ws.next()).await.expect("DevTools answers");
            let Some(Ok(Message::Text(text))) = answer else { panic!("DevTools went away: {answer:?}") };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == json!(self.id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// A new page at `url`, answering its session.
    async fn page(&mut self, url: &str) -> String {
        let target = self.call(None, "Target.createTarget", json!({ "url": url })).await;
        let attached =
            self.call(None, "Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true })).await;
        attached["sessionId"].as_str().unwrap().to_owned()
    }

    async fn eval(&mut self, session: &str, expression: &str) -> Value {
        let params = json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let r = self.call(Some(session), "Runtime.evaluate", params).await;
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits until `condition` (JavaScript) is true on the page.
    async fn until(&mut self, session: &str, condition: &str) {
        for _ in 0..150 {
            if self.eval(session, condition).await == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = self.eval(session, "document.body.innerText").await;
        panic!("never true: {condition}; the page shows: {log}");
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chromium() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("Chromium is needed for this test: apt-get install chromium (.ci/run does)")
}

/// Signs `user` in on the page and joins the lobby.
async fn join(browser: &mut DevTools, page: &str, user: &str) {
    browser.until(page, "document.readyState === 'complete' && !!document.querySelector('#login')").await;
    let script = format!(
        "document.querySelector('#login [name=user]').value = '{user}'; document.querySelector('#login').requestSubmit(); true"
    );
    browser.eval(page, &script).await;
    browser.until(page, "document.body.dataset.state === 'joined'").await;
}

async fn say(browser: &mut DevTools, page: &str, text: &str) {
    let script = format!(
        "document.querySelector('#say [name=text]').value = '{text}'; document.querySelector('#say').requestSubmit(); true"
    );
    browser.eval(page, &script).await;
}

fn shows(line: &str) -> String {
    format!("[...document.querySelectorAll('#log li')].some(l => l.textContent === '{line}')")
}

#[tokio::test]
async fn two_pages_in_chromium_chat_with_each_other() {
    chat_in_chromium("docs/examples/chat").await;
}

#[tokio::test]
async fn two_pages_in_chromium_chat_through_the_typescript_chat() {
    chat_in_chromium("docs/examples/chat-ts").await;
}

/// Two pages of the chat example at `example` chat in headless Chromium.
async fn chat_in_chromium(example: &str) {
    let data = tempfile::tempdir().unwrap();
    let mut node = Command::new(env!("CARGO_BIN_EXE_wasmkeep"));
    node.arg("dev").arg(repo().join(example)).args(["--listen", "127.0.0.1:0", "--data"]).arg(data.path());
    node.args(["--value", "TOKEN_SECRET=browser test secret"]);
    let (_node, served) = spawn(node, "wasmkeep: serving ");
    let url = served.rsplit(" on ").next().unwrap().to_owned();

    let profile = tempfile::tempdir().unwrap();
    let mut browser = Command::new(chromium());
    browser
        .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--remote-debugging-port=0", "about:blank"])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    let (_browser, devtools) = spawn(browser, "DevTools listening on ");
    let ws = tokio_tungstenite::connect_async(devtools).await.expect("DevTools connects").0;
    let mut browser = DevTools { ws, id: 0 };

    let ann = browser.page(&format!("{url}/")).await;
    let bob = browser.page(&format!("{url}/")).await;
    join(&mut browser, &ann, "ann").await;
    join(&mut browser, &bob, "bob").await;
    say(&mut browser, &ann, "hello from ann").await;
    browser.until(&bob, &shows("ann: hello from ann")).await;
    browser.until(&ann, &shows("ann: hello from ann")).await;
    say(&mut browser, &bob, "hi ann").await;
    browser.until(&ann, &shows("bob: hi ann")).await;
}
