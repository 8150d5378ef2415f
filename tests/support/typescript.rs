//! The TypeScript guests under `tests/guests-ts`, built with the SDK's
//! `wasmkeep-build` once per test run: a process builds them under a file
//! lock, and one that finds them newer than every source reuses them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::repo;

pub struct TsGuests {
    /// The test actor (`src/probe.ts`).
    pub probe: Vec<u8>,
    /// The test front (`src/front.ts`).
    pub front: Vec<u8>,
}

/// The SDK's directory, its packages installed (once per test run).
pub fn sdk() -> PathBuf {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let sdk = repo().join("platform/sdk/ts");
    INSTALLED.get_or_init(|| {
        let _lock = build_lock();
        npm_install(&sdk);
    });
    sdk
}

/// Held while this process installs or builds: other test processes wait.
fn build_lock() -> std::fs::File {
    std::fs::create_dir_all(repo().join("target")).unwrap();
    let lock = std::fs::File::create(repo().join("target/ts-guests.lock")).unwrap();
    lock.lock().expect("locking the TypeScript guests' build");
    lock
}

pub fn ts_guests() -> &'static TsGuests {
    static GUESTS: OnceLock<TsGuests> = OnceLock::new();
    GUESTS.get_or_init(|| {
        let dir = repo().join("tests/guests-ts");
        let sdk = sdk();
        let _lock = build_lock();
        npm_install(&dir);
        // What a build depends on: the sources, the SDK and both lockfiles
        // (a new toolchain is a new build).
        let sources = newest(&[
            &dir.join("src"),
            &dir.join("package-lock.json"),
            &sdk.join("src"),
            &sdk.join("bin"),
            &sdk.join("wit"),
            &sdk.join("package.json"),
            &sdk.join("package-lock.json"),
        ]);
        let build = |world: &str, entry: &str, out: &str| {
            let out = dir.join("dist").join(out);
            if modified(&out).is_some_and(|built| built > sources) {
                return std::fs::read(&out).unwrap();
            }
            wasmkeep_build(&sdk, &dir, world, Some(entry), &out)
        };
        TsGuests {
            probe: build("actor", "src/probe.ts", "probe.wasm"),
            front: build("front", "src/front.ts", "front.wasm"),
        }
    })
}

/// The npm project at `dir` (its packages installed) built for `world`
/// into `out`, as `wasmkeep dev` builds it: the component's bytes.
pub fn npm_component(dir: &Path, world: &str, out: &Path) -> Vec<u8> {
    let sdk = sdk();
    let _lock = build_lock();
    npm_install(dir);
    wasmkeep_build(&sdk, dir, world, None, out)
}

fn wasmkeep_build(sdk: &Path, dir: &Path, world: &str, entry: Option<&str>, out: &Path) -> Vec<u8> {
    let mut build = Command::new("node");
    build.arg(sdk.join("bin/wasmkeep-build.mjs")).args(["--world", world]);
    if let Some(entry) = entry {
        build.args(["--entry", entry]);
    }
    let status = build.arg("--out").arg(out).arg(dir).status().expect("running node (Node.js 20.19 or later)");
    assert!(status.success(), "building {} failed", dir.display());
    std::fs::read(out).unwrap()
}

/// Installs `dir`'s packages from its lockfile unless they are already.
fn npm_install(dir: &Path) {
    let installed = modified(&dir.join("node_modules/.package-lock.json"));
    if installed.is_some() && installed >= modified(&dir.join("package-lock.json")) {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .status()
        .expect("running npm (the TypeScript tests need Node.js 20.19 or later and npm)");
    assert!(status.success(), "npm ci in {} failed", dir.display());
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification of `paths`, files or everything under directories.
fn newest(paths: &[&Path]) -> SystemTime {
    let mut newest =
        paths.iter().filter(|p| p.is_file()).filter_map(|p| modified(p)).max().unwrap_or(SystemTime::UNIX_EPOCH);
    let mut pending: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).map(|d| d.to_path_buf()).collect();
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if let Ok(m) = meta.modified() {
                newest = newest.max(m);
            }
        }
    }
    newest
}
