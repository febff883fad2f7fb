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
use kinetic_core::layout;
use kinetic_core::ports::{BatchEnd, CleanupWait, GroupQuery, ObjectStoreExt};
use kinetic_core::status::JobState;

use super::handle::BatchHandle;
use super::shared::FAN_OUT;
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
    async fn collect_one(&self, index: usize) -> BatchItem {
        let (slot, job, state, submit_error, recorded) = {
            let core = self.shared.lock();
            (
                core.machine.slot(index).cloned(),
                core.jobs.get(index).cloned().flatten(),
                core.states.get(index).cloned().flatten(),
                core.submission_errors.get(&index).cloned(),
                core.outcomes.get(&index).cloned(),
            )
        };
        let job_id = job
            .as_ref()
            .map(|j| j.id().clone())
            .or_else(|| slot.as_ref().and_then(Slot::job_id).cloned());
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

    /// Wait for the batch and collect every input's value.
    ///
    /// In input order by default; with `ordered(false)`, in the order the
    /// jobs end (collected as they end), then the inputs never submitted.
    /// With `return_exceptions`, failed inputs are `Err` items; otherwise any
    /// failure makes the call fail with [`BatchError::Failed`], which keeps
    /// the failed jobs and every other input's value. With `cleanup` (the
    /// default) each job is cleaned up as [`JobHandle::result`] would.
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
        let cleanup = options.cleanup;
        let mut items: Vec<BatchItem> = if options.ordered {
            self.wait(options.timeout).await?;
            futures_util::stream::iter(0..self.total())
                .map(|i| self.collect_one(i))
                .buffered(FAN_OUT)
                .collect()
                .await
        } else {
            let collected: Vec<Result<BatchItem, BatchError>> = self
                .completed_indices(options.timeout, self.shared.poll_interval)
                .map(|ended| {
                    let this = self.clone();
                    async move {
                        match ended {
                            Ok(index) => Ok(this.collect_one(index).await),
                            Err(e) => Err(e),
                        }
                    }
                })
                .buffered(FAN_OUT)
                .collect()
                .await;
            collected.into_iter().collect::<Result<Vec<_>, _>>()?
        };
        if !options.ordered {
            let rest: Vec<usize> = (0..self.total())
                .filter(|i| !items.iter().any(|it| it.index == *i))
                .collect();
            for i in rest {
                items.push(self.collect_one(i).await);
            }
        }
        self.record_outcomes(&items, cleanup).await?;
        let failed: Vec<&BatchItem> = items.iter().filter(|i| i.outcome.is_err()).collect();
        // A job's failure, collected now or recorded by an earlier
        // `results` (the same failure: its handle is a failed job's).
        let failed_jobs: Vec<JobHandle> = failed
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
        if failed.is_empty() || options.return_exceptions {
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

    /// Record how each newly collected job ended in the manifest, and only
    /// then, with `cleanup`, clean the jobs up (as
    /// [`JobHandle::result`] does): a second `results` reads the same
    /// values from the manifest, and a crash in between loses nothing.
    async fn record_outcomes(&self, items: &[BatchItem], cleanup: bool) -> Result<(), BatchError> {
        let mut fresh: Vec<(JobHandle, bool)> = Vec::new();
        {
            let mut core = self.shared.lock();
            for item in items {
                if core.outcomes.contains_key(&item.index) {
                    continue;
                }
                let Some(job) = core.jobs.get(item.index).cloned().flatten() else {
                    continue;
                };
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
                    Err(_) => continue,
                };
                fresh.push((job, item.outcome.is_ok()));
                core.outcomes.insert(item.index, outcome);
            }
        }
        if fresh.is_empty() {
            return Ok(());
        }
        let manifest = self.shared.manifest_snapshot();
        let path = layout::group_manifest(&self.shared.group_id);
        // Not cleaned unless recorded: the values must stay somewhere.
        self.shared
            .engine
            .store
            .put_json(&path, manifest.to_json())
            .await?;
        let indexed = self.shared.lock().indexed.clone();
        if cleanup && let Some(children) = indexed {
            // One Indexed Job for the whole batch: its children have no
            // backend objects of their own (no call per child). It goes,
            // once, when every input was collected with a value; a failed
            // input keeps it for its pod's log, until its TTL.
            let all_succeeded = {
                let core = self.shared.lock();
                core.outcomes.len() == self.shared.total
                    && core
                        .outcomes
                        .values()
                        .all(|o| matches!(o, ChildOutcome::Succeeded { .. }))
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
        if cleanup {
            futures_util::stream::iter(fresh)
                .for_each_concurrent(FAN_OUT, |(job, collected)| async move {
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
                })
                .await;
        }
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
            .filter_map(|(i, _)| core.jobs[i].clone())
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
