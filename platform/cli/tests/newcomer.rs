//! A newcomer's path, in a temporary directory outside this checkout, as
//! `docs/getting-started.md` walks it: the CLI installed on the PATH, the
//! SDKs as their packages (`cargo package`, `npm pack`), `wasmkeep init` of
//! a Rust and a TypeScript app, each run with `dev`, then deployed to
//! `serve` after `signup` and `login`, changed, rolled back and removed.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::{Serve, repo};
use serde_json::Value;

/// The newcomer's machine: a home outside the checkout with the CLI in
/// `bin/`, the packaged SDKs in `sdk/`, and the credentials in `config/`.
struct Machine {
    home: tempfile::TempDir,
    rust_sdk: PathBuf,
    ts_sdk: PathBuf,
}

impl Machine {
    fn bin(&self) -> PathBuf {
        self.home.path().join("bin")
    }

    /// Runs `wasmkeep ARGS` in `dir` as the newcomer would: the installed
    /// binary found on the PATH, no variable of this checkout's, the
    /// credentials of `user` (each their own config directory).
    fn wasmkeep(&self, user: &str, dir: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        common::run_cli(self.command(user, dir, args), args, stdin)
    }

    fn command(&self, user: &str, dir: &Path, args: &[&str]) -> Command {
        let path = format!("{}:{}", self.bin().display(), std::env::var("PATH").unwrap_or_default());
        let mut command = Command::new("wasmkeep");
        command
            .args(args)
            .current_dir(dir)
            .env("PATH", path)
            .env("WASMKEEP_CONFIG_DIR", self.home.path().join("config").join(user))
            .env_remove("WASMKEEP_API")
            .env_remove("WASMKEEP_TOKEN")
            // The toolchain the checkout pins, which has the wasm32-wasip2
            // target (a newcomer's default one would, after `rustup target
            // add`).
            .env("RUSTUP_TOOLCHAIN", toolchain());
        // cargo's own variables for this test would point the apps' builds
        // at this checkout.
        for (name, _) in std::env::vars() {
            if name.starts_with("CARGO_") && name != "CARGO_HOME" || name == "CARGO" {
                command.env_remove(name);
            }
        }
        // The apps' builds in one place, kept between test runs.
        command.env("CARGO_TARGET_DIR", repo().join("target/newcomer"));
        command
    }
}

/// The channel `rust-toolchain.toml` pins.
fn toolchain() -> String {
    let text = std::fs::read_to_string(repo().join("rust-toolchain.toml")).unwrap();
    let value: toml::Value = toml::from_str(&text).unwrap();
    value["toolchain"]["channel"].as_str().unwrap().to_owned()
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{command:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The machine, set up once: the CLI installed by `cargo install --path
/// platform/cli` into its `bin/` (on the PATH), the Rust SDK packaged
/// and unpacked as cargo would fetch it, the TypeScript SDK packed.
fn machine() -> &'static Machine {
    static MACHINE: OnceLock<Machine> = OnceLock::new();
    MACHINE.get_or_init(|| {
        let home = tempfile::Builder::new().prefix("wasmkeep-newcomer-").tempdir().unwrap();
        assert!(!home.path().starts_with(repo().canonicalize().unwrap()), "the machine is outside the checkout");
        // The CLI installed as the README says. `--debug`, `--offline` and
        // this run's target directory make it the binary this test run
        // built (cargo finds it fresh and copies it; a release build would
        // compile everything again), installed by cargo into `bin/`.
        let built = PathBuf::from(env!("CARGO_BIN_EXE_wasmkeep"));
        let target_dir = built.parent().and_then(Path::parent).unwrap();
        run(Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["install", "--path", "platform/cli", "--locked", "--debug", "--offline", "--quiet", "--root"])
            .arg(home.path())
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(repo()));
        assert!(home.path().join("bin/wasmkeep").is_file(), "cargo install put wasmkeep in bin/");
        let sdk = home.path().join("sdk");
        std::fs::create_dir_all(&sdk).unwrap();
        // The crate as `cargo publish` would upload it: its WIT inside.
        let packaged = home.path().join("package");
        run(Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["package", "-p", "wasmkeep-sdk", "--no-verify", "--allow-dirty", "--quiet", "--target-dir"])
            .arg(&packaged)
            .current_dir(repo()));
        let crate_file = std::fs::read_dir(packaged.join("package"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "crate"))
            .expect("cargo package made a .crate");
        run(Command::new("tar").arg("xzf").arg(&crate_file).arg("-C").arg(&sdk));
        let rust_sdk = std::fs::read_dir(&sdk).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
        assert!(rust_sdk.join("wit/actor.wit").is_file(), "the packaged crate holds its WIT");
        let packed = run(Command::new("npm")
            .args(["pack", "--quiet", "--pack-destination"])
            .arg(&sdk)
            .current_dir(repo().join("platform/sdk/ts")));
        let ts_sdk = sdk.join(packed.trim());
        assert!(ts_sdk.is_file(), "npm pack made {}", ts_sdk.display());
        Machine { home, rust_sdk, ts_sdk }
    })
}

