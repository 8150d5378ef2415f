//! Building an app's components with cargo, for `wasm32-wasip2`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::io::BufRead;

pub const TARGET: &str = "wasm32-wasip2";

/// Adds the `wasm32-wasip2` target with rustup when it is missing, saying so.
pub fn ensure_target(dir: &Path) -> Result<(), String> {
    let Ok(installed) = Command::new("rustup").args(["target", "list", "--installed"]).current_dir(dir).output() else {
        // No rustup: a toolchain installed otherwise may have the target;
        // if not, cargo says so.
        return Ok(());
    };
    if String::from_utf8_lossy(&installed.stdout).lines().any(|l| l.trim() == TARGET) {
        return Ok(());
    }
    eprintln!("wasmkeep: adding the {TARGET} target (rustup target add {TARGET})");
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .current_dir(dir)
        .status()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !status.success() {
        return Err(format!("rustup target add {TARGET} failed ({status})"));
    }
    Ok(())
}

/// Builds the cargo project at `dir` and answers the component it made.
/// cargo's own progress goes to the terminal.
pub fn cargo_component(dir: &Path) -> Result<PathBuf, String> {
    eprintln!("wasmkeep: building {} (cargo build --release --target {TARGET})", dir.display());
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", TARGET, "--message-format=json-render-diagnostics"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run cargo in {}: {e}", dir.display()))?;
    let mut wasm = None;
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in std::io::BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" {
            let local = msg["package_id"].as_str().is_some_and(|id| id.starts_with("path+file://"));
            let files = msg["filenames"].as_array().into_iter().flatten().filter_map(|f| f.as_str());
            for f in files.filter(|f| f.ends_with(".wasm")) {
                if local {
                    wasm = Some(PathBuf::from(f));
                }
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo in {}: {e}", dir.display()))?;
    if !status.success() {
        return Err(format!("building {} failed ({status}); cargo's messages are above", dir.display()));
    }
    wasm.ok_or_else(|| format!("building {} made no .wasm component; is it a `cdylib` crate?", dir.display()))
}
