//! The node's compiles, shared by tenant. A compile takes seconds of a
//! core (a JavaScript component about 7 s), so one queue for the node let
//! one tenant's uploads stall every other tenant's deploys. Here each
//! tenant has a queue of its own, bounded; at most one of its compiles
//! runs at a time; the compile threads take the next compile from the
//! tenant of the lowest pass (stride scheduling by the plan's weight,
//! charged by the bytes compiled, so a big component costs its tenant
//! more than a small one); and the threads run at a lower priority than
//! the node's own, so a compile uses a core the requests leave idle and
//! yields it to them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::oneshot;

/// Whose compile it is, and the weight of its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOwner {
    pub tenant: Arc<str>,
    pub weight: u32,
}

impl Default for CompileOwner {
    /// The node's own (`dev`, or a node without tenants).
    fn default() -> Self {
        Self { tenant: Arc::from(""), weight: 1 }
    }
}

/// A compile not run. Either way the caller may retry (a `503`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CompileRefused {
    /// Not queued: its tenant has as many queued as it may.
    #[error("the account has {queued} compiles waiting already; retry when one ends")]
    Full { queued: usize },
    /// Queued, but the pool went (the node is stopping) before its turn.
    #[error("the node is shutting down; retry the deploy")]
    ShuttingDown,
}

/// The name the crate exports (`lib.rs`) and its callers match on.
pub type CompilesFull = CompileRefused;

/// The niceness of the compile threads: below the node's request threads.
const NICE: i32 = 10;

/// One unit of pass per byte at weight 1 (a tenant of weight 10 is
/// charged a tenth): passes are `u128` so no sum of compiled bytes wraps.
const STRIDE: u128 = 1 << 20;

type Job = Box<dyn FnOnce() + Send>;

/// What a compile thread sends back: the compile's value, or its panic.
type Answer<T> = oneshot::Receiver<std::thread::Result<T>>;

/// Who compiles next: the tenants' queues and passes, pure (no threads).
#[derive(Default)]
struct Turns {
    tenants: HashMap<Arc<str>, Tenant>,
    /// The pass of the last compile started: a tenant that starts queueing
    /// starts there, so a tenant that compiled nothing banks no turns.
    pass: u128,
    stopping: bool,
}

struct Tenant {
    pass: u128,
    weight: u32,
    queued: VecDeque<(u64, Job)>,
    running: bool,
}

impl Turns {
    fn push(&mut self, owner: &CompileOwner, cost: u64, job: Job, most_queued: usize) -> Result<(), CompileRefused> {
        let start = self.pass;
        let tenant = self.tenants.entry(owner.tenant.clone()).or_insert_with(|| Tenant {
            pass: start,
            weight: owner.weight,
            queued: VecDeque::new(),
            running: false,
        });
        // A tenant with none running may always start one: the bound is on
        // what waits beyond it.
        if tenant.queued.len() >= most_queued + usize::from(!tenant.running) {
            return Err(CompileRefused::Full { queued: tenant.queued.len() });
        }
        tenant.weight = owner.weight;
        tenant.queued.push_back((cost, job));
        Ok(())
    }

    /// The next compile to run, of the tenant with none running and the
    /// lowest pass: its tenant is marked running and charged for it.
    fn next(&mut self) -> Option<(Arc<str>, Job)> {
        let (name, tenant) =
            self.tenants.iter_mut().filter(|(_, t)| !t.running && !t.queued.is_empty()).min_by_key(|(_, t)| t.pass)?;
        let (cost, job) = tenant.queued.pop_front().expect("a queued compile");
        self.pass = tenant.pass;
        tenant.pass += u128::from(cost.max(1)) * STRIDE / u128::from(tenant.weight.max(1));
        tenant.running = true;
        Some((name.clone(), job))
    }

    /// Every compile still queued, taken out: none will start.
    fn take_queued(&mut self) -> Vec<Job> {
        self.tenants.values_mut().flat_map(|t| t.queued.drain(..).map(|(_, job)| job)).collect()
    }

    /// `tenant`'s compile ended; a tenant with nothing more is forgotten.
    fn done(&mut self, tenant: &str) {
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.running = false;
            if t.queued.is_empty() {
                self.tenants.remove(tenant);
            }
        }
    }
}

