//! The store: actors' ownership and storage, and the apps they belong to.
//!
//! Four traits, one per concern: [`ActorStore`] for the data plane (waking
//! and fencing actors, their keys and values), [`AppStore`] for what a node
//! runs (apps, versions, components, values), [`TenantStore`] for the
//! hosted service's accounts (tenants, their plans, API tokens) and
//! [`ClusterStore`] for the cluster's membership and ownership (each node's
//! heartbeat; which node holds which actor). The embedded default is
//! [`SqliteStore`], a file in the node's data directory; a cluster shares
//! one [`PostgresStore`] behind the same traits.
//!
//! Every commit of an actor's writes names the owner epoch it was granted
//! at wake (or take); a commit under any other epoch is refused
//! ([`StoreError::Fenced`]), so two owners never both write one actor.

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
mod group_sync;
mod postgres;
pub mod seal;
mod sqlite;
#[cfg(any(test, feature = "testing"))]
pub mod test_postgres;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::collections::BTreeMap;

use async_trait::async_trait;
use wasmkeep_core::{ActorKey, ActorName, Address, AppId, ClassName, NameError};

pub use group_sync::WriteMark;
pub use postgres::{POOL_SIZE, PostgresStore};
pub use seal::ValueKey;
pub use sqlite::{Durability, SqliteStore};

/// The owner epoch granted to the node that woke an actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Epoch(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The commit's epoch is not the actor's current one: another wake took
    /// the actor since.
    #[error("stale owner epoch")]
    Fenced,
    /// The commit would store more than its budget allows; nothing of it
    /// was written.
    #[error("{0}")]
    OverBudget(OverBudget),
    #[error("store: {0}")]
    Backend(String),
}

impl StoreError {
    /// Its name, for a span's status: no detail of the store's.
    pub fn label(&self) -> &'static str {
        match self {
            StoreError::Fenced => "fenced",
            StoreError::OverBudget(_) => "over_budget",
            StoreError::Backend(_) => "store_unavailable",
        }
    }
}

/// Whether a wake (or a take) creates the actor when it does not exist
/// (never created, or deleted), and within what bound: the live actors
/// of its tenant, across all its apps. The count is the store's, taken
/// in the transaction that creates the actor, so that nodes sharing the
/// store, or creations at once, never pass the bound together. A deleted
/// actor counts no more from its deletion on (its record stays until
/// collected, but holds no place), and bringing it back is a creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// A missing actor stays missing.
    No,
    /// Created if its tenant keeps fewer live actors than this.
    Within(u64),
}

impl Create {
    /// Created whatever its tenant keeps (`dev`; a tenant without a plan).
    pub const ANY: Self = Self::Within(u64::MAX);

    /// Whether a missing actor is to be created at all.
    fn wanted(self) -> bool {
        self != Self::No
    }

    /// The bound a creation is counted against, if any: a store counts
    /// the tenant's actors only then.
    fn bound(self) -> Option<u64> {
        match self {
            Self::Within(n) if n != u64::MAX => Some(n),
            _ => None,
        }
    }

    /// Whether a tenant keeping `live` actors may create one more.
    fn admits(self, live: u64) -> bool {
        self.bound().is_none_or(|bound| live < bound)
    }
}

/// What waking an actor found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The actor exists (or was created): this node owns it under `epoch`.
    Owned { epoch: Epoch, created: bool },
    /// The actor does not exist (never created, or deleted) and was not
    /// to be created.
    Missing,
    /// The actor does not exist, and its tenant keeps as many live actors
    /// as the creation's bound ([`Create::Within`]): nothing was written.
    Full,
}

/// What taking an actor ([`ClusterStore::take`]) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// This node owns it now, under `epoch`: always a new one, even when
    /// it owned the actor already.
    Owned { epoch: Epoch, created: bool },
    /// The actor does not exist (never created, or deleted) and was not
    /// to be created.
    Missing,
    /// As [`Wake::Full`].
    Full,
    /// Another node, alive, owns it: the actor is that node's to run.
    Elsewhere { owner: String },
}

/// An event's writes, applied in one transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// Delete every key before applying `writes`.
    pub clear: bool,
    /// Key to new value; `None` deletes the key.
    pub writes: BTreeMap<String, Option<Vec<u8>>>,
}

impl WriteBatch {
    pub fn is_empty(&self) -> bool {
        !self.clear && self.writes.is_empty()
    }
}

/// What one commit may leave stored, in bytes of keys and values: the
/// actor's own and its tenant's in all. A commit that shrinks what is
/// stored always passes (an actor over a lowered budget can still delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageBudget {
    pub actor: u64,
    pub tenant: u64,
}

