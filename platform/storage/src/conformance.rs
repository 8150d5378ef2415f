//! The behaviour every store promises, as async checks over `&dyn Store`:
//! the embedded SQLite store and the PostgreSQL store run the same ones
//! (`store_conformance!`), so the cluster's store is held to exactly what
//! the single node's is.

use std::collections::BTreeMap;

use wasmkeep_core::heartbeat::{self, Capabilities, Heartbeat, NodeState};
use wasmkeep_core::{ActorKey, Address, AppId};

use crate::{
    ActorRecord, AppRecord, BudgetScope, Create, Epoch, OverBudget, Revoked, StorageBudget, Store, StoreError, Stored,
    Take, TenantRecord, TokenRecord, UsageCounts, Wake, WriteBatch,
};

/// One `#[tokio::test]` per check of this module, each on a fresh store
/// made by `$make` (an async expression answering `(guard, store)`; the
/// guard lives as long as the test).
#[macro_export]
macro_rules! store_conformance {
    ($make:expr) => {
        $crate::store_conformance!(@tests $make;
            wake_creates_only_when_asked_and_bumps_the_epoch,
            commits_are_fenced_by_epoch,
            batches_set_delete_and_clear,
            list_by_prefix_with_cursor_and_isolation,
            deletion_is_a_state_and_fences_the_old_epoch,
            tenants_and_tokens,
            versions_values_and_deleting_an_app,
            actors_are_listed_by_class_prefix_and_cursor_with_what_they_store,
            commits_keep_to_their_budget_per_actor_and_per_tenant,
            usage_adds_up_per_app_and_period_and_goes_with_its_app,
            concurrent_wakes_and_commits_leave_one_owner_writing,
            keys_and_names_sort_byte_by_byte,
            concurrent_creating_wakes_share_no_epoch,
            heartbeats_are_written_over_listed_by_node_and_forgotten,
            take_creates_only_when_asked_and_always_bumps_the_epoch,
            a_live_owner_keeps_its_actor_until_its_heartbeat_is_older_than_dead_before,
            an_owner_without_a_heartbeat_is_dead,
            release_lets_any_node_take_at_once_and_spends_the_epoch,
            a_deleted_actor_keeps_its_owner_and_comes_back_only_when_created,
            owned_by_pages_one_nodes_live_actors_in_key_order,
            concurrent_takes_leave_exactly_one_owner,
            creations_keep_to_their_tenants_bound_and_a_deletion_frees_a_place,
            concurrent_creations_never_pass_the_bound,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_guard, store) = $make.await;
                $crate::conformance::$name(&store).await;
            }
        )*
    };
}

fn key(name: &str) -> ActorKey {
    ActorKey { app: AppId(1), address: Address::parse(&format!("counter/{name}")).unwrap() }
}

async fn commit(s: &dyn Store, a: &ActorKey, epoch: Epoch, batch: &WriteBatch) -> Result<Stored, StoreError> {
    s.commit(a, epoch, batch, StorageBudget::UNBOUNDED).await
}

fn batch(pairs: &[(&str, Option<&[u8]>)]) -> WriteBatch {
    WriteBatch { clear: false, writes: pairs.iter().map(|(k, v)| (k.to_string(), v.map(|v| v.to_vec()))).collect() }
}

async fn owned(s: &dyn Store, a: &ActorKey, node: &str) -> Epoch {
    match s.wake(a, Create::ANY, node).await.unwrap() {
        Wake::Owned { epoch, .. } => epoch,
        other => panic!("a created actor is owned: {other:?}"),
    }
}

fn token(id: &str, tenant: Option<&str>, hash: &str) -> TokenRecord {
    TokenRecord { id: id.into(), tenant: tenant.map(Into::into), scope: "admin".into(), hash: hash.into(), created: 1 }
}

fn tenant(id: &str) -> TenantRecord {
    TenantRecord { id: id.into(), plan: "free".into(), suspended: false, created: 7 }
}

pub async fn wake_creates_only_when_asked_and_bumps_the_epoch(s: &dyn Store) {
    let a = key("x");
    assert_eq!(s.wake(&a, Create::No, "n1").await.unwrap(), Wake::Missing);
    assert_eq!(s.wake(&a, Create::ANY, "n1").await.unwrap(), Wake::Owned { epoch: Epoch(1), created: true });
    assert_eq!(s.wake(&a, Create::No, "n1").await.unwrap(), Wake::Owned { epoch: Epoch(2), created: false });
}

pub async fn commits_are_fenced_by_epoch(s: &dyn Store) {
    let a = key("x");
    let Wake::Owned { epoch: old, .. } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
    let Wake::Owned { epoch: new, .. } = s.wake(&a, Create::No, "n2").await.unwrap() else { panic!() };
    assert_eq!(commit(s, &a, old, &batch(&[("k", Some(b"1"))])).await, Err(StoreError::Fenced));
    assert_eq!(s.get(&a, "k").await.unwrap(), None);
    commit(s, &a, new, &batch(&[("k", Some(b"2"))])).await.unwrap();
    assert_eq!(s.get(&a, "k").await.unwrap(), Some(b"2".to_vec()));
    // A missing actor has no epoch to commit under.
    assert_eq!(commit(s, &key("never"), Epoch(1), &batch(&[("k", None)])).await, Err(StoreError::Fenced));
}

pub async fn batches_set_delete_and_clear(s: &dyn Store) {
    let a = key("x");
    let Wake::Owned { epoch, .. } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
    commit(s, &a, epoch, &batch(&[("", Some(b"0")), ("a", Some(b"1")), ("b", Some(b"2")), ("c", Some(b"3"))]))
        .await
        .unwrap();
    commit(s, &a, epoch, &batch(&[("b", None), ("c", Some(b"33"))])).await.unwrap();
    let all = s.list(&a, "", None, 100).await.unwrap();
    // The empty key is a key like any other.
    assert_eq!(
        all,
        vec![("".to_string(), b"0".to_vec()), ("a".to_string(), b"1".to_vec()), ("c".to_string(), b"33".to_vec())]
    );
    let mut clear = batch(&[("z", Some(b"9"))]);
    clear.clear = true;
    commit(s, &a, epoch, &clear).await.unwrap();
    assert_eq!(s.list(&a, "", None, 100).await.unwrap(), vec![("z".to_string(), b"9".to_vec())]);
}

