//! Group commit: commits return once SQLite has written them to the WAL
//! (no sync), and one thread syncs the WAL for every commit written before
//! its sync began. A caller that must not act before its writes survive a
//! power cut waits for its [`WriteMark`]; many commits share one `fsync`,
//! and no runtime thread ever waits on the disk.
//!
//! Syncing the WAL file is enough: in WAL mode a commit is on disk once its
//! frames are, and SQLite writes them with `write(2)` before the commit
//! returns (nothing is buffered in the process). Checkpoints sync the WAL
//! and the database themselves.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::watch;

use crate::StoreError;

/// Every commit returned before the mark was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct WriteMark(pub u64);

/// What the sync thread has made durable.
#[derive(Debug, Clone, Default)]
struct Synced {
    upto: u64,
    /// A sync failed: nothing written since can be promised durable, and
    /// the store fails every write until it is reopened.
    failed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    written: u64,
    stopping: bool,
}

pub(crate) struct GroupSync {
    shared: Arc<Shared>,
    synced: watch::Receiver<Synced>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GroupSync {
    /// Starts the sync thread for the WAL of the database at `db`, once
    /// what the WAL holds already (the schema, its migrations) is synced.
    pub(crate) fn start(db: &Path) -> Result<Self, StoreError> {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let wal = File::options()
            .read(true)
            .open(&wal)
            .map_err(|e| StoreError::Backend(format!("cannot open the WAL to sync it: {e}")))?;
        wal.sync_data().map_err(|e| StoreError::Backend(format!("cannot sync the WAL: {e}")))?;
        // The WAL's directory entry must survive too.
        if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::Backend(format!("cannot sync the store's directory: {e}")))?;
        }
        let shared = Arc::new(Shared { state: Mutex::new(State::default()), wake: Condvar::new() });
        let (tx, synced) = watch::channel(Synced::default());
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("wasmkeep-wal-sync".into())
                .spawn(move || sync_loop(&shared, &wal, &tx))
                .map_err(|e| StoreError::Backend(format!("cannot start the WAL sync thread: {e}")))?
        };
        Ok(Self { shared, synced, thread: Some(thread) })
    }

    /// Notes a commit just returned; answers its mark.
    pub(crate) fn wrote(&self) -> WriteMark {
        let mut state = lock(&self.shared.state);
        state.written += 1;
        self.shared.wake.notify_one();
        WriteMark(state.written)
    }

    /// The mark of every commit returned so far.
    pub(crate) fn mark(&self) -> WriteMark {
        WriteMark(lock(&self.shared.state).written)
    }

    /// Whether a sync failed (the store refuses writes from then on).
    pub(crate) fn failed(&self) -> Option<String> {
        self.synced.borrow().failed.clone()
    }

    /// Resolves once every commit up to `mark` is on disk.
    pub(crate) async fn durable(&self, mark: WriteMark) -> Result<(), StoreError> {
        let done = |s: &Synced| s.failed.is_some() || s.upto >= mark.0;
        let mut synced = self.synced.clone();
        let state = match synced.wait_for(done).await {
            Ok(state) => state.clone(),
            Err(_) => return Err(StoreError::Backend("the WAL sync thread stopped".into())),
        };
        match state.failed {
            Some(e) if state.upto < mark.0 => Err(StoreError::Backend(e)),
            _ => Ok(()),
        }
    }
}

impl Drop for GroupSync {
    fn drop(&mut self) {
        lock(&self.shared.state).stopping = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn sync_loop(shared: &Shared, wal: &File, synced: &watch::Sender<Synced>) {
    let mut upto = 0;
    loop {
        let target = {
            let mut state = lock(&shared.state);
            while state.written == upto && !state.stopping {
                state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.written == upto {
                return;
            }
            state.written
        };
        // Every commit marked up to `target` was written before this call.
        if let Err(e) = wal.sync_data() {
            tracing::error!("syncing the store's WAL failed: {e}; writes are refused until the node restarts");
            synced.send_modify(|s| s.failed = Some(format!("syncing the WAL failed: {e}")));
            return;
        }
        upto = target;
        synced.send_modify(|s| s.upto = upto);
    }
}