impl StorageBudget {
    pub const UNBOUNDED: Self = Self { actor: u64::MAX, tenant: u64::MAX };

    /// Whether no commit can exceed it.
    pub fn is_unbounded(&self) -> bool {
        *self == Self::UNBOUNDED
    }

    /// The first of the budget's bounds that `stored` (after a commit
    /// growing the actor's bytes by `growth`) breaks.
    pub fn check(&self, stored: Stored, growth: i64) -> Result<(), OverBudget> {
        if growth <= 0 {
            return Ok(());
        }
        if stored.actor > self.actor {
            return Err(OverBudget { scope: BudgetScope::Actor, would: stored.actor, limit: self.actor });
        }
        if stored.tenant > self.tenant {
            return Err(OverBudget { scope: BudgetScope::Tenant, would: stored.tenant, limit: self.tenant });
        }
        Ok(())
    }
}

/// Bytes of keys and values stored: by one actor, and by all of its
/// tenant's actors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    pub actor: u64,
    pub tenant: u64,
}

impl Stored {
    /// What is stored after a commit adding `growth` bytes (negative: freeing).
    pub fn grown(self, growth: i64) -> Stored {
        let add = |n: u64| n.saturating_add_signed(growth);
        Stored { actor: add(self.actor), tenant: add(self.tenant) }
    }
}

/// Which bound of a [`StorageBudget`] a commit would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetScope {
    Actor,
    Tenant,
}

/// A commit refused by its budget: what it would have left stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("storage quota: {} would store {would} bytes; the plan allows {limit}", match scope {
    BudgetScope::Actor => "this actor",
    BudgetScope::Tenant => "this account's actors",
})]
pub struct OverBudget {
    pub scope: BudgetScope,
    pub would: u64,
    pub limit: u64,
}