pub async fn list_by_prefix_with_cursor_and_isolation(s: &dyn Store) {
    let a = key("x");
    let b = key("y");
    let Wake::Owned { epoch, .. } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
    let Wake::Owned { epoch: eb, .. } = s.wake(&b, Create::ANY, "n1").await.unwrap() else { panic!() };
    commit(s, &a, epoch, &batch(&[("p/1", Some(b"")), ("p/2", Some(b"")), ("p/3", Some(b"")), ("q", Some(b""))]))
        .await
        .unwrap();
    commit(s, &b, eb, &batch(&[("p/0", Some(b""))])).await.unwrap();
    let keys = |v: Vec<(String, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(keys(s.list(&a, "p/", None, 2).await.unwrap()), ["p/1", "p/2"]);
    assert_eq!(keys(s.list(&a, "p/", Some("p/2"), 2).await.unwrap()), ["p/3"]);
    assert_eq!(keys(s.list(&a, "p/", Some("p/3"), 2).await.unwrap()), Vec::<String>::new());
    assert_eq!(keys(s.list(&b, "", None, 10).await.unwrap()), ["p/0"]);
}

pub async fn deletion_is_a_state_and_fences_the_old_epoch(s: &dyn Store) {
    let a = key("x");
    let Wake::Owned { epoch, .. } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
    commit(s, &a, epoch, &batch(&[("k", Some(b"1"))])).await.unwrap();
    s.delete_actor(&a, epoch).await.unwrap();
    assert_eq!(s.get(&a, "k").await.unwrap(), None);
    assert_eq!(commit(s, &a, epoch, &batch(&[("k", Some(b"1"))])).await, Err(StoreError::Fenced));
    assert_eq!(s.wake(&a, Create::No, "n1").await.unwrap(), Wake::Missing);
    // Brought back, it starts empty under a newer epoch.
    let Wake::Owned { epoch: e2, created } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
    assert!(created && e2 > epoch);
    assert_eq!(s.list(&a, "", None, 10).await.unwrap(), vec![]);
}

pub async fn tenants_and_tokens(s: &dyn Store) {
    assert!(s.create_tenant(&tenant("acme"), &token("t1", Some("acme"), "h1")).await.unwrap());
    // Taken: nothing of the second attempt is written.
    assert!(!s.create_tenant(&tenant("acme"), &token("t2", Some("acme"), "h2")).await.unwrap());
    assert_eq!(s.token_by_hash("h2").await.unwrap(), None);
    // A tenant `dev` made without an account is taken too.
    s.ensure_app("dev", "counter").await.unwrap();
    assert!(!s.create_tenant(&tenant("dev"), &token("t3", Some("dev"), "h3")).await.unwrap());

    assert_eq!(s.tenant("acme").await.unwrap(), Some(tenant("acme")));
    assert!(s.set_plan("acme", "pro").await.unwrap());
    assert!(!s.set_plan("nobody", "pro").await.unwrap());
    assert!(s.set_suspended("acme", true).await.unwrap());
    let acme = s.tenant("acme").await.unwrap().unwrap();
    assert_eq!((acme.plan.as_str(), acme.suspended), ("pro", true));
    assert_eq!(s.tenants().await.unwrap().len(), 2);
    // A tenant's own export, sealed: set, replaced, removed; none for
    // a tenant that does not exist.
    assert!(s.telemetry().await.unwrap().is_empty());
    assert!(s.set_telemetry("acme", Some(b"sealed-1")).await.unwrap());
    assert!(s.set_telemetry("acme", Some(b"sealed-2")).await.unwrap());
    assert!(!s.set_telemetry("nobody", Some(b"x")).await.unwrap());
    let all = s.telemetry().await.unwrap();
    assert_eq!(all.into_iter().collect::<Vec<_>>(), [("acme".to_owned(), b"sealed-2".to_vec())]);
    assert_eq!(s.telemetry_of("acme").await.unwrap(), Some(b"sealed-2".to_vec()));
    assert_eq!(s.telemetry_of("nobody").await.unwrap(), None);
    assert!(s.set_telemetry("acme", None).await.unwrap());
    assert!(s.telemetry().await.unwrap().is_empty());
    assert_eq!(s.telemetry_of("acme").await.unwrap(), None);

    s.add_token(&token("t4", Some("acme"), "h4")).await.unwrap();
    s.add_token(&token("op", None, "h5")).await.unwrap();
    // The same hash twice is refused (a secret is never reused).
    assert!(s.add_token(&token("t6", Some("acme"), "h4")).await.is_err());
    assert_eq!(s.token_by_hash("h4").await.unwrap().unwrap().id, "t4");
    let ids = |v: Vec<TokenRecord>| v.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(s.tokens(Some("acme")).await.unwrap()), ["t1", "t4"]);
    assert_eq!(ids(s.tokens(None).await.unwrap()), ["op"]);
    // A tenant revokes only its own tokens.
    assert_eq!(s.revoke_token(Some("dev"), "t4").await.unwrap(), Revoked::NoSuchToken);
    assert_eq!(s.revoke_token(None, "t4").await.unwrap(), Revoked::NoSuchToken);
    assert_eq!(s.revoke_token(Some("acme"), "t4").await.unwrap(), Revoked::Yes);
    assert_eq!(s.token_by_hash("h4").await.unwrap(), None);
    // Its last admin token stays; the operator's may go.
    assert_eq!(s.revoke_token(Some("acme"), "t1").await.unwrap(), Revoked::LastAdmin);
    assert!(s.token_by_hash("h1").await.unwrap().is_some());
    assert_eq!(s.revoke_token(None, "op").await.unwrap(), Revoked::Yes);
}

