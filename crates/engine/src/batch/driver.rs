//! The submission loop: a future that carries out the machine's `Submit`
//! commands a few at a time, keeps the manifest up to date, and polls the
//! batch while only polling can free capacity or trigger a retry.
//!
//! It needs no runtime feature: it multiplexes its submissions, the
//! command channel, the manifest write, a poll and a timer in one
//! `poll_fn`, and whoever polls it (a spawned task, a `join`) drives it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use tracing::Instrument;

use crate::submit::{ChildCall, submit_child};
use crate::{EngineError, JobHandle};
use kinetic_core::batch::{Event, GROUP_KIND_MAP, child_job_id};
use kinetic_core::ids::JobId;
use kinetic_core::plan::GroupPlace;
use kinetic_core::status::{JobState, JobStatus};

use super::BatchDriver;
use super::prep::BatchPrep;
use super::shared::{BatchShared, Chore, DriverState, Order, dispatch};

/// Settings of one loop.
#[derive(Debug, Clone, Copy)]
pub(super) struct DriverSettings {
    pub(super) parallelism: usize,
    pub(super) manifest_interval: Duration,
    pub(super) poll_interval: Duration,
}

/// Install a loop on `shared`, apply `initial` (e.g. `Pump`, or a resume's
/// events), and return the loop as a future.
pub(super) fn start(
    shared: Arc<BatchShared>,
    prep: Arc<BatchPrep>,
    settings: DriverSettings,
    initial: Vec<Event>,
) -> BatchDriver {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let chores = {
        let mut core = shared.lock();
        core.submit_tx = Some(tx);
        core.driver = DriverState::Running;
        // On a backend's worker pool a job reads PENDING while it waits in
        // the pool's queue: a stop withdraws those before they start.
        let pooled = prep.pool.is_some() && prep.resolved.backend.capabilities().worker_pools;
        core.machine.set_worker_pool(pooled);
        let mut chores = Vec::new();
        for event in initial {
            let commands = core.machine.apply(event);
            dispatch(&mut core, commands, &mut chores);
        }
        chores
    };
    let group_id = shared.group_id.clone();
    let span = tracing::info_span!("batch", group_id = %group_id);
    let future = run(shared, prep, rx, settings, chores).instrument(span);
    BatchDriver {
        group_id,
        future: Box::pin(future),
    }
}

/// The depth of a worker pool's queue, kept to what the pool's workers
/// take in [`QUEUE_HORIZON_POLLS`] poll intervals (at least
/// [`QUEUE_HORIZON_MIN`]) at the rate inputs ended over the last
/// [`PACE_WINDOW`], and never less than the prefetch the batch started
/// with (one input per worker): a worker then finds its next input queued
/// however late the loop's next poll and submission, while a fail-fast
/// stop withdraws (cancels) no more queued jobs than that.
struct Pace {
    floor: usize,
    horizon: Duration,
    since: Instant,
    ended: usize,
    /// The last window raised the depth by more than half.
    growing: bool,
}

/// Poll intervals' worth of inputs a worker pool's queue holds.
const QUEUE_HORIZON_POLLS: u32 = 4;
/// The least time's worth of inputs a worker pool's queue holds.
const QUEUE_HORIZON_MIN: Duration = Duration::from_secs(1);
/// The span over which the loop measures the rate inputs end at.
const PACE_WINDOW: Duration = Duration::from_millis(500);

impl Pace {
    /// For a batch on a worker pool with a limit (without one every input
    /// is in flight at once already).
    fn of(shared: &BatchShared, settings: &DriverSettings) -> Option<Self> {
        let core = shared.lock();
        let floor = core.machine.prefetch();
        (core.machine.on_worker_pool() && floor > 0).then(|| Self {
            floor,
            horizon: queue_horizon(settings.poll_interval),
            since: Instant::now(),
            ended: core.machine.completed().len(),
            growing: true,
        })
    }

