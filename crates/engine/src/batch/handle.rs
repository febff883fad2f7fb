//! [`BatchHandle`]: a batch's state as this process knows it — its
//! inputs and jobs, their counts and states, waiting, cancelling and
//! cleaning up. Starting a batch is in `start`, collecting its results in
//! `collect`, resuming it in `resume`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;

use crate::{CleanupOptions, EngineError, JobHandle};
use kinetic_core::batch::{BatchCounts, Event, SkipReason, Slot};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::layout;
use kinetic_core::ports::{BatchEnd, GroupQuery};
use kinetic_core::status::JobState;

use super::BatchError;
use super::shared::{BatchShared, DriverState, FAN_OUT};

/// A batch: one job per input. Cheap to clone; clones share state.
///
/// Every status poll costs one backend call whatever the batch's size, and
/// concurrent pollers share it. Methods that wait poll every
/// `poll_interval` (from [`crate::BatchConfig`] or [`crate::AttachOptions`]).
#[derive(Clone)]
pub struct BatchHandle {
    pub(super) shared: Arc<BatchShared>,
}

impl std::fmt::Debug for BatchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchHandle")
            .field("group_id", &self.shared.group_id)
            .field("total", &self.shared.total)
            .finish_non_exhaustive()
    }
}

impl BatchHandle {
    /// The batch's id (`grp-` + 8 hex).
    pub fn group_id(&self) -> &GroupId {
        &self.shared.group_id
    }

    /// Its name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// Its tags.
    pub fn tags(&self) -> &BTreeMap<String, String> {
        &self.shared.tags
    }

    /// Number of inputs.
    pub fn total(&self) -> usize {
        self.shared.total
    }

    /// The job of each input, by index (`None` until submitted).
    pub fn jobs(&self) -> Vec<Option<JobHandle>> {
        let core = self.shared.lock();
        (0..core.jobs.len()).map(|i| core.job(i)).collect()
    }

    /// The job of input `index`, once submitted.
    pub fn job(&self, index: usize) -> Option<JobHandle> {
        self.shared.lock().job(index)
    }

    /// The job id of input `index`, once submitted (also for a job cleaned
    /// up after its outcome was recorded, which has no handle any more).
    pub fn job_id(&self, index: usize) -> Option<JobId> {
        let core = self.shared.lock();
        core.jobs
            .id(index)
            .or_else(|| core.machine.slot(index).and_then(Slot::job_id).cloned())
    }

    /// The counts as last seen, without polling.
    pub fn counts(&self) -> BatchCounts {
        self.shared.lock().machine.counts()
    }

    /// True once every input was submitted (or failed to be, or was skipped).
    pub fn is_submission_complete(&self) -> bool {
        self.shared.lock().machine.is_submission_complete()
    }

