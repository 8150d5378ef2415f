//! The embedded store: one SQLite file, WAL journal.
//!
//! Two durabilities (`Durability`): `Process` (`synchronous = NORMAL` in
//! WAL mode: a commit survives the process dying, the answer never leaves
//! before its commit, and the last commits may be lost to a power cut;
//! `dev`'s) and `PowerLoss` (`synchronous = FULL`: the WAL is synced at
//! every commit, so an acknowledged write survives the machine losing
//! power; `serve`'s). See docs/adr/0003.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use wasmkeep_core::{ActorKey, AppId};

use crate::group_sync::GroupSync;
use crate::{
    ActorRecord, ActorStore, AppRecord, AppStore, ClusterStore, Create, Epoch, Held, Revoked, StorageBudget,
    StoreError, Stored, StoredVersion, Take, TenantRecord, TenantStore, TokenRecord, UsageCounts, Wake, WriteBatch,
    WriteMark, actor_key, named, plan_take, stored_ms, wake_of,
};

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Backend(e.to_string())
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS apps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    active INTEGER,
    UNIQUE (tenant, name)
);
CREATE TABLE IF NOT EXISTS components (hash TEXT PRIMARY KEY, bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS versions (
    app INTEGER NOT NULL, number INTEGER NOT NULL, manifest TEXT NOT NULL,
    PRIMARY KEY (app, number)
);
CREATE TABLE IF NOT EXISTS version_components (
    app INTEGER NOT NULL, number INTEGER NOT NULL, role TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (app, number, role)
);
CREATE TABLE IF NOT EXISTS actors (
    app INTEGER NOT NULL, class TEXT NOT NULL, name TEXT NOT NULL,
    state TEXT NOT NULL, owner TEXT NOT NULL, epoch INTEGER NOT NULL,
    PRIMARY KEY (app, class, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kv (
    app INTEGER NOT NULL, class TEXT NOT NULL, name TEXT NOT NULL,
    key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (app, class, name, key)
) WITHOUT ROWID;
";

/// The schema's changes since the first, in order; `user_version` counts
/// those applied. Each runs in the transaction that bumps the count.
const MIGRATIONS: &[&str] = &[
    // 1: accounts of the hosted service; values sealed (the earlier clear
    // values are dropped: they were `dev`'s, set again by its flags).
    "
    ALTER TABLE tenants ADD COLUMN plan TEXT NOT NULL DEFAULT 'free';
    ALTER TABLE tenants ADD COLUMN suspended INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tenants ADD COLUMN created INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE tokens (
        id TEXT PRIMARY KEY, tenant TEXT, scope TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE, created INTEGER NOT NULL
    );
    DROP TABLE IF EXISTS app_values;
    CREATE TABLE sealed_values (
        app INTEGER NOT NULL, name TEXT NOT NULL, sealed BLOB NOT NULL,
        PRIMARY KEY (app, name)
    );
    ",
    // 2: stored bytes kept per actor and per app, for the storage quotas
    // (a sum over the keys on every commit would grow with the data).
    "
    ALTER TABLE actors ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE apps ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE actors SET bytes = (
        SELECT COALESCE(SUM(LENGTH(CAST(key AS BLOB)) + LENGTH(value)), 0) FROM kv
        WHERE kv.app = actors.app AND kv.class = actors.class AND kv.name = actors.name
    );
    UPDATE apps SET bytes = (SELECT COALESCE(SUM(bytes), 0) FROM actors WHERE actors.app = apps.id);
    ",
    // 3: what each app used, per month.
    "
    CREATE TABLE usage (
        app INTEGER NOT NULL, period TEXT NOT NULL,
        requests INTEGER NOT NULL, events INTEGER NOT NULL,
        cpu_micros INTEGER NOT NULL, wall_micros INTEGER NOT NULL,
        egress_requests INTEGER NOT NULL, egress_bytes INTEGER NOT NULL,
        PRIMARY KEY (app, period)
    );
    ",
    // 4: the cluster's membership (each node's last heartbeat) and the
    // actors each node owns, for a takeover's and a drain's scans.
    "
    CREATE TABLE nodes (id TEXT PRIMARY KEY, record TEXT NOT NULL, sent_ms INTEGER NOT NULL) WITHOUT ROWID;
    CREATE INDEX actors_by_owner ON actors (owner, app, class, name);
    ",
    // 5: each tenant's own trace export, sealed.
    "
    ALTER TABLE tenants ADD COLUMN telemetry BLOB;
    ",
    // 6: live actors kept per app, for the tenant's bound on them (a
    // count over the actors on every creation would grow with them).
    "
    ALTER TABLE apps ADD COLUMN actors INTEGER NOT NULL DEFAULT 0;
    UPDATE apps SET actors = (SELECT COUNT(*) FROM actors WHERE actors.app = apps.id AND actors.state = 'live');
    ",
];

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let applied: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, step) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

/// What a write survives once it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The process dying.
    Process,
    /// The machine losing power: the WAL is synced by group commit (an
    /// actor's commit is durable when [`ActorStore::durable`] says so;
    /// every other write when it returns).
    PowerLoss,
}

/// The embedded store. Calls run inline: each is a few microseconds of
/// SQLite work (no sync: that is the group commit's thread), cheaper than
/// a hop to a blocking thread.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// The group commit, under [`Durability::PowerLoss`].
    sync: Option<GroupSync>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, durable against
    /// the process dying.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::Process)
    }

    /// Opens the store at `path` with the durability asked.
    pub fn open_with(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // Commits never sync inline; under `PowerLoss` the group commit
        // syncs the WAL. Checkpoints sync what they copy either way.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        migrate(&mut conn)?;
        conn.set_prepared_statement_cache_capacity(64);
        let sync = match durability {
            Durability::Process => None,
            Durability::PowerLoss => Some(GroupSync::start(path)?),
        };
        Ok(Self { conn: Mutex::new(conn), sync })
    }

    /// Notes a write just made; under `PowerLoss`, answers its mark.
    fn wrote(&self) -> Result<WriteMark, StoreError> {
        match &self.sync {
            None => Ok(WriteMark::default()),
            Some(sync) => match sync.failed() {
                Some(e) => Err(StoreError::Backend(e)),
                None => Ok(sync.wrote()),
            },
        }
    }

    /// Waits until the write just made is durable (a control-plane write,
    /// a wake, a deletion: acknowledged only once on disk).
    async fn settle(&self) -> Result<(), StoreError> {
        let mark = self.wrote()?;
        match &self.sync {
            Some(sync) => sync.durable(mark).await,
            None => Ok(()),
        }
    }

    /// Runs [`take_in`] in a transaction of its own; durable when it
    /// returns, as every write of the epoch is.
    async fn take_with(
        &self,
        actor: &ActorKey,
        create: Create,
        node: &str,
        dead_before: Option<i64>,
    ) -> Result<Take, StoreError> {
        let out = {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            let out = take_in(&tx, actor, create, node, dead_before)?;
            if matches!(out, Take::Owned { .. }) {
                tx.commit()?;
            }
            out
        };
        if matches!(out, Take::Owned { .. }) {
            self.settle().await?;
        }
        Ok(out)
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (the
        // transaction rolls back on drop), so a poisoned lock is usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn parts(a: &ActorKey) -> (i64, &str, &str) {
    (a.app.0, a.address.class.as_str(), a.address.name.as_str())
}

/// Fails with `Fenced` unless `epoch` is the actor's current one.
fn check_epoch(tx: &rusqlite::Transaction<'_>, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError> {
    let (app, class, name) = parts(actor);
    let current: Option<i64> = tx
        .prepare_cached("SELECT epoch FROM actors WHERE app = ?1 AND class = ?2 AND name = ?3 AND state = 'live'")?
        .query_row(params![app, class, name], |r| r.get(0))
        .optional()?;
    if current == Some(epoch.0) { Ok(()) } else { Err(StoreError::Fenced) }
}

/// Takes the actor for `node` in `tx` (the compare-and-set of
/// [`ClusterStore::take`], and a wake); the store's lock makes it the only
/// transaction. With `dead_before`, an owner other than `node` whose
/// heartbeat was sent at or after it keeps the actor; without, any owner
/// gives way (a wake).
fn take_in(
    tx: &rusqlite::Transaction<'_>,
    actor: &ActorKey,
    create: Create,
    node: &str,
    dead_before: Option<i64>,
) -> Result<Take, StoreError> {
    let (app, class, name) = parts(actor);
    let held = tx
        .prepare_cached("SELECT state, owner, epoch FROM actors WHERE app = ?1 AND class = ?2 AND name = ?3")?
        .query_row(params![app, class, name], |r| {
            Ok(Held { live: r.get::<_, String>(0)? == "live", owner: r.get(1)?, epoch: r.get(2)? })
        })
        .optional()?;
    let owner_alive = match (held.as_ref().and_then(|h| h.other_owner(node)), dead_before) {
        (Some(owner), Some(before)) => tx
            .prepare_cached("SELECT sent_ms FROM nodes WHERE id = ?1")?
            .query_row(params![owner], |r| r.get::<_, i64>(0))
            .optional()?
            .is_some_and(|sent| sent >= before),
        _ => false,
    };
    let (epoch, created) = match plan_take(held.as_ref(), create.wanted(), owner_alive) {
        Ok(plan) => plan,
        Err(answer) => return Ok(answer),
    };
    if created && create.bound().is_some() && !create.admits(tenant_actors(tx, app)?) {
        return Ok(Take::Full);
    }
    tx.prepare_cached(
        "INSERT INTO actors (app, class, name, state, owner, epoch) VALUES (?1, ?2, ?3, 'live', ?4, ?5)
         ON CONFLICT (app, class, name) DO UPDATE SET state = 'live', owner = ?4, epoch = ?5",
    )?
    .execute(params![app, class, name, node, epoch])?;
    if created {
        tx.prepare_cached("UPDATE apps SET actors = actors + 1 WHERE id = ?1")?.execute(params![app])?;
    }
    Ok(Take::Owned { epoch: Epoch(epoch), created })
}

/// The live actors of the tenant of `app`, in all its apps: a sum over
/// its apps' counts (a few rows, by the `(tenant, name)` index).
fn tenant_actors(conn: &Connection, app: i64) -> Result<u64, StoreError> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(actors), 0) FROM apps WHERE tenant = (SELECT tenant FROM apps WHERE id = ?1)",
        )?
        .query_row(params![app], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// What the actor and its tenant store before `batch`, and how many bytes
/// `batch` adds to both (negative: frees).
fn growth(conn: &Connection, actor: &ActorKey, batch: &WriteBatch) -> Result<(Stored, i64), StoreError> {
    let (app, class, name) = parts(actor);
    let actor_bytes: i64 = conn
        .prepare_cached("SELECT bytes FROM actors WHERE app = ?1 AND class = ?2 AND name = ?3")?
        .query_row(params![app, class, name], |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    let tenant_bytes: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(bytes), 0) FROM apps WHERE tenant = (SELECT tenant FROM apps WHERE id = ?1)",
        )?
        .query_row(params![app], |r| r.get(0))?;
    let mut growth = if batch.clear { -actor_bytes } else { 0 };
    let mut old_size = conn.prepare_cached(
        "SELECT LENGTH(CAST(key AS BLOB)) + LENGTH(value) FROM kv WHERE app = ?1 AND class = ?2 AND name = ?3 AND key = ?4",
    )?;
    for (key, value) in &batch.writes {
        let new = value.as_ref().map_or(0, |v| (key.len() + v.len()) as i64);
        let old: i64 = if batch.clear {
            0
        } else {
            old_size.query_row(params![app, class, name, key], |r| r.get(0)).optional()?.unwrap_or(0)
        };
        growth += new - old;
    }
    let before = Stored { actor: actor_bytes.max(0) as u64, tenant: tenant_bytes.max(0) as u64 };
    Ok((before, growth))
}