/// The data plane's store.
#[async_trait]
pub trait ActorStore: Send + Sync + 'static {
    /// Takes ownership of the actor for `node` under a new epoch, creating
    /// it (or bringing a deleted one back) as `create` allows. A missing
    /// actor that is not created answers [`Wake::Missing`], or
    /// [`Wake::Full`] when its tenant's bound refused it.
    async fn wake(&self, actor: &ActorKey, create: Create, node: &str) -> Result<Wake, StoreError>;

    async fn get(&self, actor: &ActorKey, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Up to `limit` entries with keys starting with `prefix`, after `after`
    /// when given, in ascending key order.
    async fn list(
        &self,
        actor: &ActorKey,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Applies `batch` atomically if `epoch` is still the actor's and what
    /// it leaves stored is within `budget`; answers what is stored after.
    async fn commit(
        &self,
        actor: &ActorKey,
        epoch: Epoch,
        batch: &WriteBatch,
        budget: StorageBudget,
    ) -> Result<Stored, StoreError>;

    /// What is stored now, and how many bytes committing `batch` would add
    /// (negative: free); writes nothing.
    async fn stored(&self, actor: &ActorKey, batch: &WriteBatch) -> Result<(Stored, i64), StoreError>;

    /// The mark of every [`commit`](Self::commit) returned so far. A
    /// commit may return before it survives what the store promises (a
    /// power cut); what depends on it waits for [`durable`](Self::durable).
    /// Every other write of the store is durable when it returns.
    fn mark(&self) -> WriteMark {
        WriteMark::default()
    }

    /// Resolves once every commit up to `mark` is durable; fails when the
    /// store can no longer promise it (the disk failed a sync).
    async fn durable(&self, _mark: WriteMark) -> Result<(), StoreError> {
        Ok(())
    }

    /// Deletes the actor's storage and marks it deleted (a state, not an
    /// absence: its record stays), if `epoch` is still the actor's.
    async fn delete_actor(&self, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError>;

    /// Up to `limit` of the app's live actors, of `class` if given, whose
    /// names start with `prefix`, after the actor `after` (class, name),
    /// in (class, name) order.
    async fn actors(
        &self,
        app: AppId,
        class: Option<&str>,
        prefix: &str,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<ActorRecord>, StoreError>;

    /// A live actor's record, with what it stores; `None` when it does not
    /// exist or was deleted.
    async fn actor(&self, actor: &ActorKey) -> Result<Option<ActorRecord>, StoreError>;

    /// The bytes of the keys and values all of the app's actors store.
    async fn app_bytes(&self, app: AppId) -> Result<u64, StoreError>;

    /// The app's live actors, as a creation counts them ([`Create`]).
    async fn app_actors(&self, app: AppId) -> Result<u64, StoreError>;
}

/// An actor as the control plane lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorRecord {
    pub class: String,
    pub name: String,
    /// The node that owns it (that woke or took it last); empty once
    /// released.
    pub owner: String,
    /// Its keys, and the bytes of its keys and values.
    pub keys: u64,
    pub bytes: u64,
}

/// A version as stored: its manifest (JSON, the app's own format) and the
/// component of each role (a class name, or `_front`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVersion {
    pub number: i64,
    pub manifest: String,
    pub components: BTreeMap<String, String>,
}

/// The control plane's store.
#[async_trait]
pub trait AppStore: Send + Sync + 'static {
    /// The app `name` of `tenant`, created (with the tenant) if missing.
    async fn ensure_app(&self, tenant: &str, name: &str) -> Result<AppId, StoreError>;
    /// Stores component bytes under their SHA-256 (hex), once.
    async fn put_component(&self, hash: &str, bytes: &[u8]) -> Result<(), StoreError>;
    async fn component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Adds an immutable version; answers its number.
    async fn add_version(
        &self,
        app: AppId,
        manifest: &str,
        components: &BTreeMap<String, String>,
    ) -> Result<i64, StoreError>;
    async fn activate(&self, app: AppId, version: i64) -> Result<(), StoreError>;
    async fn active_version(&self, app: AppId) -> Result<Option<StoredVersion>, StoreError>;
    /// A version by number, active or not.
    async fn version(&self, app: AppId, number: i64) -> Result<Option<StoredVersion>, StoreError>;
    /// Every version of the app, oldest first.
    async fn versions(&self, app: AppId) -> Result<Vec<StoredVersion>, StoreError>;
    /// Removes a version that is not the active one; answers whether it
    /// went (the active version stays).
    async fn delete_version(&self, app: AppId, number: i64) -> Result<bool, StoreError>;
    /// Sets a value, sealed by the caller: the store never sees it in clear.
    async fn set_value(&self, app: AppId, name: &str, sealed: &[u8]) -> Result<(), StoreError>;
    /// Removes a value; answers whether it was set.
    async fn delete_value(&self, app: AppId, name: &str) -> Result<bool, StoreError>;
    /// Every value of the app, sealed.
    async fn values(&self, app: AppId) -> Result<BTreeMap<String, Vec<u8>>, StoreError>;
    /// The tenant's apps, by name.
    async fn apps(&self, tenant: &str) -> Result<Vec<AppRecord>, StoreError>;
    /// Every app of every tenant (a node loads them at start).
    async fn all_apps(&self) -> Result<Vec<AppRecord>, StoreError>;
    /// The app `name` of `tenant`, if it exists.
    async fn find_app(&self, tenant: &str, name: &str) -> Result<Option<AppRecord>, StoreError>;
    /// Removes the app with its versions, values, actors and their storage.
    /// Components stay: they are shared by content.
    async fn delete_app(&self, app: AppId) -> Result<(), StoreError>;
    /// Adds `used` to what the app used in `period` (`YYYY-MM`, UTC).
    async fn add_usage(&self, app: AppId, period: &str, used: &UsageCounts) -> Result<(), StoreError>;
    /// What the app used in `period`, as added so far.
    async fn usage(&self, app: AppId, period: &str) -> Result<UsageCounts, StoreError>;
}

/// What an app used: counted by the node, added to the store now and then
/// per period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageCounts {
    pub requests: u64,
    pub events: u64,
    pub cpu_micros: u64,
    pub wall_micros: u64,
    pub egress_requests: u64,
    pub egress_bytes: u64,
}

impl UsageCounts {
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    pub fn plus(self, o: Self) -> Self {
        Self {
            requests: self.requests.saturating_add(o.requests),
            events: self.events.saturating_add(o.events),
            cpu_micros: self.cpu_micros.saturating_add(o.cpu_micros),
            wall_micros: self.wall_micros.saturating_add(o.wall_micros),
            egress_requests: self.egress_requests.saturating_add(o.egress_requests),
            egress_bytes: self.egress_bytes.saturating_add(o.egress_bytes),
        }
    }
}

/// An app as the control plane lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppRecord {
    pub id: AppId,
    pub tenant: String,
    pub name: String,
    /// The active version's number, if one was activated.
    pub active: Option<i64>,
}

/// A tenant's account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRecord {
    pub id: String,
    pub plan: String,
    pub suspended: bool,
    /// Unix seconds.
    pub created: i64,
}

