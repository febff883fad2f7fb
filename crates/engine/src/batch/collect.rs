//! Collecting a batch: its jobs as they end, its results in input order,
//! the outcomes recorded in the manifest, and its failures.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::{CleanupOptions, EngineError, JobHandle};
use kinetic_core::batch::{ChildOutcome, Slot};
use kinetic_core::ids::JobId;
use kinetic_core::ports::{BatchEnd, CleanupWait, GroupQuery};
use kinetic_core::status::JobState;

use super::handle::BatchHandle;
use super::shared::{BatchShared, FAN_OUT, Kept};
use super::{BatchError, BatchFailure, BatchItem, BatchResultsOptions, ChildError, FailedChild};

impl BatchHandle {
    /// The jobs as they end, in the order they end, while later inputs may
    /// still be being submitted. Ends once every input is settled; a
    /// timeout yields [`BatchError::Timeout`] and ends the stream.
    pub fn as_completed(
        &self,
        timeout: Option<Duration>,
    ) -> BoxStream<'static, Result<JobHandle, BatchError>> {
        self.as_completed_every(timeout, self.shared.poll_interval)
    }

    /// [`BatchHandle::as_completed`], polling the jobs' states every
    /// `poll_interval` (the batch's own interval is [`crate::BatchConfig`]'s or
    /// [`crate::AttachOptions`]'s) while nothing ended (Kinetic's
    /// `as_completed(poll_interval=…)`); a backend's change events still
    /// wake it at once.
    pub fn as_completed_every(
        &self,
        timeout: Option<Duration>,
        poll_interval: Duration,
    ) -> BoxStream<'static, Result<JobHandle, BatchError>> {
        let handle = self.clone();
        self.completed_indices(timeout, poll_interval)
            .filter_map(move |ended| {
                let job = match ended {
                    Ok(index) => handle.job(index).map(Ok),
                    Err(e) => Some(Err(e)),
                };
                futures_util::future::ready(job)
            })
            .boxed()
    }

    /// The indices of the inputs whose jobs ended, in the order they ended.
    fn completed_indices(
        &self,
        timeout: Option<Duration>,
        poll_interval: Duration,
    ) -> BoxStream<'static, Result<usize, BatchError>> {
        struct State {
            handle: BatchHandle,
            cursor: usize,
            deadline: Option<Instant>,
            timeout: Option<Duration>,
            poll_interval: Duration,
            done: bool,
        }
        let state = State {
            handle: self.clone(),
            cursor: 0,
            poll_interval,
            deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
            timeout,
            done: false,
        };
        futures_util::stream::unfold(state, |mut st| async move {
            if st.done {
                return None;
            }
            loop {
                let (next, finished) = {
                    let core = st.handle.shared.lock();
                    let completed = core.machine.completed();
                    let next = completed.get(st.cursor).copied();
                    let finished = st.cursor >= completed.len() && core.machine.is_done();
                    (next, finished)
                };
                if let Some(index) = next {
                    st.cursor += 1;
                    return Some((Ok(index), st));
                }
                if finished {
                    return None;
                }
                if let Some(e) = st.handle.stalled() {
                    st.done = true;
                    return Some((Err(e), st));
                }
                if let Err(e) = st.handle.poll_once_every(st.poll_interval).await {
                    st.done = true;
                    return Some((Err(e), st));
                }
                let grew = st.handle.shared.lock().machine.completed().len() > st.cursor;
                if !grew
                    && let Err(e) = st
                        .handle
                        .pause_for(st.poll_interval, st.deadline, st.timeout)
                        .await
                {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        })
        .boxed()
    }

    /// The outcome of one settled input (as recorded, when an earlier
    /// collection recorded it); collecting cleans nothing up.
    async fn collect_one(&self, index: usize, recorded: &RecordedOutcomes) -> BatchItem {
        let (slot, job, state, submit_error, kept) = {
            let core = self.shared.lock();
            (
                core.machine.slot(index).cloned(),
                core.job(index),
                core.states.get(index).cloned().flatten(),
                core.submission_errors.get(&index).cloned(),
                core.outcomes.get(&index).cloned(),
            )
        };
        let job_id = job
            .as_ref()
            .map(|j| j.id().clone())
            .or_else(|| slot.as_ref().and_then(Slot::job_id).cloned());
        let recorded = match kept {
            Some(Kept::Pending(outcome)) => Some(outcome),
            Some(Kept::Written) => recorded.take(&self.shared, index).await,
            None => None,
        };
        if let (Some(recorded), Some(job_id)) = (recorded, &job_id) {
            let outcome = match recorded {
                ChildOutcome::Succeeded { value, .. } => Ok(value),
                ChildOutcome::Failed { error, .. } => Err(ChildError::Recorded {
                    index,
                    job_id: job_id.clone(),
                    message: error,
                }),
            };
            return BatchItem {
                index,
                job_id: Some(job_id.clone()),
                outcome,
            };
        }
        let outcome = match (slot, job) {
            (Some(Slot::Ended { status, job_id, .. }), Some(job)) => {
                let state = state
                    .filter(|s| s.status.is_terminal())
                    .unwrap_or_else(|| JobState::new(status));
                job.collect_ended(&state, false, false, CleanupWait::default())
                    .await
                    .map_err(|e| ChildError::Job {
                        index,
                        job_id,
                        error: Arc::new(e),
                    })
            }
            (Some(Slot::SubmitFailed { attempts }), _) => Err(ChildError::Submission {
                index,
                attempts,
                error: submit_error
                    .unwrap_or_else(|| Arc::new(EngineError::internal("the submission failed"))),
            }),
            (Some(Slot::Skipped { reason }), _) => Err(ChildError::NotSubmitted { index, reason }),
            (other, _) => Err(ChildError::Submission {
                index,
                attempts: 0,
                error: Arc::new(EngineError::internal(format!(
                    "input {index} has not ended ({other:?})"
                ))),
            }),
        };
        BatchItem {
            index,
            job_id,
            outcome,
        }
    }

    /// Wait until input `index` settled (its job ended, or it failed to be
    /// submitted, or was skipped).
    async fn settled(
        &self,
        index: usize,
        poll_interval: Duration,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
    ) -> Result<(), BatchError> {
        loop {
            let terminal = |h: &Self| {
                h.shared
                    .lock()
                    .machine
                    .slot(index)
                    .is_some_and(Slot::is_terminal)
            };
            if terminal(self) {
                return Ok(());
            }
            if let Some(e) = self.stalled() {
                return Err(e);
            }
            self.poll_once_every(poll_interval).await?;
            if !terminal(self) {
                self.pause_for(poll_interval, deadline, timeout).await?;
            }
        }
    }

    /// Every input's outcome as a stream, collected as the inputs settle,
    /// each recorded in the manifest and (with `cleanup`) its job cleaned
    /// up, as [`BatchHandle::results`] does, but handed out at once
    /// instead of held: the handle keeps no value once the manifest
    /// recording it is written (every second at most, or ten times what a
    /// write takes, and when the stream ends), and only the values of the
    /// last second until then.
    ///
    /// In input order by default: an input's item comes once it and every
    /// input before it settled, and at most 16 inputs past the last item
    /// are collected ahead. With `ordered(false)`, in the order the jobs
    /// end, then the inputs never submitted. Failed inputs are `Err` items
    /// of the [`BatchItem`]; a stream error (a timeout, a poll or a
    /// manifest write that failed) is the last item. A stream dropped
    /// before its end records what it handed out since its last write only
    /// in the jobs (their results stay in the store; nothing unrecorded is
    /// cleaned up).
    pub fn results_stream(
        &self,
        options: BatchResultsOptions,
    ) -> BoxStream<'static, Result<BatchItem, BatchError>> {
        let recorded = RecordedOutcomes::default();
        let interval = self.shared.poll_interval;
        let deadline = options.timeout.and_then(|t| Instant::now().checked_add(t));
        let timeout = options.timeout;
        let collected: BoxStream<'static, Result<BatchItem, BatchError>> = if options.ordered {
            let handle = self.clone();
            futures_util::stream::iter(0..self.total())
                .map(move |index| {
                    let handle = handle.clone();
                    let recorded = recorded.clone();
                    async move {
                        handle.settled(index, interval, deadline, timeout).await?;
                        Ok(handle.collect_one(index, &recorded).await)
                    }
                })
                .buffered(FAN_OUT)
                .boxed()
        } else {
            let ended = {
                let handle = self.clone();
                let recorded = recorded.clone();
                self.completed_indices(timeout, interval)
                    .map(move |ended| {
                        let handle = handle.clone();
                        let recorded = recorded.clone();
                        async move {
                            match ended {
                                Ok(index) => Ok(handle.collect_one(index, &recorded).await),
                                Err(e) => Err(e),
                            }
                        }
                    })
                    .buffered(FAN_OUT)
            };
            // Then the inputs whose job never ended (never submitted,
            // skipped): every ended one came through `completed`.
            let handle = self.clone();
            let rest = futures_util::stream::once(async move {
                let never: Vec<usize> = {
                    let core = handle.shared.lock();
                    (0..handle.total())
                        .filter(|i| !matches!(core.machine.slot(*i), Some(Slot::Ended { .. })))
                        .collect()
                };
                let recorded = recorded.clone();
                futures_util::stream::iter(never).then(move |index| {
                    let handle = handle.clone();
                    let recorded = recorded.clone();
                    async move { Ok(handle.collect_one(index, &recorded).await) }
                })
            })
            .flatten();
            ended.chain(rest).boxed()
        };
        Recorder::stream(self.clone(), collected, options.cleanup, deadline)
    }

    /// Wait for the batch and collect every input's value.
    ///
    /// In input order by default; with `ordered(false)`, in the order the
    /// jobs end (collected as they end), then the inputs never submitted.
    /// With `return_exceptions`, failed inputs are `Err` items; otherwise any
    /// failure makes the call fail with [`BatchError::Failed`], which keeps
    /// the failed jobs and every other input's value. With `cleanup` (the
    /// default) each job is cleaned up as [`JobHandle::result`] would.
    /// The values are the caller's: once the manifest recorded them the
    /// handle keeps none ([`BatchHandle::values_held`]); a later call reads
    /// them back from the manifest. [`BatchHandle::results_stream`] hands
    /// them out one by one instead.
    pub async fn results(
        &self,
        options: BatchResultsOptions,
    ) -> Result<Vec<BatchItem>, BatchError> {
        {
            let core = self.shared.lock();
            if !core.unavailable.is_empty() {
                tracing::warn!(group_id = %self.shared.group_id, "{} child(ren) named by the manifest cannot be loaded", core.unavailable.len());
            }
        }
        let return_exceptions = options.return_exceptions;
        let mut items: Vec<BatchItem> = Vec::with_capacity(self.total());
        let mut stream = self.results_stream(options);
        while let Some(item) = stream.next().await {
            items.push(item?);
        }
        drop(stream);
        // A job's failure, collected now or recorded by an earlier
        // `results` (the same failure: its handle is a failed job's).
        let failed_jobs: Vec<JobHandle> = items
            .iter()
            .filter(|i| {
                matches!(
                    i.outcome,
                    Err(ChildError::Job { .. } | ChildError::Recorded { .. })
                )
            })
            .filter_map(|i| self.job(i.index))
            .collect();
        self.shared.lock().cached_failures = Some(failed_jobs);
        if items.iter().all(|i| i.outcome.is_ok()) || return_exceptions {
            return Ok(items);
        }
        let mut partial = vec![None; self.total()];
        let mut failures = Vec::new();
        let mut submission_failures = BTreeMap::new();
        items.sort_by_key(|i| i.index);
        for item in items {
            match item.outcome {
                Ok(v) => partial[item.index] = Some(v),
                Err(e @ (ChildError::Job { .. } | ChildError::Recorded { .. })) => {
                    match self.job(item.index) {
                        Some(job) => failures.push(FailedChild {
                            index: item.index,
                            job,
                            error: e,
                        }),
                        None => {
                            submission_failures.insert(item.index, e);
                        }
                    }
                }
                Err(e) => {
                    submission_failures.insert(item.index, e);
                }
            }
        }
        Err(BatchError::Failed(Box::new(BatchFailure {
            group_id: self.shared.group_id.clone(),
            total: self.total(),
            failures,
            submission_failures,
            partial_results: partial,
        })))
    }

    /// How many collected values (or errors) this handle holds in memory:
    /// those a collection handed out that no manifest write recorded yet.
    /// 0 once `results` returned; `as_completed` and
    /// [`JobHandle::result`] hold none. For checking that a client over
    /// many inputs stays bounded.
    pub fn values_held(&self) -> usize {
        self.shared.outcomes_held()
    }

    /// Keep how each newly collected job ended, to be recorded in the
    /// manifest; returns the input and whether it succeeded when it is
    /// new. Called as items are handed out.
    fn keep_outcome(&self, item: &BatchItem, cleanup: bool) -> Option<(usize, bool)> {
        let mut core = self.shared.lock();
        if item.index >= core.jobs.len()
            || core.outcomes.contains_key(&item.index)
            || !core.jobs.has(item.index)
        {
            return None;
        }
        let outcome = match &item.outcome {
            Ok(value) => ChildOutcome::Succeeded {
                value: value.clone(),
                cleaned: cleanup,
            },
            Err(e @ ChildError::Job { .. }) => ChildOutcome::Failed {
                error: e
                    .engine_error()
                    .map_or_else(|| e.to_string(), ToString::to_string),
                cleaned: false,
            },
            Err(_) => return None,
        };
        core.failed_outcome |= matches!(outcome, ChildOutcome::Failed { .. });
        core.outcomes.insert(item.index, Kept::Pending(outcome));
        Some((item.index, item.outcome.is_ok()))
    }

    /// Record the outcomes kept since the last write in the manifest, and
    /// only then, with `cleanup`, clean their jobs up (as
    /// [`JobHandle::result`] does): a second `results` reads the same
    /// values from the manifest, and a crash in between loses nothing.
    /// A write put off (an attached handle before it knows every child)
    /// keeps the values here and their cleanup for the next write.
    async fn record_outcomes(
        &self,
        fresh: Vec<(usize, bool)>,
        cleanup: bool,
    ) -> Result<(), BatchError> {
        {
            let mut core = self.shared.lock();
            if fresh.is_empty() && core.cleanup_after_write.is_empty() {
                return Ok(());
            }
            if cleanup {
                core.cleanup_after_write.extend(fresh);
            }
        }
        // Not cleaned unless recorded: the values must stay somewhere.
        let written = self
            .shared
            .try_write_manifest(self.shared.manifest_snapshot())
            .await?;
        if !written {
            return Ok(());
        }
        // What this call and the ones put off asked to clean up.
        let fresh = std::mem::take(&mut self.shared.lock().cleanup_after_write);
        if fresh.is_empty() {
            return Ok(());
        }
        let indexed = self.shared.lock().indexed.clone();
        if let Some(children) = indexed {
            // One Indexed Job for the whole batch: its children have no
            // backend objects of their own (no call per child). It goes,
            // once, when every input was collected with a value; a failed
            // input keeps it for its pod's log, until its TTL.
            let all_succeeded = {
                let core = self.shared.lock();
                core.outcomes.len() == self.shared.total && !core.failed_outcome
            };
            if all_succeeded {
                let query = GroupQuery::new(self.shared.group_id.clone(), self.shared.namespace());
                if let Err(e) = children
                    .backend()
                    .end_batch(&query, BatchEnd::Cleanup, CleanupWait::default())
                    .await
                {
                    tracing::warn!(group_id = %self.shared.group_id, "cleanup of the collected batch failed: {e}");
                }
            }
            return Ok(());
        }
        let this = self.clone();
        futures_util::stream::iter(fresh)
                .for_each_concurrent(FAN_OUT, |(index, collected)| {
                    let job = this.job(index);
                    async move {
                        let Some(job) = job else { return };
                        // As for one job: a success's backend objects go, a
                        // failure's stay for its logs, and stored artifacts
                        // go only when asked (`cleanup`).
                        let options = CleanupOptions {
                            backend: collected,
                            store: false,
                            ..CleanupOptions::default()
                        };
                        if let Err(e) = job.cleanup(options).await {
                            tracing::warn!(job_id = %job.id(), "cleanup of a collected batch child failed: {e}");
                        }
                    }
                })
                .await;
        Ok(())
    }

    /// The failed jobs: those of the last `results()` call, or else (after a
    /// poll) the jobs whose status is exactly `FAILED`.
    pub async fn failures(&self) -> Result<Vec<JobHandle>, BatchError> {
        if let Some(cached) = self.shared.lock().cached_failures.clone() {
            return Ok(cached);
        }
        self.shared.refresh(None).await?;
        let core = self.shared.lock();
        Ok(core
            .machine
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Ended {
                        status: kinetic_core::status::JobStatus::Failed,
                        ..
                    }
                )
            })
            .filter_map(|(i, _)| core.job(i))
            .collect())
    }

    /// The inputs that could not be submitted, with their last error.
    pub fn submission_failures(&self) -> BTreeMap<usize, ChildError> {
        let core = self.shared.lock();
        core.machine
            .slots()
            .iter()
            .enumerate()
            .filter_map(|(index, s)| match s {
                Slot::SubmitFailed { attempts } => {
                    Some((
                        index,
                        ChildError::Submission {
                            index,
                            attempts: *attempts,
                            error: core.submission_errors.get(&index).cloned().unwrap_or_else(
                                || Arc::new(EngineError::internal("the submission failed")),
                            ),
                        },
                    ))
                }
                _ => None,
            })
            .collect()
    }

    /// Children the manifest names whose record could not be loaded.
    pub fn unavailable_children(&self) -> BTreeMap<usize, JobId> {
        self.shared.lock().unavailable.clone()
    }
}

