//! Redeploys while `wasmkeep dev` serves
//! (docs/spec/actors-and-admission.md §7): when the app's sources change
//! (checked every second) or on SIGHUP, the app is rebuilt and its new
//! version activated. A failed build or deploy is reported and the running
//! version keeps serving.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{SignalKind, signal};
use wasmkeep_actors::Node;

use crate::dev::{DEV_TENANT, version_spec};
use crate::manifest;

/// How often the sources are checked.
const POLL: Duration = Duration::from_secs(1);

/// Runs until the process ends. `seen` is the sources as they were
/// deployed: taken before serving, so no change made after is missed.
pub async fn run(node: Node, app_dir: PathBuf, app_name: String, watch: bool, mut seen: Sources) {
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("wasmkeep: SIGHUP will not redeploy: {e}");
            None
        }
    };
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            _ = tick.tick(), if watch => {
                let now = fingerprint(&app_dir);
                if now == seen {
                    continue;
                }
                eprintln!("wasmkeep: the app changed; redeploying");
            }
            Some(()) = async { hangup.as_mut()?.recv().await }, if hangup.is_some() => {
                eprintln!("wasmkeep: SIGHUP; redeploying");
            }
        }
        // Taken before the build: an edit saved while it runs is a change
        // the next tick redeploys, never one taken for deployed.
        let building = fingerprint(&app_dir);
        match redeploy(&node, &app_dir, &app_name).await {
            Ok(version) => eprintln!("wasmkeep: serving {app_name} version {version}"),
            Err(e) => eprintln!("wasmkeep: redeploy failed, still serving the previous version: {e}"),
        }
        seen = settled(building, &app_dir);
    }
}

/// Files a build writes itself (cargo's and npm's lockfiles): a build that
/// makes or updates one has not changed the app.
fn written_by_builds(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "Cargo.lock" || n == "package-lock.json")
}

/// The sources as a build that started at `before` left them: `before`,
/// with the files builds write as they are now.
pub fn settled(before: Sources, dir: &Path) -> Sources {
    let mut sources: Sources = before.into_iter().filter(|(p, ..)| !written_by_builds(p)).collect();
    sources.extend(fingerprint(dir).into_iter().filter(|(p, ..)| written_by_builds(p)));
    sources.sort();
    sources
}

async fn redeploy(node: &Node, app_dir: &Path, app_name: &str) -> Result<i64, String> {
    let dir = app_dir.to_path_buf();
    let (manifest, spec) = tokio::task::spawn_blocking(move || {
        let manifest = manifest::load(&dir)?;
        let spec = version_spec(&manifest, &dir)?;
        Ok::<_, String>((manifest, spec))
    })
    .await
    .map_err(|e| format!("the build stopped: {e}"))??;
    if manifest.name != app_name {
        return Err(format!("the app's name changed to {}; restart wasmkeep dev to serve it", manifest.name));
    }
    let deployed = node.deploy(DEV_TENANT, app_name, spec).await.map_err(|e| e.to_string())?;
    Ok(deployed.version)
}

/// The app's source files, each with its size and modification time.
pub type Sources = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// Every source file under `dir` with its size and modification time;
/// build output (`target`, `dist`), installed packages (`node_modules`)
/// and hidden directories (the node's data) are not sources.
pub fn fingerprint(dir: &Path) -> Sources {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                let skipped = ["target", "dist", "node_modules"].iter().any(|s| name == *s);
                if !skipped && !name.to_string_lossy().starts_with('.') {
                    pending.push(entry.path());
                }
            } else {
                files.push((entry.path(), meta.len(), meta.modified().ok()));
            }
        }
    }
    files.sort();
    files
}
