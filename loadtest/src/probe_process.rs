//! `wasmkeep dev` in its own process serving the test probe as class
//! `open`, with limits of the scenario's own: what the scenarios that
//! measure the node as users run it start.

use crate::load;

/// Starts the node; the directory holds its app, limits and store.
pub fn start(app: &str, limits: &str) -> Result<(load::Server, tempfile::TempDir), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("probe.wasm"), &wasmkeep_tests::guests().probe).map_err(|e| e.to_string())?;
    let manifest = format!("name = \"{app}\"\n[classes.open]\naccess = \"open\"\ncomponent = \"probe.wasm\"\n");
    std::fs::write(dir.path().join("wasmkeep.toml"), manifest).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("limits.toml"), limits).map_err(|e| e.to_string())?;
    let mut command = std::process::Command::new(load::wasmkeep_bin()?);
    command.arg("dev").arg(dir.path()).args(["--listen", "127.0.0.1:0", "--no-watch", "--data"]);
    command.arg(dir.path().join(".data")).arg("--limits").arg(dir.path().join("limits.toml"));
    Ok((load::spawn(command, load::wasmkeep_addr)?, dir))
}

/// A process's resident memory.
pub fn rss_kib(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS".to_owned())
}
