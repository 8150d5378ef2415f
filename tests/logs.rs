//! What guests make the node log (issue 8, item 11): a trap is one line,
//! with the guest's own output on it; a wall hit is a line naming the app
//! and the guest; a guest failing in a loop logs a few lines per interval,
//! then says how many it skipped.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, guests, probe_classes, test_limits};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The node's log, as the binary would write it.
fn log() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_env_filter("warn,wasmkeep=info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        captured
    })
}

/// The log's lines that mention `needle`.
fn lines_with(needle: &str) -> Vec<String> {
    let all = String::from_utf8_lossy(&log().0.lock().unwrap()).into_owned();
    all.lines().filter(|l| l.contains(needle)).map(str::to_owned).collect()
}

async fn node(limits: Limits) -> TestNode {
    log();
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    TestNode::start(limits, spec).await
}

#[tokio::test]
async fn a_trap_is_one_line_and_a_guest_trapping_in_a_loop_is_throttled() {
    let n = node(test_limits()).await;
    for _ in 0..20 {
        assert_eq!(n.get("/actor/open/trapper/trap-after-write").await.status, 500);
    }
    let lines = lines_with("guest=open/trapper");
    assert_eq!(lines.len(), 5, "a few lines per interval: {lines:#?}");
    for line in &lines {
        assert!(line.contains("app=t/app") && line.contains("trapped:"), "{line}");
        assert!(line.contains("the probe traps on purpose"), "the guest's own words are on the line: {line}");
        assert!(line.len() < 3000, "one short line: {}", line.len());
    }
}

#[tokio::test]
async fn a_wall_hit_is_logged_with_the_app_and_the_guest() {
    let n = node(Limits { wall_per_event_secs: 0.5, front_wall_secs: 0.5, ..test_limits() }).await;
    assert_eq!(n.get("/actor/open/looper/loop").await.status, 504);
    assert_eq!(n.get("/loop").await.status, 504);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let actor = lines_with("guest=open/looper");
    assert!(actor.len() == 1 && actor[0].contains("app=t/app") && actor[0].contains("cut at its wall"), "{actor:#?}");
    let front = lines_with("guest=_front");
    assert!(front.iter().any(|l| l.contains("cut at its wall") && l.contains("app=t/app")), "{front:#?}");
}