    /// Whether a change is worth a poll at once: while the depth still
    /// grows (from the floor it starts at to the rate's, which a queue
    /// left to run dry would never show), or once the pool's queue, as last
    /// polled, holds at most half the depth asked of it or one input per
    /// worker (what is left near the batch's end): a worker may then find
    /// it empty before the next poll.
    fn runs_low(&self, shared: &BatchShared) -> bool {
        let core = shared.lock();
        change_polls(
            self.growing,
            core.machine.counts().pending,
            self.floor,
            core.machine.prefetch(),
        )
    }

    /// After a poll: measure the rate once a window passed, set the depth
    /// it asks for, and submit what that allows.
    fn update(&mut self, shared: &BatchShared) -> Vec<Chore> {
        let elapsed = self.since.elapsed();
        if elapsed < PACE_WINDOW {
            return Vec::new();
        }
        let mut chores = Vec::new();
        let mut core = shared.lock();
        let ended = core.machine.completed().len();
        let rate = ended.saturating_sub(self.ended) as f64 / elapsed.as_secs_f64();
        self.since = Instant::now();
        self.ended = ended;
        let depth = queue_depth(rate, self.horizon, self.floor);
        let before = core.machine.prefetch();
        self.growing = grows(before, depth);
        if depth != before {
            core.machine.set_prefetch(depth);
            let commands = core.machine.apply(Event::Pump);
            dispatch(&mut core, commands, &mut chores);
        }
        chores
    }
}

/// Whether a change on a pool is polled at once ([`Pace::runs_low`]):
/// while the depth grows, or once the `pending` inputs last seen queued
/// are at most half the `depth` asked for, or `floor` (one per worker).
fn change_polls(growing: bool, pending: usize, floor: usize, depth: usize) -> bool {
    growing || pending <= floor.max(depth / 2)
}

/// Whether a window that set the depth from `before` to `depth` raised it
/// by more than half.
fn grows(before: usize, depth: usize) -> bool {
    depth > before + before / 2
}

/// How long a pool's queue lasts: four poll intervals, at least a second.
fn queue_horizon(poll_interval: Duration) -> Duration {
    (poll_interval * QUEUE_HORIZON_POLLS).max(QUEUE_HORIZON_MIN)
}

/// The inputs to keep queued in a pool whose inputs end at `rate` per
/// second: `horizon`'s worth, and never fewer than `floor`.
fn queue_depth(rate: f64, horizon: Duration, floor: usize) -> usize {
    let wanted = (rate * horizon.as_secs_f64()).ceil();
    // A NaN or negative rate (no clock progress) asks for the floor.
    let wanted = if wanted.is_finite() && wanted > 0.0 {
        wanted.min(usize::MAX as f64) as usize
    } else {
        0
    };
    wanted.max(floor)
}

/// Marks the batch abandoned when the loop is dropped before its end.
struct AbandonGuard {
    shared: Arc<BatchShared>,
    armed: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut core = self.shared.lock();
        if core.driver == DriverState::Running {
            core.driver = DriverState::Abandoned;
            core.submit_tx = None;
            let commands = core.machine.apply(Event::Abandon);
            dispatch(&mut core, commands, &mut Vec::new());
        }
        drop(core);
        self.shared.changed.notify_waiters();
    }
}

type Submission = (usize, u32, JobId, Result<JobHandle, EngineError>);

/// A submission that came back.
enum Done {
    One(Box<Submission>),
    /// The one submission of an indexed batch.
    Batch(Result<(), EngineError>),
}

enum Wake {
    Command(Option<Order>),
    Submitted(Done),
    ChoreDone,
    ManifestWritten,
    PollDone,
    /// A backend said a job may have changed state: poll now.
    Changed,
    Timer,
}

fn submit_batch(shared: Arc<BatchShared>, prep: Arc<BatchPrep>) -> BoxFuture<'static, Done> {
    Box::pin(async move {
        let result =
            super::indexed::submit(&shared.engine, &shared.group_id, &prep, &prep.config).await;
        Done::Batch(result)
    })
}

