//! `wasmkeep tail APP`: an app's guests' lines as they are written, like
//! `tail -f` (the provisioning API's `/v1/apps/{app}/logs?follow=true`).

use serde_json::Value;

use super::{Api, ApiArgs};

#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// The app whose logs to show.
    pub app: String,
    /// Only this class's actors' lines.
    #[arg(long)]
    pub class: Option<String>,
    /// Only this actor's lines (with --class).
    #[arg(long, requires = "class")]
    pub name: Option<String>,
    /// Print the lines the node kept, then stop.
    #[arg(long)]
    pub no_follow: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}

pub async fn tail(args: TailArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let mut query = vec![("follow", (!args.no_follow).to_string())];
    query.extend(args.class.clone().map(|c| ("class", c)));
    query.extend(args.name.clone().map(|n| ("name", n)));
    let path = format!("/v1/apps/{}/logs?{}", wasmkeep_core::names::encode(&args.app), super::url_query(&query));
    let mut answer = api.open(&path).await?;
    if !args.no_follow {
        eprintln!("wasmkeep: tailing {} (ctrl-c to stop)", args.app);
    }
    let mut pending = Vec::new();
    loop {
        let chunk = tokio::select! {
            chunk = answer.chunk() => chunk.map_err(|e| format!("{}: the tail broke off: {e}", api.base()))?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Some(chunk) = chunk else { break };
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            let line = String::from_utf8_lossy(&line[..at]);
            // `--json`: the records as the API gives them, one a line.
            if args.api.json {
                println!("{line}");
            } else if let Ok(record) = serde_json::from_str::<Value>(&line) {
                println!("{}", human(&record));
            }
        }
    }
    if !args.no_follow {
        eprintln!("wasmkeep: the node ended the tail (it is stopping)");
    }
    Ok(())
}

/// A record as a person reads it: `time  class/name  stream  line  trace`.
fn human(r: &Value) -> String {
    if let Some(n) = r["missed"].as_u64() {
        return format!("… {n} lines missed: this tail read slower than the app logged");
    }
    let who = match (r["class"].as_str(), r["name"].as_str()) {
        (Some(class), Some(name)) => format!("{class}/{name}"),
        _ => "front".to_owned(),
    };
    let mut out = format!(
        "{}  {who}  {}  {}",
        utc(r["time_ms"].as_u64().unwrap_or(0)),
        r["stream"].as_str().unwrap_or(""),
        r["line"].as_str().unwrap_or("")
    );
    if r["truncated"].as_bool() == Some(true) {
        out.push_str(" [cut at 16 KiB]");
    }
    if let Some(n) = r["dropped_before"].as_u64() {
        out.push_str(&format!(" [{n} lines before this dropped by the rate limit]"));
    }
    if let Some(trace) = r["trace_id"].as_str() {
        out.push_str(&format!("  trace={trace}"));
    }
    out
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn utc(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    let (year, month, day) = wasmkeep_core::period::civil(days);
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(1_796_126_645_123), "2026-12-01T12:04:05.123Z");
    }

    #[test]
    fn a_record_reads_as_one_line() {
        let r = serde_json::json!({"time_ms": 0, "class": "room", "name": "lobby", "stream": "stdout",
            "line": "hi", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"});
        assert_eq!(
            human(&r),
            "1970-01-01T00:00:00.000Z  room/lobby  stdout  hi  trace=4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let front = serde_json::json!({"time_ms": 0, "class": null, "name": null, "stream": "stderr", "line": "x",
            "dropped_before": 3, "trace_id": null});
        assert_eq!(
            human(&front),
            "1970-01-01T00:00:00.000Z  front  stderr  x [3 lines before this dropped by the rate limit]"
        );
    }
}
