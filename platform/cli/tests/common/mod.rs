//! What the tests of `wasmkeep serve` share: a running `serve`, its API,
//! its public port, and an app to deploy.
#![allow(dead_code)]

pub mod raw;
#[allow(unused_imports)]
pub use raw::*;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use wasmkeep_tests::guests;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A running `wasmkeep serve`, killed when dropped.
pub struct Serve {
    pub child: Child,
    pub api: String,
    pub public: SocketAddr,
    pub data: PathBuf,
    /// Everything it logged so far.
    pub log: Arc<Mutex<String>>,
    /// `/metrics`, when it was asked to serve them.
    pub metrics: Option<String>,
    /// The flags it was started with beyond the usual ones.
    pub extra: Vec<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    pub fn start(data: &Path, extra: &[&str]) -> Self {
        Self::start_with(data, extra, &[])
    }

    /// As [`Serve::start`], with variables `env` set for it.
    pub fn start_with(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_as(data, extra, env, None)
    }

    /// As [`Serve::start`], the process limited to `descriptors` open
    /// files (soft and hard), as an operator's `ulimit -n` would.
    pub fn start_with_descriptors(data: &Path, extra: &[&str], descriptors: u64) -> Self {
        Self::start_as(data, extra, &[], Some(descriptors))
    }

