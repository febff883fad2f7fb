//! The state a batch handle and its submission loop share: the machine,
//! the children's handles and states, and the poll that refreshes them
//! with one backend call.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use serde_json::Value;

use crate::{EngineError, EngineInner, JobHandle, load_handle};
use kinetic_core::batch::{
    BatchMachine, ChildOutcome, Command, Event, GroupManifest, InputMode, ManifestChild,
    child_job_id,
};
use kinetic_core::ids::{GroupId, JobId};
use kinetic_core::layout;
use kinetic_core::ports::{
    Backend, BatchEnd, CleanupWait, GetOptions, GroupQuery, GroupStatus, ObjectStoreExt,
};
use kinetic_core::protocol::RunnerResult;
use kinetic_core::record::UtcTimestamp;
use kinetic_core::status::{JobState, JobStatus, StatusReason};

use super::BatchError;
use super::indexed::IndexedChildren;
use super::jobs::Jobs;

/// What the submission loop is asked to submit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// Input `index` as attempt `attempt`, on its own.
    One(usize, u32),
    /// Every input being submitted, in one call (an indexed batch).
    Batch,
}

/// The note an indexed batch's cancel leaves in its folder.
const CANCEL_NOTE: &str = "cancelled.json";

/// Store or backend calls a batch makes at once when it must make one per
/// child (loading records, per-job status fallback, cancel, cleanup).
pub(super) const FAN_OUT: usize = 16;

/// Whether a submission loop serves this handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DriverState {
    /// None was started (an attached batch).
    None,
    /// It runs.
    Running,
    /// It ended after submitting everything it had to.
    Finished,
    /// It was dropped before the end.
    Abandoned,
}

/// What the manifest says, beyond its children.
#[derive(Debug, Clone)]
pub(super) struct ManifestBase {
    pub(super) created_at: UtcTimestamp,
    pub(super) submit_fn_name: String,
    pub(super) backend: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) entrypoint: Option<String>,
    pub(super) input_mode: Option<InputMode>,
    pub(super) inputs: Option<String>,
    /// What a resume needs ([`super::recipe`]).
    pub(super) resume: Option<Value>,
    /// The manifest says every input was submitted.
    pub(super) submission_complete: bool,
}

/// Reading the manifest of a batch still being submitted elsewhere.
#[derive(Debug, Clone, Copy)]
pub(super) struct ManifestPoll {
    pub(super) interval: Duration,
    pub(super) deadline: Option<Instant>,
    pub(super) next: Instant,
}

/// The mutable part.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) machine: BatchMachine,
    /// The current (or last) job of each input ([`Jobs`]: compact for
    /// an indexed batch's children).
    pub(super) jobs: Jobs,
    /// The last state seen of each input's job.
    pub(super) states: Vec<Option<JobState>>,
    /// The last submission error of each input.
    pub(super) submission_errors: BTreeMap<usize, Arc<EngineError>>,
    /// Children the manifest names whose record cannot be read.
    pub(super) unavailable: BTreeMap<usize, JobId>,
    /// Failed jobs found by the last `results()`.
    pub(super) cached_failures: Option<Vec<JobHandle>>,
    pub(super) driver: DriverState,
    /// Where `Submit` commands go while a loop runs.
    pub(super) submit_tx: Option<tokio::sync::mpsc::UnboundedSender<Order>>,
    /// Set for a batch submitted in one call: how its children are
    /// followed (their records are made from the batch spec).
    pub(super) indexed: Option<IndexedChildren>,
    /// Some collected outcome (this process's, or one the manifest
    /// recorded) is a failure: an indexed batch then keeps its Job.
    pub(super) failed_outcome: bool,
    /// The manifest has children it has not written yet.
    pub(super) manifest_dirty: bool,
    /// Set while an attached handle still reads the manifest.
    pub(super) manifest_poll: Option<ManifestPoll>,
    pub(super) base: ManifestBase,
    /// How each collected input ended (kept in the manifest): its value
    /// or error only until a manifest write recorded it.
    pub(super) outcomes: BTreeMap<usize, Kept>,
    /// A manifest naming every submitted child and saying the submission
    /// is complete was written.
    pub(super) complete_manifest_written: bool,
    /// How many runs came before each `(input, attempt)` submitted by this
    /// process: its job's `KINETIC_ATTEMPT` numbers on from there.
    pub(super) runs_before: BTreeMap<(usize, u32), u32>,
    /// What the last manifest write took (encoding and storing): the
    /// manifest grows with the inputs, so writes are spaced by it.
    pub(super) manifest_cost: Duration,
    /// Collected inputs (and whether each succeeded) to clean up once a
    /// manifest write records their outcomes: a handle that does not
    /// submit the batch puts its writes off until it may make them
    /// ([`BatchShared::try_write_manifest`]), and nothing is cleaned
    /// before its outcome is recorded.
    pub(super) cleanup_after_write: Vec<(usize, bool)>,
    /// Children of an indexed batch seen `FAILED` in a poll whose group
    /// status names no next attempt of them: their backend runs their
    /// input no more ([`BatchShared::chain_retries`]); told to the machine
    /// with their state (`Event::ObservedLast`).
    pub(super) not_retried: BTreeSet<JobId>,
}

impl Core {
    /// Whether `job_id`, input `index`'s job, was only claimed: this
    /// handle follows it as pending from its record, was attached to a
    /// batch another process submits (no loop of its own, not one call),
    /// and the manifest does not say every input was submitted. Its
    /// backend then not holding the job does not end the input: the
    /// submitter wrote the record and either has not reached the backend
    /// yet or was killed in between (the local backend says `NOT_FOUND`
    /// for a claim whose submitter died), and a resume submits that
    /// attempt again under the same id. The input is not made unknown
    /// either: this handle may write the manifest (it records the outcomes
    /// it collects), and would drop the child the submitter named.
    fn claimed_only(&self, index: usize, job_id: &JobId) -> bool {
        self.driver == DriverState::None
            && self.indexed.is_none()
            && !self.base.submission_complete
            && matches!(
                self.machine.slot(index),
                Some(kinetic_core::batch::Slot::Active {
                    job_id: followed,
                    status: JobStatus::Pending,
                    ..
                }) if followed == job_id
            )
    }