pub async fn versions_values_and_deleting_an_app(s: &dyn Store) {
    let app = s.ensure_app("acme", "shop").await.unwrap();
    let other = s.ensure_app("acme", "chat").await.unwrap();
    let comps = BTreeMap::from([("cart".to_string(), "h1".to_string())]);
    let v1 = s.add_version(app, "{\"v\":1}", &comps).await.unwrap();
    let v2 = s.add_version(app, "{\"v\":2}", &comps).await.unwrap();
    s.activate(app, v2).await.unwrap();
    assert_eq!(s.version(app, v1).await.unwrap().unwrap().manifest, "{\"v\":1}");
    assert_eq!(s.version(app, 9).await.unwrap(), None);
    assert_eq!(s.versions(app).await.unwrap().iter().map(|v| v.number).collect::<Vec<_>>(), [1, 2]);
    // The active version stays; another goes.
    assert!(!s.delete_version(app, v2).await.unwrap());
    let v3 = s.add_version(app, "{\"v\":3}", &comps).await.unwrap();
    assert!(s.delete_version(app, v3).await.unwrap());
    assert_eq!(s.version(app, v3).await.unwrap(), None);
    let names = |v: Vec<AppRecord>| v.into_iter().map(|a| a.name).collect::<Vec<_>>();
    assert_eq!(names(s.apps("acme").await.unwrap()), ["chat", "shop"]);
    assert_eq!(s.find_app("acme", "shop").await.unwrap().unwrap().active, Some(2));
    assert_eq!(s.find_app("other", "shop").await.unwrap(), None);

    s.set_value(app, "K", b"sealed").await.unwrap();
    s.set_value(other, "K", b"kept").await.unwrap();
    assert!(!s.delete_value(app, "nope").await.unwrap());
    let a = ActorKey { app, address: Address::parse("cart/x").unwrap() };
    let Wake::Owned { epoch, .. } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
    commit(s, &a, epoch, &batch(&[("k", Some(b"1"))])).await.unwrap();

    s.delete_app(app).await.unwrap();
    assert_eq!(s.find_app("acme", "shop").await.unwrap(), None);
    assert!(s.values(app).await.unwrap().is_empty());
    assert!(s.versions(app).await.unwrap().is_empty());
    assert_eq!(s.get(&a, "k").await.unwrap(), None);
    assert_eq!(s.wake(&a, Create::No, "n1").await.unwrap(), Wake::Missing);
    // The other app keeps everything; a component stays for whoever shares it.
    assert_eq!(s.values(other).await.unwrap()["K"], b"kept");
}

pub async fn actors_are_listed_by_class_prefix_and_cursor_with_what_they_store(s: &dyn Store) {
    let app = s.ensure_app("acme", "shop").await.unwrap();
    let other_app = s.ensure_app("acme", "chat").await.unwrap();
    let at = |class: &str, name: &str| ActorKey { app, address: Address::parse(&format!("{class}/{name}")).unwrap() };
    for (class, name) in [("cart", "ann"), ("cart", "anna"), ("cart", "bob"), ("room", "ann"), ("room", "x/y")] {
        let Wake::Owned { epoch, .. } = s.wake(&at(class, name), Create::ANY, "n1").await.unwrap() else { panic!() };
        commit(s, &at(class, name), epoch, &batch(&[("k", Some(b"123")), ("é", Some(b""))])).await.unwrap();
    }
    let gone = at("cart", "bob");
    let Wake::Owned { epoch, .. } = s.wake(&gone, Create::No, "n2").await.unwrap() else { panic!() };
    s.delete_actor(&gone, epoch).await.unwrap();
    let other = ActorKey { app: other_app, address: Address::parse("cart/zed").unwrap() };
    s.wake(&other, Create::ANY, "n1").await.unwrap();

    let names = |v: Vec<ActorRecord>| v.into_iter().map(|a| format!("{}/{}", a.class, a.name)).collect::<Vec<_>>();
    assert_eq!(
        names(s.actors(app, None, "", None, 10).await.unwrap()),
        ["cart/ann", "cart/anna", "room/ann", "room/x/y"]
    );
    assert_eq!(names(s.actors(app, Some("cart"), "", None, 10).await.unwrap()), ["cart/ann", "cart/anna"]);
    assert_eq!(names(s.actors(app, None, "ann", None, 10).await.unwrap()), ["cart/ann", "cart/anna", "room/ann"]);
    assert_eq!(names(s.actors(app, None, "", None, 2).await.unwrap()), ["cart/ann", "cart/anna"]);
    assert_eq!(names(s.actors(app, None, "", Some(("cart", "anna")), 2).await.unwrap()), ["room/ann", "room/x/y"]);
    let record = s.actor(&at("room", "x/y")).await.unwrap().unwrap();
    // Keys "k" and "é" (2 bytes), values of 3 and 0 bytes.
    assert_eq!((record.keys, record.bytes, record.owner.as_str()), (2, 1 + 3 + 2, "n1"));
    assert_eq!(s.actor(&gone).await.unwrap(), None);
    // Four live actors of 6 bytes each (the deleted one's are gone).
    assert_eq!(s.app_bytes(app).await.unwrap(), 4 * 6);
    assert_eq!(s.app_bytes(AppId(app.0 + 1000)).await.unwrap(), 0);
}

