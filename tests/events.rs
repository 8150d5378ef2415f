//! Events: one at a time, in arrival order, bounded queues, and failures
//! (trap, wall, memory) that disturb nothing else.

use std::time::{Duration, Instant};

use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, open_probe_node, test_limits};

async fn node(limits: Limits) -> TestNode {
    open_probe_node(limits).await
}

#[tokio::test]
async fn a_trap_answers_500_without_detail_and_rolls_back_its_writes() {
    let n = node(test_limits()).await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    let a = n.get("/actor/open/a/trap-after-write").await;
    assert_eq!((a.status, a.body.as_str()), (500, "the actor failed\n"));
    // The write of the trapped event is gone; the actor serves again.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 1);
    // A new instance: its in-memory events restarted.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["events"], 2);
}

#[tokio::test]
async fn an_endless_loop_is_cut_at_the_wall_with_504_and_others_still_answer() {
    let n = node(Limits { wall_per_event_secs: 1.0, ..test_limits() }).await;
    n.get("/actor/open/a/count").await;
    let looping = {
        let (client, url) = (n.client.clone(), n.url.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let r = client.get(format!("{url}/actor/open/a/loop")).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap(), started.elapsed())
        })
    };
    // While `a` computes, other actors answer promptly, even on this
    // test's one runtime thread: a computing guest yields at each tick.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..5 {
        let t = Instant::now();
        assert_eq!(n.get(&format!("/actor/open/other{i}/count")).await.status, 200);
        assert!(t.elapsed() < Duration::from_millis(900), "another actor waited {:?}", t.elapsed());
    }
    let (status, body, took) = looping.await.unwrap();
    assert_eq!((status, body.as_str()), (504, "the actor's event ran past its wall\n"));
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(5), "cut after {took:?}");
    // The actor serves again on a new instance; the cut event's write is gone.
    let a = n.get("/actor/open/a/peek").await.json();
    assert_eq!((a["count"].as_u64(), a["events"].as_u64()), (Some(1), Some(1)));
}

#[tokio::test]
async fn an_event_blocked_in_a_host_call_is_cut_at_the_wall() {
    let n = node(Limits { wall_per_event_secs: 1.0, ..test_limits() }).await;
    n.get("/actor/open/a/count").await;
    let started = Instant::now();
    let a = n.get("/actor/open/a/sleep?ms=5000").await;
    assert_eq!(a.status, 504);
    assert!(started.elapsed() < Duration::from_secs(4), "cut after {:?}", started.elapsed());
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 1);
    // Within the wall, the same call answers.
    assert_eq!(n.get("/actor/open/a/sleep?ms=100").await.status, 200);
}

#[tokio::test]
async fn a_memory_bomb_traps_at_the_memory_limit() {
    let n = node(Limits { memory_bytes: 32 << 20, ..test_limits() }).await;
    // Under the limit, memory is the guest's; over it, the guest traps.
    assert_eq!(n.get("/actor/open/a/alloc?mb=20").await.status, 200);
    assert_eq!(n.get("/actor/open/a/alloc?mb=40").await.status, 500);
    let a = n.get("/actor/open/a/membomb").await;
    assert_eq!((a.status, a.body.as_str()), (500, "the actor failed\n"));
    // Its write rolled back; it and its neighbours serve on.
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    assert_eq!(n.get("/actor/open/b/count").await.status, 200);
    // A larger limit lets the same allocation through.
    let big = node(Limits { memory_bytes: 64 << 20, ..test_limits() }).await;
    assert_eq!(big.get("/actor/open/a/alloc?mb=40").await.status, 200);
}

#[tokio::test]
async fn concurrent_requests_to_one_actor_never_overlap() {
    let n = node(test_limits()).await;
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (client, url) = (n.client.clone(), n.url.clone());
        tasks.push(tokio::spawn(async move {
            client.get(format!("{url}/actor/open/a/interval?ms=15")).send().await.unwrap().status().as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let ivs: Vec<(u128, u128)> = n
        .get("/actor/open/a/intervals")
        .await
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let (s, e) = v.as_str().unwrap().split_once('-').unwrap();
            (s.parse().unwrap(), e.parse().unwrap())
        })
        .collect();
    assert_eq!(ivs.len(), 12, "every event recorded its interval");
    for pair in ivs.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "events overlapped: {pair:?}");
    }
}

#[tokio::test]
async fn events_run_in_arrival_order() {
    let n = node(test_limits()).await;
    // The first event holds the actor while the others queue behind it,
    // each sent once the previous one is surely queued.
    let mut tasks = Vec::new();
    for seq in 0..8 {
        let (client, url) = (n.client.clone(), n.url.clone());
        let ms = if seq == 0 { 1000 } else { 0 };
        tasks.push(tokio::spawn(async move {
            client.get(format!("{url}/actor/open/a/append?seq={seq}&ms={ms}")).send().await.unwrap().status().as_u16()
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let log = n.get("/actor/open/a/log").await.json();
    assert_eq!(log, serde_json::json!(["0", "1", "2", "3", "4", "5", "6", "7"]));
}

#[tokio::test]
async fn a_full_queue_answers_503_callee_overloaded() {
    let n = node(Limits { queue_per_actor: 2, ..test_limits() }).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (client, url) = (n.client.clone(), n.url.clone());
        let ms = if i == 0 { 400 } else { 0 };
        tasks.push(tokio::spawn(async move {
            let r = client.get(format!("{url}/actor/open/a/append?seq={i}&ms={ms}")).send().await.unwrap();
            let retry = r.headers().get("retry-after").is_some();
            (r.status().as_u16(), retry, r.text().await.unwrap())
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let results: Vec<_> = futures_join(tasks).await;
    // One running, two queued, three refused.
    let ok = results.iter().filter(|r| r.0 == 200).count();
    let refused: Vec<_> = results.iter().filter(|r| r.0 == 503).collect();
    assert_eq!((ok, refused.len()), (3, 3), "{results:?}");
    for r in refused {
        assert!(r.1, "Retry-After is set");
        assert_eq!(r.2, "callee overloaded\n");
    }
    // The refused events never ran, and each refusal was counted.
    assert_eq!(n.get("/actor/open/a/log").await.json().as_array().unwrap().len(), 3);
    assert_eq!(n.node.metrics().refusals.get(wasmkeep_core::RefusalReason::Overloaded), 3);
}

async fn futures_join<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn an_invalid_status_from_the_actor_is_500_and_rolls_back() {
    let n = node(test_limits()).await;
    assert_eq!(n.get("/actor/open/a/status?code=201").await.status, 201);
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 100);
    for code in [1000, 101, 0] {
        let a = n.get(&format!("/actor/open/a/status?code={code}")).await;
        assert_eq!((a.status, a.body.as_str()), (500, "the actor answered an invalid response\n"));
    }
    // The undeliverable answers' writes never committed.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 100);
}