    /// The handle of input `index`'s job (an indexed batch's child's made
    /// from its batch spec).
    pub(super) fn job(&self, index: usize) -> Option<JobHandle> {
        self.jobs.get(index, self.indexed.as_ref())
    }
}

/// How a collected input ended, as this process keeps it: the value (or
/// error) only until a manifest that records it is written; from then on
/// the stored manifest holds it and this process only that it is there.
/// So a handle over 100,000 inputs does not keep their values once
/// `results` handed them out.
#[derive(Debug, Clone)]
pub(super) enum Kept {
    /// Collected, not written in the manifest yet.
    Pending(ChildOutcome),
    /// The stored manifest records it.
    Written,
}

/// Something to do after a state change, outside the lock.
#[derive(Debug)]
pub(super) enum Chore {
    Cancel(JobHandle),
    Cleanup(JobHandle),
    /// `end_batch` of an indexed batch.
    EndBatch(Arc<dyn Backend>, BatchEnd),
}

/// Where a poll asks about jobs: their backend and namespace, and whether
/// they are children of the batch (asked about in one group call).
type Target = (String, String, bool);

/// Shared by a [`super::BatchHandle`] and its submission loop.
#[derive(Debug)]
pub(super) struct BatchShared {
    pub(super) engine: Arc<EngineInner>,
    pub(super) group_id: GroupId,
    pub(super) name: Option<String>,
    pub(super) tags: BTreeMap<String, String>,
    pub(super) total: usize,
    pub(super) poll_interval: Duration,
    pub(super) core: Mutex<Core>,
    /// Woken when the state changes (submissions, polls).
    pub(super) changed: tokio::sync::Notify,
    /// Serialises polls; holds when the last one started.
    poll_gate: tokio::sync::Mutex<Option<Instant>>,
    /// Serialises manifest writes, so that an outcome marked written is
    /// in the stored manifest every later write starts from.
    manifest_gate: tokio::sync::Mutex<()>,
    /// When this handle was made, in Unix milliseconds of the wall clock:
    /// a cancel note written since is a cancel of the batch while this
    /// handle follows it ([`BatchShared::refresh`]). Milliseconds, not the
    /// engine's clock (whole seconds): a status read in the second of a
    /// cancel is no handle that followed the batch when it was cancelled.
    opened_ms: u64,
    /// Whether this handle knows the batch's cancel note is written (it
    /// wrote it, or read it and applied the cancel): written once per
    /// cancel, not again by the indexed batch's end (`BatchHandle::cancel`
    /// writes it first) nor by a follower, whose write would move `at_ms`.
    cancel_noted: std::sync::atomic::AtomicBool,
}