pub async fn commits_keep_to_their_budget_per_actor_and_per_tenant(s: &dyn Store) {
    let shop = s.ensure_app("acme", "shop").await.unwrap();
    let chat = s.ensure_app("acme", "chat").await.unwrap();
    let elsewhere = s.ensure_app("other", "shop").await.unwrap();
    let at = |app: AppId, name: &str| ActorKey { app, address: Address::parse(&format!("c/{name}")).unwrap() };
    let (a, b, c) = (at(shop, "a"), at(chat, "b"), at(elsewhere, "c"));
    let (ea, eb, ec) = (owned(s, &a, "n1").await, owned(s, &b, "n1").await, owned(s, &c, "n1").await);
    let budget = StorageBudget { actor: 100, tenant: 150 };
    let value = |n: usize| vec![b'x'; n];
    let put = |k: &str, n: usize| batch(&[(k, Some(&value(n)))]);
    let commit = async |k: &ActorKey, e, b: &WriteBatch| s.commit(k, e, b, budget).await;

    // 1 + 99 bytes: exactly the actor's bound.
    assert_eq!(commit(&a, ea, &put("k", 99)).await.unwrap(), Stored { actor: 100, tenant: 100 });
    let over = commit(&a, ea, &put("j", 0)).await.unwrap_err();
    assert_eq!(over, StoreError::OverBudget(OverBudget { scope: BudgetScope::Actor, would: 101, limit: 100 }));
    assert_eq!(over.to_string(), "storage quota: this actor would store 101 bytes; the plan allows 100");
    // Refused means nothing of it was written.
    assert_eq!(s.get(&a, "j").await.unwrap(), None);
    // Overwriting counts what the key held before.
    assert_eq!(commit(&a, ea, &put("k", 90)).await.unwrap(), Stored { actor: 91, tenant: 91 });
    assert_eq!(commit(&a, ea, &put("k", 99)).await.unwrap().actor, 100);
    // Another app of the same tenant shares the tenant's bound.
    assert_eq!(commit(&b, eb, &put("k", 49)).await.unwrap(), Stored { actor: 50, tenant: 150 });
    let over = commit(&b, eb, &put("l", 0)).await.unwrap_err();
    assert_eq!(over, StoreError::OverBudget(OverBudget { scope: BudgetScope::Tenant, would: 151, limit: 150 }));
    // Another tenant's bytes are its own.
    assert_eq!(commit(&c, ec, &put("k", 99)).await.unwrap(), Stored { actor: 100, tenant: 100 });
    // What shrinks passes even over a lowered bound; a clear frees all.
    let tight = StorageBudget { actor: 10, tenant: 10 };
    assert_eq!(s.commit(&a, ea, &put("k", 50), tight).await.unwrap(), Stored { actor: 51, tenant: 101 });
    assert!(s.commit(&a, ea, &put("k", 51), tight).await.is_err());
    // A projection writes nothing.
    let now = Stored { actor: 51, tenant: 101 };
    assert_eq!(s.stored(&a, &put("z", 8)).await.unwrap(), (now, 9));
    assert_eq!(s.stored(&a, &put("k", 1)).await.unwrap(), (now, -49));
    assert_eq!(s.stored(&a, &WriteBatch::default()).await.unwrap(), (now, 0));
    let mut clear = put("n", 3);
    clear.clear = true;
    assert_eq!(commit(&a, ea, &clear).await.unwrap(), Stored { actor: 4, tenant: 54 });
    // Deleting an actor frees its bytes from its tenant's.
    s.delete_actor(&b, eb).await.unwrap();
    assert_eq!(s.stored(&a, &WriteBatch::default()).await.unwrap(), (Stored { actor: 4, tenant: 4 }, 0));
    assert_eq!(s.app_bytes(chat).await.unwrap(), 0);
}

pub async fn usage_adds_up_per_app_and_period_and_goes_with_its_app(s: &dyn Store) {
    let (shop, chat) = (s.ensure_app("acme", "shop").await.unwrap(), s.ensure_app("acme", "chat").await.unwrap());
    let used =
        UsageCounts { requests: 2, events: 3, cpu_micros: 4, wall_micros: 5, egress_requests: 6, egress_bytes: 7 };
    s.add_usage(shop, "2026-11", &used).await.unwrap();
    s.add_usage(shop, "2026-11", &used).await.unwrap();
    s.add_usage(shop, "2026-12", &used).await.unwrap();
    assert_eq!(s.usage(shop, "2026-11").await.unwrap(), used.plus(used));
    assert_eq!(s.usage(shop, "2026-12").await.unwrap(), used);
    assert_eq!(s.usage(chat, "2026-11").await.unwrap(), UsageCounts::default());
    s.delete_app(shop).await.unwrap();
    assert_eq!(s.usage(shop, "2026-11").await.unwrap(), UsageCounts::default());
}

pub async fn concurrent_wakes_and_commits_leave_one_owner_writing(s: &dyn Store) {
    let a = key("contested");
    owned(s, &a, "n0").await;
    // Four nodes take the actor at once: each gets an epoch of its own.
    let (e1, e2, e3, e4) = tokio::join!(owned(s, &a, "n1"), owned(s, &a, "n2"), owned(s, &a, "n3"), owned(s, &a, "n4"));
    let mut epochs = vec![e1, e2, e3, e4];
    epochs.sort();
    epochs.dedup();
    assert_eq!(epochs.len(), 4, "two wakes shared an epoch: {epochs:?}");
    let last = *epochs.last().unwrap();
    // All four commit at once: only the current epoch's commit lands.
    let write = |e: Epoch| batch(&[("who", Some(&e.0.to_be_bytes()))]);
    let (b1, b2, b3, b4) = (write(epochs[0]), write(epochs[1]), write(epochs[2]), write(last));
    let (r1, r2, r3, r4) = tokio::join!(
        commit(s, &a, epochs[0], &b1),
        commit(s, &a, epochs[1], &b2),
        commit(s, &a, epochs[2], &b3),
        commit(s, &a, last, &b4)
    );
    assert_eq!(
        [r1, r2, r3].map(|r| r.err()),
        [Some(StoreError::Fenced), Some(StoreError::Fenced), Some(StoreError::Fenced)]
    );
    r4.unwrap();
    assert_eq!(s.get(&a, "who").await.unwrap(), Some(last.0.to_be_bytes().to_vec()));
    let owner = s.actor(&a).await.unwrap().unwrap().owner;
    assert!(["n1", "n2", "n3", "n4"].contains(&owner.as_str()), "{owner}");
}