#[async_trait]
impl ActorStore for SqliteStore {
    async fn wake(&self, actor: &ActorKey, create: Create, node: &str) -> Result<Wake, StoreError> {
        self.take_with(actor, create, node, None).await.map(wake_of)
    }

    async fn get(&self, actor: &ActorKey, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (app, class, name) = parts(actor);
        let conn = self.conn();
        let v = conn
            .prepare_cached("SELECT value FROM kv WHERE app = ?1 AND class = ?2 AND name = ?3 AND key = ?4")?
            .query_row(params![app, class, name, key], |r| r.get(0))
            .optional()?;
        Ok(v)
    }

    async fn list(
        &self,
        actor: &ActorKey,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let (app, class, name) = parts(actor);
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT key, value FROM kv WHERE app = ?1 AND class = ?2 AND name = ?3 AND key >= ?4 AND (?5 IS NULL OR key > ?5)
             ORDER BY key LIMIT ?6",
        )?;
        // Keys are sorted, so the first key past the prefix ends the page.
        let rows = stmt.query_map(params![app, class, name, prefix, after, limit as i64], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (k, v) = row?;
            if !k.starts_with(prefix) {
                break;
            }
            out.push((k, v));
        }
        Ok(out)
    }

    async fn commit(
        &self,
        actor: &ActorKey,
        epoch: Epoch,
        batch: &WriteBatch,
        budget: StorageBudget,
    ) -> Result<Stored, StoreError> {
        let (app, class, name) = parts(actor);
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        check_epoch(&tx, actor, epoch)?;
        let (before, growth) = growth(&tx, actor, batch)?;
        let after = before.grown(growth);
        budget.check(after, growth).map_err(StoreError::OverBudget)?;
        if batch.clear {
            tx.prepare_cached("DELETE FROM kv WHERE app = ?1 AND class = ?2 AND name = ?3")?
                .execute(params![app, class, name])?;
        }
        for (key, value) in &batch.writes {
            match value {
                Some(v) => tx
                    .prepare_cached(
                        "INSERT INTO kv (app, class, name, key, value) VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT (app, class, name, key) DO UPDATE SET value = ?5",
                    )?
                    .execute(params![app, class, name, key, v])?,
                None => tx
                    .prepare_cached("DELETE FROM kv WHERE app = ?1 AND class = ?2 AND name = ?3 AND key = ?4")?
                    .execute(params![app, class, name, key])?,
            };
        }
        if growth != 0 {
            tx.prepare_cached("UPDATE actors SET bytes = bytes + ?4 WHERE app = ?1 AND class = ?2 AND name = ?3")?
                .execute(params![app, class, name, growth])?;
            tx.prepare_cached("UPDATE apps SET bytes = bytes + ?2 WHERE id = ?1")?.execute(params![app, growth])?;
        }
        if let Some(e) = self.sync.as_ref().and_then(GroupSync::failed) {
            return Err(StoreError::Backend(e));
        }
        tx.commit()?;
        self.wrote()?;
        Ok(after)
    }

    async fn stored(&self, actor: &ActorKey, batch: &WriteBatch) -> Result<(Stored, i64), StoreError> {
        growth(&self.conn(), actor, batch)
    }

    fn mark(&self) -> WriteMark {
        self.sync.as_ref().map_or_else(WriteMark::default, GroupSync::mark)
    }

    async fn durable(&self, mark: WriteMark) -> Result<(), StoreError> {
        match &self.sync {
            Some(sync) => sync.durable(mark).await,
            None => Ok(()),
        }
    }

    async fn delete_actor(&self, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError> {
        let (app, class, name) = parts(actor);
        {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            check_epoch(&tx, actor, epoch)?;
            tx.prepare_cached("DELETE FROM kv WHERE app = ?1 AND class = ?2 AND name = ?3")?
                .execute(params![app, class, name])?;
            // Its place among its tenant's actors is free at once.
            tx.prepare_cached(
                "UPDATE apps SET bytes = bytes - (SELECT bytes FROM actors WHERE app = ?1 AND class = ?2 AND name = ?3),
                                 actors = actors - 1
                 WHERE id = ?1",
            )?
            .execute(params![app, class, name])?;
            tx.prepare_cached(
                "UPDATE actors SET state = 'deleted', bytes = 0 WHERE app = ?1 AND class = ?2 AND name = ?3",
            )?
            .execute(params![app, class, name])?;
            tx.commit()?;
        }
        self.settle().await?;
        Ok(())
    }

    async fn actors(
        &self,
        app: AppId,
        class: Option<&str>,
        prefix: &str,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<ActorRecord>, StoreError> {
        let conn = self.conn();
        let (after_class, after_name) = after.unwrap_or(("", ""));
        // The name range [prefix, prefix + U+10FFFF) holds exactly the
        // names starting with `prefix` (no name holds a control character,
        // none sorts past the highest code point).
        let end = format!("{prefix}\u{10FFFF}");
        let mut stmt = conn.prepare_cached(
            "SELECT a.class, a.name, a.owner,
                    (SELECT COUNT(*) FROM kv WHERE kv.app = a.app AND kv.class = a.class AND kv.name = a.name),
                    a.bytes
             FROM actors a
             WHERE a.app = ?1 AND a.state = 'live' AND (?2 IS NULL OR a.class = ?2)
               AND a.name >= ?3 AND a.name < ?4
               AND (a.class > ?5 OR (a.class = ?5 AND a.name > ?6))
             ORDER BY a.class, a.name LIMIT ?7",
        )?;
        let rows = stmt
            .query_map(params![app.0, class, prefix, end, after_class, after_name, limit as i64], actor_record)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    async fn app_bytes(&self, app: AppId) -> Result<u64, StoreError> {
        let bytes: Option<i64> =
            self.conn().query_row("SELECT bytes FROM apps WHERE id = ?1", params![app.0], |r| r.get(0)).optional()?;
        Ok(bytes.unwrap_or(0).max(0) as u64)
    }

    async fn app_actors(&self, app: AppId) -> Result<u64, StoreError> {
        let actors: Option<i64> =
            self.conn().query_row("SELECT actors FROM apps WHERE id = ?1", params![app.0], |r| r.get(0)).optional()?;
        Ok(actors.unwrap_or(0).max(0) as u64)
    }

    async fn actor(&self, actor: &ActorKey) -> Result<Option<ActorRecord>, StoreError> {
        let (app, class, name) = parts(actor);
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT a.class, a.name, a.owner,
                        (SELECT COUNT(*) FROM kv WHERE kv.app = a.app AND kv.class = a.class AND kv.name = a.name),
                        a.bytes
                 FROM actors a WHERE a.app = ?1 AND a.class = ?2 AND a.name = ?3 AND a.state = 'live'",
            )?
            .query_row(params![app, class, name], actor_record)
            .optional()?)
    }
}