/// The node's compile threads and the tenants' queues.
pub struct Compiles {
    shared: Arc<(Mutex<Turns>, Condvar)>,
    most_queued: usize,
}

impl Compiles {
    /// `threads` compile threads (at least one); each tenant may queue
    /// `most_queued` compiles beyond the one it runs.
    pub fn new(threads: usize, most_queued: usize) -> Self {
        let shared: Arc<(Mutex<Turns>, Condvar)> = Arc::default();
        for i in 0..threads.max(1) {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("wasmkeep-compile-{i}"))
                .spawn(move || work(&shared))
                .expect("starting a compile thread");
        }
        Self { shared, most_queued }
    }

    /// Runs `compile` on a compile thread in `owner`'s turn, `cost` (the
    /// component's bytes) charged to it; refused at once when the tenant
    /// has as many compiles queued as it may, and refused when the pool
    /// goes before its turn.
    pub async fn run<T: Send + 'static>(
        &self,
        owner: &CompileOwner,
        cost: u64,
        compile: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, CompileRefused> {
        answered(self.queue(owner, cost, compile)?).await
    }

    /// Queues `compile` (as `run`); its answer does not borrow the pool.
    fn queue<T: Send + 'static>(
        &self,
        owner: &CompileOwner,
        cost: u64,
        compile: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Answer<T>, CompileRefused> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            if tx.is_closed() {
                // Its caller went (an upload whose client left): nothing to do.
                return;
            }
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(compile));
            let _ = tx.send(done);
        });
        {
            let (turns, wake) = &*self.shared;
            turns.lock().unwrap_or_else(|p| p.into_inner()).push(owner, cost, job, self.most_queued)?;
            wake.notify_one();
        }
        Ok(rx)
    }
}

/// The compile's value once its thread sends it; a job dropped unsent
/// (the pool went before its turn) is `ShuttingDown`.
async fn answered<T>(answer: Answer<T>) -> Result<T, CompileRefused> {
    match answer.await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => Err(CompileRefused::ShuttingDown),
    }
}

impl Drop for Compiles {
    /// The compiles running end on their threads; the queued ones are
    /// refused now, not after those end (a compile takes seconds).
    fn drop(&mut self) {
        let (turns, wake) = &*self.shared;
        let queued = {
            let mut turns = turns.lock().unwrap_or_else(|p| p.into_inner());
            turns.stopping = true;
            turns.take_queued()
        };
        wake.notify_all();
        // Dropping a job closes its answer: its caller reads `ShuttingDown`.
        // Outside the lock, as what a job holds may take time to drop.
        drop(queued);
    }
}

fn work(shared: &(Mutex<Turns>, Condvar)) {
    lower_priority();
    let (turns, wake) = shared;
    let mut state = turns.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if state.stopping {
            return;
        }
        let Some((tenant, job)) = state.next() else {
            state = wake.wait(state).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        drop(state);
        job();
        state = turns.lock().unwrap_or_else(|p| p.into_inner());
        state.done(&tenant);
        // The tenant may have another queued, which another thread can take.
        wake.notify_one();
    }
}