pub async fn keys_and_names_sort_byte_by_byte(s: &dyn Store) {
    let app = s.ensure_app("acme", "shop").await.unwrap();
    let at = |name: &str| ActorKey { app, address: Address::parse(&format!("c/{name}")).unwrap() };
    let keys = ["é", "a", "Z", "ä", "B", "a b", "a-b"];
    let a = at("x");
    let epoch = owned(s, &a, "n1").await;
    let writes: Vec<(&str, Option<&[u8]>)> = keys.iter().map(|k| (*k, Some(&b""[..]))).collect();
    commit(s, &a, epoch, &batch(&writes)).await.unwrap();
    let listed: Vec<String> = s.list(&a, "", None, 100).await.unwrap().into_iter().map(|(k, _)| k).collect();
    let mut bytewise: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    bytewise.sort();
    assert_eq!(listed, bytewise);
    for name in keys {
        owned(s, &at(name), "n1").await;
    }
    let names: Vec<String> = s.actors(app, None, "", None, 100).await.unwrap().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["B", "Z", "a", "a b", "a-b", "x", "ä", "é"]);
}

/// Rounds of a race. Run by one task (`tokio::join!`), its contestants
/// interleave in only some rounds: enough that a store letting two of
/// them win is caught.
const ROUNDS: usize = 50;

/// Opens four connections of a pooled store at once, so a race's four
/// contestants start together rather than one ahead while the others
/// connect.
async fn warm(s: &dyn Store) {
    let (a, b, c, d) = tokio::join!(s.heartbeats(), s.heartbeats(), s.heartbeats(), s.heartbeats());
    for beats in [a, b, c, d] {
        beats.unwrap();
    }
}

pub async fn concurrent_creating_wakes_share_no_epoch(s: &dyn Store) {
    warm(s).await;
    // No row to lock yet: the wakes race to insert it.
    for round in 0..ROUNDS {
        let a = key(&format!("fresh{round}"));
        let (e1, e2, e3, e4) =
            tokio::join!(owned(s, &a, "n1"), owned(s, &a, "n2"), owned(s, &a, "n3"), owned(s, &a, "n4"));
        let mut epochs = vec![e1, e2, e3, e4];
        epochs.sort();
        assert_eq!(epochs, [Epoch(1), Epoch(2), Epoch(3), Epoch(4)], "round {round}");
        for e in &epochs[..3] {
            assert_eq!(commit(s, &a, *e, &batch(&[("k", None)])).await, Err(StoreError::Fenced));
        }
        commit(s, &a, Epoch(4), &batch(&[("k", None)])).await.unwrap();
    }
}

/// The callers' clock in the cluster checks: now, and the oldest
/// heartbeat of a live node (now less the default failover wait).
const NOW: u64 = 1_700_000_000_000;
const DEAD_BEFORE: u64 = NOW - 10_000;

/// `node`'s heartbeat record, sent at `sent_ms`, as a node writes it.
fn record(node: &str, sent_ms: u64) -> String {
    Heartbeat {
        node: node.into(),
        version: "0.1.0".into(),
        public_addr: format!("{node}.example:443"),
        cluster_addr: format!("{node}.example:4433"),
        started_ms: NOW - 60_000,
        sent_ms,
        state: NodeState::Serving,
        resident: 0,
        pool: 64,
        sockets: 0,
        capabilities: Capabilities::OURS,
    }
    .format()
}

async fn beat(s: &dyn Store, node: &str, sent_ms: u64) {
    s.beat(node, &record(node, sent_ms), sent_ms).await.unwrap();
}

async fn take(s: &dyn Store, a: &ActorKey, create: Create, node: &str) -> Take {
    s.take(a, create, node, DEAD_BEFORE).await.unwrap()
}

/// The epoch of a take that must have won.
fn won(take: Take) -> Epoch {
    match take {
        Take::Owned { epoch, .. } => epoch,
        other => panic!("not owned: {other:?}"),
    }
}

fn elsewhere(owner: &str) -> Take {
    Take::Elsewhere { owner: owner.into() }
}

pub async fn heartbeats_are_written_over_listed_by_node_and_forgotten(s: &dyn Store) {
    assert_eq!(s.heartbeats().await.unwrap(), vec![]);
    beat(s, "n2", NOW - 5_000).await;
    beat(s, "n1", NOW - 1_000).await;
    // A node's next heartbeat replaces its last.
    beat(s, "n2", NOW).await;
    let beats = s.heartbeats().await.unwrap();
    assert_eq!(
        beats,
        vec![("n1".to_string(), record("n1", NOW - 1_000), NOW - 1_000), ("n2".to_string(), record("n2", NOW), NOW)]
    );
    // The record comes back as written: the cluster reads it as a heartbeat.
    assert_eq!(Heartbeat::parse(&beats[1].1).unwrap().sent_ms, NOW);

    beat(s, "gone", NOW - 3_600_000).await;
    assert_eq!(s.forget_nodes(NOW - 3_600_000).await.unwrap(), 0, "sent at the bound is kept");
    let nodes = async || s.heartbeats().await.unwrap().into_iter().map(|(node, ..)| node).collect::<Vec<_>>();
    assert_eq!(s.forget_nodes(NOW - 2_000).await.unwrap(), 1);
    assert_eq!(nodes().await, ["n1", "n2"]);
    assert_eq!(s.forget_nodes(NOW).await.unwrap(), 1);
    assert_eq!(nodes().await, ["n2"]);
}