/// `wasmkeep dev` in `dir` on a free port: the process and its URL.
fn dev(m: &Machine, dir: &Path) -> (KillOnDrop, String) {
    let mut child = m
        .command("dev", dir, &["dev", "--listen", "127.0.0.1:0", "--no-watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let node = KillOnDrop(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("wasmkeep dev ended before serving").unwrap();
        eprintln!("{line}");
        if let Some(rest) = line.split(" on ").nth(1).filter(|_| line.starts_with("wasmkeep: serving")) {
            break rest.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (node, url)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn get(url: &str, host: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new().get(url).timeout(Duration::from_secs(60));
    if let Some(host) = host {
        req = req.header("host", host);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// One language's whole path: init, dev, deploy, change, roll back, remove.
async fn the_path(lang: &str, app: &str, front_source: &str) {
    let m = machine();
    let apps = m.home.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    let sdk = match lang {
        "rust" => m.rust_sdk.display().to_string(),
        _ => m.ts_sdk.display().to_string(),
    };
    let (ok, out, err) =
        m.wasmkeep(app, &apps, &["init", app, "--lang", lang, "--template", "front", "--sdk", &sdk], None);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("cd {app} && wasmkeep dev"));
    let dir = apps.join(app);
    // A second init of the same name touches nothing.
    let (ok, _, err) = m.wasmkeep(app, &apps, &["init", app, "--lang", lang], None);
    assert!(!ok && err.contains("already exists"), "{err}");

    // `dev` at once: the front calls the internal counter.
    {
        let (_dev, url) = dev(m, &dir);
        assert_eq!(get(&format!("{url}/visits/ann"), None).await, (200, "1".into()));
        assert_eq!(get(&format!("{url}/visits/ann"), None).await, (200, "2".into()));
        assert_eq!(get(&format!("{url}/actor/counter/ann/"), None).await.0, 403, "the counter is internal");
    }

    // A hosted node: sign up as one user, log in with the token as another
    // (another machine), deploy with neither --api nor a token.
    let data = tempfile::tempdir().unwrap();
    let serve = Serve::start(data.path(), &[]);
    let tenant = format!("t{}", &app[..app.len().min(20)].replace('-', ""));
    let signer = format!("{app}-signup");
    let (ok, out, err) = m.wasmkeep(&signer, &apps, &["signup", &tenant, "--api", &serve.api], None);
    assert!(ok, "{err}");
    let token = out.lines().last().unwrap().trim().to_owned();
    let (ok, _, err) = m.wasmkeep(app, &apps, &["login", "--api", &serve.api], Some(&format!("{token}\n")));
    assert!(ok && err.contains(&format!("logged in to {} as tenant {tenant}", serve.api)), "{err}");
    let (ok, out, err) = m.wasmkeep(app, &apps, &["whoami"], None);
    assert!(ok && out.starts_with(&format!("tenant {tenant} at {}", serve.api)), "{out}{err}");
    let (ok, out, err) = m.wasmkeep(app, &dir, &["deploy"], None);
    assert!(ok, "{err}");
    let url = out.trim().to_owned();
    let host = format!("{app}.{tenant}.localhost");
    assert!(url.starts_with(&format!("http://{host}:")), "{url}");
    let public = format!("http://{}", serve.public);
    assert_eq!(get(&format!("{public}/visits/bo"), Some(&host)).await, (200, "1".into()));
    let (_, hello) = get(&format!("{public}/"), Some(&host)).await;
    assert!(hello.starts_with("hello:"), "{hello}");

    // A change, deployed as version 2; then rolled back to 1.
    let source = dir.join(front_source);
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(&source, text.replace("hello: GET", "hello again: GET")).unwrap();
    let (ok, _, err) = m.wasmkeep(app, &dir, &["deploy"], None);
    assert!(ok && err.contains("version 2 of"), "{err}");
    assert!(get(&format!("{public}/"), Some(&host)).await.1.starts_with("hello again:"));
    let (ok, out, _) = m.wasmkeep(app, &apps, &["versions", "ls", app, "--json"], None);
    assert!(ok);
    let active: Vec<(i64, bool)> = json(&out)["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["version"].as_i64().unwrap(), v["active"].as_bool().unwrap()))
        .collect();
    assert_eq!(active, [(1, false), (2, true)]);
    let (ok, out, _) = m.wasmkeep(app, &apps, &["versions", "ls", app], None);
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, ["1\t-\tfront, classes counter", "2\tactive\tfront, classes counter"], "{out}");
    let (ok, _, err) = m.wasmkeep(app, &apps, &["rollback", app], None);
    assert!(ok && err.contains(&format!("version 1 of {app} is active (was 2)")), "{err}");
    assert!(get(&format!("{public}/"), Some(&host)).await.1.starts_with("hello:"));
    // The counter kept its count across the versions.
    assert_eq!(get(&format!("{public}/visits/bo"), Some(&host)).await, (200, "2".into()));
    // Forward again, by its number.
    let (ok, _, err) = m.wasmkeep(app, &apps, &["rollback", app, "2"], None);
    assert!(ok && err.contains(&format!("version 2 of {app} is active (was 1)")), "{err}");
    assert!(get(&format!("{public}/"), Some(&host)).await.1.starts_with("hello again:"));

    // Removed: asked first, so refused off a terminal without --yes.
    let (ok, _, err) = m.wasmkeep(app, &apps, &["apps", "rm", app], None);
    assert!(!ok && err.contains("pass --yes"), "{err}");
    let (ok, _, err) = m.wasmkeep(app, &apps, &["apps", "rm", app, "--yes"], None);
    assert!(ok, "{err}");
    let (ok, out, _) = m.wasmkeep(app, &apps, &["apps", "ls", "--json"], None);
    assert!(ok);
    assert_eq!(json(&out)["apps"], serde_json::json!([]));
    assert_eq!(get(&format!("{public}/"), Some(&host)).await.0, 404);
}

#[tokio::test]
async fn a_rust_app_from_init_to_rollback_outside_the_checkout() {
    the_path("rust", "visits-rs", "front/src/lib.rs").await;
}

#[tokio::test]
async fn a_typescript_app_from_init_to_rollback_outside_the_checkout() {
    the_path("ts", "visits-ts", "front/src/front.ts").await;
}