#[async_trait]
impl AppStore for SqliteStore {
    async fn ensure_app(&self, tenant: &str, name: &str) -> Result<AppId, StoreError> {
        let out = {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            tx.execute("INSERT INTO tenants (id) VALUES (?1) ON CONFLICT DO NOTHING", params![tenant])?;
            tx.execute(
                "INSERT INTO apps (tenant, name) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![tenant, name],
            )?;
            let id =
                tx.query_row("SELECT id FROM apps WHERE tenant = ?1 AND name = ?2", params![tenant, name], |r| {
                    r.get(0)
                })?;
            tx.commit()?;
            AppId(id)
        };
        self.settle().await?;
        Ok(out)
    }

    async fn put_component(&self, hash: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO components (hash, bytes) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![hash, bytes],
        )?;
        self.settle().await?;
        Ok(())
    }

    async fn component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT bytes FROM components WHERE hash = ?1", params![hash], |r| r.get(0))
            .optional()?)
    }

    async fn add_version(
        &self,
        app: AppId,
        manifest: &str,
        components: &BTreeMap<String, String>,
    ) -> Result<i64, StoreError> {
        let out = {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            let number: i64 = tx.query_row(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM versions WHERE app = ?1",
                params![app.0],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO versions (app, number, manifest) VALUES (?1, ?2, ?3)",
                params![app.0, number, manifest],
            )?;
            for (role, hash) in components {
                tx.execute(
                    "INSERT INTO version_components (app, number, role, hash) VALUES (?1, ?2, ?3, ?4)",
                    params![app.0, number, role, hash],
                )?;
            }
            tx.commit()?;
            number
        };
        self.settle().await?;
        Ok(out)
    }

    async fn activate(&self, app: AppId, version: i64) -> Result<(), StoreError> {
        let n = self.conn().execute(
            "UPDATE apps SET active = ?2 WHERE id = ?1 AND EXISTS (SELECT 1 FROM versions WHERE app = ?1 AND number = ?2)",
            params![app.0, version],
        )?;
        self.settle().await?;
        if n == 1 { Ok(()) } else { Err(StoreError::Backend(format!("app {app} has no version {version}"))) }
    }

    async fn active_version(&self, app: AppId) -> Result<Option<StoredVersion>, StoreError> {
        let conn = self.conn();
        let active: Option<Option<i64>> =
            conn.query_row("SELECT active FROM apps WHERE id = ?1", params![app.0], |r| r.get(0)).optional()?;
        match active.flatten() {
            Some(number) => stored_version(&conn, app, number),
            None => Ok(None),
        }
    }

    async fn version(&self, app: AppId, number: i64) -> Result<Option<StoredVersion>, StoreError> {
        stored_version(&self.conn(), app, number)
    }

    async fn versions(&self, app: AppId) -> Result<Vec<StoredVersion>, StoreError> {
        let conn = self.conn();
        let numbers = conn
            .prepare("SELECT number FROM versions WHERE app = ?1 ORDER BY number")?
            .query_map(params![app.0], |r| r.get::<_, i64>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut versions = Vec::with_capacity(numbers.len());
        for n in numbers {
            versions.extend(stored_version(&conn, app, n)?);
        }
        Ok(versions)
    }

    async fn delete_version(&self, app: AppId, number: i64) -> Result<bool, StoreError> {
        let out = {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            let n = tx.execute(
                "DELETE FROM versions WHERE app = ?1 AND number = ?2
                 AND NOT EXISTS (SELECT 1 FROM apps WHERE id = ?1 AND active = ?2)",
                params![app.0, number],
            )?;
            if n == 1 {
                tx.execute("DELETE FROM version_components WHERE app = ?1 AND number = ?2", params![app.0, number])?;
            }
            tx.commit()?;
            n == 1
        };
        self.settle().await?;
        Ok(out)
    }

    async fn set_value(&self, app: AppId, name: &str, sealed: &[u8]) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO sealed_values (app, name, sealed) VALUES (?1, ?2, ?3)
             ON CONFLICT (app, name) DO UPDATE SET sealed = ?3",
            params![app.0, name, sealed],
        )?;
        self.settle().await?;
        Ok(())
    }

    async fn delete_value(&self, app: AppId, name: &str) -> Result<bool, StoreError> {
        let n = self.conn().execute("DELETE FROM sealed_values WHERE app = ?1 AND name = ?2", params![app.0, name])?;
        self.settle().await?;
        Ok(n == 1)
    }

    async fn values(&self, app: AppId) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT name, sealed FROM sealed_values WHERE app = ?1")?;
        let values = stmt
            .query_map(params![app.0], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<BTreeMap<String, Vec<u8>>, _>>()?;
        Ok(values)
    }

    async fn apps(&self, tenant: &str) -> Result<Vec<AppRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT id, tenant, name, active FROM apps WHERE tenant = ?1 ORDER BY name")?;
        let apps = stmt.query_map(params![tenant], app_record)?.collect::<Result<Vec<_>, _>>()?;
        Ok(apps)
    }

    async fn all_apps(&self) -> Result<Vec<AppRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT id, tenant, name, active FROM apps ORDER BY id")?;
        let apps = stmt.query_map([], app_record)?.collect::<Result<Vec<_>, _>>()?;
        Ok(apps)
    }

    async fn find_app(&self, tenant: &str, name: &str) -> Result<Option<AppRecord>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, tenant, name, active FROM apps WHERE tenant = ?1 AND name = ?2",
                params![tenant, name],
                app_record,
            )
            .optional()?)
    }

    async fn delete_app(&self, app: AppId) -> Result<(), StoreError> {
        {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            for table in ["kv", "actors", "sealed_values", "version_components", "versions", "usage"] {
                tx.execute(&format!("DELETE FROM {table} WHERE app = ?1"), params![app.0])?;
            }
            tx.execute("DELETE FROM apps WHERE id = ?1", params![app.0])?;
            tx.commit()?;
        }
        self.settle().await?;
        Ok(())
    }

    async fn add_usage(&self, app: AppId, period: &str, used: &UsageCounts) -> Result<(), StoreError> {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.conn().execute(
            "INSERT INTO usage (app, period, requests, events, cpu_micros, wall_micros, egress_requests, egress_bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (app, period) DO UPDATE SET
                requests = requests + ?3, events = events + ?4, cpu_micros = cpu_micros + ?5,
                wall_micros = wall_micros + ?6, egress_requests = egress_requests + ?7, egress_bytes = egress_bytes + ?8",
            params![
                app.0,
                period,
                n(used.requests),
                n(used.events),
                n(used.cpu_micros),
                n(used.wall_micros),
                n(used.egress_requests),
                n(used.egress_bytes)
            ],
        )?;
        self.settle().await
    }

    async fn usage(&self, app: AppId, period: &str) -> Result<UsageCounts, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT requests, events, cpu_micros, wall_micros, egress_requests, egress_bytes
                 FROM usage WHERE app = ?1 AND period = ?2",
                params![app.0, period],
                |r| {
                    let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
                    Ok(UsageCounts {
                        requests: n(0)?,
                        events: n(1)?,
                        cpu_micros: n(2)?,
                        wall_micros: n(3)?,
                        egress_requests: n(4)?,
                        egress_bytes: n(5)?,
                    })
                },
            )
            .optional()?;
        Ok(row.unwrap_or_default())
    }
}