pub async fn take_creates_only_when_asked_and_always_bumps_the_epoch(s: &dyn Store) {
    let a = key("x");
    beat(s, "n1", NOW).await;
    assert_eq!(take(s, &a, Create::No, "n1").await, Take::Missing);
    assert_eq!(s.owner(&a).await.unwrap(), None);
    assert_eq!(take(s, &a, Create::ANY, "n1").await, Take::Owned { epoch: Epoch(1), created: true });
    assert_eq!(s.owner(&a).await.unwrap().as_deref(), Some("n1"));
    // Its owner taking it again gets a new epoch, and the old one is fenced.
    assert_eq!(take(s, &a, Create::ANY, "n1").await, Take::Owned { epoch: Epoch(2), created: false });
    assert_eq!(commit(s, &a, Epoch(1), &batch(&[("k", Some(b"1"))])).await, Err(StoreError::Fenced));
    commit(s, &a, Epoch(2), &batch(&[("k", Some(b"2"))])).await.unwrap();
    // A wake and a take share one epoch sequence and one owner.
    assert_eq!(s.wake(&a, Create::No, "n1").await.unwrap(), Wake::Owned { epoch: Epoch(3), created: false });
    assert_eq!(take(s, &a, Create::No, "n1").await, Take::Owned { epoch: Epoch(4), created: false });
    assert_eq!(s.get(&a, "k").await.unwrap(), Some(b"2".to_vec()));
    assert_eq!(s.actor(&a).await.unwrap().unwrap().owner, "n1");
    // The empty owner is no node's: no node takes under it.
    assert!(matches!(s.take(&a, Create::ANY, "", DEAD_BEFORE).await, Err(StoreError::Backend(_))));
    assert_eq!(s.owner(&a).await.unwrap().as_deref(), Some("n1"));
}

pub async fn a_live_owner_keeps_its_actor_until_its_heartbeat_is_older_than_dead_before(s: &dyn Store) {
    let a = key("x");
    beat(s, "n1", NOW).await;
    beat(s, "n2", NOW).await;
    let e1 = won(take(s, &a, Create::ANY, "n1").await);
    assert_eq!(take(s, &a, Create::No, "n2").await, elsewhere("n1"));
    assert_eq!(take(s, &a, Create::ANY, "n2").await, elsewhere("n1"));
    // A refused take changes nothing: the owner goes on writing.
    commit(s, &a, e1, &batch(&[("k", Some(b"n1"))])).await.unwrap();
    assert_eq!(s.owner(&a).await.unwrap().as_deref(), Some("n1"));

    // Sent exactly at the bound: still alive, as the heartbeat's own rule says.
    beat(s, "n1", DEAD_BEFORE).await;
    assert!(heartbeat::is_live(DEAD_BEFORE, NOW, heartbeat::FAILOVER_WAIT));
    assert_eq!(take(s, &a, Create::No, "n2").await, elsewhere("n1"));
    // A millisecond older: dead, and its actor is taken.
    beat(s, "n1", DEAD_BEFORE - 1).await;
    assert!(!heartbeat::is_live(DEAD_BEFORE - 1, NOW, heartbeat::FAILOVER_WAIT));
    let e2 = won(take(s, &a, Create::No, "n2").await);
    assert!(e2 > e1);
    assert_eq!(s.owner(&a).await.unwrap().as_deref(), Some("n2"));
    // The old owner, come back, is fenced, and finds the actor elsewhere.
    assert_eq!(commit(s, &a, e1, &batch(&[("k", Some(b"late"))])).await, Err(StoreError::Fenced));
    assert_eq!(s.delete_actor(&a, e1).await, Err(StoreError::Fenced));
    beat(s, "n1", NOW).await;
    assert_eq!(take(s, &a, Create::No, "n1").await, elsewhere("n2"));
    commit(s, &a, e2, &batch(&[("k", Some(b"n2"))])).await.unwrap();
    assert_eq!(s.get(&a, "k").await.unwrap(), Some(b"n2".to_vec()));
}

pub async fn an_owner_without_a_heartbeat_is_dead(s: &dyn Store) {
    let (a, b) = (key("a"), key("b"));
    beat(s, "n2", NOW).await;
    // Woken by a node that never wrote a heartbeat (one node, or gone).
    owned(s, &a, "n1").await;
    assert_eq!(won(take(s, &a, Create::No, "n2").await), Epoch(2));
    // A node forgotten for good is as dead as one that never beat.
    beat(s, "n3", NOW).await;
    won(take(s, &b, Create::ANY, "n3").await);
    assert_eq!(take(s, &b, Create::No, "n2").await, elsewhere("n3"));
    assert_eq!(s.forget_nodes(NOW + 1).await.unwrap(), 2);
    won(take(s, &b, Create::No, "n2").await);
    assert_eq!(s.owner(&b).await.unwrap().as_deref(), Some("n2"));
}

pub async fn release_lets_any_node_take_at_once_and_spends_the_epoch(s: &dyn Store) {
    let a = key("x");
    beat(s, "n1", NOW).await;
    beat(s, "n2", NOW).await;
    let old = won(take(s, &a, Create::ANY, "n1").await);
    let e1 = won(take(s, &a, Create::No, "n1").await);
    // A stale epoch releases nothing.
    assert!(!s.release(&a, old).await.unwrap());
    assert_eq!(s.owner(&a).await.unwrap().as_deref(), Some("n1"));
    commit(s, &a, e1, &batch(&[("k", Some(b"1"))])).await.unwrap();

    assert!(s.release(&a, e1).await.unwrap());
    assert_eq!(s.owner(&a).await.unwrap(), None);
    assert_eq!(s.actor(&a).await.unwrap().unwrap().owner, "");
    // Released, the epoch commits nothing and releases nothing again.
    assert_eq!(commit(s, &a, e1, &batch(&[("k", Some(b"2"))])).await, Err(StoreError::Fenced));
    assert!(!s.release(&a, e1).await.unwrap());
    // n1 is alive, but owns it no more: n2 takes it at once, with what it stores.
    let e2 = won(take(s, &a, Create::No, "n2").await);
    assert!(e2 > e1);
    assert_eq!(s.get(&a, "k").await.unwrap(), Some(b"1".to_vec()));
    assert!(!s.release(&a, e1).await.unwrap());
    assert_eq!(s.owner(&a).await.unwrap().as_deref(), Some("n2"));
    assert_eq!(take(s, &a, Create::No, "n1").await, elsewhere("n2"));
    assert_eq!(s.owned_by("n1", None, 10).await.unwrap(), vec![]);
    assert_eq!(s.owned_by("n2", None, 10).await.unwrap(), vec![a]);
}