/// An API token as stored: never its secret, only the secret's keyed hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The public id the token is listed and revoked by.
    pub id: String,
    /// The tenant it acts for; `None` for the operator's.
    pub tenant: Option<String>,
    pub scope: String,
    /// The secret's HMAC under the server's pepper, hex.
    pub hash: String,
    /// Unix seconds.
    pub created: i64,
}

/// The hosted service's accounts.
#[async_trait]
pub trait TenantStore: Send + Sync + 'static {
    /// Creates the tenant on `plan` with its first token, in one
    /// transaction; false (and nothing written) when the name is taken.
    async fn create_tenant(&self, tenant: &TenantRecord, first: &TokenRecord) -> Result<bool, StoreError>;
    async fn tenant(&self, id: &str) -> Result<Option<TenantRecord>, StoreError>;
    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError>;
    /// Answers false when there is no such tenant.
    async fn set_plan(&self, id: &str, plan: &str) -> Result<bool, StoreError>;
    /// Answers false when there is no such tenant.
    async fn set_suspended(&self, id: &str, suspended: bool) -> Result<bool, StoreError>;
    /// Sets (or, with `None`, removes) the tenant's own trace export, sealed
    /// by the caller (its headers hold credentials). Answers false when
    /// there is no such tenant.
    async fn set_telemetry(&self, id: &str, sealed: Option<&[u8]>) -> Result<bool, StoreError>;
    /// Every tenant's trace export, sealed, by tenant.
    async fn telemetry(&self) -> Result<BTreeMap<String, Vec<u8>>, StoreError>;
    /// One tenant's trace export, sealed, if it set one.
    async fn telemetry_of(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError>;
    async fn add_token(&self, token: &TokenRecord) -> Result<(), StoreError>;
    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;
    /// The tenant's tokens (`None`: the operator's), oldest first.
    async fn tokens(&self, tenant: Option<&str>) -> Result<Vec<TokenRecord>, StoreError>;
    /// Revokes one of the tenant's tokens; false when it has none by that id.
    /// Revokes one of the tenant's tokens (`None`: one of the operator's),
    /// unless it is the tenant's last `admin` token: an account must keep
    /// one token that can manage the others.
    async fn revoke_token(&self, tenant: Option<&str>, id: &str) -> Result<Revoked, StoreError>;
}

/// What revoking a token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    Yes,
    /// The tenant has no token by that id.
    NoSuchToken,
    /// It is the tenant's last `admin` token: kept.
    LastAdmin,
}

/// The cluster's membership and ownership (docs/spec/cluster.md §2–§3), in
/// the store its nodes share.
///
/// Membership: each node writes its heartbeat record every second; a node
/// whose last heartbeat was sent before the caller's `dead_before_ms`
/// (its clock's now less `--failover-wait-secs`), or that has none, is
/// dead. Ownership: an actor's owner is recorded with its epoch; a node
/// takes an actor that has no live owner by a compare-and-set that bumps
/// the epoch, so the node that held it before is fenced.
///
/// Times are the callers' unix milliseconds, stored as a signed 64-bit
/// integer (a time past `i64::MAX` is held as `i64::MAX`). Liveness is
/// thus judged across the nodes' clocks, a heartbeat's sender's against a
/// taker's: the failover wait must stay well above their skew.
#[async_trait]
pub trait ClusterStore: Send + Sync + 'static {
    /// Writes `node`'s heartbeat `record`, replacing its last one;
    /// `sent_ms` is the record's send time (its line 7).
    async fn beat(&self, node: &str, record: &str, sent_ms: u64) -> Result<(), StoreError>;

    /// Every node's last heartbeat, `(node, record, sent_ms)`, by node id.
    async fn heartbeats(&self) -> Result<Vec<(String, String, u64)>, StoreError>;

    /// Forgets the heartbeats sent before `before_ms` (of nodes removed for
    /// good); answers how many went. Their actors' owners are dead from
    /// then on, whatever `dead_before_ms` a take passes.
    async fn forget_nodes(&self, before_ms: u64) -> Result<u64, StoreError>;

    /// Takes the actor for `node`, in one transaction with its row locked,
    /// if it has no owner, or `node` owns it, or its owner is dead (no
    /// heartbeat sent at or after `dead_before_ms`); else answers
    /// [`Take::Elsewhere`]. A missing or deleted actor is created (brought
    /// back, empty) only as `create` allows, as [`ActorStore::wake`] does.
    /// A take always bumps the epoch: a node that held the actor before
    /// can never commit under its old one.
    async fn take(&self, actor: &ActorKey, create: Create, node: &str, dead_before_ms: u64)
    -> Result<Take, StoreError>;

    /// The live actor's recorded owner; `None` when it does not exist, was
    /// deleted or was released.
    async fn owner(&self, actor: &ActorKey) -> Result<Option<String>, StoreError>;

    /// Gives the actor up (a draining node, after hibernating it): if
    /// `epoch` is still the actor's, clears its owner, so any node may take
    /// it at once, and spends `epoch` (nothing commits under it after).
    /// Answers whether it was released; false: another node took it since.
    async fn release(&self, actor: &ActorKey, epoch: Epoch) -> Result<bool, StoreError>;

    /// Up to `limit` of the live actors `node` owns, after `after` when
    /// given, in (app, class, name) order: what a draining node releases
    /// and what a takeover of a dead node scans.
    async fn owned_by(&self, node: &str, after: Option<&ActorKey>, limit: usize) -> Result<Vec<ActorKey>, StoreError>;
}