#[async_trait]
impl ClusterStore for SqliteStore {
    async fn beat(&self, node: &str, record: &str, sent_ms: u64) -> Result<(), StoreError> {
        named(node)?;
        self.conn()
            .prepare_cached(
                "INSERT INTO nodes (id, record, sent_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET record = ?2, sent_ms = ?3",
            )?
            .execute(params![node, record, stored_ms(sent_ms)])?;
        self.settle().await
    }

    async fn heartbeats(&self) -> Result<Vec<(String, String, u64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached("SELECT id, record, sent_ms FROM nodes ORDER BY id")?;
        let beats = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(beats)
    }

    async fn forget_nodes(&self, before_ms: u64) -> Result<u64, StoreError> {
        let n = self.conn().execute("DELETE FROM nodes WHERE sent_ms < ?1", params![stored_ms(before_ms)])?;
        self.settle().await?;
        Ok(n as u64)
    }

    async fn take(
        &self,
        actor: &ActorKey,
        create: Create,
        node: &str,
        dead_before_ms: u64,
    ) -> Result<Take, StoreError> {
        named(node)?;
        self.take_with(actor, create, node, Some(stored_ms(dead_before_ms))).await
    }

    async fn owner(&self, actor: &ActorKey) -> Result<Option<String>, StoreError> {
        let (app, class, name) = parts(actor);
        let owner: Option<String> = self
            .conn()
            .prepare_cached("SELECT owner FROM actors WHERE app = ?1 AND class = ?2 AND name = ?3 AND state = 'live'")?
            .query_row(params![app, class, name], |r| r.get(0))
            .optional()?;
        Ok(owner.filter(|o| !o.is_empty()))
    }

