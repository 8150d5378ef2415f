//! The cluster's store: PostgreSQL, shared by every node.
//!
//! The SQL is written for PostgreSQL 15 and kept to what CockroachDB and
//! YugabyteDB also accept: plain types (`TEXT`, `BIGINT`, `BYTEA`,
//! `BOOLEAN`), `ON CONFLICT` upserts, row locks (`FOR UPDATE`), no
//! advisory locks, no `LISTEN/NOTIFY`. Every transaction is retried on a
//! serialization failure or a deadlock (SQLSTATE `40001`, `40P01`), which
//! those engines raise where PostgreSQL would wait, and when an insert
//! finds the row it was to create made meanwhile (there was no row to lock).
//!
//! Keys, classes and names compare byte by byte (`COLLATE "C"`), as the
//! embedded store's do, whatever the database's locale: listings page in
//! the same order on both stores.
//!
//! A commit is durable when PostgreSQL answers it (`synchronous_commit`
//! as the server is configured): [`ActorStore::mark`] and
//! [`ActorStore::durable`] keep their defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Transaction};
use tokio_postgres::error::SqlState;
use tokio_postgres::{NoTls, Row};
use wasmkeep_core::{ActorKey, AppId};

use crate::{
    ActorRecord, ActorStore, AppRecord, AppStore, ClusterStore, Create, Epoch, Held, Revoked, StorageBudget,
    StoreError, Stored, StoredVersion, Take, TenantRecord, TenantStore, TokenRecord, UsageCounts, Wake, WriteBatch,
    actor_key, named, plan_take, stored_ms, wake_of,
};

/// The schema's steps, in order; `wasmkeep_schema` records those applied.
/// A step never changes once released: a new one is added.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE tenants (
        id TEXT COLLATE \"C\" PRIMARY KEY,
        plan TEXT NOT NULL DEFAULT 'free',
        suspended BOOLEAN NOT NULL DEFAULT FALSE,
        created BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE apps (
        id BIGSERIAL PRIMARY KEY,
        tenant TEXT COLLATE \"C\" NOT NULL REFERENCES tenants (id),
        name TEXT COLLATE \"C\" NOT NULL,
        active BIGINT,
        bytes BIGINT NOT NULL DEFAULT 0,
        UNIQUE (tenant, name)
    );
    CREATE TABLE components (hash TEXT PRIMARY KEY, bytes BYTEA NOT NULL);
    CREATE TABLE versions (
        app BIGINT NOT NULL, number BIGINT NOT NULL, manifest TEXT NOT NULL,
        PRIMARY KEY (app, number)
    );
    CREATE TABLE version_components (
        app BIGINT NOT NULL, number BIGINT NOT NULL, role TEXT NOT NULL, hash TEXT NOT NULL,
        PRIMARY KEY (app, number, role)
    );
    CREATE TABLE actors (
        app BIGINT NOT NULL, class TEXT COLLATE \"C\" NOT NULL, name TEXT COLLATE \"C\" NOT NULL,
        state TEXT NOT NULL, owner TEXT NOT NULL, epoch BIGINT NOT NULL,
        bytes BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (app, class, name)
    );
    CREATE TABLE kv (
        app BIGINT NOT NULL, class TEXT COLLATE \"C\" NOT NULL, name TEXT COLLATE \"C\" NOT NULL,
        key TEXT COLLATE \"C\" NOT NULL, value BYTEA NOT NULL,
        PRIMARY KEY (app, class, name, key)
    );
    CREATE TABLE tokens (
        id TEXT PRIMARY KEY, tenant TEXT, scope TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE, created BIGINT NOT NULL
    );
    CREATE TABLE sealed_values (
        app BIGINT NOT NULL, name TEXT NOT NULL, sealed BYTEA NOT NULL,
        PRIMARY KEY (app, name)
    );
    CREATE TABLE usage (
        app BIGINT NOT NULL, period TEXT NOT NULL,
        requests BIGINT NOT NULL, events BIGINT NOT NULL,
        cpu_micros BIGINT NOT NULL, wall_micros BIGINT NOT NULL,
        egress_requests BIGINT NOT NULL, egress_bytes BIGINT NOT NULL,
        PRIMARY KEY (app, period)
    );
",
    // 2: the cluster's membership (each node's last heartbeat) and the
    // actors each node owns, for a takeover's and a drain's scans.
    "
    CREATE TABLE nodes (
        id TEXT COLLATE \"C\" PRIMARY KEY, record TEXT NOT NULL, sent_ms BIGINT NOT NULL
    );
    CREATE INDEX actors_by_owner ON actors (owner, app, class, name);
",
    // 3: each tenant's own trace export, sealed.
    "
    ALTER TABLE tenants ADD COLUMN telemetry BYTEA;
",
    // 4: live actors kept per app, for the tenant's bound on them (a
    // count over the actors on every creation would grow with them).
    "
    ALTER TABLE apps ADD COLUMN actors BIGINT NOT NULL DEFAULT 0;
    UPDATE apps SET actors = (SELECT COUNT(*) FROM actors WHERE actors.app = apps.id AND actors.state = 'live');
",
];

/// How many times a transaction is tried when the engine asks for a retry.
const ATTEMPTS: u32 = 10;

/// Connections a node keeps to the store, by default.
pub const POOL_SIZE: usize = 16;