    /// Poll (one backend call) and return the state of every submitted
    /// input's job, by index.
    pub async fn statuses(&self) -> Result<Vec<(usize, JobState)>, BatchError> {
        self.shared.refresh(None).await?;
        let core = self.shared.lock();
        Ok(core
            .states
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.clone().map(|s| (i, s)))
            .collect())
    }

    /// Poll (one backend call) and count the inputs by where they are; the
    /// counts always sum to [`BatchHandle::total`].
    pub async fn status_counts(&self) -> Result<BatchCounts, BatchError> {
        self.shared.refresh(None).await?;
        Ok(self.counts())
    }

    /// The error to return when no one will submit the rest.
    pub(super) fn stalled(&self) -> Option<BatchError> {
        let core = self.shared.lock();
        let stalled = !core.machine.is_submission_complete()
            && core.driver != DriverState::Running
            && core.manifest_poll.is_none();
        stalled.then(|| BatchError::SubmissionStopped {
            group_id: self.shared.group_id.clone(),
            unsubmitted: core.machine.counts().unknown + core.machine.counts().queued,
        })
    }

    /// Sleep a poll interval, or less when the state changes or the
    /// deadline comes; `Err(Timeout)` once the deadline passed.
    async fn pause(
        &self,
        deadline: Option<Instant>,
        after: Option<Duration>,
    ) -> Result<(), BatchError> {
        self.pause_for(self.shared.poll_interval, deadline, after)
            .await
    }

    /// [`BatchHandle::pause`] for `interval` instead of the batch's own.
    pub(super) async fn pause_for(
        &self,
        interval: Duration,
        deadline: Option<Instant>,
        after: Option<Duration>,
    ) -> Result<(), BatchError> {
        let mut pause = interval;
        if let Some(deadline) = deadline {
            let now = Instant::now();
            if now >= deadline {
                return Err(BatchError::Timeout {
                    group_id: self.shared.group_id.clone(),
                    after: after.unwrap_or_default(),
                });
            }
            pause = pause.min(deadline - now);
        }
        let changed = std::pin::pin!(self.shared.changed.notified());
        let sleep = std::pin::pin!(tokio::time::sleep(pause));
        futures_util::future::select(changed, sleep).await;
        Ok(())
    }

    /// Poll for `wait`-like loops. A failed backend call was already
    /// retried by the engine's RetryBackend (and a cloud store's call by
    /// its client): what comes out ends the loop with its error.
    async fn poll_once(&self) -> Result<(), BatchError> {
        self.poll_once_every(self.shared.poll_interval).await
    }

    /// [`BatchHandle::poll_once`] for a loop polling every `interval`.
    pub(super) async fn poll_once_every(&self, interval: Duration) -> Result<(), BatchError> {
        self.shared.refresh(Some(interval / 2)).await
    }

    /// Wait until every input is submitted (or failed to be, or skipped).
    pub async fn wait_submitted(&self, timeout: Option<Duration>) -> Result<(), BatchError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let (complete, written, driven) = {
                let core = self.shared.lock();
                (
                    core.machine.is_submission_complete(),
                    core.complete_manifest_written,
                    core.driver == DriverState::Running,
                )
            };
            // The loop that submits also writes the manifest naming every
            // child; until it did, a process that exits now would leave an
            // incomplete manifest behind.
            if complete && (written || !driven) {
                return Ok(());
            }
            if let Some(e) = self.stalled() {
                return Err(e);
            }
            // An attached batch learns of new children by polling.
            if self.shared.lock().manifest_poll.is_some() {
                self.poll_once().await?;
            }
            self.pause(deadline, timeout).await?;
        }
    }

    /// Wait until every input ended (or failed to be submitted, or was
    /// skipped). A timeout is [`BatchError::Timeout`]; the batch goes on.
    pub async fn wait(&self, timeout: Option<Duration>) -> Result<(), BatchError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if self.shared.lock().machine.is_done() {
                // Every input is settled; the manifest naming them all is
                // written too before this returns, so a process that exits
                // now leaves no incomplete manifest behind.
                let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                self.wait_submitted(left).await?;
                let failed = self.shared.lock().submission_errors.len();
                if failed > 0 {
                    tracing::warn!(group_id = %self.shared.group_id, "{failed} input(s) of the batch could not be submitted");
                }
                return Ok(());
            }
            if let Some(e) = self.stalled() {
                return Err(e);
            }
            self.poll_once().await?;
            if self.shared.lock().machine.is_done() {
                continue;
            }
            self.pause(deadline, timeout).await?;
        }
    }

    /// The inputs no job is known for and none will be submitted for by
    /// this handle: never submitted (the process that submitted the batch
    /// stopped first), or not named by the manifest yet. A resume submits
    /// them.
    pub fn never_submitted(&self) -> Vec<usize> {
        let core = self.shared.lock();
        core.machine
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Unknown
                        | Slot::Skipped {
                            reason: SkipReason::NotInManifest
                        }
                )
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// What the manifest records for a resume (spec and options).
    pub(super) fn recipe(&self) -> Option<Value> {
        self.shared.lock().base.resume.clone()
    }

    /// True when the manifest says every input was submitted.
    pub fn manifest_complete(&self) -> bool {
        let core = self.shared.lock();
        core.base.submission_complete || core.complete_manifest_written
    }

    /// Cancel the batch: queued inputs are dropped, every submitted job is
    /// cancelled (and any whose submission is in flight, once it lands), and
    /// nothing is retried. Cancelled jobs count as failures in `results()`.
    pub async fn cancel(&self) -> Result<(), BatchError> {
        // Before any child is stopped: a handle following the batch
        // elsewhere (its submitter) reads the note when it reads a child
        // stopped, and stops submitting too.
        self.shared.mark_cancelled().await;
        let chores = self.shared.apply([Event::Cancel]);
        self.shared.run_chores(chores).await;
        Ok(())
    }

    /// Clean up every child (backend resources and/or store objects, as
    /// [`JobHandle::cleanup`]; earlier attempts' objects too) and, with
    /// `store`, the batch's own folder (`_groups/{group_id}/`). Failures
    /// are logged; the first one is returned after everything was tried.
    ///
    /// A batch submitted in one call (one Indexed Job) removes its
    /// backend objects with one `end_batch(Cleanup)`, not one call per
    /// child (its children have no backend objects of their own).
    pub async fn cleanup(&self, mut options: CleanupOptions) -> Result<(), BatchError> {
        let indexed = self.shared.lock().indexed.clone();
        if let Some(children) = indexed
            && options.backend
        {
            let query = GroupQuery::new(self.shared.group_id.clone(), self.shared.namespace());
            children
                .backend()
                .end_batch(&query, BatchEnd::Cleanup, options.wait)
                .await
                .map_err(EngineError::from)?;
            options.backend = false;
        }
        // The inputs with a job; each handle is made as its turn comes (an
        // indexed batch's are made from its batch spec, not held).
        let jobs: Vec<usize> = {
            let core = self.shared.lock();
            (0..core.jobs.len()).filter(|&i| core.jobs.has(i)).collect()
        };
        let shared = &self.shared;
        let errors: Vec<EngineError> = futures_util::stream::iter(jobs)
            .map(|index| async move {
                let mut errors = Vec::new();
                let job = shared.lock().job(index);
                if let Some(job) = job
                    && let Err(e) = job.cleanup(options).await
                {
                    tracing::warn!(job_id = %job.id(), "could not clean up a batch child: {e}");
                    errors.push(e);
                }
                if options.store {
                    for old in shared.attempt_ids(index) {
                        let prefix = layout::job_prefix(&old);
                        if let Err(e) = shared.engine.store.delete_prefix(&prefix).await {
                            errors.push(e.into());
                        }
                    }
                }
                errors
            })
            .buffer_unordered(FAN_OUT)
            .flat_map(futures_util::stream::iter)
            .collect()
            .await;
        if options.store {
            let prefix = layout::group_prefix(&self.shared.group_id);
            self.shared.engine.store.delete_prefix(&prefix).await?;
        }
        match errors.into_iter().next() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Ask the backend for the group's jobs (one call) and follow those the
    /// manifest did not name.
    pub(super) async fn reconcile(&self) -> Result<(), BatchError> {
        let (backend, namespace) = {
            let core = self.shared.lock();
            let first = (0..core.jobs.len())
                .find_map(|i| core.job(i))
                .map(|j| j.record().clone());
            let backend = core
                .base
                .backend
                .clone()
                .or_else(|| first.as_ref().map(|r| r.backend.clone()));
            let namespace = core
                .base
                .namespace
                .clone()
                .or_else(|| first.as_ref().map(|r| r.namespace.clone()))
                .unwrap_or_else(|| self.shared.engine.settings.namespace.clone());
            (backend, namespace)
        };
        match backend {
            Some(b) => self.shared.reconcile(&b, &namespace, false).await,
            None => Ok(()),
        }
    }
}