pub async fn a_deleted_actor_keeps_its_owner_and_comes_back_only_when_created(s: &dyn Store) {
    let a = key("x");
    beat(s, "n1", NOW).await;
    beat(s, "n2", NOW).await;
    let e1 = won(take(s, &a, Create::ANY, "n1").await);
    commit(s, &a, e1, &batch(&[("k", Some(b"1"))])).await.unwrap();
    s.delete_actor(&a, e1).await.unwrap();
    assert_eq!(s.owner(&a).await.unwrap(), None);
    assert_eq!(take(s, &a, Create::No, "n1").await, Take::Missing);
    assert_eq!(take(s, &a, Create::No, "n2").await, Take::Missing);
    // Its record keeps its owner, alive: bringing it back is that node's.
    assert_eq!(take(s, &a, Create::ANY, "n2").await, elsewhere("n1"));
    let Take::Owned { epoch, created } = take(s, &a, Create::ANY, "n1").await else {
        panic!("its owner brings it back")
    };
    assert!(created && epoch > e1);
    assert_eq!(s.list(&a, "", None, 10).await.unwrap(), vec![]);
    assert_eq!(commit(s, &a, e1, &batch(&[("k", Some(b"2"))])).await, Err(StoreError::Fenced));
}

pub async fn owned_by_pages_one_nodes_live_actors_in_key_order(s: &dyn Store) {
    let shop = s.ensure_app("acme", "shop").await.unwrap();
    let chat = s.ensure_app("acme", "chat").await.unwrap();
    let at = |app: AppId, address: &str| ActorKey { app, address: Address::parse(address).unwrap() };
    let mine = [
        at(chat, "room/é"),
        at(shop, "cart/B"),
        at(chat, "room/a"),
        at(shop, "cart/a"),
        at(shop, "cart/a b"),
        at(shop, "user/a"),
        at(chat, "lobby/z"),
    ];
    beat(s, "n1", NOW).await;
    for a in &mine {
        won(take(s, a, Create::ANY, "n1").await);
    }
    // Not n1's: another node's, a deleted one, a released one.
    won(take(s, &at(shop, "cart/b"), Create::ANY, "n2").await);
    let deleted = won(take(s, &at(shop, "cart/c"), Create::ANY, "n1").await);
    s.delete_actor(&at(shop, "cart/c"), deleted).await.unwrap();
    let released = won(take(s, &at(shop, "cart/d"), Create::ANY, "n1").await);
    assert!(s.release(&at(shop, "cart/d"), released).await.unwrap());

    let mut expected = mine.to_vec();
    expected.sort();
    let mut paged = Vec::new();
    let mut after: Option<ActorKey> = None;
    loop {
        let page = s.owned_by("n1", after.as_ref(), 2).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last().cloned() else { break };
        paged.extend(page);
        after = Some(last);
    }
    assert_eq!(paged, expected);
    assert_eq!(s.owned_by("n1", None, 100).await.unwrap(), expected);
    assert_eq!(s.owned_by("n2", None, 100).await.unwrap(), [at(shop, "cart/b")]);
    assert_eq!(s.owned_by("n3", None, 100).await.unwrap(), vec![]);
}

pub async fn concurrent_takes_leave_exactly_one_owner(s: &dyn Store) {
    let nodes = ["n1", "n2", "n3", "n4"];
    for node in nodes {
        beat(s, node, NOW).await;
    }
    beat(s, "n0", DEAD_BEFORE - 1).await;
    warm(s).await;
    for round in 0..ROUNDS {
        // A missing actor, created by one of them; then one whose owner died.
        let fresh = key(&format!("fresh{round}"));
        let orphan = key(&format!("orphan{round}"));
        let dead = owned(s, &orphan, "n0").await;
        for (a, create) in [(&fresh, Create::ANY), (&orphan, Create::No)] {
            let (t1, t2, t3, t4) = tokio::join!(
                take(s, a, create, "n1"),
                take(s, a, create, "n2"),
                take(s, a, create, "n3"),
                take(s, a, create, "n4")
            );
            let takes = [t1, t2, t3, t4];
            let winners: Vec<usize> = (0..4).filter(|i| matches!(takes[*i], Take::Owned { .. })).collect();
            assert_eq!(winners.len(), 1, "round {round}, {a}: {takes:?}");
            let winner = nodes[winners[0]];
            let epoch = won(takes[winners[0]].clone());
            for (i, t) in takes.iter().enumerate() {
                if i != winners[0] {
                    assert_eq!(*t, elsewhere(winner), "round {round}, {a}");
                }
            }
            assert_eq!(s.owner(a).await.unwrap().as_deref(), Some(winner));
            // The winner's epoch is the only one a commit is accepted under.
            for e in 1..=epoch.0 + 1 {
                let outcome = commit(s, a, Epoch(e), &batch(&[("k", None)])).await;
                if e == epoch.0 {
                    outcome.unwrap();
                } else {
                    assert_eq!(outcome, Err(StoreError::Fenced), "round {round}, {a}, epoch {e}");
                }
            }
        }
        assert_eq!(commit(s, &orphan, dead, &batch(&[("k", None)])).await, Err(StoreError::Fenced));
    }
}

fn created(wake: &Wake) -> bool {
    matches!(wake, Wake::Owned { created: true, .. })
}

