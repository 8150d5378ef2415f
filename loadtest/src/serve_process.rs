//! `wasmkeep serve` in its own process, on free ports, its free plan and
//! its limits the scenario's own; and requests to it over fresh
//! connections. What the scenarios that measure a hosted node start.

use std::process::Command;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::load;

/// One request over a fresh connection: its status and body.
pub async fn request(
    addr: &str,
    method: &str,
    host: &str,
    path: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> Result<(u16, String), String> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = hyper::Request::builder().method(method).uri(path).header("host", host);
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let res = sender.send_request(req.body(Full::new(Bytes::from(body))).unwrap()).await.map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn free_port() -> Result<String, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.to_string())
}

/// Starts `serve` with the free plan changed by `plan` (`field`, value)
/// and the limits `limits`; answers the server (its public port) and its
/// API's address. The directory holds its plans, limits and store.
pub fn start(plan: &[(&str, &str)], limits: &str) -> Result<(load::Server, String, tempfile::TempDir), String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let plans = data.path().join("plans");
    std::fs::create_dir_all(&plans).map_err(|e| e.to_string())?;
    let mut free = std::fs::read_to_string(load::repo().join("policies/plans/free.toml")).map_err(|e| e.to_string())?;
    // The free plan as shipped, for tenants the operator puts on it.
    std::fs::write(plans.join("shipped.toml"), &free).map_err(|e| e.to_string())?;
    for (field, value) in plan {
        let line = free.lines().find(|l| l.starts_with(&format!("{field} ="))).ok_or(*field)?.to_owned();
        free = free.replace(&line, &format!("{field} = {value}"));
    }
    std::fs::write(plans.join("free.toml"), free).map_err(|e| e.to_string())?;
    let limits_file = data.path().join("limits.toml");
    std::fs::write(&limits_file, limits).map_err(|e| e.to_string())?;
    let (public, api) = (free_port()?, free_port()?);
    let mut command = Command::new(load::wasmkeep_bin()?);
    command.args(["serve", "--listen", &public, "--api-listen", &api, "--data"]).arg(data.path().join("data"));
    command.arg("--plans").arg(&plans).arg("--limits").arg(&limits_file);
    let server = load::spawn(command, |l| l.strip_prefix("wasmkeep: provisioning API on ").map(|_| public.clone()))?;
    Ok((server, api, data))
}