    fn start_as(data: &Path, extra: &[&str], env: &[(&str, &str)], descriptors: Option<u64>) -> Self {
        let api_listen: &[&str] = if extra.contains(&"--api-listen") { &[] } else { &["--api-listen", "127.0.0.1:0"] };
        let mut command = Command::new(env!("CARGO_BIN_EXE_wasmkeep"));
        if let Some(n) = descriptors {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure only calls `setrlimit`, which is
            // async-signal-safe, between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(api_listen)
            .arg("--data")
            .arg(data)
            .args(if extra.contains(&"--plans") {
                vec![]
            } else {
                vec!["--plans".into(), repo().join("policies/plans")]
            })
            .args(extra)
            .env("WASMKEEP_LOG", "info")
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let (mut api, mut public, mut metrics) = (None, None, None);
        while api.is_none() || public.is_none() {
            let line = lines.next().expect("wasmkeep serve ended before serving").unwrap();
            eprintln!("{line}");
            log.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.strip_prefix("wasmkeep: provisioning API on ") {
                api = Some(rest.split_whitespace().next().unwrap().trim_end_matches("/v1").to_owned());
            }
            if let Some(rest) = line.strip_prefix("wasmkeep: metrics on ") {
                metrics = Some(rest.trim().to_owned());
            }
            if let Some(rest) = line.strip_prefix("wasmkeep: serving ") {
                let addr = rest.split("://").nth(1).unwrap().split_whitespace().next().unwrap();
                public = Some(addr.parse().unwrap());
            }
        }
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let extra = extra.iter().map(|s| s.to_string()).collect();
        Self { child, api: api.unwrap(), public: public.unwrap(), data: data.to_path_buf(), log, metrics, extra }
    }

    /// Stops it and starts it again on the same data and API address (a
    /// client's saved login names the API by its URL).
    pub fn restart(self) -> Self {
        let (data, api) = (self.data.clone(), self.api.trim_start_matches("http://").to_owned());
        let mut extra: Vec<String> = vec!["--api-listen".into(), api];
        let mut kept = self.extra.iter();
        while let Some(flag) = kept.next() {
            if flag == "--api-listen" {
                kept.next();
            } else {
                extra.push(flag.clone());
            }
        }
        self.stop();
        Self::start(&data, &extra.iter().map(String::as_str).collect::<Vec<_>>())
    }

    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn operator_token(&self) -> String {
        std::fs::read_to_string(self.data.join("operator-token")).unwrap().trim().to_owned()
    }

    /// An API request: its status, its JSON (or Null) and its raw text.
    pub async fn api(&self, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let (status, text) = self.api_raw(method, path, token, body.map(|b| b.to_string().into_bytes())).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn api_raw(&self, method: &str, path: &str, token: Option<&str>, body: Option<Vec<u8>>) -> (u16, String) {
        let client = reqwest::Client::new();
        let mut req = client.request(method.parse().unwrap(), format!("{}{path}", self.api));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        let r = req.timeout(Duration::from_secs(60)).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        RESPONSES.lock().unwrap().push_str(&text);
        (status, text)
    }

    /// A request to the public port for `host`.
    pub async fn public(&self, host: &str, path: &str) -> (u16, String) {
        let (status, _, text) = self.public_with_retry(host, path).await;
        (status, text)
    }

    /// As `public`, with the answer's `Retry-After`.
    pub async fn public_with_retry(&self, host: &str, path: &str) -> (u16, Option<String>, String) {
        let r = reqwest::Client::new()
            .get(format!("http://{}{path}", self.public))
            .header("host", host)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap();
        let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        (r.status().as_u16(), retry, r.text().await.unwrap())
    }

    /// A `PUT` of `body` to the public port.
    pub async fn public_put(&self, host: &str, path: &str, body: Vec<u8>) -> (u16, String) {
        let r = reqwest::Client::new()
            .put(format!("http://{}{path}", self.public))
            .header("host", host)
            .body(body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// The value of one sample of `/metrics`.
    pub async fn metric(&self, sample: &str) -> f64 {
        let text = reqwest::get(self.metrics.as_ref().unwrap()).await.unwrap().text().await.unwrap();
        text.lines().find_map(|l| l.strip_prefix(sample)?.trim().parse().ok()).unwrap_or(0.0)
    }
}

/// Every API answer any test read, to search for secrets in.
pub static RESPONSES: Mutex<String> = Mutex::new(String::new());

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A bundle: the probe as class `probe` (open), the hello front.
pub fn bundle() -> Vec<u8> {
    bundle_with_front(&guests().hello_front)
}

/// A bundle: the probe as class `probe` (open), `front` as the front.
pub fn bundle_with_front(front: &[u8]) -> Vec<u8> {
    json!({
        "manifest": {"front": "web", "classes": {"probe": {"access": "open", "component": "probe"}}},
        "components": {"web": b64(front), "probe": b64(&guests().probe)},
    })
    .to_string()
    .into_bytes()
}

/// Counts one more on probe actor `name` of the app at `host`.
pub async fn count(s: &Serve, host: &str, name: &str) -> i64 {
    let (status, text) = s.public(host, &format!("/actor/probe/{name}/count")).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str::<Value>(&text).unwrap()["count"].as_i64().unwrap()
}

pub async fn signup(s: &Serve, name: &str) -> String {
    let (status, body) = s.api("POST", "/v1/tenants", None, Some(json!({"name": name}))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["tenant"], name);
    body["token"].as_str().unwrap().to_owned()
}

/// Creates app `app`, uploads the bundle and activates it.
pub async fn deploy(s: &Serve, token: &str, app: &str) {
    deploy_bundle(s, token, app, bundle()).await
}

/// Creates app `app`, uploads `bundle` and activates it.
pub async fn deploy_bundle(s: &Serve, token: &str, app: &str, bundle: Vec<u8>) {
    assert_eq!(s.api("PUT", &format!("/v1/apps/{app}"), Some(token), None).await.0, 201);
    let (status, text) = s.api_raw("POST", &format!("/v1/apps/{app}/versions"), Some(token), Some(bundle)).await;
    assert_eq!(status, 201, "{text}");
    let version: Value = serde_json::from_str(&text).unwrap();
    let n = version["version"].as_i64().unwrap();
    let (status, body) = s.api("POST", &format!("/v1/apps/{app}/versions/{n}/activate"), Some(token), None).await;
    assert_eq!(status, 200, "{body}");
}

/// Runs the `wasmkeep` CLI against `s`'s API with its saved login in
/// `config`: whether it succeeded, its output and its errors.
pub fn cli(s: &Serve, config: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmkeep"));
    command.args(args).env("WASMKEEP_API", &s.api).env("WASMKEEP_CONFIG_DIR", config).env_remove("WASMKEEP_TOKEN");
    run_cli(command, args, stdin)
}

/// Runs a CLI `command` (of `args`) with `stdin` as its input: whether it
/// succeeded, its output and its errors (shown in the test's own output).
pub fn run_cli(mut command: Command, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    eprintln!("$ wasmkeep {}\n{stderr}{stdout}", args.join(" "));
    (out.status.success(), stdout, stderr)
}
