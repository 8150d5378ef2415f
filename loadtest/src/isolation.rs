//! Isolation: another actor's latency while guests compute without end.
//! `wasmkeep dev` in its own process; an actor answering `/ping` loaded
//! by a few keep-alive connections, alone, then with two, then four
//! actors running `loop {}` (their wall set past the run). Goal: that
//! actor's p99 with the loops within 2x of its p99 alone, in one run.

use std::time::Duration;

use crate::{flag, load, probe_process, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 5.0)?;
    let conns: usize = flag(args, "--conns", 4)?;
    // `--busy-guests 100` opens the CPU gate wide: what yielding alone does.
    let busy: u32 = flag(args, "--busy-guests", 0)?;
    let limits = format!("wall_per_event_secs = 300.0\nfront_wall_secs = 300.0\nbusy_guests_at_once = {busy}\n");
    let (server, _dir) = probe_process::start("isolation", &limits)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let length = Duration::from_secs_f64(secs);
        let phase = |loops: usize| {
            let addr = server.addr.clone();
            async move {
                let run = load::run(&addr, "/actor/open/quiet/ping", conns, length).await?;
                Ok::<_, String>((loops, run))
            }
        };
        let mut looping = Vec::new();
        let mut start_loops = |n: usize| {
            for _ in 0..n {
                let i = looping.len();
                let addr = server.addr.clone();
                looping.push(tokio::spawn(async move {
                    let _ = load::run(&addr, &format!("/actor/open/loop{i}/loop"), 1, Duration::ZERO).await;
                }));
            }
        };
        let mut runs = vec![phase(0).await?];
        start_loops(2);
        tokio::time::sleep(Duration::from_millis(300)).await;
        runs.push(phase(2).await?);
        start_loops(2);
        tokio::time::sleep(Duration::from_millis(300)).await;
        runs.push(phase(4).await?);
        let alone_p99 = stats::summarize(runs[0].1.samples.clone()).p99;
        println!(
            "isolation: /actor/open/quiet/ping, {conns} connections, {secs} s a phase, busy_guests_at_once = {busy}"
        );
        println!("| looping guests | req/s | p50 | p99 | p99 / alone |");
        println!("|---|---|---|---|---|");
        for (loops, run) in runs {
            let s = stats::summarize(run.samples.clone());
            println!(
                "| {loops} | {:.0} | {:.2} ms | {:.2} ms | {:.2}x |",
                run.per_sec(),
                s.p50.as_secs_f64() * 1e3,
                s.p99.as_secs_f64() * 1e3,
                s.p99.as_secs_f64() / alone_p99.as_secs_f64()
            );
        }
        for l in looping {
            l.abort();
        }
        Ok(())
    })
}