/// Why a transaction's body stopped: the engine, or the store's own rule.
enum Fail {
    Db(tokio_postgres::Error),
    Store(StoreError),
    /// A row the body looked for and did not find was written meanwhile
    /// (an insert found it taken): the body runs again, in a transaction
    /// that sees it.
    Again,
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Db(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// The engine's words for a failure, without the connection string or
/// anything else of the configuration.
fn backend(e: &tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Backend(format!("postgres: {} ({})", db.message(), db.code().code())),
        None => StoreError::Backend(format!("postgres: {e}")),
    }
}

impl From<Fail> for StoreError {
    fn from(f: Fail) -> Self {
        match f {
            Fail::Db(e) => backend(&e),
            Fail::Store(e) => e,
            Fail::Again => StoreError::Backend("postgres: a transaction kept finding its rows moved".into()),
        }
    }
}

fn retryable(f: &Fail) -> bool {
    matches!(f, Fail::Again)
        || matches!(f, Fail::Db(e) if matches!(e.code(), Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED))
}

/// Runs `$body` (an expression of type `Result<T, Fail>`, with `$tx` the
/// transaction) in a transaction, again from the start when the engine
/// asks for a retry; answers `Result<T, StoreError>`.
macro_rules! transact {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let outcome: Result<_, Fail> = async {
                let mut client = $store.client().await?;
                let owned = client.transaction().await?;
                let out = async {
                    let $tx = &owned;
                    let out: Result<_, Fail> = $body;
                    out
                }
                .await?;
                owned.commit().await?;
                Ok(out)
            }
            .await;
            match outcome {
                Err(f) if retryable(&f) && attempt < ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(2 << attempt.min(6))).await;
                }
                other => break other.map_err(StoreError::from),
            }
        }
    }};
}

/// Runs `$body` (of type `Result<T, Fail>`, with `$c` a pooled connection)
/// outside a transaction: PostgreSQL runs each statement in its own.
macro_rules! run {
    ($store:expr, |$c:ident| $body:expr) => {{
        let outcome: Result<_, Fail> = async {
            let client = $store.client().await?;
            let $c = &client;
            let out: Result<_, Fail> = $body;
            out
        }
        .await;
        outcome.map_err(StoreError::from)
    }};
}