pub async fn creations_keep_to_their_tenants_bound_and_a_deletion_frees_a_place(s: &dyn Store) {
    let shop = s.ensure_app("acme", "shop").await.unwrap();
    let chat = s.ensure_app("acme", "chat").await.unwrap();
    let elsewhere = s.ensure_app("other", "shop").await.unwrap();
    let at = |app: AppId, name: &str| ActorKey { app, address: Address::parse(&format!("c/{name}")).unwrap() };
    let counts = async || (s.app_actors(shop).await.unwrap(), s.app_actors(chat).await.unwrap());
    let three = Create::Within(3);
    // Three places, shared by the tenant's apps.
    for a in [at(shop, "a"), at(shop, "b"), at(chat, "c")] {
        assert!(created(&s.wake(&a, three, "n1").await.unwrap()), "{a}");
    }
    assert_eq!(counts().await, (2, 1));
    let d = at(chat, "d");
    assert_eq!(s.wake(&d, three, "n1").await.unwrap(), Wake::Full);
    assert_eq!(take(s, &d, three, "n1").await, Take::Full);
    // Refused means nothing of it was written.
    assert_eq!(s.actor(&d).await.unwrap(), None);
    assert_eq!(s.wake(&d, Create::No, "n1").await.unwrap(), Wake::Missing);
    assert_eq!(counts().await, (2, 1));
    // An actor that exists is woken whatever the bound, a lowered one too.
    let woken = s.wake(&at(shop, "a"), Create::Within(1), "n1").await.unwrap();
    assert!(matches!(woken, Wake::Owned { created: false, .. }), "{woken:?}");
    // Another tenant's places are its own.
    assert!(created(&s.wake(&at(elsewhere, "a"), three, "n1").await.unwrap()));
    // A deletion frees its place at once: the deleted actor's record
    // stays (a state, not an absence) and holds none.
    let b = at(shop, "b");
    let Wake::Owned { epoch, .. } = s.wake(&b, Create::No, "n2").await.unwrap() else { panic!() };
    s.delete_actor(&b, epoch).await.unwrap();
    assert_eq!(counts().await, (1, 1));
    assert!(created(&s.wake(&d, three, "n1").await.unwrap()));
    // Bringing the deleted one back is a creation: refused when full,
    // let in by a wider bound.
    assert_eq!(s.wake(&b, three, "n1").await.unwrap(), Wake::Full);
    assert!(created(&s.wake(&b, Create::Within(4), "n1").await.unwrap()));
    // What no bound refuses is counted all the same.
    assert!(created(&s.wake(&at(chat, "e"), Create::ANY, "n1").await.unwrap()));
    assert_eq!(counts().await, (2, 3));
    assert_eq!(s.wake(&at(shop, "f"), Create::Within(5), "n1").await.unwrap(), Wake::Full);
    // Deleting an app frees its actors' places.
    s.delete_app(chat).await.unwrap();
    assert_eq!(counts().await, (2, 0));
    assert!(created(&s.wake(&at(shop, "f"), three, "n1").await.unwrap()));
    assert_eq!(s.wake(&at(shop, "g"), three, "n1").await.unwrap(), Wake::Full);
    assert_eq!(s.app_actors(elsewhere).await.unwrap(), 1);
    assert_eq!(s.app_actors(AppId(shop.0 + 1000)).await.unwrap(), 0);
}

pub async fn concurrent_creations_never_pass_the_bound(s: &dyn Store) {
    warm(s).await;
    let three = Create::Within(3);
    for round in 0..ROUNDS {
        let tenant = format!("t{round}");
        let (x, y) = (s.ensure_app(&tenant, "x").await.unwrap(), s.ensure_app(&tenant, "y").await.unwrap());
        let at = |app: AppId, name: &str| ActorKey { app, address: Address::parse(&format!("c/{name}")).unwrap() };
        let live = async || s.app_actors(x).await.unwrap() + s.app_actors(y).await.unwrap();
        // Four actors of two apps created at once (as four nodes would),
        // for three places.
        let keys = [at(x, "a"), at(x, "b"), at(y, "c"), at(y, "d")];
        let (w1, w2, w3, w4) = tokio::join!(
            s.wake(&keys[0], three, "n1"),
            s.wake(&keys[1], three, "n2"),
            s.wake(&keys[2], three, "n3"),
            s.wake(&keys[3], three, "n4")
        );
        let wakes = [w1, w2, w3, w4].map(Result::unwrap);
        let made: Vec<usize> = (0..4).filter(|i| created(&wakes[*i])).collect();
        assert_eq!(made.len(), 3, "round {round}: {wakes:?}");
        assert_eq!(wakes.iter().filter(|w| **w == Wake::Full).count(), 1, "round {round}: {wakes:?}");
        assert_eq!(live().await, 3, "round {round}");
        // One goes; four creations of one actor at once take its place
        // once, and each owns it in turn.
        let Wake::Owned { epoch, .. } = wakes[made[0]] else { unreachable!() };
        s.delete_actor(&keys[made[0]], epoch).await.unwrap();
        let e = at(y, "e");
        let (w1, w2, w3, w4) = tokio::join!(
            s.wake(&e, three, "n1"),
            s.wake(&e, three, "n2"),
            s.wake(&e, three, "n3"),
            s.wake(&e, three, "n4")
        );
        let wakes = [w1, w2, w3, w4].map(Result::unwrap);
        assert!(wakes.iter().all(|w| matches!(w, Wake::Owned { .. })), "round {round}: {wakes:?}");
        assert_eq!(wakes.iter().filter(|w| created(w)).count(), 1, "round {round}: {wakes:?}");
        assert_eq!(live().await, 3, "round {round}");
        // Full again: four creations at once of one more are all refused.
        let f = at(x, "f");
        let (w1, w2, w3, w4) = tokio::join!(
            s.wake(&f, three, "n1"),
            s.wake(&f, three, "n2"),
            s.wake(&f, three, "n3"),
            s.wake(&f, three, "n4")
        );
        assert_eq!([w1, w2, w3, w4].map(Result::unwrap), [Wake::Full; 4], "round {round}");
        assert_eq!(live().await, 3, "round {round}");
    }
}
