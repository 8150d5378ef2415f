//! A broadcast through a room whose sockets are relayed
//! (docs/spec/sockets.md §15): three nodes in this process
//! (`wasmkeep_tests::cluster`), two rooms owned by node `a`. The sockets of
//! one room connect through the public ports of `b` and `c`, half each:
//! their opens are relayed to `a` over QUIC, the sockets live on `a`, and
//! `b` and `c` copy bytes between each client and its stream. The other
//! room's sockets all connect to `a`'s port. One client of a room sends
//! `all:<64 bytes>` (the probe sends the 64 bytes to each of the room's
//! sockets); timed until every client has them, rounds alternating between
//! the rooms. The clients run on a thread of their own (one thread, as
//! `sockets-broadcast`'s load generator), the nodes on two runtime threads.

use std::time::Duration;

use wasmkeep_actors::Request;
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::{AppId, Origin, RawAddress};
use wasmkeep_tests::cluster::{Member, cluster, forwarded};

use crate::sockets::clients_at;
use crate::{flag, stats};

/// Wakes `actor` through `m`, which then owns it.
async fn own(m: &Member, app: AppId, actor: &str) -> Result<(), String> {
    let ping = Request { method: "GET".into(), path: "/ping".into(), headers: vec![], body: vec![] };
    let target = RawAddress::split(actor).map_err(|e| format!("{actor}: {e:?}"))?;
    let r = m.node.request_to(app, target, Origin::Outside, ping).await.map_err(|e| e.to_string())?;
    if r.status != 200 {
        return Err(format!("{actor} answered {}", r.status));
    }
    Ok(())
}

/// UDP datagrams the kernel dropped for want of room in a socket's
/// receive buffer, machine-wide (`RcvbufErrors` in `/proc/net/snmp`): the
/// hops' QUIC packets lost on loopback.
fn udp_receive_drops() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// What the clients measured.
struct Measured {
    relayed: Vec<Duration>,
    direct: Vec<Duration>,
    /// [`udp_receive_drops`] during the rounds.
    drops: Option<u64>,
}

/// The clients' side, on a thread of its own: both rooms' clients, then
/// `n` rounds of each, alternating.
fn measure(
    relayed_urls: Vec<String>,
    direct_urls: Vec<String>,
    n: usize,
    owner: &wasmkeep_actors::Node,
) -> Result<Measured, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let payload = format!("all:{}", "x".repeat(64));
        let mut relayed = clients_at(relayed_urls.iter().map(String::as_str)).await?;
        let mut direct = clients_at(direct_urls.iter().map(String::as_str)).await?;
        let open = owner.open_sockets();
        if open != relayed_urls.len() + direct_urls.len() {
            return Err(format!(
                "{open} sockets on the rooms' owner, {} opened",
                relayed_urls.len() + direct_urls.len()
            ));
        }
        // Warm both (the rooms may have hibernated while the sockets
        // opened), then alternate.
        relayed.round(&payload).await?;
        direct.round(&payload).await?;
        let (mut through, mut straight) = (Vec::new(), Vec::new());
        let drops = udp_receive_drops();
        for _ in 0..n {
            through.push(relayed.round(&payload).await?);
            straight.push(direct.round(&payload).await?);
        }
        let drops = udp_receive_drops().zip(drops).map(|(after, before)| after - before);
        relayed.close().await;
        direct.close().await;
        Ok(Measured { relayed: through, direct: straight, drops })
    })
}

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 30)?;
    let sockets: usize = flag(args, "--sockets", 1000)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let (_dir, m, app) = cluster(&["a", "b", "c"]).await;
        let (a, b, c) = (&m[0], &m[1], &m[2]);
        own(a, app, "open/relayed").await?;
        own(a, app, "open/direct").await?;
        let url = |m: &Member, room: &str| format!("ws://{}/actor/open/{room}/ws?quiet", m.addr);
        let relayed_urls = (0..sockets).map(|i| url(if i % 2 == 0 { b } else { c }, "relayed")).collect();
        let direct_urls = (0..sockets).map(|_| url(a, "direct")).collect();
        let (done, result) = tokio::sync::oneshot::channel();
        let owner = a.node.clone();
        std::thread::spawn(move || {
            let _ = done.send(measure(relayed_urls, direct_urls, n, &owner));
        });
        let Measured { relayed: through, direct: straight, drops } =
            result.await.map_err(|_| "the clients' thread ended".to_string())??;
        let upgrades = forwarded(b, HopKind::Upgrade) + forwarded(c, HopKind::Upgrade);
        if upgrades != sockets as u64 || forwarded(a, HopKind::Upgrade) != 0 {
            return Err(format!("{upgrades} opens relayed by b and c for {sockets} sockets"));
        }
        let (through, straight) = (stats::summarize(through), stats::summarize(straight));
        println!(
            "cluster-broadcast: 64 bytes to {sockets} sockets of a room on node a, 3 nodes in one process, {n} rounds, one run"
        );
        println!("  relayed (clients on b and c) {through}");
        println!("  direct (clients on a)        {straight}");
        println!(
            "  relayed / direct: {:.2}x (p50), {:.2}x (p90)",
            through.p50.as_secs_f64() / straight.p50.as_secs_f64(),
            through.p90.as_secs_f64() / straight.p90.as_secs_f64()
        );
        if let Some(drops) = drops {
            println!("  UDP datagrams dropped on receive during the rounds (machine-wide RcvbufErrors): {drops}");
        }
        Ok(())
    })
}