    async fn release(&self, actor: &ActorKey, epoch: Epoch) -> Result<bool, StoreError> {
        let (app, class, name) = parts(actor);
        let n = self
            .conn()
            .prepare_cached(
                "UPDATE actors SET owner = '', epoch = epoch + 1
                 WHERE app = ?1 AND class = ?2 AND name = ?3 AND epoch = ?4",
            )?
            .execute(params![app, class, name, epoch.0])?;
        self.settle().await?;
        Ok(n == 1)
    }

    async fn owned_by(&self, node: &str, after: Option<&ActorKey>, limit: usize) -> Result<Vec<ActorKey>, StoreError> {
        let (after_app, after_class, after_name) = match after {
            Some(a) => {
                let (app, class, name) = parts(a);
                (Some(app), class, name)
            }
            None => (None, "", ""),
        };
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT app, class, name FROM actors
                 WHERE owner = ?1 AND state = 'live'
                   AND (?2 IS NULL OR app > ?2 OR (app = ?2 AND (class > ?3 OR (class = ?3 AND name > ?4))))
                 ORDER BY app, class, name LIMIT ?5",
            )?;
            stmt.query_map(params![node, after_app, after_class, after_name, limit as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })?
            .collect::<Result<Vec<_>, _>>()?
        };
        rows.iter().map(|(app, class, name)| actor_key(*app, class, name)).collect()
    }
}