/// The PostgreSQL store: a pool of connections to one database.
pub struct PostgresStore {
    pool: Pool,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db`) with up to
    /// `pool_size` connections, and brings the schema up to date.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|e| StoreError::Backend(format!("the store's URL: {e}")))?;
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Backend(format!("the store's pool: {e}")))?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => backend(&e),
            e => StoreError::Backend(format!("postgres: {e}")),
        })
    }

    /// Applies the steps not yet applied, one node at a time: each step's
    /// transaction first inserts its row in `wasmkeep_schema`, so a second
    /// node doing the same waits on that row and then finds it taken.
    async fn migrate(&self) -> Result<(), StoreError> {
        for attempt in 0.. {
            let created = run!(self, |c| {
                c.batch_execute("CREATE TABLE IF NOT EXISTS wasmkeep_schema (step BIGINT PRIMARY KEY)").await?;
                Ok(())
            });
            match created {
                Ok(()) => break,
                // Two nodes creating the table at once: one loses the race.
                Err(_) if attempt < 5 => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => return Err(e),
            }
        }
        for (i, step) in MIGRATIONS.iter().enumerate() {
            let number = i as i64 + 1;
            let outcome = transact!(self, |tx| {
                let taken = tx
                    .execute("INSERT INTO wasmkeep_schema (step) VALUES ($1) ON CONFLICT DO NOTHING", &[&number])
                    .await?;
                if taken == 1 {
                    tx.batch_execute(step).await?;
                }
                Ok(())
            });
            outcome.map_err(|e| StoreError::Backend(format!("the store's schema, step {number}: {e}")))?;
        }
        Ok(())
    }
}

fn parts(a: &ActorKey) -> (i64, &str, &str) {
    (a.app.0, a.address.class.as_str(), a.address.name.as_str())
}

/// Locks the actor's row and fails with `Fenced` unless `epoch` is its
/// current one and it is live.
async fn check_epoch(tx: &Transaction<'_>, actor: &ActorKey, epoch: Epoch) -> Result<(), Fail> {
    let (app, class, name) = parts(actor);
    let stmt = tx
        .prepare_cached(
            "SELECT epoch FROM actors WHERE app = $1 AND class = $2 AND name = $3 AND state = 'live' FOR UPDATE",
        )
        .await?;
    let current: Option<i64> = tx.query_opt(&stmt, &[&app, &class, &name]).await?.map(|r| r.get(0));
    if current == Some(epoch.0) { Ok(()) } else { Err(StoreError::Fenced.into()) }
}

/// Takes the actor for `node` in `tx` (the compare-and-set of
/// [`ClusterStore::take`], and a wake): its row is locked first, so takes
/// of one actor run one after the other, each seeing the last one's owner.
/// With `dead_before`, an owner other than `node` whose heartbeat was sent
/// at or after it keeps the actor; without, any owner gives way (a wake).
async fn take_in(
    tx: &Transaction<'_>,
    actor: &ActorKey,
    create: Create,
    node: &str,
    dead_before: Option<i64>,
) -> Result<Take, Fail> {
    let (app, class, name) = parts(actor);
    let stmt = tx
        .prepare_cached("SELECT state, owner, epoch FROM actors WHERE app = $1 AND class = $2 AND name = $3 FOR UPDATE")
        .await?;
    let held = tx.query_opt(&stmt, &[&app, &class, &name]).await?.map(|r| Held {
        live: r.get::<_, &str>(0) == "live",
        owner: r.get(1),
        epoch: r.get(2),
    });
    // A statement of its own, after the lock: under READ COMMITTED it sees
    // the heartbeats committed up to now, the new owner's among them when
    // the lock was waited for.
    let owner_alive = match (held.as_ref().and_then(|h| h.other_owner(node)), dead_before) {
        (Some(owner), Some(before)) => {
            let stmt = tx.prepare_cached("SELECT sent_ms FROM nodes WHERE id = $1").await?;
            tx.query_opt(&stmt, &[&owner]).await?.is_some_and(|r| r.get::<_, i64>(0) >= before)
        }
        _ => false,
    };
    let (epoch, created) = match plan_take(held.as_ref(), create.wanted(), owner_alive) {
        Ok(plan) => plan,
        Err(answer) => return Ok(answer),
    };
    if created && create.bound().is_some() {
        // Bounded creations of one tenant take turns on its row (as its
        // growing commits do), so two of them on different nodes never
        // both see room for one; the count, a statement after the lock,
        // sees the last one's.
        let stmt = tx
            .prepare_cached("SELECT 1 FROM tenants WHERE id = (SELECT tenant FROM apps WHERE id = $1) FOR UPDATE")
            .await?;
        tx.query_opt(&stmt, &[&app]).await?;
        let stmt = tx
            .prepare_cached(
                "SELECT COALESCE(SUM(actors), 0)::BIGINT FROM apps
                 WHERE tenant = (SELECT tenant FROM apps WHERE id = $1)",
            )
            .await?;
        let live: i64 = tx.query_one(&stmt, &[&app]).await?.get(0);
        if !create.admits(live.max(0) as u64) {
            // A take creating this very actor may have held the lock: then
            // the actor exists now, and this take runs again to find it.
            let stmt = tx
                .prepare_cached("SELECT 1 FROM actors WHERE app = $1 AND class = $2 AND name = $3 AND state = 'live'")
                .await?;
            if tx.query_opt(&stmt, &[&app, &class, &name]).await?.is_some() {
                return Err(Fail::Again);
            }
            return Ok(Take::Full);
        }
    }
    if held.is_some() {
        let stmt = tx
            .prepare_cached(
                "UPDATE actors SET state = 'live', owner = $4, epoch = $5 WHERE app = $1 AND class = $2 AND name = $3",
            )
            .await?;
        tx.execute(&stmt, &[&app, &class, &name, &node, &epoch]).await?;
    } else {
        // No row to lock: two takes creating the actor at once both get
        // here, and the second one's insert finds the first one's row.
        let stmt = tx
            .prepare_cached(
                "INSERT INTO actors (app, class, name, state, owner, epoch) VALUES ($1, $2, $3, 'live', $4, $5)
                 ON CONFLICT (app, class, name) DO NOTHING",
            )
            .await?;
        if tx.execute(&stmt, &[&app, &class, &name, &node, &epoch]).await? == 0 {
            return Err(Fail::Again);
        }
    }
    if created {
        let stmt = tx.prepare_cached("UPDATE apps SET actors = actors + 1 WHERE id = $1").await?;
        tx.execute(&stmt, &[&app]).await?;
    }
    Ok(Take::Owned { epoch: Epoch(epoch), created })
}

/// What the actor and its tenant store before `batch`, and how many bytes
/// `batch` adds (negative: frees).
async fn growth(
    tx: &impl deadpool_postgres::GenericClient,
    actor: &ActorKey,
    batch: &WriteBatch,
) -> Result<(Stored, i64), Fail> {
    let (app, class, name) = parts(actor);
    let stmt = tx.prepare_cached("SELECT bytes FROM actors WHERE app = $1 AND class = $2 AND name = $3").await?;
    let actor_bytes: i64 = tx.query_opt(&stmt, &[&app, &class, &name]).await?.map_or(0, |r| r.get(0));
    let stmt = tx
        .prepare_cached(
            "SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM apps WHERE tenant = (SELECT tenant FROM apps WHERE id = $1)",
        )
        .await?;
    let tenant_bytes: i64 = tx.query_one(&stmt, &[&app]).await?.get(0);
    let mut growth = if batch.clear { -actor_bytes } else { 0 };
    if !batch.clear && !batch.writes.is_empty() {
        let keys: Vec<&str> = batch.writes.keys().map(String::as_str).collect();
        let stmt = tx
            .prepare_cached(
                "SELECT key, (octet_length(key) + octet_length(value))::BIGINT FROM kv
                 WHERE app = $1 AND class = $2 AND name = $3 AND key = ANY($4)",
            )
            .await?;
        for row in tx.query(&stmt, &[&app, &class, &name, &keys]).await? {
            growth -= row.get::<_, i64>(1);
        }
    }
    for (key, value) in &batch.writes {
        growth += value.as_ref().map_or(0, |v| (key.len() + v.len()) as i64);
    }
    let before = Stored { actor: actor_bytes.max(0) as u64, tenant: tenant_bytes.max(0) as u64 };
    Ok((before, growth))
}

#[async_trait]
impl ActorStore for PostgresStore {
    async fn wake(&self, actor: &ActorKey, create: Create, node: &str) -> Result<Wake, StoreError> {
        transact!(self, |tx| take_in(tx, actor, create, node, None).await).map(wake_of)
    }

    async fn get(&self, actor: &ActorKey, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (app, class, name) = parts(actor);
        run!(self, |c| {
            let stmt = c
                .prepare_cached("SELECT value FROM kv WHERE app = $1 AND class = $2 AND name = $3 AND key = $4")
                .await?;
            Ok(c.query_opt(&stmt, &[&app, &class, &name, &key]).await?.map(|r| r.get(0)))
        })
    }

    async fn list(
        &self,
        actor: &ActorKey,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let (app, class, name) = parts(actor);
        let limit = limit as i64;
        run!(self, |c| {
            let stmt = c
                .prepare_cached(
                    "SELECT key, value FROM kv
                     WHERE app = $1 AND class = $2 AND name = $3 AND key >= $4 AND ($5::TEXT IS NULL OR key > $5)
                     ORDER BY key LIMIT $6",
                )
                .await?;
            let rows = c.query(&stmt, &[&app, &class, &name, &prefix, &after, &limit]).await?;
            // Keys are sorted, so the first key past the prefix ends the page.
            Ok(rows
                .into_iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, Vec<u8>>(1)))
                .take_while(|(k, _)| k.starts_with(prefix))
                .collect())
        })
    }

    async fn commit(
        &self,
        actor: &ActorKey,
        epoch: Epoch,
        batch: &WriteBatch,
        budget: StorageBudget,
    ) -> Result<Stored, StoreError> {
        let (app, class, name) = parts(actor);
        transact!(self, |tx| {
            check_epoch(tx, actor, epoch).await?;
            if !budget.is_unbounded() {
                // Growing commits of one tenant take turns on its row, so
                // two of them on different nodes never both pass its bound.
                let stmt = tx
                    .prepare_cached(
                        "SELECT 1 FROM tenants WHERE id = (SELECT tenant FROM apps WHERE id = $1) FOR UPDATE",
                    )
                    .await?;
                tx.query_opt(&stmt, &[&app]).await?;
            }
            let (before, growth) = growth(tx, actor, batch).await?;
            let after = before.grown(growth);
            budget.check(after, growth).map_err(StoreError::OverBudget)?;
            if batch.clear {
                let stmt = tx.prepare_cached("DELETE FROM kv WHERE app = $1 AND class = $2 AND name = $3").await?;
                tx.execute(&stmt, &[&app, &class, &name]).await?;
            }
            for (key, value) in &batch.writes {
                match value {
                    Some(v) => {
                        let stmt = tx
                            .prepare_cached(
                                "INSERT INTO kv (app, class, name, key, value) VALUES ($1, $2, $3, $4, $5)
                                 ON CONFLICT (app, class, name, key) DO UPDATE SET value = EXCLUDED.value",
                            )
                            .await?;
                        tx.execute(&stmt, &[&app, &class, &name, key, v]).await?;
                    }
                    None => {
                        let stmt = tx
                            .prepare_cached("DELETE FROM kv WHERE app = $1 AND class = $2 AND name = $3 AND key = $4")
                            .await?;
                        tx.execute(&stmt, &[&app, &class, &name, key]).await?;
                    }
                }
            }
            if growth != 0 {
                let stmt = tx
                    .prepare_cached("UPDATE actors SET bytes = bytes + $4 WHERE app = $1 AND class = $2 AND name = $3")
                    .await?;
                tx.execute(&stmt, &[&app, &class, &name, &growth]).await?;
                let stmt = tx.prepare_cached("UPDATE apps SET bytes = bytes + $2 WHERE id = $1").await?;
                tx.execute(&stmt, &[&app, &growth]).await?;
            }
            Ok(after)
        })
    }

    async fn stored(&self, actor: &ActorKey, batch: &WriteBatch) -> Result<(Stored, i64), StoreError> {
        let client = self.client().await?;
        growth(&client, actor, batch).await.map_err(StoreError::from)
    }

    async fn delete_actor(&self, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError> {
        let (app, class, name) = parts(actor);
        transact!(self, |tx| {
            check_epoch(tx, actor, epoch).await?;
            tx.execute("DELETE FROM kv WHERE app = $1 AND class = $2 AND name = $3", &[&app, &class, &name]).await?;
            // Its place among its tenant's actors is free at once.
            tx.execute(
                "UPDATE apps SET bytes = bytes - (SELECT bytes FROM actors WHERE app = $1 AND class = $2 AND name = $3),
                                 actors = actors - 1
                 WHERE id = $1",
                &[&app, &class, &name],
            )
            .await?;
            tx.execute(
                "UPDATE actors SET state = 'deleted', bytes = 0 WHERE app = $1 AND class = $2 AND name = $3",
                &[&app, &class, &name],
            )
            .await?;
            Ok(())
        })
    }

    async fn actors(
        &self,
        app: AppId,
        class: Option<&str>,
        prefix: &str,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<ActorRecord>, StoreError> {
        let (after_class, after_name) = after.unwrap_or(("", ""));
        // The name range [prefix, prefix + U+10FFFF) holds exactly the
        // names starting with `prefix` (byte order is code point order).
        let end = format!("{prefix}\u{10FFFF}");
        let limit = limit as i64;
        run!(self, |c| {
            let rows = c
                .query(
                    &format!(
                        "{ACTOR_COLUMNS}
                         WHERE a.app = $1 AND a.state = 'live' AND ($2::TEXT IS NULL OR a.class = $2)
                           AND a.name >= $3 AND a.name < $4
                           AND (a.class > $5 OR (a.class = $5 AND a.name > $6))
                         ORDER BY a.class, a.name LIMIT $7"
                    ),
                    &[&app.0, &class, &prefix, &end, &after_class, &after_name, &limit],
                )
                .await?;
            Ok(rows.iter().map(actor_record).collect())
        })
    }

    async fn actor(&self, actor: &ActorKey) -> Result<Option<ActorRecord>, StoreError> {
        let (app, class, name) = parts(actor);
        run!(self, |c| {
            let row = c
                .query_opt(
                    &format!("{ACTOR_COLUMNS} WHERE a.app = $1 AND a.class = $2 AND a.name = $3 AND a.state = 'live'"),
                    &[&app, &class, &name],
                )
                .await?;
            Ok(row.as_ref().map(actor_record))
        })
    }

    async fn app_bytes(&self, app: AppId) -> Result<u64, StoreError> {
        run!(self, |c| {
            let row = c.query_opt("SELECT bytes FROM apps WHERE id = $1", &[&app.0]).await?;
            Ok(row.map_or(0, |r| r.get::<_, i64>(0)).max(0) as u64)
        })
    }

    async fn app_actors(&self, app: AppId) -> Result<u64, StoreError> {
        run!(self, |c| {
            let row = c.query_opt("SELECT actors FROM apps WHERE id = $1", &[&app.0]).await?;
            Ok(row.map_or(0, |r| r.get::<_, i64>(0)).max(0) as u64)
        })
    }
}

#[async_trait]
impl ClusterStore for PostgresStore {
    async fn beat(&self, node: &str, record: &str, sent_ms: u64) -> Result<(), StoreError> {
        named(node)?;
        let sent = stored_ms(sent_ms);
        run!(self, |c| {
            let stmt = c
                .prepare_cached(
                    "INSERT INTO nodes (id, record, sent_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, sent_ms = EXCLUDED.sent_ms",
                )
                .await?;
            c.execute(&stmt, &[&node, &record, &sent]).await?;
            Ok(())
        })
    }

    async fn heartbeats(&self) -> Result<Vec<(String, String, u64)>, StoreError> {
        run!(self, |c| {
            let rows = c.query("SELECT id, record, sent_ms FROM nodes ORDER BY id", &[]).await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get::<_, i64>(2).max(0) as u64)).collect())
        })
    }

    async fn forget_nodes(&self, before_ms: u64) -> Result<u64, StoreError> {
        let before = stored_ms(before_ms);
        run!(self, |c| Ok(c.execute("DELETE FROM nodes WHERE sent_ms < $1", &[&before]).await?))
    }

    async fn take(
        &self,
        actor: &ActorKey,
        create: Create,
        node: &str,
        dead_before_ms: u64,
    ) -> Result<Take, StoreError> {
        named(node)?;
        let before = stored_ms(dead_before_ms);
        transact!(self, |tx| take_in(tx, actor, create, node, Some(before)).await)
    }

    async fn owner(&self, actor: &ActorKey) -> Result<Option<String>, StoreError> {
        let (app, class, name) = parts(actor);
        run!(self, |c| {
            let stmt = c
                .prepare_cached(
                    "SELECT owner FROM actors WHERE app = $1 AND class = $2 AND name = $3 AND state = 'live'",
                )
                .await?;
            let owner: Option<String> = c.query_opt(&stmt, &[&app, &class, &name]).await?.map(|r| r.get(0));
            Ok(owner.filter(|o| !o.is_empty()))
        })
    }

    async fn release(&self, actor: &ActorKey, epoch: Epoch) -> Result<bool, StoreError> {
        let (app, class, name) = parts(actor);
        run!(self, |c| {
            let stmt = c
                .prepare_cached(
                    "UPDATE actors SET owner = '', epoch = epoch + 1
                     WHERE app = $1 AND class = $2 AND name = $3 AND epoch = $4",
                )
                .await?;
            Ok(c.execute(&stmt, &[&app, &class, &name, &epoch.0]).await? == 1)
        })
    }

    async fn owned_by(&self, node: &str, after: Option<&ActorKey>, limit: usize) -> Result<Vec<ActorKey>, StoreError> {
        let (after_app, after_class, after_name) = match after {
            Some(a) => {
                let (app, class, name) = parts(a);
                (Some(app), class, name)
            }
            None => (None, "", ""),
        };
        let limit = limit as i64;
        let rows = run!(self, |c| {
            let stmt = c
                .prepare_cached(
                    "SELECT app, class, name FROM actors
                     WHERE owner = $1 AND state = 'live'
                       AND ($2::BIGINT IS NULL OR app > $2
                            OR (app = $2 AND (class > $3 OR (class = $3 AND name > $4))))
                     ORDER BY app, class, name LIMIT $5",
                )
                .await?;
            Ok(c.query(&stmt, &[&node, &after_app, &after_class, &after_name, &limit]).await?)
        })?;
        rows.iter().map(|r| actor_key(r.get(0), r.get(1), r.get(2))).collect()
    }
}

/// An actor as the control plane lists it: what `actor_record` reads.
const ACTOR_COLUMNS: &str = "SELECT a.class, a.name, a.owner,
        (SELECT COUNT(*) FROM kv WHERE kv.app = a.app AND kv.class = a.class AND kv.name = a.name),
        a.bytes
    FROM actors a";

fn actor_record(r: &Row) -> ActorRecord {
    let count = |i: usize| r.get::<_, i64>(i).max(0) as u64;
    ActorRecord { class: r.get(0), name: r.get(1), owner: r.get(2), keys: count(3), bytes: count(4) }
}

fn app_record(r: &Row) -> AppRecord {
    AppRecord { id: AppId(r.get(0)), tenant: r.get(1), name: r.get(2), active: r.get(3) }
}

async fn stored_version(
    c: &impl deadpool_postgres::GenericClient,
    app: AppId,
    number: i64,
) -> Result<Option<StoredVersion>, Fail> {
    let Some(row) =
        c.query_opt("SELECT manifest FROM versions WHERE app = $1 AND number = $2", &[&app.0, &number]).await?
    else {
        return Ok(None);
    };
    let components = c
        .query("SELECT role, hash FROM version_components WHERE app = $1 AND number = $2", &[&app.0, &number])
        .await?
        .into_iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    Ok(Some(StoredVersion { number, manifest: row.get(0), components }))
}

#[async_trait]
impl AppStore for PostgresStore {
    async fn ensure_app(&self, tenant: &str, name: &str) -> Result<AppId, StoreError> {
        transact!(self, |tx| {
            tx.execute("INSERT INTO tenants (id) VALUES ($1) ON CONFLICT DO NOTHING", &[&tenant]).await?;
            tx.execute("INSERT INTO apps (tenant, name) VALUES ($1, $2) ON CONFLICT DO NOTHING", &[&tenant, &name])
                .await?;
            let row = tx.query_one("SELECT id FROM apps WHERE tenant = $1 AND name = $2", &[&tenant, &name]).await?;
            Ok(AppId(row.get(0)))
        })
    }

    async fn put_component(&self, hash: &str, bytes: &[u8]) -> Result<(), StoreError> {
        run!(self, |c| {
            c.execute("INSERT INTO components (hash, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING", &[&hash, &bytes])
                .await?;
            Ok(())
        })
    }

    async fn component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        run!(self, |c| {
            Ok(c.query_opt("SELECT bytes FROM components WHERE hash = $1", &[&hash]).await?.map(|r| r.get(0)))
        })
    }

    async fn add_version(
        &self,
        app: AppId,
        manifest: &str,
        components: &BTreeMap<String, String>,
    ) -> Result<i64, StoreError> {
        transact!(self, |tx| {
            // Two uploads at once take turns on the app's row for a number.
            tx.query_opt("SELECT 1 FROM apps WHERE id = $1 FOR UPDATE", &[&app.0]).await?;
            let number: i64 = tx
                .query_one("SELECT COALESCE(MAX(number), 0)::BIGINT + 1 FROM versions WHERE app = $1", &[&app.0])
                .await?
                .get(0);
            tx.execute(
                "INSERT INTO versions (app, number, manifest) VALUES ($1, $2, $3)",
                &[&app.0, &number, &manifest],
            )
            .await?;
            for (role, hash) in components {
                tx.execute(
                    "INSERT INTO version_components (app, number, role, hash) VALUES ($1, $2, $3, $4)",
                    &[&app.0, &number, role, hash],
                )
                .await?;
            }
            Ok(number)
        })
    }

    async fn activate(&self, app: AppId, version: i64) -> Result<(), StoreError> {
        let n = run!(self, |c| {
            Ok(c.execute(
                "UPDATE apps SET active = $2
                 WHERE id = $1 AND EXISTS (SELECT 1 FROM versions WHERE app = $1 AND number = $2)",
                &[&app.0, &version],
            )
            .await?)
        })?;
        if n == 1 { Ok(()) } else { Err(StoreError::Backend(format!("app {app} has no version {version}"))) }
    }

    async fn active_version(&self, app: AppId) -> Result<Option<StoredVersion>, StoreError> {
        run!(self, |c| {
            let active: Option<i64> =
                c.query_opt("SELECT active FROM apps WHERE id = $1", &[&app.0]).await?.and_then(|r| r.get(0));
            match active {
                Some(number) => stored_version(c, app, number).await,
                None => Ok(None),
            }
        })
    }

    async fn version(&self, app: AppId, number: i64) -> Result<Option<StoredVersion>, StoreError> {
        run!(self, |c| stored_version(c, app, number).await)
    }

    async fn versions(&self, app: AppId) -> Result<Vec<StoredVersion>, StoreError> {
        run!(self, |c| {
            let numbers: Vec<i64> = c
                .query("SELECT number FROM versions WHERE app = $1 ORDER BY number", &[&app.0])
                .await?
                .into_iter()
                .map(|r| r.get(0))
                .collect();
            let mut versions = Vec::with_capacity(numbers.len());
            for n in numbers {
                versions.extend(stored_version(c, app, n).await?);
            }
            Ok(versions)
        })
    }

    async fn delete_version(&self, app: AppId, number: i64) -> Result<bool, StoreError> {
        transact!(self, |tx| {
            let n = tx
                .execute(
                    "DELETE FROM versions WHERE app = $1 AND number = $2
                     AND NOT EXISTS (SELECT 1 FROM apps WHERE id = $1 AND active = $2)",
                    &[&app.0, &number],
                )
                .await?;
            if n == 1 {
                tx.execute("DELETE FROM version_components WHERE app = $1 AND number = $2", &[&app.0, &number]).await?;
            }
            Ok(n == 1)
        })
    }

    async fn set_value(&self, app: AppId, name: &str, sealed: &[u8]) -> Result<(), StoreError> {
        run!(self, |c| {
            c.execute(
                "INSERT INTO sealed_values (app, name, sealed) VALUES ($1, $2, $3)
                 ON CONFLICT (app, name) DO UPDATE SET sealed = EXCLUDED.sealed",
                &[&app.0, &name, &sealed],
            )
            .await?;
            Ok(())
        })
    }

    async fn delete_value(&self, app: AppId, name: &str) -> Result<bool, StoreError> {
        run!(self, |c| {
            Ok(c.execute("DELETE FROM sealed_values WHERE app = $1 AND name = $2", &[&app.0, &name]).await? == 1)
        })
    }

    async fn values(&self, app: AppId) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        run!(self, |c| {
            let rows = c.query("SELECT name, sealed FROM sealed_values WHERE app = $1", &[&app.0]).await?;
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    async fn apps(&self, tenant: &str) -> Result<Vec<AppRecord>, StoreError> {
        run!(self, |c| {
            let rows = c
                .query("SELECT id, tenant, name, active FROM apps WHERE tenant = $1 ORDER BY name", &[&tenant])
                .await?;
            Ok(rows.iter().map(app_record).collect())
        })
    }

    async fn all_apps(&self) -> Result<Vec<AppRecord>, StoreError> {
        run!(self, |c| {
            let rows = c.query("SELECT id, tenant, name, active FROM apps ORDER BY id", &[]).await?;
            Ok(rows.iter().map(app_record).collect())
        })
    }

    async fn find_app(&self, tenant: &str, name: &str) -> Result<Option<AppRecord>, StoreError> {
        run!(self, |c| {
            let row = c
                .query_opt(
                    "SELECT id, tenant, name, active FROM apps WHERE tenant = $1 AND name = $2",
                    &[&tenant, &name],
                )
                .await?;
            Ok(row.as_ref().map(app_record))
        })
    }

    async fn delete_app(&self, app: AppId) -> Result<(), StoreError> {
        transact!(self, |tx| {
            for table in ["kv", "actors", "sealed_values", "version_components", "versions", "usage"] {
                tx.execute(&format!("DELETE FROM {table} WHERE app = $1"), &[&app.0]).await?;
            }
            tx.execute("DELETE FROM apps WHERE id = $1", &[&app.0]).await?;
            Ok(())
        })
    }

    async fn add_usage(&self, app: AppId, period: &str, used: &UsageCounts) -> Result<(), StoreError> {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let counts = [
            n(used.requests),
            n(used.events),
            n(used.cpu_micros),
            n(used.wall_micros),
            n(used.egress_requests),
            n(used.egress_bytes),
        ];
        run!(self, |c| {
            c.execute(
                "INSERT INTO usage (app, period, requests, events, cpu_micros, wall_micros, egress_requests, egress_bytes)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (app, period) DO UPDATE SET
                    requests = usage.requests + EXCLUDED.requests,
                    events = usage.events + EXCLUDED.events,
                    cpu_micros = usage.cpu_micros + EXCLUDED.cpu_micros,
                    wall_micros = usage.wall_micros + EXCLUDED.wall_micros,
                    egress_requests = usage.egress_requests + EXCLUDED.egress_requests,
                    egress_bytes = usage.egress_bytes + EXCLUDED.egress_bytes",
                &[&app.0, &period, &counts[0], &counts[1], &counts[2], &counts[3], &counts[4], &counts[5]],
            )
            .await?;
            Ok(())
        })
    }

    async fn usage(&self, app: AppId, period: &str) -> Result<UsageCounts, StoreError> {
        run!(self, |c| {
            let row = c
                .query_opt(
                    "SELECT requests, events, cpu_micros, wall_micros, egress_requests, egress_bytes
                     FROM usage WHERE app = $1 AND period = $2",
                    &[&app.0, &period],
                )
                .await?;
            Ok(row.map_or_else(UsageCounts::default, |r| {
                let n = |i: usize| r.get::<_, i64>(i).max(0) as u64;
                UsageCounts {
                    requests: n(0),
                    events: n(1),
                    cpu_micros: n(2),
                    wall_micros: n(3),
                    egress_requests: n(4),
                    egress_bytes: n(5),
                }
            }))
        })
    }
}

fn tenant_record(r: &Row) -> TenantRecord {
    TenantRecord { id: r.get(0), plan: r.get(1), suspended: r.get(2), created: r.get(3) }
}

fn token_record(r: &Row) -> TokenRecord {
    TokenRecord { id: r.get(0), tenant: r.get(1), scope: r.get(2), hash: r.get(3), created: r.get(4) }
}

const TENANT_COLUMNS: &str = "SELECT id, plan, suspended, created FROM tenants";
const TOKEN_COLUMNS: &str = "SELECT id, tenant, scope, hash, created FROM tokens";

async fn insert_token(tx: &Transaction<'_>, t: &TokenRecord) -> Result<(), Fail> {
    tx.execute(
        "INSERT INTO tokens (id, tenant, scope, hash, created) VALUES ($1, $2, $3, $4, $5)",
        &[&t.id, &t.tenant, &t.scope, &t.hash, &t.created],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl TenantStore for PostgresStore {
    async fn create_tenant(&self, tenant: &TenantRecord, first: &TokenRecord) -> Result<bool, StoreError> {
        transact!(self, |tx| {
            // `dev` and `ensure_app` make tenants without an account: a
            // name with apps is taken all the same.
            let n = tx
                .execute(
                    "INSERT INTO tenants (id, plan, suspended, created) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    &[&tenant.id, &tenant.plan, &tenant.suspended, &tenant.created],
                )
                .await?;
            if n == 0 {
                return Ok(false);
            }
            insert_token(tx, first).await?;
            Ok(true)
        })
    }

    async fn tenant(&self, id: &str) -> Result<Option<TenantRecord>, StoreError> {
        run!(self, |c| {
            Ok(c.query_opt(&format!("{TENANT_COLUMNS} WHERE id = $1"), &[&id]).await?.as_ref().map(tenant_record))
        })
    }

    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        run!(self, |c| {
            Ok(c.query(&format!("{TENANT_COLUMNS} ORDER BY id"), &[]).await?.iter().map(tenant_record).collect())
        })
    }

    async fn set_plan(&self, id: &str, plan: &str) -> Result<bool, StoreError> {
        run!(self, |c| Ok(c.execute("UPDATE tenants SET plan = $2 WHERE id = $1", &[&id, &plan]).await? == 1))
    }

    async fn set_suspended(&self, id: &str, suspended: bool) -> Result<bool, StoreError> {
        run!(self, |c| {
            Ok(c.execute("UPDATE tenants SET suspended = $2 WHERE id = $1", &[&id, &suspended]).await? == 1)
        })
    }

    async fn set_telemetry(&self, id: &str, sealed: Option<&[u8]>) -> Result<bool, StoreError> {
        run!(self, |c| {
            Ok(c.execute("UPDATE tenants SET telemetry = $2 WHERE id = $1", &[&id, &sealed]).await? == 1)
        })
    }

    async fn telemetry(&self) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        run!(self, |c| {
            let rows = c.query("SELECT id, telemetry FROM tenants WHERE telemetry IS NOT NULL", &[]).await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    async fn telemetry_of(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        run!(self, |c| {
            let row = c.query_opt("SELECT telemetry FROM tenants WHERE id = $1", &[&id]).await?;
            Ok(row.and_then(|r| r.get::<_, Option<Vec<u8>>>(0)))
        })
    }

    async fn add_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        transact!(self, |tx| insert_token(tx, token).await)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        run!(self, |c| {
            let stmt = c.prepare_cached(&format!("{TOKEN_COLUMNS} WHERE hash = $1")).await?;
            Ok(c.query_opt(&stmt, &[&hash]).await?.as_ref().map(token_record))
        })
    }

    async fn tokens(&self, tenant: Option<&str>) -> Result<Vec<TokenRecord>, StoreError> {
        run!(self, |c| {
            let rows = c
                .query(
                    &format!("{TOKEN_COLUMNS} WHERE tenant IS NOT DISTINCT FROM $1 ORDER BY created, id"),
                    &[&tenant],
                )
                .await?;
            Ok(rows.iter().map(token_record).collect())
        })
    }

    async fn revoke_token(&self, tenant: Option<&str>, id: &str) -> Result<Revoked, StoreError> {
        transact!(self, |tx| {
            // The tenant's tokens are locked while counting its admins: two
            // revocations at once never both leave it without one.
            let scopes: Vec<(String, String)> = tx
                .query("SELECT id, scope FROM tokens WHERE tenant IS NOT DISTINCT FROM $1 FOR UPDATE", &[&tenant])
                .await?
                .into_iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let admins = scopes.iter().filter(|(_, scope)| scope == "admin").count();
            let scope = scopes.iter().find(|(token, _)| token == id).map(|(_, scope)| scope.as_str());
            match scope {
                None => Ok(Revoked::NoSuchToken),
                Some("admin") if tenant.is_some() && admins <= 1 => Ok(Revoked::LastAdmin),
                Some(_) => {
                    tx.execute("DELETE FROM tokens WHERE tenant IS NOT DISTINCT FROM $1 AND id = $2", &[&tenant, &id])
                        .await?;
                    Ok(Revoked::Yes)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> ((), PostgresStore) {
        let url = crate::test_postgres::server().database().await;
        ((), PostgresStore::connect(&url, 8).await.unwrap())
    }

    mod conformance {
        crate::store_conformance!(super::store());
    }
}