impl BatchShared {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        engine: Arc<EngineInner>,
        group_id: GroupId,
        name: Option<String>,
        tags: BTreeMap<String, String>,
        machine: BatchMachine,
        poll_interval: Duration,
        base: ManifestBase,
        driver: DriverState,
    ) -> Self {
        let total = machine.total();
        Self {
            opened_ms: unix_ms(),
            engine,
            group_id,
            name,
            tags,
            total,
            poll_interval,
            core: Mutex::new(Core {
                machine,
                jobs: Jobs::new(total),
                states: vec![None; total],
                submission_errors: BTreeMap::new(),
                unavailable: BTreeMap::new(),
                cached_failures: None,
                driver,
                submit_tx: None,
                manifest_dirty: false,
                manifest_poll: None,
                base,
                outcomes: BTreeMap::new(),
                complete_manifest_written: false,
                runs_before: BTreeMap::new(),
                manifest_cost: Duration::ZERO,
                cleanup_after_write: Vec::new(),
                not_retried: BTreeSet::new(),
                indexed: None,
                failed_outcome: false,
            }),
            changed: tokio::sync::Notify::new(),
            poll_gate: tokio::sync::Mutex::new(None),
            manifest_gate: tokio::sync::Mutex::new(()),
            cancel_noted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Apply events under the lock and turn the commands into chores.
    pub(super) fn apply(&self, events: impl IntoIterator<Item = Event>) -> Vec<Chore> {
        let mut chores = Vec::new();
        {
            let mut core = self.lock();
            for event in events {
                let commands = core.machine.apply(event);
                dispatch(&mut core, commands, &mut chores);
            }
        }
        self.changed.notify_waiters();
        chores
    }

    /// The namespace the batch's children run in.
    pub(super) fn namespace(&self) -> String {
        let core = self.lock();
        core.base
            .namespace
            .clone()
            .unwrap_or_else(|| self.engine.settings.namespace.clone())
    }

    /// Carry out chores, a few at a time; failures are logged.
    pub(super) async fn run_chores(&self, chores: Vec<Chore>) {
        if chores.is_empty() {
            return;
        }
        let namespace = self.namespace();
        let group_id = &self.group_id;
        let namespace = &namespace;
        futures_util::stream::iter(chores)
            .for_each_concurrent(FAN_OUT, |chore| async move {
                match chore {
                    Chore::Cancel(job) => {
                        if let Err(e) = job.cancel().await {
                            tracing::warn!(job_id = %job.id(), "could not cancel a batch child: {e}");
                        }
                    }
                    Chore::Cleanup(job) => {
                        if let Err(e) = job
                            .cleanup(crate::CleanupOptions {
                                backend: true,
                                store: false,
                                ..crate::CleanupOptions::default()
                            })
                            .await
                        {
                            tracing::warn!(job_id = %job.id(), "could not clean up a failed attempt before its retry: {e}");
                        }
                    }
                    Chore::EndBatch(backend, end) => {
                        if end == BatchEnd::Cancel {
                            // The Job goes with its pods' states: what was
                            // stopped reads `FAILED (cancelled)` from here.
                            self.mark_cancelled().await;
                        }
                        let query = GroupQuery::new(group_id.clone(), namespace.clone());
                        if let Err(e) = backend.end_batch(&query, end, CleanupWait::default()).await {
                            tracing::warn!(group_id = %group_id, "could not stop the batch ({end:?}): {e}");
                        }
                    }
                }
            })
            .await;
    }

    /// Poll the children's states (one backend call per backend and
    /// namespace, in practice one) and feed them to the machine.
    ///
    /// With `max_age`, a poll that started less than `max_age` ago is
    /// reused; without, the poll starts after this call (concurrent callers
    /// share it).
    pub(super) async fn refresh(&self, max_age: Option<Duration>) -> Result<(), BatchError> {
        let asked = Instant::now();
        let mut gate = self.poll_gate.lock().await;
        if let Some(started) = *gate {
            let fresh = match max_age {
                Some(age) => started.elapsed() < age,
                None => started >= asked,
            };
            if fresh {
                return Ok(());
            }
        }
        *gate = Some(Instant::now());
        self.poll_manifest_if_due().await?;
        // The active jobs by where they run, by id: no handle is cloned
        // per job (a poll of 100,000 jobs would copy 100,000 records).
        let targets: Vec<(Target, Vec<(usize, JobId)>)> = {
            let core = self.lock();
            let mut targets: Vec<(Target, Vec<(usize, JobId)>)> = Vec::new();
            // An indexed batch's children share one record template: one
            // handle made from it tells where all of them run.
            let mut template: Option<JobHandle> = None;
            for (index, _) in core.machine.active_jobs() {
                let Some(job_id) = core.jobs.id(index) else {
                    continue;
                };
                let r = match core.jobs.own_record(index) {
                    Some(r) => r,
                    None => {
                        if template.is_none() {
                            template = core.job(index);
                        }
                        match template.as_ref() {
                            Some(t) => t.record(),
                            None => continue,
                        }
                    }
                };
                let child = r.group_id.as_ref() == Some(&self.group_id);
                let at = targets.iter().position(|((backend, namespace, c), _)| {
                    *backend == r.backend && *namespace == r.namespace && *c == child
                });
                let at = at.unwrap_or_else(|| {
                    targets.push(((r.backend.clone(), r.namespace.clone(), child), Vec::new()));
                    targets.len() - 1
                });
                targets[at].1.push((index, job_id));
            }
            // A handle still reading the manifest asks for the group even
            // when none of the children it follows is active: the poll
            // finds the ones the submitter started since.
            if !targets.iter().any(|((_, _, children), _)| *children)
                && let Some(backend) = core.base.backend.clone()
                && core.manifest_poll.is_some()
                && core.indexed.is_none()
                && !core.machine.is_indexed()
                && core.machine.counts().unknown > 0
            {
                let namespace = core
                    .base
                    .namespace
                    .clone()
                    .unwrap_or_else(|| self.engine.settings.namespace.clone());
                targets.push(((backend, namespace, true), Vec::new()));
            }
            targets
        };
        if targets.is_empty() {
            return Ok(());
        }
        let observed = self.observe(targets).await?;
        if self.cancelled_elsewhere(&observed).await {
            // Another handle cancelled the batch (`kinetic batch cancel`
            // from another process): stop this one too before the states
            // are told, so that the cancelled children free no room for
            // the inputs not submitted yet, which would start after the
            // cancel with nobody to stop them.
            let chores = self.apply([Event::Cancel]);
            self.run_chores(chores).await;
        }
        let chores = self.record_states(observed);
        drop(gate);
        self.run_chores(chores).await;
        Ok(())
    }

    /// Store the states seen and tell the machine.
    pub(super) fn record_states(&self, observed: Vec<(usize, JobId, JobState)>) -> Vec<Chore> {
        let mut chores = Vec::new();
        {
            let mut core = self.lock();
            for (index, job_id, state) in observed {
                if state.status == JobStatus::NotFound && core.claimed_only(index, &job_id) {
                    // Not an end: followed on as pending (a resume takes
                    // it back to unknown and submits it, `reconcile`).
                    continue;
                }
                if core.jobs.is(index, &job_id) {
                    core.states[index] = Some(state.clone());
                }
                let (status, last) = (state.status, core.not_retried.remove(&job_id));
                let commands = core.machine.apply(if last {
                    Event::ObservedLast {
                        index,
                        job_id,
                        status,
                    }
                } else {
                    Event::Observed {
                        index,
                        job_id,
                        status,
                    }
                });
                dispatch(&mut core, commands, &mut chores);
            }
        }
        self.changed.notify_waiters();
        chores
    }

    /// The states of the jobs of each target: one group call per
    /// (backend, namespace), or one call per job for a backend without
    /// group status.
    async fn observe(
        &self,
        targets: Vec<(Target, Vec<(usize, JobId)>)>,
    ) -> Result<Vec<(usize, JobId, JobState)>, BatchError> {
        // A group call finds the children of this group: a job of another
        // (or of none; a batch built from jobs, `Engine::batch_of`) is asked
        // about on its own.
        let mut out = Vec::new();
        for ((backend_name, namespace, children), entries) in targets {
            let backend = self
                .engine
                .backends
                .get(&backend_name)
                .map_err(EngineError::from)?;
            // The backend's capabilities choose one group call or one call per job.
            if children && backend.capabilities().group_status {
                let query = GroupQuery::new(self.group_id.clone(), namespace);
                let mut map = backend.group_status(&query).await?;
                let mut states: Vec<(usize, JobId, JobState)> = entries
                    .into_iter()
                    .map(|(i, id)| {
                        let state = map
                            .remove(&id)
                            .unwrap_or_else(|| JobState::new(JobStatus::NotFound));
                        (i, id, state)
                    })
                    .collect();
                if self.lock().machine.is_indexed() {
                    self.chain_retries(&mut states, &mut map);
                }
                let newcomers = self.unfollowed_children(&map);
                drop(map);
                self.keep_children_attempts(&states).await;
                out.extend(states);
                if !newcomers.is_empty() {
                    self.adopt_children(&newcomers).await;
                }
            } else {
                let owned: Vec<(usize, JobHandle)> = {
                    let core = self.lock();
                    entries
                        .iter()
                        .filter(|(i, id)| core.jobs.is(*i, id))
                        .filter_map(|(i, _)| core.job(*i).map(|h| (*i, h)))
                        .collect()
                };
                let states: Vec<(usize, JobId, JobState)> = futures_util::stream::iter(owned)
                    .map(per_job_status)
                    .buffer_unordered(FAN_OUT)
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .collect::<Result<_, _>>()?;
                out.extend(states);
            }
        }
        self.settle_vanished(&mut out).await;
        Ok(out)
    }

    /// The children a group poll found that this handle does not follow
    /// yet, for a handle attached while the batch is still being
    /// submitted (it reads the manifest): followed from the poll that
    /// finds them, not from the next read of the manifest, which names
    /// them only every `manifest_poll_interval` (10 s). The latest
    /// attempt of each input is adopted ([`Self::adopt_children`]).
    fn unfollowed_children(&self, held: &kinetic_core::ports::GroupStatus) -> Vec<ManifestChild> {
        let core = self.lock();
        // An indexed batch's children are followed from its batch spec
        // (their records are written only once their pods run), even
        // before that spec is read.
        if core.manifest_poll.is_none()
            || core.indexed.is_some()
            || core.machine.is_indexed()
            || core.machine.counts().unknown == 0
        {
            return Vec::new();
        }
        held.iter()
            .filter(|(_, state)| state.status != JobStatus::NotFound)
            .filter_map(|(job_id, _)| {
                let (index, attempt) = child_position(&self.group_id, job_id, self.total)?;
                (core.machine.slot(index) == Some(&kinetic_core::batch::Slot::Unknown))
                    .then(|| ManifestChild::new(index, job_id.clone(), attempt))
            })
            .collect()
    }

    /// Keep each child's attempts a group poll saw in its
    /// `{job_id}/attempts.json`, as a single job's own polls do
    /// ([`JobHandle::status`]; the per-job fallback goes through it), so
    /// that the history outlives the backend's objects. Each handle writes
    /// only when its attempts changed; only the handles of children with
    /// attempts are taken.
    async fn keep_children_attempts(&self, states: &[(usize, JobId, JobState)]) {
        let with_attempts: Vec<(JobHandle, &JobState)> = {
            let core = self.lock();
            states
                .iter()
                .filter(|(_, _, state)| !state.attempts.is_empty())
                .filter(|(i, id, _)| core.jobs.is(*i, id))
                .filter_map(|(i, _, state)| core.job(*i).map(|h| (h, state)))
                .collect()
        };
        futures_util::stream::iter(with_attempts)
            .for_each_concurrent(FAN_OUT, |(handle, state)| async move {
                handle.keep_attempts(state).await;
            })
            .await;
    }

    /// A job the backend no longer holds but whose result is stored has
    /// ended: take the result's word for how.
    async fn settle_vanished(&self, observed: &mut [(usize, JobId, JobState)]) {
        let vanished: Vec<usize> = observed
            .iter()
            .enumerate()
            .filter(|(_, (_, _, s))| s.status == JobStatus::NotFound)
            .map(|(pos, _)| pos)
            .collect();
        let probes: Vec<(usize, JobId, Arc<EngineInner>)> = vanished
            .into_iter()
            .map(|pos| (pos, observed[pos].1.clone(), self.engine.clone()))
            .collect();
        let settled: Vec<(usize, Option<JobStatus>)> = futures_util::stream::iter(probes)
            .map(stored_outcome)
            .buffer_unordered(FAN_OUT)
            .collect()
            .await;
        let mut unsettled = Vec::new();
        for (pos, status) in settled {
            match status {
                Some(status) => observed[pos].2 = JobState::new(status),
                None => unsettled.push(pos),
            }
        }
        // An indexed batch's children vanish with its Job when the batch
        // is cancelled: one ended without a result was stopped.
        if !unsettled.is_empty() && self.lock().indexed.is_some() && self.was_cancelled().await {
            for pos in unsettled {
                observed[pos].2 =
                    JobState::new(JobStatus::Failed).with_reason(StatusReason::Cancelled);
            }
        }
    }

    /// `_groups/{group_id}/cancelled.json` (`{"at": time, "at_ms": Unix
    /// milliseconds}`): written before a batch is cancelled (and before an
    /// indexed batch's Job is deleted at its backend).
    fn cancel_note(&self) -> Option<kinetic_core::ports::ObjectPath> {
        layout::group_file(&self.group_id, CANCEL_NOTE).ok()
    }

    /// Leave the cancel note (see [`BatchShared::cancel_note`]), unless
    /// this handle knows it is there: every handle following the batch
    /// stops submitting once it reads a child this cancel stopped.
    pub(super) async fn mark_cancelled(&self) {
        use std::sync::atomic::Ordering;
        if self.cancel_noted.load(Ordering::Acquire) {
            return;
        }
        let Some(path) = self.cancel_note() else {
            return;
        };
        let note = serde_json::json!({
            "at": (self.engine.clock)().to_string(),
            "at_ms": unix_ms(),
        });
        match self.engine.store.put_json(&path, note.to_string()).await {
            Ok(()) => self.cancel_noted.store(true, Ordering::Release),
            Err(e) => {
                tracing::warn!(group_id = %self.group_id, "could not record the batch's cancel: {e}")
            }
        }
    }

    /// True when `observed` holds a child cancelled while this handle's
    /// machine was not, and the batch's cancel note was written since this
    /// handle was made: the batch was cancelled by another handle. (A child
    /// cancelled on its own leaves no note; a cancel before a resume is
    /// older than the resuming handle.)
    async fn cancelled_elsewhere(&self, observed: &[(usize, JobId, JobState)]) -> bool {
        if !observed
            .iter()
            .any(|(_, _, s)| s.reason == Some(StatusReason::Cancelled))
            || self.lock().machine.is_cancelled()
        {
            return false;
        }
        let Some(path) = self.cancel_note() else {
            return false;
        };
        let since = match self.engine.store.get_if_exists(&path).await {
            Ok(Some(bytes)) => cancelled_since(&bytes, self.opened_ms),
            _ => false,
        };
        if since {
            self.cancel_noted
                .store(true, std::sync::atomic::Ordering::Release);
        }
        since
    }

    async fn was_cancelled(&self) -> bool {
        match self.cancel_note() {
            Some(path) => self.engine.store.exists(&path).await.unwrap_or(false),
            None => false,
        }
    }

    /// The manifest as it should be written now.
    pub(super) fn manifest_snapshot(&self) -> GroupManifest {
        let core = self.lock();
        let base = &core.base;
        let mut m = GroupManifest::new(
            self.group_id.clone(),
            self.total,
            &base.submit_fn_name,
            base.created_at,
        );
        m.group_name = self.name.clone();
        m.tags = self.tags.clone();
        m.backend = base.backend.clone();
        m.namespace = base.namespace.clone();
        m.entrypoint = base.entrypoint.clone();
        m.input_mode = base.input_mode;
        m.inputs = base.inputs.clone();
        m.resume = base.resume.clone();
        // Complete once the submitting loop submitted everything (or the
        // manifest said so already).
        let submitting = matches!(core.driver, DriverState::Running | DriverState::Finished);
        m.submission_complete =
            base.submission_complete || (submitting && core.machine.is_submission_complete());
        // Sized once: grown by doubling, the children of 100,000 inputs
        // would hold twice their size while they are copied.
        m.children = Vec::with_capacity(core.machine.children_bound());
        m.children.extend(
            core.machine
                .children()
                .map(|(group_index, job_id, attempts)| {
                    let mut child = ManifestChild::new(group_index, job_id.clone(), attempts);
                    // A written outcome is filled in from the stored manifest
                    // when this snapshot is written (`write_manifest`).
                    child.outcome = match core.outcomes.get(&group_index) {
                        Some(Kept::Pending(outcome)) => Some(outcome.clone()),
                        _ => None,
                    };
                    child
                }),
        );
        m
    }

    /// Write the manifest; false when it could not be (logged: the
    /// children's records and the backend's group listing still find every
    /// child, and the writer tries again).
    pub(super) async fn write_manifest(&self, manifest: GroupManifest) -> bool {
        match self.try_write_manifest(manifest).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(group_id = %self.group_id, "could not write the batch manifest: {e}");
                false
            }
        }
    }

    /// Write the manifest (a [`BatchShared::manifest_snapshot`]): the
    /// outcomes written before are taken from the stored manifest, and
    /// the ones it records for the first time are no longer held here
    /// once it is written. Returns whether it was written: a handle that
    /// does not submit the batch (attached, no resume) writes only once it
    /// knows a child for every input or the manifest said every input was
    /// submitted, and merges what the stored manifest has that it lacks
    /// ([`GroupManifest::merge_stored`]); before, the submitter may name
    /// children it has not read yet, and its write would drop them.
    pub(super) async fn try_write_manifest(
        &self,
        mut manifest: GroupManifest,
    ) -> Result<bool, BatchError> {
        let _gate = self.manifest_gate.lock().await;
        // The cost counts reading back the outcomes let go, too.
        let started = Instant::now();
        let (follower, knows_all) = {
            let core = self.lock();
            (
                core.driver == DriverState::None,
                core.base.submission_complete || core.machine.counts().unknown == 0,
            )
        };
        if follower {
            if !knows_all {
                return Ok(false);
            }
            // A batch made of jobs (`Engine::batch_of`) has none stored yet.
            match self.read_manifest().await {
                Ok(stored) => manifest.merge_stored(stored),
                Err(BatchError::GroupNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.fill_written_outcomes(&mut manifest).await?;
        let path = layout::group_manifest(&self.group_id);
        let complete = manifest.submission_complete;
        let recorded: Vec<usize> = manifest
            .children
            .iter()
            .filter(|c| c.outcome.is_some())
            .map(|c| c.group_index)
            .collect();
        self.engine
            .store
            .put_json(&path, manifest.to_json())
            .await?;
        drop(manifest);
        {
            let mut core = self.lock();
            core.manifest_cost = started.elapsed();
            for index in recorded {
                if let Some(kept) = core.outcomes.get_mut(&index) {
                    *kept = Kept::Written;
                }
            }
            if complete {
                core.complete_manifest_written = true;
                // A handle that does not submit learns it from the merge.
                core.base.submission_complete = true;
            }
        }
        if complete {
            self.changed.notify_waiters();
        }
        Ok(true)
    }

    /// Give the children whose outcome an earlier write recorded (and this
    /// process no longer holds) the outcome the stored manifest has.
    async fn fill_written_outcomes(&self, manifest: &mut GroupManifest) -> Result<(), BatchError> {
        let missing: Vec<usize> = {
            let core = self.lock();
            manifest
                .children
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.outcome.is_none()
                        && matches!(core.outcomes.get(&c.group_index), Some(Kept::Written))
                })
                .map(|(pos, _)| pos)
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let mut stored = self.recorded_outcomes().await?;
        for pos in missing {
            let child = &mut manifest.children[pos];
            child.outcome = stored.remove(&child.group_index);
            if child.outcome.is_none() {
                tracing::warn!(group_id = %self.group_id, "the stored manifest lost the outcome of input {}: it is collected again from its job", child.group_index);
                self.lock().outcomes.remove(&child.group_index);
            }
        }
        Ok(())
    }

    /// The outcomes the stored manifest records, by input (read without
    /// the rest of the document: [`kinetic_core::batch::recorded_outcomes`]).
    pub(super) async fn recorded_outcomes(
        &self,
    ) -> Result<BTreeMap<usize, ChildOutcome>, BatchError> {
        let path = layout::group_manifest(&self.group_id);
        let uri = self.engine.store.uri(&path);
        let Some(bytes) = self.engine.store.get_if_exists(&path).await? else {
            return Err(BatchError::GroupNotFound {
                group_id: self.group_id.to_string(),
                uri,
            });
        };
        kinetic_core::batch::recorded_outcomes(&bytes, &self.group_id).map_err(|e| {
            BatchError::InvalidManifest {
                group_id: self.group_id.clone(),
                uri,
                message: e.to_string(),
            }
        })
    }

    /// The shortest time between two manifest writes: `interval`, or ten
    /// times what the last write took when that is longer, so that
    /// rewriting a large manifest (its children grow with the inputs)
    /// takes at most a tenth of the time.
    pub(super) fn manifest_spacing(&self, interval: Duration) -> Duration {
        interval.max(self.lock().manifest_cost.saturating_mul(10))
    }

    /// How many collected values (or errors) this process holds: those no
    /// manifest write recorded yet.
    pub(super) fn outcomes_held(&self) -> usize {
        self.lock()
            .outcomes
            .values()
            .filter(|k| matches!(k, Kept::Pending(_)))
            .count()
    }

    /// Read the manifest (for an attached batch still being submitted).
    pub(super) async fn read_manifest(&self) -> Result<GroupManifest, BatchError> {
        read_manifest(&self.engine, &self.group_id).await
    }

    async fn poll_manifest_if_due(&self) -> Result<(), BatchError> {
        let due = {
            let core = self.lock();
            match core.manifest_poll {
                Some(p) => Instant::now() >= p.next,
                None => false,
            }
        };
        if !due {
            return Ok(());
        }
        let manifest = self.read_manifest().await?;
        self.adopt_children(&manifest.children).await;
        let mut core = self.lock();
        core.base.submission_complete |= manifest.submission_complete;
        let now = Instant::now();
        let complete = core.machine.counts().unknown == 0;
        let expired = core
            .manifest_poll
            .and_then(|p| p.deadline)
            .is_some_and(|d| now >= d);
        if complete || expired {
            core.manifest_poll = None;
            if expired {
                let commands = core.machine.apply(Event::CloseManifest);
                dispatch(&mut core, commands, &mut Vec::new());
            }
        } else if let Some(p) = core.manifest_poll.as_mut() {
            p.next = now + p.interval;
        }
        drop(core);
        self.changed.notify_waiters();
        Ok(())
    }

    /// An indexed batch's backend retries an input itself, each attempt
    /// its own child: after a child seen `FAILED` comes its next attempt's,
    /// which the machine follows next. When this poll's `map` holds it
    /// already, its state is observed in the same poll (and the next one's
    /// after it, while they failed): a process that polls once (`kinetic
    /// batch status`) would otherwise read the retried input `PENDING` for
    /// ever, following the attempt it learned of from the manifest.
    ///
    /// And the backend names the next attempt's child (`PENDING`) in the
    /// same read whenever it runs the input again: a child seen `FAILED`
    /// whose next attempt it does not name (its Job failed, its block can
    /// run nothing more, the runner's bad invocation) ends its input with
    /// its own error, instead of one that never comes (`NOT_FOUND`).
    fn chain_retries(&self, states: &mut Vec<(usize, JobId, JobState)>, map: &mut GroupStatus) {
        let mut chained = Vec::new();
        let mut last = Vec::new();
        for (index, id, state) in states.iter() {
            if state.status != JobStatus::Failed {
                continue;
            }
            let Some((_, mut attempt)) = child_position(&self.group_id, id, self.total) else {
                continue;
            };
            let mut failed = id.clone();
            loop {
                let next_id = child_job_id(&self.group_id, *index, attempt + 1);
                let Some(next) = map.remove(&next_id) else {
                    last.push(failed);
                    break;
                };
                attempt += 1;
                let still_failed = next.status == JobStatus::Failed;
                chained.push((*index, next_id.clone(), next));
                if !still_failed {
                    break;
                }
                failed = next_id;
            }
        }
        states.extend(chained);
        self.lock().not_retried.extend(last);
    }

    /// Load the records of children not followed yet (the slot is unknown)
    /// and follow them; children whose record cannot be read are marked
    /// unavailable. Returns how many were adopted.
    pub(super) async fn adopt_children(&self, children: &[ManifestChild]) -> usize {
        let wanted: Vec<ManifestChild> = {
            let core = self.lock();
            let mut best: BTreeMap<usize, ManifestChild> = BTreeMap::new();
            for c in children {
                if c.group_index >= self.total
                    || core.machine.slot(c.group_index) != Some(&kinetic_core::batch::Slot::Unknown)
                {
                    continue;
                }
                let better = best
                    .get(&c.group_index)
                    .is_none_or(|b| c.attempts > b.attempts);
                if better {
                    best.insert(c.group_index, c.clone());
                }
            }
            best.into_values().collect()
        };
        // A child whose outcome was recorded at collection reads as
        // recorded; one whose job was cleaned up since is settled without
        // loading its record.
        {
            let mut core = self.lock();
            for c in &wanted {
                // The stored manifest holds it: keep only that it does.
                if let Some(outcome) = &c.outcome {
                    core.failed_outcome |= matches!(outcome, ChildOutcome::Failed { .. });
                    core.outcomes.insert(c.group_index, Kept::Written);
                }
            }
        }
        let (recorded, wanted): (Vec<ManifestChild>, Vec<ManifestChild>) = wanted
            .into_iter()
            .partition(|c| c.outcome.as_ref().is_some_and(ChildOutcome::cleaned));
        let mut adopted = recorded.len();
        if !recorded.is_empty() {
            let mut core = self.lock();
            let mut chores = Vec::new();
            for child in recorded {
                let index = child.group_index;
                let status = match child.outcome {
                    Some(ChildOutcome::Succeeded { .. }) => JobStatus::Succeeded,
                    _ => JobStatus::Failed,
                };
                core.states[index] = Some(JobState::new(status));
                for event in [
                    Event::Adopt {
                        index,
                        job_id: child.job_id.clone(),
                        attempts: child.attempts,
                    },
                    Event::Observed {
                        index,
                        job_id: child.job_id,
                        status,
                    },
                ] {
                    let commands = core.machine.apply(event);
                    dispatch(&mut core, commands, &mut chores);
                }
            }
        }
        if wanted.is_empty() {
            self.changed.notify_waiters();
            return adopted;
        }
        let indexed = self.lock().indexed.clone();
        // `Ok(None)`: an indexed batch's child, followed from the batch
        // spec (its pod writes its record only once it runs).
        let loaded: Vec<(ManifestChild, Result<Option<JobHandle>, EngineError>)> = match indexed {
            Some(_) => wanted.into_iter().map(|c| (c, Ok(None))).collect(),
            None => {
                let loads: Vec<(ManifestChild, Arc<EngineInner>, GroupId)> = wanted
                    .into_iter()
                    .map(|c| (c, self.engine.clone(), self.group_id.clone()))
                    .collect();
                futures_util::stream::iter(loads)
                    .map(load_child)
                    .buffer_unordered(FAN_OUT)
                    .map(|(c, handle)| (c, handle.map(Some)))
                    .collect()
                    .await
            }
        };
        let mut chores = Vec::new();
        {
            let mut core = self.lock();
            for (child, handle) in loaded {
                let index = child.group_index;
                match handle {
                    Ok(handle) => {
                        match handle {
                            Some(handle) => core.jobs.set(index, handle),
                            None => core.jobs.set_child(index, &child.job_id),
                        }
                        let commands = core.machine.apply(Event::Adopt {
                            index,
                            job_id: child.job_id,
                            attempts: child.attempts,
                        });
                        dispatch(&mut core, commands, &mut chores);
                        adopted += 1;
                    }
                    Err(e) => {
                        tracing::warn!(group_id = %self.group_id, job_id = %child.job_id, "batch child {index} cannot be loaded: {e}");
                        core.unavailable.insert(index, child.job_id);
                        let commands = core.machine.apply(Event::Unavailable { index });
                        dispatch(&mut core, commands, &mut chores);
                    }
                }
            }
        }
        self.changed.notify_waiters();
        self.run_chores(chores).await;
        adopted
    }

    /// Ask the backend for the group's jobs (one call) and adopt those the
    /// manifest did not name; feed the states it gave. `backend` and
    /// `namespace` say where the children run.
    ///
    /// With `forget_absent` (a resume), an input followed as pending whose
    /// job the backend does not hold goes back to unknown
    /// ([`Event::Forget`]), so that the resume probes it: its submission
    /// never reached the backend (its process was killed in between), and
    /// waiting on it would wait forever.
    pub(super) async fn reconcile(
        &self,
        backend: &str,
        namespace: &str,
        forget_absent: bool,
    ) -> Result<(), BatchError> {
        let Ok(backend) = self.engine.backends.get(backend) else {
            return Ok(());
        };
        if !backend.capabilities().group_status {
            // Children the manifest does not name cannot be found without it.
            return Ok(());
        }
        let query = GroupQuery::new(self.group_id.clone(), namespace);
        let map = backend.group_status(&query).await?;
        let mut found = Vec::new();
        for (job_id, state) in &map {
            if state.status == JobStatus::NotFound {
                // Listed but not held (a local claim whose submitter died
                // before starting it): nothing to follow.
                continue;
            }
            if let Some((index, attempt)) = child_position(&self.group_id, job_id, self.total) {
                found.push(ManifestChild::new(index, job_id.clone(), attempt));
            }
        }
        self.adopt_children(&found).await;
        if forget_absent {
            let mut core = self.lock();
            let absent: Vec<usize> = (0..core.jobs.len())
                .filter(|&i| {
                    core.jobs.id(i).is_some_and(|id| {
                        map.get(&id)
                            .is_none_or(|state| state.status == JobStatus::NotFound)
                    })
                })
                .collect();
            for index in absent {
                let _ = core.machine.apply(Event::Forget { index });
            }
        }
        let observed: Vec<(usize, JobId, JobState)> = {
            let core = self.lock();
            map.into_iter()
                .filter_map(|(job_id, state)| {
                    let (index, _) = child_position(&self.group_id, &job_id, self.total)?;
                    core.jobs
                        .is(index, &job_id)
                        .then_some((index, job_id, state))
                })
                .collect()
        };
        let chores = self.record_states(observed);
        self.run_chores(chores).await;
        Ok(())
    }

    /// The inputs not known yet (no job followed, none queued).
    pub(super) fn unknown_slots(&self) -> Vec<usize> {
        let core = self.lock();
        core.machine
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == kinetic_core::batch::Slot::Unknown)
            .map(|(i, _)| i)
            .collect()
    }

    /// How many runs came before attempt `attempt` of input `index` (0
    /// for its first), remembered for the attempt after it: the runs of
    /// the input's latest job (at least one; more when its own failure
    /// budgets ran it again) on top of the runs before that job. A job
    /// adopted from the manifest (a resumed batch) had, as far as this
    /// process knows, one run per earlier attempt before it.
    pub(super) fn runs_before(&self, index: usize, attempt: u32) -> u32 {
        if attempt <= 1 {
            return 0;
        }
        let mut core = self.lock();
        let previous = core.jobs.id(index).and_then(|job_id| {
            child_position(&self.group_id, &job_id, self.total)
                .filter(|(_, a)| *a < attempt)
                .map(|(_, a)| a)
        });
        let runs = previous.map_or(0, |job_attempt| {
            let runs = core.states[index].as_ref().map_or(1, |s| {
                u32::try_from(s.attempts.len()).unwrap_or(u32::MAX).max(1)
            });
            let before = core
                .runs_before
                .get(&(index, job_attempt))
                .copied()
                .unwrap_or(job_attempt - 1);
            before.saturating_add(runs)
        });
        core.runs_before.insert((index, attempt), runs);
        runs
    }

    /// Every job id this batch used for `index` (all attempts up to the current).
    pub(super) fn attempt_ids(&self, index: usize) -> Vec<JobId> {
        let core = self.lock();
        let last = core.machine.last_job(index).map_or(0, |(_, a)| *a);
        (1..last)
            .map(|a| child_job_id(&self.group_id, index, a))
            .collect()
    }
}

