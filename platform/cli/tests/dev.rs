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
fn start(app: &Path, data: &Path, extra: &[&str]) -> (Child, String) {
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
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("wasmkeep dev ended before serving").unwrap();
        eprintln!("{line}");
        if let Some(rest) = line.split(" on ").nth(1).filter(|_| line.starts_with("wasmkeep: serving")) {
            break rest.trim().to_owned();
        }
    };
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
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