/// Shortest time between two manifest writes of a collection (longer
/// when a write takes more than a tenth of it).
const RECORD_EVERY: Duration = Duration::from_secs(1);

/// The outcomes the stored manifest records, read when a collection
/// first needs one this process no longer holds (an earlier collection
/// recorded it), and handed out (removed) as they are used.
#[derive(Debug, Clone, Default)]
struct RecordedOutcomes(Arc<tokio::sync::Mutex<Option<BTreeMap<usize, ChildOutcome>>>>);

impl RecordedOutcomes {
    /// The recorded outcome of `index`; `None` when the manifest (read
    /// again once when the copy read before misses it) has none.
    async fn take(&self, shared: &BatchShared, index: usize) -> Option<ChildOutcome> {
        let mut cache = self.0.lock().await;
        if let Some(found) = cache.as_mut().and_then(|c| c.remove(&index)) {
            return Some(found);
        }
        match shared.recorded_outcomes().await {
            Ok(mut stored) => {
                let found = stored.remove(&index);
                *cache = Some(stored);
                found
            }
            Err(e) => {
                tracing::warn!(group_id = %shared.group_id, "the recorded outcome of input {index} cannot be read from the manifest: {e}");
                None
            }
        }
    }
}

/// Records the outcomes of a collection's items in the manifest as they
/// are handed out, and cleans their jobs up once recorded.
struct Recorder {
    handle: BatchHandle,
    items: BoxStream<'static, Result<BatchItem, BatchError>>,
    cleanup: bool,
    deadline: Option<Instant>,
    /// Kept, not recorded yet: the input and whether it succeeded.
    fresh: Vec<(usize, bool)>,
    last_write: Instant,
    /// A recording failed: the next item is this error.
    failed: Option<BatchError>,
    finished: bool,
}