/// Turn commands into chores, `Submit`s into messages for the loop, and
/// manifest changes into the dirty flag. Called under the lock.
pub(super) fn dispatch(core: &mut Core, commands: Vec<Command>, chores: &mut Vec<Chore>) {
    for command in commands {
        match command {
            Command::Submit { index, attempt } => {
                let sent = core
                    .submit_tx
                    .as_ref()
                    .is_some_and(|tx| tx.send(Order::One(index, attempt)).is_ok());
                if !sent {
                    // Only a running loop can be asked to submit; the machine
                    // asks only while one must run. Should it happen anyway,
                    // the input fails instead of waiting forever.
                    core.submission_errors.insert(
                        index,
                        Arc::new(EngineError::internal(
                            "no submission loop is running for this batch",
                        )),
                    );
                    let more = core.machine.apply(Event::SubmitFailed {
                        index,
                        retryable: false,
                    });
                    dispatch(core, more, chores);
                }
            }
            Command::Cancel { index, .. } => {
                if let Some(job) = core.job(index) {
                    chores.push(Chore::Cancel(job));
                }
            }
            Command::Cleanup { index, job_id } => {
                if core.jobs.is(index, &job_id)
                    && let Some(job) = core.job(index)
                {
                    chores.push(Chore::Cleanup(job));
                }
            }
            Command::RecordChild { index, job_id, .. } => {
                core.manifest_dirty = true;
                // An indexed batch's child (a first attempt, or the retry
                // the backend started): followed from the batch spec.
                if !core.jobs.is(index, &job_id) && core.indexed.is_some() {
                    core.jobs.set_child(index, &job_id);
                    core.states[index] = Some(JobState::new(JobStatus::Pending));
                }
            }
            Command::SubmitBatch => {
                let sent = core
                    .submit_tx
                    .as_ref()
                    .is_some_and(|tx| tx.send(Order::Batch).is_ok());
                if !sent {
                    let more = core
                        .machine
                        .apply(Event::BatchSubmitFailed { retryable: false });
                    dispatch(core, more, chores);
                }
            }
            Command::StopBatch { cancel_running } => {
                if let Some(children) = core.indexed.as_ref() {
                    let end = if cancel_running {
                        BatchEnd::Cancel
                    } else {
                        BatchEnd::StopStarting
                    };
                    chores.push(Chore::EndBatch(children.backend().clone(), end));
                }
            }
        }
    }
}