fn actor_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<ActorRecord> {
    let count = |i: usize| r.get::<_, i64>(i).map(|n| n.max(0) as u64);
    Ok(ActorRecord { class: r.get(0)?, name: r.get(1)?, owner: r.get(2)?, keys: count(3)?, bytes: count(4)? })
}

fn app_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<AppRecord> {
    Ok(AppRecord { id: AppId(r.get(0)?), tenant: r.get(1)?, name: r.get(2)?, active: r.get(3)? })
}

fn stored_version(conn: &Connection, app: AppId, number: i64) -> Result<Option<StoredVersion>, StoreError> {
    let manifest: Option<String> = conn
        .query_row("SELECT manifest FROM versions WHERE app = ?1 AND number = ?2", params![app.0, number], |r| r.get(0))
        .optional()?;
    let Some(manifest) = manifest else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached("SELECT role, hash FROM version_components WHERE app = ?1 AND number = ?2")?;
    let components = stmt
        .query_map(params![app.0, number], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<String, String>, _>>()?;
    Ok(Some(StoredVersion { number, manifest, components }))
}

fn tenant_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<TenantRecord> {
    Ok(TenantRecord { id: r.get(0)?, plan: r.get(1)?, suspended: r.get(2)?, created: r.get(3)? })
}

fn token_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenRecord> {
    Ok(TokenRecord { id: r.get(0)?, tenant: r.get(1)?, scope: r.get(2)?, hash: r.get(3)?, created: r.get(4)? })
}

const TENANT_COLUMNS: &str = "SELECT id, plan, suspended, created FROM tenants";
const TOKEN_COLUMNS: &str = "SELECT id, tenant, scope, hash, created FROM tokens";

#[async_trait]
impl TenantStore for SqliteStore {
    async fn create_tenant(&self, tenant: &TenantRecord, first: &TokenRecord) -> Result<bool, StoreError> {
        let out = {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            // `dev` and `ensure_app` make tenants without an account: a name
            // with apps is taken all the same.
            let n = tx.execute(
                "INSERT INTO tenants (id, plan, suspended, created) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![tenant.id, tenant.plan, tenant.suspended, tenant.created],
            )?;
            if n == 0 {
                return Ok(false);
            }
            insert_token(&tx, first)?;
            tx.commit()?;
            true
        };
        self.settle().await?;
        Ok(out)
    }

    async fn tenant(&self, id: &str) -> Result<Option<TenantRecord>, StoreError> {
        Ok(self.conn().query_row(&format!("{TENANT_COLUMNS} WHERE id = ?1"), params![id], tenant_record).optional()?)
    }

    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("{TENANT_COLUMNS} ORDER BY id"))?;
        let tenants = stmt.query_map([], tenant_record)?.collect::<Result<Vec<_>, _>>()?;
        Ok(tenants)
    }

    async fn set_plan(&self, id: &str, plan: &str) -> Result<bool, StoreError> {
        let n = self.conn().execute("UPDATE tenants SET plan = ?2 WHERE id = ?1", params![id, plan])?;
        self.settle().await?;
        Ok(n == 1)
    }

    async fn set_suspended(&self, id: &str, suspended: bool) -> Result<bool, StoreError> {
        let n = self.conn().execute("UPDATE tenants SET suspended = ?2 WHERE id = ?1", params![id, suspended])?;
        self.settle().await?;
        Ok(n == 1)
    }

    async fn set_telemetry(&self, id: &str, sealed: Option<&[u8]>) -> Result<bool, StoreError> {
        let n = self.conn().execute("UPDATE tenants SET telemetry = ?2 WHERE id = ?1", params![id, sealed])?;
        self.settle().await?;
        Ok(n == 1)
    }

    async fn telemetry(&self) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT id, telemetry FROM tenants WHERE telemetry IS NOT NULL")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        Ok(rows)
    }

    async fn telemetry_of(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let sealed: Option<Option<Vec<u8>>> = self
            .conn()
            .query_row("SELECT telemetry FROM tenants WHERE id = ?1", params![id], |r| r.get(0))
            .optional()?;
        Ok(sealed.flatten())
    }

    async fn add_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            insert_token(&tx, token)?;
            tx.commit()?;
        }
        self.settle().await?;
        Ok(())
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(&format!("{TOKEN_COLUMNS} WHERE hash = ?1"))?
            .query_row(params![hash], token_record)
            .optional()?)
    }

    async fn tokens(&self, tenant: Option<&str>) -> Result<Vec<TokenRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("{TOKEN_COLUMNS} WHERE tenant IS ?1 ORDER BY created, id"))?;
        let tokens = stmt.query_map(params![tenant], token_record)?.collect::<Result<Vec<_>, _>>()?;
        Ok(tokens)
    }

    async fn revoke_token(&self, tenant: Option<&str>, id: &str) -> Result<Revoked, StoreError> {
        let revoked = {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            let scope: Option<String> = tx
                .query_row("SELECT scope FROM tokens WHERE tenant IS ?1 AND id = ?2", params![tenant, id], |r| r.get(0))
                .optional()?;
            let admins = || -> rusqlite::Result<i64> {
                tx.query_row(
                    "SELECT COUNT(*) FROM tokens WHERE tenant IS ?1 AND scope = 'admin'",
                    params![tenant],
                    |r| r.get(0),
                )
            };
            match scope.as_deref() {
                None => Revoked::NoSuchToken,
                Some("admin") if tenant.is_some() && admins()? <= 1 => Revoked::LastAdmin,
                Some(_) => {
                    tx.execute("DELETE FROM tokens WHERE tenant IS ?1 AND id = ?2", params![tenant, id])?;
                    tx.commit()?;
                    Revoked::Yes
                }
            }
        };
        if revoked == Revoked::Yes {
            self.settle().await?;
        }
        Ok(revoked)
    }
}