impl Recorder {
    fn stream(
        handle: BatchHandle,
        items: BoxStream<'static, Result<BatchItem, BatchError>>,
        cleanup: bool,
        deadline: Option<Instant>,
    ) -> BoxStream<'static, Result<BatchItem, BatchError>> {
        let recorder = Self {
            handle,
            items,
            cleanup,
            deadline,
            fresh: Vec::new(),
            last_write: Instant::now(),
            failed: None,
            finished: false,
        };
        futures_util::stream::unfold(recorder, |mut r| async move {
            if r.finished {
                return None;
            }
            if let Some(e) = r.failed.take() {
                r.finished = true;
                return Some((Err(e), r));
            }
            match r.items.next().await {
                Some(Ok(item)) => {
                    if let Some(kept) = r.handle.keep_outcome(&item, r.cleanup) {
                        r.fresh.push(kept);
                    }
                    let spacing = r.handle.shared.manifest_spacing(RECORD_EVERY);
                    if !r.fresh.is_empty()
                        && r.last_write.elapsed() >= spacing
                        && let Err(e) = r.record().await
                    {
                        r.failed = Some(e);
                    }
                    Some((Ok(item), r))
                }
                Some(Err(e)) => {
                    r.finished = true;
                    if let Err(record) = r.record().await {
                        tracing::warn!(group_id = %r.handle.group_id(), "collected outcomes could not be recorded in the manifest: {record}");
                    }
                    Some((Err(e), r))
                }
                None => {
                    r.finished = true;
                    // Every input settled; as `wait`, return only once the
                    // manifest naming them all is written.
                    let left = r
                        .deadline
                        .map(|d| d.saturating_duration_since(Instant::now()));
                    let ended = match r.handle.wait(left).await {
                        Ok(()) => r.record().await,
                        Err(e) => Err(e),
                    };
                    ended.err().map(|e| (Err(e), r))
                }
            }
        })
        .boxed()
    }

    /// Record what was kept since the last write, then clean it up.
    async fn record(&mut self) -> Result<(), BatchError> {
        self.last_write = Instant::now();
        let fresh = std::mem::take(&mut self.fresh);
        self.handle.record_outcomes(fresh, self.cleanup).await
    }
}