async fn per_job_status(
    (index, job): (usize, JobHandle),
) -> Result<(usize, JobId, JobState), EngineError> {
    let state = job.status().await?;
    Ok((index, job.id().clone(), state))
}

/// How a vanished job ended, by its stored result (if any).
async fn stored_outcome(
    (pos, job_id, engine): (usize, JobId, Arc<EngineInner>),
) -> (usize, Option<JobStatus>) {
    let store = &engine.store;
    let status = match store
        .get(&layout::result(&job_id), GetOptions::default())
        .await
    {
        Ok(bytes) => RunnerResult::from_json(&bytes).ok().map(|r| {
            if r.success {
                JobStatus::Succeeded
            } else {
                JobStatus::Failed
            }
        }),
        Err(_) => None,
    };
    (pos, status)
}

async fn load_child(
    (child, engine, group_id): (ManifestChild, Arc<EngineInner>, GroupId),
) -> (ManifestChild, Result<JobHandle, EngineError>) {
    let handle = load_handle(&engine, &child.job_id)
        .await
        .and_then(|handle| {
            // A child's record must say it belongs to this batch.
            handle
                .record()
                .check_group(&group_id)
                .map_err(|e| EngineError::InvalidResult {
                    job_id: child.job_id.to_string(),
                    uri: engine.store.uri(&layout::record(&child.job_id)),
                    message: e.to_string(),
                })?;
            Ok(handle)
        });
    (child, handle)
}