/// Every part of a store, as one node uses them.
pub trait Store: ActorStore + AppStore + TenantStore + ClusterStore {}

impl<T: ActorStore + AppStore + TenantStore + ClusterStore> Store for T {}

/// Refuses an empty node id where a node is named: the empty owner is the
/// one of an actor no node owns.
fn named(node: &str) -> Result<(), StoreError> {
    if node.is_empty() { Err(StoreError::Backend("the node id is empty".into())) } else { Ok(()) }
}

/// A time in unix milliseconds as stored (a signed 64-bit integer).
fn stored_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// An actor's row as a take (or a wake) finds it, locked.
struct Held {
    live: bool,
    owner: String,
    epoch: i64,
}

impl Held {
    /// The node other than `node` that owns the actor, if one does: the
    /// one whose liveness decides a take.
    fn other_owner(&self, node: &str) -> Option<&str> {
        Some(self.owner.as_str()).filter(|o| !o.is_empty() && *o != node)
    }
}

/// What a take does with the actor it found (`held`, `None`: no row):
/// `Ok` with the epoch to write and whether that creates the actor, or
/// `Err` with the answer, writing nothing. `owner_alive`: whether another
/// node that is alive owns it.
fn plan_take(held: Option<&Held>, create: bool, owner_alive: bool) -> Result<(i64, bool), Take> {
    match held {
        None if create => Ok((1, true)),
        None => Err(Take::Missing),
        Some(h) if !h.live && !create => Err(Take::Missing),
        Some(h) if owner_alive => Err(Take::Elsewhere { owner: h.owner.clone() }),
        Some(h) => Ok((h.epoch + 1, !h.live)),
    }
}

/// A take's answer as a wake's: a wake takes from any owner, so it is
/// never [`Take::Elsewhere`].
fn wake_of(take: Take) -> Wake {
    match take {
        Take::Owned { epoch, created } => Wake::Owned { epoch, created },
        Take::Missing => Wake::Missing,
        Take::Full => Wake::Full,
        Take::Elsewhere { owner } => unreachable!("a wake took from {owner}: a wake takes from any owner"),
    }
}

/// The key of an actor row read back from the store.
fn actor_key(app: i64, class: &str, name: &str) -> Result<ActorKey, StoreError> {
    let bad = |e: NameError| StoreError::Backend(format!("the store holds an actor {class}/{name} of app {app}: {e}"));
    let address = Address::new(ClassName::parse(class).map_err(bad)?, ActorName::parse(name).map_err(bad)?);
    Ok(ActorKey { app: AppId(app), address })
}

/// Seals app values before they reach a store and opens them after: the
/// store, its files and its backups hold values only sealed.
pub trait ValueSeal: Send + Sync + std::fmt::Debug + 'static {
    /// `context` binds the sealed bytes to where they belong (an app and a
    /// name): moved elsewhere, they do not open.
    fn seal(&self, context: &[u8], plain: &[u8]) -> Vec<u8>;
    fn open(&self, context: &[u8], sealed: &[u8]) -> Option<Vec<u8>>;
}

impl ValueSeal for ValueKey {
    fn seal(&self, context: &[u8], plain: &[u8]) -> Vec<u8> {
        ValueKey::seal(self, context, plain)
    }

    fn open(&self, context: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        ValueKey::open(self, context, sealed).ok()
    }
}

/// The context a tenant's trace export is sealed under: its tenant.
pub fn telemetry_context(tenant: &str) -> Vec<u8> {
    seal::context(&[b"wasmkeep tenant telemetry", tenant.as_bytes()])
}

/// The context an app's value is sealed under: its app and its name.
pub fn value_context(app: AppId, name: &str) -> Vec<u8> {
    seal::context(&[b"wasmkeep app value", &app.0.to_be_bytes(), name.as_bytes()])
}