/// Tell the machine how the one submission of an indexed batch went.
fn settle_batch(shared: &BatchShared, result: Result<(), EngineError>) -> Vec<Chore> {
    let mut chores = Vec::new();
    {
        let mut core = shared.lock();
        let event = match result {
            Ok(()) => Event::BatchSubmitted,
            Err(error) => {
                tracing::warn!(group_id = %shared.group_id, "the batch could not be submitted: {error}");
                let retryable = error.is_retryable() && !error.is_retried();
                let error = Arc::new(error);
                let submitting: Vec<usize> = core
                    .machine
                    .slots()
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| matches!(s, kinetic_core::batch::Slot::Submitting { .. }))
                    .map(|(i, _)| i)
                    .collect();
                for index in submitting {
                    core.submission_errors.insert(index, error.clone());
                }
                Event::BatchSubmitFailed { retryable }
            }
        };
        let commands = core.machine.apply(event);
        dispatch(&mut core, commands, &mut chores);
    }
    shared.changed.notify_waiters();
    chores
}

fn submit_one(
    shared: Arc<BatchShared>,
    prep: Arc<BatchPrep>,
    index: usize,
    attempt: u32,
) -> BoxFuture<'static, Done> {
    Box::pin(async move {
        let job_id = child_job_id(&shared.group_id, index, attempt);
        let result = async {
            let call =
                prep.calls.get(index).cloned().ok_or_else(|| {
                    EngineError::internal(format!("batch input {index} is missing"))
                })?;
            // A retry's runs are numbered on from the input's earlier runs
            // (KINETIC_ATTEMPT), as a single job's retries are.
            let earlier_runs = shared.runs_before(index, attempt);
            let call = ChildCall {
                args: call.args,
                kwargs: call.kwargs,
                group: Some(
                    GroupPlace::new(shared.group_id.clone(), GROUP_KIND_MAP, index as u64)
                        .after_runs(earlier_runs)
                        .on_pool(prep.pool),
                ),
            };
            submit_child(
                &shared.engine,
                &prep.spec,
                &prep.resolved,
                &prep.uploaded,
                &job_id,
                &call,
            )
            .await
        }
        .await;
        Done::One(Box::new((index, attempt, job_id, result)))
    })
}

/// Record a submission's outcome and tell the machine.
fn settle(shared: &BatchShared, (index, _attempt, job_id, result): Submission) -> Vec<Chore> {
    let mut chores = Vec::new();
    {
        let mut core = shared.lock();
        let event = match result {
            Ok(handle) => {
                core.jobs.set(index, handle);
                core.states[index] = Some(JobState::new(JobStatus::Pending));
                core.submission_errors.remove(&index);
                Event::Submitted { index, job_id }
            }
            Err(error) => {
                tracing::warn!(job_id = %job_id, "batch input {index} could not be submitted: {error}");
                // A failure some layer already retried (the engine's
                // RetryBackend, a cloud store's client) is not retried
                // again here: the batch's own attempts are for jobs, and
                // for submissions nobody retried yet.
                let retryable = error.is_retryable() && !error.is_retried();
                core.submission_errors.insert(index, Arc::new(error));
                Event::SubmitFailed { index, retryable }
            }
        };
        let commands = core.machine.apply(event);
        dispatch(&mut core, commands, &mut chores);
    }
    shared.changed.notify_waiters();
    chores
}