/// Where `job_id` sits in the batch: `(index, attempt)`, when it is one of
/// this group's child ids for an index below `total`.
pub(super) fn child_position(
    group_id: &GroupId,
    job_id: &JobId,
    total: usize,
) -> Option<(usize, u32)> {
    kinetic_core::batch::child_position(group_id, job_id).filter(|(i, _)| *i < total)
}

/// Read and parse a batch's manifest.
pub(super) async fn read_manifest(
    inner: &Arc<EngineInner>,
    group_id: &GroupId,
) -> Result<GroupManifest, BatchError> {
    let path = layout::group_manifest(group_id);
    let uri = inner.store.uri(&path);
    let Some(bytes) = inner.store.get_if_exists(&path).await? else {
        return Err(BatchError::GroupNotFound {
            group_id: group_id.to_string(),
            uri,
        });
    };
    let (manifest, warnings) = GroupManifest::from_json_bytes(&bytes, group_id).map_err(|e| {
        BatchError::InvalidManifest {
            group_id: group_id.clone(),
            uri: uri.clone(),
            message: e.to_string(),
        }
    })?;
    for w in warnings {
        tracing::warn!(group_id = %group_id, "{w}");
    }
    Ok(manifest)
}

/// Unix milliseconds of the wall clock now.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Whether the cancel note `bytes` was written at or after `opened_ms`. A
/// note without `at_ms` (an older version's, whose time is whole seconds)
/// cannot tell, and counts as older.
fn cancelled_since(bytes: &[u8], opened_ms: u64) -> bool {
    #[derive(serde::Deserialize)]
    struct Note {
        at_ms: Option<u64>,
    }
    serde_json::from_slice::<Note>(bytes)
        .ok()
        .and_then(|note| note.at_ms)
        .is_some_and(|at| at >= opened_ms)
}

#[cfg(test)]
mod tests {
    use super::cancelled_since;

    #[test]
    fn a_cancel_note_counts_from_the_millisecond_the_handle_was_made() {
        // 1_795_855_248_400: 400 ms into a second.
        let opened = 1_795_855_248_400;
        let note = |ms: u64| format!(r#"{{"at":"2026-11-28T08:40:48Z","at_ms":{ms}}}"#);
        assert!(cancelled_since(note(opened + 300).as_bytes(), opened));
        assert!(cancelled_since(note(opened).as_bytes(), opened));
        // Earlier in the same second: a cancel before this handle (a
        // status read just after `kinetic batch cancel`).
        assert!(!cancelled_since(note(opened - 200).as_bytes(), opened));
        // An older version's note tells only the second.
        assert!(!cancelled_since(
            br#"{"at":"2026-11-28T08:40:48Z"}"#,
            opened
        ));
        assert!(!cancelled_since(b"not json", opened));
    }
}