/// Lowers this thread's priority: on Linux a thread's niceness is its
/// own, so the node's other threads keep theirs.
fn lower_priority() {
    // SAFETY: `gettid` and `setpriority` take and return plain integers.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, NICE);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn owner(tenant: &str, weight: u32) -> CompileOwner {
        CompileOwner { tenant: Arc::from(tenant), weight }
    }

    fn noop() -> Job {
        Box::new(|| {})
    }

    #[test]
    fn each_tenant_runs_one_at_a_time_and_the_quiet_one_goes_next() {
        let mut turns = Turns::default();
        for _ in 0..4 {
            turns.push(&owner("heavy", 1), 12_000_000, noop(), 8).unwrap();
        }
        let (first, _) = turns.next().unwrap();
        assert_eq!(&*first, "heavy");
        assert!(turns.next().is_none(), "one compile of a tenant at a time");
        turns.push(&owner("quiet", 1), 20_000, noop(), 8).unwrap();
        let (second, _) = turns.next().unwrap();
        assert_eq!(&*second, "quiet", "the quiet tenant does not wait behind the heavy one's queue");
        turns.done("heavy");
        turns.done("quiet");
        assert!(!turns.tenants.contains_key("quiet"), "a tenant with nothing left is forgotten");
        turns.push(&owner("quiet", 1), 20_000, noop(), 8).unwrap();
        let (third, _) = turns.next().unwrap();
        assert_eq!(&*third, "quiet", "it has compiled little: its pass is the lower");
    }

    #[test]
    fn turns_follow_the_weights_by_bytes() {
        let mut turns = Turns::default();
        for _ in 0..40 {
            turns.push(&owner("one", 1), 1000, noop(), 100).unwrap();
            turns.push(&owner("three", 3), 1000, noop(), 100).unwrap();
        }
        let mut ran = HashMap::<String, u32>::new();
        for _ in 0..40 {
            let (tenant, _) = turns.next().unwrap();
            turns.done(&tenant);
            *ran.entry(tenant.to_string()).or_default() += 1;
        }
        assert_eq!((ran["one"], ran["three"]), (10, 30));
    }

    #[test]
    fn a_tenants_queue_is_bounded() {
        // Two may wait beyond the one running: with none running yet, the
        // one to start and two more.
        let mut turns = Turns::default();
        for _ in 0..3 {
            turns.push(&owner("a", 1), 1, noop(), 2).unwrap();
        }
        assert_eq!(turns.push(&owner("a", 1), 1, noop(), 2).unwrap_err(), CompileRefused::Full { queued: 3 });
        turns.push(&owner("b", 1), 1, noop(), 2).expect("another tenant's queue is its own");
        let mut ran = Vec::new();
        while let Some((tenant, _)) = turns.next() {
            ran.push(tenant);
        }
        assert_eq!(ran.len(), 2, "one of each at a time: {ran:?}");
        assert_eq!(turns.push(&owner("a", 1), 1, noop(), 2).unwrap_err(), CompileRefused::Full { queued: 2 });
        turns.done("a");
        turns.push(&owner("a", 1), 1, noop(), 2).expect("its running one ended");
        let mut none_waiting = Turns::default();
        none_waiting.push(&owner("a", 1), 1, noop(), 0).expect("with none running, one may always start");
        let _running = none_waiting.next().unwrap();
        assert!(none_waiting.push(&owner("a", 1), 1, noop(), 0).is_err(), "and none may wait");
    }

    #[tokio::test]
    async fn compiles_run_on_their_threads_and_answer() {
        let compiles = Compiles::new(2, 4);
        let on = compiles.run(&owner("a", 1), 10, || std::thread::current().name().map(str::to_owned)).await;
        assert!(on.unwrap().unwrap().starts_with("wasmkeep-compile-"));
        let (a, node) = (owner("a", 1), CompileOwner::default());
        let both = tokio::join!(compiles.run(&a, 10, || 1), compiles.run(&node, 10, || 2));
        assert_eq!(both, (Ok(1), Ok(2)));
    }

    #[tokio::test]
    async fn a_pool_dropped_refuses_every_queued_compile_at_once() {
        let compiles = Compiles::new(1, 4);
        let (started, has_started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let running = compiles
            .queue(&owner("a", 1), 10, move || {
                started.send(()).unwrap();
                let _ = released.recv();
                "ran"
            })
            .unwrap();
        has_started.recv_timeout(Duration::from_secs(10)).expect("the first compile starts");
        // Behind it, on the one thread: the same tenant's next and others'.
        let waiting: Vec<_> =
            ["a", "b", "c", "c"].into_iter().map(|t| compiles.queue(&owner(t, 1), 10, || "ran").unwrap()).collect();
        drop(compiles);
        let answers = tokio::time::timeout(Duration::from_secs(10), async {
            let mut answers = Vec::new();
            for answer in waiting {
                answers.push(answered(answer).await);
            }
            answers
        })
        .await
        .expect("the queued compiles are answered while the running one runs");
        assert_eq!(answers, [Err(CompileRefused::ShuttingDown); 4]);
        assert_eq!(answers[0].unwrap_err().to_string(), "the node is shutting down; retry the deploy");
        // The running one ends and answers as ever.
        release.send(()).unwrap();
        let ran = tokio::time::timeout(Duration::from_secs(10), answered(running)).await;
        assert_eq!(ran.expect("the running compile answers"), Ok("ran"));
    }
}