async fn run(
    shared: Arc<BatchShared>,
    prep: Arc<BatchPrep>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Order>,
    settings: DriverSettings,
    first_chores: Vec<Chore>,
) {
    let mut guard = AbandonGuard {
        shared: shared.clone(),
        armed: true,
    };
    let mut backlog: VecDeque<Order> = VecDeque::new();
    let mut submissions: FuturesUnordered<BoxFuture<'static, Done>> = FuturesUnordered::new();
    let mut chores: FuturesUnordered<BoxFuture<'static, ()>> = FuturesUnordered::new();
    let mut manifest_write: Option<BoxFuture<'static, ()>> = None;
    let mut poll: Option<BoxFuture<'static, ()>> = None;
    let mut last_manifest: Option<Instant> = None;
    let mut next_poll = Instant::now() + settings.poll_interval;
    let mut rx_open = true;
    // Jobs ending are events where a backend has them: a freed slot is
    // seen (and taken) at once, not at the next poll.
    let mut changes = shared.engine.backends.changes();
    // A poll asked for by a change reads states however recent the last
    // poll: the change came after it.
    let mut changed = false;
    let mut pace = Pace::of(&shared, &settings);
    let run_chores = |list: Vec<Chore>| -> Option<BoxFuture<'static, ()>> {
        if list.is_empty() {
            return None;
        }
        let shared = shared.clone();
        Some(Box::pin(async move { shared.run_chores(list).await }))
    };
    if let Some(f) = run_chores(first_chores) {
        chores.push(f);
    }

    loop {
        while submissions.len() < settings.parallelism {
            let Some(order) = backlog.pop_front() else {
                break;
            };
            submissions.push(match order {
                Order::One(index, attempt) => {
                    submit_one(shared.clone(), prep.clone(), index, attempt)
                }
                Order::Batch => submit_batch(shared.clone(), prep.clone()),
            });
        }

        let idle = submissions.is_empty() && backlog.is_empty();
        let (dirty, complete, wants_poll) = {
            let core = shared.lock();
            let complete = core.machine.is_submission_complete();
            (
                // Once everything is submitted the manifest must say so.
                core.manifest_dirty || (complete && !core.complete_manifest_written),
                complete,
                core.machine.needs_polling(),
            )
        };

        // The manifest: at most one write at a time, at most one per
        // interval, and one as soon as everything is submitted.
        // Spaced by what a write costs too: a large batch's manifest is
        // not rewritten faster than a tenth of the time.
        let spacing = shared.manifest_spacing(settings.manifest_interval);
        let manifest_due = last_manifest.map_or(Instant::now(), |t| t + spacing);
        if manifest_write.is_none()
            && dirty
            && (Instant::now() >= manifest_due || (idle && complete))
        {
            let snapshot = {
                let mut core = shared.lock();
                core.manifest_dirty = false;
                drop(core);
                shared.manifest_snapshot()
            };
            let s = shared.clone();
            manifest_write = Some(Box::pin(async move {
                if !s.write_manifest(snapshot).await {
                    // Written again at the next interval.
                    s.lock().manifest_dirty = true;
                }
            }));
            last_manifest = Some(Instant::now());
        }

        // Done: nothing to submit, retry or write.
        if idle && chores.is_empty() && manifest_write.is_none() && poll.is_none() {
            let mut core = shared.lock();
            let unwritten =
                core.machine.is_submission_complete() && !core.complete_manifest_written;
            if !core.machine.needs_driver() && !core.manifest_dirty && !unwritten {
                core.driver = DriverState::Finished;
                core.submit_tx = None;
                drop(core);
                guard.armed = false;
                shared.changed.notify_waiters();
                return;
            }
        }

        // Polling frees capacity and finds failures to retry; it is only
        // the loop's business while the machine needs it.
        if wants_poll && poll.is_none() && Instant::now() >= next_poll {
            let s = shared.clone();
            let max_age = (!std::mem::take(&mut changed)).then_some(settings.poll_interval / 2);
            poll = Some(Box::pin(async move {
                if let Err(e) = s.refresh(max_age).await {
                    tracing::warn!(group_id = %s.group_id, "batch status poll failed: {e}");
                }
            }));
            next_poll = Instant::now() + settings.poll_interval;
        }

        let mut wake_at = Instant::now() + Duration::from_secs(3600);
        if wants_poll && poll.is_none() {
            wake_at = wake_at.min(next_poll);
        }
        if dirty && manifest_write.is_none() {
            wake_at = wake_at.min(manifest_due);
        }
        let mut timer = std::pin::pin!(tokio::time::sleep_until(wake_at.into()));

        let wake = std::future::poll_fn(|cx| {
            if let Poll::Ready(Some(done)) = submissions.poll_next_unpin(cx) {
                return Poll::Ready(Wake::Submitted(done));
            }
            if rx_open && let Poll::Ready(message) = rx.poll_recv(cx) {
                return Poll::Ready(Wake::Command(message));
            }
            if let Poll::Ready(Some(())) = chores.poll_next_unpin(cx) {
                return Poll::Ready(Wake::ChoreDone);
            }
            if let Some(w) = manifest_write.as_mut()
                && w.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Wake::ManifestWritten);
            }
            if let Some(p) = poll.as_mut()
                && Pin::new(p).poll(cx).is_ready()
            {
                return Poll::Ready(Wake::PollDone);
            }
            if let Some(feed) = changes.as_mut() {
                match feed.poll_next_unpin(cx) {
                    Poll::Ready(Some(())) => return Poll::Ready(Wake::Changed),
                    Poll::Ready(None) => changes = None,
                    Poll::Pending => {}
                }
            }
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Timer);
            }
            Poll::Pending
        })
        .await;

        match wake {
            Wake::Command(Some(submit)) => backlog.push_back(submit),
            Wake::Command(None) => rx_open = false,
            Wake::Submitted(done) => {
                let settled = match done {
                    Done::One(submission) => settle(&shared, *submission),
                    Done::Batch(result) => settle_batch(&shared, result),
                };
                if let Some(f) = run_chores(settled) {
                    chores.push(f);
                }
            }
            Wake::ChoreDone | Wake::Timer => {}
            Wake::ManifestWritten => manifest_write = None,
            Wake::PollDone => {
                poll = None;
                if let Some(pace) = pace.as_mut()
                    && let Some(f) = run_chores(pace.update(&shared))
                {
                    chores.push(f);
                }
            }
            // Polled as soon as no poll is in flight (and again after one
            // that is, which may have read the states before the change).
            // On a worker pool whose queue still holds more than one input
            // per worker, a freed worker takes its next input from the
            // queue without the client: the change waits for the timer's
            // poll. Polled at once for each change, a map of small inputs
            // was read about once per input ended, each poll reading every
            // queued input (a busy core for the client, nothing gained).
            Wake::Changed => {
                if pace.as_ref().is_none_or(|p| p.runs_low(&shared)) {
                    next_poll = Instant::now();
                    changed = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pools_queue_holds_the_horizons_worth_of_inputs_and_at_least_one_per_worker() {
        let second = Duration::from_secs(1);
        // Two workers taking 150 inputs/s: 150 queued for a 1 s horizon.
        assert_eq!(queue_depth(150.0, second, 2), 150);
        assert_eq!(
            queue_depth(0.4, second, 2),
            2,
            "slow inputs: one per worker"
        );
        assert_eq!(queue_depth(0.0, second, 3), 3, "nothing ended yet");
        assert_eq!(queue_depth(f64::NAN, second, 1), 1);
        // The horizon is four poll intervals, at least a second.
        assert_eq!(
            queue_horizon(Duration::from_millis(500)),
            Duration::from_secs(2)
        );
        assert_eq!(queue_horizon(Duration::from_millis(200)), second);
        assert_eq!(queue_depth(10.0, Duration::from_secs(2), 1), 20);
    }

    #[test]
    fn a_change_is_polled_at_once_while_the_depth_grows_or_the_queue_runs_low() {
        // Two workers, a queue asked to hold 160 inputs.
        assert!(
            !change_polls(false, 160, 2, 160),
            "a full queue waits for the timer"
        );
        assert!(!change_polls(false, 81, 2, 160));
        assert!(change_polls(false, 80, 2, 160), "half drained");
        assert!(change_polls(false, 2, 2, 2), "one input per worker left");
        assert!(change_polls(false, 0, 2, 160), "the batch's end");
        assert!(change_polls(true, 160, 2, 160), "the depth still grows");
        // The depth grows while a window raises it by more than half.
        assert!(grows(2, 14));
        assert!(grows(82, 160));
        assert!(!grows(160, 155));
        assert!(!grows(154, 167), "the rate's own noise");
        assert!(!grows(10, 15));
        assert!(grows(10, 16));
    }
}