fn insert_token(tx: &rusqlite::Transaction<'_>, t: &TokenRecord) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO tokens (id, tenant, scope, hash, created) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![t.id, t.tenant, t.scope, t.hash, t.created],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use wasmkeep_core::Address;

    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        (dir, s)
    }

    mod conformance {
        crate::store_conformance!(async { super::store() });
    }

    fn key(name: &str) -> ActorKey {
        ActorKey { app: AppId(1), address: Address::parse(&format!("counter/{name}")).unwrap() }
    }

    fn block<F: std::future::Future>(f: F) -> F::Output {
        // The SQLite store never suspends: polling once completes it.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the SQLite store suspended"),
        }
    }

    fn commit(s: &SqliteStore, a: &ActorKey, epoch: Epoch, batch: &WriteBatch) -> Result<Stored, StoreError> {
        block(s.commit(a, epoch, batch, StorageBudget::UNBOUNDED))
    }

    fn batch(pairs: &[(&str, Option<&[u8]>)]) -> WriteBatch {
        WriteBatch { clear: false, writes: pairs.iter().map(|(k, v)| (k.to_string(), v.map(|v| v.to_vec()))).collect() }
    }

    #[test]
    fn apps_versions_values_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let app;
        {
            let s = SqliteStore::open(&path).unwrap();
            app = block(s.ensure_app("dev", "counter")).unwrap();
            assert_eq!(block(s.ensure_app("dev", "counter")).unwrap(), app);
            assert_ne!(block(s.ensure_app("other", "counter")).unwrap(), app);
            block(s.put_component("h1", b"wasm")).unwrap();
            let comps = BTreeMap::from([("counter".to_string(), "h1".to_string())]);
            let v = block(s.add_version(app, "{}", &comps)).unwrap();
            assert_eq!(v, 1);
            assert_eq!(block(s.active_version(app)).unwrap(), None);
            block(s.activate(app, v)).unwrap();
            assert!(block(s.activate(app, 7)).is_err());
            block(s.set_value(app, "A", b"1")).unwrap();
            block(s.set_value(app, "A", b"2")).unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        let v = block(s.active_version(app)).unwrap().unwrap();
        assert_eq!(v.number, 1);
        assert_eq!(v.components["counter"], "h1");
        assert_eq!(block(s.component("h1")).unwrap().unwrap(), b"wasm");
        assert_eq!(block(s.values(app)).unwrap()["A"], b"2");
    }

    #[test]
    fn only_a_power_loss_store_marks_its_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open_with(&dir.path().join("p.db"), Durability::Process).unwrap();
        let a = key("x");
        let Wake::Owned { epoch, .. } = block(s.wake(&a, Create::ANY, "n1")).unwrap() else { panic!() };
        commit(&s, &a, epoch, &batch(&[("k", Some(b"1"))])).unwrap();
        assert_eq!(s.mark(), WriteMark(0));
        block(s.durable(WriteMark(0))).unwrap();
        // Neither syncs inline: the group commit does, for `PowerLoss`.
        let synchronous: i64 = s.conn().query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
        assert_eq!(synchronous, 1);
    }

    #[tokio::test]
    async fn commits_return_before_their_sync_and_a_mark_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let s = SqliteStore::open_with(&path, Durability::PowerLoss).unwrap();
        let a = key("x");
        // A wake is durable when it returns (it writes the epoch).
        let Wake::Owned { epoch, .. } = s.wake(&a, Create::ANY, "n1").await.unwrap() else { panic!() };
        let before = s.mark();
        for i in 0..200u32 {
            s.commit(&a, epoch, &batch(&[("k", Some(&i.to_be_bytes()))]), StorageBudget::UNBOUNDED).await.unwrap();
        }
        let mark = s.mark();
        assert_eq!(mark.0 - before.0, 200);
        tokio::time::timeout(std::time::Duration::from_secs(10), s.durable(mark)).await.unwrap().unwrap();
        // An earlier mark is durable as soon as a later one is.
        s.durable(before).await.unwrap();
        drop(s);
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(block(s.get(&a, "k")).unwrap(), Some(199u32.to_be_bytes().to_vec()));
    }

    #[test]
    fn an_old_store_is_migrated_and_its_clear_values_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.execute_batch(
                "CREATE TABLE app_values (app INTEGER NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
                 PRIMARY KEY (app, name));
                 INSERT INTO tenants (id) VALUES ('dev');
                 INSERT INTO apps (tenant, name) VALUES ('dev', 'app');
                 INSERT INTO app_values VALUES (1, 'SECRET', 'in-clear');
                 INSERT INTO actors VALUES (1, 'c', 'a', 'live', 'n1', 1), (1, 'c', 'b', 'live', 'n1', 1);
                 INSERT INTO kv VALUES (1, 'c', 'a', 'k', x'0102'), (1, 'c', 'a', 'kk', x''), (1, 'c', 'b', 'é', x'00');",
            )
            .unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        let dev = block(s.tenant("dev")).unwrap().unwrap();
        assert_eq!((dev.plan.as_str(), dev.suspended), ("free", false));
        assert!(block(s.values(AppId(1))).unwrap().is_empty());
        // What the actors stored is counted from their keys once.
        let c = |name: &str| ActorKey { app: AppId(1), address: Address::parse(&format!("c/{name}")).unwrap() };
        assert_eq!(block(s.actor(&c("a"))).unwrap().unwrap().bytes, 3 + 2);
        assert_eq!(block(s.stored(&c("b"), &WriteBatch::default())).unwrap(), (Stored { actor: 3, tenant: 8 }, 0));
        assert_eq!(block(s.app_bytes(AppId(1))).unwrap(), 8);
        // And its live actors, once.
        assert_eq!(block(s.app_actors(AppId(1))).unwrap(), 2);
        drop(s);
        // Opening again applies nothing twice.
        SqliteStore::open(&path).unwrap();
    }
}
